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

// ExitError is the first PE failure of a job.
type ExitError struct {
	PE     int
	Host   string
	Status int    // exit status, or 128+signal
	Signal string // the signal that killed the PE, if any
	Reason string // set when the job itself ended the PE (timeout, other PE failed)

	fromServer bool // reported by the rendezvous before the PE's exit status was known
}

func (e *ExitError) Error() string {
	where := ""
	if e.Host != "" {
		where = " on " + e.Host
	}
	if e.Reason != "" {
		return "roxrun: " + e.Reason
	}
	if e.Signal != "" {
		return fmt.Sprintf("roxrun: PE %d%s was killed by signal %s", e.PE, where, e.Signal)
	}
	return fmt.Sprintf("roxrun: PE %d%s exited with status %d", e.PE, where, e.Status)
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
	rank int
	host string
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// Run starts the job and waits for it. It returns nil when every PE exits 0, or the first failure.
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
	srv, err := bootstrap.NewServer(bind, total, token)
	if err != nil {
		return fmt.Errorf("roxrun: rendezvous: %w", err)
	}
	defer srv.Close()

	if cfg.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cfg.Timeout)
		defer cancel()
	}

	out := &lockedWriter{w: cfg.Stdout}
	errw := &lockedWriter{w: cfg.Stderr}
	var pes []*pe
	var pgid int
	var wg sync.WaitGroup
	killAll := func(sig syscall.Signal) {
		if pgid != 0 {
			_ = syscall.Kill(-pgid, sig)
		}
		for _, p := range pes {
			if p.cmd.Process != nil {
				_ = p.cmd.Process.Signal(sig)
			}
		}
	}
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
			cmd := exec.Command(argv[0], argv[1:]...)
			cmd.Env = env
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pgid: pgid, Pdeathsig: syscall.SIGKILL}
			p := &pe{rank: rank, host: h.Name, cmd: cmd, done: make(chan struct{})}
			stdout, _ := cmd.StdoutPipe()
			stderr, _ := cmd.StderrPipe()
			if err := cmd.Start(); err != nil {
				killAll(syscall.SIGKILL)
				return fmt.Errorf("roxrun: starting PE %d (%s): %w", rank, argv[0], err)
			}
			if pgid == 0 {
				pgid = cmd.Process.Pid
			}
			pes = append(pes, p)
			var copyWG sync.WaitGroup
			copyWG.Add(2)
			go func() { defer copyWG.Done(); copyLines(out, stdout, cfg.Prefix, p.rank) }()
			go func() { defer copyWG.Done(); copyLines(errw, stderr, cfg.Prefix, p.rank) }()
			wg.Add(1)
			go func() {
				defer wg.Done()
				copyWG.Wait()
				p.err = cmd.Wait()
				close(p.done)
			}()
			rank++
		}
	}

	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT)
	defer signal.Stop(sigs)

	exited := make(chan *pe, len(pes))
	for _, p := range pes {
		go func(p *pe) { <-p.done; exited <- p }(p)
	}

	var first error
	remaining := len(pes)
	stopping := false
	var grace <-chan time.Time
	termSent := false
	exiting0 := false // a PE called GlobalExit(0)
	// After a PE fails the others get one grace period to notice (the rendezvous tells them) and
	// report it themselves, then SIGTERM, then after another grace period SIGKILL.
	stop := func(reason error) {
		if first == nil {
			first = reason
		}
		if !stopping {
			stopping = true
			grace = time.After(cfg.Grace)
		}
	}
	for remaining > 0 {
		select {
		case p := <-exited:
			remaining--
			err := peError(p)
			if err == nil {
				break
			}
			if !stopping {
				fmt.Fprintln(errw, err.Error())
				stop(err)
			} else if ee, ok := first.(*ExitError); ok && ee.fromServer && ee.PE == p.rank {
				// The rendezvous saw the PE go first; its exit status is the better answer.
				first = err
			}
		case s := <-sigs:
			// Forward to the whole group; a second signal or the grace period escalates.
			if termSent {
				killAll(syscall.SIGKILL)
			} else {
				killAll(s.(syscall.Signal))
				if first == nil {
					first = &ExitError{PE: -1, Status: 128 + int(s.(syscall.Signal)), Reason: "job interrupted by " + s.String()}
				}
				stopping, termSent = true, true
				grace = time.After(cfg.Grace)
			}
		case f := <-srv.Failures():
			if f.Aborted && f.Status == 0 || exiting0 {
				// GlobalExit(0): every PE exits 0 by itself, a clean end of the job; the lost
				// connections that follow are its doing.
				exiting0 = true
				stop(nil)
				break
			}
			if !stopping {
				err := &ExitError{PE: f.PE, Status: 1, Reason: fmt.Sprintf("PE %d failed: %s", f.PE, f.Reason), fromServer: true}
				fmt.Fprintln(errw, err.Error())
				stop(err)
			}
		case <-ctx.Done():
			if !termSent {
				err := &ExitError{PE: -1, Status: 124, Reason: "job timed out after " + cfg.Timeout.String()}
				if cfg.Timeout == 0 {
					err.Reason = "job cancelled"
				}
				fmt.Fprintln(errw, err.Error())
				if first == nil {
					first = err
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
				termSent = true
				grace = time.After(cfg.Grace)
			} else {
				killAll(syscall.SIGKILL)
				grace = nil
			}
		}
	}
	// Stragglers that left the group (daemonised grandchildren) are not ours to chase, but anything
	// still in the group dies with it.
	killAll(syscall.SIGKILL)
	wg.Wait()
	return first
}

// peError converts a PE's exit into an ExitError, or nil for a clean exit.
func peError(p *pe) error {
	if p.err == nil {
		return nil
	}
	ee := &ExitError{PE: p.rank, Host: p.host, Status: 1}
	var xe *exec.ExitError
	if errors.As(p.err, &xe) {
		if ws, ok := xe.Sys().(syscall.WaitStatus); ok {
			switch {
			case ws.Signaled():
				ee.Signal = ws.Signal().String()
				if name := signalName(ws.Signal()); name != "" {
					ee.Signal = name
				}
				ee.Status = 128 + int(ws.Signal())
			case ws.Exited():
				ee.Status = ws.ExitStatus()
			}
		}
		return ee
	}
	ee.Reason = fmt.Sprintf("PE %d: %v", p.rank, p.err)
	return ee
}

func signalName(s syscall.Signal) string {
	names := map[syscall.Signal]string{
		syscall.SIGKILL: "SIGKILL", syscall.SIGTERM: "SIGTERM", syscall.SIGINT: "SIGINT",
		syscall.SIGSEGV: "SIGSEGV", syscall.SIGABRT: "SIGABRT", syscall.SIGBUS: "SIGBUS",
		syscall.SIGHUP: "SIGHUP", syscall.SIGQUIT: "SIGQUIT",
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

// copyLines copies r to w a line at a time so that lines of different PEs never interleave.
func copyLines(w io.Writer, r io.Reader, prefix bool, rank int) {
	br := bufio.NewReaderSize(r, 64<<10)
	tag := "[pe " + strconv.Itoa(rank) + "] "
	for {
		line, err := br.ReadString('\n')
		if line != "" {
			if prefix {
				line = tag + line
			}
			if !strings.HasSuffix(line, "\n") {
				line += "\n"
			}
			_, _ = io.WriteString(w, line)
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
