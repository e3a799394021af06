package cuda

import (
	"testing"

	"github.com/roxamen/roxamen/device"
	"github.com/roxamen/roxamen/device/internal/gpudrv"
	"github.com/roxamen/roxamen/device/internal/gpudrv/gpudrvtest"
)

// TestFakeLibrary runs the shared implementation over this package's table against a fake
// libcuda (gpudrvtest): every call, the primary-context model, the JIT log.
func TestFakeLibrary(t *testing.T) {
	gpudrvtest.Run(t, func(lib string) device.Driver {
		v := vendor
		v.Libraries, v.Dirs = []string{lib}, nil
		return gpudrv.New(v)
	}, gpudrvtest.Want{
		Arch:        [2]string{"sm_90", "sm_90"},
		Contexts:    true,
		NotFound:    ErrorNotFound,
		OutOfMemory: ErrorOutOfMemory,
		OOMName:     "cuMemAlloc_v2(size=1125899906842624): CUDA_ERROR_OUT_OF_MEMORY (2)",
		BadImage:    ErrorInvalidPTX,
		BadImageLog: "cuModuleLoadDataEx(image of 12 bytes: fake JIT: not a FAKE image)",
	})
}

// BenchmarkLaunch: the Go side of a launch (gpudrvtest.BenchLaunch), over the fake libcuda.
func BenchmarkLaunch(b *testing.B) {
	gpudrvtest.BenchLaunch(b, func(lib string) device.Driver {
		v := vendor
		v.Libraries, v.Dirs = []string{lib}, nil
		return gpudrv.New(v)
	})
}
