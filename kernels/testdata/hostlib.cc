// TestHostLibrary: the device library's logic (paths, bounds checks, copies at odd offsets, typed
// p/g, AMO semantics, the ring producer's descriptors and flow control, abort) run on the CPU.
// Built as plain C++ with the HIP attributes defined away, so the arch layer's host fallbacks (the
// compiler's __atomic builtins) stand in for the GPU instructions. Prints one line per failed
// check and "done N" at the end.
/* the grid a block-scope put sees (the host pass runs one block; the copy-engine route of a
 * block's put depends on the grid's blocks) */
static unsigned g_grid_blocks = 1;
#define ROXI_GRID_BLOCKS() g_grid_blocks
#include "roxamen/roxshmem.h"

#include "check.h"

#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <unistd.h>

enum { HEAP = 1 << 16, CAP = 8 };
alignas(64) static uint8_t heap0[HEAP], heap1[HEAP];
alignas(64) static uint8_t src[HEAP];
alignas(64) static uint8_t ringmem[256 + 64 * CAP];
alignas(64) static uint64_t results[CAP];
alignas(64) static roxshmem_abort_t abortb;

static void reset(int ring)
{
	__builtin_memset(&roxshmem_state, 0, sizeof roxshmem_state);
	__builtin_memset(heap0, 0, HEAP);
	__builtin_memset(heap1, 0, HEAP);
	__builtin_memset(ringmem, 0, sizeof ringmem);
	__builtin_memset(&abortb, 0, sizeof abortb);
	roxshmem_state.magic = ROXSHMEM_STATE_MAGIC;
	roxshmem_state.my_pe = 0;
	roxshmem_state.n_pes = 2;
	roxshmem_state.heap_base = (uint64_t)(uintptr_t)heap0;
	roxshmem_state.heap_size = HEAP;
	roxshmem_state.peer_base[0] = (uint64_t)(uintptr_t)heap0;
	roxshmem_state.peer_base[1] = ring ? 0 : (uint64_t)(uintptr_t)heap1;
	roxshmem_state.abort = (uint64_t)(uintptr_t)&abortb;
	roxshmem_state.barrier_off = HEAP - ROXSHMEM_BARRIER_BYTES;
	if (ring) {
		roxshmem_state.ring = (uint64_t)(uintptr_t)ringmem;
		roxshmem_state.ring_capacity = CAP;
		roxshmem_state.ring_results = (uint64_t)(uintptr_t)results;
	}
	for (int i = 0; i < HEAP; i++)
		src[i] = (uint8_t)(i * 131 + 7);
}

static roxshmem_desc_t *desc(uint64_t t) { return (roxshmem_desc_t *)(ringmem + 256) + (t & (CAP - 1)); }

static void test_copy(void)
{
	static uint8_t dst[4096 + 64];
	const uint64_t sizes[] = {0, 1, 3, 15, 16, 17, 31, 64, 100, 1000, 4096};
	for (uint64_t n : sizes)
		for (int so = 0; so < 17; so++)
			for (int dof = 0; dof < 17; dof++)
				for (uint32_t stride = 1; stride <= 33; stride += 16) { /* 1, 17, 33 */
					__builtin_memset(dst, 0xee, sizeof dst);
					for (uint32_t idx = 0; idx < stride; idx++) /* every "thread" of the group */
						roxa_copy(dst + dof, src + so, n, idx, stride, idx & 1, (idx >> 1) & 1);
					int bad = __builtin_memcmp(dst + dof, src + so, n) != 0;
					for (int i = 0; i < dof; i++)
						bad |= dst[i] != 0xee;
					bad |= dst[dof + n] != 0xee;
					CHECK(!bad, "roxa_copy n=%llu src+%d dst+%d stride %u", (unsigned long long)n, so, dof, stride);
				}
}

static void test_put_get_ls(void)
{
	reset(0);
	roxshmem_putmem(heap0 + 5, src + 3, 1000, 1);
	CHECK(__builtin_memcmp(heap1 + 5, src + 3, 1000) == 0 && heap1[4] == 0 && heap1[1005] == 0, "putmem to peer 1");
	CHECK(heap0[5] == 0, "putmem to a peer wrote the local heap");
	roxshmem_putmem(heap0 + 7, src, 10, 0);
	CHECK(__builtin_memcmp(heap0 + 7, src, 10) == 0, "putmem to self");
	static uint8_t out[1000];
	roxshmem_getmem(out, heap0 + 5, 1000, 1);
	CHECK(__builtin_memcmp(out, src + 3, 1000) == 0, "getmem from peer 1");
	CHECK(roxshmem_ptr(heap0 + 100, 1) == heap1 + 100, "roxshmem_ptr(peer)");
	CHECK(roxshmem_ptr(heap0 + 100, 0) == heap0 + 100, "roxshmem_ptr(self)");
	CHECK(roxshmem_ptr(src, 1) == 0, "roxshmem_ptr of a non-heap address");
	CHECK(roxshmem_ptr(heap0, 2) == 0, "roxshmem_ptr of a PE out of range");
	CHECK(abortb.first == 0, "a good call recorded an error: %llx", (unsigned long long)abortb.first);

	long *l = (long *)(heap0 + 2048);
	roxshmem_long_p(l, -12345, 1);
	CHECK(*(long *)(heap1 + 2048) == -12345 && roxshmem_long_g(l, 1) == -12345, "long p/g");
	double *d = (double *)(heap0 + 2112);
	roxshmem_double_p(d, 2.5, 1);
	CHECK(roxshmem_double_g(d, 1) == 2.5, "double p/g");
	short *s = (short *)(heap0 + 2120);
	roxshmem_short_p(s, -7, 1);
	CHECK(roxshmem_short_g(s, 1) == -7 && heap1[2122] == 0, "short p/g");
	roxshmem_int_put((int *)(heap0 + 2200), (const int *)src, 5, 1);
	CHECK(__builtin_memcmp(heap1 + 2200, src, 20) == 0, "int put of 5 elements");
}

/* Aligned puts of whole 16-byte units by a thread, a warp and a block: the bytes, the checks, and
 * a block's put at the copy-engine threshold (one block in the grid) through the ring. */
static void test_put_ls16(void)
{
	reset(0);
	roxshmem_putmem(heap0 + 64, src + 16, 4096, 1);
	roxshmemx_putmem_nbi_block(heap0 + 8192, src + 48, 272, 1);
	roxshmemx_putmem_warp(heap0 + 9216, src, 16, 0);
	CHECK(__builtin_memcmp(heap1 + 64, src + 16, 4096) == 0 && heap1[63] == 0 && heap1[64 + 4096] == 0, "aligned putmem to peer 1");
	CHECK(__builtin_memcmp(heap1 + 8192, src + 48, 272) == 0 && heap1[8192 + 272] == 0, "aligned block put");
	CHECK(__builtin_memcmp(heap0 + 9216, src, 16) == 0 && heap0[9216 + 16] == 0 && heap1[9216] == 0, "aligned warp put to self");
	CHECK(abortb.first == 0, "a good aligned put recorded %llx", (unsigned long long)abortb.first);
	roxshmem_putmem(heap0 + HEAP - 16, src, 32, 1);
	CHECK((abortb.first >> 48 & 0xff) == ROXSHMEM_CALL_BAD_ADDR && heap1[HEAP - 16] == 0, "aligned put past the heap end");
	reset(0);
	roxshmem_putmem(heap0 + 64, src, 16, 2);
	CHECK(abortb.first == ROXSHMEM_ABORT_RECORD(ROXSHMEM_CALL_BAD_PE, 2, 2), "aligned put to a bad PE: %llx", (unsigned long long)abortb.first);
	reset(1);
	roxshmem_state.peer_base[1] = (uint64_t)(uintptr_t)heap1;
	roxshmem_state.ce_threshold = 256;
	roxshmem_putmem_nbi(heap0 + 1024, src, 240, 1);
	roxshmem_ring_header_t *h = (roxshmem_ring_header_t *)ringmem;
	CHECK(h->head == 0 && __builtin_memcmp(heap1 + 1024, src, 240) == 0, "aligned, below the threshold: load/store");
	roxshmemx_putmem_nbi_block(heap0 + 2048, src, 256, 1);
	CHECK(h->head == 1 && desc(0)->op == ROXSHMEM_OP_PUT && desc(0)->size == 256 && heap1[2048] == 0,
	      "aligned block put at the threshold (one block): copy engine");
	/* in a grid of 8 blocks, a block's put goes to the copy engine only at 8 times the threshold:
	 * the proxy would serve the blocks' copies one after another */
	g_grid_blocks = 8;
	roxshmemx_putmem_nbi_block(heap0 + 4096, src, 1024, 1);
	CHECK(h->head == 1 && __builtin_memcmp(heap1 + 4096, src, 1024) == 0, "a block of 8 putting 4x the threshold: load/store");
	roxshmemx_putmem_nbi_block(heap0 + 8192, src, 2048, 1);
	CHECK(h->head == 2 && heap1[8192] == 0, "a block of 8 putting 8x the threshold: copy engine");
	roxshmemx_putmem_signal_nbi_block(heap0 + 12288, src, 1024, (uint64_t *)(heap0 + 16384), 1, ROXSHMEM_SIGNAL_SET, 1);
	CHECK(h->head == 2 && *(uint64_t *)(heap1 + 16384) == 1 && __builtin_memcmp(heap1 + 12288, src, 1024) == 0,
	      "a block of 8's put-with-signal at 4x the threshold: load/store");
	roxshmem_putmem_nbi(heap0 + 20480, src, 1024, 1);
	CHECK(h->head == 3, "a thread's put at 4x the threshold: copy engine, whatever the grid");
	g_grid_blocks = 1;
}

static void test_amo_ls(void)
{
	reset(0);
	uint64_t *u = (uint64_t *)(heap0 + 512);
	*(uint64_t *)(heap1 + 512) = 10;
	CHECK(roxshmem_uint64_atomic_fetch_add(u, 5, 1) == 10, "fetch_add returns the old value");
	roxshmem_uint64_atomic_inc(u, 1);
	CHECK(roxshmem_uint64_atomic_fetch(u, 1) == 16, "add/inc");
	CHECK(roxshmem_uint64_atomic_compare_swap(u, 16, 99, 1) == 16 && *(uint64_t *)(heap1 + 512) == 99, "cswap hit");
	CHECK(roxshmem_uint64_atomic_compare_swap(u, 16, 1, 1) == 99 && *(uint64_t *)(heap1 + 512) == 99, "cswap miss");
	CHECK(roxshmem_uint64_atomic_swap(u, 0xf0, 1) == 99, "swap");
	roxshmem_uint64_atomic_and(u, 0x3c, 1);
	roxshmem_uint64_atomic_or(u, 0x1, 1);
	roxshmem_uint64_atomic_xor(u, 0x11, 1);
	CHECK(*(uint64_t *)(heap1 + 512) == (((0xf0 & 0x3c) | 1) ^ 0x11), "and/or/xor: %llx", (unsigned long long)*(uint64_t *)(heap1 + 512));
	int *i = (int *)(heap0 + 600);
	roxshmem_int_atomic_set(i, -3, 1);
	CHECK(roxshmem_int_atomic_fetch_add(i, -4, 1) == -3 && *(int *)(heap1 + 600) == -7 && *(int *)(heap1 + 604) == 0, "int AMOs are 4 bytes");
	float *f = (float *)(heap0 + 608);
	roxshmem_float_atomic_set(f, 1.5f, 1);
	CHECK(roxshmem_float_atomic_swap(f, 3.0f, 1) == 1.5f && roxshmem_float_atomic_fetch(f, 1) == 3.0f, "float set/swap/fetch");
	/* misaligned AMO: skipped and recorded */
	uint64_t before = *(uint64_t *)(heap1 + 520);
	roxshmem_uint64_atomic_add((uint64_t *)(heap0 + 521), 1, 1);
	CHECK(*(uint64_t *)(heap1 + 520) == before && (abortb.first >> 48 & 0xff) == ROXSHMEM_CALL_BAD_ADDR, "misaligned AMO recorded");
}

static void test_bad_input(void)
{
	reset(0);
	roxshmem_putmem(heap0, src, 8, 2);
	CHECK(abortb.first == ROXSHMEM_ABORT_RECORD(ROXSHMEM_CALL_BAD_PE, 2, 2) && abortb.count == 1, "bad PE: %llx", (unsigned long long)abortb.first);
	reset(0);
	roxshmem_putmem(heap0 + HEAP - 4, src, 8, 1);
	CHECK((abortb.first >> 48 & 0xff) == ROXSHMEM_CALL_BAD_ADDR, "put past the heap end");
	CHECK(heap1[HEAP - 4] == 0, "a rejected put wrote");
	reset(0);
	roxshmem_getmem(src, src + 8, 8, 1);
	CHECK((abortb.first >> 48 & 0xff) == ROXSHMEM_CALL_BAD_ADDR, "get from outside the heap");
}

static void test_ring(void)
{
	reset(1);
	roxshmem_putmem_nbi(heap0 + 40, src + 1, 333, 1);
	roxshmem_desc_t *d = desc(0);
	CHECK(d->seq == 1 && d->op == ROXSHMEM_OP_PUT && d->pe == 1 && d->size == 333 &&
		      d->src == (uint64_t)(uintptr_t)(src + 1) && d->dst == 40,
	      "put descriptor: seq %llu op %u pe %u size %llu dst %llu", (unsigned long long)d->seq, d->op, d->pe,
	      (unsigned long long)d->size, (unsigned long long)d->dst);
	CHECK(heap1[40] == 0, "a NIC put stored directly");
	roxshmem_uint64_p((uint64_t *)(heap0 + 64), 77, 1);
	d = desc(1);
	CHECK(d->seq == 2 && d->op == ROXSHMEM_OP_AMO && d->value == 77 && d->dst == 64 &&
		      d->flags == ROXSHMEM_DESC_FLAGS(ROXSHMEM_AMO_SET, 8),
	      "8-byte p through the NIC is an AMO set");
	roxshmem_putmem_signal_nbi(heap0 + 128, src, 16, (uint64_t *)(heap0 + 256), 5, ROXSHMEM_SIGNAL_ADD, 1);
	d = desc(2);
	CHECK(d->seq == 3 && d->op == ROXSHMEM_OP_PUT_SIGNAL && d->dst == 128 && d->aux == 256 && d->value == 5 &&
		      d->flags == ROXSHMEM_DESC_FLAGS(ROXSHMEM_SIGNAL_ADD, 8),
	      "put_signal descriptor");
	roxshmem_int_atomic_add((int *)(heap0 + 300), 9, 1);
	d = desc(3);
	CHECK(d->seq == 4 && d->op == ROXSHMEM_OP_AMO && d->size == 4 && d->src == 0 &&
		      d->flags == ROXSHMEM_DESC_FLAGS(ROXSHMEM_AMO_FETCH_ADD, 4),
	      "non-fetching AMO descriptor (no result address)");
	roxshmem_getmem_nbi(src + 100, heap0 + 8, 24, 1);
	d = desc(4);
	CHECK(d->seq == 5 && d->op == ROXSHMEM_OP_GET && d->src == (uint64_t)(uintptr_t)(src + 100) && d->dst == 8, "get descriptor");
	roxshmem_state_t *st = &roxshmem_state;
	roxshmem_ring_header_t *h = (roxshmem_ring_header_t *)ringmem;
	CHECK(h->head == 5, "head %llu after 5 pushes", (unsigned long long)h->head);

	/* a copy-engine put to a mapped peer also goes through the ring */
	st->peer_base[1] = (uint64_t)(uintptr_t)heap1;
	roxshmemx_putmem_ce_nbi(heap0 + 1024, src, 4096, 1);
	d = desc(5);
	CHECK(d->seq == 6 && d->op == ROXSHMEM_OP_PUT && d->dst == 1024 && d->size == 4096 && heap1[1024] == 0, "putmem_ce");
	st->ce_threshold = 100;
	roxshmem_putmem_nbi(heap0 + 2048, src, 99, 1);
	CHECK(h->head == 6 && __builtin_memcmp(heap1 + 2048, src, 99) == 0, "below the threshold: load/store");
	roxshmem_putmem_nbi(heap0 + 2048, src, 100, 1);
	CHECK(h->head == 7, "at the threshold: copy engine");
	roxshmem_uint64_atomic_add((uint64_t *)(heap0 + 64), 1, 1);
	CHECK(h->head == 7, "AMOs to a mapped peer never take the ring");

	/* quiet with everything completed returns; completion word mirror is honoured */
	h->completed = 7;
	roxshmem_quiet();
	CHECK(abortb.first == 0, "quiet with all completed recorded %llx", (unsigned long long)abortb.first);
	uint64_t mirror = 6;
	st->completion = (uint64_t)(uintptr_t)&mirror;
	/* the ring is full (head 7, tail 0, capacity 8 -> one slot left): fill it, then the next push
	 * must wait for space and give up when the abort word is set */
	st->peer_base[1] = 0;
	roxshmem_putmem_nbi(heap0, src, 8, 1);
	CHECK(h->head == 8, "eighth descriptor");
	abortb.word = 0x33;
	roxshmem_putmem_nbi(heap0, src, 8, 1);
	CHECK(abortb.first == ROXSHMEM_ABORT_RECORD(ROXSHMEM_CALL_RING, 1, ROXSHMEM_DETAIL_ABORT_WORD | 0x33),
	      "full ring gave up with %llx", (unsigned long long)abortb.first);
	CHECK(desc(8)->seq == 1, "an abandoned ticket overwrote slot 0");
	/* quiet waits on the mirror (6 < head): aborts, records quiet */
	abortb.first = 0;
	roxshmem_quiet();
	CHECK((abortb.first >> 48 & 0xff) == ROXSHMEM_CALL_QUIET, "quiet aborted: %llx", (unsigned long long)abortb.first);
	abortb.word = 0;
	abortb.first = 0;
	h->error = 2;
	roxshmem_quiet();
	CHECK(abortb.first == ROXSHMEM_ABORT_RECORD(ROXSHMEM_CALL_QUIET, 0xffff, ROXSHMEM_DETAIL_RING_ERROR | 2),
	      "quiet on a failed ring: %llx", (unsigned long long)abortb.first);
}

static void test_waits(void)
{
	reset(0);
	uint64_t *flag = (uint64_t *)(heap0 + 8);
	*flag = 5;
	roxshmem_uint64_wait_until(flag, ROXSHMEM_CMP_GE, 5);
	CHECK(abortb.first == 0, "satisfied wait recorded");
	CHECK(roxshmem_int64_test((int64_t *)flag, ROXSHMEM_CMP_GT, 4) == 1 && roxshmem_int64_test((int64_t *)flag, ROXSHMEM_CMP_LT, 5) == 0, "test");
	int *neg = (int *)(heap0 + 16);
	*neg = -1;
	CHECK(roxshmem_int_test(neg, ROXSHMEM_CMP_LT, 0) == 1 && roxshmem_uint_test((unsigned *)neg, ROXSHMEM_CMP_GT, 0) == 1, "signed and unsigned compares");
	abortb.word = 9;
	roxshmem_uint64_wait_until(flag, ROXSHMEM_CMP_EQ, 6);
	CHECK(abortb.first == ROXSHMEM_ABORT_RECORD(ROXSHMEM_CALL_WAIT_UNTIL, 0, ROXSHMEM_DETAIL_ABORT_WORD | 9) && abortb.count == 1,
	      "aborted wait_until: %llx", (unsigned long long)abortb.first);
	CHECK(roxshmem_signal_wait_until(flag, ROXSHMEM_CMP_EQ, 6) == 5 && abortb.count == 2, "aborted signal_wait_until");
	CHECK(roxshmemx_aborted() == 9, "roxshmemx_aborted");
	/* one-PE barrier: announces nothing, waits for nothing */
	reset(0);
	roxshmem_state.n_pes = 1;
	roxshmemx_barrier_all_block();
	CHECK(*(uint64_t *)(heap0 + roxshmem_state.barrier_off) == 1 && abortb.first == 0, "barrier round");
	/* two PEs, the peer already announced round 1: the barrier passes and announces to it */
	reset(0);
	*(uint64_t *)(heap0 + roxshmem_state.barrier_off + ROXSHMEM_BARRIER_ARRIVE + 8) = 1;
	roxshmemx_barrier_all_block();
	CHECK(*(uint64_t *)(heap1 + roxshmem_state.barrier_off + ROXSHMEM_BARRIER_ARRIVE) == 1, "barrier announced to PE 1");
	/* the peer has not: the wait aborts */
	abortb.word = 1;
	roxshmemx_barrier_all_block();
	CHECK((abortb.first >> 48 & 0xff) == ROXSHMEM_CALL_BARRIER && (abortb.first >> 32 & 0xffff) == 1, "barrier waiting for PE 1 aborted: %llx", (unsigned long long)abortb.first);
}

/* Device contexts: a pool of NCTX rings in the context table. The consumer here is the test: it
 * completes what it chooses, so "B's descriptor held by a blocked route" is a ticket of ring B
 * that is never completed. */
enum { NCTX = 2 };
alignas(64) static uint8_t ctxring[NCTX][256 + 64 * CAP];
alignas(64) static uint64_t ctxresults[NCTX][CAP];
alignas(64) static roxshmem_ctx_table_t ctxtab;

static void reset_ctx(void)
{
	reset(1);
	__builtin_memset(&ctxtab, 0, sizeof ctxtab);
	__builtin_memset(ctxring, 0, sizeof ctxring);
	ctxtab.magic = ROXSHMEM_CTX_MAGIC;
	ctxtab.n_ctxs = NCTX;
	for (int i = 0; i < NCTX; i++) {
		ctxtab.ctx[i].ring = (uint64_t)(uintptr_t)ctxring[i];
		ctxtab.ctx[i].results = (uint64_t)(uintptr_t)ctxresults[i];
		ctxtab.ctx[i].capacity = CAP;
	}
	roxshmem_state.ctxs = (uint64_t)(uintptr_t)&ctxtab;
}

static roxshmem_ring_header_t *ctxhdr(roxshmem_ctx_t c) { return (roxshmem_ring_header_t *)ctxring[c - 1]; }
static roxshmem_desc_t *ctxdesc(roxshmem_ctx_t c, uint64_t t) { return (roxshmem_desc_t *)(ctxring[c - 1] + 256) + (t & (CAP - 1)); }

static void test_ctx(void)
{
	reset_ctx();
	roxshmem_ctx_t a = ROXSHMEM_CTX_INVALID, b = ROXSHMEM_CTX_INVALID, c = 7;
	CHECK(roxshmem_ctx_create(0, &a) == 0 && a == 1, "create A: %d", a);
	CHECK(roxshmem_ctx_create(ROXSHMEM_CTX_PRIVATE, &b) == 0 && b == 2, "create B: %d", b);
	/* beyond the pool: an error code and an invalid handle, nothing recorded */
	CHECK(roxshmem_ctx_create(0, &c) != 0 && c == ROXSHMEM_CTX_INVALID, "create beyond the pool of %d: handle %d", NCTX, c);
	CHECK(abortb.first == 0, "a failed create recorded %llx", (unsigned long long)abortb.first);

	/* each context's puts go to its own ring; the default ring stays empty */
	roxshmem_ctx_putmem_nbi(b, heap0 + 64, src, 32, 1);
	roxshmem_ctx_putmem_nbi(a, heap0 + 128, src + 8, 16, 1);
	roxshmem_ctx_getmem_nbi(a, src + 200, heap0 + 256, 8, 1);
	roxshmem_desc_t *d = ctxdesc(b, 0);
	CHECK(d->seq == 1 && d->op == ROXSHMEM_OP_PUT && d->pe == 1 && d->size == 32 && d->dst == 64, "B's put descriptor");
	d = ctxdesc(a, 0);
	CHECK(d->seq == 1 && d->op == ROXSHMEM_OP_PUT && d->size == 16 && d->dst == 128 && d->src == (uint64_t)(uintptr_t)(src + 8),
	      "A's put descriptor");
	d = ctxdesc(a, 1);
	CHECK(d->seq == 2 && d->op == ROXSHMEM_OP_GET && d->dst == 256 && d->src == (uint64_t)(uintptr_t)(src + 200), "A's get descriptor");
	CHECK(ctxhdr(a)->head == 2 && ctxhdr(b)->head == 1 && ((roxshmem_ring_header_t *)ringmem)->head == 0,
	      "heads: A %llu, B %llu, default %llu", (unsigned long long)ctxhdr(a)->head, (unsigned long long)ctxhdr(b)->head,
	      (unsigned long long)((roxshmem_ring_header_t *)ringmem)->head);

	/* A completed, B's descriptor held: A's quiet returns without waiting (with the abort word
	 * set, a quiet that waited for B would give up and record ROXSHMEM_CALL_QUIET) */
	ctxhdr(a)->completed = 2;
	abortb.word = 0x44;
	roxshmem_ctx_quiet(a);
	roxshmemx_ctx_quiet_block(a);
	roxshmem_ctx_fence(a);
	CHECK(abortb.first == 0, "quiet on A waited for B's held descriptor: %llx", (unsigned long long)abortb.first);
	/* B's quiet waits for B: it gives up on the abort word */
	roxshmem_ctx_quiet(b);
	CHECK(abortb.first == ROXSHMEM_ABORT_RECORD(ROXSHMEM_CALL_QUIET, 0xffff, ROXSHMEM_DETAIL_ABORT_WORD | 0x44),
	      "quiet on B with its descriptor held: %llx", (unsigned long long)abortb.first);
	abortb.word = 0;
	abortb.first = 0;
	/* B's ring failed: its quiet returns, recording B's ring error; A is untouched */
	ctxhdr(b)->error = 3;
	roxshmem_ctx_quiet(b);
	CHECK(abortb.first == ROXSHMEM_ABORT_RECORD(ROXSHMEM_CALL_QUIET, 0xffff, ROXSHMEM_DETAIL_RING_ERROR | 3),
	      "quiet on B's failed ring: %llx", (unsigned long long)abortb.first);
	abortb.first = 0;
	ctxhdr(b)->error = 0;
	ctxhdr(b)->completed = 1;

	/* load/store puts on a context are the plain stores */
	roxshmem_state.peer_base[1] = (uint64_t)(uintptr_t)heap1;
	roxshmem_ctx_putmem(a, heap0 + 512, src + 3, 40, 1);
	roxshmemx_ctx_putmem_block(b, heap0 + 600, src + 5, 24, 1);
	CHECK(__builtin_memcmp(heap1 + 512, src + 3, 40) == 0 && __builtin_memcmp(heap1 + 600, src + 5, 24) == 0 &&
		      ctxhdr(a)->head == 2 && ctxhdr(b)->head == 1,
	      "load/store puts on contexts");
	/* the default context is the plain calls */
	roxshmem_ctx_putmem(ROXSHMEM_CTX_DEFAULT, heap0 + 700, src, 8, 1);
	roxshmem_ctx_quiet(ROXSHMEM_CTX_DEFAULT);
	CHECK(__builtin_memcmp(heap1 + 700, src, 8) == 0 && abortb.first == 0, "default context");
	roxshmem_state.peer_base[1] = 0;

	/* destroy frees the slot for the next create; a destroyed handle used is recorded, skipped */
	roxshmem_ctx_destroy(a);
	CHECK(ctxtab.ctx[0].in_use == 0 && abortb.first == 0, "destroy A");
	roxshmem_ctx_putmem_nbi(a, heap0 + 64, src, 8, 1);
	CHECK(abortb.first == ROXSHMEM_ABORT_RECORD(ROXSHMEM_CALL_BAD_CTX, 0xffff, 1) && ctxhdr(a)->head == 2,
	      "put on a destroyed context: %llx, head %llu", (unsigned long long)abortb.first, (unsigned long long)ctxhdr(a)->head);
	abortb.first = 0;
	roxshmem_ctx_quiet(a);
	CHECK(abortb.first == ROXSHMEM_ABORT_RECORD(ROXSHMEM_CALL_BAD_CTX, 0xffff, 1), "quiet on a destroyed context");
	abortb.first = 0;
	roxshmem_ctx_putmem_nbi(9, heap0, src, 8, 1);
	CHECK(abortb.first == ROXSHMEM_ABORT_RECORD(ROXSHMEM_CALL_BAD_CTX, 0xffff, 9), "put on a handle never created");
	abortb.first = 0;
	CHECK(roxshmem_ctx_create(0, &c) == 0 && c == 1, "create after destroy reuses the slot: %d", c);
	/* no context table: create fails cleanly */
	roxshmem_state.ctxs = 0;
	CHECK(roxshmem_ctx_create(0, &c) != 0 && c == ROXSHMEM_CTX_INVALID && abortb.first == 0, "create without a table");
}

/* The consumer of the rings in test_ctx_ops: it executes published descriptors against PE 1's
 * heap (heap1) as the proxy does (nic/proxy.go: put, get, put-with-signal, AMOs with the old value
 * to the descriptor's src) and advances tail and completed. serve runs in the test's thread, so
 * that what stays held is the test's choice; the server thread serves the rings in served (bit 0:
 * the default ring, bit i: context i), so that blocking calls on them return. */
static void execute(const roxshmem_desc_t *d)
{
	uint8_t *at = heap1 + d->dst;
	uint32_t kind = d->flags & 0xff, width = (d->flags >> 8) & 0xff;
	switch (d->op) {
	case ROXSHMEM_OP_PUT: __builtin_memcpy(at, (const void *)(uintptr_t)d->src, d->size); break;
	case ROXSHMEM_OP_GET: __builtin_memcpy((void *)(uintptr_t)d->src, at, d->size); break;
	case ROXSHMEM_OP_PUT_SIGNAL: {
		__builtin_memcpy(at, (const void *)(uintptr_t)d->src, d->size);
		uint64_t *s = (uint64_t *)(heap1 + d->aux);
		*s = kind == ROXSHMEM_SIGNAL_ADD ? *s + d->value : d->value;
		break;
	}
	case ROXSHMEM_OP_AMO: {
		uint64_t old = 0, v = d->value, mask = width == 8 ? ~0ull : 0xffffffffull, nv;
		__builtin_memcpy(&old, at, width);
		switch (kind) {
		case ROXSHMEM_AMO_SET: case ROXSHMEM_AMO_SWAP: nv = v; break;
		case ROXSHMEM_AMO_COMPARE_SWAP: nv = old == (d->aux & mask) ? v : old; break;
		case ROXSHMEM_AMO_FETCH_ADD: nv = old + v; break;
		case ROXSHMEM_AMO_FETCH_AND: nv = old & v; break;
		case ROXSHMEM_AMO_FETCH_OR: nv = old | v; break;
		case ROXSHMEM_AMO_FETCH_XOR: nv = old ^ v; break;
		default: nv = old; break;
		}
		__builtin_memcpy(at, &nv, width);
		if (d->src != 0)
			__builtin_memcpy((void *)(uintptr_t)d->src, &old, 8);
		break;
	}
	default: break;
	}
}

static uint8_t *ring_of(int i) { return i == 0 ? ringmem : ctxring[i - 1]; }

/* Executes what ring i (0: the default ring, else context i) has published; returns how many. */
static int serve(int i)
{
	roxshmem_ring_header_t *h = (roxshmem_ring_header_t *)ring_of(i);
	uint64_t t = __atomic_load_n(&h->completed, __ATOMIC_ACQUIRE), n = 0;
	for (;;) {
		roxshmem_desc_t *d = (roxshmem_desc_t *)(ring_of(i) + 256) + (t & (CAP - 1));
		if (__atomic_load_n(&d->seq, __ATOMIC_ACQUIRE) != t + 1)
			break;
		execute(d);
		t++, n++;
		__atomic_store_n(&h->tail, t, __ATOMIC_RELEASE);
		__atomic_store_n(&h->completed, t, __ATOMIC_RELEASE);
	}
	return (int)n;
}

static uint32_t served, stop_server;
static void *server(void *)
{
	while (!__atomic_load_n(&stop_server, __ATOMIC_ACQUIRE)) {
		uint32_t m = __atomic_load_n(&served, __ATOMIC_ACQUIRE);
		for (int i = 0; i <= NCTX; i++)
			if (m & (1u << i))
				serve(i);
		sched_yield();
	}
	return 0;
}

static uint64_t head_of(int i) { return __atomic_load_n(&((roxshmem_ring_header_t *)ring_of(i))->head, __ATOMIC_ACQUIRE); }

/* The context forms of the AMOs, p/g, typed and sized put/get and put-with-signal: through the
 * ring each takes its context's ring only and gives the default context's results; a quiet on one
 * context completes its own AMOs and put-with-signals while another's stay held; on load/store
 * peers they are the plain stores and AMOs; a dead handle is recorded and skipped. */
static void test_ctx_ops(void)
{
	reset_ctx();
	roxshmem_ctx_t a = ROXSHMEM_CTX_INVALID, b = ROXSHMEM_CTX_INVALID;
	CHECK(roxshmem_ctx_create(0, &a) == 0 && roxshmem_ctx_create(ROXSHMEM_CTX_NOSTORE, &b) == 0, "create A and B");
	pthread_t th;
	__atomic_store_n(&stop_server, 0, __ATOMIC_RELEASE);
	__atomic_store_n(&served, 1u << a, __ATOMIC_RELEASE);
	CHECK(pthread_create(&th, 0, server, 0) == 0, "server thread");

	/* AMOs on A through the NIC: every op, 8- and 4-byte, fetch and non-fetch */
	uint64_t *u = (uint64_t *)(heap0 + 1024);
	uint64_t *U = (uint64_t *)(heap1 + 1024);
	*U = 10;
	CHECK(roxshmem_ctx_uint64_atomic_fetch_add(a, u, 5, 1) == 10 && *U == 15, "ctx fetch_add: %llu", (unsigned long long)*U);
	CHECK(roxshmem_ctx_uint64_atomic_fetch_inc(a, u, 1) == 15, "ctx fetch_inc");
	roxshmem_ctx_uint64_atomic_add(a, u, 4, 1);
	roxshmem_ctx_uint64_atomic_inc(a, u, 1);
	CHECK(roxshmem_ctx_uint64_atomic_fetch(a, u, 1) == 21, "ctx add/inc then fetch: %llu", (unsigned long long)*U);
	CHECK(roxshmem_ctx_uint64_atomic_compare_swap(a, u, 21, 0xff, 1) == 21 && *U == 0xff, "ctx cswap hit");
	CHECK(roxshmem_ctx_uint64_atomic_compare_swap(a, u, 21, 1, 1) == 0xff && *U == 0xff, "ctx cswap miss");
	CHECK(roxshmem_ctx_uint64_atomic_swap(a, u, 0xf0f0, 1) == 0xff, "ctx swap");
	CHECK(roxshmem_ctx_uint64_atomic_fetch_and(a, u, 0xff00, 1) == 0xf0f0, "ctx fetch_and");
	CHECK(roxshmem_ctx_uint64_atomic_fetch_or(a, u, 0x3, 1) == 0xf000, "ctx fetch_or");
	CHECK(roxshmem_ctx_uint64_atomic_fetch_xor(a, u, 0x1001, 1) == 0xf003, "ctx fetch_xor");
	roxshmem_ctx_uint64_atomic_and(a, u, 0xe00f, 1);
	roxshmem_ctx_uint64_atomic_or(a, u, 0x100, 1);
	roxshmem_ctx_uint64_atomic_xor(a, u, 0x3, 1);
	roxshmem_ctx_uint64_atomic_set(a, u + 1, 77, 1);
	roxshmem_ctx_quiet(a);
	CHECK(*U == (((0xe002ull & 0xe00f) | 0x100) ^ 0x3) && U[1] == 77, "ctx and/or/xor/set: %llx %llu", (unsigned long long)*U,
	      (unsigned long long)U[1]);
	int *i32 = (int *)(heap0 + 1100);
	*(int *)(heap1 + 1100) = -3;
	*(int *)(heap1 + 1104) = 0x5a5a;
	CHECK(roxshmem_ctx_int_atomic_fetch_add(a, i32, -4, 1) == -3 && *(int *)(heap1 + 1100) == -7 && *(int *)(heap1 + 1104) == 0x5a5a,
	      "ctx int AMOs are 4 bytes");
	CHECK(roxshmem_ctx_uint_atomic_compare_swap(a, (unsigned *)i32, (unsigned)-7, 9u, 1) == (unsigned)-7 && *(int *)(heap1 + 1100) == 9,
	      "ctx uint cswap");
	long long *ll = (long long *)(heap0 + 1112);
	roxshmem_ctx_longlong_atomic_set(a, ll, -5, 1);
	CHECK(roxshmem_ctx_longlong_atomic_fetch(a, ll, 1) == -5, "ctx longlong set/fetch");
	float *f = (float *)(heap0 + 1120);
	roxshmem_ctx_float_atomic_set(a, f, 1.5f, 1);
	CHECK(roxshmem_ctx_float_atomic_swap(a, f, 3.0f, 1) == 1.5f && roxshmem_ctx_float_atomic_fetch(a, f, 1) == 3.0f, "ctx float set/swap/fetch");
	double *df = (double *)(heap0 + 1128);
	roxshmem_ctx_double_atomic_set(a, df, -2.25, 1);
	CHECK(roxshmem_ctx_double_atomic_swap(a, df, 8.0, 1) == -2.25 && roxshmem_ctx_double_atomic_fetch(a, df, 1) == 8.0, "ctx double set/swap/fetch");

	/* p/g on A: 8 bytes (an AMO set), 2 and 1 bytes (compare-and-swap on the word), double */
	long *l = (long *)(heap0 + 1200);
	roxshmem_ctx_long_p(a, l, -12345, 1);
	CHECK(roxshmem_ctx_long_g(a, l, 1) == -12345 && *(long *)(heap1 + 1200) == -12345, "ctx long p/g");
	*(uint32_t *)(heap1 + 1208) = 0x11223344;
	roxshmem_ctx_short_p(a, (short *)(heap0 + 1210), -7, 1);
	roxshmem_ctx_uchar_p(a, heap0 + 1208, 0xab, 1);
	CHECK(roxshmem_ctx_short_g(a, (short *)(heap0 + 1210), 1) == -7 && *(uint32_t *)(heap1 + 1208) == 0xfff933ab,
	      "ctx short/uchar p/g keep the word's other bytes: %x", *(uint32_t *)(heap1 + 1208));
	roxshmem_ctx_double_p(a, (double *)(heap0 + 1216), 2.5, 1);
	CHECK(roxshmem_ctx_double_g(a, (double *)(heap0 + 1216), 1) == 2.5, "ctx double p/g");

	/* typed and sized put/get on A, blocking and not, thread and group forms */
	roxshmem_ctx_int_put(a, (int *)(heap0 + 2048), (const int *)src, 5, 1);
	CHECK(__builtin_memcmp(heap1 + 2048, src, 20) == 0, "ctx int put");
	static uint8_t back[256];
	roxshmem_ctx_int_get(a, (int *)back, (const int *)(heap0 + 2048), 5, 1);
	CHECK(__builtin_memcmp(back, src, 20) == 0, "ctx int get");
	roxshmem_ctx_put64_nbi(a, heap0 + 2112, src + 24, 3, 1);
	roxshmemx_ctx_double_put_block(a, (double *)(heap0 + 2176), (const double *)(src + 64), 2, 1);
	roxshmemx_ctx_putmem_nbi_warp(a, heap0 + 2200, src + 90, 7, 1);
	roxshmem_ctx_quiet(a);
	CHECK(__builtin_memcmp(heap1 + 2112, src + 24, 24) == 0 && __builtin_memcmp(heap1 + 2176, src + 64, 16) == 0 &&
		      __builtin_memcmp(heap1 + 2200, src + 90, 7) == 0,
	      "ctx put64_nbi, double_put_block, putmem_nbi_warp");
	roxshmem_ctx_get32_nbi(a, back + 32, heap0 + 2112, 2, 1);
	roxshmemx_ctx_getmem_nbi_block(a, back + 64, heap0 + 2200, 7, 1);
	roxshmem_ctx_quiet(a);
	CHECK(__builtin_memcmp(back + 32, src + 24, 8) == 0 && __builtin_memcmp(back + 64, src + 90, 7) == 0, "ctx get32_nbi, getmem_nbi_block");

	/* put-with-signal on A: blocking SET, nbi ADD, block form */
	uint64_t *sig = (uint64_t *)(heap0 + 3000);
	uint64_t *SIG = (uint64_t *)(heap1 + 3000);
	roxshmem_ctx_putmem_signal(a, heap0 + 3100, src + 5, 40, sig, 7, ROXSHMEM_SIGNAL_SET, 1);
	CHECK(__builtin_memcmp(heap1 + 3100, src + 5, 40) == 0 && *SIG == 7, "ctx putmem_signal SET");
	roxshmem_ctx_putmem_signal_nbi(a, heap0 + 3200, src + 6, 16, sig, 3, ROXSHMEM_SIGNAL_ADD, 1);
	roxshmemx_ctx_putmem_signal_nbi_block(a, heap0 + 3300, src + 7, 16, sig, 2, ROXSHMEM_SIGNAL_ADD, 1);
	roxshmem_ctx_quiet(a);
	CHECK(__builtin_memcmp(heap1 + 3200, src + 6, 16) == 0 && __builtin_memcmp(heap1 + 3300, src + 7, 16) == 0 && *SIG == 12,
	      "ctx putmem_signal_nbi ADD and the block form: signal %llu", (unsigned long long)*SIG);
	CHECK(head_of(0) == 0 && head_of(b) == 0 && abortb.first == 0, "A's calls took another ring (default head %llu, B head %llu) or recorded %llx",
	      (unsigned long long)head_of(0), (unsigned long long)head_of(b), (unsigned long long)abortb.first);
	uint64_t a_head = head_of(a);

	/* the server stops: B's non-fetching AMOs and put-with-signal stay held; A's are served by
	 * this thread; A's quiet returns (with the abort word set, a quiet that waited for B would give
	 * up and record), and only A's effects are there */
	__atomic_store_n(&served, 0, __ATOMIC_RELEASE);
	*(uint64_t *)(heap1 + 4000) = 100;
	*(uint64_t *)(heap1 + 4008) = 200;
	roxshmem_ctx_uint64_atomic_add(b, (uint64_t *)(heap0 + 4000), 1, 1);
	roxshmem_ctx_putmem_signal_nbi(b, heap0 + 4100, src + 11, 8, (uint64_t *)(heap0 + 4016), 1, ROXSHMEM_SIGNAL_SET, 1);
	roxshmem_ctx_long_p(b, (long *)(heap0 + 4024), 5, 1);
	roxshmem_ctx_uint64_atomic_add(a, (uint64_t *)(heap0 + 4008), 1, 1);
	roxshmem_ctx_putmem_signal_nbi(a, heap0 + 4200, src + 12, 8, (uint64_t *)(heap0 + 4032), 1, ROXSHMEM_SIGNAL_SET, 1);
	roxshmem_ctx_int_p(a, (int *)(heap0 + 4040), 6, 1);
	CHECK(head_of(b) == 3 && head_of(a) == a_head + 3 && head_of(0) == 0, "held: B head %llu, A head %llu", (unsigned long long)head_of(b),
	      (unsigned long long)head_of(a));
	abortb.word = 0x55;
	serve(a);
	roxshmem_ctx_quiet(a);
	roxshmemx_ctx_quiet_warp(a);
	CHECK(abortb.first == 0, "quiet on A waited for B's held AMOs: %llx", (unsigned long long)abortb.first);
	CHECK(*(uint64_t *)(heap1 + 4008) == 201 && *(uint64_t *)(heap1 + 4032) == 1 && __builtin_memcmp(heap1 + 4200, src + 12, 8) == 0 &&
		      *(int *)(heap1 + 4040) == 6,
	      "A's AMO, put-with-signal and p complete after A's quiet");
	CHECK(*(uint64_t *)(heap1 + 4000) == 100 && *(uint64_t *)(heap1 + 4016) == 0 && *(uint64_t *)(heap1 + 4024) == 0 && heap1[4100] == 0,
	      "B's held operations took effect");
	roxshmem_ctx_quiet(b);
	CHECK(abortb.first == ROXSHMEM_ABORT_RECORD(ROXSHMEM_CALL_QUIET, 0xffff, ROXSHMEM_DETAIL_ABORT_WORD | 0x55),
	      "quiet on B with its AMOs held: %llx", (unsigned long long)abortb.first);
	abortb.word = 0;
	abortb.first = 0;
	abortb.count = 0;
	serve(b);
	roxshmem_ctx_quiet(b);
	CHECK(abortb.first == 0 && *(uint64_t *)(heap1 + 4000) == 101 && *(uint64_t *)(heap1 + 4016) == 1 && *(long *)(heap1 + 4024) == 5 &&
		      __builtin_memcmp(heap1 + 4100, src + 11, 8) == 0,
	      "B's operations after B is served: %llx", (unsigned long long)abortb.first);

	/* the default context through the ctx forms: the default ring */
	__atomic_store_n(&served, 1u, __ATOMIC_RELEASE);
	*(uint64_t *)(heap1 + 4400) = 40;
	CHECK(roxshmem_ctx_uint64_atomic_fetch_add(ROXSHMEM_CTX_DEFAULT, (uint64_t *)(heap0 + 4400), 2, 1) == 40 && head_of(0) == 1,
	      "ctx fetch_add on the default context: default head %llu", (unsigned long long)head_of(0));
	__atomic_store_n(&stop_server, 1, __ATOMIC_RELEASE);
	pthread_join(th, 0);

	/* load/store peers: the plain stores and AMOs, no ring */
	roxshmem_state.peer_base[1] = (uint64_t)(uintptr_t)heap1;
	uint64_t ha = head_of(a);
	*(uint64_t *)(heap1 + 4504) = 1;
	uint64_t got = roxshmem_ctx_uint64_atomic_fetch_add(a, (uint64_t *)(heap0 + 4504), 2, 1);
	CHECK(got == 1, "ctx fetch_add to a load/store peer: %llu, recorded %llx", (unsigned long long)got, (unsigned long long)abortb.first);
	roxshmem_ctx_int_atomic_inc(b, (int *)(heap0 + 4512), 1);
	roxshmem_ctx_short_p(a, (short *)(heap0 + 4516), 99, 1);
	roxshmemx_ctx_putmem_signal_block(b, heap0 + 4600, src + 1, 33, (uint64_t *)(heap0 + 4520), 4, ROXSHMEM_SIGNAL_ADD, 1);
	CHECK(*(uint64_t *)(heap1 + 4504) == 3 && *(int *)(heap1 + 4512) == 1 && roxshmem_ctx_short_g(b, (short *)(heap0 + 4516), 1) == 99 &&
		      __builtin_memcmp(heap1 + 4600, src + 1, 33) == 0 && *(uint64_t *)(heap1 + 4520) == 4 && head_of(a) == ha && head_of(b) == 3,
	      "load/store context forms");
	/* a copy-engine put on a context to a mapped peer: the context's ring, not the default's */
	roxshmemx_ctx_putmem_ce_nbi(a, heap0 + 4800, src + 2, 100, 1);
	CHECK(head_of(a) == ha + 1 && head_of(0) == 1 && heap1[4800] == 0, "ctx putmem_ce: A head %llu, default head %llu",
	      (unsigned long long)head_of(a), (unsigned long long)head_of(0));
	serve(a);
	roxshmem_ctx_quiet(a);
	CHECK(__builtin_memcmp(heap1 + 4800, src + 2, 100) == 0 && abortb.first == 0, "ctx putmem_ce delivered");
	roxshmem_state.peer_base[1] = 0;

	/* ring fence markers (ROXSHMEM_FLAG_RING_FENCE): a fence on a context with operations
	 * outstanding publishes a fence descriptor on its own ring; on an idle one, nothing */
	roxshmem_state.flags |= ROXSHMEM_FLAG_RING_FENCE;
	roxshmem_ctx_uint64_atomic_add(b, (uint64_t *)(heap0 + 4000), 1, 1);
	uint64_t hb = head_of(b), ha2 = head_of(a);
	roxshmem_ctx_fence(b);
	roxshmem_ctx_fence(a);
	CHECK(head_of(b) == hb + 1 && ((roxshmem_desc_t *)(ctxring[b - 1] + 256) + (hb & (CAP - 1)))->op == ROXSHMEM_OP_FENCE &&
		      head_of(a) == ha2 && head_of(0) == 1,
	      "ctx fence markers: B head %llu (want %llu), A head %llu (want %llu)", (unsigned long long)head_of(b),
	      (unsigned long long)hb + 1, (unsigned long long)head_of(a), (unsigned long long)ha2);
	serve(b);
	roxshmem_ctx_quiet(b);
	CHECK(*(uint64_t *)(heap1 + 4000) == 102 && abortb.first == 0, "B's AMO before its fence marker");
	roxshmem_state.flags &= ~ROXSHMEM_FLAG_RING_FENCE;

	/* a dead handle: recorded, skipped, returns 0 */
	roxshmem_ctx_destroy(b);
	abortb.first = 0;
	*(uint64_t *)(heap1 + 4700) = 9;
	uint64_t hdead = head_of(b);
	CHECK(roxshmem_ctx_uint64_atomic_fetch_add(b, (uint64_t *)(heap0 + 4700), 1, 1) == 0 && *(uint64_t *)(heap1 + 4700) == 9 &&
		      head_of(b) == hdead && abortb.first == ROXSHMEM_ABORT_RECORD(ROXSHMEM_CALL_BAD_CTX, 0xffff, (uint32_t)b),
	      "fetch_add on a destroyed context: %llx", (unsigned long long)abortb.first);
	abortb.first = 0;
	CHECK(roxshmem_ctx_long_g(b, l, 1) == 0 && abortb.first == ROXSHMEM_ABORT_RECORD(ROXSHMEM_CALL_BAD_CTX, 0xffff, (uint32_t)b),
	      "g on a destroyed context");
	abortb.first = 0;
	roxshmem_ctx_putmem_signal(5, heap0, src, 8, sig, 1, ROXSHMEM_SIGNAL_SET, 1);
	CHECK(head_of(0) == 1 && abortb.first == ROXSHMEM_ABORT_RECORD(ROXSHMEM_CALL_BAD_CTX, 0xffff, 5), "put-with-signal on a handle never created");
	abortb.first = 0;
}

/* A call that waits for the wrong ring would wait forever: after a minute the guard sets the
 * abort word (again every second, since the tests reset it), so that every wait gives up and the
 * checks after it say what did not arrive. */
/* ROXSHMEM_FLAG_HOST_AMO: this PE's heap is host memory whose remote AMOs the CPU applies, so its
 * own AMOs and put-with-signal adds to itself go through the ring too (the device's atomics there
 * are not atomic with the CPU's), while its plain puts, signal sets, p and loads stay direct. */
static void test_host_amo(void)
{
	reset(1);
	roxshmem_state.flags |= ROXSHMEM_FLAG_HOST_AMO;
	uint64_t *u = (uint64_t *)(heap0 + 512);
	roxshmem_uint64_atomic_add(u, 3, 0);
	roxshmem_desc_t *d = desc(0);
	CHECK(d->seq == 1 && d->op == ROXSHMEM_OP_AMO && d->pe == 0 && d->dst == 512 && d->value == 3 && d->src == 0 &&
		      d->flags == ROXSHMEM_DESC_FLAGS(ROXSHMEM_AMO_FETCH_ADD, 8) && *u == 0,
	      "an AMO to self with host AMOs is a ring descriptor: seq %llu op %u pe %u", (unsigned long long)d->seq, d->op, d->pe);
	roxshmem_putmem_signal_nbi(heap0 + 128, src, 16, (uint64_t *)(heap0 + 256), 5, ROXSHMEM_SIGNAL_ADD, 0);
	d = desc(1);
	CHECK(d->seq == 2 && d->op == ROXSHMEM_OP_PUT_SIGNAL && d->pe == 0 && d->dst == 128 && d->size == 16 && d->aux == 256 &&
		      d->value == 5 && d->flags == ROXSHMEM_DESC_FLAGS(ROXSHMEM_SIGNAL_ADD, 8) && heap0[128] == 0 &&
		      *(uint64_t *)(heap0 + 256) == 0,
	      "a put-with-signal adding to self is a ring descriptor (data and add applied by the proxy)");
	roxshmem_putmem_signal_nbi(heap0 + 160, src, 8, (uint64_t *)(heap0 + 264), 7, ROXSHMEM_SIGNAL_SET, 0);
	CHECK(*(uint64_t *)(heap0 + 264) == 7 && ((roxshmem_ring_header_t *)ringmem)->head == 2, "a signal set to self stays a store");
	roxshmem_uint64_p((uint64_t *)(heap0 + 64), 77, 0);
	CHECK(*(uint64_t *)(heap0 + 64) == 77 && ((roxshmem_ring_header_t *)ringmem)->head == 2, "p to self stays a store");
	/* without the flag the same AMO is a local atomic */
	reset(1);
	roxshmem_uint64_atomic_add(u, 3, 0);
	CHECK(*u == 3 && ((roxshmem_ring_header_t *)ringmem)->head == 0, "without host AMOs an AMO to self is local");
}

static volatile sig_atomic_t guard_fired;
static void guard(int)
{
	guard_fired = 1;
	__atomic_store_n(&abortb.word, 0xdead, __ATOMIC_RELAXED);
	alarm(1);
}

int main(void)
{
	signal(SIGALRM, guard);
	alarm(60);
	test_ctx();
	test_ctx_ops();
	test_copy();
	test_put_get_ls();
	test_put_ls16();
	test_amo_ls();
	test_bad_input();
	test_ring();
	test_host_amo();
	test_waits();
	alarm(0);
	CHECK(!guard_fired, "a call waited for a minute: the guard set the abort word");
	printf("done %d %d\n", checks, failures);
	return failures != 0;
}
