// Package testkernels holds the device kernels that only tests launch (kernels/src/test.hip: shmem's
// GPU tests, roxg_t_*, and its latency probe, roxg_b_*), built by `go generate ./kernels` into obj/
// beside the runtime's objects and checked against a rebuild by kernels' TestRegenerateTestKernels.
// Only test files may import it, so that the test kernels stay out of production binaries
// (TestOnlyTestsImportIt).
package testkernels

import (
	"embed"
	"strings"

	"github.com/roxamen/roxamen/kernels"
)

//go:embed obj/*.hsaco obj/*.ptx
var objects embed.FS

// ObjectFor returns the test kernels for a device of arch, picked as kernels.ObjectFor picks the
// runtime's (the newest PTX not newer than an NVIDIA device), and the arch it was built for.
func ObjectFor(arch string) ([]byte, string, error) {
	_, arch, err := kernels.ObjectFor(arch)
	if err != nil {
		return nil, "", err
	}
	ext := ".ptx"
	if strings.HasPrefix(arch, "gfx") {
		ext = ".hsaco"
	}
	b, err := objects.ReadFile("obj/test-" + arch + ext)
	return b, arch, err
}
