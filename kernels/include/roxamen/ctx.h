/* Device contexts (OpenSHMEM 1.5 shmem_ctx_*): roxshmem_ctx_t names a ring of its own (the context
 * table, state.h), so that a quiet on one context waits for that context's ring traffic only, not
 * for what other warps issue on other contexts. ROXSHMEM_CTX_DEFAULT is the state's ring: every
 * ctx call on it is the plain call. Load/store (peer-mapped) puts on a context are the plain
 * stores, and a context's fence and quiet are then this thread's memory fences, as for the
 * default context: they never wait for another context's ring. Puts that the default context
 * would send to an AMD SDMA queue take the context's ring (the proxy's copy-engine route), since
 * the SDMA queues are shared by all contexts. Included by roxshmem.h. */
#ifndef ROXAMEN_CTX_H
#define ROXAMEN_CTX_H

typedef int32_t roxshmem_ctx_t;

ROXA_FN roxshmem_ctx_table_t *roxi_ctx_table(void)
{
	return (roxshmem_ctx_table_t *)(uintptr_t)roxshmem_state.ctxs;
}

/* The slot of a live non-default context, else 0 (recorded as ROXSHMEM_CALL_BAD_CTX, pe: -1). */
ROXI_FN roxshmem_ctx_desc_t *roxi_ctx(roxshmem_ctx_t ctx)
{
	roxshmem_ctx_table_t *tb = roxi_ctx_table();
	if (tb != 0 && ctx >= 1 && (uint32_t)ctx <= tb->n_ctxs && (uint32_t)ctx <= ROXSHMEM_MAX_CTXS) {
		roxshmem_ctx_desc_t *c = &tb->ctx[ctx - 1];
		if (roxa_ld_relaxed_u32(&c->in_use) == 1)
			return c;
	}
	roxi_record(ROXSHMEM_CALL_BAD_CTX, -1, (uint32_t)ctx);
	return 0;
}

ROXA_FN roxshmem_ring_header_t *roxi_ctx_ring(roxshmem_ctx_desc_t *c) { return (roxshmem_ring_header_t *)(uintptr_t)c->ring; }
ROXA_FN uint64_t *roxi_ctx_head(roxshmem_ctx_desc_t *c)
{
	return c->head != 0 ? (uint64_t *)(uintptr_t)c->head : &roxi_ctx_ring(c)->head;
}
ROXA_FN const uint64_t *roxi_ctx_completion(roxshmem_ctx_desc_t *c)
{
	return c->completion != 0 ? (const uint64_t *)(uintptr_t)c->completion : &roxi_ctx_ring(c)->completed;
}

ROXI_COLD uint64_t roxi_ctx_push(roxshmem_ctx_desc_t *c, uint32_t op, uint32_t pe, uint64_t size, uint64_t src, uint64_t dst)
{
	return roxi_ring_push_on(roxi_ctx_ring(c), roxi_ctx_head(c), &c->tail_cache, (uint64_t *)(uintptr_t)c->results,
				 c->capacity, op, pe, size, src, dst, 0, 0, 0);
}

ROXI_COLD int roxi_ctx_wait(roxshmem_ctx_desc_t *c, uint64_t target, uint32_t call, int pe, int sys_acquire)
{
	return roxi_ring_wait_on(roxi_ctx_completion(c), &roxi_ctx_ring(c)->error, target, call, pe, sys_acquire);
}

/* Wait for every ticket reserved so far on c's ring (by any thread of this PE). */
ROXI_FN int roxi_ctx_ring_quiet(roxshmem_ctx_desc_t *c, uint32_t call)
{
	if (!ROXSHMEM_RING)
		return 1;
	uint64_t h = roxa_ld_relaxed_u64(roxi_ctx_head(c));
	if (roxa_ld_relaxed_u64(roxi_ctx_completion(c)) >= h)
		return 1;
	return roxi_ctx_wait(c, h, call, -1, 0);
}

/* Claims a free context: 0 and *ctx set, or nonzero (every slot in use, or the runtime made no
 * context rings) and *ctx = ROXSHMEM_CTX_INVALID. One thread calls it; a group shares the handle
 * (through shared memory) as it would any value. */
ROXA_API int roxshmem_ctx_create(long options, roxshmem_ctx_t *ctx)
{
	(void)options;
	roxshmem_ctx_table_t *tb = roxi_ctx_table();
	*ctx = ROXSHMEM_CTX_INVALID;
	if (tb == 0)
		return 1;
	uint32_t n = tb->n_ctxs < ROXSHMEM_MAX_CTXS ? tb->n_ctxs : ROXSHMEM_MAX_CTXS;
	for (uint32_t i = 0; i < n; i++) {
		roxshmem_ctx_desc_t *c = &tb->ctx[i];
		if (roxa_ld_relaxed_u32(&c->in_use) != 0)
			continue;
		if (roxa_amo_u32(ROXSHMEM_AMO_COMPARE_SWAP, &c->in_use, 1, 0) == 0) {
			roxa_fence_acquire();
			*ctx = (roxshmem_ctx_t)(i + 1);
			return 0;
		}
	}
	return 1;
}

ROXA_API void roxshmem_ctx_quiet(roxshmem_ctx_t ctx);

/* Completes the context's operations and frees it; the default context is never destroyed (a
 * no-op). A handle that names no live context is recorded (ROXSHMEM_CALL_BAD_CTX). */
ROXA_API void roxshmem_ctx_destroy(roxshmem_ctx_t ctx)
{
	if (ctx == ROXSHMEM_CTX_DEFAULT)
		return;
	roxshmem_ctx_desc_t *c = roxi_ctx(ctx);
	if (c == 0)
		return;
	roxshmem_ctx_quiet(ctx);
	roxa_fence_release();
	roxa_st_relaxed_u32(&c->in_use, 0);
}

ROXI_COLD void roxi_ctx_putmem(roxshmem_ctx_t ctx, void *dest, const void *src, uint64_t n, int pe, int g, int nbi)
{
	if (ctx == ROXSHMEM_CTX_DEFAULT) {
		roxi_putmem(dest, src, n, pe, g, nbi, 0);
		return;
	}
	roxshmem_ctx_desc_t *c = roxi_ctx(ctx);
	uint64_t off;
	if (c == 0 || !roxi_check(dest, n, pe, &off))
		return;
	int path = roxi_path(pe, n, 0);
	if (path == ROXI_PATH_SELF || path == ROXI_PATH_LS) {
		roxa_copy(roxi_remote(off, pe), src, n, roxi_gidx(g), roxi_gsize(g), ROXA_MEM_PLAIN, roxi_store_mode());
	} else if (!ROXSHMEM_RING) {
		if (roxi_gidx(g) == 0)
			roxi_record(ROXSHMEM_CALL_NO_ROUTE, pe, 0);
	} else {
		roxi_gsync(g); /* every thread's writes of src precede the descriptor */
		if (roxi_gidx(g) == 0) {
			uint64_t t = roxi_ctx_push(c, ROXSHMEM_OP_PUT, (uint32_t)pe, n, (uint64_t)(uintptr_t)src, off);
			if (!nbi && t != ROXSHMEM_RING_NO_TICKET)
				roxi_ctx_wait(c, t + 1, ROXSHMEM_CALL_RING, pe, 1);
		}
	}
	if (!nbi)
		roxi_gsync(g);
}

ROXI_COLD void roxi_ctx_getmem(roxshmem_ctx_t ctx, void *dest, const void *src, uint64_t n, int pe, int g, int nbi)
{
	if (ctx == ROXSHMEM_CTX_DEFAULT) {
		roxi_getmem(dest, src, n, pe, g, nbi);
		return;
	}
	roxshmem_ctx_desc_t *c = roxi_ctx(ctx);
	uint64_t off;
	if (c == 0 || !roxi_check(src, n, pe, &off))
		return;
	int path = roxi_path(pe, n, 0);
	if (path == ROXI_PATH_SELF || path == ROXI_PATH_LS) {
		roxa_copy(dest, roxi_remote(off, pe), n, roxi_gidx(g), roxi_gsize(g),
			  path == ROXI_PATH_SELF ? ROXA_MEM_PLAIN : ROXA_MEM_BYPASS, ROXA_MEM_PLAIN);
	} else if (!ROXSHMEM_RING) {
		if (roxi_gidx(g) == 0)
			roxi_record(ROXSHMEM_CALL_NO_ROUTE, pe, 0);
	} else if (roxi_gidx(g) == 0) {
		uint64_t t = roxi_ctx_push(c, ROXSHMEM_OP_GET, (uint32_t)pe, n, (uint64_t)(uintptr_t)dest, off);
		if (!nbi && t != ROXSHMEM_RING_NO_TICKET)
			roxi_ctx_wait(c, t + 1, ROXSHMEM_CALL_RING, pe, 1);
	}
	if (!nbi) {
		if (!roxi_bypass())
			roxa_fence_acquire();
		roxi_gsync(g);
	}
}

ROXA_API void roxshmem_ctx_putmem(roxshmem_ctx_t ctx, void *dest, const void *source, size_t nelems, int pe) { roxi_ctx_putmem(ctx, dest, source, nelems, pe, ROXI_THREAD, 0); }
ROXA_API void roxshmem_ctx_putmem_nbi(roxshmem_ctx_t ctx, void *dest, const void *source, size_t nelems, int pe) { roxi_ctx_putmem(ctx, dest, source, nelems, pe, ROXI_THREAD, 1); }
ROXA_API void roxshmem_ctx_getmem(roxshmem_ctx_t ctx, void *dest, const void *source, size_t nelems, int pe) { roxi_ctx_getmem(ctx, dest, source, nelems, pe, ROXI_THREAD, 0); }
ROXA_API void roxshmem_ctx_getmem_nbi(roxshmem_ctx_t ctx, void *dest, const void *source, size_t nelems, int pe) { roxi_ctx_getmem(ctx, dest, source, nelems, pe, ROXI_THREAD, 1); }
ROXA_API void roxshmemx_ctx_putmem_warp(roxshmem_ctx_t ctx, void *dest, const void *source, size_t nelems, int pe) { roxi_ctx_putmem(ctx, dest, source, nelems, pe, ROXI_WARP, 0); }
ROXA_API void roxshmemx_ctx_putmem_nbi_warp(roxshmem_ctx_t ctx, void *dest, const void *source, size_t nelems, int pe) { roxi_ctx_putmem(ctx, dest, source, nelems, pe, ROXI_WARP, 1); }
ROXA_API void roxshmemx_ctx_putmem_block(roxshmem_ctx_t ctx, void *dest, const void *source, size_t nelems, int pe) { roxi_ctx_putmem(ctx, dest, source, nelems, pe, ROXI_BLOCK, 0); }
ROXA_API void roxshmemx_ctx_putmem_nbi_block(roxshmem_ctx_t ctx, void *dest, const void *source, size_t nelems, int pe) { roxi_ctx_putmem(ctx, dest, source, nelems, pe, ROXI_BLOCK, 1); }
ROXA_API void roxshmemx_ctx_getmem_warp(roxshmem_ctx_t ctx, void *dest, const void *source, size_t nelems, int pe) { roxi_ctx_getmem(ctx, dest, source, nelems, pe, ROXI_WARP, 0); }
ROXA_API void roxshmemx_ctx_getmem_block(roxshmem_ctx_t ctx, void *dest, const void *source, size_t nelems, int pe) { roxi_ctx_getmem(ctx, dest, source, nelems, pe, ROXI_BLOCK, 0); }

/* fence on a context: its operations to each PE issued before it are delivered before those
 * issued after it on the same context. */
ROXA_API void roxshmem_ctx_fence(roxshmem_ctx_t ctx)
{
	if (ctx == ROXSHMEM_CTX_DEFAULT) {
		roxshmem_fence();
		return;
	}
	if (roxi_bypass())
		roxa_drain();
	else
		roxa_fence_sc();
	roxshmem_ctx_desc_t *c = roxi_ctx(ctx);
	if (c == 0 || !ROXSHMEM_RING)
		return;
	if (roxshmem_state.flags & ROXSHMEM_FLAG_RING_FENCE) {
		if (roxa_ld_relaxed_u64(roxi_ctx_completion(c)) < roxa_ld_relaxed_u64(roxi_ctx_head(c)))
			roxi_ctx_push(c, ROXSHMEM_OP_FENCE, ROXSHMEM_DESC_ALL_PES, 0, 0, 0);
	} else {
		roxi_ctx_ring_quiet(c, ROXSHMEM_CALL_FENCE);
	}
}

/* quiet on a context: every operation issued on it before is complete; other contexts' ring
 * operations are not waited for. */
ROXA_API void roxshmem_ctx_quiet(roxshmem_ctx_t ctx)
{
	if (ctx == ROXSHMEM_CTX_DEFAULT) {
		roxshmem_quiet();
		return;
	}
	if (roxi_bypass()) {
		roxa_drain();
		roxa_fence_release();
	} else {
		roxa_fence_sc();
	}
	roxshmem_ctx_desc_t *c = roxi_ctx(ctx);
	if (c != 0)
		roxi_ctx_ring_quiet(c, ROXSHMEM_CALL_QUIET);
}

/* quiet by a warp or block (every thread calls it; the leader waits): the group's context
 * operations are complete when it returns. */
ROXA_API void roxshmemx_ctx_quiet_warp(roxshmem_ctx_t ctx)
{
	roxi_gsync(ROXI_WARP);
	if (roxi_gidx(ROXI_WARP) == 0)
		roxshmem_ctx_quiet(ctx);
	roxi_gsync(ROXI_WARP);
}
ROXA_API void roxshmemx_ctx_quiet_block(roxshmem_ctx_t ctx)
{
	roxi_gsync(ROXI_BLOCK);
	if (roxi_gidx(ROXI_BLOCK) == 0)
		roxshmem_ctx_quiet(ctx);
	roxi_gsync(ROXI_BLOCK);
}

#endif /* ROXAMEN_CTX_H */
