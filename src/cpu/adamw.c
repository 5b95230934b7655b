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
