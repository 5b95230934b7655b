/*
 * The attention weights of one layer for one sequence (vka_gpt_attention_weights), for pictures
 * of what the model attends to (`vkattn attention`).
 *
 * They come from a graph of their own, recorded per call, so that they do not depend on how the
 * model's training graph computes attention (a fused op stores no T x T matrix):
 *   the model's forward with every layer's activations kept (vkm_gpt_record_forward, train
 *   layout), then, from layer l's ln1 (B = 1, T, C), which the backward needs and so is kept:
 *     qkv (T, 3C)           = ln1 . qkvw^T + qkvb
 *     q, k, v (NH, T, HS)   = permute(qkv)
 *     preatt (NH, T, T)     = q . k^T
 *     att (NH, T, T)        = causal softmax(preatt / sqrt(HS))     (the composed path's op)
 *   copied to a host tensor and read back. The scratch arenas live for the call only.
 */
#include "model/gpt_internal.h"

#include <math.h>

typedef struct map_scratch {
    vkb_tensor qkv;    /* (T, 3C) */
    vkb_tensor qkvr;   /* (3, NH, T, HS) */
    vkb_tensor preatt; /* (NH, T, T) */
    vkb_tensor att;    /* (NH, T, T) */
} map_scratch;
#define MAP_TENSORS (sizeof(map_scratch) / sizeof(vkb_tensor))

static void record_map(vka_gpt *gpt, const map_scratch *s, vkb_tensor host_att, int T, int l) {
    vkb_backend *be = gpt->be;
    const vkb_tensor *p = gpt->params;
    int C = gpt->cfg.C, L = gpt->cfg.L, NH = gpt->cfg.NH, HS = C / NH;
    size_t TC = (size_t)T * C;
    vkm_gpt_record_forward(gpt, 1, T, true);
    vkb_matmul qkv = {.out = s->qkv, .a = gpt->layer[l].ln1,
                      .b = p[gpt_tensor_index(L, P_QKVW, l)],
                      .bias = p[gpt_tensor_index(L, P_QKVB, l)], .M = T, .N = 3 * C, .K = C,
                      .batch = 1, .trans_b = true, .alpha = 1.0f};
    if (gpt->layer[l].ln1.dtype != VKA_F32) /* mixed precision: ln1 is 16-bit (gpt_acts.c) */
        qkv.b = gpt->w16[vkm_gpt_w16_index(P_QKVW, l)];
    be->ops->matmul(be, &qkv);
    vkb_tensor q = vkb_slice(s->qkvr, 0, TC), k = vkb_slice(s->qkvr, TC, TC),
               v = vkb_slice(s->qkvr, 2 * TC, TC);
    be->ops->permute_forward(be, q, k, v, s->qkv, 1, T, NH, HS);
    vkb_matmul qk = {.out = s->preatt, .a = q, .b = k, .M = T, .N = T, .K = HS, .batch = NH,
                     .trans_b = true, .alpha = 1.0f};
    be->ops->matmul(be, &qk);
    vkb_softmax sm = {.out = s->att, .inp = s->preatt, .R = NH * T, .Tq = T, .Tk = T,
                      .mask_rows = 1, .scale = 1.0f / sqrtf((float)HS), .causal = true};
    be->ops->softmax_forward(be, &sm);
    be->ops->copy(be, host_att, s->att);
}

static vka_result check_args(vka_gpt *gpt, const char *fn, const int32_t *tokens, int T,
                             int layer, const float *out) {
    vka_result r = vka_context_usable(gpt->ctx, fn);
    if (r != VKA_SUCCESS) return r;
    if (!tokens || !out)
        return vka_set_error(gpt->ctx, VKA_ERROR_INVALID_ARGUMENT, "%s: %s is NULL", fn,
                             tokens ? "out" : "tokens");
    if (layer < 0 || layer >= gpt->cfg.L)
        return vka_set_error(gpt->ctx, VKA_ERROR_INVALID_ARGUMENT,
                             "%s: layer = %d is not a layer of this model (0 to L-1 = %d)", fn,
                             layer, gpt->cfg.L - 1);
    if (T < 1 || T > gpt->cfg.max_T)
        return vka_set_error(gpt->ctx, VKA_ERROR_INVALID_ARGUMENT,
                             "%s: T = %d tokens is not in 1 .. the model's max_T = %d", fn, T,
                             gpt->cfg.max_T);
    r = vkm_gpt_check_shape(gpt, fn, 1, T);
    if (r == VKA_SUCCESS) r = vkm_gpt_check_ids(gpt, fn, "tokens", tokens, (size_t)T, 0);
    return r;
}

vka_result vka_gpt_attention_weights(vka_gpt *gpt, const int32_t *tokens, int T, int layer,
                                     float *out) {
    if (!gpt) return VKA_ERROR_INVALID_ARGUMENT;
    const char *fn = "vka_gpt_attention_weights";
    if (vkm_gpt_busy(gpt, fn) != VKA_SUCCESS) return VKA_ERROR_INVALID_ARGUMENT;
    vka_result r = check_args(gpt, fn, tokens, T, layer, out);
    if (r != VKA_SUCCESS) return r;
    vkb_backend *be = gpt->be;
    size_t TC = (size_t)T * gpt->cfg.C, att = (size_t)gpt->cfg.NH * T * T;
    gpt_shape shape = {.B = 1, .T = T, .train = true};
    r = vkm_gpt_reserve(gpt, &shape);
    if (r == VKA_SUCCESS) r = vkm_gpt_refresh16(gpt);
    if (r == VKA_SUCCESS) r = be->rt->write(be, gpt->host.inputs, 0, tokens, (size_t)T);
    if (r != VKA_SUCCESS) return r;

    map_scratch s;
    vkb_tensor host_att;
    vkb_arena *scratch = NULL, *host = NULL;
    vkb_graph *graph = NULL;
    const char *hint = " (the attention weights of this T: give a shorter prompt)";
    size_t sizes[MAP_TENSORS] = {3 * TC, 3 * TC, att, att};
    static const char *const names[MAP_TENSORS] = {"attention map qkv", "attention map q, k, v",
                                                   "attention map preatt", "attention map att"};
    static const char *const host_name[1] = {"attention map weights"};
    r = vkm_gpt_make_arena(gpt, "attention map scratch", VKB_ARENA_DEVICE, sizes, names,
                           (int)MAP_TENSORS, (vkb_tensor *)&s, &scratch, hint);
    if (r == VKA_SUCCESS)
        r = vkm_gpt_make_arena(gpt, "attention map output", VKB_ARENA_HOST, &att, host_name, 1,
                               &host_att, &host, hint);
    if (r == VKA_SUCCESS) {
        if (be->rt->graph_begin(be, &graph)) record_map(gpt, &s, host_att, T, layer);
        r = be->rt->graph_end(be, graph);
    }
    if (r == VKA_SUCCESS) r = be->rt->graph_run(be, graph);
    if (r == VKA_SUCCESS) r = be->rt->read(be, host_att, 0, out, att);
    be->rt->graph_destroy(be, graph);
    vkm_gpt_destroy_arena(gpt, &host, 0);
    vkm_gpt_destroy_arena(gpt, &scratch, vkm_gpt_sum_bytes(sizes, MAP_TENSORS));
    return r;
}
