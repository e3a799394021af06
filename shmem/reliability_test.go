package shmem

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/roxamen/roxamen/internal/bootstrap"
)

// benchWorld is a 1-PE World for benchmarks of the call path itself.
func benchWorld(b *testing.B) *World {
	srv, err := bootstrap.NewServer("127.0.0.1:0", 1, "bench-token")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { srv.Close() })
	vars := map[string]string{"ROX_PE": "0", "ROX_NPES": "1", "ROX_LOCAL_PE": "0", "ROX_LOCAL_NPES": "1", "ROX_BOOTSTRAP": "bench-token@" + srv.Addr()}
	w, err := Init(context.Background(), WithHeapSize(1<<20), WithTimeout(10*time.Second), withGetenv(func(k string) string { return vars[k] }))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { w.Finalize() })
	return w
}

// BenchmarkP is the cost of the RMA fast path (checks, liveness, one store), one goroutine per
// CPU: what the allocation identity and the in-flight count add to it.
func BenchmarkP(b *testing.B) {
	w := benchWorld(b)
	x, err := Alloc[int64](w, 64)
	if err != nil {
		b.Fatal(err)
	}
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			if err := x.P(i&63, int64(i), 0); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
}

func BenchmarkFetchAdd(b *testing.B) {
	w := benchWorld(b)
	x, err := Alloc[int64](w, 64)
	if err != nil {
		b.Fatal(err)
	}
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := AtomicFetchAdd(x, 0, 1, 0); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestFinalizeWithCallsInFlight: Finalize while other goroutines of the PE still call Put, Get,
// P, AMOs and waits. Finalize must wait for the calls in flight and unmap nothing under them; the
// calls after it fail with ErrFinalized. Before the fix the unmap faulted under running copies.
func TestFinalizeWithCallsInFlight(t *testing.T) {
	// 32 MiB copies take milliseconds, so Finalize catches them mid-way; under the race detector,
	// which checks every byte a copy touches, smaller ones do.
	elems, rounds := 4<<20, 3
	if raceEnabled {
		elems, rounds = 1<<17, 2
	}
	for round := 0; round < rounds; round++ {
		jobHeap(t, 2, int64(elems)*8+8<<20, func(w *World) error {
			me, n := w.MyPE(), w.NPEs()
			x, err := Alloc[int64](w, elems)
			if err != nil {
				return err
			}
			const workers = 4
			var wg sync.WaitGroup
			errs := make([]error, workers+1)
			started := make(chan struct{}, workers)
			for g := 0; g < workers; g++ {
				wg.Add(1)
				go func(g int) {
					defer wg.Done()
					buf := make([]int64, x.Len())
					for i := 0; ; i++ {
						pe := (me + i + g) % n
						var err error
						switch (i + g) % 4 {
						case 0:
							err = x.Put(0, buf, pe)
						case 1:
							err = x.Get(0, buf, pe)
						case 2:
							_, err = AtomicFetchAdd(x, i%x.Len(), 1, pe)
						case 3:
							err = x.P(i%x.Len(), int64(i), pe)
						}
						if i == 10 {
							started <- struct{}{}
						}
						if err != nil {
							errs[g] = err
							if i < 10 {
								started <- struct{}{}
							}
							return
						}
					}
				}(g)
			}
			// And one goroutine waiting for a value nobody writes.
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[workers] = WaitUntil(context.Background(), x, 0, CmpEQ, -1)
			}()
			for g := 0; g < workers; g++ {
				<-started
			}
			if err := w.Finalize(); err != nil {
				return fmt.Errorf("Finalize with calls in flight: %w", err)
			}
			wg.Wait()
			for g, err := range errs {
				if !errors.Is(err, ErrFinalized) {
					return fmt.Errorf("goroutine %d ended with %v, want ErrFinalized", g, err)
				}
			}
			return nil
		})
	}
}

// loneRank is the environment of PE 0 of a 1-PE job at srv.
func loneRank(srv *bootstrap.Server, extra map[string]string) func(string) string {
	vars := map[string]string{"ROX_PE": "0", "ROX_NPES": "1", "ROX_LOCAL_PE": "0", "ROX_LOCAL_NPES": "1", "ROX_BOOTSTRAP": "kind-token@" + srv.Addr()}
	for k, v := range extra {
		vars[k] = v
	}
	return func(k string) string { return vars[k] }
}

func wantKind(t *testing.T, what string, err error, kind error, not error, words ...string) {
	t.Helper()
	if !errors.Is(err, kind) {
		t.Errorf("%s: %v, want %v", what, err, kind)
		return
	}
	if not != nil && errors.Is(err, not) {
		t.Errorf("%s: %v is also %v", what, err, not)
	}
	for _, s := range words {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("%s: %q does not say %q", what, err, s)
		}
	}
}

// TestInitErrorKinds: each failure of Init has the kind of what happened (issue 20, case 10): a
// second Init of a PE, a timeout (a too-small timeout included) and a failed mmap used to be
// "a PE failed".
func TestInitErrorKinds(t *testing.T) {
	srv, err := bootstrap.NewServer("127.0.0.1:0", 1, "kind-token")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	getenv := loneRank(srv, nil)
	w, err := Init(context.Background(), WithHeapSize(1<<20), WithTimeout(10*time.Second), withGetenv(getenv))
	if err != nil {
		t.Fatal(err)
	}
	_, err = Init(context.Background(), WithHeapSize(1<<20), WithTimeout(10*time.Second), withGetenv(getenv))
	wantKind(t, "second Init", err, ErrInitialized, ErrPEFailed, "Init on PE 0", "already initialized")
	if err := w.Finalize(); err != nil {
		t.Fatal(err)
	}

	srv2, err := bootstrap.NewServer("127.0.0.1:0", 1, "kind-token")
	if err != nil {
		t.Fatal(err)
	}
	defer srv2.Close()
	_, err = Init(context.Background(), WithHeapSize(1<<20), WithTimeout(time.Nanosecond), withGetenv(loneRank(srv2, nil)))
	wantKind(t, "Init with a 1ns timeout", err, ErrTimeout, ErrPEFailed, "Init on PE 0", "WithTimeout(1ns)")

	// An mmap the kernel refuses: the address-space limit leaves room for the Go runtime but not
	// for the heap.
	if raceEnabled {
		t.Skip("the race detector needs address space of its own")
	}
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_AS, &old); err != nil {
		t.Fatal(err)
	}
	vm := vmSize(t)
	lim := syscall.Rlimit{Cur: uint64(vm + 256<<20), Max: old.Max}
	if err := syscall.Setrlimit(syscall.RLIMIT_AS, &lim); err != nil {
		t.Skipf("cannot limit the address space: %v", err)
	}
	_, err = Init(context.Background(), WithHeapSize(1<<30), WithTimeout(10*time.Second), withGetenv(loneRank(srv2, nil)))
	if e := syscall.Setrlimit(syscall.RLIMIT_AS, &old); e != nil {
		t.Fatal(e)
	}
	wantKind(t, "Init whose heap mmap fails", err, ErrOutOfMemory, ErrPEFailed, "Init on PE 0", "cannot allocate memory")
}

func vmSize(t *testing.T) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skip(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmSize:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	t.Skip("no VmSize")
	return 0
}

// TestCollectiveTimeoutKind: a collective that times out because a PE is late is ErrTimeout.
func TestCollectiveTimeoutKind(t *testing.T) {
	jobWith(t, 2, 1<<20, time.Second, func(w *World) error {
		if w.MyPE() == 1 {
			time.Sleep(2500 * time.Millisecond)
			return nil
		}
		_, err := w.Malloc(64)
		if !errors.Is(err, ErrTimeout) || errors.Is(err, ErrPEFailed) {
			return fmt.Errorf("Malloc with a PE late past the timeout: %v, want ErrTimeout only", err)
		}
		return nil
	}, true)
}

// TestInitValidation (issue 20, case 11): Init's errors name the PE that ROX_PE gives; a heap of
// 0 bytes, or larger than the machine, is refused naming the knob, the value and the limit; a
// zero Sym after Init is not "called before Init".
func TestInitValidation(t *testing.T) {
	srv, err := bootstrap.NewServer("127.0.0.1:0", 1, "kind-token")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	t.Setenv("ROX_HEAP_SIZE", "0")
	_, err = Init(context.Background(), withGetenv(loneRank(srv, map[string]string{"ROX_PE": "3", "ROX_NPES": "4"})))
	wantKind(t, "ROX_HEAP_SIZE=0", err, ErrBadArgument, nil, "Init on PE 3", "ROX_HEAP_SIZE=0", "4096-byte minimum")

	total, err := memTotal("/proc/meminfo")
	if err != nil {
		t.Skip(err)
	}
	big := fmt.Sprintf("%dG", total>>30+1)
	t.Setenv("ROX_HEAP_SIZE", big)
	_, err = Init(context.Background(), withGetenv(loneRank(srv, nil)))
	wantKind(t, "a heap larger than the machine", err, ErrOutOfMemory, ErrPEFailed, "Init on PE 0", "ROX_HEAP_SIZE="+big, "MemTotal", sizeString(total))
	t.Setenv("ROX_HEAP_SIZE", "")

	t.Setenv("ROX_ORDERING", "sideways")
	_, err = Init(context.Background(), withGetenv(loneRank(srv, map[string]string{"ROX_PE": "2", "ROX_NPES": "4"})))
	wantKind(t, "a malformed knob", err, ErrBadArgument, nil, "Init on PE 2", "ROX_ORDERING")
	t.Setenv("ROX_ORDERING", "")

	job(t, 1, func(w *World) error {
		var s Sym[int64]
		err := s.P(0, 1, 0)
		if !errors.Is(err, ErrNotSymmetric) || errors.Is(err, ErrNotInitialized) || !strings.Contains(err.Error(), "P on PE 0") || !strings.Contains(err.Error(), "never allocated") {
			return fmt.Errorf("P on a zero Sym after Init: %v", err)
		}
		return nil
	})
}

// TestCgroupLimit: the memory limit of the process's cgroup (v1 and v2, the smallest on the path
// up) bounds the heaps of a node; a fake /proc and /sys tree stands in for the kernel's.
func TestCgroupLimit(t *testing.T) {
	write := func(root, path, body string) {
		t.Helper()
		p := filepath.Join(root, path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	v2 := t.TempDir()
	write(v2, "proc/meminfo", "MemTotal:       67108864 kB\n")
	write(v2, "proc/self/cgroup", "0::/job/pe\n")
	write(v2, "sys/fs/cgroup/job/pe/memory.max", "max\n")
	write(v2, "sys/fs/cgroup/job/memory.max", "4294967296\n")
	err := checkHostMemory(v2, 3<<30, 2, "ROX_HEAP_SIZE=3G")
	if err == nil || !strings.Contains(err.Error(), "ROX_HEAP_SIZE=3G") || !strings.Contains(err.Error(), "2 PEs") || !strings.Contains(err.Error(), "4 GiB limit") || !strings.Contains(err.Error(), "/sys/fs/cgroup/job/memory.max") {
		t.Errorf("two 3 GiB heaps under a 4 GiB cgroup v2 limit: %v", err)
	}
	if err := checkHostMemory(v2, 1<<30, 2, "ROX_HEAP_SIZE=1G"); err != nil {
		t.Errorf("two 1 GiB heaps under a 4 GiB limit: %v", err)
	}
	v1 := t.TempDir()
	write(v1, "proc/meminfo", "MemTotal:       67108864 kB\n")
	write(v1, "proc/self/cgroup", "5:cpu,cpuacct:/x\n4:memory:/job\n")
	write(v1, "sys/fs/cgroup/memory/job/memory.limit_in_bytes", "1073741824\n")
	write(v1, "sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n")
	if err := checkHostMemory(v1, 2<<30, 1, "WithHeapSize(2147483648)"); err == nil || !strings.Contains(err.Error(), "1 GiB limit") || !strings.Contains(err.Error(), "WithHeapSize") {
		t.Errorf("a 2 GiB heap under a 1 GiB cgroup v1 limit: %v", err)
	}
	if err := checkHostMemory(v1, 128<<30, 1, "ROX_HEAP_SIZE=128G"); err == nil || !strings.Contains(err.Error(), "MemTotal") {
		t.Errorf("a 128 GiB heap on a 64 GiB machine: %v", err)
	}
}

// TestBarrierMismatch: on 5 PEs (three dissemination rounds), PE 3 calls SyncAll where the others
// call BarrierAll: the PEs that hear from it fail naming both calls, none hangs, and the next
// barrier is in step again.
func TestBarrierMismatch(t *testing.T) {
	jobWith(t, 5, 1<<20, 5*time.Second, func(w *World) error {
		var err error
		if w.MyPE() == 3 {
			err = w.SyncAll(context.Background())
		} else {
			err = w.BarrierAll(context.Background())
		}
		if err != nil && (!errors.Is(err, ErrMismatch) || !strings.Contains(err.Error(), "SyncAll") || !strings.Contains(err.Error(), "BarrierAll")) {
			return fmt.Errorf("mismatched barrier: %v", err)
		}
		if w.MyPE() == 4 && err == nil { // PE 4 hears from PE 3 in round 0
			return errors.New("PE 4 did not notice that PE 3 called SyncAll")
		}
		return w.BarrierAll(context.Background())
	}, false)
}

// TestFailedFinalizeIsNoGoodbye (issue 26, 8): PE 0's Finalize fails (PE 1 made another call at
// that point), so PE 0 has not left the job in order: PE 1's own Finalize, which needs PE 0, fails
// at once naming it with ErrPEFailed instead of waiting out the timeout for a PE that counted as
// finalized.
func TestFailedFinalizeIsNoGoodbye(t *testing.T) {
	jobWith(t, 2, 1<<20, 5*time.Second, func(w *World) error {
		if w.MyPE() == 0 {
			if err := w.Finalize(); !errors.Is(err, ErrMismatch) {
				return fmt.Errorf("Finalize against Malloc: %v, want ErrMismatch", err)
			}
			return nil
		}
		if _, err := w.Malloc(64); !errors.Is(err, ErrMismatch) {
			return fmt.Errorf("Malloc against Finalize: %v, want ErrMismatch", err)
		}
		err := w.Finalize()
		if !errors.Is(err, ErrPEFailed) || !strings.Contains(err.Error(), "PE 0") {
			return fmt.Errorf("Finalize after PE 0's failed: %v, want ErrPEFailed naming PE 0", err)
		}
		return nil
	}, false)
}

// TestMisalignedWaitRefused (issue 26, 10): a SymOf view of the heap that starts 2 bytes in is
// refused by the waits, tests and signal reads with the error the AMOs give it (ErrMisaligned,
// naming the call and the offset), instead of waiting on a word no AMO can update.
func TestMisalignedWaitRefused(t *testing.T) {
	job(t, 1, func(w *World) error {
		raw, err := w.Malloc(64)
		if err != nil {
			return err
		}
		b := raw.Local()
		odd, err := SymOf(w, unsafe.Slice((*int32)(unsafe.Pointer(&b[2])), 4))
		if err != nil {
			return err
		}
		oddSig, err := SymOf(w, unsafe.Slice((*uint64)(unsafe.Pointer(&b[4])), 2))
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, amoErr := AtomicFetchAdd(odd, 0, 1, 0)
		_, testErr := Test(odd, 1, CmpEQ, 0)
		_, anyErr := WaitUntilAny(ctx, odd, nil, CmpEQ, 0)
		_, fetchErr := SignalFetch(oddSig, 0)
		_, sigErr := SignalWaitUntil(ctx, oddSig, 0, CmpEQ, 0)
		for _, c := range []struct {
			call string
			err  error
		}{
			{"AtomicFetchAdd", amoErr},
			{"WaitUntil", WaitUntil(ctx, odd, 0, CmpEQ, 0)},
			{"Test", testErr},
			{"WaitUntilAny", anyErr},
			{"SignalFetch", fetchErr},
			{"SignalWaitUntil", sigErr},
			{"PutSignal", PutSignal(odd, 0, []int32{1}, oddSig, 0, 1, SignalSet, 0)},
		} {
			if !errors.Is(c.err, ErrMisaligned) || !strings.Contains(c.err.Error(), c.call+" on PE 0") || !strings.Contains(c.err.Error(), "not a multiple of the") {
				return fmt.Errorf("%s on a misaligned word: %v, want ErrMisaligned naming the call", c.call, c.err)
			}
		}
		return nil
	})
}

// TestLocalAfterFinalize (issue 26, 10): slices over this PE's heap (Local) and a peer's (Ptr)
// taken before Finalize stay safe to use after it, over zero pages, instead of faulting on
// memory Finalize unmapped. The job runs in a child process, so that the fault it would be fails
// this test instead of killing the test binary.
func TestLocalAfterFinalize(t *testing.T) {
	if os.Getenv("ROX_TEST_USE_AFTER_FINALIZE") != "1" {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestLocalAfterFinalize$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), "ROX_TEST_USE_AFTER_FINALIZE=1")
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "used after Finalize: ok") {
			t.Fatalf("the job that uses its slices after Finalize: %v\n%s", err, out)
		}
		return
	}
	job(t, 2, func(w *World) error {
		x, err := Alloc[int64](w, 512)
		if err != nil {
			return err
		}
		local, peer := x.Local(), x.Ptr(1-w.MyPE())
		if local == nil || peer == nil {
			return fmt.Errorf("Local %v, Ptr %v: want both heaps mapped", local == nil, peer == nil)
		}
		local[0] = 1
		if err := w.Finalize(); err != nil {
			return err
		}
		local[1], peer[1] = 2, 3
		if local[0] != 0 || local[1] != 2 || peer[0] != 0 {
			return fmt.Errorf("after Finalize the slices read %d, %d and %d, want 0, 2 and 0 (zero pages)", local[0], local[1], peer[0])
		}
		if x.Local() != nil {
			return errors.New("Local after Finalize is not nil")
		}
		fmt.Printf("PE %d: used after Finalize: ok\n", w.MyPE())
		return nil
	})
}
