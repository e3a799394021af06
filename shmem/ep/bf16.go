package ep

import "github.com/roxamen/roxamen/shmem"

// The bfloat16 payload type is shmem.BFloat16 (the type shmem's reductions take); these convert
// whole rows of it.

// BF16sFromFloat32 rounds each element to the nearest bfloat16 (shmem.BFloat16From).
func BF16sFromFloat32(f []float32) []shmem.BFloat16 {
	b := make([]shmem.BFloat16, len(f))
	for i, v := range f {
		b[i] = shmem.BFloat16From(v)
	}
	return b
}

// Float32s widens each element exactly.
func Float32s(b []shmem.BFloat16) []float32 {
	f := make([]float32, len(b))
	for i, v := range b {
		f[i] = v.Float32()
	}
	return f
}
