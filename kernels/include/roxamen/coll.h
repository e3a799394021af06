/* Teams and team collectives on the device (included by roxshmem.h; HIP/CUDA C++).
 *
 * A team handle (roxshmem_team_t) is an index into the team table the host fills (state.h,
 * roxshmem_team_table; roxshmem_state.teams). ROXSHMEM_TEAM_WORLD and ROXSHMEM_TEAM_SHARED are
 * slots 0 and 1. Teams are strided: member i is world PE start + i * stride.
 *
 * Collectives (OpenSHMEM 1.5/1.6 names; reduce_scatter and the 16-bit float types are
 * extensions): every member calls the same collective on the team in the same order, with the same
 * size, type, op and root; at thread level (one thread), warp level (roxshmemx_*_warp: every lane
 * of the warp, same arguments) or block level (roxshmemx_*_block: every thread of the block; the
 * fast one). At most one group of a PE runs a collective on a given team at a time. Each returns 0,
 * or -1 after recording why in the abort block (bad team, bad argument, a member's mismatching
 * call, an abort while waiting); a failed call writes nothing outside the team's workspace.
 *
 * Every member's heap must be load/store reachable (the PEs of one node: ROXSHMEM_TEAM_SHARED or a
 * team inside it); the host's collectives span nodes. Protocol: the team workspace (state.h,
 * ROXSHMEM_TEAM_WS_*). A round = stage into the own scratch half (round & 1), publish the call
 * signature, release, announce the round to every member; wait for every member's announcement,
 * acquire, compare signatures, then read the members' heaps with system-coherent loads.
 *
 * Reductions are deterministic: element i of the result is
 *   op(...op(op(x_0[i], x_1[i]), x_2[i])..., x_{n-1}[i])   (x_j: the input of team member j)
 * evaluated left to right in team order, on every member and with both algorithms, so that every
 * member gets bit-identical results run after run. 16-bit floats accumulate in fp32 in that order
 * and round once (to nearest even) at the end. Float min/max keep the accumulator unless the next
 * input compares less/greater (so a NaN input after the first is skipped; a NaN first input stays).
 * Algorithms (roxshmem_team_table.coll_algo, ROX_COLL_ALGO on the host):
 *   one-shot: every member stages its input, then reads every member's staged input and reduces
 *             locally (one round; for small messages);
 *   two-shot: member k reduces segment k of the inputs, read from every member's source (a
 *             reduce-scatter), then every member gathers the reduced segments (two rounds, each
 *             member reads 2/n of the data per peer instead of all of it).
 * AUTO takes one-shot up to oneshot_max bytes (ROXSHMEM_COLL_ONESHOT_MAX by default). */
#ifndef ROXAMEN_COLL_H
#define ROXAMEN_COLL_H

#ifdef ROXA_GPU_LANG

typedef int32_t roxshmem_team_t;

/* 16-bit floats as bits (the layout of __half / _Float16 and __nv_bfloat16 / __bf16: cast the
 * pointers) */
typedef struct roxshmem_half {
	uint16_t bits;
} roxshmem_half_t;
typedef struct roxshmem_bfloat16 {
	uint16_t bits;
} roxshmem_bfloat16_t;

/* ---- internals ----------------------------------------------------------------------------- */
struct roxi_team {
	int start, stride, size, me;
	uint64_t ws;     /* heap offset of the workspace */
	uint64_t half;   /* bytes of one scratch half; 0: no usable workspace */
	uint64_t ll;     /* heap offset of the low-latency receive slots (roxi_ll_*); 0: none */
	uint32_t ll_max; /* payload bytes a slot holds (a power of two, at most ROXI_LL_MAX) */
};

/* The low-latency (LL) exchange for small messages, NCCL's LL protocol (NCCL's source, prims_ll.h:
 * every 8-byte store carries 4 bytes of data beside a 4-byte flag, so a reader that sees the flag
 * sees the data; no fence, no separate flag, one trip per line). Here a line is one relaxed
 * system-scope 64-bit store (single-copy atomic in every ordering mode): data in the low half, the
 * round number in the high half. Member i pushes its payload into slot (round & 1, i) of every
 * member; a slot starts with ROXI_LL_HDR lines of the call's signature and byte count, so a member
 * that called something else fails the round on every member, as roxi_round's check does. Reuse
 * is safe with two parities: a member writes round r+2 into a slot only after it has received
 * everyone's round r+1, which each member sends only after it has read its round r slots. */
#define ROXI_LL_MAX 8192 /* payload bytes per member pair that take the LL exchange */
#define ROXI_LL_HDR 4    /* header lines: signature (lo, hi), count (lo, hi) */
ROXA_FN uint64_t roxi_ll_slot_bytes(uint32_t ll_max) { return 8ull * (ROXI_LL_HDR + ll_max / 4); }

ROXA_FN const roxshmem_team_table_t *roxi_team_table(void)
{
	const roxshmem_team_table_t *tt = (const roxshmem_team_table_t *)(uintptr_t)roxshmem_state.teams;
	return tt != 0 && tt->magic == ROXSHMEM_TEAM_MAGIC ? tt : 0;
}

/* Looks team up; member: this PE must belong to it. The world team works without a table (no
 * workspace: queries only). */
ROXI_FN int roxi_team_lookup(roxshmem_team_t team, struct roxi_team *tm, int member)
{
	const roxshmem_team_table_t *tt = roxi_team_table();
	if (tt == 0) {
		if (team != ROXSHMEM_TEAM_WORLD)
			return 0;
		tm->start = 0, tm->stride = 1, tm->size = roxshmem_state.n_pes, tm->me = roxshmem_state.my_pe;
		tm->ws = 0, tm->half = 0;
		return 1;
	}
	if (team < 0 || team >= ROXSHMEM_MAX_TEAMS || (uint32_t)team >= tt->n_teams)
		return 0;
	const roxshmem_team_desc_t *d = &tt->team[team];
	if (d->size <= 0 || d->stride < 1 || (member && d->my_index < 0))
		return 0;
	tm->start = d->start, tm->stride = d->stride, tm->size = d->size, tm->me = d->my_index;
	tm->ws = d->ws_off;
	tm->half = 0, tm->ll = 0, tm->ll_max = 0;
	if (d->ws_bytes >= ROXSHMEM_TEAM_WS_MIN) {
		/* the LL slots take the end of the scratch, at most half of it; the largest payload that fits */
		uint64_t data = d->ws_bytes - ROXSHMEM_TEAM_WS_DATA, region = 0;
		for (uint32_t m = ROXI_LL_MAX; m >= 64 && d->size > 1; m /= 2) {
			region = 2ull * (uint64_t)d->size * roxi_ll_slot_bytes(m);
			if (region <= data / 2) {
				tm->ll_max = m;
				break;
			}
		}
		if (tm->ll_max == 0)
			region = 0;
		tm->half = ((data - region) / 2) & ~15ull;
		if (tm->ll_max != 0)
			tm->ll = tm->ws + ROXSHMEM_TEAM_WS_DATA + 2 * tm->half;
	}
	return 1;
}

ROXA_FN int roxi_team_pe(const struct roxi_team *tm, int i) { return tm->start + i * tm->stride; }
ROXA_FN uint64_t *roxi_ws(const struct roxi_team *tm, uint64_t at) { return (uint64_t *)roxi_local(tm->ws + at); }
ROXA_FN uint64_t roxi_scratch_off(const struct roxi_team *tm, uint64_t round)
{
	return tm->ws + ROXSHMEM_TEAM_WS_DATA + (round & 1) * tm->half;
}
/* member i's copy of the workspace byte at (heap offset) off, as this PE loads it */
ROXA_FN void *roxi_member(const struct roxi_team *tm, int i, uint64_t off) { return roxi_remote(off, roxi_team_pe(tm, i)); }
ROXA_FN int roxi_member_mode(const struct roxi_team *tm, int i) { return i == tm->me ? ROXA_MEM_PLAIN : ROXA_MEM_BYPASS; }

/* call signatures: what every member must agree on in a round */
#define ROXI_COLL_BARRIER 1
#define ROXI_COLL_SYNC 2
#define ROXI_COLL_BCAST 3
#define ROXI_COLL_FCOLLECT 4
#define ROXI_COLL_COLLECT 5
#define ROXI_COLL_ALLTOALL 6
#define ROXI_COLL_REDUCE 7
#define ROXI_COLL_REDUCE_SCATTER 8
#define ROXI_ALGO_LL 3 /* the root field of a reduction's signature: the LL exchange (ROXSHMEM_COLL_* otherwise) */
#define ROXI_ALGO_DIRECT 4 /* a grid's direct path (no staging: members read each other's symmetric buffers) */
#define ROXI_SIG_DIRECT (1ull << 63) /* a data mover's signature on the direct path */
#define ROXI_SIG_BAD (~0ull) /* this member's arguments are bad: every member fails the round */
ROXA_FN uint64_t roxi_sig(uint32_t coll, uint32_t type, uint32_t op, uint32_t root)
{
	return ((uint64_t)coll << 56) | ((uint64_t)(type & 0xffff) << 32) | ((uint64_t)(op & 0xff) << 16) | (root & 0xffff);
}

/* heap offset of [p, p+n) or ~0 when it leaves the heap */
ROXA_FN uint64_t roxi_heap_off(const void *p, uint64_t n)
{
	uint64_t a = (uint64_t)(uintptr_t)p, base = roxshmem_state.heap_base, size = roxshmem_state.heap_size;
	if (a < base || a - base > size || n > size - (a - base))
		return ~0ull;
	return a - base;
}

ROXA_FN int roxi_overlap(const void *a, uint64_t na, const void *b, uint64_t nb)
{
	uint64_t x = (uint64_t)(uintptr_t)a, y = (uint64_t)(uintptr_t)b;
	return na != 0 && nb != 0 && x < y + nb && y < x + na;
}

/* Checks the team for a collective: a live team of this PE with a workspace, every member load/store
 * reachable. Records and returns 0 when not (no round is run: nothing is announced). */
ROXI_FN int roxi_coll_team(roxshmem_team_t team, struct roxi_team *tm, int g)
{
	if (!roxi_team_lookup(team, tm, 1) || roxi_team_table() == 0) {
		if (roxi_gidx(g) == 0)
			roxi_record(ROXSHMEM_CALL_BAD_TEAM, roxshmem_state.my_pe, (uint32_t)team);
		return 0;
	}
	uint32_t bad = tm->half == 0 ? ROXSHMEM_BAD_ARG_WORKSPACE : 0;
	for (int i = 0; i < tm->size && !bad; i++) {
		int pe = roxi_team_pe(tm, i);
		if (pe < 0 || pe >= roxshmem_state.n_pes || (pe != roxshmem_state.my_pe && roxshmem_state.peer_base[pe] == 0))
			bad = ROXSHMEM_BAD_ARG_NOT_MAPPED;
	}
	if (bad) {
		if (roxi_gidx(g) == 0)
			roxi_record(ROXSHMEM_CALL_BAD_ARG, roxshmem_state.my_pe, bad);
		return 0;
	}
	return 1;
}

/* The group barrier of a collective on tm. For ROXI_GRID with several blocks, thread 0 of each
 * block meets the others on the team's grid words (a counter and a generation: the last to arrive
 * resets the counter and moves the generation on) with device-scope acquire-release atomics: what
 * any block wrote before is visible to every block after, and reaches the members through the
 * leader's system-scope release in its next round (release is cumulative). The blocks of a launch
 * are co-resident (the host launches at most half the SMs it may use), so the spin ends when the
 * slowest block arrives. */
ROXA_FN void roxi_tsync(const struct roxi_team *tm, int g)
{
	roxi_gsync(g);
	if (g != ROXI_GRID || roxa_nblocks() == 1)
		return;
	if (roxa_tid() == 0) {
		uint64_t *cnt = roxi_ws(tm, ROXSHMEM_TEAM_WS_GRID), *gen = cnt + 1;
		uint64_t g0 = roxa_ld_acquire_agent_u64(gen); /* cannot move on before this block arrives */
		if (roxa_add_agent_u64(cnt, 1) == roxa_nblocks() - 1) {
			roxa_st_release_agent_u64(cnt, 0);
			roxa_st_release_agent_u64(gen, g0 + 1);
		} else {
			/* a block that never comes (not resident: more blocks than the GPU runs at once)
			 * ends with the job's abort word rather than hanging */
			uint32_t spins = 0;
			while (roxa_ld_acquire_agent_u64(gen) == g0) {
				if ((++spins & 1023) == 0 && roxi_must_abort(ROXSHMEM_CALL_COLL, roxshmem_state.my_pe, 0))
					break;
				if (spins > 64)
					roxa_pause();
			}
		}
	}
	roxa_sync_block();
}

/* The group enters a call together: the round counter is read after any earlier call. A grid's
 * call is one launch, and its earlier calls were earlier launches of the stream: its blocks need
 * not meet for it. */
ROXA_FN void roxi_enter(const struct roxi_team *tm, int g)
{
	if (g == ROXI_GRID)
		roxi_gsync(g);
	else
		roxi_tsync(tm, g);
}

/* The round this PE enters next on the team (every thread of the group may read it between
 * rounds: only the leader writes it, inside roxi_round, between two group barriers). */
ROXA_FN uint64_t roxi_next_round(const struct roxi_team *tm) { return *roxi_ws(tm, ROXSHMEM_TEAM_WS_ROUND) + 1; }

/* line l of the slot member `from` fills for round r, in member `at`'s workspace as this PE reaches it */
ROXA_FN uint64_t *roxi_ll_line(const struct roxi_team *tm, int at, uint64_t r, int from, uint64_t l)
{
	uint64_t off = tm->ll + ((r & 1) * (uint64_t)tm->size + (uint64_t)from) * roxi_ll_slot_bytes(tm->ll_max) + 8 * l;
	return (uint64_t *)roxi_member(tm, at, off);
}
/* member i's LL header for round r has reached this PE */
ROXA_FN int roxi_ll_header_at(const struct roxi_team *tm, uint64_t r, int i)
{
	return tm->ll != 0 && (uint32_t)(roxa_ld_relaxed_u64(roxi_ll_line(tm, tm->me, r, i, 0)) >> 32) == (uint32_t)r;
}

/* roxi_round's check: */
#define ROXI_CHECK_SIG 1       /* compare signatures */
#define ROXI_CHECK_SIG_COUNT 2 /* and counts */
#define ROXI_CHECK_SIG_COUNT_MASK 3
#define ROXI_LAST 4 /* with either: the call's last round (a grid's blocks but the leader's need not learn the verdict) */

/* One round, run by the whole group once its threads have staged: the leader publishes the
 * signature (word ARRIVE: a new round; READY: the second phase of the current one, no signature),
 * releases, announces to every member, waits for every member, acquires and (check) compares the
 * signatures and counts. Every thread gets the round number, or 0 when the round failed (aborted,
 * mismatched, or this member's own arguments were bad: sig ROXI_SIG_BAD); with ROXI_LAST on a
 * grid, only the leader's block does (the others get 1). quiet_first: complete this PE's
 * outstanding operations first (barrier). */
ROXI_COLD uint64_t roxi_round(const struct roxi_team *tm, int g, uint64_t word, uint64_t sig, uint64_t count,
			      int check, int quiet_first, uint32_t call)
{
	uint64_t *ws = roxi_ws(tm, 0);
	roxi_thread_drain();
	roxi_tsync(tm, g);
	if (roxi_gidx(g) == 0) {
		uint64_t r = ws[ROXSHMEM_TEAM_WS_ROUND / 8];
		if (word == ROXSHMEM_TEAM_WS_ARRIVE) {
			r++;
			ws[ROXSHMEM_TEAM_WS_ROUND / 8] = r;
			/* members load these at system scope: stores of the same scope (in CacheBypass a plain
			 * store could sit where their loads do not look) */
			roxa_st_relaxed_u64(ws + ROXSHMEM_TEAM_WS_SIG / 8 + (r & 1), sig);
			roxa_st_relaxed_u64(ws + ROXSHMEM_TEAM_WS_COUNT / 8 + (r & 1), count);
		}
		/* the staged data, the signature and count are visible before the announcement:
		 * CacheBypass drains (the staged stores carried the bypass bits); a barrier releases in
		 * both modes, which orders them too (a drain before that release was a second
		 * system-scope fence on nvptx: the bypass barrier 0.5 us slower than strict's) */
		if (roxi_bypass() && !quiet_first)
			roxa_drain();
		else
			roxa_fence_release();
		if (quiet_first) {
#ifdef ROXI_HAVE_SDMA
			roxi_sdma_quiet(call);
#endif
			roxi_ring_quiet(call);
		}
		uint64_t at = tm->ws + word + 8ull * (uint64_t)tm->me;
		for (int k = 1; k < tm->size; k++) {
			int i = (tm->me + k) % tm->size;
			roxa_st_relaxed_u64((uint64_t *)roxi_member(tm, i, at), r);
		}
		uint64_t ok = r;
		for (int k = 1; k < tm->size && ok; k++) {
			int i = (tm->me + k) % tm->size;
			const uint64_t *w = ws + word / 8 + i;
			uint32_t spins = 0;
			while (roxi_wait_ld(w, 8) < r) {
				if ((++spins & 63) == 0) {
					if (roxi_must_abort(call, roxi_team_pe(tm, i), 1)) {
						ok = 0;
						break;
					}
					if (word == ROXSHMEM_TEAM_WS_ARRIVE && roxi_ll_header_at(tm, r, i)) {
						/* member i called an LL-sized collective for this round: it never announces */
						roxi_record(ROXSHMEM_CALL_COLL_MISMATCH, roxi_team_pe(tm, i), (uint32_t)count);
						ok = 0;
						break;
					}
					if (spins > 1024)
						roxa_pause();
				}
			}
		}
		/* on nvptx each member's last poll was the acquire, as wait_until's (no fence.acq_rel.sys,
		 * which would first wait for this thread's announcements to be acknowledged) */
		if (!roxi_acq_poll(8))
			roxi_wait_acquire();
		if (ok && (check & ROXI_CHECK_SIG_COUNT_MASK)) {
			if (sig == ROXI_SIG_BAD)
				ok = 0;
			for (int k = 1; k < tm->size && ok; k++) {
				int i = (tm->me + k) % tm->size;
				uint64_t s = roxa_ld_relaxed_u64((const uint64_t *)roxi_member(tm, i, tm->ws + ROXSHMEM_TEAM_WS_SIG + 8 * (r & 1)));
				uint64_t c = roxa_ld_relaxed_u64((const uint64_t *)roxi_member(tm, i, tm->ws + ROXSHMEM_TEAM_WS_COUNT + 8 * (r & 1)));
				if (s != sig || ((check & ROXI_CHECK_SIG_COUNT_MASK) > 1 && c != count)) {
					roxi_record(ROXSHMEM_CALL_COLL_MISMATCH, roxi_team_pe(tm, i), (uint32_t)(s != sig ? s : c));
					ok = 0;
				}
			}
		}
		ws[ROXSHMEM_TEAM_WS_STATUS / 8] = ok;
	}
	if ((check & ROXI_LAST) && g == ROXI_GRID && roxa_nblocks() > 1) {
		/* the call's last round: the leader's block learns the verdict; the others have nothing
		 * left to do and end (a stream collective's verdict reaches the host through the abort
		 * block, not a return value), so they return 1 */
		roxi_gsync(g);
		return roxa_block() == 0 ? ws[ROXSHMEM_TEAM_WS_STATUS / 8] : 1;
	}
	roxi_tsync(tm, g);
	return ws[ROXSHMEM_TEAM_WS_STATUS / 8];
}

/* The grid's copy loop (a data mover's bytes): the access modes are template arguments, so the
 * loop has no branch per access (roxa_copy tests its modes at every 16-byte access), and each
 * thread has ROXI_MOVE_U independent 16-byte loads in flight before its stores: eight, twice
 * roxa_copy's four, since a grid's copy is bound by the bytes it has in flight (a grid of 32
 * blocks of 512 threads keeps 2 MiB in flight with eight). Packets idx, idx+step, ... of n16. */
#if defined(ROXA_AMDGCN)
/* four on amdgcn: eight, inlined into a kernel without launch bounds (a program's own), took
 * more than the 128 VGPRs a 1024-thread block's waves may have (gfx942: -Wpass-failed) */
#define ROXI_MOVE_U 4
#else
#define ROXI_MOVE_U 8
#endif
#if defined(ROXA_NVPTX) && defined(__clang__) && !defined(ROXI_PORTABLE_V4)
/* 16 bytes as one vector register quad: plain accesses through the global address space become
 * ld.global.v4.u32 / st.global.v4.u32 (a struct copy of roxa_u128 lost its alignment in the
 * unrolled loop and split into 8-byte stores); bypass ones carry .cg as roxa_ld16/st16's do */
typedef uint32_t roxi_v4 __attribute__((ext_vector_type(4)));
typedef __attribute__((address_space(1))) roxi_v4 roxi_gv4;
template <int MODE> ROXA_FN roxi_v4 roxi_ld16v(const uint8_t *p)
{
	roxi_v4 v;
	if (MODE == ROXA_MEM_BYPASS)
		asm volatile("ld.global.cg.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p) : "memory");
	else
		v = *(const roxi_gv4 *)p;
	return v;
}
template <int MODE> ROXA_FN void roxi_st16v(uint8_t *p, roxi_v4 v)
{
	if (MODE == ROXA_MEM_BYPASS)
		asm volatile("st.global.cg.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w) : "memory");
	else
		*(roxi_gv4 *)p = v;
}
#elif defined(ROXA_NVPTX)
/* nvcc (a program's own kernels built against this header) has neither ext_vector_type nor
 * address spaces: the same instructions through asm on a plain 16-byte struct (ROXI_PORTABLE_V4
 * builds this branch with clang, which is how the tests check it) */
struct alignas(16) roxi_v4 {
	uint32_t x, y, z, w;
};
template <int MODE> ROXA_FN roxi_v4 roxi_ld16v(const uint8_t *p)
{
	roxi_v4 v;
	if (MODE == ROXA_MEM_BYPASS)
		asm volatile("ld.global.cg.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p) : "memory");
	else
		asm volatile("ld.global.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p) : "memory");
	return v;
}
template <int MODE> ROXA_FN void roxi_st16v(uint8_t *p, roxi_v4 v)
{
	if (MODE == ROXA_MEM_BYPASS)
		asm volatile("st.global.cg.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w) : "memory");
	else
		asm volatile("st.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w) : "memory");
}
#else
typedef roxa_u128 roxi_v4;
template <int MODE> ROXA_FN roxi_v4 roxi_ld16v(const uint8_t *p) { return roxa_ld16(p, MODE); }
template <int MODE> ROXA_FN void roxi_st16v(uint8_t *p, roxi_v4 v) { roxa_st16(p, &v, MODE); }
#endif
template <int LD, int ST> ROXI_COLD void roxi_move16(uint8_t *d, const uint8_t *s, uint64_t n16, uint32_t idx, uint32_t step)
{
	uint64_t i = idx;
	for (; i + (ROXI_MOVE_U - 1) * (uint64_t)step < n16; i += ROXI_MOVE_U * (uint64_t)step) {
		roxi_v4 v[ROXI_MOVE_U];
		for (int u = 0; u < ROXI_MOVE_U; u++)
			v[u] = roxi_ld16v<LD>(s + 16 * (i + (uint64_t)u * step));
		for (int u = 0; u < ROXI_MOVE_U; u++)
			roxi_st16v<ST>(d + 16 * (i + (uint64_t)u * step), v[u]);
	}
	for (; i < n16; i += step)
		roxi_st16v<ST>(d + 16 * i, roxi_ld16v<LD>(s + 16 * i));
}
/* n bytes from src to dst by the group (this thread: idx of step): when both are equally aligned
 * modulo 16, a byte head, the 16-byte loop and a byte tail; otherwise roxa_copy's narrower forms */
ROXA_FN void roxi_move(void *dst, const void *src, uint64_t n, uint32_t idx, uint32_t step, int ld_mode, int st_mode)
{
	uint8_t *d = (uint8_t *)dst;
	const uint8_t *s = (const uint8_t *)src;
	if ((((uintptr_t)d ^ (uintptr_t)s) & 15) != 0 || n < 16) {
		roxa_copy(d, s, n, idx, step, ld_mode, st_mode);
		return;
	}
	uint64_t head = (16 - ((uintptr_t)d & 15)) & 15;
	roxa_copy_bytes(d, s, 0, head, idx, step, ld_mode, st_mode);
	uint64_t n16 = (n - head) >> 4;
	if (ld_mode == ROXA_MEM_BYPASS)
		roxi_move16<ROXA_MEM_BYPASS, ROXA_MEM_PLAIN>(d + head, s + head, n16, idx, step);
	else if (st_mode == ROXA_MEM_BYPASS)
		roxi_move16<ROXA_MEM_PLAIN, ROXA_MEM_BYPASS>(d + head, s + head, n16, idx, step);
	else
		roxi_move16<ROXA_MEM_PLAIN, ROXA_MEM_PLAIN>(d + head, s + head, n16, idx, step);
	roxa_copy_bytes(d, s, head + 16 * n16, n, idx, step, ld_mode, st_mode);
}
/* the staging copy of this member's bytes into its scratch (members read it) */
ROXA_FN void roxi_stage(void *dst, const void *src, uint64_t n, int g)
{
	roxi_move(dst, src, n, roxi_gidx(g), roxi_gsize(g), ROXA_MEM_PLAIN, roxi_store_mode());
}
/* The push of one member's block to every member (a grid's all-gather): each 16-byte packet is
 * loaded once and stored to this member's own dest (own; 0: in place, nothing to store) and to
 * the same heap offset off in every other member, with stores of mode ST, so the own copy and the
 * sends share the loads (one read of the block instead of one per destination) and no thread
 * waits on a peer's memory. Packets idx, idx+step, ... of n16; eight loads in flight a thread. */
template <int ST>
ROXI_COLD void roxi_push16(const struct roxi_team *team, uint8_t *own, uint64_t off, const uint8_t *s, uint64_t n16, uint32_t idx,
			   uint32_t step)
{
	/* a private copy: the stores cannot alias it, so its fields stay in registers */
	const struct roxi_team t = *team, *tm = &t;
	uint64_t i = idx;
	for (; i + (ROXI_MOVE_U - 1) * (uint64_t)step < n16; i += ROXI_MOVE_U * (uint64_t)step) {
		roxi_v4 v[ROXI_MOVE_U];
		for (int u = 0; u < ROXI_MOVE_U; u++)
			v[u] = roxi_ld16v<ROXA_MEM_PLAIN>(s + 16 * (i + (uint64_t)u * step));
		if (own)
			for (int u = 0; u < ROXI_MOVE_U; u++)
				roxi_st16v<ROXA_MEM_PLAIN>(own + 16 * (i + (uint64_t)u * step), v[u]);
		for (int k = 1, j = tm->me; k < tm->size; k++) {
			j = j + 1 == tm->size ? 0 : j + 1; /* (me + k) % size */
			uint8_t *d = (uint8_t *)roxi_member(tm, j, off);
			for (int u = 0; u < ROXI_MOVE_U; u++)
				roxi_st16v<ST>(d + 16 * (i + (uint64_t)u * step), v[u]);
		}
	}
	for (; i < n16; i += step) {
		roxi_v4 v = roxi_ld16v<ROXA_MEM_PLAIN>(s + 16 * i);
		if (own)
			roxi_st16v<ROXA_MEM_PLAIN>(own + 16 * i, v);
		for (int k = 1, j = tm->me; k < tm->size; k++) {
			j = j + 1 == tm->size ? 0 : j + 1;
			roxi_st16v<ST>((uint8_t *)roxi_member(tm, j, off) + 16 * i, v);
		}
	}
}
/* n bytes of src pushed by the group to own (unless 0) and to heap offset off of every other
 * member: the vector loop when every destination is aligned like src modulo 16, else a copy per
 * destination */
ROXA_FN void roxi_push(const struct roxi_team *tm, uint8_t *own, uint64_t off, const uint8_t *src, uint64_t n, int g)
{
	uint32_t idx = roxi_gidx(g), step = roxi_gsize(g);
	int st = roxi_store_mode(), aligned = n >= 16 && (own == 0 || (((uintptr_t)own ^ (uintptr_t)src) & 15) == 0);
	for (int k = 1; k < tm->size && aligned; k++)
		aligned = ((((uintptr_t)roxi_member(tm, (tm->me + k) % tm->size, off)) ^ (uintptr_t)src) & 15) == 0;
	if (!aligned) {
		if (own)
			roxi_move(own, src, n, idx, step, ROXA_MEM_PLAIN, ROXA_MEM_PLAIN);
		for (int k = 1; k < tm->size; k++)
			roxi_move(roxi_member(tm, (tm->me + k) % tm->size, off), src, n, idx, step, ROXA_MEM_PLAIN, st);
		return;
	}
	uint64_t head = (16 - ((uintptr_t)src & 15)) & 15, n16 = (n - head) >> 4, tail = head + 16 * n16;
	for (int k = 0; k < tm->size; k++) {
		/* the bytes before and after the 16-byte packets, to each destination */
		uint8_t *d = k == 0 ? own : (uint8_t *)roxi_member(tm, (tm->me + k) % tm->size, off);
		if (d) {
			roxa_copy_bytes(d, src, 0, head, idx, step, ROXA_MEM_PLAIN, k == 0 ? ROXA_MEM_PLAIN : st);
			roxa_copy_bytes(d, src, tail, n, idx, step, ROXA_MEM_PLAIN, k == 0 ? ROXA_MEM_PLAIN : st);
		}
	}
	uint8_t *o = own ? own + head : 0;
	if (st == ROXA_MEM_BYPASS)
		roxi_push16<ROXA_MEM_BYPASS>(tm, o, off + head, src + head, n16, idx, step);
	else
		roxi_push16<ROXA_MEM_PLAIN>(tm, o, off + head, src + head, n16, idx, step);
}
/* a copy from member i's heap (system-coherent loads from peers) */
ROXA_FN void roxi_fetch(const struct roxi_team *tm, int i, void *dst, uint64_t off, uint64_t n, int g)
{
	roxi_move(dst, roxi_member(tm, i, off), n, roxi_gidx(g), roxi_gsize(g), roxi_member_mode(tm, i), ROXA_MEM_PLAIN);
}

/* ---- the LL exchange (small messages: one trip, the flag in the data) ---- */

/* a call of bytes per member takes the LL exchange: the team has slots that hold it, and
 * ROX_COLL_ALGO leaves the choice to the runtime (a forced algorithm takes the rounds) */
ROXA_FN int roxi_ll_ok(const struct roxi_team *tm, uint64_t bytes)
{
	const roxshmem_team_table_t *tt = roxi_team_table();
	return tm->ll != 0 && bytes <= tm->ll_max && (tt == 0 || tt->coll_algo == ROXSHMEM_COLL_AUTO);
}
/* the 4 bytes at byte i of an n-byte payload, the tail zero-padded (little endian everywhere) */
ROXA_FN uint32_t roxi_ll_word(const uint8_t *p, uint64_t i, uint64_t n)
{
	if (i + 4 <= n && (((uintptr_t)p + i) & 3) == 0)
		return *(const uint32_t *)(p + i);
	uint32_t v = 0;
	for (uint32_t b = 0; b < 4 && i + b < n; b++)
		v |= (uint32_t)p[i + b] << (8 * b);
	return v;
}
ROXA_FN void roxi_ll_put_word(uint8_t *d, uint64_t i, uint64_t n, uint32_t v)
{
	if (i + 4 <= n && (((uintptr_t)d + i) & 3) == 0) {
		*(uint32_t *)(d + i) = v;
		return;
	}
	for (uint32_t b = 0; b < 4 && i + b < n; b++)
		d[i + b] = (uint8_t)(v >> (8 * b));
}
/* the group pushes this member's round-r slot into member j: the header (sig, count), then the
 * n payload bytes at p, one line per 4 bytes */
ROXA_FN void roxi_ll_push(const struct roxi_team *tm, int j, uint64_t r, uint64_t sig, uint64_t count, const uint8_t *p,
			  uint64_t n, int g)
{
	uint64_t flag = (uint64_t)(uint32_t)r << 32, lines = ROXI_LL_HDR + (n + 3) / 4;
	uint64_t *dst = roxi_ll_line(tm, j, r, tm->me, 0);
	for (uint64_t l = roxi_gidx(g); l < lines; l += roxi_gsize(g)) {
		uint64_t h = l < 2 ? sig : count;
		uint32_t v = l < ROXI_LL_HDR ? (uint32_t)((l & 1) ? h >> 32 : h) : roxi_ll_word(p, 4 * (l - ROXI_LL_HDR), n);
		roxa_st_relaxed_u64(dst + l, flag | v);
	}
}
/* line l of member i's round-r slot here, once it has arrived: its 4 data bytes; *ok = 0 when the
 * wait gave up (an abort; recorded) */
ROXA_FN uint32_t roxi_ll_wait(const struct roxi_team *tm, uint64_t r, int i, uint64_t l, int *ok)
{
	const uint64_t *p = roxi_ll_line(tm, tm->me, r, i, l);
	uint32_t spins = 0;
	for (;;) {
		uint64_t v = roxa_ld_relaxed_u64(p);
		if ((uint32_t)(v >> 32) == (uint32_t)r)
			return (uint32_t)v;
		if ((++spins & 63) == 0) {
			if (roxi_must_abort(ROXSHMEM_CALL_COLL, roxi_team_pe(tm, i), 1)) {
				*ok = 0;
				return 0;
			}
			if (spins > 1024)
				roxa_pause();
		}
	}
}
/* After the group's pushes: the leader enters round r; then the group's threads share the
 * members, each polling a member's whole header at once (its four loads in flight together), and
 * compare signature and count, as roxi_round's check does. A member that announces this round
 * through roxi_round instead called a collective of another size: a mismatch. The group's verdict. */
ROXI_COLD int roxi_ll_headers(const struct roxi_team *tm, uint64_t r, uint64_t sig, uint64_t count, int g)
{
	uint64_t *ws = roxi_ws(tm, 0);
	roxi_tsync(tm, g); /* every thread has read r and its sources */
	if (roxi_gidx(g) == 0) {
		ws[ROXSHMEM_TEAM_WS_ROUND / 8] = r;
		ws[ROXSHMEM_TEAM_WS_STATUS / 8] = sig != ROXI_SIG_BAD;
	}
	roxi_tsync(tm, g);
	int ok = sig != ROXI_SIG_BAD;
	for (int k = 1 + (int)roxi_gidx(g); k < tm->size && ok; k += (int)roxi_gsize(g)) {
		int i = (tm->me + k) % tm->size;
		const uint64_t *h = roxi_ll_line(tm, tm->me, r, i, 0);
		uint64_t w[ROXI_LL_HDR];
		uint32_t spins = 0;
		for (;;) {
			int have = 1;
			for (int l = 0; l < ROXI_LL_HDR; l++)
				w[l] = roxa_ld_relaxed_u64(h + l);
			for (int l = 0; l < ROXI_LL_HDR; l++)
				have &= (uint32_t)(w[l] >> 32) == (uint32_t)r;
			if (have)
				break;
			if ((++spins & 63) == 0) {
				if (roxi_must_abort(ROXSHMEM_CALL_COLL, roxi_team_pe(tm, i), 1)) {
					ok = 0;
					break;
				}
				/* an announcement of this round or a later one; a member that announces a
				 * later round released its round-r header first: look again after the acquire */
				uint64_t a = roxa_ld_relaxed_u64(ws + ROXSHMEM_TEAM_WS_ARRIVE / 8 + i);
				roxi_wait_acquire();
				if (a >= r && (uint32_t)(roxa_ld_relaxed_u64(h) >> 32) != (uint32_t)r) {
					roxi_record(ROXSHMEM_CALL_COLL_MISMATCH, roxi_team_pe(tm, i), (uint32_t)count);
					ok = 0;
					break;
				}
				if (spins > 1024)
					roxa_pause();
			}
		}
		if (!ok)
			break;
		uint64_t sg = (w[0] & 0xffffffffull) | w[1] << 32, c = (w[2] & 0xffffffffull) | w[3] << 32;
		if (sg != sig || c != count) {
			roxi_record(ROXSHMEM_CALL_COLL_MISMATCH, roxi_team_pe(tm, i), (uint32_t)(sg != sig ? sg : c));
			ok = 0;
		}
	}
	if (!ok)
		ws[ROXSHMEM_TEAM_WS_STATUS / 8] = 0;
	roxi_tsync(tm, g);
	return (int)ws[ROXSHMEM_TEAM_WS_STATUS / 8];
}
/* lines l and l+1 of member i's round-r slot (l+1 only when two): both loads in flight together */
ROXA_FN uint64_t roxi_ll_wait2(const struct roxi_team *tm, uint64_t r, int i, uint64_t l, int two, int *ok)
{
	const uint64_t *p = roxi_ll_line(tm, tm->me, r, i, l);
	uint32_t spins = 0, f = (uint32_t)r;
	for (;;) {
		uint64_t a = roxa_ld_relaxed_u64(p), b = two ? roxa_ld_relaxed_u64(p + 1) : (uint64_t)f << 32;
		if ((uint32_t)(a >> 32) == f && (uint32_t)(b >> 32) == f)
			return (a & 0xffffffffull) | (two ? b << 32 : 0);
		if ((++spins & 63) == 0) {
			if (roxi_must_abort(ROXSHMEM_CALL_COLL, roxi_team_pe(tm, i), 1)) {
				*ok = 0;
				return 0;
			}
			if (spins > 1024)
				roxa_pause();
		}
	}
}
/* the group's verdict after its threads' waits (a thread whose wait gave up clears it) */
ROXA_FN int roxi_ll_verdict(const struct roxi_team *tm, int ok, int g)
{
	uint64_t *ws = roxi_ws(tm, 0);
	if (!ok)
		ws[ROXSHMEM_TEAM_WS_STATUS / 8] = 0;
	roxi_tsync(tm, g);
	return ws[ROXSHMEM_TEAM_WS_STATUS / 8] ? 0 : -1;
}
#define ROXI_LL_FCOLLECT 0 /* dest[i*n ..) = member i's source */
#define ROXI_LL_BCAST 1    /* dest = the root's source */
#define ROXI_LL_ALLTOALL 2 /* dest[i*n ..) = member i's source[me*n ..) */
/* the data movers over the LL exchange (the caller checked the arguments into sig) */
ROXI_COLD int roxi_ll_move(const struct roxi_team *tm, int kind, uint8_t *dest, const uint8_t *src, uint64_t n, int root,
			   uint64_t sig, int g)
{
	int me = tm->me, size = tm->size;
	uint64_t r = roxi_next_round(tm);
	for (int k = 1; k < size; k++) {
		int j = (me + k) % size;
		uint64_t m = sig == ROXI_SIG_BAD || (kind == ROXI_LL_BCAST && me != root) ? 0 : n; /* headers go everywhere */
		roxi_ll_push(tm, j, r, sig, n, kind == ROXI_LL_ALLTOALL ? src + (uint64_t)j * n : src, m, g);
	}
	if (!roxi_ll_headers(tm, r, sig, n, g))
		return -1;
	uint32_t idx = roxi_gidx(g), step = roxi_gsize(g);
	uint8_t *own = kind == ROXI_LL_BCAST ? dest : dest + (uint64_t)me * n;
	const uint8_t *from = kind == ROXI_LL_ALLTOALL ? src + (uint64_t)me * n : src;
	if (own != from && (kind != ROXI_LL_BCAST || me == root))
		roxa_copy(own, from, n, idx, step, ROXA_MEM_PLAIN, ROXA_MEM_PLAIN);
	int ok = 1;
	uint64_t lines = (n + 3) / 4;
	for (int k = 1; k < size && ok; k++) {
		int i = (me + k) % size;
		if (kind == ROXI_LL_BCAST && i != root)
			continue;
		uint8_t *d = kind == ROXI_LL_BCAST ? dest : dest + (uint64_t)i * n;
		for (uint64_t l = idx; l < lines && ok; l += step) {
			uint32_t v = roxi_ll_wait(tm, r, i, ROXI_LL_HDR + l, &ok);
			if (ok)
				roxi_ll_put_word(d, 4 * l, n, v);
		}
	}
	return roxi_ll_verdict(tm, ok, g);
}

/* A grid (the stream collectives) moves data on the direct path past the one-shot sizes (below
 * them the staged path's single round wins): members read each other's symmetric buffers in
 * place, with no staging and no scratch half per round, so that a large call is as many blocks
 * as the host launched streaming at once. Every member decides alike (the same call, the same sizes, symmetric
 * buffers), and the signature says so (ROXI_SIG_DIRECT), so a member on another path fails the
 * round. size: the call's bytes per member, as the host counts them to choose the blocks; src
 * (bytes) must lie in the symmetric heap: outside it, it is recorded as a bad address and fails
 * the round everywhere. not_here: this call cannot take the direct path. */
ROXI_FN int roxi_direct(const struct roxi_team *tm, int g, uint64_t *sig, uint64_t size, const void *src, uint64_t bytes, int not_here)
{
	const roxshmem_team_table_t *tt = roxi_team_table();
	uint64_t most = tt && tt->oneshot_max ? tt->oneshot_max : ROXSHMEM_COLL_ONESHOT_MAX;
	if (g != ROXI_GRID || not_here || tm->size == 1 || size <= most)
		return 0;
	if (*sig != ROXI_SIG_BAD) {
		if (roxi_heap_off(src, bytes) == ~0ull) {
			if (roxi_gidx(g) == 0)
				roxi_record(ROXSHMEM_CALL_BAD_ADDR, roxshmem_state.my_pe, (uint32_t)(uintptr_t)src);
			*sig = ROXI_SIG_BAD;
		} else {
			*sig |= ROXI_SIG_DIRECT;
		}
	}
	return 1;
}

/* barrier (quiet first) and sync (order only) over a team */
ROXI_COLD int roxi_team_barrier(roxshmem_team_t team, int g, int quiet_first)
{
	struct roxi_team tm;
	if (!roxi_coll_team(team, &tm, g))
		return -1;
	roxi_enter(&tm, g);
	uint32_t call = quiet_first ? ROXSHMEM_CALL_BARRIER : ROXSHMEM_CALL_SYNC;
	uint64_t r = roxi_round(&tm, g, ROXSHMEM_TEAM_WS_ARRIVE, roxi_sig(quiet_first ? ROXI_COLL_BARRIER : ROXI_COLL_SYNC, 0, 0, 0),
				0, ROXI_CHECK_SIG, quiet_first, call);
	return r ? 0 : -1;
}

/* broadcast: root stages a chunk, every member reads root's scratch */
ROXI_COLD int roxi_broadcast(roxshmem_team_t team, void *dest, const void *source, uint64_t n, int root, int g, uint32_t type)
{
	struct roxi_team tm;
	if (!roxi_coll_team(team, &tm, g))
		return -1;
	roxi_enter(&tm, g);
	uint64_t sig = roxi_sig(ROXI_COLL_BCAST, type, 0, (uint32_t)root);
	int lead = roxi_gidx(g) == 0;
	if (root < 0 || root >= tm.size) {
		if (lead)
			roxi_record(ROXSHMEM_CALL_BAD_ARG, roxshmem_state.my_pe, ROXSHMEM_BAD_ARG_ROOT);
		sig = ROXI_SIG_BAD;
	} else if (tm.me == root && dest != source && roxi_overlap(dest, n, source, n)) {
		if (lead)
			roxi_record(ROXSHMEM_CALL_BAD_ARG, roxshmem_state.my_pe, ROXSHMEM_BAD_ARG_OVERLAP);
		sig = ROXI_SIG_BAD;
	}
	if (roxi_ll_ok(&tm, n))
		return roxi_ll_move(&tm, ROXI_LL_BCAST, (uint8_t *)dest, (const uint8_t *)source, n, root, sig, g);
	if (roxi_direct(&tm, g, &sig, n, source, n, 0)) {
		/* every member reads the root's source in place; the second round frees it */
		if (!roxi_round(&tm, g, ROXSHMEM_TEAM_WS_ARRIVE, sig, n, ROXI_CHECK_SIG_COUNT, 0, ROXSHMEM_CALL_COLL))
			return -1;
		if (tm.me != root)
			roxi_fetch(&tm, root, dest, roxi_heap_off(source, n), n, g);
		else if (dest != source)
			roxi_move(dest, source, n, roxi_gidx(g), roxi_gsize(g), ROXA_MEM_PLAIN, ROXA_MEM_PLAIN);
		return roxi_round(&tm, g, ROXSHMEM_TEAM_WS_READY, 0, 0, ROXI_LAST, 0, ROXSHMEM_CALL_COLL) ? 0 : -1;
	}
	uint64_t done = 0;
	do {
		uint64_t c = n - done < tm.half ? n - done : tm.half;
		uint64_t r = roxi_next_round(&tm), sc = roxi_scratch_off(&tm, r);
		if (tm.me == root && sig != ROXI_SIG_BAD)
			roxi_stage(roxi_local(sc), (const uint8_t *)source + done, c, g);
		if (!roxi_round(&tm, g, ROXSHMEM_TEAM_WS_ARRIVE, sig, n, ROXI_CHECK_SIG_COUNT, 0, ROXSHMEM_CALL_COLL))
			return -1;
		if (tm.me != root)
			roxi_fetch(&tm, root, (uint8_t *)dest + done, sc, c, g);
		else if (dest != source)
			roxi_move((uint8_t *)dest + done, (const uint8_t *)source + done, c, roxi_gidx(g), roxi_gsize(g), ROXA_MEM_PLAIN,
				  ROXA_MEM_PLAIN);
		done += c;
	} while (done < n);
	roxi_tsync(&tm, g);
	return 0;
}

/* fcollect (fixed all-gather): dest[i*n .. (i+1)*n) = member i's source. In place when source is
 * dest + me*n. */
ROXI_COLD int roxi_fcollect(roxshmem_team_t team, void *dest, const void *source, uint64_t n, int g, uint32_t type)
{
	struct roxi_team tm;
	if (!roxi_coll_team(team, &tm, g))
		return -1;
	roxi_enter(&tm, g);
	uint64_t sig = roxi_sig(ROXI_COLL_FCOLLECT, type, 0, 0);
	uint8_t *d = (uint8_t *)dest;
	if (source != d + (uint64_t)tm.me * n && roxi_overlap(dest, n * (uint64_t)tm.size, source, n)) {
		if (roxi_gidx(g) == 0)
			roxi_record(ROXSHMEM_CALL_BAD_ARG, roxshmem_state.my_pe, ROXSHMEM_BAD_ARG_OVERLAP);
		sig = ROXI_SIG_BAD;
	}
	if (roxi_ll_ok(&tm, n))
		return roxi_ll_move(&tm, ROXI_LL_FCOLLECT, d, (const uint8_t *)source, n, 0, sig, g);
	int inplace = source == d + (uint64_t)tm.me * n;
	if (inplace && sig != ROXI_SIG_BAD)
		sig |= 1; /* the root field: in place, member i's source is block i of its dest */
	/* A symmetric dest: each member pushes its block into every member's dest (root field bit 1:
	 * members that disagree, one pulling, fail the round). */
	uint64_t dst_off = roxi_heap_off(d, n * (uint64_t)tm.size);
	if (dst_off != ~0ull && roxi_direct(&tm, g, &sig, n, d, n * (uint64_t)tm.size, 0)) {
		if (sig != ROXI_SIG_BAD)
			sig |= 2;
		/* the entry round: every member has entered (its dest is free; the signatures agree) */
		if (!roxi_round(&tm, g, ROXSHMEM_TEAM_WS_ARRIVE, sig, n, ROXI_CHECK_SIG_COUNT, 0, ROXSHMEM_CALL_COLL))
			return -1;
		roxi_push(&tm, inplace ? 0 : d + (uint64_t)tm.me * n, dst_off + (uint64_t)tm.me * n,
			  inplace ? d + (uint64_t)tm.me * n : (const uint8_t *)source, n, g);
		/* the exit round: every member's pushes into this dest are released before its announcement */
		return roxi_round(&tm, g, ROXSHMEM_TEAM_WS_READY, 0, 0, ROXI_LAST, 0, ROXSHMEM_CALL_COLL) ? 0 : -1;
	}
	if (roxi_direct(&tm, g, &sig, n, inplace ? (const void *)d : source, inplace ? n * (uint64_t)tm.size : n, 0)) {
		/* each member's source read where it lies (so every member must agree on in place: the
		 * signature says it) */
		if (!roxi_round(&tm, g, ROXSHMEM_TEAM_WS_ARRIVE, sig, n, ROXI_CHECK_SIG_COUNT, 0, ROXSHMEM_CALL_COLL))
			return -1;
		uint64_t off = inplace ? roxi_heap_off(d, n * (uint64_t)tm.size) : roxi_heap_off(source, n);
		for (int k = 1; k < tm.size; k++) {
			int i = (tm.me + k) % tm.size;
			roxi_fetch(&tm, i, d + (uint64_t)i * n, off + (inplace ? (uint64_t)i * n : 0), n, g);
		}
		if (!inplace)
			roxi_move(d + (uint64_t)tm.me * n, source, n, roxi_gidx(g), roxi_gsize(g), ROXA_MEM_PLAIN, ROXA_MEM_PLAIN);
		return roxi_round(&tm, g, ROXSHMEM_TEAM_WS_READY, 0, 0, ROXI_LAST, 0, ROXSHMEM_CALL_COLL) ? 0 : -1;
	}
	if (sig != ROXI_SIG_BAD)
		sig &= ~1ull;
	uint64_t done = 0;
	do {
		uint64_t c = n - done < tm.half ? n - done : tm.half;
		uint64_t r = roxi_next_round(&tm), sc = roxi_scratch_off(&tm, r);
		if (sig != ROXI_SIG_BAD)
			roxi_stage(roxi_local(sc), (const uint8_t *)source + done, c, g);
		if (!roxi_round(&tm, g, ROXSHMEM_TEAM_WS_ARRIVE, sig, n, ROXI_CHECK_SIG_COUNT, 0, ROXSHMEM_CALL_COLL))
			return -1;
		for (int i = 0; i < tm.size; i++)
			roxi_fetch(&tm, i, d + (uint64_t)i * n + done, sc, c, g);
		done += c;
	} while (done < n);
	roxi_tsync(&tm, g);
	return 0;
}

/* collect (variable all-gather): dest = the members' sources concatenated in team order; every
 * member's size travels in the workspace (the sizes may differ; the type must not). */
ROXI_COLD int roxi_collect(roxshmem_team_t team, void *dest, const void *source, uint64_t n, int g, uint32_t type)
{
	struct roxi_team tm;
	if (!roxi_coll_team(team, &tm, g))
		return -1;
	roxi_enter(&tm, g);
	uint64_t sig = roxi_sig(ROXI_COLL_COLLECT, type, 0, 0);
	if (dest != source && roxi_overlap(dest, n, source, n)) {
		if (roxi_gidx(g) == 0)
			roxi_record(ROXSHMEM_CALL_BAD_ARG, roxshmem_state.my_pe, ROXSHMEM_BAD_ARG_OVERLAP);
		sig = ROXI_SIG_BAD;
	}
	uint64_t done = 0, most = 0;
	do {
		uint64_t c = done < n ? (n - done < tm.half ? n - done : tm.half) : 0;
		uint64_t r = roxi_next_round(&tm), sc = roxi_scratch_off(&tm, r);
		if (sig != ROXI_SIG_BAD)
			roxi_stage(roxi_local(sc), (const uint8_t *)source + done, c, g);
		if (!roxi_round(&tm, g, ROXSHMEM_TEAM_WS_ARRIVE, sig, n, ROXI_CHECK_SIG, 0, ROXSHMEM_CALL_COLL))
			return -1;
		uint64_t at = 0;
		for (int i = 0; i < tm.size; i++) {
			uint64_t ni = i == tm.me ? n
						 : roxa_ld_relaxed_u64((const uint64_t *)roxi_member(&tm, i, tm.ws + ROXSHMEM_TEAM_WS_COUNT + 8 * (r & 1)));
			if (ni > most)
				most = ni;
			if (done < ni)
				roxi_fetch(&tm, i, (uint8_t *)dest + at + done, sc, ni - done < tm.half ? ni - done : tm.half, g);
			at += ni;
		}
		done += tm.half;
	} while (done < most);
	roxi_tsync(&tm, g);
	return 0;
}

/* alltoall: dest[i*n ..) = member i's source[me*n ..). In place when dest == source. */
ROXI_COLD int roxi_alltoall(roxshmem_team_t team, void *dest, const void *source, uint64_t n, int g, uint32_t type)
{
	struct roxi_team tm;
	if (!roxi_coll_team(team, &tm, g))
		return -1;
	roxi_enter(&tm, g);
	uint64_t sig = roxi_sig(ROXI_COLL_ALLTOALL, type, 0, 0), all = n * (uint64_t)tm.size;
	uint64_t cb = (tm.half / (uint64_t)tm.size) & ~15ull; /* per-block chunk */
	uint32_t bad = cb == 0 ? ROXSHMEM_BAD_ARG_WORKSPACE : dest != source && roxi_overlap(dest, all, source, all) ? ROXSHMEM_BAD_ARG_OVERLAP : 0;
	if (bad) {
		if (roxi_gidx(g) == 0)
			roxi_record(ROXSHMEM_CALL_BAD_ARG, roxshmem_state.my_pe, bad);
		sig = ROXI_SIG_BAD;
		cb = 1;
	}
	const uint8_t *s = (const uint8_t *)source;
	uint8_t *d = (uint8_t *)dest;
	if (roxi_ll_ok(&tm, n))
		return roxi_ll_move(&tm, ROXI_LL_ALLTOALL, d, s, n, 0, sig, g);
	if (roxi_direct(&tm, g, &sig, all, source, all, dest == source)) {
		/* block me of each member's source read in place (not in place: a member's block i of
		 * dest would be read by member i while this member fills it) */
		if (!roxi_round(&tm, g, ROXSHMEM_TEAM_WS_ARRIVE, sig, n, ROXI_CHECK_SIG_COUNT, 0, ROXSHMEM_CALL_COLL))
			return -1;
		uint64_t off = roxi_heap_off(source, all) + (uint64_t)tm.me * n;
		for (int k = 0; k < tm.size; k++) {
			int i = (tm.me + k) % tm.size;
			if (i != tm.me)
				roxi_fetch(&tm, i, d + (uint64_t)i * n, off, n, g);
			else
				roxi_move(d + (uint64_t)i * n, s + (uint64_t)i * n, n, roxi_gidx(g), roxi_gsize(g), ROXA_MEM_PLAIN, ROXA_MEM_PLAIN);
		}
		return roxi_round(&tm, g, ROXSHMEM_TEAM_WS_READY, 0, 0, ROXI_LAST, 0, ROXSHMEM_CALL_COLL) ? 0 : -1;
	}
	uint64_t done = 0;
	do {
		uint64_t c = n - done < cb ? n - done : cb;
		uint64_t r = roxi_next_round(&tm), sc = roxi_scratch_off(&tm, r);
		if (sig != ROXI_SIG_BAD)
			for (int k = 0; k < tm.size; k++)
				roxi_stage((uint8_t *)roxi_local(sc) + (uint64_t)k * cb, s + (uint64_t)k * n + done, c, g);
		if (!roxi_round(&tm, g, ROXSHMEM_TEAM_WS_ARRIVE, sig, n, ROXI_CHECK_SIG_COUNT, 0, ROXSHMEM_CALL_COLL))
			return -1;
		for (int i = 0; i < tm.size; i++)
			roxi_fetch(&tm, i, d + (uint64_t)i * n + done, sc + (uint64_t)tm.me * cb, c, g);
		done += c;
	} while (done < n);
	roxi_tsync(&tm, g);
	return 0;
}

/* ---- reductions ---------------------------------------------------------------------------- */
#define ROXI_OP_SUM 0
#define ROXI_OP_PROD 1
#define ROXI_OP_MIN 2
#define ROXI_OP_MAX 3
#define ROXI_OP_AND 4
#define ROXI_OP_OR 5
#define ROXI_OP_XOR 6

/* fp16 / bf16 <-> fp32, in integer arithmetic: the same bits on every target and on the CPU */
ROXA_FN float roxi_bits_f32(uint32_t b)
{
	float f;
	roxa_bytecopy(&f, &b, 4);
	return f;
}
ROXA_FN uint32_t roxi_f32_bits(float f)
{
	uint32_t b;
	roxa_bytecopy(&b, &f, 4);
	return b;
}
ROXA_FN float roxi_half_to_f32(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ff;
	if (e == 0x1f)
		return roxi_bits_f32(sign | 0x7f800000u | (m << 13));
	if (e == 0) {
		if (m == 0)
			return roxi_bits_f32(sign);
		/* subnormal: m * 2^-24, exact in fp32 */
		int sh = 0;
		while ((m & 0x400) == 0) {
			m <<= 1;
			sh++;
		}
		return roxi_bits_f32(sign | ((uint32_t)(113 - sh) << 23) | ((m & 0x3ff) << 13));
	}
	return roxi_bits_f32(sign | ((e + 112) << 23) | (m << 13));
}
ROXA_FN uint16_t roxi_f32_to_half(float f)
{
	uint32_t b = roxi_f32_bits(f), sign = (b >> 16) & 0x8000, e = (b >> 23) & 0xff, m = b & 0x7fffff;
	if (e == 0xff)
		return (uint16_t)(sign | 0x7c00 | (m ? 0x200 | (m >> 13) : 0));
	int32_t he = (int32_t)e - 112; /* biased half exponent */
	if (he >= 0x1f)
		return (uint16_t)(sign | 0x7c00);
	uint32_t mant = m | 0x800000u; /* 24 bits with the implicit one */
	uint32_t shift = 13;
	if (he <= 0) {
		if (he < -10)
			return (uint16_t)sign; /* below half the smallest subnormal */
		shift = (uint32_t)(14 - he);
		he = 0;
	} else {
		mant &= 0x7fffff;
	}
	uint32_t q = mant >> shift, rem = mant & ((1u << shift) - 1), halfway = 1u << (shift - 1);
	if (rem > halfway || (rem == halfway && (q & 1)))
		q++;
	/* q carries into the exponent on overflow of the mantissa: still the right encoding */
	return (uint16_t)(sign | (((uint32_t)he << 10) + q));
}
ROXA_FN float roxi_bf16_to_f32(uint16_t h) { return roxi_bits_f32((uint32_t)h << 16); }
ROXA_FN uint16_t roxi_f32_to_bf16(float f)
{
	uint32_t b = roxi_f32_bits(f);
	if ((b & 0x7f800000u) == 0x7f800000u && (b & 0x7fffff))
		return (uint16_t)((b >> 16) | 0x40); /* NaN stays NaN (quiet) */
	return (uint16_t)((b + 0x7fff + ((b >> 16) & 1)) >> 16);
}

/* accumulator type and conversions */
template <typename T> struct roxi_acc_of {
	typedef T type;
	ROXA_FN T in(T v) { return v; }
	ROXA_FN T out(T a) { return a; }
};
template <> struct roxi_acc_of<roxshmem_half_t> {
	typedef float type;
	ROXA_FN float in(roxshmem_half_t v) { return roxi_half_to_f32(v.bits); }
	ROXA_FN roxshmem_half_t out(float a)
	{
		roxshmem_half_t h;
		h.bits = roxi_f32_to_half(a);
		return h;
	}
};
template <> struct roxi_acc_of<roxshmem_bfloat16_t> {
	typedef float type;
	ROXA_FN float in(roxshmem_bfloat16_t v) { return roxi_bf16_to_f32(v.bits); }
	ROXA_FN roxshmem_bfloat16_t out(float a)
	{
		roxshmem_bfloat16_t h;
		h.bits = roxi_f32_to_bf16(a);
		return h;
	}
};

/* wrapping integer arithmetic (no signed overflow), plain arithmetic for floats */
template <typename A> struct roxi_arith {
	ROXA_FN A add(A a, A b) { return a + b; }
	ROXA_FN A mul(A a, A b) { return a * b; }
};
#define ROXI_WRAP(T, W)                                                                                           \
	template <> struct roxi_arith<T> {                                                                        \
		ROXA_FN T add(T a, T b) { return (T)((W)a + (W)b); }                                        \
		ROXA_FN T mul(T a, T b) { return (T)((W)a * (W)b); }                                        \
	};
ROXI_WRAP(char, unsigned int)
ROXI_WRAP(signed char, unsigned int)
ROXI_WRAP(unsigned char, unsigned int)
ROXI_WRAP(short, unsigned int)
ROXI_WRAP(unsigned short, unsigned int)
ROXI_WRAP(int, unsigned int)
ROXI_WRAP(unsigned int, unsigned int)
ROXI_WRAP(long, unsigned long long)
ROXI_WRAP(unsigned long, unsigned long long)
ROXI_WRAP(long long, unsigned long long)
ROXI_WRAP(unsigned long long, unsigned long long)

template <int OP, typename A> ROXA_FN A roxi_combine(A a, A b)
{
	switch (OP) {
	case ROXI_OP_SUM: return roxi_arith<A>::add(a, b);
	case ROXI_OP_PROD: return roxi_arith<A>::mul(a, b);
	case ROXI_OP_MIN: return b < a ? b : a;
	case ROXI_OP_MAX: return b > a ? b : a;
	default: return a; /* the bitwise ops: roxi_combine_bits */
	}
}
template <int OP, typename A> struct roxi_combiner {
	ROXA_FN A f(A a, A b) { return roxi_combine<OP, A>(a, b); }
};
#define ROXI_BITS_OPS(T)                                                                                          \
	template <> struct roxi_combiner<ROXI_OP_AND, T> {                                                        \
		ROXA_FN T f(T a, T b) { return (T)(a & b); }                                                \
	};                                                                                                        \
	template <> struct roxi_combiner<ROXI_OP_OR, T> {                                                         \
		ROXA_FN T f(T a, T b) { return (T)(a | b); }                                                \
	};                                                                                                        \
	template <> struct roxi_combiner<ROXI_OP_XOR, T> {                                                        \
		ROXA_FN T f(T a, T b) { return (T)(a ^ b); }                                                \
	};
ROXI_BITS_OPS(unsigned char)
ROXI_BITS_OPS(unsigned short)
ROXI_BITS_OPS(unsigned int)
ROXI_BITS_OPS(unsigned long)
ROXI_BITS_OPS(unsigned long long)
ROXI_BITS_OPS(signed char)
ROXI_BITS_OPS(short)
ROXI_BITS_OPS(int)
ROXI_BITS_OPS(long)
ROXI_BITS_OPS(long long)

/* U packets p, p+step, ... of member i's bytes at heap offset in_off (the own input plain, a
 * peer's system-coherent: one test per member, not per load) */
template <uint64_t U>
ROXA_FN void roxi_ld_packets(const struct roxi_team *tm, int i, uint64_t in_off, uint64_t p, uint32_t step, roxi_v4 *v)
{
	const uint8_t *in = (const uint8_t *)roxi_member(tm, i, in_off) + 16 * p;
	if (i == tm->me)
		for (uint64_t u = 0; u < U; u++)
			v[u] = roxi_ld16v<ROXA_MEM_PLAIN>(in + 16 * u * step);
	else
		for (uint64_t u = 0; u < U; u++)
			v[u] = roxi_ld16v<ROXA_MEM_BYPASS>(in + 16 * u * step);
}
/* acc[u] = v[u] (first) or op(acc[u], v[u]), element by element */
template <typename T, int OP, uint64_t U>
ROXA_FN void roxi_fold_packets(typename roxi_acc_of<T>::type (*acc)[16 / sizeof(T)], const roxi_v4 *v, int first)
{
	typedef roxi_acc_of<T> AC;
	typedef typename AC::type A;
	for (uint64_t u = 0; u < U; u++) {
		T x[16 / sizeof(T)];
		roxa_bytecopy(x, &v[u], 16);
		for (uint64_t k = 0; k < 16 / sizeof(T); k++)
			acc[u][k] = first ? AC::in(x[k]) : roxi_combiner<OP, A>::f(acc[u][k], AC::in(x[k]));
	}
}

/* dst[i] = the team-order reduction of member j's element i at heap offset in_off (i in [0, cnt)),
 * this thread taking 16-byte packets (or, unaligned, elements) idx, idx+step, ... */
template <typename T, int OP>
ROXI_COLD void roxi_reduce_range(T *dst, uint64_t in_off, uint64_t cnt, const struct roxi_team *tm, uint32_t idx,
				 uint32_t step, int st_mode)
{
	typedef roxi_acc_of<T> AC;
	typedef typename AC::type A;
	const uint64_t K = 16 / sizeof(T);
	uint64_t npk = ((in_off | (uint64_t)(uintptr_t)dst) & 15) == 0 ? cnt / K : 0;
	/* four packets at a time, two members at a time: eight 16-byte loads in flight a thread,
	 * folded in team order once they are in */
	const uint64_t U = 4;
	uint64_t p = idx;
	for (; p + (U - 1) * step < npk; p += U * step) {
		A acc[U][16 / sizeof(T)];
		for (int i = 0; i < tm->size; i += 2) {
			int two = i + 1 < tm->size;
			roxi_v4 va[U], vb[U];
			roxi_ld_packets<U>(tm, i, in_off, p, step, va);
			if (two)
				roxi_ld_packets<U>(tm, i + 1, in_off, p, step, vb);
			roxi_fold_packets<T, OP, U>(acc, va, i == 0);
			if (two)
				roxi_fold_packets<T, OP, U>(acc, vb, 0);
		}
		roxi_v4 o[U];
		for (uint64_t u = 0; u < U; u++) {
			T out[16 / sizeof(T)];
			for (uint64_t k = 0; k < K; k++)
				out[k] = AC::out(acc[u][k]);
			roxa_bytecopy(&o[u], out, 16);
		}
		uint8_t *d = (uint8_t *)(dst + K * p);
		if (st_mode == ROXA_MEM_BYPASS)
			for (uint64_t u = 0; u < U; u++)
				roxi_st16v<ROXA_MEM_BYPASS>(d + 16 * u * step, o[u]);
		else
			for (uint64_t u = 0; u < U; u++)
				roxi_st16v<ROXA_MEM_PLAIN>(d + 16 * u * step, o[u]);
	}
	for (; p < npk; p += step) {
		A acc[16 / sizeof(T)];
		for (int i = 0; i < tm->size; i++) {
			roxa_u128 v = roxa_ld16(roxi_member(tm, i, in_off + 16 * p), roxi_member_mode(tm, i));
			T x[16 / sizeof(T)];
			roxa_bytecopy(x, &v, 16);
			for (uint64_t k = 0; k < K; k++)
				acc[k] = i == 0 ? AC::in(x[k]) : roxi_combiner<OP, A>::f(acc[k], AC::in(x[k]));
		}
		T out[16 / sizeof(T)];
		for (uint64_t k = 0; k < K; k++)
			out[k] = AC::out(acc[k]);
		roxa_u128 o;
		roxa_bytecopy(&o, out, 16);
		roxa_st16(dst + K * p, &o, st_mode);
	}
	for (uint64_t e = npk * K + idx; e < cnt; e += step) {
		A acc = A();
		for (int i = 0; i < tm->size; i++) {
			const void *src = roxi_member(tm, i, in_off + e * sizeof(T));
			uint64_t bits = i == tm->me ? 0 : roxi_ld_width(src, sizeof(T));
			T x;
			if (i == tm->me)
				x = *(const T *)src;
			else
				roxa_bytecopy(&x, &bits, sizeof(T));
			acc = i == 0 ? AC::in(x) : roxi_combiner<OP, A>::f(acc, AC::in(x));
		}
		T o = AC::out(acc);
		if (st_mode == ROXA_MEM_BYPASS) {
			uint64_t bits = 0;
			roxa_bytecopy(&bits, &o, sizeof(T));
			roxi_st_width(dst + e, bits, sizeof(T));
		} else {
			dst[e] = o;
		}
	}
}

/* The reduction over the LL exchange: each member pushes its n elements to every member (scatter:
 * its block j of n elements to member j), and each thread folds 8-byte words (two lines) in team
 * order as the one-shot algorithm does, its own input (scatter: its own block) read in place. */
template <typename T, int OP>
ROXI_COLD int roxi_ll_reduce(const struct roxi_team *tm, T *dest, const T *source, uint64_t n, uint64_t sig, int g,
			     int scatter)
{
	typedef roxi_acc_of<T> AC;
	typedef typename AC::type A;
	const uint64_t bytes = n * sizeof(T), E = 8 / sizeof(T), lines = (bytes + 3) / 4;
	uint64_t r = roxi_next_round(tm);
	for (int k = 1; k < tm->size; k++) {
		int j = (tm->me + k) % tm->size;
		const T *block = scatter ? source + (uint64_t)j * n : source;
		roxi_ll_push(tm, j, r, sig, bytes, (const uint8_t *)block, sig == ROXI_SIG_BAD ? 0 : bytes, g);
	}
	if (scatter)
		source += (uint64_t)tm->me * n; /* the own block: dest may be it (read before written, by the same thread) */
	if (!roxi_ll_headers(tm, r, sig, bytes, g))
		return -1;
	int ok = 1;
	for (uint64_t w = roxi_gidx(g); w < (bytes + 7) / 8 && ok; w += roxi_gsize(g)) {
		A acc[8 / sizeof(T)];
		for (int i = 0; i < tm->size && ok; i++) {
			T x[8 / sizeof(T)];
			if (i == tm->me) {
				for (uint64_t e = 0; e < E; e++)
					x[e] = w * E + e < n ? source[w * E + e] : T();
			} else {
				uint64_t v = roxi_ll_wait2(tm, r, i, ROXI_LL_HDR + 2 * w, 2 * w + 1 < lines, &ok);
				roxa_bytecopy(x, &v, 8);
			}
			for (uint64_t e = 0; e < E; e++)
				acc[e] = i == 0 ? AC::in(x[e]) : roxi_combiner<OP, A>::f(acc[e], AC::in(x[e]));
		}
		if (ok)
			for (uint64_t e = 0; e < E && w * E + e < n; e++)
				dest[w * E + e] = AC::out(acc[e]);
	}
	return roxi_ll_verdict(tm, ok, g);
}

ROXA_FN int roxi_reduce_algo(uint64_t bytes, int size)
{
	const roxshmem_team_table_t *tt = roxi_team_table();
	uint32_t a = tt ? tt->coll_algo : ROXSHMEM_COLL_AUTO;
	if (a == ROXSHMEM_COLL_ONESHOT || a == ROXSHMEM_COLL_TWOSHOT)
		return size == 1 ? ROXSHMEM_COLL_ONESHOT : (int)a;
	uint64_t most = tt && tt->oneshot_max ? tt->oneshot_max : ROXSHMEM_COLL_ONESHOT_MAX;
	return bytes <= most || size == 1 ? ROXSHMEM_COLL_ONESHOT : ROXSHMEM_COLL_TWOSHOT;
}

/* the reduction every member ends with: in place when dest == source */
template <typename T, int OP>
ROXI_COLD int roxi_reduce(roxshmem_team_t team, T *dest, const T *source, uint64_t n, int g, uint32_t type)
{
	struct roxi_team tm;
	if (!roxi_coll_team(team, &tm, g))
		return -1;
	roxi_enter(&tm, g);
	const uint64_t sz = sizeof(T), bytes = n * sz;
	int algo = roxi_reduce_algo(bytes, tm.size);
	uint64_t sig = roxi_sig(ROXI_COLL_REDUCE, type, OP, (uint32_t)algo);
	uint64_t src_off = roxi_heap_off(source, bytes);
	uint32_t bad = src_off == ~0ull ? ROXSHMEM_CALL_BAD_ADDR : (dest != source && roxi_overlap(dest, bytes, source, bytes)) ? ROXSHMEM_CALL_BAD_ARG : 0;
	if (bad) {
		if (roxi_gidx(g) == 0)
			roxi_record(bad, roxshmem_state.my_pe, bad == ROXSHMEM_CALL_BAD_ADDR ? (uint32_t)(uintptr_t)source : ROXSHMEM_BAD_ARG_OVERLAP);
		sig = ROXI_SIG_BAD;
	}
	if (roxi_ll_ok(&tm, bytes))
		return roxi_ll_reduce<T, OP>(&tm, dest, source, n, sig == ROXI_SIG_BAD ? sig : roxi_sig(ROXI_COLL_REDUCE, type, OP, ROXI_ALGO_LL), g, 0);
	if (algo == ROXSHMEM_COLL_TWOSHOT && roxi_direct(&tm, g, &sig, bytes, source, bytes, 0)) {
		/* two-shot on the members' own buffers: member k reduces segment k of every member's
		 * source into its own dest (in place too: only member k writes segment k, and it reads
		 * each packet before it writes it), then every member reads the other segments from
		 * their owners' dests; a third round frees those dests */
		uint64_t dst_off = roxi_heap_off(dest, bytes);
		if (dst_off == ~0ull && sig != ROXI_SIG_BAD) {
			if (roxi_gidx(g) == 0)
				roxi_record(ROXSHMEM_CALL_BAD_ADDR, roxshmem_state.my_pe, (uint32_t)(uintptr_t)dest);
			sig = ROXI_SIG_BAD;
		}
		if (!roxi_round(&tm, g, ROXSHMEM_TEAM_WS_ARRIVE, sig, bytes, ROXI_CHECK_SIG_COUNT, 0, ROXSHMEM_CALL_COLL))
			return -1;
		const uint64_t K = 16 / sz;
		uint64_t s = ((n + (uint64_t)tm.size - 1) / (uint64_t)tm.size + K - 1) / K * K;
		uint64_t lo = (uint64_t)tm.me * s < n ? (uint64_t)tm.me * s : n, hi = lo + s < n ? lo + s : n;
		roxi_reduce_range<T, OP>(dest + lo, src_off + lo * sz, hi - lo, &tm, roxi_gidx(g), roxi_gsize(g), roxi_store_mode());
		if (!roxi_round(&tm, g, ROXSHMEM_TEAM_WS_READY, 0, 0, 0, 0, ROXSHMEM_CALL_COLL))
			return -1;
		for (int k = 1; k < tm.size; k++) {
			int i = (tm.me + k) % tm.size;
			uint64_t l = (uint64_t)i * s < n ? (uint64_t)i * s : n, h = l + s < n ? l + s : n;
			roxi_fetch(&tm, i, dest + l, dst_off + l * sz, (h - l) * sz, g);
		}
		return roxi_round(&tm, g, ROXSHMEM_TEAM_WS_ARRIVE, sig, bytes, ROXI_LAST, 0, ROXSHMEM_CALL_COLL) ? 0 : -1;
	}
	const uint64_t per = tm.half / sz; /* elements a scratch half holds (a multiple of 16 bytes) */
	uint64_t done = 0;
	do {
		uint64_t r = roxi_next_round(&tm), sc = roxi_scratch_off(&tm, r);
		if (algo == ROXSHMEM_COLL_ONESHOT) {
			uint64_t c = n - done < per ? n - done : per;
			if (sig != ROXI_SIG_BAD)
				roxi_stage(roxi_local(sc), source + done, c * sz, g);
			if (!roxi_round(&tm, g, ROXSHMEM_TEAM_WS_ARRIVE, sig, bytes, ROXI_CHECK_SIG_COUNT, 0, ROXSHMEM_CALL_COLL))
				return -1;
			roxi_reduce_range<T, OP>(dest + done, sc, c, &tm, roxi_gidx(g), roxi_gsize(g), ROXA_MEM_PLAIN);
			done += c;
		} else {
			/* this round covers [done, done + c): member k reduces segment k of s elements */
			uint64_t c = n - done < per * (uint64_t)tm.size ? n - done : per * (uint64_t)tm.size;
			const uint64_t K = 16 / sz;
			uint64_t s = (c + (uint64_t)tm.size - 1) / (uint64_t)tm.size;
			s = (s + K - 1) / K * K;
			if (!roxi_round(&tm, g, ROXSHMEM_TEAM_WS_ARRIVE, sig, bytes, ROXI_CHECK_SIG_COUNT, 0, ROXSHMEM_CALL_COLL))
				return -1;
			uint64_t lo = (uint64_t)tm.me * s < c ? (uint64_t)tm.me * s : c, hi = lo + s < c ? lo + s : c;
			roxi_reduce_range<T, OP>((T *)roxi_local(sc), src_off + (done + lo) * sz, hi - lo, &tm, roxi_gidx(g), roxi_gsize(g),
						 roxi_store_mode());
			if (!roxi_round(&tm, g, ROXSHMEM_TEAM_WS_READY, 0, 0, 0, 0, ROXSHMEM_CALL_COLL))
				return -1;
			for (int i = 0; i < tm.size; i++) {
				uint64_t l = (uint64_t)i * s < c ? (uint64_t)i * s : c, h = l + s < c ? l + s : c;
				roxi_fetch(&tm, i, dest + done + l, sc, (h - l) * sz, g);
			}
			done += c;
		}
	} while (done < n);
	roxi_tsync(&tm, g);
	return 0;
}

/* reduce-scatter: dest (n elements) = the reduction of segment me (source + me*n) over the members;
 * in place when dest == source + me*n. Reads the members' sources directly, then one more round
 * tells them this member is done reading. */
template <typename T, int OP>
ROXI_COLD int roxi_reduce_scatter(roxshmem_team_t team, T *dest, const T *source, uint64_t n, int g, uint32_t type)
{
	struct roxi_team tm;
	if (!roxi_coll_team(team, &tm, g))
		return -1;
	roxi_enter(&tm, g);
	const uint64_t sz = sizeof(T), all = n * sz * (uint64_t)tm.size;
	uint64_t sig = roxi_sig(ROXI_COLL_REDUCE_SCATTER, type, OP, 0);
	uint64_t src_off = roxi_heap_off(source, all);
	uint32_t bad = src_off == ~0ull ? ROXSHMEM_CALL_BAD_ADDR
		       : (dest != source + (uint64_t)tm.me * n && roxi_overlap(dest, n * sz, source, all)) ? ROXSHMEM_CALL_BAD_ARG
													 : 0;
	if (bad) {
		if (roxi_gidx(g) == 0)
			roxi_record(bad, roxshmem_state.my_pe, bad == ROXSHMEM_CALL_BAD_ADDR ? (uint32_t)(uintptr_t)source : ROXSHMEM_BAD_ARG_OVERLAP);
		sig = ROXI_SIG_BAD;
	}
	/* small blocks: one push of each block to its member, the flags in the data (every member
	 * decides alike from the block size; the signature names the exchange) */
	if (roxi_ll_ok(&tm, n * sz))
		return roxi_ll_reduce<T, OP>(&tm, dest, source, n,
					     sig == ROXI_SIG_BAD ? sig : roxi_sig(ROXI_COLL_REDUCE_SCATTER, type, OP, ROXI_ALGO_LL), g, 1);
	if (!roxi_round(&tm, g, ROXSHMEM_TEAM_WS_ARRIVE, sig, n * sz, ROXI_CHECK_SIG_COUNT, 0, ROXSHMEM_CALL_COLL))
		return -1;
	roxi_reduce_range<T, OP>(dest, src_off + (uint64_t)tm.me * n * sz, n, &tm, roxi_gidx(g), roxi_gsize(g), ROXA_MEM_PLAIN);
	return roxi_round(&tm, g, ROXSHMEM_TEAM_WS_READY, 0, 0, ROXI_LAST, 0, ROXSHMEM_CALL_COLL) ? 0 : -1;
}

/* a type's code in the call signature: size, float, signed, 16-bit float kind */
template <typename T> ROXA_FN uint32_t roxi_type_code(const T *)
{
	/* written so that no front end warns about a comparison of an unsigned value with zero */
	return (uint32_t)sizeof(T) | ((T)1 / (T)2 != (T)0 ? 0x10u : 0u) | ((T)-1 < (T)1 ? 0x20u : 0u);
}
ROXA_FN uint32_t roxi_type_code(const roxshmem_half_t *) { return 2 | 0x10 | 0x40; }
ROXA_FN uint32_t roxi_type_code(const roxshmem_bfloat16_t *) { return 2 | 0x10 | 0x80; }

/* ---- the API ------------------------------------------------------------------------------- */

ROXA_API int roxshmem_team_my_pe(roxshmem_team_t team)
{
	struct roxi_team tm;
	return roxi_team_lookup(team, &tm, 0) ? tm.me : -1;
}
ROXA_API int roxshmem_team_n_pes(roxshmem_team_t team)
{
	struct roxi_team tm;
	return roxi_team_lookup(team, &tm, 0) ? tm.size : -1;
}
/* the index in dest_team of src_team's member src_pe, or -1 (not a member, or a bad team) */
ROXA_API int roxshmem_team_translate_pe(roxshmem_team_t src_team, int src_pe, roxshmem_team_t dest_team)
{
	struct roxi_team a, b;
	if (!roxi_team_lookup(src_team, &a, 0) || !roxi_team_lookup(dest_team, &b, 0) || src_pe < 0 || src_pe >= a.size)
		return -1;
	int pe = roxi_team_pe(&a, src_pe) - b.start;
	if (pe < 0 || pe % b.stride != 0 || pe / b.stride >= b.size)
		return -1;
	return pe / b.stride;
}

/* barrier: this PE's operations are complete, then every member has arrived; sync: every member
 * has arrived (and this PE's stores are ordered before its announcement) */
ROXA_API int roxshmem_barrier(roxshmem_team_t team) { return roxi_team_barrier(team, ROXI_THREAD, 1); }
ROXA_API int roxshmem_team_sync(roxshmem_team_t team) { return roxi_team_barrier(team, ROXI_THREAD, 0); }
ROXA_API int roxshmemx_barrier_warp(roxshmem_team_t team) { return roxi_team_barrier(team, ROXI_WARP, 1); }
ROXA_API int roxshmemx_team_sync_warp(roxshmem_team_t team) { return roxi_team_barrier(team, ROXI_WARP, 0); }
ROXA_API int roxshmemx_barrier_block(roxshmem_team_t team) { return roxi_team_barrier(team, ROXI_BLOCK, 1); }
ROXA_API int roxshmemx_team_sync_block(roxshmem_team_t team) { return roxi_team_barrier(team, ROXI_BLOCK, 0); }

/* byte forms (nelems: bytes; PE_root: the root's index in the team) */
#define ROXI_COLL_MEM(SUFFIX, G)                                                                                        \
	ROXA_API int roxshmem##SUFFIX##_broadcastmem(roxshmem_team_t team, void *dest, const void *source, size_t nelems, int PE_root) \
	{                                                                                                               \
		return roxi_broadcast(team, dest, source, nelems, PE_root, G, 0);                                        \
	}                                                                                                               \
	ROXA_API int roxshmem##SUFFIX##_fcollectmem(roxshmem_team_t team, void *dest, const void *source, size_t nelems) \
	{                                                                                                               \
		return roxi_fcollect(team, dest, source, nelems, G, 0);                                                  \
	}                                                                                                               \
	ROXA_API int roxshmem##SUFFIX##_collectmem(roxshmem_team_t team, void *dest, const void *source, size_t nelems)  \
	{                                                                                                               \
		return roxi_collect(team, dest, source, nelems, G, 0);                                                   \
	}                                                                                                               \
	ROXA_API int roxshmem##SUFFIX##_alltoallmem(roxshmem_team_t team, void *dest, const void *source, size_t nelems) \
	{                                                                                                               \
		return roxi_alltoall(team, dest, source, nelems, G, 0);                                                  \
	}
ROXI_COLL_MEM(, ROXI_THREAD)
/* the group forms: roxshmemx_broadcastmem_warp, ..._block */
#define ROXI_COLL_MEM_G(NAME, ARGS, CALL)                                                                               \
	ROXA_API int roxshmemx_##NAME##_warp ARGS { return CALL(ROXI_WARP); }                                            \
	ROXA_API int roxshmemx_##NAME##_block ARGS { return CALL(ROXI_BLOCK); }
#define ROXI_BCAST_CALL(G) roxi_broadcast(team, dest, source, nelems, PE_root, G, 0)
#define ROXI_FCOLLECT_CALL(G) roxi_fcollect(team, dest, source, nelems, G, 0)
#define ROXI_COLLECT_CALL(G) roxi_collect(team, dest, source, nelems, G, 0)
#define ROXI_ALLTOALL_CALL(G) roxi_alltoall(team, dest, source, nelems, G, 0)
ROXI_COLL_MEM_G(broadcastmem, (roxshmem_team_t team, void *dest, const void *source, size_t nelems, int PE_root), ROXI_BCAST_CALL)
ROXI_COLL_MEM_G(fcollectmem, (roxshmem_team_t team, void *dest, const void *source, size_t nelems), ROXI_FCOLLECT_CALL)
ROXI_COLL_MEM_G(collectmem, (roxshmem_team_t team, void *dest, const void *source, size_t nelems), ROXI_COLLECT_CALL)
ROXI_COLL_MEM_G(alltoallmem, (roxshmem_team_t team, void *dest, const void *source, size_t nelems), ROXI_ALLTOALL_CALL)

/* typed forms over the standard RMA types (nelems: elements), at one group level: the name's
 * prefix and suffix, the group (the thread forms roxshmem_TYPE_broadcast..., the block forms
 * roxshmemx_TYPE_broadcast_block...) */
#define ROXI_COLL_TYPED_AT(NAME, T, PFX, SFX, G)                                                                        \
	ROXA_API int PFX##_##NAME##_broadcast##SFX(roxshmem_team_t team, T *dest, const T *source, size_t nelems, int PE_root) \
	{                                                                                                               \
		return roxi_broadcast(team, dest, source, nelems * sizeof(T), PE_root, G, roxi_type_code((const T *)0));         \
	}                                                                                                               \
	ROXA_API int PFX##_##NAME##_fcollect##SFX(roxshmem_team_t team, T *dest, const T *source, size_t nelems)        \
	{                                                                                                               \
		return roxi_fcollect(team, dest, source, nelems * sizeof(T), G, roxi_type_code((const T *)0));                   \
	}                                                                                                               \
	ROXA_API int PFX##_##NAME##_collect##SFX(roxshmem_team_t team, T *dest, const T *source, size_t nelems)         \
	{                                                                                                               \
		return roxi_collect(team, dest, source, nelems * sizeof(T), G, roxi_type_code((const T *)0));                    \
	}                                                                                                               \
	ROXA_API int PFX##_##NAME##_alltoall##SFX(roxshmem_team_t team, T *dest, const T *source, size_t nelems)        \
	{                                                                                                               \
		return roxi_alltoall(team, dest, source, nelems * sizeof(T), G, roxi_type_code((const T *)0));                   \
	}
#define ROXI_COLL_TYPED(NAME, T) ROXI_COLL_TYPED_AT(NAME, T, roxshmem, , ROXI_THREAD) ROXI_COLL_TYPED_AT(NAME, T, roxshmemx, _block, ROXI_BLOCK)
ROXI_RMA_TYPES(ROXI_COLL_TYPED)

/* reductions: roxshmem_TYPE_OP_reduce (every member gets the result), roxshmemx_TYPE_OP_reduce_scatter
 * (member i gets segment i; source holds n_pes * nelems elements), at thread, warp and block level.
 * ROXI_REDUCE_FN is one of them: API's name, roxi_reduce or roxi_reduce_scatter (FN), the count's
 * name (N), the group (G). */
#define ROXI_REDUCE_FN(API, FN, T, OP, N, G)                                                                            \
	ROXA_API int API(roxshmem_team_t team, T *dest, const T *source, size_t N)                                       \
	{                                                                                                               \
		return FN<T, OP>(team, dest, source, N, G, roxi_type_code((const T *)0));                                      \
	}
#define ROXI_REDUCE(NAME, T, OPNAME, OP)                                                                                \
	ROXI_REDUCE_FN(roxshmem_##NAME##_##OPNAME##_reduce, roxi_reduce, T, OP, nreduce, ROXI_THREAD)                   \
	ROXI_REDUCE_FN(roxshmemx_##NAME##_##OPNAME##_reduce_warp, roxi_reduce, T, OP, nreduce, ROXI_WARP)               \
	ROXI_REDUCE_FN(roxshmemx_##NAME##_##OPNAME##_reduce_block, roxi_reduce, T, OP, nreduce, ROXI_BLOCK)             \
	ROXI_REDUCE_FN(roxshmemx_##NAME##_##OPNAME##_reduce_scatter, roxi_reduce_scatter, T, OP, nelems, ROXI_THREAD)   \
	ROXI_REDUCE_FN(roxshmemx_##NAME##_##OPNAME##_reduce_scatter_warp, roxi_reduce_scatter, T, OP, nelems, ROXI_WARP) \
	ROXI_REDUCE_FN(roxshmemx_##NAME##_##OPNAME##_reduce_scatter_block, roxi_reduce_scatter, T, OP, nelems, ROXI_BLOCK)

/* OpenSHMEM 1.5 "Reduction types": bitwise over the unsigned and fixed-width integers; min, max,
 * sum and prod over the integers and real floats (long double and the complex types excluded) */
#define ROXI_BITWISE_TYPES(X)                                                                                           \
	X(uchar, unsigned char) X(ushort, unsigned short) X(uint, unsigned int) X(ulong, unsigned long)                    \
	X(ulonglong, unsigned long long) X(int8, int8_t) X(int16, int16_t) X(int32, int32_t) X(int64, int64_t)           \
	X(uint8, uint8_t) X(uint16, uint16_t) X(uint32, uint32_t) X(uint64, uint64_t) X(size, size_t)
#define ROXI_ARITH_TYPES(X)                                                                                             \
	X(char, char) X(schar, signed char) X(short, short) X(int, int) X(long, long) X(longlong, long long)               \
	X(ptrdiff, ptrdiff_t) X(uchar, unsigned char) X(ushort, unsigned short) X(uint, unsigned int)                      \
	X(ulong, unsigned long) X(ulonglong, unsigned long long) X(int8, int8_t) X(int16, int16_t) X(int32, int32_t)      \
	X(int64, int64_t) X(uint8, uint8_t) X(uint16, uint16_t) X(uint32, uint32_t) X(uint64, uint64_t) X(size, size_t)  \
	X(float, float) X(double, double)
/* extensions: fp16 and bf16, accumulated in fp32 */
#define ROXI_HALF_TYPES(X) X(half, roxshmem_half_t) X(bfloat16, roxshmem_bfloat16_t)

#define ROXI_BITWISE_OPS(NAME, T) ROXI_REDUCE(NAME, T, and, ROXI_OP_AND) ROXI_REDUCE(NAME, T, or, ROXI_OP_OR) ROXI_REDUCE(NAME, T, xor, ROXI_OP_XOR)
#define ROXI_ARITH_OPS(NAME, T)                                                                                         \
	ROXI_REDUCE(NAME, T, sum, ROXI_OP_SUM) ROXI_REDUCE(NAME, T, prod, ROXI_OP_PROD)                                 \
	ROXI_REDUCE(NAME, T, min, ROXI_OP_MIN) ROXI_REDUCE(NAME, T, max, ROXI_OP_MAX)
#define ROXI_HALF_OPS(NAME, T) ROXI_REDUCE(NAME, T, sum, ROXI_OP_SUM) ROXI_REDUCE(NAME, T, min, ROXI_OP_MIN) ROXI_REDUCE(NAME, T, max, ROXI_OP_MAX)
ROXI_BITWISE_TYPES(ROXI_BITWISE_OPS)
ROXI_ARITH_TYPES(ROXI_ARITH_OPS)
ROXI_HALF_TYPES(ROXI_HALF_OPS)

#endif /* ROXA_GPU_LANG */
#endif /* ROXAMEN_COLL_H */
