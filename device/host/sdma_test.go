package host

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/roxamen/roxamen/device/sdma"
)

// sdmaRig is one queue with its engine and a memory region the packets address, driven from Go
// (the device library's own producer is tested against the engine in package kernels).
type sdmaRig struct {
	t      *testing.T
	ring   []uint32
	ctl    []uint64 // [0] rptr, [1] wptr, [2] doorbell
	mem    []byte
	base   uint64
	wp     uint64
	engine *SDMAEngine
}

func newSDMARig(t *testing.T, ringDwords int, seed uint64) *sdmaRig {
	t.Helper()
	mmap := func(n int) []byte {
		b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { unix.Munmap(b) })
		return b
	}
	rb, cb, mem := mmap(4*ringDwords), mmap(4096), mmap(16<<20)
	r := &sdmaRig{t: t, ring: unsafe.Slice((*uint32)(unsafe.Pointer(&rb[0])), ringDwords),
		ctl: unsafe.Slice((*uint64)(unsafe.Pointer(&cb[0])), 3), mem: mem, base: uint64(uintptr(unsafe.Pointer(&mem[0])))}
	e, err := StartSDMA(SDMAQueue{Ring: r.ring, Rptr: &r.ctl[0], Wptr: &r.ctl[1], Doorbell: &r.ctl[2],
		Regions: []SDMARegion{{Base: r.base, Mem: mem}}, Seed: seed})
	if err != nil {
		t.Fatal(err)
	}
	r.engine = e
	t.Cleanup(func() { e.Stop() })
	return r
}

// submit writes the packets at the write pointer (padding to the ring's end with a NOP when they
// would straddle it) and rings the doorbell.
func (r *sdmaRig) submit(pkts ...[]uint32) {
	var dws []uint32
	for _, p := range pkts {
		dws = append(dws, p...)
	}
	n := uint64(len(r.ring))
	if at := r.wp / 4 % n; at+uint64(len(dws)) > n {
		r.ring[at] = sdma.EncodeNOP(int(n - at))
		r.wp += 4 * (n - at)
	}
	for atomic.LoadUint64(&r.ctl[0])+4*n < r.wp+4*uint64(len(dws)) {
		time.Sleep(10 * time.Microsecond) // ring full: wait for the engine
	}
	for i, d := range dws {
		atomic.StoreUint32(&r.ring[(r.wp/4+uint64(i))%n], d)
	}
	r.wp += 4 * uint64(len(dws))
	atomic.StoreUint64(&r.ctl[1], r.wp)
	atomic.StoreUint64(&r.ctl[2], r.wp)
}

func (r *sdmaRig) word32(off int) *uint32 { return (*uint32)(unsafe.Pointer(&r.mem[off])) }
func (r *sdmaRig) word64(off int) *uint64 { return (*uint64)(unsafe.Pointer(&r.mem[off])) }

func (r *sdmaRig) waitWord32(off int, v uint32) {
	r.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for atomic.LoadUint32(r.word32(off)) != v {
		if err := r.engine.Err(); err != nil {
			r.t.Fatal(err)
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("word at %#x never became %#x", off, v)
		}
		time.Sleep(10 * time.Microsecond)
	}
}

const (
	rigSrc  = 0
	rigDst  = 5 << 20
	rigFlag = 16<<20 - 4096
)

func TestSDMAEngineCopyFence(t *testing.T) {
	r := newSDMARig(t, 1024, 1)
	rng := rand.New(rand.NewPCG(2, 3))
	for i, n := range []int{1, 3, 4096 + 5, sdma.CopyMax, 3<<20 + 7} {
		off := 1 + i
		for j := 0; j < n; j++ {
			r.mem[rigSrc+j] = byte(rng.Uint32())
		}
		var pkts [][]uint32
		for done := 0; done < n; done += sdma.CopyMax {
			k := min(n-done, sdma.CopyMax)
			pkts = append(pkts, sdma.EncodeCopyLinear(r.base+uint64(rigDst+off+done), r.base+uint64(rigSrc+done), uint32(k)))
		}
		pkts = append(pkts, sdma.EncodeFence(r.base+rigFlag, uint32(i+1)))
		r.submit(pkts...)
		r.waitWord32(rigFlag, uint32(i+1))
		if !bytes.Equal(r.mem[rigDst+off:rigDst+off+n], r.mem[rigSrc:rigSrc+n]) {
			t.Fatalf("%d bytes: destination differs from the source after the fence", n)
		}
	}
}

// Without a fence between the data and the signal, the emulator lets the signal overtake the
// data (what the engine's queue does not promise); with one, never.
func TestSDMAEngineSignalNeedsFence(t *testing.T) {
	for _, fenced := range []bool{false, true} {
		r := newSDMARig(t, 4096, 7)
		const n = 64 << 10
		early := 0
		for round := uint64(1); round <= 200; round++ {
			for j := 0; j < n; j += 8 {
				*(*uint64)(unsafe.Pointer(&r.mem[rigSrc+j])) = round
			}
			pkts := [][]uint32{sdma.EncodeCopyLinear(r.base+rigDst, r.base+rigSrc, n)}
			if fenced {
				pkts = append(pkts, sdma.EncodeFence(r.base+rigFlag+64, uint32(round)))
			}
			pkts = append(pkts, sdma.EncodeAtomic(sdma.AtomicSwap64, r.base+rigFlag, round, 0))
			r.submit(pkts...)
			for atomic.LoadUint64(r.word64(rigFlag)) != round {
				if err := r.engine.Err(); err != nil {
					t.Fatal(err)
				}
			}
			for j := 0; j < n; j += 8 {
				if atomic.LoadUint64((*uint64)(unsafe.Pointer(&r.mem[rigDst+j]))) != round {
					early++
					break
				}
			}
			r.submit(sdma.EncodeFence(r.base+rigFlag+128, uint32(round)))
			r.waitWord32(rigFlag+128, uint32(round))
		}
		switch {
		case fenced && early != 0:
			t.Errorf("with a fence before the signal, %d of 200 rounds saw the signal before the data", early)
		case !fenced && early == 0:
			t.Errorf("without a fence the signal never overtook the data in 200 rounds: the emulator has no power")
		}
		t.Logf("fenced=%v: signal seen before its data in %d of 200 rounds", fenced, early)
	}
}

func TestSDMAEngineAtomicsPollTrapWrap(t *testing.T) {
	r := newSDMARig(t, 64, 9) // 256 bytes: every few packets wrap
	for i := 0; i < 100; i++ {
		r.submit(sdma.EncodeAtomic(sdma.AtomicAdd64, r.base+rigFlag, 3, 0), sdma.EncodeTrap(uint32(i)))
	}
	r.submit(sdma.EncodeFence(r.base+rigFlag+8, 1))
	r.waitWord32(rigFlag+8, 1)
	if got := atomic.LoadUint64(r.word64(rigFlag)); got != 300 {
		t.Errorf("100 add64 of 3: %d", got)
	}
	if r.engine.Traps() != 100 {
		t.Errorf("traps %d, want 100", r.engine.Traps())
	}
	if rp := atomic.LoadUint64(&r.ctl[0]); rp < 10*256 {
		t.Errorf("read pointer %d: the ring did not wrap", rp)
	}
	// POLL_REGMEM holds the queue until the word is set from outside.
	r.submit(sdma.EncodePollMem(r.base+rigFlag+16, sdma.PollEQ, 5, 0xff, 10, 0xfff), sdma.EncodeFence(r.base+rigFlag+24, 1))
	time.Sleep(20 * time.Millisecond)
	if atomic.LoadUint32(r.word32(rigFlag+24)) != 0 {
		t.Fatal("the fence after POLL_REGMEM ran before the polled word held")
	}
	atomic.StoreUint32(r.word32(rigFlag+16), 0x105) // masked: 5
	r.waitWord32(rigFlag+24, 1)
}

func TestSDMAEngineFaults(t *testing.T) {
	for _, c := range []struct {
		name string
		pkt  []uint32
		want string
	}{
		{"unknown opcode", []uint32{0x3f, 0, 0, 0}, "unknown opcode 63"},
		{"copy with swap", []uint32{1, 7, 0x10000, 0, 0, 0, 0}, "byte swapping"},
		{"atomic loop op", sdma.EncodeAtomic(0x7, 0, 0, 0), "ATOMIC operation 0x7"},
		{"VM fault", sdma.EncodeFence(0x1000, 1), "not mapped"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newSDMARig(t, 64, 1)
			r.submit(sdma.EncodeTrap(1))
			r.submit(c.pkt)
			select {
			case <-r.engine.Stopped():
			case <-time.After(10 * time.Second):
				t.Fatal("the engine did not stop on a bad packet")
			}
			err := r.engine.Err()
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "offset 0x8") {
				t.Fatalf("error %v: want it to name queue offset 0x8 and %q", err, c.want)
			}
			var de *sdma.DecodeError
			if c.name != "VM fault" && !errors.As(err, &de) {
				t.Errorf("%v is not a *sdma.DecodeError", err)
			}
			if rp := atomic.LoadUint64(&r.ctl[0]); rp != 8 {
				t.Errorf("read pointer %d: the queue must stop at the bad packet (8)", rp)
			}
		})
	}
}
