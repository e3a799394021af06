package shmem

import (
	"context"
	"fmt"
	"math/bits"

	"github.com/roxamen/roxamen/nic"
)

// barrierState is a dissemination barrier over the symmetric heap: in round k each PE adds one to
// a counter of PE (me + 2^k) mod n and waits for its own round-k counter to reach the barrier's
// epoch. Counters only grow, so nothing is reset between barriers; a round-k counter of PE j is
// bumped only by PE j - 2^k, which sends its signal for epoch e+1 only after that for epoch e, so
// "counter >= e" means the epoch-e signal has arrived.
type barrierState struct {
	flags  Sym[uint64] // one counter per round, each on its own cache line
	rounds int
	epoch  uint64
}

const flagStride = 8 // uint64s per cache line

func (w *World) initBarrier() error {
	rounds := 0
	if w.npes > 1 {
		rounds = bits.Len(uint(w.npes - 1))
	}
	w.allocMu.Lock()
	defer w.allocMu.Unlock()
	// Reserved before any user allocation, so at the same offset on every PE.
	off, err := w.heap.Alloc(uint64(max(rounds, 1)*flagStride*8), 0)
	if err != nil {
		return err
	}
	n := max(rounds, 1) * flagStride
	a := &allocation{call: "the barrier", off: off, size: n * 8} // never freed, never in allocs
	w.barrier = barrierState{flags: Sym[uint64]{w: w, a: a, off: off, n: n}, rounds: rounds}
	return nil
}

// BarrierAll completes this PE's operations (as Quiet) and waits until every PE has reached the
// barrier (shmem_barrier_all). It returns an error naming the PE when a PE dies, and ErrTimeout
// after ROX_TIMEOUT.
func (w *World) BarrierAll(ctx context.Context) error {
	if err := w.Quiet(); err != nil {
		return err
	}
	return w.sync(ctx, "BarrierAll")
}

// SyncAll waits until every PE has reached it, without completing outstanding operations
// (shmem_sync_all).
func (w *World) SyncAll(ctx context.Context) error {
	if err := w.check("SyncAll"); err != nil {
		return err
	}
	return w.sync(ctx, "SyncAll")
}

func (w *World) sync(ctx context.Context, call string) error {
	if err := w.enter(call); err != nil {
		return err
	}
	defer w.leave()
	b := &w.barrier
	b.epoch++
	e := b.epoch
	for k := 0; k < b.rounds; k++ {
		peer := (w.pe + 1<<k) % w.npes
		if _, err := w.amo(call, peer, nic.AMOFetchAdd, 8, b.flags.off+uint64(k*flagStride*8), 1, 0); err != nil {
			return err
		}
		sp := w.spin(ctx, call)
		for load(b.flags, k*flagStride) < e {
			if err := sp.next(func() string {
				return fmt.Sprintf("PE %d to arrive (barrier %d, round %d)", (w.pe-1<<k+w.npes*2)%w.npes, e, k)
			}); err != nil {
				return err
			}
		}
	}
	return nil
}
