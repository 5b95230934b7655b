/* fp32 <-> bf16 and fp32 <-> fp16 on the CPU (issue 19's number formats), on
 * plain arrays of 16-bit words (vka_convert, 16-bit tensors, the bf16 matmul).
 *
 * Rounding is to nearest, ties to even. NaN stays NaN (quiet, sign kept), +-Inf
 * stays +-Inf.
 *  - bf16 (1, 8, 7: the top half of an fp32): narrowing is what VCVTNEPS2BF16
 * (AVX512-BF16) computes, per the Intel SDM's pseudocode: a zero or subnormal
 * fp32 gives a signed zero (the instruction treats input denormals as zero and
 * flushes output denormals; a subnormal bf16 can only come from a subnormal
 * fp32, below 1.2e-38), a NaN its top 16 bits with the quiet bit (0x0040) set,
 * a normal number x + 0x7FFF + bit 16 (integer add) >> 16, so the largest
 * finite values round to Inf. Widening is exact: the word << 16 (a subnormal
 *    bf16 stays subnormal, a signalling NaN stays signalling). Hence bf16 ->
 * fp32 -> bf16 gives the word back except subnormals (-> signed zero) and
 * signalling NaNs (-> quieted).
 *  - fp16 (1, 5, 10): IEEE binary16 as F16C's VCVTPS2PH / VCVTPH2PS compute it:
 * |x| >= 65520 gives +-Inf, subnormals (down to 2^-24) are rounded correctly, a
 * NaN keeps its sign and top 10 mantissa bits with the quiet bit (0x0200) set.
 * Widening is exact except that a signalling NaN comes back quiet (bit 22 set),
 * as VCVTPH2PS does.
 *
 * vkc_*_ref: the portable scalar reference (bit manipulation only). vkc_*: the
 * fast versions (convert_simd.h, one body for AVX-512 and AVX2), the same bits,
 * chosen by feat (vkc_cvt_features): VKC_CVT_BF16 uses VCVTNEPS2BF16, the
 * others integer arithmetic or F16C; feat 0 runs the reference. Elements past
 * the last whole vector: the reference. */
#ifndef VKA_CPU_CONVERT_H
#define VKA_CPU_CONVERT_H

#include "cpu/cpu_ops.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>

enum {
    VKC_CVT_AVX2 = 1,   /* AVX2 + FMA: the 256-bit instance */
    VKC_CVT_AVX512 = 2, /* AVX-512F: the 512-bit instance (has the fp16 conversions) */
    VKC_CVT_F16C = 4,   /* F16C: fp16 conversions in the 256-bit instance */
    VKC_CVT_BF16 = 8,   /* AVX512-BF16 (VCVTNEPS2BF16) with AVX-512F */
};

/* What the conversions may use on this CPU (cpuid) with vector ISAs up to isa
 * (the fast kernels' vkc_cpu_isa, lowered by VKATTN_CPU_KERNELS;
 * VKC_ISA_BASELINE: 0, the reference). */
unsigned vkc_cvt_features(vkc_isa isa);

uint16_t vkc_f32_to_bf16_1(float x);
/* Exact: the word is the top half of the fp32 (inline: the bf16 matmul widens with it). */
static inline float vkc_bf16_to_f32_1(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}
uint16_t vkc_f32_to_f16_1(float x);
float vkc_f16_to_f32_1(uint16_t h);

void vkc_f32_to_bf16_ref(uint16_t *out, const float *in, size_t n); /* out (n), in (n) */
void vkc_bf16_to_f32_ref(float *out, const uint16_t *in, size_t n);
void vkc_f32_to_f16_ref(uint16_t *out, const float *in, size_t n);
void vkc_f16_to_f32_ref(float *out, const uint16_t *in, size_t n);

void vkc_f32_to_bf16(uint16_t *out, const float *in, size_t n, unsigned feat);
void vkc_bf16_to_f32(float *out, const uint16_t *in, size_t n, unsigned feat);
void vkc_f32_to_f16(uint16_t *out, const float *in, size_t n, unsigned feat);
void vkc_f16_to_f32(float *out, const uint16_t *in, size_t n, unsigned feat);

/* The backend's convert op: n elements of src (src_dtype, a vka_dtype) into dst (dst_dtype): one
 * of the four conversions above, or a copy of 16-bit elements (same type), in blocks over nt
 * threads. Writes exactly n elements (an odd 16-bit count leaves the half after it alone). */
void vkc_convert(void *dst, int dst_dtype, const void *src, int src_dtype, size_t n,
                 unsigned feat, int nt);
/* The same on the calling thread (inside another op's work item). */
void vkc_convert_serial(void *dst, int dst_dtype, const void *src, int src_dtype, size_t n,
                        unsigned feat);

#endif
