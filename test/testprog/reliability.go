package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/roxamen/roxamen/shmem"
)

// Reliability scenarios: each fault of issue 20 that a PE can show, as a scenario that fails
// while the fault is there.
func init() {
	scenarios["stale"] = stale
	scenarios["finalizerace"] = finalizeRace
	scenarios["collrace"] = collRace
	scenarios["killrma"] = killRMA
	scenarios["exitzero"] = exitZero
	scenarios["timeoutkind"] = timeoutKind
}

// expect checks that err is of kind and names every one of words.
func expect(err error, kind error, words ...string) error {
	if err == nil {
		return fmt.Errorf("%s: no error, want %v", words[0], kind)
	}
	if !errors.Is(err, kind) {
		return fmt.Errorf("%s: error %q is not %q", words[0], err, kind)
	}
	for _, s := range words {
		if !strings.Contains(err.Error(), s) {
			return fmt.Errorf("%s: error %q does not name %q", words[0], err, s)
		}
	}
	return nil
}

// stale: a Sym or Mem used after Free (or after Realloc moved it on) fails with an error naming
// the call, the PE and the stale allocation, and writes nothing into the allocation that reuses
// its space, on this PE or the other.
func stale(ctx context.Context, w *shmem.World) error {
	me, n := w.MyPE(), w.NPEs()
	peer := (me + 1) % n
	x, err := shmem.Alloc[int64](w, 8)
	if err != nil {
		return err
	}
	sig, err := shmem.Alloc[uint64](w, 1)
	if err != nil {
		return err
	}
	if err := w.Free(x.Mem()); err != nil {
		return err
	}
	y, err := shmem.Alloc[int64](w, 8) // reuses x's space
	if err != nil {
		return err
	}
	if y.Mem().Offset() != x.Mem().Offset() {
		return fmt.Errorf("the allocation after Free is at offset %d, not at the freed %d: the test proves nothing", y.Mem().Offset(), x.Mem().Offset())
	}
	for i := range y.Local() {
		y.Local()[i] = 1000 + int64(i)
	}
	if err := w.BarrierAll(ctx); err != nil {
		return err
	}
	pe := fmt.Sprintf("on PE %d", me)
	what := "Alloc of 64 bytes at heap offset"
	checks := []error{
		expect(x.Put(0, []int64{-1}, peer), shmem.ErrFreed, "Put", pe, what, "Free"),
		expect(x.PutNBI(0, []int64{-1}, peer), shmem.ErrFreed, "PutNBI", pe, what),
		expect(x.Get(0, make([]int64, 1), peer), shmem.ErrFreed, "Get", pe, what),
		expect(x.P(1, -1, peer), shmem.ErrFreed, "P", pe, what),
		expect(func() error { _, err := x.G(0, peer); return err }(), shmem.ErrFreed, "G", pe, what),
		expect(func() error { _, err := shmem.AtomicFetchAdd(x, 2, 1, peer); return err }(), shmem.ErrFreed, "AtomicFetchAdd", pe, what),
		expect(shmem.AtomicSet(x, 3, 5, me), shmem.ErrFreed, "AtomicSet", pe, what),
		expect(shmem.PutSignal(x, 0, []int64{-1}, sig, 0, 1, shmem.SignalSet, peer), shmem.ErrFreed, "PutSignal", pe, what),
		expect(x.IPut(0, 1, []int64{-1, -1}, 1, 2, peer), shmem.ErrFreed, "IPut", pe, what),
		expect(func() error { _, err := x.Slice(0, 1); return err }(), shmem.ErrFreed, "Slice", pe, what),
		expect(func() error { _, err := shmem.Test(x, 0, shmem.CmpEQ, 0); return err }(), shmem.ErrFreed, "Test", pe, what),
		expect(w.Free(x.Mem()), shmem.ErrFreed, "Free", pe, what),
		expect(func() error { _, err := w.Realloc(x.Mem(), 128); return err }(), shmem.ErrFreed, "Realloc", pe, what),
	}
	if x.Local() != nil || x.Ptr(me) != nil {
		checks = append(checks, errors.New("Local or Ptr of a freed Sym is not nil"))
	}
	// Realloc retires the allocation it replaces, even where it stays in place.
	m, err := w.Malloc(64)
	if err != nil {
		return err
	}
	m2, err := w.Realloc(m, 32)
	if err != nil {
		return err
	}
	checks = append(checks,
		expect(func() error { _, err := w.Realloc(m, 16); return err }(), shmem.ErrFreed, "Realloc", pe, "Malloc of 64 bytes", "Realloc"),
		expect(func() error { _, err := shmem.As[uint64](m); return err }(), shmem.ErrFreed, "As", pe, "Malloc of 64 bytes"))
	for _, c := range checks {
		if c != nil {
			return c
		}
	}
	if err := w.Free(m2); err != nil {
		return err
	}
	if err := w.BarrierAll(ctx); err != nil {
		return err
	}
	for i, v := range y.Local() {
		if v != 1000+int64(i) {
			return fmt.Errorf("element %d of the allocation that reuses the freed space is %d, want %d: a stale call wrote into it", i, v, 1000+i)
		}
	}
	if v := sig.Local()[0]; v != 0 {
		return fmt.Errorf("the signal of a stale PutSignal was set to %d", v)
	}
	return nil
}

// finalizeRace: Finalize while other goroutines still call Put, Get, P and AMOs on this PE's heap
// and the peer's. Finalize waits for the calls in flight; every call after it fails with
// ErrFinalized, and none faults on unmapped memory. The scenario ends the PE itself, since it has
// already finalized.
func finalizeRace(ctx context.Context, w *shmem.World) error {
	me, n := w.MyPE(), w.NPEs()
	x, err := shmem.Alloc[int64](w, 4<<20) // 32 MiB: copies of milliseconds, caught mid-way
	if err != nil {
		return err
	}
	if x.Ptr((me+1)%n) == nil {
		// The NIC path: a 1 MiB transfer already takes longer than a 32 MiB copy.
		if x, err = x.Slice(0, 1<<17); err != nil {
			return err
		}
	}
	const workers = 4
	var wg sync.WaitGroup
	var started sync.WaitGroup
	errs := make([]error, workers)
	for g := 0; g < workers; g++ {
		wg.Add(1)
		started.Add(1)
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
					_, err = shmem.AtomicFetchAdd(x, i%x.Len(), 1, pe)
				case 3:
					err = x.P(i%x.Len(), int64(i), pe)
				}
				if i == 100 {
					started.Done()
				}
				if err != nil {
					if i < 100 {
						started.Done()
					}
					errs[g] = err
					return
				}
			}
		}(g)
	}
	started.Wait()
	time.Sleep(time.Duration(me) * time.Millisecond)
	if err := w.Finalize(); err != nil {
		return fmt.Errorf("Finalize with calls in flight: %w", err)
	}
	wg.Wait()
	for g, err := range errs {
		if !errors.Is(err, shmem.ErrFinalized) {
			return fmt.Errorf("goroutine %d: the call that ended it failed with %v, want ErrFinalized", g, err)
		}
	}
	if me == 0 {
		fmt.Printf("finalizerace: ok on %d PEs\n", n)
	}
	os.Exit(0)
	return nil
}

// collRace: a collective call made while another goroutine's is in progress is refused with
// ErrConcurrent naming both calls, and the one in progress completes as on every other PE; PEs
// that make different collective calls at the same point of their sequence get ErrMismatch naming
// both PEs and both calls. Runs on 2 PEs.
func collRace(ctx context.Context, w *shmem.World) error {
	me := w.MyPE()
	other := 1 - me
	pe := fmt.Sprintf("on PE %d", me)
	// The PE named first starts a call that cannot complete before the other PE joins 300 ms later;
	// meanwhile two more goroutines try collectives of their own.
	concurrent := func(first int, call string, start func() error) error {
		if me != first {
			time.Sleep(300 * time.Millisecond)
			return start()
		}
		done := make(chan error, 1)
		go func() { done <- start() }()
		time.Sleep(100 * time.Millisecond)
		_, errM := w.Malloc(64)
		errB := w.BarrierAll(ctx)
		if err := <-done; err != nil {
			return fmt.Errorf("the %s in progress: %w", call, err)
		}
		if err := expect(errM, shmem.ErrConcurrent, "Malloc", pe, call+" is in progress"); err != nil {
			return err
		}
		return expect(errB, shmem.ErrConcurrent, "BarrierAll", pe, call+" is in progress")
	}
	var m shmem.Mem
	if err := concurrent(0, "Malloc", func() (err error) { m, err = w.Malloc(128); return err }); err != nil {
		return err
	}
	if err := concurrent(1, "BarrierAll", func() error { return w.BarrierAll(ctx) }); err != nil {
		return err
	}
	// Both PEs agree on where they are: the refused calls took no place in the sequence.
	m2, err := w.Malloc(64)
	if err != nil {
		return err
	}
	if m2.Offset() != m.Offset()+128 {
		return fmt.Errorf("the next allocation is at %d, want %d", m2.Offset(), m.Offset()+128)
	}
	// Different calls at the same point: each PE names both.
	if me == 0 {
		err = w.BarrierAll(ctx)
	} else {
		err = w.SyncAll(ctx)
	}
	calls := []string{"BarrierAll", "SyncAll"}
	if err := expect(err, shmem.ErrMismatch, calls[me], fmt.Sprintf("PE %d's collective call", me), fmt.Sprintf("PE %d's is %s", other, calls[other])); err != nil {
		return err
	}
	if me == 0 {
		_, err = w.Malloc(64)
	} else {
		err = w.Free(m2)
	}
	calls = []string{"Malloc", "Free"}
	if err := expect(err, shmem.ErrMismatch, calls[me], fmt.Sprintf("PE %d's is %s", other, calls[other])); err != nil {
		return err
	}
	// And the sequence goes on in step.
	if err := w.Free(m2); err != nil {
		return err
	}
	return w.BarrierAll(ctx)
}

// killRMA: the last PE SIGKILLs itself while PE 0 keeps issuing fetch-adds, puts and gets to it.
// Once the job knows the PE is dead, every RMA to it fails with ErrPEFailed naming it; PE 0 says
// so on stdout (the job fails anyway: a PE died) and how many calls it made.
func killRMA(ctx context.Context, w *shmem.World) error {
	me, n := w.MyPE(), w.NPEs()
	x, err := shmem.Alloc[int64](w, 8)
	if err != nil {
		return err
	}
	if err := w.BarrierAll(ctx); err != nil {
		return err
	}
	dead := n - 1
	if me == dead {
		time.Sleep(200 * time.Millisecond)
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {}
	}
	if me != 0 {
		select {} // roxrun ends the job
	}
	start := time.Now()
	for i := 0; ; i++ {
		var err error
		switch i % 3 {
		case 0:
			_, err = shmem.AtomicFetchAdd(x, 0, 1, dead)
		case 1:
			err = x.Put(1, []int64{int64(i)}, dead)
		case 2:
			_, err = x.G(1, dead)
		}
		if err == nil {
			continue
		}
		if err := expect(err, shmem.ErrPEFailed, fmt.Sprintf("on PE %d", me), fmt.Sprintf("PE %d", dead)); err != nil {
			return err
		}
		fmt.Printf("killrma: RMA to the dead PE %d failed after %d calls in %v: %v\n", dead, i, time.Since(start).Round(time.Millisecond), err)
		os.Exit(3)
	}
}

// exitZero: PE 0 ends the job with GlobalExit(0) while the others wait: every PE exits 0, and so
// does roxrun.
func exitZero(ctx context.Context, w *shmem.World) error {
	x, err := shmem.Alloc[int64](w, 1)
	if err != nil {
		return err
	}
	if w.MyPE() == 0 {
		fmt.Println("exitzero: PE 0 calls GlobalExit(0)")
		time.Sleep(100 * time.Millisecond)
		w.GlobalExit(0)
	}
	return shmem.WaitUntil(ctx, x, 0, shmem.CmpEQ, 1)
}

// timeoutKind: a collective that times out because a PE is late fails with ErrTimeout, not
// ErrPEFailed; a second Init of a PE fails with ErrInitialized. Run with ROX_TIMEOUT=1s.
func timeoutKind(ctx context.Context, w *shmem.World) error {
	me := w.MyPE()
	pe := fmt.Sprintf("on PE %d", me)
	_, err := shmem.Init(ctx)
	if err := expect(err, shmem.ErrInitialized, "Init", pe, "already initialized"); err != nil {
		return err
	}
	if errors.Is(err, shmem.ErrPEFailed) {
		return fmt.Errorf("the second Init says a PE failed: %v", err)
	}
	if err := w.BarrierAll(ctx); err != nil {
		return err
	}
	if me == 1 {
		time.Sleep(3 * time.Second) // past ROX_TIMEOUT: PE 0's Malloc gives up on it
		os.Exit(0)
	}
	_, err = w.Malloc(64)
	if err := expect(err, shmem.ErrTimeout, "Malloc", pe, "timed out"); err != nil {
		return err
	}
	if errors.Is(err, shmem.ErrPEFailed) {
		return fmt.Errorf("a timeout says a PE failed: %v", err)
	}
	fmt.Printf("timeoutkind: ok: %v\n", err)
	os.Exit(0)
	return nil
}
