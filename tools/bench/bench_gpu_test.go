package bench

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// The GPU table shows each row's median with its spread, per mode, and the ratios.
func TestGPUTable(t *testing.T) {
	row := func(test, ord string, lat, lo, hi, bw float64) gpuRow {
		return gpuRow{benchRow: benchRow{Test: test, Backend: "cuda", PEs: 2, SizeBytes: 8, Blocks: 1, LatencyUS: lat, MinUS: lo, MaxUS: hi, Rounds: 5, BandwidthGBps: bw}, Ordering: ord}
	}
	rows := []gpuRow{row("p_pingpong", "strict", 1.2, 1.1, 1.5, 0), row("p_pingpong", "bypass", 1.0, 0.9, 1.4, 0),
		{benchRow: benchRow{Test: "hbm_after_init", PEs: 2}, Ordering: "strict", HBMMiB: 1100}}
	var b bytes.Buffer
	printGPUTable(&b, rows, parseNVSHMEM("p_pingpong 8B one-way latency 1.12 us\n"))
	out := b.String()
	for _, want := range []string{"1.100..1.500", "0.900..1.400", "0.833x", "1.120", "0.893x", "roxamen hbm_after_init", "1100.0"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}

// A ratio to NVSHMEM comes with the range the two rows' round spreads allow.
func TestRatioRange(t *testing.T) {
	lat := func(med, lo, hi float64) gpuRow {
		return gpuRow{benchRow: benchRow{LatencyUS: med, MinUS: lo, MaxUS: hi, Rounds: 5}}
	}
	bw := func(med, lo, hi float64) gpuRow {
		return gpuRow{benchRow: benchRow{BandwidthGBps: med, Rounds: 5}, BWMinGBps: lo, BWMaxGBps: hi}
	}
	near := func(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }
	for _, c := range []struct {
		name        string
		rox, nv     gpuRow
		lo, med, hi float64
		ok          bool
	}{
		{"latency", lat(0.4, 0.3, 0.5), lat(0.2, 0.1, 0.25), 1.2, 2, 5, true},
		{"bandwidth", bw(100, 80, 120), bw(200, 160, 240), 80.0 / 240, 0.5, 120.0 / 160, true},
		{"no spread: the median at both ends", gpuRow{benchRow: benchRow{LatencyUS: 1}}, lat(2, 1, 4), 0.25, 0.5, 1, true},
		{"latency beside bandwidth", lat(1, 1, 1), bw(1, 1, 1), 0, 0, 0, false},
		{"a missing figure", lat(0, 0, 0), lat(1, 1, 1), 0, 0, 0, false},
	} {
		lo, med, hi, ok := ratioRange(c.rox, c.nv)
		if ok != c.ok || !near(lo, c.lo) || !near(med, c.med) || !near(hi, c.hi) {
			t.Errorf("%s: ratioRange = %v, %v, %v, %v; want %v, %v, %v, %v", c.name, lo, med, hi, ok, c.lo, c.med, c.hi, c.ok)
		}
	}
}

// A bandwidth round takes 2 GiB's worth of repetitions (8 to 2000), but no more than a round of
// about bwRound at the warm-up's pace: one block moving 256 MiB at 40 GB/s is 8 repetitions, not
// 50 s a round.
func TestBWIters(t *testing.T) {
	for _, c := range []struct {
		size int
		warm time.Duration
		want uint64
	}{
		{4 << 10, 0, 2000},
		{4 << 10, 2 * time.Microsecond, 2000},
		{1 << 20, 22 * time.Microsecond, uint64(bwRound / (22 * time.Microsecond))},
		{16 << 20, 10 * time.Microsecond, 128},
		{256 << 20, 7 * time.Millisecond, 8},
		{256 << 20, 200 * time.Microsecond, 8},
	} {
		if got := bwIters(c.size, c.warm); got != c.want {
			t.Errorf("bwIters(%d, %v) = %d, want %d", c.size, c.warm, got, c.want)
		}
	}
}
