/*
 * Incremental decoding with a KV cache (vka_gpt_session): the keys and values of every cached
 * position, per layer, live in device tensors (NH, max_T, HS); appending tokens runs the model
 * on the new positions only (a chunk of Tq rows: Tq = 1 for one token, prefill_chunk for more),
 * each attending to the cache, and computes the logits of the last appended position only.
 *
 * Per layer of a chunk at positions p0 .. p0+n-1 (n <= Tq, rows past n are padding):
 *   qkv (Tq, 3C) = ln1(x) . qkvw^T + qkvb
 *   kv_write: cache rows p0 .. p0+n-1 = the k and v parts of qkv
 *   q (NH, Tq, HS) = permute(qkv)
 *   preatt (NH, Tq, Tk) = q . K[:, :Tk]^T          (K (NH, max_T, HS), batch stride max_T*HS)
 *   att = softmax(preatt / sqrt(HS) + mask)         (mask (NH*Tq, Tk) written by the host:
 *                                                    0 for keys k <= p0 + t, else -inf)
 *   atty (Tq, C) = unpermute(att . V[:, :Tk])
 * then the MLP as in gpt_graph.c. Embeddings: wte[token] and wpe[position] are each gathered by
 * encoder_forward against a zero "position" table, so positions come from a host tensor.
 * The last real row is gathered the same way before lnf and the LM head (1, Vp).
 *
 * Everything that changes per step -- tokens, positions, (p0, n), the last row, the mask -- is
 * written into host tensors before the run, so a graph is recorded once per (Tq, Tk bucket):
 * Tk is the smallest of 32, 64, 128, ... (capped at max_T) holding p0 + n keys, so a short
 * context does not pay for attention over all max_T cache rows. At most 2 * (log2(max_T/32)+2)
 * graphs, none per position; nothing is allocated per step.
 *
 * Context full: appending to a cache holding max_T positions first re-prefills the last
 * max_T/2 of them (positions 0 .. max_T/2 - 1), as vka_gpt_generate's recompute path does.
 */
#include "model/gpt_internal.h"

#include "api.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MIN_BUCKET 32
#define MAX_BUCKETS 24
#define DEFAULT_CHUNK 64

typedef struct session_scratch {
    vkb_tensor zeros;    /* (Tq, C) never written: the "position table" of the gathers */
    vkb_tensor tok_emb;  /* (Tq, C) */
    vkb_tensor pos_emb;  /* (Tq, C) */
    vkb_tensor x;        /* (Tq, C) residual stream */
    vkb_tensor x2;       /* (Tq, C) after attention */
    vkb_tensor ln;       /* (Tq, C) */
    vkb_tensor mean;     /* (Tq) */
    vkb_tensor rstd;     /* (Tq) */
    vkb_tensor qkv;      /* (Tq, 3C) */
    vkb_tensor q, k, v;  /* (NH, Tq, HS) */
    vkb_tensor preatt;   /* (NH, Tq, max_T) */
    vkb_tensor att;      /* (NH, Tq, max_T) */
    vkb_tensor vaccum;   /* (NH, Tq, HS) */
    vkb_tensor atty;     /* (Tq, C) */
    vkb_tensor proj;     /* (Tq, C) */
    vkb_tensor fch;      /* (Tq, 4C) */
    vkb_tensor fch_gelu; /* (Tq, 4C) */
    vkb_tensor last;     /* (C) the last real row of x */
    vkb_tensor lnf;      /* (C) */
    vkb_tensor logits;   /* (Vp) */
    vkb_tensor x16;      /* mixed precision: (Tq, 4C) 16-bit elements (words; 1 in float32) */
} session_scratch;
#define SCRATCH_TENSORS (sizeof(session_scratch) / sizeof(vkb_tensor))

typedef struct session_host {
    vkb_tensor tokens;    /* (Tq) int32 */
    vkb_tensor positions; /* (Tq) int32 */
    vkb_tensor kvpos;     /* (2) int32: p0, n */
    vkb_tensor last;      /* (1) int32: n - 1 */
    vkb_tensor mask;      /* (NH * Tq, max_T) additive, row length Tk of the run */
    vkb_tensor logits;    /* (Vp) */
} session_host;
#define HOST_TENSORS (sizeof(session_host) / sizeof(vkb_tensor))

struct vka_gpt_session {
    vka_gpt *gpt;
    int max_T, chunk;          /* cache positions; prefill rows per pass */
    vka_attention_impl attention; /* the model's when the session was created */
    int n;                     /* positions in the cache */
    int32_t *tokens;           /* (max_T) the cached tokens */
    bool have_logits;
    uint64_t rng;              /* vka_gpt_session_sample's RNG when none is passed */
    vkb_tensor *kc, *vc;       /* (L) each (NH, max_T, HS) */
    session_scratch s;
    session_host h;
    vkb_arena *cache_arena, *scratch_arena, *host_arena;
    uint64_t cache_bytes, scratch_bytes;
    int n_buckets;
    int bucket_tk[MAX_BUCKETS];
    vkb_graph *graphs[2][MAX_BUCKETS]; /* [Tq == chunk][bucket] */
    int32_t *row_buf;          /* (2 * chunk) tokens and positions of a run */
    float *mask_buf;           /* (NH * chunk * max_T) */
    float *logit_buf;          /* (V) */
    void *cand;                /* sampling scratch */
    bool pending;              /* between vka_gpt_session_prepare and _finish */
    int pending_m;             /* tokens of the pending step */
    vkb_graph *pending_graph;
    struct vka_graph *handle;  /* the public handle _prepare returns (made on first use) */
};

static vkb_tensor cut(vkb_tensor t, size_t n) { return vkb_slice(t, 0, n); }

static vkb_tensor param(const vka_gpt *gpt, gpt_param_kind k, int l) {
    return gpt->params[gpt_tensor_index(gpt->cfg.L, k, l)];
}

/* out (BT, OC) = inp (BT, IC) . weight^T + bias, weight parameter k of layer l; in mixed
 * precision from the 16-bit copies (gpt_mixed.c), a float32 inp rounded into the scratch x16
 * (a 16-bit one, written there by layernorm or GELU, read as it is). */
static void linear(vka_gpt_session *ss, vkb_tensor out, vkb_tensor inp, gpt_param_kind k, int l,
                   vkb_tensor bias, int BT, int IC, int OC) {
    vka_gpt *gpt = ss->gpt;
    vkb_matmul mm = {.out = out, .a = inp, .b = param(gpt, k, l), .bias = bias, .M = BT,
                     .N = OC, .K = IC, .batch = 1, .trans_b = true, .alpha = 1.0f};
    if (gpt->precision != VKA_F32) {
        if (inp.dtype == VKA_F32) mm.a = vkm_gpt_round16(gpt, ss->s.x16, inp, (size_t)BT * IC);
        mm.b = gpt->w16[vkm_gpt_w16_index(k, l)];
    }
    gpt->be->ops->matmul(gpt->be, &mm);
}

/* Attention of one layer's chunk of Tq rows against the first Tk cache rows; returns its
 * output (Tq, C): atty, or with the fused attention in mixed precision a 16-bit view of x16
 * (the attention projection's input, rounded by the attention as linear() would round atty:
 * the same bits, one dispatch fewer; x16 is free once the qkv product has read it). */
static vkb_tensor attention(vka_gpt_session *ss, int l, int Tq, int Tk) {
    vkb_backend *be = ss->gpt->be;
    session_scratch *s = &ss->s;
    int NH = ss->gpt->cfg.NH, HS = ss->gpt->cfg.C / NH;
    size_t TC = (size_t)Tq * NH * HS;
    size_t cache_stride = (size_t)ss->max_T * HS;
    be->ops->kv_write(be, ss->kc[l], ss->vc[l], s->qkv, ss->h.kvpos, Tq, NH, HS, ss->max_T);
    if (ss->attention == VKA_ATTENTION_FUSED) {
        /* q from the chunk's qkv, k and v the cache's first Tk rows; the mask's first Tq rows
         * (head 0's) are the (Tq, Tk) mask every head shares. */
        vkb_attn_layout cache = {(size_t)NH * cache_stride, cache_stride, (size_t)HS};
        vkb_tensor out = ss->gpt->precision != VKA_F32
                             ? vkm_gpt_view16(s->x16, (uint8_t)ss->gpt->precision, TC)
                             : cut(s->atty, TC);
        vkb_attention at = {.q = cut(s->qkv, (size_t)Tq * 3 * NH * HS), .k = ss->kc[l],
                            .v = ss->vc[l], .out = out,
                            .mask = cut(ss->h.mask, (size_t)Tq * Tk),
                            .lq = vkb_attn_in_qkv(NH, Tq, HS), .lk = cache, .lv = cache,
                            .lo = vkb_attn_in_btc(NH, Tq, HS), .B = 1, .NH = NH, .Tq = Tq,
                            .Tk = Tk, .HS = HS, .scale = 1.0f / sqrtf((float)HS)};
        be->ops->attention_forward(be, &at);
        return out;
    }
    be->ops->permute_forward(be, s->q, s->k, s->v, s->qkv, 1, Tq, NH, HS);
    vkb_matmul qk = {.out = s->preatt, .a = s->q, .b = ss->kc[l], .M = Tq, .N = Tk, .K = HS,
                     .batch = NH, .trans_b = true, .stride_a = (size_t)Tq * HS,
                     .stride_b = cache_stride, .stride_out = (size_t)Tq * Tk, .alpha = 1.0f};
    be->ops->matmul(be, &qk);
    vkb_softmax sm = {.out = s->att, .inp = s->preatt, .mask = ss->h.mask, .R = NH * Tq,
                      .Tq = Tq, .Tk = Tk, .mask_rows = 1, .scale = 1.0f / sqrtf((float)HS)};
    be->ops->softmax_forward(be, &sm);
    vkb_matmul av = {.out = s->vaccum, .a = s->att, .b = ss->vc[l], .M = Tq, .N = HS, .K = Tk,
                     .batch = NH, .stride_a = (size_t)Tq * Tk, .stride_b = cache_stride,
                     .stride_out = (size_t)Tq * HS, .alpha = 1.0f};
    be->ops->matmul(be, &av);
    be->ops->unpermute_forward(be, s->atty, s->vaccum, 1, Tq, NH, HS);
    return s->atty;
}

static void record_step(vka_gpt_session *ss, int Tq, int Tk) {
    vka_gpt *gpt = ss->gpt;
    vkb_backend *be = gpt->be;
    session_scratch *s = &ss->s;
    int C = gpt->cfg.C;
    size_t TC = (size_t)Tq * C;
    vkb_tensor zeros = cut(s->zeros, TC);
    /* Mixed precision: layernorm (ln1, ln2, lnf), GELU and the fused attention write the
     * products' 16-bit inputs into x16 (the rounding linear() would do, without its
     * conversions). */
    bool mixed = gpt->precision != VKA_F32;
    vkb_tensor ln = mixed ? vkm_gpt_view16(s->x16, (uint8_t)gpt->precision, TC) : s->ln;
    vkb_tensor fch_gelu =
        mixed ? vkm_gpt_view16(s->x16, (uint8_t)gpt->precision, 4 * TC) : s->fch_gelu;
    be->ops->encoder_forward(be, s->tok_emb, ss->h.tokens, gpt->params[0], zeros, 1, Tq, C);
    be->ops->encoder_forward(be, s->pos_emb, ss->h.positions, gpt->params[1], zeros, 1, Tq, C);
    be->ops->residual_forward(be, s->x, s->tok_emb, s->pos_emb, TC);
    for (int l = 0; l < gpt->cfg.L; l++) {
        be->ops->layernorm_forward(be, ln, s->mean, s->rstd, s->x, param(gpt, P_LN1W, l),
                                   param(gpt, P_LN1B, l), Tq, C);
        linear(ss, s->qkv, ln, P_QKVW, l, param(gpt, P_QKVB, l), Tq, C, 3 * C);
        vkb_tensor atty = attention(ss, l, Tq, Tk);
        linear(ss, s->proj, atty, P_ATTPROJW, l, param(gpt, P_ATTPROJB, l), Tq, C, C);
        be->ops->residual_forward(be, s->x2, s->x, s->proj, TC);
        be->ops->layernorm_forward(be, ln, s->mean, s->rstd, s->x2, param(gpt, P_LN2W, l),
                                   param(gpt, P_LN2B, l), Tq, C);
        linear(ss, s->fch, ln, P_FCW, l, param(gpt, P_FCB, l), Tq, C, 4 * C);
        be->ops->gelu_forward(be, fch_gelu, s->fch, 4 * TC);
        linear(ss, s->proj, fch_gelu, P_FCPROJW, l, param(gpt, P_FCPROJB, l), Tq, 4 * C, C);
        be->ops->residual_forward(be, s->x, s->x2, s->proj, TC);
    }
    /* Only the last real row goes on: lnf and the LM head (tied to wte) for one position. */
    be->ops->encoder_forward(be, s->last, ss->h.last, cut(s->x, TC), cut(s->zeros, C), 1, 1, C);
    vkb_tensor lnf = mixed ? vkm_gpt_view16(s->x16, (uint8_t)gpt->precision, C) : s->lnf;
    be->ops->layernorm_forward(be, lnf, s->mean, s->rstd, s->last, param(gpt, P_LNFW, 0),
                               param(gpt, P_LNFB, 0), 1, C);
    linear(ss, s->logits, lnf, P_WTE, 0, VKB_NONE, 1, C, gpt->cfg.Vp);
    be->ops->copy(be, ss->h.logits, s->logits);
}

static int bucket_of(const vka_gpt_session *ss, int keys) {
    for (int b = 0; b < ss->n_buckets; b++)
        if (ss->bucket_tk[b] >= keys) return b;
    return ss->n_buckets - 1;
}

/* Write the inputs of m (1 <= m <= chunk, n + m <= max_T) tokens at positions n .. n+m-1 and
 * find (or record) the graph that runs them. */
static vka_result prepare_chunk(vka_gpt_session *ss, const int32_t *tok, int m, vkb_graph **out) {
    vka_gpt *gpt = ss->gpt;
    vkb_backend *be = gpt->be;
    int Tq = m == 1 ? 1 : ss->chunk, p0 = ss->n, NH = gpt->cfg.NH;
    int b = bucket_of(ss, p0 + m), Tk = ss->bucket_tk[b];
    int32_t *tokens = ss->row_buf, *positions = ss->row_buf + ss->chunk;
    for (int t = 0; t < Tq; t++) {
        tokens[t] = t < m ? tok[t] : 0;
        positions[t] = t < m ? p0 + t : p0; /* padding rows: any valid position */
    }
    /* Query t sees keys 0 .. p0 + t; padding rows see nothing (an all-zero row). */
    for (int h = 0; h < NH; h++)
        for (int t = 0; t < Tq; t++) {
            float *row = ss->mask_buf + ((size_t)h * Tq + t) * Tk;
            int seen = t < m ? p0 + t + 1 : 0;
            for (int k = 0; k < Tk; k++) row[k] = k < seen ? 0.0f : -INFINITY;
        }
    int32_t kvpos[2] = {p0, m}, last = m - 1;
    vka_result r = be->rt->write(be, ss->h.tokens, 0, tokens, (size_t)Tq);
    if (r == VKA_SUCCESS) r = be->rt->write(be, ss->h.positions, 0, positions, (size_t)Tq);
    if (r == VKA_SUCCESS) r = be->rt->write(be, ss->h.kvpos, 0, kvpos, 2);
    if (r == VKA_SUCCESS) r = be->rt->write(be, ss->h.last, 0, &last, 1);
    if (r == VKA_SUCCESS)
        r = be->rt->write(be, ss->h.mask, 0, ss->mask_buf,
                           (size_t)(ss->attention == VKA_ATTENTION_FUSED ? 1 : NH) * Tq * Tk);
    if (r != VKA_SUCCESS) return r;
    r = vkm_gpt_refresh16(gpt); /* mixed precision: the weights' 16-bit copies are current */
    if (r != VKA_SUCCESS) return r;
    vkb_graph **g = &ss->graphs[Tq == 1 ? 0 : 1][b];
    if (be->rt->graph_begin(be, g)) {
        record_step(ss, Tq, Tk);
        r = be->rt->graph_end(be, *g);
        if (r != VKA_SUCCESS) {
            be->rt->graph_destroy(be, *g);
            *g = NULL;
            return r;
        }
    }
    *out = *g;
    return VKA_SUCCESS;
}

/* The m tokens prepare_chunk ran are in the cache. */
static void chunk_done(vka_gpt_session *ss, const int32_t *tok, int m) {
    memcpy(ss->tokens + ss->n, tok, (size_t)m * sizeof *tok);
    ss->n += m;
    ss->have_logits = true;
}

/* Run m (1 <= m <= chunk, n + m <= max_T) tokens at positions n .. n+m-1. */
static vka_result run_chunk(vka_gpt_session *ss, const int32_t *tok, int m) {
    vkb_graph *g = NULL;
    vka_result r = prepare_chunk(ss, tok, m, &g);
    if (r == VKA_SUCCESS) r = ss->gpt->be->rt->graph_run(ss->gpt->be, g);
    if (r == VKA_SUCCESS) chunk_done(ss, tok, m);
    return r;
}

vka_result vka_gpt_session_prepare(vka_gpt_session *ss, const int32_t *tokens, size_t n,
                                   vka_graph **graph) {
    if (graph) *graph = NULL;
    if (!ss) return VKA_ERROR_INVALID_ARGUMENT;
    vka_gpt *gpt = ss->gpt;
    const char *fn = "vka_gpt_session_prepare";
    if (!tokens || !graph)
        return vka_set_error(gpt->ctx, VKA_ERROR_INVALID_ARGUMENT, "%s: tokens or graph is NULL", fn);
    if (ss->pending)
        return vka_set_error(gpt->ctx, VKA_ERROR_INVALID_ARGUMENT,
                             "%s: the last prepared step has not been finished (call "
                             "vka_gpt_session_finish)", fn);
    if (n == 0 || n > (size_t)ss->chunk || n > (size_t)(ss->max_T - ss->n))
        return vka_set_error(gpt->ctx, VKA_ERROR_INVALID_ARGUMENT,
                             "%s: n = %zu tokens must be in [1, %d] (the prefill chunk) and fit "
                             "the %d free positions of the cache (reset it when full)", fn, n,
                             ss->chunk, ss->max_T - ss->n);
    vka_result r = vkm_gpt_check_ids(gpt, fn, "tokens", tokens, n, 0);
    vkb_graph *g = NULL;
    if (r == VKA_SUCCESS) r = prepare_chunk(ss, tokens, (int)n, &g);
    vka_graph *handed = NULL;
    if (r == VKA_SUCCESS) r = vkm_gpt_handle(gpt, &ss->handle, g, &handed);
    if (r != VKA_SUCCESS) return r;
    /* The tokens go into the history now (past the length, so unseen until _finish). */
    memcpy(ss->tokens + ss->n, tokens, n * sizeof *tokens);
    ss->pending = true;
    ss->pending_m = (int)n;
    ss->pending_graph = g;
    *graph = handed;
    return VKA_SUCCESS;
}

vka_result vka_gpt_session_finish(vka_gpt_session *ss) {
    if (!ss) return VKA_ERROR_INVALID_ARGUMENT;
    vka_gpt *gpt = ss->gpt;
    if (!ss->pending)
        return vka_set_error(gpt->ctx, VKA_ERROR_INVALID_ARGUMENT,
                             "vka_gpt_session_finish: no step was prepared");
    ss->pending = false;
    vka_result r = vkb_graph_wait(gpt->be, ss->pending_graph, UINT64_MAX);
    if (r != VKA_SUCCESS) return r;
    chunk_done(ss, ss->tokens + ss->n, ss->pending_m);
    return VKA_SUCCESS;
}

vka_result vka_gpt_session_logits_buffer(vka_gpt_session *ss, void *buffer, uint64_t *offset,
                                         uint64_t *size) {
    if (!ss) return VKA_ERROR_INVALID_ARGUMENT;
    vka_gpt *gpt = ss->gpt;
    vka_result r = vkb_buffer_of(gpt->be, ss->h.logits, buffer, offset, size);
    if (r == VKA_SUCCESS && size) *size = (uint64_t)gpt->cfg.V * 4;
    return r;
}

/* Tokens into a cache with room for them (n + count <= max_T), in chunks. */
static vka_result fill(vka_gpt_session *ss, const int32_t *tok, size_t count) {
    vka_result r = VKA_SUCCESS;
    for (size_t i = 0; i < count && r == VKA_SUCCESS;) {
        int m = (int)VKA_MIN(count - i, (size_t)ss->chunk);
        r = run_chunk(ss, tok + i, m);
        i += (size_t)m;
    }
    return r;
}

/* The cache is full: keep its last max_T/2 tokens, recomputed from position 0. */
static vka_result refill(vka_gpt_session *ss) {
    int keep = ss->max_T / 2;
    memmove(ss->tokens, ss->tokens + ss->max_T - keep, (size_t)keep * sizeof *ss->tokens);
    ss->n = 0;
    ss->have_logits = false;
    return fill(ss, ss->tokens, (size_t)keep);
}

vka_result vka_gpt_session_append(vka_gpt_session *ss, const int32_t *tokens, size_t n) {
    if (!ss) return VKA_ERROR_INVALID_ARGUMENT;
    vka_gpt *gpt = ss->gpt;
    const char *fn = "vka_gpt_session_append";
    if (ss->pending)
        return vka_set_error(gpt->ctx, VKA_ERROR_INVALID_ARGUMENT,
                             "%s: a prepared step has not been finished (vka_gpt_session_finish)", fn);
    if (n == 0) return VKA_SUCCESS;
    if (!tokens)
        return vka_set_error(gpt->ctx, VKA_ERROR_INVALID_ARGUMENT, "%s: tokens is NULL", fn);
    vka_result r = vkm_gpt_check_ids(gpt, fn, "tokens", tokens, n, 0);
    for (size_t i = 0; i < n && r == VKA_SUCCESS;) {
        if (ss->n == ss->max_T) r = refill(ss);
        if (r != VKA_SUCCESS) break;
        size_t m = VKA_MIN(n - i, (size_t)(ss->max_T - ss->n));
        r = fill(ss, tokens + i, m);
        i += m;
    }
    if (r != VKA_SUCCESS && r != VKA_ERROR_INVALID_ARGUMENT) {
        ss->n = 0; /* a failed run leaves the cache unknown */
        ss->have_logits = false;
    }
    return r;
}

vka_result vka_gpt_session_logits(vka_gpt_session *ss, float *out, size_t V) {
    if (!ss) return VKA_ERROR_INVALID_ARGUMENT;
    vka_gpt *gpt = ss->gpt;
    if (!out || V != (size_t)gpt->cfg.V)
        return vka_set_error(gpt->ctx, VKA_ERROR_INVALID_ARGUMENT,
                             "vka_gpt_session_logits: out is NULL or V = %zu is not the "
                             "model's V = %d", V, gpt->cfg.V);
    if (!ss->have_logits)
        return vka_set_error(gpt->ctx, VKA_ERROR_INVALID_ARGUMENT,
                             "vka_gpt_session_logits: no tokens appended yet");
    return gpt->be->rt->read(gpt->be, ss->h.logits, 0, out, V);
}

vka_result vka_gpt_session_sample(vka_gpt_session *ss, const vka_sample_desc *sample,
                                  uint64_t *rng_state, int32_t *token) {
    if (!ss) return VKA_ERROR_INVALID_ARGUMENT;
    vka_gpt *gpt = ss->gpt;
    vka_sample_desc s = sample ? *sample : (vka_sample_desc){0};
    if (!token)
        return vka_set_error(gpt->ctx, VKA_ERROR_INVALID_ARGUMENT,
                             "vka_gpt_session_sample: token is NULL");
    if (!(s.temperature >= 0.0f) || !isfinite(s.temperature) || s.top_k < 0)
        return vka_set_error(gpt->ctx, VKA_ERROR_INVALID_ARGUMENT,
                             "vka_gpt_session_sample: temperature = %g must be finite and >= 0, "
                             "top_k = %d >= 0", (double)s.temperature, s.top_k);
    vka_result r = vka_gpt_session_logits(ss, ss->logit_buf, (size_t)gpt->cfg.V);
    if (r == VKA_SUCCESS)
        r = vkm_check_logits(gpt, "vka_gpt_session_sample", ss->logit_buf, gpt->cfg.V, -1,
                             vka_gpt_session_length(ss) - 1);
    if (r != VKA_SUCCESS) return r;
    *token = vkm_sample_token(ss->logit_buf, gpt->cfg.V, &s, rng_state ? rng_state : &ss->rng,
                              ss->cand);
    return VKA_SUCCESS;
}

void vka_gpt_session_reset(vka_gpt_session *ss) {
    if (!ss) return;
    if (ss->pending) { /* a prepared step is dropped (waited for if vkattn submitted it) */
        vkb_graph_wait(ss->gpt->be, ss->pending_graph, UINT64_MAX);
        ss->pending = false;
    }
    ss->n = 0;
    ss->have_logits = false;
}

size_t vka_gpt_session_length(const vka_gpt_session *ss) { return ss ? (size_t)ss->n : 0; }

static vka_result make_arenas(vka_gpt_session *ss) {
    vka_gpt *gpt = ss->gpt;
    int L = gpt->cfg.L, C = gpt->cfg.C, NH = gpt->cfg.NH, Tq = ss->chunk, T = ss->max_T;
    size_t TC = (size_t)Tq * C, att = (size_t)NH * Tq * T;
    const char *hint = " (a session with a smaller max_T needs less)";
    /* Cache: K and V of each layer. */
    size_t *cs = vka_malloc(gpt->ctx, 2 * (size_t)L * sizeof *cs);
    const char **cn = vka_malloc(gpt->ctx, 2 * (size_t)L * sizeof *cn);
    vkb_tensor *ct = vka_malloc(gpt->ctx, 2 * (size_t)L * sizeof *ct);
    vka_result r = VKA_ERROR_OUT_OF_HOST_MEMORY;
    /* In mixed precision with the fused op the caches hold the precision's 16-bit type (k and
     * v rounded as the products' inputs are; half the bytes each token reads); the composed
     * ops' products take a and b of one type, so they keep f32 caches. */
    bool cache16 = gpt->precision != VKA_F32 && ss->attention == VKA_ATTENTION_FUSED;
    size_t cache_elems = (size_t)T * C;
    if (cs && cn && ct) {
        for (int i = 0; i < 2 * L; i++) {
            cs[i] = cache16 ? (cache_elems + 1) / 2 : cache_elems; /* words */
            cn[i] = i < L ? "kv cache K" : "kv cache V";
        }
        r = vkm_gpt_make_arena(gpt, "kv cache", VKB_ARENA_DEVICE, cs, cn, 2 * L, ct,
                               &ss->cache_arena, hint);
        if (r == VKA_SUCCESS) {
            if (cache16)
                for (int i = 0; i < 2 * L; i++)
                    ct[i] = vkm_gpt_view16(ct[i], (uint8_t)gpt->precision, cache_elems);
            memcpy(ss->kc, ct, (size_t)L * sizeof *ct);
            memcpy(ss->vc, ct + L, (size_t)L * sizeof *ct);
            ss->cache_bytes = vkm_gpt_sum_bytes(cs, 2 * (size_t)L);
        }
    } else {
        r = vka_set_error(gpt->ctx, r, "vka_gpt_session_create: out of host memory");
    }
    vka_free(gpt->ctx, cs);
    vka_free(gpt->ctx, cn);
    vka_free(gpt->ctx, ct);
    if (r != VKA_SUCCESS) return r;
    size_t ss_sizes[SCRATCH_TENSORS] = {TC, TC, TC, TC, TC, TC, (size_t)Tq, (size_t)Tq, 3 * TC,
                                        TC, TC, TC, att, att, TC, TC, TC, 4 * TC, 4 * TC,
                                        (size_t)C, (size_t)C, (size_t)gpt->cfg.Vp,
                                        gpt->precision != VKA_F32 ? (4 * TC + 1) / 2 : 1};
    static const char *const ss_names[SCRATCH_TENSORS] = {
        "zeros", "tok_emb", "pos_emb", "x", "x2", "ln", "mean", "rstd", "qkv", "q", "k", "v",
        "preatt", "att", "vaccum", "atty", "proj", "fch", "fch_gelu", "last", "lnf", "logits",
        "16-bit inputs of the products"};
    _Static_assert(sizeof ss_sizes / sizeof ss_sizes[0] == SCRATCH_TENSORS, "scratch list");
    r = vkm_gpt_make_arena(gpt, "session activations", VKB_ARENA_DEVICE, ss_sizes, ss_names,
                           (int)SCRATCH_TENSORS, (vkb_tensor *)&ss->s, &ss->scratch_arena, hint);
    if (r != VKA_SUCCESS) return r;
    ss->scratch_bytes = vkm_gpt_sum_bytes(ss_sizes, SCRATCH_TENSORS);
    size_t h_sizes[HOST_TENSORS] = {(size_t)Tq, (size_t)Tq, 2, 1, att, (size_t)gpt->cfg.Vp};
    static const char *const h_names[HOST_TENSORS] = {"tokens", "positions", "kvpos", "last",
                                                      "mask", "logits"};
    return vkm_gpt_make_arena(gpt, "session host", VKB_ARENA_HOST, h_sizes, h_names,
                              (int)HOST_TENSORS, (vkb_tensor *)&ss->h, &ss->host_arena, hint);
}

vka_result vka_gpt_session_create(vka_gpt *gpt, const vka_gpt_session_desc *desc,
                                  vka_gpt_session **out) {
    if (out) *out = NULL;
    if (!gpt || gpt->destroy_pending) return VKA_ERROR_INVALID_ARGUMENT;
    const char *fn = "vka_gpt_session_create";
    vka_result r = vka_context_usable(gpt->ctx, fn);
    if (r != VKA_SUCCESS) return r;
    if (!out) return vka_set_error(gpt->ctx, VKA_ERROR_INVALID_ARGUMENT, "%s: out is NULL", fn);
    vka_gpt_session_desc d = desc ? *desc : (vka_gpt_session_desc){0};
    if (d.max_T < 0 || d.max_T > gpt->cfg.max_T || d.prefill_chunk < 0)
        return vka_set_error(gpt->ctx, VKA_ERROR_INVALID_ARGUMENT,
                             "%s: max_T = %d must be in 0 .. the model's max_T = %d, "
                             "prefill_chunk = %d must be >= 0", fn, d.max_T, gpt->cfg.max_T,
                             d.prefill_chunk);
    vka_gpt_session *ss = vka_calloc(gpt->ctx, 1, sizeof *ss);
    if (!ss) return vka_set_error(gpt->ctx, VKA_ERROR_OUT_OF_HOST_MEMORY, "%s: out of memory", fn);
    ss->gpt = gpt;
    gpt->n_sessions++;
    vka_context_retain(gpt->ctx, VKA_CHILD_SESSION);
    ss->max_T = d.max_T ? d.max_T : gpt->cfg.max_T;
    ss->chunk = VKA_MIN(d.prefill_chunk ? d.prefill_chunk : DEFAULT_CHUNK, ss->max_T);
    /* The fused op binds a layer's whole cache (NH, max_T, HS) and a chunk's qkv (Tq, 3C): on
     * any device (>= 128 MiB per binding) up to C * max_T = 32 M; else (a test's lowered
     * binding limit) the composed ops, which split further. */
    uint64_t most = VKA_MAX((uint64_t)gpt->cfg.C * (uint64_t)ss->max_T,
                            (uint64_t)ss->chunk * 3 * (uint64_t)gpt->cfg.C);
    ss->attention = vkm_gpt_binds(gpt, most) ? gpt->attention : VKA_ATTENTION_COMPOSED;
    ss->rng = d.seed;
    for (int tk = MIN_BUCKET;; tk *= 2) {
        ss->bucket_tk[ss->n_buckets++] = VKA_MIN(tk, ss->max_T);
        if (tk >= ss->max_T) break;
    }
    int L = gpt->cfg.L, V = gpt->cfg.V;
    ss->tokens = vka_malloc(gpt->ctx, (size_t)ss->max_T * sizeof *ss->tokens);
    ss->kc = vka_calloc(gpt->ctx, 2 * (size_t)L, sizeof *ss->kc);
    ss->vc = ss->kc ? ss->kc + L : NULL;
    ss->row_buf = vka_malloc(gpt->ctx, 2 * (size_t)ss->chunk * sizeof *ss->row_buf);
    ss->mask_buf = vka_malloc(gpt->ctx, (size_t)gpt->cfg.NH * ss->chunk * ss->max_T * sizeof *ss->mask_buf);
    ss->logit_buf = vka_malloc(gpt->ctx, (size_t)V * sizeof *ss->logit_buf);
    ss->cand = vka_malloc(gpt->ctx, (size_t)V * 8);
    if (!ss->tokens || !ss->kc || !ss->row_buf || !ss->mask_buf || !ss->logit_buf || !ss->cand)
        r = vka_set_error(gpt->ctx, VKA_ERROR_OUT_OF_HOST_MEMORY, "%s: out of memory", fn);
    else
        r = make_arenas(ss);
    if (r != VKA_SUCCESS) {
        vka_gpt_session_destroy(ss);
        return r;
    }
    *out = ss;
    return VKA_SUCCESS;
}

void vka_gpt_session_destroy(vka_gpt_session *ss) {
    if (!ss) return;
    vka_gpt *gpt = ss->gpt;
    vka_graph_handle_destroy(ss->handle);
    for (int k = 0; k < 2; k++)
        for (int b = 0; b < MAX_BUCKETS; b++) gpt->be->rt->graph_destroy(gpt->be, ss->graphs[k][b]);
    vkm_gpt_destroy_arena(gpt, &ss->cache_arena, ss->cache_bytes);
    vkm_gpt_destroy_arena(gpt, &ss->scratch_arena, ss->scratch_bytes);
    vkm_gpt_destroy_arena(gpt, &ss->host_arena, 0);
    vka_free(gpt->ctx, ss->tokens);
    vka_free(gpt->ctx, ss->kc);
    vka_free(gpt->ctx, ss->row_buf);
    vka_free(gpt->ctx, ss->mask_buf);
    vka_free(gpt->ctx, ss->logit_buf);
    vka_free(gpt->ctx, ss->cand);
    vka_context *ctx = gpt->ctx;
    vka_free(gpt->ctx, ss);
    vkm_gpt_session_released(gpt);
    vka_context_release(ctx, VKA_CHILD_SESSION);
}
