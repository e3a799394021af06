// Package litmusrun runs litmus tests on the real runtime through the shmem API: every process of
// the job is one PE, runs its own column of the test many times with barriers between iterations
// and random delays, and sends its registers and memory values to PE 0. On PE 0 the job is a
// memmodel.Runner (one RunOnce is one iteration on every PE) driven by memmodel.Conform, which
// builds the litmus7-style histogram and checks it against the memory model.
package litmusrun

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"sort"

	"github.com/roxamen/roxamen/memmodel"
	"github.com/roxamen/roxamen/shmem"
)

// NPEs is the number of PEs a job needs to run tests: one more than the highest PE any names.
func NPEs(tests []*memmodel.Test) int {
	n := 1
	for _, t := range tests {
		for _, c := range t.Columns {
			n = max(n, c.PE+1)
			for _, in := range c.Instrs {
				n = max(n, in.Loc.PE+1, in.Sig.PE+1)
			}
		}
		for _, iv := range t.Init {
			n = max(n, iv.Loc.PE+1)
		}
		var walk func(p *memmodel.Prop)
		walk = func(p *memmodel.Prop) {
			if p.Kind == memmodel.PropMem {
				n = max(n, p.Loc.PE+1)
			}
			for i := range p.Args {
				walk(&p.Args[i])
			}
		}
		walk(&t.Cond)
	}
	return n
}

func lastAt(s string) int {
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == '@' {
			return i
		}
	}
	return -1
}

// layout maps a test's variables to slots of two symmetric arrays (signal words must be uint64
// for put-with-signal) and its final-state keys to slots of PE 0's result array.
type layout struct {
	data, sig map[string]int // variable -> index
	keys      []string
	owner     []int // PE that reports each key
	reg       []string
	loc       []memmodel.Loc
}

func newLayout(t *memmodel.Test) (*layout, error) {
	l := &layout{data: map[string]int{}, sig: map[string]int{}}
	var vars []string
	seen := map[string]bool{}
	note := func(v string) {
		if !seen[v] {
			seen[v] = true
			vars = append(vars, v)
		}
	}
	for _, c := range t.Columns {
		for _, in := range c.Instrs {
			if in.Op == memmodel.OpPutSig {
				l.sig[in.Sig.Var] = 0
			}
			if in.Loc.Var != "" {
				note(in.Loc.Var)
			}
			if in.Sig.Var != "" {
				note(in.Sig.Var)
			}
		}
	}
	for _, iv := range t.Init {
		note(iv.Loc.Var)
	}
	var walk func(p *memmodel.Prop)
	walk = func(p *memmodel.Prop) {
		if p.Kind == memmodel.PropMem {
			note(p.Loc.Var)
		}
		for i := range p.Args {
			walk(&p.Args[i])
		}
	}
	walk(&t.Cond)
	sort.Strings(vars)
	ns, nd := 0, 0
	for _, v := range vars {
		if _, ok := l.sig[v]; ok {
			l.sig[v] = ns
			ns++
		} else {
			l.data[v] = nd
			nd++
		}
	}
	for _, c := range t.Columns {
		for _, in := range c.Instrs {
			if in.Op == memmodel.OpPutSig {
				if _, ok := l.sig[in.Loc.Var]; ok {
					return nil, fmt.Errorf("litmusrun: test %s: %s is both put-with-signal data and a signal word", t.Name, in.Loc.Var)
				}
			}
		}
	}
	l.keys = memmodel.StateKeys(t)
	for _, k := range l.keys {
		var pe int
		var rest string
		if i := lastAt(k); i >= 0 {
			fmt.Sscanf(k[i+1:], "%d", &pe)
			l.owner = append(l.owner, pe)
			l.reg = append(l.reg, "")
			l.loc = append(l.loc, memmodel.Loc{Var: k[:i], PE: pe})
			continue
		}
		if _, err := fmt.Sscanf(k, "%d:%s", &pe, &rest); err != nil {
			return nil, fmt.Errorf("litmusrun: test %s: bad state key %q", t.Name, k)
		}
		l.owner = append(l.owner, pe)
		l.reg = append(l.reg, rest)
		l.loc = append(l.loc, memmodel.Loc{})
	}
	return l, nil
}

var cmpOf = map[memmodel.Cmp]shmem.Cmp{
	memmodel.CmpEQ: shmem.CmpEQ, memmodel.CmpNE: shmem.CmpNE, memmodel.CmpLT: shmem.CmpLT,
	memmodel.CmpLE: shmem.CmpLE, memmodel.CmpGT: shmem.CmpGT, memmodel.CmpGE: shmem.CmpGE,
}

// pe is one PE's state for one test.
type pe struct {
	w      *shmem.World
	t      *memmodel.Test
	l      *layout
	data   shmem.Sym[int64]
	sig    shmem.Sym[uint64]
	res    shmem.Sym[int64]
	col    *memmodel.Column
	nbar   int
	regs   map[string]int64
	nbi    map[string][]int64 // get_nbi destinations, valid after quiet
	nbiSig map[string][]uint64
	rng    *rand.Rand
}

// spinSink keeps the delay loop from being optimized away.
var spinSink uint64

func delay(rng *rand.Rand, maxSpin int) {
	n := rng.Intn(maxSpin + 1)
	s := spinSink
	for i := 0; i < n; i++ {
		s = s*6364136223846793005 + 1442695040888963407
	}
	spinSink = s
}

// RunPE runs t iters times on this PE; every PE of the job must call it with the same arguments.
// PE 0 prints the histogram to out and returns a *memmodel.ForbiddenError if it observed an
// outcome that mode forbids; every PE returns runtime errors.
func RunPE(ctx context.Context, w *shmem.World, t *memmodel.Test, mode memmodel.Mode, opt memmodel.Options, iters int, seed int64, out io.Writer) error {
	if iters <= 0 {
		return fmt.Errorf("litmusrun: RunPE on PE %d: iterations %d, want > 0", w.MyPE(), iters)
	}
	if need := NPEs([]*memmodel.Test{t}); need > w.NPEs() {
		return fmt.Errorf("litmusrun: RunPE on PE %d: test %s needs %d PEs, the job has %d", w.MyPE(), t.Name, need, w.NPEs())
	}
	l, err := newLayout(t)
	if err != nil {
		return err
	}
	p := &pe{w: w, t: t, l: l}
	if p.data, err = shmem.Alloc[int64](w, max(1, len(l.data))); err != nil {
		return err
	}
	defer w.Free(p.data.Mem())
	if p.sig, err = shmem.Alloc[uint64](w, max(1, len(l.sig))); err != nil {
		return err
	}
	defer w.Free(p.sig.Mem())
	if p.res, err = shmem.Alloc[int64](w, max(1, len(l.keys))); err != nil {
		return err
	}
	defer w.Free(p.res.Mem())
	for i := range t.Columns {
		if t.Columns[i].PE == w.MyPE() {
			p.col = &t.Columns[i]
		}
		if i == 0 {
			for _, in := range t.Columns[i].Instrs {
				if in.Op == memmodel.OpBarrier {
					p.nbar++
				}
			}
		}
	}
	p.rng = rand.New(rand.NewSource(seed*7919 + int64(w.MyPE())))
	if w.MyPE() == 0 { // PE 0 drives the harness; each RunOnce is one iteration on every PE
		_, err := memmodel.Conform(ctx, t, p, mode, opt, iters, seed, out)
		return err
	}
	for it := 0; it < iters; it++ {
		if _, err := p.iteration(ctx); err != nil {
			return fmt.Errorf("litmusrun: %s iteration %d: %w", t.Name, it, err)
		}
	}
	return nil
}

// RunOnce makes the PE 0 side of a job a memmodel.Runner: one iteration of t on every PE (the
// others run the same iteration from RunPE's loop), returning the gathered final state.
func (p *pe) RunOnce(ctx context.Context, t *memmodel.Test, seed int64) (memmodel.State, error) {
	p.rng.Seed(seed)
	return p.iteration(ctx)
}

// iteration resets memory, runs this PE's column between barriers with random delays, and sends
// the PE's part of the final state to PE 0, which returns the whole state (other PEs: nil).
func (p *pe) iteration(ctx context.Context) (memmodel.State, error) {
	w := p.w
	p.reset()
	if err := w.BarrierAll(ctx); err != nil {
		return nil, err
	}
	delay(p.rng, 40000) // covers the skew with which PEs leave the barrier, so columns overlap both ways
	if err := p.runColumn(ctx, p.rng); err != nil {
		return nil, fmt.Errorf("PE %d: %w", w.MyPE(), err)
	}
	if err := w.Quiet(); err != nil {
		return nil, err
	}
	if err := w.BarrierAll(ctx); err != nil {
		return nil, err
	}
	if err := p.report(); err != nil {
		return nil, err
	}
	if err := w.BarrierAll(ctx); err != nil {
		return nil, err
	}
	if w.MyPE() != 0 {
		return nil, nil
	}
	st := memmodel.State{}
	for i, k := range p.l.keys {
		st[k] = p.res.Local()[i]
	}
	return st, nil
}

// reset puts this PE's copy of every variable back to its initial value.
func (p *pe) reset() {
	me := p.w.MyPE()
	d, s := p.data.Local(), p.sig.Local()
	clear(d)
	clear(s)
	for _, iv := range p.t.Init {
		if iv.Loc.PE != me {
			continue
		}
		if i, ok := p.l.sig[iv.Loc.Var]; ok {
			s[i] = uint64(iv.Val)
		} else {
			d[p.l.data[iv.Loc.Var]] = iv.Val
		}
	}
	p.regs = map[string]int64{}
	p.nbi = map[string][]int64{}
	p.nbiSig = map[string][]uint64{}
}

// report puts this PE's registers and its memory values named by the condition into PE 0's
// result array.
func (p *pe) report() error {
	me := p.w.MyPE()
	for i := range p.l.keys {
		if p.l.owner[i] != me {
			continue
		}
		var v int64
		if p.l.reg[i] != "" {
			v = p.regs[p.l.reg[i]]
			if b, ok := p.nbi[p.l.reg[i]]; ok {
				v = b[0]
			}
			if b, ok := p.nbiSig[p.l.reg[i]]; ok {
				v = int64(b[0])
			}
		} else if j, ok := p.l.sig[p.l.loc[i].Var]; ok {
			v = int64(p.sig.Local()[j])
		} else {
			v = p.data.Local()[p.l.data[p.l.loc[i].Var]]
		}
		if err := p.res.P(0, i, v); err != nil {
			return err
		}
	}
	return p.w.Quiet()
}

func (p *pe) runColumn(ctx context.Context, rng *rand.Rand) error {
	if p.col == nil { // a PE without code still takes part in the test's barriers
		for i := 0; i < p.nbar; i++ {
			if err := p.w.BarrierAll(ctx); err != nil {
				return err
			}
		}
		return nil
	}
	for _, in := range p.col.Instrs {
		if rng.Intn(4) == 0 {
			delay(rng, 3000)
		}
		if err := p.exec(ctx, in); err != nil {
			return fmt.Errorf("%s: %w", in.Format(p.col.PE), err)
		}
	}
	return nil
}

func (p *pe) exec(ctx context.Context, in memmodel.Instr) error {
	w := p.w
	si, isSig := p.l.sig[in.Loc.Var]
	di := p.l.data[in.Loc.Var]
	switch in.Op {
	case memmodel.OpFence:
		return w.Fence()
	case memmodel.OpQuiet:
		return w.Quiet()
	case memmodel.OpBarrier:
		return w.BarrierAll(ctx)
	case memmodel.OpPutSig:
		op := shmem.SignalSet
		if in.SigOp == memmodel.SigAdd {
			op = shmem.SignalAdd
		}
		return shmem.PutSignal(p.data, di, []int64{in.Val}, p.sig, p.l.sig[in.Sig.Var], uint64(in.New), op, in.Loc.PE)
	}
	if isSig {
		return execOn(ctx, p, in, p.sig, si, func(v int64) uint64 { return uint64(v) }, func(v uint64) int64 { return int64(v) }, p.nbiSig)
	}
	return execOn(ctx, p, in, p.data, di, func(v int64) int64 { return v }, func(v int64) int64 { return v }, p.nbi)
}

// execOn runs one memory instruction on the array that holds its variable.
func execOn[T int64 | uint64](ctx context.Context, p *pe, in memmodel.Instr, s shmem.Sym[T], i int, to func(int64) T, from func(T) int64, nbi map[string][]T) error {
	q := in.Loc.PE
	var v T
	var err error
	switch in.Op {
	case memmodel.OpSt:
		s.Local()[i] = to(in.Val)
		return nil
	case memmodel.OpLd:
		p.regs[in.Reg] = from(s.Local()[i])
		return nil
	case memmodel.OpPut:
		return s.P(q, i, to(in.Val))
	case memmodel.OpPutNBI:
		return s.PutNBI(q, i, []T{to(in.Val)})
	case memmodel.OpGet:
		v, err = s.G(q, i)
	case memmodel.OpGetNBI:
		buf := make([]T, 1)
		nbi[in.Reg] = buf
		return s.GetNBI(q, i, buf)
	case memmodel.OpFAdd:
		v, err = shmem.AtomicFetchAdd(s, i, to(in.Val), q)
	case memmodel.OpSwap:
		v, err = shmem.AtomicSwap(s, i, to(in.Val), q)
	case memmodel.OpCSwap:
		v, err = shmem.AtomicCompareSwap(s, i, to(in.Val), to(in.New), q)
	case memmodel.OpFetch:
		v, err = shmem.AtomicFetch(s, i, q)
	case memmodel.OpAdd:
		return shmem.AtomicAdd(s, i, to(in.Val), q)
	case memmodel.OpSet:
		return shmem.AtomicSet(s, i, to(in.Val), q)
	case memmodel.OpWait:
		return shmem.WaitUntil(ctx, s, i, cmpOf[in.Cmp], to(in.Val))
	case memmodel.OpPutSig:
		return errors.New("put-with-signal data must not be a signal word")
	default:
		return fmt.Errorf("unknown instruction %s", in.Op)
	}
	if err != nil {
		return err
	}
	p.regs[in.Reg] = from(v)
	return nil
}

// RunSuite runs every test in turn (RunPE for each) and joins the failures, so that one forbidden
// outcome does not hide the others. Every PE must call it with the same tests.
func RunSuite(ctx context.Context, w *shmem.World, tests []*memmodel.Test, mode memmodel.Mode, opt memmodel.Options, iters int, seed int64, out io.Writer) error {
	var errs []error
	for i, t := range tests {
		err := RunPE(ctx, w, t, mode, opt, iters, seed+int64(i), out)
		var fe *memmodel.ForbiddenError
		if err != nil && !errors.As(err, &fe) {
			return errors.Join(append(errs, err)...) // a runtime failure leaves the PEs out of step
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// ModeOf returns the model mode matching the runtime's ordering.
func ModeOf(w *shmem.World) memmodel.Mode {
	if w.Ordering() == shmem.Bypass {
		return memmodel.Bypass
	}
	return memmodel.Strict
}
