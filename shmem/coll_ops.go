package shmem

import (
	"context"
	"unsafe"
)

// algorithm is how a collective moves its data (ROX_COLL_ALGO).
//
//   - oneshot: every PE handles the whole message itself. The data travels in the header exchange
//     (an eager push into the receivers' scratch: one message latency) when it fits a PE's region,
//     else every PE reads what it needs straight from the others' buffers. Reductions: every PE
//     reduces every element.
//   - twoshot: reductions are a reduce-scatter (team PE c reduces the c-th chunk of the elements,
//     reading every PE's input) then an all-gather of the reduced chunks, all over direct reads;
//     the other collectives read straight from the other PEs' buffers, nothing through scratch.
//   - ring: a pipelined chain in team PE order, for teams that span the NIC: each PE receives a
//     chunk from its predecessor, folds its own input into it and passes it on (see coll_ring.go).
//   - hier: reductions across nodes: inside each node a two-shot over load/store, across nodes a
//     chain of the nodes' partial results in node order, one PE per chunk on its own rail, then a
//     broadcast inside each node (see coll_ring.go). It needs every node's PEs to be consecutive
//     in the team; otherwise it is ring.
//
// Every algorithm reduces each element in team PE order (see reducer), so they give the same bits.
type algorithm uint8

const (
	algoAuto algorithm = iota
	algoOneShot
	algoTwoShot
	algoRing
	algoHier
)

func (a algorithm) String() string {
	return [...]string{"auto", "oneshot", "twoshot", "ring", "hier"}[a]
}

func parseAlgo(s string) algorithm {
	for a := algoOneShot; a <= algoHier; a++ {
		if a.String() == s {
			return a
		}
	}
	return algoAuto
}

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

// oneShotMax is the largest per-PE message auto sends eagerly through scratch.
const oneShotMax = 64 << 10

// Algorithm returns the algorithm a call of coll on t moving bytes bytes per PE (the source
// buffer's size) uses under the current ROX_COLL_ALGO, as it appears in benchmark rows.
func (t *Team) Algorithm(coll Collective, bytes int) string {
	if t == nil {
		return ""
	}
	switch coll {
	case CollBarrier:
		return "signals"
	case CollAllReduce:
		return t.pickReduce(bytes, bytes).String()
	case CollReduceScatter:
		return t.pickMove(bytes / max(len(t.members), 1)).String()
	case CollAllToAll, CollAllToAlls:
		return t.pickMove(bytes / max(len(t.members), 1)).String()
	}
	return t.pickMove(bytes).String()
}

// spansNIC reports whether some member reaches another through the NIC path; every member sees the
// same answer (the same node names and ROX_TRANSPORT).
func (t *Team) spansNIC() bool {
	if len(t.members) < 2 {
		return false
	}
	if t.w.transport == nil {
		return false
	}
	for _, pe := range t.members {
		if pe != t.w.pe && t.w.peers[pe] == nil {
			return true
		}
	}
	// This PE maps every member: they are all on its node, and (ROX_TRANSPORT being the same
	// everywhere) map each other.
	return false
}

// hierOK: more than one node, more than one PE on some node, every node's PEs consecutive.
func (t *Team) hierOK() bool {
	seen := map[int]bool{}
	prev := -1
	multi := false
	for _, nd := range t.nodes {
		if nd != prev {
			if seen[nd] {
				return false
			}
			seen[nd] = true
			prev = nd
		} else {
			multi = true
		}
	}
	return len(seen) > 1 && multi && !t.w.forcedNIC()
}

func (w *World) forcedNIC() bool {
	// ROX_TRANSPORT=tcp|ucx sends PEs of one node through the NIC: nodes are not load/store domains.
	return w.transport != nil && w.peers[w.pe] != nil && func() bool {
		for pe, n := range w.teams.nodes {
			if pe != w.pe && n == w.teams.nodes[w.pe] && w.peers[pe] == nil {
				return true
			}
		}
		return false
	}()
}

func (t *Team) knob() algorithm { return parseAlgo(t.w.teams.algo) }

// pickReduce chooses an all-reduce algorithm for bytes per PE whose eager payload is payload bytes.
func (t *Team) pickReduce(bytes, payload int) algorithm {
	if a := t.knob(); a != algoAuto {
		if a == algoHier && !t.hierOK() {
			return algoRing
		}
		return a
	}
	switch {
	case len(t.members) == 1:
		return algoOneShot
	case payload <= t.payloadCap() && bytes <= oneShotMax:
		return algoOneShot
	case !t.spansNIC():
		return algoTwoShot
	case t.hierOK():
		return algoHier
	}
	return algoRing
}

// pickMove chooses for the data-movement collectives, with block bytes per destination PE.
func (t *Team) pickMove(block int) algorithm {
	if a := t.knob(); a == algoOneShot || a == algoTwoShot {
		return a
	}
	if len(t.members) == 1 || (block <= t.payloadCap() && block <= oneShotMax) {
		return algoOneShot
	}
	return algoTwoShot
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
	for _, s := range []struct {
		name string
		s    Sym[T]
	}{{"destination", dst}, {"source", src}} {
		if s.s.w == nil {
			return t.w.errorf(call, ErrNotInitialized, "%s is a zero symmetric object (not allocated)", s.name)
		}
		if s.s.w != t.w {
			return t.w.errorf(call, ErrNotSymmetric, "%s at heap offset %d belongs to another World", s.name, s.s.off)
		}
	}
	if k := elemKindOf[T](); k == 0 {
		var z T
		return t.w.errorf(call, ErrBadArgument, "element type %T", z)
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
	if why := checkOp(elemKindOf[T](), op); why != "" {
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

// ---- data access ----

// src and dst are team PE j's source and destination offsets (from its header: a PE's buffers
// need not be at the same offset as this PE's, as for in-place calls).
func (op *collOp) src(j int) uint64 { return op.peers[j].word }
func (op *collOp) dst(j int) uint64 { return op.peers[j].word2 }

// read returns n bytes at off in team PE j's heap: a view where the heap is mapped here, else a
// copy (through the NIC path) into buf, or into a new slice where buf holds fewer than n bytes.
func (op *collOp) read(j int, off uint64, n int, buf []byte) ([]byte, error) {
	t := op.t
	pe := t.members[j]
	if n == 0 {
		return nil, nil
	}
	if m := t.w.peers[pe]; m != nil {
		return m[off : off+uint64(n)], nil
	}
	if len(buf) < n {
		buf = make([]byte, n)
	}
	if err := t.w.paths[pe].get(off, buf[:n]); err != nil {
		return nil, t.w.pathError(op.call, pe, err)
	}
	return buf[:n], nil
}

// local returns this PE's bytes at off for writing, or nil where the heap is device memory.
func (op *collOp) local(off uint64, n int) []byte {
	if l := op.t.w.local; l != nil {
		return l[off : off+uint64(n)]
	}
	return nil
}

// write stores data at off of this PE's heap.
func (op *collOp) write(off uint64, data []byte) error {
	if len(data) == 0 {
		return nil
	}
	w := op.t.w
	if l := w.local; l != nil {
		if &l[off] != &data[0] {
			cachedCopy(l[off:off+uint64(len(data))], data)
		}
		return nil
	}
	if err := w.paths[w.pe].put(off, data); err != nil {
		return w.pathError(op.call, w.pe, err)
	}
	return nil
}

// self returns this PE's bytes at off (a view, or a copy from device memory).
func (op *collOp) self(off uint64, n int) ([]byte, error) {
	return op.read(op.t.me, off, n, nil)
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// doneAll tells every PE whose buffers this PE read that it has finished, and waits for every PE
// that read this PE's buffers: readers is whether PE j read from this PE.
func (op *collOp) doneAll(readFrom, readBy func(j int) bool) error {
	t := op.t
	n := len(t.members)
	for k := 1; k < n; k++ {
		j := (t.me + k) % n
		if readFrom(j) {
			if err := op.signal(sigDone, j); err != nil {
				return err
			}
		}
	}
	for k := 1; k < n; k++ {
		j := (t.me + n - k) % n
		if readBy(j) {
			if err := op.wait(sigDone, j, "finish reading this PE's buffers"); err != nil {
				return err
			}
		}
	}
	return nil
}

func none(int) bool { return false }

// ---- Broadcast ----

// Broadcast copies root's src into dst on every PE of the team, root included
// (shmem_broadcastmem; root is a team PE number). dst and src have the same length on every PE
// and may be the same array; other overlaps are an error.
func Broadcast[T Elem](ctx context.Context, t *Team, dst, src Sym[T], root int) error {
	const call = "Broadcast"
	if err := broadcastArgs(t, call, dst, src, root); err != nil {
		return t.refuse(ctx, call, callBroadcast, err)
	}
	d0, _ := symRange(dst)
	s0, s1 := symRange(src)
	size := int(s1 - s0)
	release, err := t.gate(call)
	if err != nil {
		return err
	}
	defer release()
	t.w.syncPoint() // the entry orders the PE's completed plain accesses (MODEL.md §3b)
	algo := t.pickMove(size)
	h := header{call: callBroadcast, kind: elemKindOf[T](), count: int64(src.n), root: int64(root), algo: algo, word: s0, word2: d0}
	eager := algo == algoOneShot && size <= t.payloadCap()
	op, err := t.startEager(ctx, call, h, eager && t.me == root, s0, size, 0)
	if err != nil {
		return err
	}
	if t.me == root {
		if d0 != s0 {
			b, err := op.self(s0, size)
			if err != nil {
				return err
			}
			if err := op.write(d0, b); err != nil {
				return err
			}
		}
		if eager {
			return nil
		}
		return op.doneAll(none, func(j int) bool { return j != root })
	}
	var b []byte
	if eager {
		b, err = op.payload(root, size)
	} else {
		b, err = op.read(root, op.src(root), size, nil)
	}
	if err != nil {
		return err
	}
	if err := op.write(d0, b); err != nil {
		return err
	}
	if eager {
		return nil
	}
	return op.doneAll(func(j int) bool { return j == root }, none)
}

// ---- FCollect, Collect ----

// FCollect concatenates every team PE's src, in team PE order, into dst on every PE
// (shmem_fcollectmem: all-gather). dst has NPEs times src's elements. src may be this PE's own
// block of dst (dst[MyPE*len(src):], in place); any other overlap is an error.
func FCollect[T Elem](ctx context.Context, t *Team, dst, src Sym[T]) error {
	const call = "FCollect"
	if err := fcollectArgs(t, call, dst, src); err != nil {
		return t.refuse(ctx, call, callFCollect, err)
	}
	size := src.n * src.elemSize()
	d0, _ := symRange(dst)
	s0, _ := symRange(src)
	release, err := t.gate(call)
	if err != nil {
		return err
	}
	defer release()
	algo := t.pickMove(size)
	eager := algo == algoOneShot && size <= t.payloadCap()
	counts := func(int) int { return size }
	return gather(ctx, t, call, header{call: callFCollect, kind: elemKindOf[T](), count: int64(src.n), algo: algo, word: s0, word2: d0}, eager, d0, s0, counts, nil)
}

// Collect concatenates every team PE's src, in team PE order, into dst on every PE; the sources
// may differ in length (shmem_collectmem). dst must hold the total on every PE (checked on every
// PE against every PE's destination). src may be this PE's own block of dst; any other overlap
// is an error.
func Collect[T Elem](ctx context.Context, t *Team, dst, src Sym[T]) error {
	const call = "Collect"
	if err := collArgs(t, call, dst, src); err != nil {
		return t.refuse(ctx, call, callCollect, err)
	}
	es := dst.elemSize()
	size := src.n * es
	d0, _ := symRange(dst)
	s0, _ := symRange(src)
	release, err := t.gate(call)
	if err != nil {
		return err
	}
	defer release()
	algo := t.pickMove(size)
	eager := algo == algoOneShot && size <= t.payloadCap()
	h := header{call: callCollect, kind: elemKindOf[T](), count: int64(src.n), extra: int64(dst.n), extra2: int64(btoi(eager)), word: s0, word2: d0}
	if t.knob() != algoAuto {
		h.algo = t.knob() // an explicit choice must agree; auto may differ per source
	}
	op, err := t.startEager(ctx, call, h, eager, s0, size, 0)
	if err != nil {
		return err
	}
	total, at := 0, 0
	for j := range t.members {
		if j == t.me {
			at = total
		}
		total += int(op.peers[j].count)
	}
	for j := range t.members {
		if int(op.peers[j].extra) < total {
			return t.w.errorf(call, ErrBadArgument, "on %s: PE %d's destination has %d elements, the %d PEs send %d in all", t.name, t.members[j], op.peers[j].extra, len(t.members), total)
		}
	}
	// Every PE has the counts now; one whose buffers overlap still finishes the protocol.
	err = disjointUnless(t, call, dst, src, s0 == d0+uint64(at*es), "the source may only be this PE's own block of the destination")
	counts := func(j int) int { return int(op.peers[j].count) * es }
	if gerr := gatherData(op, d0, s0, counts, func(j int) bool { return op.peers[j].extra2 == 1 }, err != nil); gerr != nil {
		return gerr
	}
	return err
}

// startEager is start for a call whose data travels in the header exchange where eager: this
// PE's n bytes at s0 are its payload (per as for start).
func (t *Team) startEager(ctx context.Context, call string, h header, eager bool, s0 uint64, n, per int) (*collOp, error) {
	var payload []byte
	if eager {
		var err error
		if payload, err = (&collOp{t: t, call: call}).self(s0, n); err != nil {
			return nil, err
		}
	}
	return t.start(ctx, call, h, payload, per)
}

// gather runs FCollect: the header exchange, then the data.
func gather(ctx context.Context, t *Team, call string, h header, eager bool, d0, s0 uint64, counts func(int) int, _ func(int) bool) error {
	op, err := t.startEager(ctx, call, h, eager, s0, counts(t.me), 0)
	if err != nil {
		return err
	}
	return gatherData(op, d0, s0, counts, func(int) bool { return eager }, false)
}

// gatherData places every PE's block at its place in dst: from scratch where PE j sent it eagerly,
// else read from PE j's source. skipWrites keeps the destination untouched (an argument error).
func gatherData(op *collOp, d0, s0 uint64, counts func(int) int, eager func(int) bool, skipWrites bool) error {
	t := op.t
	n := len(t.members)
	var atBuf [17]uint64
	at := atBuf[:1]
	for j := 0; j < n; j++ {
		at = append(at, 0)
		at[j+1] = at[j] + uint64(counts(j))
	}
	var buf []byte
	for k := 0; k < n; k++ {
		j := (t.me + k) % n
		size := counts(j)
		if size == 0 || skipWrites {
			continue
		}
		dst := d0 + at[j]
		var b []byte
		var err error
		switch {
		case j == t.me:
			if dst == s0 {
				continue
			}
			b, err = op.self(s0, size)
		case eager(j):
			b, err = op.payload(j, size)
		default:
			b, err = op.read(j, op.src(j), size, buf)
			if t.w.peers[t.members[j]] == nil {
				buf = b
			}
		}
		if err != nil {
			return err
		}
		if err := op.write(dst, b); err != nil {
			return err
		}
	}
	return op.doneAll(func(j int) bool { return j != t.me && !eager(j) }, func(j int) bool { return j != t.me && !eager(t.me) })
}

// ---- AllToAll, AllToAlls ----

// AllToAll sends block j of src (len(src)/NPEs elements) to team PE j, where it lands as block i
// of dst, i being the sender (shmem_alltoallmem). dst and src have the same length, a multiple of
// NPEs, and must not overlap.
func AllToAll[T Elem](ctx context.Context, t *Team, dst, src Sym[T]) error {
	const call = "AllToAll"
	if err := allToAllArgs(t, call, dst, src); err != nil {
		return t.refuse(ctx, call, callAllToAll, err)
	}
	return allToAll(ctx, t, call, dst, src, 1, 1, src.n/len(t.members))
}

// AllToAlls is AllToAll with strides (shmem_alltoalls): team PE i's element k of block j,
// src[(j*nelems+k)*sst], lands in team PE j's dst[(i*nelems+k)*dst]. Strides are in elements and
// at least 1; dst and src must not overlap.
func AllToAlls[T Elem](ctx context.Context, t *Team, dst, src Sym[T], dstStride, srcStride, nelems int) error {
	const call = "AllToAlls"
	if err := allToAllsArgs(t, call, dst, src, dstStride, srcStride, nelems); err != nil {
		return t.refuse(ctx, call, callAllToAlls, err)
	}
	return allToAll(ctx, t, call, dst, src, dstStride, srcStride, nelems)
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

// allToAll runs AllToAll and AllToAlls, their arguments checked.
func allToAll[T Elem](ctx context.Context, t *Team, call string, dst, src Sym[T], dstStride, srcStride, nelems int) error {
	n := len(t.members)
	es := dst.elemSize()
	d0, _ := symRange(dst)
	s0, _ := symRange(src)
	block := nelems * es
	strided := dstStride != 1 || srcStride != 1
	release, err := t.gate(call)
	if err != nil {
		return err
	}
	defer release()
	algo := t.pickMove(block)
	eager := algo == algoOneShot && block <= t.payloadCap()
	id := callAllToAll
	if call == "AllToAlls" {
		id = callAllToAlls // even at strides 1: its header carries the strides, which must agree
	}
	h := header{call: id, kind: elemKindOf[T](), count: int64(nelems), algo: algo, root: int64(dstStride), extra: int64(srcStride), word: s0, word2: d0}
	if id == callAllToAll {
		h.count = int64(src.n)
	}
	sel := &collOp{t: t, call: call}
	// block j of this PE's source, packed
	srcBlock := func(op *collOp, j int) ([]byte, error) {
		if block == 0 {
			return nil, nil
		}
		if !strided {
			return op.self(s0+uint64(j*block), block)
		}
		span := ((nelems-1)*srcStride + 1) * es
		b, err := op.self(s0+uint64(j*nelems*srcStride*es), span)
		if err != nil {
			return nil, err
		}
		return pack(b, es, srcStride, nelems), nil
	}
	var payload []byte
	if eager && !strided {
		// the blocks lie one after the other in the source
		if payload, err = sel.self(s0, n*block); err != nil {
			return err
		}
	} else if eager {
		payload = t.scratch[:0]
		for j := 0; j < n; j++ {
			b, err := srcBlock(sel, j)
			if err != nil {
				return err
			}
			payload = append(payload, b...)
		}
		t.scratch = payload
	}
	op, err := t.start(ctx, call, h, payload, block)
	if err != nil {
		return err
	}
	var buf []byte
	for k := 0; k < n && block > 0; k++ {
		j := (t.me + k) % n
		var b []byte
		switch {
		case j == t.me:
			b, err = srcBlock(op, j)
		case eager:
			b, err = op.payload(j, block)
		case !strided:
			b, err = op.read(j, op.src(j)+uint64(t.me*block), block, buf)
			if t.w.peers[t.members[j]] == nil {
				buf = b
			}
		default:
			span := ((nelems-1)*srcStride + 1) * es
			if len(buf) < span {
				buf = make([]byte, span)
			}
			b, err = op.read(j, op.src(j)+uint64(t.me*nelems*srcStride*es), span, buf)
			if err == nil {
				b = pack(b, es, srcStride, nelems)
			}
		}
		if err != nil {
			return err
		}
		if !strided {
			err = op.write(d0+uint64(j*block), b)
		} else {
			err = op.writeStrided(d0+uint64(j*nelems*dstStride*es), b, es, dstStride)
		}
		if err != nil {
			return err
		}
	}
	if eager {
		return nil
	}
	return op.doneAll(func(j int) bool { return j != t.me }, func(j int) bool { return j != t.me })
}

// pack gathers n elements of es bytes, every stride elements, from b.
func pack(b []byte, es, stride, n int) []byte {
	out := make([]byte, n*es)
	for k := 0; k < n; k++ {
		copy(out[k*es:(k+1)*es], b[k*stride*es:])
	}
	return out
}

func (op *collOp) writeStrided(off uint64, packed []byte, es, stride int) error {
	n := len(packed) / es
	if n == 0 {
		return nil
	}
	if l := op.local(off, ((n-1)*stride+1)*es); l != nil {
		for k := 0; k < n; k++ {
			copy(l[k*stride*es:], packed[k*es:(k+1)*es])
		}
		return nil
	}
	for k := 0; k < n; k++ {
		if err := op.write(off+uint64(k*stride*es), packed[k*es:(k+1)*es]); err != nil {
			return err
		}
	}
	return nil
}

// ---- AllReduce, ReduceScatter ----

// AllReduce reduces src elementwise over the team with op and leaves the result in dst on every
// PE (shmem_TYPE_OP_reduce, an all-reduce). dst and src have the same length and may be the same
// array; other overlaps are an error. The result is the same bits on every PE whatever the
// algorithm: see reducer for the order.
func AllReduce[T Elem](ctx context.Context, t *Team, dst, src Sym[T], op Op) error {
	const call = "AllReduce"
	if err := allReduceArgs(t, call, dst, src, op); err != nil {
		return t.refuse(ctx, call, callAllReduce, err)
	}
	kind := elemKindOf[T]()
	d0, _ := symRange(dst)
	s0, s1 := symRange(src)
	size := int(s1 - s0)
	r := newReducer(kind, op, dst.elemSize())
	release, err := t.gate(call)
	if err != nil {
		return err
	}
	defer release()
	t.w.syncPoint() // the entry orders the PE's completed plain accesses (MODEL.md §3b)
	algo := t.pickReduce(size, size)
	h := header{call: callAllReduce, kind: kind, op: op, count: int64(src.n), algo: algo, word: s0, word2: d0}
	switch algo {
	case algoRing, algoHier:
		return t.chainReduce(ctx, call, h, r, d0, s0, src.n, algo == algoHier)
	case algoTwoShot:
		return t.twoShot(ctx, call, h, r, d0, s0, src.n)
	}
	return t.oneShot(ctx, call, h, r, d0, s0, src.n)
}

// reduceBlock is how many elements a fold handles at a time (its accumulator stays in cache).
const reduceBlock = 4096

// foldAll reduces elements [lo, hi) of every team PE's input into dst (bytes for hi-lo elements),
// in team PE order: block by block, acc = x_0, then acc = acc op x_j for j = 1..n-1, then dst =
// acc. The accumulator is the destination block itself where the element is its own accumulator
// and no input shares a byte with that block, else the team's reusable accumulator block.
func foldAll(r reducer, n, lo, hi int, in *foldIn, dst []byte) error {
	t := in.op.t
	if need := min(hi-lo, reduceBlock) * r.as; cap(t.acc) < need {
		t.acc = make([]byte, need)
	}
	var xsBuf [16][]byte
	xs := xsBuf[:0]
	for j := 0; j < n; j++ {
		xs = append(xs, nil)
	}
	for b := lo; b < hi; b += reduceBlock {
		e := min(b+reduceBlock, hi)
		d := dst[(b-lo)*r.es : (e-lo)*r.es]
		direct := r.as == r.es
		for j := 0; j < n; j++ {
			x, err := in.get(j, b, e)
			if err != nil {
				return err
			}
			xs[j] = x
			if direct && sharesByte(d, x) {
				direct = false
			}
		}
		a := t.acc[:(e-b)*r.as]
		if direct {
			a = d
		}
		r.start(a, xs[0])
		for j := 1; j < n; j++ {
			r.fold(a, xs[j], false)
		}
		if !direct {
			r.finalize(d, a)
		}
	}
	return nil
}

// sharesByte says whether a and b overlap in memory.
func sharesByte(a, b []byte) bool {
	if len(a) == 0 || len(b) == 0 {
		return false
	}
	a0, b0 := uintptr(unsafe.Pointer(&a[0])), uintptr(unsafe.Pointer(&b[0]))
	return a0 < b0+uintptr(len(b)) && b0 < a0+uintptr(len(a))
}

// foldIn is where foldAll finds each PE's elements: each PE's source at s0 (views where mapped,
// one copy per remote PE otherwise, fetched whole on first use for the range [lo, hi)), or, for
// an eager call, what the other PEs sent in the header exchange.
type foldIn struct {
	op     *collOp
	s0     uint64
	es     int
	lo, hi int
	eager  bool
	cache  [][]byte
}

func (op *collOp) inputs(s0 uint64, es, lo, hi int, eager bool) foldIn {
	t := op.t
	n := len(t.members)
	if cap(t.ins) < n {
		t.ins = make([][]byte, n)
	}
	cache := t.ins[:n]
	clear(cache)
	return foldIn{op: op, s0: s0, es: es, lo: lo, hi: hi, eager: eager, cache: cache}
}

func (f *foldIn) get(j, b, e int) ([]byte, error) {
	op, es, lo, hi := f.op, f.es, f.lo, f.hi
	if f.cache[j] == nil && hi > lo {
		var err error
		if f.eager && j != op.t.me {
			f.cache[j], err = op.payload(j, (hi-lo)*es)
		} else {
			f.cache[j], err = op.read(j, op.src(j)+uint64(lo*es), (hi-lo)*es, nil)
		}
		if err != nil {
			return nil, err
		}
	}
	return f.cache[j][(b-lo)*es : (e-lo)*es], nil
}

// oneShot: every PE reduces every element; eager when the input fits a scratch region.
func (t *Team) oneShot(ctx context.Context, call string, h header, r reducer, d0, s0 uint64, count int) error {
	size := count * r.es
	eager := size <= t.payloadCap()
	op, err := t.startEager(ctx, call, h, eager, s0, size, 0)
	if err != nil {
		return err
	}
	// Block by block, each block's inputs are read before its result is written, so an eager call
	// (nobody else reads this PE's source) folds straight into the destination, in place or not.
	out := op.local(d0, size)
	if out == nil || !eager {
		out = make([]byte, size)
	}
	in := op.inputs(s0, r.es, 0, count, eager)
	if err := foldAll(r, len(t.members), 0, count, &in, out); err != nil {
		return err
	}
	if !eager {
		// In place, others may still be reading this PE's source.
		if err := op.doneAll(func(j int) bool { return j != t.me }, func(j int) bool { return j != t.me }); err != nil {
			return err
		}
	}
	return op.write(d0, out)
}

// chunk returns team PE c's share [lo, hi) of count elements.
func chunk(count, n, c int) (int, int) {
	return c * count / n, (c + 1) * count / n
}

// twoShot: PE c reduces chunk c reading every PE's source, then every PE reads the reduced chunks
// from their owners' destinations.
func (t *Team) twoShot(ctx context.Context, call string, h header, r reducer, d0, s0 uint64, count int) error {
	op, err := t.begin(ctx, call, h, nil)
	if err != nil {
		return err
	}
	n := len(t.members)
	lo, hi := chunk(count, n, t.me)
	// In place, chunk me of this PE's source is read by this PE alone, block by block before each
	// block's result is written: the fold may go straight into the destination.
	out := op.local(d0+uint64(lo*r.es), (hi-lo)*r.es)
	if out == nil {
		out = make([]byte, (hi-lo)*r.es)
	}
	in := op.inputs(s0, r.es, lo, hi, false)
	if err := foldAll(r, n, lo, hi, &in, out); err != nil {
		return err
	}
	if err := op.write(d0+uint64(lo*r.es), out); err != nil {
		return err
	}
	for k := 1; k < n; k++ {
		if err := op.signal(sigPhase, (t.me+k)%n); err != nil {
			return err
		}
	}
	var buf []byte
	for k := 1; k < n; k++ {
		c := (t.me + k) % n
		// Its owner has reduced chunk c (and so has read this PE's chunk c of the source).
		if err := op.wait(sigPhase, c, "reduce its chunk"); err != nil {
			return err
		}
		clo, chi := chunk(count, n, c)
		size := (chi - clo) * r.es
		b, err := op.read(c, op.dst(c)+uint64(clo*r.es), size, buf)
		if err != nil {
			return err
		}
		if t.w.peers[t.members[c]] == nil {
			buf = b
		}
		if err := op.write(d0+uint64(clo*r.es), b); err != nil {
			return err
		}
	}
	return op.doneAll(func(j int) bool { return j != t.me }, func(j int) bool { return j != t.me })
}

// ReduceScatter reduces src (NPEs blocks of len(dst) elements) over the team with op; team PE i
// gets the reduction of block i in dst (an extension, NCCL's reduce-scatter). dst may be this PE's
// own block of src (in place); any other overlap is an error.
func ReduceScatter[T Elem](ctx context.Context, t *Team, dst, src Sym[T], op Op) error {
	const call = "ReduceScatter"
	if err := reduceScatterArgs(t, call, dst, src, op); err != nil {
		return t.refuse(ctx, call, callReduceScatter, err)
	}
	kind := elemKindOf[T]()
	n := len(t.members)
	es := dst.elemSize()
	block := dst.n * es
	d0, _ := symRange(dst)
	s0, _ := symRange(src)
	r := newReducer(kind, op, es)
	release, err := t.gate(call)
	if err != nil {
		return err
	}
	defer release()
	algo := t.pickMove(block)
	eager := algo == algoOneShot && block <= t.payloadCap()
	h := header{call: callReduceScatter, kind: kind, op: op, count: int64(dst.n), algo: algo, word: s0, word2: d0}
	o, err := t.startEager(ctx, call, h, eager, s0, n*block, block)
	if err != nil {
		return err
	}
	// Nobody else reads block me of this PE's source: the fold goes straight into the destination.
	out := o.local(d0, block)
	if out == nil {
		out = make([]byte, block)
	}
	lo := t.me * dst.n
	in := o.inputs(s0, es, lo, lo+dst.n, eager)
	if err := foldAll(r, n, lo, lo+dst.n, &in, out); err != nil {
		return err
	}
	// Nobody else reads block me of this PE's source: the destination may be written now.
	if err := o.write(d0, out); err != nil {
		return err
	}
	if eager {
		return nil
	}
	return o.doneAll(func(j int) bool { return j != t.me }, func(j int) bool { return j != t.me })
}
