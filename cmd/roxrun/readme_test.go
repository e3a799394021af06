package main

import (
	"os"
	"os/exec"
	"sort"
	"strings"
	"testing"

	"github.com/roxamen/roxamen/internal/env"
	"github.com/roxamen/roxamen/tools/roxruntest"
)

// The README's knobs table is internal/env's: every knob, its type, default and meaning.
func TestReadmeKnobs(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	const begin, end = "<!-- knobs: internal/env.Markdown(); TestReadmeKnobs checks it -->\n", "<!-- end of knobs -->"
	_, rest, ok1 := strings.Cut(string(readme), begin)
	table, _, ok2 := strings.Cut(rest, end)
	if !ok1 || !ok2 {
		t.Fatalf("README.md lacks the knobs table between %q and %q", begin, end)
	}
	if want := env.Markdown(); table != want {
		t.Errorf("README.md's knobs table is stale; internal/env gives:\n%s", want)
	}
}

// The README's first program is examples/quickstart, whole, and it runs as the README shows.
func TestReadmeQuickstart(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("../../examples/quickstart/main.go")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), "```go\n"+string(src)+"```\n") {
		t.Fatal("README.md's first program is not examples/quickstart/main.go as it stands")
	}
	bin := roxruntest.Binary(t)
	cmd := exec.Command(bin, "-n", "4", "./examples/quickstart")
	cmd.Dir = "../.."
	cmd.Env = append(os.Environ(), "ROX_DEVICE=host")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("roxrun -n 4 ./examples/quickstart: %v\n%s", err, out)
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if strings.HasPrefix(l, "[pe ") {
			lines = append(lines, l)
		}
	}
	sort.Strings(lines)
	want := []string{
		"[pe 0] PE 0 of 4: from the left 3, sum 6",
		"[pe 1] PE 1 of 4: from the left 0, sum 6",
		"[pe 2] PE 2 of 4: from the left 1, sum 6",
		"[pe 3] PE 3 of 4: from the left 2, sum 6",
	}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("quickstart printed:\n%s\nwant:\n%s", out, strings.Join(want, "\n"))
	}
}
