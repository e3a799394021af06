//go:build !amd64

package shmem

// Without vector loops (reduce_amd64.go) the Go loops do every element.

var haveAVX2 = false // a var, as on amd64, so that the tests can run the Go loops alone there

func addF32Vec([]float32, []float32) int { return 0 }
func addF64Vec([]float64, []float64) int { return 0 }
func addI32Vec([]uint32, []uint32) int   { return 0 }
func addI64Vec([]uint64, []uint64) int   { return 0 }

func minMaxF32Vec(bool, []float32, []float32) int { return 0 }
func minMaxF64Vec(bool, []float64, []float64) int { return 0 }
