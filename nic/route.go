package nic

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"
)

// AllPEs is the PE of a fence or quiet descriptor that applies to every PE
// (ROXSHMEM_DESC_ALL_PES in ring.h).
const AllPEs = 0xffffffff

// Route carries descriptors to the PEs the proxy sends through it: a Transport (TransportRoute),
// a GPU's copy engine, a DMA queue. Each target PE has one route (ProxyConfig.Routes); the proxy
// validates a descriptor (its op, PE, heap ranges, signal op, AMO kind, width and alignment)
// before the route sees it, and calls its routes from its one goroutine only.
//
// The proxy keeps per-PE order, completion in ticket order and error reporting; a route owes it:
//   - Issue starts d in issue order. It may return before d is delivered; a get's or a fetching
//     AMO's result is in place when Issue returns, unless the route is a DeviceCompleter.
//   - after Fence(pe), operations to pe that are issued later are delivered after earlier ones;
//   - when Quiet returns, everything issued on the route is delivered (results in place).
//
// A route's error fails the ring: return Reject(...) for a descriptor the route cannot carry out
// (nothing written), any other error for a failure of the route itself.
type Route interface {
	Issue(d *Desc) error
	Fence(pe int) error
	Quiet(ctx context.Context) error
}

// RouteQuietStarter is implemented by routes that can start a Quiet without waiting for it: the
// channel receives its result once. The proxy then keeps issuing later batches while the
// earlier ones are being acknowledged.
type RouteQuietStarter interface {
	QuietAsync() <-chan error
}

// DeviceCompleter is implemented by routes whose work runs on a device queue that executes in
// issue order and finishes without the host (a copy-engine stream). The proxy does not wait for
// such a route: at the end of a batch it calls CompleteAt, which queues, behind everything issued
// on the route so far, the write of upTo into r's completed counter (and into any copy of it that
// device code polls). The proxy reads the counter to learn that the route's work has landed.
type DeviceCompleter interface {
	Route
	CompleteAt(r *Ring, upTo uint64) error
}

// ErrBadDescriptor is matched (errors.Is) by the error a proxy reports for a descriptor it
// rejected: an unknown op, a PE out of range, a heap range outside the symmetric heap, a local
// address it cannot resolve. A rejected descriptor writes nothing.
var ErrBadDescriptor = errors.New("nic: bad descriptor")

// Reject returns the error a route gives for a descriptor it cannot carry out and for which it has
// written nothing (an address it cannot resolve, say): the ring fails with RingErrInput, and the
// proxy's error matches ErrBadDescriptor and names the op and the PE before the message.
func Reject(format string, args ...any) error {
	return &rejection{fmt.Sprintf(format, args...)}
}

type rejection struct{ msg string }

func (e *rejection) Error() string        { return e.msg }
func (e *rejection) Is(target error) bool { return target == ErrBadDescriptor }

// Stager is implemented by local memory of which the host addresses only a part (a GPU's: its
// host-mapped buffers): Bytes answers for that part, and a TransportRoute copies the rest through
// a host buffer of its own with CopyOut (before a put) and CopyIn (after a get or a fetching AMO).
type Stager interface {
	Memory
	CopyOut(dst []byte, addr uint64) error
	CopyIn(addr uint64, src []byte) error
}

// TransportRoute sends descriptors through a Transport; descriptors' local addresses (Desc.Src)
// are resolved in Local. When Local is a Stager, a put from staged memory is quieted before the
// staging buffer is reused.
type TransportRoute struct {
	t       Transport
	local   Memory
	stager  Stager
	batcher Batcher
	timeout time.Duration
	stage   []byte
}

// NewTransportRoute returns the route through t; timeout bounds the quiet after a staged put.
// The route batches (Batcher) and starts quiets (RouteQuietStarter) where t does.
func NewTransportRoute(t Transport, local Memory, timeout time.Duration) Route {
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	r := &TransportRoute{t: t, local: local, timeout: timeout}
	r.stager, _ = local.(Stager)
	r.batcher, _ = t.(Batcher)
	if a, ok := t.(AsyncQuieter); ok {
		return asyncTransportRoute{r, a}
	}
	return r
}

type asyncTransportRoute struct {
	*TransportRoute
	a AsyncQuieter
}

func (r asyncTransportRoute) QuietAsync() <-chan error { return r.a.QuietAsync(-1) }

// BeginBatch and EndBatch pass the proxy's batches on to the transport.
func (r *TransportRoute) BeginBatch() {
	if r.batcher != nil {
		r.batcher.BeginBatch()
	}
}

func (r *TransportRoute) EndBatch() error {
	if r.batcher != nil {
		return r.batcher.EndBatch()
	}
	return nil
}

func (r *TransportRoute) Fence(pe int) error { return r.t.Fence(pe) }

func (r *TransportRoute) Quiet(ctx context.Context) error { return r.t.Quiet(ctx, -1) }

// buffer returns the host bytes for local [addr, addr+n): the memory itself, or (staged) the
// route's staging buffer.
func (r *TransportRoute) buffer(what string, addr, n uint64) (b []byte, staged bool, err error) {
	if n == 0 {
		return nil, false, nil
	}
	if n > uint64(int(^uint(0)>>1)) {
		return nil, false, Reject("%s range [%#x, +%#x) is too large", what, addr, n)
	}
	b, err = r.local.Bytes(addr, int(n))
	if err != nil {
		if r.stager == nil {
			return nil, false, Reject("%s range [%#x, +%#x): %v", what, addr, n, err)
		}
		if uint64(cap(r.stage)) < n {
			r.stage = make([]byte, n)
		}
		return r.stage[:n], true, nil
	}
	if uint64(len(b)) != n {
		return nil, false, Reject("%s range [%#x, +%#x) resolved to %d bytes", what, addr, n, len(b))
	}
	return b, false, nil
}

func (r *TransportRoute) Issue(d *Desc) error {
	pe := int(d.PE)
	switch d.Op {
	case OpPut, OpPutSignal:
		b, staged, err := r.buffer("local", d.Src, d.Size)
		if err != nil {
			return err
		}
		if staged {
			if err := r.stager.CopyOut(b, d.Src); err != nil {
				return fmt.Errorf("staging local [%#x, +%#x): %w", d.Src, d.Size, err)
			}
		}
		if d.Op == OpPut {
			err = r.t.Put(pe, d.Dst, b)
		} else {
			err = r.t.PutSignal(pe, d.Dst, b, d.Aux, SignalOp(d.Kind()), d.Value)
		}
		if err == nil && staged {
			// The staging buffer is reused next: the transport must be done with it.
			ctx, cancel := context.WithTimeout(context.Background(), r.timeout)
			err = r.t.Quiet(ctx, pe)
			cancel()
		}
		return err
	case OpGet:
		b, staged, err := r.buffer("local", d.Src, d.Size)
		if err != nil {
			return err
		}
		if err := r.t.Get(pe, d.Dst, b); err != nil {
			return err
		}
		if staged {
			if err := r.stager.CopyIn(d.Src, b); err != nil {
				return fmt.Errorf("copying the result to local [%#x, +%#x): %w", d.Src, d.Size, err)
			}
		}
		return nil
	case OpAMO:
		op, width := AMOOp(d.Kind()), d.Width()
		var res []byte
		staged := false
		if d.Src != 0 {
			var err error
			if res, staged, err = r.buffer("result", d.Src, uint64(width)); err != nil {
				return err
			}
			if err := CheckAMO(op, width, d.Src); err != nil {
				return Reject("result address %#x: %v", d.Src, err)
			}
		}
		old, err := r.t.AMO(pe, op, width, d.Dst, d.Value, d.Aux)
		if err != nil || res == nil {
			return err
		}
		if staged {
			var v [8]byte
			binary.LittleEndian.PutUint64(v[:], old)
			if err := r.stager.CopyIn(d.Src, v[:width]); err != nil {
				return fmt.Errorf("copying the fetched value to local %#x: %w", d.Src, err)
			}
			return nil
		}
		return StoreWord(res, width, old)
	}
	return errors.New("unknown operation " + d.Op.String())
}
