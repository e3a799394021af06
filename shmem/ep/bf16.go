package ep

import "math"

// BF16 is a bfloat16 number: the top 16 bits of an IEEE-754 float32 (1 sign, 8 exponent, 7
// mantissa bits), the payload type of mixture-of-experts activations.
type BF16 uint16

// BF16FromFloat32 rounds f to the nearest bfloat16, ties to even (as PyTorch's and CUDA's
// __float2bfloat16 do); NaN stays a quiet NaN of the same sign.
func BF16FromFloat32(f float32) BF16 {
	u := math.Float32bits(f)
	if u&0x7fffffff > 0x7f800000 { // NaN: keep it a NaN after truncation
		return BF16(u>>16 | 0x0040)
	}
	u += 0x7fff + (u>>16)&1
	return BF16(u >> 16)
}

// Float32 widens b exactly.
func (b BF16) Float32() float32 { return math.Float32frombits(uint32(b) << 16) }

// BF16sFromFloat32 converts a slice.
func BF16sFromFloat32(f []float32) []BF16 {
	b := make([]BF16, len(f))
	for i, v := range f {
		b[i] = BF16FromFloat32(v)
	}
	return b
}

// Float32s converts a slice of bf16 to float32.
func Float32s(b []BF16) []float32 {
	f := make([]float32, len(b))
	for i, v := range b {
		f[i] = v.Float32()
	}
	return f
}
