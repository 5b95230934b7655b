/* The fused attention's double-precision reference (tests/test_attention_fused.c,
 * tests/test_attention16_backward.c): a case's shapes and options, its mask, the forward and
 * backward in double over packed (B, NH, T, HS) tensors, and the (B, T, mul*C) layouts of a
 * packed qkv and of a (B, T, C) out. Public API only. */
#ifndef VKA_ATTENTION_REF_H
#define VKA_ATTENTION_REF_H

#include "op_util.h"

typedef struct att_case {
    int B, NH, Tq, Tk, HS;
    vka_causal causal;
    float scale;       /* 0 = 1/sqrt(HS) */
    int mask;          /* 0 none, 1 (Tq, Tk) broadcast, 2 (B, Tq, Tk) per batch */
    int mask_style;    /* 0 random with -inf sprinkled; 1 also a fully masked row and rows with
                        * keys 0..63 masked (a whole key tile) */
    const int *key_lens; /* (B) or NULL */
    bool qkv, out_btc;
} att_case;

static inline size_t att_nq(const att_case *s) { return (size_t)s->B * s->NH * s->Tq * s->HS; }
static inline size_t att_nk(const att_case *s) { return (size_t)s->B * s->NH * s->Tk * s->HS; }
static inline size_t att_nlse(const att_case *s) { return (size_t)s->B * s->NH * s->Tq; }
static inline size_t att_nmask(const att_case *s) {
    return (s->mask == 2 ? (size_t)s->B : 1) * s->Tq * s->Tk;
}
static inline double att_scale(const att_case *s) {
    return s->scale != 0.0f ? s->scale : 1.0f / sqrtf((float)s->HS);
}
/* Element (b, h, t, d) of a packed (B, NH, T, HS) tensor. */
static inline size_t pk(const att_case *s, int T, int b, int h, int t, int d) {
    return (((size_t)b * s->NH + h) * T + t) * s->HS + d;
}

static inline float *att_make_mask(const att_case *s, uint64_t seed) {
    if (!s->mask) return NULL;
    size_t n = att_nmask(s);
    float *m = malloc(n * sizeof *m);
    tu_random(m, n, seed, 1.0f);
    for (size_t i = 0; i < n; i++)
        if (m[i] > 0.6f) m[i] = -INFINITY;
    if (s->mask_style == 1) {
        int rows = (int)(n / (size_t)s->Tk);
        for (int r = 0; r < rows; r++) {
            int t = r % s->Tq;
            float *row = m + (size_t)r * s->Tk;
            if (t == 1 % s->Tq)
                for (int j = 0; j < s->Tk; j++) row[j] = -INFINITY;
            else if (t % 3 == 0)
                for (int j = 0; j < s->Tk && j < 64; j++) row[j] = -INFINITY;
        }
    }
    return m;
}

/* The last key query t may see with L valid keys (vka_causal). */
static inline int ref_last(const att_case *s, int L, int t) {
    if (s->key_lens && s->Tq == s->Tk && t >= L) return -1; /* a padding query */
    int last = L - 1;
    if (s->causal == VKA_CAUSAL_TOP_LEFT && t < last) last = t;
    if (s->causal == VKA_CAUSAL_BOTTOM_RIGHT && t + L - s->Tq < last) last = t + L - s->Tq;
    return last;
}

/* Scores of row (b, h, t) in double: sc (Tk), -inf where masked. */
static inline void ref_scores(const att_case *s, const double *q, const double *k,
                              const float *mask, int b, int h, int t, double *sc) {
    int L = s->key_lens ? s->key_lens[b] : s->Tk, last = ref_last(s, L, t);
    for (int j = 0; j < s->Tk; j++) {
        sc[j] = -INFINITY;
        if (j > last) continue;
        double dot = 0.0;
        for (int d = 0; d < s->HS; d++)
            dot += q[pk(s, s->Tq, b, h, t, d)] * k[pk(s, s->Tk, b, h, j, d)];
        double mv = 0.0;
        if (mask)
            mv = mask[(s->mask == 2 ? (size_t)b * s->Tq * s->Tk : 0) + (size_t)t * s->Tk + j];
        sc[j] = att_scale(s) * dot + mv;
    }
}

/* The double reference forward: x = q | k | v packed; y = out packed (n_q); lse (n_lse) if not
 * NULL. */
static inline void ref_forward(const att_case *s, const float *mask, const double *x,
                               double *out, double *lse) {
    const double *q = x, *k = x + att_nq(s), *v = k + att_nk(s);
    double *sc = malloc((size_t)s->Tk * sizeof *sc);
    for (int b = 0; b < s->B; b++)
        for (int h = 0; h < s->NH; h++)
            for (int t = 0; t < s->Tq; t++) {
                ref_scores(s, q, k, mask, b, h, t, sc);
                double m = -INFINITY, sum = 0.0;
                for (int j = 0; j < s->Tk; j++) m = sc[j] > m ? sc[j] : m;
                for (int d = 0; d < s->HS; d++) out[pk(s, s->Tq, b, h, t, d)] = 0.0;
                if (lse) lse[((size_t)b * s->NH + h) * s->Tq + t] = -INFINITY;
                if (m == -INFINITY) continue;
                for (int j = 0; j < s->Tk; j++) sum += sc[j] = exp(sc[j] - m);
                for (int j = 0; j < s->Tk; j++)
                    for (int d = 0; d < s->HS; d++)
                        out[pk(s, s->Tq, b, h, t, d)] += sc[j] / sum * v[pk(s, s->Tk, b, h, j, d)];
                if (lse) lse[((size_t)b * s->NH + h) * s->Tq + t] = m + log(sum);
            }
    free(sc);
}

/* The double reference backward: g = dq | dk | dv packed from dout (packed). delta, the row
 * term, is rowsum(dout * out) of the given out (packed; what the op reads, a 16-bit one's
 * rounding included), or without one rowsum(P * dP), the exact forward's. */
static inline void ref_backward(const att_case *s, const float *mask, const double *x,
                                const float *dout, const double *out, double *g) {
    const double *q = x, *k = x + att_nq(s), *v = k + att_nk(s);
    double *dq = g, *dk = g + att_nq(s), *dv = dk + att_nk(s);
    size_t n_in = att_nq(s) + 2 * att_nk(s);
    for (size_t i = 0; i < n_in; i++) g[i] = 0.0;
    double *sc = malloc((size_t)s->Tk * sizeof *sc), *dp = malloc((size_t)s->Tk * sizeof *dp);
    double sl = att_scale(s);
    for (int b = 0; b < s->B; b++)
        for (int h = 0; h < s->NH; h++)
            for (int t = 0; t < s->Tq; t++) {
                ref_scores(s, q, k, mask, b, h, t, sc);
                double m = -INFINITY, sum = 0.0, delta = 0.0;
                for (int j = 0; j < s->Tk; j++) m = sc[j] > m ? sc[j] : m;
                if (m == -INFINITY) continue;
                for (int j = 0; j < s->Tk; j++) sum += sc[j] = exp(sc[j] - m);
                for (int j = 0; j < s->Tk; j++) {
                    sc[j] /= sum;
                    dp[j] = 0.0;
                    for (int d = 0; d < s->HS; d++)
                        dp[j] += (double)dout[pk(s, s->Tq, b, h, t, d)] *
                                 v[pk(s, s->Tk, b, h, j, d)];
                    delta += sc[j] * dp[j];
                }
                if (out) {
                    delta = 0.0;
                    for (int d = 0; d < s->HS; d++) {
                        size_t i = pk(s, s->Tq, b, h, t, d);
                        delta += (double)dout[i] * out[i];
                    }
                }
                for (int j = 0; j < s->Tk; j++) {
                    double ds = sc[j] * (dp[j] - delta) * sl;
                    for (int d = 0; d < s->HS; d++) {
                        size_t iq = pk(s, s->Tq, b, h, t, d), ik = pk(s, s->Tk, b, h, j, d);
                        dq[iq] += ds * k[ik];
                        dk[ik] += ds * q[iq];
                        dv[ik] += sc[j] * dout[iq];
                    }
                }
            }
    free(sc);
    free(dp);
}

/* packed (B, NH, T, HS) <-> part `part` of (B, T, mul*C) */
static inline void to_wide(const att_case *s, int T, const float *packed, float *wide, int mul,
                           int part) {
    int C = s->NH * s->HS;
    for (int b = 0; b < s->B; b++)
        for (int h = 0; h < s->NH; h++)
            for (int t = 0; t < T; t++)
                for (int d = 0; d < s->HS; d++)
                    wide[((size_t)b * T + t) * mul * C + (size_t)part * C + h * s->HS + d] =
                        packed[pk(s, T, b, h, t, d)];
}
static inline void from_wide(const att_case *s, int T, const float *wide, float *packed,
                             int mul, int part) {
    int C = s->NH * s->HS;
    for (int b = 0; b < s->B; b++)
        for (int h = 0; h < s->NH; h++)
            for (int t = 0; t < T; t++)
                for (int d = 0; d < s->HS; d++)
                    packed[pk(s, T, b, h, t, d)] =
                        wide[((size_t)b * T + t) * mul * C + (size_t)part * C + h * s->HS + d];
}

#endif
