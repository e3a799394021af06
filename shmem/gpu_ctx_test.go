package shmem

import (
	"bytes"
	"context"
	"testing"

	"github.com/roxamen/roxamen/device"
)

// gpuCtxPhase is TestGPUWorker's device-context phase (ROX_GPU_PHASES=ctx): PE 0's kernel
// (roxg_t_ctx) takes every context of the pool, finds one more create refused, puts on two
// contexts to PE 1 and quiets each, destroys them all and creates again; PE 0 then reads what
// landed in PE 1's dst.
func gpuCtxPhase(t *testing.T, ctx context.Context, w *World, mod *Module, dst, src Sym[byte]) {
	t.Helper()
	t.Logf("phase: device contexts")
	me, peer := w.MyPE(), 1-w.MyPE()
	const n = 4096 + 3
	out, err := Alloc[int32](w, 4)
	if err != nil {
		t.Fatal(err)
	}
	data := make([]byte, 2*n)
	for i := range data {
		data[i] = byte(i*7 + 3)
	}
	if err := dst.Put(me, 0, make([]byte, 2*n)); err != nil {
		t.Fatal(err)
	}
	if me == 0 {
		if err := src.Put(me, 0, data); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.BarrierAll(ctx); err != nil {
		t.Fatal(err)
	}
	if me == 0 {
		err := mod.Launch("roxg_t_ctx", device.D1(1), device.D1(1), 0, dst.Device(), src.Device(), uint64(n), int32(peer), out.Device())
		if err == nil {
			err = mod.Sync(ctx)
		}
		if err != nil {
			t.Fatalf("roxg_t_ctx: %v", err)
		}
		got := make([]int32, 3)
		if err := out.Get(me, 0, got); err != nil {
			t.Fatal(err)
		}
		if got[0] != devCtxs || got[1] == 0 || got[2] != 0 {
			t.Fatalf("contexts created %d (want %d), one more create returned %d (want nonzero), create after destroy %d (want 0)",
				got[0], devCtxs, got[1], got[2])
		}
	}
	if err := w.BarrierAll(ctx); err != nil {
		t.Fatal(err)
	}
	if me == 0 {
		got := make([]byte, 2*n)
		if err := dst.Get(peer, 0, got); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, data) {
			i := 0
			for i < len(got) && got[i] == data[i] {
				i++
			}
			t.Fatalf("context puts: byte %d of PE %d's dst is %#x, want %#x", i, peer, got[i], data[i])
		}
	}
	if err := w.BarrierAll(ctx); err != nil {
		t.Fatal(err)
	}
}
