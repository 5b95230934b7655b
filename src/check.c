/*
 * vka_check: every op, forward and backward, and one training step of a small model, on the
 * caller's context and on the CPU reference with the same random data; each reported with its
 * max differences. Written on the public API only, like the tests.
 */
#include "vka_internal.h"
#include "model/rng.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAX_T 16 /* tensors per case */

/* One op case: tensors with their initial contents, which of them to compare, the op. */
typedef struct ck_case {
    const char *op;
    char shape[96];
    int n_tensors;
    size_t n[MAX_T];       /* elements */
    float *data[MAX_T];    /* initial contents; NULL = NaN (an output the op must fill) */
    bool compare[MAX_T];
    uint8_t dtype[MAX_T];  /* vka_dtype of each tensor (0 = f32): 16-bit tensors get their data
                            * rounded by vka_convert (NaN where NULL); compared ones are read
                            * back widened to float32 and compared with tol16 */
    double tol;            /* max |diff| allowed, relative to max(1, max |reference|) */
    double tol16;          /* the same for the compared 16-bit tensors */
    /* Pairs of compared tensors that must be equal bit for bit on each context (a 16-bit op's
     * output and vka_copy of the float32 op's, the 16-bit rule above vka_tensor). */
    int n_same;
    int8_t same[4][2];
    vka_result (*record)(vka_context *ctx, vka_tensor **t, const struct ck_case *c);
    int d[8];              /* shape arguments of the op */
    float f;               /* a scalar argument (scale, alpha, dloss, max_norm, ...) */
} ck_case;

typedef struct ck_state {
    vka_context *gpu, *cpu;
    uint64_t rng;
    vka_check_fn fn;
    void *user;
    int failed;
    vka_result err; /* first hard error (not a mismatch) */
} ck_state;

/* Uniform in [-1, 1). */
static float ck_uniform(uint64_t *s) { return 2.0f * vkm_rng_uniform(s) - 1.0f; }

/* r from a call on the CPU reference context: on failure its message goes to the context
 * vka_check reports through (vka_last_error of the caller's context). */
static vka_result ck_on_cpu(ck_state *st, vka_result r, const char *what) {
    if (r != VKA_SUCCESS)
        vka_set_error(st->gpu, r, "check %s on the CPU: %s", what, vka_last_error(st->cpu));
    return r;
}

/* Add a tensor; data ownership passes to the case. Returns its index. */
static int ck_add(ck_case *c, size_t n, float *data, bool compare) {
    int k = c->n_tensors++;
    c->n[k] = n;
    c->data[k] = data;
    c->compare[k] = compare;
    return k;
}
static float *ck_rand(ck_state *st, size_t n, float scale) {
    float *x = vka_malloc(st->gpu, (n ? n : 1) * sizeof *x);
    for (size_t i = 0; x && i < n; i++) x[i] = scale * ck_uniform(&st->rng);
    return x;
}
static int ck_in(ck_state *st, ck_case *c, size_t n, float scale) {
    return ck_add(c, n, ck_rand(st, n, scale), false);
}
static int ck_out(ck_case *c, size_t n) { return ck_add(c, n, NULL, true); }
/* An output the op accumulates into: starts random, compared. */
static int ck_acc(ck_state *st, ck_case *c, size_t n) { return ck_add(c, n, ck_rand(st, n, 1.0f), true); }
static int ck_ids(ck_state *st, ck_case *c, size_t n, int V) {
    float *x = vka_malloc(st->gpu, (n ? n : 1) * sizeof *x);
    for (size_t i = 0; x && i < n; i++) {
        int32_t v = (int32_t)vkm_rng_below(&st->rng, (uint64_t)V);
        memcpy(&x[i], &v, 4);
    }
    return ck_add(c, n, x, false);
}

/* Run the case on ctx; the compared tensors are read back into out[k] (malloc'd). */
static vka_result ck_execute(vka_context *ctx, const ck_case *c, float **out) {
    vka_tensor *t[MAX_T] = {0};
    vka_graph *g = NULL;
    vka_result r = VKA_SUCCESS;
    for (int k = 0; k < c->n_tensors && r == VKA_SUCCESS; k++) {
        if (c->dtype[k]) {
            vka_tensor_desc td = {.n = c->n[k], .dtype = (vka_dtype)c->dtype[k]};
            uint16_t *h = vka_malloc(ctx, c->n[k] * sizeof *h);
            r = h ? vka_tensor_create_desc(ctx, &td, &t[k])
                  : vka_set_error(ctx, VKA_ERROR_OUT_OF_HOST_MEMORY, "check: out of host memory");
            if (r == VKA_SUCCESS && c->data[k])
                r = vka_convert((vka_dtype)c->dtype[k], h, VKA_F32, c->data[k], c->n[k]);
            for (size_t i = 0; r == VKA_SUCCESS && !c->data[k] && i < c->n[k]; i++)
                h[i] = c->dtype[k] == VKA_BF16 ? 0x7FC0u : 0x7E00u; /* a quiet NaN */
            if (r == VKA_SUCCESS) r = vka_tensor_write(t[k], 0, h, c->n[k]);
            vka_free(ctx, h);
            continue;
        }
        r = vka_tensor_create(ctx, c->n[k], &t[k]);
        if (r != VKA_SUCCESS) break;
        const float *init = c->data[k];
        float *nan_fill = NULL;
        if (!init) {
            nan_fill = vka_malloc(ctx, c->n[k] * sizeof(float));
            if (!nan_fill) {
                r = vka_set_error(ctx, VKA_ERROR_OUT_OF_HOST_MEMORY, "check: out of host memory");
                break;
            }
            for (size_t i = 0; i < c->n[k]; i++) nan_fill[i] = NAN;
            init = nan_fill;
        }
        r = vka_tensor_write(t[k], 0, init, c->n[k]);
        vka_free(ctx, nan_fill);
    }
    if (r == VKA_SUCCESS) r = vka_graph_begin(ctx);
    if (r == VKA_SUCCESS) {
        vka_result rec = c->record(ctx, t, c);
        r = vka_graph_end(ctx, &g);
        if (r == VKA_SUCCESS) r = rec;
    }
    if (r == VKA_SUCCESS) r = vka_graph_run(g);
    for (int k = 0; k < c->n_tensors && r == VKA_SUCCESS; k++) {
        if (!c->compare[k]) continue;
        out[k] = vka_malloc(ctx, c->n[k] * sizeof(float));
        uint16_t *h = c->dtype[k] ? vka_malloc(ctx, c->n[k] * sizeof *h) : NULL;
        if (!out[k] || (c->dtype[k] && !h))
            r = vka_set_error(ctx, VKA_ERROR_OUT_OF_HOST_MEMORY, "check: out of host memory");
        else if (h && (r = vka_tensor_read(t[k], 0, h, c->n[k])) == VKA_SUCCESS)
            r = vka_convert(VKA_F32, out[k], (vka_dtype)c->dtype[k], h, c->n[k]);
        else if (!h)
            r = vka_tensor_read(t[k], 0, out[k], c->n[k]);
        vka_free(ctx, h);
    }
    vka_graph_destroy(g);
    for (int k = 0; k < c->n_tensors; k++) vka_tensor_destroy(t[k]);
    return r;
}

/* Fold the comparison of got with the reference want into row. NaN anywhere fails. */
static void ck_compare(const float *got, const float *want, size_t n, double tol,
                       vka_check_row *row) {
    double max_ref = 0, max_abs = 0, max_rel = 0;
    bool nan = false;
    for (size_t i = 0; i < n; i++) max_ref = fmax(max_ref, fabs(want[i]));
    double abs_tol = tol * fmax(1.0, max_ref);
    for (size_t i = 0; i < n; i++) {
        if (isnan(got[i]) || isnan(want[i])) {
            nan = true;
            continue;
        }
        double d = fabs((double)got[i] - want[i]);
        max_abs = fmax(max_abs, d);
        if (fabs(want[i]) > abs_tol) max_rel = fmax(max_rel, d / fabs(want[i]));
    }
    row->max_abs = nan ? INFINITY : fmax(row->max_abs, max_abs);
    row->max_rel = fmax(row->max_rel, max_rel);
    row->tol = fmax(row->tol, abs_tol);
    row->pass = row->pass && !nan && max_abs <= abs_tol;
}

static void ck_report(ck_state *st, const vka_check_row *row) {
    if (!row->pass) st->failed++;
    if (st->fn) st->fn(st->user, row);
}

static void ck_run(ck_state *st, ck_case *c) {
    float *got[MAX_T] = {0}, *want[MAX_T] = {0};
    vka_check_row row = {.op = c->op, .shape = c->shape, .pass = true};
    vka_result r = VKA_SUCCESS;
    for (int k = 0; k < c->n_tensors && r == VKA_SUCCESS; k++)
        if (c->n[k] && !c->data[k] && !c->compare[k] && !c->dtype[k])
            r = vka_set_error(st->gpu, VKA_ERROR_OUT_OF_HOST_MEMORY, "check %s (%s): out of host "
                              "memory", c->op, c->shape);
    if (r == VKA_SUCCESS) r = ck_on_cpu(st, ck_execute(st->cpu, c, want), c->op);
    if (r == VKA_SUCCESS) r = ck_execute(st->gpu, c, got);
    if (r != VKA_SUCCESS) {
        if (st->err == VKA_SUCCESS) st->err = r;
        row.pass = false;
        row.max_abs = INFINITY;
    } else {
        for (int k = 0; k < c->n_tensors; k++)
            if (c->compare[k])
                ck_compare(got[k], want[k], c->n[k], c->dtype[k] ? c->tol16 : c->tol, &row);
        for (int i = 0; i < c->n_same; i++) { /* tolerance 0: bit for bit, on both contexts */
            int a = c->same[i][0], b = c->same[i][1];
            ck_compare(got[a], got[b], c->n[a], 0.0, &row);
            ck_compare(want[a], want[b], c->n[a], 0.0, &row);
        }
    }
    ck_report(st, &row);
    for (int k = 0; k < MAX_T; k++) {
        vka_free(st->gpu, got[k]);
        vka_free(st->gpu, want[k]);
        vka_free(st->gpu, c->data[k]);
    }
}

/* The 16-bit cases' helpers. */
static const char *ck_name16(const char *op, vka_dtype dtype, char *buf, size_t size) {
    snprintf(buf, size, "%s %s", op, vka_dtype_string(dtype));
    return buf;
}
/* One unit in the last place of dtype, relative: 2^-7 (bf16's 8-bit significand), 2^-10. */
static double ck_ulp16(vka_dtype dtype) { return dtype == VKA_BF16 ? 0x1p-7 : 0x1p-10; }
static int ck_in16(ck_state *st, ck_case *c, size_t n, float scale, vka_dtype dtype) {
    int k = ck_in(st, c, n, scale);
    c->dtype[k] = (uint8_t)dtype;
    return k;
}
static int ck_out16(ck_case *c, size_t n, vka_dtype dtype) {
    int k = ck_out(c, n);
    c->dtype[k] = (uint8_t)dtype;
    return k;
}
/* A float32 tensor the record writes before it reads it (random data, not compared). */
static int ck_scratch(ck_state *st, ck_case *c, size_t n) { return ck_in(st, c, n, 1.0f); }
/* A compared copy of tensor k's initial data (an accumulated output's twin). */
static int ck_dup(ck_state *st, ck_case *c, int k) {
    float *x = vka_malloc(st->gpu, (c->n[k] ? c->n[k] : 1) * sizeof *x);
    if (x && c->data[k]) memcpy(x, c->data[k], c->n[k] * sizeof *x);
    int j = ck_add(c, c->n[k], x, true);
    c->dtype[j] = c->dtype[k];
    return j;
}
static void ck_same(ck_case *c, int a, int b) {
    c->same[c->n_same][0] = (int8_t)a;
    c->same[c->n_same][1] = (int8_t)b;
    c->n_same++;
}

/* --- op cases ------------------------------------------------------------------------------- */

static vka_result rec_matmul(vka_context *ctx, vka_tensor **t, const ck_case *c) {
    vka_matmul_desc d = {.out = t[0], .a = t[1], .b = t[2], .bias = c->n_tensors > 3 ? t[3] : NULL,
                         .M = c->d[0], .N = c->d[1], .K = c->d[2], .batch = c->d[5],
                         .trans_a = c->d[3], .trans_b = c->d[4], .alpha = c->f,
                         .accumulate = c->d[6]};
    return vka_matmul(ctx, &d);
}

static void case_matmul(ck_state *st, int M, int N, int K, int batch, bool ta, bool tb, bool bias,
                        bool acc) {
    ck_case c = {.op = "matmul", .record = rec_matmul, .f = acc ? 0.5f : 1.0f,
                 .d = {M, N, K, ta, tb, batch, acc}};
    snprintf(c.shape, sizeof c.shape, "M=%d N=%d K=%d batch=%d%s%s%s%s", M, N, K, batch,
             ta ? " trans_a" : "", tb ? " trans_b" : "", bias ? " bias" : "", acc ? " accumulate" : "");
    size_t mn = (size_t)batch * M * N;
    if (acc) ck_acc(st, &c, mn); else ck_out(&c, mn);
    ck_in(st, &c, (size_t)batch * M * K, 1.0f);
    ck_in(st, &c, (size_t)batch * K * N, 1.0f);
    if (bias) ck_in(st, &c, (size_t)N, 1.0f);
    c.tol = 1e-6 * (K + 8);
    ck_run(st, &c);
}

/* The matmul of 16-bit a and b (their data rounded to dtype), out float32: the same products
 * of the same 16-bit values on both sides, float32 sums. */
static void case_matmul16(ck_state *st, vka_dtype dtype, int M, int N, int K, bool ta, bool tb,
                          bool bias) {
    ck_case c = {.op = dtype == VKA_BF16 ? "matmul bf16" : "matmul f16", .record = rec_matmul,
                 .f = 1.0f, .d = {M, N, K, ta, tb, 1, 0}};
    snprintf(c.shape, sizeof c.shape, "M=%d N=%d K=%d%s%s%s", M, N, K, ta ? " trans_a" : "",
             tb ? " trans_b" : "", bias ? " bias" : "");
    ck_out(&c, (size_t)M * N);
    c.dtype[ck_in(st, &c, (size_t)M * K, 1.0f)] = (uint8_t)dtype;
    c.dtype[ck_in(st, &c, (size_t)K * N, 1.0f)] = (uint8_t)dtype;
    if (bias) ck_in(st, &c, (size_t)N, 1.0f);
    c.tol = 1e-6 * (K + 8);
    ck_run(st, &c);
}

/* vka_copy float32 -> dtype -> float32 (the device's convert op): exact against the CPU's, on
 * values of every magnitude (fp16's overflow to Inf and subnormals, bf16's flush included). */
static vka_result rec_convert(vka_context *ctx, vka_tensor **t, const ck_case *c) {
    vka_result r = vka_copy(ctx, t[2], t[1], (size_t)c->d[0]);
    return r == VKA_SUCCESS ? vka_copy(ctx, t[0], t[2], (size_t)c->d[0]) : r;
}

static void case_convert(ck_state *st, vka_dtype dtype, int n) {
    ck_case c = {.op = dtype == VKA_BF16 ? "convert bf16" : "convert f16", .record = rec_convert,
                 .d = {n}};
    snprintf(c.shape, sizeof c.shape, "N=%d f32 -> %s -> f32", n, vka_dtype_string(dtype));
    ck_out(&c, (size_t)n);
    int in = ck_in(st, &c, (size_t)n, 1.0f);
    for (int i = 0; c.data[in] && i < n; i++) /* magnitudes from 2^-30 to 2^15 */
        c.data[in][i] = ldexpf(c.data[in][i], (i % 46) - 30);
    c.dtype[ck_add(&c, (size_t)n, NULL, false)] = (uint8_t)dtype;
    c.tol = 0.0; /* bit for bit: max |diff| must be 0 */
    ck_run(st, &c);
}

static vka_result rec_softmax_fwd(vka_context *ctx, vka_tensor **t, const ck_case *c) {
    vka_softmax_desc d = {.out = t[0], .inp = t[1], .mask = c->n_tensors > 2 ? t[2] : NULL,
                          .R = c->d[0], .Tq = c->d[1], .Tk = c->d[2], .mask_rows = c->d[3],
                          .scale = c->f, .causal = c->d[4]};
    return vka_softmax_forward(ctx, &d);
}

static void case_softmax_forward(ck_state *st, int R, int Tq, int Tk, bool causal, int mask_rows) {
    ck_case c = {.op = "softmax_forward", .record = rec_softmax_fwd, .tol = 1e-5, .f = 0.35f,
                 .d = {R, Tq, Tk, mask_rows, causal}};
    snprintf(c.shape, sizeof c.shape, "R=%d Tq=%d Tk=%d%s%s", R, Tq, Tk, causal ? " causal" : "",
             mask_rows ? " mask" : "");
    ck_out(&c, (size_t)R * Tk);
    ck_in(st, &c, (size_t)R * Tk, 4.0f);
    if (mask_rows) { /* padding mask: the last keys of every other mask row are -inf */
        int m = ck_in(st, &c, (size_t)(R / mask_rows) * Tk, 0.5f);
        for (int r = 0; r < R / mask_rows; r += 2)
            for (int k = Tk - Tk / 3; k < Tk; k++) c.data[m][(size_t)r * Tk + k] = -INFINITY;
    }
    ck_run(st, &c);
}

static vka_result rec_softmax_bwd(vka_context *ctx, vka_tensor **t, const ck_case *c) {
    /* t: dinp, dout, inp, probs */
    vka_softmax_desc d = {.out = t[3], .inp = t[2], .R = c->d[0], .Tq = c->d[1], .Tk = c->d[2],
                          .scale = c->f, .causal = true};
    vka_result r = vka_softmax_forward(ctx, &d);
    if (r != VKA_SUCCESS) return r;
    return vka_softmax_backward(ctx, t[0], t[1], t[3], c->d[0], c->d[2], c->f);
}

static void case_softmax_backward(ck_state *st, int R, int Tq, int Tk) {
    ck_case c = {.op = "softmax_backward", .record = rec_softmax_bwd, .tol = 1e-5, .f = 0.35f,
                 .d = {R, Tq, Tk}};
    snprintf(c.shape, sizeof c.shape, "R=%d Tq=%d Tk=%d causal", R, Tq, Tk);
    ck_acc(st, &c, (size_t)R * Tk);
    ck_in(st, &c, (size_t)R * Tk, 1.0f);
    ck_in(st, &c, (size_t)R * Tk, 4.0f);
    ck_out(&c, (size_t)R * Tk);
    ck_run(st, &c);
}

static vka_result rec_layernorm(vka_context *ctx, vka_tensor **t, const ck_case *c) {
    /* t: out mean rstd inp weight bias [dinp dweight dbias dout] */
    int N = c->d[0], C = c->d[1];
    vka_result r = vka_layernorm_forward(ctx, t[0], t[1], t[2], t[3], t[4], t[5], N, C);
    if (r != VKA_SUCCESS || c->n_tensors < 10) return r;
    return vka_layernorm_backward(ctx, t[6], t[7], t[8], t[9], t[3], t[4], t[1], t[2], N, C);
}

static void case_layernorm(ck_state *st, int N, int C, bool backward) {
    ck_case c = {.op = backward ? "layernorm_backward" : "layernorm_forward",
                 .record = rec_layernorm, .tol = 1e-5, .d = {N, C}};
    snprintf(c.shape, sizeof c.shape, "N=%d C=%d", N, C);
    ck_out(&c, (size_t)N * C);
    ck_out(&c, (size_t)N);
    ck_out(&c, (size_t)N);
    int inp = ck_in(st, &c, (size_t)N * C, 3.0f);
    for (size_t i = 0; i < (size_t)N * C; i++) c.data[inp][i] += 10.0f; /* an offset mean */
    ck_in(st, &c, (size_t)C, 1.0f);
    ck_in(st, &c, (size_t)C, 1.0f);
    if (backward) {
        ck_acc(st, &c, (size_t)N * C);
        ck_acc(st, &c, (size_t)C);
        ck_acc(st, &c, (size_t)C);
        ck_in(st, &c, (size_t)N * C, 1.0f);
        c.tol = 1e-6 * (N + 8);
    }
    ck_run(st, &c);
}

static vka_result rec_gelu(vka_context *ctx, vka_tensor **t, const ck_case *c) {
    vka_result r = vka_gelu_forward(ctx, t[0], t[1], (size_t)c->d[0]);
    if (r != VKA_SUCCESS) return r;
    return vka_gelu_backward(ctx, t[2], t[1], t[3], (size_t)c->d[0]);
}

static void case_gelu(ck_state *st, int N) {
    ck_case c = {.op = "gelu_forward_backward", .record = rec_gelu, .tol = 1e-5, .d = {N}};
    snprintf(c.shape, sizeof c.shape, "N=%d", N);
    ck_out(&c, (size_t)N);
    ck_in(st, &c, (size_t)N, 8.0f);
    ck_acc(st, &c, (size_t)N);
    ck_in(st, &c, (size_t)N, 1.0f);
    ck_run(st, &c);
}

static vka_result rec_residual(vka_context *ctx, vka_tensor **t, const ck_case *c) {
    vka_result r = vka_residual_forward(ctx, t[0], t[1], t[2], (size_t)c->d[0]);
    if (r != VKA_SUCCESS) return r;
    return vka_add_inplace(ctx, t[3], t[1], (size_t)c->d[0]);
}

static void case_residual(ck_state *st, int N) {
    ck_case c = {.op = "residual_add", .record = rec_residual, .tol = 1e-6, .d = {N}};
    snprintf(c.shape, sizeof c.shape, "N=%d", N);
    ck_out(&c, (size_t)N);
    ck_in(st, &c, (size_t)N, 1.0f);
    ck_in(st, &c, (size_t)N, 1.0f);
    ck_acc(st, &c, (size_t)N);
    ck_run(st, &c);
}

static vka_result rec_kv_write(vka_context *ctx, vka_tensor **t, const ck_case *c) {
    /* t: kcache vcache qkv pos */
    return vka_kv_write(ctx, t[0], t[1], t[2], t[3], c->d[0], c->d[1], c->d[2], c->d[3]);
}

/* T rows of qkv, the first n of them stored from position p0 into caches of max_T rows; the
 * caches start random, so rows the op must leave alone are compared too. */
static void case_kv_write(ck_state *st, int T, int NH, int HS, int max_T, int p0, int n) {
    ck_case c = {.op = "kv_write", .record = rec_kv_write, .tol = 0.0, .d = {T, NH, HS, max_T}};
    snprintf(c.shape, sizeof c.shape, "T=%d NH=%d HS=%d max_T=%d pos=%d n=%d", T, NH, HS, max_T,
             p0, n);
    size_t cache = (size_t)NH * max_T * HS;
    ck_acc(st, &c, cache);
    ck_acc(st, &c, cache);
    ck_in(st, &c, (size_t)T * 3 * NH * HS, 1.0f);
    float *pos = vka_malloc(st->gpu, 2 * sizeof *pos);
    if (pos) {
        int32_t p[2] = {p0, n};
        memcpy(pos, p, sizeof p);
    }
    ck_add(&c, 2, pos, false);
    ck_run(st, &c);
}

static vka_result rec_permute(vka_context *ctx, vka_tensor **t, const ck_case *c) {
    /* t: q k v qkv dqkv out(B,T,C) dq */
    int B = c->d[0], T = c->d[1], NH = c->d[2], HS = c->d[3];
    vka_result r = vka_permute_forward(ctx, t[0], t[1], t[2], t[3], B, T, NH, HS);
    if (r == VKA_SUCCESS) r = vka_permute_backward(ctx, t[4], t[0], t[1], t[2], B, T, NH, HS);
    if (r == VKA_SUCCESS) r = vka_unpermute_forward(ctx, t[5], t[0], B, T, NH, HS);
    if (r == VKA_SUCCESS) r = vka_unpermute_backward(ctx, t[6], t[5], B, T, NH, HS);
    return r;
}

static void case_permute(ck_state *st, int B, int T, int NH, int HS) {
    ck_case c = {.op = "permute_unpermute", .record = rec_permute, .tol = 1e-6, .d = {B, T, NH, HS}};
    snprintf(c.shape, sizeof c.shape, "B=%d T=%d NH=%d HS=%d", B, T, NH, HS);
    size_t n = (size_t)B * T * NH * HS;
    ck_out(&c, n);
    ck_out(&c, n);
    ck_out(&c, n);
    ck_in(st, &c, 3 * n, 1.0f);
    ck_acc(st, &c, 3 * n);
    ck_out(&c, n);
    ck_acc(st, &c, n);
    ck_run(st, &c);
}

static vka_result rec_encoder(vka_context *ctx, vka_tensor **t, const ck_case *c) {
    /* t: out tokens wte wpe dwte dwpe buckets */
    int B = c->d[0], T = c->d[1], C = c->d[2];
    vka_result r = vka_encoder_forward(ctx, t[0], t[1], t[2], t[3], B, T, C);
    if (r != VKA_SUCCESS) return r;
    return vka_encoder_backward(ctx, t[4], t[5], t[0], t[1], t[6], B, T, C);
}

static void case_encoder(ck_state *st, int B, int T, int C, int V) {
    ck_case c = {.op = "encoder_forward_backward", .record = rec_encoder, .tol = 1e-5,
                 .d = {B, T, C}};
    snprintf(c.shape, sizeof c.shape, "B=%d T=%d C=%d V=%d", B, T, C, V);
    int BT = B * T;
    ck_out(&c, (size_t)BT * C);
    int tok = ck_ids(st, &c, (size_t)BT, V);
    ck_in(st, &c, (size_t)V * C, 1.0f);
    ck_in(st, &c, (size_t)T * C, 1.0f);
    ck_acc(st, &c, (size_t)V * C);
    ck_acc(st, &c, (size_t)T * C);
    float *buckets = vka_malloc(st->gpu, VKA_BUCKETS_SIZE(BT) * sizeof(float));
    if (buckets && c.data[tok]) vka_encoder_buckets((const int32_t *)(void *)c.data[tok], BT, (int32_t *)(void *)buckets);
    ck_add(&c, VKA_BUCKETS_SIZE(BT), buckets, false);
    ck_run(st, &c);
}

static vka_result rec_crossentropy(vka_context *ctx, vka_tensor **t, const ck_case *c) {
    /* t: losses logits targets dlogits */
    int N = c->d[0], V = c->d[1], Vp = c->d[2];
    vka_result r = vka_crossentropy_forward(ctx, t[0], t[1], t[2], N, V, Vp);
    if (r == VKA_SUCCESS) r = vka_crossentropy_backward(ctx, t[3], t[1], t[2], c->f, N, V, Vp);
    return r;
}

static void case_crossentropy(ck_state *st, int N, int V, int Vp) {
    ck_case c = {.op = "crossentropy_forward_backward", .record = rec_crossentropy, .tol = 1e-5,
                 .d = {N, V, Vp}, .f = 1.0f / (float)N};
    snprintf(c.shape, sizeof c.shape, "N=%d V=%d Vp=%d", N, V, Vp);
    ck_out(&c, (size_t)N);
    ck_in(st, &c, (size_t)N * Vp, 5.0f);
    ck_ids(st, &c, (size_t)N, V);
    ck_out(&c, (size_t)N * Vp);
    ck_run(st, &c);
}

static vka_result rec_reduce(vka_context *ctx, vka_tensor **t, const ck_case *c) {
    /* t: mean_out inp norm_out partials g1 g2 dbias dout */
    int N = c->d[0], OC = c->d[1];
    vka_result r = vka_mean(ctx, t[0], t[1], (size_t)N * OC);
    const vka_tensor *grads[3] = {t[1], t[4], t[5]};
    if (r == VKA_SUCCESS) r = vka_grad_norm(ctx, t[2], t[3], grads, 3, c->f);
    if (r == VKA_SUCCESS) r = vka_bias_backward(ctx, t[6], t[7], N, OC);
    return r;
}

static void case_reduce(ck_state *st, int N, int OC, float max_norm) {
    ck_case c = {.op = "mean_gradnorm_bias", .record = rec_reduce, .tol = 1e-5, .d = {N, OC},
                 .f = max_norm};
    snprintf(c.shape, sizeof c.shape, "N=%d OC=%d max_norm=%g", N, OC, max_norm);
    ck_out(&c, 1);
    ck_in(st, &c, (size_t)N * OC, 1.0f);
    ck_out(&c, 2);
    ck_add(&c, 3 * VKA_NORM_PARTIALS, vka_calloc(st->gpu, 3 * VKA_NORM_PARTIALS, sizeof(float)), false);
    ck_in(st, &c, 1, 1.0f);
    ck_in(st, &c, 777, 1.0f);
    ck_acc(st, &c, (size_t)OC);
    ck_in(st, &c, (size_t)N * OC, 1.0f);
    ck_run(st, &c);
}

static vka_result rec_adamw(vka_context *ctx, vka_tensor **t, const ck_case *c) {
    return vka_adamw(ctx, t[0], t[1], t[2], t[3], t[4], t[5], (size_t)c->d[0], c->f);
}

static void case_adamw(ck_state *st, int N) {
    ck_case c = {.op = "adamw", .record = rec_adamw, .tol = 1e-6, .d = {N}, .f = 0.1f};
    snprintf(c.shape, sizeof c.shape, "N=%d wd=0.1 t=3", N);
    ck_acc(st, &c, (size_t)N);
    ck_in(st, &c, (size_t)N, 1.0f);
    ck_acc(st, &c, (size_t)N);
    int v = ck_acc(st, &c, (size_t)N);
    for (int i = 0; c.data[v] && i < N; i++) c.data[v][i] = c.data[v][i] * c.data[v][i]; /* v >= 0 */
    float *hyper = vka_calloc(st->gpu, VKA_HYPER_COUNT, sizeof *hyper);
    if (hyper) {
        hyper[VKA_HYPER_LR] = 1e-3f;
        hyper[VKA_HYPER_BETA1] = 0.9f;
        hyper[VKA_HYPER_BETA2] = 0.99f;
        hyper[VKA_HYPER_EPS] = 1e-8f;
        hyper[VKA_HYPER_BC1] = (float)(1.0 - pow(0.9, 3));
        hyper[VKA_HYPER_BC2] = (float)(1.0 - pow(0.99, 3));
    }
    ck_add(&c, VKA_HYPER_COUNT, hyper, false);
    float *gscale = vka_calloc(st->gpu, 2, sizeof *gscale);
    if (gscale) gscale[1] = 0.75f;
    ck_add(&c, 2, gscale, false);
    ck_run(st, &c);
}

/* Attention flags in d[6]. */
enum { CK_QKV = 1, CK_BTC = 2, CK_MASK = 4, CK_MASK_PER_BATCH = 8, CK_KEY_LENS = 16,
       CK_BACKWARD = 32 };

static vka_result rec_attention(vka_context *ctx, vka_tensor **t, const ck_case *c) {
    /* t: out lse, qkv | q k v, [mask], [key_lens], [dout, dqkv | dq dk dv] */
    int fl = c->d[6], k = 2;
    vka_attention_desc d = {.out = t[0], .lse = t[1], .B = c->d[0], .NH = c->d[1],
                            .Tq = c->d[2], .Tk = c->d[3], .HS = c->d[4],
                            .causal = (vka_causal)c->d[5], .out_btc = fl & CK_BTC,
                            .mask_per_batch = fl & CK_MASK_PER_BATCH, .scale = c->f};
    if (fl & CK_QKV) {
        d.qkv = t[k++];
    } else {
        d.q = t[k++];
        d.k = t[k++];
        d.v = t[k++];
    }
    if (fl & CK_MASK) d.mask = t[k++];
    if (fl & CK_KEY_LENS) d.key_lens = t[k++];
    vka_result r = vka_attention_forward(ctx, &d);
    if (r != VKA_SUCCESS || !(fl & CK_BACKWARD)) return r;
    vka_attention_grads g = {.dout = t[k++]};
    if (fl & CK_QKV) {
        g.dqkv = t[k++];
    } else {
        g.dq = t[k++];
        g.dk = t[k++];
        g.dv = t[k++];
    }
    return vka_attention_backward(ctx, &d, &g);
}

/* Fused attention; masks keep key 0 of every row (no row fully masked, so lse stays finite
 * for the comparison), key lengths are 1 .. Tk. */
/* dtype (not VKA_F32): q, k, v (or qkv) and out in 16 bits, the others float32; the 16-bit
 * rule gives the forward's out within one unit in the last place of the CPU's, and the
 * backward (which reads that 16-bit out as it is) the same allowance on top of its own. */
static void case_attention(ck_state *st, int B, int NH, int Tq, int Tk, int HS, vka_causal causal,
                           int flags, vka_dtype dtype) {
    bool bwd = flags & CK_BACKWARD;
    char name[64];
    const char *op = bwd ? "attention_backward" : "attention_forward";
    ck_case c = {.op = dtype ? ck_name16(op, dtype, name, sizeof name) : op,
                 .record = rec_attention, .tol = bwd ? 1e-4 : 1e-5,
                 .d = {B, NH, Tq, Tk, HS, causal, flags}};
    c.tol16 = c.tol + (dtype ? ck_ulp16(dtype) : 0.0);
    if (bwd && dtype) c.tol = c.tol16;
    static const char *const causal_name[] = {"", " causal", " causal_bottom_right"};
    snprintf(c.shape, sizeof c.shape, "B=%d NH=%d Tq=%d Tk=%d HS=%d%s%s%s%s%s%s%s", B, NH, Tq, Tk,
             HS, causal_name[causal], flags & CK_QKV ? " qkv" : "", flags & CK_BTC ? " out_btc" : "",
             flags & CK_MASK ? (flags & CK_MASK_PER_BATCH ? " mask/batch" : " mask") : "",
             flags & CK_KEY_LENS ? " key_lens" : "", dtype ? " 16-bit: inputs, out " : "",
             dtype ? vka_dtype_string(dtype) : "");
    size_t nq = (size_t)B * NH * Tq * HS, nk = (size_t)B * NH * Tk * HS;
    c.dtype[ck_out(&c, nq)] = (uint8_t)dtype;
    ck_out(&c, (size_t)B * NH * Tq);
    if (flags & CK_QKV) {
        c.dtype[ck_in(st, &c, 3 * nq, 1.5f)] = (uint8_t)dtype;
    } else {
        c.dtype[ck_in(st, &c, nq, 1.5f)] = (uint8_t)dtype;
        c.dtype[ck_in(st, &c, nk, 1.5f)] = (uint8_t)dtype;
        c.dtype[ck_in(st, &c, nk, 1.5f)] = (uint8_t)dtype;
    }
    if (flags & CK_MASK) {
        int rows = (flags & CK_MASK_PER_BATCH ? B : 1) * Tq;
        int m = ck_in(st, &c, (size_t)rows * Tk, 0.5f);
        for (int r = 0; c.data[m] && r < rows; r += 2)
            for (int j = Tk - Tk / 3; j < Tk; j++)
                if (j > 0) c.data[m][(size_t)r * Tk + j] = -INFINITY;
    }
    if (flags & CK_KEY_LENS) {
        float *lens = vka_malloc(st->gpu, (size_t)B * sizeof *lens);
        for (int b = 0; lens && b < B; b++) {
            int32_t L = 1 + (int32_t)vkm_rng_below(&st->rng, (uint64_t)Tk);
            memcpy(&lens[b], &L, 4);
        }
        ck_add(&c, (size_t)B, lens, false);
    }
    if (bwd) {
        ck_in(st, &c, nq, 1.0f);
        if (flags & CK_QKV) {
            ck_out(&c, 3 * nq);
        } else {
            ck_out(&c, nq);
            ck_out(&c, nk);
            ck_out(&c, nk);
        }
    }
    ck_run(st, &c);
}

/* --- 16-bit ops ------------------------------------------------------------------------------
 * Each 16-bit case runs the op with its 16-bit tensors (data rounded to dtype) and, on the same
 * context, the float32 op on vka_copy's widening of them, whose output vka_copy rounds to dtype:
 * the 16-bit output must equal that rounding bit for bit on each context (the 16-bit rule above
 * vka_tensor in vkattn.h), and both agree with the CPU reference's within tol (float32) and
 * tol16 (16-bit outputs: the float32 tolerance plus one unit in the last place of dtype, as a
 * float32 difference far inside tol may round the other way). */

static vka_result rec_layernorm16(vka_context *ctx, vka_tensor **t, const ck_case *c) {
    /* t: out16 mean rstd inp16 weight bias | inp32 out32 r16 mean32 rstd32 */
    int N = c->d[0], C = c->d[1];
    size_t n = (size_t)N * C;
    vka_result r = vka_copy(ctx, t[6], t[3], n);
    if (r == VKA_SUCCESS) r = vka_layernorm_forward(ctx, t[7], t[9], t[10], t[6], t[4], t[5], N, C);
    if (r == VKA_SUCCESS) r = vka_layernorm_forward(ctx, t[0], t[1], t[2], t[3], t[4], t[5], N, C);
    if (r == VKA_SUCCESS) r = vka_copy(ctx, t[8], t[7], n);
    return r;
}

static void case_layernorm16(ck_state *st, vka_dtype dtype, int N, int C) {
    char name[64];
    ck_case c = {.op = ck_name16("layernorm_forward", dtype, name, sizeof name),
                 .record = rec_layernorm16, .tol = 1e-5, .d = {N, C}};
    c.tol16 = c.tol + ck_ulp16(dtype);
    snprintf(c.shape, sizeof c.shape, "N=%d C=%d out, inp %s", N, C, vka_dtype_string(dtype));
    size_t n = (size_t)N * C;
    int out = ck_out16(&c, n, dtype), mean = ck_out(&c, (size_t)N), rstd = ck_out(&c, (size_t)N);
    int inp = ck_in16(st, &c, n, 3.0f, dtype);
    for (size_t i = 0; c.data[inp] && i < n; i++) c.data[inp][i] += 10.0f; /* an offset mean */
    ck_in(st, &c, (size_t)C, 1.0f);
    ck_in(st, &c, (size_t)C, 1.0f);
    ck_scratch(st, &c, n);
    ck_out(&c, n);
    int r16 = ck_out16(&c, n, dtype), mean32 = ck_out(&c, (size_t)N), rstd32 = ck_out(&c, (size_t)N);
    ck_same(&c, out, r16);
    ck_same(&c, mean, mean32);
    ck_same(&c, rstd, rstd32);
    ck_run(st, &c);
}

static vka_result rec_layernorm_bw16(vka_context *ctx, vka_tensor **t, const ck_case *c) {
    /* t: dinp dweight dbias dout16 inp16 weight16 mean rstd | dout32 inp32 weight32 dinp32
     * dweight32 dbias32 (mean and rstd: the forward's, on the widened inp) */
    int N = c->d[0], C = c->d[1];
    size_t n = (size_t)N * C;
    vka_result r = vka_copy(ctx, t[8], t[3], n);
    if (r == VKA_SUCCESS) r = vka_copy(ctx, t[9], t[4], n);
    if (r == VKA_SUCCESS) r = vka_copy(ctx, t[10], t[5], (size_t)C);
    if (r == VKA_SUCCESS)
        r = vka_layernorm_backward(ctx, t[11], t[12], t[13], t[8], t[9], t[10], t[6], t[7], N, C);
    if (r == VKA_SUCCESS)
        r = vka_layernorm_backward(ctx, t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7], N, C);
    return r;
}

/* The layernorm backward of 16-bit dout, inp and weight; gradients float32 (accumulated). */
static void case_layernorm_bw16(ck_state *st, vka_dtype dtype, int N, int C) {
    char name[64];
    ck_case c = {.op = ck_name16("layernorm_backward", dtype, name, sizeof name),
                 .record = rec_layernorm_bw16, .tol = 1e-6 * (N + 8), .d = {N, C}};
    c.tol16 = c.tol;
    snprintf(c.shape, sizeof c.shape, "N=%d C=%d dout, inp, weight %s", N, C,
             vka_dtype_string(dtype));
    size_t n = (size_t)N * C;
    int dinp = ck_acc(st, &c, n), dw = ck_acc(st, &c, (size_t)C), db = ck_acc(st, &c, (size_t)C);
    ck_in16(st, &c, n, 1.0f, dtype);
    int inp = ck_in16(st, &c, n, 3.0f, dtype);
    ck_in16(st, &c, (size_t)C, 1.0f, dtype);
    /* mean and rstd of the rounded rows, as a forward on them would give (float64 here: the
     * backward reads them as given, on both contexts) */
    float *mean = vka_malloc(st->gpu, (size_t)N * sizeof *mean);
    float *rstd = vka_malloc(st->gpu, (size_t)N * sizeof *rstd);
    for (int i = 0; mean && rstd && c.data[inp] && i < N; i++) {
        double sum = 0, sq = 0;
        for (int j = 0; j < C; j++) {
            uint16_t h;
            float x;
            vka_convert(dtype, &h, VKA_F32, &c.data[inp][(size_t)i * C + j], 1);
            vka_convert(VKA_F32, &x, dtype, &h, 1);
            sum += x;
            sq += (double)x * x;
        }
        double m = sum / C, var = sq / C - m * m;
        mean[i] = (float)m;
        rstd[i] = (float)(1.0 / sqrt((var > 0 ? var : 0) + 1e-5));
    }
    ck_add(&c, (size_t)N, mean, false);
    ck_add(&c, (size_t)N, rstd, false);
    ck_scratch(st, &c, n);
    ck_scratch(st, &c, n);
    ck_scratch(st, &c, (size_t)C);
    ck_same(&c, dinp, ck_dup(st, &c, dinp));
    ck_same(&c, dw, ck_dup(st, &c, dw));
    ck_same(&c, db, ck_dup(st, &c, db));
    ck_run(st, &c);
}

static vka_result rec_encoder16(vka_context *ctx, vka_tensor **t, const ck_case *c) {
    /* t: out16 tokens wte16 wpe16 | wte32 wpe32 out32 r16 */
    int B = c->d[0], T = c->d[1], C = c->d[2], V = c->d[3];
    vka_result r = vka_copy(ctx, t[4], t[2], (size_t)V * C);
    if (r == VKA_SUCCESS) r = vka_copy(ctx, t[5], t[3], (size_t)T * C);
    if (r == VKA_SUCCESS) r = vka_encoder_forward(ctx, t[6], t[1], t[4], t[5], B, T, C);
    if (r == VKA_SUCCESS) r = vka_encoder_forward(ctx, t[0], t[1], t[2], t[3], B, T, C);
    if (r == VKA_SUCCESS) r = vka_copy(ctx, t[7], t[6], (size_t)B * T * C);
    return r;
}

/* The encoder with 16-bit out, wte and wpe (llm.c's bf16 encoder); an odd C starts rows
 * mid-word. */
static void case_encoder16(ck_state *st, vka_dtype dtype, int B, int T, int C, int V) {
    char name[64];
    ck_case c = {.op = ck_name16("encoder_forward", dtype, name, sizeof name),
                 .record = rec_encoder16, .tol = 1e-6, .d = {B, T, C, V}};
    c.tol16 = c.tol + ck_ulp16(dtype);
    snprintf(c.shape, sizeof c.shape, "B=%d T=%d C=%d V=%d out, wte, wpe %s", B, T, C, V,
             vka_dtype_string(dtype));
    size_t n = (size_t)B * T * C;
    int out = ck_out16(&c, n, dtype);
    ck_ids(st, &c, (size_t)B * T, V);
    ck_in16(st, &c, (size_t)V * C, 1.0f, dtype);
    ck_in16(st, &c, (size_t)T * C, 1.0f, dtype);
    ck_scratch(st, &c, (size_t)V * C);
    ck_scratch(st, &c, (size_t)T * C);
    ck_out(&c, n);
    ck_same(&c, out, ck_out16(&c, n, dtype));
    ck_run(st, &c);
}

static vka_result rec_gelu16(vka_context *ctx, vka_tensor **t, const ck_case *c) {
    /* t: out16 inp16 dinp dout16 | inp32 out32 r16 dout32 dinp32 */
    size_t n = (size_t)c->d[0];
    vka_result r = vka_copy(ctx, t[4], t[1], n);
    if (r == VKA_SUCCESS) r = vka_copy(ctx, t[7], t[3], n);
    if (r == VKA_SUCCESS) r = vka_gelu_forward(ctx, t[5], t[4], n);
    if (r == VKA_SUCCESS) r = vka_gelu_forward(ctx, t[0], t[1], n);
    if (r == VKA_SUCCESS) r = vka_copy(ctx, t[6], t[5], n);
    if (r == VKA_SUCCESS) r = vka_gelu_backward(ctx, t[8], t[4], t[7], n);
    if (r == VKA_SUCCESS) r = vka_gelu_backward(ctx, t[2], t[1], t[3], n);
    return r;
}

static void case_gelu16(ck_state *st, vka_dtype dtype, int N) {
    char name[64];
    ck_case c = {.op = ck_name16("gelu_forward_backward", dtype, name, sizeof name),
                 .record = rec_gelu16, .tol = 1e-5, .d = {N}};
    c.tol16 = c.tol + ck_ulp16(dtype);
    snprintf(c.shape, sizeof c.shape, "N=%d out, inp, dout %s", N, vka_dtype_string(dtype));
    int out = ck_out16(&c, (size_t)N, dtype);
    ck_in16(st, &c, (size_t)N, 8.0f, dtype);
    int dinp = ck_acc(st, &c, (size_t)N);
    ck_in16(st, &c, (size_t)N, 1.0f, dtype);
    ck_scratch(st, &c, (size_t)N);
    ck_out(&c, (size_t)N);
    int r16 = ck_out16(&c, (size_t)N, dtype);
    ck_scratch(st, &c, (size_t)N);
    int dinp32 = ck_dup(st, &c, dinp);
    ck_same(&c, out, r16);
    ck_same(&c, dinp, dinp32);
    ck_run(st, &c);
}

static vka_result rec_residual16(vka_context *ctx, vka_tensor **t, const ck_case *c) {
    /* t: out16 a16 b16 | a32 b32 out32 r16 */
    size_t n = (size_t)c->d[0];
    vka_result r = vka_copy(ctx, t[3], t[1], n);
    if (r == VKA_SUCCESS) r = vka_copy(ctx, t[4], t[2], n);
    if (r == VKA_SUCCESS) r = vka_residual_forward(ctx, t[5], t[3], t[4], n);
    if (r == VKA_SUCCESS) r = vka_residual_forward(ctx, t[0], t[1], t[2], n);
    if (r == VKA_SUCCESS) r = vka_copy(ctx, t[6], t[5], n);
    return r;
}

static void case_residual16(ck_state *st, vka_dtype dtype, int N) {
    char name[64];
    ck_case c = {.op = ck_name16("residual_add", dtype, name, sizeof name),
                 .record = rec_residual16, .tol = 1e-6, .d = {N}};
    c.tol16 = c.tol + ck_ulp16(dtype);
    snprintf(c.shape, sizeof c.shape, "N=%d out, a, b %s", N, vka_dtype_string(dtype));
    int out = ck_out16(&c, (size_t)N, dtype);
    ck_in16(st, &c, (size_t)N, 1.0f, dtype);
    ck_in16(st, &c, (size_t)N, 1.0f, dtype);
    ck_scratch(st, &c, (size_t)N);
    ck_scratch(st, &c, (size_t)N);
    ck_out(&c, (size_t)N);
    ck_same(&c, out, ck_out16(&c, (size_t)N, dtype));
    ck_run(st, &c);
}

/* A 16-bit KV cache (kv_write rounds each element once, as vka_copy: exact on every device),
 * from a float32 qkv (decoding) or one of the cache's type. */
static void case_kv_write16(ck_state *st, vka_dtype dtype, bool qkv16, int T, int NH, int HS,
                            int max_T, int p0, int n) {
    char name[64];
    ck_case c = {.op = ck_name16("kv_write", dtype, name, sizeof name), .record = rec_kv_write,
                 .tol = 0.0, .tol16 = 0.0, .d = {T, NH, HS, max_T}};
    snprintf(c.shape, sizeof c.shape, "T=%d NH=%d HS=%d max_T=%d pos=%d n=%d qkv %s", T, NH, HS,
             max_T, p0, n, qkv16 ? vka_dtype_string(dtype) : "f32");
    size_t cache = (size_t)NH * max_T * HS;
    c.dtype[ck_acc(st, &c, cache)] = (uint8_t)dtype;
    c.dtype[ck_acc(st, &c, cache)] = (uint8_t)dtype;
    int qkv = ck_in(st, &c, (size_t)T * 3 * NH * HS, 1.0f);
    if (qkv16) c.dtype[qkv] = (uint8_t)dtype;
    float *pos = vka_malloc(st->gpu, 2 * sizeof *pos);
    if (pos) {
        int32_t p[2] = {p0, n};
        memcpy(pos, p, sizeof p);
    }
    ck_add(&c, 2, pos, false);
    ck_run(st, &c);
}

static vka_result rec_crossentropy16(vka_context *ctx, vka_tensor **t, const ck_case *c) {
    /* t: losses logits16 targets dlogits16 | logits32 losses32 dlogits32 r16 */
    int N = c->d[0], V = c->d[1], Vp = c->d[2];
    size_t n = (size_t)N * Vp;
    vka_result r = vka_copy(ctx, t[4], t[1], n);
    if (r == VKA_SUCCESS) r = vka_crossentropy_forward(ctx, t[5], t[4], t[2], N, V, Vp);
    if (r == VKA_SUCCESS) r = vka_crossentropy_backward(ctx, t[6], t[4], t[2], c->f, N, V, Vp);
    if (r == VKA_SUCCESS) r = vka_copy(ctx, t[7], t[6], n);
    if (r == VKA_SUCCESS) r = vka_crossentropy_forward(ctx, t[0], t[1], t[2], N, V, Vp);
    if (r == VKA_SUCCESS) r = vka_crossentropy_backward(ctx, t[3], t[1], t[2], c->f, N, V, Vp);
    return r;
}

/* 16-bit logits and dlogits (an odd Vp starts rows mid-word), float32 losses. */
static void case_crossentropy16(ck_state *st, vka_dtype dtype, int N, int V, int Vp) {
    char name[64];
    ck_case c = {.op = ck_name16("crossentropy_forward_backward", dtype, name, sizeof name),
                 .record = rec_crossentropy16, .tol = 1e-5, .d = {N, V, Vp},
                 .f = 1.0f / (float)N};
    c.tol16 = c.tol + ck_ulp16(dtype);
    snprintf(c.shape, sizeof c.shape, "N=%d V=%d Vp=%d logits, dlogits %s", N, V, Vp,
             vka_dtype_string(dtype));
    size_t n = (size_t)N * Vp;
    int losses = ck_out(&c, (size_t)N);
    ck_in16(st, &c, n, 5.0f, dtype);
    ck_ids(st, &c, (size_t)N, V);
    int dlogits = ck_out16(&c, n, dtype);
    ck_scratch(st, &c, n);
    int losses32 = ck_out(&c, (size_t)N);
    ck_scratch(st, &c, n);
    int r16 = ck_out16(&c, n, dtype);
    ck_same(&c, losses, losses32);
    ck_same(&c, dlogits, r16);
    ck_run(st, &c);
}

/* --- one training step of a small model ------------------------------------------------------ */

static void report_model(ck_state *st, const char *op, const char *shape, const float *got,
                         const float *want, size_t n, double tol) {
    vka_check_row row = {.op = op, .shape = shape, .pass = true};
    ck_compare(got, want, n, tol, &row);
    ck_report(st, &row);
}

/* dtype VKA_F32: the float32 model. Else its mixed precision in dtype on both contexts, with
 * the fused attention on both (the composed one keeps its tensors in float32, so it is not the
 * same computation): the same 16-bit roundings of the same values, so the rows differ only
 * where a float32 difference makes one rounding go the other way (tolerances: 10-30 times the
 * largest difference seen on lavapipe's two kernel variants over seeds 1-3: loss 3.3e-6,
 * gradients 7.3e-5). */
static void case_train_step(ck_state *st, uint64_t seed, vka_dtype dtype) {
    vka_gpt_config cfg = {.max_T = 32, .V = 65, .L = 2, .NH = 4, .C = 64};
    enum { B = 4, T = 32 };
    /* The device runs the model as it trains (fused attention); the reference the composed
     * path (matmul, softmax, matmul), so both the op and its use in the model are checked. */
    char shape[96], names[4][48];
    snprintf(shape, sizeof shape, "V=65 L=2 NH=4 C=64 B=4 T=32 %s",
             dtype ? (dtype == VKA_BF16 ? "bf16 mixed precision, fused"
                                        : "fp16 mixed precision, fused")
                   : "fused vs composed");
    static const char *const rows[4] = {"forward_loss", "backward_grads", "train_step_loss",
                                        "train_step_params"};
    for (int i = 0; i < 4; i++)
        snprintf(names[i], sizeof names[i], "%s%s%s", rows[i], dtype ? " " : "",
                 dtype ? vka_dtype_string(dtype) : "");
    double tol_loss = dtype ? 1e-4 : 1e-5, tol_grads = dtype ? 1e-3 : 1e-4,
           tol_params = 1e-5;
    vka_gpt *cpu = NULL, *gpu = NULL;
    float *params = NULL, *grads_cpu = NULL, *grads_gpu = NULL, *p_gpu = NULL;
    int32_t inputs[B * T], targets[B * T];
    for (int i = 0; i < B * T; i++) {
        inputs[i] = (int32_t)vkm_rng_below(&st->rng, (uint64_t)cfg.V);
        targets[i] = (int32_t)vkm_rng_below(&st->rng, (uint64_t)cfg.V);
    }
    const char *what = "train_step";
    vka_result r = ck_on_cpu(st, vka_gpt_create(st->cpu, &cfg, seed, &cpu), what);
    if (r != VKA_SUCCESS) goto done;
    if (dtype) {
        r = ck_on_cpu(st, vka_gpt_set_precision(cpu, dtype), what);
    } else {
        r = ck_on_cpu(st, vka_gpt_set_attention(cpu, VKA_ATTENTION_COMPOSED), what);
    }
    if (r == VKA_SUCCESS) r = vka_gpt_create(st->gpu, &cfg, seed, &gpu);
    if (r == VKA_SUCCESS && dtype) r = vka_gpt_set_precision(gpu, dtype);
    if (r == VKA_SUCCESS && dtype) r = vka_gpt_set_attention(gpu, VKA_ATTENTION_FUSED);
    if (r == VKA_SUCCESS && dtype) r = ck_on_cpu(st, vka_gpt_set_attention(cpu, VKA_ATTENTION_FUSED), what);
    size_t n = vka_gpt_num_params(cpu);
    params = vka_malloc(st->gpu, n * sizeof *params);
    grads_cpu = vka_malloc(st->gpu, n * sizeof *grads_cpu);
    grads_gpu = vka_malloc(st->gpu, n * sizeof *grads_gpu);
    p_gpu = vka_malloc(st->gpu, n * sizeof *p_gpu);
    if (r == VKA_SUCCESS && (!params || !grads_cpu || !grads_gpu || !p_gpu))
        r = vka_set_error(st->gpu, VKA_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    if (r == VKA_SUCCESS) r = ck_on_cpu(st, vka_gpt_get_params(cpu, params, n), what);
    if (r == VKA_SUCCESS) r = vka_gpt_set_params(gpu, params, n);
    float loss_cpu = 0, loss_gpu = 0;
    if (r == VKA_SUCCESS)
        r = ck_on_cpu(st, vka_gpt_forward_backward(cpu, inputs, targets, B, T, &loss_cpu), what);
    if (r == VKA_SUCCESS) r = vka_gpt_forward_backward(gpu, inputs, targets, B, T, &loss_gpu);
    if (r == VKA_SUCCESS) r = ck_on_cpu(st, vka_gpt_get_grads(cpu, grads_cpu, n), what);
    if (r == VKA_SUCCESS) r = vka_gpt_get_grads(gpu, grads_gpu, n);
    if (r != VKA_SUCCESS) goto done;
    report_model(st, names[0], shape, &loss_gpu, &loss_cpu, 1, tol_loss);
    report_model(st, names[1], shape, grads_gpu, grads_cpu, n, tol_grads);
    vka_adamw_desc opt = {.lr = 1e-3f, .beta2 = 0.99f, .weight_decay = 0.1f, .grad_clip = 1.0f};
    r = ck_on_cpu(st, vka_gpt_train_step(cpu, inputs, targets, B, T, &opt, &loss_cpu, NULL),
                  what);
    if (r == VKA_SUCCESS) r = vka_gpt_train_step(gpu, inputs, targets, B, T, &opt, &loss_gpu, NULL);
    if (r == VKA_SUCCESS) r = ck_on_cpu(st, vka_gpt_get_params(cpu, params, n), what);
    if (r == VKA_SUCCESS) r = vka_gpt_get_params(gpu, p_gpu, n);
    if (r != VKA_SUCCESS) goto done;
    report_model(st, names[2], shape, &loss_gpu, &loss_cpu, 1, tol_loss);
    /* AdamW's first step moves a parameter by lr * g / (|g| + eps), eps = 1e-8: where |g| is
     * within a few eps of zero, gradient rounding differences far inside backward_grads'
     * tolerance (e.g. 2.08e-8 vs 2.02e-8) change the step by a sizeable fraction of lr. Those
     * parameters (|g| < 100 eps on the CPU; the same batch as the backward_grads row) are left
     * out; everywhere else the step is insensitive to rounding. In 16 bits the gradients differ
     * by up to ~1e-4 (one 16-bit rounding going the other way), which flips the sign of a
     * gradient below that and moves its parameter 2 lr the other way: there parameters with
     * |g| < 1e-3 are left out. */
    float small_g = dtype ? 1e-3f : 1e-6f; /* in 16 bits: 10x backward_grads' differences */
    for (size_t i = 0; i < n; i++)
        if (fabsf(grads_cpu[i]) < small_g) p_gpu[i] = params[i];
    report_model(st, names[3], shape, p_gpu, params, n, tol_params);
done:
    if (r != VKA_SUCCESS) {
        if (st->err == VKA_SUCCESS) st->err = r;
        vka_check_row row = {.op = what, .shape = shape, .max_abs = INFINITY};
        ck_report(st, &row);
    }
    vka_free(st->gpu, params);
    vka_free(st->gpu, grads_cpu);
    vka_free(st->gpu, grads_gpu);
    vka_free(st->gpu, p_gpu);
    vka_gpt_destroy(cpu);
    vka_gpt_destroy(gpu);
}

vka_result vka_check(vka_context *ctx, uint64_t seed, vka_check_fn fn, void *user_data,
                     int *n_failed) {
    vka_result r = vka_context_usable(ctx, "vka_check");
    if (r != VKA_SUCCESS) return r;
    ck_state st = {.gpu = ctx, .rng = seed, .fn = fn, .user = user_data};
    /* the reference kernels, whatever VKATTN_CPU_KERNELS says: check compares with them */
    vka_context_desc cpu_desc = {.backend = VKA_BACKEND_CPU,
                                 .cpu_kernels = VKA_CPU_KERNELS_REFERENCE, .log = ctx->log,
                                 .log_user_data = ctx->log_user_data, .log_level = ctx->log_level,
                                 /* the same allocator: blocks of either context are freed by st.gpu */
                                 .host_allocator = ctx->host.alloc ? &ctx->host : NULL};
    r = vka_context_create(&cpu_desc, &st.cpu);
    if (r != VKA_SUCCESS) {
        vka_set_error(ctx, r, "check: CPU reference: %s", vka_last_error(st.cpu));
        vka_context_destroy(st.cpu);
        return r;
    }
    /* Awkward shapes: not multiples of any tile, length 1, rows longer than a workgroup. */
    case_matmul(&st, 65, 33, 17, 1, false, false, true, false);
    case_matmul(&st, 65, 33, 17, 1, false, true, false, true);
    case_matmul(&st, 65, 33, 17, 1, true, false, false, true);
    case_matmul(&st, 1, 1, 1, 1, true, true, true, false);
    case_matmul(&st, 31, 64, 19, 5, false, true, false, false);
    case_matmul(&st, 384, 128, 768, 1, true, false, false, true);
    case_matmul16(&st, VKA_BF16, 65, 33, 17, false, true, true);
    case_matmul16(&st, VKA_F16, 37, 130, 77, true, false, false);
    case_convert(&st, VKA_BF16, 1001);
    case_convert(&st, VKA_F16, 70001);
    case_softmax_forward(&st, 37, 37, 37, true, 0);
    case_softmax_forward(&st, 6, 3, 1000, false, 3);
    case_softmax_forward(&st, 4, 4, 5000, false, 0);
    case_softmax_forward(&st, 3, 3, 1, true, 0);
    case_softmax_backward(&st, 40, 20, 20);
    case_softmax_backward(&st, 2, 2, 3000);
    case_layernorm(&st, 37, 129, false);
    case_layernorm(&st, 3, 3000, true);
    case_layernorm(&st, 65, 33, true);
    case_gelu(&st, 1001);
    case_gelu(&st, 1024); /* lengths of multiples of 4: the CPU-type kernels' vec4 layout */
    case_residual(&st, 70001);
    case_residual(&st, 70000);
    case_permute(&st, 3, 7, 5, 3);
    case_kv_write(&st, 7, 3, 5, 19, 11, 5);
    case_kv_write(&st, 1, 4, 33, 64, 63, 1);
    case_encoder(&st, 3, 9, 17, 11);
    case_crossentropy(&st, 13, 65, 128);
    case_crossentropy(&st, 3, 5000, 5120);
    case_reduce(&st, 130, 33, 0.5f);
    case_reduce(&st, 7, 1, 0.0f);
    case_reduce(&st, 130, 36, 0.5f);
    case_adamw(&st, 1003);
    case_adamw(&st, 1004);
    case_attention(&st, 2, 3, 37, 37, 24, VKA_CAUSAL_TOP_LEFT, CK_QKV | CK_BTC, VKA_F32);
    case_attention(&st, 2, 2, 5, 70, 72, VKA_CAUSAL_BOTTOM_RIGHT, CK_MASK, VKA_F32);
    case_attention(&st, 3, 1, 65, 33, 128, VKA_CAUSAL_NONE,
                   CK_MASK | CK_MASK_PER_BATCH | CK_KEY_LENS, VKA_F32);
    case_attention(&st, 2, 3, 37, 37, 24, VKA_CAUSAL_TOP_LEFT, CK_QKV | CK_BTC | CK_BACKWARD,
                   VKA_F32);
    case_attention(&st, 2, 2, 9, 70, 40, VKA_CAUSAL_TOP_LEFT,
                   CK_MASK | CK_KEY_LENS | CK_BACKWARD, VKA_F32);
    case_train_step(&st, seed, VKA_F32);
    /* 16-bit: odd lengths and row sizes (rows and outputs starting mid-word), both formats */
    case_layernorm16(&st, VKA_BF16, 37, 129);
    case_layernorm16(&st, VKA_F16, 5, 1601);
    case_layernorm_bw16(&st, VKA_BF16, 65, 33);
    case_layernorm_bw16(&st, VKA_F16, 3, 3001);
    case_encoder16(&st, VKA_BF16, 3, 9, 17, 11);
    case_encoder16(&st, VKA_F16, 2, 5, 768, 7);
    case_gelu16(&st, VKA_BF16, 1001);
    case_gelu16(&st, VKA_F16, 1024);
    case_residual16(&st, VKA_BF16, 70001);
    case_residual16(&st, VKA_F16, 1000);
    case_kv_write16(&st, VKA_BF16, false, 7, 3, 5, 19, 11, 5);
    case_kv_write16(&st, VKA_F16, true, 1, 4, 33, 64, 63, 1);
    case_crossentropy16(&st, VKA_BF16, 13, 65, 65);
    case_crossentropy16(&st, VKA_F16, 3, 5000, 5001);
    case_attention(&st, 2, 3, 37, 37, 24, VKA_CAUSAL_TOP_LEFT, CK_QKV | CK_BTC, VKA_BF16);
    case_attention(&st, 2, 2, 5, 70, 9, VKA_CAUSAL_BOTTOM_RIGHT, CK_MASK, VKA_F16);
    case_attention(&st, 2, 3, 37, 37, 24, VKA_CAUSAL_TOP_LEFT, CK_QKV | CK_BTC | CK_BACKWARD,
                   VKA_BF16);
    case_attention(&st, 2, 2, 9, 70, 5, VKA_CAUSAL_TOP_LEFT, CK_MASK | CK_KEY_LENS | CK_BACKWARD,
                   VKA_F16);
    case_train_step(&st, seed, VKA_BF16);
    case_train_step(&st, seed, VKA_F16);
    vka_context_destroy(st.cpu);
    if (n_failed) *n_failed = st.failed;
    if (st.err != VKA_SUCCESS) return st.err;
    if (st.failed)
        return vka_set_error(ctx, VKA_ERROR_MISMATCH, "check: %d case(s) differ beyond tolerance",
                             st.failed);
    return VKA_SUCCESS;
}
