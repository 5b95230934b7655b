/* Token + position embedding (shaders/encoder_forward.comp, encoder_backward_wte.comp, encoder_backward_wpe.comp). */
#include "cpu/convert.h"
#include "cpu/cpu_ops.h"
#include "vkattn.h" /* vka_dtype */

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

/* Elements [c0, c0 + n) of row r (C each) of x (dtype) widened into buf, or x's own f32 ones. */
static const float *row_f32(const void *x, int dtype, size_t r, int C, int c0, int n, float *buf,
                            unsigned cvt) {
    size_t e = r * (size_t)C + (size_t)c0;
    if (dtype == VKA_F32) return (const float *)x + e;
    vkc_convert_serial(buf, VKA_F32, (const uint16_t *)x + e, dtype, (size_t)n, cvt);
    return buf;
}

/* Elementwise, so chunks of a row give the f32 op's sums whatever their length. */
#define ENC16_CHUNK 256

void vkc_encoder_forward16(void *out, int out_dtype, const int32_t *tokens, const void *wte,
                           int wte_dtype, const void *wpe, int wpe_dtype, int B, int T, int C,
                           unsigned cvt, int nt) {
    long BT = (long)B * T;
    VKA_OMP_FOR(nt, (double)BT * C > VKA_OMP_MIN_WORK / 4)
    for (long p = 0; p < BT; p++) {
        float te_buf[ENC16_CHUNK], pe_buf[ENC16_CHUNK], sum[ENC16_CHUNK];
        for (int c0 = 0; c0 < C; c0 += ENC16_CHUNK) {
            int n = C - c0 < ENC16_CHUNK ? C - c0 : ENC16_CHUNK;
            const float *te = row_f32(wte, wte_dtype, (size_t)tokens[p], C, c0, n, te_buf, cvt);
            const float *pe = row_f32(wpe, wpe_dtype, (size_t)(p % T), C, c0, n, pe_buf, cvt);
            size_t e = (size_t)p * C + (size_t)c0; /* out's element */
            float *o = out_dtype == VKA_F32 ? (float *)out + e : sum;
            for (int c = 0; c < n; c++) o[c] = te[c] + pe[c];
            if (out_dtype != VKA_F32)
                vkc_convert_serial((uint16_t *)out + e, out_dtype, sum, VKA_F32, (size_t)n, cvt);
        }
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
