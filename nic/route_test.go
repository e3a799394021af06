package nic

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"
)

// Routes below the proxy: a host route that reorders delivery where no fence stops it, and a
// device route whose work runs on a queue of its own and that writes ring completion itself.

// reorderRoute holds puts until Quiet and then delivers each fence-separated group of them in
// reverse issue order, as a network with several paths may: only a fence orders them.
type reorderRoute struct {
	mu     sync.Mutex
	heaps  []*region
	local  *region
	groups [][]func()
	log    []string
	fail   int // Issue number (1-based) that fails, 0: none
	reject bool
	issued int
}

func newReorderRoute(npes, heap int, local *region) *reorderRoute {
	r := &reorderRoute{local: local, groups: [][]func(){nil}}
	for i := 0; i < npes; i++ {
		r.heaps = append(r.heaps, newRegion(0, heap))
	}
	return r
}

func (r *reorderRoute) Issue(d *Desc) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.issued++
	if r.issued == r.fail {
		if r.reject {
			return Reject("local range [%#x, +%#x): not resolvable here", d.Src, d.Size)
		}
		return fmt.Errorf("fake: link to PE %d went down", d.PE)
	}
	r.log = append(r.log, fmt.Sprintf("%v:%d:%d", d.Op, d.PE, d.Dst))
	if d.Op != OpPut {
		return fmt.Errorf("reorderRoute: %v not supported", d.Op)
	}
	src, err := r.local.Bytes(d.Src, int(d.Size))
	if err != nil {
		return Reject("%v", err)
	}
	dst, err := r.heaps[d.PE].Bytes(d.Dst, int(d.Size))
	if err != nil {
		return err
	}
	data := append([]byte(nil), src...)
	g := len(r.groups) - 1
	r.groups[g] = append(r.groups[g], func() { copy(dst, data) })
	return nil
}

func (r *reorderRoute) Fence(pe int) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.log = append(r.log, fmt.Sprintf("fence:%d", pe))
	r.groups = append(r.groups, nil)
	return nil
}

func (r *reorderRoute) Quiet(context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, g := range r.groups {
		for i := len(g) - 1; i >= 0; i-- {
			g[i]()
		}
	}
	r.groups = [][]func(){nil}
	return nil
}

func (r *reorderRoute) word(pe int, off uint64) uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return binary.LittleEndian.Uint64(r.heaps[pe].b[off:])
}

// deviceRoute runs its work in issue order on a goroutine (the device queue), a little later
// than Issue; CompleteAt queues a plain store of the completed counter, as a device copy would
// write it (it could move the counter backwards: the proxy must never let it).
type deviceRoute struct {
	heap, local *region
	queue       chan func()
	gate        sync.Mutex    // held by a test: the queue stalls
	delay       time.Duration // each operation takes this long
	mu          sync.Mutex
	log         []string
	completions int
	maxAhead    uint64 // the most tickets seen issued beyond the ring's completed counter
	ring        *Ring
	stopped     chan struct{}
}

func newDeviceRoute(t *testing.T, heap int, local *region, ring *Ring) *deviceRoute {
	r := &deviceRoute{heap: newRegion(0, heap), local: local, queue: make(chan func(), 1<<14), ring: ring, stopped: make(chan struct{}),
		delay: 20 * time.Microsecond}
	go func() {
		defer close(r.stopped)
		for f := range r.queue {
			r.gate.Lock()
			time.Sleep(r.delay) // copies take a while
			f()
			r.gate.Unlock()
		}
	}()
	t.Cleanup(func() { close(r.queue); <-r.stopped })
	return r
}

func (r *deviceRoute) Issue(d *Desc) error {
	r.mu.Lock()
	r.log = append(r.log, fmt.Sprintf("%v:%d:%d", d.Op, d.PE, d.Dst))
	if ahead := d.Seq - r.ring.Completed(); ahead > r.maxAhead {
		r.maxAhead = ahead
	}
	r.mu.Unlock()
	src, err := r.local.Bytes(d.Src, int(d.Size))
	if err != nil {
		return Reject("%v", err)
	}
	dst, err := r.heap.Bytes(d.Dst, int(d.Size))
	if err != nil {
		return err
	}
	switch d.Op {
	case OpPut:
		r.queue <- func() { copy(dst, src) }
	case OpGet:
		r.queue <- func() { copy(src, dst) }
	default:
		return fmt.Errorf("deviceRoute: %v not supported", d.Op)
	}
	return nil
}

func (r *deviceRoute) Fence(pe int) error {
	r.mu.Lock()
	r.log = append(r.log, fmt.Sprintf("fence:%d", pe))
	r.mu.Unlock()
	return nil
}

func (r *deviceRoute) Quiet(ctx context.Context) error {
	done := make(chan struct{})
	r.queue <- func() { close(done) }
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (r *deviceRoute) CompleteAt(ring *Ring, upTo uint64) error {
	r.mu.Lock()
	r.completions++
	r.mu.Unlock()
	word := (*uint64)(unsafe.Pointer(&ring.Bytes()[RingCompletedOffset]))
	r.queue <- func() { atomic.StoreUint64(word, upTo) }
	return nil
}

func (r *deviceRoute) logged() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.log, " ")
}

// publishOneBatch publishes descs so that the proxy takes them in one poll: every ticket is
// reserved first and the first one is published last.
func publishOneBatch(t *testing.T, ring *Ring, descs []Desc) (first uint64) {
	t.Helper()
	ctx := ctxT(t)
	tickets := make([]uint64, len(descs))
	for i := range descs {
		tk, err := ring.Reserve(ctx)
		if err != nil {
			t.Fatal(err)
		}
		tickets[i] = tk
	}
	for i := len(descs) - 1; i >= 0; i-- {
		ring.Publish(tickets[i], &descs[i])
	}
	return tickets[0]
}

func put(pe uint32, src uint64, dst uint64) Desc {
	return Desc{Op: OpPut, PE: pe, Size: 8, Src: src, Dst: dst}
}

// One batch with descriptors to a reordering host route (PEs 0 and 1) and a device route (PE 2),
// with fences between rewrites of the same word: a fence to every PE reaches each PE's route and
// a fence to one PE reaches its route, so each PE's later put lands last; the batch completes once,
// through the device route that took part in it.
func TestProxyMixedRoutesFence(t *testing.T) {
	local := newRegion(localBase, 4096)
	ring, _ := AllocRing(32)
	host := newReorderRoute(3, 4096, local)
	dev := newDeviceRoute(t, 4096, local, ring)
	var stats ProxyStats
	px, err := NewProxy(ProxyConfig{PE: 0, NPEs: 3, HeapSize: 4096, Routes: []Route{host, host, dev},
		Rings: []*Ring{ring}, Stats: &stats, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	defer px.Close()
	for v := uint64(1); v <= 6; v++ {
		binary.LittleEndian.PutUint64(local.b[8*v:], v)
	}
	val := func(v uint64) uint64 { return localBase + 8*v }
	descs := []Desc{
		put(1, val(1), 0), put(2, val(1), 0), put(1, val(3), 8),
		{Op: OpFence, PE: AllPEs},
		put(1, val(2), 0), put(2, val(2), 0),
		{Op: OpFence, PE: 1},
		put(1, val(4), 8), put(1, val(5), 16), put(1, val(6), 16), // no fence between these two
	}
	publishOneBatch(t, ring, descs)
	ctx := ctxT(t)
	if err := ring.Quiet(ctx); err != nil {
		t.Fatal(err)
	}
	if b := stats.Batches.Load(); b != 1 {
		t.Fatalf("the descriptors took %d batches, want 1", b)
	}
	if got := host.word(1, 0); got != 2 {
		t.Errorf("PE 1 word 0 = %d after a put of 1, a fence to all PEs and a put of 2", got)
	}
	if got := host.word(1, 8); got != 4 {
		t.Errorf("PE 1 word 8 = %d after a put of 3, a fence to PE 1 and a put of 4", got)
	}
	if got := host.word(1, 16); got != 5 {
		// The route delivers unfenced puts in reverse: this proves the fences above did the work.
		t.Errorf("PE 1 word 16 = %d; the fake reorders unfenced puts, so want 5", got)
	}
	if got := binary.LittleEndian.Uint64(dev.heap.b[0:]); got != 2 {
		t.Errorf("PE 2 word 0 = %d, want 2", got)
	}
	wantHost := "put:1:0 put:1:8 fence:0 fence:1 put:1:0 fence:1 put:1:8 put:1:16 put:1:16"
	if got := strings.Join(host.log, " "); got != wantHost {
		t.Errorf("host route saw %s, want %s", got, wantHost)
	}
	if got, want := dev.logged(), "put:2:0 fence:2 put:2:0"; got != want {
		t.Errorf("device route saw %s, want %s", got, want)
	}
	if dev.completions != 1 || ring.Completed() != uint64(len(descs)) {
		t.Errorf("device route completed %d times, ring completed %d of %d", dev.completions, ring.Completed(), len(descs))
	}
}

// A route that fails in the middle of a batch fails the ring: nothing of the batch completes,
// nothing after the failure is issued, Failed runs once before the error word is visible, and
// producers' later waits return the error instead of hanging. A rejection from a route fails it
// as a bad descriptor (RingErrInput), anything else as RingErrRemote.
func TestProxyRouteFailsMidBatch(t *testing.T) {
	for _, tc := range []struct {
		name   string
		reject bool
		code   RingErrCode
		want   string
	}{
		{"remote", false, RingErrRemote, "put to PE 1: fake: link to PE 1 went down"},
		{"reject", true, RingErrInput, "put to PE 1: local range [0x7f0000000008, +0x8): not resolvable here"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			local := newRegion(localBase, 4096)
			ring, _ := AllocRing(16)
			host := newReorderRoute(2, 4096, local)
			host.fail, host.reject = 3, tc.reject
			var failed atomic.Int32
			var errWordAtFail atomic.Uint32
			px, err := NewProxy(ProxyConfig{PE: 0, NPEs: 2, HeapSize: 4096, Routes: []Route{host, host}, Rings: []*Ring{ring},
				Logf: t.Logf, Failed: func(error) {
					failed.Add(1)
					errWordAtFail.Store(uint32(RingErrCode(atomic.LoadUint32(ring.errWord))))
				}})
			if err != nil {
				t.Fatal(err)
			}
			defer px.Close()
			ctx := ctxT(t)
			// A first batch that completes.
			if _, err := ring.Push(ctx, &Desc{Op: OpPut, PE: 1, Size: 8, Src: localBase, Dst: 0}); err != nil {
				t.Fatal(err)
			}
			if err := ring.Quiet(ctx); err != nil {
				t.Fatal(err)
			}
			var descs []Desc
			for i := 0; i < 6; i++ {
				descs = append(descs, put(1, localBase+8*uint64(i), 8*uint64(i)))
			}
			first := publishOneBatch(t, ring, descs)
			err = ring.WaitCompleted(ctx, first+5)
			var re *RingError
			if !errors.As(err, &re) || re.Code != tc.code || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("wait after a route failure: %v; want code %v and %q", err, tc.code, tc.want)
			}
			if tc.reject != errors.Is(err, ErrBadDescriptor) {
				t.Errorf("errors.Is(%v, ErrBadDescriptor) = %v", err, !tc.reject)
			}
			if c := ring.Completed(); c != first {
				t.Errorf("completed %d, want %d: part of the failed batch completed", c, first)
			}
			if got, want := strings.Join(host.log, " "), "put:1:0 put:1:0"; got != want {
				t.Errorf("route saw %s, want %s: descriptors after the failure were issued", got, want)
			}
			// Producers go on pushing into the failed ring without hanging.
			for i := 0; i < 40; i++ {
				if _, err := ring.Push(ctx, &Desc{Op: OpPut, PE: 1, Size: 8, Src: localBase}); err != nil {
					break
				}
			}
			if err := ring.Quiet(ctx); !errors.As(err, &re) || re.Code != tc.code {
				t.Errorf("quiet on the failed ring: %v", err)
			}
			if n := failed.Load(); n != 1 || errWordAtFail.Load() != uint32(RingOK) {
				t.Errorf("Failed ran %d times, the error word was %d when it ran (want once, before it was set)", n, errWordAtFail.Load())
			}
			if px.Err() == nil || errors.Is(px.Err(), ErrBadDescriptor) != tc.reject {
				t.Errorf("proxy error %v", px.Err())
			}
		})
	}
}

// Producers push to a host route (PE 1; its acknowledgements late, with async) and a device route
// whose queue writes completion (PE 2), on a ring smaller than the window of a full batch: every
// completed ticket's put has landed, the completed counter never goes back, and no ticket is
// issued more than Window tickets past the counter.
func TestProxyMixedRoutesTicketOrder(t *testing.T) {
	for _, pe1 := range []string{"host", "host-async", "device"} {
		t.Run("pe1="+pe1, func(t *testing.T) { testProxyMixedRoutesTicketOrder(t, pe1) })
	}
}

func testProxyMixedRoutesTicketOrder(t *testing.T, pe1 string) {
	const producers, each, window = 4, 100, 6
	local := newRegion(localBase, producers*each*8)
	ring, _ := AllocRing(8)
	fake := newFake(3, producers*each*8)
	var tr Transport = fake
	if pe1 == "host-async" {
		tr = asyncFake{fake}
	}
	route1 := NewTransportRoute(tr, local, time.Second)
	dev := newDeviceRoute(t, producers*each*8, local, ring)
	var dev1 *deviceRoute // PE 1 on a second, faster device queue: completion moves between the two
	if pe1 == "device" {
		dev1 = newDeviceRoute(t, producers*each*8, local, ring)
		dev1.delay, dev.delay = 0, 100*time.Microsecond
		route1 = dev1
	}
	px, err := NewProxy(ProxyConfig{PE: 0, NPEs: 3, HeapSize: uint64(producers * each * 8),
		Routes: []Route{route1, route1, dev}, Rings: []*Ring{ring}, Window: window, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	defer px.Close()
	stop := make(chan struct{})
	backwards := make(chan string, 1)
	go func() { // the counter never goes back
		var last uint64
		for {
			select {
			case <-stop:
				return
			default:
			}
			c := ring.Completed()
			if c < last {
				backwards <- fmt.Sprintf("completed went from %d back to %d", last, c)
				return
			}
			last = c
			runtime.Gosched()
		}
	}()
	ctx := ctxT(t)
	var wg sync.WaitGroup
	errs := make(chan error, producers)
	for p := 0; p < producers; p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; k < each; k++ {
				i := p*each + k
				off := uint64(8 * i)
				binary.LittleEndian.PutUint64(local.b[off:], uint64(i+1))
				pe := uint32(1 + i%2)
				tk, err := ring.Push(ctx, &Desc{Op: OpPut, PE: pe, Size: 8, Src: localBase + off, Dst: off})
				if err == nil && k%3 != 2 { // both PEs: i%2 picks the PE
					err = ring.WaitCompleted(ctx, tk)
					var got uint64
					if pe == 1 && dev1 != nil {
						got = binary.LittleEndian.Uint64(dev1.heap.b[off:])
					} else if pe == 1 {
						fake.mu.Lock()
						got = binary.LittleEndian.Uint64(fake.heaps[1].b[off:])
						fake.mu.Unlock()
					} else {
						got = binary.LittleEndian.Uint64(dev.heap.b[off:])
					}
					if err == nil && got != uint64(i+1) {
						err = fmt.Errorf("ticket %d (put to PE %d) completed before it landed", tk, pe)
					}
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := ring.Quiet(ctx); err != nil {
		t.Fatal(err)
	}
	close(stop)
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	select {
	case msg := <-backwards:
		t.Fatal(msg)
	default:
	}
	dev.mu.Lock()
	defer dev.mu.Unlock()
	if dev.maxAhead > window {
		t.Errorf("a ticket was issued %d past the completed counter, window %d", dev.maxAhead, window)
	}
}

// Without a Completer, a batch that no device route took part in completes from the host once
// the device route's last completion has landed, even while that route's queue is stalled; with
// a Completer every batch completes through it.
func TestProxyHostCompletionBesideStalledDevice(t *testing.T) {
	for _, always := range []bool{false, true} {
		t.Run(fmt.Sprintf("completer=%v", always), func(t *testing.T) {
			local := newRegion(localBase, 4096)
			ring, _ := AllocRing(8)
			fake := newFake(3, 4096)
			dev := newDeviceRoute(t, 4096, local, ring)
			cfg := ProxyConfig{PE: 0, NPEs: 3, HeapSize: 4096, Routes: []Route{nil, NewTransportRoute(fake, local, time.Second), dev},
				Rings: []*Ring{ring}, Window: 7, Logf: t.Logf}
			cfg.Routes[0] = cfg.Routes[1]
			if always {
				cfg.Completer = dev
			}
			px, err := NewProxy(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer px.Close()
			ctx := ctxT(t)
			if _, err := ring.Push(ctx, &Desc{Op: OpPut, PE: 2, Size: 8, Src: localBase, Dst: 0}); err != nil {
				t.Fatal(err)
			}
			if err := ring.Quiet(ctx); err != nil {
				t.Fatal(err)
			}
			dev.gate.Lock() // the device queue stalls (a kernel spinning in front of it)
			released := false
			release := func() {
				if !released {
					released = true
					dev.gate.Unlock()
				}
			}
			defer release()
			tk, err := ring.Push(ctx, &Desc{Op: OpPut, PE: 1, Size: 8, Src: localBase, Dst: 0})
			if err != nil {
				t.Fatal(err)
			}
			if !always {
				// A proxy that sends this completion through the stalled queue hangs here.
				if err := ring.WaitCompleted(ctx, tk); err != nil {
					t.Fatalf("a host-route batch waited for a stalled device queue: %v", err)
				}
			} else {
				// The completion cannot land while the queue is stalled; look for a while.
				short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
				err = ring.WaitCompleted(short, tk)
				cancel()
				if err == nil {
					t.Fatal("with a Completer, a batch completed without it")
				}
				release()
				if err := ring.WaitCompleted(ctx, tk); err != nil {
					t.Fatal(err)
				}
				dev.mu.Lock()
				n := dev.completions
				dev.mu.Unlock()
				if n != 2 {
					t.Errorf("the Completer completed %d batches, want 2", n)
				}
			}
		})
	}
}
