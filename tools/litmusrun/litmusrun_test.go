package litmusrun

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/roxamen/roxamen/memmodel"
	"github.com/roxamen/roxamen/shmem"
	"github.com/roxamen/roxamen/tools/launch"
	"github.com/roxamen/roxamen/tools/roxruntest"
)

const childEnv = "ROX_LITMUSRUN_TEST_CHILD"

// TestMain turns the test binary into a PE when launched by TestHostConformance.
func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(child())
	}
	code := m.Run()
	roxruntest.Remove()
	os.Exit(code)
}

func loadSuite(dir string) ([]*memmodel.Test, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.litmus"))
	if err != nil {
		return nil, err
	}
	var tests []*memmodel.Test
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		ts, err := memmodel.ParseFile(f, src)
		if err != nil {
			return nil, err
		}
		tests = append(tests, ts...)
	}
	return tests, nil
}

func child() int {
	ctx := context.Background()
	tests, err := loadSuite(os.Getenv(childEnv))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if names := os.Getenv("ROX_LITMUSRUN_TESTS"); names != "" {
		keep := map[string]bool{}
		for _, n := range strings.Split(names, ",") {
			keep[n] = true
		}
		var some []*memmodel.Test
		for _, t := range tests {
			if keep[t.Name] {
				some = append(some, t)
			}
		}
		tests = some
	}
	iters, _ := strconv.Atoi(os.Getenv("ROX_LITMUSRUN_ITERS"))
	instances, _ := strconv.Atoi(os.Getenv("ROX_LITMUSRUN_INSTANCES"))
	seed, _ := strconv.ParseInt(os.Getenv("ROX_LITMUSRUN_SEED"), 10, 64)
	w, err := shmem.Init(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	err = Run(ctx, w, tests, ModeOf(w), memmodel.DefaultOptions(), Config{Iters: iters, Instances: instances, Seed: seed + 1}, os.Stdout)
	if ferr := w.Finalize(); err == nil {
		err = ferr
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// The host backend, run as a real multi-process job, never shows an outcome the model forbids.
func TestHostConformance(t *testing.T) {
	t.Parallel() // beside TestReorderPower: both mostly wait on their jobs' PEs
	dir, err := filepath.Abs("../../memmodel/testdata")
	if err != nil {
		t.Fatal(err)
	}
	tests, err := loadSuite(dir)
	if err != nil {
		t.Fatal(err)
	}
	iters := 20
	if testing.Short() {
		iters = 3
	}
	for _, ord := range []string{"strict", "bypass"} {
		var out, errb bytes.Buffer
		start := time.Now()
		err := launch.Run(context.Background(), launch.Config{
			NPEs:    NPEs(tests),
			Argv:    []string{os.Args[0]},
			Env:     []string{childEnv + "=" + dir, "ROX_LITMUSRUN_ITERS=" + strconv.Itoa(iters), "ROX_ORDERING=" + ord, "ROX_DEVICE=host"},
			Timeout: 5 * time.Minute,
			Stdout:  &out,
			Stderr:  &errb,
		})
		if err != nil {
			t.Fatalf("ROX_ORDERING=%s: %v\n%s\n%s", ord, err, errb.String(), out.String())
		}
		got := strings.Count(out.String(), "Histogram (")
		want := 0
		for _, lt := range tests {
			if lt.Unsupported(HostFeatures(true)).Empty() {
				want++
			} else if !strings.Contains(out.String(), "Test "+lt.Name+" not run: the host runner lacks") {
				t.Errorf("ROX_ORDERING=%s: %s neither run nor said to be skipped", ord, lt.Name)
			}
		}
		if got != want {
			t.Errorf("ROX_ORDERING=%s: %d histograms printed, want %d\n%s", ord, got, want, out.String())
		}
		if !strings.Contains(out.String(), "Power (") || !strings.Contains(out.String(), "power: weak outcome seen on") {
			t.Errorf("ROX_ORDERING=%s: no power table\n%s", ord, out.String())
		}
		for _, l := range strings.Split(out.String(), "\n") {
			if strings.HasPrefix(l, "power:") {
				t.Logf("ROX_ORDERING=%s: %s", ord, l)
			}
		}
		t.Logf("ROX_ORDERING=%s: %d tests x %d iterations x %d copies in %v", ord, len(tests), iters, DefaultInstances, time.Since(start))
	}
}

func TestNPEs(t *testing.T) {
	tt, err := memmodel.Parse("t", []byte("SHMEM T\nPE0 ;\nput x@1 1 ;\nexists (y@3=0)\n"))
	if err != nil {
		t.Fatal(err)
	}
	if n := NPEs([]*memmodel.Test{tt}); n != 4 {
		t.Fatalf("NPEs = %d, want 4 (the condition names y@3)", n)
	}
}

func TestLayoutRejectsSignalAsData(t *testing.T) {
	tt, err := memmodel.Parse("t", []byte("SHMEM T\nPE0 ;\nputsig x@1 1 s@1 set 1 ;\nputsig s@1 1 x@1 set 1 ;\nexists (x@1=0)\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := newLayout(tt); err == nil || !strings.Contains(err.Error(), "T") {
		t.Fatalf("err = %v, want one naming the test", err)
	}
}

// In-process, one PE: single-PE tests run and print their histogram, and bad arguments are
// errors naming the PE and the value.
func TestRunPESinglePE(t *testing.T) {
	for _, k := range []string{"ROX_PE", "ROX_NPES", "ROX_BOOTSTRAP"} {
		if os.Getenv(k) != "" {
			t.Skipf("%s is set: not a single-process job", k)
		}
	}
	ctx := context.Background()
	w, err := shmem.Init(ctx, shmem.WithHeapSize(1<<20))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Finalize()
	one, err := memmodel.Parse("t", []byte("SHMEM One\nPE0 ;\nst x 1 ;\nfence ;\nfetch r0 x@0 ;\nadd y@0 2 ;\nquiet ;\nld r1 y ;\nexists (0:r0=0 \\/ 0:r1=0)\n"))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := RunPE(ctx, w, one, ModeOf(w), memmodel.DefaultOptions(), 10, 1, &out); err != nil {
		t.Fatalf("RunPE: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "160     :>0:r0=1; 0:r1=2;") { // 10 iterations of 16 copies
		t.Errorf("want all 160 runs to see the store and the add:\n%s", out.String())
	}
	two, err := memmodel.Parse("t", []byte("SHMEM Two\nPE0 ;\nput x@1 1 ;\nexists (x@1=0)\n"))
	if err != nil {
		t.Fatal(err)
	}
	if err := RunPE(ctx, w, two, memmodel.Strict, memmodel.DefaultOptions(), 10, 1, &out); err == nil || !strings.Contains(err.Error(), "PE 0") || !strings.Contains(err.Error(), "needs 2 PEs, the job has 1") {
		t.Errorf("err = %v, want one naming PE 0 and the PE counts", err)
	}
	if err := RunPE(ctx, w, one, memmodel.Strict, memmodel.DefaultOptions(), 0, 1, &out); err == nil || !strings.Contains(err.Error(), "iterations 0") {
		t.Errorf("err = %v, want one naming the bad iteration count", err)
	}
}
