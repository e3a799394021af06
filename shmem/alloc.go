package shmem

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/roxamen/roxamen/shmem/internal/coll"
	"github.com/roxamen/roxamen/symheap"
)

// Mem is a symmetric allocation of bytes (or a part of one): the same offset and size on every PE.
type Mem struct {
	w    *World
	a    *allocation
	off  uint64
	size int
}

// allocation is the identity of one symmetric allocation. Free and Realloc retire it; every Mem and
// Sym made from it carries it, so a call through a stale one is caught by one atomic load, not a
// lookup, and fails before anything moves.
type allocation struct {
	seq  uint64 // counts the World's allocations: the same number on every PE
	call string // the call that made it
	off  uint64
	size int
	gone atomic.Pointer[retirement] // nil while live
}

type retirement struct {
	call string // Free or Realloc
	by   uint64 // for Realloc, the allocation that replaces it
}

func (a *allocation) String() string {
	return fmt.Sprintf("allocation #%d (%s of %d bytes at heap offset %d)", a.seq, a.call, a.size, a.off)
}

// live returns the error of a call through a stale a, or nil.
func (a *allocation) live(w *World, call string) error {
	r := a.gone.Load()
	if r == nil {
		return nil
	}
	how := "released by Free"
	if r.call == "Realloc" {
		how = fmt.Sprintf("replaced by Realloc with allocation #%d", r.by)
	}
	return w.errorf(call, ErrFreed, "%v was %s", a, how)
}

// newAllocation records an allocation at off; the caller holds allocMu.
func (w *World) newAllocation(call string, off uint64, size int) *allocation {
	w.allocSeq++
	a := &allocation{seq: w.allocSeq, call: call, off: off, size: size}
	w.allocs[off] = a
	return a
}

// retire ends a's life; the caller holds allocMu.
func (w *World) retire(a *allocation, r *retirement) {
	a.gone.Store(r)
	if w.allocs[a.off] == a {
		delete(w.allocs, a.off)
	}
}

// whole checks that m is a whole live allocation of w, as Free and Realloc need.
func (w *World) whole(call string, m Mem) error {
	if m.w != w || m.a == nil {
		return w.errorf(call, ErrNotSymmetric, "allocation at offset %d does not belong to this World", m.off)
	}
	if err := m.a.live(w, call); err != nil {
		return err
	}
	if m.off != m.a.off || m.size != m.a.size {
		return w.errorf(call, ErrBadArgument, "bytes [%d, %d) are part of %v, not all of it", m.off, m.off+uint64(m.size), m.a)
	}
	return nil
}

// Size returns the allocation's size in bytes.
func (m Mem) Size() int { return m.size }

// Offset returns the allocation's offset in the symmetric heap (the same on every PE).
func (m Mem) Offset() uint64 { return m.off }

// Local returns this PE's copy.
func (m Mem) Local() []byte {
	if m.w == nil || m.w.closed.Load() || m.w.local == nil || m.a.gone.Load() != nil {
		return nil // a GPU heap: use the device address (Sym.Device) instead
	}
	return m.w.local[m.off : m.off+uint64(m.size) : m.off+uint64(m.size)]
}

// Malloc allocates size bytes on every PE (shmem_malloc). It is collective: every PE must call it
// with the same size; a mismatch is an error (ErrMismatch) naming both PEs and sizes, and nothing
// is allocated anywhere.
func (w *World) Malloc(size int) (Mem, error) { return w.alloc("Malloc", "", size, 0, false) }

// Calloc allocates n*size zeroed bytes on every PE (shmem_calloc).
func (w *World) Calloc(n, size int) (Mem, error) {
	if n < 0 || size < 0 || (size != 0 && n > int(^uint(0)>>1)/size) {
		if err := w.check("Calloc"); err != nil {
			return Mem{}, err
		}
		return Mem{}, w.refuse("Calloc", coll.CallCalloc, w.errorf("Calloc", ErrBadArgument, "count %d x size %d", n, size))
	}
	return w.calloc("Calloc", n, size)
}

func (w *World) calloc(call string, n, size int) (Mem, error) {
	return w.alloc("Calloc", call, n*size, 0, true)
}

// Align allocates size bytes aligned to align (a power of two) on every PE (shmem_align).
func (w *World) Align(align, size int) (Mem, error) {
	if err := w.check("Align"); err != nil {
		return Mem{}, err
	}
	if align <= 0 || align&(align-1) != 0 {
		return Mem{}, w.refuse("Align", coll.CallAlign, w.errorf("Align", ErrBadArgument, "alignment %d is not a positive power of two", align))
	}
	return w.alloc("Align", "", size, align, false)
}

// alloc makes an allocation; allocName, where set, is the user's call that the allocation's
// identity names (Alloc goes through Calloc).
func (w *World) alloc(call, allocName string, size, align int, zero bool) (Mem, error) {
	user := call // the call the user made, for the errors that are this PE's alone
	if allocName != "" {
		user = allocName
	}
	if err := w.check(user); err != nil {
		return Mem{}, err
	}
	id := coll.CallMalloc
	switch call {
	case "Calloc":
		id = coll.CallCalloc
	case "Align":
		id = coll.CallAlign
	}
	if size < 0 {
		return Mem{}, w.refuse(call, id, w.errorf(user, ErrBadArgument, "negative size %d", size))
	}
	c, err := w.coll.begin(w, call)
	if err != nil {
		return Mem{}, err
	}
	defer c.end()
	// shmem_malloc, calloc and align end with a barrier_all: the caller's earlier puts are complete
	// on return (memmodel: MP+malloc). The quiet comes first, and the call's place in the sequence
	// is then taken by a step that waits for every PE (the header exchange, or the bootstrap's
	// agreement on the NIC path), which is the barrier: a second one would open the dissemination
	// barrier's transport connections at a PE's first allocation (lazy connections).
	if err := w.quiet(call, -1); err != nil {
		return Mem{}, err
	}
	if err := c.inSequence(context.Background(), id, int64(size), int64(align)); err != nil {
		return Mem{}, err
	}
	w.acquire() // as BarrierAll's
	w.allocMu.Lock()
	defer w.allocMu.Unlock()
	off, err := w.heap.Alloc(uint64(size), uint64(align))
	if err != nil {
		return Mem{}, w.heapError(call, err, "size %d", size)
	}
	name := call
	if allocName != "" {
		name = allocName
	}
	m := Mem{w: w, a: w.newAllocation(name, off, size), off: off, size: size}
	// Nobody may put into the new object before its owner has zeroed it.
	if zero {
		if err := w.zero(call, off, size); err != nil {
			return Mem{}, err
		}
		if err := c.barrier(context.Background()); err != nil {
			return Mem{}, err
		}
	}
	return m, nil
}

// agree checks, through the rendezvous, that every PE makes this collective call, as the same
// call of its sequence, with the same arguments.
func (c *collective) agree(a, b uint64) error {
	w, call := c.w, c.call
	seq := c.number()
	ctx, cancel := context.WithTimeout(context.Background(), w.timeout)
	defer cancel()
	msg := binary.AppendUvarint(nil, seq)
	msg = binary.AppendUvarint(msg, a)
	msg = binary.AppendUvarint(msg, b)
	msg = binary.AppendUvarint(msg, uint64(len(c.prev)))
	msg = append(msg, c.prev...)
	msg = append(msg, call...)
	all, err := c.allgather(ctx, msg)
	if c.nic != nil && errors.Is(err, errElsewhere) {
		// Some PE is at another call: the header exchange says which, on every PE, and the
		// PEs not in this agreement complete it (Rejoin) so that the bootstrap stays in step.
		xerr := c.elsewhere()
		if xerr == nil || errors.Is(xerr, ErrMismatch) {
			<-c.rest // completed by the others (bounded by ctx); its result says nothing more
		}
		return xerr
	}
	if err != nil {
		return &Error{Call: call, PE: w.pe, Kind: kindOf(err, ErrPEFailed), Err: err}
	}
	for pe, got := range all {
		var f [4]uint64
		rest, ok := got, true
		for i := range f {
			v, k := binary.Uvarint(rest)
			if k <= 0 {
				ok = false
				break
			}
			f[i], rest = v, rest[k:]
		}
		if !ok || f[3] > uint64(len(rest)) {
			return w.errorf(call, ErrMismatch, "PE %d sent a malformed request", pe)
		}
		gseq, ga, gb := f[0], f[1], f[2]
		gprev, gcall := string(rest[:f[3]]), string(rest[f[3]:])
		if gseq != seq {
			return c.mismatch(pe, gseq, gcall, gprev)
		}
		if gcall != call {
			return c.mismatch(pe, gseq, gcall, "")
		}
		if ga != a || gb != b {
			switch {
			case ga == refusedArg && a != refusedArg:
				return w.errorf(call, ErrMismatch, "PE %d refused its %s: %v (its own error says which); the call fails on every PE", pe, gcall, refusalKind(uint8(gb)))
			case a == refusedArg:
				return nil // this PE refused the call: its own error is the one it returns
			}
			if b == 0 && gb == 0 {
				return w.errorf(call, ErrMismatch, "PE %d asked for %d bytes, PE %d for %d", w.pe, a, pe, ga)
			}
			return w.errorf(call, ErrMismatch, "PE %d asked for (%d, %d), PE %d for (%d, %d)", w.pe, a, b, pe, ga, gb)
		}
	}
	return nil
}

// errElsewhere ends an agreement's wait on the NIC path where some PE is at another call.
var errElsewhere = errors.New("a PE is at another collective call")

// allgather is the bootstrap's Allgather of msg. On the NIC path (c.nic) its wait also watches
// for a PE at another call (see sparse): then it returns errElsewhere, with the Allgather still
// running (c.rest delivers its end).
func (c *collective) allgather(ctx context.Context, msg []byte) ([][]byte, error) {
	w := c.w
	if c.nic == nil {
		return w.boot.Allgather(ctx, msg)
	}
	type result struct {
		all [][]byte
		err error
	}
	done := make(chan result, 1)
	go func() {
		all, err := w.boot.Allgather(ctx, msg)
		done <- result{all, err}
	}()
	// The first look comes after an agreement's usual time: the watch costs a wakeup each.
	d := 500 * time.Microsecond
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		select {
		case r := <-done:
			return r.all, r.err
		case <-timer.C:
		}
		if c.nic.Arrived() || c.barrierElsewhere() {
			rest := make(chan struct{})
			go func() { <-done; close(rest) }()
			c.rest = rest
			return nil, errElsewhere
		}
		d = min(2*d, 2*time.Millisecond)
		timer.Reset(d)
	}
}

func (w *World) heapError(call string, err error, format string, args ...any) error {
	kind := ErrBadArgument
	switch {
	case errors.Is(err, symheap.ErrOutOfMemory):
		kind = ErrOutOfMemory
	case errors.Is(err, symheap.ErrNotAllocated), errors.Is(err, symheap.ErrOutOfRange):
		kind = ErrNotSymmetric
	}
	return &Error{Call: call, PE: w.pe, Kind: kind, Detail: fmt.Sprintf(format, args...), Err: err}
}

// Free releases m on every PE (shmem_free). It is collective and completes this PE's operations
// first. m, and every Sym and Mem made from it, are retired: a later call through one fails with
// ErrFreed naming the allocation, and moves nothing.
func (w *World) Free(m Mem) error {
	if err := w.check("Free"); err != nil {
		return err
	}
	if err := w.whole("Free", m); err != nil {
		return w.refuse("Free", coll.CallFree, err)
	}
	c, err := w.coll.begin(w, "Free")
	if err != nil {
		return err
	}
	defer c.end()
	if err := c.inSequence(context.Background(), coll.CallFree, int64(m.off), int64(m.a.seq)); err != nil {
		return err
	}
	// No PE may still be writing into the object when it is reused.
	if err := c.barrier(context.Background()); err != nil {
		return err
	}
	w.allocMu.Lock()
	defer w.allocMu.Unlock()
	if err := m.a.live(w, "Free"); err != nil {
		return err // another goroutine freed it meanwhile
	}
	if err := w.heap.Free(m.off); err != nil {
		return w.heapError("Free", err, "offset %d", m.off)
	}
	w.retire(m.a, &retirement{call: "Free"})
	return nil
}

// Realloc resizes m on every PE (shmem_realloc), keeping its contents up to the smaller size. The
// returned Mem replaces m, which is retired as by Free even where the allocation stays in place.
func (w *World) Realloc(m Mem, size int) (Mem, error) {
	if err := w.check("Realloc"); err != nil {
		return Mem{}, err
	}
	if err := w.whole("Realloc", m); err != nil {
		return Mem{}, w.refuse("Realloc", coll.CallRealloc, err)
	}
	if size < 0 {
		return Mem{}, w.refuse("Realloc", coll.CallRealloc, w.errorf("Realloc", ErrBadArgument, "negative size %d", size))
	}
	c, err := w.coll.begin(w, "Realloc")
	if err != nil {
		return Mem{}, err
	}
	defer c.end()
	if err := c.inSequence(context.Background(), coll.CallRealloc, int64(m.off), int64(size)); err != nil {
		return Mem{}, err
	}
	if err := c.barrier(context.Background()); err != nil {
		return Mem{}, err
	}
	w.allocMu.Lock()
	if err := m.a.live(w, "Realloc"); err != nil {
		w.allocMu.Unlock()
		return Mem{}, err // another goroutine retired it meanwhile
	}
	old := m.Local()
	off, err := w.heap.Realloc(m.off, uint64(size))
	if err != nil {
		w.allocMu.Unlock()
		return Mem{}, w.heapError("Realloc", err, "offset %d to %d bytes", m.off, size)
	}
	// The old identity goes first: the new allocation may take its offset.
	r := &retirement{call: "Realloc", by: w.allocSeq + 1}
	w.retire(m.a, r)
	n := Mem{w: w, a: w.newAllocation("Realloc", off, size), off: off, size: size}
	if off != m.off {
		if err := w.move(off, m.off, min(size, m.size), old); err != nil {
			w.allocMu.Unlock()
			return Mem{}, err
		}
	}
	w.allocMu.Unlock()
	// Nobody writes into the moved object before its owner has copied the old contents.
	if err := c.barrier(context.Background()); err != nil {
		return Mem{}, err
	}
	return n, nil
}

// Elem is a type a symmetric array can hold: OpenSHMEM's standard RMA types.
type Elem interface {
	~int8 | ~int16 | ~int32 | ~int64 | ~int | ~uint8 | ~uint16 | ~uint32 | ~uint64 | ~uint | ~uintptr |
		~float32 | ~float64 | ~complex64 | ~complex128
}

// Sym is a typed symmetric array: n elements of T at the same offset on every PE.
type Sym[T Elem] struct {
	w   *World
	a   *allocation // the allocation s lies in
	off uint64
	n   int
}

// Alloc allocates a symmetric array of n zeroed elements on every PE (collective).
func Alloc[T Elem](w *World, n int) (Sym[T], error) {
	var z T
	if n < 0 {
		if err := w.check("Alloc"); err != nil {
			return Sym[T]{}, err
		}
		return Sym[T]{}, w.refuse("Alloc", coll.CallCalloc, w.errorf("Alloc", ErrBadArgument, "negative length %d", n))
	}
	m, err := w.calloc("Alloc", n, int(unsafe.Sizeof(z)))
	if err != nil {
		return Sym[T]{}, err
	}
	return Sym[T]{w: w, a: m.a, off: m.off, n: n}, nil
}

// As views m as an array of T; m's size must be a multiple of T's.
func As[T Elem](m Mem) (Sym[T], error) {
	var z T
	sz := int(unsafe.Sizeof(z))
	if m.w == nil || m.a == nil {
		return Sym[T]{}, zeroError("As")
	}
	if err := m.w.check("As"); err != nil {
		return Sym[T]{}, err
	}
	if err := m.a.live(m.w, "As"); err != nil {
		return Sym[T]{}, err
	}
	if m.size%sz != 0 {
		return Sym[T]{}, m.w.errorf("As", ErrBadArgument, "%d-byte allocation is not a whole number of %d-byte elements", m.size, sz)
	}
	return Sym[T]{w: m.w, a: m.a, off: m.off, n: m.size / sz}, nil
}

// SymOf returns the symmetric array that local (a slice of this PE's heap, for example from
// Local()[i:j]) occupies, or ErrNotSymmetric when it lies outside the symmetric heap.
func SymOf[T Elem](w *World, local []T) (Sym[T], error) {
	if err := w.check("SymOf"); err != nil {
		return Sym[T]{}, err
	}
	if len(local) == 0 {
		return Sym[T]{}, w.errorf("SymOf", ErrBadArgument, "empty slice")
	}
	base := uintptr(unsafe.Pointer(unsafe.SliceData(w.local)))
	p := uintptr(unsafe.Pointer(unsafe.SliceData(local)))
	size := uintptr(len(local)) * unsafe.Sizeof(local[0])
	if p < base || p+size > base+uintptr(len(w.local)) {
		return Sym[T]{}, w.errorf("SymOf", ErrNotSymmetric, "address %#x (%d bytes) is outside the symmetric heap [%#x, %#x)", p, size, base, base+uintptr(len(w.local)))
	}
	off := uint64(p - base)
	w.allocMu.Lock()
	defer w.allocMu.Unlock()
	for _, a := range w.allocs {
		if off >= a.off && off+uint64(size) <= a.off+uint64(a.size) {
			return Sym[T]{w: w, a: a, off: off, n: len(local)}, nil
		}
	}
	return Sym[T]{}, w.errorf("SymOf", ErrNotSymmetric, "heap offsets [%d, %d) are not inside one live allocation", off, off+uint64(size))
}

// Len returns the number of elements.
func (s Sym[T]) Len() int { return s.n }

// Mem returns the bytes s occupies.
func (s Sym[T]) Mem() Mem { return Mem{w: s.w, a: s.a, off: s.off, size: s.n * s.elemSize()} }

// Slice returns elements [i, i+n) of s as a symmetric array of its own.
func (s Sym[T]) Slice(i, n int) (Sym[T], error) {
	if err := s.bounds("Slice", i, n); err != nil {
		return Sym[T]{}, err
	}
	return Sym[T]{w: s.w, a: s.a, off: s.off + uint64(i*s.elemSize()), n: n}, nil
}

// Local returns this PE's copy of s; plain loads and stores through it are the memory model's
// ld and st.
func (s Sym[T]) Local() []T {
	if s.w == nil || s.w.closed.Load() || s.n == 0 || s.w.local == nil || s.a.gone.Load() != nil {
		return nil
	}
	return unsafe.Slice((*T)(unsafe.Pointer(&s.w.local[s.off])), s.n)
}

// Ptr returns pe's copy of s for direct loads and stores (shmem_ptr), or nil when pe's heap is
// not mapped into this process.
func (s Sym[T]) Ptr(pe int) []T {
	if s.w == nil || s.w.closed.Load() || pe < 0 || pe >= s.w.npes || s.w.peers[pe] == nil || s.n == 0 || s.a.gone.Load() != nil {
		return nil
	}
	return unsafe.Slice((*T)(unsafe.Pointer(&s.w.peers[pe][s.off])), s.n)
}

func (s Sym[T]) elemSize() int {
	var z T
	return int(unsafe.Sizeof(z))
}

// bounds checks that elements [i, i+n) lie inside s, and that s itself is live.
func (s Sym[T]) bounds(call string, i, n int) error {
	if s.w == nil {
		return zeroError(call)
	}
	if err := s.w.check(call); err != nil {
		return err
	}
	if err := s.a.live(s.w, call); err != nil {
		return err
	}
	if n < 0 {
		return s.w.errorf(call, ErrBadArgument, "negative count %d", n)
	}
	if i < 0 || i > s.n || n > s.n-i {
		return s.w.errorf(call, ErrBounds, "elements [%d, %d) of a %d-element array at heap offset %d", i, i+n, s.n, s.off)
	}
	return nil
}

// target checks pe and the element range, and returns the byte range [off, off+size) in pe's heap.
func (s Sym[T]) target(call string, pe, i, n int) (uint64, int, error) {
	if err := s.bounds(call, i, n); err != nil {
		return 0, 0, err
	}
	if pe < 0 || pe >= s.w.npes { // bounds has checked that the World is live
		return 0, 0, s.w.errorf(call, ErrPERange, "target PE %d, want 0 <= pe < %d", pe, s.w.npes)
	}
	es := s.elemSize()
	return s.off + uint64(i*es), n * es, nil
}

// zeroError is the error of a call through a zero Sym or Mem: before Init that is what is wrong;
// after it, the object was never allocated (the PE named is the process's World's, when it has
// only one).
func zeroError(call string) error {
	w := soleWorld()
	initialized.Lock()
	none := len(initialized.pes) == 0
	initialized.Unlock()
	if none {
		return &Error{Call: call, PE: -1, Kind: ErrNotInitialized, Detail: "a zero symmetric object (never allocated)"}
	}
	return &Error{Call: call, PE: w.MyPE(), Kind: ErrNotSymmetric, Detail: "a zero symmetric object: it was never allocated (use Alloc, Malloc or SymOf)"}
}
