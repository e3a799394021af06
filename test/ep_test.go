package test

// Expert-parallel dispatch/combine (shmem/ep) in real roxrun jobs: both modes, both payload
// types, random, skewed and full routings checked against the host reference on every PE, in both
// ROX_ORDERING modes, on 2, 4 and 8 PEs of one node and across two network-namespace hosts.

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"
)

func TestEP(t *testing.T) {
	for _, n := range []int{2, 4, 8} {
		for _, ord := range []string{"strict", "bypass"} {
			t.Run(fmt.Sprintf("%d/%s", n, ord), func(t *testing.T) {
				r := roxrun(t, 2*time.Minute, []string{"ROX_ORDERING=" + ord}, "-n", fmt.Sprint(n), filepath.Join(bin, "testprog"), "ep")
				mustPass(t, r, fmt.Sprintf("ep: ok on %d PEs", n))
			})
		}
	}
	// The NIC path between PEs of one node (what PEs of different nodes use).
	t.Run("tcp/3", func(t *testing.T) {
		r := roxrun(t, 2*time.Minute, []string{"ROX_TRANSPORT=tcp"}, "-n", "3", filepath.Join(bin, "testprog"), "ep")
		mustPass(t, r, "ep: ok on 3 PEs")
	})
}

func TestEPBadInput(t *testing.T) {
	r := roxrun(t, time.Minute, nil, "-n", "3", filepath.Join(bin, "testprog"), "ep-badinput")
	mustPass(t, r, "ep-badinput: ok on 3 PEs")
	// Only PE 0's input is bad: it is refused there, and the others' calls end instead of hanging.
	r = roxrun(t, time.Minute, nil, "-n", "3", filepath.Join(bin, "testprog"), "ep-onebad")
	mustPass(t, r, "ep-onebad: ok on 3 PEs")
}

// TestEPHosts: 2 PEs in each of 2 namespaces, so that half of every exchange crosses the TCP
// transport, in both memory modes.
func TestEPHosts(t *testing.T) {
	args := hostsArgs(hostsNet(t))
	for _, ord := range []string{"strict", "bypass"} {
		t.Run(ord, func(t *testing.T) {
			r := roxrun(t, 2*time.Minute, []string{"ROX_ORDERING=" + ord}, append(args, filepath.Join(bin, "testprog"), "ep")...)
			mustPass(t, r, "ep: ok on 4 PEs")
		})
	}
}
