package cuda

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestPTXUpToDate rebuilds testdata/kernels.ptx with clang-19 when it is installed and fails when
// the committed file differs from what the source produces.
func TestPTXUpToDate(t *testing.T) {
	clang, err := exec.LookPath("clang-19")
	if err != nil {
		t.Skip("clang-19 not installed: cannot check testdata/kernels.ptx")
	}
	out := filepath.Join(t.TempDir(), "kernels.ptx")
	cmd := exec.Command(clang, ptxFlags(out, "kernels.cu")...)
	cmd.Dir = "testdata"
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", cmd, err, b)
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, kernelsPTX) {
		t.Fatalf("testdata/kernels.ptx is stale: regenerate with\n  cd device/cuda/testdata && clang-19 %s",
			strings.Join(ptxFlags("kernels.ptx", "kernels.cu"), " "))
	}
}

func ptxFlags(out, src string) []string {
	return []string{"-x", "cuda", "--cuda-gpu-arch=sm_90", "--cuda-device-only", "-nocudainc", "-nocudalib",
		"-O2", "-S", "-o", out, src}
}
