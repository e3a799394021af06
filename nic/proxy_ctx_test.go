package nic

import (
	"context"
	"testing"
	"time"
)

// heldRoute carries puts nowhere and acknowledges them through QuietAsync: while held, the
// acknowledgement it hands out waits until release is closed (a peer that is slow to ack).
type heldRoute struct {
	held    bool
	release chan struct{}
	issued  chan uint64 // the ticket of every descriptor issued
}

func (h *heldRoute) Issue(d *Desc) error         { h.issued <- d.Seq - 1; return nil }
func (h *heldRoute) Fence(int) error             { return nil }
func (h *heldRoute) Quiet(context.Context) error { <-h.release; return nil }
func (h *heldRoute) QuietAsync() <-chan error {
	ch := make(chan error, 1)
	if !h.held {
		ch <- nil
		return ch
	}
	go func() { <-h.release; ch <- nil }()
	return ch
}

// Two rings (two device contexts) on one proxy: a put on ring B whose acknowledgement is held
// does not hold back ring A's completion, and B completes once released. The proxy completes each
// ring in its own ticket order, not in the order of all rings' batches.
func TestProxyRingsCompleteIndependently(t *testing.T) {
	release := make(chan struct{})
	never := make(chan struct{})
	close(never) // the free route's quiet never waits
	free := &heldRoute{release: never, issued: make(chan uint64, 16)}
	held := &heldRoute{held: true, release: release, issued: make(chan uint64, 16)}
	a, _ := AllocRing(8)
	b, _ := AllocRing(8)
	px, err := NewProxy(ProxyConfig{PE: 0, NPEs: 3, HeapSize: 4096, Routes: []Route{free, held, free},
		Rings: []*Ring{a, b}, Timeout: 5 * time.Second, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	defer px.Close()
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()
	ctx := ctxT(t)
	if _, err := b.Push(ctx, &Desc{Op: OpPut, PE: 1, Size: 8, Src: localBase}); err != nil {
		t.Fatal(err)
	}
	<-held.issued // B's put is issued; its acknowledgement is held
	if _, err := a.Push(ctx, &Desc{Op: OpPut, PE: 2, Size: 8, Src: localBase}); err != nil {
		t.Fatal(err)
	}
	// a hang breaker, not a speed limit: before the fix, A waited for B's acknowledgement forever
	qctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := a.Quiet(qctx); err != nil {
		t.Fatalf("quiet on ring A while ring B's put is held: %v", err)
	}
	if got := b.Completed(); got != 0 {
		t.Fatalf("ring B completed %d with its acknowledgement held", got)
	}
	close(release)
	if err := b.Quiet(ctx); err != nil {
		t.Fatalf("quiet on ring B after release: %v", err)
	}
	if a.Completed() != 1 || b.Completed() != 1 {
		t.Fatalf("completed: A %d, B %d; want 1 and 1", a.Completed(), b.Completed())
	}
}
