package shmem

import (
	"unsafe"

	"github.com/roxamen/roxamen/nic"
)

// AMOInt are the types every OpenSHMEM atomic accepts.
type AMOInt interface {
	~int32 | ~int64 | ~uint32 | ~uint64 | ~int | ~uint | ~uintptr
}

// AMOStd adds the types of the fetch, set and swap atomics: floats too.
type AMOStd interface {
	AMOInt | ~float32 | ~float64
}

// AMOBit are the types of the bitwise atomics.
type AMOBit interface {
	~int32 | ~int64 | ~uint32 | ~uint64
}

func toBits[T AMOStd](v T) uint64 {
	if unsafe.Sizeof(v) == 4 {
		return uint64(*(*uint32)(unsafe.Pointer(&v)))
	}
	return *(*uint64)(unsafe.Pointer(&v))
}

func fromBits[T AMOStd](b uint64) T {
	var v T
	if unsafe.Sizeof(v) == 4 {
		*(*uint32)(unsafe.Pointer(&v)) = uint32(b)
	} else {
		*(*uint64)(unsafe.Pointer(&v)) = b
	}
	return v
}

// amo runs op on element at of s on pe and returns the old value.
func amo[T AMOStd](call string, s Sym[T], at, pe int, op nic.AMOOp, val, cmp T) (T, error) {
	return amoOn(call, s, at, pe, op, val, cmp, nil)
}

// amoOn is amo over via, pe's path (a context's own), or the World's when via is nil.
func amoOn[T AMOStd](call string, s Sym[T], at, pe int, op nic.AMOOp, val, cmp T, via path) (T, error) {
	off, size, err := s.target(call, pe, at, 1)
	if err != nil {
		var z T
		return z, err
	}
	if off%uint64(size) != 0 {
		var z T
		return z, s.w.errorf(call, ErrMisaligned, "heap offset %d is not a multiple of the %d-byte word", off, size)
	}
	if via == nil {
		via = s.w.paths[pe]
	}
	old, err := s.w.amoOn(call, via, pe, op, size, off, toBits(val), toBits(cmp))
	return fromBits[T](old), err
}

func (w *World) amo(call string, pe int, op nic.AMOOp, width int, off uint64, val, cmp uint64) (uint64, error) {
	return w.amoOn(call, w.paths[pe], pe, op, width, off, val, cmp)
}

func (w *World) amoOn(call string, p path, pe int, op nic.AMOOp, width int, off uint64, val, cmp uint64) (uint64, error) {
	if err := w.enter(call); err != nil {
		return 0, err
	}
	defer w.leave()
	if err := w.alive(call, pe); err != nil {
		return 0, err
	}
	if r, ok := p.(remote); ok && nonFetching[call] {
		if p, ok := r.t.(nic.AMOPoster); ok {
			// nobody reads the old value: delivered like a put, ordered by Fence, completed by Quiet
			if err := p.PostAMO(pe, op, width, off, val, cmp); err != nil {
				return 0, w.pathError(call, pe, err)
			}
			return 0, nil
		}
	}
	old, err := p.amo(op, width, off, val, cmp)
	if err != nil {
		return 0, w.pathError(call, pe, err)
	}
	return old, nil
}

// nonFetching are the AMO calls whose old value the caller does not get.
var nonFetching = map[string]bool{"AtomicSet": true, "AtomicAdd": true, "AtomicInc": true, "AtomicAnd": true, "AtomicOr": true, "AtomicXor": true}

// AtomicFetch atomically reads element at of s on pe (shmem_atomic_fetch).
func AtomicFetch[T AMOStd](s Sym[T], at, pe int) (T, error) {
	var z T
	return amo("AtomicFetch", s, at, pe, nic.AMOFetch, z, z)
}

// AtomicSet atomically writes v (shmem_atomic_set).
func AtomicSet[T AMOStd](s Sym[T], at int, v T, pe int) error {
	var z T
	_, err := amo("AtomicSet", s, at, pe, nic.AMOSet, v, z)
	return err
}

// AtomicSwap atomically writes v and returns the old value (shmem_atomic_swap).
func AtomicSwap[T AMOStd](s Sym[T], at int, v T, pe int) (T, error) {
	var z T
	return amo("AtomicSwap", s, at, pe, nic.AMOSwap, v, z)
}

// AtomicCompareSwap writes v if the element equals cond, and returns the old value
// (shmem_atomic_compare_swap).
func AtomicCompareSwap[T AMOInt](s Sym[T], at int, cond, v T, pe int) (T, error) {
	return amo("AtomicCompareSwap", s, at, pe, nic.AMOCompareSwap, v, cond)
}

// AtomicFetchAdd adds v and returns the old value (shmem_atomic_fetch_add).
func AtomicFetchAdd[T AMOInt](s Sym[T], at int, v T, pe int) (T, error) {
	var z T
	return amo("AtomicFetchAdd", s, at, pe, nic.AMOFetchAdd, v, z)
}

// AtomicAdd adds v (shmem_atomic_add).
func AtomicAdd[T AMOInt](s Sym[T], at int, v T, pe int) error {
	var z T
	_, err := amo("AtomicAdd", s, at, pe, nic.AMOFetchAdd, v, z)
	return err
}

// AtomicFetchInc adds one and returns the old value (shmem_atomic_fetch_inc).
func AtomicFetchInc[T AMOInt](s Sym[T], at, pe int) (T, error) {
	var z T
	return amo("AtomicFetchInc", s, at, pe, nic.AMOFetchAdd, T(1), z)
}

// AtomicInc adds one (shmem_atomic_inc).
func AtomicInc[T AMOInt](s Sym[T], at, pe int) error {
	var z T
	_, err := amo("AtomicInc", s, at, pe, nic.AMOFetchAdd, T(1), z)
	return err
}

// AtomicFetchAnd ands v in and returns the old value (shmem_atomic_fetch_and).
func AtomicFetchAnd[T AMOBit](s Sym[T], at int, v T, pe int) (T, error) {
	var z T
	return amo("AtomicFetchAnd", s, at, pe, nic.AMOFetchAnd, v, z)
}

// AtomicAnd ands v in (shmem_atomic_and).
func AtomicAnd[T AMOBit](s Sym[T], at int, v T, pe int) error {
	var z T
	_, err := amo("AtomicAnd", s, at, pe, nic.AMOFetchAnd, v, z)
	return err
}

// AtomicFetchOr ors v in and returns the old value (shmem_atomic_fetch_or).
func AtomicFetchOr[T AMOBit](s Sym[T], at int, v T, pe int) (T, error) {
	var z T
	return amo("AtomicFetchOr", s, at, pe, nic.AMOFetchOr, v, z)
}

// AtomicOr ors v in (shmem_atomic_or).
func AtomicOr[T AMOBit](s Sym[T], at int, v T, pe int) error {
	var z T
	_, err := amo("AtomicOr", s, at, pe, nic.AMOFetchOr, v, z)
	return err
}

// AtomicFetchXor xors v in and returns the old value (shmem_atomic_fetch_xor).
func AtomicFetchXor[T AMOBit](s Sym[T], at int, v T, pe int) (T, error) {
	var z T
	return amo("AtomicFetchXor", s, at, pe, nic.AMOFetchXor, v, z)
}

// AtomicXor xors v in (shmem_atomic_xor).
func AtomicXor[T AMOBit](s Sym[T], at int, v T, pe int) error {
	var z T
	_, err := amo("AtomicXor", s, at, pe, nic.AMOFetchXor, v, z)
	return err
}

// The non-blocking fetching atomics (OpenSHMEM 1.5, shmem_atomic_fetch_*_nbi): each issues the
// AMO and returns; the old value is written to *fetch when the AMO is performed, and is defined
// only after the next Quiet (or a context's Quiet, for the Ctx forms). Fence orders them as any
// AMO; they order nothing after them. Over the reordering delivery path (ROX_DELIVERY=reorder) the
// AMO really waits in the delivery pool; over paths that perform AMOs at once it completes before
// the call returns, which the contract allows.

// amoNBI issues op on element at of s on pe, its old value to land in *fetch by the next Quiet.
func amoNBI[T AMOStd](call string, s Sym[T], at, pe int, op nic.AMOOp, val, cmp T, fetch *T) error {
	return amoNBIOn(call, s, at, pe, op, val, cmp, fetch, nil)
}

// amoNBIOn is amoNBI over via, pe's path (a context's own), or the World's when via is nil.
func amoNBIOn[T AMOStd](call string, s Sym[T], at, pe int, op nic.AMOOp, val, cmp T, fetch *T, via path) error {
	if fetch == nil {
		if err := s.w.check(call); err != nil {
			return err
		}
		return s.w.errorf(call, ErrBadArgument, "nil fetch pointer (target PE %d, element %d)", pe, at)
	}
	off, size, err := s.target(call, pe, at, 1)
	if err != nil {
		return err
	}
	if off%uint64(size) != 0 {
		return s.w.errorf(call, ErrMisaligned, "heap offset %d is not a multiple of the %d-byte word", off, size)
	}
	if err := s.w.enter(call); err != nil {
		return err
	}
	defer s.w.leave()
	if err := s.w.alive(call, pe); err != nil {
		return err
	}
	if via == nil {
		via = s.w.paths[pe]
	}
	if r, ok := via.(remote); ok {
		if f, ok := r.t.(nic.NBIFetcher); ok {
			if err := f.FetchAMONBI(pe, op, size, off, toBits(val), toBits(cmp), unsafe.Slice((*byte)(unsafe.Pointer(fetch)), size)); err != nil {
				return s.w.pathError(call, pe, err)
			}
			return nil
		}
	}
	old, err := via.amo(op, size, off, toBits(val), toBits(cmp))
	if err != nil {
		return s.w.pathError(call, pe, err)
	}
	*fetch = fromBits[T](old)
	return nil
}

// AtomicFetchNBI atomically reads element at of s on pe into *fetch, defined after the next Quiet
// (shmem_atomic_fetch_nbi).
func AtomicFetchNBI[T AMOStd](s Sym[T], at, pe int, fetch *T) error {
	var z T
	return amoNBI("AtomicFetchNBI", s, at, pe, nic.AMOFetch, z, z, fetch)
}

// AtomicSwapNBI atomically writes v; the old value lands in *fetch (shmem_atomic_swap_nbi).
func AtomicSwapNBI[T AMOStd](s Sym[T], at int, v T, pe int, fetch *T) error {
	var z T
	return amoNBI("AtomicSwapNBI", s, at, pe, nic.AMOSwap, v, z, fetch)
}

// AtomicCompareSwapNBI writes v if the element equals cond; the old value lands in *fetch
// (shmem_atomic_compare_swap_nbi).
func AtomicCompareSwapNBI[T AMOInt](s Sym[T], at int, cond, v T, pe int, fetch *T) error {
	return amoNBI("AtomicCompareSwapNBI", s, at, pe, nic.AMOCompareSwap, v, cond, fetch)
}

// AtomicFetchAddNBI adds v; the old value lands in *fetch (shmem_atomic_fetch_add_nbi).
func AtomicFetchAddNBI[T AMOInt](s Sym[T], at int, v T, pe int, fetch *T) error {
	var z T
	return amoNBI("AtomicFetchAddNBI", s, at, pe, nic.AMOFetchAdd, v, z, fetch)
}

// AtomicFetchIncNBI adds one; the old value lands in *fetch (shmem_atomic_fetch_inc_nbi).
func AtomicFetchIncNBI[T AMOInt](s Sym[T], at, pe int, fetch *T) error {
	var z T
	return amoNBI("AtomicFetchIncNBI", s, at, pe, nic.AMOFetchAdd, T(1), z, fetch)
}

// AtomicFetchAndNBI ands v in; the old value lands in *fetch (shmem_atomic_fetch_and_nbi).
func AtomicFetchAndNBI[T AMOBit](s Sym[T], at int, v T, pe int, fetch *T) error {
	var z T
	return amoNBI("AtomicFetchAndNBI", s, at, pe, nic.AMOFetchAnd, v, z, fetch)
}

// AtomicFetchOrNBI ors v in; the old value lands in *fetch (shmem_atomic_fetch_or_nbi).
func AtomicFetchOrNBI[T AMOBit](s Sym[T], at int, v T, pe int, fetch *T) error {
	var z T
	return amoNBI("AtomicFetchOrNBI", s, at, pe, nic.AMOFetchOr, v, z, fetch)
}

// AtomicFetchXorNBI xors v in; the old value lands in *fetch (shmem_atomic_fetch_xor_nbi).
func AtomicFetchXorNBI[T AMOBit](s Sym[T], at int, v T, pe int, fetch *T) error {
	var z T
	return amoNBI("AtomicFetchXorNBI", s, at, pe, nic.AMOFetchXor, v, z, fetch)
}
