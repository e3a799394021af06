package gpurt

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/roxamen/roxamen/device"
	"github.com/roxamen/roxamen/device/host"
	"github.com/roxamen/roxamen/internal/env"
	"github.com/roxamen/roxamen/kernels"
)

// Colls is the engine of a World's stream-ordered collectives: on a GPU the collectives' code
// object (src/coll.hip, loaded on first use) and its kernels; on the host backend, whose streams
// are goroutines, the registered module whose one kernel runs a queued Go function when the stream
// reaches it; on both, the calls enqueued on each stream since its last sync, for messages.
// package shmem checks the arguments and picks the kernel.
type Colls struct {
	mu sync.Mutex
	// GPU: the collectives' code object and its kernels by name
	mod device.Module
	fns map[string]device.Function
	// host backend: the registered module whose kernel runs a queued operation
	hostFn device.Function
	// per stream: the stream-ordered calls enqueued since its last sync, for messages (formatted
	// only when a message needs them: enqueueing is the hot path)
	pending map[device.Stream][]pendingCall
	// the knobs that choose a call's algorithm, read once (StreamKnobs)
	knobs StreamKnobs
}

// StreamKnobs are the environment's choices for the stream collectives, read when the engine is
// made rather than per enqueued call (a lookup and a parse of each, on the hot path).
type StreamKnobs struct {
	CEAlways    bool  // ROX_COLL_ALGO=ce: the copy-engine offload at every size
	CEThreshold int64 // ROX_COLL_CE_THRESHOLD: the offload from this many bytes per PE (0: never)
	MostBlocks  int   // ROX_STREAM_BLOCKS: the most blocks a grid's call takes (0: the default)
}

func readStreamKnobs() StreamKnobs {
	var k StreamKnobs
	if a, _ := env.CollAlgo.String(); a == "ce" {
		k.CEAlways = true
	}
	k.CEThreshold, _ = env.CollCE.Size()
	if most, err := env.StreamBlocks.Int(); err == nil && most >= 1 {
		k.MostBlocks = most
	}
	return k
}

// Knobs returns the knobs as read when the engine was made.
func (sc *Colls) Knobs() StreamKnobs { return sc.knobs }

type pendingCall struct{ call, team string }

// NewColls makes an idle engine.
func NewColls() *Colls {
	return &Colls{fns: map[string]device.Function{}, pending: map[device.Stream][]pendingCall{}, knobs: readStreamKnobs()}
}

// host-backend operations waiting for their stream: a kernel argument names one by number
const hostStreamModule = "roxamen/shmem stream collectives"

var hostStreamOps struct {
	seq atomic.Uint64
	m   sync.Map // uint64 -> func() error
}

func init() {
	host.Register(hostStreamModule, map[string]host.Kernel{"roxh_stream_op": func(l host.Launch, args []any) {
		id := args[0].(uint64)
		f, ok := hostStreamOps.m.LoadAndDelete(id)
		if !ok {
			panic(fmt.Errorf("stream operation %d is unknown", id))
		}
		if err := f.(func() error)(); err != nil {
			panic(err) // fails the stream: its Synchronize reports err, later work is skipped
		}
	}}, nil)
}

// Enqueued notes that call on team was enqueued on st (kept for messages, 16 per stream).
func (sc *Colls) Enqueued(st device.Stream, call, team string) {
	sc.mu.Lock()
	if p := sc.pending[st]; len(p) < 16 {
		sc.pending[st] = append(p, pendingCall{call, team})
	}
	sc.mu.Unlock()
}

// EnqueueHost enqueues run on st, a stream of the host backend's device d: the stream runs it when
// it reaches it, and an error it returns fails the stream.
func (sc *Colls) EnqueueHost(d device.Device, st device.Stream, run func() error) error {
	sc.mu.Lock()
	if sc.hostFn == nil {
		m, err := d.LoadModule([]byte(hostStreamModule))
		if err == nil {
			sc.hostFn, err = m.Function("roxh_stream_op")
		}
		if err != nil {
			sc.mu.Unlock()
			return errorf(KindPEFailed, err, "loading the host stream module")
		}
	}
	fn := sc.hostFn
	sc.mu.Unlock()
	id := hostStreamOps.seq.Add(1)
	hostStreamOps.m.Store(id, run)
	if err := st.Launch(fn, device.D1(1), device.D1(1), 0, id); err != nil {
		hostStreamOps.m.Delete(id)
		return errorf(KindBadArgument, err, "enqueueing on the stream")
	}
	return nil
}

// TakePending returns and forgets the calls enqueued on st since its last sync.
func (sc *Colls) TakePending(st device.Stream) string {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	p := sc.pending[st]
	delete(sc.pending, st)
	if len(p) == 0 {
		return "no stream-ordered collective was enqueued on it"
	}
	names := make([]string, len(p))
	for i, c := range p {
		names[i] = c.call + " on " + c.team
	}
	return "stream-ordered calls since its last sync: " + strings.Join(names, ", ")
}

// Function returns a kernel of the collectives' object, loading it first and linking it to rt.
func (sc *Colls) Function(rt *Runtime, name string) (device.Function, error) {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if f, ok := sc.fns[name]; ok {
		return f, nil
	}
	if sc.mod == nil {
		img, arch, err := kernels.CollObjectFor(rt.dev.Info().Arch)
		if err != nil {
			return nil, errorf(KindBadArgument, err, "no collectives' code object for this GPU")
		}
		mod, err := rt.dev.LoadModule(img)
		if err != nil {
			return nil, errorf(KindPEFailed, err, "loading the %s collectives' code object", arch)
		}
		if err := rt.FillState(mod); err != nil {
			_ = mod.Unload()
			return nil, errorf(KindPEFailed, err, "linking the collectives' code object")
		}
		sc.mod = mod
	}
	f, err := sc.mod.Function(name)
	if err != nil {
		return nil, errorf(KindPEFailed, err, "kernel %s", name)
	}
	sc.fns[name] = f
	return f, nil
}

// Release unloads the collectives' object (before the device goes).
func (sc *Colls) Release() {
	if sc == nil {
		return
	}
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if sc.mod != nil {
		_ = sc.mod.Unload()
	}
	sc.mod, sc.fns = nil, map[string]device.Function{}
}
