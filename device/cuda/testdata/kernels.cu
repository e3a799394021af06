// Test kernels for device/cuda, in plain CUDA dialect with no CUDA headers: the few builtins
// the tests need are spelled out below. gen_test.go rebuilds kernels.ptx with Debian's clang-19:
//
//   clang-19 -x cuda --cuda-gpu-arch=sm_90 --cuda-device-only -nocudainc -nocudalib -O2 -S \
//     -o kernels.ptx kernels.cu

#define __global__ __attribute__((global))
#define __device__ __attribute__((device))
#define __shared__ __attribute__((shared))

typedef unsigned int u32;
typedef unsigned long long u64;

static __device__ inline u32 thread_x() { return __nvvm_read_ptx_sreg_tid_x(); }
static __device__ inline u32 block_x() { return __nvvm_read_ptx_sreg_ctaid_x(); }
static __device__ inline u32 block_dim_x() { return __nvvm_read_ptx_sreg_ntid_x(); }
static __device__ inline u32 grid_dim_x() { return __nvvm_read_ptx_sreg_nctaid_x(); }
static __device__ inline void sync_threads() { __nvvm_bar_sync(0); }

// splitmix64: the Go tests compute the same sequence.
static __device__ inline u64 mix(u64 z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

extern "C" {

// Globals the host sets through Module.Global.
__device__ u64 rox_bias;
__device__ u32 rox_table[16];

// out[i] = a*x[i] + y[i] + rox_bias + rox_table[i % 16], grid-stride.
__global__ void axpy(u64 *out, const u64 *x, const u64 *y, u64 a, long long n) {
  for (long long i = (long long)block_x() * block_dim_x() + thread_x(); i < n;
       i += (long long)grid_dim_x() * block_dim_x())
    out[i] = a * x[i] + y[i] + rox_bias + rox_table[i % 16];
}

// Writes back every argument so the test can check how each type is passed.
__global__ void echo_args(u64 *out, int a, u32 b, long long c, u64 d, float e, double f) {
  if (thread_x() == 0 && block_x() == 0) {
    out[0] = (u64)(long long)a;
    out[1] = b;
    out[2] = (u64)c;
    out[3] = d;
    out[4] = __builtin_bit_cast(u32, e);
    out[5] = __builtin_bit_cast(u64, f);
  }
}

// Reverses each block's slice of in into out through dynamic shared memory.
extern __shared__ u64 rox_dyn[];
__global__ void reverse_blocks(u64 *out, const u64 *in) {
  u32 t = thread_x(), n = block_dim_x();
  u64 base = (u64)block_x() * n;
  rox_dyn[t] = in[base + t];
  sync_threads();
  out[base + t] = rox_dyn[n - 1 - t];
}

// dst[i] = mix(seed + i), grid-stride; used for stores into a peer GPU's memory.
__global__ void fill(u64 *dst, u64 seed, long long n) {
  for (long long i = (long long)block_x() * block_dim_x() + thread_x(); i < n;
       i += (long long)grid_dim_x() * block_dim_x())
    dst[i] = mix(seed + (u64)i);
}

}
