package test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestLazyRingConnections: with connections made on first use, 16 PEs on the NIC path that
// talk to their ring neighbours hold 2 connections each, not 15.
func TestLazyRingConnections(t *testing.T) {
	const n = 16
	check := func(t *testing.T, env []string) {
		r := roxrun(t, 3*time.Minute, env, "-n", fmt.Sprint(n), filepath.Join(bin, "testprog"), "ringconns")
		mustPass(t, r, fmt.Sprintf("ringconns: ok on %d PEs", n))
		if got := strings.Count(r.stdout, ": 2 connections"); got != n {
			t.Fatalf("%d PEs report 2 connections, want %d\n%s", got, n, r.stdout)
		}
	}
	t.Run("tcp", func(t *testing.T) { check(t, []string{"ROX_TRANSPORT=tcp"}) })
	t.Run("ucx", func(t *testing.T) {
		needUCX(t)
		check(t, []string{"ROX_TRANSPORT=ucx", "UCX_TLS=tcp,self"})
	})
}

// TestLazyEviction: ROX_MAX_PEERS=1 closes and reopens connections while every PE cycles
// through all the others; every value arrives, in order.
func TestLazyEviction(t *testing.T) {
	for _, tr := range []string{"tcp", "ucx"} {
		t.Run(tr, func(t *testing.T) {
			env := []string{"ROX_TRANSPORT=" + tr, "ROX_MAX_PEERS=1"}
			if tr == "ucx" {
				needUCX(t)
				env = append(env, "UCX_TLS=tcp,self")
			}
			mustPass(t, roxrun(t, 3*time.Minute, env, "-n", "4", filepath.Join(bin, "testprog"), "evictcycle"), "evictcycle: ok on 4 PEs")
		})
	}
	t.Run("malformed", func(t *testing.T) {
		r := roxrun(t, time.Minute, []string{"ROX_TRANSPORT=tcp", "ROX_MAX_PEERS=0"}, "-n", "2", filepath.Join(bin, "testprog"), "api")
		if r.status == 0 || !strings.Contains(r.stderr, "ROX_MAX_PEERS") {
			t.Fatalf("ROX_MAX_PEERS=0: status %d, want a failure naming the knob\n%s", r.status, r.stderr)
		}
	})
}

// TestInfoScale: roxrun info --scale runs a job and prints Init's phases, its CPU time and the
// connections per PE (a ring on the NIC path: 2 each).
func TestInfoScale(t *testing.T) {
	r := roxrun(t, 2*time.Minute, []string{"ROX_TRANSPORT=tcp"}, "info", "--scale", "-n", "6", "--pattern", "ring")
	for _, want := range []string{"scale: 6 PEs", "device open", "bootstrap exchange", "transport start", "final barrier", "Init CPU user+sys", "connections per PE: min 2, mean 2.00, max 2"} {
		if r.status != 0 || !strings.Contains(r.stdout, want) {
			t.Fatalf("status %d, want 0 and %q in the output\nstdout:\n%s\nstderr:\n%s", r.status, want, r.stdout, r.stderr)
		}
	}
	if r := roxrun(t, time.Minute, nil, "info", "--pattern", "ring"); r.status != 2 || !strings.Contains(r.stderr, "--scale") {
		t.Fatalf("--pattern without --scale: status %d, want 2 and an error naming --scale\n%s", r.status, r.stderr)
	}
}
