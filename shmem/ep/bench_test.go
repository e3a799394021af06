package ep_test

import (
	"context"
	"testing"

	"github.com/roxamen/roxamen/shmem"
	"github.com/roxamen/roxamen/shmem/ep"
	"github.com/roxamen/roxamen/shmem/ep/eptest"
)

// BenchmarkDispatchCombine1PE measures the local work of a call (the rows written to the landing
// zone, grouping, partial sums, the sum of what came back) on DeepSeek-V3's decode shape in a
// 1-PE job: "new" with a fresh Recv and output each call (Dispatch, Combine), "reuse" with the
// previous call's (DispatchInto, CombineInto).
func BenchmarkDispatchCombine1PE(bm *testing.B) {
	bm.Run("new", func(bm *testing.B) { benchDispatchCombine1PE(bm, false) })
	bm.Run("reuse", func(bm *testing.B) { benchDispatchCombine1PE(bm, true) })
}

func benchDispatchCombine1PE(bm *testing.B, reuse bool) {
	ctx := context.Background()
	w, err := shmem.Init(ctx, shmem.WithHeapSize(256<<20))
	if err != nil {
		bm.Fatal(err)
	}
	defer w.Finalize()
	cfg := ep.Config{Hidden: 7168, TopK: 8, Experts: 16, MaxTokens: 128, DType: ep.DTypeBF16, Mode: ep.LowLatency}
	buf, err := ep.New(w, cfg)
	if err != nil {
		bm.Fatal(err)
	}
	in := eptest.Gen(cfg, 1, 0, 1, eptest.Full)
	var r *ep.Recv
	var out ep.Tokens
	bm.ResetTimer()
	for i := 0; i < bm.N; i++ {
		if !reuse {
			r, out = nil, ep.Tokens{}
		}
		var h *ep.Handle
		if r, h, err = buf.DispatchInto(ctx, r, in.X, in.Idx, in.Weights); err != nil {
			bm.Fatal(err)
		}
		if out, err = buf.CombineInto(ctx, out, r.X, h); err != nil {
			bm.Fatal(err)
		}
	}
}
