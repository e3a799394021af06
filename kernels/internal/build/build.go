// Package build compiles the kernels' HIP sources with Debian's clang-19 (no vendor SDK): amdgcn
// code objects for gfx90a and gfx942, PTX for sm_80 and sm_90. It is shared by the generator
// (go generate ./kernels) and the tests that check the committed objects and the arch mapping.
package build

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
)

// Target is one architecture the runtime ships code for.
type Target struct {
	Arch string // "gfx942", "sm_90"
	AMD  bool   // amdgcn code object; otherwise nvptx PTX
}

// Ext is the file extension of the target's output.
func (t Target) Ext() string {
	if t.AMD {
		return ".hsaco"
	}
	return ".ptx"
}

// Targets are the architectures of kernels/obj, in a fixed order.
var Targets = []Target{
	{Arch: "gfx90a", AMD: true},
	{Arch: "gfx942", AMD: true},
	{Arch: "sm_80"},
	{Arch: "sm_90"},
}

// Lookup returns the target named arch.
func Lookup(arch string) (Target, bool) {
	for _, t := range Targets {
		if t.Arch == arch {
			return t, true
		}
	}
	return Target{}, false
}

// ErrNoClang reports that clang-19 is not installed (CI installs it: .ci/kernels-deps.txt).
var ErrNoClang = errors.New("clang-19 not found in PATH (apt-get install clang-19 lld-19 llvm-19)")

// Tool returns the path of a versioned LLVM tool ("clang-19", "llvm-objdump-19", "ld.lld-19").
func Tool(name string) (string, error) {
	p, err := exec.LookPath(name)
	if err != nil {
		if name == "clang-19" {
			return "", ErrNoClang
		}
		return "", fmt.Errorf("%s not found in PATH (apt-get install clang-19 lld-19 llvm-19): %w", name, err)
	}
	return p, nil
}

// Args returns clang's arguments to compile src (relative to the kernels directory) for t into out.
// Outputs are byte-reproducible: no debug info, paths relative to the kernels directory, and
// -ffile-prefix-map for anything that still names the directory.
func Args(t Target, src, out string, defines []string) []string {
	args := []string{}
	if t.AMD {
		args = append(args, "-x", "hip", "--offload-arch="+t.Arch, "--offload-device-only",
			"--no-gpu-bundle-output", "-nogpulib", "-nogpuinc",
			// the default CUID hashes the command line (output path included)
			"-fuse-cuid=none")
	} else {
		args = append(args, "-x", "cuda", "--cuda-gpu-arch="+t.Arch, "--cuda-device-only",
			"-nocudainc", "-nocudalib", "-S")
	}
	args = append(args, "-O3", "-Wall", "-Wextra", "-Werror", "-g0", "-ffile-prefix-map=.=.",
		"-fno-ident", "-Iinclude",
		// clang's CUDA default (fast) fuses a*b+c even where a function says `fp contract(off)`;
		// ep.h's combine must round each product as the host reference does (bit-identical
		// results on every backend), so pragmas are honoured (HIP's default already does).
		"-ffp-contract=fast-honor-pragmas")
	for _, d := range defines {
		args = append(args, "-D"+d)
	}
	return append(args, "-o", out, src)
}

// Compile builds src (relative to dir, the kernels directory) for t into out (absolute or relative
// to dir). The compiler runs in dir so that no absolute path reaches the output.
func Compile(dir string, t Target, src, out string, defines ...string) error {
	clang, err := Tool("clang-19")
	if err != nil {
		return err
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	if err := runClang(clang, abs, Args(t, src, out, defines), src, t); err != nil {
		return err
	}
	return nil
}

// Sources are the runtime's code objects: each source is compiled into one object per target,
// named after the source (runtime-<arch><ext>, coll-<arch><ext>).
var Sources = []string{"src/runtime.hip", "src/coll.hip"}

// TestSource holds the kernels only tests launch (shmem's GPU tests). It is built like Sources, one
// object per target (test-<arch><ext>), into TestObjDir, which package kernels/testkernels embeds:
// no production binary imports it, so the test kernels never ship.
const (
	TestSource = "src/test.hip"
	TestObjDir = "testkernels/obj"
)

// Tests builds TestSource for every target into outDir.
func Tests(kernelsDir, outDir string) error { return Build(kernelsDir, outDir, []string{TestSource}) }

// Check is the GPU check kernel (gpucheck/check.hip), built by clang-19 for sm_90 into
// gpucheck/check-clang-sm_90.ptx; the GPU machine builds the same source with nvcc (run.sh).
const (
	CheckSource = "gpucheck/check.hip"
	CheckOutput = "gpucheck/check-clang-sm_90.ptx"
	// the team collectives' GPU check (gpucheck/coll.hip), built the same way
	CollCheckSource = "gpucheck/coll.hip"
	CollCheckOutput = "gpucheck/coll-clang-sm_90.ptx"
)

// Checks pairs every GPU check source with its committed clang-19 sm_90 output.
var Checks = [][2]string{{CheckSource, CheckOutput}, {CollCheckSource, CollCheckOutput}}

// ObjectName is the file in kernels/obj that holds the runtime kernels for t.
func ObjectName(t Target) string { return SourceObjectName("src/runtime.hip", t) }

// SourceObjectName is the file that holds source src (one of Sources, or TestSource) built for t.
func SourceObjectName(src string, t Target) string {
	return strings.TrimSuffix(filepath.Base(src), ".hip") + "-" + t.Arch + t.Ext()
}

// All builds every source of Sources for every target into outDir.
func All(kernelsDir, outDir string) error { return Build(kernelsDir, outDir, Sources) }

// Build builds srcs (of Sources, or TestSource) for every target into outDir, one compiler per CPU at a time
// (the collectives' object takes a minute or more per target).
func Build(kernelsDir, outDir string, srcs []string) error {
	return BuildFor(kernelsDir, outDir, srcs, Targets)
}

// BuildFor is Build for some of the targets.
func BuildFor(kernelsDir, outDir string, srcs []string, targets []Target) error {
	outAbs, err := filepath.Abs(outDir)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(outAbs, 0o755); err != nil {
		return err
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
		sem  = make(chan struct{}, runtime.NumCPU())
	)
	for _, src := range srcs {
		for _, t := range targets {
			wg.Add(1)
			go func() {
				defer wg.Done()
				sem <- struct{}{}
				defer func() { <-sem }()
				out := filepath.Join(outAbs, SourceObjectName(src, t))
				err := Compile(kernelsDir, t, src, out)
				if err == nil {
					// the linker marks code objects executable; keep one mode for every output
					err = os.Chmod(out, 0o644)
				}
				if err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}()
		}
	}
	wg.Wait()
	return errors.Join(errs...)
}

// WorkloadSource holds the workload kernels (expert-parallel dispatch/combine, the fused GEMM),
// compiled into their own objects, workloads-<arch><ext>, apart from the runtime's.
const WorkloadSource = "src/workloads.hip"

// WorkloadObjectName is the file in kernels/obj that holds the workload kernels for t.
func WorkloadObjectName(t Target) string { return "workloads-" + t.Arch + t.Ext() }

// Workloads builds the workload kernels for every target into outDir.
func Workloads(kernelsDir, outDir string) error {
	outAbs, err := filepath.Abs(outDir)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(outAbs, 0o755); err != nil {
		return err
	}
	for _, t := range Targets {
		out := filepath.Join(outAbs, WorkloadObjectName(t))
		if err := Compile(kernelsDir, t, WorkloadSource, out); err != nil {
			return err
		}
		if err := os.Chmod(out, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// CountSource holds the workload probes that kernels/internal/wlcount counts instructions in: built
// for the AMD targets in each ordering mode with the ring and SDMA compiled out and every internal
// inlined, into kernels/testdata/count (CountObjectName).
const CountSource = "testdata/probes_workloads.hip"

// CountModes are the forced ordering modes of the count objects: ROXSHMEM_ORDERING's values.
var CountModes = []struct {
	Name   string
	Define string
}{{"strict", "ROXSHMEM_ORDERING=1"}, {"bypass", "ROXSHMEM_ORDERING=2"}}

// CountObjectName is the count object of t in mode.
func CountObjectName(t Target, mode string) string {
	return "workloads-count-" + t.Arch + "-" + mode + t.Ext()
}

// CountObjects builds the count objects into outDir.
func CountObjects(kernelsDir, outDir string) error {
	outAbs, err := filepath.Abs(outDir)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(outAbs, 0o755); err != nil {
		return err
	}
	for _, t := range Targets {
		if !t.AMD {
			continue
		}
		for _, m := range CountModes {
			out := filepath.Join(outAbs, CountObjectName(t, m.Name))
			if err := Compile(kernelsDir, t, CountSource, out, m.Define, "ROXSHMEM_RING=0", "ROXSHMEM_INLINE_ALL"); err != nil {
				return err
			}
			if err := os.Chmod(out, 0o644); err != nil {
				return err
			}
		}
	}
	return nil
}

// runClang runs clang with args in the kernels directory abs, reproducibly (no dates, the C
// locale), the prefix map naming the real directory so that the object names none.
func runClang(clang, abs string, args []string, src string, t Target) error {
	for i, a := range args {
		if a == "-ffile-prefix-map=.=." {
			args[i] = "-ffile-prefix-map=" + abs + "=."
		}
	}
	cmd := exec.Command(clang, args...)
	cmd.Dir = abs
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.Env = append(os.Environ(), "SOURCE_DATE_EPOCH=0", "LC_ALL=C")
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("clang-19 %s for %s: %v\n%s", src, t.Arch, err, stderr.String())
	}
	return nil
}
