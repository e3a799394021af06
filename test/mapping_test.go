package test

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestOneNodeMappingSendsNothing: on one node every PE maps every other's heap, and the export
// handles travel in Init's allgather: the node mapping phase sends no bootstrap message (it sent
// a request and got a reply per PE of the node: 14 messages per PE at 8 PEs, 510 at 256).
func TestOneNodeMappingSendsNothing(t *testing.T) {
	r := roxrun(t, 2*time.Minute, nil, "info", "--scale", "-n", "8")
	if r.status != 0 {
		t.Fatalf("status %d\nstdout:\n%s\nstderr:\n%s", r.status, r.stdout, r.stderr)
	}
	for _, l := range strings.Split(r.stdout, "\n") {
		if !strings.HasPrefix(l, "node mapping") {
			continue
		}
		f := strings.Fields(strings.TrimPrefix(l, "node mapping"))
		if len(f) < 5 {
			t.Fatalf("node mapping row %q: want min, mean, max, msgs_mean, msgs_busiest", l)
		}
		for _, i := range []int{3, 4} {
			if v, err := strconv.ParseFloat(f[i], 64); err != nil || v != 0 {
				t.Fatalf("node mapping sends bootstrap messages on one node: %q\n%s", l, r.stdout)
			}
		}
		return
	}
	t.Fatalf("no node mapping row in:\n%s", r.stdout)
}
