package test

// Jobs started by other launchers: Open MPI's mpirun, Slurm's srun (a one-node Slurm started for
// the test where it can run, else the environment contract srun sets), and torchrun's
// environment contract. shmem.Init finds its rank and the rendezvous from their variables alone
// (internal/bootstrap/rank.go).

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/roxamen/roxamen/internal/testkit"
	"github.com/roxamen/roxamen/test/slurm"
)

// transports are the NIC transports a launcher test runs with ("" is the default: direct
// load/store between the PEs of one node). ucx only where libucp loads.
func transports(t *testing.T) []string {
	ts := []string{"", "tcp"}
	if testkit.Required("ROX_TEST_UCX") || ucxLoads() {
		ts = append(ts, "ucx")
	}
	return ts
}

func transportEnv(tr string) []string {
	if tr == "" {
		return nil
	}
	return []string{"ROX_TRANSPORT=" + tr}
}

func transportName(tr string) string {
	if tr == "" {
		return "direct"
	}
	return tr
}

// run runs a command bounded by limit; on timeout the whole process group is killed.
func run(t *testing.T, limit time.Duration, env []string, name string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String(), took: time.Since(start)}
	if ctx.Err() != nil {
		t.Fatalf("%s %v did not finish within %v\nstdout:\n%s\nstderr:\n%s", name, args, limit, r.stdout, r.stderr)
	}
	if ee, ok := err.(*exec.ExitError); ok {
		r.status = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("%s %v: %v", name, args, err)
	}
	return r
}

// TestMpirun: Debian's Open MPI mpirun starts examples/ring on 4 ranks.
func TestMpirun(t *testing.T) {
	mpirun, err := exec.LookPath("mpirun")
	if err != nil {
		t.Skip("no mpirun (Debian: apt-get install openmpi-bin)")
	}
	for _, tr := range transports(t) {
		t.Run(transportName(tr), func(t *testing.T) {
			args := []string{"--oversubscribe", "-np", "4"}
			if os.Geteuid() == 0 {
				args = append([]string{"--allow-run-as-root"}, args...)
			}
			if tr != "" {
				args = append(args, "-x", "ROX_TRANSPORT="+tr)
			}
			args = append(args, filepath.Join(bin, "ring"), "-laps", "20")
			r := run(t, 2*time.Minute, transportEnv(tr), mpirun, args...)
			mustPass(t, r, "20 laps of 4 PEs")
		})
	}
}

// spawn starts one process per environment (each on top of this process's, plus extra), waits
// for all within limit and returns their results; on timeout or a failure to start, every one
// is killed.
func spawn(t *testing.T, limit time.Duration, envs [][]string, extra []string, argv ...string) []result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	res := make([]result, len(envs))
	cmds := make([]*exec.Cmd, len(envs))
	outs := make([][2]bytes.Buffer, len(envs))
	for i, env := range envs {
		cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
		cmd.Env = append(append(os.Environ(), extra...), env...)
		cmd.Stdout, cmd.Stderr = &outs[i][0], &outs[i][1]
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
		if err := cmd.Start(); err != nil {
			cancel()
			for _, c := range cmds[:i] {
				c.Wait()
			}
			t.Fatalf("starting process %d: %v", i, err)
		}
		cmds[i] = cmd
	}
	var wg sync.WaitGroup
	for i, cmd := range cmds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := cmd.Wait()
			res[i].stdout, res[i].stderr = outs[i][0].String(), outs[i][1].String()
			if ee, ok := err.(*exec.ExitError); ok {
				res[i].status = ee.ExitCode()
			} else if err != nil {
				res[i].status = -1
			}
			if res[i].status != 0 {
				cancel() // one failure ends the job, as a launcher would
			}
		}()
	}
	wg.Wait()
	if ctx.Err() == context.DeadlineExceeded {
		t.Fatalf("%v did not finish within %v: %s", argv, limit, dump(res))
	}
	return res
}

func dump(res []result) string {
	var b strings.Builder
	for i, r := range res {
		fmt.Fprintf(&b, "\n--- process %d: status %d\nstdout:\n%s\nstderr:\n%s", i, r.status, r.stdout, r.stderr)
	}
	return b.String()
}

// allPass fails unless every process exited 0 and one of them printed want.
func allPass(t *testing.T, res []result, want string) {
	t.Helper()
	found := false
	for _, r := range res {
		if r.status != 0 {
			t.Fatalf("a process failed: %s", dump(res))
		}
		found = found || strings.Contains(r.stdout, want)
	}
	if !found {
		t.Fatalf("no process printed %q: %s", want, dump(res))
	}
}

// freePortPair returns a port p such that p and p+1 were free just now (torchrun's MASTER_PORT
// and the rendezvous port above it).
func freePortPair(t *testing.T) int {
	t.Helper()
	for range 50 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		p := ln.Addr().(*net.TCPAddr).Port
		ln2, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p+1))
		ln.Close()
		if err == nil {
			ln2.Close()
			return p
		}
	}
	t.Fatal("no two adjacent free ports")
	return 0
}

// TestTorchrunContract: 4 processes with the variables torchrun sets (RANK, WORLD_SIZE,
// LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT, TORCHELASTIC_RUN_ID) run the ring.
func TestTorchrunContract(t *testing.T) {
	for _, tr := range transports(t) {
		t.Run(transportName(tr), func(t *testing.T) {
			port := freePortPair(t)
			var envs [][]string
			for r := 0; r < 4; r++ {
				envs = append(envs, []string{"RANK=" + strconv.Itoa(r), "WORLD_SIZE=4", "LOCAL_RANK=" + strconv.Itoa(r),
					"LOCAL_WORLD_SIZE=4", "GROUP_RANK=0", "MASTER_ADDR=127.0.0.1", "MASTER_PORT=" + strconv.Itoa(port),
					"TORCHELASTIC_RUN_ID=" + t.Name()})
			}
			res := spawn(t, 2*time.Minute, envs, append(cleanLauncherEnv(), transportEnv(tr)...), filepath.Join(bin, "ring"), "-laps", "20")
			allPass(t, res, "20 laps of 4 PEs")
		})
	}
}

// slurmEnv is what srun sets for task r of n on one node (seen from Debian's slurm-wlm 22.05:
// `srun -n 2 env`), for job id job.
func slurmEnv(r, n, job int, node string) []string {
	return []string{
		"SLURM_PROCID=" + strconv.Itoa(r), "SLURM_NTASKS=" + strconv.Itoa(n), "SLURM_NPROCS=" + strconv.Itoa(n),
		"SLURM_LOCALID=" + strconv.Itoa(r), "SLURM_NODEID=0", "SLURM_NNODES=1", "SLURM_TASKS_PER_NODE=" + strconv.Itoa(n),
		"SLURM_JOB_ID=" + strconv.Itoa(job), "SLURM_JOBID=" + strconv.Itoa(job), "SLURM_STEP_ID=0", "SLURM_STEPID=0",
		"SLURM_JOB_NODELIST=" + node, "SLURM_NODELIST=" + node, "SLURM_STEP_NODELIST=" + node,
	}
}

// cleanLauncherEnv blanks the variables of launchers this test may itself run under, so that a
// contract test sees only the launcher it imitates.
func cleanLauncherEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "ROX_") && k != "ROX_TIMEOUT" && k != "ROX_DEBUG" || strings.HasPrefix(k, "OMPI_") ||
			strings.HasPrefix(k, "PMI_") || strings.HasPrefix(k, "PMIX_") || strings.HasPrefix(k, "SLURM_") ||
			k == "RANK" || k == "WORLD_SIZE" || k == "LOCAL_RANK" || k == "MASTER_ADDR" || k == "MASTER_PORT" {
			env = append(env, k+"=")
		}
	}
	return env
}

// TestSlurmContract: 4 processes with the variables srun sets run the ring; the rendezvous is on
// the first node of SLURM_JOB_NODELIST at a port derived from SLURM_JOB_ID.
func TestSlurmContract(t *testing.T) {
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := net.LookupHost(host); err != nil {
		t.Skipf("this machine's name %q does not resolve (%v): Slurm's node list could not name it", host, err)
	}
	for _, tr := range transports(t) {
		t.Run(transportName(tr), func(t *testing.T) {
			job := 100000 + rand.IntN(800000)
			var envs [][]string
			for r := 0; r < 4; r++ {
				envs = append(envs, slurmEnv(r, 4, job, host))
			}
			res := spawn(t, 2*time.Minute, envs, append(cleanLauncherEnv(), transportEnv(tr)...), filepath.Join(bin, "ring"), "-laps", "20")
			allPass(t, res, "20 laps of 4 PEs")
		})
	}
}

// TestSrun: a real `srun -n 4` on a one-node Slurm (munged, slurmctld, slurmd) that test/slurm
// starts for the test in a temporary directory and stops after it. It skips, saying why, only
// where Slurm cannot run: not root, or slurm-wlm/munge not installed (test/run.sh installs them).
func TestSrun(t *testing.T) {
	c, err := slurm.Start(t)
	if errors.Is(err, slurm.ErrUnavailable) {
		t.Skipf("%v; TestSlurmContract covers the environment srun sets", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	srun, err := exec.LookPath("srun")
	if err != nil {
		t.Fatalf("Slurm is up but srun is not on PATH: %v", err)
	}
	for _, tr := range transports(t) {
		t.Run(transportName(tr), func(t *testing.T) {
			// --overcommit: 4 tasks on however few CPUs the node has.
			r := run(t, 2*time.Minute, append(c.Vars(), transportEnv(tr)...), srun, "-n", "4", "--overcommit", "--time", "2", filepath.Join(bin, "ring"), "-laps", "20")
			mustPass(t, r, "20 laps of 4 PEs")
		})
	}
}
