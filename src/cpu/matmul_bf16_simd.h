/* The bf16 matmul's widening tile (matmul_bf16.c), one instance per ISA (simd_each.h): the
 * block of op(b) widened to fp32 into NR-wide k-major panels, the block of op(a) widened into
 * rows, then the fast fp32 matmul's register block (mm_simd.h), each term one fused multiply-add
 * in k order. */

#include "cpu/mm_simd.h"

#undef BW_MR
#define BW_MR (VS_W == 16 ? 8 : 6)
VS_TARGET static void VS_NAME(bw_tile)(const bm_mm *mm, float *out, bm_view a, bm_view b, int i0,
                                       int mb, int j0, int nb) {
    enum { NR = 2 * VS_W };
    const int K = mm->K;
    _Alignas(64) float acc[BM_MB * BM_NB];
    _Alignas(64) float bp[BM_KC * BM_NB];
    _Alignas(64) float ab[BM_MB * BM_KC];
    int mbp = (mb + BW_MR - 1) / BW_MR * BW_MR, nbp = (nb + NR - 1) / NR * NR;
    for (int r = 0; r < mbp; r++) memset(acc + r * BM_NB, 0, (size_t)nbp * sizeof(float));
    for (int k0 = 0; k0 < K; k0 += BM_KC) {
        int kc = K - k0 < BM_KC ? K - k0 : BM_KC;
        for (int p = 0; p < nb; p += NR) {
            float *dst = bp + (size_t)p * kc;
            if (b.cs == 1 && nb - p >= NR) { /* rows of op(b) contiguous: NR a k, widened */
                for (int k = 0; k < kc; k++) {
                    const uint16_t *src = b.p + (size_t)(k0 + k) * b.rs + j0 + p;
                    for (int jj = 0; jj < NR; jj++) dst[k * NR + jj] = vkc_bf16_to_f32_1(src[jj]);
                }
                continue;
            }
            for (int k = 0; k < kc; k++)
                for (int jj = 0; jj < NR; jj++)
                    dst[k * NR + jj] = p + jj < nb ? vkc_bf16_to_f32_1(bm_at(b, k0 + k, j0 + p + jj))
                                                   : 0.0f;
        }
        for (int r = 0; r < mb; r++) {
            if (a.cs == 1) { /* rows of op(a) contiguous */
                const uint16_t *src = a.p + (size_t)(i0 + r) * a.rs + k0;
                for (int k = 0; k < kc; k++) ab[r * BM_KC + k] = vkc_bf16_to_f32_1(src[k]);
                continue;
            }
            for (int k = 0; k < kc; k++)
                ab[r * BM_KC + k] = vkc_bf16_to_f32_1(bm_at(a, i0 + r, k0 + k));
        }
        for (int p = 0; p < nb; p += NR)
            for (int r = 0; r < mb; r += BW_MR) {
                const float *rows[BW_MR];
                for (int q = 0; q < BW_MR; q++)
                    rows[q] = ab + (size_t)(r + q < mb ? r + q : mb - 1) * BM_KC;
                VS_NAME(vkc_mm_block)(acc + r * BM_NB + p, BM_NB, true, rows, NULL, 0, 1,
                                      bp + (size_t)p * kc, NR, kc, true, BW_MR, 2, NULL, false);
            }
    }
    bm_epilogue(mm, out, acc, i0, mb, j0, nb);
}
