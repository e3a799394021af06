package ep_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/roxamen/roxamen/device"
	"github.com/roxamen/roxamen/shmem"
	"github.com/roxamen/roxamen/shmem/ep"
)

// The stream-ordered forms check on the host what the host can see before anything is enqueued,
// on every backend (here the host backend, which then refuses them: they run on GPUs).
func TestStreamFormChecks(t *testing.T) {
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
	if got, want := a.MaxRows(), 1*4*2; got != want {
		t.Fatalf("MaxRows %d, want %d", got, want)
	}
	st, err := w.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer st.Destroy()
	in, err := shmem.Alloc[byte](w, 4096)
	if err != nil {
		t.Fatal(err)
	}
	x, idx, wt := in.Device(), in.Device().Add(1024), in.Device().Add(2048)
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
	_, _, err = a.DispatchOnStream(nil, ep.DeviceTokens{Ptr: x, Rows: 2}, idx, wt)
	expect(err, shmem.ErrBadArgument, "ep.DispatchOnStream on PE 0", "nil stream")
	_, _, err = a.DispatchOnStream(st, ep.DeviceTokens{Ptr: x, Rows: 5}, idx, wt)
	expect(err, ep.ErrTooManyTokens, "ep.DispatchOnStream on PE 0", "5 tokens, MaxTokens is 4")
	_, _, err = a.DispatchOnStream(st, ep.DeviceTokens{Ptr: x, Rows: -1}, idx, wt)
	expect(err, ep.ErrShape, "-1 rows")
	_, _, err = a.DispatchOnStream(st, ep.DeviceTokens{Ptr: x, Rows: 2}, 0, wt)
	expect(err, shmem.ErrBadArgument, "nil device address for 2 tokens")
	_, _, err = a.DispatchOnStream(st, ep.DeviceTokens{Ptr: x, Rows: 2}, idx.Add(4), wt)
	expect(err, shmem.ErrMisaligned, "topkIdx", "8-byte aligned")
	_, _, err = a.DispatchOnStream(st, ep.DeviceTokens{Ptr: x.Add(1), Rows: 2}, idx, wt)
	expect(err, shmem.ErrMisaligned, "x at", "2-byte aligned (bf16)")
	_, _, err = a.DispatchOnStream(st, ep.DeviceTokens{Ptr: x, Rows: 2}, idx, wt.Add(2))
	expect(err, shmem.ErrMisaligned, "topkWeights", "4-byte aligned")
	_, _, err = a.DispatchOnStream(st, ep.DeviceTokens{Ptr: x, Rows: 2}, idx, wt)
	expect(err, device.ErrNotSupported, "ep.DispatchOnStream on PE 0", "GPU World")
	// No tokens: no address is needed (and the backend is the only thing left to refuse).
	_, _, err = a.DispatchOnStream(st, ep.DeviceTokens{}, 0, 0)
	expect(err, device.ErrNotSupported)

	_, h, err := a.Dispatch(ctx, ep.Tokens{BF16: make([]shmem.BFloat16, 8)}, []int64{0, 3}, []float32{1, 1})
	if err != nil {
		t.Fatal(err)
	}
	y := ep.DeviceTokens{Ptr: x, Rows: a.MaxRows()}
	_, err = b.CombineOnStream(st, y, h)
	expect(err, ep.ErrForeignHandle, "ep.CombineOnStream on PE 0", "buffer")
	_, err = a.CombineOnStream(st, y, nil)
	expect(err, ep.ErrForeignHandle, "nil handle")
	_, err = a.CombineOnStream(st, ep.DeviceTokens{Ptr: x, Rows: a.MaxRows() - 1}, h)
	expect(err, ep.ErrShape, "room for 7 rows, want MaxRows = 8")
	_, err = a.CombineOnStream(st, ep.DeviceTokens{Ptr: x.Add(1), Rows: a.MaxRows()}, h)
	expect(err, shmem.ErrMisaligned, "y at")
	_, err = a.CombineOnStream(nil, y, h)
	expect(err, shmem.ErrBadArgument, "nil stream")
	_, err = a.CombineOnStream(st, y, h)
	expect(err, device.ErrNotSupported, "ep.CombineOnStream on PE 0")
	// The blocking Combine still takes the handle: nothing was enqueued or consumed.
	if _, err := a.Combine(ctx, ep.Tokens{BF16: make([]shmem.BFloat16, h.Rows()*8)}, h); err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(a.Free(), b.Free()); err != nil {
		t.Fatal(err)
	}
	_, _, err = a.DispatchOnStream(st, ep.DeviceTokens{}, 0, 0)
	expect(err, ep.ErrClosed, "freed")
	_, err = a.CombineOnStream(st, y, h)
	expect(err, ep.ErrClosed, "freed")
}
