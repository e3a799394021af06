package litmusrun

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/roxamen/roxamen/device"
	"github.com/roxamen/roxamen/kernels"
	"github.com/roxamen/roxamen/memmodel"
	"github.com/roxamen/roxamen/shmem"
)

// The GPU runner: every PE of the job runs its column of a test as device code on its own GPU
// (PEs may share one), through the runtime's roxk_litmus interpreter kernel. One launch runs a
// batch of iterations on every PE, with the kernel's barriers between iterations and random
// delays (NOP instructions) in the program; then PE 0 reads every PE's registers and variables
// from the symmetric heap and hands the states, one per iteration, to memmodel.Conform.

// gpuBatch is the most iterations one launch runs.
const gpuBatch = 2048

// insnWords is the size of one kernels.LitmusInsn in uint64 words.
const insnWords = 5

// packProgram returns prog in roxk_insn_t's memory layout (little-endian), as uint64 words.
func packProgram(prog []kernels.LitmusInsn) []uint64 {
	w := make([]uint64, 0, insnWords*len(prog))
	for _, x := range prog {
		w = append(w, uint64(x.Op)|uint64(uint32(x.PE))<<32, x.Var, x.Value, x.Aux, uint64(x.Reg)|uint64(x.Sub)<<32)
	}
	return w
}

// unpackProgram is packProgram's inverse.
func unpackProgram(w []uint64) ([]kernels.LitmusInsn, error) {
	if len(w)%insnWords != 0 {
		return nil, fmt.Errorf("litmusrun: a packed program of %d words is not a whole number of %d-word instructions", len(w), insnWords)
	}
	var prog []kernels.LitmusInsn
	for i := 0; i < len(w); i += insnWords {
		prog = append(prog, kernels.LitmusInsn{Op: uint32(w[i]), PE: int32(uint32(w[i] >> 32)), Var: w[i+1], Value: w[i+2], Aux: w[i+3],
			Reg: uint32(w[i+4]), Sub: uint32(w[i+4] >> 32)})
	}
	return prog, nil
}

// IsGPU reports whether w runs on a GPU backend (the GPU runner's domain).
func IsGPU(w *shmem.World) bool { return w.Device().Driver != "host" }

// GPUConfig is what a GPU run may change of the default.
type GPUConfig struct {
	// Object, when not nil, is the runtime code object the columns run on instead of the embedded
	// one (kernels.ObjectFor): a mutant build of the device library (BuildMutant).
	Object []byte
	// Mutation names the mutation Object was built with: PE 0 prints on how many of the tests
	// where the model says it matters a forbidden outcome was seen (memmodel.PrintCaught).
	Mutation memmodel.Mutation
}

// RunSuiteGPU is RunSuite on a GPU backend: every test's columns run as device code. Every PE
// must call it with the same tests. iters is the number of launches of a test without barriers
// (gpuCopies copies each); a test with barriers or syncs runs iters*gpuCopies iterations of one
// copy, so that every test runs as many.
func RunSuiteGPU(ctx context.Context, w *shmem.World, tests []*memmodel.Test, mode memmodel.Mode, opt memmodel.Options, iters int, seed int64, gc GPUConfig, out io.Writer) error {
	img, _, err := kernels.ObjectFor(w.Device().Arch)
	if err != nil {
		return fmt.Errorf("litmusrun: PE %d: runtime object for %s: %w", w.MyPE(), w.Device().Arch, err)
	}
	if gc.Object != nil {
		img = gc.Object
	}
	mod, err := w.LoadModule(img)
	if err != nil {
		return fmt.Errorf("litmusrun: PE %d: %w", w.MyPE(), err)
	}
	defer mod.Unload()
	var errs []error
	var rows []memmodel.Power
	for i, t := range tests {
		if miss := t.Unsupported(GPUFeatures); !miss.Empty() {
			if w.MyPE() == 0 && out != nil {
				fmt.Fprintf(out, "litmus: %s not run on the GPU: roxk_litmus lacks %s\n\n", t.Name, miss)
			}
			p, err := memmodel.NotRunPower(t, mode, opt, GPUFeatures)
			if err != nil {
				return errors.Join(append(errs, err)...)
			}
			rows = append(rows, p)
			continue
		}
		var p memmodel.Power
		var err error
		if g, gerr := newGPUTest(t); gerr == nil && g.nbar == 0 {
			err = runPEGPUMulti(ctx, w, mod, t, mode, opt, iters, seed+int64(i), out, &p)
		} else { // as many iterations as the many-copies path runs copies
			err = runPEGPU(ctx, w, mod, t, mode, opt, iters*gpuCopies, seed+int64(i), out, &p)
		}
		rows = append(rows, p)
		var fe *memmodel.ForbiddenError
		if err != nil && !errors.As(err, &fe) {
			return errors.Join(append(errs, err)...)
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	if w.MyPE() == 0 && out != nil {
		how := fmt.Sprintf("%d copies per launch in random blocks beside %d stressing blocks, plain loads L1-cached after a random warm (tests with barriers: one copy per iteration)", gpuCopies, gpuStress)
		memmodel.PrintPower(out, fmt.Sprintf("PE 0 on %s, %s, %s", w.Device(), mode, how), rows)
		if gc.Mutation != memmodel.MutNone {
			if err := memmodel.PrintCaught(out, tests, rows, gc.Mutation, opt); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// gpuPE is one PE's state for one test on the GPU runner.
type gpuPE struct {
	w       *shmem.World
	mod     *shmem.Module
	g       *gpuTest
	vars    shmem.Sym[uint64]
	prog    shmem.Sym[uint64]
	init    shmem.Sym[uint64]
	regsOut shmem.Sym[uint64]
	memOut  shmem.Sym[uint64]
	n       uint32 // instructions of this PE's program
	ninit   uint32
	iters   int
	ran     int              // iterations launched so far
	states  []memmodel.State // PE 0: gathered, not yet returned
}

// RunPEGPU runs t iters times on this PE's GPU; every PE of the job must call it with the same
// arguments and a module of the runtime object (kernels.ObjectFor). PE 0 prints the histogram
// to out and returns a *memmodel.ForbiddenError if it observed an outcome that mode forbids.
func RunPEGPU(ctx context.Context, w *shmem.World, mod *shmem.Module, t *memmodel.Test, mode memmodel.Mode, opt memmodel.Options, iters int, seed int64, out io.Writer) error {
	return runPEGPU(ctx, w, mod, t, mode, opt, iters, seed, out, nil)
}

// runPEGPU is RunPEGPU; on PE 0 it stores the run's power in power (if not nil).
func runPEGPU(ctx context.Context, w *shmem.World, mod *shmem.Module, t *memmodel.Test, mode memmodel.Mode, opt memmodel.Options, iters int, seed int64, out io.Writer, power *memmodel.Power) error {
	me := w.MyPE()
	if iters <= 0 {
		return fmt.Errorf("litmusrun: RunPEGPU on PE %d: iterations %d, want > 0", me, iters)
	}
	if need := NPEs([]*memmodel.Test{t}); need > w.NPEs() {
		return fmt.Errorf("litmusrun: RunPEGPU on PE %d: test %s needs %d PEs, the job has %d", me, t.Name, need, w.NPEs())
	}
	g, err := newGPUTest(t)
	if err != nil {
		return err
	}
	p := &gpuPE{w: w, mod: mod, g: g, iters: iters}
	if p.vars, err = shmem.Alloc[uint64](w, g.words()); err != nil {
		return err
	}
	defer w.Free(p.vars.Mem())
	base := p.vars.Mem().Offset()
	// Every PE sizes the program array for the longest program of the job (allocation is collective).
	longest := 1
	var mine []kernels.LitmusInsn
	for q := 0; q < w.NPEs(); q++ {
		prog, err := g.encode(q, base, uint64(seed)*0x9e3779b97f4a7c15+uint64(q)+1)
		if err != nil {
			return err
		}
		longest = max(longest, len(prog))
		if q == me {
			mine = prog
		}
	}
	if p.prog, err = shmem.Alloc[uint64](w, insnWords*longest); err != nil {
		return err
	}
	defer w.Free(p.prog.Mem())
	initv := g.initList(me, base)
	if p.init, err = shmem.Alloc[uint64](w, max(2, len(initv))); err != nil {
		return err
	}
	defer w.Free(p.init.Mem())
	batch := min(iters, gpuBatch)
	if p.regsOut, err = shmem.Alloc[uint64](w, batch*g.nregs); err != nil {
		return err
	}
	defer w.Free(p.regsOut.Mem())
	if p.memOut, err = shmem.Alloc[uint64](w, batch*max(1, len(g.vars))); err != nil {
		return err
	}
	defer w.Free(p.memOut.Mem())
	if len(mine) > 0 {
		if err := p.prog.Put(0, packProgram(mine), me); err != nil {
			return err
		}
	}
	if err := p.init.Put(0, initv, me); err != nil {
		return err
	}
	p.n, p.ninit = uint32(len(mine)), uint32(len(initv)/2)
	if me == 0 {
		h, err := memmodel.Conform(ctx, t, p, mode, opt, iters, seed, out)
		if h != nil && power != nil {
			if r, cerr := memmodel.Check(t, mode, opt); cerr == nil {
				*power = memmodel.NewPower(h, r)
			}
		}
		return err
	}
	for p.ran < iters {
		if err := p.batch(ctx); err != nil {
			return fmt.Errorf("litmusrun: %s on the GPU, PE %d, iterations %d..: %w", t.Name, me, p.ran, err)
		}
	}
	return nil
}

// RunOnce makes PE 0 a memmodel.Runner: it returns the gathered states one per call, running the
// next batch on every PE when none is left. The delays are drawn on the GPU from the test's seed
// and the iteration, not from seed.
func (p *gpuPE) RunOnce(ctx context.Context, t *memmodel.Test, seed int64) (memmodel.State, error) {
	if len(p.states) == 0 {
		if p.ran >= p.iters {
			return nil, fmt.Errorf("litmusrun: %s on the GPU: iteration %d past the %d run", t.Name, p.ran, p.iters)
		}
		if err := p.batch(ctx); err != nil {
			return nil, fmt.Errorf("GPU, PE 0, iterations %d..: %w", p.ran, err)
		}
	}
	s := p.states[0]
	p.states = p.states[1:]
	return s, nil
}

// batch runs the next batch of iterations on every PE; PE 0 gathers the states.
func (p *gpuPE) batch(ctx context.Context) error {
	w, g := p.w, p.g
	n := min(p.iters-p.ran, gpuBatch)
	if err := w.BarrierAll(ctx); err != nil { // PE 0 has read the last batch's results
		return err
	}
	if err := p.mod.Launch("roxk_litmus", device.D1(1), device.D1(64), 0, p.prog.Device(), p.n, p.regsOut.Device(), uint32(g.nregs),
		p.init.Device(), p.ninit, p.memOut.Device(), uint64(n)); err != nil {
		return err
	}
	if err := p.mod.Sync(ctx); err != nil {
		return err
	}
	if err := w.BarrierAll(ctx); err != nil { // every PE's results are in its heap
		return err
	}
	p.ran += n
	if w.MyPE() != 0 {
		return nil
	}
	nv := len(g.vars)
	regs := make([][]uint64, w.NPEs())
	mem := make([][]uint64, w.NPEs())
	for q := range regs {
		regs[q] = make([]uint64, n*g.nregs)
		if err := p.regsOut.Get(0, regs[q], q); err != nil {
			return err
		}
		mem[q] = make([]uint64, n*nv)
		if nv > 0 {
			if err := p.memOut.Get(0, mem[q], q); err != nil {
				return err
			}
		}
	}
	r1, m1 := make([][]uint64, w.NPEs()), make([][]uint64, w.NPEs())
	for it := 0; it < n; it++ {
		for q := range regs {
			r1[q] = regs[q][it*g.nregs : (it+1)*g.nregs]
			m1[q] = mem[q][it*nv : (it+1)*nv]
		}
		st, err := g.state(r1, m1)
		if err != nil {
			return err
		}
		p.states = append(p.states, st)
	}
	return nil
}

// GPUFeatures is what the roxk_litmus interpreter encodes beyond the core: put-with-signal and
// putsig_nbi, named contexts (run on the default one, as on the host), the inc and bitwise AMOs,
// signal_fetch, stores and loads through roxshmem_ptr, gets into locations, puts from buffers, and
// sync (a sync_all of the block, as barrier runs, on the one-copy path). Threads of a PE, the _nbi
// fetches (the device library has none), teams, collectives, the polls (no vector polls on the
// device), the call variants, puts and gets of several elements, NOSTORE and 32-bit halves have
// no encoding yet.
var GPUFeatures = memmodel.Features(memmodel.Signals, memmodel.Contexts, memmodel.PutSignalNBI, memmodel.AMOInc,
	memmodel.AMOBitwise, memmodel.SignalFetch, memmodel.PtrStore, memmodel.PtrLoad, memmodel.GetIntoLocation,
	memmodel.PutFromBuffer, memmodel.Sync)
