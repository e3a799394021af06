package shmem

import (
	"bytes"
	"context"
	"testing"

	"github.com/roxamen/roxamen/device"
	"github.com/roxamen/roxamen/shmem/internal/gpurt"
)

// gpuCtxPhase is TestGPUWorker's device-context phase (ROX_GPU_PHASES=ctx): PE 0's kernel
// (roxg_t_ctx) takes every context of the pool, finds one more create refused, puts on two
// contexts to PE 1, AMOs on one, p/g on the other and a put-with-signal on each, quiets each,
// destroys them all and creates again; PE 0 then reads what landed in PE 1's dst and words and
// the values the kernel fetched.
func gpuCtxPhase(t *testing.T, ctx context.Context, w *World, mod *Module, dst, src Sym[byte]) {
	t.Helper()
	t.Logf("phase: device contexts")
	me, peer := w.MyPE(), 1-w.MyPE()
	const n = 4096 + 3
	out, err := Alloc[int32](w, 4)
	if err != nil {
		t.Fatal(err)
	}
	words, err := Alloc[uint64](w, 8)
	if err != nil {
		t.Fatal(err)
	}
	data := make([]byte, 2*n)
	for i := range data {
		data[i] = byte(i*7 + 3)
	}
	if err := dst.Put(0, make([]byte, 2*n+64), me); err != nil {
		t.Fatal(err)
	}
	if err := words.Put(0, []uint64{100, 0, 0, 0, 0, 0, 0, 0}, me); err != nil {
		t.Fatal(err)
	}
	if me == 0 {
		if err := src.Put(0, data, me); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.BarrierAll(ctx); err != nil {
		t.Fatal(err)
	}
	if me == 0 {
		err := mod.Launch("roxg_t_ctx", device.D1(1), device.D1(1), 0, dst.Device(), src.Device(), uint64(n), int32(peer), out.Device(), words.Device())
		if err == nil {
			err = mod.Sync(ctx)
		}
		if err != nil {
			t.Fatalf("roxg_t_ctx: %v", err)
		}
		got := make([]int32, 3)
		if err := out.Get(0, got, me); err != nil {
			t.Fatal(err)
		}
		if got[0] != gpurt.DeviceContexts || got[1] == 0 || got[2] != 0 {
			t.Fatalf("contexts created %d (want %d), one more create returned %d (want nonzero), create after destroy %d (want 0)",
				got[0], gpurt.DeviceContexts, got[1], got[2])
		}
		fetched := make([]uint64, 3)
		if err := words.Get(4, fetched, me); err != nil {
			t.Fatal(err)
		}
		if fetched[0] != 100 || fetched[1] != 108 || int64(fetched[2]) != -77 {
			t.Fatalf("on contexts: fetch_add fetched %d (want 100), compare_swap %d (want 108), long_g %d (want -77)",
				fetched[0], fetched[1], int64(fetched[2]))
		}
	}
	if err := w.BarrierAll(ctx); err != nil {
		t.Fatal(err)
	}
	if me == 0 {
		remote := make([]uint64, 3)
		if err := words.Get(0, remote, peer); err != nil {
			t.Fatal(err)
		}
		if remote[0] != 200 || int64(remote[1]) != -77 || remote[2] != 10 {
			t.Fatalf("on contexts: PE %d's AMO word %d (want 200), p word %d (want -77), signal %d (want 9 then +1 = 10)",
				peer, remote[0], int64(remote[1]), remote[2])
		}
		sigData := make([]byte, 64)
		if err := dst.Get(2*n, sigData, peer); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(sigData, data[:64]) {
			t.Fatalf("context put-with-signal: PE %d's dst[%d:+64] is %x, want %x", peer, 2*n, sigData, data[:64])
		}
		got := make([]byte, 2*n)
		if err := dst.Get(0, got, peer); err != nil {
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
