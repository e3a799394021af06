package coll

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/roxamen/roxamen/internal/simd"
	"github.com/roxamen/roxamen/internal/testkit"
)

// TestReduceVecMatchesScalar: fold's sums (and float min and max) through the vector loops (internal/simd) give exactly
// the bits of the generic scalar loop, acc[i] += x[i], NaN payloads included (both operands NaN
// at many elements), for every type with a vector loop, at lengths around the vector widths and
// the unrolled round, and on sub-slices that start off a 32-byte boundary.
func TestReduceVecMatchesScalar(t *testing.T) {
	t.Logf("AVX2 loops: %v", simd.AVX2())
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
			for _, op := range []Op{OpMin, OpMax} {
				checkOp := func(kind Kind, acc, x, want []byte) {
					t.Helper()
					got := append([]byte(nil), acc...)
					newReducer(kind, op).fold(got, x, false)
					if string(got) != string(want) {
						es := len(acc) / n
						for e := 0; e < n; e++ {
							if string(got[e*es:e*es+es]) != string(want[e*es:e*es+es]) {
								t.Fatalf("%v %v, length %d, offset %d: element %d is %x, the scalar loop gives %x (%x, %x)",
									kind, op, n, off, e, got[e*es:e*es+es], want[e*es:e*es+es], acc[e*es:e*es+es], x[e*es:e*es+es])
							}
						}
					}
				}
				w32 := append([]float32(nil), view[float32](bytesOf(a32))...)
				foldReal(op, w32, view[float32](bytesOf(x32)))
				checkOp(Float32, bytesOf(a32), bytesOf(x32), bytesOf(w32))
				w64 := append([]float64(nil), view[float64](bytesOf(a64))...)
				foldReal(op, w64, view[float64](bytesOf(x64)))
				checkOp(Float64, bytesOf(a64), bytesOf(x64), bytesOf(w64))
			}
			check := func(kind Kind, acc, x []byte, want []byte) {
				t.Helper()
				got := append([]byte(nil), acc...)
				newReducer(kind, OpSum).fold(got, x, false)
				if string(got) != string(want) {
					for i := range got {
						if got[i] != want[i] {
							es := len(acc) / n
							e := i / es
							t.Fatalf("%v sum, length %d, offset %d: element %d is %x, the scalar loop gives %x (%x + %x)",
								kind, n, off, e, got[e*es:e*es+es], want[e*es:e*es+es], acc[e*es:e*es+es], x[e*es:e*es+es])
						}
					}
				}
			}
			// The references: the generic scalar loops fold used before the vector ones.
			wf32 := append([]float32(nil), view[float32](bytesOf(a32))...)
			foldSumProd(OpSum, wf32, view[float32](bytesOf(x32)))
			check(Float32, bytesOf(a32), bytesOf(x32), bytesOf(wf32))
			wf64 := append([]float64(nil), view[float64](bytesOf(a64))...)
			foldSumProd(OpSum, wf64, view[float64](bytesOf(x64)))
			check(Float64, bytesOf(a64), bytesOf(x64), bytesOf(wf64))
			wi32 := append([]int32(nil), view[int32](bytesOf(a32))...)
			foldSumProd(OpSum, wi32, view[int32](bytesOf(x32)))
			check(Int32, bytesOf(a32), bytesOf(x32), bytesOf(wi32))
			wu32 := append([]uint32(nil), a32...)
			foldSumProd(OpSum, wu32, x32)
			check(Uint32, bytesOf(a32), bytesOf(x32), bytesOf(wu32))
			wi64 := append([]int64(nil), view[int64](bytesOf(a64))...)
			foldSumProd(OpSum, wi64, view[int64](bytesOf(x64)))
			check(Int64, bytesOf(a64), bytesOf(x64), bytesOf(wi64))
			wu64 := append([]uint64(nil), a64...)
			foldSumProd(OpSum, wu64, x64)
			check(Uint64, bytesOf(a64), bytesOf(x64), bytesOf(wu64))
		}
	}
}

func bytesOf[T any](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	var z T
	return unsafeBytes(s, int(sizeOf(z)))
}

// BenchmarkReduceFold: one fold of a 4096-element block (reduceBlock), scalar and vector.
func BenchmarkReduceFold(b *testing.B) {
	for _, kind := range []Kind{Float32, Float64, Int32, Int64} {
		for _, vec := range []bool{false, true} {
			if vec && !simd.AVX2() {
				continue
			}
			b.Run(fmt.Sprintf("%v/vec=%v", kind, vec), func(b *testing.B) {
				es := 4
				if kind == Float64 || kind == Int64 {
					es = 8
				}
				acc, x := make([]byte, reduceBlock*es), make([]byte, reduceBlock*es)
				r := newReducer(kind, OpSum)
				saved := simd.SetAVX2(vec)
				defer simd.SetAVX2(saved)
				b.SetBytes(int64(len(acc)))
				for b.Loop() {
					r.fold(acc, x, false)
				}
			})
		}
	}
}

func sizeOf[T any](z T) uintptr { return unsafe.Sizeof(z) }

func unsafeBytes[T any](s []T, es int) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), len(s)*es)
}
