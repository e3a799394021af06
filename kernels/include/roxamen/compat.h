/* Roxamen device library: what the compatibility headers (nvshmem.h, rocshmem.h) share. Not for
 * direct use: include one of those, or roxshmem.h. */
#ifndef ROXAMEN_COMPAT_H
#define ROXAMEN_COMPAT_H

#include "roxshmem.h"

/* A name of the other API that has no Roxamen equivalent is declared with this attribute, so that
 * including the header costs nothing and only a use fails, with the name of the call and why:
 *   error: 'nvshmem_int_sum_reduce' is unavailable: nvshmem_int_sum_reduce: no Roxamen equivalent: ...
 * clang and GCC 12 or later reject the use in the front end; older GCC at the call that survives
 * optimization (its error attribute). */
#if defined(__clang__) || (defined(__GNUC__) && __GNUC__ >= 12)
#define ROXC_UNAVAILABLE(msg) __attribute__((unavailable(msg)))
#else
#define ROXC_UNAVAILABLE(msg) __attribute__((error(msg)))
#endif

/* ROXC_NO(ret, name, why): declares name unavailable, whatever its arguments (a variadic template:
 * CUDA device code has no C variadic functions). */
#define ROXC_NO(ret, name, why)                                                                           \
	template <typename... roxc_args> __device__ ret name(roxc_args...) ROXC_UNAVAILABLE(#name ": no Roxamen equivalent: " why);

/* OpenSHMEM 1.5's AMO type classes, as NVSHMEM and rocSHMEM implement them (nvshmem_defines.h,
 * rocshmem_AMO.hpp): the standard AMOs over ROXI_AMO_TYPES (roxshmem.h), the bitwise ones over
 * the unsigned and fixed-width types, fetch/set/swap also over float and double. */
#define ROXC_BITWISE_AMO_TYPES(X)                                                                        \
	X(uint, unsigned int) X(ulong, unsigned long) X(ulonglong, unsigned long long) X(int32, int32_t) \
	X(int64, int64_t) X(uint32, uint32_t) X(uint64, uint64_t)
#define ROXC_EXTENDED_AMO_TYPES(X) X(float, float) X(double, double)

#endif /* ROXAMEN_COMPAT_H */
