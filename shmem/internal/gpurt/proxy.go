package gpurt

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/roxamen/roxamen/device"
	"github.com/roxamen/roxamen/nic"
)

// gpuProxy is this PE's nic.Proxy over its command ring, with the GPU's routes: the copy engine
// (ceRoute) for PEs whose heaps are mapped here, and the transport for the others, their device
// bytes staged through the host (deviceLocal). Batching, per-PE order across fences, completion
// in ticket order, error write-back and the window that keeps completion slots from being reused
// too early are the proxy's; the copy-engine specifics (the stream, the completion copies) are
// ceRoute's.
type gpuProxy struct {
	px    *nic.Proxy
	ce    *ceRoute
	stats proxyStats
}

// proxyStats are counters for ROX_DEBUG: Module.Sync logs what changed while its kernels ran.
type proxyStats struct {
	nic.ProxyStats
	ceBytes, enqueueNs atomic.Uint64
}

func (s *proxyStats) String() string {
	return fmt.Sprintf("batches=%d descs=%d ce_bytes=%d busy=%v enqueue=%v flow_waits=%d flow_wait=%v",
		s.Batches.Load(), s.Descs.Load(), s.ceBytes.Load(), time.Duration(s.BusyNs.Load()),
		time.Duration(s.enqueueNs.Load()), s.WindowWaits.Load(), time.Duration(s.WindowNs.Load()))
}

func (s *proxyStats) reset() {
	s.ProxyStats.Reset()
	s.ceBytes.Store(0)
	s.enqueueNs.Store(0)
}

// idleSpin is how long the proxy polls without sleeping after its last descriptor (device
// producers cannot ring its bell).
const idleSpin = 2 * time.Millisecond

// startProxy starts the proxy over rt.ring; rt.PeerBase, rt.ctrl, rt.misc, rt.amoFn and
// w.Transport() are in place.
func (rt *Runtime) startProxy() error {
	w := rt.w
	ce, err := rt.dev.NewStream()
	if err != nil {
		return fmt.Errorf("creating the copy-engine stream: %w", err)
	}
	p := &gpuProxy{}
	off := ctrlResults + 8*rt.ringCap
	p.ce = &ceRoute{
		rt:     rt,
		ce:     ce,
		slots:  unsafe.Slice((*uint64)(unsafe.Pointer(&rt.ctrl.Bytes[off])), rt.ringCap),
		slotDv: rt.ctrl.Dev.Add(off),
		stats:  &p.stats,
	}
	var viaNIC nic.Route = noRoute{}
	if w.Transport() != nil {
		viaNIC = nic.NewTransportRoute(w.Transport(), deviceLocal{rt}, w.Timeout())
	}
	routes := make([]nic.Route, w.NPEs())
	for pe := range routes {
		routes[pe] = viaNIC
		if rt.PeerBase[pe] != 0 {
			routes[pe] = p.ce
		}
	}
	cfg := nic.ProxyConfig{
		PE: w.PE(), NPEs: w.NPEs(), HeapSize: uint64(w.HeapSize()), Routes: routes,
		Rings: append([]*nic.Ring{rt.ring}, rt.ctxs.ringList()...), // the default context's, then the device contexts'

		Timeout: w.Timeout(),
		// At most ringCap-1 tickets between issued and completed: the completion slots are
		// reused.
		Window:    rt.ringCap - 1,
		IdleSpin:  idleSpin,
		IdleSleep: 20 * time.Microsecond,
		Logf:      debugf, // the proxy's error names this PE
		Failed:    func(error) { rt.abort(abortProxy) },
		Stats:     &p.stats.ProxyStats,
	}
	if !rt.cpuCompletion {
		// Device waits poll the device-local mirror, which only the copy-engine stream writes.
		cfg.Completer = p.ce
	}
	if p.px, err = nic.NewProxy(cfg); err != nil {
		_ = ce.Destroy()
		return err
	}
	rt.proxy = p
	return nil
}

// stop executes what is published and stops the proxy (the ring is then closed).
func (p *gpuProxy) stop() {
	if p.px != nil {
		_ = p.px.Close()
		p.px = nil
	}
}

// close releases the copy-engine stream, after stop.
func (p *gpuProxy) close() {
	p.stop()
	if p.ce != nil && p.ce.ce != nil {
		_ = p.ce.ce.Synchronize()
		_ = p.ce.ce.Destroy()
		p.ce.ce = nil
	}
}

// ceRoute carries descriptors to PEs whose heaps are mapped here on one dedicated stream, as
// async copies (and one-thread AMO kernels). It completes batches itself: CompleteAt enqueues a
// copy of the batch's end (from a host-pinned slot per ticket, slot end&(cap-1)) into the
// device-local completion mirror and from there into the ring header, so a quiet on the device
// returns only once every copy before it in the stream has landed, and the proxy never waits for
// the copy engine.
type ceRoute struct {
	rt     *Runtime
	ce     device.Stream
	slots  []uint64 // completion values (host-pinned), slot t&(cap-1)
	slotDv device.Ptr
	stats  *proxyStats
}

// Fence: one stream executes in issue order.
func (c *ceRoute) Fence(int) error { return nil }

// Quiet waits until the stream's work has finished.
func (c *ceRoute) Quiet(ctx context.Context) error {
	for n := 0; ; n++ {
		done, err := c.ce.Query()
		if err != nil || done {
			return err
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("the copy-engine stream: %w", err)
		}
		if n < 64 {
			runtime.Gosched()
		} else {
			time.Sleep(5 * time.Microsecond)
		}
	}
}

func (c *ceRoute) CompleteAt(r *nic.Ring, upTo uint64) error {
	rt := c.rt
	if r != rt.ring {
		if i := rt.ctxs.index(r); i >= 0 {
			return rt.ctxs.completeAt(c.ce, i, upTo)
		}
		return errors.New("the copy engine completes only this PE's rings")
	}
	slot := upTo & uint64(rt.ringCap-1)
	atomic.StoreUint64(&c.slots[slot], upTo)
	if err := c.ce.CopyAsync(rt.misc.Add(64), c.slotDv.Add(int(8*slot)), 8); err != nil {
		return err
	}
	return c.ce.CopyAsync(rt.ringMem.Dev.Add(nic.RingCompletedOffset), rt.misc.Add(64), 8)
}

// Issue enqueues d (validated by the proxy) to a PE whose heap is mapped here.
func (c *ceRoute) Issue(d *nic.Desc) error {
	rt := c.rt
	base := rt.PeerBase[d.PE]
	dst := base.Add(int(d.Dst))
	switch d.Op {
	case nic.OpPut, nic.OpPutSignal:
		if d.Size > 0 {
			t0 := time.Now()
			err := c.ce.CopyAsync(dst, device.Ptr(d.Src), int(d.Size))
			c.stats.enqueueNs.Add(uint64(time.Since(t0)))
			c.stats.ceBytes.Add(d.Size)
			if err != nil {
				return err
			}
		}
		if d.Op == nic.OpPutSignal {
			// Stream order: the signal's AMO runs after the copy has landed.
			kind := nic.AMOSet
			if nic.SignalOp(d.Kind()) == nic.SignalAdd {
				kind = nic.AMOFetchAdd
			}
			if c.byHost(d) {
				return c.hostAMO(d.Aux, kind, 8, d.Value, 0, 0)
			}
			return c.ce.Launch(rt.amoFn, device.D1(1), device.D1(1), 0, base.Add(int(d.Aux)), uint32(kind), uint32(8), d.Value, uint64(0), device.Ptr(0))
		}
		return nil
	case nic.OpGet:
		if d.Size == 0 {
			return nil
		}
		return c.ce.CopyAsync(device.Ptr(d.Src), dst, int(d.Size))
	case nic.OpAMO:
		if c.byHost(d) {
			return c.hostAMO(d.Dst, nic.AMOOp(d.Kind()), d.Width(), d.Value, d.Aux, d.Src)
		}
		return c.ce.Launch(rt.amoFn, device.D1(1), device.D1(1), 0, dst, uint32(d.Kind()), uint32(d.Width()), d.Value, d.Aux, device.Ptr(d.Src))
	}
	return fmt.Errorf("unknown operation %v", d.Op)
}

// byHost reports whether d's read-modify-write of this PE's heap is the CPU's to apply (see
// Runtime.cpuAMOs): the transport applies remote PEs' AMOs there with CPU atomics.
func (c *ceRoute) byHost(d *nic.Desc) bool { return int(d.PE) == c.rt.w.PE() && c.rt.cpuAMOs() }

// hostAMO applies an AMO to this PE's host-mapped heap at off with a CPU atomic, after the stream's
// earlier work (a copy before a fence, or a put-with-signal's data) has landed, and stores the old
// value at the device address result (0: none). It is synchronous: the batch's completion, which
// the stream carries, comes after it.
func (c *ceRoute) hostAMO(off uint64, op nic.AMOOp, width int, value, compare uint64, result uint64) error {
	rt := c.rt
	ctx, cancel := context.WithTimeout(context.Background(), rt.w.Timeout())
	defer cancel()
	if err := c.Quiet(ctx); err != nil {
		return err
	}
	old, err := nic.ApplyAMO(rt.hostHeap.Bytes[off:off+uint64(width)], op, width, value, compare)
	if err != nil || result == 0 {
		return err
	}
	res, err := deviceLocal{rt}.Bytes(result, width)
	if err != nil {
		return nic.Reject("result address %#x: %v", result, err)
	}
	return nic.StoreWord(res, width, old)
}

// noRoute is the route to PEs that are neither mapped here nor reachable through a transport.
type noRoute struct{}

func (noRoute) Issue(d *nic.Desc) error {
	return nic.Reject("PE %d is not mapped here and there is no transport", d.PE)
}
func (noRoute) Fence(int) error             { return nil }
func (noRoute) Quiet(context.Context) error { return nil }

// deviceLocal is the local memory of descriptors on the NIC path: device addresses. The host
// addresses the buffers this runtime maps (the heap in NIC mode, the ring results) directly; the
// NIC route stages the rest through the host.
type deviceLocal struct{ rt *Runtime }

func (l deviceLocal) Bytes(addr uint64, n int) ([]byte, error) {
	for _, hb := range []device.HostBuffer{l.rt.hostHeap, l.rt.ctrl} {
		if len(hb.Bytes) == 0 {
			continue
		}
		lo := uint64(hb.Dev)
		if addr >= lo && addr-lo <= uint64(len(hb.Bytes)) && uint64(n) <= uint64(len(hb.Bytes))-(addr-lo) {
			return hb.Bytes[addr-lo : addr-lo+uint64(n)], nil
		}
	}
	return nil, fmt.Errorf("device address %#x is not host-mapped", addr)
}

func (l deviceLocal) CopyOut(dst []byte, addr uint64) error {
	return l.rt.dev.CopyDtoH(dst, device.Ptr(addr))
}

func (l deviceLocal) CopyIn(addr uint64, src []byte) error {
	return l.rt.dev.CopyHtoD(device.Ptr(addr), src)
}
