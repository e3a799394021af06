package launch

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestPlanMPS(t *testing.T) {
	for _, c := range []struct {
		mode             string
		pes, gpus        int
		running, control bool
		start            bool
		pct              int
		err              string
	}{
		{"auto", 2, 1, false, true, true, 50, ""},
		{"auto", 4, 1, false, true, true, 25, ""},
		{"auto", 8, 2, false, true, true, 25, ""},
		{"auto", 2, 2, false, true, false, 0, ""},  // one PE per GPU
		{"auto", 2, 1, true, true, false, 0, ""},   // a daemon runs already
		{"auto", 2, 0, false, true, false, 0, ""},  // no GPU
		{"auto", 2, 1, false, false, false, 0, ""}, // no control program
		{"off", 4, 1, false, true, false, 0, ""},
		{"on", 1, 1, false, true, true, 100, ""},
		{"on", 2, 0, false, true, false, 0, "no NVIDIA GPU"},
		{"on", 2, 1, false, false, false, 0, "not on PATH"},
	} {
		m, err := PlanMPS(c.mode, c.pes, c.gpus, c.running, c.control)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%+v: error %v, want one saying %q", c, err, c.err)
			}
			continue
		}
		if err != nil || m.Start != c.start || m.Percent != c.pct || m.Why == "" {
			t.Errorf("%+v: %+v, %v", c, m, err)
		}
	}
}

// A job that shares a GPU starts the daemon with a pipe directory of its own, hands every PE its
// variables, and stops it (and removes the directory) when the job ends. The control program is
// a stand-in that does what nvidia-cuda-mps-control does to the pipe directory.
func TestRunStartsAndStopsMPS(t *testing.T) {
	bin, logf := t.TempDir(), filepath.Join(t.TempDir(), "mps.log")
	fake := `#!/bin/sh
if [ "$1" = "-d" ]; then
  touch "$CUDA_MPS_PIPE_DIRECTORY/control"; echo "start $CUDA_MPS_PIPE_DIRECTORY" >> "$FAKE_MPS_LOG"; exit 0
fi
read cmd
echo "$cmd $CUDA_MPS_PIPE_DIRECTORY" >> "$FAKE_MPS_LOG"
[ "$cmd" = quit ] && rm -f "$CUDA_MPS_PIPE_DIRECTORY/control"
exit 0
`
	if err := os.WriteFile(filepath.Join(bin, mpsControl), []byte(fake), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	t.Setenv("FAKE_MPS_LOG", logf)
	m, err := PlanMPS("auto", 2, 1, false, MPSControlFound())
	if err != nil || !m.Start {
		t.Fatalf("plan: %+v, %v", m, err)
	}
	var out, errw bytes.Buffer
	err = Run(context.Background(), Config{NPEs: 2, MPS: m, Timeout: 30 * time.Second, Stdout: &out, Stderr: &errw,
		Argv: []string{"/bin/sh", "-c", `test -e "$CUDA_MPS_PIPE_DIRECTORY/control" && echo "pe sees $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"`}})
	if err != nil {
		t.Fatalf("job: %v\n%s", err, errw.String())
	}
	log, _ := os.ReadFile(logf)
	lines := strings.Split(strings.TrimSpace(string(log)), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "start ") || lines[1] != "quit "+strings.TrimPrefix(lines[0], "start ") {
		t.Fatalf("the control program saw %q: want one start and one quit of the same pipe directory", lines)
	}
	pipe := strings.TrimPrefix(lines[0], "start ")
	if strings.Count(out.String(), "pe sees "+pipe+" 50") != 2 {
		t.Errorf("the PEs printed %q: want both to see the daemon's pipe directory and 50%%", out.String())
	}
	if _, err := os.Stat(filepath.Dir(pipe)); !os.IsNotExist(err) {
		t.Errorf("the job's MPS directory %s is still there after the job", filepath.Dir(pipe))
	}
}

// Under MPS a fatal GPU fault in one PE's kernel fails every PE's context with the same error,
// and the PE that reports it first need not be the one whose kernel faulted. The verdict names
// the PE whose process the MPS server's log names. Here PE 1 "faults": the stand-in server logs
// its PID as the control daemon's server would, and PE 0 fails first.
func TestMPSFaultNamesTheFaultingPE(t *testing.T) {
	bin := t.TempDir()
	fake := `#!/bin/sh
if [ "$1" = "-d" ]; then touch "$CUDA_MPS_PIPE_DIRECTORY/control"; exit 0; fi
read cmd; [ "$cmd" = quit ] && rm -f "$CUDA_MPS_PIPE_DIRECTORY/control"; exit 0
`
	if err := os.WriteFile(filepath.Join(bin, mpsControl), []byte(fake), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	m, err := PlanMPS("on", 2, 1, false, MPSControlFound())
	if err != nil || !m.Start {
		t.Fatalf("plan: %+v, %v", m, err)
	}
	// What the MPS server of CUDA 13 logged on the H200 when PE 1 (PID 480) faulted and PE 0
	// (479) was torn down with it (lines of server.log, abridged).
	pe := `p=$$; log="$CUDA_MPS_LOG_DIRECTORY/server.log"
echo "[2026-12-02 05:33:31.965 Server   471] Client {PID: $p, Context ID: 1} connected" >> "$log"
echo "[2026-12-02 05:33:34.930 Server   471] Client {PID: $p, Context: 1} encountered a fatal GPU error." >> "$log"
echo "[2026-12-02 05:33:34.930 Server   471] Server is handling a fatal GPU error." >> "$log"
echo "[2026-12-02 05:33:34.930 Server   471] All clients belonging to error trigging process $p will be torn down" >> "$log"
echo "[2026-12-02 05:33:34.930 Server   471] The following client process have a sticky error set:" >> "$log"
echo "[2026-12-02 05:33:34.930 Server   471] $p" >> "$log"
sleep 1; echo "CUDA_ERROR_ILLEGAL_ADDRESS" >&2; exit 1`
	var out, errw bytes.Buffer
	err = Run(context.Background(), Config{NPEs: 2, MPS: m, Timeout: 30 * time.Second, Stdout: &out, Stderr: &errw,
		Argv: []string{"/bin/sh", "-c", `if [ "$ROX_PE" = 1 ]; then ` + pe + `; fi; sleep 0.2; echo "CUDA_ERROR_ILLEGAL_ADDRESS" >&2; exit 1`}})
	var ee *ExitError
	if !errors.As(err, &ee) || ee.PE != 1 || !strings.Contains(ee.Error(), "roxrun: PE 1 exited with status 1: its kernel's GPU fault ended every PE's context") {
		t.Fatalf("job: %v, want PE 1 named as the root cause through the MPS log\n%s", err, errw.String())
	}
	if !strings.Contains(errw.String(), "PE 0 exited with status 1 after PE 1 had left the job (collateral)") {
		t.Errorf("PE 0 not named collateral:\n%s", errw.String())
	}
}
