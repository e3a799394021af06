package ep_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/roxamen/roxamen/device"
	"github.com/roxamen/roxamen/shmem"
	"github.com/roxamen/roxamen/shmem/ep"
)

// TestZeroValues (issue 26, 6): every exported entry point of ep, given zero values (a nil or
// zero World, Buffer, Handle, stream, context, Tokens, Recv or Config), returns an error naming
// the call, or a defined result where it returns no error; none panics.
func TestZeroValues(t *testing.T) {
	ctx := context.Background()
	w, err := shmem.Init(ctx, shmem.WithHeapSize(16<<20))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Finalize()
	cfg := ep.Config{Hidden: 8, TopK: 2, Experts: 4, MaxTokens: 4, DType: ep.DTypeF32}
	good, err := ep.New(w, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer good.Free()

	// call runs f, which returns the entry point's error (nil for those that return none),
	// and fails the test on a panic, or on a nil error where want names the call.
	call := func(name, want string, f func() error) {
		t.Helper()
		var err error
		func() {
			defer func() {
				if p := recover(); p != nil {
					err = fmt.Errorf("panic: %v", p)
					t.Errorf("%s panicked: %v", name, p)
				}
			}()
			err = f()
		}()
		switch {
		case strings.HasPrefix(fmt.Sprint(err), "panic: "):
		case want == "" && err != nil:
			t.Errorf("%s: %v, want no error", name, err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
			t.Errorf("%s: %v, want an error naming %s", name, err, want)
		}
	}
	var nilWorld *shmem.World
	var nilBuf *ep.Buffer
	zeroBuf := &ep.Buffer{}
	var nilCtx context.Context
	for _, c := range []struct {
		what string
		b    *ep.Buffer
	}{{"nil Buffer", nilBuf}, {"zero Buffer", zeroBuf}} {
		b := c.b
		call(c.what+".Dispatch", "ep.Dispatch", func() error { _, _, err := b.Dispatch(ctx, ep.Tokens{}, nil, nil); return err })
		call(c.what+".DispatchInto", "ep.Dispatch", func() error {
			_, _, err := b.DispatchInto(ctx, &ep.Recv{}, ep.Tokens{}, nil, nil)
			return err
		})
		call(c.what+".Combine", "ep.Combine", func() error { _, err := b.Combine(ctx, ep.Tokens{}, &ep.Handle{}); return err })
		call(c.what+".CombineInto", "ep.Combine", func() error { _, err := b.CombineInto(ctx, ep.Tokens{}, ep.Tokens{}, nil); return err })
		call(c.what+".DispatchOnStream", "ep.DispatchOnStream", func() error {
			_, _, err := b.DispatchOnStream(nil, ep.DeviceTokens{}, 0, 0)
			return err
		})
		call(c.what+".CombineOnStream", "ep.CombineOnStream", func() error {
			_, err := b.CombineOnStream(nil, ep.DeviceTokens{}, &ep.Handle{})
			return err
		})
		call(c.what+".Free", "ep.Free", func() error { return b.Free() })
		call(c.what+".Config", "", func() error {
			if got := b.Config(); got != (ep.Config{}) {
				return fmt.Errorf("Config %+v, want the zero Config", got)
			}
			return nil
		})
		call(c.what+".MaxRows", "", func() error {
			if got := b.MaxRows(); got != 0 {
				return fmt.Errorf("MaxRows %d, want 0", got)
			}
			return nil
		})
	}
	// A real buffer with a zero or nil Handle, a nil stream, a nil context, zero Tokens.
	for _, h := range []*ep.Handle{nil, {}} {
		what := fmt.Sprintf("Handle %#v", h)
		call("Combine with "+what, "ep.Combine on PE 0", func() error { _, err := good.Combine(ctx, ep.Tokens{}, h); return err })
		call("CombineInto with "+what, "ep.Combine on PE 0", func() error { _, err := good.CombineInto(ctx, ep.Tokens{}, ep.Tokens{}, h); return err })
		call("CombineOnStream with "+what, "ep.CombineOnStream on PE 0", func() error {
			_, err := good.CombineOnStream(nil, ep.DeviceTokens{}, h)
			return err
		})
		call(what+".Rows", "", func() error {
			if got := h.Rows(); got != 0 {
				return fmt.Errorf("Rows %d, want 0", got)
			}
			return nil
		})
	}
	call("DispatchOnStream on a nil stream", "ep.DispatchOnStream on PE 0", func() error {
		_, _, err := good.DispatchOnStream(nil, ep.DeviceTokens{}, 0, 0)
		return err
	})
	// A nil context is context.Background(), as in the device forms; zero Tokens are no tokens.
	var h *ep.Handle
	call("Dispatch with a nil context and zero Tokens", "", func() error {
		var err error
		_, h, err = good.DispatchInto(nilCtx, &ep.Recv{}, ep.Tokens{}, nil, nil)
		return err
	})
	call("Combine with a nil context and zero Tokens", "", func() error { _, err := good.Combine(nilCtx, ep.Tokens{}, h); return err })
	call("New with a nil World", "ep.New", func() error { _, err := ep.New(nilWorld, cfg); return err })
	call("New with a zero Config", "ep.New on PE 0", func() error { _, err := ep.New(w, ep.Config{}); return err })
	call("HeapBytes of zero values", "", func() error { ep.HeapBytes(ep.Config{}, 0); return nil })
	call("DeviceHeapBytes of zero values", "", func() error { ep.DeviceHeapBytes(ep.Config{}, 0); return nil })
	call("BF16 conversions of nil", "", func() error {
		_, _, _ = ep.BF16sFromFloat32(nil), ep.Float32s(nil), shmem.BFloat16(0).Float32()
		_, _ = ep.DType(0).String(), ep.Mode(0).String()
		return nil
	})
	var _ device.Stream // the stream-ordered forms take one; nil above
}
