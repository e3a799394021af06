package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/roxamen/roxamen/internal/launch"
)

type runFlags struct {
	fs       *flag.FlagSet
	n        int
	hosts    string
	rsh      string
	timeout  time.Duration
	grace    time.Duration
	noPrefix bool
	bind     string
}

func newRunFlags(out io.Writer) *runFlags {
	f := &runFlags{fs: flag.NewFlagSet("roxrun", flag.ContinueOnError)}
	f.fs.SetOutput(out)
	f.fs.IntVar(&f.n, "n", 1, "number of PEs (with --hosts: the sum of the hosts' counts)")
	f.fs.StringVar(&f.hosts, "hosts", "", "start PEs on other hosts: NAME:COUNT,NAME:COUNT")
	f.fs.StringVar(&f.rsh, "rsh", "ssh", "command that runs a program on a host (with --hosts), e.g. 'ip netns exec'")
	f.fs.DurationVar(&f.timeout, "timeout", 0, "stop the job after this long (0: no limit)")
	f.fs.DurationVar(&f.grace, "grace", 3*time.Second, "time between SIGTERM and SIGKILL when the job stops early")
	f.fs.BoolVar(&f.noPrefix, "no-prefix", false, "do not prefix output lines with [pe N]")
	f.fs.StringVar(&f.bind, "bind", "", "address the rendezvous listens on (default 127.0.0.1:0; with --hosts :0)")
	return f
}

func runMain(args []string, stdout, stderr io.Writer) int {
	f := newRunFlags(stderr)
	if err := f.fs.Parse(args); err != nil {
		return 2
	}
	if f.fs.NArg() == 0 {
		usage(stderr)
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
			fmt.Fprintln(stderr, err)
			return 2
		}
		cfg.Hosts = hosts
		cfg.Rsh = strings.Fields(f.rsh)
		if cfg.BindAddr == "" {
			cfg.BindAddr = launch.AdvertiseAddr() + ":0"
		}
	}
	prog, cleanup, err := resolveProgram(f.fs.Arg(0), stderr)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	defer cleanup()
	cfg.Argv = append([]string{prog}, f.fs.Args()[1:]...)
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
