package hip

import (
	"os"
	"testing"
)

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
		t.Fatalf("%s is installed but did not load: %v", found, drv.Load())
	}
	if v, err := RuntimeVersion(); err == nil && v <= 0 {
		t.Fatalf("RuntimeVersion = %d", v)
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
