/* Expert-parallel dispatch and combine on the device (HIP dialect): what DeepEP gives NVSHMEM users,
 * over roxshmem.h's load/store path to mapped peers, signals, signal waits and quiet. The protocol,
 * the heap layout and the arithmetic are shmem/ep's (its package comment): a device PE and the host
 * reference give the same rows, the same order and the same bits.
 *
 * Every function is block level: every thread of the block calls it with the same arguments.
 * Functions that split work take (blk, nblk): the warps of block blk of nblk take the items
 * w, w+W, ... (w: the warp's index in the grid, W: the grid's warps), a warp an item (a row, a
 * token); where a block takes items, blk, blk+nblk, ... A Dispatch or Combine is a sequence of
 * phases, each a kernel launch on one stream (the stream orders them; no grid-wide barrier is
 * needed, and the blocks of a phase never wait for each other):
 *
 *   dispatch, LowLatency: roxep_route (1 block), roxep_dispatch_send (n blocks), roxep_dispatch_recv_count (n),
 *                         roxep_dispatch_recv_scan (1), roxep_dispatch_recv_copy (n), roxep_dispatch_ack (1)
 *   dispatch, Normal:     roxep_route (1), roxep_normal_layout (1), then as LowLatency
 *   combine, both modes:  roxep_combine_send (n), roxep_combine_recv (n), roxep_combine_ack (1)
 *
 * The rows go straight from the tokens (dispatch) or from the partial sums computed in registers
 * (combine) into their place in the peer's landing zone, by 16-byte stores through the mapped peer
 * heap, a warp per row; each block then adds the rows it wrote to each peer to that peer's arrival
 * counter of this PE (a put-with-signal whose data is the block's rows: every thread's stores
 * complete, the block meets, the leader's release add), and the receiver waits until a counter
 * reaches the rows it expects (in both modes: on the device Normal counts rows as LowLatency does,
 * where the host backend's bulk puts set the call number). A peer that is not mapped (another node) gets each row by a block's
 * put-with-signal adding one. Slots and output rows are numbered by scans: the routing's per
 * destination over runs of tokens (one block), the receiver's per expert over runs of rows (each
 * block counts its run, one block scans the counts, each block numbers its run).
 *
 * Ordering: each ROX_ORDERING mode gets its instructions from the library (MAPPING.md): Strict
 * writes the data with plain stores and releases it with a cache write-back before each signal;
 * CacheBypass writes it with cache-bypassing stores and only waits for their acknowledgement
 * before the signal. MAPPING.md's instruction-count table counts them. */
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

/* The most threads a block of the phases may have (their block scans' shared memory), and the most
 * blocks the receiving side's phases use (more are idle there). */
#define ROXEP_MAX_THREADS 1024
#define ROXEP_MAX_BLOCKS 1024

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
	uint32_t row_bytes; /* a multiple of 8 (shmem/ep: of 16) >= payload + 8K + 4: payload, K int32 local experts, K float weights, token */
	uint32_t pad;
	uint64_t ce_min;    /* unused (kept for the layout): rows move by the SMs or by a block's put */
	/* symmetric */
	uint8_t *recv;      /* [P*M] dispatch rows */
	uint8_t *comb;      /* [P*M] partial sums, hidden*esize bytes each */
	uint64_t *layout;   /* [P][P+E] counts (Normal) */
	uint64_t *sig;      /* [ROXEP_NSIGS][P] */
	/* local (device memory of this PE) */
	uint8_t *stage;     /* [P*M] rows this PE sends to an unmapped peer: destination d's at d*M */
	uint8_t *cstage;    /* [P*M] partial sums for an unmapped peer, or in an unaligned shape: source s's at s*M */
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
	uint64_t *arrived;  /* [P] dispatch rows counted so far, per source */
	uint64_t *carrived; /* [P] combine rows counted so far, per destination */
	uint32_t *scratch;  /* [P*M*K + ROXEP_MAX_BLOCKS*L] the receiving side's local experts per row and per-block counts */
} roxep_t;

ROXA_FN uint64_t *roxep_sig(const roxep_t *ep, int block, int pe) { return ep->sig + block * roxshmem_state.n_pes + pe; }
ROXA_FN uint8_t *roxep_stage_row(const roxep_t *ep, int d, int i) { return ep->stage + (uint64_t)(d * ep->max_tokens + i) * ep->row_bytes; }

/* Waits (thread 0) until this PE's signal (block, pe) is at least v; the block then proceeds. */
ROXA_FN void roxep_wait(const roxep_t *ep, int block, int pe, uint64_t v)
{
	if (roxa_tid() == 0)
		roxshmem_signal_wait_until(roxep_sig(ep, block, pe), ROXSHMEM_CMP_GE, v);
}

/* Block-shared memory: the block's on a GPU; in the CPU harness, whose blocks of one PE run one
 * after another on its group of threads, a static of the PE's library copy. */
#if defined(ROXA_HOST_GROUP)
#define ROXEP_SHARED static
#else
#define ROXEP_SHARED __shared__
#endif

/* The block's exclusive prefix sum of one value per thread, in thread order; *total gets the sum
 * (the values may pack several counts in 16-bit fields: fields add apart while no sum overflows).
 * Within each warp by its own barrier, then the warps' sums by the first warp: three block
 * barriers. */
ROXI_COLD uint64_t roxep_scan_block(uint64_t v, uint64_t *total)
{
	ROXEP_SHARED uint64_t buf[ROXEP_MAX_THREADS], wsum[ROXEP_MAX_THREADS];
	uint32_t tid = roxa_tid(), ws = roxa_warpsize(), lane = roxa_lane(), wi = tid / ws, nw = roxa_nthreads() / ws;
	uint64_t x = v;
	buf[tid] = x;
	roxa_sync_warp();
	for (uint32_t off = 1; off < ws; off <<= 1) {
		uint64_t y = lane >= off ? buf[tid - off] : 0;
		roxa_sync_warp();
		x += y;
		buf[tid] = x;
		roxa_sync_warp();
	}
	if (lane == ws - 1)
		wsum[wi] = x;
	roxa_sync_block();
	if (wi == 0) {
		uint64_t u = lane < nw ? wsum[lane] : 0, acc = u;
		buf[tid] = acc; /* warp 0's own slots: its lanes hold their first sums in x */
		roxa_sync_warp();
		for (uint32_t off = 1; off < ws; off <<= 1) {
			uint64_t y = lane >= off ? buf[tid - off] : 0;
			roxa_sync_warp();
			acc += y;
			buf[tid] = acc;
			roxa_sync_warp();
		}
		if (lane < nw)
			wsum[lane] = acc - u; /* the sums of the warps before warp lane */
		if (lane == ws - 1)
			wsum[ROXEP_MAX_THREADS - 1] = acc;
	}
	roxa_sync_block();
	uint64_t r = wsum[wi] + x - v;
	*total = wsum[ROXEP_MAX_THREADS - 1];
	roxa_sync_block(); /* every thread has read before the next call writes */
	return r;
}

/* The warps of the grid: this warp's index among them and their number. */
ROXA_FN int roxep_warps(void) { return (int)(roxa_nthreads() / roxa_warpsize()); }
ROXA_FN int roxep_gwarp(int blk) { return blk * roxep_warps() + (int)(roxa_tid() / roxa_warpsize()); }

/* The items of [j0, j0+n) that block blk's warps take when W warps of a grid share the items
 * 0, 1, ... (item j: warp j % W; block blk has warps [blk*w, blk*w+w)). */
ROXA_FN uint64_t roxep_block_share(uint64_t j0, uint64_t n, int blk, int w, int W)
{
	uint64_t lo = (uint64_t)blk * w, hi = lo + w;
	/* f(x): the items below x in the block's warps */
	uint64_t a = j0, b = j0 + n;
	uint64_t fa = a / W * w + (a % W > lo ? (a % W < hi ? a % W - lo : w) : 0);
	uint64_t fb = b / W * w + (b % W > lo ? (b % W < hi ? b % W - lo : w) : 0);
	return fb - fa;
}

/* pe's copy of this PE's symmetric address a when this PE reaches it by loads and stores (a mapped
 * peer, or itself where its atomics need no host), else 0. */
ROXA_FN uint8_t *roxep_mapped(const void *a, int pe)
{
	if (pe == roxshmem_state.my_pe ? roxi_amo_by_host(pe) && roxi_ring_enabled() : roxshmem_state.peer_base[pe] == 0)
		return 0;
	uint64_t off = (uint64_t)(uintptr_t)a - roxshmem_state.heap_base;
	return (uint8_t *)roxi_remote(off, pe);
}

/* The signal half of a put-with-signal whose data the whole block wrote to a PE by loads and
 * stores: every thread's stores complete, the block meets, then the leader adds v to s (that PE's
 * signal, roxep_mapped before the data), a release (Strict) or after the drain of the
 * cache-bypassing stores (CacheBypass); as roxshmem.h's load/store path orders its put-with-signal. */
ROXA_FN void roxep_signal_add_block(uint64_t *s, uint64_t v, int bypass)
{
	roxi_thread_drain();
	roxa_sync_block();
	if (roxa_tid() == 0 && v != 0) {
		if (!bypass) {
			roxa_add_release_u64(s, v);
		} else {
			roxa_drain();
			roxa_amo_u64(ROXSHMEM_AMO_FETCH_ADD, s, v, 0);
		}
	}
}

/* Route: which tokens go to which PE, in token order, and how many rows each expert gets.
 * idx[t*K+k] is token t's k-th expert, -1 for none. Only the device sees a stream-ordered call's
 * indices, so the range is checked here: an index outside [-1, experts) is recorded in the abort
 * block (ROXEP_CALL_EXPERT, detail: the value, saturated to int32; the host reports it at its next
 * synchronization with the stream, naming the PE and the value) and this PE then dispatches no
 * token in this call: its peers' calls complete, seeing no token from it, and none of its routing
 * travels. One block, a thread a token of each tile of tokens: the token's destinations as a bit
 * mask, then a block scan per four destinations (16-bit fields) numbers the tile's slots after
 * those of earlier tiles (nsent counts them); the experts' rows are counted in shared memory
 * (rows[0] is the refusal flag until roxep_dispatch_recv_scan writes the row count). */
#define ROXEP_HIST 4096 /* experts counted in shared memory; more are counted in device memory */
ROXI_COLD void roxep_route(const roxep_t *ep, const int64_t *idx, int n)
{
	ROXEP_SHARED uint32_t hist[ROXEP_HIST];
	int P = roxshmem_state.n_pes, K = ep->topk, L = ep->local, M = ep->max_tokens, E = ep->experts;
	uint32_t tid = roxa_tid(), nt = roxa_nthreads();
	uint32_t *bad = (uint32_t *)ep->rows;
	int sh = E <= ROXEP_HIST;
	for (int e = (int)tid; e < E; e += (int)nt) {
		ep->per_expert[e] = 0;
		if (sh)
			hist[e] = 0;
	}
	for (int d = (int)tid; d < P; d += (int)nt)
		ep->nsent[d] = 0;
	if (tid == 0)
		roxa_st_relaxed_u32(bad, 0);
	roxa_sync_block();
	for (int i = (int)tid; i < n * K; i += (int)nt) {
		int64_t e = idx[i];
		if (e < -1 || e >= E) {
			int64_t v = e < -2147483647LL - 1 ? -2147483647LL - 1 : e > 2147483647LL ? 2147483647LL : e;
			roxi_record(ROXEP_CALL_EXPERT, roxshmem_state.my_pe, (uint32_t)(int32_t)v);
			roxa_st_relaxed_u32(bad, 1);
		}
	}
	roxa_sync_block();
	/* refused: every token's slots are -1 (Combine returns zeros for them), nothing is sent */
	int kk = roxa_ld_relaxed_u32(bad) != 0 ? 0 : K;
	for (int t0 = 0; t0 < n; t0 += (int)nt) {
		int t = t0 + (int)tid;
		uint64_t mask = 0;
		if (t < n)
			for (int k = 0; k < kk; k++) {
				int64_t e = idx[t * K + k];
				if (e < 0)
					continue;
				mask |= 1ull << (e / L);
				if (sh)
					roxa_amo_u32(ROXSHMEM_AMO_FETCH_ADD, &hist[e], 1, 0);
				else
					roxa_amo_u64(ROXSHMEM_AMO_FETCH_ADD, &ep->per_expert[e], 1, 0);
			}
		for (int d0 = 0; d0 < P; d0 += 4) {
			uint64_t packed = 0, total;
			for (int q = 0; q < 4 && d0 + q < P; q++)
				packed |= ((mask >> (d0 + q)) & 1u) << (16 * q);
			uint64_t before = roxep_scan_block(packed, &total);
			for (int q = 0; q < 4 && d0 + q < P; q++) {
				int d = d0 + q, slot = ep->nsent[d] + (int)((before >> (16 * q)) & 0xffffu);
				if (t >= n)
					continue;
				if ((mask >> d) & 1u) {
					ep->slot_of[t * P + d] = slot;
					ep->sent[d * M + slot] = t;
				} else {
					ep->slot_of[t * P + d] = -1;
				}
			}
			roxa_sync_block(); /* every thread has read nsent */
			if (tid == 0)
				for (int q = 0; q < 4 && d0 + q < P; q++)
					ep->nsent[d0 + q] += (int)((total >> (16 * q)) & 0xffffu);
			roxa_sync_block();
		}
	}
	if (sh)
		for (int e = (int)tid; e < E; e += (int)nt)
			ep->per_expert[e] = hist[e];
	roxa_sync_block();
}

/* Token t's row for destination d into row (pe's landing row, or a stage row), by the calling
 * warp: per choice k the local expert at d (-1: elsewhere) and the weight, then t, after the
 * payload; then the payload; stores of mode st (the put's store mode, or plain for a stage row). */
ROXA_FN void roxep_write_row(const roxep_t *ep, uint8_t *row, const uint8_t *x, const int64_t *idx, const float *w, int t, int d,
			     int st)
{
	int K = ep->topk, L = ep->local;
	uint32_t lane = roxa_lane(), ws = roxa_warpsize();
	uint64_t pay = (uint64_t)ep->hidden * ep->esize;
	uint32_t *meta = (uint32_t *)(row + ep->payload);
	for (int q = (int)lane; q <= 2 * K; q += (int)ws) {
		uint32_t v;
		if (q < K) {
			int64_t e = idx[t * K + q];
			v = (uint32_t)(e >= 0 && (int)(e / L) == d ? (int32_t)(e - (int64_t)d * L) : -1);
		} else if (q < 2 * K) {
			roxa_bytecopy(&v, &w[t * K + q - K], 4);
		} else {
			v = (uint32_t)t;
		}
		if (st == ROXA_MEM_BYPASS)
			roxa_st_relaxed_u32(&meta[q], v);
		else
			meta[q] = v;
	}
	roxi_move(row, x + (uint64_t)t * pay, pay, lane, ws, ROXA_MEM_PLAIN, st);
}

/* Where slot i of this PE's rows at d lands in d's recv: LowLatency's fixed slots (this PE's
 * region), Normal's compact rows after those of lower PEs (the layouts roxep_normal_layout got). */
ROXA_FN uint8_t *roxep_landing(const roxep_t *ep, int d, int i)
{
	int me = roxshmem_state.my_pe, lw = roxshmem_state.n_pes + ep->experts;
	uint64_t r;
	if (ep->mode == ROXEP_LOW_LATENCY) {
		r = (uint64_t)(me * ep->max_tokens + i);
	} else {
		r = (uint64_t)i;
		for (int s = 0; s < me; s++)
			r += roxa_ld_relaxed_u64(ep->layout + (uint64_t)s * lw + d);
	}
	return ep->recv + r * ep->row_bytes;
}

/* The per-token unit of dispatch to a mapped PE d: token sent[d][i]'s row written by the calling
 * warp straight into its landing row at d. */
ROXA_FN void roxep_push_row(const roxep_t *ep, uint8_t *dst, const uint8_t *x, const int64_t *idx, const float *w, int d, int i)
{
	roxep_write_row(ep, dst, x, idx, w, ep->sent[d * ep->max_tokens + i], d, roxi_store_mode());
}

/* The per-token unit of dispatch to an unmapped PE d: the row built in its stage row and put by
 * the block with a put-with-signal adding one to d's arrival counter of this PE. */
ROXI_COLD void roxep_put_token(const roxep_t *ep, uint8_t *dst, const uint8_t *x, const int64_t *idx, const float *w, int d, int i)
{
	int me = roxshmem_state.my_pe;
	uint8_t *row = roxep_stage_row(ep, d, i);
	if (roxa_tid() < roxa_warpsize())
		roxep_write_row(ep, row, x, idx, w, ep->sent[d * ep->max_tokens + i], d, ROXA_MEM_PLAIN);
	roxi_thread_drain();
	roxa_sync_block();
	roxshmemx_putmem_signal_nbi_block(dst, row, ep->row_bytes, roxep_sig(ep, ROXEP_SIG_DATA, me), 1, ROXSHMEM_SIGNAL_ADD, d);
}

/* LowLatency's per-token unit as one block (the mapping probes' unit): the row by warp 0 into slot
 * i of this PE's region at d, then the block's signal adding one. */
ROXI_COLD void roxep_ll_push_token(const roxep_t *ep, const uint8_t *x, const int64_t *idx, const float *w, int d, int i)
{
	int me = roxshmem_state.my_pe;
	uint8_t *dst = roxep_mapped(ep->recv + (uint64_t)(me * ep->max_tokens + i) * ep->row_bytes, d);
	uint64_t *sig = (uint64_t *)roxep_mapped(roxep_sig(ep, ROXEP_SIG_DATA, me), d);
	int bypass = roxi_bypass();
	if (roxa_tid() < roxa_warpsize())
		roxep_push_row(ep, dst, x, idx, w, d, i);
	roxep_signal_add_block(sig, 1, bypass);
}

/* Each destination must have consumed the previous call's data (epoch-1) before it is overwritten. */
ROXA_FN void roxep_wait_acks(const roxep_t *ep, int block, uint64_t epoch)
{
	for (int d = 0; d < roxshmem_state.n_pes; d++)
		roxep_wait(ep, block, d, epoch - 1);
	roxa_sync_block();
}

/* Normal dispatch, one block, before the send: the layout (tokens per PE, rows per expert) to
 * every PE once each destination has consumed the previous call, then every PE's layout. */
ROXI_COLD void roxep_normal_layout(const roxep_t *ep, uint64_t epoch)
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
}

/* Dispatch, sending side (any number of blocks; both modes): every token's row for each of its
 * destinations (d from the next PE on, as DeepEP does, so that the PEs do not all hit one PE first;
 * item j a warp's), then each block's rows counted into each mapped destination's arrival counter
 * of this PE; LowLatency also sends each destination its token count (block 0). */
ROXI_COLD void roxep_dispatch_send(const roxep_t *ep, const uint8_t *x, const int64_t *idx, const float *w, uint64_t epoch,
				   int blk, int nblk)
{
	int P = roxshmem_state.n_pes, me = roxshmem_state.my_pe;
	int nw = roxep_warps(), W = nblk * nw, gw = roxep_gwarp(blk);
	if (ep->mode == ROXEP_LOW_LATENCY)
		roxep_wait_acks(ep, ROXEP_SIG_DISP_ACK, epoch); /* Normal: roxep_normal_layout waited */
	uint64_t *sig = roxep_sig(ep, ROXEP_SIG_DATA, me);
	int j0 = 0;
	for (int d = 0; d < P; d++) {
		int dd = (me + 1 + d) % P, n = ep->nsent[dd];
		uint8_t *base = roxep_landing(ep, dd, 0);
		uint8_t *peer = roxep_mapped(base, dd);
		if (peer != 0) {
			uint64_t *psig = (uint64_t *)roxep_mapped(sig, dd);
			uint64_t v = roxep_block_share((uint64_t)j0, (uint64_t)n, blk, nw, W);
			int bypass = roxi_bypass();
			for (int j = j0 + ((gw - j0 % W) % W + W) % W; j < j0 + n; j += W)
				roxep_push_row(ep, peer + (uint64_t)(j - j0) * ep->row_bytes, x, idx, w, dd, j - j0);
			roxep_signal_add_block(psig, v, bypass);
		} else {
			for (int i = blk; i < n; i += nblk)
				roxep_put_token(ep, base + (uint64_t)i * ep->row_bytes, x, idx, w, dd, i);
		}
		j0 += n;
	}
	if (ep->mode == ROXEP_LOW_LATENCY && blk == 0 && roxa_tid() == 0)
		for (int d = 0; d < P; d++)
			roxshmem_uint64_atomic_set(roxep_sig(ep, ROXEP_SIG_COUNT, me), epoch << 32 | (uint64_t)ep->nsent[d], d);
	roxa_sync_block();
}

/* Received row q's landing row (rows in source order, then slot order), given each source's
 * count and first landing row. */
ROXA_FN uint64_t roxep_recv_row(const int32_t *counts, const int32_t *start, int q, int *src)
{
	int s = 0;
	while (q >= counts[s])
		q -= counts[s++];
	*src = s;
	return (uint64_t)(start[s] + q);
}

/* The receiving side's blocks: block blk of nb takes the received rows [q0, q1), a contiguous run. */
ROXA_FN int roxep_recv_blocks(int nblk) { return nblk < ROXEP_MAX_BLOCKS ? nblk : ROXEP_MAX_BLOCKS; }
ROXA_FN void roxep_recv_run(int R, int blk, int nb, int *q0, int *q1)
{
	int per = (R + nb - 1) / nb;
	*q0 = blk * per < R ? blk * per : R;
	*q1 = *q0 + per < R ? *q0 + per : R;
}

/* Receiving side, first of three phases (any number of blocks): wait for every PE's rows (each
 * block), then each block copies the local experts of its run of rows into scratch (a row's K
 * choices side by side, -1 for an expert elsewhere) and counts its rows per local expert. */
ROXI_COLD void roxep_dispatch_recv_count(const roxep_t *ep, uint64_t epoch, int blk, int nblk)
{
	int P = roxshmem_state.n_pes, M = ep->max_tokens, K = ep->topk, L = ep->local, lw = P + ep->experts;
	uint32_t tid = roxa_tid(), nt = roxa_nthreads();
	ROXEP_SHARED int32_t cnt[ROXSHMEM_MAX_PES], st[ROXSHMEM_MAX_PES];
	if (tid == 0)
		for (int s = 0; s < P; s++) {
			if (ep->mode == ROXEP_LOW_LATENCY) {
				uint64_t v = roxshmem_signal_wait_until(roxep_sig(ep, ROXEP_SIG_COUNT, s), ROXSHMEM_CMP_GE, epoch << 32);
				cnt[s] = (int32_t)(v & 0xffffffffu);
				st[s] = s * M;
			} else {
				cnt[s] = (int32_t)roxa_ld_relaxed_u64(ep->layout + (uint64_t)s * lw + roxshmem_state.my_pe);
				st[s] = s == 0 ? 0 : st[s - 1] + cnt[s - 1];
			}
			roxshmem_signal_wait_until(roxep_sig(ep, ROXEP_SIG_DATA, s), ROXSHMEM_CMP_GE, ep->arrived[s] + (uint64_t)cnt[s]);
			if (blk == 0) {
				ep->counts[s] = cnt[s];
				ep->start[s] = st[s];
			}
		}
	roxa_sync_block();
	int nb = roxep_recv_blocks(nblk), R = 0, q0, q1;
	if (blk >= nb)
		return;
	for (int s = 0; s < P; s++)
		R += cnt[s];
	roxep_recv_run(R, blk, nb, &q0, &q1);
	int32_t *cmeta = (int32_t *)ep->scratch, *hist = cmeta + (uint64_t)P * M * K + (uint64_t)blk * L;
	for (int l = (int)tid; l < L; l += (int)nt)
		hist[l] = 0;
	roxa_sync_block();
	for (int e = q0 * K + (int)tid; e < q1 * K; e += (int)nt) {
		int s, k = e % K;
		uint64_t lr = roxep_recv_row(cnt, st, e / K, &s);
		int32_t l = ((const int32_t *)(ep->recv + lr * ep->row_bytes + ep->payload))[k];
		if (l < 0 || l >= L) {
			l = -1;
			ep->out_row[lr * K + k] = -1;
		} else {
			roxa_amo_u32(ROXSHMEM_AMO_FETCH_ADD, (uint32_t *)&hist[l], 1, 0);
		}
		cmeta[e] = l;
	}
	roxa_sync_block();
}

/* Receiving side, second phase (one block; nblk: the first and third phases' blocks): expert l's
 * first row from block b is the rows of lower experts, then those of l from lower blocks; the
 * per-expert counts and offsets. A thread per expert reads 16 blocks' counts at once. */
ROXI_COLD void roxep_dispatch_recv_scan(const roxep_t *ep, int nblk)
{
	int P = roxshmem_state.n_pes, M = ep->max_tokens, K = ep->topk, L = ep->local, nb = roxep_recv_blocks(nblk);
	uint32_t tid = roxa_tid(), nt = roxa_nthreads();
	int32_t *hist = (int32_t *)ep->scratch + (uint64_t)P * M * K;
	for (int l = (int)tid; l < L; l += (int)nt) {
		int run = 0;
		for (int b0 = 0; b0 < nb; b0 += 16) {
			int32_t v[16];
			for (int u = 0; u < 16; u++)
				v[u] = b0 + u < nb ? hist[(b0 + u) * L + l] : 0;
			for (int u = 0; u < 16 && b0 + u < nb; u++) {
				hist[(b0 + u) * L + l] = run;
				run += v[u];
			}
		}
		ep->ecount[l] = run;
	}
	roxa_sync_block();
	int carry = 0;
	for (int l0 = 0; l0 < L; l0 += (int)nt) {
		int l = l0 + (int)tid;
		uint64_t total;
		int off = (int)roxep_scan_block(l < L ? (uint64_t)ep->ecount[l] : 0, &total);
		if (l < L) {
			ep->eoff[l] = carry + off;
			for (int b = 0; b < nb; b++)
				hist[b * L + l] += carry + off;
		}
		carry += (int)total;
	}
	if (tid == 0) {
		ep->eoff[L] = carry;
		ep->rows[0] = carry;
	}
	roxa_sync_block();
}

/* Receiving side, third phase (the first phase's blocks, each its run of rows): each choice's
 * output row (its expert's next row, in row then choice order: a tile of choices in shared
 * memory, each thread counting the earlier choices of its expert), then the payloads copied into
 * their output rows x ([rows][hidden]) by the block's warps, a (row, choice) each, with each row's
 * source (src[r*3..]: PE, token, k) and weight. */
ROXI_COLD void roxep_dispatch_recv_copy(const roxep_t *ep, uint8_t *x, int32_t *src, float *w, int blk, int nblk)
{
	int P = roxshmem_state.n_pes, M = ep->max_tokens, K = ep->topk, L = ep->local, nb = roxep_recv_blocks(nblk), R = 0, q0, q1;
	uint32_t tid = roxa_tid(), nt = roxa_nthreads();
	uint64_t pay = (uint64_t)ep->hidden * ep->esize;
	ROXEP_SHARED int32_t tile[ROXEP_MAX_THREADS];
	if (blk >= nb)
		return;
	for (int s = 0; s < P; s++)
		R += ep->counts[s];
	roxep_recv_run(R, blk, nb, &q0, &q1);
	const int32_t *cmeta = (const int32_t *)ep->scratch;
	int32_t *next = (int32_t *)ep->scratch + (uint64_t)P * M * K + (uint64_t)blk * L;
	for (int e0 = q0 * K; e0 < q1 * K; e0 += (int)nt) {
		int e = e0 + (int)tid, n = q1 * K - e0 < (int)nt ? q1 * K - e0 : (int)nt;
		int32_t l = e < q1 * K ? cmeta[e] : -1;
		tile[tid] = l;
		roxa_sync_block();
		int rank = 0, last = 1, r = -1;
		if (l >= 0) {
			for (int u = 0; u < n; u++)
				if (tile[u] == l) {
					rank += u < (int)tid;
					last &= u <= (int)tid;
				}
			r = next[l] + rank;
		}
		roxa_sync_block();
		if (l >= 0) {
			int s, k = e % K;
			uint64_t lr = roxep_recv_row(ep->counts, ep->start, e / K, &s);
			const int32_t *meta = (const int32_t *)(ep->recv + lr * ep->row_bytes + ep->payload);
			ep->out_row[lr * K + k] = r;
			roxa_bytecopy(&ep->out_w[lr * K + k], &meta[K + k], 4);
			if (last)
				next[l] = r + 1;
		}
		roxa_sync_block();
	}
	int nw = roxep_warps(), wi = (int)(tid / roxa_warpsize());
	for (int e = q0 * K + wi; e < q1 * K; e += nw) {
		if (cmeta[e] < 0)
			continue;
		int s, k = e % K;
		uint64_t lr = roxep_recv_row(ep->counts, ep->start, e / K, &s);
		const uint8_t *row = ep->recv + lr * ep->row_bytes;
		int r = ep->out_row[lr * K + k];
		roxi_move(x + (uint64_t)r * pay, row, pay, roxa_lane(), roxa_warpsize(), ROXA_MEM_PLAIN, ROXA_MEM_PLAIN);
		if (roxa_lane() == 0) {
			src[3 * r] = s;
			src[3 * r + 1] = ((const int32_t *)(row + ep->payload))[2 * K];
			src[3 * r + 2] = k;
			w[r] = ep->out_w[lr * K + k];
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
		for (int s = 0; s < P; s++)
			ep->arrived[s] += (uint64_t)ep->counts[s];
		roxshmem_quiet();
		for (int s = 0; s < P; s++)
			roxshmem_uint64_atomic_set(roxep_sig(ep, ROXEP_SIG_DISP_ACK, me), epoch, s);
	}
	roxa_sync_block();
}

/* float32 <-> payload element */
ROXA_FN float roxep_f32(uint32_t u)
{
	float f;
	roxa_bytecopy(&f, &u, 4);
	return f;
}
ROXA_FN float roxep_ld(const uint8_t *p, int esize, uint64_t j)
{
	if (esize == ROXEP_BF16)
		return roxep_f32((uint32_t)((const uint16_t *)p)[j] << 16);
	return roxep_f32(((const uint32_t *)p)[j]);
}
/* bf16: round to nearest even, a NaN stays a quiet NaN (shmem.BFloat16From) */
ROXA_FN uint32_t roxep_bf16(float f)
{
	uint32_t u;
	roxa_bytecopy(&u, &f, 4);
	if ((u & 0x7fffffffu) > 0x7f800000u)
		u = (u >> 16 | 0x40u) << 16;
	else
		u += 0x7fffu + ((u >> 16) & 1u);
	return u >> 16;
}
ROXA_FN void roxep_st(uint8_t *p, int esize, uint64_t j, float f)
{
	if (esize == ROXEP_F32)
		roxa_bytecopy((uint32_t *)p + j, &f, 4);
	else
		((uint16_t *)p)[j] = (uint16_t)roxep_bf16(f);
}
/* 16 bytes <-> their 8 (bf16) or 4 (float32) elements */
ROXA_FN void roxep_unpack(roxa_u128 v, int esize, float *f)
{
	uint32_t u[4] = {(uint32_t)v.x, (uint32_t)(v.x >> 32), (uint32_t)v.y, (uint32_t)(v.y >> 32)};
	_Pragma("unroll") for (int e = 0; e < 4; e++) {
		if (esize == ROXEP_BF16) {
			f[2 * e] = roxep_f32(u[e] << 16);
			f[2 * e + 1] = roxep_f32(u[e] & 0xffff0000u);
		} else {
			f[e] = roxep_f32(u[e]);
		}
	}
}
ROXA_FN roxa_u128 roxep_pack(const float *f, int esize)
{
	uint32_t u[4];
	_Pragma("unroll") for (int e = 0; e < 4; e++) {
		if (esize == ROXEP_BF16)
			u[e] = roxep_bf16(f[2 * e]) | roxep_bf16(f[2 * e + 1]) << 16;
		else
			roxa_bytecopy(&u[e], &f[e], 4);
	}
	roxa_u128 v;
	v.x = (uint64_t)u[0] | (uint64_t)u[1] << 32;
	v.y = (uint64_t)u[2] | (uint64_t)u[3] << 32;
	return v;
}

/* float32 products rounded on their own, never fused into an add: clang is told so in the functions
 * that multiply (fp contract off); nvcc, which contracts by default, gets the rounded intrinsic */
#if defined(__CUDACC__) && !defined(__clang__)
#define ROXEP_FMUL(a, b) __fmul_rn(a, b)
#else
#define ROXEP_FMUL(a, b) ((a) * (b))
#endif

/* Registers of a lane in roxep_partial's 16-byte loop: the choices (rows, weights) it keeps, and
 * the 16-byte chunks it has in flight (each with its 8 or 4 sums). (roxep_combine_recv with its
 * sources in registers and 4 chunks in flight measured 1721 us at 4096 tokens against 301 us
 * for the loop below: docs/gpu-ep-h200.md.) */
#define ROXEP_KREG 16
#if defined(ROXA_AMDGCN)
#define ROXEP_UNROLL 1 /* a kernel without launch bounds has 128 VGPRs a lane: more chunks spilled there */
#else
#define ROXEP_UNROLL 4
#endif

/* ROXEP_UNROLL chunks of 16 bytes of the partial sum at a time (roxep_partial, K <= ROXEP_KREG,
 * rows and weights in rr, ww): ES the payload type, N its elements in 16 bytes */
#define ROXEP_PARTIAL16(ES, N)                                                                      \
	for (uint64_t c = lane; c < n16; c += ROXEP_UNROLL * ws) {                                  \
		float acc[ROXEP_UNROLL][N], f[N];                                                   \
		_Pragma("unroll") for (int u = 0; u < ROXEP_UNROLL; u++)                                              \
			_Pragma("unroll") for (int e = 0; e < N; e++)                                                 \
				acc[u][e] = 0.0f;                                                   \
		_Pragma("unroll") for (int k = 0; k < ROXEP_KREG; k++) {                                              \
			if (rr[k] < 0)                                                              \
				continue;                                                           \
			roxa_u128 v[ROXEP_UNROLL];                                                  \
			_Pragma("unroll") for (int u = 0; u < ROXEP_UNROLL; u++)                                      \
				v[u].x = v[u].y = 0;                                                \
			_Pragma("unroll") for (int u = 0; u < ROXEP_UNROLL; u++)                                      \
				if (c + u * ws < n16)                                               \
					v[u] = roxa_ld16(y + (uint64_t)rr[k] * pay + 16 * (c + u * ws), ROXA_MEM_PLAIN); \
			_Pragma("unroll") for (int u = 0; u < ROXEP_UNROLL; u++) {                                    \
				roxep_unpack(v[u], ES, f);                                          \
				_Pragma("unroll") for (int e = 0; e < N; e++)                                         \
					acc[u][e] = acc[u][e] + ROXEP_FMUL(ww[k], f[e]);            \
			}                                                                           \
		}                                                                                   \
		_Pragma("unroll") for (int u = 0; u < ROXEP_UNROLL; u++)                                              \
			if (c + u * ws < n16) {                                                     \
				roxa_u128 o = roxep_pack(acc[u], ES);                               \
				roxa_st16(out + 16 * (c + u * ws), &o, st);                         \
			}                                                                           \
	}

/* The per-token unit of Combine, by the calling warp: the partial sum of landing row lr over its
 * choices k in ascending order of weight*y (each product and sum rounded to float32: no fused
 * multiply-add), rounded to the payload type into out with stores of mode st. With y, out and the
 * payload 16-byte aligned a lane takes 16 bytes at a time (its 8 or 4 sums in registers); else an
 * element. */
ROXI_COLD void roxep_partial(const roxep_t *ep, const uint8_t *y, uint64_t lr, uint8_t *out, int st)
{
#if defined(__clang__)
#pragma clang fp contract(off)
#endif
	int K = ep->topk, es = ep->esize;
	uint64_t pay = (uint64_t)ep->hidden * es;
	const int32_t *rows = ep->out_row + lr * K;
	const float *wt = ep->out_w + lr * K;
	uint32_t lane = roxa_lane(), ws = roxa_warpsize();
	if ((((uintptr_t)y | (uintptr_t)out | pay) & 15) != 0) {
		for (uint64_t j = lane; j < (uint64_t)ep->hidden; j += ws) {
			float acc = 0.0f;
			for (int k = 0; k < K; k++) {
				int r = rows[k];
				if (r < 0)
					continue;
				acc = acc + ROXEP_FMUL(wt[k], roxep_ld(y + (uint64_t)r * pay, es, j));
			}
			if (st == ROXA_MEM_PLAIN) {
				roxep_st(out, es, j, acc);
			} else if (es == ROXEP_F32) {
				uint32_t u;
				roxa_bytecopy(&u, &acc, 4);
				roxa_st_relaxed_u32((uint32_t *)out + j, u);
			} else {
				roxa_st_relaxed_u16((uint16_t *)out + j, (uint16_t)roxep_bf16(acc));
			}
		}
		return;
	}
	/* the choices and the element count literals in each branch, so that the sums stay in registers */
	if (K <= ROXEP_KREG) {
		int rr[ROXEP_KREG];
		float ww[ROXEP_KREG];
		_Pragma("unroll") for (int k = 0; k < ROXEP_KREG; k++) {
			rr[k] = k < K ? rows[k] : -1;
			ww[k] = k < K ? wt[k] : 0.0f;
		}
		uint64_t n16 = pay / 16;
		if (es == ROXEP_BF16) {
			ROXEP_PARTIAL16(ROXEP_BF16, 8)
		} else {
			ROXEP_PARTIAL16(ROXEP_F32, 4)
		}
		return;
	}
	for (uint64_t c = lane; c < pay / 16; c += ws) {
		float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0}, f[8];
		int per = 16 / es;
		for (int k = 0; k < K; k++) {
			int r = rows[k];
			if (r < 0)
				continue;
			float wk = wt[k];
			roxep_unpack(roxa_ld16(y + (uint64_t)r * pay + 16 * c, ROXA_MEM_PLAIN), es, f);
			for (int e = 0; e < per; e++)
				acc[e] = acc[e] + ROXEP_FMUL(wk, f[e]);
		}
		roxa_u128 o = roxep_pack(acc, es);
		roxa_st16(out + 16 * c, &o, st);
	}
}

/* The per-token unit of Combine to a mapped PE s, as one block (the mapping probes' unit): source
 * s's slot i's partial sum by warp 0 straight into slot i of this PE's region at s, then the
 * block's signal adding one. */
ROXI_COLD void roxep_ll_return_token(const roxep_t *ep, const uint8_t *y, int s, int i)
{
	int me = roxshmem_state.my_pe, M = ep->max_tokens;
	uint64_t pay = (uint64_t)ep->hidden * ep->esize;
	uint8_t *dst = roxep_mapped(ep->comb + (uint64_t)(me * M + i) * pay, s);
	uint64_t *sig = (uint64_t *)roxep_mapped(roxep_sig(ep, ROXEP_SIG_COMB, me), s);
	int bypass = roxi_bypass();
	if (roxa_tid() < roxa_warpsize())
		roxep_partial(ep, y, (uint64_t)(ep->start[s] + i), dst, roxi_store_mode());
	roxep_signal_add_block(sig, 1, bypass);
}

/* Combine, sending side (any number of blocks; both modes): each received token's partial sum
 * straight into slot i of this PE's region at its PE (a warp a token), then each block's rows
 * counted into each PE's combine counter of this PE; to an unmapped PE the block computes the sum
 * into its stage row and puts it with a put-with-signal adding one. */
ROXI_COLD void roxep_combine_send(const roxep_t *ep, const uint8_t *y, uint64_t epoch, int blk, int nblk)
{
	int P = roxshmem_state.n_pes, me = roxshmem_state.my_pe, M = ep->max_tokens;
	int nw = roxep_warps(), W = nblk * nw, gw = roxep_gwarp(blk);
	uint64_t pay = (uint64_t)ep->hidden * ep->esize;
	uint64_t *sig = roxep_sig(ep, ROXEP_SIG_COMB, me);
	roxep_wait_acks(ep, ROXEP_SIG_COMB_ACK, epoch);
	int j0 = 0;
	for (int d = 0; d < P; d++) {
		int s = (me + 1 + d) % P, n = ep->counts[s];
		uint8_t *base = ep->comb + (uint64_t)me * M * pay;
		uint8_t *peer = roxep_mapped(base, s);
		if (peer != 0) {
			uint64_t *psig = (uint64_t *)roxep_mapped(sig, s);
			uint64_t v = roxep_block_share((uint64_t)j0, (uint64_t)n, blk, nw, W);
			int bypass = roxi_bypass();
			for (int j = j0 + ((gw - j0 % W) % W + W) % W; j < j0 + n; j += W)
				roxep_partial(ep, y, (uint64_t)(ep->start[s] + j - j0), peer + (uint64_t)(j - j0) * pay, bypass ? ROXA_MEM_BYPASS : ROXA_MEM_PLAIN);
			roxep_signal_add_block(psig, v, bypass);
		} else {
			for (int i = blk; i < n; i += nblk) {
				uint8_t *out = ep->cstage + (uint64_t)(s * M + i) * pay;
				if (roxa_tid() < roxa_warpsize())
					roxep_partial(ep, y, (uint64_t)(ep->start[s] + i), out, ROXA_MEM_PLAIN);
				roxi_thread_drain();
				roxa_sync_block();
				roxshmemx_putmem_signal_nbi_block(base + (uint64_t)i * pay, out, pay, sig, 1, ROXSHMEM_SIGNAL_ADD, s);
			}
		}
		j0 += n;
	}
	roxa_sync_block();
}

/* 16 bytes of token t's sum at a time (roxep_combine_recv): ES the payload type, N its elements */
#define ROXEP_SUM16(ES, N)                                                                          \
	for (uint64_t c = lane; c < pay / 16; c += ws) {                                            \
		float acc[N], f[N];                                                                 \
		for (int e = 0; e < N; e++)                                                         \
			acc[e] = 0.0f;                                                              \
		for (int d = 0; d < P; d++) {                                                       \
			int i = slot[d];                                                            \
			if (i < 0)                                                                  \
				continue;                                                           \
			roxep_unpack(roxa_ld16(ep->comb + (uint64_t)(d * M + i) * pay + 16 * c, ROXA_MEM_PLAIN), ES, f); \
			for (int e = 0; e < N; e++)                                                 \
				acc[e] = acc[e] + f[e];                                             \
		}                                                                                   \
		roxa_u128 v = roxep_pack(acc, ES);                                                  \
		roxa_st16(o + 16 * c, &v, ROXA_MEM_PLAIN);                                          \
	}

/* Combine, receiving side (any number of blocks; a warp a token): wait for every PE's partial
 * sums, then out[t] = the float32 sum over PEs d ascending of t's partial from d, rounded to the
 * payload type once ([n][hidden]; a token with no expert combines to zeros). */
ROXI_COLD void roxep_combine_recv(const roxep_t *ep, uint8_t *out, int n, uint64_t epoch, int blk, int nblk)
{
	(void)epoch;
	int P = roxshmem_state.n_pes, M = ep->max_tokens, es = ep->esize;
	int W = nblk * roxep_warps(), gw = roxep_gwarp(blk);
	uint64_t pay = (uint64_t)ep->hidden * es;
	uint32_t lane = roxa_lane(), ws = roxa_warpsize();
	for (int d = 0; d < P; d++)
		roxep_wait(ep, ROXEP_SIG_COMB, d, ep->carrived[d] + (uint64_t)ep->nsent[d]);
	roxa_sync_block();
	int vec = ((((uintptr_t)out | (uintptr_t)ep->comb | pay) & 15) == 0);
	for (int t = gw; t < n; t += W) {
		const int32_t *slot = ep->slot_of + t * P;
		uint8_t *o = out + (uint64_t)t * pay;
		if (vec && es == ROXEP_BF16) {
			ROXEP_SUM16(ROXEP_BF16, 8)
		} else if (vec) {
			ROXEP_SUM16(ROXEP_F32, 4)
		} else {
			for (uint64_t j = lane; j < (uint64_t)ep->hidden; j += ws) {
				float acc = 0.0f;
				for (int d = 0; d < P; d++) {
					int i = slot[d];
					if (i >= 0)
						acc = acc + roxep_ld(ep->comb + (uint64_t)(d * M + i) * pay, es, j);
				}
				roxep_st(o, es, j, acc);
			}
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
