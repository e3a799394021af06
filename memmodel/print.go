package memmodel

import (
	"fmt"
	"strconv"
	"strings"
)

// Format writes one instruction in litmus syntax; own is the PE whose column holds it.
func (in Instr) Format(own int) string {
	if in.Call != "" {
		c := in
		c.Call, c.NBI = "", false // the call's name says _nbi (putsig_nbi_warp)
		return in.Call + strings.TrimPrefix(c.Format(own), in.Op.String())
	}
	if in.Ctx != "" {
		c := in
		c.Ctx = ""
		return c.Format(own) + " on " + in.Ctx
	}
	if in.NBI {
		c := in
		c.NBI = false
		name := in.Op.String()
		return name + "_nbi" + strings.TrimPrefix(c.Format(own), name)
	}
	switch {
	case in.Op.collective():
		s := in.Op.String()
		if in.Op == OpBroadcast {
			s += fmt.Sprintf(" %d", in.Root)
		}
		if in.Team != nil {
			s += " " + teamString(in.Team)
		}
		return s
	case in.Op.poll():
		var b strings.Builder
		b.WriteString(in.Op.String())
		if in.Reg != "" {
			b.WriteString(" " + in.Reg)
		}
		for i, l := range in.Locs {
			b.WriteString([]string{" ", ","}[min(i, 1)] + l.Var)
		}
		b.WriteString(" " + in.Cmp.String())
		for i, v := range in.Vals {
			fmt.Fprintf(&b, "%s%d", []string{" ", ","}[min(i, 1)], v)
		}
		return b.String()
	case in.elems(): // put x,y@q v,w; get r0,r1 x,y@q
		vars, vals := make([]string, len(in.Locs)), make([]string, len(in.Locs))
		for k, l := range in.Locs {
			vars[k] = l.Var
			if in.Op == OpPut {
				vals[k] = strconv.FormatInt(in.Vals[k], 10)
			}
		}
		at := fmt.Sprintf("%s@%d", strings.Join(vars, ","), in.Locs[0].PE)
		if in.Op == OpPut {
			return fmt.Sprintf("put %s %s", at, strings.Join(vals, ","))
		}
		return fmt.Sprintf("get %s %s", strings.Join(in.Regs, ","), at)
	case in.PEs != nil:
		return in.Op.String() + " " + teamString(in.PEs)
	case in.Op == OpPutNBI && in.Src.Var != "":
		return fmt.Sprintf("put_nbi %s %s", in.Loc, in.Src.Var)
	case in.Dst.Var != "":
		return fmt.Sprintf("%s %s %s", in.Op, in.Dst, in.Loc)
	}
	switch in.Op {
	case OpSt:
		if in.Loc.PE != own {
			return fmt.Sprintf("st %s %d", in.Loc, in.Val)
		}
		return fmt.Sprintf("st %s %d", in.Loc.Var, in.Val)
	case OpLd:
		if in.Loc.PE != own {
			return fmt.Sprintf("ld %s %s", in.Reg, in.Loc)
		}
		return fmt.Sprintf("ld %s %s", in.Reg, in.Loc.Var)
	case OpPut, OpPutNBI, OpAdd, OpSet, OpAnd, OpOr, OpXor:
		return fmt.Sprintf("%s %s %d", in.Op, in.Loc, in.Val)
	case OpInc:
		return fmt.Sprintf("inc %s", in.Loc)
	case OpSigFetch:
		return fmt.Sprintf("sigfetch %s %s", in.Reg, in.Loc.Var)
	case OpGet, OpGetNBI, OpFetch, OpFInc:
		return fmt.Sprintf("%s %s %s", in.Op, in.Reg, in.Loc)
	case OpFAdd, OpSwap, OpFAnd, OpFOr, OpFXor:
		return fmt.Sprintf("%s %s %s %d", in.Op, in.Reg, in.Loc, in.Val)
	case OpCSwap:
		return fmt.Sprintf("cswap %s %s %d %d", in.Reg, in.Loc, in.Val, in.New)
	case OpPutSig:
		return fmt.Sprintf("putsig %s %d %s %s %d", in.Loc, in.Val, in.Sig, in.SigOp, in.New)
	case OpWait:
		return fmt.Sprintf("wait %s %s %d", in.Loc.Var, in.Cmp, in.Val)
	}
	return in.Op.String()
}

// String formats a proposition; compound operands of compound nodes get parentheses so that the
// text parses back to the same tree.
func (p Prop) String() string {
	switch p.Kind {
	case PropTrue:
		return "true"
	case PropFalse:
		return "false"
	case PropReg:
		return fmt.Sprintf("%d:%s=%d", p.PE, p.Reg, p.Val)
	case PropMem:
		return fmt.Sprintf("%s=%d", p.Loc, p.Val)
	case PropNot:
		return "~" + p.Args[0].operand()
	case PropAnd, PropOr:
		sep := ` /\ `
		if p.Kind == PropOr {
			sep = ` \/ `
		}
		parts := make([]string, len(p.Args))
		for i, a := range p.Args {
			parts[i] = a.operand()
		}
		return strings.Join(parts, sep)
	}
	return fmt.Sprintf("Prop(%d)", int(p.Kind))
}

func (p Prop) operand() string {
	if p.Kind == PropAnd || p.Kind == PropOr {
		return "(" + p.String() + ")"
	}
	return p.String()
}

// String prints the test in litmus syntax, columns aligned; Parse reads it back to an equal Test.
func (t *Test) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "SHMEM %s\n", t.Name)
	if len(t.Init) > 0 || len(t.NoStore) > 0 {
		b.WriteString("{ ")
		for _, iv := range t.Init {
			fmt.Fprintf(&b, "%s=%d; ", iv.Loc, iv.Val)
		}
		for _, n := range t.NoStore {
			fmt.Fprintf(&b, "nostore %s; ", n)
		}
		b.WriteString("}\n")
	}
	rows := 0
	for _, c := range t.Columns {
		rows = max(rows, len(c.Instrs))
	}
	cells := make([][]string, rows+1)
	width := make([]int, len(t.Columns))
	for r := range cells {
		cells[r] = make([]string, len(t.Columns))
		for i, c := range t.Columns {
			switch {
			case r == 0 && c.Thread != 0:
				cells[r][i] = fmt.Sprintf("PE%d.%d", c.PE, c.Thread)
			case r == 0:
				cells[r][i] = fmt.Sprintf("PE%d", c.PE)
			case r-1 < len(c.Instrs):
				cells[r][i] = c.Instrs[r-1].Format(c.PE)
			}
			width[i] = max(width[i], len(cells[r][i]))
		}
	}
	for _, row := range cells {
		for i, cell := range row {
			if i > 0 {
				b.WriteString(" | ")
			}
			if i < len(row)-1 {
				fmt.Fprintf(&b, "%-*s", width[i], cell)
			} else {
				b.WriteString(cell)
			}
		}
		b.WriteString(" ;\n")
	}
	fmt.Fprintf(&b, "%s (%s)\n", t.Quant, t.Cond)
	if t.ExpectStrict != VerdictNone || t.ExpectBypass != VerdictNone {
		b.WriteString("expect")
		if t.ExpectStrict != VerdictNone {
			fmt.Fprintf(&b, " strict=%s", t.ExpectStrict)
		}
		if t.ExpectBypass != VerdictNone {
			fmt.Fprintf(&b, " bypass=%s", t.ExpectBypass)
		}
		b.WriteString("\n")
	}
	return b.String()
}
