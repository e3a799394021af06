// Package gpurt is the GPU runtime under package shmem. For one PE on a GPU backend (cuda, hip) it
// owns the runtime code object and its roxshmem_state, the device->host command ring and the proxy
// that serves it (copy-engine and NIC routes), the device contexts' rings, AMD's SDMA queues, the
// abort block and waits that never hang, the host-pinned heap of the NIC path, the modules loaded
// for the user, the device team table and the engine of the stream-ordered collectives (their
// code object, and the host backend's stand-in for it).
//
// Package shmem keeps the API (World, Module, the *OnStream calls and their argument checks,
// Team.Handle) and the errors callers see; it hands the runtime what it needs of the World through
// the World interface, and turns the runtime's *Error values into its own. gpurt never imports
// shmem.
//
// Lifetime: a Runtime lives from New (Init, once the PE's heaps are mapped) to Release
// (Finalize, or a failed Init); Release unloads every module it loaded.
package gpurt

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/roxamen/roxamen/device"
	"github.com/roxamen/roxamen/internal/env"
	"github.com/roxamen/roxamen/nic"
)

// World is what the runtime needs of the PE it serves (package shmem's World).
type World interface {
	PE() int
	NPEs() int
	Device() device.Device
	HeapSize() int64 // the symmetric heap's size, the same on every PE
	Timeout() time.Duration
	Bypass() bool             // the CacheBypass ordering mode (ROX_ORDERING=bypass)
	Transport() nic.Transport // the NIC path's transport; nil where every PE is mapped here
	// Allgather exchanges b with every PE over the bootstrap.
	Allgather(ctx context.Context, b []byte) ([][]byte, error)
	// Failed is closed when the job fails (a PE died, GlobalExit); Err is then the failure.
	Failed() <-chan struct{}
	Err() error
	// Reserve takes size zeroed bytes of the symmetric heap, at the same offset on every PE (every
	// PE reserves the same sizes in the same order, at Init).
	Reserve(size uint64) (off uint64, err error)
	// Zero clears [off, off+size) of this PE's heap.
	Zero(off uint64, size int) error
}

// Kind classifies an *Error; package shmem maps each to its error kind (ErrPEFailed, ...).
type Kind int

const (
	KindPEFailed      Kind = iota // device work or the device failed
	KindTimeout                   // device work did not stop in time
	KindBadArgument               // a kernel, module or team that cannot be used so
	KindNoMemory                  // not enough memory
	KindTeamDestroyed             // a kernel named a destroyed team
	KindNotInTeam                 // a kernel named no team of this PE
)

// Error is a failure of the runtime, classified for the caller's error.
type Error struct {
	Kind   Kind
	Detail string
	Err    error // the cause, if any
}

func (e *Error) Error() string {
	s := e.Detail
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

func (e *Error) Unwrap() error { return e.Err }

func errorf(kind Kind, err error, format string, args ...any) *Error {
	return &Error{Kind: kind, Detail: fmt.Sprintf(format, args...), Err: err}
}

func debugf(format string, args ...any) {
	if env.Debugging(env.LevelInfo) {
		fmt.Fprintf(os.Stderr, "roxamen: "+format+"\n", args...)
	}
}
