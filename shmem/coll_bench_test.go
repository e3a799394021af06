package shmem

import (
	"context"
	"fmt"
	"runtime"
	"syscall"
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

// BenchmarkCollAlone times the small host collectives of a 1-PE job: what a call costs in software
// alone (checks, gate, epoch, header, fold), with no peer to wait for. cpu-ns/op is the calling
// thread's CPU time per call, which a loaded machine inflates far less than the wall time.
func BenchmarkCollAlone(b *testing.B) {
	for _, name := range []string{"allreduce", "broadcast", "barrier", "barrier_all"} {
		b.Run(name, func(b *testing.B) {
			nodeJob(&testing.T{}, 1, 0, 16<<20, func(w *World) error {
				ctx := context.Background()
				t := w.TeamWorld()
				src, err := Alloc[float32](w, 2)
				if err != nil {
					return err
				}
				dst, err := Alloc[float32](w, 2)
				if err != nil {
					return err
				}
				bs, _ := As[uint8](src.Mem())
				bd, _ := As[uint8](dst.Mem())
				call := map[string]func() error{
					"allreduce":   func() error { return AllReduce(ctx, t, dst, src, OpSum) },
					"broadcast":   func() error { return Broadcast(ctx, t, bd, bs, 0) },
					"barrier":     func() error { return t.Barrier(ctx) },
					"barrier_all": func() error { return w.BarrierAll(ctx) },
				}[name]
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
				var r0, r1 syscall.Rusage
				_ = syscall.Getrusage(syscall.RUSAGE_THREAD, &r0)
				b.ResetTimer()
				b.ReportAllocs()
				for i := 0; i < b.N; i++ {
					if err := call(); err != nil {
						return err
					}
				}
				b.StopTimer()
				_ = syscall.Getrusage(syscall.RUSAGE_THREAD, &r1)
				cpu := r1.Utime.Nano() + r1.Stime.Nano() - r0.Utime.Nano() - r0.Stime.Nano()
				b.ReportMetric(float64(cpu)/float64(b.N), "cpu-ns/op")
				return nil
			})
		})
	}
}
