package shmem

import (
	"context"
	"strings"
	"sync/atomic"

	"github.com/roxamen/roxamen/nic"
)

// CtxOption is a property of a communication context (SHMEM_CTX_*).
type CtxOption uint

const (
	// CtxSerialized: the caller never uses the context from two goroutines at once.
	CtxSerialized CtxOption = 1 << iota
	// CtxPrivate: only the goroutine that created the context uses it.
	CtxPrivate
	// CtxNoStore: the context is not used for puts or AMOs that write; Put, P, PutNBI and the
	// writing AMOs on it are an error, and its Quiet has no writes to complete.
	CtxNoStore
)

func (o CtxOption) String() string {
	var s []string
	for _, f := range []struct {
		o    CtxOption
		name string
	}{{CtxSerialized, "SERIALIZED"}, {CtxPrivate, "PRIVATE"}, {CtxNoStore, "NOSTORE"}} {
		if o&f.o != 0 {
			s = append(s, f.name)
		}
	}
	if len(s) == 0 {
		return "0"
	}
	return strings.Join(s, "|")
}

// Ctx is a communication context (shmem_ctx_t): a stream of RMA and AMO operations that Fence
// and Quiet order and complete on their own. A Quiet on one context completes the operations
// issued on it, and does not wait for those of other contexts to other PEs.
//
// What it promises, per path: over load/store, every put is complete when it returns, so a
// context's Quiet is only the memory barrier. Over the NIC path, the context remembers which PEs
// it has written since its last Quiet and flushes those alone (nic.Transport.Quiet per PE). The
// transports keep one ordered connection (nic/tcp) or endpoint (nic/ucx, ucp_ep_flush_nbx) per
// pair of PEs shared by all contexts, so that flush also completes other contexts' earlier
// operations to the same PEs: more than a context's Quiet promises, never less (memmodel's
// litmus tests say what a program may rely on). Over the reordering delivery path
// (ROX_DELIVERY=reorder) a context is a stream of its own (nic.ReorderCtx): its Fence and Quiet
// order and complete its operations and no other context's, which is all the model promises.
//
// The options are the caller's promises (SERIALIZED, PRIVATE) and restrictions (NOSTORE); the
// context stays safe for concurrent use whatever they say.
type Ctx struct {
	w         *World
	opts      CtxOption
	dirty     []atomic.Bool // remote PEs written since the last Quiet
	destroyed atomic.Bool
	// ro is the context's own stream on the reordering delivery path (ROX_DELIVERY=reorder), or
	// nil: there the context's operations wait in the path's pool as its own, so that its Fence
	// and Quiet order and complete them and nothing of other contexts (MODEL.md §3a).
	ro *nic.ReorderCtx
}

// CreateCtx makes a context (shmem_ctx_create).
func (w *World) CreateCtx(opts CtxOption) (*Ctx, error) {
	if err := w.check("CreateCtx"); err != nil {
		return nil, err
	}
	if opts&^(CtxSerialized|CtxPrivate|CtxNoStore) != 0 {
		return nil, w.errorf("CreateCtx", ErrBadArgument, "unknown options %#x (want CtxSerialized|CtxPrivate|CtxNoStore)", uint(opts))
	}
	c := &Ctx{w: w, opts: opts, dirty: make([]atomic.Bool, w.npes)}
	if w.reorder != nil {
		c.ro = w.reorder.NewContext()
	}
	return c, nil
}

// path is the context's path to pe: its own stream on the reordering path, else the World's.
func (c *Ctx) path(pe int) path {
	if c.ro != nil {
		return remote{c.ro, pe}
	}
	return c.w.paths[pe]
}

// Options returns the options the context was made with.
func (c *Ctx) Options() CtxOption {
	if c == nil {
		return 0
	}
	return c.opts
}

// Destroy completes the context's operations (as Quiet) and releases it (shmem_ctx_destroy);
// later calls on it fail with ErrBadArgument.
func (c *Ctx) Destroy() error {
	if err := c.check("CtxDestroy", false); err != nil {
		return err
	}
	err := c.quiet("CtxDestroy")
	c.destroyed.Store(true)
	return err
}

func (c *Ctx) check(call string, store bool) error {
	if c == nil {
		return &Error{Call: call, PE: callerPE(), Kind: ErrBadArgument, Detail: "nil context"}
	}
	if err := c.w.check(call); err != nil {
		return err
	}
	if c.destroyed.Load() {
		return c.w.errorf(call, ErrBadArgument, "context was destroyed")
	}
	if store && c.opts&CtxNoStore != 0 {
		return c.w.errorf(call, ErrBadArgument, "a write on a NOSTORE context")
	}
	return nil
}

// wrote notes that the context issued a write to pe that its Quiet must complete: one through the
// NIC path, or any on the reordering delivery path (which queues even a PE's writes to itself).
func (c *Ctx) wrote(pe int) {
	if (c.w.peers[pe] == nil || c.w.reorder != nil) && !c.dirty[pe].Load() {
		c.dirty[pe].Store(true)
	}
}

func ctxSym[T Elem](c *Ctx, call string, s Sym[T], store bool) error {
	if err := c.check(call, store); err != nil {
		return err
	}
	if s.w != nil && s.w != c.w {
		return c.w.errorf(call, ErrNotSymmetric, "array at heap offset %d belongs to another World than the context", s.off)
	}
	return nil
}

// CtxPut is Put on context c (shmem_ctx_put).
func CtxPut[T Elem](c *Ctx, s Sym[T], at int, src []T, pe int) error {
	return ctxPut(c, "CtxPut", s, pe, at, src)
}

func ctxPut[T Elem](c *Ctx, call string, s Sym[T], pe, at int, src []T) error {
	if err := ctxSym(c, call, s, true); err != nil {
		return err
	}
	off, size, err := s.target(call, pe, at, len(src))
	if err != nil {
		return err
	}
	if err := c.w.putOn(call, c.path(pe), pe, off, asBytes(src)[:size]); err != nil {
		return err
	}
	c.wrote(pe)
	return nil
}

// CtxPutNBI is PutNBI on context c: src must not change until c.Quiet.
func CtxPutNBI[T Elem](c *Ctx, s Sym[T], at int, src []T, pe int) error {
	return ctxPut(c, "CtxPutNBI", s, pe, at, src)
}

// CtxP writes one element on context c (shmem_ctx_p).
func CtxP[T Elem](c *Ctx, s Sym[T], at int, v T, pe int) error {
	return ctxPut(c, "CtxP", s, pe, at, []T{v})
}

// CtxGet is Get on context c (shmem_ctx_get).
func CtxGet[T Elem](c *Ctx, s Sym[T], at int, dst []T, pe int) error {
	return ctxGet(c, "CtxGet", s, pe, at, dst)
}

func ctxGet[T Elem](c *Ctx, call string, s Sym[T], pe, at int, dst []T) error {
	if err := ctxSym(c, call, s, false); err != nil {
		return err
	}
	off, size, err := s.target(call, pe, at, len(dst))
	if err != nil {
		return err
	}
	return c.w.getOn(call, c.path(pe), pe, off, asBytes(dst)[:size])
}

// CtxG reads one element on context c (shmem_ctx_g).
func CtxG[T Elem](c *Ctx, s Sym[T], at, pe int) (T, error) {
	var v [1]T
	err := ctxGet(c, "CtxG", s, pe, at, v[:])
	return v[0], err
}

func ctxAMO[T AMOStd](c *Ctx, call string, s Sym[T], at, pe int, op nic.AMOOp, val, cmp T) (T, error) {
	var z T
	if err := ctxSym(c, call, s, op != nic.AMOFetch); err != nil {
		return z, err
	}
	old, err := amoOn(call, s, at, pe, op, val, cmp, c.path(pe))
	if err == nil && op != nic.AMOFetch {
		c.wrote(pe)
	}
	return old, err
}

// CtxAtomicFetch is AtomicFetch on context c.
func CtxAtomicFetch[T AMOStd](c *Ctx, s Sym[T], at, pe int) (T, error) {
	var z T
	return ctxAMO(c, "CtxAtomicFetch", s, at, pe, nic.AMOFetch, z, z)
}

// CtxAtomicSet is AtomicSet on context c.
func CtxAtomicSet[T AMOStd](c *Ctx, s Sym[T], at int, v T, pe int) error {
	var z T
	_, err := ctxAMO(c, "CtxAtomicSet", s, at, pe, nic.AMOSet, v, z)
	return err
}

// CtxAtomicSwap is AtomicSwap on context c.
func CtxAtomicSwap[T AMOStd](c *Ctx, s Sym[T], at int, v T, pe int) (T, error) {
	var z T
	return ctxAMO(c, "CtxAtomicSwap", s, at, pe, nic.AMOSwap, v, z)
}

// CtxAtomicCompareSwap is AtomicCompareSwap on context c.
func CtxAtomicCompareSwap[T AMOInt](c *Ctx, s Sym[T], at int, cond, v T, pe int) (T, error) {
	return ctxAMO(c, "CtxAtomicCompareSwap", s, at, pe, nic.AMOCompareSwap, v, cond)
}

// CtxAtomicFetchAdd is AtomicFetchAdd on context c.
func CtxAtomicFetchAdd[T AMOInt](c *Ctx, s Sym[T], at int, v T, pe int) (T, error) {
	var z T
	return ctxAMO(c, "CtxAtomicFetchAdd", s, at, pe, nic.AMOFetchAdd, v, z)
}

// CtxAtomicAdd is AtomicAdd on context c.
func CtxAtomicAdd[T AMOInt](c *Ctx, s Sym[T], at int, v T, pe int) error {
	_, err := CtxAtomicFetchAdd(c, s, at, v, pe)
	return err
}

// Fence orders the context's operations: those it issued to a PE before the fence are delivered
// before those it issues to that PE after (shmem_ctx_fence).
func (c *Ctx) Fence() error {
	if err := c.check("CtxFence", false); err != nil {
		return err
	}
	fenceWord.Add(1)
	if c.ro != nil {
		// every PE: the context's plain stores (a thread's) are deliveries to this PE that no
		// dirty bit records
		return c.ro.Fence(-1)
	}
	for pe := range c.dirty {
		if c.dirty[pe].Load() {
			if err := c.w.transport.Fence(pe); err != nil {
				return c.w.pathError("CtxFence", pe, err)
			}
		}
	}
	return nil
}

// Quiet completes every operation issued on the context (shmem_ctx_quiet): it flushes the PEs
// the context wrote through the NIC path since its last Quiet, and no others.
func (c *Ctx) Quiet() error {
	if err := c.check("CtxQuiet", false); err != nil {
		return err
	}
	return c.quiet("CtxQuiet")
}

func (c *Ctx) quiet(call string) error {
	fenceWord.Add(1)
	if c.w.transport == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.w.timeout)
	defer cancel()
	if c.ro != nil {
		// the context's own stream, to every PE: its thread's plain stores are written back too
		for pe := range c.dirty {
			c.dirty[pe].Store(false)
		}
		if err := c.ro.Quiet(ctx, -1); err != nil {
			return c.w.pathError(call, -1, err)
		}
		return nil
	}
	for pe := range c.dirty {
		// Cleared before the flush: a write racing with this Quiet is not promised by it.
		if c.dirty[pe].Swap(false) {
			if err := c.w.transport.Quiet(ctx, pe); err != nil {
				return c.w.pathError(call, pe, err)
			}
		}
	}
	return nil
}

// pendingPEs reports which PEs the context's next Quiet would flush (for tests and debugging).
func (c *Ctx) pendingPEs() []int {
	var out []int
	for pe := range c.dirty {
		if c.dirty[pe].Load() {
			out = append(out, pe)
		}
	}
	return out
}

// ctxAMONBI is amoNBI on context c: c's Quiet completes it, so the target counts as written
// even for a fetch (the context's Quiet must wait for the value).
func ctxAMONBI[T AMOStd](c *Ctx, call string, s Sym[T], at, pe int, op nic.AMOOp, val, cmp T, fetch *T) error {
	if err := ctxSym(c, call, s, op != nic.AMOFetch); err != nil {
		return err
	}
	if err := amoNBIOn(call, s, at, pe, op, val, cmp, fetch, c.path(pe)); err != nil {
		return err
	}
	c.wrote(pe)
	return nil
}

// CtxAtomicFetchNBI is AtomicFetchNBI on context c: *fetch is defined after c.Quiet.
func CtxAtomicFetchNBI[T AMOStd](c *Ctx, s Sym[T], at, pe int, fetch *T) error {
	var z T
	return ctxAMONBI(c, "CtxAtomicFetchNBI", s, at, pe, nic.AMOFetch, z, z, fetch)
}

// CtxAtomicSwapNBI is AtomicSwapNBI on context c.
func CtxAtomicSwapNBI[T AMOStd](c *Ctx, s Sym[T], at int, v T, pe int, fetch *T) error {
	var z T
	return ctxAMONBI(c, "CtxAtomicSwapNBI", s, at, pe, nic.AMOSwap, v, z, fetch)
}

// CtxAtomicCompareSwapNBI is AtomicCompareSwapNBI on context c.
func CtxAtomicCompareSwapNBI[T AMOInt](c *Ctx, s Sym[T], at int, cond, v T, pe int, fetch *T) error {
	return ctxAMONBI(c, "CtxAtomicCompareSwapNBI", s, at, pe, nic.AMOCompareSwap, v, cond, fetch)
}

// CtxAtomicFetchAddNBI is AtomicFetchAddNBI on context c.
func CtxAtomicFetchAddNBI[T AMOInt](c *Ctx, s Sym[T], at int, v T, pe int, fetch *T) error {
	var z T
	return ctxAMONBI(c, "CtxAtomicFetchAddNBI", s, at, pe, nic.AMOFetchAdd, v, z, fetch)
}
