package shmem

import (
	"fmt"
	"unsafe"

	"github.com/roxamen/roxamen/internal/units"
	"github.com/roxamen/roxamen/nic"
)

// asBytes views a slice of T as its bytes.
func asBytes[T Elem](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), len(s)*int(unsafe.Sizeof(s[0])))
}

// Put copies src into elements [at, at+len(src)) of s on pe (shmem_put). It returns once src may
// be reused; delivery is ordered and completed by Fence and Quiet.
func (s Sym[T]) Put(at int, src []T, pe int) error {
	off, size, err := s.target("Put", pe, at, len(src))
	if err != nil {
		return err
	}
	return s.w.put("Put", pe, off, asBytes(src)[:size])
}

// PutNBI is the non-blocking Put (shmem_put_nbi): src must not change until Quiet.
func (s Sym[T]) PutNBI(at int, src []T, pe int) error {
	off, size, err := s.target("PutNBI", pe, at, len(src))
	if err != nil {
		return err
	}
	return s.w.put("PutNBI", pe, off, asBytes(src)[:size])
}

// Get copies elements [at, at+len(dst)) of s on pe into dst (shmem_get).
func (s Sym[T]) Get(at int, dst []T, pe int) error {
	off, size, err := s.target("Get", pe, at, len(dst))
	if err != nil {
		return err
	}
	return s.w.get("Get", pe, off, asBytes(dst)[:size])
}

// GetNBI is the non-blocking Get (shmem_get_nbi): dst is valid after Quiet.
func (s Sym[T]) GetNBI(at int, dst []T, pe int) error {
	off, size, err := s.target("GetNBI", pe, at, len(dst))
	if err != nil {
		return err
	}
	if r, ok := s.w.paths[pe].(remote); ok {
		if g, ok := r.t.(nic.NBIGetter); ok {
			return s.w.getNBI(g, pe, off, asBytes(dst)[:size])
		}
	}
	return s.w.get("GetNBI", pe, off, asBytes(dst)[:size])
}

// getNBI issues a get that a later Quiet completes.
func (w *World) getNBI(g nic.NBIGetter, pe int, off uint64, dst []byte) error {
	if err := w.enter("GetNBI"); err != nil {
		return err
	}
	defer w.leave()
	if err := w.alive("GetNBI", pe); err != nil {
		return err
	}
	if err := g.GetNBI(pe, off, dst); err != nil {
		return w.pathError("GetNBI", pe, err)
	}
	return nil
}

// P writes one element (shmem_p).
func (s Sym[T]) P(at int, v T, pe int) error {
	off, _, err := s.target("P", pe, at, 1)
	if err != nil {
		return err
	}
	if dst := s.w.peers[pe]; dst != nil && s.w.reorder == nil { // the reordering path takes puts to this PE too
		if err := s.w.enter("P"); err != nil {
			return err
		}
		if err := s.w.alive("P", pe); err != nil {
			s.w.leave()
			return err
		}
		*(*T)(unsafe.Pointer(&dst[off])) = v
		s.w.leave()
		return nil
	}
	return s.w.put("P", pe, off, asBytes([]T{v}))
}

// G reads one element (shmem_g).
func (s Sym[T]) G(at, pe int) (T, error) {
	off, _, err := s.target("G", pe, at, 1)
	if err != nil {
		var z T
		return z, err
	}
	if src := s.w.peers[pe]; src != nil {
		if err := s.w.enter("G"); err != nil {
			var z T
			return z, err
		}
		if err := s.w.alive("G", pe); err != nil {
			s.w.leave()
			var z T
			return z, err
		}
		v := *(*T)(unsafe.Pointer(&src[off]))
		s.w.leave()
		return v, nil
	}
	var v [1]T
	err = s.w.get("G", pe, off, asBytes(v[:]))
	return v[0], err
}

// IPut copies n elements of src, taken every srcStride, into s on pe starting at element at,
// placed every dstStride (shmem_iput). Strides are in elements and must be positive.
func (s Sym[T]) IPut(at, dstStride int, src []T, srcStride, n, pe int) error {
	if err := s.strided("IPut", pe, at, dstStride, len(src), srcStride, n); err != nil {
		return err
	}
	es := s.elemSize()
	for k := 0; k < n; k++ {
		off := s.off + uint64((at+k*dstStride)*es)
		if err := s.w.put("IPut", pe, off, asBytes(src[k*srcStride:k*srcStride+1])); err != nil {
			return err
		}
	}
	return nil
}

// IGet copies n elements of s on pe, starting at element at and taken every srcStride, into dst
// every dstStride (shmem_iget).
func (s Sym[T]) IGet(at, srcStride int, dst []T, dstStride, n, pe int) error {
	if err := s.strided("IGet", pe, at, srcStride, len(dst), dstStride, n); err != nil {
		return err
	}
	es := s.elemSize()
	for k := 0; k < n; k++ {
		off := s.off + uint64((at+k*srcStride)*es)
		if err := s.w.get("IGet", pe, off, asBytes(dst[k*dstStride:k*dstStride+1])); err != nil {
			return err
		}
	}
	return nil
}

// strided validates a strided transfer of n elements: symStride over s from at, locStride over a
// local slice of length locLen. Everything is checked before anything moves.
func (s Sym[T]) strided(call string, pe, at, symStride, locLen, locStride, n int) error {
	if s.w == nil {
		return s.bounds(call, 0, 0)
	}
	if err := s.w.check(call); err != nil {
		return err
	}
	if n < 0 {
		return s.w.errorf(call, ErrBadArgument, "negative count %d", n)
	}
	if symStride < 1 || locStride < 1 {
		return s.w.errorf(call, ErrBadArgument, "strides %d and %d must be positive", symStride, locStride)
	}
	if n == 0 {
		_, _, err := s.target(call, pe, at, 0)
		return err
	}
	if last := (n-1)*locStride + 1; last > locLen {
		return s.w.errorf(call, ErrBounds, "%s at stride %d need a local slice of %d, have %d", units.Count(n, "element"), locStride, last, locLen)
	}
	_, _, err := s.target(call, pe, at, (n-1)*symStride+1)
	return err
}

// put and get move bytes between this PE and pe's heap at off; the caller has checked bounds.
func (w *World) put(call string, pe int, off uint64, src []byte) error {
	return w.putOn(call, w.paths[pe], pe, off, src)
}

func (w *World) get(call string, pe int, off uint64, dst []byte) error {
	return w.getOn(call, w.paths[pe], pe, off, dst)
}

// putOn and getOn are put and get over p, pe's path (a context's own, or the World's).
func (w *World) putOn(call string, p path, pe int, off uint64, src []byte) error {
	if err := w.enter(call); err != nil {
		return err
	}
	defer w.leave()
	if err := w.alive(call, pe); err != nil {
		return err
	}
	if err := p.put(off, src); err != nil {
		return w.pathError(call, pe, err)
	}
	return nil
}

func (w *World) getOn(call string, p path, pe int, off uint64, dst []byte) error {
	if err := w.enter(call); err != nil {
		return err
	}
	defer w.leave()
	if err := w.alive(call, pe); err != nil {
		return err
	}
	if err := p.get(off, dst); err != nil {
		return w.pathError(call, pe, err)
	}
	return nil
}

// enter admits a call that touches the heaps or the transport; Finalize waits until every call it
// admitted has left before it unmaps anything. One atomic add does both the count and the check:
// Finalize sets inflightClosed in the same word before it waits, so either it counts this call or
// this call sees the bit.
func (w *World) enter(call string) error {
	if w.inflight.Add(1)&inflightClosed != 0 {
		w.inflight.Add(-1)
		return w.errorf(call, ErrFinalized, "")
	}
	return nil
}

func (w *World) leave() { w.inflight.Add(-1) }

// inflightClosed is the bit of World.inflight that Finalize sets; the bits below count calls.
const inflightClosed = 1 << 62

// alive fails a call to pe once the job knows that pe is dead (or that the job is over without
// knowing which PE ended it): a heap mapped here outlives its PE, and writes into it would
// succeed unseen.
func (w *World) alive(call string, pe int) error {
	f := w.fail.Load()
	if f == nil || f.pe >= 0 && f.pe != pe {
		return nil
	}
	return &Error{Call: call, PE: w.pe, Kind: ErrPEFailed, Detail: fmt.Sprintf("target PE %d", pe), Err: f.err}
}

// pathError wraps a transport failure: the PE it was talking to is gone or refused the operation.
func (w *World) pathError(call string, pe int, err error) error {
	return &Error{Call: call, PE: w.pe, Kind: kindOf(err, ErrPEFailed), Detail: fmt.Sprintf("target PE %d", pe), Err: err}
}
