package shmem

import (
	"context"
	"fmt"
	"testing"
)

// BenchmarkColl times the host collectives of a 2-PE job in this process (go test -bench Coll
// -cpuprofile ...: where a small call spends its time). b.N calls per PE; PE 0 reports.
func BenchmarkColl(b *testing.B) {
	for _, c := range []struct {
		name string
		size int
	}{{"allreduce", 8}, {"allreduce", 8192}, {"allgather", 8}, {"broadcast", 8}, {"alltoall", 8}, {"reduce_scatter", 8}, {"barrier", 0}, {"allreduce", 1 << 20}, {"allgather", 1 << 20}} {
		b.Run(fmt.Sprintf("%s/%d", c.name, c.size), func(b *testing.B) {
			nodeJob(&testing.T{}, 2, 0, 16<<20, func(w *World) error {
				ctx := context.Background()
				t := w.TeamWorld()
				src, err := Alloc[float32](w, max(c.size/4, 2))
				if err != nil {
					return err
				}
				dst, err := Alloc[float32](w, max(c.size/4, 2))
				if err != nil {
					return err
				}
				bs, _ := As[uint8](src.Mem())
				bd, _ := As[uint8](dst.Mem())
				var call func() error
				switch c.name {
				case "allreduce":
					call = func() error { return AllReduce(ctx, t, dst, src, OpSum) }
				case "allgather":
					s, _ := bs.Slice(0, c.size/2)
					call = func() error { return FCollect(ctx, t, bd, s) }
				case "broadcast":
					call = func() error { return Broadcast(ctx, t, bd, bs, 0) }
				case "alltoall":
					call = func() error { return AllToAll(ctx, t, bd, bs) }
				case "reduce_scatter":
					d, _ := dst.Slice(0, max(c.size/8, 1))
					call = func() error { return ReduceScatter(ctx, t, d, src, OpSum) }
				case "barrier":
					call = func() error { return t.Barrier(ctx) }
				}
				if err := t.Barrier(ctx); err != nil {
					return err
				}
				if w.MyPE() == 0 {
					b.ResetTimer()
					b.ReportAllocs()
				}
				for i := 0; i < b.N; i++ {
					if err := call(); err != nil {
						return err
					}
				}
				if w.MyPE() == 0 {
					b.StopTimer()
				}
				return t.Barrier(ctx)
			})
		})
	}
}
