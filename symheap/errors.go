package symheap

import (
	"errors"
	"fmt"
)

// Sentinel errors, matched with errors.Is. Every error this package returns wraps exactly one.
var (
	// ErrOutOfMemory: no free block is large enough (see *OutOfMemoryError for the numbers). It is
	// the runtime's one out-of-memory error: shmem.ErrOutOfMemory is this value.
	ErrOutOfMemory = errors.New("out of symmetric heap memory")
	// ErrBadAlign: an alignment that is not a power of two.
	ErrBadAlign = errors.New("bad alignment")
	// ErrNotAllocated: an offset that is not the start of (or not inside) a live allocation.
	ErrNotAllocated = errors.New("not allocated")
	// ErrOutOfRange: an offset, range or address outside the heap or past the end of an allocation.
	ErrOutOfRange = errors.New("out of range")
	// ErrBadPE: a PE number outside the layout.
	ErrBadPE = errors.New("PE out of range")
	// ErrNotMapped: the PE's heap has no address in this process (a remote node).
	ErrNotMapped = errors.New("heap not mapped")
)

// Error is a failed call: which call, with which values, and why.
type Error struct {
	Op  string // the call and its arguments, e.g. "Free(0x40)"
	Err error  // one of the sentinels
	Why string // the detail, naming the values involved
}

func (e *Error) Error() string { return "symheap: " + e.Op + ": " + e.Why }

// Unwrap returns the sentinel so that errors.Is works.
func (e *Error) Unwrap() error { return e.Err }

// OutOfMemoryError is ErrOutOfMemory with the numbers a caller needs to report it or retry.
type OutOfMemoryError struct {
	Op          string
	Requested   uint64 // bytes asked for
	Align       uint64 // alignment asked for (after defaulting)
	LargestFree uint64 // the largest free block, whatever its alignment
	Free        uint64 // all free bytes
	HeapSize    uint64
}

func (e *OutOfMemoryError) Error() string {
	return fmt.Sprintf("symheap: %s: out of symmetric heap memory: %d bytes aligned to %d requested, "+
		"largest free block %d bytes (%d free of %d)", e.Op, e.Requested, e.Align, e.LargestFree, e.Free, e.HeapSize)
}

// Unwrap returns ErrOutOfMemory.
func (e *OutOfMemoryError) Unwrap() error { return ErrOutOfMemory }

func errorf(op string, sentinel error, format string, args ...any) error {
	return &Error{Op: op, Err: sentinel, Why: fmt.Sprintf(format, args...)}
}
