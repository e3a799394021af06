package build

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// BitcodeSource is the device library's out-of-line entry points for kernels written outside
// C++ (Triton's extern_libs), built as LLVM bitcode per BitcodeTargets into
// obj/roxshmem-<arch>.bc.gz (gzip: the bitcode is mostly the header's code, and compresses 2:1).
const BitcodeSource = "src/bitcode.hip"

// BitcodeTargets are the bitcode's architectures: sm_90 for Triton on NVIDIA, gfx942 built and
// lowered by the tests (no Triton on AMD here).
var BitcodeTargets = []Target{{Arch: "sm_90"}, {Arch: "gfx942", AMD: true}}

// BitcodeName is the committed file of t's bitcode.
func BitcodeName(t Target) string { return "roxshmem-" + t.Arch + ".bc.gz" }

// BitcodeArgs are clang's arguments for t's bitcode: a device-only compile that keeps the
// extern "C" entry points (-fgpu-rdc on AMD, where a whole-program build would drop them).
func BitcodeArgs(t Target, out string) []string {
	args := Args(t, BitcodeSource, out, nil)
	extra := []string{"-emit-llvm", "-c"}
	if t.AMD {
		extra = append(extra, "-fgpu-rdc")
	}
	for i, a := range args {
		if a == "-S" { // PTX text otherwise
			args = append(args[:i], args[i+1:]...)
			break
		}
	}
	return append(extra, args...)
}

// Bitcode builds t's bitcode (uncompressed) from the kernels directory dir.
func Bitcode(dir string, t Target) ([]byte, error) {
	clang, err := Tool("clang-19")
	if err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp("", "roxbc")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	out := filepath.Join(tmp, "roxshmem.bc")
	args := BitcodeArgs(t, out)
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
		return nil, fmt.Errorf("clang-19 %s for %s: %v\n%s", BitcodeSource, t.Arch, err, stderr.String())
	}
	return os.ReadFile(out)
}

// Gzip compresses b reproducibly (no name, no time).
func Gzip(b []byte) ([]byte, error) {
	var buf bytes.Buffer
	w, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	if _, err := w.Write(b); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Bitcodes builds every BitcodeTargets bitcode into outDir, gzipped.
func Bitcodes(kernelsDir, outDir string) error {
	for _, t := range BitcodeTargets {
		b, err := Bitcode(kernelsDir, t)
		if err == nil {
			b, err = Gzip(b)
		}
		if err == nil {
			err = os.WriteFile(filepath.Join(outDir, BitcodeName(t)), b, 0o644)
		}
		if err != nil {
			return err
		}
	}
	return nil
}
