package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/roxamen/roxamen/shmem"
)

func init() { scenarios["worldseq"] = worldSeq }

// worldSeq: the World's calls (BarrierAll, SyncAll, the allocation calls) and TeamWorld's
// collectives are one sequence on the NIC path too. The odd PEs make one call while the even PEs
// make another; every PE's call fails with ErrMismatch naming both calls (not ErrTimeout after
// ROX_TIMEOUT), and the calls after are in step. Each PE prints its first error, for the test.
func worldSeq(ctx context.Context, w *shmem.World) error {
	me, n := w.MyPE(), w.NPEs()
	world := w.TeamWorld()
	x, err := shmem.Alloc[int64](w, 4)
	if err != nil {
		return err
	}
	y, err := shmem.Alloc[int64](w, 4)
	if err != nil {
		return err
	}
	for i := range x.Local() {
		x.Local()[i] = int64(me + 1)
	}
	spare, err := w.Malloc(64)
	if err != nil {
		return err
	}
	sum := func() error { return shmem.AllReduce(ctx, world, y, x, shmem.OpSum) }
	barrier := func() error { return w.BarrierAll(ctx) }
	odd := me%2 == 1
	for i, c := range []struct {
		calls [2]string // the odd PEs' call; the even PEs'
		run   [2]func() error
	}{
		{[2]string{"BarrierAll", "AllReduce"}, [2]func() error{barrier, sum}},
		{[2]string{"Malloc", "AllReduce"}, [2]func() error{func() error { _, err := w.Malloc(64); return err }, sum}},
		{[2]string{"Broadcast", "SyncAll"}, [2]func() error{func() error { return shmem.Broadcast(ctx, world, y, x, 0) }, func() error { return w.SyncAll(ctx) }}},
		{[2]string{"Free", "BarrierAll"}, [2]func() error{func() error { return w.Free(spare) }, barrier}},
	} {
		mine, other := 1, 0
		if odd {
			mine, other = 0, 1
		}
		err := c.run[mine]()
		if !errors.Is(err, shmem.ErrMismatch) || !strings.Contains(err.Error(), c.calls[mine]) || !strings.Contains(err.Error(), c.calls[other]) {
			return fmt.Errorf("%s against %s: got %v, want ErrMismatch naming both calls", c.calls[0], c.calls[1], err)
		}
		if i == 0 {
			fmt.Printf("worldseq: PE %d: %v\n", me, err)
		}
	}
	if err := sum(); err != nil {
		return fmt.Errorf("AllReduce after the mismatches: %w", err)
	}
	if got, want := y.Local()[0], int64(n*(n+1)/2); got != want {
		return fmt.Errorf("the sum after the mismatches is %d, want %d", got, want)
	}
	m, err := w.Malloc(64)
	if err != nil {
		return fmt.Errorf("Malloc after the mismatches: %w", err)
	}
	if err := barrier(); err != nil {
		return fmt.Errorf("BarrierAll after the mismatches: %w", err)
	}
	return w.Free(m)
}
