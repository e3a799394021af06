package symheap

import (
	"errors"
	"strings"
	"testing"
)

func newHeap(t *testing.T, size, minAlign uint64) *Heap {
	t.Helper()
	h, err := New(size, minAlign)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func mustAlloc(t *testing.T, h *Heap, size, align uint64) uint64 {
	t.Helper()
	off, err := h.Alloc(size, align)
	if err != nil {
		t.Fatal(err)
	}
	return off
}

// wantErr checks that err wraps sentinel and that its message mentions every fragment.
func wantErr(t *testing.T, err, sentinel error, fragments ...string) {
	t.Helper()
	if !errors.Is(err, sentinel) {
		t.Fatalf("got error %v, want one wrapping %q", err, sentinel)
	}
	for _, f := range fragments {
		if !strings.Contains(err.Error(), f) {
			t.Errorf("error %q does not mention %q", err, f)
		}
	}
}

func TestNewRejects(t *testing.T) {
	_, err := New(1024, 48)
	wantErr(t, err, ErrBadAlign, "New", "48")
	_, err = New(1024, 0)
	wantErr(t, err, ErrBadAlign, "minimum alignment 0")
	_, err = New(1000, 64)
	wantErr(t, err, ErrOutOfRange, "1000", "64")
	_, err = New(0, 64)
	wantErr(t, err, ErrOutOfRange, "size 0")
}

func TestAllocFirstFitAndAlignment(t *testing.T) {
	h := newHeap(t, 4096, 64)
	a := mustAlloc(t, h, 10, 0)
	b := mustAlloc(t, h, 100, 0)
	c := mustAlloc(t, h, 1, 1024)
	if a != 0 || b != 64 || c != 1024 {
		t.Fatalf("offsets %d %d %d, want 0 64 1024", a, b, c)
	}
	// The gap left by the 1024 alignment is used first.
	if d := mustAlloc(t, h, 64, 0); d != 192 {
		t.Fatalf("offset %d, want 192 (first fit)", d)
	}
	if got, want := h.Used(), uint64(64+128+64+64); got != want {
		t.Fatalf("Used %d, want %d", got, want)
	}
}

func TestAllocBadAlign(t *testing.T) {
	h := newHeap(t, 4096, 64)
	_, err := h.Alloc(8, 24)
	wantErr(t, err, ErrBadAlign, "Alloc(size=8, align=24)", "alignment 24 is not a power of two")
	if h.Used() != 0 {
		t.Fatal("a failed Alloc changed the heap")
	}
}

func TestAllocZero(t *testing.T) {
	h := newHeap(t, 256, 64)
	a := mustAlloc(t, h, 0, 0)
	b := mustAlloc(t, h, 0, 0)
	if a == b {
		t.Fatalf("two zero-size allocations share offset %d", a)
	}
	if n, ok := h.SizeOf(a); !ok || n != 0 {
		t.Fatalf("SizeOf = %d,%v, want 0,true", n, ok)
	}
	if err := h.Check(a, 0); err != nil {
		t.Fatal(err)
	}
	wantErr(t, h.Check(a, 1), ErrOutOfRange, "past the end of the allocation at 0x0 of size 0")
	if err := h.Free(a); err != nil {
		t.Fatal(err)
	}
}

func TestOutOfMemory(t *testing.T) {
	h := newHeap(t, 1024, 64)
	mustAlloc(t, h, 256, 0)
	mid := mustAlloc(t, h, 256, 0)
	mustAlloc(t, h, 256, 0)
	if err := h.Free(mid); err != nil {
		t.Fatal(err)
	}
	_, err := h.Alloc(300, 0)
	wantErr(t, err, ErrOutOfMemory, "Alloc(size=300, align=0)", "aligned to 64", "largest free block 256", "512 free of 1024")
	var oom *OutOfMemoryError
	if !errors.As(err, &oom) || oom.Requested != 300 || oom.LargestFree != 256 || oom.Free != 512 {
		t.Fatalf("errors.As: %#v", oom)
	}
	// A size larger than the heap must not overflow the rounding.
	_, err = h.Alloc(^uint64(0), 0)
	wantErr(t, err, ErrOutOfMemory)
	if h.Used() != 512 {
		t.Fatalf("Used %d after failed Allocs, want 512", h.Used())
	}
}

func TestHugeAlignDoesNotOverflow(t *testing.T) {
	h := newHeap(t, 1<<20, 64)
	mustAlloc(t, h, 64, 0)
	_, err := h.Alloc(64, 1<<63)
	wantErr(t, err, ErrOutOfMemory)
}

func TestFreeErrors(t *testing.T) {
	h := newHeap(t, 1024, 64)
	a := mustAlloc(t, h, 100, 0)
	wantErr(t, h.Free(a+8), ErrNotAllocated, "Free(0x8)", "0x8")
	wantErr(t, h.Free(512), ErrNotAllocated, "Free(0x200)")
	wantErr(t, h.Free(4096), ErrNotAllocated, "outside the symmetric heap [0,0x400)")
	if err := h.Free(a); err != nil {
		t.Fatal(err)
	}
	wantErr(t, h.Free(a), ErrNotAllocated, "Free(0x0)", "already freed")
}

func TestFreeCoalesces(t *testing.T) {
	h := newHeap(t, 1024, 64)
	var offs []uint64
	for i := 0; i < 4; i++ {
		offs = append(offs, mustAlloc(t, h, 256, 0))
	}
	// Free in an order that exercises merging with the right, the left and both sides.
	for _, i := range []int{1, 3, 2, 0} {
		if err := h.Free(offs[i]); err != nil {
			t.Fatal(err)
		}
	}
	if len(h.blocks) != 1 || h.blocks[0].live || h.blocks[0].size != 1024 {
		t.Fatalf("after freeing everything: %+v, want one free block of 1024", h.blocks)
	}
	if off := mustAlloc(t, h, 1024, 0); off != 0 {
		t.Fatalf("whole-heap alloc at %d", off)
	}
}

func TestRealloc(t *testing.T) {
	h := newHeap(t, 1024, 64)
	a := mustAlloc(t, h, 64, 0)
	b := mustAlloc(t, h, 64, 0)
	// Grows in place into the free space after b.
	if off, err := h.Realloc(b, 300); err != nil || off != b {
		t.Fatalf("Realloc grow in place = %d,%v, want %d", off, err, b)
	}
	// a cannot grow in place (b follows): it moves, and the old block is freed.
	moved, err := h.Realloc(a, 100)
	if err != nil || moved == a {
		t.Fatalf("Realloc move = %d,%v", moved, err)
	}
	if _, ok := h.SizeOf(a); ok {
		t.Fatal("old block still live after a moving Realloc")
	}
	if n, _ := h.SizeOf(moved); n != 100 {
		t.Fatalf("SizeOf(moved) = %d", n)
	}
	// Shrinks in place and returns the tail.
	used := h.Used()
	if off, err := h.Realloc(b, 10); err != nil || off != b {
		t.Fatalf("Realloc shrink = %d,%v", off, err)
	}
	if h.Used() != used-320+64 {
		t.Fatalf("Used %d after shrink, want %d", h.Used(), used-320+64)
	}
	wantErr(t, h.Check(b, 11), ErrOutOfRange, "past the end of the allocation at 0x40 of size 10")
}

func TestReallocKeepsAlignment(t *testing.T) {
	h := newHeap(t, 8192, 64)
	a := mustAlloc(t, h, 64, 1024)
	mustAlloc(t, h, 64, 0) // blocks growth in place
	moved, err := h.Realloc(a, 512)
	if err != nil {
		t.Fatal(err)
	}
	if moved%1024 != 0 {
		t.Fatalf("moved to %#x, lost the 1024 alignment", moved)
	}
}

func TestReallocErrors(t *testing.T) {
	h := newHeap(t, 1024, 64)
	a := mustAlloc(t, h, 512, 0)
	mustAlloc(t, h, 64, 0)
	_, err := h.Realloc(a+64, 10)
	wantErr(t, err, ErrNotAllocated, "Realloc(0x40, size=10)")
	_, err = h.Realloc(a, 1024)
	wantErr(t, err, ErrOutOfMemory, "Realloc(0x0, size=1024)")
	_, err = h.Realloc(a, ^uint64(0))
	wantErr(t, err, ErrOutOfMemory)
	if n, ok := h.SizeOf(a); !ok || n != 512 {
		t.Fatalf("failed Realloc changed the allocation: %d,%v", n, ok)
	}
}

func TestFindAndSizeOf(t *testing.T) {
	h := newHeap(t, 1024, 64)
	a := mustAlloc(t, h, 100, 0)
	for _, off := range []uint64{a, a + 50, a + 99} {
		if s, n, ok := h.Find(off); !ok || s != a || n != 100 {
			t.Errorf("Find(%d) = %d,%d,%v", off, s, n, ok)
		}
	}
	for _, off := range []uint64{a + 100, a + 127, 512, 1024, ^uint64(0)} {
		if _, _, ok := h.Find(off); ok {
			t.Errorf("Find(%d) found an allocation", off)
		}
	}
	if _, ok := h.SizeOf(a + 1); ok {
		t.Error("SizeOf of an interior offset succeeded")
	}
}

func TestCheck(t *testing.T) {
	h := newHeap(t, 1024, 64)
	a := mustAlloc(t, h, 100, 0)
	if err := h.Check(a, 100); err != nil {
		t.Fatal(err)
	}
	if err := h.Check(a+99, 1); err != nil {
		t.Fatal(err)
	}
	wantErr(t, h.Check(a+90, 20), ErrOutOfRange, "Check(0x5a, n=20)", "past the end of the allocation at 0x0 of size 100")
	wantErr(t, h.Check(a+110, 1), ErrOutOfRange, "past the end of the allocation at 0x0 of size 100")
	wantErr(t, h.Check(512, 8), ErrNotAllocated, "0x200", "not inside a live allocation")
	wantErr(t, h.Check(1020, 8), ErrOutOfRange, "outside the symmetric heap [0,0x400)")
	wantErr(t, h.Check(4096, 0), ErrOutOfRange, "outside the symmetric heap")
	wantErr(t, h.Check(8, ^uint64(0)), ErrOutOfRange, "outside the symmetric heap")
}

func TestLayout(t *testing.T) {
	l := Layout{Bases: []uintptr{0x10000, 0, 0x90000}, Size: 0x1000}
	if a, err := l.Addr(2, 0x10); err != nil || a != 0x90010 {
		t.Fatalf("Addr = %#x,%v", a, err)
	}
	if o, err := l.Offset(0, 0x10fff); err != nil || o != 0xfff {
		t.Fatalf("Offset = %#x,%v", o, err)
	}
	_, err := l.Addr(3, 0)
	wantErr(t, err, ErrBadPE, "PE 3", "[0,3)")
	_, err = l.Addr(-1, 0)
	wantErr(t, err, ErrBadPE, "PE -1")
	_, err = l.Addr(1, 0)
	wantErr(t, err, ErrNotMapped, "PE 1")
	_, err = l.Addr(0, 0x1000)
	wantErr(t, err, ErrOutOfRange, "PE 0", "0x1000")
	_, err = l.Offset(2, 0x91000)
	wantErr(t, err, ErrOutOfRange, "PE 2", "0x91000", "[0x90000,0x91000)")
	_, err = l.Offset(2, 0x8ffff)
	wantErr(t, err, ErrOutOfRange, "0x8ffff")
	_, err = l.Offset(7, 0x90000)
	wantErr(t, err, ErrBadPE, "PE 7")
}
