package litmusrun

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/roxamen/roxamen/memmodel"
)

// BuildMutant without a switch reproduces the embedded sm_90 object byte for byte, and each
// switch changes it. Compiling takes a minute per build, so it runs only when ROX_LITMUS_MUTANTS
// names a directory, where the three mutants are left (mutant-NAME-sm_90.ptx) for a GPU run.
func TestMutantBuild(t *testing.T) {
	dir := os.Getenv("ROX_LITMUS_MUTANTS")
	if dir == "" {
		t.Skip("ROX_LITMUS_MUTANTS=DIR builds the mutants into DIR")
	}
	if _, err := exec.LookPath("clang-19"); err != nil {
		t.Skip("clang-19 not installed")
	}
	want, err := os.ReadFile("../../kernels/obj/runtime-sm_90.ptx")
	if err != nil {
		t.Fatal(err)
	}
	plain := filepath.Join(t.TempDir(), "runtime-sm_90.ptx")
	if err := BuildMutant("../../kernels", plain, memmodel.MutNone); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(plain); !bytes.Equal(got, want) {
		t.Fatal("BuildMutant without a mutation differs from kernels/obj/runtime-sm_90.ptx: its arguments are not the generator's")
	}
	for m := range MutantDefine {
		out := filepath.Join(dir, "mutant-"+m.String()+"-sm_90.ptx")
		if err := BuildMutant("../../kernels", out, m); err != nil {
			t.Fatal(err)
		}
		if got, _ := os.ReadFile(out); bytes.Equal(got, want) {
			t.Errorf("mutation %s: the PTX is the unmutated one", m)
		}
	}
	if err := BuildMutant("../../kernels", filepath.Join(dir, "x.ptx"), memmodel.Mutation(99)); err == nil {
		t.Error("BuildMutant accepted a mutation without a switch")
	}
}
