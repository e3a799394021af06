package launch

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/roxamen/roxamen/internal/bootstrap"
)

// jobOf returns a verdict over n PEs that have not exited.
func jobOf(n int) (*verdict, *bytes.Buffer) {
	var out bytes.Buffer
	j := &verdict{errw: &out}
	for i := 0; i < n; i++ {
		j.pes = append(j.pes, &pe{rank: i})
	}
	return j, &out
}

func exited(j *verdict, rank int, e *ExitError) {
	p := j.pes[rank]
	p.done, p.stopped = true, j.terminated
	p.exit = e
	if e != nil {
		j.exit(p, j.terminated)
	}
	j.report()
}

// The PE the rendezvous saw leave first is the root cause even when the PEs that failed because
// of it are reaped first; they are collateral.
func TestVerdictRootBeforeCollateral(t *testing.T) {
	j, out := jobOf(3)
	j.failure(bootstrap.Failure{PE: 2, Reason: "was killed by signal SIGKILL"})
	exited(j, 0, &ExitError{PE: 0, Status: 1})
	if out.Len() != 0 {
		t.Fatalf("printed before the root cause's own exit was known:\n%s", out)
	}
	exited(j, 2, &ExitError{PE: 2, Status: 137, Signal: "SIGKILL"})
	exited(j, 1, &ExitError{PE: 1, Status: 1})
	want := "roxrun: PE 2 was killed by signal SIGKILL\n" +
		"roxrun: PE 0 exited with status 1 after PE 2 had left the job (collateral)\n" +
		"roxrun: PE 1 exited with status 1 after PE 2 had left the job (collateral)\n"
	if out.String() != want {
		t.Errorf("printed:\n%s\nwant:\n%s", out, want)
	}
	var ee *ExitError
	if err := j.result(); !errors.As(err, &ee) || ee.PE != 2 || ee.Status != 137 || len(ee.Collateral) != 2 {
		t.Errorf("result %#v", err)
	}
}

// A root cause that exited 0 (before Init) gives the job the status of the first collateral PE.
func TestVerdictRootExitedZero(t *testing.T) {
	j, out := jobOf(2)
	j.failure(bootstrap.Failure{PE: 1, Reason: "exited with status 0 before Init"})
	exited(j, 1, nil)
	exited(j, 0, &ExitError{PE: 0, Status: 4})
	if !strings.HasPrefix(out.String(), "roxrun: PE 1 exited with status 0 before Init while other PEs still needed it\n") {
		t.Errorf("printed:\n%s", out)
	}
	if st := ExitStatus(j.result()); st != 4 {
		t.Errorf("status %d, want the collateral PE's 4", st)
	}
}

// Every PE exiting 0, whatever the rendezvous saw (no Finalize), is a clean job.
func TestVerdictAllZero(t *testing.T) {
	j, out := jobOf(2)
	j.failure(bootstrap.Failure{PE: 0, Reason: "exited with status 0 without Finalize"})
	exited(j, 0, nil)
	exited(j, 1, nil)
	if err := j.result(); err != nil || out.Len() != 0 {
		t.Errorf("result %v, printed %q", err, out)
	}
}

// GlobalExit: its status is the job's, 0 included; the PEs that exit with it are not collateral.
func TestVerdictGlobalExit(t *testing.T) {
	for _, status := range []int{7, 0} {
		j, out := jobOf(3)
		j.failure(bootstrap.Failure{PE: 0, Aborted: true, Status: status, Reason: "aborted with status " + string(rune('0'+status)) + ": PE 0 called GlobalExit"})
		for pe := 0; pe < 3; pe++ {
			var e *ExitError
			if status != 0 {
				e = &ExitError{PE: pe, Status: status}
			}
			exited(j, pe, e)
		}
		if st := ExitStatus(j.result()); st != status {
			t.Errorf("GlobalExit(%d): roxrun status %d", status, st)
		}
		if strings.Contains(out.String(), "collateral") {
			t.Errorf("GlobalExit(%d) named collateral PEs:\n%s", status, out)
		}
	}
}

// What follows roxrun's own termination of the job (a timeout) is no root cause.
func TestVerdictAfterTermination(t *testing.T) {
	j, out := jobOf(2)
	j.terminated = true
	j.stopped = &ExitError{PE: -1, Status: 124, Reason: "job timed out after 1s"}
	j.failure(bootstrap.Failure{PE: 1, Reason: "connection lost: EOF"})
	exited(j, 1, &ExitError{PE: 1, Status: 143, Signal: "SIGTERM"})
	exited(j, 0, &ExitError{PE: 0, Status: 143, Signal: "SIGTERM"})
	if err := j.result(); err != j.stopped || out.Len() != 0 {
		t.Errorf("result %v, printed %q", err, out)
	}
}

// GlobalExit with a nonzero status whose low 8 bits are 0 leaves the PEs' processes with exit
// code 0: the status the rendezvous reported decides the job's, and it is never 0 (issue 26, 9).
func TestVerdictGlobalExitStatusCode(t *testing.T) {
	for _, c := range []struct{ status, code int }{{256, 1}, {512, 1}, {-256, 1}, {300, 44}, {-1, 255}, {7, 7}} {
		j, _ := jobOf(2)
		j.failure(bootstrap.Failure{PE: 0, Aborted: true, Status: c.status, Reason: fmt.Sprintf("aborted with status %d: PE 0 called GlobalExit(%d)", c.status, c.status)})
		for pe := 0; pe < 2; pe++ {
			var e *ExitError
			if c.status&0xff != 0 {
				e = &ExitError{PE: pe, Status: c.status & 0xff}
			}
			exited(j, pe, e)
		}
		if st := ExitStatus(j.result()); st != c.code {
			t.Errorf("GlobalExit(%d): roxrun status %d, want %d", c.status, st, c.code)
		}
	}
}
