package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A malformed knob stops roxrun before any PE starts: one message naming every bad knob, exit 2.
func TestRunChecksKnobsFirst(t *testing.T) {
	marker := filepath.Join(t.TempDir(), "started")
	t.Setenv("ROX_HEAP_SIZE", "100")
	t.Setenv("ROX_TIMEOUT", "soon")
	var out, errOut bytes.Buffer
	code := dispatch([]string{"-n", "2", "/bin/sh", "-c", "touch " + marker}, &out, &errOut)
	if code != 2 {
		t.Fatalf("exit %d, want 2; stderr:\n%s", code, errOut.String())
	}
	msg := errOut.String()
	for _, want := range []string{"ROX_HEAP_SIZE=100", "ROX_TIMEOUT=soon", "no PE was started"} {
		if !strings.Contains(msg, want) {
			t.Errorf("stderr lacks %q:\n%s", want, msg)
		}
	}
	if strings.Count(msg, "ROX_HEAP_SIZE") != 1 {
		t.Errorf("the heap knob is reported more than once:\n%s", msg)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("a PE ran although a knob was malformed")
	}
}

// info --json is one object that tools can read; a malformed knob marks it and exits 1.
func TestInfoJSON(t *testing.T) {
	t.Setenv("ROX_TIMEOUT", "0")
	var out, errOut bytes.Buffer
	code := dispatch([]string{"info", "--json"}, &out, &errOut)
	var r infoReport
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("info --json is not one JSON object: %v\n%s", err, out.String())
	}
	if code != 1 || r.OK {
		t.Errorf("ROX_TIMEOUT=0: exit %d, ok %v; want 1, false", code, r.OK)
	}
	found := false
	for _, k := range r.Knobs {
		if k.Name == "ROX_TIMEOUT" {
			found = true
			if !strings.Contains(k.Error, "positive") || k.Type != "duration" || k.Default != "30s" {
				t.Errorf("ROX_TIMEOUT in --json: %+v", k)
			}
		}
	}
	if !found || r.Version == "" || len(r.Transports) == 0 {
		t.Errorf("--json lacks the knob, the version or the transports: %+v", r)
	}
}
