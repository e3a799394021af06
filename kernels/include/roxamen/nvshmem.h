/* NVSHMEM's device names over the Roxamen device library: a kernel written for NVSHMEM moves over
 * by including "roxamen/nvshmem.h" instead of <nvshmem.h> and <nvshmemx.h>.
 *
 * Every name maps to the roxshmem_* call with the same semantics, with NVSHMEM's signature
 * (NVSHMEM 3.x: src/include/host/nvshmem_api.h and nvshmemx_api.h declare the device API,
 * src/include/device/nvshmem_defines.h and nvshmemx_defines.h define it). The typed and sized
 * forms Roxamen spells only for bytes (nvshmemx_int_put_nbi_block, nvshmem_put64_signal, ...)
 * call the byte form with nelems * sizeof(TYPE), which is what both libraries do inside.
 *
 * Constants keep NVSHMEM's values: NVSHMEM_CMP_* are 0..5 as in Roxamen (nvshmem_constants.h,
 * enum nvshmemi_cmp_type); NVSHMEM_SIGNAL_SET and NVSHMEM_SIGNAL_ADD are 9 and 10
 * (nvshmem_common_transport.h, nvshmemx_signal_op_t), translated at each call, so a sig_op
 * computed on the host with NVSHMEM's headers means the same here.
 *
 * A name NVSHMEM has and Roxamen does not (teams, collectives other than the block barrier,
 * strided RMA, half/bfloat16 RMA, the multi-word waits, the thread- and warp-level barriers) is
 * declared unavailable: including the header costs nothing, a use fails to compile with
 *   error: 'nvshmem_int_sum_reduce' is unavailable: nvshmem_int_sum_reduce: no Roxamen equivalent: ...
 *
 * Semantics that differ: none in the mapped calls. There is no nvshmem_init on the device side in
 * either library; the Roxamen runtime fills roxshmem_state when it loads the module. */
#ifndef ROXAMEN_NVSHMEM_H
#define ROXAMEN_NVSHMEM_H

#include "compat.h"

#ifdef ROXA_GPU_LANG

typedef enum {
	NVSHMEM_CMP_EQ = 0,
	NVSHMEM_CMP_NE = 1,
	NVSHMEM_CMP_GT = 2,
	NVSHMEM_CMP_LE = 3,
	NVSHMEM_CMP_LT = 4,
	NVSHMEM_CMP_GE = 5,
} nvshmemx_cmp_type_t;
ROXA_STATIC_ASSERT(NVSHMEM_CMP_EQ == ROXSHMEM_CMP_EQ && NVSHMEM_CMP_NE == ROXSHMEM_CMP_NE &&
			   NVSHMEM_CMP_GT == ROXSHMEM_CMP_GT && NVSHMEM_CMP_LE == ROXSHMEM_CMP_LE &&
			   NVSHMEM_CMP_LT == ROXSHMEM_CMP_LT && NVSHMEM_CMP_GE == ROXSHMEM_CMP_GE,
		   nvshmem_cmp_values_are_roxshmem_s);

typedef enum { NVSHMEM_SIGNAL_SET = 9, NVSHMEM_SIGNAL_ADD = 10 } nvshmemx_signal_op_t;

/* NVSHMEM's sig_op to Roxamen's; any other value passes through (Roxamen's own 0 and 1). */
ROXA_FN int roxc_nv_sig_op(int sig_op)
{
	return sig_op == NVSHMEM_SIGNAL_SET ? ROXSHMEM_SIGNAL_SET : sig_op == NVSHMEM_SIGNAL_ADD ? ROXSHMEM_SIGNAL_ADD : sig_op;
}

/* ---- setup and query ----------------------------------------------------------------------- */
ROXA_API int nvshmem_my_pe(void) { return roxshmem_my_pe(); }
ROXA_API int nvshmem_n_pes(void) { return roxshmem_n_pes(); }
ROXA_API void *nvshmem_ptr(const void *ptr, int pe) { return roxshmem_ptr(ptr, pe); }

/* ---- RMA, bytes ---------------------------------------------------------------------------- */
#define ROXC_NV_MEM(NV, ROX)                                                                              \
	ROXA_API void NV(void *dest, const void *source, size_t nelems, int pe) { ROX(dest, source, nelems, pe); }
ROXC_NV_MEM(nvshmem_putmem, roxshmem_putmem)
ROXC_NV_MEM(nvshmem_getmem, roxshmem_getmem)
ROXC_NV_MEM(nvshmem_putmem_nbi, roxshmem_putmem_nbi)
ROXC_NV_MEM(nvshmem_getmem_nbi, roxshmem_getmem_nbi)
ROXC_NV_MEM(nvshmemx_putmem_warp, roxshmemx_putmem_warp)
ROXC_NV_MEM(nvshmemx_putmem_block, roxshmemx_putmem_block)
ROXC_NV_MEM(nvshmemx_putmem_nbi_warp, roxshmemx_putmem_nbi_warp)
ROXC_NV_MEM(nvshmemx_putmem_nbi_block, roxshmemx_putmem_nbi_block)
ROXC_NV_MEM(nvshmemx_getmem_warp, roxshmemx_getmem_warp)
ROXC_NV_MEM(nvshmemx_getmem_block, roxshmemx_getmem_block)
ROXC_NV_MEM(nvshmemx_getmem_nbi_warp, roxshmemx_getmem_nbi_warp)
ROXC_NV_MEM(nvshmemx_getmem_nbi_block, roxshmemx_getmem_nbi_block)

/* put-with-signal, bytes */
#define ROXC_NV_MEM_SIGNAL(NV, ROX)                                                                       \
	ROXA_API void NV(void *dest, const void *source, size_t nelems, uint64_t *sig_addr, uint64_t signal,   \
			 int sig_op, int pe)                                                                   \
	{                                                                                                 \
		ROX(dest, source, nelems, sig_addr, signal, roxc_nv_sig_op(sig_op), pe);                   \
	}
ROXC_NV_MEM_SIGNAL(nvshmem_putmem_signal, roxshmem_putmem_signal)
ROXC_NV_MEM_SIGNAL(nvshmem_putmem_signal_nbi, roxshmem_putmem_signal_nbi)
ROXC_NV_MEM_SIGNAL(nvshmemx_putmem_signal_warp, roxshmemx_putmem_signal_warp)
ROXC_NV_MEM_SIGNAL(nvshmemx_putmem_signal_nbi_warp, roxshmemx_putmem_signal_nbi_warp)
ROXC_NV_MEM_SIGNAL(nvshmemx_putmem_signal_block, roxshmemx_putmem_signal_block)
ROXC_NV_MEM_SIGNAL(nvshmemx_putmem_signal_nbi_block, roxshmemx_putmem_signal_nbi_block)

/* ---- RMA, typed (NVSHMEMI_REPT_FOR_STANDARD_RMA_TYPES but half and bfloat16) ----------------- */
#define ROXC_NV_ELEMS(NV, ROX, T, SIZE)                                                                   \
	ROXA_API void NV(T *dest, const T *source, size_t nelems, int pe) { ROX(dest, source, nelems * (SIZE), pe); }
#define ROXC_NV_ELEMS_SIGNAL(NV, ROX, T, SIZE)                                                            \
	ROXA_API void NV(T *dest, const T *source, size_t nelems, uint64_t *sig_addr, uint64_t signal,        \
			 int sig_op, int pe)                                                                   \
	{                                                                                                 \
		ROX(dest, source, nelems * (SIZE), sig_addr, signal, roxc_nv_sig_op(sig_op), pe);          \
	}
/* the eight RMA forms and six signal forms of one element type or size */
#define ROXC_NV_ELEMS_ALL(PUT, GET, T, SIZE)                                                              \
	ROXC_NV_ELEMS(nvshmemx_##PUT##_nbi_warp, roxshmemx_putmem_nbi_warp, T, SIZE)                       \
	ROXC_NV_ELEMS(nvshmemx_##PUT##_nbi_block, roxshmemx_putmem_nbi_block, T, SIZE)                     \
	ROXC_NV_ELEMS(nvshmemx_##GET##_nbi_warp, roxshmemx_getmem_nbi_warp, T, SIZE)                       \
	ROXC_NV_ELEMS(nvshmemx_##GET##_nbi_block, roxshmemx_getmem_nbi_block, T, SIZE)                     \
	ROXC_NV_ELEMS_SIGNAL(nvshmem_##PUT##_signal, roxshmem_putmem_signal, T, SIZE)                      \
	ROXC_NV_ELEMS_SIGNAL(nvshmem_##PUT##_signal_nbi, roxshmem_putmem_signal_nbi, T, SIZE)              \
	ROXC_NV_ELEMS_SIGNAL(nvshmemx_##PUT##_signal_warp, roxshmemx_putmem_signal_warp, T, SIZE)          \
	ROXC_NV_ELEMS_SIGNAL(nvshmemx_##PUT##_signal_nbi_warp, roxshmemx_putmem_signal_nbi_warp, T, SIZE)  \
	ROXC_NV_ELEMS_SIGNAL(nvshmemx_##PUT##_signal_block, roxshmemx_putmem_signal_block, T, SIZE)        \
	ROXC_NV_ELEMS_SIGNAL(nvshmemx_##PUT##_signal_nbi_block, roxshmemx_putmem_signal_nbi_block, T, SIZE)

#define ROXC_NV_RMA(NAME, T)                                                                              \
	ROXA_API void nvshmem_##NAME##_p(T *dest, const T value, int pe) { roxshmem_##NAME##_p(dest, value, pe); } \
	ROXA_API T nvshmem_##NAME##_g(const T *source, int pe) { return roxshmem_##NAME##_g(source, pe); }   \
	ROXC_NV_ELEMS(nvshmem_##NAME##_put, roxshmem_##NAME##_put, T, 1)                                    \
	ROXC_NV_ELEMS(nvshmem_##NAME##_get, roxshmem_##NAME##_get, T, 1)                                    \
	ROXC_NV_ELEMS(nvshmem_##NAME##_put_nbi, roxshmem_##NAME##_put_nbi, T, 1)                            \
	ROXC_NV_ELEMS(nvshmem_##NAME##_get_nbi, roxshmem_##NAME##_get_nbi, T, 1)                            \
	ROXC_NV_ELEMS(nvshmemx_##NAME##_put_warp, roxshmemx_##NAME##_put_warp, T, 1)                        \
	ROXC_NV_ELEMS(nvshmemx_##NAME##_put_block, roxshmemx_##NAME##_put_block, T, 1)                      \
	ROXC_NV_ELEMS(nvshmemx_##NAME##_get_warp, roxshmemx_##NAME##_get_warp, T, 1)                        \
	ROXC_NV_ELEMS(nvshmemx_##NAME##_get_block, roxshmemx_##NAME##_get_block, T, 1)                      \
	ROXC_NV_ELEMS_ALL(NAME##_put, NAME##_get, T, sizeof(T))
ROXI_RMA_TYPES(ROXC_NV_RMA)

/* ---- RMA, sized (NVSHMEMI_REPT_FOR_SIZES) ---------------------------------------------------- */
#define ROXC_NV_SIZED(BITS)                                                                               \
	ROXC_NV_ELEMS(nvshmem_put##BITS, roxshmem_put##BITS, void, 1)                                       \
	ROXC_NV_ELEMS(nvshmem_get##BITS, roxshmem_get##BITS, void, 1)                                       \
	ROXC_NV_ELEMS(nvshmem_put##BITS##_nbi, roxshmem_put##BITS##_nbi, void, 1)                           \
	ROXC_NV_ELEMS(nvshmem_get##BITS##_nbi, roxshmem_get##BITS##_nbi, void, 1)                           \
	ROXC_NV_ELEMS(nvshmemx_put##BITS##_warp, roxshmemx_putmem_warp, void, (BITS) / 8)                   \
	ROXC_NV_ELEMS(nvshmemx_put##BITS##_block, roxshmemx_putmem_block, void, (BITS) / 8)                 \
	ROXC_NV_ELEMS(nvshmemx_get##BITS##_warp, roxshmemx_getmem_warp, void, (BITS) / 8)                   \
	ROXC_NV_ELEMS(nvshmemx_get##BITS##_block, roxshmemx_getmem_block, void, (BITS) / 8)                 \
	ROXC_NV_ELEMS_ALL(put##BITS, get##BITS, void, (BITS) / 8)
ROXC_NV_SIZED(8)
ROXC_NV_SIZED(16)
ROXC_NV_SIZED(32)
ROXC_NV_SIZED(64)
ROXC_NV_SIZED(128)

/* ---- signals ------------------------------------------------------------------------------- */
/* An atomic update of a remote signal word, unordered with earlier puts (as in NVSHMEM). */
ROXA_API void nvshmemx_signal_op(uint64_t *sig_addr, uint64_t signal, int sig_op, int pe)
{
	if (roxc_nv_sig_op(sig_op) == ROXSHMEM_SIGNAL_ADD)
		roxshmem_uint64_atomic_add(sig_addr, signal, pe);
	else
		roxshmem_uint64_atomic_set(sig_addr, signal, pe);
}
ROXA_API uint64_t nvshmem_signal_fetch(uint64_t *sig_addr) { return roxshmem_signal_fetch(sig_addr); }
ROXA_API uint64_t nvshmem_signal_wait_until(uint64_t *sig_addr, int cmp, uint64_t cmp_val)
{
	return roxshmem_signal_wait_until(sig_addr, cmp, cmp_val);
}

/* ---- AMOs ---------------------------------------------------------------------------------- */
#define ROXC_NV_AMO_FSS(NAME, T)                                                                          \
	ROXA_API T nvshmem_##NAME##_atomic_fetch(const T *target, int pe) { return roxshmem_##NAME##_atomic_fetch(target, pe); } \
	ROXA_API void nvshmem_##NAME##_atomic_set(T *target, T value, int pe) { roxshmem_##NAME##_atomic_set(target, value, pe); } \
	ROXA_API T nvshmem_##NAME##_atomic_swap(T *target, T value, int pe) { return roxshmem_##NAME##_atomic_swap(target, value, pe); }
#define ROXC_NV_AMO_STD(NAME, T)                                                                          \
	ROXC_NV_AMO_FSS(NAME, T)                                                                          \
	ROXA_API T nvshmem_##NAME##_atomic_compare_swap(T *target, T compare, T value, int pe)             \
	{                                                                                                 \
		return roxshmem_##NAME##_atomic_compare_swap(target, compare, value, pe);                  \
	}                                                                                                 \
	ROXA_API T nvshmem_##NAME##_atomic_fetch_add(T *target, T value, int pe) { return roxshmem_##NAME##_atomic_fetch_add(target, value, pe); } \
	ROXA_API void nvshmem_##NAME##_atomic_add(T *target, T value, int pe) { roxshmem_##NAME##_atomic_add(target, value, pe); } \
	ROXA_API T nvshmem_##NAME##_atomic_fetch_inc(T *target, int pe) { return roxshmem_##NAME##_atomic_fetch_inc(target, pe); } \
	ROXA_API void nvshmem_##NAME##_atomic_inc(T *target, int pe) { roxshmem_##NAME##_atomic_inc(target, pe); }
#define ROXC_NV_AMO_BIT(NAME, T)                                                                          \
	ROXA_API T nvshmem_##NAME##_atomic_fetch_and(T *target, T value, int pe) { return roxshmem_##NAME##_atomic_fetch_and(target, value, pe); } \
	ROXA_API void nvshmem_##NAME##_atomic_and(T *target, T value, int pe) { roxshmem_##NAME##_atomic_and(target, value, pe); } \
	ROXA_API T nvshmem_##NAME##_atomic_fetch_or(T *target, T value, int pe) { return roxshmem_##NAME##_atomic_fetch_or(target, value, pe); } \
	ROXA_API void nvshmem_##NAME##_atomic_or(T *target, T value, int pe) { roxshmem_##NAME##_atomic_or(target, value, pe); } \
	ROXA_API T nvshmem_##NAME##_atomic_fetch_xor(T *target, T value, int pe) { return roxshmem_##NAME##_atomic_fetch_xor(target, value, pe); } \
	ROXA_API void nvshmem_##NAME##_atomic_xor(T *target, T value, int pe) { roxshmem_##NAME##_atomic_xor(target, value, pe); }
ROXI_AMO_TYPES(ROXC_NV_AMO_STD)
ROXC_BITWISE_AMO_TYPES(ROXC_NV_AMO_BIT)
ROXC_EXTENDED_AMO_TYPES(ROXC_NV_AMO_FSS)

/* ---- point-to-point synchronization (NVSHMEMI_REPT_FOR_WAIT_TYPES) -------------------------- */
#define ROXC_NV_P2P(NAME, T)                                                                              \
	ROXA_API void nvshmem_##NAME##_wait_until(T *ivar, int cmp, T cmp_value) { roxshmem_##NAME##_wait_until(ivar, cmp, cmp_value); } \
	ROXA_API int nvshmem_##NAME##_test(T *ivar, int cmp, T cmp_value) { return roxshmem_##NAME##_test(ivar, cmp, cmp_value); }
ROXI_P2P_TYPES(ROXC_NV_P2P)

/* ---- ordering, completion, barriers -------------------------------------------------------- */
ROXA_API void nvshmem_fence(void) { roxshmem_fence(); }
ROXA_API void nvshmem_quiet(void) { roxshmem_quiet(); }
/* every thread of one block per PE */
ROXA_API void nvshmemx_barrier_all_block(void) { roxshmemx_barrier_all_block(); }
ROXA_API void nvshmemx_sync_all_block(void) { roxshmemx_sync_all_block(); }

/* ---- no Roxamen equivalent ----------------------------------------------------------------- */
#define ROXC_NV_TEAMS "the device library has no teams (every call is on the world of PEs)"
#define ROXC_NV_COLL "the device library's only collectives are nvshmemx_barrier_all_block and nvshmemx_sync_all_block"

ROXC_NO(void, nvshmem_barrier_all,
	"the device library's PE barrier is called by every thread of one block per PE: nvshmemx_barrier_all_block")
ROXC_NO(void, nvshmem_sync_all,
	"the device library's PE sync is called by every thread of one block per PE: nvshmemx_sync_all_block")
ROXC_NO(void, nvshmemx_barrier_all_warp, "no warp-level barrier: nvshmemx_barrier_all_block")
ROXC_NO(void, nvshmemx_sync_all_warp, "no warp-level sync: nvshmemx_sync_all_block")

typedef int32_t nvshmem_team_t;
typedef nvshmem_team_t nvshmemx_team_t;
enum nvshmemi_team_id {
	NVSHMEM_TEAM_INVALID ROXC_UNAVAILABLE("NVSHMEM_TEAM_INVALID: no Roxamen equivalent: " ROXC_NV_TEAMS) = -1,
	NVSHMEM_TEAM_WORLD ROXC_UNAVAILABLE("NVSHMEM_TEAM_WORLD: no Roxamen equivalent: " ROXC_NV_TEAMS) = 0,
	NVSHMEM_TEAM_SHARED ROXC_UNAVAILABLE("NVSHMEM_TEAM_SHARED: no Roxamen equivalent: " ROXC_NV_TEAMS) = 1,
	NVSHMEMX_TEAM_NODE ROXC_UNAVAILABLE("NVSHMEMX_TEAM_NODE: no Roxamen equivalent: " ROXC_NV_TEAMS) = 2,
};
ROXC_NO(int, nvshmem_team_my_pe, ROXC_NV_TEAMS)
ROXC_NO(int, nvshmem_team_n_pes, ROXC_NV_TEAMS)
ROXC_NO(int, nvshmem_team_translate_pe, ROXC_NV_TEAMS)
ROXC_NO(int, nvshmem_barrier, ROXC_NV_TEAMS)
ROXC_NO(int, nvshmem_team_sync, ROXC_NV_TEAMS)
ROXC_NO(int, nvshmemx_barrier_warp, ROXC_NV_TEAMS)
ROXC_NO(int, nvshmemx_barrier_block, ROXC_NV_TEAMS)
ROXC_NO(int, nvshmemx_team_sync_warp, ROXC_NV_TEAMS)
ROXC_NO(int, nvshmemx_team_sync_block, ROXC_NV_TEAMS)
ROXC_NO(void *, nvshmemx_mc_ptr, "no multicast objects (and no teams)")

ROXC_NO(void, nvshmem_info_get_version, "the device library has no version query: the runtime reports it (roxrun info)")
ROXC_NO(void, nvshmem_info_get_name, "the device library has no version query: the runtime reports it (roxrun info)")
ROXC_NO(void, nvshmemx_vendor_get_version_info, "the device library has no version query: the runtime reports it (roxrun info)")
#define ROXC_NV_QP "no queue-pair handles: the proxy owns the NIC queues"
ROXC_NO(void, nvshmemx_qp_signal_op, ROXC_NV_QP)
ROXC_NO(void, nvshmemx_qp_quiet, ROXC_NV_QP)
ROXC_NO(void, nvshmemx_qp_quiet_warp, ROXC_NV_QP)
ROXC_NO(void, nvshmemx_qp_quiet_block, ROXC_NV_QP)
ROXC_NO(void, nvshmemx_qp_fence, ROXC_NV_QP)
ROXC_NO(void, nvshmemx_qp_fence_warp, ROXC_NV_QP)
ROXC_NO(void, nvshmemx_qp_fence_block, ROXC_NV_QP)

/* collectives over a team, at thread, warp and block scope */
#define ROXC_NV_COLL3(NAME)                                                                               \
	ROXC_NO(int, nvshmem_##NAME, ROXC_NV_COLL)                                                        \
	ROXC_NO(int, nvshmemx_##NAME##_warp, ROXC_NV_COLL) ROXC_NO(int, nvshmemx_##NAME##_block, ROXC_NV_COLL)
#define ROXC_NV_COLL_TYPED(NAME, T)                                                                       \
	ROXC_NV_COLL3(NAME##_broadcast) ROXC_NV_COLL3(NAME##_alltoall) ROXC_NV_COLL3(NAME##_fcollect)      \
	ROXC_NV_COLL3(NAME##_sum_reduce) ROXC_NV_COLL3(NAME##_prod_reduce) ROXC_NV_COLL3(NAME##_min_reduce) \
	ROXC_NV_COLL3(NAME##_max_reduce) ROXC_NV_COLL3(NAME##_and_reduce) ROXC_NV_COLL3(NAME##_or_reduce)  \
	ROXC_NV_COLL3(NAME##_xor_reduce) ROXC_NV_COLL3(NAME##_sum_reducescatter)                           \
	ROXC_NV_COLL3(NAME##_prod_reducescatter) ROXC_NV_COLL3(NAME##_min_reducescatter)                   \
	ROXC_NV_COLL3(NAME##_max_reducescatter) ROXC_NV_COLL3(NAME##_and_reducescatter)                    \
	ROXC_NV_COLL3(NAME##_or_reducescatter) ROXC_NV_COLL3(NAME##_xor_reducescatter)
ROXI_RMA_TYPES(ROXC_NV_COLL_TYPED)
ROXC_NV_COLL_TYPED(half, half)
ROXC_NV_COLL_TYPED(bfloat16, __nv_bfloat16)
ROXC_NV_COLL3(broadcastmem)
ROXC_NV_COLL3(alltoallmem)
ROXC_NV_COLL3(fcollectmem)

/* strided RMA */
#define ROXC_NV_STRIDED "no strided RMA: one putmem/getmem per element run"
#define ROXC_NV_STRIDED_TYPED(NAME, T)                                                                    \
	ROXC_NO(void, nvshmem_##NAME##_iput, ROXC_NV_STRIDED) ROXC_NO(void, nvshmem_##NAME##_iget, ROXC_NV_STRIDED)
ROXI_RMA_TYPES(ROXC_NV_STRIDED_TYPED)
#define ROXC_NV_STRIDED_SIZED(BITS)                                                                       \
	ROXC_NO(void, nvshmem_iput##BITS, ROXC_NV_STRIDED) ROXC_NO(void, nvshmem_iget##BITS, ROXC_NV_STRIDED)
ROXC_NV_STRIDED_SIZED(8)
ROXC_NV_STRIDED_SIZED(16)
ROXC_NV_STRIDED_SIZED(32)
ROXC_NV_STRIDED_SIZED(64)
ROXC_NV_STRIDED_SIZED(128)

/* RMA on the 16-bit floating-point types */
#define ROXC_NV_FP16 "no half or bfloat16 RMA: move the bits with the int16/uint16 forms"
#define ROXC_NV_RMA_NONE(NAME)                                                                            \
	ROXC_NO(void, nvshmem_##NAME##_p, ROXC_NV_FP16) ROXC_NO(void, nvshmem_##NAME##_g, ROXC_NV_FP16)       \
	ROXC_NO(void, nvshmem_##NAME##_put, ROXC_NV_FP16) ROXC_NO(void, nvshmem_##NAME##_get, ROXC_NV_FP16)   \
	ROXC_NO(void, nvshmem_##NAME##_put_nbi, ROXC_NV_FP16) ROXC_NO(void, nvshmem_##NAME##_get_nbi, ROXC_NV_FP16) \
	ROXC_NO(void, nvshmem_##NAME##_put_signal, ROXC_NV_FP16)                                          \
	ROXC_NO(void, nvshmem_##NAME##_put_signal_nbi, ROXC_NV_FP16)                                      \
	ROXC_NO(void, nvshmem_##NAME##_iput, ROXC_NV_FP16) ROXC_NO(void, nvshmem_##NAME##_iget, ROXC_NV_FP16) \
	ROXC_NO(void, nvshmemx_##NAME##_put_warp, ROXC_NV_FP16) ROXC_NO(void, nvshmemx_##NAME##_put_block, ROXC_NV_FP16) \
	ROXC_NO(void, nvshmemx_##NAME##_get_warp, ROXC_NV_FP16) ROXC_NO(void, nvshmemx_##NAME##_get_block, ROXC_NV_FP16) \
	ROXC_NO(void, nvshmemx_##NAME##_put_nbi_warp, ROXC_NV_FP16)                                       \
	ROXC_NO(void, nvshmemx_##NAME##_put_nbi_block, ROXC_NV_FP16)                                      \
	ROXC_NO(void, nvshmemx_##NAME##_get_nbi_warp, ROXC_NV_FP16)                                       \
	ROXC_NO(void, nvshmemx_##NAME##_get_nbi_block, ROXC_NV_FP16)                                      \
	ROXC_NO(void, nvshmemx_##NAME##_put_signal_warp, ROXC_NV_FP16)                                    \
	ROXC_NO(void, nvshmemx_##NAME##_put_signal_block, ROXC_NV_FP16)                                   \
	ROXC_NO(void, nvshmemx_##NAME##_put_signal_nbi_warp, ROXC_NV_FP16)                                \
	ROXC_NO(void, nvshmemx_##NAME##_put_signal_nbi_block, ROXC_NV_FP16)
ROXC_NV_RMA_NONE(half)
ROXC_NV_RMA_NONE(bfloat16)

/* waits and tests on several words */
#define ROXC_NV_MULTI "one wait_until/test per word (the device library waits on one word)"
#define ROXC_NV_P2P_MULTI(NAME, T)                                                                        \
	ROXC_NO(void, nvshmem_##NAME##_wait_until_all, ROXC_NV_MULTI)                                     \
	ROXC_NO(size_t, nvshmem_##NAME##_wait_until_any, ROXC_NV_MULTI)                                   \
	ROXC_NO(size_t, nvshmem_##NAME##_wait_until_some, ROXC_NV_MULTI)                                  \
	ROXC_NO(void, nvshmem_##NAME##_wait_until_all_vector, ROXC_NV_MULTI)                              \
	ROXC_NO(size_t, nvshmem_##NAME##_wait_until_any_vector, ROXC_NV_MULTI)                            \
	ROXC_NO(size_t, nvshmem_##NAME##_wait_until_some_vector, ROXC_NV_MULTI)                           \
	ROXC_NO(int, nvshmem_##NAME##_test_all, ROXC_NV_MULTI)                                            \
	ROXC_NO(size_t, nvshmem_##NAME##_test_any, ROXC_NV_MULTI)                                         \
	ROXC_NO(size_t, nvshmem_##NAME##_test_some, ROXC_NV_MULTI)                                        \
	ROXC_NO(int, nvshmem_##NAME##_test_all_vector, ROXC_NV_MULTI)                                     \
	ROXC_NO(size_t, nvshmem_##NAME##_test_any_vector, ROXC_NV_MULTI)                                  \
	ROXC_NO(size_t, nvshmem_##NAME##_test_some_vector, ROXC_NV_MULTI)
ROXI_P2P_TYPES(ROXC_NV_P2P_MULTI)

#endif /* ROXA_GPU_LANG */
#endif /* ROXAMEN_NVSHMEM_H */
