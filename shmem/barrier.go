package shmem

import (
	"context"
	"fmt"
	"math/bits"

	"github.com/roxamen/roxamen/nic"
	"github.com/roxamen/roxamen/shmem/internal/coll"
)

// barrierState is a dissemination barrier over the symmetric heap: in round k each PE signals a
// word of PE (me + 2^k) mod n and waits for its own round-k word to show the barrier's epoch
// (see sync). Nothing is reset between barriers: a round-k word of PE j is written only by PE
// j - 2^k.
type barrierState struct {
	flags  Sym[uint64] // two words per round (epochs alternate), each round on its own cache line
	rounds int
	epoch  uint64 // guarded by the World's collective sequence
}

const flagStride = 8 // uint64s per cache line

func (w *World) initBarrier() error {
	rounds := 0
	if w.npes > 1 {
		rounds = bits.Len(uint(w.npes - 1))
	}
	w.allocMu.Lock()
	defer w.allocMu.Unlock()
	// Reserved before any user allocation, so at the same offset on every PE.
	off, err := w.heap.Alloc(uint64(max(rounds, 1)*flagStride*8), 0)
	if err != nil {
		return err
	}
	n := max(rounds, 1) * flagStride
	a := &allocation{call: "the barrier", off: off, size: n * 8} // never freed, never in allocs
	w.barrier = barrierState{flags: Sym[uint64]{w: w, a: a, off: off, n: n}, rounds: rounds}
	return nil
}

// BarrierAll completes this PE's operations (as Quiet) and waits until every PE has reached the
// barrier (shmem_barrier_all). It returns an error naming the PE when a PE dies, ErrMismatch
// naming both PEs and calls when a PE is at another collective call of TeamWorld's sequence, and
// ErrTimeout after ROX_TIMEOUT.
func (w *World) BarrierAll(ctx context.Context) error {
	if err := w.check("BarrierAll"); err != nil {
		return err
	}
	c, err := w.coll.begin(w, "BarrierAll")
	if err != nil {
		return err
	}
	defer c.end()
	if err := w.quiet(c.call, -1); err != nil {
		return err
	}
	if err := c.inSequence(ctx, coll.CallBarrierAll, 0, 0); err != nil {
		return err
	}
	w.acquire()
	return nil
}

// SyncAll waits until every PE has reached it, without completing outstanding operations
// (shmem_sync_all).
func (w *World) SyncAll(ctx context.Context) error {
	if err := w.check("SyncAll"); err != nil {
		return err
	}
	c, err := w.coll.begin(w, "SyncAll")
	if err != nil {
		return err
	}
	defer c.end()
	w.syncPoint() // sync_all orders the PE's completed plain accesses
	return c.inSequence(ctx, coll.CallSyncAll, 0, 0)
}

// inSequence gives the World's collective call c its place in TeamWorld's sequence of calls: a
// header exchange on TeamWorld carrying the call and its arguments (a, b). The World's calls and
// TeamWorld's collectives are thus one sequence, so that a PE at another call of either kind (or
// at the same call with other arguments) fails at once with ErrMismatch naming both PEs and both
// calls, and later calls stay in step. The exchange waits for every PE: it is a barrier
// (without completing anything: BarrierAll quiets first).
func (c *collective) inSequence(ctx context.Context, id coll.Call, a, b int64) error {
	return c.exchange(ctx, worldCall{id: id, a: a, b: b})
}

// worldCall is a World call as it takes its place in the sequence: the call and its arguments,
// or the code of why this PE refused it.
type worldCall struct {
	id      coll.Call
	a, b    int64
	refused bool
	why     uint8
}

// refuse ends World call `call`, refused on this PE by its argument check (err), as a team call's
// refusal ends (Team.refuse): it still takes its place in the sequence, and every other PE's call
// fails at once naming this PE. It returns err.
func (w *World) refuse(call string, id coll.Call, err error) error {
	c, cerr := w.coll.begin(w, call)
	if cerr != nil || w.teams == nil {
		if cerr == nil {
			c.end()
		}
		return err
	}
	defer c.end()
	_ = c.exchange(context.Background(), worldCall{id: id, refused: true, why: refusalCode(err)})
	return err
}

func (c *collective) exchange(ctx context.Context, h worldCall) error {
	if ctx == nil {
		ctx = context.Background()
	}
	t := c.w.teams.world // its calls are serialized by the World's gate, which c holds
	c.number()
	if !c.w.mapsEveryPE() {
		return c.sparse(ctx, h)
	}
	if h.refused {
		return t.c.Refuse(ctx, c.call, h.id, h.why)
	}
	return t.c.WorldCall(ctx, c.call, h.id, h.a, h.b)
}

// sparse is exchange where some PE is reached over the NIC path (other nodes, or ROX_TRANSPORT
// forcing it): a header exchange with every PE would open a transport connection to each at a
// PE's first allocation, and connections are made only to the peers a PE talks to. So there the
// World's calls run protocols that reach few peers: allocations (and refusals) agree through the
// bootstrap, barriers run the dissemination barrier (log2 N peers). They still take their place in
// TeamWorld's sequence (coll.NICCall): their waits watch for a header of this call from a PE at a
// TeamWorld collective, or for a barrier word of this call from a PE at a barrier, and on seeing
// one leave for the header exchange, so that a World call against a TeamWorld collective (or
// another World call) fails at once with ErrMismatch on every PE, naming both calls.
func (c *collective) sparse(ctx context.Context, h worldCall) error {
	c.nic = c.w.teams.world.c.NICCall(ctx, c.call, h.id, h.a, h.b, h.refused, h.why)
	defer func() { c.nic = nil }()
	switch {
	case h.refused:
		return c.agree(refusedArg, uint64(h.why))
	case barrierCall(h.id):
		return c.w.sync(ctx, c)
	}
	return c.agree(uint64(h.a), uint64(h.b))
}

// barrierCall is whether World call id runs the dissemination barrier on the NIC path (the
// others agree through the bootstrap).
func barrierCall(id coll.Call) bool { return id == coll.CallBarrierAll || id == coll.CallSyncAll }

// elsewhere is the error of a World call on the NIC path that saw a PE at another call: the
// header exchange's mismatch (or nil where this PE refused the call, whose own error its caller
// returns).
func (c *collective) elsewhere() error {
	return c.nic.Exchange()
}

// barrierElsewhere reports, for a World call on the NIC path that agrees through the bootstrap,
// whether a barrier word of this call's place in the sequence has come from a PE at a barrier
// (BarrierAll, SyncAll) instead. The number must be this call's: a PE that has finished this
// agreement may already signal the barrier that follows it (Free's, or the next call's).
func (c *collective) barrierElsewhere() bool {
	b := &c.w.barrier
	e := b.epoch + 1
	slot := int(e % 2)
	id := collectiveID(c.call)
	for k := 0; k < b.rounds; k++ {
		v := load(b.flags, k*flagStride+slot)
		if uint32(v>>32) == uint32(e) && v>>8&0xffffff == c.seq&0xffffff && v&0xff != id {
			return true
		}
	}
	return false
}

// refusedArg is the first argument a refused World call sends through agree on the NIC path.
const refusedArg = ^uint64(0)

// mapsEveryPE is whether this PE loads and stores every PE's heap (one node, no forced NIC
// path); every PE of a job answers alike.
func (w *World) mapsEveryPE() bool {
	if w.teams != nil {
		return w.teams.everyPE
	}
	return w.mapsEveryPENow()
}

// mapsEveryPENow is mapsEveryPE worked out from the mappings (fixed once Init has set them up).
func (w *World) mapsEveryPENow() bool {
	for _, p := range w.peers {
		if p == nil {
			return false
		}
	}
	return true
}

// barrier is a barrier as a step of collective c (an allocation call's, once its place in the
// sequence is taken).
func (c *collective) barrier(ctx context.Context) error {
	if err := c.w.quiet(c.call, -1); err != nil {
		return err
	}
	if err := c.w.sync(ctx, c); err != nil {
		return err
	}
	c.w.acquire()
	return nil
}

// sync runs one barrier as a step of collective c. In round k it sets slot e%2 of its peer's round-k
// counter to (epoch, c's sequence number, c's call) and waits for its own to show this epoch; the
// rest of the word proves that the sender is at the same collective call as this PE. A sender can
// be one barrier ahead, never two (it cannot leave barrier e+1 before this PE enters it), so two
// slots per round never hold a value of another epoch that looks current.
func (w *World) sync(ctx context.Context, c *collective) error {
	call := c.call
	if err := w.enter(call); err != nil {
		return err
	}
	defer w.leave()
	b := &w.barrier
	b.epoch++
	e := b.epoch
	mine := barrierWord(e, c.number(), c.call)
	slot := int(e % 2)
	// A mismatch is reported once every round is done: PEs further on wait for this PE's signals.
	var mismatch error
	for k := 0; k < b.rounds; k++ {
		peer := (w.pe + 1<<k) % w.npes
		if err := w.syncSignal(call, peer, b.flags.off+uint64((k*flagStride+slot)*8), mine); err != nil {
			return err
		}
		from := (w.pe - 1<<k + w.npes*2) % w.npes
		sp := w.spin(ctx, call)
		sp.on, sp.waitsOn = from, true // a PE that left cleanly after its rounds does not end this one
		for polls := 1; ; polls++ {
			// One look every 64 polls while spinning, at every poll once the wait sleeps.
			if c.nic != nil && (polls%64 == 0 || sp.sleep > 0) && c.nic.Arrived() {
				// A PE is at a TeamWorld collective (or left its own World call for the header
				// exchange): this barrier cannot complete. The others skip its epoch (Rejoin).
				return c.elsewhere()
			}
			v := load(b.flags, k*flagStride+slot)
			if uint32(v>>32) == uint32(e) {
				if v != mine && mismatch == nil {
					seq, id := v>>8&0xffffff, v&0xff
					mismatch = c.mismatch(from, seq|c.seq&^0xffffff, collectiveName(id), "")
				}
				break
			}
			if err := sp.next(func() string {
				return fmt.Sprintf("PE %d to arrive (barrier %d, round %d)", from, e, k)
			}); err != nil {
				return err
			}
		}
	}
	return mismatch
}

// barrierWord is what a barrier's signal carries: the epoch (32 bits), the low 24 bits of the
// collective's sequence number, and the call's number in collectiveCalls.
func barrierWord(epoch, seq uint64, call string) uint64 {
	return uint64(uint32(epoch))<<32 | (seq&0xffffff)<<8 | collectiveID(call)
}

// syncSignal sets a barrier word of peer. On the reordering path it goes on the runtime's own
// channel, ordered after nothing this PE has pending, as sync_all promises no more (a barrier's
// quiet has completed everything before it).
func (w *World) syncSignal(call string, peer int, off, v uint64) error {
	if w.reorder != nil {
		if err := w.enter(call); err != nil {
			return err
		}
		defer w.leave()
		if err := w.alive(call, peer); err != nil {
			return err
		}
		if _, err := w.reorder.AMOUnfenced(peer, nic.AMOSet, 8, off, v, 0); err != nil {
			return w.pathError(call, peer, err)
		}
		return nil
	}
	_, err := w.amo(call, peer, nic.AMOSet, 8, off, v, 0)
	return err
}
