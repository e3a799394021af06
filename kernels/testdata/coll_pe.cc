// One PE of the team collectives' CPU harness (TestCollHost, coll_host_test.go): the device library
// built for the CPU as a shared library, one loaded copy per PE (so each PE has its own
// roxshmem_state), several OS threads per PE standing in for a block's threads (ROXA_HOST_GROUP:
// the thread index, the group barrier and the pause are this file's). The arch layer's host
// fallbacks (the compiler's __atomic builtins) stand in for the GPU's scoped accesses and fences;
// the heaps are plain memory that every PE's threads load and store.
//
// The type list below is written out independently of the header's, so that a reduction missing
// from the header fails to compile; the test reads it back (rox_type_name) and checks it against
// its own.
#define ROXA_HOST_GROUP 1
#include "roxamen/roxshmem.h"

extern "C" int sched_yield(void);
extern "C" long syscall(long, ...);
struct timespec {
	long tv_sec, tv_nsec;
};
extern "C" int nanosleep(const struct timespec *, struct timespec *);
#if defined(__x86_64__)
#define FUTEX_SYSCALL 202
#elif defined(__aarch64__)
#define FUTEX_SYSCALL 98
#endif
#define FUTEX_WAIT_PRIVATE 128
#define FUTEX_WAKE_PRIVATE 129
// waiting threads sleep a little: the harness runs 8 PEs x 4 threads on a few cores, where
// spinning (even with sched_yield) starves the threads that would end the wait
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
#ifdef FUTEX_SYSCALL
		syscall(FUTEX_SYSCALL, &bar_gen, FUTEX_WAKE_PRIVATE, 1 << 30, 0, 0, 0);
#endif
	} else {
		for (int spins = 0; __atomic_load_n(&bar_gen, __ATOMIC_ACQUIRE) == gen; spins++) {
#ifdef FUTEX_SYSCALL
			struct timespec ts = {0, 1000000};
			if (spins >= 16)
				syscall(FUTEX_SYSCALL, &bar_gen, FUTEX_WAIT_PRIVATE, gen, &ts, 0, 0);
			else
				sched_yield();
#else
			spins < 64 ? (void)sched_yield() : nap();
#endif
		}
	}
}

// every (name, type) a reduction exists for: the ARITH types (sum, prod, min, max), the ones marked
// B also and, or, xor, the H ones (16-bit floats) sum, min, max
#define TYPES(A, B, H)                                                                                  \
	A(char, char) A(schar, signed char) A(short, short) A(int, int) A(long, long) A(longlong, long long) \
	A(ptrdiff, ptrdiff_t) B(uchar, unsigned char) B(ushort, unsigned short) B(uint, unsigned int)        \
	B(ulong, unsigned long) B(ulonglong, unsigned long long) B(int8, int8_t) B(int16, int16_t)           \
	B(int32, int32_t) B(int64, int64_t) B(uint8, uint8_t) B(uint16, uint16_t) B(uint32, uint32_t)       \
	B(uint64, uint64_t) B(size, size_t) A(float, float) A(double, double) H(half, roxshmem_half_t)        \
	H(bfloat16, roxshmem_bfloat16_t)

#define NAME_OF(N, T) #N,
static const char *type_names[] = {TYPES(NAME_OF, NAME_OF, NAME_OF)};
enum { N_TYPES = sizeof type_names / sizeof type_names[0] };

enum { OP_SUM, OP_PROD, OP_MIN, OP_MAX, OP_AND, OP_OR, OP_XOR };
enum { C_BARRIER, C_SYNC, C_BCAST, C_FCOLLECT, C_COLLECT, C_ALLTOALL, C_REDUCE, C_REDUCE_SCATTER };

#define CALL3(R, N, T, OPN)                                                                             \
	(level == 0   ? roxshmem_##N##_##OPN##_reduce(team, (T *)dest, (const T *)src, n)              \
	 : level == 1 ? roxshmemx_##N##_##OPN##_reduce_warp(team, (T *)dest, (const T *)src, n)         \
		      : roxshmemx_##N##_##OPN##_reduce_block(team, (T *)dest, (const T *)src, n))
#define CALLRS(N, T, OPN)                                                                               \
	(level == 0   ? roxshmemx_##N##_##OPN##_reduce_scatter(team, (T *)dest, (const T *)src, n)      \
	 : level == 1 ? roxshmemx_##N##_##OPN##_reduce_scatter_warp(team, (T *)dest, (const T *)src, n) \
		      : roxshmemx_##N##_##OPN##_reduce_scatter_block(team, (T *)dest, (const T *)src, n))
#define OPCASE(N, T, OPN, OPID)                                                                         \
	if (op == OPID && level == 5)                                                                   \
		return coll == C_REDUCE ? roxi_reduce<T, OPID>(team, (T *)dest, (const T *)src, n, ROXI_GRID, roxi_type_code((const T *)0)) \
					: roxi_reduce_scatter<T, OPID>(team, (T *)dest, (const T *)src, n, ROXI_GRID, roxi_type_code((const T *)0)); \
	if (op == OPID)                                                                                 \
		return coll == C_REDUCE ? CALL3(0, N, T, OPN) : CALLRS(N, T, OPN);
#define ARITH_CASES(N, T) OPCASE(N, T, sum, OP_SUM) OPCASE(N, T, prod, OP_PROD) OPCASE(N, T, min, OP_MIN) OPCASE(N, T, max, OP_MAX)
#define DISPATCH_A(N, T)                                                                                \
	if (type == t++) {                                                                              \
		ARITH_CASES(N, T)                                                                       \
		return -100;                                                                            \
	}
#define DISPATCH_B(N, T)                                                                                \
	if (type == t++) {                                                                              \
		ARITH_CASES(N, T)                                                                       \
		OPCASE(N, T, and, OP_AND) OPCASE(N, T, or, OP_OR) OPCASE(N, T, xor, OP_XOR)             \
		return -100;                                                                            \
	}
#define DISPATCH_H(N, T)                                                                                \
	if (type == t++) {                                                                              \
		OPCASE(N, T, sum, OP_SUM) OPCASE(N, T, min, OP_MIN) OPCASE(N, T, max, OP_MAX)           \
		return -100;                                                                            \
	}

static int reduce(int coll, int type, int op, int level, roxshmem_team_t team, void *dest, const void *src, uint64_t n)
{
	int t = 0;
	TYPES(DISPATCH_A, DISPATCH_B, DISPATCH_H)
	return -101;
}

// the byte forms at each level; level 3: the typed thread form over int, level 4: the typed block
// form over double (n then counts elements), level 5: the grid form of the stream collectives
// (one block here; past the one-shot sizes it takes the direct path)
static int data(int coll, int level, roxshmem_team_t team, void *dest, const void *src, uint64_t n, int root)
{
	switch (coll) {
	case C_BCAST:
		switch (level) {
		case 0: return roxshmem_broadcastmem(team, dest, src, n, root);
		case 1: return roxshmemx_broadcastmem_warp(team, dest, src, n, root);
		case 2: return roxshmemx_broadcastmem_block(team, dest, src, n, root);
		case 5: return roxi_broadcast(team, dest, src, n, root, ROXI_GRID, 0);
		case 3: return roxshmem_int_broadcast(team, (int *)dest, (const int *)src, n, root);
		default: return roxshmemx_double_broadcast_block(team, (double *)dest, (const double *)src, n, root);
		}
	case C_FCOLLECT:
		switch (level) {
		case 0: return roxshmem_fcollectmem(team, dest, src, n);
		case 1: return roxshmemx_fcollectmem_warp(team, dest, src, n);
		case 2: return roxshmemx_fcollectmem_block(team, dest, src, n);
		case 5: return roxi_fcollect(team, dest, src, n, ROXI_GRID, 0);
		case 3: return roxshmem_int_fcollect(team, (int *)dest, (const int *)src, n);
		default: return roxshmemx_double_fcollect_block(team, (double *)dest, (const double *)src, n);
		}
	case C_COLLECT:
		switch (level) {
		case 0: return roxshmem_collectmem(team, dest, src, n);
		case 1: return roxshmemx_collectmem_warp(team, dest, src, n);
		case 2: return roxshmemx_collectmem_block(team, dest, src, n);
		case 5: return roxi_collect(team, dest, src, n, ROXI_GRID, 0);
		case 3: return roxshmem_int_collect(team, (int *)dest, (const int *)src, n);
		default: return roxshmemx_double_collect_block(team, (double *)dest, (const double *)src, n);
		}
	default:
		switch (level) {
		case 0: return roxshmem_alltoallmem(team, dest, src, n);
		case 1: return roxshmemx_alltoallmem_warp(team, dest, src, n);
		case 2: return roxshmemx_alltoallmem_block(team, dest, src, n);
		case 5: return roxi_alltoall(team, dest, src, n, ROXI_GRID, 0);
		case 3: return roxshmem_int_alltoall(team, (int *)dest, (const int *)src, n);
		default: return roxshmemx_double_alltoall_block(team, (double *)dest, (const double *)src, n);
		}
	}
}

extern "C" {
void rox_set_state(const roxshmem_state_t *s) { roxshmem_state = *s; }
void rox_set_threads(uint32_t n) { g_nthreads = n; }
int rox_n_types(void) { return N_TYPES; }
const char *rox_type_name(int i) { return i >= 0 && i < N_TYPES ? type_names[i] : ""; }

// Runs one collective as thread tid of this PE's group (level 0: only tid 0 calls).
int rox_coll(uint32_t tid, int coll, int type, int op, int level, int team, void *dest, const void *src, uint64_t n, int root)
{
	tl_tid = tid;
	switch (coll) {
	case C_BARRIER:
		return level == 0 ? roxshmem_barrier(team) : level == 1 ? roxshmemx_barrier_warp(team) : roxshmemx_barrier_block(team);
	case C_SYNC:
		return level == 0 ? roxshmem_team_sync(team) : level == 1 ? roxshmemx_team_sync_warp(team) : roxshmemx_team_sync_block(team);
	case C_REDUCE:
	case C_REDUCE_SCATTER: return reduce(coll, type, op, level, team, dest, src, n);
	default: return data(coll, level, team, dest, src, n, root);
	}
}

// a batch of calls, run in order by every thread of the group (thread-level calls by thread 0
// alone); thread 0 stores each call's result in ret
struct rox_call {
	int32_t coll, type, op, level, team, root;
	uint64_t dest, src, n;
	int32_t ret, pad;
};
void rox_batch(uint32_t tid, struct rox_call *c, int n)
{
	for (int i = 0; i < n; i++) {
		if ((c[i].level == 0 || c[i].level == 3) && tid != 0)
			continue;
		int r = rox_coll(tid, c[i].coll, c[i].type, c[i].op, c[i].level, c[i].team, (void *)(uintptr_t)c[i].dest,
				 (const void *)(uintptr_t)c[i].src, c[i].n, c[i].root);
		if (tid == 0)
			c[i].ret = r;
	}
}

int rox_team_my_pe(int team) { return roxshmem_team_my_pe(team); }
int rox_team_n_pes(int team) { return roxshmem_team_n_pes(team); }
int rox_team_translate_pe(int a, int pe, int b) { return roxshmem_team_translate_pe(a, pe, b); }
}
