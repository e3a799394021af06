package cuda

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/roxamen/roxamen/device"
)

// TestAbsentOrPresent: without libcuda.so.1 (CI) every entry point reports ErrNoDriver and
// names the library; with it but no GPU, ErrNoDevice. Never a panic.
func TestAbsentOrPresent(t *testing.T) {
	n, err := New().Count()
	if err == nil {
		if n <= 0 {
			t.Fatalf("Count() = %d with no error", n)
		}
		t.Skipf("libcuda.so.1 loaded and reports %d devices: the GPU tests cover it", n)
	}
	if !errors.Is(err, device.ErrNoDriver) && !errors.Is(err, device.ErrNoDevice) {
		t.Fatalf("Count() error %v is neither ErrNoDriver nor ErrNoDevice", err)
	}
	var de *device.Error
	if !errors.As(err, &de) {
		t.Fatalf("Count() error %T is not a *device.Error", err)
	}
	if errors.Is(err, device.ErrNoDriver) && !strings.Contains(err.Error(), Library) {
		t.Fatalf("error %q does not name %s", err, Library)
	}
	if _, err2 := New().Open(0); err2 == nil || err2.Error() != err.Error() {
		t.Fatalf("Open(0) = %v, want the same error as Count: %v", err2, err)
	}
	if _, err2 := DriverVersion(); err2 == nil {
		t.Fatal("DriverVersion succeeded without a driver")
	}
	if os.Getenv("ROX_TEST_GPU") != "" {
		t.Fatalf("ROX_TEST_GPU is set but there is no usable CUDA device: %v", err)
	}
}

func TestResult(t *testing.T) {
	if check("cuX", Success, "") != nil {
		t.Fatal("check(CUDA_SUCCESS) is an error")
	}
	cases := []struct {
		r    Result
		name string
		kind error
	}{
		{ErrorInvalidValue, "CUDA_ERROR_INVALID_VALUE", device.ErrInvalid},
		{ErrorNoDevice, "CUDA_ERROR_NO_DEVICE", device.ErrNoDevice},
		{ErrorNotReady, "CUDA_ERROR_NOT_READY", device.ErrNotReady},
		{ErrorNotSupported, "CUDA_ERROR_NOT_SUPPORTED", device.ErrNotSupported},
		{ErrorOutOfMemory, "CUDA_ERROR_OUT_OF_MEMORY", nil},
	}
	for _, c := range cases {
		err := check("cuMemAlloc_v2", c.r, "size=0")
		if !errors.Is(err, c.r) {
			t.Errorf("%v: errors.Is(err, Result(%d)) is false", err, c.r)
		}
		if c.kind != nil && !errors.Is(err, c.kind) {
			t.Errorf("%v: errors.Is(err, %v) is false", err, c.kind)
		}
		if errors.Is(err, Result(9999)) {
			t.Errorf("%v matches an unrelated Result", err)
		}
		for _, want := range []string{"cuMemAlloc_v2", "size=0", c.name} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q lacks %q", err, want)
			}
		}
	}
	if s := Result(12345).Error(); !strings.Contains(s, "12345") {
		t.Errorf("unknown Result prints %q", s)
	}
}

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
