package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// command is one subcommand's flags and usage text. Every subcommand parses through it, so that
// -h/--help, errors and conflicting flags behave the same everywhere: help goes to stdout and
// exits 0, a bad flag is one line on stderr naming the command and exits 2.
//
// The standard flag package does this job: it already takes -flag and --flag alike (users write
// both), and what it lacks (help on stdout, conflicts) is this file. A library such as cobra or
// pflag would add dependencies and make single-dash long flags (-iters, -hosts, which scripts and
// the hidden PE commands use) mean bundles of short ones.
type command struct {
	name     string // as typed: "run", "bench"...
	synopsis string // what follows the name, e.g. "[flags] PROGRAM [args]"
	about    string // a paragraph under the synopsis
	fs       *flag.FlagSet
}

func newCommand(name, synopsis, about string) *command {
	fs := flag.NewFlagSet("roxrun "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // parse errors are printed by parse, once
	fs.Usage = func() {}
	return &command{name: name, synopsis: synopsis, about: about, fs: fs}
}

// usage writes the command's usage: synopsis, paragraph, every flag with its default.
func (c *command) usage(w io.Writer) {
	fmt.Fprintln(w, strings.TrimSpace("roxrun "+c.name+" "+c.synopsis))
	for _, l := range strings.Split(strings.TrimSpace(c.about), "\n") {
		fmt.Fprintf(w, "  %s\n", l)
	}
	first := true
	c.fs.VisitAll(func(f *flag.Flag) {
		if first {
			fmt.Fprintln(w, "flags:")
			first = false
		}
		// Written as users type them: -n, --hosts (the flag package takes either form).
		dash := "--"
		if len(f.Name) == 1 {
			dash = "-"
		}
		kind, text := flag.UnquoteUsage(f)
		fmt.Fprintf(w, "  %s\n      %s", strings.TrimSpace(dash+f.Name+" "+kind), text)
		if d := f.DefValue; d != "" && d != "false" && d != "0" && d != "0s" {
			if kind == "string" {
				d = strconv.Quote(d)
			}
			fmt.Fprintf(w, " (default %s)", d)
		}
		fmt.Fprintln(w)
	})
}

// parse parses args. It returns ok=false with the exit status when the command must end here:
// 0 after -h/--help (usage on stdout), 2 after a bad flag (one line on stderr).
func (c *command) parse(args []string, stdout, stderr io.Writer) (ok bool, status int) {
	err := c.fs.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		c.usage(stdout)
		return false, 0
	}
	if err != nil {
		return false, c.fail(stderr, "%v", err)
	}
	return true, 0
}

// fail prints "roxrun NAME: message" and a pointer to the usage, and returns 2.
func (c *command) fail(stderr io.Writer, format string, args ...any) int {
	fmt.Fprintf(stderr, "roxrun %s: %s\n(roxrun %s --help lists its flags)\n", c.name, fmt.Sprintf(format, args...), c.name)
	return 2
}

// set reports whether the flag was given on the command line.
func (c *command) set(name string) bool {
	found := false
	c.fs.Visit(func(f *flag.Flag) { found = found || f.Name == name })
	return found
}

// given returns "--name value" as the user gave it, for error messages.
func (c *command) given(name string) string {
	f := c.fs.Lookup(name)
	if f == nil {
		return "--" + name
	}
	if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
		return "--" + name
	}
	return fmt.Sprintf("--%s %s", name, f.Value.String())
}

// needs returns an error message when a flag that only means something beside another was given
// without it (e.g. litmus --seed without --run); "" when all is well.
func (c *command) needs(flagName, needed string) string {
	if c.set(flagName) && !c.set(needed) {
		return fmt.Sprintf("%s needs --%s", c.given(flagName), needed)
	}
	return ""
}

// isTerminal reports whether w is a terminal: progress lines go there and nowhere else.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// progress writes one overwritten status line to a terminal ("bench [3/24] put_bw 4096 B") and
// nothing anywhere else.
type progress struct {
	w  io.Writer // nil: not a terminal
	on bool
}

func newProgress(stderr io.Writer) *progress {
	if !isTerminal(stderr) {
		return &progress{}
	}
	return &progress{w: stderr}
}

func (p *progress) show(format string, args ...any) {
	if p.w == nil {
		return
	}
	fmt.Fprintf(p.w, "\r\033[K"+format, args...)
	p.on = true
}

// done clears the status line, so that what follows starts on a clean line.
func (p *progress) done() {
	if p.w != nil && p.on {
		fmt.Fprint(p.w, "\r\033[K")
		p.on = false
	}
}

// lineWriter calls fn with each complete line written to it (without the newline) and passes
// every byte on to next (which may be nil).
type lineWriter struct {
	mu   sync.Mutex // the PEs' output is copied by one goroutine each
	next io.Writer
	fn   func(string)
	buf  []byte
}

func (l *lineWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	for {
		i := strings.IndexByte(string(l.buf), '\n')
		if i < 0 {
			break
		}
		l.fn(string(l.buf[:i]))
		l.buf = l.buf[i+1:]
	}
	if l.next != nil {
		return l.next.Write(p)
	}
	return len(p), nil
}
