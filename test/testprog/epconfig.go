package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/roxamen/roxamen/shmem"
	"github.com/roxamen/roxamen/shmem/ep"
)

func init() { scenarios["ep-config"] = epConfig }

// epConfig: PE 0 passes ep.New a different Config from the other PEs' (issue 26, 5): first BF16
// rows of 16 elements against F32 rows of 8 (buffers of the same size), then another Mode. Every
// PE's New fails at once with ErrMismatch naming the fields, both values and both PEs; a New with
// the same Config on every PE then works and dispatches.
func epConfig(ctx context.Context, w *shmem.World) error {
	npes, me := w.NPEs(), w.MyPE()
	base := ep.Config{Hidden: 8, TopK: 2, Experts: 2 * npes, MaxTokens: 8, DType: ep.DTypeF32, Mode: ep.Normal}
	type field struct{ name, pe0, others string }
	for _, c := range []struct {
		pe0    ep.Config
		fields []field
	}{
		{ep.Config{Hidden: 16, TopK: 2, Experts: 2 * npes, MaxTokens: 8, DType: ep.DTypeBF16, Mode: ep.Normal},
			[]field{{"Hidden", "16", "8"}, {"DType", "bf16", "f32"}}},
		{ep.Config{Hidden: 8, TopK: 2, Experts: 2 * npes, MaxTokens: 8, DType: ep.DTypeF32, Mode: ep.LowLatency},
			[]field{{"Mode", "low-latency", "normal"}}},
	} {
		cfg := base
		if me == 0 {
			cfg = c.pe0
		}
		_, err := ep.New(w, cfg)
		if !errors.Is(err, shmem.ErrMismatch) || !strings.Contains(err.Error(), fmt.Sprintf("ep.New on PE %d", me)) {
			return fmt.Errorf("New with PE 0's Config %+v against %+v: got %v, want ErrMismatch", c.pe0, base, err)
		}
		for _, f := range c.fields {
			// Each PE names itself first, then the first PE whose Config differs from its own.
			want := fmt.Sprintf("%s is %s on PE 0 and %s on PE 1", f.name, f.pe0, f.others)
			if me != 0 {
				want = fmt.Sprintf("%s is %s on PE %d and %s on PE 0", f.name, f.others, me, f.pe0)
			}
			if !strings.Contains(err.Error(), want) {
				return fmt.Errorf("New's mismatch does not say %q: %v", want, err)
			}
		}
		fmt.Printf("ep-config: PE %d: %v\n", me, err)
	}
	buf, err := ep.New(w, base)
	if err != nil {
		return fmt.Errorf("New with the same Config everywhere after the mismatches: %w", err)
	}
	if _, _, err := buf.Dispatch(ctx, ep.Tokens{F32: make([]float32, 8)}, []int64{0, 1}, []float32{1, 1}); err != nil {
		return err
	}
	return buf.Free()
}
