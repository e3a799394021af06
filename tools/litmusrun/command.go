package litmusrun

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/roxamen/roxamen/memmodel"
	"github.com/roxamen/roxamen/shmem"
	"github.com/roxamen/roxamen/tools/cli"
	"github.com/roxamen/roxamen/tools/launch"
)

// PECommand is the hidden subcommand each PE of `roxrun litmus --run` executes.
const PECommand = "litmus-pe"

// Command is the litmus command, for roxrun's usage.
func Command() *cli.Command { return newLitmusFlags().cmd }

type litmusFlags struct {
	cmd       *cli.Command
	check     bool
	mode      string
	run       int
	device    string
	seed      int64
	timeout   time.Duration
	hosts     string
	rsh       string
	bind      string
	instances int
	cat       string
	object    string
	mutation  string
	opt       memmodel.Options
}

func newLitmusFlags() *litmusFlags {
	f := &litmusFlags{cmd: cli.NewCommand("litmus", "[flags] FILE...", `
Decide litmus tests (memmodel's format; memmodel/testdata holds the project's suite)
against the memory model: print each test's states and verdict, or with --check one
line per test compared with its expect line. --run N also executes every test N times on
a real backend (each PE a process; on a GPU each column runs as device code) and fails
on an outcome the model forbids. Every phase ends with a summary line; on a terminal,
stderr shows which test runs.`), opt: memmodel.DefaultOptions()}
	fs := f.cmd.Flags
	fs.BoolVar(&f.check, "check", false, "compare each verdict with the test's expect line; one line per test, exit 1 on a mismatch")
	fs.StringVar(&f.mode, "mode", "both", "model mode: strict, bypass or both")
	fs.IntVar(&f.run, "run", 0, "also run every test N times on the --device backend (one PE per process) and fail on an outcome the model forbids")
	fs.StringVar(&f.device, "device", "", "with --run: the backend the PEs run on (host, cuda, hip, auto; default ROX_DEVICE, else host)")
	fs.Int64Var(&f.seed, "seed", 1, "with --run: seed of the random delays")
	fs.DurationVar(&f.timeout, "timeout", 10*time.Minute, "with --run: stop a job after this long")
	fs.StringVar(&f.hosts, "hosts", "", "with --run: place the PEs on hosts NAME:COUNT,... (as roxrun run --hosts)")
	fs.StringVar(&f.rsh, "rsh", "ssh", "with --hosts: the command that runs a program on a host")
	fs.StringVar(&f.bind, "bind", "", "with --hosts: the address the rendezvous listens on")
	fs.IntVar(&f.instances, "instances", DefaultInstances, "with --run on the host backend: copies of each test every iteration runs side by side")
	fs.StringVar(&f.object, "object", "", "with --run on a GPU: run the columns on this runtime code object (PTX or code object file) instead of the built-in one: a mutant build of the device library (litmusrun.BuildMutant)")
	fs.StringVar(&f.mutation, "mutation", "", "with --object: the mutation it was built with (drop-fences, quiet-as-fence, signal-first); the run prints on how many tests where the model says it matters it was caught")
	fs.StringVar(&f.cat, "cat", "", "decide with the axioms of this model file (memmodel/model.cat's language) instead of the built-in checker; every candidate execution is listed, so for tests of a dozen events")
	fs.BoolVar(&f.opt.FenceOrdersStores, "fence-orders-stores", f.opt.FenceOrdersStores, "interpretation: fence orders prior plain stores")
	fs.BoolVar(&f.opt.BlockingFetchOrders, "blocking-fetch-orders", f.opt.BlockingFetchOrders, "interpretation: blocking gets and fetching AMOs order later operations")
	fs.BoolVar(&f.opt.AtomicAllWrites, "atomic-all-writes", f.opt.AtomicAllWrites, "interpretation: AMOs are atomic with respect to all writes, not only AMOs")
	fs.BoolVar(&f.opt.SameWidthAtomicity, "same-width-atomicity", f.opt.SameWidthAtomicity, "interpretation: AMOs are atomic only with AMOs of their own width (OpenSHMEM's same-datatype promise), not 32-bit with 64-bit ones on the same bytes")
	return f
}

// Main implements `roxrun litmus` and the hidden `roxrun litmus-pe` (args[0] is the
// subcommand), which each PE of a --run job executes with the same flags.
func Main(args []string, stdout, stderr io.Writer) int {
	pe := len(args) > 0 && args[0] == PECommand
	f := newLitmusFlags()
	c := f.cmd
	if pe {
		c.Name = PECommand
	}
	var rest []string
	if len(args) > 0 {
		rest = args[1:]
	}
	if ok, status := c.Parse(rest, stdout, stderr); !ok {
		return status
	}
	var modes []memmodel.Mode
	switch f.mode {
	case "strict":
		modes = []memmodel.Mode{memmodel.Strict}
	case "bypass":
		modes = []memmodel.Mode{memmodel.Bypass}
	case "both":
		modes = []memmodel.Mode{memmodel.Strict, memmodel.Bypass}
	default:
		return c.Fail(stderr, "--mode %q: want strict, bypass or both", f.mode)
	}
	if c.Flags.NArg() == 0 {
		return c.Fail(stderr, "no litmus files given")
	}
	if f.instances <= 0 {
		return c.Fail(stderr, "--instances %d: want a positive number of copies", f.instances)
	}
	if f.run < 0 {
		return c.Fail(stderr, "--run %d: want a positive number of iterations", f.run)
	}
	gc := GPUConfig{}
	if f.mutation != "" {
		var err error
		if gc.Mutation, err = memmodel.ParseMutation(f.mutation); err != nil || gc.Mutation == memmodel.MutNone {
			return c.Fail(stderr, "--mutation %q: want drop-fences, quiet-as-fence or signal-first", f.mutation)
		}
	}
	for _, p := range [][2]string{{"device", "run"}, {"seed", "run"}, {"timeout", "run"}, {"hosts", "run"}, {"rsh", "hosts"}, {"bind", "hosts"}, {"object", "run"}, {"mutation", "object"}} {
		if msg := c.Needs(p[0], p[1]); msg != "" && !pe {
			return c.Fail(stderr, "%s", msg)
		}
	}
	tests, err := loadLitmus(c.Flags.Args())
	if err != nil {
		return c.Fail(stderr, "%v", err)
	}
	if pe {
		if f.object != "" {
			if gc.Object, err = os.ReadFile(f.object); err != nil {
				fmt.Fprintf(stderr, "roxrun %s: --object: %v\n", PECommand, err)
				return 1
			}
		}
		return litmusPE(tests, modes, f.opt, f.run, f.seed, f.instances, gc, stdout, stderr)
	}
	var model *memmodel.Cat
	if f.cat != "" {
		src, err := os.ReadFile(f.cat)
		if err == nil {
			model, err = memmodel.ParseCat(f.cat, string(src))
		}
		if err != nil {
			return c.Fail(stderr, "--cat: %v", err)
		}
	}
	status := 0
	if f.check {
		status = litmusCheck(tests, modes, f.opt, model, stdout, stderr)
	} else {
		start := time.Now()
		for _, t := range tests {
			for _, m := range modes {
				r, err := memmodel.Check(t, m, f.opt)
				if model != nil {
					r, err = memmodel.CheckCat(t, model, m, f.opt)
				}
				if err != nil {
					fmt.Fprintf(stderr, "roxrun litmus: %v\n", err)
					return 1
				}
				r.Print(stdout)
				fmt.Fprintln(stdout)
			}
		}
		fmt.Fprintf(stdout, "litmus: %d tests decided in %s mode%s, in %v\n", len(tests), f.mode, plural(len(modes)), time.Since(start).Round(time.Millisecond))
	}
	if f.run > 0 {
		var place launch.Config
		if f.hosts != "" {
			if place.Hosts, err = launch.ParseHosts(f.hosts); err != nil {
				return c.Fail(stderr, "%v", strings.TrimPrefix(err.Error(), "roxrun: "))
			}
			total := 0
			for _, h := range place.Hosts {
				total += h.NPEs
			}
			if need := NPEs(tests); total < need {
				return c.Fail(stderr, "--hosts %q places %d PEs; the tests need %d", f.hosts, total, need)
			}
			place.Rsh, place.BindAddr = strings.Fields(f.rsh), f.bind
			if place.BindAddr == "" {
				place.BindAddr = launch.AdvertiseAddr() + ":0"
			}
		}
		backend := f.device
		if backend == "" {
			backend = os.Getenv("ROX_DEVICE")
		}
		if backend == "" {
			backend = "host"
		}
		var extra []string
		if f.object != "" {
			abs, err := filepath.Abs(f.object)
			if err == nil {
				_, err = os.Stat(abs)
			}
			if err != nil {
				return c.Fail(stderr, "--object: %v", err)
			}
			extra = append(extra, "--object", abs)
			if f.mutation != "" {
				extra = append(extra, "--mutation", f.mutation)
			}
		}
		if s := litmusRun(c.Flags.Args(), tests, modes, f.opt, f.run, f.seed, f.instances, f.timeout, place, backend, extra, stdout, stderr); s != 0 {
			status = s
		}
	}
	return status
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

func loadLitmus(files []string) ([]*memmodel.Test, error) {
	var tests []*memmodel.Test
	seen := map[string]*memmodel.Test{}
	where := map[string]string{}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		ts, err := memmodel.ParseFile(f, src)
		if err != nil {
			return nil, err
		}
		for _, t := range ts {
			if prev, ok := seen[t.Name]; ok {
				// The same test given twice (a file named twice, or copied) is checked once.
				if prev.String() == t.String() {
					continue
				}
				return nil, fmt.Errorf("test %s is defined differently in %s and %s", t.Name, where[t.Name], f)
			}
			seen[t.Name], where[t.Name] = t, f
			tests = append(tests, t)
		}
	}
	return tests, nil
}

// litmusCheck prints `NAME strict=... bypass=... ok|MISMATCH` per test and returns 1 on a mismatch.
func litmusCheck(tests []*memmodel.Test, modes []memmodel.Mode, opt memmodel.Options, model *memmodel.Cat, stdout, stderr io.Writer) int {
	start := time.Now()
	bad := 0
	for _, t := range tests {
		line, verdict := t.Name, "ok"
		for _, m := range modes {
			v, err := memmodel.Decide(t, m, opt)
			if model != nil {
				var r *memmodel.Result
				if r, err = memmodel.CheckCat(t, model, m, opt); err == nil {
					v = r.Verdict
				}
			}
			if err != nil {
				fmt.Fprintf(stderr, "roxrun litmus: %v\n", err)
				return 1
			}
			line += fmt.Sprintf(" %s=%s", m, v)
			if want := t.Expect(m); want != v {
				verdict = "MISMATCH"
				if want == memmodel.VerdictNone {
					line += "(no expect)"
				} else {
					line += "(expected " + want.String() + ")"
				}
			}
		}
		if verdict != "ok" {
			bad++
		}
		fmt.Fprintf(stdout, "%s %s\n", line, verdict)
	}
	fmt.Fprintf(stdout, "litmus: %d tests, %d mismatches, decided in %v\n", len(tests), bad, time.Since(start).Round(time.Millisecond))
	if bad > 0 {
		return 1
	}
	return 0
}

// litmusRun starts one job per mode on the backend (ROX_DEVICE); each process runs litmus-pe.
// Each job's end prints a summary line; a terminal on stderr shows which test runs.
func litmusRun(files []string, tests []*memmodel.Test, modes []memmodel.Mode, opt memmodel.Options, iters int, seed int64, instances int, timeout time.Duration, place launch.Config, backend string, extra []string, stdout, stderr io.Writer) int {
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(stderr, "roxrun litmus:", err)
		return 1
	}
	status := 0
	for _, m := range modes {
		argv := []string{self, PECommand, "--mode", m.String(), "--run", strconv.Itoa(iters),
			"--seed", strconv.FormatInt(seed, 10), "--instances", strconv.Itoa(instances),
			"--fence-orders-stores=" + strconv.FormatBool(opt.FenceOrdersStores),
			"--blocking-fetch-orders=" + strconv.FormatBool(opt.BlockingFetchOrders),
			"--atomic-all-writes=" + strconv.FormatBool(opt.AtomicAllWrites),
			"--same-width-atomicity=" + strconv.FormatBool(opt.SameWidthAtomicity)}
		argv = append(argv, extra...)
		fmt.Fprintf(stdout, "litmus: running %d tests x %d iterations on the %s backend, ROX_ORDERING=%s\n", len(tests), iters, backend, m)
		prog := cli.NewProgress(stderr)
		done := 0
		// PE 0 prints "Test NAME VERDICT (mode)" when a test has run: that is the progress.
		out := &cli.LineWriter{Next: stdout, Fn: func(line string) {
			if f := strings.Fields(line); len(f) >= 2 && f[0] == "Test" {
				done++
				prog.Show("litmus --run %s [%d/%d] %s", m, done, len(tests), f[1])
			}
		}}
		start := time.Now()
		cfg := launch.Config{
			NPEs:     NPEs(tests),
			Hosts:    place.Hosts,
			Rsh:      place.Rsh,
			BindAddr: place.BindAddr,
			Argv:     append(argv, files...),
			Env:      []string{"ROX_ORDERING=" + m.String(), "ROX_DEVICE=" + backend},
			Timeout:  timeout,
			Stdout:   out,
			Stderr:   stderr,
		}
		if place.Hosts == nil && backend == "cuda" {
			cfg.MPS = launch.JobMPS(cfg.NPEs)
		}
		err := launch.Run(context.Background(), cfg)
		prog.Done()
		took := time.Since(start).Round(time.Millisecond)
		if err != nil {
			fmt.Fprintf(stderr, "roxrun litmus --run (%s): %v\n", m, err)
			fmt.Fprintf(stdout, "litmus: run %s: FAILED after %d of %d tests, in %v (see stderr)\n", m, done, len(tests), took)
			status = launch.ExitStatus(err)
			if status == 0 {
				status = 1
			}
			continue
		}
		fmt.Fprintf(stdout, "litmus: run %s: %d tests x %d iterations on %s, no forbidden outcome, in %v\n", m, done, iters, backend, took)
	}
	return status
}

// litmusPE is one PE of a --run job: it runs every test and, on PE 0, prints the histograms.
func litmusPE(tests []*memmodel.Test, modes []memmodel.Mode, opt memmodel.Options, iters int, seed int64, instances int, gc GPUConfig, stdout, stderr io.Writer) int {
	if iters <= 0 {
		fmt.Fprintf(stderr, "roxrun %s: --run %d: want a positive number of iterations\n", PECommand, iters)
		return 2
	}
	ctx := context.Background()
	w, err := shmem.Init(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "roxrun %s: %v\n", PECommand, err)
		return 1
	}
	mode := ModeOf(w)
	if len(modes) != 1 || modes[0] != mode {
		fmt.Fprintf(stderr, "roxrun %s: PE %d: --mode %v does not match the runtime's ordering %s (ROX_ORDERING)\n", PECommand, w.MyPE(), modes, w.Ordering())
		w.Finalize()
		return 2
	}
	out := io.Discard
	if w.MyPE() == 0 {
		out = stdout
	}
	if IsGPU(w) {
		if w.MyPE() == 0 {
			fmt.Fprintf(stdout, "litmus: PE 0 on %s; every column runs as device code (roxk_litmus)\n", w.Device())
		}
		err = RunSuiteGPU(ctx, w, tests, mode, opt, iters, seed, gc, out)
	} else if gc.Object != nil {
		err = fmt.Errorf("--object is for a GPU backend; this PE runs on %s", w.Device())
	} else {
		err = Run(ctx, w, tests, mode, opt, Config{Iters: iters, Instances: instances, Seed: seed}, out)
	}
	if ferr := w.Finalize(); err == nil {
		err = ferr
	}
	if err != nil {
		var fe *memmodel.ForbiddenError
		if errors.As(err, &fe) {
			fmt.Fprintf(stderr, "FAIL: %v\n", err)
		} else {
			fmt.Fprintf(stderr, "roxrun %s: PE %d: %v\n", PECommand, w.MyPE(), err)
		}
		return 1
	}
	return 0
}
