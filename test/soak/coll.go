package main

// The collective and expert-parallel steps of a round. Every PE draws the same choices from the
// shared random stream (which team, which call, how many elements, which root and op), fills its
// source from the seed, the round and its world PE, makes the call, and checks its own result
// against what it computes from every PE's inputs.

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/roxamen/roxamen/shmem"
	"github.com/roxamen/roxamen/shmem/ep"
	"github.com/roxamen/roxamen/shmem/ep/eptest"
)

// collMax is the most elements of one PE's block: past the eager path's payload, so that both
// the one-shot and the two-shot algorithms run.
const collMax = 4096

// collState is what the collective and ep steps use, made once per job.
type collState struct {
	src, dst   shmem.Sym[int64]   // npes*collMax elements each
	fsrc, fdst shmem.Sym[float64] // collMax elements each
	half       *shmem.Team        // the even world PEs; nil on the odd ones
	halfPEs    []int              // its members' world PEs
	eps        []*ep.Buffer
}

// epConfigs are the ep buffers' shapes: both modes, both payload types.
func epConfigs(n int) []ep.Config {
	return []ep.Config{
		{Hidden: 40, TopK: 2, Experts: 2 * n, MaxTokens: 24, DType: ep.DTypeBF16, Mode: ep.Normal},
		{Hidden: 16, TopK: 3, Experts: 3 * n, MaxTokens: 16, DType: ep.DTypeF32, Mode: ep.LowLatency},
	}
}

func (s *soak) setupColl(ctx context.Context) error {
	c := &s.cs
	var err error
	if c.src, err = shmem.Alloc[int64](s.w, s.n*collMax); err != nil {
		return err
	}
	if c.dst, err = shmem.Alloc[int64](s.w, s.n*collMax); err != nil {
		return err
	}
	if c.fsrc, err = shmem.Alloc[float64](s.w, collMax); err != nil {
		return err
	}
	if c.fdst, err = shmem.Alloc[float64](s.w, collMax); err != nil {
		return err
	}
	if c.half, err = s.w.TeamWorld().SplitStrided(ctx, 0, 2, (s.n+1)/2); err != nil {
		return err
	}
	for pe := 0; pe < s.n; pe += 2 {
		c.halfPEs = append(c.halfPEs, pe)
	}
	for _, cfg := range epConfigs(s.n) {
		b, err := ep.New(s.w, cfg)
		if err != nil {
			return err
		}
		c.eps = append(c.eps, b)
	}
	return nil
}

// The collectives the soak calls.
const (
	collAllReduce = iota
	collAllReduceF64
	collBroadcast
	collFCollect
	collAllToAll
	collReduceScatter
	nColls
)

var collNames = [nColls]string{"AllReduce", "AllReduce(float64)", "Broadcast", "FCollect", "AllToAll", "ReduceScatter"}

var intOps = []shmem.Op{shmem.OpSum, shmem.OpXor, shmem.OpMax, shmem.OpMin, shmem.OpAnd, shmem.OpOr}

// collInput is element i of world PE pe's source in round r.
func (s *soak) collInput(r, pe, i int) int64 { return s.value(r, pe, 1<<15, i) }

// fold applies op to a and b as the reduction does for int64.
func fold(op shmem.Op, a, b int64) int64 {
	switch op {
	case shmem.OpSum:
		return a + b
	case shmem.OpXor:
		return a ^ b
	case shmem.OpMax:
		return max(a, b)
	case shmem.OpMin:
		return min(a, b)
	case shmem.OpAnd:
		return a & b
	default:
		return a | b
	}
}

// asFloat is a finite float64 made from v, negative ones included.
func asFloat(v int64) float64 { return float64(v>>11) / (1 << 20) }

// collective runs one collective of round r on a team the shared stream picks.
func (s *soak) collective(ctx context.Context, r int, rng *rand.Rand) error {
	c := &s.cs
	// Every PE draws the same numbers, members of the chosen team or not.
	useHalf := rng.IntN(3) == 0
	kind := rng.IntN(nColls)
	count := 1 + rng.IntN([]int{8, 256, collMax}[rng.IntN(3)])
	op := intOps[rng.IntN(len(intOps))]
	fop := []shmem.Op{shmem.OpMax, shmem.OpMin}[rng.IntN(2)]
	rootDraw := rng.IntN(s.n)
	inPlace := rng.IntN(4) == 0
	team, members := s.w.TeamWorld(), make([]int, s.n)
	for i := range members {
		members[i] = i
	}
	if useHalf {
		team, members = c.half, c.halfPEs
		if team == nil {
			return nil // not a member: this PE sits this one out
		}
	}
	n, me := len(members), team.MyPE()
	if kind == collAllToAll || kind == collReduceScatter || kind == collFCollect {
		count = min(count, collMax*s.n/n) // n blocks of count fit the buffers
		count = max(count, 1)
	}
	root := rootDraw % n
	what := fmt.Sprintf("round %d: %s of %d elements on %v", r, collNames[kind], count, team)
	fill := func(sym shmem.Sym[int64], k int) {
		local := sym.Local()
		for i := 0; i < k; i++ {
			local[i] = s.collInput(r, s.me, i)
		}
	}
	srcN := count
	if kind == collAllToAll || kind == collReduceScatter {
		srcN = n * count
	}
	src, _ := c.src.Slice(0, srcN)
	fill(src, srcN)
	dstN := count
	if kind == collFCollect || kind == collAllToAll {
		dstN = n * count
	}
	dst, _ := c.dst.Slice(0, dstN)
	var want []int64
	err := s.timed(opColl, func() error {
		switch kind {
		case collAllReduce:
			if inPlace {
				dst = src
			}
			want = make([]int64, count)
			for i := range want {
				want[i] = s.collInput(r, members[0], i)
				for _, pe := range members[1:] {
					want[i] = fold(op, want[i], s.collInput(r, pe, i))
				}
			}
			what += fmt.Sprintf(" (%v)", op)
			return shmem.AllReduce(ctx, team, dst, src, op)
		case collAllReduceF64:
			fsrc, _ := c.fsrc.Slice(0, count)
			fdst, _ := c.fdst.Slice(0, count)
			for i := range fsrc.Local() {
				fsrc.Local()[i] = asFloat(s.collInput(r, s.me, i))
			}
			what += fmt.Sprintf(" (%v)", fop)
			if err := shmem.AllReduce(ctx, team, fdst, fsrc, fop); err != nil {
				return err
			}
			for i, got := range fdst.Local() {
				w := asFloat(s.collInput(r, members[0], i))
				for _, pe := range members[1:] {
					if fop == shmem.OpMax {
						w = math.Max(w, asFloat(s.collInput(r, pe, i)))
					} else {
						w = math.Min(w, asFloat(s.collInput(r, pe, i)))
					}
				}
				if got != w {
					s.wrongf("%s: element %d is %v, want %v", what, i, got, w)
					return nil
				}
			}
			return nil
		case collBroadcast:
			if inPlace {
				dst = src
			}
			want = make([]int64, count)
			for i := range want {
				want[i] = s.collInput(r, members[root], i)
			}
			what += fmt.Sprintf(" (root %d)", root)
			return shmem.Broadcast(ctx, team, dst, src, root)
		case collFCollect:
			want = make([]int64, 0, n*count)
			for _, pe := range members {
				for i := 0; i < count; i++ {
					want = append(want, s.collInput(r, pe, i))
				}
			}
			return shmem.FCollect(ctx, team, dst, src)
		case collAllToAll:
			want = make([]int64, 0, n*count)
			for _, pe := range members {
				for i := 0; i < count; i++ {
					want = append(want, s.collInput(r, pe, me*count+i))
				}
			}
			return shmem.AllToAll(ctx, team, dst, src)
		default: // collReduceScatter
			want = make([]int64, count)
			for i := range want {
				for _, pe := range members {
					want[i] += s.collInput(r, pe, me*count+i)
				}
			}
			return shmem.ReduceScatter(ctx, team, dst, src, shmem.OpSum)
		}
	})
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	for i, w := range want {
		if got := dst.Local()[i]; got != w {
			s.wrongf("%s: element %d is %#x, want %#x", what, i, got, w)
			break
		}
	}
	return nil
}

// dispatchCombine runs one Dispatch and its Combine on a buffer the shared stream picks, with a
// routing every PE generates for every PE, and checks both against eptest's reference.
func (s *soak) dispatchCombine(ctx context.Context, r int, rng *rand.Rand) error {
	cfgs := epConfigs(s.n)
	b := rng.IntN(len(cfgs))
	kind := []eptest.Kind{eptest.Random, eptest.Random, eptest.Full, eptest.Skewed}[rng.IntN(4)]
	seed := s.seed ^ uint64(r)<<20
	cfg := cfgs[b]
	ins := make([]eptest.Input, s.n)
	for pe := range ins {
		ins[pe] = eptest.Gen(cfg, s.n, pe, seed, kind)
	}
	what := fmt.Sprintf("round %d: ep %v %v, %s routing", r, cfg.Mode, cfg.DType, kind)
	var out ep.Tokens
	var wrong error
	err := s.timed(opEP, func() error {
		in := ins[s.me]
		recv, h, err := s.cs.eps[b].Dispatch(ctx, in.X, in.Idx, in.Weights)
		if err != nil {
			return err
		}
		wrong = eptest.CheckDispatch(cfg, ins, s.me, recv) // its error names Dispatch
		out, err = s.cs.eps[b].Combine(ctx, eptest.Apply(cfg, recv), h)
		return err
	})
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if wrong == nil {
		wrong = eptest.CheckCombine(cfg, s.n, ins[s.me], out) // its error names Combine
	}
	if wrong != nil {
		s.wrongf("%s: %v", what, wrong)
	}
	return nil
}
