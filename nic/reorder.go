package nic

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

// This file is the reordering delivery path, a test and conformance mode (ROX_DELIVERY=reorder):
// a Transport that delivers one PE's puts, non-fetching AMOs, put-with-signals and non-blocking
// gets out of order, as late as the Transport contract lets it, and emulates a weak CPU and its
// caches for the PE's plain loads and stores. Only Fence, Quiet and PutSignal's own rules keep
// order, so a conformance run (tools/litmusrun) on it shows whether the runtime's fence, quiet
// and put-with-signal code is what keeps the outcomes the memory model forbids away, and a
// Mutation breaks one of them on purpose to show that the run would notice.

// AMOPoster is implemented by transports that can issue an AMO whose old value nobody reads
// (OpenSHMEM's non-fetching atomics) without waiting for it: it is delivered like a put, ordered
// by Fence and completed by Quiet.
type AMOPoster interface {
	PostAMO(pe int, op AMOOp, width int, dst uint64, value, compare uint64) error
}

// NBIGetter is implemented by transports whose Get can complete later (shmem_get_nbi): dst is
// filled by the next Quiet at the latest.
type NBIGetter interface {
	GetNBI(pe int, src uint64, dst []byte) error
}

// NBIFetcher is implemented by transports whose fetching AMOs can complete later (OpenSHMEM
// 1.5's shmem_atomic_fetch_*_nbi): the AMO is ordered by Fence like a non-fetching one, and its old
// value is written into result (width bytes, little-endian) when it is performed, by the next
// Quiet at the latest.
type NBIFetcher interface {
	FetchAMONBI(pe int, op AMOOp, width int, dst uint64, value, compare uint64, result []byte) error
}

// Mutation is a deliberate bug of the reordering path's ordering code.
type Mutation int

const (
	MutNone         Mutation = iota
	MutDropFences            // Fence orders nothing (and writes back no plain store)
	MutQuietAsFence          // Quiet orders like a Fence but completes nothing
	MutSignalFirst           // PutSignal delivers the signal before the data
)

var mutNames = [...]string{"none", "drop-fences", "quiet-as-fence", "signal-first"}

func (m Mutation) String() string {
	if m >= 0 && int(m) < len(mutNames) {
		return mutNames[m]
	}
	return fmt.Sprintf("Mutation(%d)", int(m))
}

// ParseMutation reads a Mutation's name.
func ParseMutation(s string) (Mutation, error) {
	for i, n := range mutNames {
		if s == n {
			return Mutation(i), nil
		}
	}
	return MutNone, fmt.Errorf("unknown delivery mutation %q (want none|drop-fences|quiet-as-fence|signal-first)", s)
}

// ReorderConfig configures NewReorder.
type ReorderConfig struct {
	PE   int
	Seed int64
	// Bypass selects the CacheBypass emulation of plain accesses: plain loads may read a view
	// refreshed only at acquires (Acquire), and quiet alone writes plain stores back. Without it
	// (Strict) plain stores wait in a store buffer that Fence, Quiet and Sync drain.
	Bypass   bool
	Mutation Mutation // armed from the start; Arm switches it off and on
	// Local is this PE's own heap (plain accesses); Heaps, where not nil, every PE's heap mapped
	// here, with LockOff the heap offset of a LockBytes-long table that makes split
	// read-modify-writes atomic among AMOs (0: AMOs run whole).
	Local   []byte
	Heaps   [][]byte
	LockOff uint64
	Timeout time.Duration
}

// LockBytes is the size of the AMO lock table ReorderConfig.LockOff names.
const LockBytes = 4096

type ropKind int

const (
	ropPut ropKind = iota
	ropAMO
	ropGet
	ropStore // a plain store in the store buffer (to pe's heap: through roxshmem_ptr when not ours)
	ropLoad  // a plain load performed late
)

type rop struct {
	kind     ropKind
	ctx      *ReorderCtx // the context that issued it: its fences order it, its quiet completes it
	pe       int
	epoch    uint64
	due      int64 // nanoseconds on the Reorder's clock
	after    *rop  // delivered only once this one is (put-with-signal's signal after its data)
	unfenced bool  // fence neither orders nor waits for it (gets, plain loads)
	off      uint64
	data     []byte // put: a copy of the source; get: the destination
	op       AMOOp
	width    int
	value    uint64
	compare  uint64
	into     *uint64 // a late plain load's register
	src      int64   // put from the own heap (put_nbi's source buffer): its offset, read at delivery; else -1
	result   []byte  // a non-blocking fetching AMO's destination for the old value (width bytes)
	done     bool
}

// Reorder is the reordering Transport over inner (see the top of this file). Its delivery
// goroutine takes each pending operation at a random time, choosing among those that nothing
// orders before an earlier one: a Fence to a PE makes later operations to it wait for earlier
// ones, a put-with-signal's signal waits for its data, Quiet delivers everything pending before it
// returns. Get and fetching AMOs are performed by the caller at once, overtaking pending puts
// unless a Fence lies between (fetching AMOs; gets overtake always, as fence does not order them).
//
// The Reorder is also the default context (its embedded ReorderCtx); NewContext makes others,
// each with fences and a quiet of its own (shmem.Ctx, MODEL.md §3a), and with a store buffer of
// its own for the plain accesses issued through it (a thread of the PE, §3b).
type Reorder struct {
	ReorderCtx // the default context
	inner      Transport
	cfg        ReorderConfig
	start      time.Time

	mu      sync.Mutex
	rng     *rand.Rand
	pool    []*rop
	npes    int
	err     error    // the first delivery error, reported by the next Quiet
	cache   []cached // bypass: the ranges whose plain loads may be stale
	wake    chan struct{}
	closing chan struct{}
	closed  chan struct{}

	armed atomic.Bool
}

// ReorderCtx is one communication context of a Reorder: a stream of operations whose Fence
// orders and whose Quiet completes only what was issued on it. Plain accesses issued through it
// (Store, Load, ...) are one thread's: they sit in its own store buffer, which it alone reads
// before they land; another context's (thread's) plain loads see them once they are in memory.
// It is a Transport (Close does nothing: the Reorder's Close ends the path) and implements
// AMOPoster, NBIGetter and NBIFetcher.
type ReorderCtx struct {
	r     *Reorder
	epoch []uint64 // per target PE: fences issued on this context; r.mu
}

// NewContext makes a context of the path with its own fences, quiet and store buffer.
func (r *Reorder) NewContext() *ReorderCtx {
	return &ReorderCtx{r: r, epoch: make([]uint64, r.npes)}
}

// cached is a range of the local heap and what plain loads of it may see instead of memory.
type cached struct {
	off  uint64
	view []byte
}

// NewReorder starts the reordering path over inner.
func NewReorder(inner Transport, npes int, cfg ReorderConfig) *Reorder {
	if cfg.Timeout <= 0 {
		cfg.Timeout = 30 * time.Second
	}
	r := &Reorder{inner: inner, cfg: cfg, start: time.Now(), rng: rand.New(rand.NewSource(cfg.Seed*7919 + int64(cfg.PE))),
		npes: npes, wake: make(chan struct{}, 1), closing: make(chan struct{}), closed: make(chan struct{})}
	r.ReorderCtx = ReorderCtx{r: r, epoch: make([]uint64, npes)}
	r.armed.Store(cfg.Mutation != MutNone)
	go r.deliver()
	return r
}

// Arm switches the configured mutation on or off (a conformance run arms it only while a test's
// columns run, so that its own bookkeeping is not broken).
func (r *Reorder) Arm(on bool) { r.armed.Store(on && r.cfg.Mutation != MutNone) }

// Mutation returns the configured mutation.
func (r *Reorder) Mutation() Mutation { return r.cfg.Mutation }

func (r *Reorder) mutated(m Mutation) bool { return r.cfg.Mutation == m && r.armed.Load() }

func (r *Reorder) now() int64 { return int64(time.Since(r.start)) }

// hold draws how long an operation may wait before delivery: mostly short, sometimes long enough
// for another PE to react to what overtook it, and now and then (1%) long enough for a chain of
// reactions to overtake it behind the iteration's other copies, which run in order (a thread that
// sees another thread's flag and puts, a PE that waits for that put and then reads:
// MP+threads+quiet); the earlier copies' holds of up to 3 ms lie in that chain's way.
func (r *Reorder) hold() int64 {
	switch x := r.rng.Intn(1000); {
	case x < 300:
		return 0
	case x < 660:
		return int64(r.rng.Intn(5000))
	case x < 880:
		return int64(r.rng.Intn(60000))
	case x < 990:
		return int64(r.rng.Intn(3000000))
	default:
		return 3000000 + int64(r.rng.Intn(12000000))
	}
}

// issue queues op on context c; the caller holds mu.
func (r *Reorder) issue(c *ReorderCtx, op *rop) *rop {
	op.ctx = c
	op.epoch = c.epoch[op.pe]
	op.due = r.now() + r.hold()
	r.pool = append(r.pool, op)
	select {
	case r.wake <- struct{}{}:
	default:
	}
	return op
}

// blocked reports whether some pending operation must be delivered before pool[i]; mu held.
func (r *Reorder) blocked(i int) bool {
	op := r.pool[i]
	if op.after != nil && !op.after.done {
		return true
	}
	for _, o := range r.pool[:i] {
		if o.ctx != op.ctx {
			continue // a fence orders its own context's operations; threads' accesses are unordered
		}
		if o.pe == op.pe && o.epoch < op.epoch && !o.unfenced && !op.unfenced {
			return true
		}
		if (o.kind == ropStore || o.kind == ropLoad) && (op.kind == ropStore || op.kind == ropLoad) && o.pe == op.pe && o.off == op.off {
			return true // a thread's plain accesses to one word stay in order
		}
	}
	return false
}

// deliverOne delivers one pending operation that want accepts and nothing orders after another
// (with due: only one whose time has come); mu held. It reports whether it delivered one.
func (r *Reorder) deliverOne(want func(*rop) bool, due bool) bool {
	now := r.now()
	i := -1
	for j, op := range r.pool {
		// the deliverer takes the unblocked operation due first, so that a late wakeup keeps the
		// gaps between deliveries that the holds drew; a quiet takes them in random order
		if want(op) && (!due || op.due <= now) && !r.blocked(j) {
			if i < 0 || (due && op.due < r.pool[i].due) || (!due && r.rng.Intn(2) == 0) {
				i = j
			}
		}
	}
	if i < 0 {
		return false
	}
	op := r.pool[i]
	r.pool = append(r.pool[:i], r.pool[i+1:]...)
	if err := r.apply(op); err != nil && r.err == nil {
		r.err = err
	}
	op.done = true
	return true
}

// pending reports whether an operation want accepts is pending; mu held.
func (r *Reorder) pending(want func(*rop) bool) bool {
	for _, o := range r.pool {
		if want(o) {
			return true
		}
	}
	return false
}

// drain delivers every pending operation want accepts, in an order the rules allow; mu held.
func (r *Reorder) drain(want func(*rop) bool) {
	for r.deliverOne(want, false) {
	}
}

func (r *Reorder) deliver() {
	defer close(r.closed)
	for {
		r.mu.Lock()
		n := len(r.pool)
		delivered := n > 0 && r.deliverOne(func(*rop) bool { return true }, true)
		r.mu.Unlock()
		switch {
		case delivered:
		case n == 0:
			select {
			case <-r.wake:
			case <-r.closing:
				return
			}
		default:
			select {
			case <-r.closing:
				return
			default:
			}
			runtime.Gosched()
		}
	}
}

func (r *Reorder) apply(op *rop) error {
	switch op.kind {
	case ropPut:
		if err := r.inner.Fence(op.pe); err != nil {
			return err
		}
		if op.src >= 0 && r.rng.Intn(2) == 0 { // the source buffer is read now, not at the call
			op.data = op.ctx.peek(uint64(op.src), len(op.data))
		}
		return r.inner.Put(op.pe, op.off, op.data)
	case ropGet:
		return r.inner.Get(op.pe, op.off, op.data)
	case ropAMO:
		if err := r.inner.Fence(op.pe); err != nil {
			return err
		}
		old, err := r.amo(op.pe, op.op, op.width, op.off, op.value, op.compare)
		if err == nil && op.result != nil {
			var b [8]byte
			binary.LittleEndian.PutUint64(b[:], old)
			copy(op.result, b[:op.width])
		}
		return err
	case ropStore:
		h := r.cfg.Local
		if op.pe != r.cfg.PE {
			if op.pe >= len(r.cfg.Heaps) || r.cfg.Heaps[op.pe] == nil {
				return fmt.Errorf("plain store to PE %d at heap offset %d: PE %d's heap is not mapped here", op.pe, op.off, op.pe)
			}
			h = r.cfg.Heaps[op.pe]
		}
		atomic.StoreUint64((*uint64)(unsafe.Pointer(&h[op.off])), binary.LittleEndian.Uint64(op.data))
		if op.pe == r.cfg.PE {
			// it has reached memory: the views of the PE's cache hold it from now on, as its own
			// thread saw it from its buffer (another thread sees it only from here on)
			for _, c := range r.cache {
				if op.off >= c.off && op.off+8 <= c.off+uint64(len(c.view)) {
					copy(c.view[op.off-c.off:], op.data)
				}
			}
		}
	case ropLoad:
		*op.into = r.loadNow(op.off)
	}
	return nil
}

// amo runs an AMO on pe. Where the heaps are mapped, a read-modify-write is sometimes split into
// its read and its write with a pause between, holding the target's lock for the word, so that
// it stays atomic among AMOs (every AMO of the job takes the lock) while a put may land in between,
// as OpenSHMEM allows.
func (r *Reorder) amo(pe int, op AMOOp, width int, dst uint64, value, compare uint64) (uint64, error) {
	if r.cfg.LockOff == 0 || pe >= len(r.cfg.Heaps) || r.cfg.Heaps[pe] == nil {
		return r.inner.AMO(pe, op, width, dst, value, compare)
	}
	h := r.cfg.Heaps[pe]
	if err := CheckAMO(op, width, dst); err != nil {
		return 0, err
	}
	if dst+uint64(width) > uint64(len(h)) {
		return 0, fmt.Errorf("%v on PE %d at heap offset %d: outside the %d-byte heap", op, pe, dst, len(h))
	}
	lock := (*uint64)(unsafe.Pointer(&h[r.cfg.LockOff+(dst/8%(LockBytes/8))*8]))
	deadline := time.Now().Add(r.cfg.Timeout)
	for n := 0; !atomic.CompareAndSwapUint64(lock, 0, uint64(r.cfg.PE)+1); n++ {
		if n%1024 == 1023 {
			if time.Now().After(deadline) {
				return 0, fmt.Errorf("%v on PE %d at heap offset %d: the AMO lock is held by PE %d for %v", op, pe, dst, int(atomic.LoadUint64(lock))-1, r.cfg.Timeout)
			}
			runtime.Gosched()
		}
	}
	defer atomic.StoreUint64(lock, 0)
	w := h[dst : dst+uint64(width)]
	if op == AMOFetch || r.rng.Intn(2) == 0 {
		return ApplyAMO(w, op, width, value, compare)
	}
	old, _ := ApplyAMO(w, AMOFetch, width, 0, 0)
	spin(r.rng.Intn(20000) + r.rng.Intn(4)/3*r.rng.Intn(300000)) // sometimes long enough for a put to land
	nv, write := rmw(op, width, old, value, compare)
	if write {
		ApplyAMO(w, AMOSet, width, nv, 0)
	}
	return old, nil
}

// rmw is what op writes over old, and whether it writes.
func rmw(op AMOOp, width int, old, value, compare uint64) (uint64, bool) {
	mask := ^uint64(0)
	if width == 4 {
		mask = 0xffffffff
	}
	switch op {
	case AMOSet, AMOSwap:
		return value & mask, true
	case AMOCompareSwap:
		return value & mask, old == compare&mask
	case AMOFetchAdd:
		return (old + value) & mask, true
	case AMOFetchAnd:
		return old & value & mask, true
	case AMOFetchOr:
		return (old | value) & mask, true
	case AMOFetchXor:
		return (old ^ value) & mask, true
	}
	return old, false
}

var reorderSink atomic.Uint64

func spin(n int) {
	s := uint64(n)
	for i := 0; i < n; i++ {
		s = s*6364136223846793005 + 1442695040888963407
	}
	reorderSink.Add(s)
}

// Put queues a copy of src for pe.
func (c *ReorderCtx) Put(pe int, dst uint64, src []byte) error {
	r := c.r
	r.mu.Lock()
	defer r.mu.Unlock()
	r.issue(c, &rop{kind: ropPut, pe: pe, off: dst, data: append([]byte(nil), src...), src: -1})
	return nil
}

// PutFromLocal queues a put of the n bytes at srcOff of this PE's own heap to dst on pe, as
// put_nbi from a source buffer: the buffer is read through the context's store buffer at the call
// or, at random, when the put is delivered (any time up to its completion), so it sees the
// thread's stores before the call and perhaps later ones (the buffer reused before quiet). srcOff
// and n must be whole 8-byte words of the local heap.
func (c *ReorderCtx) PutFromLocal(pe int, dst uint64, srcOff uint64, n int) error {
	r := c.r
	if n <= 0 || n%8 != 0 || srcOff%8 != 0 || srcOff+uint64(n) > uint64(len(r.cfg.Local)) {
		return fmt.Errorf("put from PE %d's heap at offset %d, %d bytes: not whole words of the %d-byte heap", r.cfg.PE, srcOff, n, len(r.cfg.Local))
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	// data is the buffer as the call sees it; the delivery reads it again half of the time
	r.issue(c, &rop{kind: ropPut, pe: pe, off: dst, data: c.peek(srcOff, n), src: int64(srcOff)})
	return nil
}

// peek reads n bytes at off of the local heap as this context's thread sees them: each word from
// its latest buffered store, else from memory; r.mu held.
func (c *ReorderCtx) peek(off uint64, n int) []byte {
	r := c.r
	b := make([]byte, n)
	for w := uint64(0); w < uint64(n); w += 8 {
		binary.LittleEndian.PutUint64(b[w:], atomic.LoadUint64((*uint64)(unsafe.Pointer(&r.cfg.Local[off+w]))))
		if o := c.buffered(off + w); o != nil {
			copy(b[w:], o.data)
		}
	}
	return b
}

// buffered is the context's latest buffered store to its own PE's word at off, or nil; r.mu held.
func (c *ReorderCtx) buffered(off uint64) *rop {
	r := c.r
	for i := len(r.pool) - 1; i >= 0; i-- {
		if o := r.pool[i]; o.kind == ropStore && o.ctx == c && o.pe == r.cfg.PE && o.off == off {
			return o
		}
	}
	return nil
}

// Get reads at once: fence does not order a get after earlier puts.
func (c *ReorderCtx) Get(pe int, src uint64, dst []byte) error { return c.r.inner.Get(pe, src, dst) }

// GetNBI queues the read; the context's Quiet performs it at the latest.
func (c *ReorderCtx) GetNBI(pe int, src uint64, dst []byte) error {
	r := c.r
	r.mu.Lock()
	defer r.mu.Unlock()
	r.issue(c, &rop{kind: ropGet, pe: pe, off: src, data: dst, unfenced: true})
	return nil
}

// AMO waits until every operation of the context to pe before its last Fence is delivered, then
// runs: a fetching AMO may overtake the puts issued since (and every other context's).
func (c *ReorderCtx) AMO(pe int, op AMOOp, width int, dst uint64, value, compare uint64) (uint64, error) {
	r := c.r
	r.mu.Lock()
	e := c.epoch[pe]
	r.drain(func(o *rop) bool { return o.ctx == c && o.pe == pe && o.epoch < e && !o.unfenced })
	r.mu.Unlock()
	return r.amo(pe, op, width, dst, value, compare)
}

// AMOUnfenced runs an AMO at once, ordered after nothing pending: the runtime's own signalling
// (sync_all's), as on a context of its own.
func (r *Reorder) AMOUnfenced(pe int, op AMOOp, width int, dst uint64, value, compare uint64) (uint64, error) {
	return r.amo(pe, op, width, dst, value, compare)
}

// PostAMO queues a non-fetching AMO.
func (c *ReorderCtx) PostAMO(pe int, op AMOOp, width int, dst uint64, value, compare uint64) error {
	if err := CheckAMO(op, width, dst); err != nil {
		return err
	}
	r := c.r
	r.mu.Lock()
	defer r.mu.Unlock()
	r.issue(c, &rop{kind: ropAMO, pe: pe, off: dst, op: op, width: width, value: value, compare: compare})
	return nil
}

// FetchAMONBI queues a fetching AMO whose old value lands in result when it is delivered: like a
// posted AMO it waits in the pool (ordered by the context's Fence, performed by its Quiet at the
// latest), so the value is defined only after the context's next Quiet.
func (c *ReorderCtx) FetchAMONBI(pe int, op AMOOp, width int, dst uint64, value, compare uint64, result []byte) error {
	if err := CheckAMO(op, width, dst); err != nil {
		return err
	}
	if len(result) != width {
		return fmt.Errorf("%v on PE %d at heap offset %d: result buffer of %d bytes for a %d-byte AMO", op, pe, dst, len(result), width)
	}
	r := c.r
	r.mu.Lock()
	defer r.mu.Unlock()
	r.issue(c, &rop{kind: ropAMO, pe: pe, off: dst, op: op, width: width, value: value, compare: compare, result: result})
	return nil
}

// PutSignal queues the data and the signal as two deliveries, the signal after the data (with
// MutSignalFirst: the data after the signal).
func (c *ReorderCtx) PutSignal(pe int, dst uint64, src []byte, sig uint64, sigOp SignalOp, sigValue uint64) error {
	op := AMOSet
	if sigOp == SignalAdd {
		op = AMOFetchAdd
	}
	r := c.r
	r.mu.Lock()
	defer r.mu.Unlock()
	data := &rop{kind: ropPut, pe: pe, off: dst, data: append([]byte(nil), src...), src: -1}
	signal := &rop{kind: ropAMO, pe: pe, off: sig, op: op, width: 8, value: sigValue}
	if r.mutated(MutSignalFirst) {
		r.issue(c, signal)
		data.after = signal
		r.issue(c, data)
		return nil
	}
	r.issue(c, data)
	signal.after = data
	r.issue(c, signal)
	return nil
}

// Fence makes the context's later operations to pe (every PE when pe < 0) wait for its earlier
// ones. A plain store is a delivery to this PE: in Strict, the context's later deliveries to this
// PE wait for the stores issued through it (FenceOrdersStores); in Bypass a fence does not write
// them back.
func (c *ReorderCtx) Fence(pe int) error {
	if c.r.mutated(MutDropFences) {
		return nil
	}
	c.r.mu.Lock()
	defer c.r.mu.Unlock()
	c.fence(pe)
	return nil
}

// fence is Fence; r.mu held.
func (c *ReorderCtx) fence(pe int) {
	if pe < 0 {
		for i := range c.epoch {
			c.epoch[i]++
		}
	} else {
		c.epoch[pe]++
	}
}

// Quiet delivers everything the context issued (to pe, or to all when pe < 0), performs the PE's
// late plain loads and writes its plain stores back, every thread's (shmem_ctx_quiet completes
// the PE's memory stores: for a thread, more than the model promises, §3b), then quiets inner.
// Other contexts' operations stay pending.
func (c *ReorderCtx) Quiet(ctx context.Context, pe int) error {
	r := c.r
	r.mu.Lock()
	if r.mutated(MutQuietAsFence) {
		c.fence(pe)
		r.mu.Unlock()
		return nil
	}
	want := func(o *rop) bool {
		return o.ctx == c && (pe < 0 || o.pe == pe) || o.kind == ropStore || o.kind == ropLoad
	}
	// The deliverer takes them at their times: a quiet does not shorten what another PE may see
	// between two deliveries.
	deadline := time.Now().Add(r.cfg.Timeout)
	for n := 0; r.pending(want); n++ {
		r.mu.Unlock()
		if n%256 == 255 {
			if err := ctx.Err(); err != nil {
				return err
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("quiet: operations still pending after %v", r.cfg.Timeout)
			}
		}
		runtime.Gosched()
		r.mu.Lock()
	}
	err := r.err
	r.err = nil
	r.mu.Unlock()
	if err != nil {
		return err
	}
	return r.inner.Quiet(ctx, pe)
}

// Close does nothing: a context's operations are the path's, which Reorder.Close ends.
func (c *ReorderCtx) Close() error { return nil }

// Sync is shmem_sync_all's part: it completes the PE's plain accesses (late loads; in Strict also
// the store buffers), which sync_all orders, and nothing else.
func (r *Reorder) Sync() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.drain(func(o *rop) bool { return o.kind == ropLoad || o.kind == ropStore && !r.cfg.Bypass })
}

// Acquire is an acquiring call's invalidate (wait_until, barrier): in Bypass, plain loads see
// memory as it is now from here on. The view is the PE's, shared by its threads: one thread's
// acquire refreshes it for all (more than the model promises, never less).
func (r *Reorder) Acquire() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.cache {
		copy(c.view, r.cfg.Local[c.off:])
	}
}

// Cache declares [off, off+n) of the local heap as plain data whose loads (Load) may be stale in
// Bypass; the view starts as memory is now. The view holds what memory held, never a store still
// in a store buffer: a thread reads its own from its buffer, the others' once they have landed.
func (r *Reorder) Cache(off uint64, n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := cached{off: off, view: make([]byte, n)}
	copy(c.view, r.cfg.Local[off:])
	r.cache = append(r.cache, c)
}

// Uncache forgets every range Cache declared.
func (r *Reorder) Uncache() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cache = nil
}

// Store is a plain 8-byte store to the local heap at off by the context's thread: it waits in the
// context's store buffer until it is delivered, at a random time, or a fence (Strict) or quiet
// writes it back.
func (c *ReorderCtx) Store(off uint64, v uint64) { c.StoreTo(c.r.cfg.PE, off, v) }

// StoreTo is a plain 8-byte store to pe's heap at off: for another PE a store through
// roxshmem_ptr (its heap mapped here). It waits like Store's and lands in pe's memory; in Strict
// the context's fence orders it before the context's later deliveries to pe (MODEL.md §3b), in
// Bypass only quiet.
func (c *ReorderCtx) StoreTo(pe int, off uint64, v uint64) {
	r := c.r
	r.mu.Lock()
	defer r.mu.Unlock()
	b := binary.LittleEndian.AppendUint64(nil, v)
	if pe == r.cfg.PE {
		// a thread's plain accesses to one word keep their order: its late load of the word is
		// performed first
		r.drain(func(o *rop) bool { return o.ctx == c && o.kind == ropLoad && o.off == off })
	}
	r.issue(c, &rop{kind: ropStore, pe: pe, off: off, data: b, unfenced: r.cfg.Bypass})
}

// Destination prepares the own word at off for a network write into it (a get's destination):
// the write follows the thread's earlier plain accesses to the word, so its late loads are
// performed first and, in Strict, its buffered stores written back; in Bypass a dirty line of an
// earlier store may still be written back after the get's data (MODEL.md §3b, Get+dst+st).
func (c *ReorderCtx) Destination(off uint64) {
	r := c.r
	r.mu.Lock()
	defer r.mu.Unlock()
	me := r.cfg.PE
	mine := func(o *rop) bool {
		return o.ctx == c && o.pe == me && o.off == off && (o.kind == ropLoad || o.kind == ropStore && !r.cfg.Bypass)
	}
	// a fence may order such a store after the context's earlier deliveries to this PE: those go
	// first
	var e uint64
	for _, o := range r.pool {
		if mine(o) && o.kind == ropStore {
			e = max(e, o.epoch)
		}
	}
	r.drain(func(o *rop) bool { return mine(o) || o.ctx == c && o.pe == me && !o.unfenced && o.epoch < e })
}

// Load is a plain 8-byte load of the local heap at off into *into by the context's thread: its
// own buffered store is seen at once (another thread's is not); otherwise it is performed late
// (by the next quiet, sync or the thread's plain access to the word at the latest) and, in
// Bypass, may read the view of the last Acquire.
func (c *ReorderCtx) Load(off uint64, into *uint64) {
	r := c.r
	r.mu.Lock()
	defer r.mu.Unlock()
	if o := c.buffered(off); o != nil {
		*into = binary.LittleEndian.Uint64(o.data)
		return
	}
	r.drain(func(o *rop) bool { return o.ctx == c && o.kind == ropLoad && o.off == off })
	if r.rng.Intn(3) != 0 {
		*into = r.loadNow(off)
		return
	}
	r.issue(c, &rop{kind: ropLoad, pe: r.cfg.PE, off: off, into: into, unfenced: true})
}

// loadNow performs a plain load: in Bypass, of the view (a stale line) or of memory, at random.
func (r *Reorder) loadNow(off uint64) uint64 {
	if r.cfg.Bypass && r.rng.Intn(2) == 0 {
		for _, c := range r.cache {
			if off >= c.off && off+8 <= c.off+uint64(len(c.view)) {
				return binary.LittleEndian.Uint64(c.view[off-c.off:])
			}
		}
	}
	return atomic.LoadUint64((*uint64)(unsafe.Pointer(&r.cfg.Local[off])))
}

// Close delivers nothing more and closes inner.
func (r *Reorder) Close() error {
	select {
	case <-r.closing:
	default:
		close(r.closing)
	}
	<-r.closed
	return r.inner.Close()
}

// Mapped is a Transport over heaps this process maps (the host backend's shared memory): puts and
// gets are copies, AMOs CPU atomics; Fence and Quiet have nothing to wait for. It is what the
// reordering path delivers through on one node.
type Mapped [][]byte

func (m Mapped) heap(pe int, off uint64, n int) ([]byte, error) {
	if pe < 0 || pe >= len(m) || m[pe] == nil {
		return nil, fmt.Errorf("PE %d's heap is not mapped here", pe)
	}
	h := m[pe]
	if n < 0 || off > uint64(len(h)) || uint64(n) > uint64(len(h))-off {
		return nil, fmt.Errorf("range [%d, %d) is outside PE %d's %d-byte symmetric heap", off, off+uint64(n), pe, len(h))
	}
	return h[off : off+uint64(n)], nil
}

func (m Mapped) Put(pe int, dst uint64, src []byte) error {
	b, err := m.heap(pe, dst, len(src))
	switch {
	case err == nil && len(src) == 8 && uintptr(unsafe.Pointer(&b[0]))%8 == 0:
		// one aligned word lands whole, as a store of the CPU or a NIC's write does
		atomic.StoreUint64((*uint64)(unsafe.Pointer(&b[0])), binary.LittleEndian.Uint64(src))
	case err == nil && len(src) == 4 && uintptr(unsafe.Pointer(&b[0]))%4 == 0:
		// so does an aligned 32-bit half, beside 64-bit accesses to its word (mixed widths)
		atomic.StoreUint32((*uint32)(unsafe.Pointer(&b[0])), binary.LittleEndian.Uint32(src))
	case err == nil:
		copy(b, src)
	}
	return err
}

func (m Mapped) Get(pe int, src uint64, dst []byte) error {
	b, err := m.heap(pe, src, len(dst))
	switch {
	case err == nil && len(dst) == 8 && uintptr(unsafe.Pointer(&b[0]))%8 == 0: // one aligned word, read whole
		binary.LittleEndian.PutUint64(dst, atomic.LoadUint64((*uint64)(unsafe.Pointer(&b[0]))))
	case err == nil && len(dst) == 4 && uintptr(unsafe.Pointer(&b[0]))%4 == 0:
		binary.LittleEndian.PutUint32(dst, atomic.LoadUint32((*uint32)(unsafe.Pointer(&b[0]))))
	case err == nil:
		copy(dst, b)
	}
	return err
}

func (m Mapped) AMO(pe int, op AMOOp, width int, dst uint64, value, compare uint64) (uint64, error) {
	b, err := m.heap(pe, dst, width)
	if err != nil {
		return 0, err
	}
	return ApplyAMO(b, op, width, value, compare)
}

func (m Mapped) PutSignal(pe int, dst uint64, src []byte, sig uint64, sigOp SignalOp, sigValue uint64) error {
	if err := m.Put(pe, dst, src); err != nil {
		return err
	}
	b, err := m.heap(pe, sig, 8)
	if err != nil {
		return err
	}
	return ApplySignal(b, sigOp, sigValue)
}

func (m Mapped) Fence(pe int) error                      { return nil }
func (m Mapped) Quiet(ctx context.Context, pe int) error { return nil }
func (m Mapped) Close() error                            { return nil }
