// Testlog turns `go test -json` into the output a plain `go test` prints, keeps the JSON, and
// lists the slowest tests of a run. test/run.sh pipes every go test through it:
//
//	go test -json ./... | testlog filter -save run.json [-label race]
//	testlog slowest -n 10 run.json race.json
//
// filter prints, as go test without -v does, each package's closing line (ok, FAIL, no test
// files), the build errors, and for a package that failed whatever it printed outside its tests
// and the whole output of every test that failed or never finished (a panic, a timeout). It exits 1 when a test, a
// package or a build failed, so that a pipe under `set -o pipefail` fails with the go test in it.
// slowest prints the top-level tests with the largest elapsed times over all the files it is
// given, each with its package and the label its file was saved under.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

// event is one line of `go test -json` (cmd/test2json's TestEvent).
type event struct {
	Action      string
	Package     string
	Test        string
	Elapsed     float64
	Output      string
	ImportPath  string
	FailedBuild string
}

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	switch os.Args[1] {
	case "filter":
		fs := flag.NewFlagSet("filter", flag.ExitOnError)
		save := fs.String("save", "", "append the JSON read to this file")
		label := fs.String("label", "", "label of this run in the saved file (e.g. race)")
		fs.Parse(os.Args[2:])
		var raw io.Writer = io.Discard
		if *save != "" {
			f, err := os.OpenFile(*save, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
			if err != nil {
				fmt.Fprintln(os.Stderr, "testlog:", err)
				os.Exit(2)
			}
			defer f.Close()
			raw = f
		}
		failed, err := filter(os.Stdin, os.Stdout, raw, *label)
		if err != nil {
			fmt.Fprintln(os.Stderr, "testlog:", err)
			os.Exit(2)
		}
		if failed {
			os.Exit(1)
		}
	case "slowest":
		fs := flag.NewFlagSet("slowest", flag.ExitOnError)
		n := fs.Int("n", 10, "how many tests to list")
		fs.Parse(os.Args[2:])
		if err := slowest(os.Stdout, *n, fs.Args()); err != nil {
			fmt.Fprintln(os.Stderr, "testlog:", err)
			os.Exit(2)
		}
	default:
		usage()
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: testlog filter [-save FILE] [-label NAME] < go-test-json\n       testlog slowest [-n N] FILE...")
	os.Exit(2)
}

// line is one output line of a package, with the test that printed it ("" for the package).
type line struct{ test, text string }

// pkgLog is what a package printed so far, and how each of its tests ended.
type pkgLog struct {
	lines  []line
	ended  map[string]string // test -> pass, fail or skip
	failed bool
}

// filter reads go test -json from in, writes the readable output to out and each line read to
// raw (with label added), and says whether anything failed.
func filter(in io.Reader, out, raw io.Writer, label string) (failed bool, err error) {
	pkgs := map[string]*pkgLog{}
	get := func(p string) *pkgLog {
		l := pkgs[p]
		if l == nil {
			l = &pkgLog{ended: map[string]string{}}
			pkgs[p] = l
		}
		return l
	}
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	w := bufio.NewWriter(out)
	defer w.Flush()
	for sc.Scan() {
		b := sc.Bytes()
		var e event
		if len(b) == 0 || b[0] != '{' || json.Unmarshal(b, &e) != nil {
			// Not an event (go test's own messages): print it as it is.
			fmt.Fprintf(w, "%s\n", b)
			w.Flush()
			continue
		}
		if label != "" {
			var m map[string]any
			if json.Unmarshal(b, &m) == nil {
				m["Label"] = label
				b, _ = json.Marshal(m)
			}
		}
		fmt.Fprintf(raw, "%s\n", b)
		switch e.Action {
		case "build-output":
			fmt.Fprint(w, e.Output)
			w.Flush()
		case "build-fail":
			failed = true
		case "output":
			l := get(e.Package)
			l.lines = append(l.lines, line{e.Test, e.Output})
		case "pass", "skip", "fail":
			if e.Action == "fail" {
				failed = true
			}
			l := get(e.Package)
			if e.Test != "" {
				l.ended[e.Test] = e.Action
				continue
			}
			l.failed = e.Action == "fail"
			printPackage(w, l)
			w.Flush()
			delete(pkgs, e.Package)
		}
	}
	if err := sc.Err(); err != nil {
		return true, err
	}
	// A package with no closing event (go test killed): print what it said.
	for _, l := range pkgs {
		l.failed = true
		printPackage(w, l)
		failed = true
	}
	if failed {
		fmt.Fprintln(w, "FAIL")
	}
	return failed, nil
}

// printPackage prints what go test without -v prints for a package: the package's own lines, and
// on failure the lines of every test that failed or never ended.
func printPackage(w io.Writer, l *pkgLog) {
	for _, ln := range l.lines {
		switch {
		case ln.test == "":
			// A package that passed says only its closing line, as in go test's package list mode.
			if l.failed || strings.HasPrefix(ln.text, "ok  ") || strings.HasPrefix(ln.text, "?   ") {
				fmt.Fprint(w, ln.text)
			}
		case l.failed:
			if end := l.ended[ln.test]; end != "pass" && end != "skip" {
				fmt.Fprint(w, ln.text)
			}
		}
	}
}

// timed is one top-level test's result.
type timed struct {
	label, pkg, test, action string
	elapsed                  float64
}

// slowest prints the n top-level tests of the files that took longest.
func slowest(out io.Writer, n int, files []string) error {
	var all []timed
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			return err
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 64<<20)
		for sc.Scan() {
			var e struct {
				event
				Label string
			}
			if json.Unmarshal(sc.Bytes(), &e) != nil || e.Test == "" || strings.Contains(e.Test, "/") {
				continue
			}
			if e.Action == "pass" || e.Action == "fail" || e.Action == "skip" {
				all = append(all, timed{e.Label, e.Package, e.Test, e.Action, e.Elapsed})
			}
		}
		f.Close()
		if err := sc.Err(); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].elapsed > all[j].elapsed })
	if len(all) > n {
		all = all[:n]
	}
	fmt.Fprintf(out, "slowest %d tests:\n", len(all))
	for _, t := range all {
		what := t.pkg + " " + t.test
		if t.label != "" {
			what += " (" + t.label + ")"
		}
		if t.action != "pass" {
			what += " [" + t.action + "]"
		}
		fmt.Fprintf(out, "%8.2fs  %s\n", t.elapsed, what)
	}
	return nil
}
