package shmem

import (
	"context"
	"fmt"
	"testing"
)

// On the NIC path (every PE on its own node) Init connects nothing; each PE's first operations
// connect it to the peers they name, and InitReport lists Init's phases.
func TestLazyConnectionsOnFirstUse(t *testing.T) {
	const n = 5
	nodeJob(t, n, 1, 8<<20, func(w *World) error {
		me := w.MyPE()
		right, left := (me+1)%n, (me+n-1)%n
		if c := w.Connections(); c != 0 {
			return fmt.Errorf("PE %d holds %d connections after Init, want 0", me, c)
		}
		rep := w.InitReport()
		names := map[string]bool{}
		for _, p := range rep.Phases {
			names[p.Name] = true
		}
		for _, want := range []string{PhaseDevice, PhaseHeap, PhaseBootstrap, PhaseMapping, PhaseTransport, PhaseBarrier} {
			if !names[want] {
				return fmt.Errorf("InitReport %v has no %q phase", rep, want)
			}
		}
		if rep.Transport != "tcp" || rep.Total <= 0 {
			return fmt.Errorf("InitReport %v: want the tcp transport and a total", rep)
		}
		// Every PE counts before any dials it; the allocation is the collective Malloc's local
		// half (the same offset on every PE), as Malloc's header exchange would connect every PE.
		if err := w.boot.Barrier(context.Background()); err != nil {
			return err
		}
		w.allocMu.Lock()
		off, err := w.heap.Alloc(8*1024, 0)
		if err != nil {
			w.allocMu.Unlock()
			return err
		}
		m := Mem{w: w, a: w.newAllocation("Malloc", off, 8*1024), off: off, size: 8 * 1024}
		w.allocMu.Unlock()
		s, err := As[int64](m)
		if err != nil {
			return err
		}
		data := make([]int64, 1000)
		for i := range data {
			data[i] = int64(me)<<20 | int64(i)
		}
		// A fence before the first put to the right neighbour still orders the flag after it.
		if err := w.Fence(); err != nil {
			return err
		}
		if err := s.Put(8, data, right); err != nil {
			return err
		}
		if err := w.Fence(); err != nil {
			return err
		}
		if err := s.P(0, 1, right); err != nil {
			return err
		}
		old, err := AtomicFetchAdd(s, 1023, 1, left) // the first AMO to the left one
		if err != nil {
			return err
		}
		_ = old
		if err := WaitUntil(context.Background(), s, 0, CmpEQ, 1); err != nil {
			return err
		}
		for i, v := range s.Local()[8:1008] {
			if want := int64(left)<<20 | int64(i); v != want {
				return fmt.Errorf("PE %d: word %d from PE %d is %#x after its flag, want %#x", me, i, left, v, want)
			}
		}
		if err := w.Quiet(); err != nil {
			return err
		}
		c := w.Connections()
		// Every PE has counted before BarrierAll's header exchange dials.
		if err := w.boot.Barrier(context.Background()); err != nil {
			return err
		}
		if c != 2 {
			return fmt.Errorf("PE %d holds %d connections after talking to its two neighbours, want 2", me, c)
		}
		return w.BarrierAll(context.Background())
	})
}
