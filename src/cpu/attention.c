/* Fused scaled-dot-product attention (shaders/attention_forward.comp, attention_backward_{delta,dq,dkdv}.comp),
 * FlashAttention-2 (Dao 2023): no Tq x Tk matrix is stored.
 *
 * Forward: a block of AT_BQ query rows walks the keys in tiles of AT_BK with an online softmax
 * (running max m starting at -inf, running sum l, output accumulator rescaled by exp(m_old -
 * m_new)); a row whose keys are all masked keeps m = -inf and ends with out = 0, lse = -inf.
 * Backward: per head, key tiles in order (in groups, so q, dout and dq pass through the cache
 * once per group); for each, every query block recomputes
 * P = exp((s - lse) - c), dP = dout v^T, dS = P * (dP - delta) with delta = rowsum(dout * out)
 * and c lse's correction (at_corr; 0 but for rows with |lse| >= 256), and
 * adds P^T dout to dv, scale * dS^T q to dk, scale * dS k to dq. One thread owns a whole head,
 * so every gradient element is summed in the same order for any thread count (no atomics).
 *
 * Every product (q k^T, dout v^T, p v, P^T dout, dS^T q, dS k) is a small matrix product
 * (at_mm) in register tiles of 4 rows x 8 columns, so each load of k, v, q or dout serves four
 * rows; each element is still summed in order over its reduction index whatever the tiling, and
 * the compiler vectorises across columns without reassociating a sum. Rows that see no key of a
 * tile and keys past the block's last visible one are skipped, as are padding queries (Tq ==
 * Tk with key_lens). A key or query a row does not see adds nothing even when its rows hold NaN
 * or Inf: scores select -inf, dS selects 0, and a block (forward) or head (backward) whose
 * result is not finite is redone checking every product's operand rows (at_mm_seen). Scratch lives on the stack
 * (forward ~105 KiB, backward ~145 KiB at the largest HS),
 * nothing is allocated per run.
 *
 * The loops above are written once against a table of kernels (at_kern, attention_kern.h):
 * those below, the reference (VKATTN_CPU_KERNELS=reference, `vkattn check`), or the fast ones
 * for the CPU's vector ISA (attention_fast.c). */
#include "cpu/attention_kern.h"
#include "cpu/convert.h"
#include "vkattn.h" /* vka_dtype */

#include <math.h>
#include <string.h>

/* gcc will not if-convert at_exp's float compares while they might trap (-ftrapping-math, the
 * default), so its loops stay scalar; no FP exception is ever looked at here, and every value is
 * the same either way. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math")
#endif

/* The loops over a key tile or over d are independent per element (no sums across them), so
 * "omp simd" vectorises them without changing any result (gcc -O2 alone leaves them scalar). */
#ifdef VKA_HAVE_OPENMP
#define AT_SIMD _Pragma("omp simd")
#define AT_SIMD_MAX(x) VKA_PRAGMA(omp simd reduction(max : x))
#define AT_SIMD_OR(x) VKA_PRAGMA(omp simd reduction(| : x))
#else
#define AT_SIMD
#define AT_SIMD_MAX(x)
#define AT_SIMD_OR(x)
#endif

/* Fully unrolled 8-wide loops keep their accumulators in registers (as in matmul.c). */
#if defined(__clang__)
#define AT_UNROLL _Pragma("unroll")
#elif defined(__GNUC__)
#define AT_UNROLL _Pragma("GCC unroll 8")
#else
#define AT_UNROLL
#endif
/* The k loop of the 4x8 kernel unrolled 4 times: fewer loop instructions between the 16 SSE
 * multiply-adds of a step (measured ~7% on the backward, 3% on the forward; 8 is slower). */
#if defined(__clang__)
#define AT_UNROLL4 _Pragma("unroll 4")
#elif defined(__GNUC__)
#define AT_UNROLL4 _Pragma("GCC unroll 4")
#else
#define AT_UNROLL4
#endif

/* exp(x) for x <= 88 (Cephes expf: x = n ln2 + r, a degree-7 polynomial in r, 2^n from the
 * exponent bits; within 1 ulp of exp for every float in [-87, 1], measured), 0 below -87 (and
 * for -inf: masked keys), written so that a loop of it vectorises. */
static inline float at_exp(float x) {
    if (x != x) return x; /* NaN: its int conversion below would be undefined behaviour */
    float xc = x < -87.0f ? -87.0f : x > 88.0f ? 88.0f : x;
    float n = (xc * 1.44269504f + 12582912.0f) - 12582912.0f; /* round to nearest */
    float r = xc - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    float y = 1.9875691500e-4f;
    y = y * r + 1.3981999507e-3f;
    y = y * r + 8.3334519073e-3f;
    y = y * r + 4.1665795894e-2f;
    y = y * r + 1.6666665459e-1f;
    y = y * r + 5.0000001201e-1f;
    y = y * r * r + r + 1.0f;
    int32_t bits = ((int32_t)n + 127) << 23;
    float pow2n;
    memcpy(&pow2n, &bits, sizeof pow2n);
    return x < -87.0f ? 0.0f : y * pow2n;
}

/* Rows with |lse| at least this recompute their max and sum in the backward (at_corr);
 * shaders/attention_backward_delta.comp LSE_EXACT. */
#define AT_LSE_EXACT 256.0f

/* Queries [0, at_query_end) are real: with key_lens and Tq == Tk (self-attention over padded
 * sequences) queries t >= L are padding and see no key. */
static int at_query_end(const vkc_attention *a, int L) {
    return a->key_lens && a->Tq == a->Tk ? L : a->Tq;
}

/* The last key query t may see with L valid keys (-1: none). */
static int at_last_key(const vkc_attention *a, int L, int t) {
    if (t >= at_query_end(a, L)) return -1;
    long last = L - 1;
    if (a->causal == 1 && t < last) last = t;
    if (a->causal == 2 && (long)t + L - a->Tq < last) last = (long)t + L - a->Tq;
    return last < -1 ? -1 : (int)last;
}

static int at_len(const vkc_attention *a, int b) { return a->key_lens ? a->key_lens[b] : a->Tk; }

/* The online softmax's start for query rows i0 .. i0+nq (L valid keys): each row's last
 * visible key, running max m = -inf and sum l = 0. Returns the largest last key (-1: none). */
static int at_rows_begin(const vkc_attention *a, int L, int i0, int nq, int *last, float *m,
                         float *l) {
    int max_last = -1;
    for (int i = 0; i < nq; i++) {
        last[i] = at_last_key(a, L, i0 + i);
        if (last[i] > max_last) max_last = last[i];
        m[i] = -INFINITY;
        l[i] = 0.0f;
    }
    return max_last;
}

/* c (M, N) (+)= a (M, K) b (K, N): c[r*ldc + n] = c0 + sum_k a[r*rs + k*cs] * b[k*ldb + n],
 * summed over k in order from c0 (c's value with accumulate, else 0) for every element whatever
 * the blocking, so the result does not depend on M, N or the kernel that computed it.
 * 4 rows x 8 columns in registers per step (the pattern of matmul.c's kernel that gcc keeps in
 * SSE registers): each load of b serves four rows, where a 1-row kernel is load-bound. */
static void at_kernel_4x8(float *c, size_t ldc, vkc_mm_view a, const float *b, size_t ldb,
                          int K, bool acc) {
    float c0[AT_DC] = {0}, c1[AT_DC] = {0}, c2[AT_DC] = {0}, c3[AT_DC] = {0};
    if (acc) {
        memcpy(c0, c + 0 * ldc, sizeof c0);
        memcpy(c1, c + 1 * ldc, sizeof c1);
        memcpy(c2, c + 2 * ldc, sizeof c2);
        memcpy(c3, c + 3 * ldc, sizeof c3);
    }
    const float *a0 = a.p, *a1 = a.p + a.rs, *a2 = a.p + 2 * a.rs, *a3 = a.p + 3 * a.rs;
    AT_UNROLL4
    for (int k = 0; k < K; k++) {
        const float *bk = b + (size_t)k * ldb;
        size_t ko = (size_t)k * a.cs;
        float x0 = a0[ko], x1 = a1[ko], x2 = a2[ko], x3 = a3[ko];
        AT_UNROLL
        for (int e = 0; e < AT_DC; e++) {
            c0[e] += x0 * bk[e];
            c1[e] += x1 * bk[e];
            c2[e] += x2 * bk[e];
            c3[e] += x3 * bk[e];
        }
    }
    memcpy(c + 0 * ldc, c0, sizeof c0);
    memcpy(c + 1 * ldc, c1, sizeof c1);
    memcpy(c + 2 * ldc, c2, sizeof c2);
    memcpy(c + 3 * ldc, c3, sizeof c3);
}

static void at_kernel_1x8(float *c, vkc_mm_view a, const float *b, size_t ldb, int K, bool acc) {
    float c0[AT_DC] = {0};
    if (acc) memcpy(c0, c, sizeof c0);
    for (int k = 0; k < K; k++) {
        const float *bk = b + (size_t)k * ldb;
        float x0 = a.p[(size_t)k * a.cs];
        AT_UNROLL
        for (int e = 0; e < AT_DC; e++) c0[e] += x0 * bk[e];
    }
    memcpy(c, c0, sizeof c0);
}

static void at_mm(float *c, size_t ldc, vkc_mm_view a, vkc_mm_view b, int M, int N, int K,
                  bool acc) {
    int n0 = 0;
    for (; n0 + AT_DC <= N; n0 += AT_DC) {
        int r = 0;
        for (; r + 4 <= M; r += 4) {
            vkc_mm_view ar = {a.p + (size_t)r * a.rs, a.rs, a.cs};
            at_kernel_4x8(c + (size_t)r * ldc + n0, ldc, ar, b.p + n0, b.rs, K, acc);
        }
        for (; r < M; r++) {
            vkc_mm_view ar = {a.p + (size_t)r * a.rs, a.rs, a.cs};
            at_kernel_1x8(c + (size_t)r * ldc + n0, ar, b.p + n0, b.rs, K, acc);
        }
    }
    for (int r = 0; r < M && n0 < N; r++)
        for (int n = n0; n < N; n++) {
            float s = acc ? c[(size_t)r * ldc + n] : 0.0f;
            for (int k = 0; k < K; k++)
                s += a.p[(size_t)r * a.rs + (size_t)k * a.cs] * b.p[(size_t)k * b.rs + n];
            c[(size_t)r * ldc + n] = s;
        }
}

/* kt (HS, AT_BK) = rows j0 .. j0+bk of the (b, h) view x, transposed, zeros past bk. */
static void at_pack_t(float *kt, const float *x, vkc_attn_strides s, int b, int h, int j0, int bk,
                      int HS) {
    for (int jj = 0; jj < AT_BK; jj++) {
        if (jj >= bk) {
            for (int d = 0; d < HS; d++) kt[(size_t)d * AT_BK + jj] = 0.0f;
            continue;
        }
        const float *row = x + at_off(s, b, h, j0 + jj);
        for (int d = 0; d < HS; d++) kt[(size_t)d * AT_BK + jj] = row[d];
    }
}

/* Row i of s (AT_BK) from its dots with keys j0 .. j0+nc: scale * dot + mask for keys up to
 * last, -inf past it and where the mask is -inf (whatever the dot: NaN + -inf is NaN). */
static void at_scores_row(float *s, const float *mrow, int j0, int nc, int last, float scale) {
    int n = last - j0 + 1 < nc ? last - j0 + 1 : nc; /* keys up to last */
    if (mrow) {
        const float *mj = mrow + j0;
        AT_SIMD
        for (int jj = 0; jj < n; jj++)
            s[jj] = mj[jj] == -INFINITY ? -INFINITY : scale * s[jj] + mj[jj];
    } else {
        AT_SIMD
        for (int jj = 0; jj < n; jj++) s[jj] = scale * s[jj];
    }
    for (int jj = n < 0 ? 0 : n; jj < nc; jj++) s[jj] = -INFINITY;
}

/* The reference forward of a tile's rows (at_kern.fwd_rows). */
static void at_fwd_rows_ref(const at_tile *t, float (*s)[AT_BK], float *m, float *l, float *o) {
    const vkc_attention *a = t->a;
    const int HS = a->HS, bk = t->nc;
    for (int i = t->r0; i < t->nq; i++) {
        float *si = s[i];
        at_scores_row(si, at_mask_row(a, t->b, t->i0 + i), t->j0, bk, t->last[i], a->scale);
        float mx = m[i];
        AT_SIMD_MAX(mx)
        for (int jj = 0; jj < bk; jj++) mx = si[jj] > mx ? si[jj] : mx;
        if (mx == -INFINITY) { /* every key so far masked: nothing to add */
            for (int jj = 0; jj < bk; jj++) si[jj] = 0.0f;
            continue;
        }
        float alpha = at_exp(m[i] - mx); /* 0 when m[i] = -inf (o and l are 0 then) */
        AT_SIMD
        for (int jj = 0; jj < bk; jj++) si[jj] = at_exp(si[jj] - mx); /* masked: 0 */
        float sum = 0.0f;
        for (int jj = 0; jj < bk; jj++) sum += si[jj];
        l[i] = l[i] * alpha + sum;
        m[i] = mx;
        if (o && alpha != 1.0f) {
            float *oi = o + (size_t)i * HS;
            AT_SIMD
            for (int d = 0; d < HS; d++) oi[d] *= alpha;
        }
    }
}

static bool at_fwd_finish_ref(const at_tile *t, const float *o, const float *m, const float *l) {
    const vkc_attention *a = t->a;
    const int HS = a->HS;
    int bad = 0;
    for (int i = 0; i < t->nq; i++) {
        int tq = t->i0 + i;
        float *orow = a->out + at_off(a->so, t->b, t->h, tq);
        const float *oi = o + (size_t)i * HS;
        float lse = -INFINITY;
        if (l[i] != 0.0f) { /* NaN too (a +inf score): NaN out, as on Vulkan, never zeros */
            for (int d = 0; d < HS; d++) {
                orow[d] = oi[d] / l[i];
                bad |= orow[d] - orow[d] != 0.0f; /* NaN for NaN, +-inf */
            }
            lse = m[i] + logf(l[i]);
        } else {
            for (int d = 0; d < HS; d++) orow[d] = 0.0f;
        }
        if (a->lse) a->lse[((size_t)t->b * a->NH + t->h) * a->Tq + tq] = lse;
    }
    return !bad;
}

/* Whether rows 0 .. n of x (row stride st) hold only finite floats in their first HS. */
static bool at_rows_finite(const float *x, size_t st, int n, int HS) {
    int bad = 0;
    for (int r = 0; r < n && !bad; r++) {
        const float *row = x + (size_t)r * st;
        AT_SIMD_OR(bad)
        for (int d = 0; d < HS; d++) bad |= row[d] - row[d] != 0.0f; /* NaN for NaN, +-inf */
    }
    return !bad;
}

/* kn->mm row by row against a copy of b whose rows k are zeroed where a[r][k] is 0 (at_mm_seen).
 * K <= AT_BK, N <= VKC_ATTN_MAX_HS. */
static void at_mm_rowwise(const at_kern *kn, float *c, size_t ldc, vkc_mm_view a, vkc_mm_view b,
                          int M, int N, int K) {
    float bz[AT_BK * VKC_ATTN_MAX_HS];
    for (int r = 0; r < M; r++) {
        for (int k = 0; k < K; k++) {
            float *dst = bz + (size_t)k * N;
            if (a.p[(size_t)r * a.rs + (size_t)k * a.cs] != 0.0f)
                memcpy(dst, b.p + (size_t)k * b.rs, (size_t)N * sizeof(float));
            else
                memset(dst, 0, (size_t)N * sizeof(float));
        }
        kn->mm(c + (size_t)r * ldc, ldc, (vkc_mm_view){a.p + (size_t)r * a.rs, a.rs, a.cs},
               (vkc_mm_view){bz, (size_t)N, 1}, 1, N, K, true);
    }
}

/* c (M, N) += a (M, K) b (K, N) where a term of weight a[r][k] = 0 (a key or query row r does
 * not see) adds nothing even if b's row k holds a NaN or Inf: kn->mm as is when b is finite
 * (b_finite, or not checked on a first try; 0 * finite adds 0), else row by row with those
 * rows of b zeroed. mm's sums do not depend on M, so the bits are those of a run whose hidden
 * rows held zeros. */
static void at_mm_seen(const at_kern *kn, float *c, size_t ldc, vkc_mm_view a, vkc_mm_view b,
                       int M, int N, int K, bool b_finite) {
    if (b_finite) kn->mm(c, ldc, a, b, M, N, K, true);
    else at_mm_rowwise(kn, c, ldc, a, b, M, N, K);
}

/* Rows i0 .. i0+nq of a head: how many of them (from i0) may see a key; the rest are padding. */
static int at_rows_real(const vkc_attention *a, int L, int i0, int nq) {
    int n = at_query_end(a, L) - i0;
    return n < 0 ? 0 : n < nq ? n : nq;
}

/* Forward of query rows i0 .. i0+nq of head (b, h). careful: every product against v checks
 * its rows (at_mm_seen); without, a NaN or Inf in a v row some row does not see may reach that
 * row's out (0 * NaN), so the caller reruns a block whose out is not finite with careful set
 * (at_forward_item): ordinary data pays one look at out per block. Returns whether out and lse
 * of the block's rows are finite (or -inf). */
static bool at_forward_block(const at_kern *kn, const vkc_attention *a, int b, int h, int i0,
                             int nq, bool careful) {
    float kt[VKC_ATTN_MAX_HS * AT_BK];
    float o[AT_BQ * VKC_ATTN_MAX_HS]; /* (nq, HS) */
    float s[AT_BQ][AT_BK];
    float m[AT_BQ], l[AT_BQ];
    int last[AT_BQ];
    const int HS = a->HS, L = at_len(a, b);
    const float *q0 = a->q + at_off(a->sq, b, h, i0);
    int max_last = at_rows_begin(a, L, i0, nq, last, m, l);
    memset(o, 0, (size_t)nq * HS * sizeof(float));
    /* rows past nr are padding queries: no key, never read (out 0, lse -inf) */
    const int nr = at_rows_real(a, L, i0, nq);
    at_tile t = {.a = a, .b = b, .h = h, .i0 = i0, .nq = nr, .last = last};
    for (int j0 = 0; j0 <= max_last; j0 += AT_BK) {
        int bk = max_last + 1 - j0 < AT_BK ? max_last + 1 - j0 : AT_BK;
        int r0 = 0; /* rows before r0 see no key of this tile (last grows with the row) */
        while (r0 < nr && last[r0] < j0) r0++;
        kn->pack_t(kt, a->k, a->sk, b, h, j0, bk, HS);
        kn->mm(s[r0], AT_BK, (vkc_mm_view){q0 + (size_t)r0 * a->sq.st, a->sq.st, 1},
               (vkc_mm_view){kt, AT_BK, 1}, nr - r0, at_cols(bk), HS, false);
        t.r0 = r0;
        t.j0 = j0;
        t.nc = bk;
        kn->fwd_rows(&t, s, m, l, o);
        /* o += p v over the tile's keys (a masked key adds nothing) */
        const float *v0 = a->v + at_off(a->sv, b, h, j0);
        at_mm_seen(kn, o + (size_t)r0 * HS, HS, (vkc_mm_view){s[r0], AT_BK, 1},
                   (vkc_mm_view){v0, a->sv.st, 1}, nr - r0, HS, bk,
                   !careful || at_rows_finite(v0, a->sv.st, bk, HS));
    }
    t.nq = nq;
    return kn->fwd_finish(&t, o, m, l);
}

/* Zero rows 0 .. T of HS of head (b, h) of view x. */
static void at_zero_rows(float *x, vkc_attn_strides s, int b, int h, int T, int HS) {
    for (int t = 0; t < T; t++) memset(x + at_off(s, b, h, t), 0, (size_t)HS * sizeof(float));
}

/* The reference backward of a tile's rows (at_kern.bwd_rows). */
static void at_bwd_rows_ref(const at_tile *t, const float *delta, const float *corr,
                            float (*p)[AT_BK], float (*ds)[AT_BK]) {
    const vkc_attention *a = t->a;
    const float scale = a->scale;
    const int nc = t->nc;
    for (int i = t->r0; i < t->nq; i++) {
        int tq = t->i0 + i;
        float lse = a->lse[((size_t)t->b * a->NH + t->h) * a->Tq + tq];
        float *pi = p[i], *dsi = ds[i];
        if (t->last[i] < t->j0 || lse == -INFINITY) {
            for (int jj = 0; jj < nc; jj++) pi[jj] = dsi[jj] = 0.0f;
            continue;
        }
        float fdelta = delta[i], c = corr[i];
        at_scores_row(pi, at_mask_row(a, t->b, tq), t->j0, nc, t->last[i], scale);
        AT_SIMD
        for (int jj = 0; jj < nc; jj++) {
            float pj = at_exp((pi[jj] - lse) - c); /* masked: 0 */
            pi[jj] = pj;
            /* 0 where pj is, whatever dP holds (a hidden key's v may be NaN) */
            dsi[jj] = pj != 0.0f ? scale * (pj * (dsi[jj] - fdelta)) : 0.0f;
        }
    }
}

/* rowsum(dout * out) in double (at_kern.delta). */
static void at_delta_ref(const at_tile *t, float *delta) {
    const vkc_attention *a = t->a;
    for (int i = 0; i < t->nq; i++) {
        const float *dor = a->dout + at_off(a->so, t->b, t->h, t->i0 + i);
        const float *orow = a->out + at_off(a->so, t->b, t->h, t->i0 + i);
        double sum = 0.0;
        for (int d = 0; d < a->HS; d++) sum += (double)dor[d] * orow[d];
        delta[i] = (float)sum;
    }
}

/* What at_backward_block needs of its query block (at_backward_head). */
typedef struct at_qblock {
    int i0, nq;         /* rows i0 .. i0+nq; rows from nq are padding queries, never read */
    const float *delta; /* (nq) rowsum(dout * out) */
    const float *corr;  /* (nq) lse's correction (at_corr) */
    bool finite;        /* the rows' q and dout hold no NaN or Inf */
} at_qblock;

/* Backward of key tile j0 .. j0+bk of head (b, h) against query block qb: adds to dv and dk
 * rows of the tile and to dq rows of the block. kt, vt: the tile's k and v transposed;
 * k_finite: its k rows hold no NaN or Inf. A term of weight 0 (a key a row does not see) adds
 * nothing, whatever the other operand holds (at_mm_seen). */
static void at_backward_block(const at_kern *kn, const vkc_attention *a, int b, int h, int L,
                              int j0, int bk, const float *kt, const float *vt, bool k_finite,
                              const at_qblock *qb) {
    float p[AT_BQ][AT_BK], ds[AT_BQ][AT_BK];
    int last[AT_BQ];
    const int HS = a->HS, i0 = qb->i0, nq = qb->nq;
    int r0 = nq, max_last = -1;
    for (int i = nq - 1; i >= 0; i--) {
        last[i] = at_last_key(a, L, i0 + i);
        if (last[i] >= j0) r0 = i; /* rows before r0 see no key of this tile */
        if (last[i] > max_last) max_last = last[i];
    }
    if (r0 == nq) return;
    int nc = max_last + 1 - j0 < bk ? max_last + 1 - j0 : bk; /* keys any row sees */
    int nr = nq - r0;
    const size_t qs = a->sq.st, os = a->so.st;
    const float *q0 = a->q + at_off(a->sq, b, h, i0 + r0);
    const float *do0 = a->dout + at_off(a->so, b, h, i0 + r0);
    /* p = q k^T, ds = dout v^T (dP) for now */
    kn->mm(p[r0], AT_BK, (vkc_mm_view){q0, qs, 1}, (vkc_mm_view){kt, AT_BK, 1}, nr,
           at_cols(nc), HS, false);
    kn->mm(ds[r0], AT_BK, (vkc_mm_view){do0, os, 1}, (vkc_mm_view){vt, AT_BK, 1}, nr,
           at_cols(nc), HS, false);
    at_tile t = {.a = a, .b = b, .h = h, .i0 = i0, .nq = nq, .r0 = r0, .j0 = j0, .nc = nc,
                 .last = last};
    kn->bwd_rows(&t, qb->delta, qb->corr, p, ds);
    /* dv_j += sum_i P[i][j] dout_i, dk_j += sum_i dS[i][j] q_i (scale in dS) */
    at_mm_seen(kn, a->dv + at_off(a->sv, b, h, j0), a->sv.st, (vkc_mm_view){p[r0], 1, AT_BK},
               (vkc_mm_view){do0, os, 1}, nc, HS, nr, qb->finite);
    at_mm_seen(kn, a->dk + at_off(a->sk, b, h, j0), a->sk.st, (vkc_mm_view){ds[r0], 1, AT_BK},
               (vkc_mm_view){q0, qs, 1}, nc, HS, nr, qb->finite);
    /* dq_i += sum_j dS[i][j] k_j */
    at_mm_seen(kn, a->dq + at_off(a->sq, b, h, i0 + r0), qs, (vkc_mm_view){ds[r0], AT_BK, 1},
               (vkc_mm_view){a->k + at_off(a->sk, b, h, j0), a->sk.st, 1}, nr, HS, nc,
               k_finite);
}

/* The running max m and sum l of query rows i0 .. i0+nq of head (b, h) over all their keys, by
 * the forward's loops and kernels (so with its scores, bit for bit), without out. */
static void at_row_stats(const at_kern *kn, const vkc_attention *a, int b, int h, int L, int i0,
                         int nq, float *m, float *l) {
    float kt[VKC_ATTN_MAX_HS * AT_BK];
    float s[AT_BQ][AT_BK];
    int last[AT_BQ];
    const float *q0 = a->q + at_off(a->sq, b, h, i0);
    int max_last = at_rows_begin(a, L, i0, nq, last, m, l);
    at_tile t = {.a = a, .b = b, .h = h, .i0 = i0, .nq = nq, .last = last};
    for (int j0 = 0; j0 <= max_last; j0 += AT_BK) {
        int bk = max_last + 1 - j0 < AT_BK ? max_last + 1 - j0 : AT_BK;
        int r0 = 0;
        while (r0 < nq && last[r0] < j0) r0++;
        kn->pack_t(kt, a->k, a->sk, b, h, j0, bk, a->HS);
        kn->mm(s[r0], AT_BK, (vkc_mm_view){q0 + (size_t)r0 * a->sq.st, a->sq.st, 1},
               (vkc_mm_view){kt, AT_BK, 1}, nq - r0, at_cols(bk), a->HS, false);
        t.r0 = r0;
        t.j0 = j0;
        t.nc = bk;
        kn->fwd_rows(&t, s, m, l, NULL);
    }
}

/* corr (nq): the correction of each row's lse, P = exp((s - lse) - corr). lse = m + log(l) is a
 * float, so with |lse| large its rounding swallows log(l) (a row every key masks with -1e30 has
 * lse = -1e30 exactly, and exp(s - lse) = 1 per key instead of 1/L). Such rows (|lse| >=
 * AT_LSE_EXACT, finite) recompute m and l and get corr = (m - lse) + log(l) (m - lse exact,
 * Sterbenz), so (s - lse) - corr = (s - m) - log(l) to float rounding. The others get 0 (below
 * AT_LSE_EXACT lse's rounding moves P by at most 2^-17 relative): P = exp(s - lse) bitwise, and
 * a block without such a row costs nothing more. */
static void at_corr(const at_kern *kn, const vkc_attention *a, int b, int h, int L, int i0, int nq,
                    float *corr) {
    const float *lse = a->lse + ((size_t)b * a->NH + h) * a->Tq + i0;
    bool any = false;
    for (int i = 0; i < nq; i++) {
        corr[i] = 0.0f;
        any |= fabsf(lse[i]) >= AT_LSE_EXACT && isfinite(lse[i]);
    }
    if (!any) return;
    float m[AT_BQ], l[AT_BQ];
    at_row_stats(kn, a, b, h, L, i0, nq, m, l);
    for (int i = 0; i < nq; i++)
        if (fabsf(lse[i]) >= AT_LSE_EXACT && isfinite(lse[i]) && isfinite(m[i]) && l[i] > 0.0f)
            corr[i] = (m[i] - lse[i]) + logf(l[i]);
}

/* Backward of head (b, h) (careful, the return: as at_forward_block's, for q, dout and k rows
 * against dq, dk, dv): groups of key tiles (as many as the scratch holds at this HS, up to
 * AT_GK keys) against every query block in turn, so q, dout and dq pass through the cache once
 * per group rather than once per tile. Each dq row still gets its tiles in order and each dk, dv
 * row its query blocks in order. */
static bool at_backward_head(const at_kern *kn, const vkc_attention *a, int b, int h,
                             bool careful) {
    float kt[VKC_ATTN_MAX_HS * AT_BK], vt[VKC_ATTN_MAX_HS * AT_BK];
    const int HS = a->HS, L = at_len(a, b);
    const size_t tile = (size_t)HS * AT_BK; /* floats of one packed tile */
    int G = VKC_ATTN_MAX_HS / HS < AT_GK / AT_BK ? VKC_ATTN_MAX_HS / HS : AT_GK / AT_BK;
    at_zero_rows(a->dq, a->sq, b, h, a->Tq, HS);
    at_zero_rows(a->dk, a->sk, b, h, a->Tk, HS);
    at_zero_rows(a->dv, a->sv, b, h, a->Tk, HS);
    for (int g0 = 0; g0 < L; g0 += G * AT_BK) {
        int ng = 0;
        bool k_finite[AT_GK / AT_BK];
        for (int j0 = g0; j0 < L && ng < G; j0 += AT_BK, ng++) {
            int bk = L - j0 < AT_BK ? L - j0 : AT_BK;
            kn->pack_t(kt + ng * tile, a->k, a->sk, b, h, j0, bk, HS);
            kn->pack_t(vt + ng * tile, a->v, a->sv, b, h, j0, bk, HS);
            k_finite[ng] =
                !careful || at_rows_finite(a->k + at_off(a->sk, b, h, j0), a->sk.st, bk, HS);
        }
        for (int i0 = 0; i0 < a->Tq; i0 += AT_BQ) {
            int nq = at_rows_real(a, L, i0, a->Tq - i0 < AT_BQ ? a->Tq - i0 : AT_BQ);
            if (nq == 0 || at_last_key(a, L, i0 + nq - 1) < g0) continue; /* none sees the group */
            float delta[AT_BQ], corr[AT_BQ]; /* once per group */
            at_tile t = {.a = a, .b = b, .h = h, .i0 = i0, .nq = nq};
            kn->delta(&t, delta);
            at_corr(kn, a, b, h, L, i0, nq, corr);
            at_qblock qb = {.i0 = i0, .nq = nq, .delta = delta, .corr = corr,
                            .finite = !careful ||
                                      (at_rows_finite(a->q + at_off(a->sq, b, h, i0), a->sq.st, nq,
                                                     HS) &&
                                       at_rows_finite(a->dout + at_off(a->so, b, h, i0),
                                                      a->so.st, nq, HS))};
            for (int g = 0; g < ng; g++) {
                int j0 = g0 + g * AT_BK, bk = L - j0 < AT_BK ? L - j0 : AT_BK;
                at_backward_block(kn, a, b, h, L, j0, bk, kt + g * tile, vt + g * tile,
                                  k_finite[g], &qb);
            }
        }
    }
    for (int t = 0; t < a->Tq; t++)
        if (!at_rows_finite(a->dq + at_off(a->sq, b, h, t), 0, 1, HS)) return false;
    for (int j = 0; j < a->Tk; j++)
        if (!at_rows_finite(a->dk + at_off(a->sk, b, h, j), 0, 1, HS) ||
            !at_rows_finite(a->dv + at_off(a->sv, b, h, j), 0, 1, HS))
            return false;
    return true;
}

static const at_kern at_kern_ref = {at_mm, at_pack_t, at_fwd_rows_ref, at_fwd_finish_ref,
                                    at_delta_ref, at_bwd_rows_ref};

static const at_kern *at_kern_for(vkc_isa isa) {
    const at_kern *kn = vkc_attention_fast_kern(isa);
    return kn ? kn : &at_kern_ref;
}

void vkc_attention_forward(const vkc_attention *a, vkc_isa isa, int nt) {
    const at_kern *kn = at_kern_for(isa);
    long blocks = (a->Tq + AT_BQ - 1) / AT_BQ, items = (long)a->B * a->NH * blocks;
    double work = (double)a->B * a->NH * a->Tq * a->Tk * a->HS;
    (void)work; /* unused without OpenMP */
    VKA_OMP_FOR_DYNAMIC(nt, work > VKA_OMP_MIN_WORK)
    for (long it = 0; it < items; it++) {
        int bh = (int)(it / blocks), i0 = (int)(it % blocks) * AT_BQ;
        int nq = a->Tq - i0 < AT_BQ ? a->Tq - i0 : AT_BQ;
        if (!at_forward_block(kn, a, bh / a->NH, bh % a->NH, i0, nq, false))
            at_forward_block(kn, a, bh / a->NH, bh % a->NH, i0, nq, true);
    }
}

void vkc_attention_backward(const vkc_attention *a, vkc_isa isa, int nt) {
    const at_kern *kn = at_kern_for(isa);
    int heads = a->B * a->NH;
    double work = (double)heads * a->Tq * a->Tk * a->HS;
    (void)work;
    VKA_OMP_FOR_DYNAMIC(nt, work > VKA_OMP_MIN_WORK)
    for (int bh = 0; bh < heads; bh++)
        if (!at_backward_head(kn, a, bh / a->NH, bh % a->NH, false))
            at_backward_head(kn, a, bh / a->NH, bh % a->NH, true);
}

/* --- 16-bit q, k, v, out (backend.h: the 16-bit rule of both directions) -------------------- */

/* Floats of T rows of HS, rounded up to 16 (64 bytes). */
static size_t at16_floats(int T, int HS) { return ((size_t)T * HS + 15) / 16 * 16; }

/* Floats of one head's forward scratch: q (Tq rows), k and v (Tk rows) widened, out (Tq rows)
 * before narrowing. */
static size_t at16_head_floats(const vkc_attention *a) {
    return 2 * at16_floats(a->Tq, a->HS) + 2 * at16_floats(a->Tk, a->HS);
}

size_t vkc_attention_forward16_scratch(const vkc_attention *a, int nt) {
    int heads = a->B * a->NH;
    return (size_t)(heads < nt ? heads : nt) * at16_head_floats(a);
}

/* The T rows (b, h, 0 .. T) of view x (dtype dt; 16-bit: uint16_t elements) into dst (T, HS)
 * as f32; f32 rows are copied too, so that the head's descriptor has one layout. */
static void at16_widen(float *dst, const void *x, int dt, vkc_attn_strides s, int b, int h,
                       int T, int HS, unsigned cvt) {
    for (int t = 0; t < T; t++) {
        size_t e = at_off(s, b, h, t);
        float *row = dst + (size_t)t * HS;
        if (dt == VKA_F32) memcpy(row, (const float *)x + e, (size_t)HS * sizeof *row);
        else vkc_convert_serial(row, VKA_F32, (const uint16_t *)x + e, dt, (size_t)HS, cvt);
    }
}

/* Head (b, h) of a alone (B = NH = 1): its lse, mask and key length; views are the caller's. */
static vkc_attention at16_head(const vkc_attention *a, int b, int h) {
    vkc_attention one = *a;
    one.B = one.NH = 1;
    one.lse = a->lse ? a->lse + ((size_t)b * a->NH + h) * a->Tq : NULL;
    one.mask = a->mask && a->mask_per_batch ? a->mask + (size_t)b * a->Tq * a->Tk : a->mask;
    one.mask_per_batch = false;
    one.key_lens = a->key_lens ? a->key_lens + b : NULL;
    return one;
}

void vkc_attention_forward16(const vkc_attention *a, const int dt[4], float *scratch,
                             vkc_isa isa, unsigned cvt, int nt) {
    const at_kern *kn = at_kern_for(isa);
    int heads = a->B * a->NH, blocks = heads < nt ? heads : nt, HS = a->HS;
    size_t per = at16_head_floats(a), nq = at16_floats(a->Tq, HS), nk = at16_floats(a->Tk, HS);
    double work = (double)heads * a->Tq * a->Tk * HS;
    (void)work;
    VKA_OMP_FOR(nt, work > VKA_OMP_MIN_WORK)
    for (int bl = 0; bl < blocks; bl++) {
        float *q = scratch + (size_t)bl * per, *k = q + nq, *v = k + nk, *o = v + nk;
        for (int bh = (int)((long long)heads * bl / blocks);
             bh < (int)((long long)heads * (bl + 1) / blocks); bh++) {
            int b = bh / a->NH, h = bh % a->NH;
            at16_widen(q, a->q, dt[0], a->sq, b, h, a->Tq, HS, cvt);
            at16_widen(k, a->k, dt[1], a->sk, b, h, a->Tk, HS, cvt);
            at16_widen(v, a->v, dt[2], a->sv, b, h, a->Tk, HS, cvt);
            /* the head alone: B = NH = 1, rows packed; out in place when f32 */
            vkc_attention one = at16_head(a, b, h);
            vkc_attn_strides rows = {0, 0, (size_t)HS};
            one.q = q, one.k = k, one.v = v, one.sq = one.sk = one.sv = rows;
            if (dt[3] == VKA_F32) {
                one.out = a->out + at_off(a->so, b, h, 0);
                one.so = (vkc_attn_strides){0, 0, a->so.st};
            } else {
                one.out = o, one.so = rows;
            }
            for (int i0 = 0; i0 < a->Tq; i0 += AT_BQ) {
                int n = a->Tq - i0 < AT_BQ ? a->Tq - i0 : AT_BQ;
                if (!at_forward_block(kn, &one, 0, 0, i0, n, false))
                    at_forward_block(kn, &one, 0, 0, i0, n, true);
            }
            if (dt[3] != VKA_F32)
                for (int t = 0; t < a->Tq; t++)
                    vkc_convert_serial((uint16_t *)(void *)a->out + at_off(a->so, b, h, t),
                                       dt[3], o + (size_t)t * HS, VKA_F32, (size_t)HS, cvt);
        }
    }
}

/* The backward's scratch of one head: q, dq, out, dout (Tq rows), k, dk, v, dv (Tk rows). */
size_t vkc_attention_backward16_scratch(const vkc_attention *a, int nt) {
    int heads = a->B * a->NH;
    size_t per = 4 * at16_floats(a->Tq, a->HS) + 4 * at16_floats(a->Tk, a->HS);
    return (size_t)(heads < nt ? heads : nt) * per;
}

/* An input and its gradient (which share strides s) of head (b, h) for the head alone: an f32
 * input's rows and the gradient's in place (strides from the head's start); a 16-bit input's
 * rows widened into x16, the gradient's computed in g16 (rows packed), at16_store'd after. */
static void at16_pair(const void *x, float *g, int dt, vkc_attn_strides s, int b, int h, int T,
                      int HS, unsigned cvt, float *x16, float *g16, const float **one_x,
                      float **one_g, vkc_attn_strides *one_s) {
    if (dt == VKA_F32) {
        *one_x = (const float *)x + at_off(s, b, h, 0);
        *one_g = g + at_off(s, b, h, 0);
        *one_s = (vkc_attn_strides){0, 0, s.st};
        return;
    }
    at16_widen(x16, x, dt, s, b, h, T, HS, cvt);
    *one_x = x16, *one_g = g16;
    *one_s = (vkc_attn_strides){0, 0, (size_t)HS};
}

/* Rows 0 .. T of HS from packed src to head (b, h) of view dst. */
static void at16_store(float *dst, vkc_attn_strides s, int b, int h, const float *src, int T,
                       int HS) {
    for (int t = 0; t < T; t++)
        memcpy(dst + at_off(s, b, h, t), src + (size_t)t * HS, (size_t)HS * sizeof *dst);
}

void vkc_attention_backward16(const vkc_attention *a, const int dt[4], float *scratch,
                              vkc_isa isa, unsigned cvt, int nt) {
    const at_kern *kn = at_kern_for(isa);
    int heads = a->B * a->NH, blocks = heads < nt ? heads : nt, HS = a->HS;
    size_t nq = at16_floats(a->Tq, HS), nk = at16_floats(a->Tk, HS), per = 4 * nq + 4 * nk;
    double work = (double)heads * a->Tq * a->Tk * HS;
    (void)work;
    VKA_OMP_FOR(nt, work > VKA_OMP_MIN_WORK)
    for (int bl = 0; bl < blocks; bl++) {
        float *q = scratch + (size_t)bl * per, *dq = q + nq, *o = dq + nq, *dout = o + nq;
        float *k = dout + nq, *dk = k + nk, *v = dk + nk, *dv = v + nk;
        for (int bh = (int)((long long)heads * bl / blocks);
             bh < (int)((long long)heads * (bl + 1) / blocks); bh++) {
            int b = bh / a->NH, h = bh % a->NH;
            vkc_attention one = at16_head(a, b, h);
            at16_pair(a->q, a->dq, dt[0], a->sq, b, h, a->Tq, HS, cvt, q, dq, &one.q, &one.dq,
                      &one.sq);
            at16_pair(a->k, a->dk, dt[1], a->sk, b, h, a->Tk, HS, cvt, k, dk, &one.k, &one.dk,
                      &one.sk);
            at16_pair(a->v, a->dv, dt[2], a->sv, b, h, a->Tk, HS, cvt, v, dv, &one.v, &one.dv,
                      &one.sv);
            /* out and dout share so: a 16-bit out widened and dout copied beside it */
            if (dt[3] == VKA_F32) {
                one.out = a->out + at_off(a->so, b, h, 0);
                one.dout = a->dout + at_off(a->so, b, h, 0);
                one.so = (vkc_attn_strides){0, 0, a->so.st};
            } else {
                at16_widen(o, a->out, dt[3], a->so, b, h, a->Tq, HS, cvt);
                at16_widen(dout, a->dout, VKA_F32, a->so, b, h, a->Tq, HS, cvt);
                one.out = o, one.dout = dout, one.so = (vkc_attn_strides){0, 0, (size_t)HS};
            }
            if (!at_backward_head(kn, &one, 0, 0, false)) at_backward_head(kn, &one, 0, 0, true);
            if (dt[0] != VKA_F32) at16_store(a->dq, a->sq, b, h, dq, a->Tq, HS);
            if (dt[1] != VKA_F32) at16_store(a->dk, a->sk, b, h, dk, a->Tk, HS);
            if (dt[2] != VKA_F32) at16_store(a->dv, a->sv, b, h, dv, a->Tk, HS);
        }
    }
}
