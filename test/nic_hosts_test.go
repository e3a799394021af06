package test

// Multi-host jobs with network namespaces as hosts (root only): roxrun --hosts ... --rsh
// 'ip netns exec' starts two PEs in each of two namespaces joined by a bridge whose gateway side
// holds the rendezvous, so PEs of different hosts reach each other only through the NIC path
// (the TCP transport: ROX_TRANSPORT=auto).

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestHostsNICPath: 2 PEs in each of 2 namespaces over the TCP transport (hostsNet and
// hostsArgs are in ucx_test.go).
func TestHostsNICPath(t *testing.T) {
	args := hostsArgs(hostsNet(t))
	t.Run("ring", func(t *testing.T) {
		mustPass(t, roxrun(t, 2*time.Minute, nil, append(args, filepath.Join(bin, "ring"), "-laps", "20")...), "20 laps of 4 PEs")
	})
	t.Run("counter", func(t *testing.T) { // AMOs across hosts
		mustPass(t, roxrun(t, 2*time.Minute, nil, append(args, filepath.Join(bin, "counter"), "-adds", "200")...), "every ticket once: ok")
	})
}

// A host that vanishes in the middle of a job (its link cut: no FIN, no RST) fails the job within
// ROX_TIMEOUT, naming a PE, and leaves no process behind.
func TestHostTornDownMidJob(t *testing.T) {
	nt := hostsNet(t)
	done := make(chan result, 1)
	go func() {
		done <- roxrun(t, 3*time.Minute, []string{"ROX_TIMEOUT=10s"}, append(hostsArgs(nt), filepath.Join(bin, "ring"), "-laps", "100000000")...)
	}()
	time.Sleep(3 * time.Second) // let the job get going
	if err := nt.Hosts[1].TearDown(); err != nil {
		t.Fatal(err)
	}
	var r result
	select {
	case r = <-done:
	case <-time.After(2 * time.Minute):
		t.Fatal("the job hung after a host vanished")
	}
	if r.status == 0 || !strings.Contains(r.stderr, "PE ") {
		t.Fatalf("status %d; want a failure naming a PE\nstdout:\n%s\nstderr:\n%s", r.status, r.stdout, r.stderr)
	}
	assertNoProcesses(t, "ring")
}
