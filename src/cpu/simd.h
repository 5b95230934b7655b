/* The CPU backend's one way to write a fast kernel for AVX-512 and AVX2 (as ggml-cpu's
 * simd-mappings.h): a kernel body is written once, in `<op>_simd.h`, against the VS_ names
 * below, and instantiated once per ISA by
 *
 *     #define VKC_SIMD_BODY "cpu/adamw_simd.h"
 *     #include "cpu/simd_each.h"
 *
 * which includes this file and the body with VKC_SIMD_WIDTH 512, then again with 256. Each
 * instance is compiled for its ISA by a target attribute (VS_TARGET), so a baseline x86-64 build
 * carries both and still runs on any x86-64; cpuid chooses at run time (vkc_cpu_isa), and
 * VKC_SIMD_PICK(isa, name) names the instance for isa.
 *
 * Every VS_ arithmetic operation rounds once per lane (VS_FMA: a fused multiply-add, the others
 * as written; nothing is contracted: -ffp-contract=off), so a body states the order of its
 * floating-point operations exactly and both instances compute the same per-lane operations;
 * VS_EXP is exp_fast.h's polynomial, the same bits as vkc_exp_fast. What crosses lanes
 * (VS_REDUCE_*, VS_DOT_F64) is a fixed tree per ISA, so those results may differ between the
 * ISAs, never between runs or thread counts. Where the ISAs were tuned apart (masked loads,
 * block shapes) a body asks VS_MASK_CHEAP or VS_W.
 *
 * The first part (guarded) is what every CPU file may use; the second is redefined on every
 * include for the VKC_SIMD_WIDTH being instantiated. */
#ifndef VKA_CPU_SIMD_H
#define VKA_CPU_SIMD_H

#if (defined(__GNUC__) || defined(__clang__)) && (defined(__x86_64__) || defined(__i386__))
#define VKC_X86 1
#include <immintrin.h>
#include <stdint.h>
/* Functions compiled for an ISA that cpuid chose at run time (vkc_cpu_isa). */
#define VKC_TARGET_AVX512 __attribute__((target("avx512f,avx2,fma")))
#define VKC_TARGET_AVX2 __attribute__((target("avx2,fma")))
/* The instance of a body's function `name` for isa (VKC_ISA_AVX512 or VKC_ISA_AVX2). */
#define VKC_SIMD_PICK(isa, name) ((isa) == VKC_ISA_AVX512 ? name##_avx512 : name##_avx2)
#endif

/* Inlined with constant counts into an instance, so its accumulator arrays live in registers. */
#if defined(__GNUC__) || defined(__clang__)
#define VS_INLINE static inline __attribute__((always_inline))
#else
#define VS_INLINE static inline
#endif
#if defined(__clang__)
#define VS_UNROLL _Pragma("unroll")
#elif defined(__GNUC__)
#define VS_UNROLL _Pragma("GCC unroll 16")
#else
#define VS_UNROLL
#endif

#ifdef VKC_X86
/* The classic 8 x 8 transpose of r[0 .. 8) (row e, lanes d): unpack, shuffle, swap 128-bit
 * halves. */
VKC_TARGET_AVX2 VS_INLINE void vkc_transpose8(__m256 *r) {
    __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
    __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
    __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
    __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
    __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
    __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
    __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
    __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
    r[0] = _mm256_permute2f128_ps(u0, u4, 0x20);
    r[1] = _mm256_permute2f128_ps(u1, u5, 0x20);
    r[2] = _mm256_permute2f128_ps(u2, u6, 0x20);
    r[3] = _mm256_permute2f128_ps(u3, u7, 0x20);
    r[4] = _mm256_permute2f128_ps(u0, u4, 0x31);
    r[5] = _mm256_permute2f128_ps(u1, u5, 0x31);
    r[6] = _mm256_permute2f128_ps(u2, u6, 0x31);
    r[7] = _mm256_permute2f128_ps(u3, u7, 0x31);
}

/* The permutation indices of one stage of vkc_transpose16. */
VKC_TARGET_AVX512 static inline void vkc_transpose16_index(int h, __m512i *lo, __m512i *hi) {
    int l0[16], h0[16];
    for (int l = 0; l < 16; l++) {
        l0[l] = (l & h) ? 16 + l - h : l;
        h0[l] = (l & h) ? 16 + l : l + h;
    }
    *lo = _mm512_loadu_si512(l0);
    *hi = _mm512_loadu_si512(h0);
}

/* One stage of vkc_transpose16: lane l of rows i and i + h (i & h == 0) from lanes of both. */
VKC_TARGET_AVX512 VS_INLINE void vkc_transpose16_stage(__m512 *t, const int h) {
    __m512i lo = _mm512_setzero_si512(), hi = _mm512_setzero_si512();
    vkc_transpose16_index(h, &lo, &hi);
    VS_UNROLL
    for (int i = 0; i < 16; i++)
        if (!(i & h)) {
            __m512 x = t[i], y = t[i + h];
            t[i] = _mm512_permutex2var_ps(x, lo, y);
            t[i + h] = _mm512_permutex2var_ps(x, hi, y);
        }
}

/* t[q] (row q, lanes k) := its transpose, by swapping the off-diagonal blocks of 8, 4, 2 and 1. */
VKC_TARGET_AVX512 static inline void vkc_transpose16(__m512 t[16]) {
    vkc_transpose16_stage(t, 8);
    vkc_transpose16_stage(t, 4);
    vkc_transpose16_stage(t, 2);
    vkc_transpose16_stage(t, 1);
}

/* The lanes below n of a vector. */
VKC_TARGET_AVX512 static inline __mmask16 vkc_lanes16(int n) {
    return (__mmask16)(n <= 0 ? 0 : n >= 16 ? 0xFFFF : (1u << n) - 1);
}
VKC_TARGET_AVX2 static inline __m256i vkc_lanes8(int n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* The largest and the sum of the 8 lanes: halves, then quarters, then pairs. (AVX-512: the
 * compiler's _mm512_reduce_*_ps, the same halving tree from 16 lanes.) */
VKC_TARGET_AVX2 static inline float vkc_hmax8(__m256 v) {
    __m128 x = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    x = _mm_max_ps(x, _mm_movehl_ps(x, x));
    return _mm_cvtss_f32(_mm_max_ss(x, _mm_movehdup_ps(x)));
}
VKC_TARGET_AVX2 static inline float vkc_hsum8(__m256 v) {
    __m128 x = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    x = _mm_add_ps(x, _mm_movehl_ps(x, x));
    return _mm_cvtss_f32(_mm_add_ss(x, _mm_movehdup_ps(x)));
}

/* sum x[d] * y[d] over d < n in double, a fixed tree per ISA: AVX-512 two 8-lane fused
 * multiply-add accumulators (16 floats a step, the last step masked), AVX2 one of 4 lanes and
 * the last n % 4 terms one at a time. */
VKC_TARGET_AVX512 static inline double vkc_dot_f64_avx512(const float *x, const float *y, int n) {
    __m512d lo = _mm512_setzero_pd(), hi = _mm512_setzero_pd();
    for (int d = 0; d < n; d += 16) {
        __mmask16 k = vkc_lanes16(n - d);
        __m512 xv = _mm512_maskz_loadu_ps(k, x + d), yv = _mm512_maskz_loadu_ps(k, y + d);
        lo = _mm512_fmadd_pd(_mm512_cvtps_pd(_mm512_castps512_ps256(xv)),
                             _mm512_cvtps_pd(_mm512_castps512_ps256(yv)), lo);
        __m256 xh = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(xv), 1));
        __m256 yh = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(yv), 1));
        hi = _mm512_fmadd_pd(_mm512_cvtps_pd(xh), _mm512_cvtps_pd(yh), hi);
    }
    return _mm512_reduce_add_pd(_mm512_add_pd(lo, hi));
}
VKC_TARGET_AVX2 static inline double vkc_dot_f64_avx2(const float *x, const float *y, int n) {
    __m256d acc = _mm256_setzero_pd();
    int d = 0;
    for (; d + 4 <= n; d += 4)
        acc = _mm256_fmadd_pd(_mm256_cvtps_pd(_mm_loadu_ps(x + d)),
                              _mm256_cvtps_pd(_mm_loadu_ps(y + d)), acc);
    __m128d s = _mm_add_pd(_mm256_castpd256_pd128(acc), _mm256_extractf128_pd(acc, 1));
    double sum = _mm_cvtsd_f64(_mm_add_sd(s, _mm_unpackhi_pd(s, s)));
    for (; d < n; d++) sum += (double)x[d] * y[d];
    return sum;
}

/* 16-bit formats, VS_W elements at a time (convert_simd.h; the scalar reference is convert.c):
 * bf16 widens by a shift (exact); narrows round-to-nearest-even in integer arithmetic exactly
 * as VCVTNEPS2BF16 does (Intel SDM: zero or subnormal -> signed zero, NaN -> its top 16 bits
 * with the quiet bit set), for CPUs without AVX512-BF16. fp16: F16C's VCVTPH2PS / VCVTPS2PH
 * (AVX-512F has their 512-bit forms), round-to-nearest-even. */
#define VKC_TARGET_AVX2_F16C __attribute__((target("avx2,fma,f16c")))
VKC_TARGET_AVX512 VS_INLINE __m512 vkc_bf16_load16(const uint16_t *p) {
    __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)p));
    return _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
}
VKC_TARGET_AVX512 VS_INLINE void vkc_bf16_store16(uint16_t *p, __m512 v) {
    __m512i u = _mm512_castps_si512(v);
    __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    __m512i r = _mm512_srli_epi32(
        _mm512_add_epi32(u, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7FFF))), 16);
    __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    __mmask16 tiny = _mm512_testn_epi32_mask(u, _mm512_set1_epi32(0x7F800000));
    __m512i hi = _mm512_srli_epi32(u, 16);
    r = _mm512_mask_or_epi32(r, nan, hi, _mm512_set1_epi32(0x40));
    r = _mm512_mask_and_epi32(r, tiny, hi, _mm512_set1_epi32(0x8000));
    _mm256_storeu_si256((__m256i *)p, _mm512_cvtepi32_epi16(r));
}
VKC_TARGET_AVX512 VS_INLINE __m512 vkc_f16_load16(const uint16_t *p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p));
}
VKC_TARGET_AVX512 VS_INLINE void vkc_f16_store16(uint16_t *p, __m512 v) {
    _mm256_storeu_si256((__m256i *)p,
                        _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}
VKC_TARGET_AVX2 VS_INLINE __m256 vkc_bf16_load8(const uint16_t *p) {
    __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
}
VKC_TARGET_AVX2 VS_INLINE void vkc_bf16_store8(uint16_t *p, __m256 v) {
    __m256i u = _mm256_castps_si256(v);
    __m256i hi = _mm256_srli_epi32(u, 16);
    __m256i lsb = _mm256_and_si256(hi, _mm256_set1_epi32(1));
    __m256i r = _mm256_srli_epi32(
        _mm256_add_epi32(u, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7FFF))), 16);
    __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    __m256i tiny = _mm256_cmpeq_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x7F800000)),
                                      _mm256_setzero_si256());
    r = _mm256_blendv_epi8(r, _mm256_or_si256(hi, _mm256_set1_epi32(0x40)), nan);
    r = _mm256_blendv_epi8(r, _mm256_and_si256(hi, _mm256_set1_epi32(0x8000)), tiny);
    /* every lane is below 2^16: the unsigned saturating pack keeps it; it packs per 128-bit
     * half, so gather the two halves' low quadwords */
    __m256i pk = _mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0x08);
    _mm_storeu_si128((__m128i *)p, _mm256_castsi256_si128(pk));
}
VKC_TARGET_AVX2_F16C VS_INLINE __m256 vkc_f16_load8(const uint16_t *p) {
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
}
VKC_TARGET_AVX2_F16C VS_INLINE void vkc_f16_store8(uint16_t *p, __m256 v) {
    _mm_storeu_si128((__m128i *)p,
                     _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}
#endif

#endif

#if defined(VKC_SIMD_WIDTH) && defined(VKC_X86)
#undef VS_TARGET
#undef VS_NAME
#undef VS_NAME_
#undef VS_W
#undef VS_F32
#undef VS_LOAD
#undef VS_STORE
#undef VS_SET1
#undef VS_BCAST
#undef VS_ZERO
#undef VS_ADD
#undef VS_SUB
#undef VS_MUL
#undef VS_DIV
#undef VS_SQRT
#undef VS_FMA
#undef VS_MASK
#undef VS_LANES
#undef VS_LOAD_M
#undef VS_TRANSPOSE
#undef VS_STORE_M
#undef VS_MASK_CHEAP
#undef VS_MAX
#undef VS_BLEND
#undef VS_MASK_NEQ
#undef VS_MUL_NZ
#undef VS_NAN_OR
#undef VS_ANY_NZ
#undef VS_REDUCE_MAX
#undef VS_REDUCE_ADD
#undef VS_DOT_F64
#undef VS_EXP_N
#undef VS_EXP
#undef VS_CMP_EQ
#undef VS_MASK_OR
#undef VS_TARGET_F16C
#undef VS_LOAD_BF16
#undef VS_STORE_BF16
#undef VS_LOAD_F16
#undef VS_STORE_F16

#if VKC_SIMD_WIDTH == 512
#define VS_TARGET VKC_TARGET_AVX512
#define VS_NAME_(name) name##_avx512
#define VS_W 16
#define VS_F32 __m512
#define VS_LOAD(p) _mm512_loadu_ps(p)
#define VS_STORE(p, v) _mm512_storeu_ps(p, v)
#define VS_SET1(x) _mm512_set1_ps(x)
/* *p in every lane (folded into the FMA that uses it) */
#define VS_BCAST(p) _mm512_set1_ps(*(p))
#define VS_ZERO() _mm512_setzero_ps()
#define VS_ADD(a, b) _mm512_add_ps(a, b)
#define VS_SUB(a, b) _mm512_sub_ps(a, b)
#define VS_MUL(a, b) _mm512_mul_ps(a, b)
#define VS_DIV(a, b) _mm512_div_ps(a, b)
#define VS_SQRT(a) _mm512_sqrt_ps(a)
#define VS_FMA(a, b, c) _mm512_fmadd_ps(a, b, c) /* a * b + c, one rounding */
#define VS_MASK __mmask16
#define VS_LANES(n) vkc_lanes16(n) /* the lanes below n */
#define VS_LOAD_M(p, mask) _mm512_maskz_loadu_ps(mask, p) /* 0 in the other lanes */
#define VS_TRANSPOSE(t) vkc_transpose16(t) /* t[0 .. VS_W) transposed */
#define VS_STORE_M(p, mask, v) _mm512_mask_storeu_ps(p, mask, v) /* only the mask's lanes */
/* 1: masked loads and stores cost what plain ones do, so a kernel may mask every vector; 0: plain
 * ones for whole vectors (AVX2's masked ones are slower on AMD) */
#define VS_MASK_CHEAP 1
/* max(a, b): b where either is NaN */
#define VS_MAX(a, b) _mm512_max_ps(a, b)
/* the lanes of mask from b, the others from a */
#define VS_BLEND(mask, a, b) _mm512_mask_blend_ps(mask, a, b)
/* the lanes of mask where a != b (or either is NaN) */
#define VS_MASK_NEQ(mask, a, b) _mm512_mask_cmp_ps_mask(mask, a, b, _CMP_NEQ_UQ)
/* a * b where z != 0 (or NaN), +0 elsewhere */
#define VS_MUL_NZ(z, a, b) \
    _mm512_maskz_mul_ps(_mm512_cmp_ps_mask(z, _mm512_setzero_ps(), _CMP_NEQ_UQ), a, b)
/* acc | (y - y) bitwise: stays +0 while every y is finite (y - y is NaN for NaN and +-inf) */
#define VS_NAN_OR(acc, y)                                                                      \
    _mm512_castsi512_ps(                                                                       \
        _mm512_or_si512(_mm512_castps_si512(acc), _mm512_castps_si512(_mm512_sub_ps(y, y))))
/* whether a lane of v is not 0 */
#define VS_ANY_NZ(v) (_mm512_cmp_ps_mask(v, _mm512_setzero_ps(), _CMP_NEQ_UQ) != 0)
#define VS_REDUCE_MAX(v) _mm512_reduce_max_ps(v)
#define VS_REDUCE_ADD(v) _mm512_reduce_add_ps(v)
#define VS_DOT_F64(x, y, n) vkc_dot_f64_avx512(x, y, n)
/* exp_fast.h's exp of x[0 .. n) in place, n <= 4 (a constant) */
#define VS_EXP_N(x, n) vkc_exp_fast512_n(x, n)
#define VS_EXP(x) vkc_exp_fast512(x)
/* the lanes where a == b (ordered), and the union of two such masks */
#define VS_CMP_EQ(a, b) _mm512_cmp_ps_mask(a, b, _CMP_EQ_OQ)
#define VS_MASK_OR(m1, m2) ((__mmask16)((m1) | (m2)))
/* VS_W 16-bit elements <-> a vector (simd.h's helpers above); VS_TARGET_F16C: what the fp16 ones
 * need (AVX-512F has them; AVX2 needs F16C besides) */
#define VS_TARGET_F16C VKC_TARGET_AVX512
#define VS_LOAD_BF16(p) vkc_bf16_load16(p)
#define VS_STORE_BF16(p, v) vkc_bf16_store16(p, v)
#define VS_LOAD_F16(p) vkc_f16_load16(p)
#define VS_STORE_F16(p, v) vkc_f16_store16(p, v)
#elif VKC_SIMD_WIDTH == 256
#define VS_TARGET VKC_TARGET_AVX2
#define VS_NAME_(name) name##_avx2
#define VS_W 8
#define VS_F32 __m256
#define VS_LOAD(p) _mm256_loadu_ps(p)
#define VS_STORE(p, v) _mm256_storeu_ps(p, v)
#define VS_SET1(x) _mm256_set1_ps(x)
#define VS_BCAST(p) _mm256_broadcast_ss(p)
#define VS_ZERO() _mm256_setzero_ps()
#define VS_ADD(a, b) _mm256_add_ps(a, b)
#define VS_SUB(a, b) _mm256_sub_ps(a, b)
#define VS_MUL(a, b) _mm256_mul_ps(a, b)
#define VS_DIV(a, b) _mm256_div_ps(a, b)
#define VS_SQRT(a) _mm256_sqrt_ps(a)
#define VS_FMA(a, b, c) _mm256_fmadd_ps(a, b, c)
#define VS_MASK __m256i
#define VS_LANES(n) vkc_lanes8(n)
#define VS_LOAD_M(p, mask) _mm256_maskload_ps(p, mask)
#define VS_TRANSPOSE(t) vkc_transpose8(t)
#define VS_STORE_M(p, mask, v) _mm256_maskstore_ps(p, mask, v)
#define VS_MASK_CHEAP 0
#define VS_MAX(a, b) _mm256_max_ps(a, b)
#define VS_BLEND(mask, a, b) _mm256_blendv_ps(a, b, _mm256_castsi256_ps(mask))
#define VS_MASK_NEQ(mask, a, b) \
    _mm256_castps_si256(_mm256_and_ps(_mm256_castsi256_ps(mask), _mm256_cmp_ps(a, b, _CMP_NEQ_UQ)))
#define VS_MUL_NZ(z, a, b) \
    _mm256_and_ps(_mm256_mul_ps(a, b), _mm256_cmp_ps(z, _mm256_setzero_ps(), _CMP_NEQ_UQ))
#define VS_NAN_OR(acc, y) _mm256_or_ps(acc, _mm256_sub_ps(y, y))
#define VS_ANY_NZ(v) (_mm256_movemask_ps(_mm256_cmp_ps(v, _mm256_setzero_ps(), _CMP_NEQ_UQ)) != 0)
#define VS_REDUCE_MAX(v) vkc_hmax8(v)
#define VS_REDUCE_ADD(v) vkc_hsum8(v)
#define VS_DOT_F64(x, y, n) vkc_dot_f64_avx2(x, y, n)
#define VS_EXP_N(x, n) vkc_exp_fast256_n(x, n)
#define VS_EXP(x) vkc_exp_fast256(x)
#define VS_CMP_EQ(a, b) _mm256_castps_si256(_mm256_cmp_ps(a, b, _CMP_EQ_OQ))
#define VS_MASK_OR(m1, m2) _mm256_or_si256(m1, m2)
#define VS_TARGET_F16C VKC_TARGET_AVX2_F16C
#define VS_LOAD_BF16(p) vkc_bf16_load8(p)
#define VS_STORE_BF16(p, v) vkc_bf16_store8(p, v)
#define VS_LOAD_F16(p) vkc_f16_load8(p)
#define VS_STORE_F16(p, v) vkc_f16_store8(p, v)
#else
#error "VKC_SIMD_WIDTH is 512 or 256"
#endif
/* name_avx512 or name_avx2: a body's functions, one per instance */
#define VS_NAME(name) VS_NAME_(name)
#endif
