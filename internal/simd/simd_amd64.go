//go:build amd64

package simd

import "golang.org/x/sys/cpu"

var cpuAVX2 = cpu.X86.HasAVX2 && cpu.X86.HasAVX

var haveAVX2 = cpuAVX2

// ---- the reductions' folds (reduce_amd64.s) ----
//
// The add loops do, eight float32 (four float64) lanes at a time, a[i] = a[i] + x[i] with a[i] as
// the first source operand (the Go compiler emits ADDSS x[i], a[i] for a[i] += x[i]: where both
// are NaN, a's payload is kept), so that a sum has the same bits with the vector loops or without;
// integer sums wrap the same way in both.

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

// AddF32 adds the vector prefix of x into a (a[i] += x[i]) and returns how many elements it did.
// len(x) >= len(a). AddF64, AddI32 and AddI64 are the same for their types (the integer sums are
// the same bits signed or not).
func AddF32(a, x []float32) int {
	n := len(a) &^ 7
	if !haveAVX2 || n == 0 {
		return 0
	}
	addF32AVX2(a[:n], x[:n])
	return n
}

func AddF64(a, x []float64) int {
	n := len(a) &^ 3
	if !haveAVX2 || n == 0 {
		return 0
	}
	addF64AVX2(a[:n], x[:n])
	return n
}

func AddI32(a, x []uint32) int {
	n := len(a) &^ 7
	if !haveAVX2 || n == 0 {
		return 0
	}
	addI32AVX2(a[:n], x[:n])
	return n
}

func AddI64(a, x []uint64) int {
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

// MinMaxF32 does the vector prefix of a min fold (max where isMax), a[i] = min(a[i], x[i]), like
// AddF32. MinMaxF64 is the same for float64.
func MinMaxF32(isMax bool, a, x []float32) int {
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

func MinMaxF64(isMax bool, a, x []float64) int {
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

// ---- expert-parallel combine's rows (bf16_amd64.s) ----
//
// These do, eight elements at a time, exactly the float32 operations of the Go loops they stand in
// for (a multiply, then an add, each rounded; no fused multiply-add; round to nearest even for
// bf16). A bf16 is passed as its bits (uint16).

// axpyF32AVX2: acc[j] += w*x[j] for j < len(x), len(x) a multiple of 8, len(acc) >= len(x).
//
//go:noescape
func axpyF32AVX2(w float32, x, acc []float32)

// axpyBF16AVX2 is axpyF32AVX2 for bf16 x.
//
//go:noescape
func axpyBF16AVX2(w float32, x []uint16, acc []float32)

// addBF16AVX2: acc[j] += float32(x[j]), len(x) a multiple of 8, len(acc) >= len(x).
//
//go:noescape
func addBF16AVX2(x []uint16, acc []float32)

// encodeBF16AVX2: out[j] = the bf16 nearest f[j] (ties to even), len(f) a multiple of 8, len(out) >= len(f).
//
//go:noescape
func encodeBF16AVX2(f []float32, out []uint16)

// The set variants write acc[j] = (the term) + 0 instead of adding to acc[j].
//
//go:noescape
func setF32AVX2(w float32, x, acc []float32)

//go:noescape
func setBF16AVX2(w float32, x []uint16, acc []float32)

//go:noescape
func setAddBF16AVX2(x []uint16, acc []float32)

// AxpyF32 does the vector prefix of acc[j] += w*x[j] (with set, acc[j] = w*x[j] + 0) and returns
// how many elements it did. len(acc) >= len(x).
func AxpyF32(w float32, x, acc []float32, set bool) int {
	n := len(x) &^ 7
	switch {
	case !haveAVX2 || n == 0:
		return 0
	case set:
		setF32AVX2(w, x[:n], acc[:n])
	default:
		axpyF32AVX2(w, x[:n], acc[:n])
	}
	return n
}

// AxpyBF16 is AxpyF32 for bf16 x.
func AxpyBF16(w float32, x []uint16, acc []float32, set bool) int {
	n := len(x) &^ 7
	switch {
	case !haveAVX2 || n == 0:
		return 0
	case set:
		setBF16AVX2(w, x[:n], acc[:n])
	default:
		axpyBF16AVX2(w, x[:n], acc[:n])
	}
	return n
}

// AddBF16 does the vector prefix of acc[j] += float32(x[j]) (with set, acc[j] = float32(x[j]) + 0).
func AddBF16(x []uint16, acc []float32, set bool) int {
	n := len(x) &^ 7
	switch {
	case !haveAVX2 || n == 0:
		return 0
	case set:
		setAddBF16AVX2(x[:n], acc[:n])
	default:
		addBF16AVX2(x[:n], acc[:n])
	}
	return n
}

// EncodeBF16 does the vector prefix of out[j] = the bf16 nearest f[j] (ties to even; NaN stays a
// quiet NaN of the same sign). len(out) >= len(f).
func EncodeBF16(f []float32, out []uint16) int {
	n := len(f) &^ 7
	if !haveAVX2 || n == 0 {
		return 0
	}
	encodeBF16AVX2(f[:n], out[:n])
	return n
}
