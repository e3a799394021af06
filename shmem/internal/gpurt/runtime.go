package gpurt

import (
	"context"
	"errors"
	"fmt"
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

// Runtime is the GPU side of one PE: the runtime code object with its roxshmem_state, the
// device->host command ring and its proxy, the abort block, and the internal stream host-initiated
// atomics run on. One Runtime per PE, from New to Release.
//
// Memory it owns:
//   - ctrl (host-pinned, device-mapped): [0,64) the abort block; [64,128) the host AMO result;
//     then ring results (uint64[ringCap]) and the proxy's completion values (uint64[ringCap]).
//     The abort block is host memory so that setting it needs no device command: a command can
//     sit behind a stalled stream (measured: with a kernel spinning in one stream and more work
//     queued behind it, copies on the other streams stopped), and the abort must still land;
//   - ringMem (host-pinned, device-mapped): the command ring;
//   - misc (device memory): [0] the ticket counter, [64] the device-local completion mirror;
//   - hostHeap (host-pinned, device-mapped): this PE's heap on the NIC path (PlaceHostHeap);
//   - a BarrierBytes workspace reserved at the start of the symmetric heap.
type Runtime struct {
	w   World
	dev device.Device
	// PeerBase, per PE: its heap as this GPU addresses it; 0: reached through the NIC path.
	PeerBase []device.Ptr
	// HeapDev is this PE's heap as kernels address it (host-pinned on the NIC path).
	HeapDev  device.Ptr
	hostHeap device.HostBuffer

	runtimeMod device.Module
	amoFn      device.Function
	internal   device.Stream // host AMOs
	amoMu      sync.Mutex

	ctrl    device.HostBuffer
	ringMem device.HostBuffer
	ring    *nic.Ring
	ringCap int
	ctxs    *devCtxPool // the device contexts' rings (ctx.go)
	misc    device.Ptr
	state   kernels.State

	fnMu sync.Mutex
	fns  map[string]device.Function // runtime kernels by name

	modMu   sync.Mutex
	modules map[*Module]bool

	// Colls is the World's stream-collective engine, released with the runtime (streamcoll.go).
	Colls *Colls

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

// New makes w's runtime; nothing runs until Start.
func New(w World) *Runtime {
	return &Runtime{w: w, dev: w.Device(), PeerBase: make([]device.Ptr, w.NPEs()), fns: map[string]device.Function{}, modules: map[*Module]bool{}}
}

// SetPeer records that pe's heap is at base as this GPU addresses it (this PE's own, or a peer's
// mapped through IPC).
func (rt *Runtime) SetPeer(pe int, base device.Ptr) {
	rt.PeerBase[pe] = base
	if pe == rt.w.PE() {
		rt.HeapDev = base
	}
}

// Started reports whether the runtime code object is loaded (Start succeeded).
func (rt *Runtime) Started() bool { return rt != nil && rt.runtimeMod != nil }

// Start brings up the GPU side of the runtime once the heaps are mapped and the transport (if
// any) started: peer access, the runtime module and its state, the ring and its proxy, the abort
// watcher. On failure the caller releases the runtime.
func (rt *Runtime) Start(ctx context.Context) error {
	w := rt.w
	d := rt.dev
	info := d.Info()

	// Peer access to every PE of this node whose heap is mapped here.
	all, err := w.Allgather(ctx, []byte(info.PCIBusID))
	if err != nil {
		return fmt.Errorf("exchanging PCI bus ids: %w", err)
	}
	for pe, bus := range all {
		if pe == w.PE() || rt.PeerBase[pe] == 0 || string(bus) == info.PCIBusID {
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
	rt.cpuCompletion = w.Transport() != nil
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
	boff, err := w.Reserve(kernels.BarrierBytes)
	if err != nil {
		return fmt.Errorf("reserving the device barrier workspace: %w", err)
	}

	thr, _ := env.CEThreshold.Size()
	s := &rt.state
	s.Magic, s.Version = kernels.StateMagic, kernels.StateVersion
	if w.Bypass() {
		s.Flags |= kernels.FlagBypass
	}
	if rt.cpuAMOs() {
		s.Flags |= kernels.FlagHostAMO
	}
	s.MyPE, s.NPEs = int32(w.PE()), int32(w.NPEs())
	s.HeapBase, s.HeapSize = uint64(rt.HeapDev), uint64(w.HeapSize())
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
	if w.NPEs() > kernels.MaxPEs {
		return fmt.Errorf("%d PEs: the device state holds at most %d", w.NPEs(), kernels.MaxPEs)
	}
	for pe, b := range rt.PeerBase {
		s.PeerBase[pe] = uint64(b)
	}
	if rt.sdma, err = rt.startSDMA(uint64(thr)); err != nil {
		return err
	}
	if err := rt.startCtxs(); err != nil {
		return err
	}
	if err := rt.FillState(rt.runtimeMod); err != nil {
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
func (rt *Runtime) cpuAMOs() bool {
	return rt.hostHeap.Bytes != nil && !rt.dev.Info().HostNativeAtomics
}

// PlaceHostHeap puts this PE's heap (as kernels and the transport see it) in host-pinned,
// device-mapped memory and returns its host view. Init calls it before the transport starts, on
// GPU backends that need one: the transport's target side reads and writes the heap from the host.
func (rt *Runtime) PlaceHostHeap() ([]byte, error) {
	size := rt.w.HeapSize()
	hb, err := rt.dev.AllocHost(int(size))
	if err != nil {
		return nil, fmt.Errorf("allocating a %d-byte host-mapped heap for the NIC path: %w", size, err)
	}
	clear(hb.Bytes)
	rt.hostHeap = hb
	rt.HeapDev = hb.Dev
	rt.PeerBase[rt.w.PE()] = hb.Dev
	return hb.Bytes, nil
}

// HostHeap is the host view of the heap PlaceHostHeap made; nil where there is none.
func (rt *Runtime) HostHeap() []byte { return rt.hostHeap.Bytes }

// SetTeamTable points the state at the device team table (teams.go) and relinks the runtime
// module.
func (rt *Runtime) SetTeamTable(p device.Ptr) error {
	rt.state.Teams = uint64(p)
	if rt.runtimeMod == nil {
		return nil
	}
	return rt.FillState(rt.runtimeMod)
}

// FillState writes this PE's roxshmem_state into module m.
func (rt *Runtime) FillState(m device.Module) error {
	p, size, err := m.Global(kernels.StateSymbol)
	if err != nil {
		return fmt.Errorf("finding %s in the module: %w", kernels.StateSymbol, err)
	}
	return rt.FillStateAt(p, size)
}

// FillStateAt fills a roxshmem_state of size bytes at device address p (a module's global that
// the program found itself: its own loaded module, or a symbol of its runtime-API kernels).
func (rt *Runtime) FillStateAt(p device.Ptr, size int) error {
	b := kernels.StateBytes(&rt.state)
	if size != len(b) {
		return fmt.Errorf("the module's %s is %d bytes, this runtime's %d: the module was built against another version of roxshmem.h", kernels.StateSymbol, size, len(b))
	}
	return rt.dev.CopyHtoD(p, b)
}

// watch sets the abort word when the job fails, so that every device wait returns.
func (rt *Runtime) watch() {
	defer rt.wg.Done()
	select {
	case <-rt.w.Failed():
		rt.abort(abortPeerFailed)
	case <-rt.stop:
	}
}

// abort sets the abort word (the first reason wins). The copy runs on the device's private
// non-blocking stream, next to kernels that may be spinning in a wait.
func (rt *Runtime) abort(reason uint64) {
	if len(rt.ctrl.Bytes) == 0 || !rt.aborted.CompareAndSwap(0, reason) {
		return
	}
	atomic.StoreUint64((*uint64)(unsafe.Pointer(&rt.ctrl.Bytes[ctrlAbort])), reason)
}

var abortReasons = map[uint64]string{
	abortPeerFailed: "a PE failed", abortProxy: "the proxy failed", abortShutdown: "the World was finalized",
	abortCanceled: "a host wait gave up",
}

// AbortReason names the reason a recorded abort word holds (kernels.DetailAbortWord).
func AbortReason(reason uint64) string { return abortReasons[reason] }

// Record returns what device code recorded in the abort block (first: the first record, count:
// how many; kernels.DecodeAbortRecord reads it) and the rings' failures; ok is false before Start.
func (rt *Runtime) Record() (first, count uint64, ringErrs []error, ok bool) {
	if len(rt.ctrl.Bytes) == 0 {
		return 0, 0, nil, false
	}
	first = atomic.LoadUint64((*uint64)(unsafe.Pointer(&rt.ctrl.Bytes[ctrlAbort+8])))
	count = atomic.LoadUint64((*uint64)(unsafe.Pointer(&rt.ctrl.Bytes[ctrlAbort+16])))
	return first, count, []error{rt.ring.Err(), rt.ctxs.err()}, true
}

// ClearRecord forgets a recorded device failure (after it was reported).
func (rt *Runtime) ClearRecord() {
	atomic.StoreUint64((*uint64)(unsafe.Pointer(&rt.ctrl.Bytes[ctrlAbort+8])), 0)
	atomic.StoreUint64((*uint64)(unsafe.Pointer(&rt.ctrl.Bytes[ctrlAbort+16])), 0)
}

// Wait waits for st's work without hanging: when the job fails or ctx ends it sets the abort word
// (device waits return) and waits at most the World's timeout more. aborted says whether it had
// to; the caller then reports what device code recorded (Record). call names the waiting call in
// ROX_DEBUG's proxy statistics.
func (rt *Runtime) Wait(ctx context.Context, call string, st device.Stream) (aborted bool, err error) {
	if ctx == nil {
		ctx = context.Background()
	}
	w := rt.w
	var deadline time.Time
	sleep := time.Microsecond
	for n := 0; ; n++ {
		done, err := st.Query()
		if err != nil {
			return false, errorf(KindPEFailed, err, "a kernel failed on %s", rt.dev.Info().String())
		}
		if done {
			break
		}
		if deadline.IsZero() {
			var why uint64
			if w.Err() != nil {
				why = abortPeerFailed
			} else if ctx.Err() != nil {
				why = abortCanceled
			}
			if why != 0 {
				rt.abort(why)
				deadline = time.Now().Add(w.Timeout())
			}
		} else if time.Now().After(deadline) {
			return true, errorf(KindTimeout, errors.Join(w.Err(), ctx.Err()), "device work did not stop within %v (ROX_TIMEOUT) of the abort", w.Timeout())
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
		debugf("PE %d: %s: proxy %v", w.PE(), call, &rt.proxy.stats)
		rt.proxy.stats.reset()
	}
	return !deadline.IsZero(), nil
}

// Function returns a runtime kernel by name.
func (rt *Runtime) Function(name string) (device.Function, error) {
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

// LaunchAMO enqueues one AMO (roxk_amo, no result) of width 8 at addr on st.
func (rt *Runtime) LaunchAMO(st device.Stream, addr device.Ptr, op nic.AMOOp, value uint64) error {
	return st.Launch(rt.amoFn, device.D1(1), device.D1(1), 0, addr, uint32(op), uint32(8), value, uint64(0), device.Ptr(0))
}

// HostAMO runs one AMO on the device word at addr from the host and returns the old value.
func (rt *Runtime) HostAMO(addr device.Ptr, op nic.AMOOp, width int, value, compare uint64) (uint64, error) {
	if rt.internal == nil {
		return 0, fmt.Errorf("%w: device AMO before the runtime started", device.ErrNotSupported)
	}
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

// Release stops and frees what Start set up, the stream collectives' object and every module
// loaded through the runtime. Any kernel still waiting is aborted first so that nothing hangs.
func (rt *Runtime) Release() {
	rt.abort(abortShutdown)
	if rt.proxy != nil {
		rt.proxy.stop()
	}
	if rt.stop != nil {
		close(rt.stop)
		rt.wg.Wait()
		rt.stop = nil
	}
	d := rt.dev
	rt.Colls.Release()
	rt.modMu.Lock()
	for m := range rt.modules {
		_ = m.Mod.Unload()
		_ = m.Stream.Destroy()
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
	for _, hb := range []device.HostBuffer{rt.ringMem, rt.ctrl, rt.hostHeap} {
		if len(hb.Bytes) != 0 {
			_ = d.FreeHost(hb)
		}
	}
	rt.runtimeMod, rt.internal, rt.misc = nil, nil, 0
	rt.ringMem, rt.ctrl, rt.hostHeap = device.HostBuffer{}, device.HostBuffer{}, device.HostBuffer{}
}

// State returns a copy of the roxshmem_state the runtime links into every module.
func (rt *Runtime) State() kernels.State { return rt.state }

// RingState describes the command ring and the proxy's counters from host memory only (a device
// call may be what hangs), for a watchdog; "" before Start.
func (rt *Runtime) RingState() string {
	if rt == nil || rt.ring == nil || rt.proxy == nil {
		return ""
	}
	return fmt.Sprintf("ring tail %d completed %d err %v; proxy %v", rt.ring.Tail(), rt.ring.Completed(), rt.ring.Err(), &rt.proxy.stats)
}
