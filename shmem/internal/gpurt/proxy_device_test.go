package gpurt

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/roxamen/roxamen/device"
	"github.com/roxamen/roxamen/device/cuda"
	"github.com/roxamen/roxamen/device/host"
	"github.com/roxamen/roxamen/internal/testkit"
	"github.com/roxamen/roxamen/kernels"
	"github.com/roxamen/roxamen/nic"
)

// TestProxyRoutesOnDevice drives the proxy's GPU routes through device.Device calls only, so that
// one test runs on the host backend (CI) and, where there is a CUDA GPU, on GPU 0: both "PEs" are
// allocations on it, so the copy-engine route moves device memory with real async copies, and
// the NIC route (a fake transport) stages device bytes through the host. Producers push puts,
// put-with-signals, gets and fetch-adds into a ring of 8 slots (completion slots and ring results
// are reused many times) and, as soon as a ticket is reported complete, read its effect back with
// device copies (on a stream of their own, not ordered with the copy engine's).
func TestProxyRoutesOnDevice(t *testing.T) {
	type backend struct {
		name  string
		open  func() (device.Device, error)
		image func(arch string) ([]byte, error) // the runtime object with roxk_amo
	}
	backends := []backend{{"host", func() (device.Device, error) { return host.New().Open(0) },
		func(string) ([]byte, error) { return []byte(amoHostModule()), nil }}}
	if n, err := cuda.New().Count(); err == nil && n > 0 {
		backends = append(backends, backend{"cuda", func() (device.Device, error) { return cuda.New().Open(0) }, func(arch string) ([]byte, error) {
			b, _, err := kernels.ObjectFor(arch)
			return b, err
		}})
	} else if testkit.Required(testkit.GPU) {
		t.Fatalf("%s is set but no CUDA GPU: %d, %v", testkit.GPU, n, err)
	}
	for _, b := range backends {
		for _, nicPath := range []bool{false, true} {
			name := b.name + "/copy-engine"
			if nicPath {
				name = b.name + "/nic"
			}
			t.Run(name, func(t *testing.T) {
				d, err := b.open()
				if err != nil {
					t.Fatal(err)
				}
				img, err := b.image(d.Info().Arch)
				if err != nil {
					t.Fatal(err)
				}
				testProxyRoutesOnDevice(t, d, img, nicPath)
			})
		}
	}
}

func testProxyRoutesOnDevice(t *testing.T, d device.Device, img []byte, nicPath bool) {
	const capacity, heapSize = 8, 1 << 20
	const producers, each, slot = 4, 100, 1024 // each operation owns slot bytes of heap
	const sigOff, ctrOff = heapSize - 64, heapSize - 128
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	w := &fakeWorld{npes: 2, dev: d, heapSize: heapSize, timeout: 10 * time.Second}
	var heaps [2]device.Ptr
	var err error
	for i := range heaps {
		heaps[i], err = d.Alloc(heapSize)
		must(err)
		must(d.Memset(heaps[i], 0, heapSize))
	}
	src, err := d.Alloc(heapSize)
	must(err)
	rt := New(w)
	rt.PeerBase[0], rt.HeapDev = heaps[0], heaps[0]
	var fake *fakeNIC
	if nicPath {
		fake = &fakeNIC{heap: nic.AlignedBytes(heapSize)}
		w.transport, rt.cpuCompletion = fake, true
	} else {
		rt.PeerBase[1] = heaps[1]
	}
	rt.ringCap = capacity
	rt.ctrl, err = d.AllocHost(ctrlResults + 16*capacity)
	must(err)
	clear(rt.ctrl.Bytes)
	rt.ringMem, err = d.AllocHost(nic.RingBytes(capacity))
	must(err)
	rt.ring, err = nic.NewRing(rt.ringMem.Bytes, capacity)
	must(err)
	rt.misc, err = d.Alloc(miscBytes)
	must(err)
	must(d.Memset(rt.misc, 0, miscBytes))
	rt.runtimeMod, err = d.LoadModule(img)
	must(err)
	rt.amoFn, err = rt.runtimeMod.Function("roxk_amo")
	must(err)
	rt.stop = make(chan struct{})
	must(rt.startProxy())
	t.Cleanup(func() {
		rt.Release()
		for _, p := range []device.Ptr{heaps[0], heaps[1], src} {
			_ = d.Free(p)
		}
		_ = d.Close()
	})

	data := make([]byte, heapSize) // what src holds
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 2))
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	must(d.CopyHtoD(src, data))
	// read returns n bytes of PE pe's heap at off (PE 1 on the NIC path: the fake's heap).
	read := func(pe int, off, n uint64) ([]byte, error) {
		if pe == 1 && nicPath {
			fake.mu.Lock()
			defer fake.mu.Unlock()
			return append([]byte(nil), fake.heap[off:off+n]...), nil
		}
		b := make([]byte, n)
		return b, d.CopyDtoH(b, heaps[pe].Add(int(off)))
	}
	write := func(pe int, off uint64, b []byte) error {
		if pe == 1 && nicPath {
			fake.mu.Lock()
			defer fake.mu.Unlock()
			copy(fake.heap[off:], b)
			return nil
		}
		return d.CopyHtoD(heaps[pe].Add(int(off)), b)
	}
	ring := rt.ring
	var amoMu sync.Mutex
	var fetched []uint64
	var wg sync.WaitGroup
	errs := make(chan error, producers)
	for p := 0; p < producers; p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; k < each; k++ {
				if err := func() error {
					i := p*each + k
					off := uint64(i * slot)
					n := uint64(1 + (i*37)%(slot-1))
					pe := 1
					if i%3 == 0 {
						pe = 0 // the copy engine to this PE itself, between operations to PE 1
					}
					var desc nic.Desc
					var landed func() ([]byte, error)
					switch i % 4 {
					case 0, 1:
						desc = nic.Desc{Op: nic.OpPut, PE: uint32(pe), Size: n, Src: uint64(src) + off, Dst: off}
						if i%4 == 1 {
							desc.Op, desc.Value, desc.Aux = nic.OpPutSignal, 1, sigOff
							desc.Flags = nic.MakeFlags(uint32(nic.SignalAdd), 8)
						}
						landed = func() ([]byte, error) { return read(pe, off, n) }
					case 2:
						// A get of PE pe's bytes at off (made equal to src's first) into this PE's
						// heap at off; from PE 0 itself, into src at off, which it leaves as it is.
						if err := write(pe, off, data[off:off+n]); err != nil {
							return err
						}
						desc = nic.Desc{Op: nic.OpGet, PE: uint32(pe), Size: n, Src: uint64(heaps[0]) + off, Dst: off}
						landed = func() ([]byte, error) { return read(0, off, n) }
						if pe == 0 {
							desc.Src = uint64(src) + off
							landed = func() ([]byte, error) {
								b := make([]byte, n)
								return b, d.CopyDtoH(b, src.Add(int(off)))
							}
						}
					case 3:
						desc = nic.Desc{Op: nic.OpAMO, PE: 1, Dst: ctrOff, Value: 1,
							Src: uint64(rt.ctrl.Dev) + ctrlResults, Flags: nic.MakeFlags(uint32(nic.AMOFetchAdd), 8)}
					}
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					defer cancel()
					if desc.Op == nic.OpAMO {
						amoMu.Lock() // the result slot is shared: one fetch in flight
						defer amoMu.Unlock()
					}
					tk, err := ring.Push(ctx, &desc)
					if err == nil {
						err = ring.WaitCompleted(ctx, tk)
					}
					if err != nil {
						return err
					}
					if desc.Op == nic.OpAMO {
						fetched = append(fetched, atomic.LoadUint64((*uint64)(unsafe.Pointer(&rt.ctrl.Bytes[ctrlResults]))))
						return nil
					}
					got, err := landed()
					if err != nil {
						return err
					}
					if !bytes.Equal(got, data[off:off+n]) {
						return fmt.Errorf("ticket %d (%v) completed before its bytes landed", tk, desc)
					}
					return nil
				}(); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	// Bursts: each producer pushes puts without waiting, then waits for its last one and
	// checks them all, so that more tickets than the ring has slots are in flight on the copy
	// engine and the proxy's window (not the producers) keeps completion slots from reuse.
	const bursts, burst = 10, 24
	for p := 0; p < producers && len(errs) == 0; p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			for r := 0; r < bursts; r++ {
				var last uint64
				for j := 0; j < burst; j++ {
					i := (p*burst + j) % (producers * each)
					off, n := uint64(i*slot), uint64(8+(r*burst+j)%(slot-8))
					tk, err := ring.Push(ctx, &nic.Desc{Op: nic.OpPut, PE: uint32(j % 2), Size: n, Src: uint64(src) + off + uint64(r) + 1, Dst: off})
					if err != nil {
						errs <- err
						return
					}
					last = tk
				}
				if err := ring.WaitCompleted(ctx, last); err != nil {
					errs <- err
					return
				}
				for j := 0; j < burst; j++ {
					i := (p*burst + j) % (producers * each)
					off, n := uint64(i*slot), uint64(8+(r*burst+j)%(slot-8))
					got, err := read(j%2, off, n)
					if err == nil && !bytes.Equal(got, data[off+uint64(r)+1:off+uint64(r)+1+n]) {
						err = fmt.Errorf("burst %d of producer %d: put %d of %d bytes to PE %d had not landed when ticket %d completed", r, p, j, n, j%2, last)
					}
					if err != nil {
						errs <- err
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	var sigs uint64
	for pe := 0; pe < 2; pe++ {
		b, err := read(pe, sigOff, 8)
		must(err)
		sigs += *(*uint64)(unsafe.Pointer(&b[0]))
	}
	if want := uint64(producers * each / 4); sigs != want {
		t.Errorf("signals added up to %d, want %d", sigs, want)
	}
	seen := map[uint64]bool{}
	for _, v := range fetched {
		seen[v] = true
	}
	for v := uint64(0); v < uint64(len(fetched)); v++ {
		if !seen[v] {
			t.Fatalf("fetch-add results %v are not 0..%d", fetched, len(fetched)-1)
		}
	}
	if h, c := ring.Head(), ring.Completed(); c != h {
		t.Errorf("completed %d of %d tickets", c, h)
	}
	if !nicPath {
		var m [8]byte
		must(d.CopyDtoH(m[:], rt.misc.Add(64)))
		if got := *(*uint64)(unsafe.Pointer(&m[0])); got != ring.Head() {
			t.Errorf("the device-local completion mirror holds %d, the ring %d", got, ring.Head())
		}
	}
}
