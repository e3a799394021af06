// Package launch starts an SPMD job: one process per PE, all in one process group, with the
// rendezvous service, output prefixing, signal forwarding, first-failure shutdown and a timeout.
// roxrun is its command-line face; `roxrun bench` and `roxrun litmus --run` use it too.
package launch

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/roxamen/roxamen/internal/bootstrap"
	"github.com/roxamen/roxamen/internal/env"
	"github.com/roxamen/roxamen/internal/mpslog"
)

// Host is a group of PEs started on one node.
type Host struct {
	Name string
	NPEs int
}

// Config describes a job.
type Config struct {
	NPEs   int      // total PEs; with Hosts, the sum of their counts
	Hosts  []Host   // empty: every PE on this node
	Rsh    []string // how to start a PE on a host: Rsh + host name + command (e.g. ssh, or ip netns exec)
	Argv   []string // program and arguments
	Env    []string // extra KEY=VALUE for every PE (on top of this process's environment)
	MPS    MPS      // one node's PEs sharing a GPU: a CUDA MPS daemon for the job (PlanMPS)
	Prefix bool     // prefix each output line with "[pe N] "
	// Timeout bounds the whole job (0: none).
	Timeout time.Duration
	// Grace is how long PEs get between SIGTERM and SIGKILL when the job stops early.
	Grace time.Duration
	// BindAddr is the host:port the rendezvous listens on ("127.0.0.1:0" by default; multi-host jobs
	// need an address every host can reach).
	BindAddr string
	Stdout   io.Writer
	Stderr   io.Writer
}

// ExitError is how a job failed: its root cause first, the PE that left the job first and how
// (its exit status or signal), or the job's own end (timeout, signal to roxrun).
type ExitError struct {
	PE   int    // the root cause's PE; -1 when the job itself was stopped
	Host string // the PE's host with --hosts
	// Status is the status roxrun exits with: the root cause's exit status, 128+signal when a
	// signal killed or stopped it, or GlobalExitCode of the status it gave GlobalExit.
	Status int
	Signal string // the signal that killed the root cause's PE, if any
	Reason string // what happened, when it is more than an exit status (timeout, GlobalExit, before Init)
	// Said is the root cause's own account: the last line it wrote to stderr (a panic's first
	// line, if it panicked), or "" if it wrote none.
	Said string
	// Collateral are the PEs that failed after the root cause, having learnt of it.
	Collateral []int
}

func (e *ExitError) Error() string {
	if e.PE < 0 {
		return "roxrun: " + e.Reason
	}
	return "roxrun: PE " + strconv.Itoa(e.PE) + e.where() + " " + e.how()
}

func (e *ExitError) where() string {
	if e.Host != "" {
		return " on " + e.Host
	}
	return ""
}

// how says how the PE ended: "exited with status 3", "was killed by signal SIGKILL".
func (e *ExitError) how() string {
	if e.Reason != "" {
		return e.Reason
	}
	if e.Signal != "" {
		return "was killed by signal " + e.Signal
	}
	return "exited with status " + strconv.Itoa(e.Status)
}

// GlobalExitCode is the exit code of a job ended by GlobalExit(status): status's low 8 bits, or 1
// when they are 0 for a nonzero status, so that no nonzero status ends a job with 0 (shmem's
// GlobalExit gives its process the same code).
func GlobalExitCode(status int) int {
	if c := status & 0xff; c != 0 || status == 0 {
		return c
	}
	return 1
}

// ExitStatus returns the status roxrun should exit with for err.
func ExitStatus(err error) int {
	var ee *ExitError
	if errors.As(err, &ee) {
		if ee.Status != 0 {
			return ee.Status
		}
		return 1
	}
	if err != nil {
		return 1
	}
	return 0
}

type pe struct {
	rank       int
	host       string
	cmd        *exec.Cmd
	outR, errR *os.File      // the read ends of the PE's stdout and stderr
	copied     chan struct{} // closed when both are drained (EOF, or closed by Run)
	exit       *ExitError    // how it ended; nil while it runs or when it exited 0
	done       bool
	stopped    bool // it ended after roxrun had begun to terminate the job
	// reaped is closed once cmd.Wait has returned, at reapedAt: a PE's exit is reported only
	// after its output, so this is when it ended as far as roxrun can tell.
	reaped   chan struct{}
	reapedAt time.Time
	// flowed is signalled (never blocking) each time a line of the PE's output is copied, so that
	// a wait for the rest of its output lasts while output still comes, not a fixed time.
	flowed chan struct{}
	last   lastWords // the end of its stderr, for roxrun's verdict on it
}

// lastWords keeps what a PE said last on stderr. In a job of hundreds of PEs that fail at once,
// the root cause's own message is one line among hundreds (unprefixed without --prefix): roxrun
// repeats it in its verdict, so that the verdict names the cause, not only the PE.
type lastWords struct {
	mu    sync.Mutex
	last  string // the last non-blank line
	panic string // the first line of a Go panic or fatal error: the trace after it names no cause
}

// lastWordsBytes bounds the line a verdict repeats.
const lastWordsBytes = 512

func (w *lastWords) add(line string) {
	line = strings.TrimRight(line, "\r\n")
	if strings.TrimSpace(line) == "" {
		return
	}
	if len(line) > lastWordsBytes {
		line = line[:lastWordsBytes] + "..."
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.last = line
	if w.panic == "" && (strings.HasPrefix(line, "panic: ") || strings.HasPrefix(line, "fatal error: ")) {
		w.panic = line
	}
}

// said is the line that best says why the PE ended: its panic, else its last line.
func (w *lastWords) said() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.panic != "" {
		return w.panic
	}
	return w.last
}

// Run starts the job and waits for it. It returns nil when every PE exits 0, whether or not it
// called Finalize (a PE that returns from main without Finalize while others still wait for it
// makes them fail, naming it), or an *ExitError naming the root cause first.
//
// A job ends when every PE has exited: their output is read to its end, or until none has come
// for the grace period (a background child may hold a PE's stdout forever; outputDrainMax at
// most), and whatever is left of the job's process group is killed.
func Run(ctx context.Context, cfg Config) error {
	if len(cfg.Argv) == 0 {
		return errors.New("roxrun: no program to run")
	}
	hosts := cfg.Hosts
	if len(hosts) == 0 {
		if cfg.NPEs < 1 {
			return fmt.Errorf("roxrun: -n %d: need at least one PE", cfg.NPEs)
		}
		hosts = []Host{{Name: "", NPEs: cfg.NPEs}}
	}
	total := 0
	for _, h := range hosts {
		if h.NPEs < 1 {
			return fmt.Errorf("roxrun: host %q: need at least one PE, got %d", h.Name, h.NPEs)
		}
		total += h.NPEs
	}
	if cfg.Stdout == nil {
		cfg.Stdout = os.Stdout
	}
	if cfg.Stderr == nil {
		cfg.Stderr = os.Stderr
	}
	if cfg.Grace == 0 {
		cfg.Grace = 3 * time.Second
	}
	bind := cfg.BindAddr
	if bind == "" {
		bind = "127.0.0.1:0"
	}
	token, err := newToken()
	if err != nil {
		return err
	}
	// Across hosts every PE and the rendezvous learn how many PEs each host runs (ROX_LAYOUT),
	// so that the bootstrap tree can span the hosts through their first PEs (bootstrap's hier.go).
	var layout []int
	if len(hosts) > 1 {
		for _, h := range hosts {
			layout = append(layout, h.NPEs)
		}
	}
	// The log of the MPS server the PEs use (the job's own, or one already running here) names
	// the client whose GPU fault ends every client's context: the verdict reads it.
	var mps *mpslog.Logs
	if cfg.MPS.Start && len(hosts) == 1 && hosts[0].Name == "" {
		mpsEnv, logDir, stop, err := startMPS(cfg.MPS)
		if err != nil {
			return err
		}
		defer func() {
			if err := stop(); err != nil {
				fmt.Fprintln(cfg.Stderr, err)
			}
		}()
		if env.Debugging(env.LevelInfo) {
			fmt.Fprintf(cfg.Stderr, "roxrun: CUDA MPS: %s\n", cfg.MPS.Why)
		}
		cfg.Env = append(append([]string{}, cfg.Env...), mpsEnv...)
		mps = mpslog.Since(logDir)
	} else if len(hosts) == 1 && hosts[0].Name == "" && MPSRunning(os.Getenv) {
		mps = mpslog.Since(mpslog.LogDir(os.Getenv))
	}
	srv, err := bootstrap.NewServerConfig(bind, total, token, bootstrap.Config{Layout: layout})
	if err != nil {
		return fmt.Errorf("roxrun: rendezvous: %w", err)
	}
	defer srv.Close()
	// roxrun reports every PE's exit to the rendezvous, so a lost connection waits for that report
	// and the other PEs learn how their peer ended.
	srv.AwaitExits(exitReportWait)

	if cfg.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cfg.Timeout)
		defer cancel()
	}

	flowed := make(chan struct{}, 1) // some PE's output was copied
	out := &lockedWriter{w: cfg.Stdout}
	errw := &lockedWriter{w: cfg.Stderr}
	oom := newOOMWatch()
	var pes []*pe
	var pgid int
	killAll := func(sig syscall.Signal) {
		for _, sig := range []syscall.Signal{sig, syscall.SIGCONT} {
			if pgid != 0 {
				_ = syscall.Kill(-pgid, sig)
			}
			for _, p := range pes {
				if !p.done && p.cmd.Process != nil {
					_ = p.cmd.Process.Signal(sig)
				}
			}
			if sig == syscall.SIGKILL {
				break
			}
			// A stopped PE acts on the signal only once it runs again.
		}
	}
	// closeOutput stops reading every PE's output once every PE's output has ended or none has
	// come for d: output already written is read however long that takes (a loaded machine may
	// take seconds for hundreds of PEs' last lines), a pipe that a PE's child holds open is not.
	closeOutput := func(d time.Duration) {
		until := time.Now().Add(outputDrainMax)
		for _, p := range pes {
			if !awaitOutput(p, d, until, flowed) {
				break
			}
		}
		for _, p := range pes {
			p.outR.Close()
			p.errR.Close()
			<-p.copied
		}
	}
	startTime := time.Now()
	rank := 0
	for hi, h := range hosts {
		for l := 0; l < h.NPEs; l++ {
			// The job's own variables, kept apart so that a remote start can pass them on.
			job := append(append([]string{}, cfg.Env...),
				"ROX_PE="+strconv.Itoa(rank),
				"ROX_NPES="+strconv.Itoa(total),
				"ROX_LOCAL_PE="+strconv.Itoa(l),
				"ROX_LOCAL_NPES="+strconv.Itoa(h.NPEs),
				"ROX_BOOTSTRAP="+token+"@"+srv.Addr(),
			)
			if layout != nil {
				job = append(job, "ROX_LAYOUT="+layoutString(layout))
			}
			if h.Name != "" {
				job = append(job, "ROX_NODE="+h.Name)
			} else if len(hosts) > 1 {
				job = append(job, "ROX_NODE=host"+strconv.Itoa(hi))
			}
			env := append(os.Environ(), job...)
			argv := cfg.Argv
			if h.Name != "" && len(cfg.Rsh) > 0 {
				// rsh agents do not forward the environment: the remote side gets, through env(1), the
				// caller's ROX_* and UCX_* settings and the job's variables (later ones win).
				remote := []string{"env"}
				for _, kv := range os.Environ() {
					if strings.HasPrefix(kv, "ROX_") || strings.HasPrefix(kv, "UCX_") {
						remote = append(remote, kv)
					}
				}
				argv = append(append(append(append([]string{}, cfg.Rsh...), h.Name), append(remote, job...)...), cfg.Argv...)
			}
			p, err := startPE(argv, env, rank, h.Name, pgid)
			if err != nil {
				killAll(syscall.SIGKILL)
				for _, q := range pes {
					_ = q.cmd.Wait()
				}
				closeOutput(0)
				return fmt.Errorf("roxrun: starting PE %d (%s): %w", rank, argv[0], err)
			}
			if pgid == 0 {
				pgid = p.cmd.Process.Pid
			}
			pes = append(pes, p)
			go func() { defer close(p.copied); copyAll(out, errw, p, cfg.Prefix, flowed) }()
			rank++
		}
	}

	if env.Debugging(env.LevelInfo) {
		// The first PEs' Init waits for the last to start: a slow start shows here.
		fmt.Fprintf(errw, "roxrun: started %d PEs in %v\n", len(pes), time.Since(startTime).Round(time.Millisecond))
	}

	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT)
	defer signal.Stop(sigs)

	// Reaped only once every PE has started, so that the group leader's process group outlives
	// its own exit for the PEs started after it.
	type exitReport struct {
		p   *pe
		err error
	}
	exited := make(chan exitReport, len(pes))
	for _, p := range pes {
		go func(p *pe) {
			err := p.cmd.Wait()
			p.reapedAt = time.Now()
			close(p.reaped)
			// Its last words (a panic's trace) come before roxrun's verdict on it, unless a child
			// it left behind keeps its output open.
			awaitOutput(p, outputSettle, time.Now().Add(outputDrainMax), p.flowed)
			exited <- exitReport{p, err}
		}(p)
	}

	j := &verdict{errw: errw, pes: pes, mps: mps}
	remaining := len(pes)
	stopping := false
	var grace <-chan time.Time
	termSent := false
	// After a PE fails the others get one grace period to notice (the rendezvous tells them) and
	// report it themselves, then SIGTERM, then after another grace period SIGKILL.
	stop := func() {
		if !stopping {
			stopping = true
			grace = time.After(cfg.Grace)
		}
	}
	for remaining > 0 {
		select {
		case r := <-exited:
			remaining--
			p := r.p
			p.done, p.stopped = true, j.terminated
			p.exit = peError(p, r.err, oom)
			if p.exit == nil {
				srv.Exited(p.rank, "exited with status 0", 0)
			} else {
				srv.Exited(p.rank, p.exit.how(), p.exit.Status)
			}
			// The rendezvous queued what it knew before telling anyone: take it first, so that a
			// PE failing because of another's death is never taken for the cause.
			j.drain(srv.Failures())
			if p.exit != nil {
				j.exit(p, j.terminated)
				stop()
			}
			j.report()
		case s := <-sigs:
			// Forward to the whole group; a second signal or the grace period escalates.
			if termSent {
				killAll(syscall.SIGKILL)
			} else {
				killAll(s.(syscall.Signal))
				j.terminated = true
				if j.stopped == nil {
					j.stopped = &ExitError{PE: -1, Status: 128 + int(s.(syscall.Signal)), Reason: "job interrupted by " + s.String()}
				}
				stopping, termSent = true, true
				grace = time.After(cfg.Grace)
			}
		case f := <-srv.Failures():
			j.failure(f)
			if f.Aborted {
				stop()
			}
			j.report()
		case <-ctx.Done():
			if !termSent {
				err := &ExitError{PE: -1, Status: 124, Reason: "job timed out after " + cfg.Timeout.String()}
				if cfg.Timeout == 0 {
					err.Reason = "job cancelled"
				}
				fmt.Fprintln(errw, err.Error())
				j.terminated = true
				if j.stopped == nil {
					j.stopped = err
				}
				// A timed-out job has had its chance: terminate now.
				killAll(syscall.SIGTERM)
				stopping, termSent = true, true
				grace = time.After(cfg.Grace)
			}
			ctx = context.Background()
		case <-grace:
			if !termSent {
				killAll(syscall.SIGTERM)
				termSent, j.terminated = true, true
				grace = time.After(cfg.Grace)
			} else {
				killAll(syscall.SIGKILL)
				grace = nil
			}
		}
	}
	// Every PE has exited. A child one left behind may still hold its stdout: read what comes
	// within the grace period, then kill whatever is left of the job's process group (children
	// that left the group are not ours to chase) and stop reading.
	closeOutputAfter := cfg.Grace
	if j.stopped != nil || stopping {
		killAll(syscall.SIGKILL)
		closeOutputAfter = min(cfg.Grace, time.Second)
	}
	closeOutput(closeOutputAfter)
	killAll(syscall.SIGKILL)
	j.report()
	if mps != nil && j.failed && env.Debugging(env.LevelInfo) {
		for _, l := range mps.Lines() {
			fmt.Fprintf(errw, "roxrun: CUDA MPS %s\n", l)
		}
	}
	if env.Debugging(env.LevelInfo) {
		st := srv.Stats()
		t := st.Total()
		fmt.Fprintf(errw, "roxrun: rendezvous (%s, the bootstrap's root): %d messages (%d received), %d bytes\n", st.Mode, t.Msgs(), t.MsgsRecv, t.Bytes())
	}
	return j.result()
}

func layoutString(layout []int) string {
	s := make([]string, len(layout))
	for i, c := range layout {
		s[i] = strconv.Itoa(c)
	}
	return strings.Join(s, ",")
}

// exitReportWait is how long the rendezvous waits, after a PE's connection drops, for roxrun to
// report how its process ended before it tells the others only that the connection was lost. A
// process's sockets close a moment before its parent can reap it.
const exitReportWait = 500 * time.Millisecond

// outputSettle is how long a PE's exit waits for more of its output before it is reported: the
// wait ends when its output ends, or when none has come for this long.
const outputSettle = 200 * time.Millisecond

// outputDrainMax bounds any wait for output that keeps coming (a PE's child that writes forever).
const outputDrainMax = 30 * time.Second

// awaitOutput waits until p's output has been copied to its end, until no output has flowed for
// idle (each signal on flowed restarts that wait), or until the time until. It returns false
// when it gave up.
func awaitOutput(p *pe, idle time.Duration, until time.Time, flowed <-chan struct{}) bool {
	t := time.NewTimer(idle)
	defer t.Stop()
	end := time.NewTimer(time.Until(until))
	defer end.Stop()
	for {
		select {
		case <-p.copied:
			return true
		case <-flowed:
			t.Reset(idle)
		case <-t.C:
			return false
		case <-end.C:
			return false
		}
	}
}

func startPE(argv, env []string, rank int, host string, pgid int) (*pe, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pgid: pgid, Pdeathsig: syscall.SIGKILL}
	// Pipes of our own rather than cmd.StdoutPipe: Wait then returns when the PE exits, not when
	// every process holding its stdout has closed it, and Run decides how long to keep reading.
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = outW, errW
	err = cmd.Start()
	outW.Close()
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		return nil, err
	}
	return &pe{rank: rank, host: host, cmd: cmd, outR: outR, errR: errR, copied: make(chan struct{}), reaped: make(chan struct{}), flowed: make(chan struct{}, 1)}, nil
}

func copyAll(out, errw io.Writer, p *pe, prefix bool, jobFlowed chan struct{}) {
	flowed := func(string) {
		for _, ch := range []chan struct{}{p.flowed, jobFlowed} {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); copyLines(out, p.outR, prefix, p.rank, flowed) }()
	copyLines(errw, p.errR, prefix, p.rank, func(line string) { p.last.add(line); flowed(line) })
	wg.Wait()
}

// verdict works out a job's root cause from the order in which PEs left it.
type verdict struct {
	errw io.Writer
	pes  []*pe
	// root is the first PE to leave the job badly: the first failure the rendezvous reported (a
	// lost connection, an exit before Finalize, an abort), or else the first PE to exit non-zero.
	root        int
	rootReason  string         // the rendezvous's account of root, if it came from there
	aborted     bool           // root called GlobalExit
	abortedWith int            // the status it gave GlobalExit
	rootStop    syscall.Signal // root was stopped by this signal while the others waited for it
	hasRoot     bool
	printed     bool
	collateral  []int        // PEs that exited non-zero on their own after root left
	queued      []int        // collateral PEs not yet printed
	failed      bool         // some PE exited non-zero
	stopped     *ExitError   // the job was stopped (signal to roxrun, timeout)
	terminated  bool         // roxrun has terminated the PEs: what follows is its doing
	mps         *mpslog.Logs // the logs of the MPS server the PEs share a GPU under, if any
	mpsLine     string       // the line of them that named root as the client whose GPU fault it was
}

// mpsCause takes as root cause the PE whose process the MPS server's log names as the client of
// a fatal GPU fault, where the PEs share a GPU under MPS: the fault fails every client's context
// with the same error, and the first PE to report it need not be the one whose kernel faulted.
// It says whether it found one.
func (j *verdict) mpsCause() bool {
	if j.mps == nil {
		return false
	}
	pids := map[int]int{}
	for _, p := range j.pes {
		if p.cmd != nil && p.cmd.Process != nil {
			pids[p.cmd.Process.Pid] = p.rank
		}
	}
	for try := 0; ; try++ {
		if rank, line, ok := j.mps.FaultingClient(pids); ok {
			j.hasRoot, j.root, j.mpsLine = true, rank, line
			return true
		}
		if try == mpsLogTries {
			return false
		}
		time.Sleep(mpsLogWait) // the server may log the fault a moment after its clients fail
	}
}

// mpsLogTries and mpsLogWait bound the wait for the MPS server's account of a failure.
const (
	mpsLogTries = 5
	mpsLogWait  = 50 * time.Millisecond
)

func (j *verdict) failure(f bootstrap.Failure) {
	if j.hasRoot || j.terminated || f.PE < 0 || f.PE >= len(j.pes) {
		return
	}
	if !f.Aborted && (j.takeEarlierCause(j.pes[f.PE]) || j.mpsCause()) {
		return
	}
	j.hasRoot, j.root, j.aborted = true, f.PE, f.Aborted
	j.rootReason, j.abortedWith = f.Reason, f.Status
}

// takeEarlierCause takes as root cause a PE whose end (or stop) came before p's failure but has
// not been reported yet; it says whether it found one.
func (j *verdict) takeEarlierCause(p *pe) bool {
	q, st, ok := j.earlierCause(p)
	if !ok {
		return false
	}
	j.hasRoot, j.root = true, q.rank
	if st.stopped {
		j.rootStop = st.signal
	}
	return true
}

func (j *verdict) drain(ch <-chan bootstrap.Failure) {
	for {
		select {
		case f := <-ch:
			j.failure(f)
		default:
			return
		}
	}
}

// exit records p's non-zero exit; afterTerm says roxrun had already terminated the job.
func (j *verdict) exit(p *pe, afterTerm bool) {
	j.failed = true
	if !j.hasRoot && !afterTerm && !j.takeEarlierCause(p) && !j.mpsCause() {
		j.hasRoot, j.root = true, p.rank
		return
	}
	if p.rank != j.root && !afterTerm && !j.aborted {
		j.collateral = append(j.collateral, p.rank)
		j.queued = append(j.queued, p.rank)
	}
}

// rootError describes the root cause with what is known now.
func (j *verdict) rootError() *ExitError {
	p := j.pes[j.root]
	e := &ExitError{PE: p.rank, Host: p.host, Status: 1}
	switch {
	case j.aborted:
		// GlobalExit: the status it gave is the job's, whatever became of its process (a
		// status of 256 leaves a process's exit code 0).
		e.Reason = "ended the job " + strings.TrimPrefix(j.rootReason, "aborted ")
		e.Status = GlobalExitCode(j.abortedWith)
		if e.Status != j.abortedWith {
			e.Reason += " (exit code " + strconv.Itoa(e.Status) + ")"
		}
		return e
	case j.rootStop != 0:
		// It never answered again; whatever ended it afterwards (roxrun) is beside the point.
		e.Signal = signalName(j.rootStop)
		if e.Signal == "" {
			e.Signal = j.rootStop.String()
		}
		e.Status = 128 + int(j.rootStop)
		e.Reason = "was stopped by signal " + e.Signal + " while the other PEs waited for it"
	case p.exit != nil && p.stopped:
		// It lost its connection but lived on until roxrun stopped the job.
		*e = *p.exit
		e.Reason = "left the job (" + j.rootReason + "); roxrun stopped it"
	case p.exit != nil:
		*e = *p.exit
		if strings.HasSuffix(j.rootReason, " before Init") {
			e.Reason = e.how() + " before Init"
		}
	case p.done:
		// It exited 0 but had left the job before the end (before Init or without Finalize).
		e.Status = 0
		e.Reason = "exited with status 0"
		if strings.HasPrefix(j.rootReason, "exited with status 0") {
			e.Reason = j.rootReason
		}
		e.Reason += " while other PEs still needed it"
	default:
		e.Reason = "left the job: " + j.rootReason
	}
	if j.mpsLine != "" {
		e.Reason = fmt.Sprintf("%s: its kernel's GPU fault ended every PE's context (the CUDA MPS server names its process %d: %s)", e.how(), p.cmd.Process.Pid, j.mpsLine)
	}
	e.Said = p.last.said()
	return e
}

// report prints the root cause once it is a failure of the job and its PE has exited, then each
// PE that failed because of it.
func (j *verdict) report() {
	if !j.hasRoot || !j.failed && !j.aborted {
		return
	}
	if !j.printed {
		if !j.pes[j.root].done {
			return
		}
		e := j.rootError()
		fmt.Fprintln(j.errw, e.Error())
		if e.Said != "" {
			// Its own account, next to the verdict: among hundreds of PEs' messages (unprefixed
			// without --prefix) it is otherwise hard to find.
			fmt.Fprintf(j.errw, "roxrun: PE %d%s said last (stderr): %s\n", e.PE, e.where(), e.Said)
		}
		j.printed = true
	}
	for _, q := range j.queued {
		fmt.Fprintf(j.errw, "roxrun: PE %d%s %s after PE %d had left the job (collateral)\n",
			q, j.pes[q].exit.where(), j.pes[q].exit.how(), j.root)
	}
	j.queued = nil
}

// result is the job's outcome once every PE has exited.
func (j *verdict) result() error {
	// A root cause is only ever taken before roxrun terminated the job, so it comes first.
	if !j.hasRoot || !j.failed && !j.aborted {
		if j.stopped != nil {
			return j.stopped
		}
		return nil
	}
	e := j.rootError()
	e.Collateral = j.collateral
	if e.Status == 0 && !j.aborted {
		// The root cause exited 0 (before Init, or without Finalize): the job's status is that of
		// the first PE that failed because of it.
		e.Status = 1
		for _, q := range j.collateral {
			e.Status = j.pes[q].exit.Status
			break
		}
	}
	if j.aborted && e.Status == 0 {
		return nil
	}
	return e
}

// peError converts a PE's exit into an ExitError, or nil for a clean exit.
func peError(p *pe, err error, oom *oomWatch) *ExitError {
	if err == nil {
		return nil
	}
	ee := &ExitError{PE: p.rank, Host: p.host, Status: 1}
	var xe *exec.ExitError
	if errors.As(err, &xe) {
		if ws, ok := xe.Sys().(syscall.WaitStatus); ok {
			switch {
			case ws.Signaled():
				ee.Signal = ws.Signal().String()
				if name := signalName(ws.Signal()); name != "" {
					ee.Signal = name
				}
				ee.Status = 128 + int(ws.Signal())
				if ws.Signal() == syscall.SIGKILL {
					if why := oom.check(); why != "" {
						ee.Signal += " (" + why + ")"
					}
				}
			case ws.Exited():
				ee.Status = ws.ExitStatus()
			}
		}
		return ee
	}
	ee.Reason = fmt.Sprintf("could not be waited for: %v", err)
	return ee
}

func signalName(s syscall.Signal) string {
	names := map[syscall.Signal]string{
		syscall.SIGKILL: "SIGKILL", syscall.SIGTERM: "SIGTERM", syscall.SIGINT: "SIGINT",
		syscall.SIGSEGV: "SIGSEGV", syscall.SIGABRT: "SIGABRT", syscall.SIGBUS: "SIGBUS",
		syscall.SIGHUP: "SIGHUP", syscall.SIGQUIT: "SIGQUIT", syscall.SIGSTOP: "SIGSTOP",
		syscall.SIGTSTP: "SIGTSTP", syscall.SIGTTIN: "SIGTTIN", syscall.SIGTTOU: "SIGTTOU",
	}
	return names[s]
}

func newToken() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("roxrun: job token: %w", err)
	}
	return hex.EncodeToString(b), nil
}

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// copyLines copies r to w a line at a time so that lines of different PEs never interleave,
// calling copied with each line (unprefixed) once it is written. It returns at EOF, or when r is
// closed.
func copyLines(w io.Writer, r io.Reader, prefix bool, rank int, copied func(line string)) {
	br := bufio.NewReaderSize(r, 64<<10)
	tag := "[pe " + strconv.Itoa(rank) + "] "
	for {
		line, err := br.ReadString('\n')
		if line != "" {
			own := line
			if prefix {
				line = tag + line
			}
			if !strings.HasSuffix(line, "\n") {
				line += "\n"
			}
			_, _ = io.WriteString(w, line)
			copied(own)
		}
		if err != nil {
			return
		}
	}
}

// ParseHosts parses "a:4,b:4" (a host without a count gets 1 PE).
func ParseHosts(s string) ([]Host, error) {
	var hosts []Host
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		name, count := part, "1"
		if i := strings.LastIndexByte(part, ':'); i >= 0 {
			name, count = part[:i], part[i+1:]
		}
		n, err := strconv.Atoi(count)
		if err != nil || n < 1 || name == "" {
			return nil, fmt.Errorf("roxrun: --hosts %q: bad entry %q (want NAME:COUNT)", s, part)
		}
		hosts = append(hosts, Host{Name: name, NPEs: n})
	}
	if len(hosts) == 0 {
		return nil, fmt.Errorf("roxrun: --hosts %q: no hosts", s)
	}
	return hosts, nil
}

// AdvertiseAddr returns an address of this machine other hosts can likely reach: the first
// non-loopback IPv4 address, else 127.0.0.1.
func AdvertiseAddr() string {
	ifs, err := net.InterfaceAddrs()
	if err == nil {
		for _, a := range ifs {
			if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil && !ipn.IP.IsLoopback() {
				return ipn.IP.String()
			}
		}
	}
	return "127.0.0.1"
}
