/* Instantiates the kernel body VKC_SIMD_BODY (a file name) once for AVX-512 and once for
 * AVX2 (simd.h); nothing on a compiler or processor without them. Include it where the body's
 * functions are wanted, after what the body uses. */
#include "cpu/simd.h"

#ifdef VKC_X86
#define VKC_SIMD_WIDTH 512
#include "cpu/simd.h"
#include VKC_SIMD_BODY
#undef VKC_SIMD_WIDTH
#define VKC_SIMD_WIDTH 256
#include "cpu/simd.h"
#include VKC_SIMD_BODY
#undef VKC_SIMD_WIDTH
#endif
#undef VKC_SIMD_BODY
