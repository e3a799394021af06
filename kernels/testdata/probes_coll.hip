// Probe kernels for TestMappingColl (mapping_coll_test.go): one team collective each, compiled per
// target and ordering mode with the ring compiled out, every internal function inlined.
#include "roxamen/roxshmem.h"

#define PROBE extern "C" __global__

// one-shot and two-shot (chosen at run time: both paths are in the probe)
PROBE void probe_coll_reduce_block(float *dest, const float *src, size_t n, roxshmem_team_t team)
{
	roxshmemx_float_sum_reduce_block(team, dest, src, n);
}
PROBE void probe_coll_reduce_half(roxshmem_half_t *dest, const roxshmem_half_t *src, size_t n, roxshmem_team_t team)
{
	roxshmem_half_max_reduce(team, dest, src, n);
}
PROBE void probe_coll_broadcast_block(void *dest, const void *src, size_t n, int root, roxshmem_team_t team)
{
	roxshmemx_broadcastmem_block(team, dest, src, n, root);
}
PROBE void probe_team_sync_block(roxshmem_team_t team) { roxshmemx_team_sync_block(team); }
PROBE void probe_team_barrier(roxshmem_team_t team) { roxshmem_barrier(team); }
