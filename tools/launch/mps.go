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

	"github.com/roxamen/roxamen/internal/mpslog"
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
func MPSRunning(getenv func(string) string) bool { return mpslog.Running(getenv) }

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
