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
