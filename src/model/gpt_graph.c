/*
 * GPT-2 forward and backward passes and the AdamW update, recorded as backend ops (llm.c
 * train_gpt2.c gpt2_forward / gpt2_backward / gpt2_update, with attention written as llm.c's
 * CUDA version does it: permute to heads, batched q.k^T, masked softmax, att.v, unpermute).
 *
 * Backward keeps one gradient of the residual stream, dresidual (B, T, C), and walks down the
 * layers: each layer's backward adds its branch's gradient into it (layernorm_backward
 * accumulates), so after layer l it holds d(input of layer l). Activation gradients inside a
 * layer use scratch tensors shared by all layers. Parameter gradients are zeroed by the caller
 * and accumulated, as the backend's backward ops do.
 */
#include "model/gpt_internal.h"

#include <math.h>

/* t cut to its first n elements (tensors are sized for the largest shape seen so far). */
static vkb_tensor cut(vkb_tensor t, size_t n) { return vkb_slice(t, 0, n); }

/* The same for a tensor that may be a 16-bit view (n elements, not words). */
static vkb_tensor cut_elems(vkb_tensor t, size_t n) {
    return t.dtype == VKA_F32 ? cut(t, n) : vkm_gpt_view16(t, t.dtype, n);
}

static vkb_tensor param(const vka_gpt *gpt, const vkb_tensor *set, gpt_param_kind k, int l) {
    return set[gpt_tensor_index(gpt->cfg.L, k, l)];
}

/* In mixed precision (gpt_mixed.c) a product reads 16-bit copies: of its weight (w16) and of
 * n elements of activation src, rounded into the scratch words (x16 or d16) here unless the
 * op that wrote src wrote it in 16 bits (ln1, ln2, fch_gelu: gpt_acts.c). */
static bool mixed(const vka_gpt *gpt) { return gpt->precision != VKA_F32; }

static vkb_tensor input16(vka_gpt *gpt, vkb_tensor scratch, vkb_tensor src, size_t n) {
    return src.dtype != VKA_F32 ? src : vkm_gpt_round16(gpt, scratch, src, n);
}

/* out (BT, OC) = inp (BT, IC) . weight (OC, IC)^T + bias (OC); weight: parameter k of layer l */
static void linear_forward(vka_gpt *gpt, vkb_tensor out, vkb_tensor inp, gpt_param_kind k, int l,
                           vkb_tensor bias, int BT, int IC, int OC) {
    vkb_matmul mm = {.out = out, .a = inp, .b = param(gpt, gpt->params, k, l), .bias = bias,
                     .M = BT, .N = OC, .K = IC, .batch = 1, .trans_b = true, .alpha = 1.0f};
    if (mixed(gpt)) {
        mm.a = input16(gpt, gpt->acts.x16, inp, (size_t)BT * IC);
        mm.b = gpt->w16[vkm_gpt_w16_index(k, l)];
    }
    gpt->be->ops->matmul(gpt->be, &mm);
}

/* dinp (BT, IC) = dout . weight (written); dweight (OC, IC) += dout^T . inp;
 * dbias (OC) += column sums of dout (BT, OC). weight: parameter k of layer l. */
static void linear_backward(vka_gpt *gpt, vkb_tensor dinp, vkb_tensor dweight, vkb_tensor dbias,
                            vkb_tensor dout, vkb_tensor inp, gpt_param_kind k, int l, int BT,
                            int IC, int OC) {
    vkb_backend *be = gpt->be;
    vkb_matmul dx = {.out = dinp, .a = dout, .b = param(gpt, gpt->params, k, l), .M = BT,
                     .N = IC, .K = OC, .batch = 1, .alpha = 1.0f};
    vkb_matmul dw = {.out = dweight, .a = dout, .b = inp, .M = OC, .N = IC, .K = BT,
                     .batch = 1, .trans_a = true, .alpha = 1.0f, .accumulate = true};
    if (mixed(gpt)) {
        dx.a = dw.a = input16(gpt, gpt->acts.d16, dout, (size_t)BT * OC);
        dx.b = gpt->w16[vkm_gpt_w16_index(k, l)];
        dw.b = input16(gpt, gpt->acts.x16, inp, (size_t)BT * IC);
    }
    be->ops->matmul(be, &dx);
    be->ops->matmul(be, &dw);
    if (vkb_present(dbias)) be->ops->bias_backward(be, dbias, dout, BT, OC);
}

/* Batched (B*NH) product of (M, K) and (K, N) matrices, written. */
static void bmm(vkb_backend *be, vkb_tensor out, vkb_tensor a, vkb_tensor b, int batch, int M,
                int N, int K, bool trans_a, bool trans_b) {
    vkb_matmul mm = {.out = out, .a = a, .b = b, .M = M, .N = N, .K = K, .batch = batch,
                     .trans_a = trans_a, .trans_b = trans_b, .alpha = 1.0f};
    be->ops->matmul(be, &mm);
}

/* q, k, v (B, NH, T, HS) as views of a (3, B, NH, T, HS) tensor. */
static void split_qkv(vkb_tensor qkvr, size_t BTC, vkb_tensor *q, vkb_tensor *k, vkb_tensor *v) {
    *q = vkb_slice(qkvr, 0, BTC);
    *k = vkb_slice(qkvr, BTC, BTC);
    *v = vkb_slice(qkvr, 2 * BTC, BTC);
}

/* The fused op on the (B, T, 3C) qkv of a layer, causal (vka_attention_forward): q, k, v are
 * strided views of qkv, out is atty (B, T, C); d* name the gradients' tensors (backward). */
static vkb_attention fused_attention(const vka_gpt *gpt, vkb_tensor qkv, vkb_tensor atty,
                                     vkb_tensor lse, int B, int T) {
    int C = gpt->cfg.C, NH = gpt->cfg.NH, HS = C / NH;
    size_t n = (size_t)B * T * 3 * C;
    vkb_attn_layout lqkv = vkb_attn_in_qkv(NH, T, HS);
    /* k and v start at elements C and 2C: in a 16-bit qkv (mixed precision, even C: gpt_acts.c)
     * whole words */
    vkb_tensor q = cut_elems(qkv, n);
    size_t unit = q.dtype == VKA_F32 ? 1 : 2;
    return (vkb_attention){.q = q, .k = vkb_slice(q, C / unit, q.n - C / unit),
                           .v = vkb_slice(q, 2 * (size_t)C / unit, q.n - 2 * (size_t)C / unit),
                           .out = cut_elems(atty, (size_t)B * T * C),
                           .lse = vkb_slice(lse, 0, (size_t)B * NH * T),
                           .lq = lqkv, .lk = lqkv, .lv = lqkv,
                           .lo = vkb_attn_in_btc(NH, T, HS), .B = B, .NH = NH, .Tq = T, .Tk = T,
                           .HS = HS, .scale = 1.0f / sqrtf((float)HS),
                           .causal = VKB_CAUSAL_TOP_LEFT};
}

/* Causal self-attention of one layer: atty (B, T, C) from its qkv (B, T, 3C). Fused: qkv is
 * la->qkvr, lse kept for backward. Composed: qkv is the scratch a->qkv; q, k, v and att are
 * kept. */
static void attention_forward(vka_gpt *gpt, gpt_layer_acts *la, int B, int T) {
    vkb_backend *be = gpt->be;
    gpt_acts *a = &gpt->acts;
    int NH = gpt->cfg.NH, HS = gpt->cfg.C / NH;
    size_t BTC = (size_t)B * T * gpt->cfg.C;
    if (vkm_gpt_fused(gpt, T)) {
        vkb_attention at = fused_attention(gpt, la->qkvr, la->atty, la->lse, B, T);
        be->ops->attention_forward(be, &at);
        return;
    }
    vkb_tensor q, k, v;
    split_qkv(la->qkvr, BTC, &q, &k, &v);
    be->ops->permute_forward(be, q, k, v, a->qkv, B, T, NH, HS);
    bmm(be, a->preatt, q, k, B * NH, T, T, HS, false, true); /* (B, NH, T, T) = q . k^T */
    vkb_softmax sm = {.out = la->att, .inp = a->preatt, .R = B * NH * T, .Tq = T, .Tk = T,
                      .mask_rows = 1, .scale = 1.0f / sqrtf((float)HS), .causal = true};
    be->ops->softmax_forward(be, &sm);
    bmm(be, a->vaccum, la->att, v, B * NH, T, HS, T, false, false); /* (B, NH, T, HS) */
    be->ops->unpermute_forward(be, la->atty, a->vaccum, B, T, NH, HS);
}

void vkm_gpt_record_forward(vka_gpt *gpt, int B, int T, bool train) {
    vkb_backend *be = gpt->be;
    const vkb_tensor *p = gpt->params;
    gpt_acts *a = &gpt->acts;
    int C = gpt->cfg.C, L = gpt->cfg.L, BT = B * T;
    size_t BTC = (size_t)BT * C;

    be->ops->encoder_forward(be, a->encoded, gpt->host.inputs, p[0], p[1], B, T, C);
    vkb_tensor residual = a->encoded;
    for (int l = 0; l < L; l++) {
        /* Forward-only passes overwrite layer 0's activations for every layer. */
        gpt_layer_acts *la = &gpt->layer[train ? l : 0];
        be->ops->layernorm_forward(be, la->ln1, la->ln1_mean, la->ln1_rstd, residual,
                                   param(gpt, p, P_LN1W, l), param(gpt, p, P_LN1B, l), BT, C);
        vkb_tensor qkv = vkm_gpt_fused(gpt, T) ? la->qkvr : a->qkv;
        linear_forward(gpt, qkv, la->ln1, P_QKVW, l, param(gpt, p, P_QKVB, l), BT, C, 3 * C);
        attention_forward(gpt, la, B, T);
        linear_forward(gpt, a->proj, la->atty, P_ATTPROJW, l, param(gpt, p, P_ATTPROJB, l), BT,
                       C, C);
        be->ops->residual_forward(be, la->residual2, residual, a->proj, BTC);
        be->ops->layernorm_forward(be, la->ln2, la->ln2_mean, la->ln2_rstd, la->residual2,
                                   param(gpt, p, P_LN2W, l), param(gpt, p, P_LN2B, l), BT, C);
        linear_forward(gpt, la->fch, la->ln2, P_FCW, l, param(gpt, p, P_FCB, l), BT, C, 4 * C);
        be->ops->gelu_forward(be, la->fch_gelu, la->fch, 4 * BTC);
        linear_forward(gpt, a->proj, la->fch_gelu, P_FCPROJW, l, param(gpt, p, P_FCPROJB, l), BT,
                       4 * C, C);
        be->ops->residual_forward(be, la->residual3, la->residual2, a->proj, BTC);
        residual = la->residual3;
    }
    be->ops->layernorm_forward(be, a->lnf, a->lnf_mean, a->lnf_rstd, residual,
                               param(gpt, p, P_LNFW, 0), param(gpt, p, P_LNFB, 0), BT, C);
}

unsigned vkm_gpt_logit_bytes(const vka_gpt *gpt) { return gpt->precision == VKA_F32 ? 4 : 2; }

gpt_head vkm_gpt_head_plan(const vka_gpt *gpt, size_t BT, bool keep) {
    uint64_t row = (uint64_t)gpt->cfg.Vp * vkm_gpt_logit_bytes(gpt);
    uint64_t cap = gpt->be->limits.max_tensor_bytes;
    if (!keep && cap > GPT_HEAD_BYTES) cap = GPT_HEAD_BYTES;
    uint64_t rows = VKA_MAX(cap / row, 1);
    if (rows > BT) rows = VKA_MAX(BT, 1);
    return (gpt_head){(int)rows, (int)((BT + rows - 1) / rows)};
}

void vkm_gpt_record_head(vka_gpt *gpt, int B, int T, bool keep, bool loss, bool backward) {
    vkb_backend *be = gpt->be;
    gpt_acts *a = &gpt->acts;
    int C = gpt->cfg.C, V = gpt->cfg.V, Vp = gpt->cfg.Vp, BT = B * T;
    gpt_head h = vkm_gpt_head_plan(gpt, (size_t)BT, keep);
    for (int i = 0, r0 = 0; r0 < BT; i++, r0 += h.rows) {
        int n = VKA_MIN(h.rows, BT - r0);
        /* (n, Vp): 16-bit in mixed precision */
        vkb_tensor logits = cut_elems(gpt->logits[keep ? i : 0], (size_t)n * Vp);
        vkb_tensor lnf = vkb_slice(a->lnf, (size_t)r0 * C, (size_t)n * C);  /* (n, C) */
        vkb_tensor targets = vkb_slice(gpt->host.targets, (size_t)r0, (size_t)n);
        /* The LM head is tied to wte (GPT-2): logits (n, Vp) = lnf . wte^T, no bias. */
        linear_forward(gpt, logits, lnf, P_WTE, 0, VKB_NONE, n, C, Vp);
        if (loss)
            be->ops->crossentropy_forward(be, vkb_slice(a->losses, (size_t)r0, (size_t)n),
                                          logits, targets, n, V, Vp);
        if (!backward) continue;
        /* Mean loss over the counted positions (targets not -1): dloss = 1/count each, written
         * per batch in host.dloss; dlogits replace logits in place (16-bit ones in mixed
         * precision: the products read them so). dlnf = dlogits . wte, dwte += dlogits^T . lnf. */
        be->ops->crossentropy_backward(be, logits, logits, targets, 0.0f, gpt->host.dloss, n, V,
                                       Vp);
        linear_backward(gpt, vkb_slice(a->dln, (size_t)r0 * C, (size_t)n * C), gpt->grads[0],
                        VKB_NONE, logits, lnf, P_WTE, 0, n, C, Vp);
    }
}

void vkm_gpt_record_loss(vka_gpt *gpt, int B, int T, bool copy_losses) {
    vkb_backend *be = gpt->be;
    gpt_acts *a = &gpt->acts;
    size_t BT = (size_t)B * T;
    be->ops->mean(be, a->loss, a->losses, BT);
    be->ops->copy(be, gpt->host.loss, cut(a->loss, 1));
    if (copy_losses) be->ops->copy(be, gpt->host.losses, cut(a->losses, BT));
}

/* Gradients of one layer's attention: dqkv (B, T, 3C) from datty (B, T, C). */
static void attention_backward(vka_gpt *gpt, gpt_layer_acts *la, int B, int T) {
    vkb_backend *be = gpt->be;
    gpt_acts *a = &gpt->acts;
    int NH = gpt->cfg.NH, HS = gpt->cfg.C / NH;
    size_t BTC = (size_t)B * T * gpt->cfg.C, BNHTT = (size_t)B * NH * T * T;
    if (vkm_gpt_fused(gpt, T)) {
        /* Writes all of dqkv (B, T, 3C): its q, k and v parts. */
        vkb_attention at = fused_attention(gpt, la->qkvr, la->atty, la->lse, B, T);
        vkb_attention dd = fused_attention(gpt, a->dqkv, a->datty, la->lse, B, T);
        at.dq = dd.q, at.dk = dd.k, at.dv = dd.v, at.dout = dd.out;
        be->ops->attention_backward(be, &at);
        return;
    }
    vkb_tensor q, k, v, dq, dk, dv;
    split_qkv(la->qkvr, BTC, &q, &k, &v);
    split_qkv(a->dqkvr, BTC, &dq, &dk, &dv);
    be->ops->fill(be, cut(a->dvaccum, BTC), 0.0f);
    be->ops->unpermute_backward(be, a->dvaccum, a->datty, B, T, NH, HS);
    bmm(be, a->datt, a->dvaccum, v, B * NH, T, T, HS, false, true); /* dvaccum . v^T */
    bmm(be, dv, la->att, a->dvaccum, B * NH, T, HS, T, true, false); /* att^T . dvaccum */
    be->ops->fill(be, cut(a->dpreatt, BNHTT), 0.0f);
    be->ops->softmax_backward(be, a->dpreatt, a->datt, la->att, B * NH * T, T,
                              1.0f / sqrtf((float)HS));
    bmm(be, dq, a->dpreatt, k, B * NH, T, HS, T, false, false); /* dpreatt . k */
    bmm(be, dk, a->dpreatt, q, B * NH, T, HS, T, true, false);  /* dpreatt^T . q */
    be->ops->fill(be, cut(a->dqkv, 3 * BTC), 0.0f);
    be->ops->permute_backward(be, a->dqkv, dq, dk, dv, B, T, NH, HS);
}

/* One layer backward; a->dresidual holds d(residual3 of l) and leaves holding d(its input). */
static void layer_backward(vka_gpt *gpt, int l, int B, int T) {
    vkb_backend *be = gpt->be;
    const vkb_tensor *p = gpt->params, *g = gpt->grads;
    gpt_acts *a = &gpt->acts;
    gpt_layer_acts *la = &gpt->layer[l];
    vkb_tensor residual = l == 0 ? a->encoded : gpt->layer[l - 1].residual3;
    int C = gpt->cfg.C, BT = B * T;
    size_t BTC = (size_t)BT * C;

    /* MLP branch: residual3 = residual2 + fcproj(gelu(fc(ln2(residual2)))) */
    linear_backward(gpt, a->dfch_gelu, param(gpt, g, P_FCPROJW, l), param(gpt, g, P_FCPROJB, l),
                    a->dresidual, la->fch_gelu, P_FCPROJW, l, BT, 4 * C, C);
    be->ops->fill(be, cut(a->dfch, 4 * BTC), 0.0f);
    be->ops->gelu_backward(be, a->dfch, la->fch, a->dfch_gelu, 4 * BTC);
    linear_backward(gpt, a->dln, param(gpt, g, P_FCW, l), param(gpt, g, P_FCB, l), a->dfch,
                    la->ln2, P_FCW, l, BT, C, 4 * C);
    be->ops->layernorm_backward(be, a->dresidual, param(gpt, g, P_LN2W, l),
                                param(gpt, g, P_LN2B, l), a->dln, la->residual2,
                                param(gpt, p, P_LN2W, l), la->ln2_mean, la->ln2_rstd, BT, C);
    /* Attention branch: residual2 = residual + attproj(attention(qkv(ln1(residual)))) */
    linear_backward(gpt, a->datty, param(gpt, g, P_ATTPROJW, l), param(gpt, g, P_ATTPROJB, l),
                    a->dresidual, la->atty, P_ATTPROJW, l, BT, C, C);
    attention_backward(gpt, la, B, T);
    linear_backward(gpt, a->dln, param(gpt, g, P_QKVW, l), param(gpt, g, P_QKVB, l), a->dqkv,
                    la->ln1, P_QKVW, l, BT, C, 3 * C);
    be->ops->layernorm_backward(be, a->dresidual, param(gpt, g, P_LN1W, l),
                                param(gpt, g, P_LN1B, l), a->dln, residual,
                                param(gpt, p, P_LN1W, l), la->ln1_mean, la->ln1_rstd, BT, C);
}

void vkm_gpt_record_backward(vka_gpt *gpt, int B, int T) {
    vkb_backend *be = gpt->be;
    const vkb_tensor *p = gpt->params, *g = gpt->grads;
    gpt_acts *a = &gpt->acts;
    int C = gpt->cfg.C, L = gpt->cfg.L, BT = B * T;

    /* The head's backward ran with the head (vkm_gpt_record_head): a->dln holds dlnf. */
    be->ops->fill(be, cut(a->dresidual, (size_t)BT * C), 0.0f);
    be->ops->layernorm_backward(be, a->dresidual, param(gpt, g, P_LNFW, 0),
                                param(gpt, g, P_LNFB, 0), a->dln, gpt->layer[L - 1].residual3,
                                param(gpt, p, P_LNFW, 0), a->lnf_mean, a->lnf_rstd, BT, C);
    for (int l = L - 1; l >= 0; l--) layer_backward(gpt, l, B, T);
    be->ops->encoder_backward(be, g[0], g[1], a->dresidual, gpt->host.inputs, gpt->host.buckets,
                              B, T, C);
}

void vkm_gpt_record_zero_grads(vka_gpt *gpt) {
    for (int i = 0; i < gpt->n_tensors; i++) gpt->be->ops->fill(gpt->be, gpt->grads[i], 0.0f);
}

/* Decoupled weight decay on 2-D weights only (nanoGPT's configure_optimizers). */
static float tensor_decay(const vka_gpt *gpt, int i, float weight_decay) {
    int l;
    return gpt_kind_is_matrix(vkm_gpt_tensor_kind(gpt->cfg.L, i, &l)) ? weight_decay : 0.0f;
}

/* Whether tensor j directly follows tensor j - 1 in the same chunk of every one of the four
 * sets (they are laid out alike), only the alignment padding between them. */
static bool follows(const vka_gpt *gpt, int j) {
    const vkb_tensor *sets[4] = {gpt->params, gpt->grads, gpt->m, gpt->v};
    for (int s = 0; s < 4; s++) {
        vkb_tensor a = sets[s][j - 1], b = sets[s][j];
        size_t end = (a.offset + a.n + VKB_TENSOR_ALIGN - 1) / VKB_TENSOR_ALIGN * VKB_TENSOR_ALIGN;
        if (a.arena != b.arena || a.chunk != b.chunk || b.offset != end) return false;
    }
    return true;
}

void vkm_gpt_record_update(vka_gpt *gpt, float grad_clip, float weight_decay) {
    vkb_backend *be = gpt->be;
    be->ops->grad_norm(be, gpt->norm, gpt->norm_partials, gpt->grads, gpt->n_tensors, grad_clip,
                       gpt->host.hyper); /* loss scaling: hyper's VKB_HYPER_GRAD_SCALE */
    /* One AdamW op per run of adjacent tensors with the same decay (10 for any L instead of
     * 12 L + 4: [wte wpe] [ln1] [qkvw] [qkvb] [attprojw] [attprojb ln2] [fcw] [fcb] [fcprojw]
     * [fcprojb lnf]; each dispatch has a fixed cost, on lavapipe about that of updating 2 M
     * parameters). AdamW is elementwise, so every parameter's update is the one its own op
     * would make; the padding between tensors (zero in all four sets, never read as a
     * tensor) is updated too and stays zero. */
    for (int i = 0, j; i < gpt->n_tensors; i = j) {
        float wd = tensor_decay(gpt, i, weight_decay);
        for (j = i + 1; j < gpt->n_tensors && tensor_decay(gpt, j, weight_decay) == wd &&
                        follows(gpt, j); j++) {
        }
        size_t n = gpt->params[j - 1].offset + gpt->params[j - 1].n - gpt->params[i].offset;
        vkb_tensor run[4] = {gpt->params[i], gpt->grads[i], gpt->m[i], gpt->v[i]};
        for (int s = 0; s < 4; s++) run[s].n = n;
        be->ops->adamw(be, run[0], run[1], run[2], run[3], gpt->host.hyper, gpt->norm, n, wd);
    }
    if (mixed(gpt)) vkm_gpt_record_refresh16(gpt); /* the next pass's 16-bit weights */
    be->ops->copy(be, gpt->host.norm, gpt->norm);
}

void vkm_gpt_record_sample(vka_gpt *gpt, int T) {
    vkm_gpt_record_forward(gpt, 1, T, false);
    vkm_gpt_record_head(gpt, 1, T, true, false, false);
    gpt_head h = vkm_gpt_head_plan(gpt, (size_t)T, true);
    size_t Vp = (size_t)gpt->cfg.Vp;
    for (int i = 0, r0 = 0; r0 < T; i++, r0 += h.rows) {
        size_t n = (size_t)VKA_MIN(h.rows, T - r0);
        vkb_tensor dst = vkb_slice(gpt->host.logits, (size_t)r0 * Vp, n * Vp);
        if (gpt->logits[i].dtype == VKA_F32) gpt->be->ops->copy(gpt->be, dst, cut(gpt->logits[i], n * Vp));
        else gpt->be->ops->convert(gpt->be, dst, cut_elems(gpt->logits[i], n * Vp), n * Vp);
    }
}
