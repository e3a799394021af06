package memmodel

import (
	_ "embed"
	"fmt"
	"slices"
	"sort"
	"strings"
)

// The model as a declarative text (model.cat), in the style of herd's cat language: the Go code
// enumerates candidate executions (Candidates) and the file's axioms accept or reject each
// (CheckCat). The fast checker (Check, Decide) states the same axioms in Go; tests prove the two
// agree on every test of the suite and on fuzzed programs.
//
// The language:
//
//	(* comment *)
//	let NAME = EXPR                      binding (names may hold - and .)
//	instants EXPR                        events with two instants in this mode (early, then late)
//	instant NAME = early|late on EXPR else early|late
//	                                     a named per-event instant choice
//	acyclic EXPR as NAME                 axioms: no cycle, no x r x, r is empty
//	irreflexive EXPR as NAME
//	empty EXPR as NAME
//	mode strict | mode bypass            what follows, up to the next mode line, holds in that mode
//	                                     only; what precedes the first holds in both
//
// Expressions, loosest first: r | s (union), r ; s (sequence), r \ s (difference), r & s
// (intersection), S * T (all pairs of two event sets); postfix r^-1 (inverse), r+ (transitive
// closure), r? (r or identity); [S] (identity on the set S); lift(r, a, b) maps each pair (x, y)
// of events to the pair (instant a of x, instant b of y) — a and b are early, late or a named
// instant — dropping pairs of one instant with itself and events without instants (fence, quiet,
// barrier). An expression is an event set, a relation over events, or a relation over instants;
// instants exist only for memory events, and inst relates each event's early to its late instant.

//go:embed model.cat
var modelText string

// DefaultCat returns the model checked into the repository (model.cat).
func DefaultCat() *Cat {
	c, err := ParseCat("model.cat", modelText)
	if err != nil {
		panic(err) // the embedded file is tested
	}
	return c
}

// Cat is a parsed model file.
type Cat struct {
	Name  string
	stmts []catStmt
}

type catStmt struct {
	mode       string // "" both, "strict", "bypass"
	kind       string // let, instants, instant, acyclic, irreflexive, empty
	name       string
	expr       *catExpr
	on, other  string // instant: the choice on the set, else the other
	line, col_ int
}

type catExpr struct {
	op       string // name, union, seq, diff, inter, prod, inv, plus, opt, id, lift
	name     string
	args     []*catExpr
	sel1, s2 string // lift selectors
}

// ParseCat parses a model file.
func ParseCat(file, src string) (*Cat, error) {
	p := &catParser{file: file, src: src, line: 1, col: 1}
	c := &Cat{Name: file}
	mode := ""
	p.next()
	for p.tok != "" && p.err == nil {
		line, col := p.tline, p.tcol
		switch p.tok {
		case "mode":
			p.next()
			if p.tok != "strict" && p.tok != "bypass" {
				p.fail("want strict or bypass after mode, found %q", p.tok)
				break
			}
			mode = p.tok
			p.next()
		case "let":
			p.next()
			name := p.ident()
			p.expect("=")
			c.stmts = append(c.stmts, catStmt{mode: mode, kind: "let", name: name, expr: p.expr(), line: line, col_: col})
		case "instants":
			p.next()
			c.stmts = append(c.stmts, catStmt{mode: mode, kind: "instants", expr: p.expr(), line: line, col_: col})
		case "instant":
			p.next()
			name := p.ident()
			p.expect("=")
			on := p.selector(false)
			p.expect("on")
			e := p.expr()
			p.expect("else")
			other := p.selector(false)
			c.stmts = append(c.stmts, catStmt{mode: mode, kind: "instant", name: name, expr: e, on: on, other: other, line: line, col_: col})
		case "acyclic", "irreflexive", "empty":
			kind := p.tok
			p.next()
			e := p.expr()
			p.expect("as")
			name := p.ident()
			c.stmts = append(c.stmts, catStmt{mode: mode, kind: kind, name: name, expr: e, line: line, col_: col})
		default:
			p.fail("want let, instants, instant, acyclic, irreflexive, empty or mode, found %q", p.tok)
		}
	}
	if p.err != nil {
		return nil, p.err
	}
	return c, nil
}

type catParser struct {
	file, src   string
	off         int
	line, col   int
	tok         string
	tline, tcol int
	err         error
}

func (p *catParser) fail(format string, args ...any) {
	if p.err == nil {
		p.err = fmt.Errorf("%s:%d:%d: %s", p.file, p.tline, p.tcol, fmt.Sprintf(format, args...))
	}
	p.tok = ""
}

func (p *catParser) adv(n int) {
	for i := 0; i < n && p.off < len(p.src); i++ {
		if p.src[p.off] == '\n' {
			p.line, p.col = p.line+1, 1
		} else {
			p.col++
		}
		p.off++
	}
}

func catWord(c byte) bool {
	return c == '_' || c == '-' || c == '.' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

func (p *catParser) next() {
	if p.err != nil {
		return
	}
	for p.off < len(p.src) {
		switch {
		case strings.ContainsRune(" \t\r\n", rune(p.src[p.off])):
			p.adv(1)
			continue
		case strings.HasPrefix(p.src[p.off:], "(*"):
			end := strings.Index(p.src[p.off:], "*)")
			if end < 0 {
				p.tline, p.tcol = p.line, p.col
				p.fail("comment never closed")
				return
			}
			p.adv(end + 2)
			continue
		}
		break
	}
	p.tline, p.tcol = p.line, p.col
	if p.off >= len(p.src) {
		p.tok = ""
		return
	}
	if strings.HasPrefix(p.src[p.off:], "^-1") {
		p.tok = "^-1"
		p.adv(3)
		return
	}
	if catWord(p.src[p.off]) {
		n := 0
		for p.off+n < len(p.src) && catWord(p.src[p.off+n]) {
			n++
		}
		p.tok = p.src[p.off : p.off+n]
		p.adv(n)
		return
	}
	if strings.ContainsRune("|;\\&*+?[](),=", rune(p.src[p.off])) {
		p.tok = p.src[p.off : p.off+1]
		p.adv(1)
		return
	}
	p.fail("unexpected character %q", p.src[p.off])
}

func (p *catParser) expect(t string) {
	if p.tok != t {
		p.fail("want %q, found %q", t, p.tok)
		return
	}
	p.next()
}

func (p *catParser) ident() string {
	t := p.tok
	if t == "" || !catWord(t[0]) {
		p.fail("want a name, found %q", t)
		return ""
	}
	p.next()
	return t
}

func (p *catParser) selector(named bool) string { return p.ident() }

// Precedence, loosest first: | ; \ & *
var catBinary = []struct{ tok, op string }{{"|", "union"}, {";", "seq"}, {"\\", "diff"}, {"&", "inter"}, {"*", "prod"}}

func (p *catParser) expr() *catExpr { return p.binary(0) }

func (p *catParser) binary(level int) *catExpr {
	if level == len(catBinary) {
		return p.postfix()
	}
	e := p.binary(level + 1)
	for p.err == nil && p.tok == catBinary[level].tok {
		p.next()
		e = &catExpr{op: catBinary[level].op, args: []*catExpr{e, p.binary(level + 1)}}
	}
	return e
}

func (p *catParser) postfix() *catExpr {
	e := p.primary()
	for p.err == nil {
		switch p.tok {
		case "^-1":
			e = &catExpr{op: "inv", args: []*catExpr{e}}
		case "+":
			e = &catExpr{op: "plus", args: []*catExpr{e}}
		case "?":
			e = &catExpr{op: "opt", args: []*catExpr{e}}
		default:
			return e
		}
		p.next()
	}
	return e
}

func (p *catParser) primary() *catExpr {
	switch p.tok {
	case "(":
		p.next()
		e := p.expr()
		p.expect(")")
		return e
	case "[":
		p.next()
		e := p.expr()
		p.expect("]")
		return &catExpr{op: "id", args: []*catExpr{e}}
	case "lift":
		p.next()
		p.expect("(")
		e := p.expr()
		p.expect(",")
		a := p.ident()
		p.expect(",")
		b := p.ident()
		p.expect(")")
		return &catExpr{op: "lift", args: []*catExpr{e}, sel1: a, s2: b}
	}
	if p.tok == "" || !catWord(p.tok[0]) {
		p.fail("want an expression, found %q", p.tok)
		return &catExpr{op: "name"}
	}
	return &catExpr{op: "name", name: p.ident()}
}

// catVal is a set of events (rel == nil), or a relation over events or over instants.
type catVal struct {
	pts bool     // a relation over instants
	set []bool   // an event set
	rel [][]bool // a relation: rel[x][y]
}

// catEnv evaluates a model on one candidate execution.
type catEnv struct {
	cat      *Cat
	mode     Mode
	x        *Execution
	n        int // events
	vals     map[string]catVal
	early    []int // instants: per event, -1 for events without one
	late     []int
	npts     int
	sels     map[string][]int // named instant choices
	lets     map[string]catStmt
	instants []catStmt
	busy     map[string]bool
	fixing   bool
}

func (c *Cat) inMode(st catStmt, m Mode) bool { return st.mode == "" || st.mode == m.String() }

// Allows reports whether the model accepts execution x in mode m, and if not the failed axiom.
// Bindings are evaluated when first used, so a mode's instants may follow the shared bindings
// that lift relations onto instants.
func (c *Cat) Allows(t *Test, x *Execution, m Mode, opt Options) (bool, string, error) {
	return c.allows(t, x, m, opt, nil)
}

// catStatic keeps, across candidates with the same events (the same cswap guesses), what does
// not depend on rf, co or fr.
type catStatic struct {
	vals        map[string]catVal
	sels        map[string][]int
	early, late []int
	npts        int
}

func (c *Cat) dynamic(e *catExpr, lets map[string]catStmt, seen map[string]bool) bool {
	if e.op == "name" {
		switch e.name {
		case "rf", "co", "fr":
			return true
		}
		st, ok := lets[e.name]
		if !ok || seen[e.name] {
			return false
		}
		seen[e.name] = true
		return c.dynamic(st.expr, lets, seen)
	}
	for _, a := range e.args {
		if c.dynamic(a, lets, seen) {
			return true
		}
	}
	return false
}

func (c *Cat) allows(t *Test, x *Execution, m Mode, opt Options, cache *catStatic) (bool, string, error) {
	env := &catEnv{cat: c, mode: m, x: x, n: len(x.Events), vals: map[string]catVal{}, sels: map[string][]int{}, lets: map[string]catStmt{}}
	if cache != nil && cache.vals != nil {
		for k, v := range cache.vals {
			env.vals[k] = v
		}
		for k, v := range cache.sels {
			env.sels[k] = v
		}
		env.early, env.late, env.npts = cache.early, cache.late, cache.npts
		env.dynBase(x)
	} else {
		env.base(t, opt)
	}
	defer func() {
		if cache == nil || cache.vals != nil {
			return
		}
		cache.vals, cache.sels = map[string]catVal{}, env.sels
		for k, v := range env.vals {
			if st, ok := env.lets[k]; (ok && !c.dynamic(st.expr, env.lets, map[string]bool{})) || (!ok && k != "rf" && k != "co" && k != "fr") {
				cache.vals[k] = v
			}
		}
		cache.early, cache.late, cache.npts = env.early, env.late, env.npts
	}()
	for _, st := range c.stmts {
		if !c.inMode(st, m) {
			continue
		}
		switch st.kind {
		case "let", "instant":
			if _, dup := env.lets[st.name]; dup {
				return false, "", fmt.Errorf("%s:%d:%d: %s defined twice", c.Name, st.line, st.col_, st.name)
			}
			env.lets[st.name] = st
		case "instants":
			env.instants = append(env.instants, st)
		}
	}
	for _, st := range c.stmts {
		if !c.inMode(st, m) || (st.kind != "acyclic" && st.kind != "irreflexive" && st.kind != "empty") {
			continue
		}
		v, err := env.eval(st.expr, st)
		if err != nil {
			return false, "", err
		}
		if v.rel == nil {
			return false, "", fmt.Errorf("%s:%d:%d: %s wants a relation", c.Name, st.line, st.col_, st.kind)
		}
		r := v.rel
		if st.kind == "acyclic" {
			r = closure(r)
		}
		for a := range r {
			for b, on := range r[a] {
				if on && (st.kind == "empty" || a == b) {
					return false, st.name, nil
				}
			}
		}
	}
	return true, "", nil
}

// points fixes the instants: every memory event has one, the mode's instants sets two.
func (env *catEnv) points() error {
	if env.early != nil {
		return nil
	}
	if env.fixing {
		return fmt.Errorf("%s: the instants depend on a lifted relation", env.cat.Name)
	}
	env.fixing = true
	split := make([]bool, env.n)
	for _, st := range env.instants {
		v, err := env.eval(st.expr, st)
		if err != nil {
			return err
		}
		if v.set == nil {
			return fmt.Errorf("%s:%d:%d: instants wants an event set", env.cat.Name, st.line, st.col_)
		}
		for i, b := range v.set {
			split[i] = split[i] || b
		}
	}
	early, late := make([]int, env.n), make([]int, env.n)
	for i, e := range env.x.Events {
		early[i], late[i] = -1, -1
		if !e.memory() {
			continue
		}
		early[i], late[i] = env.npts, env.npts
		env.npts++
		if split[i] {
			late[i] = env.npts
			env.npts++
		}
	}
	env.early, env.late = early, late
	inst := newRel(env.npts)
	for i := range early {
		if early[i] >= 0 && early[i] != late[i] {
			inst[early[i]][late[i]] = true
		}
	}
	env.vals["inst"] = catVal{pts: true, rel: inst}
	return nil
}

// lookup returns a base value or a binding, evaluating it the first time.
func (env *catEnv) lookup(name string, at catStmt) (catVal, error) {
	if name == "inst" {
		if err := env.points(); err != nil {
			return catVal{}, err
		}
	}
	if v, ok := env.vals[name]; ok {
		return v, nil
	}
	st, ok := env.lets[name]
	if !ok || st.kind != "let" {
		return catVal{}, fmt.Errorf("%s:%d:%d: unknown name %q", env.cat.Name, at.line, at.col_, name)
	}
	if env.busy[name] {
		return catVal{}, fmt.Errorf("%s:%d:%d: %s is defined in terms of itself", env.cat.Name, st.line, st.col_, name)
	}
	if env.busy == nil {
		env.busy = map[string]bool{}
	}
	env.busy[name] = true
	v, err := env.eval(st.expr, st)
	env.busy[name] = false
	if err != nil {
		return v, err
	}
	env.vals[name] = v
	return v, nil
}

// selector returns the named instant choice, evaluating it the first time.
func (env *catEnv) selector(name string, at catStmt) ([]int, error) {
	if s, ok := env.sels[name]; ok {
		return s, nil
	}
	st, ok := env.lets[name]
	if !ok || st.kind != "instant" {
		return nil, fmt.Errorf("%s:%d:%d: unknown instant %q (want early, late or an instant line)", env.cat.Name, at.line, at.col_, name)
	}
	v, err := env.eval(st.expr, st)
	if err != nil {
		return nil, err
	}
	if v.set == nil {
		return nil, fmt.Errorf("%s:%d:%d: instant %s: want an event set after on", env.cat.Name, st.line, st.col_, name)
	}
	sel := make([]int, env.n)
	for i := range sel {
		pick := st.other
		if v.set[i] {
			pick = st.on
		}
		if pick != "early" && pick != "late" {
			return nil, fmt.Errorf("%s:%d:%d: instant %s: want early or late, found %q", env.cat.Name, st.line, st.col_, name, pick)
		}
		sel[i] = env.early[i]
		if pick == "late" {
			sel[i] = env.late[i]
		}
	}
	env.sels[name] = sel
	return sel, nil
}

func (env *catEnv) point(sel string, i int, st catStmt) (int, error) {
	switch sel {
	case "early":
		return env.early[i], nil
	case "late":
		return env.late[i], nil
	}
	s, err := env.selector(sel, st)
	if err != nil {
		return 0, err
	}
	return s[i], nil
}

func newRel(n int) [][]bool {
	r := make([][]bool, n)
	for i := range r {
		r[i] = make([]bool, n)
	}
	return r
}

func closure(r [][]bool) [][]bool {
	n := len(r)
	c := newRel(n)
	for i := range r {
		copy(c[i], r[i])
	}
	for k := 0; k < n; k++ {
		for i := 0; i < n; i++ {
			if !c[i][k] {
				continue
			}
			for j := 0; j < n; j++ {
				if c[k][j] {
					c[i][j] = true
				}
			}
		}
	}
	return c
}

// base defines the sets and relations a model starts from.
func (env *catEnv) base(t *Test, opt Options) {
	x, n := env.x, env.n
	set := func(f func(e *Event) bool) catVal {
		s := make([]bool, n)
		for i := range x.Events {
			s[i] = f(&x.Events[i])
		}
		return catVal{set: s}
	}
	rel := func(f func(a, b *Event) bool) catVal {
		r := newRel(n)
		for i := range x.Events {
			for j := range x.Events {
				r[i][j] = f(&x.Events[i], &x.Events[j])
			}
		}
		return catVal{rel: r}
	}
	op := func(ops ...Op) catVal {
		return set(func(e *Event) bool {
			for _, o := range ops {
				if e.Op == o {
					return true
				}
			}
			return false
		})
	}
	flag := func(on bool) catVal { return set(func(*Event) bool { return on }) }
	env.vals["M"] = set(func(e *Event) bool { return e.memory() })
	env.vals["R"] = set(func(e *Event) bool { return e.Read })
	env.vals["W"] = set(func(e *Event) bool { return e.Write })
	env.vals["P"] = set(func(e *Event) bool { return e.Plain })
	env.vals["A"] = set(func(e *Event) bool { return e.AMO })
	env.vals["F"], env.vals["Q"], env.vals["B"] = op(OpFence), op(OpQuiet), op(OpBarrier)
	env.vals["St"], env.vals["Ld"] = op(OpSt), op(OpLd)
	env.vals["Put"], env.vals["Get"], env.vals["GetNBI"] = op(OpPut, OpPutNBI), op(OpGet), op(OpGetNBI)
	env.vals["PutSig"], env.vals["Wait"] = op(OpPutSig), op(OpWait)
	fetch := op(OpFAdd, OpSwap, OpCSwap, OpFetch, OpFInc, OpFAnd, OpFOr, OpFXor)
	env.vals["FetchAMO"] = set(func(e *Event) bool { return fetch.set[e.ID] && !e.NBI })
	env.vals["FetchNBI"] = set(func(e *Event) bool { return fetch.set[e.ID] && e.NBI })
	env.vals["Buf"] = set(func(e *Event) bool { return e.Buf })
	env.vals["Dst"] = set(func(e *Event) bool { return e.dst() })
	env.vals["Poll"] = set(func(e *Event) bool { return e.Op.poll() })
	env.vals["Acq"] = set(func(e *Event) bool { return e.Op == OpWait || e.Acq })
	env.vals["SigFetch"], env.vals["Sync"] = op(OpSigFetch), op(OpSync, OpAllReduce, OpBroadcast)
	env.vals["FenceOrdersStores"] = flag(opt.FenceOrdersStores)
	env.vals["BlockingFetchOrders"] = flag(opt.BlockingFetchOrders)
	env.vals["AtomicAllWrites"] = flag(opt.AtomicAllWrites)
	env.vals["SameWidthAtomicity"] = flag(opt.SameWidthAtomicity)
	// accesses of one width: both 32-bit or both 64-bit (a 64-bit access's halves count as 64-bit)
	env.vals["width"] = rel(func(a, b *Event) bool { return a.memory() && b.memory() && sameWidth(a, b) })
	env.vals["po"] = rel(func(a, b *Event) bool { return sameThread(a, b) && a.ID < b.ID })
	env.vals["loc"] = rel(func(a, b *Event) bool { return a.memory() && b.memory() && a.Loc == b.Loc })
	env.vals["tgt"] = rel(func(a, b *Event) bool { return a.memory() && b.memory() && a.Loc.PE == b.Loc.PE })
	env.vals["int"] = rel(func(a, b *Event) bool { return sameThread(a, b) })
	ctxOf := func(e *Event) string {
		if e.plainAccess() {
			return ""
		}
		return e.Ctx
	}
	env.vals["ctx"] = rel(func(a, b *Event) bool { return ctxOf(a) == ctxOf(b) })
	env.vals["NSQ"] = set(func(e *Event) bool { return e.Op == OpQuiet && slices.Contains(t.NoStore, e.Ctx) })
	env.vals["cover"] = rel(func(a, b *Event) bool { // a pe_quiet covers the operations to its PEs
		return a.memory() && b.Op == OpQuiet && instrAt(t, b).covers(target(a, instrAt(t, a)))
	})
	env.vals["elem"] = rel(func(a, b *Event) bool { // the elements of one put or get of several
		return sameThread(a, b) && a.Index == b.Index && instrAt(t, a).elems()
	})
	env.vals["Dflt"] = set(func(e *Event) bool { return e.memory() && ctxOf(e) == "" })
	env.vals["instr"] = rel(func(a, b *Event) bool {
		return sameThread(a, b) && a.Index == b.Index && a.ID < b.ID && ((a.Op == OpPutSig && a.Part != b.Part) || b.Flow)
	})
	// the two halves of one 64-bit access to a split word (both directions)
	env.vals["wide"] = rel(func(a, b *Event) bool { return wide(a, b) })
	// collectives: the k-th call of one collective on one team in one column matches the k-th of
	// every member's
	nth := map[int]int{}
	key := map[int]string{}
	count := map[string]int{}
	for _, e := range x.Events {
		if in := instrAt(t, &e); e.Op.collective() {
			k := collKey(in)
			key[e.ID] = k
			nth[e.ID] = count[fmt.Sprint(e.PE, ".", e.Thread, k)]
			count[fmt.Sprint(e.PE, ".", e.Thread, k)]++
		}
	}
	match := func(a, b *Event) bool { return key[a.ID] == key[b.ID] && nth[a.ID] == nth[b.ID] }
	env.vals["sb"] = rel(func(a, b *Event) bool {
		return a.Op == OpBarrier && b.Op == OpBarrier && match(a, b)
	})
	env.vals["ss"] = rel(func(a, b *Event) bool { // a broadcast: from the root's call only
		return (a.Op == OpSync || a.Op == OpAllReduce || (a.Op == OpBroadcast && a.PE == instrAt(t, a).Root)) && match(a, b)
	})
	env.dynBase(x)
}

// dynBase defines the candidate's relations.
func (env *catEnv) dynBase(x *Execution) {
	n := env.n
	rf, co, fr := newRel(n), newRel(n), newRel(n)
	for _, p := range x.RF {
		if p[0] >= 0 {
			rf[p[0]][p[1]] = true
		}
	}
	for _, p := range x.FR {
		fr[p[0]][p[1]] = true
	}
	for _, p := range x.CO {
		if p[0] >= 0 {
			co[p[0]][p[1]] = true
		}
	}
	env.vals["rf"], env.vals["co"], env.vals["fr"] = catVal{rel: rf}, catVal{rel: closure(co)}, catVal{rel: fr}
}

func (env *catEnv) eval(e *catExpr, st catStmt) (catVal, error) {
	fail := func(format string, args ...any) (catVal, error) {
		return catVal{}, fmt.Errorf("%s:%d:%d: %s", env.cat.Name, st.line, st.col_, fmt.Sprintf(format, args...))
	}
	if e.op == "name" {
		return env.lookup(e.name, st)
	}
	var args []catVal
	for _, a := range e.args {
		v, err := env.eval(a, st)
		if err != nil {
			return v, err
		}
		args = append(args, v)
	}
	switch e.op {
	case "union", "inter", "diff":
		a, b := args[0], args[1]
		f := func(x, y bool) bool {
			switch e.op {
			case "union":
				return x || y
			case "inter":
				return x && y
			}
			return x && !y
		}
		switch {
		case a.set != nil && b.set != nil:
			s := make([]bool, len(a.set))
			for i := range s {
				s[i] = f(a.set[i], b.set[i])
			}
			return catVal{set: s}, nil
		case a.rel != nil && b.rel != nil && a.pts == b.pts:
			r := newRel(len(a.rel))
			for i := range r {
				for j := range r[i] {
					r[i][j] = f(a.rel[i][j], b.rel[i][j])
				}
			}
			return catVal{pts: a.pts, rel: r}, nil
		}
		return fail("%s of a %s and a %s", e.op, kindOf(a), kindOf(b))
	case "prod":
		if args[0].set == nil || args[1].set == nil {
			return fail("* wants two event sets")
		}
		r := newRel(env.n)
		for i := range r {
			for j := range r[i] {
				r[i][j] = args[0].set[i] && args[1].set[j]
			}
		}
		return catVal{rel: r}, nil
	case "id":
		if args[0].set == nil {
			return fail("[...] wants an event set")
		}
		r := newRel(env.n)
		for i, on := range args[0].set {
			r[i][i] = on
		}
		return catVal{rel: r}, nil
	case "seq":
		a, b := args[0], args[1]
		if a.rel == nil || b.rel == nil || a.pts != b.pts {
			return fail("; of a %s and a %s", kindOf(a), kindOf(b))
		}
		n := len(a.rel)
		r := newRel(n)
		for i := 0; i < n; i++ {
			for k := 0; k < n; k++ {
				if !a.rel[i][k] {
					continue
				}
				for j := 0; j < n; j++ {
					if b.rel[k][j] {
						r[i][j] = true
					}
				}
			}
		}
		return catVal{pts: a.pts, rel: r}, nil
	case "inv", "plus", "opt":
		a := args[0]
		if a.rel == nil {
			return fail("%s wants a relation", e.op)
		}
		n := len(a.rel)
		r := newRel(n)
		for i := range r {
			for j := range r[i] {
				switch e.op {
				case "inv":
					r[i][j] = a.rel[j][i]
				default:
					r[i][j] = a.rel[i][j] || (e.op == "opt" && i == j)
				}
			}
		}
		if e.op == "plus" {
			r = closure(r)
		}
		return catVal{pts: a.pts, rel: r}, nil
	case "lift":
		if err := env.points(); err != nil {
			return catVal{}, err
		}
		a := args[0]
		if a.rel == nil || a.pts {
			return fail("lift wants a relation over events")
		}
		r := newRel(env.npts)
		for i := range a.rel {
			for j, on := range a.rel[i] {
				if !on || env.early[i] < 0 || env.early[j] < 0 {
					continue
				}
				u, err := env.point(e.sel1, i, st)
				if err != nil {
					return catVal{}, err
				}
				v, err := env.point(e.s2, j, st)
				if err != nil {
					return catVal{}, err
				}
				if u != v {
					r[u][v] = true
				}
			}
		}
		return catVal{pts: true, rel: r}, nil
	}
	return fail("unknown operator %s", e.op)
}

func kindOf(v catVal) string {
	switch {
	case v.set != nil:
		return "set"
	case v.pts:
		return "relation over instants"
	}
	return "relation over events"
}

// instrAt is the instruction event e comes from.
func instrAt(t *Test, e *Event) Instr {
	for _, c := range t.Columns {
		if c.PE == e.PE && c.Thread == e.Thread {
			return c.Instrs[e.Index]
		}
	}
	return Instr{}
}

// Candidates calls fn for every candidate execution of t: every coherence order and every
// reads-from whose values hold (a wait reads a value it accepts, a cswap writes iff it read its
// compare value, an RMW reads a co-earlier write so that its value is defined), with no axiom
// applied. The relations in the Execution are as Enumerate gives them; Ord is empty.
func Candidates(t *Test, opt Options, fn func(*Execution)) error {
	c, err := newChecker(t, Strict, opt)
	if err != nil {
		return err
	}
	c.raw, c.fn = true, fn
	c.run()
	return nil
}

// CheckCat decides t in mode with the axioms of model m: every candidate execution (Candidates)
// the model accepts contributes its final state. It lists every candidate, so it is for tests of
// the suite's size (a dozen events), not for testdata/big.
func CheckCat(t *Test, m *Cat, mode Mode, opt Options) (*Result, error) {
	r := &Result{Test: t, Mode: mode, Keys: StateKeys(t), allowed: map[string]bool{}}
	states := map[string]State{}
	var evalErr error
	caches := map[string]*catStatic{} // per cswap guess: the events' write flags
	err := Candidates(t, opt, func(x *Execution) {
		if evalErr != nil {
			return
		}
		key := make([]byte, len(x.Events))
		for i, e := range x.Events {
			key[i] = '0'
			if e.Write {
				key[i] = '1'
			}
			if e.Acq {
				key[i] += 2
			}
		}
		cache := caches[string(key)]
		if cache == nil {
			cache = &catStatic{}
			caches[string(key)] = cache
		}
		ok, _, err := m.allows(t, x, mode, opt, cache)
		if err != nil {
			evalErr = err
			return
		}
		if ok {
			k := x.Final.format(r.Keys)
			if _, seen := states[k]; !seen {
				proj := State{}
				for _, key := range r.Keys {
					proj[key] = x.Final[key]
				}
				states[k] = proj
			}
		}
	})
	if err == nil {
		err = evalErr
	}
	if err != nil {
		return nil, err
	}
	for k, s := range states {
		r.States = append(r.States, k)
		r.allowed[k] = true
		if t.EvalState(s) {
			r.Positive++
		} else {
			r.Negative++
		}
	}
	sort.Strings(r.States)
	r.Verdict = Forbidden
	if r.Positive > 0 {
		r.Verdict = Allowed
	}
	return r, nil
}
