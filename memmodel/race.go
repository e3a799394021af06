package memmodel

import (
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Racing read-modify-writes. Choosing rf read by read (chooseRF) treats n RMWs on one word as n
// independent choices, and only the coherence search rejects the n! - 1 chains that are not one
// total order: sixteen fetch-adds took minutes. On a location written by two or more RMWs the
// checker instead fixes co first, write by write (raceLoc): an RMW's source is then the write
// just placed (or, when AMOs are atomic only among AMOs, a non-AMO write back to the last AMO), so
// its value is known the moment it is placed and the condition prunes at once. What remains
// exponential is the number of orders; symmetry removes the orders that differ only by swapping
// interchangeable PEs (symClasses).

// raceLocs lists the locations whose co is fixed before rf: those written by two or more RMWs.
func (c *checker) raceLocs() []int {
	var locs []int
	for li, l := range c.locs {
		n := 0
		for _, w := range l.writes {
			if c.evs[w].Read {
				n++
			}
		}
		if n >= 2 {
			locs = append(locs, li)
		}
	}
	return locs
}

// race fixes co (and with it the RMWs' sources) of locs[k:], then chooses rf for reads.
func (c *checker) race(k int, locs, reads []int, g graph) {
	if c.done {
		return
	}
	if k == len(locs) {
		c.chooseRF(reads, 0, g)
		return
	}
	if k == 0 && c.verdictOnly { // what the condition asks of every counting location, up front
		for _, lj := range locs {
			if !c.countFeasible(lj, g) {
				return
			}
		}
		if !c.condPossible(g) {
			return
		}
	}
	li := locs[k]
	c.co[li] = c.co[li][:0]
	saved := c.memo
	c.memo = nil
	if c.memoOK(li) {
		c.memo = map[string]bool{}
	}
	c.raceLoc(k, locs, reads, li, g)
	c.memo = saved
}

// isolated reports whether race write w is interchangeable with any other isolated write of the
// same kind: an AMO (nothing reads past it) that no preserved order touches and whose register,
// if any, is not in the state. Only its place in co can matter, and only through its value.
func (c *checker) isolated(w int) bool {
	e := &c.evs[w]
	return e.AMO && !c.touched[w] && (e.Reg == "" || !c.keySet[regKey(e.PE, e.Reg)])
}

// memoOK: the location's reads are all its race RMWs and its writes all AMOs, so the only values
// read from it are read by RMWs placed in co, each from the write just before it. Then, once a prefix of co is placed, what the rest of the search can
// depend on is the order of the prefix's other writes, the values they read, how many isolated
// writes of each kind it holds, and the last value: a second prefix that agrees on these leads
// to the same states (see memoKey).
func (c *checker) memoOK(li int) bool {
	for _, r := range c.locs[li].reads {
		if !c.evs[r].Write {
			return false
		}
	}
	for _, w := range c.locs[li].writes { // an RMW may read past a non-AMO write: where the isolated
		if !c.evs[w].AMO { // writes lie among those would decide which it can read
			return false
		}
	}
	return true
}

// memoKey describes the placed prefix of co at li as memoOK explains. Isolated writes have no
// edge to any point outside the location, so every path through them runs along co between
// other writes: which of them lie where changes no reachability the search can observe.
func (c *checker) memoKey(li int) string {
	b := c.keyScratch[:0]
	co := c.co[li]
	type kind struct{ op, val, nw, n int64 }
	var kinds [8]kind
	ks := kinds[:0]
	for _, w := range co {
		if c.isolated(w) {
			in := c.ins[w]
			k := kind{int64(in.Op), in.Val, in.New, 1}
			found := false
			for i := range ks {
				if ks[i].op == k.op && ks[i].val == k.val && ks[i].nw == k.nw {
					ks[i].n++
					found = true
				}
			}
			if !found {
				ks = append(ks, k)
			}
			continue
		}
		b = strconv.AppendInt(b, int64(w), 10)
		if c.evs[w].Read {
			v, _ := c.readValue(w, 0)
			b = append(b, '=')
			b = strconv.AppendInt(b, v, 10)
		}
		b = append(b, ',')
	}
	sort.Slice(ks, func(i, j int) bool {
		a, z := ks[i], ks[j]
		if a.op != z.op {
			return a.op < z.op
		}
		if a.val != z.val {
			return a.val < z.val
		}
		return a.nw < z.nw
	})
	b = append(b, '|')
	for _, k := range ks {
		for _, x := range [4]int64{k.op, k.val, k.nw, k.n} {
			b = strconv.AppendInt(b, x, 10)
			b = append(b, '/')
		}
	}
	if n := len(co); n > 0 {
		v, _ := c.valueOf(co[n-1], 0)
		b = append(b, '|')
		b = strconv.AppendInt(b, v, 10)
	}
	c.keyScratch = b
	return string(b)
}

func (c *checker) raceLoc(k int, locs, reads []int, li int, g graph) {
	if c.done {
		return
	}
	l := c.locs[li]
	n := len(c.co[li])
	if c.memo != nil {
		k := c.memoKey(li)
		if c.memo[k] {
			return
		}
		c.memo[k] = true
	}
	if n > 0 && c.verdictOnly && (!c.countFeasible(li, g) || !c.condPossible(g)) {
		return
	}
	if n == len(l.writes) {
		for pos, w := range c.co[li] {
			c.coPos[w] = pos
		}
		c.fixed[li] = true
		c.race(k+1, locs, reads, g)
		c.fixed[li] = false
		return
	}
	var tried [][3]int64 // kinds of isolated writes tried at this position: another leads to the same memo key
	for _, w := range l.writes {
		if c.placed[w] {
			continue
		}
		if c.memo != nil && c.isolated(w) {
			in := c.ins[w]
			k := [3]int64{int64(in.Op), in.Val, in.New}
			dup := false
			for _, t := range tried {
				dup = dup || t == k
			}
			if dup {
				continue
			}
			tried = append(tried, k)
		}
		if p := c.symPrev[w]; p >= 0 && !c.placed[p] && !(c.memo != nil && c.isolated(w)) { // interchangeable PEs in canonical order (the memo covers isolated writes)
			continue
		}
		blocked := false
		for _, u := range l.writes {
			if u != w && !c.placed[u] && g.has(c.late[u], c.late[w]) {
				blocked = true
				break
			}
		}
		if blocked {
			continue
		}
		g2 := c.cloneG(g)
		ok := n == 0 || g2.add(c.late[c.co[li][n-1]], c.late[w])
		c.placed[w] = true
		c.co[li] = append(c.co[li], w)
		if ok && c.evs[w].Read {
			c.raceSource(k, locs, reads, li, w, g2)
		} else if ok {
			c.raceLoc(k, locs, reads, li, g2)
		}
		c.co[li] = c.co[li][:n]
		c.placed[w] = false
		c.release(g2)
	}
}

// raceSource chooses the source of RMW w, just placed at co position n: the write before it, or
// further back over writes it is not atomic with, or the initial value when none is atomic with it.
func (c *checker) raceSource(k int, locs, reads []int, li, w int, g graph) {
	co := c.co[li]
	n := len(co) - 1
	e := &c.evs[w]
	for p := n - 1; p >= -1; p-- {
		src := -1
		if p >= 0 {
			src = co[p]
		}
		g2 := c.cloneG(g)
		ok := true
		if src >= 0 {
			ok = g2.add(c.srcPoint(src, w), c.readPoint(w))
		}
		for _, x := range co[p+1 : n] { // overwritten between the read and the write
			if ok {
				ok = g2.add(c.readPoint(w), c.late[x])
			}
		}
		if ok {
			c.src[w] = src
			c.chosen[w] = true
			v, known := c.readValue(w, 0)
			switch {
			case !known: // it read a value a get or put moved, whose source is chosen later
				c.raceLoc(k, locs, reads, li, g2)
			case e.Op == OpCSwap && v != c.ins[w].Val: // placed as a successful cswap
			case e.Reg != "" && c.needs(regKey(e.PE, e.Reg), v):
			default:
				c.raceLoc(k, locs, reads, li, g2)
			}
			c.chosen[w] = false
		}
		c.release(g2)
		if c.done || (p >= 0 && (c.opt.AtomicAllWrites || c.evs[co[p]].AMO)) {
			return // an AMO source: reading anything older would skip it
		}
	}
}

// needs reports whether the condition requires key to hold a value other than v.
func (c *checker) needs(key string, v int64) bool {
	want, fixed := c.need[key]
	return fixed && want != v
}

// symClasses groups columns that are interchangeable for the final states the checker compares
// (keys): swapping the two PEs (as columns and as owners of locations) maps the test to itself
// and changes no key. Then every execution has a twin with the two PEs swapped and the same
// state, so the checker may require, for one location per class, that the classes' writes to it
// are in co in column order (symPrev). One location per class: sorting by a second one could
// need a different permutation.
func (c *checker) symClasses(keys map[string]bool) {
	cols := c.t.Columns
	inClass := make([]bool, len(cols))
	for i := range cols {
		if inClass[i] || !c.symCandidate(i, keys) {
			continue
		}
		class := []int{i}
		for j := i + 1; j < len(cols); j++ {
			if !inClass[j] && c.symCandidate(j, keys) && c.swappable(i, j) {
				class = append(class, j)
				inClass[j] = true
			}
		}
		if len(class) > 1 {
			c.classes = append(c.classes, class)
		}
	}
}

// symCandidate: nothing the keys record belongs to column i's PE (registers, locations).
func (c *checker) symCandidate(i int, keys map[string]bool) bool {
	col := &c.t.Columns[i]
	for k := range c.t.Columns {
		if k != i && c.t.Columns[k].PE == col.PE { // a PE of several threads: its columns are not PEs to swap
			return false
		}
	}
	for _, in := range col.Instrs {
		if in.Reg != "" && keys[regKey(col.PE, in.Reg)] {
			return false
		}
	}
	for k := range keys {
		if i := strings.LastIndexByte(k, '@'); i >= 0 && k[i+1:] == strconv.Itoa(col.PE) {
			return false
		}
	}
	return true
}

// swappable reports whether exchanging the PEs of columns i and j maps the test to itself.
func (c *checker) swappable(i, j int) bool {
	a, b := &c.t.Columns[i], &c.t.Columns[j]
	sw := func(pe int) int {
		switch pe {
		case a.PE:
			return b.PE
		case b.PE:
			return a.PE
		}
		return pe
	}
	if len(a.Instrs) != len(b.Instrs) {
		return false
	}
	for k, x := range a.Instrs {
		y := b.Instrs[k]
		if x.Op != y.Op || x.Val != y.Val || x.New != y.New || x.SigOp != y.SigOp || x.Cmp != y.Cmp ||
			(x.Reg == "") != (y.Reg == "") || x.Loc.Var != y.Loc.Var || x.Sig.Var != y.Sig.Var ||
			(x.Loc.Var != "" && sw(x.Loc.PE) != y.Loc.PE) || (x.Sig.Var != "" && sw(x.Sig.PE) != y.Sig.PE) {
			return false
		}
		if x.Ctx != y.Ctx || x.NBI != y.NBI || x.Call != y.Call || x.Team != nil || y.Team != nil || (x.Op == OpBroadcast && sw(x.Root) != y.Root) ||
			x.PEs != nil || y.PEs != nil || !slices.Equal(x.Regs, y.Regs) ||
			x.Src.Var != y.Src.Var || x.Dst.Var != y.Dst.Var || len(x.Locs) != len(y.Locs) || !slices.Equal(x.Vals, y.Vals) {
			return false // a team's membership changes when only one of the two PEs is in it
		}
		for k, l := range x.Locs {
			if l.Var != y.Locs[k].Var || sw(l.PE) != y.Locs[k].PE {
				return false
			}
		}
	}
	for k := range c.t.Columns { // the other columns must not tell the two PEs apart
		if k == i || k == j {
			continue
		}
		for _, in := range c.t.Columns[k].Instrs {
			if (in.Loc.Var != "" && (in.Loc.PE == a.PE || in.Loc.PE == b.PE)) || (in.Sig.Var != "" && (in.Sig.PE == a.PE || in.Sig.PE == b.PE)) {
				return false
			}
			if in.Team != nil || (in.Op == OpBroadcast && (in.Root == a.PE || in.Root == b.PE)) {
				return false
			}
		}
	}
	init := map[Loc]int64{}
	for _, iv := range c.t.Init {
		init[iv.Loc] = iv.Val
	}
	for l, v := range init {
		if init[Loc{l.Var, sw(l.PE)}] != v {
			return false
		}
	}
	return true
}

// breakSymmetry sets symPrev for the race locations locs: each class's columns are ordered by
// their first non-cswap write (a write whatever the cswap guesses) to the first race location, not
// owned by a member, that they write. Race locations not owned by a member are the same for
// the cswap guesses of an execution and of its twin, so the twin is searched too.
func (c *checker) breakSymmetry(locs []int) {
	for i := range c.symPrev {
		c.symPrev[i] = -1
	}
	for _, class := range c.classes {
		c.breakClass(class, locs)
	}
}

func (c *checker) breakClass(class []int, locs []int) {
	owned := map[int]bool{}
	for _, ci := range class {
		owned[c.t.Columns[ci].PE] = true
	}
	first := func(ci int, loc Loc) int {
		for id := range c.evs {
			e := &c.evs[id]
			if e.PE == c.t.Columns[ci].PE && e.Loc == loc && e.Write && e.Op != OpCSwap {
				return id
			}
		}
		return -1
	}
	for _, li := range locs {
		l := c.locs[li]
		if owned[l.loc.PE] || first(class[0], l.loc) < 0 {
			continue
		}
		prev := first(class[0], l.loc)
		for _, ci := range class[1:] {
			id := first(ci, l.loc)
			c.symPrev[id] = prev
			prev = id
		}
		return
	}
}

// addend is what RMW w adds to its word when it is a fetch-add, add, increment or adding signal
// update; ok is false for any other write.
func (c *checker) addend(w int) (v int64, ok bool) {
	e, in := &c.evs[w], c.ins[w]
	if !e.AMO || !e.Read || !e.Write || e.Half != 0 || e.Loc.half() != 0 {
		return 0, false
	}
	switch {
	case e.Op == OpPutSig && e.Part == 1 && in.SigOp == SigAdd:
		return in.New, true
	case e.Op == OpFAdd || e.Op == OpAdd:
		return in.Val, true
	case e.Op == OpInc || e.Op == OpFInc:
		return 1, true
	}
	return 0, false
}

// countFeasible prunes a counting location: one whose writes are all adding AMOs of one sign.
// Atomicity makes each read the write just before it in co, so the value an RMW reads is the
// initial value plus the addends of the writes co-before it, whatever their order, and the final
// value is the initial value plus every addend. Against the values the condition requires (Decide),
// with the co prefix placed so far: the final value is fixed; an unplaced RMW reads at least the
// placed sum plus the writes that must precede it, at most that plus every write that may; and with
// addends all non-zero, no two RMWs read the same value. These bounds refute a condition that
// atomicity alone refutes before any order of the word is enumerated.
func (c *checker) countFeasible(li int, g graph) bool {
	l := c.locs[li]
	sign := int64(0)
	total := l.init
	for _, w := range l.writes {
		a, ok := c.addend(w)
		if !ok {
			return true
		}
		switch {
		case a > 0 && sign >= 0:
			sign = 1
		case a < 0 && sign <= 0:
			sign = -1
		case a != 0:
			return true // mixed signs: the sums are not monotone
		}
		total += a
	}
	if want, fixed := c.need[l.loc.String()]; fixed && want != total {
		return false
	}
	if sign == 0 {
		return true
	}
	base := l.init
	for _, w := range c.co[li] {
		a, _ := c.addend(w)
		base += a
	}
	strict := true
	for _, w := range l.writes {
		if a, _ := c.addend(w); a == 0 {
			strict = false
		}
	}
	var wants []int64
	var wanting []int
	for _, w := range l.writes {
		e := &c.evs[w]
		if c.placed[w] || e.Reg == "" {
			continue
		}
		want, fixed := c.need[regKey(e.PE, e.Reg)]
		if !fixed {
			continue
		}
		for _, u := range wanting { // one that must precede the other reads less (more, for negative addends)
			uw := c.need[regKey(c.evs[u].PE, c.evs[u].Reg)]
			au, _ := c.addend(u)
			aw, _ := c.addend(w)
			if g.has(c.late[u], c.late[w]) && (sign > 0 && want < uw+au || sign < 0 && want > uw+au) {
				return false
			}
			if g.has(c.late[w], c.late[u]) && (sign > 0 && uw < want+aw || sign < 0 && uw > want+aw) {
				return false
			}
		}
		wanting = append(wanting, w)
		lo, hi := c.countRange(li, w, sign, base, g)
		if want < lo || want > hi {
			return false
		}
		if strict {
			if slices.Contains(wants, want) {
				return false
			}
			wants = append(wants, want)
		}
	}
	return true
}

// countTotal is a counting location's final value (see countFeasible): its initial value plus
// every addend; ok is false for any other location.
func (c *checker) countTotal(li int) (total int64, ok bool) {
	l := c.locs[li]
	total = l.init
	for _, w := range l.writes {
		a, ok := c.addend(w)
		if !ok {
			return 0, false
		}
		total += a
	}
	return total, true
}

// deferrable reports whether the search may leave race location li's coherence order to the very
// end: its reads are all its read-modify-writes, its writes all AMOs that read (no compare-and-swap,
// whose success is guessed from the value), no register they fill is in the state, and its final
// value either is not in the state or is fixed (a counting location). Then nothing but the order
// graph depends on its co, and once every other choice is made some co always fits: put its writes
// in any order that extends the order g already gives their writes (late instants). Placing u
// before w adds edges from u's write to w's read and write only; a cycle would need a path back
// from a later write to an earlier one's read, but the reads' early instants lead only to their
// own writes (their from-read edges are to this location alone), so it would be a path between
// the writes that g already orders the other way. So the search leaves co out and lists none.
func (c *checker) deferrable(li int) bool {
	l := c.locs[li]
	if !c.memoOK(li) {
		return false
	}
	for _, w := range l.writes {
		e := &c.evs[w]
		if !e.Read || e.Op == OpCSwap || e.Half != 0 || (e.Reg != "" && c.keySet[regKey(e.PE, e.Reg)]) {
			return false
		}
	}
	if c.keySet[l.loc.String()] {
		_, counting := c.countTotal(li)
		return counting
	}
	return true
}

// countRange bounds the value unplaced RMW w of counting location li reads (addends of one sign,
// base the value after the placed prefix): at least the writes that must precede it, at most
// every write that may.
func (c *checker) countRange(li, w int, sign, base int64, g graph) (lo, hi int64) {
	lo, hi = base, base
	for _, u := range c.locs[li].writes {
		if u == w || c.placed[u] {
			continue
		}
		a, _ := c.addend(u)
		if g.has(c.late[u], c.late[w]) {
			lo += a
		}
		if !g.has(c.late[w], c.late[u]) {
			hi += a
		}
	}
	if sign < 0 {
		lo, hi = hi, lo
	}
	return lo, hi
}

// countSign is the sign the addends of counting location li share (0: all zero) and the value
// after its placed co prefix; ok is false when li is not a counting location of one sign.
func (c *checker) countSign(li int) (sign, base int64, ok bool) {
	l := c.locs[li]
	base = l.init
	for _, w := range l.writes {
		a, isAdd := c.addend(w)
		if !isAdd || (a > 0 && sign < 0) || (a < 0 && sign > 0) {
			return 0, 0, false
		}
		if a > 0 {
			sign = 1
		} else if a < 0 {
			sign = -1
		}
	}
	for _, w := range c.co[li] {
		a, _ := c.addend(w)
		base += a
	}
	return sign, base, true
}

// condPossible evaluates the condition in three values on what the race search knows: the
// registers of placed RMWs, the ranges of the unplaced ones' at counting locations, the final
// values of counting locations; everything else may be anything. False when no state the rest of
// the search can reach satisfies it (Decide wants only those).
func (c *checker) condPossible(g graph) bool {
	type rng struct {
		lo, hi int64
		known  bool
	}
	value := func(key string) rng {
		if c.regEv == nil {
			c.regEv = map[string]int{}
			for i := range c.evs {
				if e := &c.evs[i]; e.Reg != "" && !e.Op.poll() && e.Half < 2 {
					c.regEv[regKey(e.PE, e.Reg)] = i
				}
			}
		}
		w, ok := c.regEv[key]
		if !ok {
			return rng{}
		}
		e := &c.evs[w]
		li := c.locOf[e.Loc]
		if !e.Read || !e.Write || !c.inRaceLoc(li) { // not placed by the race search
			return rng{}
		}
		if c.placed[w] {
			if v, ok := c.readValue(w, 0); ok && c.chosen[w] {
				return rng{v, v, true}
			}
			return rng{}
		}
		if sign, base, ok := c.countSign(li); ok {
			lo, hi := c.countRange(li, w, sign, base, g)
			return rng{lo, hi, true}
		}
		return rng{}
	}
	var eval func(p *Prop) (canTrue, canFalse bool)
	eval = func(p *Prop) (bool, bool) {
		switch p.Kind {
		case PropTrue:
			return true, false
		case PropFalse:
			return false, true
		case PropReg, PropMem:
			var r rng
			if p.Kind == PropReg {
				r = value(regKey(p.PE, p.Reg))
			} else if li, ok := c.locOf[p.Loc]; ok {
				if t, counting := c.countTotal(li); counting && !c.split[p.Loc] {
					r = rng{t, t, true}
				}
			}
			if !r.known {
				return true, true
			}
			return r.lo <= p.Val && p.Val <= r.hi, !(r.lo == p.Val && r.hi == p.Val)
		case PropNot:
			t, f := eval(&p.Args[0])
			return f, t
		case PropAnd:
			t, f := true, false
			for i := range p.Args {
				at, af := eval(&p.Args[i])
				t, f = t && at, f || af
			}
			return t, f
		case PropOr:
			t, f := false, true
			for i := range p.Args {
				at, af := eval(&p.Args[i])
				t, f = t || at, f && af
			}
			return t, f
		}
		return true, true
	}
	t, _ := eval(&c.t.Cond)
	return t
}

// inRaceLoc: li is a location whose co the race search fixes (or defers).
func (c *checker) inRaceLoc(li int) bool {
	n := 0
	for _, w := range c.locs[li].writes {
		if c.evs[w].Read {
			n++
		}
	}
	return n >= 2
}
