// A kernel written for NVSHMEM: only the include differs (<nvshmem.h> and <nvshmemx.h> before).
// TestCompat compiles it for every target and runs nvs_exchange on the CPU library harness
// (host.cc), which checks what it wrote where. The names are NVSHMEM's, as its users write them.
#include "roxamen/nvshmem.h"

// What the kernel leaves in out[] (host.cc checks each).
enum { NVS_OLD_COUNTER, NVS_CAS_OLD, NVS_G, NVS_HAVE_PTR, NVS_SIG_SELF, NVS_TEST_GT, NVS_TEST_LE, NVS_SIG_FETCH, NVS_GOT = 8 };

// Exchanges a halo of n ints with the next PE (through a put-with-signal the block shares, and a
// non-blocking put), updates the next PE's counter and flag, reads them back, and synchronizes on
// its own signal and flag. Symmetric: halo (3n + 1 ints), sig, counter, flag. Local: mine, out.
extern "C" __device__ void nvs_exchange(int *halo, const int *mine, int n, uint64_t *sig, uint64_t *counter,
					long *flag, int *out)
{
	int me = nvshmem_my_pe(), npes = nvshmem_n_pes(), peer = (me + 1) % npes;
	nvshmemx_int_put_signal_block(halo, mine, n, sig, 1, NVSHMEM_SIGNAL_ADD, peer);
	nvshmemx_int_put_nbi_block(halo + n, mine, n, peer);
	nvshmem_quiet();
	if (roxa_tid() == 0) { // threadIdx.x == 0 (the test builds without the vendor headers)
		nvshmemx_signal_op(sig, 2, NVSHMEM_SIGNAL_ADD, peer);
		out[NVS_OLD_COUNTER] = (int)nvshmem_uint64_atomic_fetch_add(counter, 5, peer);
		out[NVS_CAS_OLD] = (int)nvshmem_uint64_atomic_compare_swap(counter, 5, 11, peer);
		nvshmem_uint64_atomic_inc(counter, peer);
		nvshmem_long_p(flag, 7, peer);
		out[NVS_G] = (int)nvshmem_long_g(flag, peer);
		nvshmem_put32_signal(halo + 2 * n, mine, 1, sig + 1, 9, NVSHMEM_SIGNAL_SET, peer);
		int *p = (int *)nvshmem_ptr(halo, peer);
		out[NVS_HAVE_PTR] = p != 0;
		if (p)
			p[3 * n] = 99;
		nvshmem_fence();
		nvshmem_getmem(out + NVS_GOT, halo, n * sizeof(int), peer);

		nvshmemx_signal_op(sig, 4, NVSHMEM_SIGNAL_SET, me);
		out[NVS_SIG_SELF] = (int)nvshmem_signal_wait_until(sig, NVSHMEM_CMP_GE, 4);
		out[NVS_SIG_FETCH] = (int)nvshmem_signal_fetch(sig);
		nvshmem_long_p(flag, 3, me);
		nvshmem_long_wait_until(flag, NVSHMEM_CMP_EQ, 3);
		out[NVS_TEST_GT] = nvshmem_long_test(flag, NVSHMEM_CMP_GT, 3);
		out[NVS_TEST_LE] = nvshmem_long_test(flag, NVSHMEM_CMP_LE, 3);
	}
}

extern "C" __global__ void nvs_exchange_kernel(int *halo, const int *mine, int n, uint64_t *sig, uint64_t *counter,
					       long *flag, int *out)
{
	nvs_exchange(halo, mine, n, sig, counter, flag, out);
	nvshmemx_barrier_all_block();
}
