package ep_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/roxamen/roxamen/internal/seam"
	"github.com/roxamen/roxamen/shmem"
	"github.com/roxamen/roxamen/shmem/ep"
	"github.com/roxamen/roxamen/shmem/ep/eptest"
	"github.com/roxamen/roxamen/tools/testjob"
)

// TestReorder runs Dispatch and Combine on the reordering delivery path (ROX_DELIVERY=reorder),
// which delivers every put, AMO and put-with-signal as late and out of order as the memory model
// allows: a 3-PE job of this test binary under the launcher, TestReorderWorker being one PE. Both
// modes, both payload types, random, skewed and full routings and two dispatches in flight are
// checked against eptest's host reference bit for bit; then one PE's refused Dispatch must fail the
// others' at once and leave the buffer in step.
func TestReorder(t *testing.T) {
	if os.Getenv("ROX_EP_REORDER_WORKER") != "" {
		t.Skip("in a worker")
	}
	testjob.Workers{NPEs: 3, Worker: "TestReorderWorker", Marker: "ROX_EP_REORDER_WORKER",
		Env: []string{"ROX_DELIVERY=reorder", "ROX_TIMEOUT=20s", "ROX_HEAP_SIZE=32M"}, Timeout: 3 * time.Minute}.Run(t)
}

func TestReorderWorker(t *testing.T) {
	if os.Getenv("ROX_EP_REORDER_WORKER") == "" {
		t.Skip("a PE of TestReorder")
	}
	ctx := context.Background()
	w, err := shmem.Init(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Finalize()
	if seam.Reorder(w) == nil {
		t.Fatal("ROX_DELIVERY=reorder did not select the reordering path")
	}
	npes, me := w.NPEs(), w.MyPE()
	for _, mode := range []ep.Mode{ep.Normal, ep.LowLatency} {
		for _, dt := range []ep.DType{ep.DTypeBF16, ep.DTypeF32} {
			cfg := ep.Config{Hidden: 67, TopK: 4, Experts: 3 * npes, MaxTokens: 24, DType: dt, Mode: mode}
			buf, err := ep.New(w, cfg)
			if err != nil {
				t.Fatal(err)
			}
			round := func(seed uint64, kind eptest.Kind) error {
				ins := make([]eptest.Input, npes)
				for pe := range ins {
					ins[pe] = eptest.Gen(cfg, npes, pe, seed, kind)
				}
				in := ins[me]
				r, h, err := buf.Dispatch(ctx, in.X, in.Idx, in.Weights)
				if err != nil {
					return err
				}
				if err := eptest.CheckDispatch(cfg, ins, me, r); err != nil {
					return err
				}
				out, err := buf.Combine(ctx, eptest.Apply(cfg, r), h)
				if err != nil {
					return err
				}
				return eptest.CheckCombine(cfg, npes, in, out)
			}
			where := fmt.Sprintf("%v %v", mode, dt)
			for seed, kind := range []eptest.Kind{eptest.Random, eptest.Skewed, eptest.Full, eptest.Random} {
				if err := round(uint64(seed), kind); err != nil {
					t.Fatalf("%s, %s routing: %v", where, kind, err)
				}
			}
			// Two dispatches in flight, combined in the other order.
			var ins [2][]eptest.Input
			var recv [2]*ep.Recv
			var hs [2]*ep.Handle
			for j := range ins {
				ins[j] = make([]eptest.Input, npes)
				for pe := range ins[j] {
					ins[j][pe] = eptest.Gen(cfg, npes, pe, uint64(100+j), eptest.Random)
				}
				in := ins[j][me]
				if recv[j], hs[j], err = buf.Dispatch(ctx, in.X, in.Idx, in.Weights); err != nil {
					t.Fatal(err)
				}
			}
			for _, j := range []int{1, 0} {
				out, err := buf.Combine(ctx, eptest.Apply(cfg, recv[j]), hs[j])
				if err != nil {
					t.Fatal(err)
				}
				if err := eptest.CheckCombine(cfg, npes, ins[j][me], out); err != nil {
					t.Fatalf("%s: dispatch %d of two in flight: %v", where, j, err)
				}
			}
			// PE 1's Dispatch is refused (an expert out of range, then too many tokens): the
			// others' fails at once naming it, and the next Dispatch pairs with the next.
			for _, bad := range []struct {
				kind  error
				spoil func(in *eptest.Input)
			}{
				{ep.ErrExpertRange, func(in *eptest.Input) { in.Idx[0] = int64(cfg.Experts) }},
				{ep.ErrTooManyTokens, func(in *eptest.Input) {
					in.X = eptest.Gen(ep.Config{Hidden: cfg.Hidden, TopK: 1, Experts: 1, MaxTokens: cfg.MaxTokens + 1, DType: dt}, 1, 0, 1, eptest.Full).X
					in.Idx, in.Weights = make([]int64, (cfg.MaxTokens+1)*cfg.TopK), make([]float32, (cfg.MaxTokens+1)*cfg.TopK)
				}},
			} {
				in := eptest.Gen(cfg, npes, me, 7, eptest.Full)
				if me == 1 {
					bad.spoil(&in)
				}
				_, _, err := buf.Dispatch(ctx, in.X, in.Idx, in.Weights)
				switch {
				case me == 1 && !errors.Is(err, bad.kind):
					t.Fatalf("%s: PE 1's bad Dispatch: %v, want %v", where, err, bad.kind)
				case me != 1 && (!errors.Is(err, shmem.ErrMismatch) || !strings.Contains(err.Error(), "PE 1 refused")):
					t.Fatalf("%s: Dispatch beside PE 1's refused one: %v, want ErrMismatch naming PE 1", where, err)
				}
				if err := round(9, eptest.Full); err != nil {
					t.Fatalf("%s: after PE 1's refused Dispatch (%v): %v", where, bad.kind, err)
				}
			}
			if err := buf.Free(); err != nil {
				t.Fatal(err)
			}
		}
	}
}
