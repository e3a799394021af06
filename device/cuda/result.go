package cuda

import (
	"fmt"

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
var names = map[Result]string{
	Success: "CUDA_SUCCESS", ErrorInvalidValue: "CUDA_ERROR_INVALID_VALUE",
	ErrorOutOfMemory: "CUDA_ERROR_OUT_OF_MEMORY", ErrorNotInitialized: "CUDA_ERROR_NOT_INITIALIZED",
	ErrorNoDevice: "CUDA_ERROR_NO_DEVICE", ErrorInvalidDevice: "CUDA_ERROR_INVALID_DEVICE",
	ErrorInvalidHandle: "CUDA_ERROR_INVALID_HANDLE", ErrorNotFound: "CUDA_ERROR_NOT_FOUND",
	ErrorNotReady: "CUDA_ERROR_NOT_READY", ErrorNotSupported: "CUDA_ERROR_NOT_SUPPORTED",
}

// Name returns the constant's name, e.g. "CUDA_ERROR_INVALID_VALUE".
func (r Result) Name() string {
	if loaded {
		var s *byte
		if lib.cuGetErrorName(r, &s) == 0 && s != nil {
			return cstring(s)
		}
	}
	if n, ok := names[r]; ok {
		return n
	}
	return fmt.Sprintf("CUresult(%d)", int32(r))
}

func (r Result) Error() string { return fmt.Sprintf("%s (%d)", r.Name(), int32(r)) }

// kind maps a status to the device sentinel it also matches.
func (r Result) kind() error {
	switch r {
	case ErrorNoDevice, ErrorInvalidDevice, ErrorSystemDriverMismatch, ErrorCompatNotSupportedOnDevice:
		return device.ErrNoDevice
	case ErrorInvalidValue, ErrorInvalidHandle, ErrorNotFound, ErrorInvalidImage, ErrorInvalidPTX:
		return device.ErrInvalid
	case ErrorNotReady:
		return device.ErrNotReady
	case ErrorNotSupported, ErrorPeerAccessUnsupported, ErrorUnsupportedPTXVersion:
		return device.ErrNotSupported
	case ErrorDeinitialized:
		return device.ErrClosed
	}
	return nil
}

// check returns nil for CUDA_SUCCESS, else a *device.Error naming the call and its arguments.
func check(op string, r Result, arg string) error {
	if r == Success {
		return nil
	}
	return &device.Error{Op: op, Arg: arg, Err: r, Kind: r.kind()}
}
