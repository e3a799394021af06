package kernels

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/roxamen/roxamen/device"
	"github.com/roxamen/roxamen/device/cuda"
	"github.com/roxamen/roxamen/internal/testkit"
	"github.com/roxamen/roxamen/nic"
)

// GPU tests: the device library built by clang-19 (gpucheck/check-clang-sm_90.ptx) and by nvcc
// (ROX_GPUCHECK_NVCC_PTX, written by gpucheck/run.sh), plus the embedded runtime object, run
// through device/cuda with two PEs (one per GPU; both on one GPU when there is only one). They skip
// without a GPU and FAIL when ROX_TEST_GPU is set. On the GPU machine (no Go there):
//
//	here:  CGO_ENABLED=0 go test -c -o .gpu/kernels.test ./kernels
//	there: bash kernels/gpucheck/run.sh      (carry .gpu)

const (
	gpuHeap    = 64 << 20
	dataOff    = 0        // test data region, up to 32 MiB
	miscOff    = 40 << 20 // p/g slots, counters, signals
	sigOff     = miscOff + 1<<20
	counterOff = miscOff + 2<<20
	barrierOff = gpuHeap - BarrierBytes
)

type gpuPE struct {
	dev    device.Device
	mod    device.Module
	stream device.Stream
	heap   device.Ptr
	state  State
	stateP device.Ptr
	abort  device.HostBuffer
}

func gpuDevices(t *testing.T) []device.Device {
	t.Helper()
	drv := cuda.New()
	n, err := drv.Count()
	if err == nil && n == 0 {
		err = fmt.Errorf("no CUDA device")
	}
	if err != nil {
		testkit.NeedGPU(t, "no GPU: %v", err)
	}
	if n > 2 {
		n = 2
	}
	var devs []device.Device
	for i := 0; i < n; i++ {
		d, err := drv.Open(i)
		if err != nil {
			t.Fatalf("Open(%d): %v", i, err)
		}
		t.Cleanup(func() { d.Close() })
		devs = append(devs, d)
	}
	if n == 2 {
		for i := range devs {
			if err := devs[i].EnablePeerAccess(devs[1-i].Info()); err != nil {
				t.Fatalf("EnablePeerAccess: %v", err)
			}
		}
	} else {
		t.Logf("one GPU: both PEs run on %v", devs[0].Info())
	}
	return devs
}

func ok(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// newPEs loads image on two PEs and fills their states (flags: FlagBypass or 0).
func newPEs(t *testing.T, devs []device.Device, image []byte, flags uint32) [2]*gpuPE {
	t.Helper()
	var pes [2]*gpuPE
	for i := range pes {
		p := &gpuPE{dev: devs[i%len(devs)]}
		var err error
		p.heap, err = p.dev.Alloc(gpuHeap)
		ok(t, err)
		t.Cleanup(func() { p.dev.Free(p.heap) })
		ok(t, p.dev.Memset(p.heap, 0, gpuHeap))
		p.abort, err = p.dev.AllocHost(int(unsafe.Sizeof(Abort{})))
		ok(t, err)
		t.Cleanup(func() { p.dev.FreeHost(p.abort) })
		clear(p.abort.Bytes)
		p.mod, err = p.dev.LoadModule(image)
		ok(t, err)
		t.Cleanup(func() { p.mod.Unload() })
		p.stream, err = p.dev.NewStream()
		ok(t, err)
		t.Cleanup(func() { p.stream.Destroy() })
		var size int
		p.stateP, size, err = p.mod.Global(StateSymbol)
		ok(t, err)
		if size != int(unsafe.Sizeof(State{})) {
			t.Fatalf("%s is %d bytes in the module, State is %d", StateSymbol, size, unsafe.Sizeof(State{}))
		}
		pes[i] = p
	}
	for i, p := range pes {
		p.state = State{Magic: StateMagic, Version: StateVersion, Flags: flags, MyPE: int32(i), NPEs: 2,
			HeapBase: uint64(p.heap), HeapSize: gpuHeap, Abort: uint64(p.abort.Dev), BarrierOff: barrierOff}
		p.state.PeerBase[0] = uint64(pes[0].heap)
		p.state.PeerBase[1] = uint64(pes[1].heap)
		p.push(t)
	}
	return pes
}

func (p *gpuPE) push(t *testing.T) {
	t.Helper()
	ok(t, p.dev.CopyHtoD(p.stateP, StateBytes(&p.state)))
}

func (p *gpuPE) launch(t *testing.T, name string, grid, block int, args ...any) {
	t.Helper()
	fn, err := p.mod.Function(name)
	ok(t, err)
	ok(t, p.stream.Launch(fn, device.D1(grid), device.D1(block), 0, args...))
}

// wait synchronizes the PEs' streams, failing (not hanging) after a timeout. On a timeout it
// sets every PE's abort word first, so that device waits return and the cleanups (module unload,
// frees: each synchronizes the context) do not block behind a kernel that never ends.
func wait(t *testing.T, pes ...*gpuPE) {
	t.Helper()
	done := make(chan error, len(pes))
	for _, p := range pes {
		go func() { done <- p.stream.Synchronize() }()
	}
	timeout := time.After(60 * time.Second)
	for n := 0; n < len(pes); n++ {
		select {
		case err := <-done:
			ok(t, err)
		case <-timeout:
			for _, p := range pes {
				atomic.StoreUint64((*uint64)(unsafe.Pointer(&p.abort.Bytes[0])), 0xdead)
			}
			drained := time.After(10 * time.Second)
			for ; n < len(pes); n++ {
				select {
				case <-done:
				case <-drained:
					// A kernel that ignores the abort word would hang every cleanup: end the
					// binary with the reason rather than hang the job.
					fmt.Fprintf(os.Stderr, "%s: kernel did not finish in 60 s and ignored the abort word\n", t.Name())
					os.Exit(3)
				}
			}
			t.Fatal("kernel did not finish in 60 s: a device wait hangs (abort word set to free it)")
		}
	}
}

func (p *gpuPE) read(t *testing.T, off uint64, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	ok(t, p.dev.CopyDtoH(b, p.heap.Add(int(off))))
	return b
}

func (p *gpuPE) u64s(t *testing.T, at device.Ptr, n int) []uint64 {
	t.Helper()
	b := make([]byte, 8*n)
	ok(t, p.dev.CopyDtoH(b, at))
	out := make([]uint64, n)
	for i := range out {
		out[i] = binary.LittleEndian.Uint64(b[8*i:])
	}
	return out
}

func (p *gpuPE) scratch(t *testing.T, n int) device.Ptr {
	t.Helper()
	b, err := p.dev.Alloc(n)
	ok(t, err)
	t.Cleanup(func() { p.dev.Free(b) })
	ok(t, p.dev.Memset(b, 0, n))
	return b
}

func gpuImages(t *testing.T) map[string][]byte {
	images := map[string][]byte{}
	b, err := os.ReadFile(filepath.Join("gpucheck", "check-clang-sm_90.ptx"))
	ok(t, err)
	images["clang-19"] = b
	if p := os.Getenv("ROX_GPUCHECK_NVCC_PTX"); p != "" {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatalf("ROX_GPUCHECK_NVCC_PTX: %v", err)
		}
		images["nvcc"] = b
	} else if testkit.Required(testkit.GPU) {
		t.Log("ROX_GPUCHECK_NVCC_PTX not set: the nvcc build is not checked (gpucheck/run.sh sets it)")
	}
	return images
}

func TestGPU(t *testing.T) {
	devs := gpuDevices(t)
	for name, image := range gpuImages(t) {
		for _, mode := range []struct {
			name  string
			flags uint32
		}{{"strict", 0}, {"bypass", FlagBypass}} {
			t.Run(name+"/"+mode.name, func(t *testing.T) {
				pes := newPEs(t, devs, image, mode.flags)
				t.Run("put", func(t *testing.T) { gpuPut(t, pes, 4) })
				t.Run("get", func(t *testing.T) { gpuGet(t, pes) })
				t.Run("p_g", func(t *testing.T) { gpuPG(t, pes) })
				t.Run("amo", func(t *testing.T) { gpuAMO(t, pes, 8, 128, 4) })
				t.Run("putmem_signal", func(t *testing.T) { gpuPutSignal(t, pes) })
				t.Run("barrier", func(t *testing.T) { gpuBarrier(t, pes) })
				t.Run("abort", func(t *testing.T) { gpuAbort(t, pes) })
			})
		}
	}
}

var gpuSizes = []int{1, 7, 64, 4096 + 3, 1<<20 + 5, 16<<20 + 9}

// gpuPut: PE0 puts fresh random bytes at odd offsets into PE1's heap, by every way (maxWay
// excluded: 4 is the copy engine); the bytes around stay poisoned. Then whole 16-byte units at
// 16-byte alignment, which take the inline load/store path (roxi_putmem_ls16).
func gpuPut(t *testing.T, pes [2]*gpuPE, ways int) {
	src := pes[0].scratch(t, 17<<20)
	put := func(n, way int, off uint64, srcOff int) {
		data := make([]byte, n)
		for i := range data {
			data[i] = byte(rand.Uint32())
		}
		ok(t, pes[0].dev.CopyHtoD(src.Add(srcOff), data))
		ok(t, pes[1].dev.Memset(pes[1].heap, 0xa5, n+64))
		pes[0].launch(t, "chk_put", 4, 256, pes[0].heap.Add(int(dataOff+off)), src.Add(srcOff), uint64(n), int32(1), int32(way))
		wait(t, pes[0])
		got := pes[1].read(t, dataOff, n+64)
		if !bytes.Equal(got[off:off+uint64(n)], data) {
			t.Errorf("way %d size %d offset %d: destination differs (first bytes %x, want %x)", way, n, off, head(got[off:]), head(data))
		}
		for i := range got {
			if (uint64(i) < off || uint64(i) >= off+uint64(n)) && got[i] != 0xa5 {
				t.Errorf("way %d size %d offset %d: byte %d outside the destination changed to %#x", way, n, off, i, got[i])
				break
			}
		}
	}
	for _, n := range gpuSizes {
		for way := 0; way < ways; way++ {
			put(n, way, uint64(1+2*way+n%5), 3)
		}
	}
	for _, n := range []int{16, 4096, 1<<20 + 64} {
		for way := 0; way < ways; way++ {
			put(n, way, uint64(16*(1+way)), 16)
		}
	}
}

func head(b []byte) []byte {
	if len(b) > 8 {
		return b[:8]
	}
	return b
}

func gpuGet(t *testing.T, pes [2]*gpuPE) {
	dst := pes[0].scratch(t, 17<<20)
	for _, n := range gpuSizes {
		for way := 0; way < 2; way++ {
			off := 5 + uint64(n%3)
			data := make([]byte, n)
			for i := range data {
				data[i] = byte(rand.Uint32())
			}
			ok(t, pes[1].dev.CopyHtoD(pes[1].heap.Add(int(off)), data))
			ok(t, pes[0].dev.Memset(dst, 0x5a, n+16))
			pes[0].launch(t, "chk_get", 4, 256, dst.Add(1), pes[0].heap.Add(int(off)), uint64(n), int32(1), int32(way))
			wait(t, pes[0])
			got := make([]byte, n+16)
			ok(t, pes[0].dev.CopyDtoH(got, dst))
			if !bytes.Equal(got[1:1+n], data) || got[0] != 0x5a || got[1+n] != 0x5a {
				t.Errorf("get way %d size %d: got %x..., want %x...", way, n, head(got[1:]), head(data))
			}
		}
	}
}

func gpuPG(t *testing.T, pes [2]*gpuPE) {
	out := pes[0].scratch(t, 128*8)
	pes[0].launch(t, "chk_p_g", 1, 64, pes[0].heap.Add(miscOff), int32(1), out)
	wait(t, pes[0])
	got := pes[0].u64s(t, out, 128)
	remote := pes[1].u64s(t, pes[1].heap.Add(miscOff), 64)
	for i := uint64(0); i < 64; i++ {
		want := 0x0101010101010101*i + 7
		if got[i] != want || remote[i] != want {
			t.Errorf("slot %d: g returned %#x, memory holds %#x, want %#x", i, got[i], remote[i], want)
		}
		sum := -int64(i)*1000 + int64(i*3) - 50 + int64('A'+i%26) + int64(i)
		if int64(got[64+i]) != sum {
			t.Errorf("slot %d: narrow types sum %d, want %d", i, int64(got[64+i]), sum)
		}
	}
}

func gpuAMO(t *testing.T, pes [2]*gpuPE, grid, block, iters int) {
	c64 := pes[0].heap.Add(counterOff)
	c32, x, cas := c64.Add(64), c64.Add(128), c64.Add(192)
	ok(t, pes[1].dev.Memset(pes[1].heap.Add(counterOff), 0, 256))
	five := make([]byte, 8)
	binary.LittleEndian.PutUint64(five, 5)
	ok(t, pes[1].dev.CopyHtoD(pes[1].heap.Add(counterOff+192), five))
	out := pes[0].scratch(t, 64)
	pes[0].launch(t, "chk_amo", grid, block, c64, c32, x, cas, uint64(iters), int32(1), out)
	wait(t, pes[0])
	total := uint64(grid * block * iters)
	mem := pes[1].u64s(t, pes[1].heap.Add(counterOff), 25)
	if mem[0] != total || uint32(mem[8]) != uint32(2*total) {
		t.Errorf("counters %d and %d, want %d and %d", mem[0], uint32(mem[8]), total, 2*total)
	}
	var xor uint64
	for g := uint64(1); g <= uint64(grid*block); g++ {
		xor ^= g
	}
	if mem[16] != xor {
		t.Errorf("xor %#x, want %#x", mem[16], xor)
	}
	res := pes[0].u64s(t, out, 5)
	if want := total * (total - 1) / 2; res[0] != want {
		t.Errorf("fetched values sum to %d, want %d (each of 0..%d once)", res[0], want, total-1)
	}
	if res[1] != 5 || res[2] != 9 || res[3] != 9 || res[4] != 9 || mem[24] != 42 {
		t.Errorf("compare_swap/fetch/swap returned %v, final %d; want [5 9 9 9], 42", res[1:], mem[24])
	}
}

func gpuPutSignal(t *testing.T, pes [2]*gpuPE) {
	src := pes[0].scratch(t, 1<<20)
	out := pes[1].scratch(t, 1<<20)
	got := pes[1].scratch(t, 8)
	ok(t, pes[1].dev.Memset(pes[1].heap.Add(sigOff), 0, 8))
	value := uint64(0)
	for _, n := range []int{8, 4096 + 5, 1 << 20} {
		for way := 0; way < 2; way++ {
			value++
			data := make([]byte, n)
			for i := range data {
				data[i] = byte(rand.Uint32())
			}
			ok(t, pes[0].dev.CopyHtoD(src, data))
			pes[1].launch(t, "chk_wait_copy", 1, 256, pes[1].heap.Add(sigOff), value, pes[1].heap.Add(dataOff), out, uint64(n), got)
			pes[0].launch(t, "chk_putsig", 1, 256, pes[0].heap.Add(dataOff), src, uint64(n), pes[0].heap.Add(sigOff), value, int32(1), int32(way))
			wait(t, pes[0], pes[1])
			b := make([]byte, n)
			ok(t, pes[1].dev.CopyDtoH(b, out))
			if !bytes.Equal(b, data) {
				t.Errorf("size %d way %d: data read after the signal differs", n, way)
			}
			if g := pes[1].u64s(t, got, 1)[0]; g != value {
				t.Errorf("signal_wait_until returned %d, want %d", g, value)
			}
		}
	}
}

func gpuBarrier(t *testing.T, pes [2]*gpuPE) {
	var errs [2]device.Ptr
	for i, p := range pes {
		errs[i] = p.scratch(t, 8)
		ok(t, p.dev.Memset(p.heap.Add(barrierOff), 0, BarrierBytes))
		ok(t, p.dev.Memset(p.heap.Add(miscOff), 0, 64))
	}
	for i, p := range pes {
		p.launch(t, "chk_barrier", 1, 64, p.heap.Add(miscOff), uint64(200), errs[i])
	}
	wait(t, pes[0], pes[1])
	for i, p := range pes {
		if e := p.u64s(t, errs[i], 1)[0]; e != 0 {
			t.Errorf("PE %d saw %d rounds where the other PE's put was not visible after the barrier", i, e)
		}
	}
}

func gpuAbort(t *testing.T, pes [2]*gpuPE) {
	p := pes[0]
	out := p.scratch(t, 8)
	clear(p.abort.Bytes)
	p.launch(t, "chk_wait_forever", 1, 32, p.heap.Add(miscOff+512), out)
	time.Sleep(100 * time.Millisecond)
	if done, _ := p.stream.Query(); done {
		t.Fatal("wait_until returned before the abort word was set")
	}
	word := (*uint64)(unsafe.Pointer(&p.abort.Bytes[0]))
	atomic.StoreUint64(word, 0x107)
	wait(t, p)
	if got := p.u64s(t, out, 1)[0]; got != 0x107 {
		t.Errorf("roxshmemx_aborted() = %#x, want 0x107", got)
	}
	first := atomic.LoadUint64((*uint64)(unsafe.Pointer(&p.abort.Bytes[8])))
	count := atomic.LoadUint64((*uint64)(unsafe.Pointer(&p.abort.Bytes[16])))
	rec := DecodeAbortRecord(first)
	if !rec.Valid || rec.Call != CallWaitUntil || rec.Detail != DetailAbortWord|0x107 || count < 1 {
		t.Errorf("abort record %+v (%s), count %d", rec, rec.CallName(), count)
	}
	atomic.StoreUint64(word, 0)
	clear(p.abort.Bytes)
}

// TestGPURing runs PE0's operations through the command ring: with peer_base[1] = 0 (the NIC path)
// and, mapped but with ce_threshold 1, the copy-engine path; a test proxy in Go executes the
// descriptors with device copies.
func TestGPURing(t *testing.T) {
	devs := gpuDevices(t)
	image, err := os.ReadFile(filepath.Join("gpucheck", "check-clang-sm_90.ptx"))
	ok(t, err)
	for _, path := range []string{"nic", "ce"} {
		t.Run(path, func(t *testing.T) {
			pes := newPEs(t, devs, image, 0)
			stop := startProxy(t, pes, 64)
			defer stop()
			if path == "nic" {
				pes[0].state.PeerBase[1] = 0
			} else {
				pes[0].state.CEThreshold = 1
			}
			pes[0].push(t)
			t.Run("put", func(t *testing.T) { gpuPut(t, pes, 5) })
			t.Run("get", func(t *testing.T) { gpuGet(t, pes) })
			if path == "nic" {
				t.Run("p_g", func(t *testing.T) { gpuPG(t, pes) })
				t.Run("amo", func(t *testing.T) { gpuAMO(t, pes, 1, 4, 3) })
			}
			t.Run("putmem_signal", func(t *testing.T) { gpuPutSignal(t, pes) })
		})
	}
}

// startProxy gives PE0 a ring of capacity descriptors in host memory and serves it until stop.
func startProxy(t *testing.T, pes [2]*gpuPE, capacity int) (stop func()) {
	t.Helper()
	p0, p1 := pes[0], pes[1]
	hb, err := p0.dev.AllocHost(nic.RingBytes(capacity))
	ok(t, err)
	t.Cleanup(func() { p0.dev.FreeHost(hb) })
	ring, err := nic.NewRing(hb.Bytes[:nic.RingBytes(capacity)], capacity)
	ok(t, err)
	results := p0.scratch(t, 8*capacity)
	p0.state.Ring, p0.state.RingCapacity, p0.state.RingResults = uint64(hb.Dev), uint32(capacity), uint64(results)
	p0.push(t)
	s, err := p0.dev.NewStream()
	ok(t, err)
	var wg sync.WaitGroup
	var quit atomic.Bool
	wg.Add(1)
	go func() {
		defer wg.Done()
		descs := make([]nic.Desc, capacity)
		for !quit.Load() {
			first, n := ring.Poll(descs)
			if n == 0 {
				time.Sleep(time.Microsecond)
				continue
			}
			for _, d := range descs[:n] {
				if err := execDesc(p0, p1, s, d); err != nil {
					ring.SetError(nic.RingErrRemote, err)
					t.Errorf("proxy: %v: %v", d, err)
					return
				}
			}
			ring.SetCompleted(first + uint64(n))
		}
	}()
	return func() {
		quit.Store(true)
		wg.Wait()
		s.Destroy()
	}
}

// execDesc carries out one descriptor of PE0 against PE1's heap (or PE0's own for pe 0).
func execDesc(p0, p1 *gpuPE, s device.Stream, d nic.Desc) error {
	target := p1
	if d.PE == 0 {
		target = p0
	}
	remote := target.heap.Add(int(d.Dst))
	rmw := func(at device.Ptr, width int, f func(old uint64) uint64) (uint64, error) {
		b := make([]byte, 8)
		if err := s.CopyDtoHAsync(b[:width], at); err != nil {
			return 0, err
		}
		if err := s.Synchronize(); err != nil {
			return 0, err
		}
		old := binary.LittleEndian.Uint64(b)
		binary.LittleEndian.PutUint64(b, f(old))
		if err := s.CopyHtoDAsync(at, b[:width]); err != nil {
			return 0, err
		}
		return old, s.Synchronize()
	}
	switch d.Op {
	case nic.OpPut:
		if err := s.CopyAsync(remote, device.Ptr(d.Src), int(d.Size)); err != nil {
			return err
		}
	case nic.OpGet:
		if err := s.CopyAsync(device.Ptr(d.Src), remote, int(d.Size)); err != nil {
			return err
		}
	case nic.OpPutSignal:
		if err := s.CopyAsync(remote, device.Ptr(d.Src), int(d.Size)); err != nil {
			return err
		}
		if err := s.Synchronize(); err != nil {
			return err
		}
		if _, err := rmw(target.heap.Add(int(d.Aux)), 8, func(old uint64) uint64 {
			if nic.SignalOp(d.Kind()) == nic.SignalAdd {
				return old + d.Value
			}
			return d.Value
		}); err != nil {
			return err
		}
	case nic.OpAMO:
		w := d.Width()
		mask := ^uint64(0)
		if w == 4 {
			mask = 0xffffffff
		}
		old, err := rmw(remote, w, func(old uint64) uint64 {
			old &= mask
			switch nic.AMOOp(d.Kind()) {
			case nic.AMOFetch:
				return old
			case nic.AMOSet, nic.AMOSwap:
				return d.Value
			case nic.AMOCompareSwap:
				if old == d.Aux&mask {
					return d.Value
				}
				return old
			case nic.AMOFetchAdd:
				return old + d.Value
			case nic.AMOFetchAnd:
				return old & d.Value
			case nic.AMOFetchOr:
				return old | d.Value
			default:
				return old ^ d.Value
			}
		})
		if err != nil {
			return err
		}
		if d.Src != 0 {
			b := make([]byte, 8)
			binary.LittleEndian.PutUint64(b, old&mask)
			if err := s.CopyHtoDAsync(device.Ptr(d.Src), b); err != nil {
				return err
			}
		}
	case nic.OpFence, nic.OpQuiet, nic.OpNop:
	default:
		return fmt.Errorf("unknown op %v", d.Op)
	}
	return s.Synchronize()
}

// TestGPURuntime runs the embedded runtime object (kernels.ObjectFor the device's arch): the
// p ping-pong and barrier kernels, a block put checked by pattern, and the litmus runner on
// MP+fence+wait (forbidden in both modes), in both modes.
func TestGPURuntime(t *testing.T) {
	devs := gpuDevices(t)
	image, arch, err := ObjectFor(devs[0].Info().Arch)
	ok(t, err)
	t.Logf("runtime object for %s: %s", devs[0].Info().Arch, arch)
	for _, mode := range []struct {
		name  string
		flags uint32
	}{{"strict", 0}, {"bypass", FlagBypass}} {
		t.Run(mode.name, func(t *testing.T) {
			pes := newPEs(t, devs, image, mode.flags)

			// 8-byte p ping-pong
			const iters = 2000
			var outs [2]device.Ptr
			for i, p := range pes {
				outs[i] = p.scratch(t, 16)
			}
			for i, p := range pes {
				p.launch(t, "roxk_p_pingpong", 1, 32, p.heap.Add(miscOff), uint64(iters), int32(1-i), int32(1-i), outs[i])
			}
			wait(t, pes[0], pes[1])
			ns := pes[0].u64s(t, outs[0], 1)[0]
			if ns == 0 {
				t.Error("ping-pong reported no elapsed time")
			}
			t.Logf("p ping-pong: %.2f us one way (informational)", float64(ns)/2/iters/1000)
			if got := pes[1].u64s(t, pes[1].heap.Add(miscOff), 1)[0]; got != iters {
				t.Errorf("PE 1's flag ends at %d, want %d", got, iters)
			}

			// barriers
			for round := 0; round < 50; round++ {
				for _, p := range pes {
					p.launch(t, "roxk_barrier_all_block", 1, 64)
				}
			}
			wait(t, pes[0], pes[1])

			// block put of a pattern, checked on the target
			const n = 8<<20 + 48
			src := pes[0].scratch(t, n)
			bad := pes[1].scratch(t, 16)
			pes[0].launch(t, "roxk_pattern", 64, 256, src, uint64(n), uint64(12345))
			pes[0].launch(t, "roxk_putmem_blocks", 16, 512, pes[0].heap.Add(dataOff+16), src, uint64(n), int32(1))
			wait(t, pes[0])
			pes[1].launch(t, "roxk_check_pattern", 64, 256, pes[1].heap.Add(dataOff+16), uint64(n), uint64(12345), bad)
			wait(t, pes[1])
			if b := pes[1].u64s(t, bad, 2); b[0] != 0 {
				t.Errorf("%d bytes differ after roxk_putmem_blocks, first at %d", b[0], b[1]-1)
			}

			// litmus: MP+fence+wait
			x, y := uint64(miscOff+4096), uint64(miscOff+4096+64)
			progs := [2][]LitmusInsn{
				{{Op: LitmusPut, PE: 1, Var: x, Value: 1}, {Op: LitmusFence}, {Op: LitmusPut, PE: 1, Var: y, Value: 1}},
				{{Op: LitmusWait, Var: y, Sub: CmpEQ, Value: 1}, {Op: LitmusLd, Reg: 0, Var: x}},
			}
			inits := [2][]uint64{nil, {x, 0, y, 0}}
			const litIters = 500
			var regs [2]device.Ptr
			for i, p := range pes {
				prog := p.scratch(t, 40*len(progs[i]))
				ok(t, p.dev.CopyHtoD(prog, unsafe.Slice((*byte)(unsafe.Pointer(&progs[i][0])), 40*len(progs[i]))))
				init := p.scratch(t, 64)
				if len(inits[i]) > 0 {
					b := make([]byte, 8*len(inits[i]))
					for j, v := range inits[i] {
						binary.LittleEndian.PutUint64(b[8*j:], v)
					}
					ok(t, p.dev.CopyHtoD(init, b))
				}
				regs[i] = p.scratch(t, 8*litIters)
				mem := p.scratch(t, 16*litIters)
				p.launch(t, "roxk_litmus", 1, 64, prog, uint32(len(progs[i])), regs[i], uint32(1), init,
					uint32(len(inits[i])/2), mem, uint64(litIters))
			}
			wait(t, pes[0], pes[1])
			r0 := pes[1].u64s(t, regs[1], litIters)
			seen0 := 0
			for _, r := range r0 {
				if r != 1 {
					seen0++
				}
			}
			if seen0 != 0 {
				t.Errorf("MP+fence+wait: r0=0 observed %d times in %d (forbidden)", seen0, litIters)
			}
		})
	}
}
