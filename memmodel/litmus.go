package memmodel

import (
	"fmt"
	"slices"
)

// Op is a litmus instruction: one API call or one plain access.
type Op int

// The instructions of the litmus language (LITMUS.md).
const (
	OpSt        Op = iota // st x v: plain store to the PE's own copy, through its caches
	OpLd                  // ld r x: plain load of the PE's own copy, through its caches
	OpPut                 // put x@q v: blocking put
	OpPutNBI              // put_nbi x@q v
	OpGet                 // get r x@q: blocking get
	OpGetNBI              // get_nbi r x@q: value defined after the next quiet
	OpFAdd                // fadd r x@q v: fetching atomic add
	OpSwap                // swap r x@q v
	OpCSwap               // cswap r x@q c n
	OpFetch               // fetch r x@q: atomic fetch
	OpAdd                 // add x@q v: non-fetching atomic add
	OpSet                 // set x@q v: non-fetching atomic set
	OpPutSig              // putsig x@q v s@q set|add k
	OpWait                // wait x OP v: wait_until on the PE's own copy
	OpFence               // fence
	OpQuiet               // quiet
	OpBarrier             // barrier (barrier_all over the PEs that run code)
	OpSync                // sync (sync_all: every PE arrives, nothing is completed)
	OpSigFetch            // sigfetch r s: signal_fetch of the PE's own signal word
	OpInc                 // inc x@q: atomic_inc
	OpFInc                // finc r x@q: atomic_fetch_inc
	OpAnd                 // and x@q v: atomic_and
	OpOr                  // or x@q v
	OpXor                 // xor x@q v
	OpFAnd                // fand r x@q v: atomic_fetch_and
	OpFOr                 // for r x@q v
	OpFXor                // fxor r x@q v
	OpAllReduce           // allreduce [{TEAM}]: an all-reduce over the team, as ordering only
	OpBroadcast           // broadcast ROOT [{TEAM}]: a broadcast from ROOT, as ordering only
	OpWaitAll             // wait_all x,y OP v[,w]: wait_until_all (a vector form with one value per word)
	OpWaitAny             // wait_any r x,y OP v[,w]: wait_until_any; r the index returned
	OpWaitSome            // wait_some r x,y OP v[,w]: wait_until_some; r the indices returned, as a bit mask
	OpTest                // test r x OP v: r is 1 if the comparison holds, else 0
	OpTestAll             // test_all r x,y OP v[,w]
	OpTestAny             // test_any r x,y OP v[,w]: r the index returned, -1 for none
	OpTestSome            // test_some r x,y OP v[,w]: r the indices returned, as a bit mask
)

var opNames = [...]string{"st", "ld", "put", "put_nbi", "get", "get_nbi", "fadd", "swap", "cswap",
	"fetch", "add", "set", "putsig", "wait", "fence", "quiet", "barrier", "sync", "sigfetch",
	"inc", "finc", "and", "or", "xor", "fand", "for", "fxor", "allreduce", "broadcast", "wait_all",
	"wait_any", "wait_some", "test", "test_all", "test_any", "test_some"}

// poll reports whether o is one of the wait_until_all/any/some and test families: one read per
// word, the outcome chosen among those the call may return.
func (o Op) poll() bool { return o >= OpWaitAll && o <= OpTestSome }

// collective reports whether o is a barrier, sync, all-reduce or broadcast.
func (o Op) collective() bool {
	return o == OpBarrier || o == OpSync || o == OpAllReduce || o == OpBroadcast
}

// rmwValue is what an RMW (other than cswap and put-with-signal) writes, given the value read.
func rmwValue(op Op, read, v int64) int64 {
	switch op {
	case OpFAdd, OpAdd:
		return read + v
	case OpInc, OpFInc:
		return read + 1
	case OpAnd, OpFAnd:
		return read & v
	case OpOr, OpFOr:
		return read | v
	case OpXor, OpFXor:
		return read ^ v
	}
	return v // swap
}

func (o Op) String() string {
	if o >= 0 && int(o) < len(opNames) {
		return opNames[o]
	}
	return fmt.Sprintf("Op(%d)", int(o))
}

// Cmp is a wait_until comparison.
type Cmp int

// The comparisons of wait_until.
const (
	CmpEQ Cmp = iota
	CmpNE
	CmpLT
	CmpLE
	CmpGT
	CmpGE
)

var cmpNames = [...]string{"==", "!=", "<", "<=", ">", ">="}

func (c Cmp) String() string {
	if c >= 0 && int(c) < len(cmpNames) {
		return cmpNames[c]
	}
	return fmt.Sprintf("Cmp(%d)", int(c))
}

// Holds reports whether v OP want.
func (c Cmp) Holds(v, want int64) bool {
	switch c {
	case CmpEQ:
		return v == want
	case CmpNE:
		return v != want
	case CmpLT:
		return v < want
	case CmpLE:
		return v <= want
	case CmpGT:
		return v > want
	case CmpGE:
		return v >= want
	}
	return false
}

// SigOp is how put-with-signal updates the signal word.
type SigOp int

// Signal updates.
const (
	SigSet SigOp = iota
	SigAdd
)

func (s SigOp) String() string {
	if s == SigAdd {
		return "add"
	}
	return "set"
}

// Loc is a symmetric variable in one PE's heap: x@PE.
type Loc struct {
	Var string
	PE  int
}

func (l Loc) String() string { return fmt.Sprintf("%s@%d", l.Var, l.PE) }

// Instr is one instruction of a PE's column. Fields an Op does not use are zero.
type Instr struct {
	Op    Op
	Reg   string // destination register (ld, get, get_nbi, fadd, swap, cswap, fetch)
	Loc   Loc    // accessed variable; for st, ld and wait the PE's own copy
	Val   int64  // stored/put/operand value; cswap's compare value; wait's operand
	New   int64  // cswap's new value; putsig's signal value
	Sig   Loc    // putsig's signal word
	SigOp SigOp  // putsig's signal update
	Cmp   Cmp    // wait's comparison
	Ctx   string // communication context ("on NAME"); "" is the default context
	NBI   bool   // a fetching AMO's or put-with-signal's non-blocking form (fadd_nbi, putsig_nbi)
	Team  []int  // barrier, sync, allreduce, broadcast: the team's PEs (nil: every PE)
	Root  int    // broadcast's root PE
	Locs  []Loc  // wait_all ... test_some: the PE's own words, in order
	Vals  []int64
	// Vals: the compare values of wait_all ... test_some, one for every word or one per word
	// (the vector forms)
	Src Loc // put_nbi from a buffer: the PE's own source variable (Var "" for an immediate Val)
	Dst Loc // get, get_nbi into a location: the PE's own destination (Var "" for a register)
	// Call: the API call an instruction of callVariants names (alltoall, signal_wait ...), whose
	// events are those of Op's; "" for Op's own call
	Call string
	// Regs: a get of several elements (get r0,r1 x,y@q; iget): one register per element of Locs,
	// which then holds the elements (put x,y@q v,w and iput too, Vals their values)
	Regs []string
	PEs  []int // pe_quiet's PEs: the quiet completes the operations to these only
}

// elems reports whether in is a put or get of several elements (put x,y@q, get r0,r1 x,y@q,
// iput, iget): one event per element, in no order among themselves.
func (in Instr) elems() bool { return (in.Op == OpPut || in.Op == OpGet) && len(in.Locs) > 0 }

// element is the single-element put or get that element k of a multi-element one is.
func (in Instr) element(k int) Instr {
	e := in
	e.Loc, e.Locs, e.Vals, e.Regs = in.Locs[k], nil, nil, nil
	if in.Op == OpPut {
		e.Val = in.Vals[k]
	} else {
		e.Reg = in.Regs[k]
	}
	return e
}

// writes reports whether in writes a PE's memory through its context: the calls a NOSTORE
// context refuses (puts, put-with-signal, every AMO but fetch).
func (in Instr) writes() bool {
	switch in.Op {
	case OpPut, OpPutNBI, OpPutSig, OpAdd, OpSet, OpInc, OpAnd, OpOr, OpXor, OpFAdd, OpSwap, OpCSwap, OpFInc, OpFAnd, OpFOr, OpFXor:
		return true
	}
	return false
}

// regs lists the registers in writes.
func (in Instr) regs() []string {
	if in.Reg != "" {
		return []string{in.Reg}
	}
	return in.Regs
}

// covers reports whether in, a quiet, completes an operation to PE target: a pe_quiet only
// those to its PEs.
func (in Instr) covers(target int) bool { return in.PEs == nil || slices.Contains(in.PEs, target) }

// callVariants are API calls the model states as another instruction's events, written by their
// own names so that runners make the call: collectives in which every member's output depends on
// every member's input order memory as all-reduce does; shmem_signal_wait_until is a wait on the
// signal word; shmem_ctx_destroy completes the context's operations as its quiet does.
var callVariants = map[string]Op{
	"alltoall": OpAllReduce, "alltoalls": OpAllReduce, "collect": OpAllReduce, "fcollect": OpAllReduce,
	"reduce_scatter": OpAllReduce, "signal_wait": OpWait, "ctx_destroy": OpQuiet,
	// shmem_malloc, calloc, realloc, align and free end with a barrier_all (shmem/alloc.go: quiet,
	// then the barrier)
	"malloc": OpBarrier, "calloc": OpBarrier, "realloc": OpBarrier, "align": OpBarrier, "free": OpBarrier,
	// strided puts and gets: several elements, as a put or get of several elements
	"iput": OpPut, "iget": OpGet,
	"pe_quiet": OpQuiet, // shmem_pe_quiet {PEs}: a quiet of the operations to those PEs
}

// deviceVariants are calls of the device library (roxamen/roxshmem.h) with no host counterpart, as
// call variants (feature device_calls). A warp or block variant (roxshmemx_putmem_warp ...) is the
// same call made by every thread of the group together: the group moves the elements between
// them and synchronizes, and each element is the same memory event the thread form would issue,
// issued by the PE in the column's order; the group's own synchronization orders nothing across
// PEs. put_ce is a put the copy engine performs (roxshmemx_putmem_ce): a put event all the same.
// barrier_all_block and sync_all_block are barrier_all and sync_all made by one block per PE; the
// team forms (barrier_warp {team} ...) are a team's barrier and sync.
var deviceVariants = map[string]Op{
	"put_warp": OpPut, "put_block": OpPut, "put_nbi_warp": OpPutNBI, "put_nbi_block": OpPutNBI,
	"get_warp": OpGet, "get_block": OpGet, "get_nbi_warp": OpGetNBI, "get_nbi_block": OpGetNBI,
	"putsig_warp": OpPutSig, "putsig_block": OpPutSig, "putsig_nbi_warp": OpPutSig, "putsig_nbi_block": OpPutSig,
	"quiet_warp": OpQuiet, "quiet_block": OpQuiet,
	"put_ce": OpPut, "put_ce_nbi": OpPutNBI, "put_ce_block": OpPut, "put_ce_nbi_block": OpPutNBI,
	"barrier_warp": OpBarrier, "barrier_block": OpBarrier, "sync_warp": OpSync, "sync_block": OpSync,
	"barrier_all_block": OpBarrier, "sync_all_block": OpSync,
	"broadcast_warp": OpBroadcast, "broadcast_block": OpBroadcast,
	"allreduce_warp": OpAllReduce, "allreduce_block": OpAllReduce,
	"alltoall_warp": OpAllReduce, "alltoall_block": OpAllReduce, "collect_warp": OpAllReduce, "collect_block": OpAllReduce,
	"fcollect_warp": OpAllReduce, "fcollect_block": OpAllReduce,
	"reduce_scatter_warp": OpAllReduce, "reduce_scatter_block": OpAllReduce,
}

// DeviceCall reports whether name is a device library call variant (deviceVariants).
func DeviceCall(name string) bool { _, ok := deviceVariants[name]; return ok }

// name is the instruction's name: its call variant's, or its operation's.
func (in Instr) name() string {
	if in.Call != "" {
		return in.Call
	}
	return in.Op.String()
}

// Column is the code one PE runs, or one thread of a PE (header PEn.t): the threads of a PE share
// its memory and its registers' names, and each orders only its own operations.
type Column struct {
	PE     int
	Thread int
	Instrs []Instr
}

// Threaded reports whether some PE of t runs several threads.
func (t *Test) Threaded() bool {
	for _, c := range t.Columns {
		if c.Thread != 0 {
			return true
		}
	}
	return false
}

// InitVal gives a variable a non-zero start value.
type InitVal struct {
	Loc Loc
	Val int64
}

// Quant is the quantifier of a final condition.
type Quant int

// Quantifiers, as in herd.
const (
	Exists Quant = iota
	NotExists
	Forall
)

func (q Quant) String() string {
	switch q {
	case NotExists:
		return "~exists"
	case Forall:
		return "forall"
	}
	return "exists"
}

// PropKind says what a Prop node is.
type PropKind int

// Proposition nodes.
const (
	PropTrue PropKind = iota
	PropFalse
	PropReg // PE:Reg = Val
	PropMem // Loc = Val
	PropNot
	PropAnd
	PropOr
)

// Prop is a proposition over final register and memory values.
type Prop struct {
	Kind PropKind
	PE   int    // PropReg
	Reg  string // PropReg
	Loc  Loc    // PropMem
	Val  int64  // PropReg, PropMem
	Args []Prop // PropNot (one), PropAnd, PropOr (two or more)
}

// Verdict is what the model says about a test's condition in one mode.
type Verdict int

// Verdicts. Allowed: some execution the mode allows satisfies the condition's proposition.
const (
	VerdictNone Verdict = iota // no expectation given
	Allowed
	Forbidden
)

func (v Verdict) String() string {
	switch v {
	case Allowed:
		return "Allowed"
	case Forbidden:
		return "Forbidden"
	}
	return "None"
}

// Test is one litmus test.
type Test struct {
	Name    string
	Init    []InitVal // sorted by location
	Columns []Column
	Quant   Quant
	Cond    Prop
	// NoStore names the contexts made with SHMEM_CTX_NOSTORE (init block: nostore NAME): no write
	// is issued on them, and their quiet need not complete the PE's memory stores.
	NoStore []string
	// Expect holds the expected verdict per mode (VerdictNone when the test has no expect line).
	ExpectStrict, ExpectBypass Verdict
}

// Expect returns the expected verdict in mode m.
func (t *Test) Expect(m Mode) Verdict {
	if m == Bypass {
		return t.ExpectBypass
	}
	return t.ExpectStrict
}

// Mode selects the axioms.
type Mode int

// The two modes of the model.
const (
	Strict Mode = iota
	Bypass
)

func (m Mode) String() string {
	if m == Bypass {
		return "bypass"
	}
	return "strict"
}

// ParseMode reads "strict" or "bypass".
func ParseMode(s string) (Mode, error) {
	switch s {
	case "strict":
		return Strict, nil
	case "bypass":
		return Bypass, nil
	}
	return 0, fmt.Errorf("memmodel: unknown mode %q (want strict or bypass)", s)
}

// Eval evaluates p against final register values regs (key "PE:reg") and memory mem.
func (p *Prop) Eval(regs map[string]int64, mem map[Loc]int64) bool {
	switch p.Kind {
	case PropTrue:
		return true
	case PropFalse:
		return false
	case PropReg:
		return regs[regKey(p.PE, p.Reg)] == p.Val
	case PropMem:
		return mem[p.Loc] == p.Val
	case PropNot:
		return !p.Args[0].Eval(regs, mem)
	case PropAnd:
		for i := range p.Args {
			if !p.Args[i].Eval(regs, mem) {
				return false
			}
		}
		return true
	case PropOr:
		for i := range p.Args {
			if p.Args[i].Eval(regs, mem) {
				return true
			}
		}
		return false
	}
	return false
}

func regKey(pe int, reg string) string { return fmt.Sprintf("%d:%s", pe, reg) }
