/* Public ops (include/vkattn.h): each checks what is public -- the context usable, a graph being
 * recorded, each tensor of this context (and noted as used by the graph), a desc given -- applies
 * the desc defaults and calls the op through the one argument-check layer (be->ops, op_checks.c),
 * which checks the sizes for the model's calls as for these. A rejected op marks the graph
 * failed (vka_graph_end returns the first error) and says exactly what is wrong:
 *   "vka_softmax_forward: inp holds 100 elements but R*Tk = 6*20 = 120 are needed" */
#include "api.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The public checks of one op call: the first failed one writes the message. */
typedef struct chk {
    vka_context *ctx;
    const char *op;
    vka_result r;
} chk;

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

/* t, unless NULL (which the check layer reports where the op needs it), is a tensor of this
 * context; the graph remembers it, so that destroying it stops the graph from running.
 * (Public tensors are never const objects; const only says what the op does to them.) */
static void chk_tensor(chk *c, const vka_tensor *t, const char *name) {
    if (c->r != VKA_SUCCESS || !t) return;
    if (t->ctx != c->ctx)
        chk_fail(c, VKA_ERROR_INVALID_ARGUMENT, "%s belongs to another context", name);
    else if (!vka_graph_note_use(c->ctx->recording, (vka_tensor *)t))
        chk_fail(c, VKA_ERROR_OUT_OF_HOST_MEMORY, "out of host memory listing the graph's "
                 "tensors");
}

/* chk_tensor on count tensors t[i] named names[i]. */
static void chk_tensors(chk *c, const vka_tensor *const *t, const char *const *names, int count) {
    for (int i = 0; i < count; i++) chk_tensor(c, t[i], names[i]);
}

/* Finish the public checks: a rejected op marks the graph failed. */
static bool chk_ok(chk *c) {
    if (c->r == VKA_SUCCESS) return true;
    if (c->ctx && c->ctx->recording && c->ctx->be) {
        if (c->ctx->be->status == VKA_SUCCESS) c->ctx->be->status = c->r;
        vka_graph_note_status(c->ctx);
    }
    return false;
}

/* After the checked op: its check's error, else its backend's own failure if it just failed,
 * else success (an op after an earlier failure is ignored). */
static vka_result chk_done(chk *c, vka_result before) {
    vka_graph_note_status(c->ctx);
    vkb_backend *be = c->ctx->be;
    be->caller = NULL;
    if (be->call_status != VKA_SUCCESS) return be->call_status;
    return before == VKA_SUCCESS ? be->status : VKA_SUCCESS;
}

static vkb_tensor bt(const vka_tensor *t) { return t ? t->t : VKB_NONE; }

#define BE(c) ((c).ctx->be)
/* Call the op through the check layer (be->ops) as the public function c.op. */
#define RUN(c, call)                              \
    do {                                          \
        vka_result before_ = BE(c)->status;       \
        BE(c)->caller = (c).op;                   \
        BE(c)->call_status = VKA_SUCCESS;         \
        call;                                     \
        return chk_done(&(c), before_);           \
    } while (0)


/* --- fill, copy, elementwise ------------------------------------------------------------------ */

vka_result vka_fill(vka_context *ctx, vka_tensor *t, float value) {
    chk c = chk_start(ctx, "vka_fill");
    chk_tensor(&c, t, "t");
    if (!chk_ok(&c)) return c.r;
    RUN(c, BE(c)->ops->fill(BE(c), bt(t), value));
}

/* n is the public call's own argument, turned into the views the op copies: it is checked here,
 * where the views are made. */
static void chk_copy_n(chk *c, const vka_tensor *t, const char *name, size_t n) {
    if (c->r != VKA_SUCCESS) return;
    if (!t) chk_fail(c, VKA_ERROR_INVALID_ARGUMENT, "%s is NULL", name);
    chk_tensor(c, t, name);
    if (c->r == VKA_SUCCESS && vkb_elems(t->t) < n)
        chk_fail(c, VKA_ERROR_INVALID_ARGUMENT, "%s holds %zu elements but n = %zu are needed",
                 name, vkb_elems(t->t), n);
}

vka_result vka_copy(vka_context *ctx, vka_tensor *dst, const vka_tensor *src, size_t n) {
    chk c = chk_start(ctx, "vka_copy");
    if (c.r == VKA_SUCCESS && n == 0)
        chk_fail(&c, VKA_ERROR_INVALID_ARGUMENT, "n = 0 must be positive");
    chk_copy_n(&c, dst, "dst", n);
    chk_copy_n(&c, src, "src", n);
    if (!chk_ok(&c)) return c.r;
    if (dst->t.dtype == VKA_F32 && src->t.dtype == VKA_F32)
        RUN(c, BE(c)->ops->copy(BE(c), vkb_slice(dst->t, 0, n), vkb_slice(src->t, 0, n)));
    /* a conversion, or 16-bit elements: the op's check names a pair it does not make */
    RUN(c, BE(c)->ops->convert(BE(c), dst->t, src->t, n));
}

vka_result vka_residual_forward(vka_context *ctx, vka_tensor *out, const vka_tensor *a,
                                const vka_tensor *b, size_t N) {
    chk c = chk_start(ctx, "vka_residual_forward");
    chk_tensors(&c, (const vka_tensor *const[]){out, a, b}, (const char *const[]){"out", "a", "b"},
                3);
    if (!chk_ok(&c)) return c.r;
    RUN(c, BE(c)->ops->residual_forward(BE(c), bt(out), bt(a), bt(b), N));
}

vka_result vka_add_inplace(vka_context *ctx, vka_tensor *dst, const vka_tensor *src, size_t N) {
    chk c = chk_start(ctx, "vka_add_inplace");
    chk_tensors(&c, (const vka_tensor *const[]){dst, src}, (const char *const[]){"dst", "src"}, 2);
    if (!chk_ok(&c)) return c.r;
    RUN(c, BE(c)->ops->add_inplace(BE(c), bt(dst), bt(src), N));
}

vka_result vka_gelu_forward(vka_context *ctx, vka_tensor *out, const vka_tensor *inp, size_t N) {
    chk c = chk_start(ctx, "vka_gelu_forward");
    chk_tensors(&c, (const vka_tensor *const[]){out, inp}, (const char *const[]){"out", "inp"}, 2);
    if (!chk_ok(&c)) return c.r;
    RUN(c, BE(c)->ops->gelu_forward(BE(c), bt(out), bt(inp), N));
}

vka_result vka_gelu_backward(vka_context *ctx, vka_tensor *dinp, const vka_tensor *inp,
                             const vka_tensor *dout, size_t N) {
    chk c = chk_start(ctx, "vka_gelu_backward");
    chk_tensors(&c, (const vka_tensor *const[]){dinp, inp, dout},
                (const char *const[]){"dinp", "inp", "dout"}, 3);
    if (!chk_ok(&c)) return c.r;
    RUN(c, BE(c)->ops->gelu_backward(BE(c), bt(dinp), bt(inp), bt(dout), N));
}

/* --- matmul, bias_backward -------------------------------------------------------------------- */

vka_result vka_matmul(vka_context *ctx, const vka_matmul_desc *d) {
    chk c = chk_start(ctx, "vka_matmul");
    if (c.r == VKA_SUCCESS && !d) chk_fail(&c, VKA_ERROR_INVALID_ARGUMENT, "desc is NULL");
    if (c.r == VKA_SUCCESS)
        chk_tensors(&c, (const vka_tensor *const[]){d->out, d->a, d->b, d->bias},
                    (const char *const[]){"out", "a", "b", "bias"}, 4);
    if (!chk_ok(&c)) return c.r;
    vkb_matmul mm = {
        .out = bt(d->out), .a = bt(d->a), .b = bt(d->b), .bias = bt(d->bias),
        .M = d->M, .N = d->N, .K = d->K, .batch = d->batch ? d->batch : 1,
        .trans_a = d->trans_a, .trans_b = d->trans_b,
        .stride_a = d->stride_a, .stride_b = d->stride_b, .stride_out = d->stride_out,
        .alpha = d->alpha != 0.0f ? d->alpha : 1.0f, .accumulate = d->accumulate,
    };
    RUN(c, BE(c)->ops->matmul(BE(c), &mm));
}

vka_result vka_bias_backward(vka_context *ctx, vka_tensor *dbias, const vka_tensor *dout, int N,
                             int OC) {
    chk c = chk_start(ctx, "vka_bias_backward");
    chk_tensors(&c, (const vka_tensor *const[]){dbias, dout},
                (const char *const[]){"dbias", "dout"}, 2);
    if (!chk_ok(&c)) return c.r;
    RUN(c, BE(c)->ops->bias_backward(BE(c), bt(dbias), bt(dout), N, OC));
}

/* --- softmax ---------------------------------------------------------------------------------- */

vka_result vka_softmax_forward(vka_context *ctx, const vka_softmax_desc *d) {
    chk c = chk_start(ctx, "vka_softmax_forward");
    if (c.r == VKA_SUCCESS && !d) chk_fail(&c, VKA_ERROR_INVALID_ARGUMENT, "desc is NULL");
    if (c.r == VKA_SUCCESS)
        chk_tensors(&c, (const vka_tensor *const[]){d->out, d->inp, d->mask},
                    (const char *const[]){"out", "inp", "mask"}, 3);
    if (!chk_ok(&c)) return c.r;
    vkb_softmax sm = { /* Tq and mask_rows 0: their defaults, as in vkb_softmax */
        .out = bt(d->out), .inp = bt(d->inp), .mask = bt(d->mask),
        .R = d->R, .Tq = d->Tq, .Tk = d->Tk, .mask_rows = d->mask_rows,
        .scale = d->scale != 0.0f ? d->scale : 1.0f, .causal = d->causal,
    };
    RUN(c, BE(c)->ops->softmax_forward(BE(c), &sm));
}

vka_result vka_softmax_backward(vka_context *ctx, vka_tensor *dinp, const vka_tensor *dout,
                                const vka_tensor *out, int R, int Tk, float scale) {
    chk c = chk_start(ctx, "vka_softmax_backward");
    chk_tensors(&c, (const vka_tensor *const[]){dinp, dout, out},
                (const char *const[]){"dinp", "dout", "out"}, 3);
    if (!chk_ok(&c)) return c.r;
    RUN(c, BE(c)->ops->softmax_backward(BE(c), bt(dinp), bt(dout), bt(out), R, Tk,
                                        scale != 0.0f ? scale : 1.0f));
}

/* --- permute ---------------------------------------------------------------------------------- */

vka_result vka_permute_forward(vka_context *ctx, vka_tensor *q, vka_tensor *k, vka_tensor *v,
                               const vka_tensor *inp, int B, int T, int NH, int HS) {
    chk c = chk_start(ctx, "vka_permute_forward");
    chk_tensors(&c, (const vka_tensor *const[]){inp, q, k, v},
                (const char *const[]){"inp", "q", "k", "v"}, 4);
    if (!chk_ok(&c)) return c.r;
    RUN(c, BE(c)->ops->permute_forward(BE(c), bt(q), bt(k), bt(v), bt(inp), B, T, NH, HS));
}

vka_result vka_permute_backward(vka_context *ctx, vka_tensor *dinp, const vka_tensor *dq,
                                const vka_tensor *dk, const vka_tensor *dv, int B, int T, int NH,
                                int HS) {
    chk c = chk_start(ctx, "vka_permute_backward");
    chk_tensors(&c, (const vka_tensor *const[]){dinp, dq, dk, dv},
                (const char *const[]){"dinp", "dq", "dk", "dv"}, 4);
    if (!chk_ok(&c)) return c.r;
    RUN(c, BE(c)->ops->permute_backward(BE(c), bt(dinp), bt(dq), bt(dk), bt(dv), B, T, NH, HS));
}

vka_result vka_unpermute_forward(vka_context *ctx, vka_tensor *out, const vka_tensor *inp, int B,
                                 int T, int NH, int HS) {
    chk c = chk_start(ctx, "vka_unpermute_forward");
    chk_tensors(&c, (const vka_tensor *const[]){out, inp}, (const char *const[]){"out", "inp"}, 2);
    if (!chk_ok(&c)) return c.r;
    RUN(c, BE(c)->ops->unpermute_forward(BE(c), bt(out), bt(inp), B, T, NH, HS));
}

vka_result vka_unpermute_backward(vka_context *ctx, vka_tensor *dinp, const vka_tensor *dout,
                                  int B, int T, int NH, int HS) {
    chk c = chk_start(ctx, "vka_unpermute_backward");
    chk_tensors(&c, (const vka_tensor *const[]){dout, dinp}, (const char *const[]){"dout", "dinp"},
                2);
    if (!chk_ok(&c)) return c.r;
    RUN(c, BE(c)->ops->unpermute_backward(BE(c), bt(dinp), bt(dout), B, T, NH, HS));
}

/* --- kv_write --------------------------------------------------------------------------------- */

vka_result vka_kv_write(vka_context *ctx, vka_tensor *kcache, vka_tensor *vcache,
                        const vka_tensor *qkv, const vka_tensor *pos, int T, int NH, int HS,
                        int max_T) {
    chk c = chk_start(ctx, "vka_kv_write");
    chk_tensors(&c, (const vka_tensor *const[]){kcache, vcache, qkv, pos},
                (const char *const[]){"kcache", "vcache", "qkv", "pos"}, 4);
    if (!chk_ok(&c)) return c.r;
    RUN(c, BE(c)->ops->kv_write(BE(c), bt(kcache), bt(vcache), bt(qkv), bt(pos), T, NH, HS,
                                max_T));
}

/* --- layernorm -------------------------------------------------------------------------------- */

vka_result vka_layernorm_forward(vka_context *ctx, vka_tensor *out, vka_tensor *mean,
                                 vka_tensor *rstd, const vka_tensor *inp,
                                 const vka_tensor *weight, const vka_tensor *bias, int N, int C) {
    chk c = chk_start(ctx, "vka_layernorm_forward");
    chk_tensors(&c, (const vka_tensor *const[]){out, mean, rstd, inp, weight, bias},
                (const char *const[]){"out", "mean", "rstd", "inp", "weight", "bias"}, 6);
    if (!chk_ok(&c)) return c.r;
    RUN(c, BE(c)->ops->layernorm_forward(BE(c), bt(out), bt(mean), bt(rstd), bt(inp), bt(weight),
                                         bt(bias), N, C));
}

vka_result vka_layernorm_backward(vka_context *ctx, vka_tensor *dinp, vka_tensor *dweight,
                                  vka_tensor *dbias, const vka_tensor *dout,
                                  const vka_tensor *inp, const vka_tensor *weight,
                                  const vka_tensor *mean, const vka_tensor *rstd, int N, int C) {
    chk c = chk_start(ctx, "vka_layernorm_backward");
    chk_tensors(&c,
                (const vka_tensor *const[]){dinp, dweight, dbias, dout, inp, weight, mean, rstd},
                (const char *const[]){"dinp", "dweight", "dbias", "dout", "inp", "weight", "mean",
                                      "rstd"},
                8);
    if (!chk_ok(&c)) return c.r;
    RUN(c, BE(c)->ops->layernorm_backward(BE(c), bt(dinp), bt(dweight), bt(dbias), bt(dout),
                                          bt(inp), bt(weight), bt(mean), bt(rstd), N, C));
}

/* --- encoder ---------------------------------------------------------------------------------- */

vka_result vka_encoder_forward(vka_context *ctx, vka_tensor *out, const vka_tensor *tokens,
                               const vka_tensor *wte, const vka_tensor *wpe, int B, int T, int C) {
    chk c = chk_start(ctx, "vka_encoder_forward");
    chk_tensors(&c, (const vka_tensor *const[]){out, tokens, wte, wpe},
                (const char *const[]){"out", "tokens", "wte", "wpe"}, 4);
    if (!chk_ok(&c)) return c.r;
    RUN(c, BE(c)->ops->encoder_forward(BE(c), bt(out), bt(tokens), bt(wte), bt(wpe), B, T, C));
}

vka_result vka_encoder_backward(vka_context *ctx, vka_tensor *dwte, vka_tensor *dwpe,
                                const vka_tensor *dout, const vka_tensor *tokens,
                                const vka_tensor *buckets, int B, int T, int C) {
    chk c = chk_start(ctx, "vka_encoder_backward");
    chk_tensors(&c, (const vka_tensor *const[]){dwte, dwpe, dout, tokens, buckets},
                (const char *const[]){"dwte", "dwpe", "dout", "tokens", "buckets"}, 5);
    if (!chk_ok(&c)) return c.r;
    RUN(c, BE(c)->ops->encoder_backward(BE(c), bt(dwte), bt(dwpe), bt(dout), bt(tokens),
                                        bt(buckets), B, T, C));
}

/* --- crossentropy ----------------------------------------------------------------------------- */

vka_result vka_crossentropy_forward(vka_context *ctx, vka_tensor *losses,
                                    const vka_tensor *logits, const vka_tensor *targets, int N,
                                    int V, int Vp) {
    chk c = chk_start(ctx, "vka_crossentropy_forward");
    chk_tensors(&c, (const vka_tensor *const[]){losses, logits, targets},
                (const char *const[]){"losses", "logits", "targets"}, 3);
    if (!chk_ok(&c)) return c.r;
    RUN(c, BE(c)->ops->crossentropy_forward(BE(c), bt(losses), bt(logits), bt(targets), N, V,
                                            Vp));
}

vka_result vka_crossentropy_backward(vka_context *ctx, vka_tensor *dlogits,
                                     const vka_tensor *logits, const vka_tensor *targets,
                                     float dloss, int N, int V, int Vp) {
    chk c = chk_start(ctx, "vka_crossentropy_backward");
    chk_tensors(&c, (const vka_tensor *const[]){dlogits, logits, targets},
                (const char *const[]){"dlogits", "logits", "targets"}, 3);
    if (!chk_ok(&c)) return c.r;
    RUN(c, BE(c)->ops->crossentropy_backward(BE(c), bt(dlogits), bt(logits), bt(targets), dloss,
                                             VKB_NONE, N, V, Vp));
}

/* --- mean, grad_norm, adamw ------------------------------------------------------------------- */

vka_result vka_mean(vka_context *ctx, vka_tensor *out, const vka_tensor *inp, size_t N) {
    chk c = chk_start(ctx, "vka_mean");
    chk_tensors(&c, (const vka_tensor *const[]){out, inp}, (const char *const[]){"out", "inp"}, 2);
    if (!chk_ok(&c)) return c.r;
    RUN(c, BE(c)->ops->mean(BE(c), bt(out), bt(inp), N));
}

vka_result vka_grad_norm(vka_context *ctx, vka_tensor *out, vka_tensor *partials,
                         const vka_tensor *const *grads, int count, float max_norm) {
    chk c = chk_start(ctx, "vka_grad_norm");
    /* A NULL grads with count <= 0: the check layer reports the count. */
    if (c.r == VKA_SUCCESS && !grads && count > 0)
        chk_fail(&c, VKA_ERROR_INVALID_ARGUMENT, "grads is NULL");
    chk_tensors(&c, (const vka_tensor *const[]){out, partials},
                (const char *const[]){"out", "partials"}, 2);
    for (int i = 0; c.r == VKA_SUCCESS && grads && i < count; i++) {
        char name[32];
        snprintf(name, sizeof name, "grads[%d]", i);
        chk_tensor(&c, grads[i], name);
    }
    vkb_tensor *list = NULL;
    if (c.r == VKA_SUCCESS && grads && count > 0) {
        list = vka_malloc(ctx, (size_t)count * sizeof *list);
        if (!list) chk_fail(&c, VKA_ERROR_OUT_OF_HOST_MEMORY, "out of memory");
    }
    if (!chk_ok(&c)) return c.r;
    for (int i = 0; list && i < count; i++) list[i] = bt(grads[i]);
    vka_result before = BE(c)->status;
    BE(c)->caller = c.op;
    BE(c)->call_status = VKA_SUCCESS;
    BE(c)->ops->grad_norm(BE(c), bt(out), bt(partials), list, count, max_norm,
                          VKB_NONE); /* copies list */
    vka_free(ctx, list);
    return chk_done(&c, before);
}

vka_result vka_adamw(vka_context *ctx, vka_tensor *param, const vka_tensor *grad, vka_tensor *m,
                     vka_tensor *v, const vka_tensor *hyper, const vka_tensor *gscale, size_t N,
                     float weight_decay) {
    chk c = chk_start(ctx, "vka_adamw");
    chk_tensors(&c, (const vka_tensor *const[]){param, grad, m, v, hyper, gscale},
                (const char *const[]){"param", "grad", "m", "v", "hyper", "gscale"}, 6);
    if (!chk_ok(&c)) return c.r;
    RUN(c, BE(c)->ops->adamw(BE(c), bt(param), bt(grad), bt(m), bt(v), bt(hyper), bt(gscale), N,
                             weight_decay));
}

/* --- attention -------------------------------------------------------------------------------- */

/* Elements [off, ...) of the packed (B, T, 3C) x: the view of its q, k or v part (empty past
 * its end; the check layer then reports x too small). */
static vkb_tensor part(vkb_tensor x, size_t off) {
    return vkb_slice(x, off, x.n > off ? x.n - off : 0);
}

/* The public checks both directions share; fills *at (views, layouts, resolved scale). */
static void chk_attention(chk *c, const vka_attention_desc *d, vkb_attention *at) {
    if (c->r == VKA_SUCCESS && !d) chk_fail(c, VKA_ERROR_INVALID_ARGUMENT, "desc is NULL");
    if (c->r != VKA_SUCCESS) return;
    if (d->qkv) {
        if (d->q || d->k || d->v)
            chk_fail(c, VKA_ERROR_INVALID_ARGUMENT, "give either q, k and v or qkv, not both");
        else if (d->Tq != d->Tk && d->Tq > 0 && d->Tk > 0) /* else the check layer names it */
            chk_fail(c, VKA_ERROR_INVALID_ARGUMENT, "qkv needs Tq = Tk (got Tq = %d, Tk = %d)",
                     d->Tq, d->Tk);
    } else if (!d->q && !d->k && !d->v) {
        chk_fail(c, VKA_ERROR_INVALID_ARGUMENT, "q, k and v (or qkv) are NULL");
    }
    chk_tensors(c,
                (const vka_tensor *const[]){d->qkv, d->q, d->k, d->v, d->out, d->lse, d->mask,
                                            d->key_lens},
                (const char *const[]){"qkv", "q", "k", "v", "out", "lse", "mask", "key_lens"}, 8);
    if (c->r != VKA_SUCCESS) return;

    int NH = d->NH, HS = d->HS, Tq = d->Tq, Tk = d->Tk;
    size_t C = (size_t)NH * HS;
    *at = (vkb_attention){
        .out = bt(d->out), .lse = bt(d->lse), .mask = bt(d->mask), .key_lens = bt(d->key_lens),
        .lo = d->out_btc ? vkb_attn_in_btc(NH, Tq, HS) : vkb_attn_packed(NH, Tq, HS),
        .B = d->B, .NH = NH, .Tq = Tq, .Tk = Tk, .HS = HS,
        .scale = d->scale != 0.0f ? d->scale : 1.0f / sqrtf((float)HS),
        .causal = (vkb_causal)d->causal, .mask_per_batch = d->mask_per_batch,
    };
    if (d->qkv) { /* q, k, v start at elements 0, C, 2C of each position's 3C */
        vkb_tensor x = d->qkv->t;
        size_t unit = 1; /* elements a view element holds: 16-bit views count words */
        if (x.dtype == VKA_BF16 || x.dtype == VKA_F16) {
            if (C % 2) {
                chk_fail(c, VKA_ERROR_INVALID_ARGUMENT,
                         "a %s qkv needs an even C = NH*HS (got %zu): its k and v parts start "
                         "at elements C and 2C, which must begin 32-bit words",
                         vka_dtype_string((vka_dtype)x.dtype), C);
                return;
            }
            unit = 2;
        }
        at->q = x;
        at->k = part(x, C / unit);
        at->v = part(x, 2 * C / unit);
        at->lq = at->lk = at->lv = vkb_attn_in_qkv(NH, Tq, HS);
    } else {
        at->q = bt(d->q);
        at->k = bt(d->k);
        at->v = bt(d->v);
        at->lq = vkb_attn_packed(NH, Tq, HS);
        at->lk = at->lv = vkb_attn_packed(NH, Tk, HS);
    }
}

vka_result vka_attention_forward(vka_context *ctx, const vka_attention_desc *desc) {
    chk c = chk_start(ctx, "vka_attention_forward");
    vkb_attention at = {0};
    chk_attention(&c, desc, &at);
    if (!chk_ok(&c)) return c.r;
    RUN(c, BE(c)->ops->attention_forward(BE(c), &at));
}

vka_result vka_attention_backward(vka_context *ctx, const vka_attention_desc *desc,
                                  const vka_attention_grads *grads) {
    chk c = chk_start(ctx, "vka_attention_backward");
    vkb_attention at = {0};
    chk_attention(&c, desc, &at);
    if (c.r == VKA_SUCCESS && !grads) chk_fail(&c, VKA_ERROR_INVALID_ARGUMENT, "grads is NULL");
    if (c.r == VKA_SUCCESS) {
        if (desc->qkv && (grads->dq || grads->dk || grads->dv))
            chk_fail(&c, VKA_ERROR_INVALID_ARGUMENT,
                     "the forward read qkv: give dqkv, not dq, dk, dv");
        else if (!desc->qkv && grads->dqkv)
            chk_fail(&c, VKA_ERROR_INVALID_ARGUMENT,
                     "the forward read q, k, v: give dq, dk, dv, not dqkv");
        chk_tensors(&c,
                    (const vka_tensor *const[]){grads->dout, grads->dqkv, grads->dq, grads->dk,
                                                grads->dv},
                    (const char *const[]){"dout", "dqkv", "dq", "dk", "dv"}, 5);
    }
    if (!chk_ok(&c)) return c.r;
    at.dout = bt(grads->dout);
    if (desc->qkv) {
        vkb_tensor x = bt(grads->dqkv);
        size_t C = (size_t)desc->NH * desc->HS;
        at.dq = x;
        at.dk = x.arena ? part(x, C) : VKB_NONE;
        at.dv = x.arena ? part(x, 2 * C) : VKB_NONE;
    } else {
        at.dq = bt(grads->dq);
        at.dk = bt(grads->dk);
        at.dv = bt(grads->dv);
    }
    RUN(c, BE(c)->ops->attention_backward(BE(c), &at));
}
