package shmem

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/roxamen/roxamen/device"
	"github.com/roxamen/roxamen/internal/env"
	"github.com/roxamen/roxamen/kernels"
	"github.com/roxamen/roxamen/nic"
)

// The GPU side of a World (cuda and hip backends): the runtime code object with its
// roxshmem_state, the device->host command ring and its proxy, the abort block, and the internal
// stream host-initiated atomics run on. One gpuRuntime per PE, from startDevice to stopDevice.
//
// Memory it owns:
//   - ctrl (host-pinned, device-mapped): [0,64) the abort block; [64,128) the host AMO result;
//     then ring results (uint64[ringCap]) and the proxy's completion values (uint64[ringCap]).
//     The abort block is host memory so that setting it needs no device command: a command can
//     sit behind a stalled stream (measured: with a kernel spinning in one stream and more work
//     queued behind it, copies on the other streams stopped), and the abort must still land;
//   - ringMem (host-pinned, device-mapped): the command ring;
//   - misc (device memory): [0] the ticket counter, [64] the device-local completion mirror;
//   - a BarrierBytes workspace reserved at the start of the symmetric heap.
type gpuRuntime struct {
	w        *World
	peerBase []device.Ptr // per PE: its heap as this GPU addresses it; 0: reached through the NIC path
	heapDev  device.Ptr   // this PE's heap as kernels address it (host-pinned in NIC mode)
	hostHeap device.HostBuffer

	runtimeMod device.Module
	amoFn      device.Function
	internal   device.Stream // host AMOs
	amoMu      sync.Mutex

	ctrl    device.HostBuffer
	ringMem device.HostBuffer
	ring    *nic.Ring
	ringCap int
	ctxs    *devCtxPool // the device contexts' rings (gpu_ctx.go)
	misc    device.Ptr
	state   kernels.State

	fnMu sync.Mutex
	fns  map[string]device.Function // runtime kernels by name

	modMu   sync.Mutex
	modules map[*Module]bool

	proxy         *gpuProxy
	sdma          *gpuSDMA      // AMD: the device-written SDMA queues; nil elsewhere
	aborted       atomic.Uint64 // the reason the abort word was set with; 0: not set
	cpuCompletion bool          // the proxy writes ring completion from the host for NIC-only batches
	stop          chan struct{}
	wg            sync.WaitGroup
}

const (
	ctrlAbort   = 0
	ctrlAMO     = 64
	ctrlResults = 128
	ringCap     = 1024
	miscBytes   = 256

	abortPeerFailed = 1 // abort word: the bootstrap reported a dead PE
	abortProxy      = 2 // the proxy failed
	abortShutdown   = 3 // the World is being torn down
	abortCanceled   = 4 // a host call that waits for a kernel gave up (context, timeout)
)

func (w *World) gpuRT() *gpuRuntime {
	if w.gpu == nil {
		w.gpu = &gpuRuntime{w: w, peerBase: make([]device.Ptr, w.npes), fns: map[string]device.Function{}, modules: map[*Module]bool{}}
	}
	return w.gpu
}

// devicePath reaches pe's heap at base, a device address (this PE's own heap or a peer's mapped
// through IPC): host puts and gets are synchronous copies, AMOs a one-thread kernel.
func (w *World) devicePath(pe int, base device.Ptr) path {
	rt := w.gpuRT()
	rt.peerBase[pe] = base
	if pe == w.pe {
		rt.heapDev = base
	}
	return devPath{rt: rt, pe: pe, base: base}
}

// startDevice brings up the GPU side of the runtime once the heaps are mapped: peer access, the
// runtime module and its state, the ring and its proxy, the abort watcher.
func (w *World) startDevice(ctx context.Context) (err error) {
	rt := w.gpuRT()
	d := w.dev
	info := d.Info()
	defer func() {
		if err != nil {
			rt.release()
		}
	}()

	// Peer access to every PE of this node whose heap is mapped here.
	all, err := w.boot.Allgather(ctx, []byte(info.PCIBusID))
	if err != nil {
		return fmt.Errorf("exchanging PCI bus ids: %w", err)
	}
	for pe, bus := range all {
		if pe == w.pe || rt.peerBase[pe] == 0 || string(bus) == info.PCIBusID {
			continue
		}
		if err := d.EnablePeerAccess(device.Info{Driver: info.Driver, PCIBusID: string(bus)}); err != nil {
			return fmt.Errorf("enabling peer access to PE %d (%s): %w", pe, bus, err)
		}
	}

	img, arch, err := kernels.ObjectFor(info.Arch)
	if err != nil {
		return err
	}
	if rt.runtimeMod, err = d.LoadModule(img); err != nil {
		return fmt.Errorf("loading the %s runtime kernels: %w", arch, err)
	}
	if rt.amoFn, err = rt.runtimeMod.Function("roxk_amo"); err != nil {
		return err
	}
	if rt.internal, err = d.NewStream(); err != nil {
		return err
	}

	rt.ringCap = ringCap
	// With a transport the proxy completes NIC operations itself, from the host: a completion
	// copy on the copy-engine stream can wait behind a user's stalled stream (see ctrl above).
	rt.cpuCompletion = w.transport != nil
	if rt.ctrl, err = d.AllocHost(ctrlResults + 16*rt.ringCap); err != nil {
		return fmt.Errorf("allocating the control block: %w", err)
	}
	clear(rt.ctrl.Bytes)
	if rt.ringMem, err = d.AllocHost(nic.RingBytes(rt.ringCap)); err != nil {
		return fmt.Errorf("allocating the command ring: %w", err)
	}
	if rt.ring, err = nic.NewRing(rt.ringMem.Bytes, rt.ringCap); err != nil {
		return err
	}
	if rt.misc, err = d.Alloc(miscBytes); err != nil {
		return err
	}
	if err := d.Memset(rt.misc, 0, miscBytes); err != nil {
		return err
	}

	// The device barrier's workspace: reserved before any user allocation, so at the same
	// offset on every PE.
	w.allocMu.Lock()
	boff, err := w.heap.Alloc(kernels.BarrierBytes, 64)
	w.allocMu.Unlock()
	if err != nil {
		return fmt.Errorf("reserving the device barrier workspace: %w", err)
	}
	if err := w.zero("Init", boff, kernels.BarrierBytes); err != nil {
		return err
	}

	thr, _ := env.CEThreshold.Size()
	s := &rt.state
	s.Magic, s.Version = kernels.StateMagic, kernels.StateVersion
	if w.ordering == Bypass {
		s.Flags |= kernels.FlagBypass
	}
	if rt.cpuAMOs() {
		s.Flags |= kernels.FlagHostAMO
	}
	s.MyPE, s.NPEs = int32(w.pe), int32(w.npes)
	s.HeapBase, s.HeapSize = uint64(rt.heapDev), uint64(w.heapSize)
	s.CEThreshold = uint64(thr)
	s.Ring, s.RingCapacity = uint64(rt.ringMem.Dev), uint32(rt.ringCap)
	s.RingHead = uint64(rt.misc)
	s.RingResults = uint64(rt.ctrl.Dev) + ctrlResults
	s.Completion = uint64(rt.misc) + 64
	if rt.cpuCompletion {
		s.Completion = 0 // device waits poll the ring header, which the proxy writes from the host
	}
	s.Abort = uint64(rt.ctrl.Dev) + ctrlAbort
	s.BarrierOff = boff
	if w.npes > kernels.MaxPEs {
		return fmt.Errorf("%d PEs: the device state holds at most %d", w.npes, kernels.MaxPEs)
	}
	for pe, b := range rt.peerBase {
		s.PeerBase[pe] = uint64(b)
	}
	if rt.sdma, err = rt.startSDMA(uint64(thr)); err != nil {
		return err
	}
	if err := rt.startCtxs(); err != nil {
		return err
	}
	if err := rt.fillState(rt.runtimeMod); err != nil {
		return err
	}

	rt.stop = make(chan struct{})
	if err := rt.startProxy(); err != nil {
		return err
	}
	rt.wg.Add(1)
	go rt.watch()
	return nil
}

// cpuAMOs reports whether every read-modify-write of this PE's heap must be applied by the CPU:
// on the NIC path the transport applies remote AMOs to the host-mapped heap with CPU atomics,
// and where the device's atomics on host memory are not atomic with those (PCIe hosts) a kernel's
// own AMO to the same word could lose one of them (seen on an H200: 639 of 640 adds).
func (rt *gpuRuntime) cpuAMOs() bool {
	return rt.hostHeap.Bytes != nil && !rt.w.dev.Info().HostNativeAtomics
}

// placeHostHeap moves this PE's heap (as kernels and the transport see it) into host-pinned,
// device-mapped memory. Init calls it before the transport starts, on GPU backends that need one:
// the transport's target side reads and writes the heap from the host.
func (rt *gpuRuntime) placeHostHeap() error {
	w := rt.w
	hb, err := w.dev.AllocHost(int(w.heapSize))
	if err != nil {
		return fmt.Errorf("allocating a %d-byte host-mapped heap for the NIC path: %w", w.heapSize, err)
	}
	clear(hb.Bytes)
	rt.hostHeap = hb
	rt.heapDev = hb.Dev
	rt.peerBase[w.pe] = hb.Dev
	w.local = hb.Bytes
	w.peers[w.pe] = w.local
	w.paths[w.pe] = mapped(w.local)
	return nil
}

// fillState writes this PE's roxshmem_state into module m.
func (rt *gpuRuntime) fillState(m device.Module) error {
	p, size, err := m.Global(kernels.StateSymbol)
	if err != nil {
		return fmt.Errorf("finding %s in the module: %w", kernels.StateSymbol, err)
	}
	b := kernels.StateBytes(&rt.state)
	if size != len(b) {
		return fmt.Errorf("the module's %s is %d bytes, this runtime's %d: the module was built against another version of roxshmem.h", kernels.StateSymbol, size, len(b))
	}
	return rt.w.dev.CopyHtoD(p, b)
}

// watch sets the abort word when the job fails, so that every device wait returns.
func (rt *gpuRuntime) watch() {
	defer rt.wg.Done()
	select {
	case <-rt.w.boot.Failed():
		rt.abort(abortPeerFailed)
	case <-rt.stop:
	}
}

// abort sets the abort word (the first reason wins). The copy runs on the device's private
// non-blocking stream, next to kernels that may be spinning in a wait.
func (rt *gpuRuntime) abort(reason uint64) {
	if len(rt.ctrl.Bytes) == 0 || !rt.aborted.CompareAndSwap(0, reason) {
		return
	}
	atomic.StoreUint64((*uint64)(unsafe.Pointer(&rt.ctrl.Bytes[ctrlAbort])), reason)
}

var abortReasons = map[uint64]string{
	abortPeerFailed: "a PE failed", abortProxy: "the proxy failed", abortShutdown: "the World was finalized",
	abortCanceled: "a host wait gave up",
}

// deviceError reports what device code recorded (an abandoned wait, a bad PE or address) and
// the ring's failure, if any; nil when all is well.
func (rt *gpuRuntime) deviceError(call string) error {
	if len(rt.ctrl.Bytes) == 0 {
		return nil
	}
	w := rt.w
	first := atomic.LoadUint64((*uint64)(unsafe.Pointer(&rt.ctrl.Bytes[ctrlAbort+8])))
	count := atomic.LoadUint64((*uint64)(unsafe.Pointer(&rt.ctrl.Bytes[ctrlAbort+16])))
	var cause error
	if err := w.failed(); err != nil {
		cause = err
	}
	if err := rt.ring.Err(); err != nil {
		cause = errors.Join(cause, err)
	}
	if err := rt.ctxs.err(); err != nil {
		cause = errors.Join(cause, err)
	}
	return w.deviceRecordError(call, first, count, cause)
}

// deviceRecordError turns what device code recorded in an abort block (first: the first record,
// count: how many) into an error naming call and what the kernel did; cause is what the host knows
// went wrong meanwhile (a failed PE, the ring's error). nil when nothing was recorded or failed.
func (w *World) deviceRecordError(call string, first, count uint64, cause error) error {
	r := kernels.DecodeAbortRecord(first)
	if !r.Valid {
		if cause != nil {
			return &Error{Call: call, PE: w.pe, Kind: ErrPEFailed, Detail: "device work", Err: cause}
		}
		return nil
	}
	pe := "no particular PE"
	if r.PE != 0xffff {
		pe = fmt.Sprintf("PE %d", int16(r.PE))
	}
	kind := ErrPEFailed
	detail := fmt.Sprintf("a kernel's %s (%s) gave up", r.CallName(), pe)
	switch r.Call {
	case kernels.CallBadPE:
		kind, detail = ErrPERange, fmt.Sprintf("a kernel named target PE %d, want 0 <= pe < %d", int32(r.Detail), w.npes)
	case kernels.CallBadAddr:
		kind, detail = ErrNotSymmetric, fmt.Sprintf("a kernel passed address %#x (low 32 bits) for %s, outside the symmetric heap or misaligned", r.Detail, pe)
	case kernels.CallNoRoute:
		kind, detail = ErrBadArgument, fmt.Sprintf("a kernel's operation to %s needs the command ring, which this module lacks", pe)
	case kernels.CallBadTeam:
		kind, detail = w.dteams.describe(int(int32(r.Detail)))
	case kernels.CallBadCtx:
		kind, detail = ErrBadArgument, fmt.Sprintf("a kernel used device context %d, which names no live context (destroyed, or never created: roxshmem_ctx_create hands out 1..%d)", int32(r.Detail), devCtxs)
	case kernels.CallCollMismatch:
		kind, detail = ErrMismatch, fmt.Sprintf("a kernel's team collective on PE %d met another collective, type, size, op or root on %s (its signature's low bits %#x)", w.pe, pe, r.Detail)
	case kernels.CallBadArg:
		why := map[uint32]string{kernels.BadArgRoot: "a root outside the team", kernels.BadArgOverlap: "overlapping destination and source",
			kernels.BadArgWorkspace: "a team without a device workspace (the symmetric heap is too small for them)",
			kernels.BadArgNotMapped: "a team with a member whose heap this GPU cannot load and store (device collectives need one node)"}[r.Detail]
		if why == "" {
			why = fmt.Sprintf("detail %d", r.Detail)
		}
		kind, detail = ErrBadArgument, "a kernel's team collective was given "+why
	default:
		if dec, ok := deviceRecordDecoder(r.Call); ok {
			kind, detail = dec(w, r)
		} else if r.Detail&kernels.DetailAbortWord != 0 {
			detail += ": " + abortReasons[uint64(r.Detail&0xffff)]
		} else if r.Detail&kernels.DetailRingError != 0 {
			detail += ": " + nic.RingErrCode(r.Detail&0xffff).String()
		}
	}
	if count > 1 {
		detail += fmt.Sprintf(" (%d device calls recorded a failure)", count)
	}
	return &Error{Call: call, PE: w.pe, Kind: kind, Detail: detail, Err: cause}
}

// clearDeviceError forgets a recorded device failure (after it was reported).
func (rt *gpuRuntime) clearDeviceError() {
	atomic.StoreUint64((*uint64)(unsafe.Pointer(&rt.ctrl.Bytes[ctrlAbort+8])), 0)
	atomic.StoreUint64((*uint64)(unsafe.Pointer(&rt.ctrl.Bytes[ctrlAbort+16])), 0)
}

// waitStream waits for st's work without hanging: when the job fails or ctx ends it sets the abort
// word (device waits return) and waits at most ROX_TIMEOUT more. It then reports what device code
// recorded.
func (rt *gpuRuntime) waitStream(ctx context.Context, call string, st device.Stream) error {
	if ctx == nil {
		ctx = context.Background()
	}
	w := rt.w
	var deadline time.Time
	sleep := time.Microsecond
	for n := 0; ; n++ {
		done, err := st.Query()
		if err != nil {
			return &Error{Call: call, PE: w.pe, Kind: ErrPEFailed, Detail: "a kernel failed on " + w.dev.Info().String(), Err: err}
		}
		if done {
			break
		}
		if deadline.IsZero() {
			var why uint64
			if w.failed() != nil {
				why = abortPeerFailed
			} else if ctx.Err() != nil {
				why = abortCanceled
			}
			if why != 0 {
				rt.abort(why)
				deadline = time.Now().Add(w.timeout)
			}
		} else if time.Now().After(deadline) {
			return &Error{Call: call, PE: w.pe, Kind: ErrTimeout, Detail: fmt.Sprintf("device work did not stop within %v (ROX_TIMEOUT) of the abort", w.timeout), Err: errors.Join(w.failed(), ctx.Err())}
		}
		if n < 200 {
			runtime.Gosched()
			continue
		}
		time.Sleep(sleep)
		if sleep < 100*time.Microsecond {
			sleep *= 2
		}
	}
	if env.Debugging(env.LevelTrace) && rt.proxy != nil && rt.proxy.stats.Descs.Load() != 0 {
		debugf("PE %d: %s: proxy %v", w.pe, call, &rt.proxy.stats)
		rt.proxy.stats.reset()
	}
	if err := rt.deviceError(call); err != nil {
		rt.clearDeviceError()
		if e, ok := err.(*Error); ok && w.scoll != nil {
			e.Detail += " (" + w.scoll.takePending(st) + ")"
		}
		return err
	}
	if w.scoll != nil {
		w.scoll.takePending(st)
	}
	if deadline.IsZero() {
		return nil
	}
	return &Error{Call: call, PE: w.pe, Kind: ErrPEFailed, Detail: "device work was aborted", Err: errors.Join(w.failed(), ctx.Err())}
}

// function returns a runtime kernel by name.
func (rt *gpuRuntime) function(name string) (device.Function, error) {
	rt.fnMu.Lock()
	defer rt.fnMu.Unlock()
	if f, ok := rt.fns[name]; ok {
		return f, nil
	}
	f, err := rt.runtimeMod.Function(name)
	if err != nil {
		return nil, err
	}
	rt.fns[name] = f
	return f, nil
}

// hostAMO runs one AMO on the device word at addr from the host and returns the old value.
func (rt *gpuRuntime) hostAMO(addr device.Ptr, op nic.AMOOp, width int, value, compare uint64) (uint64, error) {
	if err := nic.CheckAMO(op, width, uint64(addr)); err != nil {
		return 0, err
	}
	rt.amoMu.Lock()
	defer rt.amoMu.Unlock()
	out := (*uint64)(unsafe.Pointer(&rt.ctrl.Bytes[ctrlAMO]))
	atomic.StoreUint64(out, 0)
	if err := rt.internal.Launch(rt.amoFn, device.D1(1), device.D1(1), 0, addr, uint32(op), uint32(width), value, compare, rt.ctrl.Dev.Add(ctrlAMO)); err != nil {
		return 0, err
	}
	if err := rt.internal.Synchronize(); err != nil {
		return 0, err
	}
	return atomic.LoadUint64(out), nil
}

// stopDevice releases what startDevice set up. Any kernel still waiting is aborted first so that
// nothing hangs.
func (w *World) stopDevice() {
	if w.gpu == nil {
		return
	}
	w.gpu.release()
	w.gpu = nil
}

func (rt *gpuRuntime) release() {
	rt.abort(abortShutdown)
	if rt.proxy != nil {
		rt.proxy.stop()
	}
	if rt.stop != nil {
		close(rt.stop)
		rt.wg.Wait()
		rt.stop = nil
	}
	d := rt.w.dev
	rt.w.scoll.release()
	rt.modMu.Lock()
	for m := range rt.modules {
		_ = m.mod.Unload()
		_ = m.stream.Destroy()
		m.dead.Store(true)
	}
	rt.modules = map[*Module]bool{}
	rt.modMu.Unlock()
	if rt.proxy != nil {
		rt.proxy.close()
	}
	if rt.internal != nil {
		_ = rt.internal.Synchronize()
		_ = rt.internal.Destroy()
	}
	if rt.runtimeMod != nil {
		_ = rt.runtimeMod.Unload()
	}
	rt.sdma.release(d)
	rt.sdma = nil
	rt.ctxs.release(d)
	rt.ctxs = nil
	if rt.misc != 0 {
		_ = d.Free(rt.misc)
	}
	if dt := rt.w.dteams; dt != nil && dt.dev != 0 {
		_ = d.Free(dt.dev)
		dt.dev = 0
	}
	for _, hb := range []device.HostBuffer{rt.ringMem, rt.ctrl, rt.hostHeap} {
		if len(hb.Bytes) != 0 {
			_ = d.FreeHost(hb)
		}
	}
	if rt.hostHeap.Bytes != nil {
		rt.w.local = nil
	}
	rt.runtimeMod, rt.internal, rt.misc = nil, nil, 0
	rt.ringMem, rt.ctrl, rt.hostHeap = device.HostBuffer{}, device.HostBuffer{}, device.HostBuffer{}
}

// zero clears [off, off+size) of this PE's heap.
func (w *World) zero(call string, off uint64, size int) error {
	if size == 0 {
		return nil
	}
	if w.local != nil {
		clear(w.local[off : off+uint64(size)])
		return nil
	}
	if err := w.dev.Memset(w.heapBase.Add(int(off)), 0, size); err != nil {
		return &Error{Call: call, PE: w.pe, Kind: ErrPEFailed, Detail: fmt.Sprintf("zeroing %d bytes at heap offset %d", size, off), Err: err}
	}
	return nil
}

// move copies n bytes of this PE's heap from src to dst (the ranges may overlap); old is the
// source's host view where the heap has one.
func (w *World) move(dst, src uint64, n int, old []byte) error {
	if n <= 0 {
		return nil
	}
	if w.local != nil {
		copy(w.local[dst:dst+uint64(n)], old)
		return nil
	}
	buf := make([]byte, n)
	if err := w.dev.CopyDtoH(buf, w.heapBase.Add(int(src))); err != nil {
		return &Error{Call: "Realloc", PE: w.pe, Kind: ErrPEFailed, Detail: fmt.Sprintf("reading %d bytes at heap offset %d", n, src), Err: err}
	}
	if err := w.dev.CopyHtoD(w.heapBase.Add(int(dst)), buf); err != nil {
		return &Error{Call: "Realloc", PE: w.pe, Kind: ErrPEFailed, Detail: fmt.Sprintf("writing %d bytes at heap offset %d", n, dst), Err: err}
	}
	return nil
}

// devPath reaches one PE's heap in device memory (this GPU's, or a peer's mapped here).
type devPath struct {
	rt   *gpuRuntime
	pe   int
	base device.Ptr
}

func (p devPath) put(off uint64, src []byte) error {
	if len(src) == 0 {
		return nil
	}
	return p.rt.w.dev.CopyHtoD(p.base.Add(int(off)), src)
}

func (p devPath) get(off uint64, dst []byte) error {
	if len(dst) == 0 {
		return nil
	}
	return p.rt.w.dev.CopyDtoH(dst, p.base.Add(int(off)))
}

func (p devPath) amo(op nic.AMOOp, width int, off uint64, value, compare uint64) (uint64, error) {
	if p.rt.internal == nil {
		return 0, fmt.Errorf("%w: device AMO before the runtime started", device.ErrNotSupported)
	}
	return p.rt.hostAMO(p.base.Add(int(off)), op, width, value, compare)
}

// putSignal: the synchronous copy has completed before the signal's AMO is launched.
func (p devPath) putSignal(off uint64, src []byte, sig uint64, op SignalOp, value uint64) error {
	if err := p.put(off, src); err != nil {
		return err
	}
	kind := nic.AMOSet
	if op == SignalAdd {
		kind = nic.AMOFetchAdd
	}
	_, err := p.amo(kind, 8, sig, value, 0)
	return err
}

// Device returns this PE's device address of s, for kernel arguments (its heap as kernels on this
// PE's GPU address it). On the host backend it is the host address of s.
func (s Sym[T]) Device() device.Ptr {
	if s.w == nil || s.w.closed.Load() {
		return 0
	}
	if s.w.gpu != nil && s.w.gpu.heapDev != 0 {
		return s.w.gpu.heapDev.Add(int(s.off))
	}
	return s.w.heapBase.Add(int(s.off))
}

// Device returns this PE's device address of m.
func (m Mem) Device() device.Ptr {
	if m.w == nil || m.w.closed.Load() {
		return 0
	}
	if m.w.gpu != nil && m.w.gpu.heapDev != 0 {
		return m.w.gpu.heapDev.Add(int(m.off))
	}
	return m.w.heapBase.Add(int(m.off))
}

func debugf(format string, args ...any) {
	if env.Debugging(env.LevelInfo) {
		fmt.Fprintf(os.Stderr, "roxamen: "+format+"\n", args...)
	}
}
