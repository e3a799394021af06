/* The SDMA route (AMD): the GPU thread that makes a put writes SDMA packets into a copy-engine
 * queue's ring itself and rings the queue's doorbell; no host proxy takes part. The queues are
 * created by the host (shmem, through libhsakmt's hsaKmtCreateQueue with an SDMA queue type) and
 * described to device code by a roxshmem_sdma table that roxshmem_state.sdma points at.
 *
 * Packets: the gfx9 SDMA packet format, which gfx90a (SDMA 4.4.0) and gfx942 (SDMA 4.4.2) share.
 * Field positions are those of the Linux kernel's drivers/gpu/drm/amd/amdgpu/vega10_sdma_pkt_open.h
 * (SDMA_PKT_COPY_LINEAR_*, SDMA_PKT_FENCE_*, SDMA_PKT_POLL_REGMEM_*, SDMA_PKT_ATOMIC_*,
 * SDMA_PKT_NOP_HEADER_count at bits 16..29) and of ROCr's runtime/hsa-runtime/core/inc/
 * sdma_registers.h (the same structs; SDMA_ATOMIC_ADD64 = 47; COPY_LINEAR kMaxSize_ 0x3fffe0).
 * The atomic "operation" field takes the TC atomic opcodes (TC_OP_ATOMIC_SWAP_RTN_64 = 0x27,
 * TC_OP_ATOMIC_ADD_RTN_64 = 0x2f, as ROCr's kfdtest command writers use them).
 *
 * Queue protocol (the shape of rocSHMEM 3.4's "anvil" path): any thread reserves ring space with
 * a CAS on the queue's reserve word, padding with a NOP packet when its packets would straddle
 * the ring's end; waits for space against the engine's read pointer; writes its packets; commits
 * in reservation order (waits until committed == its start); then, with a release at system
 * scope, stores the new end into the queue's write pointer and the doorbell and advances
 * committed. Write, read and doorbell values are byte offsets that only grow (64-bit), as the
 * gfx9 SDMA user queues take them.
 *
 * Completion: every submission ends with a FENCE packet that writes the low 32 bits of the
 * submission's end offset to the queue's done word once everything before it in the queue has
 * completed; quiet waits until done has reached the committed end of every queue this PE used.
 * Put-with-signal puts the signal's ATOMIC after that FENCE, so the engine updates the signal only
 * once the data has landed.
 *
 * Mirrored in Go by kernels.SDMAQueue and kernels.SDMATable (kernels/sdma.go); the Go emulator of
 * the engine (device/host.SDMAEngine) decodes every field these encoders write. */
#ifndef ROXAMEN_SDMA_H
#define ROXAMEN_SDMA_H

#include "types.h"
#include "state.h"

#define ROXSHMEM_SDMA_MAGIC 0x31414d4453584f52ull /* "ROXSDMA1" little-endian */
#define ROXSHMEM_SDMA_MAX_QUEUES 4                /* per peer: one per engine that reaches it */

/* opcodes (header bits 0..7) and sub-opcodes (bits 8..15) */
#define ROXSHMEM_SDMA_OP_NOP 0
#define ROXSHMEM_SDMA_OP_COPY 1
#define ROXSHMEM_SDMA_OP_FENCE 5
#define ROXSHMEM_SDMA_OP_TRAP 6
#define ROXSHMEM_SDMA_OP_POLL_REGMEM 8
#define ROXSHMEM_SDMA_OP_ATOMIC 10
#define ROXSHMEM_SDMA_SUBOP_COPY_LINEAR 0
/* ATOMIC operation field (header bits 25..31) */
#define ROXSHMEM_SDMA_ATOMIC_SWAP64 0x27
#define ROXSHMEM_SDMA_ATOMIC_ADD64 0x2f
/* POLL_REGMEM func field (header bits 28..30): the comparison of (*addr & mask) with value */
#define ROXSHMEM_SDMA_POLL_ALWAYS 0
#define ROXSHMEM_SDMA_POLL_LT 1
#define ROXSHMEM_SDMA_POLL_LE 2
#define ROXSHMEM_SDMA_POLL_EQ 3
#define ROXSHMEM_SDMA_POLL_NE 4
#define ROXSHMEM_SDMA_POLL_GE 5
#define ROXSHMEM_SDMA_POLL_GT 6

/* packet lengths in dwords */
#define ROXSHMEM_SDMA_COPY_DW 7
#define ROXSHMEM_SDMA_FENCE_DW 4
#define ROXSHMEM_SDMA_ATOMIC_DW 8
#define ROXSHMEM_SDMA_POLL_DW 6
#define ROXSHMEM_SDMA_TRAP_DW 2
/* bytes one COPY_LINEAR packet moves at most (ROCr's kMaxSize_: the 22-bit count field holds
 * bytes-1, kept 32-byte aligned) */
#define ROXSHMEM_SDMA_COPY_MAX 0x3fffe0ull
/* NOP count field: dwords that follow the header (14 bits) */
#define ROXSHMEM_SDMA_NOP_MAX_COUNT 0x3fffu

/* One SDMA queue as device code sees it: 128 bytes in device memory (the reserve and committed
 * words are shared by every producer of this GPU). */
typedef struct roxshmem_sdma_queue {
	uint64_t ring;      /* device address of the ring: ring_bytes bytes, packets as dwords */
	uint64_t rptr;      /* device address of the engine's read pointer (uint64 byte offset) */
	uint64_t wptr;      /* device address of the queue's write pointer (uint64), which the engine
	                       reads when the doorbell rings */
	uint64_t doorbell;  /* device address of the doorbell (uint64; the store of the new write
	                       pointer rings it) */
	uint64_t done;      /* device address of the uint32 the engine's FENCE packets write */
	uint32_t ring_bytes; /* a power of two, at least 4 KiB */
	uint32_t engine;    /* which SDMA engine (informational: roxrun info, errors) */
	uint64_t reserve;   /* bytes reserved by producers (CAS) */
	uint64_t committed; /* bytes published to the engine, in reservation order */
	uint64_t pad[8];
} roxshmem_sdma_queue_t;

ROXA_STATIC_ASSERT(sizeof(roxshmem_sdma_queue_t) == 128, sdma_queue_size);

/* The table roxshmem_state.sdma points at (device memory, written by the host before launch). */
typedef struct roxshmem_sdma {
	uint64_t magic;         /* ROXSHMEM_SDMA_MAGIC */
	uint32_t n_queues;      /* queues per peer in use, 1..ROXSHMEM_SDMA_MAX_QUEUES */
	uint32_t pad0;
	uint64_t threshold;     /* puts of at least this many bytes to a peer with a queue take the
	                           SDMA route; 0: only the _sdma (and _ce) calls do */
	uint64_t pad1;
	uint64_t queue[ROXSHMEM_MAX_PES][ROXSHMEM_SDMA_MAX_QUEUES]; /* device address of a roxshmem_sdma_queue, 0:
	                                                 none (the PE is not reached by SDMA) */
} roxshmem_sdma_t;

ROXA_STATIC_ASSERT(sizeof(roxshmem_sdma_t) == 32 + ROXSHMEM_MAX_PES * 8 * ROXSHMEM_SDMA_MAX_QUEUES, sdma_size);

/* ---- packet encoders: plain functions of their fields, shared by device code and the host
 * programs of the tests ---------------------------------------------------------------------- */
#ifdef ROXA_GPU_LANG
#define ROXSHMEM_SDMA_FN static __host__ __device__ inline
#else
#define ROXSHMEM_SDMA_FN static inline
#endif
ROXSHMEM_SDMA_FN uint32_t roxshmem_sdma_header(uint32_t op, uint32_t sub_op) { return (op & 0xff) | ((sub_op & 0xff) << 8); }
ROXSHMEM_SDMA_FN uint32_t roxshmem_sdma_lo(uint64_t a) { return (uint32_t)a; }
ROXSHMEM_SDMA_FN uint32_t roxshmem_sdma_hi(uint64_t a) { return (uint32_t)(a >> 32); }

/* COPY_LINEAR: n bytes (1..ROXSHMEM_SDMA_COPY_MAX) from src to dst. dw2 (swap fields) is 0: no
 * byte swapping. */
ROXSHMEM_SDMA_FN void roxshmem_sdma_copy_linear(uint32_t *p, uint64_t dst, uint64_t src, uint32_t n)
{
	p[0] = roxshmem_sdma_header(ROXSHMEM_SDMA_OP_COPY, ROXSHMEM_SDMA_SUBOP_COPY_LINEAR);
	p[1] = (n - 1) & 0x3fffff;
	p[2] = 0;
	p[3] = roxshmem_sdma_lo(src);
	p[4] = roxshmem_sdma_hi(src);
	p[5] = roxshmem_sdma_lo(dst);
	p[6] = roxshmem_sdma_hi(dst);
}

/* FENCE: once everything before it in the queue has completed, write the 32-bit data to addr
 * (4-byte aligned). mtype/gcc/sys/snp/l2_policy stay 0: the default memory policy. */
ROXSHMEM_SDMA_FN void roxshmem_sdma_fence(uint32_t *p, uint64_t addr, uint32_t data)
{
	p[0] = roxshmem_sdma_header(ROXSHMEM_SDMA_OP_FENCE, 0);
	p[1] = roxshmem_sdma_lo(addr);
	p[2] = roxshmem_sdma_hi(addr);
	p[3] = data;
}

/* ATOMIC: a 64-bit atomic operation on addr (8-byte aligned) with src (and cmp for compare
 * operations); l (bit 16, loop until compare succeeds) is 0; loop_interval is 0. */
ROXSHMEM_SDMA_FN void roxshmem_sdma_atomic(uint32_t *p, uint32_t operation, uint64_t addr, uint64_t src, uint64_t cmp)
{
	p[0] = roxshmem_sdma_header(ROXSHMEM_SDMA_OP_ATOMIC, 0) | ((operation & 0x7f) << 25);
	p[1] = roxshmem_sdma_lo(addr);
	p[2] = roxshmem_sdma_hi(addr);
	p[3] = roxshmem_sdma_lo(src);
	p[4] = roxshmem_sdma_hi(src);
	p[5] = roxshmem_sdma_lo(cmp);
	p[6] = roxshmem_sdma_hi(cmp);
	p[7] = 0;
}

/* POLL_REGMEM on memory (mem_poll, bit 31): the queue waits until func((*addr & mask), value)
 * holds, re-reading every interval (bits 0..15 of dw5) up to retry_count times (bits 16..27;
 * 0xfff: forever). hdp_flush (bit 26) is 0. */
ROXSHMEM_SDMA_FN void roxshmem_sdma_poll_mem(uint32_t *p, uint64_t addr, uint32_t func, uint32_t value, uint32_t mask,
					  uint32_t interval, uint32_t retry_count)
{
	p[0] = roxshmem_sdma_header(ROXSHMEM_SDMA_OP_POLL_REGMEM, 0) | ((func & 7) << 28) | (1u << 31);
	p[1] = roxshmem_sdma_lo(addr);
	p[2] = roxshmem_sdma_hi(addr);
	p[3] = value;
	p[4] = mask;
	p[5] = (interval & 0xffff) | ((retry_count & 0xfff) << 16);
}

/* TRAP: raise the queue's interrupt with int_ctx (28 bits). */
ROXSHMEM_SDMA_FN void roxshmem_sdma_trap(uint32_t *p, uint32_t int_ctx)
{
	p[0] = roxshmem_sdma_header(ROXSHMEM_SDMA_OP_TRAP, 0);
	p[1] = int_ctx & 0xfffffff;
}

/* NOP header for a pad of dw dwords in all (1..ROXSHMEM_SDMA_NOP_MAX_COUNT+1): the header says
 * how many dwords follow it; their contents are ignored. */
ROXSHMEM_SDMA_FN uint32_t roxshmem_sdma_nop(uint32_t dw) { return roxshmem_sdma_header(ROXSHMEM_SDMA_OP_NOP, 0) | (((dw - 1) & 0x3fff) << 16); }

/* Dwords of a put of n bytes: its copies, the completion fence, and the signal's atomic. */
ROXSHMEM_SDMA_FN uint64_t roxshmem_sdma_put_dwords(uint64_t n, int with_signal)
{
	uint64_t copies = (n + ROXSHMEM_SDMA_COPY_MAX - 1) / ROXSHMEM_SDMA_COPY_MAX;
	return copies * ROXSHMEM_SDMA_COPY_DW + ROXSHMEM_SDMA_FENCE_DW + (with_signal ? ROXSHMEM_SDMA_ATOMIC_DW : 0);
}

/* ROXSHMEM_SDMA=0 compiles the SDMA route out; by default it follows ROXSHMEM_RING (a kernel
 * built for load/store peers only needs neither). NVIDIA has no device-written copy-engine queue:
 * there the _sdma calls take the ring's copy-engine route. */
#ifndef ROXSHMEM_SDMA
#define ROXSHMEM_SDMA ROXSHMEM_RING
#endif

#if defined(ROXA_GPU_LANG) && !defined(ROXA_NVPTX) && ROXSHMEM_SDMA
/* ---- the producer (amdgcn, and the host pass the tests run on the CPU) -------------------- */
#define ROXI_HAVE_SDMA 1
#define ROXI_SDMA_NO_SPACE (~0ull) /* a reservation that gave up (abort word set) */

ROXA_FN roxshmem_sdma_t *roxi_sdma(void) { return (roxshmem_sdma_t *)(uintptr_t)roxshmem_state.sdma; }

/* The queue a put to pe takes, 0: none. A block keeps to one queue per peer (so that its puts to
 * that peer stay in queue order); blocks spread over the peer's queues. */
ROXA_FN roxshmem_sdma_queue_t *roxi_sdma_queue(int pe)
{
	roxshmem_sdma_t *t = roxi_sdma();
	if (t == 0 || (unsigned)pe >= ROXSHMEM_MAX_PES || t->n_queues == 0)
		return 0;
	return (roxshmem_sdma_queue_t *)(uintptr_t)t->queue[pe][roxa_block() % t->n_queues];
}

/* Reserve bytes of ring space (plus a pad up to the ring's end when the packets would straddle
 * it): CAS on the reserve word once the engine's read pointer shows the space is free. */
ROXI_COLD uint64_t roxi_sdma_reserve(roxshmem_sdma_queue_t *q, uint64_t bytes, uint64_t *pad, int pe)
{
	uint64_t size = q->ring_bytes;
	const uint64_t *rptr = (const uint64_t *)(uintptr_t)q->rptr;
	uint32_t spins = 0;
	for (;;) {
		uint64_t cur = roxa_ld_relaxed_u64(&q->reserve);
		uint64_t off = cur & (size - 1);
		uint64_t p = off + bytes > size ? size - off : 0;
		uint64_t end = cur + p + bytes;
		if (end - roxa_ld_relaxed_u64(rptr) <= size) {
			if (roxa_amo_u64(ROXSHMEM_AMO_COMPARE_SWAP, &q->reserve, end, cur) == cur) {
				*pad = p;
				return cur;
			}
			continue;
		}
		if ((++spins & 15) == 0 && roxi_must_abort(ROXSHMEM_CALL_SDMA, pe, 0))
			return ROXI_SDMA_NO_SPACE;
		roxa_pause();
	}
}

/* Fill a pad of bytes at ring offset off with NOP packets (one NOP covers at most 16 Ki dwords). */
ROXA_FN void roxi_sdma_pad(uint32_t *ring, uint64_t off, uint64_t bytes)
{
	uint64_t dw = bytes / 4, at = off / 4;
	while (dw > 0) {
		uint64_t k = dw > ROXSHMEM_SDMA_NOP_MAX_COUNT + 1 ? ROXSHMEM_SDMA_NOP_MAX_COUNT + 1 : dw;
		ring[at] = roxshmem_sdma_nop((uint32_t)k);
		at += k;
		dw -= k;
	}
}

/* Publish [start, end) in reservation order: wait for the earlier producers, then a release at
 * system scope (the packets, and a put's source, are visible to the engine), the write pointer,
 * the doorbell, and the committed word for the next producer. Zero when aborted. */
ROXI_COLD int roxi_sdma_commit(roxshmem_sdma_queue_t *q, uint64_t start, uint64_t end, int pe)
{
	uint32_t spins = 0;
	while (roxa_ld_relaxed_u64(&q->committed) != start) {
		if ((++spins & 15) == 0 && roxi_must_abort(ROXSHMEM_CALL_SDMA, pe, 0))
			return 0;
		roxa_pause();
	}
	roxa_fence_release();
	roxa_st_relaxed_u64((uint64_t *)(uintptr_t)q->wptr, end);
	roxa_drain(); /* the write pointer is in memory before the doorbell makes the engine read it */
	roxa_st_relaxed_u64((uint64_t *)(uintptr_t)q->doorbell, end);
	roxa_st_release_u64(&q->committed, end);
	return 1;
}

/* Copies per submission: a submission's packets take at most a quarter of the ring. */
ROXA_FN uint64_t roxi_sdma_copies_per_submit(roxshmem_sdma_queue_t *q)
{
	uint64_t k = (q->ring_bytes / 4 - 4 * (ROXSHMEM_SDMA_FENCE_DW + ROXSHMEM_SDMA_ATOMIC_DW)) / (4 * ROXSHMEM_SDMA_COPY_DW);
	return k == 0 ? 1 : k;
}

/* Put n bytes from src (local) to dst (the peer's address as this GPU reaches it) through q, then
 * (sig != 0) apply the signal with the engine's atomic after the completion fence. Returns the end
 * offset of the last submission (what its done word will reach), or ROXI_SDMA_NO_SPACE. */
ROXI_COLD uint64_t roxi_sdma_put(roxshmem_sdma_queue_t *q, uint64_t dst, uint64_t src, uint64_t n, uint64_t sig,
				 uint64_t signal, int sig_op, int pe)
{
	uint32_t *ring = (uint32_t *)(uintptr_t)q->ring;
	uint64_t size = q->ring_bytes, per = roxi_sdma_copies_per_submit(q), end = 0;
	do {
		uint64_t chunk = n > per * ROXSHMEM_SDMA_COPY_MAX ? per * ROXSHMEM_SDMA_COPY_MAX : n;
		int last = chunk == n;
		uint64_t copies = (chunk + ROXSHMEM_SDMA_COPY_MAX - 1) / ROXSHMEM_SDMA_COPY_MAX;
		uint64_t dw = copies * ROXSHMEM_SDMA_COPY_DW + ROXSHMEM_SDMA_FENCE_DW + (last && sig ? ROXSHMEM_SDMA_ATOMIC_DW : 0);
		uint64_t pad, start = roxi_sdma_reserve(q, 4 * dw, &pad, pe);
		if (start == ROXI_SDMA_NO_SPACE)
			return ROXI_SDMA_NO_SPACE;
		if (pad != 0)
			roxi_sdma_pad(ring, start & (size - 1), pad);
		uint64_t at = ((start + pad) & (size - 1)) / 4;
		for (uint64_t done = 0; done < chunk; done += ROXSHMEM_SDMA_COPY_MAX, at += ROXSHMEM_SDMA_COPY_DW) {
			uint64_t k = chunk - done > ROXSHMEM_SDMA_COPY_MAX ? ROXSHMEM_SDMA_COPY_MAX : chunk - done;
			roxshmem_sdma_copy_linear(ring + at, dst + done, src + done, (uint32_t)k);
		}
		end = start + pad + 4 * dw;
		roxshmem_sdma_fence(ring + at, q->done, (uint32_t)end);
		at += ROXSHMEM_SDMA_FENCE_DW;
		if (last && sig)
			roxshmem_sdma_atomic(ring + at, sig_op == ROXSHMEM_SIGNAL_ADD ? ROXSHMEM_SDMA_ATOMIC_ADD64 : ROXSHMEM_SDMA_ATOMIC_SWAP64,
					     sig, signal, 0);
		if (!roxi_sdma_commit(q, start, end, pe))
			return ROXI_SDMA_NO_SPACE;
		dst += chunk;
		src += chunk;
		n -= chunk;
	} while (n > 0);
	return end;
}

/* Nonzero once q's done word has reached end (both 32-bit images of growing offsets). */
ROXA_FN int roxi_sdma_reached(roxshmem_sdma_queue_t *q, uint64_t end)
{
	return (int32_t)(roxa_ld_relaxed_u32((const uint32_t *)(uintptr_t)q->done) - (uint32_t)end) >= 0;
}

/* Wait until q's done word reaches end. Zero when aborted. */
ROXI_COLD int roxi_sdma_wait(roxshmem_sdma_queue_t *q, uint64_t end, uint32_t call, int pe)
{
	uint32_t spins = 0;
	while (!roxi_sdma_reached(q, end)) {
		if ((++spins & 1023) == 0 && roxi_must_abort(call, pe, 0))
			return 0;
		if ((spins & 15) == 0)
			roxa_pause();
	}
	return 1;
}

/* Wait until every queue of every peer has completed what was reserved on it so far. */
ROXI_COLD int roxi_sdma_quiet(uint32_t call)
{
	roxshmem_sdma_t *t = roxi_sdma();
	if (t == 0)
		return 1;
	for (int pe = 0; pe < roxshmem_state.n_pes; pe++)
		for (uint32_t j = 0; j < t->n_queues; j++) {
			roxshmem_sdma_queue_t *q = (roxshmem_sdma_queue_t *)(uintptr_t)t->queue[pe][j];
			if (q != 0 && !roxi_sdma_wait(q, roxa_ld_relaxed_u64(&q->reserve), call, pe))
				return 0;
		}
	return 1;
}
#endif

#endif /* ROXAMEN_SDMA_H */
