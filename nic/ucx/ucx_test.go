package ucx

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/roxamen/roxamen/nic"
)

// needUCX skips when libucp is missing, unless ROX_TEST_UCX=1 says it must be there.
func needUCX(t testing.TB) {
	t.Helper()
	if err := Probe(); err != nil {
		if getenv("ROX_TEST_UCX") == "1" {
			t.Fatalf("ROX_TEST_UCX=1 but %v", err)
		}
		t.Skipf("no UCX here: %v", err)
	}
}

// heap maps anonymous shared memory, like the host backend's memfd heaps.
func heap(t testing.TB, n int) []byte {
	t.Helper()
	b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(b) })
	return b
}

// job starts n connected transports in this process.
func job(t testing.TB, n, heapSize int) ([]*Transport, [][]byte) {
	t.Helper()
	needUCX(t)
	ts := make([]*Transport, n)
	heaps := make([][]byte, n)
	addrs := make([][]byte, n)
	for pe := range ts {
		heaps[pe] = heap(t, heapSize)
		tr, err := New(Config{PE: pe, NPEs: n, Heap: heaps[pe], Timeout: 20 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tr.Close() })
		ts[pe] = tr
		addrs[pe] = tr.Address()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	errs := make([]error, n)
	var wg sync.WaitGroup
	for pe, tr := range ts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[pe] = tr.Connect(ctx, addrs)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	return ts, heaps
}

func TestPutGet(t *testing.T) {
	ts, heaps := job(t, 3, 1<<20)
	for _, size := range []int{1, 8, 100, 4096, 64 << 10, 512 << 10} {
		src := make([]byte, size)
		for i := range src {
			src[i] = byte(i*7 + size)
		}
		off := uint64(1000)
		if err := ts[0].Put(2, off, src); err != nil {
			t.Fatal(err)
		}
		if err := ts[0].Quiet(context.Background(), 2); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(heaps[2][off:off+uint64(size)], src) {
			t.Fatalf("put of %d bytes: PE 2's heap differs from the source", size)
		}
		got := make([]byte, size)
		if err := ts[1].Get(2, off, got); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, src) {
			t.Fatalf("get of %d bytes from PE 2 differs from its heap", size)
		}
	}
	// To itself: a local copy.
	if err := ts[1].Put(1, 8, []byte("self")); err != nil || string(heaps[1][8:12]) != "self" {
		t.Fatalf("put to self: %v, heap %q", err, heaps[1][8:12])
	}
}

func TestAMO(t *testing.T) {
	ts, heaps := job(t, 2, 1<<16)
	le := func(b []byte, w int) uint64 {
		var v uint64
		for i := w - 1; i >= 0; i-- {
			v = v<<8 | uint64(b[i])
		}
		return v
	}
	for _, w := range []int{4, 8} {
		off := uint64(64 * w)
		mask := uint64(1)<<(8*w) - 1
		if w == 8 {
			mask = ^uint64(0)
		}
		steps := []struct {
			op         nic.AMOOp
			v, c       uint64
			old, after uint64
		}{
			{nic.AMOSet, 0xf0f0f0f0a5a5a5a5 & mask, 0, 0, 0xf0f0f0f0a5a5a5a5 & mask},
			{nic.AMOFetch, 0, 0, 0xf0f0f0f0a5a5a5a5 & mask, 0xf0f0f0f0a5a5a5a5 & mask},
			{nic.AMOFetchAdd, 0x0b, 0, 0xf0f0f0f0a5a5a5a5 & mask, 0xf0f0f0f0a5a5a5b0 & mask},
			{nic.AMOCompareSwap, 7, 1, 0xf0f0f0f0a5a5a5b0 & mask, 0xf0f0f0f0a5a5a5b0 & mask},
			{nic.AMOCompareSwap, 7, 0xf0f0f0f0a5a5a5b0 & mask, 0xf0f0f0f0a5a5a5b0 & mask, 7},
			{nic.AMOFetchOr, 0x30, 0, 7, 0x37},
			{nic.AMOFetchAnd, 0x1e, 0, 0x37, 0x16},
			{nic.AMOFetchXor, 0xff, 0, 0x16, 0xe9},
			{nic.AMOSwap, mask, 0, 0xe9, mask},
		}
		for _, s := range steps {
			old, err := ts[0].AMO(1, s.op, w, off, s.v, s.c)
			if err != nil {
				t.Fatalf("width %d %v: %v", w, s.op, err)
			}
			if old != s.old || le(heaps[1][off:], w) != s.after {
				t.Fatalf("width %d %v(%#x, %#x): old %#x, word now %#x; want %#x, %#x", w, s.op, s.v, s.c, old, le(heaps[1][off:], w), s.old, s.after)
			}
		}
		// The neighbouring word is untouched by 4-byte AMOs.
		if w == 4 && le(heaps[1][off+4:], 4) != 0 {
			t.Fatalf("4-byte AMOs wrote past their word: %x", heaps[1][off:off+8])
		}
	}
}

// TestConcurrentAdds: fetch-adds from several PEs and goroutines, and the target's own atomic
// adds, never lose an update.
func TestConcurrentAdds(t *testing.T) {
	ts, heaps := job(t, 3, 1<<16)
	const per = 200
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	// A waiter progressing PE 2's worker meanwhile, as a wait_until loop would.
	stop := make(chan struct{})
	go func() {
		for {
			select {
			case <-stop:
				return
			default:
				ts[2].Progress()
				runtime.Gosched()
			}
		}
	}()
	defer close(stop)
	for _, from := range []int{0, 1, 2, 0} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < per; i++ {
				if _, err := ts[from].AMO(2, nic.AMOFetchAdd, 8, 128, 1, 0); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if got := le64(heaps[2][128:]); got != 4*per {
		t.Fatalf("counter is %d after %d adds", got, 4*per)
	}
}

func le64(b []byte) uint64 {
	var v uint64
	for i := 7; i >= 0; i-- {
		v = v<<8 | uint64(b[i])
	}
	return v
}

// TestPutSignalOrder: a PE that sees the signal sees the data, every time.
func TestPutSignalOrder(t *testing.T) {
	ts, heaps := job(t, 2, 1<<20)
	const rounds = 200
	const size = 32 << 10
	done := make(chan error, 1)
	go func() {
		for r := uint64(1); r <= rounds; r++ {
			deadline := time.Now().Add(30 * time.Second)
			for le64(heaps[1][0:]) < r {
				ts[1].Progress() // as shmem's waits drive the worker (a wake-up under the race detector's load took over 10 s)
				runtime.Gosched()
				if time.Now().After(deadline) {
					done <- fmt.Errorf("signal stuck at %d, want %d", le64(heaps[1][0:]), r)
					return
				}
			}
			for i := 0; i < size; i += 4096 {
				if heaps[1][64+i] != byte(r) {
					done <- fmt.Errorf("round %d: signal seen before the data (byte %d is %d)", r, i, heaps[1][64+i])
					return
				}
			}
			// Acknowledge with a set-signal back.
			if err := ts[1].PutSignal(0, 64, []byte{byte(r)}, 0, nic.SignalSet, r); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	src := make([]byte, size)
	for r := uint64(1); r <= rounds; r++ {
		for i := range src {
			src[i] = byte(r)
		}
		if err := ts[0].PutSignal(1, 64, src, 0, nic.SignalAdd, 1); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(30 * time.Second)
		for le64(heaps[0][0:]) != r {
			ts[0].Progress()
			runtime.Gosched()
			if time.Now().After(deadline) {
				t.Fatalf("no acknowledgement of round %d", r)
			}
		}
		if heaps[0][64] != byte(r) {
			t.Fatalf("round %d: acknowledgement before its data", r)
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestFenceOrder: with a fence between them, a later put is never seen before an earlier one.
func TestFenceOrder(t *testing.T) {
	ts, heaps := job(t, 2, 1<<20)
	big := bytes.Repeat([]byte{0xab}, 256<<10)
	for r := 1; r <= 20; r++ {
		big[0] = byte(r)
		if err := ts[0].Put(1, 4096, big); err != nil {
			t.Fatal(err)
		}
		if err := ts[0].Fence(1); err != nil {
			t.Fatal(err)
		}
		if err := ts[0].Put(1, 0, []byte{byte(r)}); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for heaps[1][0] != byte(r) {
			runtime.Gosched()
			if time.Now().After(deadline) {
				t.Fatalf("round %d: flag never arrived", r)
			}
		}
		if heaps[1][4096] != byte(r) || heaps[1][4096+len(big)-1] != 0xab {
			t.Fatalf("round %d: the flag arrived before the data it was fenced after", r)
		}
	}
	if err := ts[0].Quiet(context.Background(), -1); err != nil {
		t.Fatal(err)
	}
}

func TestBadInput(t *testing.T) {
	ts, _ := job(t, 2, 1<<16)
	tr := ts[0]
	cases := []struct {
		name string
		err  error
		want []string
	}{
		{"pe range", tr.Put(2, 0, []byte{1}), []string{"put", "PE 0", "PE 2", "out of range"}},
		{"past heap", tr.Put(1, 1<<16-4, make([]byte, 8)), []string{"put", "PE 0", "PE 1", "0xfffc", "0x10004"}},
		{"get past heap", tr.Get(1, 1<<16, make([]byte, 1)), []string{"get", "0x10000"}},
		{"misaligned amo", func() error { _, err := tr.AMO(1, nic.AMOFetchAdd, 8, 4, 1, 0); return err }(), []string{"amo", "PE 1", "0x4", "aligned"}},
		{"amo width", func() error { _, err := tr.AMO(1, nic.AMOFetchAdd, 2, 0, 1, 0); return err }(), []string{"amo", "width 2"}},
		{"signal misaligned", tr.PutSignal(1, 0, []byte{1}, 12, nic.SignalSet, 1), []string{"put_signal", "0xc"}},
		{"fence range", tr.Fence(-1), []string{"fence", "PE -1"}},
	}
	for _, c := range cases {
		if c.err == nil {
			t.Errorf("%s: no error", c.name)
			continue
		}
		for _, w := range c.want {
			if !bytes.Contains([]byte(c.err.Error()), []byte(w)) {
				t.Errorf("%s: %q does not mention %q", c.name, c.err, w)
			}
		}
	}
	if _, err := New(Config{PE: 3, NPEs: 2, Heap: make([]byte, 64)}); err == nil {
		t.Error("New accepted PE 3 of 2")
	}
	if err := tr.Connect(context.Background(), [][]byte{tr.Address(), []byte("garbage")}); err == nil || !bytes.Contains([]byte(err.Error()), []byte("PE 1")) {
		t.Errorf("Connect with a garbage address: %v", err)
	}
}

func TestClosed(t *testing.T) {
	ts, _ := job(t, 2, 1<<16)
	ts[0].Close()
	if ts[0].Progress() {
		t.Fatal("Progress after Close reported progress")
	}
	if err := ts[0].Put(1, 0, []byte{1}); !errors.Is(err, ErrClosed) {
		t.Fatalf("put after Close: %v, want ErrClosed", err)
	}
	if err := ts[0].Close(); err != nil {
		t.Fatal(err)
	}
}

// TestMissingLibrary: a machine without libucp gets an error naming it that matches ErrNoLibrary.
// It runs in a child process, since this one may have loaded the real library.
func TestMissingLibrary(t *testing.T) {
	if os.Getenv("ROX_UCX_TEST_CHILD") == "missing" {
		libraryName = "libucp-roxamen-missing.so.0"
		_, err := New(Config{PE: 0, NPEs: 1, Heap: make([]byte, 4096)})
		fmt.Println(err)
		if !errors.Is(err, ErrNoLibrary) || !strings.Contains(err.Error(), "libucp") || !errors.Is(Probe(), ErrNoLibrary) {
			os.Exit(3)
		}
		os.Exit(0)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestMissingLibrary$")
	cmd.Env = append(os.Environ(), "ROX_UCX_TEST_CHILD=missing")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "libucp.so.0 is not available") {
		t.Fatalf("the error does not name libucp.so.0:\n%s", out)
	}
}

// TestConcurrentAMOs: fetch-adds from many goroutines are in flight together, not one round trip
// at a time behind the worker's lock, and every one of them lands exactly once.
func TestConcurrentAMOs(t *testing.T) {
	ts, heaps := job(t, 2, 1<<16)
	const goroutines, adds = 8, 500
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range adds {
				if _, err := ts[0].AMO(1, nic.AMOFetchAdd, 8, 64, 1, 0); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if got := le64(heaps[1][64:]); got != goroutines*adds {
		t.Fatalf("the word holds %d after %d fetch-adds", got, goroutines*adds)
	}
	ts[0].mu.Lock()
	peak := ts[0].amoPeak
	ts[0].mu.Unlock()
	if peak < 2 {
		t.Errorf("at most %d fetch-add in flight at once from %d goroutines: they were serialized", peak, goroutines)
	}
	t.Logf("at most %d of %d goroutines' fetch-adds in flight at once", peak, goroutines)
}

// TestProgressHandover: over UCX's tcp transport (remote memory access emulated in software, so
// the target's worker must progress for a put to complete), puts complete while the target polls
// with Progress, during which its progress goroutine stands back, and again once it has stopped
// polling, when the goroutine must take the worker over by itself.
func TestProgressHandover(t *testing.T) {
	t.Setenv("UCX_TLS", "tcp")
	t.Setenv("UCX_NET_DEVICES", "lo")
	ts, heaps := job(t, 2, 1<<16)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	stop := make(chan struct{})
	polled := make(chan struct{})
	go func() { // the target's wait_until
		defer close(polled)
		for {
			select {
			case <-stop:
				return
			default:
				ts[1].Progress()
			}
		}
	}()
	for round, v := range []byte{0x5a, 0xa5} {
		if round == 1 {
			close(stop)
			<-polled
		}
		if err := ts[0].Put(1, 64, bytes.Repeat([]byte{v}, 8)); err != nil {
			t.Fatal(err)
		}
		if err := ts[0].Quiet(ctx, 1); err != nil {
			t.Fatalf("round %d (target polling: %v): %v", round, round == 0, err)
		}
		if !bytes.Equal(heaps[1][64:72], bytes.Repeat([]byte{v}, 8)) {
			t.Fatalf("round %d: PE 1's heap holds % x after the quiet", round, heaps[1][64:72])
		}
	}
}
