// Kernels that only tests launch: shmem's GPU tests (shmem/gpu_test.go, gpu_ctx_test.go) and the
// latency probe. Built by `go generate ./kernels` into kernels/testkernels/obj and embedded by package
// testkernels, which only tests import: they are not in any production binary.
#include "roxamen/roxshmem.h"

// op 0 putmem, 1 getmem, 2 putmem through the copy engine, 3 putmem_signal (SET sigval); group 0
// one thread, 1 a warp, 2 the block. Then quiet.
extern "C" __global__ void roxg_t_rma(uint8_t *dst, const uint8_t *src, uint64_t n, int32_t pe, int32_t group, int32_t op,
				      uint64_t *sig, uint64_t sigval)
{
	if (roxa_block() != 0)
		return;
	switch (op) {
	case 0:
		if (group == 0) roxshmem_putmem(dst, src, n, pe);
		else if (group == 1) roxshmemx_putmem_warp(dst, src, n, pe);
		else roxshmemx_putmem_block(dst, src, n, pe);
		break;
	case 1:
		if (group == 0) roxshmem_getmem(dst, src, n, pe);
		else if (group == 1) roxshmemx_getmem_warp(dst, src, n, pe);
		else roxshmemx_getmem_block(dst, src, n, pe);
		break;
	case 2:
		if (group == 2) roxshmemx_putmem_ce_block(dst, src, n, pe);
		else roxshmemx_putmem_ce(dst, src, n, pe);
		break;
	default:
		if (group == 0) roxshmem_putmem_signal(dst, src, n, sig, sigval, ROXSHMEM_SIGNAL_SET, pe);
		else if (group == 1) roxshmemx_putmem_signal_warp(dst, src, n, sig, sigval, ROXSHMEM_SIGNAL_SET, pe);
		else roxshmemx_putmem_signal_block(dst, src, n, sig, sigval, ROXSHMEM_SIGNAL_SET, pe);
		break;
	}
	roxa_sync_block();
	if (roxa_tid() == 0)
		roxshmem_quiet();
}

// Device contexts (gpu_ctx_test.go): creates every context of the pool (out[0]: how many; out[1]:
// the code of one create more), puts n bytes to pe on the first two (dst from src, dst+n from
// src+n), then on pe's words: AMOs on the first context (fetch_add 5, add 2, inc, quiet, then
// compare_swap 108 -> 200 on words[0]), p/g on the second (long -77 to words[1]), a put-with-signal
// on each (64 bytes of src to dst+2n with SET 9 on words[2] on the second, quiet, then ADD 1 on
// the first); quiets each, writes the fetched values to this PE's words[4..6] (fetch_add's,
// compare_swap's, g's), destroys them all, and creates once more (out[2]: its code).
extern "C" __global__ void roxg_t_ctx(uint8_t *dst, const uint8_t *src, uint64_t n, int32_t pe, int32_t *out, uint64_t *words)
{
	if (roxa_block() != 0 || roxa_tid() != 0)
		return;
	roxshmem_ctx_t c[ROXSHMEM_MAX_CTXS];
	int k = 0;
	while (k < ROXSHMEM_MAX_CTXS && roxshmem_ctx_create(ROXSHMEM_CTX_PRIVATE, &c[k]) == 0)
		k++;
	roxshmem_ctx_t extra;
	out[0] = k;
	out[1] = roxshmem_ctx_create(0, &extra);
	if (k >= 2) {
		roxshmem_ctx_putmem_nbi(c[0], dst, src, n, pe);
		roxshmem_ctx_putmem_nbi(c[1], dst + n, src + n, n, pe);
		uint64_t f = roxshmem_ctx_uint64_atomic_fetch_add(c[0], &words[0], 5, pe);
		roxshmem_ctx_uint64_atomic_add(c[0], &words[0], 2, pe);
		roxshmem_ctx_uint64_atomic_inc(c[0], &words[0], pe);
		roxshmem_ctx_quiet(c[0]);
		uint64_t cs = roxshmem_ctx_uint64_atomic_compare_swap(c[0], &words[0], 108, 200, pe);
		roxshmem_ctx_long_p(c[1], (long *)&words[1], -77, pe);
		roxshmem_ctx_quiet(c[1]);
		long g = roxshmem_ctx_long_g(c[1], (const long *)&words[1], pe);
		roxshmem_ctx_putmem_signal_nbi(c[1], dst + 2 * n, src, 64, &words[2], 9, ROXSHMEM_SIGNAL_SET, pe);
		roxshmem_ctx_quiet(c[1]);
		roxshmem_ctx_putmem_signal(c[0], dst + 2 * n, src, 64, &words[2], 1, ROXSHMEM_SIGNAL_ADD, pe);
		roxshmem_ctx_quiet(c[1]);
		roxshmem_ctx_quiet(c[0]);
		words[4] = f;
		words[5] = cs;
		words[6] = (uint64_t)g;
	}
	for (int i = 0; i < k; i++)
		roxshmem_ctx_destroy(c[i]);
	out[2] = roxshmem_ctx_create(0, &extra);
	if (out[2] == 0)
		roxshmem_ctx_destroy(extra);
}

// Contention: every thread adds 1 to ctr64 and ctr32 on pe iters times, and increments cas64 with a
// compare-and-swap loop cas_iters times.
extern "C" __global__ void roxg_t_amo(uint64_t *ctr64, uint32_t *ctr32, uint64_t *cas64, int32_t pe, uint32_t iters,
				      uint32_t cas_iters)
{
	for (uint32_t i = 0; i < iters; i++) {
		roxshmem_uint64_atomic_add(ctr64, 1, pe);
		roxshmem_uint32_atomic_fetch_add(ctr32, 1, pe);
	}
	for (uint32_t i = 0; i < cas_iters; i++) {
		uint64_t old = roxshmem_uint64_atomic_fetch(cas64, pe);
		for (;;) {
			uint64_t got = roxshmem_uint64_atomic_compare_swap(cas64, old, old + 1, pe);
			if (got == old)
				break;
			old = got;
		}
	}
	roxshmem_quiet();
}

// Ordering when the copy engine and load/store mix: a copy-engine put of big, then fence (or
// quiet), then a load/store put-with-signal of small with signal round.
extern "C" __global__ void roxg_t_mix(uint8_t *big, const uint8_t *bigsrc, uint64_t bign, uint8_t *small,
				      const uint8_t *smallsrc, uint64_t smalln, uint64_t *sig, uint64_t round, int32_t pe,
				      int32_t use_fence)
{
	if (roxa_tid() != 0 || roxa_block() != 0)
		return;
	roxshmemx_putmem_ce_nbi(big, bigsrc, bign, pe);
	if (use_fence)
		roxshmem_fence();
	else
		roxshmem_quiet();
	roxshmem_putmem_signal_nbi(small, smallsrc, smalln, sig, round, ROXSHMEM_SIGNAL_SET, pe);
	roxshmem_quiet();
}

// Faults: a store to an address no allocation holds.
extern "C" __global__ void roxg_t_fault(uint64_t addr)
{
	*(volatile uint64_t *)(uintptr_t)addr = 1;
}

// Waits on this PE's word until it is at least value (a peer that never comes makes it wait
// until the abort word is set).
extern "C" __global__ void roxg_t_wait(uint64_t *word, uint64_t value)
{
	if (roxa_tid() == 0 && roxa_block() == 0)
		roxshmem_uint64_wait_until(word, ROXSHMEM_CMP_GE, value);
}

// Latency probe (logged by the GPU tests): one-way 8-byte ping-pong. Variant 0: relaxed system-scope
// store to the peer and polling load, nothing else; 1: the same with fence.acq_rel.sys (the strict
// wait's acquire) after each wait; 2: roxshmem_uint64_p and roxshmem_uint64_wait_until.
extern "C" __global__ void roxg_b_pingpong(uint64_t *flag, uint64_t iters, int32_t peer, int32_t initiator,
					   int32_t variant, uint64_t *out)
{
	if (roxa_tid() != 0 || roxa_block() != 0)
		return;
	uint64_t *remote = (uint64_t *)roxshmem_ptr(flag, peer);
	uint64_t t0 = roxa_clock_ns();
	for (uint64_t i = 1; i <= iters; i++) {
		if (variant == 2) {
			if (initiator)
				roxshmem_uint64_p(flag, i, peer);
			roxshmem_uint64_wait_until(flag, ROXSHMEM_CMP_GE, i);
			if (!initiator)
				roxshmem_uint64_p(flag, i, peer);
			continue;
		}
		if (initiator)
			roxa_st_relaxed_u64(remote, i);
		for (uint32_t spins = 1; roxa_ld_relaxed_u64(flag) < i; spins++)
			if ((spins & 1023) == 0 && roxshmemx_aborted())
				return;
		if (variant == 1)
			roxa_fence_acquire();
		if (!initiator)
			roxa_st_relaxed_u64(remote, i);
	}
	out[0] = roxa_clock_ns() - t0;
}
