package kernels

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/roxamen/roxamen/device/host"
	"github.com/roxamen/roxamen/device/sdma"
	"github.com/roxamen/roxamen/internal/dl"
)

func TestSDMAParity(t *testing.T) {
	checkStruct(t, []string{"sdma.h"}, "roxshmem_sdma_queue_t", SDMAQueue{})
	checkStruct(t, []string{"sdma.h"}, "roxshmem_sdma_t", SDMATable{})
	got := runC(t, []string{"sdma.h"}, `
P("magic", ROXSHMEM_SDMA_MAGIC); P("maxq", ROXSHMEM_SDMA_MAX_QUEUES); P("copymax", ROXSHMEM_SDMA_COPY_MAX);
P("nop", ROXSHMEM_SDMA_OP_NOP); P("copy", ROXSHMEM_SDMA_OP_COPY); P("fence", ROXSHMEM_SDMA_OP_FENCE);
P("trap", ROXSHMEM_SDMA_OP_TRAP); P("poll", ROXSHMEM_SDMA_OP_POLL_REGMEM); P("atomic", ROXSHMEM_SDMA_OP_ATOMIC);
P("swap", ROXSHMEM_SDMA_ATOMIC_SWAP64); P("add", ROXSHMEM_SDMA_ATOMIC_ADD64);
P("copydw", ROXSHMEM_SDMA_COPY_DW); P("fencedw", ROXSHMEM_SDMA_FENCE_DW); P("atomicdw", ROXSHMEM_SDMA_ATOMIC_DW);
P("polldw", ROXSHMEM_SDMA_POLL_DW); P("trapdw", ROXSHMEM_SDMA_TRAP_DW); P("callsdma", ROXSHMEM_CALL_SDMA);
`)
	want := map[string]uint64{"magic": SDMAMagic, "maxq": SDMAMaxQueues, "copymax": sdma.CopyMax,
		"nop": sdma.OpNOP, "copy": sdma.OpCopy, "fence": sdma.OpFence, "trap": sdma.OpTrap,
		"poll": sdma.OpPollRegMem, "atomic": sdma.OpAtomic, "swap": sdma.AtomicSwap64, "add": sdma.AtomicAdd64,
		"copydw": sdma.CopyDwords, "fencedw": sdma.FenceDwords, "atomicdw": sdma.AtomicDwords,
		"polldw": sdma.PollDwords, "trapdw": sdma.TrapDwords, "callsdma": CallSDMA}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: header says %#x, Go %#x", k, got[k], v)
		}
	}
}

// TestSDMAPacketParity: the device library's encoders (C) and package sdma's write the same
// dwords for the same fields, and Decode gives the fields back.
func TestSDMAPacketParity(t *testing.T) {
	const dst, src, addr = 0x7f1234567890, 0x7e0000001008, 0x7fff00001230
	cases := []struct {
		c   string
		go_ []uint32
		chk func(p sdma.Packet) bool
	}{
		{"roxshmem_sdma_copy_linear(p, 0x7f1234567890ull, 0x7e0000001008ull, 0x3fffe0u)", sdma.EncodeCopyLinear(dst, src, sdma.CopyMax),
			func(p sdma.Packet) bool {
				return p.Op == sdma.OpCopy && p.Dst == dst && p.Src == src && p.Count == sdma.CopyMax
			}},
		{"roxshmem_sdma_copy_linear(p, 0x7f1234567890ull, 0x7e0000001008ull, 1u)", sdma.EncodeCopyLinear(dst, src, 1),
			func(p sdma.Packet) bool { return p.Count == 1 }},
		{"roxshmem_sdma_fence(p, 0x7fff00001230ull, 0xdeadbeefu)", sdma.EncodeFence(addr, 0xdeadbeef),
			func(p sdma.Packet) bool { return p.Op == sdma.OpFence && p.Addr == addr && p.Data == 0xdeadbeef }},
		{"roxshmem_sdma_atomic(p, ROXSHMEM_SDMA_ATOMIC_ADD64, 0x7fff00001230ull, 0x123456789abcdefull, 0)", sdma.EncodeAtomic(sdma.AtomicAdd64, addr, 0x123456789abcdef, 0),
			func(p sdma.Packet) bool {
				return p.Operation == sdma.AtomicAdd64 && p.Addr == addr && p.Value == 0x123456789abcdef && !p.Loop
			}},
		{"roxshmem_sdma_atomic(p, ROXSHMEM_SDMA_ATOMIC_SWAP64, 0x7fff00001230ull, 7, 9)", sdma.EncodeAtomic(sdma.AtomicSwap64, addr, 7, 9),
			func(p sdma.Packet) bool { return p.Operation == sdma.AtomicSwap64 && p.Value == 7 && p.Compare == 9 }},
		{"roxshmem_sdma_poll_mem(p, 0x7fff00001230ull, ROXSHMEM_SDMA_POLL_GE, 5, 0xffu, 10, 0xfff)", sdma.EncodePollMem(addr, sdma.PollGE, 5, 0xff, 10, 0xfff),
			func(p sdma.Packet) bool {
				return p.Func == sdma.PollGE && p.Data == 5 && p.Mask == 0xff && p.Interval == 10 && p.Retry == 0xfff
			}},
		{"roxshmem_sdma_trap(p, 0x1234567u)", sdma.EncodeTrap(0x1234567),
			func(p sdma.Packet) bool { return p.Op == sdma.OpTrap && p.IntCtx == 0x1234567 }},
		{"p[0] = roxshmem_sdma_nop(5)", append([]uint32{sdma.EncodeNOP(5)}, 0, 0, 0, 0),
			func(p sdma.Packet) bool { return p.Op == sdma.OpNOP && p.Dwords == 5 }},
	}
	var body strings.Builder
	for i, c := range cases {
		fmt.Fprintf(&body, "{ uint32_t p[8] = {0}; %s; for (int j = 0; j < 8; j++) { char k[16]; k[0] = 'a' + %d; k[1] = '0' + j; k[2] = 0; P(k, p[j]); } }\n", c.c, i)
	}
	got := runC(t, []string{"sdma.h"}, body.String())
	for i, c := range cases {
		ring := make([]uint32, 16)
		for j := range 8 {
			w := uint32(got[fmt.Sprintf("%c%c", 'a'+i, '0'+j)])
			if j < len(c.go_) && w != c.go_[j] {
				t.Errorf("%s: dword %d is %#x in C, %#x in Go", c.c, j, w, c.go_[j])
			}
			ring[j] = w
		}
		p, err := sdma.Decode(ring, 0, 16, 0)
		if err != nil {
			t.Errorf("%s: %v", c.c, err)
			continue
		}
		if p.Dwords != len(c.go_) || !c.chk(p) {
			t.Errorf("%s: decoded %+v", c.c, p)
		}
	}
}

// sdmaRoute is PE 0 of a two-PE "node" whose puts to PE 1 take one SDMA queue: the device
// library's producer (testdata/sdma_producer.cc, built for the CPU) writes the packets, an
// emulated engine executes them.
type sdmaRoute struct {
	t                  *testing.T
	heap0, heap1, ring []byte
	ctl                []uint64 // [0] rptr [1] wptr [2] doorbell [3] done (uint32) [8..] abort block
	q                  *SDMAQueue
	table              *SDMATable
	state              State
	engine             *host.SDMAEngine
	lib                struct {
		setState      func(s *State)
		putSDMA       func(d, s uintptr, n uint64, pe, nbi int32)
		putmem        func(d, s uintptr, n uint64, pe int32)
		putSignalSDMA func(d, s uintptr, n uint64, sig uintptr, v uint64, op, pe, nbi int32)
		quiet         func()
		fence         func()
		aborted       func() uint64
	}
}

// buildSDMAProducer builds testdata/sdma_producer.cc, the device library's SDMA producer, for the
// CPU (once per test binary).
func buildSDMAProducer(t *testing.T) string {
	t.Helper()
	return BuildHostLib(t, "testdata/sdma_producer.cc", "-O2")
}

var sdmaLib struct {
	once sync.Once
	h    *dl.Lib
	err  error
}

// loadSDMAProducer loads the producer once per test binary: the routes share one instance.
func loadSDMAProducer(t *testing.T) *dl.Lib {
	t.Helper()
	so := buildSDMAProducer(t)
	sdmaLib.once.Do(func() { sdmaLib.h, sdmaLib.err = dl.OpenLocal(so) })
	if sdmaLib.err != nil {
		t.Fatal(sdmaLib.err)
	}
	return sdmaLib.h
}

const sdmaHeap = 32 << 20

// newSDMARoute sets up the route with a ring of ringBytes. badPeer maps PE 1 at an address the
// engine cannot reach (a wrong peer mapping: every SDMA write to it faults).
func newSDMARoute(t *testing.T, ringBytes int, threshold uint64, badPeer bool, seed uint64) *sdmaRoute {
	t.Helper()
	h := loadSDMAProducer(t)
	r := &sdmaRoute{t: t, heap0: HostMem(t, sdmaHeap), heap1: HostMem(t, sdmaHeap), ring: HostMem(t, ringBytes)}
	ctl := HostMem(t, 4096)
	r.ctl = unsafe.Slice((*uint64)(unsafe.Pointer(&ctl[0])), 512)
	dev := HostMem(t, int(unsafe.Sizeof(SDMAQueue{})+unsafe.Sizeof(SDMATable{})))
	r.q = (*SDMAQueue)(unsafe.Pointer(&dev[0]))
	r.table = (*SDMATable)(unsafe.Pointer(&dev[unsafe.Sizeof(SDMAQueue{})]))
	*r.q = SDMAQueue{Ring: HostAddr(r.ring), Rptr: HostAddr(ctl), Wptr: HostAddr(ctl) + 8, Doorbell: HostAddr(ctl) + 16, Done: HostAddr(ctl) + 24,
		RingBytes: uint32(ringBytes)}
	r.table.Magic, r.table.NQueues, r.table.Threshold = SDMAMagic, 1, threshold
	r.table.Queue[1][0] = uint64(uintptr(unsafe.Pointer(r.q)))
	peer1 := HostAddr(r.heap1)
	if badPeer {
		peer1 = 0x10000 // not mapped by the engine
	}
	r.state = State{Magic: StateMagic, Version: StateVersion, MyPE: 0, NPEs: 2, HeapBase: HostAddr(r.heap0), HeapSize: sdmaHeap,
		Abort: HostAddr(ctl) + 64, SDMA: uint64(uintptr(unsafe.Pointer(r.table)))}
	r.state.PeerBase[0], r.state.PeerBase[1] = HostAddr(r.heap0), peer1
	if err := h.Map(map[string]any{"rox_set_state": &r.lib.setState, "rox_put_sdma": &r.lib.putSDMA, "rox_putmem": &r.lib.putmem,
		"rox_put_signal_sdma": &r.lib.putSignalSDMA, "rox_quiet": &r.lib.quiet, "rox_fence": &r.lib.fence, "rox_aborted": &r.lib.aborted}); err != nil {
		t.Fatal(err)
	}
	r.lib.setState(&r.state)
	e, err := host.StartSDMA(host.SDMAQueue{Ring: unsafe.Slice((*uint32)(unsafe.Pointer(&r.ring[0])), ringBytes/4),
		Rptr: &r.ctl[0], Wptr: &r.ctl[1], Doorbell: &r.ctl[2], Seed: seed,
		Regions: []host.SDMARegion{{Base: HostAddr(r.heap0), Mem: r.heap0}, {Base: HostAddr(r.heap1), Mem: r.heap1}, {Base: HostAddr(ctl), Mem: ctl}}})
	if err != nil {
		t.Fatal(err)
	}
	r.engine = e
	t.Cleanup(func() {
		if err := e.Stop(); err != nil && !badPeer {
			t.Errorf("engine: %v", err)
		}
	})
	return r
}

// put is a put from heap0 offset src to PE 1's heap offset dst.
func (r *sdmaRoute) put(dst, src int, n int, nbi bool) {
	r.lib.putSDMA(uintptr(HostAddr(r.heap0))+uintptr(dst), uintptr(HostAddr(r.heap0))+uintptr(src), uint64(n), 1, b2i(nbi))
}

func (r *sdmaRoute) putSignal(dst, src, n, sig int, v uint64, add, nbi bool) {
	op := int32(0)
	if add {
		op = 1
	}
	h0 := uintptr(HostAddr(r.heap0))
	r.lib.putSignalSDMA(h0+uintptr(dst), h0+uintptr(src), uint64(n), h0+uintptr(sig), v, op, 1, b2i(nbi))
}

func b2i(b bool) int32 {
	if b {
		return 1
	}
	return 0
}

func (r *sdmaRoute) word(off int) *uint64 { return (*uint64)(unsafe.Pointer(&r.heap1[off])) }

// idle checks that everything reserved was committed, executed and completed.
func (r *sdmaRoute) idle() {
	r.t.Helper()
	res, com := atomic.LoadUint64(&r.q.Reserve), atomic.LoadUint64(&r.q.Committed)
	rp, done := atomic.LoadUint64(&r.ctl[0]), atomic.LoadUint32((*uint32)(unsafe.Pointer(&r.ctl[3])))
	if res != com || rp != com || done != uint32(com) {
		r.t.Errorf("after quiet: reserve %#x committed %#x read pointer %#x done %#x: want all equal", res, com, rp, done)
	}
}

func TestSDMAEmulatedPuts(t *testing.T) {
	r := newSDMARoute(t, 4096, 0, false, 1)
	rng := rand.New(rand.NewPCG(1, 2))
	const src, dst = 1 << 20, 8 << 20
	for i, n := range []int{1, 3, 8, 4095, 64<<10 + 1, sdma.CopyMax + 5, 9<<20 + 3} {
		soff, doff := src+i%7, dst+(i*5)%11
		for j := 0; j < n; j++ {
			r.heap0[soff+j] = byte(rng.Uint32())
		}
		for j := doff - 64; j < doff+n+64; j++ {
			r.heap1[j] = 0xa5
		}
		r.put(doff, soff, n, false) // blocking: returns once the completion fence has landed
		if !bytes.Equal(r.heap1[doff:doff+n], r.heap0[soff:soff+n]) {
			t.Fatalf("%d bytes at odd offsets: the destination differs after the blocking put", n)
		}
		for j := doff - 64; j < doff+n+64; j++ {
			if (j < doff || j >= doff+n) && r.heap1[j] != 0xa5 {
				t.Fatalf("%d-byte put wrote outside its destination at %d", n, j-doff)
			}
		}
	}
	// nbi puts complete at quiet; many small ones wrap the 4 KiB ring many times
	for i := 0; i < 2000; i++ {
		binaryPut(r.heap0[src+8*i:], uint64(i)*3+1)
		r.put(dst+8*i, src+8*i, 8, true)
	}
	r.lib.quiet()
	for i := 0; i < 2000; i++ {
		if got := *(*uint64)(unsafe.Pointer(&r.heap1[dst+8*i])); got != uint64(i)*3+1 {
			t.Fatalf("nbi put %d: %d after quiet", i, got)
		}
	}
	if rp := atomic.LoadUint64(&r.ctl[0]); rp < 20*4096 {
		t.Errorf("read pointer %#x: the ring did not wrap", rp)
	}
	r.idle()
	t.Logf("%d packets through a 4 KiB ring, read pointer %#x", r.engine.Packets(), atomic.LoadUint64(&r.ctl[0]))
}

func binaryPut(b []byte, v uint64) { *(*uint64)(unsafe.Pointer(&b[0])) = v }

// The signal lands after its data whatever order the engine lands the copy's pieces in.
func TestSDMAEmulatedSignalAfterData(t *testing.T) {
	r := newSDMARoute(t, 1<<16, 0, false, 5)
	const n, src, dst, sig = 256 << 10, 0, 4 << 20, 16 << 20
	for round := uint64(1); round <= 100; round++ {
		for j := 0; j < n; j += 8 {
			binaryPut(r.heap0[src+j:], round)
		}
		r.putSignal(dst, src, n, sig, round, false, true)
		deadline := time.Now().Add(20 * time.Second)
		for atomic.LoadUint64(r.word(sig)) != round {
			if time.Now().After(deadline) {
				t.Fatalf("round %d: the signal never arrived (engine: %v)", round, r.engine.Err())
			}
		}
		for j := 0; j < n; j += 8 {
			if v := atomic.LoadUint64(r.word(dst + j)); v != round {
				t.Fatalf("round %d: signal seen, data at %d is %d", round, j, v)
			}
		}
		r.lib.quiet() // the source is reused next round
	}
	r.idle()
}

// 64 producers race for one queue: every reservation commits in order, nothing is lost.
func TestSDMAEmulatedRacingProducers(t *testing.T) {
	r := newSDMARoute(t, 8192, 0, false, 9)
	const producers, each, size = 64, 20, 1000
	const counter = 30 << 20
	var wg sync.WaitGroup
	for p := 0; p < producers; p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; k < each; k++ {
				off := (p*each + k) * size
				for j := 0; j < size; j++ {
					r.heap0[off+j] = byte(p + k*j)
				}
				r.putSignal(off, off, size, counter, 1, true, true)
			}
			r.lib.quiet()
			// after this producer's quiet, its puts have all landed
			for k := 0; k < each; k++ {
				off := (p*each + k) * size
				if !bytes.Equal(r.heap1[off:off+size], r.heap0[off:off+size]) {
					t.Errorf("producer %d put %d: data differs after its quiet", p, k)
					return
				}
			}
		}()
	}
	wg.Wait()
	if got := atomic.LoadUint64(r.word(counter)); got != producers*each {
		t.Errorf("signal adds: counter %d, want %d", got, producers*each)
	}
	r.idle()
}

// A busy engine fills the ring: producers wait for space (never overwrite packets the engine has
// not read) and go on once it drains.
func TestSDMAEmulatedFullRing(t *testing.T) {
	r := newSDMARoute(t, 4096, 0, false, 3)
	r.engine.Pause()
	done := make(chan struct{})
	go func() {
		for i := 0; i < 400; i++ {
			binaryPut(r.heap0[8*i:], uint64(i)+7)
			r.put(1<<20+8*i, 8*i, 8, true)
		}
		close(done)
	}()
	time.Sleep(100 * time.Millisecond)
	select {
	case <-done:
		t.Fatal("400 puts of 44 bytes of packets each went into a 4 KiB ring whose engine is paused")
	default:
	}
	if res, rp := atomic.LoadUint64(&r.q.Reserve), atomic.LoadUint64(&r.ctl[0]); res-rp > 4096 {
		t.Fatalf("reserved %#x with the read pointer at %#x: more than the ring", res, rp)
	}
	r.engine.Resume()
	<-done
	r.lib.quiet()
	for i := 0; i < 400; i++ {
		if got := *(*uint64)(unsafe.Pointer(&r.heap1[1<<20+8*i])); got != uint64(i)+7 {
			t.Fatalf("put %d: %d", i, got)
		}
	}
	r.idle()
}

// The threshold sends large ordinary puts by SDMA and small ones by load/store.
func TestSDMAEmulatedThreshold(t *testing.T) {
	r := newSDMARoute(t, 4096, 64<<10, false, 4)
	h0 := uintptr(HostAddr(r.heap0))
	before := r.engine.Packets()
	r.lib.putmem(h0+1<<20, h0, 4096, 1)
	if r.engine.Packets() != before {
		t.Errorf("a 4 KiB put below the 64 KiB threshold took the SDMA route")
	}
	r.lib.putmem(h0+1<<20, h0, 64<<10, 1)
	if r.engine.Packets() == before {
		t.Errorf("a 64 KiB put at the threshold did not take the SDMA route")
	}
	r.lib.quiet()
	r.idle()
}

// An engine fault stops the queue; once the host sets the abort word, the blocked put returns and
// the abort record names the SDMA wait.
func TestSDMAEmulatedFault(t *testing.T) {
	r := newSDMARoute(t, 4096, 0, true, 2)
	returned := make(chan struct{})
	go func() { r.put(0, 1<<20, 4096, false); close(returned) }()
	select {
	case <-r.engine.Stopped():
	case <-time.After(10 * time.Second):
		t.Fatal("the engine did not stop on a write to an unmapped peer address")
	}
	if err := r.engine.Err(); err == nil || !strings.Contains(err.Error(), "not mapped") {
		t.Fatalf("engine error %v: want a VM fault", err)
	}
	select {
	case <-returned:
		t.Fatal("the blocking put returned although its data never landed")
	case <-time.After(50 * time.Millisecond):
	}
	atomic.StoreUint64(&r.ctl[8], 0x42) // the host learns of the fault: abort word
	select {
	case <-returned:
	case <-time.After(10 * time.Second):
		t.Fatal("the blocked put ignored the abort word")
	}
	if r.lib.aborted() == 0 {
		t.Error("roxshmemx_aborted() is 0 after the abort")
	}
	rec := DecodeAbortRecord(atomic.LoadUint64(&r.ctl[9]))
	if !rec.Valid || rec.Call != CallSDMA || rec.PE != 1 {
		t.Errorf("abort record %+v: want the SDMA wait on PE 1", rec)
	}
}
