package sim

import (
	"math"
	"testing"
	"time"
)

func run(t *testing.T, cfg Config) Result {
	t.Helper()
	r, err := Run(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(r.Row())
	return r
}

// TestScale1024 runs the real bootstrap for 256 and 1,024 virtual PEs in tree mode and checks the
// structural targets (counts, never times): the busiest PE's Init traffic at most 4x the
// average, the busiest PE's and the root's growing no faster than log N.
func TestScale1024(t *testing.T) {
	t.Log(Header)
	for _, p := range []Pattern{Ring, Stencil, Group8} {
		small := run(t, Config{NPEs: 256, Pattern: p, Tree: true, Latency: 2 * time.Microsecond, Overhead: time.Microsecond, Bandwidth: 12.5e9})
		big := run(t, Config{NPEs: 1024, Pattern: p, Tree: true, Latency: 2 * time.Microsecond, Overhead: time.Microsecond, Bandwidth: 12.5e9})
		for _, r := range []Result{small, big} {
			if float64(r.MaxMsgs) > 4*r.MeanMsgs {
				t.Errorf("%s N=%d: busiest PE %d messages, more than 4x the mean %.1f", p, r.NPEs, r.MaxMsgs, r.MeanMsgs)
			}
			if r.Root.Msgs() > 4*uint64(r.MaxMsgs) {
				t.Errorf("%s N=%d: the root handled %d messages, the busiest PE %d", p, r.NPEs, r.Root.Msgs(), r.MaxMsgs)
			}
		}
		logGrowth := math.Log2(1024) / math.Log2(256)
		if g := float64(big.MaxMsgs) / float64(small.MaxMsgs); g > logGrowth {
			t.Errorf("%s: busiest PE's messages grew %.2fx from 256 to 1,024 PEs, more than log N's %.2fx", p, g, logGrowth)
		}
		if g := float64(big.Root.Msgs()) / float64(small.Root.Msgs()); g > logGrowth {
			t.Errorf("%s: the root's messages grew %.2fx from 256 to 1,024 PEs, more than log N's %.2fx", p, g, logGrowth)
		}
	}
}

// TestStarIsLinear is the control: the same measurement of the star finds the server's load
// growing with N, so the targets above can fail.
func TestStarIsLinear(t *testing.T) {
	small := run(t, Config{NPEs: 64, Pattern: Ring, Latency: 2 * time.Microsecond})
	big := run(t, Config{NPEs: 256, Pattern: Ring, Latency: 2 * time.Microsecond})
	if g := float64(big.Root.Msgs()) / float64(small.Root.Msgs()); g < 3.5 {
		t.Errorf("star: the server's messages grew only %.2fx from 64 to 256 PEs", g)
	}
}

func TestPatterns(t *testing.T) {
	for _, tc := range []struct {
		p    Pattern
		n    int
		want int
	}{{Ring, 1024, 2}, {Stencil, 1024, 4}, {Group8, 1024, 7}, {All, 64, 63}, {Ring, 2, 1}} {
		for pe := range tc.n {
			if got := tc.p.Peers(pe, tc.n); len(got) != tc.want {
				t.Fatalf("%s n=%d PE %d: peers %v, want %d", tc.p, tc.n, pe, got, tc.want)
			}
		}
	}
}

// TestScaleAcrossNodes runs the two-level tree across nodes of 8 PEs (bootstrap's hier.go) at
// 256 and 1,024 virtual PEs: the root's traffic grows with the nodes (its registrations), not
// with the PEs' lookups; and a node leader, which relays its node's directory traffic from other
// nodes without counting it, stays within 4x of the mean.
func TestScaleAcrossNodes(t *testing.T) {
	t.Log(Header)
	small := run(t, Config{NPEs: 256, Pattern: Ring, Tree: true, PerNode: 8, Latency: 2 * time.Microsecond, Overhead: time.Microsecond, Bandwidth: 12.5e9})
	big := run(t, Config{NPEs: 1024, Pattern: Ring, Tree: true, PerNode: 8, Latency: 2 * time.Microsecond, Overhead: time.Microsecond, Bandwidth: 12.5e9})
	for _, r := range []Result{small, big} {
		nodes := uint64(r.NPEs / 8)
		// Per leader: a join and a Put with their answers, a Get with its answer (all but the
		// first k), the table's k sends, and k children's joins and collectives.
		if r.Root.Msgs() > 6*nodes+64 {
			t.Errorf("N=%d: the root handled %d messages for %d nodes", r.NPEs, r.Root.Msgs(), nodes)
		}
		if float64(r.MaxMsgs) > 4*r.MeanMsgs {
			t.Errorf("N=%d: busiest PE %d messages, more than 4x the mean %.1f", r.NPEs, r.MaxMsgs, r.MeanMsgs)
		}
	}
	if g := float64(big.MaxMsgs) / float64(small.MaxMsgs); g > math.Log2(1024)/math.Log2(256) {
		t.Errorf("busiest PE's messages grew %.2fx from 256 to 1,024 PEs, more than log N's", g)
	}
}
