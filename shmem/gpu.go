package shmem

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/roxamen/roxamen/device"
	"github.com/roxamen/roxamen/device/cuda"
	"github.com/roxamen/roxamen/internal/env"
	"github.com/roxamen/roxamen/kernels"
	"github.com/roxamen/roxamen/nic"
	"github.com/roxamen/roxamen/shmem/internal/gpurt"
)

// The GPU side of a World lives in package gpurt (the runtime module, the ring and its proxy, the
// abort block, modules, the device team table, the stream collectives' engine). This file is the
// World's side of it: what gpurt needs of the World (worldHost), the paths to heaps in device
// memory, and the errors callers see.

// worldHost is the World as gpurt sees it.
type worldHost struct{ w *World }

func (h worldHost) PE() int                  { return h.w.pe }
func (h worldHost) NPEs() int                { return h.w.npes }
func (h worldHost) Device() device.Device    { return h.w.dev }
func (h worldHost) HeapSize() int64          { return h.w.heapSize }
func (h worldHost) Timeout() time.Duration   { return h.w.timeout }
func (h worldHost) Bypass() bool             { return h.w.ordering == Bypass }
func (h worldHost) Transport() nic.Transport { return h.w.transport }
func (h worldHost) Failed() <-chan struct{}  { return h.w.boot.Failed() }
func (h worldHost) Err() error               { return h.w.failed() }
func (h worldHost) Allgather(ctx context.Context, b []byte) ([][]byte, error) {
	return h.w.boot.Allgather(ctx, b)
}

func (h worldHost) Reserve(size uint64) (uint64, error) {
	h.w.allocMu.Lock()
	off, err := h.w.heap.Alloc(size, 64)
	h.w.allocMu.Unlock()
	if err != nil {
		return 0, err
	}
	return off, h.w.zero("Init", off, int(size))
}

func (h worldHost) Zero(off uint64, size int) error { return h.w.zero("Destroy", off, size) }

// rtKinds maps gpurt's error kinds to the World's.
var rtKinds = map[gpurt.Kind]error{
	gpurt.KindPEFailed: ErrPEFailed, gpurt.KindTimeout: ErrTimeout, gpurt.KindBadArgument: ErrBadArgument,
	gpurt.KindNoMemory: ErrOutOfMemory, gpurt.KindTeamDestroyed: ErrTeamDestroyed, gpurt.KindNotInTeam: ErrNotInTeam,
}

// rtError turns an error of gpurt into call's *Error; an error gpurt did not classify is of kind
// fallback.
func (w *World) rtError(call string, fallback error, err error) *Error {
	var e *gpurt.Error
	if errors.As(err, &e) {
		return w.mpsFault(&Error{Call: call, PE: w.pe, Kind: rtKinds[e.Kind], Detail: e.Detail, Err: e.Err})
	}
	return w.mpsFault(&Error{Call: call, PE: w.pe, Kind: fallback, Err: err})
}

// stickyFaults are the CUDA statuses of a fault that leaves the context unusable (cuda.h: an
// illegal address, a launch timeout, an assert, a stack error, an illegal instruction, a
// misaligned address, an invalid address space or PC, a failed launch) and of an MPS client the
// server tore down. Under MPS every client of the server gets them from one client's fault.
var stickyFaults = map[cuda.Result]bool{700: true, 702: true, 710: true, 714: true, 715: true, 716: true,
	717: true, 718: true, 719: true, 810: true}

// mpsLogTries and mpsLogWait bound the wait for the MPS server to log a fault that its clients
// already see (it logs it a moment after it fails their contexts).
const (
	mpsLogTries = 5
	mpsLogWait  = 50 * time.Millisecond
)

// mpsFault names the PE whose kernel faulted in e, a device call's failure, where e's cause is a
// sticky fault and this PE is a client of a CUDA MPS server: the server fails every client's
// context with one client's fault, so this PE's own status says nothing of whose it was, but the
// server's log names the process (mpslog). e is returned, changed where the log names a PE.
func (w *World) mpsFault(e *Error) *Error {
	var r cuda.Result
	if w.mps == nil || e.Err == nil || !errors.As(e.Err, &r) || !stickyFaults[r] {
		return e
	}
	pids := make(map[int]int, len(w.pids))
	for pe, pid := range w.pids {
		pids[pid] = pe
	}
	for try := 0; ; try++ {
		if pe, line, ok := w.mps.FaultingClient(pids); ok {
			what := fmt.Sprintf("PE %d's kernel faulted (the CUDA MPS server's log: %s); this PE's context was torn down with it", pe, line)
			if pe == w.pe {
				what = fmt.Sprintf("this PE's kernel faulted (the CUDA MPS server's log: %s); every PE's context was torn down with it", line)
			}
			if e.Detail != "" {
				what += ": " + e.Detail
			}
			e.Detail = what
			return e
		}
		if try == mpsLogTries {
			return e
		}
		time.Sleep(mpsLogWait)
	}
}

func (w *World) gpuRT() *gpurt.Runtime {
	if w.gpu == nil {
		w.gpu = gpurt.New(worldHost{w})
	}
	return w.gpu
}

// devicePath reaches pe's heap at base, a device address (this PE's own heap or a peer's mapped
// through IPC): host puts and gets are synchronous copies, AMOs a one-thread kernel.
func (w *World) devicePath(pe int, base device.Ptr) path {
	rt := w.gpuRT()
	rt.SetPeer(pe, base)
	return devPath{rt: rt, dev: w.dev, base: base}
}

// placeHostHeap puts this PE's heap in host-pinned, device-mapped memory (the NIC path on a GPU).
func (w *World) placeHostHeap() error {
	local, err := w.gpuRT().PlaceHostHeap()
	if err != nil {
		return err
	}
	w.local = local
	w.peers[w.pe] = w.local
	w.paths[w.pe] = mapped(w.local)
	return nil
}

// startDevice brings up the GPU side of the runtime once the heaps are mapped and the transport
// started: peer access, the runtime module and its state, the ring and its proxy.
func (w *World) startDevice(ctx context.Context) error {
	if err := w.gpuRT().Start(ctx); err != nil {
		w.stopDevice()
		return err
	}
	return nil
}

// stopDevice releases what startDevice set up. Any kernel still waiting is aborted first so that
// nothing hangs.
func (w *World) stopDevice() {
	if w.gpu == nil {
		return
	}
	if w.gpu.HostHeap() != nil {
		w.local = nil
	}
	w.gpu.Release()
	w.dteams.Release()
	w.gpu = nil
}

// deviceError reports what device code recorded (an abandoned wait, a bad PE or address) and
// the rings' failure, if any; nil when all is well.
func (w *World) deviceError(call string) error {
	first, count, ringErrs, ok := w.gpu.Record()
	if !ok {
		return nil
	}
	cause := w.failed()
	for _, err := range ringErrs {
		if err != nil {
			cause = errors.Join(cause, err)
		}
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
		k, d := w.dteams.Describe(int(int32(r.Detail)))
		kind, detail = rtKinds[k], d
	case kernels.CallBadCtx:
		kind, detail = ErrBadArgument, fmt.Sprintf("a kernel used device context %d, which names no live context (destroyed, or never created: roxshmem_ctx_create hands out 1..%d)", int32(r.Detail), gpurt.DeviceContexts)
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
			detail += ": " + gpurt.AbortReason(uint64(r.Detail&0xffff))
		} else if r.Detail&kernels.DetailRingError != 0 {
			detail += ": " + nic.RingErrCode(r.Detail&0xffff).String()
		}
	}
	if count > 1 {
		detail += fmt.Sprintf(" (%d device calls recorded a failure)", count)
	}
	return &Error{Call: call, PE: w.pe, Kind: kind, Detail: detail, Err: cause}
}

// waitStream waits for st's work without hanging (gpurt's Runtime.Wait) and reports what device
// code recorded, naming the stream-ordered calls enqueued on st since its last sync.
func (w *World) waitStream(ctx context.Context, call string, st device.Stream) error {
	if ctx == nil {
		ctx = context.Background()
	}
	aborted, err := w.gpu.Wait(ctx, call, st)
	if err != nil {
		return w.rtError(call, ErrPEFailed, err)
	}
	if err := w.deviceError(call); err != nil {
		w.gpu.ClearRecord()
		if e, ok := err.(*Error); ok && w.scoll != nil {
			e.Detail += " (" + w.scoll.TakePending(st) + ")"
		}
		return err
	}
	if w.scoll != nil {
		w.scoll.TakePending(st)
	}
	if !aborted {
		return nil
	}
	return &Error{Call: call, PE: w.pe, Kind: ErrPEFailed, Detail: "device work was aborted", Err: errors.Join(w.failed(), ctx.Err())}
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
		return w.mpsFault(&Error{Call: call, PE: w.pe, Kind: ErrPEFailed, Detail: fmt.Sprintf("zeroing %d bytes at heap offset %d", size, off), Err: err})
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
		return w.mpsFault(&Error{Call: "Realloc", PE: w.pe, Kind: ErrPEFailed, Detail: fmt.Sprintf("reading %d bytes at heap offset %d", n, src), Err: err})
	}
	if err := w.dev.CopyHtoD(w.heapBase.Add(int(dst)), buf); err != nil {
		return w.mpsFault(&Error{Call: "Realloc", PE: w.pe, Kind: ErrPEFailed, Detail: fmt.Sprintf("writing %d bytes at heap offset %d", n, dst), Err: err})
	}
	return nil
}

// devPath reaches one PE's heap in device memory (this GPU's, or a peer's mapped here).
type devPath struct {
	rt   *gpurt.Runtime
	dev  device.Device
	base device.Ptr
}

func (p devPath) put(off uint64, src []byte) error {
	if len(src) == 0 {
		return nil
	}
	return p.dev.CopyHtoD(p.base.Add(int(off)), src)
}

func (p devPath) get(off uint64, dst []byte) error {
	if len(dst) == 0 {
		return nil
	}
	return p.dev.CopyDtoH(dst, p.base.Add(int(off)))
}

func (p devPath) amo(op nic.AMOOp, width int, off uint64, value, compare uint64) (uint64, error) {
	return p.rt.HostAMO(p.base.Add(int(off)), op, width, value, compare)
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
	if s.w.gpu != nil && s.w.gpu.HeapDev != 0 {
		return s.w.gpu.HeapDev.Add(int(s.off))
	}
	return s.w.heapBase.Add(int(s.off))
}

// Device returns this PE's device address of m.
func (m Mem) Device() device.Ptr {
	if m.w == nil || m.w.closed.Load() {
		return 0
	}
	if m.w.gpu != nil && m.w.gpu.HeapDev != 0 {
		return m.w.gpu.HeapDev.Add(int(m.off))
	}
	return m.w.heapBase.Add(int(m.off))
}

func debugf(format string, args ...any) {
	if env.Debugging(env.LevelInfo) {
		fmt.Fprintf(os.Stderr, "roxamen: "+format+"\n", args...)
	}
}
