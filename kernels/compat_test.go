package kernels

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/roxamen/roxamen/kernels/internal/build"
)

// compatKernels are kernels written with NVSHMEM's and rocSHMEM's names, ported by their include
// alone (include/roxamen/nvshmem.h, rocshmem.h).
var compatKernels = []string{"testdata/compat/nvshmem_kernel.hip", "testdata/compat/rocshmem_kernel.hip"}

// TestCompatCompiles builds each ported kernel for every target as the runtime objects are built
// (-O3 -Wall -Wextra -Werror), and its HIP and CUDA host passes.
func TestCompatCompiles(t *testing.T) {
	needClang(t)
	clang, _ := build.Tool("clang-19")
	inc, _ := filepath.Abs("include")
	for _, src := range compatKernels {
		for _, target := range build.Targets {
			t.Run(filepath.Base(src)+"/"+target.Arch, func(t *testing.T) {
				t.Parallel()
				out := filepath.Join(t.TempDir(), "k"+target.Ext())
				if err := build.Compile(".", target, src, out); err != nil {
					t.Fatal(err)
				}
				if fi, err := os.Stat(out); err != nil || fi.Size() == 0 {
					t.Fatalf("no output: %v", err)
				}
			})
		}
		for _, host := range [][]string{
			{"-x", "hip", "--offload-arch=gfx942", "--cuda-host-only", "-nogpuinc", "-nogpulib"},
			{"-x", "cuda", "--cuda-gpu-arch=sm_90", "--cuda-host-only", "-nocudainc", "-nocudalib"},
		} {
			args := append(host, "-fsyntax-only", "-Wall", "-Wextra", "-Werror", "-I"+inc, src)
			if out, err := exec.Command(clang, args...).CombinedOutput(); err != nil {
				t.Errorf("%s host pass %v: %v\n%s", src, host[:2], err, out)
			}
		}
	}
}

// TestCompatHostRun runs both ported kernels on the CPU library harness (testdata/compat/host.cc):
// what each wrote to the peer's heap and its own, and what each call returned.
func TestCompatHostRun(t *testing.T) {
	needClang(t)
	clang, _ := build.Tool("clang-19")
	exe := filepath.Join(t.TempDir(), "compat")
	if out, err := exec.Command(clang, cpuArgs(exe, "testdata/compat/host.cc", "-O1")...).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", clang, err, out)
	}
	out, err := exec.Command(exe).CombinedOutput()
	text := string(out)
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, "FAIL") {
			t.Error(l)
		}
	}
	if err != nil || !strings.Contains(text, "done") {
		t.Fatalf("compat host run: %v\n%s", err, text)
	}
	t.Log(strings.TrimSpace(text))
}

// TestCompatUnavailable: a use of a name the other API has and Roxamen does not fails to compile,
// and the error names the call and says it has no Roxamen equivalent; the same file without those
// uses compiles (so it is the names that fail, not the file).
func TestCompatUnavailable(t *testing.T) {
	needClang(t)
	clang, _ := build.Tool("clang-19")
	inc, _ := filepath.Abs("include")
	cases := []struct {
		header, target string
		prelude        string
		uses           map[string]string // name -> a statement that uses it
	}{
		{"nvshmem.h", "-x cuda --cuda-gpu-arch=sm_90 --cuda-device-only -nocudainc -nocudalib", "", map[string]string{
			"nvshmem_barrier_all":            "nvshmem_barrier_all();",
			"nvshmem_sync_all":               "nvshmem_sync_all();",
			"nvshmemx_barrier_all_warp":      "nvshmemx_barrier_all_warp();",
			"nvshmem_int_sum_reduce":         "nvshmem_int_sum_reduce(0, d, d, 4);",
			"nvshmemx_float_broadcast_block": "nvshmemx_float_broadcast_block(0, (float *)d, (float *)d, 4, 0);",
			"nvshmem_team_my_pe":             "(void)nvshmem_team_my_pe(0);",
			"NVSHMEM_TEAM_WORLD":             "(void)NVSHMEM_TEAM_WORLD;",
			"nvshmem_int_iput":               "nvshmem_int_iput(d, d, 2, 2, 4, pe);",
			"nvshmem_half_p":                 "nvshmem_half_p(d, 0, pe);",
			"nvshmem_int_wait_until_any":     "(void)nvshmem_int_wait_until_any(d, 4, 0, NVSHMEM_CMP_EQ, 1);",
		}},
		{"rocshmem.h", "-x hip --offload-arch=gfx942 --offload-device-only -nogpulib -nogpuinc", "using namespace rocshmem;\n", map[string]string{
			"rocshmem_ctx_int_wg_broadcast":   "rocshmem_ctx_int_wg_broadcast(ROCSHMEM_CTX_DEFAULT, 0, d, d, 4, 0);",
			"rocshmem_ctx_long_sum_wg_reduce": "rocshmem_ctx_long_sum_wg_reduce(ROCSHMEM_CTX_DEFAULT, 0, (long *)d, (long *)d, 4);",
			"rocshmem_float_wait_until":       "rocshmem_float_wait_until((float *)d, ROCSHMEM_CMP_EQ, 1.0f);",
			"rocshmem_char_test":              "(void)rocshmem_char_test((char *)d, ROCSHMEM_CMP_EQ, 1);",
			"rocshmem_int_wait_until_all":     "rocshmem_int_wait_until_all(d, 4, 0, ROCSHMEM_CMP_EQ, 1);",
			"rocshmem_wg_team_sync":           "rocshmem_wg_team_sync(0);",
			"rocshmem_team_translate_pe":      "(void)rocshmem_team_translate_pe(0, pe, 0);",
			"rocshmem_threadfence_system":     "rocshmem_threadfence_system();",
			"ROCSHMEM_TEAM_WORLD":             "(void)ROCSHMEM_TEAM_WORLD;",
		}},
	}
	for _, c := range cases {
		t.Run(c.header, func(t *testing.T) {
			compile := func(body string) (string, error) {
				src := filepath.Join(t.TempDir(), "use.hip")
				text := "#include \"roxamen/" + c.header + "\"\n" + c.prelude +
					"extern \"C\" __global__ void k(int *d, int pe)\n{\n\t(void)d;\n\t(void)pe;\n" + body + "}\n"
				if err := os.WriteFile(src, []byte(text), 0o644); err != nil {
					t.Fatal(err)
				}
				args := append(strings.Fields(c.target), "-fsyntax-only", "-Wall", "-Wextra", "-Werror",
					"-ferror-limit=0", "-I"+inc, src)
				out, err := exec.Command(clang, args...).CombinedOutput()
				return string(out), err
			}
			if out, err := compile(""); err != nil {
				t.Fatalf("the file without the uses does not compile: %v\n%s", err, out)
			}
			var body strings.Builder
			for _, use := range c.uses {
				body.WriteString("\t" + use + "\n")
			}
			out, err := compile(body.String())
			if err == nil {
				t.Fatalf("uses of %d names without a Roxamen equivalent compiled", len(c.uses))
			}
			for name := range c.uses {
				// error: 'nvshmem_int_iput<int *, int *, int, int, int, int>' is unavailable: nvshmem_int_iput: no Roxamen equivalent: ...
				re := regexp.MustCompile(`error: '` + name + `(<[^']*>)?' is unavailable: ` + name + `: no Roxamen equivalent: \S`)
				if !re.MatchString(out) {
					t.Errorf("no error names %s as having no Roxamen equivalent:\n%s", name, out)
				}
			}
			if n := strings.Count(out, "error: "); n != len(c.uses) {
				t.Errorf("%d errors for %d uses (each use should fail once, for its name):\n%s", n, len(c.uses), out)
			}
		})
	}
}
