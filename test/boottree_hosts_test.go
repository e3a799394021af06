package test

// The bootstrap tree across roxrun's hosts (internal/bootstrap/hier.go): roxrun passes the PEs
// per host (ROX_LAYOUT); each host's first PE joins the tree across hosts over TCP, the others
// join it over abstract unix sockets on their own host (here: their own network namespace). The
// root's traffic (roxrun's rendezvous, which ROX_DEBUG makes report it) is compared with the
// star's on the same job.

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/roxamen/roxamen/test/netns"
)

var rootLine = regexp.MustCompile(`roxrun: rendezvous \((\w+), the bootstrap's root\): (\d+) messages \((\d+) received\), (\d+) bytes`)

// TestBootTreeAcrossHosts: 18 PEs, 6 in each of 3 namespaces, with the star and with the tree:
// both pass, and the tree's root handles fewer messages than the star's (which grows with the
// PEs, the tree's with the hosts).
func TestBootTreeAcrossHosts(t *testing.T) {
	if err := netns.Available(); err != nil {
		t.Skip(err)
	}
	nt, err := netns.New(3, netns.Options{Gateway: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nt.Close() })
	var hosts []string
	for _, h := range nt.Hosts {
		hosts = append(hosts, h.Name+":6")
	}
	const npes = 18
	run := func(mode string) (string, int, map[int]int) {
		r := roxrun(t, 3*time.Minute, []string{"ROX_DEBUG=1", "ROX_BOOTSTRAP_TREE=" + mode},
			"--hosts", strings.Join(hosts, ","), "--rsh", "ip netns exec", "--bind", nt.GatewayIP+":0",
			filepath.Join(bin, "testprog"), "bootstats")
		mustPass(t, r, fmt.Sprintf("bootstats: ok on %d PEs", npes))
		m := rootLine.FindStringSubmatch(r.stderr)
		if m == nil {
			t.Fatalf("roxrun did not report its rendezvous' traffic\nstderr:\n%s", r.stderr)
		}
		msgs, _ := strconv.Atoi(m[2])
		pes, transport := bootStatsFull(t, r, npes)
		// The default rails (shmem/rails.go): a PE that neither leads a node nor is PE 0 reads
		// one record of the subnets the nodes share (a Get: 2 messages) and publishes its own
		// transport address (a Put: 2), whatever the job's size: no NIC list of every PE. (In
		// the star a PE's traffic is its own calls; in the tree it also serves its directory
		// keys and its subtree.)
		for pe, tr := range transport {
			if mode == "off" && pe%6 != 0 && (tr[0] > 4 || tr[1] > 256) {
				t.Errorf("%s: PE %d's transport start took %d bootstrap messages, %d bytes received: more than one look-up of the rails", mode, pe, tr[0], tr[1])
			}
		}
		t.Logf("%s: transport start at PE 0 %v, PE 6 %v, PE 7 %v (messages, bytes received)", mode, transport[0], transport[6], transport[7])
		return m[1], msgs, pes
	}
	starMode, star, starPEs := run("off")
	treeMode, tree, treePEs := run("on")
	if starMode != "star" || treeMode != "tree" {
		t.Fatalf("the rendezvous ran in %s and %s mode, want star and tree", starMode, treeMode)
	}
	sp, sn := busiest(starPEs)
	tp, tn := busiest(treePEs)
	t.Logf("%d PEs on 3 hosts, Init bootstrap messages: star: root %d, busiest PE %d with %d; tree: root %d, busiest PE %d with %d (leaders: PEs 0, 6, 12)",
		npes, star, sp, sn, tree, tp, tn)
	if tree >= star {
		t.Errorf("the root handled %d messages in the tree, %d in the star: the tree does not relieve it", tree, star)
	}
}
