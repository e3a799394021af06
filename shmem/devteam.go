package shmem

import (
	"fmt"
	"sync"
	"unsafe"

	"github.com/roxamen/roxamen/device"
	"github.com/roxamen/roxamen/kernels"
)

// The device team table (kernels.TeamTable, include/roxamen/state.h): the teams of this PE as
// kernels name them. One table per PE, shared by every module it loads (the runtime's, shmem's
// own and the user's: State.Teams is the same address in all of them), so a team's handle is the
// same in every module and on every member: it is the team's slot, which the split agreed on
// (Team.Handle). World and shared are slots 0 and 1; every team a split makes is written into
// its slot when it is made and cleared (Size 0) when it is destroyed, so a kernel that still
// names it records ROXSHMEM_CALL_BAD_TEAM, which the host reports as ErrTeamDestroyed.
//
// Each slot has a device workspace (TeamDesc.WSOff, WSBytes) reserved at Init at the same heap
// offset on every PE, apart from the host collectives' space: the device protocol keeps its own
// round counters there. It is zero at Init and zeroed again by Destroy (after Destroy's exchange,
// so no member's device code still writes into it; a member can write into it for the next team
// of that slot only after this PE has taken part in the split that makes it).
//
// Teams are strided on the device (start, stride, size). A team whose members are not (the
// shared team where the PEs of a node are not evenly spaced) keeps Size 0 on the device, and a
// kernel naming it records a bad team.
type devTeams struct {
	mu    sync.Mutex
	table kernels.TeamTable
	names [kernels.MaxTeams]string // the team each slot holds or last held, for messages
	dead  [kernels.MaxTeams]bool   // the slot's last team was destroyed
	ws    [kernels.MaxTeams][2]uint64
	dev   device.Ptr // the table in device memory (GPU backends); 0 on the host backend
}

// device workspace sizes: world and shared get scratch halves of up to 1 MiB (heap/64), split
// teams of up to 128 KiB (heap/1024; a 1 GiB heap gives 20 MiB in all), and never below the least
// a team may have. A round moves at most a scratch half, so the halves bound how many rounds (and
// waits for the members) a large collective takes.
func devWSSizes(heap int64) (big, small uint64) {
	clamp := func(v, most int64) uint64 {
		return uint64(min(max(v, int64(kernels.TeamWSMin)), most)) &^ 63
	}
	return clamp(heap/64, kernels.TeamWSData+2<<20), clamp(heap/1024, kernels.TeamWSData+2<<17)
}

// initDevTeams reserves the device workspaces and fills the table with TeamWorld and TeamShared;
// on a GPU it puts the table in device memory and links it into the runtime's modules. Every PE
// calls it at the same point of Init. A heap too small for the workspaces (they would take more
// than a quarter of it) gets none: device collectives then record ROXSHMEM_BAD_ARG_WORKSPACE.
func (w *World) initDevTeams() error {
	dt := &devTeams{}
	dt.table.Magic = kernels.TeamMagic
	dt.table.NTeams = kernels.MaxTeams
	switch w.teams.eng.Algo() {
	case "oneshot":
		dt.table.CollAlgo = kernels.CollOneshot
	case "twoshot":
		dt.table.CollAlgo = kernels.CollTwoshot
	}
	big, small := devWSSizes(w.heapSize)
	if total := 2*big + (kernels.MaxTeams-2)*small; total <= uint64(w.heapSize)/4 {
		w.allocMu.Lock()
		base, err := w.heap.Alloc(total, 64)
		w.allocMu.Unlock()
		if err != nil {
			return fmt.Errorf("reserving %d bytes of device team workspace: %w", total, err)
		}
		if err := w.zero("Init", base, int(total)); err != nil {
			return err
		}
		off := base
		for s := range kernels.MaxTeams {
			size := small
			if s < 2 {
				size = big
			}
			dt.ws[s] = [2]uint64{off, size}
			off += size
		}
	}
	if w.gpu != nil && w.gpu.runtimeMod != nil {
		rt := w.gpu
		p, err := w.dev.Alloc(int(unsafe.Sizeof(dt.table)))
		if err != nil {
			return fmt.Errorf("allocating the device team table: %w", err)
		}
		dt.dev = p
		rt.state.Teams = uint64(p)
	}
	w.dteams = dt
	w.devTeamMade(w.teams.world)
	w.devTeamMade(w.teams.shared)
	if w.gpu != nil && w.gpu.runtimeMod != nil {
		for _, m := range []device.Module{w.gpu.runtimeMod, w.gpu.aux} {
			if err := w.gpu.fillState(m); err != nil {
				return err
			}
		}
	}
	return nil
}

// strided returns (start, stride) of members in world PE numbers, ok false when they are not
// evenly spaced.
func strided(members []int) (start, stride int, ok bool) {
	start, stride = members[0], 1
	if len(members) > 1 {
		stride = members[1] - members[0]
	}
	for i, pe := range members {
		if pe != start+i*stride {
			return 0, 0, false
		}
	}
	return start, stride, stride >= 1
}

// devTeamMade writes team t into its slot of the device table.
func (w *World) devTeamMade(t *Team) {
	dt := w.dteams
	if dt == nil || t == nil {
		return
	}
	dt.mu.Lock()
	defer dt.mu.Unlock()
	d := &dt.table.Team[t.slot]
	*d = kernels.TeamDesc{MyIndex: -1}
	dt.names[t.slot], dt.dead[t.slot] = t.name, false
	if start, stride, ok := strided(t.members); ok {
		d.Start, d.Stride, d.Size, d.MyIndex = int32(start), int32(stride), int32(len(t.members)), int32(t.me)
		d.WSOff, d.WSBytes = dt.ws[t.slot][0], dt.ws[t.slot][1]
	}
	dt.publish(w)
}

// devTeamDestroyed clears t's slot and zeroes its workspace for the slot's next team.
func (w *World) devTeamDestroyed(t *Team) error {
	dt := w.dteams
	if dt == nil {
		return nil
	}
	dt.mu.Lock()
	defer dt.mu.Unlock()
	dt.table.Team[t.slot] = kernels.TeamDesc{MyIndex: -1}
	dt.dead[t.slot] = true
	if err := dt.publish(w); err != nil {
		return err
	}
	if ws := dt.ws[t.slot]; ws[1] != 0 {
		return w.zero("Destroy", ws[0], int(ws[1]))
	}
	return nil
}

// publish copies the table to the device (GPU backends); the host backend's kernels read the
// table where it is. Called with dt.mu held.
func (dt *devTeams) publish(w *World) error {
	if dt.dev == 0 {
		return nil
	}
	b := unsafe.Slice((*byte)(unsafe.Pointer(&dt.table)), unsafe.Sizeof(dt.table))
	if err := w.dev.CopyHtoD(dt.dev, b); err != nil {
		return &Error{Call: "team table", PE: w.pe, Kind: ErrPEFailed, Detail: "copying the device team table", Err: err}
	}
	return nil
}

// describe names the team a device handle refers to, for a recorded bad-team error.
func (dt *devTeams) describe(handle int) (kind error, detail string) {
	if dt == nil {
		return ErrBadArgument, fmt.Sprintf("a kernel named team handle %d, but this PE has no device team table", handle)
	}
	dt.mu.Lock()
	defer dt.mu.Unlock()
	if handle < 0 || handle >= kernels.MaxTeams {
		return ErrBadArgument, fmt.Sprintf("a kernel named team handle %d, want 0 <= handle < %d", handle, kernels.MaxTeams)
	}
	if dt.dead[handle] {
		return ErrTeamDestroyed, fmt.Sprintf("a kernel named team handle %d (%s), which was destroyed", handle, dt.names[handle])
	}
	if dt.names[handle] != "" && dt.table.Team[handle].Size == 0 {
		return ErrBadArgument, fmt.Sprintf("a kernel named team handle %d (%s), whose members are not evenly spaced (device teams are strided)", handle, dt.names[handle])
	}
	return ErrNotInTeam, fmt.Sprintf("a kernel named team handle %d, which names no team of this PE", handle)
}

// Handle returns the team's device handle (roxshmem_team_t), to pass to kernels: the same number
// on every member and in every module; kernels.TeamInvalid for a nil or destroyed team.
func (t *Team) Handle() int32 {
	if t == nil || t.destroyed.Load() {
		return kernels.TeamInvalid
	}
	return int32(t.slot)
}
