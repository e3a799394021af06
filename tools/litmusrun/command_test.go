package litmusrun

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/roxamen/roxamen/tools/roxruntest"
)

func litmusFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("../../memmodel/testdata/*.litmus")
	if err != nil || len(files) < 40 {
		t.Fatalf("testdata: %d files, %v", len(files), err)
	}
	return files
}

func runLitmus(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	rc := Main(append([]string{"litmus"}, args...), &out, &errb)
	return rc, out.String(), errb.String()
}

func TestLitmusCheckSuite(t *testing.T) {
	rc, out, errs := runLitmus(append([]string{"--check"}, litmusFiles(t)...)...)
	if rc != 0 {
		t.Fatalf("rc %d\n%s\n%s", rc, out, errs)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) < 41 {
		t.Fatalf("%d lines, want one per test and a summary", len(lines))
	}
	for _, l := range lines[:len(lines)-1] {
		f := strings.Fields(l)
		if len(f) != 4 || !strings.HasPrefix(f[1], "strict=") || !strings.HasPrefix(f[2], "bypass=") || f[3] != "ok" {
			t.Errorf("bad line %q", l)
		}
	}
	if !strings.Contains(lines[len(lines)-1], "0 mismatches") {
		t.Errorf("summary %q", lines[len(lines)-1])
	}
}

func writeLitmus(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "t.litmus")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLitmusCheckMismatch(t *testing.T) {
	p := writeLitmus(t, "SHMEM Wrong\nPE0 | PE1 ;\nput x@1 1 | wait y == 1 ;\nput y@1 1 | ld r0 x ;\nexists (1:r0=0)\nexpect strict=Forbidden bypass=Allowed\n")
	rc, out, _ := runLitmus("--check", p)
	if rc != 1 || !strings.Contains(out, "Wrong strict=Allowed(expected Forbidden) bypass=Allowed MISMATCH") {
		t.Fatalf("rc %d, output:\n%s", rc, out)
	}
	rc, out, _ = runLitmus("--check", "--mode", "bypass", p)
	if rc != 0 || !strings.Contains(out, "Wrong bypass=Allowed ok") {
		t.Fatalf("bypass only: rc %d, output:\n%s", rc, out)
	}
}

func TestLitmusPrint(t *testing.T) {
	rc, out, errs := runLitmus("--mode", "strict", "../../memmodel/testdata/MP+fence+wait.litmus")
	if rc != 0 {
		t.Fatalf("rc %d: %s", rc, errs)
	}
	for _, want := range []string{"Test MP+fence+wait strict", "States 1", "1:r0=1;", "Observation MP+fence+wait Never 0 1", "Verdict strict Forbidden"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestLitmusBadInput(t *testing.T) {
	bad := writeLitmus(t, "SHMEM Bad\nPE0 ;\nput x@1 ;\nexists (x@1=0)\n")
	cases := []struct {
		args []string
		want string
	}{
		{[]string{bad}, bad + ":3:9: want a number"},
		{[]string{"--mode", "weak", bad}, `--mode "weak"`},
		{[]string{}, "no litmus files"},
		{[]string{"--run", "-1", bad}, "--run -1"},
		{[]string{"/nonexistent.litmus"}, "/nonexistent.litmus"},
	}
	for _, c := range cases {
		rc, _, errs := runLitmus(c.args...)
		if rc != 2 || !strings.Contains(errs, c.want) {
			t.Errorf("%v: rc %d, stderr %q, want 2 and %q", c.args, rc, errs, c.want)
		}
	}
	a := writeLitmus(t, "SHMEM Same\nPE0 ;\nput x@1 1 ;\nexists (x@1=0)\n")
	b := writeLitmus(t, "SHMEM Same\nPE0 ;\nput x@1 2 ;\nexists (x@1=0)\n")
	if rc, _, errs := runLitmus("--check", a, b); rc != 2 || !strings.Contains(errs, "Same is defined differently") {
		t.Errorf("two different tests named Same: rc %d, %q", rc, errs)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--run", "1", "--object", a, "--mutation", "no-such", a}, `--mutation "no-such"`},
		{[]string{"--object", a, a}, "--object"},
		{[]string{"--run", "1", "--object", "/nonexistent.ptx", a}, "/nonexistent.ptx"},
	} {
		if rc, _, errs := runLitmus(c.args...); rc != 2 || !strings.Contains(errs, c.want) {
			t.Errorf("%v: rc %d, stderr %q, want 2 and %q", c.args, rc, errs, c.want)
		}
	}
}

// --run re-executes roxrun itself as the PEs, so it needs the real binary.
func TestLitmusRunHost(t *testing.T) {
	if testing.Short() {
		t.Skip("builds roxrun and starts multi-process jobs")
	}
	bin := roxruntest.Binary(t)
	cmd := exec.Command(bin, "litmus", "--run", "20", "../../memmodel/testdata/MP+fence+wait.litmus", "../../memmodel/testdata/IRIW+gets.litmus")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("roxrun litmus --run: %v\n%s", err, out)
	}
	for _, want := range []string{"ROX_ORDERING=strict", "ROX_ORDERING=bypass", "Test IRIW+gets Forbidden (strict)", "Observation MP+fence+wait Never 0 320", "Power (PE 0 on host", "strict, 16 copies per iteration)", "power: weak outcome seen on"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// --cat decides with the model file's axioms: the checked-in model.cat agrees with every expect
// line, and a model without fences makes MP+fence+wait a mismatch.
func TestLitmusCat(t *testing.T) {
	rc, out, errs := runLitmus(append([]string{"--check", "--cat", "../../memmodel/model.cat"}, litmusFiles(t)...)...)
	if rc != 0 || !strings.Contains(out, " 0 mismatches") {
		t.Fatalf("rc %d\n%s\n%s", rc, out, errs)
	}
	src, err := os.ReadFile("../../memmodel/model.cat")
	if err != nil {
		t.Fatal(err)
	}
	nofence := filepath.Join(t.TempDir(), "nofence.cat")
	os.WriteFile(nofence, []byte(strings.Replace(string(src), "let fence = pairs &", "let fence = pairs & [F] &", 1)), 0o644)
	rc, out, _ = runLitmus("--check", "--cat", nofence, "../../memmodel/testdata/MP+fence+wait.litmus")
	if rc != 1 || !strings.Contains(out, "MP+fence+wait strict=Allowed(expected Forbidden)") {
		t.Fatalf("model without fences: rc %d\n%s", rc, out)
	}
}

// LITMUS.md's example decides as it says.
func TestLitmusFormatExample(t *testing.T) {
	doc, err := os.ReadFile("../../memmodel/LITMUS.md")
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(doc), "```\nSHMEM ")
	body, _, ok2 := strings.Cut(after, "```")
	if !ok || !ok2 {
		t.Fatal("memmodel/LITMUS.md has no example")
	}
	p := writeLitmus(t, "SHMEM "+body)
	if rc, out, errs := runLitmus("--check", p); rc != 0 || !strings.Contains(out, " ok\n") {
		t.Fatalf("the example of memmodel/LITMUS.md: rc %d\n%s%s", rc, out, errs)
	}
}
