package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/roxamen/roxamen/tools/roxruntest"
	"golang.org/x/sys/unix"
)

func runRoxrun(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	rc := dispatch(args, &out, &errb)
	return rc, out.String(), errb.String()
}

// Every command takes -h and --help the same way: usage on stdout, nothing on stderr, exit 0; and
// the top-level help holds each command's usage verbatim.
func TestHelp(t *testing.T) {
	rc, top, errs := runRoxrun("--help")
	if rc != 0 || errs != "" || !strings.HasPrefix(top, "usage: roxrun COMMAND") {
		t.Fatalf("roxrun --help: rc %d, stderr %q, stdout:\n%s", rc, errs, top)
	}
	for _, args := range [][]string{{"-h"}, {"help"}} {
		if rc, out, errs := runRoxrun(args...); rc != 0 || errs != "" || out != top {
			t.Errorf("roxrun %v: rc %d, stderr %q; want the same text as --help", args, rc, errs)
		}
	}
	for _, c := range commands() {
		var want bytes.Buffer
		c.Usage(&want)
		if !strings.Contains(top, want.String()) {
			t.Errorf("roxrun --help lacks the usage of %s:\n%s", c.Name, want.String())
		}
		for _, args := range [][]string{{c.Name, "--help"}, {c.Name, "-h"}, {c.Name, "-help"}, {"help", c.Name}} {
			rc, out, errs := runRoxrun(args...)
			if rc != 0 || errs != "" || out != want.String() {
				t.Errorf("roxrun %v: rc %d, stderr %q, stdout:\n%s\nwant rc 0 and:\n%s", args, rc, errs, out, want.String())
			}
		}
	}
	// Help wins wherever it stands among the flags.
	if rc, out, _ := runRoxrun("run", "-n", "2", "--help"); rc != 0 || !strings.HasPrefix(out, "roxrun run") {
		t.Errorf("roxrun run -n 2 --help: rc %d\n%s", rc, out)
	}
	if rc, out, errs := runRoxrun(); rc != 2 || out != "" || errs != top {
		t.Errorf("roxrun without arguments: rc %d, stdout %q; want 2 and the usage on stderr", rc, out)
	}
	if rc, _, errs := runRoxrun("help", "nosuch"); rc != 2 || !strings.Contains(errs, `no command "nosuch"`) {
		t.Errorf("roxrun help nosuch: rc %d, %q", rc, errs)
	}
}

// The usage and docs/roxrun.md name every flag of every command.
func TestEveryFlagDocumented(t *testing.T) {
	readme, err := os.ReadFile("../../docs/roxrun.md")
	if err != nil {
		t.Fatal(err)
	}
	_, top, _ := runRoxrun("--help")
	for _, c := range commands() {
		c.Flags.VisitAll(func(f *flag.Flag) {
			name := "--" + f.Name
			if len(f.Name) == 1 {
				name = "-" + f.Name
			}
			if !strings.Contains(top, "  "+name+" ") && !strings.Contains(top, "  "+name+"\n") {
				t.Errorf("roxrun --help does not list %s %s", c.Name, name)
			}
			if !strings.Contains(string(readme), "`"+name) {
				t.Errorf("docs/roxrun.md does not mention %s's %s", c.Name, name)
			}
		})
	}
}

// Flags that contradict each other, or mean nothing without another, are errors that name them;
// nothing runs.
func TestConflictingFlags(t *testing.T) {
	lit := "../../memmodel/testdata/MP+fence+wait.litmus"
	cases := []struct {
		args []string
		want []string
	}{
		{[]string{"-n", "3", "--hosts", "a:2", "true"}, []string{"-n 3", "--hosts a:2", "2 PEs"}},
		{[]string{"run", "-n", "5", "--hosts", "a:2,b:2", "true"}, []string{"-n 5", "--hosts a:2,b:2", "4 PEs"}},
		{[]string{"--rsh", "ip netns exec", "true"}, []string{"--rsh ip netns exec", "needs --hosts"}},
		{[]string{"litmus", "--seed", "3", lit}, []string{"--seed 3", "needs --run"}},
		{[]string{"litmus", "--device", "cuda", lit}, []string{"--device cuda", "needs --run"}},
		{[]string{"litmus", "--hosts", "a:2", lit}, []string{"--hosts a:2", "needs --run"}},
		{[]string{"litmus", "--run", "2", "--bind", ":0", lit}, []string{"--bind :0", "needs --hosts"}},
		{[]string{"bench", "--nvshmem", "figures.txt"}, []string{"--nvshmem figures.txt", "GPU"}},
		{[]string{"bench", "--compare", "nccl"}, []string{`--compare "nccl"`, "oshmem, mpi"}},
		{[]string{"bench", "--tests", "p_pingpong,nosuch"}, []string{`no test "nosuch"`, "barrier_all_latency"}},
		{[]string{"bench", "--rounds", "0"}, []string{"--rounds 0"}},
		{[]string{"bench", "-n", "1"}, []string{"-n 1", "at least 2 PEs"}},
		{[]string{"bench", "extra"}, []string{`unexpected argument "extra"`}},
		{[]string{"info", "extra"}, []string{`unexpected argument "extra"`}},
		{[]string{"run"}, []string{"no program given"}},
		{[]string{"bench", "--bogus"}, []string{"-bogus", "roxrun bench --help"}},
	}
	for _, c := range cases {
		rc, out, errs := runRoxrun(c.args...)
		if rc != 2 || out != "" {
			t.Errorf("roxrun %q: rc %d, stdout %q; want 2 and nothing on stdout", c.args, rc, out)
		}
		for _, w := range c.want {
			if !strings.Contains(errs, w) {
				t.Errorf("roxrun %q: stderr %q lacks %q", c.args, errs, w)
			}
		}
		if n := strings.Count(errs, "\n"); n != 2 {
			t.Errorf("roxrun %q: %d lines on stderr, want the error and the pointer to --help:\n%s", c.args, n, errs)
		}
	}
}

func TestMain(m *testing.M) {
	code := m.Run()
	roxruntest.Remove()
	os.Exit(code)
}

// openPTY returns a pseudo-terminal's master and its slave, the terminal a program writes to.
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		m.Close()
		t.Skipf("unlockpt: %v", err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		m.Close()
		t.Skipf("ptsname: %v", err)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		m.Close()
		t.Skipf("opening the pty's slave: %v", err)
	}
	t.Cleanup(func() { s.Close(); m.Close() })
	return m, s
}

// runOnTerminal runs bin with stderr on a terminal and returns stdout and what the terminal got.
func runOnTerminal(t *testing.T, bin string, args ...string) (stdout, terminal string) {
	t.Helper()
	m, s := openPTY(t)
	cmd := exec.Command(bin, args...)
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = s
	var term bytes.Buffer
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _, _ = io.Copy(&term, m) }()
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %v: %v\n%s", bin, args, err, out.String())
	}
	s.Close()
	// The master reads EIO once the slave is closed and drained.
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the terminal's output did not drain")
	}
	return out.String(), term.String()
}

// Long runs show which row or test runs, k of n, on a terminal, and nothing extra elsewhere;
// each phase ends with a summary line.
func TestProgressAndSummary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds roxrun and starts multi-process jobs")
	}
	bin := roxruntest.Binary(t)
	bench := []string{"bench", "--tests", "p_pingpong,barrier_all_latency", "--rounds", "2", "--iters", "200"}
	lit := []string{"litmus", "--run", "5", "../../memmodel/testdata/MP+fence+wait.litmus", "../../memmodel/testdata/SB+fences.litmus"}

	t.Run("bench/terminal", func(t *testing.T) {
		out, term := runOnTerminal(t, bin, bench...)
		for _, w := range []string{"bench [1/2] p_pingpong 8 B", "bench [2/2] barrier_all_latency"} {
			if !strings.Contains(term, w) {
				t.Errorf("the terminal got %q, want %q", term, w)
			}
		}
		if !strings.Contains(out, "bench: 2 rows on host, 2 PEs, 2 rounds each") {
			t.Errorf("no summary line on stdout:\n%s", out)
		}
	})
	t.Run("bench/pipe", func(t *testing.T) {
		if out := runPiped(t, bin, bench...); !strings.Contains(out, "bench: 2 rows on host") {
			t.Errorf("no summary line:\n%s", out)
		}
	})
	t.Run("litmus/terminal", func(t *testing.T) {
		out, term := runOnTerminal(t, bin, lit...)
		for _, w := range []string{"litmus --run strict [1/2] MP+fence+wait", "litmus --run strict [2/2] SB+fences", "litmus --run bypass [2/2]"} {
			if !strings.Contains(term, w) {
				t.Errorf("the terminal got %q, want %q", term, w)
			}
		}
		for _, w := range []string{"litmus: 2 tests decided in both modes", "litmus: run strict: 2 tests x 5 iterations on host, no forbidden outcome", "litmus: run bypass: 2 tests x 5 iterations on host"} {
			if !strings.Contains(out, w) {
				t.Errorf("stdout lacks the summary %q:\n%s", w, out)
			}
		}
	})
	t.Run("litmus/pipe", func(t *testing.T) { runPiped(t, bin, lit...) })
}

// runPiped runs bin with stdout and stderr on pipes and returns stdout: nothing may reach stderr
// (the progress lines are for a terminal).
func runPiped(t *testing.T, bin string, args ...string) string {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v\n%s%s", err, out.String(), errb.String())
	}
	if errb.Len() != 0 {
		t.Errorf("stderr is not a terminal, yet it got %q", errb.String())
	}
	return out.String()
}
