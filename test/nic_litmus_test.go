package test

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestNICLitmus: the memory-model conformance suite (memmodel/testdata) runs every litmus test
// with every PE pair on the TCP transport (ROX_TRANSPORT=tcp forces the NIC path on one node)
// and fails on an outcome the model forbids.
func TestNICLitmus(t *testing.T) {
	files, err := filepath.Glob("../memmodel/testdata/*.litmus")
	if err != nil || len(files) == 0 {
		t.Fatalf("no litmus tests in ../memmodel/testdata: %v", err)
	}
	iters := "5" // the iterations are power (every test runs): 10 in the long run
	if long() {
		iters = "10"
	}
	r := roxrun(t, 10*time.Minute, []string{"ROX_TRANSPORT=tcp", "ROX_TIMEOUT=60s"}, append([]string{"litmus", "--run", iters, "--timeout", "9m"}, files...)...)
	if r.status != 0 {
		t.Fatalf("roxrun litmus --run with ROX_TRANSPORT=tcp: status %d\n%s\n%s", r.status, tail(r.stdout, 60), r.stderr)
	}
	if n := strings.Count(r.stdout, "\nObservation "); n < len(files) {
		t.Fatalf("%d observations for %d litmus tests\n%s", n, len(files), tail(r.stdout, 40))
	}
}

// TestNICLitmusHosts: the conformance suite with its PEs in two network namespaces (2 each), so
// that PEs 0,1 and 2,3 share memory and every other pair crosses the NIC path.
func TestNICLitmusHosts(t *testing.T) {
	nt := hostsNet(t)
	files, err := filepath.Glob("../memmodel/testdata/*.litmus")
	if err != nil || len(files) == 0 {
		t.Fatalf("no litmus tests in ../memmodel/testdata: %v", err)
	}
	args := append([]string{"litmus", "--run", "5", "--timeout", "9m"}, hostsArgs(nt)...)
	r := roxrun(t, 10*time.Minute, []string{"ROX_TIMEOUT=60s"}, append(args, files...)...)
	if r.status != 0 {
		t.Fatalf("roxrun litmus --run --hosts: status %d\n%s\n%s", r.status, tail(r.stdout, 60), r.stderr)
	}
	if n := strings.Count(r.stdout, "\nObservation "); n < len(files) {
		t.Fatalf("%d observations for %d litmus tests\n%s", n, len(files), tail(r.stdout, 40))
	}
}
