/* Expert-parallel dispatch and combine on the device (HIP dialect): what DeepEP gives NVSHMEM users,
 * over roxshmem.h's put-with-signal, signal waits and quiet. The protocol, the heap layout and the
 * arithmetic are shmem/ep's (its package comment): a device PE and the host reference give the
 * same rows, the same order and the same bits.
 *
 * Every function is block level: every thread of the block calls it with the same arguments.
 * Functions that split work take (blk, nblk): block blk of nblk takes items blk, blk+nblk, ...
 * A Dispatch or Combine is a sequence of phases, each a kernel launch on one stream (the stream
 * orders them; no grid-wide barrier is needed):
 *
 *   dispatch, LowLatency: roxep_route (1 block), roxep_ll_dispatch_send (n blocks),
 *                         roxep_dispatch_recv_map (1), roxep_dispatch_recv_copy (n), roxep_dispatch_ack (1)
 *   dispatch, Normal:     roxep_route (1), roxep_stage (n), roxep_normal_dispatch_send (1), then as LL
 *   combine, LowLatency:  roxep_combine_send (n), roxep_combine_recv (n), roxep_combine_ack (1)
 *   combine, Normal:      roxep_combine_send (n), roxep_normal_combine_flush (1), roxep_combine_recv (n),
 *                         roxep_combine_ack (1)
 *
 * Ordering: the puts are roxshmem's, so each ROX_ORDERING mode gets its instructions from the
 * library (MAPPING.md): Strict writes the data with plain stores and releases it with a cache
 * write-back before each signal; CacheBypass writes it with cache-bypassing stores and only waits
 * for their acknowledgement before the signal. MAPPING.md's instruction-count table counts them. */
#ifndef ROXAMEN_EP_H
#define ROXAMEN_EP_H

#include "roxshmem.h"

#ifdef ROXA_GPU_LANG

#define ROXEP_BF16 2 /* esize of the payload types */
#define ROXEP_F32 4
#define ROXEP_NORMAL 0
#define ROXEP_LOW_LATENCY 1

/* Signal blocks (each n_pes words; word s is about PE s): shmem/ep's sigLayout.. sigCombAck. */
#define ROXEP_SIG_LAYOUT 0
#define ROXEP_SIG_DATA 1
#define ROXEP_SIG_COUNT 2
#define ROXEP_SIG_DISP_ACK 3
#define ROXEP_SIG_COMB 4
#define ROXEP_SIG_COMB_ACK 5
#define ROXEP_NSIGS 6

/* The abort-record call (state.h's ROXSHMEM_CALL_*; the workload libraries' start at 0x90) of an
 * expert index out of range (roxep_route); kernels.CallEPExpert. */
#define ROXEP_CALL_EXPERT 0x90

/* One PE's buffer: the shape, its symmetric regions (this PE's addresses; the same offsets on every
 * PE) and its local scratch. The host fills it (shmem/ep on a GPU World, or a test harness) in
 * device-visible memory and passes its address to every phase. Sizes: P = n_pes, M = max_tokens,
 * K = topk, E = experts, L = E/P. */
typedef struct roxep {
	int32_t hidden, topk, experts, max_tokens;
	int32_t local;      /* L */
	int32_t esize;      /* ROXEP_BF16 or ROXEP_F32 */
	int32_t mode;       /* ROXEP_NORMAL or ROXEP_LOW_LATENCY */
	uint32_t payload;   /* align8(hidden*esize): the payload part of a dispatch row */
	uint32_t row_bytes; /* align8(payload + 8K + 4): payload, K int32 local experts, K float weights, token */
	uint32_t pad;
	uint64_t ce_min;    /* Normal: bulk puts of at least this many bytes go by the copy engine (0: never) */
	/* symmetric */
	uint8_t *recv;      /* [P*M] dispatch rows */
	uint8_t *comb;      /* [P*M] partial sums, hidden*esize bytes each */
	uint64_t *layout;   /* [P][P+E] counts (Normal) */
	uint64_t *sig;      /* [ROXEP_NSIGS][P] */
	/* local (device memory of this PE) */
	uint8_t *stage;     /* [P*M] rows this PE sends: destination d's at d*M */
	uint8_t *cstage;    /* [P*M] partial sums this PE sends back: source s's at s*M */
	int32_t *nsent;     /* [P] tokens sent to each PE (this call) */
	int32_t *sent;      /* [P][M] slot -> token index */
	int32_t *slot_of;   /* [M][P] token -> slot at each PE, -1: none */
	uint64_t *per_expert; /* [E] rows of this PE's tokens per expert */
	int32_t *counts;    /* [P] tokens received from each PE */
	int32_t *start;     /* [P] first landing row of each PE's tokens */
	int32_t *ecount;    /* [L] rows per local expert */
	int32_t *eoff;      /* [L+1] first row of each local expert */
	int32_t *out_row;   /* [P*M][K] landing row, choice k -> output row, -1: none */
	float *out_w;       /* [P*M][K] its weight */
	int32_t *rows;      /* [1] rows received */
	uint64_t *arrived;  /* [P] LowLatency: dispatch arrivals counted so far, per source */
	uint64_t *carrived; /* [P] LowLatency: combine arrivals counted so far, per destination */
} roxep_t;

ROXA_FN uint64_t *roxep_sig(const roxep_t *ep, int block, int pe) { return ep->sig + block * roxshmem_state.n_pes + pe; }
ROXA_FN uint8_t *roxep_stage_row(const roxep_t *ep, int d, int i) { return ep->stage + (uint64_t)(d * ep->max_tokens + i) * ep->row_bytes; }

/* Waits (thread 0) until this PE's signal (block, pe) is at least v; the block then proceeds. */
ROXA_FN void roxep_wait(const roxep_t *ep, int block, int pe, uint64_t v)
{
	if (roxa_tid() == 0)
		roxshmem_signal_wait_until(roxep_sig(ep, block, pe), ROXSHMEM_CMP_GE, v);
}

/* Route: which tokens go to which PE, in token order, and how many rows each expert gets.
 * idx[t*K+k] is token t's k-th expert, -1 for none. Only the device sees a stream-ordered call's
 * indices, so the range is checked here: an index outside [-1, experts) is recorded in the abort
 * block (ROXEP_CALL_EXPERT, detail: the value, saturated to int32; the host reports it at its next
 * synchronization with the stream, naming the PE and the value) and this PE then dispatches no
 * token in this call: its peers' calls complete, seeing no token from it, and none of its routing
 * travels. One block (rows[0] is its flag until roxep_dispatch_recv_map writes the row count). */
ROXI_COLD void roxep_route(const roxep_t *ep, const int64_t *idx, int n)
{
	int P = roxshmem_state.n_pes, K = ep->topk, L = ep->local;
	uint32_t tid = roxa_tid(), nt = roxa_nthreads();
	uint32_t *bad = (uint32_t *)ep->rows;
	for (int e = (int)tid; e < ep->experts; e += (int)nt)
		ep->per_expert[e] = 0;
	if (tid == 0)
		roxa_st_relaxed_u32(bad, 0);
	roxa_sync_block();
	for (int i = (int)tid; i < n * K; i += (int)nt) {
		int64_t e = idx[i];
		if (e < -1 || e >= ep->experts) {
			int64_t v = e < -2147483647LL - 1 ? -2147483647LL - 1 : e > 2147483647LL ? 2147483647LL : e;
			roxi_record(ROXEP_CALL_EXPERT, roxshmem_state.my_pe, (uint32_t)(int32_t)v);
			roxa_st_relaxed_u32(bad, 1);
		}
	}
	roxa_sync_block();
	/* refused: every token's slots are -1 (Combine returns zeros for them), nothing is sent */
	int kk = roxa_ld_relaxed_u32(bad) != 0 ? 0 : K;
	/* thread d walks the tokens for destination d: its slots are in token order */
	for (int d = (int)tid; d < P; d += (int)nt) {
		int c = 0;
		for (int t = 0; t < n; t++) {
			int here = 0;
			for (int k = 0; k < kk; k++) {
				int64_t e = idx[t * K + k];
				if (e >= 0 && (int)(e / L) == d) {
					here = 1;
					ep->per_expert[e]++; /* only thread d touches experts of PE d */
				}
			}
			ep->slot_of[t * P + d] = here ? c : -1;
			if (here)
				ep->sent[d * ep->max_tokens + c++] = t;
		}
		ep->nsent[d] = c;
	}
	roxa_sync_block();
}

/* Writes token t's row for destination d into its stage row: the payload, then per choice k the
 * local expert at d (-1: elsewhere) and the weight, then t. */
ROXA_FN void roxep_build_row(const roxep_t *ep, uint8_t *row, const uint8_t *x, const int64_t *idx, const float *w, int t, int d)
{
	int K = ep->topk, L = ep->local;
	uint32_t tid = roxa_tid(), nt = roxa_nthreads();
	uint64_t pay = (uint64_t)ep->hidden * ep->esize;
	roxa_copy(row, x + (uint64_t)t * pay, pay, tid, nt, ROXA_MEM_PLAIN, ROXA_MEM_PLAIN);
	int32_t *meta = (int32_t *)(row + ep->payload);
	for (int k = (int)tid; k < K; k += (int)nt) {
		int64_t e = idx[t * K + k];
		meta[k] = e >= 0 && (int)(e / L) == d ? (int32_t)(e - (int64_t)d * L) : -1;
		roxa_bytecopy(&meta[K + k], &w[t * K + k], 4);
	}
	if (tid == 0)
		meta[2 * K] = t;
}

/* The per-token unit of LowLatency dispatch: token t's row built in its stage row and pushed into
 * slot i of this PE's region at d with a put-with-signal that adds one to d's arrival counter of
 * this PE. */
ROXI_COLD void roxep_ll_push_token(const roxep_t *ep, const uint8_t *x, const int64_t *idx, const float *w, int d, int i)
{
	int me = roxshmem_state.my_pe;
	int t = ep->sent[d * ep->max_tokens + i];
	uint8_t *row = roxep_stage_row(ep, d, i);
	roxep_build_row(ep, row, x, idx, w, t, d);
	roxi_thread_drain();
	roxa_sync_block();
	roxshmemx_putmem_signal_nbi_block(ep->recv + (uint64_t)(me * ep->max_tokens + i) * ep->row_bytes, row, ep->row_bytes,
					  roxep_sig(ep, ROXEP_SIG_DATA, me), 1, ROXSHMEM_SIGNAL_ADD, d);
}

/* Each destination must have consumed the previous call's data (epoch-1) before it is overwritten. */
ROXA_FN void roxep_wait_acks(const roxep_t *ep, int block, uint64_t epoch)
{
	for (int d = 0; d < roxshmem_state.n_pes; d++)
		roxep_wait(ep, block, d, epoch - 1);
	roxa_sync_block();
}

/* LowLatency dispatch, sending side: every token into its fixed slot, then (block 0) the counts. */
ROXI_COLD void roxep_ll_dispatch_send(const roxep_t *ep, const uint8_t *x, const int64_t *idx, const float *w, uint64_t epoch,
				      int blk, int nblk)
{
	int P = roxshmem_state.n_pes, me = roxshmem_state.my_pe;
	roxep_wait_acks(ep, ROXEP_SIG_DISP_ACK, epoch);
	int j = 0;
	for (int d = 0; d < P; d++) {
		/* start with the next PE, as DeepEP does, so that the PEs do not all hit one PE first */
		int dd = (me + 1 + d) % P;
		for (int i = 0; i < ep->nsent[dd]; i++, j++)
			if (j % nblk == blk)
				roxep_ll_push_token(ep, x, idx, w, dd, i);
	}
	if (blk == 0 && roxa_tid() == 0)
		for (int d = 0; d < P; d++)
			roxshmem_uint64_atomic_set(roxep_sig(ep, ROXEP_SIG_COUNT, me), epoch << 32 | (uint64_t)ep->nsent[d], d);
	roxa_sync_block();
}

/* Normal dispatch: the rows of every destination staged, any number of blocks. */
ROXI_COLD void roxep_stage(const roxep_t *ep, const uint8_t *x, const int64_t *idx, const float *w, int blk, int nblk)
{
	int P = roxshmem_state.n_pes, j = 0;
	for (int d = 0; d < P; d++)
		for (int i = 0; i < ep->nsent[d]; i++, j++)
			if (j % nblk == blk) {
				roxep_build_row(ep, roxep_stage_row(ep, d, i), x, idx, w, ep->sent[d * ep->max_tokens + i], d);
				roxa_sync_block();
			}
	roxi_thread_drain();
	roxa_sync_block();
}

/* A bulk put-with-signal (SET value): by the copy engine from ce_min bytes on, else by the block. */
ROXA_FN void roxep_bulk(const roxep_t *ep, void *dst, const void *src, uint64_t n, uint64_t *sig, uint64_t v, int pe)
{
	if (n == 0) {
		if (roxa_tid() == 0)
			roxshmem_uint64_atomic_set(sig, v, pe);
		roxa_sync_block();
	} else if (ep->ce_min != 0 && n >= ep->ce_min) {
		roxshmemx_putmem_signal_sdma_nbi_block(dst, src, n, sig, v, ROXSHMEM_SIGNAL_SET, pe);
	} else {
		roxshmemx_putmem_signal_nbi_block(dst, src, n, sig, v, ROXSHMEM_SIGNAL_SET, pe);
	}
}

/* Normal dispatch, one block: the layout (tokens per PE, rows per expert) to every PE, then each
 * destination's rows in one bulk put-with-signal, compactly after the rows of lower PEs. */
ROXI_COLD void roxep_normal_dispatch_send(const roxep_t *ep, uint64_t epoch)
{
	int P = roxshmem_state.n_pes, me = roxshmem_state.my_pe, lw = P + ep->experts;
	roxep_wait_acks(ep, ROXEP_SIG_DISP_ACK, epoch);
	/* the layout row is built in this PE's own layout row (the same place it lands on every PE) */
	uint64_t *mine = ep->layout + (uint64_t)me * lw;
	for (int i = (int)roxa_tid(); i < lw; i += (int)roxa_nthreads())
		mine[i] = i < P ? (uint64_t)ep->nsent[i] : ep->per_expert[i - P];
	roxi_thread_drain();
	roxa_sync_block();
	for (int d = 0; d < P; d++) {
		int dd = (me + 1 + d) % P;
		if (dd != me)
			roxshmemx_putmem_signal_nbi_block(mine, mine, (uint64_t)lw * 8, roxep_sig(ep, ROXEP_SIG_LAYOUT, me), epoch,
							  ROXSHMEM_SIGNAL_SET, dd);
		else if (roxa_tid() == 0)
			roxshmem_uint64_atomic_set(roxep_sig(ep, ROXEP_SIG_LAYOUT, me), epoch, me);
	}
	for (int s = 0; s < P; s++)
		roxep_wait(ep, ROXEP_SIG_LAYOUT, s, epoch);
	roxa_sync_block();
	for (int d = 0; d < P; d++) {
		int dd = (me + 1 + d) % P;
		uint64_t off = 0;
		for (int s = 0; s < me; s++)
			off += roxa_ld_relaxed_u64(ep->layout + (uint64_t)s * lw + dd);
		roxep_bulk(ep, ep->recv + off * ep->row_bytes, roxep_stage_row(ep, dd, 0), (uint64_t)ep->nsent[dd] * ep->row_bytes,
			   roxep_sig(ep, ROXEP_SIG_DATA, me), epoch, dd);
	}
}

/* Receiving side, one block: wait for every PE's rows, then map them to output rows grouped by
 * local expert (within an expert by source PE, then token, then choice k). */
ROXI_COLD void roxep_dispatch_recv_map(const roxep_t *ep, uint64_t epoch)
{
	int P = roxshmem_state.n_pes, M = ep->max_tokens, K = ep->topk, L = ep->local, lw = P + ep->experts;
	uint32_t tid = roxa_tid(), nt = roxa_nthreads();
	if (ep->mode == ROXEP_LOW_LATENCY) {
		if (tid == 0)
			for (int s = 0; s < P; s++) {
				uint64_t v = roxshmem_signal_wait_until(roxep_sig(ep, ROXEP_SIG_COUNT, s), ROXSHMEM_CMP_GE, epoch << 32);
				ep->counts[s] = (int32_t)(v & 0xffffffffu);
				ep->start[s] = s * M;
				roxshmem_signal_wait_until(roxep_sig(ep, ROXEP_SIG_DATA, s), ROXSHMEM_CMP_GE, ep->arrived[s] + (uint64_t)ep->counts[s]);
			}
	} else {
		if (tid == 0)
			for (int s = 0; s < P; s++) {
				roxshmem_signal_wait_until(roxep_sig(ep, ROXEP_SIG_DATA, s), ROXSHMEM_CMP_GE, epoch);
				ep->counts[s] = (int32_t)roxa_ld_relaxed_u64(ep->layout + (uint64_t)s * lw + roxshmem_state.my_pe);
				ep->start[s] = s == 0 ? 0 : ep->start[s - 1] + ep->counts[s - 1];
			}
	}
	roxa_sync_block();
	/* thread l numbers local expert l's rows: counts first, then offsets, then the rows */
	for (int l = (int)tid; l < L; l += (int)nt) {
		int c = 0;
		for (int s = 0; s < P; s++)
			for (int i = 0; i < ep->counts[s]; i++) {
				const int32_t *meta = (const int32_t *)(ep->recv + (uint64_t)(ep->start[s] + i) * ep->row_bytes + ep->payload);
				for (int k = 0; k < K; k++)
					c += meta[k] == l;
			}
		ep->ecount[l] = c;
	}
	roxa_sync_block();
	if (tid == 0) {
		ep->eoff[0] = 0;
		for (int l = 0; l < L; l++)
			ep->eoff[l + 1] = ep->eoff[l] + ep->ecount[l];
		ep->rows[0] = ep->eoff[L];
	}
	roxa_sync_block();
	for (int l = (int)tid; l < L; l += (int)nt) {
		int r = ep->eoff[l];
		for (int s = 0; s < P; s++)
			for (int i = 0; i < ep->counts[s]; i++) {
				uint64_t lr = (uint64_t)(ep->start[s] + i);
				const int32_t *meta = (const int32_t *)(ep->recv + lr * ep->row_bytes + ep->payload);
				for (int k = 0; k < K; k++)
					if (meta[k] == l) {
						ep->out_row[lr * K + k] = r++;
						roxa_bytecopy(&ep->out_w[lr * K + k], &meta[K + k], 4);
					} else if (l == 0 && (meta[k] < 0 || meta[k] >= L)) {
						ep->out_row[lr * K + k] = -1;
					}
			}
	}
	roxa_sync_block();
}

/* Copies the received payloads into their output rows x ([rows][hidden]) and writes each row's
 * source (src[r*3..]: PE, token, k) and weight; any number of blocks. */
ROXI_COLD void roxep_dispatch_recv_copy(const roxep_t *ep, uint8_t *x, int32_t *src, float *w, int blk, int nblk)
{
	int P = roxshmem_state.n_pes, K = ep->topk, j = 0;
	uint64_t pay = (uint64_t)ep->hidden * ep->esize;
	for (int s = 0; s < P; s++)
		for (int i = 0; i < ep->counts[s]; i++, j++) {
			if (j % nblk != blk)
				continue;
			uint64_t lr = (uint64_t)(ep->start[s] + i);
			const uint8_t *row = ep->recv + lr * ep->row_bytes;
			const int32_t *meta = (const int32_t *)(row + ep->payload);
			for (int k = 0; k < K; k++) {
				if (meta[k] < 0 || meta[k] >= ep->local)
					continue;
				int r = ep->out_row[lr * K + k];
				roxa_copy(x + (uint64_t)r * pay, row, pay, roxa_tid(), roxa_nthreads(), ROXA_MEM_PLAIN, ROXA_MEM_PLAIN);
				if (roxa_tid() == 0) {
					src[3 * r] = s;
					src[3 * r + 1] = meta[2 * K];
					src[3 * r + 2] = k;
					w[r] = ep->out_w[lr * K + k];
				}
			}
		}
	roxa_sync_block();
}

/* The landing zone is free again: complete this PE's puts (its stage may be rewritten), then tell
 * every source. One block, after every copy block. */
ROXI_COLD void roxep_dispatch_ack(const roxep_t *ep, uint64_t epoch)
{
	int P = roxshmem_state.n_pes, me = roxshmem_state.my_pe;
	roxi_thread_drain();
	roxa_sync_block();
	if (roxa_tid() == 0) {
		if (ep->mode == ROXEP_LOW_LATENCY)
			for (int s = 0; s < P; s++)
				ep->arrived[s] += (uint64_t)ep->counts[s];
		roxshmem_quiet();
		for (int s = 0; s < P; s++)
			roxshmem_uint64_atomic_set(roxep_sig(ep, ROXEP_SIG_DISP_ACK, me), epoch, s);
	}
	roxa_sync_block();
}

/* float32 <-> payload element */
ROXA_FN float roxep_ld(const uint8_t *p, int esize, uint64_t j)
{
	uint32_t u;
	if (esize == ROXEP_BF16)
		u = (uint32_t)((const uint16_t *)p)[j] << 16;
	else
		u = ((const uint32_t *)p)[j];
	float f;
	roxa_bytecopy(&f, &u, 4);
	return f;
}
/* bf16: round to nearest even, a NaN stays a quiet NaN (shmem.BFloat16From) */
ROXA_FN void roxep_st(uint8_t *p, int esize, uint64_t j, float f)
{
	uint32_t u;
	roxa_bytecopy(&u, &f, 4);
	if (esize == ROXEP_F32) {
		((uint32_t *)p)[j] = u;
		return;
	}
	if ((u & 0x7fffffffu) > 0x7f800000u)
		u = (u >> 16 | 0x40u) << 16;
	else
		u += 0x7fffu + ((u >> 16) & 1u);
	((uint16_t *)p)[j] = (uint16_t)(u >> 16);
}

/* float32 products rounded on their own, never fused into an add: clang is told so in the functions
 * that multiply (fp contract off); nvcc, which contracts by default, gets the rounded intrinsic */
#if defined(__CUDACC__) && !defined(__clang__)
#define ROXEP_FMUL(a, b) __fmul_rn(a, b)
#else
#define ROXEP_FMUL(a, b) ((a) * (b))
#endif

/* The per-token unit of Combine: the partial sum of landing row lr (source s's slot i), over its
 * choices k in ascending order of weight*y (each product and sum rounded to float32: no fused
 * multiply-add), rounded to the payload type into out. */
ROXI_COLD void roxep_partial(const roxep_t *ep, const uint8_t *y, uint64_t lr, uint8_t *out)
{
#if defined(__clang__)
#pragma clang fp contract(off)
#endif
	int K = ep->topk;
	uint64_t pay = (uint64_t)ep->hidden * ep->esize;
	for (uint64_t j = roxa_tid(); j < (uint64_t)ep->hidden; j += roxa_nthreads()) {
		float acc = 0.0f;
		for (int k = 0; k < K; k++) {
			int r = ep->out_row[lr * K + k];
			if (r < 0)
				continue;
			float p = ROXEP_FMUL(ep->out_w[lr * K + k], roxep_ld(y + (uint64_t)r * pay, ep->esize, j));
			acc = acc + p;
		}
		roxep_st(out, ep->esize, j, acc);
	}
	roxi_thread_drain();
	roxa_sync_block();
}

/* The per-token unit of LowLatency Combine: source s's slot i's partial sum computed into its
 * stage row and pushed into slot i of this PE's region at s with a put-with-signal adding one. */
ROXI_COLD void roxep_ll_return_token(const roxep_t *ep, const uint8_t *y, int s, int i)
{
	int me = roxshmem_state.my_pe, M = ep->max_tokens;
	uint64_t pay = (uint64_t)ep->hidden * ep->esize;
	uint8_t *out = ep->cstage + (uint64_t)(s * M + i) * pay;
	roxep_partial(ep, y, (uint64_t)(ep->start[s] + i), out);
	roxshmemx_putmem_signal_nbi_block(ep->comb + (uint64_t)(me * M + i) * pay, out, pay, roxep_sig(ep, ROXEP_SIG_COMB, me), 1,
					  ROXSHMEM_SIGNAL_ADD, s);
}

/* Combine, sending side (any number of blocks): each received token's partial sum back to its
 * PE, into slot i of this PE's region there; LowLatency pushes each at once (put-with-signal adding
 * one), Normal stages them for roxep_normal_combine_flush. */
ROXI_COLD void roxep_combine_send(const roxep_t *ep, const uint8_t *y, uint64_t epoch, int blk, int nblk)
{
	int P = roxshmem_state.n_pes, me = roxshmem_state.my_pe, M = ep->max_tokens, j = 0;
	uint64_t pay = (uint64_t)ep->hidden * ep->esize;
	if (ep->mode == ROXEP_LOW_LATENCY)
		roxep_wait_acks(ep, ROXEP_SIG_COMB_ACK, epoch);
	for (int d = 0; d < P; d++) {
		int s = (me + 1 + d) % P;
		for (int i = 0; i < ep->counts[s]; i++, j++) {
			if (j % nblk != blk)
				continue;
			if (ep->mode == ROXEP_LOW_LATENCY)
				roxep_ll_return_token(ep, y, s, i);
			else
				roxep_partial(ep, y, (uint64_t)(ep->start[s] + i), ep->cstage + (uint64_t)(s * M + i) * pay);
		}
	}
	roxa_sync_block();
}

/* Normal combine, one block after the send blocks: each source's partial sums in one bulk put. */
ROXI_COLD void roxep_normal_combine_flush(const roxep_t *ep, uint64_t epoch)
{
	int P = roxshmem_state.n_pes, me = roxshmem_state.my_pe, M = ep->max_tokens;
	uint64_t pay = (uint64_t)ep->hidden * ep->esize;
	roxep_wait_acks(ep, ROXEP_SIG_COMB_ACK, epoch);
	for (int d = 0; d < P; d++) {
		int s = (me + 1 + d) % P;
		roxep_bulk(ep, ep->comb + (uint64_t)me * M * pay, ep->cstage + (uint64_t)s * M * pay, (uint64_t)ep->counts[s] * pay,
			   roxep_sig(ep, ROXEP_SIG_COMB, me), epoch, s);
	}
}

/* Combine, receiving side (any number of blocks; tokens split over them): wait for every PE's
 * partial sums, then out[t] = the float32 sum over PEs d ascending of t's partial from d, rounded
 * to the payload type once ([n][hidden]; a token with no expert combines to zeros). */
ROXI_COLD void roxep_combine_recv(const roxep_t *ep, uint8_t *out, int n, uint64_t epoch, int blk, int nblk)
{
	int P = roxshmem_state.n_pes, M = ep->max_tokens;
	uint64_t pay = (uint64_t)ep->hidden * ep->esize;
	for (int d = 0; d < P; d++)
		roxep_wait(ep, ROXEP_SIG_COMB, d,
			   ep->mode == ROXEP_LOW_LATENCY ? ep->carrived[d] + (uint64_t)ep->nsent[d] : epoch);
	roxa_sync_block();
	for (int t = blk; t < n; t += nblk) {
		for (uint64_t j = roxa_tid(); j < (uint64_t)ep->hidden; j += roxa_nthreads()) {
			float acc = 0.0f;
			for (int d = 0; d < P; d++) {
				int i = ep->slot_of[t * P + d];
				if (i >= 0)
					acc = acc + roxep_ld(ep->comb + (uint64_t)(d * M + i) * pay, ep->esize, j);
			}
			roxep_st(out + (uint64_t)t * pay, ep->esize, j, acc);
		}
	}
	roxa_sync_block();
}

/* The combine landing zone is free again: quiet, then tell every PE. One block, after the others. */
ROXI_COLD void roxep_combine_ack(const roxep_t *ep, uint64_t epoch)
{
	int P = roxshmem_state.n_pes, me = roxshmem_state.my_pe;
	roxi_thread_drain();
	roxa_sync_block();
	if (roxa_tid() == 0) {
		if (ep->mode == ROXEP_LOW_LATENCY)
			for (int d = 0; d < P; d++)
				ep->carrived[d] += (uint64_t)ep->nsent[d];
		roxshmem_quiet();
		for (int d = 0; d < P; d++)
			roxshmem_uint64_atomic_set(roxep_sig(ep, ROXEP_SIG_COMB_ACK, me), epoch, d);
	}
	roxa_sync_block();
}

#endif /* ROXA_GPU_LANG */
#endif /* ROXAMEN_EP_H */
