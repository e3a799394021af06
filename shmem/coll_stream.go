package shmem

import (
	"context"
	"errors"

	"github.com/roxamen/roxamen/device"
	"github.com/roxamen/roxamen/kernels"
	"github.com/roxamen/roxamen/shmem/internal/coll"
	"github.com/roxamen/roxamen/shmem/internal/gpurt"
)

// Stream-ordered team collectives (NCCL's calling convention, nvshmemx_*_on_stream):
// AllReduceOnStream, AllGatherOnStream, AllToAllOnStream, BroadcastOnStream and
// ReduceScatterOnStream check their arguments, enqueue the collective on st and return without
// waiting. It runs when st reaches it, after the work enqueued before it; what it wrote is there
// for the work enqueued after it. Every member enqueues the same collectives on the team in the
// same order. Errors the collective meets while it runs (a member's mismatching call, a destroyed
// team, a PE that died) are reported by the stream's next SyncStream (or Module.Sync), naming the
// call, and a later stream-ordered collective on a stream that has failed is refused.
//
// On a GPU they are the runtime's own kernels (src/coll.hip, loaded on first use): one block runs
// coll.h's block-level collective on the team's device handle, or, for all-gather, broadcast and
// all-to-all of at least ROX_COLL_CE_THRESHOLD bytes per PE (or every size with ROX_COLL_ALGO=ce),
// the copy-engine offload: one block posts a copy-engine put per member and the data moves with
// no SM (StreamAlgorithm says which). They need every member load/store reachable (one node);
// teams that span the NIC use the blocking calls. A stream of the GPU (device.Capturer) may capture
// them into a CUDA or HIP graph and replay it: a call's kernel arguments are fixed per call site,
// and what changes from call to call (the round number, the LL flags, the grid barrier's
// generation) lives in the team's workspace on the device. On the host backend, whose streams are
// goroutines, the stream runs the blocking call (AllReduce...) when it reaches it; such a call on
// a team must not overlap a blocking collective on the same team from another goroutine (the
// second is refused with ErrConcurrent): synchronize the stream first.

// scolls returns the World's stream-collective engine (gpurt.Colls), made on first use; on a GPU
// the runtime releases it.
func (w *World) scolls() *gpurt.Colls {
	w.scollOnce.Do(func() {
		w.scoll = gpurt.NewColls()
		if w.gpu != nil {
			w.gpu.Colls = w.scoll
		}
	})
	return w.scoll
}

// streamCall is one stream-ordered collective on the host backend, ready to enqueue (a GPU takes
// devStream's path).
type streamCall struct {
	call string
	t    *Team
	st   device.Stream
	run  func(ctx context.Context) error // the blocking form
}

func (c *streamCall) enqueue() error {
	t, w := c.t, c.t.w
	if c.st == nil {
		return w.errorf(c.call, ErrBadArgument, "nil stream")
	}
	// The host backend's stream remembers a failed operation and skips the rest: refuse at once.
	// (On a GPU a stream fails only with its context, and then the launch fails itself; a stream
	// query there costs a driver call per enqueue, as much as the launch.)
	if _, err := c.st.Query(); err != nil {
		return &Error{Call: c.call, PE: w.pe, Kind: innerKind(err), Detail: "the stream failed earlier (" + w.scolls().TakePending(c.st) + ")", Err: err}
	}
	sc := w.scolls()
	err := sc.EnqueueHost(w.dev, c.st, func() error {
		if err := c.run(context.Background()); err != nil {
			return &Error{Call: c.call, PE: w.pe, Kind: innerKind(err), Detail: "the stream-ordered collective on " + t.name + " failed", Err: err}
		}
		return nil
	})
	if err != nil {
		return w.rtError(c.call, ErrPEFailed, err)
	}
	sc.Enqueued(c.st, c.call, t.name)
	return nil
}

// devStream starts a stream collective's GPU path: no closures and no bookkeeping beyond the
// launch (enqueueing is the hot path of a small collective); the engine, or the nil stream's error.
func (t *Team) devStream(call string, st device.Stream) (*gpurt.Colls, error) {
	if st == nil {
		return nil, t.w.errorf(call, ErrBadArgument, "nil stream")
	}
	return t.w.scolls(), nil
}

// devEnqueued notes a call the GPU path enqueued on st (err nil: for SyncStream's messages) and
// returns err.
func (t *Team) devEnqueued(sc *gpurt.Colls, st device.Stream, call string, err error) error {
	if err == nil {
		sc.Enqueued(st, call, t.name)
	}
	return err
}

// devCheck says why t's collectives cannot run on this PE's GPU, or nil.
func (t *Team) devCheck(call string) error {
	w := t.w
	for _, pe := range t.members {
		if pe != w.pe && w.gpu.PeerBase[pe] == 0 {
			return w.errorf(call, ErrBadArgument, "%s spans PE %d, which this GPU reaches through the NIC: stream-ordered collectives run on the device and need every member load/store reachable (one node); use the blocking call", t.name, pe)
		}
	}
	dt := w.dteams
	if dt == nil || dt.Desc(t.slot).Size == 0 {
		return w.errorf(call, ErrBadArgument, "%s has no device team (its members are not evenly spaced)", t.name)
	}
	if _, size := dt.Workspace(t.slot); size == 0 {
		big, small := gpurt.WorkspaceSizes(w.heapSize)
		return w.errorf(call, ErrOutOfMemory, "the %d-byte symmetric heap leaves no room for device team workspaces (they may take a quarter of it: 2x%d + %dx%d bytes)", w.heapSize, big, kernels.MaxTeams-2, small)
	}
	return nil
}

const (
	streamBlock    = 256 // threads of a stream-ordered collective's block
	moverBlockCUDA = 512 // a data mover's block past the one-shot sizes on NVIDIA (coll.hip's MOVER_BLOCK)
	barrierThread  = 32  // the stream barrier's block: one warp (its round is one thread's flags)
)

// launchColl launches a collective kernel of bytes per PE on as many blocks as streamBlocks says;
// a data mover's grid has 512 threads a block on NVIDIA (its kernels are built for that; the
// reductions' unrolled folds need the registers of 256).
func (t *Team) launchColl(sc *gpurt.Colls, call, kernel string, st device.Stream, bytes int, mover bool, args ...any) error {
	blocks, threads := t.w.streamBlocks(bytes, mover), streamBlock
	if blocks > 1 && mover && t.w.dev.Info().Driver == "cuda" {
		threads = moverBlockCUDA
	}
	return t.launchCollN(sc, call, kernel, st, blocks, threads, args...)
}

func (t *Team) launchCollN(sc *gpurt.Colls, call, kernel string, st device.Stream, blocks, threads int, args ...any) error {
	f, err := sc.Function(t.w.gpu, kernel)
	if err != nil {
		return t.w.rtError(call, ErrPEFailed, err)
	}
	if err := st.Launch(f, device.D1(blocks), device.D1(threads), 0, args...); err != nil {
		return &Error{Call: call, PE: t.w.pe, Kind: ErrPEFailed, Detail: "enqueueing " + kernel, Err: err}
	}
	return nil
}

// StreamAlgorithm says how a stream-ordered collective of bytes per PE runs on this PE: "ce"
// (the copy-engine offload: one block posts the copies, no SM moves data), "block" (one block of
// the GPU moves or reduces the data through the team's scratch), "grid" (past the one-shot sizes:
// StreamBlocks blocks read the members' buffers in place), or "host" (the host backend: the
// blocking algorithm, Algorithm's). coll is CollAllToAll, CollBroadcast, CollFCollect,
// CollAllReduce or CollReduceScatter.
func (t *Team) StreamAlgorithm(coll Collective, bytes int) string {
	if t == nil || t.w == nil {
		return ""
	}
	if t.w.gpu == nil {
		return "host"
	}
	switch coll {
	case CollAllToAll, CollBroadcast, CollFCollect:
		if t.useCE(bytes) {
			return "ce"
		}
	}
	if t.w.streamBlocks(bytes, coll == CollAllToAll || coll == CollBroadcast || coll == CollFCollect) > 1 {
		return "grid"
	}
	return "block"
}

// StreamBlocks is how many SMs (blocks) a stream-ordered collective of bytes per PE occupies while
// it runs: 0 on the host backend, 1 for the copy-engine offload (while it posts and waits) and the
// one-block algorithm, more for "grid".
func (t *Team) StreamBlocks(coll Collective, bytes int) int {
	switch t.StreamAlgorithm(coll, bytes) {
	case "", "host":
		return 0
	case "grid":
		return t.w.streamBlocks(bytes, coll == CollAllToAll || coll == CollBroadcast || coll == CollFCollect)
	}
	return 1
}

// streamBlocks: one block up to the one-shot size, where a call is its rounds' latency; above it a
// block per 64 KiB (a data mover's per 32 KiB) up to ROX_STREAM_BLOCKS. The device decides its
// path from the size alone (every member alike), so the count changes only the speed. The blocks
// of a launch meet in a spin barrier, so they must all be resident at once: at most half the SMs
// this PE's context may use (under MPS, its share), which leaves room for the runtime's other
// kernels and the other PEs'. Measured on an H200 under MPS with 66 SMs a PE: 32 blocks ran, 64
// hung in the barrier; a mover's 32 KiB blocks of 512 threads beat 64 KiB ones of 256 by 12-30%
// at 16 MiB.
func (w *World) streamBlocks(bytes int, mover bool) int {
	if bytes <= kernels.CollOneshotMax {
		return 1
	}
	most := w.scolls().Knobs().MostBlocks
	if most < 1 {
		most = 32
	}
	if mp := w.dev.Info().Multiprocessors; mp >= 2 {
		most = min(most, mp/2)
	}
	per := 64 << 10
	if mover {
		per = 32 << 10
	}
	return max(1, min(most, (bytes+per-1)/per))
}

func (t *Team) useCE(bytes int) bool {
	k := t.w.scolls().Knobs()
	return k.CEAlways || (k.CEThreshold > 0 && int64(bytes) >= k.CEThreshold)
}

// reduceKernels: each element kind's reduction kernel, named once (a name built per call is an
// allocation on the hot path); absent for the complex types, which have none.
var reduceKernels = func() map[coll.Kind]string {
	m := map[coll.Kind]string{}
	for _, k := range []coll.Kind{coll.Int8, coll.Int16, coll.Int32, coll.Int64, coll.Uint8, coll.Uint16, coll.Uint32, coll.Uint64,
		coll.Float32, coll.Float64, coll.BFloat16, coll.Float16} {
		m[k] = "roxk_coll_reduce_" + deviceKind(k)
	}
	return m
}()

// deviceKind names T's reduction kernel, "" when there is none (complex types).
func deviceKind(k coll.Kind) string {
	switch k {
	case coll.Float32:
		return "float"
	case coll.Float64:
		return "double"
	case coll.BFloat16:
		return "bfloat16"
	case coll.Float16:
		return "half"
	case coll.Complex64, coll.Complex128:
		return ""
	}
	return k.String()
}

// ---- the calls ----

// BarrierOnStream enqueues Barrier on st (nvshmemx_barrier_on_stream): when st reaches it, this
// PE's operations issued before are complete, then the stream waits until every member's stream
// has reached it. Every member enqueues it. On a GPU it is one kernel of one warp running the
// device team barrier (coll.h, roxshmemx_barrier_block): the members' flags meet on the device,
// the host takes no part.
func (t *Team) BarrierOnStream(st device.Stream) error {
	const call = "BarrierOnStream"
	if err := t.check(call); err != nil {
		return err
	}
	if t.w.gpu != nil {
		sc, err := t.devStream(call, st)
		if err == nil {
			err = t.devEnqueued(sc, st, call, t.barrierOnDevice(sc, call, st))
		}
		return err
	}
	c := &streamCall{call: call, t: t, st: st, run: func(ctx context.Context) error { return t.Barrier(ctx) }}
	return c.enqueue()
}

func (t *Team) barrierOnDevice(sc *gpurt.Colls, call string, st device.Stream) error {
	if err := t.devCheck(call); err != nil {
		return err
	}
	return t.launchCollN(sc, call, "roxk_coll_barrier", st, 1, barrierThread, t.Handle())
}

// AllReduceOnStream enqueues AllReduce(team, dst, src, op) on st (ncclAllReduce): dst and src have
// the same length and may be the same array.
func AllReduceOnStream[T Elem](st device.Stream, t *Team, dst, src Sym[T], op Op) error {
	const call = "AllReduceOnStream"
	if err := allReduceArgs(t, call, dst, src, op); err != nil {
		return err
	}
	if t.w.gpu != nil {
		sc, err := t.devStream(call, st)
		if err == nil {
			err = t.devEnqueued(sc, st, call, reduceOnDevice(sc, call, t, st, dst, src, op, 0))
		}
		return err
	}
	c := &streamCall{call: call, t: t, st: st, run: func(ctx context.Context) error { return AllReduce(ctx, t, dst, src, op) }}
	return c.enqueue()
}

// ReduceScatterOnStream enqueues ReduceScatter(team, dst, src, op) on st (ncclReduceScatter):
// src has NPEs blocks of len(dst) elements; dst may be this PE's own block of src.
func ReduceScatterOnStream[T Elem](st device.Stream, t *Team, dst, src Sym[T], op Op) error {
	const call = "ReduceScatterOnStream"
	if err := reduceScatterArgs(t, call, dst, src, op); err != nil {
		return err
	}
	if t.w.gpu != nil {
		sc, err := t.devStream(call, st)
		if err == nil {
			err = t.devEnqueued(sc, st, call, reduceOnDevice(sc, call, t, st, dst, src, op, 1))
		}
		return err
	}
	c := &streamCall{call: call, t: t, st: st, run: func(ctx context.Context) error { return ReduceScatter(ctx, t, dst, src, op) }}
	return c.enqueue()
}

func reduceOnDevice[T Elem](sc *gpurt.Colls, call string, t *Team, st device.Stream, dst, src Sym[T], op Op, scatter int32) error {
	if err := t.devCheck(call); err != nil {
		return err
	}
	kernel, ok := reduceKernels[elemKindOf[T]()]
	if !ok {
		var z T
		return t.w.errorf(call, ErrBadArgument, "element type %T: the device reductions take integer and real float types (use the blocking call for complex ones)", z)
	}
	return t.launchColl(sc, call, kernel, st, dst.n*dst.elemSize(), false, t.Handle(), dst.Device(), src.Device(), uint64(dst.n), int32(op-OpSum), scatter)
}

// AllGatherOnStream enqueues FCollect(team, dst, src) on st (ncclAllGather): dst has NPEs times
// src's elements; src may be this PE's own block of dst.
func AllGatherOnStream[T Elem](st device.Stream, t *Team, dst, src Sym[T]) error {
	const call = "AllGatherOnStream"
	if err := fcollectArgs(t, call, dst, src); err != nil {
		return err
	}
	size := src.n * src.elemSize()
	if t.w.gpu != nil {
		sc, err := t.devStream(call, st)
		if err == nil {
			err = t.devEnqueued(sc, st, call, moveOnDevice(sc, call, t, st, CollFCollect, "roxk_coll_fcollect", dst.Device(), src.Device(), size, 0, -1))
		}
		return err
	}
	c := &streamCall{call: call, t: t, st: st, run: func(ctx context.Context) error { return FCollect(ctx, t, dst, src) }}
	return c.enqueue()
}

// AllToAllOnStream enqueues AllToAll(team, dst, src) on st (ncclAllToAll): block j of src goes
// to team PE j; dst and src have the same length, a multiple of NPEs, and do not overlap.
func AllToAllOnStream[T Elem](st device.Stream, t *Team, dst, src Sym[T]) error {
	const call = "AllToAllOnStream"
	if err := allToAllArgs(t, call, dst, src); err != nil {
		return err
	}
	block := src.n / len(t.members) * src.elemSize()
	if t.w.gpu != nil {
		sc, err := t.devStream(call, st)
		if err == nil {
			err = t.devEnqueued(sc, st, call, moveOnDevice(sc, call, t, st, CollAllToAll, "roxk_coll_alltoall", dst.Device(), src.Device(), block, 2, -1))
		}
		return err
	}
	c := &streamCall{call: call, t: t, st: st, run: func(ctx context.Context) error { return AllToAll(ctx, t, dst, src) }}
	return c.enqueue()
}

// BroadcastOnStream enqueues Broadcast(team, dst, src, root) on st (ncclBroadcast): root's src
// lands in dst on every member, root included; dst and src have the same length and may be the
// same array.
func BroadcastOnStream[T Elem](st device.Stream, t *Team, dst, src Sym[T], root int) error {
	const call = "BroadcastOnStream"
	if err := broadcastArgs(t, call, dst, src, root); err != nil {
		return err
	}
	size := src.n * src.elemSize()
	if t.w.gpu != nil {
		sc, err := t.devStream(call, st)
		if err == nil {
			err = t.devEnqueued(sc, st, call, moveOnDevice(sc, call, t, st, CollBroadcast, "roxk_coll_broadcast", dst.Device(), src.Device(), size, 1, int32(root)))
		}
		return err
	}
	c := &streamCall{call: call, t: t, st: st, run: func(ctx context.Context) error { return Broadcast(ctx, t, dst, src, root) }}
	return c.enqueue()
}

// moveOnDevice enqueues a data mover: kernel (bytes per member; root for broadcast) or, at the
// copy-engine sizes, roxk_coll_ce with ceKind (0 all-gather, 1 broadcast, 2 all-to-all).
func moveOnDevice(sc *gpurt.Colls, call string, t *Team, st device.Stream, coll Collective, kernel string, dst, src device.Ptr, bytes int, ceKind, root int32) error {
	if err := t.devCheck(call); err != nil {
		return err
	}
	per := bytes
	if coll == CollAllToAll {
		per = bytes * len(t.members)
	}
	if t.StreamAlgorithm(coll, per) == "ce" {
		return t.launchCollN(sc, call, "roxk_coll_ce", st, 1, streamBlock, t.Handle(), dst, src, uint64(bytes), ceKind, max(root, 0))
	}
	if coll == CollBroadcast {
		return t.launchColl(sc, call, kernel, st, per, true, t.Handle(), dst, src, uint64(bytes), root)
	}
	return t.launchColl(sc, call, kernel, st, per, true, t.Handle(), dst, src, uint64(bytes))
}

// syncHostStream is SyncStream on the host backend.
func (w *World) syncHostStream(ctx context.Context, st device.Stream) error {
	const call = "SyncStream"
	if err := w.check(call); err != nil {
		return err
	}
	if ctx == nil {
		ctx = context.Background()
	}
	done := make(chan error, 1)
	go func() { done <- st.Synchronize() }()
	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
		return &Error{Call: call, PE: w.pe, Kind: kindOf(ctx.Err(), ErrTimeout), Detail: "the stream's work did not finish", Err: ctx.Err()}
	}
	note := w.scolls().TakePending(st)
	if err == nil {
		return nil
	}
	return &Error{Call: call, PE: w.pe, Kind: innerKind(err), Detail: "the stream's work failed (" + note + ")", Err: err}
}

// innerKind is the kind of the innermost *Error in err's chain: what first went wrong.
func innerKind(err error) error {
	kind := kindOf(err, ErrPEFailed)
	for e := err; e != nil; {
		var x *Error
		if !errors.As(e, &x) {
			break
		}
		if x.Kind != nil {
			kind = x.Kind
		}
		e = x.Err
	}
	return kind
}
