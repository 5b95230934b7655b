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
#include "cpu/simd.h"

#ifdef VKC_X86
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

#define VKC_SIMD_BODY "cpu/adamw_simd.h"
#include "cpu/simd_each.h"
#endif

#define ADAMW_CHUNK 16384 /* parameters per work item */

void vkc_adamw_fast(float *param, const float *grad, float *m, float *v, const float *hyper,
                    float gscale, size_t N, float weight_decay, vkc_isa isa, int nt) {
#ifdef VKC_X86
    if ((isa == VKC_ISA_AVX512 || isa == VKC_ISA_AVX2) && gscale != 0.0f) {
        adamw_hyper h = {hyper[VKA_HYPER_LR], hyper[VKA_HYPER_BETA1], hyper[VKA_HYPER_BETA2],
                         hyper[VKA_HYPER_EPS], hyper[VKA_HYPER_BC1], hyper[VKA_HYPER_BC2],
                         weight_decay, gscale};
        long chunks = (long)((N + ADAMW_CHUNK - 1) / ADAMW_CHUNK);
        VKA_OMP_FOR(nt, N > VKA_OMP_MIN_WORK)
        for (long c = 0; c < chunks; c++) {
            size_t i0 = (size_t)c * ADAMW_CHUNK;
            long n = (long)(N - i0 < ADAMW_CHUNK ? N - i0 : ADAMW_CHUNK);
            VKC_SIMD_PICK(isa, adamw_vec)(param + i0, grad + i0, m + i0, v + i0, n, &h);
        }
        return;
    }
#endif
    (void)isa;
    vkc_adamw(param, grad, m, v, hyper, gscale, N, weight_decay, nt);
}
