package ep_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/roxamen/roxamen/shmem"
	"github.com/roxamen/roxamen/shmem/ep"
	"github.com/roxamen/roxamen/shmem/ep/eptest"
)

func TestBF16(t *testing.T) {
	cases := []struct {
		f    float32
		want shmem.BFloat16
	}{
		{1, 0x3f80}, {-2, 0xc000}, {0, 0}, {float32(math.Inf(1)), 0x7f80},
		{math.Float32frombits(0x3f808000), 0x3f80}, // a tie rounds to even (down)
		{math.Float32frombits(0x3f818000), 0x3f82}, // a tie rounds to even (up)
		{math.Float32frombits(0x3f808001), 0x3f81}, // above the tie rounds up
	}
	for _, c := range cases {
		if got := shmem.BFloat16From(c.f); got != c.want {
			t.Errorf("BFloat16From(%v = %#x) = %#x, want %#x", c.f, math.Float32bits(c.f), got, c.want)
		}
	}
	if nan := shmem.BFloat16From(float32(math.NaN())); !math.IsNaN(float64(nan.Float32())) {
		t.Errorf("NaN became %#x", nan)
	}
	for _, b := range []shmem.BFloat16{0x3f80, 0x4049, 0xc2f7, 0x0001} {
		if shmem.BFloat16From(b.Float32()) != b {
			t.Errorf("%#x does not survive widening", b)
		}
	}
}

// A lone process is a 1-PE job: every expert is local, and the whole path (stage, put to self,
// signals, grouping, partial sums) runs.
func TestOnePE(t *testing.T) {
	ctx := context.Background()
	w, err := shmem.Init(ctx, shmem.WithHeapSize(64<<20))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Finalize()
	for _, mode := range []ep.Mode{ep.Normal, ep.LowLatency} {
		for _, dt := range []ep.DType{ep.DTypeBF16, ep.DTypeF32} {
			for _, cfg := range []ep.Config{
				{Hidden: 129, TopK: 4, Experts: 6, MaxTokens: 100, DType: dt, Mode: mode},
				{Hidden: 7168, TopK: 8, Experts: 8, MaxTokens: 16, DType: dt, Mode: mode}, // combine splits over goroutines
			} {
				buf, err := ep.New(w, cfg)
				if err != nil {
					t.Fatal(err)
				}
				for seed, kind := range []eptest.Kind{eptest.Random, eptest.Skewed, eptest.Full, eptest.Random} {
					in := eptest.Gen(cfg, 1, 0, uint64(seed), kind)
					r, h, err := buf.Dispatch(ctx, in.X, in.Idx, in.Weights)
					if err != nil {
						t.Fatal(err)
					}
					if err := eptest.CheckDispatch(cfg, []eptest.Input{in}, 0, r); err != nil {
						t.Fatalf("%v %v %s: %v", mode, dt, kind, err)
					}
					out, err := buf.Combine(ctx, eptest.Apply(cfg, r), h)
					if err != nil {
						t.Fatal(err)
					}
					if err := eptest.CheckCombine(cfg, 1, in, out); err != nil {
						t.Fatalf("%v %v %s: %v", mode, dt, kind, err)
					}
				}
				if err := buf.Free(); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
}

func TestBadInput(t *testing.T) {
	ctx := context.Background()
	w, err := shmem.Init(ctx, shmem.WithHeapSize(16<<20))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Finalize()
	cfg := ep.Config{Hidden: 8, TopK: 2, Experts: 4, MaxTokens: 4, DType: ep.DTypeBF16, Mode: ep.LowLatency}
	a, err := ep.New(w, cfg)
	if err != nil {
		t.Fatal(err)
	}
	b, err := ep.New(w, cfg)
	if err != nil {
		t.Fatal(err)
	}
	x := ep.Tokens{BF16: make([]shmem.BFloat16, 2*8)}
	expect := func(err, kind error, parts ...string) {
		t.Helper()
		if !errors.Is(err, kind) {
			t.Fatalf("got %v, want %v", err, kind)
		}
		for _, p := range parts {
			if !strings.Contains(err.Error(), p) {
				t.Errorf("%q does not say %q", err, p)
			}
		}
	}
	_, _, err = a.Dispatch(ctx, x, []int64{0, 1, 3, 4}, make([]float32, 4))
	expect(err, ep.ErrExpertRange, "ep.Dispatch", "PE 0", "topkIdx[1][1] = 4")
	_, _, err = a.Dispatch(ctx, ep.Tokens{BF16: make([]shmem.BFloat16, 5*8)}, make([]int64, 10), make([]float32, 10))
	expect(err, ep.ErrTooManyTokens, "ep.Dispatch", "PE 0", "5 tokens, MaxTokens is 4")
	_, _, err = a.Dispatch(ctx, ep.Tokens{F32: make([]float32, 8)}, make([]int64, 2), make([]float32, 2))
	expect(err, ep.ErrShape, "f32")
	// Nothing was sent by the failed calls: a good one still works, and its handle belongs to a.
	in := eptest.Input{X: x, Idx: []int64{0, 3, -1, 2}, Weights: []float32{0.5, 0.25, 1, 2}, N: 2}
	r, h, err := a.Dispatch(ctx, in.X, in.Idx, in.Weights)
	if err != nil {
		t.Fatal(err)
	}
	if err := eptest.CheckDispatch(cfg, []eptest.Input{in}, 0, r); err != nil {
		t.Fatal(err)
	}
	_, err = b.Combine(ctx, eptest.Apply(cfg, r), h)
	expect(err, ep.ErrForeignHandle, "ep.Combine", "PE 0", "buffer")
	_, err = a.Combine(ctx, ep.Tokens{BF16: make([]shmem.BFloat16, 3)}, h)
	expect(err, ep.ErrShape, "ep.Combine", "3 elements")
	out, err := a.Combine(ctx, eptest.Apply(cfg, r), h)
	if err != nil {
		t.Fatal(err)
	}
	if err := eptest.CheckCombine(cfg, 1, in, out); err != nil {
		t.Fatal(err)
	}
	_, err = ep.New(w, ep.Config{Hidden: 8, TopK: 2, Experts: 4, MaxTokens: 129, Mode: ep.LowLatency})
	expect(err, shmem.ErrBadArgument, "ep.New", "MaxTokens 129")
	// The landing zone for the rows (9.9 MB) fits the 16 MiB heap, the one for the sums does not.
	huge := ep.Config{Hidden: 4096, TopK: 8, Experts: 8, MaxTokens: 1200, DType: ep.DTypeBF16}
	_, err = ep.New(w, huge)
	expect(err, shmem.ErrOutOfMemory, "ep.New on PE 0", fmt.Sprint(ep.HeapBytes(huge, 1)), "ROX_HEAP_SIZE")
	// Nothing leaked: the failed New freed the rows' zone, so 8 MiB more still fit.
	m, err := shmem.Alloc[byte](w, 8<<20)
	if err != nil {
		t.Fatalf("after the failed New: %v", err)
	}
	if err := errors.Join(w.Free(m.Mem()), a.Free(), b.Free()); err != nil {
		t.Fatal(err)
	}
}
