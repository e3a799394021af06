package test

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
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

// TestErrorKinds: a collective that times out is ErrTimeout and a second Init ErrInitialized,
// not "a PE failed"; so is a ROX_TIMEOUT too small to join the job, named in the error.
func TestErrorKinds(t *testing.T) {
	r := runScenario(t, time.Minute, []string{"ROX_TIMEOUT=1s"}, 2, "timeoutkind")
	if !strings.Contains(r.stdout, "timeoutkind: ok") {
		t.Errorf("status %d; want PE 0 to report a Malloc timeout as ErrTimeout\nstdout:\n%s\nstderr:\n%s", r.status, r.stdout, r.stderr)
	}
	r = runScenario(t, time.Minute, []string{"ROX_TIMEOUT=1ns"}, 1, "api")
	if r.status == 0 || !strings.Contains(r.stderr, "Init on PE 0: timed out") || !strings.Contains(r.stderr, "ROX_TIMEOUT=1ns") || strings.Contains(r.stderr, "a PE failed") {
		t.Errorf("status %d; want Init to time out naming ROX_TIMEOUT=1ns\n%s", r.status, r.stderr)
	}
}

// TestInitKnobs: a heap of 0 bytes is refused by roxrun before any PE starts (one message, exit
// 2; Init's own refusal is shmem's TestInitValidation); one larger than the machine's memory is
// refused at Init, naming the knob, the value and the limit, on every PE by number; GlobalExit(0)
// ends the job with status 0.
func TestInitKnobs(t *testing.T) {
	r := runScenario(t, time.Minute, []string{"ROX_HEAP_SIZE=0"}, 2, "api")
	if r.status != 2 || !strings.Contains(r.stderr, "ROX_HEAP_SIZE=0") || !strings.Contains(r.stderr, "4096-byte minimum") || !strings.Contains(r.stderr, "no PE was started") {
		t.Errorf("status %d; want ROX_HEAP_SIZE=0 refused by roxrun before any PE starts, exit 2\n%s", r.status, r.stderr)
	}
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		t.Skip(err)
	}
	var kb int64
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "MemTotal:" {
			kb, _ = strconv.ParseInt(f[1], 10, 64)
		}
	}
	big := fmt.Sprintf("ROX_HEAP_SIZE=%dG", kb>>20+1)
	r = runScenario(t, time.Minute, []string{big}, 2, "api")
	if r.status == 0 || !strings.Contains(r.stderr, "Init on PE 0: out of symmetric heap memory: "+big) || !strings.Contains(r.stderr, "MemTotal") {
		t.Errorf("status %d; want %s refused naming the machine's memory\n%s", r.status, big, r.stderr)
	}
	r = runScenario(t, time.Minute, nil, 3, "exitzero")
	if r.status != 0 {
		t.Errorf("roxrun exited %d after GlobalExit(0), want 0\n%s", r.status, r.stderr)
	}
	assertNoProcesses(t, "testprog")
}
