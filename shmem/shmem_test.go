package shmem

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/roxamen/roxamen/tools/testjob"
)

// job starts n PEs as goroutines of this process: each World maps the others' heaps exactly as
// separate processes would (memfd), and they meet at a real rendezvous server.
func job(t *testing.T, n int, body func(w *World) error) { t.Helper(); jobHeap(t, n, 4<<20, body) }

// jobHeap is job with a heap of heapSize bytes per PE.
func jobHeap(t *testing.T, n int, heapSize int64, body func(w *World) error) {
	t.Helper()
	jobWith(t, n, heapSize, 20*time.Second, body, false)
}

// jobWith is job with a heap of heapSize bytes per PE and a timeout; with noFinalize the PEs
// return without Finalize (a body that leaves the PEs out of step).
func jobWith(t *testing.T, n int, heapSize int64, timeout time.Duration, body func(w *World) error, noFinalize bool) {
	t.Helper()
	runJob(t, n, 0, heapSize, timeout, body, noFinalize)
}

// runJob runs job, jobWith, jobOpts and nodeJob: n PEs with heaps of heapSize bytes and
// ROX_TIMEOUT timeout, perNode of them a node named ROX_NODE=node<i> (perNode 0: one node,
// ROX_NODE unset), launched by testjob.InProcess; opts are added to Init's.
func runJob(t *testing.T, n, perNode int, heapSize int64, timeout time.Duration, body func(w *World) error, noFinalize bool, opts ...Option) {
	t.Helper()
	testjob.InProcess{NPEs: n, PerNode: perNode}.Run(t, func(pe int, getenv func(string) string) error {
		w, err := Init(context.Background(), append([]Option{WithHeapSize(heapSize), WithTimeout(timeout), withGetenv(getenv)}, opts...)...)
		if err != nil {
			return err
		}
		err = body(w)
		if err != nil {
			err = fmt.Errorf("PE %d: %w", pe, err)
		}
		if noFinalize {
			w.closed.Store(true)
			w.teardown()
			return err
		}
		if ferr := w.Finalize(); ferr != nil && !errors.Is(ferr, ErrFinalized) && err == nil {
			err = ferr
		}
		return err
	})
}

func TestConcurrentRMAAndAtomics(t *testing.T) {
	const n, workers, adds = 4, 4, 500
	job(t, n, func(w *World) error {
		ctx := context.Background()
		ctr, err := Alloc[int64](w, 1)
		if err != nil {
			return err
		}
		box, err := Alloc[int64](w, n*workers)
		if err != nil {
			return err
		}
		// Several goroutines of every PE issue AMOs and puts at once.
		var wg sync.WaitGroup
		errc := make(chan error, workers)
		for g := 0; g < workers; g++ {
			wg.Add(1)
			go func(g int) {
				defer wg.Done()
				for i := 0; i < adds; i++ {
					if err := AtomicAdd(ctr, 0, 1, (w.MyPE()+i)%n); err != nil {
						errc <- err
						return
					}
				}
				for pe := 0; pe < n; pe++ {
					if err := box.P(w.MyPE()*workers+g, int64(w.MyPE()*100+g), pe); err != nil {
						errc <- err
						return
					}
				}
			}(g)
		}
		wg.Wait()
		close(errc)
		if err := <-errc; err != nil {
			return err
		}
		if err := w.BarrierAll(ctx); err != nil {
			return err
		}
		if got := ctr.Local()[0]; got != workers*adds {
			return fmt.Errorf("counter %d, want %d", got, workers*adds)
		}
		for pe := 0; pe < n; pe++ {
			for g := 0; g < workers; g++ {
				if v := box.Local()[pe*workers+g]; v != int64(pe*100+g) {
					return fmt.Errorf("box[%d] = %d", pe*workers+g, v)
				}
			}
		}
		return nil
	})
}

func TestBarrierManyTimes(t *testing.T) {
	job(t, 3, func(w *World) error {
		x, err := Alloc[int64](w, 1)
		if err != nil {
			return err
		}
		for i := int64(1); i <= 300; i++ {
			// Everyone writes its round into the next PE; after the barrier it must be there.
			if err := x.P(0, i, (w.MyPE()+1)%w.NPEs()); err != nil {
				return err
			}
			if err := w.BarrierAll(context.Background()); err != nil {
				return err
			}
			if got := x.Local()[0]; got != i {
				return fmt.Errorf("round %d: saw %d after the barrier", i, got)
			}
			if err := w.SyncAll(context.Background()); err != nil {
				return err
			}
		}
		return nil
	})
}

func TestMismatchedAllocation(t *testing.T) {
	job(t, 2, func(w *World) error {
		_, err := w.Malloc(64 * (w.MyPE() + 1))
		if !errors.Is(err, ErrMismatch) {
			return fmt.Errorf("Malloc with different sizes: %v, want ErrMismatch", err)
		}
		other := 1 - w.MyPE()
		want := fmt.Sprintf("PE %d asked for %d bytes, PE %d for %d", w.MyPE(), 64*(w.MyPE()+1), other, 64*(other+1))
		if !strings.Contains(err.Error(), want) {
			return fmt.Errorf("error %q does not say %q", err, want)
		}
		// Nothing was allocated: the next agreed allocation starts where it would have anyway.
		a, err := w.Malloc(64)
		if err != nil {
			return err
		}
		b, err := w.Malloc(64)
		if err != nil {
			return err
		}
		if b.Offset() != a.Offset()+64 {
			return fmt.Errorf("allocations at %d and %d: the failed Malloc leaked space", a.Offset(), b.Offset())
		}
		return nil
	})
}

func TestHeapExhausted(t *testing.T) {
	job(t, 2, func(w *World) error {
		_, err := w.Malloc(8 << 20)
		if !errors.Is(err, ErrOutOfMemory) || !strings.Contains(err.Error(), "Malloc on PE") {
			return fmt.Errorf("Malloc past the heap: %v", err)
		}
		return nil
	})
}

func TestBeforeInitAndAfterFinalize(t *testing.T) {
	var w *World
	if _, err := w.Malloc(8); !errors.Is(err, ErrNotInitialized) || !strings.Contains(err.Error(), "Malloc") {
		t.Errorf("Malloc before Init: %v", err)
	}
	if err := w.BarrierAll(context.Background()); !errors.Is(err, ErrNotInitialized) {
		t.Errorf("BarrierAll before Init: %v", err)
	}
	var s Sym[int64]
	if err := s.P(0, 1, 0); !errors.Is(err, ErrNotInitialized) {
		t.Errorf("P on a zero Sym: %v", err)
	}

	job(t, 1, func(w *World) error {
		x, err := Alloc[int64](w, 4)
		if err != nil {
			return err
		}
		if err := w.Finalize(); err != nil {
			return err
		}
		if err := x.P(0, 1, 0); !errors.Is(err, ErrFinalized) || !strings.Contains(err.Error(), "P on PE 0") {
			return fmt.Errorf("P after Finalize: %v", err)
		}
		if err := w.Quiet(); !errors.Is(err, ErrFinalized) {
			return fmt.Errorf("Quiet after Finalize: %v", err)
		}
		if _, err := AtomicFetchAdd(x, 0, 1, 0); !errors.Is(err, ErrFinalized) {
			return fmt.Errorf("AtomicFetchAdd after Finalize: %v", err)
		}
		if x.Local() != nil {
			return errors.New("Local after Finalize is not nil")
		}
		// The job helper finalizes again: that must be an error too, which it reports.
		return nil
	})
}

func TestSinglePEWithoutLauncher(t *testing.T) {
	w, err := Init(context.Background(), WithHeapSize(1<<20), withGetenv(func(string) string { return "" }))
	if err != nil {
		t.Fatal(err)
	}
	if w.MyPE() != 0 || w.NPEs() != 1 {
		t.Fatalf("a lone process is PE %d of %d, want 0 of 1", w.MyPE(), w.NPEs())
	}
	x, err := Alloc[uint32](w, 2)
	if err != nil {
		t.Fatal(err)
	}
	if old, err := AtomicFetchAdd(x, 1, 5, 0); err != nil || old != 0 {
		t.Fatalf("fetch_add: %d, %v", old, err)
	}
	if err := x.P(0, 1, 1); !errors.Is(err, ErrPERange) || !strings.Contains(err.Error(), "target PE 1") {
		t.Fatalf("P to PE 1 of 1: %v", err)
	}
	if err := w.Finalize(); err != nil {
		t.Fatal(err)
	}
}

func TestWaitTimesOutAndHonoursContext(t *testing.T) {
	job(t, 1, func(w *World) error {
		x, err := Alloc[int64](w, 1)
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		err = WaitUntil(ctx, x, 0, CmpEQ, 1)
		if !errors.Is(err, ErrTimeout) || !strings.Contains(err.Error(), "WaitUntil on PE 0") {
			return fmt.Errorf("WaitUntil with a 50ms context: %v", err)
		}
		if err := WaitUntil(context.Background(), x, 0, Cmp(42), 1); !errors.Is(err, ErrBadArgument) {
			return fmt.Errorf("WaitUntil with a bad comparison: %v", err)
		}
		return nil
	})
}
