/* The device -> host command ring: layout (plain C) and, in device passes, the producer.
 * Layout fixed with nic/ring.go (nic.Desc, nic.Ring*Offset); TestRingParity compares them.
 *
 * Header, one 64-byte line per field: [0] head (next ticket; producers fetch_add), [64] tail
 * (consumer-owned; slots before it are free), [128] completed (descriptors completed, advanced by
 * the proxy in ticket order), [192] error (nonzero: the proxy failed) + pad. Descriptors start at
 * byte 256; the slot of ticket t is t & (capacity-1). A descriptor is published by writing its seq
 * (ticket+1) last, with release semantics; the consumer never reads head. */
#ifndef ROXAMEN_RING_H
#define ROXAMEN_RING_H

#include "types.h"

#include "ops.h"

#define ROXSHMEM_DESC_KIND_MASK 0xffu
#define ROXSHMEM_DESC_WIDTH_SHIFT 8
#define ROXSHMEM_DESC_FLAGS(kind, width) (((uint32_t)(kind)&0xffu) | (((uint32_t)(width)&0xffu) << 8))
/* pe of a fence or quiet descriptor that applies to every PE */
#define ROXSHMEM_DESC_ALL_PES 0xffffffffu

typedef struct roxshmem_ring_header {
	uint64_t head;
	uint8_t pad_head[56];
	uint64_t tail;
	uint8_t pad_tail[56];
	uint64_t completed;
	uint8_t pad_completed[56];
	uint32_t error;
	uint32_t pad_error;
	uint8_t pad_end[56];
} roxshmem_ring_header_t;

typedef struct roxshmem_desc {
	uint64_t seq;   /* ticket+1, written last with release semantics */
	uint32_t op;    /* ROXSHMEM_OP_* */
	uint32_t pe;    /* target PE */
	uint64_t size;  /* bytes */
	uint64_t src;   /* local device address: put source, get destination, fetched AMO result */
	uint64_t dst;   /* remote symmetric-heap offset */
	uint64_t value; /* AMO operand / signal value */
	uint64_t aux;   /* AMO compare value / signal heap offset */
	uint32_t flags; /* kind | width << 8 */
	uint32_t pad;
} roxshmem_desc_t;

ROXA_STATIC_ASSERT(sizeof(roxshmem_ring_header_t) == 256, ring_header_size);
ROXA_STATIC_ASSERT(sizeof(roxshmem_desc_t) == 64, desc_size);



/* ---- the producer (device passes) ---------------------------------------------------------- */
#ifdef ROXA_GPU_LANG
#include "state.h"
#include "arch.h"

/* src value that asks roxshmemx_ring_push for the ticket's result slot (ring_results[t & (cap-1)]). */
#define ROXSHMEM_RING_RESULT_SLOT (~0ull)
/* Ordering mode: ROXSHMEM_ORDERING=1 (Strict) or 2 (CacheBypass) fixes it at compile time; the
 * default (0) reads ROXSHMEM_FLAG_BYPASS from roxshmem_state at run time. */
#ifndef ROXSHMEM_ORDERING
#define ROXSHMEM_ORDERING 0
#endif
#define ROXSHMEM_ORDERING_RUNTIME 0
#define ROXSHMEM_ORDERING_STRICT 1
#define ROXSHMEM_ORDERING_BYPASS 2

/* ROXSHMEM_RING=0 compiles the ring out: for kernels that only reach load/store peers (a call that
 * would need the ring records ROXSHMEM_CALL_NO_ROUTE instead). */
#ifndef ROXSHMEM_RING
#define ROXSHMEM_RING 1
#endif

/* ticket value of a push that gave up (abort word set or ring failed while the ring was full) */
#define ROXSHMEM_RING_NO_TICKET (~0ull)

ROXA_FN int roxi_bypass(void)
{
#if ROXSHMEM_ORDERING == ROXSHMEM_ORDERING_STRICT
	return 0;
#elif ROXSHMEM_ORDERING == ROXSHMEM_ORDERING_BYPASS
	return 1;
#else
	return (roxshmem_state.flags & ROXSHMEM_FLAG_BYPASS) != 0;
#endif
}

/* The acquire that ends a successful wait: system scope (Strict); in CacheBypass the heap holds
 * no L2 lines, so only this CU's vector cache is invalidated on amdgcn. */
ROXA_FN void roxi_wait_acquire(void)
{
	if (roxi_bypass())
		roxa_fence_acquire_bypass();
	else
		roxa_fence_acquire();
}

ROXA_FN int roxi_ring_enabled(void) { return ROXSHMEM_RING && roxshmem_state.ring != 0; }

ROXA_FN roxshmem_ring_header_t *roxi_ring(void)
{
	return (roxshmem_ring_header_t *)(uintptr_t)roxshmem_state.ring;
}

ROXA_FN uint64_t *roxi_ring_head(void)
{
	if (roxshmem_state.ring_head != 0)
		return (uint64_t *)(uintptr_t)roxshmem_state.ring_head;
	return &roxi_ring()->head;
}

ROXA_FN const uint64_t *roxi_ring_completion(void)
{
	if (roxshmem_state.completion != 0)
		return (const uint64_t *)(uintptr_t)roxshmem_state.completion;
	return &roxi_ring()->completed;
}

ROXA_FN uint64_t *roxi_ring_result(uint64_t ticket)
{
	return (uint64_t *)(uintptr_t)roxshmem_state.ring_results + (ticket & (roxshmem_state.ring_capacity - 1));
}

ROXI_COLD void roxi_record(uint32_t call, int pe, uint32_t detail)
{
	roxshmem_abort_t *ab = (roxshmem_abort_t *)(uintptr_t)roxshmem_state.abort;
	if (ab == 0)
		return;
	roxa_amo_u64(ROXSHMEM_AMO_COMPARE_SWAP, &ab->first, ROXSHMEM_ABORT_RECORD(call, pe, detail), 0);
	roxa_amo_u64(ROXSHMEM_AMO_FETCH_ADD, &ab->count, 1, 0);
}

/* Nonzero when a wait must give up: the host set the abort word, or the ring whose error word is
 * err (0: none) failed. The reason is recorded for the host call that synchronizes with the kernel. */
ROXI_COLD int roxi_must_abort_on(uint32_t call, int pe, const uint32_t *err)
{
	roxshmem_abort_t *ab = (roxshmem_abort_t *)(uintptr_t)roxshmem_state.abort;
	if (ab != 0) {
		uint64_t w = roxa_ld_relaxed_u64(&ab->word);
		if (w != 0) {
			roxi_record(call, pe, ROXSHMEM_DETAIL_ABORT_WORD | (uint32_t)(w & 0xffff));
			return 1;
		}
	}
	if (err != 0) {
		uint32_t e = roxa_ld_relaxed_u32(err);
		if (e != 0) {
			roxi_record(call, pe, ROXSHMEM_DETAIL_RING_ERROR | (e & 0xffff));
			return 1;
		}
	}
	return 0;
}

/* ... with_ring: the default ring's error word counts */
ROXA_FN int roxi_must_abort(uint32_t call, int pe, int with_ring)
{
	return roxi_must_abort_on(call, pe, with_ring && roxi_ring_enabled() ? &roxi_ring()->error : 0);
}

/* Reserve a ticket on ring r (ticket counter head, producers' tail cache tc, result slots res,
 * cap descriptors), fill its slot, publish it (seq = ticket+1 written last, release at system
 * scope: it also makes the put's source, written before the call, visible to the copy engine or
 * NIC). Returns the ticket, or ROXSHMEM_RING_NO_TICKET when waiting for a free slot was aborted. */
ROXA_FN uint64_t roxi_ring_push_on(roxshmem_ring_header_t *r, uint64_t *head, uint64_t *tc, uint64_t *res, uint64_t cap,
				   uint32_t op, uint32_t pe, uint64_t size, uint64_t src, uint64_t dst, uint64_t value,
				   uint64_t aux, uint32_t flags)
{
	uint64_t t = roxa_amo_u64(ROXSHMEM_AMO_FETCH_ADD, head, 1, 0);
	uint64_t tail = roxa_ld_relaxed_u64(tc);
	uint32_t spins = 0;
	while (t >= tail + cap) {
		/* looks full: re-read the consumer's tail; the cache only ever lags it */
		tail = roxa_ld_acquire_u64(&r->tail);
		if (t < tail + cap) {
			if (roxa_ld_relaxed_u64(tc) < tail)
				roxa_st_relaxed_u64(tc, tail);
			break;
		}
		if ((++spins & 15) == 0 && roxi_must_abort_on(ROXSHMEM_CALL_RING, (int)pe, &r->error))
			return ROXSHMEM_RING_NO_TICKET;
		roxa_pause();
	}
	roxshmem_desc_t *d = (roxshmem_desc_t *)((uint8_t *)r + sizeof(roxshmem_ring_header_t)) + (t & (cap - 1));
	if (src == ROXSHMEM_RING_RESULT_SLOT)
		src = (uint64_t)(uintptr_t)(res + (t & (cap - 1)));
	d->op = op;
	d->pe = pe;
	d->size = size;
	d->src = src;
	d->dst = dst;
	d->value = value;
	d->aux = aux;
	d->flags = flags;
	d->pad = 0;
	roxa_st_release_u64(&d->seq, t + 1);
	return t;
}

/* A push on the default context's ring (roxshmem_state). */
ROXI_COLD uint64_t roxshmemx_ring_push(uint32_t op, uint32_t pe, uint64_t size, uint64_t src,
				     uint64_t dst, uint64_t value, uint64_t aux, uint32_t flags)
{
	return roxi_ring_push_on(roxi_ring(), roxi_ring_head(), &roxshmem_ring_tail_cache, roxi_ring_result(0),
				 roxshmem_state.ring_capacity, op, pe, size, src, dst, value, aux, flags);
}

/* Wait until the proxy has completed every ticket below target (c: the ring's completed count or
 * its mirror, err: the ring's error word), then acquire: at system scope when data the proxy
 * wrote (a get, a fetched value) is read next (sys_acquire), else with the mode's wait acquire.
 * Zero when aborted. */
ROXA_FN int roxi_ring_wait_on(const uint64_t *c, const uint32_t *err, uint64_t target, uint32_t call, int pe, int sys_acquire)
{
	uint32_t spins = 0;
	/* c is device-local (the proxy's mirror); the abort and ring-error words are host memory:
	 * read them every 1024 polls only, so that many waiting blocks do not load the host bus while
	 * the copy engine works */
	while (roxa_ld_relaxed_u64(c) < target) {
		++spins;
		if ((spins & 1023) == 0 && roxi_must_abort_on(call, pe, err))
			return 0;
		if ((spins & 15) == 0)
			roxa_pause();
	}
	if (sys_acquire)
		roxa_fence_acquire();
	else
		roxi_wait_acquire();
	return 1;
}

ROXI_COLD int roxi_ring_wait_acq(uint64_t target, uint32_t call, int pe, int sys_acquire)
{
	return roxi_ring_wait_on(roxi_ring_completion(), roxi_ring_enabled() ? &roxi_ring()->error : 0, target, call, pe,
				 sys_acquire);
}

ROXA_FN int roxi_ring_wait(uint64_t target, uint32_t call, int pe) { return roxi_ring_wait_acq(target, call, pe, 1); }

/* Wait for every ticket reserved so far (by any thread of this PE). */
ROXI_FN int roxi_ring_quiet(uint32_t call)
{
	if (!roxi_ring_enabled())
		return 1;
	uint64_t h = roxa_ld_relaxed_u64(roxi_ring_head());
	if (roxa_ld_relaxed_u64(roxi_ring_completion()) >= h)
		return 1;
	return roxi_ring_wait_acq(h, call, -1, 0);
}

/* ---- the rings of the device contexts (ctx.h) ------------------------------------------------
 * Every point-to-point call is one implementation that takes the ring of its context: c, the
 * context's slot in the context table, or 0 for the default context (the state's ring above). */

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

/* The ring of ctx for the internals: *c = 0 for the default context, else its slot. Zero when ctx
 * names no live context (recorded by roxi_ctx): the call is skipped. */
ROXA_FN int roxi_ctx_q(roxshmem_ctx_t ctx, roxshmem_ctx_desc_t **c)
{
	*c = 0;
	return ctx == ROXSHMEM_CTX_DEFAULT || (*c = roxi_ctx(ctx)) != 0;
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

ROXI_COLD uint64_t roxi_ctx_push(roxshmem_ctx_desc_t *c, uint32_t op, uint32_t pe, uint64_t size, uint64_t src, uint64_t dst,
				 uint64_t value, uint64_t aux, uint32_t flags)
{
	return roxi_ring_push_on(roxi_ctx_ring(c), roxi_ctx_head(c), &c->tail_cache, (uint64_t *)(uintptr_t)c->results,
				 c->capacity, op, pe, size, src, dst, value, aux, flags);
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

/* The ring of context c (0: the default context's). A live context always has its ring (unless
 * ROXSHMEM_RING=0 compiled rings out); the default context has one when the runtime made it. */
ROXA_FN int roxi_q_enabled(roxshmem_ctx_desc_t *c) { return c != 0 ? ROXSHMEM_RING : roxi_ring_enabled(); }
ROXA_FN const uint32_t *roxi_q_error(roxshmem_ctx_desc_t *c)
{
	return c != 0 ? &roxi_ctx_ring(c)->error : roxi_ring_enabled() ? &roxi_ring()->error : 0;
}
ROXA_FN uint64_t roxi_q_push(roxshmem_ctx_desc_t *c, uint32_t op, uint32_t pe, uint64_t size, uint64_t src, uint64_t dst,
			     uint64_t value, uint64_t aux, uint32_t flags)
{
	if (c != 0)
		return roxi_ctx_push(c, op, pe, size, src, dst, value, aux, flags);
	return roxshmemx_ring_push(op, pe, size, src, dst, value, aux, flags);
}
/* Wait for ticket target-1 of c's ring, ending with a system-scope acquire (what the proxy wrote
 * is read next). Zero when aborted. */
ROXA_FN int roxi_q_wait(roxshmem_ctx_desc_t *c, uint64_t target, uint32_t call, int pe)
{
	return c != 0 ? roxi_ctx_wait(c, target, call, pe, 1) : roxi_ring_wait(target, call, pe);
}
ROXA_FN uint64_t *roxi_q_result(roxshmem_ctx_desc_t *c, uint64_t ticket)
{
	if (c != 0)
		return (uint64_t *)(uintptr_t)c->results + (ticket & (c->capacity - 1));
	return roxi_ring_result(ticket);
}
ROXA_FN int roxi_q_quiet(roxshmem_ctx_desc_t *c, uint32_t call)
{
	return c != 0 ? roxi_ctx_ring_quiet(c, call) : roxi_ring_quiet(call);
}
ROXA_FN int roxi_q_idle(roxshmem_ctx_desc_t *c)
{
	if (c != 0)
		return roxa_ld_relaxed_u64(roxi_ctx_completion(c)) >= roxa_ld_relaxed_u64(roxi_ctx_head(c));
	return roxa_ld_relaxed_u64(roxi_ring_completion()) >= roxa_ld_relaxed_u64(roxi_ring_head());
}
#endif /* ROXA_GPU_LANG */
#endif /* ROXAMEN_RING_H */
