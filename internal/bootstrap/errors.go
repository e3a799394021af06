package bootstrap

import (
	"errors"
	"fmt"
	"time"

	"github.com/roxamen/roxamen/internal/errs"
)

// Sentinel errors, matched with errors.Is.
var (
	// ErrPeerFailed: a PE died or aborted the job (see *PeerError for which and why).
	ErrPeerFailed = errors.New("bootstrap: peer failed")
	// ErrTimeout: a call waited longer than the client's timeout (see *TimeoutError); the one
	// timeout of every layer (errs.ErrTimeout).
	ErrTimeout = errs.ErrTimeout
	// ErrRefused: the rendezvous server refused the connection (bad token, PE taken or out of range).
	ErrRefused = errors.New("bootstrap: connection refused by the rendezvous server")
	// ErrClosed: the client was closed.
	ErrClosed = errors.New("bootstrap: client closed")
	// ErrBadRank: a launcher variable is missing or malformed.
	ErrBadRank = errors.New("bootstrap: bad rank environment")
)

// PeerError says which PE ended the job and how. PE is -1 when the rendezvous server itself went
// away and no PE was known to host it.
type PeerError struct {
	PE      int
	Aborted bool // the PE called Abort; Status is its exit status
	Exited  bool // the launcher saw the PE's process end; Status is its exit status (128+signal)
	Status  int
	Reason  string
}

// flags and setFlags carry Aborted and Exited in msgPeerFailed's flag byte.
func (e *PeerError) flags() byte {
	var f byte
	if e.Aborted {
		f |= 1
	}
	if e.Exited {
		f |= 2
	}
	return f
}

func (e *PeerError) setFlags(f byte) {
	e.Aborted, e.Exited = f&1 != 0, f&2 != 0
}

func (e *PeerError) Error() string {
	switch {
	case e.Aborted:
		return fmt.Sprintf("bootstrap: PE %d aborted the job with status %d: %s", e.PE, e.Status, e.Reason)
	case e.PE < 0:
		return "bootstrap: " + e.Reason
	case e.Exited:
		return fmt.Sprintf("bootstrap: PE %d %s", e.PE, e.Reason)
	default:
		return fmt.Sprintf("bootstrap: PE %d died (%s)", e.PE, e.Reason)
	}
}

// Unwrap returns ErrPeerFailed.
func (e *PeerError) Unwrap() error { return ErrPeerFailed }

// TimeoutError is a call that waited too long, and what it waited for.
type TimeoutError struct {
	After   time.Duration
	Waiting string // e.g. "PEs [1 3]" or `key "heap"`
}

func (e *TimeoutError) Error() string {
	return fmt.Sprintf("bootstrap: timed out after %v waiting for %s", e.After, e.Waiting)
}

// Unwrap returns ErrTimeout.
func (e *TimeoutError) Unwrap() error { return ErrTimeout }

// CallError is a failed client call: which call (Call: "Barrier", `Get("key")`), on which PE,
// and the cause (Err). It is errs.Error, the one shape of every layer's call errors.
type CallError = errs.Error[errs.Bootstrap]

func rankErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrBadRank, fmt.Sprintf(format, args...))
}
