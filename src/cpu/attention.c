/* Fused scaled-dot-product attention (shaders/attention_forward.comp, attention_backward.comp),
 * FlashAttention-2 (Dao 2023): no Tq x Tk matrix is stored.
 *
 * Forward: a block of AT_BQ query rows walks the keys in tiles of AT_BK with an online softmax
 * (running max m starting at -inf, running sum l, output accumulator rescaled by exp(m_old -
 * m_new)); a row whose keys are all masked keeps m = -inf and ends with out = 0, lse = -inf.
 * Backward: per head, key tiles in order; for each, every query block recomputes
 * P = exp(s - lse), dP = dout v^T, dS = P * (dP - delta) with delta = rowsum(dout * out), and
 * adds P^T dout to dv, scale * dS^T q to dk, scale * dS k to dq. One thread owns a whole head,
 * so every gradient element is summed in the same order for any thread count (no atomics).
 *
 * The inner loops run over a tile of keys (scores, from k packed transposed) or over d (the
 * rows of v, dout, q, k are contiguous), so the compiler vectorises them without reassociating
 * a sum. Scratch lives on the stack (forward ~90 KiB, backward ~140 KiB at the largest HS),
 * nothing is allocated per run. */
#include "cpu/cpu_ops.h"

#include <math.h>
#include <string.h>

/* The loops over a key tile or over d are independent per element (no sums across them), so
 * "omp simd" vectorises them without changing any result (gcc -O2 alone leaves them scalar). */
#ifdef VKA_HAVE_OPENMP
#define AT_SIMD _Pragma("omp simd")
#define AT_SIMD_MAX(x) VKA_PRAGMA(omp simd reduction(max : x))
#else
#define AT_SIMD
#define AT_SIMD_MAX(x)
#endif

/* Fully unrolled 8-wide loops keep their accumulators in registers (as in matmul.c). */
#if defined(__clang__)
#define AT_UNROLL _Pragma("unroll")
#elif defined(__GNUC__)
#define AT_UNROLL _Pragma("GCC unroll 8")
#else
#define AT_UNROLL
#endif

enum {
    AT_DC = 8,  /* d per register accumulator chunk */
    AT_BQ = 16, /* query rows per block */
    AT_BK = 64, /* keys per tile */
};

/* exp(x) for x <= 88 (Cephes expf: x = n ln2 + r, a degree-7 polynomial in r, 2^n from the
 * exponent bits; within 1 ulp of exp for every float in [-87, 1], measured), 0 below -87 (and
 * for -inf: masked keys), written so that a loop of it vectorises. */
static inline float at_exp(float x) {
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

static inline size_t at_off(vkc_attn_strides s, int b, int h, int t) {
    return (size_t)b * s.sb + (size_t)h * s.sh + (size_t)t * s.st;
}

/* The last key query t may see with L valid keys (-1: none). */
static int at_last_key(const vkc_attention *a, int L, int t) {
    long last = L - 1;
    if (a->causal == 1 && t < last) last = t;
    if (a->causal == 2 && (long)t + L - a->Tq < last) last = (long)t + L - a->Tq;
    return last < -1 ? -1 : (int)last;
}

static int at_len(const vkc_attention *a, int b) { return a->key_lens ? a->key_lens[b] : a->Tk; }

/* y (HS) += sum_r c[r] * x[r] (HS) over r = 0 .. n in order, skipping c[r] = 0: in chunks of
 * AT_DC elements of y held in registers across the rows. */
static void at_axpy_rows(float *y, const float *c, const float *const *x, int n, int HS) {
    int d0 = 0;
    for (; d0 + 2 * AT_DC <= HS; d0 += 2 * AT_DC) { /* two groups: half the loop overhead */
        float a0[AT_DC], a1[AT_DC];
        memcpy(a0, y + d0, sizeof a0);
        memcpy(a1, y + d0 + AT_DC, sizeof a1);
        for (int r = 0; r < n; r++) {
            float cr = c[r];
            if (cr == 0.0f) continue;
            const float *xr = x[r] + d0;
            AT_UNROLL
            for (int e = 0; e < AT_DC; e++) {
                a0[e] += cr * xr[e];
                a1[e] += cr * xr[AT_DC + e];
            }
        }
        memcpy(y + d0, a0, sizeof a0);
        memcpy(y + d0 + AT_DC, a1, sizeof a1);
    }
    for (; d0 + AT_DC <= HS; d0 += AT_DC) {
        float acc[AT_DC];
        memcpy(acc, y + d0, sizeof acc);
        for (int r = 0; r < n; r++) {
            float cr = c[r];
            if (cr == 0.0f) continue;
            const float *xr = x[r] + d0;
            AT_UNROLL
            for (int e = 0; e < AT_DC; e++) acc[e] += cr * xr[e];
        }
        memcpy(y + d0, acc, sizeof acc);
    }
    if (d0 == HS) return;
    for (int r = 0; r < n; r++) {
        float cr = c[r];
        if (cr == 0.0f) continue;
        const float *xr = x[r];
        for (int d = d0; d < HS; d++) y[d] += cr * xr[d];
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

/* acc (AT_BK) = row . columns of kt (HS, AT_BK), summed over d in order. */
static void at_dots(float *acc, const float *row, const float *kt, int HS) {
    for (int j0 = 0; j0 < AT_BK; j0 += 4 * AT_DC) {
        /* 32 accumulators in registers: four 8-wide groups, the pattern of matmul.c's 4x8
         * kernel that gcc keeps in SIMD registers (an array of 32 stays in memory). */
        float c0[AT_DC] = {0}, c1[AT_DC] = {0}, c2[AT_DC] = {0}, c3[AT_DC] = {0};
        for (int d = 0; d < HS; d++) {
            float x = row[d];
            const float *kd = kt + (size_t)d * AT_BK + j0;
            AT_UNROLL
            for (int e = 0; e < AT_DC; e++) {
                c0[e] += x * kd[e];
                c1[e] += x * kd[AT_DC + e];
                c2[e] += x * kd[2 * AT_DC + e];
                c3[e] += x * kd[3 * AT_DC + e];
            }
        }
        memcpy(acc + j0, c0, sizeof c0);
        memcpy(acc + j0 + AT_DC, c1, sizeof c1);
        memcpy(acc + j0 + 2 * AT_DC, c2, sizeof c2);
        memcpy(acc + j0 + 3 * AT_DC, c3, sizeof c3);
    }
}

/* Scores of one query row against keys j0 .. j0+bk: scale * q.k + mask, -inf past last. */
static void at_scores(float *s, const float *q, const float *kt, const float *mrow, int j0,
                      int bk, int last, int HS, float scale) {
    float acc[AT_BK];
    at_dots(acc, q, kt, HS);
    int n = last - j0 + 1 < bk ? last - j0 + 1 : bk; /* keys up to last */
    if (mrow) {
        const float *mj = mrow + j0;
        AT_SIMD
        for (int jj = 0; jj < n; jj++) s[jj] = scale * acc[jj] + mj[jj];
    } else {
        AT_SIMD
        for (int jj = 0; jj < n; jj++) s[jj] = scale * acc[jj];
    }
    for (int jj = n < 0 ? 0 : n; jj < bk; jj++) s[jj] = -INFINITY;
}

static const float *at_mask_row(const vkc_attention *a, int b, int t) {
    if (!a->mask) return NULL;
    size_t batch = a->mask_per_batch ? (size_t)b * a->Tq * a->Tk : 0;
    return a->mask + batch + (size_t)t * a->Tk;
}

/* Forward of query rows i0 .. i0+nq of head (b, h). */
static void at_forward_block(const vkc_attention *a, int b, int h, int i0, int nq) {
    float kt[VKC_ATTN_MAX_HS * AT_BK];
    float o[AT_BQ][VKC_ATTN_MAX_HS];
    float s[AT_BQ][AT_BK];
    float m[AT_BQ], l[AT_BQ];
    int last[AT_BQ];
    const int HS = a->HS, L = at_len(a, b);
    int max_last = -1;
    for (int i = 0; i < nq; i++) {
        last[i] = at_last_key(a, L, i0 + i);
        if (last[i] > max_last) max_last = last[i];
        m[i] = -INFINITY;
        l[i] = 0.0f;
        for (int d = 0; d < HS; d++) o[i][d] = 0.0f;
    }
    for (int j0 = 0; j0 <= max_last; j0 += AT_BK) {
        int bk = max_last + 1 - j0 < AT_BK ? max_last + 1 - j0 : AT_BK;
        at_pack_t(kt, a->k, a->sk, b, h, j0, bk, HS);
        const float *vrows[AT_BK];
        for (int jj = 0; jj < bk; jj++) vrows[jj] = a->v + at_off(a->sv, b, h, j0 + jj);
        for (int i = 0; i < nq; i++) {
            if (last[i] < j0) continue;
            int t = i0 + i;
            at_scores(s[i], a->q + at_off(a->sq, b, h, t), kt, at_mask_row(a, b, t), j0, bk,
                      last[i], HS, a->scale);
            float mx = m[i], *si = s[i];
            AT_SIMD_MAX(mx)
            for (int jj = 0; jj < bk; jj++) mx = si[jj] > mx ? si[jj] : mx;
            if (mx == -INFINITY) continue; /* every key so far masked: nothing to add */
            float alpha = at_exp(m[i] - mx); /* 0 when m[i] = -inf (o and l are 0 then) */
            AT_SIMD
            for (int jj = 0; jj < bk; jj++) si[jj] = at_exp(si[jj] - mx); /* masked: 0 */
            float sum = 0.0f;
            for (int jj = 0; jj < bk; jj++) sum += si[jj];
            l[i] = l[i] * alpha + sum;
            m[i] = mx;
            float *oi = o[i];
            if (alpha != 1.0f) {
                AT_SIMD
                for (int d = 0; d < HS; d++) oi[d] *= alpha;
            }
            at_axpy_rows(oi, si, vrows, bk, HS);
        }
    }
    for (int i = 0; i < nq; i++) {
        int t = i0 + i;
        float *orow = a->out + at_off(a->so, b, h, t);
        float lse = -INFINITY;
        if (l[i] > 0.0f) {
            for (int d = 0; d < HS; d++) orow[d] = o[i][d] / l[i];
            lse = m[i] + logf(l[i]);
        } else {
            for (int d = 0; d < HS; d++) orow[d] = 0.0f;
        }
        if (a->lse) a->lse[((size_t)b * a->NH + h) * a->Tq + t] = lse;
    }
}

void vkc_attention_forward(const vkc_attention *a, int nt) {
    long blocks = (a->Tq + AT_BQ - 1) / AT_BQ, items = (long)a->B * a->NH * blocks;
    double work = (double)a->B * a->NH * a->Tq * a->Tk * a->HS;
    (void)work; /* unused without OpenMP */
    VKA_OMP_FOR_DYNAMIC(nt, work > VKA_OMP_MIN_WORK)
    for (long it = 0; it < items; it++) {
        int bh = (int)(it / blocks), i0 = (int)(it % blocks) * AT_BQ;
        int nq = a->Tq - i0 < AT_BQ ? a->Tq - i0 : AT_BQ;
        at_forward_block(a, bh / a->NH, bh % a->NH, i0, nq);
    }
}

/* Zero rows 0 .. T of HS of head (b, h) of view x. */
static void at_zero_rows(float *x, vkc_attn_strides s, int b, int h, int T, int HS) {
    for (int t = 0; t < T; t++) memset(x + at_off(s, b, h, t), 0, (size_t)HS * sizeof(float));
}

/* Backward of key tile j0 .. j0+bk of head (b, h) against query rows i0 .. i0+nq: adds to dv
 * and dk rows of the tile and to dq rows of the block. kt, vt: the tile's k and v transposed;
 * krows: its k rows. */
static void at_backward_block(const vkc_attention *a, int b, int h, int L, int j0, int bk,
                              const float *kt, const float *vt, const float *const *krows,
                              int i0, int nq) {
    float p[AT_BQ][AT_BK], ds[AT_BQ][AT_BK];
    const float *qr[AT_BQ], *dor[AT_BQ];
    const int HS = a->HS;
    const float scale = a->scale;
    bool any = false;
    for (int i = 0; i < nq; i++) {
        int t = i0 + i, last = at_last_key(a, L, t);
        float lse = a->lse[((size_t)b * a->NH + h) * a->Tq + t];
        qr[i] = a->q + at_off(a->sq, b, h, t);
        dor[i] = a->dout + at_off(a->so, b, h, t);
        if (last < j0 || lse == -INFINITY) {
            for (int jj = 0; jj < AT_BK; jj++) p[i][jj] = ds[i][jj] = 0.0f;
            continue;
        }
        any = true;
        const float *orow = a->out + at_off(a->so, b, h, t);
        double delta = 0.0; /* rowsum(dout * out) */
        for (int d = 0; d < HS; d++) delta += (double)dor[i][d] * orow[d];
        float dp[AT_BK];
        at_scores(p[i], qr[i], kt, at_mask_row(a, b, t), j0, bk, last, HS, scale);
        at_dots(dp, dor[i], vt, HS);
        float *pi = p[i], *dsi = ds[i], fdelta = (float)delta;
        for (int jj = bk; jj < AT_BK; jj++) pi[jj] = -INFINITY;
        AT_SIMD
        for (int jj = 0; jj < AT_BK; jj++) {
            float pj = at_exp(pi[jj] - lse); /* masked: 0 */
            pi[jj] = pj;
            dsi[jj] = scale * (pj * (dp[jj] - fdelta)); /* 0 where pj is */
        }
    }
    if (!any) return;
    /* dv_j += sum_i P[i][j] dout_i, dk_j += sum_i dS[i][j] q_i (scale in dS) */
    for (int jj = 0; jj < bk; jj++) {
        float pc[AT_BQ], dc[AT_BQ];
        for (int i = 0; i < nq; i++) {
            pc[i] = p[i][jj];
            dc[i] = ds[i][jj];
        }
        at_axpy_rows(a->dv + at_off(a->sv, b, h, j0 + jj), pc, dor, nq, HS);
        at_axpy_rows(a->dk + at_off(a->sk, b, h, j0 + jj), dc, qr, nq, HS);
    }
    /* dq_i += sum_j dS[i][j] k_j */
    for (int i = 0; i < nq; i++)
        at_axpy_rows(a->dq + at_off(a->sq, b, h, i0 + i), ds[i], krows, bk, HS);
}

static void at_backward_head(const vkc_attention *a, int b, int h) {
    float kt[VKC_ATTN_MAX_HS * AT_BK], vt[VKC_ATTN_MAX_HS * AT_BK];
    const int HS = a->HS, L = at_len(a, b);
    at_zero_rows(a->dq, a->sq, b, h, a->Tq, HS);
    at_zero_rows(a->dk, a->sk, b, h, a->Tk, HS);
    at_zero_rows(a->dv, a->sv, b, h, a->Tk, HS);
    for (int j0 = 0; j0 < L; j0 += AT_BK) {
        int bk = L - j0 < AT_BK ? L - j0 : AT_BK;
        at_pack_t(kt, a->k, a->sk, b, h, j0, bk, HS);
        at_pack_t(vt, a->v, a->sv, b, h, j0, bk, HS);
        const float *krows[AT_BK];
        for (int jj = 0; jj < bk; jj++) krows[jj] = a->k + at_off(a->sk, b, h, j0 + jj);
        for (int i0 = 0; i0 < a->Tq; i0 += AT_BQ) {
            int nq = a->Tq - i0 < AT_BQ ? a->Tq - i0 : AT_BQ;
            at_backward_block(a, b, h, L, j0, bk, kt, vt, krows, i0, nq);
        }
    }
}

void vkc_attention_backward(const vkc_attention *a, int nt) {
    int heads = a->B * a->NH;
    double work = (double)heads * a->Tq * a->Tk * a->HS;
    (void)work;
    VKA_OMP_FOR_DYNAMIC(nt, work > VKA_OMP_MIN_WORK)
    for (int bh = 0; bh < heads; bh++) at_backward_head(a, bh / a->NH, bh % a->NH);
}
