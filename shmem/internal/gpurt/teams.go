package gpurt

import (
	"fmt"
	"sync"
	"unsafe"

	"github.com/roxamen/roxamen/device"
	"github.com/roxamen/roxamen/kernels"
)

// Teams is the device team table (kernels.TeamTable, include/roxamen/state.h): the teams of this
// PE as kernels name them. One table per PE, shared by every module it loads (the runtime's, the
// collectives' and the user's: State.Teams is the same address in all of them), so a team's
// handle is the same in every module and on every member: it is the team's slot, which the split
// agreed on (shmem's Team.Handle). World and shared are slots 0 and 1; every team a split makes is
// written into its slot when it is made and cleared (Size 0) when it is destroyed, so a kernel
// that still names it records ROXSHMEM_CALL_BAD_TEAM, which Describe reports as destroyed.
//
// Each slot has a device workspace (TeamDesc.WSOff, WSBytes) reserved at Init at the same heap
// offset on every PE, apart from the host collectives' space: the device protocol keeps its own
// round counters there. It is zero at Init and zeroed again by Destroyed (after the team's
// Destroy exchange, so no member's device code still writes into it; a member can write into it
// for the next team of that slot only after this PE has taken part in the split that makes it).
//
// Teams are strided on the device (start, stride, size). A team whose members are not (the
// shared team where the PEs of a node are not evenly spaced) keeps Size 0 on the device, and a
// kernel naming it records a bad team.
type Teams struct {
	w     World
	mu    sync.Mutex
	table kernels.TeamTable
	names [kernels.MaxTeams]string // the team each slot holds or last held, for messages
	dead  [kernels.MaxTeams]bool   // the slot's last team was destroyed
	ws    [kernels.MaxTeams][2]uint64
	dev   device.Ptr // the table in device memory (GPU backends); 0 on the host backend
}

// WorkspaceSizes are the device workspace sizes for a heap of heap bytes: world and shared get
// scratch halves of up to 1 MiB (heap/64), split teams of up to 128 KiB (heap/1024; a 1 GiB heap
// gives 20 MiB in all), and never below the least a team may have. A round moves at most a
// scratch half, so the halves bound how many rounds (and waits for the members) a large
// collective takes.
func WorkspaceSizes(heap int64) (big, small uint64) {
	clamp := func(v, most int64) uint64 {
		return uint64(min(max(v, int64(kernels.TeamWSMin)), most)) &^ 63
	}
	return clamp(heap/64, kernels.TeamWSData+2<<20), clamp(heap/1024, kernels.TeamWSData+2<<17)
}

// NewTeams reserves the device workspaces and makes an empty table; onDevice puts the table in
// device memory (GPU backends: link it with Runtime.SetTeamTable). algo is ROX_COLL_ALGO's choice
// for the host collectives ("oneshot", "twoshot", or another: the device's default). Every PE
// calls it at the same point of Init. A heap too small for the workspaces (they would take more
// than a quarter of it) gets none: device collectives then record ROXSHMEM_BAD_ARG_WORKSPACE.
func NewTeams(w World, algo string, onDevice bool) (*Teams, error) {
	dt := &Teams{w: w}
	dt.table.Magic = kernels.TeamMagic
	dt.table.NTeams = kernels.MaxTeams
	switch algo {
	case "oneshot":
		dt.table.CollAlgo = kernels.CollOneshot
	case "twoshot":
		dt.table.CollAlgo = kernels.CollTwoshot
	}
	big, small := WorkspaceSizes(w.HeapSize())
	if total := 2*big + (kernels.MaxTeams-2)*small; total <= uint64(w.HeapSize())/4 {
		base, err := w.Reserve(total)
		if err != nil {
			return nil, fmt.Errorf("reserving %d bytes of device team workspace: %w", total, err)
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
	if onDevice {
		p, err := w.Device().Alloc(int(unsafe.Sizeof(dt.table)))
		if err != nil {
			return nil, fmt.Errorf("allocating the device team table: %w", err)
		}
		dt.dev = p
	}
	return dt, nil
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

// Made writes a team into its slot: its name (for messages), its members in world PE numbers and
// this PE's index among them.
func (dt *Teams) Made(slot int, name string, members []int, me int) error {
	if dt == nil {
		return nil
	}
	dt.mu.Lock()
	defer dt.mu.Unlock()
	d := &dt.table.Team[slot]
	*d = kernels.TeamDesc{MyIndex: -1}
	dt.names[slot], dt.dead[slot] = name, false
	if start, stride, ok := strided(members); ok {
		d.Start, d.Stride, d.Size, d.MyIndex = int32(start), int32(stride), int32(len(members)), int32(me)
		d.WSOff, d.WSBytes = dt.ws[slot][0], dt.ws[slot][1]
	}
	return dt.publish()
}

// Destroyed clears a slot and zeroes its workspace for the slot's next team.
func (dt *Teams) Destroyed(slot int) error {
	if dt == nil {
		return nil
	}
	dt.mu.Lock()
	defer dt.mu.Unlock()
	dt.table.Team[slot] = kernels.TeamDesc{MyIndex: -1}
	dt.dead[slot] = true
	if err := dt.publish(); err != nil {
		return err
	}
	if ws := dt.ws[slot]; ws[1] != 0 {
		return dt.w.Zero(ws[0], int(ws[1]))
	}
	return nil
}

// publish copies the table to the device (GPU backends); the host backend's kernels read the
// table where it is (Table). Called with dt.mu held.
func (dt *Teams) publish() error {
	if dt.dev == 0 {
		return nil
	}
	b := unsafe.Slice((*byte)(unsafe.Pointer(&dt.table)), unsafe.Sizeof(dt.table))
	if err := dt.w.Device().CopyHtoD(dt.dev, b); err != nil {
		return errorf(KindPEFailed, err, "copying the device team table")
	}
	return nil
}

// Describe names the team a device handle refers to, for a recorded bad-team error.
func (dt *Teams) Describe(handle int) (Kind, string) {
	if dt == nil {
		return KindBadArgument, fmt.Sprintf("a kernel named team handle %d, but this PE has no device team table", handle)
	}
	dt.mu.Lock()
	defer dt.mu.Unlock()
	if handle < 0 || handle >= kernels.MaxTeams {
		return KindBadArgument, fmt.Sprintf("a kernel named team handle %d, want 0 <= handle < %d", handle, kernels.MaxTeams)
	}
	if dt.dead[handle] {
		return KindTeamDestroyed, fmt.Sprintf("a kernel named team handle %d (%s), which was destroyed", handle, dt.names[handle])
	}
	if dt.names[handle] != "" && dt.table.Team[handle].Size == 0 {
		return KindBadArgument, fmt.Sprintf("a kernel named team handle %d (%s), whose members are not evenly spaced (device teams are strided)", handle, dt.names[handle])
	}
	return KindNotInTeam, fmt.Sprintf("a kernel named team handle %d, which names no team of this PE", handle)
}

// Desc returns a copy of slot's entry.
func (dt *Teams) Desc(slot int) kernels.TeamDesc {
	dt.mu.Lock()
	defer dt.mu.Unlock()
	return dt.table.Team[slot]
}

// Workspace returns slot's device workspace: its heap offset and size (0: none).
func (dt *Teams) Workspace(slot int) (off, size uint64) { return dt.ws[slot][0], dt.ws[slot][1] }

// Table is the table as the host backend's kernels read it (its address goes in their state).
func (dt *Teams) Table() *kernels.TeamTable { return &dt.table }

// Dev is the table's device address; 0 on the host backend.
func (dt *Teams) Dev() device.Ptr { return dt.dev }

// Release frees the device copy of the table.
func (dt *Teams) Release() {
	if dt != nil && dt.dev != 0 {
		_ = dt.w.Device().Free(dt.dev)
		dt.dev = 0
	}
}
