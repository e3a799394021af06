// Package shmem is Roxamen's host API: job setup, the symmetric heap, and OpenSHMEM's one-sided
// operations (RMA, atomics, signals), ordering (fence, quiet) and synchronization (wait, barrier).
//
// A job is a set of processes, the PEs, started by roxrun (or mpirun, srun, torchrun). Each calls
// Init once and gets a *World; every World method and every function that takes a Sym is safe for
// concurrent use by the goroutines of that process, except the collective calls (allocation,
// barrier, Finalize), which every PE must make in the same order, one at a time: a collective call
// made while another is in progress on the PE fails with ErrConcurrent, and each is numbered, so
// that a PE whose call differs from the others' at the same number fails with ErrMismatch naming
// both PEs and both calls.
//
// Symmetric objects (Mem, Sym[T]) name the same location on every PE: an offset into each PE's
// symmetric heap. Operations name the target PE explicitly. Errors are *Error values that name the
// call, the calling PE and the bad value; match their kind with errors.Is (ErrPERange, ErrBounds...).
//
// Lifetimes: a World lives from Init to Finalize; a Mem or Sym from its allocation to Free,
// Realloc or Finalize. Using either afterwards is an error (ErrFinalized, ErrFreed naming the
// stale allocation), never a fault, and writes nothing.
package shmem

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/roxamen/roxamen/device"
	"github.com/roxamen/roxamen/device/auto"
	"github.com/roxamen/roxamen/device/host"
	"github.com/roxamen/roxamen/internal/bootstrap"
	"github.com/roxamen/roxamen/internal/env"
	"github.com/roxamen/roxamen/internal/mpslog"
	"github.com/roxamen/roxamen/nic"
	"github.com/roxamen/roxamen/shmem/internal/coll"
	"github.com/roxamen/roxamen/shmem/internal/gpurt"
	"github.com/roxamen/roxamen/symheap"
)

// Ordering is the memory-model mode (see package memmodel).
type Ordering string

const (
	Strict Ordering = "strict"
	Bypass Ordering = "bypass"
)

const (
	minHeap           = env.MinHeap
	defaultHostHeap   = 64 << 20
	defaultDeviceHeap = 1 << 30
	heapAlign         = 64 // a cache line: symmetric objects never share one with another object
	maxBarrierRound   = 32
)

// Option changes how Init sets up the job.
type Option func(*config)

type config struct {
	heapSize int64
	heapSet  bool // WithHeapSize was given
	timeout  time.Duration
	ordering Ordering
	getenv   func(string) string
	devTeams bool // the device team table on the host backend too (tests run device code on the CPU)
}

// WithHeapSize sets the symmetric heap size per PE (overrides ROX_HEAP_SIZE).
func WithHeapSize(n int64) Option { return func(c *config) { c.heapSize, c.heapSet = n, true } }

// WithTimeout bounds every wait and collective (overrides ROX_TIMEOUT).
func WithTimeout(d time.Duration) Option { return func(c *config) { c.timeout = d } }

// withGetenv replaces os.Getenv for finding the job (tests run several PEs in one process).
func withGetenv(f func(string) string) Option { return func(c *config) { c.getenv = f } }

// withDevTeams makes Init build the device team table on the host backend too.
func withDevTeams() Option { return func(c *config) { c.devTeams = true } }

// World is one PE's view of the job.
type World struct {
	pe, npes int
	rank     bootstrap.Rank
	boot     *bootstrap.Client
	dev      device.Device
	ordering Ordering
	timeout  time.Duration
	knob     string // where timeout came from: "ROX_TIMEOUT=30s" or "WithTimeout(2s)"
	key      string // this PE's entry in initialized
	// dropBoot: Finalize failed, so this PE leaves the bootstrap without goodbye (set before
	// closeConnections, by the goroutine that finalizes).
	dropBoot bool

	heap      *symheap.Heap // guarded by allocMu
	allocMu   sync.Mutex
	allocs    map[uint64]*allocation // the live allocations by offset; guarded by allocMu
	allocSeq  uint64                 // allocations made so far; guarded by allocMu
	heapBase  device.Ptr
	heapSize  int64
	local     []byte   // this PE's heap
	peers     [][]byte // peers' heaps mapped here; nil where the peer is reached through the NIC path
	paths     []path   // how each PE's heap is reached
	transport nic.Transport
	progress  func() bool  // the transport's progress engine, where it has one
	remotes   []int        // the PEs reached through transport
	reorder   *nic.Reorder // ROX_DELIVERY=reorder: the reordering path, which transport is (shmem/reorder.go)
	imports   []device.Ptr

	barrier barrierState
	coll    collectives    // the World's collective calls, one at a time, numbered
	gpu     *gpurt.Runtime // the device runtime on GPU backends (package gpurt); nil on the host backend
	teams   *collState     // teams and collectives (coll_engine.go)
	dteams  *gpurt.Teams   // the device team table (package gpurt); nil on the host backend

	scoll     *gpurt.Colls // stream-ordered collectives' engine (package gpurt), made on first use
	scollOnce sync.Once

	initReport InitReport   // what Init cost (InitReport)
	nodeNames  []string     // each PE's node, from Init's exchange
	pids       []int        // each PE's process ID, from Init's exchange: the MPS server's log names processes
	mps        *mpslog.Logs // the log of the CUDA MPS server this PE's GPU context is a client of, from Init on; nil without one
	// oversubscribed: this node has more PEs than this PE has CPUs; waits yield at once (spinner)
	oversubscribed bool
	railPick       *railPick // the default rails, once chosen (rails.go)

	closed   atomic.Bool
	inflight atomic.Int64  // calls between enter and leave, and inflightClosed: Finalize unmaps nothing while any is in flight
	done     chan struct{} // closed by teardown: stops watch
	fail     atomic.Pointer[failure]
}

type failure struct {
	err error
	pe  int // the PE that failed, -1 when not known
	// departed: the PE exited with status 0 without Finalize (the launcher saw it end). A wait
	// that depends on another PE (a barrier round) keeps waiting: the departed PE may have done
	// its part before it left; every other wait, and RMA to it, fails naming it.
	departed bool
}

// Init joins the job described by the environment (roxrun's ROX_* variables, or Open MPI, PMI,
// Slurm or torchrun; a lone process is a 1-PE job), sets up the symmetric heap and maps the heaps
// of the PEs on this node.
func Init(ctx context.Context, opts ...Option) (*World, error) {
	j := &initJob{cfg: config{getenv: os.Getenv}}
	j.clock = newInitClock(func() *bootstrap.Client {
		if j.w == nil {
			return nil
		}
		return j.w.boot
	})
	if err := j.readConfig(opts); err != nil {
		return nil, err
	}
	dctx, cancel := context.WithTimeout(ctx, j.cfg.timeout)
	defer cancel()
	for _, phase := range []func(context.Context) error{
		j.bootstrap, j.openDevice, j.mapHeaps, j.placeHeap, j.startTransport,
		j.startGPURuntime, j.reserveCollectiveSpace, j.finalBarrier,
	} {
		if err := phase(dctx); err != nil {
			if j.w != nil {
				j.w.teardown()
			}
			return nil, err
		}
	}
	j.report()
	return j.w, nil
}

// initJob is what Init's phases hand on to each other.
type initJob struct {
	cfg      config
	clock    *initClock
	w        *World // from bootstrap on
	rank     bootstrap.Rank
	rankErr  error // the job's description is bad; reported once the device was picked
	pe       int   // this PE for errors, -1 while unknown
	knob     string
	heapKnob string
	drv      device.Driver
	onHost   bool
	kind     string // ROX_TRANSPORT
	forceNIC bool   // ROX_TRANSPORT=tcp|ucx: the NIC path between PEs of one node too
	delivery string // ROX_DELIVERY
	nodes    int    // how many nodes the job spans
	// hostHeap: this PE's heap is host-pinned, device-mapped memory, because the transport (which
	// reads and writes it from the host) starts on a GPU backend.
	hostHeap      bool
	transportKind string // the transport started, for the report; "" for none
}

// fail returns Init's error, naming this PE where it is known.
func (j *initJob) fail(kind error, err error, format string, args ...any) error {
	return &Error{Call: "Init", PE: j.pe, Kind: kind, Detail: fmt.Sprintf(format, args...), Err: err}
}

// readConfig reads the options and knobs and picks the device backend: nothing is started yet.
func (j *initJob) readConfig(opts []Option) error {
	cfg := &j.cfg
	for _, o := range opts {
		o(cfg)
	}
	// The job is known first, so that every error below names this PE.
	j.rank, j.rankErr = bootstrap.Detect(cfg.getenv)
	j.pe = -1
	if j.rankErr == nil {
		j.pe = j.rank.PE
	} else if v, err := strconv.Atoi(cfg.getenv("ROX_PE")); err == nil && v >= 0 {
		j.pe = v
	}
	if err := env.ValidateAll(); err != nil {
		return j.fail(ErrBadArgument, err, "environment")
	}
	j.knob = fmt.Sprintf("WithTimeout(%v)", cfg.timeout)
	if cfg.timeout == 0 {
		d, _ := env.Timeout.Duration()
		cfg.timeout = d
		j.knob = fmt.Sprintf("%s=%s", env.Timeout.Name, env.Timeout.Raw())
	}
	if cfg.timeout <= 0 {
		return j.fail(ErrBadArgument, nil, "%s: the timeout must be positive", j.knob)
	}
	ord, _ := env.Ordering.String()
	cfg.ordering = Ordering(ord)
	j.heapKnob = fmt.Sprintf("WithHeapSize(%d)", cfg.heapSize)
	if !cfg.heapSet && env.HeapSize.IsSet() {
		cfg.heapSize, _ = env.HeapSize.Size()
		cfg.heapSet = true
		j.heapKnob = fmt.Sprintf("%s=%s", env.HeapSize.Name, env.HeapSize.Raw())
	}
	if cfg.heapSet && cfg.heapSize < minHeap {
		return j.fail(ErrBadArgument, nil, "%s: a symmetric heap of %d bytes is below the %d-byte minimum", j.heapKnob, cfg.heapSize, minHeap)
	}
	if !cfg.heapSet {
		cfg.heapSize = defaultHostHeap // the device default is applied once the backend is known
		j.heapKnob = fmt.Sprintf("the default heap size (%s unset)", env.HeapSize.Name)
	}
	// The allocator works in cache lines.
	cfg.heapSize = (cfg.heapSize + heapAlign - 1) &^ (heapAlign - 1)
	backend, _ := env.Device.String()
	drv, _, err := auto.Pick(backend)
	if err != nil {
		return j.fail(device.ErrNoDevice, err, "ROX_DEVICE=%s", backend)
	}
	j.drv, j.onHost = drv, drv.Name() == "host"
	if !cfg.heapSet && !j.onHost {
		cfg.heapSize = defaultDeviceHeap
	}
	j.kind, _ = env.Transport.String()
	j.forceNIC = j.kind == "tcp" || j.kind == "ucx"
	j.delivery, _ = env.Delivery.String()
	j.clock.mark(PhaseDevice)
	return nil
}

// bootstrap makes the World and joins the job's rendezvous; it learns where this PE stands on its node.
func (j *initJob) bootstrap(ctx context.Context) error {
	if j.rankErr != nil {
		return j.fail(kindOf(j.rankErr, ErrBadArgument), j.rankErr, "detecting the job")
	}
	key, err := register(j.rank)
	if err != nil {
		return j.fail(ErrInitialized, nil, "%v", err)
	}
	cfg := j.cfg
	w := &World{pe: j.rank.PE, npes: j.rank.NPEs, rank: j.rank, ordering: cfg.ordering, timeout: cfg.timeout, knob: j.knob, key: key, done: make(chan struct{}), allocs: map[uint64]*allocation{}}
	w.heapSize = cfg.heapSize
	j.w = w
	w.boot, err = bootstrap.Dial(ctx, j.rank, cfg.timeout)
	if err != nil {
		return j.fail(kindOf(err, ErrPEFailed), err, "joining the job%s", w.timeoutHint(err))
	}
	rank := w.boot.Rank() // under PMIx, Dial completes it (job size, local ranks, node)
	w.rank, w.npes = rank, rank.NPEs
	if rank.LocalPE < 0 || rank.LocalNPEs < 0 {
		// The launcher did not say where this PE stands on its node: work it out from the nodes.
		nodes, err := w.boot.Allgather(ctx, []byte(rank.Node))
		if err != nil {
			return j.fail(kindOf(err, ErrPEFailed), err, "exchanging node names%s", w.timeoutHint(err))
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
	j.rank = w.rank
	w.oversubscribed = rank.LocalNPEs > runtime.NumCPU()
	j.clock.mark(PhaseBootstrap)
	return nil
}

// openDevice opens this PE's device and allocates its symmetric heap there.
func (j *initJob) openDevice(context.Context) error {
	w, cfg, rank := j.w, j.cfg, j.rank
	if j.onHost {
		// The host backend's heaps are shared memory that is only charged when touched: a heap the
		// node cannot hold would be accepted here and OOM-killed mid-job.
		if err := checkHostMemory("/", cfg.heapSize, max(rank.LocalNPEs, 1), j.heapKnob); err != nil {
			return j.fail(ErrOutOfMemory, nil, "%v", err)
		}
	}
	count, err := j.drv.Count()
	if err != nil {
		return j.fail(device.ErrNoDevice, err, "counting %s devices", j.drv.Name())
	}
	// One PE per device: the local PE index picks it (several PEs share the host backend's).
	w.dev, err = j.drv.Open(rank.LocalPE % count)
	if err != nil {
		return j.fail(device.ErrNoDevice, err, "opening %s device %d", j.drv.Name(), rank.LocalPE%count)
	}
	j.clock.mark(PhaseDevice)
	w.heapBase, err = w.dev.Alloc(int(cfg.heapSize))
	if err != nil {
		return j.fail(kindOf(err, ErrOutOfMemory), err, "allocating a %d-byte symmetric heap on %v", cfg.heapSize, w.dev.Info())
	}
	if j.onHost {
		w.local = host.Bytes(w.heapBase, int(cfg.heapSize))
	}
	w.heap, err = symheap.New(uint64(cfg.heapSize), heapAlign)
	if err != nil {
		return j.fail(ErrBadArgument, err, "heap size %d", cfg.heapSize)
	}
	return nil
}

// mapHeaps exchanges what every PE needs of every other and maps the heaps of this node's PEs;
// the others are reached through the transport.
func (j *initJob) mapHeaps(ctx context.Context) error {
	w, rank := j.w, j.rank
	heapSize := j.cfg.heapSize
	// What every PE needs of every other is small and fixed: its node (node membership, for
	// the mapping and the teams) and its heap size, which must agree (checked here, by every
	// PE, rather than at first contact mid-job: it is 8 bytes beside the node name the
	// allgather carries anyway). The export handle is only for PEs of this node: published
	// under a per-PE key and fetched by those that map it. Transport addresses are looked up
	// on first use (startTransport). Every PE takes the same decisions from the same facts, so
	// they all make the same collective calls below.
	var handle []byte
	var err error
	if !j.forceNIC {
		if handle, err = w.dev.Export(w.heapBase); err != nil {
			return j.fail(ErrBadArgument, err, "exporting the symmetric heap")
		}
	}
	j.clock.mark(PhaseHeap)
	// A job on one node (as its launcher says) maps every PE's heap everywhere: the handles then
	// travel in the allgather, which every PE makes anyway, rather than as one request and one
	// reply per PE of the node (510 messages per PE at 256 PEs).
	oneNode := rank.NPEs > 1 && rank.LocalNPEs == rank.NPEs
	var shared []byte
	switch {
	case handle != nil && oneNode:
		shared = handle
	case handle != nil:
		if err := w.boot.Put(ctx, heapKey(w.pe), handle); err != nil {
			return j.fail(kindOf(err, ErrPEFailed), err, "publishing the heap's export handle%s", w.timeoutHint(err))
		}
	}
	// Under CUDA MPS a fatal fault of one PE's kernel fails every client's context: the server's
	// log, from here on, and every PE's process ID let each PE's error name whose kernel it was.
	if mpslog.Running(os.Getenv) {
		w.mps = mpslog.Since(mpslog.LogDir(os.Getenv))
	}
	all, err := w.boot.Allgather(ctx, encodePeer(rank.Node, heapSize, os.Getpid(), shared))
	if err != nil {
		return j.fail(kindOf(err, ErrPEFailed), err, "exchanging heaps%s", w.timeoutHint(err))
	}
	j.clock.mark(PhaseBootstrap)
	w.peers = make([][]byte, w.npes)
	w.paths = make([]path, w.npes)
	nodes := map[string]bool{}
	w.nodeNames = make([]string, w.npes)
	w.pids = make([]int, w.npes)
	handles := make([][]byte, w.npes)
	herrs := make([]error, w.npes)
	for pe, b := range all {
		node, size, pid, h, err := decodePeer(b)
		if err != nil {
			return j.fail(ErrMismatch, err, "PE %d sent a malformed heap description", pe)
		}
		if size != heapSize {
			return j.fail(ErrMismatch, nil, "PE %d has a %d-byte heap, PE %d a %d-byte one (ROX_HEAP_SIZE must agree)", pe, size, w.pe, heapSize)
		}
		w.nodeNames[pe] = node
		w.pids[pe] = pid
		nodes[node] = true
		if oneNode {
			handles[pe] = h
		}
	}
	j.nodes = len(nodes)
	sameNode := func(pe int) bool { return pe != w.pe && w.nodeNames[pe] == rank.Node && !j.forceNIC }
	// Otherwise the node's handles are fetched all at once: one round trip, not one per PE.
	var fetch sync.WaitGroup
	for pe := range w.npes {
		if sameNode(pe) && handles[pe] == nil {
			fetch.Add(1)
			go func() {
				defer fetch.Done()
				handles[pe], herrs[pe] = w.boot.Get(ctx, heapKey(pe))
			}()
		}
	}
	fetch.Wait()
	for pe := range w.npes {
		switch {
		case pe == w.pe && j.onHost:
			w.peers[pe] = w.local
			w.paths[pe] = mapped(w.local)
		case pe == w.pe:
			w.paths[pe] = w.devicePath(pe, w.heapBase)
		case sameNode(pe):
			if err := herrs[pe]; err != nil {
				return j.fail(kindOf(err, ErrPEFailed), err, "fetching the heap export handle of PE %d%s", pe, w.timeoutHint(err))
			}
			p, err := w.dev.Import(handles[pe])
			if err != nil {
				return j.fail(kindOf(err, ErrSystem), err, "mapping the heap of PE %d", pe)
			}
			w.imports = append(w.imports, p)
			if j.onHost {
				w.peers[pe] = host.Bytes(p, int(heapSize))
				w.paths[pe] = mapped(w.peers[pe])
			} else {
				w.paths[pe] = w.devicePath(pe, p)
			}
		default:
			w.remotes = append(w.remotes, pe)
		}
	}
	j.clock.mark(PhaseMapping)
	return nil
}

// needTransport: some PE is reached through the NIC path (another node, or the path forced).
func (j *initJob) needTransport() bool { return j.forceNIC || j.nodes > 1 }

// placeHeap decides where this PE's heap lives as kernels and the transport see it, before the
// transport starts over it: on a GPU with a transport, host-pinned memory mapped into the device
// (the transport's target side reads and writes it from the host); otherwise where it is.
func (j *initJob) placeHeap(context.Context) error {
	j.hostHeap = !j.onHost && j.needTransport()
	if !j.hostHeap {
		return nil
	}
	if err := j.w.placeHostHeap(); err != nil {
		return j.fail(ErrPEFailed, err, "starting the device runtime on %v", j.w.dev.Info())
	}
	j.clock.mark(PhaseHeap)
	return nil
}

// startTransport starts the NIC transport over the heap placeHeap chose, where some PE needs it.
func (j *initJob) startTransport(ctx context.Context) error {
	if !j.needTransport() {
		return nil
	}
	w := j.w
	j.transportKind = j.kind
	if j.kind != "ucx" {
		j.transportKind = "tcp"
	}
	var err error
	w.transport, err = w.startTransport(ctx, j.kind)
	if err != nil {
		return j.fail(kindOf(err, ErrPEFailed), err, "starting the %s transport%s", j.kind, w.timeoutHint(err))
	}
	for _, pe := range w.remotes {
		w.paths[pe] = remote{w.transport, pe}
	}
	if p, ok := w.transport.(interface{ Progress() bool }); ok {
		w.progress = p.Progress
	}
	j.clock.mark(PhaseTransport)
	return nil
}

// startGPURuntime starts the device runtime on GPU backends: peer access, the runtime modules,
// the ring and its proxy.
func (j *initJob) startGPURuntime(ctx context.Context) error {
	w := j.w
	if j.delivery == "reorder" && !j.onHost {
		return j.fail(ErrBadArgument, nil, "ROX_DELIVERY=reorder: the reordering delivery path is for the host backend only, this PE runs on %v", w.dev.Info())
	}
	if j.onHost {
		return nil
	}
	if err := w.startDevice(ctx); err != nil {
		return j.fail(ErrPEFailed, err, "starting the device runtime on %v", w.dev.Info())
	}
	j.clock.mark(PhaseRuntime)
	return nil
}

// reserveCollectiveSpace reserves the barrier's, the collectives' and the device teams' space at
// the start of the heap, at the same offset on every PE; ROX_DELIVERY=reorder starts here.
func (j *initJob) reserveCollectiveSpace(context.Context) error {
	w := j.w
	if err := w.initBarrier(); err != nil {
		return j.fail(ErrOutOfMemory, err, "reserving barrier space")
	}
	if j.delivery == "reorder" {
		if err := w.startReorder(); err != nil {
			return j.fail(ErrBadArgument, err, "starting the reordering delivery path (ROX_DELIVERY=reorder)")
		}
	}
	if err := w.initColl(w.nodeNames); err != nil {
		return j.fail(ErrOutOfMemory, err, "reserving collective space")
	}
	if !j.onHost || j.cfg.devTeams {
		if err := w.initDevTeams(); err != nil {
			return j.fail(ErrOutOfMemory, err, "setting up the device team table")
		}
	}
	j.clock.mark(PhaseHeap)
	return nil
}

// finalBarrier: everyone has mapped everyone and published its addresses before anyone
// communicates.
func (j *initJob) finalBarrier(ctx context.Context) error {
	w := j.w
	go w.watch()
	if err := w.boot.Barrier(ctx); err != nil {
		return j.fail(kindOf(err, ErrPEFailed), err, "first barrier%s", w.timeoutHint(err))
	}
	j.clock.mark(PhaseBarrier)
	return nil
}

// report records what Init cost (ROX_DEBUG=1 prints it) and makes the World the process's.
func (j *initJob) report() {
	w := j.w
	w.initReport = j.clock.report(w.pe, w.npes, j.transportKind)
	if env.Debugging(env.LevelInfo) {
		fmt.Fprintf(os.Stderr, "roxamen: %v\n", w.initReport)
	}
	w.registered()
}

// heapKey is the bootstrap key under which PE pe publishes its heap's export handle.
func heapKey(pe int) string { return "rox/heap/" + strconv.Itoa(pe) }

// timeoutHint names the knob behind a timeout of Init, which a too-small ROX_TIMEOUT causes.
func (w *World) timeoutHint(err error) string {
	if kindOf(err, nil) != ErrTimeout {
		return ""
	}
	return fmt.Sprintf(" within %v (%s)", w.timeout, w.knob)
}

func encodePeer(node string, heapSize int64, pid int, handle []byte) []byte {
	b := binary.AppendUvarint(nil, uint64(len(node)))
	b = append(b, node...)
	b = binary.AppendUvarint(b, uint64(heapSize))
	b = binary.AppendUvarint(b, uint64(pid))
	return append(b, handle...)
}

func decodePeer(b []byte) (node string, size int64, pid int, handle []byte, err error) {
	n, k := binary.Uvarint(b)
	if k <= 0 || uint64(len(b)-k) < n {
		return "", 0, 0, nil, errors.New("short node name")
	}
	node, b = string(b[k:k+int(n)]), b[k+int(n):]
	s, k := binary.Uvarint(b)
	if k <= 0 {
		return "", 0, 0, nil, errors.New("short heap size")
	}
	b = b[k:]
	p, k := binary.Uvarint(b)
	if k <= 0 {
		return "", 0, 0, nil, errors.New("short process ID")
	}
	return node, int64(s), int(p), b[k:], nil
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
	failed := -1
	if errors.As(err, &pe) {
		failed = pe.PE
	}
	if pe != nil && pe.Aborted && !w.closed.Load() {
		status := pe.Status
		// Another PE called GlobalExit: every PE ends with its status, as OpenSHMEM requires,
		// before any wait can report the exit as a failure.
		fmt.Fprintf(os.Stderr, "roxamen: PE %d: exiting with status %d: %v\n", w.pe, exitCode(status), err)
		os.Exit(exitCode(status))
	}
	departed := pe != nil && pe.Exited && !pe.Aborted && pe.Status == 0
	w.fail.CompareAndSwap(nil, &failure{err: err, pe: failed, departed: departed})
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
func (w *World) LocalPE() int {
	if w == nil {
		return -1
	}
	return w.rank.LocalPE
}

// LocalNPEs returns the number of PEs on this PE's node (the launcher's, e.g. PMIx's, count).
func (w *World) LocalNPEs() int {
	if w == nil {
		return 0
	}
	return w.rank.LocalNPEs
}

// Ordering returns the memory-model mode the job runs in (ROX_ORDERING).
func (w *World) Ordering() Ordering {
	if w == nil {
		return ""
	}
	return w.ordering
}

// Timeout is how long a wait may last before the job is declared failed (WithTimeout, or
// ROX_TIMEOUT): libraries built on shmem bound their own waits by it.
func (w *World) Timeout() time.Duration {
	if w == nil {
		return 0
	}
	return w.timeout
}

// Device returns the device this PE's symmetric heap lives on.
func (w *World) Device() device.Info {
	if w == nil || w.dev == nil {
		return device.Info{}
	}
	return w.dev.Info()
}

// Finalize is collective: it completes this PE's operations, waits for every PE, and releases
// the heap. Every later call on w fails with ErrFinalized, and Local and Ptr return nil. A slice
// they returned before stays safe to use on the host backend, but over zero pages of this
// process alone: it no longer shows or reaches any PE's heap. A Finalize that fails leaves the
// job as a failed PE would: the others learn at once that this PE is gone.
func (w *World) Finalize() error {
	if err := w.check("Finalize"); err != nil {
		return err
	}
	c, err := w.coll.begin(w, "Finalize")
	if err != nil {
		return err
	}
	defer c.end()
	ctx, cancel := context.WithTimeout(context.Background(), w.timeout)
	defer cancel()
	qerr := w.quiet("Finalize", -1) // this PE's operations complete first
	var xerr error
	if w.teams != nil {
		// The World's calls are TeamWorld's sequence: a PE at another call of it (an allocation,
		// a collective) is a mismatch found at once. Before closing: the exchange's waits end at
		// a closed World.
		xerr = c.exchange(ctx, worldCall{id: coll.CallFinalize})
	}
	if !w.closed.CompareAndSwap(false, true) {
		return w.errorf("Finalize", ErrFinalized, "another goroutine finalized meanwhile")
	}
	w.inflight.Or(inflightClosed)
	// Calls that other goroutines have in flight finish before any PE tears down: they may be
	// copying into a heap mapped here, or waiting on a peer's transport. A wait sees closed
	// within microseconds and leaves; new calls fail with ErrFinalized.
	n := w.drain(ctx)
	// Agreeing is the barrier Finalize needs, and proves that every PE is finalizing. Whatever
	// it finds, this PE is finalized.
	err = xerr
	if err == nil {
		err = c.agree(0, 0)
	}
	if err == nil {
		err = qerr
	}
	if n > 0 || err != nil {
		// A failed Finalize is no orderly goodbye: the PEs that wait for this one (in their
		// Finalize, or a call it never made) learn at once that it left, instead of timing out.
		// When the job had already failed there is nothing new to tell.
		w.dropBoot = !errors.Is(err, ErrPEFailed) && w.boot != nil && w.boot.Err() == nil
	}
	if n > 0 {
		// Unmapping under a call would fault: the heap stays mapped, the connections go.
		unregister(w.key)
		close(w.done)
		w.closeConnections()
		e := w.errorf("Finalize", ErrTimeout, "%d calls still in flight after %v (%s); the symmetric heap stays mapped", n, w.timeout, w.knob)
		return errors.Join(e, err)
	}
	w.teardown()
	return err
}

// drain waits until no call is in flight, or ctx ends; it returns how many still are.
func (w *World) drain(ctx context.Context) int64 {
	for d := time.Microsecond; ; d = min(2*d, time.Millisecond) {
		n := w.inflight.Load() &^ inflightClosed
		if n == 0 || ctx.Err() != nil {
			return n
		}
		time.Sleep(d)
	}
}

func (w *World) teardown() {
	unregister(w.key)
	close(w.done)
	w.stopDevice()
	w.closeConnections()
	if w.dev != nil {
		// Where the heaps are host memory, slices over them (Local, Ptr) that the program still
		// holds stay valid, over zero pages: a use after Finalize must not crash the process.
		closeImport, free := w.dev.CloseImport, w.dev.Free
		if r, ok := w.dev.(interface{ Retire(device.Ptr) error }); ok {
			closeImport, free = r.Retire, r.Retire
		}
		for _, p := range w.imports {
			_ = closeImport(p)
		}
		if w.heapBase != 0 {
			_ = free(w.heapBase)
		}
		_ = w.dev.Close()
	}
	// local, peers and paths stay: a call that looks at them after closed is set is refused, but
	// clearing them would race with its look.
	w.imports = nil
}

func (w *World) closeConnections() {
	if w.transport != nil {
		_ = w.transport.Close()
	}
	switch {
	case w.boot == nil:
	case w.dropBoot:
		_ = w.boot.Drop()
	default:
		_ = w.boot.Close()
	}
}

// GlobalExit ends the whole job with status (shmem_global_exit): every other PE exits with the
// same status as soon as it learns of it. It does not return.
//
// A process's exit code holds 8 bits: the code is status's low 8 bits (300 gives 44, -1 gives
// 255), except that a nonzero status whose low 8 bits are 0 (256, -256) gives 1, so that a job
// ended with a nonzero status never looks successful. roxrun exits with the same code.
func (w *World) GlobalExit(status int) {
	if w != nil && w.boot != nil && !w.closed.Load() {
		w.boot.Abort(status, fmt.Sprintf("PE %d called GlobalExit(%d)", w.pe, status))
	}
	os.Exit(exitCode(status))
}

// exitCode is the process exit code of GlobalExit(status); tools/launch maps it the same way.
func exitCode(status int) int {
	if c := status & 0xff; c != 0 || status == 0 {
		return c
	}
	return 1
}

// collectives serializes the collective calls of one group of PEs (the World's; a team keeps its
// own) and numbers them, so that each call can prove that every PE makes the same calls in the same
// order. Collective calls made from several goroutines of a PE at once cannot be proved so (each PE
// would order them its own way), so a call that finds another in progress is refused with
// ErrConcurrent naming both.
type collectives struct {
	mu      sync.Mutex             // held from begin to end
	current atomic.Pointer[string] // the call in progress (or the last), for the error of a concurrent one
	seq     uint64                 // numbers given so far; guarded by mu
	last    string                 // the last numbered call; guarded by mu
	cur     collective             // the call in progress (begin hands it out: no allocation per call)
}

// collective is one collective call in progress; end releases it.
type collective struct {
	q    *collectives
	w    *World
	call string
	prev string // the call numbered before this one
	seq  uint64 // 0 until number
	// nic: the call's place in TeamWorld's sequence on the NIC path, while its protocol runs
	// (exchange), whose waits watch for a PE at another call (see coll.NICCall)
	nic  *coll.NICCall
	rest <-chan struct{} // an agreement left for the header exchange: closed when it ends
}

// begin starts collective call on w, or refuses it while another is in progress.
func (q *collectives) begin(w *World, call string) (*collective, error) {
	if !q.mu.TryLock() {
		cur := "another collective call"
		if p := q.current.Load(); p != nil {
			cur = *p
		}
		return nil, w.errorf(call, ErrConcurrent, "%s is in progress in another goroutine: collective calls must be made one at a time, in the same order on every PE", cur)
	}
	q.publish(call)
	q.cur = collective{q: q, w: w, call: call, prev: q.last}
	return &q.cur, nil
}

// number gives c its place in the sequence on first use: a call refused before it communicates
// takes none, as on every PE.
func (c *collective) number() uint64 {
	if c.seq == 0 {
		c.q.seq++
		c.seq = c.q.seq
		if tc := c.w.teams; tc != nil && c.q == &c.w.coll {
			// TeamWorld's calls and the World's are one sequence (inSequence): its next epoch.
			c.seq = tc.world.c.Epoch() + 1
		}
		c.q.last = c.call
	}
	return c.seq
}

func (c *collective) end() { c.q.mu.Unlock() }

// publish names call as the one holding the gate, for the error of a concurrent call. The name
// stays after the call (a store per call is a locked instruction on x86, as costly as the rest of
// a small call's bookkeeping): a concurrent call sees the holder's name, or, in the moment between
// another goroutine's TryLock and its publish, the name of the call before.
func (q *collectives) publish(call string) {
	if p := gateName(call); q.current.Load() != p {
		q.current.Store(p)
	}
}

// mismatch is the error of collective c when PE pe is at its collective #seq, call, instead;
// prev, where known, is pe's call before that.
func (c *collective) mismatch(pe int, seq uint64, call, prev string) error {
	if seq == c.seq {
		return c.w.errorf(c.call, ErrMismatch, "PE %d's collective call #%d is %s, PE %d's is %s: every PE must make the same collective calls in the same order", c.w.pe, c.seq, c.call, pe, call)
	}
	after := ""
	if prev != "" {
		after = fmt.Sprintf(" after %s", prev)
	}
	return c.w.errorf(c.call, ErrMismatch, "PE %d is at collective call #%d (%s), PE %d at #%d (%s%s): the PEs made different collective calls before", c.w.pe, c.seq, c.call, pe, seq, call, after)
}

// collectiveCalls numbers the collective calls for the barrier word (8 bits); a team's collectives
// add their names here.
var collectiveCalls = []string{"", "BarrierAll", "SyncAll", "Malloc", "Calloc", "Align", "Free", "Realloc", "Finalize"}

func collectiveID(call string) uint64 {
	for i, n := range collectiveCalls {
		if n == call {
			return uint64(i)
		}
	}
	return 0xff
}

func collectiveName(id uint64) string {
	if id < uint64(len(collectiveCalls)) && id != 0 {
		return collectiveCalls[id]
	}
	return fmt.Sprintf("collective call %d", id)
}

// initialized holds the PEs initialized in this process and not yet finalized, by job and PE: a
// second Init of the same PE is an error of its own (the rendezvous would refuse it as a PE that
// has already joined), and a zero Sym can name the PE of a process's only World.
var initialized struct {
	sync.Mutex
	pes  map[string]*World
	live atomic.Int32 // len(pes), for the spinner's yield (goschedHelps), which takes no lock
}

func register(r bootstrap.Rank) (string, error) {
	key := fmt.Sprintf("%s %s %s PE %d", r.Source, r.Addr, r.Token, r.PE)
	if r.Source == "single" {
		key = "single"
	}
	initialized.Lock()
	defer initialized.Unlock()
	if initialized.pes == nil {
		initialized.pes = map[string]*World{}
	}
	if _, ok := initialized.pes[key]; ok {
		return "", fmt.Errorf("PE %d of this job is already initialized in this process: call Finalize before Init again", r.PE)
	}
	initialized.pes[key] = nil // the World is set once Init succeeds
	initialized.live.Store(int32(len(initialized.pes)))
	return key, nil
}

func (w *World) registered() {
	initialized.Lock()
	initialized.pes[w.key] = w
	initialized.Unlock()
}

func unregister(key string) {
	if key == "" {
		return
	}
	initialized.Lock()
	delete(initialized.pes, key)
	initialized.live.Store(int32(len(initialized.pes)))
	initialized.Unlock()
}

// soleWorld returns the process's only initialized World, or nil.
func soleWorld() *World {
	initialized.Lock()
	defer initialized.Unlock()
	if len(initialized.pes) != 1 {
		return nil
	}
	for _, w := range initialized.pes {
		return w
	}
	return nil
}

// checkHostMemory checks that npes heaps of heapSize bytes fit in the memory of this machine and
// of the memory cgroup this process runs in (v2, else v1); root is "/" but for tests. knob is
// where heapSize came from.
func checkHostMemory(root string, heapSize int64, npes int, knob string) error {
	need := heapSize * int64(npes)
	if need/int64(npes) != heapSize {
		need = 1<<63 - 1
	}
	whose := "a symmetric heap of " + sizeString(heapSize)
	if npes > 1 {
		whose = fmt.Sprintf("%d PEs on this node with a symmetric heap of %s each need %s, which", npes, sizeString(heapSize), sizeString(need))
	}
	if total, err := memTotal(filepath.Join(root, "proc/meminfo")); err == nil && need > total {
		return fmt.Errorf("%s: %s is more than the %s of memory this machine has (MemTotal in /proc/meminfo)", knob, whose, sizeString(total))
	}
	if limit, file := cgroupLimit(root); limit > 0 && need > limit {
		return fmt.Errorf("%s: %s is more than the %s limit of this process's memory cgroup (%s)", knob, whose, sizeString(limit), cgroupShown(root, file))
	}
	return nil
}

func memTotal(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "MemTotal:" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			return kb << 10, err
		}
	}
	return 0, errors.New("no MemTotal")
}

// cgroupShown is a cgroup file as the process sees it (from /), whatever root the test gave.
func cgroupShown(root, file string) string {
	return "/" + strings.TrimLeft(strings.TrimPrefix(file, filepath.Clean(root)), "/")
}

// cgroupLimit returns the smallest memory limit over this process's memory cgroup and its
// ancestors, and the file that sets it; 0 when there is none.
func cgroupLimit(root string) (int64, string) {
	b, err := os.ReadFile(filepath.Join(root, "proc/self/cgroup"))
	if err != nil {
		return 0, ""
	}
	var best int64
	var bestFile string
	consider := func(file string) {
		v, err := os.ReadFile(file)
		if err != nil {
			return
		}
		s := strings.TrimSpace(string(v))
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n <= 0 || n >= 1<<62 { // "max", or v1's "unlimited" 2^63 rounded to a page
			return
		}
		if best == 0 || n < best {
			best, bestFile = n, file
		}
	}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		var dir, name string
		switch {
		case parts[0] == "0" && parts[1] == "":
			dir, name = filepath.Join(root, "sys/fs/cgroup"), "memory.max"
		case strings.Contains(","+parts[1]+",", ",memory,"):
			dir, name = filepath.Join(root, "sys/fs/cgroup/memory"), "memory.limit_in_bytes"
		default:
			continue
		}
		// From the cgroup up to the root of the hierarchy: every level's limit applies. Inside a
		// container the path may name the host's hierarchy, which is not mounted; its levels are
		// simply absent.
		for p := filepath.Clean("/" + parts[2]); ; p = filepath.Dir(p) {
			consider(filepath.Join(dir, p, name))
			if p == "/" {
				break
			}
		}
	}
	return best, bestFile
}

func sizeString(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%d bytes", n)
}
