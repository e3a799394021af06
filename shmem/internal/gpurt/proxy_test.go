package gpurt

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/roxamen/roxamen/device"
	"github.com/roxamen/roxamen/device/host"
	"github.com/roxamen/roxamen/nic"
)

// The proxy on the host backend (CI): host memory stands in for both GPUs' heaps, host.Stream for
// the copy-engine stream, and a Go kernel for roxk_amo. Go goroutines play the device producers.

var registerAMO sync.Once

func amoHostModule() string {
	const name = "shmem-test-amo"
	registerAMO.Do(func() {
		host.Register(name, map[string]host.Kernel{
			"roxk_amo": func(l host.Launch, args []any) {
				addr, kind, width := args[0].(device.Ptr), args[1].(uint32), int(args[2].(uint32))
				value, cmp, out := args[3].(uint64), args[4].(uint64), args[5].(device.Ptr)
				old, err := nic.ApplyAMO(host.Bytes(addr, width), nic.AMOOp(kind), width, value, cmp)
				if err != nil {
					panic(err)
				}
				if out != 0 {
					atomic.StoreUint64((*uint64)(unsafe.Pointer(&host.Bytes(out, 8)[0])), old)
				}
			},
		}, nil)
	})
	return name
}

// fakeNIC is a transport to PE 1 whose heap is a byte slice.
type fakeNIC struct {
	mu   sync.Mutex
	heap []byte
}

func (f *fakeNIC) Put(pe int, dst uint64, src []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	copy(f.heap[dst:], src)
	return nil
}
func (f *fakeNIC) Get(pe int, src uint64, dst []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	copy(dst, f.heap[src:])
	return nil
}
func (f *fakeNIC) AMO(pe int, op nic.AMOOp, width int, dst uint64, value, compare uint64) (uint64, error) {
	return nic.ApplyAMO(f.heap[dst:dst+uint64(width)], op, width, value, compare)
}
func (f *fakeNIC) PutSignal(pe int, dst uint64, src []byte, sig uint64, op nic.SignalOp, v uint64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	copy(f.heap[dst:], src)
	return nic.ApplySignal(f.heap[sig:sig+8], op, v)
}
func (f *fakeNIC) Fence(int) error                  { return nil }
func (f *fakeNIC) Quiet(context.Context, int) error { return nil }
func (f *fakeNIC) Close() error                     { return nil }

type proxyRig struct {
	rt           *Runtime
	heap0, heap1 []byte // PE 0's (this PE) and PE 1's heaps
	src          device.Ptr
	srcB         []byte
}

const rigHeap = 1 << 20

// newProxyRig starts a proxy for PE 0 of 2. PE 1 is mapped (copy-engine path) or, with nicPath,
// reached through a fake transport.
func newProxyRig(t *testing.T, nicPath bool, capacity int) *proxyRig {
	t.Helper()
	d, err := host.New().Open(0)
	if err != nil {
		t.Fatal(err)
	}
	w := &fakeWorld{npes: 2, dev: d, heapSize: rigHeap, timeout: 5 * time.Second}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	h0, err := d.Alloc(rigHeap)
	must(err)
	h1, err := d.Alloc(rigHeap)
	must(err)
	src, err := d.Alloc(rigHeap)
	must(err)
	rt := New(w)
	rt.PeerBase[0], rt.HeapDev = h0, h0
	r := &proxyRig{rt: rt, heap0: host.Bytes(h0, rigHeap), heap1: host.Bytes(h1, rigHeap), src: src, srcB: host.Bytes(src, rigHeap)}
	if nicPath {
		w.transport, rt.cpuCompletion = &fakeNIC{heap: r.heap1}, true
	} else {
		rt.PeerBase[1] = h1
	}
	rt.ringCap = capacity
	rt.ctrl, err = d.AllocHost(ctrlResults + 16*capacity)
	must(err)
	rt.ringMem, err = d.AllocHost(nic.RingBytes(capacity))
	must(err)
	rt.ring, err = nic.NewRing(rt.ringMem.Bytes, capacity)
	must(err)
	rt.misc, err = d.Alloc(miscBytes)
	must(err)
	must(d.Memset(rt.misc, 0, miscBytes))
	rt.runtimeMod, err = d.LoadModule([]byte(amoHostModule()))
	must(err)
	rt.amoFn, err = rt.runtimeMod.Function("roxk_amo")
	must(err)
	rt.stop = make(chan struct{})
	must(rt.startProxy())
	t.Cleanup(func() {
		rt.Release()
		_ = d.Close()
	})
	return r
}

// mirror reads the device-local completion mirror.
func (r *proxyRig) mirror() uint64 {
	return atomic.LoadUint64((*uint64)(unsafe.Pointer(&host.Bytes(r.rt.misc.Add(64), 8)[0])))
}

// TestProxyCompletesInTicketOrder pushes puts, put-with-signals, gets and fetch-adds from several
// producers and checks, as soon as each producer's ticket is reported complete, that its effect
// is there: completion never runs ahead of the copies, on the copy-engine path and on the NIC path
// (with copy-engine work to this PE mixed in), and with a ring small enough that slots and
// completion values are reused many times.
func TestProxyCompletesInTicketOrder(t *testing.T) {
	for _, tc := range []struct {
		name string
		nic  bool
	}{{"copy-engine", false}, {"nic", true}} {
		t.Run(tc.name, func(t *testing.T) {
			r := newProxyRig(t, tc.nic, 8)
			rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
			for i := range r.srcB {
				r.srcB[i] = byte(rng.Uint32())
			}
			const producers, each = 4, 150
			const slot = 1024 // bytes of heap each operation owns
			const sigOff, ctrOff = rigHeap - 64, rigHeap - 128
			ring := r.rt.ring
			var mu sync.Mutex
			var fetched []uint64
			var wg sync.WaitGroup
			errs := make(chan error, producers)
			for p := 0; p < producers; p++ {
				wg.Add(1)
				go func(p int) {
					defer wg.Done()
					for k := 0; k < each; k++ {
						i := p*each + k
						off := uint64(i * slot)
						n := uint64(1 + (i*37)%(slot-1))
						pe, heap := uint32(1), r.heap1
						if tc.nic && i%3 == 0 {
							pe, heap = 0, r.heap0 // copy engine to this PE, between NIC operations
						}
						var d nic.Desc
						switch i % 4 {
						case 0:
							d = nic.Desc{Op: nic.OpPut, PE: pe, Size: n, Src: uint64(r.src) + off, Dst: off}
						case 1:
							d = nic.Desc{Op: nic.OpPutSignal, PE: pe, Size: n, Src: uint64(r.src) + off, Dst: off,
								Value: 1, Aux: sigOff, Flags: nic.MakeFlags(uint32(nic.SignalAdd), 8)}
						case 2:
							// get PE pe's bytes at off into this PE's heap at off
							copy(heap[off:off+n], r.srcB[off:off+n])
							d = nic.Desc{Op: nic.OpGet, PE: pe, Size: n, Src: uint64(r.rt.HeapDev) + off, Dst: off}
							if pe == 0 {
								d.Src = uint64(r.src) + off // a get from this PE itself lands in src, unchanged
							}
						case 3:
							d = nic.Desc{Op: nic.OpAMO, PE: 1, Dst: ctrOff, Value: 1,
								Src: uint64(r.rt.ctrl.Dev) + ctrlResults, Flags: nic.MakeFlags(uint32(nic.AMOFetchAdd), 8)}
						}
						ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
						if d.Op == nic.OpAMO {
							mu.Lock() // the result slot is shared: one fetch in flight
						}
						tk, err := ring.Push(ctx, &d)
						if err == nil {
							err = ring.WaitCompleted(ctx, tk)
						}
						cancel()
						if d.Op == nic.OpAMO {
							fetched = append(fetched, atomic.LoadUint64((*uint64)(unsafe.Pointer(&r.rt.ctrl.Bytes[ctrlResults]))))
							mu.Unlock()
						}
						if err != nil {
							errs <- err
							return
						}
						landed := heap // a put's target
						if d.Op == nic.OpGet {
							landed = r.heap0 // a get's destination
							if pe == 0 {
								landed = r.srcB
							}
						}
						if d.Op != nic.OpAMO && string(landed[off:off+n]) != string(r.srcB[off:off+n]) {
							errs <- fmt.Errorf("ticket %d (%v) completed before its bytes landed", tk, d)
							return
						}
					}
				}(p)
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			sig1 := *(*uint64)(unsafe.Pointer(&r.heap1[sigOff]))
			sig0 := *(*uint64)(unsafe.Pointer(&r.heap0[sigOff]))
			if want := uint64(producers * each / 4); sig0+sig1 != want {
				t.Errorf("signals added up to %d, want %d", sig0+sig1, want)
			}
			sort.Slice(fetched, func(i, j int) bool { return fetched[i] < fetched[j] })
			for i, v := range fetched {
				if v != uint64(i) {
					t.Fatalf("fetch-add results %v are not 0..%d", fetched, len(fetched)-1)
				}
			}
			if h, c := ring.Head(), ring.Completed(); c != h {
				t.Errorf("completed %d of %d tickets", c, h)
			}
			if !tc.nic {
				if m := r.mirror(); m != ring.Head() {
					t.Errorf("the device-local completion mirror holds %d, the ring %d", m, ring.Head())
				}
			}
		})
	}
}

// TestProxyRejectsBadDescriptor: a descriptor for a PE out of range fails the ring (waits return
// an error instead of hanging) and sets the abort word for device waits.
func TestProxyRejectsBadDescriptor(t *testing.T) {
	r := newProxyRig(t, false, 8)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	tk, err := r.rt.ring.Push(ctx, &nic.Desc{Op: nic.OpPut, PE: 7, Size: 8, Src: uint64(r.src)})
	if err != nil {
		t.Fatal(err)
	}
	err = r.rt.ring.WaitCompleted(ctx, tk)
	var re *nic.RingError
	if !errors.As(err, &re) || re.Code != nic.RingErrInput {
		t.Fatalf("WaitCompleted = %v, want a RingErrInput ring error", err)
	}
	if got := atomic.LoadUint64((*uint64)(unsafe.Pointer(&r.rt.ctrl.Bytes[ctrlAbort]))); got != abortProxy {
		t.Errorf("abort word %d, want %d (the proxy failed)", got, abortProxy)
	}
	if _, _, ringErrs, ok := r.rt.Record(); !ok || !errors.As(ringErrs[0], &re) {
		t.Errorf("Record: ring errors %v, want the ring error", ringErrs)
	}
}
