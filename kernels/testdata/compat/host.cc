// TestCompat's CPU run of the two ported kernels (nvshmem_kernel.hip, rocshmem_kernel.hip): PE 0
// of two, PE 1's heap mapped for loads and stores, built as plain C++ with the HIP attributes
// defined away (as testdata/hostlib.cc), so the arch layer's host fallbacks stand in for the GPU
// instructions. Each kernel runs on fresh heaps; every word it should have written is checked on
// both heaps, and the words around them are checked untouched. Prints one line per failed check
// and "done N" at the end.
#include "nvshmem_kernel.hip"
#include "rocshmem_kernel.hip"

#include "../check.h"

enum { HEAP = 1 << 16, N = 37 };
// the symmetric objects, at the same offsets in both heaps
struct sym {
	int halo[3 * N + 1 + 7]; // 3n + 1 written, 7 that must stay untouched
	uint64_t sig[2];
	uint64_t counter;
	long flag;
};
alignas(64) static uint8_t heap[2][HEAP];
alignas(64) static roxshmem_abort_t abortb;
static int mine[N];
static int out[64];

static sym *pe(int i) { return (sym *)heap[i]; }

static void reset(void)
{
	__builtin_memset(&roxshmem_state, 0, sizeof roxshmem_state);
	__builtin_memset(heap, 0, sizeof heap);
	__builtin_memset(&abortb, 0, sizeof abortb);
	roxshmem_state.magic = ROXSHMEM_STATE_MAGIC;
	roxshmem_state.my_pe = 0;
	roxshmem_state.n_pes = 2;
	roxshmem_state.heap_base = (uint64_t)(uintptr_t)heap[0];
	roxshmem_state.heap_size = HEAP;
	roxshmem_state.peer_base[0] = (uint64_t)(uintptr_t)heap[0];
	roxshmem_state.peer_base[1] = (uint64_t)(uintptr_t)heap[1];
	roxshmem_state.abort = (uint64_t)(uintptr_t)&abortb;
	roxshmem_state.barrier_off = HEAP - ROXSHMEM_BARRIER_BYTES;
	for (int i = 0; i < N; i++)
		mine[i] = 1000 + 3 * i;
	for (int i = 0; i < 64; i++)
		out[i] = -1;
	pe(1)->sig[0] = 100; // signal adds must add to it
	pe(1)->sig[1] = 40;
}

// what both kernels deliver to PE 1
static void check_peer(const char *who, uint64_t sig0, uint64_t sig1)
{
	const sym *p = pe(1);
	for (int i = 0; i < N; i++) {
		CHECK(p->halo[i] == mine[i], "%s: put-with-signal halo[%d] = %d, want %d", who, i, p->halo[i], mine[i]);
		CHECK(p->halo[N + i] == mine[i], "%s: nbi put halo[%d] = %d, want %d", who, N + i, p->halo[N + i], mine[i]);
	}
	CHECK(p->halo[2 * N] == mine[0], "%s: one-element put-with-signal = %d", who, p->halo[2 * N]);
	CHECK(p->halo[3 * N] == 99, "%s: store through the ptr = %d", who, p->halo[3 * N]);
	for (int i = 3 * N + 1; i < 3 * N + 8; i++)
		CHECK(p->halo[i] == 0, "%s: halo[%d] = %d past the end", who, i, p->halo[i]);
	CHECK(p->sig[0] == sig0 && p->sig[1] == sig1, "%s: PE 1 signals %llu %llu, want %llu %llu", who,
	      (unsigned long long)p->sig[0], (unsigned long long)p->sig[1], (unsigned long long)sig0, (unsigned long long)sig1);
	CHECK(p->counter == 12, "%s: PE 1 counter %llu, want 12 (0 +5, cas 5->11, +1)", who, (unsigned long long)p->counter);
	CHECK(p->flag == 7, "%s: PE 1 flag %ld, want 7", who, p->flag);
	for (int i = 0; i < N; i++)
		CHECK(out[8 + i] == mine[i], "%s: get of the peer's halo[%d] = %d, want %d", who, i, out[8 + i], mine[i]);
	CHECK(abortb.count == 0, "%s: the library recorded %llu errors (first %#llx)", who,
	      (unsigned long long)abortb.count, (unsigned long long)abortb.first);
}

static void test_nvshmem(void)
{
	reset();
	nvs_exchange(pe(0)->halo, mine, N, pe(0)->sig, &pe(0)->counter, &pe(0)->flag, out);
	// NVSHMEM_SIGNAL_ADD (10) adds 1 and 2; NVSHMEM_SIGNAL_SET (9) sets sig[1] to 9
	check_peer("nvshmem", 103, 9);
	CHECK(out[NVS_OLD_COUNTER] == 0 && out[NVS_CAS_OLD] == 5, "nvshmem: fetch_add old %d, compare_swap old %d",
	      out[NVS_OLD_COUNTER], out[NVS_CAS_OLD]);
	CHECK(out[NVS_G] == 7 && out[NVS_HAVE_PTR] == 1, "nvshmem: g %d, ptr %d", out[NVS_G], out[NVS_HAVE_PTR]);
	CHECK(pe(0)->sig[0] == 4 && out[NVS_SIG_SELF] == 4 && out[NVS_SIG_FETCH] == 4,
	      "nvshmem: own signal %llu, wait_until returned %d, fetch %d", (unsigned long long)pe(0)->sig[0],
	      out[NVS_SIG_SELF], out[NVS_SIG_FETCH]);
	CHECK(pe(0)->flag == 3 && out[NVS_TEST_GT] == 0 && out[NVS_TEST_LE] == 1,
	      "nvshmem: own flag %ld, test(GT 3) %d, test(LE 3) %d", pe(0)->flag, out[NVS_TEST_GT], out[NVS_TEST_LE]);
	CHECK(pe(0)->counter == 0 && pe(0)->halo[0] == 0, "nvshmem: PE 0's own counter or halo written");
}

static void test_rocshmem(void)
{
	reset();
	roc_exchange(pe(0)->halo, mine, N, pe(0)->sig, &pe(0)->counter, &pe(0)->flag, out);
	// ROCSHMEM_SIGNAL_ADD adds 1 to sig[0] and 2 to sig[1]
	check_peer("rocshmem", 101, 42);
	CHECK(out[ROC_CTX_OK] == 1, "rocshmem: rocshmem_wg_ctx_create failed");
	CHECK(out[ROC_OLD_COUNTER] == 0 && out[ROC_CAS_OLD] == 5, "rocshmem: fetch_add old %d, compare_swap old %d",
	      out[ROC_OLD_COUNTER], out[ROC_CAS_OLD]);
	CHECK(out[ROC_G] == 7 && out[ROC_HAVE_PTR] == 1, "rocshmem: g %d, ptr %d", out[ROC_G], out[ROC_HAVE_PTR]);
	// rocSHMEM numbers GE 3 and LE 5, Roxamen the other way round
	CHECK(pe(0)->flag == 7 && out[ROC_TEST_GE] == 1 && out[ROC_TEST_LE] == 0,
	      "rocshmem: own flag %ld, test(7 GE 5) %d, test(7 LE 5) %d", pe(0)->flag, out[ROC_TEST_GE], out[ROC_TEST_LE]);
	CHECK(out[ROC_SIG_FETCH] == 0 && pe(0)->counter == 0 && pe(0)->halo[0] == 0,
	      "rocshmem: PE 0's own signal (%d), counter or halo written", out[ROC_SIG_FETCH]);
}

int main(void)
{
	test_nvshmem();
	test_rocshmem();
	printf("done %d checks, %d failed\n", checks, failures);
	return failures != 0;
}
