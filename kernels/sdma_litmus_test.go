package kernels

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/roxamen/roxamen/device/host"
	"github.com/roxamen/roxamen/memmodel"
)

// sdmaNode is a node of up to 4 PEs whose puts and puts-with-signal to each other all take the
// SDMA route: each PE is its own copy of the device library's producer (a separate instance of
// the shared library, so a separate roxshmem_state), each ordered pair of PEs has its own queue
// served by an emulated engine. Plain accesses, gets and AMOs go by load/store (Go atomics on the
// peer's heap), as the device library sends them to a mapped peer.
type sdmaNode struct {
	n       int
	heaps   [][]byte
	pes     []*sdmaPE
	engines []*host.SDMAEngine
	vars    map[string]int // variable -> heap offset
}

type sdmaPE struct {
	putSDMA       func(d, s uintptr, n uint64, pe, nbi int32)
	putSignalSDMA func(d, s uintptr, n uint64, sig uintptr, v uint64, op, pe, nbi int32)
	quiet         func()
	fence         func()
	setState      func(s *State)
	state         State
}

const (
	litHeap  = 1 << 20
	litSrc   = 512 << 10 // put sources: one 64-byte slot per instruction
	litQueue = 8 << 10
)

func newSDMANode(t *testing.T, n int, bypass bool) *sdmaNode {
	t.Helper()
	so := buildSDMAProducer(t)
	nd := &sdmaNode{n: n, vars: map[string]int{}}
	for p := 0; p < n; p++ {
		nd.heaps = append(nd.heaps, HostMem(t, litHeap))
	}
	dev := HostMem(t, n*int(unsafe.Sizeof(SDMATable{}))+n*n*int(unsafe.Sizeof(SDMAQueue{})))
	ctl := HostMem(t, n*n*64)
	tables := unsafe.Slice((*SDMATable)(unsafe.Pointer(&dev[0])), n)
	queues := unsafe.Slice((*SDMAQueue)(unsafe.Pointer(&dev[n*int(unsafe.Sizeof(SDMATable{}))])), n*n)
	words := unsafe.Slice((*uint64)(unsafe.Pointer(&ctl[0])), n*n*8)
	regions := []host.SDMARegion{{Base: HostAddr(ctl), Mem: ctl}}
	for p := 0; p < n; p++ {
		regions = append(regions, host.SDMARegion{Base: HostAddr(nd.heaps[p]), Mem: nd.heaps[p]})
	}
	for p := 0; p < n; p++ {
		pe := &sdmaPE{}
		OpenHostPE(t, so, p, map[string]any{"rox_set_state": &pe.setState, "rox_put_sdma": &pe.putSDMA,
			"rox_put_signal_sdma": &pe.putSignalSDMA, "rox_quiet": &pe.quiet, "rox_fence": &pe.fence})
		tab := &tables[p]
		tab.Magic, tab.NQueues = SDMAMagic, 1
		for q := 0; q < n; q++ {
			if q == p {
				continue
			}
			i := p*n + q
			ring := HostMem(t, litQueue)
			w := words[8*i : 8*i+8]
			queues[i] = SDMAQueue{Ring: HostAddr(ring), Rptr: uint64(uintptr(unsafe.Pointer(&w[0]))), Wptr: uint64(uintptr(unsafe.Pointer(&w[1]))),
				Doorbell: uint64(uintptr(unsafe.Pointer(&w[2]))), Done: uint64(uintptr(unsafe.Pointer(&w[3]))), RingBytes: litQueue}
			tab.Queue[q][0] = uint64(uintptr(unsafe.Pointer(&queues[i])))
			e, err := host.StartSDMA(host.SDMAQueue{Ring: unsafe.Slice((*uint32)(unsafe.Pointer(&ring[0])), litQueue/4),
				Rptr: &w[0], Wptr: &w[1], Doorbell: &w[2], Regions: regions, Seed: uint64(i + 1)})
			if err != nil {
				t.Fatal(err)
			}
			nd.engines = append(nd.engines, e)
		}
		pe.state = State{Magic: StateMagic, Version: StateVersion, MyPE: int32(p), NPEs: int32(n), HeapBase: HostAddr(nd.heaps[p]),
			HeapSize: litHeap, SDMA: uint64(uintptr(unsafe.Pointer(tab)))}
		if bypass {
			pe.state.Flags |= FlagBypass
		}
		for q := 0; q < n; q++ {
			pe.state.PeerBase[q] = HostAddr(nd.heaps[q])
		}
		pe.setState(&pe.state)
		nd.pes = append(nd.pes, pe)
	}
	t.Cleanup(func() {
		for _, e := range nd.engines {
			if err := e.Stop(); err != nil {
				t.Errorf("engine: %v", err)
			}
		}
	})
	return nd
}

func (nd *sdmaNode) off(v string) int {
	o, ok := nd.vars[v]
	if !ok {
		o = 64 * (len(nd.vars) + 1)
		nd.vars[v] = o
	}
	return o
}

func (nd *sdmaNode) word(pe int, v string) *int64 {
	return (*int64)(unsafe.Pointer(&nd.heaps[pe][nd.off(v)]))
}

// RunOnce runs every column of t in its own goroutine (with a random start delay and random
// choice of blocking or nbi puts), each ending with a quiet, then reads the final state.
func (nd *sdmaNode) RunOnce(ctx context.Context, t *memmodel.Test, seed int64) (memmodel.State, error) {
	for p := 0; p < nd.n; p++ {
		for _, o := range nd.vars {
			atomic.StoreInt64((*int64)(unsafe.Pointer(&nd.heaps[p][o])), 0)
		}
	}
	for _, iv := range t.Init {
		atomic.StoreInt64(nd.word(iv.Loc.PE, iv.Loc.Var), iv.Val)
	}
	for _, c := range t.Columns {
		for _, in := range c.Instrs {
			nd.off(in.Loc.Var)
			if in.Op == memmodel.OpPutSig {
				nd.off(in.Sig.Var)
			}
		}
	}
	var mu sync.Mutex
	regs := memmodel.State{}
	var bar sync.WaitGroup
	nbar := 0
	for _, in := range t.Columns[0].Instrs {
		if in.Op == memmodel.OpBarrier || in.Op == memmodel.OpSync {
			nbar++
		}
	}
	barriers := make([]*sync.WaitGroup, nbar)
	for i := range barriers {
		barriers[i] = &sync.WaitGroup{}
		barriers[i].Add(len(t.Columns))
	}
	errc := make(chan error, len(t.Columns))
	deadline := time.Now().Add(10 * time.Second)
	for ci, c := range t.Columns {
		bar.Add(1)
		go func() {
			defer bar.Done()
			rng := rand.New(rand.NewPCG(uint64(seed), uint64(ci)))
			pe := nd.pes[c.PE]
			me := c.PE
			spin := rng.IntN(2000)
			for i := 0; i < spin; i++ {
				runtimeSpin()
			}
			nb := 0
			for k, in := range c.Instrs {
				src := litSrc + 64*(ci*64+k)
				dst := uintptr(HostAddr(nd.heaps[me])) + uintptr(nd.off(in.Loc.Var))
				target := nd.word(in.Loc.PE, in.Loc.Var)
				setReg := func(v int64) {
					mu.Lock()
					regs[fmt.Sprintf("%d:%s", me, in.Reg)] = v
					mu.Unlock()
				}
				switch in.Op {
				case memmodel.OpSt:
					atomic.StoreInt64(nd.word(me, in.Loc.Var), in.Val)
				case memmodel.OpLd:
					setReg(atomic.LoadInt64(nd.word(me, in.Loc.Var)))
				case memmodel.OpPut, memmodel.OpPutNBI:
					*(*int64)(unsafe.Pointer(&nd.heaps[me][src])) = in.Val
					pe.putSDMA(dst, uintptr(HostAddr(nd.heaps[me]))+uintptr(src), 8, int32(in.Loc.PE), int32(rng.IntN(2)))
				case memmodel.OpPutSig:
					*(*int64)(unsafe.Pointer(&nd.heaps[me][src])) = in.Val
					sig := uintptr(HostAddr(nd.heaps[me])) + uintptr(nd.off(in.Sig.Var))
					pe.putSignalSDMA(dst, uintptr(HostAddr(nd.heaps[me]))+uintptr(src), 8, sig, uint64(in.New), int32(in.SigOp), int32(in.Loc.PE), int32(rng.IntN(2)))
				case memmodel.OpGet, memmodel.OpGetNBI, memmodel.OpFetch:
					setReg(atomic.LoadInt64(target))
				case memmodel.OpFAdd:
					setReg(atomic.AddInt64(target, in.Val) - in.Val)
				case memmodel.OpAdd:
					atomic.AddInt64(target, in.Val)
				case memmodel.OpSwap:
					setReg(atomic.SwapInt64(target, in.Val))
				case memmodel.OpSet:
					atomic.StoreInt64(target, in.Val)
				case memmodel.OpCSwap:
					for {
						old := atomic.LoadInt64(target)
						if old != in.Val || atomic.CompareAndSwapInt64(target, old, in.New) {
							setReg(old)
							break
						}
					}
				case memmodel.OpWait:
					w := nd.word(me, in.Loc.Var)
					for !in.Cmp.Holds(atomic.LoadInt64(w), in.Val) {
						if time.Now().After(deadline) {
							errc <- fmt.Errorf("PE %d: wait %s %s %d never held", me, in.Loc.Var, in.Cmp, in.Val)
							return
						}
						runtimeSpin()
					}
				case memmodel.OpFence:
					pe.fence()
				case memmodel.OpQuiet:
					pe.quiet()
				case memmodel.OpBarrier, memmodel.OpSync:
					if in.Op == memmodel.OpBarrier {
						pe.quiet() // sync_all arrives without completing anything
					}
					barriers[nb].Done()
					barriers[nb].Wait()
					nb++
				case memmodel.OpSigFetch:
					setReg(atomic.LoadInt64(nd.word(me, in.Loc.Var)))
				case memmodel.OpInc:
					atomic.AddInt64(target, 1)
				case memmodel.OpFInc:
					setReg(atomic.AddInt64(target, 1) - 1)
				case memmodel.OpAnd, memmodel.OpOr, memmodel.OpXor, memmodel.OpFAnd, memmodel.OpFOr, memmodel.OpFXor:
					for {
						old := atomic.LoadInt64(target)
						v := old & in.Val
						switch in.Op {
						case memmodel.OpOr, memmodel.OpFOr:
							v = old | in.Val
						case memmodel.OpXor, memmodel.OpFXor:
							v = old ^ in.Val
						}
						if atomic.CompareAndSwapInt64(target, old, v) {
							if in.Reg != "" {
								setReg(old)
							}
							break
						}
					}
				default:
					errc <- fmt.Errorf("PE %d: instruction %s: the SDMA runner does not implement it", me, in.Op)
					return
				}
			}
			pe.quiet()
		}()
	}
	bar.Wait()
	select {
	case err := <-errc:
		return nil, err
	default:
	}
	s := memmodel.State{}
	for _, k := range memmodel.StateKeys(t) {
		if v, ok := regs[k]; ok {
			s[k] = v
			continue
		}
		if i := strings.LastIndex(k, "@"); i > 0 {
			var pe int
			fmt.Sscanf(k[i+1:], "%d", &pe)
			s[k] = atomic.LoadInt64(nd.word(pe, k[:i]))
		} else {
			s[k] = 0 // a register of an instruction that did not run
		}
	}
	return s, nil
}

var spinSink atomic.Uint64

func runtimeSpin() { spinSink.Add(1) }

// TestSDMAConformance runs the litmus suite over the SDMA route (device library producers, engine
// emulator) in both modes: no outcome the model forbids may appear.
func TestSDMAConformance(t *testing.T) {
	files, _ := filepath.Glob("../memmodel/testdata/*.litmus")
	if len(files) == 0 {
		t.Fatal("no litmus tests in ../memmodel/testdata")
	}
	var tests []*memmodel.Test
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		ts, err := memmodel.ParseFile(f, b)
		if err != nil {
			t.Fatal(err)
		}
		tests = append(tests, ts...)
	}
	iters := 20
	if testing.Short() {
		iters = 5
	}
	for _, mode := range []memmodel.Mode{memmodel.Strict, memmodel.Bypass} {
		nodes := map[int]*sdmaNode{}
		weak, allowed := 0, 0
		var seenWeak []string
		for _, lt := range tests {
			n := 0
			for _, c := range lt.Columns {
				n = max(n, c.PE+1)
			}
			for _, c := range lt.Columns {
				for _, in := range c.Instrs {
					n = max(n, in.Loc.PE+1, in.Sig.PE+1)
				}
			}
			if n > 4 {
				continue
			}
			if miss := lt.Unsupported(sdmaFeatures); !miss.Empty() {
				t.Logf("%s: not run, the SDMA runner lacks %s", lt.Name, miss)
				continue
			}
			nd := nodes[n]
			if nd == nil {
				nd = newSDMANode(t, n, mode == memmodel.Bypass)
				nodes[n] = nd
			}
			h, err := memmodel.Conform(context.Background(), lt, nd, mode, memmodel.DefaultOptions(), iters, 1, nil)
			if err != nil {
				t.Errorf("%s over the SDMA route: %v", mode, err)
				continue
			}
			r, err := memmodel.Check(lt, mode, memmodel.DefaultOptions())
			if err != nil {
				t.Fatal(err)
			}
			if r.Verdict == memmodel.Allowed {
				allowed++
				for _, st := range h.States {
					if lt.EvalState(st) {
						weak++
						seenWeak = append(seenWeak, lt.Name)
						break
					}
				}
			}
		}
		sort.Strings(seenWeak)
		t.Logf("%s: %d tests x %d runs over the SDMA route, 0 forbidden; the condition of %d of %d Allowed tests observed (%s)",
			mode, len(tests), iters, weak, allowed, strings.Join(seenWeak, " "))
	}
}

// sdmaFeatures is what the SDMA runner implements beyond the core: put-with-signal, sync,
// signal_fetch, the inc and bitwise AMOs, and named contexts (on the default one). Threads of a
// PE, teams and collectives, the polls, the _nbi fetches and putsig_nbi, puts from and gets into
// locations, stores through roxshmem_ptr and 32-bit halves are the host runner's
// (tools/litmusrun), not this one's.
var sdmaFeatures = memmodel.Features(memmodel.Signals, memmodel.Sync, memmodel.SignalFetch, memmodel.AMOInc, memmodel.AMOBitwise, memmodel.Contexts)
