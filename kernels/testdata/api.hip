// Calls every device API function once, for TestHeaderCompiles (all targets, -Wall -Werror) and
// for the GPU check's API coverage. The type lists here are written out independently of the
// header's, so a function missing from the header fails to compile.
#include "roxamen/roxshmem.h"

#define RMA(NAME, T)                                                                                     \
	{                                                                                                \
		T *d = (T *)dst, *s = (T *)src;                                                          \
		roxshmem_##NAME##_p(d, (T)1, pe);                                                        \
		*s = roxshmem_##NAME##_g(d, pe);                                                         \
		roxshmem_##NAME##_put(d, s, n, pe);                                                      \
		roxshmem_##NAME##_get(d, s, n, pe);                                                      \
		roxshmem_##NAME##_put_nbi(d, s, n, pe);                                                  \
		roxshmem_##NAME##_get_nbi(d, s, n, pe);                                                  \
		roxshmemx_##NAME##_put_block(d, s, n, pe);                                               \
		roxshmemx_##NAME##_get_block(d, s, n, pe);                                               \
		roxshmemx_##NAME##_put_warp(d, s, n, pe);                                                \
		roxshmemx_##NAME##_get_warp(d, s, n, pe);                                                \
	}

#define AMO(NAME, T)                                                                                     \
	{                                                                                                \
		T *d = (T *)dst, r = 0;                                                                  \
		r += roxshmem_##NAME##_atomic_fetch(d, pe);                                              \
		roxshmem_##NAME##_atomic_set(d, r, pe);                                                  \
		r += roxshmem_##NAME##_atomic_swap(d, r, pe);                                            \
		r += roxshmem_##NAME##_atomic_compare_swap(d, r, (T)2, pe);                              \
		r += roxshmem_##NAME##_atomic_fetch_add(d, r, pe);                                       \
		roxshmem_##NAME##_atomic_add(d, r, pe);                                                  \
		r += roxshmem_##NAME##_atomic_fetch_inc(d, pe);                                          \
		roxshmem_##NAME##_atomic_inc(d, pe);                                                     \
		r += roxshmem_##NAME##_atomic_fetch_and(d, r, pe);                                       \
		roxshmem_##NAME##_atomic_and(d, r, pe);                                                  \
		r += roxshmem_##NAME##_atomic_fetch_or(d, r, pe);                                        \
		roxshmem_##NAME##_atomic_or(d, r, pe);                                                   \
		r += roxshmem_##NAME##_atomic_fetch_xor(d, r, pe);                                       \
		roxshmem_##NAME##_atomic_xor(d, r, pe);                                                  \
		*(T *)src = r;                                                                           \
	}

#define P2P(NAME, T)                                                                                     \
	{                                                                                                \
		roxshmem_##NAME##_wait_until((T *)dst, ROXSHMEM_CMP_NE, (T)0);                           \
		*(int *)src += roxshmem_##NAME##_test((T *)dst, ROXSHMEM_CMP_GE, (T)1);                  \
	}

extern "C" __global__ void api_all(void *dst, void *src, size_t n, uint64_t *sig, int pe)
{
	*(int *)src = roxshmem_my_pe() + roxshmem_n_pes() + (roxshmem_ptr(dst, pe) != 0) + (int)roxshmemx_aborted();
	roxshmem_putmem(dst, src, n, pe);
	roxshmem_putmem_nbi(dst, src, n, pe);
	roxshmem_getmem(dst, src, n, pe);
	roxshmem_getmem_nbi(dst, src, n, pe);
	roxshmemx_putmem_warp(dst, src, n, pe);
	roxshmemx_putmem_nbi_warp(dst, src, n, pe);
	roxshmemx_putmem_block(dst, src, n, pe);
	roxshmemx_putmem_nbi_block(dst, src, n, pe);
	roxshmemx_getmem_warp(dst, src, n, pe);
	roxshmemx_getmem_nbi_warp(dst, src, n, pe);
	roxshmemx_getmem_block(dst, src, n, pe);
	roxshmemx_getmem_nbi_block(dst, src, n, pe);
	roxshmemx_putmem_ce(dst, src, n, pe);
	roxshmemx_putmem_ce_nbi(dst, src, n, pe);
	roxshmemx_putmem_ce_block(dst, src, n, pe);
	roxshmemx_putmem_ce_nbi_block(dst, src, n, pe);
	roxshmem_put8(dst, src, n, pe);
	roxshmem_get16(dst, src, n, pe);
	roxshmem_put32_nbi(dst, src, n, pe);
	roxshmem_get64_nbi(dst, src, n, pe);
	roxshmem_put128(dst, src, n, pe);
	RMA(float, float) RMA(double, double) RMA(char, char) RMA(schar, signed char) RMA(short, short)
	RMA(int, int) RMA(long, long) RMA(longlong, long long) RMA(uchar, unsigned char)
	RMA(ushort, unsigned short) RMA(uint, unsigned int) RMA(ulong, unsigned long)
	RMA(ulonglong, unsigned long long) RMA(int8, int8_t) RMA(int16, int16_t) RMA(int32, int32_t)
	RMA(int64, int64_t) RMA(uint8, uint8_t) RMA(uint16, uint16_t) RMA(uint32, uint32_t)
	RMA(uint64, uint64_t) RMA(size, size_t) RMA(ptrdiff, ptrdiff_t)
	AMO(int, int) AMO(long, long) AMO(longlong, long long) AMO(uint, unsigned int) AMO(ulong, unsigned long)
	AMO(ulonglong, unsigned long long) AMO(int32, int32_t) AMO(int64, int64_t) AMO(uint32, uint32_t)
	AMO(uint64, uint64_t) AMO(size, size_t) AMO(ptrdiff, ptrdiff_t)
	{
		float f = roxshmem_float_atomic_fetch((float *)dst, pe);
		roxshmem_float_atomic_set((float *)dst, f, pe);
		f += roxshmem_float_atomic_swap((float *)dst, f, pe);
		double g = roxshmem_double_atomic_fetch((double *)dst, pe);
		roxshmem_double_atomic_set((double *)dst, g, pe);
		g += roxshmem_double_atomic_swap((double *)dst, g, pe);
		*(double *)src = f + g;
	}
	roxshmem_putmem_signal(dst, src, n, sig, 1, ROXSHMEM_SIGNAL_SET, pe);
	roxshmem_putmem_signal_nbi(dst, src, n, sig, 1, ROXSHMEM_SIGNAL_ADD, pe);
	roxshmemx_putmem_signal_warp(dst, src, n, sig, 1, ROXSHMEM_SIGNAL_SET, pe);
	roxshmemx_putmem_signal_nbi_warp(dst, src, n, sig, 1, ROXSHMEM_SIGNAL_SET, pe);
	roxshmemx_putmem_signal_block(dst, src, n, sig, 1, ROXSHMEM_SIGNAL_SET, pe);
	roxshmemx_putmem_signal_nbi_block(dst, src, n, sig, 1, ROXSHMEM_SIGNAL_ADD, pe);
	sig[1] = roxshmem_signal_fetch(sig) + roxshmem_signal_wait_until(sig, ROXSHMEM_CMP_GT, 0);
	P2P(short, short) P2P(int, int) P2P(long, long) P2P(longlong, long long) P2P(ushort, unsigned short)
	P2P(uint, unsigned int) P2P(ulong, unsigned long) P2P(ulonglong, unsigned long long) P2P(int32, int32_t)
	P2P(int64, int64_t) P2P(uint32, uint32_t) P2P(uint64, uint64_t) P2P(size, size_t) P2P(ptrdiff, ptrdiff_t)
	roxshmem_fence();
	roxshmem_quiet();
	roxshmemx_barrier_all_block();
	roxshmemx_sync_all_block();
	roxshmem_barrier_all();
	roxshmem_sync_all();
}

// The team API: queries, every byte-form collective at each level, the typed data collectives
// over every RMA type, the reductions for one type of each class at every level (testdata/coll_pe.cc
// compiles every type and op for the CPU).
#define COLL_TYPED(NAME, T)                                                                              \
	r += roxshmem_##NAME##_broadcast(team, (T *)dst, (const T *)src, n, 0);                          \
	r += roxshmem_##NAME##_fcollect(team, (T *)dst, (const T *)src, n);                              \
	r += roxshmem_##NAME##_collect(team, (T *)dst, (const T *)src, n);                               \
	r += roxshmem_##NAME##_alltoall(team, (T *)dst, (const T *)src, n);                              \
	r += roxshmemx_##NAME##_broadcast_block(team, (T *)dst, (const T *)src, n, 0);                   \
	r += roxshmemx_##NAME##_fcollect_block(team, (T *)dst, (const T *)src, n);                       \
	r += roxshmemx_##NAME##_collect_block(team, (T *)dst, (const T *)src, n);                        \
	r += roxshmemx_##NAME##_alltoall_block(team, (T *)dst, (const T *)src, n);
#define RED1(NAME, T, OP)                                                                                \
	r += roxshmem_##NAME##_##OP##_reduce(team, (T *)dst, (const T *)src, n);                         \
	r += roxshmemx_##NAME##_##OP##_reduce_warp(team, (T *)dst, (const T *)src, n);                   \
	r += roxshmemx_##NAME##_##OP##_reduce_block(team, (T *)dst, (const T *)src, n);                  \
	r += roxshmemx_##NAME##_##OP##_reduce_scatter(team, (T *)dst, (const T *)src, n);                \
	r += roxshmemx_##NAME##_##OP##_reduce_scatter_warp(team, (T *)dst, (const T *)src, n);          \
	r += roxshmemx_##NAME##_##OP##_reduce_scatter_block(team, (T *)dst, (const T *)src, n);
extern "C" __global__ void api_coll(void *dst, void *src, size_t n, roxshmem_team_t team)
{
	int r = roxshmem_team_my_pe(team) + roxshmem_team_n_pes(ROXSHMEM_TEAM_SHARED) +
		roxshmem_team_translate_pe(team, 0, ROXSHMEM_TEAM_WORLD) + (ROXSHMEM_TEAM_INVALID < 0);
	r += roxshmem_barrier(team) + roxshmem_team_sync(team) + roxshmemx_barrier_warp(team) + roxshmemx_team_sync_warp(team) +
	     roxshmemx_barrier_block(team) + roxshmemx_team_sync_block(team);
	r += roxshmem_broadcastmem(team, dst, src, n, 1) + roxshmemx_broadcastmem_warp(team, dst, src, n, 1) +
	     roxshmemx_broadcastmem_block(team, dst, src, n, 1);
	r += roxshmem_fcollectmem(team, dst, src, n) + roxshmemx_fcollectmem_warp(team, dst, src, n) +
	     roxshmemx_fcollectmem_block(team, dst, src, n);
	r += roxshmem_collectmem(team, dst, src, n) + roxshmemx_collectmem_warp(team, dst, src, n) +
	     roxshmemx_collectmem_block(team, dst, src, n);
	r += roxshmem_alltoallmem(team, dst, src, n) + roxshmemx_alltoallmem_warp(team, dst, src, n) +
	     roxshmemx_alltoallmem_block(team, dst, src, n);
	*(int *)src = r;
}
/* separate kernels: one holding every call misses gfx90a's occupancy target for 1024-thread blocks */
extern "C" __global__ void api_coll_typed(void *dst, void *src, size_t n, roxshmem_team_t team)
{
	int r = 0;
	COLL_TYPED(float, float) COLL_TYPED(double, double) COLL_TYPED(char, char) COLL_TYPED(schar, signed char)
	COLL_TYPED(short, short) COLL_TYPED(int, int) COLL_TYPED(long, long) COLL_TYPED(longlong, long long)
	COLL_TYPED(uchar, unsigned char) COLL_TYPED(ushort, unsigned short) COLL_TYPED(uint, unsigned int)
	COLL_TYPED(ulong, unsigned long) COLL_TYPED(ulonglong, unsigned long long) COLL_TYPED(int8, int8_t)
	COLL_TYPED(int16, int16_t) COLL_TYPED(int32, int32_t) COLL_TYPED(int64, int64_t) COLL_TYPED(uint8, uint8_t)
	COLL_TYPED(uint16, uint16_t) COLL_TYPED(uint32, uint32_t) COLL_TYPED(uint64, uint64_t) COLL_TYPED(size, size_t)
	COLL_TYPED(ptrdiff, ptrdiff_t)
	*(int *)src = r;
}
extern "C" __global__ void api_reduce(void *dst, void *src, size_t n, roxshmem_team_t team)
{
	int r = 0;
	RED1(int, int, sum) RED1(int, int, prod) RED1(int, int, min) RED1(int, int, max)
	RED1(uint64, uint64_t, and) RED1(uint64, uint64_t, or) RED1(uint64, uint64_t, xor)
	RED1(double, double, sum) RED1(float, float, max)
	RED1(half, roxshmem_half_t, sum) RED1(half, roxshmem_half_t, min) RED1(bfloat16, roxshmem_bfloat16_t, max)
	*(int *)src = r;
}
