package shmem

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"
)

// errHas checks that err is of kind and its message holds every part.
func errHas(err, kind error, parts ...string) error {
	if !errors.Is(err, kind) {
		return fmt.Errorf("got %v, want %v", err, kind)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			return fmt.Errorf("%q does not say %q", err, p)
		}
	}
	return nil
}

// Mismatched arguments across PEs: every PE gets an error naming the call, both PEs and both
// values, the destinations are untouched, and the team works afterwards.
func TestCollMismatch(t *testing.T) {
	nodeJob(t, 3, 0, 8<<20, func(w *World) error {
		ctx := context.Background()
		me := w.MyPE()
		world := w.TeamWorld()
		src, _ := Alloc[int32](w, 100000)
		dst, _ := Alloc[int32](w, 100000)
		fsrc, _ := Alloc[float32](w, 4)
		for i := range dst.Local() {
			dst.Local()[i] = -7
		}
		untouched := func() error {
			for i, v := range dst.Local() {
				if v != -7 {
					return fmt.Errorf("destination element %d written (%d) by a failed call", i, v)
				}
			}
			return nil
		}
		// sizes: PE 2 reduces 100000 elements (a different algorithm), the others 4
		n := 4
		if me == 2 {
			n = 100000
		}
		s, _ := src.Slice(0, n)
		d, _ := dst.Slice(0, n)
		err := AllReduce(ctx, world, d, s, OpSum)
		want := []string{"AllReduce", fmt.Sprintf("PE %d", me)}
		if me == 2 {
			want = append(want, "100000 elements", "PE 0", "has 4")
		} else {
			want = append(want, "4 elements", "PE 2", "has 100000")
		}
		if e := errHas(err, ErrMismatch, want...); e != nil {
			return fmt.Errorf("sizes: %w", e)
		}
		if err := untouched(); err != nil {
			return err
		}
		// operations
		s4, _ := src.Slice(0, 4)
		d4, _ := dst.Slice(0, 4)
		op := OpSum
		if me == 1 {
			op = OpMax
		}
		if e := errHas(AllReduce(ctx, world, d4, s4, op), ErrMismatch, "AllReduce", "operation"); e != nil {
			return fmt.Errorf("ops: %w", e)
		}
		// element types: PE 0 reduces float32
		if me == 0 {
			err = AllReduce(ctx, world, fsrc, fsrc, OpSum)
		} else {
			err = AllReduce(ctx, world, d4, s4, OpSum)
		}
		if e := errHas(err, ErrMismatch, "element type", "float32", "int32"); e != nil {
			return fmt.Errorf("types: %w", e)
		}
		// roots
		if e := errHas(Broadcast(ctx, world, d4, s4, me%2), ErrMismatch, "Broadcast", "root"); e != nil {
			return fmt.Errorf("roots: %w", e)
		}
		// calls: PE 1 calls FCollect while the others call Broadcast
		if me == 1 {
			d12, _ := dst.Slice(0, 12)
			err = FCollect(ctx, world, d12, s4)
		} else {
			err = Broadcast(ctx, world, d4, s4, 0)
		}
		if e := errHas(err, ErrMismatch, "FCollect", "Broadcast"); e != nil {
			return fmt.Errorf("calls: %w", e)
		}
		if err := untouched(); err != nil {
			return err
		}
		// the team still works
		for i := range s4.Local() {
			s4.Local()[i] = int32(me + i)
		}
		if err := AllReduce(ctx, world, d4, s4, OpSum); err != nil {
			return err
		}
		if d4.Local()[1] != 0+1+1+1+2+1 {
			return fmt.Errorf("sum after the mismatches: %v", d4.Local())
		}
		return nil
	})
}

// Bad arguments on one PE: clear errors, before anything moves.
func TestCollBadArguments(t *testing.T) {
	nodeJob(t, 2, 0, 8<<20, func(w *World) error {
		ctx := context.Background()
		world := w.TeamWorld()
		a, _ := Alloc[float64](w, 16)
		b, _ := Alloc[float64](w, 16)
		h, _ := Alloc[BFloat16](w, 4)
		a8, _ := a.Slice(0, 8)
		a4, _ := a.Slice(4, 8)
		b8, _ := b.Slice(0, 8)
		checks := []struct {
			what string
			err  error
			kind error
			says []string
		}{
			{"and on floats", AllReduce(ctx, world, b8, a8, OpAnd), ErrBadArgument, []string{"AllReduce", "and on float64"}},
			{"prod on bfloat16", AllReduce(ctx, world, h, h, OpProd), ErrBadArgument, []string{"prod on bfloat16"}},
			{"partial overlap", AllReduce(ctx, world, a4, a8, OpSum), ErrBadArgument, []string{"overlaps"}},
			{"alltoall in place", AllToAll(ctx, world, a8, a8), ErrBadArgument, []string{"AllToAll", "disjoint"}},
			{"fcollect size", FCollect(ctx, world, b8, a8), ErrBadArgument, []string{"FCollect", "want 16"}},
			{"root", Broadcast(ctx, world, b8, a8, 2), ErrPERange, []string{"root 2"}},
			{"unallocated", AllReduce(ctx, world, Sym[float64]{}, a8, OpSum), ErrNotInitialized, []string{"destination"}},
		}
		for _, c := range checks {
			if e := errHas(c.err, c.kind, c.says...); e != nil {
				return fmt.Errorf("%s: %w", c.what, e)
			}
		}
		if err := bothFormsRefuse(w, a, b, h); err != nil {
			return err
		}
		pair, err := world.SplitStrided(ctx, 0, 1, 2)
		if err != nil {
			return err
		}
		if err := pair.Destroy(ctx); err != nil {
			return err
		}
		if e := errHas(AllReduce(ctx, pair, b8, a8, OpSum), ErrTeamDestroyed, "AllReduce", "destroyed"); e != nil {
			return e
		}
		solo, err := world.SplitStrided(ctx, 1, 1, 1)
		if err != nil {
			return err
		}
		if w.MyPE() == 0 {
			if e := errHas(AllReduce(ctx, solo, b8, a8, OpSum), ErrNotInTeam, "AllReduce"); e != nil {
				return fmt.Errorf("PE outside the team: %w", e)
			}
		} else if err := solo.Destroy(ctx); err != nil {
			return err
		}
		return nil
	})
}

// bothFormsRefuse: every bad argument a collective refuses is refused the same way by its
// blocking form and its stream-ordered one (one check per collective serves both): the same kind
// and the same detail, each naming its own call, and nothing is enqueued.
func bothFormsRefuse(w *World, a, b Sym[float64], h Sym[BFloat16]) error {
	ctx := context.Background()
	world := w.TeamWorld()
	st, err := w.NewStream()
	if err != nil {
		return err
	}
	defer st.Destroy()
	a8, _ := a.Slice(0, 8)
	a4, _ := a.Slice(4, 8)
	b8, _ := b.Slice(0, 8)
	a2, _ := a.Slice(2, 4)
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
}

// A PE that never makes the call: the others fail within ROX_TIMEOUT naming it.
func TestCollMissingPE(t *testing.T) {
	old := jobTimeout
	jobTimeout = 2 * time.Second
	defer func() { jobTimeout = old }()
	nodeJob(t, 3, 0, 8<<20, func(w *World) error {
		ctx := context.Background()
		src, _ := Alloc[int64](w, 4)
		dst, _ := Alloc[int64](w, 4)
		if w.MyPE() == 1 {
			// Late, it makes the same calls, so that the job's sequence goes on in step: the
			// others' headers are in, and its one-shot all-reduce completes alone.
			time.Sleep(3 * time.Second)
			if err := AllReduce(ctx, w.TeamWorld(), dst, src, OpSum); err != nil {
				return err
			}
			return w.BarrierAll(ctx)
		}
		start := time.Now()
		err := AllReduce(ctx, w.TeamWorld(), dst, src, OpSum)
		if e := errHas(err, ErrTimeout, "AllReduce", "PE 1", "ROX_TIMEOUT"); e != nil {
			return e
		}
		if d := time.Since(start); d > 10*time.Second {
			return fmt.Errorf("failed after %v", d)
		}
		return w.BarrierAll(ctx)
	})
}

func TestHalfFloats(t *testing.T) {
	// every float16 and bfloat16 survives a round trip through float32
	for b := 0; b < 1<<16; b++ {
		h := Float16(b)
		f := h.Float32()
		if got := Float16From(f); got != h && !(f != f && Float16From(f).Float32() != Float16From(f).Float32()) {
			t.Fatalf("float16 %#04x -> %v -> %#04x", b, f, got)
		}
		bf := BFloat16(b)
		g := bf.Float32()
		if got := BFloat16From(g); got != bf && !(g != g && got.Float32() != got.Float32()) {
			t.Fatalf("bfloat16 %#04x -> %v -> %#04x", b, g, got)
		}
	}
	// rounding to nearest, ties to even, against float64 arithmetic
	for _, c := range []struct {
		f    float64
		want uint16
	}{
		{1 + 1.0/2048, 0x3c00},  // a tie: to even (1.0)
		{1 + 3.0/2048, 0x3c02},  // a tie: to even (1 + 2/1024)
		{1 + 1.5/2048, 0x3c01},  // above the tie
		{65520, 0x7c00},         // rounds to infinity
		{math.Ldexp(1, -25), 0}, // half the smallest subnormal: to even (0)
		{math.Ldexp(3, -26), 1}, // above half: the smallest subnormal
		{-math.Ldexp(1, -14), 0x8400},
	} {
		if got := Float16From(float32(c.f)); uint16(got) != c.want {
			t.Errorf("Float16From(%v) = %#04x, want %#04x", c.f, got, c.want)
		}
	}
	if got := BFloat16From(1 + 1.0/256); got != 0x3f80 { // tie to even
		t.Errorf("BFloat16From(1+2^-8) = %#04x", got)
	}
	if got := BFloat16From(1 + 3.0/256); got != 0x3f82 {
		t.Errorf("BFloat16From(1+3*2^-8) = %#04x", got)
	}
}

// Contexts: a context's Quiet flushes the PEs it wrote through the NIC path and no others, and a
// NOSTORE context refuses writes.
func TestCtx(t *testing.T) {
	nodeJob(t, 4, 2, 8<<20, func(w *World) error {
		ctx := context.Background()
		me := w.MyPE()
		x, _ := Alloc[int64](w, 8)
		a, err := w.CreateCtx(CtxPrivate)
		if err != nil {
			return err
		}
		b, err := w.CreateCtx(CtxSerialized)
		if err != nil {
			return err
		}
		if sh := w.TeamShared(); sh.NPEs() != 2 || sh.MyPE() != me%2 || sh.WorldPE(1-me%2) != me^1 {
			return fmt.Errorf("TeamShared of a 2-PE node: PE %d of %d", sh.MyPE(), sh.NPEs())
		}
		far := (me + 2) % 4 // on the other node
		near := me ^ 1      // on this node: load/store
		if err := CtxPut(a, x, me, []int64{int64(100 + me)}, far); err != nil {
			return err
		}
		if err := CtxP(a, x, me, int64(200+me), near); err != nil {
			return err
		}
		if err := CtxAtomicAdd(b, x, 7, 1, far); err != nil {
			return err
		}
		if got := fmt.Sprint(a.pendingPEs(), b.pendingPEs()); got != fmt.Sprint([]int{far}, []int{far}) {
			return fmt.Errorf("pending before quiet: %s", got)
		}
		if err := b.Quiet(); err != nil {
			return err
		}
		if got := fmt.Sprint(a.pendingPEs(), b.pendingPEs()); got != fmt.Sprint([]int{far}, []int(nil)) {
			return fmt.Errorf("after b.Quiet: %s (a's writes are not b's to complete)", got)
		}
		if err := a.Quiet(); err != nil {
			return err
		}
		if len(a.pendingPEs()) != 0 {
			return fmt.Errorf("after a.Quiet: %v", a.pendingPEs())
		}
		if err := w.TeamWorld().Sync(ctx); err != nil {
			return err
		}
		l := x.Local()
		if l[(me+2)%4] != int64(100+(me+2)%4) || l[me^1] != int64(200+(me^1)) || l[7] != 1 {
			return fmt.Errorf("PE %d sees %v", me, l)
		}
		if v, err := CtxG(a, x, me, far); err != nil || v != int64(100+me) {
			return fmt.Errorf("CtxG: %v, %v", v, err)
		}
		ro, _ := w.CreateCtx(CtxNoStore)
		if e := errHas(CtxPut(ro, x, 0, []int64{1}, far), ErrBadArgument, "CtxPut", "NOSTORE"); e != nil {
			return e
		}
		if _, err := CtxAtomicFetch(ro, x, 0, far); err != nil {
			return fmt.Errorf("fetch on a NOSTORE context: %w", err)
		}
		if err := a.Destroy(); err != nil {
			return err
		}
		if e := errHas(a.Quiet(), ErrBadArgument, "destroyed"); e != nil {
			return e
		}
		if _, err := w.CreateCtx(8); !errors.Is(err, ErrBadArgument) {
			return fmt.Errorf("unknown option: %v", err)
		}
		return w.BarrierAll(ctx)
	})
}

// AllToAlls with a different source stride on one PE: past the eager path each PE gathers its
// block from a peer's source at a stride, which must be the peer's; the strides are part of the
// call's checked signature, so every PE gets ErrMismatch naming both, and nothing is written.
func TestCollAllToAllsStrides(t *testing.T) {
	nodeJob(t, 3, 0, 8<<20, func(w *World) error {
		ctx := context.Background()
		me := w.MyPE()
		const k = 20000 // 80 KB blocks: over the world's eager payload
		src, err := Alloc[int32](w, 3*k*3)
		if err != nil {
			return err
		}
		dst, err := Alloc[int32](w, 3*k*2)
		if err != nil {
			return err
		}
		for i := range src.Local() {
			src.Local()[i] = int32(me<<24 | i)
		}
		for i := range dst.Local() {
			dst.Local()[i] = -7
		}
		stride := 2
		if me == 1 {
			stride = 3
		}
		err = AllToAlls(ctx, w.TeamWorld(), dst, src, 2, stride, k)
		want := []string{"AllToAlls", "source stride", fmt.Sprintf("PE %d", me)}
		if me == 1 {
			want = append(want, "source stride 3", "passes 2 and 2")
		} else {
			want = append(want, "source stride 2", "passes 2 and 3")
		}
		if e := errHas(err, ErrMismatch, want...); e != nil {
			return e
		}
		for i, v := range dst.Local() {
			if v != -7 {
				return fmt.Errorf("destination element %d written (%#x) by a refused call", i, v)
			}
		}
		// The same strides everywhere: the data arrives.
		if err := AllToAlls(ctx, w.TeamWorld(), dst, src, 2, 3, k); err != nil {
			return err
		}
		for j := 0; j < 3; j++ {
			for e := 0; e < k; e++ {
				if v, wv := dst.Local()[(j*k+e)*2], int32(j<<24|(me*k+e)*3); v != wv {
					return fmt.Errorf("block %d element %d is %#x, want %#x", j, e, v, wv)
				}
			}
		}
		return nil
	})
}

// The World's calls (BarrierAll, SyncAll, the allocation calls) and TeamWorld's collectives are one
// sequence: a PE at a World call while another is at a TeamWorld collective, or at another World
// call, fails with ErrMismatch naming both PEs and both calls (not ErrTimeout after ROX_TIMEOUT),
// and the calls after it stay in step.
func TestWorldCallsInTeamSequence(t *testing.T) {
	jobWith(t, 3, 8<<20, 5*time.Second, func(w *World) error {
		ctx := context.Background()
		me := w.MyPE()
		world := w.TeamWorld()
		x, err := Alloc[int64](w, 4)
		if err != nil {
			return err
		}
		y, err := Alloc[int64](w, 4)
		if err != nil {
			return err
		}
		for i := range x.Local() {
			x.Local()[i] = int64(me + 1)
		}
		sum := func() error { return AllReduce(ctx, world, y, x, OpSum) }
		for _, c := range []struct {
			name  string
			calls [2]string // what PE 1 calls; what the others call
			run   [2]func() error
		}{
			{"BarrierAll/AllReduce", [2]string{"BarrierAll", "AllReduce"}, [2]func() error{func() error { return w.BarrierAll(ctx) }, sum}},
			{"Malloc/AllReduce", [2]string{"Malloc", "AllReduce"}, [2]func() error{func() error { _, err := w.Malloc(64); return err }, sum}},
			{"Free/BarrierAll", [2]string{"Free", "BarrierAll"}, [2]func() error{func() error { return w.Free(y.Mem()) }, func() error { return w.BarrierAll(ctx) }}},
			{"SyncAll/Broadcast", [2]string{"SyncAll", "Broadcast"}, [2]func() error{func() error { return w.SyncAll(ctx) }, func() error { return Broadcast(ctx, world, y, x, 0) }}},
		} {
			mine, other, peer := 1, 0, 0
			if me == 1 {
				mine, other, peer = 0, 1, 0
			} else {
				peer = 1
			}
			err := c.run[mine]()
			if e := errHas(err, ErrMismatch, c.calls[mine], c.calls[other], fmt.Sprintf("PE %d", me), fmt.Sprintf("PE %d", peer)); e != nil {
				return fmt.Errorf("%s: %w", c.name, e)
			}
		}
		// In step: a sum and an allocation after the mismatches.
		if err := sum(); err != nil {
			return err
		}
		if got := y.Local()[0]; got != 1+2+3 {
			return fmt.Errorf("sum after the mismatches: %d", got)
		}
		if _, err := w.Malloc(64); err != nil {
			return err
		}
		return w.BarrierAll(ctx)
	}, false)
}

// A call refused on one PE by its argument check still takes its place in the team's sequence:
// the others' call fails at once with ErrMismatch naming the refusing PE and the reason's kind
// (instead of being matched with that PE's next call and returning mixed data), nothing is
// written, and the next calls are in step.
func TestCollRefusedCallKeepsItsPlace(t *testing.T) {
	jobWith(t, 3, 8<<20, 5*time.Second, func(w *World) error {
		ctx := context.Background()
		me := w.MyPE()
		world := w.TeamWorld()
		src, _ := Alloc[int64](w, 16)
		dst, _ := Alloc[int64](w, 16)
		s4, _ := src.Slice(0, 4)
		d4, _ := dst.Slice(0, 4)
		over, _ := src.Slice(2, 4) // overlaps s4
		fill := func(base int64) {
			for i := range src.Local() {
				src.Local()[i] = base + int64(me)
			}
			for i := range dst.Local() {
				dst.Local()[i] = -7
			}
		}
		untouched := func(what string) error {
			for i, v := range dst.Local() {
				if v != -7 {
					return fmt.Errorf("%s: destination element %d written (%d) by a failed call", what, i, v)
				}
			}
			return nil
		}
		for _, c := range []struct {
			what string
			kind error
			run  func(bad bool) error
		}{
			{"AllReduce", ErrBadArgument, func(bad bool) error {
				if bad {
					return AllReduce(ctx, world, over, s4, OpSum)
				}
				return AllReduce(ctx, world, d4, s4, OpSum)
			}},
			{"Broadcast", ErrPERange, func(bad bool) error {
				root := 0
				if bad {
					root = 5
				}
				return Broadcast(ctx, world, d4, s4, root)
			}},
			{"AllToAlls", ErrBadArgument, func(bad bool) error {
				stride := 1
				if bad {
					stride = 0
				}
				return AllToAlls(ctx, world, dst, src, 1, stride, 1)
			}},
		} {
			fill(10)
			err := c.run(me == 1)
			if me == 1 {
				if e := errHas(err, c.kind, c.what, "PE 1"); e != nil {
					return fmt.Errorf("%s, the refusing PE: %w", c.what, e)
				}
			} else if e := errHas(err, ErrMismatch, c.what, "PE 1", "refused", c.kind.Error()); e != nil {
				return fmt.Errorf("%s beside PE 1's refused one: %w", c.what, e)
			}
			if err := untouched(c.what); err != nil {
				return err
			}
			// The next call pairs with the next call on every PE.
			fill(100)
			if err := c.run(false); err != nil {
				return fmt.Errorf("%s after the refused one: %w", c.what, err)
			}
		}
		if got := dst.Local()[0]; got != 100 { // the AllToAlls: block 0 from PE 0
			return fmt.Errorf("AllToAlls after the refused one: element 0 is %d, want 100", got)
		}
		// A World call too: PE 1 asks for a negative size.
		size := 64
		if me == 1 {
			size = -1
		}
		_, err := w.Malloc(size)
		if me == 1 {
			if e := errHas(err, ErrBadArgument, "Malloc", "negative size -1"); e != nil {
				return e
			}
		} else if e := errHas(err, ErrMismatch, "Malloc", "PE 1", "refused"); e != nil {
			return fmt.Errorf("Malloc beside PE 1's refused one: %w", e)
		}
		fill(1000)
		if err := AllReduce(ctx, world, d4, s4, OpSum); err != nil {
			return err
		}
		if got := d4.Local()[0]; got != 3000+0+1+2 {
			return fmt.Errorf("the sum after the refused calls is %d, want %d", got, 3003)
		}
		return nil
	}, false)
}

// Where PEs reach each other over the NIC path (here: two nodes), the World's calls are checked
// without an exchange with every PE (that would connect a PE to every other at its first
// allocation): an allocation of another size, or one refused on one PE, fails at once on every PE
// with ErrMismatch naming the PE, a World call against a TeamWorld collective too
// (worldAgainstTeamWorld), and the next calls are in step.
func TestWorldCallsOnNICPath(t *testing.T) {
	runJob(t, 4, 2, 8<<20, 5*time.Second, func(w *World) error {
		me := w.MyPE()
		size := 64
		if me == 1 {
			size = 128
		}
		_, err := w.Malloc(size)
		if e := errHas(err, ErrMismatch, "Malloc", "PE 1"); e != nil && me != 1 {
			return fmt.Errorf("Malloc of another size on PE 1: %w", e)
		}
		if e := errHas(err, ErrMismatch, "Malloc"); e != nil && me == 1 {
			return fmt.Errorf("Malloc of another size on PE 1, seen by PE 1: %w", e)
		}
		size = 64
		if me == 1 {
			size = -1
		}
		_, err = w.Malloc(size)
		switch {
		case me == 1 && !errors.Is(err, ErrBadArgument):
			return fmt.Errorf("Malloc(-1) on PE 1: %v, want ErrBadArgument", err)
		case me != 1:
			if e := errHas(err, ErrMismatch, "PE 1 refused its Malloc", "bad argument"); e != nil {
				return fmt.Errorf("Malloc beside PE 1's refused one: %w", e)
			}
		}
		m, err := w.Malloc(64)
		if err != nil {
			return fmt.Errorf("Malloc after the mismatches: %w", err)
		}
		if err := w.BarrierAll(context.Background()); err != nil {
			return err
		}
		if err := w.Free(m); err != nil {
			return err
		}
		return worldAgainstTeamWorld(w)
	}, false)
}

// worldAgainstTeamWorld: World calls against TeamWorld collectives (and World calls of different
// protocols against each other) fail at once with ErrMismatch on every PE, naming both calls,
// where some PEs are reached over the NIC path, and the calls after stay in step. PEs 1 and 2
// (one on each node of the job) make the first call, the others the second.
func worldAgainstTeamWorld(w *World) error {
	ctx := context.Background()
	me := w.MyPE()
	world := w.TeamWorld()
	x, err := Alloc[int64](w, 4)
	if err != nil {
		return err
	}
	y, err := Alloc[int64](w, 4)
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
	sum := func() error { return AllReduce(ctx, world, y, x, OpSum) }
	first := me == 1 || me == 2
	for _, c := range []struct {
		calls [2]string // what PEs 1 and 2 call; what the others call
		run   [2]func() error
	}{
		{[2]string{"BarrierAll", "AllReduce"}, [2]func() error{func() error { return w.BarrierAll(ctx) }, sum}},
		{[2]string{"AllReduce", "BarrierAll"}, [2]func() error{sum, func() error { return w.BarrierAll(ctx) }}},
		{[2]string{"Malloc", "AllReduce"}, [2]func() error{func() error { _, err := w.Malloc(64); return err }, sum}},
		{[2]string{"SyncAll", "Broadcast"}, [2]func() error{func() error { return w.SyncAll(ctx) }, func() error { return Broadcast(ctx, world, y, x, 0) }}},
		{[2]string{"Free", "BarrierAll"}, [2]func() error{func() error { return w.Free(spare) }, func() error { return w.BarrierAll(ctx) }}},
		{[2]string{"BarrierAll", "Calloc"}, [2]func() error{func() error { return w.BarrierAll(ctx) }, func() error { _, err := w.Calloc(8, 8); return err }}},
	} {
		mine, other := 1, 0
		if first {
			mine, other = 0, 1
		}
		err := c.run[mine]()
		if e := errHas(err, ErrMismatch, c.calls[mine], c.calls[other], fmt.Sprintf("PE %d", me)); e != nil {
			return fmt.Errorf("%s against %s on the NIC path: %w", c.calls[0], c.calls[1], e)
		}
	}
	// In step: a sum, an allocation and a barrier after the mismatches.
	if err := sum(); err != nil {
		return fmt.Errorf("AllReduce after the mismatches: %w", err)
	}
	if got, want := y.Local()[0], int64(w.NPEs()*(w.NPEs()+1)/2); got != want {
		return fmt.Errorf("sum after the mismatches: %d, want %d", got, want)
	}
	m, err := w.Malloc(64)
	if err != nil {
		return fmt.Errorf("Malloc after the mismatches: %w", err)
	}
	if err := w.BarrierAll(ctx); err != nil {
		return fmt.Errorf("BarrierAll after the mismatches: %w", err)
	}
	return w.Free(m)
}
