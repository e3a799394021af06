/* roxshmem_state: the device view of one PE, one __constant__ global per code object that includes
 * roxshmem.h. The host runtime (shmem) finds the symbol "roxshmem_state" in every module it loads
 * and fills it before any kernel of that module runs; kernels only read it. It lives in constant
 * memory so that its loads hit the constant cache, which the system-scope fences and acquires of
 * every call do not invalidate (a __device__ global is reloaded from L2 after each of them: about
 * 0.6 us of a p + wait_until round trip on H200). The one device-written word, the producers'
 * cached ring tail, is the separate __device__ global roxshmem_ring_tail_cache.
 * Mirrored in Go by kernels.State (kernels/state.go); TestStateParity compiles this header and
 * compares the size and every offset. Change both, and bump ROXSHMEM_STATE_VERSION. */
#ifndef ROXAMEN_STATE_H
#define ROXAMEN_STATE_H

#include "types.h"

#define ROXSHMEM_STATE_MAGIC 0x314d454d53584f52ull /* "ROXSMEM1" little-endian */
#define ROXSHMEM_STATE_VERSION 3u /* 2: teams (the team table); 3: contexts (the context table) */
#define ROXSHMEM_MAX_PES 64

/* flags */
#define ROXSHMEM_FLAG_BYPASS 0x1u     /* ordering: CacheBypass mode (else Strict) */
#define ROXSHMEM_FLAG_RING_FENCE 0x2u /* the ring reaches only PEs that load/store never reaches:
                                         fence publishes an OpFence descriptor instead of waiting
                                         for outstanding ring operations */
#define ROXSHMEM_FLAG_HOST_AMO 0x4u   /* this PE's heap is host memory whose remote AMOs the CPU
                                         applies, and this device's atomics there are not atomic
                                         with the CPU's (no host-native atomics over PCIe): AMOs
                                         and signal adds to this PE go through the ring too, so
                                         one agent applies every read-modify-write of the heap */

/* The barrier workspace, at heap offset barrier_off in every PE's heap (ROXSHMEM_BARRIER_BYTES). */
#define ROXSHMEM_BARRIER_ROUND 0        /* uint64: barriers this PE has entered (own use) */
#define ROXSHMEM_BARRIER_GRID_COUNT 8   /* uint64: blocks arrived at the grid barrier (own use) */
#define ROXSHMEM_BARRIER_GRID_GEN 16    /* uint64: grid barrier generation (own use) */
#define ROXSHMEM_BARRIER_SYNC_ROUND 24  /* uint64: sync_all rounds (own use) */
#define ROXSHMEM_BARRIER_ARRIVE 64      /* uint64[MAX_PES]: round each PE last announced here */
#define ROXSHMEM_BARRIER_SYNC_ARRIVE (64 + 8 * ROXSHMEM_MAX_PES) /* uint64[MAX_PES]: sync_all */
#define ROXSHMEM_BARRIER_BYTES (64 + 16 * ROXSHMEM_MAX_PES)

typedef struct roxshmem_state {
	uint64_t magic;           /* ROXSHMEM_STATE_MAGIC once filled */
	uint32_t version;         /* ROXSHMEM_STATE_VERSION */
	uint32_t flags;           /* ROXSHMEM_FLAG_* */
	int32_t my_pe;
	int32_t n_pes;
	uint64_t heap_base;       /* device address of this PE's symmetric heap */
	uint64_t heap_size;
	uint64_t ce_threshold;    /* puts/gets of at least this many bytes to a mapped peer take the
	                             copy engine; 0: only the _ce calls do */
	uint64_t ring;            /* device address of the command ring (header + descriptors); 0: none */
	uint32_t ring_capacity;   /* descriptors, a power of two */
	uint32_t pad0;
	uint64_t ring_head;       /* device address of the ticket counter: &ring->head, or a device-local
	                             word when the runtime keeps tickets off the host bus; 0: &ring->head */
	uint64_t ring_results;    /* device address of uint64[ring_capacity]: where a get or fetching AMO
	                             issued through the ring for ticket t lands (slot t & (cap-1)) */
	uint64_t completion;      /* device address of a device-local mirror of ring->completed that the
	                             proxy keeps current; 0: poll ring->completed */
	uint64_t abort;           /* device address of a roxshmem_abort block; 0: waits cannot abort */
	uint64_t barrier_off;     /* heap offset of the barrier workspace (ROXSHMEM_BARRIER_BYTES) */
	uint64_t ctxs;            /* device address of the roxshmem_ctx_table (below): the rings of the
	                             device contexts; 0: none (roxshmem_ctx_create fails) */
	uint64_t sdma;            /* device address of the roxshmem_sdma table (sdma.h): the device-written
	                             SDMA queues of the AMD copy engines; 0: none */
	uint64_t teams;           /* device address of the roxshmem_team_table (below) the host fills; 0: no
	                             table (team queries on ROXSHMEM_TEAM_WORLD still work from this state,
	                             team collectives record ROXSHMEM_CALL_BAD_TEAM) */
	uint64_t peer_base[ROXSHMEM_MAX_PES]; /* device address of PE i's heap as this GPU can load and
	                                         store it; 0: not load/store reachable (NIC path) */
} roxshmem_state_t;

ROXA_STATIC_ASSERT(sizeof(roxshmem_state_t) == 128 + 8 * ROXSHMEM_MAX_PES, state_size);

/* ---- teams --------------------------------------------------------------------------------------
 * A team is a strided set of world PEs (start, stride, size), as shmem_team_split_strided makes.
 * Kernels name a team by its handle, an index into this table (roxshmem_team_t); the host writes
 * the table (device-visible memory: device memory or host-mapped) before kernels use a team, and
 * clears a slot's size when the team is destroyed. Slot 0 is the world team, slot 1 the PEs of
 * this node (ROXSHMEM_TEAM_SHARED). Mirrored in Go by kernels.TeamTable (TestTeamParity). */
#define ROXSHMEM_TEAM_MAGIC 0x314d414554584f52ull /* "ROXTEAM1" little-endian */
#define ROXSHMEM_MAX_TEAMS 64 /* live teams per job, world and shared included */
#define ROXSHMEM_TEAM_WORLD 0
#define ROXSHMEM_TEAM_SHARED 1
#define ROXSHMEM_TEAM_INVALID (-1)

/* roxshmem_team_table.coll_algo: which algorithm the reductions take (ROX_COLL_ALGO) */
#define ROXSHMEM_COLL_AUTO 0    /* one-shot up to oneshot_max bytes, two-shot above */
#define ROXSHMEM_COLL_ONESHOT 1
#define ROXSHMEM_COLL_TWOSHOT 2
#define ROXSHMEM_COLL_ONESHOT_MAX 65536 /* oneshot_max when the host leaves it 0 */

/* A team's collective workspace, at heap offset ws_off in every member's heap (ws_bytes, zeroed at
 * creation, at least ROXSHMEM_TEAM_WS_MIN). Every collective step is a round: a member stages its
 * contribution in its own scratch half (round & 1), writes its call signature, and announces the
 * round to every member (ARRIVE, release); then it waits for every member's announcement
 * (acquire) and reads what it needs from the members' heaps. Two halves: a member stages round
 * r+2 only after it saw every member announce r+1, i.e. after they finished reading round r. */
#define ROXSHMEM_TEAM_WS_ROUND 0    /* uint64: rounds this PE has entered on the team (own use) */
#define ROXSHMEM_TEAM_WS_STATUS 8   /* uint64: the group leader's verdict for the current round (own use) */
#define ROXSHMEM_TEAM_WS_AUX 16     /* uint64[4]: values the leader shares with its group (own use) */
#define ROXSHMEM_TEAM_WS_GRID 48    /* uint64[2]: the blocks of a grid collective meet here: arrivals, generation (own use) */
#define ROXSHMEM_TEAM_WS_SIG 64     /* uint64[2]: this PE's call signature, per half (members read it) */
#define ROXSHMEM_TEAM_WS_COUNT 80   /* uint64[2]: this PE's contribution in bytes (collectmem), per half */
#define ROXSHMEM_TEAM_WS_ARRIVE 128 /* uint64[MAX_PES]: round member i last announced (by team index) */
#define ROXSHMEM_TEAM_WS_READY (128 + 8 * ROXSHMEM_MAX_PES) /* uint64[MAX_PES]: second phase (two-shot) */
#define ROXSHMEM_TEAM_WS_DATA 2048  /* scratch: two halves of (ws_bytes - 2048) / 2, 16-byte aligned */
#define ROXSHMEM_TEAM_WS_MIN (ROXSHMEM_TEAM_WS_DATA + 2 * 4096)

typedef struct roxshmem_team_desc {
	int32_t start;    /* world PE of team index 0 */
	int32_t stride;   /* >= 1 */
	int32_t size;     /* members; 0: free slot */
	int32_t my_index; /* this PE's index in the team; -1: not a member */
	uint64_t ws_off;  /* heap offset of the workspace (the same on every member) */
	uint64_t ws_bytes;
	uint64_t pad[4];
} roxshmem_team_desc_t;

typedef struct roxshmem_team_table {
	uint64_t magic;       /* ROXSHMEM_TEAM_MAGIC once filled */
	uint32_t n_teams;     /* slots below this may be in use */
	uint32_t coll_algo;   /* ROXSHMEM_COLL_* */
	uint64_t oneshot_max; /* AUTO: reductions of at most this many bytes take one-shot; 0: the default */
	uint64_t pad[5];
	roxshmem_team_desc_t team[ROXSHMEM_MAX_TEAMS];
} roxshmem_team_table_t;

ROXA_STATIC_ASSERT(sizeof(roxshmem_team_desc_t) == 64, team_desc_size);
ROXA_STATIC_ASSERT(sizeof(roxshmem_team_table_t) == 64 + 64 * ROXSHMEM_MAX_TEAMS, team_table_size);

/* ---- contexts ----------------------------------------------------------------------------------
 * A device context (roxshmem_ctx_t) is a handle: ROXSHMEM_CTX_DEFAULT (0) is the state's ring;
 * handle h >= 1 is slot h-1 of this table, a ring of its own with its own completed count, so that
 * a quiet on one context waits for that context's ring traffic only. The host fills ring, head,
 * results, completion and capacity of n_ctxs slots (device-visible, device-writable memory) before
 * any kernel runs; roxshmem_ctx_create claims a free slot (in_use 0 -> 1, compare-and-swap) and
 * roxshmem_ctx_destroy frees it after a quiet on it. Mirrored in Go by kernels.CtxTable
 * (TestCtxParity). */
#define ROXSHMEM_CTX_MAGIC 0x3158544358584f52ull /* "ROXXCTX1" little-endian */
#define ROXSHMEM_MAX_CTXS 16 /* device contexts per PE besides the default one */
#define ROXSHMEM_CTX_DEFAULT 0
#define ROXSHMEM_CTX_INVALID (-1)
typedef int32_t roxshmem_ctx_t;
/* options of roxshmem_ctx_create (OpenSHMEM's): accepted; every context is a ring of its own that
 * any thread may use, so none of them changes what a context does */
#define ROXSHMEM_CTX_SERIALIZED 0x1
#define ROXSHMEM_CTX_PRIVATE 0x2
#define ROXSHMEM_CTX_NOSTORE 0x4

typedef struct roxshmem_ctx_desc {
	uint64_t ring;       /* device address of the context's ring (header + descriptors) */
	uint64_t head;       /* device address of its ticket counter; 0: &ring->head */
	uint64_t results;    /* device address of uint64[capacity]: get / fetched-AMO result slots */
	uint64_t completion; /* device address of a device-local mirror of ring->completed; 0: poll it */
	uint32_t capacity;   /* descriptors, a power of two */
	uint32_t in_use;     /* device-written: 1 while a kernel holds the context */
	uint64_t tail_cache; /* device-written: the producers' cached copy of ring->tail */
	uint64_t pad[2];
} roxshmem_ctx_desc_t;

typedef struct roxshmem_ctx_table {
	uint64_t magic;  /* ROXSHMEM_CTX_MAGIC once filled */
	uint32_t n_ctxs; /* slots the host filled (at most ROXSHMEM_MAX_CTXS) */
	uint32_t pad0;
	uint64_t pad[6];
	roxshmem_ctx_desc_t ctx[ROXSHMEM_MAX_CTXS];
} roxshmem_ctx_table_t;

ROXA_STATIC_ASSERT(sizeof(roxshmem_ctx_desc_t) == 64, ctx_desc_size);
ROXA_STATIC_ASSERT(sizeof(roxshmem_ctx_table_t) == 64 + 64 * ROXSHMEM_MAX_CTXS, ctx_table_size);

/* The abort block (64 bytes, host-pinned and device-mapped, or device memory the host writes).
 * The host sets word when the job cannot proceed (a peer died, the proxy failed); every device wait
 * then returns, and the first one records why in first (CAS from 0), and all of them bump count. */
typedef struct roxshmem_abort {
	uint64_t word;  /* host-written: nonzero = abort; the value is the host's reason code */
	uint64_t first; /* device-written: ROXSHMEM_ABORT_RECORD of the first wait that gave up */
	uint64_t count; /* device-written: number of waits that gave up */
	uint64_t pad[5];
} roxshmem_abort_t;

ROXA_STATIC_ASSERT(sizeof(roxshmem_abort_t) == 64, abort_size);

/* Record format: bit 63 set, call in bits 48..55, PE (or 0xffff) in bits 32..47, detail in 0..31. */
#define ROXSHMEM_ABORT_RECORD(call, pe, detail)                                                    \
	((1ull << 63) | ((uint64_t)((call)&0xff) << 48) | ((uint64_t)((pe)&0xffff) << 32) |         \
	 (uint64_t)(uint32_t)(detail))

/* Calls named in a record. */
#define ROXSHMEM_CALL_WAIT_UNTIL 1
#define ROXSHMEM_CALL_SIGNAL_WAIT_UNTIL 2
#define ROXSHMEM_CALL_QUIET 3
#define ROXSHMEM_CALL_BARRIER 4
#define ROXSHMEM_CALL_RING 5   /* waiting for a free ring slot or for one operation's completion */
#define ROXSHMEM_CALL_FENCE 6
#define ROXSHMEM_CALL_SYNC 7
#define ROXSHMEM_CALL_SDMA 8   /* waiting for SDMA ring space, an earlier producer's commit, or completion */
#define ROXSHMEM_CALL_COLL 9   /* a team collective waiting for a member (the record names it) */
#define ROXSHMEM_CALL_BAD_PE 0x80    /* not a wait: a call named a PE out of range (skipped) */
#define ROXSHMEM_CALL_BAD_ADDR 0x81  /* not a wait: an address outside the symmetric heap */
#define ROXSHMEM_CALL_NO_ROUTE 0x82  /* not a wait: the PE needs the ring and there is none */
#define ROXSHMEM_CALL_BAD_TEAM 0x83  /* not a wait: a team handle that names no live team of this PE
                                        (detail: the handle) */
#define ROXSHMEM_CALL_COLL_MISMATCH 0x84 /* a member called a different collective, type, size, op
                                            or root in the same round (pe: that member; detail:
                                            low 32 bits of its signature); nothing was written */
#define ROXSHMEM_CALL_BAD_ARG 0x85   /* not a wait: a collective's argument is invalid (root
                                        outside the team, overlapping buffers; detail says which) */
#define ROXSHMEM_CALL_BAD_CTX 0x86   /* not a wait: a context handle that names no live context
                                        (destroyed, never created; detail: the handle); skipped */
#define ROXSHMEM_BAD_ARG_ROOT 1       /* details of ROXSHMEM_CALL_BAD_ARG */
#define ROXSHMEM_BAD_ARG_OVERLAP 2
#define ROXSHMEM_BAD_ARG_WORKSPACE 3
#define ROXSHMEM_BAD_ARG_NOT_MAPPED 4 /* a member's heap is not load/store reachable */

/* Detail of a wait record: which word ended it. */
#define ROXSHMEM_DETAIL_ABORT_WORD 0x10000000u /* | low 16 bits of the abort word */
#define ROXSHMEM_DETAIL_RING_ERROR 0x20000000u /* | the ring's error code */

#ifdef ROXA_GPU_LANG
/* The one state of this code object. A module built from several translation units with -fgpu-rdc
 * defines ROXSHMEM_STATE_EXTERN in all but one. */
#ifdef ROXSHMEM_STATE_EXTERN
extern "C" __constant__ roxshmem_state_t roxshmem_state; /* declarations */
extern "C" __device__ uint64_t roxshmem_ring_tail_cache;
#else
#ifdef __NVCC__
/* nvcc keeps every externally visible __device__ variable (the host may name it) */
#define ROXA_STATE_ATTR __attribute__((aligned(64)))
#else
#define ROXA_STATE_ATTR __attribute__((used, aligned(64)))
#endif
extern "C" {
__constant__ ROXA_STATE_ATTR roxshmem_state_t roxshmem_state;
/* producers' cached copy of ring->tail (device-written; only ever lags the tail, starts at 0) */
__device__ ROXA_STATE_ATTR uint64_t roxshmem_ring_tail_cache;
}
#endif
#endif

#endif /* ROXAMEN_STATE_H */
