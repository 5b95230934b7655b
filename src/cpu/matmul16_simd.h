/* The 16-bit matmul's widening tile (matmul16.c), one instance per ISA (simd_each.h), for bf16
 * and fp16 alike: the block of op(b) widened to fp32 into NR-wide k-major panels, the block of
 * op(a) widened into rows (bm_widen, the type's conversion), then the fast fp32 matmul's
 * register block (mm_simd.h), each term one fused multiply-add in k order. */

#include "cpu/mm_simd.h"

#undef BW_MR
#define BW_MR (VS_W == 16 ? 8 : 6)
VS_TARGET static void VS_NAME(bw_tile)(const bm_mm *mm, void *out, bm_view a, bm_view b, int i0,
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
        for (int p = 0; p < nb; p += NR) { /* panel p: bp[p kc + k NR + jj], zeros past nb */
            float *dst = bp + (size_t)p * kc;
            int w = nb - p < NR ? nb - p : NR;
            if (w < NR) memset(dst, 0, (size_t)kc * NR * sizeof(float));
            bm_widen(mm, dst, NR, 1, b, k0, kc, j0 + p, w);
        }
        bm_widen(mm, ab, BM_KC, 1, a, i0, mb, k0, kc);
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
