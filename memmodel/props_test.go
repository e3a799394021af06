package memmodel

import (
	"fmt"
	"math/rand"
	"reflect"
	"slices"
	"testing"
)

// genTest builds a small valid test from fuzz bytes: up to 3 PEs, up to 4 instructions each, over
// two variables, every instruction kind.
func genTest(data []byte) *Test {
	next := func() int {
		if len(data) == 0 {
			return 0
		}
		b := data[0]
		data = data[1:]
		return int(b)
	}
	npe := 1 + next()%3
	t := &Test{Name: "Gen"}
	vars := []string{"x", "y"}
	nreg := 0
	var regs []Prop
	for pe := 0; pe < npe; pe++ {
		col := Column{PE: pe}
		n := next() % 5
		for i := 0; i < n; i++ {
			q := next() % npe
			v := vars[next()%2]
			val := int64(next()%2 + 1)
			reg := fmt.Sprintf("r%d", nreg)
			in := Instr{Loc: Loc{v, q}, Val: val}
			switch next() % 34 {
			case 30, 31: // a put or get of the two words x, y of one PE: elements in no order
				in = Instr{Op: OpPut, Locs: []Loc{{"x", q}, {"y", q}}, Vals: []int64{val, 1}}
				if next()%2 == 0 {
					in = Instr{Op: OpGet, Locs: in.Locs, Regs: []string{reg + "x", reg + "y"}}
				}
				if next()%2 == 0 { // the strided call
					in.Call = map[Op]string{OpPut: "iput", OpGet: "iget"}[in.Op]
				}
			case 32: // a quiet of the operations to one PE
				in = Instr{Op: OpQuiet, Call: "pe_quiet", PEs: []int{q}}
			case 20:
				in.Op, in.Reg, in.NBI = OpFAdd, reg, true
			case 21:
				in.Op, in.Reg, in.Val, in.NBI = OpFetch, reg, 0, true
			case 22:
				in = Instr{Op: OpPutSig, Loc: Loc{"x", q}, Val: val, Sig: Loc{"s", q}, SigOp: SigOp(next() % 2), New: 1, NBI: true}
			case 23: // a store through roxshmem_ptr
				in = Instr{Op: OpSt, Loc: Loc{v, q}, Val: val}
			case 24: // put_nbi from the source buffer b, which case 25 stores to
				in = Instr{Op: OpPutNBI, Loc: Loc{v, q}, Src: Loc{"b", pe}}
			case 25:
				in = Instr{Op: OpSt, Loc: Loc{"b", pe}, Val: val}
			case 26: // a get into the destination d, which case 27 loads
				in = Instr{Op: []Op{OpGet, OpGetNBI}[next()%2], Loc: Loc{v, q}, Dst: Loc{"d", pe}}
			case 27:
				in = Instr{Op: OpLd, Reg: reg, Loc: Loc{"d", pe}}
			case 28, 29:
				op := []Op{OpWaitAll, OpWaitAny, OpWaitSome, OpTest, OpTestAll, OpTestAny, OpTestSome}[next()%7]
				in = Instr{Op: op, Locs: []Loc{{"s", pe}, {v, pe}}, Cmp: Cmp(next() % 6), Vals: []int64{int64(next() % 2)}}
				if op == OpTest {
					in.Locs = in.Locs[:1]
				}
				if next()%2 == 0 && op != OpTest {
					in.Vals = append(in.Vals, int64(next()%2))
				}
				if op != OpWaitAll {
					in.Reg = reg
				}
			case 16:
				in.Op = OpInc
				in.Val = 0
			case 17:
				in.Op, in.Reg = OpFXor, reg
			case 18:
				in = Instr{Op: OpSigFetch, Reg: reg, Loc: Loc{"s", pe}}
			case 19:
				in.Op = OpOr
			case 0:
				in = Instr{Op: OpSt, Loc: Loc{v, pe}, Val: val}
			case 1:
				in = Instr{Op: OpLd, Reg: reg, Loc: Loc{v, pe}}
			case 2:
				in.Op = OpPut
			case 3:
				in.Op = OpPutNBI
			case 4:
				in.Op, in.Reg, in.Val = OpGet, reg, 0
			case 5:
				in.Op, in.Reg, in.Val = OpGetNBI, reg, 0
			case 6:
				in.Op, in.Reg = OpFAdd, reg
			case 7:
				in.Op, in.Reg = OpSwap, reg
			case 8:
				in.Op, in.Reg, in.Val, in.New = OpCSwap, reg, 0, val
			case 9:
				in.Op, in.Reg, in.Val = OpFetch, reg, 0
			case 10:
				in.Op = OpAdd
			case 11:
				in.Op = OpSet
			case 12:
				in = Instr{Op: OpPutSig, Loc: Loc{"x", q}, Val: val, Sig: Loc{"s", q}, SigOp: SigOp(next() % 2), New: 1}
			case 13:
				in = Instr{Op: OpFence}
			case 14:
				in = Instr{Op: OpQuiet}
			default:
				in = Instr{Op: OpWait, Loc: Loc{"s", pe}, Cmp: CmpGE, Val: 0}
			}
			switch in.Op { // some operations, fences and quiets on one of two contexts
			case OpQuiet:
				if in.Call == "" {
					if c := next() % 6; c < 2 {
						in.Ctx = []string{"a", "b"}[c]
					}
				}
			case OpSt, OpLd, OpWait, OpSigFetch, OpWaitAll, OpWaitAny, OpWaitSome, OpTest, OpTestAll, OpTestAny, OpTestSome:
			default:
				if c := next() % 6; c < 2 {
					in.Ctx = []string{"a", "b"}[c]
				}
			}
			if in.Reg != "" {
				nreg++
				if next()%2 == 0 { // some registers stay out of the condition: Decide leaves their reads free
					regs = append(regs, Prop{Kind: PropReg, PE: pe, Reg: in.Reg, Val: int64(next() % 3)})
				}
			}
			col.Instrs = append(col.Instrs, in)
		}
		t.Columns = append(t.Columns, col)
	}
	synced := next()%4 == 0
	if synced { // one sync_all in every column
		for i := range t.Columns {
			c := &t.Columns[i]
			at := next() % (len(c.Instrs) + 1)
			c.Instrs = append(c.Instrs[:at], append([]Instr{{Op: OpSync}}, c.Instrs[at:]...)...)
		}
	}
	if k := next() % 8; k < 5 { // one collective in every column (of the team)
		coll := []Instr{{Op: OpBarrier}, {Op: OpAllReduce}, {Op: OpBroadcast, Root: next() % npe},
			{Op: OpBarrier, Team: []int{0, 1}}, {Op: OpSync, Team: []int{0, 1}}}[k]
		after := next()%2 == 0
		for i := range t.Columns {
			c := &t.Columns[i]
			if coll.Team != nil && (npe < 2 || i > 1) {
				continue
			}
			lo, hi := 0, len(c.Instrs) // on the same side of the sync in every column
			if s := slices.IndexFunc(c.Instrs, func(in Instr) bool { return in.Op == OpSync }); s >= 0 && after {
				lo = s + 1
			} else if s >= 0 {
				hi = s
			}
			at := lo + next()%(hi-lo+1)
			c.Instrs = append(c.Instrs[:at], append([]Instr{coll}, c.Instrs[at:]...)...)
		}
	} else if npe >= 2 && k == 5 && !synced { // the last column becomes a second thread of PE 0
		last := &t.Columns[npe-1]
		mv := func(l *Loc) {
			if l.Var != "" && l.PE == npe-1 {
				l.PE = 0
			}
		}
		for i := range last.Instrs {
			in := &last.Instrs[i]
			mv(&in.Loc)
			mv(&in.Sig)
			mv(&in.Src)
			mv(&in.Dst)
			for j := range in.Locs {
				mv(&in.Locs[j])
			}
		}
		last.PE, last.Thread = 0, 1
		for i := range regs {
			if regs[i].PE == npe-1 {
				regs[i].PE = 0
			}
		}
	}
	if next()%4 == 0 && !writesOn(t, "b") { // context b is NOSTORE: its quiet does not complete plain stores
		t.NoStore = []string{"b"}
	}
	t.Cond = Prop{Kind: PropMem, Loc: Loc{"x", 0}, Val: int64(next() % 3)}
	if len(regs) > 0 {
		t.Cond = Prop{Kind: PropAnd, Args: append(regs, t.Cond)}
	}
	if next()%3 == 0 {
		mixWidths(t, next)
	}
	return t
}

// writesOn reports whether a column of t writes through context ctx (which a NOSTORE context
// may not: the parser refuses such a test, as shmem refuses the call).
func writesOn(t *Test, ctx string) bool {
	for _, c := range t.Columns {
		for _, in := range c.Instrs {
			if in.Ctx == ctx && in.writes() {
				return true
			}
		}
	}
	return false
}

// mixWidths splits word x: some of the accesses to x become 32-bit accesses to x.lo or x.hi (the
// others stay 64-bit, two events sharing their instants), polls of x poll x.lo, gets into and puts
// from buffers take y instead, and x may start with its low half all ones, so that a 64-bit add
// carries into the high half.
func mixWidths(t *Test, next func() int) {
	for ci := range t.Columns {
		for ii := range t.Columns[ci].Instrs {
			in := &t.Columns[ci].Instrs[ii]
			for j := range in.Locs {
				if in.Locs[j].Var == "x" && in.Op.poll() {
					in.Locs[j].Var = "x.lo"
				}
			}
			if in.Loc.Var != "x" {
				continue
			}
			if in.Src.Var != "" || in.Dst.Var != "" {
				in.Loc.Var = "y"
				continue
			}
			switch in.Op {
			case OpWait, OpSigFetch: // (on s: not reached)
			default:
				if h := next() % 3; h > 0 {
					in.Loc.Var = []string{"", "x.lo", "x.hi"}[h]
				}
			}
		}
	}
	if next()%2 == 0 {
		pes := map[int]bool{}
		for _, c := range t.Columns {
			pes[c.PE] = true
		}
		for pe := 0; pe <= MaxPE; pe++ {
			if pes[pe] {
				t.Init = append(t.Init, InitVal{Loc{"x", pe}, 4294967295})
			}
		}
		sortInit(t.Init)
	}
	if next()%2 == 0 { // the condition asks for a half's value too
		t.Cond = Prop{Kind: PropAnd, Args: []Prop{t.Cond, {Kind: PropMem, Loc: Loc{"x.hi", 0}, Val: int64(next() % 2)}}}
	}
}

func stateSet(t *testing.T, tt *Test, m Mode, o Options) map[string]bool {
	r, err := Check(tt, m, o)
	if err != nil {
		t.Fatal(err)
	}
	s := map[string]bool{}
	for _, st := range r.States {
		s[st] = true
	}
	return s
}

func subset(a, b map[string]bool) string {
	for k := range a {
		if !b[k] {
			return k
		}
	}
	return ""
}

// Properties the model must have on any program: Bypass allows everything Strict allows; turning
// an ordering option off only adds outcomes; AtomicAllWrites only removes them; and the printed
// test parses back to itself.
func FuzzModelProperties(f *testing.F) {
	f.Add([]byte{1, 3, 1, 0, 2, 1, 2, 13, 1, 1, 1, 2, 2, 1, 0, 1, 15, 0, 0, 1, 1})
	f.Add([]byte{2, 2, 2, 0, 1, 6, 1, 2, 1, 1, 2, 0, 0, 8, 0, 2, 0, 1, 0, 0, 0, 4, 2})
	f.Add([]byte{1, 4, 0, 0, 1, 0, 1, 0, 1, 13, 1, 1, 1, 4, 0, 2, 1, 0, 1, 9, 1, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		tt := genTest(data)
		back, err := Parse("gen", []byte(tt.String()))
		if err != nil {
			t.Fatalf("generated test does not parse: %v\n%s", err, tt)
		}
		if !reflect.DeepEqual(back, tt) {
			t.Fatalf("parse(print(t)) != t\n%s", tt)
		}
		def := DefaultOptions()
		strict := stateSet(t, tt, Strict, def)
		for _, m := range []Mode{Strict, Bypass} {
			fast, slow := stateSet(t, tt, m, def), exhaustiveStates(t, tt, m, def)
			if k := subset(fast, slow) + subset(slow, fast); k != "" {
				t.Fatalf("%s: Check and Enumerate disagree on %s\n%s", m, k, tt)
			}
			r, _ := Check(tt, m, def)
			if v, err := Decide(tt, m, def); err != nil || v != r.Verdict {
				t.Fatalf("%s: Decide says %v (%v), Check %v\n%s", m, v, err, r.Verdict, tt)
			}
		}
		if k := subset(strict, stateSet(t, tt, Bypass, def)); k != "" {
			t.Fatalf("strict allows %s, bypass does not\n%s", k, tt)
		}
		for _, m := range []Mode{Strict, Bypass} {
			base := stateSet(t, tt, m, def)
			o := def
			o.FenceOrdersStores = false
			if k := subset(base, stateSet(t, tt, m, o)); k != "" {
				t.Fatalf("%s: dropping FenceOrdersStores loses %s\n%s", m, k, tt)
			}
			o = def
			o.BlockingFetchOrders = false
			if k := subset(base, stateSet(t, tt, m, o)); k != "" {
				t.Fatalf("%s: dropping BlockingFetchOrders loses %s\n%s", m, k, tt)
			}
			o = def
			o.AtomicAllWrites = true
			if k := subset(stateSet(t, tt, m, o), base); k != "" {
				t.Fatalf("%s: AtomicAllWrites adds %s\n%s", m, k, tt)
			}
		}
	})
}

// genRace builds tests of racing AMOs, the shape raceLoc, its memo and the symmetry classes
// exist for: up to 6 PEs with one or two AMOs each (7 in all) on one or two words, some registers in the
// condition, so that isolated, interchangeable and distinguished writes mix.
func genRace(data []byte) *Test {
	next := func() int {
		if len(data) == 0 {
			return 0
		}
		b := data[0]
		data = data[1:]
		return int(b)
	}
	npe := 2 + next()%5
	t := &Test{Name: "Race"}
	var conj []Prop
	total := 0
	for pe := 0; pe < npe; pe++ {
		col := Column{PE: pe}
		for i, n := 0, 1+next()%2; i < n && total < 7; i++ { // Enumerate walks every co order: 7! at most
			total++
			loc := Loc{[]string{"x", "x", "y"}[next()%3], 6}
			reg := fmt.Sprintf("r%d", i)
			val := int64(1 + next()%2)
			var in Instr
			switch next() % 7 {
			case 0, 1:
				in = Instr{Op: OpFAdd, Reg: reg, Loc: loc, Val: val}
			case 2:
				in = Instr{Op: OpAdd, Loc: loc, Val: val}
			case 3:
				in = Instr{Op: OpSwap, Reg: reg, Loc: loc, Val: val}
			case 4:
				in = Instr{Op: OpCSwap, Reg: reg, Loc: loc, Val: int64(next() % 2), New: val}
			case 5:
				in = Instr{Op: OpSet, Loc: loc, Val: val}
			default:
				in = Instr{Op: OpPut, Loc: loc, Val: val}
			}
			if in.Reg != "" && next()%3 == 0 {
				conj = append(conj, Prop{Kind: PropReg, PE: pe, Reg: reg, Val: int64(next() % 4)})
			}
			col.Instrs = append(col.Instrs, in)
		}
		t.Columns = append(t.Columns, col)
	}
	conj = append(conj, Prop{Kind: PropMem, Loc: Loc{"x", 6}, Val: int64(next() % 6)})
	t.Cond = conj[0]
	if len(conj) > 1 {
		t.Cond = Prop{Kind: PropAnd, Args: conj}
		if next()%2 == 0 {
			t.Cond.Kind = PropOr
		}
	}
	return t
}

// Racing AMOs: Check's race path agrees with exhaustive enumeration and Decide (symmetry, memo)
// with Check, in both modes and under AtomicAllWrites, on 120 seeded random races.
func TestRaceAgreesWithExhaustive(t *testing.T) {
	rng := rand.New(rand.NewSource(14))
	for i := 0; i < 120; i++ {
		data := make([]byte, 40)
		rng.Read(data)
		checkRace(t, genRace(data))
	}
}

func FuzzRace(f *testing.F) {
	f.Add([]byte{4, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 2, 2, 0})
	f.Fuzz(func(t *testing.T, data []byte) { checkRace(t, genRace(data)) })
}

func checkRace(t *testing.T, tt *Test) {
	t.Helper()
	for _, m := range []Mode{Strict, Bypass} {
		for _, aw := range []bool{false, true} {
			o := DefaultOptions()
			o.AtomicAllWrites = aw
			fast, slow := stateSet(t, tt, m, o), exhaustiveStates(t, tt, m, o)
			if k := subset(fast, slow) + "|" + subset(slow, fast); k != "|" {
				t.Fatalf("%s %+v: Check and Enumerate disagree on %s\n%s", m, o, k, tt)
			}
			r, _ := Check(tt, m, o)
			if v, err := Decide(tt, m, o); err != nil || v != r.Verdict {
				t.Fatalf("%s %+v: Decide says %v (%v), Check %v\n%s", m, o, v, err, r.Verdict, tt)
			}
		}
	}
}
