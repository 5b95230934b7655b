/* The fused attention's fast kernels (at_kern, attention_kern.h) for AVX-512 and AVX2+FMA,
 * chosen at run time from cpuid like the fast matmul's (matmul_fast.c) and compiled with
 * target attributes, so a baseline x86-64 build carries them and still runs anywhere.
 *
 * The same FlashAttention-2 loops as the reference (attention.c) call them on the same tiles:
 *  - products: register tiles of 6 rows x 64 columns or 8 x 32 (AVX-512), 6 x 16 (AVX2), each
 *    element still summed over k in order, one fused multiply-add per term (as the fast matmul);
 *  - k and v tiles transposed 8 x 8 in registers;
 *  - score rows: scale and mask by one multiply-add, exp by exp_fast.h's polynomial, row
 *    maxima and sums across vector lanes (a fixed tree: no result depends on the thread count);
 *  - delta = rowsum(dout * out) in double, as the reference.
 * So results differ from the reference's in the last bits (test_attention_fused.c's
 * test_attention_fused_cpu_fast_matches_reference holds them to the GPU's tolerance). */
#include "cpu/attention_kern.h"
#include "cpu/exp_fast.h"

#ifdef VKC_X86

#if defined(__clang__)
#define AT_UNROLL _Pragma("unroll")
#else
#define AT_UNROLL _Pragma("GCC unroll 8")
#endif
/* Inlined with constant row and vector counts, so the accumulator arrays live in registers. */
#define AT_INLINE static inline __attribute__((always_inline))

/* --- 8 x 8 transpose (AVX), shared by both ISAs ---------------------------------------------- */
VKC_TARGET_AVX2 AT_INLINE void transpose8(__m256 *r) {
    __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
    __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
    __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
    __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
    __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
    __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
    __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
    __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
    r[0] = _mm256_permute2f128_ps(u0, u4, 0x20);
    r[1] = _mm256_permute2f128_ps(u1, u5, 0x20);
    r[2] = _mm256_permute2f128_ps(u2, u6, 0x20);
    r[3] = _mm256_permute2f128_ps(u3, u7, 0x20);
    r[4] = _mm256_permute2f128_ps(u0, u4, 0x31);
    r[5] = _mm256_permute2f128_ps(u1, u5, 0x31);
    r[6] = _mm256_permute2f128_ps(u2, u6, 0x31);
    r[7] = _mm256_permute2f128_ps(u3, u7, 0x31);
}

/* at_kern.pack_t: 8 x 8 blocks through registers, the ragged edges one float at a time. */
VKC_TARGET_AVX2 static void pack_t_avx(float *kt, const float *x, vkc_attn_strides s, int b,
                                       int h, int j0, int bk, int HS) {
    const int jb = bk / 8 * 8, db = HS / 8 * 8;
    for (int jj = 0; jj < jb; jj += 8) {
        const float *row[8];
        for (int e = 0; e < 8; e++) row[e] = x + at_off(s, b, h, j0 + jj + e);
        for (int d = 0; d < db; d += 8) {
            __m256 r[8];
            AT_UNROLL
            for (int e = 0; e < 8; e++) r[e] = _mm256_loadu_ps(row[e] + d);
            transpose8(r);
            AT_UNROLL
            for (int e = 0; e < 8; e++) _mm256_storeu_ps(kt + (size_t)(d + e) * AT_BK + jj, r[e]);
        }
        for (int d = db; d < HS; d++)
            for (int e = 0; e < 8; e++) kt[(size_t)d * AT_BK + jj + e] = row[e][d];
    }
    for (int jj = jb; jj < bk; jj++) {
        const float *row = x + at_off(s, b, h, j0 + jj);
        for (int d = 0; d < HS; d++) kt[(size_t)d * AT_BK + jj] = row[d];
    }
    for (int jj = bk; jj < at_cols(bk); jj++)
        for (int d = 0; d < HS; d++) kt[(size_t)d * AT_BK + jj] = 0.0f;
}

/* --- AVX-512 --------------------------------------------------------------------------------- */
/* The lanes below n of a 16-lane vector. */
static inline __mmask16 lanes16(int n) {
    return (__mmask16)(n <= 0 ? 0 : n >= 16 ? 0xFFFF : (1u << n) - 1);
}

/* MR rows x NV (1 to 4) vectors of c, lanes mk[v]: += a (MR, K) b (K, 16 NV). */
VKC_TARGET_AVX512 AT_INLINE void mm512_block(float *c, size_t ldc, at_mat a, const float *b,
                                             size_t ldb, int K, bool acc, const int MR,
                                             const int NV, const __mmask16 *mk) {
    __m512 cv[8][4];
    AT_UNROLL
    for (int r = 0; r < MR; r++)
        AT_UNROLL
        for (int v = 0; v < NV; v++)
            cv[r][v] = acc ? _mm512_maskz_loadu_ps(mk[v], c + r * ldc + 16 * v)
                           : _mm512_setzero_ps();
    for (int k = 0; k < K; k++) {
        const float *bk = b + (size_t)k * ldb, *ak = a.p + (size_t)k * a.cs;
        __m512 bv[4];
        AT_UNROLL
        for (int v = 0; v < NV; v++) bv[v] = _mm512_maskz_loadu_ps(mk[v], bk + 16 * v);
        AT_UNROLL
        for (int r = 0; r < MR; r++) {
            __m512 x = _mm512_set1_ps(ak[(size_t)r * a.rs]);
            AT_UNROLL
            for (int v = 0; v < NV; v++) cv[r][v] = _mm512_fmadd_ps(x, bv[v], cv[r][v]);
        }
    }
    AT_UNROLL
    for (int r = 0; r < MR; r++)
        AT_UNROLL
        for (int v = 0; v < NV; v++) _mm512_mask_storeu_ps(c + r * ldc + 16 * v, mk[v], cv[r][v]);
}

/* Column passes of 64 (6 rows x 4 vectors: 24 accumulators) or 32 (8 x 2) columns. */
VKC_TARGET_AVX512 static void mm512(float *c, size_t ldc, at_mat a, at_mat b, int M, int N, int K,
                                    bool acc) {
    for (int n0 = 0; n0 < N;) {
        const int w = N - n0 > 32 ? (N - n0 < 64 ? N - n0 : 64) : N - n0;
        const __mmask16 mk[4] = {lanes16(w), lanes16(w - 16), lanes16(w - 32), lanes16(w - 48)};
        int r = 0;
#define AT_MM512(MR, NV)                                                                       \
    do {                                                                                       \
        at_mat ar = {a.p + (size_t)r * a.rs, a.rs, a.cs};                                      \
        mm512_block(c + (size_t)r * ldc + n0, ldc, ar, b.p + n0, b.rs, K, acc, MR, NV, mk);    \
        r += MR;                                                                               \
    } while (0)
        if (w > 32) {
            while (r + 6 <= M) AT_MM512(6, 4);
            if (M - r >= 4) AT_MM512(4, 4);
            if (M - r >= 2) AT_MM512(2, 4);
            if (M - r >= 1) AT_MM512(1, 4);
        } else if (w > 16) {
            while (r + 8 <= M) AT_MM512(8, 2);
            if (M - r >= 4) AT_MM512(4, 2);
            if (M - r >= 2) AT_MM512(2, 2);
            if (M - r >= 1) AT_MM512(1, 2);
        } else {
            while (r + 8 <= M) AT_MM512(8, 1);
            if (M - r >= 4) AT_MM512(4, 1);
            if (M - r >= 2) AT_MM512(2, 1);
            if (M - r >= 1) AT_MM512(1, 1);
        }
#undef AT_MM512
        n0 += w;
    }
}

/* Scores of keys j0 + 16v .. of a row: scale * dot + mask for the first n keys, -inf after. */
VKC_TARGET_AVX512 AT_INLINE __m512 scores512(const float *dots, const float *mj, int n,
                                             __m512 scale) {
    __mmask16 vis = lanes16(n);
    __m512 d = _mm512_maskz_loadu_ps(vis, dots);
    const __m512 ninf = _mm512_set1_ps(-INFINITY);
    if (!mj) return _mm512_mask_blend_ps(vis, ninf, _mm512_mul_ps(scale, d));
    __m512 mv = _mm512_maskz_loadu_ps(vis, mj);
    /* a key the mask hides scores -inf whatever its k holds (NaN + -inf is NaN) */
    vis = _mm512_mask_cmp_ps_mask(vis, mv, ninf, _CMP_NEQ_UQ);
    return _mm512_mask_blend_ps(vis, ninf, _mm512_fmadd_ps(scale, d, mv));
}

/* One row of fwd_rows512 with NV vectors (a constant: the NV exps run side by side); bk keys. */
VKC_TARGET_AVX512 AT_INLINE void fwd_row512(const at_tile *t, int i, int bk, const int NV,
                                            float *si, float *m, float *l, float *oi) {
    const vkc_attention *a = t->a;
    const int HS = a->HS;
    const __m512 scale = _mm512_set1_ps(a->scale);
    const float *mrow = at_mask_row(a, t->b, t->i0 + i);
    const int n = t->last[i] - t->j0 + 1 < bk ? t->last[i] - t->j0 + 1 : bk;
    __m512 x[4], vmx = _mm512_set1_ps(-INFINITY);
    AT_UNROLL
    for (int v = 0; v < NV; v++) {
        x[v] = scores512(si + 16 * v, mrow ? mrow + t->j0 + 16 * v : NULL, n - 16 * v, scale);
        vmx = _mm512_max_ps(vmx, x[v]);
    }
    float mx = _mm512_reduce_max_ps(vmx);
    mx = m[i] > mx ? m[i] : mx;
    if (mx == -INFINITY) { /* every key so far masked: nothing to add */
        AT_UNROLL
        for (int v = 0; v < NV; v++)
            _mm512_mask_storeu_ps(si + 16 * v, lanes16(bk - 16 * v), _mm512_setzero_ps());
        return;
    }
    const float alpha = vkc_exp_fast(m[i] - mx); /* 0 when m[i] = -inf (o, l are 0 then) */
    const __m512 vmxb = _mm512_set1_ps(mx);
    AT_UNROLL
    for (int v = 0; v < NV; v++) x[v] = _mm512_sub_ps(x[v], vmxb);
    vkc_exp_fast512_n(x, NV); /* masked: 0 */
    __m512 vsum = _mm512_setzero_ps();
    AT_UNROLL
    for (int v = 0; v < NV; v++) {
        _mm512_mask_storeu_ps(si + 16 * v, lanes16(bk - 16 * v), x[v]);
        vsum = _mm512_add_ps(vsum, x[v]);
    }
    l[i] = l[i] * alpha + _mm512_reduce_add_ps(vsum);
    m[i] = mx;
    if (oi && alpha != 1.0f) {
        const __m512 va = _mm512_set1_ps(alpha);
        for (int d = 0; d < HS; d += 16) {
            __mmask16 k = lanes16(HS - d);
            _mm512_mask_storeu_ps(oi + d, k, _mm512_mul_ps(_mm512_maskz_loadu_ps(k, oi + d), va));
        }
    }
}

VKC_TARGET_AVX512 static void fwd_rows512(const at_tile *t, float (*s)[AT_BK], float *m, float *l,
                                          float *o) {
    const int bk = t->nc, nv = (bk + 15) / 16, HS = t->a->HS;
    for (int i = t->r0; i < t->nq; i++) {
        float *oi = o ? o + (size_t)i * HS : NULL;
        if (nv == 1) fwd_row512(t, i, bk, 1, s[i], m, l, oi);
        else if (nv == 2) fwd_row512(t, i, bk, 2, s[i], m, l, oi);
        else fwd_row512(t, i, bk, 4, s[i], m, l, oi); /* 3: the 4th vector all -inf */
    }
}

VKC_TARGET_AVX512 static bool fwd_finish512(const at_tile *t, const float *o, const float *m,
                                            const float *l) {
    const vkc_attention *a = t->a;
    const int HS = a->HS;
    __mmask16 bad = 0; /* lanes where y - y != 0: y is NaN or +-inf */
    for (int i = 0; i < t->nq; i++) {
        int tq = t->i0 + i;
        float *orow = a->out + at_off(a->so, t->b, t->h, tq);
        const float *oi = o + (size_t)i * HS;
        float lse = -INFINITY;
        const bool any = l[i] != 0.0f; /* NaN too (a +inf score): NaN out, never zeros */
        const __m512 vl = _mm512_set1_ps(l[i]);
        for (int d = 0; d < HS; d += 16) {
            __mmask16 k = lanes16(HS - d);
            __m512 y = any ? _mm512_div_ps(_mm512_maskz_loadu_ps(k, oi + d), vl)
                           : _mm512_setzero_ps();
            bad |= _mm512_mask_cmp_ps_mask(k, _mm512_sub_ps(y, y), _mm512_setzero_ps(), _CMP_NEQ_UQ);
            _mm512_mask_storeu_ps(orow + d, k, y);
        }
        if (any) lse = m[i] + logf(l[i]);
        if (a->lse) a->lse[((size_t)t->b * a->NH + t->h) * a->Tq + tq] = lse;
    }
    return bad == 0;
}

VKC_TARGET_AVX512 static void delta512(const at_tile *t, float *delta) {
    const vkc_attention *a = t->a;
    const int HS = a->HS;
    for (int i = 0; i < t->nq; i++) {
        const float *dor = a->dout + at_off(a->so, t->b, t->h, t->i0 + i);
        const float *orow = a->out + at_off(a->so, t->b, t->h, t->i0 + i);
        __m512d lo = _mm512_setzero_pd(), hi = _mm512_setzero_pd();
        for (int d = 0; d < HS; d += 16) {
            __mmask16 k = lanes16(HS - d);
            __m512 x = _mm512_maskz_loadu_ps(k, dor + d), y = _mm512_maskz_loadu_ps(k, orow + d);
            lo = _mm512_fmadd_pd(_mm512_cvtps_pd(_mm512_castps512_ps256(x)),
                                 _mm512_cvtps_pd(_mm512_castps512_ps256(y)), lo);
            __m256 xh = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(x), 1));
            __m256 yh = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(y), 1));
            hi = _mm512_fmadd_pd(_mm512_cvtps_pd(xh), _mm512_cvtps_pd(yh), hi);
        }
        delta[i] = (float)_mm512_reduce_add_pd(_mm512_add_pd(lo, hi));
    }
}

/* One row of bwd_rows512 with NV vectors (a constant: the NV exps run side by side). */
VKC_TARGET_AVX512 AT_INLINE void bwd_row512(const at_tile *t, int i, float lse, float delta,
                                            float corr, const int NV, float *pi, float *dsi) {
    const vkc_attention *a = t->a;
    const int nc = t->nc;
    const __m512 scale = _mm512_set1_ps(a->scale);
    const float *mrow = at_mask_row(a, t->b, t->i0 + i);
    const int n = t->last[i] - t->j0 + 1 < nc ? t->last[i] - t->j0 + 1 : nc;
    const __m512 vl = _mm512_set1_ps(lse), vd = _mm512_set1_ps(delta), vc = _mm512_set1_ps(corr);
    __m512 x[4];
    AT_UNROLL
    for (int v = 0; v < NV; v++)
        x[v] = _mm512_sub_ps(_mm512_sub_ps(scores512(pi + 16 * v,
                                                     mrow ? mrow + t->j0 + 16 * v : NULL,
                                                     n - 16 * v, scale),
                                           vl),
                             vc);
    vkc_exp_fast512_n(x, NV); /* masked: 0 */
    AT_UNROLL
    for (int v = 0; v < NV; v++) {
        __mmask16 k = lanes16(nc - 16 * v);
        __m512 dp = _mm512_maskz_loadu_ps(k, dsi + 16 * v);
        /* dS = 0 where P is, whatever dP holds (a hidden key's v may be NaN) */
        __mmask16 live = _mm512_cmp_ps_mask(x[v], _mm512_setzero_ps(), _CMP_NEQ_UQ);
        __m512 dsv = _mm512_maskz_mul_ps(live, scale, _mm512_mul_ps(x[v], _mm512_sub_ps(dp, vd)));
        _mm512_mask_storeu_ps(pi + 16 * v, k, x[v]);
        _mm512_mask_storeu_ps(dsi + 16 * v, k, dsv);
    }
}

VKC_TARGET_AVX512 static void bwd_rows512(const at_tile *t, const float *delta, const float *corr,
                                          float (*p)[AT_BK], float (*ds)[AT_BK]) {
    const vkc_attention *a = t->a;
    const int nc = t->nc, nv = (nc + 15) / 16;
    for (int i = t->r0; i < t->nq; i++) {
        const float lse = a->lse[((size_t)t->b * a->NH + t->h) * a->Tq + t->i0 + i];
        if (t->last[i] < t->j0 || lse == -INFINITY) {
            for (int v = 0; v < nv; v++) {
                _mm512_mask_storeu_ps(p[i] + 16 * v, lanes16(nc - 16 * v), _mm512_setzero_ps());
                _mm512_mask_storeu_ps(ds[i] + 16 * v, lanes16(nc - 16 * v), _mm512_setzero_ps());
            }
            continue;
        }
        if (nv == 1) bwd_row512(t, i, lse, delta[i], corr[i], 1, p[i], ds[i]);
        else if (nv == 2) bwd_row512(t, i, lse, delta[i], corr[i], 2, p[i], ds[i]);
        else bwd_row512(t, i, lse, delta[i], corr[i], 4, p[i], ds[i]);
    }
}

static const at_kern kern_avx512 = {mm512, pack_t_avx, fwd_rows512, fwd_finish512, delta512,
                                    bwd_rows512};

/* --- AVX2 + FMA ------------------------------------------------------------------------------ */
/* The lanes below n of an 8-lane vector, as a maskload/maskstore/blendv mask. */
VKC_TARGET_AVX2 static inline __m256i lanes8(int n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

VKC_TARGET_AVX2 static inline float hmax8(__m256 v) {
    __m128 x = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    x = _mm_max_ps(x, _mm_movehl_ps(x, x));
    return _mm_cvtss_f32(_mm_max_ss(x, _mm_movehdup_ps(x)));
}

VKC_TARGET_AVX2 static inline float hsum8(__m256 v) {
    __m128 x = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    x = _mm_add_ps(x, _mm_movehl_ps(x, x));
    return _mm_cvtss_f32(_mm_add_ss(x, _mm_movehdup_ps(x)));
}

/* MR rows x NV (1 or 2) vectors of c; the last vector's lanes by mt where tail (masked loads
 * are slower than plain ones on AMD, so full vectors use plain ones). */
VKC_TARGET_AVX2 AT_INLINE __m256 load8(const float *p, bool tail, __m256i mt) {
    return tail ? _mm256_maskload_ps(p, mt) : _mm256_loadu_ps(p);
}
VKC_TARGET_AVX2 AT_INLINE void store8(float *p, bool tail, __m256i mt, __m256 v) {
    if (tail) _mm256_maskstore_ps(p, mt, v);
    else _mm256_storeu_ps(p, v);
}

VKC_TARGET_AVX2 AT_INLINE void mm256_block(float *c, size_t ldc, at_mat a, const float *b,
                                           size_t ldb, int K, bool acc, const int MR,
                                           const int NV, const bool tail, __m256i mt) {
    __m256 c0[6], c1[6];
    const bool t0 = tail && NV == 1, t1 = tail && NV == 2;
    AT_UNROLL
    for (int r = 0; r < MR; r++) {
        c0[r] = acc ? load8(c + r * ldc, t0, mt) : _mm256_setzero_ps();
        c1[r] = acc && NV == 2 ? load8(c + r * ldc + 8, t1, mt) : _mm256_setzero_ps();
    }
    for (int k = 0; k < K; k++) {
        const float *bk = b + (size_t)k * ldb, *ak = a.p + (size_t)k * a.cs;
        __m256 b0 = load8(bk, t0, mt);
        __m256 b1 = NV == 2 ? load8(bk + 8, t1, mt) : _mm256_setzero_ps();
        AT_UNROLL
        for (int r = 0; r < MR; r++) {
            __m256 x = _mm256_broadcast_ss(ak + (size_t)r * a.rs);
            c0[r] = _mm256_fmadd_ps(x, b0, c0[r]);
            if (NV == 2) c1[r] = _mm256_fmadd_ps(x, b1, c1[r]);
        }
    }
    AT_UNROLL
    for (int r = 0; r < MR; r++) {
        store8(c + r * ldc, t0, mt, c0[r]);
        if (NV == 2) store8(c + r * ldc + 8, t1, mt, c1[r]);
    }
}

VKC_TARGET_AVX2 static void mm256(float *c, size_t ldc, at_mat a, at_mat b, int M, int N, int K,
                                  bool acc) {
    for (int n0 = 0; n0 < N; n0 += 16) {
        const int w = N - n0 < 16 ? N - n0 : 16;
        const bool tail = w % 8 != 0;
        const __m256i mt = lanes8(w % 8);
        int r = 0;
#define AT_MM256(MR)                                                                           \
    do {                                                                                       \
        at_mat ar = {a.p + (size_t)r * a.rs, a.rs, a.cs};                                      \
        float *cr = c + (size_t)r * ldc + n0;                                                  \
        const float *bn = b.p + n0;                                                            \
        if (w > 8) {                                                                           \
            if (tail) mm256_block(cr, ldc, ar, bn, b.rs, K, acc, MR, 2, true, mt);            \
            else mm256_block(cr, ldc, ar, bn, b.rs, K, acc, MR, 2, false, mt);                \
        } else {                                                                               \
            if (tail) mm256_block(cr, ldc, ar, bn, b.rs, K, acc, MR, 1, true, mt);            \
            else mm256_block(cr, ldc, ar, bn, b.rs, K, acc, MR, 1, false, mt);                \
        }                                                                                      \
        r += MR;                                                                               \
    } while (0)
        while (r + 6 <= M) AT_MM256(6);
        if (M - r >= 4) AT_MM256(4);
        if (M - r >= 2) AT_MM256(2);
        if (M - r >= 1) AT_MM256(1);
#undef AT_MM256
    }
}

/* Scores of 8 keys of a row (scores512). Score rows hold AT_BK floats, so whole vectors are
 * read and written within them; only the mask row is read by lanes. */
VKC_TARGET_AVX2 AT_INLINE __m256 scores256(const float *dots, const float *mj, int n,
                                           __m256 scale) {
    __m256i vis = lanes8(n);
    __m256 d = _mm256_loadu_ps(dots);
    const __m256 ninf = _mm256_set1_ps(-INFINITY);
    __m256 keep = _mm256_castsi256_ps(vis), y;
    if (mj) {
        __m256 mv = _mm256_maskload_ps(mj, vis);
        /* a key the mask hides scores -inf whatever its k holds (NaN + -inf is NaN) */
        keep = _mm256_and_ps(keep, _mm256_cmp_ps(mv, ninf, _CMP_NEQ_UQ));
        y = _mm256_fmadd_ps(scale, d, mv);
    } else {
        y = _mm256_mul_ps(scale, d);
    }
    return _mm256_blendv_ps(ninf, y, keep);
}

VKC_TARGET_AVX2 static void fwd_rows256(const at_tile *t, float (*s)[AT_BK], float *m, float *l,
                                        float *o) {
    const vkc_attention *a = t->a;
    const int HS = a->HS, bk = t->nc, nv = (bk + 7) / 8;
    const __m256 scale = _mm256_set1_ps(a->scale);
    for (int i = t->r0; i < t->nq; i++) {
        float *si = s[i];
        const float *mrow = at_mask_row(a, t->b, t->i0 + i);
        const int n = t->last[i] - t->j0 + 1 < bk ? t->last[i] - t->j0 + 1 : bk;
        __m256 vmx = _mm256_set1_ps(-INFINITY);
        __m256 x[AT_BK / 8] = {vmx, vmx, vmx, vmx, vmx, vmx, vmx, vmx};
        AT_UNROLL
        for (int v = 0; v < AT_BK / 8; v++) {
            if (v >= nv) break;
            x[v] = scores256(si + 8 * v, mrow ? mrow + t->j0 + 8 * v : NULL, n - 8 * v, scale);
            vmx = _mm256_max_ps(vmx, x[v]);
        }
        float mx = hmax8(vmx);
        mx = m[i] > mx ? m[i] : mx;
        if (mx == -INFINITY) {
            for (int v = 0; v < nv; v++) _mm256_storeu_ps(si + 8 * v, _mm256_setzero_ps());
            continue;
        }
        const float alpha = vkc_exp_fast(m[i] - mx);
        const __m256 vmxb = _mm256_set1_ps(mx);
        __m256 vsum = _mm256_setzero_ps();
        for (int v = 0; v < nv; v += 2) { /* two exps side by side (exp_fast.h) */
            __m256 p[2] = {_mm256_sub_ps(x[v], vmxb), _mm256_sub_ps(x[v + 1], vmxb)};
            vkc_exp_fast256_n(p, 2); /* past bk: -inf, so 0 */
            _mm256_storeu_ps(si + 8 * v, p[0]);
            _mm256_storeu_ps(si + 8 * v + 8, p[1]); /* within the row's AT_BK */
            vsum = _mm256_add_ps(vsum, _mm256_add_ps(p[0], p[1]));
        }
        l[i] = l[i] * alpha + hsum8(vsum);
        m[i] = mx;
        if (o && alpha != 1.0f) {
            float *oi = o + (size_t)i * HS;
            const __m256 va = _mm256_set1_ps(alpha);
            int d = 0;
            for (; d + 8 <= HS; d += 8)
                _mm256_storeu_ps(oi + d, _mm256_mul_ps(_mm256_loadu_ps(oi + d), va));
            for (; d < HS; d++) oi[d] *= alpha;
        }
    }
}

VKC_TARGET_AVX2 static bool fwd_finish256(const at_tile *t, const float *o, const float *m,
                                          const float *l) {
    const vkc_attention *a = t->a;
    const int HS = a->HS;
    __m256 bad = _mm256_setzero_ps(); /* y - y: 0 for finite y, NaN for NaN and +-inf */
    bool tail_bad = false;
    for (int i = 0; i < t->nq; i++) {
        int tq = t->i0 + i;
        float *orow = a->out + at_off(a->so, t->b, t->h, tq);
        const float *oi = o + (size_t)i * HS;
        float lse = -INFINITY;
        if (l[i] != 0.0f) { /* NaN too (a +inf score): NaN out, never zeros */
            const __m256 vl = _mm256_set1_ps(l[i]);
            int d = 0;
            for (; d + 8 <= HS; d += 8) {
                __m256 y = _mm256_div_ps(_mm256_loadu_ps(oi + d), vl);
                bad = _mm256_or_ps(bad, _mm256_sub_ps(y, y));
                _mm256_storeu_ps(orow + d, y);
            }
            for (; d < HS; d++) {
                orow[d] = oi[d] / l[i];
                tail_bad |= !isfinite(orow[d]);
            }
            lse = m[i] + logf(l[i]);
        } else {
            memset(orow, 0, (size_t)HS * sizeof(float));
        }
        if (a->lse) a->lse[((size_t)t->b * a->NH + t->h) * a->Tq + tq] = lse;
    }
    return !tail_bad &&
           _mm256_movemask_ps(_mm256_cmp_ps(bad, _mm256_setzero_ps(), _CMP_NEQ_UQ)) == 0;
}

VKC_TARGET_AVX2 static void delta256(const at_tile *t, float *delta) {
    const vkc_attention *a = t->a;
    const int HS = a->HS;
    for (int i = 0; i < t->nq; i++) {
        const float *dor = a->dout + at_off(a->so, t->b, t->h, t->i0 + i);
        const float *orow = a->out + at_off(a->so, t->b, t->h, t->i0 + i);
        __m256d acc = _mm256_setzero_pd();
        int d = 0;
        for (; d + 4 <= HS; d += 4)
            acc = _mm256_fmadd_pd(_mm256_cvtps_pd(_mm_loadu_ps(dor + d)),
                                  _mm256_cvtps_pd(_mm_loadu_ps(orow + d)), acc);
        __m128d x = _mm_add_pd(_mm256_castpd256_pd128(acc), _mm256_extractf128_pd(acc, 1));
        double sum = _mm_cvtsd_f64(_mm_add_sd(x, _mm_unpackhi_pd(x, x)));
        for (; d < HS; d++) sum += (double)dor[d] * orow[d];
        delta[i] = (float)sum;
    }
}

VKC_TARGET_AVX2 static void bwd_rows256(const at_tile *t, const float *delta, const float *corr,
                                        float (*p)[AT_BK], float (*ds)[AT_BK]) {
    const vkc_attention *a = t->a;
    const int nc = t->nc, nv = (nc + 7) / 8;
    const __m256 scale = _mm256_set1_ps(a->scale);
    for (int i = t->r0; i < t->nq; i++) {
        const int tq = t->i0 + i;
        const float lse = a->lse[((size_t)t->b * a->NH + t->h) * a->Tq + tq];
        float *pi = p[i], *dsi = ds[i];
        if (t->last[i] < t->j0 || lse == -INFINITY) {
            for (int v = 0; v < nv; v++) {
                _mm256_storeu_ps(pi + 8 * v, _mm256_setzero_ps());
                _mm256_storeu_ps(dsi + 8 * v, _mm256_setzero_ps());
            }
            continue;
        }
        const float *mrow = at_mask_row(a, t->b, tq);
        const int n = t->last[i] - t->j0 + 1 < nc ? t->last[i] - t->j0 + 1 : nc;
        const __m256 vl = _mm256_set1_ps(lse), vd = _mm256_set1_ps(delta[i]);
        const __m256 vc = _mm256_set1_ps(corr[i]);
        for (int v = 0; v < nv; v += 2) { /* two exps side by side, within the rows' AT_BK */
            __m256 pj[2];
            for (int e = 0; e < 2; e++) {
                const float *mj = mrow ? mrow + t->j0 + 8 * (v + e) : NULL;
                pj[e] = _mm256_sub_ps(
                    _mm256_sub_ps(scores256(pi + 8 * (v + e), mj, n - 8 * (v + e), scale), vl), vc);
            }
            vkc_exp_fast256_n(pj, 2); /* masked: 0 */
            for (int e = 0; e < 2; e++) {
                __m256 dp = _mm256_loadu_ps(dsi + 8 * (v + e));
                __m256 dsv = _mm256_mul_ps(scale, _mm256_mul_ps(pj[e], _mm256_sub_ps(dp, vd)));
                /* dS = 0 where P is, whatever dP holds (a hidden key's v may be NaN) */
                dsv = _mm256_and_ps(dsv, _mm256_cmp_ps(pj[e], _mm256_setzero_ps(), _CMP_NEQ_UQ));
                _mm256_storeu_ps(pi + 8 * (v + e), pj[e]);
                _mm256_storeu_ps(dsi + 8 * (v + e), dsv);
            }
        }
    }
}

static const at_kern kern_avx2 = {mm256, pack_t_avx, fwd_rows256, fwd_finish256, delta256,
                                  bwd_rows256};
#endif

const at_kern *vkc_attention_fast_kern(vkc_isa isa) {
#ifdef VKC_X86
    if (isa == VKC_ISA_AVX512) return &kern_avx512;
    if (isa == VKC_ISA_AVX2) return &kern_avx2;
#endif
    (void)isa;
    return NULL;
}
