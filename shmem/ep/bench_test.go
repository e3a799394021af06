package ep_test

import (
	"context"
	"testing"

	"github.com/roxamen/roxamen/shmem"
	"github.com/roxamen/roxamen/shmem/ep"
	"github.com/roxamen/roxamen/shmem/ep/eptest"
)

// BenchmarkDispatchCombine1PE measures the local work of a call (staging, grouping, partial
// sums, the sum of what came back) on DeepSeek-V3's decode shape in a 1-PE job.
func BenchmarkDispatchCombine1PE(bm *testing.B) {
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
	bm.ResetTimer()
	for i := 0; i < bm.N; i++ {
		r, h, err := buf.Dispatch(ctx, in.X, in.Idx, in.Weights)
		if err != nil {
			bm.Fatal(err)
		}
		if _, err := buf.Combine(ctx, r.X, h); err != nil {
			bm.Fatal(err)
		}
	}
}
