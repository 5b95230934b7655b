/* GELU, tanh approximation as GPT-2 (Hendrycks & Gimpel 2016) (shaders/gelu_forward.comp,
 * gelu_backward.comp).
 *
 * 0.5 (1 + tanh(u)) is evaluated as the logistic 1 / (1 + exp(-2u)): the same function, but
 * without the cancellation of 1 + tanh(u) for negative u, and finite for every finite x: u
 * overflows to +-inf for |x| > ~1e13, where exp gives 0 or inf and the result x or -0.
 * The fast variants (the CPU backend's default, VKATTN_CPU_KERNELS) compute the same formulas
 * with a polynomial exp, vectorised for AVX-512 and AVX2 (gelu_simd.h, one body per ISA: simd.h),
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

#define VKC_SIMD_BODY "cpu/gelu_simd.h" /* gelu_fwd_*, gelu_bwd_* */
#include "cpu/simd_each.h"

void vkc_gelu_forward_fast(float *out, const float *inp, size_t N, vkc_isa isa, int nt) {
#ifdef VKC_X86
    if (isa == VKC_ISA_AVX512 || isa == VKC_ISA_AVX2) {
        long chunks = (long)((N + GELU_CHUNK - 1) / GELU_CHUNK);
        VKA_OMP_FOR(nt, N > VKA_OMP_MIN_WORK)
        for (long c = 0; c < chunks; c++) {
            size_t i0 = (size_t)c * GELU_CHUNK;
            long n = (long)(N - i0 < GELU_CHUNK ? N - i0 : GELU_CHUNK);
            VKC_SIMD_PICK(isa, gelu_fwd)(out + i0, inp + i0, n);
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
            VKC_SIMD_PICK(isa, gelu_bwd)(dinp + i0, inp + i0, dout + i0, n);
        }
        return;
    }
#endif
    (void)isa;
    vkc_gelu_backward(dinp, inp, dout, N, nt);
}
