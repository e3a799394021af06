/* A CUDA C++ program whose own kernel calls Roxamen's device library on symmetric memory from
 * libroxamen.so, then runs a stream-ordered collective on its own cudaStream_t. The kernel, built
 * into the program by nvcc (runtime API), is linked to this PE by roxamen_init_device_state(); the
 * same kernel built into a cubin and loaded with the driver API is linked by
 * roxamen_cumodule_init(). Build and run from the repository root (libroxamen.so built there):
 *
 *   nvcc -arch=sm_90 -Iinclude -Ikernels/include examples/c/device_kernel.cu -L. -lroxamen -lcuda \
 *        -Xlinker -rpath,$PWD -o device_kernel
 *   nvcc -arch=sm_90 -cubin -Iinclude -Ikernels/include examples/c/device_kernel.cu -o device_kernel.cubin
 *   roxrun -n 2 ./device_kernel device_kernel.cubin     (2 PEs: two GPUs, or one under MPS)
 *
 * Each PE's kernel puts its block of data to the right neighbour with a signal, waits for its left
 * neighbour's signal, meets the others at a block barrier and sums every PE's data with a block
 * all-reduce; the host then sums it again on the program's stream with roxamen_allreduce_on_stream.
 * Every PE prints "PE i: device checks passed" or the first failed check. */
#include <cuda.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

#include "roxamen/roxshmem.h"
#include "roxamen.h"

enum { N = 1024, THREADS = 256 };

extern "C" __global__ void rox_ring(float *data, float *recv, uint64_t *sig, float *sum, uint64_t round)
{
	int me = roxshmem_my_pe(), npes = roxshmem_n_pes();
	for (int i = threadIdx.x; i < N; i += blockDim.x)
		data[i] = (float)(me * 1000 + i) + (float)round;
	__syncthreads();
	roxshmemx_putmem_signal_block(recv, data, N * sizeof(float), sig, 1, ROXSHMEM_SIGNAL_ADD, (me + 1) % npes);
	if (threadIdx.x == 0)
		roxshmem_signal_wait_until(sig, ROXSHMEM_CMP_GE, round);
	__syncthreads();
	roxshmemx_barrier_all_block();
	roxshmemx_float_sum_reduce_block(ROXSHMEM_TEAM_WORLD, sum, data, N);
}

static int me = -1;

#define CHECK(cond, ...)                                                                \
	do {                                                                                \
		if (!(cond)) {                                                                  \
			fprintf(stderr, "PE %d: %s:%d: check failed: ", me, __FILE__, __LINE__); \
			fprintf(stderr, __VA_ARGS__);                                               \
			fprintf(stderr, "\n");                                                      \
			exit(1);                                                                    \
		}                                                                               \
	} while (0)
#define OK(call)                                                                                       \
	do {                                                                                               \
		int rc_ = (call);                                                                              \
		CHECK(rc_ == ROXAMEN_SUCCESS, "%s = %d: %s", #call, rc_, roxamen_error_message());         \
	} while (0)
#define CU(call)                                                                     \
	do {                                                                             \
		cudaError_t e_ = (call);                                                     \
		CHECK(e_ == cudaSuccess, "%s: %s", #call, cudaGetErrorString(e_));         \
	} while (0)
#define DRV(call)                                        \
	do {                                                 \
		CUresult r_ = (call);                            \
		CHECK(r_ == CUDA_SUCCESS, "%s = %d", #call, (int)r_); \
	} while (0)

/* check reads back what round r left and compares it with what every PE computed. */
static void check(int npes, float *recv, uint64_t *sig, float *sum, float *sum2, uint64_t r)
{
	static float h[N], s[N], s2[N];
	uint64_t sv = 0;
	CU(cudaMemcpy(h, recv, sizeof h, cudaMemcpyDeviceToHost));
	CU(cudaMemcpy(s, sum, sizeof s, cudaMemcpyDeviceToHost));
	CU(cudaMemcpy(s2, sum2, sizeof s2, cudaMemcpyDeviceToHost));
	CU(cudaMemcpy(&sv, sig, sizeof sv, cudaMemcpyDeviceToHost));
	int left = (me + npes - 1) % npes;
	CHECK(sv == r, "round %d: signal %llu", (int)r, (unsigned long long)sv);
	for (int i = 0; i < N; i++) {
		float want = 0;
		for (int p = 0; p < npes; p++)
			want += (float)(p * 1000 + i) + (float)r;
		CHECK(h[i] == (float)(left * 1000 + i) + (float)r, "round %d: recv[%d] = %g from PE %d", (int)r, i, h[i], left);
		CHECK(s[i] == want, "round %d: block all-reduce [%d] = %g, want %g", (int)r, i, s[i], want);
		CHECK(s2[i] == npes * want, "round %d: allreduce on the program's stream [%d] = %g, want %g", (int)r, i, s2[i], npes * want);
	}
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IONBF, 0); /* each line as it happens, also when the job is stopped */
	OK(roxamen_init());
	me = roxamen_my_pe();
	int npes = roxamen_n_pes();
	CHECK(roxamen_on_gpu(), "not a GPU World (ROX_DEVICE?)");
	float *data = (float *)roxamen_calloc(N, sizeof(float));
	float *recv = (float *)roxamen_calloc(N, sizeof(float));
	float *sum = (float *)roxamen_calloc(N, sizeof(float));
	float *sum2 = (float *)roxamen_calloc(N, sizeof(float));
	uint64_t *sig = (uint64_t *)roxamen_calloc(1, sizeof(uint64_t));
	CHECK(data && recv && sum && sum2 && sig, "roxamen_calloc: %s", roxamen_error_message());

	/* Round 1: the kernel compiled into this program (runtime API). */
	OK(roxamen_init_device_state());
	cudaStream_t st;
	CU(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
	rox_ring<<<1, THREADS, 0, st>>>(data, recv, sig, sum, 1);
	CU(cudaGetLastError());
	/* on the program's stream, after its kernel: sum2 = sum over PEs of sum (each = the total) */
	OK(roxamen_allreduce_on_stream(st, ROXAMEN_TEAM_WORLD, ROXAMEN_FLOAT32, ROXAMEN_SUM, sum2, sum, N));
	OK(roxamen_stream_sync(st));
	CU(cudaStreamSynchronize(st));
	check(npes, recv, sig, sum, sum2, 1);
	OK(roxamen_barrier_all());
	printf("PE %d: runtime-API round passed\n", me);

	/* Round 2: the same kernel from a cubin loaded with the driver API. */
	if (argc > 1) {
		CUmodule mod;
		CUfunction fn;
		DRV(cuModuleLoad(&mod, argv[1]));
		OK(roxamen_cumodule_init(mod));
		DRV(cuModuleGetFunction(&fn, mod, "rox_ring"));
		uint64_t round = 2;
		void *args[] = {&data, &recv, &sig, &sum, &round};
		DRV(cuLaunchKernel(fn, 1, 1, 1, THREADS, 1, 1, 0, (CUstream)st, args, NULL));
		OK(roxamen_allreduce_on_stream(st, ROXAMEN_TEAM_WORLD, ROXAMEN_FLOAT32, ROXAMEN_SUM, sum2, sum, N));
		OK(roxamen_stream_sync(st));
		check(npes, recv, sig, sum, sum2, 2);
		OK(roxamen_barrier_all());
		DRV(cuModuleUnload(mod));
		printf("PE %d: cubin round passed\n", me);
	}

	/* A bad state address is refused with the runtime's message. */
	CHECK(roxamen_link_state(NULL, 0) == ROXAMEN_ERR_BAD_ARGUMENT, "link_state(NULL): %s", roxamen_error_message());
	printf("PE %d: %s\n", me, roxamen_error_message());
	CU(cudaStreamDestroy(st));
	roxamen_free(sig);
	roxamen_free(sum2);
	roxamen_free(sum);
	roxamen_free(recv);
	roxamen_free(data);
	OK(roxamen_finalize());
	printf("PE %d: device checks passed\n", me);
	return 0;
}
