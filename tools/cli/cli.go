// Package cli owns what roxrun's commands share on the command line: a subcommand's flags and
// usage (help on stdout, one-line errors, conflicting flags), progress lines for a terminal, and
// a writer that sees each line of a job's output. cmd/roxrun and the tools it runs (tools/bench,
// tools/litmusrun) parse through it, so that every command behaves the same.
package cli

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

// Command is one subcommand's flags and usage text. Every subcommand parses through it, so that
// -h/--help, errors and conflicting flags behave the same everywhere: help goes to stdout and
// exits 0, a bad flag is one line on stderr naming the command and exits 2.
//
// The standard flag package does this job: it already takes -flag and --flag alike (users write
// both), and what it lacks (help on stdout, conflicts) is this file. A library such as cobra or
// pflag would add dependencies and make single-dash long flags (-iters, -hosts, which scripts and
// the hidden PE commands use) mean bundles of short ones.
type Command struct {
	Name     string // as typed: "run", "bench"...
	Synopsis string // what follows the name, e.g. "[flags] PROGRAM [args]"
	About    string // a paragraph under the synopsis
	Flags    *flag.FlagSet
}

// NewCommand returns the command roxrun NAME with no flags yet: add them to its Flags.
func NewCommand(name, synopsis, about string) *Command {
	fs := flag.NewFlagSet("roxrun "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // Parse errors are printed by parse, once
	fs.Usage = func() {}
	return &Command{Name: name, Synopsis: synopsis, About: about, Flags: fs}
}

// Usage writes the command's usage: synopsis, paragraph, every flag with its default.
func (c *Command) Usage(w io.Writer) {
	fmt.Fprintln(w, strings.TrimSpace("roxrun "+c.Name+" "+c.Synopsis))
	for _, l := range strings.Split(strings.TrimSpace(c.About), "\n") {
		fmt.Fprintf(w, "  %s\n", l)
	}
	first := true
	c.Flags.VisitAll(func(f *flag.Flag) {
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

// Parse parses args. It returns ok=false with the exit status when the command must end here:
// 0 after -h/--help (usage on stdout), 2 after a bad flag (one line on stderr).
func (c *Command) Parse(args []string, stdout, stderr io.Writer) (ok bool, status int) {
	err := c.Flags.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		c.Usage(stdout)
		return false, 0
	}
	if err != nil {
		return false, c.Fail(stderr, "%v", err)
	}
	return true, 0
}

// Fail prints "roxrun NAME: message" and a pointer to the usage, and returns 2.
func (c *Command) Fail(stderr io.Writer, format string, args ...any) int {
	fmt.Fprintf(stderr, "roxrun %s: %s\n(roxrun %s --help lists its flags)\n", c.Name, fmt.Sprintf(format, args...), c.Name)
	return 2
}

// Set reports whether the flag was given on the command line.
func (c *Command) Set(name string) bool {
	found := false
	c.Flags.Visit(func(f *flag.Flag) { found = found || f.Name == name })
	return found
}

// Given returns "--name value" as the user gave it, for error messages.
func (c *Command) Given(name string) string {
	f := c.Flags.Lookup(name)
	if f == nil {
		return "--" + name
	}
	if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
		return "--" + name
	}
	return fmt.Sprintf("--%s %s", name, f.Value.String())
}

// Needs returns an error message when a flag that only means something beside another was given
// without it (e.g. litmus --seed without --run); "" when all is well.
func (c *Command) Needs(flagName, needed string) string {
	if c.Set(flagName) && !c.Set(needed) {
		return fmt.Sprintf("%s needs --%s", c.Given(flagName), needed)
	}
	return ""
}

// IsTerminal reports whether w is a terminal: progress lines go there and nowhere else.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// Progress writes one overwritten status line to a terminal ("bench [3/24] put_bw 4096 B") and
// nothing anywhere else.
type Progress struct {
	w  io.Writer // nil: not a terminal
	on bool
}

// NewProgress returns the progress line of stderr: nothing unless stderr is a terminal.
func NewProgress(stderr io.Writer) *Progress {
	if !IsTerminal(stderr) {
		return &Progress{}
	}
	return &Progress{w: stderr}
}

// Show replaces the status line.
func (p *Progress) Show(format string, args ...any) {
	if p.w == nil {
		return
	}
	fmt.Fprintf(p.w, "\r\033[K"+format, args...)
	p.on = true
}

// Done clears the status line, so that what follows starts on a clean line.
func (p *Progress) Done() {
	if p.w != nil && p.on {
		fmt.Fprint(p.w, "\r\033[K")
		p.on = false
	}
}

// LineWriter calls Fn with each complete line written to it (without the newline) and passes
// every byte on to Next (which may be nil).
type LineWriter struct {
	Next io.Writer
	Fn   func(string)
	mu   sync.Mutex // the PEs' output is copied by one goroutine each
	buf  []byte
}

func (l *LineWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	for {
		i := strings.IndexByte(string(l.buf), '\n')
		if i < 0 {
			break
		}
		l.Fn(string(l.buf[:i]))
		l.buf = l.buf[i+1:]
	}
	if l.Next != nil {
		return l.Next.Write(p)
	}
	return len(p), nil
}
