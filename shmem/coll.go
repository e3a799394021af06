package shmem

// Host collectives: the protocol under every team call (splits, Sync, Barrier, Broadcast,
// FCollect, Collect, AllToAll, AllToAlls, AllReduce, ReduceScatter).
//
// Space. Init reserves, at the same heap offset on every PE, MaxTeams slots of collective space:
// per slot a control area of signal words (one per team PE and kind) and a scratch area of two
// halves (parities). A half is split into one region per team PE, each a 64-byte header followed
// by a payload.
//
// Epochs. Every collective call on a team is numbered (its epoch, e); every signal word only grows
// and holds the epoch of the last signal. A call starts with the header exchange: each PE writes
// its header (the call, element type, operation, algorithm, counts, root) into its region of every
// other member's half e%2, with the payload of a one-shot algorithm behind it, then sets its
// header word there to e; it then waits for every member's header word to reach e and checks that
// the headers agree (ErrMismatch names both PEs and values otherwise). Over load/store the flag a
// receiver polls is the header's own first word (the epoch, stored last), so the header and a
// small payload arrive with the flag's cache line and the next; over the NIC path it is the
// member's sigHeader word, set after the data (putSignal). The scratch is zeroed at Init and by
// Destroy, so that a team made later on a slot, whose regions may lie elsewhere in it, never
// reads old payload bytes as a header word. The exchange is the entry
// barrier; nothing is written to a user's destination before it. A PE can write into half e%2 of
// another for epoch e+2 only after finishing e+1, which needed that PE's e+1 header, sent after it
// had finished with epoch e: two halves are enough, with no other flow control.
//
// Every signal a PE is sent in a call is awaited by it in that call, so a team's words are settled
// when a call returns everywhere; a team made later on the same slot starts its epochs above every
// epoch its members have used (maxEpoch), so old values never satisfy a new wait.
//
// The World's own collective calls (BarrierAll, SyncAll, Malloc, Calloc, Align, Free, Realloc)
// are calls of TeamWorld's sequence too (inSequence): each takes an epoch and exchanges headers
// like a team call, so that a PE at a World call while another is at a TeamWorld collective fails
// with ErrMismatch at once, naming both PEs and both calls, and the calls after it stay in step.
//
// Concurrency: one call at a time per team on each PE (Team.mu); several teams may run calls at
// once from different goroutines.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/roxamen/roxamen/internal/env"
)

const (
	hdrSize = 64
	// signal word kinds, each an array of one word per team PE in a slot's control area
	sigHeader = iota - 1
	sigPhase
	sigDone
	sigPipe
	sigCredit
	sigHeaderOdd // the header's signal of odd-numbered calls (see hdrSig)
	sigKinds
)

// collState is a World's collective machinery.
type collState struct {
	nodes    []string // node of each PE
	world    *Team
	shared   *Team
	slots    teamSlots
	maxEpoch atomic.Uint64 // the highest epoch any team of this PE has used
	algo     string        // ROX_COLL_ALGO

	ctlBase   uint64 // control areas: slot s at ctlBase + s*ctlStride
	ctlStride uint64
	dataOff   [MaxTeams]uint64 // scratch of slot s
	dataSize  [MaxTeams]int    // both halves
}

// scratch sizes: the predefined teams' slots get more room, so that their one-shot calls go further
func scratchSizes(heap int64) (big, small int) {
	big = int(min(max(heap/32, 64<<10), 2<<20))
	small = int(min(max(heap/1024, 4<<10), 64<<10))
	return big &^ 127, small &^ 127
}

// initColl reserves the collective space and makes TeamWorld and TeamShared. Called by Init on
// every PE at the same point, before any user allocation.
func (w *World) initColl(nodes []string) error {
	c := &collState{nodes: nodes}
	c.algo, _ = env.CollAlgo.String()
	c.ctlStride = uint64(sigKinds*w.npes*8+63) &^ 63
	big, small := scratchSizes(w.heapSize)
	// every half must hold at least a header per PE
	big = max(big, 2*w.npes*(hdrSize+64))
	small = max(small, 2*w.npes*(hdrSize+64))
	w.allocMu.Lock()
	base, err := w.heap.Alloc(c.ctlStride*MaxTeams, 0)
	if err != nil {
		w.allocMu.Unlock()
		return err
	}
	c.ctlBase = base
	total := int(c.ctlStride * MaxTeams)
	for s := range MaxTeams {
		size := small
		if s < 2 {
			size = big
		}
		off, err := w.heap.Alloc(uint64(size), 0)
		if err != nil {
			w.allocMu.Unlock()
			return err
		}
		c.dataOff[s], c.dataSize[s] = off, size
		total += size
	}
	w.allocMu.Unlock()
	if err := w.zero("Init", c.ctlBase, int(c.ctlStride*MaxTeams)); err != nil {
		return err
	}
	// The scratch too: a header's epoch word is a flag that the receiver polls (see start).
	for s := range MaxTeams {
		if err := w.zero("Init", c.dataOff[s], c.dataSize[s]); err != nil {
			return err
		}
	}
	w.teams = c
	all := make([]int, w.npes)
	var shared []int
	for pe := range all {
		all[pe] = pe
		// load/store reach: a mapped host heap, or a device heap of this node (not the NIC path)
		if _, nic := w.paths[pe].(remote); pe == w.pe || w.peers[pe] != nil || (nodes[pe] == nodes[w.pe] && !nic) {
			shared = append(shared, pe)
		}
	}
	c.world = w.newTeam(0, all, "TeamWorld", 0)
	c.shared = w.newTeam(1, shared, "TeamShared", 0)
	c.slots.used = 3
	return nil
}

// collective call identifiers, carried in headers
type collCall uint8

const (
	callSplit collCall = iota + 1
	callDestroy
	callSync
	callBarrier
	callBroadcast
	callFCollect
	callCollect
	callAllToAll
	callAllToAlls
	callAllReduce
	callReduceScatter
	// the World's own collective calls, numbered in TeamWorld's sequence (World.inSequence)
	callBarrierAll
	callSyncAll
	callMalloc
	callCalloc
	callAlign
	callFree
	callRealloc
	callFinalize
)

// worldCall is whether c is one of the World's own calls rather than a team call.
func worldCall(c collCall) bool { return c >= callBarrierAll && c <= callFinalize }

var callNames = map[collCall]string{
	callSplit: "split", callDestroy: "Destroy", callSync: "Sync", callBarrier: "Barrier",
	callBroadcast: "Broadcast", callFCollect: "FCollect", callCollect: "Collect", callAllToAll: "AllToAll",
	callAllToAlls: "AllToAlls", callAllReduce: "AllReduce", callReduceScatter: "ReduceScatter",
	callBarrierAll: "BarrierAll", callSyncAll: "SyncAll", callMalloc: "Malloc", callCalloc: "Calloc",
	callAlign: "Align", callFree: "Free", callRealloc: "Realloc", callFinalize: "Finalize",
}

func (c collCall) String() string {
	if s, ok := callNames[c]; ok {
		return s
	}
	return fmt.Sprintf("call(%d)", uint8(c))
}

// header is what each PE tells the others about its call.
type header struct {
	epoch  uint64
	call   collCall
	kind   elemKind
	op     Op
	algo   algorithm
	count  int64 // elements per PE (bytes for untyped calls)
	root   int64
	extra  int64
	extra2 int64
	word   uint64 // free-form (splits: the free slots)
	word2  uint64 // splits: the PE's highest epoch
	// refused: the PE's argument check refused the call; why is the kind (refusalKinds). The
	// call still takes its place in the team's sequence, and fails on every PE.
	refused bool
	why     uint8
}

// refusalKinds are the error kinds a refusal names in a header (its why).
var refusalKinds = []error{ErrBadArgument, ErrPERange, ErrBounds, ErrNotSymmetric, ErrNotInitialized, ErrFreed, ErrMisaligned, ErrOutOfMemory}

// refusalKind is the kind a refusal's code names (ErrBadArgument for a code it does not know).
func refusalKind(why uint8) error {
	if int(why) < len(refusalKinds) {
		return refusalKinds[why]
	}
	return ErrBadArgument
}

func refusalCode(err error) uint8 {
	for i, k := range refusalKinds {
		if errors.Is(err, k) {
			return uint8(i)
		}
	}
	return 0
}

func (h *header) encode(b []byte) {
	_ = b[hdrSize-1]
	binary.LittleEndian.PutUint64(b[0:], h.epoch)
	b[8], b[9], b[10], b[11] = byte(h.call), byte(h.kind), byte(h.op), byte(h.algo)
	b[12], b[13], b[14], b[15] = byte(btoi(h.refused)), h.why, 0, 0
	binary.LittleEndian.PutUint64(b[16:], uint64(h.count))
	binary.LittleEndian.PutUint64(b[24:], uint64(h.root))
	binary.LittleEndian.PutUint64(b[32:], uint64(h.extra))
	binary.LittleEndian.PutUint64(b[40:], uint64(h.extra2))
	binary.LittleEndian.PutUint64(b[48:], h.word)
	binary.LittleEndian.PutUint64(b[56:], h.word2)
}

func decodeHeader(b []byte) header {
	return header{
		epoch: binary.LittleEndian.Uint64(b[0:]),
		call:  collCall(b[8]), kind: elemKind(b[9]), op: Op(b[10]), algo: algorithm(b[11]),
		refused: b[12] != 0, why: b[13],
		count:  int64(binary.LittleEndian.Uint64(b[16:])),
		root:   int64(binary.LittleEndian.Uint64(b[24:])),
		extra:  int64(binary.LittleEndian.Uint64(b[32:])),
		extra2: int64(binary.LittleEndian.Uint64(b[40:])),
		word:   binary.LittleEndian.Uint64(b[48:]),
		word2:  binary.LittleEndian.Uint64(b[56:]),
	}
}

// describe says what a header asks for, in the words of a mismatch message.
func (h *header) field(name string) string {
	switch name {
	case "call":
		return h.call.String()
	case "type":
		return h.kind.String()
	case "op":
		return h.op.String()
	case "algorithm":
		return h.algo.String() + " (ROX_COLL_ALGO)"
	}
	return ""
}

// mismatch compares two PEs' headers for the same call and says how they differ, or "".
func mismatch(call string, a, b *header) string {
	if a.call != b.call {
		return fmt.Sprintf("%s while PE %%d called %s", a.call, b.call)
	}
	if a.kind != b.kind {
		return fmt.Sprintf("element type %s while PE %%d has %s", a.kind, b.kind)
	}
	if a.op != b.op {
		return fmt.Sprintf("operation %s while PE %%d asks for %s", a.op, b.op)
	}
	var name string
	switch a.call {
	case callSplit:
		if a.count != b.count || a.root != b.root || a.extra != b.extra {
			if a.extra2 == 2 {
				return fmt.Sprintf("xrange %d while PE %%d passes %d", a.count, b.count)
			}
			return fmt.Sprintf("(start %d, stride %d, size %d) while PE %%d passes (%d, %d, %d)", a.count, a.root, a.extra, b.count, b.root, b.extra)
		}
	case callCollect:
		// counts differ by design; destinations are checked against the total by the caller
	case callBroadcast:
		if a.root != b.root {
			return fmt.Sprintf("root %d while PE %%d has root %d", a.root, b.root)
		}
		name = "elements"
	case callAllToAlls:
		if a.count != b.count {
			return fmt.Sprintf("%d elements per PE while PE %%d moves %d", a.count, b.count)
		}
		// A reader gathers a peer's block at its own source stride: every PE must pass the same
		// strides, as shmem_alltoalls requires.
		if a.root != b.root || a.extra != b.extra {
			return fmt.Sprintf("destination stride %d and source stride %d while PE %%d passes %d and %d", a.root, a.extra, b.root, b.extra)
		}
	default:
		name = "elements"
	}
	if name != "" && a.count != b.count {
		return fmt.Sprintf("%d %s while PE %%d has %d", a.count, name, b.count)
	}
	if a.algo != b.algo {
		return fmt.Sprintf("algorithm %s while PE %%d picks %s (ROX_COLL_ALGO must agree)", a.algo, b.algo)
	}
	return ""
}

// disagree is the error of this PE's call when team PE j's header, for the same epoch, differs
// from this PE's, or nil.
func (t *Team) disagree(call string, a, b *header, j int) error {
	w := t.w
	pe := t.members[j]
	switch {
	case a.refused:
		return nil // this PE refused the call: its own error is the one it returns
	case b.refused:
		what := b.call.String()
		if b.call != a.call {
			what += " (while this PE called " + a.call.String() + ")"
		}
		kind := ErrBadArgument
		if int(b.why) < len(refusalKinds) {
			kind = refusalKinds[b.why]
		}
		return w.errorf(call, ErrMismatch, "PE %d (team PE %d of %s) refused its %s: %v (its own error says which); the call fails on every PE of the team", pe, j, t.name, what, kind)
	}
	if worldCall(a.call) || worldCall(b.call) {
		// The World's calls and TeamWorld's collectives are one sequence: say it in its words.
		var m string
		switch {
		case a.call != b.call:
			m = fmt.Sprintf("PE %d's collective call #%d is %s, PE %d's is %s: every PE must make the same collective calls in the same order", w.pe, a.epoch, a.call, pe, b.call)
		case (a.call == callMalloc || a.call == callCalloc) && a.count != b.count:
			m = fmt.Sprintf("PE %d asked for %d bytes, PE %d for %d", w.pe, a.count, pe, b.count)
		case a.call == callAlign && (a.count != b.count || a.root != b.root):
			m = fmt.Sprintf("PE %d asked for %d bytes aligned to %d, PE %d for %d aligned to %d", w.pe, a.count, a.root, pe, b.count, b.root)
		case a.call == callFree && (a.count != b.count || a.root != b.root):
			m = fmt.Sprintf("PE %d frees allocation #%d (heap offset %d), PE %d #%d (heap offset %d)", w.pe, a.root, a.count, pe, b.root, b.count)
		case a.call == callRealloc && (a.count != b.count || a.root != b.root):
			m = fmt.Sprintf("PE %d resizes the allocation at heap offset %d to %d bytes, PE %d the one at %d to %d", w.pe, a.count, a.root, pe, b.count, b.root)
		default:
			return nil
		}
		return w.errorf(call, ErrMismatch, "%s", m)
	}
	if m := mismatch(call, a, b); m != "" {
		return w.errorf(call, ErrMismatch, "on %s: PE %d (team PE %d) "+m, t.name, w.pe, t.me, pe)
	}
	return nil
}

// collOp is one collective call in progress on a team.
type collOp struct {
	t     *Team
	ctx   context.Context
	call  string
	e     uint64
	par   int
	h     header
	peers []header
}

// region is the heap offset of team PE src's region in the given half of the slot, and its
// payload capacity.
func (t *Team) region(half, src int) (off uint64, capacity int) {
	c := t.w.teams
	halfSize := c.dataSize[t.slot] / 2
	stride := (halfSize / len(t.members)) &^ 63
	return c.dataOff[t.slot] + uint64(half*halfSize+src*stride), stride - hdrSize
}

// payloadCap is how many payload bytes one PE can send another in the header exchange.
func (t *Team) payloadCap() int { _, c := t.region(0, 0); return c }

// hdrSig is the header's signal word kind of a call of parity par. Consecutive calls signal
// different words, as they use different regions: on a path that delivers put-with-signals out of
// order (ROX_DELIVERY=reorder; a NIC's adaptive routing) call e+1's signal may land before call
// e's, which, on one word, would set it back to e and leave the receiver waiting for e+1 forever.
// Call e+2 is sent only once the sender has every member's header of e+1, which each member sends
// after it saw call e's: e's signal has landed by then.
func hdrSig(par int) int {
	if par == 1 {
		return sigHeaderOdd
	}
	return sigHeader
}

func (t *Team) sigOff(kind, src int) uint64 {
	c := t.w.teams
	return c.ctlBase + uint64(t.slot)*c.ctlStride + uint64((kind*t.w.npes+src)*8)
}

// begin starts a call: it numbers it, sends this PE's header (and, for each member j, payload(j)
// behind it) to every member, and waits for every member's header. It returns an ErrMismatch
// error when they disagree. The caller holds t.mu.
func (t *Team) begin(ctx context.Context, call string, h header, payload func(j int) []byte) (*collOp, error) {
	if payload == nil {
		return t.start(ctx, call, h, nil, 0)
	}
	n := len(t.members)
	var all []byte
	per := -1
	for j := 0; j < n; j++ {
		b := payload(j)
		if per < 0 {
			per = len(b)
		} else if len(b) != per {
			panic(fmt.Sprintf("shmem: %s: payloads of %d and %d bytes", call, per, len(b)))
		}
		all = append(all, b...)
	}
	return t.start(ctx, call, h, all, per)
}

// start is begin with the payloads in one slice: member j gets payload[j*per:(j+1)*per], or all
// of payload where per is 0. It allocates nothing where every member's heap is mapped here: the
// call's state (t.op) and the headers (t.peers) are the team's, reused by each call.
func (t *Team) start(ctx context.Context, call string, h header, payload []byte, per int) (*collOp, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	w := t.w
	t.epoch++
	e := t.epoch
	for {
		m := w.teams.maxEpoch.Load()
		if e <= m || w.teams.maxEpoch.CompareAndSwap(m, e) {
			break
		}
	}
	h.epoch = e
	if h.call == callSplit {
		h.word2 = w.teams.maxEpoch.Load()
	}
	n := len(t.members)
	if cap(t.peers) < n {
		t.peers = make([]header, n)
	}
	op := &t.op
	*op = collOp{t: t, ctx: ctx, call: call, e: e, par: int(e & 1), h: h, peers: t.peers[:n]}
	off, capacity := t.region(op.par, t.me)
	var buf []byte
	for k := 1; k < n; k++ {
		j := (t.me + k) % n
		pe := t.members[j]
		data := payload
		if per > 0 && payload != nil {
			data = payload[j*per : (j+1)*per]
		}
		if len(data) > capacity {
			panic(fmt.Sprintf("shmem: %s: %d-byte payload over the %d-byte region", call, len(data), capacity))
		}
		if dst := w.peers[pe]; dst != nil {
			// Over load/store the header's first word, the epoch, is the flag the receiver polls:
			// stored last (a release), so that the header and the payload are there when it shows
			// e, and they come with it in one or two cache lines where a separate signal word
			// would be one more line to fetch. The signal word is set too, for the error message
			// of a wait that times out.
			var hb [hdrSize]byte
			h.encode(hb[:])
			copy(dst[off+8:off+hdrSize], hb[8:])
			cachedCopy(dst[off+hdrSize:], data)
			atomic.StoreUint64((*uint64)(unsafe.Pointer(&dst[off])), e)
			atomic.StoreUint64((*uint64)(unsafe.Pointer(&dst[t.sigOff(hdrSig(op.par), t.me)])), e)
			continue
		}
		if w.reorder != nil && len(data) == 0 && worldCall(h.call) {
			// The World's barriers and allocation calls on the reordering path go on the
			// runtime's own channel, as the barrier's signals did (syncSignal): each word at once
			// and in order, the signal last, rather than held up to milliseconds per delivery.
			var hb [hdrSize]byte
			h.encode(hb[:])
			for i := 0; i < hdrSize; i += 8 {
				if err := w.syncSignal(call, pe, off+uint64(i), binary.LittleEndian.Uint64(hb[i:])); err != nil {
					return nil, err
				}
			}
			if err := w.syncSignal(call, pe, t.sigOff(hdrSig(op.par), t.me), e); err != nil {
				return nil, err
			}
			continue
		}
		buf = append(buf[:0], make([]byte, hdrSize)...)
		h.encode(buf)
		buf = append(buf, data...)
		if err := w.paths[pe].putSignal(off, buf, t.sigOff(hdrSig(op.par), t.me), SignalSet, e); err != nil {
			return nil, w.pathError(call, pe, err)
		}
	}
	op.peers[t.me] = h
	for k := 1; k < n; k++ {
		j := (t.me + n - k) % n
		off, _ := t.region(op.par, j)
		// A member that reaches this PE over load/store flags its header with the header's own
		// epoch word (see above); one that comes through the NIC path, with its signal word after
		// the data (putSignal). A PE maps a member's heap exactly when that member maps its own
		// (the same node, the same ROX_TRANSPORT), so both sides agree on which.
		var err error
		if w.peers[t.members[j]] != nil {
			err = op.waitWord(off, j, e, "")
		} else {
			err = op.wait(hdrSig(op.par), j, "") // "": enter the call
		}
		if err != nil {
			return nil, err
		}
		var hb []byte
		if src := w.peers[w.pe]; src != nil {
			hb = src[off : off+hdrSize]
		} else {
			// a device heap: through this PE's own path, into the team's buffer (a buffer on the
			// stack would escape through the path interface: one allocation per member and call)
			if t.hdrBuf == nil {
				t.hdrBuf = make([]byte, hdrSize)
			}
			hb = t.hdrBuf
			if err := w.paths[w.pe].get(off, hb); err != nil {
				return nil, w.pathError(call, w.pe, err)
			}
		}
		op.peers[j] = decodeHeader(hb)
	}
	// Every header is in: the error, if any, names the lowest team PE that differs.
	for j := 0; j < n; j++ {
		if j != t.me {
			if err := t.disagree(call, &h, &op.peers[j], j); err != nil {
				return nil, err
			}
		}
	}
	return op, nil
}

func (op *collOp) peerHeader(j int) *header { return &op.peers[j] }

// refuse is how a collective call ends when this PE's argument check refused it (err): the call
// still takes its place in the team's sequence, with a header that says it was refused, so that
// every other PE's call fails at once (ErrMismatch naming this PE) instead of being matched with
// this PE's next call. It returns err. A team that cannot make calls (nil, destroyed, finalized)
// has no sequence to keep.
func (t *Team) refuse(ctx context.Context, call string, id collCall, err error) error {
	if t.check(call) != nil {
		return err
	}
	release, gerr := t.gate(call)
	if gerr != nil {
		return err
	}
	defer release()
	if op, _ := t.begin(ctx, call, header{call: id, refused: true, why: refusalCode(err)}, nil); op != nil {
		op.finish()
	}
	return err
}

// payload returns the bytes member j sent this PE in the header exchange (n of them): a view of
// this PE's scratch where the heap is host memory.
func (op *collOp) payload(j, n int) ([]byte, error) {
	t := op.t
	off, _ := t.region(op.par, j)
	off += hdrSize
	if src := t.w.peers[t.w.pe]; src != nil {
		return src[off : off+uint64(n)], nil
	}
	b := make([]byte, n)
	if err := t.w.paths[t.w.pe].get(off, b); err != nil {
		return nil, t.w.pathError(op.call, t.w.pe, err)
	}
	return b, nil
}

// signal sets word kind[me] of member j to this call's epoch.
func (op *collOp) signal(kind, j int) error {
	t := op.t
	pe := t.members[j]
	off := t.sigOff(kind, t.me)
	if dst := t.w.peers[pe]; dst != nil {
		atomic.StoreUint64((*uint64)(unsafe.Pointer(&dst[off])), op.e)
		return nil
	}
	if err := t.w.paths[pe].putSignal(off, nil, off, SignalSet, op.e); err != nil {
		return t.w.pathError(op.call, pe, err)
	}
	return nil
}

// wait waits until this PE's word kind[j] reaches the call's epoch.
func (op *collOp) wait(kind, j int, what string) error {
	return op.waitFor(kind, j, op.e, what)
}

func (op *collOp) waitFor(kind, j int, v uint64, what string) error {
	return op.waitWord(op.t.sigOff(kind, j), j, v, what)
}

// waitWord waits until the word at off of this PE's heap, which team PE j sets, reaches v.
func (op *collOp) waitWord(off uint64, j int, v uint64, what string) error {
	t := op.t
	w := t.w
	if w.loadWord(off, 8) >= v {
		return nil
	}
	sp := w.spin(op.ctx, op.call)
	// A PE that left cleanly after doing its part (a barrier's header sent) does not end a wait
	// for another, as the World's barrier promised before it became a header exchange.
	sp.on, sp.waitsOn = t.members[j], true
	for w.loadWord(off, 8) < v {
		if err := sp.next(func() string {
			if what == "" {
				what = "enter " + op.call
			}
			return fmt.Sprintf("PE %d (team PE %d of %s) to %s (call %d on the team; last signal %#x)", t.members[j], j, t.name, what, op.e, w.loadWord(off, 8))
		}); err != nil {
			return err
		}
	}
	return nil
}

// finish ends a call: nothing is left to wait for (every algorithm awaits its own signals).
func (op *collOp) finish() {}

// Sync waits until every PE of the team has reached it (shmem_team_sync), without completing
// outstanding operations.
func (t *Team) Sync(ctx context.Context) error {
	return t.sync(ctx, "Sync", callSync)
}

// Barrier completes this PE's operations (as Quiet), then waits until every PE of the team has
// reached it.
func (t *Team) Barrier(ctx context.Context) error {
	if err := t.check("Barrier"); err != nil {
		return err
	}
	if err := t.w.Quiet(); err != nil {
		return err
	}
	if err := t.sync(ctx, "Barrier", callBarrier); err != nil {
		return err
	}
	t.w.acquire() // a barrier acquires, as BarrierAll does
	return nil
}

func (t *Team) sync(ctx context.Context, call string, id collCall) error {
	if err := t.check(call); err != nil {
		return err
	}
	release, err := t.gate(call)
	if err != nil {
		return err
	}
	defer release()
	t.w.syncPoint()
	op, err := t.begin(ctx, call, header{call: id}, nil)
	if err != nil {
		return err
	}
	op.finish()
	return nil
}
