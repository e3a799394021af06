package bench

// roxrun bench coll on a GPU backend: the rows are the stream-ordered collectives
// (shmem.AllReduceOnStream and the others) on one stream, the iterations of a round enqueued back
// to back and the stream synchronized once at the end (nccl-tests' way), with the algorithm each
// took (block: one block of the GPU moves or reduces the data; ce: one block posts copy-engine
// copies) and the SMs (blocks) it occupies while it runs. On the host backend the rows are the
// blocking host collectives, which occupy no SM.

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/roxamen/roxamen/device"
	"github.com/roxamen/roxamen/kernels"
	"github.com/roxamen/roxamen/shmem"
)

// collStream is the GPU form of one bench row: call enqueues one collective, flush waits for the
// stream.
type collStream struct {
	call, flush func() error
	algo        string
	sms         int
	coll        shmem.Collective // with bytes per PE: what the row asks StreamAlgorithm and StreamBlocks
	bytes       int
	// host time spent enqueueing, over calls: the host's share of a row's latency (when it
	// reaches the latency, the host, not the device, sets the pace)
	enq   time.Duration
	calls int
}

// enqueueUS is the host's time per enqueued call so far, in microseconds.
func (c *collStream) enqueueUS() float64 {
	if c.calls == 0 {
		return 0
	}
	return math.Round(c.enq.Seconds()/float64(c.calls)*1e9) / 1e3
}

func streamRow(ctx context.Context, w *shmem.World, st device.Stream, team *shmem.Team, test string, sz int,
	fsrc, fdst shmem.Sym[float32], bsrc, bdst shmem.Sym[uint8]) *collStream {
	np := w.NPEs()
	c := &collStream{flush: func() error { return w.SyncStream(ctx, st) }}
	switch test {
	case "allreduce":
		s, _ := fsrc.Slice(0, sz/4)
		d, _ := fdst.Slice(0, sz/4)
		c.call = func() error { return shmem.AllReduceOnStream(st, team, d, s, shmem.OpSum) }
		c.coll, c.bytes = shmem.CollAllReduce, sz
	case "allgather":
		s, _ := bsrc.Slice(0, sz/np)
		d, _ := bdst.Slice(0, sz/np*np)
		c.call = func() error { return shmem.AllGatherOnStream(st, team, d, s) }
		c.coll, c.bytes = shmem.CollFCollect, sz/np
	case "alltoall":
		s, _ := bsrc.Slice(0, sz/np*np)
		d, _ := bdst.Slice(0, sz/np*np)
		c.call = func() error { return shmem.AllToAllOnStream(st, team, d, s) }
		c.coll, c.bytes = shmem.CollAllToAll, sz/np*np
	case "broadcast":
		s, _ := bsrc.Slice(0, sz)
		d, _ := bdst.Slice(0, sz)
		c.call = func() error { return shmem.BroadcastOnStream(st, team, d, s, 0) }
		c.coll, c.bytes = shmem.CollBroadcast, sz
	case "reduce_scatter":
		s, _ := fsrc.Slice(0, sz/4/np*np)
		d, _ := fdst.Slice(0, sz/4/np)
		c.call = func() error { return shmem.ReduceScatterOnStream(st, team, d, s, shmem.OpSum) }
		c.coll, c.bytes = shmem.CollReduceScatter, sz/4/np*4
	case "team_barrier":
		c.call = func() error { return team.BarrierOnStream(st) }
		c.algo = "block"
	default:
		return nil
	}
	if c.coll != "" {
		c.algo, c.sms = team.StreamAlgorithm(c.coll, c.bytes), team.StreamBlocks(c.coll, c.bytes)
	} else {
		c.sms = 1
	}
	call := c.call
	c.call = func() error {
		t0 := time.Now()
		err := call()
		c.enq += time.Since(t0)
		c.calls++
		return err
	}
	return c
}

// deviceLoopIters: calls per timed kernel of the device-side rows (the launch amortized)
const deviceLoopIters = 2000

// the copy_d2d row: copies of the largest collective size per timed region
const (
	copyBytes = 16 << 20
	copyCalls = 20
)

// deviceLoopRows adds, on a GPU, what a fused kernel sees and the floor under every stream-ordered
// row, measured in the same job: the block barrier and the 8-byte float sum all-reduce called
// deviceLoopIters times in one kernel (device_barrier_block, device_allreduce_block; per call),
// an empty kernel launched back to back on the stream (launch_empty; per launch), and the
// device-to-device copy of 16 MiB on the stream (copy_d2d: the limit a large collective's busbw
// is held against, while the other PEs copy too). The collectives' object is loaded as a user
// module here, so that the rows time its kernels alone.
func deviceLoopRows(ctx context.Context, w *shmem.World, team *shmem.Team, fsrc, fdst shmem.Sym[float32], bsrc, bdst shmem.Sym[uint8], enc *json.Encoder) error {
	img, _, err := kernels.CollObjectFor(w.Device().Arch)
	if err != nil {
		return err
	}
	mod, err := w.LoadModule(img)
	if err != nil {
		return err
	}
	defer mod.Unload()
	times, err := shmem.Alloc[float64](w, 1)
	if err != nil {
		return err
	}
	tmax, err := shmem.Alloc[float64](w, 1)
	if err != nil {
		return err
	}
	defer w.Free(times.Mem())
	defer w.Free(tmax.Mem())
	np := w.NPEs()
	one := device.D1(1)
	// the floor of the graph_* rows: graphCalls empty kernels captured in one graph
	var empty device.Graph
	if capt, ok := mod.Stream().(device.Capturer); ok {
		if err := capt.BeginCapture(); err != nil {
			return err
		}
		for i := 0; i < graphCalls; i++ {
			if err := mod.Launch("roxk_bench_barrier_loop", one, device.D1(32), 0, team.Handle(), uint32(0)); err != nil {
				return err
			}
		}
		if empty, err = capt.EndCapture(); err != nil {
			return err
		}
		defer empty.Destroy()
	}
	rows := []struct {
		test string
		size int
		per  int // calls the timed region makes
		run  func() error
	}{
		{"launch_empty", 0, deviceLoopIters, func() error {
			for i := 0; i < deviceLoopIters; i++ {
				if err := mod.Launch("roxk_bench_barrier_loop", one, device.D1(32), 0, team.Handle(), uint32(0)); err != nil {
					return err
				}
			}
			return nil
		}},
		{"graph_empty", 0, deviceLoopIters, func() error {
			for i := 0; i < deviceLoopIters/graphCalls; i++ {
				if err := empty.Launch(mod.Stream()); err != nil {
					return err
				}
			}
			return nil
		}},
		{"device_barrier_block", 0, deviceLoopIters, func() error {
			return mod.Launch("roxk_bench_barrier_loop", one, device.D1(256), 0, team.Handle(), uint32(deviceLoopIters))
		}},
		{"device_allreduce_block", 8, deviceLoopIters, func() error {
			return mod.Launch("roxk_bench_allreduce_loop", one, device.D1(256), 0, team.Handle(), fdst.Device(), fsrc.Device(), uint64(2), uint32(deviceLoopIters))
		}},
		{"copy_d2d", copyBytes, copyCalls, func() error {
			for i := 0; i < copyCalls; i++ {
				if err := mod.Stream().CopyAsync(bdst.Device(), bsrc.Device(), copyBytes); err != nil {
					return err
				}
			}
			return nil
		}},
	}
	for _, r := range rows {
		if r.test == "graph_empty" && empty == nil {
			continue
		}
		if _, err := mod.Elapsed(ctx, r.run); err != nil { // warm up
			return fmt.Errorf("%s: %w", r.test, err)
		}
		var rounds []float64
		for k := 0; k < 5; k++ {
			if err := team.Barrier(ctx); err != nil {
				return err
			}
			d, err := mod.Elapsed(ctx, r.run)
			if err != nil {
				return fmt.Errorf("%s: %w", r.test, err)
			}
			el := []float64{d.Seconds() / float64(r.per)}
			if err := times.Put(0, el, w.MyPE()); err != nil {
				return err
			}
			if err := shmem.AllReduce(ctx, team, tmax, times, shmem.OpMax); err != nil {
				return err
			}
			if err := tmax.Get(0, el, w.MyPE()); err != nil {
				return err
			}
			rounds = append(rounds, el[0])
		}
		sort.Float64s(rounds)
		if w.MyPE() == 0 {
			sms := 1
			row := collRow{Test: r.test, Backend: w.Device().Driver, PEs: np, SizeBytes: r.size, LatencyUS: math.Round(rounds[2]*1e9) / 1e3,
				Algorithm: "device", SMs: &sms, SpreadUS: math.Round((rounds[4]-rounds[0])*1e9) / 1e3,
				LatencyMinUS: math.Round(rounds[0]*1e9) / 1e3, LatencyMaxUS: math.Round(rounds[4]*1e9) / 1e3}
			if r.test == "copy_d2d" {
				row.Algorithm, row.BusBWGBps = "copy", math.Round(float64(r.size)/rounds[2]/1e8)/10
			}
			if err := enc.Encode(row); err != nil {
				return err
			}
		}
	}
	return nil
}

// graphCalls: the collectives one captured graph of a graph_* row holds (the twenty)
const graphCalls = 20

// graphRowMax: the largest size with a graph_* row (past it the launch is no part of the time)
const graphRowMax = 1 << 20

// slowest returns the largest of every PE's el: the round's time is the slowest PE's.
func slowest(ctx context.Context, w *shmem.World, team *shmem.Team, times, tmax shmem.Sym[float64], el float64) (float64, error) {
	v := []float64{el}
	if err := times.Put(0, v, w.MyPE()); err != nil {
		return 0, err
	}
	if err := shmem.AllReduce(ctx, team, tmax, times, shmem.OpMax); err != nil {
		return 0, err
	}
	if err := tmax.Get(0, v, w.MyPE()); err != nil {
		return 0, err
	}
	return v[0], nil
}

// graphRow adds the graph_<test> row beside a stream row: graphCalls of the row's collective
// captured once in a graph of st (device.Capturer), the graph replayed back to back (iters calls
// in all, at least one replay) and st synchronized once; per call, the median of nrounds rounds
// of the slowest PE. Its floor is the graph_empty row (deviceLoopRows). Nothing where st cannot
// capture (the host backend).
func graphRow(ctx context.Context, w *shmem.World, team *shmem.Team, st device.Stream, sc *collStream, test string, sz, iters, nrounds int,
	busFactor float64, times, tmax shmem.Sym[float64], enc *json.Encoder) error {
	capt, ok := st.(device.Capturer)
	if !ok {
		return nil
	}
	if err := capt.BeginCapture(); err != nil {
		return err
	}
	for i := 0; i < graphCalls; i++ {
		if err := sc.call(); err != nil {
			if g, e2 := capt.EndCapture(); e2 == nil {
				g.Destroy()
			}
			return err
		}
	}
	g, err := capt.EndCapture()
	if err != nil {
		return err
	}
	defer g.Destroy()
	replays := max(1, iters/graphCalls)
	run := func() error {
		for i := 0; i < replays; i++ {
			if err := g.Launch(st); err != nil {
				return err
			}
		}
		return sc.flush()
	}
	if err := run(); err != nil { // warm up
		return err
	}
	var rounds []float64
	for r := 0; r < nrounds; r++ {
		if err := team.Barrier(ctx); err != nil {
			return err
		}
		t0 := time.Now()
		if err := run(); err != nil {
			return err
		}
		el, err := slowest(ctx, w, team, times, tmax, time.Since(t0).Seconds()/float64(replays*graphCalls))
		if err != nil {
			return err
		}
		rounds = append(rounds, el)
	}
	sort.Float64s(rounds)
	if w.MyPE() != 0 {
		return nil
	}
	t := rounds[len(rounds)/2]
	sms := sc.sms
	row := collRow{Test: "graph_" + test, Backend: w.Device().Driver, PEs: w.NPEs(), SizeBytes: sz, LatencyUS: math.Round(t*1e9) / 1e3,
		Algorithm: sc.algo, SMs: &sms, LatencyMinUS: math.Round(rounds[0]*1e9) / 1e3, LatencyMaxUS: math.Round(rounds[len(rounds)-1]*1e9) / 1e3,
		SpreadUS: math.Round((rounds[len(rounds)-1]-rounds[0])*1e9) / 1e3}
	if sz > 0 {
		row.BusBWGBps = math.Round(float64(sz)*busFactor/t/1e9*1000) / 1000
	}
	return enc.Encode(row)
}
