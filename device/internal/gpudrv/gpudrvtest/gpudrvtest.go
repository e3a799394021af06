// Package gpudrvtest runs gpudrv over a vendor's table against a fake library
// (testdata/fakegpu.c, built with clang-19): every Device, Stream, Event and Module call, with
// the checks a real library makes (a current context or device on the calling thread, documented
// flags and kinds, peer copies that name the right contexts or ordinals) and the books a real
// library keeps (nothing left allocated or retained after Close). It is how the HIP table, which no
// machine here can run against a real runtime, runs the shared code in CI.
package gpudrvtest

import (
	_ "embed"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/roxamen/roxamen/device"
	"github.com/roxamen/roxamen/internal/dl"
)

//go:embed testdata/fakegpu.c
var fakeSource []byte

// childEnv carries the fake library's path to the test process that loads it.
const childEnv = "ROX_GPUDRV_FAKE_LIBRARY"

// Run builds the fake library and runs Exercise over newDriver(path) in a child process: the fake
// exports the vendor's symbol names, which must not meet a real driver in one process (a real
// libcuda or libamdhip64 loaded later would bind its own calls to them). It skips when clang-19 is
// not installed. The test calling Run must be the child's only test (-test.run names it).
func Run(t *testing.T, newDriver func(library string) device.Driver, want Want) {
	if lib := os.Getenv(childEnv); lib != "" {
		Exercise(t, newDriver(lib), lib, want)
		return
	}
	clang, err := exec.LookPath("clang-19")
	if err != nil {
		t.Skip("clang-19 not installed: cannot build the fake GPU library")
	}
	dir := t.TempDir()
	src, lib := filepath.Join(dir, "fakegpu.c"), filepath.Join(dir, "libfakegpu.so")
	if err := os.WriteFile(src, fakeSource, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(clang, "-shared", "-fPIC", "-O1", "-Wall", "-Wextra", "-Werror", "-o", lib, src).CombinedOutput(); err != nil {
		t.Fatalf("building the fake library: %v\n%s", err, out)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^"+t.Name()+"$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), childEnv+"="+lib)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: "+t.Name()) {
		t.Fatalf("the fake-library run failed: %v\n%s", err, out)
	}
}

// BenchLaunch measures the host's cost of Stream.Launch and Graph.Launch over the fake library,
// whose launch does next to nothing: what is left is the Go side (argument packing,
// allocations, locks, making the context current, the foreign call). Like Run it builds the
// fake and runs itself in a child process, whose benchmark lines it logs.
func BenchLaunch(b *testing.B, newDriver func(library string) device.Driver) {
	if lib := os.Getenv(childEnv); lib != "" {
		benchLaunch(b, newDriver(lib))
		return
	}
	clang, err := exec.LookPath("clang-19")
	if err != nil {
		b.Skip("clang-19 not installed: cannot build the fake GPU library")
	}
	dir := b.TempDir()
	src, lib := filepath.Join(dir, "fakegpu.c"), filepath.Join(dir, "libfakegpu.so")
	if err := os.WriteFile(src, fakeSource, 0o644); err != nil {
		b.Fatal(err)
	}
	if out, err := exec.Command(clang, "-shared", "-fPIC", "-O1", "-o", lib, src).CombinedOutput(); err != nil {
		b.Fatalf("building the fake library: %v\n%s", err, out)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$", "-test.bench=^"+b.Name()+"$", "-test.benchmem", "-test.count=1")
	cmd.Env = append(os.Environ(), childEnv+"="+lib)
	out, err := cmd.CombinedOutput()
	if err != nil {
		b.Fatalf("the fake-library run failed: %v\n%s", err, out)
	}
	b.Logf("over the fake library:\n%s", out)
	b.SkipNow() // the figures are the child's
}

func benchLaunch(b *testing.B, drv device.Driver) {
	d, err := drv.Open(0)
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	s, err := d.NewStream()
	if err != nil {
		b.Fatal(err)
	}
	m, err := d.LoadModule([]byte("FAKE image"))
	if err != nil {
		b.Fatal(err)
	}
	fill, err := m.Function("fill")
	if err != nil {
		b.Fatal(err)
	}
	p, err := d.Alloc(64)
	if err != nil {
		b.Fatal(err)
	}
	// six arguments, as a stream collective has (fill reads the first three: n = 0 writes nothing)
	b.Run("Stream.Launch", func(b *testing.B) {
		for b.Loop() {
			if err := s.Launch(fill, device.D1(1), device.D1(256), 0, p, uint64(0), int64(0), p, int32(0), int32(0)); err != nil {
				b.Fatal(err)
			}
		}
	})
	c := s.(device.Capturer)
	if err := c.BeginCapture(); err != nil {
		b.Fatal(err)
	}
	if err := s.Launch(fill, device.D1(1), device.D1(1), 0, p, uint64(1), int64(1)); err != nil {
		b.Fatal(err)
	}
	g, err := c.EndCapture()
	if err != nil {
		b.Fatal(err)
	}
	b.Run("Graph.Launch", func(b *testing.B) {
		for b.Loop() {
			if err := g.Launch(s); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// Want is what differs between the vendors in what the fake reports.
type Want struct {
	Arch        [2]string // Info.Arch of devices 0 and 1
	Contexts    bool      // the vendor retains primary contexts (CUDA)
	NotFound    error     // the vendor's status for an unknown function or global
	OutOfMemory error     // ... for an allocation too large
	OOMName     string    // its name as the fake's error-name call gives it
	BadImage    error     // ... for an image that does not load
	BadImageLog string    // text of the JIT log that comes back with it ("" when there is none)
	IPCFallback bool      // Import falls back to the old flag (HIP)
}

type fake struct {
	live        func() int32
	ctxRefs     func(ord int32) int32
	peerEnabled func(from, to int32) int32
	noContext   func() int32
	owner       func(p uintptr) int32
	ipcZeroOnly func(on int32)
}

func open(t *testing.T, lib string) *fake {
	h, err := dl.Open(lib)
	if err != nil {
		t.Fatal(err)
	}
	f := &fake{}
	if err := h.Map(map[string]any{"fake_live": &f.live, "fake_ctx_refs": &f.ctxRefs,
		"fake_peer_enabled": &f.peerEnabled, "fake_no_context": &f.noContext, "fake_owner": &f.owner,
		"fake_hip_ipc_zero_only": &f.ipcZeroOnly}); err != nil {
		t.Fatal(err)
	}
	return f
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func wantErr(t *testing.T, err error, is error, text string) {
	t.Helper()
	if err == nil || !errors.Is(err, is) || !strings.Contains(err.Error(), text) {
		t.Fatalf("error %v: want errors.Is %v and the text %q", err, is, text)
	}
}

// Exercise runs the whole driver against the fake library lib, which drv must load.
func Exercise(t *testing.T, drv device.Driver, lib string, want Want) {
	f := open(t, lib)
	n, err := drv.Count()
	if err != nil || n != 2 {
		t.Fatalf("Count() = %d, %v", n, err)
	}
	var ds [2]device.Device
	for i := range ds {
		d, err := drv.Open(i)
		must(t, err)
		ds[i] = d
		info := d.Info()
		if info.Driver != drv.Name() || info.Ordinal != i || info.Arch != want.Arch[i] || info.Multiprocessors <= 0 ||
			info.MemoryBytes != uint64(i+1)<<30 || !strings.HasPrefix(info.Name, "Fake GPU") ||
			len(info.UUID) != 40 || strings.Count(info.PCIBusID, ":") != 2 {
			t.Fatalf("device %d: Info %+v", i, info)
		}
	}
	d0, d1 := ds[0], ds[1]
	if want.Contexts && (f.ctxRefs(0) != 1 || f.ctxRefs(1) != 1) {
		t.Fatalf("primary contexts retained %d, %d after Open; want 1, 1", f.ctxRefs(0), f.ctxRefs(1))
	}

	// Memory: allocations land on the device that was current (the one called).
	const size = 4096
	p, err := d0.Alloc(size)
	must(t, err)
	q, err := d1.Alloc(size)
	must(t, err)
	if f.owner(uintptr(p)) != 0 || f.owner(uintptr(q)) != 1 {
		t.Fatalf("allocations owned by devices %d and %d, want 0 and 1", f.owner(uintptr(p)), f.owner(uintptr(q)))
	}
	must(t, d0.Memset(p, 0x5a, size))
	got := make([]byte, size)
	must(t, d0.CopyDtoH(got, p))
	if got[0] != 0x5a || got[size-1] != 0x5a {
		t.Fatal("Memset then CopyDtoH")
	}
	in := make([]byte, size)
	for i := range in {
		in[i] = byte(i*7 + 3)
	}
	must(t, d0.CopyHtoD(p, in))
	must(t, d0.CopyDtoD(p.Add(2048), p.Add(8), 64)) // within one allocation
	must(t, d0.CopyDtoH(got, p))
	if string(got[2048:2112]) != string(in[8:72]) || string(got[:2048]) != string(in[:2048]) {
		t.Fatal("CopyHtoD then CopyDtoD then CopyDtoH changed the data")
	}
	_, err = d0.Alloc(1 << 50)
	wantErr(t, err, want.OutOfMemory, want.OOMName)
	hb, err := d1.AllocHost(size)
	must(t, err)
	copy(hb.Bytes, in)
	must(t, d1.CopyDtoD(q, hb.Dev, size))
	must(t, d1.CopyDtoH(got, q))
	if string(got) != string(in) {
		t.Fatal("copy from mapped host memory")
	}

	// Streams, events: the private stream and these share nothing.
	s, err := d0.NewStream()
	must(t, err)
	start, err := d0.NewEvent()
	must(t, err)
	stop, err := d0.NewEvent()
	must(t, err)
	_, err = stop.Since(start)
	if err == nil {
		t.Fatal("Since of events never recorded succeeded")
	}
	must(t, s.Record(start))
	must(t, s.MemsetAsync(p, 1, 16))
	must(t, s.CopyHtoDAsync(p.Add(16), in[:16]))
	must(t, s.CopyAsync(p.Add(32), p.Add(16), 16))
	out := make([]byte, 48)
	must(t, s.CopyDtoHAsync(out, p))
	must(t, s.Record(stop))
	must(t, s.Wait(stop))
	must(t, s.Synchronize())
	must(t, stop.Synchronize())
	if done, err := s.Query(); !done || err != nil {
		t.Fatalf("Query = %v, %v", done, err)
	}
	if out[0] != 1 || out[15] != 1 || string(out[16:32]) != string(in[:16]) || string(out[32:48]) != string(in[:16]) {
		t.Fatalf("stream work: %v", out)
	}
	if el, err := stop.Since(start); err != nil || el <= 0 {
		t.Fatalf("Since = %v, %v", el, err)
	}

	// The program's stream, adopted by its handle: work goes to that stream, and releasing the
	// wrapper destroys nothing (the library's count of live objects stays).
	a, err := d0.AdoptStream(s.Handle())
	must(t, err)
	if a.Handle() != s.Handle() || a.Handle() == 0 {
		t.Fatalf("adopted handle %#x, the stream's %#x", a.Handle(), s.Handle())
	}
	liveBefore := f.live()
	must(t, a.MemsetAsync(p, 2, 16))
	must(t, a.CopyDtoHAsync(out[:16], p))
	must(t, a.Synchronize())
	if out[0] != 2 || out[15] != 2 {
		t.Fatalf("adopted stream work: %v", out[:16])
	}
	must(t, a.Destroy())
	wantErr(t, a.Destroy(), device.ErrClosed, "adopted stream released")
	wantErr(t, a.MemsetAsync(p, 0, 1), device.ErrClosed, "adopted stream released")
	if n := f.live(); n != liveBefore {
		t.Fatalf("releasing an adopted stream changed the library's live objects from %d to %d", liveBefore, n)
	}
	must(t, s.MemsetAsync(p, 1, 16))
	must(t, s.Synchronize())

	// Modules and launches: every argument type arrives in its slot.
	_, err = d0.LoadModule([]byte("not an image"))
	wantErr(t, err, want.BadImage, want.BadImageLog)
	m, err := d0.LoadModule([]byte("FAKE image"))
	must(t, err)
	g, gsize, err := m.Global("g")
	if err != nil || g == 0 || gsize != 8 {
		t.Fatalf("Global(g) = %#x, %d, %v", g, gsize, err)
	}
	_, err = m.Function("nope")
	wantErr(t, err, want.NotFound, `"nope"`)
	_, _, err = m.Global("nope")
	wantErr(t, err, want.NotFound, `"nope"`)
	fill, err := m.Function("fill")
	must(t, err)
	must(t, s.Launch(fill, device.D1(4), device.D1(128), 0, p, uint64(1000), int64(size/8)))
	echo, err := m.Function("echo")
	must(t, err)
	args := []any{int32(-5), uint32(0xfffffff0), int64(-1 << 40), uint64(1<<63 + 9), float32(2.5), math.Pi}
	must(t, s.Launch(echo, device.D1(1), device.D1(1), 0, append([]any{q}, args...)...))
	must(t, s.Synchronize())
	must(t, d0.CopyDtoH(got, p))
	for i := range size / 8 {
		if v := binary.LittleEndian.Uint64(got[8*i:]); v != 1000+uint64(i) {
			t.Fatalf("fill: word %d = %d", i, v)
		}
	}
	must(t, d1.CopyDtoH(got[:48], q))
	wantSlots := []uint64{math.MaxUint64 - 4, 0xfffffff0, uint64(1<<64 - 1<<40), 1<<63 + 9, uint64(math.Float32bits(2.5)), math.Float64bits(math.Pi)}
	for i, w := range wantSlots {
		if v := binary.LittleEndian.Uint64(got[8*i:]); v != w {
			t.Fatalf("echo: slot %d = %#x, want %#x", i, v, w)
		}
	}
	wantErr(t, s.Launch(fill, device.D1(1), device.D1(4096), 0, p, uint64(0), int64(1)), device.ErrInvalid, "fill grid=")
	// a launch is the hot path of every stream-ordered call: it allocates nothing (the caller's
	// boxed arguments aside)
	noop := []any{p, uint64(0), int64(0)}
	if n := testing.AllocsPerRun(100, func() { must(t, s.Launch(fill, device.D1(1), device.D1(1), 0, noop...)) }); n != 0 {
		t.Errorf("Stream.Launch allocates %v times a call, want 0", n)
	}
	// nor does a copy: every putmem_on_stream to a mapped peer is one
	if n := testing.AllocsPerRun(100, func() { must(t, s.CopyAsync(p.Add(16), p, 8)) }); n != 0 {
		t.Errorf("Stream.CopyAsync allocates %v times a call, want 0", n)
	}

	// Stream capture: the captured fills do not run at capture; each replay runs them again, on
	// any stream of the device; a graph left alive is released by Close.
	captureAndReplay(t, d0, s, fill, got)
	must(t, m.Unload())
	wantErr(t, s.Launch(fill, device.D1(1), device.D1(1), 0, p, uint64(0), int64(1)), device.ErrClosed, "module unloaded")

	// IPC: export from device 0, import on device 1.
	h, err := d0.Export(p)
	must(t, err)
	r, err := d1.Import(h)
	must(t, err)
	must(t, d1.CopyDtoH(got[:8], r))
	if binary.LittleEndian.Uint64(got) != 1000 {
		t.Fatal("read through an import")
	}
	must(t, d1.CloseImport(r))
	if want.IPCFallback {
		f.ipcZeroOnly(1)
		r, err = d1.Import(h)
		f.ipcZeroOnly(0)
		must(t, err)
		must(t, d1.CloseImport(r))
	}
	_, err = d1.Import(h[:len(h)-1])
	wantErr(t, err, device.ErrInvalid, "export handle")

	// Peer access and peer copies.
	must(t, d0.EnablePeerAccess(d1.Info()))
	must(t, d0.EnablePeerAccess(d1.Info())) // again: a no-op
	must(t, d0.EnablePeerAccess(d0.Info())) // itself: a no-op
	if f.peerEnabled(0, 1) != 1 || f.peerEnabled(1, 0) != 0 {
		t.Fatalf("peer access 0->1 %d, 1->0 %d", f.peerEnabled(0, 1), f.peerEnabled(1, 0))
	}
	ps := s.(interface {
		PeerCopyAsync(dst device.Ptr, dstDev device.Device, src device.Ptr, srcDev device.Device, n int) error
	})
	must(t, ps.PeerCopyAsync(q, d1, p, d0, size))
	must(t, s.Synchronize())
	must(t, d1.CopyDtoH(got, q))
	if binary.LittleEndian.Uint64(got[8:]) != 1001 {
		t.Fatal("peer copy")
	}

	// Any goroutine may call: each call makes its device current on its own thread.
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := ds[i%2]
			a, err := d.Alloc(64)
			if err == nil {
				if int(f.owner(uintptr(a))) != i%2 {
					err = errors.New("allocated on the wrong device")
				} else {
					err = d.Free(a)
				}
			}
			if err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if n := f.noContext(); n != 0 {
		t.Fatalf("%d calls reached the library with no current context or device", n)
	}

	// Close releases everything: allocations, host buffers, streams, events, modules, imports,
	// the private streams, the contexts.
	if _, err := d1.Import(h); err != nil { // left open for Close
		t.Fatal(err)
	}
	for i, d := range ds {
		must(t, d.Close())
		wantErr(t, d.Close(), device.ErrClosed, drv.Name()+".Close")
		_, err := d.Alloc(8)
		wantErr(t, err, device.ErrClosed, "ordinal="+string(rune('0'+i)))
	}
	wantErr(t, s.Synchronize(), device.ErrClosed, "")
	if n := f.live(); n != 0 {
		t.Fatalf("%d allocations, streams, events, modules or imports left after Close", n)
	}
	if f.ctxRefs(0) != 0 || f.ctxRefs(1) != 0 {
		t.Fatalf("primary contexts still retained after Close: %d, %d", f.ctxRefs(0), f.ctxRefs(1))
	}
}

func captureAndReplay(t *testing.T, d device.Device, s device.Stream, fill device.Function, got []byte) {
	t.Helper()
	p, err := d.Alloc(64) // freed by Close
	must(t, err)
	c, ok := s.(device.Capturer)
	if !ok {
		t.Fatalf("stream of type %T is no device.Capturer", s)
	}
	words := func() []uint64 {
		must(t, d.CopyDtoH(got[:64], p))
		w := make([]uint64, 8)
		for i := range w {
			w[i] = binary.LittleEndian.Uint64(got[8*i:])
		}
		return w
	}
	must(t, d.Memset(p, 0, 64))
	must(t, c.BeginCapture())
	wantErr(t, c.BeginCapture(), device.ErrInvalid, "mode=") // already capturing: the library refuses
	must(t, s.Launch(fill, device.D1(1), device.D1(1), 0, p, uint64(10), int64(4)))
	must(t, s.Launch(fill, device.D1(1), device.D1(1), 0, p.Add(32), uint64(20), int64(4)))
	g, err := c.EndCapture()
	must(t, err)
	if w := words(); w[0] != 0 || w[4] != 0 {
		t.Fatalf("captured launches ran at capture: %v", w)
	}
	other, err := d.NewStream()
	must(t, err)
	if n := testing.AllocsPerRun(100, func() { must(t, g.Launch(other)) }); n != 0 {
		t.Errorf("Graph.Launch allocates %v times a call, want 0", n)
	}
	for _, st := range []device.Stream{s, other, s} {
		must(t, d.Memset(p, 0, 64))
		must(t, g.Launch(st))
		must(t, st.Synchronize())
		if w := words(); w[0] != 10 || w[3] != 13 || w[4] != 20 || w[7] != 23 {
			t.Fatalf("replay: %v", w)
		}
	}
	_, err = c.EndCapture()
	wantErr(t, err, device.ErrInvalid, "")
	must(t, g.Destroy())
	wantErr(t, g.Destroy(), device.ErrClosed, "graph destroyed")
	wantErr(t, g.Launch(s), device.ErrClosed, "graph destroyed")
	wantErr(t, g.Launch(nil), device.ErrInvalid, "stream of type")
	must(t, c.BeginCapture())
	must(t, s.Launch(fill, device.D1(1), device.D1(1), 0, p, uint64(1), int64(1)))
	if _, err := c.EndCapture(); err != nil { // left alive for Close
		t.Fatal(err)
	}
	must(t, other.Destroy())
}
