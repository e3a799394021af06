package simd

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/roxamen/roxamen/internal/testkit"
)

func f32s(b []uint32) []float32 {
	f := make([]float32, len(b))
	for i, v := range b {
		f[i] = math.Float32frombits(v)
	}
	return f
}

func f64s(b []uint64) []float64 {
	f := make([]float64, len(b))
	for i, v := range b {
		f[i] = math.Float64frombits(v)
	}
	return f
}

// sameBits fails unless got and want hold the same bits, element by element.
func sameBits[T float32 | float64 | uint32 | uint64](t *testing.T, what string, n, off int, got, want []T, bits func(T) uint64) {
	t.Helper()
	for i := range want {
		if bits(got[i]) != bits(want[i]) {
			t.Fatalf("%s (vector loops %v), length %d, offset %d: element %d is %#x, the Go loop gives %#x", what, AVX2(), n, off, i, bits(got[i]), bits(want[i]))
		}
	}
}

func b32(f float32) uint64 { return uint64(math.Float32bits(f)) }
func b64(f float64) uint64 { return math.Float64bits(f) }
func u64[T uint32 | uint64](v T) uint64 {
	return uint64(v)
}

// TestReduceLoopsMatchScalar: the folds' loops (sum over float32, float64, and the 32- and 64-bit
// integers; min and max over the floats), their vector prefix finished by the Go loop, give
// exactly the bits of the Go loop alone, acc[i] += x[i] (min, max), NaN payloads included (both
// operands NaN at many elements), at lengths around the vector widths and the unrolled round, and
// on sub-slices that start off a 32-byte boundary; with the vector loops and without.
func TestReduceLoopsMatchScalar(t *testing.T) {
	t.Logf("AVX2 loops: %v", AVX2())
	for _, vec := range []bool{false, AVX2()} {
		saved := SetAVX2(vec)
		testReduceLoops(t)
		SetAVX2(saved)
	}
}

func testReduceLoops(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 31))
	for _, n := range []int{0, 1, 3, 4, 5, 7, 8, 9, 15, 16, 31, 32, 33, 63, 64, 65, 127, 1001, 4096 + 3} {
		for _, off := range []int{0, 1, 3} {
			a32, x32 := testkit.Bits32(rng, n+off)[off:], testkit.Bits32(rng, n+off)[off:]
			a64, x64 := testkit.Bits64(rng, n+off)[off:], testkit.Bits64(rng, n+off)[off:]
			if n > 0 { // both NaN, different payloads, on a vector lane and on the tail
				a32[0], x32[0] = 0x7fc00001, 0xffc00002
				a32[n-1], x32[n-1] = 0xff800003, 0x7f800004
				a64[0], x64[0] = 0x7ff8000000000001, 0xfff8000000000002
				a64[n-1], x64[n-1] = 0xfff0000000000003, 0x7ff0000000000004
			}
			{
				got, want, x := f32s(a32), f32s(a32), f32s(x32)
				for i := AddF32(got, x); i < n; i++ {
					got[i] += x[i]
				}
				for i := range want {
					want[i] += x[i]
				}
				sameBits(t, "float32 sum", n, off, got, want, b32)
			}
			{
				got, want, x := f64s(a64), f64s(a64), f64s(x64)
				for i := AddF64(got, x); i < n; i++ {
					got[i] += x[i]
				}
				for i := range want {
					want[i] += x[i]
				}
				sameBits(t, "float64 sum", n, off, got, want, b64)
			}
			{
				got, want := append([]uint32(nil), a32...), append([]uint32(nil), a32...)
				for i := AddI32(got, x32); i < n; i++ {
					got[i] += x32[i]
				}
				for i := range want {
					want[i] += x32[i]
				}
				sameBits(t, "32-bit integer sum", n, off, got, want, u64)
			}
			{
				got, want := append([]uint64(nil), a64...), append([]uint64(nil), a64...)
				for i := AddI64(got, x64); i < n; i++ {
					got[i] += x64[i]
				}
				for i := range want {
					want[i] += x64[i]
				}
				sameBits(t, "64-bit integer sum", n, off, got, want, u64)
			}
			for _, isMax := range []bool{false, true} {
				pick32 := func(a, x float32) float32 {
					if isMax {
						return max(a, x)
					}
					return min(a, x)
				}
				pick64 := func(a, x float64) float64 {
					if isMax {
						return max(a, x)
					}
					return min(a, x)
				}
				got, want, x := f32s(a32), f32s(a32), f32s(x32)
				for i := MinMaxF32(isMax, got, x); i < n; i++ {
					got[i] = pick32(got[i], x[i])
				}
				for i := range want {
					want[i] = pick32(want[i], x[i])
				}
				sameBits(t, fmt.Sprintf("float32 min/max (max %v)", isMax), n, off, got, want, b32)
				got64, want64, x64f := f64s(a64), f64s(a64), f64s(x64)
				for i := MinMaxF64(isMax, got64, x64f); i < n; i++ {
					got64[i] = pick64(got64[i], x64f[i])
				}
				for i := range want64 {
					want64[i] = pick64(want64[i], x64f[i])
				}
				sameBits(t, fmt.Sprintf("float64 min/max (max %v)", isMax), n, off, got64, want64, b64)
			}
		}
	}
}

func bf16(f float32) uint16 {
	u := math.Float32bits(f)
	if u&0x7fffffff > 0x7f800000 {
		return uint16(u>>16 | 0x0040)
	}
	return uint16((u + 0x7fff + (u>>16)&1) >> 16)
}

func widen(b uint16) float32 { return math.Float32frombits(uint32(b) << 16) }

// TestBF16LoopsMatchScalar: the combine's loops (axpy over float32 and bf16, the sum of bf16 rows,
// their forms that write the first term of a sum, and the rounding to bf16), their vector prefix
// finished by the Go loop, give the bits of the Go loop alone. The one freedom: where both
// operands of an add are NaNs, the result is a NaN whose payload is one of theirs, and which one
// is the processor's rule (it differs between the scalar and the vector instructions).
func TestBF16LoopsMatchScalar(t *testing.T) {
	for _, vec := range []bool{false, AVX2()} {
		saved := SetAVX2(vec)
		testBF16Loops(t)
		SetAVX2(saved)
	}
}

func testBF16Loops(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 17))
	same := func(what string, n int, got, want []float32) {
		t.Helper()
		for j := range want {
			if want[j] != want[j] && got[j] != got[j] {
				continue // which NaN's payload survives a sum of two is the hardware's choice
			}
			if math.Float32bits(got[j]) != math.Float32bits(want[j]) {
				t.Fatalf("%s (vector loops %v), length %d, element %d: %#x, want %#x", what, AVX2(), n, j, math.Float32bits(got[j]), math.Float32bits(want[j]))
			}
		}
	}
	for _, n := range []int{0, 1, 7, 8, 9, 15, 16, 17, 63, 129, 1024} {
		for rep := 0; rep < 4; rep++ {
			x, acc0 := f32s(testkit.Bits32(rng, n)), f32s(testkit.Bits32(rng, n))
			w := float32(rng.Float64())
			if rep == 3 {
				w = math.Float32frombits(testkit.F32Specials[rng.IntN(len(testkit.F32Specials))])
			}
			xb := make([]uint16, n)
			for j, v := range x {
				xb[j] = uint16(math.Float32bits(v) >> 16)
			}
			for _, set := range []bool{false, true} {
				term := func(acc []float32, j int, v float32) {
					if set {
						acc[j] = v + 0
					} else {
						acc[j] += v
					}
				}
				got, want := append([]float32(nil), acc0...), append([]float32(nil), acc0...)
				for j := AxpyF32(w, x, got, set); j < n; j++ {
					term(got, j, float32(w*x[j]))
				}
				for j := range want {
					term(want, j, float32(w*x[j]))
				}
				same(fmt.Sprintf("AxpyF32 (set %v)", set), n, got, want)

				got, want = append([]float32(nil), acc0...), append([]float32(nil), acc0...)
				for j := AxpyBF16(w, xb, got, set); j < n; j++ {
					term(got, j, float32(w*widen(xb[j])))
				}
				for j := range want {
					term(want, j, float32(w*widen(xb[j])))
				}
				same(fmt.Sprintf("AxpyBF16 (set %v)", set), n, got, want)

				got, want = append([]float32(nil), acc0...), append([]float32(nil), acc0...)
				for j := AddBF16(xb, got, set); j < n; j++ {
					term(got, j, widen(xb[j]))
				}
				for j := range want {
					term(want, j, widen(xb[j]))
				}
				same(fmt.Sprintf("AddBF16 (set %v)", set), n, got, want)
			}
			out := make([]uint16, n)
			for j := EncodeBF16(x, out); j < n; j++ {
				out[j] = bf16(x[j])
			}
			for j, v := range x {
				if want := bf16(v); out[j] != want {
					t.Fatalf("EncodeBF16 (vector loops %v), length %d, element %d (%#x): %#x, want %#x", AVX2(), n, j, math.Float32bits(v), out[j], want)
				}
			}
		}
	}
}

// TestCopy: Copy copies what copy does, below, across and above the sizes it copies in chunks,
// and into a shorter destination.
func TestCopy(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	for _, n := range []int{0, 1, 1<<20 - 1, 1 << 20, 1<<20 + 12345, copyNTMin - 1, copyNTMin} {
		src := make([]byte, n)
		for i := range src {
			src[i] = byte(rng.Uint32())
		}
		for _, d := range []int{n, n / 2} {
			got := make([]byte, d)
			if Copy(got, src); string(got) != string(src[:d]) {
				t.Fatalf("Copy of %d bytes into %d: the bytes differ from copy's", n, d)
			}
		}
	}
}
