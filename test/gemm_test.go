package test

// The fused GEMM + all-reduce / reduce-scatter example (examples/gemm) in real roxrun jobs, at
// shapes that are not multiples of the tile: the fused result must equal the unfused one bit for
// bit and both the float64 reference, in both ROX_ORDERING modes and across namespace hosts.

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

var (
	gemmOnce sync.Once
	gemmErr  error
)

// gemmBin builds examples/gemm into bin once (TestMain builds the other examples).
func gemmBin(t *testing.T) string {
	t.Helper()
	gemmOnce.Do(func() {
		cmd := exec.Command("go", "build", "-o", filepath.Join(bin, "gemm"), "./examples/gemm")
		cmd.Dir = ".."
		cmd.Env = append(cmd.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			gemmErr = fmt.Errorf("building examples/gemm: %v\n%s", err, out)
		}
	})
	if gemmErr != nil {
		t.Fatal(gemmErr)
	}
	return filepath.Join(bin, "gemm")
}

func TestGEMMFused(t *testing.T) {
	prog := gemmBin(t)
	shapes := [][]string{
		{"-m", "77", "-n", "53", "-k", "29", "-tile", "16"}, // 5x4 tiles, ragged edges
		{"-m", "13", "-n", "200", "-k", "7", "-tile", "32"}, // a single tile row: some PEs own no rows
	}
	// Both memory modes at 4 PEs; 2 and 8 PEs in the default (strict) one, to keep CI short.
	jobs := []struct {
		n   int
		ord string
	}{{2, "strict"}, {4, "strict"}, {4, "bypass"}, {8, "strict"}}
	for _, j := range jobs {
		n, ord := j.n, j.ord
		for _, op := range []string{"allreduce", "reducescatter"} {
			t.Run(fmt.Sprintf("%d/%s/%s", n, op, ord), func(t *testing.T) {
				for _, sh := range shapes {
					args := append([]string{"-n", fmt.Sprint(n), prog, "-op", op, "-steps", "2"}, sh...)
					r := roxrun(t, time.Minute, []string{"ROX_ORDERING=" + ord}, args...)
					mustPass(t, r, "fused = unfused bit for bit, both as the float64 reference: ok")
				}
			})
		}
	}
}

func TestGEMMFusedHosts(t *testing.T) {
	prog := gemmBin(t)
	args := hostsArgs(hostsNet(t))
	for _, op := range []string{"allreduce", "reducescatter"} {
		t.Run(op, func(t *testing.T) {
			r := roxrun(t, 2*time.Minute, nil, append(args, prog, "-op", op, "-m", "77", "-n", "53", "-k", "29", "-tile", "16", "-steps", "2")...)
			mustPass(t, r, "fused = unfused bit for bit, both as the float64 reference: ok")
			if op == "allreduce" {
				// Two PEs on each of two hosts: the all-reduce runs as the chain of nodes.
				mustPass(t, r, "exchange node chain (2 nodes of 2 PEs)")
			}
		})
	}
}
