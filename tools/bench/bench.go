package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/roxamen/roxamen/internal/env"
	"github.com/roxamen/roxamen/internal/units"
	"github.com/roxamen/roxamen/shmem"
	"github.com/roxamen/roxamen/tools/cli"
	"github.com/roxamen/roxamen/tools/launch"
)

// PECommand is the hidden subcommand each PE of the p2p suite's job executes.
const PECommand = "bench-pe"

// benchRow is one line of `roxrun bench --json`, and of the comparison programs' output.
// Latency figures are the median over Rounds rounds, with the fastest and slowest round beside it;
// a bandwidth row's bandwidth is that of its median round.
type benchRow struct {
	Test          string  `json:"test"`
	Backend       string  `json:"backend"`
	PEs           int     `json:"pes"`
	SizeBytes     int     `json:"size_bytes"`
	Blocks        int     `json:"blocks"`
	LatencyUS     float64 `json:"latency_us"`
	MinUS         float64 `json:"latency_min_us,omitempty"`
	MaxUS         float64 `json:"latency_max_us,omitempty"`
	Rounds        int     `json:"rounds,omitempty"`
	BandwidthGBps float64 `json:"bandwidth_gbps"`
	BusBWGBps     float64 `json:"busbw_gbps,omitempty"` // collectives, by nccl-tests' convention
}

// benchProgress is a line PE 0 prints before each row: which row runs now.
type benchProgress struct {
	Running   string `json:"running"`
	SizeBytes int    `json:"size_bytes"`
}

// benchKey names a row: what the progress counts and --tests selects.
type benchKey struct {
	test string
	size int
}

// benchSection is a group of rows of the host benchmark suite. Other files of this package add
// theirs from an init func (hostBench = append(hostBench, benchSection{...})); sections run in
// that order, after bench.go's own.
type benchSection struct {
	// rows lists the rows the section emits in a job of npes PEs, in order.
	rows func(npes int) []benchKey
	// run runs the section on every PE of the job; PE 0 emits the rows through b.
	run func(b *benchEnv) error
}

// hostBench is the host benchmark suite, in order.
var hostBench = []benchSection{
	{rows: only("p_pingpong", 8), run: benchPPingPong},
	{rows: only("put_signal_pingpong", 8), run: benchPutSignalPingPong},
	{rows: sized("put_bw", benchSizes), run: func(b *benchEnv) error { return benchBandwidth(b, "put_bw") }},
	{rows: sized("get_bw", benchSizes), run: func(b *benchEnv) error { return benchBandwidth(b, "get_bw") }},
	{rows: only("fetch_add_latency", 8), run: benchFetchAdd},
	{rows: only("barrier_all_latency", 0), run: benchBarrierAll},
}

func only(test string, size int) func(int) []benchKey {
	return func(int) []benchKey { return []benchKey{{test, size}} }
}

func sized(test string, sizes []int) func(int) []benchKey {
	return func(int) []benchKey {
		var k []benchKey
		for _, s := range sizes {
			k = append(k, benchKey{test, s})
		}
		return k
	}
}

// benchSizes are the putmem/getmem sizes: powers of 8 and 4 from 8 B to 16 MiB, with the
// iteration counts of benchIters, the same in the comparison programs.
var benchSizes = []int{8, 64, 512, 4096, 16384, 65536, 262144, 1 << 20, 4 << 20, 16 << 20}

func benchIters(size int) int {
	switch {
	case size <= 65536:
		return 20000
	case size <= 1<<20:
		return 500
	}
	return 50
}

type benchFlags struct {
	cmd        *cli.Command
	suite      string   // p2p, coll, rails or all
	files      []string // rails: the JSON rows files
	n          int
	asJSON     bool
	iters      int
	rounds     int
	tests      string
	compare    string
	timeout    time.Duration
	nvshmem    string
	plot       string
	anchors    multiFlag
	cpuprofile string
	hbmBase    int  // a GPU job's PEs: the device memory in use before the job (MiB; -1 unknown)
	coll       bool // the old spellings of `bench coll` and `bench rails`
	rails      bool
}

// Command is the bench command, for roxrun's usage.
func Command() *cli.Command { return newBenchFlags().cmd }

// benchSuites are the suites `roxrun bench SUITE` runs; all is p2p then coll.
var benchSuites = []string{"p2p", "coll", "rails", "all"}

func newBenchFlags() *benchFlags {
	f := &benchFlags{cmd: cli.NewCommand("bench", "[p2p|coll|rails|all] [flags] [FILE...]", `
Run a benchmark suite in a job of its own (on the backend ROX_DEVICE picks) and print one
row per test and size, each naming its unit: latency in microseconds as the median over
--rounds rounds with the fastest and the slowest round, bandwidth in GB/s of the median
round. Suites: p2p (the default: point to point, AMOs, barrier, ep dispatch/combine),
coll (the collectives, per size), rails (the tcp rails' table and plot, from the JSON rows
FILEs that test/netns's TestRailsBandwidth writes), all (p2p, then coll). --compare also
builds and runs the project's comparison programs with the same measurements and prints
their figures and the ratios beside Roxamen's (p2p: oshmem, mpi, mpi-ep; coll: mpi); a
comparison program that fails or crashes is reported as such and gives no ratios. On a
terminal, stderr shows which row runs.`)}
	fs := f.cmd.Flags
	fs.IntVar(&f.n, "n", 2, "number of PEs (PE 0 and the last PE are the pair of the point-to-point rows)")
	fs.BoolVar(&f.asJSON, "json", false, "print one JSON object per row instead of the table")
	fs.IntVar(&f.iters, "iters", 0, "calls per row and round (default: the suite's per-size counts: 20000 round trips for p2p latency, 1000 collectives up to 8 KiB, fewer above)")
	fs.IntVar(&f.rounds, "rounds", 5, "rounds of every row: its figure is their median, with min and max (with --compare, a round is one job of each side)")
	fs.StringVar(&f.tests, "tests", "", "run only these tests, comma-separated (default: all of the suite's; an unknown name is refused with the list)")
	fs.StringVar(&f.compare, "compare", "", "also run comparison programs: p2p: oshmem, mpi, mpi-ep (comma-separated; host backend), nvshmem (GPU backend: built with nvcc against the machine's NVSHMEM); coll: mpi")
	fs.DurationVar(&f.timeout, "timeout", 20*time.Minute, "stop the benchmark job (and each comparison program) after this long")
	fs.StringVar(&f.nvshmem, "nvshmem", "", "p2p on a GPU backend: a file holding NVSHMEM's figures in nvbench's text format, for ratios")
	fs.StringVar(&f.plot, "plot", "", "coll, rails: draw latency and bandwidth against size into this file (.svg or .png)")
	fs.Var(&f.anchors, "anchor", "coll: a file of JSON rows to compare with, named by its base name (repeatable)")
	fs.StringVar(&f.cpuprofile, "cpuprofile", "", "coll: write each PE's CPU profile to this path with .PE appended")
	fs.IntVar(&f.hbmBase, "hbm-base", -1, "(set by roxrun bench for a GPU job's PEs) the device memory in use before the job, MiB")
	fs.BoolVar(&f.coll, "coll", false, "the coll suite (the old spelling of 'bench coll')")
	fs.BoolVar(&f.rails, "rails", false, "the rails suite (the old spelling of 'bench rails FILE...')")
	return f
}

// parseBench reads a bench command line: the suite, then flags and (rails) files in any order.
// ok is false with the exit status when the command ends here.
func (f *benchFlags) parse(args []string, stdout, stderr io.Writer) (ok bool, status int) {
	c := f.cmd
	f.suite = "p2p"
	named := false
	if len(args) > 0 && slices.Contains(benchSuites, args[0]) {
		f.suite, args, named = args[0], args[1:], true
	}
	for rest := args; ; {
		if ok, status := c.Parse(rest, stdout, stderr); !ok {
			return false, status
		}
		if c.Flags.NArg() == 0 {
			break
		}
		f.files, rest = append(f.files, c.Flags.Arg(0)), c.Flags.Args()[1:]
	}
	for _, old := range []struct {
		set   bool
		suite string
	}{{f.coll, "coll"}, {f.rails, "rails"}} {
		if !old.set {
			continue
		}
		if named && f.suite != old.suite {
			return false, c.Fail(stderr, "--%s and the suite %s: name one suite", old.suite, f.suite)
		}
		f.suite = old.suite
	}
	if len(f.files) > 0 && f.suite != "rails" {
		return false, c.Fail(stderr, "unexpected argument %q (only the rails suite reads files)", f.files[0])
	}
	if f.iters < 0 {
		return false, c.Fail(stderr, "--iters %d: want at least 1 (or 0 for the suite's own counts)", f.iters)
	}
	if f.rounds < 1 || f.rounds > 100 {
		return false, c.Fail(stderr, "--rounds %d: want 1 to 100", f.rounds)
	}
	if f.n < 2 {
		return false, c.Fail(stderr, "-n %d: the benchmarks need at least 2 PEs", f.n)
	}
	// A flag that the suite does not read is a mistake, never silently ignored.
	applies := map[string][]string{
		"plot": {"coll", "rails"}, "anchor": {"coll"}, "cpuprofile": {"coll"}, "nvshmem": {"p2p"},
	}
	for name, suites := range applies {
		if c.Set(name) && !slices.Contains(suites, f.suite) && !(f.suite == "all" && slices.Contains(suites, "coll")) {
			return false, c.Fail(stderr, "%s: the %s suite does not take it; it is for the suites %s", c.Given(name), f.suite, strings.Join(suites, " and "))
		}
	}
	if f.suite == "rails" {
		for _, name := range []string{"tests", "compare", "iters", "json"} {
			if c.Set(name) {
				return false, c.Fail(stderr, "%s: the rails suite tabulates files; it runs no job", c.Given(name))
			}
		}
	}
	return true, 0
}

// suiteTests lists the test names of a suite, for --tests.
func suiteTests(suite string, npes int) []string {
	var names []string
	if (suite == "p2p" || suite == "all") && gpuBackend() {
		names = append(names, gpuBenchTests...)
	} else if suite == "p2p" || suite == "all" {
		for _, s := range hostBench {
			for _, k := range s.rows(max(npes, 2)) {
				if !slices.Contains(names, k.test) {
					names = append(names, k.test)
				}
			}
		}
	}
	if suite == "coll" || suite == "all" {
		// device: on a GPU, the block-level calls looped inside one kernel and the launch floor
		names = append(names, append(collTests, "device")...)
	}
	return names
}

// checkTests refuses a --tests name the suite lacks, with the list.
func checkTests(list, suite string, npes int) error {
	names := suiteTests(suite, npes)
	for _, t := range strings.Split(list, ",") {
		if t = strings.TrimSpace(t); t != "" && !slices.Contains(names, t) {
			return fmt.Errorf("--tests %q: no test %q (the %s suite has %s)", list, t, suite, strings.Join(names, ", "))
		}
	}
	return nil
}

// testsOf keeps the names of list that belong to suite (for `all`, which hands each suite its own).
func testsOf(list, suite string, npes int) string {
	if list == "" {
		return ""
	}
	names := suiteTests(suite, npes)
	var keep []string
	for _, t := range strings.Split(list, ",") {
		if t = strings.TrimSpace(t); slices.Contains(names, t) {
			keep = append(keep, t)
		}
	}
	if len(keep) == 0 {
		return "-" // none of this suite's tests: the suite is skipped
	}
	return strings.Join(keep, ",")
}

// Main implements `roxrun bench` and the hidden commands of its jobs' PEs (args[0] is the
// subcommand: "bench" or PECommand); it returns the exit status.
func Main(args []string, stdout, stderr io.Writer) int {
	for _, a := range args[1:] {
		if a == collPEFlag { // a PE of the coll suite's job
			return collBenchPE(args[2:], stdout, stderr)
		}
	}
	if args[0] == PECommand {
		return benchPEMain(args, stdout, stderr)
	}
	f := newBenchFlags()
	if ok, status := f.parse(args[1:], stdout, stderr); !ok {
		return status
	}
	c := f.cmd
	if f.tests != "" {
		if err := checkTests(f.tests, f.suite, f.n); err != nil {
			return c.Fail(stderr, "%v", err)
		}
	}
	switch f.suite {
	case "rails":
		return railsBench(f.files, f.plot, stdout, stderr)
	case "coll":
		return collBench(f, stdout, stderr)
	case "all":
		tests := f.tests
		if f.tests = testsOf(tests, "p2p", f.n); f.tests != "-" {
			if code := p2pBench(f, stdout, stderr); code != 0 {
				return code
			}
		}
		if f.tests = testsOf(tests, "coll", f.n); f.tests != "-" {
			return collBench(f, stdout, stderr)
		}
		return 0
	}
	return p2pBench(f, stdout, stderr)
}

// benchPEMain is a PE of the p2p suite's job.
func benchPEMain(args []string, stdout, stderr io.Writer) int {
	f := newBenchFlags()
	if ok, status := f.cmd.Parse(args[1:], stdout, stderr); !ok {
		return status
	}
	if f.iters == 0 {
		f.iters = 20000
	}
	selected, err := selectRows(f.tests, f.n)
	if err != nil {
		return f.cmd.Fail(stderr, "%v", err)
	}
	return benchPE(f.iters, f.rounds, f.hbmBase, selected, stdout, stderr)
}

// p2pBench runs the point-to-point suite (on a GPU backend, the GPU suite).
func p2pBench(f *benchFlags, stdout, stderr io.Writer) int {
	c := f.cmd
	if f.iters == 0 {
		f.iters = 20000
	}
	selected, err := selectRows(f.tests, f.n)
	if err != nil {
		return c.Fail(stderr, "%v", err)
	}
	compares, err := parseCompare(f.compare)
	if err != nil {
		return c.Fail(stderr, "%v", err)
	}
	nv := slices.Contains(compares, "nvshmem")
	if gpuBackend() {
		if len(compares) > 1 || len(compares) == 1 && !nv {
			return c.Fail(stderr, "--compare %s: on a GPU backend the comparison is nvshmem; the others run on the CPU (ROX_DEVICE=host runs the host suite)", f.compare)
		}
		return benchGPUMain(f.n, f.iters, f.rounds, f.tests, f.asJSON, f.timeout, f.nvshmem, nv, stdout, stderr)
	}
	if c.Set("nvshmem") {
		return c.Fail(stderr, "%s: NVSHMEM's figures compare with the GPU suite; this backend is the host", c.Given("nvshmem"))
	}
	if nv {
		return c.Fail(stderr, "--compare %s: NVSHMEM's program runs beside the GPU suite; this backend is the host (ROX_DEVICE=cuda)", f.compare)
	}
	start := time.Now()
	rows, err := runHostBench(f, selected, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "roxrun bench: %v\n", err)
		if s := launch.ExitStatus(err); s != 0 {
			return s
		}
		return 1
	}
	status := 0
	var results []compareResult
	for _, name := range compares {
		r := runComparison(comparisons[name], f.n, f.iters, f.rounds, f.tests, f.timeout, stderr)
		if r.err != nil {
			fmt.Fprintf(stderr, "roxrun bench --compare %s: %v\n", name, r.err)
			status = 1
		}
		results = append(results, r)
	}
	summary := fmt.Sprintf("bench: %s on %s, %d PEs, %s each, in %v", units.Count(len(rows), "row"), rowsBackend(rows), f.n, units.Count(f.rounds, "round"), time.Since(start).Round(time.Millisecond))
	for _, r := range results {
		if r.err != nil {
			summary += fmt.Sprintf("; %s FAILED (no ratios)", r.name)
		} else {
			summary += fmt.Sprintf("; %s: %d rows, %d beside Roxamen's", r.name, len(r.rows), matched(rows, r.rows))
		}
	}
	if f.asJSON {
		enc := json.NewEncoder(stdout)
		for _, r := range rows {
			_ = enc.Encode(r)
		}
		for _, c := range results {
			for _, r := range c.rows {
				_ = enc.Encode(r)
			}
		}
		fmt.Fprintln(stderr, summary) // stdout stays JSON lines
		return status
	}
	printBenchTable(stdout, rows, results)
	fmt.Fprintln(stdout, summary)
	return status
}

// selectRows parses --tests into the set of test names to run (nil: all).
func selectRows(list string, npes int) (map[string]bool, error) {
	if list == "" {
		return nil, nil
	}
	known := map[string]bool{}
	names := suiteTests("p2p", npes)
	for _, n := range names {
		known[n] = true
	}
	sel := map[string]bool{}
	for _, t := range strings.Split(list, ",") {
		t = strings.TrimSpace(t)
		if t == "" {
			continue
		}
		if !known[t] {
			return nil, fmt.Errorf("--tests %q: no test %q (the p2p suite has %s)", list, t, strings.Join(names, ", "))
		}
		sel[t] = true
	}
	return sel, nil
}

func rowsBackend(rows []benchRow) string {
	if len(rows) == 0 {
		return "no backend"
	}
	return rows[0].Backend
}

// runHostBench starts the host benchmark job and returns PE 0's rows; a terminal on stderr shows
// which row runs.
func runHostBench(f *benchFlags, selected map[string]bool, stderr io.Writer) ([]benchRow, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	total := 0
	for _, s := range hostBench {
		for _, k := range s.rows(f.n) {
			if selected == nil || selected[k.test] {
				total++
			}
		}
	}
	prog := cli.NewProgress(stderr)
	defer prog.Done()
	var rows []benchRow
	var other bytes.Buffer
	out := &cli.LineWriter{Fn: func(line string) {
		var p benchProgress
		if json.Unmarshal([]byte(line), &p) == nil && p.Running != "" {
			prog.Show("bench [%d/%d] %s %s", len(rows)+1, total, p.Running, sizeName(p.SizeBytes))
			return
		}
		var r benchRow
		if json.Unmarshal([]byte(line), &r) == nil && r.Test != "" {
			rows = append(rows, r)
			return
		}
		other.WriteString(line + "\n")
	}}
	argv := []string{self, PECommand, "-iters", strconv.Itoa(f.iters), "-rounds", strconv.Itoa(f.rounds)}
	if f.tests != "" {
		argv = append(argv, "-tests", f.tests)
	}
	err = launch.Run(context.Background(), launch.Config{
		NPEs:    f.n,
		Argv:    argv,
		Timeout: f.timeout,
		Stdout:  out,
		Stderr:  stderr,
	})
	if err != nil {
		return nil, err
	}
	if len(rows) != total {
		return nil, fmt.Errorf("the benchmark job printed %d rows, want %d; its other output:\n%s", len(rows), total, other.String())
	}
	return rows, nil
}

func sizeName(n int) string {
	switch {
	case n == 0:
		return ""
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d B", n)
}

// printBenchTable prints Roxamen's rows with, per comparison program that succeeded, its figure
// for the same test and size and the ratio Roxamen/other.
func printBenchTable(w io.Writer, rows []benchRow, results []compareResult) {
	fmt.Fprintf(w, "%-22s %-7s %4s %10s %7s %11s %11s %11s %10s", "test", "backend", "pes", "size", "rounds", "latency_us", "min_us", "max_us", "GB/s")
	var ok []compareResult
	for _, r := range results {
		if r.err == nil {
			ok = append(ok, r)
			fmt.Fprintf(w, " %11s %9s", r.name, "ratio")
		}
	}
	fmt.Fprintln(w)
	for _, r := range rows {
		fmt.Fprintf(w, "%-22s %-7s %4d %10d %7d %11.3f %11.3f %11.3f %10.2f", r.Test, r.Backend, r.PEs, r.SizeBytes, r.Rounds, r.LatencyUS, r.MinUS, r.MaxUS, r.BandwidthGBps)
		for _, c := range ok {
			a := c.find(r)
			switch {
			case a == nil:
				fmt.Fprintf(w, " %11s %9s", "-", "-")
			case r.BandwidthGBps > 0 && a.BandwidthGBps > 0:
				fmt.Fprintf(w, " %6.2f GB/s %8.2fx", a.BandwidthGBps, r.BandwidthGBps/a.BandwidthGBps)
			case a.LatencyUS > 0:
				fmt.Fprintf(w, " %8.3f us %8.2fx", a.LatencyUS, r.LatencyUS/a.LatencyUS)
			default:
				fmt.Fprintf(w, " %11s %9s", "0", "-")
			}
		}
		fmt.Fprintln(w)
	}
	if len(ok) > 0 {
		fmt.Fprintln(w, "ratio = roxamen/other on the same test and size: latency rows want < 1, bandwidth rows want > 1")
	}
}

// benchEnv is what a section runs with on one PE.
type benchEnv struct {
	ctx            context.Context
	w              *shmem.World
	me, npes, peer int // peer: the last PE, PE 0's partner in the point-to-point rows
	iters, rounds  int
	backend        string
	selected       map[string]bool
	enc            *json.Encoder
	// Symmetric arrays the sections share: words[0] a flag, [1] put-with-signal data, [2] the
	// fetch-add target; sig[0] a signal; buf 16 MiB for the transfers.
	words shmem.Sym[int64]
	sig   shmem.Sym[uint64]
	buf   shmem.Sym[byte]
}

// want reports whether --tests selected test.
func (b *benchEnv) want(test string) bool { return b.selected == nil || b.selected[test] }

// running announces the row about to run (PE 0), for the progress line.
func (b *benchEnv) running(test string, size int) error {
	if b.me != 0 {
		return nil
	}
	return b.enc.Encode(benchProgress{Running: test, SizeBytes: size})
}

// settle starts a timed section on a quiet process: Go's collector, woken by allocations, would
// otherwise land in microsecond-scale measurements (the C comparison programs have none).
func (b *benchEnv) settle() error {
	runtime.GC()
	return b.w.BarrierAll(b.ctx)
}

// emit prints a row on PE 0 from the per-operation time of each round (microseconds); bytes > 0
// makes it a bandwidth row (bandwidth of the median round).
func (b *benchEnv) emit(test string, size int, perOp []float64, bytes int) error {
	if b.me != 0 {
		return nil
	}
	r := benchRow{Test: test, Backend: b.backend, PEs: b.npes, SizeBytes: size, Blocks: 1}
	r.LatencyUS, r.MinUS, r.MaxUS = spread(perOp)
	r.Rounds = len(perOp)
	if bytes > 0 && r.LatencyUS > 0 {
		r.BandwidthGBps = float64(bytes) / r.LatencyUS / 1e3
	}
	return b.enc.Encode(r)
}

// emitRow prints a row built by the section itself (PE 0), for rows that are not one figure per
// round (collectives' bus bandwidth, for example). Backend and PEs are filled in.
func (b *benchEnv) emitRow(r benchRow) error {
	if b.me != 0 {
		return nil
	}
	r.Backend, r.PEs = b.backend, b.npes
	if r.Blocks == 0 {
		r.Blocks = 1
	}
	return b.enc.Encode(r)
}

// spread returns the median, min and max of v.
func spread(v []float64) (median, lo, hi float64) {
	if len(v) == 0 {
		return 0, 0, 0
	}
	s := slices.Clone(v)
	sort.Float64s(s)
	n := len(s)
	median = s[n/2]
	if n%2 == 0 {
		median = (s[n/2-1] + s[n/2]) / 2
	}
	return median, s[0], s[n-1]
}

// benchPE is one PE of the benchmark job. PE 0 prints the rows as JSON lines.
func benchPE(iters, rounds, hbmBase int, selected map[string]bool, stdout, stderr io.Writer) int {
	ctx := context.Background()
	w, err := shmem.Init(ctx)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	if w.Device().Driver != "host" {
		err = runGPUBenchmarks(ctx, w, iters, rounds, hbmBase, selected, json.NewEncoder(stdout))
	} else {
		err = runBenchmarks(ctx, w, iters, rounds, selected, json.NewEncoder(stdout))
	}
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	if err := w.Finalize(); err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	return 0
}

func runBenchmarks(ctx context.Context, w *shmem.World, iters, rounds int, selected map[string]bool, enc *json.Encoder) error {
	backend, _ := env.Device.String()
	if backend == "auto" {
		backend = w.Device().Driver
	}
	b := &benchEnv{ctx: ctx, w: w, me: w.MyPE(), npes: w.NPEs(), peer: w.NPEs() - 1,
		iters: iters, rounds: rounds, backend: backend, selected: selected, enc: enc}
	var err error
	if b.words, err = shmem.Alloc[int64](w, 8); err != nil {
		return err
	}
	if b.sig, err = shmem.Alloc[uint64](w, 8); err != nil {
		return err
	}
	if b.buf, err = shmem.Alloc[byte](w, benchSizes[len(benchSizes)-1]); err != nil {
		return err
	}
	for _, s := range hostBench {
		run := false
		for _, k := range s.rows(b.npes) {
			run = run || b.want(k.test)
		}
		if !run {
			continue
		}
		if err := s.run(b); err != nil {
			return err
		}
	}
	for _, m := range []shmem.Mem{b.buf.Mem(), b.sig.Mem(), b.words.Mem()} {
		if err := w.Free(m); err != nil {
			return err
		}
	}
	return nil
}

// pingPong times rounds of iters round trips between PE 0 and the last PE after a warm-up of a
// tenth as many; step(i, first) does PE me's half of round trip i. It returns the one-way time
// per round, in microseconds.
func pingPong(b *benchEnv, step func(i int64, first bool) error) ([]float64, error) {
	var per []float64
	if b.me != 0 && b.me != b.peer {
		return nil, nil
	}
	i := int64(0)
	for r := -1; r < b.rounds; r++ {
		n := b.iters
		if r < 0 {
			n = max(b.iters/10, 1)
		}
		t0 := time.Now()
		for k := 0; k < n; k++ {
			i++
			if err := step(i, b.me == 0); err != nil {
				return nil, err
			}
		}
		if r >= 0 {
			per = append(per, us(time.Since(t0))/float64(2*n))
		}
	}
	return per, nil
}

// p_pingpong: PE 0 writes i into the peer's flag and waits for the peer to write it back.
func benchPPingPong(b *benchEnv) error {
	flag := b.words
	if err := b.running("p_pingpong", 8); err != nil {
		return err
	}
	if err := b.settle(); err != nil {
		return err
	}
	other := b.peer - b.me
	per, err := pingPong(b, func(i int64, first bool) error {
		if first {
			if err := flag.P(0, i, other); err != nil {
				return err
			}
			return shmem.WaitUntil(b.ctx, flag, 0, shmem.CmpEQ, i)
		}
		if err := shmem.WaitUntil(b.ctx, flag, 0, shmem.CmpEQ, i); err != nil {
			return err
		}
		return flag.P(0, i, other)
	})
	if err != nil {
		return err
	}
	return b.emit("p_pingpong", 8, per, 0)
}

// put_signal_pingpong: 8 bytes of data with a signal set, back and forth.
func benchPutSignalPingPong(b *benchEnv) error {
	words, sig := b.words, b.sig
	if err := b.running("put_signal_pingpong", 8); err != nil {
		return err
	}
	if err := b.settle(); err != nil {
		return err
	}
	other := b.peer - b.me
	data := []int64{0}
	per, err := pingPong(b, func(i int64, first bool) error {
		data[0] = i
		if first {
			if err := shmem.PutSignal(words, 1, data, sig, 0, uint64(i), shmem.SignalSet, other); err != nil {
				return err
			}
			_, err := shmem.SignalWaitUntil(b.ctx, sig, 0, shmem.CmpEQ, uint64(i))
			return err
		}
		if _, err := shmem.SignalWaitUntil(b.ctx, sig, 0, shmem.CmpEQ, uint64(i)); err != nil {
			return err
		}
		return shmem.PutSignal(words, 1, data, sig, 0, uint64(i), shmem.SignalSet, other)
	})
	if err != nil {
		return err
	}
	return b.emit("put_signal_pingpong", 8, per, 0)
}

// put_bw and get_bw: PE 0 moves size bytes to or from the peer benchIters(size) times, then
// quiet; one warm-up transfer first, as the comparison programs do.
func benchBandwidth(b *benchEnv, test string) error {
	buf, maxSize := b.buf, benchSizes[len(benchSizes)-1]
	src := make([]byte, maxSize)
	for i := range src {
		src[i] = byte(i)
	}
	if err := b.settle(); err != nil {
		return err
	}
	for _, size := range benchSizes {
		if err := b.w.BarrierAll(b.ctx); err != nil {
			return err
		}
		if b.me != 0 {
			continue
		}
		if err := b.running(test, size); err != nil {
			return err
		}
		move := func() error {
			if test == "put_bw" {
				return buf.PutNBI(0, src[:size], b.peer)
			}
			return buf.GetNBI(0, src[:size], b.peer)
		}
		if err := move(); err != nil {
			return err
		}
		if err := b.w.Quiet(); err != nil {
			return err
		}
		it := benchIters(size)
		var per []float64
		for r := 0; r < b.rounds; r++ {
			t0 := time.Now()
			for i := 0; i < it; i++ {
				if err := move(); err != nil {
					return err
				}
			}
			if err := b.w.Quiet(); err != nil {
				return err
			}
			per = append(per, us(time.Since(t0))/float64(it))
		}
		if err := b.emit(test, size, per, size); err != nil {
			return err
		}
	}
	return nil
}

// fetch_add_latency: PE 0 adds to a word on the peer; the fetched values prove no add was lost.
func benchFetchAdd(b *benchEnv) error {
	words := b.words
	if err := b.running("fetch_add_latency", 8); err != nil {
		return err
	}
	if err := b.settle(); err != nil {
		return err
	}
	if b.me != 0 {
		return nil
	}
	var per []float64
	var sum, want, calls int64
	for r := -1; r < b.rounds; r++ {
		n := b.iters
		if r < 0 {
			n = max(b.iters/10, 1)
		}
		t0 := time.Now()
		for i := 0; i < n; i++ {
			v, err := shmem.AtomicFetchAdd(words, 2, 1, b.peer)
			if err != nil {
				return err
			}
			sum += v
			want += calls
			calls++
		}
		if r >= 0 {
			per = append(per, us(time.Since(t0))/float64(n))
		}
	}
	if sum != want {
		return fmt.Errorf("fetch_add: the fetched values sum to %d, want %d: an add was lost", sum, want)
	}
	return b.emit("fetch_add_latency", 8, per, 0)
}

// barrier_all_latency: every PE, rounds of 5000 barriers after 500 to warm up; PE 0's clock.
func benchBarrierAll(b *benchEnv) error {
	if err := b.running("barrier_all_latency", 0); err != nil {
		return err
	}
	if err := b.settle(); err != nil {
		return err
	}
	for i := 0; i < 500; i++ {
		if err := b.w.BarrierAll(b.ctx); err != nil {
			return err
		}
	}
	const barriers = 5000
	var per []float64
	for r := 0; r < b.rounds; r++ {
		t0 := time.Now()
		for i := 0; i < barriers; i++ {
			if err := b.w.BarrierAll(b.ctx); err != nil {
				return err
			}
		}
		per = append(per, us(time.Since(t0))/barriers)
	}
	return b.emit("barrier_all_latency", 0, per, 0)
}

func us(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }
