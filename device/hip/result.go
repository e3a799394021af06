package hip

import (
	"github.com/roxamen/roxamen/device"
)

// Result is a hipError_t status code. As an error it prints its name from hipGetErrorName
// ("hipErrorInvalidValue (1)"); errors.Is(err, hip.ErrorInvalidValue) matches it inside the
// *device.Error every call returns.
type Result int32

// Status codes from hip/hip_runtime_api.h (enum hipError_t) that callers match on.
const (
	Success                       Result = 0
	ErrorInvalidValue             Result = 1
	ErrorOutOfMemory              Result = 2
	ErrorNotInitialized           Result = 3
	ErrorDeinitialized            Result = 4
	ErrorInsufficientDriver       Result = 35
	ErrorNoDevice                 Result = 100
	ErrorInvalidDevice            Result = 101
	ErrorInvalidImage             Result = 200
	ErrorNoBinaryForGpu           Result = 209
	ErrorPeerAccessUnsupported    Result = 217
	ErrorInvalidKernelFile        Result = 218
	ErrorInvalidHandle            Result = 400
	ErrorNotFound                 Result = 500
	ErrorNotReady                 Result = 600
	ErrorPeerAccessAlreadyEnabled Result = 704
	ErrorNotSupported             Result = 801
)

// names is the fallback when hipGetErrorName is unavailable or answers hipErrorUnknown.
var names = map[int32]string{
	0: "hipSuccess", 1: "hipErrorInvalidValue", 2: "hipErrorOutOfMemory", 3: "hipErrorNotInitialized",
	100: "hipErrorNoDevice", 101: "hipErrorInvalidDevice", 400: "hipErrorInvalidHandle",
	500: "hipErrorNotFound", 600: "hipErrorNotReady", 801: "hipErrorNotSupported",
}

// kinds maps a status to the device sentinel it also matches. Debian's ROCm 5.2 runtime answers
// hipInit with hipErrorInvalidDevice on a machine without an AMD GPU: ErrNoDevice.
var kinds = map[int32]error{
	int32(ErrorNoDevice): device.ErrNoDevice, int32(ErrorInvalidDevice): device.ErrNoDevice,
	int32(ErrorInsufficientDriver): device.ErrNoDevice,
	int32(ErrorInvalidValue):       device.ErrInvalid, int32(ErrorInvalidHandle): device.ErrInvalid,
	int32(ErrorNotFound): device.ErrInvalid, int32(ErrorInvalidImage): device.ErrInvalid,
	int32(ErrorInvalidKernelFile): device.ErrInvalid, int32(ErrorNoBinaryForGpu): device.ErrInvalid,
	int32(ErrorNotReady):     device.ErrNotReady,
	int32(ErrorNotSupported): device.ErrNotSupported, int32(ErrorPeerAccessUnsupported): device.ErrNotSupported,
	int32(ErrorDeinitialized): device.ErrClosed,
}

// Name returns the constant's name, e.g. "hipErrorInvalidValue".
func (r Result) Name() string { return drv.StatusName(int32(r)) }

func (r Result) Error() string { return drv.StatusError(int32(r)) }
