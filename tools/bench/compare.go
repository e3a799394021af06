package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/roxamen/roxamen/tools/compare"
)

// comparison is a program `roxrun bench --compare` builds and runs beside Roxamen's rows.
type comparison struct {
	name     string
	source   string   // C source
	compiler string   // oshcc, mpicc
	launcher []string // the launcher and its flags, before -np N PROGRAM ITERS ROUNDS
	packages string   // where Debian has them, for the error when they are missing
	cflags   []string // the compiler's options; nil: -O2
}

var comparisons = map[string]comparison{
	// --mca osc ^rdma: Debian 12's Open MPI 4.1.4 crashes in shmem_finalize otherwise (SIGSEGV in
	// opal_mem_hooks_release_hook under ompi_osc_base_finalize, seen here with gdb; upstream
	// open-mpi/ompi#11604, fixed in 4.1.6). OSHMEM does not use MPI's one-sided component.
	"oshmem": {name: "oshmem", source: compare.OSHMEM, compiler: "oshcc", launcher: []string{"oshrun", "--oversubscribe", "--mca", "osc", "^rdma"}, packages: "openmpi-bin and libopenmpi-dev (Open MPI's OSHMEM)"},
	"mpi":    {name: "mpi", source: compare.MPI, compiler: "mpicc", launcher: []string{"mpirun", "--oversubscribe", "--bind-to", "none"}, packages: "openmpi-bin and libopenmpi-dev"},
}

func parseCompare(list string) ([]string, error) {
	var names []string
	for _, n := range strings.Split(list, ",") {
		n = strings.TrimSpace(n)
		if n == "" {
			continue
		}
		if _, ok := comparisons[n]; !ok && n != "nvshmem" {
			return nil, fmt.Errorf("--compare %q: no comparison program %q (want oshmem, mpi, mpi-ep or nvshmem)", list, n)
		}
		if !containsString(names, n) {
			names = append(names, n)
		}
	}
	return names, nil
}

func containsString(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// compareResult is what one comparison program gave: its rows, or why there are none to use.
type compareResult struct {
	name string
	rows []benchRow
	err  error
}

// find returns the comparison's row for r's test and size, or nil.
func (c compareResult) find(r benchRow) *benchRow {
	for i := range c.rows {
		if c.rows[i].Test == r.Test && c.rows[i].SizeBytes == r.SizeBytes && c.rows[i].PEs == r.PEs {
			return &c.rows[i]
		}
	}
	return nil
}

func matched(rows, other []benchRow) int {
	c := compareResult{rows: other}
	n := 0
	for _, r := range rows {
		if c.find(r) != nil {
			n++
		}
	}
	return n
}

// runComparison builds the program with its compiler and runs it with npes processes, the rows
// of tests only (comma-separated; "" for all), as roxrun bench --tests does. Any
// failure (a missing tool, a build error, a non-zero exit, a signal, a timeout, output that is not
// rows) makes the whole result an error that says which and shows the program's stderr: figures
// from a program that did not finish cleanly are not compared with.
func runComparison(c comparison, npes, iters, rounds int, tests string, timeout time.Duration, stderr io.Writer) compareResult {
	res := compareResult{name: c.name}
	fail := func(format string, args ...any) compareResult {
		res.rows, res.err = nil, fmt.Errorf(format, args...)
		return res
	}
	cc, err := exec.LookPath(c.compiler)
	if err != nil {
		return fail("%s is not installed (%v); Debian has it in %s", c.compiler, err, c.packages)
	}
	launcher, err := exec.LookPath(c.launcher[0])
	if err != nil {
		return fail("%s is not installed (%v); Debian has it in %s", c.launcher[0], err, c.packages)
	}
	dir, err := os.MkdirTemp("", "roxrun-compare-")
	if err != nil {
		return fail("%v", err)
	}
	defer os.RemoveAll(dir)
	src := filepath.Join(dir, c.name+"_bench.c")
	bin := filepath.Join(dir, c.name+"_bench")
	if err := os.WriteFile(src, []byte(c.source), 0o644); err != nil {
		return fail("%v", err)
	}
	cflags := c.cflags
	if cflags == nil {
		cflags = []string{"-O2"}
	}
	if out, err := exec.Command(cc, append(cflags, "-o", bin, src)...).CombinedOutput(); err != nil {
		return fail("building the comparison program with %s: %v\n%s", c.compiler, err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	args := append(append([]string{}, c.launcher[1:]...), "-np", strconv.Itoa(npes), bin, strconv.Itoa(iters), strconv.Itoa(rounds))
	if tests != "" {
		args = append(args, strings.ReplaceAll(tests, " ", ""))
	}
	cmd := exec.CommandContext(ctx, launcher, args...)
	// Open MPI's launchers refuse root unless told; roxrun's own jobs run as root in CI.
	cmd.Env = append(os.Environ(), "OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	var out, errb bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &errb
	runErr := cmd.Run()
	var rows []benchRow
	var junk []string
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		var r benchRow
		if json.Unmarshal([]byte(line), &r) != nil || r.Test == "" {
			junk = append(junk, line)
			continue
		}
		rows = append(rows, r)
	}
	how := strings.Join(append([]string{c.launcher[0]}, args...), " ")
	tail := lastLines(errb.String(), 20)
	switch {
	case ctx.Err() != nil:
		return fail("%s did not finish within %v (--timeout) after printing %d rows; its figures are not used\n%s", how, timeout, len(rows), tail)
	case runErr != nil:
		return fail("the comparison program %s after printing %d rows; its figures are not used (%s)\n%s", exitDescription(runErr, errb.String()), len(rows), how, tail)
	case len(junk) > 0:
		return fail("the comparison program printed lines that are not rows (%q ...); its figures are not used", junk[0])
	case len(rows) == 0:
		return fail("the comparison program printed no rows\n%s", tail)
	}
	res.rows = rows
	return res
}

// exitDescription says how a launcher's run ended, the crash first: mpirun and oshrun exit with a
// status of their own when a process is killed by a signal, and name the process in a message.
func exitDescription(err error, stderr string) string {
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return "failed: " + err.Error()
	}
	if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return "was killed by " + ws.Signal().String()
	}
	for _, l := range strings.Split(stderr, "\n") {
		if i := strings.Index(l, "process rank"); i >= 0 && strings.Contains(l, "exited on signal") {
			// "mpirun noticed that process rank 1 with PID 0 on node vm exited on signal 11 (...)."
			return fmt.Sprintf("crashed: %s (the launcher's exit status %d)", strings.TrimSuffix(strings.TrimSpace(l[i:]), "."), ee.ExitCode())
		}
	}
	return fmt.Sprintf("failed with exit status %d", ee.ExitCode())
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
