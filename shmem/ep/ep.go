// Package ep is expert-parallel dispatch and combine for mixture-of-experts layers on Roxamen's
// symmetric heap: what DeepEP gives NVSHMEM users, built on shmem's point-to-point calls (put,
// put-with-signal, atomics, signal waits), which is also the path DeepEP's kernels take.
//
// # What runs where
//
// On the host backend the CPU runs everything: Dispatch and Combine move the rows with shmem's
// calls and group and sum them in Go. On a GPU World (cuda, hip) the device runs everything: New
// allocates roxamen/ep.h's regions in the symmetric heap (DeviceHeapBytes) and loads the workload
// code object once per World (World.LoadModule), and each call is ep.h's block-level phases, one
// kernel launch each, on a stream. DispatchOnStream and CombineOnStream take device-resident
// tokens, indices and weights, enqueue the phases on the caller's stream and return at once
// (DeepEP's calling convention); their results (DeviceRecv, the combined tokens) are in the
// buffer's device memory. The blocking Dispatch and Combine work on both backends: on a GPU they
// copy the host Tokens to the device, run the stream form on the buffer's own stream, wait, and
// copy the results back, so one program runs everywhere. The stream forms are GPU only (the host
// backend refuses them with device.ErrNotSupported after checking their arguments).
//
// A Buffer (New) holds the symmetric landing zones, allocated once. Dispatch sends each token
// to the PEs that own its top-k experts (experts are split evenly over the PEs: PE p owns experts
// [p*L, (p+1)*L), L = Experts/NPEs) and returns, on every PE, the tokens it received grouped by
// local expert; Combine sends each expert output back to its token's PE and sums the outputs with
// the top-k weights. Both are collective: every PE calls them, in the same order, with its own
// tokens (any number up to MaxTokens, zero included).
//
// A token routed to several experts of one PE travels to that PE once; the receiver copies it
// into each of those experts' groups, and on the way back it sums that PE's expert outputs first,
// so that one partial sum per (token, PE) travels back.
//
// # Modes
//
// Normal (training, prefill: thousands of tokens): layout first. To each PE a sender writes its
// layout (the tokens it sends there and the rows of each of that PE's experts) and then its rows,
// in bulk, into the sender's own region of the landing zone (slots s*MaxTokens... for sender s),
// and one signal, carrying the call's epoch and the row count, says both are in: a single wait
// per peer, where exchanging the layout first and then moving the rows would wait twice. The
// receiver sizes its expert groups from the layouts before it copies a row. (On a GPU, ep.h
// exchanges the layout first and lands the rows compactly.)
//
// LowLatency (decode, at most 128 tokens per PE): no layout step. Each token is pushed into a
// fixed slot of its destination (slot i of the sender's region) with a put-with-signal that adds
// one to the sender's arrival counter there; after its last token the sender sets its count signal
// on every PE. A receiver waits for each count and then for that many arrivals.
//
// A destination whose heap is mapped into this process (a PE of the same node: Sym.Ptr) is
// written in place, in both modes and both directions: the sender stores each row (or partial
// sum) straight into its landing slot, with no copy through a staging buffer, and one signal
// (the arrival counter raised by the number of rows, or the epoch set) covers them all, its
// atomic ordering the stores before it. Destinations reached through the NIC get the puts above.
//
// # Arithmetic and summation order
//
// Weights are float32 and Combine accumulates in float32. The order is fixed, so results are the
// same bit for bit from run to run, in both ROX_ORDERING modes and on any transport: on the
// expert PE p, the partial sum of token t is the sum over k = 0..TopK-1 (ascending) of t's
// experts on p of weight[k] * y[k] (each product and sum rounded to float32, starting from +0),
// which travels back in the buffer's DType (bf16: rounded to nearest even, as DeepEP's combine
// sends bf16); on t's PE the output is the float32 sum over p = 0..NPEs-1 (ascending) of those
// partials, starting from +0, rounded to the DType once. A token with no expert (every index -1)
// combines to zeros.
//
// # Reuse and failure
//
// Every call waits until each peer has consumed the previous call's data before writing over it
// (an acknowledgement signal per peer), so calls may follow each other without barriers. A call
// with bad input returns the error before it writes any row; it still takes its place in the
// buffer's sequence of calls, and the other PEs' calls fail at once with shmem.ErrMismatch naming
// it (on the host backend; a PE that leaves the call altogether makes the others fail with
// shmem.ErrTimeout after ROX_TIMEOUT, or ErrPEFailed when the job stops).
//
// The stream forms check on the host what the host sees (shapes, alignment, the handle, the
// stream) before they enqueue anything. The expert indices of a stream-ordered Dispatch are in
// device memory, so the device checks them: an index outside [-1, Experts) makes that PE dispatch
// none of its tokens in that call (its peers' calls complete and see no token from it; its own
// Combine gives zeros for them) and the stream's next SyncStream on that PE fails with
// ErrExpertRange, naming the PE and the value. On a GPU the device keeps the routing of the
// buffer's latest Dispatch only: Combine takes that Dispatch's handle (an earlier one is
// ErrStaleHandle), and a buffer's calls go on one stream at a time (ErrConcurrent while its
// previous call still runs on another).
package ep

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/roxamen/roxamen/internal/units"
	"github.com/roxamen/roxamen/shmem"
)

// DType is the payload type of the token activations.
type DType int

const (
	DTypeBF16 DType = iota // bfloat16 (BF16)
	DTypeF32               // float32
)

func (d DType) String() string {
	switch d {
	case DTypeBF16:
		return "bf16"
	case DTypeF32:
		return "f32"
	}
	return fmt.Sprintf("DType(%d)", int(d))
}

func (d DType) size() int {
	if d == DTypeBF16 {
		return 2
	}
	return 4
}

// Mode is how tokens travel.
type Mode int

const (
	Normal     Mode = iota // layout (counts) first, then bulk transfers
	LowLatency             // each token straight into a fixed slot with put-with-signal
)

func (m Mode) String() string {
	switch m {
	case Normal:
		return "normal"
	case LowLatency:
		return "low-latency"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// MaxLowLatencyTokens is the most tokens a PE may dispatch at once in LowLatency mode.
const MaxLowLatencyTokens = 128

// Config is a Buffer's shape; every PE passes the same.
type Config struct {
	Hidden    int   // elements per token (DeepSeek-V3: 7168)
	TopK      int   // experts per token (DeepSeek-V3: 8)
	Experts   int   // experts in the job, a multiple of the number of PEs
	MaxTokens int   // most tokens one PE dispatches in a call (LowLatency: at most 128)
	DType     DType // payload type
	Mode      Mode
}

// Error kinds of this package, matched with errors.Is; the errors are *shmem.Error values naming
// the call ("ep.Dispatch"...), the PE and the value.
var (
	ErrExpertRange   = errors.New("expert index out of range")
	ErrTooManyTokens = errors.New("more tokens than MaxTokens")
	ErrForeignHandle = errors.New("handle from another buffer")
	ErrStaleHandle   = errors.New("handle of an earlier Dispatch") // GPU: the device keeps the latest routing only
	ErrShape         = errors.New("bad shape")
	ErrClosed        = errors.New("buffer freed")
)

// Tokens is a row-major [rows][Hidden] matrix of activations: BF16 holds it when the DType is
// DTypeBF16, F32 when it is DTypeF32 (the other is nil).
type Tokens struct {
	BF16 []shmem.BFloat16
	F32  []float32
}

// len returns the number of elements of the matrix held for dt.
func (t Tokens) len(dt DType) int {
	if dt == DTypeBF16 {
		return len(t.BF16)
	}
	return len(t.F32)
}

func (t Tokens) bytes(dt DType) []byte {
	if dt == DTypeBF16 {
		if len(t.BF16) == 0 {
			return nil
		}
		return unsafe.Slice((*byte)(unsafe.Pointer(&t.BF16[0])), 2*len(t.BF16))
	}
	if len(t.F32) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&t.F32[0])), 4*len(t.F32))
}

func makeTokens(dt DType, n int) Tokens {
	if dt == DTypeBF16 {
		return Tokens{BF16: make([]shmem.BFloat16, n)}
	}
	return Tokens{F32: make([]float32, n)}
}

// Source names where a received row came from.
type Source struct {
	PE    int // the token's PE
	Token int // its index in that PE's Dispatch input
	K     int // which of its top-k choices this row is
}

// Recv is what Dispatch delivered to this PE: rows grouped by local expert (all of local expert
// 0's rows, then expert 1's...), within an expert ordered by source PE and then by token index.
type Recv struct {
	X       Tokens    // [Rows][Hidden]
	Rows    int       // rows in X
	Counts  []int     // rows per local expert (len Experts/NPEs)
	Offsets []int     // first row of each local expert in X (len Experts/NPEs + 1)
	Weights []float32 // the top-k weight of each row
	Src     []Source  // where each row came from
	Experts []int     // the global expert of each row
	// Transfers counts the tokens that travelled from each PE: one per token with any expert
	// here, however many of them are here.
	Transfers []int
}

// Handle remembers a Dispatch's routing for the Combine that returns its tokens.
type Handle struct {
	buf    *Buffer
	epoch  uint64
	tokens int       // this PE's tokens
	sent   [][]int32 // per destination PE: slot -> token index
	// From source PE s, slot i: the received rows of that token and their weights, in k order:
	// entries[from[s][i]:from[s][i+1]].
	from    [][]int32
	entries []entry
	rows    int // rows dispatched to this PE (-1: a DispatchOnStream's, not read yet)
}

type entry struct {
	row int32
	w   float32
}

// Rows returns the number of rows Combine expects in y (Recv.Rows); for a DispatchOnStream's
// handle, whose row count is on the device, -1 until a blocking Combine has read it.
func (h *Handle) Rows() int {
	if h == nil {
		return 0
	}
	return h.rows
}

var bufferIDs atomic.Uint64

// Buffer is one PE's handle on the symmetric buffers of a dispatch/combine layer.
type Buffer struct {
	w        *shmem.World
	cfg      Config
	id       uint64
	me, npes int
	local    int // experts per PE
	payload  int // bytes of one token's activations
	rowBytes int // payload + routing metadata, 16-aligned

	recv   shmem.Sym[byte]   // dispatch landing: npes*MaxTokens rows
	comb   shmem.Sym[byte]   // combine landing: [npes][MaxTokens] partial sums in the DType
	layout shmem.Sym[uint64] // Normal: [npes][npes+Experts]; host: source s's layout in row s, [rows, rows per local expert...]
	sig    shmem.Sym[uint64] // signals, nSigs blocks of npes

	stage  []byte // local: the rows this PE sends, [npes][MaxTokens] rows
	cstage []byte // local: the partial sums this PE sends back

	dispEpoch, combEpoch uint64
	arrived, combArrived []uint64 // LowLatency: arrivals counted so far, per source
	freed                bool
	dev                  *devBuf  // the device side, on a GPU World
	scratch              *scratch // the host path's reusable state, made by its first call
}

// Signal blocks (each npes elements, element s about PE s).
const (
	sigLayout  = iota // Normal, GPU: s's layout row is in (value: epoch)
	sigData           // Normal: s's rows are in (GPU: epoch; host: epoch<<32 | rows, its layout in too); LowLatency: s's rows arrived (count)
	sigCount          // LowLatency: s's count (epoch<<32 | count)
	sigDispAck        // s has consumed this PE's dispatch data of epoch (value)
	sigComb           // Normal: s's partial sums are in (epoch); LowLatency: arrivals
	sigCombAck        // s has consumed this PE's combine data of epoch (value)
	nSigs
)

func align8(n int) int { return (n + 7) &^ 7 }

// rowLayout returns the bytes of a dispatch row: the payload, then TopK int32 local expert
// indices (-1: not on this PE), TopK float32 weights, the int32 source token index, padded to 8.
func rowLayout(cfg Config) (payload, row int) {
	payload = align8(cfg.Hidden * cfg.DType.size())
	// 16-aligned rows: a device's 16-byte stores of a payload land whole in every row
	return payload, (payload + 8*cfg.TopK + 4 + 15) &^ 15
}

// HeapBytes returns the symmetric heap bytes New allocates per PE for cfg in a job of npes PEs,
// for sizing ROX_HEAP_SIZE (the heap also needs room for the caller's own allocations).
func HeapBytes(cfg Config, npes int) int64 {
	_, row := rowLayout(cfg)
	n := int64(npes) * int64(cfg.MaxTokens)
	return n*int64(row) + n*int64(cfg.Hidden*cfg.DType.size()) + int64(npes)*int64(npes+cfg.Experts)*8 + int64(nSigs*npes)*8
}

// made refuses a call on a nil Buffer or one that New did not make (the zero Buffer).
func (b *Buffer) made(call string) error {
	if b == nil || b.w == nil {
		return &shmem.Error{Call: call, PE: -1, Kind: shmem.ErrBadArgument, Detail: "a nil or zero Buffer (ep.New makes them)"}
	}
	return nil
}

func (b *Buffer) errorf(call string, kind error, format string, args ...any) error {
	return &shmem.Error{Call: call, PE: b.me, Kind: kind, Detail: fmt.Sprintf(format, args...)}
}

// New allocates the symmetric buffers of cfg on every PE (collective: every PE passes the same
// cfg). It first compares the PEs' Configs: if any two differ, New fails on every PE with
// shmem.ErrMismatch naming the fields, their values and the PEs.
func New(w *shmem.World, cfg Config) (*Buffer, error) {
	if w == nil || w.NPEs() < 1 {
		return nil, &shmem.Error{Call: "ep.New", PE: -1, Kind: shmem.ErrNotInitialized, Detail: "a nil World"}
	}
	me, npes := w.MyPE(), w.NPEs()
	bad := func(format string, args ...any) error {
		return &shmem.Error{Call: "ep.New", PE: me, Kind: shmem.ErrBadArgument, Detail: fmt.Sprintf(format, args...)}
	}
	if err := agreeConfig(w, cfg); err != nil {
		return nil, err
	}
	switch {
	case cfg.Hidden < 1:
		return nil, bad("Hidden %d, want at least 1", cfg.Hidden)
	case cfg.Experts < 1 || cfg.Experts%npes != 0:
		return nil, bad("Experts %d, want a positive multiple of the %d PEs", cfg.Experts, npes)
	case cfg.TopK < 1 || cfg.TopK > cfg.Experts:
		return nil, bad("TopK %d, want 1 to Experts (%d)", cfg.TopK, cfg.Experts)
	case cfg.MaxTokens < 1 || cfg.MaxTokens >= 1<<31:
		return nil, bad("MaxTokens %d, want at least 1", cfg.MaxTokens)
	case cfg.DType != DTypeBF16 && cfg.DType != DTypeF32:
		return nil, bad("DType %v, want DTypeBF16 or DTypeF32", cfg.DType)
	case cfg.Mode != Normal && cfg.Mode != LowLatency:
		return nil, bad("Mode %v, want Normal or LowLatency", cfg.Mode)
	case cfg.Mode == LowLatency && cfg.MaxTokens > MaxLowLatencyTokens:
		return nil, bad("MaxTokens %d in LowLatency mode, want at most %d", cfg.MaxTokens, MaxLowLatencyTokens)
	}
	payload, row := rowLayout(cfg)
	b := &Buffer{w: w, cfg: cfg, id: bufferIDs.Add(1), me: me, npes: npes, local: cfg.Experts / npes,
		payload: payload, rowBytes: row,
		arrived: make([]uint64, npes), combArrived: make([]uint64, npes)}
	slots := npes * cfg.MaxTokens
	gpu := w.Device().Driver != "host"
	// A heap too small for the buffers is the usual failure: say how much they need.
	heap := func(err error, free ...shmem.Mem) error {
		for _, m := range free {
			err = errors.Join(err, w.Free(m))
		}
		if errors.Is(err, shmem.ErrOutOfMemory) {
			need, fn := HeapBytes(cfg, npes), "ep.HeapBytes"
			if gpu {
				need, fn = DeviceHeapBytes(cfg, npes), "ep.DeviceHeapBytes"
			}
			return fmt.Errorf("ep.New on PE %d: the buffers of %+v take %d bytes of symmetric heap on %d PEs (%s; set ROX_HEAP_SIZE): %w", me, cfg, need, npes, fn, err)
		}
		return err
	}
	var err error
	if b.recv, err = shmem.Alloc[byte](w, slots*row); err != nil {
		return nil, heap(err)
	}
	if b.comb, err = shmem.Alloc[byte](w, slots*cfg.Hidden*cfg.DType.size()); err != nil {
		return nil, heap(err, b.recv.Mem())
	}
	if b.layout, err = shmem.Alloc[uint64](w, npes*(npes+cfg.Experts)); err != nil {
		return nil, heap(err, b.comb.Mem(), b.recv.Mem())
	}
	if b.sig, err = shmem.Alloc[uint64](w, nSigs*npes); err != nil {
		return nil, heap(err, b.layout.Mem(), b.comb.Mem(), b.recv.Mem())
	}
	if gpu {
		if err := b.newDevice(); err != nil {
			return nil, heap(err, b.sig.Mem(), b.layout.Mem(), b.comb.Mem(), b.recv.Mem())
		}
		return b, nil
	}
	b.stage = make([]byte, slots*row)
	b.cstage = make([]byte, slots*cfg.Hidden*cfg.DType.size())
	return b, nil
}

// Config returns the buffer's shape.
func (b *Buffer) Config() Config {
	if b == nil {
		return Config{}
	}
	return b.cfg
}

// Free releases the symmetric buffers (collective).
func (b *Buffer) Free() error {
	if err := b.made("ep.Free"); err != nil {
		return err
	}
	if b.freed {
		return b.errorf("ep.Free", ErrClosed, "buffer already freed")
	}
	var dev error
	if b.dev != nil {
		if last := b.dev.last; last != nil {
			if done, err := last.Query(); err == nil && !done {
				return b.errorf("ep.Free", shmem.ErrConcurrent, "the buffer's latest call still runs on its stream: synchronize it first")
			}
		}
		dev = errors.Join(b.w.Free(b.dev.mem.Mem()), releaseModule(b.w))
	}
	b.freed = true
	return errors.Join(dev, b.w.Free(b.sig.Mem()), b.w.Free(b.layout.Mem()), b.w.Free(b.comb.Mem()), b.w.Free(b.recv.Mem()))
}

func (b *Buffer) sigAt(block, pe int) int { return block*b.npes + pe }

// wait waits until this PE's signal (block, pe) satisfies >= v and returns its value.
func (b *Buffer) wait(ctx context.Context, call string, block, pe int, v uint64) (uint64, error) {
	got, err := shmem.SignalWaitUntil(ctx, b.sig, b.sigAt(block, pe), shmem.CmpGE, v)
	if err != nil {
		return 0, fmt.Errorf("%s on PE %d: waiting for PE %d: %w", call, b.me, pe, err)
	}
	return got, nil
}

// check validates the input of Dispatch; nothing has been written when it fails.
func (b *Buffer) checkDispatch(x Tokens, idx []int64, weights []float32) (int, error) {
	const call = "ep.Dispatch"
	if err := b.made(call); err != nil {
		return 0, err
	}
	cfg := b.cfg
	if b.freed {
		return 0, b.errorf(call, ErrClosed, "the buffer was freed")
	}
	if other := map[DType]int{DTypeBF16: len(x.BF16), DTypeF32: len(x.F32)}; other[1-cfg.DType] != 0 {
		return 0, b.errorf(call, ErrShape, "x holds %d %v elements; this buffer's DType is %v", other[1-cfg.DType], 1-cfg.DType, cfg.DType)
	}
	el := x.len(cfg.DType)
	if el%cfg.Hidden != 0 {
		return 0, b.errorf(call, ErrShape, "x has %s, not a multiple of Hidden (%d)", units.Count(el, "element"), cfg.Hidden)
	}
	n := el / cfg.Hidden
	if n > cfg.MaxTokens {
		return 0, b.errorf(call, ErrTooManyTokens, "%d tokens, MaxTokens is %d", n, cfg.MaxTokens)
	}
	if len(idx) != n*cfg.TopK {
		return 0, b.errorf(call, ErrShape, "topkIdx has %s, want tokens*TopK = %d*%d", units.Count(len(idx), "entry"), n, cfg.TopK)
	}
	if len(weights) != n*cfg.TopK {
		return 0, b.errorf(call, ErrShape, "topkWeights has %s, want tokens*TopK = %d*%d", units.Count(len(weights), "entry"), n, cfg.TopK)
	}
	for i, e := range idx {
		if e < -1 || e >= int64(cfg.Experts) {
			return 0, b.errorf(call, ErrExpertRange, "topkIdx[%d][%d] = %d, want -1 (none) or 0 <= expert < %d", i/cfg.TopK, i%cfg.TopK, e, cfg.Experts)
		}
	}
	return n, nil
}

// Dispatch sends this PE's tokens x ([tokens][Hidden]) to the PEs owning their experts:
// topkIdx[t*TopK+k] is token t's k-th expert (-1 for none) and topkWeights the matching weight.
// It returns the rows this PE received, grouped by local expert, and the handle Combine needs.
// The Recv is new; DispatchInto delivers into one of an earlier call instead.
func (b *Buffer) Dispatch(ctx context.Context, x Tokens, topkIdx []int64, topkWeights []float32) (*Recv, *Handle, error) {
	return b.DispatchInto(ctx, nil, x, topkIdx, topkWeights)
}

// DispatchInto is Dispatch delivering into r, a Recv from an earlier call that the caller is done
// with (nil: a new one), and returning it: its slices are reused where they are large enough, so
// that a loop of calls does not allocate, zero and fault in a fresh [Rows][Hidden] matrix each
// time (as an MPI program reuses its receive buffer). Nothing of r may be in use any more, its
// X included (as the y of a Combine still to come); Handles do not refer to it.
func (b *Buffer) DispatchInto(ctx context.Context, r *Recv, x Tokens, topkIdx []int64, topkWeights []float32) (*Recv, *Handle, error) {
	const call = "ep.Dispatch"
	n, err := b.checkDispatch(x, topkIdx, topkWeights)
	if err != nil {
		if b != nil && b.w != nil && b.dev == nil && !b.freed { // a zero Buffer has no call order to keep
			return nil, nil, b.refuseDispatch(ctx, call, err)
		}
		return nil, nil, err
	}
	if b.dev != nil {
		return b.dispatchBlocking(ctx, call, n, x, topkIdx, topkWeights)
	}
	cfg, P, M, K := b.cfg, b.npes, b.cfg.MaxTokens, b.cfg.TopK
	sc := b.hostScratch()
	b.dispEpoch++
	e := b.dispEpoch
	h := &Handle{buf: b, epoch: e, tokens: n, sent: make([][]int32, P), from: make([][]int32, P)}

	// Route: the slots of each destination, one per token that has an expert there. Nothing is
	// copied yet: once a destination may be written, the rows go straight into its landing zone
	// when its heap is mapped here, through the stage otherwise.
	sent := make([]int32, P*n)
	for d := range h.sent {
		h.sent[d] = sent[d*n : d*n : (d+1)*n]
	}
	perExpert := sc.perExpert
	clear(perExpert)
	for t := 0; t < n; t++ {
		ks := topkIdx[t*K : (t+1)*K]
		for k, ex := range ks {
			if ex < 0 {
				continue
			}
			perExpert[ex]++
			d := int(ex) / b.local
			first := true
			for _, prev := range ks[:k] {
				if prev >= 0 && int(prev)/b.local == d {
					first = false
					break
				}
			}
			if first {
				h.sent[d] = append(h.sent[d], int32(t))
			}
		}
	}
	// Each destination must have consumed the previous call's rows before they are overwritten.
	for d := 0; d < P; d++ {
		if _, err := b.wait(ctx, call, sigDispAck, d, e-1); err != nil {
			return nil, nil, err
		}
	}

	xb := x.bytes(cfg.DType)
	// pack writes the rows of the tokens of PE d, in slot order, into rows (row i at i*rowBytes).
	pack := func(rows []byte, d int) {
		for i, t := range h.sent[d] {
			b.packRow(rows[i*b.rowBytes:(i+1)*b.rowBytes], xb, int(t), d, topkIdx[int(t)*K:int(t+1)*K], topkWeights[int(t)*K:int(t+1)*K])
		}
	}
	start, counts := sc.start, sc.counts // first row of source s in this PE's landing zone, its rows
	var refused []int                    // the PEs whose argument check refused this call
	if cfg.Mode == Normal {
		// Layout first, in the same signalled write as the rows: each source's rows land in its
		// own region of the landing zone (source s: rows s*M...), so that no PE needs another's
		// counts before it writes, and in front of them, in the source's row of the layout, the
		// header the receiver groups by: the rows for that PE and its local experts' rows. The
		// data signal, which carries the epoch and the row count, is set after both; one wait
		// for all peers remains (the acknowledgement is that of the previous call, in by now
		// when Combine ran between).
		lw := P + cfg.Experts
		for d := 0; d < P; d++ {
			hdr := sc.lay[d*(1+b.local) : (d+1)*(1+b.local)]
			hdr[0] = uint64(len(h.sent[d]))
			copy(hdr[1:], perExpert[d*b.local:(d+1)*b.local])
			v := e<<32 | hdr[0]
			if dst := b.recv.Ptr(d); dst != nil {
				// d's heap is mapped here: the header and the rows are written where they land,
				// with no copy through the stage, and one signal says they are all in (its
				// atomic orders the stores before it).
				copy(b.layout.Ptr(d)[b.me*lw:], hdr)
				pack(dst[b.me*M*b.rowBytes:], d)
				if err := shmem.AtomicSet(b.sig, b.sigAt(sigData, b.me), v, d); err != nil {
					return nil, nil, fmt.Errorf("%s: %w", call, err)
				}
				continue
			}
			// Through the NIC: the header, a fence, then the rows with the signal, so that the
			// signal is delivered after both.
			if err := b.layout.PutNBI(b.me*lw, hdr, d); err != nil {
				return nil, nil, fmt.Errorf("%s: %w", call, err)
			}
			if err := b.w.Fence(); err != nil {
				return nil, nil, fmt.Errorf("%s: %w", call, err)
			}
			rows := b.stage[d*M*b.rowBytes : (d*M+len(h.sent[d]))*b.rowBytes]
			pack(rows, d)
			if err := b.signalled(rows, b.recv, b.me*M*b.rowBytes, sigData, v, d); err != nil {
				return nil, nil, fmt.Errorf("%s: %w", call, err)
			}
		}
		all := b.layout.Local()
		for s := 0; s < P; s++ {
			v, err := b.wait(ctx, call, sigData, s, e<<32)
			if err != nil {
				return nil, nil, err
			}
			if v>>32 != e {
				return nil, nil, b.errorf(call, shmem.ErrMismatch, "PE %d signalled the rows of call %d, this PE is in call %d", s, v>>32, e)
			}
			if v&0xffffffff == refusedRows {
				refused = append(refused, s)
				counts[s] = 0
				continue
			}
			counts[s] = int(v & 0xffffffff)
			if hdr := int(all[s*lw]); hdr != counts[s] || counts[s] > M {
				return nil, nil, b.errorf(call, shmem.ErrMismatch, "PE %d signalled %d rows, its layout says %d, MaxTokens is %d: the PEs' Configs differ", s, counts[s], hdr, M)
			}
			start[s] = s * M
		}
	} else {
		// Low latency: every row straight into its slot, then the counts. Into a mapped heap the
		// rows are written in place and one arrival signal covers them all; through the NIC each
		// row is its own put-with-signal, so that a receiver counts rows as they arrive.
		for d := 0; d < P; d++ {
			if dst := b.recv.Ptr(d); dst != nil {
				pack(dst[b.me*M*b.rowBytes:], d)
				if len(h.sent[d]) > 0 {
					if err := shmem.AtomicAdd(b.sig, b.sigAt(sigData, b.me), uint64(len(h.sent[d])), d); err != nil {
						return nil, nil, fmt.Errorf("%s: %w", call, err)
					}
				}
				continue
			}
			pack(b.stage[d*M*b.rowBytes:], d)
			for i := range h.sent[d] {
				row := b.stage[(d*M+i)*b.rowBytes : (d*M+i+1)*b.rowBytes]
				if err := shmem.PutSignalNBI(b.recv, (b.me*M+i)*b.rowBytes, row, b.sig, b.sigAt(sigData, b.me), 1, shmem.SignalAdd, d); err != nil {
					return nil, nil, fmt.Errorf("%s: %w", call, err)
				}
			}
		}
		for d := 0; d < P; d++ {
			if err := shmem.AtomicSet(b.sig, b.sigAt(sigCount, b.me), e<<32|uint64(len(h.sent[d])), d); err != nil {
				return nil, nil, fmt.Errorf("%s: %w", call, err)
			}
		}
		for s := 0; s < P; s++ {
			v, err := b.wait(ctx, call, sigCount, s, e<<32)
			if err != nil {
				return nil, nil, err
			}
			if v>>32 != e {
				return nil, nil, b.errorf(call, shmem.ErrMismatch, "PE %d signalled the count of call %d, this PE is in call %d", s, v>>32, e)
			}
			if v&0xffffffff == refusedRows {
				refused = append(refused, s)
				counts[s] = 0
				continue
			}
			counts[s] = int(v & 0xffffffff)
			if counts[s] > M {
				return nil, nil, b.errorf(call, shmem.ErrMismatch, "PE %d signalled %d rows, MaxTokens is %d: the PEs' Configs differ", s, counts[s], M)
			}
			start[s] = s * M
			b.arrived[s] += uint64(counts[s])
			if _, err := b.wait(ctx, call, sigData, s, b.arrived[s]); err != nil {
				return nil, nil, err
			}
		}
	}

	if len(refused) > 0 {
		// Every row of the call is in: consume them, so that the buffer stays in step, and fail.
		if err := b.ackDispatch(call, e); err != nil {
			return nil, nil, err
		}
		return nil, nil, b.errorf(call, shmem.ErrMismatch, "PE %d refused its ep.Dispatch (call %d) on bad input (its own error says which); the call fails on every PE", refused[0], e)
	}

	// Group the received rows by local expert.
	land := b.recv.Local()
	if r == nil {
		r = &Recv{}
	}
	r.Counts = resize(r.Counts, b.local)
	clear(r.Counts)
	r.Offsets = resize(r.Offsets, b.local+1)
	r.Transfers = resize(r.Transfers, P)
	copy(r.Transfers, counts)
	received := 0
	for s := 0; s < P; s++ {
		received += counts[s]
	}
	if cfg.Mode == Normal {
		// The layout headers say how many rows each local expert gets from each source.
		all := b.layout.Local()
		for s := 0; s < P; s++ {
			hdr, rows := all[s*(P+cfg.Experts)+1:][:b.local], 0
			for _, c := range hdr {
				rows += int(min(c, uint64(K)*uint64(M)))
			}
			if rows < counts[s] || rows > K*counts[s] {
				return nil, nil, b.errorf(call, shmem.ErrMismatch, "PE %d's layout gives this PE's experts %d rows for its %d tokens of top-%d: the PEs' Configs differ", s, rows, counts[s], K)
			}
			for l, c := range hdr {
				r.Counts[l] += int(c)
			}
		}
	} else {
		// No layout: the rows' metadata say it.
		for s := 0; s < P; s++ {
			for i := 0; i < counts[s]; i++ {
				meta := land[(start[s]+i)*b.rowBytes+b.payload:]
				for k := 0; k < K; k++ {
					if li := int32(getU32(meta[4*k:])); li >= 0 && int(li) < b.local {
						r.Counts[li]++
					}
				}
			}
		}
	}
	r.Offsets[0] = 0
	for l := 0; l < b.local; l++ {
		r.Offsets[l+1] = r.Offsets[l] + r.Counts[l]
	}
	r.Rows = r.Offsets[b.local]
	r.X = resizeTokens(cfg.DType, r.X, r.Rows*cfg.Hidden)
	r.Weights = resize(r.Weights, r.Rows)
	r.Src = resize(r.Src, r.Rows)
	r.Experts = resize(r.Experts, r.Rows)
	xo := r.X.bytes(cfg.DType)
	pay := cfg.Hidden * cfg.DType.size()
	next := sc.next
	copy(next, r.Offsets[:b.local])
	from := make([]int32, received+P)
	h.entries = make([]entry, 0, r.Rows)
	for s := 0; s < P; s++ {
		h.from[s], from = from[:counts[s]+1], from[counts[s]+1:]
		for i := 0; i < counts[s]; i++ {
			base := (start[s] + i) * b.rowBytes
			meta := land[base+b.payload:]
			tok := int(getU32(meta[8*K:]))
			h.from[s][i] = int32(len(h.entries))
			for k := 0; k < K; k++ {
				li := int32(getU32(meta[4*k:]))
				if li < 0 {
					if li != -1 {
						return nil, nil, b.errorf(call, shmem.ErrMismatch, "a row from PE %d names local expert %d of %d: the PEs' Configs differ", s, li, b.local)
					}
					continue
				}
				if int(li) >= b.local || next[li] == r.Offsets[li+1] {
					return nil, nil, b.errorf(call, shmem.ErrMismatch, "a row from PE %d names local expert %d of %d beyond the %d rows the layout gave it: the PEs' Configs differ", s, li, b.local, r.Counts[min(int(li), b.local-1)])
				}
				row := next[li]
				next[li]++
				copy(xo[row*pay:(row+1)*pay], land[base:base+pay])
				w := math.Float32frombits(getU32(meta[4*(K+k):]))
				r.Weights[row] = w
				r.Src[row] = Source{PE: s, Token: tok, K: k}
				r.Experts[row] = b.me*b.local + int(li)
				h.entries = append(h.entries, entry{row: int32(row), w: w})
			}
		}
		h.from[s][counts[s]] = int32(len(h.entries))
	}
	for l := 0; l < b.local; l++ {
		if next[l] != r.Offsets[l+1] {
			return nil, nil, b.errorf(call, shmem.ErrMismatch, "local expert %d got %d rows, the layout gave it %d: the PEs' Configs differ", l, next[l]-r.Offsets[l], r.Counts[l])
		}
	}
	h.rows = r.Rows
	if err := b.ackDispatch(call, e); err != nil {
		return nil, nil, err
	}
	return r, h, nil
}

// ackDispatch ends call e's use of the landing zone: this PE's is free again (tell each source),
// and this PE's puts are complete, so that the staging rows may be rewritten by the next call.
func (b *Buffer) ackDispatch(call string, e uint64) error {
	if err := b.w.Quiet(); err != nil {
		return fmt.Errorf("%s: %w", call, err)
	}
	for s := 0; s < b.npes; s++ {
		if err := shmem.AtomicSet(b.sig, b.sigAt(sigDispAck, b.me), e, s); err != nil {
			return fmt.Errorf("%s: %w", call, err)
		}
	}
	return nil
}

// refusedRows in the row count of a data (Normal) or count (LowLatency) signal says that the
// sender's argument check refused the call.
const refusedRows = 0xffffffff

// refuseDispatch is a Dispatch that this PE's argument check refused (why): it still takes its
// place in the buffer's sequence of calls, so that the other PEs' Dispatch fails at once naming
// this PE, instead of being matched with this PE's next Dispatch. It sends no rows, only a
// signal that says so where the rows' would go; it takes the others' rows of the call (and
// acknowledges them) so that the buffer stays in step; it returns why.
func (b *Buffer) refuseDispatch(ctx context.Context, call string, why error) error {
	b.dispEpoch++
	e := b.dispEpoch
	block := sigData
	if b.cfg.Mode == LowLatency {
		block = sigCount
	}
	for d := 0; d < b.npes; d++ {
		if _, err := b.wait(ctx, call, sigDispAck, d, e-1); err != nil {
			return errors.Join(why, err)
		}
	}
	for d := 0; d < b.npes; d++ {
		if err := shmem.AtomicSet(b.sig, b.sigAt(block, b.me), e<<32|refusedRows, d); err != nil {
			return errors.Join(why, fmt.Errorf("%s: %w", call, err))
		}
	}
	for s := 0; s < b.npes; s++ {
		v, err := b.wait(ctx, call, block, s, e<<32)
		if err != nil {
			return errors.Join(why, err)
		}
		if n := v & 0xffffffff; b.cfg.Mode == LowLatency && v>>32 == e && n != refusedRows {
			b.arrived[s] += n
			if _, err := b.wait(ctx, call, sigData, s, b.arrived[s]); err != nil {
				return errors.Join(why, err)
			}
		}
	}
	if err := b.ackDispatch(call, e); err != nil {
		return errors.Join(why, err)
	}
	return why
}

// packRow writes token t's row for PE d into row (rowBytes): its payload, then its routing
// metadata as rowLayout describes (ks and ws: the token's TopK experts and weights).
func (b *Buffer) packRow(row, xb []byte, t, d int, ks []int64, ws []float32) {
	pay := b.cfg.Hidden * b.cfg.DType.size()
	K := b.cfg.TopK
	row = row[:b.rowBytes]
	copy(row[:pay], xb[t*pay:(t+1)*pay])
	meta := row[b.payload:]
	for k, ex := range ks {
		li := int32(-1)
		if ex >= 0 && int(ex)/b.local == d {
			li = int32(int(ex) - d*b.local)
		}
		putU32(meta[4*k:], uint32(li))
		putU32(meta[4*(K+k):], math.Float32bits(ws[k]))
	}
	putU32(meta[8*K:], uint32(t))
}

// scratch is what a Buffer's host path reuses from call to call, so that a call allocates only
// what it returns: made on the first call (hostScratch).
type scratch struct {
	perExpert []uint64    // Normal: this PE's tokens per expert
	lay       []uint64    // Normal: [npes][1+local] the layout header put to each PE (read until Quiet)
	start     []int       // per source: its first row in the landing zone
	counts    []int       // per source: its rows
	next      []int       // per local expert: the next row of its group
	workers   int         // goroutines for the partial sums (parallel)
	parts     [][]float32 // per worker: a row of partial sums
	sum       []float32   // a row of Combine's final sum
	slot      []int32     // Combine: [npes][tokens] the slot of each token on each PE, or -1
}

func (b *Buffer) hostScratch() *scratch {
	if b.scratch != nil {
		return b.scratch
	}
	// The partial sums spread over the cores this PE has to itself: PEs whose heaps are mapped
	// here share this node's, and goroutines beyond that only contend with the other PEs (and
	// wait for them to be scheduled).
	local := 0
	for pe := 0; pe < b.npes; pe++ {
		if b.recv.Ptr(pe) != nil {
			local++
		}
	}
	workers := max(1, min(runtime.GOMAXPROCS(0), runtime.NumCPU()/max(local, 1)))
	H := b.cfg.Hidden
	sc := &scratch{
		perExpert: make([]uint64, b.cfg.Experts),
		lay:       make([]uint64, b.npes+b.cfg.Experts), // npes*(1+local)
		start:     make([]int, b.npes),
		counts:    make([]int, b.npes),
		next:      make([]int, b.local),
		workers:   workers,
		parts:     make([][]float32, workers),
		sum:       make([]float32, H),
		slot:      make([]int32, b.npes*b.cfg.MaxTokens),
	}
	for k := range sc.parts {
		sc.parts[k] = make([]float32, H)
	}
	b.scratch = sc
	return sc
}

// resize returns s with length n, reusing its storage when it is large enough; the elements are
// not cleared.
func resize[T any](s []T, n int) []T {
	if cap(s) >= n {
		return s[:n]
	}
	return make([]T, n)
}

// resizeTokens is resize for the matrix of dt in t (the other type's slice is dropped).
func resizeTokens(dt DType, t Tokens, n int) Tokens {
	if dt == DTypeBF16 {
		return Tokens{BF16: resize(t.BF16, n)}
	}
	return Tokens{F32: resize(t.F32, n)}
}

// signalled puts src (which may be empty) into dst on pe at element at and sets this PE's signal
// of block to v there, the data first.
func (b *Buffer) signalled(src []byte, dst shmem.Sym[byte], at, block int, v uint64, pe int) error {
	if len(src) == 0 {
		return shmem.AtomicSet(b.sig, b.sigAt(block, b.me), v, pe)
	}
	return shmem.PutSignalNBI(dst, at, src, b.sig, b.sigAt(block, b.me), v, shmem.SignalSet, pe)
}

// Combine sends each expert output y (one row per Recv row, in Recv's order, [Rows][Hidden] in
// the buffer's DType) back to its token's PE and returns, for this PE's tokens of the Dispatch
// that gave h, the top-k weighted sums ([tokens][Hidden]), in the order documented in the
// package comment. The result is new; CombineInto writes into an earlier one instead.
func (b *Buffer) Combine(ctx context.Context, y Tokens, h *Handle) (Tokens, error) {
	return b.CombineInto(ctx, Tokens{}, y, h)
}

// CombineInto is Combine writing the sums into out's storage when it is large enough (out: an
// earlier result the caller is done with; the zero Tokens: a new one) and returning it.
func (b *Buffer) CombineInto(ctx context.Context, out, y Tokens, h *Handle) (Tokens, error) {
	const call = "ep.Combine"
	if err := b.checkHandle(call, h); err != nil {
		return Tokens{}, err
	}
	cfg, P, M, H := b.cfg, b.npes, b.cfg.MaxTokens, b.cfg.Hidden
	if other := map[DType]int{DTypeBF16: len(y.BF16), DTypeF32: len(y.F32)}; other[1-cfg.DType] != 0 {
		return Tokens{}, b.errorf(call, ErrShape, "y holds %d %v elements; this buffer's DType is %v", other[1-cfg.DType], 1-cfg.DType, cfg.DType)
	}
	rows := h.rows
	if b.dev != nil {
		var err error
		if rows, err = b.rowsOf(call, h); err != nil {
			return Tokens{}, err
		}
	}
	if got := y.len(cfg.DType); got != rows*H {
		return Tokens{}, b.errorf(call, ErrShape, "y has %s, want the dispatched rows times Hidden = %d*%d", units.Count(got, "element"), rows, H)
	}
	if b.dev != nil {
		return b.combineBlocking(ctx, call, y, h)
	}
	sc := b.hostScratch()
	b.combEpoch++
	e := b.combEpoch
	for d := 0; d < P; d++ {
		if _, err := b.wait(ctx, call, sigCombAck, d, e-1); err != nil {
			return Tokens{}, err
		}
	}
	// Partial sums per (token, this PE), in k order, in float32, rounded to the DType for the
	// way back. Into a PE whose heap is mapped here they are written where they land and one
	// signal covers them; through the NIC they go from the stage (LowLatency: each pushed as it
	// is computed). The rows of one source are split over the goroutines of parallel: with
	// uneven splits the PE that received most is the one every other PE waits for. Each slot's
	// sum is computed by one goroutine in the same order, so the split changes no bit.
	es := cfg.DType.size()
	pay := H * es
	partial := func(s, i0, i1 int, part []float32, dst []byte) error {
		for i := i0; i < i1; i++ {
			ens := h.entries[h.from[s][i]:h.from[s][i+1]]
			if len(ens) == 0 {
				clear(part)
			}
			for k, en := range ens {
				// The first term is written, not added to a cleared row: the same bits.
				if cfg.DType == DTypeF32 {
					axpyF32(en.w, y.F32[int(en.row)*H:int(en.row+1)*H], part, k == 0)
				} else {
					axpyBF16(en.w, y.BF16[int(en.row)*H:int(en.row+1)*H], part, k == 0)
				}
			}
			if dst != nil {
				encode(cfg.DType, part, dst[(b.me*M+i)*pay:(b.me*M+i+1)*pay])
				continue
			}
			out := b.cstage[(s*M+i)*pay : (s*M+i+1)*pay]
			encode(cfg.DType, part, out)
			if cfg.Mode == LowLatency {
				if err := shmem.PutSignalNBI(b.comb, (b.me*M+i)*pay, out, b.sig, b.sigAt(sigComb, b.me), 1, shmem.SignalAdd, s); err != nil {
					return fmt.Errorf("%s: %w", call, err)
				}
			}
		}
		return nil
	}
	for s := 0; s < P; s++ {
		n := len(h.from[s]) - 1
		dst := b.comb.Ptr(s)
		if err := parallel(sc, n, len(h.entries[h.from[s][0]:h.from[s][n]])*H, func(i0, i1 int, part []float32) error {
			return partial(s, i0, i1, part, dst)
		}); err != nil {
			return Tokens{}, err
		}
		var err error
		switch {
		case cfg.Mode == LowLatency:
			// Through the NIC every sum went with its own signal.
			if dst != nil && n > 0 {
				err = shmem.AtomicAdd(b.sig, b.sigAt(sigComb, b.me), uint64(n), s)
			}
		case dst != nil || n == 0:
			err = shmem.AtomicSet(b.sig, b.sigAt(sigComb, b.me), e, s)
		default:
			err = shmem.PutSignalNBI(b.comb, b.me*M*pay, b.cstage[s*M*pay:(s*M+n)*pay], b.sig, b.sigAt(sigComb, b.me), e, shmem.SignalSet, s)
		}
		if err != nil {
			return Tokens{}, fmt.Errorf("%s: %w", call, err)
		}
	}
	// Sum what came back in float32, PE by PE in ascending order, token by token in a row that
	// stays in the cache, rounded to the DType once.
	for d := 0; d < P; d++ {
		want := e
		if cfg.Mode == LowLatency {
			b.combArrived[d] += uint64(len(h.sent[d]))
			want = b.combArrived[d]
		}
		if _, err := b.wait(ctx, call, sigComb, d, want); err != nil {
			return Tokens{}, err
		}
	}
	T := h.tokens
	slot := sc.slot[:P*T]
	for i := range slot {
		slot[i] = -1
	}
	for d := 0; d < P; d++ {
		for i, t := range h.sent[d] {
			slot[d*T+int(t)] = int32(i)
		}
	}
	out = resizeTokens(cfg.DType, out, T*H)
	ob := out.bytes(cfg.DType)
	land := b.comb.Local()
	sum := sc.sum
	for t := 0; t < T; t++ {
		first := true
		for d := 0; d < P; d++ {
			if i := int(slot[d*T+t]); i >= 0 {
				addDecoded(cfg.DType, land[(d*M+i)*pay:(d*M+i+1)*pay], sum, first)
				first = false
			}
		}
		if first {
			clear(sum) // a token with no expert
		}
		encode(cfg.DType, sum, ob[t*pay:(t+1)*pay])
	}
	if err := b.w.Quiet(); err != nil {
		return Tokens{}, fmt.Errorf("%s: %w", call, err)
	}
	for d := 0; d < P; d++ {
		if err := shmem.AtomicSet(b.sig, b.sigAt(sigCombAck, b.me), e, d); err != nil {
			return Tokens{}, fmt.Errorf("%s: %w", call, err)
		}
	}
	return out, nil
}

// parallelMin is the work (multiply-adds) below which parallel runs on the calling goroutine.
const parallelMin = 1 << 18

// parallel calls f on [0, n) split into contiguous ranges, one per goroutine (up to sc.workers,
// only when work is at least parallelMin), each with its own scratch row of sc.parts.
func parallel(sc *scratch, n, work int, f func(i0, i1 int, part []float32) error) error {
	g := min(sc.workers, n)
	if g <= 1 || work < parallelMin {
		return f(0, n, sc.parts[0])
	}
	errs := make([]error, g)
	var wg sync.WaitGroup
	for k := 0; k < g; k++ {
		wg.Add(1)
		go func(k int) {
			defer wg.Done()
			errs[k] = f(k*n/g, (k+1)*n/g, sc.parts[k])
		}(k)
	}
	wg.Wait()
	return errors.Join(errs...)
}

// axpyF32 adds w*x to acc, each product rounded to float32 (the conversions forbid a fused
// multiply-add); unrolled by four, which the compiler does not do itself. With set it writes
// w*x + 0 instead: what adding to a cleared acc gives (+0 for a product of -0), without the clear.
func axpyF32(w float32, x, acc []float32, set bool) {
	acc = acc[:len(x)]
	j := axpyF32Vec(w, x, acc, set)
	if set {
		for ; j < len(x); j++ {
			acc[j] = float32(w*x[j]) + 0
		}
		return
	}
	for ; j+4 <= len(x); j += 4 {
		a, b := x[j:j+4:j+4], acc[j:j+4:j+4]
		b[0] += float32(w * a[0])
		b[1] += float32(w * a[1])
		b[2] += float32(w * a[2])
		b[3] += float32(w * a[3])
	}
	for ; j < len(x); j++ {
		acc[j] += float32(w * x[j])
	}
}

// axpyBF16 is axpyF32 for bf16 x.
func axpyBF16(w float32, x []shmem.BFloat16, acc []float32, set bool) {
	acc = acc[:len(x)]
	j := axpyBF16Vec(w, x, acc, set)
	if set {
		for ; j < len(x); j++ {
			acc[j] = float32(w*math.Float32frombits(uint32(x[j])<<16)) + 0
		}
		return
	}
	for ; j+4 <= len(x); j += 4 {
		a, b := x[j:j+4:j+4], acc[j:j+4:j+4]
		b[0] += float32(w * math.Float32frombits(uint32(a[0])<<16))
		b[1] += float32(w * math.Float32frombits(uint32(a[1])<<16))
		b[2] += float32(w * math.Float32frombits(uint32(a[2])<<16))
		b[3] += float32(w * math.Float32frombits(uint32(a[3])<<16))
	}
	for ; j < len(x); j++ {
		acc[j] += float32(w * math.Float32frombits(uint32(x[j])<<16))
	}
}

// encode writes f in dt (bf16: rounded to nearest even) into out (len(f) elements of dt; the
// heap and the stage are 8-aligned, and so is every row).
func encode(dt DType, f []float32, out []byte) {
	if dt == DTypeF32 {
		copy(unsafe.Slice((*float32)(unsafe.Pointer(&out[0])), len(f)), f)
		return
	}
	o := unsafe.Slice((*shmem.BFloat16)(unsafe.Pointer(&out[0])), len(f))
	for j := encodeBF16Vec(f, o); j < len(f); j++ {
		o[j] = shmem.BFloat16From(f[j])
	}
}

// addDecoded adds the len(acc) dt values of in to acc, in float32; with set it writes each
// value + 0 instead (as axpyF32).
func addDecoded(dt DType, in []byte, acc []float32, set bool) {
	if dt == DTypeF32 {
		x := unsafe.Slice((*float32)(unsafe.Pointer(&in[0])), len(acc))
		if set {
			for j, v := range x {
				acc[j] = v + 0
			}
			return
		}
		for j, v := range x {
			acc[j] += v
		}
		return
	}
	x := unsafe.Slice((*shmem.BFloat16)(unsafe.Pointer(&in[0])), len(acc))
	j := addBF16Vec(x, acc, set)
	if set {
		for ; j < len(acc); j++ {
			acc[j] = math.Float32frombits(uint32(x[j])<<16) + 0
		}
		return
	}
	for ; j < len(acc); j++ {
		acc[j] += math.Float32frombits(uint32(x[j]) << 16)
	}
}

func putU32(b []byte, v uint32) {
	b[0], b[1], b[2], b[3] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24)
}

func getU32(b []byte) uint32 {
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
}
