/*
 * Running the model: forward, forward + backward, one training step, evaluation. Each call
 * checks its inputs, makes sure the arenas hold its (B, T), writes the per-run values into the
 * host arena and replays a graph recorded once per (kind, B, T): one submission and one wait
 * per call (eval: per batch of windows; a training step with gradient accumulation: per
 * micro-batch).
 */
#include "model/gpt_internal.h"

#include "api.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Eval batches windows so that a forward pass covers about this many positions. */
#define GPT_EVAL_TOKENS 2048

/* The graph kinds that end with the grad norm and AdamW (their settings are in the graph). */
static bool updates(gpt_graph_kind kind) { return kind == G_TRAIN || kind == G_TRAIN_ACCUMULATED; }

static void record(vka_gpt *gpt, const gpt_graph *g) {
    switch (g->kind) {
    case G_FORWARD:
        vkm_gpt_record_forward(gpt, g->B, g->T, false);
        vkm_gpt_record_head(gpt, g->B, g->T, true, false, false);
        break;
    case G_FORWARD_LOSS:
    case G_FORWARD_LOSS_LOGITS:
        vkm_gpt_record_forward(gpt, g->B, g->T, false);
        vkm_gpt_record_head(gpt, g->B, g->T, g->kind == G_FORWARD_LOSS_LOGITS, true, false);
        vkm_gpt_record_loss(gpt, g->B, g->T, true);
        break;
    case G_FORWARD_BACKWARD:
    case G_TRAIN:
    case G_ACCUMULATE:
    case G_TRAIN_ACCUMULATED:
        if (g->kind == G_FORWARD_BACKWARD || g->kind == G_TRAIN) vkm_gpt_record_zero_grads(gpt);
        vkm_gpt_record_forward(gpt, g->B, g->T, true);
        vkm_gpt_record_head(gpt, g->B, g->T, false, true, true);
        vkm_gpt_record_loss(gpt, g->B, g->T, false);
        vkm_gpt_record_backward(gpt, g->B, g->T);
        if (updates(g->kind)) vkm_gpt_record_update(gpt, g->grad_clip, g->weight_decay);
        break;
    case G_SAMPLE:
        vkm_gpt_record_sample(gpt, g->T);
        break;
    }
}

static bool same_graph(const gpt_graph *a, const gpt_graph *b) {
    return a->graph && a->kind == b->kind && a->B == b->B && a->T == b->T &&
           a->profiled == b->profiled &&
           (!updates(a->kind) ||
            (a->grad_clip == b->grad_clip && a->weight_decay == b->weight_decay));
}

/* The cache slot for key: its graph if recorded before, else an empty or evicted slot. */
static gpt_graph *graph_slot(vka_gpt *gpt, const gpt_graph *key) {
    for (int i = 0; i < gpt->n_graphs; i++)
        if (same_graph(&gpt->graphs[i], key)) return &gpt->graphs[i];
    gpt_graph *slot = NULL;
    for (int i = 0; i < gpt->n_graphs && !slot; i++)
        if (!gpt->graphs[i].graph) slot = &gpt->graphs[i];
    if (!slot && gpt->n_graphs < GPT_MAX_GRAPHS) slot = &gpt->graphs[gpt->n_graphs++];
    if (!slot) {
        slot = &gpt->graphs[gpt->next_evict];
        gpt->next_evict = (gpt->next_evict + 1) % GPT_MAX_GRAPHS;
        if (gpt->last_run == slot->graph) gpt->last_run = NULL;
        gpt->be->rt->graph_destroy(gpt->be, slot->graph);
    }
    *slot = *key;
    slot->graph = NULL;
    return slot;
}

vka_result vkm_gpt_graph(vka_gpt *gpt, gpt_graph_kind kind, int B, int T, float grad_clip,
                         float weight_decay, vkb_graph **out) {
    vkb_backend *be = gpt->be;
    gpt_graph key = {.kind = kind, .B = B, .T = T, .grad_clip = grad_clip,
                     .weight_decay = weight_decay, .profiled = gpt->ctx->profiling};
    vka_result r16 = vkm_gpt_refresh16(gpt); /* mixed precision: 16-bit weights made, fresh */
    if (r16 != VKA_SUCCESS) return r16;
    gpt_graph *g = graph_slot(gpt, &key);
    if (be->rt->graph_begin(be, &g->graph)) {
        record(gpt, g);
        vka_result r = be->rt->graph_end(be, g->graph);
        if (r != VKA_SUCCESS) {
            be->rt->graph_destroy(be, g->graph);
            g->graph = NULL;
            return r;
        }
    }
    *out = g->graph;
    return VKA_SUCCESS;
}

/* Run the graph of this kind and shape, recording it first if it is new. */
vka_result vkm_gpt_run(vka_gpt *gpt, gpt_graph_kind kind, int B, int T, float grad_clip,
                   float weight_decay) {
    vkb_graph *g = NULL;
    vka_result r = vkm_gpt_graph(gpt, kind, B, T, grad_clip, weight_decay, &g);
    if (r == VKA_SUCCESS) r = gpt->be->rt->graph_run(gpt->be, g);
    gpt->last_run = r == VKA_SUCCESS ? g : NULL;
    return r;
}

vka_result vkm_gpt_handle(vka_gpt *gpt, struct vka_graph **slot, vkb_graph *g,
                          struct vka_graph **out) {
    if (!*slot) *slot = vka_graph_handle_create(gpt->ctx);
    if (!*slot)
        return vka_set_error(gpt->ctx, VKA_ERROR_OUT_OF_HOST_MEMORY, "model: out of memory");
    (*slot)->g = g;
    *out = *slot;
    return VKA_SUCCESS;
}

/* ---------------------------------------------------------------------------------------------
 * Input checks
 * ------------------------------------------------------------------------------------------- */

vka_result vkm_gpt_check_ids(vka_gpt *gpt, const char *fn, const char *what, const int32_t *ids,
                         size_t n, int T) {
    for (size_t i = 0; i < n; i++) {
        if (ids[i] >= 0 && ids[i] < gpt->cfg.V) continue;
        if (T > 0)
            return vka_set_error(gpt->ctx, VKA_ERROR_INVALID_ARGUMENT,
                                 "%s: %s[%zu][%zu] = %d is not a token id of this model "
                                 "(0 to V-1 = %d)",
                                 fn, what, i / (size_t)T, i % (size_t)T, (int)ids[i],
                                 gpt->cfg.V - 1);
        return vka_set_error(gpt->ctx, VKA_ERROR_INVALID_ARGUMENT,
                             "%s: %s[%zu] = %d is not a token id of this model (0 to V-1 = %d)",
                             fn, what, i, (int)ids[i], gpt->cfg.V - 1);
    }
    return VKA_SUCCESS;
}

vka_result vkm_gpt_check_shape(vka_gpt *gpt, const char *fn, int B, int T) {
    if (B <= 0 || T <= 0)
        return vka_set_error(gpt->ctx, VKA_ERROR_INVALID_ARGUMENT,
                             "%s: B = %d and T = %d must be positive", fn, B, T);
    if (T > gpt->cfg.max_T)
        return vka_set_error(gpt->ctx, VKA_ERROR_INVALID_ARGUMENT,
                             "%s: T = %d is longer than the model's max_T = %d", fn, T,
                             gpt->cfg.max_T);
    /* Ops take row counts such as B*NH*T as int. */
    if ((int64_t)B * T * gpt->cfg.NH > INT_MAX)
        return vka_set_error(gpt->ctx, VKA_ERROR_DEVICE_LIMIT,
                             "%s: B*NH*T = %lld attention rows is beyond %d", fn,
                             (long long)B * T * gpt->cfg.NH, INT_MAX);
    return VKA_SUCCESS;
}

/* Targets are token ids, or -1: the position counts for nothing (PyTorch's ignore_index); at
 * least one must count. */
static vka_result check_targets(vka_gpt *gpt, const char *fn, const int32_t *targets, size_t n,
                                int T) {
    size_t counted = 0;
    for (size_t i = 0; i < n; i++) {
        if (targets[i] == -1) continue;
        counted++;
        if (targets[i] >= 0 && targets[i] < gpt->cfg.V) continue;
        return vka_set_error(gpt->ctx, VKA_ERROR_INVALID_ARGUMENT,
                             "%s: targets[%zu][%zu] = %d is not a token id of this model "
                             "(0 to V-1 = %d) nor -1 (ignored)",
                             fn, i / (size_t)T, i % (size_t)T, (int)targets[i], gpt->cfg.V - 1);
    }
    if (counted == 0)
        return vka_set_error(gpt->ctx, VKA_ERROR_INVALID_ARGUMENT,
                             "%s: every target is -1 (ignored): no position to score", fn);
    return VKA_SUCCESS;
}

static size_t counted_targets(const int32_t *targets, size_t n) {
    size_t c = 0;
    for (size_t i = 0; i < n; i++) c += targets[i] != -1;
    return c;
}

/* inputs and targets (N*B, T): N micro-batches of the shape (B, T) (N = 1: no accumulation). */
static vka_result check_batch(vka_gpt *gpt, const char *fn, const int32_t *inputs,
                              const int32_t *targets, bool need_targets, int B, int T, int N) {
    if (!inputs || (need_targets && !targets))
        return vka_set_error(gpt->ctx, VKA_ERROR_INVALID_ARGUMENT, "%s: %s is NULL", fn,
                             inputs ? "targets" : "inputs");
    vka_result r = vkm_gpt_check_shape(gpt, fn, B, T);
    if (r == VKA_SUCCESS && (int64_t)N * B > INT_MAX)
        return vka_set_error(gpt->ctx, VKA_ERROR_INVALID_ARGUMENT,
                             "%s: grad_accum = %d micro-batches of B = %d rows is %lld rows, "
                             "beyond %d", fn, N, B, (long long)N * B, INT_MAX);
    size_t n = (size_t)N * B * T;
    if (r == VKA_SUCCESS) r = vkm_gpt_check_ids(gpt, fn, "inputs", inputs, n, T);
    if (r == VKA_SUCCESS && targets) r = check_targets(gpt, fn, targets, n, T);
    return r;
}

/* Write inputs, targets (optional, with 1 / their count: of all the step's micro-batches when
 * all_counted is not 0) and, for backward, the encoder buckets. */
static vka_result write_batch(vka_gpt *gpt, const int32_t *inputs, const int32_t *targets,
                              int B, int T, bool buckets, float loss_scale, size_t all_counted) {
    vkb_backend *be = gpt->be;
    size_t BT = (size_t)B * T;
    vka_result r = be->rt->write(be, gpt->host.inputs, 0, inputs, BT);
    if (r == VKA_SUCCESS && targets) r = be->rt->write(be, gpt->host.targets, 0, targets, BT);
    if (r == VKA_SUCCESS && targets) {
        gpt->counted = counted_targets(targets, BT);
        /* loss scaling: S times, exactly (S is a power of two) */
        size_t counted = all_counted ? all_counted : gpt->counted;
        float dloss = (float)(1.0 / (double)counted) * loss_scale;
        r = be->rt->write(be, gpt->host.dloss, 0, &dloss, 1);
    }
    if (r == VKA_SUCCESS && buckets) {
        vka_encoder_buckets(inputs, (int)BT, gpt->bucket_buf);
        r = be->rt->write(be, gpt->host.buckets, 0, gpt->bucket_buf, VKA_BUCKETS_SIZE(BT));
    }
    return r;
}

/* The graph's loss is the mean over all B*T positions, ignored ones adding 0: rescaled to the
 * mean over the counted ones. */
static vka_result read_loss(vka_gpt *gpt, float *loss, size_t BT) {
    if (!loss) return VKA_SUCCESS;
    vka_result r = gpt->be->rt->read(gpt->be, gpt->host.loss, 0, loss, 1);
    if (r == VKA_SUCCESS && gpt->counted != BT)
        *loss = (float)((double)*loss * (double)BT / (double)gpt->counted);
    return r;
}

/* ---------------------------------------------------------------------------------------------
 * Public run functions
 * ------------------------------------------------------------------------------------------- */

/* The 16-bit logits (mixed precision) of rows [row0, row0 + n) of block, widened into logits
 * (n, V): the words holding them read into buf, then each row's V elements converted. */
static vka_result read_logits16(vka_gpt *gpt, vkb_tensor block, size_t row0, size_t n,
                                float *logits, uint32_t *buf) {
    size_t V = (size_t)gpt->cfg.V, Vp = (size_t)gpt->cfg.Vp;
    size_t e0 = row0 * Vp, w0 = e0 / 2, w1 = ((row0 + n) * Vp + 1) / 2;
    vka_result r = gpt->be->rt->read(gpt->be, block, w0, buf, w1 - w0);
    /* element e of the block is half e of the words (element 2i the low half: little-endian) */
    const uint16_t *h = (const uint16_t *)(const void *)buf;
    for (size_t k = 0; r == VKA_SUCCESS && k < n; k++)
        r = vka_convert(VKA_F32, logits + k * V, (vka_dtype)block.dtype,
                        h + (e0 - 2 * w0) + k * Vp, V);
    return r;
}

/* Copy the logits (B, T, Vp), kept in blocks of rows (vkm_gpt_record_head), out as (B, T, V),
 * through a host buffer of at most about 16 MiB when the padding columns must go (or the
 * logits are 16-bit). */
static vka_result read_logits(vka_gpt *gpt, float *logits, size_t BT) {
    size_t V = (size_t)gpt->cfg.V, Vp = (size_t)gpt->cfg.Vp;
    gpt_head h = vkm_gpt_head_plan(gpt, BT, true);
    if (gpt->logits[0].dtype != VKA_F32) {
        size_t piece = VKA_MAX((size_t)(16 << 20) / (Vp * 2), 1);
        uint32_t *buf = vka_malloc(gpt->ctx, (VKA_MIN(piece, BT) * Vp / 2 + 2) * sizeof *buf);
        if (!buf) return vka_set_error(gpt->ctx, VKA_ERROR_OUT_OF_HOST_MEMORY, "logits: out of memory");
        vka_result r = VKA_SUCCESS;
        for (size_t b0 = 0; r == VKA_SUCCESS && b0 < BT; b0 += (size_t)h.rows) {
            size_t rows = VKA_MIN((size_t)h.rows, BT - b0);
            for (size_t i = 0; r == VKA_SUCCESS && i < rows; i += piece)
                r = read_logits16(gpt, gpt->logits[b0 / (size_t)h.rows], i,
                                  VKA_MIN(piece, rows - i), logits + (b0 + i) * V, buf);
        }
        vka_free(gpt->ctx, buf);
        return r;
    }
    size_t piece = V == Vp ? (size_t)h.rows : VKA_MAX((size_t)(16 << 20) / (Vp * 4), 1);
    float *buf = V == Vp ? NULL : vka_malloc(gpt->ctx, VKA_MIN(piece, BT) * Vp * sizeof *buf);
    if (V != Vp && !buf)
        return vka_set_error(gpt->ctx, VKA_ERROR_OUT_OF_HOST_MEMORY, "logits: out of memory");
    vka_result r = VKA_SUCCESS;
    for (size_t b0 = 0; r == VKA_SUCCESS && b0 < BT; b0 += (size_t)h.rows) {
        vkb_tensor block = gpt->logits[b0 / (size_t)h.rows];
        size_t rows = VKA_MIN((size_t)h.rows, BT - b0);
        for (size_t i = 0; r == VKA_SUCCESS && i < rows; i += piece) {
            size_t n = VKA_MIN(piece, rows - i);
            float *dst = logits + (b0 + i) * V;
            r = gpt->be->rt->read(gpt->be, block, i * Vp, buf ? buf : dst, n * Vp);
            for (size_t k = 0; buf && r == VKA_SUCCESS && k < n; k++)
                memcpy(dst + k * V, buf + k * Vp, V * sizeof *buf);
        }
    }
    vka_free(gpt->ctx, buf);
    return r;
}

/* _prepare may start: no other pass is pending. */
static vka_result can_prepare(vka_gpt *gpt, const char *fn, vka_graph **graph) {
    if (graph) *graph = NULL;
    if (!graph) return vka_set_error(gpt->ctx, VKA_ERROR_INVALID_ARGUMENT, "%s: graph is NULL", fn);
    if (gpt->pending)
        return vka_set_error(gpt->ctx, VKA_ERROR_INVALID_ARGUMENT,
                             "%s: the pass of the last _prepare has not been finished (call its "
                             "_finish, or vka_gpt_cancel)", fn);
    return VKA_SUCCESS;
}

/* Hand out the graph of kind as the pending pass. */
static vka_result hand_out(vka_gpt *gpt, gpt_graph_kind kind, int B, int T, float grad_clip,
                           float weight_decay, vka_graph **graph) {
    vkb_graph *g = NULL;
    vka_result r = vkm_gpt_graph(gpt, kind, B, T, grad_clip, weight_decay, &g);
    if (r == VKA_SUCCESS) r = vkm_gpt_handle(gpt, &gpt->handle, g, graph);
    if (r != VKA_SUCCESS) return r;
    gpt->pending = true;
    gpt->pending_kind = kind;
    gpt->pending_B = B;
    gpt->pending_T = T;
    gpt->pending_graph = g;
    return VKA_SUCCESS;
}

/* _finish of a pass of one of the kinds: waits for vkattn's own submission of it, if any. */
static vka_result take_pending(vka_gpt *gpt, const char *fn, bool train) {
    bool ok = gpt->pending && (train ? gpt->pending_kind == G_TRAIN : gpt->pending_kind != G_TRAIN);
    if (!ok)
        return vka_set_error(gpt->ctx, VKA_ERROR_INVALID_ARGUMENT,
                             "%s: no pass of this kind was prepared (call its _prepare first)", fn);
    gpt->pending = false;
    vka_result r = vkb_graph_wait(gpt->be, gpt->pending_graph, UINT64_MAX);
    gpt->last_run = r == VKA_SUCCESS ? gpt->pending_graph : NULL;
    return r;
}

vka_result vkm_gpt_busy(vka_gpt *gpt, const char *fn) {
    if (!gpt->pending) return VKA_SUCCESS;
    return vka_set_error(gpt->ctx, VKA_ERROR_INVALID_ARGUMENT,
                         "%s: a pass handed out by a vka_gpt_*_prepare call is not finished "
                         "(call its _finish, or vka_gpt_cancel)", fn);
}

void vka_gpt_cancel(vka_gpt *gpt) {
    if (gpt && gpt->pending) {
        vkb_graph_wait(gpt->be, gpt->pending_graph, UINT64_MAX);
        gpt->pending = false;
    }
}

vka_result vka_gpt_forward_prepare(vka_gpt *gpt, const int32_t *inputs, const int32_t *targets,
                                   int B, int T, bool logits, vka_graph **graph) {
    if (!gpt) return VKA_ERROR_INVALID_ARGUMENT;
    const char *fn = "vka_gpt_forward";
    vka_result r = can_prepare(gpt, fn, graph);
    if (r == VKA_SUCCESS) r = check_batch(gpt, fn, inputs, targets, false, B, T, 1);
    if (r != VKA_SUCCESS) return r;
    logits = logits || !targets;
    gpt_shape shape = {.B = B, .T = T, .logits = logits};
    r = vkm_gpt_reserve(gpt, &shape);
    if (r == VKA_SUCCESS) r = write_batch(gpt, inputs, targets, B, T, false, 1.0f, 0);
    gpt_graph_kind kind = !targets ? G_FORWARD : logits ? G_FORWARD_LOSS_LOGITS : G_FORWARD_LOSS;
    if (r == VKA_SUCCESS) r = hand_out(gpt, kind, B, T, 0, 0, graph);
    gpt->pending_logits = logits;
    return r;
}

vka_result vka_gpt_forward_finish(vka_gpt *gpt, float *loss, float *logits) {
    if (!gpt) return VKA_ERROR_INVALID_ARGUMENT;
    const char *fn = "vka_gpt_forward_finish";
    if (gpt->pending && gpt->pending_kind != G_TRAIN && !gpt->pending_logits && logits)
        return vka_set_error(gpt->ctx, VKA_ERROR_INVALID_ARGUMENT,
                             "%s: the pass was prepared without logits", fn);
    bool with_loss = gpt->pending && gpt->pending_kind != G_FORWARD;
    vka_result r = take_pending(gpt, fn, false);
    if (r != VKA_SUCCESS) return r;
    size_t BT = (size_t)gpt->pending_B * gpt->pending_T;
    if (loss && !with_loss)
        *loss = NAN;
    else if (loss)
        r = read_loss(gpt, loss, BT);
    if (r == VKA_SUCCESS && logits) r = read_logits(gpt, logits, BT);
    return r;
}

vka_result vka_gpt_forward(vka_gpt *gpt, const int32_t *inputs, const int32_t *targets, int B,
                           int T, float *loss, float *logits) {
    if (!gpt) return VKA_ERROR_INVALID_ARGUMENT;
    vka_graph *graph = NULL;
    vka_result r = vka_gpt_forward_prepare(gpt, inputs, targets, B, T, logits != NULL, &graph);
    if (r != VKA_SUCCESS) return r;
    r = gpt->be->rt->graph_run(gpt->be, gpt->pending_graph);
    if (r != VKA_SUCCESS) {
        gpt->pending = false;
        return r;
    }
    return vka_gpt_forward_finish(gpt, targets ? loss : NULL, logits);
}

vka_result vka_gpt_forward_backward(vka_gpt *gpt, const int32_t *inputs, const int32_t *targets,
                                    int B, int T, float *loss) {
    if (!gpt) return VKA_ERROR_INVALID_ARGUMENT;
    vka_result r = vkm_gpt_busy(gpt, "vka_gpt_forward_backward");
    if (r == VKA_SUCCESS) r = check_batch(gpt, "vka_gpt_forward_backward", inputs, targets, true, B, T, 1);
    if (r == VKA_SUCCESS) r = vkm_gpt_ensure_grads(gpt);
    if (r != VKA_SUCCESS) return r;
    gpt_shape shape = {.B = B, .T = T, .train = true};
    r = vkm_gpt_reserve(gpt, &shape);
    if (r == VKA_SUCCESS) r = write_batch(gpt, inputs, targets, B, T, true, 1.0f, 0);
    if (r == VKA_SUCCESS) r = vkm_gpt_run(gpt, G_FORWARD_BACKWARD, B, T, 0, 0);
    if (r == VKA_SUCCESS) {
        gpt->have_grads = true;
        r = read_loss(gpt, loss, (size_t)B * T);
    }
    return r;
}

/* The optimizer settings with defaults filled in (grad_accum 0 as 1), or an error naming the
 * bad field. */
static vka_result adamw_settings(vka_gpt *gpt, const vka_adamw_desc *opt, vka_adamw_desc *out) {
    if (!opt)
        return vka_set_error(gpt->ctx, VKA_ERROR_INVALID_ARGUMENT, "vka_gpt_train_step: opt is NULL");
    vka_adamw_desc d = *opt;
    if (d.grad_accum < 0 || d.grad_accum > VKA_GPT_MAX_GRAD_ACCUM)
        return vka_set_error(gpt->ctx, VKA_ERROR_INVALID_ARGUMENT,
                             "vka_gpt_train_step: grad_accum = %d is outside 0..%d (0 or 1: no "
                             "accumulation)", d.grad_accum, VKA_GPT_MAX_GRAD_ACCUM);
    if (d.grad_accum == 0) d.grad_accum = 1;
    if (d.beta1 == 0.0f) d.beta1 = 0.9f;
    if (d.beta2 == 0.0f) d.beta2 = 0.999f;
    if (d.eps == 0.0f) d.eps = 1e-8f;
    const struct {
        const char *name;
        float value;
        bool ok;
    } checks[] = {
        {"lr", d.lr, isfinite(d.lr) && d.lr >= 0.0f},
        {"beta1", d.beta1, d.beta1 > 0.0f && d.beta1 < 1.0f},
        {"beta2", d.beta2, d.beta2 > 0.0f && d.beta2 < 1.0f},
        {"eps", d.eps, isfinite(d.eps) && d.eps > 0.0f},
        {"weight_decay", d.weight_decay, isfinite(d.weight_decay) && d.weight_decay >= 0.0f},
        {"grad_clip", d.grad_clip, isfinite(d.grad_clip) && d.grad_clip >= 0.0f},
    };
    for (size_t i = 0; i < VKA_ARRAY_LEN(checks); i++)
        if (!checks[i].ok)
            return vka_set_error(gpt->ctx, VKA_ERROR_INVALID_ARGUMENT,
                                 "vka_gpt_train_step: AdamW %s = %g is out of range",
                                 checks[i].name, (double)checks[i].value);
    *out = d;
    return VKA_SUCCESS;
}

/* The step's AdamW scalars; bias corrections for t = step + 1, computed in double. */
static void adamw_hyper(const vka_adamw_desc *d, uint64_t step, float *hyper) {
    double t = (double)(step + 1);
    memset(hyper, 0, VKA_HYPER_COUNT * sizeof *hyper);
    hyper[VKA_HYPER_LR] = d->lr;
    hyper[VKA_HYPER_BETA1] = d->beta1;
    hyper[VKA_HYPER_BETA2] = d->beta2;
    hyper[VKA_HYPER_EPS] = d->eps;
    hyper[VKA_HYPER_BC1] = (float)(1.0 - pow((double)d->beta1, t));
    hyper[VKA_HYPER_BC2] = (float)(1.0 - pow((double)d->beta2, t));
}

/* The checks and allocations of a training step on inputs (N*B, T) of N micro-batches; the
 * settings with defaults into *d. */
static vka_result train_setup(vka_gpt *gpt, const char *fn, const int32_t *inputs,
                              const int32_t *targets, int B, int T, const vka_adamw_desc *opt,
                              vka_adamw_desc *d) {
    vka_result r = adamw_settings(gpt, opt, d);
    if (r == VKA_SUCCESS) r = check_batch(gpt, fn, inputs, targets, true, B, T, d->grad_accum);
    if (r == VKA_SUCCESS) r = vkm_gpt_ensure_grads(gpt);
    if (r == VKA_SUCCESS) r = vkm_gpt_ensure_opt(gpt);
    gpt_shape shape = {.B = B, .T = T, .train = true};
    if (r == VKA_SUCCESS) r = vkm_gpt_reserve(gpt, &shape);
    return r;
}

/* The step's AdamW scalars and the loss scale's inverse into host.hyper. */
static vka_result write_hyper(vka_gpt *gpt, const vka_adamw_desc *d, float S) {
    float hyper[VKA_HYPER_COUNT];
    adamw_hyper(d, gpt->step, hyper);
    hyper[VKB_HYPER_GRAD_SCALE] = 1.0f / S; /* exact: S is a power of two */
    return gpt->be->rt->write(gpt->be, gpt->host.hyper, 0, hyper, VKA_HYPER_COUNT);
}

vka_result vka_gpt_train_step_prepare(vka_gpt *gpt, const int32_t *inputs,
                                      const int32_t *targets, int B, int T,
                                      const vka_adamw_desc *opt, vka_graph **graph) {
    if (!gpt) return VKA_ERROR_INVALID_ARGUMENT;
    const char *fn = "vka_gpt_train_step";
    vka_adamw_desc d = {0};
    vka_result r = can_prepare(gpt, fn, graph);
    if (r == VKA_SUCCESS && opt && opt->grad_accum > 1)
        return vka_set_error(gpt->ctx, VKA_ERROR_INVALID_ARGUMENT,
                             "vka_gpt_train_step_prepare: grad_accum = %d: a prepared step is "
                             "one graph, without accumulation (vka_gpt_train_step runs it)",
                             opt->grad_accum);
    if (r == VKA_SUCCESS) r = train_setup(gpt, fn, inputs, targets, B, T, opt, &d);
    if (r != VKA_SUCCESS) return r;
    float S = gpt->scaling ? gpt->loss_scale : 1.0f; /* dynamic loss scaling (gpt_mixed.c) */
    r = write_batch(gpt, inputs, targets, B, T, true, S, 0);
    if (r == VKA_SUCCESS) r = write_hyper(gpt, &d, S);
    if (r == VKA_SUCCESS) r = hand_out(gpt, G_TRAIN, B, T, d.grad_clip, d.weight_decay, graph);
    return r;
}

/* After the step's update ran: the loss scale's bookkeeping and the AdamW t. */
static vka_result step_done(vka_gpt *gpt, float *grad_norm) {
    float norm = 0.0f;
    vka_result r = VKA_SUCCESS;
    if (gpt->scaling) r = gpt->be->rt->read(gpt->be, gpt->host.norm, 0, &norm, 1);
    /* a step skipped by loss scaling (overflowed gradients: AdamW changed nothing) is no AdamW
     * step: its bias correction's t does not advance */
    if (r == VKA_SUCCESS && vkm_gpt_scale_step(gpt, norm)) gpt->step++;
    gpt->have_grads = true; /* scaled by the step's S when loss scaling is on */
    if (r == VKA_SUCCESS && grad_norm) r = gpt->be->rt->read(gpt->be, gpt->host.norm, 0, grad_norm, 1);
    return r;
}

vka_result vka_gpt_train_step_finish(vka_gpt *gpt, float *loss, float *grad_norm) {
    if (!gpt) return VKA_ERROR_INVALID_ARGUMENT;
    vka_result r = take_pending(gpt, "vka_gpt_train_step_finish", true);
    if (r == VKA_SUCCESS) r = step_done(gpt, grad_norm);
    if (r == VKA_SUCCESS) r = read_loss(gpt, loss, (size_t)gpt->pending_B * gpt->pending_T);
    return r;
}

/* A step of N > 1 micro-batches (vka_gpt_train_step's docstring): one graph each, the first
 * zeroing the gradients, the last updating; every micro-batch's dloss is 1 / the counted
 * targets of all N. */
static vka_result train_accumulated(vka_gpt *gpt, const int32_t *inputs, const int32_t *targets,
                                    int B, int T, const vka_adamw_desc *opt, float *loss,
                                    float *grad_norm) {
    const char *fn = "vka_gpt_train_step";
    vka_adamw_desc d = {0};
    vka_result r = vkm_gpt_busy(gpt, fn);
    if (r == VKA_SUCCESS) r = train_setup(gpt, fn, inputs, targets, B, T, opt, &d);
    if (r != VKA_SUCCESS) return r;
    int N = d.grad_accum;
    size_t BT = (size_t)B * T, all = counted_targets(targets, (size_t)N * BT);
    float S = gpt->scaling ? gpt->loss_scale : 1.0f;
    r = write_hyper(gpt, &d, S);
    double sum = 0.0; /* of the counted positions' losses */
    for (int k = 0; r == VKA_SUCCESS && k < N; k++) {
        gpt_graph_kind kind = k == 0 ? G_FORWARD_BACKWARD : k < N - 1 ? G_ACCUMULATE
                                                                      : G_TRAIN_ACCUMULATED;
        float part = 0.0f; /* the graph's loss: the mean over B*T, ignored positions adding 0 */
        r = write_batch(gpt, inputs + (size_t)k * BT, targets + (size_t)k * BT, B, T, true, S, all);
        if (r == VKA_SUCCESS) r = vkm_gpt_run(gpt, kind, B, T, d.grad_clip, d.weight_decay);
        if (r == VKA_SUCCESS) r = gpt->be->rt->read(gpt->be, gpt->host.loss, 0, &part, 1);
        sum += (double)part * (double)BT;
    }
    if (r == VKA_SUCCESS) r = step_done(gpt, grad_norm);
    if (r == VKA_SUCCESS && loss) *loss = (float)(sum / (double)all);
    return r;
}

vka_result vka_gpt_train_step(vka_gpt *gpt, const int32_t *inputs, const int32_t *targets,
                              int B, int T, const vka_adamw_desc *opt, float *loss,
                              float *grad_norm) {
    if (!gpt) return VKA_ERROR_INVALID_ARGUMENT;
    if (opt && opt->grad_accum > 1)
        return train_accumulated(gpt, inputs, targets, B, T, opt, loss, grad_norm);
    vka_graph *graph = NULL;
    vka_result r = vka_gpt_train_step_prepare(gpt, inputs, targets, B, T, opt, &graph);
    if (r != VKA_SUCCESS) return r;
    r = gpt->be->rt->graph_run(gpt->be, gpt->pending_graph);
    if (r != VKA_SUCCESS) {
        gpt->pending = false;
        return r;
    }
    return vka_gpt_train_step_finish(gpt, loss, grad_norm);
}

vka_result vka_gpt_eval(vka_gpt *gpt, const int32_t *tokens, size_t n, int T, double *loss,
                        size_t *windows) {
    if (!gpt) return VKA_ERROR_INVALID_ARGUMENT;
    const char *fn = "vka_gpt_eval";
    if (vkm_gpt_busy(gpt, fn) != VKA_SUCCESS) return VKA_ERROR_INVALID_ARGUMENT;
    if (T == 0) T = gpt->cfg.max_T;
    vka_result r = vkm_gpt_check_shape(gpt, fn, 1, T);
    if (r != VKA_SUCCESS) return r;
    if (!tokens || n < (size_t)T + 1)
        return vka_set_error(gpt->ctx, VKA_ERROR_INVALID_ARGUMENT,
                             "%s: %zu tokens, fewer than one window of T+1 = %d", fn,
                             tokens ? n : 0, T + 1);
    r = vkm_gpt_check_ids(gpt, fn, "tokens", tokens, n, 0);
    if (r != VKA_SUCCESS) return r;
    size_t n_windows = (n - 1) / (size_t)T;
    int per = (int)VKA_MIN(n_windows, (size_t)VKA_MAX(1, GPT_EVAL_TOKENS / T));
    size_t cap = (size_t)per * T;
    int32_t *inputs = vka_malloc(gpt->ctx, cap * sizeof *inputs);
    int32_t *targets = vka_malloc(gpt->ctx, cap * sizeof *targets);
    float *losses = vka_malloc(gpt->ctx, cap * sizeof *losses);
    if (!inputs || !targets || !losses) {
        r = vka_set_error(gpt->ctx, VKA_ERROR_OUT_OF_HOST_MEMORY, "%s: out of memory", fn);
        goto done;
    }
    gpt_shape shape = {.B = per, .T = T};
    r = vkm_gpt_reserve(gpt, &shape);
    double sum = 0.0;
    for (size_t w0 = 0; r == VKA_SUCCESS && w0 < n_windows; w0 += (size_t)per) {
        /* The last batch holds the windows that are left (its own graph). */
        int B = (int)VKA_MIN((size_t)per, n_windows - w0);
        for (int b = 0; b < B; b++) {
            const int32_t *win = tokens + (w0 + (size_t)b) * (size_t)T;
            memcpy(inputs + (size_t)b * T, win, (size_t)T * sizeof *inputs);
            memcpy(targets + (size_t)b * T, win + 1, (size_t)T * sizeof *targets);
        }
        r = write_batch(gpt, inputs, targets, B, T, false, 1.0f, 0);
        if (r == VKA_SUCCESS) r = vkm_gpt_run(gpt, G_FORWARD_LOSS, B, T, 0, 0);
        if (r == VKA_SUCCESS) r = gpt->be->rt->read(gpt->be, gpt->host.losses, 0, losses, (size_t)B * T);
        for (size_t i = 0; r == VKA_SUCCESS && i < (size_t)B * T; i++) sum += losses[i];
    }
    if (r == VKA_SUCCESS) {
        if (loss) *loss = sum / ((double)n_windows * T);
        if (windows) *windows = n_windows;
    }
done:
    vka_free(gpt->ctx, inputs);
    vka_free(gpt->ctx, targets);
    vka_free(gpt->ctx, losses);
    return r;
}

vka_result vka_gpt_times(vka_gpt *gpt, double *total_ms, vka_op_time *out, int cap, int *count) {
    if (!gpt) return VKA_ERROR_INVALID_ARGUMENT;
    if (cap < 0)
        return vka_set_error(gpt->ctx, VKA_ERROR_INVALID_ARGUMENT,
                             "vka_gpt_times: cap = %d is negative", cap);
    if (!gpt->last_run)
        return vka_set_error(gpt->ctx, VKA_ERROR_INVALID_ARGUMENT,
                             "vka_gpt_times: no forward pass or training step has run yet");
    return gpt->be->rt->graph_times(gpt->be, gpt->last_run, total_ms, out, cap, count);
}
