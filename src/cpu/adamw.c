/* AdamW (Loshchilov & Hutter 2019) with PyTorch's torch.optim.AdamW semantics
 * (shaders/adamw.comp). Float arithmetic, as on the GPU. */
#include "cpu/cpu_ops.h"

#include <math.h>

#include "vkattn.h" /* VKA_HYPER_* */

void vkc_adamw(float *param, const float *grad, float *m, float *v, const float *hyper,
               float gscale, size_t N, float weight_decay, int nt) {
    float lr = hyper[VKA_HYPER_LR], b1 = hyper[VKA_HYPER_BETA1], b2 = hyper[VKA_HYPER_BETA2];
    float eps = hyper[VKA_HYPER_EPS], bc1 = hyper[VKA_HYPER_BC1], bc2 = hyper[VKA_HYPER_BC2];
    if (gscale == 0.0f) return; /* NaN or inf gradients (vkc_grad_norm): no step at all */
    long n = (long)N;
    VKA_OMP_FOR(nt, n > VKA_OMP_MIN_WORK)
    for (long i = 0; i < n; i++) {
        float g = grad[i] * gscale;
        float mi = b1 * m[i] + (1.0f - b1) * g;
        float vi = b2 * v[i] + (1.0f - b2) * g * g;
        m[i] = mi;
        v[i] = vi;
        float update = (mi / bc1) / (sqrtf(vi / bc2) + eps) + weight_decay * param[i];
        param[i] -= lr * update;
    }
}

/* --- fast: the same arithmetic, vectorised ---------------------------------------------------- */
/* Scalar sqrtf and division bound the loop above (GPT-2 small: 0.6 s a step on two cores, for
 * 85M parameters that memory streams in 0.1 s). Vector sqrt and division are correctly rounded
 * like the scalar ones and nothing is contracted (ISO C: -ffp-contract=off), so the results are
 * bit-identical to the reference's. */
#if (defined(__GNUC__) || defined(__clang__)) && (defined(__x86_64__) || defined(__i386__))
#include <immintrin.h>
#define ADAMW_X86 1

typedef struct adamw_hyper {
    float lr, b1, b2, eps, bc1, bc2, wd, gscale;
} adamw_hyper;

/* The elements past the last whole vector: the reference's expression. */
static void adamw_tail(float *param, const float *grad, float *m, float *v, long n,
                       const adamw_hyper *h) {
    for (long i = 0; i < n; i++) {
        float g = grad[i] * h->gscale;
        float mi = h->b1 * m[i] + (1.0f - h->b1) * g;
        float vi = h->b2 * v[i] + (1.0f - h->b2) * g * g;
        m[i] = mi;
        v[i] = vi;
        float update = (mi / h->bc1) / (sqrtf(vi / h->bc2) + h->eps) + h->wd * param[i];
        param[i] -= h->lr * update;
    }
}

__attribute__((target("avx512f"))) static void adamw_avx512(float *param, const float *grad,
                                                            float *m, float *v, long n,
                                                            const adamw_hyper *h) {
    const __m512 gs = _mm512_set1_ps(h->gscale), b1 = _mm512_set1_ps(h->b1),
                 b2 = _mm512_set1_ps(h->b2), c1 = _mm512_set1_ps(1.0f - h->b1),
                 c2 = _mm512_set1_ps(1.0f - h->b2), bc1 = _mm512_set1_ps(h->bc1),
                 bc2 = _mm512_set1_ps(h->bc2), eps = _mm512_set1_ps(h->eps),
                 wd = _mm512_set1_ps(h->wd), lr = _mm512_set1_ps(h->lr);
    long i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 g = _mm512_mul_ps(_mm512_loadu_ps(grad + i), gs);
        __m512 mi = _mm512_add_ps(_mm512_mul_ps(b1, _mm512_loadu_ps(m + i)), _mm512_mul_ps(c1, g));
        __m512 vi = _mm512_add_ps(_mm512_mul_ps(b2, _mm512_loadu_ps(v + i)),
                                  _mm512_mul_ps(_mm512_mul_ps(c2, g), g));
        _mm512_storeu_ps(m + i, mi);
        _mm512_storeu_ps(v + i, vi);
        __m512 p = _mm512_loadu_ps(param + i);
        __m512 den = _mm512_add_ps(_mm512_sqrt_ps(_mm512_div_ps(vi, bc2)), eps);
        __m512 up = _mm512_add_ps(_mm512_div_ps(_mm512_div_ps(mi, bc1), den),
                                  _mm512_mul_ps(wd, p));
        _mm512_storeu_ps(param + i, _mm512_sub_ps(p, _mm512_mul_ps(lr, up)));
    }
    adamw_tail(param + i, grad + i, m + i, v + i, n - i, h);
}

__attribute__((target("avx2"))) static void adamw_avx2(float *param, const float *grad, float *m,
                                                      float *v, long n, const adamw_hyper *h) {
    const __m256 gs = _mm256_set1_ps(h->gscale), b1 = _mm256_set1_ps(h->b1),
                 b2 = _mm256_set1_ps(h->b2), c1 = _mm256_set1_ps(1.0f - h->b1),
                 c2 = _mm256_set1_ps(1.0f - h->b2), bc1 = _mm256_set1_ps(h->bc1),
                 bc2 = _mm256_set1_ps(h->bc2), eps = _mm256_set1_ps(h->eps),
                 wd = _mm256_set1_ps(h->wd), lr = _mm256_set1_ps(h->lr);
    long i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 g = _mm256_mul_ps(_mm256_loadu_ps(grad + i), gs);
        __m256 mi = _mm256_add_ps(_mm256_mul_ps(b1, _mm256_loadu_ps(m + i)), _mm256_mul_ps(c1, g));
        __m256 vi = _mm256_add_ps(_mm256_mul_ps(b2, _mm256_loadu_ps(v + i)),
                                  _mm256_mul_ps(_mm256_mul_ps(c2, g), g));
        _mm256_storeu_ps(m + i, mi);
        _mm256_storeu_ps(v + i, vi);
        __m256 p = _mm256_loadu_ps(param + i);
        __m256 den = _mm256_add_ps(_mm256_sqrt_ps(_mm256_div_ps(vi, bc2)), eps);
        __m256 up = _mm256_add_ps(_mm256_div_ps(_mm256_div_ps(mi, bc1), den),
                                  _mm256_mul_ps(wd, p));
        _mm256_storeu_ps(param + i, _mm256_sub_ps(p, _mm256_mul_ps(lr, up)));
    }
    adamw_tail(param + i, grad + i, m + i, v + i, n - i, h);
}
#endif

#define ADAMW_CHUNK 16384 /* parameters per work item */

void vkc_adamw_fast(float *param, const float *grad, float *m, float *v, const float *hyper,
                    float gscale, size_t N, float weight_decay, vkc_isa isa, int nt) {
#ifdef ADAMW_X86
    if ((isa == VKC_ISA_AVX512 || isa == VKC_ISA_AVX2) && gscale != 0.0f) {
        adamw_hyper h = {hyper[VKA_HYPER_LR], hyper[VKA_HYPER_BETA1], hyper[VKA_HYPER_BETA2],
                         hyper[VKA_HYPER_EPS], hyper[VKA_HYPER_BC1], hyper[VKA_HYPER_BC2],
                         weight_decay, gscale};
        long chunks = (long)((N + ADAMW_CHUNK - 1) / ADAMW_CHUNK);
        VKA_OMP_FOR(nt, N > VKA_OMP_MIN_WORK)
        for (long c = 0; c < chunks; c++) {
            size_t i0 = (size_t)c * ADAMW_CHUNK;
            long n = (long)(N - i0 < ADAMW_CHUNK ? N - i0 : ADAMW_CHUNK);
            if (isa == VKC_ISA_AVX512) adamw_avx512(param + i0, grad + i0, m + i0, v + i0, n, &h);
            else adamw_avx2(param + i0, grad + i0, m + i0, v + i0, n, &h);
        }
        return;
    }
#endif
    (void)isa;
    vkc_adamw(param, grad, m, v, hyper, gscale, N, weight_decay, nt);
}
