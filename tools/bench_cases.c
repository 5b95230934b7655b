/*
 * vkattn bench: the kernel cases. The shapes are tables (the models' layers, square matmuls,
 * softmax lengths); each op has a describe function (its tensors, the work of one run, its
 * shape as text) and a record function (the op on the public API, as src/model/gpt_graph.c
 * calls it). docs/benchmarks.md lists the work formulas written here.
 */
#include "bench_cases.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

typedef enum kc_op {
    OP_MATMUL, OP_MATMUL_BF16, OP_MATMUL_F16, OP_LINEAR_FWD, OP_LINEAR_BWD, OP_ATTN_FWD,
    OP_ATTN_BWD, OP_FUSED_FWD,
    OP_FUSED_BWD, OP_SOFTMAX_FWD,
    OP_SOFTMAX_BWD, OP_PERMUTE_FWD, OP_PERMUTE_BWD, OP_UNPERMUTE_FWD, OP_UNPERMUTE_BWD,
    OP_LAYERNORM_FWD, OP_LAYERNORM_BWD, OP_GELU_FWD, OP_GELU_BWD, OP_RESIDUAL_FWD,
    OP_RESIDUAL_BWD, OP_BIAS_BWD, OP_CE_FWD, OP_CE_BWD, OP_ADAMW,
} kc_op;

/* --- record: the ops of a case (t laid out as its describe function says) -------------------- */

static vka_result rec_matmul(vka_context *ctx, vka_tensor **t, const kc_case *c) {
    /* t: out (M, N), a (M, K), b (K, N) */
    vka_matmul_desc d = {.out = t[0], .a = t[1], .b = t[2], .M = c->d[0], .N = c->d[1],
                         .K = c->d[2]};
    return vka_matmul(ctx, &d);
}

static vka_result rec_linear_fwd(vka_context *ctx, vka_tensor **t, const kc_case *c) {
    /* t: out (BT, OC), inp (BT, IC), weight (OC, IC), bias (OC): out = inp . weight^T + bias */
    vka_matmul_desc d = {.out = t[0], .a = t[1], .b = t[2], .bias = c->d[3] ? t[3] : NULL,
                         .M = c->d[0], .N = c->d[2], .K = c->d[1], .trans_b = true};
    return vka_matmul(ctx, &d);
}

static vka_result rec_linear_bwd(vka_context *ctx, vka_tensor **t, const kc_case *c) {
    /* t: dinp (BT, IC), dweight (OC, IC), dout (BT, OC), weight (OC, IC), inp (BT, IC) */
    int BT = c->d[0], IC = c->d[1], OC = c->d[2];
    vka_matmul_desc dx = {.out = t[0], .a = t[2], .b = t[3], .M = BT, .N = IC, .K = OC};
    vka_matmul_desc dw = {.out = t[1], .a = t[2], .b = t[4], .M = OC, .N = IC, .K = BT,
                          .trans_a = true, .accumulate = true};
    vka_result r = vka_matmul(ctx, &dx);
    return r == VKA_SUCCESS ? vka_matmul(ctx, &dw) : r;
}

static vka_result rec_attn_fwd(vka_context *ctx, vka_tensor **t, const kc_case *c) {
    /* t: out (B,T,C), qkv (B,T,3C), q, k, v (B,NH,T,HS), preatt, att (B,NH,T,T),
     *    vaccum (B,NH,T,HS) */
    int B = c->d[0], T = c->d[1], NH = c->d[2], HS = c->d[3];
    vka_matmul_desc qk = {.out = t[5], .a = t[2], .b = t[3], .M = T, .N = T, .K = HS,
                          .batch = B * NH, .trans_b = true};
    vka_softmax_desc sm = {.out = t[6], .inp = t[5], .R = B * NH * T, .Tq = T, .Tk = T,
                           .scale = 1.0f / sqrtf((float)HS), .causal = true};
    vka_matmul_desc av = {.out = t[7], .a = t[6], .b = t[4], .M = T, .N = HS, .K = T,
                          .batch = B * NH};
    vka_result r = vka_permute_forward(ctx, t[2], t[3], t[4], t[1], B, T, NH, HS);
    if (r == VKA_SUCCESS) r = vka_matmul(ctx, &qk);
    if (r == VKA_SUCCESS) r = vka_softmax_forward(ctx, &sm);
    if (r == VKA_SUCCESS) r = vka_matmul(ctx, &av);
    if (r == VKA_SUCCESS) r = vka_unpermute_forward(ctx, t[0], t[7], B, T, NH, HS);
    return r;
}

static vka_result rec_attn_bwd(vka_context *ctx, vka_tensor **t, const kc_case *c) {
    /* t: dqkv (B,T,3C), dout (B,T,C), q, k, v (B,NH,T,HS), att (B,NH,T,T),
     *    dvaccum, dq, dk, dv (B,NH,T,HS), datt, dpreatt (B,NH,T,T) */
    int B = c->d[0], T = c->d[1], NH = c->d[2], HS = c->d[3], BNH = B * NH;
    vka_matmul_desc datt = {.out = t[10], .a = t[6], .b = t[4], .M = T, .N = T, .K = HS,
                            .batch = BNH, .trans_b = true};
    vka_matmul_desc dv = {.out = t[9], .a = t[5], .b = t[6], .M = T, .N = HS, .K = T,
                          .batch = BNH, .trans_a = true};
    vka_matmul_desc dq = {.out = t[7], .a = t[11], .b = t[3], .M = T, .N = HS, .K = T,
                          .batch = BNH};
    vka_matmul_desc dk = {.out = t[8], .a = t[11], .b = t[2], .M = T, .N = HS, .K = T,
                          .batch = BNH, .trans_a = true};
    vka_result r = vka_fill(ctx, t[6], 0.0f);
    if (r == VKA_SUCCESS) r = vka_unpermute_backward(ctx, t[6], t[1], B, T, NH, HS);
    if (r == VKA_SUCCESS) r = vka_matmul(ctx, &datt);
    if (r == VKA_SUCCESS) r = vka_matmul(ctx, &dv);
    if (r == VKA_SUCCESS) r = vka_fill(ctx, t[11], 0.0f);
    if (r == VKA_SUCCESS)
        r = vka_softmax_backward(ctx, t[11], t[10], t[5], BNH * T, T, 1.0f / sqrtf((float)HS));
    if (r == VKA_SUCCESS) r = vka_matmul(ctx, &dq);
    if (r == VKA_SUCCESS) r = vka_matmul(ctx, &dk);
    if (r == VKA_SUCCESS) r = vka_fill(ctx, t[0], 0.0f);
    if (r == VKA_SUCCESS) r = vka_permute_backward(ctx, t[0], t[7], t[8], t[9], B, T, NH, HS);
    return r;
}

/* The fused op as the model calls it: qkv (B,T,3C) in, out (B,T,C), causal. */
static vka_attention_desc fused_desc(vka_tensor **t, const kc_case *c) {
    /* t: out (B,T,C), qkv (B,T,3C), lse (B,NH,T) [backward: dqkv (B,T,3C), dout (B,T,C)] */
    return (vka_attention_desc){.qkv = t[1], .B = c->d[0], .NH = c->d[2], .Tq = c->d[1],
                                .Tk = c->d[1], .HS = c->d[3], .causal = VKA_CAUSAL_TOP_LEFT,
                                .out_btc = true, .out = t[0], .lse = t[2]};
}
static vka_result rec_fused_fwd(vka_context *ctx, vka_tensor **t, const kc_case *c) {
    vka_attention_desc d = fused_desc(t, c);
    return vka_attention_forward(ctx, &d);
}
static vka_result rec_fused_bwd(vka_context *ctx, vka_tensor **t, const kc_case *c) {
    vka_attention_desc d = fused_desc(t, c);
    vka_attention_grads g = {.dout = t[4], .dqkv = t[3]};
    return vka_attention_backward(ctx, &d, &g);
}

/* Softmax rows as the model's attention: (B*NH, T, T), causal, scale 1/sqrt(64). */
static vka_result rec_softmax_fwd(vka_context *ctx, vka_tensor **t, const kc_case *c) {
    vka_softmax_desc d = {.out = t[0], .inp = t[1], .R = c->d[0] * c->d[1], .Tq = c->d[1],
                          .Tk = c->d[1], .scale = 0.125f, .causal = true};
    return vka_softmax_forward(ctx, &d);
}
static vka_result rec_softmax_bwd(vka_context *ctx, vka_tensor **t, const kc_case *c) {
    return vka_softmax_backward(ctx, t[0], t[1], t[2], c->d[0] * c->d[1], c->d[1], 0.125f);
}
static vka_result rec_permute_fwd(vka_context *ctx, vka_tensor **t, const kc_case *c) {
    return vka_permute_forward(ctx, t[0], t[1], t[2], t[3], c->d[0], c->d[1], c->d[2], c->d[3]);
}
static vka_result rec_permute_bwd(vka_context *ctx, vka_tensor **t, const kc_case *c) {
    return vka_permute_backward(ctx, t[0], t[1], t[2], t[3], c->d[0], c->d[1], c->d[2], c->d[3]);
}
static vka_result rec_unpermute_fwd(vka_context *ctx, vka_tensor **t, const kc_case *c) {
    return vka_unpermute_forward(ctx, t[0], t[1], c->d[0], c->d[1], c->d[2], c->d[3]);
}
static vka_result rec_unpermute_bwd(vka_context *ctx, vka_tensor **t, const kc_case *c) {
    return vka_unpermute_backward(ctx, t[0], t[1], c->d[0], c->d[1], c->d[2], c->d[3]);
}
static vka_result rec_layernorm_fwd(vka_context *ctx, vka_tensor **t, const kc_case *c) {
    return vka_layernorm_forward(ctx, t[0], t[1], t[2], t[3], t[4], t[5], c->d[0], c->d[1]);
}
static vka_result rec_layernorm_bwd(vka_context *ctx, vka_tensor **t, const kc_case *c) {
    return vka_layernorm_backward(ctx, t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7], c->d[0],
                                  c->d[1]);
}
static vka_result rec_gelu_fwd(vka_context *ctx, vka_tensor **t, const kc_case *c) {
    return vka_gelu_forward(ctx, t[0], t[1], (size_t)c->d[0]);
}
static vka_result rec_gelu_bwd(vka_context *ctx, vka_tensor **t, const kc_case *c) {
    return vka_gelu_backward(ctx, t[0], t[1], t[2], (size_t)c->d[0]);
}
static vka_result rec_residual_fwd(vka_context *ctx, vka_tensor **t, const kc_case *c) {
    return vka_residual_forward(ctx, t[0], t[1], t[2], (size_t)c->d[0]);
}
static vka_result rec_residual_bwd(vka_context *ctx, vka_tensor **t, const kc_case *c) {
    return vka_add_inplace(ctx, t[0], t[1], (size_t)c->d[0]);
}
static vka_result rec_bias_bwd(vka_context *ctx, vka_tensor **t, const kc_case *c) {
    return vka_bias_backward(ctx, t[0], t[1], c->d[0], c->d[1]);
}
static vka_result rec_ce_fwd(vka_context *ctx, vka_tensor **t, const kc_case *c) {
    return vka_crossentropy_forward(ctx, t[0], t[1], t[2], c->d[0], c->d[1], c->d[2]);
}
static vka_result rec_ce_bwd(vka_context *ctx, vka_tensor **t, const kc_case *c) {
    return vka_crossentropy_backward(ctx, t[0], t[1], t[2], 1.0f / (float)c->d[0], c->d[0],
                                     c->d[1], c->d[2]);
}
static vka_result rec_adamw(vka_context *ctx, vka_tensor **t, const kc_case *c) {
    return vka_adamw(ctx, t[0], t[1], t[2], t[3], t[4], t[5], (size_t)c->d[0], 0.1f);
}

/* --- describe: tensors, work, shape ----------------------------------------------------------- */

static void add_t(kc_case *c, size_t n, kc_init init, bool compare) {
    c->t[c->n_tensors++] = (kc_tensor){.n = n, .init = init, .scale = 1.0f, .compare = compare};
}
#define IN(c, n) add_t(c, n, KC_RANDOM, false)
#define OUT(c, n) add_t(c, n, KC_ZERO, true)     /* written by the op */
#define ACC(c, n) add_t(c, n, KC_RANDOM, true)   /* added into by the op */
#define SCRATCH(c, n) add_t(c, n, KC_ZERO, false)

static void set_row(bench_row *row, const char *kind, const char *pass, bool compute,
                    double flop, double bytes) {
    row->kind = kind;
    row->pass = pass;
    row->compute = compute;
    row->flop = flop;
    row->bytes = bytes;
}

static void describe_matmul(kc_case *c, bench_row *row) {
    if (c->op == OP_MATMUL) {
        double M = c->d[0], N = c->d[1], K = c->d[2];
        size_t m = (size_t)c->d[0], n = (size_t)c->d[1], k = (size_t)c->d[2];
        c->record = rec_matmul;
        OUT(c, m * n), IN(c, m * k), IN(c, k * n);
        set_row(row, "matmul", "forward", true, 2 * M * N * K, 4 * (M * K + K * N + M * N));
        snprintf(row->shape, sizeof row->shape, "M=%d N=%d K=%d", c->d[0], c->d[1], c->d[2]);
        c->tol = 1e-6 * (K + 8);
        row->series = "matmul";
        row->x = cbrt(M * N * K);
        return;
    }
    if (c->op == OP_MATMUL_BF16 || c->op == OP_MATMUL_F16) { /* a and b 16-bit, out fp32 */
        double M = c->d[0], N = c->d[1], K = c->d[2];
        size_t m = (size_t)c->d[0], n = (size_t)c->d[1], k = (size_t)c->d[2];
        c->record = rec_matmul;
        c->type16 = c->op == OP_MATMUL_F16 ? VKA_F16 : VKA_BF16;
        OUT(c, m * n), IN(c, m * k), IN(c, k * n);
        set_row(row, "matmul", "forward", true, 2 * M * N * K, 2 * (M * K + K * N) + 4 * M * N);
        snprintf(row->shape, sizeof row->shape, "M=%d N=%d K=%d %s", c->d[0], c->d[1], c->d[2],
                 vka_dtype_string((vka_dtype)c->type16));
        c->tol = 1e-6 * (K + 8);
        row->x = cbrt(M * N * K);
        return;
    }
    /* a linear layer: d = BT, IC, OC, bias */
    double BT = c->d[0], IC = c->d[1], OC = c->d[2];
    size_t bt = (size_t)c->d[0], ic = (size_t)c->d[1], oc = (size_t)c->d[2];
    if (c->op == OP_LINEAR_FWD) {
        c->record = rec_linear_fwd;
        OUT(c, bt * oc), IN(c, bt * ic), IN(c, oc * ic), IN(c, oc);
        set_row(row, "matmul", "forward", true, 2 * BT * IC * OC,
                4 * (BT * IC + OC * IC + BT * OC + (c->d[3] ? OC : 0)));
        c->tol = 1e-6 * (IC + 8);
    } else {
        c->record = rec_linear_bwd;
        OUT(c, bt * ic), ACC(c, oc * ic), IN(c, bt * oc), IN(c, oc * ic), IN(c, bt * ic);
        set_row(row, "matmul", "backward", true, 4 * BT * IC * OC,
                4 * (BT * OC + 3 * OC * IC + 2 * BT * IC));
        c->tol = 1e-6 * (fmax(BT, OC) + 8);
    }
    snprintf(row->shape, sizeof row->shape, "BT=%d IC=%d OC=%d%s", c->d[0], c->d[1], c->d[2],
             c->d[3] ? " +bias" : "");
    row->series = "matmul_model";
    row->x = cbrt(BT * IC * OC);
}

static void describe_attention(kc_case *c, bench_row *row) {
    int B = c->d[0], T = c->d[1], NH = c->d[2], HS = c->d[3];
    size_t btc = (size_t)B * T * NH * HS, att = (size_t)B * NH * T * T;
    double BTC = (double)btc, ATT = (double)att, flop = 4.0 * ATT * HS;
    if (c->op == OP_ATTN_FWD) {
        c->record = rec_attn_fwd;
        OUT(c, btc), IN(c, 3 * btc), SCRATCH(c, btc), SCRATCH(c, btc), SCRATCH(c, btc);
        SCRATCH(c, att), SCRATCH(c, att), SCRATCH(c, btc);
        set_row(row, "attention", "forward", true, flop, 4 * (4 * BTC + ATT));
    } else {
        c->record = rec_attn_bwd;
        OUT(c, 3 * btc), IN(c, btc), IN(c, btc), IN(c, btc), IN(c, btc);
        add_t(c, att, KC_POSITIVE, false); /* att: probabilities */
        for (int i = 0; i < 4; i++) SCRATCH(c, btc);
        SCRATCH(c, att), SCRATCH(c, att);
        set_row(row, "attention", "backward", true, 2 * flop, 4 * (7 * BTC + ATT));
    }
    snprintf(row->shape, sizeof row->shape, "B=%d T=%d NH=%d HS=%d", B, T, NH, HS);
    c->tol = 4e-6 * (T + HS + 8);
}

/* The fused op: the same work is counted as for the composed path (4 B NH T^2 HS forward,
 * twice that backward, every key of every row, though causal needs about half), so the two
 * rates of one shape compare as their times do; bytes are what it must move (no T x T). */
static void describe_fused(kc_case *c, bench_row *row) {
    int B = c->d[0], T = c->d[1], NH = c->d[2], HS = c->d[3];
    size_t btc = (size_t)B * T * NH * HS, bnht = (size_t)B * NH * T;
    double BTC = (double)btc, flop = 4.0 * B * NH * (double)T * T * HS;
    if (c->op == OP_FUSED_FWD) {
        c->record = rec_fused_fwd;
        OUT(c, btc), IN(c, 3 * btc), OUT(c, bnht);
        set_row(row, "attention", "forward", true, flop, 4 * (4 * BTC + (double)bnht));
    } else {
        c->record = rec_fused_bwd;
        IN(c, btc), IN(c, 3 * btc), IN(c, bnht), OUT(c, 3 * btc), IN(c, btc);
        set_row(row, "attention", "backward", true, 2 * flop, 4 * (9 * BTC + (double)bnht));
    }
    snprintf(row->shape, sizeof row->shape, "B=%d T=%d NH=%d HS=%d fused", B, T, NH, HS);
    row->series = c->op == OP_FUSED_FWD ? "attention_fused_forward" : "attention_fused_backward";
    row->x = T;
    c->tol = 4e-6 * (T + HS + 8);
}

static void describe_softmax(kc_case *c, bench_row *row) {
    int BNH = c->d[0], T = c->d[1];
    size_t n = (size_t)BNH * T * T;
    double rows = (double)BNH * T, half = (double)BNH * T * (T + 1) / 2.0;
    if (c->op == OP_SOFTMAX_FWD) {
        c->record = rec_softmax_fwd;
        OUT(c, n), IN(c, n);
        c->t[1].scale = 4.0f;
        /* causal: the masked inputs are never needed; every output is written */
        set_row(row, "softmax", "forward", false, 0, 4 * (half + rows * T));
        row->series = "softmax_forward";
    } else {
        c->record = rec_softmax_bwd;
        ACC(c, n), IN(c, n), add_t(c, n, KC_POSITIVE, false);
        set_row(row, "softmax", "backward", false, 0, 16 * rows * T);
        row->series = "softmax_backward";
    }
    snprintf(row->shape, sizeof row->shape, "B*NH=%d T=%d causal", BNH, T);
    row->x = T;
    c->tol = 1e-5;
}

static void describe_permute(kc_case *c, bench_row *row) {
    size_t btc = (size_t)c->d[0] * c->d[1] * c->d[2] * c->d[3];
    double BTC = (double)btc;
    switch (c->op) {
    case OP_PERMUTE_FWD:
        c->record = rec_permute_fwd;
        OUT(c, btc), OUT(c, btc), OUT(c, btc), IN(c, 3 * btc);
        set_row(row, "permute", "forward", false, 0, 4 * 6 * BTC);
        break;
    case OP_PERMUTE_BWD:
        c->record = rec_permute_bwd;
        ACC(c, 3 * btc), IN(c, btc), IN(c, btc), IN(c, btc);
        set_row(row, "permute", "backward", false, 0, 4 * 9 * BTC);
        break;
    case OP_UNPERMUTE_FWD:
        c->record = rec_unpermute_fwd;
        OUT(c, btc), IN(c, btc);
        set_row(row, "permute", "forward", false, 0, 4 * 2 * BTC);
        break;
    default: /* OP_UNPERMUTE_BWD */
        c->record = rec_unpermute_bwd;
        ACC(c, btc), IN(c, btc);
        set_row(row, "permute", "backward", false, 0, 4 * 3 * BTC);
        break;
    }
    snprintf(row->shape, sizeof row->shape, "B=%d T=%d NH=%d HS=%d", c->d[0], c->d[1], c->d[2],
             c->d[3]);
    c->tol = 1e-6;
}

static void describe_layernorm(kc_case *c, bench_row *row) {
    size_t N = (size_t)c->d[0], C = (size_t)c->d[1];
    double n = (double)N, ch = (double)C;
    if (c->op == OP_LAYERNORM_FWD) {
        c->record = rec_layernorm_fwd;
        OUT(c, N * C), OUT(c, N), OUT(c, N), IN(c, N * C), IN(c, C), IN(c, C);
        set_row(row, "layernorm", "forward", false, 0, 4 * (2 * n * ch + 2 * ch + 2 * n));
        c->tol = 1e-5;
    } else {
        c->record = rec_layernorm_bwd;
        ACC(c, N * C), ACC(c, C), ACC(c, C), IN(c, N * C), IN(c, N * C), IN(c, C), IN(c, N);
        add_t(c, N, KC_POSITIVE, false); /* rstd */
        set_row(row, "layernorm", "backward", false, 0, 4 * (4 * n * ch + 5 * ch + 2 * n));
        c->tol = 1e-6 * (n + 8);
    }
    snprintf(row->shape, sizeof row->shape, "N=%d C=%d", c->d[0], c->d[1]);
}

static void describe_elementwise(kc_case *c, bench_row *row) {
    size_t N = (size_t)c->d[0];
    double n = (double)N;
    c->tol = 1e-5;
    switch (c->op) {
    case OP_GELU_FWD:
        c->record = rec_gelu_fwd;
        OUT(c, N), IN(c, N);
        c->t[1].scale = 4.0f;
        set_row(row, "gelu", "forward", false, 0, 4 * 2 * n);
        break;
    case OP_GELU_BWD:
        c->record = rec_gelu_bwd;
        ACC(c, N), IN(c, N), IN(c, N);
        set_row(row, "gelu", "backward", false, 0, 4 * 4 * n);
        break;
    case OP_RESIDUAL_FWD:
        c->record = rec_residual_fwd;
        OUT(c, N), IN(c, N), IN(c, N);
        set_row(row, "residual", "forward", false, 0, 4 * 3 * n);
        break;
    case OP_RESIDUAL_BWD:
        c->record = rec_residual_bwd;
        ACC(c, N), IN(c, N);
        set_row(row, "residual", "backward", false, 0, 4 * 3 * n);
        break;
    default: { /* OP_ADAMW */
        c->record = rec_adamw;
        ACC(c, N), IN(c, N), ACC(c, N), add_t(c, N, KC_POSITIVE, true);
        add_t(c, VKA_HYPER_COUNT, KC_HYPER, false), add_t(c, 2, KC_GSCALE, false);
        set_row(row, "adamw", "update", false, 0, 4 * 7 * n);
        break;
    }
    }
    snprintf(row->shape, sizeof row->shape, "N=%d", c->d[0]);
}

static void describe_reduction(kc_case *c, bench_row *row) {
    size_t N = (size_t)c->d[0];
    double n = N, v = c->d[1], vp = c->d[2];
    switch (c->op) {
    case OP_BIAS_BWD: /* d: N, OC */
        c->record = rec_bias_bwd;
        ACC(c, (size_t)c->d[1]), IN(c, N * (size_t)c->d[1]);
        set_row(row, "bias_backward", "backward", false, 0, 4 * (n * v + 2 * v));
        snprintf(row->shape, sizeof row->shape, "N=%d OC=%d", c->d[0], c->d[1]);
        c->tol = 1e-6 * (n + 8);
        return;
    case OP_CE_FWD: /* d: N, V, Vp; only the V real columns are read */
        c->record = rec_ce_fwd;
        OUT(c, N), IN(c, N * (size_t)c->d[2]);
        add_t(c, N, KC_IDS, false);
        set_row(row, "crossentropy", "forward", false, 0, 4 * (n * v + 2 * n));
        break;
    default: /* OP_CE_BWD: writes every column, padding included */
        c->record = rec_ce_bwd;
        OUT(c, N * (size_t)c->d[2]), IN(c, N * (size_t)c->d[2]);
        add_t(c, N, KC_IDS, false);
        set_row(row, "crossentropy", "backward", false, 0, 4 * (n * v + n + n * vp));
        break;
    }
    c->t[1].scale = 5.0f;
    c->t[2].ids_max = c->d[1];
    snprintf(row->shape, sizeof row->shape, "N=%d V=%d Vp=%d", c->d[0], c->d[1], c->d[2]);
    c->tol = 1e-5;
}

static void describe(kc_case *c, bench_row *row) {
    switch (c->op) {
    case OP_MATMUL: case OP_MATMUL_BF16: case OP_MATMUL_F16: case OP_LINEAR_FWD:
    case OP_LINEAR_BWD:
        describe_matmul(c, row);
        break;
    case OP_ATTN_FWD: case OP_ATTN_BWD: describe_attention(c, row); break;
    case OP_SOFTMAX_FWD: case OP_SOFTMAX_BWD: describe_softmax(c, row); break;
    case OP_FUSED_FWD: case OP_FUSED_BWD: describe_fused(c, row); break;
    case OP_PERMUTE_FWD: case OP_PERMUTE_BWD: case OP_UNPERMUTE_FWD: case OP_UNPERMUTE_BWD:
        describe_permute(c, row);
        break;
    case OP_LAYERNORM_FWD: case OP_LAYERNORM_BWD: describe_layernorm(c, row); break;
    case OP_BIAS_BWD: case OP_CE_FWD: case OP_CE_BWD: describe_reduction(c, row); break;
    default: describe_elementwise(c, row); break;
    }
}

/* --- the tables ------------------------------------------------------------------------------ */

/* Model shapes the per-layer cases take: a training step of the model at (B, T). */
static const struct {
    int model, B, T;
    bool quick;
} shapes[] = {
    {BM_DEFAULT, 12, 64, true}, /* vkattn train's defaults */
    {BM_GPT2S, 4, 256, false},
};
/* A block's linear layers: OC and IC in units of C. */
static const struct {
    const char *name;
    int oc, ic;
} linears[] = {{"qkv", 3, 1}, {"attproj", 1, 1}, {"fc", 4, 1}, {"fcproj", 1, 4}};
static const struct {
    int n;
    bool quick;
} squares[] = {{256, true}, {512, true}, {1024, true}, {2048, false}, {4096, false}};
static const struct {
    int T;
    bool quick;
} softmax_lengths[] = {{64, true}, {128, false}, {256, true}, {512, false}, {1024, true},
                       {2048, false}};
/* Attention lengths, fused next to composed, at B*T = 4096, NH 4, HS 64. */
static const struct {
    int T;
    bool quick;
} attention_lengths[] = {{64, true}, {256, true}, {1024, false}, {4096, false}};
/* Softmax rows: B*NH = 2^22 / T^2 matrices (at most 48), so every case moves about as much. */
static int softmax_bnh(int T) {
    int bnh = (1 << 22) / (T * T);
    return bnh < 1 ? 1 : bnh > 48 ? 48 : bnh;
}

typedef struct emitter {
    bool quick;
    kc_case *cases;
    bench_row *rows;
    int n, cap;
} emitter;

static void emit(emitter *e, int op, bool quick, const char *name, int d0, int d1, int d2, int d3) {
    if ((e->quick && !quick) || e->n >= e->cap) return;
    kc_case *c = &e->cases[e->n];
    bench_row *row = &e->rows[e->n];
    memset(row, 0, sizeof *row);
    *c = (kc_case){.op = op, .d = {d0, d1, d2, d3}};
    describe(c, row);
    snprintf(row->name, sizeof row->name, "%s", name);
    snprintf(row->id, sizeof row->id, "%s/%s/%s", row->kind, name, row->pass);
    e->n++;
}

static void emit_matmuls(emitter *e) {
    char name[48];
    for (size_t i = 0; i < sizeof squares / sizeof squares[0]; i++) {
        int n = squares[i].n;
        snprintf(name, sizeof name, "square.%d", n);
        emit(e, OP_MATMUL, squares[i].quick, name, n, n, n, 0);
        snprintf(name, sizeof name, "bf16.square.%d", n);
        emit(e, OP_MATMUL_BF16, squares[i].quick, name, n, n, n, 0);
        snprintf(name, sizeof name, "f16.square.%d", n);
        emit(e, OP_MATMUL_F16, squares[i].quick, name, n, n, n, 0);
    }
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const bench_model *m = &bench_models[shapes[s].model];
        int BT = shapes[s].B * shapes[s].T, C = m->C, Vp = bench_padded_vocab(m);
        bool q = shapes[s].quick;
        for (size_t l = 0; l < sizeof linears / sizeof linears[0]; l++) {
            snprintf(name, sizeof name, "%s.%s", m->name, linears[l].name);
            emit(e, OP_LINEAR_FWD, q, name, BT, linears[l].ic * C, linears[l].oc * C, 1);
            emit(e, OP_LINEAR_BWD, q, name, BT, linears[l].ic * C, linears[l].oc * C, 0);
        }
        /* the LM head, tied to wte: logits (BT, Vp) = lnf . wte^T */
        snprintf(name, sizeof name, "%s.lm_head", m->name);
        emit(e, OP_LINEAR_FWD, q, name, BT, C, Vp, 0);
        emit(e, OP_LINEAR_BWD, q, name, BT, C, Vp, 0);
    }
    /* GPT-2's own vocabulary: the largest matmul of a GPT-2 small step */
    const bench_model *m = &bench_models[BM_GPT2S_V50257];
    snprintf(name, sizeof name, "%s.lm_head", m->name);
    emit(e, OP_LINEAR_FWD, false, name, 4 * 256, m->C, bench_padded_vocab(m), 0);
    emit(e, OP_LINEAR_BWD, false, name, 4 * 256, m->C, bench_padded_vocab(m), 0);
}

/* Per-layer cases of each model shape, op by op (shape.name is the model's name). */
static void emit_layers(emitter *e, int op_fwd, int op_bwd) {
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const bench_model *m = &bench_models[shapes[s].model];
        int B = shapes[s].B, T = shapes[s].T, BT = B * T, C = m->C, NH = m->NH;
        int Vp = bench_padded_vocab(m);
        bool q = shapes[s].quick;
        for (int op = op_fwd; op <= op_bwd; op++) {
            switch (op) {
            case OP_LAYERNORM_FWD: case OP_LAYERNORM_BWD:
                emit(e, op, q, m->name, BT, C, 0, 0);
                break;
            case OP_GELU_FWD: case OP_GELU_BWD: emit(e, op, q, m->name, BT * 4 * C, 0, 0, 0); break;
            case OP_RESIDUAL_FWD: case OP_RESIDUAL_BWD:
                emit(e, op, q, m->name, BT * C, 0, 0, 0);
                break;
            case OP_BIAS_BWD: emit(e, op, q, m->name, BT, 4 * C, 0, 0); break; /* fc's bias */
            case OP_CE_FWD: case OP_CE_BWD: emit(e, op, q, m->name, BT, m->V, Vp, 0); break;
            case OP_ADAMW: emit(e, op, q, m->name, (int)bench_model_params(m, T), 0, 0, 0); break;
            case OP_UNPERMUTE_FWD: case OP_UNPERMUTE_BWD: {
                char name[48];
                snprintf(name, sizeof name, "%s.unpermute", m->name);
                emit(e, op, q, name, B, T, NH, C / NH);
                break;
            }
            default: emit(e, op, q, m->name, B, T, NH, C / NH); break; /* attention, permute */
            }
        }
    }
}

int kc_enumerate(bool quick, kc_case *cases, bench_row *rows, int cap) {
    emitter e = {.quick = quick, .cases = cases, .rows = rows, .cap = cap};
    emit_matmuls(&e);
    emit_layers(&e, OP_ATTN_FWD, OP_ATTN_BWD);
    char name[48];
    for (size_t i = 0; i < sizeof attention_lengths / sizeof attention_lengths[0]; i++) {
        int T = attention_lengths[i].T, B = 4096 / T;
        bool q = attention_lengths[i].quick;
        snprintf(name, sizeof name, "fused.T%d", T);
        emit(&e, OP_FUSED_FWD, q, name, B, T, 4, 64);
        emit(&e, OP_FUSED_BWD, q, name, B, T, 4, 64);
        snprintf(name, sizeof name, "composed.T%d", T);
        for (int op = OP_ATTN_FWD; op <= OP_ATTN_BWD; op++) {
            int n = e.n;
            emit(&e, op, q, name, B, T, 4, 64);
            if (e.n > n) {
                e.rows[n].series = op == OP_ATTN_FWD ? "attention_composed_forward"
                                                     : "attention_composed_backward";
                e.rows[n].x = T;
            }
        }
    }
    for (size_t i = 0; i < sizeof softmax_lengths / sizeof softmax_lengths[0]; i++) {
        int T = softmax_lengths[i].T;
        snprintf(name, sizeof name, "T%d", T);
        emit(&e, OP_SOFTMAX_FWD, softmax_lengths[i].quick, name, softmax_bnh(T), T, 0, 0);
        emit(&e, OP_SOFTMAX_BWD, softmax_lengths[i].quick, name, softmax_bnh(T), T, 0, 0);
    }
    emit_layers(&e, OP_PERMUTE_FWD, OP_UNPERMUTE_BWD);
    emit_layers(&e, OP_LAYERNORM_FWD, OP_BIAS_BWD);
    emit_layers(&e, OP_CE_FWD, OP_CE_BWD);
    const bench_model *m = &bench_models[BM_GPT2S_V50257];
    emit(&e, OP_CE_FWD, false, m->name, 4 * 256, m->V, bench_padded_vocab(m), 0);
    emit(&e, OP_CE_BWD, false, m->name, 4 * 256, m->V, bench_padded_vocab(m), 0);
    emit_layers(&e, OP_ADAMW, OP_ADAMW);
    return e.n;
}
