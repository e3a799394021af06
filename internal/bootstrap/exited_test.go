package bootstrap

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestExitedBeforeJoining: the launcher's report that a PE exited before it ever joined fails the
// PEs waiting in a collective at once, naming it and how it ended; a PE that joins later learns
// it at once too.
func TestExitedBeforeJoining(t *testing.T) {
	const npes, gone = 3, 2
	s := startServer(t, npes)
	cs := []*Client{dialPE(t, s.Addr(), 0, npes, testTimeout), dialPE(t, s.Addr(), 1, npes, testTimeout)}
	errs := make(chan error, len(cs))
	for _, c := range cs {
		go func() { _, err := c.Allgather(context.Background(), []byte("x")); errs <- err }()
	}
	s.Exited(gone, "exited with status 0", 0)
	for range cs {
		err := <-errs
		var pe *PeerError
		if !errors.As(err, &pe) || pe.PE != gone || !pe.Exited || pe.Status != 0 ||
			pe.Error() != "bootstrap: PE 2 exited with status 0 before Init" {
			t.Errorf("pending Allgather: %v, want one naming PE 2's exit before Init", err)
		}
	}
	if f := <-s.Failures(); f.PE != gone || f.Reason != "exited with status 0 before Init" {
		t.Errorf("Failure %+v", f)
	}
}

// TestDropWaitsForTheExitReport: with AwaitExits, a PE whose connection drops is reported with
// what the launcher says of its exit; a later Exited, and the drop itself, are no second failure.
func TestDropWaitsForTheExitReport(t *testing.T) {
	const npes, dead = 2, 1
	s, cs := job(t, npes, testTimeout)
	s.AwaitExits(time.Hour) // only the report may end the wait
	errs := make(chan error, 1)
	go func() { errs <- cs[0].Barrier(context.Background()) }()
	killConn(cs[dead])
	s.Exited(dead, "was killed by signal SIGKILL", 137)
	var pe *PeerError
	if err := <-errs; !errors.As(err, &pe) || pe.PE != dead || pe.Status != 137 ||
		pe.Error() != "bootstrap: PE 1 was killed by signal SIGKILL" {
		t.Errorf("pending Barrier: %v, want one saying PE 1 was killed by SIGKILL", err)
	}
	s.Exited(dead, "exited with status 0", 0)
	if f := <-s.Failures(); f.PE != dead || f.Reason != "was killed by signal SIGKILL" {
		t.Errorf("Failure %+v", f)
	}
	select {
	case f := <-s.Failures():
		t.Errorf("a second failure %+v", f)
	default:
	}
}

// TestExitedAfterGoodbye: a PE that said goodbye has left in order, whatever its exit status.
func TestExitedAfterGoodbye(t *testing.T) {
	s, cs := job(t, 2, testTimeout)
	if err := cs[1].Close(); err != nil {
		t.Fatal(err)
	}
	s.Exited(1, "exited with status 0", 0)
	select {
	case f := <-s.Failures():
		t.Errorf("a PE that said goodbye was reported as %+v", f)
	default:
	}
	if err := cs[0].Err(); err != nil {
		t.Errorf("PE 0 was told %v", err)
	}
}
