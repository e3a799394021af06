//go:build !amd64

package ep

import "github.com/roxamen/roxamen/shmem"

// Without vector loops (vec_amd64.go) the Go loops do the whole row.

var haveAVX2 = false // a var, as on amd64, so that the tests can run the Go loops alone there

func axpyF32Vec(float32, []float32, []float32, bool) int         { return 0 }
func axpyBF16Vec(float32, []shmem.BFloat16, []float32, bool) int { return 0 }
func addBF16Vec([]shmem.BFloat16, []float32, bool) int           { return 0 }
func encodeBF16Vec([]float32, []shmem.BFloat16) int              { return 0 }
