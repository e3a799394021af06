package hip

import (
	"fmt"

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

var names = map[Result]string{
	Success: "hipSuccess", ErrorInvalidValue: "hipErrorInvalidValue", ErrorOutOfMemory: "hipErrorOutOfMemory",
	ErrorNotInitialized: "hipErrorNotInitialized", ErrorNoDevice: "hipErrorNoDevice",
	ErrorInvalidDevice: "hipErrorInvalidDevice", ErrorInvalidHandle: "hipErrorInvalidHandle",
	ErrorNotFound: "hipErrorNotFound", ErrorNotReady: "hipErrorNotReady", ErrorNotSupported: "hipErrorNotSupported",
}

// Name returns the constant's name, e.g. "hipErrorInvalidValue".
func (r Result) Name() string {
	if loaded {
		if s := cstring(lib.hipGetErrorName(r)); s != "" && s != "hipErrorUnknown" {
			return s
		}
	}
	if n, ok := names[r]; ok {
		return n
	}
	return fmt.Sprintf("hipError_t(%d)", int32(r))
}

func (r Result) Error() string { return fmt.Sprintf("%s (%d)", r.Name(), int32(r)) }

func (r Result) kind() error {
	switch r {
	case ErrorNoDevice, ErrorInvalidDevice, ErrorInsufficientDriver:
		return device.ErrNoDevice
	case ErrorInvalidValue, ErrorInvalidHandle, ErrorNotFound, ErrorInvalidImage, ErrorInvalidKernelFile, ErrorNoBinaryForGpu:
		return device.ErrInvalid
	case ErrorNotReady:
		return device.ErrNotReady
	case ErrorNotSupported, ErrorPeerAccessUnsupported:
		return device.ErrNotSupported
	case ErrorDeinitialized:
		return device.ErrClosed
	}
	return nil
}

// check returns nil for hipSuccess, else a *device.Error naming the call and its arguments.
func check(op string, r Result, arg string) error {
	if r == Success {
		return nil
	}
	return &device.Error{Op: op, Arg: arg, Err: r, Kind: r.kind()}
}
