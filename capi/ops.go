package main

import (
	"fmt"
	"unsafe"

	"github.com/roxamen/roxamen/device"
	"github.com/roxamen/roxamen/shmem"
	"github.com/roxamen/roxamen/shmem/ep"
)

// Element types (ROXAMEN_UINT8...; include/roxamen.h).
const (
	dtUint8 = iota
	dtInt8
	dtInt16
	dtUint16
	dtInt32
	dtUint32
	dtInt64
	dtUint64
	dtFloat32
	dtFloat64
	dtBFloat16
	dtFloat16
)

var dtNames = []string{"UINT8", "INT8", "INT16", "UINT16", "INT32", "UINT32", "INT64", "UINT64", "FLOAT32", "FLOAT64", "BFLOAT16", "FLOAT16"}

func badType(call string, dt int, what string) error {
	name := fmt.Sprint(dt)
	if dt >= 0 && dt < len(dtNames) {
		name = "ROXAMEN_" + dtNames[dt]
	}
	return errorf(call, shmem.ErrBadArgument, "element type %s %s", name, what)
}

// ---- RMA ----

func putmem(c *shmem.Ctx, dst uintptr, src unsafe.Pointer, n, pe int, nbi bool) error {
	call := map[bool]string{false: "roxamen_putmem", true: "roxamen_putmem_nbi"}[nbi]
	s, err := symAt[byte](call, dst, n)
	if err != nil {
		return err
	}
	b := local[byte](src, n)
	switch {
	case c != nil && nbi:
		return shmem.CtxPutNBI(c, s, 0, b, pe)
	case c != nil:
		return shmem.CtxPut(c, s, 0, b, pe)
	case nbi:
		return s.PutNBI(0, b, pe)
	}
	return s.Put(0, b, pe)
}

func getmem(c *shmem.Ctx, dst unsafe.Pointer, src uintptr, n, pe int, nbi bool) error {
	call := map[bool]string{false: "roxamen_getmem", true: "roxamen_getmem_nbi"}[nbi]
	s, err := symAt[byte](call, src, n)
	if err != nil {
		return err
	}
	b := local[byte](dst, n)
	switch {
	case c != nil:
		return shmem.CtxGet(c, s, 0, b, pe)
	case nbi:
		return s.GetNBI(0, b, pe)
	}
	return s.Get(0, b, pe)
}

// ---- atomics ----

// AMO operations (ROXAMEN_AMO_*).
const (
	amoFetch = iota
	amoSet
	amoSwap
	amoCompareSwap
	amoFetchAdd
	amoAdd
	amoFetchInc
	amoInc
	amoFetchAnd
	amoAnd
	amoFetchOr
	amoOr
	amoFetchXor
	amoXor
)

var amoNames = []string{"fetch", "set", "swap", "compare_swap", "fetch_add", "add", "fetch_inc", "inc",
	"fetch_and", "and", "fetch_or", "or", "fetch_xor", "xor"}

func atomic(c *shmem.Ctx, op, dt int, dst uintptr, value, cond, fetch unsafe.Pointer, pe int) error {
	call := "roxamen_atomic"
	if c != nil {
		call = "roxamen_ctx_atomic"
	}
	if op < 0 || op >= len(amoNames) {
		return errorf(call, shmem.ErrBadArgument, "atomic operation %d, want a ROXAMEN_AMO_* value", op)
	}
	call += "_" + amoNames[op]
	switch dt {
	case dtInt32:
		return amoInt[int32](c, call, op, dst, value, cond, fetch, pe)
	case dtUint32:
		return amoInt[uint32](c, call, op, dst, value, cond, fetch, pe)
	case dtInt64:
		return amoInt[int64](c, call, op, dst, value, cond, fetch, pe)
	case dtUint64:
		return amoInt[uint64](c, call, op, dst, value, cond, fetch, pe)
	case dtFloat32:
		return amoFloat[float32](c, call, op, dst, value, fetch, pe)
	case dtFloat64:
		return amoFloat[float64](c, call, op, dst, value, fetch, pe)
	}
	return badType(call, dt, "has no atomics (INT32, UINT32, INT64, UINT64; FLOAT32/64 for fetch, set, swap)")
}

// arg reads the operand at p; a missing operand is an error naming it.
func arg[T any](call, name string, p unsafe.Pointer) (T, error) {
	var z T
	if p == nil {
		return z, errorf(call, shmem.ErrBadArgument, "NULL %s", name)
	}
	return *(*T)(p), nil
}

func amoInt[T shmem.AMOBit](c *shmem.Ctx, call string, op int, dst uintptr, value, cond, fetch unsafe.Pointer, pe int) error {
	s, err := symAt[T](call, dst, 1)
	if err != nil {
		return err
	}
	var v, cmp, old T
	switch op {
	case amoSet, amoSwap, amoCompareSwap, amoFetchAdd, amoAdd, amoFetchAnd, amoAnd, amoFetchOr, amoOr, amoFetchXor, amoXor:
		if v, err = arg[T](call, "value", value); err != nil {
			return err
		}
	}
	if op == amoCompareSwap {
		if cmp, err = arg[T](call, "cond", cond); err != nil {
			return err
		}
	}
	fetches := op == amoFetch || op == amoSwap || op == amoCompareSwap || op%2 == 0 && op >= amoFetchAdd
	if fetches && fetch == nil {
		return errorf(call, shmem.ErrBadArgument, "NULL fetch: this operation returns the old value")
	}
	if c != nil {
		switch op {
		case amoFetch:
			old, err = shmem.CtxAtomicFetch(c, s, 0, pe)
		case amoSet:
			err = shmem.CtxAtomicSet(c, s, 0, v, pe)
		case amoSwap:
			old, err = shmem.CtxAtomicSwap(c, s, 0, v, pe)
		case amoCompareSwap:
			old, err = shmem.CtxAtomicCompareSwap(c, s, 0, cmp, v, pe)
		case amoFetchAdd:
			old, err = shmem.CtxAtomicFetchAdd(c, s, 0, v, pe)
		case amoAdd:
			err = shmem.CtxAtomicAdd(c, s, 0, v, pe)
		default:
			return errorf(call, shmem.ErrBadArgument, "contexts carry fetch, set, swap, compare_swap, fetch_add and add")
		}
	} else {
		switch op {
		case amoFetch:
			old, err = shmem.AtomicFetch(s, 0, pe)
		case amoSet:
			err = shmem.AtomicSet(s, 0, v, pe)
		case amoSwap:
			old, err = shmem.AtomicSwap(s, 0, v, pe)
		case amoCompareSwap:
			old, err = shmem.AtomicCompareSwap(s, 0, cmp, v, pe)
		case amoFetchAdd:
			old, err = shmem.AtomicFetchAdd(s, 0, v, pe)
		case amoAdd:
			err = shmem.AtomicAdd(s, 0, v, pe)
		case amoFetchInc:
			old, err = shmem.AtomicFetchInc(s, 0, pe)
		case amoInc:
			err = shmem.AtomicInc(s, 0, pe)
		case amoFetchAnd:
			old, err = shmem.AtomicFetchAnd(s, 0, v, pe)
		case amoAnd:
			err = shmem.AtomicAnd(s, 0, v, pe)
		case amoFetchOr:
			old, err = shmem.AtomicFetchOr(s, 0, v, pe)
		case amoOr:
			err = shmem.AtomicOr(s, 0, v, pe)
		case amoFetchXor:
			old, err = shmem.AtomicFetchXor(s, 0, v, pe)
		case amoXor:
			err = shmem.AtomicXor(s, 0, v, pe)
		}
	}
	if err == nil && fetches {
		*(*T)(fetch) = old
	}
	return err
}

func amoFloat[T float32 | float64](c *shmem.Ctx, call string, op int, dst uintptr, value, fetch unsafe.Pointer, pe int) error {
	s, err := symAt[T](call, dst, 1)
	if err != nil {
		return err
	}
	var v, old T
	if op == amoSet || op == amoSwap {
		if v, err = arg[T](call, "value", value); err != nil {
			return err
		}
	}
	if (op == amoFetch || op == amoSwap) && fetch == nil {
		return errorf(call, shmem.ErrBadArgument, "NULL fetch: this operation returns the old value")
	}
	switch {
	case op == amoFetch && c != nil:
		old, err = shmem.CtxAtomicFetch(c, s, 0, pe)
	case op == amoFetch:
		old, err = shmem.AtomicFetch(s, 0, pe)
	case op == amoSet && c != nil:
		err = shmem.CtxAtomicSet(c, s, 0, v, pe)
	case op == amoSet:
		err = shmem.AtomicSet(s, 0, v, pe)
	case op == amoSwap && c != nil:
		old, err = shmem.CtxAtomicSwap(c, s, 0, v, pe)
	case op == amoSwap:
		old, err = shmem.AtomicSwap(s, 0, v, pe)
	default:
		return errorf(call, shmem.ErrBadArgument, "floating-point atomics are fetch, set and swap")
	}
	if err == nil && (op == amoFetch || op == amoSwap) {
		*(*T)(fetch) = old
	}
	return err
}

// ---- signals ----

func putSignal(dst uintptr, src unsafe.Pointer, n int, sig uintptr, value uint64, op, pe int, nbi bool) error {
	call := map[bool]string{false: "roxamen_putmem_signal", true: "roxamen_putmem_signal_nbi"}[nbi]
	s, err := symAt[byte](call, dst, n)
	if err != nil {
		return err
	}
	g, err := symAt[uint64](call, sig, 1)
	if err != nil {
		return err
	}
	if nbi {
		return shmem.PutSignalNBI(s, 0, local[byte](src, n), g, 0, value, shmem.SignalOp(op), pe)
	}
	return shmem.PutSignal(s, 0, local[byte](src, n), g, 0, value, shmem.SignalOp(op), pe)
}

func signalWait(sig uintptr, cmp int, value uint64) (uint64, error) {
	g, err := symAt[uint64]("roxamen_signal_wait_until", sig, 1)
	if err != nil {
		return 0, err
	}
	return shmem.SignalWaitUntil(bg, g, 0, shmem.Cmp(cmp), value)
}

func signalFetch(sig uintptr) (uint64, error) {
	g, err := symAt[uint64]("roxamen_signal_fetch", sig, 1)
	if err != nil {
		return 0, err
	}
	return shmem.SignalFetch(g, 0)
}

// ---- collectives ----

// Collectives (the kind argument of collective).
const (
	collAllReduce = iota
	collBroadcast
	collFCollect
	collAllToAll
	collReduceScatter
)

var collNames = []string{"allreduce", "broadcast", "fcollect", "alltoall", "reduce_scatter"}

// collective runs kind on team over dst and src (n elements: of each for allreduce and broadcast,
// of src for fcollect, per PE for alltoall, of dst for reduce_scatter); on st when st is not 0.
func collective(kind int, st uintptr, onStream bool, th int32, dt, op int, dst, src uintptr, n, root int) error {
	call := "roxamen_" + collNames[kind]
	if onStream {
		call += "_on_stream"
	}
	switch dt {
	case dtUint8:
		return coll[uint8](call, kind, st, onStream, th, op, dst, src, n, root)
	case dtInt8:
		return coll[int8](call, kind, st, onStream, th, op, dst, src, n, root)
	case dtInt16:
		return coll[int16](call, kind, st, onStream, th, op, dst, src, n, root)
	case dtUint16:
		return coll[uint16](call, kind, st, onStream, th, op, dst, src, n, root)
	case dtInt32:
		return coll[int32](call, kind, st, onStream, th, op, dst, src, n, root)
	case dtUint32:
		return coll[uint32](call, kind, st, onStream, th, op, dst, src, n, root)
	case dtInt64:
		return coll[int64](call, kind, st, onStream, th, op, dst, src, n, root)
	case dtUint64:
		return coll[uint64](call, kind, st, onStream, th, op, dst, src, n, root)
	case dtFloat32:
		return coll[float32](call, kind, st, onStream, th, op, dst, src, n, root)
	case dtFloat64:
		return coll[float64](call, kind, st, onStream, th, op, dst, src, n, root)
	case dtBFloat16:
		return coll[shmem.BFloat16](call, kind, st, onStream, th, op, dst, src, n, root)
	case dtFloat16:
		return coll[shmem.Float16](call, kind, st, onStream, th, op, dst, src, n, root)
	}
	return badType(call, dt, "is not a ROXAMEN_* element type")
}

func coll[T shmem.Elem](call string, kind int, sh uintptr, onStream bool, th int32, op int, dst, src uintptr, n, root int) error {
	t, err := team(call, th)
	if err != nil {
		return err
	}
	var stream device.Stream
	if onStream {
		if stream, err = streamOf(call, sh); err != nil {
			return err
		}
	}
	nd, ns := n, n
	switch kind {
	case collFCollect:
		nd = n * t.NPEs()
	case collAllToAll:
		nd, ns = n*t.NPEs(), n*t.NPEs()
	case collReduceScatter:
		ns = n * t.NPEs()
	}
	d, err := symAt[T](call, dst, nd)
	if err != nil {
		return err
	}
	s, err := symAt[T](call, src, ns)
	if err != nil {
		return err
	}
	o := shmem.Op(op)
	switch {
	case kind == collAllReduce && stream != nil:
		return shmem.AllReduceOnStream(stream, t, d, s, o)
	case kind == collAllReduce:
		return shmem.AllReduce(bg, t, d, s, o)
	case kind == collBroadcast && stream != nil:
		return shmem.BroadcastOnStream(stream, t, d, s, root)
	case kind == collBroadcast:
		return shmem.Broadcast(bg, t, d, s, root)
	case kind == collFCollect && stream != nil:
		return shmem.AllGatherOnStream(stream, t, d, s)
	case kind == collFCollect:
		return shmem.FCollect(bg, t, d, s)
	case kind == collAllToAll && stream != nil:
		return shmem.AllToAllOnStream(stream, t, d, s)
	case kind == collAllToAll:
		return shmem.AllToAll(bg, t, d, s)
	case kind == collReduceScatter && stream != nil:
		return shmem.ReduceScatterOnStream(stream, t, d, s, o)
	}
	return shmem.ReduceScatter(bg, t, d, s, o)
}

// ---- teams ----

func splitStrided(parent int32, start, stride, size int) (int32, error) {
	t, err := team("roxamen_team_split_strided", parent)
	if err != nil {
		return teamInvalid, err
	}
	nt, err := t.SplitStrided(bg, start, stride, size)
	if err != nil {
		return teamInvalid, err
	}
	return addTeam(nt), nil
}

func split2D(parent int32, xrange int) (int32, int32, error) {
	t, err := team("roxamen_team_split_2d", parent)
	if err != nil {
		return teamInvalid, teamInvalid, err
	}
	x, y, err := t.Split2D(bg, xrange)
	if err != nil {
		return teamInvalid, teamInvalid, err
	}
	return addTeam(x), addTeam(y), nil
}

func destroyTeam(h int32) error {
	const call = "roxamen_team_destroy"
	t, err := team(call, h)
	if err != nil {
		return err
	}
	if h == teamWorld || h == teamShared {
		return t.Destroy(bg) // the runtime's own error: predefined teams stay
	}
	if err := t.Destroy(bg); err != nil {
		return err
	}
	the.mu.Lock()
	delete(the.teams, h)
	the.mu.Unlock()
	return nil
}

// ---- contexts and streams ----

func createCtx(options int) (int32, error) {
	w, err := world("roxamen_ctx_create")
	if err != nil {
		return 0, err
	}
	c, err := w.CreateCtx(shmem.CtxOption(options))
	if err != nil {
		return 0, err
	}
	the.mu.Lock()
	defer the.mu.Unlock()
	h := the.add()
	the.ctxs[h] = c
	return h, nil
}

func destroyCtx(h int32) error {
	c, err := ctxOf("roxamen_ctx_destroy", h)
	if err != nil {
		return err
	}
	the.mu.Lock()
	delete(the.ctxs, h)
	the.mu.Unlock()
	return c.Destroy()
}

// createStream makes a stream of the library's and returns its vendor handle (a cudaStream_t the
// program may use as its own on a GPU; a number of the host device's on the host backend).
func createStream() (uintptr, error) {
	w, err := world("roxamen_stream_create")
	if err != nil {
		return 0, err
	}
	st, err := w.NewStream()
	if err != nil {
		return 0, err
	}
	the.mu.Lock()
	defer the.mu.Unlock()
	h := st.Handle()
	if old := the.streams[h]; old != nil {
		// an adopted wrapper of a handle the vendor reused after the program destroyed its stream
		old.st.Destroy()
	}
	the.streams[h] = &streamEnt{st: st, owned: true}
	return h, nil
}

func destroyStream(h uintptr) error {
	const call = "roxamen_stream_destroy"
	if _, err := world(call); err != nil {
		return err
	}
	the.mu.Lock()
	e := the.streams[h]
	if e == nil || !e.owned {
		the.mu.Unlock()
		return errorf(call, shmem.ErrBadArgument, "stream %#x is not a live stream of roxamen_stream_create (the program destroys its own streams)", h)
	}
	delete(the.streams, h)
	the.mu.Unlock()
	return e.st.Destroy()
}

// syncStream waits for stream h's work (the library's or the program's), reporting device failures.
func syncStream(h uintptr) error {
	st, err := streamOf("roxamen_stream_sync", h)
	if err != nil {
		return err
	}
	return the.w.SyncStream(bg, st)
}

// ---- ep ----

func epCreate(cfg ep.Config) (int32, error) {
	w, err := world("roxamen_ep_create")
	if err != nil {
		return 0, err
	}
	b, err := ep.New(w, cfg)
	if err != nil {
		return 0, err
	}
	the.mu.Lock()
	defer the.mu.Unlock()
	h := the.add()
	the.bufs[h] = &epBuf{buf: b, handles: map[int32]*epHandle{}}
	return h, nil
}

func epDestroy(h int32) error {
	b, err := bufOf("roxamen_ep_destroy", h)
	if err != nil {
		return err
	}
	if err := b.buf.Free(); err != nil {
		return err
	}
	the.mu.Lock()
	delete(the.bufs, h)
	the.mu.Unlock()
	return nil
}

func tokens(dt ep.DType, p unsafe.Pointer, n int) ep.Tokens {
	if dt == ep.DTypeBF16 {
		return ep.Tokens{BF16: local[shmem.BFloat16](p, n)}
	}
	return ep.Tokens{F32: local[float32](p, n)}
}

// recvOut is where epDispatch copies what this PE received.
type recvOut struct {
	x       unsafe.Pointer // [capRows][Hidden] of the buffer's DType
	capRows int
	counts  []int32   // rows per local expert (Experts/NPEs)
	weights []float32 // capRows, or nil
	src     []int32   // capRows*3 (PE, token, k), or nil
}

func epDispatch(bh int32, x unsafe.Pointer, ntok int, idx, wts unsafe.Pointer, out recvOut) (rows int, handle int32, err error) {
	const call = "roxamen_ep_dispatch"
	b, err := bufOf(call, bh)
	if err != nil {
		return 0, 0, err
	}
	cfg := b.buf.Config()
	if ntok < 0 {
		return 0, 0, errorf(call, shmem.ErrBadArgument, "negative token count %d", ntok)
	}
	k := ntok * cfg.TopK
	recv, h, err := b.buf.Dispatch(bg, tokens(cfg.DType, x, ntok*cfg.Hidden), local[int64](idx, k), local[float32](wts, k))
	if err != nil {
		return 0, 0, err
	}
	if recv.Rows > out.capRows {
		return 0, 0, errorf(call, ep.ErrShape, "%d rows received, the output holds %d (size it with roxamen_ep_max_rows)", recv.Rows, out.capRows)
	}
	if len(out.counts) < len(recv.Counts) {
		return 0, 0, errorf(call, ep.ErrShape, "counts holds %d entries, this PE has %d local experts", len(out.counts), len(recv.Counts))
	}
	dst := tokens(cfg.DType, out.x, recv.Rows*cfg.Hidden)
	copy(dst.BF16, recv.X.BF16)
	copy(dst.F32, recv.X.F32)
	for i, c := range recv.Counts {
		out.counts[i] = int32(c)
	}
	if out.weights != nil {
		copy(out.weights, recv.Weights[:recv.Rows])
	}
	if out.src != nil {
		for i, s := range recv.Src[:recv.Rows] {
			out.src[3*i], out.src[3*i+1], out.src[3*i+2] = int32(s.PE), int32(s.Token), int32(s.K)
		}
	}
	the.mu.Lock()
	defer the.mu.Unlock()
	hh := the.add()
	b.handles[hh] = &epHandle{h: h, tokens: ntok}
	return recv.Rows, hh, nil
}

func epCombine(bh, hh int32, y unsafe.Pointer, rows int, out unsafe.Pointer) error {
	const call = "roxamen_ep_combine"
	b, err := bufOf(call, bh)
	if err != nil {
		return err
	}
	the.mu.Lock()
	h := b.handles[hh]
	the.mu.Unlock()
	if h == nil {
		return errorf(call, shmem.ErrBadArgument, "ep handle %d is not a live handle of buffer %d", hh, bh)
	}
	cfg := b.buf.Config()
	if rows < 0 {
		return errorf(call, shmem.ErrBadArgument, "negative row count %d", rows)
	}
	o := tokens(cfg.DType, out, h.tokens*cfg.Hidden)
	res, err := b.buf.CombineInto(bg, o, tokens(cfg.DType, y, rows*cfg.Hidden), h.h)
	copy(o.BF16, res.BF16) // the same memory unless Combine had to grow out
	copy(o.F32, res.F32)
	return err
}

func epHandleFree(bh, hh int32) error {
	const call = "roxamen_ep_handle_free"
	b, err := bufOf(call, bh)
	if err != nil {
		return err
	}
	the.mu.Lock()
	defer the.mu.Unlock()
	if b.handles[hh] == nil {
		return errorf(call, shmem.ErrBadArgument, "ep handle %d is not a live handle of buffer %d", hh, bh)
	}
	delete(b.handles, hh)
	return nil
}

// epDispatchOnStream enqueues a dispatch of device-resident tokens on stream sh (GPU Worlds).
func epDispatchOnStream(bh int32, sh uintptr, x uintptr, ntok int, idx, w uintptr) (*ep.DeviceRecv, int32, error) {
	const call = "roxamen_ep_dispatch_on_stream"
	b, err := bufOf(call, bh)
	if err != nil {
		return nil, 0, err
	}
	st, err := streamOf(call, sh)
	if err != nil {
		return nil, 0, err
	}
	recv, h, err := b.buf.DispatchOnStream(st, ep.DeviceTokens{Ptr: device.Ptr(x), Rows: ntok}, device.Ptr(idx), device.Ptr(w))
	if err != nil {
		return nil, 0, err
	}
	the.mu.Lock()
	defer the.mu.Unlock()
	hh := the.add()
	b.handles[hh] = &epHandle{h: h, tokens: ntok}
	return recv, hh, nil
}

// epCombineOnStream enqueues the combine of handle hh's dispatch on stream sh; y is in device
// memory with room for MaxRows rows. It returns the device address of the combined tokens.
func epCombineOnStream(bh int32, sh uintptr, hh int32, y uintptr, rows int) (uintptr, error) {
	const call = "roxamen_ep_combine_on_stream"
	b, err := bufOf(call, bh)
	if err != nil {
		return 0, err
	}
	st, err := streamOf(call, sh)
	if err != nil {
		return 0, err
	}
	the.mu.Lock()
	h := b.handles[hh]
	the.mu.Unlock()
	if h == nil {
		return 0, errorf(call, shmem.ErrBadArgument, "ep handle %d is not a live handle of buffer %d", hh, bh)
	}
	out, err := b.buf.CombineOnStream(st, ep.DeviceTokens{Ptr: device.Ptr(y), Rows: rows}, h.h)
	return uintptr(out.Ptr), err
}

// ---- the program's own device code ----

// linkState fills the program's roxshmem_state of size bytes at device address p.
func linkState(p uintptr, size int) error {
	w, err := world("roxamen_link_state")
	if err != nil {
		return err
	}
	return w.LinkState(device.Ptr(p), size)
}
