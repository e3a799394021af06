// A user kernel on Roxamen: an in-place ring all-reduce (sum) of n floats over every PE, one thread
// block per PE, with put-with-signal. Compile it to a code object with clang, nvcc or hipcc (see
// examples/README.md); main.go loads it with World.LoadModule.
#include "roxamen/roxshmem.h"

// data and recv are symmetric float[n]; sig is a symmetric uint64. epoch counts the calls (from 1):
// signals only grow, so no reset is needed between calls.
extern "C" __global__ void ring_allreduce(float *data, float *recv, uint64_t *sig, uint64_t n, uint64_t epoch)
{
	const int me = roxshmem_my_pe(), np = roxshmem_n_pes(), right = (me + 1) % np;
	const uint64_t chunk = (n + np - 1) / np;
	const uint64_t base = (epoch - 1) * 2 * (uint64_t)np;
	uint32_t tid = roxa_tid(), nt = roxa_nthreads(); // portable threadIdx.x and blockDim.x (1-D blocks)
	uint64_t step = 0;

	// Reduce-scatter: at step s send chunk (me - s) to the right neighbour's recv, then add the
	// left neighbour's chunk (me - s - 1) into ours.
	for (int s = 0; s < np - 1; s++) {
		uint64_t cs = (uint64_t)((me - s + np) % np) * chunk, cr = (uint64_t)((me - s - 1 + 2 * np) % np) * chunk;
		uint64_t ls = cs < n ? (n - cs < chunk ? n - cs : chunk) : 0, lr = cr < n ? (n - cr < chunk ? n - cr : chunk) : 0;
		step++;
		roxshmemx_putmem_signal_nbi_block(recv + cs, data + cs, ls * sizeof(float), sig, base + step, ROXSHMEM_SIGNAL_SET, right);
		if (tid == 0)
			roxshmem_signal_wait_until(sig, ROXSHMEM_CMP_GE, base + step);
		roxa_sync_block();
		for (uint64_t i = tid; i < lr; i += nt)
			data[cr + i] += recv[cr + i];
		roxa_sync_block();
	}
	// All-gather: PE me owns the reduced chunk (me + 1); pass reduced chunks around the ring.
	for (int s = 0; s < np - 1; s++) {
		uint64_t cs = (uint64_t)((me + 1 - s + np) % np) * chunk;
		uint64_t ls = cs < n ? (n - cs < chunk ? n - cs : chunk) : 0;
		step++;
		roxshmemx_putmem_signal_nbi_block(data + cs, data + cs, ls * sizeof(float), sig, base + step, ROXSHMEM_SIGNAL_SET, right);
		if (tid == 0)
			roxshmem_signal_wait_until(sig, ROXSHMEM_CMP_GE, base + step);
		roxa_sync_block();
	}
	roxshmemx_barrier_all_block(); /* quiet, and nobody starts the next call while a put is in flight */
}
