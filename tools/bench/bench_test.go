package bench

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/roxamen/roxamen/tools/roxruntest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	roxruntest.Remove()
	os.Exit(code)
}

func TestSpread(t *testing.T) {
	for _, c := range []struct {
		in          []float64
		med, lo, hi float64
	}{
		{[]float64{3, 1, 2}, 2, 1, 3},
		{[]float64{4, 1, 3, 2}, 2.5, 1, 4},
		{[]float64{0.08, 1.5, 0.09, 1.6, 0.07}, 0.09, 0.07, 1.6},
		{[]float64{5}, 5, 5, 5},
	} {
		med, lo, hi := spread(c.in)
		if med != c.med || lo != c.lo || hi != c.hi {
			t.Errorf("spread(%v) = %v, %v, %v; want %v, %v, %v", c.in, med, lo, hi, c.med, c.lo, c.hi)
		}
	}
}

// Every latency row of roxrun bench --json carries its median, min and max over the rounds.
func TestBenchJSONSpread(t *testing.T) {
	if testing.Short() {
		t.Skip("builds roxrun and starts a benchmark job")
	}
	bin := roxruntest.Binary(t)
	cmd := exec.Command(bin, "bench", "--json", "--rounds", "3", "--iters", "300", "--tests", "p_pingpong,put_signal_pingpong,fetch_add_latency,barrier_all_latency")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v\n%s%s", err, out.String(), errb.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 4 {
		t.Fatalf("%d rows, want 4:\n%s", len(lines), out.String())
	}
	for _, l := range lines {
		var raw map[string]any
		if err := json.Unmarshal([]byte(l), &raw); err != nil {
			t.Fatalf("%q: %v", l, err)
		}
		for _, k := range []string{"latency_us", "latency_min_us", "latency_max_us", "rounds"} {
			if _, ok := raw[k]; !ok {
				t.Errorf("row %s lacks %s", raw["test"], k)
			}
		}
		var r benchRow
		_ = json.Unmarshal([]byte(l), &r)
		if r.Rounds != 3 || !(0 < r.MinUS && r.MinUS <= r.LatencyUS && r.LatencyUS <= r.MaxUS) {
			t.Errorf("row %s: rounds %d, min %v, median %v, max %v", r.Test, r.Rounds, r.MinUS, r.LatencyUS, r.MaxUS)
		}
	}
	if !strings.HasPrefix(errb.String(), "bench: 4 rows on host, 2 PEs, 3 rounds each") {
		t.Errorf("stderr %q, want only the summary line", errb.String())
	}
}
