// One PE of the workloads' CPU harness (shmem/ep's TestDeviceEPHost, kernels' TestGEMMHost): the
// device side of expert parallelism (roxamen/ep.h) and of the fused GEMM (roxamen/gemm.h) built
// for the CPU as a shared library, one loaded copy per PE (each with its own roxshmem_state),
// several OS threads per PE standing in for a block's threads, as testdata/coll_pe.cc does for
// the team collectives (its group barrier and pause are repeated here). A phase that takes
// several blocks runs them one after the other in the group (nblk > 1 exercises the split).
#define ROXA_HOST_GROUP 1
#include "roxamen/ep.h"
#include "roxamen/gemm.h"

extern "C" int sched_yield(void);
struct timespec {
	long tv_sec, tv_nsec;
};
extern "C" int nanosleep(const struct timespec *, struct timespec *);
static void nap(void)
{
	struct timespec ts = {0, 5000};
	nanosleep(&ts, 0);
}

static thread_local uint32_t tl_tid;
static uint32_t g_nthreads = 1;
static uint32_t bar_count, bar_gen;

uint32_t roxa_host_tid(void) { return tl_tid; }
uint32_t roxa_host_nthreads(void) { return g_nthreads; }
void roxa_host_yield(void) { nap(); }
void roxa_host_sync(void)
{
	if (g_nthreads == 1)
		return;
	uint32_t gen = __atomic_load_n(&bar_gen, __ATOMIC_ACQUIRE);
	if (__atomic_add_fetch(&bar_count, 1, __ATOMIC_ACQ_REL) == g_nthreads) {
		__atomic_store_n(&bar_count, 0, __ATOMIC_RELAXED);
		__atomic_store_n(&bar_gen, gen + 1, __ATOMIC_RELEASE);
	} else {
		for (int spins = 0; __atomic_load_n(&bar_gen, __ATOMIC_ACQUIRE) == gen; spins++)
			spins < 64 ? (void)sched_yield() : nap();
	}
}

#define OFF(T, F) ((int)__builtin_offsetof(T, F))

extern "C" {
void rox_set_state(const roxshmem_state_t *s) { roxshmem_state = *s; }
void rox_set_threads(uint32_t n) { g_nthreads = n; }

// layout parity: sizeof and the offsets of the first and last fields after the scalars
int rox_ep_layout(int i)
{
	const int v[] = {(int)sizeof(roxep_t), OFF(roxep_t, ce_min), OFF(roxep_t, recv), OFF(roxep_t, stage), OFF(roxep_t, scratch)};
	return i >= 0 && i < 5 ? v[i] : -1;
}
int rox_gemm_layout(int i)
{
	const int v[] = {(int)sizeof(roxgemm_t), OFF(roxgemm_t, slot), OFF(roxgemm_t, part), OFF(roxgemm_t, stage)};
	return i >= 0 && i < 4 ? v[i] : -1;
}

// A whole Dispatch as thread tid of this PE's group: the phases of ep.h in order.
void rox_ep_dispatch(uint32_t tid, const roxep_t *ep, const uint8_t *x, const int64_t *idx, const float *w, int n,
		     uint64_t epoch, uint8_t *out_x, int32_t *out_src, float *out_w, int nblk)
{
	tl_tid = tid;
	roxep_route(ep, idx, n);
	if (ep->mode == ROXEP_NORMAL)
		roxep_normal_layout(ep, epoch);
	for (int b = 0; b < nblk; b++)
		roxep_dispatch_send(ep, x, idx, w, epoch, b, nblk);
	for (int b = 0; b < nblk; b++)
		roxep_dispatch_recv_count(ep, epoch, b, nblk);
	roxep_dispatch_recv_scan(ep, nblk);
	for (int b = 0; b < nblk; b++)
		roxep_dispatch_recv_copy(ep, out_x, out_src, out_w, b, nblk);
	roxep_dispatch_ack(ep, epoch);
}

// A whole Combine (of the last Dispatch) as thread tid.
void rox_ep_combine(uint32_t tid, const roxep_t *ep, const uint8_t *y, uint8_t *out, int n, uint64_t epoch, int nblk)
{
	tl_tid = tid;
	for (int b = 0; b < nblk; b++)
		roxep_combine_send(ep, y, epoch, b, nblk);
	for (int b = 0; b < nblk; b++)
		roxep_combine_recv(ep, out, n, epoch, b, nblk);
	roxep_combine_ack(ep, epoch);
}

// One step of the fused GEMM (tiles pushed as computed, then reduced in PE order into C).
void rox_gemm_fused(uint32_t tid, const roxgemm_t *g, const float *A, const float *B, float *C, uint64_t step, float *scratch, int nblk)
{
	tl_tid = tid;
	for (int b = 0; b < nblk; b++)
		roxgemm_fused(g, A, B, step, scratch, b, nblk);
	for (int b = 0; b < nblk; b++)
		roxgemm_reduce(g, C, step, b, nblk);
	roxgemm_ack(g, step);
}

// One step of the unfused GEMM: the same tiles into Cp, then coll.h's all-reduce into C.
int rox_gemm_unfused(uint32_t tid, const roxgemm_t *g, const float *A, const float *B, float *Cp, float *C, float *scratch, int nblk)
{
	tl_tid = tid;
	for (int b = 0; b < nblk; b++)
		roxgemm_unfused(g, A, B, Cp, scratch, b, nblk);
	roxi_thread_drain();
	roxa_sync_block();
	return roxshmemx_float_sum_reduce_block(ROXSHMEM_TEAM_WORLD, C, Cp, (uint64_t)g->m * g->n);
}
}
