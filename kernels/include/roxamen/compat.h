/* Roxamen device library: what the compatibility headers (nvshmem.h, rocshmem.h) share. Not for
 * direct use: include one of those, or roxshmem.h. */
#ifndef ROXAMEN_COMPAT_H
#define ROXAMEN_COMPAT_H

#include "roxshmem.h"

/* A name of the other API that has no Roxamen equivalent is declared so that including the header
 * costs nothing and only a use fails, naming the call and why:
 *   error: 'nvshmem_int_sum_reduce<...>' is unavailable: nvshmem_int_sum_reduce: no Roxamen equivalent: ...
 * (clang, and GCC 12 or later: the unavailable attribute). nvcc's front end and older GCC get a
 * deleted function template instead, whose use is an error naming the call ("use of deleted
 * function"), the reason being here; a name that is not a function (a team constant) only warns
 * there. */
#if defined(__clang__) || (defined(__GNUC__) && __GNUC__ >= 12 && !defined(__NVCC__))
#define ROXC_UNAVAILABLE(msg) __attribute__((unavailable(msg)))
#define ROXC_NO_DEFINITION(msg) ROXC_UNAVAILABLE(msg)
#else
#define ROXC_UNAVAILABLE(msg) __attribute__((deprecated(msg)))
#define ROXC_NO_DEFINITION(msg) = delete
#endif

/* ROXC_NO(ret, name, why): declares name unavailable, whatever its arguments (a variadic template:
 * CUDA device code has no C variadic functions). */
#define ROXC_NO(ret, name, why)                                                                           \
	template <typename... roxc_args> __device__ ret name(roxc_args...) ROXC_NO_DEFINITION(#name ": no Roxamen equivalent: " why);

/* OpenSHMEM 1.5's AMO type classes, as NVSHMEM and rocSHMEM implement them (nvshmem_defines.h,
 * rocshmem_AMO.hpp): the standard AMOs over ROXI_AMO_TYPES (roxshmem.h), the bitwise ones over
 * the unsigned and fixed-width types, fetch/set/swap also over float and double. */
#define ROXC_BITWISE_AMO_TYPES(X)                                                                        \
	X(uint, unsigned int) X(ulong, unsigned long) X(ulonglong, unsigned long long) X(int32, int32_t) \
	X(int64, int64_t) X(uint32, uint32_t) X(uint64, uint64_t)
#define ROXC_EXTENDED_AMO_TYPES(X) X(float, float) X(double, double)

#endif /* ROXAMEN_COMPAT_H */
