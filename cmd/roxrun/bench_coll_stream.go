package main

// roxrun bench coll on a GPU backend: the rows are the stream-ordered collectives
// (shmem.AllReduceOnStream and the others) on one stream, the iterations of a round enqueued back
// to back and the stream synchronized once at the end (nccl-tests' way), with the algorithm each
// took (block: one block of the GPU moves or reduces the data; ce: one block posts copy-engine
// copies) and the SMs (blocks) it occupies while it runs. On the host backend the rows are the
// blocking host collectives, which occupy no SM.

import (
	"context"

	"github.com/roxamen/roxamen/device"
	"github.com/roxamen/roxamen/shmem"
)

// collStream is the GPU form of one bench row: call enqueues one collective, flush waits for the
// stream.
type collStream struct {
	call, flush func() error
	algo        string
	sms         int
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
		c.algo = team.StreamAlgorithm(shmem.CollAllReduce, sz)
	case "allgather":
		s, _ := bsrc.Slice(0, sz/np)
		d, _ := bdst.Slice(0, sz/np*np)
		c.call = func() error { return shmem.AllGatherOnStream(st, team, d, s) }
		c.algo = team.StreamAlgorithm(shmem.CollFCollect, sz/np)
	case "alltoall":
		s, _ := bsrc.Slice(0, sz/np*np)
		d, _ := bdst.Slice(0, sz/np*np)
		c.call = func() error { return shmem.AllToAllOnStream(st, team, d, s) }
		c.algo = team.StreamAlgorithm(shmem.CollAllToAll, sz/np*np)
	case "broadcast":
		s, _ := bsrc.Slice(0, sz)
		d, _ := bdst.Slice(0, sz)
		c.call = func() error { return shmem.BroadcastOnStream(st, team, d, s, 0) }
		c.algo = team.StreamAlgorithm(shmem.CollBroadcast, sz)
	case "reduce_scatter":
		s, _ := fsrc.Slice(0, sz/4/np*np)
		d, _ := fdst.Slice(0, sz/4/np)
		c.call = func() error { return shmem.ReduceScatterOnStream(st, team, d, s, shmem.OpSum) }
		c.algo = team.StreamAlgorithm(shmem.CollReduceScatter, sz/4/np*np*4)
	default:
		return nil // team_barrier: the host's
	}
	c.sms = shmem.StreamSMs(c.algo)
	return c
}
