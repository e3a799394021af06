//go:build amd64

#include "textflag.h"

// Each adds x (SI) into a (DI), CX bytes (a multiple of 32), 128 bytes a round while it can, then
// 32. Go's operand order is OP src2, src1, dst (Intel's OP dst, src1, src2): src1 is a's lanes,
// so where both lanes are NaN a's payload is kept, as in the scalar loop (ADDSS x[i], a[i]).

// func addF32AVX2(a, x []float32)
TEXT ·addF32AVX2(SB), NOSPLIT, $0-48
	MOVQ a_base+0(FP), DI
	MOVQ a_len+8(FP), CX
	MOVQ x_base+24(FP), SI
	SHLQ $2, CX
	CMPQ CX, $128
	JB   f32one

f32four:
	VMOVUPS (DI), Y0
	VMOVUPS 32(DI), Y1
	VMOVUPS 64(DI), Y2
	VMOVUPS 96(DI), Y3
	VADDPS (SI), Y0, Y0
	VADDPS 32(SI), Y1, Y1
	VADDPS 64(SI), Y2, Y2
	VADDPS 96(SI), Y3, Y3
	VMOVUPS Y0, (DI)
	VMOVUPS Y1, 32(DI)
	VMOVUPS Y2, 64(DI)
	VMOVUPS Y3, 96(DI)
	ADDQ    $128, SI
	ADDQ    $128, DI
	SUBQ    $128, CX
	CMPQ    CX, $128
	JAE     f32four

f32one:
	TESTQ CX, CX
	JZ    f32done

f32loop:
	VMOVUPS (DI), Y0
	VADDPS (SI), Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ    $32, SI
	ADDQ    $32, DI
	SUBQ    $32, CX
	JNZ     f32loop

f32done:
	VZEROUPPER
	RET

// func addF64AVX2(a, x []float64)
TEXT ·addF64AVX2(SB), NOSPLIT, $0-48
	MOVQ a_base+0(FP), DI
	MOVQ a_len+8(FP), CX
	MOVQ x_base+24(FP), SI
	SHLQ $3, CX
	CMPQ CX, $128
	JB   f64one

f64four:
	VMOVUPS (DI), Y0
	VMOVUPS 32(DI), Y1
	VMOVUPS 64(DI), Y2
	VMOVUPS 96(DI), Y3
	VADDPD (SI), Y0, Y0
	VADDPD 32(SI), Y1, Y1
	VADDPD 64(SI), Y2, Y2
	VADDPD 96(SI), Y3, Y3
	VMOVUPS Y0, (DI)
	VMOVUPS Y1, 32(DI)
	VMOVUPS Y2, 64(DI)
	VMOVUPS Y3, 96(DI)
	ADDQ    $128, SI
	ADDQ    $128, DI
	SUBQ    $128, CX
	CMPQ    CX, $128
	JAE     f64four

f64one:
	TESTQ CX, CX
	JZ    f64done

f64loop:
	VMOVUPS (DI), Y0
	VADDPD (SI), Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ    $32, SI
	ADDQ    $32, DI
	SUBQ    $32, CX
	JNZ     f64loop

f64done:
	VZEROUPPER
	RET

// func addI32AVX2(a, x []uint32)
TEXT ·addI32AVX2(SB), NOSPLIT, $0-48
	MOVQ a_base+0(FP), DI
	MOVQ a_len+8(FP), CX
	MOVQ x_base+24(FP), SI
	SHLQ $2, CX
	CMPQ CX, $128
	JB   i32one

i32four:
	VMOVUPS (DI), Y0
	VMOVUPS 32(DI), Y1
	VMOVUPS 64(DI), Y2
	VMOVUPS 96(DI), Y3
	VPADDD (SI), Y0, Y0
	VPADDD 32(SI), Y1, Y1
	VPADDD 64(SI), Y2, Y2
	VPADDD 96(SI), Y3, Y3
	VMOVUPS Y0, (DI)
	VMOVUPS Y1, 32(DI)
	VMOVUPS Y2, 64(DI)
	VMOVUPS Y3, 96(DI)
	ADDQ    $128, SI
	ADDQ    $128, DI
	SUBQ    $128, CX
	CMPQ    CX, $128
	JAE     i32four

i32one:
	TESTQ CX, CX
	JZ    i32done

i32loop:
	VMOVUPS (DI), Y0
	VPADDD (SI), Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ    $32, SI
	ADDQ    $32, DI
	SUBQ    $32, CX
	JNZ     i32loop

i32done:
	VZEROUPPER
	RET

// func addI64AVX2(a, x []uint64)
TEXT ·addI64AVX2(SB), NOSPLIT, $0-48
	MOVQ a_base+0(FP), DI
	MOVQ a_len+8(FP), CX
	MOVQ x_base+24(FP), SI
	SHLQ $3, CX
	CMPQ CX, $128
	JB   i64one

i64four:
	VMOVUPS (DI), Y0
	VMOVUPS 32(DI), Y1
	VMOVUPS 64(DI), Y2
	VMOVUPS 96(DI), Y3
	VPADDQ (SI), Y0, Y0
	VPADDQ 32(SI), Y1, Y1
	VPADDQ 64(SI), Y2, Y2
	VPADDQ 96(SI), Y3, Y3
	VMOVUPS Y0, (DI)
	VMOVUPS Y1, 32(DI)
	VMOVUPS Y2, 64(DI)
	VMOVUPS Y3, 96(DI)
	ADDQ    $128, SI
	ADDQ    $128, DI
	SUBQ    $128, CX
	CMPQ    CX, $128
	JAE     i64four

i64one:
	TESTQ CX, CX
	JZ    i64done

i64loop:
	VMOVUPS (DI), Y0
	VPADDQ (SI), Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ    $32, SI
	ADDQ    $32, DI
	SUBQ    $32, CX
	JNZ     i64loop

i64done:
	VZEROUPPER
	RET

// The min and max loops repeat, lane by lane, the sequence the Go compiler emits for the builtins
// min(a, x) and max(a, x) on floats (so that NaNs and signed zeros come out with the same bits):
// m1 = MIN(a, x), m2 = MIN(m1, a), result m1 | m2 (Intel's MIN returns its second source where
// either is NaN or both are zeros); max is that on the negated operands, negated.

// func minF32AVX2(a, x []float32)
TEXT ·minF32AVX2(SB), NOSPLIT, $0-48
	MOVQ a_base+0(FP), DI
	MOVQ a_len+8(FP), CX
	MOVQ x_base+24(FP), SI
	SHLQ $2, CX
	TESTQ CX, CX
	JZ    minF32done

minF32loop:
	VMOVUPS (DI), Y0 // a
	VMOVUPS (SI), Y1 // x
	VMINPS Y1, Y0, Y2 // m1 = MIN(a, x)
	VMINPS Y0, Y2, Y3 // m2 = MIN(m1, a)
	VORPS Y2, Y3, Y3
	VMOVUPS Y3, (DI)
	ADDQ    $32, SI
	ADDQ    $32, DI
	SUBQ    $32, CX
	JNZ     minF32loop

minF32done:
	VZEROUPPER
	RET

// func maxF32AVX2(a, x []float32)
TEXT ·maxF32AVX2(SB), NOSPLIT, $0-48
	MOVQ a_base+0(FP), DI
	MOVQ a_len+8(FP), CX
	MOVQ x_base+24(FP), SI
	SHLQ $2, CX
	MOVL $0x80000000, AX
	MOVD AX, X7
	VPBROADCASTD X7, Y7 // the sign bit
	TESTQ CX, CX
	JZ    maxF32done

maxF32loop:
	VMOVUPS (DI), Y0 // a
	VMOVUPS (SI), Y1 // x
	VXORPS Y7, Y0, Y0
	VXORPS Y7, Y1, Y1
	VMINPS Y1, Y0, Y2 // m1 = MIN(a, x)
	VMINPS Y0, Y2, Y3 // m2 = MIN(m1, a)
	VORPS Y2, Y3, Y3
	VXORPS Y7, Y3, Y3
	VMOVUPS Y3, (DI)
	ADDQ    $32, SI
	ADDQ    $32, DI
	SUBQ    $32, CX
	JNZ     maxF32loop

maxF32done:
	VZEROUPPER
	RET

// func minF64AVX2(a, x []float64)
TEXT ·minF64AVX2(SB), NOSPLIT, $0-48
	MOVQ a_base+0(FP), DI
	MOVQ a_len+8(FP), CX
	MOVQ x_base+24(FP), SI
	SHLQ $3, CX
	TESTQ CX, CX
	JZ    minF64done

minF64loop:
	VMOVUPS (DI), Y0 // a
	VMOVUPS (SI), Y1 // x
	VMINPD Y1, Y0, Y2 // m1 = MIN(a, x)
	VMINPD Y0, Y2, Y3 // m2 = MIN(m1, a)
	VORPD Y2, Y3, Y3
	VMOVUPS Y3, (DI)
	ADDQ    $32, SI
	ADDQ    $32, DI
	SUBQ    $32, CX
	JNZ     minF64loop

minF64done:
	VZEROUPPER
	RET

// func maxF64AVX2(a, x []float64)
TEXT ·maxF64AVX2(SB), NOSPLIT, $0-48
	MOVQ a_base+0(FP), DI
	MOVQ a_len+8(FP), CX
	MOVQ x_base+24(FP), SI
	SHLQ $3, CX
	MOVQ $0x8000000000000000, AX
	MOVQ AX, X7
	VPBROADCASTQ X7, Y7 // the sign bit
	TESTQ CX, CX
	JZ    maxF64done

maxF64loop:
	VMOVUPS (DI), Y0 // a
	VMOVUPS (SI), Y1 // x
	VXORPD Y7, Y0, Y0
	VXORPD Y7, Y1, Y1
	VMINPD Y1, Y0, Y2 // m1 = MIN(a, x)
	VMINPD Y0, Y2, Y3 // m2 = MIN(m1, a)
	VORPD Y2, Y3, Y3
	VXORPD Y7, Y3, Y3
	VMOVUPS Y3, (DI)
	ADDQ    $32, SI
	ADDQ    $32, DI
	SUBQ    $32, CX
	JNZ     maxF64loop

maxF64done:
	VZEROUPPER
	RET
