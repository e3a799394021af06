/* The arch layer: every ordered, scoped or cache-controlled access the device library makes.
 * amdgcn: clang's __scoped_atomic_* builtins and __builtin_amdgcn_fence, whose lowering is the
 *   AMDGPUUsage memory-model table for the target (gfx90a: "Memory Model GFX90A"; gfx942:
 *   "Memory Model GFX942"), plus cache-policy bits on bulk stores.
 * nvptx: inline PTX for every ordered or scoped access (PTX ISA "Memory Consistency Model":
 *   ld.acquire/st.release/atom with .sys scope, fence.sc/fence.acq_rel). clang 19's NVPTX backend
 *   rejects acquire/release atomics and drops .sys from atomic RMW, so no C++ atomics are used.
 * kernels/MAPPING.md lists what each call becomes; TestMapping checks the compiled probes. */
#ifndef ROXAMEN_ARCH_H
#define ROXAMEN_ARCH_H

#include "types.h"
#include "ops.h"

#ifdef ROXA_GPU_LANG

typedef struct __attribute__((aligned(16))) roxa_u128 {
	uint64_t x, y;
} roxa_u128;

/* How a bulk copy touches memory. */
#define ROXA_MEM_PLAIN 0    /* ordinary cached accesses */
#define ROXA_MEM_BYPASS 1   /* stores: cache-bypass bits; loads: system-coherent */

/* ---- thread geometry ---------------------------------------------------------------------- */
#if defined(ROXA_AMDGCN)
ROXA_FN uint32_t roxa_tid(void)
{
	return __builtin_amdgcn_workitem_id_x() +
	       __builtin_amdgcn_workgroup_size_x() *
		       (__builtin_amdgcn_workitem_id_y() +
			__builtin_amdgcn_workgroup_size_y() * __builtin_amdgcn_workitem_id_z());
}
ROXA_FN uint32_t roxa_nthreads(void)
{
	return (uint32_t)__builtin_amdgcn_workgroup_size_x() * __builtin_amdgcn_workgroup_size_y() *
	       __builtin_amdgcn_workgroup_size_z();
}
ROXA_FN uint32_t roxa_block(void)
{
	return __builtin_amdgcn_workgroup_id_x() +
	       __builtin_amdgcn_grid_size_x() / __builtin_amdgcn_workgroup_size_x() *
		       (__builtin_amdgcn_workgroup_id_y() +
			__builtin_amdgcn_grid_size_y() / __builtin_amdgcn_workgroup_size_y() *
				__builtin_amdgcn_workgroup_id_z());
}
ROXA_FN uint32_t roxa_nblocks(void)
{
	return (__builtin_amdgcn_grid_size_x() / __builtin_amdgcn_workgroup_size_x()) *
	       (__builtin_amdgcn_grid_size_y() / __builtin_amdgcn_workgroup_size_y()) *
	       (__builtin_amdgcn_grid_size_z() / __builtin_amdgcn_workgroup_size_z());
}
ROXA_FN uint32_t roxa_warpsize(void) { return __builtin_amdgcn_wavefrontsize(); }
ROXA_FN void roxa_sync_block(void)
{
	__builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup");
	__builtin_amdgcn_s_barrier();
	__builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");
}
ROXA_FN void roxa_sync_warp(void)
{
	__builtin_amdgcn_fence(__ATOMIC_RELEASE, "wavefront");
	__builtin_amdgcn_wave_barrier();
	__builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "wavefront");
}
ROXA_FN void roxa_pause(void) { __builtin_amdgcn_s_sleep(2); }
ROXA_FN uint64_t roxa_clock_ns(void)
{
	/* s_memrealtime counts at 100 MHz on gfx90a/gfx942 (AMDGPUUsage, "s_memrealtime") */
	return __builtin_amdgcn_s_memrealtime() * 10;
}
#elif defined(ROXA_NVPTX)
ROXA_FN uint32_t roxa_sreg(int which)
{
	uint32_t v = 0;
	switch (which) {
	case 0: asm("mov.u32 %0, %%tid.x;" : "=r"(v)); break;
	case 1: asm("mov.u32 %0, %%tid.y;" : "=r"(v)); break;
	case 2: asm("mov.u32 %0, %%tid.z;" : "=r"(v)); break;
	case 3: asm("mov.u32 %0, %%ntid.x;" : "=r"(v)); break;
	case 4: asm("mov.u32 %0, %%ntid.y;" : "=r"(v)); break;
	case 5: asm("mov.u32 %0, %%ntid.z;" : "=r"(v)); break;
	case 6: asm("mov.u32 %0, %%ctaid.x;" : "=r"(v)); break;
	case 7: asm("mov.u32 %0, %%ctaid.y;" : "=r"(v)); break;
	case 8: asm("mov.u32 %0, %%ctaid.z;" : "=r"(v)); break;
	case 9: asm("mov.u32 %0, %%nctaid.x;" : "=r"(v)); break;
	case 10: asm("mov.u32 %0, %%nctaid.y;" : "=r"(v)); break;
	default: asm("mov.u32 %0, %%nctaid.z;" : "=r"(v)); break;
	}
	return v;
}
ROXA_FN uint32_t roxa_tid(void) { return roxa_sreg(0) + roxa_sreg(3) * (roxa_sreg(1) + roxa_sreg(4) * roxa_sreg(2)); }
ROXA_FN uint32_t roxa_nthreads(void) { return roxa_sreg(3) * roxa_sreg(4) * roxa_sreg(5); }
ROXA_FN uint32_t roxa_block(void) { return roxa_sreg(6) + roxa_sreg(9) * (roxa_sreg(7) + roxa_sreg(10) * roxa_sreg(8)); }
ROXA_FN uint32_t roxa_nblocks(void) { return roxa_sreg(9) * roxa_sreg(10) * roxa_sreg(11); }
ROXA_FN uint32_t roxa_warpsize(void) { return 32; }
ROXA_FN void roxa_sync_block(void) { asm volatile("bar.sync 0;" ::: "memory"); }
ROXA_FN void roxa_sync_warp(void) { asm volatile("bar.warp.sync -1;" ::: "memory"); }
ROXA_FN void roxa_pause(void) { asm volatile("nanosleep.u32 64;" ::: "memory"); }
ROXA_FN uint64_t roxa_clock_ns(void)
{
	uint64_t t;
	asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
	return t;
}
#elif defined(ROXA_HOST_GROUP)
/* A CPU harness that runs a group of threads per PE (testdata/coll_pe.cc: the team collectives'
 * test) defines ROXA_HOST_GROUP and these: the calling thread's index and the group's size (a
 * power of two; the group is both the "warp" and the "block"), a barrier of the group, a yield. */
uint32_t roxa_host_tid(void);
uint32_t roxa_host_nthreads(void);
void roxa_host_sync(void);
void roxa_host_yield(void);
ROXA_FN uint32_t roxa_tid(void) { return roxa_host_tid(); }
ROXA_FN uint32_t roxa_nthreads(void) { return roxa_host_nthreads(); }
ROXA_FN uint32_t roxa_block(void) { return 0; }
ROXA_FN uint32_t roxa_nblocks(void) { return 1; }
ROXA_FN uint32_t roxa_warpsize(void) { return roxa_host_nthreads(); }
ROXA_FN void roxa_sync_block(void) { roxa_host_sync(); }
ROXA_FN void roxa_sync_warp(void) { roxa_host_sync(); }
ROXA_FN void roxa_pause(void) { roxa_host_yield(); }
ROXA_FN uint64_t roxa_clock_ns(void) { return 0; }
#else /* host pass: parsed, and run by the single-threaded CPU harnesses */
ROXA_FN uint32_t roxa_tid(void) { return 0; }
ROXA_FN uint32_t roxa_nthreads(void) { return 1; }
ROXA_FN uint32_t roxa_block(void) { return 0; }
ROXA_FN uint32_t roxa_nblocks(void) { return 1; }
ROXA_FN uint32_t roxa_warpsize(void) { return 32; }
ROXA_FN void roxa_sync_block(void) {}
ROXA_FN void roxa_sync_warp(void) {}
ROXA_FN void roxa_pause(void) {}
ROXA_FN uint64_t roxa_clock_ns(void) { return 0; }
#endif

/* a bit-for-bit copy of a small value (no <string.h> on every toolchain's device side) */
ROXA_FN void roxa_bytecopy(void *d, const void *s, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		((char *)d)[i] = ((const char *)s)[i];
}

ROXA_FN uint32_t roxa_lane(void) { return roxa_tid() & (roxa_warpsize() - 1); }

/* ---- scoped single-word accesses (system scope unless named otherwise) ---------------------- */
#if defined(ROXA_AMDGCN)
#define ROXA_SYS __MEMORY_SCOPE_SYSTEM
ROXA_FN uint64_t roxa_ld_acquire_u64(const uint64_t *p) { return __scoped_atomic_load_n(p, __ATOMIC_ACQUIRE, ROXA_SYS); }
ROXA_FN uint64_t roxa_ld_relaxed_u64(const uint64_t *p) { return __scoped_atomic_load_n(p, __ATOMIC_RELAXED, ROXA_SYS); }
ROXA_FN uint32_t roxa_ld_relaxed_u32(const uint32_t *p) { return __scoped_atomic_load_n(p, __ATOMIC_RELAXED, ROXA_SYS); }
ROXA_FN uint16_t roxa_ld_relaxed_u16(const uint16_t *p) { return __scoped_atomic_load_n(p, __ATOMIC_RELAXED, ROXA_SYS); }
ROXA_FN uint8_t roxa_ld_relaxed_u8(const uint8_t *p) { return __scoped_atomic_load_n(p, __ATOMIC_RELAXED, ROXA_SYS); }
ROXA_FN void roxa_st_release_u64(uint64_t *p, uint64_t v) { __scoped_atomic_store_n(p, v, __ATOMIC_RELEASE, ROXA_SYS); }
ROXA_FN void roxa_st_relaxed_u64(uint64_t *p, uint64_t v) { __scoped_atomic_store_n(p, v, __ATOMIC_RELAXED, ROXA_SYS); }
ROXA_FN void roxa_st_relaxed_u32(uint32_t *p, uint32_t v) { __scoped_atomic_store_n(p, v, __ATOMIC_RELAXED, ROXA_SYS); }
ROXA_FN void roxa_st_relaxed_u16(uint16_t *p, uint16_t v) { __scoped_atomic_store_n(p, v, __ATOMIC_RELAXED, ROXA_SYS); }
ROXA_FN void roxa_st_relaxed_u8(uint8_t *p, uint8_t v) { __scoped_atomic_store_n(p, v, __ATOMIC_RELAXED, ROXA_SYS); }
ROXA_FN uint64_t roxa_add_release_u64(uint64_t *p, uint64_t v) { return __scoped_atomic_fetch_add(p, v, __ATOMIC_RELEASE, ROXA_SYS); }
/* agent (one GPU) scope: words only this GPU's threads touch */
ROXA_FN uint64_t roxa_add_agent_u64(uint64_t *p, uint64_t v) { return __scoped_atomic_fetch_add(p, v, __ATOMIC_ACQ_REL, __MEMORY_SCOPE_DEVICE); }
ROXA_FN uint64_t roxa_ld_acquire_agent_u64(const uint64_t *p) { return __scoped_atomic_load_n(p, __ATOMIC_ACQUIRE, __MEMORY_SCOPE_DEVICE); }
ROXA_FN void roxa_st_release_agent_u64(uint64_t *p, uint64_t v) { __scoped_atomic_store_n(p, v, __ATOMIC_RELEASE, __MEMORY_SCOPE_DEVICE); }

/* ORD: __ATOMIC_RELAXED, or __ATOMIC_ACQUIRE for a fetching AMO that orders later accesses */
#define ROXA_AMO_BODY(T, ORD)                                                                      \
	T old = 0;                                                                                 \
	switch (kind) {                                                                            \
	case ROXSHMEM_AMO_FETCH: old = __scoped_atomic_load_n(p, ORD, ROXA_SYS); break;            \
	case ROXSHMEM_AMO_SET: __scoped_atomic_store_n(p, v, __ATOMIC_RELAXED, ROXA_SYS); break;     \
	case ROXSHMEM_AMO_SWAP: old = __scoped_atomic_exchange_n(p, v, ORD, ROXA_SYS); break;       \
	case ROXSHMEM_AMO_COMPARE_SWAP:                                                            \
		old = cmp;                                                                         \
		__scoped_atomic_compare_exchange_n(p, &old, v, 0, ORD, ORD, ROXA_SYS);             \
		break;                                                                             \
	case ROXSHMEM_AMO_FETCH_ADD: old = __scoped_atomic_fetch_add(p, v, ORD, ROXA_SYS); break;   \
	case ROXSHMEM_AMO_FETCH_AND: old = __scoped_atomic_fetch_and(p, v, ORD, ROXA_SYS); break;   \
	case ROXSHMEM_AMO_FETCH_OR: old = __scoped_atomic_fetch_or(p, v, ORD, ROXA_SYS); break;     \
	default: old = __scoped_atomic_fetch_xor(p, v, ORD, ROXA_SYS); break;                      \
	}                                                                                          \
	return old;
ROXA_FN uint64_t roxa_amo_u64(uint32_t kind, uint64_t *p, uint64_t v, uint64_t cmp) { ROXA_AMO_BODY(uint64_t, __ATOMIC_RELAXED) }
ROXA_FN uint32_t roxa_amo_u32(uint32_t kind, uint32_t *p, uint32_t v, uint32_t cmp) { ROXA_AMO_BODY(uint32_t, __ATOMIC_RELAXED) }
ROXA_FN uint64_t roxa_amo_acq_u64(uint32_t kind, uint64_t *p, uint64_t v, uint64_t cmp) { ROXA_AMO_BODY(uint64_t, __ATOMIC_ACQUIRE) }
ROXA_FN uint32_t roxa_amo_acq_u32(uint32_t kind, uint32_t *p, uint32_t v, uint32_t cmp) { ROXA_AMO_BODY(uint32_t, __ATOMIC_ACQUIRE) }

/* Strict fence: release and acquire at system scope. LLVM's AMDGPUUsage, "Memory Model GFX942",
 * table "AMDHSA Memory Model Code Sequences GFX942", fence acq_rel/seq_cst at system scope:
 * buffer_wbl2 sc0=1 sc1=1, then s_waitcnt vmcnt(0) & lgkmcnt(0) (after the write-back, before the
 * invalidate: the invalidate must not run before the write-back has completed), then
 * buffer_inv sc0=1 sc1=1; gfx90a ("Memory Model GFX90A") the same with buffer_wbl2, s_waitcnt,
 * buffer_invl2 + buffer_wbinvl1_vol. clang 19 emits __builtin_amdgcn_fence(__ATOMIC_SEQ_CST, "")
 * as the write-back and the invalidate back to back (its wait pass does not count buffer_wbl2 as
 * outstanding), so the fence is written as release, an explicit wait the pass cannot drop, acquire.
 * TestMapping checks the sequence. */
ROXA_FN void roxa_fence_sc(void)
{
	__builtin_amdgcn_fence(__ATOMIC_RELEASE, "");
	asm volatile("s_waitcnt vmcnt(0) lgkmcnt(0)" ::: "memory");
	__builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "");
}
/* System-scope release: write back L2 (buffer_wbl2 [sc0 sc1]) and wait for it and for the
 * stores before it (the same AMDGPUUsage tables, fence release at system scope: buffer_wbl2, then
 * s_waitcnt vmcnt(0) & lgkmcnt(0)); the explicit wait keeps a later store from overtaking the
 * write-back, as for roxa_fence_sc. */
ROXA_FN void roxa_fence_release(void)
{
	__builtin_amdgcn_fence(__ATOMIC_RELEASE, "");
	asm volatile("s_waitcnt vmcnt(0) lgkmcnt(0)" ::: "memory");
}
/* System-scope acquire: invalidate L1 and L2 (buffer_inv sc0 sc1 / buffer_invl2 + wbinvl1_vol). */
ROXA_FN void roxa_fence_acquire(void) { __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, ""); }
/* Bypass acquire: the heap is uncached in L2 in CacheBypass mode (the runtime allocates it so), so
 * only the per-CU vector cache is invalidated: agent scope (buffer_inv sc1 / buffer_wbinvl1_vol). */
ROXA_FN void roxa_fence_acquire_bypass(void) { __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "agent"); }
/* Bypass fence: the stores to order all carried cache-bypass bits, so waiting until they are
 * acknowledged orders them; no cache write-back or invalidate. */
ROXA_FN void roxa_drain(void) { asm volatile("s_waitcnt vmcnt(0)" ::: "memory"); }

/* bulk accesses */
typedef uint64_t roxa_v2u64 __attribute__((ext_vector_type(2)));
ROXA_FN void roxa_st16(void *dst, const roxa_u128 *v, int mode)
{
	if (mode == ROXA_MEM_BYPASS) {
#if defined(__gfx940__) || defined(__gfx941__) || defined(__gfx942__)
		/* gfx942: system-scope stores carry sc0 sc1 (write through to memory) */
		__scoped_atomic_store_n((uint64_t *)dst, v->x, __ATOMIC_RELAXED, ROXA_SYS);
		__scoped_atomic_store_n((uint64_t *)dst + 1, v->y, __ATOMIC_RELAXED, ROXA_SYS);
#else
		/* gfx90a: nontemporal stores carry glc slc (streaming, bypass L2 retention) */
		roxa_v2u64 w = {v->x, v->y};
		__builtin_nontemporal_store(w, (roxa_v2u64 *)dst);
#endif
	} else {
		*(roxa_u128 *)dst = *v;
	}
}
ROXA_FN roxa_u128 roxa_ld16(const void *src, int mode)
{
	roxa_u128 r;
	if (mode == ROXA_MEM_BYPASS) {
		r.x = __scoped_atomic_load_n((const uint64_t *)src, __ATOMIC_RELAXED, ROXA_SYS);
		r.y = __scoped_atomic_load_n((const uint64_t *)src + 1, __ATOMIC_RELAXED, ROXA_SYS);
	} else {
		r = *(const roxa_u128 *)src;
	}
	return r;
}
#elif defined(ROXA_NVPTX)
ROXA_FN uint64_t roxa_ld_acquire_u64(const uint64_t *p)
{
	uint64_t v;
	asm volatile("ld.acquire.sys.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
	return v;
}
ROXA_FN uint64_t roxa_ld_relaxed_u64(const uint64_t *p)
{
	uint64_t v;
	asm volatile("ld.relaxed.sys.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
	return v;
}
ROXA_FN uint32_t roxa_ld_relaxed_u32(const uint32_t *p)
{
	uint32_t v;
	asm volatile("ld.relaxed.sys.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
	return v;
}
ROXA_FN uint16_t roxa_ld_relaxed_u16(const uint16_t *p)
{
	uint32_t v;
	asm volatile("ld.relaxed.sys.u16 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
	return (uint16_t)v;
}
ROXA_FN uint8_t roxa_ld_relaxed_u8(const uint8_t *p)
{
	uint32_t v;
	asm volatile("ld.relaxed.sys.u8 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
	return (uint8_t)v;
}
ROXA_FN void roxa_st_release_u64(uint64_t *p, uint64_t v) { asm volatile("st.release.sys.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory"); }
ROXA_FN void roxa_st_relaxed_u64(uint64_t *p, uint64_t v) { asm volatile("st.relaxed.sys.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory"); }
ROXA_FN void roxa_st_relaxed_u32(uint32_t *p, uint32_t v) { asm volatile("st.relaxed.sys.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory"); }
ROXA_FN void roxa_st_relaxed_u16(uint16_t *p, uint16_t v) { asm volatile("st.relaxed.sys.u16 [%0], %1;" ::"l"(p), "r"((uint32_t)v) : "memory"); }
ROXA_FN void roxa_st_relaxed_u8(uint8_t *p, uint8_t v) { asm volatile("st.relaxed.sys.u8 [%0], %1;" ::"l"(p), "r"((uint32_t)v) : "memory"); }
ROXA_FN uint64_t roxa_add_release_u64(uint64_t *p, uint64_t v)
{
	uint64_t old;
	asm volatile("atom.release.sys.add.u64 %0, [%1], %2;" : "=l"(old) : "l"(p), "l"(v) : "memory");
	return old;
}
ROXA_FN uint64_t roxa_add_agent_u64(uint64_t *p, uint64_t v)
{
	uint64_t old;
	asm volatile("atom.acq_rel.gpu.add.u64 %0, [%1], %2;" : "=l"(old) : "l"(p), "l"(v) : "memory");
	return old;
}
ROXA_FN uint64_t roxa_ld_acquire_agent_u64(const uint64_t *p)
{
	uint64_t v;
	asm volatile("ld.acquire.gpu.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
	return v;
}
ROXA_FN void roxa_st_release_agent_u64(uint64_t *p, uint64_t v) { asm volatile("st.release.gpu.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory"); }

/* SEM: relaxed, or acquire for a fetching AMO that orders later accesses (an acquire pattern on
 * the atom itself, cheaper than a separate fence) */
#define ROXA_PTX_AMO(W, R, T, SEM)                                                                 \
	T old = 0;                                                                                 \
	switch (kind) {                                                                            \
	case ROXSHMEM_AMO_FETCH: asm volatile("ld." SEM ".sys.b" #W " %0, [%1];" : "=" R(old) : "l"(p) : "memory"); break; \
	case ROXSHMEM_AMO_SET: asm volatile("st.relaxed.sys.b" #W " [%0], %1;" ::"l"(p), R(v) : "memory"); break; \
	case ROXSHMEM_AMO_SWAP: asm volatile("atom." SEM ".sys.exch.b" #W " %0, [%1], %2;" : "=" R(old) : "l"(p), R(v) : "memory"); break; \
	case ROXSHMEM_AMO_COMPARE_SWAP: asm volatile("atom." SEM ".sys.cas.b" #W " %0, [%1], %2, %3;" : "=" R(old) : "l"(p), R(cmp), R(v) : "memory"); break; \
	case ROXSHMEM_AMO_FETCH_ADD: asm volatile("atom." SEM ".sys.add.u" #W " %0, [%1], %2;" : "=" R(old) : "l"(p), R(v) : "memory"); break; \
	case ROXSHMEM_AMO_FETCH_AND: asm volatile("atom." SEM ".sys.and.b" #W " %0, [%1], %2;" : "=" R(old) : "l"(p), R(v) : "memory"); break; \
	case ROXSHMEM_AMO_FETCH_OR: asm volatile("atom." SEM ".sys.or.b" #W " %0, [%1], %2;" : "=" R(old) : "l"(p), R(v) : "memory"); break; \
	default: asm volatile("atom." SEM ".sys.xor.b" #W " %0, [%1], %2;" : "=" R(old) : "l"(p), R(v) : "memory"); break; \
	}                                                                                          \
	return old;
ROXA_FN uint64_t roxa_amo_u64(uint32_t kind, uint64_t *p, uint64_t v, uint64_t cmp) { ROXA_PTX_AMO(64, "l", uint64_t, "relaxed") }
ROXA_FN uint32_t roxa_amo_u32(uint32_t kind, uint32_t *p, uint32_t v, uint32_t cmp) { ROXA_PTX_AMO(32, "r", uint32_t, "relaxed") }
ROXA_FN uint64_t roxa_amo_acq_u64(uint32_t kind, uint64_t *p, uint64_t v, uint64_t cmp) { ROXA_PTX_AMO(64, "l", uint64_t, "acquire") }
ROXA_FN uint32_t roxa_amo_acq_u32(uint32_t kind, uint32_t *p, uint32_t v, uint32_t cmp) { ROXA_PTX_AMO(32, "r", uint32_t, "acquire") }

ROXA_FN void roxa_fence_sc(void) { asm volatile("fence.sc.sys;" ::: "memory"); }
ROXA_FN void roxa_fence_release(void) { asm volatile("fence.acq_rel.sys;" ::: "memory"); }
ROXA_FN void roxa_fence_acquire(void) { asm volatile("fence.acq_rel.sys;" ::: "memory"); }
/* NVLink stores land in the target GPU's L2, the point of coherence for its memory: there is no
 * invalidation to skip, so the bypass acquire is the same system-scope acquire fence. */
ROXA_FN void roxa_fence_acquire_bypass(void) { asm volatile("fence.acq_rel.sys;" ::: "memory"); }
ROXA_FN void roxa_drain(void) { asm volatile("fence.acq_rel.sys;" ::: "memory"); }

ROXA_FN void roxa_st16(void *dst, const roxa_u128 *v, int mode)
{
	if (mode == ROXA_MEM_BYPASS)
		asm volatile("st.global.cg.v2.u64 [%0], {%1, %2};" ::"l"(dst), "l"(v->x), "l"(v->y) : "memory");
	else
		*(roxa_u128 *)dst = *v;
}
ROXA_FN roxa_u128 roxa_ld16(const void *src, int mode)
{
	roxa_u128 r;
	if (mode == ROXA_MEM_BYPASS)
		asm volatile("ld.global.cg.v2.u64 {%0, %1}, [%2];" : "=l"(r.x), "=l"(r.y) : "l"(src) : "memory");
	else
		r = *(const roxa_u128 *)src;
	return r;
}
#else /* host pass */
/* The CPU runs the library's logic in the tests (TestHostLibrary, and the SDMA producer that the
 * Go engine emulator consumes from other threads): real atomics, so that several CPU threads may
 * share the words as GPU threads do. */
ROXA_FN uint64_t roxa_ld_acquire_u64(const uint64_t *p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
ROXA_FN uint64_t roxa_ld_relaxed_u64(const uint64_t *p) { return __atomic_load_n(p, __ATOMIC_RELAXED); }
ROXA_FN uint32_t roxa_ld_relaxed_u32(const uint32_t *p) { return __atomic_load_n(p, __ATOMIC_RELAXED); }
ROXA_FN uint16_t roxa_ld_relaxed_u16(const uint16_t *p) { return __atomic_load_n(p, __ATOMIC_RELAXED); }
ROXA_FN uint8_t roxa_ld_relaxed_u8(const uint8_t *p) { return __atomic_load_n(p, __ATOMIC_RELAXED); }
ROXA_FN void roxa_st_release_u64(uint64_t *p, uint64_t v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }
ROXA_FN void roxa_st_relaxed_u64(uint64_t *p, uint64_t v) { __atomic_store_n(p, v, __ATOMIC_RELAXED); }
ROXA_FN void roxa_st_relaxed_u32(uint32_t *p, uint32_t v) { __atomic_store_n(p, v, __ATOMIC_RELAXED); }
ROXA_FN void roxa_st_relaxed_u16(uint16_t *p, uint16_t v) { __atomic_store_n(p, v, __ATOMIC_RELAXED); }
ROXA_FN void roxa_st_relaxed_u8(uint8_t *p, uint8_t v) { __atomic_store_n(p, v, __ATOMIC_RELAXED); }
ROXA_FN uint64_t roxa_add_release_u64(uint64_t *p, uint64_t v) { return __atomic_fetch_add(p, v, __ATOMIC_RELEASE); }
ROXA_FN uint64_t roxa_add_agent_u64(uint64_t *p, uint64_t v) { return __atomic_fetch_add(p, v, __ATOMIC_ACQ_REL); }
ROXA_FN uint64_t roxa_ld_acquire_agent_u64(const uint64_t *p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
ROXA_FN void roxa_st_release_agent_u64(uint64_t *p, uint64_t v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }
#define ROXA_HOST_AMO                                                                              \
	old = 0;                                                                                   \
	switch (kind) {                                                                            \
	case ROXSHMEM_AMO_FETCH: old = __atomic_load_n(p, __ATOMIC_SEQ_CST); break;                \
	case ROXSHMEM_AMO_SET: __atomic_store_n(p, v, __ATOMIC_SEQ_CST); break;                    \
	case ROXSHMEM_AMO_SWAP: old = __atomic_exchange_n(p, v, __ATOMIC_SEQ_CST); break;          \
	case ROXSHMEM_AMO_COMPARE_SWAP:                                                            \
		old = cmp;                                                                         \
		__atomic_compare_exchange_n(p, &old, v, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);    \
		break;                                                                             \
	case ROXSHMEM_AMO_FETCH_ADD: old = __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); break;      \
	case ROXSHMEM_AMO_FETCH_AND: old = __atomic_fetch_and(p, v, __ATOMIC_SEQ_CST); break;      \
	case ROXSHMEM_AMO_FETCH_OR: old = __atomic_fetch_or(p, v, __ATOMIC_SEQ_CST); break;        \
	default: old = __atomic_fetch_xor(p, v, __ATOMIC_SEQ_CST); break;                          \
	}                                                                                          \
	return old;
ROXA_FN uint64_t roxa_amo_u64(uint32_t kind, uint64_t *p, uint64_t v, uint64_t cmp) { uint64_t ROXA_HOST_AMO }
ROXA_FN uint32_t roxa_amo_u32(uint32_t kind, uint32_t *p, uint32_t v, uint32_t cmp) { uint32_t ROXA_HOST_AMO }
ROXA_FN uint64_t roxa_amo_acq_u64(uint32_t kind, uint64_t *p, uint64_t v, uint64_t cmp) { uint64_t ROXA_HOST_AMO }
ROXA_FN uint32_t roxa_amo_acq_u32(uint32_t kind, uint32_t *p, uint32_t v, uint32_t cmp) { uint32_t ROXA_HOST_AMO }
ROXA_FN void roxa_fence_sc(void) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
ROXA_FN void roxa_fence_release(void) { __atomic_thread_fence(__ATOMIC_RELEASE); }
ROXA_FN void roxa_fence_acquire(void) { __atomic_thread_fence(__ATOMIC_ACQUIRE); }
ROXA_FN void roxa_fence_acquire_bypass(void) { __atomic_thread_fence(__ATOMIC_ACQUIRE); }
ROXA_FN void roxa_drain(void) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
ROXA_FN void roxa_st16(void *dst, const roxa_u128 *v, int mode) { (void)mode; *(roxa_u128 *)dst = *v; }
ROXA_FN roxa_u128 roxa_ld16(const void *src, int mode) { (void)mode; return *(const roxa_u128 *)src; }
#endif

/* Copy bytes [lo, hi) one at a time; this thread takes lo+idx, lo+idx+stride, ... */
ROXA_FN void roxa_copy_bytes(uint8_t *d, const uint8_t *s, uint64_t lo, uint64_t hi, uint32_t idx,
			     uint32_t stride, int ld_mode, int st_mode)
{
	for (uint64_t i = lo + idx; i < hi; i += stride) {
		uint8_t v = ld_mode == ROXA_MEM_BYPASS ? roxa_ld_relaxed_u8(s + i) : s[i];
		if (st_mode == ROXA_MEM_BYPASS)
			roxa_st_relaxed_u8(d + i, v);
		else
			d[i] = v;
	}
}

/* Copy n bytes; this thread takes elements idx, idx+stride, ... A mode applies to the side that is
 * remote (ld_mode for a get's source, st_mode for a put's destination). When dst and src are
 * equally misaligned, a byte head brings them to the widest common alignment (16, 8 or 4 bytes)
 * for the body; otherwise the copy goes byte by byte. */
ROXI_COLD void roxa_copy(void *dst, const void *src, uint64_t n, uint32_t idx, uint32_t stride,
			 int ld_mode, int st_mode)
{
	uint8_t *d = (uint8_t *)dst;
	const uint8_t *s = (const uint8_t *)src;
	uintptr_t rel = (uintptr_t)d ^ (uintptr_t)s;
	uint64_t w = (rel & 15) == 0 ? 16 : (rel & 7) == 0 ? 8 : (rel & 3) == 0 ? 4 : 1;
	uint64_t head = w == 1 ? n : ((w - ((uintptr_t)d & (w - 1))) & (w - 1));
	if (head > n)
		head = n;
	roxa_copy_bytes(d, s, 0, head, idx, stride, ld_mode, st_mode);
	d += head;
	s += head;
	n -= head;
	uint64_t done = 0;
	if (w == 16) {
		uint64_t n16 = n >> 4;
		uint64_t i = idx;
		/* four independent 16-byte loads in flight per thread before their stores */
		for (; i + 3ull * stride < n16; i += 4ull * stride) {
			roxa_u128 a = roxa_ld16(s + 16 * i, ld_mode);
			roxa_u128 b = roxa_ld16(s + 16 * (i + stride), ld_mode);
			roxa_u128 c = roxa_ld16(s + 16 * (i + 2ull * stride), ld_mode);
			roxa_u128 e = roxa_ld16(s + 16 * (i + 3ull * stride), ld_mode);
			roxa_st16(d + 16 * i, &a, st_mode);
			roxa_st16(d + 16 * (i + stride), &b, st_mode);
			roxa_st16(d + 16 * (i + 2ull * stride), &c, st_mode);
			roxa_st16(d + 16 * (i + 3ull * stride), &e, st_mode);
		}
		for (; i < n16; i += stride) {
			roxa_u128 a = roxa_ld16(s + 16 * i, ld_mode);
			roxa_st16(d + 16 * i, &a, st_mode);
		}
		done = n16 << 4;
	} else if (w == 8) {
		uint64_t n8 = n >> 3;
		for (uint64_t i = idx; i < n8; i += stride) {
			uint64_t v = ld_mode == ROXA_MEM_BYPASS ? roxa_ld_relaxed_u64((const uint64_t *)s + i)
							       : ((const uint64_t *)s)[i];
			if (st_mode == ROXA_MEM_BYPASS)
				roxa_st_relaxed_u64((uint64_t *)d + i, v);
			else
				((uint64_t *)d)[i] = v;
		}
		done = n8 << 3;
	} else if (w == 4) {
		uint64_t n4 = n >> 2;
		for (uint64_t i = idx; i < n4; i += stride) {
			uint32_t v = ld_mode == ROXA_MEM_BYPASS ? roxa_ld_relaxed_u32((const uint32_t *)s + i)
							       : ((const uint32_t *)s)[i];
			if (st_mode == ROXA_MEM_BYPASS)
				roxa_st_relaxed_u32((uint32_t *)d + i, v);
			else
				((uint32_t *)d)[i] = v;
		}
		done = n4 << 2;
	}
	roxa_copy_bytes(d, s, done, n, idx, stride, ld_mode, st_mode);
}

#endif /* ROXA_GPU_LANG */
#endif /* ROXAMEN_ARCH_H */
