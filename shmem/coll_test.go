package shmem

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"strings"
	"testing"
	"time"

	"github.com/roxamen/roxamen/shmem/internal/coll"
)

// nodeJob is job with the PEs spread over nodes: PE pe is on node pe / perNode (perNode 0: one
// node). PEs of different nodes reach each other through the TCP transport over loopback, as
// they would between hosts.
func nodeJob(t *testing.T, n, perNode int, heap int64, body func(w *World) error) {
	t.Helper()
	if perNode <= 0 {
		perNode = n
	}
	runJob(t, n, perNode, heap, jobTimeout, body, false)
}

// jobTimeout is ROX_TIMEOUT for nodeJob's PEs.
var jobTimeout = 20 * time.Second

func TestTeams(t *testing.T) {
	nodeJob(t, 6, 0, 8<<20, func(w *World) error {
		ctx := context.Background()
		me := w.MyPE()
		world := w.TeamWorld()
		if world.MyPE() != me || world.NPEs() != 6 {
			return fmt.Errorf("world team: PE %d of %d", world.MyPE(), world.NPEs())
		}
		if sh := w.TeamShared(); sh.NPEs() != 6 || sh.MyPE() != me {
			return fmt.Errorf("shared team: PE %d of %d", sh.MyPE(), sh.NPEs())
		}
		odd, err := world.SplitStrided(ctx, 1, 2, 3)
		if err != nil {
			return err
		}
		if me%2 == 0 {
			if odd != nil {
				return fmt.Errorf("PE %d got a team it is not in: %v", me, odd)
			}
		} else {
			if odd.MyPE() != me/2 || odd.NPEs() != 3 {
				return fmt.Errorf("odd team: PE %d of %d", odd.MyPE(), odd.NPEs())
			}
			if got := odd.TranslatePE(2, world); got != 5 {
				return fmt.Errorf("TranslatePE(2, world) = %d, want 5", got)
			}
			if got := world.TranslatePE(0, odd); got != -1 {
				return fmt.Errorf("world PE 0 in the odd team: %d, want -1", got)
			}
		}
		x, y, err := world.Split2D(ctx, 4)
		if err != nil {
			return err
		}
		wantX, wantY := 4, 2
		if me >= 4 {
			wantX = 2
		}
		if me%4 >= 2 {
			wantY = 1
		}
		if x.NPEs() != wantX || x.MyPE() != me%4 || y.NPEs() != wantY || y.MyPE() != me/4 {
			return fmt.Errorf("2D: x %d of %d, y %d of %d", x.MyPE(), x.NPEs(), y.MyPE(), y.NPEs())
		}
		// A sub-team splits further, and its PEs' collectives stay among them.
		if odd != nil {
			pair, err := odd.SplitStrided(ctx, 0, 2, 2) // world PEs 1 and 5
			if err != nil {
				return err
			}
			if (me == 1 || me == 5) != (pair != nil) {
				return fmt.Errorf("PE %d: pair team %v", me, pair)
			}
			if pair != nil {
				if err := pair.Barrier(ctx); err != nil {
					return err
				}
				if err := pair.Destroy(ctx); err != nil {
					return err
				}
				if err := pair.Sync(ctx); !errors.Is(err, ErrTeamDestroyed) {
					return fmt.Errorf("Sync on a destroyed team: %v, want ErrTeamDestroyed", err)
				}
			}
			if err := odd.Destroy(ctx); err != nil {
				return err
			}
		}
		var none *Team
		if err := none.Sync(ctx); !errors.Is(err, ErrNotInTeam) {
			return fmt.Errorf("Sync on a nil team: %v", err)
		}
		if none.MyPE() != -1 || none.NPEs() != 0 {
			return fmt.Errorf("nil team: MyPE %d NPEs %d", none.MyPE(), none.NPEs())
		}
		if err := world.Destroy(ctx); !errors.Is(err, ErrBadArgument) {
			return fmt.Errorf("destroying TeamWorld: %v", err)
		}
		// Bad arguments are an error on every PE, after the exchange.
		if _, err := world.SplitStrided(ctx, 4, 2, 2); !errors.Is(err, ErrBadArgument) {
			return fmt.Errorf("split past the team: %v", err)
		}
		if _, err := world.SplitStrided(ctx, 0, 1+me%2, 2); !errors.Is(err, ErrMismatch) || !strings.Contains(err.Error(), "stride") {
			return fmt.Errorf("mismatched split: %v", err)
		}
		// The limit: MaxTeams live, world and shared and the two 2D ones included.
		var live []*Team
		for i := 0; ; i++ {
			nt, err := world.SplitStrided(ctx, 0, 1, 6)
			if err != nil {
				if !errors.Is(err, ErrTeamLimit) || !strings.Contains(err.Error(), "MaxTeams") || i != MaxTeams-4 {
					return fmt.Errorf("split %d: %v, want ErrTeamLimit after %d", i, err, MaxTeams-4)
				}
				break
			}
			live = append(live, nt)
		}
		for _, nt := range live {
			if err := nt.Destroy(ctx); err != nil {
				return err
			}
		}
		// Slots come back and a team on a reused slot works.
		again, err := world.SplitStrided(ctx, 0, 1, 6)
		if err != nil {
			return err
		}
		src, err := Alloc[int64](w, 1)
		if err != nil {
			return err
		}
		dst, err := Alloc[int64](w, 1)
		if err != nil {
			return err
		}
		src.Local()[0] = int64(me)
		for i := 0; i < 3; i++ {
			if err := AllReduce(ctx, again, dst, src, OpSum); err != nil {
				return err
			}
			if dst.Local()[0] != 15 {
				return fmt.Errorf("sum on a reused slot: %d", dst.Local()[0])
			}
		}
		return again.Destroy(ctx)
	})
}

func TestCollSmoke(t *testing.T) {
	for _, tc := range []struct {
		algo       string
		n, perNode int
	}{{"auto", 4, 0}, {"oneshot", 3, 0}, {"twoshot", 3, 0}, {"ring", 3, 0}, {"ring", 4, 2}, {"hier", 4, 2}, {"hier", 6, 2}, {"auto", 6, 2}} {
		t.Run(fmt.Sprintf("%s/%d/%d", tc.algo, tc.n, tc.perNode), func(t *testing.T) {
			t.Setenv("ROX_COLL_ALGO", tc.algo)
			nodeJob(t, tc.n, tc.perNode, 16<<20, func(w *World) error {
				ctx := context.Background()
				big := 300001
				if raceEnabled {
					big = 70001
				}
				for _, count := range []int{0, 1, 7, 4099, big} {
					src, err := Alloc[float64](w, count)
					if err != nil {
						return err
					}
					dst, err := Alloc[float64](w, count)
					if err != nil {
						return err
					}
					for i := range src.Local() {
						src.Local()[i] = float64(w.MyPE()*1000+i) / 3
					}
					if err := AllReduce(ctx, w.TeamWorld(), dst, src, OpSum); err != nil {
						return err
					}
					for i, v := range dst.Local() {
						var ref float64
						for pe := 0; pe < w.NPEs(); pe++ {
							ref += float64(pe*1000+i) / 3
						}
						if math.Float64bits(v) != math.Float64bits(ref) {
							return fmt.Errorf("count %d: dst[%d] = %v, want %v", count, i, v, ref)
						}
					}
					w.Free(src.Mem())
					w.Free(dst.Mem())
				}
				return nil
			})
		})
	}
}

var _ = bits.Len

// A team made on the slot of a destroyed team finds no old header word that looks like one of its
// epochs: the header's first word is the flag a receiver polls over load/store, and a team of
// another size has its regions elsewhere in the slot, where the old team left payload bytes. Here a
// 3-PE team's all-reduce leaves 0xff bytes where the 2-PE team's region 1 starts; without the
// zeroing on Destroy, team PE 0 of the new team takes them for PE 1's header (an ErrMismatch, or
// a wrong result) before PE 1 has sent it.
func TestCollSlotReuse(t *testing.T) {
	nodeJob(t, 3, 0, 8<<20, func(w *World) error {
		ctx := context.Background()
		world := w.TeamWorld()
		a, err := world.SplitStrided(ctx, 0, 1, 3)
		if err != nil {
			return err
		}
		src, err := Alloc[uint8](w, 1024)
		if err != nil {
			return err
		}
		dst, err := Alloc[uint8](w, 1024)
		if err != nil {
			return err
		}
		for i := range src.Local() {
			src.Local()[i] = 0xff
		}
		for range 2 { // both halves of the slot
			if err := AllReduce(ctx, a, dst, src, OpMax); err != nil {
				return err
			}
		}
		slot := a.slot
		if err := a.Destroy(ctx); err != nil {
			return err
		}
		b, err := world.SplitStrided(ctx, 0, 1, 2)
		if err != nil || b == nil {
			return err
		}
		if b.slot != slot {
			return fmt.Errorf("the new team has slot %d, the destroyed one had %d: the test needs them equal", b.slot, slot)
		}
		if r0, _ := b.c.Region(0, 1); func() bool {
			r1, c := a.c.Region(0, 1)
			return r0 < r1+coll.HeaderSize || r0 >= r1+coll.HeaderSize+uint64(c)
		}() {
			return fmt.Errorf("region 1 of the new team does not start in the old team's payload: the test needs it to")
		}
		for i := range src.Local() {
			src.Local()[i] = uint8(w.MyPE() + 1)
		}
		if b.MyPE() == 1 {
			time.Sleep(50 * time.Millisecond) // PE 0 waits for this PE's header, not for old bytes
		}
		d, _ := dst.Slice(0, 8)
		s, _ := src.Slice(0, 8)
		if err := AllReduce(ctx, b, d, s, OpSum); err != nil {
			return err
		}
		for i, v := range d.Local() {
			if v != 3 {
				return fmt.Errorf("element %d is %d, want 3", i, v)
			}
		}
		return b.Destroy(ctx)
	})
}
