package test

// The bootstrap tree across nodes under PMIx (internal/bootstrap/pmix.go, pmixTreeConfig): every
// PE publishes its tree listener with PMIx_Put before the one fence, then reads from PMIx only
// the addresses of the PEs it dials. Measured against the star on the same job: the root's
// traffic (PE 0 hosts the rendezvous under PMIx, and its InitReport counts the server's).

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/roxamen/roxamen/test/netns"
)

var bootStatsLine = regexp.MustCompile(`bootstats: PE (\d+) msgs (\d+) bytes (\d+) transport msgs (\d+) bytes received (\d+)`)

// bootStatsOf returns each PE's Init bootstrap messages from testprog bootstats' output.
func bootStatsOf(t *testing.T, r result, npes int) map[int]int {
	t.Helper()
	msgs, _ := bootStatsFull(t, r, npes)
	return msgs
}

// bootStatsFull is bootStatsOf with each PE's transport phase too: messages, bytes received.
func bootStatsFull(t *testing.T, r result, npes int) (msgs map[int]int, transport map[int][2]int) {
	t.Helper()
	msgs, transport = map[int]int{}, map[int][2]int{}
	for _, m := range bootStatsLine.FindAllStringSubmatch(r.stdout, -1) {
		pe, _ := strconv.Atoi(m[1])
		msgs[pe], _ = strconv.Atoi(m[2])
		tm, _ := strconv.Atoi(m[4])
		tb, _ := strconv.Atoi(m[5])
		transport[pe] = [2]int{tm, tb}
	}
	if len(msgs) != npes {
		t.Fatalf("%d of %d PEs reported their bootstrap traffic\nstdout:\n%s\nstderr:\n%s", len(msgs), npes, r.stdout, r.stderr)
	}
	return msgs, transport
}

func busiest(msgs map[int]int) (pe, n int) {
	for p, m := range msgs {
		if m > n || (m == n && p < pe) {
			pe, n = p, m
		}
	}
	return pe, n
}

// TestPMIxTreeHosts: `mpirun -np 16 --host NS1:8,NS2:8` (two network namespaces), once with the
// star (ROX_BOOTSTRAP_TREE=off) and once with the tree (on): in the tree every PE says it
// bootstrapped through PMIx-published tree addresses, the job passes, and the root (PE 0, which
// hosts the rendezvous) handles fewer messages than in the star.
func TestPMIxTreeHosts(t *testing.T) {
	mpirun := needMpirunPMIx(t)
	if err := netns.Available(); err != nil {
		t.Skip(err)
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("no unshare(1)")
	}
	nt, err := netns.New(2, netns.Options{Gateway: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nt.Close() })
	agent := rshAgent(t)
	const npes = 16
	run := func(mode string) (result, map[int]int) {
		a := append(mpirunBase(), "--mca", "plm_rsh_agent", agent,
			"--host", nt.Hosts[0].Name+":8,"+nt.Hosts[1].Name+":8", "-np", fmt.Sprint(npes),
			"-x", "ROX_DEBUG=1", "-x", "ROX_BOOTSTRAP_TREE="+mode, filepath.Join(bin, "testprog"), "bootstats")
		r := runIn(t, 3*time.Minute, noRoxEnv(), mpirun, a...)
		mustPass(t, r, fmt.Sprintf("bootstats: ok on %d PEs", npes))
		return r, bootStatsOf(t, r, npes)
	}
	_, star := run("off")
	r, tree := run("on")
	if n := strings.Count(r.stderr+r.stdout, "bootstrap tree through PMIx: listening at"); n != npes {
		t.Fatalf("%d of %d PEs say they joined the bootstrap tree through PMIx\nstderr:\n%s", n, npes, r.stderr)
	}
	nodes := checkToken(t, r, npes, ompiDerived)
	if len(nodes) != 2 {
		t.Errorf("PEs ran on nodes %v, want two", nodes)
	}
	sp, sn := busiest(star)
	tp, tn := busiest(tree)
	t.Logf("%d PEs on 2 nodes, Init bootstrap messages: star: root (PE 0) %d, busiest PE %d with %d; tree: root (PE 0) %d, busiest PE %d with %d, PE 1 %d",
		npes, star[0], sp, sn, tree[0], tp, tn, tree[1])
	if tree[0] >= star[0] {
		t.Errorf("the root handled %d messages in the tree, %d in the star: the tree does not relieve it", tree[0], star[0])
	}
}
