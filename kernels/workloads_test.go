package kernels

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/roxamen/roxamen/kernels/internal/build"
)

// TestWorkloadObject: every target's workload object is there, separate from the runtime's, with
// every entry point and the state symbol.
func TestWorkloadObject(t *testing.T) {
	for _, arch := range Arches {
		b, err := WorkloadObject(arch)
		if err != nil {
			t.Fatalf("WorkloadObject(%q): %v", arch, err)
		}
		rt, _ := Object(arch)
		if bytes.Equal(b, rt) {
			t.Errorf("%s: the workload object is the runtime's", arch)
		}
		for _, k := range append(WorkloadKernels, StateSymbol) {
			if !bytes.Contains(b, []byte(k)) {
				t.Errorf("%s: workload object lacks %s", arch, k)
			}
		}
		if strings.HasPrefix(arch, "gfx") != bytes.HasPrefix(b, []byte("\x7fELF")) {
			t.Errorf("%s: wrong object kind", arch)
		}
	}
	if _, err := WorkloadObject("gfx1100"); err == nil || !strings.Contains(err.Error(), `"gfx1100"`) {
		t.Errorf("WorkloadObject(gfx1100): %v", err)
	}
}

// TestRegenerateWorkloads rebuilds the workload objects and compares them with the committed ones.
func TestRegenerateWorkloads(t *testing.T) {
	t.Parallel() // clang compiles, seconds each: two at a time with the other compiling tests
	needClang(t)
	out := t.TempDir()
	if err := build.Workloads(".", out); err != nil {
		t.Fatal(err)
	}
	for _, target := range build.Targets {
		name := build.WorkloadObjectName(target)
		got, err := os.ReadFile(filepath.Join(out, name))
		if err != nil {
			t.Fatal(err)
		}
		want, err := os.ReadFile(filepath.Join("obj", name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("obj/%s differs from a rebuild (%d vs %d bytes): run go generate ./kernels and commit", name, len(want), len(got))
		}
	}
}
