package shmem

import (
	"reflect"

	"github.com/roxamen/roxamen/shmem/internal/coll"
)

// Op is a reduction operation (the OP of shmem_TYPE_OP_reduce).
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

func (o Op) String() string { return coll.Op(o).String() }

// BFloat16 is a bfloat16 number (the top half of a float32), an extension type of the
// reductions: sum, min and max, accumulated in float32 and rounded (to nearest even) once.
type BFloat16 uint16

// Float16 is an IEEE 754 binary16 number, an extension type like BFloat16.
type Float16 uint16

// BFloat16From rounds f to the nearest bfloat16 (ties to even); NaN stays NaN.
func BFloat16From(f float32) BFloat16 { return BFloat16(coll.BFloat16From(f)) }

// Float32 returns b exactly.
func (b BFloat16) Float32() float32 { return coll.BFloat16To(uint16(b)) }

// Float32 returns h exactly.
func (h Float16) Float32() float32 { return coll.Float16To(uint16(h)) }

// Float16From rounds f to the nearest binary16 (ties to even); out of range is infinity.
func Float16From(f float32) Float16 { return Float16(coll.Float16From(f)) }

// elemKindOf is T as the collectives see it, 0 for a type they do not take.
func elemKindOf[T Elem]() coll.Kind {
	rt := reflect.TypeFor[T]()
	switch rt {
	case reflect.TypeFor[BFloat16]():
		return coll.BFloat16
	case reflect.TypeFor[Float16]():
		return coll.Float16
	}
	switch rt.Kind() {
	case reflect.Int8:
		return coll.Int8
	case reflect.Int16:
		return coll.Int16
	case reflect.Int32:
		return coll.Int32
	case reflect.Int64:
		return coll.Int64
	case reflect.Int:
		if rt.Size() == 4 {
			return coll.Int32
		}
		return coll.Int64
	case reflect.Uint8:
		return coll.Uint8
	case reflect.Uint16:
		return coll.Uint16
	case reflect.Uint32:
		return coll.Uint32
	case reflect.Uint64:
		return coll.Uint64
	case reflect.Uint, reflect.Uintptr:
		if rt.Size() == 4 {
			return coll.Uint32
		}
		return coll.Uint64
	case reflect.Float32:
		return coll.Float32
	case reflect.Float64:
		return coll.Float64
	case reflect.Complex64:
		return coll.Complex64
	case reflect.Complex128:
		return coll.Complex128
	}
	return 0
}
