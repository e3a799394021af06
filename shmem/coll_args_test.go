package shmem

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

// TestCollArgsBothForms: every bad argument a collective refuses is refused the same way by its
// blocking form and its stream-ordered one (one check per collective serves both): the same kind
// and the same detail, each naming its own call, and nothing is enqueued.
func TestCollArgsBothForms(t *testing.T) {
	job(t, 2, func(w *World) error {
		ctx := context.Background()
		world := w.TeamWorld()
		st, err := w.NewStream()
		if err != nil {
			return err
		}
		defer st.Destroy()
		a, _ := Alloc[float64](w, 16)
		b, _ := Alloc[float64](w, 16)
		h, _ := Alloc[BFloat16](w, 4)
		a8, _ := a.Slice(0, 8)
		a4, _ := a.Slice(4, 8)
		a2, _ := a.Slice(2, 4)
		b8, _ := b.Slice(0, 8)
		b4, _ := b.Slice(0, 4)
		b3, _ := b.Slice(0, 3)
		block, _ := a.Slice(8*w.MyPE(), 8) // this PE's own block of a
		cases := []struct {
			what                    string
			call, streamCall        string
			blocking, streamOrdered error
			kind                    error
		}{
			{"and on floats", "AllReduce", "AllReduceOnStream",
				AllReduce(ctx, world, b8, a8, OpAnd), AllReduceOnStream(st, world, b8, a8, OpAnd), ErrBadArgument},
			{"prod on bfloat16", "AllReduce", "AllReduceOnStream",
				AllReduce(ctx, world, h, h, OpProd), AllReduceOnStream(st, world, h, h, OpProd), ErrBadArgument},
			{"all-reduce lengths", "AllReduce", "AllReduceOnStream",
				AllReduce(ctx, world, b4, a8, OpSum), AllReduceOnStream(st, world, b4, a8, OpSum), ErrBadArgument},
			{"all-reduce partial overlap", "AllReduce", "AllReduceOnStream",
				AllReduce(ctx, world, a4, a8, OpSum), AllReduceOnStream(st, world, a4, a8, OpSum), ErrBadArgument},
			{"unallocated destination", "AllReduce", "AllReduceOnStream",
				AllReduce(ctx, world, Sym[float64]{}, a8, OpSum), AllReduceOnStream(st, world, Sym[float64]{}, a8, OpSum), ErrNotInitialized},
			{"reduce-scatter lengths", "ReduceScatter", "ReduceScatterOnStream",
				ReduceScatter(ctx, world, b3, a8, OpSum), ReduceScatterOnStream(st, world, b3, a8, OpSum), ErrBadArgument},
			{"reduce-scatter overlap", "ReduceScatter", "ReduceScatterOnStream",
				ReduceScatter(ctx, world, a2, a8, OpMax), ReduceScatterOnStream(st, world, a2, a8, OpMax), ErrBadArgument},
			{"xor on floats, reduce-scatter", "ReduceScatter", "ReduceScatterOnStream",
				ReduceScatter(ctx, world, b4, a8, OpXor), ReduceScatterOnStream(st, world, b4, a8, OpXor), ErrBadArgument},
			{"fcollect size", "FCollect", "AllGatherOnStream",
				FCollect(ctx, world, b8, a8), AllGatherOnStream(st, world, b8, a8), ErrBadArgument},
			{"fcollect overlap", "FCollect", "AllGatherOnStream",
				FCollect(ctx, world, a, a4), AllGatherOnStream(st, world, a, a4), ErrBadArgument},
			{"alltoall in place", "AllToAll", "AllToAllOnStream",
				AllToAll(ctx, world, a8, a8), AllToAllOnStream(st, world, a8, a8), ErrBadArgument},
			{"alltoall lengths", "AllToAll", "AllToAllOnStream",
				AllToAll(ctx, world, b3, a8), AllToAllOnStream(st, world, b3, a8), ErrBadArgument},
			{"broadcast root", "Broadcast", "BroadcastOnStream",
				Broadcast(ctx, world, b8, a8, 2), BroadcastOnStream(st, world, b8, a8, 2), ErrPERange},
			{"broadcast lengths", "Broadcast", "BroadcastOnStream",
				Broadcast(ctx, world, b4, a8, 0), BroadcastOnStream(st, world, b4, a8, 0), ErrBadArgument},
			{"broadcast overlap", "Broadcast", "BroadcastOnStream",
				Broadcast(ctx, world, a4, a8, 0), BroadcastOnStream(st, world, a4, a8, 0), ErrBadArgument},
		}
		for _, c := range cases {
			var be, se *Error
			if !errors.As(c.blocking, &be) || !errors.As(c.streamOrdered, &se) {
				return fmt.Errorf("%s: %s = %v, %s = %v, want two refusals", c.what, c.call, c.blocking, c.streamCall, c.streamOrdered)
			}
			if be.Call != c.call || se.Call != c.streamCall {
				return fmt.Errorf("%s: the errors name %q and %q, want %q and %q", c.what, be.Call, se.Call, c.call, c.streamCall)
			}
			if !errors.Is(be, c.kind) || !errors.Is(se, c.kind) || be.Detail != se.Detail {
				return fmt.Errorf("%s: %s says %v, %s says %v: want the same %v", c.what, c.call, be, c.streamCall, se, c.kind)
			}
		}
		// the in-place forms are accepted by both checks
		if err := fcollectArgs(world, "FCollect", a, block); err != nil {
			return err
		}
		if err := reduceScatterArgs(world, "ReduceScatter", block, a, OpSum); err != nil {
			return err
		}
		// nothing was enqueued
		return w.SyncStream(ctx, st)
	})
}
