package memmodel

// decide is the checker's fast path: it enumerates rf and the final write of each location the
// condition names (together they fix the final state), and only then searches for one coherence
// order that makes the candidate consistent, stopping at the first. A final state already known is
// not searched again. Enumerate, which lists every execution, is the slow reference it is tested
// against.
func (c *checker) decide() {
	n := len(c.evs)
	c.states = map[string]State{}
	c.succeed, c.src, c.coPos, c.val = make([]bool, n), make([]int, n), make([]int, n), make([]int64, n)
	c.co = make([][]int, len(c.locs))
	var cswaps []int
	for i := range c.evs {
		if c.evs[i].Op == OpCSwap {
			cswaps = append(cswaps, i)
		}
	}
	for mask := 0; mask < 1<<len(cswaps); mask++ {
		for k, i := range cswaps {
			c.succeed[i] = mask&(1<<k) != 0
			c.evs[i].Write = c.succeed[i]
		}
		var reads []int
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
				reads = append(reads, i)
			}
		}
		c.chooseRF(reads, 0, c.base.clone())
	}
}

// ownStore is the latest plain store of r's PE to r's location before plain load r, or -1.
func (c *checker) ownStore(r int) int {
	e := &c.evs[r]
	own := -1
	if !e.Plain {
		return -1
	}
	for _, w := range c.locs[c.locOf[e.Loc]].writes {
		if c.evs[w].Plain && c.evs[w].PE == e.PE && c.evs[w].Index < e.Index && (own < 0 || c.evs[w].Index > c.evs[own].Index) {
			own = w
		}
	}
	return own
}

func (c *checker) chooseRF(reads []int, k int, g graph) {
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
		if e.Op == OpWait && !c.waitMaySee(l, src, r) {
			continue
		}
		g2 := g.clone()
		ok := true
		if src >= 0 {
			ok = g2.add(c.srcPoint(src, r), c.readPoint(r))
			if ok && own >= 0 && src != own { // never older than the PE's own store
				ok = g2.add(c.late[own], c.late[src])
			}
			if ok && e.Write { // an RMW's source is co-before it
				ok = g2.add(c.late[src], c.late[r])
			}
		} else {
			for _, w := range l.writes { // reading the initial value: every write is co-after it
				if ok && w != r {
					ok = g2.add(c.readPoint(r), c.late[w])
				}
			}
		}
		if !ok {
			continue
		}
		c.src[r] = src
		c.chooseRF(reads, k+1, g2)
	}
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
	case e.Op == OpFAdd || e.Op == OpAdd:
		v, ok := read()
		return v + in.Val, ok
	case e.Op == OpCSwap:
		return in.New, true
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
	regs := State{}
	for i := range c.evs {
		e := &c.evs[i]
		if !e.Read {
			continue
		}
		v, ok := c.readValue(i, 0)
		if !ok {
			return
		}
		if e.Op == OpWait && !c.ins[i].Cmp.Holds(v, c.ins[i].Val) {
			return
		}
		if e.Op == OpCSwap && (v == c.ins[i].Val) != c.succeed[i] {
			return
		}
		if e.Reg != "" {
			regs[regKey(e.PE, e.Reg)] = v
		}
	}
	c.chooseFinal(condLocs(c.t), 0, regs, g)
}

// chooseFinal picks the co-last write of each location the condition names.
func (c *checker) chooseFinal(locs []Loc, k int, s State, g graph) {
	if k == len(locs) {
		key := s.format(c.keys)
		if _, known := c.states[key]; known {
			return
		}
		if c.coExists(0, g) {
			proj := State{}
			for _, kk := range c.keys {
				proj[kk] = s[kk]
			}
			c.states[key] = proj
		}
		return
	}
	l := c.locs[c.locOf[locs[k]]]
	if len(l.writes) == 0 {
		s[locs[k].String()] = l.init
		c.chooseFinal(locs, k+1, s, g)
		return
	}
	for _, last := range l.writes {
		g2 := g.clone()
		ok := true
		for _, w := range l.writes {
			if ok && w != last {
				ok = g2.add(c.late[w], c.late[last])
			}
		}
		if !ok {
			continue
		}
		v, okv := c.valueOf(last, 0)
		if !okv {
			continue
		}
		s[locs[k].String()] = v
		c.chooseFinal(locs, k+1, s, g2)
	}
}

// coExists searches for coherence orders of locations li.. consistent with g, adding fr edges and
// checking atomicity as each write is placed.
func (c *checker) coExists(li int, g graph) bool {
	if li == len(c.locs) {
		return true
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
		g2 := g.clone()
		ok := true
		if last >= 0 {
			ok = g2.add(c.late[last], c.late[w])
		}
		for _, r := range l.reads { // w is co-after r's source: r reads before w
			if ok && r != w && c.src[r] >= 0 && placed[c.src[r]] {
				ok = g2.add(c.readPoint(r), c.late[w])
			}
		}
		if !ok {
			continue
		}
		placed[w] = true
		found := c.place(li, l, placed, w, n+1, g2)
		placed[w] = false
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
		if g[c.late[u]]&(1<<uint(c.late[w])) != 0 {
			return false
		}
		if c.evs[u].Read && (c.opt.AtomicAllWrites || c.evs[w].AMO) && (c.src[u] < 0 || placed[c.src[u]]) {
			return false
		}
	}
	return true
}
