/* Tensor-parallel GEMM with its all-reduce or reduce-scatter fused in, on the device (HIP dialect):
 * shmem/tp's algorithm. Each PE p computes the partial C_p = A_p B_p ([m][k] x [k][n],
 * row-major float32) tile by tile; the fused variant pushes every tile with one put-with-signal as
 * soon as it is computed, and the consumer waits on each tile's signals and reduces in PE order.
 * The unfused variant runs the same tile code into a whole matrix and then coll.h's all-reduce.
 *
 * Arithmetic: element (i, j) of a tile is a chain of fused multiply-adds over k ascending (the
 * same in both variants: one function computes every tile); a reduced element is
 * ((C_0 + C_1) + C_2) + ... in PE order, which is also coll.h's order, so the two variants agree
 * bit for bit.
 *
 * Block level (every thread of the block calls with the same arguments). scratch: shared memory of
 * at least ROXGEMM_SCRATCH(tile_m, tile_n) floats. */
#ifndef ROXAMEN_GEMM_H
#define ROXAMEN_GEMM_H

#include "roxshmem.h"

#ifdef ROXA_GPU_LANG

#define ROXGEMM_ALLREDUCE 0
#define ROXGEMM_REDUCE_SCATTER 1
#define ROXGEMM_TK 16                            /* k depth of one staged chunk */
#define ROXGEMM_ACC 16                           /* accumulators per thread */
#define ROXGEMM_SCRATCH(tm, tn) (((tm) + (tn)) * ROXGEMM_TK)
#if defined(__CUDACC__) && !defined(__clang__)
#define ROXGEMM_FMA(a, b, c) fmaf(a, b, c) /* nvcc's device fmaf */
#else
#define ROXGEMM_FMA(a, b, c) __builtin_fmaf(a, b, c)
#endif

typedef struct roxgemm {
	int32_t m, n, k;       /* this PE's shard: A [m][k], B [k][n] */
	int32_t tile_m, tile_n;
	int32_t tm, tn, tiles; /* tiles down, across, in all (row-major order) */
	int32_t op;            /* ROXGEMM_ALLREDUCE or ROXGEMM_REDUCE_SCATTER */
	uint32_t slot;         /* floats of one tile slot: tile_m * tile_n */
	/* symmetric */
	float *part;           /* [P][tiles][slot]: PE s's partial of tile t at (s*tiles + t)*slot */
	uint64_t *tsig;        /* [tiles][P]: the step of PE s's partial of tile t */
	uint64_t *ack;         /* [P]: the step whose partials PE s has consumed */
	/* local */
	float *stage;          /* [tiles][slot]: this PE's partial tiles */
} roxgemm_t;

ROXA_FN void roxgemm_extent(const roxgemm_t *g, int t, int *i0, int *j0, int *mt, int *nt)
{
	*i0 = (t / g->tn) * g->tile_m;
	*j0 = (t % g->tn) * g->tile_n;
	*mt = g->m - *i0 < g->tile_m ? g->m - *i0 : g->tile_m;
	*nt = g->n - *j0 < g->tile_n ? g->n - *j0 : g->tile_n;
}

/* The PE that reduces tile t in a reduce-scatter: tile rows [p*tm/P, (p+1)*tm/P) are PE p's. */
ROXA_FN int roxgemm_owner(const roxgemm_t *g, int t)
{
	int P = roxshmem_state.n_pes, r = t / g->tn;
	for (int p = 0; p < P; p++)
		if (r < (p + 1) * g->tm / P)
			return p;
	return P - 1;
}

/* Tile t of A B into dst (leading dimension ldd). */
ROXI_COLD void roxgemm_tile(const roxgemm_t *g, const float *A, const float *B, int t, float *dst, int ldd, float *scratch)
{
	int i0, j0, mt, nt;
	roxgemm_extent(g, t, &i0, &j0, &mt, &nt);
	uint32_t tid = roxa_tid(), nth = roxa_nthreads();
	int TM = g->tile_m, TN = g->tile_n;
	float *sA = scratch, *sB = scratch + TM * ROXGEMM_TK;
	/* the tile's elements in passes of nth * ROXGEMM_ACC (one pass at 256 threads and 64x64) */
	for (int base = 0; base < mt * nt; base += (int)nth * ROXGEMM_ACC) {
		float acc[ROXGEMM_ACC];
		for (int r = 0; r < ROXGEMM_ACC; r++)
			acc[r] = 0.0f;
		for (int k0 = 0; k0 < g->k; k0 += ROXGEMM_TK) {
			int kc = g->k - k0 < ROXGEMM_TK ? g->k - k0 : ROXGEMM_TK;
			roxa_sync_block(); /* the previous chunk is no longer read */
			for (int e = (int)tid; e < mt * ROXGEMM_TK; e += (int)nth) {
				int i = e / ROXGEMM_TK, kk = e % ROXGEMM_TK;
				sA[i * ROXGEMM_TK + kk] = kk < kc ? A[(uint64_t)(i0 + i) * g->k + k0 + kk] : 0.0f;
			}
			for (int e = (int)tid; e < ROXGEMM_TK * nt; e += (int)nth) {
				int kk = e / nt, j = e % nt;
				sB[kk * TN + j] = kk < kc ? B[(uint64_t)(k0 + kk) * g->n + j0 + j] : 0.0f;
			}
			roxa_sync_block();
			for (int r = 0; r < ROXGEMM_ACC; r++) {
				int e = base + r * (int)nth + (int)tid;
				if (e >= mt * nt)
					break;
				int i = e / nt, j = e % nt;
				float a = acc[r];
				for (int kk = 0; kk < kc; kk++)
					a = ROXGEMM_FMA(sA[i * ROXGEMM_TK + kk], sB[kk * TN + j], a);
				acc[r] = a;
			}
		}
		for (int r = 0; r < ROXGEMM_ACC; r++) {
			int e = base + r * (int)nth + (int)tid;
			if (e >= mt * nt)
				break;
			dst[(uint64_t)(e / nt) * ldd + e % nt] = acc[r];
		}
	}
	roxi_thread_drain();
	roxa_sync_block();
}

/* The per-tile unit of the fused variant: the tile's partial pushed with a put-with-signal (SET
 * step) into this PE's slot of it at each PE that reduces it. */
ROXI_COLD void roxgemm_push_tile(const roxgemm_t *g, int t, uint64_t step)
{
	int P = roxshmem_state.n_pes, me = roxshmem_state.my_pe;
	const float *src = g->stage + (uint64_t)t * g->slot;
	float *dst = g->part + ((uint64_t)me * g->tiles + t) * g->slot;
	uint64_t *sig = g->tsig + (uint64_t)t * P + me;
	if (g->op == ROXGEMM_REDUCE_SCATTER) {
		roxshmemx_putmem_signal_nbi_block(dst, src, (uint64_t)g->slot * 4, sig, step, ROXSHMEM_SIGNAL_SET, roxgemm_owner(g, t));
		return;
	}
	for (int d = 0; d < P; d++)
		roxshmemx_putmem_signal_nbi_block(dst, src, (uint64_t)g->slot * 4, sig, step, ROXSHMEM_SIGNAL_SET, (me + 1 + d) % P);
}

/* Fused, producing side (any number of blocks): block blk computes tiles blk, blk+nblk, ... and
 * pushes each at once. Every reducer must have consumed step-1 first. */
ROXI_COLD void roxgemm_fused(const roxgemm_t *g, const float *A, const float *B, uint64_t step, float *scratch, int blk, int nblk)
{
	if (roxa_tid() == 0)
		for (int d = 0; d < roxshmem_state.n_pes; d++)
			roxshmem_signal_wait_until(g->ack + d, ROXSHMEM_CMP_GE, step - 1);
	roxa_sync_block();
	for (int t = blk; t < g->tiles; t += nblk) {
		roxgemm_tile(g, A, B, t, g->stage + (uint64_t)t * g->slot, g->tile_n, scratch);
		roxgemm_push_tile(g, t, step);
	}
	roxa_sync_block();
}

/* Fused, consuming side (any number of blocks): each tile this PE reduces, once every PE's partial
 * of step is in, summed in PE order into C ([m][n], leading dimension n). */
ROXI_COLD void roxgemm_reduce(const roxgemm_t *g, float *C, uint64_t step, int blk, int nblk)
{
	int P = roxshmem_state.n_pes, me = roxshmem_state.my_pe;
	for (int t = blk; t < g->tiles; t += nblk) {
		if (g->op == ROXGEMM_REDUCE_SCATTER && roxgemm_owner(g, t) != me)
			continue;
		if (roxa_tid() == 0)
			for (int s = 0; s < P; s++)
				roxshmem_signal_wait_until(g->tsig + (uint64_t)t * P + s, ROXSHMEM_CMP_GE, step);
		roxa_sync_block();
		int i0, j0, mt, nt;
		roxgemm_extent(g, t, &i0, &j0, &mt, &nt);
		for (int e = (int)roxa_tid(); e < mt * nt; e += (int)roxa_nthreads()) {
			uint64_t at = (uint64_t)(e / nt) * g->tile_n + e % nt; /* slots are tile_n wide */
			float v = g->part[(uint64_t)t * g->slot + at];
			for (int s = 1; s < P; s++)
				v = v + g->part[((uint64_t)s * g->tiles + t) * g->slot + at];
			C[(uint64_t)(i0 + e / nt) * g->n + j0 + e % nt] = v;
		}
	}
	roxa_sync_block();
}

/* After every reduce block: this PE has consumed step's partials; tell every PE. One block. */
ROXI_COLD void roxgemm_ack(const roxgemm_t *g, uint64_t step)
{
	int P = roxshmem_state.n_pes, me = roxshmem_state.my_pe;
	roxi_thread_drain();
	roxa_sync_block();
	if (roxa_tid() == 0)
		for (int d = 0; d < P; d++)
			roxshmem_uint64_atomic_set(g->ack + me, step, d);
	roxa_sync_block();
}

/* Unfused, first step (any number of blocks): the same tiles into the whole partial C_p (leading
 * dimension n); the all-reduce follows as its own step (roxshmemx_float_sum_reduce_block). */
ROXI_COLD void roxgemm_unfused(const roxgemm_t *g, const float *A, const float *B, float *Cp, float *scratch, int blk, int nblk)
{
	for (int t = blk; t < g->tiles; t += nblk) {
		int i0, j0, mt, nt;
		roxgemm_extent(g, t, &i0, &j0, &mt, &nt);
		roxgemm_tile(g, A, B, t, Cp + (uint64_t)i0 * g->n + j0, g->n, scratch);
	}
}

#endif /* ROXA_GPU_LANG */
#endif /* ROXAMEN_GEMM_H */
