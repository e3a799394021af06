package launch

import (
	"bytes"
	"context"
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
