package shmem

// Host collectives: the team calls' entry points and their argument checks. Each checks its typed
// arguments, turns them into heap offsets, an element kind and counts, takes the team's gate and
// runs the call on the collectives' engine (shmem/internal/coll, reached through coll_engine.go).
// A call whose arguments this PE refuses still takes its place in the team's sequence (refuse), so
// that it fails on every PE at once.
//
// Concurrency: one call at a time per team on each PE (Team.gate); several teams may run calls at
// once from different goroutines.

import (
	"context"

	"github.com/roxamen/roxamen/shmem/internal/coll"
)

// Collective names a collective for Team.Algorithm.
type Collective string

const (
	CollBroadcast     Collective = "broadcast"
	CollFCollect      Collective = "fcollect"
	CollCollect       Collective = "collect"
	CollAllToAll      Collective = "alltoall"
	CollAllToAlls     Collective = "alltoalls"
	CollAllReduce     Collective = "allreduce"
	CollReduceScatter Collective = "reduce_scatter"
	CollBarrier       Collective = "barrier"
)

// Algorithm returns the algorithm a call of coll on t moving bytes bytes per PE (the source
// buffer's size) uses under the current ROX_COLL_ALGO, as it appears in benchmark rows.
func (t *Team) Algorithm(coll Collective, bytes int) string {
	if t == nil {
		return ""
	}
	return t.c.Algorithm(string(coll), bytes)
}

// Sync waits until every PE of the team has reached it (shmem_team_sync), without completing
// outstanding operations.
func (t *Team) Sync(ctx context.Context) error {
	return t.sync(ctx, "Sync", coll.CallSync)
}

// Barrier completes this PE's operations (as Quiet), then waits until every PE of the team has
// reached it.
func (t *Team) Barrier(ctx context.Context) error {
	if err := t.check("Barrier"); err != nil {
		return err
	}
	if err := t.w.Quiet(); err != nil {
		return err
	}
	if err := t.sync(ctx, "Barrier", coll.CallBarrier); err != nil {
		return err
	}
	t.w.acquire() // a barrier acquires, as BarrierAll does
	return nil
}

func (t *Team) sync(ctx context.Context, call string, id coll.Call) error {
	if err := t.check(call); err != nil {
		return err
	}
	release, err := t.gate(call)
	if err != nil {
		return err
	}
	defer release()
	t.w.syncPoint()
	return t.c.Sync(ctx, call, id)
}

// refuse is how a collective call ends when this PE's argument check refused it (err): the call
// still takes its place in the team's sequence, with a header that says it was refused, so that
// every other PE's call fails at once (ErrMismatch naming this PE) instead of being matched with
// this PE's next call. It returns err. A team that cannot make calls (nil, destroyed, finalized)
// has no sequence to keep.
func (t *Team) refuse(ctx context.Context, call string, id coll.Call, err error) error {
	if t.check(call) != nil {
		return err
	}
	release, gerr := t.gate(call)
	if gerr != nil {
		return err
	}
	defer release()
	_ = t.c.Refuse(ctx, call, id, refusalCode(err))
	return err
}

// ---- Broadcast ----

// Broadcast copies root's src into dst on every PE of the team, root included
// (shmem_broadcastmem; root is a team PE number). dst and src have the same length on every PE
// and may be the same array; other overlaps are an error.
func Broadcast[T Elem](ctx context.Context, t *Team, dst, src Sym[T], root int) error {
	const call = "Broadcast"
	if err := broadcastArgs(t, call, dst, src, root); err != nil {
		return t.refuse(ctx, call, coll.CallBroadcast, err)
	}
	release, err := t.gate(call)
	if err != nil {
		return err
	}
	defer release()
	t.w.syncPoint() // the entry orders the PE's completed plain accesses (MODEL.md §3b)
	return t.c.Broadcast(ctx, call, elemKindOf[T](), dst.off, src.off, src.n, root)
}

// ---- FCollect, Collect ----

// FCollect concatenates every team PE's src, in team PE order, into dst on every PE
// (shmem_fcollectmem: all-gather). dst has NPEs times src's elements. src may be this PE's own
// block of dst (dst[MyPE*len(src):], in place); any other overlap is an error.
func FCollect[T Elem](ctx context.Context, t *Team, dst, src Sym[T]) error {
	const call = "FCollect"
	if err := fcollectArgs(t, call, dst, src); err != nil {
		return t.refuse(ctx, call, coll.CallFCollect, err)
	}
	release, err := t.gate(call)
	if err != nil {
		return err
	}
	defer release()
	return t.c.FCollect(ctx, call, elemKindOf[T](), dst.off, src.off, src.n)
}

// Collect concatenates every team PE's src, in team PE order, into dst on every PE; the sources
// may differ in length (shmem_collectmem). dst must hold the total on every PE (checked on every
// PE against every PE's destination). src may be this PE's own block of dst; any other overlap
// is an error.
func Collect[T Elem](ctx context.Context, t *Team, dst, src Sym[T]) error {
	const call = "Collect"
	if err := collArgs(t, call, dst, src); err != nil {
		return t.refuse(ctx, call, coll.CallCollect, err)
	}
	release, err := t.gate(call)
	if err != nil {
		return err
	}
	defer release()
	// The overlap check needs every PE's count (where this PE's block lands): the engine runs it
	// once the headers are in.
	overlap := func(at int) error {
		return disjointUnless(t, call, dst, src, src.off == dst.off+uint64(at*dst.elemSize()), "the source may only be this PE's own block of the destination")
	}
	return t.c.Collect(ctx, call, elemKindOf[T](), dst.off, src.off, src.n, dst.n, overlap)
}

// ---- AllToAll, AllToAlls ----

// AllToAll sends block j of src (len(src)/NPEs elements) to team PE j, where it lands as block i
// of dst, i being the sender (shmem_alltoallmem). dst and src have the same length, a multiple of
// NPEs, and must not overlap.
func AllToAll[T Elem](ctx context.Context, t *Team, dst, src Sym[T]) error {
	const call = "AllToAll"
	if err := allToAllArgs(t, call, dst, src); err != nil {
		return t.refuse(ctx, call, coll.CallAllToAll, err)
	}
	release, err := t.gate(call)
	if err != nil {
		return err
	}
	defer release()
	return t.c.AllToAll(ctx, call, elemKindOf[T](), dst.off, src.off, src.n)
}

// AllToAlls is AllToAll with strides (shmem_alltoalls): team PE i's element k of block j,
// src[(j*nelems+k)*sst], lands in team PE j's dst[(i*nelems+k)*dst]. Strides are in elements and
// at least 1; dst and src must not overlap.
func AllToAlls[T Elem](ctx context.Context, t *Team, dst, src Sym[T], dstStride, srcStride, nelems int) error {
	const call = "AllToAlls"
	if err := allToAllsArgs(t, call, dst, src, dstStride, srcStride, nelems); err != nil {
		return t.refuse(ctx, call, coll.CallAllToAlls, err)
	}
	release, err := t.gate(call)
	if err != nil {
		return err
	}
	defer release()
	return t.c.AllToAlls(ctx, call, elemKindOf[T](), dst.off, src.off, dstStride, srcStride, nelems)
}

// ---- AllReduce, ReduceScatter ----

// AllReduce reduces src elementwise over the team with op and leaves the result in dst on every
// PE (shmem_TYPE_OP_reduce, an all-reduce). dst and src have the same length and may be the same
// array; other overlaps are an error. The result is the same bits on every PE whatever the
// algorithm: each element is reduced in team PE order.
func AllReduce[T Elem](ctx context.Context, t *Team, dst, src Sym[T], op Op) error {
	const call = "AllReduce"
	if err := allReduceArgs(t, call, dst, src, op); err != nil {
		return t.refuse(ctx, call, coll.CallAllReduce, err)
	}
	release, err := t.gate(call)
	if err != nil {
		return err
	}
	defer release()
	t.w.syncPoint() // the entry orders the PE's completed plain accesses (MODEL.md §3b)
	return t.c.AllReduce(ctx, call, elemKindOf[T](), coll.Op(op), dst.off, src.off, src.n)
}

// ReduceScatter reduces src (NPEs blocks of len(dst) elements) over the team with op; team PE i
// gets the reduction of block i in dst (an extension, NCCL's reduce-scatter). dst may be this PE's
// own block of src (in place); any other overlap is an error.
func ReduceScatter[T Elem](ctx context.Context, t *Team, dst, src Sym[T], op Op) error {
	const call = "ReduceScatter"
	if err := reduceScatterArgs(t, call, dst, src, op); err != nil {
		return t.refuse(ctx, call, coll.CallReduceScatter, err)
	}
	release, err := t.gate(call)
	if err != nil {
		return err
	}
	defer release()
	return t.c.ReduceScatter(ctx, call, elemKindOf[T](), coll.Op(op), dst.off, src.off, dst.n)
}

// ---- argument checks ----

func symRange[T Elem](s Sym[T]) (uint64, uint64) {
	return s.off, s.off + uint64(s.n*s.elemSize())
}

// collArgs checks the team and the buffers of a call: both live, of this team's World.
func collArgs[T Elem](t *Team, call string, dst, src Sym[T]) error {
	if err := t.check(call); err != nil {
		return err
	}
	if err := symArg(t, call, "destination", dst.w, dst.off); err != nil {
		return err
	}
	if err := symArg(t, call, "source", src.w, src.off); err != nil {
		return err
	}
	if k := elemKindOf[T](); k == 0 {
		var z T
		return t.w.errorf(call, ErrBadArgument, "element type %T", z)
	}
	return nil
}

// symArg checks one buffer of a call (its World w, at heap offset off): allocated, of t's World.
func symArg(t *Team, call, name string, w *World, off uint64) error {
	if w == nil {
		return t.w.errorf(call, ErrNotInitialized, "%s is a zero symmetric object (not allocated)", name)
	}
	if w != t.w {
		return t.w.errorf(call, ErrNotSymmetric, "%s at heap offset %d belongs to another World", name, off)
	}
	return nil
}

// overlap says whether [a0,a1) and [b0,b1) share a byte.
func overlap(a0, a1, b0, b1 uint64) bool { return a0 < b1 && b0 < a1 && a0 != a1 && b0 != b1 }

func overlapErr[T Elem](t *Team, call string, dst, src Sym[T], allowed string) error {
	d0, d1 := symRange(dst)
	s0, s1 := symRange(src)
	return t.w.errorf(call, ErrBadArgument, "destination heap [%d, %d) overlaps source [%d, %d) (%s)", d0, d1, s0, s1, allowed)
}

// The checks of each collective, shared by its blocking form and its stream-ordered one (call
// names which): the same bad input gets the same error from both.

// broadcastArgs: dst and src of the same length, the same array or disjoint; root a team PE.
func broadcastArgs[T Elem](t *Team, call string, dst, src Sym[T], root int) error {
	if err := collArgs(t, call, dst, src); err != nil {
		return err
	}
	if dst.n != src.n {
		return t.w.errorf(call, ErrBadArgument, "destination has %d elements, source %d", dst.n, src.n)
	}
	if root < 0 || root >= len(t.members) {
		return t.w.errorf(call, ErrPERange, "root %d is not a PE of %s (%d PEs)", root, t.name, len(t.members))
	}
	return sameOrDisjointArgs(t, call, dst, src)
}

// fcollectArgs: dst holds NPEs times src's elements; src is disjoint from dst or this PE's own
// block of it.
func fcollectArgs[T Elem](t *Team, call string, dst, src Sym[T]) error {
	if err := collArgs(t, call, dst, src); err != nil {
		return err
	}
	n := len(t.members)
	if dst.n != n*src.n {
		return t.w.errorf(call, ErrBadArgument, "destination has %d elements, want %d (%d PEs x %d)", dst.n, n*src.n, n, src.n)
	}
	return disjointUnless(t, call, dst, src, src.off == dst.off+uint64(t.me*src.n*src.elemSize()),
		"the source may only be this PE's own block of the destination")
}

// allToAllArgs: dst and src of the same length, a multiple of NPEs, disjoint.
func allToAllArgs[T Elem](t *Team, call string, dst, src Sym[T]) error {
	if err := collArgs(t, call, dst, src); err != nil {
		return err
	}
	n := len(t.members)
	if dst.n != src.n || src.n%n != 0 {
		return t.w.errorf(call, ErrBadArgument, "destination has %d elements, source %d: want equal lengths, a multiple of the %d PEs of %s", dst.n, src.n, n, t.name)
	}
	return disjointArgs(t, call, dst, src)
}

// allToAllsArgs: strides at least 1, buffers long enough for them, disjoint.
func allToAllsArgs[T Elem](t *Team, call string, dst, src Sym[T], dstStride, srcStride, nelems int) error {
	if err := collArgs(t, call, dst, src); err != nil {
		return err
	}
	n := len(t.members)
	if dstStride < 1 || srcStride < 1 || nelems < 0 {
		return t.w.errorf(call, ErrBadArgument, "strides %d and %d must be at least 1, count %d not negative", dstStride, srcStride, nelems)
	}
	if need := (n*nelems-1)*srcStride + 1; nelems > 0 && src.n < need {
		return t.w.errorf(call, ErrBounds, "source has %d elements, %d PEs x %d at stride %d need %d", src.n, n, nelems, srcStride, need)
	}
	if need := (n*nelems-1)*dstStride + 1; nelems > 0 && dst.n < need {
		return t.w.errorf(call, ErrBounds, "destination has %d elements, %d PEs x %d at stride %d need %d", dst.n, n, nelems, dstStride, need)
	}
	return disjointArgs(t, call, dst, src)
}

// disjointArgs: an all-to-all's buffers share no byte.
func disjointArgs[T Elem](t *Team, call string, dst, src Sym[T]) error {
	return disjointUnless(t, call, dst, src, false, "all-to-all buffers must be disjoint")
}

// allReduceArgs: op applies to T; dst and src of the same length, the same array or disjoint.
func allReduceArgs[T Elem](t *Team, call string, dst, src Sym[T], op Op) error {
	if err := reduceOpArgs(t, call, dst, src, op); err != nil {
		return err
	}
	if dst.n != src.n {
		return t.w.errorf(call, ErrBadArgument, "destination has %d elements, source %d", dst.n, src.n)
	}
	return sameOrDisjointArgs(t, call, dst, src)
}

// reduceScatterArgs: op applies to T; src holds NPEs blocks of dst's length; dst is disjoint
// from src or this PE's own block of it.
func reduceScatterArgs[T Elem](t *Team, call string, dst, src Sym[T], op Op) error {
	if err := reduceOpArgs(t, call, dst, src, op); err != nil {
		return err
	}
	n := len(t.members)
	if src.n != n*dst.n {
		return t.w.errorf(call, ErrBadArgument, "source has %d elements, want %d (%d PEs x the destination's %d)", src.n, n*dst.n, n, dst.n)
	}
	return disjointUnless(t, call, dst, src, dst.off == src.off+uint64(t.me*dst.n*dst.elemSize()),
		"the destination may only be this PE's own block of the source")
}

// reduceOpArgs: collArgs, and op applies to T.
func reduceOpArgs[T Elem](t *Team, call string, dst, src Sym[T], op Op) error {
	if err := collArgs(t, call, dst, src); err != nil {
		return err
	}
	if why := coll.CheckOp(elemKindOf[T](), coll.Op(op)); why != "" {
		return t.w.errorf(call, ErrBadArgument, "%s", why)
	}
	return nil
}

// sameOrDisjointArgs: dst and src are the same array or share no byte.
func sameOrDisjointArgs[T Elem](t *Team, call string, dst, src Sym[T]) error {
	return disjointUnless(t, call, dst, src, dst.off == src.off, "they may be the same array or disjoint")
}

// disjointUnless refuses dst and src that share a byte, unless allowed: the one overlap the
// call accepts, which allowedWhat names.
func disjointUnless[T Elem](t *Team, call string, dst, src Sym[T], allowed bool, allowedWhat string) error {
	d0, d1 := symRange(dst)
	s0, s1 := symRange(src)
	if !allowed && overlap(d0, d1, s0, s1) {
		return overlapErr(t, call, dst, src, allowedWhat)
	}
	return nil
}
