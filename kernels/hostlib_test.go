package kernels

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestHostLibrary runs the device library's logic on the CPU (testdata/hostlib.cc): paths and
// thresholds, bounds checks, copies at every small offset pair, typed p/g, AMO semantics, the ring
// descriptors, flow control and abort. The arch layer's host fallbacks stand in for the GPU
// instructions, which TestMapping checks and TestGPU runs.
func TestHostLibrary(t *testing.T) {
	var cxx string
	for _, c := range []string{"clang-19", "clang++", "g++"} {
		if p, err := exec.LookPath(c); err == nil {
			cxx = p
			break
		}
	}
	if cxx == "" {
		t.Skip("no C++ compiler (clang-19, clang++, g++) in PATH")
	}
	exe := filepath.Join(t.TempDir(), "hostlib")
	if out, err := exec.Command(cxx, cpuArgs(exe, "testdata/hostlib.cc", "-O1")...).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", cxx, err, out)
	}
	out, err := exec.Command(exe).CombinedOutput()
	text := string(out)
	if err != nil || !strings.Contains(text, "done") {
		t.Fatalf("hostlib: %v\n%s", err, text)
	}
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, "FAIL") {
			t.Error(l)
		}
	}
	t.Log(strings.TrimSpace(text[strings.LastIndex(text, "done"):]))
}
