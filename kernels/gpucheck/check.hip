// GPU check kernels: built from the header by clang-19 (check-clang-sm_90.ptx, committed, made by
// go generate ./kernels) and by nvcc on the GPU machine (run.sh). TestGPU (kernels/gpu_test.go)
// runs both through device/cuda with two PEs, one per GPU (or both on one GPU).
#include "roxamen/roxshmem.h"

#define K extern "C" __global__

// Every block puts its share of n bytes of src to the symmetric dst on pe; way: 0 putmem from
// thread 0 of block 0, 1 putmemx_block, 2 putmemx_warp (warp 0 of each block), 3 putmem_nbi +
// quiet, 4 putmemx_putmem_ce (thread 0). Then quiet.
K void chk_put(uint8_t *dst, const uint8_t *src, uint64_t n, int32_t pe, int32_t way)
{
	uint64_t nb = roxa_nblocks(), b = roxa_block();
	uint64_t chunk = (n + nb - 1) / nb, lo = b * chunk;
	uint64_t len = lo < n ? (n - lo < chunk ? n - lo : chunk) : 0;
	switch (way) {
	case 0:
		if (b == 0 && roxa_tid() == 0)
			roxshmem_putmem(dst, src, n, pe);
		break;
	case 1:
		if (len)
			roxshmemx_putmem_block(dst + lo, src + lo, len, pe);
		break;
	case 2:
		if (len && roxa_tid() < roxa_warpsize())
			roxshmemx_putmem_warp(dst + lo, src + lo, len, pe);
		break;
	case 3:
		if (b == 0 && roxa_tid() == 0)
			roxshmem_putmem_nbi(dst, src, n, pe);
		break;
	default:
		if (b == 0 && roxa_tid() == 0)
			roxshmemx_putmem_ce(dst, src, n, pe);
		break;
	}
	roxa_sync_block();
	if (roxa_tid() == 0)
		roxshmem_quiet();
}

// Gets n bytes of the symmetric src on pe into local dst; way 0 thread, 1 block.
K void chk_get(uint8_t *dst, const uint8_t *src, uint64_t n, int32_t pe, int32_t way)
{
	if (way == 0) {
		if (roxa_block() == 0 && roxa_tid() == 0)
			roxshmem_getmem(dst, src, n, pe);
		return;
	}
	uint64_t nb = roxa_nblocks(), b = roxa_block();
	uint64_t chunk = (n + nb - 1) / nb, lo = b * chunk;
	uint64_t len = lo < n ? (n - lo < chunk ? n - lo : chunk) : 0;
	if (len)
		roxshmemx_getmem_block(dst + lo, src + lo, len, pe);
}

// Thread i (i < 64) puts typed values into the symmetric area sym on pe with p, quiets, reads
// them back with g. out[i] receives what g returned for the 8-byte slot, out[64+i] a checksum of
// the narrower types.
K void chk_p_g(uint8_t *sym, int32_t pe, uint64_t *out)
{
	uint32_t i = roxa_tid();
	if (i >= 64 || roxa_block() != 0)
		return;
	uint64_t *u64 = (uint64_t *)sym;
	int32_t *i32 = (int32_t *)(sym + 512);
	short *i16 = (short *)(sym + 768);
	char *c = (char *)(sym + 896);
	double *d = (double *)(sym + 1024);
	roxshmem_uint64_p(u64 + i, 0x0101010101010101ull * i + 7, pe);
	roxshmem_int32_p(i32 + i, -(int32_t)i * 1000, pe);
	roxshmem_short_p(i16 + i, (short)(i * 3 - 50), pe);
	roxshmem_char_p(c + i, (char)('A' + i % 26), pe);
	roxshmem_double_p(d + i, 0.5 * i, pe);
	roxshmem_quiet();
	out[i] = roxshmem_uint64_g(u64 + i, pe);
	int64_t sum = roxshmem_int32_g(i32 + i, pe) + roxshmem_short_g(i16 + i, pe) + roxshmem_char_g(c + i, pe) +
		      (int64_t)(roxshmem_double_g(d + i, pe) * 2);
	out[64 + i] = (uint64_t)sum;
}

// Every thread of the grid adds 1 to the 64-bit counter and 2 to the 32-bit one on pe, iters
// times, and xors its global index into x; block 0 thread 0 then tests compare_swap and swap.
// out[0]: a checksum of all fetched values of the first fetch_add (sum of fetched, for a
// permutation check), out[1..3]: cswap results, out[4]: swap result.
K void chk_amo(uint64_t *c64, uint32_t *c32, uint64_t *x, uint64_t *cas, uint64_t iters, int32_t pe, uint64_t *out)
{
	uint64_t g = (uint64_t)roxa_block() * roxa_nthreads() + roxa_tid();
	uint64_t sum = 0;
	for (uint64_t k = 0; k < iters; k++) {
		sum += roxshmem_uint64_atomic_fetch_add(c64, 1, pe);
		roxshmem_uint32_atomic_add(c32, 2, pe);
	}
	roxshmem_uint64_atomic_xor(x, g + 1, pe);
	roxa_amo_u64(ROXSHMEM_AMO_FETCH_ADD, &out[0], sum, 0);
	roxshmem_quiet();
	if (g == 0) {
		out[1] = roxshmem_uint64_atomic_compare_swap(cas, 5, 9, pe);  // cas is 5: succeeds, returns 5
		out[2] = roxshmem_uint64_atomic_compare_swap(cas, 5, 11, pe); // now 9: fails, returns 9
		out[3] = roxshmem_uint64_atomic_fetch(cas, pe);               // 9
		out[4] = roxshmem_uint64_atomic_swap(cas, 42, pe);            // 9
		roxshmem_quiet();
	}
}

// One block: put-with-signal of n bytes (data then signal SET to value), by the block (way 1) or
// one thread (way 0).
K void chk_putsig(uint8_t *dst, const uint8_t *src, uint64_t n, uint64_t *sig, uint64_t value, int32_t pe, int32_t way)
{
	if (roxa_block() != 0)
		return;
	if (way == 1)
		roxshmemx_putmem_signal_block(dst, src, n, sig, value, ROXSHMEM_SIGNAL_SET, pe);
	else if (roxa_tid() == 0)
		roxshmem_putmem_signal(dst, src, n, sig, value, ROXSHMEM_SIGNAL_SET, pe);
}

// One block: wait until the local signal equals value, then copy the n bytes of local data to out
// with plain loads (the wait's acquire makes the data visible).
K void chk_wait_copy(uint64_t *sig, uint64_t value, const uint8_t *data, uint8_t *out, uint64_t n, uint64_t *got)
{
	if (roxa_block() != 0)
		return;
	if (roxa_tid() == 0)
		got[0] = roxshmem_signal_wait_until(sig, ROXSHMEM_CMP_EQ, value);
	roxa_sync_block();
	for (uint64_t i = roxa_tid(); i < n; i += roxa_nthreads())
		out[i] = data[i];
}

// iters rounds of: put round into x[my_pe] on the other PE, barrier, check x[other] == round.
// errors[0] counts mismatches. One block per PE, both PEs run it concurrently.
K void chk_barrier(uint64_t *x, uint64_t iters, uint64_t *errors)
{
	int me = roxshmem_my_pe(), other = 1 - me;
	for (uint64_t r = 1; r <= iters; r++) {
		if (roxa_tid() == 0)
			roxshmem_uint64_p(&x[me], r, other);
		roxshmemx_barrier_all_block();
		if (roxa_tid() == 0 && roxa_ld_relaxed_u64(&x[other]) != r)
			errors[0]++;
		roxshmemx_barrier_all_block();
	}
}

// Waits for a flag nobody sets: returns only through the abort word. out[0] = roxshmemx_aborted().
K void chk_wait_forever(uint64_t *flag, uint64_t *out)
{
	if (roxa_tid() == 0 && roxa_block() == 0) {
		roxshmem_uint64_wait_until(flag, ROXSHMEM_CMP_EQ, 12345);
		out[0] = roxshmemx_aborted();
	}
}
