// Package slurm starts a real one-node Slurm cluster (munged, slurmctld, slurmd) for a test and
// stops it, so that tests can run `srun` as users do. Everything the cluster needs lives in the
// test's temporary directory: its slurm.conf (reached through SLURM_CONF), its munge key and
// socket, its spool, state and logs, on ports picked free for it. Nothing under /etc is read or
// written, so it runs beside a Slurm that the machine may already have, and two tests may each
// start one.
//
//	c, err := slurm.Start(t)
//	if errors.Is(err, slurm.ErrUnavailable) { t.Skip(err) }
//	if err != nil { t.Fatal(err) }
//	out, err := c.Srun("-n", "4", prog).CombinedOutput()
//
// Start registers Stop with t.Cleanup; Stop ends the daemons and every process the cluster
// started (job steps, tasks), so none outlives the test.
package slurm

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// ErrUnavailable says Slurm cannot run here (not root, or its programs are not installed): a
// reason to skip, not a failure.
var ErrUnavailable = errors.New("slurm: a one-node cluster cannot run here")

// Programs the cluster needs; Debian has them in slurm-wlm, slurm-client and munge.
var programs = []string{"munged", "slurmctld", "slurmd", "srun", "sinfo"}

// Cluster is a running one-node Slurm.
type Cluster struct {
	Dir  string // state directory: slurm.conf, munge key and socket, spool, logs
	Conf string // path of its slurm.conf
	Node string // the one node's name (this machine's short host name)
	CPUs int    // the node's CPUs as slurm.conf declares them

	marker  string // ROX_SLURM_CLUSTER=Dir: every process of the cluster carries it
	daemons []*exec.Cmd
	exited  []chan struct{}
	stopped bool
}

// Option changes the cluster's configuration.
type Option func(*config)

type config struct {
	lines   []string
	timeout time.Duration
}

// Conf adds lines to slurm.conf (a later line overrides an earlier key, e.g. "MpiDefault=pmix").
func Conf(lines ...string) Option { return func(c *config) { c.lines = append(c.lines, lines...) } }

// Timeout bounds how long Start waits for the node to come up (default 60 s).
func Timeout(d time.Duration) Option { return func(c *config) { c.timeout = d } }

// Start starts munged, slurmctld and slurmd in a temporary directory of t and waits until the
// node is idle. It returns an error wrapping ErrUnavailable where Slurm cannot run, and any other
// error (with the daemons' logs) when it can but did not come up; t.Cleanup stops it.
func Start(t testing.TB, opts ...Option) (*Cluster, error) {
	t.Helper()
	cfg := config{timeout: 60 * time.Second}
	for _, o := range opts {
		o(&cfg)
	}
	if runtime.GOOS != "linux" {
		return nil, fmt.Errorf("%w: %s is not linux", ErrUnavailable, runtime.GOOS)
	}
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("%w: slurmd needs root to start job steps", ErrUnavailable)
	}
	for _, p := range programs {
		if _, err := exec.LookPath(p); err != nil {
			return nil, fmt.Errorf("%w: %s is not installed (Debian: apt-get install slurm-wlm munge)", ErrUnavailable, p)
		}
	}
	host, err := os.Hostname()
	if err != nil {
		return nil, err
	}
	host, _, _ = strings.Cut(host, ".")
	dir, err := os.MkdirTemp("", "roxslurm-")
	if err != nil {
		return nil, err
	}
	// munged checks that no one else can write to the directories of its key and socket.
	if err := os.Chmod(dir, 0o700); err != nil {
		return nil, err
	}
	c := &Cluster{Dir: dir, Conf: filepath.Join(dir, "slurm.conf"), Node: host, CPUs: runtime.NumCPU(), marker: "ROX_SLURM_CLUSTER=" + dir}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Errorf("slurm: %v", err)
		}
		if !t.Failed() {
			os.RemoveAll(dir)
		} else {
			t.Logf("slurm: logs kept in %s", dir)
		}
	})
	if err := c.start(cfg); err != nil {
		return nil, fmt.Errorf("slurm: the one-node cluster in %s did not come up: %w\n%s", dir, err, c.Logs())
	}
	return c, nil
}

func (c *Cluster) path(name string) string { return filepath.Join(c.Dir, name) }

func (c *Cluster) start(cfg config) error {
	for _, d := range []string{"spool", "state"} {
		if err := os.Mkdir(c.path(d), 0o700); err != nil {
			return err
		}
	}
	key := make([]byte, 1024)
	if _, err := rand.Read(key); err != nil {
		return err
	}
	if err := os.WriteFile(c.path("munge.key"), key, 0o400); err != nil {
		return err
	}
	ports, err := freePorts(2)
	if err != nil {
		return err
	}
	conf := []string{
		"ClusterName=roxtest",
		fmt.Sprintf("SlurmctldHost=%s(127.0.0.1)", c.Node),
		"SlurmctldPort=" + strconv.Itoa(ports[0]),
		"SlurmdPort=" + strconv.Itoa(ports[1]),
		"AuthType=auth/munge",
		"CredType=cred/munge",
		"AuthInfo=socket=" + c.path("munge.socket"),
		"SlurmUser=root",
		"SlurmdUser=root",
		// No cgroups in containers and CI machines: track tasks by their parent, bind nothing.
		"ProctrackType=proctrack/linuxproc",
		"TaskPlugin=task/none",
		"JobAcctGatherType=jobacct_gather/none",
		"SelectType=select/cons_tres",
		"SelectTypeParameters=CR_CPU",
		"SchedulerType=sched/builtin",
		"MpiDefault=none",
		"ReturnToService=2",
		"SlurmctldPidFile=" + c.path("slurmctld.pid"),
		"SlurmdPidFile=" + c.path("slurmd.pid"),
		"SlurmdSpoolDir=" + c.path("spool"),
		"StateSaveLocation=" + c.path("state"),
		"SlurmctldLogFile=" + c.path("slurmctld.log"),
		"SlurmdLogFile=" + c.path("slurmd.log"),
		"SlurmctldDebug=info",
		"SlurmdDebug=info",
		fmt.Sprintf("NodeName=%s NodeAddr=127.0.0.1 CPUs=%d State=UNKNOWN", c.Node, c.CPUs),
		fmt.Sprintf("PartitionName=debug Nodes=%s Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE", c.Node),
	}
	conf = append(conf, cfg.lines...)
	if err := os.WriteFile(c.Conf, []byte(strings.Join(conf, "\n")+"\n"), 0o644); err != nil {
		return err
	}
	if err := c.daemon("munged", "--foreground", "--force",
		"--socket="+c.path("munge.socket"), "--key-file="+c.path("munge.key"),
		"--pid-file="+c.path("munged.pid"), "--log-file="+c.path("munged.log"),
		"--seed-file="+c.path("munged.seed")); err != nil {
		return err
	}
	if err := c.waitFor(cfg.timeout, "munged's socket", func() bool {
		_, err := os.Stat(c.path("munge.socket"))
		return err == nil
	}); err != nil {
		return err
	}
	// -D: in the foreground, so that Stop ends the process it started; -i: no saved state.
	if err := c.daemon("slurmctld", "-D", "-i", "-f", c.Conf); err != nil {
		return err
	}
	if err := c.daemon("slurmd", "-D", "-f", c.Conf, "-N", c.Node); err != nil {
		return err
	}
	var last string
	return c.waitFor(cfg.timeout, "the node to be idle", func() bool {
		out, _ := c.Command("sinfo", "-h", "-o", "%t").CombinedOutput()
		last = strings.TrimSpace(string(out))
		return strings.Contains(last, "idle")
	})
}

// daemon starts a cluster process, logging its stdout and stderr to NAME.out.
func (c *Cluster) daemon(name string, args ...string) error {
	out, err := os.Create(c.path(name + ".out"))
	if err != nil {
		return err
	}
	defer out.Close()
	cmd := exec.Command(name, args...)
	cmd.Env = c.Env()
	cmd.Stdout, cmd.Stderr = out, out
	cmd.Dir = c.Dir
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", name, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	c.daemons = append(c.daemons, cmd)
	c.exited = append(c.exited, done)
	return nil
}

// waitFor polls ok until it holds, a daemon exits, or timeout passes.
func (c *Cluster) waitFor(timeout time.Duration, what string, ok func() bool) error {
	deadline := time.Now().Add(timeout)
	for {
		if ok() {
			return nil
		}
		for i, done := range c.exited {
			select {
			case <-done:
				return fmt.Errorf("%s exited (%v) while waiting for %s", c.daemons[i].Path, c.daemons[i].ProcessState, what)
			default:
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no %s after %v", what, timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Env is the environment a Slurm client of this cluster needs: this process's, with SLURM_CONF
// set to the cluster's and the marker by which Stop finds the cluster's processes.
func (c *Cluster) Env() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SLURM_") && !strings.HasPrefix(kv, "ROX_SLURM_CLUSTER=") {
			env = append(env, kv)
		}
	}
	return append(env, c.Vars()...)
}

// Vars are the variables Env adds, for a caller that builds its own environment (later entries
// of an exec.Cmd's Env win).
func (c *Cluster) Vars() []string { return []string{"SLURM_CONF=" + c.Conf, c.marker} }

// Command returns a Slurm client command (srun, sinfo, scontrol, squeue...) for this cluster.
func (c *Cluster) Command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.Env = c.Env()
	return cmd
}

// Srun returns `srun args...` for this cluster; the caller runs it (Output, CombinedOutput...).
func (c *Cluster) Srun(args ...string) *exec.Cmd { return c.Command("srun", args...) }

// SrunContext is Srun bounded by ctx: when ctx ends, srun is killed (and Stop ends its tasks).
func (c *Cluster) SrunContext(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "srun", args...)
	cmd.Env = c.Env()
	return cmd
}

// Logs returns the daemons' log files, for a failure message.
func (c *Cluster) Logs() string {
	var b strings.Builder
	for _, n := range []string{"munged.log", "munged.out", "slurmctld.log", "slurmctld.out", "slurmd.log", "slurmd.out"} {
		data, err := os.ReadFile(c.path(n))
		if err != nil || len(bytes.TrimSpace(data)) == 0 {
			continue
		}
		lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
		if len(lines) > 30 {
			lines = lines[len(lines)-30:]
		}
		fmt.Fprintf(&b, "--- %s\n%s\n", c.path(n), strings.Join(lines, "\n"))
	}
	return b.String()
}

// Stop ends the cluster: SIGTERM to every process that carries its marker (job tasks and
// slurmstepd first, then slurmd, slurmctld, munged), SIGKILL to what is left after 10 s. It
// returns an error naming any process that survived SIGKILL. Calling it again does nothing.
func (c *Cluster) Stop() error {
	if c.stopped {
		return nil
	}
	c.stopped = true
	daemon := map[int]bool{}
	for _, d := range c.daemons {
		daemon[d.Process.Pid] = true
	}
	// Steps and tasks first, so that slurmd does not see them die and report failures.
	for _, pid := range c.processes() {
		if !daemon[pid] {
			_ = syscall.Kill(pid, syscall.SIGTERM)
		}
	}
	for i := len(c.daemons) - 1; i >= 0; i-- {
		_ = c.daemons[i].Process.Signal(syscall.SIGTERM)
		select {
		case <-c.exited[i]:
		case <-time.After(10 * time.Second):
			_ = c.daemons[i].Process.Kill()
			<-c.exited[i]
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		left := c.processes()
		if len(left) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("processes of the cluster in %s survived SIGKILL: %v", c.Dir, left)
		}
		for _, pid := range left {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// processes returns the PIDs of live processes whose environment carries the cluster's marker:
// its daemons, slurmstepd, and the tasks of its jobs (slurmd passes its environment on).
func (c *Cluster) processes() []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	marker := []byte(c.marker + "\x00")
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil || !bytes.Contains(append(env, 0), marker) {
			continue
		}
		if st, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat")); err == nil {
			// A zombie has no environment left to read, but skip one that is already dead.
			if f := strings.Fields(string(st[bytes.LastIndexByte(st, ')')+1:])); len(f) > 0 && f[0] == "Z" {
				continue
			}
		}
		pids = append(pids, pid)
	}
	return pids
}

// freePorts returns n TCP ports that were free a moment ago.
func freePorts(n int) ([]int, error) {
	var ports []int
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for len(ports) < n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
