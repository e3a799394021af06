// Package abitest checks Go mirrors of C declarations against the installed headers: a test
// gives a small C program that prints one "name value" line per size, offset or constant, and
// abitest compiles it, runs it and compares every line with the Go side, in both directions (a
// line Go does not mirror, a mirror the program does not print). It is the one harness behind
// the ABI tests of the purego bindings and the parity tests of the headers shared by C and Go.
package abitest

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/roxamen/roxamen/internal/testkit"
)

// Program is a C program that prints "name value" lines.
type Program struct {
	Source string
	Cflags []string // -I and -std flags
	// Header is the header whose absence makes the test skip ("pmix.h"); Install says how to
	// get it ("apt-get install libpmix-dev").
	Header, Install string
	// Require names an environment variable that, set, turns a skip (no compiler, no header)
	// into a failure, for the machines that must have them (testkit.Required).
	Require string
}

func (p Program) skip(t testing.TB, format string, args ...any) {
	t.Helper()
	if p.Require == "" {
		t.Skipf(format, args...)
	}
	testkit.Need(t, p.Require, format, args...)
}

// Compiler returns the C compiler: $CC, else the first of gcc, cc, clang, clang-19 in PATH.
// None: the test skips (fails when require is set, see Program.Require).
func Compiler(t testing.TB, require string) string {
	t.Helper()
	names := []string{"gcc", "cc", "clang", "clang-19"}
	if cc := os.Getenv("CC"); cc != "" {
		names = []string{cc}
	}
	for _, cc := range names {
		if p, err := exec.LookPath(cc); err == nil {
			return p
		}
	}
	Program{Require: require}.skip(t, "no C compiler (%s) in PATH", strings.Join(names, ", "))
	return ""
}

// Run compiles and runs the program and returns its lines, name to value.
func Run(t testing.TB, p Program) map[string]string {
	t.Helper()
	cc := Compiler(t, p.Require)
	dir := t.TempDir()
	src := filepath.Join(dir, "abi.c")
	if err := os.WriteFile(src, []byte(p.Source), 0o644); err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(dir, "abi")
	args := append(append([]string(nil), p.Cflags...), "-o", exe, src)
	if out, err := exec.Command(cc, args...).CombinedOutput(); err != nil {
		if p.Header != "" && strings.Contains(string(out), p.Header) && strings.Contains(string(out), "No such file") {
			line, _, _ := strings.Cut(string(out), "\n")
			p.skip(t, "no %s (%s): %s", p.Header, p.Install, line)
		}
		t.Fatalf("%s %v: %v\n%s\n%s", cc, args, err, out, p.Source)
	}
	out, err := exec.Command(exe).Output()
	if err != nil {
		t.Fatalf("the ABI program: %v", err)
	}
	got := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		name, val, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			t.Fatalf("bad line %q", sc.Text())
		}
		got[name] = val
	}
	return got
}

// Check runs the program and compares each line with nums (integers: sizes, offsets,
// constants) or strs (strings such as attribute keys). Every line must have a Go mirror and every
// mirror a line.
func Check(t testing.TB, p Program, nums map[string]int64, strs map[string]string) {
	t.Helper()
	got := Run(t, p)
	for name, val := range got {
		if s, ok := strs[name]; ok {
			if s != val {
				t.Errorf("%s: Go %q, C %q", name, s, val)
			}
			continue
		}
		g, ok := nums[name]
		if !ok {
			t.Errorf("%s: the C program prints it but Go has no mirror", name)
			continue
		}
		c, err := strconv.ParseInt(val, 10, 64)
		if err != nil {
			t.Errorf("%s: bad value %q", name, val)
			continue
		}
		if g != c {
			t.Errorf("%s: Go %d, C %d", name, g, c)
		}
	}
	for name := range nums {
		if _, ok := got[name]; !ok {
			t.Errorf("%s: Go mirrors it but the C program does not check it", name)
		}
	}
	for name := range strs {
		if _, ok := got[name]; !ok {
			t.Errorf("%s: Go mirrors it but the C program does not check it", name)
		}
	}
}
