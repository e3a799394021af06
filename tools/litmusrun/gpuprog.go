package litmusrun

import (
	"fmt"
	"math"
	"sort"

	"github.com/roxamen/roxamen/kernels"
	"github.com/roxamen/roxamen/memmodel"
)

// The GPU runner's program: each PE's column of a test encoded as kernels.LitmusInsn for the
// roxk_litmus interpreter kernel (kernels/src/runtime.hip). Every variable of the test is one
// uint64 word of a symmetric array, varStride words apart; registers are numbered per PE.

// varStride is the distance in words between two variables (64 bytes: no two share a line half).
const varStride = 8

// Delays of the encoded program, in spin-loop turns of the kernel (NOP instructions).
const (
	startDelay = 4000 // before the column: covers the skew with which PEs leave the barrier
	stepDelay  = 400  // before each instruction
)

// gpuTest is a test laid out for the GPU runner; every PE computes the same one.
type gpuTest struct {
	t     *memmodel.Test
	vars  []string       // sorted
	slot  map[string]int // variable -> index in vars
	regs  map[int][]string
	nregs int // most registers any PE uses (at least 1)
	nbar  int // barriers of the test (every column has the same number)
	keys  []string
	// stride is the distance in bytes between two variables' words: 8*varStride on the one-copy
	// path; the many-copies path lays every copy's x side by side, then every copy's y, ...
	stride uint64
}

func newGPUTest(t *memmodel.Test) (*gpuTest, error) {
	if t.Threaded() {
		return nil, fmt.Errorf("litmusrun: test %s: threads of one PE (PEn.t) have no GPU encoding", t.Name)
	}
	if len(t.NoStore) > 0 {
		return nil, fmt.Errorf("litmusrun: test %s: a NOSTORE context has no GPU encoding (the device runs every operation on the default context)", t.Name)
	}
	if t.Features().Has(memmodel.DeviceCalls) {
		return nil, fmt.Errorf("litmusrun: test %s: the device library's group forms and context-only calls (device_calls) have no GPU encoding yet", t.Name)
	}
	if t.Mixed() {
		return nil, fmt.Errorf("litmusrun: test %s: 32-bit halves of a word (x.lo, x.hi) have no GPU encoding (its locations are whole words)", t.Name)
	}
	g := &gpuTest{t: t, slot: map[string]int{}, regs: map[int][]string{}, nregs: 1, keys: memmodel.StateKeys(t), stride: 8 * varStride}
	seen := map[string]bool{}
	note := func(v string) {
		if v != "" && !seen[v] {
			seen[v] = true
			g.vars = append(g.vars, v)
		}
	}
	for ci, c := range t.Columns {
		nb := 0
		for _, in := range c.Instrs {
			note(in.Loc.Var)
			note(in.Sig.Var)
			note(in.Src.Var)
			note(in.Dst.Var)
			if in.Op == memmodel.OpBarrier || in.Op == memmodel.OpSync { // both join the whole block of every PE
				nb++
			}
			if in.Reg != "" {
				found := false
				for _, r := range g.regs[c.PE] {
					found = found || r == in.Reg
				}
				if !found {
					g.regs[c.PE] = append(g.regs[c.PE], in.Reg)
				}
			}
		}
		if ci == 0 {
			g.nbar = nb
		} else if nb != g.nbar {
			return nil, fmt.Errorf("litmusrun: test %s: PE %d runs %d barriers, PE %d runs %d", t.Name, c.PE, nb, t.Columns[0].PE, g.nbar)
		}
		if n := len(g.regs[c.PE]); n > kernels.LitmusMaxRegs {
			return nil, fmt.Errorf("litmusrun: test %s: PE %d uses %d registers, the GPU interpreter holds %d", t.Name, c.PE, n, kernels.LitmusMaxRegs)
		} else if n > g.nregs {
			g.nregs = n
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
	sort.Strings(g.vars)
	for i, v := range g.vars {
		g.slot[v] = i
	}
	return g, nil
}

// words is the length of the symmetric variable array of the one-copy path.
func (g *gpuTest) words() int { return max(1, len(g.vars)) * varStride }

// varOff returns the heap offset of variable i, base being that of the variable array.
func (g *gpuTest) varOff(base uint64, i int) uint64 { return base + g.stride*uint64(i) }

// column returns the code of pe (nil for a PE without code).
func (g *gpuTest) column(pe int) *memmodel.Column {
	for i := range g.t.Columns {
		if g.t.Columns[i].PE == pe {
			return &g.t.Columns[i]
		}
	}
	return nil
}

func (g *gpuTest) reg(pe int, name string) (uint32, bool) {
	for i, r := range g.regs[pe] {
		if r == name {
			return uint32(i), true
		}
	}
	return 0, false
}

// encode returns pe's program: its column, or as many barriers as the test has for a PE without
// code. base is the heap offset of the variable array. With seed != 0 a NOP delay precedes the
// column and each instruction (the kernel draws each delay from seed, the iteration and the index).
// The column starts with a WARM of every word it loads plainly (the kernel runs each with
// probability 1/2 per copy and iteration): an unrecorded plain load that leaves the word's line in
// the SM's L1, so that a later plain load may hit it stale where the model allows (MODEL.md §8).
func (g *gpuTest) encode(pe int, base uint64, seed uint64) ([]kernels.LitmusInsn, error) {
	off := func(v string) uint64 { return g.varOff(base, g.slot[v]) }
	col := g.column(pe)
	var prog []kernels.LitmusInsn
	delay := func(max uint64) {
		if seed != 0 {
			prog = append(prog, kernels.LitmusInsn{Op: kernels.LitmusNop, Value: max, Aux: seed + uint64(len(prog))*0x632be59bd9b4e019})
		}
	}
	if col == nil { // the barriers and syncs of the first column, in its order
		for _, in := range g.t.Columns[0].Instrs {
			switch in.Op {
			case memmodel.OpBarrier:
				prog = append(prog, kernels.LitmusInsn{Op: kernels.LitmusBarrier})
			case memmodel.OpSync:
				prog = append(prog, kernels.LitmusInsn{Op: kernels.LitmusSync})
			}
		}
		return prog, nil
	}
	warmed := map[memmodel.Loc]bool{}
	for _, in := range col.Instrs {
		if in.Op == memmodel.OpLd && !warmed[in.Loc] {
			warmed[in.Loc] = true
			prog = append(prog, kernels.LitmusInsn{Op: kernels.LitmusWarm, PE: int32(in.Loc.PE), Var: off(in.Loc.Var),
				Aux: seed ^ uint64(len(prog))*0xd1b54a32d192ed03})
		}
	}
	delay(startDelay)
	for _, in := range col.Instrs {
		if col.Thread != 0 || (in.NBI && in.Op != memmodel.OpPutSig) || in.Team != nil || in.Call != "" || len(in.Locs) > 0 {
			return nil, fmt.Errorf("litmusrun: test %s PE %d: %s has no GPU encoding", g.t.Name, pe, in.Format(pe))
		}
		x := kernels.LitmusInsn{PE: int32(in.Loc.PE), Var: off(in.Loc.Var), Value: uint64(in.Val)}
		if in.Reg != "" {
			x.Reg, _ = g.reg(pe, in.Reg)
		}
		switch in.Op {
		case memmodel.OpSt:
			x.Op = kernels.LitmusSt
			if in.Loc.PE != pe {
				x.Op = kernels.LitmusPtrSt
			}
		case memmodel.OpLd:
			x.Op = kernels.LitmusLd
			if in.Loc.PE != pe {
				x.Op = kernels.LitmusPtrLd
			}
		case memmodel.OpPut:
			x.Op = kernels.LitmusPut
		case memmodel.OpPutNBI:
			x.Op = kernels.LitmusPutNBI
			if in.Src.Var != "" {
				x.Op, x.Aux, x.Value = kernels.LitmusPutBuf, off(in.Src.Var), 0
			}
		case memmodel.OpGet:
			x.Op = kernels.LitmusGet
			if in.Dst.Var != "" {
				x.Op, x.Aux = kernels.LitmusGetDst, off(in.Dst.Var)
			}
		case memmodel.OpGetNBI:
			x.Op = kernels.LitmusGetNBI
			if in.Dst.Var != "" {
				x.Op, x.Aux = kernels.LitmusGetNBIDst, off(in.Dst.Var)
			}
		case memmodel.OpInc:
			x.Op = kernels.LitmusInc
		case memmodel.OpFInc:
			x.Op = kernels.LitmusFInc
		case memmodel.OpAnd:
			x.Op = kernels.LitmusAnd
		case memmodel.OpOr:
			x.Op = kernels.LitmusOr
		case memmodel.OpXor:
			x.Op = kernels.LitmusXor
		case memmodel.OpFAnd:
			x.Op = kernels.LitmusFAnd
		case memmodel.OpFOr:
			x.Op = kernels.LitmusFOr
		case memmodel.OpFXor:
			x.Op = kernels.LitmusFXor
		case memmodel.OpSigFetch:
			x.Op = kernels.LitmusSigFetch
		case memmodel.OpSync:
			x = kernels.LitmusInsn{Op: kernels.LitmusSync}
		case memmodel.OpFAdd:
			x.Op = kernels.LitmusFAdd
		case memmodel.OpSwap:
			x.Op = kernels.LitmusSwap
		case memmodel.OpCSwap:
			x.Op, x.Aux, x.Value = kernels.LitmusCSwap, uint64(in.Val), uint64(in.New)
		case memmodel.OpFetch:
			x.Op = kernels.LitmusFetch
		case memmodel.OpAdd:
			x.Op = kernels.LitmusAdd
		case memmodel.OpSet:
			x.Op = kernels.LitmusSet
		case memmodel.OpPutSig:
			if in.Sig.PE != in.Loc.PE {
				return nil, fmt.Errorf("litmusrun: test %s PE %d: %s: signal on PE %d, data on PE %d", g.t.Name, pe, in.Format(pe), in.Sig.PE, in.Loc.PE)
			}
			if in.New < 0 || in.New > math.MaxUint32 {
				return nil, fmt.Errorf("litmusrun: test %s PE %d: %s: signal value %d does not fit the GPU program's 32 bits", g.t.Name, pe, in.Format(pe), in.New)
			}
			x.Op, x.Aux, x.Reg = kernels.LitmusPutSig, off(in.Sig.Var), uint32(in.New)
			if in.NBI {
				x.Op = kernels.LitmusPutSigNBI
			}
			x.Sub = 0
			if in.SigOp == memmodel.SigAdd {
				x.Sub = 1
			}
		case memmodel.OpWait:
			c, ok := cmpGPU[in.Cmp]
			if !ok {
				return nil, fmt.Errorf("litmusrun: test %s PE %d: %s: comparison %v", g.t.Name, pe, in.Format(pe), in.Cmp)
			}
			x.Op, x.Sub = kernels.LitmusWait, c
		case memmodel.OpFence:
			x = kernels.LitmusInsn{Op: kernels.LitmusFence}
		case memmodel.OpQuiet:
			x = kernels.LitmusInsn{Op: kernels.LitmusQuiet}
		case memmodel.OpBarrier:
			x = kernels.LitmusInsn{Op: kernels.LitmusBarrier}
		default:
			return nil, fmt.Errorf("litmusrun: test %s PE %d: instruction %s has no GPU encoding", g.t.Name, pe, in.Format(pe))
		}
		delay(stepDelay)
		prog = append(prog, x)
	}
	return prog, nil
}

var cmpGPU = map[memmodel.Cmp]uint32{
	memmodel.CmpEQ: kernels.CmpEQ, memmodel.CmpNE: kernels.CmpNE, memmodel.CmpGT: kernels.CmpGT,
	memmodel.CmpLE: kernels.CmpLE, memmodel.CmpLT: kernels.CmpLT, memmodel.CmpGE: kernels.CmpGE,
}

// decode is encode's inverse (NOPs dropped): the instructions a program runs, for the round-trip
// test and for error messages.
func (g *gpuTest) decode(pe int, base uint64, prog []kernels.LitmusInsn) ([]memmodel.Instr, error) {
	name := func(off uint64) (string, error) {
		if off < base || (off-base)%g.stride != 0 || int((off-base)/g.stride) >= len(g.vars) {
			return "", fmt.Errorf("litmusrun: decode test %s PE %d: offset %#x is no variable (base %#x)", g.t.Name, pe, off, base)
		}
		return g.vars[(off-base)/g.stride], nil
	}
	var out []memmodel.Instr
	for i, x := range prog {
		in := memmodel.Instr{Loc: memmodel.Loc{PE: int(x.PE)}, Val: int64(x.Value)}
		switch x.Op {
		case kernels.LitmusNop, kernels.LitmusWarm: // no event of the test (MODEL.md §8)
			continue
		case kernels.LitmusFence, kernels.LitmusQuiet, kernels.LitmusBarrier, kernels.LitmusSync:
			out = append(out, memmodel.Instr{Op: map[uint32]memmodel.Op{kernels.LitmusFence: memmodel.OpFence, kernels.LitmusQuiet: memmodel.OpQuiet,
				kernels.LitmusBarrier: memmodel.OpBarrier, kernels.LitmusSync: memmodel.OpSync}[x.Op]})
			continue
		}
		v, err := name(x.Var)
		if err != nil {
			return nil, err
		}
		in.Loc.Var = v
		regOps := map[uint32]memmodel.Op{kernels.LitmusLd: memmodel.OpLd, kernels.LitmusGet: memmodel.OpGet, kernels.LitmusGetNBI: memmodel.OpGetNBI,
			kernels.LitmusFAdd: memmodel.OpFAdd, kernels.LitmusSwap: memmodel.OpSwap, kernels.LitmusCSwap: memmodel.OpCSwap, kernels.LitmusFetch: memmodel.OpFetch,
			kernels.LitmusFInc: memmodel.OpFInc, kernels.LitmusFAnd: memmodel.OpFAnd, kernels.LitmusFOr: memmodel.OpFOr, kernels.LitmusFXor: memmodel.OpFXor,
			kernels.LitmusSigFetch: memmodel.OpSigFetch, kernels.LitmusPtrLd: memmodel.OpLd}
		if op, ok := regOps[x.Op]; ok {
			if int(x.Reg) >= len(g.regs[pe]) {
				return nil, fmt.Errorf("litmusrun: decode test %s PE %d instruction %d: register %d of %d", g.t.Name, pe, i, x.Reg, len(g.regs[pe]))
			}
			in.Op, in.Reg = op, g.regs[pe][x.Reg]
		}
		switch x.Op {
		case kernels.LitmusSt, kernels.LitmusPtrSt:
			in.Op = memmodel.OpSt
		case kernels.LitmusInc:
			in.Op, in.Val = memmodel.OpInc, 0
		case kernels.LitmusAnd, kernels.LitmusOr, kernels.LitmusXor:
			in.Op = map[uint32]memmodel.Op{kernels.LitmusAnd: memmodel.OpAnd, kernels.LitmusOr: memmodel.OpOr, kernels.LitmusXor: memmodel.OpXor}[x.Op]
		case kernels.LitmusFInc, kernels.LitmusSigFetch, kernels.LitmusPtrLd:
			in.Val = 0
		case kernels.LitmusPutBuf, kernels.LitmusGetDst, kernels.LitmusGetNBIDst:
			b, err := name(x.Aux)
			if err != nil {
				return nil, err
			}
			l := memmodel.Loc{Var: b, PE: pe}
			switch x.Op {
			case kernels.LitmusPutBuf:
				in.Op, in.Src, in.Val = memmodel.OpPutNBI, l, 0
			case kernels.LitmusGetDst:
				in.Op, in.Dst, in.Val = memmodel.OpGet, l, 0
			default:
				in.Op, in.Dst, in.Val = memmodel.OpGetNBI, l, 0
			}
		case kernels.LitmusPut:
			in.Op = memmodel.OpPut
		case kernels.LitmusPutNBI:
			in.Op = memmodel.OpPutNBI
		case kernels.LitmusAdd:
			in.Op = memmodel.OpAdd
		case kernels.LitmusSet:
			in.Op = memmodel.OpSet
		case kernels.LitmusCSwap:
			in.Val, in.New = int64(x.Aux), int64(x.Value)
		case kernels.LitmusFetch, kernels.LitmusGet, kernels.LitmusGetNBI, kernels.LitmusLd:
			in.Val = 0
		case kernels.LitmusPutSig, kernels.LitmusPutSigNBI:
			in.NBI = x.Op == kernels.LitmusPutSigNBI
			s, err := name(x.Aux)
			if err != nil {
				return nil, err
			}
			in.Op, in.New, in.Sig = memmodel.OpPutSig, int64(x.Reg), memmodel.Loc{Var: s, PE: int(x.PE)}
			if x.Sub == 1 {
				in.SigOp = memmodel.SigAdd
			}
		case kernels.LitmusWait:
			in.Op = memmodel.OpWait
			for c, k := range cmpGPU {
				if k == x.Sub {
					in.Cmp = c
				}
			}
		}
		if _, ok := regOps[x.Op]; !ok && in.Op == 0 && x.Op != kernels.LitmusSt && x.Op != kernels.LitmusPtrSt {
			return nil, fmt.Errorf("litmusrun: decode test %s PE %d instruction %d: op %d", g.t.Name, pe, i, x.Op)
		}
		out = append(out, in)
	}
	return out, nil
}

// initList returns the (heap offset, value) pairs of every variable's copy on pe at the start of
// an iteration: the kernel resets them and reports their final values in this order.
func (g *gpuTest) initList(pe int, base uint64) []uint64 {
	vals := make([]uint64, len(g.vars))
	for _, iv := range g.t.Init {
		if iv.Loc.PE == pe {
			vals[g.slot[iv.Loc.Var]] = uint64(iv.Val)
		}
	}
	var l []uint64
	for i := range g.vars {
		l = append(l, g.varOff(base, i), vals[i])
	}
	return l
}

// state builds one iteration's final state from every PE's registers and variable values
// (regs[pe] has g.nregs words, mem[pe] one word per variable).
func (g *gpuTest) state(regs, mem [][]uint64) (memmodel.State, error) {
	st := memmodel.State{}
	for _, k := range g.keys {
		if i := lastAt(k); i >= 0 {
			var pe int
			if _, err := fmt.Sscanf(k[i+1:], "%d", &pe); err != nil || pe >= len(mem) {
				return nil, fmt.Errorf("litmusrun: test %s: bad state key %q", g.t.Name, k)
			}
			st[k] = int64(mem[pe][g.slot[k[:i]]])
			continue
		}
		var pe int
		var r string
		if _, err := fmt.Sscanf(k, "%d:%s", &pe, &r); err != nil || pe >= len(regs) {
			return nil, fmt.Errorf("litmusrun: test %s: bad state key %q", g.t.Name, k)
		}
		st[k] = 0 // a register the column never writes stays 0, as on the host backend
		if i, ok := g.reg(pe, r); ok {
			st[k] = int64(regs[pe][i])
		}
	}
	return st, nil
}
