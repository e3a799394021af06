// The runtime's stream-ordered team collectives (shmem's AllReduceOnStream and the others): built
// by `go generate ./kernels` into kernels/obj/coll-<arch> beside the runtime kernels, and loaded by
// shmem on a PE's first stream-ordered collective (a separate object, so that Init does not load
// or JIT-compile the ~130 reduction kernels every program would otherwise carry). Its
// roxshmem_state is filled like every module's: the team table is the PE's one.
#include "roxamen/roxshmem.h"

#define KERNEL extern "C" __global__
// kernels launched with at most 256 threads per block (lets the amdgcn backend budget registers)
#if defined(__AMDGCN__)
#define SMALL_BLOCK __attribute__((amdgpu_flat_work_group_size(1, 256)))
#else
#define SMALL_BLOCK
#endif
// the data movers: up to 512 threads a block on NVIDIA, which the host launches past the one-shot
// sizes (twice the loads in flight of 256; measured faster on an H200); amdgcn keeps 256
#if defined(__AMDGCN__)
#define MOVER_BLOCK SMALL_BLOCK
#else
#define MOVER_BLOCK __attribute__((launch_bounds(512)))
#endif

// ---- stream-ordered team collectives (shmem's *OnStream calls) ----------------------------------
// coll.h's team collectives run by the whole grid (ROXI_GRID: one block up to the one-shot sizes,
// more above, as the host chooses), so they check the team, the arguments and every member's call
// as the block-level ones do, and record what went wrong in the abort block.

template <typename T, int OP>
ROXA_FN void roxk_reduce_one(int32_t team, T *dst, const T *src, uint64_t n, int32_t scatter)
{
	if (scatter)
		roxi_reduce_scatter<T, OP>(team, dst, src, n, ROXI_GRID, roxi_type_code((const T *)0));
	else
		roxi_reduce<T, OP>(team, dst, src, n, ROXI_GRID, roxi_type_code((const T *)0));
}

// op: ROXI_OP_*; the host refuses the ops a type lacks before it launches
#define ROXK_REDUCE_ARITH(NAME, T)                                                                      \
	KERNEL SMALL_BLOCK void roxk_coll_reduce_##NAME(int32_t team, T *dst, const T *src, uint64_t n, int32_t op, \
							int32_t scatter)                               \
	{                                                                                               \
		switch (op) {                                                                           \
		case ROXI_OP_SUM: roxk_reduce_one<T, ROXI_OP_SUM>(team, dst, src, n, scatter); break;  \
		case ROXI_OP_PROD: roxk_reduce_one<T, ROXI_OP_PROD>(team, dst, src, n, scatter); break; \
		case ROXI_OP_MIN: roxk_reduce_one<T, ROXI_OP_MIN>(team, dst, src, n, scatter); break;  \
		case ROXI_OP_MAX: roxk_reduce_one<T, ROXI_OP_MAX>(team, dst, src, n, scatter); break;  \
		ROXK_BITS_##NAME                                                                        \
		}                                                                                       \
	}
#define ROXK_BITS(T)                                                                                    \
	case ROXI_OP_AND: roxk_reduce_one<T, ROXI_OP_AND>(team, dst, src, n, scatter); break;          \
	case ROXI_OP_OR: roxk_reduce_one<T, ROXI_OP_OR>(team, dst, src, n, scatter); break;            \
	case ROXI_OP_XOR: roxk_reduce_one<T, ROXI_OP_XOR>(team, dst, src, n, scatter); break;
#define ROXK_BITS_int8 ROXK_BITS(int8_t)
#define ROXK_BITS_int16 ROXK_BITS(int16_t)
#define ROXK_BITS_int32 ROXK_BITS(int32_t)
#define ROXK_BITS_int64 ROXK_BITS(int64_t)
#define ROXK_BITS_uint8 ROXK_BITS(uint8_t)
#define ROXK_BITS_uint16 ROXK_BITS(uint16_t)
#define ROXK_BITS_uint32 ROXK_BITS(uint32_t)
#define ROXK_BITS_uint64 ROXK_BITS(uint64_t)
#define ROXK_BITS_float
#define ROXK_BITS_double
ROXK_REDUCE_ARITH(int8, int8_t)
ROXK_REDUCE_ARITH(int16, int16_t)
ROXK_REDUCE_ARITH(int32, int32_t)
ROXK_REDUCE_ARITH(int64, int64_t)
ROXK_REDUCE_ARITH(uint8, uint8_t)
ROXK_REDUCE_ARITH(uint16, uint16_t)
ROXK_REDUCE_ARITH(uint32, uint32_t)
ROXK_REDUCE_ARITH(uint64, uint64_t)
ROXK_REDUCE_ARITH(float, float)
ROXK_REDUCE_ARITH(double, double)

#define ROXK_REDUCE_HALF(NAME, T)                                                                       \
	KERNEL SMALL_BLOCK void roxk_coll_reduce_##NAME(int32_t team, T *dst, const T *src, uint64_t n, int32_t op, \
							int32_t scatter)                               \
	{                                                                                               \
		switch (op) {                                                                           \
		case ROXI_OP_SUM: roxk_reduce_one<T, ROXI_OP_SUM>(team, dst, src, n, scatter); break;  \
		case ROXI_OP_MIN: roxk_reduce_one<T, ROXI_OP_MIN>(team, dst, src, n, scatter); break;  \
		case ROXI_OP_MAX: roxk_reduce_one<T, ROXI_OP_MAX>(team, dst, src, n, scatter); break;  \
		}                                                                                       \
	}
ROXK_REDUCE_HALF(half, roxshmem_half_t)
ROXK_REDUCE_HALF(bfloat16, roxshmem_bfloat16_t)

// the data movers, by bytes (n: bytes per member; root: team index)
KERNEL MOVER_BLOCK void roxk_coll_broadcast(int32_t team, void *dst, const void *src, uint64_t n, int32_t root)
{
	roxi_broadcast(team, dst, src, n, root, ROXI_GRID, 0);
}
KERNEL MOVER_BLOCK void roxk_coll_fcollect(int32_t team, void *dst, const void *src, uint64_t n)
{
	roxi_fcollect(team, dst, src, n, ROXI_GRID, 0);
}
KERNEL MOVER_BLOCK void roxk_coll_alltoall(int32_t team, void *dst, const void *src, uint64_t n)
{
	roxi_alltoall(team, dst, src, n, ROXI_GRID, 0);
}

// The stream team barrier (Team.BarrierOnStream): coll.h's block barrier on the device, quiet
// first, so that a stream-ordered barrier costs one kernel and one round of flags, not a trip
// through the host. Launched with one warp: the round is one thread's stores and polls.
KERNEL SMALL_BLOCK void roxk_coll_barrier(int32_t team) { roxshmemx_barrier_block(team); }

// Device-side latency, what a fused kernel sees (roxrun bench --coll on a GPU): one block calls
// the block barrier, or the float sum all-reduce, iters times inside one kernel, with no
// launch between calls. A failed call ends the loop (it recorded why).
KERNEL SMALL_BLOCK void roxk_bench_barrier_loop(int32_t team, uint32_t iters)
{
	for (uint32_t i = 0; i < iters; i++)
		if (roxshmemx_barrier_block(team) != 0)
			return;
}
KERNEL SMALL_BLOCK void roxk_bench_allreduce_loop(int32_t team, float *dst, const float *src, uint64_t n, uint32_t iters)
{
	for (uint32_t i = 0; i < iters; i++)
		if (roxi_reduce<float, ROXI_OP_SUM>(team, dst, src, n, ROXI_BLOCK, roxi_type_code((const float *)0)) != 0)
			return;
}

// Copy-engine offload of the data movers. An entry round of the team (coll.h's protocol: every
// member has entered, so its destination is free; the signature names the offload, the kind and
// the root, the count the block size, so members that disagree fail it and nothing is posted),
// then thread 0 posts one copy-engine put per member (roxshmemx_putmem_ce_nbi: a ring descriptor
// the proxy runs as a peer copy, or on AMD an SDMA packet), and the team barrier completes them
// (its quiet) and tells every member its destination is full. No SM moves data.
// kind: 0 all-gather (member me's n bytes to dst + me*n of every member), 1 broadcast (the root's
// n bytes to every member's dst), 2 all-to-all (block j of n bytes to dst + me*n of member j).
#define ROXK_SIG_CE 0xce /* the type field of the offload's signature */
KERNEL SMALL_BLOCK void roxk_coll_ce(int32_t team, uint8_t *dst, const uint8_t *src, uint64_t n, int32_t kind, int32_t root)
{
	struct roxi_team tm;
	if (!roxi_coll_team(team, &tm, ROXI_BLOCK))
		return;
	roxi_gsync(ROXI_BLOCK); /* the group enters together: the round counter is read after any earlier call */
	int me = tm.me, size = tm.size;
	uint64_t dbytes = kind == 1 ? n : n * (uint64_t)size, sbytes = kind == 2 ? n * (uint64_t)size : n;
	uint64_t sig = roxi_sig(kind == 0 ? ROXI_COLL_FCOLLECT : kind == 1 ? ROXI_COLL_BCAST : ROXI_COLL_ALLTOALL, ROXK_SIG_CE, 0,
				(uint32_t)root);
	uint32_t call = 0, detail = 0;
	if (roxi_heap_off(dst, dbytes) == ~0ull || roxi_heap_off(src, sbytes) == ~0ull)
		call = ROXSHMEM_CALL_BAD_ADDR, detail = (uint32_t)(uintptr_t)(roxi_heap_off(dst, dbytes) == ~0ull ? (const void *)dst : src);
	else if (kind == 1 && (root < 0 || root >= size))
		call = ROXSHMEM_CALL_BAD_ARG, detail = ROXSHMEM_BAD_ARG_ROOT;
	else if ((kind == 0 && src != dst + (uint64_t)me * n && roxi_overlap(dst, dbytes, src, sbytes)) ||
		 (kind == 1 && me == root && dst != src && roxi_overlap(dst, dbytes, src, sbytes)) ||
		 (kind == 2 && roxi_overlap(dst, dbytes, src, sbytes)))
		call = ROXSHMEM_CALL_BAD_ARG, detail = ROXSHMEM_BAD_ARG_OVERLAP;
	if (call != 0) {
		if (roxa_tid() == 0)
			roxi_record(call, roxshmem_state.my_pe, detail);
		sig = ROXI_SIG_BAD;
	}
	if (!roxi_round(&tm, ROXI_BLOCK, ROXSHMEM_TEAM_WS_ARRIVE, sig, n, ROXI_CHECK_SIG_COUNT, 0, ROXSHMEM_CALL_COLL))
		return;
	if (roxa_tid() == 0 && n != 0 && (kind != 1 || me == root)) {
		for (int k = 0; k < size; k++) {
			int j = (me + k) % size; /* each member starts with its next one: the links share the load */
			int pe = roxi_team_pe(&tm, j);
			switch (kind) {
			case 0:
				if (j != me || dst + (uint64_t)me * n != src) /* in place: nothing to move */
					roxshmemx_putmem_ce_nbi(dst + (uint64_t)me * n, src, n, pe);
				break;
			case 1:
				if (j != me || dst != src)
					roxshmemx_putmem_ce_nbi(dst, src, n, pe);
				break;
			default: roxshmemx_putmem_ce_nbi(dst + (uint64_t)me * n, src + (uint64_t)j * n, n, pe); break;
			}
		}
	}
	roxshmemx_barrier_block(team);
}
