/* Roxamen device library: OpenSHMEM-style calls for GPU kernels (HIP dialect, header-only).
 * Compiles with hipcc, nvcc and clang (-x hip for amdgcn, -x cuda for nvptx, with or without the
 * vendor headers). Include it in one translation unit per code object: it defines the global
 * roxshmem_state that the runtime fills when it loads the module.
 *
 * Ordering mode: ROXSHMEM_ORDERING=1 (Strict) or 2 (CacheBypass) at compile time fixes the mode;
 * the default (0) reads ROXSHMEM_FLAG_BYPASS from roxshmem_state at run time. MAPPING.md lists the
 * instructions each call uses in each mode and the memory-model rule each one implements. */
#ifndef ROXAMEN_ROXSHMEM_H
#define ROXAMEN_ROXSHMEM_H

#include "types.h"
#include "ops.h"
#include "state.h"
#include "ring.h"
#include "arch.h"
#include "sdma.h"

/* comparison operators of wait_until, test and signal_wait_until */
#define ROXSHMEM_CMP_EQ 0
#define ROXSHMEM_CMP_NE 1
#define ROXSHMEM_CMP_GT 2
#define ROXSHMEM_CMP_LE 3
#define ROXSHMEM_CMP_LT 4
#define ROXSHMEM_CMP_GE 5

#ifdef ROXA_GPU_LANG

/* ---- internals ----------------------------------------------------------------------------- */
#define ROXI_PATH_SELF 0
#define ROXI_PATH_LS 1   /* load/store to a mapped peer */
#define ROXI_PATH_CE 2   /* copy engine, through the ring */
#define ROXI_PATH_NIC 3  /* NIC, through the ring */
#define ROXI_PATH_SDMA 4 /* AMD copy engine, through an SDMA queue this GPU writes itself */

#define ROXI_THREAD 0
#define ROXI_WARP 1
#define ROXI_BLOCK 2
#define ROXI_GRID 3 /* every block of the launch (the stream collectives); its barrier needs the team: roxi_tsync */

ROXA_FN int roxi_store_mode(void) { return roxi_bypass() ? ROXA_MEM_BYPASS : ROXA_MEM_PLAIN; }

ROXA_FN uint32_t roxi_gidx(int g)
{
	return g == ROXI_GRID ? roxa_block() * roxa_nthreads() + roxa_tid() : g == ROXI_BLOCK ? roxa_tid() : g == ROXI_WARP ? roxa_lane() : 0;
}
ROXA_FN uint32_t roxi_gsize(int g)
{
	return g == ROXI_GRID ? roxa_nblocks() * roxa_nthreads() : g == ROXI_BLOCK ? roxa_nthreads() : g == ROXI_WARP ? roxa_warpsize() : 1;
}
/* the group barrier; for ROXI_GRID only the block's part (roxi_tsync adds the blocks' meeting) */
ROXA_FN void roxi_gsync(int g)
{
	if (g == ROXI_BLOCK || g == ROXI_GRID)
		roxa_sync_block();
	else if (g == ROXI_WARP)
		roxa_sync_warp();
}

/* Stores this thread issued are complete before the group synchronizes, so that the leader's
 * release covers them (amdgcn; on nvptx bar.sync and the release's cumulativity do it). */
ROXA_FN void roxi_thread_drain(void)
{
#if defined(ROXA_AMDGCN)
	roxa_drain();
#endif
}

/* Validates pe and [addr, addr+n) against the symmetric heap; records and returns 0 when bad. */
ROXI_FN int roxi_check(const void *addr, uint64_t n, int pe, uint64_t *off)
{
	if ((unsigned)pe >= (unsigned)roxshmem_state.n_pes) {
		roxi_record(ROXSHMEM_CALL_BAD_PE, pe, (uint32_t)pe);
		return 0;
	}
	uint64_t a = (uint64_t)(uintptr_t)addr, base = roxshmem_state.heap_base, size = roxshmem_state.heap_size;
	if (a < base || a - base > size || n > size - (a - base)) {
		roxi_record(ROXSHMEM_CALL_BAD_ADDR, pe, (uint32_t)a);
		return 0;
	}
	*off = a - base;
	return 1;
}

ROXI_FN int roxi_path(int pe, uint64_t n, int force_ce)
{
	int self = pe == roxshmem_state.my_pe;
	if (!self && roxshmem_state.peer_base[pe] == 0)
		return ROXI_PATH_NIC;
#ifdef ROXI_HAVE_SDMA
	/* on AMD the device-written SDMA queues replace the proxy's copy-engine route */
	if (!self && roxi_sdma_queue(pe) != 0 && (force_ce || (roxi_sdma()->threshold != 0 && n >= roxi_sdma()->threshold)))
		return ROXI_PATH_SDMA;
#endif
	if (roxi_ring_enabled() &&
	    (force_ce || (roxshmem_state.ce_threshold != 0 && n >= roxshmem_state.ce_threshold)))
		return ROXI_PATH_CE;
	return self ? ROXI_PATH_SELF : ROXI_PATH_LS;
}

ROXA_FN void *roxi_remote(uint64_t off, int pe)
{
	if (pe == roxshmem_state.my_pe)
		return (void *)(uintptr_t)(roxshmem_state.heap_base + off);
	return (void *)(uintptr_t)(roxshmem_state.peer_base[pe] + off);
}

ROXA_FN void *roxi_local(uint64_t off) { return (void *)(uintptr_t)(roxshmem_state.heap_base + off); }

/* The ring of context c (0: the default context) is needed but absent: record instead of hanging. */
ROXI_FN int roxi_q_have(roxshmem_ctx_desc_t *c, int pe)
{
	if (roxi_q_enabled(c))
		return 1;
	roxi_record(ROXSHMEM_CALL_NO_ROUTE, pe, 0);
	return 0;
}

ROXA_FN int roxi_have_ring(int pe) { return roxi_q_have(0, pe); }

#ifdef ROXI_HAVE_SDMA
/* A put (sig != 0: with its signal) through pe's SDMA queue, issued by the group's leader once
 * every thread's writes of src are complete; blocking forms wait for the queue's done word. */
ROXI_COLD void roxi_sdma_putmem(void *dst, const void *src, uint64_t n, uint64_t sig, uint64_t signal, int sig_op, int pe,
				int g, int nbi)
{
	roxi_thread_drain();
	roxi_gsync(g);
	if (roxi_gidx(g) == 0) {
		roxshmem_sdma_queue_t *q = roxi_sdma_queue(pe);
		uint64_t end = roxi_sdma_put(q, (uint64_t)(uintptr_t)dst, (uint64_t)(uintptr_t)src, n, sig, signal, sig_op, pe);
		if (!nbi && end != ROXI_SDMA_NO_SPACE)
			roxi_sdma_wait(q, end, ROXSHMEM_CALL_SDMA, pe);
	}
	if (!nbi)
		roxi_gsync(g);
}
#endif

/* The route of a put of n bytes by group g. A block's put to a mapped peer takes the copy engine
 * only at ce_threshold times the grid's blocks: the proxy serves the ring's copies one after
 * another (about 12 us each on an H200 under MPS), so the blocks of a grid that all hand it their
 * chunks share one copy engine, while on the SMs each block moves its own (about 47 GB/s): 8
 * blocks putting 2 MiB each got 166 GB/s through the ring (docs/gpu-p2p-h200.md has the figures). */
#ifndef ROXI_GRID_BLOCKS /* the CPU harness, whose grid is one block, sets a grid of its own */
#define ROXI_GRID_BLOCKS() roxa_nblocks()
#endif
ROXI_FN int roxi_put_path(int pe, uint64_t n, int force_ce, int g)
{
	int path = roxi_path(pe, n, force_ce);
	if (path == ROXI_PATH_CE && !force_ce && g == ROXI_BLOCK && n / ROXI_GRID_BLOCKS() < roxshmem_state.ce_threshold)
		return pe == roxshmem_state.my_pe ? ROXI_PATH_SELF : ROXI_PATH_LS;
	return path;
}

/* A put of whole 16-byte units at 16-byte alignment over load/store, inline in the caller: a
 * small block put costs the instructions each of the block's warps issues per call (32 warps at
 * 1024 threads), and the general path (two calls deep, the alignment head and tails of roxa_copy)
 * made that ~0.9 us a call on an H200 whatever the size (docs/gpu-p2p-h200.md). Returns 0, having
 * done nothing, where the general path must take the call: a bad PE or address (it records them),
 * another route (ring, SDMA), misalignment. Every thread of the group decides alike (same
 * arguments). A kernel that calls it with 1024 threads needs launch_bounds(1024) on nvptx, so
 * that the JIT fits it in 64 registers a thread. */
ROXA_FN int roxi_putmem_ls16(void *dest, const void *src, uint64_t n, int pe, int g)
{
	uint64_t a = (uint64_t)(uintptr_t)dest, base = roxshmem_state.heap_base, off = a - base;
	if ((unsigned)pe >= (unsigned)roxshmem_state.n_pes || a < base || off > roxshmem_state.heap_size ||
	    n > roxshmem_state.heap_size - off || ((a | (uint64_t)(uintptr_t)src | n) & 15) != 0)
		return 0;
	int path = roxi_put_path(pe, n, 0, g);
	if (path != ROXI_PATH_SELF && path != ROXI_PATH_LS)
		return 0;
	uint8_t *d = (uint8_t *)roxi_remote(off, pe);
	const uint8_t *s = (const uint8_t *)src;
	int mode = roxi_store_mode();
	uint64_t n16 = n >> 4, stride = roxi_gsize(g), i = roxi_gidx(g);
	/* four loads in flight per thread before their stores, as roxa_copy */
	for (; i + 3 * stride < n16; i += 4 * stride) {
		roxa_u128 v0 = roxa_ld16(s + 16 * i, ROXA_MEM_PLAIN);
		roxa_u128 v1 = roxa_ld16(s + 16 * (i + stride), ROXA_MEM_PLAIN);
		roxa_u128 v2 = roxa_ld16(s + 16 * (i + 2 * stride), ROXA_MEM_PLAIN);
		roxa_u128 v3 = roxa_ld16(s + 16 * (i + 3 * stride), ROXA_MEM_PLAIN);
		roxa_st16(d + 16 * i, &v0, mode);
		roxa_st16(d + 16 * (i + stride), &v1, mode);
		roxa_st16(d + 16 * (i + 2 * stride), &v2, mode);
		roxa_st16(d + 16 * (i + 3 * stride), &v3, mode);
	}
	for (; i < n16; i += stride) {
		roxa_u128 v = roxa_ld16(s + 16 * i, ROXA_MEM_PLAIN);
		roxa_st16(d + 16 * i, &v, mode);
	}
	return 1;
}

/* The internals below take the ring of the call's context, c (0: the default context). Puts
 * that the default context would send to an AMD SDMA queue take a context's ring instead (the
 * proxy's copy-engine route): the SDMA queues are shared by all contexts, so a context's quiet
 * could not complete its own puts there without waiting for every other context's. */
ROXI_COLD void roxi_putmem(roxshmem_ctx_desc_t *c, void *dest, const void *src, uint64_t n, int pe, int g, int nbi, int force_ce)
{
	uint64_t off;
	if (!roxi_check(dest, n, pe, &off))
		return;
	int path = roxi_put_path(pe, n, force_ce, g);
	if (path == ROXI_PATH_SELF || path == ROXI_PATH_LS) {
		/* to self too: in CacheBypass every API delivery bypasses the caches */
		roxa_copy(roxi_remote(off, pe), src, n, roxi_gidx(g), roxi_gsize(g), ROXA_MEM_PLAIN, roxi_store_mode());
#ifdef ROXI_HAVE_SDMA
	} else if (path == ROXI_PATH_SDMA && c == 0) {
		roxi_sdma_putmem(roxi_remote(off, pe), src, n, 0, 0, 0, pe, g, nbi);
#endif
	} else {
		roxi_gsync(g); /* every thread's writes of src precede the descriptor */
		if (roxi_gidx(g) == 0 && roxi_q_have(c, pe)) {
			uint64_t t = roxi_q_push(c, ROXSHMEM_OP_PUT, (uint32_t)pe, n, (uint64_t)(uintptr_t)src, off, 0, 0, 0);
			if (!nbi && t != ROXSHMEM_RING_NO_TICKET)
				roxi_q_wait(c, t + 1, ROXSHMEM_CALL_RING, pe);
		}
	}
	if (!nbi)
		roxi_gsync(g);
}

/* The API's puts (not the _ce forms): the inline load/store path where it applies, else the
 * general one. */
ROXA_FN void roxi_putmem_fast(roxshmem_ctx_desc_t *c, void *dest, const void *src, uint64_t n, int pe, int g, int nbi)
{
	if (!roxi_putmem_ls16(dest, src, n, pe, g))
		roxi_putmem(c, dest, src, n, pe, g, nbi, 0);
	else if (!nbi)
		roxi_gsync(g);
}

ROXI_COLD void roxi_getmem(roxshmem_ctx_desc_t *c, void *dest, const void *src, uint64_t n, int pe, int g, int nbi)
{
	uint64_t off;
	if (!roxi_check(src, n, pe, &off))
		return;
	int path = roxi_path(pe, n, 0);
	if (path == ROXI_PATH_SELF || path == ROXI_PATH_LS) {
		/* remote loads are system-coherent in both modes: a get must not hit a stale line */
		roxa_copy(dest, roxi_remote(off, pe), n, roxi_gidx(g), roxi_gsize(g),
			  path == ROXI_PATH_SELF ? ROXA_MEM_PLAIN : ROXA_MEM_BYPASS, ROXA_MEM_PLAIN);
	} else {
		if (roxi_gidx(g) == 0 && roxi_q_have(c, pe)) {
			uint64_t t = roxi_q_push(c, ROXSHMEM_OP_GET, (uint32_t)pe, n, (uint64_t)(uintptr_t)dest, off, 0, 0, 0);
			if (!nbi && t != ROXSHMEM_RING_NO_TICKET)
				roxi_q_wait(c, t + 1, ROXSHMEM_CALL_RING, pe);
		}
	}
	if (!nbi) {
		/* a blocking fetch orders later accesses (Strict) */
		if (!roxi_bypass())
			roxa_fence_acquire();
		roxi_gsync(g);
	}
}

ROXA_FN void roxi_st_width(void *p, uint64_t bits, uint32_t width)
{
	switch (width) {
	case 1: roxa_st_relaxed_u8((uint8_t *)p, (uint8_t)bits); break;
	case 2: roxa_st_relaxed_u16((uint16_t *)p, (uint16_t)bits); break;
	case 4: roxa_st_relaxed_u32((uint32_t *)p, (uint32_t)bits); break;
	default: roxa_st_relaxed_u64((uint64_t *)p, bits); break;
	}
}

ROXA_FN uint64_t roxi_ld_width(const void *p, uint32_t width)
{
	switch (width) {
	case 1: return roxa_ld_relaxed_u8((const uint8_t *)p);
	case 2: return roxa_ld_relaxed_u16((const uint16_t *)p);
	case 4: return roxa_ld_relaxed_u32((const uint32_t *)p);
	default: return roxa_ld_relaxed_u64((const uint64_t *)p);
	}
}

ROXI_FN uint64_t roxi_amo(roxshmem_ctx_desc_t *c, uint32_t kind, void *dest, uint64_t v, uint64_t cmp, uint32_t width, int pe);

/* p: one element, one strong (single-copy atomic) store at system scope. */
ROXI_FN void roxi_p(roxshmem_ctx_desc_t *c, void *dest, uint64_t bits, uint32_t width, int pe)
{
	uint64_t off;
	if (!roxi_check(dest, width, pe, &off))
		return;
	if (roxi_path(pe, width, 0) != ROXI_PATH_NIC) {
		roxi_st_width(roxi_remote(off, pe), bits, width);
		return;
	}
	if (!roxi_q_have(c, pe))
		return;
	if (width >= 4) {
		/* the value travels in the descriptor: an AMO set */
		roxi_q_push(c, ROXSHMEM_OP_AMO, (uint32_t)pe, width, 0, off, bits, 0, ROXSHMEM_DESC_FLAGS(ROXSHMEM_AMO_SET, width));
		return;
	}
	/* 1 or 2 bytes through the NIC: compare-and-swap the aligned 4-byte word that holds them */
	uint64_t woff = off & ~3ull, shift = (off & 3) * 8, mask = (width == 1 ? 0xffull : 0xffffull) << shift;
	uint64_t cur = roxi_amo(c, ROXSHMEM_AMO_FETCH, roxi_local(woff), 0, 0, 4, pe);
	for (int i = 0; i < 1 << 20; i++) {
		uint64_t want = (cur & ~mask) | ((bits << shift) & mask);
		uint64_t got = roxi_amo(c, ROXSHMEM_AMO_COMPARE_SWAP, roxi_local(woff), want, cur, 4, pe);
		if (got == cur || roxi_must_abort_on(ROXSHMEM_CALL_RING, pe, roxi_q_error(c)))
			break;
		cur = got;
	}
}

ROXI_FN uint64_t roxi_g(roxshmem_ctx_desc_t *c, const void *src, uint32_t width, int pe)
{
	uint64_t off, v = 0;
	if (!roxi_check(src, width, pe, &off))
		return 0;
	if (roxi_path(pe, width, 0) != ROXI_PATH_NIC) {
		v = roxi_ld_width(roxi_remote(off, pe), width);
	} else if (roxi_q_have(c, pe)) {
		uint64_t t = roxi_q_push(c, ROXSHMEM_OP_GET, (uint32_t)pe, width, ROXSHMEM_RING_RESULT_SLOT, off, 0, 0, 0);
		if (t != ROXSHMEM_RING_NO_TICKET && roxi_q_wait(c, t + 1, ROXSHMEM_CALL_RING, pe))
			v = roxi_ld_width(roxi_q_result(c, t), width);
	}
	if (!roxi_bypass())
		roxa_fence_acquire();
	return v;
}

ROXA_FN int roxi_fetching(uint32_t kind) { return kind != ROXSHMEM_AMO_SET; }

/* Whether a read-modify-write of pe's heap must be applied by the CPU (through the ring): pe is
 * this PE and its heap is host memory the transport's CPU side also updates atomically, which
 * this device's atomics are not atomic with (ROXSHMEM_FLAG_HOST_AMO). */
ROXA_FN int roxi_amo_by_host(int pe)
{
	return pe == roxshmem_state.my_pe && (roxshmem_state.flags & ROXSHMEM_FLAG_HOST_AMO) != 0;
}

/* The AMO instruction on a load/store-reachable word p: relaxed, or an acquire for a blocking
 * fetch in Strict (MP+quiet+fetchAMO: a blocking fetch orders later accesses). */
ROXA_FN uint64_t roxi_amo_ls(uint32_t kind, void *p, uint64_t v, uint64_t cmp, uint32_t width, int nbi)
{
	int acq = !nbi && !roxi_bypass();
	if (width == 8)
		return acq ? roxa_amo_acq_u64(kind, (uint64_t *)p, v, cmp) : roxa_amo_u64(kind, (uint64_t *)p, v, cmp);
	return acq ? roxa_amo_acq_u32(kind, (uint32_t *)p, (uint32_t)v, (uint32_t)cmp)
		   : roxa_amo_u32(kind, (uint32_t *)p, (uint32_t)v, (uint32_t)cmp);
}

/* An AMO of width 4 or 8 at system scope that roxi_amo_nbi does not take inline: bad input
 * (recorded, 0 returned) or the ring. Returns the old value (0 for set). Non-fetching AMOs
 * through the NIC are not waited for (quiet completes them). */
ROXI_COLD uint64_t roxi_amo_slow(roxshmem_ctx_desc_t *c, uint32_t kind, void *dest, uint64_t v, uint64_t cmp, uint32_t width, int pe,
				 int nbi)
{
	uint64_t off, old = 0;
	if (!roxi_check(dest, width, pe, &off))
		return 0;
	if (((uintptr_t)dest & (width - 1)) != 0) {
		roxi_record(ROXSHMEM_CALL_BAD_ADDR, pe, (uint32_t)(uintptr_t)dest);
		return 0;
	}
	/* a load/store target took roxi_amo_nbi's inline path: here only the ring's remain (a NIC
	 * peer, or this PE's heap whose AMOs the host applies) */
	if (roxi_q_have(c, pe)) {
		uint64_t t = roxi_q_push(c, ROXSHMEM_OP_AMO, (uint32_t)pe, width, nbi ? 0 : ROXSHMEM_RING_RESULT_SLOT, off, v, cmp,
					 ROXSHMEM_DESC_FLAGS(kind, width));
		/* the ring wait ends with a system-scope acquire */
		if (!nbi && t != ROXSHMEM_RING_NO_TICKET && roxi_q_wait(c, t + 1, ROXSHMEM_CALL_RING, pe))
			old = roxi_ld_width(roxi_q_result(c, t), width);
	}
	return old;
}

/* An AMO on a mapped peer or this PE's device heap, the common case, is one test of the
 * arguments and the instruction, inline in the caller: no call, no path table, and the result
 * straight from the atomic. Everything else takes roxi_amo_slow, which records bad input. */
ROXA_FN uint64_t roxi_amo_nbi(roxshmem_ctx_desc_t *c, uint32_t kind, void *dest, uint64_t v, uint64_t cmp, uint32_t width, int pe,
			      int nbi)
{
	uint64_t a = (uint64_t)(uintptr_t)dest, base = roxshmem_state.heap_base, off = a - base;
	int self = pe == roxshmem_state.my_pe;
	if ((unsigned)pe < (unsigned)roxshmem_state.n_pes && a >= base && off <= roxshmem_state.heap_size &&
	    width <= roxshmem_state.heap_size - off && (a & (width - 1)) == 0 &&
	    (self ? (roxshmem_state.flags & ROXSHMEM_FLAG_HOST_AMO) == 0 : roxshmem_state.peer_base[pe] != 0))
		return roxi_amo_ls(kind, roxi_remote(off, pe), v, cmp, width, nbi);
	return roxi_amo_slow(c, kind, dest, v, cmp, width, pe, nbi);
}

ROXI_FN uint64_t roxi_amo(roxshmem_ctx_desc_t *c, uint32_t kind, void *dest, uint64_t v, uint64_t cmp, uint32_t width, int pe)
{
	return roxi_amo_nbi(c, kind, dest, v, cmp, width, pe, !roxi_fetching(kind));
}

/* Data, then the signal: the signal update is a release (Strict) or follows the drain of the
 * cache-bypassing data stores (CacheBypass); through the ring one descriptor carries both. */
ROXI_COLD void roxi_putmem_signal_path(roxshmem_ctx_desc_t *c, void *dest, const void *src, uint64_t n, uint64_t *sig,
				     uint64_t signal, int sig_op, int pe, int g, int nbi, int force_ce)
{
	uint64_t off, soff;
	if (!roxi_check(dest, n, pe, &off) || !roxi_check(sig, 8, pe, &soff))
		return;
	int path = roxi_put_path(pe, n, force_ce, g);
	/* a signal add the CPU must apply (ROXSHMEM_FLAG_HOST_AMO): the whole put-with-signal goes
	 * through the ring, whose copy-engine route lands the data and then adds on the CPU */
	if (sig_op == ROXSHMEM_SIGNAL_ADD && path == ROXI_PATH_SELF && roxi_amo_by_host(pe) && roxi_ring_enabled())
		path = ROXI_PATH_CE;
#ifdef ROXI_HAVE_SDMA
	if (path == ROXI_PATH_SDMA && c == 0) {
		roxi_sdma_putmem(roxi_remote(off, pe), src, n, (uint64_t)(uintptr_t)roxi_remote(soff, pe), signal, sig_op, pe, g, nbi);
		return;
	}
#endif
	if (path == ROXI_PATH_SELF || path == ROXI_PATH_LS) {
		/* to self too: in CacheBypass every API delivery bypasses the caches */
		void *d = roxi_remote(off, pe);
		if (g == ROXI_THREAD && n == 8 && (((uintptr_t)d | (uintptr_t)src) & 7) == 0) {
			/* one word from one thread (a flag with its payload): one load and one store, where
			 * roxa_copy would move an 8-byte tail byte by byte */
			uint64_t v = *(const uint64_t *)src;
			if (roxi_bypass())
				roxa_st_relaxed_u64((uint64_t *)d, v);
			else
				*(uint64_t *)d = v;
		} else {
			roxa_copy(d, src, n, roxi_gidx(g), roxi_gsize(g), ROXA_MEM_PLAIN, roxi_store_mode());
		}
		if (g != ROXI_THREAD) {
			roxi_thread_drain();
			roxi_gsync(g);
		}
		if (roxi_gidx(g) == 0) {
			uint64_t *s = (uint64_t *)roxi_remote(soff, pe);
			if (!roxi_bypass()) {
				if (sig_op == ROXSHMEM_SIGNAL_ADD)
					roxa_add_release_u64(s, signal);
				else
					roxa_st_release_u64(s, signal);
			} else {
				roxa_drain();
				if (sig_op == ROXSHMEM_SIGNAL_ADD)
					roxa_amo_u64(ROXSHMEM_AMO_FETCH_ADD, s, signal, 0);
				else
					roxa_st_relaxed_u64(s, signal);
			}
		}
	} else {
		roxi_gsync(g);
		if (roxi_gidx(g) == 0 && roxi_q_have(c, pe)) {
			uint64_t t = roxi_q_push(c, ROXSHMEM_OP_PUT_SIGNAL, (uint32_t)pe, n, (uint64_t)(uintptr_t)src, off, signal, soff,
						 ROXSHMEM_DESC_FLAGS(sig_op, 8));
			if (!nbi && t != ROXSHMEM_RING_NO_TICKET)
				roxi_q_wait(c, t + 1, ROXSHMEM_CALL_RING, pe);
		}
	}
	if (!nbi)
		roxi_gsync(g);
}

ROXA_FN void roxi_putmem_signal(roxshmem_ctx_desc_t *c, void *dest, const void *src, uint64_t n, uint64_t *sig,
				uint64_t signal, int sig_op, int pe, int g, int nbi)
{
#ifdef ROXSHMEM_MUTATE_SIGNAL_FIRST /* a broken build (see roxshmem_fence): the signal, then the data */
	roxi_putmem_signal_path(c, dest, src, 0, sig, signal, sig_op, pe, g, nbi, 0);
	roxi_putmem(c, dest, src, n, pe, g, nbi, 0);
#else
	roxi_putmem_signal_path(c, dest, src, n, sig, signal, sig_op, pe, g, nbi, 0);
#endif
}

ROXA_FN int roxi_cmp(uint64_t a, int cmp, uint64_t b, int is_signed)
{
	int64_t sa = (int64_t)a, sb = (int64_t)b;
	switch (cmp) {
	case ROXSHMEM_CMP_EQ: return a == b;
	case ROXSHMEM_CMP_NE: return a != b;
	case ROXSHMEM_CMP_GT: return is_signed ? sa > sb : a > b;
	case ROXSHMEM_CMP_LE: return is_signed ? sa <= sb : a <= b;
	case ROXSHMEM_CMP_LT: return is_signed ? sa < sb : a < b;
	default: return is_signed ? sa >= sb : a >= b;
	}
}

ROXA_FN uint64_t roxi_sext(uint64_t v, uint32_t width, int is_signed)
{
	if (!is_signed || width == 8)
		return v;
	uint32_t sh = 64 - 8 * width;
	return (uint64_t)((int64_t)(v << sh) >> sh);
}

/* On nvptx an 8-byte wait polls with ld.acquire.sys: the load that sees the value is the acquire,
 * and no fence.acq_rel.sys follows, which would first wait for this thread's earlier stores to be
 * acknowledged at system scope (a p to a peer just before the wait: an NVLink round trip). Other
 * widths and amdgcn poll relaxed and end with the mode's acquire fence. */
ROXA_FN int roxi_acq_poll(uint32_t width)
{
#if defined(ROXA_NVPTX)
	return width == 8;
#else
	(void)width;
	return 0;
#endif
}

ROXA_FN uint64_t roxi_wait_ld(const void *ivar, uint32_t width)
{
	return roxi_acq_poll(width) ? roxa_ld_acquire_u64((const uint64_t *)ivar) : roxi_ld_width(ivar, width);
}

ROXI_FN uint64_t roxi_wait(const void *ivar, uint32_t width, int is_signed, int cmp, uint64_t value, uint32_t call)
{
	uint64_t want = roxi_sext(value, width, is_signed), v;
	uint32_t spins = 0;
	for (;;) {
		v = roxi_sext(roxi_wait_ld(ivar, width), width, is_signed);
		if (roxi_cmp(v, cmp, want, is_signed))
			break;
		if ((++spins & 63) == 0) {
			if (roxi_must_abort(call, roxshmem_state.my_pe, 0))
				break;
			if (spins > 4096)
				roxa_pause();
		}
	}
	if (!roxi_acq_poll(width))
		roxi_wait_acquire();
	return v;
}

ROXI_FN int roxi_test(const void *ivar, uint32_t width, int is_signed, int cmp, uint64_t value)
{
	uint64_t v = roxi_sext(roxi_wait_ld(ivar, width), width, is_signed);
	if (!roxi_cmp(v, cmp, roxi_sext(value, width, is_signed), is_signed))
		return 0;
	if (!roxi_acq_poll(width))
		roxi_wait_acquire();
	return 1;
}

/* Tells PE pe that this PE reached round at workspace offset arrive (of this PE's slot). */
ROXI_FN void roxi_announce(int pe, uint64_t arrive, uint64_t round)
{
	uint64_t off = roxshmem_state.barrier_off + arrive + 8ull * (uint64_t)roxshmem_state.my_pe;
	if (pe == roxshmem_state.my_pe || roxshmem_state.peer_base[pe] != 0) {
		roxa_st_release_u64((uint64_t *)roxi_remote(off, pe), round);
	} else if (roxi_have_ring(pe)) {
		roxshmemx_ring_push(ROXSHMEM_OP_AMO, (uint32_t)pe, 8, 0, off, round, 0,
				    ROXSHMEM_DESC_FLAGS(ROXSHMEM_AMO_SET, 8));
	}
}

/* The PE-level barrier, run by one thread per PE: announce the round to every PE, wait for every
 * PE's announcement. Zero when aborted. */
ROXI_COLD int roxi_pe_barrier(uint64_t round_word, uint64_t arrive, uint32_t call)
{
	uint64_t *ws = (uint64_t *)roxi_local(roxshmem_state.barrier_off);
	uint64_t round = ws[round_word / 8] + 1;
	ws[round_word / 8] = round;
	int n = roxshmem_state.n_pes, me = roxshmem_state.my_pe;
	for (int i = 1; i < n; i++)
		roxi_announce((me + i) % n, arrive, round);
	int ok = 1;
	for (int pe = 0; pe < n && ok; pe++) {
		if (pe == me)
			continue;
		const uint64_t *w = ws + arrive / 8 + pe;
		uint32_t spins = 0;
		while (roxa_ld_relaxed_u64(w) < round) {
			if ((++spins & 63) == 0) {
				if (roxi_must_abort(call, pe, 1)) {
					ok = 0;
					break;
				}
				if (spins > 4096)
					roxa_pause();
			}
		}
	}
	roxi_wait_acquire();
	return ok;
}

/* Grid-wide barrier among the blocks of this kernel (all resident), with the PE-level barrier run
 * by the last block to arrive. quiet_first: complete every operation first (barrier) or only
 * order them (sync). */
ROXI_COLD void roxi_grid_barrier(int quiet_first, uint32_t call)
{
	uint64_t *ws = (uint64_t *)roxi_local(roxshmem_state.barrier_off);
	roxi_thread_drain();
	roxa_sync_block();
	if (roxa_tid() == 0) {
		uint64_t gen = roxa_ld_acquire_agent_u64(ws + ROXSHMEM_BARRIER_GRID_GEN / 8);
		uint64_t arrived = roxa_add_agent_u64(ws + ROXSHMEM_BARRIER_GRID_COUNT / 8, 1);
		if (arrived == roxa_nblocks() - 1) {
			roxa_st_relaxed_u64(ws + ROXSHMEM_BARRIER_GRID_COUNT / 8, 0);
			if (quiet_first) {
				roxi_bypass() ? roxa_fence_release() : roxa_fence_sc();
				roxi_ring_quiet(call);
				roxi_pe_barrier(ROXSHMEM_BARRIER_ROUND, ROXSHMEM_BARRIER_ARRIVE, call);
			} else {
				roxi_bypass() ? roxa_drain() : roxa_fence_sc();
				roxi_pe_barrier(ROXSHMEM_BARRIER_SYNC_ROUND, ROXSHMEM_BARRIER_SYNC_ARRIVE, call);
			}
			roxa_st_release_agent_u64(ws + ROXSHMEM_BARRIER_GRID_GEN / 8, gen + 1);
		} else {
			uint32_t spins = 0;
			while (roxa_ld_acquire_agent_u64(ws + ROXSHMEM_BARRIER_GRID_GEN / 8) == gen) {
				if ((++spins & 63) == 0) {
					if (roxi_must_abort(call, -1, 0))
						break;
					roxa_pause();
				}
			}
		}
		roxi_wait_acquire();
	}
	roxa_sync_block();
}

ROXI_COLD void roxi_block_barrier(int quiet_first, uint32_t call)
{
	roxi_thread_drain();
	roxa_sync_block();
	if (roxa_tid() == 0) {
		if (quiet_first) {
			roxi_bypass() ? roxa_fence_release() : roxa_fence_sc();
			roxi_ring_quiet(call);
			roxi_pe_barrier(ROXSHMEM_BARRIER_ROUND, ROXSHMEM_BARRIER_ARRIVE, call);
		} else {
			roxi_bypass() ? roxa_drain() : roxa_fence_sc();
			roxi_pe_barrier(ROXSHMEM_BARRIER_SYNC_ROUND, ROXSHMEM_BARRIER_SYNC_ARRIVE, call);
		}
	}
	roxa_sync_block();
}

/* ---- the API ------------------------------------------------------------------------------- */

ROXA_API int roxshmem_my_pe(void) { return roxshmem_state.my_pe; }
ROXA_API int roxshmem_n_pes(void) { return roxshmem_state.n_pes; }

/* The address through which this thread can load and store dest on pe, or 0 when pe's heap is not
 * load/store reachable (or dest is not in the symmetric heap). */
ROXA_API void *roxshmem_ptr(const void *dest, int pe)
{
	uint64_t a = (uint64_t)(uintptr_t)dest, base = roxshmem_state.heap_base;
	if ((unsigned)pe >= (unsigned)roxshmem_state.n_pes || a < base || a - base >= roxshmem_state.heap_size)
		return 0;
	if (pe == roxshmem_state.my_pe)
		return (void *)dest;
	if (roxshmem_state.peer_base[pe] == 0)
		return 0;
	return roxi_remote(a - base, pe);
}

/* Nonzero once the host has set the abort word: every wait returns early from then on. */
ROXA_API uint64_t roxshmemx_aborted(void)
{
	roxshmem_abort_t *ab = (roxshmem_abort_t *)(uintptr_t)roxshmem_state.abort;
	return ab ? roxa_ld_relaxed_u64(&ab->word) : 0;
}

/* Every point-to-point call below is one definition that makes two calls: the default context's
 * (roxshmem_NAME, roxshmemx_NAME: c = 0, the state's ring) and the context form of OpenSHMEM 1.5
 * (roxshmem_ctx_NAME(ctx, ...), roxshmemx_ctx_NAME(ctx, ...)), whose handle names the ring it
 * takes (ctx.h). A handle that names no live context is recorded (ROXSHMEM_CALL_BAD_CTX) and the
 * call is skipped (returning 0); ROXSHMEM_CTX_DEFAULT is the plain call. A family macro X(P, PX,
 * CP, Q, ...) gets the name prefixes P and PX, the context parameter CP and Q(RET), the statement
 * that sets c; ROXI_ON_BOTH(X, ...) expands it for both. */
#define ROXI_NO_CTX_PARAM
#define ROXI_CTX_PARAM roxshmem_ctx_t ctx,
#define ROXI_NO_CTX_Q(RET) roxshmem_ctx_desc_t *const c = 0;
#define ROXI_CTX_Q(RET)                                                                                                 \
	roxshmem_ctx_desc_t *c;                                                                                     \
	if (!roxi_ctx_q(ctx, &c))                                                                                   \
		return RET;
#define ROXI_ON_BOTH(X, ...)                                                                                            \
	X(roxshmem_, roxshmemx_, ROXI_NO_CTX_PARAM, ROXI_NO_CTX_Q, __VA_ARGS__)                                     \
	X(roxshmem_ctx_, roxshmemx_ctx_, ROXI_CTX_PARAM, ROXI_CTX_Q, __VA_ARGS__)

/* RMA, bytes. The group forms (_warp, _block): every thread of the warp (wavefront) or block calls
 * with the same arguments. _ce: always the copy engine, zero SMs move the data (through the ring;
 * on AMD the default context's go to the device-written SDMA queues). */
#define ROXI_RMA_MEM(P, PX, CP, Q, _)                                                                                   \
	ROXA_API void P##putmem(CP void *dest, const void *source, size_t nelems, int pe) { Q() roxi_putmem_fast(c, dest, source, nelems, pe, ROXI_THREAD, 0); } \
	ROXA_API void P##putmem_nbi(CP void *dest, const void *source, size_t nelems, int pe) { Q() roxi_putmem_fast(c, dest, source, nelems, pe, ROXI_THREAD, 1); } \
	ROXA_API void P##getmem(CP void *dest, const void *source, size_t nelems, int pe) { Q() roxi_getmem(c, dest, source, nelems, pe, ROXI_THREAD, 0); } \
	ROXA_API void P##getmem_nbi(CP void *dest, const void *source, size_t nelems, int pe) { Q() roxi_getmem(c, dest, source, nelems, pe, ROXI_THREAD, 1); } \
	ROXA_API void PX##putmem_warp(CP void *dest, const void *source, size_t nelems, int pe) { Q() roxi_putmem_fast(c, dest, source, nelems, pe, ROXI_WARP, 0); } \
	ROXA_API void PX##putmem_nbi_warp(CP void *dest, const void *source, size_t nelems, int pe) { Q() roxi_putmem_fast(c, dest, source, nelems, pe, ROXI_WARP, 1); } \
	ROXA_API void PX##putmem_block(CP void *dest, const void *source, size_t nelems, int pe) { Q() roxi_putmem_fast(c, dest, source, nelems, pe, ROXI_BLOCK, 0); } \
	ROXA_API void PX##putmem_nbi_block(CP void *dest, const void *source, size_t nelems, int pe) { Q() roxi_putmem_fast(c, dest, source, nelems, pe, ROXI_BLOCK, 1); } \
	ROXA_API void PX##getmem_warp(CP void *dest, const void *source, size_t nelems, int pe) { Q() roxi_getmem(c, dest, source, nelems, pe, ROXI_WARP, 0); } \
	ROXA_API void PX##getmem_nbi_warp(CP void *dest, const void *source, size_t nelems, int pe) { Q() roxi_getmem(c, dest, source, nelems, pe, ROXI_WARP, 1); } \
	ROXA_API void PX##getmem_block(CP void *dest, const void *source, size_t nelems, int pe) { Q() roxi_getmem(c, dest, source, nelems, pe, ROXI_BLOCK, 0); } \
	ROXA_API void PX##getmem_nbi_block(CP void *dest, const void *source, size_t nelems, int pe) { Q() roxi_getmem(c, dest, source, nelems, pe, ROXI_BLOCK, 1); } \
	ROXA_API void PX##putmem_ce(CP void *dest, const void *source, size_t nelems, int pe) { Q() roxi_putmem(c, dest, source, nelems, pe, ROXI_THREAD, 0, 1); } \
	ROXA_API void PX##putmem_ce_nbi(CP void *dest, const void *source, size_t nelems, int pe) { Q() roxi_putmem(c, dest, source, nelems, pe, ROXI_THREAD, 1, 1); } \
	ROXA_API void PX##putmem_ce_block(CP void *dest, const void *source, size_t nelems, int pe) { Q() roxi_putmem(c, dest, source, nelems, pe, ROXI_BLOCK, 0, 1); } \
	ROXA_API void PX##putmem_ce_nbi_block(CP void *dest, const void *source, size_t nelems, int pe) { Q() roxi_putmem(c, dest, source, nelems, pe, ROXI_BLOCK, 1, 1); }
ROXI_ON_BOTH(ROXI_RMA_MEM, 0)

/* The copy engine under rocSHMEM's word for it (default context only: the SDMA queues are shared
 * by all contexts). On AMD with SDMA queues, the calling thread writes the packets into the peer's
 * SDMA queue itself; elsewhere the proxy drives the copy engine through the ring. */
ROXA_API void roxshmemx_putmem_sdma(void *dest, const void *source, size_t nelems, int pe) { roxi_putmem(0, dest, source, nelems, pe, ROXI_THREAD, 0, 1); }
ROXA_API void roxshmemx_putmem_sdma_nbi(void *dest, const void *source, size_t nelems, int pe) { roxi_putmem(0, dest, source, nelems, pe, ROXI_THREAD, 1, 1); }
ROXA_API void roxshmemx_putmem_sdma_block(void *dest, const void *source, size_t nelems, int pe) { roxi_putmem(0, dest, source, nelems, pe, ROXI_BLOCK, 0, 1); }
ROXA_API void roxshmemx_putmem_sdma_nbi_block(void *dest, const void *source, size_t nelems, int pe) { roxi_putmem(0, dest, source, nelems, pe, ROXI_BLOCK, 1, 1); }
/* put-with-signal by the copy engine: the engine sets (or adds to) the signal after the data */
ROXA_API void roxshmemx_putmem_signal_sdma(void *dest, const void *source, size_t nelems, uint64_t *sig_addr, uint64_t signal, int sig_op, int pe)
{
	roxi_putmem_signal_path(0, dest, source, nelems, sig_addr, signal, sig_op, pe, ROXI_THREAD, 0, 1);
}
ROXA_API void roxshmemx_putmem_signal_sdma_nbi(void *dest, const void *source, size_t nelems, uint64_t *sig_addr, uint64_t signal, int sig_op, int pe)
{
	roxi_putmem_signal_path(0, dest, source, nelems, sig_addr, signal, sig_op, pe, ROXI_THREAD, 1, 1);
}
ROXA_API void roxshmemx_putmem_signal_sdma_block(void *dest, const void *source, size_t nelems, uint64_t *sig_addr, uint64_t signal, int sig_op, int pe)
{
	roxi_putmem_signal_path(0, dest, source, nelems, sig_addr, signal, sig_op, pe, ROXI_BLOCK, 0, 1);
}
ROXA_API void roxshmemx_putmem_signal_sdma_nbi_block(void *dest, const void *source, size_t nelems, uint64_t *sig_addr, uint64_t signal, int sig_op, int pe)
{
	roxi_putmem_signal_path(0, dest, source, nelems, sig_addr, signal, sig_op, pe, ROXI_BLOCK, 1, 1);
}

/* RMA, sized */
#define ROXI_SIZED(P, PX, CP, Q, BITS)                                                                                 \
	ROXA_API void P##put##BITS(CP void *dest, const void *source, size_t nelems, int pe) { Q() roxi_putmem(c, dest, source, nelems * (BITS / 8), pe, ROXI_THREAD, 0, 0); } \
	ROXA_API void P##get##BITS(CP void *dest, const void *source, size_t nelems, int pe) { Q() roxi_getmem(c, dest, source, nelems * (BITS / 8), pe, ROXI_THREAD, 0); } \
	ROXA_API void P##put##BITS##_nbi(CP void *dest, const void *source, size_t nelems, int pe) { Q() roxi_putmem(c, dest, source, nelems * (BITS / 8), pe, ROXI_THREAD, 1, 0); } \
	ROXA_API void P##get##BITS##_nbi(CP void *dest, const void *source, size_t nelems, int pe) { Q() roxi_getmem(c, dest, source, nelems * (BITS / 8), pe, ROXI_THREAD, 1); }
ROXI_ON_BOTH(ROXI_SIZED, 8)
ROXI_ON_BOTH(ROXI_SIZED, 16)
ROXI_ON_BOTH(ROXI_SIZED, 32)
ROXI_ON_BOTH(ROXI_SIZED, 64)
ROXI_ON_BOTH(ROXI_SIZED, 128)

/* RMA, typed: the OpenSHMEM standard RMA types (long double is not a device type on nvptx). */
#define ROXI_RMA_ON(P, PX, CP, Q, NAME, T)                                                                              \
	ROXA_API void P##NAME##_p(CP T *dest, T value, int pe)                                                      \
	{                                                                                                           \
		Q()                                                                                                 \
		uint64_t bits = 0;                                                                                  \
		roxa_bytecopy(&bits, &value, sizeof(T));                                                         \
		roxi_p(c, dest, bits, sizeof(T), pe);                                                               \
	}                                                                                                           \
	ROXA_API T P##NAME##_g(CP const T *source, int pe)                                                          \
	{                                                                                                           \
		Q(0)                                                                                                \
		uint64_t bits = roxi_g(c, source, sizeof(T), pe);                                                   \
		T v;                                                                                                \
		roxa_bytecopy(&v, &bits, sizeof(T));                                                             \
		return v;                                                                                           \
	}                                                                                                           \
	ROXA_API void P##NAME##_put(CP T *dest, const T *source, size_t nelems, int pe) { Q() roxi_putmem(c, dest, source, nelems * sizeof(T), pe, ROXI_THREAD, 0, 0); } \
	ROXA_API void P##NAME##_get(CP T *dest, const T *source, size_t nelems, int pe) { Q() roxi_getmem(c, dest, source, nelems * sizeof(T), pe, ROXI_THREAD, 0); } \
	ROXA_API void P##NAME##_put_nbi(CP T *dest, const T *source, size_t nelems, int pe) { Q() roxi_putmem(c, dest, source, nelems * sizeof(T), pe, ROXI_THREAD, 1, 0); } \
	ROXA_API void P##NAME##_get_nbi(CP T *dest, const T *source, size_t nelems, int pe) { Q() roxi_getmem(c, dest, source, nelems * sizeof(T), pe, ROXI_THREAD, 1); } \
	ROXA_API void PX##NAME##_put_block(CP T *dest, const T *source, size_t nelems, int pe) { Q() roxi_putmem(c, dest, source, nelems * sizeof(T), pe, ROXI_BLOCK, 0, 0); } \
	ROXA_API void PX##NAME##_get_block(CP T *dest, const T *source, size_t nelems, int pe) { Q() roxi_getmem(c, dest, source, nelems * sizeof(T), pe, ROXI_BLOCK, 0); } \
	ROXA_API void PX##NAME##_put_warp(CP T *dest, const T *source, size_t nelems, int pe) { Q() roxi_putmem(c, dest, source, nelems * sizeof(T), pe, ROXI_WARP, 0, 0); } \
	ROXA_API void PX##NAME##_get_warp(CP T *dest, const T *source, size_t nelems, int pe) { Q() roxi_getmem(c, dest, source, nelems * sizeof(T), pe, ROXI_WARP, 0); }
#define ROXI_RMA(NAME, T) ROXI_ON_BOTH(ROXI_RMA_ON, NAME, T)

#define ROXI_RMA_TYPES(X)                                                                                               \
	X(float, float) X(double, double) X(char, char) X(schar, signed char) X(short, short) X(int, int) X(long, long)   \
	X(longlong, long long) X(uchar, unsigned char) X(ushort, unsigned short) X(uint, unsigned int)                       \
	X(ulong, unsigned long) X(ulonglong, unsigned long long) X(int8, int8_t) X(int16, int16_t) X(int32, int32_t)        \
	X(int64, int64_t) X(uint8, uint8_t) X(uint16, uint16_t) X(uint32, uint32_t) X(uint64, uint64_t) X(size, size_t)     \
	X(ptrdiff, ptrdiff_t)
ROXI_RMA_TYPES(ROXI_RMA)

/* AMOs (OpenSHMEM 1.5 names): relaxed, system scope, single-copy atomic among themselves. The
 * non-fetching ones through the NIC are not waited for: a quiet on their context completes them. */
#define ROXI_AMO_STD_ON(P, PX, CP, Q, NAME, T)                                                                          \
	ROXA_API T P##NAME##_atomic_fetch(CP const T *source, int pe)                                               \
	{                                                                                                           \
		Q(0)                                                                                                \
		return (T)roxi_amo(c, ROXSHMEM_AMO_FETCH, (void *)source, 0, 0, sizeof(T), pe);                      \
	}                                                                                                           \
	ROXA_API void P##NAME##_atomic_set(CP T *dest, T value, int pe) { Q() roxi_amo(c, ROXSHMEM_AMO_SET, dest, (uint64_t)value, 0, sizeof(T), pe); } \
	ROXA_API T P##NAME##_atomic_swap(CP T *dest, T value, int pe) { Q(0) return (T)roxi_amo(c, ROXSHMEM_AMO_SWAP, dest, (uint64_t)value, 0, sizeof(T), pe); } \
	ROXA_API T P##NAME##_atomic_compare_swap(CP T *dest, T cond, T value, int pe)                               \
	{                                                                                                           \
		Q(0)                                                                                                \
		return (T)roxi_amo(c, ROXSHMEM_AMO_COMPARE_SWAP, dest, (uint64_t)value, (uint64_t)cond, sizeof(T), pe); \
	}                                                                                                           \
	ROXA_API T P##NAME##_atomic_fetch_add(CP T *dest, T value, int pe) { Q(0) return (T)roxi_amo(c, ROXSHMEM_AMO_FETCH_ADD, dest, (uint64_t)value, 0, sizeof(T), pe); } \
	ROXA_API void P##NAME##_atomic_add(CP T *dest, T value, int pe) { Q() roxi_amo_nbi(c, ROXSHMEM_AMO_FETCH_ADD, dest, (uint64_t)value, 0, sizeof(T), pe, 1); } \
	ROXA_API T P##NAME##_atomic_fetch_inc(CP T *dest, int pe) { Q(0) return (T)roxi_amo(c, ROXSHMEM_AMO_FETCH_ADD, dest, 1, 0, sizeof(T), pe); } \
	ROXA_API void P##NAME##_atomic_inc(CP T *dest, int pe) { Q() roxi_amo_nbi(c, ROXSHMEM_AMO_FETCH_ADD, dest, 1, 0, sizeof(T), pe, 1); } \
	ROXA_API T P##NAME##_atomic_fetch_and(CP T *dest, T value, int pe) { Q(0) return (T)roxi_amo(c, ROXSHMEM_AMO_FETCH_AND, dest, (uint64_t)value, 0, sizeof(T), pe); } \
	ROXA_API void P##NAME##_atomic_and(CP T *dest, T value, int pe) { Q() roxi_amo_nbi(c, ROXSHMEM_AMO_FETCH_AND, dest, (uint64_t)value, 0, sizeof(T), pe, 1); } \
	ROXA_API T P##NAME##_atomic_fetch_or(CP T *dest, T value, int pe) { Q(0) return (T)roxi_amo(c, ROXSHMEM_AMO_FETCH_OR, dest, (uint64_t)value, 0, sizeof(T), pe); } \
	ROXA_API void P##NAME##_atomic_or(CP T *dest, T value, int pe) { Q() roxi_amo_nbi(c, ROXSHMEM_AMO_FETCH_OR, dest, (uint64_t)value, 0, sizeof(T), pe, 1); } \
	ROXA_API T P##NAME##_atomic_fetch_xor(CP T *dest, T value, int pe) { Q(0) return (T)roxi_amo(c, ROXSHMEM_AMO_FETCH_XOR, dest, (uint64_t)value, 0, sizeof(T), pe); } \
	ROXA_API void P##NAME##_atomic_xor(CP T *dest, T value, int pe) { Q() roxi_amo_nbi(c, ROXSHMEM_AMO_FETCH_XOR, dest, (uint64_t)value, 0, sizeof(T), pe, 1); }
#define ROXI_AMO_STD(NAME, T) ROXI_ON_BOTH(ROXI_AMO_STD_ON, NAME, T)

#define ROXI_AMO_TYPES(X)                                                                                               \
	X(int, int) X(long, long) X(longlong, long long) X(uint, unsigned int) X(ulong, unsigned long)                     \
	X(ulonglong, unsigned long long) X(int32, int32_t) X(int64, int64_t) X(uint32, uint32_t) X(uint64, uint64_t)        \
	X(size, size_t) X(ptrdiff, ptrdiff_t)
ROXI_AMO_TYPES(ROXI_AMO_STD)

/* extended AMOs on floating point: fetch, set, swap (bitwise) */
#define ROXI_AMO_EXT_ON(P, PX, CP, Q, NAME, T, U)                                                                       \
	ROXA_API T P##NAME##_atomic_fetch(CP const T *source, int pe)                                               \
	{                                                                                                           \
		Q(0)                                                                                                \
		U bits = (U)roxi_amo(c, ROXSHMEM_AMO_FETCH, (void *)source, 0, 0, sizeof(T), pe);                    \
		T v;                                                                                                \
		roxa_bytecopy(&v, &bits, sizeof(T));                                                             \
		return v;                                                                                           \
	}                                                                                                           \
	ROXA_API void P##NAME##_atomic_set(CP T *dest, T value, int pe)                                             \
	{                                                                                                           \
		Q()                                                                                                 \
		U bits;                                                                                             \
		roxa_bytecopy(&bits, &value, sizeof(T));                                                         \
		roxi_amo(c, ROXSHMEM_AMO_SET, dest, bits, 0, sizeof(T), pe);                                        \
	}                                                                                                           \
	ROXA_API T P##NAME##_atomic_swap(CP T *dest, T value, int pe)                                               \
	{                                                                                                           \
		Q(0)                                                                                                \
		U bits;                                                                                             \
		roxa_bytecopy(&bits, &value, sizeof(T));                                                         \
		bits = (U)roxi_amo(c, ROXSHMEM_AMO_SWAP, dest, bits, 0, sizeof(T), pe);                             \
		T v;                                                                                                \
		roxa_bytecopy(&v, &bits, sizeof(T));                                                             \
		return v;                                                                                           \
	}
ROXI_ON_BOTH(ROXI_AMO_EXT_ON, float, float, uint32_t)
ROXI_ON_BOTH(ROXI_AMO_EXT_ON, double, double, uint64_t)

/* put-with-signal: the data is delivered before the signal update becomes visible */
#define ROXI_SIGNAL_ON(P, PX, CP, Q, _)                                                                                 \
	ROXA_API void P##putmem_signal(CP void *dest, const void *source, size_t nelems, uint64_t *sig_addr, uint64_t signal, int sig_op, int pe) \
	{                                                                                                           \
		Q()                                                                                                 \
		roxi_putmem_signal(c, dest, source, nelems, sig_addr, signal, sig_op, pe, ROXI_THREAD, 0);           \
	}                                                                                                           \
	ROXA_API void P##putmem_signal_nbi(CP void *dest, const void *source, size_t nelems, uint64_t *sig_addr, uint64_t signal, int sig_op, int pe) \
	{                                                                                                           \
		Q()                                                                                                 \
		roxi_putmem_signal(c, dest, source, nelems, sig_addr, signal, sig_op, pe, ROXI_THREAD, 1);           \
	}                                                                                                           \
	ROXA_API void PX##putmem_signal_warp(CP void *dest, const void *source, size_t nelems, uint64_t *sig_addr, uint64_t signal, int sig_op, int pe) \
	{                                                                                                           \
		Q()                                                                                                 \
		roxi_putmem_signal(c, dest, source, nelems, sig_addr, signal, sig_op, pe, ROXI_WARP, 0);             \
	}                                                                                                           \
	ROXA_API void PX##putmem_signal_nbi_warp(CP void *dest, const void *source, size_t nelems, uint64_t *sig_addr, uint64_t signal, int sig_op, int pe) \
	{                                                                                                           \
		Q()                                                                                                 \
		roxi_putmem_signal(c, dest, source, nelems, sig_addr, signal, sig_op, pe, ROXI_WARP, 1);             \
	}                                                                                                           \
	ROXA_API void PX##putmem_signal_block(CP void *dest, const void *source, size_t nelems, uint64_t *sig_addr, uint64_t signal, int sig_op, int pe) \
	{                                                                                                           \
		Q()                                                                                                 \
		roxi_putmem_signal(c, dest, source, nelems, sig_addr, signal, sig_op, pe, ROXI_BLOCK, 0);            \
	}                                                                                                           \
	ROXA_API void PX##putmem_signal_nbi_block(CP void *dest, const void *source, size_t nelems, uint64_t *sig_addr, uint64_t signal, int sig_op, int pe) \
	{                                                                                                           \
		Q()                                                                                                 \
		roxi_putmem_signal(c, dest, source, nelems, sig_addr, signal, sig_op, pe, ROXI_BLOCK, 1);            \
	}
ROXI_ON_BOTH(ROXI_SIGNAL_ON, 0)
/* a relaxed read of a local signal word */
ROXA_API uint64_t roxshmem_signal_fetch(const uint64_t *sig_addr) { return roxa_ld_relaxed_u64(sig_addr); }
ROXA_API uint64_t roxshmem_signal_wait_until(uint64_t *sig_addr, int cmp, uint64_t cmp_value)
{
	return roxi_wait(sig_addr, 8, 0, cmp, cmp_value, ROXSHMEM_CALL_SIGNAL_WAIT_UNTIL);
}

/* point-to-point synchronization on a local symmetric variable */
#define ROXI_P2P(NAME, T)                                                                                               \
	ROXA_API void roxshmem_##NAME##_wait_until(T *ivar, int cmp, T cmp_value)                                   \
	{                                                                                                           \
		roxi_wait(ivar, sizeof(T), (T)-1 < (T)1, cmp, (uint64_t)cmp_value, ROXSHMEM_CALL_WAIT_UNTIL);        \
	}                                                                                                           \
	ROXA_API int roxshmem_##NAME##_test(T *ivar, int cmp, T cmp_value)                                          \
	{                                                                                                           \
		return roxi_test(ivar, sizeof(T), (T)-1 < (T)1, cmp, (uint64_t)cmp_value);                          \
	}
#define ROXI_P2P_TYPES(X)                                                                                               \
	X(short, short) X(int, int) X(long, long) X(longlong, long long) X(ushort, unsigned short) X(uint, unsigned int)  \
	X(ulong, unsigned long) X(ulonglong, unsigned long long) X(int32, int32_t) X(int64, int64_t) X(uint32, uint32_t)    \
	X(uint64, uint64_t) X(size, size_t) X(ptrdiff, ptrdiff_t)
ROXI_P2P_TYPES(ROXI_P2P)

/* Ordering and completion. */

/* The memory fences of fence and quiet (every context's: load/store puts and AMOs are this
 * thread's stores, whatever their context), then the ring part on the context's own ring. */
ROXA_FN void roxi_fence_mem(void)
{
	if (roxi_bypass())
		roxa_drain();
	else
		roxa_fence_sc();
}

ROXA_FN void roxi_quiet_mem(void)
{
	if (roxi_bypass()) {
		roxa_drain();
		roxa_fence_release();
	} else {
		roxa_fence_sc();
	}
}

ROXI_FN void roxi_fence_ring(roxshmem_ctx_desc_t *c)
{
	if (!roxi_q_enabled(c))
		return;
	if (roxshmem_state.flags & ROXSHMEM_FLAG_RING_FENCE) {
		/* ring and load/store reach disjoint PEs: the proxy keeps per-PE order across the marker */
		if (!roxi_q_idle(c))
			roxi_q_push(c, ROXSHMEM_OP_FENCE, ROXSHMEM_DESC_ALL_PES, 0, 0, 0, 0, 0, 0);
	} else {
		/* a later load/store put to a PE the ring also reaches must not overtake ring operations */
		roxi_q_quiet(c, ROXSHMEM_CALL_FENCE);
	}
}

/* Mutations: deliberately broken builds, never the default, that the GPU litmus runner must catch
 * (tools/litmusrun builds them: BuildMutant). ROXSHMEM_MUTATE_DROP_FENCE: fence does nothing;
 * ROXSHMEM_MUTATE_QUIET_AS_FENCE: quiet only fences; ROXSHMEM_MUTATE_SIGNAL_FIRST: a put-with-signal
 * updates the signal before it puts the data. */

/* fence: operations to each PE issued before it are delivered before those issued after it. */
ROXA_API void roxshmem_fence(void)
{
#ifndef ROXSHMEM_MUTATE_DROP_FENCE
	roxi_fence_mem();
#ifdef ROXI_HAVE_SDMA
	/* a later put to the same PE may take load/store or another queue: SDMA puts complete first */
	roxi_sdma_quiet(ROXSHMEM_CALL_FENCE);
#endif
	roxi_fence_ring(0);
#endif
}

/* quiet: every operation this PE issued before it is complete (delivered, results in hand). */
ROXA_API void roxshmem_quiet(void)
{
#ifdef ROXSHMEM_MUTATE_QUIET_AS_FENCE
	roxshmem_fence();
#else
	roxi_quiet_mem();
#ifdef ROXI_HAVE_SDMA
	roxi_sdma_quiet(ROXSHMEM_CALL_QUIET);
#endif
	roxi_q_quiet(0, ROXSHMEM_CALL_QUIET);
#endif
}

/* Every thread of every block of the grid calls it; all blocks must be resident (a cooperative
 * launch, or a grid no larger than the device runs at once). */
ROXA_API void roxshmem_barrier_all(void) { roxi_grid_barrier(1, ROXSHMEM_CALL_BARRIER); }
ROXA_API void roxshmem_sync_all(void) { roxi_grid_barrier(0, ROXSHMEM_CALL_SYNC); }
/* One block per PE calls it (every thread of that block). */
ROXA_API void roxshmemx_barrier_all_block(void) { roxi_block_barrier(1, ROXSHMEM_CALL_BARRIER); }
ROXA_API void roxshmemx_sync_all_block(void) { roxi_block_barrier(0, ROXSHMEM_CALL_SYNC); }

/* device contexts */
#include "ctx.h"

/* teams and team collectives */
#include "coll.h"

#endif /* ROXA_GPU_LANG */
#endif /* ROXAMEN_ROXSHMEM_H */
