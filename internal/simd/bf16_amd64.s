//go:build amd64

#include "textflag.h"

// func axpyF32AVX2(w float32, x, acc []float32)
TEXT ·axpyF32AVX2(SB), NOSPLIT, $0-56
	VBROADCASTSS w+0(FP), Y0
	MOVQ x_base+8(FP), SI
	MOVQ x_len+16(FP), CX
	MOVQ acc_base+32(FP), DI
	SHRQ $3, CX
	JZ   axpyf32done

axpyf32loop:
	VMOVUPS (SI), Y1
	VMULPS  Y1, Y0, Y1 // w*x, rounded
	VMOVUPS (DI), Y2
	VADDPS  Y2, Y1, Y2 // w*x + acc, rounded
	VMOVUPS Y2, (DI)
	ADDQ    $32, SI
	ADDQ    $32, DI
	DECQ    CX
	JNZ     axpyf32loop

axpyf32done:
	VZEROUPPER
	RET

// func axpyBF16AVX2(w float32, x []BF16, acc []float32)
TEXT ·axpyBF16AVX2(SB), NOSPLIT, $0-56
	VBROADCASTSS w+0(FP), Y0
	MOVQ x_base+8(FP), SI
	MOVQ x_len+16(FP), CX
	MOVQ acc_base+32(FP), DI
	SHRQ $3, CX
	JZ   axpybf16done

axpybf16loop:
	VPMOVZXWD (SI), Y1  // eight bf16, widened to 32 bits
	VPSLLD    $16, Y1, Y1 // their float32 bits
	VMULPS    Y1, Y0, Y1
	VMOVUPS   (DI), Y2
	VADDPS    Y2, Y1, Y2
	VMOVUPS   Y2, (DI)
	ADDQ      $16, SI
	ADDQ      $32, DI
	DECQ      CX
	JNZ       axpybf16loop

axpybf16done:
	VZEROUPPER
	RET

// func addBF16AVX2(x []BF16, acc []float32)
TEXT ·addBF16AVX2(SB), NOSPLIT, $0-48
	MOVQ x_base+0(FP), SI
	MOVQ x_len+8(FP), CX
	MOVQ acc_base+24(FP), DI
	SHRQ $3, CX
	JZ   addbf16done

addbf16loop:
	VPMOVZXWD (SI), Y1
	VPSLLD    $16, Y1, Y1
	VMOVUPS   (DI), Y2
	VADDPS    Y2, Y1, Y2
	VMOVUPS   Y2, (DI)
	ADDQ      $16, SI
	ADDQ      $32, DI
	DECQ      CX
	JNZ       addbf16loop

addbf16done:
	VZEROUPPER
	RET

// func encodeBF16AVX2(f []float32, out []BF16)
// shmem.BFloat16From on eight lanes: u + 0x7fff + (u>>16)&1, the top half; a NaN (|u| > 0x7f800000)
// becomes u>>16 | 0x40.
TEXT ·encodeBF16AVX2(SB), NOSPLIT, $0-48
	MOVQ f_base+0(FP), SI
	MOVQ f_len+8(FP), CX
	MOVQ out_base+24(FP), DI
	MOVL $1, AX
	MOVD AX, X8
	VPBROADCASTD X8, Y8 // 1
	MOVL $0x7fff, AX
	MOVD AX, X9
	VPBROADCASTD X9, Y9 // rounding bias
	MOVL $0x7fffffff, AX
	MOVD AX, X10
	VPBROADCASTD X10, Y10 // |.| mask
	MOVL $0x7f800000, AX
	MOVD AX, X11
	VPBROADCASTD X11, Y11 // +Inf
	MOVL $0x40, AX
	MOVD AX, X12
	VPBROADCASTD X12, Y12 // quiet bit of a bf16 NaN
	SHRQ $3, CX
	JZ   encodedone

encodeloop:
	VMOVDQU      (SI), Y1
	VPSRLD       $16, Y1, Y2   // u>>16
	VPAND        Y8, Y2, Y3    // its lowest bit
	VPADDD       Y9, Y1, Y4    // u + 0x7fff
	VPADDD       Y3, Y4, Y4    // + that bit
	VPSRLD       $16, Y4, Y4   // rounded to nearest even
	VPOR         Y12, Y2, Y5   // the NaN result
	VPAND        Y10, Y1, Y6   // |u|
	VPCMPGTD     Y11, Y6, Y6   // |u| > +Inf: NaN
	VPBLENDVB    Y6, Y5, Y4, Y4
	VEXTRACTI128 $1, Y4, X7
	VPACKUSDW    X7, X4, X4    // the eight 16-bit results, in order
	VMOVDQU      X4, (DI)
	ADDQ         $32, SI
	ADDQ         $16, DI
	DECQ         CX
	JNZ          encodeloop

encodedone:
	VZEROUPPER
	RET

// The set variants: acc[j] = (their term) + 0, what clearing acc and adding gives, without
// the clear.

// func setF32AVX2(w float32, x, acc []float32)
TEXT ·setF32AVX2(SB), NOSPLIT, $0-56
	VBROADCASTSS w+0(FP), Y0
	MOVQ x_base+8(FP), SI
	MOVQ x_len+16(FP), CX
	MOVQ acc_base+32(FP), DI
	VXORPS Y3, Y3, Y3 // +0
	SHRQ $3, CX
	JZ   setf32done

setf32loop:
	VMOVUPS (SI), Y1
	VMULPS  Y1, Y0, Y1 // w*x, rounded
	VADDPS  Y3, Y1, Y2 // w*x + 0
	VMOVUPS Y2, (DI)
	ADDQ    $32, SI
	ADDQ    $32, DI
	DECQ    CX
	JNZ     setf32loop

setf32done:
	VZEROUPPER
	RET

// func setBF16AVX2(w float32, x []BF16, acc []float32)
TEXT ·setBF16AVX2(SB), NOSPLIT, $0-56
	VBROADCASTSS w+0(FP), Y0
	MOVQ x_base+8(FP), SI
	MOVQ x_len+16(FP), CX
	MOVQ acc_base+32(FP), DI
	VXORPS Y3, Y3, Y3 // +0
	SHRQ $3, CX
	JZ   setbf16done

setbf16loop:
	VPMOVZXWD (SI), Y1  // eight bf16, widened to 32 bits
	VPSLLD    $16, Y1, Y1 // their float32 bits
	VMULPS    Y1, Y0, Y1
	VADDPS    Y3, Y1, Y2
	VMOVUPS   Y2, (DI)
	ADDQ      $16, SI
	ADDQ      $32, DI
	DECQ      CX
	JNZ       setbf16loop

setbf16done:
	VZEROUPPER
	RET

// func setAddBF16AVX2(x []BF16, acc []float32)
TEXT ·setAddBF16AVX2(SB), NOSPLIT, $0-48
	MOVQ x_base+0(FP), SI
	MOVQ x_len+8(FP), CX
	MOVQ acc_base+24(FP), DI
	VXORPS Y3, Y3, Y3 // +0
	SHRQ $3, CX
	JZ   setaddbf16done

setaddbf16loop:
	VPMOVZXWD (SI), Y1
	VPSLLD    $16, Y1, Y1
	VADDPS    Y3, Y1, Y2
	VMOVUPS   Y2, (DI)
	ADDQ      $16, SI
	ADDQ      $32, DI
	DECQ      CX
	JNZ       setaddbf16loop

setaddbf16done:
	VZEROUPPER
	RET
