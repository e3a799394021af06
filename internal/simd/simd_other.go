//go:build !amd64

package simd

// Without vector loops (simd_amd64.go) the callers' Go loops do every element.

const cpuAVX2 = false

var haveAVX2 = false // a var, as on amd64, so that SetAVX2 has one meaning everywhere

func AddF32([]float32, []float32) int { return 0 }
func AddF64([]float64, []float64) int { return 0 }
func AddI32([]uint32, []uint32) int   { return 0 }
func AddI64([]uint64, []uint64) int   { return 0 }

func MinMaxF32(bool, []float32, []float32) int { return 0 }
func MinMaxF64(bool, []float64, []float64) int { return 0 }

func AxpyF32(float32, []float32, []float32, bool) int { return 0 }
func AxpyBF16(float32, []uint16, []float32, bool) int { return 0 }
func AddBF16([]uint16, []float32, bool) int           { return 0 }
func EncodeBF16([]float32, []uint16) int              { return 0 }
