//go:build !amd64

package shmem

// Without vector loops (reduce_amd64.go) the Go loops do every element.

var haveAVX2 = false // a var, as on amd64, so that the tests can run the Go loops alone there

func addF32Vec(a, x []float32) int { return 0 }
func addF64Vec(a, x []float64) int { return 0 }
func addI32Vec(a, x []uint32) int  { return 0 }
func addI64Vec(a, x []uint64) int  { return 0 }
