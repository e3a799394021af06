package coll

import (
	"context"
	"fmt"
	"math/bits"
	"sync"
	"sync/atomic"
)

const hdrSize = 64

// signal word kinds, each an array of one word per World PE in a slot's control area
const (
	sigHeader = iota
	sigPhase
	sigDone
	sigPipe
	sigCredit
	sigHeaderOdd // the header's signal of odd-numbered calls (see hdrSig)
	sigKinds
)

// Engine is a PE's collective machinery: the space it reserved, the slots its live teams hold,
// and the highest epoch any of its teams has used.
type Engine struct {
	w     World
	cfg   Config
	algo  string
	knob  algorithm // algo parsed, as every call asks
	nic   bool      // w.HasNIC(), fixed once Init has started the transport
	slots struct {
		mu   sync.Mutex
		used uint64 // bit s: slot s belongs to a live team
	}
	maxEpoch atomic.Uint64

	ctlBase   uint64 // control areas: slot s at ctlBase + s*ctlStride
	ctlStride uint64
	dataOff   []uint64 // scratch of slot s
	dataSize  []int    // both halves
}

// scratch sizes: the predefined teams' slots get more room, so that their one-shot calls go further
func scratchSizes(heap int64) (big, small int) {
	big = int(min(max(heap/32, 64<<10), 2<<20))
	small = int(min(max(heap/1024, 4<<10), 64<<10))
	return big &^ 127, small &^ 127
}

// New reserves the collective space through reserve, which returns the heap offset of size
// bytes, zeroed, at the same offset on every PE (every PE calls New at the same point of Init,
// before any user allocation). Slots 0 and 1 are the predefined teams' (TeamWorld, TeamShared).
func New(w World, cfg Config, reserve func(size int) (uint64, error)) (*Engine, error) {
	if cfg.Teams < 2 || cfg.Teams > 64 {
		return nil, fmt.Errorf("%d team slots: want 2..64", cfg.Teams)
	}
	e := &Engine{w: w, cfg: cfg, algo: cfg.Algo, knob: parseAlgo(cfg.Algo), nic: w.HasNIC(), dataOff: make([]uint64, cfg.Teams), dataSize: make([]int, cfg.Teams)}
	e.ctlStride = uint64(sigKinds*cfg.NPEs*8+63) &^ 63
	big, small := scratchSizes(cfg.HeapSize)
	// every half must hold at least a header per PE
	big = max(big, 2*cfg.NPEs*(hdrSize+64))
	small = max(small, 2*cfg.NPEs*(hdrSize+64))
	base, err := reserve(int(e.ctlStride) * cfg.Teams)
	if err != nil {
		return nil, err
	}
	e.ctlBase = base
	// The scratch is zero too: a header's epoch word is a flag that the receiver polls (see start).
	for s := range cfg.Teams {
		size := small
		if s < 2 {
			size = big
		}
		off, err := reserve(size)
		if err != nil {
			return nil, err
		}
		e.dataOff[s], e.dataSize[s] = off, size
	}
	e.slots.used = 3
	return e, nil
}

// Algo returns the ROX_COLL_ALGO setting the engine follows; SetAlgo changes it (tests run the
// algorithms one by one with it; every PE must set the same).
func (e *Engine) Algo() string     { return e.algo }
func (e *Engine) SetAlgo(a string) { e.algo, e.knob = a, parseAlgo(a) }

// Team is the engine's side of a team: its slot, members and epochs, and the state of the call
// in progress, reused by every call so that a call on mapped heaps allocates nothing. The caller
// serializes the calls of a team (one at a time on each PE).
type Team struct {
	e       *Engine
	slot    int   // the collective space this team uses (the same on every member)
	members []int // world PE of each team PE
	me      int   // this PE's team PE number, -1 outside the team
	name    string
	nodes   []int  // node index (dense, in order of first appearance) of each member
	epoch   uint64 // collective calls made on the team so far
	stride  int    // bytes of each member's region in a half of the slot's scratch

	op      collOp
	peers   []header
	acc     []byte   // foldAll's accumulator block
	ins     [][]byte // foldAll's per-PE inputs
	scratch []byte   // packed all-to-all blocks
	hdrBuf  []byte   // a header read from a device heap
}

// NewTeam makes the engine's side of a team on slot, with members (world PEs, in team order),
// named name in messages, whose calls are numbered from epoch on.
func (e *Engine) NewTeam(slot int, members []int, name string, epoch uint64) *Team {
	t := &Team{e: e, slot: slot, members: members, me: -1, name: name, epoch: epoch}
	t.stride = (e.dataSize[slot] / 2 / max(len(members), 1)) &^ 63
	ids := map[string]int{}
	for i, pe := range members {
		if pe == e.cfg.PE {
			t.me = i
		}
		node := e.cfg.Nodes[pe]
		id, ok := ids[node]
		if !ok {
			id = len(ids)
			ids[node] = id
		}
		t.nodes = append(t.nodes, id)
	}
	return t
}

// Epoch is the number of collective calls made on the team so far.
func (t *Team) Epoch() uint64 { return t.epoch }

// Scratch returns the heap range of the team's scratch (Destroy zeroes it for the slot's next team).
func (t *Team) Scratch() (off uint64, size int) {
	return t.e.dataOff[t.slot], t.e.dataSize[t.slot]
}

// ReleaseSlot gives slot back (a destroyed team's, or one a split reserved for a team this PE is
// not in).
func (e *Engine) ReleaseSlot(slot int) {
	e.slots.mu.Lock()
	e.slots.used &^= 1 << slot
	e.slots.mu.Unlock()
}

// Split is the collective part of a split of t into k teams: every member offers its free slots,
// and the k lowest free on all of them become the new teams' (every PE reserves them; the caller
// releases those of teams this PE is not in). The split's arguments (args; k) travel in the
// exchange, so a PE with other arguments makes the call fail on every PE. It returns the slots and
// the epoch the new teams start at.
func (t *Team) Split(ctx context.Context, call string, k int, args [3]int64) ([]int, uint64, error) {
	e := t.e
	e.slots.mu.Lock()
	free := ^e.slots.used
	e.slots.mu.Unlock()
	h := header{call: CallSplit, count: args[0], root: args[1], extra: args[2], extra2: int64(k), word: free}
	op, err := t.start(ctx, call, h, nil, 0)
	if err != nil {
		return nil, 0, err
	}
	// The new teams' epochs start above every epoch any member has used, so that what a slot's
	// signal words hold from an earlier team never satisfies a wait of the new one.
	var epoch uint64
	for j := range t.members {
		free &= op.peers[j].word
		epoch = max(epoch, op.peers[j].word2)
	}
	if e.cfg.Teams < 64 {
		free &= 1<<e.cfg.Teams - 1
	}
	var slots []int
	for f := free; len(slots) < k && f != 0; f &= f - 1 {
		slots = append(slots, bits.TrailingZeros64(f))
	}
	if len(slots) < k {
		return nil, 0, e.w.Errorf(call, e.cfg.Kinds.TeamLimit, "%d live teams on some PE of %s, no %d slot(s) free on all of them", e.cfg.Teams-bits.OnesCount64(free), t.name, k)
	}
	e.slots.mu.Lock()
	defer e.slots.mu.Unlock()
	for _, sl := range slots {
		if e.slots.used&(1<<sl) != 0 {
			// Another goroutine of this PE took the slot meanwhile: the other members cannot know.
			return nil, 0, e.w.Errorf(call, e.cfg.Kinds.Mismatch, "slot %d was taken by a concurrent split on this PE (splits must be made one at a time)", sl)
		}
		e.slots.used |= 1 << sl
	}
	return slots, epoch, nil
}

// HeaderSize is the bytes of a header at the start of each region.
const HeaderSize = hdrSize

// Region returns the heap offset of team PE j's region in the given half of the team's scratch
// (its header, HeaderSize bytes, then its payload) and the payload's capacity: where the exchange
// writes, for tests that check the layout.
func (t *Team) Region(half, j int) (off uint64, capacity int) { return t.region(half, j) }
