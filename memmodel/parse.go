package memmodel

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// MaxPE bounds the PE numbers a litmus test may name.
const MaxPE = 63

// ParseError points at the offending line and column (both from 1).
type ParseError struct {
	File      string
	Line, Col int
	Msg       string
}

func (e *ParseError) Error() string {
	return fmt.Sprintf("%s:%d:%d: %s", e.File, e.Line, e.Col, e.Msg)
}

type tokKind int

const (
	tEOF tokKind = iota
	tWord
	tPunct
)

type token struct {
	kind      tokKind
	text      string
	line, col int
}

type parser struct {
	file      string
	src       string
	off       int
	line, col int
	tok       token // current token
	err       *ParseError
}

// ParseFile parses every test of one litmus file; name is used in error positions.
func ParseFile(name string, src []byte) ([]*Test, error) {
	p := &parser{file: name, src: string(src), line: 1, col: 1}
	if !utf8.Valid(src) {
		return nil, &ParseError{name, 1, 1, "file is not valid UTF-8"}
	}
	p.next()
	var tests []*Test
	for p.tok.kind != tEOF {
		t := p.test()
		if p.err != nil {
			return nil, p.err
		}
		tests = append(tests, t)
	}
	if p.err != nil {
		return nil, p.err
	}
	if len(tests) == 0 {
		return nil, &ParseError{name, p.line, p.col, "no test (want a line starting with SHMEM)"}
	}
	return tests, nil
}

// Parse parses a source holding exactly one test.
func Parse(name string, src []byte) (*Test, error) {
	ts, err := ParseFile(name, src)
	if err != nil {
		return nil, err
	}
	if len(ts) != 1 {
		return nil, fmt.Errorf("%s: holds %d tests, want 1", name, len(ts))
	}
	return ts[0], nil
}

func (p *parser) failAt(line, col int, format string, args ...any) {
	if p.err == nil {
		p.err = &ParseError{p.file, line, col, fmt.Sprintf(format, args...)}
	}
	p.tok = token{kind: tEOF, line: line, col: col}
	p.off = len(p.src)
}

func (p *parser) fail(format string, args ...any) { p.failAt(p.tok.line, p.tok.col, format, args...) }

func (p *parser) advance(n int) {
	for i := 0; i < n && p.off < len(p.src); i++ {
		if p.src[p.off] == '\n' {
			p.line++
			p.col = 1
		} else if p.src[p.off]&0xC0 != 0x80 {
			p.col++
		}
		p.off++
	}
}

func isWordByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '+' || c == '-' || c == '.'
}

// skipSpace skips blanks and (* comments *).
func (p *parser) skipSpace() {
	for p.off < len(p.src) {
		c := p.src[p.off]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			p.advance(1)
		case strings.HasPrefix(p.src[p.off:], "(*"):
			l, cl := p.line, p.col
			end := strings.Index(p.src[p.off+2:], "*)")
			if end < 0 {
				p.failAt(l, cl, "comment never closed (want *))")
				return
			}
			p.advance(end + 4)
		default:
			return
		}
	}
}

func (p *parser) next() {
	if p.err != nil {
		return
	}
	p.skipSpace()
	if p.err != nil {
		return
	}
	t := token{line: p.line, col: p.col}
	if p.off >= len(p.src) {
		t.kind = tEOF
		p.tok = t
		return
	}
	c := p.src[p.off]
	if isWordByte(c) {
		n := 0
		for p.off+n < len(p.src) && isWordByte(p.src[p.off+n]) {
			n++
		}
		t.kind, t.text = tWord, p.src[p.off:p.off+n]
		p.advance(n)
		p.tok = t
		return
	}
	for _, op := range []string{"==", "!=", "<=", ">=", `/\`, `\/`, "|", ";", "{", "}", "(", ")", "@", ":", "=", "<", ">", "~", ","} {
		if strings.HasPrefix(p.src[p.off:], op) {
			t.kind, t.text = tPunct, op
			p.advance(len(op))
			p.tok = t
			return
		}
	}
	r, _ := utf8.DecodeRuneInString(p.src[p.off:])
	p.failAt(p.line, p.col, "unexpected character %q", r)
}

func (p *parser) is(text string) bool { return p.tok.kind != tEOF && p.tok.text == text }

func (p *parser) describe() string {
	if p.tok.kind == tEOF {
		return "end of file"
	}
	return strconv.Quote(p.tok.text)
}

func (p *parser) expect(text string) {
	if !p.is(text) {
		p.fail("want %q, found %s", text, p.describe())
		return
	}
	p.next()
}

func (p *parser) int() int64 {
	if p.tok.kind != tWord {
		p.fail("want a number, found %s", p.describe())
		return 0
	}
	v, err := strconv.ParseInt(p.tok.text, 10, 64)
	if err != nil {
		p.fail("want a number, found %s", p.describe())
		return 0
	}
	p.next()
	return v
}

func isIdent(s string) bool {
	if s == "" || !(s[0] == '_' || s[0] >= 'a' && s[0] <= 'z' || s[0] >= 'A' && s[0] <= 'Z') {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// isVar reports whether s names a variable: an identifier, or one with .lo or .hi (a half of the
// 64-bit word).
func isVar(s string) bool {
	base, ok := strings.CutSuffix(s, loSuffix)
	if !ok {
		base, _ = strings.CutSuffix(s, hiSuffix)
	}
	return isIdent(base)
}

// variable reads a variable name: x, or x.lo / x.hi for the low / high 32-bit half of word x.
func (p *parser) variable() string {
	if p.tok.kind == tWord && !isVar(p.tok.text) {
		if i := strings.IndexByte(p.tok.text, '.'); i > 0 && isIdent(p.tok.text[:i]) {
			p.fail("variable %s: a half of word %s is %s.lo (bytes 0-3) or %s.hi (bytes 4-7)", p.tok.text, p.tok.text[:i], p.tok.text[:i], p.tok.text[:i])
			return ""
		}
	}
	if p.tok.kind != tWord || !isVar(p.tok.text) {
		p.fail("want variable name, found %s", p.describe())
		return ""
	}
	s := p.tok.text
	p.next()
	return s
}

func (p *parser) ident(what string) string {
	if p.tok.kind != tWord || !isIdent(p.tok.text) {
		p.fail("want %s name, found %s", what, p.describe())
		return ""
	}
	s := p.tok.text
	p.next()
	return s
}

func (p *parser) pe() int {
	line, col := p.tok.line, p.tok.col
	v := p.int()
	if p.err == nil && (v < 0 || v > MaxPE) {
		p.failAt(line, col, "PE %d out of range 0..%d", v, MaxPE)
	}
	return int(v)
}

// loc reads x@q, or a bare x meaning own's copy.
func (p *parser) loc(own int) Loc {
	v := p.variable()
	if p.is("@") {
		p.next()
		return Loc{v, p.pe()}
	}
	return Loc{v, own}
}

// ownLoc reads a variable that must be the PE's own copy (plain accesses, wait).
func (p *parser) ownLoc(own int, op string) Loc {
	line, col := p.tok.line, p.tok.col
	l := p.loc(own)
	if p.err == nil && l.PE != own {
		p.failAt(line, col, "%s on PE%d names %s: plain accesses and waits reach only the PE's own copy", op, own, l)
	}
	return l
}

// rawName reads the test name: the rest of the word after SHMEM, any characters but blanks.
func (p *parser) rawName() string {
	for p.off < len(p.src) && (p.src[p.off] == ' ' || p.src[p.off] == '\t') {
		p.advance(1)
	}
	n := 0
	for p.off+n < len(p.src) && !strings.ContainsRune(" \t\r\n", rune(p.src[p.off+n])) {
		n++
	}
	if n == 0 {
		p.failAt(p.line, p.col, "want the test name after SHMEM")
		return ""
	}
	s := p.src[p.off : p.off+n]
	p.advance(n)
	p.next()
	return s
}

func (p *parser) test() *Test {
	if !(p.tok.kind == tWord && p.tok.text == "SHMEM") {
		p.fail("want SHMEM and the test name, found %s", p.describe())
		return nil
	}
	if p.off >= len(p.src) || p.src[p.off] == '\n' || p.src[p.off] == '\r' {
		p.failAt(p.line, p.col, "want the test name after SHMEM")
		return nil
	}
	if p.src[p.off] != ' ' && p.src[p.off] != '\t' {
		p.fail("want SHMEM and the test name, found %s", p.describe())
		return nil
	}
	line, col := p.tok.line, p.tok.col
	t := &Test{Name: p.rawName()}
	if p.is("{") {
		p.init(t)
	}
	p.header(t)
	p.rows(t)
	p.condition(t)
	if p.tok.kind == tWord && p.tok.text == "expect" {
		p.expectLine(t)
	}
	if p.err == nil {
		p.validate(t, line, col)
	}
	return t
}

func (p *parser) init(t *Test) {
	p.expect("{")
	seen := map[Loc]bool{}
	for p.err == nil && !p.is("}") {
		line, col := p.tok.line, p.tok.col
		if p.is("nostore") { // nostore NAME: context NAME is made with SHMEM_CTX_NOSTORE
			p.next()
			if p.tok.kind != tWord || !isIdent(p.tok.text) {
				p.fail("want a context name after nostore, found %s", p.describe())
				return
			}
			if slices.Contains(t.NoStore, p.tok.text) {
				p.fail("context %s declared nostore twice", p.tok.text)
				return
			}
			t.NoStore = append(t.NoStore, p.tok.text)
			p.next()
			if !p.is("}") {
				p.expect(";")
			}
			continue
		}
		v := p.variable()
		p.expect("@")
		l := Loc{v, p.pe()}
		p.expect("=")
		val := p.int()
		if p.err != nil {
			return
		}
		if seen[l] {
			p.failAt(line, col, "%s initialized twice", l)
			return
		}
		seen[l] = true
		t.Init = append(t.Init, InitVal{l, val})
		if !p.is("}") {
			p.expect(";")
		}
	}
	p.expect("}")
	sortInit(t.Init)
	sort.Strings(t.NoStore)
}

func sortInit(iv []InitVal) {
	sort.Slice(iv, func(i, j int) bool { return locLess(iv[i].Loc, iv[j].Loc) })
}

func locLess(a, b Loc) bool {
	if a.PE != b.PE {
		return a.PE < b.PE
	}
	return a.Var < b.Var
}

func (p *parser) header(t *Test) {
	seen := map[[2]int]bool{}
	for p.err == nil {
		line, col := p.tok.line, p.tok.col
		if p.tok.kind != tWord || !strings.HasPrefix(p.tok.text, "PE") {
			p.fail("want a column header PEn, found %s", p.describe())
			return
		}
		num, thr, threaded := strings.Cut(p.tok.text[2:], ".")
		n, err := strconv.Atoi(num)
		th, terr := 0, error(nil)
		if threaded {
			th, terr = strconv.Atoi(thr)
		}
		if err != nil || n < 0 || n > MaxPE || num != strconv.Itoa(n) || terr != nil || (threaded && (th < 1 || th > 15 || thr != strconv.Itoa(th))) {
			p.fail("bad column header %s: want PE0..PE%d, or PEn.t for thread t (1..15) of PE n", p.describe(), MaxPE)
			return
		}
		if seen[[2]int{n, th}] {
			p.failAt(line, col, "column %s appears twice", p.tok.text)
			return
		}
		seen[[2]int{n, th}] = true
		t.Columns = append(t.Columns, Column{PE: n, Thread: th})
		p.next()
		if p.is(";") {
			p.next()
			return
		}
		p.expect("|")
	}
}

func (p *parser) atCondition() bool {
	return p.tok.kind == tWord && (p.tok.text == "exists" || p.tok.text == "forall") || p.is("~")
}

func (p *parser) rows(t *Test) {
	for p.err == nil && !p.atCondition() {
		if p.tok.kind == tEOF {
			p.fail("want a row or the final condition (exists ...), found end of file")
			return
		}
		for i := range t.Columns {
			c := &t.Columns[i]
			if !p.is("|") && !p.is(";") {
				in := p.instr(c.PE)
				if p.err != nil {
					return
				}
				c.Instrs = append(c.Instrs, in)
			}
			if i < len(t.Columns)-1 {
				if p.is(";") {
					p.fail("row has %d cells, want %d (one per column)", i+1, len(t.Columns))
					return
				}
				p.expect("|")
			} else if !p.is(";") {
				if p.is("|") {
					p.fail("row has more cells than the %d columns", len(t.Columns))
				} else {
					p.fail("want ';' at the end of the row, found %s", p.describe())
				}
				return
			}
		}
		p.expect(";")
	}
}

func (p *parser) reg() string { return p.ident("register") }

func (p *parser) instr(own int) Instr {
	line, col := p.tok.line, p.tok.col
	if p.tok.kind != tWord {
		p.fail("want an instruction, found %s", p.describe())
		return Instr{}
	}
	name := p.tok.text
	op := Op(-1)
	for i, n := range opNames {
		if n == name {
			op = Op(i)
		}
	}
	nbi := false
	if base, ok := strings.CutSuffix(name, "_nbi"); ok && op < 0 { // fadd_nbi ..., putsig_nbi
		for i, n := range opNames {
			switch Op(i) {
			case OpFAdd, OpSwap, OpCSwap, OpFetch, OpFInc, OpFAnd, OpFOr, OpFXor, OpPutSig:
				if n == base {
					op, nbi = Op(i), true
				}
			}
		}
	}
	call := ""
	if v, ok := callVariants[name]; ok && op < 0 {
		op, call = v, name
	}
	if v, ok := deviceVariants[name]; ok && op < 0 {
		op, call, nbi = v, name, v == OpPutSig && strings.Contains(name, "_nbi")
	}
	if op < 0 {
		p.fail("unknown instruction %q", name)
		return Instr{}
	}
	p.next()
	in := Instr{Op: op, NBI: nbi, Call: call}
	switch {
	case op.collective():
		if op == OpBroadcast {
			in.Root = p.pe()
		}
		if p.is("{") {
			in.Team = p.team()
		}
		if p.err == nil && op == OpBroadcast && in.Team != nil && !slices.Contains(in.Team, in.Root) {
			p.failAt(line, col, "broadcast on PE%d: root %d is not in the team %s", own, in.Root, teamString(in.Team))
		}
	case op.poll():
		if op != OpWaitAll {
			in.Reg = p.reg()
		}
		for p.err == nil {
			in.Locs = append(in.Locs, p.ownLoc(own, name))
			if !p.is(",") {
				break
			}
			p.next()
		}
		in.Cmp = p.cmp()
		for p.err == nil {
			in.Vals = append(in.Vals, p.int())
			if !p.is(",") {
				break
			}
			p.next()
		}
		if p.err == nil && op == OpTest && len(in.Locs) != 1 {
			p.failAt(line, col, "test on PE%d names %d words, want 1 (test_all, test_any, test_some take several)", own, len(in.Locs))
		}
		if p.err == nil && len(in.Vals) != 1 && len(in.Vals) != len(in.Locs) {
			p.failAt(line, col, "%s on PE%d: %d compare values for %d words, want 1 or one per word", name, own, len(in.Vals), len(in.Locs))
		}
		for i, l := range in.Locs {
			if p.err == nil && slices.Contains(in.Locs[:i], l) {
				p.failAt(line, col, "%s on PE%d names %s twice", name, own, l)
			}
		}
		if p.err == nil && len(in.Locs) > 8 {
			p.failAt(line, col, "%s on PE%d names %d words, at most 8", name, own, len(in.Locs))
		}
		if p.err != nil {
			return in
		}
	}
	if call == "pe_quiet" { // pe_quiet {1,2}: the PEs whose operations it completes
		if !p.is("{") {
			p.fail("want the PEs of pe_quiet ({1,2}), found %s", p.describe())
			return in
		}
		in.PEs = p.team()
		if p.err == nil && p.is("on") {
			p.fail("pe_quiet takes no context (shmem_pe_quiet quiets the default context)")
		}
	}
	switch {
	case op == OpPut && (call == "iput" || p.peekComma()), op == OpGet && (call == "iget" || p.peekComma()):
		p.elements(&in, own, name)
		if p.err == nil && !p.is("|") && !p.is(";") {
			p.fail("extra %s after %s (started at %d:%d)", p.describe(), name, line, col)
		}
		return in
	}
	switch op {
	case OpSt: // a store to a peer's x goes through roxshmem_ptr
		in.Loc = p.loc(own)
		in.Val = p.int()
	case OpLd:
		in.Reg = p.reg()
		in.Loc = p.loc(own) // a load of a peer's x goes through roxshmem_ptr
	case OpPutNBI: // an immediate value, or the PE's own source buffer
		in.Loc = p.loc(own)
		if p.tok.kind == tWord && isVar(p.tok.text) {
			in.Src = p.ownLoc(own, "put_nbi's source")
		} else {
			in.Val = p.int()
		}
	case OpGet, OpGetNBI: // into a register, or into the PE's own destination x@own
		dl, dc := p.tok.line, p.tok.col
		in.Reg = p.reg()
		if p.is("@") {
			p.next()
			in.Dst = Loc{in.Reg, p.pe()}
			in.Reg = ""
			if p.err == nil && in.Dst.PE != own {
				p.failAt(dl, dc, "%s on PE%d: destination %s is not the PE's own copy", name, own, in.Dst)
			}
		}
		in.Loc = p.loc(own)
	case OpPut, OpAdd, OpSet, OpAnd, OpOr, OpXor:
		in.Loc = p.loc(own)
		in.Val = p.int()
	case OpInc:
		in.Loc = p.loc(own)
	case OpSigFetch:
		in.Reg = p.reg()
		in.Loc = p.ownLoc(own, "sigfetch")
	case OpFetch, OpFInc:
		in.Reg = p.reg()
		in.Loc = p.loc(own)
	case OpFAdd, OpSwap, OpFAnd, OpFOr, OpFXor:
		in.Reg = p.reg()
		in.Loc = p.loc(own)
		in.Val = p.int()
	case OpCSwap:
		in.Reg = p.reg()
		in.Loc = p.loc(own)
		in.Val = p.int()
		in.New = p.int()
	case OpPutSig:
		in.Loc = p.loc(own)
		in.Val = p.int()
		sl, sc := p.tok.line, p.tok.col
		in.Sig = p.loc(own)
		if p.err == nil && in.Sig.PE != in.Loc.PE {
			p.failAt(sl, sc, "putsig on PE%d: signal %s is not on the data's PE %d", own, in.Sig, in.Loc.PE)
			return in
		}
		if p.err == nil && in.Sig.Var == in.Loc.Var {
			p.failAt(sl, sc, "putsig on PE%d: signal %s is the data word itself", own, in.Sig)
			return in
		}
		switch {
		case p.tok.kind == tWord && p.tok.text == "set":
			in.SigOp = SigSet
		case p.tok.kind == tWord && p.tok.text == "add":
			in.SigOp = SigAdd
		default:
			p.fail("want set or add, found %s", p.describe())
			return in
		}
		p.next()
		in.New = p.int()
	case OpWait:
		in.Loc = p.ownLoc(own, "wait")
		in.Cmp = p.cmp()
		in.Val = p.int()
	case OpFence, OpQuiet, OpBarrier, OpSync:
	}
	// "on NAME": the operation is issued on (fence and quiet apply to) communication context NAME.
	if p.err == nil && p.tok.kind == tWord && p.tok.text == "on" {
		switch op {
		case OpSt, OpLd, OpWait, OpBarrier, OpSync, OpSigFetch, OpAllReduce, OpBroadcast, OpWaitAll, OpWaitAny,
			OpWaitSome, OpTest, OpTestAll, OpTestAny, OpTestSome:
			p.fail("%s takes no context (plain accesses, waits, signal_fetch, barrier_all and sync_all are not on one)", name)
			return in
		}
		p.next()
		if p.tok.kind != tWord || !isIdent(p.tok.text) {
			p.fail("want a context name after on, found %s", p.describe())
			return in
		}
		in.Ctx = p.tok.text
		p.next()
	}
	if p.err == nil && !p.is("|") && !p.is(";") {
		p.fail("extra %s after %s (started at %d:%d)", p.describe(), name, line, col)
	}
	return in
}

// peekComma reports whether the word under the cursor is followed by a comma: the first of a list
// (put x,y@q ..., get r0,r1 ...).
func (p *parser) peekComma() bool {
	if p.tok.kind != tWord {
		return false
	}
	o := p.off
	for o < len(p.src) && (p.src[o] == ' ' || p.src[o] == '\t') {
		o++
	}
	return o < len(p.src) && p.src[o] == ','
}

// elements reads a put or get of several elements: put x,y@q v,w (iput alike, the words at a
// stride), get r0,r1 x,y@q (iget): one element per word, every word on one PE.
func (p *parser) elements(in *Instr, own int, name string) {
	line, col := p.tok.line, p.tok.col
	list := func(read func() string) []string {
		var out []string
		for p.err == nil {
			out = append(out, read())
			if !p.is(",") {
				break
			}
			p.next()
		}
		return out
	}
	if in.Op == OpGet {
		in.Regs = list(p.reg)
	}
	vars := list(p.variable)
	pe := own
	if p.err == nil && p.is("@") {
		p.next()
		pe = p.pe()
	}
	for _, v := range vars {
		in.Locs = append(in.Locs, Loc{v, pe})
	}
	if in.Op == OpPut {
		for p.err == nil {
			in.Vals = append(in.Vals, p.int())
			if !p.is(",") {
				break
			}
			p.next()
		}
	}
	if p.err != nil {
		return
	}
	switch {
	case len(in.Locs) < 2 || len(in.Locs) > 8:
		p.failAt(line, col, "%s on PE%d names %d words, want 2 to 8", name, own, len(in.Locs))
	case in.Op == OpPut && len(in.Vals) != len(in.Locs):
		p.failAt(line, col, "%s on PE%d: %d values for %d words, want one per word", name, own, len(in.Vals), len(in.Locs))
	case in.Op == OpGet && len(in.Regs) != len(in.Locs):
		p.failAt(line, col, "%s on PE%d: %d registers for %d words, want one per word", name, own, len(in.Regs), len(in.Locs))
	}
	for i, l := range in.Locs {
		if p.err == nil && slices.Contains(in.Locs[:i], l) {
			p.failAt(line, col, "%s on PE%d names %s twice", name, own, l)
		}
		if p.err == nil && l.half() != 0 {
			p.failAt(line, col, "%s on PE%d: %s is a half; a put or get of several elements takes whole words", name, own, l)
		}
	}
}

// sharedColls lists the collectives of column c that PE other takes part in, in order.
func sharedColls(c Column, other int) []string {
	var ks []string
	for _, in := range c.Instrs {
		if in.Op.collective() && (in.Team == nil || slices.Contains(in.Team, other)) {
			ks = append(ks, collKey(in))
		}
	}
	return ks
}

// collCycle names the matched calls (the k-th call of one collective on one team) of a cycle in
// which each waits for the next (a member makes one before the other), or returns "": two PEs
// agreeing on their shared collectives' order is not enough when three teams overlap.
func collCycle(t *Test) string {
	next := map[string][]string{}
	for _, c := range t.Columns {
		nth, prev := map[string]int{}, ""
		for _, in := range c.Instrs {
			if !in.Op.collective() {
				continue
			}
			k := collKey(in)
			id := fmt.Sprintf("%s #%d", k, nth[k]+1)
			nth[k]++
			if prev != "" {
				next[prev] = append(next[prev], id)
			}
			prev = id
		}
	}
	state, path := map[string]int{}, []string{}
	var visit func(id string) string
	visit = func(id string) string {
		switch state[id] {
		case 1:
			i := slices.Index(path, id)
			return strings.Join(append(path[i:], id), " before ")
		case 2:
			return ""
		}
		state[id], path = 1, append(path, id)
		for _, n := range next[id] {
			if cyc := visit(n); cyc != "" {
				return cyc
			}
		}
		state[id], path = 2, path[:len(path)-1]
		return ""
	}
	var ids []string
	for id := range next {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		if cyc := visit(id); cyc != "" {
			return cyc
		}
	}
	return ""
}

// flowCycle reports a location through which values move in a cycle: a get reads x@q into d, a
// put from a buffer reads b into x@q.
func flowCycle(t *Test) (Loc, bool) {
	next := map[Loc][]Loc{}
	for _, c := range t.Columns {
		for _, in := range c.Instrs {
			switch {
			case in.Dst.Var != "":
				next[in.Loc] = append(next[in.Loc], in.Dst)
			case in.Op == OpPutNBI && in.Src.Var != "":
				next[in.Src] = append(next[in.Src], in.Loc)
			}
		}
	}
	state := map[Loc]int{}
	var visit func(l Loc) bool
	visit = func(l Loc) bool {
		switch state[l] {
		case 1:
			return true
		case 2:
			return false
		}
		state[l] = 1
		for _, n := range next[l] {
			if visit(n) {
				return true
			}
		}
		state[l] = 2
		return false
	}
	var locs []Loc
	for l := range next {
		locs = append(locs, l)
	}
	sort.Slice(locs, func(i, j int) bool { return locLess(locs[i], locs[j]) })
	for _, l := range locs {
		if visit(l) {
			return l, true
		}
	}
	return Loc{}, false
}

// collKey names a collective with its team (and root): the calls that match each other.
func collKey(in Instr) string {
	s := in.name()
	if in.Op == OpBroadcast {
		s += " " + strconv.Itoa(in.Root)
	}
	if in.Team != nil {
		s += " " + teamString(in.Team)
	}
	return s
}

func (p *parser) cmp() Cmp {
	for i, n := range cmpNames {
		if p.tok.kind == tPunct && p.tok.text == n {
			p.next()
			return Cmp(i)
		}
	}
	p.fail("want a comparison (== != < <= > >=), found %s", p.describe())
	return 0
}

// team reads {PE,PE,...}: a team's members, in increasing order.
func (p *parser) team() []int {
	line, col := p.tok.line, p.tok.col
	p.expect("{")
	var team []int
	for p.err == nil {
		team = append(team, p.pe())
		if !p.is(",") {
			break
		}
		p.next()
	}
	p.expect("}")
	for i := 1; p.err == nil && i < len(team); i++ {
		if team[i] <= team[i-1] {
			p.failAt(line, col, "team %s: want its PEs once each, in increasing order", teamString(team))
		}
	}
	return team
}

func teamString(team []int) string {
	var b strings.Builder
	b.WriteByte('{')
	for i, pe := range team {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(pe))
	}
	b.WriteByte('}')
	return b.String()
}

func (p *parser) condition(t *Test) {
	switch {
	case p.is("~"):
		p.next()
		if !(p.tok.kind == tWord && p.tok.text == "exists") {
			p.fail("want exists after ~, found %s", p.describe())
			return
		}
		t.Quant = NotExists
	case p.is("forall"):
		t.Quant = Forall
	default:
		t.Quant = Exists
	}
	p.next()
	t.Cond = p.prop()
}

func (p *parser) prop() Prop {
	first := p.conj()
	if !p.is(`\/`) {
		return first
	}
	or := Prop{Kind: PropOr, Args: []Prop{first}}
	for p.err == nil && p.is(`\/`) {
		p.next()
		or.Args = append(or.Args, p.conj())
	}
	return or
}

func (p *parser) conj() Prop {
	first := p.unary()
	if !p.is(`/\`) {
		return first
	}
	and := Prop{Kind: PropAnd, Args: []Prop{first}}
	for p.err == nil && p.is(`/\`) {
		p.next()
		and.Args = append(and.Args, p.unary())
	}
	return and
}

func (p *parser) unary() Prop {
	switch {
	case p.err != nil:
		return Prop{}
	case p.is("~"):
		p.next()
		return Prop{Kind: PropNot, Args: []Prop{p.unary()}}
	case p.is("("):
		p.next()
		q := p.prop()
		p.expect(")")
		return q
	case p.tok.kind == tWord && p.tok.text == "true":
		p.next()
		return Prop{Kind: PropTrue}
	case p.tok.kind == tWord && p.tok.text == "false":
		p.next()
		return Prop{Kind: PropFalse}
	case p.tok.kind == tWord && p.tok.text[0] >= '0' && p.tok.text[0] <= '9':
		pe := p.pe()
		p.expect(":")
		r := p.reg()
		p.expect("=")
		return Prop{Kind: PropReg, PE: pe, Reg: r, Val: p.int()}
	case p.tok.kind == tWord:
		v := p.variable()
		if !p.is("@") {
			p.fail("want @PE after variable %s in the condition, found %s", v, p.describe())
			return Prop{}
		}
		p.next()
		l := Loc{v, p.pe()}
		p.expect("=")
		return Prop{Kind: PropMem, Loc: l, Val: p.int()}
	}
	p.fail("want a condition term (P:reg=v, x@P=v, ~, parentheses), found %s", p.describe())
	return Prop{}
}

func (p *parser) verdict() Verdict {
	switch {
	case p.tok.kind == tWord && p.tok.text == "Allowed":
		p.next()
		return Allowed
	case p.tok.kind == tWord && p.tok.text == "Forbidden":
		p.next()
		return Forbidden
	}
	p.fail("want Allowed or Forbidden, found %s", p.describe())
	return VerdictNone
}

func (p *parser) expectLine(t *Test) {
	p.next()
	n := 0
	for p.err == nil && p.tok.kind == tWord && (p.tok.text == "strict" || p.tok.text == "bypass") {
		mode, line, col := p.tok.text, p.tok.line, p.tok.col
		p.next()
		p.expect("=")
		v := p.verdict()
		dst := &t.ExpectStrict
		if mode == "bypass" {
			dst = &t.ExpectBypass
		}
		if *dst != VerdictNone {
			p.failAt(line, col, "expect gives %s twice", mode)
			return
		}
		*dst = v
		n++
	}
	if p.err == nil && n == 0 {
		p.fail("want strict=... or bypass=... after expect, found %s", p.describe())
	}
}

// validate checks what the grammar cannot: registers written once, collectives that every member
// calls as often, no value moving in a cycle through gets and puts, and a condition that names
// only registers the code writes.
func (p *parser) validate(t *Test, line, col int) {
	regs := map[string]bool{}
	cols := map[int]bool{}
	for _, c := range t.Columns {
		cols[c.PE] = true
	}
	calls := map[string]map[int]int{} // collective (with its team) -> column PE -> calls
	var keys []string
	teams := map[string][]int{}
	for _, c := range t.Columns {
		for _, in := range c.Instrs {
			for _, r := range in.regs() {
				k := regKey(c.PE, r)
				if regs[k] {
					p.failAt(line, col, "test %s: register %s is written twice on PE%d", t.Name, r, c.PE)
					return
				}
				regs[k] = true
			}
			if in.Ctx != "" && slices.Contains(t.NoStore, in.Ctx) && in.writes() {
				p.failAt(line, col, "test %s: %s on PE%d: a write on NOSTORE context %s (shmem refuses it)", t.Name, in.Format(c.PE), c.PE, in.Ctx)
				return
			}

			if in.Op.collective() && t.Threaded() {
				p.failAt(line, col, "test %s: %s in a test with threads (PEn.t): a collective is called once per PE, the model has no thread-level collectives", t.Name, in.Format(c.PE))
				return
			}
			if in.Op.collective() {
				k := collKey(in)
				if calls[k] == nil {
					calls[k] = map[int]int{}
					keys = append(keys, k)
				}
				calls[k][c.PE]++
				teams[k] = in.Team
				if in.Team != nil && !slices.Contains(in.Team, c.PE) {
					p.failAt(line, col, "test %s: PE%d calls %s but is not in the team", t.Name, c.PE, in.Format(c.PE))
					return
				}
				for _, m := range in.Team {
					if !cols[m] {
						p.failAt(line, col, "test %s: %s names PE%d, which has no column (a team's members must run code)", t.Name, in.Format(c.PE), m)
						return
					}
				}
			}
		}
	}
	if err := checkWidths(t); err != nil {
		p.failAt(line, col, "%v", err)
		return
	}
	if l, ok := flowCycle(t); ok {
		p.failAt(line, col, "test %s: a value moves in a cycle through %s (gets into locations and puts from buffers)", t.Name, l)
		return
	}
	for _, k := range keys {
		first, firstPE := -1, -1
		members := teams[k]
		if members == nil {
			for _, c := range t.Columns {
				members = append(members, c.PE)
			}
		}
		for _, pe := range members {
			n := calls[k][pe]
			if first >= 0 && n != first {
				p.failAt(line, col, "test %s: PE%d runs %d %ss, PE%d %d (a collective needs every member of its team)", t.Name, pe, n, k, firstPE, first)
				return
			}
			first, firstPE = n, pe
		}
	}
	for i, a := range t.Columns { // two members of collectives call them in one order, or deadlock
		for _, b := range t.Columns[i+1:] {
			sa, sb := sharedColls(a, b.PE), sharedColls(b, a.PE)
			if !slices.Equal(sa, sb) {
				p.failAt(line, col, "test %s: PE%d calls %s, PE%d %s: collectives they both take part in must come in one order (else they deadlock)", t.Name, a.PE, strings.Join(sa, ", "), b.PE, strings.Join(sb, ", "))
				return
			}
		}
	}
	for _, c := range t.Columns { // a destroyed context is gone; the default one cannot be destroyed
		gone := map[string]bool{}
		for _, in := range c.Instrs {
			if in.Ctx != "" && gone[in.Ctx] {
				p.failAt(line, col, "test %s: %s on PE%d: context %s was destroyed before", t.Name, in.Format(c.PE), c.PE, in.Ctx)
				return
			}
			if in.Call == "ctx_destroy" {
				if in.Ctx == "" {
					p.failAt(line, col, "test %s: ctx_destroy on PE%d names no context (ctx_destroy on NAME; the default context is not destroyed)", t.Name, c.PE)
					return
				}
				gone[in.Ctx] = true
			}
		}
	}
	if cyc := collCycle(t); cyc != "" {
		p.failAt(line, col, "test %s: collectives wait for each other in a cycle (%s): they deadlock", t.Name, cyc)
		return
	}
	var check func(q *Prop)
	check = func(q *Prop) {
		if q.Kind == PropReg && !regs[regKey(q.PE, q.Reg)] {
			p.failAt(line, col, "test %s: condition names register %d:%s that no instruction writes", t.Name, q.PE, q.Reg)
		}
		for i := range q.Args {
			check(&q.Args[i])
		}
	}
	check(&t.Cond)
}
