/* Multi-head split and merge of attention (shaders/permute_forward.comp, unpermute_*.comp):
 * qkv (B,T,3C) <-> q, k, v (B,NH,T,HS), and heads (B,NH,T,HS) <-> (B,T,C), C = NH*HS. */
#include "cpu/cpu_ops.h"

void vkc_permute_forward(float *q, float *k, float *v, const float *inp, int B, int T, int NH,
                         int HS, int nt) {
    size_t C = (size_t)NH * HS;
    long rows = (long)B * NH * T; /* one (b, h, t) row of HS per item */
    VKA_OMP_FOR(nt, (double)rows * HS > VKA_OMP_MIN_WORK)
    for (long r = 0; r < rows; r++) {
        long b = r / ((long)NH * T), h = (r / T) % NH, t = r % T;
        const float *src = inp + ((size_t)b * T + t) * 3 * C + (size_t)h * HS; // q part of (3C)
        size_t o = (size_t)r * HS;
        for (int d = 0; d < HS; d++) {
            q[o + d] = src[d];
            k[o + d] = src[C + d];
            v[o + d] = src[2 * C + d];
        }
    }
}

void vkc_permute_backward(float *dinp, const float *dq, const float *dk, const float *dv, int B,
                          int T, int NH, int HS, int nt) {
    size_t C = (size_t)NH * HS;
    long rows = (long)B * NH * T;
    VKA_OMP_FOR(nt, (double)rows * HS > VKA_OMP_MIN_WORK)
    for (long r = 0; r < rows; r++) {
        long b = r / ((long)NH * T), h = (r / T) % NH, t = r % T;
        float *dst = dinp + ((size_t)b * T + t) * 3 * C + (size_t)h * HS;
        size_t o = (size_t)r * HS;
        for (int d = 0; d < HS; d++) {
            dst[d] += dq[o + d];
            dst[C + d] += dk[o + d];
            dst[2 * C + d] += dv[o + d];
        }
    }
}

void vkc_unpermute_forward(float *out, const float *inp, int B, int T, int NH, int HS, int nt) {
    size_t C = (size_t)NH * HS;
    long rows = (long)B * NH * T;
    VKA_OMP_FOR(nt, (double)rows * HS > VKA_OMP_MIN_WORK)
    for (long r = 0; r < rows; r++) {
        long b = r / ((long)NH * T), h = (r / T) % NH, t = r % T;
        float *dst = out + ((size_t)b * T + t) * C + (size_t)h * HS;
        const float *src = inp + (size_t)r * HS;
        for (int d = 0; d < HS; d++) dst[d] = src[d];
    }
}

void vkc_unpermute_backward(float *dinp, const float *dout, int B, int T, int NH, int HS,
                            int nt) {
    size_t C = (size_t)NH * HS;
    long rows = (long)B * NH * T;
    VKA_OMP_FOR(nt, (double)rows * HS > VKA_OMP_MIN_WORK)
    for (long r = 0; r < rows; r++) {
        long b = r / ((long)NH * T), h = (r / T) % NH, t = r % T;
        const float *src = dout + ((size_t)b * T + t) * C + (size_t)h * HS;
        float *dst = dinp + (size_t)r * HS;
        for (int d = 0; d < HS; d++) dst[d] += src[d];
    }
}
