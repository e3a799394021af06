//go:build amd64

package ep

import (
	"github.com/roxamen/roxamen/shmem"
	"golang.org/x/sys/cpu"
)

// The AVX2 loops of vec_amd64.s do, eight elements at a time, exactly the float32 operations of
// the Go loops they stand in for (a multiply, then an add, each rounded; no fused multiply-add;
// round to nearest even for bf16), so that a result has the same bits on any x86-64 machine, with
// AVX2 or without: TestVecMatchesScalar holds them to that. They run on the prefix of a row that
// is a multiple of eight; the Go loops finish it.
var haveAVX2 = cpu.X86.HasAVX2 && cpu.X86.HasAVX

// axpyF32AVX2: acc[j] += w*x[j] for j < len(x), len(x) a multiple of 8, len(acc) >= len(x).
//
//go:noescape
func axpyF32AVX2(w float32, x, acc []float32)

// axpyBF16AVX2 is axpyF32AVX2 for bf16 x.
//
//go:noescape
func axpyBF16AVX2(w float32, x []shmem.BFloat16, acc []float32)

// addBF16AVX2: acc[j] += float32(x[j]), len(x) a multiple of 8, len(acc) >= len(x).
//
//go:noescape
func addBF16AVX2(x []shmem.BFloat16, acc []float32)

// encodeBF16AVX2: out[j] = shmem.BFloat16From(f[j]), len(f) a multiple of 8, len(out) >= len(f).
//
//go:noescape
func encodeBF16AVX2(f []float32, out []shmem.BFloat16)

// The set variants write acc[j] = (the term) + 0 instead of adding to acc[j].
//
//go:noescape
func setF32AVX2(w float32, x, acc []float32)

//go:noescape
func setBF16AVX2(w float32, x []shmem.BFloat16, acc []float32)

//go:noescape
func setAddBF16AVX2(x []shmem.BFloat16, acc []float32)

func axpyF32Vec(w float32, x, acc []float32, set bool) int {
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

func axpyBF16Vec(w float32, x []shmem.BFloat16, acc []float32, set bool) int {
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

func addBF16Vec(x []shmem.BFloat16, acc []float32, set bool) int {
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

func encodeBF16Vec(f []float32, out []shmem.BFloat16) int {
	n := len(f) &^ 7
	if !haveAVX2 || n == 0 {
		return 0
	}
	encodeBF16AVX2(f[:n], out[:n])
	return n
}
