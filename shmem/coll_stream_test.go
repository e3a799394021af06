package shmem

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/roxamen/roxamen/kernels"
	"github.com/roxamen/roxamen/shmem/internal/coll"
)

// TestCollOnStreamHost: the stream-ordered collectives on the host backend (streams are
// goroutines). PE 0 enqueues before any other PE has reached the call and returns (the others
// start only after its signal, so a call that waited would time out); every result is checked
// against a reference; bad arguments are refused at once with nothing enqueued; a mismatch
// while the stream runs is reported by SyncStream naming the call, and the failed stream refuses
// the next call.
func TestCollOnStreamHost(t *testing.T) {
	const n, elems = 4, 7
	job(t, n, func(w *World) error {
		ctx := context.Background()
		world := w.TeamWorld()
		st, err := w.NewStream()
		if err != nil {
			return err
		}
		defer st.Destroy()
		if got := world.StreamAlgorithm(CollAllReduce, 64); got != "host" {
			return fmt.Errorf("StreamAlgorithm on the host backend = %q", got)
		}
		_, y, err := world.Split2D(ctx, 2) // y: {0,2}, {1,3}
		if err != nil {
			return err
		}
		src, err := Alloc[int64](w, n*elems)
		if err != nil {
			return err
		}
		sum, _ := Alloc[int64](w, n*elems)
		gath, _ := Alloc[int64](w, 2*n*elems)
		a2a, _ := Alloc[int64](w, n*elems)
		bc, _ := Alloc[int64](w, n*elems)
		rs, _ := Alloc[int64](w, elems)
		go1, _ := Alloc[uint64](w, 1)
		for _, s := range []Sym[int64]{sum, gath, a2a, bc, rs} {
			if s.w == nil {
				return errors.New("allocation failed")
			}
		}
		val := func(pe, i int) int64 { return int64(pe*1000 + i) }
		for i := range n * elems {
			src.Local()[i] = val(w.pe, i)
		}
		if err := w.BarrierAll(ctx); err != nil {
			return err
		}
		if w.pe != 0 {
			if _, err := SignalWaitUntil(ctx, go1, 0, CmpEQ, 1); err != nil {
				return err
			}
		}
		for _, enq := range []func() error{
			func() error { return AllReduceOnStream(st, world, sum, src, OpSum) },
			func() error { return AllGatherOnStream(st, y, gath, src) },
			func() error { return AllToAllOnStream(st, world, a2a, src) },
			func() error { return BroadcastOnStream(st, world, bc, src, 2) },
			func() error { return ReduceScatterOnStream(st, world, rs, src, OpMax) },
			func() error { return y.BarrierOnStream(st) },
		} {
			if err := enq(); err != nil {
				return err
			}
		}
		if w.pe == 0 {
			for pe := 1; pe < n; pe++ {
				if err := PutSignal(go1, 0, nil, go1, 0, 1, SignalSet, pe); err != nil {
					return err
				}
			}
		}
		if err := w.SyncStream(ctx, st); err != nil {
			return err
		}
		for i := range n * elems {
			want := val(0, i) + val(1, i) + val(2, i) + val(3, i)
			if sum.Local()[i] != want {
				return fmt.Errorf("AllReduceOnStream: element %d = %d, want %d", i, sum.Local()[i], want)
			}
			if bc.Local()[i] != val(2, i) {
				return fmt.Errorf("BroadcastOnStream: element %d = %d, want %d", i, bc.Local()[i], val(2, i))
			}
			j, k := i/elems, i%elems // a2a block j came from PE j, its block w.pe
			if want := val(j, w.pe*elems+k); a2a.Local()[i] != want {
				return fmt.Errorf("AllToAllOnStream: element %d = %d, want %d", i, a2a.Local()[i], want)
			}
		}
		for j := range 2 {
			for i := range n * elems {
				if got, want := gath.Local()[j*n*elems+i], val(y.WorldPE(j), i); got != want {
					return fmt.Errorf("AllGatherOnStream on %s: member %d element %d = %d, want %d", y, j, i, got, want)
				}
			}
		}
		for i := range elems {
			if want := val(3, w.pe*elems+i); rs.Local()[i] != want {
				return fmt.Errorf("ReduceScatterOnStream max: element %d = %d, want %d", i, rs.Local()[i], want)
			}
		}

		// bad arguments: refused at once, naming the call
		if err := AllReduceOnStream(st, world, rs, src, OpSum); !errors.Is(err, ErrBadArgument) || !strings.Contains(err.Error(), "AllReduceOnStream") {
			return fmt.Errorf("AllReduceOnStream with unequal lengths = %v, want ErrBadArgument naming the call", err)
		}
		if err := BroadcastOnStream(st, world, bc, src, n); !errors.Is(err, ErrPERange) {
			return fmt.Errorf("BroadcastOnStream with root %d = %v, want ErrPERange", n, err)
		}
		if err := AllGatherOnStream(nil, y, gath, src); !errors.Is(err, ErrBadArgument) {
			return fmt.Errorf("AllGatherOnStream on a nil stream = %v, want ErrBadArgument", err)
		}
		if err := y.Destroy(ctx); err != nil {
			return err
		}
		if err := AllGatherOnStream(st, y, gath, src); !errors.Is(err, ErrTeamDestroyed) {
			return fmt.Errorf("AllGatherOnStream on a destroyed team = %v, want ErrTeamDestroyed", err)
		}
		if err := w.SyncStream(ctx, st); err != nil {
			return fmt.Errorf("a refused call enqueued something: %v", err)
		}

		// a mismatch found while the stream runs: reported by the sync, naming the call
		op := OpSum
		if w.pe == 1 {
			op = OpMin
		}
		if err := AllReduceOnStream(st, world, sum, src, op); err != nil {
			return err
		}
		err = w.SyncStream(ctx, st)
		if !errors.Is(err, ErrMismatch) || !strings.Contains(err.Error(), "AllReduceOnStream") {
			return fmt.Errorf("SyncStream after mismatched ops = %v, want ErrMismatch naming AllReduceOnStream", err)
		}
		if w.pe == 0 {
			t.Logf("PE 0: %v", err)
		}
		if err := AllReduceOnStream(st, world, sum, src, OpSum); err == nil || !strings.Contains(err.Error(), "failed earlier") {
			return fmt.Errorf("AllReduceOnStream on a failed stream = %v, want a refusal", err)
		}
		return w.BarrierAll(ctx)
	})
}

// Every kernel a stream-ordered collective launches is one the collectives' object has.
func TestCollStreamKernelNames(t *testing.T) {
	have := map[string]bool{}
	for _, k := range kernels.CollKernels {
		have[k] = true
	}
	names := []string{"roxk_coll_broadcast", "roxk_coll_fcollect", "roxk_coll_alltoall", "roxk_coll_ce", "roxk_coll_barrier"}
	for k := coll.Int8; k <= coll.Float16; k++ {
		if n, ok := reduceKernels[k]; ok {
			names = append(names, n)
		} else if k != coll.Complex64 && k != coll.Complex128 {
			t.Errorf("%v has no device reduction", k)
		}
	}
	for _, n := range names {
		if !have[n] {
			t.Errorf("shmem launches %s, which kernels.CollKernels lacks", n)
		}
	}
}
