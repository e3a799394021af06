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
