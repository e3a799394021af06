package test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Issue 20's shmem cases, each a roxrun job whose scenario (test/testprog/reliability.go) fails
// while the fault is there. Each runs on the same-node path and, where the path matters, with
// ROX_TRANSPORT=tcp forcing the NIC path between the PEs of this node.

func runScenario(t *testing.T, limit time.Duration, env []string, n int, scenario string) result {
	t.Helper()
	return roxrun(t, limit, env, "-n", fmt.Sprint(n), filepath.Join(bin, "testprog"), scenario)
}

var paths = []struct {
	name string
	env  []string
}{{"direct", nil}, {"tcp", []string{"ROX_TRANSPORT=tcp"}}}

// TestUseAfterFree: every call through a freed or reallocated Sym or Mem fails naming the call,
// the PE and the stale allocation, and writes nothing into the allocation that reuses its space.
func TestUseAfterFree(t *testing.T) {
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			mustPass(t, runScenario(t, time.Minute, p.env, 2, "stale"), "stale: ok on 2 PEs")
		})
	}
}

// TestFinalizeWhileCalling: Finalize while other goroutines still call Put, Get, P and AMOs
// waits for them; the calls after it fail with ErrFinalized and no PE faults.
func TestFinalizeWhileCalling(t *testing.T) {
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			for i := 0; i < 2; i++ {
				mustPass(t, runScenario(t, time.Minute, p.env, 2, "finalizerace"), "finalizerace: ok on 2 PEs")
			}
		})
	}
}

// TestConcurrentCollectives: a collective call made while another goroutine's is in progress is
// refused naming both; PEs at different calls of their collective sequence get ErrMismatch
// naming both PEs and both calls, and the sequence goes on in step.
func TestConcurrentCollectives(t *testing.T) {
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			mustPass(t, runScenario(t, time.Minute, p.env, 2, "collrace"), "collrace: ok on 2 PEs")
		})
	}
}

// TestRMAToKilledPE: once the job knows a PE was SIGKILLed, RMA to it fails with ErrPEFailed
// naming it (on the same-node path the dead PE's heap stays mapped, so writes used to succeed
// unseen until roxrun's grace ran out).
func TestRMAToKilledPE(t *testing.T) {
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			r := runScenario(t, time.Minute, p.env, 2, "killrma")
			if r.status == 0 || !strings.Contains(r.stdout, "killrma: RMA to the dead PE 1 failed") || !strings.Contains(r.stdout, "a PE failed: target PE 1") {
				t.Fatalf("status %d; want PE 0's RMA to fail naming the dead PE 1\nstdout:\n%s\nstderr:\n%s", r.status, r.stdout, r.stderr)
			}
			assertNoProcesses(t, "testprog")
		})
	}
}
