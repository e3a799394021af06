package shmem

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// Over the reordering delivery path a non-blocking fetch-add really completes late: a blocking
// get issued right after the call (gets overtake pending operations there) finds the word not yet
// added to in some rounds, and after Quiet the result holds the old value and the word the sum.
// Performed at once, as a blocking AMO, the late rounds would be none.
func TestAtomicFetchAddNBICompletesAtQuiet(t *testing.T) {
	t.Setenv("ROX_DELIVERY", "reorder")
	const rounds = 200
	job(t, 2, func(w *World) error {
		ctx := context.Background()
		x, err := Alloc[int64](w, 1)
		if err != nil {
			return err
		}
		if err := w.BarrierAll(ctx); err != nil {
			return err
		}
		var bad error // a failure on PE 0 still meets PE 1 at the barrier
		if w.MyPE() == 0 {
			bad = func() error {
				late := 0
				for i := 0; i < rounds; i++ {
					var old int64 = -1
					if err := AtomicFetchAddNBI(x, 0, 1, 1, &old); err != nil {
						return err
					}
					v, err := x.G(0, 1)
					if err != nil {
						return err
					}
					if v == int64(i) {
						late++
					}
					if err := w.Quiet(); err != nil {
						return err
					}
					if old != int64(i) {
						return fmt.Errorf("round %d: after Quiet the fetched value is %d, want %d", i, old, i)
					}
					if v, err := x.G(0, 1); err != nil || v != int64(i+1) {
						return fmt.Errorf("round %d: after Quiet PE 1's word is %d (%v), want %d", i, v, err, i+1)
					}
				}
				if late == 0 {
					return fmt.Errorf("the fetch-add was performed before the call returned in all %d rounds: it does not complete late", rounds)
				}
				t.Logf("the fetch-add was still pending after the call in %d of %d rounds", late, rounds)
				return nil
			}()
		}
		return errors.Join(bad, w.BarrierAll(ctx))
	})
}

// Every fetching _nbi form, 32- and 64-bit, on the runtime's own paths and on a context: the
// value after Quiet is the old one, the word what the operation makes of it.
func TestAtomicFetchNBIForms(t *testing.T) {
	for _, delivery := range []string{"direct", "reorder"} {
		t.Run(delivery, func(t *testing.T) {
			t.Setenv("ROX_DELIVERY", delivery)
			job(t, 2, func(w *World) error {
				ctx := context.Background()
				x, err := Alloc[uint32](w, 8)
				if err != nil {
					return err
				}
				y, err := Alloc[int64](w, 2)
				if err != nil {
					return err
				}
				if w.MyPE() == 1 {
					for i := range x.Local() {
						x.Local()[i] = uint32(i + 1)
					}
					y.Local()[0], y.Local()[1] = 100, 101
				}
				if err := w.BarrierAll(ctx); err != nil {
					return err
				}
				if w.MyPE() == 0 {
					c, err := w.CreateCtx(CtxPrivate)
					if err != nil {
						return err
					}
					var r [8]uint32
					var r64 [2]int64
					calls := []error{
						AtomicFetchNBI(x, 0, 1, &r[0]),
						AtomicSwapNBI(x, 1, 7, 1, &r[1]),
						AtomicCompareSwapNBI(x, 2, 0, 9, 1, &r[2]),
						AtomicFetchAddNBI(x, 3, 5, 1, &r[3]),
						AtomicFetchIncNBI(x, 4, 1, &r[4]),
						AtomicFetchAndNBI(x, 5, 0, 1, &r[5]),
						AtomicFetchOrNBI(x, 6, 0x10, 1, &r[6]),
						AtomicFetchXorNBI(x, 7, 0xff, 1, &r[7]),
						CtxAtomicFetchAddNBI(c, y, 0, 3, 1, &r64[0]),
						CtxAtomicSwapNBI(c, y, 1, -4, 1, &r64[1]),
					}
					if err := errors.Join(calls...); err != nil {
						return err
					}
					if err := c.Quiet(); err != nil {
						return err
					}
					if r64 != [2]int64{100, 101} {
						return fmt.Errorf("after the context's Quiet the 64-bit results are %v, want [100 101]", r64)
					}
					if err := w.Quiet(); err != nil {
						return err
					}
					want := [8]uint32{1, 2, 3, 4, 5, 6, 7, 8}
					if r != want {
						return fmt.Errorf("after Quiet the fetched values are %v, want %v", r, want)
					}
					if err := c.Destroy(); err != nil {
						return err
					}
				}
				if err := w.BarrierAll(ctx); err != nil {
					return err
				}
				if w.MyPE() == 1 {
					want := []uint32{1, 7, 3, 9, 6, 0, 0x17, 8 ^ 0xff}
					for i, v := range x.Local() {
						if v != want[i] {
							return fmt.Errorf("PE 1's 32-bit words are %v, want %v", x.Local(), want)
						}
					}
					if y.Local()[0] != 103 || y.Local()[1] != -4 {
						return fmt.Errorf("PE 1's 64-bit words are %v, want [103 -4]", y.Local())
					}
				}
				return nil
			})
		})
	}
}

// A bad call fails naming the call, the PE and the value, and writes nothing.
func TestAtomicFetchNBIErrors(t *testing.T) {
	job(t, 2, func(w *World) error {
		ctx := context.Background()
		x, err := Alloc[int64](w, 2)
		if err != nil {
			return err
		}
		var bad error // a failure on PE 0 still meets PE 1 at the barrier
		if w.MyPE() == 0 {
			var r int64 = 42
			cases := []struct {
				err  error
				kind error
				says string
			}{
				{AtomicFetchAddNBI(x, 0, 1, 1, nil), ErrBadArgument, "AtomicFetchAddNBI on PE 0: bad argument: nil fetch pointer (target PE 1"},
				{AtomicFetchAddNBI(x, 0, 1, 5, &r), ErrPERange, "AtomicFetchAddNBI on PE 0: PE out of range: target PE 5"},
				{AtomicSwapNBI(x, 2, 1, 1, &r), ErrBounds, "AtomicSwapNBI on PE 0: outside the symmetric allocation: elements [2, 3)"},
				{AtomicFetchNBI(x, -1, 1, &r), ErrBounds, "AtomicFetchNBI on PE 0"},
			}
			for i, c := range cases {
				if !errors.Is(c.err, c.kind) || !strings.Contains(fmt.Sprint(c.err), c.says) {
					bad = errors.Join(bad, fmt.Errorf("case %d: error %v, want %v containing %q", i, c.err, c.kind, c.says))
				}
			}
			if err := w.Quiet(); err != nil {
				bad = errors.Join(bad, err)
			}
			if r != 42 {
				bad = errors.Join(bad, fmt.Errorf("a failed call wrote its fetch value: %d", r))
			}
		}
		if err := w.BarrierAll(ctx); err != nil {
			return errors.Join(bad, err)
		}
		if bad != nil {
			return bad
		}
		if x.Local()[0] != 0 || x.Local()[1] != 0 {
			return fmt.Errorf("PE %d: a failed call changed the target: %v", w.MyPE(), x.Local())
		}
		return nil
	})
}
