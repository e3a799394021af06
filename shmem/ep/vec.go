package ep

import (
	"unsafe"

	"github.com/roxamen/roxamen/internal/simd"
	"github.com/roxamen/roxamen/shmem"
)

// The vector prefixes of the combine's rows are internal/simd's loops (AVX2 where the CPU has it),
// which give the bits of the Go loops that finish each row: TestVecMatchesScalar holds them to it.

func axpyF32Vec(w float32, x, acc []float32, set bool) int { return simd.AxpyF32(w, x, acc, set) }

func axpyBF16Vec(w float32, x []shmem.BFloat16, acc []float32, set bool) int {
	return simd.AxpyBF16(w, bf16Bits(x), acc, set)
}

func addBF16Vec(x []shmem.BFloat16, acc []float32, set bool) int {
	return simd.AddBF16(bf16Bits(x), acc, set)
}

func encodeBF16Vec(f []float32, out []shmem.BFloat16) int { return simd.EncodeBF16(f, bf16Bits(out)) }

// bf16Bits views bf16 numbers as their bits, the vector loops' element type.
func bf16Bits(b []shmem.BFloat16) []uint16 {
	return unsafe.Slice((*uint16)(unsafe.Pointer(unsafe.SliceData(b))), len(b))
}
