package hip

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/roxamen/roxamen/device"
)

// TestAbsentOrPresent: without libamdhip64 every entry point reports ErrNoDriver naming the
// files tried; with it (Debian's libamdhip64-5 in CI) but no AMD GPU, ErrNoDevice naming the
// call. Never a panic. A machine with an AMD GPU skips: there is no AMD GPU test here yet.
func TestAbsentOrPresent(t *testing.T) {
	n, err := New().Count()
	if err == nil {
		if n <= 0 {
			t.Fatalf("Count() = %d with no error", n)
		}
		t.Skipf("%s reports %d AMD devices", Loaded(), n)
	}
	t.Logf("Count(): %v", err)
	var de *device.Error
	if !errors.As(err, &de) {
		t.Fatalf("Count() error %T (%v) is not a *device.Error", err, err)
	}
	switch {
	case errors.Is(err, device.ErrNoDriver):
		if Loaded() != "" {
			t.Fatalf("ErrNoDriver but %s loaded", Loaded())
		}
		for _, lib := range Libraries {
			if !strings.Contains(err.Error(), lib) {
				t.Fatalf("error %q does not name %s", err, lib)
			}
		}
	case errors.Is(err, device.ErrNoDevice):
		if Loaded() == "" {
			t.Fatal("ErrNoDevice but no library loaded")
		}
		if !strings.Contains(err.Error(), "hip") {
			t.Fatalf("error %q does not name the call", err)
		}
	default:
		t.Fatalf("Count() error %v is neither ErrNoDriver nor ErrNoDevice", err)
	}
	if _, err2 := New().Open(0); err2 == nil || err2.Error() != err.Error() {
		t.Fatalf("Open(0) = %v, want the same error as Count: %v", err2, err)
	}
	if os.Getenv("ROX_TEST_HIP") != "" {
		t.Fatalf("ROX_TEST_HIP is set but there is no usable AMD device: %v", err)
	}
}

// TestLibraryInstalled fails when Debian's libamdhip64 is installed but does not load, so the
// "library present, no device" path above is really exercised where CI has the package.
func TestLibraryInstalled(t *testing.T) {
	var found string
	for _, dir := range []string{"/usr/lib/x86_64-linux-gnu", "/opt/rocm/lib", "/usr/lib64"} {
		for _, lib := range Libraries {
			if _, err := os.Stat(dir + "/" + lib); err == nil && found == "" {
				found = dir + "/" + lib
			}
		}
	}
	if found == "" {
		t.Skip("no libamdhip64 installed")
	}
	New().Count()
	if Loaded() == "" {
		t.Fatalf("%s is installed but did not load: %v", found, load())
	}
	if v, err := RuntimeVersion(); err == nil && v <= 0 {
		t.Fatalf("RuntimeVersion = %d", v)
	}
}

func TestResult(t *testing.T) {
	if check("hipX", Success, "") != nil {
		t.Fatal("check(hipSuccess) is an error")
	}
	for _, c := range []struct {
		r    Result
		name string
		kind error
	}{
		{ErrorInvalidValue, "hipErrorInvalidValue", device.ErrInvalid},
		{ErrorNoDevice, "hipErrorNoDevice", device.ErrNoDevice},
		{ErrorNotReady, "hipErrorNotReady", device.ErrNotReady},
		{ErrorNotSupported, "hipErrorNotSupported", device.ErrNotSupported},
	} {
		err := check("hipMalloc", c.r, "size=0")
		if !errors.Is(err, c.r) || !errors.Is(err, c.kind) || errors.Is(err, Result(9999)) {
			t.Errorf("%v: errors.Is wrong for %d / %v", err, c.r, c.kind)
		}
		for _, want := range []string{"hipMalloc", "size=0", c.name} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q lacks %q", err, want)
			}
		}
	}
}

func TestArchName(t *testing.T) {
	buf := make([]byte, 2048)
	copy(buf, "AMD Instinct MI300X")
	copy(buf[900:], "gfx942:sramecc+:xnack-")
	if got := archName(buf); got != "gfx942" {
		t.Fatalf("archName = %q, want gfx942", got)
	}
	copy(buf[900:], "gfx90a\x00")
	if got := archName(buf); got != "gfx90a" {
		t.Fatalf("archName = %q, want gfx90a", got)
	}
	// "gfx" inside the marketing name (first 256 bytes) is not taken.
	buf2 := make([]byte, 1024)
	copy(buf2, "x gfx1100")
	if got := archName(buf2); got != "" {
		t.Fatalf("archName = %q, want empty", got)
	}
}
