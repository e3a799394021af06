package bench

import (
	"bytes"
	"strings"
	"testing"
)

// The GPU table shows each latency row's median with its spread, per mode, and the ratios.
func TestGPUTable(t *testing.T) {
	row := func(test, ord string, lat, lo, hi, bw float64) gpuRow {
		return gpuRow{benchRow{Test: test, Backend: "cuda", PEs: 2, SizeBytes: 8, Blocks: 1, LatencyUS: lat, MinUS: lo, MaxUS: hi, Rounds: 5, BandwidthGBps: bw}, ord}
	}
	rows := []gpuRow{row("p_pingpong", "strict", 1.2, 1.1, 1.5, 0), row("p_pingpong", "bypass", 1.0, 0.9, 1.4, 0)}
	var b bytes.Buffer
	printGPUTable(&b, rows, parseNVSHMEM("p_pingpong 8B one-way latency 1.12 us\n"))
	out := b.String()
	for _, want := range []string{"1.100..1.500", "0.900..1.400", "0.833x", "1.120", "0.893x"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}
