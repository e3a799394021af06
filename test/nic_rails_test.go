package test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
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
	// Each iteration waits on the slow rail: 5 of them (80 runs of each test in each mode) by
	// default, 20 in the long run (265 s on the 2-core CI machine at load 25).
	iters := "5"
	if long() {
		iters = "20"
	}
	args := append([]string{"litmus", "--run", iters, "--timeout", "9m"}, hostArgs...)
	r := roxrun(t, 10*time.Minute, env, append(args, files...)...)
	if r.status != 0 {
		t.Fatalf("roxrun litmus --run over 4 rails: status %d\n%s\n%s", r.status, tail(r.stdout, 60), r.stderr)
	}
	if n := strings.Count(r.stdout, "\nObservation "); n < len(files) {
		t.Fatalf("%d observations for %d litmus tests\n%s", n, len(files), tail(r.stdout, 40))
	}
	t.Logf("%s", tail(r.stdout, 8))
}

// railBytes returns how many bytes each rail interface of host h has sent.
func railBytes(t *testing.T, h *netns.Host, rails int) []int64 {
	t.Helper()
	var out []int64
	for r := 0; r < rails; r++ {
		b, err := h.Command(context.Background(), "cat", fmt.Sprintf("/sys/class/net/%s/statistics/tx_bytes", netns.RailName(r))).Output()
		if err != nil {
			t.Fatal(err)
		}
		v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
	}
	return out
}

// TestJobOverTwoRails: a job of 4 PEs in 2 namespaces joined by 2 rails (besides eth0, which
// the bootstrap uses) moves 4 MiB puts between the hosts over the rails: with ROX_TRANSPORT=tcp
// through ROX_NICS, each rail carrying a share; with ROX_TRANSPORT=ucx through UCX's own device
// selection (UCX_NET_DEVICES naming both NICs, UCX_MAX_RNDV_RAILS=2), which keeps the job on
// them (see docs/clusters.md, "Several NICs").
func TestJobOverTwoRails(t *testing.T) {
	nt := hostsNet(t)
	rn, err := nt.AddRails(netns.RailOptions{Rails: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rn.Close() })
	for _, c := range []struct {
		name string
		env  []string
	}{
		{"tcp", []string{"ROX_TRANSPORT=auto", "ROX_NICS=rail0,rail1"}},
		{"ucx", []string{"ROX_TRANSPORT=ucx", "UCX_TLS=tcp", "UCX_NET_DEVICES=rail0,rail1", "UCX_MAX_RNDV_RAILS=2", "UCX_TCP_PREFER_DEFAULT=n"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.name == "ucx" {
				needUCX(t)
			}
			before := railBytes(t, nt.Hosts[0], 2)
			r := roxrun(t, 2*time.Minute, c.env, append(hostsArgs(nt), filepath.Join(bin, "testprog"), "bigput")...)
			mustPass(t, r, "bigput: ok on 4 PEs")
			after := railBytes(t, nt.Hosts[0], 2)
			// Host 0 sends 4 rounds of 4 MiB from PE 1 to PE 2 across the hosts.
			var total int64
			for i := range after {
				sent := after[i] - before[i]
				total += sent
				t.Logf("rail %d of host 0 sent %d KiB", i, sent>>10)
				// Roxamen's transport stripes every put over both rails. UCX 1.13 over its tcp
				// transport sends an RMA put on one lane per endpoint (UCX_MAX_RNDV_RAILS
				// stripes rendezvous transfers, on RDMA NICs): there the rails must carry the
				// job between them, not each a share.
				if c.name == "tcp" && sent < 2<<20 {
					t.Errorf("rail %d of host 0 sent %d bytes: the job did not use it", i, sent)
				}
			}
			if total < 16<<20 {
				t.Errorf("the rails of host 0 sent %d bytes, less than the 16 MiB its PE put to the other host", total)
			}
		})
	}
}
