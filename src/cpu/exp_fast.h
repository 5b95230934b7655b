/* The fast kernels' exp (gelu.c, attention_fast.c): Cephes' expf (Moshier) without a call, as a
 * scalar that `omp simd` vectorises and as AVX2 / AVX-512 intrinsics that compute the same
 * operations in the same order (no fused multiply-add), so every form gives the same bits.
 *
 * x = n ln2 + r, |r| <= ln2 / 2, e^r by a degree-7 polynomial, scaled by 2^n through the
 * exponent bits; within 2 ulp of expf. 0 below -87.33 (where expf is subnormal), inf above
 * 88.37 (expf: up to 2.4e38 there), NaN for NaN. Only for the fast kernels: the reference ones
 * keep libm's expf (gelu.c) or their own exp (attention.c). */
#ifndef VKA_CPU_EXP_FAST_H
#define VKA_CPU_EXP_FAST_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "cpu/simd.h" /* VKC_X86, VKC_TARGET_* */

#define VKC_EXP_HI 88.3762626647949f
#define VKC_EXP_LO -87.3365478515625f

static inline float vkc_exp_fast(float x) {
    const float hi = VKC_EXP_HI, lo = VKC_EXP_LO;
    float xc = x < hi ? x : hi; /* keeps the arithmetic finite for +-inf and NaN (no NaN */
    xc = xc > lo ? xc : lo;     /* reaches the int conversion below: undefined behaviour) */
    /* n = round(x / ln2) by adding and subtracting 1.5 * 2^23 (|x / ln2| < 2^22), no call */
    float n = (xc * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
    float r = xc - n * 0.693359375f - n * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    int32_t bits = ((int32_t)n + 127) << 23;
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    float e = p * scale;
    e = x < lo ? 0.0f : e;
    e = x > hi ? INFINITY : e;
    return x == x ? e : x; /* NaN in, NaN out */
}

#ifdef VKC_X86
#if defined(__clang__)
#define VKC_EXP_UNROLL _Pragma("unroll")
#else
#define VKC_EXP_UNROLL _Pragma("GCC unroll 4")
#endif
/* x[0 .. n) (n <= 4, a constant where inlined) in place, one step for all n vectors at a time:
 * each exp is a chain of ~20 dependent operations, so independent chains side by side keep the
 * vector pipes busy where one after the other would wait on each step's latency.
 * min_ps(a, b) and max_ps(a, b) return b when either is NaN: a < b ? a : b, as above. */
#define VKC_EXP_N(V, P, W, x, n)                                                               \
    V xc_[4], n_[4], r_[4], p_[4];                                                             \
    VKC_EXP_UNROLL for (int j = 0; j < (n); j++) xc_[j] =                                      \
        P##_max_ps(P##_min_ps(x[j], P##_set1_ps(VKC_EXP_HI)), P##_set1_ps(VKC_EXP_LO));        \
    VKC_EXP_UNROLL for (int j = 0; j < (n); j++) n_[j] =                                       \
        P##_sub_ps(P##_add_ps(P##_mul_ps(xc_[j], P##_set1_ps(1.44269504088896341f)),            \
                              P##_set1_ps(12582912.0f)),                                        \
                   P##_set1_ps(12582912.0f));                                                   \
    VKC_EXP_UNROLL for (int j = 0; j < (n); j++) r_[j] =                                       \
        P##_sub_ps(P##_sub_ps(xc_[j], P##_mul_ps(n_[j], P##_set1_ps(0.693359375f))),           \
                   P##_mul_ps(n_[j], P##_set1_ps(-2.12194440e-4f)));                            \
    VKC_EXP_UNROLL for (int j = 0; j < (n); j++) p_[j] = P##_add_ps(                           \
        P##_mul_ps(P##_set1_ps(1.9875691500e-4f), r_[j]), P##_set1_ps(1.3981999507e-3f));      \
    VKC_EXP_UNROLL for (int j = 0; j < (n); j++) p_[j] =                                       \
        P##_add_ps(P##_mul_ps(p_[j], r_[j]), P##_set1_ps(8.3334519073e-3f));                   \
    VKC_EXP_UNROLL for (int j = 0; j < (n); j++) p_[j] =                                       \
        P##_add_ps(P##_mul_ps(p_[j], r_[j]), P##_set1_ps(4.1665795894e-2f));                   \
    VKC_EXP_UNROLL for (int j = 0; j < (n); j++) p_[j] =                                       \
        P##_add_ps(P##_mul_ps(p_[j], r_[j]), P##_set1_ps(1.6666665459e-1f));                   \
    VKC_EXP_UNROLL for (int j = 0; j < (n); j++) p_[j] =                                       \
        P##_add_ps(P##_mul_ps(p_[j], r_[j]), P##_set1_ps(5.0000001201e-1f));                   \
    VKC_EXP_UNROLL for (int j = 0; j < (n); j++) p_[j] = P##_add_ps(                           \
        P##_add_ps(P##_mul_ps(P##_mul_ps(p_[j], r_[j]), r_[j]), r_[j]), P##_set1_ps(1.0f));     \
    VKC_EXP_UNROLL for (int j = 0; j < (n); j++) p_[j] = P##_mul_ps(p_[j], P##_castsi##W##_ps( \
        P##_slli_epi32(P##_add_epi32(P##_cvttps_epi32(n_[j]), P##_set1_epi32(127)), 23)))

VKC_TARGET_AVX512 static inline __attribute__((always_inline)) void
vkc_exp_fast512_n(__m512 *x, const int n) {
    VKC_EXP_N(__m512, _mm512, 512, x, n);
    VKC_EXP_UNROLL for (int j = 0; j < n; j++) {
        __m512 e = p_[j];
        e = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x[j], _mm512_set1_ps(VKC_EXP_LO), _CMP_LT_OQ),
                                 e, _mm512_setzero_ps());
        e = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x[j], _mm512_set1_ps(VKC_EXP_HI), _CMP_GT_OQ),
                                 e, _mm512_set1_ps(INFINITY));
        x[j] = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x[j], x[j], _CMP_UNORD_Q), e, x[j]);
    }
}

VKC_TARGET_AVX2 static inline __attribute__((always_inline)) void
vkc_exp_fast256_n(__m256 *x, const int n) {
    VKC_EXP_N(__m256, _mm256, 256, x, n);
    VKC_EXP_UNROLL for (int j = 0; j < n; j++) {
        __m256 e = p_[j];
        e = _mm256_blendv_ps(e, _mm256_setzero_ps(),
                             _mm256_cmp_ps(x[j], _mm256_set1_ps(VKC_EXP_LO), _CMP_LT_OQ));
        e = _mm256_blendv_ps(e, _mm256_set1_ps(INFINITY),
                             _mm256_cmp_ps(x[j], _mm256_set1_ps(VKC_EXP_HI), _CMP_GT_OQ));
        x[j] = _mm256_blendv_ps(e, x[j], _mm256_cmp_ps(x[j], x[j], _CMP_UNORD_Q));
    }
}
#undef VKC_EXP_N

VKC_TARGET_AVX512 static inline __m512 vkc_exp_fast512(__m512 x) {
    vkc_exp_fast512_n(&x, 1);
    return x;
}

VKC_TARGET_AVX2 static inline __m256 vkc_exp_fast256(__m256 x) {
    vkc_exp_fast256_n(&x, 1);
    return x;
}
#endif

#endif
