package litmusrun

import (
	"context"
	"fmt"
	"io"
	"math/rand"

	"github.com/roxamen/roxamen/device"
	"github.com/roxamen/roxamen/memmodel"
	"github.com/roxamen/roxamen/shmem"
)

// The GPU runner's many-copies path (roxk_litmus_multi, kernels/src/runtime.hip), for tests
// without barriers: one launch per iteration runs gpuCopies copies of the PE's column, copy c in a
// block the host picks at random per launch and PE (so one copy's columns on the PEs sit in
// unrelated blocks and SMs), beside gpuStress blocks whose threads load and store other words
// until the copies are done, as GPU litmus testing does (Alglave et al., ASPLOS'15). Memory is
// reset and the PEs meet in a barrier between launches.
//
// Each variable of a copy has a line of its own (a slot of slotWords words, the variable in word
// 0), and the layout is variable-major: every copy's x, then every copy's y, ..., so that the
// locations of one copy are gpuCopies lines apart, in unrelated L2 slices. In two launches of
// three the stressing threads hammer the other words of one variable's slots (drawn per launch),
// so that the line of that location is busy while a column's store to it travels and its store
// may land after a later store of the same thread to another, idle line; in the third they
// hammer unrelated lines.

const (
	gpuCopies      = 512
	gpuStress      = 64
	gpuStressWords = 1 << 16
	slotWords      = 16 // one 128-byte line
)

// gpuMulti is one PE's state for one test on the many-copies path.
type gpuMulti struct {
	w       *shmem.World
	mod     *shmem.Module
	g       *gpuTest
	vars    shmem.Sym[uint64] // gpuCopies copies of the test's variables, g.words() apart
	prog    shmem.Sym[uint64]
	regsOut shmem.Sym[uint64]
	mapping shmem.Sym[uint32]
	stress  shmem.Sym[uint64]
	done    shmem.Sym[uint64]
	image   []uint64 // every copy's variables at the start of an iteration
	n       uint32
	seed    int64
	iters   int
	ran     int
	states  []memmodel.State
}

// runPEGPUMulti is runPEGPU for a test without barriers, on the many-copies path: iters
// launches of gpuCopies copies each.
func runPEGPUMulti(ctx context.Context, w *shmem.World, mod *shmem.Module, t *memmodel.Test, mode memmodel.Mode, opt memmodel.Options, iters int, seed int64, out io.Writer, power *memmodel.Power) error {
	me := w.MyPE()
	g, err := newGPUTest(t)
	if err != nil {
		return err
	}
	p := &gpuMulti{w: w, mod: mod, g: g, seed: seed, iters: iters}
	g.stride = 8 * slotWords * gpuCopies
	words := max(1, len(g.vars)) * slotWords * gpuCopies
	if p.vars, err = shmem.Alloc[uint64](w, words); err != nil {
		return err
	}
	defer w.Free(p.vars.Mem())
	base := p.vars.Mem().Offset()
	longest := 1
	var mine []uint64
	for q := 0; q < w.NPEs(); q++ {
		prog, err := g.encode(q, base, uint64(seed)*0x9e3779b97f4a7c15+uint64(q)+1)
		if err != nil {
			return err
		}
		longest = max(longest, len(prog))
		if q == me {
			mine = packProgram(prog)
			p.n = uint32(len(prog))
		}
	}
	if p.prog, err = shmem.Alloc[uint64](w, insnWords*longest); err != nil {
		return err
	}
	defer w.Free(p.prog.Mem())
	if p.regsOut, err = shmem.Alloc[uint64](w, gpuCopies*g.nregs); err != nil {
		return err
	}
	defer w.Free(p.regsOut.Mem())
	if p.mapping, err = shmem.Alloc[uint32](w, gpuCopies); err != nil {
		return err
	}
	defer w.Free(p.mapping.Mem())
	if p.stress, err = shmem.Alloc[uint64](w, gpuStressWords); err != nil {
		return err
	}
	defer w.Free(p.stress.Mem())
	if p.done, err = shmem.Alloc[uint64](w, 8); err != nil {
		return err
	}
	defer w.Free(p.done.Mem())
	if len(mine) > 0 {
		if err := p.prog.Put(0, mine, me); err != nil {
			return err
		}
	}
	p.image = multiImage(g, me, base, words)
	if me == 0 {
		h, err := memmodel.Conform(ctx, t, p, mode, opt, iters*gpuCopies, seed, out)
		if h != nil && power != nil {
			if r, cerr := memmodel.Check(t, mode, opt); cerr == nil {
				*power = memmodel.NewPower(h, r)
			}
		}
		return err
	}
	for p.ran < iters {
		if err := p.launch(ctx); err != nil {
			return fmt.Errorf("litmusrun: %s on the GPU (%d copies per launch), PE %d, launch %d: %w", t.Name, gpuCopies, me, p.ran, err)
		}
	}
	return nil
}

// multiImage is pe's variable array at the start of a launch (words long): every copy's
// variables at their initial values, copy c's word of variable v at (v*gpuCopies+c)*slotWords.
func multiImage(g *gpuTest, pe int, base uint64, words int) []uint64 {
	image := make([]uint64, words)
	initv := g.initList(pe, base)
	for c := 0; c < gpuCopies; c++ {
		for j := 0; j+1 < len(initv); j += 2 {
			image[c*slotWords+int((initv[j]-base)/8)] = initv[j+1]
		}
	}
	return image
}

// multiWord is the index in the variable array of copy c's word of variable v.
func multiWord(v, c int) int { return (v*gpuCopies + c) * slotWords }

// RunOnce hands PE 0's gathered states out one per call, launching on every PE when none is left.
func (p *gpuMulti) RunOnce(ctx context.Context, t *memmodel.Test, seed int64) (memmodel.State, error) {
	if len(p.states) == 0 {
		if p.ran >= p.iters {
			return nil, fmt.Errorf("litmusrun: %s on the GPU: launch %d past the %d run", t.Name, p.ran, p.iters)
		}
		if err := p.launch(ctx); err != nil {
			return nil, fmt.Errorf("GPU (%d copies per launch), PE 0, launch %d: %w", gpuCopies, p.ran, err)
		}
	}
	s := p.states[0]
	p.states = p.states[1:]
	return s, nil
}

// launch runs one iteration of every copy on every PE; PE 0 gathers the states.
func (p *gpuMulti) launch(ctx context.Context) error {
	w, g := p.w, p.g
	me := w.MyPE()
	rng := rand.New(rand.NewSource(p.seed*7919 + int64(p.ran)*131 + int64(me)))
	perm := make([]uint32, gpuCopies)
	for i, c := range rng.Perm(gpuCopies) {
		perm[i] = uint32(c)
	}
	// PE 0 reads every PE's variables after the last launch's closing barrier: none may reset
	// its own before PE 0 is done (a reset that raced that read showed whole launches of initial
	// values, outcomes the model forbids, on the H200).
	if err := w.BarrierAll(ctx); err != nil {
		return err
	}
	if err := p.vars.Put(0, p.image, me); err != nil {
		return err
	}
	if err := p.done.Put(0, []uint64{0}, me); err != nil {
		return err
	}
	if err := p.mapping.Put(0, perm, me); err != nil {
		return err
	}
	if err := w.BarrierAll(ctx); err != nil { // every PE is reset
		return err
	}
	stress, stressWords, slot := p.stress.Device(), uint64(gpuStressWords), uint32(0)
	if nv := len(g.vars); nv > 0 && rng.Intn(3) != 0 { // hammer the lines of one variable
		stress = p.vars.Device().Add(int(g.stride) * rng.Intn(nv))
		stressWords, slot = uint64(slotWords*gpuCopies), slotWords
	}
	if err := p.mod.Launch("roxk_litmus_multi", device.D1(gpuCopies+gpuStress), device.D1(64), 0,
		p.prog.Device(), p.n, p.regsOut.Device(), uint32(g.nregs), p.mapping.Device(), uint32(gpuCopies),
		uint64(8*slotWords), stress, stressWords, p.done.Device(), uint64(rng.Int63()), slot); err != nil {
		return err
	}
	if err := p.mod.Sync(ctx); err != nil {
		return err
	}
	if err := w.BarrierAll(ctx); err != nil { // every PE's results are in its heap
		return err
	}
	p.ran++
	if me != 0 {
		return nil
	}
	regs := make([][]uint64, w.NPEs())
	mem := make([][]uint64, w.NPEs())
	for q := range regs {
		regs[q] = make([]uint64, gpuCopies*g.nregs)
		if err := p.regsOut.Get(0, regs[q], q); err != nil {
			return err
		}
		mem[q] = make([]uint64, len(p.image))
		if err := p.vars.Get(0, mem[q], q); err != nil {
			return err
		}
	}
	r1, m1 := make([][]uint64, w.NPEs()), make([][]uint64, w.NPEs())
	for c := 0; c < gpuCopies; c++ {
		for q := range regs {
			r1[q] = regs[q][c*g.nregs : (c+1)*g.nregs]
			m1[q] = make([]uint64, len(g.vars))
			for v := range g.vars {
				m1[q][v] = mem[q][multiWord(v, c)]
			}
		}
		st, err := g.state(r1, m1)
		if err != nil {
			return err
		}
		p.states = append(p.states, st)
	}
	return nil
}
