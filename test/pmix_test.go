package test

// Jobs bootstrapped through the launcher's PMIx server (internal/bootstrap/pmix.go): Open MPI's
// mpirun on one node and across two network-namespace hosts, and srun --mpi=pmix, all with no
// ROX_* variable set; the job token is random, not the one anyone could derive from the job id;
// an outsider who derives it is refused; a PE 0 that never publishes fails the others within
// ROX_TIMEOUT naming it; a missing libpmix fails Init only under a PMIx server; a launcher
// without PMIx still takes the old path.

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/roxamen/roxamen/test/slurm"

	"github.com/roxamen/roxamen/internal/bootstrap"
	"github.com/roxamen/roxamen/internal/pmix"
	"github.com/roxamen/roxamen/internal/testkit"
	"github.com/roxamen/roxamen/test/netns"
)

// needMpirunPMIx returns mpirun's path, skipping (failing under ROX_TEST_PMIX, where CI has
// installed Open MPI and libpmix2) when mpirun or libpmix is missing.
func needMpirunPMIx(t *testing.T) string {
	t.Helper()
	skip := func(format string, args ...any) { t.Helper(); testkit.Need(t, "ROX_TEST_PMIX", format, args...) }
	if err := pmix.Probe(); err != nil {
		skip("no PMIx here: %v", err)
	}
	mpirun, err := exec.LookPath("mpirun")
	if err != nil {
		skip("no mpirun (Debian: apt-get install openmpi-bin)")
	}
	return mpirun
}

// noRoxEnv is this process's environment without any ROX_* variable and without the variables
// of a launcher the test itself may run under, plus extra: what a user's shell has.
func noRoxEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "ROX_") || strings.HasPrefix(k, "OMPI_") || strings.HasPrefix(k, "PMIX_") ||
			strings.HasPrefix(k, "PMI_") || strings.HasPrefix(k, "SLURM_") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, extra...)
}

// runIn is run (launchers_test.go) with exactly env as the environment.
func runIn(t *testing.T, limit time.Duration, env []string, name string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var out, errb strings.Builder
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

// mpirunBase is the start of every mpirun command line here.
func mpirunBase() []string {
	args := []string{"--oversubscribe"}
	if os.Geteuid() == 0 {
		args = append([]string{"--allow-run-as-root"}, args...)
	}
	return args
}

// pmixLine is the ROX_DEBUG line a PE prints once PMIx gave it the rendezvous.
var pmixLine = regexp.MustCompile(`roxamen: PE (\d+): bootstrap through PMIx \((\S+), namespace (\S+), rank \d+ of (\d+), node (\d+) "([^"]*)"\): rendezvous (\S+) \(published (\S+)\), job token sha256:([0-9a-f]+)`)

type pmixInfo struct {
	pe                 string
	namespace, node    string
	addr, fingerprint  string
	published, nodeID  string
	server, npesString string
}

func pmixLines(out string) []pmixInfo {
	var infos []pmixInfo
	for _, m := range pmixLine.FindAllStringSubmatch(out, -1) {
		infos = append(infos, pmixInfo{pe: m[1], server: m[2], namespace: m[3], npesString: m[4], nodeID: m[5],
			node: m[6], addr: m[7], published: m[8], fingerprint: m[9]})
	}
	return infos
}

// derivedToken is the token Roxamen used to derive from a launcher's job id before PMIx
// (internal/bootstrap's deriveToken): what anyone who can see the job id can compute.
func derivedToken(source, job string) string {
	sum := sha256.Sum256([]byte("roxamen-bootstrap\x00" + source + "\x00" + job))
	return hex.EncodeToString(sum[:16])
}

// fingerprint is how ROX_DEBUG shows a token: the first 8 bytes of its SHA-256.
func fingerprint(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:8])
}

// checkToken: every one of npes PEs says it bootstrapped through PMIx, all with one token, which
// is not the one derived from the job id (derive maps the PMIx namespace to it). It returns
// the distinct node names the PEs reported.
func checkToken(t *testing.T, r result, npes int, derive func(namespace string) string) map[string]bool {
	t.Helper()
	infos := pmixLines(r.stderr + r.stdout)
	if len(infos) != npes {
		t.Fatalf("%d of %d PEs say they bootstrapped through PMIx\nstdout:\n%s\nstderr:\n%s", len(infos), npes, r.stdout, r.stderr)
	}
	nodes := map[string]bool{}
	for _, in := range infos {
		if in.fingerprint != infos[0].fingerprint || in.namespace != infos[0].namespace {
			t.Fatalf("PEs disagree on the job token or namespace: %+v", infos)
		}
		nodes[in.node] = true
	}
	old := derive(infos[0].namespace)
	if fingerprint(old) == infos[0].fingerprint {
		t.Fatalf("the job token is the one derived from the job id %q (sha256:%s)", infos[0].namespace, infos[0].fingerprint)
	}
	t.Logf("namespace %s: job token sha256:%s, the derived one would be sha256:%s; nodes %v",
		infos[0].namespace, infos[0].fingerprint, fingerprint(old), nodes)
	return nodes
}

func ompiDerived(ns string) string { return derivedToken("ompi", ns) }

// pmixSuite runs ring, counter and the API scenario with launch's command line and no ROX_*
// variable (extra: what the launcher itself needs), then the ring again with ROX_DEBUG=1 to see
// the token; it returns the nodes seen.
func pmixSuite(t *testing.T, npes int, extra []string, launch func(debug bool, prog string, args ...string) (string, []string),
	derive func(string) string) map[string]bool {
	t.Helper()
	for _, sc := range []struct {
		name, want string
		args       []string
	}{
		{"ring", fmt.Sprintf("20 laps of %d PEs", npes), []string{filepath.Join(bin, "ring"), "-laps", "20"}},
		{"counter", "every ticket once: ok", []string{filepath.Join(bin, "counter"), "-adds", "200"}},
		{"api", fmt.Sprintf("api: ok on %d PEs", npes), []string{filepath.Join(bin, "testprog"), "api"}},
	} {
		t.Run(sc.name, func(t *testing.T) {
			name, args := launch(false, sc.args[0], sc.args[1:]...)
			r := runIn(t, 3*time.Minute, noRoxEnv(extra...), name, args...)
			mustPass(t, r, sc.want)
			if strings.Contains(r.stderr, "ROX_BOOTSTRAP") {
				t.Errorf("the job mentions ROX_BOOTSTRAP:\n%s", r.stderr)
			}
		})
	}
	var nodes map[string]bool
	t.Run("token", func(t *testing.T) {
		name, args := launch(true, filepath.Join(bin, "ring"), "-laps", "5")
		r := runIn(t, 2*time.Minute, noRoxEnv(append(extra, "ROX_DEBUG=1")...), name, args...)
		mustPass(t, r, fmt.Sprintf("5 laps of %d PEs", npes))
		nodes = checkToken(t, r, npes, derive)
	})
	return nodes
}

// TestPMIxMpirun: `mpirun -np 4` on this machine, nothing else.
func TestPMIxMpirun(t *testing.T) {
	mpirun := needMpirunPMIx(t)
	pmixSuite(t, 4, nil, func(debug bool, prog string, args ...string) (string, []string) {
		a := append(mpirunBase(), "-np", "4")
		if debug {
			a = append(a, "-x", "ROX_DEBUG=1")
		}
		return mpirun, append(append(a, prog), args...)
	}, ompiDerived)
}

// rshAgent writes the remote shell Open MPI starts its daemons with: `AGENT HOST COMMAND...`
// runs COMMAND in network namespace HOST, with HOST as its host name in a UTS namespace of its
// own (Open MPI names its session directories after the host name: two daemons that share one
// race for the same directories and fail now and then).
func rshAgent(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "netns-rsh")
	script := "#!/bin/sh\nh=$1; shift\nexec ip netns exec \"$h\" unshare --uts sh -c \"hostname $h && $*\"\n"
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestPMIxMpirunHosts: `mpirun -np 4 --host NS1:2,NS2:2` with Open MPI's daemons started in two
// network namespaces (plm_rsh_agent), mpirun itself outside them on the bridge: PE 0 publishes
// an address the other host reaches, with no ROX_BOOTSTRAP and no port convention.
func TestPMIxMpirunHosts(t *testing.T) {
	mpirun := needMpirunPMIx(t)
	if err := netns.Available(); err != nil {
		t.Skip(err)
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("no unshare(1)")
	}
	nt, err := netns.New(2, netns.Options{Gateway: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nt.Close() })
	agent := rshAgent(t)
	nodes := pmixSuite(t, 4, nil, func(debug bool, prog string, args ...string) (string, []string) {
		a := append(mpirunBase(), "--mca", "plm_rsh_agent", agent,
			"--host", nt.Hosts[0].Name+":2,"+nt.Hosts[1].Name+":2", "-np", "4")
		if debug {
			a = append(a, "-x", "ROX_DEBUG=1")
		}
		return mpirun, append(append(a, prog), args...)
	}, ompiDerived)
	if len(nodes) != 2 || !nodes[nt.Hosts[0].Name] || !nodes[nt.Hosts[1].Name] {
		t.Errorf("PEs ran on nodes %v, want %s and %s", nodes, nt.Hosts[0].Name, nt.Hosts[1].Name)
	}
}

// TestPMIxOutsiderRefused: someone who knows the job id (the PMIx namespace, visible in ps and
// the launcher's output) and computes the token Roxamen used to derive from it is refused by
// the job's rendezvous, which logs it; the job goes on.
func TestPMIxOutsiderRefused(t *testing.T) {
	mpirun := needMpirunPMIx(t)
	release := filepath.Join(t.TempDir(), "release")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	args := append(mpirunBase(), "-np", "2", "-x", "ROX_DEBUG=1", filepath.Join(bin, "testprog"), "hold", release)
	cmd := exec.CommandContext(ctx, mpirun, args...)
	cmd.Env = noRoxEnv("ROX_DEBUG=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var stdout strings.Builder
	cmd.Stdout = &stdout
	pipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var (
		mu     sync.Mutex
		stderr strings.Builder
	)
	pe0 := make(chan pmixInfo, 1)
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			mu.Lock()
			stderr.WriteString(sc.Text() + "\n")
			mu.Unlock()
			for _, in := range pmixLines(sc.Text()) {
				if in.pe == "0" {
					pe0 <- in
				}
			}
		}
		io.Copy(io.Discard, pipe)
	}()
	finish := func() string {
		os.WriteFile(release, nil, 0o644)
		<-scanned
		cmd.Wait()
		mu.Lock()
		defer mu.Unlock()
		return stderr.String()
	}
	var in pmixInfo
	select {
	case in = <-pe0:
	case <-scanned:
		t.Fatalf("the job ended before PE 0 said where its rendezvous is:\n%s", finish())
	case <-time.After(time.Minute):
		t.Fatalf("PE 0 never said where its rendezvous is:\n%s", finish())
	}
	outsider := bootstrap.Rank{PE: 1, NPEs: 2, LocalPE: -1, LocalNPEs: -1, Source: "ompi", Addr: in.addr,
		Token: derivedToken("ompi", in.namespace)}
	c, err := bootstrap.Dial(ctx, outsider, 5*time.Second)
	if err == nil {
		c.Close()
		t.Fatalf("an outsider with the token derived from namespace %s joined the job at %s", in.namespace, in.addr)
	}
	if !errors.Is(err, bootstrap.ErrRefused) {
		t.Errorf("the outsider's Dial: %v; want ErrRefused", err)
	}
	log := finish()
	if !strings.Contains(stdout.String(), "hold: ok on 2 PEs") {
		t.Fatalf("the job did not finish well after the outsider's attempt\nstdout:\n%s\nstderr:\n%s", stdout.String(), log)
	}
	if !strings.Contains(log, "refused connection from") || !strings.Contains(log, "bad job token") {
		t.Fatalf("the rendezvous did not log the refusal:\n%s", log)
	}
	t.Logf("outsider: %v", err)
}

// TestPMIxPEMissing: one rank of an mpirun job is not a Roxamen program: rank 0 exits at once
// (it never publishes the rendezvous), or rank 3 sleeps (it never reaches the fence). The other
// PEs fail within ROX_TIMEOUT naming it, instead of waiting in the fence for ever (mpirun would
// wait with them).
func TestPMIxPEMissing(t *testing.T) {
	mpirun := needMpirunPMIx(t)
	ring := []string{"-x", "ROX_TIMEOUT=3s", filepath.Join(bin, "ring"), "-laps", "5"}
	for _, tc := range []struct {
		name, want string
		apps       [][]string
	}{
		{"PE 0 exits", "PE 0 never published the rendezvous through PMIx", [][]string{{"-np", "1", "true"}, append([]string{"-np", "3"}, ring...)}},
		{"PE 3 sleeps", "PEs [3] never reached the PMIx fence", [][]string{append([]string{"-np", "3"}, ring...), {"-np", "1", "sleep", "60"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append(mpirunBase(), tc.apps[0]...)
			args = append(append(args, ":"), tc.apps[1]...)
			r := runIn(t, 2*time.Minute, noRoxEnv(), mpirun, args...)
			out := r.stderr + r.stdout
			if r.status == 0 || !strings.Contains(out, tc.want) || !strings.Contains(out, "PMIx_Fence") {
				t.Fatalf("status %d; want a failure saying %q and naming PMIx_Fence\nstdout:\n%s\nstderr:\n%s", r.status, tc.want, r.stdout, r.stderr)
			}
			t.Logf("failed after %v (ROX_TIMEOUT=3s; noisy machine)", r.took.Round(time.Millisecond))
			assertNoProcesses(t, "ring")
		})
	}
}

// TestPMIxInitFails: a PMIx call that fails is an Init error naming the call and PMIx's status
// string. Here PMIx_Init itself: the variables say a server listens where none does (what a
// process started from a shell that inherited another job's variables sees).
func TestPMIxInitFails(t *testing.T) {
	needMpirunPMIx(t)
	r := runIn(t, time.Minute, noRoxEnv("PMIX_SERVER_URI41=123.0;tcp4://127.0.0.1:1", "PMIX_NAMESPACE=123", "PMIX_RANK=0",
		"ROX_TIMEOUT=10s"), filepath.Join(bin, "ring"), "-laps", "1")
	out := r.stderr + r.stdout
	if r.status == 0 || !strings.Contains(out, "Init") || !strings.Contains(out, "PMIx_Init: UNREACHABLE") ||
		!strings.Contains(out, "PMIX_SERVER_URI41") {
		t.Fatalf("status %d; want an Init error naming PMIx_Init, PMIx's status and the server variable\n%s", r.status, out)
	}
}

// libpmixPath is where the dynamic loader finds libpmix.so.2, "" if nowhere known.
func libpmixPath() string {
	for _, dir := range []string{"/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib"} {
		if p, err := filepath.EvalSymlinks(filepath.Join(dir, pmix.Library)); err == nil {
			return p
		}
	}
	return ""
}

// TestPMIxMissingLibrary: with libpmix.so.2 hidden from the PEs only (each runs in a private
// mount namespace with an empty file bound over it; mpirun keeps its own), Init under mpirun
// fails naming the PMIx server variable and the library; outside any launcher the same hidden
// library changes nothing.
func TestPMIxMissingLibrary(t *testing.T) {
	mpirun := needMpirunPMIx(t)
	lib := libpmixPath()
	if lib == "" || os.Geteuid() != 0 {
		t.Skipf("hiding %s needs root and the library's path (found %q)", pmix.Library, lib)
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("no unshare(1)")
	}
	hidden := func(prog ...string) []string {
		return []string{"unshare", "--mount", "--propagation", "private", "sh", "-c",
			fmt.Sprintf("mount --bind /dev/null %s && exec %s", lib, strings.Join(prog, " "))}
	}
	args := append(append(mpirunBase(), "-np", "2"), hidden(filepath.Join(bin, "ring"), "-laps", "1")...)
	r := runIn(t, 2*time.Minute, noRoxEnv("ROX_TIMEOUT=10s"), mpirun, args...)
	out := r.stderr + r.stdout
	if strings.Contains(out, "mount:") {
		t.Skipf("cannot hide the library here: %s", out)
	}
	if r.status == 0 || !strings.Contains(out, "Init") || !strings.Contains(out, "PMIX_SERVER_URI") || !strings.Contains(out, pmix.Library) {
		t.Fatalf("status %d; want Init to fail naming the PMIx server variable and %s\n%s", r.status, pmix.Library, out)
	}
	alone := hidden(filepath.Join(bin, "ring"), "-laps", "1")
	r = runIn(t, time.Minute, noRoxEnv(), alone[0], alone[1:]...)
	mustPass(t, r, "1 laps of 1 PEs")
}

// pmixSlurm starts a one-node Slurm for the test unless one is up, as TestSrun does, and stops
// it afterwards; it skips, saying why, where Slurm cannot run. It returns srun's path and the
// variables srun needs on top of a user's environment.
func pmixSlurm(t *testing.T) (string, []string) {
	t.Helper()
	c, err := slurm.Start(t)
	if errors.Is(err, slurm.ErrUnavailable) {
		t.Skipf("Slurm cannot run here: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	srun, err := exec.LookPath("srun")
	if err != nil {
		t.Fatalf("Slurm is up but srun is not on PATH: %v", err)
	}
	return srun, c.Vars()
}

// slurmDerived: the token Roxamen derived under Slurm from SLURM_JOB_ID.SLURM_STEP_ID, which
// the namespace "slurm.pmix.JOB.STEP" spells.
func slurmDerived(ns string) string {
	job, step, _ := strings.Cut(strings.TrimPrefix(ns, "slurm.pmix."), ".")
	return derivedToken("slurm", job+"."+step)
}

// TestPMIxSrun: `srun --mpi=pmix -n 4` on a one-node Slurm; and plain `srun -n 4` (no PMIx
// server) still takes the Slurm variables' path.
func TestPMIxSrun(t *testing.T) {
	needMpirunPMIx(t) // for libpmix; Slurm's mpi/pmix plugin loads the same library
	srun, slurmVars := pmixSlurm(t)
	list := exec.Command(srun, "--mpi=list")
	list.Env = noRoxEnv(slurmVars...)
	if out, err := list.CombinedOutput(); err != nil || !strings.Contains(string(out), "pmix") {
		t.Fatalf("this Slurm has no mpi/pmix plugin (srun --mpi=list: %v):\n%s", err, out)
	}
	pmixSuite(t, 4, slurmVars, func(debug bool, prog string, args ...string) (string, []string) {
		// --overcommit: 4 tasks on however few CPUs the node has.
		return srun, append([]string{"--mpi=pmix", "-n", "4", "--overcommit", "--time", "2", prog}, args...)
	}, slurmDerived)
	t.Run("without PMIx", func(t *testing.T) {
		r := runIn(t, 2*time.Minute, noRoxEnv(append(slurmVars, "ROX_DEBUG=1")...), srun, "--mpi=none", "-n", "4", "--overcommit", "--time", "2",
			filepath.Join(bin, "ring"), "-laps", "5")
		mustPass(t, r, "5 laps of 4 PEs")
		if infos := pmixLines(r.stderr); len(infos) != 0 {
			t.Fatalf("a job without a PMIx server bootstrapped through PMIx: %+v", infos)
		}
	})
}
