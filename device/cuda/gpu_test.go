package cuda

import (
	"bufio"
	"context"
	_ "embed"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/roxamen/roxamen/device"
	"github.com/roxamen/roxamen/internal/testkit"
)

// GPU tests. They skip with the reason when no CUDA device is usable, and FAIL instead when
// ROX_TEST_GPU is set (the two-GPU tests then need two devices). Run on a GPU machine:
//
//	CGO_ENABLED=0 go test -c -o .gpu/test/device_cuda.test ./device/cuda
//	cd device/cuda && ROX_TEST_GPU=1 ../../.gpu/test/device_cuda.test -test.v -test.bench .

//go:embed testdata/kernels.ptx
var kernelsPTX []byte

const childEnv = "ROX_CUDA_TEST_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		if err := ipcChild(); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// gpus opens want devices or skips (fails under ROX_TEST_GPU).
func gpus(tb testing.TB, want int) []device.Device {
	tb.Helper()
	needGPUs(tb, want)
	var ds []device.Device
	for i := range want {
		d, err := New().Open(i)
		if err != nil {
			tb.Fatalf("Open(%d): %v", i, err)
		}
		tb.Cleanup(func() {
			if err := d.Close(); err != nil {
				tb.Errorf("Close(%d): %v", i, err)
			}
		})
		ds = append(ds, d)
	}
	return ds
}

// needGPUs skips unless want devices exist. Under ROX_TEST_GPU a machine with no usable GPU
// fails; one with fewer GPUs than the test needs skips, saying so (the lent machines have one or
// two).
func needGPUs(tb testing.TB, want int) {
	tb.Helper()
	n, err := New().Count()
	if err == nil && n < want {
		tb.Skipf("%d CUDA device(s), the test needs %d", n, want)
	}
	if err != nil {
		testkit.NeedGPU(tb, "no GPU: %v", err)
	}
}

func must(tb testing.TB, err error) {
	tb.Helper()
	if err != nil {
		tb.Fatal(err)
	}
}

func u64bytes(v []uint64) []byte {
	b := make([]byte, 8*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint64(b[8*i:], x)
	}
	return b
}

func bytesU64(b []byte) []uint64 {
	v := make([]uint64, len(b)/8)
	for i := range v {
		v[i] = binary.LittleEndian.Uint64(b[8*i:])
	}
	return v
}

func randU64(n int) []uint64 {
	v := make([]uint64, n)
	for i := range v {
		v[i] = rand.Uint64()
	}
	return v
}

// mix is splitmix64, as in testdata/kernels.cu.
func mix(z uint64) uint64 {
	z += 0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

func wantErr(t *testing.T, err error, kind error, op string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: no error", op)
	}
	if kind != nil && !errors.Is(err, kind) {
		t.Fatalf("%s: got %v, want errors.Is(%v)", op, err, kind)
	}
	if !strings.Contains(err.Error(), op) {
		t.Fatalf("error %q does not name %s", err, op)
	}
}

func TestGPUInfo(t *testing.T) {
	d := gpus(t, 1)[0]
	info := d.Info()
	t.Logf("%v uuid=%s pci=%s", info, info.UUID, info.PCIBusID)
	if v, err := DriverVersion(); err != nil || v < 11040 {
		t.Fatalf("DriverVersion = %d, %v", v, err)
	}
	if info.Driver != "cuda" || !strings.HasPrefix(info.Arch, "sm_") || info.Multiprocessors <= 0 ||
		info.MemoryBytes == 0 || !strings.HasPrefix(info.UUID, "GPU-") || len(info.UUID) != 40 ||
		strings.Count(info.PCIBusID, ":") != 2 || info.Name == "" {
		t.Fatalf("implausible Info %+v", info)
	}
	_, err := New().Open(1 << 20)
	wantErr(t, err, device.ErrNoDevice, "cuda.Open")
}

func TestGPUMemory(t *testing.T) {
	d := gpus(t, 1)[0]
	const n = 64<<20 + 24
	p, err := d.Alloc(n)
	must(t, err)
	q, err := d.Alloc(n)
	must(t, err)
	must(t, d.Memset(p, 0x5a, n))
	got := make([]byte, n)
	must(t, d.CopyDtoH(got, p))
	for i, b := range got {
		if b != 0x5a {
			t.Fatalf("after Memset(0x5a) byte %d = %#x", i, b)
		}
	}
	in := u64bytes(randU64(n / 8))
	must(t, d.CopyHtoD(p, in))
	must(t, d.CopyDtoD(q.Add(8), p.Add(24), n-24))
	clear(got)
	must(t, d.CopyDtoH(got[:n-24], q.Add(8)))
	if !bytesEqual(got[:n-24], in[24:]) {
		t.Fatal("CopyHtoD + CopyDtoD + CopyDtoH changed the data")
	}

	// Host memory mapped into the device: the device sees host stores and vice versa.
	hb, err := d.AllocHost(1 << 20)
	must(t, err)
	if len(hb.Bytes) != 1<<20 || hb.Dev == 0 {
		t.Fatalf("AllocHost = %d bytes, dev %#x", len(hb.Bytes), hb.Dev)
	}
	copy(hb.Bytes, in)
	must(t, d.CopyDtoD(q, hb.Dev, 1<<20))
	must(t, d.CopyDtoH(got[:1<<20], q))
	if !bytesEqual(got[:1<<20], in[:1<<20]) {
		t.Fatal("device copy from mapped host memory differs")
	}
	must(t, d.Memset(hb.Dev, 0xc3, 4096))
	if hb.Bytes[0] != 0xc3 || hb.Bytes[4095] != 0xc3 || hb.Bytes[4096] != in[4096] {
		t.Fatalf("device memset into mapped host memory: %#x %#x %#x", hb.Bytes[0], hb.Bytes[4095], hb.Bytes[4096])
	}
	must(t, d.FreeHost(hb))

	// Error paths name the call and the value.
	_, err = d.Alloc(0)
	wantErr(t, err, device.ErrInvalid, "cuMemAlloc_v2")
	_, err = d.Alloc(1 << 62)
	wantErr(t, err, nil, "cuMemAlloc_v2")
	wantErr(t, d.Free(p.Add(8)), device.ErrInvalid, "cuMemFree_v2")
	wantErr(t, d.FreeHost(hb), device.ErrInvalid, "cuMemFreeHost")
	wantErr(t, d.Memset(p, 0, -1), device.ErrInvalid, "cuMemsetD8Async")
	_, err = d.Export(p.Add(8))
	wantErr(t, err, device.ErrInvalid, "cuIpcGetMemHandle")
	_, err = d.Import([]byte("not a handle"))
	wantErr(t, err, device.ErrInvalid, "cuIpcOpenMemHandle_v2")
	h, err := d.Export(p)
	must(t, err)
	if self, err := d.Import(h); err == nil { // CUDA refuses a process its own export; tolerate a driver that allows it
		t.Logf("driver opened its own IPC export at %#x", self)
		must(t, d.CloseImport(self))
	} else {
		wantErr(t, err, nil, "cuIpcOpenMemHandle_v2")
	}
	wantErr(t, d.CloseImport(p), device.ErrInvalid, "cuIpcCloseMemHandle")
	wantErr(t, d.EnablePeerAccess(device.Info{Driver: "host"}), device.ErrNotSupported, "cuda.EnablePeerAccess")
	must(t, d.EnablePeerAccess(d.Info())) // itself: a no-op
	must(t, d.Free(p))
	wantErr(t, d.Free(p), device.ErrInvalid, "cuMemFree_v2")
	must(t, d.Free(q))
}

func bytesEqual(a, b []byte) bool { return string(a) == string(b) }

func TestGPUKernels(t *testing.T) {
	d := gpus(t, 1)[0]
	mod, err := d.LoadModule(kernelsPTX)
	must(t, err)
	s, err := d.NewStream()
	must(t, err)
	defer s.Destroy()

	// Globals: a scalar and a table, set from the host and read by the kernel.
	biasPtr, biasSize, err := mod.Global("rox_bias")
	must(t, err)
	tabPtr, tabSize, err := mod.Global("rox_table")
	must(t, err)
	if biasSize != 8 || tabSize != 64 {
		t.Fatalf("global sizes %d, %d; want 8, 64", biasSize, tabSize)
	}
	bias := rand.Uint64()
	table := make([]byte, 64)
	for i := range 16 {
		binary.LittleEndian.PutUint32(table[4*i:], rand.Uint32())
	}
	must(t, d.CopyHtoD(biasPtr, u64bytes([]uint64{bias})))
	must(t, d.CopyHtoD(tabPtr, table))

	const n = 1<<20 + 3 // not a multiple of the grid: the tail is checked too
	x, y, a := randU64(n), randU64(n), rand.Uint64()
	px, err := d.Alloc(8 * n)
	must(t, err)
	py, err := d.Alloc(8 * n)
	must(t, err)
	pout, err := d.Alloc(8 * n)
	must(t, err)
	axpy, err := mod.Function("axpy")
	must(t, err)
	start, err := d.NewEvent()
	must(t, err)
	stop, err := d.NewEvent()
	must(t, err)
	xb, yb := u64bytes(x), u64bytes(y)
	out := make([]byte, 8*n)
	must(t, s.CopyHtoDAsync(px, xb))
	must(t, s.CopyHtoDAsync(py, yb))
	must(t, s.MemsetAsync(pout, 0xff, 8*n))
	must(t, s.Record(start))
	must(t, s.Launch(axpy, device.D1(132*4), device.D1(256), 0, pout, px, py, a, int64(n)))
	must(t, s.Record(stop))
	must(t, s.CopyDtoHAsync(out, pout))
	must(t, s.Synchronize())
	if done, err := s.Query(); !done || err != nil {
		t.Fatalf("Query after Synchronize = %v, %v", done, err)
	}
	el, err := stop.Since(start)
	must(t, err)
	t.Logf("axpy over %d elements: %v", n, el)
	if el <= 0 {
		t.Fatalf("kernel took %v by events", el)
	}
	got := bytesU64(out)
	for i := range n {
		want := a*x[i] + y[i] + bias + uint64(binary.LittleEndian.Uint32(table[4*(i%16):]))
		if got[i] != want {
			t.Fatalf("axpy out[%d] = %#x, want %#x", i, got[i], want)
		}
	}

	// Every argument type arrives intact.
	echo, err := mod.Function("echo_args")
	must(t, err)
	ai, bu, ci, du := int32(-rand.Int32N(1<<30)-1), rand.Uint32(), -rand.Int64(), rand.Uint64()
	ef, ff := float32(rand.Float64()*1e6), rand.NormFloat64()
	must(t, s.Launch(echo, device.D1(1), device.D1(32), 0, pout, ai, bu, ci, du, ef, ff))
	must(t, s.Synchronize())
	must(t, d.CopyDtoH(out[:48], pout))
	got = bytesU64(out[:48])
	wantArgs := []uint64{uint64(int64(ai)), uint64(bu), uint64(ci), du, uint64(math.Float32bits(ef)), math.Float64bits(ff)}
	for i := range wantArgs {
		if got[i] != wantArgs[i] {
			t.Fatalf("echo_args slot %d = %#x, want %#x", i, got[i], wantArgs[i])
		}
	}

	// Dynamic shared memory.
	rev, err := mod.Function("reverse_blocks")
	must(t, err)
	const bs, blocks = 512, 64
	in := randU64(bs * blocks)
	must(t, d.CopyHtoD(px, u64bytes(in)))
	must(t, s.Launch(rev, device.D1(blocks), device.D1(bs), 8*bs, pout, px))
	must(t, s.Synchronize())
	must(t, d.CopyDtoH(out[:8*bs*blocks], pout))
	got = bytesU64(out[:8*bs*blocks])
	for b := range blocks {
		for i := range bs {
			if got[b*bs+i] != in[b*bs+bs-1-i] {
				t.Fatalf("reverse_blocks block %d out[%d] = %#x, want %#x", b, i, got[b*bs+i], in[b*bs+bs-1-i])
			}
		}
	}

	// Cross-stream ordering with an event: s2 waits for s's fill before copying.
	s2, err := d.NewStream()
	must(t, err)
	defer s2.Destroy()
	fill, err := mod.Function("fill")
	must(t, err)
	seed := rand.Uint64()
	ev, err := d.NewEvent()
	must(t, err)
	must(t, s.Launch(fill, device.D1(264), device.D1(512), 0, px, seed, int64(n)))
	must(t, s.Record(ev))
	must(t, s2.Wait(ev))
	must(t, s2.CopyAsync(py, px, 8*n))
	must(t, s2.CopyDtoHAsync(out, py))
	must(t, s2.Synchronize())
	got = bytesU64(out)
	for i := range n {
		if got[i] != mix(seed+uint64(i)) {
			t.Fatalf("fill then waited copy: out[%d] = %#x, want %#x", i, got[i], mix(seed+uint64(i)))
		}
	}

	// Error paths.
	_, err = mod.Function("nope")
	wantErr(t, err, ErrorNotFound, "cuModuleGetFunction")
	_, _, err = mod.Global("nope")
	wantErr(t, err, ErrorNotFound, "cuModuleGetGlobal_v2")
	_, err = d.LoadModule([]byte(".version 7.8\n.target sm_90\n.address_size 64\nthis is not ptx\n"))
	wantErr(t, err, nil, "cuModuleLoadDataEx")
	t.Logf("bad PTX: %v", err)
	wantErr(t, s.Launch(axpy, device.D1(1), device.D1(1), 0, "x"), device.ErrInvalid, "cuLaunchKernel")
	err = s.Launch(axpy, device.D1(1), device.D1(4096), 0, pout, px, py, a, int64(n))
	wantErr(t, err, nil, "cuLaunchKernel")
	if !strings.Contains(err.Error(), "CUDA_ERROR_") {
		t.Fatalf("launch error %q lacks the CUresult name", err)
	}
	fresh, err := d.NewEvent()
	must(t, err)
	_, err = fresh.Since(start)
	wantErr(t, err, nil, "cuEventElapsedTime")
	must(t, fresh.Destroy())
	wantErr(t, fresh.Destroy(), device.ErrClosed, "cuEventDestroy_v2")
	wantErr(t, s.Record(fresh), device.ErrClosed, "cuEventRecord")
	must(t, mod.Unload())
	wantErr(t, s.Launch(axpy, device.D1(1), device.D1(1), 0, pout, px, py, a, int64(1)), device.ErrClosed, "cuLaunchKernel")
	wantErr(t, mod.Unload(), device.ErrClosed, "cuModuleUnload")
}

// TestGPUPeerCopy copies 1 GiB from GPU 0 to GPU 1 on GPU 0's stream, times it with events,
// checks the data, and does the same with cuMemcpyPeerAsync.
func TestGPUPeerCopy(t *testing.T) {
	ds := gpus(t, 2)
	d0, d1 := ds[0], ds[1]
	must(t, d0.EnablePeerAccess(d1.Info()))
	must(t, d1.EnablePeerAccess(d0.Info()))
	const n = 1 << 30
	src, err := d0.Alloc(n)
	must(t, err)
	dst, err := d1.Alloc(n)
	must(t, err)
	mod, err := d0.LoadModule(kernelsPTX)
	must(t, err)
	fill, err := mod.Function("fill")
	must(t, err)
	s, err := d0.NewStream()
	must(t, err)
	seed := rand.Uint64()
	must(t, s.Launch(fill, device.D1(132*8), device.D1(512), 0, src, seed, int64(n/8)))
	must(t, d1.Memset(dst, 0, n))
	el, err := timedCopy(s, d0, dst, src, n)
	must(t, err)
	t.Logf("1 GiB peer copy GPU0->GPU1 (cuMemcpyAsync): %v, %.1f GB/s", el, float64(n)/el.Seconds()/1e9)
	checkFilled(t, d1, dst, seed, n/8)

	must(t, d1.Memset(dst, 0, n))
	ps := s.(interface {
		PeerCopyAsync(dst device.Ptr, dstDev device.Device, src device.Ptr, srcDev device.Device, n int) error
	})
	must(t, ps.PeerCopyAsync(dst, d1, src, d0, n))
	must(t, s.Synchronize())
	checkFilled(t, d1, dst, seed, n/8)
}

func timedCopy(s device.Stream, d device.Device, dst, src device.Ptr, n int) (time.Duration, error) {
	start, err := d.NewEvent()
	if err != nil {
		return 0, err
	}
	defer start.Destroy()
	stop, err := d.NewEvent()
	if err != nil {
		return 0, err
	}
	defer stop.Destroy()
	for _, f := range []func() error{
		func() error { return s.Record(start) },
		func() error { return s.CopyAsync(dst, src, n) },
		func() error { return s.Record(stop) },
		stop.Synchronize,
	} {
		if err := f(); err != nil {
			return 0, err
		}
	}
	return stop.Since(start)
}

// checkFilled verifies words of p written by fill(seed): all of the first and last MiB and 4096
// random words between.
func checkFilled(t *testing.T, d device.Device, p device.Ptr, seed uint64, words int) {
	t.Helper()
	const span = 1 << 17
	buf := make([]byte, 8*span)
	for _, first := range []int{0, words - span} {
		must(t, d.CopyDtoH(buf, p.Add(8*first)))
		for i, v := range bytesU64(buf) {
			if w := mix(seed + uint64(first+i)); v != w {
				t.Fatalf("word %d = %#x, want %#x", first+i, v, w)
			}
		}
	}
	for range 4096 {
		i := rand.IntN(words)
		must(t, d.CopyDtoH(buf[:8], p.Add(8*i)))
		if v, w := binary.LittleEndian.Uint64(buf), mix(seed+uint64(i)); v != w {
			t.Fatalf("word %d = %#x, want %#x", i, v, w)
		}
	}
}

func BenchmarkPeerCopy1GiB(b *testing.B) {
	ds := gpus(b, 2)
	d0, d1 := ds[0], ds[1]
	must(b, d0.EnablePeerAccess(d1.Info()))
	const n = 1 << 30
	src, err := d0.Alloc(n)
	must(b, err)
	dst, err := d1.Alloc(n)
	must(b, err)
	s, err := d0.NewStream()
	must(b, err)
	must(b, d0.Memset(src, 1, n))
	var total time.Duration
	b.SetBytes(n)
	b.ResetTimer()
	for range b.N {
		el, err := timedCopy(s, d0, dst, src, n)
		must(b, err)
		total += el
	}
	gbs := float64(n) * float64(b.N) / total.Seconds() / 1e9
	b.ReportMetric(gbs, "GB/s(events)")
	b.Logf("1 GiB peer copy by events: %.1f GB/s over %d copies", gbs, b.N)
}

// The two-process test: the parent owns GPU 0, the child GPU 1.
//
//	parent: A := Alloc on GPU 0, export → child (env)
//	child:  import A; B := Alloc on GPU 1 = random; peer copy B → A[:half] on a stream;
//	        kernel fill(A[half:], seed) stores into GPU 0's memory; export B → parent (stdout)
//	parent: check A; import B; peer copy B → C on GPU 0, check; "ok" → child (stdin)
const ipcWords = 8 << 20 // 64 MiB

func TestGPUTwoProcesses(t *testing.T) {
	needGPUs(t, 2)
	d, err := New().Open(0) // the child opens device 1
	must(t, err)
	defer d.Close()
	a, err := d.Alloc(8 * ipcWords)
	must(t, err)
	must(t, d.Memset(a, 0, 8*ipcWords))
	h, err := d.Export(a)
	must(t, err)
	seed := rand.Uint64() >> 1
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=1", "ROX_CUDA_TEST_HANDLE="+hex.EncodeToString(h),
		"ROX_CUDA_TEST_SEED="+strconv.FormatUint(seed, 10))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	must(t, err)
	stdout, err := cmd.StdoutPipe()
	must(t, err)
	must(t, cmd.Start())
	defer func() { cancel(); cmd.Wait() }()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "handle ") {
		cancel()
		cmd.Wait()
		t.Fatalf("child said %q, %v; stderr:\n%s", line, err, stderr.String())
	}
	// A's first half is the child's random buffer (peer copy), its second half fill(seed).
	const half = ipcWords / 2
	buf := make([]byte, 8*ipcWords)
	must(t, d.CopyDtoH(buf, a))
	got := bytesU64(buf)
	want := childPattern(seed, half)
	for i := range half {
		if got[i] != want[i] {
			t.Fatalf("A[%d] = %#x after the child's peer copy, want %#x", i, got[i], want[i])
		}
	}
	for i := half; i < ipcWords; i++ {
		if w := mix(seed + uint64(i-half)); got[i] != w {
			t.Fatalf("A[%d] = %#x after the child's peer-store kernel, want %#x", i, got[i], w)
		}
	}
	// The other direction: import the child's B and copy it peer-to-peer into GPU 0.
	hb, err := hex.DecodeString(strings.TrimSpace(strings.TrimPrefix(line, "handle ")))
	must(t, err)
	b, err := d.Import(hb)
	must(t, err)
	c, err := d.Alloc(8 * half)
	must(t, err)
	s, err := d.NewStream()
	must(t, err)
	must(t, s.CopyAsync(c, b, 8*half))
	must(t, s.Synchronize())
	must(t, d.CopyDtoH(buf[:8*half], c))
	for i, v := range bytesU64(buf[:8*half]) {
		if v != want[i] {
			t.Fatalf("C[%d] = %#x after a peer copy from the child's memory, want %#x", i, v, want[i])
		}
	}
	must(t, d.CloseImport(b))
	fmt.Fprintln(stdin, "ok")
	if err := cmd.Wait(); err != nil {
		t.Fatalf("child: %v; stderr:\n%s", err, stderr.String())
	}
}

func childPattern(seed uint64, n int) []uint64 {
	r := rand.New(rand.NewPCG(seed, 7))
	v := make([]uint64, n)
	for i := range v {
		v[i] = r.Uint64()
	}
	return v
}

func ipcChild() error {
	seed, err := strconv.ParseUint(os.Getenv("ROX_CUDA_TEST_SEED"), 10, 64)
	if err != nil {
		return err
	}
	h, err := hex.DecodeString(os.Getenv("ROX_CUDA_TEST_HANDLE"))
	if err != nil {
		return err
	}
	d, err := New().Open(1)
	if err != nil {
		return err
	}
	defer d.Close()
	a, err := d.Import(h)
	if err != nil {
		return err
	}
	const half = ipcWords / 2
	b, err := d.Alloc(8 * half)
	if err != nil {
		return err
	}
	if err := d.CopyHtoD(b, u64bytes(childPattern(seed, half))); err != nil {
		return err
	}
	mod, err := d.LoadModule(kernelsPTX)
	if err != nil {
		return err
	}
	fill, err := mod.Function("fill")
	if err != nil {
		return err
	}
	s, err := d.NewStream()
	if err != nil {
		return err
	}
	if err := s.CopyAsync(a, b, 8*half); err != nil { // peer copy GPU 1 -> GPU 0
		return err
	}
	if err := s.Launch(fill, device.D1(264), device.D1(256), 0, a.Add(8*half), seed, int64(half)); err != nil {
		return err // stores from GPU 1's SMs into GPU 0's memory
	}
	if err := s.Synchronize(); err != nil {
		return err
	}
	eb, err := d.Export(b)
	if err != nil {
		return err
	}
	fmt.Printf("handle %x\n", eb)
	line, err := bufio.NewReader(os.Stdin).ReadString('\n')
	if err != nil || line != "ok\n" {
		return fmt.Errorf("parent said %q, %v", line, err)
	}
	return d.CloseImport(a)
}
