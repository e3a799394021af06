package shmem

import (
	"context"
	"encoding/binary"
	"fmt"
	"runtime"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/roxamen/roxamen/internal/units"
	"github.com/roxamen/roxamen/nic"
)

// Cmp is a wait or test comparison (SHMEM_CMP_*).
type Cmp int

const (
	CmpEQ Cmp = iota
	CmpNE
	CmpGT
	CmpGE
	CmpLT
	CmpLE
)

func (c Cmp) String() string {
	switch c {
	case CmpEQ:
		return "=="
	case CmpNE:
		return "!="
	case CmpGT:
		return ">"
	case CmpGE:
		return ">="
	case CmpLT:
		return "<"
	case CmpLE:
		return "<="
	}
	return fmt.Sprintf("Cmp(%d)", int(c))
}

func holds[T AMOInt](v T, c Cmp, ref T) bool {
	switch c {
	case CmpEQ:
		return v == ref
	case CmpNE:
		return v != ref
	case CmpGT:
		return v > ref
	case CmpGE:
		return v >= ref
	case CmpLT:
		return v < ref
	case CmpLE:
		return v <= ref
	}
	return false
}

// load atomically reads this PE's element i of s; the atomic load is the acquire that orders
// the caller's later reads after the writes that satisfied the wait.
func load[T AMOInt](s Sym[T], i int) T {
	return fromBits[T](s.w.loadWord(s.off+uint64(i*s.elemSize()), s.elemSize()))
}

// loadWord reads the width-byte word at off of this PE's heap: an atomic load where the heap is
// host memory, a copy through this PE's own path where it is device memory.
func (w *World) loadWord(off uint64, width int) uint64 {
	if w.local != nil {
		p := unsafe.Pointer(&w.local[off])
		if width == 4 {
			return uint64(atomic.LoadUint32((*uint32)(p)))
		}
		return atomic.LoadUint64((*uint64)(p))
	}
	var b [8]byte
	if err := w.paths[w.pe].get(off, b[:width]); err != nil {
		return 0
	}
	if width == 4 {
		return uint64(binary.LittleEndian.Uint32(b[:]))
	}
	return binary.LittleEndian.Uint64(b[:])
}

// spinner polls, then yields, then sleeps, on the wait's own clock. A wait sleeps only once it
// has lasted spinFor, because Go's time.Sleep wakes at the timer's granularity, not at the time
// asked: Sleep(50us) took 1.1 ms at the median on this project's 2-core test machine. When waits
// fell asleep after a fixed number of polls (a few microseconds), a peer's short hiccup (a
// preemption, the collector) cost a millisecond, the peer's next wait then overslept too, and
// back-to-back barriers came out bimodal from one run to the next (0.08 us or 1.5 us each,
// depending on whether a handful of waits fell asleep). Between clock reads it polls without a
// system call; after yieldAfter it also yields the CPU at each read, which lets a PE that shares
// its core with the one it waits for (more PEs than cores) run at once, and costs a few hundred
// nanoseconds where cores are idle. Where this node has more PEs than this PE has CPUs, a PE it
// waits for may well be waiting for a core, so it yields from the first clock read on (as Open
// MPI does when oversubscribed): on 4 PEs over 2 CPUs the first 10 us of every wait were spent
// holding the core the peer needed. Each clock read also checks the context, the job's failure
// state, Finalize and the deadline, so that no wait outlives them.
type spinner struct {
	w        *World
	ctx      context.Context
	call     string
	on       int // with waitsOn: the one PE whose action ends this wait
	waitsOn  bool
	n        int
	start    time.Time
	deadline time.Time
	sleep    time.Duration
}

const (
	pollsPerCheck = 128                    // polls between clock reads
	yieldAfter    = 10 * time.Microsecond  // from then on, yield the CPU at each clock read
	spinFor       = 2 * time.Millisecond   // from then on, sleep between polls
	maxSleep      = 500 * time.Microsecond // asked for; the timer rounds it up
)

// The spinner's clock, yield and sleep; tests replace them to check the policy on a clock of their own.
var (
	spinClock = time.Now
	spinSleep = time.Sleep
	spinYield = func() {
		// sched_yield lets another process run on this core (PEs that are processes, more of them
		// than cores). Gosched lets another goroutine of this process run on this P, where PEs are
		// goroutines of one process (the tests: the raw system call alone keeps the P, and a PE
		// waiting for another PE's goroutine would wait until it sleeps, 2 ms on).
		if goschedHelps() {
			runtime.Gosched()
		}
		_, _, _ = syscall.RawSyscall(syscall.SYS_SCHED_YIELD, 0, 0, 0)
	}
)

// goschedHelps is whether a wait's yield also yields its P (runtime.Gosched): where this process
// holds more than one PE, or runs on one P (where a goroutine the wait depends on, a transport's,
// can only run if this one steps aside). Elsewhere it does harm: Gosched wakes an idle P's thread
// to look for work (the runtime's wakep), and that thread takes a core from the PE the wait is
// for. With one PE per process on 2 CPUs each yield woke one: 4 PEs' broadcast of 8 B took 20 us
// a call, 2.9 us without Gosched; and 2 PEs whose waits once passed yieldAfter stayed at 20 us.
func goschedHelps() bool {
	return initialized.live.Load() > 1 || runtime.GOMAXPROCS(0) == 1
}

func (w *World) spin(ctx context.Context, call string) spinner {
	if ctx == nil {
		ctx = context.Background()
	}
	return spinner{w: w, ctx: ctx, call: call}
}

// next returns nil to keep waiting, or why the wait must end; what describes the awaited state.
func (s *spinner) next(what func() string) error {
	s.n++
	if s.w.progress != nil && s.n&15 == 0 {
		// A transport that needs the target's help to land data (UCX over TCP) is driven from the
		// wait itself: handing that to a background goroutine costs a wakeup per message.
		s.w.progress()
	}
	if s.n%pollsPerCheck != 0 && s.sleep == 0 {
		return nil
	}
	if f := s.w.fail.Load(); f != nil && !(f.departed && s.waitsOn && f.pe != s.on) {
		return &Error{Call: s.call, PE: s.w.pe, Kind: ErrPEFailed, Detail: "while waiting for " + what(), Err: f.err}
	}
	if err := s.ctx.Err(); err != nil {
		return &Error{Call: s.call, PE: s.w.pe, Kind: ErrTimeout, Detail: "while waiting for " + what(), Err: err}
	}
	if s.w.closed.Load() {
		return s.w.errorf(s.call, ErrFinalized, "while waiting for %s", what())
	}
	now := spinClock()
	if s.start.IsZero() {
		// The clock starts at the first check, not the first poll: most waits end within
		// pollsPerCheck polls, and a clock read costs as much as tens of them.
		s.start, s.deadline = now, now.Add(s.w.timeout)
	}
	if now.After(s.deadline) {
		return s.w.errorf(s.call, ErrTimeout, "waited %v (ROX_TIMEOUT) for %s", s.w.timeout, what())
	}
	switch waited := now.Sub(s.start); {
	case waited < yieldAfter && !s.w.oversubscribed:
	case waited < spinFor:
		spinYield()
	default:
		s.sleep = min(max(2*s.sleep, 50*time.Microsecond), maxSleep)
		spinSleep(s.sleep)
	}
	return nil
}

// WaitUntil blocks until element at of this PE's s satisfies cmp value (shmem_wait_until).
func WaitUntil[T AMOInt](ctx context.Context, s Sym[T], at int, cmp Cmp, value T) error {
	if err := s.bounds("WaitUntil", at, 1); err != nil {
		return err
	}
	if err := wordAligned("WaitUntil", s, at); err != nil {
		return err
	}
	if err := checkCmp(s.w, "WaitUntil", cmp); err != nil {
		return err
	}
	if err := s.w.enter("WaitUntil"); err != nil {
		return err
	}
	defer s.w.leave()
	sp := s.w.spin(ctx, "WaitUntil")
	for !holds(load(s, at), cmp, value) {
		if err := sp.next(func() string {
			return fmt.Sprintf("element %d (now %v) %v %v", at, load(s, at), cmp, value)
		}); err != nil {
			return err
		}
	}
	s.w.acquire()
	return nil
}

// wordAligned refuses a wait or read on element at of s that the AMOs would refuse: a word
// loaded atomically must sit at a multiple of its size in the heap (SymOf can make one that does
// not), and the error is theirs.
func wordAligned[T Elem](call string, s Sym[T], at int) error {
	size := uint64(s.elemSize())
	if off := s.off + uint64(at)*size; off%size != 0 {
		return s.w.errorf(call, ErrMisaligned, "heap offset %d is not a multiple of the %d-byte word", off, size)
	}
	return nil
}

func checkCmp(w *World, call string, c Cmp) error {
	if c < CmpEQ || c > CmpLE {
		return w.errorf(call, ErrBadArgument, "comparison %d", int(c))
	}
	return nil
}

// waitSet waits on the elements of s not masked by status until done says enough of them hold.
// It then acquires, if acquires is nil (a wait) or says the outcome is a success (a test: only a
// test that reports success acquires, as roxshmem_test does, MODEL.md §3b).
func waitSet[T AMOInt](ctx context.Context, call string, s Sym[T], status []bool, cmp Cmp, value T, done, acquires func(hit []int, active int) bool) ([]int, error) {
	if err := s.bounds(call, 0, s.n); err != nil {
		return nil, err
	}
	if err := wordAligned(call, s, 0); err != nil {
		return nil, err
	}
	if err := checkCmp(s.w, call, cmp); err != nil {
		return nil, err
	}
	if status != nil && len(status) != s.n {
		return nil, s.w.errorf(call, ErrBadArgument, "status has %s for %s", units.Count(len(status), "entry"), units.Count(s.n, "element"))
	}
	if err := s.w.enter(call); err != nil {
		return nil, err
	}
	defer s.w.leave()
	sp := s.w.spin(ctx, call)
	for {
		var hit []int
		active := 0
		for i := 0; i < s.n; i++ {
			if status != nil && status[i] {
				continue
			}
			active++
			if holds(load(s, i), cmp, value) {
				hit = append(hit, i)
			}
		}
		if done(hit, active) {
			if acquires == nil || acquires(hit, active) {
				s.w.acquire()
			}
			return hit, nil
		}
		if err := sp.next(func() string {
			return fmt.Sprintf("%s: %d of %s %v %v", call, len(hit), units.Count(active, "element"), cmp, value)
		}); err != nil {
			return nil, err
		}
	}
}

func all(hit []int, active int) bool   { return len(hit) == active }
func anyOf(hit []int, active int) bool { return len(hit) > 0 || active == 0 }
func found(hit []int, _ int) bool      { return len(hit) > 0 }

// WaitUntilAll waits until every element of s whose status entry is false (status may be nil)
// satisfies cmp value (shmem_wait_until_all).
func WaitUntilAll[T AMOInt](ctx context.Context, s Sym[T], status []bool, cmp Cmp, value T) error {
	_, err := waitSet(ctx, "WaitUntilAll", s, status, cmp, value, all, nil)
	return err
}

// WaitUntilAny waits until some unmasked element satisfies cmp value and returns its index, or -1
// when status masks every element (shmem_wait_until_any).
func WaitUntilAny[T AMOInt](ctx context.Context, s Sym[T], status []bool, cmp Cmp, value T) (int, error) {
	hit, err := waitSet(ctx, "WaitUntilAny", s, status, cmp, value, anyOf, nil)
	if err != nil || len(hit) == 0 {
		return -1, err
	}
	return hit[0], nil
}

// WaitUntilSome waits until at least one unmasked element satisfies cmp value and returns the
// indices of all that do (shmem_wait_until_some).
func WaitUntilSome[T AMOInt](ctx context.Context, s Sym[T], status []bool, cmp Cmp, value T) ([]int, error) {
	return waitSet(ctx, "WaitUntilSome", s, status, cmp, value, anyOf, nil)
}

// Test reports whether element at of this PE's s satisfies cmp value (shmem_test).
func Test[T AMOInt](s Sym[T], at int, cmp Cmp, value T) (bool, error) {
	if err := s.bounds("Test", at, 1); err != nil {
		return false, err
	}
	if err := wordAligned("Test", s, at); err != nil {
		return false, err
	}
	if err := checkCmp(s.w, "Test", cmp); err != nil {
		return false, err
	}
	if err := s.w.enter("Test"); err != nil {
		return false, err
	}
	defer s.w.leave()
	ok := holds(load(s, at), cmp, value)
	if ok {
		s.w.acquire()
	}
	return ok, nil
}

// TestAll reports whether every unmasked element satisfies cmp value (shmem_test_all).
func TestAll[T AMOInt](s Sym[T], status []bool, cmp Cmp, value T) (bool, error) {
	ok := false
	_, err := waitSet(nil, "TestAll", s, status, cmp, value, func(hit []int, active int) bool {
		ok = len(hit) == active
		return true
	}, all)
	return ok, err
}

// TestAny returns the index of an unmasked element that satisfies cmp value, or -1
// (shmem_test_any).
func TestAny[T AMOInt](s Sym[T], status []bool, cmp Cmp, value T) (int, error) {
	hit, err := waitSet(nil, "TestAny", s, status, cmp, value, func([]int, int) bool { return true }, found)
	if err != nil || len(hit) == 0 {
		return -1, err
	}
	return hit[0], nil
}

// TestSome returns the indices of the unmasked elements that satisfy cmp value (shmem_test_some).
func TestSome[T AMOInt](s Sym[T], status []bool, cmp Cmp, value T) ([]int, error) {
	return waitSet(nil, "TestSome", s, status, cmp, value, func([]int, int) bool { return true }, found)
}

// SignalOp says how PutSignal updates its signal.
type SignalOp = nic.SignalOp

const (
	SignalSet = nic.SignalSet // SHMEM_SIGNAL_SET
	SignalAdd = nic.SignalAdd // SHMEM_SIGNAL_ADD
)

// PutSignal copies src into s on pe at element at, then updates element sigAt of sig on pe with
// sigValue by op (shmem_put_signal). The signal never becomes visible before the data.
func PutSignal[T Elem](s Sym[T], at int, src []T, sig Sym[uint64], sigAt int, sigValue uint64, op SignalOp, pe int) error {
	return putSignal("PutSignal", s, at, src, sig, sigAt, sigValue, op, pe)
}

// PutSignalNBI is the non-blocking PutSignal (shmem_put_signal_nbi): src must not change until Quiet.
func PutSignalNBI[T Elem](s Sym[T], at int, src []T, sig Sym[uint64], sigAt int, sigValue uint64, op SignalOp, pe int) error {
	return putSignal("PutSignalNBI", s, at, src, sig, sigAt, sigValue, op, pe)
}

func putSignal[T Elem](call string, s Sym[T], at int, src []T, sig Sym[uint64], sigAt int, sigValue uint64, op SignalOp, pe int) error {
	off, size, err := s.target(call, pe, at, len(src))
	if err != nil {
		return err
	}
	if sig.w != s.w {
		return s.w.errorf(call, ErrNotSymmetric, "the signal array (heap offset %d, %s) is not an allocation of this World", sig.off, units.Count(sig.n, "element"))
	}
	soff, _, err := sig.target(call, pe, sigAt, 1)
	if err != nil {
		return err
	}
	if err := wordAligned(call, sig, sigAt); err != nil {
		return err
	}
	if op != SignalSet && op != SignalAdd {
		return s.w.errorf(call, ErrBadArgument, "signal operation %d (want SignalSet or SignalAdd)", op)
	}
	if err := s.w.enter(call); err != nil {
		return err
	}
	defer s.w.leave()
	if err := s.w.alive(call, pe); err != nil {
		return err
	}
	if err := s.w.paths[pe].putSignal(off, asBytes(src)[:size], soff, op, sigValue); err != nil {
		return s.w.pathError(call, pe, err)
	}
	return nil
}

// SignalFetch atomically reads this PE's signal element at (shmem_signal_fetch).
func SignalFetch(sig Sym[uint64], at int) (uint64, error) {
	if err := sig.bounds("SignalFetch", at, 1); err != nil {
		return 0, err
	}
	if err := wordAligned("SignalFetch", sig, at); err != nil {
		return 0, err
	}
	if err := sig.w.enter("SignalFetch"); err != nil {
		return 0, err
	}
	defer sig.w.leave()
	return load(sig, at), nil
}

// SignalWaitUntil waits until this PE's signal element at satisfies cmp value and returns it
// (shmem_signal_wait_until).
func SignalWaitUntil(ctx context.Context, sig Sym[uint64], at int, cmp Cmp, value uint64) (uint64, error) {
	if err := WaitUntil(ctx, sig, at, cmp, value); err != nil {
		if e, ok := err.(*Error); ok {
			e.Call = "SignalWaitUntil"
		}
		return 0, err
	}
	if err := sig.w.enter("SignalWaitUntil"); err != nil {
		return 0, err
	}
	defer sig.w.leave()
	return load(sig, at), nil
}

// fenceWord is the target of the full memory barrier that Fence and Quiet issue for the direct
// path: a Go atomic is a full barrier, so earlier stores are ordered before later ones on
// architectures weaker than x86 too.
var fenceWord atomic.Uint64

// Fence orders delivery: puts, AMOs and put-with-signals this PE issued to a PE before the fence
// are delivered before those issued to it after (shmem_fence).
func (w *World) Fence() error {
	if err := w.check("Fence"); err != nil {
		return err
	}
	if err := w.enter("Fence"); err != nil {
		return err
	}
	defer w.leave()
	fenceWord.Add(1)
	for _, pe := range w.remotes {
		if err := w.transport.Fence(pe); err != nil {
			return w.pathError("Fence", pe, err)
		}
	}
	return nil
}

// Quiet completes every put, AMO, put-with-signal and non-blocking get this PE has issued
// (shmem_quiet).
func (w *World) Quiet() error {
	if err := w.check("Quiet"); err != nil {
		return err
	}
	return w.quiet("Quiet", -1)
}

func (w *World) quiet(call string, pe int) error {
	if w.transport == nil || (pe >= 0 && w.peers[pe] != nil) {
		// Load/store alone: the fence is all there is to do, and it touches no heap, so it needs no
		// place among the calls in flight that Finalize waits for (two locked instructions fewer
		// in every barrier).
		if w.inflight.Load()&inflightClosed != 0 {
			return w.errorf(call, ErrFinalized, "")
		}
		fenceWord.Add(1)
		return nil
	}
	if err := w.enter(call); err != nil {
		return err
	}
	defer w.leave()
	fenceWord.Add(1)
	ctx, cancel := context.WithTimeout(context.Background(), w.timeout)
	defer cancel()
	if err := w.transport.Quiet(ctx, pe); err != nil {
		return w.pathError(call, pe, err)
	}
	return nil
}

// PEQuiet completes the operations issued to the given PEs (shmem_pe_quiet).
func (w *World) PEQuiet(pes ...int) error {
	for _, pe := range pes {
		if err := w.checkPE("PEQuiet", pe); err != nil {
			return err
		}
	}
	for _, pe := range pes {
		if err := w.quiet("PEQuiet", pe); err != nil {
			return err
		}
	}
	return nil
}
