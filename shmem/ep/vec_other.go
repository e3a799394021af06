//go:build !amd64

package ep

// Without vector loops (vec_amd64.go) the Go loops do the whole row.

var haveAVX2 = false // a var, as on amd64, so that the tests can run the Go loops alone there

func axpyF32Vec(float32, []float32, []float32, bool) int { return 0 }
func axpyBF16Vec(float32, []BF16, []float32, bool) int   { return 0 }
func addBF16Vec([]BF16, []float32, bool) int             { return 0 }
func encodeBF16Vec([]float32, []BF16) int                { return 0 }
