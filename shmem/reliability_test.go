package shmem

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

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
			if err := x.P(0, i&63, int64(i)); err != nil {
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
	for round := 0; round < 3; round++ {
		jobHeap(t, 2, 40<<20, func(w *World) error {
			me, n := w.MyPE(), w.NPEs()
			x, err := Alloc[int64](w, 4<<20) // 32 MiB: copies of milliseconds, caught mid-way
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
							err = x.Put(pe, 0, buf)
						case 1:
							err = x.Get(pe, 0, buf)
						case 2:
							_, err = AtomicFetchAdd(x, i%x.Len(), 1, pe)
						case 3:
							err = x.P(pe, i%x.Len(), int64(i))
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
