// Package symheap is the symmetric heap allocator: it hands out offsets into a heap of fixed size
// that every PE owns one copy of. It is deterministic: the same sequence of calls returns the same
// offsets on every PE (first fit in address order, no maps, no clocks), which is what lets an
// offset name the same object on every PE. It never touches the memory it manages; Layout turns an
// offset into an address for any PE.
//
// The package imports only the standard library, so that it stays testable on its own.
package symheap

import (
	"fmt"
	"math/bits"
	"sort"
	"sync"
)

// block is one contiguous piece of the heap, free or live. The blocks of a heap are sorted by
// offset, cover [0,size) without gaps, and no two free blocks are adjacent (Free coalesces).
type block struct {
	off, size uint64 // size is a multiple of minAlign: what the block reserves
	live      bool
	req       uint64 // bytes the caller asked for (<= size); what SizeOf and Check see
	align     uint64 // alignment the caller asked for, kept so that Realloc keeps it when it moves
}

// Heap manages the offsets [0,Size()). It is safe for use from several goroutines, but callers that
// need the same offsets on every PE must issue the same calls in the same order on every PE.
type Heap struct {
	mu       sync.Mutex
	size     uint64
	minAlign uint64
	used     uint64
	blocks   []block
}

func isPow2(x uint64) bool { return x != 0 && x&(x-1) == 0 }

// New returns a heap of size bytes whose allocations are all aligned to minAlign, a power of two
// (64 keeps every allocation on its own cache line). size must be a positive multiple of minAlign,
// so that every block boundary stays aligned.
func New(size, minAlign uint64) (*Heap, error) {
	op := fmt.Sprintf("New(size=%d, minAlign=%d)", size, minAlign)
	if !isPow2(minAlign) {
		return nil, errorf(op, ErrBadAlign, "minimum alignment %d is not a power of two", minAlign)
	}
	if size == 0 || size%minAlign != 0 {
		return nil, errorf(op, ErrOutOfRange, "heap size %d is not a positive multiple of the minimum alignment %d", size, minAlign)
	}
	return &Heap{size: size, minAlign: minAlign, blocks: []block{{off: 0, size: size}}}, nil
}

// Size returns the heap size in bytes.
func (h *Heap) Size() uint64 { return h.size }

// MinAlign returns the alignment every allocation has at least.
func (h *Heap) MinAlign() uint64 { return h.minAlign }

// Used returns the bytes reserved by live allocations, including the rounding of each one up to a
// multiple of MinAlign.
func (h *Heap) Used() uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.used
}

// reserve is the number of bytes a request of n bytes occupies. A request of 0 still reserves
// minAlign bytes so that it gets an offset of its own. The caller has checked n <= h.size.
func (h *Heap) reserve(n uint64) uint64 {
	if n == 0 {
		return h.minAlign
	}
	return (n + h.minAlign - 1) &^ (h.minAlign - 1)
}

// Alloc reserves size bytes aligned to align and returns their offset. align 0 means MinAlign;
// any other align must be a power of two (values below MinAlign give MinAlign).
//
// Alloc(0, ...) succeeds: it reserves MinAlign bytes at an offset of its own, SizeOf reports 0,
// and it must be freed like any other allocation. (OpenSHMEM's shmem_malloc(0) returns NULL; the
// shmem layer maps a zero size to that before it calls here, if it wants to. Giving every call a
// distinct offset keeps Free, Realloc and the call-for-call symmetry uniform.)
//
// On failure nothing changes and the error is *OutOfMemoryError or an *Error wrapping ErrBadAlign.
func (h *Heap) Alloc(size, align uint64) (uint64, error) {
	op := fmt.Sprintf("Alloc(size=%d, align=%d)", size, align)
	if align != 0 && !isPow2(align) {
		return 0, errorf(op, ErrBadAlign, "alignment %d is not a power of two", align)
	}
	if align < h.minAlign {
		align = h.minAlign
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	off, ok := h.alloc(size, align)
	if !ok {
		return 0, h.oom(op, size, align)
	}
	return off, nil
}

// alloc is first fit in address order: the lowest offset that can hold the request. Lowest-first
// is deterministic and keeps the heap's top free for large late allocations.
func (h *Heap) alloc(size, align uint64) (uint64, bool) {
	if size > h.size {
		return 0, false
	}
	need := h.reserve(size)
	for i, b := range h.blocks {
		if b.live || b.size < need {
			continue
		}
		start, ok := alignUp(b.off, align)
		end := b.off + b.size
		if !ok || start >= end || end-start < need {
			continue
		}
		carved := make([]block, 0, 3)
		if start > b.off {
			carved = append(carved, block{off: b.off, size: start - b.off})
		}
		carved = append(carved, block{off: start, size: need, live: true, req: size, align: align})
		if start+need < end {
			carved = append(carved, block{off: start + need, size: end - start - need})
		}
		h.blocks = append(h.blocks[:i], append(carved, h.blocks[i+1:]...)...)
		h.used += need
		return start, true
	}
	return 0, false
}

// alignUp rounds off up to a multiple of align (a power of two); ok is false on overflow.
func alignUp(off, align uint64) (uint64, bool) {
	sum, carry := bits.Add64(off, align-1, 0)
	return sum &^ (align - 1), carry == 0
}

func (h *Heap) oom(op string, size, align uint64) error {
	var largest uint64
	for _, b := range h.blocks {
		if !b.live && b.size > largest {
			largest = b.size
		}
	}
	return &OutOfMemoryError{Op: op, Requested: size, Align: align, LargestFree: largest,
		Free: h.size - h.used, HeapSize: h.size}
}

// index returns the index of the block containing off (off < h.size).
func (h *Heap) index(off uint64) int {
	return sort.Search(len(h.blocks), func(i int) bool { return h.blocks[i].off > off }) - 1
}

// liveAt returns the index of the live block that starts exactly at off, or -1.
func (h *Heap) liveAt(off uint64) int {
	if off >= h.size {
		return -1
	}
	i := h.index(off)
	if b := h.blocks[i]; b.off != off || !b.live {
		return -1
	}
	return i
}

func (h *Heap) notAllocated(op string, off uint64) error {
	if off >= h.size {
		return errorf(op, ErrNotAllocated, "offset %#x is outside the symmetric heap [0,%#x)", off, h.size)
	}
	return errorf(op, ErrNotAllocated, "no live allocation starts at offset %#x (never allocated, already freed, or not its start)", off)
}

// Free releases the allocation starting at off and merges it with free neighbours. Freeing an
// offset that is not the start of a live allocation (including a second Free) is an error
// wrapping ErrNotAllocated, and changes nothing.
func (h *Heap) Free(off uint64) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	i := h.liveAt(off)
	if i < 0 {
		return h.notAllocated(fmt.Sprintf("Free(%#x)", off), off)
	}
	h.release(i)
	return nil
}

// release frees block i and coalesces it with its free neighbours.
func (h *Heap) release(i int) {
	h.used -= h.blocks[i].size
	h.blocks[i] = block{off: h.blocks[i].off, size: h.blocks[i].size}
	if i+1 < len(h.blocks) && !h.blocks[i+1].live {
		h.blocks[i].size += h.blocks[i+1].size
		h.blocks = append(h.blocks[:i+1], h.blocks[i+2:]...)
	}
	if i > 0 && !h.blocks[i-1].live {
		h.blocks[i-1].size += h.blocks[i].size
		h.blocks = append(h.blocks[:i], h.blocks[i+1:]...)
	}
}

// Realloc resizes the allocation starting at off to size bytes and returns its offset, which is
// off when it could shrink or grow in place (growing takes the start of the next block when that
// block is free and large enough). Otherwise it allocates a new block with the original alignment
// while the old one is still live, so the two never overlap, then frees the old one: the caller
// copies min(old size, size) bytes from off to the new offset before it allocates again (the heap
// never touches memory). On failure nothing changes and the old allocation stays valid.
func (h *Heap) Realloc(off, size uint64) (uint64, error) {
	op := fmt.Sprintf("Realloc(%#x, size=%d)", off, size)
	h.mu.Lock()
	defer h.mu.Unlock()
	i := h.liveAt(off)
	if i < 0 {
		return 0, h.notAllocated(op, off)
	}
	b := &h.blocks[i]
	if size > h.size {
		return 0, h.oom(op, size, b.align)
	}
	need := h.reserve(size)
	switch {
	case need <= b.size:
		if tail := b.size - need; tail > 0 {
			b.size = need
			h.used -= tail
			h.blocks = append(h.blocks[:i+1], append([]block{{off: off + need, size: tail}}, h.blocks[i+1:]...)...)
			if i+2 < len(h.blocks) && !h.blocks[i+2].live {
				h.blocks[i+1].size += h.blocks[i+2].size
				h.blocks = append(h.blocks[:i+2], h.blocks[i+3:]...)
			}
		}
		h.blocks[i].req = size
		return off, nil
	case i+1 < len(h.blocks) && !h.blocks[i+1].live && h.blocks[i+1].size >= need-b.size:
		grow := need - b.size
		b.size, b.req = need, size
		h.used += grow
		next := &h.blocks[i+1]
		next.off += grow
		next.size -= grow
		if next.size == 0 {
			h.blocks = append(h.blocks[:i+1], h.blocks[i+2:]...)
		}
		return off, nil
	}
	align := b.align
	moved, ok := h.alloc(size, align)
	if !ok {
		return 0, h.oom(op, size, align)
	}
	h.release(h.liveAt(off))
	return moved, nil
}

// SizeOf returns the size asked for by the live allocation starting at off.
func (h *Heap) SizeOf(off uint64) (uint64, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	i := h.liveAt(off)
	if i < 0 {
		return 0, false
	}
	return h.blocks[i].req, true
}

// Find returns the live allocation containing off: off is its start, or lies within its first
// size bytes (the rounding padding after them belongs to no allocation).
func (h *Heap) Find(off uint64) (start, size uint64, ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if off >= h.size {
		return 0, 0, false
	}
	b := h.blocks[h.index(off)]
	if !b.live || (off != b.off && off-b.off >= b.req) {
		return 0, 0, false
	}
	return b.off, b.req, true
}

// Check returns nil when [off,off+n) lies inside one live allocation (n 0 is allowed anywhere Find
// succeeds), else an error naming off, n and why, wrapping ErrOutOfRange or ErrNotAllocated.
func (h *Heap) Check(off, n uint64) error {
	op := fmt.Sprintf("Check(%#x, n=%d)", off, n)
	if off >= h.size || n > h.size-off {
		return errorf(op, ErrOutOfRange, "[%#x,%#x) is outside the symmetric heap [0,%#x)", off, rangeEnd(off, n), h.size)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	b := h.blocks[h.index(off)]
	if !b.live {
		return errorf(op, ErrNotAllocated, "offset %#x is not inside a live allocation", off)
	}
	if end := b.off + b.req; off+n > end || (off >= end && off != b.off) {
		return errorf(op, ErrOutOfRange, "[%#x,%#x) runs past the end of the allocation at %#x of size %d", off, off+n, b.off, b.req)
	}
	return nil
}

// rangeEnd is off+n for messages, saturating instead of wrapping.
func rangeEnd(off, n uint64) uint64 {
	sum, carry := bits.Add64(off, n, 0)
	if carry != 0 {
		return ^uint64(0)
	}
	return sum
}
