/* roxamen.h: the C API of Roxamen's shared library, libroxamen.so, built from the Go runtime with
 *
 *     CGO_ENABLED=1 go build -buildmode=c-shared -o libroxamen.so ./capi
 *
 * and linked with `gcc prog.c -Iinclude -L. -lroxamen`. Run the program under roxrun (or mpirun,
 * srun, torchrun) as any Roxamen job: `roxrun -n 4 ./prog`.
 *
 * Conventions. Every call that can fail returns 0 or a ROXAMEN_ERR_* code; roxamen_error_message()
 * then gives the runtime's text, naming the call, the PE and the bad value ("shmem: Put on PE 0:
 * PE out of range: target PE 7, want 0 <= pe < 4"). The message is per thread and kept until the
 * thread's next failing call (as errno). Symmetric objects are named by address, as in
 * OpenSHMEM: any address inside a live allocation of roxamen_malloc/calloc (a host address on
 * the host backend, a device address on a GPU World); local source and destination buffers are
 * host memory. Teams, contexts and ep buffers are small integer handles; a stream is the vendor's
 * (cudaStream_t, hipStream_t). Blocking calls
 * are bounded: a wait or collective fails with ROXAMEN_ERR_TIMEOUT after ROX_TIMEOUT, and with
 * ROXAMEN_ERR_PE_FAILED as soon as the job knows a PE it needs has died.
 */
#ifndef ROXAMEN_H
#define ROXAMEN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Error codes: the kinds of the Go errors (shmem.Err*, ep.Err*). */
enum {
	ROXAMEN_SUCCESS = 0,
	ROXAMEN_ERR_OTHER,
	ROXAMEN_ERR_NOT_INITIALIZED,
	ROXAMEN_ERR_FINALIZED,
	ROXAMEN_ERR_PE_RANGE,
	ROXAMEN_ERR_BOUNDS,
	ROXAMEN_ERR_NOT_SYMMETRIC,
	ROXAMEN_ERR_MISALIGNED,
	ROXAMEN_ERR_BAD_ARGUMENT,
	ROXAMEN_ERR_MISMATCH,
	ROXAMEN_ERR_PE_FAILED,
	ROXAMEN_ERR_TIMEOUT,
	ROXAMEN_ERR_OUT_OF_MEMORY,
	ROXAMEN_ERR_FREED,
	ROXAMEN_ERR_CONCURRENT,
	ROXAMEN_ERR_INITIALIZED,
	ROXAMEN_ERR_TEAM_DESTROYED,
	ROXAMEN_ERR_NOT_IN_TEAM,
	ROXAMEN_ERR_NOT_SUPPORTED,
	ROXAMEN_ERR_EXPERT_RANGE,
	ROXAMEN_ERR_TOO_MANY_TOKENS,
	ROXAMEN_ERR_SHAPE,
};

/* Element types of atomics and collectives. */
enum {
	ROXAMEN_UINT8 = 0, ROXAMEN_INT8, ROXAMEN_INT16, ROXAMEN_UINT16, ROXAMEN_INT32, ROXAMEN_UINT32,
	ROXAMEN_INT64, ROXAMEN_UINT64, ROXAMEN_FLOAT32, ROXAMEN_FLOAT64, ROXAMEN_BFLOAT16, ROXAMEN_FLOAT16,
};

/* Reduction operators. */
enum { ROXAMEN_SUM = 1, ROXAMEN_PROD, ROXAMEN_MIN, ROXAMEN_MAX, ROXAMEN_AND, ROXAMEN_OR, ROXAMEN_XOR };

/* Atomic operations (roxamen_atomic): INT32/UINT32/INT64/UINT64 take all of them, FLOAT32/FLOAT64
 * fetch, set and swap; contexts (roxamen_ctx_atomic) carry fetch, set, swap, compare_swap,
 * fetch_add and add. */
enum {
	ROXAMEN_AMO_FETCH = 0, ROXAMEN_AMO_SET, ROXAMEN_AMO_SWAP, ROXAMEN_AMO_COMPARE_SWAP,
	ROXAMEN_AMO_FETCH_ADD, ROXAMEN_AMO_ADD, ROXAMEN_AMO_FETCH_INC, ROXAMEN_AMO_INC,
	ROXAMEN_AMO_FETCH_AND, ROXAMEN_AMO_AND, ROXAMEN_AMO_FETCH_OR, ROXAMEN_AMO_OR,
	ROXAMEN_AMO_FETCH_XOR, ROXAMEN_AMO_XOR,
};

/* Comparisons (SHMEM_CMP_*) and signal operations (SHMEM_SIGNAL_*). */
enum { ROXAMEN_CMP_EQ = 0, ROXAMEN_CMP_NE, ROXAMEN_CMP_GT, ROXAMEN_CMP_GE, ROXAMEN_CMP_LT, ROXAMEN_CMP_LE };
enum { ROXAMEN_SIGNAL_SET = 0, ROXAMEN_SIGNAL_ADD = 1 };

/* Context options (SHMEM_CTX_*). */
enum { ROXAMEN_CTX_SERIALIZED = 1, ROXAMEN_CTX_PRIVATE = 2, ROXAMEN_CTX_NOSTORE = 4 };

typedef int roxamen_team_t;
enum { ROXAMEN_TEAM_INVALID = -1, ROXAMEN_TEAM_WORLD = 0, ROXAMEN_TEAM_SHARED = 1 };
typedef int roxamen_ctx_t;
typedef void *roxamen_stream_t;  /* a cudaStream_t / hipStream_t (see the stream-ordered calls) */
typedef int roxamen_ep_t;        /* an ep buffer */
typedef int roxamen_ep_handle_t; /* a dispatch's routing, for its combine */

/* ep payload types and modes (shmem/ep's DType and Mode). */
enum { ROXAMEN_EP_BF16 = 0, ROXAMEN_EP_F32 = 1 };
enum { ROXAMEN_EP_NORMAL = 0, ROXAMEN_EP_LOW_LATENCY = 1 };

/* A unique id (TOKEN@HOST:PORT) fits in this many bytes. */
#define ROXAMEN_UNIQUE_ID_BYTES 128

/* The thread's last error message ("" when none) and code (for the calls that return a pointer
 * or -1: roxamen_malloc, roxamen_calloc, roxamen_ptr...). */
const char *roxamen_error_message(void);
int roxamen_error_code(void);

/* Setup. roxamen_init joins the job the launcher started (roxrun, mpirun/PMIx, srun, torchrun; a
 * lone process is a 1-PE job). Without a launcher: one process calls roxamen_get_unique_id, sends
 * the id to the others by any means (it holds a random token: keep it within the job), and every
 * process calls roxamen_init_with_unique_id(id, its rank, the job size); rank 0 hosts the
 * rendezvous at the id's address. */
extern int roxamen_init(void);
extern int roxamen_get_unique_id(char *buf, size_t n);
extern int roxamen_init_with_unique_id(char *uid, int rank, int npes);
extern int roxamen_finalize(void);
extern int roxamen_my_pe(void);  /* -1 before init */
extern int roxamen_n_pes(void);  /* -1 before init */
extern int roxamen_on_gpu(void); /* 1: symmetric memory is device memory (a GPU World) */

/* Symmetric memory (collective: every PE allocates and frees the same sizes in the same order).
 * NULL on error (or for 0 bytes). roxamen_ptr: pe's copy of p for loads and stores, NULL when
 * pe's heap is not mapped here (another node) or on a GPU World. */
extern void *roxamen_malloc(size_t size);
extern void *roxamen_calloc(size_t n, size_t size);
extern int roxamen_free(void *p);
extern void *roxamen_ptr(void *p, int pe);

/* RMA: dest (put) or src (get) is symmetric, the other is local. */
extern int roxamen_putmem(void *dest, void *src, size_t n, int pe);
extern int roxamen_putmem_nbi(void *dest, void *src, size_t n, int pe);
extern int roxamen_getmem(void *dest, void *src, size_t n, int pe);
extern int roxamen_getmem_nbi(void *dest, void *src, size_t n, int pe);
extern int roxamen_fence(void);
extern int roxamen_quiet(void);

/* Atomics on the element of type dtype at symmetric dest on pe: *value is the operand, *cond the
 * compare_swap comparand, and *fetch receives the old value (the fetching forms). */
extern int roxamen_atomic(int op, int dtype, void *dest, void *value, void *cond, void *fetch, int pe);

/* Put with signal, and waiting on a signal word (a symmetric uint64_t) of this PE. */
extern int roxamen_putmem_signal(void *dest, void *src, size_t n, uint64_t *sig, uint64_t value, int sig_op, int pe);
extern int roxamen_putmem_signal_nbi(void *dest, void *src, size_t n, uint64_t *sig, uint64_t value, int sig_op, int pe);
extern int roxamen_signal_wait_until(uint64_t *sig, int cmp, uint64_t value, uint64_t *got);
extern int roxamen_signal_fetch(uint64_t *sig, uint64_t *got);

extern int roxamen_barrier_all(void);
extern int roxamen_sync_all(void);

/* Teams. A split is collective over the parent; a PE left out gets ROXAMEN_TEAM_INVALID. */
extern int roxamen_team_my_pe(roxamen_team_t team);  /* -1: not a live team */
extern int roxamen_team_n_pes(roxamen_team_t team);
extern int roxamen_team_translate_pe(roxamen_team_t src, int pe, roxamen_team_t dst); /* -1: not in dst */
extern int roxamen_team_split_strided(roxamen_team_t parent, int start, int stride, int size, roxamen_team_t *out);
extern int roxamen_team_split_2d(roxamen_team_t parent, int xrange, roxamen_team_t *x, roxamen_team_t *y);
extern int roxamen_team_sync(roxamen_team_t team);
extern int roxamen_team_destroy(roxamen_team_t team);

/* Contexts. */
extern int roxamen_ctx_create(long options, roxamen_ctx_t *out);
extern int roxamen_ctx_destroy(roxamen_ctx_t ctx);
extern int roxamen_ctx_putmem(roxamen_ctx_t ctx, void *dest, void *src, size_t n, int pe);
extern int roxamen_ctx_putmem_nbi(roxamen_ctx_t ctx, void *dest, void *src, size_t n, int pe);
extern int roxamen_ctx_getmem(roxamen_ctx_t ctx, void *dest, void *src, size_t n, int pe);
extern int roxamen_ctx_atomic(roxamen_ctx_t ctx, int op, int dtype, void *dest, void *value, void *cond, void *fetch, int pe);
extern int roxamen_ctx_fence(roxamen_ctx_t ctx);
extern int roxamen_ctx_quiet(roxamen_ctx_t ctx);

/* Collectives over a team, blocking; dest and src symmetric. n counts elements: of each array for
 * allreduce and broadcast, of src for fcollect (dest holds n_pes*n), per PE for alltoall (each
 * array n_pes*n), of dest for reduce_scatter (src n_pes*n). root is a team PE. */
extern int roxamen_allreduce(roxamen_team_t team, int dtype, int op, void *dest, void *src, size_t n);
extern int roxamen_broadcast(roxamen_team_t team, int dtype, void *dest, void *src, size_t n, int root);
extern int roxamen_fcollect(roxamen_team_t team, int dtype, void *dest, void *src, size_t n);
extern int roxamen_alltoall(roxamen_team_t team, int dtype, void *dest, void *src, size_t n);
extern int roxamen_reduce_scatter(roxamen_team_t team, int dtype, int op, void *dest, void *src, size_t n);

/* Stream-ordered collectives: enqueued on a stream and returning at once, ordered with the other
 * work of that stream (as NCCL's); errors come at roxamen_stream_sync. On a GPU World the stream is
 * the program's own cudaStream_t / hipStream_t (NULL: the default stream), passed as it is: the
 * library never destroys it, and keeps a small wrapper of it until roxamen_finalize. The dest and
 * src buffers are symmetric device memory. roxamen_stream_create makes a stream of the library's
 * (on a GPU a cudaStream_t / hipStream_t the program may use as well), released by
 * roxamen_stream_destroy. On the host backend only roxamen_stream_create's streams exist and the
 * stream runs the blocking call. */
extern int roxamen_stream_create(roxamen_stream_t *out);
extern int roxamen_stream_destroy(roxamen_stream_t st);
extern int roxamen_stream_sync(roxamen_stream_t st);
extern int roxamen_allreduce_on_stream(roxamen_stream_t st, roxamen_team_t team, int dtype, int op, void *dest, void *src, size_t n);
extern int roxamen_broadcast_on_stream(roxamen_stream_t st, roxamen_team_t team, int dtype, void *dest, void *src, size_t n, int root);
extern int roxamen_allgather_on_stream(roxamen_stream_t st, roxamen_team_t team, int dtype, void *dest, void *src, size_t n);
extern int roxamen_alltoall_on_stream(roxamen_stream_t st, roxamen_team_t team, int dtype, void *dest, void *src, size_t n);
extern int roxamen_reduce_scatter_on_stream(roxamen_stream_t st, roxamen_team_t team, int dtype, int op, void *dest, void *src, size_t n);

/* The program's own kernels. Device code that includes kernels/include/roxamen/roxshmem.h has a
 * roxshmem_state (one per code object) that must hold this PE's state before its kernels call
 * roxshmem_*: roxamen_link_state fills it, given its device address and size (the size is
 * checked against this library's roxshmem.h). The inline helpers below find it:
 *   roxamen_cumodule_init(CUmodule)    a module the program loaded with the driver API (include
 *                                      <cuda.h> first; as nvshmemx_cumodule_init),
 *   roxamen_hipmodule_init(hipModule_t)  the same for HIP (include <hip/hip_runtime.h> first),
 *   roxamen_init_device_state()        kernels compiled into the program by nvcc or hipcc (runtime
 *                                      API): call it from the source file that includes
 *                                      roxamen/roxshmem.h, after that include and this one.
 * Call them after roxamen_init, once per module and PE; ROXAMEN_ERR_BAD_ARGUMENT when the code has
 * no roxshmem_state or one of another size, ROXAMEN_ERR_NOT_SUPPORTED on the host backend. */
extern int roxamen_link_state(void *state, size_t size);

/* Expert parallelism (shmem/ep: DeepEP's dispatch and combine). roxamen_ep_create is collective.
 * dispatch sends ntokens rows of x ([ntokens][hidden] of the buffer's type) to the PEs owning
 * topk_idx's experts ([ntokens][topk], -1: none) and copies what this PE received into recv_x
 * (room for recv_cap rows: roxamen_ep_max_rows), grouped by local expert; recv_counts gets the
 * rows per local expert (roxamen_ep_local_experts entries); recv_weights (recv_cap) and recv_src
 * (recv_cap*3: source PE, token, k) may be NULL. combine takes the experts' outputs y (recv_rows
 * rows, in recv_x's order) and the handle, and writes the top-k weighted sums of this PE's
 * ntokens tokens to out. A handle lives until roxamen_ep_handle_free or roxamen_ep_destroy. */
extern int roxamen_ep_create(int hidden, int topk, int experts, int max_tokens, int dtype, int mode, roxamen_ep_t *out);
extern int roxamen_ep_destroy(roxamen_ep_t buf);
extern int roxamen_ep_max_rows(roxamen_ep_t buf);
extern int roxamen_ep_local_experts(roxamen_ep_t buf);
extern int roxamen_ep_dispatch(roxamen_ep_t buf, void *x, int ntokens, int64_t *topk_idx, float *topk_weights,
                               void *recv_x, int recv_cap, int *recv_rows, int *recv_counts, float *recv_weights,
                               int *recv_src, roxamen_ep_handle_t *handle);
extern int roxamen_ep_combine(roxamen_ep_t buf, roxamen_ep_handle_t handle, void *y, int rows, void *out);
extern int roxamen_ep_handle_free(roxamen_ep_t buf, roxamen_ep_handle_t handle);

/* The stream-ordered forms (GPU Worlds; refused on the host backend with ROXAMEN_ERR_NOT_SUPPORTED):
 * x, topk_idx and topk_weights are device memory; the call is enqueued on st and returns at once.
 * What arrives is in the buffer's device memory until its next dispatch: recv_x (room for
 * roxamen_ep_max_rows rows), the row count (int32, known on the device only: read it after
 * roxamen_stream_sync), counts and offsets per local expert (int32), each row's weight (float)
 * and source (int32[3]). Any of those out-pointers may be NULL. combine_on_stream takes the
 * experts' outputs y in device memory with room for roxamen_ep_max_rows rows (y_rows) and sets
 * *out to the device address of the ntokens combined tokens. Device errors (an expert out of
 * range) come at roxamen_stream_sync. */
extern int roxamen_ep_dispatch_on_stream(roxamen_ep_t buf, roxamen_stream_t st, void *x, int ntokens, void *topk_idx,
                                         void *topk_weights, void **recv_x, void **recv_rows, void **recv_counts,
                                         void **recv_offsets, void **recv_weights, void **recv_src,
                                         roxamen_ep_handle_t *handle);
extern int roxamen_ep_combine_on_stream(roxamen_ep_t buf, roxamen_stream_t st, roxamen_ep_handle_t handle, void *y,
                                        int y_rows, void **out);

/* Typed forms of the common atomics. */
static inline int roxamen_int64_atomic_fetch_add(int64_t *dest, int64_t value, int pe, int64_t *old) {
	return roxamen_atomic(ROXAMEN_AMO_FETCH_ADD, ROXAMEN_INT64, dest, &value, NULL, old, pe);
}
static inline int roxamen_int64_atomic_add(int64_t *dest, int64_t value, int pe) {
	return roxamen_atomic(ROXAMEN_AMO_ADD, ROXAMEN_INT64, dest, &value, NULL, NULL, pe);
}
static inline int roxamen_int64_atomic_compare_swap(int64_t *dest, int64_t cond, int64_t value, int pe, int64_t *old) {
	return roxamen_atomic(ROXAMEN_AMO_COMPARE_SWAP, ROXAMEN_INT64, dest, &value, &cond, old, pe);
}
static inline int roxamen_int64_atomic_fetch(int64_t *dest, int pe, int64_t *old) {
	return roxamen_atomic(ROXAMEN_AMO_FETCH, ROXAMEN_INT64, dest, NULL, NULL, old, pe);
}
static inline int roxamen_int32_atomic_fetch_add(int32_t *dest, int32_t value, int pe, int32_t *old) {
	return roxamen_atomic(ROXAMEN_AMO_FETCH_ADD, ROXAMEN_INT32, dest, &value, NULL, old, pe);
}
static inline int roxamen_uint64_atomic_fetch_or(uint64_t *dest, uint64_t value, int pe, uint64_t *old) {
	return roxamen_atomic(ROXAMEN_AMO_FETCH_OR, ROXAMEN_UINT64, dest, &value, NULL, old, pe);
}

/* Inline helpers over roxamen_link_state (the program links the vendor library itself). */
#if defined(CUDA_VERSION) && defined(__cuda_cuda_h__)
static inline int roxamen_cumodule_init(CUmodule module) {
	CUdeviceptr p = 0;
	size_t size = 0;
	if (cuModuleGetGlobal(&p, &size, module, "roxshmem_state") != CUDA_SUCCESS)
		p = 0, size = 0; /* roxamen_link_state says what is missing */
	return roxamen_link_state((void *)(uintptr_t)p, size);
}
#endif
#if defined(HIP_INCLUDE_HIP_HIP_RUNTIME_API_H)
static inline int roxamen_hipmodule_init(hipModule_t module) {
	hipDeviceptr_t p = 0;
	size_t size = 0;
	if (hipModuleGetGlobal(&p, &size, module, "roxshmem_state") != hipSuccess)
		p = 0, size = 0;
	return roxamen_link_state((void *)p, size);
}
#endif
#if defined(ROXAMEN_STATE_H) && defined(ROXA_GPU_LANG) && !defined(ROXSHMEM_STATE_EXTERN)
static inline int roxamen_init_device_state(void) {
	void *p = NULL;
#if defined(__HIP__) || defined(__HIPCC__)
	if (hipGetSymbolAddress(&p, HIP_SYMBOL(roxshmem_state)) != hipSuccess)
		p = NULL;
#else
	if (cudaGetSymbolAddress(&p, roxshmem_state) != cudaSuccess)
		p = NULL;
#endif
	return roxamen_link_state(p, sizeof(roxshmem_state));
}
#endif

#ifdef __cplusplus
}
#endif
#endif
