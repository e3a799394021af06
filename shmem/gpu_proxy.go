package shmem

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/roxamen/roxamen/device"
	"github.com/roxamen/roxamen/nic"
)

// gpuProxy drains this PE's command ring (one goroutine on a locked OS thread). Copy-engine work
// (puts, gets and put-with-signals to mapped PEs) goes onto one dedicated stream as async copies;
// NIC-path work goes through the transport. Completion is reported in ticket order by the stream
// itself: after each batch the proxy enqueues a copy of the batch's last ticket+1 into the
// device-local completion mirror and from there into the ring header, so a quiet on the device
// returns only once every copy before it in the stream has landed, and the proxy never waits for
// the copy engine.
type gpuProxy struct {
	rt     *gpuRuntime
	ce     device.Stream
	slots  []uint64 // completion values (host-pinned), slot t&(cap-1)
	slotDv device.Ptr
	descs  []nic.Desc
	stage  []byte // NIC path: device bytes pass through here
	stats  proxyStats
	ceEnd  uint64 // the ticket end the last completion enqueued on the copy-engine stream carries
}

// proxyStats are counters for ROX_DEBUG: Module.Sync logs what changed while its kernels ran.
type proxyStats struct {
	batches, descs, ceBytes, flowWaits atomic.Uint64
	busyNs, enqueueNs, flowNs          atomic.Uint64
}

func (s *proxyStats) String() string {
	return fmt.Sprintf("batches=%d descs=%d ce_bytes=%d busy=%v enqueue=%v flow_waits=%d flow_wait=%v",
		s.batches.Load(), s.descs.Load(), s.ceBytes.Load(), time.Duration(s.busyNs.Load()),
		time.Duration(s.enqueueNs.Load()), s.flowWaits.Load(), time.Duration(s.flowNs.Load()))
}

func (s *proxyStats) reset() {
	for _, c := range []*atomic.Uint64{&s.batches, &s.descs, &s.ceBytes, &s.flowWaits, &s.busyNs, &s.enqueueNs, &s.flowNs} {
		c.Store(0)
	}
}

func (rt *gpuRuntime) newProxy() (*gpuProxy, error) {
	ce, err := rt.w.dev.NewStream()
	if err != nil {
		return nil, fmt.Errorf("creating the copy-engine stream: %w", err)
	}
	off := ctrlResults + 8*rt.ringCap
	return &gpuProxy{
		rt:     rt,
		ce:     ce,
		slots:  unsafe.Slice((*uint64)(unsafe.Pointer(&rt.ctrl.Bytes[off])), rt.ringCap),
		slotDv: rt.ctrl.Dev.Add(off),
		descs:  make([]nic.Desc, 256),
	}, nil
}

func (p *gpuProxy) close() {
	if p.ce != nil {
		_ = p.ce.Synchronize()
		_ = p.ce.Destroy()
		p.ce = nil
	}
}

// idleSpin is how long the proxy polls without sleeping after its last descriptor.
const idleSpin = 2 * time.Millisecond

func (p *gpuProxy) run() {
	defer p.rt.wg.Done()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	rt := p.rt
	last := time.Now()
	polls := 0
	for {
		first, n := rt.ring.Poll(p.descs)
		if n == 0 {
			select {
			case <-rt.stop:
				return
			default:
			}
			polls++
			if polls&255 == 0 && time.Since(last) > idleSpin {
				time.Sleep(20 * time.Microsecond)
			} else if polls&15 == 0 {
				runtime.Gosched()
			}
			continue
		}
		polls = 0
		last = time.Now()
		err := p.execute(first, p.descs[:n])
		p.stats.batches.Add(1)
		p.stats.descs.Add(uint64(n))
		p.stats.busyNs.Add(uint64(time.Since(last)))
		if err != nil {
			code := nic.RingErrInput
			if _, ok := err.(remoteErr); ok {
				code = nic.RingErrRemote
			}
			rt.ring.SetError(code, err)
			rt.abort(abortProxy)
			debugf("PE %d: proxy: %v", rt.w.pe, err)
			// Keep draining so that producers waiting for a slot see the error, not a full ring.
			for {
				select {
				case <-rt.stop:
					return
				default:
				}
				rt.ring.Poll(p.descs)
				time.Sleep(50 * time.Microsecond)
			}
		}
	}
}

type remoteErr struct{ error }

// execute runs descriptors first.. and enqueues their completion.
func (p *gpuProxy) execute(first uint64, ds []nic.Desc) error {
	rt := p.rt
	w := rt.w
	nicQuiet, usedCE := false, false
	for i := range ds {
		d := &ds[i]
		t := first + uint64(i)
		// At most ringCap-1 tickets between enqueued and completed: the completion slots are reused.
		if err := p.waitCompleted(t + 2 - uint64(rt.ringCap)); err != nil {
			return err
		}
		if d.Op == nic.OpNop || d.Op == nic.OpFence && w.transport == nil {
			continue
		}
		if d.Op == nic.OpQuiet {
			nicQuiet = nicQuiet || w.transport != nil
			continue
		}
		if d.Op == nic.OpFence {
			for _, pe := range w.remotes {
				if err := w.transport.Fence(pe); err != nil {
					return remoteErr{fmt.Errorf("ticket %d: fence to PE %d: %w", t, pe, err)}
				}
			}
			continue
		}
		pe := int(d.PE)
		if pe < 0 || pe >= w.npes {
			return fmt.Errorf("ticket %d (%v): target PE %d, want 0 <= pe < %d", t, d, pe, w.npes)
		}
		size := d.Size
		if d.Op == nic.OpAMO {
			size = uint64(d.Width())
		}
		if d.Dst > uint64(w.heapSize) || size > uint64(w.heapSize)-d.Dst {
			return fmt.Errorf("ticket %d (%v): heap range [%d, %d) is outside the %d-byte symmetric heap", t, d, d.Dst, d.Dst+size, w.heapSize)
		}
		if d.Op == nic.OpPutSignal && (d.Aux > uint64(w.heapSize)-8 || d.Aux%8 != 0) {
			return fmt.Errorf("ticket %d (%v): signal at heap offset %d is outside the heap or misaligned", t, d, d.Aux)
		}
		var err error
		if base := rt.peerBase[pe]; base != 0 {
			err = p.copyEngine(base, d)
			usedCE = true
		} else {
			err = p.viaNIC(pe, d)
			nicQuiet = nicQuiet || d.Op == nic.OpPut || d.Op == nic.OpPutSignal || d.Op == nic.OpAMO
		}
		if err != nil {
			return fmt.Errorf("ticket %d (%v): %w", t, d, err)
		}
	}
	if nicQuiet {
		ctx, cancel := context.WithTimeout(context.Background(), w.timeout)
		err := w.transport.Quiet(ctx, -1)
		cancel()
		if err != nil {
			return remoteErr{fmt.Errorf("completing NIC operations: %w", err)}
		}
	}
	end := first + uint64(len(ds))
	if rt.cpuCompletion && !usedCE && rt.ring.Completed() >= p.ceEnd {
		// Everything before this batch has completed and this batch is done: no device command.
		rt.ring.SetCompleted(end)
		return nil
	}
	p.ceEnd = end
	slot := end & uint64(rt.ringCap-1)
	atomic.StoreUint64(&p.slots[slot], end)
	if err := p.ce.CopyAsync(rt.misc.Add(64), p.slotDv.Add(int(8*slot)), 8); err != nil {
		return err
	}
	return p.ce.CopyAsync(rt.ringMem.Dev.Add(nic.RingCompletedOffset), rt.misc.Add(64), 8)
}

// waitCompleted waits until the ring's completed count reaches target.
func (p *gpuProxy) waitCompleted(target uint64) error {
	if int64(target) <= 0 || p.rt.ring.Completed() >= target {
		return nil
	}
	t0 := time.Now()
	defer func() {
		p.stats.flowWaits.Add(1)
		p.stats.flowNs.Add(uint64(time.Since(t0)))
	}()
	for n := 0; p.rt.ring.Completed() < target; n++ {
		select {
		case <-p.rt.stop:
			return fmt.Errorf("the proxy stopped with %d descriptors in flight", target-p.rt.ring.Completed())
		default:
		}
		if n > 64 {
			time.Sleep(5 * time.Microsecond)
		}
	}
	return nil
}

// copyEngine issues d to a PE whose heap is mapped at base, on the copy-engine stream.
func (p *gpuProxy) copyEngine(base device.Ptr, d *nic.Desc) error {
	rt := p.rt
	dst := base.Add(int(d.Dst))
	switch d.Op {
	case nic.OpPut, nic.OpPutSignal:
		if d.Size > 0 {
			t0 := time.Now()
			err := p.ce.CopyAsync(dst, device.Ptr(d.Src), int(d.Size))
			p.stats.enqueueNs.Add(uint64(time.Since(t0)))
			p.stats.ceBytes.Add(d.Size)
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
			return p.ce.Launch(rt.amoFn, device.D1(1), device.D1(1), 0, base.Add(int(d.Aux)), uint32(kind), uint32(8), d.Value, uint64(0), device.Ptr(0))
		}
		return nil
	case nic.OpGet:
		if d.Size == 0 {
			return nil
		}
		return p.ce.CopyAsync(device.Ptr(d.Src), dst, int(d.Size))
	case nic.OpAMO:
		if err := nic.CheckAMO(nic.AMOOp(d.Kind()), d.Width(), d.Dst); err != nil {
			return err
		}
		return p.ce.Launch(rt.amoFn, device.D1(1), device.D1(1), 0, dst, uint32(d.Kind()), uint32(d.Width()), d.Value, d.Aux, device.Ptr(d.Src))
	}
	return fmt.Errorf("unknown operation %v", d.Op)
}

// hostView returns the host bytes of a device address range that lies in host-mapped memory this
// runtime owns (the heap in NIC mode, the ring results), or nil.
func (p *gpuProxy) hostView(addr uint64, n uint64) []byte {
	for _, hb := range []device.HostBuffer{p.rt.hostHeap, p.rt.ctrl} {
		if len(hb.Bytes) == 0 {
			continue
		}
		lo := uint64(hb.Dev)
		if addr >= lo && addr-lo <= uint64(len(hb.Bytes)) && n <= uint64(len(hb.Bytes))-(addr-lo) {
			return hb.Bytes[addr-lo : addr-lo+n]
		}
	}
	return nil
}

// viaNIC runs d through the transport, synchronously: device bytes are staged through the host.
func (p *gpuProxy) viaNIC(pe int, d *nic.Desc) error {
	w := p.rt.w
	t := w.transport
	if t == nil {
		return fmt.Errorf("PE %d is not mapped here and there is no transport", pe)
	}
	local := func(n uint64) ([]byte, bool) {
		if b := p.hostView(d.Src, n); b != nil {
			return b, true
		}
		if uint64(cap(p.stage)) < n {
			p.stage = make([]byte, n)
		}
		return p.stage[:n], false
	}
	switch d.Op {
	case nic.OpPut, nic.OpPutSignal:
		b, direct := local(d.Size)
		if !direct && d.Size > 0 {
			if err := w.dev.CopyDtoH(b, device.Ptr(d.Src)); err != nil {
				return err
			}
		}
		var err error
		if d.Op == nic.OpPut {
			err = t.Put(pe, d.Dst, b)
		} else {
			err = t.PutSignal(pe, d.Dst, b, d.Aux, nic.SignalOp(d.Kind()), d.Value)
		}
		if err == nil && !direct {
			// The staging buffer is reused next: the transport must be done with it.
			ctx, cancel := context.WithTimeout(context.Background(), w.timeout)
			err = t.Quiet(ctx, pe)
			cancel()
		}
		if err != nil {
			return remoteErr{err}
		}
		return nil
	case nic.OpGet:
		b, direct := local(d.Size)
		if err := t.Get(pe, d.Dst, b); err != nil {
			return remoteErr{err}
		}
		if !direct && d.Size > 0 {
			return w.dev.CopyHtoD(device.Ptr(d.Src), b)
		}
		return nil
	case nic.OpAMO:
		old, err := t.AMO(pe, nic.AMOOp(d.Kind()), d.Width(), d.Dst, d.Value, d.Aux)
		if err != nil {
			return remoteErr{err}
		}
		if d.Src == 0 {
			return nil
		}
		if b := p.hostView(d.Src, 8); b != nil {
			atomic.StoreUint64((*uint64)(unsafe.Pointer(&b[0])), old)
			return nil
		}
		var v [8]byte
		*(*uint64)(unsafe.Pointer(&v[0])) = old
		return w.dev.CopyHtoD(device.Ptr(d.Src), v[:d.Width()])
	}
	return fmt.Errorf("unknown operation %v", d.Op)
}
