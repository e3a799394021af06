package nic

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"time"
	"unsafe"
)

// Ring layout. The same layout is written in C in kernels/include/roxamen/ring.h; a parity test
// compares the two. Every header field sits on its own 64-byte line so that producers (head),
// the consumer (tail, completed) and the error word never share a cache line.
const (
	RingHeadOffset      = 0   // uint64: next ticket; producers fetch_add
	RingTailOffset      = 64  // uint64: consumer-owned; slots before it are free
	RingCompletedOffset = 128 // uint64: descriptors completed, in ticket order
	RingErrorOffset     = 192 // uint32: nonzero when the proxy failed (a RingErrCode); then uint32 pad
	RingHeaderSize      = 256 // descriptors start here
	DescSize            = 64
)

// Desc is one command descriptor, 64 bytes, the layout of struct roxshmem_desc in ring.h.
// Seq is ticket+1 and is written last, with release semantics: writing it publishes the slot.
type Desc struct {
	Seq   uint64 // [0]  ticket+1; publication word
	Op    Op     // [8]
	PE    uint32 // [12] target PE
	Size  uint64 // [16] bytes
	Src   uint64 // [24] local address: put source, get destination, fetching AMO's result
	Dst   uint64 // [32] remote symmetric-heap offset
	Value uint64 // [40] AMO operand / signal value
	Aux   uint64 // [48] AMO compare / signal heap offset
	Flags uint32 // [56] low 8 bits: AMOOp or SignalOp; bits 8..15: width in bytes
	Pad   uint32 // [60]
}

// Flag helpers for Desc.Flags.
const (
	FlagKindMask   = 0xff
	FlagWidthShift = 8
	FlagWidthMask  = 0xff << FlagWidthShift
)

// MakeFlags packs an AMO kind or signal op with a width in bytes.
func MakeFlags(kind uint32, width int) uint32 {
	return kind&FlagKindMask | uint32(width)<<FlagWidthShift&FlagWidthMask
}

// Kind returns the AMO kind or signal op in d.Flags.
func (d *Desc) Kind() uint32 { return d.Flags & FlagKindMask }

// Width returns the operand width in bytes from d.Flags.
func (d *Desc) Width() int { return int(d.Flags&FlagWidthMask) >> FlagWidthShift }

func (d Desc) String() string {
	return fmt.Sprintf("%v pe=%d size=%d src=%#x dst=%#x value=%#x aux=%#x flags=%#x",
		d.Op, d.PE, d.Size, d.Src, d.Dst, d.Value, d.Aux, d.Flags)
}

func (o Op) String() string {
	switch o {
	case OpNop:
		return "nop"
	case OpPut:
		return "put"
	case OpGet:
		return "get"
	case OpPutSignal:
		return "put_signal"
	case OpAMO:
		return "amo"
	case OpFence:
		return "fence"
	case OpQuiet:
		return "quiet"
	}
	return fmt.Sprintf("op(%d)", uint32(o))
}

// RingErrCode is the value of a ring's error word.
type RingErrCode uint32

const (
	RingOK        RingErrCode = 0
	RingErrInput  RingErrCode = 1 // a descriptor was rejected (bad op, PE, range or address)
	RingErrRemote RingErrCode = 2 // the transport failed (peer lost, remote error, timeout)
	RingErrClosed RingErrCode = 3 // the proxy stopped
	RingErrAbort  RingErrCode = 4 // a producer gave up a reserved ticket; the ring cannot proceed
)

func (c RingErrCode) String() string {
	switch c {
	case RingOK:
		return "ok"
	case RingErrInput:
		return "descriptor rejected"
	case RingErrRemote:
		return "transport failed"
	case RingErrClosed:
		return "proxy closed"
	case RingErrAbort:
		return "producer abandoned a reserved slot"
	}
	return fmt.Sprintf("error %d", uint32(c))
}

// ErrRing is matched (errors.Is) by every error that reports a ring's error word.
var ErrRing = errors.New("nic: ring failed")

// RingError reports a nonzero error word, with the proxy's detailed error when this process has it.
type RingError struct {
	Code   RingErrCode
	Detail error
}

func (e *RingError) Error() string {
	if e.Detail != nil {
		return fmt.Sprintf("nic: ring failed (%v): %v", e.Code, e.Detail)
	}
	return fmt.Sprintf("nic: ring failed (%v)", e.Code)
}

func (e *RingError) Unwrap() []error {
	if e.Detail != nil {
		return []error{ErrRing, e.Detail}
	}
	return []error{ErrRing}
}

// RingBytes returns the size of the memory a ring of capacity descriptors needs.
func RingBytes(capacity int) int { return RingHeaderSize + capacity*DescSize }

// Ring is a multi-producer, single-consumer command ring in memory given to it (shared memory on
// the host backend; host-pinned, device-mapped memory on GPUs). Producers Reserve a ticket and
// Publish a descriptor into its slot; the proxy (the one consumer) Polls, executes, and advances
// the completed counter. The Ring value holds no state the memory does not, except the producer's
// cached tail and the consumer's detailed error; several Ring values may attach the same memory.
type Ring struct {
	mem       []byte
	capacity  uint64
	mask      uint64
	head      *uint64
	tail      *uint64
	completed *uint64
	errWord   *uint32
	descs     unsafe.Pointer

	cachedTail atomic.Uint64         // producers' copy of tail, re-read only when the ring looks full
	detail     atomic.Pointer[error] // the consumer's detailed error, when set in this process
	// bell is set by a consumer (in this process) that is about to block: Publish rings it.
	bell atomic.Pointer[chan struct{}]
}

// NewRing formats mem as an empty ring of capacity descriptors (a power of two, at least 2).
// mem must be 64-byte aligned and exactly RingBytes(capacity) long.
func NewRing(mem []byte, capacity int) (*Ring, error) {
	if capacity < 2 || capacity&(capacity-1) != 0 {
		return nil, fmt.Errorf("nic: NewRing: capacity %d is not a power of two >= 2", capacity)
	}
	if len(mem) != RingBytes(capacity) {
		return nil, fmt.Errorf("nic: NewRing: memory is %d bytes, capacity %d needs %d", len(mem), capacity, RingBytes(capacity))
	}
	r, err := attach("NewRing", mem)
	if err != nil {
		return nil, err
	}
	// The memory may be shared with another process that is not using it yet; plain zeroing
	// before anyone attaches is enough, but publish the header with atomics anyway.
	for i := RingHeaderSize; i < len(mem); i++ {
		mem[i] = 0
	}
	for i := 0; i < capacity; i++ {
		atomic.StoreUint64(&r.slot(uint64(i)).Seq, 0)
	}
	atomic.StoreUint64(r.head, 0)
	atomic.StoreUint64(r.tail, 0)
	atomic.StoreUint64(r.completed, 0)
	atomic.StoreUint32(r.errWord, 0)
	return r, nil
}

// AttachRing uses a ring that NewRing formatted (possibly in another process); the capacity
// follows from len(mem).
func AttachRing(mem []byte) (*Ring, error) {
	return attach("AttachRing", mem)
}

func attach(op string, mem []byte) (*Ring, error) {
	if len(mem) < RingBytes(2) || (len(mem)-RingHeaderSize)%DescSize != 0 {
		return nil, fmt.Errorf("nic: %s: memory of %d bytes is not a ring header plus whole descriptors", op, len(mem))
	}
	capacity := uint64(len(mem)-RingHeaderSize) / DescSize
	if capacity&(capacity-1) != 0 {
		return nil, fmt.Errorf("nic: %s: memory of %d bytes holds %d descriptors, not a power of two", op, len(mem), capacity)
	}
	base := unsafe.Pointer(&mem[0])
	if uintptr(base)%64 != 0 {
		return nil, fmt.Errorf("nic: %s: memory at %p is not 64-byte aligned", op, base)
	}
	r := &Ring{
		mem:       mem,
		capacity:  capacity,
		mask:      capacity - 1,
		head:      (*uint64)(unsafe.Pointer(&mem[RingHeadOffset])),
		tail:      (*uint64)(unsafe.Pointer(&mem[RingTailOffset])),
		completed: (*uint64)(unsafe.Pointer(&mem[RingCompletedOffset])),
		errWord:   (*uint32)(unsafe.Pointer(&mem[RingErrorOffset])),
		descs:     unsafe.Pointer(&mem[RingHeaderSize]),
	}
	r.cachedTail.Store(atomic.LoadUint64(r.tail))
	return r, nil
}

// Capacity returns the number of descriptor slots.
func (r *Ring) Capacity() int { return int(r.capacity) }

// Bytes returns the memory the ring lives in.
func (r *Ring) Bytes() []byte { return r.mem }

func (r *Ring) slot(ticket uint64) *Desc {
	return (*Desc)(unsafe.Add(r.descs, (ticket&r.mask)*DescSize))
}

// Head returns the number of tickets handed out so far.
func (r *Ring) Head() uint64 { return atomic.LoadUint64(r.head) }

// Tail returns the consumer's position: slots before it are free.
func (r *Ring) Tail() uint64 { return atomic.LoadUint64(r.tail) }

// Completed returns the number of descriptors completed, in ticket order.
func (r *Ring) Completed() uint64 { return atomic.LoadUint64(r.completed) }

// Err returns nil while the error word is zero, else a *RingError.
func (r *Ring) Err() error {
	c := RingErrCode(atomic.LoadUint32(r.errWord))
	if c == RingOK {
		return nil
	}
	e := &RingError{Code: c}
	if d := r.detail.Load(); d != nil {
		e.Detail = *d
	}
	return e
}

// SetError records the first failure in the error word (later calls keep the first code) and
// keeps err as the detail reported by this Ring value.
func (r *Ring) SetError(code RingErrCode, err error) {
	if code == RingOK {
		return
	}
	if err != nil {
		r.detail.CompareAndSwap(nil, &err)
	}
	atomic.CompareAndSwapUint32(r.errWord, 0, uint32(code))
}

// Producer side.

// Reserve takes the next ticket and waits until its slot is free. It returns an error, after
// which the ring is failed (RingErrAbort), only if the ring's error word is set or ctx ends while
// the ring is full: a ticket once taken must be published or the consumer could never pass it.
func (r *Ring) Reserve(ctx context.Context) (uint64, error) {
	t := atomic.AddUint64(r.head, 1) - 1
	if t < r.cachedTail.Load()+r.capacity {
		return t, nil
	}
	// A full ring drains at the proxy's pace: yield and sleep rather than spin, so that many
	// waiting producers leave the processor to the proxy.
	b := Backoff{n: backoffSpins + backoffYields - 8}
	for {
		tail := atomic.LoadUint64(r.tail)
		// Keep the cache monotonic when producers race to refresh it.
		for {
			c := r.cachedTail.Load()
			if tail <= c || r.cachedTail.CompareAndSwap(c, tail) {
				break
			}
		}
		if t < tail+r.capacity {
			return t, nil
		}
		if err := r.Err(); err != nil {
			return 0, fmt.Errorf("nic: ring reserve: ticket %d: %w", t, err)
		}
		if err := ctx.Err(); err != nil {
			err = fmt.Errorf("nic: ring reserve: ticket %d waited for a free slot (tail %d, capacity %d): %w", t, tail, r.capacity, err)
			r.SetError(RingErrAbort, err)
			return 0, err
		}
		b.Wait()
	}
}

// Publish writes d into ticket's slot and then its sequence word (ticket+1) with release
// semantics. d.Seq is ignored.
func (r *Ring) Publish(ticket uint64, d *Desc) {
	s := r.slot(ticket)
	s.Op, s.PE, s.Size, s.Src, s.Dst = d.Op, d.PE, d.Size, d.Src, d.Dst
	s.Value, s.Aux, s.Flags, s.Pad = d.Value, d.Aux, d.Flags, 0
	atomic.StoreUint64(&s.Seq, ticket+1)
	// The store above and this load pair with the consumer's SetBell and its poll after it:
	// either the consumer sees the descriptor, or this sees the bell.
	if bell := r.bell.Load(); bell != nil {
		select {
		case *bell <- struct{}{}:
		default:
		}
	}
}

// SetBell registers (or, with nil, removes) a channel that Publish signals, without blocking,
// for a consumer in this process that wants to sleep until there is work: set it, poll once
// more, then wait on it (with a timeout: producers in other processes or on a device cannot
// ring it).
func (r *Ring) SetBell(bell chan struct{}) {
	if bell == nil {
		r.bell.Store(nil)
		return
	}
	r.bell.Store(&bell)
}

// Push reserves a ticket and publishes d in it.
func (r *Ring) Push(ctx context.Context, d *Desc) (uint64, error) {
	t, err := r.Reserve(ctx)
	if err != nil {
		return 0, err
	}
	r.Publish(t, d)
	return t, nil
}

// WaitCompleted waits until the descriptor with ticket has completed. It returns the ring's error
// if the proxy failed before completing it, or ctx's.
func (r *Ring) WaitCompleted(ctx context.Context, ticket uint64) error {
	return r.waitCompleted(ctx, "wait", ticket+1)
}

// Quiet waits until every descriptor whose ticket was taken before the call has completed.
func (r *Ring) Quiet(ctx context.Context) error {
	return r.waitCompleted(ctx, "quiet", atomic.LoadUint64(r.head))
}

func (r *Ring) waitCompleted(ctx context.Context, op string, target uint64) error {
	var b Backoff
	for {
		// The proxy never advances completed past a failed descriptor, so a completed count
		// that reaches target means success even if the error word is set later.
		c := atomic.LoadUint64(r.completed)
		if c >= target {
			return nil
		}
		if err := r.Err(); err != nil {
			return fmt.Errorf("nic: ring %s: %d of %d descriptors completed: %w", op, c, target, err)
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("nic: ring %s: %d of %d descriptors completed: %w", op, c, target, err)
		}
		b.Wait()
	}
}

// Consumer side: one consumer (the proxy) per ring.

// Poll copies up to len(out) published descriptors, in ticket order, starting at the tail, frees
// their slots by advancing the tail, and returns the first ticket and the count.
func (r *Ring) Poll(out []Desc) (first uint64, n int) {
	first = atomic.LoadUint64(r.tail)
	pos := first
	for n < len(out) {
		s := r.slot(pos)
		if atomic.LoadUint64(&s.Seq) != pos+1 {
			break
		}
		out[n] = Desc{Seq: pos + 1, Op: s.Op, PE: s.PE, Size: s.Size, Src: s.Src, Dst: s.Dst,
			Value: s.Value, Aux: s.Aux, Flags: s.Flags}
		n++
		pos++
	}
	if n > 0 {
		atomic.StoreUint64(r.tail, pos)
	}
	return first, n
}

// SetCompleted advances the completed counter to upTo (descriptors with tickets below upTo are
// complete). It never moves the counter backwards.
func (r *Ring) SetCompleted(upTo uint64) {
	if atomic.LoadUint64(r.completed) < upTo {
		atomic.StoreUint64(r.completed, upTo)
	}
}

// Backoff is the bounded backoff of every polling loop in nic: spin, then yield the processor,
// then sleep, doubling up to MaxBackoffSleep.
type Backoff struct{ n int }

// MaxBackoffSleep bounds the sleep of a polling loop, and so the latency it adds.
const MaxBackoffSleep = 50 * time.Microsecond

const (
	backoffSpins  = 64
	backoffYields = 64
)

// Wait waits a little longer than the previous call did.
func (b *Backoff) Wait() {
	b.n++
	switch {
	case b.n <= backoffSpins:
		for i := 0; i < 32; i++ {
			spinHint()
		}
	case b.n <= backoffSpins+backoffYields:
		runtime.Gosched()
	default:
		shift := b.n - backoffSpins - backoffYields
		if shift > 6 {
			shift = 6
		}
		d := time.Microsecond << shift
		if d > MaxBackoffSleep {
			d = MaxBackoffSleep
		}
		time.Sleep(d)
	}
}

// Reset starts the next wait from spinning again.
func (b *Backoff) Reset() { b.n = 0 }

var spinSink atomic.Uint32

func spinHint() { spinSink.Load() }

// AllocRing formats a ring of capacity descriptors in fresh, 64-byte aligned Go memory (for a
// proxy and producers of one process).
func AllocRing(capacity int) (*Ring, error) {
	if capacity < 2 || capacity&(capacity-1) != 0 {
		return nil, fmt.Errorf("nic: AllocRing: capacity %d is not a power of two >= 2", capacity)
	}
	return NewRing(AlignedBytes(RingBytes(capacity)), capacity)
}

// AlignedBytes returns n zero bytes starting on a 64-byte boundary.
func AlignedBytes(n int) []byte {
	b := make([]byte, n+64)
	off := (64 - int(uintptr(unsafe.Pointer(&b[0]))%64)) % 64
	return b[off : off+n : off+n]
}
