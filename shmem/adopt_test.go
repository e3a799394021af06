package shmem

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/roxamen/roxamen/device"
)

// TestAdoptStreamHost: a stream adopted by its handle is the stream itself (a collective
// enqueued on the adopted one is complete when the owner's stream is synchronized), its Destroy
// leaves the stream working, and a handle of no stream, like LinkState on the host backend, is
// refused naming the call and the PE.
func TestAdoptStreamHost(t *testing.T) {
	const n = 2
	job(t, n, func(w *World) error {
		ctx := context.Background()
		st, err := w.NewStream()
		if err != nil {
			return err
		}
		defer st.Destroy()
		a, err := w.AdoptStream(st.Handle())
		if err != nil {
			return err
		}
		src, err := Alloc[int64](w, 4)
		if err != nil {
			return err
		}
		sum, _ := Alloc[int64](w, 4)
		for i := range 4 {
			src.Local()[i] = int64(w.pe*10 + i)
		}
		if err := AllReduceOnStream(a, w.TeamWorld(), sum, src, OpSum); err != nil {
			return err
		}
		if err := w.SyncStream(ctx, st); err != nil {
			return err
		}
		for i, v := range sum.Local() {
			if want := int64(10 + 2*i); v != want {
				return fmt.Errorf("PE %d: sum[%d] = %d through the adopted stream, want %d", w.pe, i, v, want)
			}
		}
		if err := a.Destroy(); err != nil {
			return err
		}
		if err := BroadcastOnStream(st, w.TeamWorld(), sum, src, 1); err != nil {
			return err
		}
		if err := w.SyncStream(ctx, st); err != nil {
			return fmt.Errorf("the stream after its adopted wrapper's Destroy: %w", err)
		}
		if _, err := w.AdoptStream(st.Handle() + 1000); !errors.Is(err, ErrBadArgument) || !strings.Contains(err.Error(), fmt.Sprintf("AdoptStream on PE %d", w.pe)) {
			return fmt.Errorf("adopting a handle of no stream: %v", err)
		}
		if err := w.LinkState(device.Ptr(0x1000), 640); !errors.Is(err, device.ErrNotSupported) || !strings.Contains(err.Error(), "LinkState on PE") {
			return fmt.Errorf("LinkState on the host backend: %v", err)
		}
		return w.BarrierAll(ctx)
	})
}
