package bench

// roxrun bench coll: the host collectives (allreduce, allgather, alltoall, broadcast,
// reduce_scatter, team_barrier) by nccl-tests' conventions, beside anchor rows (--anchor FILE: JSON
// rows in the same format, e.g. Open MPI's collectives measured on the same machine), and
// --plot FILE.svg: bus bandwidth and latency against size, one panel per collective.
//
// Conventions (those of nccl-tests, and of the Open MPI anchor): size_bytes is the per-PE buffer
// (allreduce: the float32 vector; allgather and alltoall: the whole receive buffer, each PE sending
// size/N bytes to each; broadcast: the message; reduce_scatter: the float32 input, each PE getting
// size/N); latency_us is the mean time per call of the slowest PE, the median of --rounds rounds (5 in
// each job of a --compare round);
// busbw_gbps = size * f / latency with f = 2(N-1)/N for allreduce, (N-1)/N for allgather, alltoall
// and reduce_scatter, 1 for broadcast.

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/roxamen/roxamen/device"
	"github.com/roxamen/roxamen/shmem"
	"github.com/roxamen/roxamen/tools/launch"
)

// collPEFlag makes `roxrun bench` the PE side of the collective benchmark.
const collPEFlag = "-coll-pe"

// collRow is one row of the collective benchmark (and of an anchor file).
type collRow struct {
	Test      string  `json:"test"`
	Backend   string  `json:"backend,omitempty"`
	PEs       int     `json:"pes"`
	SizeBytes int     `json:"size_bytes"`
	LatencyUS float64 `json:"latency_us"`
	BusBWGBps float64 `json:"busbw_gbps"`
	Algorithm string  `json:"algorithm,omitempty"`
	SMs       *int    `json:"sms,omitempty"` // SMs (blocks) the algorithm occupies; absent in anchor rows
	// The fastest and slowest rounds' latency (LatencyUS is their median); absent in anchor rows.
	LatencyMinUS float64 `json:"latency_min_us,omitempty"`
	LatencyMaxUS float64 `json:"latency_max_us,omitempty"`
	// GPU rows: the host's time to enqueue one call, and the spread (slowest - fastest) of the rounds
	EnqueueUS float64 `json:"enqueue_us,omitempty"`
	SpreadUS  float64 `json:"spread_us,omitempty"`
}

var collTests = []string{"allreduce", "allgather", "alltoall", "broadcast", "reduce_scatter", "team_barrier"}

var collSizes = []int{8, 64, 1024, 8192, 65536, 1 << 20, 16 << 20}

func collIters(size int) int {
	switch {
	case size <= 8192:
		return 1000
	case size <= 65536:
		return 200
	case size <= 1<<20:
		return 40
	}
	return 6
}

type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(s string) error { *m = append(*m, s); return nil }

// collBench runs the coll suite: the collectives per size in a job of f.n PEs, or with
// --compare mpi, round by round beside Open MPI's.
func collBench(f *benchFlags, stdout, stderr io.Writer) int {
	c := f.cmd
	if f.compare != "" && f.compare != "mpi" {
		return c.Fail(stderr, "--compare %q: the coll suite compares with mpi only", f.compare)
	}
	n, asJSON, timeout, tests, iters, cpuprofile := &f.n, &f.asJSON, &f.timeout, &f.tests, &f.iters, &f.cpuprofile
	plotFile, compareList, rounds, anchors := &f.plot, &f.compare, &f.rounds, f.anchors
	anchorRows := map[string][]collRow{}
	var anchorNames []string
	for _, f := range anchors {
		rows, err := readCollRows(f)
		if err != nil {
			fmt.Fprintln(stderr, "roxrun bench:", err)
			return 1
		}
		name := strings.TrimSuffix(filepath.Base(f), filepath.Ext(f))
		anchorRows[name] = rows
		anchorNames = append(anchorNames, name)
	}
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(stderr, "roxrun bench:", err)
		return 1
	}
	// Each job's rows are the median of its rounds; with --compare a round is one job of each
	// side, each the median of 5 (the Open MPI program's count).
	inner := *rounds
	if *compareList != "" {
		inner = 5
	}
	argv := []string{self, "bench", collPEFlag, "-rounds", strconv.Itoa(inner)}
	if *tests != "" {
		argv = append(argv, "-tests", *tests)
	}
	if *cpuprofile != "" {
		argv = append(argv, "-cpuprofile", *cpuprofile)
	}
	if *iters > 0 {
		argv = append(argv, "-iters", strconv.Itoa(*iters))
	}
	runRox := func() ([]collRow, int) {
		var out bytes.Buffer
		cfg := launch.Config{NPEs: *n, Argv: argv, Timeout: *timeout, Stdout: &out, Stderr: stderr, MPS: launch.JobMPS(*n)}
		if os.Getenv("ROX_HEAP_SIZE") == "" {
			// 16 MiB buffers: a source and a destination per PE, and the collectives' scratch
			cfg.Env = []string{"ROX_HEAP_SIZE=160M"}
		}
		if err := launch.Run(context.Background(), cfg); err != nil {
			fmt.Fprintln(stderr, err)
			return nil, launch.ExitStatus(err)
		}
		rows, err := parseJSONRows(&out, isCollRow)
		if err != nil {
			fmt.Fprintln(stderr, "roxrun bench:", err)
			return nil, 1
		}
		return rows, 0
	}
	if *compareList != "" {
		return collCompare(runRox, *n, *rounds, *tests, *timeout, *asJSON, *plotFile, anchorNames, anchorRows, stdout, stderr)
	}
	rows, code := runRox()
	if code != 0 {
		return code
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		for _, r := range rows {
			_ = enc.Encode(r)
		}
	} else {
		printCollTable(stdout, rows, anchorNames, anchorRows)
	}
	if *plotFile != "" {
		if err := plotColl(*plotFile, plotCaption(""), rows, anchorNames, anchorRows); err != nil {
			fmt.Fprintln(stderr, "roxrun bench: --plot:", err)
			return 1
		}
	}
	return 0
}

// isCollRow: a row names its test.
func isCollRow(r *collRow) bool { return r.Test != "" }

func readCollRows(file string) ([]collRow, error) {
	return readJSONRows(file, isCollRow, "JSON rows with a test, pes and size_bytes")
}

func findRow(rows []collRow, test string, pes, size int) *collRow {
	for i := range rows {
		if rows[i].Test == test && rows[i].PEs == pes && rows[i].SizeBytes == size {
			return &rows[i]
		}
	}
	return nil
}

func printCollTable(w io.Writer, rows []collRow, names []string, anchors map[string][]collRow) {
	fmt.Fprintf(w, "%-15s %4s %10s %-8s %4s %11s %11s", "test", "pes", "size", "algo", "sms", "latency_us", "busbw_GB/s")
	for _, n := range names {
		fmt.Fprintf(w, " | %-10.10s %11s %11s %7s %7s", n, "latency_us", "busbw_GB/s", "lat_x", "bw_x")
	}
	fmt.Fprintln(w)
	for _, r := range rows {
		sms := "-"
		if r.SMs != nil {
			sms = fmt.Sprint(*r.SMs)
		}
		fmt.Fprintf(w, "%-15s %4d %10d %-8s %4s %11.3f %11.3f", r.Test, r.PEs, r.SizeBytes, r.Algorithm, sms, r.LatencyUS, r.BusBWGBps)
		for _, n := range names {
			a := findRow(anchors[n], r.Test, r.PEs, r.SizeBytes)
			if a == nil {
				fmt.Fprintf(w, " | %-10s %11s %11s %7s %7s", "", "-", "-", "-", "-")
				continue
			}
			lat, bw := "-", "-"
			if a.LatencyUS > 0 {
				lat = fmt.Sprintf("%.2f", r.LatencyUS/a.LatencyUS)
			}
			if a.BusBWGBps > 0 {
				bw = fmt.Sprintf("%.2f", r.BusBWGBps/a.BusBWGBps)
			}
			fmt.Fprintf(w, " | %-10s %11.3f %11.3f %7s %7s", "", a.LatencyUS, a.BusBWGBps, lat, bw)
		}
		fmt.Fprintln(w)
	}
	if len(names) > 0 {
		fmt.Fprintln(w, "lat_x = roxamen/anchor latency (want <= 0.5 at 8 B..8 KiB); bw_x = roxamen/anchor busbw (want >= 1.5 at 64 KiB..16 MiB)")
	}
}

// ---- the PE side ----

func collBenchPE(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("roxrun bench "+collPEFlag, flag.ContinueOnError)
	fs.SetOutput(stderr)
	tests := fs.String("tests", "", "")
	cpuprofile := fs.String("cpuprofile", "", "")
	iters := fs.Int("iters", 0, "")
	nrounds := fs.Int("rounds", 5, "")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	ctx := context.Background()
	w, err := shmem.Init(ctx)
	if err != nil {
		fmt.Fprintln(stderr, "roxrun bench:", err)
		return 1
	}
	if *cpuprofile != "" {
		f, err := os.Create(fmt.Sprintf("%s.%d", *cpuprofile, w.MyPE()))
		if err != nil {
			fmt.Fprintln(stderr, "roxrun bench:", err)
			return 1
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(stderr, "roxrun bench:", err)
			return 1
		}
		defer pprof.StopCPUProfile()
	}
	err = runCollBench(ctx, w, *tests, *iters, *nrounds, json.NewEncoder(stdout))
	if ferr := w.Finalize(); err == nil {
		err = ferr
	}
	if err != nil {
		fmt.Fprintf(stderr, "roxrun bench: PE %d: %v\n", w.MyPE(), err)
		return 1
	}
	return 0
}

func runCollBench(ctx context.Context, w *shmem.World, tests string, iters, nrounds int, enc *json.Encoder) error {
	np := w.NPEs()
	team := w.TeamWorld()
	maxb := collSizes[len(collSizes)-1]
	fsrc, err := shmem.Alloc[float32](w, maxb/4)
	if err != nil {
		return err
	}
	fdst, err := shmem.Alloc[float32](w, maxb/4)
	if err != nil {
		return err
	}
	bsrc, _ := shmem.As[uint8](fsrc.Mem())
	bdst, _ := shmem.As[uint8](fdst.Mem())
	gpu := w.Device().Driver != "host"
	var st device.Stream
	if gpu {
		// the heap is device memory: fill it through the host path; the rows are stream-ordered
		ones := make([]float32, fsrc.Len())
		for i := range ones {
			ones[i] = 1
		}
		if err := fsrc.Put(0, ones, w.MyPE()); err != nil {
			return err
		}
		if st, err = w.NewStream(); err != nil {
			return err
		}
		defer st.Destroy()
	} else {
		for i := range fsrc.Local() {
			fsrc.Local()[i] = 1
		}
	}
	times, err := shmem.Alloc[float64](w, 1)
	if err != nil {
		return err
	}
	tmax, err := shmem.Alloc[float64](w, 1)
	if err != nil {
		return err
	}
	if gpu && (tests == "" || containsString(strings.Split(tests, ","), "device")) {
		if err := deviceLoopRows(ctx, w, team, fsrc, fdst, bsrc, bdst, enc); err != nil {
			return fmt.Errorf("device-side rows: %w", err)
		}
	}
	for _, test := range collTests {
		if tests != "" && !containsString(strings.Split(tests, ","), test) {
			continue
		}
		sizes := collSizes
		if test == "team_barrier" {
			sizes = []int{0}
		}
		for _, sz := range sizes {
			if sz < 4*np && (test == "allgather" || test == "alltoall" || test == "reduce_scatter") {
				continue
			}
			var call func() error
			var algo string
			var f float64
			switch test {
			case "allreduce":
				s, _ := fsrc.Slice(0, sz/4)
				d, _ := fdst.Slice(0, sz/4)
				call = func() error { return shmem.AllReduce(ctx, team, d, s, shmem.OpSum) }
				algo, f = team.Algorithm(shmem.CollAllReduce, sz), 2*float64(np-1)/float64(np)
			case "allgather":
				s, _ := bsrc.Slice(0, sz/np)
				d, _ := bdst.Slice(0, sz/np*np)
				call = func() error { return shmem.FCollect(ctx, team, d, s) }
				algo, f = team.Algorithm(shmem.CollFCollect, sz/np), float64(np-1)/float64(np)
			case "alltoall":
				s, _ := bsrc.Slice(0, sz/np*np)
				d, _ := bdst.Slice(0, sz/np*np)
				call = func() error { return shmem.AllToAll(ctx, team, d, s) }
				algo, f = team.Algorithm(shmem.CollAllToAll, sz/np*np), float64(np-1)/float64(np)
			case "broadcast":
				s, _ := bsrc.Slice(0, sz)
				d, _ := bdst.Slice(0, sz)
				call = func() error { return shmem.Broadcast(ctx, team, d, s, 0) }
				algo, f = team.Algorithm(shmem.CollBroadcast, sz), 1
			case "reduce_scatter":
				s, _ := fsrc.Slice(0, sz/4/np*np)
				d, _ := fdst.Slice(0, sz/4/np)
				call = func() error { return shmem.ReduceScatter(ctx, team, d, s, shmem.OpSum) }
				algo, f = team.Algorithm(shmem.CollReduceScatter, sz/4/np*np*4), float64(np-1)/float64(np)
			case "team_barrier":
				call = func() error { return team.Barrier(ctx) }
				algo = team.Algorithm(shmem.CollBarrier, 0)
			}
			sms := 0 // the host collectives run on the CPU
			var flush func() error
			var sc *collStream
			if gpu {
				if sc = streamRow(ctx, w, st, team, test, sz, fsrc, fdst, bsrc, bdst); sc != nil {
					call, flush, algo, sms = sc.call, sc.flush, sc.algo, sc.sms
				}
			}
			it := collIters(sz)
			if iters > 0 {
				it = iters
			}
			for i := 0; i < min(it, 20); i++ { // warm up
				if err := call(); err != nil {
					return fmt.Errorf("%s %d bytes: %w", test, sz, err)
				}
			}
			if flush != nil {
				if err := flush(); err != nil {
					return fmt.Errorf("%s %d bytes: %w", test, sz, err)
				}
			}
			var rounds []float64
			for r := 0; r < nrounds; r++ {
				if err := team.Barrier(ctx); err != nil {
					return err
				}
				t0 := time.Now()
				for i := 0; i < it; i++ {
					if err := call(); err != nil {
						return fmt.Errorf("%s %d bytes: %w", test, sz, err)
					}
				}
				if flush != nil {
					if err := flush(); err != nil {
						return fmt.Errorf("%s %d bytes: %w", test, sz, err)
					}
				}
				el := []float64{time.Since(t0).Seconds() / float64(it)}
				if err := times.Put(0, el, w.MyPE()); err != nil {
					return err
				}
				if err := shmem.AllReduce(ctx, team, tmax, times, shmem.OpMax); err != nil {
					return err
				}
				if err := tmax.Get(0, el, w.MyPE()); err != nil {
					return err
				}
				rounds = append(rounds, el[0])
			}
			sort.Float64s(rounds)
			t := rounds[len(rounds)/2]
			if w.MyPE() == 0 {
				row := collRow{Test: test, Backend: w.Device().Driver, PEs: np, SizeBytes: sz, LatencyUS: t * 1e6, Algorithm: algo, SMs: &sms,
					LatencyMinUS: math.Round(rounds[0]*1e9) / 1000, LatencyMaxUS: math.Round(rounds[len(rounds)-1]*1e9) / 1000}
				if sc != nil {
					row.EnqueueUS, row.SpreadUS = sc.enqueueUS(), math.Round((rounds[len(rounds)-1]-rounds[0])*1e9)/1e3
				}
				if sz > 0 {
					row.BusBWGBps = math.Round(float64(sz)*f/t/1e9*1000) / 1000
				}
				row.LatencyUS = math.Round(row.LatencyUS*1000) / 1000
				if err := enc.Encode(row); err != nil {
					return err
				}
			}
			if sc != nil && sz <= graphRowMax {
				if err := graphRow(ctx, w, team, st, sc, test, sz, it, nrounds, f, times, tmax, enc); err != nil {
					return fmt.Errorf("%s %d bytes from a graph: %w", test, sz, err)
				}
			}
		}
	}
	return nil
}

// ---- the plot ----

// plotColl draws a latency and a busbw panel per collective, a line per source, each point
// with its spread over rounds where the rows carry one.
func plotColl(file, caption string, rows []collRow, names []string, anchors map[string][]collRow) error {
	series := append([]string{"roxamen"}, names...)
	data := map[string][]collRow{"roxamen": rows}
	for _, n := range names {
		data[n] = anchors[n]
	}
	pes := 0
	if len(rows) > 0 {
		pes = rows[0].PEs
	}
	// On a GPU the rows carry the limits measured in the same job: the launch floor under every
	// latency (an empty kernel back to back) and the device-to-device copy over every busbw,
	// drawn flat across the sizes
	var launchUS, copyGBps float64
	for _, r := range rows {
		switch r.Test {
		case "launch_empty":
			launchUS = r.LatencyUS
		case "copy_d2d":
			copyGBps = r.BusBWGBps
		}
	}
	var grid [][]plotPanel
	for _, test := range collTests[:5] { // team_barrier has one size: it is in the table only
		var line []plotPanel
		for _, metric := range []string{"latency", "busbw"} {
			pn := plotPanel{Title: fmt.Sprintf("%s, %d PEs", test, pes), XLabel: "message size per PE", XBytes: true, YLabel: "latency (µs)"}
			if metric == "busbw" {
				pn.YLabel = "bus bandwidth (GB/s)"
			}
			for si, s := range series {
				sr := plotSeries{Name: s, Color: si}
				for _, r := range data[s] {
					if r.Test != test || (pes > 0 && r.PEs != pes) || r.SizeBytes <= 0 {
						continue
					}
					pt := plotPoint{X: float64(r.SizeBytes), Y: r.LatencyUS, Lo: r.LatencyMinUS, Hi: r.LatencyMaxUS}
					if metric == "busbw" {
						// busbw is bytes over time: the slowest round gives the least
						pt.Y, pt.Lo, pt.Hi = r.BusBWGBps, 0, 0
						if r.LatencyMinUS > 0 && r.LatencyMaxUS > 0 {
							pt.Lo, pt.Hi = r.BusBWGBps*r.LatencyUS/r.LatencyMaxUS, r.BusBWGBps*r.LatencyUS/r.LatencyMinUS
						}
					}
					sr.Pts = append(sr.Pts, pt)
				}
				pn.Series = append(pn.Series, sr)
			}
			if lim := map[string]float64{"latency": launchUS, "busbw": copyGBps}[metric]; lim > 0 && len(pn.Series) > 0 {
				name := map[string]string{"latency": "launch floor", "busbw": "copy limit"}[metric]
				sr := plotSeries{Name: name, Color: len(series)}
				for _, p := range pn.Series[0].Pts {
					sr.Pts = append(sr.Pts, plotPoint{X: p.X, Y: lim})
				}
				pn.Series = append(pn.Series, sr)
			}
			line = append(line, pn)
		}
		grid = append(grid, line)
	}
	return plotGrid(file, caption, grid)
}
