// Probe kernels for the workloads' mapping checks and instruction counts (TestMappingWorkloads,
// TestWorkloadCounts): one unit of work each (a token, a tile, a wait, a step's closing phase),
// compiled per target and ordering mode with the ring and SDMA compiled out (the load/store paths
// of one node) and every internal function inlined, so that each probe's instructions are that
// unit's. The committed builds are testdata/count/*.hsaco (go generate ./kernels).
#include "roxamen/ep.h"
#include "roxamen/gemm.h"

#define PROBE extern "C" __global__

// dispatch: one token's row by a warp into its slot at PE d, then the block's signal (ADD 1)
PROBE void probe_ep_dispatch_token(const roxep_t *ep, const uint8_t *x, const int64_t *idx, const float *w, int d, int i)
{
	roxep_ll_push_token(ep, x, idx, w, d, i);
}
// combine: one token's partial sum by a warp into its slot at PE s, then the block's signal (ADD 1)
PROBE void probe_ep_combine_token(const roxep_t *ep, const uint8_t *y, int s, int i) { roxep_ll_return_token(ep, y, s, i); }
// Normal: the layout's put-with-signal (SET) by the block (and an unmapped peer's rows)
PROBE void probe_ep_bulk(const roxep_t *ep, void *dst, const void *src, uint64_t n, int pe)
{
	roxshmemx_putmem_signal_nbi_block(dst, src, n, roxep_sig(ep, ROXEP_SIG_DATA, roxshmem_state.my_pe), 1, ROXSHMEM_SIGNAL_SET, pe);
}
// one signal waited for (a count, an arrival counter, a tile)
PROBE void probe_ep_wait(const roxep_t *ep, int s, uint64_t v) { roxep_wait(ep, ROXEP_SIG_DATA, s, v); }
// the closing phase of a step (dispatch or combine): quiet, then the acknowledgements
PROBE void probe_ep_ack(const roxep_t *ep, uint64_t epoch) { roxep_dispatch_ack(ep, epoch); }
// GEMM fused: one tile's partial to one PE (put-with-signal, SET step)
PROBE void probe_gemm_push(float *dst, const float *src, uint64_t n, uint64_t *sig, uint64_t step, int pe)
{
	roxshmemx_putmem_signal_nbi_block(dst, src, n, sig, step, ROXSHMEM_SIGNAL_SET, pe);
}
// GEMM fused: the whole per-tile unit of an all-reduce (the tile's partial to every PE)
PROBE void probe_gemm_push_tile(const roxgemm_t *g, int t, uint64_t step) { roxgemm_push_tile(g, t, step); }
// GEMM: the step's acknowledgement
PROBE void probe_gemm_ack(const roxgemm_t *g, uint64_t step) { roxgemm_ack(g, step); }
