package testkernels

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"
)

// testKernels are the entry points shmem's GPU tests launch by name.
var testKernels = []string{"roxg_t_rma", "roxg_t_ctx", "roxg_t_amo", "roxg_t_mix", "roxg_t_fault", "roxg_t_wait", "roxg_b_pingpong"}

func TestObjectFor(t *testing.T) {
	for dev, want := range map[string]string{"sm_90": "sm_90", "sm_100": "sm_90", "sm_86": "sm_80", "gfx90a": "gfx90a", "gfx942": "gfx942"} {
		b, got, err := ObjectFor(dev)
		if err != nil || got != want {
			t.Fatalf("ObjectFor(%q) = %q, %v; want %q", dev, got, err, want)
		}
		for _, k := range append(testKernels, "roxshmem_state") {
			if !bytes.Contains(b, []byte(k)) {
				t.Errorf("%s: the test object lacks %s", got, k)
			}
		}
	}
	if _, _, err := ObjectFor("sm_75"); err == nil {
		t.Error("ObjectFor(sm_75) succeeded")
	}
}

// TestOnlyTestsImportIt fails when a package of the module imports testkernels outside its tests:
// the test kernels would then ship in that package's binaries.
func TestOnlyTestsImportIt(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}: {{join .Imports " "}}`, "github.com/roxamen/roxamen/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	const self = "github.com/roxamen/roxamen/kernels/testkernels"
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) < 10 {
		t.Fatalf("go list named %d packages, want the module's", len(lines))
	}
	for _, line := range lines {
		pkg, imports, _ := strings.Cut(line, ": ")
		for _, imp := range strings.Fields(imports) {
			if imp == self {
				t.Errorf("%s imports %s outside its tests: the test kernels would ship in its binaries", pkg, self)
			}
		}
	}
}
