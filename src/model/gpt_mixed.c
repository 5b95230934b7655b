/*
 * Mixed precision (vka_gpt_set_precision), as PyTorch's autocast and llm.c run it: the model's
 * matrix products read 16-bit copies of their weights and of their input activations (and, in
 * backward, of the output gradients), accumulate in float32 and write float32; the master
 * weights, the gradients, AdamW's m and v and every other op stay float32.
 *
 * The copies: w16, one 16-bit tensor for wte (the tied LM head) and one for each layer's qkvw,
 * attprojw, fcw and fcprojw, in an arena of their own (made on first use, freed when the model
 * goes back to float32). A training step's graph refreshes them after AdamW; a write of the
 * parameters from the host (init, load, vka_gpt_set_params, a resumed state) marks them stale,
 * and the next pass refreshes them first (vkm_gpt_refresh16: one small graph, once).
 * Activations: the inputs of the linear layers that only they read (ln1, ln2, fch_gelu) are
 * written in 16 bits by layernorm and GELU (the rounding the products would apply, so the same
 * bits in half the memory); the others (atty, lnf) and the output gradients are rounded into
 * two scratch tensors of the activation arena, acts.x16 and acts.d16, viewed as 16-bit
 * (vkm_gpt_view16), reused by every product.
 */
#include "model/gpt_internal.h"

#include <math.h>
#include <string.h>

/* The weight kinds that have 16-bit copies, in the order of each layer's four. */
static const gpt_param_kind LAYER_KINDS[4] = {P_QKVW, P_ATTPROJW, P_FCW, P_FCPROJW};

int vkm_gpt_w16_count(const vka_gpt *gpt) { return 1 + 4 * gpt->cfg.L; }

int vkm_gpt_w16_index(gpt_param_kind kind, int l) {
    for (int j = 0; j < 4; j++)
        if (LAYER_KINDS[j] == kind) return 1 + 4 * l + j;
    return kind == P_WTE ? 0 : -1;
}

/* The parameter tensor (index into gpt->params) that w16 tensor i copies. */
static int w16_source(const vka_gpt *gpt, int i) {
    if (i == 0) return gpt_tensor_index(gpt->cfg.L, P_WTE, 0);
    return gpt_tensor_index(gpt->cfg.L, LAYER_KINDS[(i - 1) % 4], (i - 1) / 4);
}

vkb_tensor vkm_gpt_view16(vkb_tensor words, uint8_t dtype, size_t n) {
    /* never past the words: an op given a too-small view then fails its check by name */
    if (n > 2 * words.n) n = 2 * words.n;
    vkb_tensor t = vkb_slice(words, 0, (n + 1) / 2);
    t.dtype = dtype;
    t.pad16 = (uint8_t)(n & 1);
    return t;
}

static uint64_t w16_bytes(const vka_gpt *gpt) {
    uint64_t total = 0;
    for (int i = 0; i < vkm_gpt_w16_count(gpt); i++)
        total += (uint64_t)(gpt->tensor_sizes[w16_source(gpt, i)] + 1) / 2 * 4;
    return total;
}

void vkm_gpt_free_w16(vka_gpt *gpt) {
    if (gpt->w16_arena) vkm_gpt_destroy_arena(gpt, &gpt->w16_arena, w16_bytes(gpt));
    vka_free(gpt->ctx, gpt->w16);
    gpt->w16 = NULL;
    gpt->w16_fresh = false;
}

static vka_result ensure_w16(vka_gpt *gpt) {
    if (gpt->w16_arena) return VKA_SUCCESS;
    int n = vkm_gpt_w16_count(gpt);
    size_t *sizes = vka_malloc(gpt->ctx, (size_t)n * sizeof *sizes);
    const char **names = vka_malloc(gpt->ctx, (size_t)n * (sizeof *names + 48));
    vkb_tensor *words = vka_malloc(gpt->ctx, (size_t)n * sizeof *words);
    if (!gpt->w16) gpt->w16 = vka_calloc(gpt->ctx, (size_t)n, sizeof *gpt->w16);
    vka_result r = VKA_SUCCESS;
    if (!sizes || !names || !words || !gpt->w16) {
        r = vka_set_error(gpt->ctx, VKA_ERROR_OUT_OF_HOST_MEMORY, "model: out of memory");
        goto done;
    }
    char *text = (char *)(names + n);
    for (int i = 0; i < n; i++) {
        int src = w16_source(gpt, i), l;
        gpt_param_kind k = vkm_gpt_tensor_kind(gpt->cfg.L, src, &l);
        sizes[i] = (gpt->tensor_sizes[src] + 1) / 2; /* 32-bit words of two 16-bit elements */
        names[i] = text + (size_t)i * 48;
        if (k == P_WTE) snprintf(text + (size_t)i * 48, 48, "%s (16-bit copy)", vkm_gpt_kind_name(k));
        else snprintf(text + (size_t)i * 48, 48, "%s (layer %d, 16-bit copy)", vkm_gpt_kind_name(k), l);
    }
    r = vkm_gpt_make_arena(gpt, "16-bit weights", VKB_ARENA_DEVICE, sizes, names, n, words,
                           &gpt->w16_arena, " (mixed precision's copies of the weights)");
    if (r != VKA_SUCCESS) goto done;
    for (int i = 0; i < n; i++)
        gpt->w16[i] = vkm_gpt_view16(words[i], (uint8_t)gpt->precision,
                                     gpt->tensor_sizes[w16_source(gpt, i)]);
    gpt->w16_fresh = false;
done:
    vka_free(gpt->ctx, sizes);
    vka_free(gpt->ctx, names);
    vka_free(gpt->ctx, words);
    return r;
}

vkb_tensor vkm_gpt_round16(vka_gpt *gpt, vkb_tensor scratch, vkb_tensor src, size_t n) {
    vkb_tensor h = vkm_gpt_view16(scratch, (uint8_t)gpt->precision, n);
    gpt->be->ops->convert(gpt->be, h, src, n);
    return h;
}

void vkm_gpt_record_refresh16(vka_gpt *gpt) {
    for (int i = 0; i < vkm_gpt_w16_count(gpt); i++) {
        int src = w16_source(gpt, i);
        gpt->be->ops->convert(gpt->be, gpt->w16[i], gpt->params[src], gpt->tensor_sizes[src]);
    }
}

vka_result vkm_gpt_refresh16(vka_gpt *gpt) {
    if (gpt->precision == VKA_F32) return VKA_SUCCESS;
    vka_result r = ensure_w16(gpt);
    if (r != VKA_SUCCESS || gpt->w16_fresh) return r;
    vkb_backend *be = gpt->be;
    vkb_graph *g = NULL;
    be->rt->graph_begin(be, &g);
    vkm_gpt_record_refresh16(gpt);
    r = be->rt->graph_end(be, g);
    if (r == VKA_SUCCESS) r = be->rt->graph_run(be, g);
    if (g) be->rt->graph_destroy(be, g);
    gpt->w16_fresh = r == VKA_SUCCESS;
    return r;
}

vka_result vka_gpt_set_precision(vka_gpt *gpt, vka_dtype precision) {
    if (!gpt) return VKA_ERROR_INVALID_ARGUMENT;
    if ((unsigned)precision > VKA_F16)
        return vka_set_error(gpt->ctx, VKA_ERROR_INVALID_ARGUMENT,
                             "vka_gpt_set_precision: %d is not a vka_dtype (0 f32, 1 bf16, 2 f16)",
                             (int)precision);
    if (precision == gpt->precision) return VKA_SUCCESS;
    vka_result r = vkm_gpt_busy(gpt, "vka_gpt_set_precision");
    if (r != VKA_SUCCESS) return r;
    if (gpt->n_sessions > 0)
        return vka_set_error(gpt->ctx, VKA_ERROR_INVALID_ARGUMENT,
                             "vka_gpt_set_precision: the model has %d vka_gpt_session(s), whose "
                             "passes were recorded in %s: destroy them first", gpt->n_sessions,
                             vka_dtype_string(gpt->precision));
    /* The graphs read the old copies and scratch sizes: remade, at the new sizes, on next use. */
    vkm_gpt_free_run_arenas(gpt);
    memset(gpt->acts_cap, 0, GPT_N_ACTS(gpt->cfg.L) * sizeof *gpt->acts_cap);
    memset(gpt->host_cap, 0, sizeof gpt->host_cap);
    vkm_gpt_free_w16(gpt);
    gpt->precision = precision;
    if (gpt->scale_default) vkm_gpt_scale_default(gpt);
    return VKA_SUCCESS;
}

vka_dtype vka_gpt_get_precision(const vka_gpt *gpt) { return gpt ? gpt->precision : VKA_F32; }

/* --- dynamic loss scaling -------------------------------------------------------------------- */

void vkm_gpt_scale_default(vka_gpt *gpt) {
    gpt->scale_default = true;
    gpt->scaling = gpt->precision == VKA_F16;
    gpt->loss_scale = gpt->scaling ? GPT_LOSS_SCALE_FP16 : 1.0f;
    gpt->scale_good = 0;
}

bool vkm_gpt_scale_step(vka_gpt *gpt, float norm) {
    if (!gpt->scaling) return true;
    if (!isfinite(norm)) { /* GradScaler's backoff: the step changed nothing */
        gpt->skipped++;
        gpt->scale_good = 0;
        if (gpt->loss_scale > GPT_LOSS_SCALE_MIN) gpt->loss_scale *= 0.5f;
        return false;
    }
    if (++gpt->scale_good >= GPT_LOSS_SCALE_INTERVAL) { /* and its growth */
        gpt->scale_good = 0;
        if (gpt->loss_scale < GPT_LOSS_SCALE_MAX) gpt->loss_scale *= 2.0f;
    }
    return true;
}

/* x is a power of two in [lo, hi]. */
static bool power_of_two_in(float x, float lo, float hi) {
    int e;
    return x >= lo && x <= hi && frexpf(x, &e) == 0.5f;
}

vka_result vka_gpt_set_loss_scale(vka_gpt *gpt, float initial) {
    if (!gpt) return VKA_ERROR_INVALID_ARGUMENT;
    vka_result r = vkm_gpt_busy(gpt, "vka_gpt_set_loss_scale");
    if (r != VKA_SUCCESS) return r;
    if (initial == 0.0f) {
        vkm_gpt_scale_default(gpt);
        return VKA_SUCCESS;
    }
    if (initial < 0.0f) {
        gpt->scale_default = gpt->scaling = false;
        gpt->loss_scale = 1.0f;
        gpt->scale_good = 0;
        return VKA_SUCCESS;
    }
    if (!power_of_two_in(initial, 1.0f, GPT_LOSS_SCALE_MAX))
        return vka_set_error(gpt->ctx, VKA_ERROR_INVALID_ARGUMENT,
                             "vka_gpt_set_loss_scale: %g is not a power of two in [1, 2^24] (0: "
                             "the precision's default; negative: off)", (double)initial);
    gpt->scale_default = false;
    gpt->scaling = true;
    gpt->loss_scale = initial;
    gpt->scale_good = 0;
    return VKA_SUCCESS;
}

float vka_gpt_loss_scale(const vka_gpt *gpt) { return gpt ? gpt->loss_scale : 1.0f; }

uint64_t vka_gpt_skipped_steps(const vka_gpt *gpt) { return gpt ? gpt->skipped : 0; }
