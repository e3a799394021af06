package bench

// roxrun bench rails FILE... [--plot FILE.svg]: the tcp transport's rails benchmark table and
// plot, from the JSON rows that `ROX_BENCH=1 ROX_BENCH_JSON=FILE go test -run
// TestRailsBandwidth ./test/netns` writes (it needs root: the rig is network namespaces). Each
// row is one cell's samples in one run; the files (one or several runs) are pooled per cell,
// and the table shows min/median/max per cell, the ratios of the medians against the targets
// (equal rails: cas and rr over single; unequal: cas over the sum of the rails' own rates, each
// measured alone in the same run, and cas over rr), and each run's machine load. --plot draws
// bandwidth (put) and busbw (alltoall) against size per spray policy, with the plotting code of
// --coll.

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
)

// railRow is one cell's samples in one run (test/netns's TestRailsBandwidth writes them).
type railRow struct {
	Test      string    `json:"test"`  // put, put_qp2, alltoall
	Rails     string    `json:"rails"` // equal, unequal
	Spray     string    `json:"spray"` // single, rr, cas; railN: single on rail N alone
	QPs       int       `json:"qps"`
	PEs       int       `json:"pes"`
	SizeBytes int       `json:"size_bytes"`
	Mbps      []float64 `json:"mbps"` // put: bandwidth; alltoall: busbw per PE
	Load      string    `json:"load"`
}

// railsBench tabulates (and with plotFile draws) the rails benchmark's JSON rows files.
func railsBench(files []string, plotFile string, stdout, stderr io.Writer) int {
	if len(files) == 0 {
		fmt.Fprintln(stderr, "roxrun bench rails: name the JSON rows files of TestRailsBandwidth (ROX_BENCH_JSON)")
		return 2
	}
	var runs [][]railRow
	for _, f := range files {
		rows, err := readRailRows(f)
		if err != nil {
			fmt.Fprintln(stderr, "roxrun bench rails:", err)
			return 1
		}
		runs = append(runs, rows)
	}
	tb := poolRails(runs)
	printRailsTable(stdout, tb, files)
	if plotFile != "" {
		if err := plotRails(plotFile, tb); err != nil {
			fmt.Fprintln(stderr, "roxrun bench rails: --plot:", err)
			return 1
		}
	}
	return 0
}

func readRailRows(file string) ([]railRow, error) {
	return readJSONRows(file, func(r *railRow) bool {
		return r.Test != "" && r.Spray != "" && r.SizeBytes > 0 && len(r.Mbps) > 0
	}, "rows with a test, a spray policy, a size and samples")
}

type railKey struct {
	test, rails, spray string
	size               int
}

// railTable is every cell's samples pooled over the runs, and each run's loads.
type railTable struct {
	cells map[railKey][]float64
	sizes []int
	loads [][]string // loads[run]: the loads its rows recorded, in order, deduplicated
	pes   map[string]int
}

func poolRails(runs [][]railRow) *railTable {
	tb := &railTable{cells: map[railKey][]float64{}, pes: map[string]int{}}
	for _, rows := range runs {
		var loads []string
		for _, r := range rows {
			k := railKey{r.Test, r.Rails, r.Spray, r.SizeBytes}
			tb.cells[k] = append(tb.cells[k], r.Mbps...)
			if !strings.HasPrefix(r.Spray, "rail") && !slices.Contains(tb.sizes, r.SizeBytes) {
				tb.sizes = append(tb.sizes, r.SizeBytes)
			}
			tb.pes[r.Test] = r.PEs
			if r.Load != "" && (len(loads) == 0 || loads[len(loads)-1] != r.Load) {
				loads = append(loads, r.Load)
			}
		}
		tb.loads = append(tb.loads, loads)
	}
	slices.Sort(tb.sizes)
	return tb
}

func medianOf(s []float64) float64 {
	if len(s) == 0 {
		return 0
	}
	c := slices.Clone(s)
	slices.Sort(c)
	if len(c)%2 == 1 {
		return c[len(c)/2]
	}
	return (c[len(c)/2-1] + c[len(c)/2]) / 2
}

// railSum is the sum over the rails of each rail's own median rate, measured alone (the put's
// rails for put and put_qp2), and the rails it found.
func (tb *railTable) railSum(test string) (sum float64, rails int) {
	if test == "put_qp2" {
		test = "put"
	}
	for r := 0; ; r++ {
		found := false
		for k, v := range tb.cells {
			if k.test == test && k.rails == "unequal" && k.spray == fmt.Sprintf("rail%d", r) {
				sum += medianOf(v)
				found = true
			}
		}
		if !found {
			return sum, r
		}
	}
}

func (tb *railTable) med(test, rails, spray string, size int) float64 {
	return medianOf(tb.cells[railKey{test, rails, spray, size}])
}

func printRailsTable(w io.Writer, tb *railTable, files []string) {
	for i, f := range files {
		// The 1-minute load average as the run's cells ended: its least and greatest.
		lo, hi := math.Inf(1), math.Inf(-1)
		for _, l := range tb.loads[i] {
			var v float64
			if _, err := fmt.Sscanf(strings.TrimSpace(l), "%f", &v); err == nil {
				lo, hi = math.Min(lo, v), math.Max(hi, v)
			}
		}
		if lo <= hi {
			fmt.Fprintf(w, "run %d (%s): 1-minute load average %.1f..%.1f over its cells (2 CPUs)\n", i+1, f, lo, hi)
		} else {
			fmt.Fprintf(w, "run %d (%s): load not recorded\n", i+1, f)
		}
	}
	sprays := []string{"single", "rr", "cas"}
	for _, rails := range []string{"equal", "unequal"} {
		for _, test := range []string{"put", "put_qp2", "alltoall"} {
			has := false
			for k := range tb.cells {
				has = has || (k.test == test && k.rails == rails)
			}
			if !has {
				continue
			}
			what := "bandwidth"
			if test == "alltoall" {
				what = "busbw per PE"
			}
			fmt.Fprintf(w, "\n%s, %s rails, %d PEs: %s, Mbit/s, min/median/max of %d runs' samples\n", test, rails, tb.pes[test], what, len(files))
			fmt.Fprintf(w, "%8s", "size")
			for _, s := range sprays {
				fmt.Fprintf(w, " %18s", s)
			}
			sum, n := tb.railSum(test)
			if rails == "equal" {
				fmt.Fprintf(w, " %10s %10s\n", "cas/single", "rr/single")
			} else {
				fmt.Fprintf(w, " %10s %10s\n", "cas/sum", "cas/rr")
			}
			for _, size := range tb.sizes {
				fmt.Fprintf(w, "%8s", railSize(size))
				for _, s := range sprays {
					v := tb.cells[railKey{test, rails, s, size}]
					if len(v) == 0 {
						fmt.Fprintf(w, " %18s", "-")
						continue
					}
					fmt.Fprintf(w, " %18s", fmt.Sprintf("%.0f/%.0f/%.0f", slices.Min(v), medianOf(v), slices.Max(v)))
				}
				cas, rr, one := tb.med(test, rails, "cas", size), tb.med(test, rails, "rr", size), tb.med(test, rails, "single", size)
				ratio := func(a, b float64) string {
					if a == 0 || b == 0 {
						return "-"
					}
					return fmt.Sprintf("%.2f", a/b)
				}
				if rails == "equal" {
					fmt.Fprintf(w, " %10s %10s\n", ratio(cas, one), ratio(rr, one))
				} else {
					fmt.Fprintf(w, " %10s %10s\n", ratio(cas, sum), ratio(cas, rr))
				}
			}
			if rails == "unequal" && n > 0 {
				fmt.Fprintf(w, "sum of the %d rails' own rates (each alone, same congestion): %.0f Mbit/s; targets: equal cas, rr >= 3 x single; unequal cas >= 0.85 x sum, >= 1.5 x rr\n", n, sum)
			}
		}
	}
}

func railSize(n int) string {
	if n >= 1<<20 {
		return fmt.Sprintf("%dMiB", n>>20)
	}
	return fmt.Sprintf("%dKiB", n>>10)
}

// plotRails draws one panel per test and rails (put bandwidth, alltoall busbw), a line per
// spray policy (medians), and in the unequal panels the sum of the rails' own rates.
func plotRails(file string, tb *railTable) error {
	series := []struct{ test, spray, name string }{
		{"", "single", "single"}, {"", "rr", "rr"}, {"", "cas", "cas"}, {"put_qp2", "cas", "cas, 2 connections per rail"},
	}
	var grid [][]plotPanel
	for _, test := range []string{"put", "alltoall"} {
		var row []plotPanel
		for _, rails := range []string{"equal", "unequal"} {
			y := "put bandwidth (GB/s)"
			if test == "alltoall" {
				y = "bus bandwidth per PE (GB/s)"
			}
			pn := plotPanel{Title: fmt.Sprintf("%s, %s rails, %d PEs", test, rails, tb.pes[test]), XLabel: "message size", XBytes: true, YLabel: y}
			for si, s := range series {
				t := test
				if s.test != "" {
					if test != "put" {
						continue
					}
					t = s.test
				}
				sr := plotSeries{Name: s.name, Color: si}
				for _, size := range tb.sizes {
					// the samples are Mbit/s; the plots speak GB/s, as every other benchmark does
					v := tb.cells[railKey{t, rails, s.spray, size}]
					if len(v) == 0 {
						continue
					}
					sr.Pts = append(sr.Pts, plotPoint{X: float64(size), Y: medianOf(v) / 8000, Lo: slices.Min(v) / 8000, Hi: slices.Max(v) / 8000})
				}
				pn.Series = append(pn.Series, sr)
			}
			if sum, n := tb.railSum(test); rails == "unequal" && n > 0 {
				sr := plotSeries{Name: fmt.Sprintf("sum of the %d rails alone", n), Color: len(series)}
				for _, size := range tb.sizes {
					sr.Pts = append(sr.Pts, plotPoint{X: float64(size), Y: sum / 8000})
				}
				pn.Series = append(pn.Series, sr)
			}
			row = append(row, pn)
		}
		grid = append(grid, row)
	}
	var loads []string
	for _, l := range tb.loads {
		loads = append(loads, l...)
	}
	load := ""
	if len(loads) > 0 {
		first := strings.TrimSuffix(strings.Fields(loads[0])[0], ",")
		last := strings.TrimSuffix(strings.Fields(loads[len(loads)-1])[0], ",")
		load = fmt.Sprintf("%s .. %s (1-minute, as the runs' cells ended)", first, last)
	}
	return plotGrid(file, plotCaption(load), grid)
}
