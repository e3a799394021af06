package shmem

import (
	"strings"
	"testing"
)

// The version names the module and one hash over the embedded device code, and every object's
// own hash, so that two builds with other device code differ.
func TestVersion(t *testing.T) {
	v := Version()
	if v.Module == "" {
		t.Error("Version().Module is empty")
	}
	if len(v.Objects) == 0 {
		t.Fatal("Version() lists no device code objects")
	}
	for n, h := range v.Objects {
		if len(h) != 12 || strings.Trim(h, "0123456789abcdef") != "" {
			t.Errorf("object %s: hash %q, want 12 hex digits", n, h)
		}
	}
	s := v.String()
	if !strings.Contains(s, "device code ") || !strings.Contains(s, v.Module) {
		t.Errorf("Version().String() = %q: lacks the module or the device code hash", s)
	}
	other := v
	other.Objects = map[string]string{}
	for n, h := range v.Objects {
		other.Objects[n] = h
	}
	for n := range other.Objects {
		other.Objects[n] = "000000000000"
		break
	}
	if other.String() == s {
		t.Error("changing one object's hash left the version string the same")
	}
}
