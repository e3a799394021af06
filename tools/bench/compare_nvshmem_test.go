package bench

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fakeNVSHMEM makes a directory laid out as NVSHMEM's pip package is (empty files).
func fakeNVSHMEM(t *testing.T) string {
	home := t.TempDir()
	for _, f := range []string{"include/nvshmem.h", "lib/libnvshmem_device.a", "lib/libnvshmem_host.so.3"} {
		p := filepath.Join(home, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return home
}

// fakeNVCC puts on PATH an nvcc that "builds" the program as a shell script running body. Like
// nvcc (13.0), it refuses an input file whose kind it does not know by its name (nvcc takes .cu,
// .o, .a and .so; a versioned library, libnvshmem_host.so.3, only through -Xlinker).
func fakeNVCC(t *testing.T, body string) {
	bin := t.TempDir()
	nvcc := "#!/bin/sh\nout=\nwhile [ $# -gt 0 ]; do\n" +
		"  case \"$1\" in\n" +
		"  -o) out=$2; shift ;;\n  -Xlinker) shift ;;\n  -*) ;;\n  *.cu|*.o|*.a|*.so) ;;\n" +
		"  *) echo \"nvcc fatal   : Don't know what to do with '$1'\" >&2; exit 1 ;;\n  esac\n  shift\ndone\n" +
		"printf '#!/bin/sh\\n%s\\n' '" + body + "' > \"$out\" && chmod +x \"$out\"\n"
	if err := os.WriteFile(filepath.Join(bin, "nvcc"), []byte(nvcc), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+":/usr/bin:/bin")
}

// A missing nvcc or NVSHMEM is said in one line naming what is missing, and the command fails
// before any job runs.
func TestNVSHMEMMissing(t *testing.T) {
	noPy := func() (string, error) { return "", errors.New("No module named 'nvidia'") }
	getenv := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

	t.Setenv("PATH", t.TempDir())
	_, err := findNVSHMEM(getenv(map[string]string{"CUDA_HOME": t.TempDir()}), noPy)
	if !errors.Is(err, errNoNVSHMEM) || !strings.Contains(err.Error(), "nvcc is not on PATH") {
		t.Errorf("without nvcc: %v", err)
	}
	var stdout, stderr bytes.Buffer
	if code := benchGPUMain(2, 10, 1, "", false, time.Minute, "", true, &stdout, &stderr); code == 0 {
		t.Errorf("benchGPUMain without nvcc exited 0")
	}
	if lines := strings.Split(strings.TrimSpace(stderr.String()), "\n"); len(lines) != 1 || !strings.Contains(lines[0], "--compare nvshmem: NVSHMEM comparison unavailable: nvcc") {
		t.Errorf("without nvcc, stderr is not one line naming nvcc:\n%s", stderr.String())
	}

	fakeNVCC(t, "true")
	_, err = findNVSHMEM(getenv(nil), noPy)
	if !errors.Is(err, errNoNVSHMEM) || !strings.Contains(err.Error(), "nvidia.nvshmem") || !strings.Contains(err.Error(), "No module named") {
		t.Errorf("without NVSHMEM: %v", err)
	}
	home := fakeNVSHMEM(t)
	os.Remove(filepath.Join(home, "lib", "libnvshmem_device.a"))
	_, err = findNVSHMEM(getenv(map[string]string{"NVSHMEM_HOME": home}), noPy)
	if !errors.Is(err, errNoNVSHMEM) || !strings.Contains(err.Error(), "libnvshmem_device.a") || !strings.Contains(err.Error(), "NVSHMEM_HOME") {
		t.Errorf("without the device library: %v", err)
	}
	tools, err := findNVSHMEM(getenv(nil), func() (string, error) { return fakeNVSHMEM(t), nil })
	if err != nil || !strings.HasSuffix(tools.hostLib, "libnvshmem_host.so.3") || !strings.HasSuffix(tools.nvcc, "nvcc") {
		t.Errorf("with the pip package's layout: %+v, %v", tools, err)
	}
}

// The program runs as a job of real processes, each with its rank; its rows are read, and a PE
// that crashes leaves no rows to take ratios from, however many were printed before.
func TestNVSHMEMJob(t *testing.T) {
	if testing.Short() {
		t.Skip("starts jobs")
	}
	t.Setenv("NVSHMEM_HOME", fakeNVSHMEM(t))
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	fakeNVCC(t, `[ "$ROX_PE" = 0 ] && echo "{\"test\":\"p_pingpong\",\"backend\":\"nvshmem\",\"pes\":$ROX_NPES,\"size_bytes\":8,\"latency_us\":0.7,\"rounds\":3}"; exit 0`)
	rows, err := runNVSHMEM(2, 10, 3, "p_pingpong", 30*time.Second, &bytes.Buffer{})
	if err != nil || len(rows) != 1 || rows[0].Test != "p_pingpong" || rows[0].PEs != 2 || rows[0].LatencyUS != 0.7 {
		t.Fatalf("a clean run: %+v, %v", rows, err)
	}
	fakeNVCC(t, `echo "{\"test\":\"p_pingpong\",\"pes\":2,\"size_bytes\":8,\"latency_us\":0.7}"; [ "$ROX_PE" = 1 ] && kill -SEGV $$; sleep 1`)
	rows, err = runNVSHMEM(2, 10, 3, "", 30*time.Second, &bytes.Buffer{})
	if err == nil || rows != nil || !strings.Contains(err.Error(), "failed after printing 2 rows") || !strings.Contains(err.Error(), "SIGSEGV") {
		t.Fatalf("a crashing PE: rows %+v, err %v", rows, err)
	}
}

// A build that outlasts the --timeout is stopped and said to be, rather than holding the whole
// comparison (and the device machine's call) until something else kills it.
func TestNVSHMEMBuildTimeout(t *testing.T) {
	t.Setenv("NVSHMEM_HOME", fakeNVSHMEM(t))
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "nvcc"), []byte("#!/bin/sh\nexec sleep 30\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+":/usr/bin:/bin")
	start := time.Now()
	_, err := runNVSHMEM(2, 10, 1, "p_pingpong", 300*time.Millisecond, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "building the NVSHMEM program") || !strings.Contains(err.Error(), "--timeout") {
		t.Fatalf("a build past the timeout: %v", err)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Fatalf("the build was not stopped at the timeout: %v", d)
	}
}
