package shmem

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/roxamen/roxamen/shmem/internal/coll"
)

// MaxTeams is how many teams a PE may have live at once, TeamWorld and TeamShared included
// (SHMEM_TEAM_WORLD and SHMEM_TEAM_SHARED are two of them). Each live team owns one of the slots
// of collective space reserved in every PE's symmetric heap at Init; splitting past the limit is
// an error (ErrTeamLimit) naming it. Destroy returns a team's slot.
const MaxTeams = 64

// Team error kinds, matched with errors.Is.
var (
	ErrTeamLimit     = fmt.Errorf("more than %d teams live at once (MaxTeams)", MaxTeams)
	ErrTeamDestroyed = errors.New("team destroyed")
	ErrNotInTeam     = errors.New("PE not in the team")
)

// Team is an ordered set of PEs that make collective calls together (shmem_team_t). Member i of a
// team is its PE i; MyPE and NPEs are this PE's number in the team and the team's size. A PE
// outside a team that a split made gets a nil *Team; every method of a nil team returns an error
// (or -1 / 0), never a fault.
//
// A Team's collective calls (splits, Destroy, barriers, reductions...) must be made by every
// member in the same order; goroutines of one PE that share a team are serialized (gate).
type Team struct {
	w       *World
	slot    int   // index of the collective space this team uses (the same on every member)
	members []int // world PE of each team PE
	me      int
	name    string

	mu        sync.Mutex // serializes this PE's collective calls on the team (TeamWorld's: the World's gate)
	destroyed atomic.Bool
	ungate    func() // t.release, made once

	c *coll.Team // the collectives' engine's side: epochs, the call in progress (guarded by mu)
}

func (w *World) newTeam(slot int, members []int, name string, epoch uint64) *Team {
	t := &Team{w: w, slot: slot, members: members, me: -1, name: name}
	t.ungate = t.release
	t.c = w.teams.eng.NewTeam(slot, members, name, epoch)
	for i, pe := range members {
		if pe == w.pe {
			t.me = i
		}
	}
	if t.me >= 0 {
		w.devTeamMade(t)
	}
	return t
}

// TeamWorld returns the team of every PE in the job (SHMEM_TEAM_WORLD); its PE numbers are the
// World's.
func (w *World) TeamWorld() *Team {
	if w == nil || w.teams == nil {
		return nil
	}
	return w.teams.world
}

// TeamShared returns the team of the PEs whose heaps this PE can load from and store to
// (SHMEM_TEAM_SHARED): the PEs of its node, in PE order. Where the NIC path is forced between PEs
// of one node (ROX_TRANSPORT=tcp|ucx) it is this PE alone, as Ptr returns nil for the others.
func (w *World) TeamShared() *Team {
	if w == nil || w.teams == nil {
		return nil
	}
	return w.teams.shared
}

func (t *Team) check(call string) error {
	if t == nil {
		return &Error{Call: call, PE: callerPE(), Kind: ErrNotInTeam, Detail: "nil team (this PE is outside the team the split made)"}
	}
	if err := t.w.check(call); err != nil {
		return err
	}
	if t.destroyed.Load() {
		return t.w.errorf(call, ErrTeamDestroyed, "team %s was destroyed", t.name)
	}
	return nil
}

// MyPE returns this PE's number in the team (shmem_team_my_pe), -1 for a nil or destroyed team.
func (t *Team) MyPE() int {
	if t == nil || t.destroyed.Load() {
		return -1
	}
	return t.me
}

// NPEs returns the team's size (shmem_team_n_pes), 0 for a nil or destroyed team.
func (t *Team) NPEs() int {
	if t == nil || t.destroyed.Load() {
		return 0
	}
	return len(t.members)
}

// WorldPE returns the World PE number of team PE pe, or -1 when pe is not a team PE number.
func (t *Team) WorldPE(pe int) int {
	if t == nil || pe < 0 || pe >= len(t.members) {
		return -1
	}
	return t.members[pe]
}

// String names the team and its members, for messages.
func (t *Team) String() string {
	if t == nil {
		return "<nil team>"
	}
	return t.name
}

// TranslatePE returns the number in team other of this team's PE pe (shmem_team_translate_pe),
// or -1 when that PE is not in other, pe is not in t, or either team is nil or destroyed.
func (t *Team) TranslatePE(pe int, other *Team) int {
	if t == nil || other == nil || t.destroyed.Load() || other.destroyed.Load() || pe < 0 || pe >= len(t.members) {
		return -1
	}
	wpe := t.members[pe]
	for i, m := range other.members {
		if m == wpe {
			return i
		}
	}
	return -1
}

// SplitStrided makes a team of the parent's PEs start, start+stride, ... (size of them)
// (shmem_team_split_strided). It is collective over the parent: every parent PE calls it with the
// same arguments (a mismatch is an ErrMismatch error naming both PEs and values); a parent PE that
// is not in the new team gets a nil team and a nil error.
func (t *Team) SplitStrided(ctx context.Context, start, stride, size int) (*Team, error) {
	const call = "SplitStrided"
	if err := t.check(call); err != nil {
		return nil, err
	}
	// The exchange comes first, so that a PE with other arguments is an error on every PE.
	slots, epoch, err := t.agreeSlots(ctx, call, 1, [3]int64{int64(start), int64(stride), int64(size)})
	if err != nil {
		return nil, err
	}
	n := len(t.members)
	if size < 1 || start < 0 || start >= n || (size > 1 && stride < 1) || start+(size-1)*stride >= n {
		t.w.teams.eng.ReleaseSlot(slots[0])
		return nil, t.w.errorf(call, ErrBadArgument, "start %d, stride %d, size %d does not fit the %d PEs of %s (want size >= 1, stride >= 1, start+(size-1)*stride < %d)", start, stride, size, n, t.name, n)
	}
	k := t.me - start
	if k < 0 || (stride > 0 && k%stride != 0) || (stride == 0 && k != 0) || (stride > 0 && k/stride >= size) {
		t.w.teams.eng.ReleaseSlot(slots[0])
		return nil, nil
	}
	members := make([]int, size)
	for i := range members {
		members[i] = t.members[start+i*stride]
	}
	return t.w.newTeam(slots[0], members, fmt.Sprintf("%s.strided(%d,%d,%d)", t.name, start, stride, size), epoch), nil
}

// Split2D splits the parent into a grid xrange PEs wide (shmem_team_split_2d): the x team of a PE
// is its row (parent PEs with the same pe / xrange), the y team its column (the same pe % xrange).
// The last row is short when xrange does not divide the parent's size. Collective over the parent;
// every parent PE is in one x team and one y team.
func (t *Team) Split2D(ctx context.Context, xrange int) (x, y *Team, err error) {
	const call = "Split2D"
	if err := t.check(call); err != nil {
		return nil, nil, err
	}
	slots, epoch, err := t.agreeSlots(ctx, call, 2, [3]int64{int64(xrange)})
	if err != nil {
		return nil, nil, err
	}
	n := len(t.members)
	if xrange < 1 {
		t.w.teams.eng.ReleaseSlot(slots[0])
		t.w.teams.eng.ReleaseSlot(slots[1])
		return nil, nil, t.w.errorf(call, ErrBadArgument, "xrange %d, want >= 1", xrange)
	}
	xrange = min(xrange, n)
	row, col := t.me/xrange, t.me%xrange
	var xs, ys []int
	for i := row * xrange; i < min((row+1)*xrange, n); i++ {
		xs = append(xs, t.members[i])
	}
	for i := col; i < n; i += xrange {
		ys = append(ys, t.members[i])
	}
	x = t.w.newTeam(slots[0], xs, fmt.Sprintf("%s.x%d", t.name, row), epoch)
	y = t.w.newTeam(slots[1], ys, fmt.Sprintf("%s.y%d", t.name, col), epoch)
	return x, y, nil
}

// agreeSlots is the collective part of a split (coll.Team.Split): the k lowest slots free on
// every parent PE become the new teams', and the arguments travel in the exchange, so a mismatch
// is caught here. It returns the slots and the epoch the new teams start at.
func (t *Team) agreeSlots(ctx context.Context, call string, k int, args [3]int64) ([]int, uint64, error) {
	release, err := t.gate(call)
	if err != nil {
		return nil, 0, err
	}
	defer release()
	return t.c.Split(ctx, call, k, args)
}

// Destroy releases the team (shmem_team_destroy). It is collective over the team's PEs: it waits
// for every member (as Sync) so that no member is still using the team's space. Later calls on the
// team fail with ErrTeamDestroyed. TeamWorld and TeamShared cannot be destroyed.
func (t *Team) Destroy(ctx context.Context) error {
	const call = "Destroy"
	if err := t.check(call); err != nil {
		return err
	}
	if t == t.w.teams.world || t == t.w.teams.shared {
		return t.w.errorf(call, ErrBadArgument, "%s is predefined and cannot be destroyed", t.name)
	}
	release, err := t.gate(call)
	if err != nil {
		return err
	}
	defer release()
	if err := t.c.Sync(ctx, call, coll.CallDestroy); err != nil {
		return err
	}
	if t.destroyed.Swap(true) {
		return t.w.errorf(call, ErrTeamDestroyed, "team %s was destroyed", t.name)
	}
	// Every member has sent its last header here (this call's): nothing writes this PE's scratch
	// of the slot any more. Zero it, so that a later team on the slot, whose regions may lie
	// elsewhere in it, finds no old header word that looks like one of its epochs.
	off, size := t.c.Scratch()
	err = t.w.zero(call, off, size)
	if derr := t.w.devTeamDestroyed(t); err == nil {
		err = derr
	}
	t.w.teams.eng.ReleaseSlot(t.slot)
	return err
}

// gate admits one collective call on t at a time. A call made while another goroutine's is in
// progress is refused with ErrConcurrent: the PEs could pair the two in different orders. On the
// world team the World's own collective calls (allocation, BarrierAll, SyncAll, Finalize) share
// the gate, so they are ordered with the team's collectives the same way on every PE.
func (t *Team) gate(call string) (release func(), err error) {
	if t == t.w.teams.world {
		// The World's collective gate (collectives.begin), taken here without allocating.
		q := &t.w.coll
		if !q.mu.TryLock() {
			cur := "another collective call"
			if p := q.current.Load(); p != nil {
				cur = *p
			}
			return nil, t.w.errorf(call, ErrConcurrent, "%s is in progress in another goroutine: collective calls must be made one at a time, in the same order on every PE", cur)
		}
		q.publish(call)
		q.last = call // for the message of a Finalize out of step
		// TeamWorld's own lock is not taken: every call on it, the World's included, holds q.mu.
		return t.ungate, nil
	}
	if !t.mu.TryLock() {
		return nil, t.w.errorf(call, ErrConcurrent, "another collective call on this team is in progress in another goroutine: collective calls must be made one at a time, in the same order on every PE")
	}
	return t.ungate, nil
}

// release ends what gate began.
func (t *Team) release() {
	if t == t.w.teams.world {
		t.w.coll.mu.Unlock()
		return
	}
	t.mu.Unlock()
}

// gateNames holds the collective calls' names, so that the gates can publish one without allocating.
var gateNames = func() []*string {
	var s []*string
	for _, n := range []string{"SplitStrided", "Split2D", "Destroy", "Sync", "Barrier", "Broadcast", "FCollect", "Collect", "AllToAll", "AllToAlls", "AllReduce", "ReduceScatter",
		"BarrierAll", "SyncAll", "Malloc", "Calloc", "Align", "Free", "Realloc", "Finalize"} {
		s = append(s, &n)
	}
	return s
}()

func gateName(call string) *string {
	for _, p := range gateNames {
		if *p == call {
			return p
		}
	}
	other := call // a copy, so that only this path allocates
	return &other
}
