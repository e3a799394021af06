/* Roxamen device library: base types and the compiler/target detection shared by every header.
 * Plain C and C++; no system header is included, so the same file serves device code built with
 * -nogpuinc/-nocudainc, nvcc, hipcc, and the host programs of the parity tests. */
#ifndef ROXAMEN_TYPES_H
#define ROXAMEN_TYPES_H

/* Identical redeclarations of the <stdint.h>/<stddef.h> typedefs are valid C11 and C++. */
typedef __INT8_TYPE__ int8_t;
typedef __INT16_TYPE__ int16_t;
typedef __INT32_TYPE__ int32_t;
typedef __INT64_TYPE__ int64_t;
typedef __UINT8_TYPE__ uint8_t;
typedef __UINT16_TYPE__ uint16_t;
typedef __UINT32_TYPE__ uint32_t;
typedef __UINT64_TYPE__ uint64_t;
typedef __UINTPTR_TYPE__ uintptr_t;
typedef __SIZE_TYPE__ size_t;
typedef __PTRDIFF_TYPE__ ptrdiff_t;

#define ROXA_STATIC_ASSERT(cond, msg) typedef char roxa_static_assert_##msg[(cond) ? 1 : -1]

/* Target of the current compilation pass. ROXA_AMDGCN and ROXA_NVPTX are device passes; a HIP or
 * CUDA host pass (ROXA_GPU_LANG without either) parses device functions but never runs them. */
#if defined(__HIP__) || defined(__CUDA__) || defined(__CUDACC__)
#define ROXA_GPU_LANG 1
#endif
#if defined(__AMDGCN__)
#define ROXA_AMDGCN 1
#elif defined(__NVPTX__) || defined(__CUDA_ARCH__)
#define ROXA_NVPTX 1
#endif

#ifdef ROXA_GPU_LANG
/* Bare clang (-nogpuinc/-nocudainc) has the attributes but not the HIP/CUDA macros. */
#ifndef __device__
#define __device__ __attribute__((device))
#endif
#ifndef __global__
#define __global__ __attribute__((global))
#endif
#ifndef __constant__
#define __constant__ __attribute__((constant))
#endif
#ifndef __host__
#define __host__ __attribute__((host))
#endif
#ifndef __shared__
#define __shared__ __attribute__((shared))
#endif
#define ROXA_FN static __device__ inline __attribute__((always_inline))
/* ROXI_FN: the library's larger internals; the compiler decides what to inline, which keeps a
 * kernel that calls much of the API compiling in seconds */
#define ROXI_FN static __device__ inline
/* ROXI_COLD: bulk and slow paths kept out of line (one copy per code object); probes and the
 * mapping tests define ROXSHMEM_INLINE_ALL to see each call's instructions in one function */
#ifdef ROXSHMEM_INLINE_ALL
#define ROXI_COLD static __device__ inline __attribute__((always_inline))
#else
#define ROXI_COLD static __device__ inline __attribute__((noinline))
#endif
#ifdef ROXSHMEM_INLINE_ALL
#define ROXA_API static __device__ inline __attribute__((always_inline)) /* a probe's call, whole */
#else
#define ROXA_API static __device__ inline
#endif
#endif

#ifdef __cplusplus
#define ROXA_EXTERN_C extern "C"
#else
#define ROXA_EXTERN_C
#endif

#endif /* ROXAMEN_TYPES_H */
