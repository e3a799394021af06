// GPU check kernels of the team collectives: built from the header by clang-19
// (coll-clang-sm_90.ptx, committed, made by go generate ./kernels) and compiled by nvcc on the GPU
// machine (run.sh). TestGPUColl (kernels/gpu_coll_test.go) runs them with two PEs, one block per
// PE. Each stores the collective's result code in *ret.
#include "roxamen/roxshmem.h"

#define K extern "C" __global__

// the reductions every member ends with; which: 0 float sum, 1 int64 max, 2 bfloat16 sum,
// 3 half min (warp level), 4 uint32 xor (thread level) (n elements)
K void cg_reduce(int32_t team, void *dest, const void *src, uint64_t n, int32_t which, int32_t *ret)
{
	int r;
	switch (which) {
	case 0: r = roxshmemx_float_sum_reduce_block(team, (float *)dest, (const float *)src, n); break;
	case 1: r = roxshmemx_int64_max_reduce_block(team, (int64_t *)dest, (const int64_t *)src, n); break;
	case 2: r = roxshmemx_bfloat16_sum_reduce_block(team, (roxshmem_bfloat16_t *)dest, (const roxshmem_bfloat16_t *)src, n); break;
	case 3: /* warp 0 alone */
		if (roxa_tid() >= roxa_warpsize())
			return;
		r = roxshmemx_half_min_reduce_warp(team, (roxshmem_half_t *)dest, (const roxshmem_half_t *)src, n);
		break;
	default: /* thread 0 alone */
		if (roxa_tid() != 0)
			return;
		r = roxshmem_uint32_xor_reduce(team, (uint32_t *)dest, (const uint32_t *)src, n);
		break;
	}
	if (roxa_tid() == 0)
		*ret = r;
}

// float sum reduce-scatter: dest gets n elements, src holds n_pes * n
K void cg_reduce_scatter(int32_t team, float *dest, const float *src, uint64_t n, int32_t *ret)
{
	int r = roxshmemx_float_sum_reduce_scatter_block(team, dest, src, n);
	if (roxa_tid() == 0)
		*ret = r;
}

// which: 0 fcollectmem, 1 broadcastmem (root), 2 alltoallmem, 3 collectmem (n bytes)
K void cg_data(int32_t team, void *dest, const void *src, uint64_t n, int32_t root, int32_t which, int32_t *ret)
{
	int r;
	switch (which) {
	case 0: r = roxshmemx_fcollectmem_block(team, dest, src, n); break;
	case 1: r = roxshmemx_broadcastmem_block(team, dest, src, n, root); break;
	case 2: r = roxshmemx_alltoallmem_block(team, dest, src, n); break;
	default: r = roxshmemx_collectmem_block(team, dest, src, n); break;
	}
	if (roxa_tid() == 0)
		*ret = r;
}

// rounds of team sync and barrier; before each, every member writes the round into a word of
// each member's heap (slot my_pe of words), after it checks every member's word: bad counts misses
K void cg_sync(int32_t team, uint64_t *words, uint64_t rounds, uint64_t *bad, int32_t *ret)
{
	int r = 0, n = roxshmem_team_n_pes(team), me = roxshmem_team_my_pe(team);
	for (uint64_t i = 1; i <= rounds && r == 0; i++) {
		if (roxa_tid() == 0)
			for (int j = 0; j < n; j++)
				roxshmem_uint64_p(words + me, i, roxshmem_team_translate_pe(team, j, ROXSHMEM_TEAM_WORLD));
		r = (i & 1) ? roxshmemx_barrier_block(team) : roxshmemx_team_sync_block(team);
		if (roxa_tid() == 0)
			for (int j = 0; j < n; j++)
				if (roxa_ld_relaxed_u64(words + j) < i)
					++*bad;
		/* nobody writes round i+1 before every member has checked round i */
		if (r == 0)
			r = roxshmemx_team_sync_block(team);
	}
	if (roxa_tid() == 0)
		*ret = r;
}
