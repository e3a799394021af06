package bench

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"

	"github.com/roxamen/roxamen/tools/roxruntest"
)

// The workload rows run in the host suite, and --compare mpi-ep runs the MPI_Alltoallv program
// over the same routings: every Roxamen ep row has its MPI row beside it, with the same size and
// the same payload bytes per call (latency times bandwidth, within 0.1%: one token of a
// different routing is 0.4%).
func TestBenchEPCompareMPI(t *testing.T) {
	if testing.Short() {
		t.Skip("builds roxrun and the MPI program and runs both")
	}
	needMPI(t)
	bin := roxruntest.Binary(t)
	tests := "ep_dispatch_ll,ep_combine_ll,ep_dispatch,ep_combine,gemm_allreduce_fused,gemm_allreduce_unfused"
	cmd := exec.Command(bin, "bench", "--tests", tests, "--rounds", "1", "--compare", "mpi-ep", "--json")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v\nstdout:\n%s\nstderr:\n%s", err, out.String(), errb.String())
	}
	rows := map[string]benchRow{}
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var r benchRow
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("not a JSON row: %q", l)
		}
		if r.LatencyUS <= 0 {
			t.Errorf("row without a latency: %+v", r)
		}
		rows[r.Backend+" "+r.Test] = r
	}
	for _, test := range strings.Split(tests, ",") {
		r, ok := rows["host "+test]
		if !ok {
			t.Errorf("no %s row:\n%s", test, out.String())
			continue
		}
		if !strings.HasPrefix(test, "ep_") {
			continue
		}
		m, ok := rows["mpi "+test]
		if !ok {
			t.Errorf("no MPI %s row:\n%s", test, out.String())
			continue
		}
		rb, mb := r.BandwidthGBps*r.LatencyUS*1e3, m.BandwidthGBps*m.LatencyUS*1e3
		if m.SizeBytes != r.SizeBytes || rb <= 0 || mb/rb < 0.999 || mb/rb > 1.001 {
			t.Errorf("%s: Roxamen moves %.0f bytes per call of a %d-byte batch, MPI %.0f of %d", test, rb, r.SizeBytes, mb, m.SizeBytes)
		}
	}
	if !strings.Contains(errb.String(), "mpi-ep: 4 rows, 4 beside Roxamen's") {
		t.Errorf("summary on stderr: %q", errb.String())
	}
}
