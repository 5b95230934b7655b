/* GELU, tanh approximation as GPT-2 (Hendrycks & Gimpel 2016) (shaders/gelu_forward.comp,
 * gelu_backward.comp).
 *
 * 0.5 (1 + tanh(u)) is evaluated as the logistic 1 / (1 + exp(-2u)): the same function, but
 * without the cancellation of 1 + tanh(u) for negative u, and finite for every finite x: u
 * overflows to +-inf for |x| > ~1e13, where exp gives 0 or inf and the result x or -0. */
#include "cpu/cpu_ops.h"

#include <math.h>

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
