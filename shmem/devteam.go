package shmem

import (
	"errors"

	"github.com/roxamen/roxamen/kernels"
	"github.com/roxamen/roxamen/shmem/internal/gpurt"
)

// The device team table (gpurt.Teams) names this PE's teams to kernels: a team's device handle is
// its slot, the same on every member and in every module. The World writes a team into it when a
// split makes it and clears it when Destroy ends it.

// initDevTeams reserves the device workspaces and fills the table with TeamWorld and TeamShared;
// on a GPU it puts the table in device memory and links it into the runtime's module. Every PE
// calls it at the same point of Init.
func (w *World) initDevTeams() error {
	dt, err := gpurt.NewTeams(worldHost{w}, w.teams.eng.Algo(), w.gpu.Started())
	if err != nil {
		return err
	}
	w.dteams = dt
	w.devTeamMade(w.teams.world)
	w.devTeamMade(w.teams.shared)
	if w.gpu.Started() {
		return w.gpu.SetTeamTable(dt.Dev())
	}
	return nil
}

// devTeamMade writes team t into its slot of the device table.
func (w *World) devTeamMade(t *Team) {
	if w.dteams == nil || t == nil {
		return
	}
	_ = w.dteams.Made(t.slot, t.name, t.members, t.me)
}

// devTeamDestroyed clears t's slot and zeroes its workspace for the slot's next team.
func (w *World) devTeamDestroyed(t *Team) error {
	if err := w.dteams.Destroyed(t.slot); err != nil {
		var e *gpurt.Error
		if errors.As(err, &e) {
			return w.rtError("team table", ErrPEFailed, err)
		}
		return err
	}
	return nil
}

// Handle returns the team's device handle (roxshmem_team_t), to pass to kernels: the same number
// on every member and in every module; kernels.TeamInvalid for a nil or destroyed team.
func (t *Team) Handle() int32 {
	if t == nil || t.destroyed.Load() {
		return kernels.TeamInvalid
	}
	return int32(t.slot)
}
