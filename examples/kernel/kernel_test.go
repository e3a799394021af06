package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestPTXUpToDate rebuilds allreduce.ptx from allreduce.hip with clang-19 (the go:generate line)
// and fails when the committed file differs.
func TestPTXUpToDate(t *testing.T) {
	clang, err := exec.LookPath("clang-19")
	if err != nil {
		t.Skip("clang-19 not installed")
	}
	out := filepath.Join(t.TempDir(), "allreduce.ptx")
	cmd := exec.Command(clang, "-x", "cuda", "--cuda-gpu-arch=sm_90", "--cuda-device-only", "-nocudainc", "-nocudalib",
		"-S", "-O3", "-Wall", "-Wextra", "-Werror", "-g0", "-fno-ident", "-I../../kernels/include", "-o", out, "allreduce.hip")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("clang-19: %v\n%s", err, b)
	}
	want, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	have, err := os.ReadFile("allreduce.ptx")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(have, want) {
		t.Fatal("allreduce.ptx is stale: run go generate ./examples/kernel")
	}
}
