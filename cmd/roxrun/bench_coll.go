package main

// roxrun bench --coll: the host collectives (allreduce, allgather, alltoall, broadcast,
// reduce_scatter, team_barrier) by nccl-tests' conventions, beside anchor rows (--anchor FILE: JSON
// rows in the same format, e.g. Open MPI's collectives measured on the same machine), and
// --plot FILE.svg: bus bandwidth and latency against size, one panel per collective.
//
// Conventions (those of nccl-tests, and of the Open MPI anchor): size_bytes is the per-PE buffer
// (allreduce: the float32 vector; allgather and alltoall: the whole receive buffer, each PE sending
// size/N bytes to each; broadcast: the message; reduce_scatter: the float32 input, each PE getting
// size/N); latency_us is the mean time per call of the slowest PE, the median of 5 rounds;
// busbw_gbps = size * f / latency with f = 2(N-1)/N for allreduce, (N-1)/N for allgather, alltoall
// and reduce_scatter, 1 for broadcast.

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"image/color"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/roxamen/roxamen/device"
	"github.com/roxamen/roxamen/internal/launch"
	"github.com/roxamen/roxamen/shmem"
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

// collBenchMain handles `roxrun bench --coll|--plot|--anchor ...` and the PE side; ok is false
// for the other benchmarks.
func collBenchMain(args []string, stdout, stderr io.Writer) (code int, ok bool) {
	isColl := false
	for _, a := range args[1:] {
		if a == collPEFlag {
			return collBenchPE(args[2:], stdout, stderr), true
		}
		switch strings.TrimLeft(strings.SplitN(a, "=", 2)[0], "-") {
		case "coll", "plot", "anchor":
			isColl = true
		}
	}
	if !isColl {
		return 0, false
	}
	fs := flag.NewFlagSet("roxrun bench --coll", flag.ContinueOnError)
	fs.SetOutput(stderr)
	n := fs.Int("n", 2, "number of PEs")
	fs.Bool("coll", true, "the collective benchmarks")
	asJSON := fs.Bool("json", false, "print one JSON object per row")
	plotFile := fs.String("plot", "", "draw bus bandwidth and latency against size into this SVG file")
	var anchors multiFlag
	fs.Var(&anchors, "anchor", "a file of JSON rows to compare with (repeatable)")
	timeout := fs.Duration("timeout", 20*time.Minute, "stop the benchmark job after this long")
	compareList := fs.String("compare", "", "also run Open MPI's collectives (mpi) in the same run, round by round, with the ratios' min/median/max")
	rounds := fs.Int("rounds", 3, "with --compare: rounds, each one Roxamen job and one Open MPI run, alternating")
	tests := fs.String("tests", "", "only these collectives, comma-separated (default: all)")
	iters := fs.Int("iters", 0, "calls per row and round (default: 1000 up to 8 KiB, fewer above; a few suffice where PEs share one GPU)")
	cpuprofile := fs.String("cpuprofile", "", "write each PE's CPU profile to this path with .PE appended")
	if err := fs.Parse(args[1:]); err != nil {
		return 2, true
	}
	if *compareList != "" && *compareList != "mpi" {
		fmt.Fprintf(stderr, "roxrun bench --coll: --compare %q: the collectives compare with mpi only\n", *compareList)
		return 2, true
	}
	if *rounds < 1 {
		fmt.Fprintf(stderr, "roxrun bench --coll: --rounds %d, want >= 1\n", *rounds)
		return 2, true
	}
	if *n < 2 {
		fmt.Fprintf(stderr, "roxrun bench: -n %d: the benchmarks need at least 2 PEs\n", *n)
		return 2, true
	}
	anchorRows := map[string][]collRow{}
	var anchorNames []string
	for _, f := range anchors {
		rows, err := readCollRows(f)
		if err != nil {
			fmt.Fprintln(stderr, "roxrun bench:", err)
			return 1, true
		}
		name := strings.TrimSuffix(filepath.Base(f), filepath.Ext(f))
		anchorRows[name] = rows
		anchorNames = append(anchorNames, name)
	}
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(stderr, "roxrun bench:", err)
		return 1, true
	}
	argv := []string{self, "bench", collPEFlag}
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
		cfg := launch.Config{NPEs: *n, Argv: argv, Timeout: *timeout, Stdout: &out, Stderr: stderr}
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
		return collCompare(runRox, *n, *rounds, *tests, *timeout, *asJSON, *plotFile, anchorNames, anchorRows, stdout, stderr), true
	}
	rows, code := runRox()
	if code != 0 {
		return code, true
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
		if err := plotColl(*plotFile, rows, anchorNames, anchorRows); err != nil {
			fmt.Fprintln(stderr, "roxrun bench: --plot:", err)
			return 1, true
		}
	}
	return 0, true
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
	err = runCollBench(ctx, w, *tests, *iters, json.NewEncoder(stdout))
	if ferr := w.Finalize(); err == nil {
		err = ferr
	}
	if err != nil {
		fmt.Fprintf(stderr, "roxrun bench: PE %d: %v\n", w.MyPE(), err)
		return 1
	}
	return 0
}

func runCollBench(ctx context.Context, w *shmem.World, tests string, iters int, enc *json.Encoder) error {
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
		if err := fsrc.Put(w.MyPE(), 0, ones); err != nil {
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
		if err := deviceLoopRows(ctx, w, team, fsrc, fdst, enc); err != nil {
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
			for r := 0; r < 5; r++ {
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
				if err := times.Put(w.MyPE(), 0, el); err != nil {
					return err
				}
				if err := shmem.AllReduce(ctx, team, tmax, times, shmem.OpMax); err != nil {
					return err
				}
				if err := tmax.Get(w.MyPE(), 0, el); err != nil {
					return err
				}
				rounds = append(rounds, el[0])
			}
			sort.Float64s(rounds)
			t := rounds[2]
			if w.MyPE() == 0 {
				row := collRow{Test: test, Backend: w.Device().Driver, PEs: np, SizeBytes: sz, LatencyUS: t * 1e6, Algorithm: algo, SMs: &sms}
				if sc != nil {
					row.EnqueueUS, row.SpreadUS = sc.enqueueUS(), math.Round((rounds[4]-rounds[0])*1e9)/1e3
				}
				if sz > 0 {
					row.BusBWGBps = math.Round(float64(sz)*f/t/1e9*1000) / 1000
				}
				row.LatencyUS = math.Round(row.LatencyUS*1000) / 1000
				if err := enc.Encode(row); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// ---- the plot ----

func plotColl(file string, rows []collRow, names []string, anchors map[string][]collRow) error {
	series := append([]string{"roxamen"}, names...)
	data := map[string][]collRow{"roxamen": rows}
	for _, n := range names {
		data[n] = anchors[n]
	}
	pes := 0
	if len(rows) > 0 {
		pes = rows[0].PEs
	}
	var grid [][]plotPanel
	for _, test := range collTests[:5] { // team_barrier has one size: it is in the table only
		var line []plotPanel
		for _, metric := range []string{"latency_us", "busbw_gbps"} {
			pn := plotPanel{Title: fmt.Sprintf("%s, %d PEs: %s", test, pes, metric), XLabel: "bytes per PE"}
			for si, s := range series {
				sr := plotSeries{Name: s, Color: si}
				for _, r := range data[s] {
					if r.Test != test || (pes > 0 && r.PEs != pes) || r.SizeBytes <= 0 {
						continue
					}
					v := r.LatencyUS
					if metric == "busbw_gbps" {
						v = r.BusBWGBps
					}
					sr.XY = append(sr.XY, plotter.XY{X: float64(r.SizeBytes), Y: v})
				}
				pn.Series = append(pn.Series, sr)
			}
			line = append(line, pn)
		}
		grid = append(grid, line)
	}
	return plotGrid(file, grid)
}

// plotPanel is one log-log panel of plotGrid's grid.
type plotPanel struct {
	Title, XLabel, YLabel string
	Series                []plotSeries
}

// plotSeries is one line of a panel; Color indexes plotColors, so that one series keeps its
// colour across panels.
type plotSeries struct {
	Name  string
	Color int
	XY    plotter.XYs // points at or below zero are left out (log axes)
}

var plotColors = []color.Color{color.RGBA{0xd6, 0x27, 0x28, 255}, color.RGBA{0x1f, 0x77, 0xb4, 255}, color.RGBA{0x2c, 0xa0, 0x2c, 255}, color.RGBA{0xff, 0x7f, 0x0e, 255}, color.RGBA{0x94, 0x67, 0xbd, 255}}

// plotGrid draws panels, rows of them, into an SVG file: the benchmarks' one plotting code
// (--coll's collectives, --rails's rails).
func plotGrid(file string, panels [][]plotPanel) error {
	cols := 0
	for _, row := range panels {
		cols = max(cols, len(row))
	}
	var grid [][]*plot.Plot
	for _, row := range panels {
		line := make([]*plot.Plot, cols)
		for j, pn := range row {
			p := plot.New()
			p.Title.Text = pn.Title
			p.X.Label.Text, p.Y.Label.Text = pn.XLabel, pn.YLabel
			p.Legend.Top = true
			drawn := false
			for _, sr := range pn.Series {
				var xy plotter.XYs
				for _, pt := range sr.XY {
					if pt.X > 0 && pt.Y > 0 {
						xy = append(xy, pt)
					}
				}
				if len(xy) == 0 {
					continue
				}
				sort.Slice(xy, func(i, j int) bool { return xy[i].X < xy[j].X })
				l, pts, err := plotter.NewLinePoints(xy)
				if err != nil {
					return err
				}
				c := plotColors[sr.Color%len(plotColors)]
				l.Color, pts.Color = c, c
				p.Add(l, pts)
				p.Legend.Add(sr.Name, l, pts)
				drawn = true
			}
			if drawn { // log axes need data above zero; an empty panel keeps linear ones
				p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
				p.X.Tick.Marker, p.Y.Tick.Marker = plot.LogTicks{Prec: -1}, plot.LogTicks{Prec: -1}
			} else {
				p.Title.Text += " (no rows)"
			}
			line[j] = p
		}
		for j := range line {
			if line[j] == nil {
				line[j] = plot.New() // a short row: blank tiles
			}
		}
		grid = append(grid, line)
	}
	const cellW, cellH = 5 * vg.Inch, 3.2 * vg.Inch
	cnv := vgsvg.New(vg.Length(cols)*cellW, vg.Length(len(grid))*cellH)
	dc := draw.New(cnv)
	tiles := draw.Tiles{Rows: len(grid), Cols: cols, PadX: vg.Millimeter * 4, PadY: vg.Millimeter * 4}
	canvases := plot.Align(grid, tiles, dc)
	for i := range grid {
		for j := range grid[i] {
			if grid[i][j] != nil {
				grid[i][j].Draw(canvases[i][j])
			}
		}
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err := cnv.WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
