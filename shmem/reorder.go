package shmem

import (
	"context"
	"time"

	"github.com/roxamen/roxamen/internal/env"
	"github.com/roxamen/roxamen/internal/seam"
	"github.com/roxamen/roxamen/nic"
)

// The reordering delivery path (ROX_DELIVERY=reorder) is a test and conformance mode of the host
// backend: every put, AMO, put-with-signal and get of this PE, to any PE including itself, goes
// through a nic.Reorder, which delivers them out of order as far as Fence, Quiet and
// put-with-signal allow (nic/reorder.go). The World's own Fence, Quiet, barrier and waits are then
// what keeps order; the litmus runner (tools/litmusrun) shows that they do.

// startReorder wraps the paths to every PE in the reordering path. It runs after the barrier's
// space is reserved and before anything decides by path kind (the collectives).
func (w *World) startReorder() error {
	name, _ := env.DeliveryBug.String()
	mut, err := nic.ParseMutation(name)
	if err != nil {
		return err
	}
	w.allocMu.Lock()
	lock, err := w.heap.Alloc(nic.LockBytes, 0) // at the same offset on every PE, as the barrier's
	w.allocMu.Unlock()
	if err != nil {
		return err
	}
	heaps := make(nic.Mapped, w.npes)
	copy(heaps, w.peers)
	var inner nic.Transport = heaps
	if w.transport != nil {
		inner = mixed{heaps, w.transport}
	}
	r := nic.NewReorder(inner, w.npes, nic.ReorderConfig{
		PE: w.pe, Seed: time.Now().UnixNano(), Bypass: w.ordering == Bypass, Mutation: mut,
		Local: w.local, Heaps: heaps, LockOff: lock, Timeout: w.timeout,
	})
	w.reorder, w.transport, w.progress = r, r, nil
	w.remotes = w.remotes[:0]
	for pe := range w.paths {
		w.remotes = append(w.remotes, pe)
		w.paths[pe] = remote{r, pe}
		if pe != w.pe {
			w.peers[pe] = nil // P, G and the collectives take the path too
		}
	}
	return nil
}

// The conformance runner reaches the path through internal/seam (its plain-access emulation:
// Store, Load, Cache; its mutation switch: Arm), so that World and Ctx export nothing of it.
func init() {
	seam.Reorder = func(world any) any {
		if w, _ := world.(*World); w != nil && w.reorder != nil {
			return w.reorder
		}
		return nil
	}
	seam.CtxReorder = func(ctx any) any {
		if c, _ := ctx.(*Ctx); c != nil && c.ro != nil {
			return c.ro
		}
		return nil
	}
}

// acquire is an acquiring call's invalidate on the reordering path (in bypass, plain loads see
// memory as it is now).
func (w *World) acquire() {
	if w.reorder != nil {
		w.reorder.Acquire()
	}
}

// syncPoint is a collective's entry on the reordering path: sync_all, team sync, all-reduce and
// broadcast order the PE's completed plain accesses before every member's return (MODEL.md §3b,
// rule 8), which the path's late loads (and, in Strict, buffered stores) must then be.
func (w *World) syncPoint() {
	if w.reorder != nil {
		w.reorder.Sync()
	}
}

// mixed reaches the PEs whose heaps are mapped here by copies and atomics, the others through t.
type mixed struct {
	heaps nic.Mapped
	t     nic.Transport
}

func (m mixed) Put(pe int, dst uint64, src []byte) error {
	if m.heaps[pe] != nil {
		return m.heaps.Put(pe, dst, src)
	}
	return m.t.Put(pe, dst, src)
}

func (m mixed) Get(pe int, src uint64, dst []byte) error {
	if m.heaps[pe] != nil {
		return m.heaps.Get(pe, src, dst)
	}
	return m.t.Get(pe, src, dst)
}

func (m mixed) AMO(pe int, op nic.AMOOp, width int, dst uint64, value, compare uint64) (uint64, error) {
	if m.heaps[pe] != nil {
		return m.heaps.AMO(pe, op, width, dst, value, compare)
	}
	return m.t.AMO(pe, op, width, dst, value, compare)
}

func (m mixed) PutSignal(pe int, dst uint64, src []byte, sig uint64, op nic.SignalOp, v uint64) error {
	if m.heaps[pe] != nil {
		return m.heaps.PutSignal(pe, dst, src, sig, op, v)
	}
	return m.t.PutSignal(pe, dst, src, sig, op, v)
}

func (m mixed) Fence(pe int) error {
	if m.heaps[pe] != nil {
		return nil
	}
	return m.t.Fence(pe)
}

func (m mixed) Quiet(ctx context.Context, pe int) error {
	if pe >= 0 && m.heaps[pe] != nil {
		return nil
	}
	return m.t.Quiet(ctx, pe)
}

func (m mixed) Close() error { return m.t.Close() }
