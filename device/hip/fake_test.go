package hip

import (
	"testing"

	"github.com/roxamen/roxamen/device"
	"github.com/roxamen/roxamen/device/internal/gpudrv"
	"github.com/roxamen/roxamen/device/internal/gpudrv/gpudrvtest"
)

// TestFakeLibrary runs the shared implementation over this package's table against a fake
// libamdhip64 (gpudrvtest): every call, the current-device model, hipMemcpyAsync's kind,
// hipModuleLoadData, gcnArchName from the property struct, the IPC flag fallback.
func TestFakeLibrary(t *testing.T) {
	gpudrvtest.Run(t, func(lib string) device.Driver {
		v := vendor
		v.Libraries = []string{lib}
		return gpudrv.New(v)
	}, gpudrvtest.Want{
		Arch:        [2]string{"gfx942", "gfx90a"},
		NotFound:    ErrorNotFound,
		OutOfMemory: ErrorOutOfMemory,
		OOMName:     "hipMalloc(size=1125899906842624): hipErrorOutOfMemory (2)",
		BadImage:    ErrorInvalidImage,
		IPCFallback: true,
	})
}
