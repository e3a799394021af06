package litmusrun

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/roxamen/roxamen/memmodel"
)

// Mutant builds of the device library for the GPU runner's power check: roxamen/roxshmem.h has one
// compile-time switch per mutation of memmodel's (off by default), and BuildMutant compiles the
// runtime kernels for sm_90 with one of them on, as kernels/internal/build compiles the embedded
// object (TestMutantBuild checks that the same arguments without a switch give that object).
// `roxrun litmus --run N --device cuda --object FILE --mutation NAME` then runs the suite on it.

// MutantDefine is the roxshmem.h switch of each mutation.
var MutantDefine = map[memmodel.Mutation]string{
	memmodel.MutDropFences:   "ROXSHMEM_MUTATE_DROP_FENCE",
	memmodel.MutQuietAsFence: "ROXSHMEM_MUTATE_QUIET_AS_FENCE",
	memmodel.MutSignalFirst:  "ROXSHMEM_MUTATE_SIGNAL_FIRST",
}

// BuildMutant compiles kernelsDir/src/runtime.hip for sm_90 into the PTX file out, with mutation m
// (MutNone: the unmodified library). It needs clang-19.
func BuildMutant(kernelsDir, out string, m memmodel.Mutation) error {
	clang, err := exec.LookPath("clang-19")
	if err != nil {
		return fmt.Errorf("litmusrun: BuildMutant %s: clang-19 not found (apt-get install clang-19): %w", m, err)
	}
	abs, err := filepath.Abs(kernelsDir)
	if err != nil {
		return err
	}
	if out, err = filepath.Abs(out); err != nil {
		return err
	}
	args := []string{"-x", "cuda", "--cuda-gpu-arch=sm_90", "--cuda-device-only", "-nocudainc", "-nocudalib", "-S",
		"-O3", "-Wall", "-Wextra", "-Werror", "-g0", "-ffile-prefix-map=" + abs + "=.", "-fno-ident", "-Iinclude",
		"-ffp-contract=fast-honor-pragmas"}
	if m != memmodel.MutNone {
		d, ok := MutantDefine[m]
		if !ok {
			return fmt.Errorf("litmusrun: BuildMutant: mutation %s has no switch in roxshmem.h", m)
		}
		args = append(args, "-D"+d)
	}
	cmd := exec.Command(clang, append(args, "-o", out, "src/runtime.hip")...)
	cmd.Dir = abs
	cmd.Env = append(os.Environ(), "SOURCE_DATE_EPOCH=0", "LC_ALL=C")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("litmusrun: BuildMutant %s: clang-19: %v\n%s", m, err, stderr.String())
	}
	return nil
}
