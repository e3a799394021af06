package memmodel

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
)

// maxPoints bounds the instants of the order graph: one per event, two per plain access in bypass
// and per AMO that is atomic only among AMOs. The graph is a bit matrix (points x points), so the
// bound is one of memory: at the limit one graph is 128 KiB and the search holds one per level.
const maxPoints = 1024

// graph holds, per point, the set of points reachable from it: the transitive closure of the edges
// added so far, so that a cycle is caught the moment its last edge arrives. Row i is
// b[i*w : (i+1)*w], a bit set over the points.
type graph struct {
	w int
	b []uint64
}

func newGraph(n int) graph {
	w := max(1, (n+63)/64)
	return graph{w: w, b: make([]uint64, n*w)}
}

func (g graph) clone() graph { return graph{w: g.w, b: append([]uint64(nil), g.b...)} }

// has reports whether v is reachable from u.
func (g graph) has(u, v int) bool { return g.b[u*g.w+v>>6]>>(uint(v)&63)&1 != 0 }

// add adds u->v and reports false if it closes a cycle.
func (g graph) add(u, v int) bool {
	if u == v || g.has(v, u) {
		return false
	}
	if g.has(u, v) {
		return true
	}
	w := g.w
	rv := g.b[v*w : v*w+w] // not written below: v does not reach u
	bit, word := uint64(1)<<(uint(v)&63), v>>6
	for i, n := 0, len(g.b)/w; i < n; i++ {
		if i == u || g.has(i, u) {
			ri := g.b[i*w : i*w+w]
			for k := range ri {
				ri[k] |= rv[k]
			}
			ri[word] |= bit
		}
	}
	return true
}

type locInfo struct {
	loc    Loc
	init   int64
	writes []int // writing events under the current cswap guess
	reads  []int
}

type checker struct {
	t    *Test
	mode Mode
	opt  Options
	evs  []Event
	ins  []Instr
	// Each memory event has one point, or two: a plain load reads memory (early) before it executes
	// (late); a plain store executes (early) before it reaches memory (late); an AMO not atomic with
	// respect to puts reads (early) before it writes (late). in and out are where program-order
	// rules enter and leave the event; acquires enter at early, releases leave from late.
	early, late, in, out []int
	npts                 int
	base                 graph
	ord                  [][2]int
	locs                 []*locInfo
	locOf                map[Loc]int

	succeed []bool  // cswap guess per event
	src     []int   // rf source per reading event (-1: initial value)
	coPos   []int   // position in co per writing event
	co      [][]int // per location, writes in co order
	val     []int64 // value read (reads) and written (writes)

	keys   []string
	states map[string]State
	// fast path: per state key, the event whose register it is or the location it names
	keyEvent, keyLoc []int
	keyVal           []int64
	keyBuf           []byte
	pool             []graph
	verdictOnly      bool             // Decide: only the verdict is wanted
	condRegs         map[string]bool  // registers the condition names
	done             bool             // Decide found a satisfying state
	need             map[string]int64 // Decide: values the condition's conjuncts require
	scratch          State
	chosen           []bool // fast path: reads whose source is chosen
	placed           []bool // race: writes placed in co so far
	fixed            []bool // race: per location, co is fixed (race locations, once placed)
	symPrev          []int  // race: the write that must precede this one in co (symmetry), or -1
	classes          [][]int
	memo             map[string]bool // race: co prefixes already searched at the current location
	touched          []bool          // events some preserved-order pair relates
	keySet           map[string]bool // the state's keys, as a set
	keyScratch       []byte
	cyclic           bool           // the preserved order alone has a cycle (under the current guess)
	polls            []pollSite     // wait_all ... test_some calls: the outcomes each may return
	pollCat          []int8         // per poll event, under the current guess: pollFree, pollHolds, pollFails
	regConst         []int64        // per poll call's first event: the register's value under the current guess
	raw              bool           // Candidates: no axiom prunes, every candidate execution is listed
	split            map[Loc]bool   // words named by half: their locations are the halves (width.go)
	collPt           map[[2]int]int // (column, instruction) of a collective call -> its matched call's point
	regEv            map[string]int // condPossible: the event that fills each register
	deferLoc         int            // decide: the race location whose co is left to the end (race.go, deferrable), or -1
	fn               func(*Execution)
}

func newChecker(t *Test, mode Mode, opt Options) (*checker, error) {
	if err := checkWidths(t); err != nil {
		return nil, fmt.Errorf("memmodel: %w", err)
	}
	c := &checker{t: t, mode: mode, opt: opt, evs: Events(t), locOf: map[Loc]int{}, split: splitWords(t)}
	for _, e := range c.evs {
		c.ins = append(c.ins, c.instrOf(e))
	}
	n := len(c.evs)
	c.early, c.late, c.in, c.out = make([]int, n), make([]int, n), make([]int, n), make([]int, n)
	for i := range c.evs {
		e := &c.evs[i]
		if !e.memory() {
			c.early[i], c.late[i], c.in[i], c.out[i] = -1, -1, -1, -1
			continue
		}
		if e.Half == 2 { // the high half of a 64-bit access is the same access as its low half
			c.early[i], c.late[i], c.in[i], c.out[i] = c.early[i-1], c.late[i-1], c.in[i-1], c.out[i-1]
			continue
		}
		p := c.npts
		c.npts++
		c.early[i], c.late[i], c.in[i], c.out[i] = p, p, p, p
		switch {
		case mode == Bypass && e.Plain && e.Read: // the read of memory, then the execution
			c.npts++
			c.late[i], c.in[i], c.out[i] = p+1, p+1, p+1
		case mode == Bypass && e.Plain: // the execution, then the arrival in memory
			c.npts++
			c.late[i] = p + 1
		case e.Read && e.Write && !opt.AtomicAllWrites: // an AMO reads, then writes; a put may land between
			c.npts++
			c.late[i], c.out[i] = p+1, p+1
		}
	}
	c.collPoints()
	if c.npts > maxPoints {
		return nil, fmt.Errorf("memmodel: test %s has %d order points in %s mode, more than the %d the checker supports (see MODEL.md, Limits)", t.Name, c.npts, mode, maxPoints)
	}
	c.findPolls()
	c.buildBase()
	// Locations: every accessed one, then the ones only the condition names.
	addLoc := func(l Loc) {
		if _, ok := c.locOf[l]; !ok {
			c.locOf[l] = len(c.locs)
			c.locs = append(c.locs, &locInfo{loc: l})
		}
	}
	for _, e := range c.evs {
		if e.memory() {
			addLoc(e.Loc)
		}
	}
	if err := c.orderLocs(); err != nil {
		return nil, err
	}
	for _, l := range condLocs(t) {
		if c.split[l] { // a split word's value is its halves'
			addLoc(l.halfLoc(1))
			addLoc(l.halfLoc(2))
			continue
		}
		addLoc(l)
	}
	for _, iv := range t.Init {
		if c.split[iv.Loc] {
			for h := 1; h <= 2; h++ {
				if i, ok := c.locOf[iv.Loc.halfLoc(h)]; ok {
					c.locs[i].init = halfVal(iv.Val, h)
				}
			}
			continue
		}
		if i, ok := c.locOf[iv.Loc]; ok {
			c.locs[i].init = iv.Val
			if iv.Loc.half() != 0 {
				c.locs[i].init = lo32(iv.Val)
			}
		}
	}
	c.keys = StateKeys(t)
	return c, nil
}

// collPoints gives each matched collective call (the k-th call of one collective on one team,
// which every member makes) a point of its own: the call is an event that the members' program
// orders pass through.
func (c *checker) collPoints() {
	c.collPt = map[[2]int]int{}
	matched := map[string]int{}
	for ci, col := range c.t.Columns {
		nth := map[string]int{}
		for k, in := range col.Instrs {
			if !in.Op.collective() {
				continue
			}
			key := collKey(in)
			id := key + "#" + strconv.Itoa(nth[key])
			nth[key]++
			p, ok := matched[id]
			if !ok {
				p = c.npts
				c.npts++
				matched[id] = p
			}
			c.collPt[[2]int{ci, k}] = p
		}
	}
}

// orderLocs puts the location a get or a put from a buffer reads before the one it writes, so that
// Enumerate knows the value read when it computes the value written.
func (c *checker) orderLocs() error {
	after := map[int][]int{} // location -> locations written with a value read there
	for i := range c.evs {
		if c.evs[i].Flow {
			r, w := c.locOf[c.evs[i-1].Loc], c.locOf[c.evs[i].Loc]
			after[w] = append(after[w], r)
		}
		if c.evs[i].Half == 2 { // a 64-bit RMW's high half depends on its low half's read (the carry), and a cswap's success on both
			lo, hi := c.locOf[c.evs[i-1].Loc], c.locOf[c.evs[i].Loc]
			after[hi] = append(after[hi], lo)
		}
	}
	if len(after) == 0 {
		return nil
	}
	state := make([]int, len(c.locs)) // 0 new, 1 on the path, 2 placed
	var order []*locInfo
	var visit func(li int) error
	visit = func(li int) error {
		switch state[li] {
		case 1:
			return fmt.Errorf("memmodel: test %s: a value moves in a cycle through %s (gets and puts from buffers)", c.t.Name, c.locs[li].loc)
		case 2:
			return nil
		}
		state[li] = 1
		for _, r := range after[li] {
			if err := visit(r); err != nil {
				return err
			}
		}
		state[li] = 2
		order = append(order, c.locs[li])
		return nil
	}
	for li := range c.locs {
		if err := visit(li); err != nil {
			return err
		}
	}
	c.locs = order
	for li, l := range c.locs {
		c.locOf[l.loc] = li
	}
	return nil
}

func (c *checker) instrOf(e Event) Instr {
	for _, col := range c.t.Columns {
		if col.PE == e.PE && col.Thread == e.Thread {
			if in := col.Instrs[e.Index]; in.elems() {
				return in.element(e.Part) // an element is a one-word put or get
			}
			return col.Instrs[e.Index]
		}
	}
	return Instr{}
}

// buildBase makes the base graph: each event's instants in order and the preserved order (which
// depends on the current guess of the calls' outcomes: a poll that succeeds acquires).
func (c *checker) buildBase() {
	c.base = newGraph(c.npts)
	for i := range c.evs {
		if c.early[i] != c.late[i] {
			c.base.add(c.early[i], c.late[i])
		}
	}
	c.ord, c.cyclic = nil, false
	c.preservedOrder()
}

// preservedOrder adds the API-preserved order (the ord relation) to the base graph.
func (c *checker) preservedOrder() {
	seen := map[[2]int]bool{}
	edge := func(a, b, u, v int) {
		if !c.base.add(u, v) {
			c.cyclic = true // ord itself has a cycle: no execution (the parser refuses collectives out of order)
		}
		if !seen[[2]int{a, b}] {
			seen[[2]int{a, b}] = true
			c.ord = append(c.ord, [2]int{a, b})
		}
	}
	for _, col := range c.t.Columns {
		// ids of this column's events
		var ids []int
		for i := range c.evs {
			if c.evs[i].PE == col.PE && c.evs[i].Thread == col.Thread {
				ids = append(ids, i)
			}
		}
		for x, i := range ids {
			a := &c.evs[i]
			if !a.memory() {
				continue
			}
			for _, j := range ids[x+1:] {
				b := &c.evs[j]
				if !b.memory() {
					continue
				}
				if a.Index == b.Index { // put-with-signal: the data is delivered before the signal; a
					if (a.Op == OpPutSig && a.Part != b.Part) || b.Flow { // get's or put's read before its write
						edge(i, j, c.out[i], c.in[j])
					}
					continue // the words of one wait_all ... test_some are read in any order
				}
				if a.Loc == b.Loc && ((a.plainAccess() && b.dst()) || (a.dst() && a.Op == OpGet && b.plainAccess())) {
					edge(i, j, c.out[i], c.in[j]) // a get's destination: after the PE's earlier accesses; a blocking one's before its later ones
				}
				if a.Plain && b.Plain && a.Loc == b.Loc && !a.Buf { // a PE's plain accesses to one location are coherent
					// (a put's source buffer is read any time up to the put's completion)
					edge(i, j, c.out[i], c.in[j])
					if a.Write && b.Write {
						edge(i, j, c.late[i], c.late[j])
					}
					if a.Write && b.Read {
						edge(i, j, c.out[i], c.early[j])
					}
				}
				if c.ctxFence(col, a, b) && a.delivery(c.opt) && b.delivery(c.opt) && a.Loc.PE == b.Loc.PE {
					edge(i, j, c.out[i], c.in[j])
				}
				if c.completedAt(col, a) < b.Index { // quiet releases: everything before is complete
					edge(i, j, c.late[i], c.in[j])
				}
				if a.blockingFetch() && c.opt.BlockingFetchOrders {
					edge(i, j, c.out[i], c.in[j])
				}
				if a.Op == OpWait || a.Acq { // wait_until acquires, and so does a poll that succeeds
					edge(i, j, c.out[i], c.early[j])
				}
			}
		}
	}
	// Collectives: each matched call (the k-th call of one collective on one team) is a point of
	// its own, which every member's call passes through (collPt). barrier_all: what a barrier
	// completes (plain stores, the default context's operations, a context's once quieted) precedes
	// the point, with release (plain stores reach memory), and the point precedes everything after
	// the call on every member, with acquire (plain loads read memory afresh). sync_all completes
	// nothing: what is complete when the PE calls it (its plain accesses, at execution; what its
	// blocking calls returned; what a quiet or barrier since completed) precedes the point, which
	// precedes, at execution, whatever any member does after it. A PE's earlier collectives precede
	// its later ones, so order passes through a PE that only calls collectives.
	type hop struct{ ev, pt int }
	var entries, exits []hop
	for ci, col := range c.t.Columns {
		var ids []int
		for i := range c.evs {
			if e := &c.evs[i]; e.PE == col.PE && e.Thread == col.Thread && e.memory() {
				ids = append(ids, i)
			}
		}
		var prev []int // the points of the column's earlier collectives
		for k, in := range col.Instrs {
			if !in.Op.collective() {
				continue
			}
			m, bar := c.collPt[[2]int{ci, k}], in.Op == OpBarrier
			for _, j := range ids {
				if c.evs[j].Index <= k {
					continue
				}
				if bar {
					c.link(m, c.early[j])
				} else {
					c.link(m, c.in[j])
				}
				exits = append(exits, hop{j, m})
			}
			if in.Op == OpBroadcast && in.Root != col.PE {
				prev = append(prev, m)
				continue // a broadcast orders only the root's events before it
			}
			for _, i := range ids {
				a := &c.evs[i]
				if a.Index >= k {
					continue
				}
				at := c.completedAt(col, a)
				done := a.plainAccess() || a.Op == OpWait || a.Op.poll() || a.Op == OpSigFetch || (a.blockingFetch() && c.opt.BlockingFetchOrders)
				switch {
				case bar && at <= k, !bar && at < k:
					c.link(c.late[i], m)
				case !bar && done:
					c.link(c.out[i], m)
				default:
					continue
				}
				entries = append(entries, hop{i, m})
			}
			for _, p := range prev {
				c.link(p, m)
			}
			prev = append(prev, m)
		}
	}
	for _, a := range entries { // the event pairs the collectives order, for ord
		for _, b := range exits {
			if a.ev != b.ev && (a.pt == b.pt || c.base.has(a.pt, b.pt)) && !seen[[2]int{a.ev, b.ev}] {
				seen[[2]int{a.ev, b.ev}] = true
				c.ord = append(c.ord, [2]int{a.ev, b.ev})
			}
		}
	}
}

// link adds u->v to the base graph; a cycle means no execution.
func (c *checker) link(u, v int) {
	if !c.base.add(u, v) {
		c.cyclic = true
	}
}

// column returns the column of PE pe's thread.
func (c *checker) column(pe, thread int) Column {
	for _, col := range c.t.Columns {
		if col.PE == pe && col.Thread == thread {
			return col
		}
	}
	return Column{}
}

// Result is the model's answer for one test in one mode.
type Result struct {
	Test     *Test
	Mode     Mode
	Keys     []string // what a final state records
	States   []string // allowed final states, formatted, sorted
	allowed  map[string]bool
	Positive int // allowed final states satisfying the condition's proposition
	Negative int
	Verdict  Verdict // Allowed iff Positive > 0
}

// Allows reports whether the mode allows final state s.
func (r *Result) Allows(s State) bool {
	return r.allowed[s.format(r.Keys)]
}

// Format formats a state with this result's keys.
func (r *Result) Format(s State) string { return s.format(r.Keys) }

// Ok is herd's validation of the condition: exists holds on some state, ~exists on none, forall on all.
func (r *Result) Ok() bool {
	switch r.Test.Quant {
	case NotExists:
		return r.Positive == 0
	case Forall:
		return r.Negative == 0
	}
	return r.Positive > 0
}

// Observation is herd's Never/Sometimes/Always for the proposition.
func (r *Result) Observation() string {
	switch {
	case r.Positive == 0:
		return "Never"
	case r.Negative == 0:
		return "Always"
	}
	return "Sometimes"
}

// Print writes the result herd-style.
func (r *Result) Print(w io.Writer) {
	fmt.Fprintf(w, "Test %s %s\n", r.Test.Name, r.Mode)
	fmt.Fprintf(w, "States %d\n", len(r.States))
	for _, s := range r.States {
		fmt.Fprintf(w, "%s\n", s)
	}
	if r.Ok() {
		fmt.Fprintln(w, "Ok")
	} else {
		fmt.Fprintln(w, "No")
	}
	fmt.Fprintf(w, "Witnesses\nPositive: %d Negative: %d\n", r.Positive, r.Negative)
	fmt.Fprintf(w, "Condition %s (%s)\n", r.Test.Quant, r.Test.Cond)
	fmt.Fprintf(w, "Observation %s %s %d %d\n", r.Test.Name, r.Observation(), r.Positive, r.Negative)
	fmt.Fprintf(w, "Verdict %s %s\n", r.Mode, r.Verdict)
}

// Check decides t in mode with options opt: every allowed final state and the verdict.
func Check(t *Test, mode Mode, opt Options) (*Result, error) {
	c, err := newChecker(t, mode, opt)
	if err != nil {
		return nil, err
	}
	if len(c.split) > 0 {
		c.run() // mixed widths: the exhaustive enumeration (the fast path's pruning assumes whole words)
	} else {
		c.decide()
	}
	r := &Result{Test: t, Mode: mode, Keys: c.keys, allowed: map[string]bool{}}
	for k, s := range c.states {
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

// Enumerate calls fn for every candidate execution of t that mode allows, each coherence order
// separately: exhaustive, and slow on tests with many writes to one location (Check is not).
func Enumerate(t *Test, mode Mode, opt Options, fn func(*Execution)) error {
	c, err := newChecker(t, mode, opt)
	if err != nil {
		return err
	}
	c.fn = fn
	c.run()
	return nil
}

func (c *checker) run() {
	n := len(c.evs)
	c.states = map[string]State{}
	c.succeed, c.src, c.coPos, c.val = make([]bool, n), make([]int, n), make([]int, n), make([]int64, n)
	c.co = make([][]int, len(c.locs))
	c.guesses(func() {
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
			}
		}
		c.location(0, c.base.clone())
	})
}

// location enumerates co, then rf, of location li, pruning on each new edge.
func (c *checker) location(li int, g graph) {
	if li == len(c.locs) {
		c.record()
		return
	}
	l := c.locs[li]
	c.co[li] = c.co[li][:0]
	used := make([]bool, len(l.writes))
	var perm func(g graph)
	perm = func(g graph) {
		if len(c.co[li]) == len(l.writes) {
			for pos, w := range c.co[li] {
				c.coPos[w] = pos
			}
			c.reads(li, 0, g)
			return
		}
		for k, w := range l.writes {
			if used[k] {
				continue
			}
			g2 := g
			if m := len(c.co[li]); m > 0 && !c.raw {
				g2 = g.clone()
				if !g2.add(c.late[c.co[li][m-1]], c.late[w]) {
					continue
				}
			}
			used[k] = true
			c.co[li] = append(c.co[li], w)
			perm(g2)
			c.co[li] = c.co[li][:len(c.co[li])-1]
			used[k] = false
		}
	}
	perm(g)
}

// readPoint is where a read observes memory.
func (c *checker) readPoint(r int) int { return c.early[r] }

// srcPoint is where write w becomes visible to read r: a PE sees its own plain store from the
// moment it executes; everyone else when it reaches memory.
func (c *checker) srcPoint(w, r int) int {
	if c.evs[w].Plain && c.evs[r].Plain && sameThread(&c.evs[w], &c.evs[r]) {
		return c.out[w]
	}
	return c.late[w]
}

func (c *checker) reads(li, ri int, g graph) {
	l := c.locs[li]
	if ri == len(l.reads) {
		if c.values(li) {
			c.location(li+1, g)
		}
		return
	}
	r := l.reads[ri]
	e := &c.evs[r]
	// latest po-earlier plain store of a plain load: the load must not read anything older.
	own := -1
	if e.Plain {
		for _, w := range l.writes {
			if c.evs[w].Plain && sameThread(&c.evs[w], e) && c.evs[w].Index < e.Index && (own < 0 || c.evs[w].Index > c.evs[own].Index) {
				own = w
			}
		}
	}
	for k := -1; k < len(l.writes); k++ {
		src, pos := -1, -1
		if k >= 0 {
			src = l.writes[k]
			pos = c.coPos[src]
		}
		if src == r {
			continue
		}
		if c.raw && e.Write && pos >= c.coPos[r] { // a candidate's RMW reads a co-earlier write, so that its value is defined
			continue
		}
		if !c.raw && e.Write && !c.atomicOK(li, pos, r) {
			continue
		}
		if !c.raw && own >= 0 && pos < c.coPos[own] {
			continue
		}
		if c.tested(r) && !c.waitMaySee(l, src, r) {
			continue
		}
		if c.raw { // every candidate: the axioms are the caller's (CheckCat)
			c.src[r] = src
			c.reads(li, ri+1, g)
			continue
		}
		g2 := g.clone()
		ok := true
		if src >= 0 {
			ok = g2.add(c.srcPoint(src, r), c.readPoint(r))
		}
		for _, w := range c.co[li][pos+1:] {
			if ok && w != r {
				ok = g2.add(c.readPoint(r), c.late[w])
			}
		}
		if !ok {
			continue
		}
		c.src[r] = src
		c.reads(li, ri+1, g2)
	}
}

// waitMaySee prunes early: a wait cannot read a write whose value is fixed and fails its test.
func (c *checker) waitMaySee(l *locInfo, src, r int) bool {
	v := l.init
	if src >= 0 {
		if c.evs[src].Read || c.evs[src].Flow { // its value depends on what it reads, known later
			return true
		}
		v = c.ins[src].Val
		if c.evs[src].Op == OpPutSig && c.evs[src].Part == 1 {
			v = c.ins[src].New
		}
	}
	return c.meets(r, v)
}

// atomicOK: the read-modify-write r reads the write at co position pos, and no AMO (or, with
// AtomicAllWrites, no write at all; with SameWidthAtomicity, of r's width) lands between that
// write and r.
func (c *checker) atomicOK(li, pos, r int) bool {
	if pos >= c.coPos[r] {
		return false
	}
	for _, w := range c.co[li][pos+1 : c.coPos[r]] {
		if (c.opt.AtomicAllWrites || c.evs[w].AMO) && (!c.opt.SameWidthAtomicity || sameWidth(&c.evs[w], &c.evs[r])) {
			return false
		}
	}
	return true
}

// values computes the location's values in co order and rejects unsatisfied waits and wrong cswap
// guesses.
func (c *checker) values(li int) bool {
	l := c.locs[li]
	read := func(r int) int64 {
		if c.src[r] < 0 {
			return l.init
		}
		return c.val[c.src[r]]
	}
	for _, w := range c.co[li] {
		in, e := c.ins[w], &c.evs[w]
		if h := e.Loc.half(); h != 0 { // a 32-bit access, or a half of a 64-bit one
			c.val[w] = c.halfWrite(w, read(w))
			continue
		}
		switch {
		case e.Op == OpPutSig && e.Part == 1:
			c.val[w] = in.New
			if in.SigOp == SigAdd {
				c.val[w] += read(w)
			}
		case e.Op == OpCSwap:
			c.val[w] = in.New
		case e.Flow: // the value its instruction read, at a location placed before this one
			c.val[w] = c.regValue(w - 1)
		case e.Read: // the other RMWs
			c.val[w] = rmwValue(e.Op, read(w), in.Val)
		default:
			c.val[w] = in.Val
		}
	}
	for _, r := range l.reads {
		v := read(r)
		e := &c.evs[r]
		switch {
		case !c.meets(r, v):
			return false
		case e.Op == OpCSwap && e.Loc.half() == 0 && (v == c.ins[r].Val) != c.succeed[r]:
			return false
		case e.Op == OpCSwap && e.Half == 0 && e.Loc.half() != 0 && (v == lo32(c.ins[r].Val)) != c.succeed[r]:
			return false
		case e.Op == OpCSwap && e.Half == 1 && c.succeed[r] && v != lo32(c.ins[r].Val):
			return false
		case e.Op == OpCSwap && e.Half == 2 && (join64(c.readOf(r-1), v) == c.ins[r].Val) != c.succeed[r]:
			return false
		}
		if e.Write {
			continue // its slot holds the written value; the register gets the read one below
		}
		c.val[r] = v
	}
	return true
}

// readOf is the value read r reads from its source (a half's value, for a half).
func (c *checker) readOf(r int) int64 {
	if c.src[r] < 0 {
		return c.locs[c.locOf[c.evs[r].Loc]].init
	}
	return c.val[c.src[r]]
}

// halfWrite is what write w to a half writes, having read old there (RMWs): a 32-bit access
// writes the low 32 bits of its value; a 64-bit one writes its half of the 64-bit value, which for
// an RMW's high half is computed from both halves read (the carry of an add).
func (c *checker) halfWrite(w int, old int64) int64 {
	in, e := c.ins[w], &c.evs[w]
	v := in.Val
	switch {
	case e.Op == OpPutSig && e.Part == 1:
		v = in.New
		if in.SigOp == SigAdd {
			v += old
		}
	case e.Op == OpCSwap:
		v = in.New
	case e.Read && e.Half == 2:
		v = rmwValue(e.Op, join64(c.readOf(w-1), old), in.Val)
	case e.Read:
		v = rmwValue(e.Op, old, in.Val)
	}
	if e.Half == 2 {
		return hi32(v)
	}
	return lo32(v)
}

func (c *checker) regValue(r int) int64 {
	if c.evs[r].Op.poll() {
		return c.regConst[r]
	}
	if c.evs[r].Half == 1 { // a 64-bit read of a split word: both halves, as one value
		return join64(c.readOf(r), c.readOf(r+1))
	}
	if c.evs[r].Write { // read-modify-write: the register holds the old value
		l := c.locs[c.locOf[c.evs[r].Loc]]
		if c.src[r] < 0 {
			return l.init
		}
		return c.val[c.src[r]]
	}
	return c.val[r]
}

func (c *checker) record() {
	s := State{}
	for i := range c.evs {
		if c.evs[i].Reg != "" {
			s[regKey(c.evs[i].PE, c.evs[i].Reg)] = c.regValue(i)
		}
	}
	for li, l := range c.locs {
		v := l.init
		if n := len(c.co[li]); n > 0 {
			v = c.val[c.co[li][n-1]]
		}
		s[l.loc.String()] = v
	}
	for l := range c.split {
		s[l.String()] = join64(s[l.halfLoc(1).String()], s[l.halfLoc(2).String()])
	}
	k := s.format(c.keys)
	if _, ok := c.states[k]; !ok {
		proj := State{}
		for _, key := range c.keys {
			proj[key] = s[key]
		}
		c.states[k] = proj
	}
	if c.fn != nil {
		c.fn(c.execution(s))
	}
}

func (c *checker) execution(s State) *Execution {
	x := &Execution{Events: append([]Event(nil), c.evs...), Ord: c.ord, Values: map[int]int64{}, Final: s}
	for i := range c.evs {
		for j := i + 1; j < len(c.evs); j++ {
			if sameThread(&c.evs[i], &c.evs[j]) {
				x.PO = append(x.PO, [2]int{i, j})
			}
		}
		if c.evs[i].Read && c.evs[i].Write {
			x.RMW = append(x.RMW, i)
		}
		if c.evs[i].Read {
			x.RF = append(x.RF, [2]int{c.src[i], i})
			x.Values[i] = c.regValue(i)
			pos := -1
			if c.src[i] >= 0 {
				pos = c.coPos[c.src[i]]
			}
			for _, w := range c.co[c.locOf[c.evs[i].Loc]][pos+1:] {
				if w != i {
					x.FR = append(x.FR, [2]int{i, w})
				}
			}
		}
		if c.evs[i].Write {
			x.Values[i] = c.val[i]
		}
	}
	for li := range c.locs {
		prev := -1
		for _, w := range c.co[li] {
			x.CO = append(x.CO, [2]int{prev, w})
			prev = w
		}
	}
	return x
}

// ctxFence reports whether a fence between a and b (a before b in column col) orders them: a
// fence on a context orders that context's deliveries; plain stores count as the default
// context's (FenceOrdersStores).
func (c *checker) ctxFence(col Column, a, b *Event) bool {
	ctxOf := func(e *Event) string {
		if e.plainAccess() {
			return ""
		}
		return e.Ctx
	}
	if ctxOf(a) != ctxOf(b) {
		return false
	}
	return c.between(col, a, b, func(in Instr) bool { return in.Op == OpFence && in.Ctx == ctxOf(a) })
}

// completedAt is the index of the first instruction after a in col that completes it: a quiet
// on a's context, or any quiet but a NOSTORE context's for a plain access (shmem_ctx_quiet also
// completes the PE's memory stores), a pe_quiet only for operations to its PEs; a barrier for a
// plain access or an operation on the default context (barrier_all completes the default
// context). len(col.Instrs) when none does.
func (c *checker) completedAt(col Column, a *Event) int {
	for k := a.Index + 1; k < len(col.Instrs); k++ {
		switch in := col.Instrs[k]; {
		case in.Op == OpQuiet && (in.Ctx == a.Ctx || a.plainAccess() && !slices.Contains(c.t.NoStore, in.Ctx)) &&
			in.covers(target(a, col.Instrs[a.Index])):
			return k
		case in.Op == OpBarrier && (a.plainAccess() || a.Ctx == ""):
			return k
		}
	}
	return len(col.Instrs)
}

// between reports whether an instruction satisfying match lies strictly between a and b in col
// (a put-with-signal's two events are one instruction: nothing lies between them).
func (c *checker) between(col Column, a, b *Event, match func(Instr) bool) bool {
	for k := a.Index + 1; k < b.Index; k++ {
		if match(col.Instrs[k]) {
			return true
		}
	}
	return false
}
