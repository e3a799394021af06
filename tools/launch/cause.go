package launch

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"
)

// A PE's exit reaches the verdict only after its output has been read to its end (awaitOutput),
// and goroutines woken together run in no set order: a PE that failed because another died
// (over tcp it sees the dead peer's connection reset at once) can be reported before the PE that
// died. So before a failure is taken as the root cause, the PEs not yet reported are asked how
// they stand now, from the kernel or from their reaper.

// standing is what the kernel says of a PE's process that roxrun has not yet reported.
type standing struct {
	dead     bool
	signal   syscall.Signal // the signal that killed it (dead) or stopped it (stopped)
	stopped  bool           // stopped by a signal (SIGSTOP, SIGTSTP...): it will never answer
	reapedAt time.Time      // when its reaper saw it end; zero if it has not been reaped yet
	status   int            // its exit status when it exited on its own
}

// earlierCause returns the PE that caused p's failure, if another PE's state says so: one
// killed by a signal it did not get from roxrun, one stopped by a signal, or one that had failed
// before p but has not been reported yet. ok is false when p is the root cause as far as roxrun
// can tell.
func (j *verdict) earlierCause(p *pe) (q *pe, st standing, ok bool) {
	pReaped, pAt := p.reapTime()
	pSignalled := pReaped && reapedStanding(p, pAt).signal != 0
	best, bestRank := standing{}, 0
	for _, o := range j.pes {
		if o == p || o.done || o.cmd == nil || o.cmd.Process == nil {
			continue
		}
		s, known := o.standing()
		if !known {
			continue
		}
		before := pReaped && !s.reapedAt.IsZero() && s.reapedAt.Before(pAt)
		rank := 0
		switch {
		case s.dead && s.signal != 0 && (!pSignalled || before):
			rank = 3 // nothing in the job makes a PE die by a signal: someone killed it
		case s.stopped && !pSignalled:
			rank = 2 // it will never answer: the others time out waiting for it
		case s.dead && s.status != 0 && before:
			rank = 1
		}
		if rank > bestRank || rank == bestRank && rank > 0 && earlier(s, best) {
			q, best, bestRank = o, s, rank
		}
	}
	return q, best, bestRank > 0
}

// earlier orders two standings of one kind: reaped first, then by reap time.
func earlier(a, b standing) bool {
	switch {
	case a.reapedAt.IsZero():
		return false
	case b.reapedAt.IsZero():
		return true
	}
	return a.reapedAt.Before(b.reapedAt)
}

// reapTime returns when p's reaper saw it end, if it has.
func (p *pe) reapTime() (bool, time.Time) {
	select {
	case <-p.reaped:
		return true, p.reapedAt
	default:
		return false, time.Time{}
	}
}

// standing asks how p stands now: reaped, a zombie, stopped or running. known is false while it
// runs.
func (p *pe) standing() (s standing, known bool) {
	if ok, at := p.reapTime(); ok {
		return reapedStanding(p, at), true
	}
	info, err := waitidNoWait(p.cmd.Process.Pid)
	if err == syscall.ECHILD {
		// Its reaper took it between the two looks: it says how it ended in a moment.
		select {
		case <-p.reaped:
			return reapedStanding(p, p.reapedAt), true
		case <-time.After(time.Second):
			return s, false
		}
	}
	if err == nil && info.pid == 0 && exiting(p.cmd.Process.Pid) {
		// Killed or exiting, not yet a zombie: under load its last threads may take a while to
		// run their exit. Its sockets may be closed already, which is how a peer learnt of it.
		select {
		case <-p.reaped:
			return reapedStanding(p, p.reapedAt), true
		case <-time.After(exitingWait):
			return s, false
		}
	}
	if err != nil || info.pid == 0 {
		return s, false
	}
	switch info.code {
	case cldExited:
		return standing{dead: true, status: int(info.status)}, true
	case cldKilled, cldDumped:
		return standing{dead: true, signal: syscall.Signal(info.status)}, true
	case cldStopped:
		return standing{stopped: true, signal: syscall.Signal(info.status)}, true
	}
	return s, false
}

func reapedStanding(p *pe, at time.Time) standing {
	s := standing{dead: true, reapedAt: at}
	if ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus); ok {
		if ws.Signaled() {
			s.signal = ws.Signal()
		} else {
			s.status = ws.ExitStatus()
		}
	}
	return s
}

// exitingWait bounds the wait for a PE that is exiting to become reapable.
const exitingWait = 5 * time.Second

// exiting says whether process pid has begun to exit: its main thread is a zombie (waiting for
// the others) or has the kernel's PF_EXITING flag (/proc/PID/stat's ninth field).
func exiting(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 7 {
		return false
	}
	if f[0] == "Z" || f[0] == "X" {
		return true
	}
	flags, err := strconv.ParseUint(f[6], 10, 64)
	const pfExiting = 0x4
	return err == nil && flags&pfExiting != 0
}

// The parts of Linux's siginfo_t that waitid fills in for a child (64-bit layout).
type childInfo struct {
	signo, errno, code, _ int32
	pid                   int32
	uid                   uint32
	status                int32
	_                     [100]byte
}

const (
	pPID       = 1 // idtype_t P_PID
	wExited    = 4 // WEXITED
	wNoHang    = 1 // WNOHANG
	cldExited  = 1
	cldKilled  = 2
	cldDumped  = 3
	cldStopped = 5
)

// waitidNoWait reports a state change of child pid (an exit or a stop) without reaping it, so
// that its own reaper (cmd.Wait) still sees it; pid 0 in the answer means none.
func waitidNoWait(pid int) (childInfo, error) {
	var info childInfo
	_, _, e := syscall.Syscall6(syscall.SYS_WAITID, pPID, uintptr(pid), uintptr(unsafe.Pointer(&info)),
		wExited|syscall.WSTOPPED|wNoHang|syscall.WNOWAIT, 0, 0)
	if e != 0 {
		return info, e
	}
	return info, nil
}
