package shmem

import (
	"context"
	"errors"
	"fmt"
	"syscall"

	"github.com/roxamen/roxamen/internal/bootstrap"
	"github.com/roxamen/roxamen/internal/errs"
	"github.com/roxamen/roxamen/nic/tcp"
	"github.com/roxamen/roxamen/nic/ucx"
	"github.com/roxamen/roxamen/symheap"
)

// Error kinds, matched with errors.Is on the *Error every call returns.
var (
	ErrNotInitialized = errors.New("called before Init")
	ErrFinalized      = errors.New("called after Finalize")
	ErrPERange        = errors.New("PE out of range")
	ErrBounds         = errors.New("outside the symmetric allocation")
	ErrNotSymmetric   = errors.New("not in the symmetric heap")
	ErrMisaligned     = errors.New("misaligned")
	ErrBadArgument    = errors.New("bad argument")
	ErrMismatch       = errors.New("collective arguments differ across PEs")
	ErrPEFailed       = errors.New("a PE failed")
	ErrTimeout        = errs.ErrTimeout        // the one timeout of every layer: bootstrap's, the transports' too
	ErrOutOfMemory    = symheap.ErrOutOfMemory // the heap, its workspaces, or the memory for it
	ErrFreed          = errors.New("allocation used after Free or Realloc")
	ErrConcurrent     = errors.New("collective call made while another is in progress")
	ErrInitialized    = errors.New("already initialized")
	ErrSystem         = errors.New("the operating system refused")
)

// Error is the error of a failed call: which call (Call), on which PE (PE, -1 before Init), the
// kind errors.Is matches (Kind, one of the Err* above), the bad value and what was expected
// (Detail), and the underlying cause (Err). It is errs.Error, the one shape of every layer's call
// errors; its message reads "shmem: CALL on PE n: KIND: DETAIL: CAUSE".
type Error = errs.Error[errs.Shmem]

func (w *World) errorf(call string, kind error, format string, args ...any) *Error {
	pe := -1
	if w != nil {
		pe = w.pe
	} else {
		pe = callerPE()
	}
	return &Error{Call: call, PE: pe, Kind: kind, Detail: fmt.Sprintf(format, args...)}
}

// kindOf says what happened in a failure of the layers below (the rendezvous, a transport, the
// operating system), for an error whose kind errors.Is must match: a timeout is ErrTimeout, not a
// failed PE. fallback is the kind when nothing more precise is known.
func kindOf(err error, fallback error) error {
	switch {
	case err == nil:
		return fallback
	case errors.Is(err, bootstrap.ErrPeerFailed), errors.Is(err, tcp.ErrPeerLost), errors.Is(err, ucx.ErrPeerLost):
		return ErrPEFailed
	case errors.Is(err, ErrTimeout), errors.Is(err, context.DeadlineExceeded), errors.Is(err, syscall.ETIMEDOUT):
		return ErrTimeout
	case errors.Is(err, bootstrap.ErrRefused), errors.Is(err, bootstrap.ErrBadRank):
		return ErrBadArgument
	case errors.Is(err, syscall.ENOMEM):
		return ErrOutOfMemory
	case errors.Is(err, syscall.ESRCH):
		return ErrPEFailed // the process whose memory was to be mapped is gone
	case errors.Is(err, syscall.EPERM), errors.Is(err, syscall.EACCES), errors.Is(err, syscall.EMFILE),
		errors.Is(err, syscall.ENFILE), errors.Is(err, syscall.ENOSYS):
		return ErrSystem
	}
	return fallback
}

// callerPE is the PE an error names when the call gave no World (a nil team or context, a zero
// object): the process's one World's, or -1 where it has none or several.
func callerPE() int {
	if w := soleWorld(); w != nil {
		return w.pe
	}
	return -1
}
