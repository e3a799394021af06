package shmem

import (
	"context"
	"fmt"
	"testing"
)

// TestCollReorder runs the collectives matrix on the reordering delivery path (ROX_DELIVERY=reorder),
// which delivers every put, AMO and put-with-signal as late and out of order as the memory model
// allows: a collective protocol that relies on more (two signals to one word landing in the order
// sent, say) gives wrong results or hangs here. Every algorithm runs on 3 PEs, and ring on 2 nodes
// of 2, over the world and strided teams, with the types whose folds differ, at the sizes that
// leave the eager path (4 KiB + 3, several segments of the ring's pipe in a strided team's small slot).
func TestCollReorder(t *testing.T) {
	if raceEnabled {
		t.Skip("the matrix under the race detector runs on the direct path (TestCollTable)")
	}
	t.Setenv("ROX_DELIVERY", "reorder")
	for _, tc := range []struct {
		algos      []string
		n, perNode int
	}{
		{[]string{"auto", "oneshot", "twoshot", "ring"}, 3, 0},
		{[]string{"ring"}, 4, 2}, // hier needs load/store within a node, which this path has not: it runs ring
	} {
		t.Run(fmt.Sprintf("%d/%d", tc.n, tc.perNode), func(t *testing.T) {
			nodeJob(t, tc.n, tc.perNode, 24<<20, func(w *World) error {
				if w.reorder == nil {
					return fmt.Errorf("ROX_DELIVERY=reorder did not select the reordering path")
				}
				ctx := context.Background()
				for _, algo := range tc.algos {
					if err := w.BarrierAll(ctx); err != nil {
						return err
					}
					w.teams.eng.SetAlgo(algo)
					if err := reorderTable(ctx, w, algo); err != nil {
						return fmt.Errorf("ROX_COLL_ALGO=%s: %w", algo, err)
					}
				}
				return nil
			})
		})
	}
}

// reorderTable is collTable cut to what the reordering path can run in seconds.
func reorderTable(ctx context.Context, w *World, algo string) error {
	teams, err := tableTeams(ctx, w)
	if err != nil {
		return err
	}
	for _, f := range []func() error{
		func() error { return tableType(ctx, w, teams, intSpec[int32]("int32", false), false, false) },
		func() error { return tableType(ctx, w, teams, f64, false, false) },
		func() error { return tableType(ctx, w, teams, bf16, false, false) },
	} {
		if err := f(); err != nil {
			return err
		}
	}
	for _, t := range teams[1:] {
		if t != nil {
			if err := t.Destroy(ctx); err != nil {
				return err
			}
		}
	}
	return nil
}
