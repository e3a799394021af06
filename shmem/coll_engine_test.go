package shmem

import (
	"testing"
	"unsafe"

	"github.com/roxamen/roxamen/shmem/internal/coll"
)

// The engine takes shmem's operations by value (AllReduce passes coll.Op(op)) and its element
// kinds' sizes for the bytes a call moves: both must be shmem's, op for op and type for type.
func TestEngineOpsAndKinds(t *testing.T) {
	for o, c := range map[Op]coll.Op{OpSum: coll.OpSum, OpProd: coll.OpProd, OpMin: coll.OpMin, OpMax: coll.OpMax, OpAnd: coll.OpAnd, OpOr: coll.OpOr, OpXor: coll.OpXor} {
		if uint8(o) != uint8(c) || o.String() != c.String() {
			t.Errorf("shmem's %v is %d, the engine's %v is %d", o, uint8(o), c, uint8(c))
		}
	}
	kindSize[int8](t)
	kindSize[int16](t)
	kindSize[int32](t)
	kindSize[int64](t)
	kindSize[int](t)
	kindSize[uint8](t)
	kindSize[uint16](t)
	kindSize[uint32](t)
	kindSize[uint64](t)
	kindSize[uint](t)
	kindSize[uintptr](t)
	kindSize[float32](t)
	kindSize[float64](t)
	kindSize[complex64](t)
	kindSize[complex128](t)
	kindSize[BFloat16](t)
	kindSize[Float16](t)
}

func kindSize[T Elem](t *testing.T) {
	t.Helper()
	var z T
	if k := elemKindOf[T](); k == 0 || k.Size() != int(unsafe.Sizeof(z)) {
		t.Errorf("%T is the engine's %v of %d bytes, want %d", z, k, k.Size(), unsafe.Sizeof(z))
	}
}
