package memmodel

import (
	"fmt"
	"sort"
	"strings"
)

// Options are the interpretation choices the OpenSHMEM specification leaves open. DefaultOptions
// documents the defaults; MODEL.md explains each.
type Options struct {
	// FenceOrdersStores: fence orders the PE's prior plain stores before its later deliveries to the
	// same PE (OpenSHMEM 1.5's fence orders "memory store operations"; default true).
	FenceOrdersStores bool
	// BlockingFetchOrders: a blocking get or fetching AMO is performed before any later operation of
	// the PE (OpenSHMEM: the value is returned before the call returns; default true). False is
	// NVSHMEM's reading, under which only fence/quiet order them.
	BlockingFetchOrders bool
	// AtomicAllWrites: AMOs are atomic with respect to every write, not only other AMOs (default
	// false: OpenSHMEM promises atomicity only among AMOs).
	AtomicAllWrites bool
	// SameWidthAtomicity: an AMO is atomic only with AMOs of its own width on the same bytes
	// (OpenSHMEM's letter: atomicity among AMOs of the same datatype), so a 32-bit AMO on a half
	// of a word may land between a 64-bit AMO's read and write of it. Default false: AMOs of both
	// widths are atomic with each other, as every backend's are (MODEL.md §3b, Mixed-width
	// atomicity).
	SameWidthAtomicity bool
}

// DefaultOptions returns the documented defaults.
func DefaultOptions() Options {
	return Options{FenceOrdersStores: true, BlockingFetchOrders: true}
}

// Event is one memory access of a candidate execution. Fence, quiet and barrier are events too
// (no location), so that po lists them.
type Event struct {
	ID    int
	PE    int    // the PE whose column issues it
	Index int    // instruction index in that column
	Op    Op     // the instruction it comes from
	Part  int    // putsig: 0 the data write, 1 the signal update
	Loc   Loc    // accessed location (memory events)
	Plain bool   // through the issuing PE's caches (st, ld)
	Read  bool   // reads Loc
	Write bool   // writes Loc (a failed cswap does not)
	AMO   bool   // an atomic memory operation (atomic among AMOs)
	Reg   string // register receiving the value read
	Ctx   string // communication context ("" the default one)
	NBI   bool   // a fetching AMO's non-blocking form: not a blocking fetch
	Buf   bool   // the read of a put_nbi's source buffer: through the PE's caches, but performed
	// any time up to the put's completion (so not ordered before the PE's later stores to it)
	Flow bool // writes the value that the event before it (the same instruction's read) read
	Acq  bool // wait_all ... test_some: the outcome chosen acquires (set per candidate)
	// Thread: the issuing thread of the PE (columns PEn.t); program order is per thread
	Thread int
	// Half: 1 or 2 for the low or high half of a 64-bit access to a split word (width.go); the
	// two are one access (they share their instants), the high half is the event right after the
	// low one, and the register goes with the low half
	Half int
}

// sameWidth reports whether a and b are accesses of one width: both 32-bit (on a half, as a
// half of nothing wider) or both 64-bit.
func sameWidth(a, b *Event) bool {
	return (a.Half != 0 || a.Loc.half() == 0) == (b.Half != 0 || b.Loc.half() == 0)
}

// wide reports whether a and b are the two halves of one 64-bit access.
func wide(a, b *Event) bool {
	return a.Half != 0 && b.Half != 0 && a.Half != b.Half && (a.ID-b.ID == 1 || b.ID-a.ID == 1) &&
		sameThread(a, b) && a.Index == b.Index && a.Part == b.Part
}

// target is the PE an event's call is issued to: a put's read of its source buffer and a get's
// write of its destination belong to a call to in's PE.
func target(e *Event, in Instr) int {
	if (e.Buf || e.dst()) && in.Loc.Var != "" {
		return in.Loc.PE
	}
	return e.Loc.PE
}

// sameThread: a and b come from one column.
func sameThread(a, b *Event) bool { return a.PE == b.PE && a.Thread == b.Thread }

func (e *Event) memory() bool { return e.Read || e.Write || e.Op == OpCSwap }

// plainAccess: a plain load or store, which any quiet and barrier complete; a put's source read
// is completed with its put.
func (e *Event) plainAccess() bool { return e.Plain && !e.Buf }

// dst: the write of a get's destination (a get into a location).
func (e *Event) dst() bool { return e.Flow && (e.Op == OpGet || e.Op == OpGetNBI) }

// delivery reports whether fence orders the event's delivery to its target PE.
func (e *Event) delivery(o Options) bool {
	switch e.Op {
	case OpPutNBI:
		return !e.Buf
	case OpPut, OpFAdd, OpSwap, OpCSwap, OpFetch, OpAdd, OpSet, OpPutSig,
		OpInc, OpFInc, OpAnd, OpOr, OpXor, OpFAnd, OpFOr, OpFXor:
		return true
	case OpSt:
		return o.FenceOrdersStores
	}
	return false
}

func (e *Event) blockingFetch() bool {
	if e.NBI {
		return false
	}
	switch e.Op {
	case OpGet, OpFAdd, OpSwap, OpCSwap, OpFetch, OpFInc, OpFAnd, OpFOr, OpFXor:
		return true
	}
	return false
}

func (e *Event) String() string {
	s := fmt.Sprintf("e%d:PE%d.%d %s", e.ID, e.PE, e.Index, e.Op)
	if e.Op == OpPutSig {
		s += []string{"(data)", "(signal)"}[e.Part]
	}
	if e.memory() {
		s += " " + e.Loc.String()
	}
	return s
}

// Execution is one candidate execution the mode allows, with its relations as event-ID pairs.
type Execution struct {
	Events []Event
	PO     [][2]int      // program order (transitive), per PE
	RF     [][2]int      // reads-from; source -1 is the initial value
	CO     [][2]int      // coherence order, per location (immediate pairs; -1 is the initial value)
	FR     [][2]int      // from-reads
	RMW    []int         // events that read and write atomically
	Ord    [][2]int      // API-preserved order (event pairs some preserved-order rule relates)
	Values map[int]int64 // value read by each reading event, value written by each writing event
	Final  State
}

// State is a final state: registers "PE:reg" and memory "x@PE" to values.
type State map[string]int64

// format writes s herd-style, with keys in the order given.
func (s State) format(keys []string) string {
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%d; ", k, s[k])
	}
	return strings.TrimSuffix(b.String(), " ")
}

// StateKeys lists what a final state of t records: every register, then every location the
// condition names.
func StateKeys(t *Test) []string {
	var regs []string
	type rk struct {
		pe  int
		reg string
	}
	var rs []rk
	for _, c := range t.Columns {
		for _, in := range c.Instrs {
			for _, r := range in.regs() {
				rs = append(rs, rk{c.PE, r})
			}
		}
	}
	sort.Slice(rs, func(i, j int) bool {
		if rs[i].pe != rs[j].pe {
			return rs[i].pe < rs[j].pe
		}
		return rs[i].reg < rs[j].reg
	})
	for _, r := range rs {
		regs = append(regs, regKey(r.pe, r.reg))
	}
	locs := condLocs(t)
	for _, l := range locs {
		regs = append(regs, l.String())
	}
	return regs
}

func condLocs(t *Test) []Loc {
	seen := map[Loc]bool{}
	var locs []Loc
	var walk func(p *Prop)
	walk = func(p *Prop) {
		if p.Kind == PropMem && !seen[p.Loc] {
			seen[p.Loc] = true
			locs = append(locs, p.Loc)
		}
		for i := range p.Args {
			walk(&p.Args[i])
		}
	}
	walk(&t.Cond)
	sort.Slice(locs, func(i, j int) bool { return locLess(locs[i], locs[j]) })
	return locs
}

// EvalState evaluates the test's condition proposition on a final state.
func (t *Test) EvalState(s State) bool {
	regs := map[string]int64{}
	mem := map[Loc]int64{}
	for k, v := range s {
		regs[k] = v
	}
	for _, l := range condLocs(t) {
		mem[l] = s[l.String()]
	}
	return t.Cond.Eval(regs, mem)
}

// Events lists the events of t's instructions in column order.
func Events(t *Test) []Event {
	var evs []Event
	thread := 0
	split := splitWords(t)
	add := func(e Event) {
		if e.memory() && split[e.Loc] { // a 64-bit access to a split word: one event per half
			w := e.Loc
			e.Loc, e.Half = w.halfLoc(1), 1
			e.ID, e.Thread = len(evs), thread
			evs = append(evs, e)
			e.Loc, e.Half, e.Reg = w.halfLoc(2), 2, ""
		}
		e.ID, e.Thread = len(evs), thread
		evs = append(evs, e)
	}
	for _, c := range t.Columns {
		thread = c.Thread
		for i, in := range c.Instrs {
			e := Event{PE: c.PE, Index: i, Op: in.Op, Loc: in.Loc, Reg: in.Reg, Ctx: in.Ctx, NBI: in.NBI}
			switch {
			case in.Op.poll(): // one read per word; the register goes with the first
				for k, l := range in.Locs {
					e.Part, e.Loc, e.Read = k, l, true
					if k > 0 {
						e.Reg = ""
					}
					add(e)
				}
				continue
			case in.elems(): // one event per element, in no order among themselves
				for k := range in.Locs {
					el := in.element(k)
					add(Event{PE: c.PE, Index: i, Op: in.Op, Part: k, Loc: el.Loc, Reg: el.Reg, Read: in.Op == OpGet, Write: in.Op == OpPut, Ctx: in.Ctx})
				}
				continue
			case in.Op == OpPutNBI && in.Src.Var != "": // the source buffer's read, then the put
				add(Event{PE: c.PE, Index: i, Op: in.Op, Loc: in.Src, Plain: true, Read: true, Buf: true, Ctx: in.Ctx})
				add(Event{PE: c.PE, Index: i, Op: in.Op, Part: 1, Loc: in.Loc, Write: true, Flow: true, Ctx: in.Ctx})
				continue
			case (in.Op == OpGet || in.Op == OpGetNBI) && in.Dst.Var != "": // the read, then the destination's write
				add(Event{PE: c.PE, Index: i, Op: in.Op, Loc: in.Loc, Read: true, Ctx: in.Ctx})
				add(Event{PE: c.PE, Index: i, Op: in.Op, Part: 1, Loc: in.Dst, Write: true, Flow: true, Ctx: in.Ctx})
				continue
			}
			switch in.Op {
			case OpSt:
				e.Plain, e.Write = true, true
			case OpLd:
				e.Plain, e.Read = true, true
			case OpPut, OpPutNBI:
				e.Write = true
			case OpGet, OpGetNBI, OpWait:
				e.Read = true
			case OpFAdd, OpSwap, OpCSwap, OpAdd, OpInc, OpFInc, OpAnd, OpOr, OpXor, OpFAnd, OpFOr, OpFXor:
				e.Read, e.Write, e.AMO = true, true, true
			case OpFetch, OpSigFetch: // signal_fetch: an atomic read of the own signal word, relaxed
				e.Read, e.AMO = true, true
			case OpSet:
				e.Write, e.AMO = true, true
			case OpPutSig:
				e.Write = true
				add(e)
				e = Event{PE: c.PE, Index: i, Op: in.Op, Part: 1, Loc: in.Sig, Write: true, AMO: true, Ctx: in.Ctx}
				e.Read = in.SigOp == SigAdd
			}
			add(e)
		}
	}
	return evs
}
