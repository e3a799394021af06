package kernels

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"
)

// The team collectives' CPU harness: testdata/coll_pe.cc (the device library's collectives built
// for the CPU) loaded once per PE with purego, 8 PEs on one "node" whose heaps are plain memory
// every PE maps, each PE's group (warp, block) a set of OS threads. Every collective runs against
// a reference computed here.

const (
	chPEs     = 8
	chThreads = 4 // threads of a PE's group at warp and block level (a power of two)
	chHeap    = 4 << 20
	chSrc     = 0       // sources
	chDst     = 1 << 20 // destinations (guarded by poison)
	chWSBase  = 3 << 20 // team workspaces, one per slot
	chWS      = TeamWSData + 2*16<<10
	chPoison  = 0xa7
)

// the teams of the harness: world, shared (= world here), strided ones of 3, 5 and 1 members
var chTeams = []struct {
	name                string
	start, stride, size int
}{
	{"world", 0, 1, chPEs}, {"shared", 0, 1, chPEs}, {"strided3", 1, 2, 3}, {"strided5", 2, 1, 5}, {"single", 7, 1, 1},
}

type collPE struct {
	setState   func(s *State)
	setThreads func(n uint32)
	call       func(tid uint32, coll, typ, op, level, team int32, dest, src uintptr, n uint64, root int32) int32
	batch      func(tid uint32, calls *roxCall, n int32)
	myPE       func(team int32) int32
	nPEs       func(team int32) int32
	translate  func(a, pe, b int32) int32
	nTypes     func() int32
	typeName   func(i int32) string
	state      State
	table      *TeamTable
	abort      *Abort
}

type collNode struct {
	heaps [][]byte
	pes   []*collPE
}

func newCollNode(t *testing.T) *collNode {
	t.Helper()
	so := BuildHostLib(t, "testdata/coll_pe.cc", "-O1")
	nd := &collNode{}
	for p := 0; p < chPEs; p++ {
		nd.heaps = append(nd.heaps, HostMem(t, chHeap))
	}
	ctl := HostMem(t, chPEs*(int(unsafe.Sizeof(TeamTable{}))+64))
	for p := 0; p < chPEs; p++ {
		pe := &collPE{}
		OpenHostPE(t, so, p, map[string]any{"rox_set_state": &pe.setState, "rox_set_threads": &pe.setThreads, "rox_coll": &pe.call, "rox_batch": &pe.batch,
			"rox_team_my_pe": &pe.myPE, "rox_team_n_pes": &pe.nPEs, "rox_team_translate_pe": &pe.translate,
			"rox_n_types": &pe.nTypes, "rox_type_name": &pe.typeName})
		off := p * (int(unsafe.Sizeof(TeamTable{})) + 64)
		pe.table = (*TeamTable)(unsafe.Pointer(&ctl[off]))
		pe.abort = (*Abort)(unsafe.Pointer(&ctl[off+int(unsafe.Sizeof(TeamTable{}))]))
		pe.table.Magic, pe.table.NTeams = TeamMagic, uint32(len(chTeams))
		pe.table.OneshotMax = 4096 // the grid form's direct path from 4 KiB, so the harness's sizes reach it
		for slot, tm := range chTeams {
			d := &pe.table.Team[slot]
			*d = TeamDesc{Start: int32(tm.start), Stride: int32(tm.stride), Size: int32(tm.size), MyIndex: -1,
				WSOff: uint64(chWSBase + slot*chWS), WSBytes: chWS}
			if i := p - tm.start; i >= 0 && i%tm.stride == 0 && i/tm.stride < tm.size {
				d.MyIndex = int32(i / tm.stride)
			}
		}
		pe.state = State{Magic: StateMagic, Version: StateVersion, MyPE: int32(p), NPEs: chPEs, HeapBase: HostAddr(nd.heaps[p]),
			HeapSize: chHeap, Abort: uint64(uintptr(unsafe.Pointer(pe.abort))), Teams: uint64(uintptr(unsafe.Pointer(pe.table)))}
		for q := 0; q < chPEs; q++ {
			pe.state.PeerBase[q] = HostAddr(nd.heaps[q])
		}
		pe.setState(&pe.state)
		pe.setThreads(chThreads)
		nd.pes = append(nd.pes, pe)
	}
	return nd
}

func (nd *collNode) members(slot int) []int {
	tm := chTeams[slot]
	var m []int
	for i := 0; i < tm.size; i++ {
		m = append(m, tm.start+i*tm.stride)
	}
	return m
}

// collCall is one PE's arguments.
type collCall struct {
	coll, typ, op, level int32
	team                 int32
	dest, src            uintptr
	n                    uint64
	root                 int32
}

const (
	cBarrier = iota
	cSync
	cBcast
	cFcollect
	cCollect
	cAlltoall
	cReduce
	cReduceScatter
)

// run calls the collective on every PE of pes concurrently (args(pe) gives each one's call) and
// returns each PE's result. A run that does not end in HostWatchdog sets every abort word (the
// waits then give up) and fails.
func (nd *collNode) run(t *testing.T, pes []int, args func(pe int) collCall) map[int]int32 {
	t.Helper()
	var mu sync.Mutex
	res := map[int]int32{}
	calls := map[int]collCall{}
	for _, p := range pes {
		calls[p] = args(p)
	}
	threads := func(p int) int {
		if a := calls[p]; a.level == 0 || a.level == 3 {
			return 1
		}
		return chThreads
	}
	if !RunHostGroups(nd.aborts(), pes, threads, func(p, tid int) {
		a := calls[p]
		r := nd.pes[p].call(uint32(tid), a.coll, a.typ, a.op, a.level, a.team, a.dest, a.src, a.n, a.root)
		mu.Lock()
		defer mu.Unlock()
		if old, ok := res[p]; ok && old != r {
			t.Errorf("PE %d: threads of one group returned %d and %d", p, old, r)
		}
		res[p] = r
	}) {
		t.Fatalf("a collective did not finish in %v (abort word set to end it)", HostWatchdog)
	}
	return res
}

// aborts are the PEs' abort blocks.
func (nd *collNode) aborts() []*Abort {
	var a []*Abort
	for _, pe := range nd.pes {
		a = append(a, pe.abort)
	}
	return a
}

// roxCall is struct rox_call of coll_pe.cc: one call of a batch.
type roxCall struct {
	Coll, Type, Op, Level, Team, Root int32
	Dest, Src, N                      uint64
	Ret, Pad                          int32
}

// runBatch runs calls[pe] (in order) on every PE of pes, each PE's whole group at once; the
// results land in Ret.
func (nd *collNode) runBatch(t *testing.T, pes []int, calls map[int][]roxCall) {
	t.Helper()
	if !RunHostGroups(nd.aborts(), pes, func(int) int { return chThreads }, func(p, tid int) {
		nd.pes[p].batch(uint32(tid), &calls[p][0], int32(len(calls[p])))
	}) {
		t.Fatalf("a batch of collectives did not finish in %v (abort word set to end it): %s", HostWatchdog, nd.describe(pes, calls))
	}
}

// describe says where every PE of a stuck batch was: its results, abort record, and each team's
// round counter.
func (nd *collNode) describe(pes []int, calls map[int][]roxCall) string {
	var b bytes.Buffer
	for _, p := range pes {
		var rets []int32
		for _, c := range calls[p] {
			rets = append(rets, c.Ret)
		}
		r := DecodeAbortRecord(nd.pes[p].abort.First)
		fmt.Fprintf(&b, "\nPE %d: results %v, record %s PE %d detail %#x, rounds", p, rets, r.CallName(), r.PE, r.Detail)
		for slot := range chTeams {
			ws := nd.heaps[p][chWSBase+slot*chWS:]
			fmt.Fprintf(&b, " %d", binary.LittleEndian.Uint64(ws[TeamWSRound:]))
		}
	}
	if len(pes) > 0 && len(calls[pes[0]]) > 0 {
		c := calls[pes[0]][0]
		fmt.Fprintf(&b, "\nfirst call: coll %d type %d op %d level %d team %d", c.Coll, c.Type, c.Op, c.Level, c.Team)
	}
	return b.String()
}

func (nd *collNode) clearAborts() {
	for _, pe := range nd.pes {
		*pe.abort = Abort{}
	}
}

func (nd *collNode) setAlgo(a uint32) {
	for _, pe := range nd.pes {
		pe.table.CollAlgo = a
	}
}

// ---- the reference ------------------------------------------------------------------------

const (
	kSigned = iota
	kUnsigned
	kFloat
	kHalf
	kBF16
)

type collType struct {
	name    string
	size    int
	kind    int
	bitwise bool
}

// written out independently of testdata/coll_pe.cc's list (TestCollHost compares the two)
var collTypes = []collType{
	{"char", 1, kSigned, false}, {"schar", 1, kSigned, false}, {"short", 2, kSigned, false}, {"int", 4, kSigned, false},
	{"long", 8, kSigned, false}, {"longlong", 8, kSigned, false}, {"ptrdiff", 8, kSigned, false},
	{"uchar", 1, kUnsigned, true}, {"ushort", 2, kUnsigned, true}, {"uint", 4, kUnsigned, true}, {"ulong", 8, kUnsigned, true},
	{"ulonglong", 8, kUnsigned, true}, {"int8", 1, kSigned, true}, {"int16", 2, kSigned, true}, {"int32", 4, kSigned, true},
	{"int64", 8, kSigned, true}, {"uint8", 1, kUnsigned, true}, {"uint16", 2, kUnsigned, true}, {"uint32", 4, kUnsigned, true},
	{"uint64", 8, kUnsigned, true}, {"size", 8, kUnsigned, true}, {"float", 4, kFloat, false}, {"double", 8, kFloat, false},
	{"half", 2, kHalf, false}, {"bfloat16", 2, kBF16, false},
}

const (
	opSum = iota
	opProd
	opMin
	opMax
	opAnd
	opOr
	opXor
)

var opNames = []string{"sum", "prod", "min", "max", "and", "or", "xor"}

func (ty collType) ops() []int {
	switch {
	case ty.kind == kHalf || ty.kind == kBF16:
		return []int{opSum, opMin, opMax}
	case ty.bitwise:
		return []int{opSum, opProd, opMin, opMax, opAnd, opOr, opXor}
	}
	return []int{opSum, opProd, opMin, opMax}
}

// half and bfloat16 by scaling and rounding in float64 (a different method from the library's
// bit manipulation)
func halfToF32(h uint16) float32 {
	s, e, m := h>>15, int(h>>10&0x1f), float64(h&0x3ff)
	var v float64
	switch e {
	case 0:
		v = math.Ldexp(m, -24)
	case 31:
		if m != 0 {
			return float32(math.NaN())
		}
		v = math.Inf(1)
	default:
		v = math.Ldexp(1024+m, e-25)
	}
	if s != 0 {
		v = -v
	}
	return float32(v)
}

// roundTo rounds |f| to a binary format of mbits mantissa bits, smallest normal 2^emin, and
// returns the encoding without the sign (inf when it overflows past 2^emax+1).
func roundTo(a float64, mbits, emin, emax, bias int) uint16 {
	q := math.Ldexp(1, emin-mbits)
	if a >= math.Ldexp(1, emin) {
		_, e := math.Frexp(a)
		q = math.Ldexp(1, e-1-mbits)
	}
	r := math.RoundToEven(a/q) * q
	if r >= math.Ldexp(1, emax+1) {
		return uint16(((1 << (15 - mbits)) - 1) << mbits) // inf
	}
	if r < math.Ldexp(1, emin) {
		return uint16(r / math.Ldexp(1, emin-mbits))
	}
	fr, e := math.Frexp(r)
	return uint16(e-1+bias)<<mbits | uint16((fr*2-1)*float64(int(1)<<mbits))
}

func f32ToHalf(f float32) uint16 {
	sign := uint16(math.Float32bits(f)>>16) & 0x8000
	if f != f {
		return sign | 0x7e00
	}
	return sign | roundTo(math.Abs(float64(f)), 10, -14, 15, 15)
}

func bf16ToF32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

func f32ToBF16(f float32) uint16 {
	sign := uint16(math.Float32bits(f)>>16) & 0x8000
	if f != f {
		return sign | 0x7fc0
	}
	return sign | roundTo(math.Abs(float64(f)), 7, -126, 127, 127)
}

func getU(b []byte, size int) uint64 {
	var v uint64
	for k := size - 1; k >= 0; k-- {
		v = v<<8 | uint64(b[k])
	}
	return v
}

func putU(b []byte, size int, v uint64) {
	for k := 0; k < size; k++ {
		b[k] = byte(v >> (8 * k))
	}
}

func sext(v uint64, size int) int64 { return int64(v<<(64-8*size)) >> (64 - 8*size) }

// refReduce: element i = op(...op(in_0[i], in_1[i])..., in_{n-1}[i]), left to right.
func refReduce(ty collType, op int, ins [][]byte, cnt int) []byte {
	out := make([]byte, cnt*ty.size)
	for i := 0; i < cnt; i++ {
		at := i * ty.size
		switch ty.kind {
		case kSigned, kUnsigned:
			acc := getU(ins[0][at:], ty.size)
			for _, in := range ins[1:] {
				x := getU(in[at:], ty.size)
				switch op {
				case opSum:
					acc += x
				case opProd:
					acc *= x
				case opMin, opMax:
					less := x < acc
					if ty.kind == kSigned {
						less = sext(x, ty.size) < sext(acc, ty.size)
					}
					greater := x != acc && !less
					if (op == opMin && less) || (op == opMax && greater) {
						acc = x
					}
				case opAnd:
					acc &= x
				case opOr:
					acc |= x
				case opXor:
					acc ^= x
				}
			}
			putU(out[at:], ty.size, acc)
		case kFloat:
			if ty.size == 8 {
				acc := math.Float64frombits(getU(ins[0][at:], 8))
				for _, in := range ins[1:] {
					acc = fop(op, acc, math.Float64frombits(getU(in[at:], 8)))
				}
				putU(out[at:], 8, math.Float64bits(acc))
			} else {
				acc := math.Float32frombits(uint32(getU(ins[0][at:], 4)))
				for _, in := range ins[1:] {
					acc = fop(op, acc, math.Float32frombits(uint32(getU(in[at:], 4))))
				}
				putU(out[at:], 4, uint64(math.Float32bits(acc)))
			}
		default:
			to, from := halfToF32, f32ToHalf
			if ty.kind == kBF16 {
				to, from = bf16ToF32, f32ToBF16
			}
			acc := to(uint16(getU(ins[0][at:], 2)))
			for _, in := range ins[1:] {
				acc = fop(op, acc, to(uint16(getU(in[at:], 2))))
			}
			putU(out[at:], 2, uint64(from(acc)))
		}
	}
	return out
}

func fop[F float32 | float64](op int, a, b F) F {
	switch op {
	case opSum:
		return a + b
	case opProd:
		return a * b
	case opMin:
		if b < a {
			return b
		}
	case opMax:
		if b > a {
			return b
		}
	}
	return a
}

// sameElems compares element by element; for the float kinds any NaN equals any NaN (the payload
// a NaN carries through arithmetic is the hardware's choice).
func sameElems(ty collType, got, want []byte) (int, bool) {
	for i := 0; i < len(want)/ty.size; i++ {
		g, w := getU(got[i*ty.size:], ty.size), getU(want[i*ty.size:], ty.size)
		if g == w {
			continue
		}
		if isNaN(ty, g) && isNaN(ty, w) {
			continue
		}
		return i, false
	}
	return 0, true
}

func isNaN(ty collType, v uint64) bool {
	switch {
	case ty.kind == kFloat && ty.size == 4:
		f := math.Float32frombits(uint32(v))
		return f != f
	case ty.kind == kFloat:
		return math.IsNaN(math.Float64frombits(v))
	case ty.kind == kHalf:
		return v&0x7c00 == 0x7c00 && v&0x3ff != 0
	case ty.kind == kBF16:
		return v&0x7f80 == 0x7f80 && v&0x7f != 0
	}
	return false
}

// fill writes random elements of ty, with NaN, infinities and signed zeros among the floats.
func fill(rng *rand.Rand, ty collType, b []byte) {
	for i := 0; i+ty.size <= len(b); i += ty.size {
		v := rng.Uint64()
		if ty.kind != kSigned && ty.kind != kUnsigned && rng.IntN(8) == 0 {
			specials := map[int][]uint64{4: {0x7fc00000, 0x7f800000, 0xff800000, 0x80000000, 0},
				8: {0x7ff8000000000000, 0x7ff0000000000000, 0xfff0000000000000, 1 << 63, 0}}
			if ty.kind == kHalf {
				specials[2] = []uint64{0x7e00, 0x7c00, 0xfc00, 0x8000, 0}
			} else {
				specials[2] = []uint64{0x7fc0, 0x7f80, 0xff80, 0x8000, 0}
			}
			s := specials[ty.size]
			v = s[rng.IntN(len(s))]
		} else if ty.kind == kFloat && ty.size == 4 {
			v = uint64(math.Float32bits(float32(rng.NormFloat64() * 100)))
		} else if ty.kind == kFloat {
			v = math.Float64bits(rng.NormFloat64() * 1e6)
		}
		putU(b[i:], ty.size, v)
	}
	for i := len(b) / ty.size * ty.size; i < len(b); i++ {
		b[i] = byte(rng.Uint32())
	}
}

func (nd *collNode) at(pe, off int) uintptr { return uintptr(unsafe.Pointer(&nd.heaps[pe][off])) }

// poison fills dest..dest+n+64 of every PE.
func (nd *collNode) poison(off, n int) {
	for _, h := range nd.heaps {
		for i := off; i < off+n+64; i++ {
			h[i] = chPoison
		}
	}
}

// checkGuard: the 64 bytes after a destination of n bytes are untouched.
func (nd *collNode) checkGuard(t *testing.T, what string, pe, off, n int) {
	t.Helper()
	for i := off + n; i < off+n+64; i++ {
		if nd.heaps[pe][i] != chPoison {
			t.Errorf("%s: PE %d wrote byte %d past its destination", what, pe, i-off-n)
			return
		}
	}
}

func (nd *collNode) checkClean(t *testing.T, what string) {
	t.Helper()
	for p, pe := range nd.pes {
		if pe.abort.First != 0 {
			r := DecodeAbortRecord(pe.abort.First)
			t.Errorf("%s: PE %d recorded %s (PE %d, detail %#x)", what, p, r.CallName(), r.PE, r.Detail)
		}
	}
	nd.clearAborts()
}

var chSizes = []int{0, 1, 17, 4096 + 3}

func TestCollHost(t *testing.T) {
	nd := newCollNode(t)
	pe0 := nd.pes[0]
	if got := int(pe0.nTypes()); got != len(collTypes) {
		t.Fatalf("coll_pe.cc lists %d types, the test %d", got, len(collTypes))
	}
	for i, ty := range collTypes {
		if got := pe0.typeName(int32(i)); got != ty.name {
			t.Fatalf("type %d: coll_pe.cc says %q, the test %q", i, got, ty.name)
		}
	}
	t.Run("queries", func(t *testing.T) { collQueries(t, nd) })
	t.Run("barrier", func(t *testing.T) { collBarrier(t, nd) })
	t.Run("data", func(t *testing.T) { collData(t, nd) })
	t.Run("reduce", func(t *testing.T) { collReduce(t, nd, cReduce) })
	t.Run("reduce_scatter", func(t *testing.T) { collReduce(t, nd, cReduceScatter) })
	t.Run("reduce_scatter_ll", func(t *testing.T) { collReduceScatterLL(t, nd) })
	t.Run("errors", func(t *testing.T) { collErrors(t, nd) })
}

// collReduceScatterLL: a reduce-scatter of small blocks (200 bytes: the world team's slots here
// hold 256) takes the LL exchange, one push of each
// block and no round: it advances the team's round but announces it to no member (the rounds
// would leave every member's announcement of it in each workspace).
func collReduceScatterLL(t *testing.T, nd *collNode) {
	world := nd.members(0)
	res := nd.run(t, world, func(p int) collCall {
		return collCall{coll: cReduceScatter, typ: 3, op: opSum, level: 2, team: TeamWorld, dest: nd.at(p, chDst), src: nd.at(p, chSrc), n: 50}
	})
	for _, p := range world {
		if res[p] != 0 {
			t.Fatalf("PE %d returned %d", p, res[p])
		}
		ws := nd.heaps[p][chWSBase:]
		round := binary.LittleEndian.Uint64(ws[TeamWSRound:])
		for _, q := range world {
			if a := binary.LittleEndian.Uint64(ws[TeamWSArrive+8*q:]); q != p && a >= round {
				t.Errorf("PE %d: member %d announced round %d (the team's round is %d): the reduce-scatter of 200-byte blocks ran the rounds, not the LL exchange", p, q, a, round)
			}
		}
	}
	nd.checkClean(t, "reduce_scatter_ll")
}

func collQueries(t *testing.T, nd *collNode) {
	for p, pe := range nd.pes {
		for slot, tm := range chTeams {
			want := -1
			if i := p - tm.start; i >= 0 && i%tm.stride == 0 && i/tm.stride < tm.size {
				want = i / tm.stride
			}
			if got := pe.myPE(int32(slot)); int(got) != want {
				t.Errorf("PE %d: team_my_pe(%s) = %d, want %d", p, tm.name, got, want)
			}
			if got := pe.nPEs(int32(slot)); int(got) != tm.size {
				t.Errorf("PE %d: team_n_pes(%s) = %d, want %d", p, tm.name, got, tm.size)
			}
			for i := -1; i <= tm.size; i++ {
				want := -1
				if i >= 0 && i < tm.size {
					want = tm.start + i*tm.stride
				}
				if got := pe.translate(int32(slot), int32(i), TeamWorld); int(got) != want {
					t.Errorf("PE %d: translate_pe(%s, %d, world) = %d, want %d", p, tm.name, i, got, want)
				}
			}
		}
		// strided3 (1,3,5) -> strided5 (2..6): 3 is index 1 there, 1 is not a member
		if got := pe.translate(2, 1, 3); got != 1 {
			t.Errorf("translate_pe(strided3, 1, strided5) = %d, want 1", got)
		}
		if got := pe.translate(2, 0, 3); got != -1 {
			t.Errorf("translate_pe(strided3, 0, strided5) = %d, want -1", got)
		}
		for _, bad := range []int32{-1, int32(len(chTeams)), MaxTeams} {
			if pe.myPE(bad) != -1 || pe.nPEs(bad) != -1 || pe.translate(bad, 0, 0) != -1 {
				t.Errorf("PE %d: team %d is not a team but the queries answer", p, bad)
			}
		}
	}
}

// collBarrier: rounds of barrier and sync on every team and level, alternating; every member
// must come out of each (the data collectives check what a round orders).
func collBarrier(t *testing.T, nd *collNode) {
	for slot := range chTeams {
		m := nd.members(slot)
		for level := int32(0); level < 3; level++ {
			for round := 1; round <= 6; round++ {
				coll := int32(cBarrier + round%2)
				res := nd.run(t, m, func(p int) collCall { return collCall{coll: coll, level: level, team: int32(slot)} })
				for _, p := range m {
					if res[p] != 0 {
						t.Fatalf("%s level %d round %d: PE %d returned %d", chTeams[slot].name, level, round, p, res[p])
					}
				}
				nd.checkClean(t, "barrier")
			}
		}
	}
}

func collData(t *testing.T, nd *collNode) {
	rng := rand.New(rand.NewPCG(1, 2))
	combo := 0
	for _, coll := range []int32{cBcast, cFcollect, cCollect, cAlltoall} {
		for slot := range chTeams {
			m := nd.members(slot)
			size := len(m)
			for _, n := range chSizes {
				for _, level := range []int32{0, 1, 2, 3, 4, 5} {
					if level == 5 && n != chSizes[len(chSizes)-1] {
						continue // the grid form differs from the block's only past the one-shot size
					}
					combo++
					es := 1
					if level == 3 {
						es = 4
					} else if level == 4 {
						es = 8
					}
					nb := n * es
					inplace := combo%3 == 0 && coll != cBcast && coll != cCollect
					if level == 5 {
						// the grid form's combinations all fall on combo%3 == 0: alternate by team
						// instead, so that its push and pull paths run both ways
						inplace = slot%2 == 0 && coll != cBcast && coll != cCollect
					}
					counts := map[int]int{}
					total := 0
					for i, p := range m {
						counts[p] = nb
						if coll == cCollect && i%2 == 1 {
							counts[p] = nb / 2 / es * es
						}
						total += counts[p]
					}
					srcLen := nb
					if coll == cAlltoall {
						srcLen = nb * size
					}
					dstLen := map[int32]int{cBcast: nb, cFcollect: nb * size, cCollect: total, cAlltoall: nb * size}[coll]
					nd.poison(chDst, dstLen)
					srcs := map[int][]byte{}
					for i, p := range m {
						s := make([]byte, srcLen)
						if coll == cCollect {
							s = s[:counts[p]]
						}
						fill(rng, collTypes[0], s)
						srcs[p] = s
						off := chSrc
						if inplace {
							off = chDst
							if coll == cFcollect {
								off = chDst + i*nb
							}
						}
						copy(nd.heaps[p][off:], s)
					}
					root := (combo / 2) % size
					name := fmt.Sprintf("%s/%s/n%d/level%d/inplace%v", []string{"", "", "broadcast", "fcollect", "collect", "alltoall"}[coll],
						chTeams[slot].name, n, level, inplace)
					res := nd.run(t, m, func(p int) collCall {
						c := collCall{coll: coll, level: level, team: int32(slot), dest: nd.at(p, chDst), src: nd.at(p, chSrc),
							n: uint64(n), root: int32(root)}
						if coll == cCollect {
							c.n = uint64(counts[p] / es)
						}
						if inplace {
							c.src = c.dest
							if coll == cFcollect {
								c.src = nd.at(p, chDst+idxOf(m, p)*nb)
							}
						}
						return c
					})
					for i, p := range m {
						if res[p] != 0 {
							t.Fatalf("%s: PE %d returned %d", name, p, res[p])
						}
						var want []byte
						switch coll {
						case cBcast:
							want = srcs[m[root]]
						case cFcollect, cCollect:
							for _, q := range m {
								want = append(want, srcs[q]...)
							}
						case cAlltoall:
							for _, q := range m {
								want = append(want, srcs[q][i*nb:(i+1)*nb]...)
							}
						}
						if got := nd.heaps[p][chDst : chDst+len(want)]; !bytes.Equal(got, want) {
							at := 0
							for at < len(want) && got[at] == want[at] {
								at++
							}
							t.Errorf("%s: PE %d's destination differs from byte %d of %d", name, p, at, len(want))
						}
						nd.checkGuard(t, name, p, chDst, dstLen)
						if !inplace && !bytes.Equal(nd.heaps[p][chSrc:chSrc+len(srcs[p])], srcs[p]) {
							t.Errorf("%s: PE %d's source changed", name, p)
						}
					}
					nd.checkClean(t, name)
				}
			}
		}
	}
}

func idxOf(m []int, p int) int {
	for i, q := range m {
		if q == p {
			return i
		}
	}
	return -1
}

// collReduce: every type x op x size x team, both algorithms (reduce) or the one (reduce_scatter),
// the level and in-place-ness varying with the combination. One batch per type, op, team and
// algorithm runs the sizes, each in its own part of the heaps.
func collReduce(t *testing.T, nd *collNode, coll int32) {
	defer nd.setAlgo(CollAuto)
	rng := rand.New(rand.NewPCG(3, uint64(coll)))
	algos := []uint32{CollOneshot, CollTwoshot}
	if coll == cReduceScatter {
		algos = []uint32{CollAuto}
	}
	combo := 0
	type part struct {
		n, nb, srcOff, dstOff, srcLen, dstLen int
		level                                 int32
		inplace                               bool
		ins                                   map[int][]byte
	}
	for ti, ty := range collTypes {
		for _, op := range ty.ops() {
			for slot := range chTeams {
				if chTeams[slot].name == "shared" {
					continue // the same PEs as world here (the data collectives run it)
				}
				m := nd.members(slot)
				size := len(m)
				for _, algo := range algos {
					nd.setAlgo(algo)
					var parts []part
					calls := map[int][]roxCall{}
					srcAt, dstAt := chSrc, chDst
					sizes := chSizes
					if coll == cReduce && (ty.name == "int" || ty.name == "double" || ty.name == "bfloat16") {
						// more than a round of either algorithm holds on every team (a scratch half
						// is 16 KiB): the chunk loops
						sizes = append(sizes[:len(sizes):len(sizes)], 40000+1)
					}
					for _, n := range sizes {
						combo++
						level := int32(combo % 3)
						if combo%5 == 0 {
							level = 5 // the grid form (stream collectives)
						}
						pt := part{n: n, nb: n * ty.size, level: level, inplace: combo%4 == 1, ins: map[int][]byte{}}
						pt.srcLen, pt.dstLen = pt.nb, pt.nb
						if coll == cReduceScatter {
							pt.srcLen = pt.nb * size
						}
						pt.srcOff, pt.dstOff = srcAt, dstAt
						srcAt += (pt.srcLen + 64 + 63) &^ 63
						dstAt += (max(pt.srcLen, pt.dstLen) + 128 + 63) &^ 63
						nd.poison(pt.dstOff, max(pt.dstLen, pt.srcLen))
						for i, p := range m {
							s := make([]byte, pt.srcLen)
							fill(rng, ty, s)
							pt.ins[p] = s
							off, dest := pt.srcOff, pt.dstOff
							if pt.inplace {
								off = pt.dstOff
								if coll == cReduceScatter {
									dest = pt.dstOff + i*pt.nb
								}
							}
							copy(nd.heaps[p][off:], s)
							calls[p] = append(calls[p], roxCall{Coll: coll, Type: int32(ti), Op: int32(op), Level: pt.level,
								Team: int32(slot), Dest: uint64(nd.at(p, dest)), Src: uint64(nd.at(p, off)), N: uint64(n), Ret: 99})
						}
						parts = append(parts, pt)
					}
					nd.runBatch(t, m, calls)
					for k, pt := range parts {
						nb := pt.nb
						name := fmt.Sprintf("%s_%s/%s/n%d/algo%d/level%d/inplace%v", ty.name, opNames[op], chTeams[slot].name, pt.n, algo,
							pt.level, pt.inplace)
						for i, p := range m {
							if r := calls[p][k].Ret; r != 0 {
								t.Fatalf("%s: PE %d returned %d", name, p, r)
							}
							var in [][]byte
							for _, q := range m {
								if coll == cReduceScatter {
									in = append(in, pt.ins[q][i*nb:(i+1)*nb])
								} else {
									in = append(in, pt.ins[q])
								}
							}
							want := refReduce(ty, op, in, pt.n)
							dest := pt.dstOff
							if pt.inplace && coll == cReduceScatter {
								dest += i * nb
							}
							if at, ok := sameElems(ty, nd.heaps[p][dest:dest+nb], want); !ok {
								t.Errorf("%s: PE %d element %d is %#x, want %#x", name, p, at,
									getU(nd.heaps[p][dest+at*ty.size:], ty.size), getU(want[at*ty.size:], ty.size))
							}
							if pt.inplace && coll == cReduceScatter {
								// the other segments of the in-place source are untouched
								for s := 0; s < size; s++ {
									if s != i && !bytes.Equal(nd.heaps[p][pt.dstOff+s*nb:pt.dstOff+(s+1)*nb], pt.ins[p][s*nb:(s+1)*nb]) {
										t.Errorf("%s: PE %d's source segment %d changed", name, p, s)
									}
								}
								nd.checkGuard(t, name, p, pt.dstOff, pt.srcLen)
								continue
							}
							nd.checkGuard(t, name, p, pt.dstOff, pt.dstLen)
							if !pt.inplace && !bytes.Equal(nd.heaps[p][pt.srcOff:pt.srcOff+pt.srcLen], pt.ins[p]) {
								t.Errorf("%s: PE %d's source changed", name, p)
							}
						}
					}
					nd.checkClean(t, fmt.Sprintf("%s_%s/%s/algo%d", ty.name, opNames[op], chTeams[slot].name, algo))
				}
			}
		}
	}
	t.Logf("%d combinations", combo)
}

// collErrors: bad input is refused on every member, recorded, and nothing is written.
func collErrors(t *testing.T, nd *collNode) {
	world := nd.members(0)
	record := func(p int) AbortRecord { return DecodeAbortRecord(nd.pes[p].abort.First) }
	// mismatched op: PE 3 asks for max where the others ask for sum
	nd.poison(chDst, 64)
	res := nd.run(t, world, func(p int) collCall {
		op := int32(opSum)
		if p == 3 {
			op = opMax
		}
		return collCall{coll: cReduce, typ: 3, op: op, level: 2, team: TeamWorld, dest: nd.at(p, chDst), src: nd.at(p, chSrc), n: 8}
	})
	for _, p := range world {
		r := record(p)
		wantPE := uint16(3)
		if p == 3 {
			// every other member differs from PE 3: its threads check them side by side (the LL
			// exchange at this size), and any of them may be the one named
			wantPE = r.PE
			if r.PE == 3 || r.PE >= chPEs {
				wantPE = 4
			}
		}
		if res[p] != -1 || r.Call != CallCollMismatch || r.PE != wantPE {
			t.Errorf("op mismatch: PE %d returned %d, recorded %s naming PE %d (want collective mismatch naming %d)", p, res[p], r.CallName(), r.PE, wantPE)
		}
		nd.checkGuard(t, "op mismatch", p, chDst, 0)
	}
	nd.clearAborts()
	// mismatched size
	res = nd.run(t, world, func(p int) collCall {
		n := uint64(100)
		if p == 6 {
			n = 101
		}
		return collCall{coll: cFcollect, level: 0, team: TeamWorld, dest: nd.at(p, chDst), src: nd.at(p, chSrc), n: n}
	})
	for _, p := range world {
		if r := record(p); res[p] != -1 || r.Call != CallCollMismatch {
			t.Errorf("size mismatch: PE %d returned %d, recorded %s", p, res[p], r.CallName())
		}
		nd.checkGuard(t, "size mismatch", p, chDst, 0)
	}
	nd.clearAborts()
	// sizes on both sides of the LL exchange's limit: PE 6 runs the rounds, the others push LL
	// slots; each side finds the other's mark (an announcement, a slot header) and fails
	res = nd.run(t, world, func(p int) collCall {
		n := uint64(100)
		if p == 6 {
			n = 3000
		}
		return collCall{coll: cFcollect, level: 2, team: TeamWorld, dest: nd.at(p, chDst), src: nd.at(p, chSrc), n: n}
	})
	for _, p := range world {
		if r := record(p); res[p] != -1 || r.Call != CallCollMismatch {
			t.Errorf("LL/round mismatch: PE %d returned %d, recorded %s", p, res[p], r.CallName())
		}
		nd.checkGuard(t, "LL/round mismatch", p, chDst, 0)
	}
	nd.clearAborts()
	// the grid's all-gather past the one-shot size pushes into symmetric dests and pulls into
	// others: PE 6's dest lies outside its heap (it pulls), the others push; the entry round fails
	// on every member and nobody has stored into any dest
	const gn = 4096 + 3
	nd.poison(chDst, gn*chPEs)
	outside := HostMem(t, gn*chPEs)
	res = nd.run(t, world, func(p int) collCall {
		c := collCall{coll: cFcollect, level: 5, team: TeamWorld, dest: nd.at(p, chDst), src: nd.at(p, chSrc), n: gn}
		if p == 6 {
			c.dest = uintptr(HostAddr(outside))
		}
		return c
	})
	for _, p := range world {
		if r := record(p); res[p] != -1 || r.Call != CallCollMismatch {
			t.Errorf("grid push/pull mismatch: PE %d returned %d, recorded %s", p, res[p], r.CallName())
		}
		for i := 0; i < gn*chPEs; i++ {
			if nd.heaps[p][chDst+i] != chPoison {
				t.Errorf("grid push/pull mismatch: PE %d's dest byte %d was written", p, i)
				break
			}
		}
	}
	nd.clearAborts()
	// reduce-scatter's blocks take the LL exchange too: PE 6's block past the limit (the rounds)
	// beside the others' LL pushes, and an LL reduce-scatter beside an LL all-reduce of as many bytes
	for _, tc := range []struct {
		what string
		call func(p int) collCall
	}{
		{"reduce-scatter LL/round mismatch", func(p int) collCall {
			n := uint64(50)
			if p == 6 {
				n = 3000
			}
			return collCall{coll: cReduceScatter, typ: 3, op: opSum, level: 2, team: TeamWorld, dest: nd.at(p, chDst), src: nd.at(p, chSrc), n: n}
		}},
		{"reduce-scatter beside all-reduce", func(p int) collCall {
			c := int32(cReduceScatter)
			if p == 6 {
				c = cReduce
			}
			return collCall{coll: c, typ: 3, op: opSum, level: 2, team: TeamWorld, dest: nd.at(p, chDst), src: nd.at(p, chSrc), n: 50}
		}},
	} {
		nd.poison(chDst, 64)
		res = nd.run(t, world, tc.call)
		for _, p := range world {
			if r := record(p); res[p] != -1 || r.Call != CallCollMismatch {
				t.Errorf("%s: PE %d returned %d, recorded %s", tc.what, p, res[p], r.CallName())
			}
			nd.checkGuard(t, tc.what, p, chDst, 0)
		}
		nd.clearAborts()
	}
	// a root outside the team: every member refuses
	res = nd.run(t, world, func(p int) collCall {
		return collCall{coll: cBcast, level: 2, team: TeamWorld, dest: nd.at(p, chDst), src: nd.at(p, chSrc), n: 8, root: chPEs}
	})
	for _, p := range world {
		if r := record(p); res[p] != -1 || r.Call != CallBadArg || r.Detail != BadArgRoot {
			t.Errorf("bad root: PE %d returned %d, recorded %s detail %d", p, res[p], r.CallName(), r.Detail)
		}
	}
	nd.clearAborts()
	// a team this PE is not in, and a handle that is no team: refused at once, nothing waits
	for _, team := range []int32{2, 40, -1} {
		res = nd.run(t, []int{0}, func(p int) collCall { return collCall{coll: cBarrier, team: team} })
		if r := record(0); res[0] != -1 || r.Call != CallBadTeam || r.Detail != uint32(team) {
			t.Errorf("team %d: PE 0 returned %d, recorded %s detail %d", team, res[0], r.CallName(), int32(r.Detail))
		}
		nd.clearAborts()
	}
	// a member this PE cannot load and store, and a workspace below the minimum: refused at once
	nd.pes[0].state.PeerBase[5] = 0
	nd.pes[0].setState(&nd.pes[0].state)
	res = nd.run(t, []int{0}, func(p int) collCall { return collCall{coll: cSync, team: TeamWorld} })
	if r := record(0); res[0] != -1 || r.Call != CallBadArg || r.Detail != BadArgNotMapped {
		t.Errorf("unmapped member: PE 0 returned %d, recorded %s detail %d", res[0], r.CallName(), r.Detail)
	}
	nd.pes[0].state.PeerBase[5] = HostAddr(nd.heaps[5])
	nd.pes[0].setState(&nd.pes[0].state)
	nd.clearAborts()
	nd.pes[7].table.Team[4].WSBytes = TeamWSMin - 1
	res = nd.run(t, []int{7}, func(p int) collCall { return collCall{coll: cBarrier, team: 4} })
	if r := record(7); res[7] != -1 || r.Call != CallBadArg || r.Detail != BadArgWorkspace {
		t.Errorf("small workspace: PE 7 returned %d, recorded %s detail %d", res[7], r.CallName(), r.Detail)
	}
	nd.pes[7].table.Team[4].WSBytes = chWS
	nd.clearAborts()
	// overlapping buffers (dest one byte into source)
	res = nd.run(t, world, func(p int) collCall {
		return collCall{coll: cAlltoall, level: 0, team: TeamWorld, dest: nd.at(p, chDst+1), src: nd.at(p, chDst), n: 16}
	})
	for _, p := range world {
		if res[p] != -1 {
			t.Errorf("overlap: PE %d returned %d", p, res[p])
		}
	}
	if r := record(0); r.Call != CallBadArg || r.Detail != BadArgOverlap {
		t.Errorf("overlap: PE 0 recorded %s detail %d", r.CallName(), r.Detail)
	}
	nd.clearAborts()
	// a member that never comes: the others wait until the abort word is set, then fail naming it
	m := nd.members(3) // 2..6
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		res = nd.run(t, m[:4], func(p int) collCall { return collCall{coll: cSync, level: 1, team: 3} })
	}()
	time.Sleep(50 * time.Millisecond)
	for _, pe := range nd.pes {
		atomic.StoreUint64(&pe.abort.Word, 0x55)
	}
	wg.Wait()
	for _, p := range m[:4] {
		if r := record(p); res[p] != -1 || r.Call != CallSync || r.PE != 6 || r.Detail != DetailAbortWord|0x55 {
			t.Errorf("absent member: PE %d returned %d, recorded %s PE %d detail %#x", p, res[p], r.CallName(), r.PE, r.Detail)
		}
	}
	nd.clearAborts()
}
