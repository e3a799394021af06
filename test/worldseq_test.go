package test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestWorldSeqOnNIC: over the NIC path (tcp and UCX forced between the processes of one node, so
// that no PE maps another's heap), a World call on some PEs against a TeamWorld collective on the
// others fails at once with ErrMismatch on every PE, naming both calls, rather than waiting
// ROX_TIMEOUT (set to 5 minutes here, beyond the test's limit); the next calls are in step.
func TestWorldSeqOnNIC(t *testing.T) {
	const n = 5
	for _, tr := range []string{"tcp", "ucx"} {
		for _, delivery := range []string{"direct", "reorder"} {
			t.Run(tr+"/"+delivery, func(t *testing.T) {
				env := []string{"ROX_TRANSPORT=" + tr, "ROX_TIMEOUT=5m", "ROX_DELIVERY=" + delivery}
				if tr == "ucx" {
					needUCX(t)
					env = append(env, "UCX_TLS=tcp,self")
				}
				r := roxrun(t, time.Minute, env, "-n", fmt.Sprint(n), filepath.Join(bin, "testprog"), "worldseq")
				mustPass(t, r, fmt.Sprintf("worldseq: ok on %d PEs", n))
				if got := strings.Count(r.stdout, "collective call #"); got != n {
					t.Fatalf("%d PEs printed the mismatch, want %d\n%s", got, n, r.stdout)
				}
			})
		}
	}
}
