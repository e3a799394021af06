package bench

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Anchor rows parse, the table shows the ratios, and the plot is an SVG with a panel per
// collective and a line per source.
func TestCollBenchTableAndPlot(t *testing.T) {
	anchor := `not a row
{"test":"allreduce","pes":2,"size_bytes":8,"latency_us":0.27,"busbw_gbps":0.059}
{"test":"allreduce","pes":2,"size_bytes":65536,"latency_us":48,"busbw_gbps":2.7}
`
	rows, err := parseJSONRows(strings.NewReader(anchor), isCollRow)
	if err != nil || len(rows) != 2 {
		t.Fatalf("parsed %v, %v", rows, err)
	}
	ours := []collRow{
		{Test: "allreduce", PEs: 2, SizeBytes: 8, LatencyUS: 0.135, BusBWGBps: 0.118, Algorithm: "oneshot"},
		{Test: "allreduce", PEs: 2, SizeBytes: 65536, LatencyUS: 16, BusBWGBps: 8.1, Algorithm: "twoshot"},
		{Test: "broadcast", PEs: 2, SizeBytes: 65536, LatencyUS: 10, BusBWGBps: 6.5, Algorithm: "twoshot"},
	}
	one := 1
	ours = append(ours, collRow{Test: "alltoall", PEs: 2, SizeBytes: 1 << 24, LatencyUS: 100, BusBWGBps: 80, Algorithm: "ce", SMs: &one})
	var b bytes.Buffer
	printCollTable(&b, ours, []string{"mpi"}, map[string][]collRow{"mpi": rows})
	if !strings.Contains(b.String(), " sms ") || !strings.Contains(b.String(), "ce          1") {
		t.Errorf("table lacks the sms column or the ce row's 1 SM:\n%s", b.String())
	}
	for _, want := range []string{"0.50", "3.00", "twoshot"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
	file := filepath.Join(t.TempDir(), "coll.svg")
	if err := plotColl(file, "roxrun bench --coll | test caption", ours, []string{"mpi"}, map[string][]collRow{"mpi": rows}); err != nil {
		t.Fatal(err)
	}
	svg, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	s := string(svg)
	for _, want := range []string{"<svg", "allreduce, 2 PEs", "broadcast, 2 PEs", "bus bandwidth (GB/s)", "latency (µs)", "64 KiB", "roxamen", "mpi", "test caption"} {
		if !strings.Contains(s, want) {
			t.Errorf("plot lacks %q", want)
		}
	}
}

// The comparison's ratios are taken round by round and summarized as min/median/max; a round
// that one side lacks gives no ratio.
func TestCollCompareRatios(t *testing.T) {
	r := ratios([]float64{1, 3, 2, 5}, []float64{2, 2, 0, 10})
	if got := ratioSpread(r); got != "0.50/0.50/1.50" {
		t.Errorf("ratios %v: spread %q, want 0.50/0.50/1.50", r, got)
	}
	if got := ratioSpread(nil); got != "-" {
		t.Errorf("no ratios: %q, want -", got)
	}
	if mpiCollName("barrier_all_latency") != "team_barrier" || mpiCollName("allreduce") != "allreduce" {
		t.Error("the MPI program's barrier row is not the team_barrier row")
	}
}
