package memmodel

import (
	"slices"
	"strconv"
	"strings"
)

// decide is the checker's fast path: it enumerates rf and the final write of each location the
// condition names (together they fix the final state), and only then searches for one coherence
// order that makes the candidate consistent, stopping at the first. A final state already known is
// not searched again. Enumerate, which lists every execution, is the slow reference it is tested
// against.
func (c *checker) decide() {
	n := len(c.evs)
	c.states = map[string]State{}
	c.keyEvent, c.keyLoc, c.keyVal = make([]int, len(c.keys)), make([]int, len(c.keys)), make([]int64, len(c.keys))
	for k, key := range c.keys {
		c.keyEvent[k], c.keyLoc[k] = -1, -1
		for i := range c.evs {
			if c.evs[i].Reg != "" && regKey(c.evs[i].PE, c.evs[i].Reg) == key {
				c.keyEvent[k] = i
			}
		}
		for li, l := range c.locs {
			if l.loc.String() == key {
				c.keyLoc[k] = li
			}
		}
	}
	c.succeed, c.src, c.coPos, c.val = make([]bool, n), make([]int, n), make([]int, n), make([]int64, n)
	c.chosen, c.placed, c.symPrev = make([]bool, n), make([]bool, n), make([]int, n)
	c.fixed = make([]bool, len(c.locs))
	c.co = make([][]int, len(c.locs))
	c.keySet = map[string]bool{}
	for _, k := range c.keys {
		c.keySet[k] = true
	}
	c.touched = make([]bool, n)
	c.symClasses(c.keySet)
	c.guesses(func() {
		for i := range c.touched {
			c.touched[i] = false
		}
		for _, p := range c.ord {
			c.touched[p[0]], c.touched[p[1]] = true, true
		}
		for _, l := range c.locs {
			l.writes, l.reads = nil, nil
		}
		for i := range c.evs {
			e := &c.evs[i]
			if !e.memory() {
				continue
			}
			l := c.locs[c.locOf[e.Loc]]
			if e.Write {
				l.writes = append(l.writes, i)
			}
			if e.Read {
				l.reads = append(l.reads, i)
				c.src[i] = -2 // not chosen: a free read (see Decide) keeps it
			}
		}
		race := c.raceLocs()
		inRace := make([]bool, len(c.locs))
		for _, li := range race {
			inRace[li] = true
		}
		var reads []int // what chooseRF gives a source: race locations' RMWs get theirs from co
		for i := range c.evs {
			e := &c.evs[i]
			if e.Read && !c.free(i) && !(e.Write && inRace[c.locOf[e.Loc]]) {
				reads = append(reads, i)
			}
		}
		c.deferLoc = -1
		for x := len(race) - 1; x >= 0; x-- {
			if c.deferrable(race[x]) {
				c.deferLoc = race[x]
				race = slices.Delete(slices.Clone(race), x, x+1)
				break
			}
		}
		c.breakSymmetry(race)
		c.race(0, race, reads, c.base.clone())
	})
}

// free reports whether, when only the verdict is wanted, read r need not be given a source: its
// value is not in the condition, no wait or compare-and-swap tests it, and nothing writes it on.
// Any consistent execution of the other events extends to r (it can read the write latest before
// it in a linearization), so leaving it out changes no verdict.
func (c *checker) free(r int) bool {
	e := &c.evs[r]
	if !c.verdictOnly || e.Write || c.tested(r) || e.Op == OpCSwap || c.flows(r) {
		return false
	}
	return !c.condRegs[regKey(e.PE, e.Reg)]
}

// cloneG copies g into a graph from the checker's pool: the search is depth-first, so graphs are
// released in the reverse order they are taken and the pool stays as deep as the search.
func (c *checker) cloneG(g graph) graph {
	if n := len(c.pool); n > 0 {
		h := c.pool[n-1]
		c.pool = c.pool[:n-1]
		copy(h.b, g.b)
		return h
	}
	return g.clone()
}

func (c *checker) release(g graph) { c.pool = append(c.pool, g) }

// ownStore is the latest plain store of r's PE to r's location before plain load r, or -1.
func (c *checker) ownStore(r int) int {
	e := &c.evs[r]
	own := -1
	if !e.Plain {
		return -1
	}
	for _, w := range c.locs[c.locOf[e.Loc]].writes {
		if c.evs[w].Plain && sameThread(&c.evs[w], e) && c.evs[w].Index < e.Index && (own < 0 || c.evs[w].Index > c.evs[own].Index) {
			own = w
		}
	}
	return own
}

func (c *checker) chooseRF(reads []int, k int, g graph) {
	if c.done {
		return
	}
	if k == len(reads) {
		c.afterRF(g)
		return
	}
	r := reads[k]
	e := &c.evs[r]
	l := c.locs[c.locOf[e.Loc]]
	own := c.ownStore(r)
	for x := -1; x < len(l.writes); x++ {
		src := -1
		if x >= 0 {
			src = l.writes[x]
		}
		if src == r || (own >= 0 && src < 0) {
			continue
		}
		if c.tested(r) && !c.waitMaySee(l, src, r) {
			continue
		}
		if e.Write && c.rmwTaken(reads[:k], e.Loc, src) { // two RMWs never read the same write: one would land between
			continue
		}
		if v, known := c.knownValue(src, l); known { // prune on values as soon as they are fixed
			if want, fixed := c.need[regKey(e.PE, e.Reg)]; fixed && e.Reg != "" && !e.Op.poll() && v != want {
				continue
			}
			if e.Op == OpCSwap && (v == c.ins[r].Val) != c.succeed[r] {
				continue
			}
			if !c.meets(r, v) {
				continue
			}
		}
		g2 := c.cloneG(g)
		ok := true
		if src >= 0 {
			ok = g2.add(c.srcPoint(src, r), c.readPoint(r))
			if ok && own >= 0 && src != own { // never older than the PE's own store
				ok = g2.add(c.late[own], c.late[src])
			}
			if ok && e.Write { // an RMW's source is co-before it
				ok = g2.add(c.late[src], c.late[r])
			}
			if li := c.locOf[e.Loc]; ok && c.fixed[li] { // co is known: r reads before every later write
				for _, w := range c.co[li][c.coPos[src]+1:] {
					if ok && w != r {
						ok = g2.add(c.readPoint(r), c.late[w])
					}
				}
			}
		} else {
			for _, w := range l.writes { // reading the initial value: every write is co-after it
				if ok && w != r {
					ok = g2.add(c.readPoint(r), c.late[w])
				}
			}
		}
		if ok {
			c.src[r] = src
			c.chosen[r] = true
			c.chooseRF(reads, k+1, g2)
			c.chosen[r] = false
		}
		c.release(g2)
	}
}

// knownValue is the value write src (-1: the initial value) stores, if the reads it depends on
// already have their sources.
func (c *checker) knownValue(src int, l *locInfo) (int64, bool) {
	if src < 0 {
		return l.init, true
	}
	if !c.known(src, 0) {
		return 0, false
	}
	return c.valueOf(src, 0)
}

// known reports whether write w's value is fixed by the sources chosen so far.
func (c *checker) known(w, depth int) bool {
	if depth > len(c.evs) {
		return false
	}
	r := -1
	switch e := &c.evs[w]; {
	case e.Flow:
		r = w - 1
	case e.Read:
		r = w
	default:
		return true
	}
	return c.chosen[r] && (c.src[r] < 0 || c.known(c.src[r], depth+1))
}

// flows reports whether read r's value is written on by its instruction (a get into a location,
// a put from a buffer).
func (c *checker) flows(r int) bool { return r+1 < len(c.evs) && c.evs[r+1].Flow }

// rmwTaken reports whether an RMW among done already reads src at loc.
func (c *checker) rmwTaken(done []int, loc Loc, src int) bool {
	for _, r := range done {
		if c.evs[r].Write && c.src[r] == src && c.evs[r].Loc == loc {
			return true
		}
	}
	return false
}

// valueOf computes the value a write stores (following rf for read-modify-writes).
func (c *checker) valueOf(w int, depth int) (int64, bool) {
	if depth > len(c.evs) {
		return 0, false // an rf cycle; the graph rejects it anyway
	}
	in, e := c.ins[w], &c.evs[w]
	read := func() (int64, bool) { return c.readValue(w, depth+1) }
	switch {
	case e.Op == OpPutSig && e.Part == 1:
		if in.SigOp == SigAdd {
			v, ok := read()
			return v + in.New, ok
		}
		return in.New, true
	case e.Op == OpCSwap:
		return in.New, true
	case e.Flow: // the value its instruction read
		if !c.chosen[w-1] {
			return 0, false
		}
		return c.readValue(w-1, depth+1)
	case e.Read && e.Write: // the other RMWs
		v, ok := read()
		return rmwValue(e.Op, v, in.Val), ok
	}
	return in.Val, true
}

func (c *checker) readValue(r int, depth int) (int64, bool) {
	if c.src[r] < 0 {
		return c.locs[c.locOf[c.evs[r].Loc]].init, true
	}
	return c.valueOf(c.src[r], depth)
}

func (c *checker) afterRF(g graph) {
	for i := range c.evs {
		e := &c.evs[i]
		if !e.Read || c.src[i] == -2 {
			continue
		}
		v, ok := c.readValue(i, 0)
		if !ok {
			return
		}
		if !c.meets(i, v) {
			return
		}
		if e.Op == OpCSwap && (v == c.ins[i].Val) != c.succeed[i] {
			return
		}
		c.val[i] = v // scratch: the value read, for the state's registers
	}
	for _, p := range c.polls {
		c.val[p.first] = c.regConst[p.first]
	}
	for k, ev := range c.keyEvent {
		if ev >= 0 {
			c.keyVal[k] = c.val[ev]
		}
	}
	c.chooseFinal(0, g)
}

// chooseFinal picks the co-last write of each location the condition names.
func (c *checker) chooseFinal(k int, g graph) {
	if c.done {
		return
	}
	for k < len(c.keyEvent) && c.keyEvent[k] >= 0 {
		k++
	}
	if k == len(c.keyEvent) {
		c.keyBuf = c.keyBuf[:0]
		for i, key := range c.keys {
			c.keyBuf = append(c.keyBuf, key...)
			c.keyBuf = append(c.keyBuf, '=')
			c.keyBuf = strconv.AppendInt(c.keyBuf, c.keyVal[i], 10)
			c.keyBuf = append(c.keyBuf, ';')
			if i < len(c.keys)-1 {
				c.keyBuf = append(c.keyBuf, ' ')
			}
		}
		if _, known := c.states[string(c.keyBuf)]; known {
			return
		}
		if c.verdictOnly { // only a state satisfying the condition can change the verdict
			for i, key := range c.keys {
				c.scratch[key] = c.keyVal[i]
			}
			if !c.t.EvalState(c.scratch) {
				return
			}
		}
		if c.coExists(0, g) {
			st := State{}
			for i, key := range c.keys {
				st[key] = c.keyVal[i]
			}
			c.states[string(c.keyBuf)] = st
			c.done = c.verdictOnly && c.t.EvalState(st)
		}
		return
	}
	l := c.locs[c.keyLoc[k]]
	if c.keyLoc[k] == c.deferLoc { // a counting location: its final value is its total
		total, _ := c.countTotal(c.deferLoc)
		if want, fixed := c.need[c.keys[k]]; fixed && total != want {
			return
		}
		c.keyVal[k] = total
		c.chooseFinal(k+1, g)
		return
	}
	if len(l.writes) == 0 {
		c.keyVal[k] = l.init
		c.chooseFinal(k+1, g)
		return
	}
	for _, last := range l.writes {
		g2 := c.cloneG(g)
		ok := true
		for _, w := range l.writes {
			if ok && w != last {
				ok = g2.add(c.late[w], c.late[last])
			}
		}
		v, okv := c.valueOf(last, 0)
		if want, fixed := c.need[c.keys[k]]; fixed && v != want {
			okv = false
		}
		if ok && okv {
			c.keyVal[k] = v
			c.chooseFinal(k+1, g2)
		}
		c.release(g2)
	}
}

// coExists searches for coherence orders of locations li.. consistent with g, adding fr edges and
// checking atomicity as each write is placed.
func (c *checker) coExists(li int, g graph) bool {
	if li == len(c.locs) { // a deferred location's co fits any acyclic g (race.go, deferrable)
		return true
	}
	if c.fixed[li] || li == c.deferLoc { // a race location: co is fixed and its reads' fr edges are in g
		return c.coExists(li+1, g)
	}
	l := c.locs[li]
	placed := make([]bool, len(c.evs))
	return c.place(li, l, placed, -1, 0, g)
}

func (c *checker) place(li int, l *locInfo, placed []bool, last, n int, g graph) bool {
	if n == len(l.writes) {
		return c.coExists(li+1, g)
	}
	for _, w := range l.writes {
		if placed[w] || !c.placeable(l, placed, w, g) {
			continue
		}
		g2 := c.cloneG(g)
		ok := true
		if last >= 0 {
			ok = g2.add(c.late[last], c.late[w])
		}
		for _, r := range l.reads { // w is co-after r's source: r reads before w
			if ok && r != w && c.src[r] >= 0 && placed[c.src[r]] {
				ok = g2.add(c.readPoint(r), c.late[w])
			}
		}
		found := false
		if ok {
			placed[w] = true
			found = c.place(li, l, placed, w, n+1, g2)
			placed[w] = false
		}
		c.release(g2)
		if found {
			return true
		}
	}
	return false
}

// placeable: no unplaced write must precede w, and placing w does not land an AMO (any write, with
// AtomicAllWrites) between an unplaced read-modify-write and its already placed source.
func (c *checker) placeable(l *locInfo, placed []bool, w int, g graph) bool {
	for _, u := range l.writes {
		if u == w || placed[u] {
			continue
		}
		if g.has(c.late[u], c.late[w]) {
			return false
		}
		if c.evs[u].Read && (c.opt.AtomicAllWrites || c.evs[w].AMO) && (c.src[u] < 0 || placed[c.src[u]]) {
			return false
		}
	}
	return true
}

// Decide returns only the verdict of t in mode: it gives sources only to the reads the condition
// depends on, compares final states on the condition's registers and locations alone, and stops at
// the first allowed state that satisfies the condition. Check lists every final state.
func Decide(t *Test, mode Mode, opt Options) (Verdict, error) {
	c, err := newChecker(t, mode, opt)
	if err != nil {
		return VerdictNone, err
	}
	c.verdictOnly = true
	c.condRegs = map[string]bool{}
	var walk func(p *Prop)
	walk = func(p *Prop) {
		if p.Kind == PropReg {
			c.condRegs[regKey(p.PE, p.Reg)] = true
		}
		for i := range p.Args {
			walk(&p.Args[i])
		}
	}
	walk(&t.Cond)
	var keys []string
	for _, k := range c.keys {
		if c.condRegs[k] || !strings.Contains(k, ":") {
			keys = append(keys, k)
		}
	}
	c.keys = keys
	c.scratch = State{}
	c.need = map[string]int64{}
	atoms := []Prop{t.Cond}
	if t.Cond.Kind == PropAnd {
		atoms = t.Cond.Args
	}
	if t.Quant != Forall { // Allowed needs a state satisfying every conjunct
		for _, a := range atoms {
			switch a.Kind {
			case PropReg:
				c.need[regKey(a.PE, a.Reg)] = a.Val
			case PropMem:
				c.need[a.Loc.String()] = a.Val
			}
		}
	}
	if len(c.split) > 0 {
		c.run() // mixed widths: the exhaustive enumeration, as in Check
	} else {
		c.decide()
	}
	for _, s := range c.states {
		if t.EvalState(s) {
			return Allowed, nil
		}
	}
	return Forbidden, nil
}
