package shmem_test

import (
	"context"
	"strings"
	"testing"

	"github.com/roxamen/roxamen/internal/seam"
	"github.com/roxamen/roxamen/shmem"
)

// TestZeroValueAudit (issue 26, 6): shmem's exported entry points, given zero values (a nil
// World, Team, Ctx or Module, a zero Sym or Mem), return an error naming the call, or a defined
// result where they return no error; none panics.
func TestZeroValueAudit(t *testing.T) {
	ctx := context.Background()
	var w *shmem.World
	var tm *shmem.Team
	var c *shmem.Ctx
	var m *shmem.Module
	var s shmem.Sym[int64]
	var sig shmem.Sym[uint64]
	var mem shmem.Mem
	var f int64
	calls := []struct {
		name string
		f    func() error
	}{
		{"Malloc", func() error { _, err := w.Malloc(8); return err }},
		{"Calloc", func() error { _, err := w.Calloc(1, 8); return err }},
		{"Align", func() error { _, err := w.Align(8, 8); return err }},
		{"Free", func() error { return w.Free(mem) }},
		{"Realloc", func() error { _, err := w.Realloc(mem, 8); return err }},
		{"Alloc", func() error { _, err := shmem.Alloc[int64](w, 1); return err }},
		{"As", func() error { _, err := shmem.As[int64](mem); return err }},
		{"SymOf", func() error { _, err := shmem.SymOf(w, []int64{1}); return err }},
		{"Slice", func() error { _, err := s.Slice(0, 0); return err }},
		{"Put", func() error { return s.Put(0, []int64{1}, 0) }},
		{"Get", func() error { return s.Get(0, []int64{1}, 0) }},
		{"P", func() error { return s.P(0, 1, 0) }},
		{"G", func() error { _, err := s.G(0, 0); return err }},
		{"AtomicFetchAdd", func() error { _, err := shmem.AtomicFetchAdd(s, 0, 1, 0); return err }},
		{"AtomicFetchAddNBI", func() error { return shmem.AtomicFetchAddNBI(s, 0, 1, 0, &f) }},
		{"BarrierAll", func() error { return w.BarrierAll(ctx) }},
		{"SyncAll", func() error { return w.SyncAll(ctx) }},
		{"Sync", func() error { return tm.Sync(ctx) }},
		{"Barrier", func() error { return tm.Barrier(ctx) }},
		{"Broadcast", func() error { return shmem.Broadcast(ctx, tm, s, s, 0) }},
		{"FCollect", func() error { return shmem.FCollect(ctx, tm, s, s) }},
		{"AllReduce", func() error { return shmem.AllReduce(ctx, tm, s, s, shmem.OpSum) }},
		{"AllToAll", func() error { return shmem.AllToAll(ctx, tm, s, s) }},
		{"SplitStrided", func() error { _, err := tm.SplitStrided(ctx, 0, 1, 1); return err }},
		{"Split2D", func() error { _, _, err := tm.Split2D(ctx, 1); return err }},
		{"Destroy", func() error { return tm.Destroy(ctx) }},
		{"CreateCtx", func() error { _, err := w.CreateCtx(0); return err }},
		{"Ctx.Destroy", func() error { return c.Destroy() }},
		{"Ctx.Fence", func() error { return c.Fence() }},
		{"Ctx.Quiet", func() error { return c.Quiet() }},
		{"CtxPut", func() error { return shmem.CtxPut(c, s, 0, []int64{1}, 0) }},
		{"CtxAtomicFetchAdd", func() error { _, err := shmem.CtxAtomicFetchAdd(c, s, 0, 1, 0); return err }},
		{"WaitUntil", func() error { return shmem.WaitUntil(ctx, s, 0, shmem.CmpEQ, 0) }},
		{"WaitUntilAll", func() error { return shmem.WaitUntilAll(ctx, s, nil, shmem.CmpEQ, 0) }},
		{"Test", func() error { _, err := shmem.Test(s, 0, shmem.CmpEQ, 0); return err }},
		{"PutSignal", func() error { return shmem.PutSignal(s, 0, []int64{1}, sig, 0, 1, shmem.SignalSet, 0) }},
		{"SignalFetch", func() error { _, err := shmem.SignalFetch(sig, 0); return err }},
		{"SignalWaitUntil", func() error { _, err := shmem.SignalWaitUntil(ctx, sig, 0, shmem.CmpEQ, 0); return err }},
		{"Fence", func() error { return w.Fence() }},
		{"Quiet", func() error { return w.Quiet() }},
		{"PEQuiet", func() error { return w.PEQuiet(0) }},
		{"LoadModule", func() error { _, err := w.LoadModule(nil); return err }},
		{"Module.Sync", func() error { return m.Sync(ctx) }},
		{"Module.Unload", func() error { return m.Unload() }},
		{"NewStream", func() error { _, err := w.NewStream(); return err }},
		{"SyncStream", func() error { return w.SyncStream(ctx, nil) }},
		{"QuietOnStream", func() error { return w.QuietOnStream(nil) }},
		{"BarrierOnStream", func() error { return w.BarrierOnStream(nil) }},
		{"PutOnStream", func() error { return shmem.PutOnStream(nil, s, 0, 0, 1, 0) }},
		{"AllReduceOnStream", func() error { return shmem.AllReduceOnStream(nil, tm, s, s, shmem.OpSum) }},
		{"Finalize", func() error { return w.Finalize() }},
	}
	values := []struct {
		name string
		f    func() any
	}{
		{"Mem.Local", func() any { return mem.Local() }},
		{"Sym.Local", func() any { return s.Local() }},
		{"Sym.Ptr", func() any { return s.Ptr(0) }},
		{"Sym.Len", func() any { return s.Len() }},
		{"Sym.Device", func() any { return s.Device() }},
		{"World.MyPE", func() any { return w.MyPE() }},
		{"World.NPEs", func() any { return w.NPEs() }},
		{"World.LocalPE", func() any { return w.LocalPE() }},
		{"World.LocalNPEs", func() any { return w.LocalNPEs() }},
		{"World.Ordering", func() any { return w.Ordering() }},
		{"World.Timeout", func() any { return w.Timeout() }},
		{"World.Device", func() any { return w.Device() }},
		{"World.InitReport", func() any { return w.InitReport() }},
		{"World.Connections", func() any { return w.Connections() }},
		{"seam.Reorder(World)", func() any { return seam.Reorder(w) }},
		{"World.TeamWorld", func() any { return w.TeamWorld() }},
		{"World.TeamShared", func() any { return w.TeamShared() }},
		{"Team.MyPE", func() any { return tm.MyPE() }},
		{"Team.NPEs", func() any { return tm.NPEs() }},
		{"Team.WorldPE", func() any { return tm.WorldPE(0) }},
		{"Team.String", func() any { return tm.String() }},
		{"Team.TranslatePE", func() any { return tm.TranslatePE(0, tm) }},
		{"Team.Handle", func() any { return tm.Handle() }},
		{"Team.Algorithm", func() any { return tm.Algorithm(shmem.CollBroadcast, 8) }},
		{"Ctx.Options", func() any { return c.Options() }},
		{"seam.CtxReorder(Ctx)", func() any { return seam.CtxReorder(c) }},
		{"Module.Stream", func() any { return m.Stream() }},
	}
	for _, c := range calls {
		var err error
		if p := catch(func() { err = c.f() }); p != nil {
			t.Errorf("%s with zero values panicked: %v", c.name, p)
			continue
		}
		name := strings.TrimPrefix(strings.TrimPrefix(c.name, "Ctx."), "Module.")
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s with zero values: %v, want an error naming the call", c.name, err)
		}
	}
	for _, v := range values {
		if p := catch(func() { v.f() }); p != nil {
			t.Errorf("%s with zero values panicked: %v", v.name, p)
		}
	}
}

func catch(f func()) (p any) {
	defer func() { p = recover() }()
	f()
	return nil
}
