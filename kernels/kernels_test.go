package kernels

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/roxamen/roxamen/kernels/internal/build"
)

// runtimeKernels are the entry points other packages launch by name.
var runtimeKernels = []string{
	"roxk_amo", "roxk_barrier_all_block", "roxk_barrier_all", "roxk_sync_all_block", "roxk_quiet",
	"roxk_signal_wait_until", "roxk_putmem_signal", "roxk_putmem_blocks", "roxk_copy", "roxk_fill_u8",
	"roxk_fill_u64", "roxk_pattern", "roxk_check_pattern", "roxk_p_pingpong", "roxk_putsig_pingpong",
	"roxk_fadd_latency", "roxk_fadd_pipelined", "roxk_put_bw", "roxk_put_bw_ce", "roxk_putmem_ce_block", "roxk_litmus", "roxk_litmus_multi",
}

func TestObject(t *testing.T) {
	for _, arch := range Arches {
		b, err := Object(arch)
		if err != nil {
			t.Fatalf("Object(%q): %v", arch, err)
		}
		if strings.HasPrefix(arch, "gfx") {
			if !bytes.HasPrefix(b, []byte("\x7fELF")) {
				t.Errorf("%s: not an ELF code object", arch)
			}
		} else if !bytes.Contains(b, []byte(".target "+arch)) {
			t.Errorf("%s: PTX does not say .target %s", arch, arch)
		}
		for _, k := range append(runtimeKernels, StateSymbol) {
			if !bytes.Contains(b, []byte(k)) {
				t.Errorf("%s: object lacks %s", arch, k)
			}
		}
	}
	for _, bad := range []string{"gfx1100", "sm_70", "", "host"} {
		_, err := Object(bad)
		if err == nil {
			t.Errorf("Object(%q) succeeded", bad)
		} else if !strings.Contains(err.Error(), `"`+bad+`"`) {
			t.Errorf("Object(%q) error does not name the arch: %v", bad, err)
		}
	}
	for dev, want := range map[string]string{"sm_90": "sm_90", "sm_100": "sm_90", "sm_90a": "sm_90", "sm_86": "sm_80",
		"sm_80": "sm_80", "gfx942": "gfx942"} {
		if _, got, err := ObjectFor(dev); err != nil || got != want {
			t.Errorf("ObjectFor(%q) = %q, %v; want %q", dev, got, err, want)
		}
	}
	if _, _, err := ObjectFor("sm_75"); err == nil {
		t.Error("ObjectFor(sm_75) succeeded: PTX for sm_80 cannot run there")
	}
}

// TestRegenerate rebuilds the objects, from this directory and from a copy elsewhere (a path in
// the output would differ), and compares them with the committed ones byte for byte.
// regenTargets are the targets TestRegenerate rebuilds and TestHeaderCompiles compiles for: one of
// each vendor's (the newest), all four in the long run (ROX_TEST_LONG=1, `./test/run.sh long`).
// `go generate` builds every target from the same sources and flags, so an object left stale
// beside a fresh one of the same vendor takes a hand edit; the long run still checks for it.
func regenTargets() []build.Target {
	if os.Getenv("ROX_TEST_LONG") == "1" {
		return build.Targets
	}
	var out []build.Target
	for _, arch := range []string{"gfx942", "sm_90"} {
		t, ok := build.Lookup(arch)
		if !ok {
			panic("no target " + arch)
		}
		out = append(out, t)
	}
	return out
}

// regenerated is the targets whose committed objects TestRegenerate rebuilds and compares:
// sm_90's outside the long run (the slowest package's slowest test, in CI's critical path), every
// target in it; TestHeaderCompiles and the mapping tests still build for an AMD target every run.
func regenerated() []build.Target {
	if os.Getenv("ROX_TEST_LONG") == "1" {
		return build.Targets
	}
	t, _ := build.Lookup("sm_90")
	return []build.Target{t}
}

func TestRegenerate(t *testing.T) {
	t.Parallel() // clang compiles, seconds each: two at a time with the other compiling tests
	needClang(t)
	copyDir := filepath.Join(t.TempDir(), "elsewhere", "kernels")
	for _, d := range []string{"include/roxamen", "src", "gpucheck"} {
		if err := os.MkdirAll(filepath.Join(copyDir, d), 0o755); err != nil {
			t.Fatal(err)
		}
		entries, err := os.ReadDir(d)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			b, err := os.ReadFile(filepath.Join(d, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(copyDir, d, e.Name()), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, dir := range []string{".", copyDir} {
		out := t.TempDir()
		// every object from the checkout; the copy (which shows that no path reaches an output)
		// rebuilds the runtime's only: the collectives' object takes minutes and the same flags
		srcs := build.Sources
		if dir != "." {
			srcs = srcs[:1]
		}
		if err := build.BuildFor(dir, out, srcs, regenerated()); err != nil {
			t.Fatal(err)
		}
		for _, pair := range targetsOf(srcs, regenerated()) {
			name := build.SourceObjectName(pair.src, pair.t)
			got, err := os.ReadFile(filepath.Join(out, name))
			if err != nil {
				t.Fatal(err)
			}
			want, err := os.ReadFile(filepath.Join("obj", name))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("obj/%s differs from a rebuild in %s (%d vs %d bytes): run go generate ./kernels and commit",
					name, dir, len(want), len(got))
			}
			if bytes.Contains(got, []byte(dir)) && dir != "." {
				t.Errorf("%s names the build directory", name)
			}
		}
		if dir != "." {
			continue // the copy shows no path reaches an output: the runtime's object says so
		}
		sm90, _ := build.Lookup("sm_90")
		for _, c := range build.Checks {
			check := filepath.Join(out, filepath.Base(c[1]))
			if err := build.Compile(dir, sm90, c[0], check); err != nil {
				t.Fatal(err)
			}
			got, _ := os.ReadFile(check)
			want, err := os.ReadFile(c[1])
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s differs from a rebuild in %s: run go generate ./kernels and commit", c[1], dir)
			}
		}
	}
}

// TestRegenerateTestKernels rebuilds the test kernels (src/test.hip) and compares them with the
// objects package testkernels embeds.
func TestRegenerateTestKernels(t *testing.T) {
	t.Parallel() // clang compiles, seconds each: two at a time with the other compiling tests
	needClang(t)
	out := t.TempDir()
	if err := build.Tests(".", out); err != nil {
		t.Fatal(err)
	}
	for _, pair := range targetsOf([]string{build.TestSource}, build.Targets) {
		name := build.SourceObjectName(pair.src, pair.t)
		got, err := os.ReadFile(filepath.Join(out, name))
		if err != nil {
			t.Fatal(err)
		}
		want, err := os.ReadFile(filepath.Join(build.TestObjDir, name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s/%s differs from a rebuild (%d vs %d bytes): run go generate ./kernels and commit", build.TestObjDir, name, len(want), len(got))
		}
	}
}

// TestHeaderCompiles builds a kernel that calls the whole API for each target with -Wall -Werror,
// the HIP and CUDA host passes of it, and the layout headers as plain C.
func TestHeaderCompiles(t *testing.T) {
	t.Parallel() // clang compiles, seconds each: two at a time with the other compiling tests
	needClang(t)
	clang, _ := build.Tool("clang-19")
	// the run-time mode compiles both orderings' code; the probes cover the forced modes. Outside
	// the long run sm_90 is compiled by the device pass below (every entry point, front end),
	// TestBitcode (every entry point, to LLVM bitcode) and TestRegenerate (the objects' code
	// generation); this test generates code for the AMD target, which nothing else does then
	for _, target := range regenTargets() {
		if target.Arch == "sm_90" && os.Getenv("ROX_TEST_LONG") != "1" {
			continue
		}
		out := filepath.Join(t.TempDir(), "api"+target.Ext())
		if err := build.Compile(".", target, "testdata/api.hip", out); err != nil {
			t.Error(err)
		}
	}
	inc, _ := filepath.Abs("include")
	for _, host := range [][]string{
		{"-x", "hip", "--offload-arch=gfx942", "--cuda-host-only", "-nogpuinc", "-nogpulib"},
		{"-x", "cuda", "--cuda-gpu-arch=sm_90", "--cuda-host-only", "-nocudainc", "-nocudalib"},
	} {
		args := append(host, "-fsyntax-only", "-Wall", "-Wextra", "-Werror", "-I"+inc, "testdata/api.hip")
		if out, err := exec.Command(clang, args...).CombinedOutput(); err != nil {
			t.Errorf("host pass %v: %v\n%s", host[:2], err, out)
		}
	}
	// the device pass as nvcc gets it (no clang vector extensions: ROXI_PORTABLE_V4), which a
	// program's own kernels built by nvcc against these headers go through
	nvccLike := []string{"-x", "cuda", "--cuda-gpu-arch=sm_90", "--cuda-device-only", "-nocudainc", "-nocudalib",
		"-DROXI_PORTABLE_V4", "-fsyntax-only", "-Wall", "-Wextra", "-Werror", "-I" + inc, "testdata/api.hip"}
	if out, err := exec.Command(clang, nvccLike...).CombinedOutput(); err != nil {
		t.Errorf("device pass without clang's vector extensions: %v\n%s", err, out)
	}
	for _, h := range []string{"state.h", "ring.h", "ops.h", "litmus.h", "types.h"} {
		src := filepath.Join(t.TempDir(), "c.c")
		os.WriteFile(src, []byte("#include \"roxamen/"+h+"\"\n#include \"roxamen/"+h+"\"\nint main(void) { return 0; }\n"), 0o644)
		if out, err := exec.Command(clang, "-std=c11", "-Wall", "-Wextra", "-Werror", "-I"+inc, "-fsyntax-only", src).CombinedOutput(); err != nil {
			t.Errorf("C %s: %v\n%s", h, err, out)
		}
	}
}

type srcTarget struct {
	src string
	t   build.Target
}

func targetsOf(srcs []string, targets []build.Target) []srcTarget {
	var out []srcTarget
	for _, s := range srcs {
		for _, t := range targets {
			out = append(out, srcTarget{s, t})
		}
	}
	return out
}

// TestCollObject: every target's collectives' object defines each kernel of CollKernels (PTX: an
// .entry; amdgcn: the kernel descriptor symbol NAME.kd), so that no stream-ordered collective
// fails to find its kernel on a GPU.
func TestCollObject(t *testing.T) {
	for _, arch := range Arches {
		obj, err := CollObject(arch)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range CollKernels {
			want := ".entry " + k + "("
			if strings.HasPrefix(arch, "gfx") {
				want = k + ".kd\x00"
			}
			if !bytes.Contains(obj, []byte(want)) {
				t.Errorf("%s: the collectives' object has no kernel %s", arch, k)
			}
		}
	}
	if _, _, err := CollObjectFor("sm_86"); err != nil {
		t.Error(err)
	}
}
