package bench

// roxrun bench --compare nvshmem (GPU backends): the project's NVSHMEM program
// (tools/compare/cu/nvshmem_bench.cu) built with nvcc against the NVSHMEM this machine has, and
// run as a job of its own right after Roxamen's, with the same PEs, the same placement (PE i on
// GPU i mod GPUs) and the same MPS setting (launch.JobMPS), so that the ratios compare like with
// like. Every latency row carries its rounds' min and max, every bandwidth row its rounds' least
// and greatest GB/s, on both sides; a ratio is printed with the range those spreads allow.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/roxamen/roxamen/internal/env"
	"github.com/roxamen/roxamen/tools/compare"
	"github.com/roxamen/roxamen/tools/launch"
)

// nvshmemTools is what building the NVSHMEM program needs.
type nvshmemTools struct {
	nvcc    string
	include string // holds nvshmem.h
	hostLib string // libnvshmem_host.so[.N]
	devLib  string // libnvshmem_device.a
}

// errNoNVSHMEM is the comparison's missing tool: said in one line, and the command fails.
var errNoNVSHMEM = errors.New("NVSHMEM comparison unavailable")

// findNVSHMEM finds nvcc (PATH, then CUDA_HOME/bin and /usr/local/cuda/bin) and NVSHMEM: the
// directory NVSHMEM_HOME names, or else the pip package nvidia-nvshmem-cu12/cu13 (the Python
// module nvidia.nvshmem, whose folder holds include/ and lib/). pyDir asks Python for that folder.
func findNVSHMEM(getenv func(string) string, pyDir func() (string, error)) (nvshmemTools, error) {
	var t nvshmemTools
	nvcc, err := exec.LookPath("nvcc")
	if err != nil {
		for _, d := range []string{getenv("CUDA_HOME"), "/usr/local/cuda"} {
			if p := filepath.Join(d, "bin", "nvcc"); d != "" && isFile(p) {
				nvcc, err = p, nil
				break
			}
		}
	}
	if err != nil {
		return t, fmt.Errorf("%w: nvcc is not on PATH, nor in $CUDA_HOME/bin or /usr/local/cuda/bin (the CUDA toolkit builds the NVSHMEM program)", errNoNVSHMEM)
	}
	t.nvcc = nvcc
	home, how := getenv("NVSHMEM_HOME"), "NVSHMEM_HOME"
	if home == "" {
		how = "the Python package nvidia.nvshmem"
		if home, err = pyDir(); err != nil {
			return t, fmt.Errorf("%w: no NVSHMEM found (NVSHMEM_HOME is not set and python3 has no module nvidia.nvshmem: %v; pip install nvidia-nvshmem-cu12)", errNoNVSHMEM, err)
		}
	}
	t.include = filepath.Join(home, "include")
	if !isFile(filepath.Join(t.include, "nvshmem.h")) {
		return t, fmt.Errorf("%w: %s (from %s) has no include/nvshmem.h", errNoNVSHMEM, home, how)
	}
	lib := filepath.Join(home, "lib")
	if t.devLib = filepath.Join(lib, "libnvshmem_device.a"); !isFile(t.devLib) {
		return t, fmt.Errorf("%w: %s (from %s) has no lib/libnvshmem_device.a", errNoNVSHMEM, home, how)
	}
	// The pip package ships only the versioned name (libnvshmem_host.so.3): link it by path.
	hosts, _ := filepath.Glob(filepath.Join(lib, "libnvshmem_host.so*"))
	if len(hosts) == 0 {
		return t, fmt.Errorf("%w: %s (from %s) has no lib/libnvshmem_host.so*", errNoNVSHMEM, home, how)
	}
	t.hostLib = hosts[0]
	return t, nil
}

func isFile(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}

// pythonNVSHMEMDir asks python3 where the nvidia.nvshmem package lies.
func pythonNVSHMEMDir() (string, error) {
	py, err := exec.LookPath("python3")
	if err != nil {
		return "", err
	}
	out, err := exec.Command(py, "-c", "import nvidia.nvshmem as m; print(list(m.__path__)[0])").Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return "", fmt.Errorf("%v: %s", err, lastLines(string(ee.Stderr), 1))
		}
		return "", err
	}
	return strings.TrimSpace(string(out)), nil
}

// gpuUsedMiB is the memory in use on GPU 0 (nvidia-smi; MiB), -1 when it cannot be read. Under MPS
// every PE's memory is in the device's account, so per-PE figures divide the growth by the PEs.
func gpuUsedMiB() int {
	out, err := exec.Command("nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits", "-i", "0").Output()
	if err != nil {
		return -1
	}
	v, err := strconv.Atoi(strings.TrimSpace(strings.Split(string(out), "\n")[0]))
	if err != nil {
		return -1
	}
	return v
}

// gpuArch is GPU 0's architecture for nvcc (sm_90 on an H100 or H200), from nvidia-smi; native
// (nvcc asks the driver) where nvidia-smi cannot say.
func gpuArch() string {
	out, err := exec.Command("nvidia-smi", "--query-gpu=compute_cap", "--format=csv,noheader", "-i", "0").Output()
	if err != nil {
		return "native"
	}
	cc := strings.TrimSpace(strings.Split(string(out), "\n")[0])
	if major, minor, ok := strings.Cut(cc, "."); ok && major != "" && minor != "" {
		return "sm_" + major + minor
	}
	return "native"
}

// nvshmemHeap is the symmetric heap the NVSHMEM program gets: Roxamen's (ROX_HEAP_SIZE, 1G on a
// GPU by default), so that the HBM rows compare equal heaps.
func nvshmemHeap() string {
	if s, _ := env.HeapSize.String(); s != "" {
		return s
	}
	return "1G"
}

// nvshmemBuild is a built (or cached) NVSHMEM program: the binary, the folder it and the job's
// files live in (removed by done), and the library folder the PEs load NVSHMEM from.
type nvshmemBuild struct {
	bin, dir, libDir string
	err              error
}

func (b nvshmemBuild) done() {
	if b.dir != "" {
		os.RemoveAll(b.dir)
	}
}

// startNVSHMEMBuild builds the NVSHMEM program in the background, bounded by timeout, and says
// on stderr how long it took: roxrun starts it before Roxamen's jobs, so that nvcc's tens of
// seconds (on the CPU; the jobs' figures are the GPU's) overlap them instead of adding to them.
// Cancelling parent stops it; a build nobody will take then removes its own folder.
func startNVSHMEMBuild(parent context.Context, timeout time.Duration, stderr io.Writer) <-chan nvshmemBuild {
	ch := make(chan nvshmemBuild, 1)
	go func() {
		var b nvshmemBuild
		defer func() {
			if parent.Err() != nil {
				b.done()
				b = nvshmemBuild{err: parent.Err()}
			}
			ch <- b
		}()
		tools, err := findNVSHMEM(os.Getenv, pythonNVSHMEMDir)
		if err != nil {
			b.err = err
			return
		}
		if b.dir, b.err = os.MkdirTemp("", "roxrun-nvshmem-"); b.err != nil {
			return
		}
		b.libDir = filepath.Dir(tools.hostLib)
		start := time.Now()
		ctx, cancel := context.WithTimeout(parent, timeout)
		defer cancel()
		if b.bin, b.err = buildNVSHMEM(ctx, tools, b.dir); b.err == nil {
			fmt.Fprintf(stderr, "roxrun bench --compare nvshmem: the program built (or found built) in %.1f s\n", time.Since(start).Seconds())
		}
	}()
	return ch
}

// runNVSHMEM builds the NVSHMEM program and runs it with n PEs (runNVSHMEMBuilt).
func runNVSHMEM(n, iters, rounds int, tests string, timeout time.Duration, stderr io.Writer) ([]gpuRow, error) {
	b := <-startNVSHMEMBuild(context.Background(), timeout, stderr)
	defer b.done()
	return runNVSHMEMBuilt(b, n, iters, rounds, tests, timeout, stderr)
}

// runNVSHMEMBuilt runs the built program with n PEs. A missing tool, a failed build, a non-zero
// exit or crash of any PE, a timeout, or no rows: an error, and no rows to compare with. The job
// gets the --timeout, as each of Roxamen's jobs does, and says how long it ran.
func runNVSHMEMBuilt(b nvshmemBuild, n, iters, rounds int, tests string, timeout time.Duration, stderr io.Writer) ([]gpuRow, error) {
	if b.err != nil {
		return nil, b.err
	}
	bin, dir, libDir := b.bin, b.dir, b.libDir
	if tests == "" {
		tests = "all"
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	start := time.Now()
	defer func() {
		fmt.Fprintf(stderr, "roxrun bench --compare nvshmem: its job ran %.1f s\n", time.Since(start).Seconds())
	}()
	var out, errb bytes.Buffer
	err := launch.Run(ctx, launch.Config{
		NPEs: n, Argv: []string{bin, strconv.Itoa(iters), strconv.Itoa(rounds), tests, filepath.Join(dir, "uid"), strconv.Itoa(gpuUsedMiB())},
		// Multicast stays off as in Roxamen's runs; one node, so no remote transport.
		Env: []string{"NVSHMEM_BOOTSTRAP=UID", "NVSHMEM_REMOTE_TRANSPORT=none", "NVSHMEM_DISABLE_NVLS=1",
			"NVSHMEM_SYMMETRIC_SIZE=" + nvshmemHeap(), "LD_LIBRARY_PATH=" + libDir + ":" + os.Getenv("LD_LIBRARY_PATH")},
		Timeout: timeout, Stdout: &out, Stderr: io.MultiWriter(&errb, stderr), MPS: launch.JobMPS(n),
	})
	rows, perr := parseJSONRows(&out, func(r *gpuRow) bool { return r.Test != "" })
	switch {
	case err != nil:
		return nil, fmt.Errorf("the NVSHMEM program failed after printing %d rows; its figures are not used: %v\n%s", len(rows), err, lastLines(errb.String(), 10))
	case perr != nil:
		return nil, perr
	case len(rows) == 0:
		return nil, fmt.Errorf("the NVSHMEM program printed no rows\n%s", lastLines(errb.String(), 10))
	}
	return rows, nil
}

// buildNVSHMEM compiles the program into dir, or takes the binary an earlier run built from the
// same source, compiler, NVSHMEM and flags (the user's cache directory, roxamen/nvshmem-HASH):
// nvcc takes tens of seconds to link NVSHMEM's device library.
func buildNVSHMEM(ctx context.Context, tools nvshmemTools, dir string) (string, error) {
	src := filepath.Join(dir, "nvshmem_bench.cu")
	if err := os.WriteFile(src, []byte(compare.NVSHMEM), 0o644); err != nil {
		return "", err
	}
	flags := []string{"-O2", "-rdc=true", "-arch=" + gpuArch(), "-I" + tools.include}
	// nvcc refuses an input named .so.3 ("Don't know what to do with"): the linker gets it.
	libs := []string{"-Xlinker", tools.hostLib, tools.devLib, "-lcuda", "-lcudart", "-Xlinker", "-rpath=" + filepath.Dir(tools.hostLib)}
	h := sha256.New()
	for _, s := range append(append([]string{compare.NVSHMEM, tools.nvcc}, flags...), libs...) {
		fmt.Fprintf(h, "%d:%s", len(s), s)
	}
	var cached string
	if c, err := os.UserCacheDir(); err == nil {
		cached = filepath.Join(c, "roxamen", fmt.Sprintf("nvshmem-%x", h.Sum(nil)[:8]))
		if isFile(cached) {
			return cached, nil
		}
	}
	bin := filepath.Join(dir, "nvshmem_bench")
	args := append(append(append([]string{}, flags...), "-o", bin, src), libs...)
	cmd := exec.CommandContext(ctx, tools.nvcc, args...)
	cmd.WaitDelay = time.Second // a compiler's children holding the output open do not hold the build
	if out, err := cmd.CombinedOutput(); err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("stopped at the --timeout (%v)", ctx.Err())
		}
		return "", fmt.Errorf("building the NVSHMEM program: %s %s: %v\n%s", tools.nvcc, strings.Join(args, " "), err, lastLines(string(out), 20))
	}
	if cached != "" && os.MkdirAll(filepath.Dir(cached), 0o755) == nil {
		// a copy renamed into place: a concurrent run never sees half a binary
		if b, err := os.ReadFile(bin); err == nil && os.WriteFile(cached+".tmp", b, 0o755) == nil && os.Rename(cached+".tmp", cached) == nil {
			return cached, nil
		}
	}
	return bin, nil
}

// ratioRange is Roxamen's figure over NVSHMEM's with the range the two rows' spreads allow:
// med from the medians, lo and hi from the rounds' extremes (for latency, rox's fastest over
// NVSHMEM's slowest and the other way; for bandwidth the same with GB/s). A row without a
// spread contributes its median to both ends. ok is false when either figure is missing.
func ratioRange(rox, nv gpuRow) (lo, med, hi float64, ok bool) {
	pick := func(v, alt float64) float64 {
		if v > 0 {
			return v
		}
		return alt
	}
	if rox.BandwidthGBps > 0 && nv.BandwidthGBps > 0 {
		med = rox.BandwidthGBps / nv.BandwidthGBps
		lo = pick(rox.BWMinGBps, rox.BandwidthGBps) / pick(nv.BWMaxGBps, nv.BandwidthGBps)
		hi = pick(rox.BWMaxGBps, rox.BandwidthGBps) / pick(nv.BWMinGBps, nv.BandwidthGBps)
		return lo, med, hi, true
	}
	if rox.BandwidthGBps == 0 && nv.BandwidthGBps == 0 && rox.LatencyUS > 0 && nv.LatencyUS > 0 {
		med = rox.LatencyUS / nv.LatencyUS
		lo = pick(rox.MinUS, rox.LatencyUS) / pick(nv.MaxUS, nv.LatencyUS)
		hi = pick(rox.MaxUS, rox.LatencyUS) / pick(nv.MinUS, nv.LatencyUS)
		return lo, med, hi, true
	}
	return 0, 0, 0, false
}
