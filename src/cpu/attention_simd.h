/* The fused attention's fast kernels (at_kern, attention_kern.h), one instance per ISA
 * (simd_each.h). Where the two ISAs were tuned apart the body asks the mapping (simd.h):
 * VS_MASK_CHEAP (AVX-512 masks every vector, AVX2 loads whole vectors and masks only a tail)
 * and the grouping constants below. */
#include "cpu/mm_simd.h"

#undef AT_NVMAX
#undef AT_MR
#undef AT_EXP_GROUP
/* at_mm: column passes of up to AT_NVMAX vectors; AT_MR(NV) rows per register block (AVX-512:
 * 6 x 64 or 8 x 32 and 8 x 16; AVX2: 6 x 16 and 6 x 8) */
#define AT_NVMAX (VS_W == 16 ? 4 : 2)
#define AT_MR(NV) ((NV) == 4 || VS_W == 8 ? 6 : 8)
/* exps side by side, and the vectors of a score row summed in that group first (AVX-512: the
 * whole row of at most 4; AVX2: pairs) */
#define AT_EXP_GROUP (VS_W == 16 ? 4 : 2)

/* The first n floats at p (n may be VS_W or more: a whole vector); masked lanes read as 0. */
VS_TARGET VS_INLINE VS_F32 VS_NAME(at_ld)(const float *p, int n) {
    return VS_MASK_CHEAP || n < VS_W ? VS_LOAD_M(p, VS_LANES(n)) : VS_LOAD(p);
}
VS_TARGET VS_INLINE void VS_NAME(at_st)(float *p, int n, VS_F32 v) {
    if (VS_MASK_CHEAP || n < VS_W) VS_STORE_M(p, VS_LANES(n), v);
    else VS_STORE(p, v);
}
/* In a score row (AT_BK floats): AVX2 reads and writes whole vectors within it. */
VS_TARGET VS_INLINE VS_F32 VS_NAME(at_row_ld)(const float *p, int n) {
    return VS_MASK_CHEAP ? VS_LOAD_M(p, VS_LANES(n)) : VS_LOAD(p);
}
VS_TARGET VS_INLINE void VS_NAME(at_row_st)(float *p, int n, VS_F32 v) {
    if (VS_MASK_CHEAP) VS_STORE_M(p, VS_LANES(n), v);
    else VS_STORE(p, v);
}

/* at_kern.mm through the register block (mm_simd.h) */
VS_TARGET static void VS_NAME(at_mm_fast)(float *c, size_t ldc, vkc_mm_view a, vkc_mm_view b,
                                          int M, int N, int K, bool acc) {
    for (int n0 = 0; n0 < N;) {
        const int left = N - n0, wmax = AT_NVMAX * VS_W;
        const int w = left > wmax / 2 ? (left < wmax ? left : wmax) : left;
        const VS_MASK mk[4] = {VS_LANES(w), VS_LANES(w - VS_W), VS_LANES(w - 2 * VS_W),
                               VS_LANES(w - 3 * VS_W)};
        const bool part = w % VS_W != 0;
        int r = 0;
#define AT_BLOCK(MR, NV)                                                                       \
    do {                                                                                       \
        const float *ap = a.p + (size_t)r * a.rs, *bn = b.p + n0;                              \
        float *cr = c + (size_t)r * ldc + n0;                                                  \
        if (!VS_MASK_CHEAP && part)                                                            \
            VS_NAME(vkc_mm_block)(cr, ldc, false, NULL, ap, a.rs, a.cs, bn, b.rs, K, acc, MR,  \
                                  NV, mk, true);                                               \
        else                                                                                   \
            VS_NAME(vkc_mm_block)(cr, ldc, false, NULL, ap, a.rs, a.cs, bn, b.rs, K, acc, MR,  \
                                  NV, mk, false);                                              \
        r += (MR);                                                                             \
    } while (0)
#define AT_ROWS(NV)                                                                            \
    do {                                                                                       \
        while (r + AT_MR(NV) <= M) AT_BLOCK(AT_MR(NV), NV);                                    \
        if (M - r >= 4) AT_BLOCK(4, NV);                                                       \
        if (M - r >= 2) AT_BLOCK(2, NV);                                                       \
        if (M - r >= 1) AT_BLOCK(1, NV);                                                       \
    } while (0)
        if (AT_NVMAX == 4 && w > 2 * VS_W) AT_ROWS(4);
        else if (w > VS_W) AT_ROWS(2);
        else AT_ROWS(1);
#undef AT_ROWS
#undef AT_BLOCK
        n0 += w;
    }
}

/* Scores of keys j0 + VS_W v .. of a row: scale * dot + mask for the first n keys, -inf after. */
VS_TARGET VS_INLINE VS_F32 VS_NAME(at_scores)(const float *dots, const float *mj, int n,
                                              VS_F32 scale) {
    VS_MASK vis = VS_LANES(n);
    VS_F32 d = VS_NAME(at_row_ld)(dots, n);
    const VS_F32 ninf = VS_SET1(-INFINITY);
    if (!mj) return VS_BLEND(vis, ninf, VS_MUL(scale, d));
    VS_F32 mv = VS_LOAD_M(mj, vis);
    /* a key the mask hides scores -inf whatever its k holds (NaN + -inf is NaN) */
    vis = VS_MASK_NEQ(vis, mv, ninf);
    return VS_BLEND(vis, ninf, VS_FMA(scale, d, mv));
}

/* The vectors a row of nv vectors is computed with, a constant per call: nv, or with AVX2 the
 * pair that holds it (the vectors past nv score -inf, so exp 0 and add +0). */
#define AT_NV_CALL(nv, CALL)                                                                   \
    do {                                                                                       \
        if ((nv) <= 1) CALL(1);                                                                \
        else if ((nv) <= 2) CALL(2);                                                           \
        else if (AT_BK / VS_W == 4 || (nv) <= 4) CALL(4);                                      \
        else if ((nv) <= 6) CALL(6);                                                           \
        else CALL(8);                                                                          \
    } while (0)

/* One row of fwd_rows with NV vectors (a constant); bk keys. */
VS_TARGET VS_INLINE void VS_NAME(at_fwd_row)(const at_tile *t, int i, int bk, const int NV,
                                             float *si, float *m, float *l, float *oi) {
    const vkc_attention *a = t->a;
    const int HS = a->HS;
    const VS_F32 scale = VS_SET1(a->scale);
    const float *mrow = at_mask_row(a, t->b, t->i0 + i);
    const int n = t->last[i] - t->j0 + 1 < bk ? t->last[i] - t->j0 + 1 : bk;
    VS_F32 x[AT_BK / VS_W], vmx = VS_SET1(-INFINITY);
    VS_UNROLL
    for (int v = 0; v < NV; v++) {
        x[v] = VS_NAME(at_scores)(si + VS_W * v, mrow ? mrow + t->j0 + VS_W * v : NULL,
                                  n - VS_W * v, scale);
        vmx = VS_MAX(vmx, x[v]);
    }
    float mx = VS_REDUCE_MAX(vmx);
    mx = m[i] > mx ? m[i] : mx;
    if (mx == -INFINITY) { /* every key so far masked: nothing to add */
        VS_UNROLL
        for (int v = 0; v < NV; v++) VS_NAME(at_row_st)(si + VS_W * v, bk - VS_W * v, VS_ZERO());
        return;
    }
    const float alpha = vkc_exp_fast(m[i] - mx); /* 0 when m[i] = -inf (o, l are 0 then) */
    const VS_F32 vmxb = VS_SET1(mx);
    VS_UNROLL
    for (int v = 0; v < NV; v++) x[v] = VS_SUB(x[v], vmxb);
    VS_F32 vsum = VS_ZERO();
    VS_UNROLL
    for (int g = 0; g < NV; g += AT_EXP_GROUP) {
        const int ng = NV - g < AT_EXP_GROUP ? NV - g : AT_EXP_GROUP;
        VS_EXP_N(x + g, ng); /* masked: 0 */
        VS_F32 gsum = x[g];
        VS_UNROLL
        for (int e = 1; e < ng; e++) gsum = VS_ADD(gsum, x[g + e]);
        VS_UNROLL
        for (int e = 0; e < ng; e++)
            VS_NAME(at_row_st)(si + VS_W * (g + e), bk - VS_W * (g + e), x[g + e]);
        vsum = VS_ADD(vsum, gsum);
    }
    l[i] = l[i] * alpha + VS_REDUCE_ADD(vsum);
    m[i] = mx;
    if (oi && alpha != 1.0f) {
        const VS_F32 va = VS_SET1(alpha);
        for (int d = 0; d < HS; d += VS_W)
            VS_NAME(at_st)(oi + d, HS - d, VS_MUL(VS_NAME(at_ld)(oi + d, HS - d), va));
    }
}

VS_TARGET static void VS_NAME(at_fwd_rows_fast)(const at_tile *t, float (*s)[AT_BK], float *m,
                                                float *l, float *o) {
    const int bk = t->nc, nv = (bk + VS_W - 1) / VS_W, HS = t->a->HS;
    for (int i = t->r0; i < t->nq; i++) {
        float *oi = o ? o + (size_t)i * HS : NULL;
#define AT_CALL(NV) VS_NAME(at_fwd_row)(t, i, bk, NV, s[i], m, l, oi)
        AT_NV_CALL(nv, AT_CALL);
#undef AT_CALL
    }
}

VS_TARGET static bool VS_NAME(at_fwd_finish_fast)(const at_tile *t, const float *o,
                                                  const float *m, const float *l) {
    const vkc_attention *a = t->a;
    const int HS = a->HS;
    /* y - y over every y: +0 while all are finite (lanes past HS load 0, and 0 / l is 0 unless
     * l is NaN, when every y is) */
    VS_F32 bad = VS_ZERO();
    for (int i = 0; i < t->nq; i++) {
        int tq = t->i0 + i;
        float *orow = a->out + at_off(a->so, t->b, t->h, tq);
        const float *oi = o + (size_t)i * HS;
        float lse = -INFINITY;
        const bool any = l[i] != 0.0f; /* NaN too (a +inf score): NaN out, never zeros */
        const VS_F32 vl = VS_SET1(l[i]);
        for (int d = 0; d < HS; d += VS_W) {
            VS_F32 y = any ? VS_DIV(VS_NAME(at_ld)(oi + d, HS - d), vl) : VS_ZERO();
            bad = VS_NAN_OR(bad, y);
            VS_NAME(at_st)(orow + d, HS - d, y);
        }
        if (any) lse = m[i] + logf(l[i]);
        if (a->lse) a->lse[((size_t)t->b * a->NH + t->h) * a->Tq + tq] = lse;
    }
    return !VS_ANY_NZ(bad);
}

/* rowsum(dout * out) in double (VS_DOT_F64: the ISA's fixed tree) */
VS_TARGET static void VS_NAME(at_delta_fast)(const at_tile *t, float *delta) {
    const vkc_attention *a = t->a;
    for (int i = 0; i < t->nq; i++) {
        const float *dor = a->dout + at_off(a->so, t->b, t->h, t->i0 + i);
        const float *orow = a->out + at_off(a->so, t->b, t->h, t->i0 + i);
        delta[i] = (float)VS_DOT_F64(dor, orow, a->HS);
    }
}

/* One row of bwd_rows with NV vectors (a constant). */
VS_TARGET VS_INLINE void VS_NAME(at_bwd_row)(const at_tile *t, int i, float lse, float delta,
                                             float corr, const int NV, float *pi, float *dsi) {
    const vkc_attention *a = t->a;
    const int nc = t->nc;
    const VS_F32 scale = VS_SET1(a->scale);
    const float *mrow = at_mask_row(a, t->b, t->i0 + i);
    const int n = t->last[i] - t->j0 + 1 < nc ? t->last[i] - t->j0 + 1 : nc;
    const VS_F32 vl = VS_SET1(lse), vd = VS_SET1(delta), vc = VS_SET1(corr);
    VS_F32 x[AT_BK / VS_W];
    VS_UNROLL
    for (int v = 0; v < NV; v++)
        x[v] = VS_SUB(VS_SUB(VS_NAME(at_scores)(pi + VS_W * v,
                                                mrow ? mrow + t->j0 + VS_W * v : NULL,
                                                n - VS_W * v, scale),
                             vl),
                      vc);
    VS_UNROLL
    for (int g = 0; g < NV; g += AT_EXP_GROUP)
        VS_EXP_N(x + g, NV - g < AT_EXP_GROUP ? NV - g : AT_EXP_GROUP); /* masked: 0 */
    VS_UNROLL
    for (int v = 0; v < NV; v++) {
        const int nv = nc - VS_W * v;
        VS_F32 dp = VS_NAME(at_row_ld)(dsi + VS_W * v, nv);
        /* dS = 0 where P is, whatever dP holds (a hidden key's v may be NaN) */
        VS_F32 dsv = VS_MUL_NZ(x[v], scale, VS_MUL(x[v], VS_SUB(dp, vd)));
        VS_NAME(at_row_st)(pi + VS_W * v, nv, x[v]);
        VS_NAME(at_row_st)(dsi + VS_W * v, nv, dsv);
    }
}

VS_TARGET static void VS_NAME(at_bwd_rows_fast)(const at_tile *t, const float *delta,
                                                const float *corr, float (*p)[AT_BK],
                                                float (*ds)[AT_BK]) {
    const vkc_attention *a = t->a;
    const int nc = t->nc, nv = (nc + VS_W - 1) / VS_W;
    for (int i = t->r0; i < t->nq; i++) {
        const float lse = a->lse[((size_t)t->b * a->NH + t->h) * a->Tq + t->i0 + i];
        if (t->last[i] < t->j0 || lse == -INFINITY) {
            for (int v = 0; v < nv; v++) {
                VS_NAME(at_row_st)(p[i] + VS_W * v, nc - VS_W * v, VS_ZERO());
                VS_NAME(at_row_st)(ds[i] + VS_W * v, nc - VS_W * v, VS_ZERO());
            }
            continue;
        }
#define AT_CALL(NV) VS_NAME(at_bwd_row)(t, i, lse, delta[i], corr[i], NV, p[i], ds[i])
        AT_NV_CALL(nv, AT_CALL);
#undef AT_CALL
    }
}
#undef AT_NV_CALL

static const at_kern VS_NAME(at_kern_fast) = {
    VS_NAME(at_mm_fast),        at_pack_t_fast,          VS_NAME(at_fwd_rows_fast),
    VS_NAME(at_fwd_finish_fast), VS_NAME(at_delta_fast), VS_NAME(at_bwd_rows_fast)};
