// Package test holds Roxamen's integration tests: real multi-process jobs started by roxrun.
package test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// bin holds the binaries TestMain builds once: roxrun, testprog and the examples.
var bin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "roxamen-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bin = dir
	for _, pkg := range []string{"cmd/roxrun", "test/testprog", "examples/hello", "examples/ring", "examples/counter"} {
		cmd := exec.Command("go", "build", "-o", filepath.Join(dir, filepath.Base(pkg)), "./"+pkg)
		cmd.Dir = ".."
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "building %s: %v\n%s", pkg, err, out)
			os.RemoveAll(dir)
			os.Exit(1)
		}
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

type result struct {
	stdout, stderr string
	status         int
	took           time.Duration
}

// roxrun runs the launcher with args and an optional environment, bounded by limit.
func roxrun(t *testing.T, limit time.Duration, env []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "roxrun"), args...)
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String(), took: time.Since(start)}
	if ctx.Err() != nil {
		t.Fatalf("roxrun %v did not finish within %v\nstdout:\n%s\nstderr:\n%s", args, limit, r.stdout, r.stderr)
	}
	if ee, ok := err.(*exec.ExitError); ok {
		r.status = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("roxrun %v: %v", args, err)
	}
	return r
}

func mustPass(t *testing.T, r result, wantOut string) {
	t.Helper()
	if r.status != 0 || !strings.Contains(r.stdout, wantOut) {
		t.Fatalf("status %d, want 0 and %q in the output\nstdout:\n%s\nstderr:\n%s", r.status, wantOut, r.stdout, r.stderr)
	}
}

func TestExamples(t *testing.T) {
	for _, n := range []int{2, 3, 8} {
		t.Run(fmt.Sprintf("ring/%d", n), func(t *testing.T) {
			r := roxrun(t, 2*time.Minute, nil, "-n", fmt.Sprint(n), filepath.Join(bin, "ring"), "-laps", "50")
			mustPass(t, r, fmt.Sprintf("50 laps of %d PEs", n))
		})
		t.Run(fmt.Sprintf("counter/%d", n), func(t *testing.T) {
			r := roxrun(t, 2*time.Minute, nil, "-n", fmt.Sprint(n), filepath.Join(bin, "counter"), "-adds", "500")
			mustPass(t, r, "every ticket once: ok")
		})
	}
	t.Run("hello/4", func(t *testing.T) {
		r := roxrun(t, time.Minute, nil, "-n", "4", filepath.Join(bin, "hello"))
		for pe := 0; pe < 4; pe++ {
			mustPass(t, r, fmt.Sprintf("[pe %d] hello from PE %d of 4", pe, pe))
		}
	})
}

// TestGoPackageDir runs an example the way the README does: roxrun builds the package first.
func TestGoPackageDir(t *testing.T) {
	cmd := exec.Command(filepath.Join(bin, "roxrun"), "-n", "2", "./examples/ring")
	cmd.Dir = ".."
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "10 laps of 2 PEs") {
		t.Fatalf("roxrun -n 2 ./examples/ring: %v\n%s", err, out)
	}
}

func TestAPI(t *testing.T) {
	for _, n := range []int{1, 2, 3, 8} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			r := roxrun(t, 3*time.Minute, nil, "-n", fmt.Sprint(n), filepath.Join(bin, "testprog"), "api")
			mustPass(t, r, fmt.Sprintf("api: ok on %d PEs", n))
		})
	}
}

func TestBadInput(t *testing.T) {
	for _, n := range []int{1, 3} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			r := roxrun(t, time.Minute, []string{"ROX_HEAP_SIZE=8M"}, "-n", fmt.Sprint(n), filepath.Join(bin, "testprog"), "badinput")
			mustPass(t, r, "badinput: ok")
		})
	}
}

// TestKilledPE: a PE killed with SIGKILL makes the others fail naming it, roxrun exits non-zero,
// and no process of the job remains.
func TestKilledPE(t *testing.T) {
	r := roxrun(t, time.Minute, []string{"ROX_TIMEOUT=20s"}, "-n", "3", filepath.Join(bin, "testprog"), "kill")
	if r.status == 0 {
		t.Fatalf("roxrun exited 0 although PE 2 was killed\n%s", r.stderr)
	}
	if !strings.Contains(r.stderr, "PE 2") || !strings.Contains(r.stderr, "SIGKILL") && !strings.Contains(r.stderr, "died") {
		t.Errorf("the output does not name the dead PE 2:\n%s", r.stderr)
	}
	if r.took > 15*time.Second {
		t.Errorf("the job took %v to fail, want well within ROX_TIMEOUT (20s)", r.took)
	}
	assertNoProcesses(t, "testprog")
}

func TestGlobalExit(t *testing.T) {
	r := roxrun(t, time.Minute, nil, "-n", "3", filepath.Join(bin, "testprog"), "exit")
	if r.status != 7 {
		t.Fatalf("roxrun exited %d, want 7 from GlobalExit(7)\n%s", r.status, r.stderr)
	}
	assertNoProcesses(t, "testprog")
}

// TestGlobalExitStatusCode (issue 26, 9): a nonzero status never ends the job with 0, though a
// process's exit code keeps only its low 8 bits: 256, 512 and -256 give 1, 300 gives 44.
func TestGlobalExitStatusCode(t *testing.T) {
	for _, c := range []struct{ status, code int }{{256, 1}, {512, 1}, {-256, 1}, {300, 44}, {-1, 255}} {
		r := roxrun(t, time.Minute, nil, "-n", "2", filepath.Join(bin, "testprog"), "exit", strconv.Itoa(c.status))
		if r.status != c.code {
			t.Errorf("GlobalExit(%d): roxrun exited %d, want %d\n%s", c.status, r.status, c.code, r.stderr)
		}
	}
	assertNoProcesses(t, "testprog")
}

// TestTimeout: a wait nobody satisfies ends after ROX_TIMEOUT with an error, not a hang.
func TestTimeout(t *testing.T) {
	r := roxrun(t, time.Minute, []string{"ROX_TIMEOUT=2s"}, "-n", "2", filepath.Join(bin, "testprog"), "hang")
	if r.status == 0 || !strings.Contains(r.stderr, "WaitUntil") || !strings.Contains(r.stderr, "timed out") {
		t.Fatalf("status %d; want a WaitUntil timeout error\n%s", r.status, r.stderr)
	}
}

// TestRoxrunTimeout: --timeout stops a job and kills every PE.
func TestRoxrunTimeout(t *testing.T) {
	r := roxrun(t, time.Minute, []string{"ROX_TIMEOUT=60s"}, "--timeout", "2s", "--grace", "500ms", "-n", "2", filepath.Join(bin, "testprog"), "hang")
	if r.status == 0 || !strings.Contains(r.stderr, "timed out") {
		t.Fatalf("status %d; want a job timeout\n%s", r.status, r.stderr)
	}
	assertNoProcesses(t, "testprog")
}

// TestSignalForwarding: SIGTERM to roxrun reaches every PE and no process remains.
func TestSignalForwarding(t *testing.T) {
	cmd := exec.Command(filepath.Join(bin, "roxrun"), "--grace", "1s", "-n", "3", filepath.Join(bin, "testprog"), "hang")
	cmd.Env = append(os.Environ(), "ROX_TIMEOUT=60s")
	var errb bytes.Buffer
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond)
	_ = cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("roxrun exited 0 after SIGTERM")
		}
	case <-time.After(20 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("roxrun did not stop after SIGTERM\n%s", errb.String())
	}
	assertNoProcesses(t, "testprog")
}

func TestExitStatusAndPrefix(t *testing.T) {
	script := filepath.Join(t.TempDir(), "job.sh")
	body := "#!/bin/sh\necho \"line from $ROX_PE of $ROX_NPES\"\n[ \"$ROX_PE\" = 1 ] && exit 5\nsleep 30\n"
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	r := roxrun(t, time.Minute, nil, "--grace", "500ms", "-n", "3", script)
	if r.status != 5 {
		t.Fatalf("roxrun exited %d, want PE 1's status 5\n%s", r.status, r.stderr)
	}
	if !strings.Contains(r.stderr, "PE 1 exited with status 5") {
		t.Errorf("no message naming PE 1 and its status:\n%s", r.stderr)
	}
	if !strings.Contains(r.stdout, "[pe 2] line from 2 of 3") {
		t.Errorf("output not prefixed:\n%s", r.stdout)
	}
	if r.took > 15*time.Second {
		t.Errorf("roxrun took %v; the first failure should stop the job", r.took)
	}
}

func TestInfo(t *testing.T) {
	r := roxrun(t, 30*time.Second, []string{"ROX_DEVICE=host"}, "info")
	for _, want := range []string{"backend: host", "ROX_HEAP_SIZE", "ROX_ORDERING", "ROX_TIMEOUT"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("roxrun info lacks %q:\n%s", want, r.stdout)
		}
	}
	r = roxrun(t, 30*time.Second, []string{"ROX_ORDERING=sideways"}, "info")
	if r.status == 0 || !strings.Contains(r.stdout, "INVALID: ROX_ORDERING=sideways: want one of strict|bypass") {
		t.Errorf("a malformed knob was not reported (status %d):\n%s", r.status, r.stdout)
	}
}

// assertNoProcesses fails when a process whose command line names prog still runs.
func assertNoProcesses(t *testing.T, prog string) {
	t.Helper()
	path := filepath.Join(bin, prog)
	deadline := time.Now().Add(5 * time.Second)
	for {
		var left []string
		procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
		for _, p := range procs {
			b, err := os.ReadFile(p)
			if err == nil && strings.HasPrefix(string(b), path+"\x00") {
				left = append(left, filepath.Base(filepath.Dir(p)))
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes of %s outlived the job: pids %v", prog, left)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestNICPath forces every PE pair of one node through the TCP transport (ROX_TRANSPORT=tcp).
func TestNICPath(t *testing.T) {
	env := []string{"ROX_TRANSPORT=tcp"}
	t.Run("api/3", func(t *testing.T) {
		mustPass(t, roxrun(t, 3*time.Minute, env, "-n", "3", filepath.Join(bin, "testprog"), "api"), "api: ok on 3 PEs")
	})
	t.Run("ring/4", func(t *testing.T) {
		mustPass(t, roxrun(t, 2*time.Minute, env, "-n", "4", filepath.Join(bin, "ring"), "-laps", "20"), "20 laps of 4 PEs")
	})
	t.Run("counter/3", func(t *testing.T) {
		mustPass(t, roxrun(t, 2*time.Minute, env, "-n", "3", filepath.Join(bin, "counter"), "-adds", "300"), "every ticket once: ok")
	})
	t.Run("badinput/2", func(t *testing.T) {
		mustPass(t, roxrun(t, time.Minute, append(env, "ROX_HEAP_SIZE=8M"), "-n", "2", filepath.Join(bin, "testprog"), "badinput"), "badinput: ok")
	})
	t.Run("kill/3", func(t *testing.T) {
		r := roxrun(t, time.Minute, append(env, "ROX_TIMEOUT=20s"), "-n", "3", filepath.Join(bin, "testprog"), "kill")
		if r.status == 0 || !strings.Contains(r.stderr, "PE 2") {
			t.Fatalf("status %d; want a failure naming PE 2\n%s", r.status, r.stderr)
		}
		assertNoProcesses(t, "testprog")
	})
}

// TestRoxrunKilled: even roxrun dying by SIGKILL takes its PEs with it (Pdeathsig).
func TestRoxrunKilled(t *testing.T) {
	cmd := exec.Command(filepath.Join(bin, "roxrun"), "-n", "3", filepath.Join(bin, "testprog"), "hang")
	cmd.Env = append(os.Environ(), "ROX_TIMEOUT=60s")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond)
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	assertNoProcesses(t, "testprog")
}
