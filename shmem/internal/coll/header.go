package coll

import (
	"encoding/binary"
	"fmt"
)

// Call identifies a collective call in headers.
type Call uint8

const (
	CallSplit Call = iota + 1
	CallDestroy
	CallSync
	CallBarrier
	CallBroadcast
	CallFCollect
	CallCollect
	CallAllToAll
	CallAllToAlls
	CallAllReduce
	CallReduceScatter
	// the World's own collective calls, numbered in TeamWorld's sequence
	CallBarrierAll
	CallSyncAll
	CallMalloc
	CallCalloc
	CallAlign
	CallFree
	CallRealloc
	CallFinalize
)

// worldCall is whether c is one of the World's own calls rather than a team call.
func worldCall(c Call) bool { return c >= CallBarrierAll && c <= CallFinalize }

var callNames = map[Call]string{
	CallSplit: "split", CallDestroy: "Destroy", CallSync: "Sync", CallBarrier: "Barrier",
	CallBroadcast: "Broadcast", CallFCollect: "FCollect", CallCollect: "Collect", CallAllToAll: "AllToAll",
	CallAllToAlls: "AllToAlls", CallAllReduce: "AllReduce", CallReduceScatter: "ReduceScatter",
	CallBarrierAll: "BarrierAll", CallSyncAll: "SyncAll", CallMalloc: "Malloc", CallCalloc: "Calloc",
	CallAlign: "Align", CallFree: "Free", CallRealloc: "Realloc", CallFinalize: "Finalize",
}

func (c Call) String() string {
	if s, ok := callNames[c]; ok {
		return s
	}
	return fmt.Sprintf("call(%d)", uint8(c))
}

// header is what each PE tells the others about its call.
type header struct {
	epoch  uint64
	call   Call
	kind   Kind
	op     Op
	algo   algorithm
	count  int64 // elements per PE (bytes for untyped calls)
	root   int64
	extra  int64
	extra2 int64
	word   uint64 // free-form (splits: the free slots; data calls: the source's offset)
	word2  uint64 // splits: the PE's highest epoch; data calls: the destination's offset
	// refused: the PE's argument check refused the call; why is the kind (Kinds.Refusals). The
	// call still takes its place in the team's sequence, and fails on every PE.
	refused bool
	why     uint8
}

func btoi(b bool) int {
	if b {
		return 1
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
		call:  Call(b[8]), kind: Kind(b[9]), op: Op(b[10]), algo: algorithm(b[11]),
		refused: b[12] != 0, why: b[13],
		count:  int64(binary.LittleEndian.Uint64(b[16:])),
		root:   int64(binary.LittleEndian.Uint64(b[24:])),
		extra:  int64(binary.LittleEndian.Uint64(b[32:])),
		extra2: int64(binary.LittleEndian.Uint64(b[40:])),
		word:   binary.LittleEndian.Uint64(b[48:]),
		word2:  binary.LittleEndian.Uint64(b[56:]),
	}
}

// mismatch compares two PEs' headers for the same call and says how they differ, or "".
func mismatch(a, b *header) string {
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
	case CallSplit:
		if a.count != b.count || a.root != b.root || a.extra != b.extra {
			if a.extra2 == 2 {
				return fmt.Sprintf("xrange %d while PE %%d passes %d", a.count, b.count)
			}
			return fmt.Sprintf("(start %d, stride %d, size %d) while PE %%d passes (%d, %d, %d)", a.count, a.root, a.extra, b.count, b.root, b.extra)
		}
	case CallCollect:
		// counts differ by design; destinations are checked against the total by the caller
	case CallBroadcast:
		if a.root != b.root {
			return fmt.Sprintf("root %d while PE %%d has root %d", a.root, b.root)
		}
		name = "elements"
	case CallAllToAlls:
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

// refusal is the kind a refusal's code names (the bad-argument kind for a code it does not know).
func (e *Engine) refusal(why uint8) error {
	if r := e.cfg.Kinds.Refusals; int(why) < len(r) {
		return r[why]
	}
	return e.cfg.Kinds.BadArgument
}

// disagree is the error of this PE's call when team PE j's header, for the same epoch, differs
// from this PE's, or nil.
func (t *Team) disagree(call string, a, b *header, j int) error {
	e := t.e
	w := e.w
	me := e.cfg.PE
	pe := t.members[j]
	mis := e.cfg.Kinds.Mismatch
	switch {
	case a.refused:
		return nil // this PE refused the call: its own error is the one it returns
	case b.refused:
		what := b.call.String()
		if b.call != a.call {
			what += " (while this PE called " + a.call.String() + ")"
		}
		return w.Errorf(call, mis, "PE %d (team PE %d of %s) refused its %s: %v (its own error says which); the call fails on every PE of the team", pe, j, t.name, what, e.refusal(b.why))
	}
	if worldCall(a.call) || worldCall(b.call) {
		// The World's calls and TeamWorld's collectives are one sequence: say it in its words.
		var m string
		switch {
		case a.call != b.call:
			m = fmt.Sprintf("PE %d's collective call #%d is %s, PE %d's is %s: every PE must make the same collective calls in the same order", me, a.epoch, a.call, pe, b.call)
		case (a.call == CallMalloc || a.call == CallCalloc) && a.count != b.count:
			m = fmt.Sprintf("PE %d asked for %d bytes, PE %d for %d", me, a.count, pe, b.count)
		case a.call == CallAlign && (a.count != b.count || a.root != b.root):
			m = fmt.Sprintf("PE %d asked for %d bytes aligned to %d, PE %d for %d aligned to %d", me, a.count, a.root, pe, b.count, b.root)
		case a.call == CallFree && (a.count != b.count || a.root != b.root):
			m = fmt.Sprintf("PE %d frees allocation #%d (heap offset %d), PE %d #%d (heap offset %d)", me, a.root, a.count, pe, b.root, b.count)
		case a.call == CallRealloc && (a.count != b.count || a.root != b.root):
			m = fmt.Sprintf("PE %d resizes the allocation at heap offset %d to %d bytes, PE %d the one at %d to %d", me, a.count, a.root, pe, b.count, b.root)
		default:
			return nil
		}
		return w.Errorf(call, mis, "%s", m)
	}
	if m := mismatch(a, b); m != "" {
		return w.Errorf(call, mis, "on %s: PE %d (team PE %d) "+m, t.name, me, t.me, pe)
	}
	return nil
}
