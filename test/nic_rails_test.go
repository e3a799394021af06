package test

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/roxamen/roxamen/test/netns"
)

// railsNet makes 4 namespaces (one PE each, so that every pair of PEs crosses the NIC path),
// joined by a bridge for the bootstrap (eth0) and by 4 rails for the NIC path (ROX_NICS:
// interfaces rail0..rail3 in each). The last rail is slow: 100 Mbit/s, its queue into every
// host kept full by a fifth namespace's bulk traffic, so that what it carries arrives tens of
// milliseconds after what the other rails carry.
func railsNet(t *testing.T) (*netns.Net, []string) {
	t.Helper()
	if err := netns.Available(); err != nil {
		t.Skip(err)
	}
	nt, err := netns.New(4, netns.Options{Gateway: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nt.Close() })
	rn, err := nt.AddRails(netns.RailOptions{Rails: 4, Congester: true, Rates: []string{"1gbit", "1gbit", "1gbit", "100mbit"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rn.Close() })
	for i := range nt.Hosts {
		stop, err := rn.Congest(i, 3, 1)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { stop() })
	}
	var hosts []string
	for _, h := range nt.Hosts {
		hosts = append(hosts, h.Name+":1")
	}
	return nt, []string{"--hosts", strings.Join(hosts, ","), "--rsh", "ip netns exec", "--bind", nt.GatewayIP + ":0"}
}

// TestNICLitmusRails: the memory-model conformance suite with its 4 PEs in 4 namespaces joined
// by 4 rails, one of them slow and congested. Every put is sprayed round-robin over the
// rails (ROX_STRIPE_THRESHOLD=1: even the suite's 8-byte puts), so that the slow rail carries a
// quarter of them and any order the rails fail to keep shows as a forbidden outcome.
func TestNICLitmusRails(t *testing.T) {
	_, hostArgs := railsNet(t)
	// The tests whose outcome hangs on order between puts to one PE (fence, put-with-signal,
	// quiet, coherence): the whole suite at enough iterations to see a reordering would take
	// minutes over the slow rail.
	var files []string
	for _, pat := range []string{"*fence*", "*putsig*", "CoWW*", "MP_*quiet*", "SB_*"} {
		m, err := filepath.Glob("../memmodel/testdata/" + pat + ".litmus")
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range m {
			if !slices.Contains(files, f) {
				files = append(files, f)
			}
		}
	}
	if len(files) < 10 {
		t.Fatalf("only %d litmus tests in ../memmodel/testdata match", len(files))
	}
	env := []string{"ROX_TIMEOUT=60s", "ROX_NICS=rail0,rail1,rail2,rail3", "ROX_SPRAY=rr", "ROX_STRIPE_THRESHOLD=1"}
	args := append([]string{"litmus", "--run", "20", "--timeout", "9m"}, hostArgs...)
	r := roxrun(t, 10*time.Minute, env, append(args, files...)...)
	if r.status != 0 {
		t.Fatalf("roxrun litmus --run over 4 rails: status %d\n%s\n%s", r.status, tail(r.stdout, 60), r.stderr)
	}
	if n := strings.Count(r.stdout, "\nObservation "); n < len(files) {
		t.Fatalf("%d observations for %d litmus tests\n%s", n, len(files), tail(r.stdout, 40))
	}
	t.Logf("%s", tail(r.stdout, 8))
}
