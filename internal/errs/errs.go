// Package errs holds what the errors of every layer share, on the standard library alone: the
// kinds a caller matches across layers with errors.Is (ErrTimeout: shmem's, bootstrap's, the
// transports' and PMIx's timeouts are one error), and the one shape of a failed call (Error: the
// call, the PE, the kind, the value and the cause).
package errs

import "errors"

// ErrTimeout: a call waited longer than its limit (ROX_TIMEOUT, a context, a PMIx timeout).
// Every layer re-exports this one value, so that errors.Is matches a timeout from below at any
// layer above.
var ErrTimeout = errors.New("timed out")
