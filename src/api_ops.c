/* Public ops (include/vkattn.h): each validates its arguments -- recording, tensors present and
 * of this context, sizes positive, products without overflow, every tensor holding the elements
 * its shape needs -- then records the backend op into the graph being recorded. A rejected op
 * marks the graph failed (vka_graph_end returns the first error) and says exactly what is wrong:
 *   "vka_softmax_forward: inp holds 100 elements but R*Tk = 6*20 = 120 are needed" */
#include "api.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The validation state of one op call: the first failed check writes the message. */
typedef struct chk {
    vka_context *ctx;
    const char *op;
    vka_result r;
} chk;

/* Elements a tensor must hold, with the expression that gave them for messages. */
typedef struct need_t {
    uint64_t n;
    bool overflow;
    char expr[200]; /* "R*Tk = 6*20", or just "N" for a single size */
} need_t;

static void chk_fail(chk *c, vka_result r, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void chk_fail(chk *c, vka_result r, const char *fmt, ...) {
    if (c->r != VKA_SUCCESS) return;
    char msg[VKA_ERROR_MAX - 64];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    c->r = vka_set_error(c->ctx, r, "%s: %s", c->op, msg);
}

/* Start an op: the context is usable and a graph is being recorded. */
static chk chk_start(vka_context *ctx, const char *op) {
    chk c = {ctx, op, vka_context_usable(ctx, op)};
    if (c.r == VKA_SUCCESS && !ctx->recording) {
        chk_fail(&c, VKA_ERROR_INVALID_ARGUMENT,
                 "called outside vka_graph_begin/vka_graph_end");
    }
    return c;
}

static void chk_positive(chk *c, const char *name, int64_t v) {
    if (v <= 0) chk_fail(c, VKA_ERROR_INVALID_ARGUMENT, "%s = %lld must be positive", name,
                         (long long)v);
}

static void chk_nonzero(chk *c, const char *name, size_t v) {
    if (v == 0) chk_fail(c, VKA_ERROR_INVALID_ARGUMENT, "%s = 0 must be positive", name);
}

/* t is a tensor of this context (required unless optional). */
static bool chk_tensor(chk *c, const vka_tensor *t, const char *name, bool optional) {
    if (c->r != VKA_SUCCESS) return false;
    if (!t) {
        if (!optional) chk_fail(c, VKA_ERROR_INVALID_ARGUMENT, "%s is NULL", name);
        return false;
    }
    if (t->ctx != c->ctx) {
        chk_fail(c, VKA_ERROR_INVALID_ARGUMENT, "%s belongs to another context", name);
        return false;
    }
    /* The graph remembers the tensor, so that destroying it stops the graph from running.
     * (Public tensors are never const objects; const only says what the op does to them.) */
    if (!vka_graph_note_use(c->ctx->recording, (vka_tensor *)t)) {
        chk_fail(c, VKA_ERROR_OUT_OF_HOST_MEMORY, "out of host memory listing the graph's "
                 "tensors");
        return false;
    }
    return true;
}

/* t (required) holds need.n elements. */
static void chk_holds(chk *c, const vka_tensor *t, const char *name, need_t need) {
    if (!chk_tensor(c, t, name, false)) return;
    if (need.overflow) {
        chk_fail(c, VKA_ERROR_INVALID_ARGUMENT, "%s: %s overflows", name, need.expr);
    } else if (t->t.n < need.n) {
        chk_fail(c, VKA_ERROR_INVALID_ARGUMENT, "%s holds %zu elements but %s%s%llu are needed",
                 name, t->t.n, need.expr, need.expr[0] ? " = " : "", (unsigned long long)need.n);
    }
}

/* t, if not NULL, holds need.n elements. */
static void chk_holds_opt(chk *c, const vka_tensor *t, const char *name, need_t need) {
    if (t) chk_holds(c, t, name, need);
}

static bool mul_overflows(uint64_t a, uint64_t b, uint64_t *out) {
    if (a && b > UINT64_MAX / a) return true;
    *out = a * b;
    return false;
}

/* The product of count factors named by names ("R*Tk"); non-positive factors give 0 (they are
 * reported by chk_positive). */
static need_t need_prod(const char *names, const int64_t *f, int count) {
    need_t nd = {1, false, ""};
    char vals[120] = "";
    size_t len = 0;
    for (int i = 0; i < count; i++) {
        uint64_t v = f[i] > 0 ? (uint64_t)f[i] : 0;
        if (!nd.overflow) nd.overflow = mul_overflows(nd.n, v, &nd.n);
        if (len < sizeof vals)
            len += (size_t)snprintf(vals + len, sizeof vals - len, "%s%lld", i ? "*" : "",
                                    (long long)f[i]);
    }
    if (count == 1) snprintf(nd.expr, sizeof nd.expr, "%s", names);
    else snprintf(nd.expr, sizeof nd.expr, "%s = %s", names, vals);
    if (nd.overflow) nd.n = UINT64_MAX;
    return nd;
}
#define NEED(names, ...)                                   \
    need_prod(names, (const int64_t[]){__VA_ARGS__},       \
              (int)(sizeof((const int64_t[]){__VA_ARGS__}) / sizeof(int64_t)))

/* n elements, named by name ("N"), or unnamed if name is NULL. */
static need_t need_n(const char *name, uint64_t n) {
    need_t nd = {n, false, ""};
    if (name) snprintf(nd.expr, sizeof nd.expr, "%s", name);
    return nd;
}

/* Span of batch matrices of rows*cols, stride elements apart (0 = packed):
 * (batch-1)*stride + rows*cols. */
static need_t need_batched(const char *mat, const char *stride_name, int batch, size_t stride,
                           int rows, int cols) {
    need_t m = NEED(mat, rows, cols);
    if (batch <= 1 || m.overflow) return m;
    uint64_t s = stride ? stride : m.n, span;
    need_t nd = {0, false, ""};
    nd.overflow = mul_overflows((uint64_t)(batch - 1), s, &span) || span > UINT64_MAX - m.n;
    nd.n = nd.overflow ? UINT64_MAX : span + m.n;
    snprintf(nd.expr, sizeof nd.expr, "(batch-1)*%s + %s = %d*%llu + %llu", stride ? stride_name
             : mat, mat, batch - 1, (unsigned long long)s, (unsigned long long)m.n);
    return nd;
}

/* Finish validation: a rejected op marks the graph failed. */
static bool chk_ok(chk *c) {
    if (c->r == VKA_SUCCESS) return true;
    if (c->ctx && c->ctx->recording && c->ctx->be) {
        if (c->ctx->be->status == VKA_SUCCESS) c->ctx->be->status = c->r;
        vka_graph_note_status(c->ctx);
    }
    return false;
}

/* After the backend op: its own failure (if it just failed), else success. */
static vka_result chk_done(chk *c, vka_result before) {
    vka_graph_note_status(c->ctx);
    vka_result now = c->ctx->be->status;
    return before == VKA_SUCCESS ? now : VKA_SUCCESS;
}

static vkb_tensor bt(const vka_tensor *t) { return t ? t->t : VKB_NONE; }

#define BE(c) ((c).ctx->be)
#define RUN(c, call)                              \
    do {                                          \
        vka_result before_ = BE(c)->status;       \
        call;                                     \
        return chk_done(&(c), before_);           \
    } while (0)

/* --- fill, copy, elementwise ------------------------------------------------------------------ */

vka_result vka_fill(vka_context *ctx, vka_tensor *t, float value) {
    chk c = chk_start(ctx, "vka_fill");
    chk_tensor(&c, t, "t", false);
    if (!chk_ok(&c)) return c.r;
    RUN(c, BE(c)->ops->fill(BE(c), t->t, value));
}

vka_result vka_copy(vka_context *ctx, vka_tensor *dst, const vka_tensor *src, size_t n) {
    chk c = chk_start(ctx, "vka_copy");
    chk_nonzero(&c, "n", n);
    need_t nd = need_n("n", n);
    chk_holds(&c, dst, "dst", nd);
    chk_holds(&c, src, "src", nd);
    if (!chk_ok(&c)) return c.r;
    RUN(c, BE(c)->ops->copy(BE(c), vkb_slice(dst->t, 0, n), vkb_slice(src->t, 0, n)));
}

/* The three-tensor elementwise ops: out/dst and inputs of N elements. */
static chk chk_elementwise(vka_context *ctx, const char *op, const vka_tensor *const *t,
                           const char *const *names, int count, size_t N) {
    chk c = chk_start(ctx, op);
    chk_nonzero(&c, "N", N);
    need_t nd = need_n("N", N);
    for (int i = 0; i < count; i++) chk_holds(&c, t[i], names[i], nd);
    return c;
}

vka_result vka_residual_forward(vka_context *ctx, vka_tensor *out, const vka_tensor *a,
                                const vka_tensor *b, size_t N) {
    chk c = chk_elementwise(ctx, "vka_residual_forward", (const vka_tensor *[]){out, a, b},
                            (const char *[]){"out", "a", "b"}, 3, N);
    if (!chk_ok(&c)) return c.r;
    RUN(c, BE(c)->ops->residual_forward(BE(c), out->t, a->t, b->t, N));
}

vka_result vka_add_inplace(vka_context *ctx, vka_tensor *dst, const vka_tensor *src, size_t N) {
    chk c = chk_elementwise(ctx, "vka_add_inplace", (const vka_tensor *[]){dst, src},
                            (const char *[]){"dst", "src"}, 2, N);
    if (!chk_ok(&c)) return c.r;
    RUN(c, BE(c)->ops->add_inplace(BE(c), dst->t, src->t, N));
}

vka_result vka_gelu_forward(vka_context *ctx, vka_tensor *out, const vka_tensor *inp, size_t N) {
    chk c = chk_elementwise(ctx, "vka_gelu_forward", (const vka_tensor *[]){out, inp},
                            (const char *[]){"out", "inp"}, 2, N);
    if (!chk_ok(&c)) return c.r;
    RUN(c, BE(c)->ops->gelu_forward(BE(c), out->t, inp->t, N));
}

vka_result vka_gelu_backward(vka_context *ctx, vka_tensor *dinp, const vka_tensor *inp,
                             const vka_tensor *dout, size_t N) {
    chk c = chk_elementwise(ctx, "vka_gelu_backward", (const vka_tensor *[]){dinp, inp, dout},
                            (const char *[]){"dinp", "inp", "dout"}, 3, N);
    if (!chk_ok(&c)) return c.r;
    RUN(c, BE(c)->ops->gelu_backward(BE(c), dinp->t, inp->t, dout->t, N));
}

/* --- matmul, bias_backward -------------------------------------------------------------------- */

vka_result vka_matmul(vka_context *ctx, const vka_matmul_desc *d) {
    chk c = chk_start(ctx, "vka_matmul");
    if (c.r == VKA_SUCCESS && !d) chk_fail(&c, VKA_ERROR_INVALID_ARGUMENT, "desc is NULL");
    if (c.r != VKA_SUCCESS) {
        chk_ok(&c);
        return c.r;
    }
    int batch = d->batch ? d->batch : 1;
    chk_positive(&c, "M", d->M);
    chk_positive(&c, "N", d->N);
    chk_positive(&c, "K", d->K);
    chk_positive(&c, "batch", batch);
    need_t a_n = need_batched(d->trans_a ? "K*M" : "M*K", "stride_a", batch, d->stride_a,
                              d->trans_a ? d->K : d->M, d->trans_a ? d->M : d->K);
    need_t b_n = need_batched(d->trans_b ? "N*K" : "K*N", "stride_b", batch, d->stride_b,
                              d->trans_b ? d->N : d->K, d->trans_b ? d->K : d->N);
    need_t o_n = need_batched("M*N", "stride_out", batch, d->stride_out, d->M, d->N);
    chk_holds(&c, d->out, "out", o_n);
    chk_holds(&c, d->a, "a", a_n);
    chk_holds(&c, d->b, "b", b_n);
    need_t bias_n = need_n("N", (uint64_t)(d->N > 0 ? d->N : 0));
    chk_holds_opt(&c, d->bias, "bias", bias_n);
    if (c.r == VKA_SUCCESS && (d->out == d->a || d->out == d->b))
        chk_fail(&c, VKA_ERROR_INVALID_ARGUMENT, "out must be a different tensor from a and b");
    need_t mn = NEED("M*N", d->M, d->N);
    if (c.r == VKA_SUCCESS && batch > 1 && d->stride_out && d->stride_out < mn.n)
        chk_fail(&c, VKA_ERROR_INVALID_ARGUMENT,
                 "stride_out = %zu is less than %s = %llu: the batches of out would overlap",
                 d->stride_out, mn.expr, (unsigned long long)mn.n);
    if (!chk_ok(&c)) return c.r;
    vkb_matmul mm = {
        .out = d->out->t, .a = d->a->t, .b = d->b->t, .bias = bt(d->bias),
        .M = d->M, .N = d->N, .K = d->K, .batch = batch,
        .trans_a = d->trans_a, .trans_b = d->trans_b,
        .stride_a = d->stride_a, .stride_b = d->stride_b, .stride_out = d->stride_out,
        .alpha = d->alpha != 0.0f ? d->alpha : 1.0f, .accumulate = d->accumulate,
    };
    RUN(c, BE(c)->ops->matmul(BE(c), &mm));
}

vka_result vka_bias_backward(vka_context *ctx, vka_tensor *dbias, const vka_tensor *dout, int N,
                             int OC) {
    chk c = chk_start(ctx, "vka_bias_backward");
    chk_positive(&c, "N", N);
    chk_positive(&c, "OC", OC);
    chk_holds(&c, dbias, "dbias", need_n("OC", (uint64_t)OC));
    chk_holds(&c, dout, "dout", NEED("N*OC", N, OC));
    if (!chk_ok(&c)) return c.r;
    RUN(c, BE(c)->ops->bias_backward(BE(c), dbias->t, dout->t, N, OC));
}

/* --- softmax ---------------------------------------------------------------------------------- */

vka_result vka_softmax_forward(vka_context *ctx, const vka_softmax_desc *d) {
    chk c = chk_start(ctx, "vka_softmax_forward");
    if (c.r == VKA_SUCCESS && !d) chk_fail(&c, VKA_ERROR_INVALID_ARGUMENT, "desc is NULL");
    if (c.r != VKA_SUCCESS) {
        chk_ok(&c);
        return c.r;
    }
    int Tq = d->Tq ? d->Tq : d->R, mask_rows = d->mask_rows ? d->mask_rows : 1;
    chk_positive(&c, "R", d->R);
    chk_positive(&c, "Tk", d->Tk);
    chk_positive(&c, "Tq", Tq);
    chk_positive(&c, "mask_rows", mask_rows);
    need_t n = NEED("R*Tk", d->R, d->Tk);
    chk_holds(&c, d->out, "out", n);
    chk_holds(&c, d->inp, "inp", n);
    if (d->mask && c.r == VKA_SUCCESS) {
        int mrows = d->R / mask_rows + (d->R % mask_rows != 0);
        chk_holds(&c, d->mask, "mask", NEED("ceil(R/mask_rows)*Tk", mrows, d->Tk));
    }
    if (!chk_ok(&c)) return c.r;
    vkb_softmax sm = {
        .out = d->out->t, .inp = d->inp->t, .mask = bt(d->mask),
        .R = d->R, .Tq = Tq, .Tk = d->Tk, .mask_rows = mask_rows,
        .scale = d->scale != 0.0f ? d->scale : 1.0f, .causal = d->causal,
    };
    RUN(c, BE(c)->ops->softmax_forward(BE(c), &sm));
}

vka_result vka_softmax_backward(vka_context *ctx, vka_tensor *dinp, const vka_tensor *dout,
                                const vka_tensor *out, int R, int Tk, float scale) {
    chk c = chk_start(ctx, "vka_softmax_backward");
    chk_positive(&c, "R", R);
    chk_positive(&c, "Tk", Tk);
    need_t n = NEED("R*Tk", R, Tk);
    chk_holds(&c, dinp, "dinp", n);
    chk_holds(&c, dout, "dout", n);
    chk_holds(&c, out, "out", n);
    if (!chk_ok(&c)) return c.r;
    RUN(c, BE(c)->ops->softmax_backward(BE(c), dinp->t, dout->t, out->t, R, Tk,
                                        scale != 0.0f ? scale : 1.0f));
}

/* --- permute ---------------------------------------------------------------------------------- */

/* Shared checks: qkv-side tensors hold mul*B*T*NH*HS, head-side ones B*NH*T*HS. */
static chk chk_permute(vka_context *ctx, const char *op, const vka_tensor *x, const char *x_name,
                       int mul, const vka_tensor *const *heads, const char *const *head_names,
                       int n_heads, int B, int T, int NH, int HS) {
    chk c = chk_start(ctx, op);
    chk_positive(&c, "B", B);
    chk_positive(&c, "T", T);
    chk_positive(&c, "NH", NH);
    chk_positive(&c, "HS", HS);
    chk_holds(&c, x, x_name,
              mul == 3 ? NEED("B*T*3*NH*HS", B, T, 3, NH, HS) : NEED("B*T*NH*HS", B, T, NH, HS));
    need_t hn = NEED("B*NH*T*HS", B, NH, T, HS);
    for (int i = 0; i < n_heads; i++) chk_holds(&c, heads[i], head_names[i], hn);
    return c;
}

vka_result vka_permute_forward(vka_context *ctx, vka_tensor *q, vka_tensor *k, vka_tensor *v,
                               const vka_tensor *inp, int B, int T, int NH, int HS) {
    chk c = chk_permute(ctx, "vka_permute_forward", inp, "inp", 3,
                        (const vka_tensor *[]){q, k, v}, (const char *[]){"q", "k", "v"}, 3, B, T,
                        NH, HS);
    if (!chk_ok(&c)) return c.r;
    RUN(c, BE(c)->ops->permute_forward(BE(c), q->t, k->t, v->t, inp->t, B, T, NH, HS));
}

vka_result vka_permute_backward(vka_context *ctx, vka_tensor *dinp, const vka_tensor *dq,
                                const vka_tensor *dk, const vka_tensor *dv, int B, int T, int NH,
                                int HS) {
    chk c = chk_permute(ctx, "vka_permute_backward", dinp, "dinp", 3,
                        (const vka_tensor *[]){dq, dk, dv}, (const char *[]){"dq", "dk", "dv"}, 3,
                        B, T, NH, HS);
    if (!chk_ok(&c)) return c.r;
    RUN(c, BE(c)->ops->permute_backward(BE(c), dinp->t, dq->t, dk->t, dv->t, B, T, NH, HS));
}

vka_result vka_unpermute_forward(vka_context *ctx, vka_tensor *out, const vka_tensor *inp, int B,
                                 int T, int NH, int HS) {
    chk c = chk_permute(ctx, "vka_unpermute_forward", out, "out", 1, (const vka_tensor *[]){inp},
                        (const char *[]){"inp"}, 1, B, T, NH, HS);
    if (!chk_ok(&c)) return c.r;
    RUN(c, BE(c)->ops->unpermute_forward(BE(c), out->t, inp->t, B, T, NH, HS));
}

vka_result vka_unpermute_backward(vka_context *ctx, vka_tensor *dinp, const vka_tensor *dout,
                                  int B, int T, int NH, int HS) {
    chk c = chk_permute(ctx, "vka_unpermute_backward", dout, "dout", 1,
                        (const vka_tensor *[]){dinp}, (const char *[]){"dinp"}, 1, B, T, NH, HS);
    if (!chk_ok(&c)) return c.r;
    RUN(c, BE(c)->ops->unpermute_backward(BE(c), dinp->t, dout->t, B, T, NH, HS));
}

/* --- kv_write --------------------------------------------------------------------------------- */

vka_result vka_kv_write(vka_context *ctx, vka_tensor *kcache, vka_tensor *vcache,
                        const vka_tensor *qkv, const vka_tensor *pos, int T, int NH, int HS,
                        int max_T) {
    chk c = chk_start(ctx, "vka_kv_write");
    chk_positive(&c, "T", T);
    chk_positive(&c, "NH", NH);
    chk_positive(&c, "HS", HS);
    chk_positive(&c, "max_T", max_T);
    need_t cache = NEED("NH*max_T*HS", NH, max_T, HS);
    chk_holds(&c, kcache, "kcache", cache);
    chk_holds(&c, vcache, "vcache", cache);
    chk_holds(&c, qkv, "qkv", NEED("T*3*NH*HS", T, 3, NH, HS));
    chk_holds(&c, pos, "pos", need_n("2", 2));
    if (!chk_ok(&c)) return c.r;
    RUN(c, BE(c)->ops->kv_write(BE(c), kcache->t, vcache->t, qkv->t, pos->t, T, NH, HS, max_T));
}

/* --- layernorm -------------------------------------------------------------------------------- */

vka_result vka_layernorm_forward(vka_context *ctx, vka_tensor *out, vka_tensor *mean,
                                 vka_tensor *rstd, const vka_tensor *inp,
                                 const vka_tensor *weight, const vka_tensor *bias, int N, int C) {
    chk c = chk_start(ctx, "vka_layernorm_forward");
    chk_positive(&c, "N", N);
    chk_positive(&c, "C", C);
    need_t nc = NEED("N*C", N, C), n = need_n("N", (uint64_t)N), cn = need_n("C", (uint64_t)C);
    chk_holds(&c, out, "out", nc);
    chk_holds(&c, mean, "mean", n);
    chk_holds(&c, rstd, "rstd", n);
    chk_holds(&c, inp, "inp", nc);
    chk_holds(&c, weight, "weight", cn);
    chk_holds(&c, bias, "bias", cn);
    if (!chk_ok(&c)) return c.r;
    RUN(c, BE(c)->ops->layernorm_forward(BE(c), out->t, mean->t, rstd->t, inp->t, weight->t,
                                         bias->t, N, C));
}

vka_result vka_layernorm_backward(vka_context *ctx, vka_tensor *dinp, vka_tensor *dweight,
                                  vka_tensor *dbias, const vka_tensor *dout,
                                  const vka_tensor *inp, const vka_tensor *weight,
                                  const vka_tensor *mean, const vka_tensor *rstd, int N, int C) {
    chk c = chk_start(ctx, "vka_layernorm_backward");
    chk_positive(&c, "N", N);
    chk_positive(&c, "C", C);
    need_t nc = NEED("N*C", N, C), n = need_n("N", (uint64_t)N), cn = need_n("C", (uint64_t)C);
    chk_holds(&c, dinp, "dinp", nc);
    chk_holds(&c, dweight, "dweight", cn);
    chk_holds(&c, dbias, "dbias", cn);
    chk_holds(&c, dout, "dout", nc);
    chk_holds(&c, inp, "inp", nc);
    chk_holds(&c, weight, "weight", cn);
    chk_holds(&c, mean, "mean", n);
    chk_holds(&c, rstd, "rstd", n);
    if (!chk_ok(&c)) return c.r;
    RUN(c, BE(c)->ops->layernorm_backward(BE(c), dinp->t, dweight->t, dbias->t, dout->t, inp->t,
                                          weight->t, mean->t, rstd->t, N, C));
}

/* --- encoder ---------------------------------------------------------------------------------- */

vka_result vka_encoder_forward(vka_context *ctx, vka_tensor *out, const vka_tensor *tokens,
                               const vka_tensor *wte, const vka_tensor *wpe, int B, int T, int C) {
    chk c = chk_start(ctx, "vka_encoder_forward");
    chk_positive(&c, "B", B);
    chk_positive(&c, "T", T);
    chk_positive(&c, "C", C);
    chk_holds(&c, out, "out", NEED("B*T*C", B, T, C));
    chk_holds(&c, tokens, "tokens", NEED("B*T", B, T));
    chk_holds(&c, wte, "wte", need_n("C (one row)", (uint64_t)C));
    chk_holds(&c, wpe, "wpe", NEED("T*C", T, C));
    if (!chk_ok(&c)) return c.r;
    RUN(c, BE(c)->ops->encoder_forward(BE(c), out->t, tokens->t, wte->t, wpe->t, B, T, C));
}

vka_result vka_encoder_backward(vka_context *ctx, vka_tensor *dwte, vka_tensor *dwpe,
                                const vka_tensor *dout, const vka_tensor *tokens,
                                const vka_tensor *buckets, int B, int T, int C) {
    chk c = chk_start(ctx, "vka_encoder_backward");
    chk_positive(&c, "B", B);
    chk_positive(&c, "T", T);
    chk_positive(&c, "C", C);
    need_t bt_n = NEED("B*T", B, T);
    chk_holds(&c, dwte, "dwte", need_n("C (one row)", (uint64_t)C));
    chk_holds(&c, dwpe, "dwpe", NEED("T*C", T, C));
    chk_holds(&c, dout, "dout", NEED("B*T*C", B, T, C));
    chk_holds(&c, tokens, "tokens", bt_n);
    if (c.r == VKA_SUCCESS && !bt_n.overflow) {
        need_t bk = {VKA_BUCKETS_SIZE(bt_n.n), false, ""};
        snprintf(bk.expr, sizeof bk.expr, "VKA_BUCKETS_SIZE(B*T) = 3*%llu + 2",
                 (unsigned long long)bt_n.n);
        chk_holds(&c, buckets, "buckets", bk);
    }
    if (!chk_ok(&c)) return c.r;
    RUN(c, BE(c)->ops->encoder_backward(BE(c), dwte->t, dwpe->t, dout->t, tokens->t, buckets->t,
                                        B, T, C));
}

/* --- crossentropy ----------------------------------------------------------------------------- */

static chk chk_crossentropy(vka_context *ctx, const char *op, const vka_tensor *out,
                            const char *out_name, bool out_rows, const vka_tensor *logits,
                            const vka_tensor *targets, int N, int V, int Vp) {
    chk c = chk_start(ctx, op);
    chk_positive(&c, "N", N);
    chk_positive(&c, "V", V);
    chk_positive(&c, "Vp", Vp);
    if (c.r == VKA_SUCCESS && V > Vp)
        chk_fail(&c, VKA_ERROR_INVALID_ARGUMENT, "V = %d exceeds Vp = %d", V, Vp);
    need_t nvp = NEED("N*Vp", N, Vp), n = need_n("N", (uint64_t)N);
    chk_holds(&c, out, out_name, out_rows ? nvp : n);
    chk_holds(&c, logits, "logits", nvp);
    chk_holds(&c, targets, "targets", n);
    return c;
}

vka_result vka_crossentropy_forward(vka_context *ctx, vka_tensor *losses,
                                    const vka_tensor *logits, const vka_tensor *targets, int N,
                                    int V, int Vp) {
    chk c = chk_crossentropy(ctx, "vka_crossentropy_forward", losses, "losses", false, logits,
                             targets, N, V, Vp);
    if (!chk_ok(&c)) return c.r;
    RUN(c, BE(c)->ops->crossentropy_forward(BE(c), losses->t, logits->t, targets->t, N, V, Vp));
}

vka_result vka_crossentropy_backward(vka_context *ctx, vka_tensor *dlogits,
                                     const vka_tensor *logits, const vka_tensor *targets,
                                     float dloss, int N, int V, int Vp) {
    chk c = chk_crossentropy(ctx, "vka_crossentropy_backward", dlogits, "dlogits", true, logits,
                             targets, N, V, Vp);
    if (!chk_ok(&c)) return c.r;
    RUN(c, BE(c)->ops->crossentropy_backward(BE(c), dlogits->t, logits->t, targets->t, dloss,
                                             VKB_NONE, N, V, Vp));
}

/* --- mean, grad_norm, adamw ------------------------------------------------------------------- */

vka_result vka_mean(vka_context *ctx, vka_tensor *out, const vka_tensor *inp, size_t N) {
    chk c = chk_start(ctx, "vka_mean");
    chk_nonzero(&c, "N", N);
    chk_holds(&c, out, "out", need_n(NULL, 1));
    chk_holds(&c, inp, "inp", need_n("N", N));
    if (!chk_ok(&c)) return c.r;
    RUN(c, BE(c)->ops->mean(BE(c), out->t, inp->t, N));
}

vka_result vka_grad_norm(vka_context *ctx, vka_tensor *out, vka_tensor *partials,
                         const vka_tensor *const *grads, int count, float max_norm) {
    chk c = chk_start(ctx, "vka_grad_norm");
    chk_positive(&c, "count", count);
    if (c.r == VKA_SUCCESS && !grads) chk_fail(&c, VKA_ERROR_INVALID_ARGUMENT, "grads is NULL");
    chk_holds(&c, out, "out", need_n(NULL, 2));
    chk_holds(&c, partials, "partials", NEED("count*VKA_NORM_PARTIALS", count, VKA_NORM_PARTIALS));
    for (int i = 0; c.r == VKA_SUCCESS && i < count; i++) {
        char name[32];
        snprintf(name, sizeof name, "grads[%d]", i);
        chk_tensor(&c, grads[i], name, false);
    }
    vkb_tensor *list = NULL;
    if (c.r == VKA_SUCCESS) {
        list = vka_malloc(ctx, (size_t)count * sizeof *list);
        if (!list) chk_fail(&c, VKA_ERROR_OUT_OF_HOST_MEMORY, "out of memory");
    }
    if (!chk_ok(&c)) return c.r;
    for (int i = 0; i < count; i++) list[i] = grads[i]->t;
    vka_result before = BE(c)->status;
    BE(c)->ops->grad_norm(BE(c), out->t, partials->t, list, count, max_norm); /* copies list */
    vka_free(ctx, list);
    return chk_done(&c, before);
}

vka_result vka_adamw(vka_context *ctx, vka_tensor *param, const vka_tensor *grad, vka_tensor *m,
                     vka_tensor *v, const vka_tensor *hyper, const vka_tensor *gscale, size_t N,
                     float weight_decay) {
    chk c = chk_start(ctx, "vka_adamw");
    chk_nonzero(&c, "N", N);
    need_t n = need_n("N", N);
    chk_holds(&c, param, "param", n);
    chk_holds(&c, grad, "grad", n);
    chk_holds(&c, m, "m", n);
    chk_holds(&c, v, "v", n);
    chk_holds(&c, hyper, "hyper", need_n("VKA_HYPER_COUNT", VKA_HYPER_COUNT));
    chk_holds_opt(&c, gscale, "gscale", need_n(NULL, 2));
    if (!chk_ok(&c)) return c.r;
    RUN(c, BE(c)->ops->adamw(BE(c), param->t, grad->t, m->t, v->t, hyper->t, bt(gscale), N,
                             weight_decay));
}

/* --- attention -------------------------------------------------------------------------------- */

/* Elements of an attention tensor: q/dq (B, NH, Tq, HS), k, v (B, NH, Tk, HS), out/dout
 * (B, NH, Tq, HS) or (B, Tq, C) with out_btc, qkv/dqkv (B, T, 3C). */
typedef enum { ATT_Q, ATT_KV, ATT_OUT, ATT_QKV } att_kind;
static need_t need_attn(const vka_attention_desc *d, att_kind kind) {
    switch (kind) {
    case ATT_Q: return NEED("B*NH*Tq*HS", d->B, d->NH, d->Tq, d->HS);
    case ATT_KV: return NEED("B*NH*Tk*HS", d->B, d->NH, d->Tk, d->HS);
    case ATT_OUT:
        return d->out_btc ? NEED("B*Tq*NH*HS (out_btc)", d->B, d->Tq, d->NH, d->HS)
                          : NEED("B*NH*Tq*HS", d->B, d->NH, d->Tq, d->HS);
    default: return NEED("B*T*3*NH*HS", d->B, d->Tq, 3, d->NH, d->HS);
    }
}

/* The checks both directions share; fills *at (views, layouts, resolved scale). */
static void chk_attention(chk *c, const vka_attention_desc *d, bool backward, vkb_attention *at) {
    if (c->r == VKA_SUCCESS && !d) chk_fail(c, VKA_ERROR_INVALID_ARGUMENT, "desc is NULL");
    if (c->r != VKA_SUCCESS) return;
    chk_positive(c, "B", d->B);
    chk_positive(c, "NH", d->NH);
    chk_positive(c, "Tq", d->Tq);
    chk_positive(c, "Tk", d->Tk);
    chk_positive(c, "HS", d->HS);
    if (c->r == VKA_SUCCESS && d->HS > VKA_ATTENTION_MAX_HS)
        chk_fail(c, VKA_ERROR_INVALID_ARGUMENT, "HS = %d exceeds VKA_ATTENTION_MAX_HS = %d",
                 d->HS, VKA_ATTENTION_MAX_HS);
    if (c->r == VKA_SUCCESS && (d->causal < VKA_CAUSAL_NONE || d->causal > VKA_CAUSAL_BOTTOM_RIGHT))
        chk_fail(c, VKA_ERROR_INVALID_ARGUMENT, "causal = %d is not a vka_causal value",
                 (int)d->causal);
    if (c->r == VKA_SUCCESS && !isfinite(d->scale))
        chk_fail(c, VKA_ERROR_INVALID_ARGUMENT, "scale = %g is not finite", (double)d->scale);
    if (c->r != VKA_SUCCESS) return;
    if (d->qkv) {
        if (d->q || d->k || d->v)
            chk_fail(c, VKA_ERROR_INVALID_ARGUMENT, "give either q, k and v or qkv, not both");
        else if (d->Tq != d->Tk)
            chk_fail(c, VKA_ERROR_INVALID_ARGUMENT, "qkv needs Tq = Tk (got Tq = %d, Tk = %d)",
                     d->Tq, d->Tk);
        chk_holds(c, d->qkv, "qkv", need_attn(d, ATT_QKV));
    } else {
        if (!d->q && !d->k && !d->v)
            chk_fail(c, VKA_ERROR_INVALID_ARGUMENT, "q, k and v (or qkv) are NULL");
        chk_holds(c, d->q, "q", need_attn(d, ATT_Q));
        chk_holds(c, d->k, "k", need_attn(d, ATT_KV));
        chk_holds(c, d->v, "v", need_attn(d, ATT_KV));
    }
    chk_holds(c, d->out, "out", need_attn(d, ATT_OUT));
    need_t lse_n = NEED("B*NH*Tq", d->B, d->NH, d->Tq);
    if (backward) chk_holds(c, d->lse, "lse", lse_n);
    else chk_holds_opt(c, d->lse, "lse", lse_n);
    if (d->mask_per_batch)
        chk_holds_opt(c, d->mask, "mask", NEED("B*Tq*Tk (mask_per_batch)", d->B, d->Tq, d->Tk));
    else chk_holds_opt(c, d->mask, "mask", NEED("Tq*Tk", d->Tq, d->Tk));
    chk_holds_opt(c, d->key_lens, "key_lens", need_n("B", (uint64_t)d->B));
    /* The forward writes out and lse while it reads the rest. */
    const vka_tensor *written[] = {d->out, d->lse};
    const vka_tensor *read[] = {d->q, d->k, d->v, d->qkv, d->mask, d->key_lens};
    const char *const written_name[] = {"out", "lse"};
    for (size_t i = 0; c->r == VKA_SUCCESS && i < 2; i++)
        for (size_t j = 0; written[i] && j < sizeof read / sizeof *read; j++)
            if (written[i] == read[j])
                chk_fail(c, VKA_ERROR_INVALID_ARGUMENT, "%s must be a tensor other than the "
                         "inputs (q, k, v, qkv, mask, key_lens)", written_name[i]);
    if (c->r == VKA_SUCCESS && d->out && d->out == d->lse)
        chk_fail(c, VKA_ERROR_INVALID_ARGUMENT, "out and lse must be different tensors");
    if (c->r != VKA_SUCCESS) return;

    int NH = d->NH, HS = d->HS, Tq = d->Tq, Tk = d->Tk;
    size_t C = (size_t)NH * HS;
    *at = (vkb_attention){
        .out = d->out->t, .lse = bt(d->lse), .mask = bt(d->mask), .key_lens = bt(d->key_lens),
        .lo = d->out_btc ? vkb_attn_in_btc(NH, Tq, HS) : vkb_attn_packed(NH, Tq, HS),
        .B = d->B, .NH = NH, .Tq = Tq, .Tk = Tk, .HS = HS,
        .scale = d->scale != 0.0f ? d->scale : 1.0f / sqrtf((float)HS),
        .causal = (vkb_causal)d->causal, .mask_per_batch = d->mask_per_batch,
    };
    if (d->qkv) { /* q, k, v start at elements 0, C, 2C of each position's 3C */
        vkb_tensor x = d->qkv->t;
        at->q = x;
        at->k = vkb_slice(x, C, x.n - C);
        at->v = vkb_slice(x, 2 * C, x.n - 2 * C);
        at->lq = at->lk = at->lv = vkb_attn_in_qkv(NH, Tq, HS);
    } else {
        at->q = d->q->t;
        at->k = d->k->t;
        at->v = d->v->t;
        at->lq = vkb_attn_packed(NH, Tq, HS);
        at->lk = at->lv = vkb_attn_packed(NH, Tk, HS);
    }
}

vka_result vka_attention_forward(vka_context *ctx, const vka_attention_desc *desc) {
    chk c = chk_start(ctx, "vka_attention_forward");
    vkb_attention at = {0};
    chk_attention(&c, desc, false, &at);
    if (!chk_ok(&c)) return c.r;
    RUN(c, BE(c)->ops->attention_forward(BE(c), &at));
}

vka_result vka_attention_backward(vka_context *ctx, const vka_attention_desc *desc,
                                  const vka_attention_grads *grads) {
    chk c = chk_start(ctx, "vka_attention_backward");
    vkb_attention at = {0};
    chk_attention(&c, desc, true, &at);
    if (c.r == VKA_SUCCESS && !grads) chk_fail(&c, VKA_ERROR_INVALID_ARGUMENT, "grads is NULL");
    if (c.r == VKA_SUCCESS) {
        const vka_attention_desc *d = desc;
        chk_holds(&c, grads->dout, "dout", need_attn(d, ATT_OUT));
        if (d->qkv) {
            if (grads->dq || grads->dk || grads->dv)
                chk_fail(&c, VKA_ERROR_INVALID_ARGUMENT,
                         "the forward read qkv: give dqkv, not dq, dk, dv");
            chk_holds(&c, grads->dqkv, "dqkv", need_attn(d, ATT_QKV));
        } else {
            if (grads->dqkv)
                chk_fail(&c, VKA_ERROR_INVALID_ARGUMENT,
                         "the forward read q, k, v: give dq, dk, dv, not dqkv");
            chk_holds(&c, grads->dq, "dq", need_attn(d, ATT_Q));
            chk_holds(&c, grads->dk, "dk", need_attn(d, ATT_KV));
            chk_holds(&c, grads->dv, "dv", need_attn(d, ATT_KV));
        }
    }
    if (c.r == VKA_SUCCESS) { /* the op reads these while it writes the gradients */
        const vka_tensor *in[] = {desc->q, desc->k, desc->v, desc->qkv, desc->out, desc->lse,
                                  desc->mask, desc->key_lens, grads->dout};
        const vka_tensor *out[] = {grads->dq, grads->dk, grads->dv, grads->dqkv};
        for (size_t i = 0; i < sizeof out / sizeof *out; i++)
            for (size_t j = 0; out[i] && j < sizeof in / sizeof *in; j++)
                if (out[i] == in[j])
                    chk_fail(&c, VKA_ERROR_INVALID_ARGUMENT, "the gradients must be tensors "
                             "other than the inputs (q, k, v, qkv, out, lse, mask, key_lens, dout)");
        if ((grads->dq && (grads->dq == grads->dk || grads->dq == grads->dv)) ||
            (grads->dk && grads->dk == grads->dv))
            chk_fail(&c, VKA_ERROR_INVALID_ARGUMENT, "dq, dk and dv must be different tensors");
    }
    if (!chk_ok(&c)) return c.r;
    at.dout = grads->dout->t;
    if (desc->qkv) {
        vkb_tensor x = grads->dqkv->t;
        size_t C = (size_t)desc->NH * desc->HS;
        at.dq = x;
        at.dk = vkb_slice(x, C, x.n - C);
        at.dv = vkb_slice(x, 2 * C, x.n - 2 * C);
    } else {
        at.dq = grads->dq->t;
        at.dk = grads->dk->t;
        at.dv = grads->dv->t;
    }
    RUN(c, BE(c)->ops->attention_backward(BE(c), &at));
}
