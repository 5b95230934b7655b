/* The 16-bit matmul's GEMV (matmul16.c), one instance per ISA (simd_each.h), for few rows of a
 * (M <= VKC_MM16_GEMV_MAX_M, decoding one token: M = 1) with a (M, K) and b (N, K) both
 * contiguous along K: the rows of a widened to fp32 once per block of K (ga), then each
 * column's row of b streamed once, widened in registers (bf16: zero-extend and shift; fp16:
 * VCVTPH2PS) into the fused multiply-adds. The tile path instead widens b into fp32 panels and
 * reads them back for at least 6 rows, which at M = 1 moves several times the 2 bytes a weight
 * takes. The order (matmul16.h, GEMV): GV_S = 32 strands, strand s summing the k = s mod 32 in
 * order, held as GV_U = 32 / VS_W accumulators of VS_W lanes (accumulator u, lane l: strand
 * u VS_W + l), so both ISAs hold the same strands; then the halving tree, the same on both. */

#undef GV_U
#undef GV_R
#define GV_U (GV_S / VS_W) /* accumulators per row */
#define GV_R (VS_W == 16 ? 4 : 2) /* rows per pass over a column: 8 accumulators */

/* Every function here is compiled with F16C allowed (VS_TARGET_F16C), as one body serves both
 * types; the bf16 ones use no F16C instruction (the AVX2 path runs bf16 on a CPU without it).
 * VS_W elements of a 16-bit type widened to fp32 (exact). */
VS_TARGET_F16C VS_INLINE VS_F32 VS_NAME(gv_load)(const uint16_t *p, const bool f16) {
    return f16 ? VS_LOAD_F16(p) : VS_LOAD_BF16(p);
}

/* The strands of one output summed by the halving tree: strand s + strand s + 16 for s < 16,
 * then s + 8, s + 4, s + 2, s + 1 (across accumulators, then VS_REDUCE_ADD's halving of the
 * lanes). */
VS_TARGET_F16C VS_INLINE float VS_NAME(gv_reduce)(VS_F32 *acc) {
    VS_UNROLL
    for (int h = GV_U / 2; h >= 1; h /= 2)
        VS_UNROLL
        for (int u = 0; u < h; u++) acc[u] = VS_ADD(acc[u], acc[u + h]);
    return VS_REDUCE_ADD(acc[0]);
}

/* Rows r0 .. r0 + R of ga (row stride GV_KB) against b's column row bn over one block of kc
 * elements (kc a multiple of GV_S, except the last block's: its tail through a zero-padded
 * copy, ga zero there too, so the padding adds exact zeros). first: the strands start at +0,
 * else from st (column j's state, GV_MAX_M x GV_S); last: the sums go to c (row stride BM_NB),
 * else the strands back to st. Inlined with constant R, f16, first and last. */
VS_TARGET_F16C VS_INLINE void VS_NAME(gv_rows)(float *c, float *st, const float *ga,
                                               const uint16_t *bn, int kc, const int R,
                                               const bool f16, const bool first,
                                               const bool last) {
    VS_F32 acc[GV_R][GV_U];
    VS_UNROLL
    for (int r = 0; r < R; r++)
        VS_UNROLL
        for (int u = 0; u < GV_U; u++)
            acc[r][u] = first ? VS_ZERO() : VS_LOAD(st + r * GV_S + u * VS_W);
    int full = kc / GV_S * GV_S;
    for (int k = 0; k < full; k += GV_S) {
        VS_UNROLL
        for (int u = 0; u < GV_U; u++) {
            VS_F32 bv = VS_NAME(gv_load)(bn + k + u * VS_W, f16);
            VS_UNROLL
            for (int r = 0; r < R; r++)
                acc[r][u] = VS_FMA(VS_LOAD(ga + (size_t)r * GV_KB + k + u * VS_W), bv, acc[r][u]);
        }
    }
    if (full < kc) {
        _Alignas(64) uint16_t tail[GV_S] = {0};
        memcpy(tail, bn + full, (size_t)(kc - full) * sizeof *tail);
        VS_UNROLL
        for (int u = 0; u < GV_U; u++) {
            VS_F32 bv = VS_NAME(gv_load)(tail + u * VS_W, f16);
            VS_UNROLL
            for (int r = 0; r < R; r++)
                acc[r][u] =
                    VS_FMA(VS_LOAD(ga + (size_t)r * GV_KB + full + u * VS_W), bv, acc[r][u]);
        }
    }
    VS_UNROLL
    for (int r = 0; r < R; r++) {
        if (last) c[r * BM_NB] = VS_NAME(gv_reduce)(acc[r]);
        else
            VS_UNROLL
            for (int u = 0; u < GV_U; u++) VS_STORE(st + r * GV_S + u * VS_W, acc[r][u]);
    }
}

/* out(0 .. M, j0 .. j0 + nb) of one batch entry (a (M, K), b (N, K) its own), nb <= BM_NB. */
VS_TARGET_F16C VS_INLINE void VS_NAME(gv_cols)(const bm_mm *mm, void *out, const uint16_t *a,
                                               const uint16_t *b, int j0, int nb,
                                               const bool f16) {
    const int M = mm->M, K = mm->K;
    _Alignas(64) float ga[GV_MAX_M * GV_KB];
    _Alignas(64) float st[GV_NC * GV_MAX_M * GV_S];
    _Alignas(64) float c[GV_MAX_M * BM_NB];
    for (int k0 = 0; k0 < K; k0 += GV_KB) {
        int kc = K - k0 < GV_KB ? K - k0 : GV_KB, kp = (kc + GV_S - 1) / GV_S * GV_S;
        bool first = k0 == 0, last = k0 + kc == K;
        for (int r = 0; r < M; r++) {
            bm_widen_run(mm, ga + (size_t)r * GV_KB, a + (size_t)r * K + k0, kc);
            memset(ga + (size_t)r * GV_KB + kc, 0, (size_t)(kp - kc) * sizeof *ga);
        }
        for (int j = 0; j < nb; j++) {
            const uint16_t *bn = b + (size_t)(j0 + j) * K + k0;
            float *sj = st + (size_t)j * GV_MAX_M * GV_S;
            for (int r0 = 0; r0 < M; r0 += GV_R) {
                int R = M - r0 < GV_R ? M - r0 : GV_R;
                float *cr = c + r0 * BM_NB + j, *sr = sj + r0 * GV_S;
                const float *gr = ga + (size_t)r0 * GV_KB;
#define GV_CASE(n)                                                                             \
    case n:                                                                                    \
        if (first && last) VS_NAME(gv_rows)(cr, sr, gr, bn, kc, n, f16, true, true);           \
        else if (first) VS_NAME(gv_rows)(cr, sr, gr, bn, kc, n, f16, true, false);             \
        else if (last) VS_NAME(gv_rows)(cr, sr, gr, bn, kc, n, f16, false, true);              \
        else VS_NAME(gv_rows)(cr, sr, gr, bn, kc, n, f16, false, false);                       \
        break;
                switch (R) {
                    GV_CASE(1)
                    GV_CASE(2)
#if GV_R > 2
                    GV_CASE(3)
                    GV_CASE(4)
#endif
                }
#undef GV_CASE
            }
        }
    }
    bm_epilogue(mm, out, c, 0, M, j0, nb);
}

VS_TARGET_F16C static void VS_NAME(gv_cols_bf16)(const bm_mm *mm, void *out, const uint16_t *a,
                                                 const uint16_t *b, int j0, int nb) {
    VS_NAME(gv_cols)(mm, out, a, b, j0, nb, false);
}

VS_TARGET_F16C static void VS_NAME(gv_cols_f16)(const bm_mm *mm, void *out, const uint16_t *a,
                                                const uint16_t *b, int j0, int nb) {
    VS_NAME(gv_cols)(mm, out, a, b, j0, nb, true);
}
