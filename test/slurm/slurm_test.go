package slurm

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// TestCluster starts a one-node cluster, runs a 2-task srun on it, and checks that Stop leaves
// no process of it behind.
func TestCluster(t *testing.T) {
	c, err := Start(t)
	if errors.Is(err, ErrUnavailable) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	out, err := c.Srun("-n", "2", "--overcommit", "--time", "1", "sh", "-c", `echo "task $SLURM_PROCID of $SLURM_NTASKS on $SLURM_JOB_NODELIST"`).CombinedOutput()
	if err != nil {
		t.Fatalf("srun: %v\n%s\n%s", err, out, c.Logs())
	}
	for _, want := range []string{"task 0 of 2 on " + c.Node, "task 1 of 2 on " + c.Node} {
		if !strings.Contains(string(out), want) {
			t.Errorf("srun printed %q, want a line %q", out, want)
		}
	}
	if len(c.processes()) < 3 {
		t.Errorf("found %d processes of the running cluster (%v), want munged, slurmctld and slurmd at least", len(c.processes()), c.processes())
	}
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	if left := c.processes(); len(left) > 0 {
		t.Fatalf("after Stop, processes of the cluster remain: %v", left)
	}
}

// TestStopEndsRunningJob: Stop while a job step runs ends the step's tasks too.
func TestStopEndsRunningJob(t *testing.T) {
	c, err := Start(t)
	if errors.Is(err, ErrUnavailable) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	srun := c.Srun("-n", "1", "--time", "2", "sh", "-c", "echo started; exec sleep 300")
	stdout, err := srun.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := srun.Start(); err != nil {
		t.Fatal(err)
	}
	defer srun.Wait()
	buf := make([]byte, 64)
	if n, err := stdout.Read(buf); err != nil || !strings.Contains(string(buf[:n]), "started") {
		t.Fatalf("the job's first output: %q, %v\n%s", buf[:n], err, c.Logs())
	}
	// The echo comes before the exec: the shell becomes sleep a moment after "started".
	sleeping := false
	for end := time.Now().Add(30 * time.Second); !sleeping && time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		for _, pid := range c.processes() {
			if comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); strings.TrimSpace(string(comm)) == "sleep" {
				sleeping = true
			}
		}
	}
	if !sleeping {
		t.Fatalf("the job's task is not among the cluster's processes %v", c.processes())
	}
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	if left := c.processes(); len(left) > 0 {
		t.Fatalf("after Stop, processes of the cluster remain: %v", left)
	}
}

// TestSrunPMIx: `srun --mpi=pmix` on the cluster gives each task a PMIx rank and server, which
// is what a PMIx client (Open MPI, or Roxamen's PMIx bootstrap) reads.
func TestSrunPMIx(t *testing.T) {
	c, err := Start(t)
	if errors.Is(err, ErrUnavailable) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if list, _ := c.Srun("--mpi=list").CombinedOutput(); !strings.Contains(string(list), "pmix") {
		t.Skipf("this Slurm has no PMIx plugin (srun --mpi=list: %s)", list)
	}
	out, err := c.Srun("--mpi=pmix", "-n", "2", "--overcommit", "--time", "1", "sh", "-c", `echo "rank=$PMIX_RANK server=${PMIX_SERVER_URI41:+yes}"`).CombinedOutput()
	if err != nil {
		t.Fatalf("srun --mpi=pmix: %v\n%s\n%s", err, out, c.Logs())
	}
	for _, want := range []string{"rank=0 server=yes", "rank=1 server=yes"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("srun --mpi=pmix printed %q, want a line %q", out, want)
		}
	}
}
