package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// goTestJSON runs go test -json over the fixture module's packages and returns its output.
func goTestJSON(t *testing.T, pkgs ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", append([]string{"test", "-json", "-count=1"}, pkgs...)...)
	cmd.Dir = filepath.Join("testdata", "fixture")
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=")
	out, err := cmd.Output()
	if ctx.Err() != nil {
		t.Fatalf("go test in the fixture did not finish: %v", ctx.Err())
	}
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		t.Fatalf("go test in the fixture: %v", err)
	}
	return out
}

func TestFilterFailures(t *testing.T) {
	in := goTestJSON(t, "./...")
	var out, raw bytes.Buffer
	failed, err := filter(bytes.NewReader(in), &out, &raw, "plain")
	if err != nil {
		t.Fatal(err)
	}
	if !failed {
		t.Errorf("a failing subtest, a panic and a build error: filter says nothing failed")
	}
	got := out.String()
	for _, want := range []string{
		"broken sub: want 1, got 2", "--- FAIL: TestBad/broken", "--- FAIL: TestBad ",
		"panic: boom in TestPanics", "FAIL\tfixture/badpkg", "ok  \tfixture/okpkg",
		"undefined: undefinedName", "FAIL\tfixture/nobuild [build failed]",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "not shown") {
		t.Errorf("output shows what passed or skipped (\"not shown\"):\n%s", got)
	}
	if !strings.HasSuffix(got, "\nFAIL\n") {
		t.Errorf("output does not end with go test's closing FAIL:\n%s", got)
	}
	if n := bytes.Count(raw.Bytes(), []byte("\n")); n != bytes.Count(in, []byte("\n")) {
		t.Errorf("saved %d lines of %d", n, bytes.Count(in, []byte("\n")))
	}
	if !bytes.Contains(raw.Bytes(), []byte(`"Label":"plain"`)) {
		t.Errorf("saved JSON lacks the label")
	}
}

func TestFilterPass(t *testing.T) {
	in := goTestJSON(t, "./okpkg")
	var out bytes.Buffer
	failed, err := filter(bytes.NewReader(in), &out, &bytes.Buffer{}, "")
	if err != nil {
		t.Fatal(err)
	}
	if failed {
		t.Errorf("a passing package: filter says something failed")
	}
	if got := out.String(); !strings.HasPrefix(got, "ok  \tfixture/okpkg\t") || strings.Count(got, "\n") != 1 {
		t.Errorf("a passing package prints %q, want its ok line alone", got)
	}
}

// A stream cut short (go test killed) fails, and shows what the package printed.
func TestFilterTruncated(t *testing.T) {
	in := `{"Action":"start","Package":"p"}
{"Action":"output","Package":"p","Test":"TestHang","Output":"=== RUN   TestHang\n"}
{"Action":"output","Package":"p","Test":"TestHang","Output":"waiting for PE 1\n"}
`
	var out bytes.Buffer
	failed, err := filter(strings.NewReader(in), &out, &bytes.Buffer{}, "")
	if err != nil {
		t.Fatal(err)
	}
	if !failed || !strings.Contains(out.String(), "waiting for PE 1") {
		t.Errorf("unfinished package: failed %v, output %q", failed, out.String())
	}
}

func TestSlowest(t *testing.T) {
	dir := t.TempDir()
	a := filepath.Join(dir, "a.json")
	b := filepath.Join(dir, "b.json")
	os.WriteFile(a, []byte(`{"Action":"pass","Package":"p","Test":"TestA","Elapsed":3}
{"Action":"pass","Package":"p","Test":"TestA/sub","Elapsed":9}
{"Action":"fail","Package":"p","Test":"TestB","Elapsed":7}
{"Action":"pass","Package":"p","Elapsed":20}
not json
`), 0o644)
	os.WriteFile(b, []byte(`{"Action":"pass","Package":"q","Test":"TestC","Elapsed":5,"Label":"race"}
{"Action":"skip","Package":"q","Test":"TestD","Elapsed":1,"Label":"race"}
`), 0o644)
	var out bytes.Buffer
	if err := slowest(&out, 3, []string{a, b}); err != nil {
		t.Fatal(err)
	}
	want := "slowest 3 tests:\n" +
		"    7.00s  p TestB [fail]\n" +
		"    5.00s  q TestC (race)\n" +
		"    3.00s  p TestA\n"
	if out.String() != want {
		t.Errorf("got\n%s\nwant\n%s", out.String(), want)
	}
	if err := slowest(&out, 3, []string{filepath.Join(dir, "missing.json")}); err == nil {
		t.Errorf("a missing file: no error")
	}
}
