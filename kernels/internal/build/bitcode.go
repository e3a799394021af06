package build

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
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
// extern "C" entry points (-fgpu-rdc on AMD, where a whole-program build would drop them). On
// NVIDIA the output is IR text, which Bitcode makes linkable (NVPTXLinkable) and assembles.
func BitcodeArgs(t Target, out string) []string {
	args := Args(t, BitcodeSource, out, nil)
	if t.AMD {
		return append([]string{"-emit-llvm", "-c", "-fgpu-rdc"}, args...)
	}
	return append([]string{"-emit-llvm"}, args...) // with Args' -S: text
}

// NVPTXLinkable makes clang's NVPTX IR text linkable into a module of another compiler (Triton's):
// it drops the nvvm-reflect-ftz module flag, whose Override behaviour makes LLVM's linker refuse
// a module that sets it otherwise (Triton sets 1, clang 0; no entry point reads it), and the
// functions' target-cpu/target-features, so that they take the linking module's target.
func NVPTXLinkable(ll string) (string, error) {
	lines := strings.Split(ll, "\n")
	ftz := ""
	for _, l := range lines {
		if strings.Contains(l, `!"nvvm-reflect-ftz"`) {
			ftz, _, _ = strings.Cut(l, " ")
		}
	}
	if ftz == "" {
		return "", fmt.Errorf("no nvvm-reflect-ftz module flag in the IR: clang changed, check NVPTXLinkable")
	}
	attr := regexp.MustCompile(` "target-(cpu|features)"="[^"]*"`)
	for i, l := range lines {
		switch {
		case strings.HasPrefix(l, "!llvm.module.flags = !{"):
			body := strings.TrimSuffix(strings.TrimPrefix(l, "!llvm.module.flags = !{"), "}")
			var keep []string
			for _, id := range strings.Split(body, ", ") {
				if id != ftz {
					keep = append(keep, id)
				}
			}
			lines[i] = "!llvm.module.flags = !{" + strings.Join(keep, ", ") + "}"
		case strings.HasPrefix(l, ftz+" = "):
			lines[i] = ""
		case strings.HasPrefix(l, "attributes #"):
			lines[i] = attr.ReplaceAllString(l, "")
		}
	}
	return strings.Join(lines, "\n"), nil
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
	if !t.AMD {
		out = filepath.Join(tmp, "roxshmem.ll")
	}
	if err := runClang(clang, abs, BitcodeArgs(t, out), BitcodeSource, t); err != nil {
		return nil, err
	}
	if t.AMD {
		return os.ReadFile(out)
	}
	ll, err := os.ReadFile(out)
	if err != nil {
		return nil, err
	}
	text, err := NVPTXLinkable(string(ll))
	if err != nil {
		return nil, err
	}
	as, err := Tool("llvm-as-19")
	if err != nil {
		return nil, err
	}
	bc := filepath.Join(tmp, "roxshmem.bc")
	cmd := exec.Command(as, "-o", bc, "-")
	cmd.Stdin = strings.NewReader(text)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("llvm-as-19 of the %s bitcode: %v\n%s", t.Arch, err, stderr.String())
	}
	return os.ReadFile(bc)
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
