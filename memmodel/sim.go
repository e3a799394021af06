package memmodel

import (
	"context"
	"fmt"
	"math/rand"
	"runtime"
	"sync"
	"time"
)

// SimRunner is the model's reference backend (strict mode): it executes a test in memory, one
// goroutine per column and a network goroutine that delivers puts, AMOs, put-with-signal and
// non-blocking gets in random order — out of order as far as the API allows, keeping only the
// order fence imposes per (source, target) pair; quiet waits until the PE's operations are
// delivered, blocking calls until theirs is. Its fence, quiet and put-with-signal are therefore
// what keeps forbidden outcomes away, and Mutation breaks one of them on purpose, so that a
// conformance run can show it catches the break (see Power).
type SimRunner struct {
	Mutation Mutation
}

// Mutation is a deliberate bug of SimRunner.
type Mutation int

// The mutations a conformance run must catch.
const (
	MutNone         Mutation = iota
	MutDropFences            // fence orders nothing
	MutQuietAsFence          // quiet orders like a fence but completes nothing
	MutSignalFirst           // put-with-signal may deliver the signal before the data
)

var mutationNames = [...]string{"none", "drop-fences", "quiet-as-fence", "signal-first"}

func (m Mutation) String() string {
	if m >= 0 && int(m) < len(mutationNames) {
		return mutationNames[m]
	}
	return fmt.Sprintf("Mutation(%d)", int(m))
}

type simOp struct {
	src, dst, epoch int
	apply           func() // runs under simMem.mu
	done            chan struct{}
	store           bool          // a plain store waiting in the PE's store buffer
	load            bool          // a plain load not yet performed
	loc             Loc           // a store's location
	val             int64         // a store's value
	unfenced        bool          // fence neither orders nor waits for it (get_nbi)
	amo             bool          // an AMO on loc: atomic with the other AMOs on loc
	amoWrite        bool          // the write half of an RMW on loc, read already
	rmw             func() func() // an RMW: reads (and sets the register), returns its write half
	ctx             string        // the communication context it is issued on ("" the default)
}

// simCtx is one PE's communication context: fences count per context.
type simCtx struct {
	pe  int
	ctx string
}

type simMem struct {
	mu      sync.Mutex
	mem     map[Loc]int64
	pending []*simOp
	epoch   map[simCtx]int // per source PE and context: fences issued
	drop    bool
}

// issue queues an operation; set, if given, fills in its other fields before the network can
// see it.
func (m *simMem) issue(src, dst int, apply func(), set ...func(*simOp)) *simOp {
	m.mu.Lock()
	defer m.mu.Unlock()
	op := &simOp{src: src, dst: dst, apply: apply, done: make(chan struct{})}
	for _, f := range set {
		f(op)
	}
	op.epoch = m.epoch[simCtx{src, op.ctx}]
	m.pending = append(m.pending, op)
	return op
}

// issueOn issues an operation on communication context c.
func (m *simMem) issueOn(c string, src, dst int, apply func(), set ...func(*simOp)) *simOp {
	return m.issue(src, dst, apply, append(set, func(o *simOp) { o.ctx = c })...)
}

// deliverOne delivers a random deliverable op; false when none is pending.
func (m *simMem) deliverOne(rng *rand.Rand) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	var ok []int
	for i, op := range m.pending {
		blocked := false
		for _, o := range m.pending[:i] {
			if !m.drop && o.src == op.src && o.dst == op.dst && o.ctx == op.ctx && o.epoch < op.epoch && !o.unfenced && !op.unfenced {
				blocked = true
			}
			if (o.store || o.load) && (op.store || op.load) && o.src == op.src && overlaps(o.loc, op.loc) { // a PE's plain accesses to one word stay in order
				blocked = true
			}
		}
		if !blocked && !(op.amo && m.amoBusy(op.loc)) {
			ok = append(ok, i)
		}
	}
	if len(ok) == 0 {
		return false
	}
	i := ok[rng.Intn(len(ok))]
	op := m.pending[i]
	m.pending = append(m.pending[:i], m.pending[i+1:]...)
	if op.rmw != nil { // AMOs are atomic only among AMOs: a put may land between read and write
		w := op.rmw()
		m.pending = append(m.pending, &simOp{src: op.src, dst: op.dst, epoch: op.epoch, apply: w, done: op.done, amoWrite: true, loc: op.loc, ctx: op.ctx})
		return true
	}
	op.apply()
	close(op.done)
	return true
}

// amoBusy reports whether an RMW on loc has read and not yet written.
func (m *simMem) amoBusy(loc Loc) bool {
	for _, o := range m.pending {
		if o.amoWrite && overlaps(o.loc, loc) { // a 64-bit AMO and a 32-bit one on its half exclude each other
			return true
		}
	}
	return false
}

// load reads l: a whole word, or a half of one (width.go); mu held.
func (m *simMem) load(l Loc) int64 {
	if h := l.half(); h != 0 {
		return halfVal(m.mem[l.word()], h)
	}
	return m.mem[l]
}

// store writes v to l: a 64-bit word whole, single-copy atomic; a half's 32 bits, the other half
// untouched; mu held.
func (m *simMem) store(l Loc, v int64) {
	w := l.word()
	switch l.half() {
	case 1:
		m.mem[w] = join64(v, hi32(m.mem[w]))
	case 2:
		m.mem[w] = join64(lo32(m.mem[w]), v)
	default:
		m.mem[l] = v
	}
}

// drainPlain waits until the PE's buffered plain stores and late plain loads are performed.
func (m *simMem) drainPlain(ctx context.Context, src int) error {
	for {
		m.mu.Lock()
		n := 0
		for _, op := range m.pending {
			if op.src == src && (op.store || op.load) {
				n++
			}
		}
		m.mu.Unlock()
		if n == 0 {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("sync on PE%d: %w", src, err)
		}
		runtime.Gosched()
	}
}

// quiet waits until the PE's operations on context c and its plain accesses are performed.
func (m *simMem) quiet(ctx context.Context, src int, c string) error {
	for {
		m.mu.Lock()
		n := 0
		for _, op := range m.pending {
			if op.src == src && (op.ctx == c || op.store || op.load) {
				n++
			}
		}
		m.mu.Unlock()
		if n == 0 {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("quiet on PE%d: %w", src, err)
		}
		runtime.Gosched()
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func (s SimRunner) RunOnce(ctx context.Context, t *Test, seed int64) (State, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	m := &simMem{mem: map[Loc]int64{}, epoch: map[simCtx]int{}, drop: s.Mutation == MutDropFences}
	for _, iv := range t.Init {
		m.store(iv.Loc, iv.Val)
	}
	regs := map[string]int64{}
	var regMu sync.Mutex
	setReg := func(pe int, r string, v int64) {
		regMu.Lock()
		regs[regKey(pe, r)] = v
		regMu.Unlock()
	}
	// a collective call (its key and number) releases when need callers have arrived: every
	// member, or for a broadcast the root.
	var barMu sync.Mutex
	barCount := map[string]int{}
	barDone := map[string]chan struct{}{}
	barrier := func(k string, need int, arrive bool) chan struct{} {
		barMu.Lock()
		defer barMu.Unlock()
		if barDone[k] == nil {
			barDone[k] = make(chan struct{})
		}
		if arrive {
			barCount[k]++
			if barCount[k] == need {
				close(barDone[k])
			}
		}
		return barDone[k]
	}
	netDone := make(chan struct{})
	stopNet := make(chan struct{})
	go func() {
		defer close(netDone)
		rng := rand.New(rand.NewSource(seed))
		for {
			if !m.deliverOne(rng) {
				select {
				case <-stopNet:
					return
				default:
				}
			}
			if rng.Intn(2) == 0 { // linger, so that readers see the memory between two deliveries
				time.Sleep(time.Duration(rng.Intn(50)) * time.Microsecond)
			}
			runtime.Gosched()
		}
	}()
	errs := make(chan error, len(t.Columns))
	var wg sync.WaitGroup
	for ci, col := range t.Columns {
		wg.Add(1)
		go func(col Column, rng *rand.Rand) {
			defer wg.Done()
			errs <- s.column(ctx, m, col, rng, setReg, barrier, len(t.Columns))
		}(col, rand.New(rand.NewSource(seed+int64(ci)+1)))
	}
	wg.Wait()
	close(stopNet)
	<-netDone
	for len(m.pending) > 0 {
		m.deliverOne(rand.New(rand.NewSource(seed)))
	}
	close(errs)
	for err := range errs {
		if err != nil {
			return nil, err
		}
	}
	st := State{}
	for k, v := range regs {
		st[k] = v
	}
	for _, l := range condLocs(t) {
		st[l.String()] = m.load(l)
	}
	return st, nil
}

func (s SimRunner) column(ctx context.Context, m *simMem, col Column, rng *rand.Rand, setReg func(int, string, int64), barrier func(string, int, bool) chan struct{}, ncols int) error {
	pe := col.PE
	me := pe + 64*col.Thread // the issuing thread: fence, quiet and the store buffer are per thread
	calls := map[string]int{}
	time.Sleep(time.Duration(rng.Intn(10)) * time.Microsecond)
	for _, in := range expandElems(col.Instrs) {
		if rng.Intn(3) == 0 {
			runtime.Gosched()
		}
		in := in
		switch in.Op {
		case OpSt: // into the store buffer: delivered to memory later, ordered by fence and quiet
			m.issueOn(in.Ctx, me, in.Loc.PE, func() { m.store(in.Loc, in.Val) }, func(o *simOp) {
				o.store, o.loc, o.val = true, in.Loc, in.Val
				if in.Loc.half() != 0 { // a 32-bit store writes the low 32 bits of its value
					o.val = lo32(in.Val)
				}
			})
		case OpLd:
			m.mu.Lock()
			forwarded, partial := false, false
			for _, o := range m.pending { // a PE sees its own buffered stores
				if o.store && o.src == me && o.loc == in.Loc {
					setReg(pe, in.Reg, o.val)
					forwarded = true
				} else if o.store && o.src == me && overlaps(o.loc, in.Loc) {
					partial = true
				}
			}
			m.mu.Unlock()
			if partial { // a buffered store of another width overlaps: let the stores land first
				if err := m.drainPlain(ctx, me); err != nil {
					return err
				}
				forwarded = false
			}
			if forwarded {
				break
			}
			// else performed later, by the network: only quiet, barrier and the PE's later plain
			// accesses to the word order a plain load, so a later put may overtake it
			m.issueOn(in.Ctx, me, pe, func() { setReg(pe, in.Reg, m.load(in.Loc)) }, func(o *simOp) {
				o.load, o.loc, o.unfenced = true, in.Loc, true
			})
		case OpGet:
			if in.Dst.Var != "" { // the PE's earlier accesses to the destination come first
				if err := m.drainPlain(ctx, me); err != nil {
					return err
				}
			}
			m.mu.Lock()
			v := m.load(in.Loc)
			if in.Dst.Var != "" {
				m.store(in.Dst, v)
			}
			m.mu.Unlock()
			if in.Reg != "" {
				setReg(pe, in.Reg, v)
			}
		case OpPutNBI:
			if in.Src.Var != "" { // the source is read at delivery: from the PE's store buffer, else memory
				m.issueOn(in.Ctx, me, in.Loc.PE, func() {
					v := m.load(in.Src)
					for _, o := range m.pending {
						if o.store && o.src == me && o.loc == in.Src {
							v = o.val
						}
					}
					m.store(in.Loc, v)
				})
				break
			}
			m.issueOn(in.Ctx, me, in.Loc.PE, func() { m.store(in.Loc, in.Val) })
		case OpPut:
			m.issueOn(in.Ctx, me, in.Loc.PE, func() { m.store(in.Loc, in.Val) })
		case OpSet:
			m.issueOn(in.Ctx, me, in.Loc.PE, func() { m.store(in.Loc, in.Val) }, func(o *simOp) {
				o.amo, o.loc = true, in.Loc
			})
		case OpSigFetch: // a relaxed read of the own signal word: performed late, as a plain load
			m.issueOn(in.Ctx, me, pe, func() { setReg(pe, in.Reg, m.load(in.Loc)) }, func(o *simOp) {
				o.load, o.loc, o.unfenced = true, in.Loc, true
			})
		case OpAdd, OpFAdd, OpSwap, OpCSwap, OpFetch, OpInc, OpFInc, OpAnd, OpOr, OpXor, OpFAnd, OpFOr, OpFXor: // fetching ones block: delivered in fence order, then waited for
			op := m.issueOn(in.Ctx, me, in.Loc.PE, nil, func(o *simOp) {
				o.amo, o.loc = true, in.Loc
				o.rmw = func() func() {
					old := m.load(in.Loc)
					if in.Reg != "" {
						setReg(pe, in.Reg, old)
					}
					switch {
					case in.Op == OpFetch:
					case in.Op == OpCSwap && in.Loc.half() != 0 && old == lo32(in.Val): // 32 bits compared
						return func() { m.store(in.Loc, in.New) }
					case in.Op == OpCSwap && in.Loc.half() == 0 && old == in.Val:
						return func() { m.store(in.Loc, in.New) }
					case in.Op != OpCSwap:
						return func() { m.store(in.Loc, rmwValue(in.Op, old, in.Val)) }
					}
					return func() {} // fetch, failed cswap: nothing to write
				}
			})
			if e := (Event{Op: in.Op, NBI: in.NBI}); !e.blockingFetch() {
				break // add, inc, and, or, xor and the _nbi forms do not wait
			}
			select {
			case <-op.done:
			case <-ctx.Done():
				return fmt.Errorf("PE%d %s: %w", pe, in.Op, ctx.Err())
			}
		case OpGetNBI: // fence does not order gets
			if in.Dst.Var != "" {
				if err := m.drainPlain(ctx, me); err != nil {
					return err
				}
				m.issueOn(in.Ctx, me, in.Loc.PE, func() { m.store(in.Dst, m.load(in.Loc)) }, func(o *simOp) {
					o.unfenced = true
				})
				break
			}
			m.issueOn(in.Ctx, me, in.Loc.PE, func() { setReg(pe, in.Reg, m.load(in.Loc)) }, func(o *simOp) {
				o.unfenced = true
			})
		case OpPutSig:
			signal := func() {
				if in.SigOp == SigAdd {
					m.store(in.Sig, m.load(in.Sig)+in.New)
				} else {
					m.store(in.Sig, in.New)
				}
			}
			if s.Mutation == MutSignalFirst { // two deliveries the network may reorder
				m.issueOn(in.Ctx, me, in.Loc.PE, signal)
				m.issueOn(in.Ctx, me, in.Loc.PE, func() { m.store(in.Loc, in.Val) })
				break
			}
			m.issueOn(in.Ctx, me, in.Loc.PE, func() {
				m.store(in.Loc, in.Val)
				signal()
			}, func(o *simOp) {
				o.amo, o.loc = true, in.Sig
			})
		case OpWait:
			for {
				m.mu.Lock()
				v := m.load(in.Loc)
				m.mu.Unlock()
				if in.Cmp.Holds(v, in.Val) {
					break
				}
				if err := ctx.Err(); err != nil {
					return fmt.Errorf("PE%d wait %s %s %d: %w", pe, in.Loc, in.Cmp, in.Val, err)
				}
				runtime.Gosched()
			}
		case OpFence:
			m.mu.Lock()
			m.epoch[simCtx{me, in.Ctx}]++
			m.mu.Unlock()
		case OpQuiet:
			if s.Mutation == MutQuietAsFence {
				m.mu.Lock()
				m.epoch[simCtx{me, in.Ctx}]++
				m.mu.Unlock()
				break
			}
			if err := m.quiet(ctx, me, in.Ctx); err != nil {
				return err
			}
		case OpBarrier, OpSync, OpAllReduce, OpBroadcast:
			var err error
			if in.Op == OpBarrier { // completes the default context's operations and the plain accesses
				err = m.quiet(ctx, me, "")
			} else { // the others complete only the PE's plain accesses
				err = m.drainPlain(ctx, me)
			}
			if err != nil {
				return err
			}
			k := collKey(in)
			key := fmt.Sprint(k, "#", calls[k])
			calls[k]++
			need := ncols
			if in.Team != nil {
				need = len(in.Team)
			}
			arrive := true
			if in.Op == OpBroadcast { // the members wait for the root only
				need, arrive = 1, pe == in.Root
			}
			select {
			case <-barrier(key, need, arrive):
			case <-ctx.Done():
				return fmt.Errorf("PE%d %s: %w", pe, key, ctx.Err())
			}
		case OpWaitAll, OpWaitAny, OpWaitSome, OpTest, OpTestAll, OpTestAny, OpTestSome:
			for {
				var holds []int
				m.mu.Lock()
				for k, l := range in.Locs {
					v := in.Vals[0]
					if len(in.Vals) > 1 {
						v = in.Vals[k]
					}
					if in.Cmp.Holds(m.load(l), v) {
						holds = append(holds, k)
					}
				}
				m.mu.Unlock()
				mask := int64(0)
				for _, k := range holds {
					mask |= 1 << k
				}
				r, ok := int64(0), true
				switch in.Op {
				case OpWaitAll, OpTestAll, OpTest:
					ok = len(holds) == len(in.Locs) || in.Op != OpWaitAll
					r = int64(boolInt(len(holds) == len(in.Locs)))
				case OpWaitAny, OpTestAny:
					ok, r = len(holds) > 0 || in.Op == OpTestAny, -1
					if len(holds) > 0 {
						r = int64(holds[rng.Intn(len(holds))])
					}
				case OpWaitSome, OpTestSome:
					ok, r = mask != 0 || in.Op == OpTestSome, mask
				}
				if ok {
					if in.Reg != "" {
						setReg(pe, in.Reg, r)
					}
					break
				}
				if err := ctx.Err(); err != nil {
					return fmt.Errorf("PE%d %s: %w", pe, in.Format(pe), err)
				}
				runtime.Gosched()
			}
		}
	}
	return nil
}

// expandElems replaces each put or get of several elements by one put or get per element, in
// order: one of the orders the model allows.
func expandElems(ins []Instr) []Instr {
	var out []Instr
	for _, in := range ins {
		if !in.elems() {
			out = append(out, in)
			continue
		}
		for k := range in.Locs {
			out = append(out, in.element(k))
		}
	}
	return out
}
