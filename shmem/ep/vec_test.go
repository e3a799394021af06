package ep

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/roxamen/roxamen/internal/simd"
	"github.com/roxamen/roxamen/shmem"
)

// specials are the float32 bit patterns where a vector loop is likeliest to part from the Go
// loop: signed zeros, denormals, the largest finite values, infinities, NaNs of either sign and
// payload, and rounding ties to bf16 (odd and even).
var specials = []uint32{
	0, 0x80000000, 1, 0x807fffff, 0x00800000, 0x7f7fffff, 0xff7fffff, 0x7f7f8000, 0x7f800000,
	0xff800000, 0x7fc00000, 0xffc00001, 0x7f800001, 0xff812345, 0x3f808000, 0x3f818000,
	0x3f808001, 0xbf80ffff, 0x477fe000, 0x33800000,
}

func isNaN(f float32) bool { return f != f }

func vecInputs(rng *rand.Rand, n int) []float32 {
	f := make([]float32, n)
	for i := range f {
		switch rng.IntN(4) {
		case 0:
			f[i] = math.Float32frombits(specials[rng.IntN(len(specials))])
		case 1:
			f[i] = math.Float32frombits(rng.Uint32())
		default:
			f[i] = float32(rng.NormFloat64())
		}
	}
	return f
}

// TestVecMatchesScalar: the combine's loops (axpy, the bf16 rounding, the sum of what came
// back, and their forms that write a sum's first term instead of adding it to a cleared row)
// give the bits of the plain one-element-at-a-time Go loops, at every length (the
// vector prefix and the Go tail) and on special values, on any machine (with AVX2 or without).
// The one freedom: where both operands of an add are NaNs, the result is a NaN whose payload is
// one of theirs, and which one is the processor's rule (it differs between the scalar and the
// vector instructions on this project's EPYC).
func TestVecMatchesScalar(t *testing.T) {
	t.Logf("AVX2 loops: %v", simd.AVX2())
	for _, vec := range []bool{false, simd.AVX2()} {
		saved := simd.SetAVX2(vec)
		testVec(t)
		simd.SetAVX2(saved)
	}
}

func testVec(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 17))
	same := func(what string, n int, got, want []float32) {
		t.Helper()
		what = fmt.Sprintf("%s (vector loops %v)", what, simd.AVX2())
		for j := range want {
			if isNaN(want[j]) && isNaN(got[j]) {
				continue // which NaN's payload survives a sum of two is the hardware's choice
			}
			if math.Float32bits(got[j]) != math.Float32bits(want[j]) {
				t.Fatalf("%s, length %d, element %d: %#x, want %#x", what, n, j, math.Float32bits(got[j]), math.Float32bits(want[j]))
			}
		}
	}
	for _, n := range []int{0, 1, 7, 8, 9, 15, 16, 17, 63, 129, 1024, 7168} {
		for rep := 0; rep < 4; rep++ {
			x := vecInputs(rng, n)
			acc0 := vecInputs(rng, n)
			w := float32(rng.Float64())
			if rep == 3 {
				w = math.Float32frombits(specials[rng.IntN(len(specials))])
			}
			xb := make([]shmem.BFloat16, n)
			for j, v := range x {
				xb[j] = shmem.BFloat16(math.Float32bits(v) >> 16)
			}

			// set: the first term of a sum, written over whatever acc held; want: added to a
			// cleared row.
			for _, set := range []bool{false, true} {
				start := acc0
				if set {
					start = make([]float32, n)
				}
				got, want := append([]float32(nil), acc0...), append([]float32(nil), start...)
				if !set {
					got = append([]float32(nil), start...)
				}
				axpyF32(w, x, got, set)
				for j := range want {
					want[j] += float32(w * x[j])
				}
				same(fmt.Sprintf("axpyF32 (set %v)", set), n, got, want)

				got, want = append([]float32(nil), acc0...), append([]float32(nil), start...)
				if !set {
					got = append([]float32(nil), start...)
				}
				axpyBF16(w, xb, got, set)
				for j := range want {
					want[j] += float32(w * xb[j].Float32())
				}
				same(fmt.Sprintf("axpyBF16 (set %v)", set), n, got, want)

				for _, dt := range []DType{DTypeBF16, DTypeF32} {
					got, want = append([]float32(nil), acc0...), append([]float32(nil), start...)
					if !set {
						got = append([]float32(nil), start...)
					}
					if n > 0 {
						in := Tokens{BF16: xb}
						if dt == DTypeF32 {
							in = Tokens{F32: x}
						}
						addDecoded(dt, in.bytes(dt), got, set)
					}
					for j := range want {
						if dt == DTypeF32 {
							want[j] += x[j]
						} else {
							want[j] += xb[j].Float32()
						}
					}
					same(fmt.Sprintf("addDecoded %v (set %v)", dt, set), n, got, want)
				}
			}

			if n > 0 {
				out := make([]shmem.BFloat16, n)
				encode(DTypeBF16, x, Tokens{BF16: out}.bytes(DTypeBF16))
				for j, v := range x {
					if w := shmem.BFloat16From(v); out[j] != w {
						t.Fatalf("encode, length %d, element %d (%#x): %#x, want %#x", n, j, math.Float32bits(v), out[j], w)
					}
				}
			}
		}
	}
}
