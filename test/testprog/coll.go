package main

// Collective scenarios: "coll" checks every collective against a reference on the world and on
// split teams (run under each ROX_COLL_ALGO, on one node and across namespaces); "collkill" has
// the last PE die while the others are in a collective.

import (
	"context"
	"fmt"
	"math"
	"os"
	"time"

	"github.com/roxamen/roxamen/shmem"
)

func init() {
	scenarios["coll"] = collScenario
	scenarios["collkill"] = collKill
}

// input is PE pe's element i: a function of both, so every PE knows every PE's inputs.
func input(pe, i int) float64 {
	x := uint64(pe)*0x9E3779B97F4A7C15 ^ uint64(i)*0xBF58476D1CE4E5B9
	x ^= x >> 29
	x *= 0x94D049BB133111EB
	x ^= x >> 32
	switch x % 97 {
	case 0:
		return math.Inf(1)
	case 1:
		return math.Copysign(0, -1)
	}
	return float64(x>>11)/(1<<53) - 0.5
}

func collScenario(ctx context.Context, w *shmem.World) error {
	world := w.TeamWorld()
	teams := []*shmem.Team{world}
	if w.NPEs() >= 3 {
		odd, err := world.SplitStrided(ctx, 1, 2, (w.NPEs())/2)
		if err != nil {
			return err
		}
		x, y, err := world.Split2D(ctx, 2)
		if err != nil {
			return err
		}
		teams = append(teams, odd, x, y)
	}
	const maxCount = 1<<17 + 5
	n := w.NPEs()
	src, err := shmem.Alloc[float64](w, n*maxCount)
	if err != nil {
		return err
	}
	dst, err := shmem.Alloc[float64](w, n*maxCount)
	if err != nil {
		return err
	}
	bsrc, _ := shmem.Alloc[shmem.BFloat16](w, maxCount)
	bdst, _ := shmem.Alloc[shmem.BFloat16](w, maxCount)
	me := w.MyPE()
	for _, team := range teams {
		if team == nil {
			continue
		}
		np, tme := team.NPEs(), team.MyPE()
		for _, count := range []int{0, 1, 7, 4099, maxCount} {
			s, _ := src.Slice(0, count)
			d, _ := dst.Slice(0, count)
			for i := range s.Local() {
				s.Local()[i] = input(me, i)
			}
			if err := shmem.AllReduce(ctx, team, d, s, shmem.OpSum); err != nil {
				return err
			}
			for i, v := range d.Local() {
				ref := input(team.WorldPE(0), i)
				for j := 1; j < np; j++ {
					ref += input(team.WorldPE(j), i)
				}
				if math.Float64bits(v) != math.Float64bits(ref) {
					return fmt.Errorf("%s: AllReduce of %d (%s): element %d is %v, want %v", team, count, team.Algorithm(shmem.CollAllReduce, count*8), i, v, ref)
				}
			}
			// bfloat16: float32 accumulation in team PE order, rounded once
			bs, _ := bsrc.Slice(0, count)
			bd, _ := bdst.Slice(0, count)
			for i := range bs.Local() {
				bs.Local()[i] = shmem.BFloat16From(float32(input(me, i)))
			}
			if err := shmem.AllReduce(ctx, team, bd, bs, shmem.OpSum); err != nil {
				return err
			}
			for i, v := range bd.Local() {
				acc := shmem.BFloat16From(float32(input(team.WorldPE(0), i))).Float32()
				for j := 1; j < np; j++ {
					acc += shmem.BFloat16From(float32(input(team.WorldPE(j), i))).Float32()
				}
				if v != shmem.BFloat16From(acc) {
					return fmt.Errorf("%s: bfloat16 AllReduce of %d: element %d is %#x, want %#x", team, count, i, v, shmem.BFloat16From(acc))
				}
			}
			// FCollect, AllToAll, ReduceScatter, Broadcast
			fd, _ := dst.Slice(0, np*count)
			if err := shmem.FCollect(ctx, team, fd, s); err != nil {
				return err
			}
			for i, v := range fd.Local() {
				if want := input(team.WorldPE(i/count), i%count); v != want && !(v == 0 && want == 0) {
					return fmt.Errorf("%s: FCollect of %d: element %d is %v, want %v", team, count, i, v, want)
				}
			}
			as, _ := src.Slice(0, np*count)
			for i := range as.Local() {
				as.Local()[i] = input(me, i)
			}
			if err := shmem.AllToAll(ctx, team, fd, as); err != nil {
				return err
			}
			for i, v := range fd.Local() {
				if want := input(team.WorldPE(i/count), tme*count+i%count); v != want && !(v == 0 && want == 0) {
					return fmt.Errorf("%s: AllToAll of %d: element %d is %v, want %v", team, count, i, v, want)
				}
			}
			if err := shmem.ReduceScatter(ctx, team, d, as, shmem.OpMax); err != nil {
				return err
			}
			for i, v := range d.Local() {
				ref := input(team.WorldPE(0), tme*count+i)
				for j := 1; j < np; j++ {
					ref = max(ref, input(team.WorldPE(j), tme*count+i))
				}
				if math.Float64bits(v) != math.Float64bits(ref) {
					return fmt.Errorf("%s: ReduceScatter of %d: element %d is %v, want %v", team, count, i, v, ref)
				}
			}
			root := np - 1
			if err := shmem.Broadcast(ctx, team, d, s, root); err != nil {
				return err
			}
			for i, v := range d.Local() {
				if want := input(team.WorldPE(root), i); math.Float64bits(v) != math.Float64bits(want) {
					return fmt.Errorf("%s: Broadcast of %d: element %d is %v, want %v", team, count, i, v, want)
				}
			}
		}
		if err := team.Barrier(ctx); err != nil {
			return err
		}
	}
	if me == 0 {
		fmt.Printf("coll: algorithms %s at 8 B, %s at 1 MiB\n", world.Algorithm(shmem.CollAllReduce, 8), world.Algorithm(shmem.CollAllReduce, 1<<20))
	}
	return w.BarrierAll(ctx)
}

// collKill: the last PE dies while the others are in an all-reduce; they must fail naming it.
func collKill(ctx context.Context, w *shmem.World) error {
	src, err := shmem.Alloc[int64](w, 1024)
	if err != nil {
		return err
	}
	dst, err := shmem.Alloc[int64](w, 1024)
	if err != nil {
		return err
	}
	if err := shmem.AllReduce(ctx, w.TeamWorld(), dst, src, shmem.OpSum); err != nil {
		return err
	}
	if w.MyPE() == w.NPEs()-1 {
		time.Sleep(200 * time.Millisecond)
		os.Exit(3)
	}
	for i := 0; ; i++ {
		if err := shmem.AllReduce(ctx, w.TeamWorld(), dst, src, shmem.OpSum); err != nil {
			return err
		}
	}
}
