// Package errs holds what the errors of every layer share, on the standard library alone: the
// kinds a caller matches across layers with errors.Is (ErrTimeout: shmem's, bootstrap's, the
// transports' and PMIx's timeouts are one error), and the one shape of a failed call (Error: the
// call, the PE, the kind, the value and the cause).
package errs

import (
	"errors"
	"strconv"
	"strings"
)

// ErrTimeout: a call waited longer than its limit (ROX_TIMEOUT, a context, a PMIx timeout).
// Every layer re-exports this one value, so that errors.Is matches a timeout from below at any
// layer above.
var ErrTimeout = errors.New("timed out")

// Layer names the package a call error comes from; its name starts the message. Each layer that
// reports failed calls has its marker here, so that a package split off a layer (shmem's
// internal packages) reports under the layer's name.
type Layer interface{ Name() string }

// The layers that report failed calls.
type (
	Shmem     struct{} // package shmem and what it is built of
	Bootstrap struct{} // internal/bootstrap, the rendezvous client
	PMIx      struct{} // internal/pmix
)

// Device is package device and its drivers. A driver call has no PE, and its message keeps the
// form of the native call it reports, "CALL(DETAIL): CAUSE" (the cause, else the kind).
type Device struct{}

func (Device) Name() string { return "device" }
func (Device) callForm()    {}

func (Shmem) Name() string     { return "shmem" }
func (Bootstrap) Name() string { return "bootstrap" }
func (PMIx) Name() string      { return "pmix" }

// Error is a failed call, the one shape of every layer's call errors (shmem.Error,
// bootstrap.CallError, pmix.Error and device.Error are it): which call, on which PE, what kind of
// failure, the value at fault and what was expected, and the cause. Its message reads
// "LAYER: CALL on PE n: KIND: DETAIL: CAUSE", leaving out what is not known (the device layer
// keeps its drivers' "CALL(DETAIL): CAUSE"); a cause from the same layer does not repeat the
// layer's name.
type Error[L Layer] struct {
	Call   string // "Put", "Barrier", `PMIx_Get("pmix.job.size")`
	PE     int    // the calling PE; -1 when none is known (before Init, a nil handle)
	Kind   error  // the sentinel errors.Is matches (ErrTimeout, shmem.ErrPERange, ...); may be nil
	Detail string // the bad value and what was expected; may be empty
	Err    error  // the cause, if any
}

func (e *Error[L]) Error() string {
	var l L
	if _, ok := any(l).(interface{ callForm() }); ok {
		s := e.Call
		if e.Detail != "" {
			s += "(" + e.Detail + ")"
		}
		switch {
		case e.Err != nil:
			s += ": " + e.Err.Error()
		case e.Kind != nil:
			s += ": " + e.Kind.Error()
		}
		return s
	}
	s := l.Name() + ": " + e.Call
	if e.PE >= 0 {
		s += " on PE " + strconv.Itoa(e.PE)
	}
	if e.Kind != nil {
		s += ": " + e.Kind.Error()
	}
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	if e.Err != nil {
		s += ": " + strings.TrimPrefix(e.Err.Error(), l.Name()+": ")
	}
	return s
}

// Unwrap returns the kind and the cause, so that errors.Is and errors.As match either.
func (e *Error[L]) Unwrap() []error {
	var out []error
	if e.Kind != nil {
		out = append(out, e.Kind)
	}
	if e.Err != nil {
		out = append(out, e.Err)
	}
	return out
}
