package shmem

import (
	"context"
	"fmt"
	"unsafe"

	"github.com/roxamen/roxamen/device"
	"github.com/roxamen/roxamen/nic"
)

// Stream-ordered operations, in the style of nvshmemx_*_on_stream: each is enqueued on a
// device.Stream of this PE's GPU (a Module's Stream, or one from the device) and runs when the
// stream reaches it, after the work enqueued before it and before the work enqueued after it. They
// return once enqueued; synchronize the stream (or Module.Sync) to wait for them.
//
// To a PE whose heap is mapped here a put is a kernel whose blocks store into the peer's heap,
// or from onStreamCopyEngine bytes a copy-engine peer copy on the stream; to a PE reached
// through the NIC path it is a one-block kernel that hands it to the proxy.

func (w *World) streamCheck(call string, st device.Stream) error {
	if err := w.check(call); err != nil {
		return err
	}
	if !w.gpu.Started() {
		return &Error{Call: call, PE: w.pe, Kind: ErrBadArgument, Detail: "stream-ordered operations need a GPU backend, this PE runs on " + w.dev.Info().Driver, Err: device.ErrNotSupported}
	}
	if st == nil {
		return w.errorf(call, ErrBadArgument, "nil stream")
	}
	return nil
}

func (w *World) launchOn(call string, st device.Stream, kernel string, grid, block int, args ...any) error {
	f, err := w.gpu.Function(kernel)
	if err == nil {
		err = st.Launch(f, device.D1(grid), device.D1(block), 0, args...)
	}
	if err != nil {
		return &Error{Call: call, PE: w.pe, Kind: ErrPEFailed, Detail: "enqueueing " + kernel, Err: err}
	}
	return nil
}

// PutOnStream enqueues a put of n elements from src (a device address on this PE's GPU) into
// elements [at, at+n) of s on pe (nvshmemx_putmem_on_stream). It is complete when the stream
// reaches the next operation.
func PutOnStream[T Elem](st device.Stream, s Sym[T], at int, src device.Ptr, n, pe int) error {
	off, size, err := s.target("PutOnStream", pe, at, n)
	if err != nil {
		return err
	}
	w := s.w
	if err := w.streamCheck("PutOnStream", st); err != nil {
		return err
	}
	if size == 0 {
		return nil
	}
	if base := w.gpu.PeerBase[pe]; base != 0 && size >= onStreamCopyEngine {
		if err := st.CopyAsync(base.Add(int(off)), src, size); err != nil {
			return &Error{Call: "PutOnStream", PE: w.pe, Kind: ErrPEFailed, Detail: fmt.Sprintf("copying %d bytes to PE %d", size, pe), Err: err}
		}
		return nil
	} else if base != 0 {
		// Below it the SMs move the data: a block of 1024 threads per 32 KiB, at most one per SM.
		blocks := min(max(1, (size+onStreamBlockBytes-1)/onStreamBlockBytes), max(1, w.dev.Info().Multiprocessors))
		return w.launchOn("PutOnStream", st, "roxk_putmem_blocks", blocks, 1024, w.gpu.HeapDev.Add(int(off)), src, uint64(size), int32(pe))
	}
	return w.launchOn("PutOnStream", st, "roxk_putmem_blocks", 1, 1, w.gpu.HeapDev.Add(int(off)), src, uint64(size), int32(pe))
}

// A stream-ordered put to a mapped peer takes the copy engine from onStreamCopyEngine bytes, and
// below it a kernel of one block per onStreamBlockBytes. Measured on an H200 under MPS (two PEs,
// docs/gpu-p2p-h200.md): the copy engine moved 1 MiB a call at 150 GB/s and 16 MiB at 1.5 TB/s,
// where 32 to 66 blocks put 1 MiB at 1.5 TB/s and 16 MiB at 1.5-2.7 TB/s; at 256 MiB the copy
// engine (1.74 TB/s) beat 66 blocks (1.35 TB/s).
const (
	onStreamCopyEngine = 32 << 20
	onStreamBlockBytes = 32 << 10
)

// PutSignalOnStream enqueues a put-with-signal (nvshmemx_putmem_signal_on_stream): the data lands
// on pe before the signal element sigAt of sig is updated with value by op.
func PutSignalOnStream[T Elem](st device.Stream, s Sym[T], at int, src device.Ptr, n int, sig Sym[uint64], sigAt int, value uint64, op SignalOp, pe int) error {
	const call = "PutSignalOnStream"
	off, size, err := s.target(call, pe, at, n)
	if err != nil {
		return err
	}
	w := s.w
	if err := w.streamCheck(call, st); err != nil {
		return err
	}
	if sig.w != w {
		return w.errorf(call, ErrNotSymmetric, "the signal array (heap offset %d) is not an allocation of this World", sig.off)
	}
	soff, _, err := sig.target(call, pe, sigAt, 1)
	if err != nil {
		return err
	}
	if op != SignalSet && op != SignalAdd {
		return w.errorf(call, ErrBadArgument, "signal operation %d (want SignalSet or SignalAdd)", op)
	}
	base := w.gpu.PeerBase[pe]
	if base == 0 {
		return w.launchOn(call, st, "roxk_putmem_signal", 1, 1, w.gpu.HeapDev.Add(int(off)), src, uint64(size),
			w.gpu.HeapDev.Add(int(soff)), value, int32(op), int32(pe))
	}
	if size > 0 {
		if err := st.CopyAsync(base.Add(int(off)), src, size); err != nil {
			return &Error{Call: call, PE: w.pe, Kind: ErrPEFailed, Detail: fmt.Sprintf("copying %d bytes to PE %d", size, pe), Err: err}
		}
	}
	kind := nic.AMOSet
	if op == SignalAdd {
		kind = nic.AMOFetchAdd
	}
	if err := w.gpu.LaunchAMO(st, base.Add(int(soff)), kind, value); err != nil {
		return &Error{Call: call, PE: w.pe, Kind: ErrPEFailed, Detail: fmt.Sprintf("signalling PE %d", pe), Err: err}
	}
	return nil
}

// cmpC maps a Cmp to the device header's ROXSHMEM_CMP_* numbering.
func cmpC(c Cmp) int32 {
	switch c {
	case CmpEQ:
		return 0
	case CmpNE:
		return 1
	case CmpGT:
		return 2
	case CmpLE:
		return 3
	case CmpLT:
		return 4
	}
	return 5 // CmpGE
}

// SignalWaitOnStream makes st wait until this PE's signal element at satisfies cmp value
// (nvshmemx_signal_wait_until_on_stream). The device wait polls the abort word: when a PE fails
// the stream moves on and the next Module.Sync or stream wait through the World reports it.
func SignalWaitOnStream(st device.Stream, sig Sym[uint64], at int, cmp Cmp, value uint64) error {
	if err := sig.bounds("SignalWaitOnStream", at, 1); err != nil {
		return err
	}
	w := sig.w
	if err := w.streamCheck("SignalWaitOnStream", st); err != nil {
		return err
	}
	if err := checkCmp(w, "SignalWaitOnStream", cmp); err != nil {
		return err
	}
	addr := w.gpu.HeapDev.Add(int(sig.off) + at*int(unsafe.Sizeof(uint64(0))))
	return w.launchOn("SignalWaitOnStream", st, "roxk_signal_wait_until", 1, 1, addr, cmpC(cmp), value)
}

// QuietOnStream completes, when st reaches it, every operation this PE's kernels issued before
// (nvshmemx_quiet_on_stream); copies enqueued on st before it are complete by stream order.
func (w *World) QuietOnStream(st device.Stream) error {
	if err := w.streamCheck("QuietOnStream", st); err != nil {
		return err
	}
	return w.launchOn("QuietOnStream", st, "roxk_quiet", 1, 1)
}

// BarrierOnStream is a barrier_all among the PEs enqueued on st (nvshmemx_barrier_all_on_stream):
// when every PE's stream has reached it, each continues. Every PE must enqueue it.
func (w *World) BarrierOnStream(st device.Stream) error {
	if err := w.streamCheck("BarrierOnStream", st); err != nil {
		return err
	}
	return w.launchOn("BarrierOnStream", st, "roxk_barrier_all_block", 1, 32)
}

// SyncStream waits for st's work the way Module.Sync does: never hanging, reporting device failures.
// On the host backend it waits for st (a stream of the host device, whose stream-ordered
// collectives run the blocking calls) and reports the first failure of its work.
func (w *World) SyncStream(ctx context.Context, st device.Stream) error {
	if w != nil && w.gpu == nil && st != nil {
		return w.syncHostStream(ctx, st)
	}
	if err := w.streamCheck("SyncStream", st); err != nil {
		return err
	}
	return w.waitStream(ctx, "SyncStream", st)
}

// NewStream returns a new stream of this PE's device for stream-ordered operations (on the host
// backend a goroutine that runs its work in order). Destroy it when done.
func (w *World) NewStream() (device.Stream, error) {
	if err := w.check("NewStream"); err != nil {
		return nil, err
	}
	st, err := w.dev.NewStream()
	if err != nil {
		return nil, &Error{Call: "NewStream", PE: w.pe, Kind: ErrPEFailed, Detail: "creating a stream on " + w.dev.Info().String(), Err: err}
	}
	return st, nil
}

// AdoptStream wraps a stream the program made with the vendor's API (a cudaStream_t or
// hipStream_t; 0 the default stream) for stream-ordered operations, as NCCL takes the caller's
// stream. The program keeps the stream: the wrapper's Destroy leaves it alone. On the host
// backend the handle is the Handle of a stream from NewStream.
func (w *World) AdoptStream(handle uintptr) (device.Stream, error) {
	if err := w.check("AdoptStream"); err != nil {
		return nil, err
	}
	st, err := w.dev.AdoptStream(handle)
	if err != nil {
		return nil, &Error{Call: "AdoptStream", PE: w.pe, Kind: ErrBadArgument, Detail: fmt.Sprintf("stream handle %#x on %v", handle, w.dev.Info()), Err: err}
	}
	return st, nil
}
