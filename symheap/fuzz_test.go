package symheap

import (
	"errors"
	"fmt"
	"slices"
	"testing"
)

// model is the obviously-correct heap the fuzzer compares against: one owner per minAlign unit.
type model struct {
	minAlign uint64
	owner    []int // 0 = free, else the id of the live allocation
	allocs   []modelAlloc
	nextID   int
}

type modelAlloc struct {
	id                 int
	off, req, reserved uint64
	align              uint64
}

func (m *model) used() (n uint64) {
	for _, a := range m.allocs {
		n += a.reserved
	}
	return n
}

// freeRun reports whether [off,off+n) is free, or owned by id.
func (m *model) freeRun(off, n uint64, id int) bool {
	if off+n > uint64(len(m.owner))*m.minAlign {
		return false
	}
	for u := off / m.minAlign; u < (off+n)/m.minAlign; u++ {
		if m.owner[u] != 0 && m.owner[u] != id {
			return false
		}
	}
	return true
}

// fits reports whether some align-aligned run of n free bytes exists.
func (m *model) fits(n, align uint64) bool {
	for off := uint64(0); off+n <= uint64(len(m.owner))*m.minAlign; off += align {
		if m.freeRun(off, n, 0) {
			return true
		}
	}
	return false
}

func (m *model) set(off, n uint64, id int) {
	for u := off / m.minAlign; u < (off+n)/m.minAlign; u++ {
		m.owner[u] = id
	}
}

func (m *model) at(off uint64) int {
	for i, a := range m.allocs {
		if a.off == off {
			return i
		}
	}
	return -1
}

func (m *model) reserve(size uint64) uint64 {
	return max(m.minAlign, (size+m.minAlign-1)/m.minAlign*m.minAlign)
}

// ops reads the fuzz input as a program.
type ops struct{ data []byte }

func (o *ops) next() uint64 {
	if len(o.data) == 0 {
		return 0
	}
	b := o.data[0]
	o.data = o.data[1:]
	return uint64(b)
}

// runHeap executes the program in data on a fresh heap, checks every result against the model,
// and returns the trace of results (for the determinism check).
func runHeap(t *testing.T, data []byte) []string {
	o := &ops{data: data}
	const minAlign = 16
	units := 1 + o.next()%64
	h, err := New(units*minAlign, minAlign)
	if err != nil {
		t.Fatal(err)
	}
	m := &model{minAlign: minAlign, owner: make([]int, units)}
	var trace []string
	for step := 0; len(o.data) > 0; step++ {
		fail := func(format string, args ...any) {
			t.Helper()
			t.Fatalf("step %d: %s\nmodel allocs %+v\nheap blocks %+v", step, fmt.Sprintf(format, args...), m.allocs, h.blocks)
		}
		switch o.next() % 5 {
		case 0: // Alloc
			size := o.next() * 3
			align := uint64(0)
			if a := o.next() % 9; a > 0 {
				align = 1 << (a - 1)
			}
			eff := max(align, minAlign)
			off, err := h.Alloc(size, align)
			trace = append(trace, fmt.Sprint("alloc", off, err))
			need := m.reserve(size)
			if err != nil {
				if !errors.Is(err, ErrOutOfMemory) || m.fits(need, eff) {
					fail("Alloc(%d,%d) failed with %v though the model has room", size, align, err)
				}
				continue
			}
			if off%eff != 0 || !m.freeRun(off, need, 0) {
				fail("Alloc(%d,%d) = %#x: misaligned or overlapping", size, align, off)
			}
			m.nextID++
			m.set(off, need, m.nextID)
			m.allocs = append(m.allocs, modelAlloc{id: m.nextID, off: off, req: size, reserved: need, align: eff})
		case 1: // Free a live allocation
			if len(m.allocs) == 0 {
				continue
			}
			i := int(o.next()) % len(m.allocs)
			a := m.allocs[i]
			if err := h.Free(a.off); err != nil {
				fail("Free(%#x) of a live allocation: %v", a.off, err)
			}
			m.set(a.off, a.reserved, 0)
			m.allocs = slices.Delete(m.allocs, i, i+1)
		case 2: // Free any offset: must succeed exactly on live starts
			off := (o.next()<<8 | o.next()) % (h.Size() + 64)
			err := h.Free(off)
			trace = append(trace, fmt.Sprint("free", off, err))
			i := m.at(off)
			if (err == nil) != (i >= 0) {
				fail("Free(%#x) = %v, model live=%v", off, err, i >= 0)
			}
			if err != nil && !errors.Is(err, ErrNotAllocated) {
				fail("Free(%#x) error %v does not wrap ErrNotAllocated", off, err)
			}
			if i >= 0 {
				m.set(m.allocs[i].off, m.allocs[i].reserved, 0)
				m.allocs = slices.Delete(m.allocs, i, i+1)
			}
		case 3: // Realloc
			if len(m.allocs) == 0 {
				continue
			}
			i := int(o.next()) % len(m.allocs)
			a := m.allocs[i]
			size := o.next() * 3
			need := m.reserve(size)
			off, err := h.Realloc(a.off, size)
			trace = append(trace, fmt.Sprint("realloc", off, err))
			inPlace := m.freeRun(a.off, need, a.id)
			if err != nil {
				if !errors.Is(err, ErrOutOfMemory) || inPlace || m.fits(need, a.align) {
					fail("Realloc(%#x,%d) failed with %v though the model has room", a.off, size, err)
				}
				continue
			}
			if inPlace != (off == a.off) {
				fail("Realloc(%#x,%d) = %#x, model in place=%v", a.off, size, off, inPlace)
			}
			if off != a.off && (off%a.align != 0 || !m.freeRun(off, need, 0)) {
				fail("Realloc(%#x,%d) moved to %#x: misaligned or overlapping", a.off, size, off)
			}
			m.set(a.off, a.reserved, 0)
			m.set(off, need, a.id)
			m.allocs[i] = modelAlloc{id: a.id, off: off, req: size, reserved: need, align: a.align}
		case 4: // Check, Find and SizeOf at any offset
			off := (o.next()<<8 | o.next()) % (h.Size() + 64)
			n := o.next()
			inside, start := false, -1
			for j, a := range m.allocs {
				if off == a.off || (off > a.off && off < a.off+a.req) {
					start = j
					inside = off+n <= a.off+a.req
				}
			}
			err := h.Check(off, n)
			if (err == nil) != inside {
				fail("Check(%#x,%d) = %v, model inside=%v", off, n, err, inside)
			}
			s, sz, ok := h.Find(off)
			if ok != (start >= 0) || (ok && (s != m.allocs[start].off || sz != m.allocs[start].req)) {
				fail("Find(%#x) = %#x,%d,%v", off, s, sz, ok)
			}
			sz, ok = h.SizeOf(off)
			if j := m.at(off); ok != (j >= 0) || (ok && sz != m.allocs[j].req) {
				fail("SizeOf(%#x) = %d,%v", off, sz, ok)
			}
		}
		if h.Used() != m.used() {
			fail("Used %d, model %d", h.Used(), m.used())
		}
		checkBlocks(t, h)
	}
	// Coalescing: after freeing everything, the whole heap is one free block.
	for _, a := range m.allocs {
		if err := h.Free(a.off); err != nil {
			t.Fatalf("final Free(%#x): %v", a.off, err)
		}
	}
	if len(h.blocks) != 1 || h.blocks[0].live || h.blocks[0].size != h.Size() || h.Used() != 0 {
		t.Fatalf("after freeing everything the heap is %+v, want one free block", h.blocks)
	}
	return trace
}

// checkBlocks verifies the heap's invariants: blocks sorted, contiguous, covering the heap,
// aligned, and no two free blocks adjacent.
func checkBlocks(t *testing.T, h *Heap) {
	t.Helper()
	var at uint64
	for i, b := range h.blocks {
		if b.off != at || b.size == 0 || b.size%h.minAlign != 0 || (b.live && b.req > b.size) {
			t.Fatalf("block %d %+v breaks the layout: %+v", i, b, h.blocks)
		}
		if i > 0 && !b.live && !h.blocks[i-1].live {
			t.Fatalf("blocks %d and %d are both free: not coalesced: %+v", i-1, i, h.blocks)
		}
		at += b.size
	}
	if at != h.size {
		t.Fatalf("blocks cover %d bytes of %d", at, h.size)
	}
}

func FuzzHeap(f *testing.F) {
	// Seeds: fill and drain, alignment gaps, realloc grow/shrink/move, bogus frees, checks.
	f.Add([]byte{63, 0, 10, 0, 0, 10, 0, 0, 10, 0, 1, 0, 1, 0, 1, 0})
	f.Add([]byte{15, 0, 5, 8, 0, 1, 0, 0, 200, 0, 0, 7, 0, 4, 0, 3, 9, 4, 0, 30, 3, 0, 255})
	f.Add([]byte{31, 0, 20, 0, 0, 20, 0, 3, 0, 100, 3, 1, 1, 3, 0, 0, 1, 0, 1, 0})
	f.Add([]byte{7, 2, 0, 0, 0, 1, 0, 2, 0, 0, 2, 0, 0, 2, 0, 200})
	f.Add([]byte{40, 0, 50, 2, 4, 0, 0, 10, 4, 0, 75, 0, 4, 0, 160, 40, 0, 255, 0, 4, 2, 0, 0})
	f.Add([]byte{3, 0, 255, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{15, 0, 5, 0, 0, 5, 0, 1, 1, 3, 0, 30, 3, 0, 2})
	f.Fuzz(func(t *testing.T, data []byte) {
		first := runHeap(t, data)
		second := runHeap(t, data)
		if !slices.Equal(first, second) {
			t.Fatalf("two heaps fed the same calls diverged:\n%v\n%v", first, second)
		}
	})
}
