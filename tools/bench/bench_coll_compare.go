package bench

// roxrun bench coll --compare mpi: Roxamen's host collectives and Open MPI's (the project's
// comparison program, tools/compare/c/mpi_bench.c) measured in the same run, round by round: each
// round is one Roxamen job then one Open MPI run with the same PEs, the same binding (none: both
// launchers leave placement to the kernel) and the same sizes and iterations, so that both see the
// same load. Each row gives both medians over the rounds and the ratio's min, median and max
// (ratios taken round by round), beside the machine's load average (/proc/loadavg, as uptime
// prints it) at the first and the last round.

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/roxamen/roxamen/internal/units"
)

// collCompared is one row of the comparison: both sides' figures per round.
type collCompared struct {
	Test      string    `json:"test"`
	PEs       int       `json:"pes"`
	SizeBytes int       `json:"size_bytes"`
	Algorithm string    `json:"algorithm"`
	RoxLat    []float64 `json:"roxamen_latency_us"`
	RoxBW     []float64 `json:"roxamen_busbw_gbps"`
	MPILat    []float64 `json:"mpi_latency_us"`
	MPIBW     []float64 `json:"mpi_busbw_gbps"`
	Load      []string  `json:"load"` // the 1-, 5- and 15-minute load averages before each round
}

// mpiCollName maps the comparison program's rows onto the collective benchmark's.
func mpiCollName(test string) string {
	if test == "barrier_all_latency" {
		return "team_barrier"
	}
	return test
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// ratios returns a[i]/b[i] for the rounds where both are above zero, sorted.
func ratios(a, b []float64) []float64 {
	var r []float64
	for i := range min(len(a), len(b)) {
		if a[i] > 0 && b[i] > 0 {
			r = append(r, a[i]/b[i])
		}
	}
	sort.Float64s(r)
	return r
}

// minMax gives the least and greatest of the rounds' figures above zero (0, 0 for none).
func minMax(v []float64) (lo, hi float64) {
	for _, x := range v {
		if x > 0 && (lo == 0 || x < lo) {
			lo = x
		}
		hi = max(hi, x)
	}
	return lo, hi
}

func ratioSpread(r []float64) string {
	if len(r) == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f/%.2f/%.2f", r[0], median(r), r[len(r)-1])
}

func collCompare(runRox func() ([]collRow, int), n, rounds int, tests string, timeout time.Duration, asJSON bool, plotFile string, anchorNames []string, anchorRows map[string][]collRow, stdout, stderr io.Writer) int {
	var order []string
	rows := map[string]*collCompared{}
	key := func(test string, size int) string { return fmt.Sprintf("%s/%d", test, size) }
	mpiTests := tests
	if mpiTests == "" {
		mpiTests = strings.Join(collTests, ",")
	}
	mpiTests = strings.ReplaceAll(mpiTests, "team_barrier", "barrier_all_latency")
	var loads []string
	for r := 0; r < rounds; r++ {
		load := loadAvg()
		loads = append(loads, load)
		fmt.Fprintf(stderr, "roxrun bench coll: round %d of %d (load average %s)\n", r+1, rounds, load)
		rox, code := runRox()
		if code != 0 {
			return code
		}
		for _, x := range rox {
			k := key(x.Test, x.SizeBytes)
			c := rows[k]
			if c == nil {
				c = &collCompared{Test: x.Test, PEs: x.PEs, SizeBytes: x.SizeBytes, Algorithm: x.Algorithm}
				rows[k] = c
				order = append(order, k)
			}
			c.RoxLat = append(c.RoxLat, x.LatencyUS)
			c.RoxBW = append(c.RoxBW, x.BusBWGBps)
			c.Load = append(c.Load, load)
		}
		// 1000 iterations is what the MPI program's collectives ignore (they use the same
		// per-size counts as collIters); 5 inner rounds, their median, as Roxamen's job does.
		res := runComparison(comparisons["mpi"], n, 1000, 5, mpiTests, timeout, stderr)
		if res.err != nil {
			fmt.Fprintf(stderr, "roxrun bench coll --compare mpi: %v\n", res.err)
			return 1
		}
		for _, m := range res.rows {
			k := key(mpiCollName(m.Test), m.SizeBytes)
			if c := rows[k]; c != nil && m.PEs == c.PEs {
				for len(c.MPILat) < r {
					c.MPILat, c.MPIBW = append(c.MPILat, 0), append(c.MPIBW, 0)
				}
				c.MPILat = append(c.MPILat, m.LatencyUS)
				c.MPIBW = append(c.MPIBW, m.BusBWGBps)
			}
		}
	}
	if asJSON {
		enc := json.NewEncoder(stdout)
		for _, k := range order {
			_ = enc.Encode(rows[k])
		}
	} else {
		fmt.Fprintf(stdout, "%d PEs on %d CPUs, %s (each: one Roxamen job, then one Open MPI run, neither bound to cores; waits: Roxamen spins, yields after 10 us, sleeps after 2 ms; Open MPI spins, yielding when oversubscribed); load average (1, 5, 15 min) before each round: %s\n",
			n, runtime.NumCPU(), units.Count(rounds, "round"), strings.Join(loads, " | "))
		fmt.Fprintf(stdout, "%-15s %4s %9s %-8s | %10s %10s | %10s %10s | %-16s %-16s\n", "test", "pes", "size", "algo", "rox_lat_us", "rox_GB/s", "mpi_lat_us", "mpi_GB/s", "lat_x min/med/max", "bw_x min/med/max")
		for _, k := range order {
			c := rows[k]
			bw := "-"
			if c.SizeBytes > 0 {
				bw = ratioSpread(ratios(c.RoxBW, c.MPIBW))
			}
			fmt.Fprintf(stdout, "%-15s %4d %9d %-8s | %10.3f %10.3f | %10.3f %10.3f | %-17s %-16s\n", c.Test, c.PEs, c.SizeBytes, c.Algorithm,
				median(c.RoxLat), median(c.RoxBW), median(c.MPILat), median(c.MPIBW), ratioSpread(ratios(c.RoxLat, c.MPILat)), bw)
		}
		fmt.Fprintln(stdout, "lat_x = roxamen/mpi latency, round by round (want <= 0.5 at 8 B..8 KiB); bw_x = roxamen/mpi busbw (want >= 1.5 at 64 KiB..16 MiB)")
	}
	if plotFile != "" {
		var rox, mpi []collRow
		for _, k := range order {
			c := rows[k]
			rlo, rhi := minMax(c.RoxLat)
			mlo, mhi := minMax(c.MPILat)
			rox = append(rox, collRow{Test: c.Test, PEs: c.PEs, SizeBytes: c.SizeBytes, LatencyUS: median(c.RoxLat), BusBWGBps: median(c.RoxBW), Algorithm: c.Algorithm, LatencyMinUS: rlo, LatencyMaxUS: rhi})
			mpi = append(mpi, collRow{Test: c.Test, PEs: c.PEs, SizeBytes: c.SizeBytes, LatencyUS: median(c.MPILat), BusBWGBps: median(c.MPIBW), LatencyMinUS: mlo, LatencyMaxUS: mhi})
		}
		names := append([]string{"mpi (same run)"}, anchorNames...)
		all := map[string][]collRow{"mpi (same run)": mpi}
		for _, a := range anchorNames {
			all[a] = anchorRows[a]
		}
		caption := plotCaption(fmt.Sprintf("%s (first round) .. %s (last), %s", loads[0], loads[len(loads)-1], units.Count(len(loads), "round")))
		if err := plotColl(plotFile, caption, rox, names, all); err != nil {
			fmt.Fprintln(stderr, "roxrun bench: --plot:", err)
			return 1
		}
	}
	return 0
}
