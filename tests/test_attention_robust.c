/* vka_attention_forward / vka_attention_backward on the inputs real batches bring:
 *  - padding: NaN, +Inf and 1e38 in every row no query may see (keys past key_lens, queries
 *    past key_lens with Tq == Tk, keys an additive mask hides with -inf) change nothing: every
 *    other element is bitwise that of a run with zeros there, and the padding rows of out, lse,
 *    dq, dk, dv are 0, -inf, 0, 0, 0 (the class of pytorch/pytorch#101967);
 *  - rows every key masks with one large finite value (-FLT_MAX, -1e30, -1e9, -1e4): the forward
 *    and the backward against a double reference of the scores float32 computes (the class of
 *    pytorch/pytorch#110213: lse = m + log(l) in float loses log(l)).
 * On the CPU backend (fast AVX-512 and AVX2 kernels and the reference ones) and on Vulkan (both
 * kernel variants; the texel builds by default, the storage loads in the _storage re-run).
 */
#define _POSIX_C_SOURCE 200809L
#include "op_util.h"

#include <float.h>

typedef struct rb_case {
    int B, NH, Tq, Tk, HS;
    vka_causal causal;
    float scale;         /* 0 = 1/sqrt(HS) */
    const int *key_lens; /* (B) or NULL */
    bool per_batch;      /* mask (B, Tq, Tk) rather than (Tq, Tk) */
} rb_case;

typedef struct rb_io {
    float *q, *k, *v, *dout, *mask; /* q, dout (B, NH, Tq, HS); k, v (B, NH, Tk, HS) */
} rb_io;

typedef struct rb_out {
    float *out, *lse, *dq, *dk, *dv;
} rb_out;

static size_t rb_nq(const rb_case *c) { return (size_t)c->B * c->NH * c->Tq * c->HS; }
static size_t rb_nk(const rb_case *c) { return (size_t)c->B * c->NH * c->Tk * c->HS; }
static size_t rb_nl(const rb_case *c) { return (size_t)c->B * c->NH * c->Tq; }
static size_t rb_nm(const rb_case *c) { return (c->per_batch ? (size_t)c->B : 1) * c->Tq * c->Tk; }
static int rb_len(const rb_case *c, int b) { return c->key_lens ? c->key_lens[b] : c->Tk; }
static size_t rb_row(const rb_case *c, int T, int b, int h, int t) {
    return (((size_t)b * c->NH + h) * T + t) * c->HS;
}
static const float *rb_mrow(const rb_case *c, const float *mask, int b, int t) {
    return mask ? mask + (c->per_batch ? (size_t)b * c->Tq * c->Tk : 0) + (size_t)t * c->Tk
                : NULL;
}
static float rb_scale(const rb_case *c) {
    return c->scale != 0.0f ? c->scale : 1.0f / sqrtf((float)c->HS);
}

/* Queries [0, qend) are real (the header's rule: with key_lens and Tq == Tk, t >= L is padding). */
static int rb_qend(const rb_case *c, int b) {
    return c->key_lens && c->Tq == c->Tk ? rb_len(c, b) : c->Tq;
}
/* The last key query t of batch b sees (-1: none). */
static int rb_last(const rb_case *c, int b, int t) {
    int L = rb_len(c, b);
    if (t >= rb_qend(c, b)) return -1;
    int last = L - 1;
    if (c->causal == VKA_CAUSAL_TOP_LEFT && t < last) last = t;
    if (c->causal == VKA_CAUSAL_BOTTOM_RIGHT && t + L - c->Tq < last) last = t + L - c->Tq;
    return last < -1 ? -1 : last;
}

static rb_out rb_run(vka_context *ctx, const rb_case *c, const rb_io *io) {
    size_t nq = rb_nq(c), nk = rb_nk(c), nl = rb_nl(c);
    vka_tensor *q = tu_tensor(ctx, nq, io->q), *k = tu_tensor(ctx, nk, io->k);
    vka_tensor *v = tu_tensor(ctx, nk, io->v), *dout = tu_tensor(ctx, nq, io->dout);
    vka_tensor *mask = io->mask ? tu_tensor(ctx, rb_nm(c), io->mask) : NULL;
    vka_tensor *kl = c->key_lens ? tu_tensor(ctx, (size_t)c->B, c->key_lens) : NULL;
    vka_tensor *out = tu_tensor_nan(ctx, nq), *lse = tu_tensor_nan(ctx, nl);
    vka_tensor *dq = tu_tensor_nan(ctx, nq), *dk = tu_tensor_nan(ctx, nk);
    vka_tensor *dv = tu_tensor_nan(ctx, nk);
    vka_attention_desc d = {.q = q, .k = k, .v = v, .mask = mask, .mask_per_batch = c->per_batch,
                            .key_lens = kl, .B = c->B, .NH = c->NH, .Tq = c->Tq, .Tk = c->Tk,
                            .HS = c->HS, .scale = c->scale, .causal = c->causal, .out = out,
                            .lse = lse};
    vka_attention_grads g = {.dout = dout, .dq = dq, .dk = dk, .dv = dv};
    tu_begin(ctx);
    assert_int_equal(vka_attention_forward(ctx, &d), VKA_SUCCESS);
    assert_int_equal(vka_attention_backward(ctx, &d, &g), VKA_SUCCESS);
    tu_run(ctx);
    rb_out r = {tu_read(out, nq), tu_read(lse, nl), tu_read(dq, nq), tu_read(dk, nk),
                tu_read(dv, nk)};
    vka_tensor *all[] = {q, k, v, dout, mask, kl, out, lse, dq, dk, dv};
    for (size_t i = 0; i < TU_LEN(all); i++) vka_tensor_destroy(all[i]);
    return r;
}

static void rb_out_free(rb_out *r) {
    free(r->out);
    free(r->lse);
    free(r->dq);
    free(r->dk);
    free(r->dv);
}

static void rb_io_free(rb_io *io) {
    free(io->q);
    free(io->k);
    free(io->v);
    free(io->dout);
    free(io->mask);
}

/* --- padding is never read ------------------------------------------------------------------ */

/* Key j of batch b is hidden from every query: past key_lens, or a column the mask hides. */
static bool rb_key_hidden(const rb_case *c, const float *mask, int b, int j) {
    if (j >= rb_len(c, b)) return true;
    if (!mask) return false;
    for (int t = 0; t < c->Tq; t++)
        if (rb_mrow(c, mask, b, t)[j] != -INFINITY) return false;
    return true;
}

/* Fill every padding row of io with x: keys hidden from all queries (k, v), padding queries
 * (q, dout). */
static void rb_poison(const rb_case *c, rb_io *io, float x) {
    for (int b = 0; b < c->B; b++)
        for (int h = 0; h < c->NH; h++) {
            for (int j = 0; j < c->Tk; j++)
                if (rb_key_hidden(c, io->mask, b, j))
                    for (int d = 0; d < c->HS; d++) {
                        io->k[rb_row(c, c->Tk, b, h, j) + d] = x;
                        io->v[rb_row(c, c->Tk, b, h, j) + d] = x;
                    }
            for (int t = rb_qend(c, b); t < c->Tq; t++)
                for (int d = 0; d < c->HS; d++) {
                    io->q[rb_row(c, c->Tq, b, h, t) + d] = x;
                    io->dout[rb_row(c, c->Tq, b, h, t) + d] = x;
                }
        }
}

static void rb_same_bits(const char *what, const char *name, const float *got, const float *want,
                         size_t n) {
    for (size_t i = 0; i < n; i++)
        if (memcmp(&got[i], &want[i], sizeof(float)) != 0)
            fail_msg("%s: %s[%zu] = %.9g with garbage in the padding, %.9g with zeros", what,
                     name, i, got[i], want[i]);
}

/* One case: a random mask (finite, some -inf, and with `hide` the columns j % 5 == 3 hidden
 * from every query) and the padding filled with zeros, then NaN, +Inf, 1e38. */
static void rb_padding_case(vka_context *ctx, const rb_case *c, int mask_kind, uint64_t seed) {
    size_t nq = rb_nq(c), nk = rb_nk(c), nl = rb_nl(c), nm = rb_nm(c);
    rb_io io = {malloc(nq * sizeof(float)), malloc(nk * sizeof(float)), malloc(nk * sizeof(float)),
                malloc(nq * sizeof(float)), NULL};
    tu_random(io.q, nq, seed, 1.5f);
    tu_random(io.k, nk, seed + 1, 1.5f);
    tu_random(io.v, nk, seed + 2, 1.0f);
    tu_random(io.dout, nq, seed + 3, 1.0f);
    if (mask_kind) {
        io.mask = malloc(nm * sizeof(float));
        tu_random(io.mask, nm, seed + 4, 1.0f);
        for (size_t i = 0; i < nm; i++) {
            int j = (int)(i % (size_t)c->Tk);
            if (io.mask[i] > 0.7f || j % 5 == 3) io.mask[i] = -INFINITY;
        }
    }
    char what[200];
    snprintf(what, sizeof what, "B=%d NH=%d Tq=%d Tk=%d HS=%d causal=%d mask=%d%s%s", c->B, c->NH,
             c->Tq, c->Tk, c->HS, (int)c->causal, mask_kind, c->per_batch ? "/batch" : "",
             c->key_lens ? " key_lens" : "");
    print_message("%s\n", what);
    rb_poison(c, &io, 0.0f);
    rb_out zero = rb_run(ctx, c, &io);
    const float garbage[] = {NAN, INFINITY, 1e38f};
    for (size_t g = 0; g < TU_LEN(garbage); g++) {
        rb_poison(c, &io, garbage[g]);
        rb_out got = rb_run(ctx, c, &io);
        char w[240];
        snprintf(w, sizeof w, "%s, padding = %g", what, garbage[g]);
        rb_same_bits(w, "out", got.out, zero.out, nq);
        rb_same_bits(w, "lse", got.lse, zero.lse, nl);
        rb_same_bits(w, "dq", got.dq, zero.dq, nq);
        rb_same_bits(w, "dk", got.dk, zero.dk, nk);
        rb_same_bits(w, "dv", got.dv, zero.dv, nk);
        rb_out_free(&got);
    }
    /* the rows the header promises: padding queries out 0, lse -inf, dq 0; hidden keys dk, dv 0 */
    for (int b = 0; b < c->B; b++)
        for (int h = 0; h < c->NH; h++) {
            for (int t = rb_qend(c, b); t < c->Tq; t++) {
                if (zero.lse[((size_t)b * c->NH + h) * c->Tq + t] != -INFINITY)
                    fail_msg("%s: padding query b=%d t=%d: lse %g, expected -inf", what, b, t,
                             zero.lse[((size_t)b * c->NH + h) * c->Tq + t]);
                for (int d = 0; d < c->HS; d++) {
                    size_t i = rb_row(c, c->Tq, b, h, t) + d;
                    if (zero.out[i] != 0.0f || zero.dq[i] != 0.0f)
                        fail_msg("%s: padding query b=%d t=%d: out %g dq %g, expected 0", what, b,
                                 t, zero.out[i], zero.dq[i]);
                }
            }
            for (int j = 0; j < c->Tk; j++)
                if (rb_key_hidden(c, io.mask, b, j))
                    for (int d = 0; d < c->HS; d++) {
                        size_t i = rb_row(c, c->Tk, b, h, j) + d;
                        if (zero.dk[i] != 0.0f || zero.dv[i] != 0.0f)
                            fail_msg("%s: hidden key b=%d j=%d: dk %g dv %g, expected 0", what, b,
                                     j, zero.dk[i], zero.dv[i]);
                    }
        }
    tu_assert_finite("out", zero.out, nq);
    tu_assert_finite("dq", zero.dq, nq);
    tu_assert_finite("dk", zero.dk, nk);
    tu_assert_finite("dv", zero.dv, nk);
    rb_out_free(&zero);
    rb_io_free(&io);
}

static const int lens_self[3] = {70, 33, 0};
static const int lens_short[2] = {4, 1};
static const int lens_cross[2] = {5, 70};

/* heads: -1 every case, 0 those with HS <= 8, 1 those with HS > 8 (on Vulkan each head size
 * builds the kernels anew, seconds each on lavapipe: the quick group runs the narrow heads, the
 * exhaustive group the wide ones; the CPU backend runs all in the quick group). */
static bool rb_heads(const rb_case *c, int heads) { return heads < 0 || (c->HS > 8) == heads; }

static void padding_cases_of(vka_context *ctx, int heads) {
    const rb_case cases[] = {
        /* self-attention over padded sequences: Tq == Tk, queries past key_lens are padding */
        {.B = 3, .NH = 2, .Tq = 70, .Tk = 70, .HS = 8, .key_lens = lens_self},
        {.B = 3, .NH = 2, .Tq = 70, .Tk = 70, .HS = 8, .key_lens = lens_self,
         .causal = VKA_CAUSAL_TOP_LEFT},
        {.B = 3, .NH = 1, .Tq = 70, .Tk = 70, .HS = 5, .key_lens = lens_self,
         .causal = VKA_CAUSAL_BOTTOM_RIGHT, .per_batch = true},
        {.B = 2, .NH = 1, .Tq = 6, .Tk = 6, .HS = 1, .key_lens = lens_short,
         .causal = VKA_CAUSAL_TOP_LEFT},
        /* cross-attention and decoding: only keys are padding */
        {.B = 2, .NH = 2, .Tq = 3, .Tk = 70, .HS = 16, .key_lens = lens_cross,
         .causal = VKA_CAUSAL_BOTTOM_RIGHT},
        {.B = 2, .NH = 1, .Tq = 1, .Tk = 70, .HS = 4, .key_lens = lens_cross, .per_batch = true},
    };
    for (size_t i = 0; i < TU_LEN(cases); i++)
        for (int mask_kind = 0; mask_kind < 2 && rb_heads(&cases[i], heads); mask_kind++)
            rb_padding_case(ctx, &cases[i], mask_kind, 40 + 10 * i);
}
static void padding_cases(vka_context *ctx) { padding_cases_of(ctx, -1); }
static void padding_narrow_cases(vka_context *ctx) { padding_cases_of(ctx, 0); }
static void padding_wide_cases(vka_context *ctx) { padding_cases_of(ctx, 1); }

/* --- rows every key masks with a large finite value ---------------------------------------- */

/* Masks: row t of batch b: fully masked by `big` when (b + t) % 3 == 0, half its keys (j odd)
 * when % 3 == 1, none otherwise; a sprinkle of -inf elsewhere. */
static float *rb_big_mask(const rb_case *c, float big) {
    size_t nm = rb_nm(c);
    float *m = calloc(nm, sizeof *m);
    int nb = c->per_batch ? c->B : 1;
    for (int b = 0; b < nb; b++)
        for (int t = 0; t < c->Tq; t++) {
            float *row = m + ((size_t)b * c->Tq + t) * c->Tk;
            for (int j = 0; j < c->Tk; j++) {
                int kind = (b + t) % 3;
                row[j] = kind == 0 || (kind == 1 && j % 2) ? big : 0.0f;
                if (kind == 2 && j % 7 == 5) row[j] = -INFINITY;
            }
        }
    return m;
}

/* Dyadic q, k: multiples of 1/2 in [-1, 1], so q.k and scale * q.k (scale 1/4) are exact in
 * float whatever the order of the sum, and the float32 scores are one rounding of q.k + mask. */
static void rb_dyadic(float *x, size_t n, uint64_t seed) {
    tu_random(x, n, seed, 1.0f);
    for (size_t i = 0; i < n; i++) x[i] = roundf(2.0f * x[i]) / 2.0f;
}

/* The double reference of the scores float32 computes: s = fl32(fl32(scale q.k) + mask), then
 * softmax, out, lse and the gradients in double. */
static void rb_reference(const rb_case *c, const rb_io *io, double *out, double *lse, double *dq,
                         double *dk, double *dv) {
    const int HS = c->HS;
    const float scale = rb_scale(c);
    memset(dq, 0, rb_nq(c) * sizeof *dq);
    memset(dk, 0, rb_nk(c) * sizeof *dk);
    memset(dv, 0, rb_nk(c) * sizeof *dv);
    double *p = malloc((size_t)c->Tk * sizeof *p), *dp = malloc((size_t)c->Tk * sizeof *dp);
    for (int b = 0; b < c->B; b++)
        for (int h = 0; h < c->NH; h++)
            for (int t = 0; t < c->Tq; t++) {
                size_t qr = rb_row(c, c->Tq, b, h, t), li = ((size_t)b * c->NH + h) * c->Tq + t;
                const float *mrow = rb_mrow(c, io->mask, b, t);
                int last = rb_last(c, b, t);
                double m = -INFINITY;
                for (int j = 0; j < c->Tk; j++) {
                    p[j] = -INFINITY;
                    if (j > last || mrow[j] == -INFINITY) continue;
                    float dot = 0.0f; /* exact: dyadic */
                    for (int d = 0; d < HS; d++)
                        dot += io->q[qr + d] * io->k[rb_row(c, c->Tk, b, h, j) + d];
                    float s = scale * dot;
                    s = s + mrow[j];
                    p[j] = s;
                    if (p[j] > m) m = p[j];
                }
                for (int d = 0; d < HS; d++) out[qr + d] = 0.0;
                lse[li] = -INFINITY;
                if (m == -INFINITY) continue;
                double l = 0.0, delta = 0.0;
                for (int j = 0; j < c->Tk; j++) l += p[j] = exp(p[j] - m);
                lse[li] = m + log(l);
                for (int j = 0; j < c->Tk; j++) {
                    p[j] /= l;
                    size_t kr = rb_row(c, c->Tk, b, h, j);
                    dp[j] = 0.0;
                    for (int d = 0; d < HS; d++) {
                        out[qr + d] += p[j] * io->v[kr + d];
                        dp[j] += (double)io->dout[qr + d] * io->v[kr + d];
                    }
                    delta += p[j] * dp[j];
                }
                for (int j = 0; j < c->Tk; j++) {
                    size_t kr = rb_row(c, c->Tk, b, h, j);
                    double ds = p[j] * (dp[j] - delta) * scale;
                    for (int d = 0; d < HS; d++) {
                        dq[qr + d] += ds * io->k[kr + d];
                        dk[kr + d] += ds * io->q[qr + d];
                        dv[kr + d] += p[j] * io->dout[qr + d];
                    }
                }
            }
    free(p);
    free(dp);
}

static void rb_big_case(vka_context *ctx, const rb_case *c, float big, uint64_t seed) {
    size_t nq = rb_nq(c), nk = rb_nk(c), nl = rb_nl(c);
    rb_io io = {malloc(nq * sizeof(float)), malloc(nk * sizeof(float)), malloc(nk * sizeof(float)),
                malloc(nq * sizeof(float)), rb_big_mask(c, big)};
    rb_dyadic(io.q, nq, seed);
    rb_dyadic(io.k, nk, seed + 1);
    tu_random(io.v, nk, seed + 2, 1.0f);
    tu_random(io.dout, nq, seed + 3, 1.0f);
    double *out = malloc(nq * sizeof *out), *lse = malloc(nl * sizeof *lse);
    double *dq = malloc(nq * sizeof *dq), *dk = malloc(nk * sizeof *dk);
    double *dv = malloc(nk * sizeof *dv);
    rb_reference(c, &io, out, lse, dq, dk, dv);
    rb_out got = rb_run(ctx, c, &io);
    char what[200];
    snprintf(what, sizeof what, "mask %g: B=%d NH=%d Tq=%d Tk=%d HS=%d causal=%d%s%s", big, c->B,
             c->NH, c->Tq, c->Tk, c->HS, (int)c->causal, c->per_batch ? " per batch" : "",
             c->key_lens ? " key_lens" : "");
    print_message("%s\n", what);
    /* float32 unit roundoff u times the longest sum (Tk keys or HS products) and a margin for
     * exp/log: the old backward, Tk times too large on the masked rows, is far outside */
    const double u = 0x1p-24, n = (double)(c->Tk > c->HS ? c->Tk : c->HS);
    const double tol = 32.0 * n * u;
    char w[240];
    snprintf(w, sizeof w, "%s out", what);
    tu_assert_close_d(w, got.out, out, nq, tol, tol);
    for (size_t i = 0; i < nl; i++) {
        bool ok = lse[i] == -INFINITY ? got.lse[i] == -INFINITY
                                      : fabs(got.lse[i] - lse[i]) <= 4.0 * u * fabs(lse[i]) + tol;
        if (!ok) fail_msg("%s lse[%zu] = %.9g, expected %.9g", what, i, got.lse[i], lse[i]);
    }
    snprintf(w, sizeof w, "%s dq", what);
    tu_assert_close_d(w, got.dq, dq, nq, tol, tol);
    snprintf(w, sizeof w, "%s dk", what);
    tu_assert_close_d(w, got.dk, dk, nk, tol, tol);
    snprintf(w, sizeof w, "%s dv", what);
    tu_assert_close_d(w, got.dv, dv, nk, tol, tol);
    rb_out_free(&got);
    rb_io_free(&io);
    free(out);
    free(lse);
    free(dq);
    free(dk);
    free(dv);
}

static const int lens_big[2] = {70, 37};

static void big_mask_cases_of(vka_context *ctx, int heads) {
    const rb_case cases[] = {
        {.B = 2, .NH = 1, .Tq = 1, .Tk = 6, .HS = 16, .scale = 0.25f},
        {.B = 1, .NH = 2, .Tq = 6, .Tk = 6, .HS = 5, .scale = 0.25f,
         .causal = VKA_CAUSAL_TOP_LEFT},
        {.B = 2, .NH = 1, .Tq = 70, .Tk = 70, .HS = 16, .scale = 0.25f, .per_batch = true,
         .causal = VKA_CAUSAL_TOP_LEFT},
        {.B = 2, .NH = 2, .Tq = 5, .Tk = 70, .HS = 8, .scale = 0.25f, .key_lens = lens_big,
         .causal = VKA_CAUSAL_BOTTOM_RIGHT, .per_batch = true},
        {.B = 2, .NH = 1, .Tq = 70, .Tk = 70, .HS = 1, .scale = 0.25f},
    };
    const float bigs[] = {-FLT_MAX, -1e30f, -1e9f, -1e4f};
    for (size_t i = 0; i < TU_LEN(cases); i++)
        for (size_t k = 0; k < TU_LEN(bigs) && rb_heads(&cases[i], heads); k++)
            rb_big_case(ctx, &cases[i], bigs[k], 80 + i);
}
static void big_mask_cases(vka_context *ctx) { big_mask_cases_of(ctx, -1); }
static void big_mask_narrow_cases(vka_context *ctx) { big_mask_cases_of(ctx, 0); }
static void big_mask_wide_cases(vka_context *ctx) { big_mask_cases_of(ctx, 1); }

/* --- cmocka --------------------------------------------------------------------------------- */

/* Every CPU kernel set: the fast ones of the widest ISA, the AVX2 ones, the reference. */
static void on_cpu_kernels(void (*cases)(vka_context *)) {
    const vka_cpu_kernels kinds[] = {VKA_CPU_KERNELS_FAST, VKA_CPU_KERNELS_FAST_AVX2,
                                     VKA_CPU_KERNELS_REFERENCE};
    for (size_t i = 0; i < TU_LEN(kinds); i++) {
        vka_context *ctx = tu_cpu_kernels(kinds[i], 2);
        print_message("CPU kernels: %s\n", vka_context_cpu_kernels(ctx));
        cases(ctx);
        tu_done(ctx);
    }
}

static void test_attention_padding_is_never_read(void **state) {
    (void)state;
    on_cpu_kernels(padding_cases);
}
static void test_attention_large_finite_mask_row_exact(void **state) {
    (void)state;
    on_cpu_kernels(big_mask_cases);
}
TU_VULKAN_TESTS(test_attention_vulkan_padding_is_never_read, padding_narrow_cases)
TU_VULKAN_TESTS(test_attention_vulkan_large_finite_mask_row_exact, big_mask_narrow_cases)
TU_VULKAN_TESTS(test_attention_vulkan_padding_is_never_read_wide_heads, padding_wide_cases)
TU_VULKAN_TESTS(test_attention_vulkan_large_finite_mask_row_exact_wide_heads, big_mask_wide_cases)

int main(int argc, char **argv) {
    const struct CMUnitTest quick[] = {
        cmocka_unit_test(test_attention_padding_is_never_read),
        cmocka_unit_test(test_attention_large_finite_mask_row_exact),
        TU_VULKAN_TEST_ENTRIES(test_attention_vulkan_padding_is_never_read),
        TU_VULKAN_TEST_ENTRIES(test_attention_vulkan_large_finite_mask_row_exact),
    };
    /* The cases with HS 16 on Vulkan (each kernel variant). */
    const struct CMUnitTest exhaustive[] = {
        TU_VULKAN_TEST_ENTRIES(test_attention_vulkan_padding_is_never_read_wide_heads),
        TU_VULKAN_TEST_ENTRIES(test_attention_vulkan_large_finite_mask_row_exact_wide_heads),
    };
    TU_RETURN_GROUPS(argc, argv, quick, exhaustive, NULL, NULL);
}
