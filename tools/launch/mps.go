package launch

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// MPS is whether a job starts CUDA's Multi-Process Service for its PEs, and why. Several PEs on
// one GPU without MPS are time-sliced (a handoff between two PEs' kernels costs milliseconds);
// under MPS their kernels run at once. roxrun starts a daemon of the job's own, with a private
// pipe directory, only where PEs share a GPU and none runs, and stops it with the job. It never
// changes the GPU's settings (compute mode, clocks).
type MPS struct {
	Start   bool   // start a daemon for the job
	Percent int    // CUDA_MPS_ACTIVE_THREAD_PERCENTAGE for each PE: the GPU's SMs split evenly
	Why     string // the reason, for roxrun info and ROX_DEBUG=info
}

// mpsControl is the daemon's control program (the NVIDIA driver's utilities install it).
const mpsControl = "nvidia-cuda-mps-control"

// PlanMPS decides for mode (ROX_MPS: auto, on or off), a node running pes PEs on gpus NVIDIA
// GPUs. running says whether an MPS daemon already serves this process (MPSRunning); control
// whether its control program is on PATH.
func PlanMPS(mode string, pes, gpus int, running, control bool) (MPS, error) {
	perGPU := 0
	if gpus > 0 {
		perGPU = (pes + gpus - 1) / gpus
	}
	switch {
	case mode == "off":
		return MPS{Why: "ROX_MPS=off"}, nil
	case running:
		return MPS{Why: "an MPS daemon already runs (CUDA_MPS_PIPE_DIRECTORY or the default pipe): the PEs use it"}, nil
	case gpus == 0:
		if mode == "on" {
			return MPS{}, fmt.Errorf("ROX_MPS=on: no NVIDIA GPU here")
		}
		return MPS{Why: "no NVIDIA GPU here"}, nil
	case perGPU < 2 && mode != "on":
		return MPS{Why: fmt.Sprintf("%d PEs on %d GPUs: none shares a GPU", pes, gpus)}, nil
	case !control:
		if mode == "on" {
			return MPS{}, fmt.Errorf("ROX_MPS=on: %s is not on PATH", mpsControl)
		}
		return MPS{Why: fmt.Sprintf("%d PEs share each GPU, but %s is not on PATH: they are time-sliced", perGPU, mpsControl)}, nil
	}
	pct := 100 / max(perGPU, 1)
	return MPS{Start: true, Percent: pct, Why: fmt.Sprintf("%d PEs per GPU (%d GPUs): a daemon for the job, %d%% of the SMs each (ROX_MPS=%s)", perGPU, gpus, pct, mode)}, nil
}

// MPSRunning reports whether an MPS daemon serves processes with this environment: the pipe
// directory it names (or CUDA's default) has the daemon's control pipe.
func MPSRunning(getenv func(string) string) bool {
	dir := getenv("CUDA_MPS_PIPE_DIRECTORY")
	if dir == "" {
		dir = "/tmp/nvidia-mps"
	}
	_, err := os.Stat(filepath.Join(dir, "control"))
	return err == nil
}

// MPSControlFound reports whether the daemon's control program is on PATH.
func MPSControlFound() bool { _, err := exec.LookPath(mpsControl); return err == nil }

// startMPS starts a daemon with a pipe and log directory of its own and returns the variables
// every PE needs and the function that stops it (and removes the directories).
func startMPS(m MPS) (env []string, logDir string, stop func() error, err error) {
	dir, err := os.MkdirTemp("", "rox-mps-")
	if err != nil {
		return nil, "", nil, err
	}
	pipe, logs := filepath.Join(dir, "pipe"), filepath.Join(dir, "log")
	for _, d := range []string{pipe, logs} {
		if err := os.Mkdir(d, 0o700); err != nil {
			os.RemoveAll(dir)
			return nil, "", nil, err
		}
	}
	daemonEnv := append(os.Environ(), "CUDA_MPS_PIPE_DIRECTORY="+pipe, "CUDA_MPS_LOG_DIRECTORY="+logs)
	cmd := exec.Command(mpsControl, "-d")
	cmd.Env = daemonEnv
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		os.RemoveAll(dir)
		return nil, "", nil, fmt.Errorf("roxrun: starting CUDA MPS (%s -d): %v %s", mpsControl, err, strings.TrimSpace(out.String()))
	}
	// -d returns once the daemon has forked; its control pipe appears right after.
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(filepath.Join(pipe, "control")); err == nil {
			break
		}
	}
	stop = func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		q := exec.CommandContext(ctx, mpsControl)
		q.Env = daemonEnv
		q.Stdin = strings.NewReader("quit\n")
		err := q.Run()
		// The daemon removes its control pipe as it leaves: wait for that, then the directories go.
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if _, serr := os.Stat(filepath.Join(pipe, "control")); serr != nil {
				break
			}
		}
		os.RemoveAll(dir)
		if err != nil {
			return fmt.Errorf("roxrun: stopping the job's CUDA MPS daemon: %v", err)
		}
		return nil
	}
	env = []string{"CUDA_MPS_PIPE_DIRECTORY=" + pipe, "CUDA_MPS_LOG_DIRECTORY=" + logs,
		"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=" + strconv.Itoa(m.Percent)}
	return env, logs, stop, nil
}

// mpsLogs is the log directory of the MPS server the job's PEs use, and how much of each log was
// there when the job began (what follows is the job's).
type mpsLogs struct {
	dir   string
	start map[string]int64
}

// mpsLogFiles are the logs an MPS control daemon writes in its log directory: the server's, which
// records what happens to its clients, and the control daemon's.
var mpsLogFiles = []string{"server.log", "control.log"}

func newMPSLogs(dir string) *mpsLogs {
	if dir == "" {
		return nil
	}
	l := &mpsLogs{dir: dir, start: map[string]int64{}}
	for _, f := range mpsLogFiles {
		if st, err := os.Stat(filepath.Join(dir, f)); err == nil {
			l.start[f] = st.Size()
		}
	}
	return l
}

// lines returns the lines the logs gained during the job.
func (l *mpsLogs) lines() []string {
	var out []string
	for _, f := range mpsLogFiles {
		b, err := os.ReadFile(filepath.Join(l.dir, f))
		if err != nil {
			continue
		}
		if off := l.start[f]; off <= int64(len(b)) {
			b = b[off:]
		}
		for _, s := range strings.Split(string(b), "\n") {
			if s = strings.TrimSpace(s); s != "" {
				out = append(out, f+": "+s)
			}
		}
	}
	return out
}

// faultWords mark a log line about a fatal GPU fault (MPS does not isolate one: every client of
// the server sees its context fail with the same error, so the PEs' own reports cannot say whose
// kernel faulted, but the server's log names the client process).
var faultWords = []string{"fatal", "exception", "fault", "illegal", "xid"}

// faultingClient returns the rank of the PE whose process the MPS logs name, alone on a line about
// a fatal fault, and that line; ok is false when no PE, or more than one, is so named.
func (l *mpsLogs) faultingClient(pids map[int]int) (rank int, line string, ok bool) {
	rank = -1
	for _, s := range l.lines() {
		low := strings.ToLower(s)
		fault := false
		for _, w := range faultWords {
			fault = fault || strings.Contains(low, w)
		}
		if !fault {
			continue
		}
		named := -1
		for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r < '0' || r > '9' }) {
			pid, err := strconv.Atoi(f)
			if err != nil {
				continue
			}
			if r, isPE := pids[pid]; isPE {
				if named >= 0 && named != r {
					named = -2 // a line naming several PEs says nothing of which faulted
					break
				}
				named = r
			}
		}
		switch {
		case named < 0:
		case rank >= 0 && rank != named:
			return -1, "", false
		case rank < 0:
			rank, line = named, s
		}
	}
	return rank, line, rank >= 0
}
