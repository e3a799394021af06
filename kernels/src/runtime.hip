// The runtime's own kernels: built by `go generate ./kernels` into kernels/obj for gfx90a, gfx942
// (code objects) and sm_80, sm_90 (PTX), embedded in the Go binary (kernels.Object). The ordering
// mode is read from roxshmem_state at run time. Launch arguments are 4- or 8-byte scalars and
// device pointers (device.Stream.Launch).
#include "roxamen/roxshmem.h"
#include "roxamen/litmus.h"

#define KERNEL extern "C" __global__
// kernels launched with at most 256 threads per block (lets the amdgcn backend budget registers)
#if defined(__AMDGCN__)
#define SMALL_BLOCK __attribute__((amdgpu_flat_work_group_size(1, 256)))
#else
#define SMALL_BLOCK
#endif
// kernels launched with up to 1024 threads per block: the JIT must fit 64 registers a thread
#if defined(__AMDGCN__)
#define FULL_BLOCK
#else
#define FULL_BLOCK __attribute__((launch_bounds(1024)))
#endif

// ---- host-initiated operations --------------------------------------------------------------

// Host-initiated atomics on device memory (shmem's device path): one AMO (ROXSHMEM_AMO_*) of width
// 4 or 8 at system scope on addr (this PE's heap or a mapped peer's); the old value goes to out
// (host-pinned and device-mapped, or device memory) unless out is 0.
KERNEL void roxk_amo(uint64_t addr, uint32_t kind, uint32_t width, uint64_t value, uint64_t cmp, uint64_t *out)
{
	if (roxa_tid() != 0 || roxa_block() != 0)
		return;
	roxa_fence_sc();
	uint64_t old;
	if (width == 8)
		old = roxa_amo_u64(kind, (uint64_t *)(uintptr_t)addr, value, cmp);
	else
		old = roxa_amo_u32(kind, (uint32_t *)(uintptr_t)addr, (uint32_t)value, (uint32_t)cmp);
	roxa_fence_sc();
	if (out != 0)
		roxa_st_release_u64(out, old);
}

// ---- synchronization ----------------------------------------------------------------------------

// One block per PE: quiet, then barrier with every PE.
KERNEL void roxk_barrier_all_block(void) { roxshmemx_barrier_all_block(); }

// Every block of a resident grid.
KERNEL void roxk_barrier_all(void) { roxshmem_barrier_all(); }

KERNEL void roxk_sync_all_block(void) { roxshmemx_sync_all_block(); }

KERNEL void roxk_quiet(void) { roxshmem_quiet(); }

// out[0] = 1 if every PE has taken part in a barrier (used by stream-ordered barriers); waits on
// the local signal word until it reaches value (stream-ordered signal wait).
KERNEL void roxk_signal_wait_until(uint64_t *sig, int32_t cmp, uint64_t value)
{
	if (roxa_tid() == 0 && roxa_block() == 0)
		roxshmem_signal_wait_until(sig, cmp, value);
}

// Stream-ordered put-with-signal issued from one thread.
KERNEL void roxk_putmem_signal(void *dst, const void *src, uint64_t n, uint64_t *sig, uint64_t signal,
			       int32_t sig_op, int32_t pe)
{
	if (roxa_tid() == 0 && roxa_block() == 0)
		roxshmem_putmem_signal(dst, src, n, sig, signal, sig_op, pe);
}

// Stream-ordered put from one block per chunk: block b moves bytes [b*chunk, (b+1)*chunk).
// PutOnStream launches it with 1024 threads a block to a mapped peer.
KERNEL FULL_BLOCK void roxk_putmem_blocks(void *dst, const void *src, uint64_t n, int32_t pe)
{
	uint64_t nb = roxa_nblocks(), b = roxa_block();
	uint64_t chunk = (n + nb - 1) / nb;
	chunk = (chunk + 15) & ~15ull;
	uint64_t lo = b * chunk;
	if (lo < n) {
		uint64_t len = n - lo < chunk ? n - lo : chunk;
		roxshmemx_putmem_nbi_block((uint8_t *)dst + lo, (const uint8_t *)src + lo, len, pe);
	}
	roxa_sync_block();
	if (roxa_tid() == 0)
		roxshmem_quiet();
}

// ---- copy and fill ------------------------------------------------------------------------------

KERNEL void roxk_copy(void *dst, const void *src, uint64_t n)
{
	uint32_t idx = roxa_block() * roxa_nthreads() + roxa_tid();
	roxa_copy(dst, src, n, idx, roxa_nblocks() * roxa_nthreads(), ROXA_MEM_PLAIN, ROXA_MEM_PLAIN);
}

KERNEL void roxk_fill_u8(uint8_t *dst, uint32_t value, uint64_t n)
{
	uint64_t stride = (uint64_t)roxa_nblocks() * roxa_nthreads();
	for (uint64_t i = (uint64_t)roxa_block() * roxa_nthreads() + roxa_tid(); i < n; i += stride)
		dst[i] = (uint8_t)value;
}

KERNEL void roxk_fill_u64(uint64_t *dst, uint64_t value, uint64_t count)
{
	uint64_t stride = (uint64_t)roxa_nblocks() * roxa_nthreads();
	for (uint64_t i = (uint64_t)roxa_block() * roxa_nthreads() + roxa_tid(); i < count; i += stride)
		dst[i] = value;
}

// A reproducible byte pattern (splitmix64 of seed and the 8-byte word index): tests fill sources
// with it and check destinations against it without a host copy of the data.
ROXA_FN uint64_t roxk_mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

ROXA_FN uint8_t roxk_pattern_byte(uint64_t seed, uint64_t i)
{
	return (uint8_t)(roxk_mix(seed ^ (i >> 3)) >> (8 * (i & 7)));
}

KERNEL void roxk_pattern(uint8_t *dst, uint64_t n, uint64_t seed)
{
	uint64_t stride = (uint64_t)roxa_nblocks() * roxa_nthreads();
	for (uint64_t i = (uint64_t)roxa_block() * roxa_nthreads() + roxa_tid(); i < n; i += stride)
		dst[i] = roxk_pattern_byte(seed, i);
}

// bad[0] counts mismatching bytes; bad[1] receives the lowest mismatching index + 1 (atomic min).
KERNEL void roxk_check_pattern(const uint8_t *src, uint64_t n, uint64_t seed, uint64_t *bad)
{
	uint64_t stride = (uint64_t)roxa_nblocks() * roxa_nthreads();
	for (uint64_t i = (uint64_t)roxa_block() * roxa_nthreads() + roxa_tid(); i < n; i += stride) {
		if (src[i] != roxk_pattern_byte(seed, i)) {
			roxa_amo_u64(ROXSHMEM_AMO_FETCH_ADD, &bad[0], 1, 0);
			uint64_t want = i + 1, cur = roxa_ld_relaxed_u64(&bad[1]);
			while (cur == 0 || want < cur) {
				uint64_t got = roxa_amo_u64(ROXSHMEM_AMO_COMPARE_SWAP, &bad[1], want, cur);
				if (got == cur)
					break;
				cur = got;
			}
		}
	}
}

// ---- bench (roxrun bench): out[0] receives the elapsed device time in ns ----------------------

// 8-byte p ping-pong between this PE and peer on the symmetric word flag: the initiator puts i and
// waits for the peer's i; the responder waits then answers. One-way latency = out[0] / (2 iters).
KERNEL void roxk_p_pingpong(uint64_t *flag, uint64_t iters, int32_t peer, int32_t initiator, uint64_t *out)
{
	if (roxa_tid() != 0 || roxa_block() != 0)
		return;
	uint64_t t0 = roxa_clock_ns();
	for (uint64_t i = 1; i <= iters; i++) {
		if (initiator) {
			roxshmem_uint64_p(flag, i, peer);
			roxshmem_uint64_wait_until(flag, ROXSHMEM_CMP_GE, i);
		} else {
			roxshmem_uint64_wait_until(flag, ROXSHMEM_CMP_GE, i);
			roxshmem_uint64_p(flag, i, peer);
		}
	}
	out[0] = roxa_clock_ns() - t0;
}

// put-with-signal ping-pong: size bytes of buf and a SET of sig to i.
KERNEL void roxk_putsig_pingpong(uint8_t *buf, uint64_t size, uint64_t *sig, uint64_t iters, int32_t peer,
				 int32_t initiator, uint64_t *out)
{
	if (roxa_tid() != 0 || roxa_block() != 0)
		return;
	uint64_t t0 = roxa_clock_ns();
	for (uint64_t i = 1; i <= iters; i++) {
		if (initiator) {
			roxshmem_putmem_signal_nbi(buf, buf, size, sig, i, ROXSHMEM_SIGNAL_SET, peer);
			roxshmem_signal_wait_until(sig, ROXSHMEM_CMP_GE, i);
		} else {
			roxshmem_signal_wait_until(sig, ROXSHMEM_CMP_GE, i);
			roxshmem_putmem_signal_nbi(buf, buf, size, sig, i, ROXSHMEM_SIGNAL_SET, peer);
		}
	}
	roxshmem_quiet();
	out[0] = roxa_clock_ns() - t0;
}

// fetch_add latency: each add's value depends on the previous add's result (it is 1, but the
// compiler cannot know it), so the adds run one after another: the same loop as the NVSHMEM
// program's k_fadd_latency (tools/compare/cu). A loop that only sums the results (NVSHMEM's anchor
// loop) measures adds in flight instead: fetch_add_pipelined. out[1] = the sum of the results.
KERNEL void roxk_fadd_latency(uint64_t *target, uint64_t iters, int32_t peer, uint64_t *out)
{
	if (roxa_tid() != 0 || roxa_block() != 0)
		return;
	uint64_t v = 0, add = 1, t0 = roxa_clock_ns();
	for (uint64_t i = 0; i < iters; i++) {
		uint64_t old = roxshmem_uint64_atomic_fetch_add(target, add, peer);
		v += old;
		add = 1 + (old >> 63);
	}
	out[0] = roxa_clock_ns() - t0;
	out[1] = v;
}

// fetch_add with four adds in flight: the results are only summed, as a loop of adds whose
// results nothing waits for (NVSHMEM's anchor loop) lets the compiler issue them; the NVSHMEM
// program's k_fadd_pipelined is the same loop. out[1] = sum.
KERNEL void roxk_fadd_pipelined(uint64_t *target, uint64_t iters, int32_t peer, uint64_t *out)
{
	if (roxa_tid() != 0 || roxa_block() != 0)
		return;
	uint64_t v = 0, i = 0, t0 = roxa_clock_ns();
	for (; i + 4 <= iters; i += 4) {
		uint64_t a = roxshmem_uint64_atomic_fetch_add(target, 1, peer);
		uint64_t b = roxshmem_uint64_atomic_fetch_add(target, 1, peer);
		uint64_t c = roxshmem_uint64_atomic_fetch_add(target, 1, peer);
		uint64_t d = roxshmem_uint64_atomic_fetch_add(target, 1, peer);
		v += a + b + c + d;
	}
	for (; i < iters; i++)
		v += roxshmem_uint64_atomic_fetch_add(target, 1, peer);
	out[0] = roxa_clock_ns() - t0;
	out[1] = v;
}

// Put bandwidth: every block puts its chunk of size bytes iters times with putmem_nbi_block, then
// quiets. Timed from the host with events; out[0] (block 0's view) is informational.
KERNEL FULL_BLOCK void roxk_put_bw(uint8_t *dst, const uint8_t *src, uint64_t size, uint64_t iters, int32_t peer, uint64_t *out)
{
	uint64_t nb = roxa_nblocks(), b = roxa_block();
	uint64_t chunk = ((size + nb - 1) / nb + 15) & ~15ull;
	uint64_t lo = b * chunk, len = lo < size ? (size - lo < chunk ? size - lo : chunk) : 0;
	uint64_t t0 = roxa_clock_ns();
	for (uint64_t i = 0; i < iters; i++)
		if (len)
			roxshmemx_putmem_nbi_block(dst + lo, src + lo, len, peer);
	roxa_sync_block();
	if (roxa_tid() == 0) {
		roxshmem_quiet();
		if (b == 0 && out)
			out[0] = roxa_clock_ns() - t0;
	}
}

// Copy-engine put bandwidth: one thread hands iters transfers of size bytes to the copy engine
// through the ring, then quiets: zero SMs move data.
KERNEL void roxk_put_bw_ce(uint8_t *dst, const uint8_t *src, uint64_t size, uint64_t iters, int32_t peer, uint64_t *out)
{
	if (roxa_tid() != 0 || roxa_block() != 0)
		return;
	uint64_t t0 = roxa_clock_ns();
	for (uint64_t i = 0; i < iters; i++)
		roxshmemx_putmem_ce_nbi(dst, src, size, peer);
	roxshmem_quiet();
	if (out)
		out[0] = roxa_clock_ns() - t0;
}

// A block-cooperative put through the copy engine (roxshmemx_putmem_ce_block), blocking.
KERNEL void roxk_putmem_ce_block(uint8_t *dst, const uint8_t *src, uint64_t size, int32_t peer)
{
	if (roxa_block() == 0)
		roxshmemx_putmem_ce_block(dst, src, size, peer);
}

// ---- the GPU litmus runner ------------------------------------------------------------------------

// A test's plain load as a user's C code compiles it: on nvptx a weak, L1-cacheable ld.global (the
// default .ca), so a line the SM cached before a peer's store may be read stale wherever no
// acquire (whose fence invalidates the L1) came between; a volatile load would always go to L2.
ROXA_FN uint64_t roxk_plain_ld(const uint64_t *p)
{
#if defined(ROXA_NVPTX)
	uint64_t v;
	asm volatile("ld.global.ca.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
	return v;
#else
	return *(volatile const uint64_t *)p;
#endif
}

ROXA_FN void roxk_litmus_step(const roxk_insn_t *in, uint64_t *regs, int *pending_get, const roxk_insn_t **gets)
{
	uint64_t *local = (uint64_t *)roxi_local(in->var);
	switch (in->op) {
	case ROXK_L_ST:
		asm volatile("" ::: "memory");
		*(volatile uint64_t *)local = in->value;
		break;
	case ROXK_L_LD:
		regs[in->reg] = roxk_plain_ld(local);
		break;
	case ROXK_L_WARM: {
		/* the value is dropped: the load only leaves the line in this SM's L1 */
		const uint64_t *p = in->pe == roxshmem_state.my_pe ? local : (const uint64_t *)roxshmem_ptr(local, in->pe);
		if (p)
			(void)roxk_plain_ld(p);
		break;
	}
	case ROXK_L_PUT:
		roxshmem_uint64_p(local, in->value, in->pe);
		break;
	case ROXK_L_PUT_NBI:
		roxshmem_putmem_nbi(local, &in->value, 8, in->pe);
		break;
	case ROXK_L_GET:
		regs[in->reg] = roxshmem_uint64_g(local, in->pe);
		break;
	case ROXK_L_GET_NBI:
		gets[(*pending_get)++] = in;
		break;
	case ROXK_L_FADD: regs[in->reg] = roxshmem_uint64_atomic_fetch_add(local, in->value, in->pe); break;
	case ROXK_L_SWAP: regs[in->reg] = roxshmem_uint64_atomic_swap(local, in->value, in->pe); break;
	case ROXK_L_CSWAP: regs[in->reg] = roxshmem_uint64_atomic_compare_swap(local, in->aux, in->value, in->pe); break;
	case ROXK_L_FETCH: regs[in->reg] = roxshmem_uint64_atomic_fetch(local, in->pe); break;
	case ROXK_L_ADD: roxshmem_uint64_atomic_add(local, in->value, in->pe); break;
	case ROXK_L_SET: roxshmem_uint64_atomic_set(local, in->value, in->pe); break;
	case ROXK_L_PUTSIG:
		roxshmem_putmem_signal(local, &in->value, 8, (uint64_t *)roxi_local(in->aux), in->reg, (int)in->sub, in->pe);
		break;
	case ROXK_L_WAIT: roxi_wait(local, 8, 0, (int)in->sub, in->value, ROXSHMEM_CALL_WAIT_UNTIL); break;
	case ROXK_L_FENCE: roxshmem_fence(); break;
	case ROXK_L_QUIET: roxshmem_quiet(); break;
	case ROXK_L_INC: roxshmem_uint64_atomic_inc(local, in->pe); break;
	case ROXK_L_FINC: regs[in->reg] = roxshmem_uint64_atomic_fetch_inc(local, in->pe); break;
	case ROXK_L_AND: roxshmem_uint64_atomic_and(local, in->value, in->pe); break;
	case ROXK_L_OR: roxshmem_uint64_atomic_or(local, in->value, in->pe); break;
	case ROXK_L_XOR: roxshmem_uint64_atomic_xor(local, in->value, in->pe); break;
	case ROXK_L_FAND: regs[in->reg] = roxshmem_uint64_atomic_fetch_and(local, in->value, in->pe); break;
	case ROXK_L_FOR: regs[in->reg] = roxshmem_uint64_atomic_fetch_or(local, in->value, in->pe); break;
	case ROXK_L_FXOR: regs[in->reg] = roxshmem_uint64_atomic_fetch_xor(local, in->value, in->pe); break;
	case ROXK_L_SIGFETCH: regs[in->reg] = roxshmem_signal_fetch(local); break;
	case ROXK_L_PTR_ST: {
		uint64_t *p = (uint64_t *)roxshmem_ptr(local, in->pe);
		asm volatile("" ::: "memory");
		if (p) *(volatile uint64_t *)p = in->value;
		break;
	}
	case ROXK_L_PTR_LD: {
		uint64_t *p = (uint64_t *)roxshmem_ptr(local, in->pe);
		if (p) regs[in->reg] = roxk_plain_ld(p);
		break;
	}
	case ROXK_L_PUTSIG_NBI:
		roxshmem_putmem_signal_nbi(local, &in->value, 8, (uint64_t *)roxi_local(in->aux), in->reg, (int)in->sub, in->pe);
		break;
	case ROXK_L_GET_DST: roxshmem_getmem(roxi_local(in->aux), local, 8, in->pe); break;
	case ROXK_L_GET_NBI_DST: roxshmem_getmem_nbi(roxi_local(in->aux), local, 8, in->pe); break;
	case ROXK_L_PUT_BUF: roxshmem_putmem_nbi(local, roxi_local(in->aux), 8, in->pe); break;
	default: break;
	}
}

// Runs copies copies of this PE's column of a litmus test side by side in one launch, as GPU litmus
// testing does (Alglave et al., ASPLOS'15): copy map[b] in block b (the host draws the mapping at
// random per launch, so a copy's columns on different PEs sit in unrelated blocks and SMs), copy
// c's variables c*copy_stride bytes after copy 0's. Blocks from copies on are stressing blocks:
// each thread loads and stores a word of scratch (stress_words words in this PE's heap, other
// lines than the test's) until every copy is done (done, a counter the host zeroes). One iteration
// per launch: the host resets memory and barriers between launches; copy c's registers go to
// regs_out[c*nregs ..]. No BARRIER or SYNC instructions (those tests run on roxk_litmus). With
// stress_slot > 0 the stressing threads hammer the test's own lines instead: stress is then the
// variables, in slots of stress_slot words whose word 0 is a variable, and only the other words
// of a slot are written (the line of a location stays busy while the column's stores reach it).
// A WARM instruction runs with probability 1/2 per copy (drawn from aux, seed and the copy).
KERNEL SMALL_BLOCK void roxk_litmus_multi(const roxk_insn_t *prog, uint32_t n, uint64_t *regs_out, uint32_t nregs,
			const uint32_t *map, uint32_t copies, uint64_t copy_stride, uint64_t *stress, uint64_t stress_words,
			uint64_t *done, uint64_t seed, uint32_t stress_slot)
{
	const uint32_t b = roxa_block();
	if (b >= copies) {
		uint64_t r = roxk_mix(seed ^ ((uint64_t)b << 20) ^ roxa_tid());
		uint64_t *w = stress + r % (stress_words ? stress_words : 1);
		if (stress_slot > 1 && stress_words >= stress_slot)
			w = stress + (r % (stress_words / stress_slot)) * stress_slot + 1 + (r >> 40) % (stress_slot - 1);
		while (roxa_ld_relaxed_u64(done) < copies)
			if (stress_words)
				roxa_st_relaxed_u64(w, roxa_ld_relaxed_u64(w) + 1);
		return;
	}
	if (roxa_tid() != 0)
		return;
	const uint64_t c = map[b];
	const uint64_t shift = c * copy_stride;
	uint64_t regs[ROXK_LITMUS_MAX_REGS];
	roxk_insn_t gets[ROXK_LITMUS_MAX_REGS];
	const roxk_insn_t *pend[ROXK_LITMUS_MAX_REGS];
	int pending = 0;
	for (int r = 0; r < ROXK_LITMUS_MAX_REGS; r++)
		regs[r] = 0;
	for (uint32_t i = 0; i < n; i++) {
		roxk_insn_t in = prog[i];
		if (in.op == ROXK_L_NOP) {
			uint64_t d = in.value ? roxk_mix(in.aux ^ (seed + c) * 0x9e3779b97f4a7c15ull ^ i) % (in.value + 1) : 0;
			for (uint64_t k = 0; k < d; k++)
				asm volatile("" ::: "memory");
			continue;
		}
		if (in.op == ROXK_L_WARM && (roxk_mix(in.aux ^ (seed + c) * 0x9e3779b97f4a7c15ull ^ i) & 1))
			continue;
		in.var += shift;
		if (in.op == ROXK_L_PUTSIG || in.op == ROXK_L_PUTSIG_NBI || in.op == ROXK_L_GET_DST || in.op == ROXK_L_GET_NBI_DST ||
		    in.op == ROXK_L_PUT_BUF)
			in.aux += shift; /* a heap offset too */
		if (in.op == ROXK_L_GET_NBI && pending < ROXK_LITMUS_MAX_REGS) {
			gets[pending] = in;
			pending++;
			continue;
		}
		roxk_litmus_step(&in, regs, &pending, pend);
		if (in.op == ROXK_L_QUIET) {
			for (int g = 0; g < pending; g++)
				regs[gets[g].reg] = roxshmem_uint64_g((uint64_t *)roxi_local(gets[g].var), gets[g].pe);
			pending = 0;
		}
	}
	roxshmem_quiet();
	for (int g = 0; g < pending; g++)
		regs[gets[g].reg] = roxshmem_uint64_g((uint64_t *)roxi_local(gets[g].var), gets[g].pe);
	for (uint32_t r = 0; r < nregs && r < ROXK_LITMUS_MAX_REGS; r++)
		regs_out[c * nregs + r] = regs[r];
	roxa_add_release_u64(done, 1);
}

// Runs this PE's column of a litmus test iters times, in one block (thread 0 executes; the block
// takes part in the barriers). A NOP with a nonzero value spins a pseudo-random count in
// [0, value] drawn from aux, the iteration and the instruction index (the runner's random delays). Per iteration: this PE's variables init[2j] (heap offset) are set to
// init[2j+1]; barrier; the program; quiet; barrier; registers go to regs_out[it*nregs ..] and the
// final values of the init variables to mem_out[it*ninit ..]. A program's BARRIER instruction is a
// barrier_all_block of the whole block, so every thread walks the program. At most 256 threads.
KERNEL SMALL_BLOCK void roxk_litmus(const roxk_insn_t *prog, uint32_t n, uint64_t *regs_out, uint32_t nregs,
			const uint64_t *init, uint32_t ninit, uint64_t *mem_out, uint64_t iters)
{
	if (roxa_block() != 0)
		return;
	const int leader = roxa_tid() == 0;
	for (uint64_t it = 0; it < iters; it++) {
		if (leader)
			for (uint32_t j = 0; j < ninit; j++)
				roxa_st_relaxed_u64((uint64_t *)roxi_local(init[2 * j]), init[2 * j + 1]);
		roxshmemx_barrier_all_block();
		uint64_t regs[ROXK_LITMUS_MAX_REGS];
		const roxk_insn_t *gets[ROXK_LITMUS_MAX_REGS];
		int pending = 0;
		for (int r = 0; r < ROXK_LITMUS_MAX_REGS; r++)
			regs[r] = 0;
		for (uint32_t i = 0; i < n; i++) {
			if (prog[i].op == ROXK_L_BARRIER) {
				roxshmemx_barrier_all_block();
				continue;
			}
			if (prog[i].op == ROXK_L_SYNC) {
				roxshmemx_sync_all_block();
				continue;
			}
			if (leader && prog[i].op == ROXK_L_WARM && (roxk_mix(prog[i].aux ^ (it * 0x9e3779b97f4a7c15ull) ^ i) & 1))
				continue;
			if (leader && prog[i].op == ROXK_L_NOP && prog[i].value) {
				/* random delay: value is the longest spin, aux a seed; differs per iteration */
				uint64_t d = roxk_mix(prog[i].aux ^ (it * 0x9e3779b97f4a7c15ull) ^ i) % (prog[i].value + 1);
				for (uint64_t k = 0; k < d; k++)
					asm volatile("" ::: "memory");
				continue;
			}
			if (leader)
				roxk_litmus_step(&prog[i], regs, &pending, gets);
			if (leader && (prog[i].op == ROXK_L_QUIET) && pending) {
				for (int g = 0; g < pending; g++)
					regs[gets[g]->reg] = roxshmem_uint64_g((uint64_t *)roxi_local(gets[g]->var), gets[g]->pe);
				pending = 0;
			}
		}
		if (leader) {
			roxshmem_quiet();
			for (int g = 0; g < pending; g++)
				regs[gets[g]->reg] = roxshmem_uint64_g((uint64_t *)roxi_local(gets[g]->var), gets[g]->pe);
		}
		roxshmemx_barrier_all_block();
		if (leader) {
			for (uint32_t r = 0; r < nregs && r < ROXK_LITMUS_MAX_REGS; r++)
				regs_out[it * nregs + r] = regs[r];
			for (uint32_t j = 0; j < ninit; j++)
				mem_out[it * ninit + j] = roxa_ld_relaxed_u64((const uint64_t *)roxi_local(init[2 * j]));
		}
	}
}
