// The device library as LLVM bitcode for kernels written outside C++ (Triton's extern_libs,
// Numba's link): out-of-line entry points over roxamen/roxshmem.h with a flat ABI, built by
// go generate ./kernels into kernels/obj/roxshmem-<arch>.bc.gz (clang-19; gunzip before linking).
//
// ABI: every symmetric or local address is a 64-bit integer (Triton passes pointers in the global
// address space, clang's functions take generic pointers: an integer is the same bits in both),
// counts are bytes or elements as named, pe and team are 32-bit. The _block entry points are
// collective over the thread block (every thread calls them with the same arguments, as every
// thread of a Triton program runs a call on scalars); the others are one thread's call and must
// be guarded by the caller. Every entry point returns a value (0 for what returns nothing in
// roxshmem.h): Triton's extern calls have a result. The module that links this gets the symbol roxshmem_state, which the
// host fills after loading it (roxamen.init_module(kernel.module), roxamen_cumodule_init).
#include "roxamen/roxshmem.h"

#define BC extern "C" __device__ __attribute__((noinline))
#define P(a) ((void *)(uintptr_t)(a))

BC int32_t roxshmem_bc_my_pe(void) { return roxshmem_my_pe(); }
BC int32_t roxshmem_bc_n_pes(void) { return roxshmem_n_pes(); }
// pe's address of the symmetric object at addr when this GPU can load and store it, else 0
BC uint64_t roxshmem_bc_ptr(uint64_t addr, int32_t pe) { return (uint64_t)(uintptr_t)roxshmem_ptr(P(addr), pe); }

BC int32_t roxshmem_bc_putmem(uint64_t dest, uint64_t src, uint64_t nbytes, int32_t pe) { roxshmem_putmem(P(dest), P(src), nbytes, pe); return 0; }
BC int32_t roxshmem_bc_getmem(uint64_t dest, uint64_t src, uint64_t nbytes, int32_t pe) { roxshmem_getmem(P(dest), P(src), nbytes, pe); return 0; }
BC int32_t roxshmem_bc_putmem_block(uint64_t dest, uint64_t src, uint64_t nbytes, int32_t pe) { roxshmemx_putmem_block(P(dest), P(src), nbytes, pe); return 0; }
BC int32_t roxshmem_bc_getmem_block(uint64_t dest, uint64_t src, uint64_t nbytes, int32_t pe) { roxshmemx_getmem_block(P(dest), P(src), nbytes, pe); return 0; }

// put-with-signal: sig_op 0 sets the signal word, 1 adds to it (ROXSHMEM_SIGNAL_SET/ADD)
BC int32_t roxshmem_bc_putmem_signal(uint64_t dest, uint64_t src, uint64_t nbytes, uint64_t sig, uint64_t value, int32_t sig_op, int32_t pe)
{
	roxshmem_putmem_signal(P(dest), P(src), nbytes, (uint64_t *)P(sig), value, sig_op, pe);
	return 0;
}
BC int32_t roxshmem_bc_putmem_signal_block(uint64_t dest, uint64_t src, uint64_t nbytes, uint64_t sig, uint64_t value, int32_t sig_op, int32_t pe)
{
	roxshmemx_putmem_signal_block(P(dest), P(src), nbytes, (uint64_t *)P(sig), value, sig_op, pe);
	return 0;
}
// cmp: ROXSHMEM_CMP_EQ 0, NE 1, GT 2, LE 3, LT 4, GE 5; returns the signal's value
BC uint64_t roxshmem_bc_signal_wait_until(uint64_t sig, int32_t cmp, uint64_t value) { return roxshmem_signal_wait_until((uint64_t *)P(sig), cmp, value); }
BC uint64_t roxshmem_bc_signal_fetch(uint64_t sig) { return roxshmem_signal_fetch((const uint64_t *)P(sig)); }

BC int64_t roxshmem_bc_int64_atomic_fetch_add(uint64_t dest, int64_t value, int32_t pe) { return roxshmem_int64_atomic_fetch_add((int64_t *)P(dest), value, pe); }

BC int32_t roxshmem_bc_fence(void) { roxshmem_fence(); return 0; }
BC int32_t roxshmem_bc_quiet(void) { roxshmem_quiet(); return 0; }
BC int32_t roxshmem_bc_barrier_all_block(void) { roxshmemx_barrier_all_block(); return 0; }
BC int32_t roxshmem_bc_team_sync_block(int32_t team) { return roxshmemx_team_sync_block(team); }
// the team forms (team 0: every PE) also serve callers that cannot make a call without arguments
BC int32_t roxshmem_bc_team_my_pe(int32_t team) { return roxshmem_team_my_pe(team); }
BC int32_t roxshmem_bc_team_n_pes(int32_t team) { return roxshmem_team_n_pes(team); }
BC int32_t roxshmem_bc_barrier_block(int32_t team) { return roxshmemx_barrier_block(team); }

// block all-reduce over team (0: every PE) of nelems elements, dest and src symmetric
BC int32_t roxshmem_bc_float_sum_reduce_block(int32_t team, uint64_t dest, uint64_t src, uint64_t nelems)
{
	return roxshmemx_float_sum_reduce_block(team, (float *)P(dest), (const float *)P(src), nelems);
}
BC int32_t roxshmem_bc_float_max_reduce_block(int32_t team, uint64_t dest, uint64_t src, uint64_t nelems)
{
	return roxshmemx_float_max_reduce_block(team, (float *)P(dest), (const float *)P(src), nelems);
}
BC int32_t roxshmem_bc_int32_sum_reduce_block(int32_t team, uint64_t dest, uint64_t src, uint64_t nelems)
{
	return roxshmemx_int32_sum_reduce_block(team, (int32_t *)P(dest), (const int32_t *)P(src), nelems);
}
