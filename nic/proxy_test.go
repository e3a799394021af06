package nic

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// region is memory addressed from a base, bounds-checked (local memory or a heap at base 0).
type region struct {
	base uint64
	b    []byte
}

func newRegion(base uint64, n int) *region { return &region{base, AlignedBytes(n)} }

func (r *region) Bytes(addr uint64, n int) ([]byte, error) {
	if n < 0 || addr < r.base || addr-r.base > uint64(len(r.b)) || uint64(n) > uint64(len(r.b))-(addr-r.base) {
		return nil, fmt.Errorf("[%#x, +%d) is not in [%#x, %#x)", addr, n, r.base, r.base+uint64(len(r.b)))
	}
	o := addr - r.base
	return r.b[o : o+uint64(n) : o+uint64(n)], nil
}

// fakeTransport keeps each PE's heap in memory. Puts are held until Quiet (or a Get/AMO to the
// same PE), as a pipelined network would, so a proxy that completes before quieting is caught.
type fakeTransport struct {
	mu      sync.Mutex
	heaps   []*region
	held    []func()
	log     []string // "pe:op:dst" in issue order
	failPE  int      // ops to this PE fail (when >= 0)
	batches int
}

func newFake(npes, heap int) *fakeTransport {
	f := &fakeTransport{failPE: -1}
	for i := 0; i < npes; i++ {
		f.heaps = append(f.heaps, newRegion(0, heap))
	}
	return f
}

func (f *fakeTransport) issue(pe int, op string, dst uint64) error {
	f.log = append(f.log, fmt.Sprintf("%d:%s:%d", pe, op, dst))
	if pe == f.failPE {
		return fmt.Errorf("fake: PE %d unreachable", pe)
	}
	return nil
}

func (f *fakeTransport) drain() {
	for _, h := range f.held {
		h()
	}
	f.held = nil
}

func (f *fakeTransport) Put(pe int, dst uint64, src []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.issue(pe, "put", dst); err != nil {
		return err
	}
	b, err := f.heaps[pe].Bytes(dst, len(src))
	if err != nil {
		return err
	}
	data := append([]byte(nil), src...)
	f.held = append(f.held, func() { copy(b, data) })
	return nil
}

func (f *fakeTransport) Get(pe int, src uint64, dst []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.issue(pe, "get", src); err != nil {
		return err
	}
	f.drain()
	b, err := f.heaps[pe].Bytes(src, len(dst))
	if err != nil {
		return err
	}
	copy(dst, b)
	return nil
}

func (f *fakeTransport) AMO(pe int, op AMOOp, width int, dst uint64, value, compare uint64) (uint64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.issue(pe, "amo", dst); err != nil {
		return 0, err
	}
	f.drain()
	b, err := f.heaps[pe].Bytes(dst, width)
	if err != nil {
		return 0, err
	}
	return ApplyAMO(b, op, width, value, compare)
}

func (f *fakeTransport) PutSignal(pe int, dst uint64, src []byte, sig uint64, sigOp SignalOp, sigValue uint64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.issue(pe, "put_signal", dst); err != nil {
		return err
	}
	b, err := f.heaps[pe].Bytes(dst, len(src))
	if err != nil {
		return err
	}
	s, err := f.heaps[pe].Bytes(sig, 8)
	if err != nil {
		return err
	}
	data := append([]byte(nil), src...)
	f.held = append(f.held, func() { copy(b, data); ApplySignal(s, sigOp, sigValue) })
	return nil
}

func (f *fakeTransport) Fence(pe int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.issue(pe, "fence", 0)
}

func (f *fakeTransport) Quiet(ctx context.Context, pe int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.drain()
	return nil
}

func (f *fakeTransport) Close() error { return nil }

func (f *fakeTransport) BeginBatch() { f.mu.Lock(); f.batches++; f.mu.Unlock() }
func (f *fakeTransport) EndBatch() error {
	return nil
}

type proxyRig struct {
	ring  *Ring
	local *region
	fake  *fakeTransport
	proxy *Proxy
	logs  *strings.Builder
	logMu sync.Mutex
}

const localBase = 0x7f0000000000

// asyncFake adds QuietAsync, so the proxy keeps issuing while acknowledgements are pending.
type asyncFake struct{ *fakeTransport }

func (a asyncFake) QuietAsync(pe int) <-chan error {
	ch := make(chan error, 1)
	go func() {
		time.Sleep(time.Millisecond) // acknowledgements take a while
		ch <- a.Quiet(context.Background(), pe)
	}()
	return ch
}

func newRig(t *testing.T, capacity, npes, heap int) *proxyRig {
	return newRigAsync(t, capacity, npes, heap, false)
}

func newRigAsync(t *testing.T, capacity, npes, heap int, async bool) *proxyRig {
	t.Helper()
	rg := &proxyRig{local: newRegion(localBase, 1<<20), fake: newFake(npes, heap), logs: &strings.Builder{}}
	var err error
	if rg.ring, err = AllocRing(capacity); err != nil {
		t.Fatal(err)
	}
	var tr Transport = rg.fake
	if async {
		tr = asyncFake{rg.fake}
	}
	rg.proxy, err = NewProxy(ProxyConfig{PE: 0, NPEs: npes, HeapSize: uint64(heap), Transport: tr, Local: rg.local,
		Rings: []*Ring{rg.ring}, Timeout: 5 * time.Second, Logf: func(f string, a ...any) {
			rg.logMu.Lock()
			fmt.Fprintf(rg.logs, f+"\n", a...)
			rg.logMu.Unlock()
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rg.proxy.Close() })
	return rg
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestProxyOps(t *testing.T) {
	rg := newRig(t, 8, 3, 4096)
	ctx := ctxT(t)
	loc := rg.local.b
	copy(loc[0:], "hello, PE two")
	binary.LittleEndian.PutUint64(rg.fake.heaps[1].b[512:], 40)
	push := func(d Desc) uint64 {
		tk, err := rg.ring.Push(ctx, &d)
		if err != nil {
			t.Fatal(err)
		}
		return tk
	}
	push(Desc{Op: OpPut, PE: 2, Size: 13, Src: localBase, Dst: 100})
	push(Desc{Op: OpFence, PE: 2})
	push(Desc{Op: OpPutSignal, PE: 2, Size: 5, Src: localBase, Dst: 200, Aux: 8, Value: 3, Flags: MakeFlags(uint32(SignalAdd), 8)})
	push(Desc{Op: OpAMO, PE: 1, Dst: 512, Value: 2, Src: localBase + 64, Flags: MakeFlags(uint32(AMOFetchAdd), 8)})
	push(Desc{Op: OpAMO, PE: 1, Dst: 512, Value: 1, Flags: MakeFlags(uint32(AMOFetchAdd), 8)}) // no result wanted
	tk := push(Desc{Op: OpGet, PE: 2, Size: 13, Src: localBase + 128, Dst: 100})
	if err := rg.ring.WaitCompleted(ctx, tk); err != nil {
		t.Fatal(err)
	}
	if err := rg.ring.Quiet(ctx); err != nil {
		t.Fatal(err)
	}
	h2 := rg.fake.heaps[2].b
	if string(h2[100:113]) != "hello, PE two" || string(h2[200:205]) != "hello" || binary.LittleEndian.Uint64(h2[8:]) != 3 {
		t.Fatalf("PE 2 heap: %q %q signal %d", h2[100:113], h2[200:205], binary.LittleEndian.Uint64(h2[8:]))
	}
	if v := binary.LittleEndian.Uint64(rg.fake.heaps[1].b[512:]); v != 43 {
		t.Fatalf("AMO target %d, want 43", v)
	}
	if v := binary.LittleEndian.Uint64(loc[64:]); v != 40 {
		t.Fatalf("fetch-add result %d, want 40", v)
	}
	if string(loc[128:141]) != "hello, PE two" {
		t.Fatalf("get read %q", loc[128:141])
	}
	want := []string{"2:put:100", "2:fence:0", "2:put_signal:200", "1:amo:512", "1:amo:512", "2:get:100"}
	if got := strings.Join(rg.fake.log, " "); got != strings.Join(want, " ") {
		t.Fatalf("issue order %s, want %s", got, strings.Join(want, " "))
	}
}

// Producers outrun the proxy on a tiny ring: every put lands, in per-producer order, and each
// producer's Quiet means its puts are delivered.
func TestProxyManyProducers(t *testing.T) {
	for _, async := range []bool{false, true} {
		t.Run(fmt.Sprintf("async=%v", async), func(t *testing.T) { testProxyManyProducers(t, async) })
	}
}

func testProxyManyProducers(t *testing.T, async bool) {
	const producers, per = 8, 400
	rg := newRigAsync(t, 4, 2, producers*8, async)
	ctx := ctxT(t)
	var wg sync.WaitGroup
	errs := make(chan error, producers)
	for p := 0; p < producers; p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Each producer owns 8 bytes of local memory per value it sends; the heap slot is p's.
			for i := 1; i <= per; i++ {
				src := uint64(localBase + (p*per+i)*8)
				b, _ := rg.local.Bytes(src, 8)
				binary.LittleEndian.PutUint64(b, uint64(i))
				if _, err := rg.ring.Push(ctx, &Desc{Op: OpPut, PE: 1, Size: 8, Src: src, Dst: uint64(p * 8)}); err != nil {
					errs <- err
					return
				}
				if i%100 == 0 {
					if err := rg.ring.Quiet(ctx); err != nil {
						errs <- err
						return
					}
					rg.fake.mu.Lock()
					v := binary.LittleEndian.Uint64(rg.fake.heaps[1].b[p*8:])
					rg.fake.mu.Unlock()
					if v != uint64(i) {
						errs <- fmt.Errorf("producer %d: after quiet the heap holds %d, want %d", p, v, i)
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
	if rg.proxy.Err() != nil {
		t.Fatal(rg.proxy.Err())
	}
}

// Each bad descriptor is rejected with an error naming the op, the PE and the range, and nothing
// is written: not to any heap, not to local memory.
func TestProxyRejects(t *testing.T) {
	cases := []struct {
		d    Desc
		want string
	}{
		{Desc{Op: OpPut, PE: 7, Size: 8, Src: localBase, Dst: 0}, "put to PE 7: PE 7 is out of range"},
		{Desc{Op: OpPut, PE: 1, Size: 16, Src: localBase, Dst: 4090}, "put to PE 1: remote heap range [0xffa, +0x10)"},
		{Desc{Op: OpPut, PE: 1, Size: 1 << 63, Src: localBase, Dst: 1 << 63}, "remote heap range [0x8000000000000000, +0x8000000000000000)"},
		{Desc{Op: OpGet, PE: 1, Size: 64, Src: localBase + (1 << 20) - 8, Dst: 0}, "get to PE 1: local range [0x7f00000ffff8, +0x40)"},
		{Desc{Op: OpPutSignal, PE: 1, Size: 8, Src: localBase, Dst: 0, Aux: 4}, "signal at heap offset 0x4 is not 8-byte aligned"},
		{Desc{Op: OpPutSignal, PE: 1, Size: 8, Src: localBase, Dst: 0, Aux: 4096}, "signal heap range [0x1000, +0x8)"},
		{Desc{Op: OpAMO, PE: 1, Dst: 12, Flags: MakeFlags(uint32(AMOFetchAdd), 8)}, "amo to PE 1: heap offset 0xc: AMO at 0xc is not 8-byte aligned"},
		{Desc{Op: OpAMO, PE: 1, Dst: 8, Flags: MakeFlags(uint32(AMOFetchAdd), 3)}, "AMO width 3"},
		{Desc{Op: OpAMO, PE: 1, Dst: 8, Src: 16, Flags: MakeFlags(uint32(AMOSwap), 8)}, "result range [0x10, +0x8)"},
		{Desc{Op: 99, PE: 1}, "unknown op 99"},
	}
	for _, c := range cases {
		rg := newRig(t, 4, 2, 4096)
		ctx := ctxT(t)
		for i := range rg.local.b {
			rg.local.b[i] = 0xee
		}
		for _, h := range rg.fake.heaps {
			for i := range h.b {
				h.b[i] = 0xee
			}
		}
		if _, err := rg.ring.Push(ctx, &c.d); err != nil {
			t.Fatal(err)
		}
		err := rg.ring.Quiet(ctx)
		var re *RingError
		if !errors.As(err, &re) || re.Code != RingErrInput || !errors.Is(err, ErrBadDescriptor) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: quiet returned %v; want a rejection containing %q", c.d, err, c.want)
			continue
		}
		rg.proxy.Close()
		for _, m := range append([]*region{rg.local}, rg.fake.heaps...) {
			for i, b := range m.b {
				if b != 0xee {
					t.Fatalf("%v: rejected descriptor wrote byte %#x of memory at %#x", c.d, i, m.base)
				}
			}
		}
		if len(rg.fake.log) != 0 {
			t.Fatalf("%v: rejected descriptor reached the transport: %v", c.d, rg.fake.log)
		}
		if !strings.Contains(rg.logs.String(), c.want) {
			t.Fatalf("%v: rejection not logged: %q", c.d, rg.logs.String())
		}
	}
}

// A transport failure reaches the producers' next wait; producers that keep pushing never hang.
func TestProxyTransportFailure(t *testing.T) {
	for _, async := range []bool{false, true} {
		t.Run(fmt.Sprintf("async=%v", async), func(t *testing.T) { testProxyTransportFailure(t, async) })
	}
}

func testProxyTransportFailure(t *testing.T, async bool) {
	rg := newRigAsync(t, 4, 3, 4096, async)
	ctx := ctxT(t)
	rg.fake.mu.Lock()
	rg.fake.failPE = 2
	rg.fake.mu.Unlock()
	if _, err := rg.ring.Push(ctx, &Desc{Op: OpPut, PE: 1, Size: 8, Src: localBase, Dst: 0}); err != nil {
		t.Fatal(err)
	}
	if err := rg.ring.Quiet(ctx); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 100; i++ {
		if _, err := rg.ring.Push(ctx, &Desc{Op: OpPut, PE: 2, Size: 8, Src: localBase, Dst: 0}); err != nil {
			if !errors.Is(err, ErrRing) {
				t.Fatal(err)
			}
			break
		}
	}
	err := rg.ring.Quiet(ctx)
	var re *RingError
	if !errors.As(err, &re) || re.Code != RingErrRemote || !strings.Contains(err.Error(), "put to PE 2") || !strings.Contains(err.Error(), "unreachable") {
		t.Fatalf("quiet after a transport failure: %v", err)
	}
	if !strings.Contains(rg.proxy.Err().Error(), "PE 2") {
		t.Fatalf("proxy error %v", rg.proxy.Err())
	}
}

// Close executes what was published, then fails later waits instead of letting them hang.
func TestProxyClose(t *testing.T) {
	rg := newRig(t, 4, 2, 4096)
	ctx := ctxT(t)
	copy(rg.local.b, "abcd")
	if _, err := rg.ring.Push(ctx, &Desc{Op: OpPut, PE: 1, Size: 4, Src: localBase, Dst: 0}); err != nil {
		t.Fatal(err)
	}
	if err := rg.proxy.Close(); err != nil {
		t.Fatal(err)
	}
	if err := rg.ring.Quiet(ctx); err != nil {
		t.Fatalf("quiet of a descriptor published before close: %v", err)
	}
	if string(rg.fake.heaps[1].b[:4]) != "abcd" {
		t.Fatal("put published before close was not delivered")
	}
	for i := 0; i < 10; i++ {
		if _, err := rg.ring.Push(ctx, &Desc{Op: OpPut, PE: 1, Size: 4, Src: localBase, Dst: 0}); err != nil {
			break
		}
	}
	var re *RingError
	if err := rg.ring.Quiet(ctx); !errors.As(err, &re) || re.Code != RingErrClosed {
		t.Fatalf("quiet after close: %v", err)
	}
}

// One proxy drains several rings (say, one per block of device threads); each ring's Quiet covers
// its own descriptors.
func TestProxyTwoRings(t *testing.T) {
	fake := newFake(2, 4096)
	local := newRegion(localBase, 4096)
	r1, _ := AllocRing(4)
	r2, _ := AllocRing(8)
	px, err := NewProxy(ProxyConfig{PE: 0, NPEs: 2, HeapSize: 4096, Transport: fake, Local: local, Rings: []*Ring{r1, r2}, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	defer px.Close()
	ctx := ctxT(t)
	copy(local.b, "0123456789abcdef")
	var wg sync.WaitGroup
	for k, r := range []*Ring{r1, r2} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 100; i++ {
				d := Desc{Op: OpPut, PE: 1, Size: 8, Src: localBase + uint64(k*8), Dst: uint64(k*8 + 64*(i%4))}
				if _, err := r.Push(ctx, &d); err != nil {
					t.Error(err)
					return
				}
			}
			if err := r.Quiet(ctx); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	fake.mu.Lock()
	defer fake.mu.Unlock()
	for j := 0; j < 4; j++ {
		if got := string(fake.heaps[1].b[64*j : 64*j+16]); got != "0123456789abcdef" {
			t.Fatalf("slot %d holds %q", j, got)
		}
	}
}

// ackFails acknowledges nothing: every quiet reports the loss of PE 1.
type ackFails struct{ *fakeTransport }

func (a ackFails) QuietAsync(pe int) <-chan error {
	ch := make(chan error, 1)
	ch <- errors.New("fake: PE 1 lost before acknowledging")
	return ch
}

// A batch whose acknowledgement fails is never completed; the error reaches Quiet.
func TestProxyAckFails(t *testing.T) {
	fake := newFake(2, 4096)
	r, _ := AllocRing(4)
	px, err := NewProxy(ProxyConfig{PE: 0, NPEs: 2, HeapSize: 4096, Transport: ackFails{fake}, Local: newRegion(localBase, 64), Rings: []*Ring{r}, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	defer px.Close()
	ctx := ctxT(t)
	if _, err := r.Push(ctx, &Desc{Op: OpPut, PE: 1, Size: 8, Src: localBase}); err != nil {
		t.Fatal(err)
	}
	var re *RingError
	if err := r.Quiet(ctx); !errors.As(err, &re) || re.Code != RingErrRemote || !strings.Contains(err.Error(), "PE 1 lost") {
		t.Fatalf("quiet after a failed acknowledgement: %v", err)
	}
	if r.Completed() != 0 {
		t.Fatalf("completed %d after a failed acknowledgement", r.Completed())
	}
}
