package ucx

import (
	"fmt"

	"github.com/roxamen/roxamen/internal/dl"
)

// Status is a ucs_status_t (ucs/type/status.h): UCS_OK, UCS_INPROGRESS or a negative error
// code. It is a packed enum, one signed byte in the C ABI. As an error it prints UCX's own text
// and the constant's name: "Destination is unreachable (UCS_ERR_UNREACHABLE, -6)". errors.Is
// matches a Status inside any error this package returns.
type Status int8

// Status codes from ucs/type/status.h that this package names.
const (
	StatusOK                Status = 0
	StatusInProgress        Status = 1
	ErrNoMessage            Status = -1
	ErrNoResource           Status = -2
	ErrIOError              Status = -3
	ErrNoMemory             Status = -4
	ErrInvalidParam         Status = -5
	ErrUnreachable          Status = -6
	ErrInvalidAddr          Status = -7
	ErrNotImplemented       Status = -8
	ErrMessageTruncated     Status = -9
	ErrNoProgress           Status = -10
	ErrBufferTooSmall       Status = -11
	ErrNoElem               Status = -12
	ErrSomeConnectsFailed   Status = -13
	ErrNoDevice             Status = -14
	ErrBusy                 Status = -15
	ErrCanceled             Status = -16
	ErrShmemSegment         Status = -17
	ErrAlreadyExists        Status = -18
	ErrOutOfRange           Status = -19
	ErrTimedOut             Status = -20
	ErrExceedsLimit         Status = -21
	ErrUnsupported          Status = -22
	ErrRejected             Status = -23
	ErrNotConnected         Status = -24
	ErrConnectionReset      Status = -25
	ErrFirstLinkFailure     Status = -40
	ErrLastLinkFailure      Status = -59
	ErrFirstEndpointFailure Status = -60
	ErrEndpointTimeout      Status = -80
	ErrLastEndpointFailure  Status = -89
	errLast                 Status = -100 // UCS_ERR_LAST
)

var statusNames = map[Status]string{
	StatusOK: "UCS_OK", StatusInProgress: "UCS_INPROGRESS", ErrNoMessage: "UCS_ERR_NO_MESSAGE",
	ErrNoResource: "UCS_ERR_NO_RESOURCE", ErrIOError: "UCS_ERR_IO_ERROR", ErrNoMemory: "UCS_ERR_NO_MEMORY",
	ErrInvalidParam: "UCS_ERR_INVALID_PARAM", ErrUnreachable: "UCS_ERR_UNREACHABLE",
	ErrInvalidAddr: "UCS_ERR_INVALID_ADDR", ErrNotImplemented: "UCS_ERR_NOT_IMPLEMENTED",
	ErrMessageTruncated: "UCS_ERR_MESSAGE_TRUNCATED", ErrNoProgress: "UCS_ERR_NO_PROGRESS",
	ErrBufferTooSmall: "UCS_ERR_BUFFER_TOO_SMALL", ErrNoElem: "UCS_ERR_NO_ELEM",
	ErrSomeConnectsFailed: "UCS_ERR_SOME_CONNECTS_FAILED", ErrNoDevice: "UCS_ERR_NO_DEVICE",
	ErrBusy: "UCS_ERR_BUSY", ErrCanceled: "UCS_ERR_CANCELED", ErrShmemSegment: "UCS_ERR_SHMEM_SEGMENT",
	ErrAlreadyExists: "UCS_ERR_ALREADY_EXISTS", ErrOutOfRange: "UCS_ERR_OUT_OF_RANGE",
	ErrTimedOut: "UCS_ERR_TIMED_OUT", ErrExceedsLimit: "UCS_ERR_EXCEEDS_LIMIT",
	ErrUnsupported: "UCS_ERR_UNSUPPORTED", ErrRejected: "UCS_ERR_REJECTED",
	ErrNotConnected: "UCS_ERR_NOT_CONNECTED", ErrConnectionReset: "UCS_ERR_CONNECTION_RESET",
	ErrEndpointTimeout: "UCS_ERR_ENDPOINT_TIMEOUT",
}

// Name returns the constant's name ("UCS_ERR_UNREACHABLE").
func (s Status) Name() string {
	if n, ok := statusNames[s]; ok {
		return n
	}
	switch {
	case s <= ErrFirstLinkFailure && s >= ErrLastLinkFailure:
		return fmt.Sprintf("UCS_ERR_LINK_FAILURE(%d)", int8(s))
	case s <= ErrFirstEndpointFailure && s >= ErrLastEndpointFailure:
		return fmt.Sprintf("UCS_ERR_ENDPOINT_FAILURE(%d)", int8(s))
	}
	return fmt.Sprintf("ucs_status_t(%d)", int8(s))
}

func (s Status) Error() string {
	if loaded {
		if text := dl.GoString(lib.ucsStatusString(s)); text != "" {
			return fmt.Sprintf("%s (%s, %d)", text, s.Name(), int8(s))
		}
	}
	return fmt.Sprintf("%s (%d)", s.Name(), int8(s))
}

// errLastPtr is (uintptr_t)UCS_ERR_LAST: -100 in two's complement.
const errLastPtr = ^uintptr(99)

// peerFailure reports whether s means the peer or the link to it is gone.
func (s Status) peerFailure() bool {
	return s == ErrConnectionReset || s == ErrUnreachable || s == ErrNotConnected || s == ErrEndpointTimeout ||
		s == ErrIOError || (s <= ErrFirstLinkFailure && s >= ErrLastEndpointFailure)
}

// ptrStatus decodes a ucs_status_ptr_t (ucs/type/status.h): NULL is UCS_OK, a value at or above
// (uintptr_t)UCS_ERR_LAST is an error code (UCS_PTR_IS_ERR), anything else is a request.
func ptrStatus(p uintptr) (req uintptr, st Status) {
	switch {
	case p == 0:
		return 0, StatusOK
	case p >= errLastPtr:
		return 0, Status(int8(p))
	}
	return p, StatusInProgress
}
