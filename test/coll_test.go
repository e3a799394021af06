package test

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/roxamen/roxamen/test/netns"
)

// TestColl: the collectives scenario in real jobs: one node over load/store, the NIC path forced,
// and namespaces as nodes (2 x 2 and 3 x 2: the hierarchical algorithm across them).
func TestColl(t *testing.T) {
	prog := filepath.Join(bin, "testprog")
	t.Run("4", func(t *testing.T) {
		mustPass(t, roxrun(t, 3*time.Minute, nil, "-n", "4", prog, "coll"), "coll: algorithms oneshot at 8 B, twoshot at 1 MiB")
	})
	t.Run("tcp/3/ring", func(t *testing.T) {
		mustPass(t, roxrun(t, 3*time.Minute, []string{"ROX_TRANSPORT=tcp", "ROX_COLL_ALGO=ring"}, "-n", "3", prog, "coll"), "coll: algorithms ring at 8 B, ring at 1 MiB")
	})
	for _, tc := range []struct {
		hosts, per int
		algo, want string
	}{{2, 2, "auto", "oneshot at 8 B, hier at 1 MiB"}, {3, 2, "auto", "oneshot at 8 B, hier at 1 MiB"}, {3, 2, "twoshot", "twoshot at 8 B, twoshot at 1 MiB"}} {
		t.Run(tc.algo+"/"+string(rune('0'+tc.hosts))+"x2", func(t *testing.T) {
			if err := netns.Available(); err != nil {
				t.Skip(err)
			}
			nt, err := netns.New(tc.hosts, netns.Options{Gateway: true})
			if err != nil {
				t.Fatal(err)
			}
			defer nt.Close()
			var hosts []string
			for _, h := range nt.Hosts {
				hosts = append(hosts, h.Name+":2")
			}
			args := []string{"--hosts", strings.Join(hosts, ","), "--rsh", "ip netns exec", "--bind", nt.GatewayIP + ":0", prog, "coll"}
			mustPass(t, roxrun(t, 3*time.Minute, []string{"ROX_COLL_ALGO=" + tc.algo}, args...), "coll: algorithms "+tc.want)
		})
	}
}

// TestCollKilledPE: a PE that dies while the others are in collectives fails them within
// ROX_TIMEOUT, naming it; nothing is left running.
func TestCollKilledPE(t *testing.T) {
	r := roxrun(t, time.Minute, []string{"ROX_TIMEOUT=10s"}, "-n", "3", filepath.Join(bin, "testprog"), "collkill")
	if r.status == 0 || !strings.Contains(r.stderr, "PE 2") {
		t.Fatalf("status %d; want a failure naming PE 2\n%s", r.status, r.stderr)
	}
	assertNoProcesses(t, "testprog")
}
