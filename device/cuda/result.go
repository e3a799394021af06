package cuda

import (
	"github.com/roxamen/roxamen/device"
)

// Result is a CUresult status code. As an error it prints its name from cuGetErrorName
// ("CUDA_ERROR_INVALID_VALUE (1)"); errors.Is(err, cuda.ErrorInvalidValue) matches it inside the
// *device.Error every call returns.
type Result int32

// Status codes from cuda.h (enum cudaError_enum) that callers match on.
const (
	Success                         Result = 0
	ErrorInvalidValue               Result = 1
	ErrorOutOfMemory                Result = 2
	ErrorNotInitialized             Result = 3
	ErrorDeinitialized              Result = 4
	ErrorNoDevice                   Result = 100
	ErrorInvalidDevice              Result = 101
	ErrorInvalidImage               Result = 200
	ErrorInvalidContext             Result = 201
	ErrorInvalidPTX                 Result = 218
	ErrorUnsupportedPTXVersion      Result = 222
	ErrorInvalidHandle              Result = 400
	ErrorNotFound                   Result = 500
	ErrorNotReady                   Result = 600
	ErrorIllegalAddress             Result = 700
	ErrorPeerAccessAlreadyEnabled   Result = 704
	ErrorPeerAccessUnsupported      Result = 217
	ErrorNotSupported               Result = 801
	ErrorLaunchFailed               Result = 719
	ErrorSystemDriverMismatch       Result = 803
	ErrorCompatNotSupportedOnDevice Result = 804
)

// names is the fallback when cuGetErrorName is unavailable (never for a loaded driver).
var names = map[int32]string{
	0: "CUDA_SUCCESS", 1: "CUDA_ERROR_INVALID_VALUE", 2: "CUDA_ERROR_OUT_OF_MEMORY",
	3: "CUDA_ERROR_NOT_INITIALIZED", 100: "CUDA_ERROR_NO_DEVICE", 101: "CUDA_ERROR_INVALID_DEVICE",
	400: "CUDA_ERROR_INVALID_HANDLE", 500: "CUDA_ERROR_NOT_FOUND", 600: "CUDA_ERROR_NOT_READY",
	801: "CUDA_ERROR_NOT_SUPPORTED",
}

// kinds maps a status to the device sentinel it also matches.
var kinds = map[int32]error{
	int32(ErrorNoDevice): device.ErrNoDevice, int32(ErrorInvalidDevice): device.ErrNoDevice,
	int32(ErrorSystemDriverMismatch): device.ErrNoDevice, int32(ErrorCompatNotSupportedOnDevice): device.ErrNoDevice,
	int32(ErrorInvalidValue): device.ErrInvalid, int32(ErrorInvalidHandle): device.ErrInvalid,
	int32(ErrorNotFound): device.ErrInvalid, int32(ErrorInvalidImage): device.ErrInvalid,
	int32(ErrorInvalidPTX):   device.ErrInvalid,
	int32(ErrorNotReady):     device.ErrNotReady,
	int32(ErrorNotSupported): device.ErrNotSupported, int32(ErrorPeerAccessUnsupported): device.ErrNotSupported,
	int32(ErrorUnsupportedPTXVersion): device.ErrNotSupported,
	int32(ErrorDeinitialized):         device.ErrClosed,
}

// Name returns the constant's name, e.g. "CUDA_ERROR_INVALID_VALUE".
func (r Result) Name() string { return drv.StatusName(int32(r)) }

func (r Result) Error() string { return drv.StatusError(int32(r)) }
