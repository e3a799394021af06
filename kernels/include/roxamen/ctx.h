/* Device contexts (OpenSHMEM 1.5 shmem_ctx_*): roxshmem_ctx_t names a ring of its own (the context
 * table, state.h), so that a quiet on one context waits for that context's ring traffic only, not
 * for what other warps issue on other contexts. ROXSHMEM_CTX_DEFAULT is the state's ring: every
 * ctx call on it is the plain call. Load/store (peer-mapped) puts on a context are the plain
 * stores, and a context's fence and quiet are then this thread's memory fences, as for the
 * default context: they never wait for another context's ring. Puts that the default context
 * would send to an AMD SDMA queue take the context's ring (the proxy's copy-engine route), since
 * the SDMA queues are shared by all contexts. The context table's lookup and the rings' producer
 * and waits are in ring.h; the context forms of the point-to-point calls (roxshmem_ctx_putmem,
 * _getmem, _TYPE_p/_g, _TYPE_put/_get, _putmem_signal, _TYPE_atomic_*, their warp and block forms)
 * are made in roxshmem.h from the same definitions as the default context's, which pass that
 * context's ring; this file holds create, destroy, fence and quiet. Included by roxshmem.h. */
#ifndef ROXAMEN_CTX_H
#define ROXAMEN_CTX_H

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

/* fence on a context: its operations to each PE issued before it are delivered before those
 * issued after it on the same context. */
ROXA_API void roxshmem_ctx_fence(roxshmem_ctx_t ctx)
{
	if (ctx == ROXSHMEM_CTX_DEFAULT) {
		roxshmem_fence();
		return;
	}
	roxi_fence_mem();
	roxshmem_ctx_desc_t *c = roxi_ctx(ctx);
	if (c != 0)
		roxi_fence_ring(c);
}

/* quiet on a context: every operation issued on it before is complete; other contexts' ring
 * operations are not waited for. */
ROXA_API void roxshmem_ctx_quiet(roxshmem_ctx_t ctx)
{
	if (ctx == ROXSHMEM_CTX_DEFAULT) {
		roxshmem_quiet();
		return;
	}
	roxi_quiet_mem();
	roxshmem_ctx_desc_t *c = roxi_ctx(ctx);
	if (c != 0)
		roxi_q_quiet(c, ROXSHMEM_CALL_QUIET);
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
