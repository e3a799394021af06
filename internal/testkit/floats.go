package testkit

import (
	"math"
	"math/rand/v2"
)

// F32Specials and F64Specials are the bit patterns where a vector loop is likeliest to part from
// the scalar one: signed zeros, denormals, the largest finite values, infinities, quiet and
// signalling NaNs of either sign and with distinct payloads (so that which operand's NaN survives
// an add of two NaNs shows in the bits), and rounding ties to bf16 (odd and even).
var F32Specials = []uint32{
	0, 0x80000000, 1, 0x807fffff, 0x00800000, 0x7f7fffff, 0xff7fffff, 0x7f800000, 0xff800000,
	0x7fc00000, 0xffc00001, 0x7f800001, 0xff812345, 0x7fd0beef, 0x3f800000, 0x7f7f8000,
	0x3f808000, 0x3f818000, 0x3f808001, 0xbf80ffff, 0x477fe000, 0x33800000,
}

var F64Specials = []uint64{
	0, 1 << 63, 1, 0x800fffffffffffff, 0x0010000000000000, 0x7fefffffffffffff, 0xffefffffffffffff,
	0x7ff0000000000000, 0xfff0000000000000, 0x7ff8000000000000, 0xfff8000000000001,
	0x7ff0000000000001, 0xfff0000012345678, 0x7ffabcdef0123456, 0x3ff0000000000000,
}

// Bits32 is n float32 bit patterns: a quarter special, a quarter any bits, the rest normal numbers.
func Bits32(rng *rand.Rand, n int) []uint32 {
	b := make([]uint32, n)
	for i := range b {
		switch rng.IntN(4) {
		case 0:
			b[i] = F32Specials[rng.IntN(len(F32Specials))]
		case 1:
			b[i] = rng.Uint32()
		default:
			b[i] = math.Float32bits(float32(rng.NormFloat64()))
		}
	}
	return b
}

// Bits64 is Bits32 for float64.
func Bits64(rng *rand.Rand, n int) []uint64 {
	b := make([]uint64, n)
	for i := range b {
		switch rng.IntN(4) {
		case 0:
			b[i] = F64Specials[rng.IntN(len(F64Specials))]
		case 1:
			b[i] = rng.Uint64()
		default:
			b[i] = math.Float64bits(rng.NormFloat64())
		}
	}
	return b
}
