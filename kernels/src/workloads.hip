// The workload kernels: expert-parallel dispatch/combine (roxamen/ep.h) and the tensor-parallel
// GEMM with its all-reduce fused in or not (roxamen/gemm.h). Built by `go generate ./kernels`
// into their own code objects, kernels/obj/workloads-<arch> (kernels.WorkloadObject), apart from
// the runtime's; the ordering mode is read from roxshmem_state at run time. The phases of one
// call are launched in order on one stream (ep.h's comment lists them); the block index splits
// the work of the phases that take several blocks.
#include "roxamen/ep.h"
#include "roxamen/gemm.h"

#define KERNEL extern "C" __global__
#if defined(__AMDGCN__)
#define SMALL_BLOCK __attribute__((amdgpu_flat_work_group_size(1, 256)))
#else
#define SMALL_BLOCK
#endif

// ---- expert parallelism -----------------------------------------------------------------------

KERNEL SMALL_BLOCK void roxep_k_route(const roxep_t *ep, const int64_t *idx, int32_t n) { roxep_route(ep, idx, n); }

KERNEL SMALL_BLOCK void roxep_k_normal_layout(const roxep_t *ep, uint64_t epoch) { roxep_normal_layout(ep, epoch); }

KERNEL SMALL_BLOCK void roxep_k_dispatch_send(const roxep_t *ep, const uint8_t *x, const int64_t *idx, const float *w, uint64_t epoch)
{
	roxep_dispatch_send(ep, x, idx, w, epoch, (int)roxa_block(), (int)roxa_nblocks());
}

KERNEL SMALL_BLOCK void roxep_k_dispatch_recv_count(const roxep_t *ep, uint64_t epoch)
{
	roxep_dispatch_recv_count(ep, epoch, (int)roxa_block(), (int)roxa_nblocks());
}

KERNEL SMALL_BLOCK void roxep_k_dispatch_recv_scan(const roxep_t *ep, int32_t nblk) { roxep_dispatch_recv_scan(ep, nblk); }

KERNEL SMALL_BLOCK void roxep_k_dispatch_recv_copy(const roxep_t *ep, uint8_t *x, int32_t *src, float *w)
{
	roxep_dispatch_recv_copy(ep, x, src, w, (int)roxa_block(), (int)roxa_nblocks());
}

KERNEL SMALL_BLOCK void roxep_k_dispatch_ack(const roxep_t *ep, uint64_t epoch) { roxep_dispatch_ack(ep, epoch); }

KERNEL SMALL_BLOCK void roxep_k_combine_send(const roxep_t *ep, const uint8_t *y, uint64_t epoch)
{
	roxep_combine_send(ep, y, epoch, (int)roxa_block(), (int)roxa_nblocks());
}

KERNEL SMALL_BLOCK void roxep_k_combine_recv(const roxep_t *ep, uint8_t *out, int32_t n, uint64_t epoch)
{
	roxep_combine_recv(ep, out, n, epoch, (int)roxa_block(), (int)roxa_nblocks());
}

KERNEL SMALL_BLOCK void roxep_k_combine_ack(const roxep_t *ep, uint64_t epoch) { roxep_combine_ack(ep, epoch); }

// The device clock into *at, one thread (a benchmark's marks between the phases of a call).
KERNEL void roxep_k_stamp(uint64_t *at) { *at = roxa_clock_ns(); }

// ---- GEMM + all-reduce / reduce-scatter -----------------------------------------------------------

#define ROXGEMM_TILE_MAX 64

KERNEL SMALL_BLOCK void roxgemm_k_fused(const roxgemm_t *g, const float *A, const float *B, uint64_t step)
{
	__shared__ float scratch[ROXGEMM_SCRATCH(ROXGEMM_TILE_MAX, ROXGEMM_TILE_MAX)];
	roxgemm_fused(g, A, B, step, scratch, (int)roxa_block(), (int)roxa_nblocks());
}

KERNEL SMALL_BLOCK void roxgemm_k_reduce(const roxgemm_t *g, float *C, uint64_t step)
{
	roxgemm_reduce(g, C, step, (int)roxa_block(), (int)roxa_nblocks());
}

KERNEL SMALL_BLOCK void roxgemm_k_ack(const roxgemm_t *g, uint64_t step) { roxgemm_ack(g, step); }

KERNEL SMALL_BLOCK void roxgemm_k_unfused(const roxgemm_t *g, const float *A, const float *B, float *Cp)
{
	__shared__ float scratch[ROXGEMM_SCRATCH(ROXGEMM_TILE_MAX, ROXGEMM_TILE_MAX)];
	roxgemm_unfused(g, A, B, Cp, scratch, (int)roxa_block(), (int)roxa_nblocks());
}

// the unfused variant's second step: coll.h's block-level all-reduce of the whole partial (one
// block; the result lands in C on every PE)
KERNEL SMALL_BLOCK void roxgemm_k_allreduce(float *C, const float *Cp, uint64_t n)
{
	roxshmemx_float_sum_reduce_block(ROXSHMEM_TEAM_WORLD, C, Cp, n);
}
