package shmem

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

// Over the reordering delivery path a context is a stream of its own: the World's Quiet (the
// default context's) leaves a context's put pending in some rounds, and a context's Quiet the
// default context's put; each context's own Quiet completes its put every time. Were the
// contexts' operations in one pool, each Quiet would complete both and no round would be late.
func TestCtxReorderQuietsOwnOperations(t *testing.T) {
	t.Setenv("ROX_DELIVERY", "reorder")
	const rounds = 200
	job(t, 2, func(w *World) error {
		ctx := context.Background()
		x, err := Alloc[int64](w, 2)
		if err != nil {
			return err
		}
		a, err := w.CreateCtx(CtxSerialized)
		if err != nil {
			return err
		}
		if a.ro == nil {
			return errors.New("a context on the reordering path has no stream of its own")
		}
		if err := w.BarrierAll(ctx); err != nil {
			return err
		}
		var bad error // a failure on PE 0 still meets PE 1 at the barrier
		if w.MyPE() == 0 {
			bad = func() error {
				ctxLate, defLate := 0, 0
				for i := 1; i <= rounds; i++ {
					if err := CtxP(a, x, 0, int64(i), 1); err != nil {
						return err
					}
					if err := w.Quiet(); err != nil {
						return err
					}
					if v, err := x.G(0, 1); err != nil {
						return err
					} else if v != int64(i) {
						ctxLate++
					}
					if err := a.Quiet(); err != nil {
						return err
					}
					if v, err := x.G(0, 1); err != nil || v != int64(i) {
						return fmt.Errorf("round %d: after the context's Quiet PE 1's word is %d (%v), want %d", i, v, err, i)
					}
					if err := x.P(1, int64(i), 1); err != nil {
						return err
					}
					if err := a.Quiet(); err != nil {
						return err
					}
					if v, err := x.G(1, 1); err != nil {
						return err
					} else if v != int64(i) {
						defLate++
					}
					if err := w.Quiet(); err != nil {
						return err
					}
					if v, err := x.G(1, 1); err != nil || v != int64(i) {
						return fmt.Errorf("round %d: after Quiet PE 1's word is %d (%v), want %d", i, v, err, i)
					}
				}
				if ctxLate == 0 || defLate == 0 {
					return fmt.Errorf("a Quiet completed another context's put in every round (context's put pending after the World's Quiet in %d of %d rounds, the World's after the context's in %d)", ctxLate, rounds, defLate)
				}
				t.Logf("pending after the other context's Quiet: the context's put in %d, the default context's in %d of %d rounds", ctxLate, defLate, rounds)
				return nil
			}()
		}
		return errors.Join(bad, w.BarrierAll(ctx), a.Destroy())
	})
}
