/* Layer normalisation (Ba et al. 2016), forward and backward as llm.c
 * (shaders/layernorm_forward.comp, layernorm_backward.comp). */
#include "cpu/cpu_ops.h"

#include <math.h>

#define LN_EPS 1e-5

void vkc_layernorm_forward(float *out, float *mean, float *rstd, const float *inp,
                           const float *weight, const float *bias, int N, int C, int nt) {
    VKA_OMP_FOR(nt, (double)N * C > VKA_OMP_MIN_WORK / 4)
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * C; // (C)
        float *o = out + (size_t)n * C;       // (C)
        /* Two passes: E[(x - m)^2] has no cancellation, unlike E[x^2] - m^2 (think of
         * [40000, 40001, 40002, 40003]). */
        double m = 0.0;
        for (int c = 0; c < C; c++) m += x[c];
        m /= C;
        double var = 0.0;
        for (int c = 0; c < C; c++) {
            double d = x[c] - m;
            var += d * d;
        }
        var /= C;
        float mf = (float)m, rf = (float)(1.0 / sqrt(var + LN_EPS));
        for (int c = 0; c < C; c++) o[c] = (x[c] - mf) * rf * weight[c] + bias[c];
        mean[n] = mf;
        rstd[n] = rf;
    }
}

void vkc_layernorm_backward(float *dinp, float *dweight, float *dbias, const float *dout,
                            const float *inp, const float *weight, const float *mean,
                            const float *rstd, int N, int C, int nt) {
    /* dinp: rows are independent. */
    VKA_OMP_FOR(nt, (double)N * C > VKA_OMP_MIN_WORK / 4)
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * C, *d = dout + (size_t)n * C;
        float *di = dinp + (size_t)n * C;
        float m = mean[n], r = rstd[n];
        double dnorm_mean = 0.0, dnorm_norm_mean = 0.0;
        for (int c = 0; c < C; c++) {
            double dnorm = (double)weight[c] * d[c];
            dnorm_mean += dnorm;
            dnorm_norm_mean += dnorm * ((x[c] - m) * r);
        }
        dnorm_mean /= C;
        dnorm_norm_mean /= C;
        for (int c = 0; c < C; c++) {
            double norm = (x[c] - m) * r;
            double dval = (double)weight[c] * d[c] - dnorm_mean - norm * dnorm_norm_mean;
            di[c] = (float)(di[c] + dval * r);
        }
    }
    /* dweight, dbias: sums over rows; blocks of columns are independent, rows go in order. */
    int blocks = (C + VKA_COL_BLOCK - 1) / VKA_COL_BLOCK;
    VKA_OMP_FOR(nt, (double)N * C > VKA_OMP_MIN_WORK)
    for (int bl = 0; bl < blocks; bl++) {
        int c0 = bl * VKA_COL_BLOCK, w = C - c0 < VKA_COL_BLOCK ? C - c0 : VKA_COL_BLOCK;
        double dw[VKA_COL_BLOCK] = {0}, db[VKA_COL_BLOCK] = {0};
        for (int n = 0; n < N; n++) {
            const float *x = inp + (size_t)n * C + c0, *d = dout + (size_t)n * C + c0;
            float m = mean[n], r = rstd[n];
            for (int j = 0; j < w; j++) {
                float norm = (x[j] - m) * r;
                dw[j] += (double)norm * d[j];
                db[j] += d[j];
            }
        }
        for (int j = 0; j < w; j++) {
            dweight[c0 + j] = (float)(dweight[c0 + j] + dw[j]);
            dbias[c0 + j] = (float)(dbias[c0 + j] + db[j]);
        }
    }
}
