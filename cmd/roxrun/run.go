package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/roxamen/roxamen/internal/env"
	"github.com/roxamen/roxamen/tools/cli"
	"github.com/roxamen/roxamen/tools/launch"
)

type runFlags struct {
	cmd      *cli.Command
	n        int
	hosts    string
	rsh      string
	timeout  time.Duration
	grace    time.Duration
	noPrefix bool
	bind     string
}

func newRunFlags() *runFlags {
	f := &runFlags{cmd: cli.NewCommand("run", "[flags] PROGRAM|GO-PACKAGE-DIR [args]", `
Start an SPMD job: N processes (PEs) of PROGRAM, or of the Go package in the directory,
built first. Output lines are prefixed [pe N]; the first PE to fail stops the job and
roxrun exits with its status; signals are forwarded; no child outlives roxrun.`)}
	fs := f.cmd.Flags
	fs.IntVar(&f.n, "n", 1, "number of PEs (with --hosts it may be left out: the sum of the hosts' counts)")
	fs.StringVar(&f.hosts, "hosts", "", "start PEs on other hosts: NAME:COUNT,NAME:COUNT")
	fs.StringVar(&f.rsh, "rsh", "ssh", "with --hosts: the command that runs a program on a host, e.g. 'ip netns exec'")
	fs.DurationVar(&f.timeout, "timeout", 0, "stop the job after this long (0: no limit)")
	fs.DurationVar(&f.grace, "grace", 3*time.Second, "time between SIGTERM and SIGKILL when the job stops early")
	fs.BoolVar(&f.noPrefix, "no-prefix", false, "do not prefix output lines with [pe N]")
	fs.StringVar(&f.bind, "bind", "", "address the rendezvous listens on (default 127.0.0.1:0; with --hosts :0 on this host's address)")
	return f
}

func runMain(args []string, stdout, stderr io.Writer) int {
	f := newRunFlags()
	c := f.cmd
	if ok, status := c.Parse(args, stdout, stderr); !ok {
		return status
	}
	if c.Flags.NArg() == 0 {
		return c.Fail(stderr, "no program given")
	}
	if msg := c.Needs("rsh", "hosts"); msg != "" {
		return c.Fail(stderr, "%s", msg)
	}
	// The knobs are checked here, once, before any PE starts: one message, not one per PE.
	if err := env.ValidateAll(); err != nil {
		fmt.Fprintf(stderr, "roxrun: a malformed knob; no PE was started:\n%v\n(roxrun info lists every knob with its accepted values)\n", err)
		return 2
	}
	cfg := launch.Config{
		NPEs:     f.n,
		Prefix:   !f.noPrefix,
		Timeout:  f.timeout,
		Grace:    f.grace,
		BindAddr: f.bind,
		Stdout:   stdout,
		Stderr:   stderr,
	}
	if f.hosts != "" {
		hosts, err := launch.ParseHosts(f.hosts)
		if err != nil {
			return c.Fail(stderr, "%v", strings.TrimPrefix(err.Error(), "roxrun: "))
		}
		total := 0
		for _, h := range hosts {
			total += h.NPEs
		}
		if c.Set("n") && f.n != total {
			return c.Fail(stderr, "-n %d and --hosts %s disagree: the hosts' counts add up to %d PEs (give one of them, or make them agree)", f.n, f.hosts, total)
		}
		cfg.NPEs = total
		cfg.Hosts = hosts
		cfg.Rsh = strings.Fields(f.rsh)
		if cfg.BindAddr == "" {
			cfg.BindAddr = launch.AdvertiseAddr() + ":0"
		}
	}
	prog, cleanup, err := resolveProgram(c.Flags.Arg(0), stderr)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	defer cleanup()
	cfg.Argv = append([]string{prog}, c.Flags.Args()[1:]...)
	if f.hosts == "" {
		if cfg.MPS, err = launch.NodeMPS(cfg.NPEs); err != nil {
			fmt.Fprintf(stderr, "roxrun: %v\n", err)
			return 2
		}
	}
	err = launch.Run(context.Background(), cfg)
	if err != nil {
		// launch already printed the PE failure; other errors are ours to report.
		if _, ok := err.(*launch.ExitError); !ok {
			fmt.Fprintln(stderr, err)
		}
	}
	return launch.ExitStatus(err)
}

// resolveProgram returns an executable for arg: a Go package directory is built once into a
// temporary directory (like go run); anything else is run as given.
func resolveProgram(arg string, stderr io.Writer) (string, func(), error) {
	nothing := func() {}
	st, err := os.Stat(arg)
	if err != nil || !st.IsDir() {
		if err == nil && !strings.ContainsRune(arg, '/') {
			arg = "./" + arg // a file in the current directory, not a name to find on PATH
		}
		return arg, nothing, nil
	}
	gofiles, _ := filepath.Glob(filepath.Join(arg, "*.go"))
	if len(gofiles) == 0 {
		return "", nothing, fmt.Errorf("roxrun: %s is a directory without Go files", arg)
	}
	dir, err := os.MkdirTemp("", "roxrun-")
	if err != nil {
		return "", nothing, err
	}
	cleanup := func() { os.RemoveAll(dir) }
	out := filepath.Join(dir, filepath.Base(filepath.Clean(arg)))
	pkg := arg
	if !filepath.IsAbs(pkg) && !strings.HasPrefix(pkg, ".") {
		pkg = "./" + pkg
	}
	build := exec.Command("go", "build", "-o", out, pkg)
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	build.Stdout, build.Stderr = stderr, stderr
	if err := build.Run(); err != nil {
		cleanup()
		return "", nothing, fmt.Errorf("roxrun: building %s: %w", arg, err)
	}
	return out, cleanup, nil
}
