/* GELU, tanh approximation as GPT-2 (Hendrycks & Gimpel 2016) (shaders/gelu_forward.comp,
 * gelu_backward.comp).
 *
 * 0.5 (1 + tanh(u)) is evaluated as the logistic 1 / (1 + exp(-2u)): the same function, but
 * without the cancellation of 1 + tanh(u) for negative u, and finite for every finite x: u
 * overflows to +-inf for |x| > ~1e13, where exp gives 0 or inf and the result x or -0.
 * The fast variants (the CPU backend's default, VKATTN_CPU_KERNELS) compute the same formulas
 * with a polynomial exp, vectorised for AVX-512 and AVX2 (target attributes, cpuid dispatch),
 * the same bits on either; without either, the reference runs. */
#include "cpu/cpu_ops.h"
#include "cpu/exp_fast.h"

#include <math.h>
#include <string.h>

#ifdef VKA_HAVE_OPENMP
#define VKC_SIMD VKA_PRAGMA(omp simd)
#else
#define VKC_SIMD
#endif

#define GELU_SCALE 0.7978845608028654f /* sqrt(2 / pi) */
#define GELU_CUBE 0.044715f

void vkc_gelu_forward(float *out, const float *inp, size_t N, int nt) {
    long n = (long)N;
    VKA_OMP_FOR(nt, n > VKA_OMP_MIN_WORK)
    for (long i = 0; i < n; i++) {
        float x = inp[i];
        float u = GELU_SCALE * (x + GELU_CUBE * x * x * x);
        out[i] = x / (1.0f + expf(-2.0f * u));
    }
}

void vkc_gelu_backward(float *dinp, const float *inp, const float *dout, size_t N, int nt) {
    long n = (long)N;
    VKA_OMP_FOR(nt, n > VKA_OMP_MIN_WORK)
    for (long i = 0; i < n; i++) {
        float x = inp[i];
        float u = GELU_SCALE * (x + GELU_CUBE * x * x * x);
        float e = expf(-2.0f * u);
        float s = 1.0f / (1.0f + e); /* 0.5 (1 + tanh u) */
        /* d/dx x s(2u) = s + x * 2 s (1 - s) u';  s (1 - s) = e / (1 + e)^2 = sech^2(u) / 4,
         * which underflows to 0 in both tails before x u' can overflow; skip it there so that
         * 0 * inf never happens. */
        float grad = s;
        if (e != 0.0f && !isinf(e)) {
            float ope = 1.0f + e;
            float sech2 = 4.0f * (e / ope / ope);
            float du = GELU_SCALE * (1.0f + 3.0f * GELU_CUBE * x * x);
            if (sech2 != 0.0f) grad += 0.5f * x * sech2 * du;
        }
        dinp[i] += grad * dout[i];
    }
}

/* --- fast: the same formulas with a vectorisable exp ---------------------------------------- */
/* exp_fast: exp_fast.h (within 2 ulp of expf; 0 below -87.33 where expf is subnormal: the GELU
 * formulas above give the same results to the last bit there; inf above 88.37, where expf gives
 * up to 2.4e38: both make x / (1 + e) zero to within 1e-38 and skip the backward's sech^2 term). */
#define exp_fast vkc_exp_fast

static inline void gelu_forward_block(float *out, const float *inp, long n) {
    VKC_SIMD
    for (long i = 0; i < n; i++) {
        float x = inp[i];
        float u = GELU_SCALE * (x + GELU_CUBE * x * x * x);
        out[i] = x / (1.0f + exp_fast(-2.0f * u));
    }
}

static inline void gelu_backward_block(float *dinp, const float *inp, const float *dout, long n) {
    VKC_SIMD
    for (long i = 0; i < n; i++) {
        float x = inp[i];
        float u = GELU_SCALE * (x + GELU_CUBE * x * x * x);
        float e = exp_fast(-2.0f * u);
        float ope = 1.0f + e;
        float s = 1.0f / ope;
        float sech2 = 4.0f * (e / ope / ope);
        float du = GELU_SCALE * (1.0f + 3.0f * GELU_CUBE * x * x);
        /* the reference's tails, as selects: no sech^2 term where e is 0 or inf (0 * inf) */
        int tail = (e == 0.0f) | (e == INFINITY) | (sech2 == 0.0f);
        float term = 0.5f * x * sech2 * du;
        float grad = s + (tail ? 0.0f : term);
        dinp[i] += grad * dout[i];
    }
}

#define GELU_CHUNK 4096 /* elements per work item */

#ifdef VKC_X86
__attribute__((target("avx512f"))) static void fwd_avx512(float *o, const float *x, long n) {
    gelu_forward_block(o, x, n);
}
__attribute__((target("avx512f"))) static void bwd_avx512(float *d, const float *x,
                                                          const float *g, long n) {
    gelu_backward_block(d, x, g, n);
}
/* GCC 12 does not vectorise the loops above for AVX2: the same operations in intrinsics (no
 * fused multiply-add, exp_fast.h's vector exp), so both ISAs give the same bits. */
VKC_TARGET_AVX2 static void fwd_avx2(float *o, const float *x, long n) {
    const __m256 scale = _mm256_set1_ps(GELU_SCALE), cube = _mm256_set1_ps(GELU_CUBE);
    const __m256 m2 = _mm256_set1_ps(-2.0f), one = _mm256_set1_ps(1.0f);
    long i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(x + i);
        __m256 c3 = _mm256_mul_ps(_mm256_mul_ps(_mm256_mul_ps(cube, v), v), v);
        __m256 u = _mm256_mul_ps(scale, _mm256_add_ps(v, c3));
        __m256 e = vkc_exp_fast256(_mm256_mul_ps(m2, u));
        _mm256_storeu_ps(o + i, _mm256_div_ps(v, _mm256_add_ps(one, e)));
    }
    gelu_forward_block(o + i, x + i, n - i);
}

VKC_TARGET_AVX2 static void bwd_avx2(float *d, const float *x, const float *g, long n) {
    const __m256 scale = _mm256_set1_ps(GELU_SCALE), cube = _mm256_set1_ps(GELU_CUBE);
    const __m256 cube3 = _mm256_set1_ps(3.0f * GELU_CUBE), m2 = _mm256_set1_ps(-2.0f);
    const __m256 one = _mm256_set1_ps(1.0f), four = _mm256_set1_ps(4.0f);
    const __m256 half = _mm256_set1_ps(0.5f), zero = _mm256_setzero_ps();
    const __m256 inf = _mm256_set1_ps(INFINITY);
    long i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(x + i);
        __m256 c3 = _mm256_mul_ps(_mm256_mul_ps(_mm256_mul_ps(cube, v), v), v);
        __m256 u = _mm256_mul_ps(scale, _mm256_add_ps(v, c3));
        __m256 e = vkc_exp_fast256(_mm256_mul_ps(m2, u));
        __m256 ope = _mm256_add_ps(one, e);
        __m256 sg = _mm256_div_ps(one, ope);
        __m256 sech2 = _mm256_mul_ps(four, _mm256_div_ps(_mm256_div_ps(e, ope), ope));
        __m256 x2 = _mm256_mul_ps(_mm256_mul_ps(cube3, v), v);
        __m256 du = _mm256_mul_ps(scale, _mm256_add_ps(one, x2));
        __m256 tail = _mm256_or_ps(_mm256_or_ps(_mm256_cmp_ps(e, zero, _CMP_EQ_OQ),
                                                _mm256_cmp_ps(e, inf, _CMP_EQ_OQ)),
                                   _mm256_cmp_ps(sech2, zero, _CMP_EQ_OQ));
        __m256 term = _mm256_mul_ps(_mm256_mul_ps(_mm256_mul_ps(half, v), sech2), du);
        __m256 grad = _mm256_add_ps(sg, _mm256_blendv_ps(term, zero, tail));
        __m256 di = _mm256_loadu_ps(d + i);
        _mm256_storeu_ps(d + i, _mm256_add_ps(di, _mm256_mul_ps(grad, _mm256_loadu_ps(g + i))));
    }
    gelu_backward_block(d + i, x + i, g + i, n - i);
}
#endif

void vkc_gelu_forward_fast(float *out, const float *inp, size_t N, vkc_isa isa, int nt) {
#ifdef VKC_X86
    if (isa == VKC_ISA_AVX512 || isa == VKC_ISA_AVX2) {
        long chunks = (long)((N + GELU_CHUNK - 1) / GELU_CHUNK);
        VKA_OMP_FOR(nt, N > VKA_OMP_MIN_WORK)
        for (long c = 0; c < chunks; c++) {
            size_t i0 = (size_t)c * GELU_CHUNK;
            long n = (long)(N - i0 < GELU_CHUNK ? N - i0 : GELU_CHUNK);
            if (isa == VKC_ISA_AVX512) fwd_avx512(out + i0, inp + i0, n);
            else fwd_avx2(out + i0, inp + i0, n);
        }
        return;
    }
#endif
    (void)isa;
    vkc_gelu_forward(out, inp, N, nt);
}

void vkc_gelu_backward_fast(float *dinp, const float *inp, const float *dout, size_t N,
                            vkc_isa isa, int nt) {
#ifdef VKC_X86
    if (isa == VKC_ISA_AVX512 || isa == VKC_ISA_AVX2) {
        long chunks = (long)((N + GELU_CHUNK - 1) / GELU_CHUNK);
        VKA_OMP_FOR(nt, N > VKA_OMP_MIN_WORK)
        for (long c = 0; c < chunks; c++) {
            size_t i0 = (size_t)c * GELU_CHUNK;
            long n = (long)(N - i0 < GELU_CHUNK ? N - i0 : GELU_CHUNK);
            if (isa == VKC_ISA_AVX512) bwd_avx512(dinp + i0, inp + i0, dout + i0, n);
            else bwd_avx2(dinp + i0, inp + i0, dout + i0, n);
        }
        return;
    }
#endif
    (void)isa;
    vkc_gelu_backward(dinp, inp, dout, N, nt);
}
