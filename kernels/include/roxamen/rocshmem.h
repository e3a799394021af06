/* rocSHMEM's device names over the Roxamen device library: a kernel written for rocSHMEM moves over
 * by including "roxamen/rocshmem.h" instead of <rocshmem/rocshmem.hpp>. As in rocSHMEM the names
 * are in namespace rocshmem (most kernels say `using namespace rocshmem;`).
 *
 * Every name maps to the roxshmem_* call with the same semantics, with rocSHMEM's signature
 * (ROCm/rocSHMEM include/rocshmem/rocshmem.hpp, rocshmem_RMA.hpp, rocshmem_RMA_X.hpp,
 * rocshmem_AMO.hpp, rocshmem_SIG_OP.hpp, rocshmem_P2P_SYNC.hpp, rocshmem_common.hpp). _wg (work
 * group) is Roxamen's _block, _wave (wavefront) its _warp; typed forms Roxamen spells only for
 * bytes call the byte form with nelems * sizeof(TYPE).
 *
 * Contexts: Roxamen's device library has one implicit context. Every rocshmem_ctx_* call is the
 * call without its context; rocshmem_wg_ctx_create hands out that one context (and succeeds),
 * rocshmem_wg_ctx_destroy and rocshmem_wg_init/finalize have nothing to do (the runtime fills
 * roxshmem_state when it loads the module). A quiet or fence on one context therefore also
 * completes or orders the others' operations, which OpenSHMEM allows (it is what
 * ROCSHMEM_CTX_DEFAULT does for everything). rocshmem_fence(pe) orders the operations to every PE,
 * not only pe's: also stronger, also allowed.
 *
 * Constants keep rocSHMEM's values: ROCSHMEM_SIGNAL_SET/ADD are 0 and 1 as in Roxamen;
 * ROCSHMEM_CMP_* count EQ NE GT GE LT LE (rocshmem_common.hpp, enum rocshmem_cmps) where
 * Roxamen's count EQ NE GT LE LT GE, so every comparison is translated at the call.
 *
 * A name rocSHMEM has and Roxamen does not (teams, collectives other than the work-group barrier
 * and sync, waits on float, double and 1-byte types, waits on several words, the system fence) is
 * declared unavailable: a use fails to compile with
 *   error: 'rocshmem_ctx_int_wg_broadcast' is unavailable: rocshmem_ctx_int_wg_broadcast: no Roxamen equivalent: ... */
#ifndef ROXAMEN_ROCSHMEM_H
#define ROXAMEN_ROCSHMEM_H

#include "compat.h"

#ifdef ROXA_GPU_LANG

namespace rocshmem {

enum ROCSHMEM_SIGNAL_OPS { ROCSHMEM_SIGNAL_SET = 0, ROCSHMEM_SIGNAL_ADD = 1 };
ROXA_STATIC_ASSERT(ROCSHMEM_SIGNAL_SET == ROXSHMEM_SIGNAL_SET && ROCSHMEM_SIGNAL_ADD == ROXSHMEM_SIGNAL_ADD,
		   rocshmem_signal_values_are_roxshmem_s);

enum rocshmem_cmps { ROCSHMEM_CMP_EQ, ROCSHMEM_CMP_NE, ROCSHMEM_CMP_GT, ROCSHMEM_CMP_GE, ROCSHMEM_CMP_LT, ROCSHMEM_CMP_LE };

/* rocSHMEM's comparison to Roxamen's; any other value passes through. */
ROXA_FN int roxc_roc_cmp(int cmp)
{
	switch (cmp) {
	case ROCSHMEM_CMP_EQ: return ROXSHMEM_CMP_EQ;
	case ROCSHMEM_CMP_NE: return ROXSHMEM_CMP_NE;
	case ROCSHMEM_CMP_GT: return ROXSHMEM_CMP_GT;
	case ROCSHMEM_CMP_GE: return ROXSHMEM_CMP_GE;
	case ROCSHMEM_CMP_LT: return ROXSHMEM_CMP_LT;
	case ROCSHMEM_CMP_LE: return ROXSHMEM_CMP_LE;
	}
	return cmp;
}

enum rocshmem_thread_ops {
	ROCSHMEM_THREAD_SINGLE,
	ROCSHMEM_THREAD_FUNNELED,
	ROCSHMEM_THREAD_WG_FUNNELED,
	ROCSHMEM_THREAD_SERIALIZED,
	ROCSHMEM_THREAD_MULTIPLE
};

/* context options (ignored, as rocSHMEM says of rocshmem_wg_ctx_create's) */
const int ROCSHMEM_CTX_ZERO = 0;
const int ROCSHMEM_CTX_NOSTORE = 1;
const int ROCSHMEM_CTX_SERIALIZED = 2;
const int ROCSHMEM_CTX_WG_PRIVATE = 4;
const int ROCSHMEM_CTX_SHARED = 8;

typedef struct {
	void *ctx_opaque;
	void *team_opaque;
} rocshmem_ctx_t;

/* the one context */
static __constant__ const rocshmem_ctx_t ROCSHMEM_CTX_DEFAULT = {0, 0};

/* ---- setup and query ----------------------------------------------------------------------- */
/* Any thread may call any function (the library keeps no per-work-group state). */
ROXA_API void rocshmem_wg_init(void) {}
ROXA_API void rocshmem_wg_finalize(void) {}
ROXA_API void rocshmem_query_thread(int *provided) { *provided = ROCSHMEM_THREAD_MULTIPLE; }
ROXA_API void rocshmem_wg_init_thread(int, int *provided) { rocshmem_query_thread(provided); }
ROXA_API int rocshmem_wg_ctx_create(int64_t, rocshmem_ctx_t *ctx)
{
	*ctx = ROCSHMEM_CTX_DEFAULT;
	return 0;
}
ROXA_API void rocshmem_wg_ctx_destroy(rocshmem_ctx_t *) {}

ROXA_API int rocshmem_my_pe(void) { return roxshmem_my_pe(); }
ROXA_API int rocshmem_n_pes(void) { return roxshmem_n_pes(); }
ROXA_API int rocshmem_ctx_my_pe(rocshmem_ctx_t) { return roxshmem_my_pe(); }
ROXA_API int rocshmem_ctx_n_pes(rocshmem_ctx_t) { return roxshmem_n_pes(); }
ROXA_API void *rocshmem_ptr(const void *dest, int pe) { return roxshmem_ptr(dest, pe); }

/* ---- RMA ----------------------------------------------------------------------------------- */
/* ROXC_ROC(RET, NAME, PARAMS, ARGS, BODY): NAME(PARAMS) and rocshmem_ctx_NAME(ctx, PARAMS). */
#define ROXC_ROC(RET, NAME, PARAMS, BODY)                                                                 \
	ROXA_API RET rocshmem_##NAME PARAMS { BODY; }                                                     \
	ROXA_API RET rocshmem_ctx_##NAME(rocshmem_ctx_t, ROXC_ROC_UNPAREN PARAMS) { BODY; }
#define ROXC_ROC_UNPAREN(...) __VA_ARGS__

#define ROXC_ROC_ELEMS(NAME, T, ROX, SIZE)                                                                \
	ROXC_ROC(void, NAME, (T *dest, const T *source, size_t nelems, int pe), ROX(dest, source, nelems * (SIZE), pe))
#define ROXC_ROC_ELEMS_SIGNAL(NAME, T, ROX, SIZE)                                                         \
	ROXC_ROC(void, NAME, (T *dest, const T *source, size_t nelems, uint64_t *sig_addr, uint64_t signal, int sig_op, int pe), \
		 ROX(dest, source, nelems * (SIZE), sig_addr, signal, sig_op, pe))
/* every put/get/put_signal form of one element type: rocSHMEM's 8 RMA and 6 signal forms */
#define ROXC_ROC_RMA_FORMS(PUT, GET, T, SIZE)                                                             \
	ROXC_ROC_ELEMS(PUT, T, roxshmem_putmem, SIZE)                                                     \
	ROXC_ROC_ELEMS(GET, T, roxshmem_getmem, SIZE)                                                     \
	ROXC_ROC_ELEMS(PUT##_nbi, T, roxshmem_putmem_nbi, SIZE)                                           \
	ROXC_ROC_ELEMS(GET##_nbi, T, roxshmem_getmem_nbi, SIZE)                                           \
	ROXC_ROC_ELEMS(PUT##_wg, T, roxshmemx_putmem_block, SIZE)                                         \
	ROXC_ROC_ELEMS(GET##_wg, T, roxshmemx_getmem_block, SIZE)                                         \
	ROXC_ROC_ELEMS(PUT##_nbi_wg, T, roxshmemx_putmem_nbi_block, SIZE)                                 \
	ROXC_ROC_ELEMS(GET##_nbi_wg, T, roxshmemx_getmem_nbi_block, SIZE)                                 \
	ROXC_ROC_ELEMS(PUT##_wave, T, roxshmemx_putmem_warp, SIZE)                                        \
	ROXC_ROC_ELEMS(GET##_wave, T, roxshmemx_getmem_warp, SIZE)                                        \
	ROXC_ROC_ELEMS(PUT##_nbi_wave, T, roxshmemx_putmem_nbi_warp, SIZE)                                \
	ROXC_ROC_ELEMS(GET##_nbi_wave, T, roxshmemx_getmem_nbi_warp, SIZE)                                \
	ROXC_ROC_ELEMS_SIGNAL(PUT##_signal, T, roxshmem_putmem_signal, SIZE)                              \
	ROXC_ROC_ELEMS_SIGNAL(PUT##_signal_nbi, T, roxshmem_putmem_signal_nbi, SIZE)                      \
	ROXC_ROC_ELEMS_SIGNAL(PUT##_signal_wg, T, roxshmemx_putmem_signal_block, SIZE)                    \
	ROXC_ROC_ELEMS_SIGNAL(PUT##_signal_nbi_wg, T, roxshmemx_putmem_signal_nbi_block, SIZE)            \
	ROXC_ROC_ELEMS_SIGNAL(PUT##_signal_wave, T, roxshmemx_putmem_signal_warp, SIZE)                   \
	ROXC_ROC_ELEMS_SIGNAL(PUT##_signal_nbi_wave, T, roxshmemx_putmem_signal_nbi_warp, SIZE)

ROXC_ROC_RMA_FORMS(putmem, getmem, void, 1)

/* rocSHMEM's typed RMA types (rocshmem_RMA.hpp): the C types, no fixed-width names */
#define ROXC_ROC_RMA_TYPES(X)                                                                             \
	X(float, float) X(double, double) X(char, char) X(schar, signed char) X(short, short) X(int, int)  \
	X(long, long) X(longlong, long long) X(uchar, unsigned char) X(ushort, unsigned short)             \
	X(uint, unsigned int) X(ulong, unsigned long) X(ulonglong, unsigned long long)

#define ROXC_ROC_RMA(NAME, T)                                                                             \
	ROXC_ROC(void, NAME##_p, (T *dest, T value, int pe), roxshmem_##NAME##_p(dest, value, pe))        \
	ROXC_ROC(T, NAME##_g, (const T *source, int pe), return roxshmem_##NAME##_g(source, pe))          \
	ROXC_ROC_RMA_FORMS(NAME##_put, NAME##_get, T, sizeof(T))
ROXC_ROC_RMA_TYPES(ROXC_ROC_RMA)

/* ---- signals ------------------------------------------------------------------------------- */
/* every thread of the group reads the word (it is local) */
ROXA_API uint64_t rocshmem_signal_fetch(const uint64_t *sig_addr) { return roxshmem_signal_fetch(sig_addr); }
ROXA_API uint64_t rocshmem_signal_fetch_wg(const uint64_t *sig_addr) { return roxshmem_signal_fetch(sig_addr); }
ROXA_API uint64_t rocshmem_signal_fetch_wave(const uint64_t *sig_addr) { return roxshmem_signal_fetch(sig_addr); }

/* ---- AMOs (rocshmem_AMO.hpp: OpenSHMEM 1.5's type classes) --------------------------------- */
#define ROXC_ROC_AMO_FSS(NAME, T)                                                                         \
	ROXC_ROC(T, NAME##_atomic_fetch, (T *source, int pe), return roxshmem_##NAME##_atomic_fetch(source, pe)) \
	ROXC_ROC(void, NAME##_atomic_set, (T *dest, T value, int pe), roxshmem_##NAME##_atomic_set(dest, value, pe)) \
	ROXC_ROC(T, NAME##_atomic_swap, (T *dest, T value, int pe), return roxshmem_##NAME##_atomic_swap(dest, value, pe))
#define ROXC_ROC_AMO_STD(NAME, T)                                                                         \
	ROXC_ROC_AMO_FSS(NAME, T)                                                                         \
	ROXC_ROC(T, NAME##_atomic_compare_swap, (T *dest, T cond, T value, int pe),                        \
		 return roxshmem_##NAME##_atomic_compare_swap(dest, cond, value, pe))                       \
	ROXC_ROC(T, NAME##_atomic_fetch_add, (T *dest, T value, int pe), return roxshmem_##NAME##_atomic_fetch_add(dest, value, pe)) \
	ROXC_ROC(void, NAME##_atomic_add, (T *dest, T value, int pe), roxshmem_##NAME##_atomic_add(dest, value, pe)) \
	ROXC_ROC(T, NAME##_atomic_fetch_inc, (T *dest, int pe), return roxshmem_##NAME##_atomic_fetch_inc(dest, pe)) \
	ROXC_ROC(void, NAME##_atomic_inc, (T *dest, int pe), roxshmem_##NAME##_atomic_inc(dest, pe))
#define ROXC_ROC_AMO_BIT(NAME, T)                                                                         \
	ROXC_ROC(T, NAME##_atomic_fetch_and, (T *dest, T value, int pe), return roxshmem_##NAME##_atomic_fetch_and(dest, value, pe)) \
	ROXC_ROC(void, NAME##_atomic_and, (T *dest, T value, int pe), roxshmem_##NAME##_atomic_and(dest, value, pe)) \
	ROXC_ROC(T, NAME##_atomic_fetch_or, (T *dest, T value, int pe), return roxshmem_##NAME##_atomic_fetch_or(dest, value, pe)) \
	ROXC_ROC(void, NAME##_atomic_or, (T *dest, T value, int pe), roxshmem_##NAME##_atomic_or(dest, value, pe)) \
	ROXC_ROC(T, NAME##_atomic_fetch_xor, (T *dest, T value, int pe), return roxshmem_##NAME##_atomic_fetch_xor(dest, value, pe)) \
	ROXC_ROC(void, NAME##_atomic_xor, (T *dest, T value, int pe), roxshmem_##NAME##_atomic_xor(dest, value, pe))
ROXI_AMO_TYPES(ROXC_ROC_AMO_STD)
ROXC_BITWISE_AMO_TYPES(ROXC_ROC_AMO_BIT)
ROXC_EXTENDED_AMO_TYPES(ROXC_ROC_AMO_FSS)

/* ---- point-to-point synchronization (rocshmem_P2P_SYNC.hpp) -------------------------------- */
#define ROXC_ROC_P2P(NAME, T)                                                                             \
	ROXA_API void rocshmem_##NAME##_wait_until(T *ivars, int cmp, T val) { roxshmem_##NAME##_wait_until(ivars, roxc_roc_cmp(cmp), val); } \
	ROXA_API int rocshmem_##NAME##_test(T *ivars, int cmp, T val) { return roxshmem_##NAME##_test(ivars, roxc_roc_cmp(cmp), val); }
#define ROXC_ROC_P2P_TYPES(X)                                                                             \
	X(short, short) X(int, int) X(long, long) X(longlong, long long) X(ushort, unsigned short)         \
	X(uint, unsigned int) X(ulong, unsigned long) X(ulonglong, unsigned long long)
ROXC_ROC_P2P_TYPES(ROXC_ROC_P2P)

/* ---- ordering, completion, barriers -------------------------------------------------------- */
ROXA_API void rocshmem_fence(void) { roxshmem_fence(); }
ROXA_API void rocshmem_fence(int) { roxshmem_fence(); }
ROXA_API void rocshmem_ctx_fence(rocshmem_ctx_t) { roxshmem_fence(); }
ROXA_API void rocshmem_ctx_fence(rocshmem_ctx_t, int) { roxshmem_fence(); }
ROXA_API void rocshmem_quiet(void) { roxshmem_quiet(); }
ROXA_API void rocshmem_ctx_quiet(rocshmem_ctx_t) { roxshmem_quiet(); }
/* work-group collectives: every thread of one work group per PE */
ROXA_API void rocshmem_wg_barrier_all(void) { roxshmemx_barrier_all_block(); }
ROXA_API void rocshmem_ctx_wg_barrier_all(rocshmem_ctx_t) { roxshmemx_barrier_all_block(); }
ROXA_API void rocshmem_wg_sync_all(void) { roxshmemx_sync_all_block(); }
ROXA_API void rocshmem_ctx_wg_sync_all(rocshmem_ctx_t) { roxshmemx_sync_all_block(); }

/* ---- no Roxamen equivalent ----------------------------------------------------------------- */
#define ROXC_ROC_TEAMS "the device library has no teams (every call is on the world of PEs)"
#define ROXC_ROC_COLL "the device library's only collectives are rocshmem_wg_barrier_all and rocshmem_wg_sync_all"

typedef uint64_t *rocshmem_team_t;
extern __device__ rocshmem_team_t ROCSHMEM_TEAM_WORLD ROXC_UNAVAILABLE("ROCSHMEM_TEAM_WORLD: no Roxamen equivalent: " ROXC_ROC_TEAMS);
ROXC_NO(int, rocshmem_wg_team_create_ctx, ROXC_ROC_TEAMS)
ROXC_NO(int, rocshmem_team_translate_pe, ROXC_ROC_TEAMS)
ROXC_NO(void, rocshmem_wg_team_sync, ROXC_ROC_TEAMS)
ROXC_NO(void, rocshmem_ctx_wg_team_sync, ROXC_ROC_TEAMS)
ROXC_NO(void, rocshmem_threadfence_system, "no bare system-scope fence: rocshmem_fence or rocshmem_quiet order the library's operations")
ROXC_NO(void, rocshmem_ctx_threadfence_system, "no bare system-scope fence: rocshmem_ctx_fence or rocshmem_ctx_quiet order the library's operations")

#define ROXC_ROC_COLL_TYPED(NAME, T)                                                                      \
	ROXC_NO(void, rocshmem_ctx_##NAME##_wg_broadcast, ROXC_ROC_COLL)                                  \
	ROXC_NO(void, rocshmem_ctx_##NAME##_wg_alltoall, ROXC_ROC_COLL)                                   \
	ROXC_NO(void, rocshmem_ctx_##NAME##_wg_fcollect, ROXC_ROC_COLL)                                   \
	ROXC_NO(int, rocshmem_ctx_##NAME##_sum_wg_reduce, ROXC_ROC_COLL)                                  \
	ROXC_NO(int, rocshmem_ctx_##NAME##_prod_wg_reduce, ROXC_ROC_COLL)                                 \
	ROXC_NO(int, rocshmem_ctx_##NAME##_min_wg_reduce, ROXC_ROC_COLL)                                  \
	ROXC_NO(int, rocshmem_ctx_##NAME##_max_wg_reduce, ROXC_ROC_COLL)                                  \
	ROXC_NO(int, rocshmem_ctx_##NAME##_and_wg_reduce, ROXC_ROC_COLL)                                  \
	ROXC_NO(int, rocshmem_ctx_##NAME##_or_wg_reduce, ROXC_ROC_COLL)                                   \
	ROXC_NO(int, rocshmem_ctx_##NAME##_xor_wg_reduce, ROXC_ROC_COLL)
ROXC_ROC_RMA_TYPES(ROXC_ROC_COLL_TYPED)

/* waits the device library does not have: on several words, and on float, double and bytes */
#define ROXC_ROC_MULTI "one wait_until/test per word (the device library waits on one word)"
#define ROXC_ROC_P2P_MULTI(NAME, T)                                                                       \
	ROXC_NO(void, rocshmem_##NAME##_wait_until_all, ROXC_ROC_MULTI)                                   \
	ROXC_NO(size_t, rocshmem_##NAME##_wait_until_any, ROXC_ROC_MULTI)                                 \
	ROXC_NO(size_t, rocshmem_##NAME##_wait_until_some, ROXC_ROC_MULTI)                                \
	ROXC_NO(void, rocshmem_##NAME##_wait_until_all_vector, ROXC_ROC_MULTI)                            \
	ROXC_NO(size_t, rocshmem_##NAME##_wait_until_any_vector, ROXC_ROC_MULTI)                          \
	ROXC_NO(size_t, rocshmem_##NAME##_wait_until_some_vector, ROXC_ROC_MULTI)
ROXC_ROC_RMA_TYPES(ROXC_ROC_P2P_MULTI)
#define ROXC_ROC_WAIT_TYPE "the device library waits on 2-, 4- and 8-byte integers only"
#define ROXC_ROC_P2P_NONE(NAME)                                                                           \
	ROXC_NO(void, rocshmem_##NAME##_wait_until, ROXC_ROC_WAIT_TYPE) ROXC_NO(int, rocshmem_##NAME##_test, ROXC_ROC_WAIT_TYPE)
ROXC_ROC_P2P_NONE(float)
ROXC_ROC_P2P_NONE(double)
ROXC_ROC_P2P_NONE(char)
ROXC_ROC_P2P_NONE(schar)
ROXC_ROC_P2P_NONE(uchar)

} /* namespace rocshmem */

#endif /* ROXA_GPU_LANG */
#endif /* ROXAMEN_ROCSHMEM_H */
