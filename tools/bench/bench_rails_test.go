package bench

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Two runs' rows pool per cell: the table shows min/median/max over both, the ratios of the
// medians against the targets (the unequal sum from the rails alone), each run's load; the plot
// has a panel per test and rails with a line per policy.
func TestRailsBenchTableAndPlot(t *testing.T) {
	run1 := `=== RUN not a row
{"test":"put","rails":"equal","spray":"single","qps":1,"pes":2,"size_bytes":65536,"mbps":[900,950,1000],"load":"1.50, 1.00, 0.50"}
{"test":"put","rails":"equal","spray":"cas","qps":1,"pes":2,"size_bytes":65536,"mbps":[3000,3100],"load":"2.50, 1.00, 0.50"}
{"test":"put","rails":"equal","spray":"rr","qps":1,"pes":2,"size_bytes":65536,"mbps":[2800],"load":"2.00, 1.00, 0.50"}
{"test":"put","rails":"unequal","spray":"rail0","qps":1,"pes":2,"size_bytes":16777216,"mbps":[1000],"load":"2.00, 1.00, 0.50"}
{"test":"put","rails":"unequal","spray":"rail1","qps":1,"pes":2,"size_bytes":16777216,"mbps":[1000],"load":"2.00, 1.00, 0.50"}
{"test":"put","rails":"unequal","spray":"cas","qps":1,"pes":2,"size_bytes":65536,"mbps":[1800],"load":"2.00, 1.00, 0.50"}
{"test":"put","rails":"unequal","spray":"rr","qps":1,"pes":2,"size_bytes":65536,"mbps":[1000],"load":"2.00, 1.00, 0.50"}
{"test":"alltoall","rails":"equal","spray":"cas","qps":1,"pes":4,"size_bytes":65536,"mbps":[400],"load":"2.00, 1.00, 0.50"}
`
	run2 := `{"test":"put","rails":"equal","spray":"single","qps":1,"pes":2,"size_bytes":65536,"mbps":[1100],"load":"7.00, 1.00, 0.50"}
{"test":"put","rails":"equal","spray":"cas","qps":1,"pes":2,"size_bytes":65536,"mbps":[3200],"load":"9.25, 1.00, 0.50"}
`
	dir := t.TempDir()
	f1, f2 := filepath.Join(dir, "run1.json"), filepath.Join(dir, "run2.json")
	for f, s := range map[string]string{f1: run1, f2: run2} {
		if err := os.WriteFile(f, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	svg := filepath.Join(dir, "rails.svg")
	var out, errOut bytes.Buffer
	if code := Main([]string{"bench", "--rails", f1, "--plot", svg, f2}, &out, &errOut); code != 0 {
		t.Fatalf("roxrun bench --rails: status %d: %s", code, errOut.String())
	}
	table := out.String()
	for _, want := range []string{
		"900/975/1100", // single: 900, 950, 1000, 1100 pooled
		"3000/3100/3200",
		"3.18", // cas/single: 3100/975
		"2.87", // rr/single: 2800/975
		"0.90", // unequal cas/sum: 1800/2000
		"1.80", // cas/rr
		"load average 1.5..2.5",
		"load average 7.0..9.2",
		"sum of the 2 rails' own rates",
		"alltoall, equal rails, 4 PEs: busbw per PE",
	} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}
	b, err := os.ReadFile(svg)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"<svg", "put, equal rails, 2 PEs", "alltoall, unequal rails, 4 PEs", "cas", "rr", "sum of the 2 rails alone"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("plot lacks %q", want)
		}
	}
	png := filepath.Join(dir, "rails.png")
	if code := Main([]string{"bench", "rails", f1, f2, "--plot", png}, &out, &errOut); code != 0 {
		t.Fatalf("roxrun bench rails --plot %s: status %d: %s", png, code, errOut.String())
	}
	checkPNG(t, png, 3) // single, rr, cas
	if code := Main([]string{"bench", "--rails"}, &out, &errOut); code != 2 {
		t.Errorf("roxrun bench --rails with no file: status %d", code)
	}
}
