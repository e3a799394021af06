package shmem

import (
	"context"
	"errors"
	"fmt"

	"github.com/roxamen/roxamen/internal/env"
	"github.com/roxamen/roxamen/shmem/internal/coll"
)

// The host collectives run on the engine of shmem/internal/coll (its package documentation has
// the protocol: the space, the epochs, the header exchange, the algorithms). This file is the seam:
// the World as the engine sees it (engineWorld), and the machinery Init sets up.
//
// The World's own collective calls (BarrierAll, SyncAll, Malloc, Calloc, Align, Free, Realloc)
// are calls of TeamWorld's sequence too (inSequence): each takes an epoch and exchanges headers
// like a team call, so that a PE at a World call while another is at a TeamWorld collective fails
// with ErrMismatch at once, naming both PEs and both calls, and the calls after it stay in step.

// collState is a World's collective machinery.
type collState struct {
	eng     *coll.Engine
	world   *Team
	shared  *Team
	everyPE bool // mapsEveryPE, asked by every World call
}

// refusalKinds are the error kinds a refusal names in a header (its code is the index).
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

// initColl reserves the collective space and makes TeamWorld and TeamShared. Called by Init on
// every PE at the same point, before any user allocation.
func (w *World) initColl(nodes []string) error {
	algo, _ := env.CollAlgo.String()
	cfg := coll.Config{PE: w.pe, NPEs: w.npes, Nodes: nodes, HeapSize: w.heapSize, Teams: MaxTeams, Algo: algo,
		Kinds: coll.Kinds{Mismatch: ErrMismatch, BadArgument: ErrBadArgument, TeamLimit: ErrTeamLimit, Refusals: refusalKinds}}
	eng, err := coll.New((*engineWorld)(w), cfg, func(size int) (uint64, error) {
		w.allocMu.Lock()
		off, err := w.heap.Alloc(uint64(size), 0)
		w.allocMu.Unlock()
		if err != nil {
			return 0, err
		}
		return off, w.zero("Init", off, size)
	})
	if err != nil {
		return err
	}
	c := &collState{eng: eng, everyPE: w.mapsEveryPENow()}
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
	return nil
}

// engineWorld is the World as the collectives' engine reaches it (coll.World): the heaps, the
// paths to them, waits and errors.
type engineWorld World

func (e *engineWorld) w() *World { return (*World)(e) }

func (e *engineWorld) Mapped(pe int) []byte { return e.peers[pe] }

func (e *engineWorld) LoadWord(off uint64) uint64 { return e.w().loadWord(off, 8) }

func (e *engineWorld) WaitWord(ctx context.Context, call string, pe int, off, v uint64, what fmt.Stringer) error {
	w := e.w()
	sp := w.spin(ctx, call)
	// A PE that left cleanly after doing its part (a barrier's header sent) does not end a wait
	// for another, as the World's barrier promised before it became a header exchange.
	sp.on, sp.waitsOn = pe, true
	for w.loadWord(off, 8) < v {
		if err := sp.next(func() string { return what.String() }); err != nil {
			return err
		}
	}
	return nil
}

func (e *engineWorld) Put(call string, pe int, off uint64, data []byte) error {
	if err := e.paths[pe].put(off, data); err != nil {
		return e.w().pathError(call, pe, err)
	}
	return nil
}

func (e *engineWorld) Get(call string, pe int, off uint64, buf []byte) error {
	if err := e.paths[pe].get(off, buf); err != nil {
		return e.w().pathError(call, pe, err)
	}
	return nil
}

func (e *engineWorld) PutSignal(call string, pe int, off uint64, data []byte, sig, v uint64) error {
	if err := e.paths[pe].putSignal(off, data, sig, SignalSet, v); err != nil {
		return e.w().pathError(call, pe, err)
	}
	return nil
}

// Fence: stores to a mapped heap are atomics in program order already; a device path completes
// each call before it returns; the NIC path (and the reordering path) needs the transport's fence.
func (e *engineWorld) Fence(call string, pe int) error {
	r, ok := e.paths[pe].(remote)
	if !ok {
		return nil
	}
	if err := r.t.Fence(r.pe); err != nil {
		return e.w().pathError(call, pe, err)
	}
	return nil
}

func (e *engineWorld) Reorders() bool { return e.reorder != nil }

func (e *engineWorld) SetWord(call string, pe int, off, v uint64) error {
	return e.w().syncSignal(call, pe, off, v)
}

func (e *engineWorld) HasNIC() bool { return e.transport != nil }

// Rejoin completes, on the NIC path, the protocols of the World calls (see sparse) that some PE
// ran at this place of TeamWorld's sequence and this PE did not, once a header exchange has shown
// that the PEs were at different calls: a dissemination barrier's epoch is skipped (its words of
// that epoch are never awaited again: the next barrier of the same parity waits for an epoch two
// higher), an agreement through the bootstrap is given a contribution, so that the bootstrap's
// sequence and the barrier's epochs stay the same on every PE.
func (e *engineWorld) Rejoin(call string, seen []coll.Seen, me int) error {
	w := e.w()
	if w.mapsEveryPE() {
		return nil // there the World's calls are header exchanges alone
	}
	proto := func(s coll.Seen) int {
		switch {
		case s.Call < coll.CallBarrierAll || s.Call > coll.CallFinalize:
			return 0 // a team call: the header exchange alone
		case !s.Refused && barrierCall(s.Call):
			return 1
		}
		return 2
	}
	own := proto(seen[me])
	var barrier, agree bool
	for _, s := range seen {
		p := proto(s)
		barrier = barrier || p == 1 && own != 1
		agree = agree || p == 2 && own != 2
	}
	if barrier {
		w.barrier.epoch++
	}
	if agree {
		ctx, cancel := context.WithTimeout(context.Background(), w.timeout)
		defer cancel()
		if _, err := w.boot.Allgather(ctx, []byte(call)); err != nil {
			return &Error{Call: call, PE: w.pe, Kind: kindOf(err, ErrPEFailed), Err: err}
		}
	}
	return nil
}

func (e *engineWorld) Errorf(call string, kind error, format string, args ...any) error {
	return e.w().errorf(call, kind, format, args...)
}

var _ coll.World = (*engineWorld)(nil)
