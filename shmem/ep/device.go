package ep

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"unsafe"

	"github.com/roxamen/roxamen/device"
	"github.com/roxamen/roxamen/kernels"
	"github.com/roxamen/roxamen/shmem"
)

// The device side: on a GPU World a Buffer runs roxamen/ep.h's block-level phases from the
// workload code object (kernels.WorkloadObject), each a kernel launch on the caller's stream, in
// the order ep.h's comment lists them. Every region those kernels touch (struct roxep, the
// symmetric landing zones and signals, the stages, the routing scratch, the outputs) lies in the
// symmetric heap: the landing zones must be at one offset on every PE, and the rest is this PE's
// device memory that shmem hands out.

// DeviceTokens is a row-major [Rows][Hidden] matrix of activations in the buffer's DType in this
// PE's device memory: Ptr is a device address (a symmetric array's Device(), or other memory of
// this PE's GPU). For Combine's y, Rows is the room it has.
type DeviceTokens struct {
	Ptr  device.Ptr
	Rows int
}

// DeviceRecv is what DispatchOnStream delivers to this PE, in the buffer's device memory: the
// same rows, order, weights and sources as Dispatch's Recv. It is there once the stream has run
// the dispatch and stays until the buffer's next Dispatch (or a blocking Combine, which copies its
// y over X). The row count is known on the device only: read Rows (or the counts) after
// synchronizing the stream, or pass the rows on to device code that reads them.
type DeviceRecv struct {
	X         DeviceTokens // room for MaxRows rows; the first Rows hold the rows, grouped by local expert
	Rows      device.Ptr   // int32: the rows received
	Counts    device.Ptr   // int32[Experts/NPEs]: rows per local expert
	Offsets   device.Ptr   // int32[Experts/NPEs+1]: the first row of each local expert
	Weights   device.Ptr   // float32[MaxRows]: each row's top-k weight
	Src       device.Ptr   // int32[MaxRows][3]: each row's source PE, token index and choice k
	Transfers device.Ptr   // int32[NPEs]: the tokens that travelled from each PE
}

const (
	devThreads   = 256 // threads per block of every phase (the workload kernels are built for at most 256)
	devWarpRows  = 8   // rows (or tokens) a block takes at once: a warp each, 256 threads of 32-lane warps
	devMaxBlocks = 264 // blocks of the phases that split their work, at most (two per SM of an H200)
)

// devLayout is where each region of the device side lies in the buffer's device allocation
// (offsets from its start, 256-byte aligned). Sizes as kernels.EP documents them, plus the outputs
// (X, sources, weights of MaxRows rows; the Combine output of MaxTokens tokens) and the blocking
// forms' inputs (tokens, indices, weights of MaxTokens tokens).
type devLayout struct {
	ep, stage, cstage, nsent, sent, slotOf, perExpert int
	counts, start, ecount, eoff, outRow, outW, rows   int
	arrived, carrived, scratch                        int
	ox, osrc, ow, oc, inX, inIdx, inW                 int
	size, maxRows                                     int
}

func newDevLayout(cfg Config, npes int) devLayout {
	P, M, K, E := npes, cfg.MaxTokens, cfg.TopK, cfg.Experts
	L := E / P
	_, row := rowLayout(cfg)
	pay := cfg.Hidden * cfg.DType.size()
	l := devLayout{maxRows: P * M * min(K, L)}
	take := func(n int) int {
		o := l.size
		l.size += (max(n, 1) + 255) &^ 255
		return o
	}
	l.ep = take(int(unsafe.Sizeof(kernels.EP{})))
	l.stage, l.cstage = take(P*M*row), take(P*M*pay)
	l.nsent, l.sent, l.slotOf, l.perExpert = take(4*P), take(4*P*M), take(4*M*P), take(8*E)
	l.counts, l.start, l.ecount, l.eoff = take(4*P), take(4*P), take(4*L), take(4*(L+1))
	l.outRow, l.outW, l.rows = take(4*P*M*K), take(4*P*M*K), take(4)
	l.arrived, l.carrived = take(8*P), take(8*P)
	l.scratch = take(4 * (P*M*K + kernels.EPMaxBlocks*L))
	l.ox, l.osrc, l.ow, l.oc = take(l.maxRows*pay), take(12*l.maxRows), take(4*l.maxRows), take(M*pay)
	l.inX, l.inIdx, l.inW = take(M*pay), take(8*M*K), take(4*M*K)
	return l
}

// DeviceHeapBytes returns the symmetric heap bytes New allocates per PE for cfg in a job of npes
// PEs on GPUs (HeapBytes is the host backend's): the landing zones and signals, and the device
// side's regions, the largest the received rows' room (NPEs*MaxTokens*min(TopK, Experts/NPEs)
// rows).
func DeviceHeapBytes(cfg Config, npes int) int64 {
	if npes < 1 {
		return 0
	}
	return HeapBytes(cfg, npes) + int64(newDevLayout(cfg, npes).size)
}

// devBuf is a Buffer's device side.
type devBuf struct {
	mod    *shmem.Module
	mem    shmem.Sym[byte]
	base   device.Ptr
	lay    devLayout
	blocks int
	last   device.Stream // the stream of the latest call
	broken error         // a launch failed midway: the device state is unknown
}

// The workload object is loaded once per World, for all its buffers.
var devModules struct {
	sync.Mutex
	m map[*shmem.World]*devModule
}

type devModule struct {
	mod  *shmem.Module
	refs int
}

func loadModule(w *shmem.World) (*shmem.Module, error) {
	devModules.Lock()
	defer devModules.Unlock()
	if dm := devModules.m[w]; dm != nil {
		dm.refs++
		return dm.mod, nil
	}
	_, arch, err := kernels.ObjectFor(w.Device().Arch)
	if err != nil {
		return nil, err
	}
	img, err := kernels.WorkloadObject(arch)
	if err != nil {
		return nil, err
	}
	mod, err := w.LoadModule(img)
	if err != nil {
		return nil, err
	}
	if devModules.m == nil {
		devModules.m = map[*shmem.World]*devModule{}
	}
	devModules.m[w] = &devModule{mod: mod, refs: 1}
	return mod, nil
}

func releaseModule(w *shmem.World) error {
	devModules.Lock()
	defer devModules.Unlock()
	dm := devModules.m[w]
	if dm == nil {
		return nil
	}
	if dm.refs--; dm.refs > 0 {
		return nil
	}
	delete(devModules.m, w)
	return dm.mod.Unload()
}

// newDevice sets up the device side of b (New, on a GPU World, after the landing zones).
func (b *Buffer) newDevice() error {
	cfg, P := b.cfg, b.npes
	lay := newDevLayout(cfg, P)
	mem, err := shmem.Alloc[byte](b.w, lay.size)
	if err != nil {
		return err
	}
	mod, err := loadModule(b.w)
	if err != nil {
		return errors.Join(fmt.Errorf("ep.New on PE %d: loading the workload kernels: %w", b.me, err), b.w.Free(mem.Mem()))
	}
	d := &devBuf{mod: mod, mem: mem, base: mem.Device(), lay: lay,
		blocks: max(1, min(b.w.Device().Multiprocessors, devMaxBlocks))}
	at := func(off int) uint64 { return uint64(d.base.Add(off)) }
	mode := int32(kernels.EPNormal)
	if cfg.Mode == LowLatency {
		mode = kernels.EPLowLatency
	}
	e := kernels.EP{Hidden: int32(cfg.Hidden), TopK: int32(cfg.TopK), Experts: int32(cfg.Experts), MaxTokens: int32(cfg.MaxTokens),
		Local: int32(b.local), ESize: int32(cfg.DType.size()), Mode: mode, Payload: uint32(b.payload), RowBytes: uint32(b.rowBytes),
		CEMin: 0, // unused by ep.h: rows move by the SMs, or by a block's put to an unmapped peer
		Recv:  uint64(b.recv.Device()), Comb: uint64(b.comb.Device()), Layout: uint64(b.layout.Device()), Sig: uint64(b.sig.Device()),
		Stage: at(lay.stage), CStage: at(lay.cstage), NSent: at(lay.nsent), Sent: at(lay.sent), SlotOf: at(lay.slotOf),
		PerExpert: at(lay.perExpert), Counts: at(lay.counts), Start: at(lay.start), ECount: at(lay.ecount), EOff: at(lay.eoff),
		OutRow: at(lay.outRow), OutW: at(lay.outW), Rows: at(lay.rows), Arrived: at(lay.arrived), CArrived: at(lay.carrived),
		Scratch: at(lay.scratch)}
	if err := mem.Put(lay.ep, unsafe.Slice((*byte)(unsafe.Pointer(&e)), unsafe.Sizeof(e)), b.me); err != nil {
		return errors.Join(fmt.Errorf("ep.New on PE %d: writing the buffer's device descriptor: %w", b.me, err), releaseModule(b.w), b.w.Free(mem.Mem()))
	}
	b.dev = d
	return nil
}

func (d *devBuf) ptr(off int) device.Ptr { return d.base.Add(off) }

// grid is the blocks of a phase whose warps take rows items: a warp an item, at most the
// buffer's blocks (the device's SMs), at least one.
func (d *devBuf) grid(rows int) int {
	return max(1, min(d.blocks, (rows+devWarpRows-1)/devWarpRows))
}

// MaxRows is the most rows Dispatch can deliver to one PE: every PE's MaxTokens tokens, each
// with min(TopK, Experts/NPEs) experts here. DeviceRecv.X has room for that many, and
// CombineOnStream's y must too.
func (b *Buffer) MaxRows() int {
	if b == nil {
		return 0
	}
	return b.npes * b.cfg.MaxTokens * min(b.cfg.TopK, b.local)
}

// streamArgs refuses a stream-ordered call on a freed buffer or a nil stream.
func (b *Buffer) streamArgs(call string, st device.Stream) error {
	if err := b.made(call); err != nil {
		return err
	}
	switch {
	case b.freed:
		return b.errorf(call, ErrClosed, "the buffer was freed")
	case st == nil:
		return b.errorf(call, shmem.ErrBadArgument, "nil stream")
	}
	return nil
}

// streamCheck refuses a stream-ordered call that cannot be enqueued on st (after its arguments
// were checked, on any backend).
func (b *Buffer) streamCheck(call string, st device.Stream) error {
	if err := b.streamArgs(call, st); err != nil {
		return err
	}
	switch {
	case b.dev == nil:
		return &shmem.Error{Call: call, PE: b.me, Kind: device.ErrNotSupported,
			Detail: "the stream-ordered forms run on a GPU World; on the host backend use the blocking Dispatch and Combine"}
	case b.dev.broken != nil:
		return &shmem.Error{Call: call, PE: b.me, Kind: shmem.ErrPEFailed, Detail: "an earlier call could not be enqueued whole; the buffer's device state is unknown", Err: b.dev.broken}
	}
	return b.idle(call, st)
}

// idle refuses a call on st while the buffer's latest call still runs on another stream: the
// device keeps one routing per buffer, so its calls follow each other on one stream (or after the
// other stream has finished).
func (b *Buffer) idle(call string, st device.Stream) error {
	last := b.dev.last
	if last == nil || last == st {
		return nil
	}
	if done, err := last.Query(); err == nil && !done {
		return b.errorf(call, shmem.ErrConcurrent, "the buffer's previous call still runs on another stream: a buffer's calls go on one stream, or synchronize the other first")
	}
	return nil
}

// checkDeviceDispatch checks what the host can see of a stream-ordered Dispatch's input.
func (b *Buffer) checkDeviceDispatch(call string, x DeviceTokens, idx, w device.Ptr) error {
	es := b.cfg.DType.size()
	switch {
	case x.Rows < 0:
		return b.errorf(call, ErrShape, "x has %d rows", x.Rows)
	case x.Rows > b.cfg.MaxTokens:
		return b.errorf(call, ErrTooManyTokens, "%d tokens, MaxTokens is %d", x.Rows, b.cfg.MaxTokens)
	case x.Rows == 0:
		return nil
	case x.Ptr == 0 || idx == 0 || w == 0:
		return b.errorf(call, shmem.ErrBadArgument, "x %#x, topkIdx %#x, topkWeights %#x: a nil device address for %d tokens", uintptr(x.Ptr), uintptr(idx), uintptr(w), x.Rows)
	case uintptr(x.Ptr)%uintptr(es) != 0:
		return b.errorf(call, shmem.ErrMisaligned, "x at %#x is not %d-byte aligned (%v)", uintptr(x.Ptr), es, b.cfg.DType)
	case uintptr(idx)%8 != 0:
		return b.errorf(call, shmem.ErrMisaligned, "topkIdx at %#x is not 8-byte aligned (int64)", uintptr(idx))
	case uintptr(w)%4 != 0:
		return b.errorf(call, shmem.ErrMisaligned, "topkWeights at %#x is not 4-byte aligned (float32)", uintptr(w))
	}
	return nil
}

// DispatchOnStream enqueues Dispatch on st, a stream of this PE's GPU (World.NewStream), and
// returns without waiting: x holds this PE's tokens (x.Rows of them, up to MaxTokens, zero
// included), topkIdx x.Rows*TopK int64 expert indices (-1 for none) and topkWeights as many
// float32 weights, all in device memory that must stay unchanged until the stream has run the
// dispatch. The rows arrive in the returned DeviceRecv; the handle is for the CombineOnStream (or
// Combine) that returns them. Every PE enqueues the same calls on its buffer in the same order.
//
// The shapes are checked here, before anything is enqueued; the expert indices only the device
// sees: an index outside [-1, Experts) makes this PE dispatch none of its tokens in this call (its
// peers' calls complete, seeing no token from it) and the stream's next SyncStream fails with
// ErrExpertRange, naming the PE and the index.
func (b *Buffer) DispatchOnStream(st device.Stream, x DeviceTokens, topkIdx, topkWeights device.Ptr) (*DeviceRecv, *Handle, error) {
	const call = "ep.DispatchOnStream"
	if err := b.streamArgs(call, st); err != nil {
		return nil, nil, err
	}
	if err := b.checkDeviceDispatch(call, x, topkIdx, topkWeights); err != nil {
		return nil, nil, err
	}
	if err := b.streamCheck(call, st); err != nil {
		return nil, nil, err
	}
	return b.dispatchDevice(call, st, x, topkIdx, topkWeights)
}

func (b *Buffer) dispatchDevice(call string, st device.Stream, x DeviceTokens, idx, w device.Ptr) (*DeviceRecv, *Handle, error) {
	d := b.dev
	b.dispEpoch++
	e := b.dispEpoch
	h := &Handle{buf: b, epoch: e, tokens: x.Rows, rows: -1}
	ep := d.ptr(d.lay.ep)
	ox, osrc, ow := d.ptr(d.lay.ox), d.ptr(d.lay.osrc), d.ptr(d.lay.ow)
	phases := []phase{{"roxep_k_route", 1, []any{ep, idx, int32(x.Rows)}}}
	if b.cfg.Mode == Normal {
		phases = append(phases, phase{"roxep_k_normal_layout", 1, []any{ep, e}})
	}
	phases = append(phases, phase{"roxep_k_dispatch_send", d.grid(x.Rows * b.npes), []any{ep, x.Ptr, idx, w, e}},
		phase{"roxep_k_dispatch_recv_count", d.blocks, []any{ep, e}},
		phase{"roxep_k_dispatch_recv_scan", 1, []any{ep, int32(d.blocks)}},
		phase{"roxep_k_dispatch_recv_copy", d.blocks, []any{ep, ox, osrc, ow}},
		phase{"roxep_k_dispatch_ack", 1, []any{ep, e}})
	for _, p := range phases {
		if err := b.launch(call, st, p.name, p.grid, p.args...); err != nil {
			return nil, nil, err
		}
	}
	r := &DeviceRecv{X: DeviceTokens{Ptr: ox, Rows: d.lay.maxRows}, Rows: d.ptr(d.lay.rows), Counts: d.ptr(d.lay.ecount),
		Offsets: d.ptr(d.lay.eoff), Weights: ow, Src: osrc, Transfers: d.ptr(d.lay.counts)}
	return r, h, nil
}

// phase is one kernel of a call: ep.h's entry point, its grid and its arguments.
type phase struct {
	name string
	grid int
	args []any
}

// launch enqueues one phase; a phase that cannot be enqueued leaves the device state of the call
// half done, and the buffer refuses further calls.
func (b *Buffer) launch(call string, st device.Stream, name string, grid int, args ...any) error {
	if err := b.dev.mod.LaunchOn(st, name, device.D1(grid), device.D1(devThreads), 0, args...); err != nil {
		b.dev.broken = err
		return fmt.Errorf("%s on PE %d: enqueueing %s: %w", call, b.me, name, err)
	}
	b.dev.last = st
	return nil
}

// checkHandle checks a Combine's handle.
func (b *Buffer) checkHandle(call string, h *Handle) error {
	if err := b.made(call); err != nil {
		return err
	}
	switch {
	case b.freed:
		return b.errorf(call, ErrClosed, "the buffer was freed")
	case h == nil:
		return b.errorf(call, ErrForeignHandle, "nil handle")
	case h.buf == nil:
		return b.errorf(call, ErrForeignHandle, "a zero Handle (Dispatch returns them)")
	case h.buf != b:
		return b.errorf(call, ErrForeignHandle, "the handle is from buffer %d (Dispatch call %d), this is buffer %d", h.buf.id, h.epoch, b.id)
	case b.dev != nil && h.epoch != b.dispEpoch:
		return b.errorf(call, ErrStaleHandle, "the handle is from Dispatch call %d, the buffer's latest is call %d: on a GPU the buffer keeps the latest routing only", h.epoch, b.dispEpoch)
	}
	return nil
}

// CombineOnStream enqueues Combine on st and returns without waiting: y holds the expert output
// of each row DispatchOnStream delivered, in its order ([rows][Hidden] in the buffer's DType, in
// device memory unchanged until the stream has run the combine). The received row count is on
// the device, so y must have room for MaxRows rows (as DeviceRecv.X has; only the received ones
// are read). The weighted sums for this PE's tokens land in the returned tokens (h's token count
// of rows, in the buffer's device memory, until its next Combine), in the order the package
// comment documents. h is the handle of the buffer's latest Dispatch.
func (b *Buffer) CombineOnStream(st device.Stream, y DeviceTokens, h *Handle) (DeviceTokens, error) {
	const call = "ep.CombineOnStream"
	if err := b.streamArgs(call, st); err != nil {
		return DeviceTokens{}, err
	}
	if err := b.checkHandle(call, h); err != nil {
		return DeviceTokens{}, err
	}
	if y.Rows < b.MaxRows() {
		return DeviceTokens{}, b.errorf(call, ErrShape, "y has room for %d rows, want MaxRows = %d: the received row count is known on the device only", y.Rows, b.MaxRows())
	}
	if y.Ptr == 0 || uintptr(y.Ptr)%uintptr(b.cfg.DType.size()) != 0 {
		return DeviceTokens{}, b.errorf(call, shmem.ErrMisaligned, "y at %#x: want a %d-byte aligned device address (%v)", uintptr(y.Ptr), b.cfg.DType.size(), b.cfg.DType)
	}
	if err := b.streamCheck(call, st); err != nil {
		return DeviceTokens{}, err
	}
	return b.combineDevice(call, st, y.Ptr, h)
}

func (b *Buffer) combineDevice(call string, st device.Stream, y device.Ptr, h *Handle) (DeviceTokens, error) {
	d := b.dev
	b.combEpoch++
	e := b.combEpoch
	ep, oc := d.ptr(d.lay.ep), d.ptr(d.lay.oc)
	for _, p := range []phase{{"roxep_k_combine_send", d.blocks, []any{ep, y, e}},
		{"roxep_k_combine_recv", d.grid(h.tokens), []any{ep, oc, int32(h.tokens), e}},
		{"roxep_k_combine_ack", 1, []any{ep, e}}} {
		if err := b.launch(call, st, p.name, p.grid, p.args...); err != nil {
			return DeviceTokens{}, err
		}
	}
	return DeviceTokens{Ptr: oc, Rows: h.tokens}, nil
}

// sync waits for the buffer's stream (the blocking forms): as the host backend's waits, for at
// most the World's timeout (ROX_TIMEOUT) unless ctx has a deadline of its own; a wait that gives
// up aborts this PE's device work, as SyncStream does.
func (b *Buffer) sync(ctx context.Context, call string) error {
	if ctx == nil {
		ctx = context.Background()
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, b.w.Timeout())
		defer cancel()
	}
	if err := b.w.SyncStream(ctx, b.dev.mod.Stream()); err != nil {
		return fmt.Errorf("%s: %w", call, err)
	}
	return nil
}

// get copies n bytes at off of the device allocation into dst.
func (b *Buffer) get(call string, off int, dst []byte) error {
	if len(dst) == 0 {
		return nil
	}
	if err := b.dev.mem.Get(off, dst, b.me); err != nil {
		return fmt.Errorf("%s: reading the device results: %w", call, err)
	}
	return nil
}

func (b *Buffer) put(call string, off int, src []byte) error {
	if len(src) == 0 {
		return nil
	}
	if err := b.dev.mem.Put(off, src, b.me); err != nil {
		return fmt.Errorf("%s: copying the input to the device: %w", call, err)
	}
	return nil
}

func i32s(b []byte) []int32 {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Slice((*int32)(unsafe.Pointer(&b[0])), len(b)/4)
}

func bytesOf[T any](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), len(s)*int(unsafe.Sizeof(s[0])))
}

// dispatchBlocking is Dispatch on a GPU World: the input (checked on the host, the expert range
// included) copied to the device, DispatchOnStream on the buffer's stream, the results copied back.
func (b *Buffer) dispatchBlocking(ctx context.Context, call string, n int, x Tokens, idx []int64, weights []float32) (*Recv, *Handle, error) {
	d := b.dev
	st := d.mod.Stream()
	if err := b.streamCheck(call, st); err != nil {
		return nil, nil, err
	}
	for _, c := range []struct {
		off int
		b   []byte
	}{{d.lay.inX, x.bytes(b.cfg.DType)}, {d.lay.inIdx, bytesOf(idx)}, {d.lay.inW, bytesOf(weights)}} {
		if err := b.put(call, c.off, c.b); err != nil {
			return nil, nil, err
		}
	}
	_, h, err := b.dispatchDevice(call, st, DeviceTokens{Ptr: d.ptr(d.lay.inX), Rows: n}, d.ptr(d.lay.inIdx), d.ptr(d.lay.inW))
	if err != nil {
		return nil, nil, err
	}
	if err := b.sync(ctx, call); err != nil {
		return nil, nil, err
	}
	r, err := b.fetchRecv(call)
	if err != nil {
		return nil, nil, err
	}
	h.rows = r.Rows
	return r, h, nil
}

// fetchRecv reads the latest dispatch's results from the device (its stream has finished).
func (b *Buffer) fetchRecv(call string) (*Recv, error) {
	d, L, P := b.dev, b.local, b.npes
	head := make([]byte, 4)
	if err := b.get(call, d.lay.rows, head); err != nil {
		return nil, err
	}
	rows := int(i32s(head)[0])
	if rows < 0 || rows > d.lay.maxRows {
		return nil, b.errorf(call, shmem.ErrMismatch, "the device reports %d rows, the most is %d: the PEs' Configs differ", rows, d.lay.maxRows)
	}
	counts, offs, tr := make([]byte, 4*L), make([]byte, 4*(L+1)), make([]byte, 4*P)
	src, wb := make([]byte, 12*rows), make([]byte, 4*rows)
	r := &Recv{Rows: rows, X: makeTokens(b.cfg.DType, rows*b.cfg.Hidden), Counts: make([]int, L), Offsets: make([]int, L+1),
		Transfers: make([]int, P), Weights: make([]float32, rows), Src: make([]Source, rows), Experts: make([]int, rows)}
	for _, c := range []struct {
		off int
		b   []byte
	}{{d.lay.ecount, counts}, {d.lay.eoff, offs}, {d.lay.counts, tr}, {d.lay.ox, r.X.bytes(b.cfg.DType)}, {d.lay.osrc, src}, {d.lay.ow, wb}} {
		if err := b.get(call, c.off, c.b); err != nil {
			return nil, err
		}
	}
	for l, v := range i32s(counts) {
		r.Counts[l] = int(v)
	}
	for l, v := range i32s(offs) {
		r.Offsets[l] = int(v)
	}
	for s, v := range i32s(tr) {
		r.Transfers[s] = int(v)
	}
	sv := i32s(src)
	l := 0
	for i := 0; i < rows; i++ {
		r.Src[i] = Source{PE: int(sv[3*i]), Token: int(sv[3*i+1]), K: int(sv[3*i+2])}
		r.Weights[i] = math.Float32frombits(getU32(wb[4*i:]))
		for l+1 < L && r.Offsets[l+1] <= i {
			l++
		}
		r.Experts[i] = b.me*L + l
	}
	return r, nil
}

// combineBlocking is Combine on a GPU World: y copied over the device's received rows,
// CombineOnStream on the buffer's stream, the sums copied back.
func (b *Buffer) combineBlocking(ctx context.Context, call string, y Tokens, h *Handle) (Tokens, error) {
	d := b.dev
	st := d.mod.Stream()
	if err := b.streamCheck(call, st); err != nil {
		return Tokens{}, err
	}
	if err := b.put(call, d.lay.ox, y.bytes(b.cfg.DType)); err != nil {
		return Tokens{}, err
	}
	out, err := b.combineDevice(call, st, d.ptr(d.lay.ox), h)
	if err != nil {
		return Tokens{}, err
	}
	if err := b.sync(ctx, call); err != nil {
		return Tokens{}, err
	}
	res := makeTokens(b.cfg.DType, out.Rows*b.cfg.Hidden)
	if err := b.get(call, d.lay.oc, res.bytes(b.cfg.DType)); err != nil {
		return Tokens{}, err
	}
	return res, nil
}

// rowsOf returns the rows h's Dispatch delivered (a stream-ordered one's: read from the device
// once the buffer's stream is idle).
func (b *Buffer) rowsOf(call string, h *Handle) (int, error) {
	if h.rows >= 0 {
		return h.rows, nil
	}
	if done, err := b.dev.last.Query(); err != nil || !done {
		return 0, b.errorf(call, shmem.ErrConcurrent, "the handle's DispatchOnStream has not finished on its stream (synchronize it before the blocking Combine)")
	}
	head := make([]byte, 4)
	if err := b.get(call, b.dev.lay.rows, head); err != nil {
		return 0, err
	}
	h.rows = int(i32s(head)[0])
	return h.rows, nil
}

func init() { shmem.RegisterDeviceRecord(kernels.CallEPExpert, expertRecord) }

// expertRecord names ep.h's record of an expert index out of range.
func expertRecord(_ *shmem.World, r kernels.AbortRecord) (error, string) {
	v := fmt.Sprint(int32(r.Detail))
	if int32(r.Detail) == math.MaxInt32 || int32(r.Detail) == math.MinInt32 {
		v += " or beyond (saturated)"
	}
	return ErrExpertRange, fmt.Sprintf("ep.DispatchOnStream on PE %d: topkIdx holds expert %s, want -1 (none) or 0 <= expert < the buffer's Experts; this PE dispatched none of its tokens in that call", r.PE, v)
}
