package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/roxamen/roxamen/internal/launch"
	"github.com/roxamen/roxamen/internal/litmusrun"
	"github.com/roxamen/roxamen/memmodel"
	"github.com/roxamen/roxamen/shmem"
)

// litmusPECommand is the hidden subcommand each PE of `roxrun litmus --run` executes.
const litmusPECommand = "litmus-pe"

// litmusMain implements `roxrun litmus [--check] [--mode strict|bypass|both] [--run N [--device D]] FILE...`
// and the hidden `roxrun litmus-pe`; args[0] is the subcommand.
func litmusMain(args []string, stdout, stderr io.Writer) int {
	pe := len(args) > 0 && args[0] == litmusPECommand
	name := "roxrun litmus"
	if pe {
		name = "roxrun " + litmusPECommand
	}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	check := fs.Bool("check", false, "compare each verdict with the test's expect line; one line per test, exit 1 on a mismatch")
	modeFlag := fs.String("mode", "both", "model mode: strict, bypass or both")
	run := fs.Int("run", 0, "also run every test N times on the --device backend (one PE per process) and fail on an outcome the model forbids")
	dev := fs.String("device", os.Getenv("ROX_DEVICE"), "with --run: the backend the PEs run on (host, cuda, hip, auto; default ROX_DEVICE, else host); on a GPU each PE's column runs as device code")
	seed := fs.Int64("seed", 1, "seed of the random delays of --run")
	instances := fs.Int("instances", litmusrun.DefaultInstances, "with --run on the host backend: copies of each test every iteration runs side by side")
	timeout := fs.Duration("timeout", 10*time.Minute, "stop a --run job after this long")
	hosts := fs.String("hosts", "", "with --run: place the PEs on hosts NAME:COUNT,... (as roxrun --hosts)")
	rsh := fs.String("rsh", "ssh", "with --hosts: the command that runs a program on a host")
	bind := fs.String("bind", "", "with --hosts: the address the rendezvous listens on")
	catFile := fs.String("cat", "", "decide with the axioms of this model file (memmodel/model.cat's language) instead of the built-in checker; every candidate execution is listed, so for tests of a dozen events")
	opt := memmodel.DefaultOptions()
	fs.BoolVar(&opt.FenceOrdersStores, "fence-orders-stores", opt.FenceOrdersStores, "interpretation: fence orders prior plain stores")
	fs.BoolVar(&opt.BlockingFetchOrders, "blocking-fetch-orders", opt.BlockingFetchOrders, "interpretation: blocking gets and fetching AMOs order later operations")
	fs.BoolVar(&opt.AtomicAllWrites, "atomic-all-writes", opt.AtomicAllWrites, "interpretation: AMOs are atomic with respect to all writes, not only AMOs")
	var rest []string
	if len(args) > 0 {
		rest = args[1:]
	}
	if err := fs.Parse(rest); err != nil {
		return 2
	}
	var modes []memmodel.Mode
	switch *modeFlag {
	case "strict":
		modes = []memmodel.Mode{memmodel.Strict}
	case "bypass":
		modes = []memmodel.Mode{memmodel.Bypass}
	case "both":
		modes = []memmodel.Mode{memmodel.Strict, memmodel.Bypass}
	default:
		fmt.Fprintf(stderr, "%s: --mode %q: want strict, bypass or both\n", name, *modeFlag)
		return 2
	}
	if fs.NArg() == 0 {
		fmt.Fprintf(stderr, "%s: no litmus files given\nusage: roxrun litmus [--check] [--mode strict|bypass|both] [--run N] FILE...\n", name)
		return 2
	}
	if *instances <= 0 {
		fmt.Fprintf(stderr, "%s: --instances %d: want a positive number of copies\n", name, *instances)
		return 2
	}
	if *run < 0 {
		fmt.Fprintf(stderr, "%s: --run %d: want a positive number of iterations\n", name, *run)
		return 2
	}
	tests, err := loadLitmus(fs.Args())
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return 2
	}
	if pe {
		return litmusPE(tests, modes, opt, *run, *seed, *instances, stdout, stderr)
	}
	var model *memmodel.Cat
	if *catFile != "" {
		src, err := os.ReadFile(*catFile)
		if err == nil {
			model, err = memmodel.ParseCat(*catFile, string(src))
		}
		if err != nil {
			fmt.Fprintf(stderr, "%s: --cat: %v\n", name, err)
			return 2
		}
	}
	status := 0
	if *check {
		status = litmusCheck(tests, modes, opt, model, stdout, stderr)
	} else {
		for _, t := range tests {
			for _, m := range modes {
				r, err := memmodel.Check(t, m, opt)
				if model != nil {
					r, err = memmodel.CheckCat(t, model, m, opt)
				}
				if err != nil {
					fmt.Fprintf(stderr, "%s: %v\n", name, err)
					return 1
				}
				r.Print(stdout)
				fmt.Fprintln(stdout)
			}
		}
	}
	if *run > 0 {
		var place launch.Config
		if *hosts != "" {
			if place.Hosts, err = launch.ParseHosts(*hosts); err != nil {
				fmt.Fprintln(stderr, err)
				return 2
			}
			total := 0
			for _, h := range place.Hosts {
				total += h.NPEs
			}
			if need := litmusrun.NPEs(tests); total < need {
				fmt.Fprintf(stderr, "%s: --hosts %q places %d PEs; the tests need %d\n", name, *hosts, total, need)
				return 2
			}
			place.Rsh, place.BindAddr = strings.Fields(*rsh), *bind
			if place.BindAddr == "" {
				place.BindAddr = launch.AdvertiseAddr() + ":0"
			}
		}
		backend := *dev
		if backend == "" {
			backend = "host"
		}
		if s := litmusRun(fs.Args(), tests, modes, opt, *run, *seed, *instances, *timeout, place, backend, stdout, stderr); s != 0 {
			status = s
		}
	}
	return status
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
				// testdata holds copies of the shared samples: an identical copy is checked once.
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
func litmusRun(files []string, tests []*memmodel.Test, modes []memmodel.Mode, opt memmodel.Options, iters int, seed int64, instances int, timeout time.Duration, place launch.Config, backend string, stdout, stderr io.Writer) int {
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(stderr, "roxrun litmus:", err)
		return 1
	}
	status := 0
	for _, m := range modes {
		argv := []string{self, litmusPECommand, "--mode", m.String(), "--run", strconv.Itoa(iters),
			"--seed", strconv.FormatInt(seed, 10), "--instances", strconv.Itoa(instances),
			"--fence-orders-stores=" + strconv.FormatBool(opt.FenceOrdersStores),
			"--blocking-fetch-orders=" + strconv.FormatBool(opt.BlockingFetchOrders),
			"--atomic-all-writes=" + strconv.FormatBool(opt.AtomicAllWrites)}
		fmt.Fprintf(stdout, "litmus: running %d tests x %d iterations on the %s backend, ROX_ORDERING=%s\n", len(tests), iters, backend, m)
		err := launch.Run(context.Background(), launch.Config{
			NPEs:     litmusrun.NPEs(tests),
			Hosts:    place.Hosts,
			Rsh:      place.Rsh,
			BindAddr: place.BindAddr,
			Argv:     append(argv, files...),
			Env:      []string{"ROX_ORDERING=" + m.String(), "ROX_DEVICE=" + backend},
			Timeout:  timeout,
			Stdout:   stdout,
			Stderr:   stderr,
		})
		if err != nil {
			fmt.Fprintf(stderr, "roxrun litmus --run (%s): %v\n", m, err)
			status = launch.ExitStatus(err)
			if status == 0 {
				status = 1
			}
		}
	}
	return status
}

// litmusPE is one PE of a --run job: it runs every test and, on PE 0, prints the histograms.
func litmusPE(tests []*memmodel.Test, modes []memmodel.Mode, opt memmodel.Options, iters int, seed int64, instances int, stdout, stderr io.Writer) int {
	if iters <= 0 {
		fmt.Fprintf(stderr, "roxrun %s: --run %d: want a positive number of iterations\n", litmusPECommand, iters)
		return 2
	}
	ctx := context.Background()
	w, err := shmem.Init(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "roxrun %s: %v\n", litmusPECommand, err)
		return 1
	}
	mode := litmusrun.ModeOf(w)
	if len(modes) != 1 || modes[0] != mode {
		fmt.Fprintf(stderr, "roxrun %s: PE %d: --mode %v does not match the runtime's ordering %s (ROX_ORDERING)\n", litmusPECommand, w.MyPE(), modes, w.Ordering())
		w.Finalize()
		return 2
	}
	out := io.Discard
	if w.MyPE() == 0 {
		out = stdout
	}
	if litmusrun.IsGPU(w) {
		if w.MyPE() == 0 {
			fmt.Fprintf(stdout, "litmus: PE 0 on %s; every column runs as device code (roxk_litmus)\n", w.Device())
		}
		err = litmusrun.RunSuiteGPU(ctx, w, tests, mode, opt, iters, seed, out)
	} else {
		err = litmusrun.Run(ctx, w, tests, mode, opt, litmusrun.Config{Iters: iters, Instances: instances, Seed: seed}, out)
	}
	if ferr := w.Finalize(); err == nil {
		err = ferr
	}
	if err != nil {
		var fe *memmodel.ForbiddenError
		if errors.As(err, &fe) {
			fmt.Fprintf(stderr, "FAIL: %v\n", err)
		} else {
			fmt.Fprintf(stderr, "roxrun %s: PE %d: %v\n", litmusPECommand, w.MyPE(), err)
		}
		return 1
	}
	return 0
}
