package test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/roxamen/roxamen/test/netns"
)

// TestJobDefaultRails: with no ROX_NICS, a job of 4 PEs in 2 namespaces joined by 4 rails
// (besides eth0, which the bootstrap uses) finds the rails in the kernel's routing table and
// stripes its puts over all of them: each of rail0..rail3 of host 0 carries a share of the 16
// MiB its PEs put to the other host (eth0, the fifth subnet both hosts share, is a rail too).
func TestJobDefaultRails(t *testing.T) {
	nt := hostsNet(t)
	rn, err := nt.AddRails(netns.RailOptions{Rails: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rn.Close() })
	before := railBytes(t, nt.Hosts[0], 4)
	r := roxrun(t, 2*time.Minute, []string{"ROX_TRANSPORT=auto", "ROX_NICS=", "ROX_SPRAY=rr"}, append(hostsArgs(nt), filepath.Join(bin, "testprog"), "bigput")...)
	mustPass(t, r, "bigput: ok on 4 PEs")
	after := railBytes(t, nt.Hosts[0], 4)
	for i := range after {
		sent := after[i] - before[i]
		t.Logf("rail %d of host 0 sent %d KiB", i, sent>>10)
		// Host 0 sends 4 rounds of 4 MiB from PE 1 to PE 2; rr gives each of 5 rails a fifth.
		if sent < 2<<20 {
			t.Errorf("rail %d of host 0 sent %d bytes: the job did not use it", i, sent)
		}
	}
}
