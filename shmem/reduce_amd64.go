//go:build amd64

package shmem

import "golang.org/x/sys/cpu"

// The AVX2 loops of reduce_amd64.s do, eight float32 (four float64) lanes at a time, exactly the
// operation of the scalar Go loop they stand in for, a[i] = a[i] + x[i] with a[i] as the first
// source operand (the Go compiler emits ADDSS x[i], a[i] for a[i] += x[i]: where both are NaN,
// a's payload is kept), so that a sum has the same bits with the vector loops or without; integer
// sums wrap the same way in both. TestReduceVecMatchesScalar holds them to the scalar loop's bits.
var haveAVX2 = cpu.X86.HasAVX2 && cpu.X86.HasAVX

// Each adds x into a: a[i] += x[i] for i < len(a), len(a)*size a multiple of 32 bytes, len(x) >= len(a).
//
//go:noescape
func addF32AVX2(a, x []float32)

//go:noescape
func addF64AVX2(a, x []float64)

//go:noescape
func addI32AVX2(a, x []uint32)

//go:noescape
func addI64AVX2(a, x []uint64)

// The Vec functions add the vector prefix of x into a and return how many elements they did (0
// without AVX2); the caller's Go loop does the rest. len(x) >= len(a).

func addF32Vec(a, x []float32) int {
	n := len(a) &^ 7
	if !haveAVX2 || n == 0 {
		return 0
	}
	addF32AVX2(a[:n], x[:n])
	return n
}

func addF64Vec(a, x []float64) int {
	n := len(a) &^ 3
	if !haveAVX2 || n == 0 {
		return 0
	}
	addF64AVX2(a[:n], x[:n])
	return n
}

func addI32Vec(a, x []uint32) int {
	n := len(a) &^ 7
	if !haveAVX2 || n == 0 {
		return 0
	}
	addI32AVX2(a[:n], x[:n])
	return n
}

func addI64Vec(a, x []uint64) int {
	n := len(a) &^ 3
	if !haveAVX2 || n == 0 {
		return 0
	}
	addI64AVX2(a[:n], x[:n])
	return n
}

// The min and max loops: a[i] = min(a[i], x[i]) (max), as the builtins give it, NaN and -0 included.
//
//go:noescape
func minF32AVX2(a, x []float32)

//go:noescape
func maxF32AVX2(a, x []float32)

//go:noescape
func minF64AVX2(a, x []float64)

//go:noescape
func maxF64AVX2(a, x []float64)

// minMaxF32Vec does the vector prefix of a min (max where isMax) fold, like addF32Vec.
func minMaxF32Vec(isMax bool, a, x []float32) int {
	n := len(a) &^ 7
	switch {
	case !haveAVX2 || n == 0:
		return 0
	case isMax:
		maxF32AVX2(a[:n], x[:n])
	default:
		minF32AVX2(a[:n], x[:n])
	}
	return n
}

func minMaxF64Vec(isMax bool, a, x []float64) int {
	n := len(a) &^ 3
	switch {
	case !haveAVX2 || n == 0:
		return 0
	case isMax:
		maxF64AVX2(a[:n], x[:n])
	default:
		minF64AVX2(a[:n], x[:n])
	}
	return n
}
