// A kernel written for rocSHMEM: only the include differs (<rocshmem/rocshmem.hpp> before).
// TestCompat compiles it for every target and runs roc_exchange on the CPU library harness
// (host.cc), which checks what it wrote where. The names are rocSHMEM's, as its users write them.
#include "roxamen/rocshmem.h"

using namespace rocshmem;

// What the kernel leaves in out[] (host.cc checks each).
enum { ROC_OLD_COUNTER, ROC_CAS_OLD, ROC_G, ROC_HAVE_PTR, ROC_TEST_GE, ROC_TEST_LE, ROC_CTX_OK, ROC_SIG_FETCH, ROC_GOT = 8 };

// The rocSHMEM spelling of nvs_exchange: a context per work group, _wg for the group's calls.
extern "C" __device__ void roc_exchange(int *halo, const int *mine, int n, uint64_t *sig, uint64_t *counter,
					long *flag, int *out)
{
	rocshmem_wg_init();
	rocshmem_ctx_t ctx;
	int bad = rocshmem_wg_ctx_create(ROCSHMEM_CTX_WG_PRIVATE, &ctx);
	int me = rocshmem_ctx_my_pe(ctx), npes = rocshmem_ctx_n_pes(ctx), peer = (me + 1) % npes;
	rocshmem_ctx_int_put_signal_wg(ctx, halo, mine, n, sig, 1, ROCSHMEM_SIGNAL_ADD, peer);
	rocshmem_ctx_putmem_nbi_wg(ctx, halo + n, mine, n * sizeof(int), peer);
	rocshmem_ctx_quiet(ctx);
	if (roxa_tid() == 0) { // threadIdx.x == 0 (the test builds without the vendor headers)
		out[ROC_CTX_OK] = bad == 0;
		rocshmem_ctx_putmem_signal(ctx, halo + 2 * n, mine, sizeof(int), sig + 1, 2, ROCSHMEM_SIGNAL_ADD, peer);
		out[ROC_OLD_COUNTER] = (int)rocshmem_ctx_uint64_atomic_fetch_add(ctx, counter, 5, peer);
		out[ROC_CAS_OLD] = (int)rocshmem_uint64_atomic_compare_swap(counter, 5, 11, peer);
		rocshmem_ctx_uint64_atomic_inc(ctx, counter, peer);
		rocshmem_ctx_long_p(ctx, flag, 7, peer);
		out[ROC_G] = (int)rocshmem_ctx_long_g(ctx, flag, peer);
		int *p = (int *)rocshmem_ptr(halo, peer);
		out[ROC_HAVE_PTR] = p != 0;
		if (p)
			p[3 * n] = 99;
		rocshmem_ctx_fence(ctx, peer);
		rocshmem_ctx_getmem(ctx, out + ROC_GOT, halo, n * sizeof(int), peer);

		rocshmem_long_p(flag, 7, me);
		rocshmem_long_wait_until(flag, ROCSHMEM_CMP_GE, 7);
		out[ROC_TEST_GE] = rocshmem_long_test(flag, ROCSHMEM_CMP_GE, 5);
		out[ROC_TEST_LE] = rocshmem_long_test(flag, ROCSHMEM_CMP_LE, 5);
		out[ROC_SIG_FETCH] = (int)rocshmem_signal_fetch(sig);
	}
	rocshmem_wg_ctx_destroy(&ctx);
	rocshmem_wg_finalize();
}

extern "C" __global__ void roc_exchange_kernel(int *halo, const int *mine, int n, uint64_t *sig, uint64_t *counter,
					       long *flag, int *out)
{
	roc_exchange(halo, mine, n, sig, counter, flag, out);
	rocshmem_wg_barrier_all();
}
