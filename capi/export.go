//go:build cgo

package main

/*
#include <stdint.h>
#include <stdlib.h>
void rox_set_error(char *msg, int code);
*/
import "C"

import (
	"unsafe"

	"github.com/roxamen/roxamen/shmem"
	"github.com/roxamen/roxamen/shmem/ep"
)

// The exported functions convert C arguments and results and nothing else; their prototypes are
// include/roxamen.h's (test/capi.sh compiles the two headers together to hold them equal).

// ret records err's text as this thread's last error and returns its code.
func ret(err error) C.int {
	code := C.int(codeOf(err))
	if err != nil {
		C.rox_set_error(C.CString(err.Error()), code)
	}
	return code
}

func addr(p unsafe.Pointer) uintptr { return uintptr(p) }

// cptr turns an address outside Go's memory (the mapped symmetric heap, a device address) into
// the pointer C receives; the garbage collector never owns what it points to.
func cptr(p uintptr) unsafe.Pointer { return *(*unsafe.Pointer)(unsafe.Pointer(&p)) }

//export roxamen_init
func roxamen_init() C.int { return ret(initEnv()) }

//export roxamen_init_with_unique_id
func roxamen_init_with_unique_id(uid *C.char, rank, npes C.int) C.int {
	return ret(initUnique(C.GoString(uid), int(rank), int(npes)))
}

//export roxamen_get_unique_id
func roxamen_get_unique_id(buf *C.char, n C.size_t) C.int {
	id, err := newUniqueID()
	if err != nil {
		return ret(err)
	}
	if int(n) < len(id)+1 {
		return ret(errorf("roxamen_get_unique_id", shmem.ErrBadArgument, "a %d-byte buffer, the id needs %d (ROXAMEN_UNIQUE_ID_BYTES)", n, len(id)+1))
	}
	b := unsafe.Slice((*byte)(unsafe.Pointer(buf)), int(n))
	b[copy(b, id)] = 0
	return 0
}

//export roxamen_finalize
func roxamen_finalize() C.int { return ret(finalize()) }

//export roxamen_my_pe
func roxamen_my_pe() C.int {
	if w, err := world(""); err == nil {
		return C.int(w.MyPE())
	}
	return -1
}

//export roxamen_n_pes
func roxamen_n_pes() C.int {
	if w, err := world(""); err == nil {
		return C.int(w.NPEs())
	}
	return -1
}

//export roxamen_malloc
func roxamen_malloc(size C.size_t) unsafe.Pointer {
	p, err := malloc("roxamen_malloc", int(size), 1, false)
	ret(err)
	return cptr(p)
}

//export roxamen_calloc
func roxamen_calloc(n, size C.size_t) unsafe.Pointer {
	p, err := malloc("roxamen_calloc", int(size), int(n), true)
	ret(err)
	return cptr(p)
}

//export roxamen_free
func roxamen_free(p unsafe.Pointer) C.int { return ret(free(addr(p))) }

//export roxamen_ptr
func roxamen_ptr(p unsafe.Pointer, pe C.int) unsafe.Pointer {
	return cptr(peerPtr(addr(p), int(pe)))
}

//export roxamen_putmem
func roxamen_putmem(dest, src unsafe.Pointer, n C.size_t, pe C.int) C.int {
	return ret(putmem(nil, addr(dest), src, int(n), int(pe), false))
}

//export roxamen_putmem_nbi
func roxamen_putmem_nbi(dest, src unsafe.Pointer, n C.size_t, pe C.int) C.int {
	return ret(putmem(nil, addr(dest), src, int(n), int(pe), true))
}

//export roxamen_getmem
func roxamen_getmem(dest, src unsafe.Pointer, n C.size_t, pe C.int) C.int {
	return ret(getmem(nil, dest, addr(src), int(n), int(pe), false))
}

//export roxamen_getmem_nbi
func roxamen_getmem_nbi(dest, src unsafe.Pointer, n C.size_t, pe C.int) C.int {
	return ret(getmem(nil, dest, addr(src), int(n), int(pe), true))
}

//export roxamen_fence
func roxamen_fence() C.int {
	w, err := world("roxamen_fence")
	if err == nil {
		err = w.Fence()
	}
	return ret(err)
}

//export roxamen_quiet
func roxamen_quiet() C.int {
	w, err := world("roxamen_quiet")
	if err == nil {
		err = w.Quiet()
	}
	return ret(err)
}

//export roxamen_atomic
func roxamen_atomic(op, dtype C.int, dest, value, cond, fetch unsafe.Pointer, pe C.int) C.int {
	return ret(atomic(nil, int(op), int(dtype), addr(dest), value, cond, fetch, int(pe)))
}

//export roxamen_putmem_signal
func roxamen_putmem_signal(dest, src unsafe.Pointer, n C.size_t, sig *C.uint64_t, value C.uint64_t, sigOp, pe C.int) C.int {
	return ret(putSignal(addr(dest), src, int(n), addr(unsafe.Pointer(sig)), uint64(value), int(sigOp), int(pe), false))
}

//export roxamen_putmem_signal_nbi
func roxamen_putmem_signal_nbi(dest, src unsafe.Pointer, n C.size_t, sig *C.uint64_t, value C.uint64_t, sigOp, pe C.int) C.int {
	return ret(putSignal(addr(dest), src, int(n), addr(unsafe.Pointer(sig)), uint64(value), int(sigOp), int(pe), true))
}

//export roxamen_signal_wait_until
func roxamen_signal_wait_until(sig *C.uint64_t, cmp C.int, value C.uint64_t, got *C.uint64_t) C.int {
	v, err := signalWait(addr(unsafe.Pointer(sig)), int(cmp), uint64(value))
	if err == nil && got != nil {
		*got = C.uint64_t(v)
	}
	return ret(err)
}

//export roxamen_signal_fetch
func roxamen_signal_fetch(sig *C.uint64_t, got *C.uint64_t) C.int {
	v, err := signalFetch(addr(unsafe.Pointer(sig)))
	if err == nil && got != nil {
		*got = C.uint64_t(v)
	}
	return ret(err)
}

//export roxamen_barrier_all
func roxamen_barrier_all() C.int {
	w, err := world("roxamen_barrier_all")
	if err == nil {
		err = w.BarrierAll(bg)
	}
	return ret(err)
}

//export roxamen_sync_all
func roxamen_sync_all() C.int {
	w, err := world("roxamen_sync_all")
	if err == nil {
		err = w.SyncAll(bg)
	}
	return ret(err)
}

//export roxamen_team_my_pe
func roxamen_team_my_pe(t C.int) C.int {
	if tm, err := team("", int32(t)); err == nil {
		return C.int(tm.MyPE())
	}
	return -1
}

//export roxamen_team_n_pes
func roxamen_team_n_pes(t C.int) C.int {
	if tm, err := team("", int32(t)); err == nil {
		return C.int(tm.NPEs())
	}
	return -1
}

//export roxamen_team_translate_pe
func roxamen_team_translate_pe(src, pe, dst C.int) C.int {
	s, err1 := team("", int32(src))
	d, err2 := team("", int32(dst))
	if err1 != nil || err2 != nil {
		return -1
	}
	return C.int(s.TranslatePE(int(pe), d))
}

//export roxamen_team_split_strided
func roxamen_team_split_strided(parent, start, stride, size C.int, out *C.int) C.int {
	h, err := splitStrided(int32(parent), int(start), int(stride), int(size))
	if out != nil {
		*out = C.int(h)
	}
	return ret(err)
}

//export roxamen_team_split_2d
func roxamen_team_split_2d(parent, xrange C.int, x, y *C.int) C.int {
	hx, hy, err := split2D(int32(parent), int(xrange))
	if x != nil {
		*x = C.int(hx)
	}
	if y != nil {
		*y = C.int(hy)
	}
	return ret(err)
}

//export roxamen_team_sync
func roxamen_team_sync(t C.int) C.int {
	tm, err := team("roxamen_team_sync", int32(t))
	if err == nil {
		err = tm.Sync(bg)
	}
	return ret(err)
}

//export roxamen_team_destroy
func roxamen_team_destroy(t C.int) C.int { return ret(destroyTeam(int32(t))) }

//export roxamen_ctx_create
func roxamen_ctx_create(options C.long, out *C.int) C.int {
	h, err := createCtx(int(options))
	if err == nil && out != nil {
		*out = C.int(h)
	}
	return ret(err)
}

//export roxamen_ctx_destroy
func roxamen_ctx_destroy(c C.int) C.int { return ret(destroyCtx(int32(c))) }

//export roxamen_ctx_putmem
func roxamen_ctx_putmem(c C.int, dest, src unsafe.Pointer, n C.size_t, pe C.int) C.int {
	cx, err := ctxOf("roxamen_ctx_putmem", int32(c))
	if err == nil {
		err = putmem(cx, addr(dest), src, int(n), int(pe), false)
	}
	return ret(err)
}

//export roxamen_ctx_putmem_nbi
func roxamen_ctx_putmem_nbi(c C.int, dest, src unsafe.Pointer, n C.size_t, pe C.int) C.int {
	cx, err := ctxOf("roxamen_ctx_putmem_nbi", int32(c))
	if err == nil {
		err = putmem(cx, addr(dest), src, int(n), int(pe), true)
	}
	return ret(err)
}

//export roxamen_ctx_getmem
func roxamen_ctx_getmem(c C.int, dest, src unsafe.Pointer, n C.size_t, pe C.int) C.int {
	cx, err := ctxOf("roxamen_ctx_getmem", int32(c))
	if err == nil {
		err = getmem(cx, dest, addr(src), int(n), int(pe), false)
	}
	return ret(err)
}

//export roxamen_ctx_atomic
func roxamen_ctx_atomic(c, op, dtype C.int, dest, value, cond, fetch unsafe.Pointer, pe C.int) C.int {
	cx, err := ctxOf("roxamen_ctx_atomic", int32(c))
	if err == nil {
		err = atomic(cx, int(op), int(dtype), addr(dest), value, cond, fetch, int(pe))
	}
	return ret(err)
}

//export roxamen_ctx_fence
func roxamen_ctx_fence(c C.int) C.int {
	cx, err := ctxOf("roxamen_ctx_fence", int32(c))
	if err == nil {
		err = cx.Fence()
	}
	return ret(err)
}

//export roxamen_ctx_quiet
func roxamen_ctx_quiet(c C.int) C.int {
	cx, err := ctxOf("roxamen_ctx_quiet", int32(c))
	if err == nil {
		err = cx.Quiet()
	}
	return ret(err)
}

//export roxamen_stream_create
func roxamen_stream_create(out *unsafe.Pointer) C.int {
	h, err := createStream()
	if err == nil && out != nil {
		*out = cptr(h)
	}
	return ret(err)
}

//export roxamen_stream_destroy
func roxamen_stream_destroy(st unsafe.Pointer) C.int { return ret(destroyStream(addr(st))) }

//export roxamen_stream_sync
func roxamen_stream_sync(st unsafe.Pointer) C.int { return ret(syncStream(addr(st))) }

//export roxamen_allreduce
func roxamen_allreduce(t, dtype, op C.int, dest, src unsafe.Pointer, n C.size_t) C.int {
	return ret(collective(collAllReduce, 0, false, int32(t), int(dtype), int(op), addr(dest), addr(src), int(n), 0))
}

//export roxamen_broadcast
func roxamen_broadcast(t, dtype C.int, dest, src unsafe.Pointer, n C.size_t, root C.int) C.int {
	return ret(collective(collBroadcast, 0, false, int32(t), int(dtype), 0, addr(dest), addr(src), int(n), int(root)))
}

//export roxamen_fcollect
func roxamen_fcollect(t, dtype C.int, dest, src unsafe.Pointer, n C.size_t) C.int {
	return ret(collective(collFCollect, 0, false, int32(t), int(dtype), 0, addr(dest), addr(src), int(n), 0))
}

//export roxamen_alltoall
func roxamen_alltoall(t, dtype C.int, dest, src unsafe.Pointer, n C.size_t) C.int {
	return ret(collective(collAllToAll, 0, false, int32(t), int(dtype), 0, addr(dest), addr(src), int(n), 0))
}

//export roxamen_reduce_scatter
func roxamen_reduce_scatter(t, dtype, op C.int, dest, src unsafe.Pointer, n C.size_t) C.int {
	return ret(collective(collReduceScatter, 0, false, int32(t), int(dtype), int(op), addr(dest), addr(src), int(n), 0))
}

//export roxamen_allreduce_on_stream
func roxamen_allreduce_on_stream(st unsafe.Pointer, t, dtype, op C.int, dest, src unsafe.Pointer, n C.size_t) C.int {
	return ret(onStream(st, collAllReduce, t, dtype, op, dest, src, n, 0))
}

//export roxamen_broadcast_on_stream
func roxamen_broadcast_on_stream(st unsafe.Pointer, t, dtype C.int, dest, src unsafe.Pointer, n C.size_t, root C.int) C.int {
	return ret(onStream(st, collBroadcast, t, dtype, 0, dest, src, n, root))
}

//export roxamen_allgather_on_stream
func roxamen_allgather_on_stream(st unsafe.Pointer, t, dtype C.int, dest, src unsafe.Pointer, n C.size_t) C.int {
	return ret(onStream(st, collFCollect, t, dtype, 0, dest, src, n, 0))
}

//export roxamen_alltoall_on_stream
func roxamen_alltoall_on_stream(st unsafe.Pointer, t, dtype C.int, dest, src unsafe.Pointer, n C.size_t) C.int {
	return ret(onStream(st, collAllToAll, t, dtype, 0, dest, src, n, 0))
}

//export roxamen_reduce_scatter_on_stream
func roxamen_reduce_scatter_on_stream(st unsafe.Pointer, t, dtype, op C.int, dest, src unsafe.Pointer, n C.size_t) C.int {
	return ret(onStream(st, collReduceScatter, t, dtype, op, dest, src, n, 0))
}

// onStream enqueues a collective on the program's stream st (or one of roxamen_stream_create's).
func onStream(st unsafe.Pointer, kind int, t, dtype, op C.int, dest, src unsafe.Pointer, n C.size_t, root C.int) error {
	return collective(kind, addr(st), true, int32(t), int(dtype), int(op), addr(dest), addr(src), int(n), int(root))
}

//export roxamen_ep_create
func roxamen_ep_create(hidden, topk, experts, maxTokens, dtype, mode C.int, out *C.int) C.int {
	h, err := epCreate(ep.Config{Hidden: int(hidden), TopK: int(topk), Experts: int(experts),
		MaxTokens: int(maxTokens), DType: ep.DType(dtype), Mode: ep.Mode(mode)})
	if err == nil && out != nil {
		*out = C.int(h)
	}
	return ret(err)
}

//export roxamen_ep_destroy
func roxamen_ep_destroy(b C.int) C.int { return ret(epDestroy(int32(b))) }

//export roxamen_ep_max_rows
func roxamen_ep_max_rows(b C.int) C.int {
	if eb, err := bufOf("", int32(b)); err == nil {
		return C.int(eb.buf.MaxRows())
	}
	return -1
}

//export roxamen_ep_local_experts
func roxamen_ep_local_experts(b C.int) C.int {
	if eb, err := bufOf("", int32(b)); err == nil {
		return C.int(eb.buf.Config().Experts / the.w.NPEs())
	}
	return -1
}

//export roxamen_ep_dispatch
func roxamen_ep_dispatch(b C.int, x unsafe.Pointer, ntokens C.int, topkIdx *C.int64_t, topkWeights *C.float,
	recvX unsafe.Pointer, recvCap C.int, recvRows, recvCounts *C.int, recvWeights *C.float, recvSrc *C.int, handle *C.int) C.int {
	nloc := int(roxamen_ep_local_experts(b))
	out := recvOut{x: recvX, capRows: int(recvCap), counts: local[int32](unsafe.Pointer(recvCounts), max(nloc, 0)),
		weights: local[float32](unsafe.Pointer(recvWeights), int(recvCap)), src: local[int32](unsafe.Pointer(recvSrc), 3*int(recvCap))}
	rows, h, err := epDispatch(int32(b), x, int(ntokens), unsafe.Pointer(topkIdx), unsafe.Pointer(topkWeights), out)
	if err == nil {
		if recvRows != nil {
			*recvRows = C.int(rows)
		}
		if handle != nil {
			*handle = C.int(h)
		}
	}
	return ret(err)
}

//export roxamen_ep_combine
func roxamen_ep_combine(b, handle C.int, y unsafe.Pointer, rows C.int, out unsafe.Pointer) C.int {
	return ret(epCombine(int32(b), int32(handle), y, int(rows), out))
}

//export roxamen_ep_handle_free
func roxamen_ep_handle_free(b, handle C.int) C.int { return ret(epHandleFree(int32(b), int32(handle))) }

//export roxamen_on_gpu
func roxamen_on_gpu() C.int {
	if w, err := world(""); err == nil && w.Device().Driver != "host" {
		return 1
	}
	return 0
}

//export roxamen_ep_dispatch_on_stream
func roxamen_ep_dispatch_on_stream(b C.int, st, x unsafe.Pointer, ntokens C.int, topkIdx, topkWeights unsafe.Pointer,
	recvX, recvRows, recvCounts, recvOffsets, recvWeights, recvSrc *unsafe.Pointer, handle *C.int) C.int {
	recv, h, err := epDispatchOnStream(int32(b), addr(st), addr(x), int(ntokens), addr(topkIdx), addr(topkWeights))
	if err != nil {
		return ret(err)
	}
	for _, o := range []struct {
		dst *unsafe.Pointer
		p   uintptr
	}{{recvX, uintptr(recv.X.Ptr)}, {recvRows, uintptr(recv.Rows)}, {recvCounts, uintptr(recv.Counts)},
		{recvOffsets, uintptr(recv.Offsets)}, {recvWeights, uintptr(recv.Weights)}, {recvSrc, uintptr(recv.Src)}} {
		if o.dst != nil {
			*o.dst = cptr(o.p)
		}
	}
	if handle != nil {
		*handle = C.int(h)
	}
	return 0
}

//export roxamen_ep_combine_on_stream
func roxamen_ep_combine_on_stream(b C.int, st unsafe.Pointer, handle C.int, y unsafe.Pointer, yRows C.int, out *unsafe.Pointer) C.int {
	p, err := epCombineOnStream(int32(b), addr(st), int32(handle), addr(y), int(yRows))
	if err == nil && out != nil {
		*out = cptr(p)
	}
	return ret(err)
}

//export roxamen_link_state
func roxamen_link_state(state unsafe.Pointer, size C.size_t) C.int {
	return ret(linkState(addr(state), int(size)))
}
