// Package shmem is Roxamen's host API: job setup, the symmetric heap, and OpenSHMEM's one-sided
// operations (RMA, atomics, signals), ordering (fence, quiet) and synchronization (wait, barrier).
//
// A job is a set of processes, the PEs, started by roxrun (or mpirun, srun, torchrun). Each calls
// Init once and gets a *World; every World method and every function that takes a Sym is safe for
// concurrent use by the goroutines of that process, except the collective calls (allocation,
// barrier, Finalize), which every PE must make in the same order, one at a time.
//
// Symmetric objects (Mem, Sym[T]) name the same location on every PE: an offset into each PE's
// symmetric heap. Operations name the target PE explicitly. Errors are *Error values that name the
// call, the calling PE and the bad value; match their kind with errors.Is (ErrPERange, ErrBounds...).
//
// Lifetimes: a World lives from Init to Finalize; a Mem or Sym from its allocation to Free or
// Finalize. Using either afterwards is an error, never a fault.
package shmem

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/roxamen/roxamen/device"
	"github.com/roxamen/roxamen/device/auto"
	"github.com/roxamen/roxamen/device/host"
	"github.com/roxamen/roxamen/internal/bootstrap"
	"github.com/roxamen/roxamen/internal/env"
	"github.com/roxamen/roxamen/nic"
	"github.com/roxamen/roxamen/symheap"
)

// Ordering is the memory-model mode (see package memmodel).
type Ordering string

const (
	Strict Ordering = "strict"
	Bypass Ordering = "bypass"
)

const (
	defaultHostHeap   = 64 << 20
	defaultDeviceHeap = 1 << 30
	heapAlign         = 64 // a cache line: symmetric objects never share one with another object
	maxBarrierRound   = 32
)

// Option changes how Init sets up the job.
type Option func(*config)

type config struct {
	heapSize int64
	timeout  time.Duration
	ordering Ordering
	getenv   func(string) string
}

// WithHeapSize sets the symmetric heap size per PE (overrides ROX_HEAP_SIZE).
func WithHeapSize(n int64) Option { return func(c *config) { c.heapSize = n } }

// WithTimeout bounds every wait and collective (overrides ROX_TIMEOUT).
func WithTimeout(d time.Duration) Option { return func(c *config) { c.timeout = d } }

// withGetenv replaces os.Getenv for finding the job (tests run several PEs in one process).
func withGetenv(f func(string) string) Option { return func(c *config) { c.getenv = f } }

// World is one PE's view of the job.
type World struct {
	pe, npes int
	rank     bootstrap.Rank
	boot     *bootstrap.Client
	dev      device.Device
	ordering Ordering
	timeout  time.Duration

	heap      *symheap.Heap // guarded by allocMu
	allocMu   sync.Mutex
	heapBase  device.Ptr
	heapSize  int64
	local     []byte   // this PE's heap
	peers     [][]byte // peers' heaps mapped here; nil where the peer is reached through the NIC path
	paths     []path   // how each PE's heap is reached
	transport nic.Transport
	progress  func() bool // the transport's progress engine, where it has one
	remotes   []int       // the PEs reached through transport
	imports   []device.Ptr

	barrier barrierState
	gpu     *gpuRuntime // the device runtime on GPU backends (shmem/gpu.go); nil on the host backend
	coll    *collState  // teams and collectives (shmem/coll.go)

	closed atomic.Bool
	done   chan struct{} // closed by teardown: stops watch
	fail   atomic.Pointer[failure]
}

type failure struct{ err error }

// Init joins the job described by the environment (roxrun's ROX_* variables, or Open MPI, PMI,
// Slurm or torchrun; a lone process is a 1-PE job), sets up the symmetric heap and maps the heaps
// of the PEs on this node.
func Init(ctx context.Context, opts ...Option) (*World, error) {
	cfg := config{getenv: os.Getenv}
	for _, o := range opts {
		o(&cfg)
	}
	fail := func(kind error, err error, format string, args ...any) (*World, error) {
		return nil, &Error{Call: "Init", PE: -1, Kind: kind, Detail: fmt.Sprintf(format, args...), Err: err}
	}
	if err := env.ValidateAll(); err != nil {
		return fail(ErrBadArgument, err, "environment")
	}
	if cfg.timeout == 0 {
		d, _ := env.Timeout.Duration()
		cfg.timeout = d
	}
	if cfg.timeout <= 0 {
		return fail(ErrBadArgument, nil, "timeout %v must be positive", cfg.timeout)
	}
	ord, _ := env.Ordering.String()
	cfg.ordering = Ordering(ord)
	if cfg.heapSize == 0 {
		n, _ := env.HeapSize.Size()
		cfg.heapSize = n
	}
	if cfg.heapSize == 0 {
		cfg.heapSize = defaultHostHeap // the device default is applied once the backend is known
	}
	// The allocator works in cache lines.
	cfg.heapSize = (cfg.heapSize + heapAlign - 1) &^ (heapAlign - 1)
	if cfg.heapSize < 4096 {
		return fail(ErrBadArgument, nil, "heap size %d bytes is below the 4096-byte minimum", cfg.heapSize)
	}
	backend, _ := env.Device.String()
	drv, _, err := auto.Pick(backend)
	if err != nil {
		return fail(device.ErrNoDevice, err, "ROX_DEVICE=%s", backend)
	}
	onHost := drv.Name() == "host"
	if cfg.heapSize == defaultHostHeap && !env.HeapSize.IsSet() && !onHost {
		cfg.heapSize = defaultDeviceHeap
	}

	rank, err := bootstrap.Detect(cfg.getenv)
	if err != nil {
		return fail(ErrBadArgument, err, "detecting the job")
	}
	w := &World{pe: rank.PE, npes: rank.NPEs, rank: rank, ordering: cfg.ordering, timeout: cfg.timeout, done: make(chan struct{})}
	w.heapSize = cfg.heapSize
	initErr := func(kind error, err error, format string, args ...any) (*World, error) {
		w.teardown()
		return nil, &Error{Call: "Init", PE: w.pe, Kind: kind, Detail: fmt.Sprintf(format, args...), Err: err}
	}

	dctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()
	w.boot, err = bootstrap.Dial(dctx, rank, cfg.timeout)
	if err != nil {
		return initErr(ErrPEFailed, err, "joining the job")
	}

	if rank.LocalPE < 0 || rank.LocalNPEs < 0 {
		// The launcher did not say where this PE stands on its node: work it out from the nodes.
		nodes, err := w.boot.Allgather(dctx, []byte(rank.Node))
		if err != nil {
			return initErr(ErrPEFailed, err, "exchanging node names")
		}
		rank.LocalPE, rank.LocalNPEs = 0, 0
		for pe, n := range nodes {
			if string(n) == rank.Node {
				if pe < rank.PE {
					rank.LocalPE++
				}
				rank.LocalNPEs++
			}
		}
		w.rank = rank
	}
	count, err := drv.Count()
	if err != nil {
		return initErr(device.ErrNoDevice, err, "counting %s devices", drv.Name())
	}
	// One PE per device: the local PE index picks it (several PEs share the host backend's).
	w.dev, err = drv.Open(rank.LocalPE % count)
	if err != nil {
		return initErr(device.ErrNoDevice, err, "opening %s device %d", drv.Name(), rank.LocalPE%count)
	}
	w.heapBase, err = w.dev.Alloc(int(cfg.heapSize))
	if err != nil {
		return initErr(ErrOutOfMemory, err, "allocating a %d-byte symmetric heap on %v", cfg.heapSize, w.dev.Info())
	}
	if onHost {
		w.local = host.Bytes(w.heapBase, int(cfg.heapSize))
	}
	w.heap, err = symheap.New(uint64(cfg.heapSize), heapAlign)
	if err != nil {
		return initErr(ErrBadArgument, err, "heap size %d", cfg.heapSize)
	}

	// Exchange (node, heap size, export handle) and map the heaps of PEs on this node.
	handle, err := w.dev.Export(w.heapBase)
	if err != nil {
		return initErr(ErrBadArgument, err, "exporting the symmetric heap")
	}
	all, err := w.boot.Allgather(dctx, encodePeer(rank.Node, cfg.heapSize, handle))
	if err != nil {
		return initErr(ErrPEFailed, err, "exchanging heaps")
	}
	w.peers = make([][]byte, w.npes)
	w.paths = make([]path, w.npes)
	type peerInfo struct {
		node   string
		handle []byte
	}
	infos := make([]peerInfo, w.npes)
	nodes := map[string]bool{}
	nodeNames := make([]string, w.npes)
	for pe, b := range all {
		node, size, h, err := decodePeer(b)
		if err != nil {
			return initErr(ErrMismatch, err, "PE %d sent a malformed heap description", pe)
		}
		if size != cfg.heapSize {
			return initErr(ErrMismatch, nil, "PE %d has a %d-byte heap, PE %d a %d-byte one (ROX_HEAP_SIZE must agree)", pe, size, w.pe, cfg.heapSize)
		}
		infos[pe] = peerInfo{node, h}
		nodeNames[pe] = node
		nodes[node] = true
	}
	// Every PE takes the same decision from the same facts, so they all make the same
	// collective calls below.
	kind, _ := env.Transport.String()
	forceNIC := kind == "tcp" || kind == "ucx"
	for pe, info := range infos {
		switch {
		case pe == w.pe && onHost:
			w.peers[pe] = w.local
			w.paths[pe] = mapped(w.local)
		case pe == w.pe:
			w.paths[pe] = w.devicePath(pe, w.heapBase)
		case info.node == rank.Node && !forceNIC:
			p, err := w.dev.Import(info.handle)
			if err != nil {
				return initErr(ErrPEFailed, err, "mapping the heap of PE %d", pe)
			}
			w.imports = append(w.imports, p)
			if onHost {
				w.peers[pe] = host.Bytes(p, int(cfg.heapSize))
				w.paths[pe] = mapped(w.peers[pe])
			} else {
				w.paths[pe] = w.devicePath(pe, p)
			}
		default:
			w.remotes = append(w.remotes, pe)
		}
	}
	if forceNIC || len(nodes) > 1 {
		w.transport, err = w.startTransport(dctx, kind)
		if err != nil {
			return initErr(ErrPEFailed, err, "starting the %s transport", kind)
		}
		for _, pe := range w.remotes {
			w.paths[pe] = remote{w.transport, pe}
		}
		if p, ok := w.transport.(interface{ Progress() bool }); ok {
			w.progress = p.Progress
		}
	}
	if !onHost {
		if err := w.startDevice(dctx); err != nil {
			return initErr(ErrPEFailed, err, "starting the device runtime on %v", w.dev.Info())
		}
	}
	if err := w.initBarrier(); err != nil {
		return initErr(ErrOutOfMemory, err, "reserving barrier space")
	}
	if err := w.initColl(nodeNames); err != nil {
		return initErr(ErrOutOfMemory, err, "reserving collective space")
	}
	go w.watch()
	// Everyone has mapped everyone before anyone communicates.
	if err := w.boot.Barrier(dctx); err != nil {
		return initErr(ErrPEFailed, err, "first barrier")
	}
	return w, nil
}

func encodePeer(node string, heapSize int64, handle []byte) []byte {
	b := binary.AppendUvarint(nil, uint64(len(node)))
	b = append(b, node...)
	b = binary.AppendUvarint(b, uint64(heapSize))
	return append(b, handle...)
}

func decodePeer(b []byte) (node string, size int64, handle []byte, err error) {
	n, k := binary.Uvarint(b)
	if k <= 0 || uint64(len(b)-k) < n {
		return "", 0, nil, errors.New("short node name")
	}
	node, b = string(b[k:k+int(n)]), b[k+int(n):]
	s, k := binary.Uvarint(b)
	if k <= 0 {
		return "", 0, nil, errors.New("short heap size")
	}
	return node, int64(s), b[k:], nil
}

// watch turns a failure the rendezvous reports (a dead PE, a global exit) into the error every
// later wait returns.
func (w *World) watch() {
	select {
	case <-w.boot.Failed():
	case <-w.done:
		return
	}
	err := w.boot.Err()
	if err == nil {
		err = errors.New("the job ended")
	}
	var pe *bootstrap.PeerError
	if errors.As(err, &pe) && pe.Aborted && !w.closed.Load() {
		status := pe.Status
		// Another PE called GlobalExit: every PE ends with its status, as OpenSHMEM requires,
		// before any wait can report the exit as a failure.
		fmt.Fprintf(os.Stderr, "roxamen: PE %d: exiting with status %d: %v\n", w.pe, status, err)
		os.Exit(status)
	}
	w.fail.CompareAndSwap(nil, &failure{err})
}

// failed returns the job failure, if one is known.
func (w *World) failed() error {
	if f := w.fail.Load(); f != nil {
		return f.err
	}
	return nil
}

// check validates the receiver for call.
func (w *World) check(call string) error {
	if w == nil {
		return &Error{Call: call, PE: -1, Kind: ErrNotInitialized}
	}
	if w.closed.Load() {
		return w.errorf(call, ErrFinalized, "")
	}
	return nil
}

func (w *World) checkPE(call string, pe int) error {
	if err := w.check(call); err != nil {
		return err
	}
	if pe < 0 || pe >= w.npes {
		return w.errorf(call, ErrPERange, "target PE %d, want 0 <= pe < %d", pe, w.npes)
	}
	return nil
}

// MyPE returns this PE's number (OpenSHMEM shmem_my_pe); -1 on a nil World.
func (w *World) MyPE() int {
	if w == nil {
		return -1
	}
	return w.pe
}

// NPEs returns the number of PEs in the job (shmem_n_pes); 0 on a nil World.
func (w *World) NPEs() int {
	if w == nil {
		return 0
	}
	return w.npes
}

// LocalPE returns this PE's index among the PEs of its node.
func (w *World) LocalPE() int { return w.rank.LocalPE }

// Ordering returns the memory-model mode the job runs in (ROX_ORDERING).
func (w *World) Ordering() Ordering { return w.ordering }

// Device returns the device this PE's symmetric heap lives on.
func (w *World) Device() device.Info { return w.dev.Info() }

// Finalize is collective: it completes this PE's operations, waits for every PE, and releases
// the heap. Every later call on w fails with ErrFinalized.
func (w *World) Finalize() error {
	if err := w.check("Finalize"); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), w.timeout)
	defer cancel()
	var err error
	if e := w.boot.Barrier(ctx); e != nil {
		err = &Error{Call: "Finalize", PE: w.pe, Kind: ErrPEFailed, Err: e}
	}
	w.closed.Store(true)
	w.teardown()
	return err
}

func (w *World) teardown() {
	close(w.done)
	w.stopDevice()
	if w.transport != nil {
		_ = w.transport.Close()
	}
	if w.boot != nil {
		_ = w.boot.Close()
	}
	if w.dev != nil {
		for _, p := range w.imports {
			_ = w.dev.CloseImport(p)
		}
		if w.heapBase != 0 {
			_ = w.dev.Free(w.heapBase)
		}
		_ = w.dev.Close()
	}
	w.local, w.peers, w.paths, w.imports = nil, nil, nil, nil
}

// GlobalExit ends the whole job with status (shmem_global_exit): every other PE exits with the
// same status as soon as it learns of it. It does not return.
func (w *World) GlobalExit(status int) {
	if w != nil && w.boot != nil && !w.closed.Load() {
		w.boot.Abort(status, fmt.Sprintf("PE %d called GlobalExit(%d)", w.pe, status))
	}
	os.Exit(status)
}
