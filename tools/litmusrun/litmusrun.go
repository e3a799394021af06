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
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/roxamen/roxamen/internal/seam"
	"github.com/roxamen/roxamen/memmodel"
	"github.com/roxamen/roxamen/nic"
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
				for _, q := range in.PEs { // pe_quiet {q}
					n = max(n, q+1)
				}
				for _, l := range in.Locs {
					n = max(n, l.PE+1)
				}
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
	data, sig map[string]int // variable (a 64-bit word; x.lo and x.hi are halves of x) -> index
	keys      []string
	owner     []int // PE that reports each key
	reg       []string
	loc       []memmodel.Loc
}

// wordVar is the 64-bit word a variable name is or is a half of ("" stays "").
func wordVar(v string) string { return memmodel.Loc{Var: v}.Word().Var }

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
				note(wordVar(in.Loc.Var))
			}
			if in.Sig.Var != "" {
				note(in.Sig.Var)
			}
			for _, l := range append([]memmodel.Loc{in.Src, in.Dst}, in.Locs...) { // a put's source buffer, a get's destination, a poll's words
				if l.Var != "" {
					note(wordVar(l.Var))
				}
			}
		}
	}
	for _, iv := range t.Init {
		note(wordVar(iv.Loc.Var))
	}
	var walk func(p *memmodel.Prop)
	walk = func(p *memmodel.Prop) {
		if p.Kind == memmodel.PropMem {
			note(wordVar(p.Loc.Var))
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
	data32 shmem.Sym[uint32] // data's words as 32-bit halves: word i's low half is 2i, its high half 2i+1
	sig    shmem.Sym[uint64]
	res    shmem.Sym[int64]
	start  shmem.Sym[int64] // the time base: when this iteration's columns start (Unix ns), from PE 0
	col    *memmodel.Column
	cols   []*memmodel.Column // this PE's columns: more than one when it runs threads (PEn.t)
	thread bool               // the test runs threads: plain accesses to own memory are atomic
	// tctx is the communication context a thread column issues on (one per thread of the PE):
	// its fence and quiet then order and complete that thread's operations only, as the model's
	// per-thread fence and quiet do (MODEL.md §3b), where the default context's act for the PE.
	tctx  *shmem.Ctx
	tctxs []*shmem.Ctx // per column of cols, when the PE runs several threads
	// named are the test's named contexts (`on NAME`, MODEL.md §3a) of this column's thread, made
	// per thread as the model's are; nameds per column of cols.
	named  map[string]*shmem.Ctx
	nameds []map[string]*shmem.Ctx
	teams  map[string]*shmem.Team
	coll   shmem.Sym[int64] // all-reduce and broadcast's source and destination (the data is not in the model)
	nbar   int
	nsync  int
	// allocs are what the test's malloc, calloc, align and realloc made this iteration, in call
	// order (freed at its end); spare the allocations its realloc and free calls consume, made
	// before it starts
	allocs, spare []shmem.Mem
	regs          map[string]int64
	after         map[string]func() int64 // registers known only after the copy's quiet: get_nbi's and _nbi fetches' results, late loads of halves
	rng           *rand.Rand

	// Instances: every iteration runs k copies of the test side by side (litmus7's -s), copy c's
	// variable v at element (c*n+v)*spread of its array, spread 1 (the copies share cache lines)
	// or 8 (a line per variable) chosen per iteration; each PE runs its column over every copy
	// in a tight loop, with a random delay before each.
	k, spread int
	inst      int                       // the copy being run
	iregs     []map[string]int64        // per copy: registers
	iafter    []map[string]func() int64 // per copy: the registers read after quiet

	// ro is the reordering delivery path (ROX_DELIVERY=reorder), or nil: plain loads and stores
	// then go through its emulated store buffer and cache, and its mutation is armed while the
	// columns run. late holds, per copy, the registers of plain loads it performs late.
	ro *nic.Reorder
	// plain is the reordering path's context the column's plain accesses go through: its
	// thread's store buffer (the default context's, or the thread's own context's).
	plain *nic.ReorderCtx
	late  map[string]*uint64
	ilate []map[string]*uint64
}

// startAfter is how long after PE 0 enters an iteration's barrier the columns start: more than
// a barrier takes.
const startAfter = 1500 * time.Microsecond

// maxSpread is the widest element spacing of a variable's copies.
const maxSpread = 8

// DefaultInstances is how many copies of a test an iteration runs when Config leaves it 0.
const DefaultInstances = 16

// maxThreadCopies bounds the copies per iteration of a test with threads, which then runs more
// iterations for the same number of copies. A thread runs its copies in order and its wait in
// copy c waits behind every earlier copy's flag, so the chains the thread tests need (a thread
// sees another's flag and puts, a PE waits for that put and reads what the first thread put,
// still in flight) lose their race behind the earlier copies: with 64 copies per iteration the
// quiet-as-fence mutation of MP+threads+quiet+own was caught in 0 of 384 copies, with 16 in 41 of
// 640 (the reordering path, strict, 2 loaded CPUs).
const maxThreadCopies = 16

// Config sets a run's size.
type Config struct {
	Iters     int // iterations (launches): every PE runs every copy once per iteration
	Instances int // copies of the test per iteration (0: DefaultInstances)
	Seed      int64
}

// di and si place variable i of the current copy in the data and signal arrays.
func (p *pe) di(i int) int { return (p.inst*max(1, len(p.l.data)) + i) * p.spread }
func (p *pe) si(i int) int { return (p.inst*max(1, len(p.l.sig)) + i) * p.spread }

// hi places half-word variable v (x.lo, x.hi) of the current copy in data32.
func (p *pe) hi(v string) int {
	return 2*p.di(p.l.data[wordVar(v)]) + memmodel.Loc{Var: v}.Half() - 1
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

// RunPE runs t iters times on this PE with DefaultInstances copies per iteration; every PE of
// the job must call it with the same arguments. PE 0 prints the histogram to out and returns a
// *memmodel.ForbiddenError if it observed an outcome that mode forbids; every PE returns runtime
// errors.
func RunPE(ctx context.Context, w *shmem.World, t *memmodel.Test, mode memmodel.Mode, opt memmodel.Options, iters int, seed int64, out io.Writer) error {
	_, err := runPE(ctx, w, t, mode, opt, Config{Iters: iters, Seed: seed}, out)
	return err
}

// runPE is RunPE; on PE 0 it also returns the run's power.
func runPE(ctx context.Context, w *shmem.World, t *memmodel.Test, mode memmodel.Mode, opt memmodel.Options, cfg Config, out io.Writer) (memmodel.Power, error) {
	var none memmodel.Power
	iters := cfg.Iters
	if iters <= 0 {
		return none, fmt.Errorf("litmusrun: RunPE on PE %d: iterations %d, want > 0", w.MyPE(), iters)
	}
	k := cfg.Instances
	if k == 0 {
		k = DefaultInstances
	}
	if k < 0 {
		return none, fmt.Errorf("litmusrun: RunPE on PE %d: instances %d, want > 0", w.MyPE(), k)
	}
	if t.Threaded() && k > maxThreadCopies {
		// the same number of copies in more, smaller iterations (see maxThreadCopies)
		iters, k = iters*((k+maxThreadCopies-1)/maxThreadCopies), maxThreadCopies
	}
	if need := NPEs([]*memmodel.Test{t}); need > w.NPEs() {
		return none, fmt.Errorf("litmusrun: RunPE on PE %d: test %s needs %d PEs, the job has %d", w.MyPE(), t.Name, need, w.NPEs())
	}
	l, err := newLayout(t)
	if err != nil {
		return none, err
	}
	p := &pe{w: w, t: t, l: l, k: k, spread: 1, ro: reorderOf(w)}
	if p.ro != nil {
		p.plain = &p.ro.ReorderCtx
	}
	if p.data, err = shmem.Alloc[int64](w, max(1, len(l.data))*k*maxSpread); err != nil {
		return none, err
	}
	defer w.Free(p.data.Mem())
	if p.data32, err = shmem.As[uint32](p.data.Mem()); err != nil {
		return none, err
	}
	if p.sig, err = shmem.Alloc[uint64](w, max(1, len(l.sig))*k*maxSpread); err != nil {
		return none, err
	}
	defer w.Free(p.sig.Mem())
	if p.ro != nil {
		p.ro.Arm(false)
		p.ro.Cache(p.data.Mem().Offset(), p.data.Mem().Size())
		p.ro.Cache(p.sig.Mem().Offset(), p.sig.Mem().Size())
		defer p.ro.Uncache()
	}
	if p.res, err = shmem.Alloc[int64](w, max(1, len(l.keys))*k); err != nil {
		return none, err
	}
	defer w.Free(p.res.Mem())
	if p.start, err = shmem.Alloc[int64](w, 8); err != nil {
		return none, err
	}
	defer w.Free(p.start.Mem())
	if p.coll, err = shmem.Alloc[int64](w, 2+2*w.NPEs()); err != nil { // the collectives' source and destination words
		return none, err
	}
	defer w.Free(p.coll.Mem())
	if err := p.makeTeams(ctx); err != nil {
		return none, err
	}
	defer p.destroyTeams(ctx)
	p.thread = t.Threaded()
	for i := range t.Columns {
		if t.Columns[i].PE == w.MyPE() {
			p.col = &t.Columns[i]
			p.cols = append(p.cols, &t.Columns[i])
		}
		if i == 0 {
			for _, in := range t.Columns[i].Instrs {
				switch in.Op {
				case memmodel.OpBarrier:
					p.nbar++
				case memmodel.OpSync:
					p.nsync++
				}
			}
		}
	}
	if len(p.cols) > 1 {
		for range p.cols {
			c, err := w.CreateCtx(shmem.CtxSerialized)
			if err != nil {
				return none, err
			}
			defer c.Destroy()
			p.tctxs = append(p.tctxs, c)
		}
	}
	for _, col := range p.cols {
		named := map[string]*shmem.Ctx{}
		for _, in := range col.Instrs {
			if in.Ctx == "" || named[in.Ctx] != nil {
				continue
			}
			c, err := w.CreateCtx(p.ctxOptions(in.Ctx))
			if err != nil {
				return none, err
			}
			defer c.Destroy()
			named[in.Ctx] = c
		}
		p.nameds = append(p.nameds, named)
	}
	if len(p.nameds) > 0 {
		p.named = p.nameds[0]
	}
	// every PE draws the same spreads and copy orders from the seed; the delays differ per PE
	shared := rand.New(rand.NewSource(cfg.Seed))
	p.rng = rand.New(rand.NewSource(cfg.Seed*7919 + int64(w.MyPE())))
	var h *memmodel.Histogram
	var r *memmodel.Result
	if w.MyPE() == 0 {
		if r, err = memmodel.Check(t, mode, opt); err != nil {
			return none, err
		}
		h = memmodel.NewHistogram(t)
	}
	start := time.Now()
	contiguous := false // a put or get of several elements needs its words next to each other
	for _, c := range t.Columns {
		for _, in := range c.Instrs {
			contiguous = contiguous || (in.Op == memmodel.OpPut || in.Op == memmodel.OpGet) && len(in.Locs) > 0 && in.Call == ""
		}
	}
	for it := 0; it < iters; it++ {
		p.spread = []int{1, maxSpread}[shared.Intn(2)]
		if contiguous {
			p.spread = 1
		}
		order := shared.Perm(k)
		states, err := p.iteration(ctx, order)
		if err != nil {
			return none, fmt.Errorf("litmusrun: %s iteration %d: %w", t.Name, it, err)
		}
		for _, st := range states {
			h.Add(st)
		}
	}
	if w.MyPE() != 0 {
		return none, nil
	}
	if out != nil {
		h.Print(out, r, time.Since(start))
	}
	return memmodel.NewPower(h, r), memmodel.CheckHistogram(h, r)
}

// iteration resets memory, runs this PE's column over every copy between barriers with random
// delays, and sends the PE's part of the final states to PE 0, which returns every copy's state
// (other PEs: nil). Copies run in order on every PE (a wait in copy c may need another PE's copy
// c), so tests with waits or barriers use the same order everywhere: order.
func (p *pe) iteration(ctx context.Context, order []int) ([]memmodel.State, error) {
	w := p.w
	p.reset()
	if err := p.allocSpare(); err != nil {
		return nil, err
	}
	// A time base (litmus7's -st): PE 0 names the instant every PE starts its columns at, a little
	// after the barrier that delivers it, so that the PEs start together however unevenly they
	// leave the barrier.
	if w.MyPE() == 0 {
		at := time.Now().UnixNano() + int64(startAfter)
		for q := 0; q < w.NPEs(); q++ {
			if err := p.start.P(0, at, q); err != nil {
				return nil, err
			}
		}
	}
	if err := w.BarrierAll(ctx); err != nil {
		return nil, err
	}
	for at := p.start.Local()[0]; time.Now().UnixNano() < at; {
	}
	delay(p.rng, 10000) // a few microseconds either way, so that the columns overlap both ways
	if p.ro != nil {
		p.ro.Arm(true)
	}
	if len(p.cols) > 1 {
		if err := p.runThreads(ctx, order); err != nil {
			return nil, err
		}
	} else {
		for _, c := range order {
			p.inst = c
			p.regs, p.late, p.after = p.iregs[c], p.ilate[c], p.iafter[c]
			p.copyDelay()
			if err := p.runColumn(ctx, p.rng); err != nil {
				return nil, fmt.Errorf("PE %d copy %d: %w", w.MyPE(), c, err)
			}
		}
	}
	if p.ro != nil {
		p.ro.Arm(false) // what follows is the runner's bookkeeping: real quiets and barriers
	}
	// every context's operations complete before the state is read: a barrier completes only
	// the default context's
	for _, c := range p.contexts() {
		if err := c.Quiet(); err != nil {
			return nil, err
		}
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
	for _, m := range p.allocs { // in one order on every PE: the order the collective calls made them
		if err := w.Free(m); err != nil {
			return nil, err
		}
	}
	p.allocs = p.allocs[:0]
	if w.MyPE() != 0 {
		return nil, nil
	}
	var states []memmodel.State
	n := len(p.l.keys)
	for c := 0; c < p.k; c++ {
		st := memmodel.State{}
		for i, key := range p.l.keys {
			st[key] = p.res.Local()[c*n+i]
		}
		states = append(states, st)
	}
	return states, nil
}

// contexts are the PE's contexts other than the default: its threads' and the named ones.
func (p *pe) contexts() []*shmem.Ctx {
	cs := append([]*shmem.Ctx(nil), p.tctxs...)
	for _, named := range p.nameds {
		for _, c := range named {
			cs = append(cs, c)
		}
	}
	return cs
}

// destroyCtx destroys named context name (shmem_ctx_destroy: it completes the context's
// operations) and puts a new one in its place, for the next copy of the column.
func (p *pe) destroyCtx(name string) error {
	c := p.named[name]
	if c == nil {
		return fmt.Errorf("ctx_destroy: no context %s", name)
	}
	err := c.Destroy()
	n, cerr := p.w.CreateCtx(p.ctxOptions(name))
	if cerr != nil {
		return errors.Join(err, cerr)
	}
	p.named[name] = n
	return err
}

// ctxOptions are the options named context name is made with: NOSTORE where the test says so.
func (p *pe) ctxOptions(name string) shmem.CtxOption {
	if slices.Contains(p.t.NoStore, name) {
		return shmem.CtxSerialized | shmem.CtxNoStore
	}
	return shmem.CtxSerialized
}

// ctxOf is the context in issues on: its named context, else the thread's, else nil (the
// default context, the World's own calls).
func (p *pe) ctxOf(in memmodel.Instr) *shmem.Ctx {
	if in.Ctx != "" {
		return p.named[in.Ctx]
	}
	return p.tctx
}

func (p *pe) copyDelay() {
	switch x := p.rng.Intn(16); {
	case x < 8:
		delay(p.rng, 2000)
	case x == 8: // now and then a PE falls far behind: it then observes what the others left
		delay(p.rng, 200000)
	}
}

// runThreads runs each of this PE's thread columns in its own goroutine (the runtime's calls may
// be made from several goroutines at once, as under SHMEM_THREAD_MULTIPLE), each over every copy
// in order with its own delays; a thread's registers are merged into the copy's once all are
// done (the threads of a PE share register names, each register written by one thread).
func (p *pe) runThreads(ctx context.Context, order []int) error {
	var wg sync.WaitGroup
	errs := make([]error, len(p.cols))
	ts := make([]*pe, len(p.cols))
	for j, col := range p.cols {
		tp := *p
		tp.col, tp.tctx, tp.named = col, p.tctxs[j], p.nameds[j]
		if p.ro != nil { // the thread's plain accesses sit in its own store buffer
			tp.plain = ctxReorderOf(tp.tctx)
		}
		tp.rng = rand.New(rand.NewSource(p.rng.Int63()))
		tp.iregs, tp.ilate, tp.iafter = make([]map[string]int64, p.k), make([]map[string]*uint64, p.k), make([]map[string]func() int64, p.k)
		ts[j] = &tp
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, c := range order {
				tp.inst = c
				tp.regs, tp.late, tp.after = map[string]int64{}, map[string]*uint64{}, map[string]func() int64{}
				tp.iregs[c], tp.ilate[c], tp.iafter[c] = tp.regs, tp.late, tp.after
				tp.copyDelay()
				if err := tp.runColumn(ctx, tp.rng); err != nil {
					errs[j] = fmt.Errorf("PE %d thread %d copy %d: %w", p.w.MyPE(), col.Thread, c, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	for _, tp := range ts {
		for c := 0; c < p.k; c++ {
			for k, v := range tp.iregs[c] {
				p.iregs[c][k] = v
			}
			for k, v := range tp.ilate[c] {
				p.ilate[c][k] = v
			}
			for k, v := range tp.iafter[c] {
				p.iafter[c][k] = v
			}
		}
	}
	return nil
}

// teamKey names a team of a test by its PEs.
func teamKey(pes []int) string { return fmt.Sprint(pes) }

// makeTeams makes the test's teams (barrier {0,1}, ...) by strided splits of the world team, in
// one order on every PE (a split is collective over the world); a non-member's entry is nil.
func (p *pe) makeTeams(ctx context.Context) error {
	var keys []string
	sets := map[string][]int{}
	for _, c := range p.t.Columns {
		for _, in := range c.Instrs {
			if in.Team != nil {
				k := teamKey(in.Team)
				if _, ok := sets[k]; !ok {
					keys = append(keys, k)
				}
				sets[k] = in.Team
			}
		}
	}
	sort.Strings(keys)
	p.teams = map[string]*shmem.Team{}
	for _, k := range keys {
		start, stride, ok := memmodel.StridedTeam(sets[k])
		if !ok {
			return fmt.Errorf("litmusrun: test %s: team %v is not a strided set of PEs", p.t.Name, sets[k])
		}
		tm, err := p.w.TeamWorld().SplitStrided(ctx, start, stride, len(sets[k]))
		if err != nil {
			return err
		}
		p.teams[k] = tm
	}
	return nil
}

func (p *pe) destroyTeams(ctx context.Context) {
	var keys []string
	for k := range p.teams {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if tm := p.teams[k]; tm != nil {
			tm.Destroy(ctx)
		}
	}
}

// team returns the team a collective runs on: the world's for nil.
func (p *pe) team(pes []int) (*shmem.Team, error) {
	if pes == nil {
		return p.w.TeamWorld(), nil
	}
	tm := p.teams[teamKey(pes)]
	if tm == nil {
		return nil, fmt.Errorf("PE %d is not a member of team %v", p.w.MyPE(), pes)
	}
	return tm, nil
}

// allocSpare makes, on every PE alike, one allocation for each realloc and free that this
// iteration's copies of the test will call (the calls are over the world: every PE makes them).
func (p *pe) allocSpare() error {
	n := 0
	for _, in := range p.t.Columns[0].Instrs {
		if in.Call == "realloc" || in.Call == "free" {
			n++
		}
	}
	for i := 0; i < n*p.k; i++ {
		m, err := p.w.Malloc(8)
		if err != nil {
			return err
		}
		p.spare = append(p.spare, m)
	}
	return nil
}

// alloc makes the allocation call in names (shmem_malloc ... shmem_free): each ends with the
// barrier_all the model states it as.
func (p *pe) alloc(in memmodel.Instr) error {
	w := p.w
	var m shmem.Mem
	var err error
	switch in.Call {
	case "malloc":
		m, err = w.Malloc(8)
	case "calloc":
		m, err = w.Calloc(1, 8)
	case "align":
		m, err = w.Align(64, 8)
	case "realloc", "free":
		if len(p.spare) == 0 {
			return fmt.Errorf("%s: no allocation left to pass it", in.Call)
		}
		old := p.spare[0]
		p.spare = p.spare[1:]
		if in.Call == "free" {
			return w.Free(old)
		}
		m, err = w.Realloc(old, 16)
	default:
		return fmt.Errorf("unknown allocation call %s", in.Call)
	}
	if err == nil {
		p.allocs = append(p.allocs, m)
	}
	return err
}

// collective runs a barrier, sync, all-reduce or broadcast on its team.
func (p *pe) collective(ctx context.Context, in memmodel.Instr) error {
	if in.Team == nil && in.Op == memmodel.OpBarrier && in.Call != "" {
		return p.alloc(in)
	}
	if in.Team == nil {
		switch in.Op {
		case memmodel.OpBarrier:
			return p.w.BarrierAll(ctx)
		case memmodel.OpSync:
			return p.w.SyncAll(ctx)
		}
	}
	tm, err := p.team(in.Team)
	if err != nil {
		return err
	}
	src, _ := p.coll.Slice(0, 1)
	dst, _ := p.coll.Slice(1, 1)
	switch in.Op {
	case memmodel.OpBarrier:
		return tm.Barrier(ctx)
	case memmodel.OpSync:
		return tm.Sync(ctx)
	case memmodel.OpAllReduce:
		n := tm.NPEs() // the call variants take one word from and to each member
		all, _ := p.coll.Slice(2, n)
		all2, _ := p.coll.Slice(2+n, n)
		switch in.Call {
		case "alltoall":
			return shmem.AllToAll(ctx, tm, all2, all)
		case "alltoalls":
			return shmem.AllToAlls(ctx, tm, all2, all, 1, 1, 1)
		case "fcollect":
			return shmem.FCollect(ctx, tm, all, src)
		case "collect":
			return shmem.Collect(ctx, tm, all, src)
		case "reduce_scatter":
			return shmem.ReduceScatter(ctx, tm, dst, all, shmem.OpSum)
		}
		return shmem.AllReduce(ctx, tm, dst, src, shmem.OpSum)
	case memmodel.OpBroadcast:
		for j := 0; j < tm.NPEs(); j++ {
			if tm.WorldPE(j) == in.Root {
				return shmem.Broadcast(ctx, tm, dst, src, j)
			}
		}
		return fmt.Errorf("broadcast root PE %d is not a member of %v", in.Root, tm)
	}
	return fmt.Errorf("unknown collective %s", in.Op)
}

// poll runs wait_all ... test_some: the words are the PE's own, in one array (a window of it from
// the first to the last, the others masked), and r is set as the litmus language says (an index
// into the instruction's words, -1, or a bit mask).
func poll[T word](ctx context.Context, p *pe, in memmodel.Instr, s shmem.Sym[T], idx func(string) int) error {
	at := make([]int, len(in.Locs))
	lo, hi := -1, -1
	for j, l := range in.Locs {
		at[j] = idx(l.Var)
		if lo < 0 || at[j] < lo {
			lo = at[j]
		}
		hi = max(hi, at[j])
	}
	if len(in.Vals) > 1 { // a vector form: one compare value per word, which shmem has only as waits on each word
		if in.Op != memmodel.OpWaitAll {
			return fmt.Errorf("%s with one value per word has no host call", in.Op)
		}
		for j := range at {
			if err := shmem.WaitUntil(ctx, s, at[j], cmpOf[in.Cmp], T(in.Vals[j])); err != nil {
				return err
			}
		}
		return nil
	}
	win, err := s.Slice(lo, hi-lo+1)
	if err != nil {
		return err
	}
	status := make([]bool, hi-lo+1)
	for i := range status {
		status[i] = true
	}
	pos := map[int]int{} // window index -> the word's position in the instruction
	for j, a := range at {
		status[a-lo] = false
		pos[a-lo] = j
	}
	cmp, v := cmpOf[in.Cmp], T(in.Vals[0])
	mask := func(hit []int) int64 {
		var m int64
		for _, h := range hit {
			m |= 1 << pos[h]
		}
		return m
	}
	index := func(i int) int64 {
		if i < 0 {
			return -1
		}
		return int64(pos[i])
	}
	var r int64
	switch in.Op {
	case memmodel.OpWaitAll:
		return shmem.WaitUntilAll(ctx, win, status, cmp, v)
	case memmodel.OpWaitAny:
		i, err := shmem.WaitUntilAny(ctx, win, status, cmp, v)
		if err != nil {
			return err
		}
		r = index(i)
	case memmodel.OpWaitSome:
		hit, err := shmem.WaitUntilSome(ctx, win, status, cmp, v)
		if err != nil {
			return err
		}
		r = mask(hit)
	case memmodel.OpTest:
		ok, err := shmem.Test(s, at[0], cmp, v)
		if err != nil {
			return err
		}
		r = int64(boolInt(ok))
	case memmodel.OpTestAll:
		ok, err := shmem.TestAll(win, status, cmp, v)
		if err != nil {
			return err
		}
		r = int64(boolInt(ok))
	case memmodel.OpTestAny:
		i, err := shmem.TestAny(win, status, cmp, v)
		if err != nil {
			return err
		}
		r = index(i)
	case memmodel.OpTestSome:
		hit, err := shmem.TestSome(win, status, cmp, v)
		if err != nil {
			return err
		}
		r = mask(hit)
	}
	p.regs[in.Reg] = r
	return nil
}

// pollSig reports whether the words of a wait_all ... test_some are signal words (they must all be
// in one array).
func (l *layout) pollSig(in memmodel.Instr) (sig, ok bool) {
	for j, loc := range in.Locs {
		_, s := l.sig[loc.Var]
		if j > 0 && s != sig {
			return false, false
		}
		sig = s
	}
	return sig, true
}

// reset puts this PE's copy of every variable of every copy back to its initial value.
func (p *pe) reset() {
	me := p.w.MyPE()
	clear(p.data.Local())
	clear(p.sig.Local())
	p.iregs = make([]map[string]int64, p.k)
	p.ilate, p.iafter = make([]map[string]*uint64, p.k), make([]map[string]func() int64, p.k)
	for c := 0; c < p.k; c++ {
		p.inst = c
		p.iregs[c], p.ilate[c], p.iafter[c] = map[string]int64{}, map[string]*uint64{}, map[string]func() int64{}
		for _, iv := range p.t.Init {
			if iv.Loc.PE != me {
				continue
			}
			if i, ok := p.l.sig[iv.Loc.Var]; ok {
				p.sig.Local()[p.si(i)] = uint64(iv.Val)
			} else if h := iv.Loc.Half(); h != 0 {
				p.data32.Local()[p.hi(iv.Loc.Var)] = uint32(iv.Val)
			} else {
				p.data.Local()[p.di(p.l.data[iv.Loc.Var])] = iv.Val
			}
		}
	}
}

// report puts this PE's registers and its memory values named by the condition, for every copy,
// into PE 0's result array.
func (p *pe) report() error {
	me := p.w.MyPE()
	n := len(p.l.keys)
	for c := 0; c < p.k; c++ {
		p.inst = c
		for i := range p.l.keys {
			if p.l.owner[i] != me {
				continue
			}
			var v int64
			if p.l.reg[i] != "" {
				v = p.iregs[c][p.l.reg[i]]
				if b, ok := p.ilate[c][p.l.reg[i]]; ok {
					v = int64(*b)
				}
				if f, ok := p.iafter[c][p.l.reg[i]]; ok {
					v = f()
				}
			} else if j, ok := p.l.sig[p.l.loc[i].Var]; ok {
				v = int64(p.sig.Local()[p.si(j)])
			} else if p.l.loc[i].Half() != 0 {
				v = int64(p.data32.Local()[p.hi(p.l.loc[i].Var)])
			} else {
				v = p.data.Local()[p.di(p.l.data[p.l.loc[i].Var])]
			}
			if err := p.res.P(c*n+i, v, 0); err != nil {
				return err
			}
		}
	}
	return p.w.Quiet()
}

func (p *pe) runColumn(ctx context.Context, rng *rand.Rand) error {
	if p.col == nil { // a PE without code still takes part in the test's barriers and syncs, in order
		for _, in := range p.t.Columns[0].Instrs {
			switch in.Op {
			case memmodel.OpBarrier, memmodel.OpSync, memmodel.OpAllReduce, memmodel.OpBroadcast:
				if in.Team != nil { // its members all have columns
					continue
				}
				if err := p.collective(ctx, in); err != nil {
					return err
				}
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
	si = p.si(si)
	di := p.di(p.l.data[wordVar(in.Loc.Var)])
	half := in.Loc.Half() // a 32-bit access to a half of the word (mixed widths)
	switch in.Op {
	case memmodel.OpFence:
		if c := p.ctxOf(in); c != nil {
			return c.Fence()
		}
		return w.Fence()
	case memmodel.OpQuiet:
		if in.Call == "ctx_destroy" {
			return p.destroyCtx(in.Ctx)
		}
		if in.Call == "pe_quiet" {
			return w.PEQuiet(in.PEs...)
		}
		if c := p.ctxOf(in); c != nil {
			return c.Quiet()
		}
		return w.Quiet()
	case memmodel.OpBarrier, memmodel.OpSync, memmodel.OpAllReduce, memmodel.OpBroadcast:
		return p.collective(ctx, in)
	case memmodel.OpPut, memmodel.OpGet:
		if len(in.Locs) > 0 {
			return p.elements(in)
		}
	case memmodel.OpWaitAll, memmodel.OpWaitAny, memmodel.OpWaitSome, memmodel.OpTest, memmodel.OpTestAll, memmodel.OpTestAny, memmodel.OpTestSome:
		if sig, _ := p.l.pollSig(in); sig {
			return poll(ctx, p, in, p.sig, func(v string) int { return p.si(p.l.sig[v]) })
		}
		halves := 0
		for _, l := range in.Locs {
			if l.Half() != 0 {
				halves++
			}
		}
		switch halves {
		case 0:
			return poll(ctx, p, in, p.data, func(v string) int { return p.di(p.l.data[v]) })
		case len(in.Locs): // 32-bit words: the halves of data's words
			return poll(ctx, p, in, p.data32, p.hi)
		}
		return errors.New("a poll over both 32-bit halves and 64-bit words has no host call (one array of one width)")
	case memmodel.OpWait:
		if in.Call == "signal_wait" {
			if !isSig {
				return fmt.Errorf("signal_wait on %s, which no put-with-signal signals: shmem.SignalWaitUntil takes a signal word", in.Loc)
			}
			_, err := shmem.SignalWaitUntil(ctx, p.sig, si, cmpOf[in.Cmp], uint64(in.Val))
			return err
		}
	case memmodel.OpPutSig:
		if p.ctxOf(in) != nil {
			return fmt.Errorf("%s has no context form in shmem: its context's quiet could not complete it", in.Op)
		}
		op := shmem.SignalSet
		if in.SigOp == memmodel.SigAdd {
			op = shmem.SignalAdd
		}
		if in.NBI {
			return shmem.PutSignalNBI(p.data, di, []int64{in.Val}, p.sig, p.si(p.l.sig[in.Sig.Var]), uint64(in.New), op, in.Loc.PE)
		}
		return shmem.PutSignal(p.data, di, []int64{in.Val}, p.sig, p.si(p.l.sig[in.Sig.Var]), uint64(in.New), op, in.Loc.PE)
	}
	if p.ro != nil {
		// plain accesses (and signal_fetch, a relaxed read) through the emulated CPU and cache,
		// in the store buffer of the column's thread (p.plain)
		off := p.data.Mem().Offset() + uint64(di)*8
		if isSig {
			off = p.sig.Mem().Offset() + uint64(si)*8
		}
		switch in.Op {
		case memmodel.OpSt: // to a peer's copy: a store through roxshmem_ptr
			if half != 0 {
				return errors.New("a plain 32-bit store has no emulation on the reordering path (its store buffer holds whole words)")
			}
			p.plain.StoreTo(in.Loc.PE, off, uint64(in.Val))
			return nil
		case memmodel.OpPutNBI:
			if in.Src.Var != "" { // the source buffer is read through the emulated store buffer, late
				if in.Ctx != "" {
					return errors.New("a put from a buffer on a named context has no emulation on the reordering path (the buffer is read through the issuing context's store buffer, the thread's)")
				}
				b := p.data.Mem().Offset() + uint64(p.di(p.l.data[in.Src.Var]))*8
				return p.plain.PutFromLocal(in.Loc.PE, off, b, 8)
			}
		case memmodel.OpGet, memmodel.OpGetNBI:
			if in.Dst.Var != "" { // the get's write follows the PE's earlier plain accesses to d
				p.plain.Destination(p.data.Mem().Offset() + uint64(p.di(p.l.data[in.Dst.Var]))*8)
			}
		case memmodel.OpLd, memmodel.OpSigFetch:
			v := new(uint64)
			p.late[in.Reg] = v
			if half != 0 { // a 32-bit load: the half of the word the emulation loads whole
				p.after[in.Reg] = func() int64 { return int64(uint32(*v >> (32 * (half - 1)))) }
			}
			p.plain.Load(off, v)
			return nil
		}
	}
	if in.Op == memmodel.OpSigFetch {
		if !isSig { // a word no put-with-signal signals: an atomic fetch of the own copy
			v, err := shmem.AtomicFetch(p.data, di, w.MyPE())
			p.regs[in.Reg] = v
			return err
		}
		v, err := shmem.SignalFetch(p.sig, si)
		p.regs[in.Reg] = int64(v)
		return err
	}
	switch {
	case isSig:
		return execOn(ctx, p, in, p.sig, si, func(v int64) uint64 { return uint64(v) }, func(v uint64) int64 { return int64(v) })
	case half != 0:
		return execOn(ctx, p, in, p.data32, 2*di+half-1, func(v int64) uint32 { return uint32(v) }, func(v uint32) int64 { return int64(v) })
	}
	return execOn(ctx, p, in, p.data, di, func(v int64) int64 { return v }, func(v int64) int64 { return v })
}

// elements runs a put or get of several elements (put x,y@q; iput; get r0,r1 x,y@q; iget) as one
// call: the words must lie at one stride in the layout (one apart for put and get), which the
// test's variable names decide (the layout sorts them).
func (p *pe) elements(in memmodel.Instr) error {
	if in.Ctx != "" || p.tctx != nil {
		return fmt.Errorf("a put or get of several elements on a context is not run (CtxPut takes one array too, but the runner's contexts are per word)")
	}
	at := make([]int, len(in.Locs))
	for k, l := range in.Locs {
		i, ok := p.l.data[l.Var]
		if !ok {
			return fmt.Errorf("%s is a signal word: the elements must be data words", l)
		}
		at[k] = i
	}
	stride := at[1] - at[0]
	for k := range at {
		if stride < 1 || at[k] != at[0]+k*stride {
			return fmt.Errorf("the words %v lie at %v in the layout (sorted by name), not at one stride", in.Locs, at)
		}
	}
	if in.Call == "" && stride*p.spread != 1 {
		return fmt.Errorf("the words %v are not next to each other (stride %d, spread %d): name them so that they sort together", in.Locs, stride, p.spread)
	}
	pe, n, first := in.Locs[0].PE, len(in.Locs), p.di(at[0])
	if in.Op == memmodel.OpPut {
		if in.Call == "iput" {
			return p.data.IPut(first, stride*p.spread, in.Vals, 1, n, pe)
		}
		return p.data.Put(first, in.Vals, pe)
	}
	dst := make([]int64, n)
	var err error
	if in.Call == "iget" {
		err = p.data.IGet(first, stride*p.spread, dst, 1, n, pe)
	} else {
		err = p.data.Get(first, dst, pe)
	}
	for k, r := range in.Regs {
		p.regs[r] = dst[k]
	}
	return err
}

// word is an element type of the runner's arrays: data (int64), signals (uint64), halves (uint32).
type word interface{ int64 | uint64 | uint32 }

// atomicStore and atomicLoad are a plain access's store and load where another goroutine (a
// thread of the PE) may access the word at the same time.
func atomicStore[T word](a *T, v T) {
	if unsafe.Sizeof(v) == 4 {
		atomic.StoreUint32((*uint32)(unsafe.Pointer(a)), uint32(v))
		return
	}
	atomic.StoreUint64((*uint64)(unsafe.Pointer(a)), uint64(v))
}

func atomicLoad[T word](a *T) T {
	if unsafe.Sizeof(*a) == 4 {
		return T(atomic.LoadUint32((*uint32)(unsafe.Pointer(a))))
	}
	return T(atomic.LoadUint64((*uint64)(unsafe.Pointer(a))))
}

// ctxExec runs a thread's network operation on the thread's context and reports whether in is
// one (plain accesses, waits and polls are not); an operation shmem has no context form of is an
// error, since the thread's quiet would not complete it.
func ctxExec[T word](p *pe, c *shmem.Ctx, in memmodel.Instr, s shmem.Sym[T], i int, to func(int64) T, from func(T) int64) (bool, error) {
	q := in.Loc.PE
	var v T
	var err error
	if in.NBI {
		res := new(T)
		p.after[in.Reg] = func() int64 { return from(*res) }
		switch in.Op {
		case memmodel.OpFAdd:
			return true, shmem.CtxAtomicFetchAddNBI(c, s, i, to(in.Val), q, res)
		case memmodel.OpSwap:
			return true, shmem.CtxAtomicSwapNBI(c, s, i, to(in.Val), q, res)
		case memmodel.OpCSwap:
			return true, shmem.CtxAtomicCompareSwapNBI(c, s, i, to(in.Val), to(in.New), q, res)
		case memmodel.OpFetch:
			return true, shmem.CtxAtomicFetchNBI(c, s, i, q, res)
		}
		return true, fmt.Errorf("%s_nbi has no context form in shmem: its context's quiet could not complete it", in.Op)
	}
	switch in.Op {
	case memmodel.OpSt, memmodel.OpLd, memmodel.OpWait:
		return false, nil
	case memmodel.OpPut:
		return true, shmem.CtxP(c, s, i, to(in.Val), q)
	case memmodel.OpPutNBI:
		if in.Src.Var != "" {
			b := p.di(p.l.data[in.Src.Var])
			return true, shmem.CtxPutNBI(c, s, i, s.Local()[b:b+1], q)
		}
		return true, shmem.CtxPutNBI(c, s, i, []T{to(in.Val)}, q)
	case memmodel.OpGet:
		if in.Dst.Var != "" {
			d := p.di(p.l.data[in.Dst.Var])
			return true, shmem.CtxGet(c, s, i, s.Local()[d:d+1], q)
		}
		v, err = shmem.CtxG(c, s, i, q)
	case memmodel.OpFetch:
		v, err = shmem.CtxAtomicFetch(c, s, i, q)
	case memmodel.OpSwap:
		v, err = shmem.CtxAtomicSwap(c, s, i, to(in.Val), q)
	case memmodel.OpCSwap:
		v, err = shmem.CtxAtomicCompareSwap(c, s, i, to(in.Val), to(in.New), q)
	case memmodel.OpFAdd:
		v, err = shmem.CtxAtomicFetchAdd(c, s, i, to(in.Val), q)
	case memmodel.OpAdd:
		return true, shmem.CtxAtomicAdd(c, s, i, to(in.Val), q)
	case memmodel.OpSet:
		return true, shmem.CtxAtomicSet(c, s, i, to(in.Val), q)
	default:
		return true, fmt.Errorf("%s has no context form in shmem: its context's quiet could not complete it", in.Op)
	}
	if err != nil {
		return true, err
	}
	p.regs[in.Reg] = from(v)
	return true, nil
}

// fetchNBI issues a fetching AMO's _nbi form; its register is read after the copy's quiet.
func fetchNBI[T word](p *pe, in memmodel.Instr, s shmem.Sym[T], i int, to func(int64) T, from func(T) int64) error {
	q := in.Loc.PE
	res := new(T)
	p.after[in.Reg] = func() int64 { return from(*res) }
	switch in.Op {
	case memmodel.OpFAdd:
		return shmem.AtomicFetchAddNBI(s, i, to(in.Val), q, res)
	case memmodel.OpSwap:
		return shmem.AtomicSwapNBI(s, i, to(in.Val), q, res)
	case memmodel.OpCSwap:
		return shmem.AtomicCompareSwapNBI(s, i, to(in.Val), to(in.New), q, res)
	case memmodel.OpFetch:
		return shmem.AtomicFetchNBI(s, i, q, res)
	case memmodel.OpFInc:
		return shmem.AtomicFetchIncNBI(s, i, q, res)
	case memmodel.OpFAnd:
		return shmem.AtomicFetchAndNBI(s, i, to(in.Val), q, res)
	case memmodel.OpFOr:
		return shmem.AtomicFetchOrNBI(s, i, to(in.Val), q, res)
	case memmodel.OpFXor:
		return shmem.AtomicFetchXorNBI(s, i, to(in.Val), q, res)
	}
	return fmt.Errorf("%s has no non-blocking form", in.Op)
}

// execOn runs one memory instruction on the array that holds its variable.
func execOn[T word](ctx context.Context, p *pe, in memmodel.Instr, s shmem.Sym[T], i int, to func(int64) T, from func(T) int64) error {
	q := in.Loc.PE
	var v T
	var err error
	if c := p.ctxOf(in); c != nil {
		if done, err := ctxExec(p, c, in, s, i, to, from); done {
			return err
		}
	}
	if in.NBI {
		return fetchNBI(p, in, s, i, to, from)
	}
	switch in.Op {
	case memmodel.OpSt:
		if q != p.w.MyPE() { // a store through roxshmem_ptr
			peer := s.Ptr(q)
			if peer == nil {
				return fmt.Errorf("PE %d has no pointer to PE %d's memory (Sym.Ptr)", p.w.MyPE(), q)
			}
			peer[i] = to(in.Val)
			return nil
		}
		if p.thread { // another thread of the PE reads it at the same time
			atomicStore(&s.Local()[i], to(in.Val))
			return nil
		}
		s.Local()[i] = to(in.Val)
		return nil
	case memmodel.OpLd:
		if q != p.w.MyPE() { // a load through roxshmem_ptr
			peer := s.Ptr(q)
			if peer == nil {
				return fmt.Errorf("PE %d has no pointer to PE %d's memory (Sym.Ptr)", p.w.MyPE(), q)
			}
			p.regs[in.Reg] = from(atomicLoad(&peer[i])) // the peer's puts land in it meanwhile
			return nil
		}
		if p.thread {
			p.regs[in.Reg] = from(atomicLoad(&s.Local()[i]))
			return nil
		}
		p.regs[in.Reg] = from(s.Local()[i])
		return nil
	case memmodel.OpPut:
		return s.P(i, to(in.Val), q)
	case memmodel.OpPutNBI:
		if in.Src.Var != "" { // from the PE's own source buffer
			b := p.di(p.l.data[in.Src.Var])
			return s.PutNBI(i, s.Local()[b:b+1], q)
		}
		return s.PutNBI(i, []T{to(in.Val)}, q)
	case memmodel.OpGet:
		if in.Dst.Var != "" { // into the PE's own destination
			d := p.di(p.l.data[in.Dst.Var])
			return s.Get(i, s.Local()[d:d+1], q)
		}
		v, err = s.G(i, q)
	case memmodel.OpGetNBI:
		if in.Dst.Var != "" {
			d := p.di(p.l.data[in.Dst.Var])
			return s.GetNBI(i, s.Local()[d:d+1], q)
		}
		buf := make([]T, 1)
		p.after[in.Reg] = func() int64 { return from(buf[0]) }
		return s.GetNBI(i, buf, q)
	case memmodel.OpFAdd:
		v, err = shmem.AtomicFetchAdd(s, i, to(in.Val), q)
	case memmodel.OpSwap:
		v, err = shmem.AtomicSwap(s, i, to(in.Val), q)
	case memmodel.OpCSwap:
		v, err = shmem.AtomicCompareSwap(s, i, to(in.Val), to(in.New), q)
	case memmodel.OpFetch:
		v, err = shmem.AtomicFetch(s, i, q)
	case memmodel.OpFInc:
		v, err = shmem.AtomicFetchInc(s, i, q)
	case memmodel.OpFAnd:
		v, err = shmem.AtomicFetchAnd(s, i, to(in.Val), q)
	case memmodel.OpFOr:
		v, err = shmem.AtomicFetchOr(s, i, to(in.Val), q)
	case memmodel.OpFXor:
		v, err = shmem.AtomicFetchXor(s, i, to(in.Val), q)
	case memmodel.OpInc:
		return shmem.AtomicInc(s, i, q)
	case memmodel.OpAnd:
		return shmem.AtomicAnd(s, i, to(in.Val), q)
	case memmodel.OpOr:
		return shmem.AtomicOr(s, i, to(in.Val), q)
	case memmodel.OpXor:
		return shmem.AtomicXor(s, i, to(in.Val), q)
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

// HostFeatures is what the host runner supports (memmodel.Feature), where every PE can address
// every PE's heap (mapsHeaps) or not: a store through roxshmem_ptr needs a pointer (the reordering
// path stores to every PE's heap itself). It lacks the vector forms of the polls other than
// wait_all (shmem has no call for them), polls over both signal and data words and puts from or
// gets into signal words (the runner keeps the two kinds in arrays of their own), and teams that
// are not strided sets of PEs (it makes teams by strided splits of the world team), and the device
// library's calls with no host counterpart (device_calls: warp and block forms, copy-engine puts).
func HostFeatures(mapsHeaps bool) memmodel.FeatureSet {
	s := memmodel.AllFeatures.Minus(memmodel.Features(memmodel.PollVector, memmodel.MixedPoll, memmodel.SignalBuffer, memmodel.IrregularTeam,
		memmodel.DeviceCalls))
	if !mapsHeaps {
		s = s.Minus(memmodel.Features(memmodel.PtrStore, memmodel.PtrLoad))
	}
	return s
}

// ReorderFeatures is what the host runner supports on the reordering delivery path: everything
// HostFeatures(true) has but loads through roxshmem_ptr (its emulated cache holds a PE's own
// words only).
func ReorderFeatures() memmodel.FeatureSet {
	return HostFeatures(true).Minus(memmodel.Features(memmodel.PtrLoad))
}

// HostStronger are the features the host runner runs with more order than the model promises,
// so that an Allowed weak outcome of a test using one may be out of reach (a power run does not
// count it): a NOSTORE context's quiet (shmem's Ctx.Quiet completes the PE's memory stores
// whatever the options), and puts and gets of several elements (a put of consecutive words is one
// delivery, and a get reads its elements in address order: only a strided put's elements are
// delivered one by one, out of order). Operations on a named context (MODEL.md §3a) run on a shmem.Ctx of their own,
// and each thread of a PE (§3b) issues on a shmem.Ctx of its own, its plain accesses in that
// context's store buffer; on the reordering delivery path a context is a stream of its own
// (nic.ReorderCtx), so its fence and quiet order and complete its operations only, as the model's.
// (On the runtime's own paths contexts share one ordered connection per pair of PEs, more order,
// but those paths show few weak outcomes of any test; power is measured on the reordering path.)
var HostStronger = memmodel.Features(memmodel.NoStore, memmodel.Elements)

// RunSuite runs every test in turn (RunPE for each) and joins the failures, so that one forbidden
// outcome does not hide the others; PE 0 ends with the power table. Every PE must call it with
// the same tests.
func RunSuite(ctx context.Context, w *shmem.World, tests []*memmodel.Test, mode memmodel.Mode, opt memmodel.Options, iters int, seed int64, out io.Writer) error {
	return Run(ctx, w, tests, mode, opt, Config{Iters: iters, Seed: seed}, out)
}

// Run is RunSuite with every setting of Config.
func Run(ctx context.Context, w *shmem.World, tests []*memmodel.Test, mode memmodel.Mode, opt memmodel.Options, cfg Config, out io.Writer) error {
	var errs []error
	var rows []memmodel.Power
	// Whether every PE maps every PE's heap, so that a store through roxshmem_ptr has a pointer.
	// The reordering path stores to every PE's heap itself.
	mapped := true
	var used memmodel.FeatureSet
	for _, t := range tests {
		used |= t.Features()
	}
	if (used.Has(memmodel.PtrStore) || used.Has(memmodel.PtrLoad)) && reorderOf(w) == nil {
		var err error
		if mapped, err = mapsEveryHeap(ctx, w); err != nil {
			return err
		}
	}
	supported := HostFeatures(mapped) // the same on every PE (mapsEveryHeap)
	if reorderOf(w) != nil {
		supported = ReorderFeatures()
	}
	for i, t := range tests {
		if miss := t.Unsupported(supported); !miss.Empty() { // every PE skips it: no collective call is left unmatched
			if w.MyPE() == 0 && out != nil {
				fmt.Fprintf(out, "Test %s not run: the host runner lacks %s%s\n\n", t.Name, miss, heapNote(miss, mapped))
			}
			p, err := memmodel.NotRunPower(t, mode, opt, supported)
			if err != nil {
				return errors.Join(append(errs, err)...)
			}
			rows = append(rows, p)
			continue
		}
		c := cfg
		c.Seed = cfg.Seed + int64(i)
		p, err := runPE(ctx, w, t, mode, opt, c, out)
		var fe *memmodel.ForbiddenError
		if err != nil && !errors.As(err, &fe) {
			return errors.Join(append(errs, err)...) // a runtime failure leaves the PEs out of step
		}
		if err != nil {
			errs = append(errs, err)
		}
		rows = append(rows, p)
	}
	if w.MyPE() == 0 && out != nil {
		path := "the runtime's own delivery paths"
		if ro := reorderOf(w); ro != nil {
			path = "the reordering delivery path (ROX_DELIVERY=reorder)"
			if m := ro.Mutation(); m != nic.MutNone {
				path += ", mutation " + m.String()
			}
		}
		memmodel.PrintPower(out, fmt.Sprintf("PE 0 on %s over %s, %s, %d copies per iteration", w.Device(), path, mode, max(cfg.Instances, DefaultInstances*boolInt(cfg.Instances == 0))), rows)
		if ro := reorderOf(w); ro != nil && ro.Mutation() != nic.MutNone {
			m, err := memmodel.ParseMutation(ro.Mutation().String())
			if err == nil {
				err = memmodel.PrintCaught(out, tests, rows, m, opt)
			}
			if err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// ModeOf returns the model mode matching the runtime's ordering.
func ModeOf(w *shmem.World) memmodel.Mode {
	if w.Ordering() == shmem.Bypass {
		return memmodel.Bypass
	}
	return memmodel.Strict
}

// heapNote says why ptr_store is missing, when it is.
func heapNote(miss memmodel.FeatureSet, mapped bool) string {
	if (miss.Has(memmodel.PtrStore) || miss.Has(memmodel.PtrLoad)) && !mapped {
		return " (not every PE maps every PE's heap here: the NIC path)"
	}
	return ""
}

// mapsEveryHeap reports, the same on every PE, whether every PE can address every PE's heap with
// loads and stores (it cannot over the NIC path, or across nodes): a minimum over the world of
// each PE's own answer. Collective.
func mapsEveryHeap(ctx context.Context, w *shmem.World) (bool, error) {
	probe, err := shmem.Alloc[int64](w, 2)
	if err != nil {
		return false, err
	}
	defer w.Free(probe.Mem())
	mine := int64(1)
	for q := 0; q < w.NPEs(); q++ {
		if probe.Ptr(q) == nil {
			mine = 0
		}
	}
	probe.Local()[0] = mine
	src, err := probe.Slice(0, 1)
	if err != nil {
		return false, err
	}
	dst, err := probe.Slice(1, 1)
	if err != nil {
		return false, err
	}
	if err := shmem.AllReduce(ctx, w.TeamWorld(), dst, src, shmem.OpMin); err != nil {
		return false, err
	}
	return dst.Local()[0] == 1, nil
}

// reorderOf is w's reordering delivery path (ROX_DELIVERY=reorder), or nil; shmem hands it over
// through internal/seam rather than exporting it.
func reorderOf(w *shmem.World) *nic.Reorder {
	r, _ := seam.Reorder(w).(*nic.Reorder)
	return r
}

// ctxReorderOf is c's own stream on the reordering delivery path, or nil.
func ctxReorderOf(c *shmem.Ctx) *nic.ReorderCtx {
	r, _ := seam.CtxReorder(c).(*nic.ReorderCtx)
	return r
}
