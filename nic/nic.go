// Package nic moves bytes between PEs that cannot load and store each other's symmetric heaps:
// the device->host command rings, the proxy that drains them through a Route per target PE (a
// TransportRoute over a Transport here; the runtime adds its own, such as a GPU's copy engine),
// and the Transport interface with its implementations (nic/tcp, nic/ucx). It knows no API
// semantics beyond the ordering it must keep: per-PE order across fences, and completion for
// quiet, in ticket order.
//
// Lifetimes: a Ring lives in memory its caller owns (shared memory, or host-pinned memory mapped
// into a device) and does not free; that memory must outlive every producer and the Proxy that
// drains it. A Proxy owns one goroutine and nothing else: Close it before closing its routes,
// its Transport or freeing its rings. A Transport owns its listener, connections and goroutines until Close.
// Errors flow one way: a proxy that fails writes the ring's error word, and every later
// Reserve, Quiet and WaitCompleted on that ring returns a *RingError (errors.Is ErrRing).
package nic

import "context"

// Op is a descriptor's operation code. The numbering is shared with the device header
// (kernels/include/roxamen/ring.h); a parity test keeps the two in step.
type Op uint32

const (
	OpNop       Op = 0
	OpPut       Op = 1 // copy Size bytes from local Src to remote heap offset Dst
	OpGet       Op = 2 // copy Size bytes from remote heap offset Dst to local Src
	OpPutSignal Op = 3 // OpPut, then apply signal (Flags: SigSet/SigAdd) Value at heap offset Aux
	OpAMO       Op = 4 // atomic (Flags: AMO kind | width) on remote Dst with Value (and Aux = compare)
	OpFence     Op = 5 // later ops to PE are delivered after earlier ones
	OpQuiet     Op = 6 // completes when every earlier op has completed
)

// Transport carries one PE's operations to other PEs' heaps. Heap locations are symmetric heap
// offsets; the target applies writes and AMOs to its own heap. Get and AMO return when the value
// is in hand. Put and PutSignal return as soon as src may be reused (they are pipelined); they are
// complete (delivered at the target) when a later Quiet returns, which also reports any error the
// target found in them. Calls to the same PE are delivered in issue order once Fence(pe) has been
// called between them. Errors name the operation, the PE and the range or value at fault.
type Transport interface {
	Put(pe int, dst uint64, src []byte) error
	Get(pe int, src uint64, dst []byte) error
	// AMO applies op to the width-byte (4 or 8) word at dst on pe and returns the old value.
	AMO(pe int, op AMOOp, width int, dst uint64, value, compare uint64) (uint64, error)
	// PutSignal delivers src at dst, then updates the 8-byte signal at sig; the signal never becomes
	// visible before the data.
	PutSignal(pe int, dst uint64, src []byte, sig uint64, sigOp SignalOp, sigValue uint64) error
	Fence(pe int) error
	// Quiet waits until every operation issued so far to pe (or to all PEs when pe < 0) is complete.
	Quiet(ctx context.Context, pe int) error
	Close() error
}

// Memory resolves an address range to bytes, with a bounds check: a symmetric heap (offsets), or
// the local memory that descriptors point at (addresses). Bytes must return an error, not a
// short slice, for a range it does not hold.
type Memory interface {
	Bytes(addr uint64, n int) ([]byte, error)
}

// Batcher is implemented by transports that can hold back small operations: between BeginBatch
// and EndBatch they may buffer puts; EndBatch sends everything buffered. Get, AMO, Fence and Quiet
// send what is buffered before they wait.
type Batcher interface {
	BeginBatch()
	EndBatch() error
}

// AsyncQuieter is implemented by transports that can start a Quiet(pe) without waiting for it:
// the channel receives its result once. The proxy keeps issuing descriptors while earlier puts
// are being acknowledged.
type AsyncQuieter interface {
	QuietAsync(pe int) <-chan error
}

// AMOOp is an atomic memory operation.
type AMOOp uint32

const (
	AMOFetch AMOOp = iota
	AMOSet
	AMOSwap
	AMOCompareSwap
	AMOFetchAdd
	AMOFetchAnd
	AMOFetchOr
	AMOFetchXor
)

// SignalOp says how put-with-signal updates its signal word.
type SignalOp uint32

const (
	SignalSet SignalOp = 0
	SignalAdd SignalOp = 1
)
