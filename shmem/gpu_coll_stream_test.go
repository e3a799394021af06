package shmem

import (
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/roxamen/roxamen/device"
	"github.com/roxamen/roxamen/internal/env"
	"github.com/roxamen/roxamen/kernels"
	"github.com/roxamen/roxamen/tools/launch"
	"github.com/roxamen/roxamen/tools/testjob"
)

// TestGPUStreamColl runs a 2-PE job (both PEs may share one GPU: the calls are few, so are the
// handoffs) of the stream-ordered collectives on the device: the team table as the GPU holds it,
// every collective at a size that takes one block and one that takes the copy engine, twenty of
// them captured in a CUDA graph and replayed (replayCollGraph), a
// device-found mismatch reported by SyncStream naming the call, and a kernel on a destroyed
// team's handle reported as ErrTeamDestroyed. It skips without a CUDA GPU (fails under
// ROX_TEST_GPU).
func TestGPUStreamColl(t *testing.T) {
	if os.Getenv("ROX_GPU_STREAM_WORKER") != "" {
		t.Skip("in a worker")
	}
	needGPUs(t, 1)
	for _, ord := range []string{"strict", "bypass"} {
		t.Run(ord, func(t *testing.T) {
			start := time.Now()
			s := testjob.Workers{NPEs: 2, Worker: "TestGPUStreamCollWorker", Marker: "ROX_GPU_STREAM_WORKER",
				Env: []string{"ROX_TIMEOUT=30s", "ROX_ORDERING=" + ord, "ROX_COLL_CE_THRESHOLD=4M"}, Timeout: 3 * time.Minute,
				MPS: launch.JobMPS(2)}.Run(t) // where the PEs share a GPU, at once under MPS as roxrun runs them
			t.Logf("job took %v", time.Since(start))
			t.Log(s)
		})
	}
}

func TestGPUStreamCollWorker(t *testing.T) {
	if os.Getenv("ROX_GPU_STREAM_WORKER") == "" {
		t.Skip("run by TestGPUStreamColl")
	}
	ctx := context.Background()
	w, err := Init(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Finalize()
	me, n := w.MyPE(), w.NPEs()
	world := w.TeamWorld()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("PE %d: %v", me, err)
		}
	}
	// the table as the GPU holds it is the host's
	if w.dteams == nil || w.dteams.Dev() == 0 || w.gpu.State().Teams != uint64(w.dteams.Dev()) {
		t.Fatalf("no device team table: %+v", w.dteams)
	}
	pair, err := world.SplitStrided(ctx, 0, 1, n)
	must(err)
	var got kernels.TeamTable
	must(w.dev.CopyDtoH(unsafe.Slice((*byte)(unsafe.Pointer(&got)), unsafe.Sizeof(got)), w.dteams.Dev()))
	if got != *w.dteams.Table() || got.Team[pair.Handle()].Size != int32(n) {
		t.Fatalf("the device team table differs from the host's (entry %d: %+v)", pair.Handle(), got.Team[pair.Handle()])
	}
	st, err := w.NewStream()
	must(err)
	defer st.Destroy()

	thr, _ := env.CollCE.Size()
	for _, elems := range []int{1, 4096 + 3, 1<<16 + 7, int(thr)/4 + 5} {
		src, err := Alloc[float32](w, n*elems)
		must(err)
		sum, err := Alloc[float32](w, n*elems)
		must(err)
		gath, err := Alloc[float32](w, n*n*elems)
		must(err)
		a2a, err := Alloc[float32](w, n*elems)
		must(err)
		bc, err := Alloc[float32](w, n*elems)
		must(err)
		rs, err := Alloc[float32](w, elems)
		must(err)
		val := func(pe, i int) float32 { return float32(pe*1000003 + i%65536) }
		mine := make([]float32, n*elems)
		for i := range mine {
			mine[i] = val(me, i)
		}
		must(src.Put(0, mine, me))
		must(w.BarrierAll(ctx))
		bytes := n * elems * 4
		t.Logf("PE %d: %d bytes per PE: all-gather %s, all-to-all %s, broadcast %s, all-reduce %s", me, bytes,
			world.StreamAlgorithm(CollFCollect, bytes), world.StreamAlgorithm(CollAllToAll, bytes), world.StreamAlgorithm(CollBroadcast, bytes), world.StreamAlgorithm(CollAllReduce, bytes))
		start := time.Now()
		must(AllReduceOnStream(st, world, sum, src, OpSum))
		must(AllGatherOnStream(st, world, gath, src))
		must(AllToAllOnStream(st, world, a2a, src))
		must(BroadcastOnStream(st, world, bc, src, 1))
		must(ReduceScatterOnStream(st, world, rs, src, OpMax))
		must(w.SyncStream(ctx, st))
		t.Logf("PE %d: five stream-ordered collectives of %d bytes per PE: %v (two PEs may share one GPU: not a speed figure)", me, bytes, time.Since(start))
		get := func(s Sym[float32]) []float32 { b := make([]float32, s.Len()); must(s.Get(0, b, me)); return b }
		gs, gg, ga, gb, gr := get(sum), get(gath), get(a2a), get(bc), get(rs)
		for i := range n * elems {
			var want float32
			for pe := range n {
				want += val(pe, i)
			}
			if gs[i] != want {
				t.Fatalf("PE %d: AllReduceOnStream element %d = %v, want %v", me, i, gs[i], want)
			}
			if gb[i] != val(1, i) {
				t.Fatalf("PE %d: BroadcastOnStream element %d = %v, want %v", me, i, gb[i], val(1, i))
			}
			if j, k := i/elems, i%elems; ga[i] != val(j, me*elems+k) {
				t.Fatalf("PE %d: AllToAllOnStream element %d = %v, want %v", me, i, ga[i], val(j, me*elems+k))
			}
		}
		for i := range n * n * elems {
			if j, k := i/(n*elems), i%(n*elems); gg[i] != val(j, k) {
				t.Fatalf("PE %d: AllGatherOnStream element %d = %v, want %v", me, i, gg[i], val(j, k))
			}
		}
		for i := range elems {
			if want := val(n-1, me*elems+i); gr[i] != want {
				t.Fatalf("PE %d: ReduceScatterOnStream element %d = %v, want %v", me, i, gr[i], want)
			}
		}
		if elems > 1<<14 {
			// in place past the one-shot sizes (the grid's direct path): the all-reduce over src
			// itself, the all-gather from this PE's own block of a destination cleared elsewhere
			clear := make([]float32, n*n*elems)
			copy(clear[me*n*elems:], mine)
			must(gath.Put(0, clear, me))
			must(w.BarrierAll(ctx)) // the put complete before the collective reads around it
			blk, err := gath.Slice(me*n*elems, n*elems)
			must(err)
			must(AllReduceOnStream(st, world, src, src, OpSum))
			must(AllGatherOnStream(st, world, gath, blk))
			must(w.SyncStream(ctx, st))
			if got := get(src); !slices.Equal(got, gs) {
				t.Fatalf("PE %d: AllReduceOnStream in place differs from the out-of-place sum (%d elements)", me, len(got))
			}
			if got := get(gath); !slices.Equal(got, gg) {
				t.Fatalf("PE %d: AllGatherOnStream in place differs from the out-of-place gather (%d elements)", me, len(got))
			}
		}
		for _, s := range []Sym[float32]{src, sum, gath, a2a, bc, rs} {
			must(w.Free(s.Mem()))
		}
	}

	// the stream team barrier: each PE's copy-engine put into its next member's array lands
	// before the barrier on the sender's stream, so the receiver's copy enqueued after its
	// barrier sees it, though PE 1 enqueues its put late
	for round := int64(1); round <= 3; round++ {
		slots, err := Alloc[int64](w, n)
		must(err)
		seen, err := Alloc[int64](w, n)
		must(err)
		must(slots.Put(0, make([]int64, n), me))
		must(seen.Put(0, make([]int64, n), me))
		val, err := Alloc[int64](w, 1)
		must(err)
		must(val.Put(0, []int64{round*100 + int64(me)}, me))
		must(w.BarrierAll(ctx))
		if me == 1 {
			time.Sleep(100 * time.Millisecond)
		}
		must(PutOnStream(st, slots, me, val.Device(), 1, (me+1)%n))
		must(world.BarrierOnStream(st))
		must(st.CopyAsync(seen.Device(), slots.Device(), 8*n))
		must(w.SyncStream(ctx, st))
		got := make([]int64, n)
		must(seen.Get(0, got, me))
		from := (me + n - 1) % n
		if want := round*100 + int64(from); got[from] != want {
			t.Fatalf("PE %d round %d: after BarrierOnStream the put of PE %d reads %d, want %d", me, round, from, got[from], want)
		}
		must(w.BarrierAll(ctx))
		for _, s := range []Sym[int64]{slots, seen, val} {
			must(w.Free(s.Mem()))
		}
	}

	// twenty stream collectives captured in a graph, replayed with new inputs each time
	replayCollGraph(t, w, st)

	// a mismatch the device finds: reported by the sync, naming the call
	x, err := Alloc[int64](w, 16)
	must(err)
	y, err := Alloc[int64](w, 16)
	must(err)
	op := OpSum
	if me == 1 {
		op = OpMax
	}
	must(AllReduceOnStream(st, pair, y, x, op))
	err = w.SyncStream(ctx, st)
	if !errors.Is(err, ErrMismatch) || !strings.Contains(err.Error(), "AllReduceOnStream") {
		t.Fatalf("PE %d: SyncStream after mismatched ops = %v, want ErrMismatch naming AllReduceOnStream", me, err)
	}
	t.Logf("PE %d: %v", me, err)
	must(w.BarrierAll(ctx))

	// members whose copy-engine all-gathers differ in size: the offload's entry round fails on
	// both, nothing is posted
	// (the allocations are symmetric, at the largest size; each PE hands over a slice of its own
	// length: Alloc itself refuses different sizes across PEs)
	ce := int(thr)/4 + 16*me
	csAll, err := Alloc[float32](w, int(thr)/4+16*(n-1))
	must(err)
	cdAll, err := Alloc[float32](w, n*(int(thr)/4+16*(n-1)))
	must(err)
	cs, err := csAll.Slice(0, ce)
	must(err)
	cd, err := cdAll.Slice(0, n*ce)
	must(err)
	if a := world.StreamAlgorithm(CollFCollect, ce*4); a != "ce" {
		t.Fatalf("PE %d: a %d-byte all-gather takes %q, want ce", me, ce*4, a)
	}
	must(AllGatherOnStream(st, world, cd, cs))
	err = w.SyncStream(ctx, st)
	if !errors.Is(err, ErrMismatch) || !strings.Contains(err.Error(), "AllGatherOnStream") {
		t.Fatalf("PE %d: SyncStream after copy-engine all-gathers of different sizes = %v, want ErrMismatch naming AllGatherOnStream", me, err)
	}
	t.Logf("PE %d: %v", me, err)
	must(w.BarrierAll(ctx))

	// a kernel on a destroyed team's handle: recorded on the device, ErrTeamDestroyed on the host
	h := pair.Handle()
	must(pair.Destroy(ctx))
	f, err := w.scolls().Function(w.gpu, "roxk_coll_fcollect")
	must(err)
	must(st.Launch(f, device.D1(1), device.D1(streamBlock), 0, h, y.Device(), x.Device(), uint64(8)))
	err = w.SyncStream(ctx, st)
	if !errors.Is(err, ErrTeamDestroyed) {
		t.Fatalf("PE %d: a kernel on destroyed handle %d: %v, want ErrTeamDestroyed", me, h, err)
	}
	t.Logf("PE %d: %v", me, err)
	must(w.BarrierAll(ctx))
}

// replayCollGraph captures twenty stream collectives (the five kinds on 1, 1024, 4096 and 65543
// floats per PE and block: all-reduces of 8 B and 8 KiB take the LL exchange, 32 KiB the staged
// rounds, 512 KiB the grid's direct path) in a graph of st,
// then replays it with new inputs each time, every output cleared to NaN first, and checks every
// element: what a call needs per call (round numbers, LL flags, the grid barrier's generation)
// must come from the device, not from values the host captured once.
func replayCollGraph(t *testing.T, w *World, st device.Stream) {
	ctx := context.Background()
	me, n := w.MyPE(), w.NPEs()
	world := w.TeamWorld()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("PE %d: %v", me, err)
		}
	}
	c, ok := st.(device.Capturer)
	if !ok {
		t.Fatalf("PE %d: a stream of type %T cannot capture", me, st)
	}
	type set struct {
		elems                       int
		src, sum, gath, a2a, bc, rs Sym[float32]
		root                        int
	}
	var sets []*set
	for k, elems := range []int{1, 1024, 4096, 1<<16 + 7} {
		s := &set{elems: elems, root: k % n}
		for _, a := range []struct {
			p *Sym[float32]
			n int
		}{{&s.src, n * elems}, {&s.sum, n * elems}, {&s.gath, n * n * elems}, {&s.a2a, n * elems}, {&s.bc, n * elems}, {&s.rs, elems}} {
			var err error
			*a.p, err = Alloc[float32](w, a.n)
			must(err)
			defer w.Free(a.p.Mem())
		}
		sets = append(sets, s)
	}
	// exact in float32: every value and every two-PE sum stays under 2^24
	val := func(pe, i, replay int) float32 { return float32(pe*1000003 + i%65536 + replay*7) }
	inputs := make([][]float32, len(sets))
	enqueue := func(replay int) { // the inputs of this replay, the outputs cleared (stream-ordered)
		for k, s := range sets {
			in := make([]float32, n*s.elems)
			for i := range in {
				in[i] = val(me, i, replay)
			}
			inputs[k] = in
			must(st.CopyHtoDAsync(s.src.Device(), unsafe.Slice((*byte)(unsafe.Pointer(&in[0])), 4*len(in))))
			for _, d := range []Sym[float32]{s.sum, s.gath, s.a2a, s.bc, s.rs} {
				must(st.MemsetAsync(d.Device(), 0xff, 4*d.Len())) // NaN
			}
		}
	}
	calls := func() {
		for _, s := range sets {
			must(AllReduceOnStream(st, world, s.sum, s.src, OpSum))
			must(AllGatherOnStream(st, world, s.gath, s.src))
			must(AllToAllOnStream(st, world, s.a2a, s.src))
			must(BroadcastOnStream(st, world, s.bc, s.src, s.root))
			must(ReduceScatterOnStream(st, world, s.rs, s.src, OpMax))
		}
	}
	check := func(replay int) {
		get := func(s Sym[float32]) []float32 { b := make([]float32, s.Len()); must(s.Get(0, b, me)); return b }
		for _, s := range sets {
			e := s.elems
			gs, gg, ga, gb, gr := get(s.sum), get(s.gath), get(s.a2a), get(s.bc), get(s.rs)
			for i := range n * e {
				var want float32
				for pe := range n {
					want += val(pe, i, replay)
				}
				if gs[i] != want {
					t.Fatalf("PE %d replay %d, %d elements: AllReduceOnStream element %d = %v, want %v", me, replay, e, i, gs[i], want)
				}
				if gb[i] != val(s.root, i, replay) {
					t.Fatalf("PE %d replay %d, %d elements: BroadcastOnStream element %d = %v, want %v", me, replay, e, i, gb[i], val(s.root, i, replay))
				}
				if j, k := i/e, i%e; ga[i] != val(j, me*e+k, replay) {
					t.Fatalf("PE %d replay %d, %d elements: AllToAllOnStream element %d = %v, want %v", me, replay, e, i, ga[i], val(j, me*e+k, replay))
				}
			}
			for i := range n * n * e {
				if j, k := i/(n*e), i%(n*e); gg[i] != val(j, k, replay) {
					t.Fatalf("PE %d replay %d, %d elements: AllGatherOnStream element %d = %v, want %v", me, replay, e, i, gg[i], val(j, k, replay))
				}
			}
			for i := range e {
				if want := val(n-1, me*e+i, replay); gr[i] != want {
					t.Fatalf("PE %d replay %d, %d elements: ReduceScatterOnStream element %d = %v, want %v", me, replay, e, i, gr[i], want)
				}
			}
		}
	}
	// once enqueued directly (the kernels loaded before the capture), then captured
	enqueue(0)
	calls()
	must(w.SyncStream(ctx, st))
	check(0)
	must(c.BeginCapture())
	calls()
	g, err := c.EndCapture()
	must(err)
	defer g.Destroy()
	const replays = 25
	start := time.Now()
	for r := 1; r <= replays; r++ {
		enqueue(r)
		must(g.Launch(st))
		must(w.SyncStream(ctx, st))
		check(r)
	}
	t.Logf("PE %d: a graph of %d stream collectives replayed %d times, every output checked (%v with the checks; two PEs may share one GPU: not a speed figure)", me, 5*len(sets), replays, time.Since(start))
	must(w.BarrierAll(ctx))
}
