// Probe kernels for TestMapping: one API call each, compiled per target and per ordering mode
// (-DROXSHMEM_ORDERING=1|2), with the ring compiled out (-DROXSHMEM_RING=0) so that each probe
// holds only the load/store path, and once with the ring for the producer probes.
#include "roxamen/roxshmem.h"

#define PROBE extern "C" __global__

PROBE void probe_fence(void) { roxshmem_fence(); }
PROBE void probe_quiet(void) { roxshmem_quiet(); }
PROBE void probe_wait_until(uint64_t *ivar) { roxshmem_uint64_wait_until(ivar, ROXSHMEM_CMP_GE, 1); }
PROBE void probe_signal_wait_until(uint64_t *sig, uint64_t *out) { out[0] = roxshmem_signal_wait_until(sig, ROXSHMEM_CMP_EQ, 3); }
PROBE void probe_p(long *dest, int pe) { roxshmem_long_p(dest, 42, pe); }
PROBE void probe_g(long *src, long *out, int pe) { out[0] = roxshmem_long_g(src, pe); }
// 16-byte aligned bulk put to a peer: the vectorized load/store path
PROBE void probe_putmem(roxa_u128 *dest, const roxa_u128 *src, size_t n, int pe) { roxshmem_putmem(dest, src, n * 16, pe); }
PROBE void probe_putmem_block(roxa_u128 *dest, const roxa_u128 *src, size_t n, int pe) { roxshmemx_putmem_block(dest, src, n * 16, pe); }
PROBE void probe_getmem(roxa_u128 *dest, const roxa_u128 *src, size_t n, int pe) { roxshmem_getmem(dest, src, n * 16, pe); }
PROBE void probe_fetch_add(uint64_t *dest, uint64_t *out, int pe) { out[0] = roxshmem_uint64_atomic_fetch_add(dest, 5, pe); }
PROBE void probe_add32(int *dest, int pe) { roxshmem_int_atomic_add(dest, 5, pe); }
PROBE void probe_compare_swap(uint64_t *dest, uint64_t *out, int pe) { out[0] = roxshmem_uint64_atomic_compare_swap(dest, 1, 2, pe); }
PROBE void probe_swap32(uint32_t *dest, uint32_t *out, int pe) { out[0] = roxshmem_uint32_atomic_swap(dest, 7, pe); }
PROBE void probe_fetch_xor(uint64_t *dest, uint64_t *out, int pe) { out[0] = roxshmem_uint64_atomic_fetch_xor(dest, 7, pe); }
PROBE void probe_putmem_signal_set(roxa_u128 *dest, const roxa_u128 *src, size_t n, uint64_t *sig, int pe)
{
	roxshmem_putmem_signal(dest, src, n * 16, sig, 1, ROXSHMEM_SIGNAL_SET, pe);
}
PROBE void probe_putmem_signal_add(roxa_u128 *dest, const roxa_u128 *src, size_t n, uint64_t *sig, int pe)
{
	roxshmem_putmem_signal(dest, src, n * 16, sig, 1, ROXSHMEM_SIGNAL_ADD, pe);
}
PROBE void probe_barrier_all_block(void) { roxshmemx_barrier_all_block(); }
// device contexts: a context's fence and quiet are the default ones' memory fences (TestMappingCtx)
PROBE void probe_ctx_fence(int ctx) { roxshmem_ctx_fence(ctx); }
PROBE void probe_ctx_quiet(int ctx) { roxshmem_ctx_quiet(ctx); }
PROBE void probe_ctx_create(int *out) { roxshmem_ctx_t c; out[0] = roxshmem_ctx_create(0, &c); out[1] = c; }
PROBE void probe_ctx_destroy(int ctx) { roxshmem_ctx_destroy(ctx); }
// the context forms of the point-to-point calls: with the ring compiled out, the default probes'
// rules hold for them (TestMappingCtx); with the ring, they hold the context ring's producer
PROBE void probe_ctx_p(int ctx, long *dest, int pe) { roxshmem_ctx_long_p(ctx, dest, 42, pe); }
PROBE void probe_ctx_g(int ctx, long *src, long *out, int pe) { out[0] = roxshmem_ctx_long_g(ctx, src, pe); }
PROBE void probe_ctx_putmem(int ctx, roxa_u128 *dest, const roxa_u128 *src, size_t n, int pe) { roxshmem_ctx_putmem(ctx, dest, src, n * 16, pe); }
PROBE void probe_ctx_getmem(int ctx, roxa_u128 *dest, const roxa_u128 *src, size_t n, int pe) { roxshmem_ctx_getmem(ctx, dest, src, n * 16, pe); }
PROBE void probe_ctx_fetch_add(int ctx, uint64_t *dest, uint64_t *out, int pe) { out[0] = roxshmem_ctx_uint64_atomic_fetch_add(ctx, dest, 5, pe); }
PROBE void probe_ctx_add32(int ctx, int *dest, int pe) { roxshmem_ctx_int_atomic_add(ctx, dest, 5, pe); }
PROBE void probe_ctx_compare_swap(int ctx, uint64_t *dest, uint64_t *out, int pe) { out[0] = roxshmem_ctx_uint64_atomic_compare_swap(ctx, dest, 1, 2, pe); }
PROBE void probe_ctx_swap32(int ctx, uint32_t *dest, uint32_t *out, int pe) { out[0] = roxshmem_ctx_uint32_atomic_swap(ctx, dest, 7, pe); }
PROBE void probe_ctx_fetch_xor(int ctx, uint64_t *dest, uint64_t *out, int pe) { out[0] = roxshmem_ctx_uint64_atomic_fetch_xor(ctx, dest, 7, pe); }
PROBE void probe_ctx_putmem_signal_set(int ctx, roxa_u128 *dest, const roxa_u128 *src, size_t n, uint64_t *sig, int pe)
{
	roxshmem_ctx_putmem_signal(ctx, dest, src, n * 16, sig, 1, ROXSHMEM_SIGNAL_SET, pe);
}
PROBE void probe_ctx_putmem_signal_add(int ctx, roxa_u128 *dest, const roxa_u128 *src, size_t n, uint64_t *sig, int pe)
{
	roxshmem_ctx_putmem_signal(ctx, dest, src, n * 16, sig, 1, ROXSHMEM_SIGNAL_ADD, pe);
}

#if ROXSHMEM_RING
// The producer: a ticket by atomic fetch_add at system scope, the descriptor, then seq with release.
PROBE void probe_ring_push(uint64_t src, uint64_t dst, int pe)
{
	roxshmemx_ring_push(ROXSHMEM_OP_PUT, (uint32_t)pe, 64, src, dst, 0, 0, 0);
}
PROBE void probe_ring_quiet(void) { roxi_ring_quiet(ROXSHMEM_CALL_QUIET); }
// a context's producer and its wait on its own ring
PROBE void probe_ctx_push(int ctx, uint64_t src, uint64_t dst, int pe)
{
	roxshmem_ctx_desc_t *c = roxi_ctx(ctx);
	if (c != 0)
		roxi_ctx_push(c, ROXSHMEM_OP_PUT, (uint32_t)pe, 64, src, dst, 0, 0, 0);
}
PROBE void probe_ctx_ring_quiet(int ctx)
{
	roxshmem_ctx_desc_t *c = roxi_ctx(ctx);
	if (c != 0)
		roxi_ctx_ring_quiet(c, ROXSHMEM_CALL_QUIET);
}
#endif

#if ROXSHMEM_SDMA && defined(ROXA_AMDGCN)
// The SDMA route's producer alone (TestMappingSDMA): reserve by CAS, packets, a release at system
// scope, the write pointer, a wait, the doorbell; no data copy loop.
PROBE void probe_sdma_put(void *dst, const void *src, uint64_t n, uint64_t *sig, int pe)
{
	roxi_sdma_putmem(dst, src, n, (uint64_t)(uintptr_t)sig, 1, ROXSHMEM_SIGNAL_SET, pe, ROXI_THREAD, 1);
}
PROBE void probe_sdma_quiet(void) { roxi_sdma_quiet(ROXSHMEM_CALL_QUIET); }
#endif
