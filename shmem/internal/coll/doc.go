// Package coll is the engine under shmem's host collectives: the byte-level protocol every team
// call runs (splits, Destroy, Sync, Barrier, Broadcast, FCollect, Collect, AllToAll, AllToAlls,
// AllReduce, ReduceScatter) and the World's own calls that share TeamWorld's sequence
// (BarrierAll, SyncAll, the allocation calls, Finalize).
//
// It owns:
//   - the space: MaxTeams slots reserved at Init at the same heap offset on every PE, each a
//     control area of signal words (one per team PE and kind) and a scratch area of two halves
//     (parities), a half split into one region per team PE, each a 64-byte header followed by a
//     payload (engine.go);
//   - the epochs and the header exchange that starts every call, and the mismatch and refusal
//     reports it makes (header.go, exchange.go);
//   - the algorithms (one-shot, two-shot, ring and hierarchical chains, gather, all-to-all) and
//     the choice among them (algo.go, move.go, reduce.go, ring.go);
//   - the reducer: the folds, in team PE order, over every element type (reducer.go), whose
//     vector loops are internal/simd's.
//
// Package shmem keeps the API: it checks a call's typed arguments, turns them into heap offsets,
// an element kind and counts, serializes the calls of a team (its gate) and calls the engine. The
// engine reaches the heaps and the transport only through World, which shmem implements.
//
// Epochs. Every collective call on a team is numbered (its epoch, e); every signal word only grows
// and holds the epoch of the last signal. A call starts with the header exchange: each PE writes
// its header (the call, element type, operation, algorithm, counts, root) into its region of every
// other member's half e%2, with the payload of a one-shot algorithm behind it, then sets its
// header word there to e; it then waits for every member's header word to reach e and checks that
// the headers agree (the Mismatch kind names both PEs and values otherwise). Over load/store the
// flag a receiver polls is the header's own first word (the epoch, stored last), so the header
// and a small payload arrive with the flag's cache line and the next; over the NIC path it is the
// member's sigHeader word, set after the data (a put-with-signal). The scratch is zeroed at Init
// and by Destroy, so that a team made later on a slot, whose regions may lie elsewhere in it,
// never reads old payload bytes as a header word. The exchange is the entry barrier; nothing is
// written to a user's destination before it. A PE can write into half e%2 of another for epoch
// e+2 only after finishing e+1, which needed that PE's e+1 header, sent after it had finished with
// epoch e: two halves are enough, with no other flow control.
//
// Every signal a PE is sent in a call is awaited by it in that call, so a team's words are settled
// when a call returns everywhere; a team made later on the same slot starts its epochs above every
// epoch its members have used, so old values never satisfy a new wait.
//
// The World's calls on the NIC path (some PE not mapped here) send no header while they agree:
// an exchange with every PE would open a connection to each at a PE's first allocation. They take
// their epoch in TeamWorld's sequence all the same (NICCall) and watch for a header of that epoch,
// which a PE at a TeamWorld collective sends to every PE; on one, they leave their protocol for the
// header exchange, so that every PE ends the call with all headers, and the PEs not in a World
// call's protocol complete it (World.Rejoin).
//
// Concurrency: one call at a time per team on each PE (the caller's gate serializes them); several
// teams may run calls at once from different goroutines.
package coll

import (
	"context"
	"fmt"
)

// World is what the engine needs of a PE's view of the job: its heap, the other PEs' heaps and
// the paths to them. Package shmem implements it over its World. Offsets are symmetric heap
// offsets; pe is a World PE number; call names the user's call, for the errors. Every method
// that moves data returns an error that already names the call and the PE.
type World interface {
	// Mapped returns PE pe's heap where this process loads from and stores to it (this PE's own
	// where it is host memory), nil where pe is reached through a path (the NIC, a device heap).
	Mapped(pe int) []byte
	// LoadWord atomically reads the 8-byte word at off of this PE's heap (0 where a device heap
	// cannot be read).
	LoadWord(off uint64) uint64
	// WaitWord waits until this PE's word at off reaches v, which PE pe sets; what describes the
	// awaited state for the error of a wait that fails (a timeout, the context, a dead PE,
	// Finalize), and is asked only then.
	WaitWord(ctx context.Context, call string, pe int, off, v uint64, what fmt.Stringer) error

	// Put copies data into PE pe's heap at off; Get copies from it into buf.
	Put(call string, pe int, off uint64, data []byte) error
	Get(call string, pe int, off uint64, buf []byte) error
	// PutSignal copies data into PE pe's heap at off, then sets pe's word at sig to v: the data is
	// visible first.
	PutSignal(call string, pe int, off uint64, data []byte, sig, v uint64) error
	// Fence orders this PE's earlier deliveries to pe before its later ones.
	Fence(call string, pe int) error

	// Reorders reports whether puts-with-signal may be delivered out of order
	// (ROX_DELIVERY=reorder), and SetWord sets pe's word at off to v on the runtime's own
	// channel there, at once and in order.
	Reorders() bool
	SetWord(call string, pe int, off, v uint64) error
	// HasNIC reports whether a NIC transport was started (some PE is reached through it).
	HasNIC() bool
	// Rejoin is called where a TeamWorld call's header exchange found World calls of another kind
	// (seen: each PE's call, me: this PE's index): on the NIC path this PE completes the protocols
	// of those calls that its own call did not run (see NICCall); elsewhere it does nothing.
	Rejoin(call string, seen []Seen, me int) error

	// Errorf makes the error of call, of the given kind (one of Kinds'), with a detail.
	Errorf(call string, kind error, format string, args ...any) error
}

// Kinds are the error kinds of the engine's errors, the caller's (matched with errors.Is).
type Kinds struct {
	Mismatch    error   // the PEs' calls or arguments differ
	BadArgument error   // an argument that only the exchange shows wrong (Collect's destination)
	TeamLimit   error   // no slot free on every PE of a split
	Refusals    []error // what a refusal's code names, by index (ReasonCode)
}

// Config is what the engine learns at Init.
type Config struct {
	PE, NPEs int
	Nodes    []string // each PE's node
	HeapSize int64
	Teams    int    // how many slots (teams live at once); at most 64
	Algo     string // ROX_COLL_ALGO: "", "oneshot", "twoshot", "ring", "hier"
	Kinds    Kinds
}
