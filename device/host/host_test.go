package host

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/roxamen/roxamen/device"
)

func open(t *testing.T, ordinal int) device.Device {
	t.Helper()
	d, err := New().Open(ordinal)
	if err != nil {
		t.Fatalf("Open(%d): %v", ordinal, err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func randBytes(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rand.Uint32())
	}
	return b
}

// wantErr fails unless err matches kind and its text names op.
func wantErr(t *testing.T, err error, kind error, op string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: got nil error, want %v", op, kind)
	}
	if kind != nil && !errors.Is(err, kind) {
		t.Fatalf("%s: got %v, want errors.Is(%v)", op, err, kind)
	}
	var de *device.Error
	if !errors.As(err, &de) {
		t.Fatalf("%s: got %T (%v), want *device.Error", op, err, err)
	}
	if !strings.Contains(err.Error(), op) {
		t.Fatalf("error %q does not name %s", err, op)
	}
}

func TestDriverAndInfo(t *testing.T) {
	drv := New()
	if drv.Name() != "host" {
		t.Fatalf("Name() = %q", drv.Name())
	}
	n, err := drv.Count()
	if err != nil || n != Devices {
		t.Fatalf("Count() = %d, %v; want %d", n, err, Devices)
	}
	d := open(t, 3)
	info := d.Info()
	if info.Driver != "host" || info.Arch != "host" || info.Ordinal != 3 || info.Multiprocessors != runtime.NumCPU() {
		t.Fatalf("Info() = %+v", info)
	}
	if info.MemoryBytes == 0 || info.UUID == "" {
		t.Fatalf("Info() lacks memory or UUID: %+v", info)
	}
	if other := open(t, 4).Info().UUID; other == info.UUID {
		t.Fatalf("devices 3 and 4 share UUID %s", other)
	}
	for _, bad := range []int{-1, Devices} {
		_, err := drv.Open(bad)
		wantErr(t, err, device.ErrNoDevice, "host.Open")
	}
}

func TestMemory(t *testing.T) {
	d := open(t, 0)
	const n = 1<<20 + 13
	p, err := d.Alloc(n)
	if err != nil {
		t.Fatal(err)
	}
	q, err := d.Alloc(n)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Memset(p, 0xa5, n); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, n)
	if err := d.CopyDtoH(got, p); err != nil {
		t.Fatal(err)
	}
	for i, b := range got {
		if b != 0xa5 {
			t.Fatalf("after Memset(0xa5) byte %d = %#x", i, b)
		}
	}
	in := randBytes(n)
	if err := d.CopyHtoD(p, in); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(Bytes(p, n), in) {
		t.Fatal("Bytes(p) differs from what CopyHtoD wrote")
	}
	// An interior range copied into the other allocation.
	if err := d.CopyDtoD(q.Add(7), p.Add(100), n-100); err != nil {
		t.Fatal(err)
	}
	clear(got)
	if err := d.CopyDtoH(got[:n-100], q.Add(7)); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got[:n-100], in[100:]) {
		t.Fatal("CopyDtoD result differs")
	}
	// Stores through Bytes are seen by copies.
	Bytes(q, 1)[0] = 0x42
	one := make([]byte, 1)
	if err := d.CopyDtoH(one, q); err != nil || one[0] != 0x42 {
		t.Fatalf("CopyDtoH after store = %#x, %v", one[0], err)
	}

	hb, err := d.AllocHost(4096)
	if err != nil {
		t.Fatal(err)
	}
	if hb.Dev != device.Ptr(uintptr(unsafe.Pointer(&hb.Bytes[0]))) || len(hb.Bytes) != 4096 {
		t.Fatalf("AllocHost: Dev %#x is not the host address %p (len %d)", hb.Dev, &hb.Bytes[0], len(hb.Bytes))
	}
	if err := d.CopyDtoD(hb.Dev, p, 4096); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(hb.Bytes, in[:4096]) {
		t.Fatal("copy into host buffer not seen through HostBuffer.Bytes")
	}
	if err := d.FreeHost(hb); err != nil {
		t.Fatal(err)
	}
	if err := d.Free(p); err != nil {
		t.Fatal(err)
	}
	if err := d.Free(q); err != nil {
		t.Fatal(err)
	}
}

func TestMemoryErrors(t *testing.T) {
	d := open(t, 0)
	for _, size := range []int{0, -1} {
		_, err := d.Alloc(size)
		wantErr(t, err, device.ErrInvalid, "host.Alloc")
		_, err = d.AllocHost(size)
		wantErr(t, err, device.ErrInvalid, "host.AllocHost")
	}
	p, err := d.Alloc(64)
	if err != nil {
		t.Fatal(err)
	}
	hb, err := d.AllocHost(64)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 65)
	wantErr(t, d.Memset(p, 0, 65), device.ErrInvalid, "host.Memset")
	wantErr(t, d.Memset(p, 0, -1), device.ErrInvalid, "host.Memset")
	wantErr(t, d.CopyHtoD(p.Add(1), buf[:64]), device.ErrInvalid, "host.CopyHtoD")
	wantErr(t, d.CopyDtoH(buf, p), device.ErrInvalid, "host.CopyDtoH")
	wantErr(t, d.CopyDtoD(p, hb.Dev, 65), device.ErrInvalid, "host.CopyDtoD")
	wantErr(t, d.CopyDtoD(0, p, 1), device.ErrInvalid, "host.CopyDtoD")
	if err := d.Memset(p, 0, 0); err != nil {
		t.Fatalf("Memset of 0 bytes: %v", err)
	}
	wantErr(t, d.Free(p.Add(1)), device.ErrInvalid, "host.Free")
	wantErr(t, d.Free(hb.Dev), device.ErrInvalid, "host.Free")
	wantErr(t, d.FreeHost(device.HostBuffer{Dev: p}), device.ErrInvalid, "host.FreeHost")
	wantErr(t, d.CloseImport(p), device.ErrInvalid, "host.CloseImport")
	// Memory of one device is not freed through another.
	wantErr(t, open(t, 1).Free(p), device.ErrInvalid, "host.Free")
	if err := d.Free(p); err != nil {
		t.Fatal(err)
	}
	wantErr(t, d.Free(p), device.ErrInvalid, "host.Free")
	for _, n := range []int{1, -1} {
		func() {
			defer func() {
				r := recover()
				err, _ := r.(error)
				if err == nil || !errors.Is(err, device.ErrInvalid) || !strings.Contains(err.Error(), "host.Bytes") {
					t.Fatalf("Bytes(freed, %d) panicked with %v, want a host.Bytes ErrInvalid", n, r)
				}
			}()
			Bytes(p, n)
		}()
	}
	if len(Bytes(hb.Dev, 0)) != 0 {
		t.Fatal("Bytes(p, 0) not empty")
	}
	// Everything fails cleanly once the device is closed.
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	wantErr(t, d.Close(), device.ErrClosed, "host.Close")
	_, err = d.Alloc(8)
	wantErr(t, err, device.ErrClosed, "host.Alloc")
	wantErr(t, d.Memset(hb.Dev, 0, 1), device.ErrClosed, "host.Memset")
	_, err = d.NewStream()
	wantErr(t, err, device.ErrClosed, "host.NewStream")
	_, err = d.NewEvent()
	wantErr(t, err, device.ErrClosed, "host.NewEvent")
	_, err = d.LoadModule([]byte("x"))
	wantErr(t, err, device.ErrClosed, "host.LoadModule")
	wantErr(t, d.Synchronize(), device.ErrClosed, "host.Synchronize")
	_, err = d.Export(p)
	wantErr(t, err, device.ErrClosed, "host.Export")
	_, err = d.Import(nil)
	wantErr(t, err, device.ErrClosed, "host.Import")
	if find(hb.Dev, 1) != nil {
		t.Fatal("Close left the host buffer mapped")
	}
}

func TestExportImportInProcess(t *testing.T) {
	d0, d1 := open(t, 0), open(t, 1)
	p, err := d0.Alloc(8192)
	if err != nil {
		t.Fatal(err)
	}
	h, err := d0.Export(p)
	if err != nil {
		t.Fatal(err)
	}
	q, err := d1.Import(h)
	if err != nil {
		t.Fatal(err)
	}
	if q == p {
		t.Fatal("Import returned the exporter's own address; want a second mapping")
	}
	in := randBytes(8192)
	if err := d0.CopyHtoD(p, in); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(Bytes(q, 8192), in) {
		t.Fatal("imported mapping does not see the exporter's stores")
	}
	Bytes(q, 8)[5] = ^in[5]
	if Bytes(p, 8)[5] != ^in[5] {
		t.Fatal("exporter does not see a store through the import")
	}
	if err := d1.EnablePeerAccess(d0.Info()); err != nil {
		t.Fatal(err)
	}
	wantErr(t, d1.EnablePeerAccess(device.Info{Driver: "cuda"}), device.ErrNotSupported, "host.EnablePeerAccess")
	if err := d1.CloseImport(q); err != nil {
		t.Fatal(err)
	}
	wantErr(t, d1.CloseImport(q), device.ErrInvalid, "host.CloseImport")

	// Error paths.
	hb, err := d0.AllocHost(64)
	if err != nil {
		t.Fatal(err)
	}
	_, err = d0.Export(hb.Dev)
	wantErr(t, err, device.ErrInvalid, "host.Export")
	_, err = d0.Export(p.Add(8))
	wantErr(t, err, device.ErrInvalid, "host.Export")
	_, err = d1.Import([]byte("short"))
	wantErr(t, err, device.ErrInvalid, "host.Import")
	bad := append([]byte(nil), h...)
	bad[0] = 'X'
	_, err = d1.Import(bad)
	wantErr(t, err, device.ErrInvalid, "host.Import")
	bad = append([]byte(nil), h...)
	bad[40]++ // another inode
	_, err = d1.Import(bad)
	wantErr(t, err, device.ErrInvalid, "host.Import")
	bad = append([]byte(nil), h...)
	bad[24] = 0 // size 0 (8192 has a zero low byte: change the next one)
	bad[25] = 0
	_, err = d1.Import(bad)
	wantErr(t, err, device.ErrInvalid, "host.Import")
	if err := d0.Free(p); err != nil {
		t.Fatal(err)
	}
	_, err = d1.Import(h) // freed: the fd is closed (or reused by another file)
	wantErr(t, err, device.ErrInvalid, "host.Import")
}

// TestModulesAndStreams runs kernels, globals, stream order, events and cross-stream waits.
func TestModulesAndStreams(t *testing.T) {
	d := open(t, 0)
	mod, err := d.LoadModule([]byte("hosttest"))
	if err != nil {
		t.Fatal(err)
	}
	mod2, err := d.LoadModule([]byte("hosttest"))
	if err != nil {
		t.Fatal(err)
	}
	gp, gsize, err := mod.Global("scale")
	if err != nil || gsize != 4 {
		t.Fatalf("Global(scale) = %#x, %d, %v; want size 4", gp, gsize, err)
	}
	gp2, _, err := mod2.Global("scale")
	if err != nil || gp2 == gp {
		t.Fatalf("second load shares global %#x (%v)", gp2, err)
	}
	if gp%16 != 0 {
		t.Fatalf("global at %#x not 16-byte aligned", gp)
	}
	if _, n, err := mod.Global("table"); err != nil || n != 100 {
		t.Fatalf("Global(table) size %d, %v", n, err)
	}
	scale := rand.Uint32()%1000 + 2
	if err := d.CopyHtoD(gp, u32bytes(scale)); err != nil {
		t.Fatal(err)
	}
	axpy, err := mod.Function("scale")
	if err != nil || axpy.Name() != "scale" {
		t.Fatalf("Function(scale) = %v, %v", axpy, err)
	}

	const blocks, threads = 7, 33
	const n = blocks*threads - 5
	in := make([]uint32, n)
	for i := range in {
		in[i] = rand.Uint32()
	}
	src, _ := d.Alloc(4 * n)
	dst, _ := d.Alloc(4 * n)
	s, err := d.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	start, _ := d.NewEvent()
	stop, _ := d.NewEvent()
	inb := u32slice(in)
	out := make([]byte, 4*n)
	if err := s.Record(start); err != nil {
		t.Fatal(err)
	}
	if err := s.MemsetAsync(dst, 0xff, 4*n); err != nil {
		t.Fatal(err)
	}
	if err := s.CopyHtoDAsync(src, inb); err != nil {
		t.Fatal(err)
	}
	if err := s.Launch(axpy, device.D1(blocks), device.D1(threads), 16, dst, src, int32(n)); err != nil {
		t.Fatal(err)
	}
	if err := s.CopyDtoHAsync(out, dst); err != nil {
		t.Fatal(err)
	}
	if err := s.Record(stop); err != nil {
		t.Fatal(err)
	}
	if err := stop.Synchronize(); err != nil {
		t.Fatal(err)
	}
	for i, x := range in {
		if got := le32(out[4*i:]); got != x*scale {
			t.Fatalf("out[%d] = %d, want %d*%d = %d", i, got, x, scale, x*scale)
		}
	}
	if el, err := stop.Since(start); err != nil || el < 0 {
		t.Fatalf("Since = %v, %v", el, err)
	}
	if done, err := s.Query(); !done || err != nil {
		t.Fatalf("Query after sync = %v, %v", done, err)
	}

	// Stream order and cross-stream waits: s2 waits for an event recorded after a kernel on s
	// that blocks until released, so s2's memset must not run before the release.
	if err := d.Memset(dst, 0, 4); err != nil {
		t.Fatal(err)
	}
	gate := make(chan struct{})
	gates.Store(&gate)
	block, _ := mod.Function("block")
	s2, _ := d.NewStream()
	ev, _ := d.NewEvent()
	if err := s.Launch(block, device.D1(1), device.D1(1), 0); err != nil {
		t.Fatal(err)
	}
	if err := s.Record(ev); err != nil {
		t.Fatal(err)
	}
	if err := s2.Wait(ev); err != nil {
		t.Fatal(err)
	}
	if err := s2.MemsetAsync(dst, 7, 4); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond)
	if done, _ := s2.Query(); done {
		t.Fatal("s2 finished while the event it waits for is pending")
	}
	if _, err := ev.Since(start); !errors.Is(err, device.ErrNotReady) {
		t.Fatalf("Since on a pending event = %v, want ErrNotReady", err)
	}
	if Bytes(dst, 1)[0] == 7 {
		t.Fatal("s2's memset ran before its wait")
	}
	close(gate)
	if err := d.Synchronize(); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(Bytes(dst, 4), []byte{7, 7, 7, 7}) {
		t.Fatalf("after Synchronize dst = %v", Bytes(dst, 4))
	}
	// An event never recorded: Wait and Synchronize are no-ops, Since is not ready.
	fresh, _ := d.NewEvent()
	if err := s2.Wait(fresh); err != nil {
		t.Fatal(err)
	}
	if err := fresh.Synchronize(); err != nil {
		t.Fatal(err)
	}
	_, err = fresh.Since(start)
	wantErr(t, err, device.ErrNotReady, "host.Event.Since")

	// Blocks run concurrently: block 0 waits for block 1's flag.
	pair, _ := mod.Function("pair")
	flag, _ := d.Alloc(8)
	if err := s.Launch(pair, device.D1(2), device.D1(1), 0, flag); err != nil {
		t.Fatal(err)
	}
	if err := s.Synchronize(); err != nil {
		t.Fatalf("pair kernel: %v", err)
	}
	if got := le32(Bytes(flag, 4)); got != 2 {
		t.Fatalf("pair kernel flag = %d, want 2", got)
	}

	// Launch errors.
	wantErr(t, s.Launch(axpy, device.D1(1), device.D1(1), 0, "x"), device.ErrInvalid, "host.Stream.Launch")
	wantErr(t, s.Launch(axpy, device.D1(0), device.D1(1), 0), device.ErrInvalid, "host.Stream.Launch")
	wantErr(t, s.Launch(nil, device.D1(1), device.D1(1), 0), device.ErrInvalid, "host.Stream.Launch")
	wantErr(t, s.CopyAsync(dst, src, 4*n+1), device.ErrInvalid, "host.Stream.CopyAsync")
	wantErr(t, s.CopyHtoDAsync(0, []byte{1}), device.ErrInvalid, "host.Stream.CopyHtoDAsync")
	wantErr(t, s.CopyDtoHAsync(make([]byte, 4*n+1), dst), device.ErrInvalid, "host.Stream.CopyDtoHAsync")
	wantErr(t, s.MemsetAsync(dst, 0, -1), device.ErrInvalid, "host.Stream.MemsetAsync")
	_, err = mod.Function("nope")
	wantErr(t, err, device.ErrInvalid, "host.Module.Function")
	_, _, err = mod.Global("nope")
	wantErr(t, err, device.ErrInvalid, "host.Module.Global")
	_, err = d.LoadModule([]byte("not-registered"))
	wantErr(t, err, device.ErrInvalid, "host.LoadModule")

	// A panicking kernel fails the stream; the error is sticky and names the kernel.
	boom, _ := mod.Function("boom")
	if err := s.Launch(boom, device.D1(3), device.D1(1), 0); err != nil {
		t.Fatal(err)
	}
	err = s.Synchronize()
	if err == nil || !strings.Contains(err.Error(), "boom") || !strings.Contains(err.Error(), "host kernel") {
		t.Fatalf("Synchronize after a panicking kernel = %v", err)
	}
	if err2 := s.MemsetAsync(dst, 0, 4); err2 == nil {
		t.Fatal("stream accepted work after a failure")
	}
	if err := d.Synchronize(); err == nil {
		t.Fatal("device Synchronize hid a stream failure")
	}
	// A kernel reading a global the module lacks fails the same way.
	s3, _ := d.NewStream()
	missing, _ := mod.Function("missing")
	if err := s3.Launch(missing, device.D1(1), device.D1(1), 0); err != nil {
		t.Fatal(err)
	}
	if err := s3.Synchronize(); err == nil || !strings.Contains(err.Error(), `no global "absent"`) {
		t.Fatalf("missing global: %v", err)
	}
	if err := s3.Destroy(); err != nil {
		t.Fatal(err)
	}
	wantErr(t, s3.Destroy(), device.ErrClosed, "host.Stream.Destroy")
	wantErr(t, s3.MemsetAsync(dst, 0, 1), device.ErrClosed, "host.Stream.MemsetAsync")

	// Unload.
	if err := mod2.Unload(); err != nil {
		t.Fatal(err)
	}
	wantErr(t, mod2.Unload(), device.ErrClosed, "host.Module.Unload")
	if find(gp2, 4) != nil {
		t.Fatal("Unload left the globals mapped")
	}
	f2, err := mod.Function("scale")
	if err != nil {
		t.Fatal(err)
	}
	_ = f2
	if err := mod.Unload(); err != nil {
		t.Fatal(err)
	}
	s4, _ := d.NewStream()
	wantErr(t, s4.Launch(f2, device.D1(1), device.D1(1), 0, dst, src, int32(1)), device.ErrClosed, "host.Stream.Launch")
	if err := ev.Destroy(); err != nil {
		t.Fatal(err)
	}
	wantErr(t, s4.Record(ev), device.ErrClosed, "host.Stream.Record")
	wantErr(t, ev.Destroy(), device.ErrClosed, "host.Event.Destroy")
}

func TestRegisterPanics(t *testing.T) {
	for name, f := range map[string]func(){
		"duplicate": func() { Register("hosttest", nil, nil) },
		"empty":     func() { Register("", nil, nil) },
		"nil":       func() { Register("x1", map[string]Kernel{"k": nil}, nil) },
		"size":      func() { Register("x2", nil, map[string]int{"g": 0}) },
	} {
		func() {
			defer func() {
				if r := recover(); r == nil || !strings.Contains(fmtAny(r), "host.Register") {
					t.Errorf("%s: Register recovered %v, want a host.Register panic", name, r)
				}
			}()
			f()
		}()
	}
}

func TestStreamsConcurrentUse(t *testing.T) {
	d := open(t, 0)
	p, _ := d.Alloc(1 << 16)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := d.NewStream()
			if err != nil {
				t.Error(err)
				return
			}
			base := p.Add(g * 8192)
			for i := range 100 {
				if err := s.MemsetAsync(base, byte(i), 8192); err != nil {
					t.Error(err)
					return
				}
			}
			if err := s.Synchronize(); err != nil {
				t.Error(err)
			}
			if b := Bytes(base, 8192); b[0] != 99 || b[8191] != 99 {
				t.Errorf("stream %d: last memset not last: %d %d", g, b[0], b[8191])
			}
		}()
	}
	wg.Wait()
}

var gates atomic.Pointer[chan struct{}]

func init() {
	Register("hosttest", map[string]Kernel{
		// scale(dst, src *uint32, n int32): dst[i] = src[i] * scale (a global)
		"scale": func(l Launch, args []any) {
			dst, src, n := args[0].(device.Ptr), args[1].(device.Ptr), int(args[2].(int32))
			k := le32(Bytes(l.Global("scale"), 4))
			if len(l.Shared) != 16 {
				panic("shared memory size")
			}
			for t := range l.Threads() {
				i := int(l.BlockIdx.X)*l.Threads() + t
				if i < n {
					put32(Bytes(dst.Add(4*i), 4), le32(Bytes(src.Add(4*i), 4))*k)
				}
			}
		},
		"block": func(l Launch, args []any) { <-*gates.Load() },
		// pair(flag): block 1 sets the flag to 1; block 0 waits for it and sets 2.
		"pair": func(l Launch, args []any) {
			w := (*uint32)(unsafe.Pointer(&Bytes(args[0].(device.Ptr), 4)[0]))
			if l.BlockIdx.X == 1 {
				atomic.StoreUint32(w, 1)
				return
			}
			for deadline := time.Now().Add(10 * time.Second); atomic.LoadUint32(w) != 1; {
				if time.Now().After(deadline) {
					panic("block 1 never ran beside block 0")
				}
				runtime.Gosched()
			}
			atomic.StoreUint32(w, 2)
		},
		"boom":    func(l Launch, args []any) { panic("boom") },
		"missing": func(l Launch, args []any) { l.Global("absent") },
	}, map[string]int{"scale": 4, "table": 100})
}

func le32(b []byte) uint32 {
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
}
func put32(b []byte, v uint32) {
	b[0], b[1], b[2], b[3] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24)
}
func u32bytes(v uint32) []byte { b := make([]byte, 4); put32(b, v); return b }
func u32slice(v []uint32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		put32(b[4*i:], x)
	}
	return b
}
func fmtAny(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	if e, ok := v.(error); ok {
		return e.Error()
	}
	return ""
}

// TestAdoptStream: an adopted stream is the same queue as the stream whose Handle it took (work
// on the two runs in one order), and its Destroy leaves that stream running.
func TestAdoptStream(t *testing.T) {
	d := open(t, 0)
	s, err := d.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	a, err := d.AdoptStream(s.Handle())
	if err != nil {
		t.Fatal(err)
	}
	if a.Handle() != s.Handle() {
		t.Fatalf("adopted handle %#x, the stream's %#x", a.Handle(), s.Handle())
	}
	p, err := d.Alloc(64)
	if err != nil {
		t.Fatal(err)
	}
	// a memset on s, then a copy on a that reads it: in order only if they share the queue
	for i := range 50 {
		if err := s.MemsetAsync(p, byte(i), 32); err != nil {
			t.Fatal(err)
		}
		if err := a.CopyAsync(p.Add(32), p, 32); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, 32)
		if err := a.CopyDtoHAsync(got, p.Add(32)); err != nil {
			t.Fatal(err)
		}
		if err := s.Synchronize(); err != nil {
			t.Fatal(err)
		}
		for _, b := range got {
			if b != byte(i) {
				t.Fatalf("round %d: the adopted stream's copy read %d before the memset", i, b)
			}
		}
	}
	if err := a.Destroy(); err != nil {
		t.Fatal(err)
	}
	wantErr(t, a.Destroy(), device.ErrClosed, "host.Stream.Destroy")
	wantErr(t, a.MemsetAsync(p, 0, 1), device.ErrClosed, "host.Stream.MemsetAsync")
	// the stream itself is untouched
	if err := s.MemsetAsync(p, 7, 1); err != nil {
		t.Fatal(err)
	}
	if err := s.Synchronize(); err != nil {
		t.Fatal(err)
	}
	_, err = d.AdoptStream(s.Handle() + 1000)
	wantErr(t, err, device.ErrInvalid, "host.AdoptStream")
	if err := s.Destroy(); err != nil {
		t.Fatal(err)
	}
	_, err = d.AdoptStream(s.Handle())
	wantErr(t, err, device.ErrInvalid, "host.AdoptStream")
}
