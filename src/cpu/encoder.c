/* Token + position embedding (shaders/encoder_forward.comp, encoder_backward_wte.comp, encoder_backward_wpe.comp). */
#include "cpu/cpu_ops.h"

void vkc_encoder_forward(float *out, const int32_t *tokens, const float *wte, const float *wpe,
                         int B, int T, int C, int nt) {
    long BT = (long)B * T;
    VKA_OMP_FOR(nt, (double)BT * C > VKA_OMP_MIN_WORK)
    for (long p = 0; p < BT; p++) {
        float *o = out + (size_t)p * C;                 // (C)
        const float *te = wte + (size_t)tokens[p] * C;  // (C)
        const float *pe = wpe + (size_t)(p % T) * C;    // (C)
        for (int c = 0; c < C; c++) o[c] = te[c] + pe[c];
    }
}

void vkc_encoder_backward(float *dwte, float *dwpe, const float *dout, const int32_t *tokens,
                          int B, int T, int C, int nt) {
    /* Columns are independent: each work item takes a block of channels and walks the positions
     * in order b*T+t, so every dwte/dwpe element is summed in the same order on any number of
     * threads (no atomics, no dependence on the buckets' host grouping). */
    int blocks = (C + VKA_COL_BLOCK - 1) / VKA_COL_BLOCK;
    long BT = (long)B * T;
    VKA_OMP_FOR(nt, (double)BT * C > VKA_OMP_MIN_WORK)
    for (int bl = 0; bl < blocks; bl++) {
        int c0 = bl * VKA_COL_BLOCK, w = C - c0 < VKA_COL_BLOCK ? C - c0 : VKA_COL_BLOCK;
        for (long p = 0; p < BT; p++) {
            const float *d = dout + (size_t)p * C + c0;
            float *te = dwte + (size_t)tokens[p] * C + c0;
            float *pe = dwpe + (size_t)(p % T) * C + c0;
            for (int j = 0; j < w; j++) {
                te[j] += d[j];
                pe[j] += d[j];
            }
        }
    }
}
