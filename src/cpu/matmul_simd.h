/* The fast matmul's bodies (matmul_fast.c), one instance per ISA (simd_each.h). */

#include "cpu/mm_simd.h"

/* c (FM_MR x 2 VS_W block, row stride FM_NB) += op(a) (FM_MR, kc) . bp (kc, 2 VS_W), op(a)(r, k)
 * = a[r][k * cs] (fm_kernel): FM_MR x 2 accumulators, 2 vectors of b, a broadcast per row (of
 * 32 zmm or 16 ymm registers). */
#undef FM_MR
#define FM_MR (VS_W == 16 ? 8 : 6)
VS_TARGET static void VS_NAME(fm_kernel)(float *c, const float *const *a, size_t cs,
                                         const float *bp, int kc) {
    VS_NAME(vkc_mm_block)(c, FM_NB, true, a, NULL, 0, cs, bp, 2 * VS_W, kc, true, FM_MR, 2, NULL,
                          false);
}

/* The few-rows product (vkc_mm_tile_fn, M <= FM_FEW_ROWS): op(b) read in place, VS_W columns
 * at a time, each output summed over k in order, one FMA per term from 0. */
VS_TARGET static void VS_NAME(fm_few_rows)(const vkc_mm *mm, void *out, vkc_mm_view a,
                                           vkc_mm_view b, int i0, int mb, int j0, int nb,
                                           const void *user) {
    (void)user;
    _Alignas(64) float acc[FM_FEW_ROWS * FM_FEW_NB];
    const int K = mm->K;
    const float *ar[FM_FEW_ROWS];
    for (int r = 0; r < mb; r++) ar[r] = a.p + (size_t)(i0 + r) * a.rs;
    for (int p = 0; p < nb; p += VS_W) {
        int w = nb - p < VS_W ? nb - p : VS_W;
        const float *bj = b.p + (size_t)(j0 + p) * b.cs;
        VS_F32 c[FM_FEW_ROWS];
        for (int r = 0; r < FM_FEW_ROWS; r++) c[r] = VS_ZERO();
        if (b.cs == 1) { /* row k of op(b) is contiguous */
            VS_MASK m = VS_LANES(w);
            for (int k = 0; k < K; k++) {
                VS_F32 bv = VS_LOAD_M(bj + (size_t)k * b.rs, m);
                for (int r = 0; r < mb; r++)
                    c[r] = VS_FMA(VS_SET1(ar[r][(size_t)k * a.cs]), bv, c[r]);
            }
        } else { /* column j of op(b) is contiguous (b.rs == 1): VS_W x VS_W blocks, transposed */
            for (int k0 = 0; k0 < K; k0 += VS_W) {
                int kc = K - k0 < VS_W ? K - k0 : VS_W;
                VS_MASK km = VS_LANES(kc);
                VS_F32 t[VS_W];
                for (int q = 0; q < VS_W; q++)
                    t[q] = q < w ? VS_LOAD_M(bj + (size_t)q * b.cs + k0, km) : VS_ZERO();
                VS_TRANSPOSE(t);
                if (VS_W == 16 && kc == VS_W) { /* whole blocks unrolled: AVX-512 only */
                    VS_UNROLL
                    for (int kk = 0; kk < VS_W; kk++)
                        for (int r = 0; r < mb; r++)
                            c[r] = VS_FMA(VS_SET1(ar[r][(size_t)(k0 + kk) * a.cs]), t[kk], c[r]);
                } else {
                    for (int kk = 0; kk < kc; kk++)
                        for (int r = 0; r < mb; r++)
                            c[r] = VS_FMA(VS_SET1(ar[r][(size_t)(k0 + kk) * a.cs]), t[kk], c[r]);
                }
            }
        }
        for (int r = 0; r < mb; r++) VS_STORE(acc + r * FM_FEW_NB + p, c[r]);
    }
    vkc_mm_epilogue(mm, out, acc, FM_FEW_NB, i0, mb, j0, nb);
}
