package test

// The launcher's reliability cases (issue 20: 4, 5 and 9): a job ends when its PEs have ended, a
// PE that leaves early is named at once to the PEs waiting for it, and roxrun names the root cause
// of a failure first, with its status or signal, and the PEs that failed because of it as
// collateral.

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// roxrunLines returns roxrun's own lines of stderr (not the PEs').
func roxrunLines(stderr string) []string {
	var lines []string
	for _, l := range strings.Split(stderr, "\n") {
		if strings.HasPrefix(l, "roxrun: ") {
			lines = append(lines, l)
		}
	}
	return lines
}

// wantRootCause checks that roxrun's first line is root and that every other PE of an npes job is
// named as collateral after it.
func wantRootCause(t *testing.T, r result, npes, dead int, root string) {
	t.Helper()
	lines := roxrunLines(r.stderr)
	if len(lines) == 0 || lines[0] != "roxrun: "+root {
		t.Fatalf("roxrun's first line is not %q:\n%s", "roxrun: "+root, r.stderr)
	}
	for pe := 0; pe < npes; pe++ {
		if pe == dead {
			continue
		}
		want := fmt.Sprintf("roxrun: PE %d exited with status 1 after PE %d had left the job (collateral)", pe, dead)
		found := false
		for _, l := range lines[1:] {
			found = found || l == want
		}
		if !found {
			t.Errorf("PE %d is not named as collateral (%q):\n%s", pe, want, r.stderr)
		}
	}
}

// TestBackgroundChildHoldsStdout: PE 0 leaves a child behind that holds its stdout and never
// exits. roxrun ends once every PE has exited (after the grace period for their output) and the
// child dies with the job.
func TestBackgroundChildHoldsStdout(t *testing.T) {
	r := roxrun(t, time.Minute, nil, "--grace", "1s", "-n", "2", filepath.Join(bin, "testprog"), "bgchild")
	mustPass(t, r, "bgchild: ok on 2 PEs")
	if !strings.Contains(r.stdout, "[pe 0] linger: holding stdout") {
		t.Errorf("the child's output within the grace period was lost:\n%s", r.stdout)
	}
	assertNoProcesses(t, "testprog")
}

// TestExitBeforeInit: a PE that exits with status 0 before Init is named at once to the PEs
// waiting for it in Init (ROX_TIMEOUT is far beyond the test's limit).
func TestExitBeforeInit(t *testing.T) {
	r := roxrun(t, time.Minute, []string{"ROX_TIMEOUT=10m"}, "-n", "3", filepath.Join(bin, "testprog"), "preinit")
	if r.status != 1 {
		t.Fatalf("roxrun exited %d, want 1 (the status of the PEs that failed)\n%s", r.status, r.stderr)
	}
	for pe := 0; pe < 2; pe++ {
		// Whichever of Init's bootstrap steps the survivor was in (publishing its heap handle,
		// the allgather), its error names PE 2 and what became of it.
		want := regexp.MustCompile(fmt.Sprintf(`\[pe %d\] testprog: shmem: Init on PE %d: a PE failed: [^\n]*bootstrap: [^\n]* on PE %d: PE 2 exited with status 0 before Init`, pe, pe, pe))
		if !want.MatchString(r.stderr) {
			t.Errorf("PE %d's error does not name PE 2 (want %q):\n%s", pe, want, r.stderr)
		}
	}
	wantRootCause(t, r, 3, 2, "PE 2 exited with status 0 before Init while other PEs still needed it")
	assertNoProcesses(t, "testprog")
}

// TestExitWithoutFinalize: a PE that returns from main without Finalize while the others wait for
// it in a barrier is named to them at once, and by roxrun as the root cause.
func TestExitWithoutFinalize(t *testing.T) {
	r := roxrun(t, time.Minute, []string{"ROX_TIMEOUT=10m"}, "-n", "3", filepath.Join(bin, "testprog"), "leave", "exit0")
	if r.status != 1 {
		t.Fatalf("roxrun exited %d, want 1\n%s", r.status, r.stderr)
	}
	if !strings.Contains(r.stderr, "bootstrap: PE 2 exited with status 0 without Finalize") {
		t.Errorf("the waiting PEs were not told that PE 2 exited without Finalize:\n%s", r.stderr)
	}
	wantRootCause(t, r, 3, 2, "PE 2 exited with status 0 without Finalize while other PEs still needed it")
}

// TestNoFinalizeIsACleanEnd: every PE returning from main without Finalize, once none needs the
// others any more, is a clean end of the job, as with OpenSHMEM implementations that finalize at
// exit.
func TestNoFinalizeIsACleanEnd(t *testing.T) {
	for _, n := range []int{2, 4} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			r := roxrun(t, time.Minute, nil, "-n", fmt.Sprint(n), filepath.Join(bin, "testprog"), "nofinalize")
			mustPass(t, r, fmt.Sprintf("nofinalize: %d adds seen", n))
			if lines := roxrunLines(r.stderr); len(lines) != 0 {
				t.Errorf("roxrun reported a clean job as failed:\n%s", r.stderr)
			}
		})
	}
}

// TestRootCauseFirst: whichever way PE 2 of 3 ends while the others wait for it, roxrun's first
// line names it with its status or signal and exits with that status; the other two are named
// as collateral.
func TestRootCauseFirst(t *testing.T) {
	for _, c := range []struct {
		how    string
		status int
		root   string
	}{
		{"exit3", 3, "PE 2 exited with status 3"},
		{"panic", 2, "PE 2 exited with status 2"},
		{"sigkill", 137, "PE 2 was killed by signal SIGKILL"},
		{"sigterm", 143, "PE 2 was killed by signal SIGTERM"},
	} {
		t.Run(c.how, func(t *testing.T) {
			r := roxrun(t, time.Minute, []string{"ROX_TIMEOUT=10m"}, "-n", "3", filepath.Join(bin, "testprog"), "leave", c.how)
			if r.status != c.status {
				t.Errorf("roxrun exited %d, want PE 2's %d\n%s", r.status, c.status, r.stderr)
			}
			wantRootCause(t, r, 3, 2, c.root)
			if want := "bootstrap: " + c.root; !strings.Contains(r.stderr, want) {
				t.Errorf("the waiting PEs were not told %q:\n%s", want, r.stderr)
			}
			assertNoProcesses(t, "testprog")
		})
	}
}

// TestRootCauseKilledPEFirst (issue 26, 7): PE 1 of 2 is SIGKILLed while PE 0 reads from it over
// tcp; PE 0 sees the connection reset at once and exits with status 1. PE 1 holds its output open
// through a child, so roxrun learns of its end after PE 0's, as it did at random under load:
// the dead PE is still the root cause, and roxrun exits with its 137. Several runs, since the
// order of the two ends is the kernel's.
func TestRootCauseKilledPEFirst(t *testing.T) {
	for i := range 4 {
		r := roxrun(t, time.Minute, []string{"ROX_TRANSPORT=tcp", "ROX_TIMEOUT=10m"}, "--grace", "1s", "-n", "2", filepath.Join(bin, "testprog"), "killpeer")
		if r.status != 137 {
			t.Errorf("run %d: roxrun exited %d, want PE 1's 137\n%s", i, r.status, r.stderr)
		}
		wantRootCause(t, r, 2, 1, "PE 1 was killed by signal SIGKILL")
		if t.Failed() {
			break
		}
	}
	assertNoProcesses(t, "testprog")
}

// TestRootCauseStoppedPE (issue 26, 7): PE 2 of 3 stops itself with SIGSTOP while the others wait
// for it in a barrier; they time out (ROX_TIMEOUT) naming it, and roxrun names the stopped PE as
// the root cause, not the first PE that timed out.
func TestRootCauseStoppedPE(t *testing.T) {
	r := roxrun(t, time.Minute, []string{"ROX_TIMEOUT=2s"}, "--grace", "1s", "-n", "3", filepath.Join(bin, "testprog"), "leave", "sigstop")
	if r.status != 128+19 {
		t.Errorf("roxrun exited %d, want 147 (128+SIGSTOP)\n%s", r.status, r.stderr)
	}
	wantRootCause(t, r, 3, 2, "PE 2 was stopped by signal SIGSTOP while the other PEs waited for it")
	assertNoProcesses(t, "testprog")
}

// TestRootCauseOOM: a PE killed by the kernel's OOM killer is named as such. The job runs in a
// memory cgroup of its own with a limit only the growing PE exceeds; skipped where no memory
// cgroup can be made (not root, no memory controller).
func TestRootCauseOOM(t *testing.T) {
	procs := memoryCgroup(t, 512<<20)
	cmd := fmt.Sprintf("echo $$ > %s && exec %s -n 3 %s leave oom", procs, filepath.Join(bin, "roxrun"), filepath.Join(bin, "testprog"))
	r := run(t, time.Minute, []string{"ROX_TIMEOUT=10m", "ROX_HEAP_SIZE=4M"}, "sh", "-c", cmd)
	if r.status != 137 {
		t.Errorf("roxrun exited %d, want PE 2's 137\n%s", r.status, r.stderr)
	}
	lines := roxrunLines(r.stderr)
	if len(lines) == 0 || !strings.HasPrefix(lines[0], "roxrun: PE 2 was killed by signal SIGKILL (out of memory: the kernel's OOM killer") {
		t.Fatalf("roxrun's first line does not say that the OOM killer ended PE 2:\n%s", r.stderr)
	}
	wantRootCause(t, r, 3, 2, strings.TrimPrefix(lines[0], "roxrun: "))
}

// memoryCgroup makes a memory cgroup limited to limit bytes (without swap) and returns it and the
// file that moves a process into it; it is removed when the test ends.
func memoryCgroup(t *testing.T, limit int64) (procs string) {
	t.Helper()
	write := func(file, val string) error { return os.WriteFile(file, []byte(val), 0o644) }
	name := fmt.Sprintf("roxamen-test-%d", os.Getpid())
	if st, err := os.Stat("/sys/fs/cgroup/memory"); err == nil && st.IsDir() {
		dir := filepath.Join("/sys/fs/cgroup/memory", name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Skipf("no memory cgroup (v1): %v", err)
		}
		t.Cleanup(func() { os.Remove(dir) })
		if err := write(filepath.Join(dir, "memory.limit_in_bytes"), fmt.Sprint(limit)); err != nil {
			t.Skipf("memory cgroup (v1) limit: %v", err)
		}
		_ = write(filepath.Join(dir, "memory.memsw.limit_in_bytes"), fmt.Sprint(limit))
		return filepath.Join(dir, "cgroup.procs")
	}
	ctl, err := os.ReadFile("/sys/fs/cgroup/cgroup.subtree_control")
	if err != nil || !strings.Contains(string(ctl), "memory") {
		t.Skip("no memory controller for child cgroups (cgroup v2)")
	}
	dir := filepath.Join("/sys/fs/cgroup", name)
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Skipf("no memory cgroup (v2): %v", err)
	}
	t.Cleanup(func() { os.Remove(dir) })
	if err := write(filepath.Join(dir, "memory.max"), fmt.Sprint(limit)); err != nil {
		t.Skipf("memory cgroup (v2) limit: %v", err)
	}
	_ = write(filepath.Join(dir, "memory.swap.max"), "0")
	return filepath.Join(dir, "cgroup.procs")
}
