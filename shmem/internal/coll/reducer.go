package coll

import (
	"fmt"
	"math"
	"unsafe"

	"github.com/roxamen/roxamen/internal/simd"
)

// Op is a reduction operation, with shmem.Op's values.
type Op uint8

const (
	OpSum Op = iota + 1
	OpProd
	OpMin
	OpMax
	OpAnd
	OpOr
	OpXor
)

func (o Op) String() string {
	switch o {
	case OpSum:
		return "sum"
	case OpProd:
		return "prod"
	case OpMin:
		return "min"
	case OpMax:
		return "max"
	case OpAnd:
		return "and"
	case OpOr:
		return "or"
	case OpXor:
		return "xor"
	case 0:
		return "none"
	}
	return fmt.Sprintf("Op(%d)", uint8(o))
}

// The 16-bit float extension types (shmem.BFloat16, shmem.Float16) as bits: the conversions the
// reducer accumulates through, and shmem's methods are.

// BFloat16From rounds f to the nearest bfloat16 (ties to even); NaN stays NaN.
func BFloat16From(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 {
		return uint16(b>>16 | 0x40) // quiet NaN, sign kept
	}
	return uint16((b + 0x7fff + (b>>16)&1) >> 16)
}

// BFloat16To returns bfloat16 b as a float32, exactly.
func BFloat16To(b uint16) float32 { return math.Float32frombits(uint32(b) << 16) }

// Float16To returns binary16 h as a float32, exactly.
func Float16To(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	man := uint32(h) & 0x3ff
	switch {
	case exp == 0x1f: // inf, NaN
		return math.Float32frombits(sign | 0x7f800000 | man<<13)
	case exp == 0 && man == 0:
		return math.Float32frombits(sign)
	case exp == 0: // subnormal: value man * 2^-24
		f := float32(man) * (1.0 / (1 << 24))
		if sign != 0 {
			return -f
		}
		return f
	}
	return math.Float32frombits(sign | (exp+112)<<23 | man<<13)
}

// Float16From rounds f to the nearest binary16 (ties to even); out of range is infinity.
func Float16From(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int32(b>>23) & 0xff
	man := b & 0x7fffff
	switch {
	case exp == 0xff:
		if man != 0 {
			return sign | 0x7e00 | uint16(man>>13)
		}
		return sign | 0x7c00
	case exp-127 > 15:
		return sign | 0x7c00
	case exp-127 >= -14: // normal
		e := uint32(exp - 112)
		v := e<<10 | man>>13
		rest := man & 0x1fff
		if rest > 0x1000 || (rest == 0x1000 && v&1 == 1) {
			v++ // may carry into the exponent, up to infinity: correct
		}
		return uint16(uint32(sign) | v)
	case exp-127 >= -25: // subnormal result
		m := man | 0x800000
		shift := uint32(-exp + 126 - 14 + 13 + 1) // bits to drop so the unit is 2^-24
		v := m >> shift
		rest := m & (1<<shift - 1)
		half := uint32(1) << (shift - 1)
		if rest > half || (rest == half && v&1 == 1) {
			v++
		}
		return uint16(uint32(sign) | v)
	}
	return sign
}

// Kind is an element type as the collectives see it.
type Kind uint8

const (
	Int8 Kind = iota + 1
	Int16
	Int32
	Int64
	Uint8
	Uint16
	Uint32
	Uint64
	Float32
	Float64
	Complex64
	Complex128
	BFloat16
	Float16
)

var kindNames = [...]string{"?", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float32", "float64", "complex64", "complex128", "bfloat16", "float16"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

var kindSizes = [...]int{0, 1, 2, 4, 8, 1, 2, 4, 8, 4, 8, 8, 16, 2, 2}

// Size is the bytes of one element of k.
func (k Kind) Size() int {
	if int(k) < len(kindSizes) {
		return kindSizes[k]
	}
	return 0
}

// CheckOp says why op does not apply to kind, or "".
func CheckOp(kind Kind, op Op) string {
	switch {
	case op < OpSum || op > OpXor:
		return fmt.Sprintf("unknown operation %v", op)
	case kind == BFloat16 || kind == Float16:
		if op != OpSum && op != OpMin && op != OpMax {
			return fmt.Sprintf("%v on %v: the 16-bit float extension types take sum, min and max", op, kind)
		}
	case kind == Complex64 || kind == Complex128:
		if op != OpSum && op != OpProd {
			return fmt.Sprintf("%v on %v: complex types take sum and prod", op, kind)
		}
	case kind == Float32 || kind == Float64:
		if op >= OpAnd {
			return fmt.Sprintf("%v on %v: and, or and xor take integer types", op, kind)
		}
	}
	return ""
}

// reducer folds PE contributions, always in team PE order: for each element the result is
// ((x_0 op x_1) op x_2) ... op x_{n-1}, where x_j is team PE j's value. Every algorithm keeps
// that order (see reduce.go and ring.go), so the result is the same bits on every PE, on every run and under
// every ROX_COLL_ALGO. The 16-bit float types accumulate in float32 in the same order and are
// rounded once. Floating-point min and max are Go's: NaN wins, and -0 is below +0.
type reducer struct {
	kind Kind
	op   Op
	es   int // element bytes
	as   int // accumulator bytes per element
}

func newReducer(kind Kind, op Op) reducer {
	es := kind.Size()
	r := reducer{kind: kind, op: op, es: es, as: es}
	if kind == BFloat16 || kind == Float16 {
		r.as = 4
	}
	return r
}

func view[T any](b []byte) []T {
	var z T
	n := len(b) / int(unsafe.Sizeof(z))
	if n == 0 {
		return nil
	}
	return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b))), n)
}

// start sets acc (accumulator bytes) to the first contribution x (element bytes).
func (r reducer) start(acc, x []byte) {
	switch r.kind {
	case BFloat16:
		a, v := view[float32](acc), view[uint16](x)
		for i := range v {
			a[i] = BFloat16To(v[i])
		}
	case Float16:
		a, v := view[float32](acc), view[uint16](x)
		for i := range v {
			a[i] = Float16To(v[i])
		}
	default:
		copy(acc, x)
	}
}

// finalize writes acc out as elements.
func (r reducer) finalize(dst, acc []byte) {
	switch r.kind {
	case BFloat16:
		a, d := view[float32](acc), view[uint16](dst)
		for i := range d {
			d[i] = BFloat16From(a[i])
		}
	case Float16:
		a, d := view[float32](acc), view[uint16](dst)
		for i := range d {
			d[i] = Float16From(a[i])
		}
	default:
		copy(dst, acc)
	}
}

// fold sets acc = acc op x, elementwise; x holds elements, or accumulators when partial is set
// (a partial result passed between PEs).
func (r reducer) fold(acc, x []byte, partial bool) {
	if (r.as == r.es || partial) && foldFast(r.kind, r.op, acc, x) {
		return
	}
	switch r.kind {
	case Int8:
		foldInt(r.op, view[int8](acc), view[int8](x))
	case Int16:
		foldInt(r.op, view[int16](acc), view[int16](x))
	case Int32:
		foldInt(r.op, view[int32](acc), view[int32](x))
	case Int64:
		foldInt(r.op, view[int64](acc), view[int64](x))
	case Uint8:
		foldInt(r.op, view[uint8](acc), view[uint8](x))
	case Uint16:
		foldInt(r.op, view[uint16](acc), view[uint16](x))
	case Uint32:
		foldInt(r.op, view[uint32](acc), view[uint32](x))
	case Uint64:
		foldInt(r.op, view[uint64](acc), view[uint64](x))
	case Float32:
		foldReal(r.op, view[float32](acc), view[float32](x))
	case Float64:
		foldReal(r.op, view[float64](acc), view[float64](x))
	case Complex64:
		foldSumProd(r.op, view[complex64](acc), view[complex64](x))
	case Complex128:
		foldSumProd(r.op, view[complex128](acc), view[complex128](x))
	case BFloat16, Float16:
		a := view[float32](acc)
		if partial {
			foldReal(r.op, a, view[float32](x))
			return
		}
		tmp := make([]float32, 0, 512)
		for o := 0; o < len(a); o += 512 {
			e := min(o+512, len(a))
			tmp = tmp[:e-o]
			if r.kind == BFloat16 {
				for i, v := range view[uint16](x[o*2 : e*2]) {
					tmp[i] = BFloat16To(v)
				}
			} else {
				for i, v := range view[uint16](x[o*2 : e*2]) {
					tmp[i] = Float16To(v)
				}
			}
			foldF32(r.op, a[o:e], tmp)
		}
	}
}

// foldFast does the folds that have vector loops (internal/simd), typed, without the generic
// loops: acc = acc op x elementwise, x holding accumulators, for sum over the 32- and 64-bit types
// and min and max over the floats. It reports whether it did. Integer sums are the same bits
// signed or not, so int32 and uint32 share a loop.
func foldFast(kind Kind, op Op, acc, x []byte) bool {
	if kind == BFloat16 || kind == Float16 {
		kind = Float32 // their accumulators
	}
	switch {
	case kind == Float32 && (op == OpSum || op == OpMin || op == OpMax):
		foldF32(op, view[float32](acc), view[float32](x))
	case op == OpSum && kind == Float64:
		sumF64(view[float64](acc), view[float64](x))
	case op == OpSum && (kind == Int32 || kind == Uint32):
		sumI32(view[uint32](acc), view[uint32](x))
	case op == OpSum && (kind == Int64 || kind == Uint64):
		sumI64(view[uint64](acc), view[uint64](x))
	case (op == OpMin || op == OpMax) && kind == Float64:
		a, v := view[float64](acc), view[float64](x)
		v = v[:len(a)]
		k := simd.MinMaxF64(op == OpMax, a, v)
		foldReal(op, a[k:], v[k:])
	default:
		return false
	}
	return true
}

// foldF32 folds float32 x into a: sum, min and max with the vector loops, the others generic.
func foldF32(op Op, a, x []float32) {
	switch op {
	case OpSum:
		sumF32(a, x)
	case OpMin, OpMax:
		x = x[:len(a)]
		k := simd.MinMaxF32(op == OpMax, a, x)
		foldReal(op, a[k:], x[k:])
	default:
		foldReal(op, a, x)
	}
}

// The sum loops: the vector prefix, then the scalar tail, a[i] += x[i] (the operand order the
// vector loops keep, for NaN payloads).
func sumF32(a, x []float32) {
	x = x[:len(a)]
	for i := simd.AddF32(a, x); i < len(a); i++ {
		a[i] += x[i]
	}
}

func sumF64(a, x []float64) {
	x = x[:len(a)]
	for i := simd.AddF64(a, x); i < len(a); i++ {
		a[i] += x[i]
	}
}

func sumI32(a, x []uint32) {
	x = x[:len(a)]
	for i := simd.AddI32(a, x); i < len(a); i++ {
		a[i] += x[i]
	}
}

func sumI64(a, x []uint64) {
	x = x[:len(a)]
	for i := simd.AddI64(a, x); i < len(a); i++ {
		a[i] += x[i]
	}
}

type integer interface {
	~int8 | ~int16 | ~int32 | ~int64 | ~uint8 | ~uint16 | ~uint32 | ~uint64
}

// foldInt folds x into a: the real types' ops (foldReal), and the bitwise ones.
func foldInt[T integer](op Op, a, x []T) {
	x = x[:len(a)]
	switch op {
	case OpAnd:
		for i := range a {
			a[i] &= x[i]
		}
	case OpOr:
		for i := range a {
			a[i] |= x[i]
		}
	case OpXor:
		for i := range a {
			a[i] ^= x[i]
		}
	default:
		foldReal(op, a, x)
	}
}

// foldReal folds x into a with the ops every integer and real float type has: min and max, and
// sum and prod (foldSumProd).
func foldReal[T integer | ~float32 | ~float64](op Op, a, x []T) {
	x = x[:len(a)]
	switch op {
	case OpMin:
		for i := range a {
			a[i] = min(a[i], x[i])
		}
	case OpMax:
		for i := range a {
			a[i] = max(a[i], x[i])
		}
	default:
		foldSumProd(op, a, x)
	}
}

// foldSumProd folds x into a with sum or prod, the ops of every element type, complex included.
func foldSumProd[T integer | ~float32 | ~float64 | ~complex64 | ~complex128](op Op, a, x []T) {
	x = x[:len(a)]
	switch op {
	case OpSum:
		for i := range a {
			a[i] += x[i]
		}
	case OpProd:
		for i := range a {
			a[i] *= x[i]
		}
	}
}
