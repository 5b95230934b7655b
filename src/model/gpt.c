/*
 * GPT-2 model: configuration checks, the parameter / activation / host arenas (layout in
 * gpt_internal.h), initialisation, and copying parameters and gradients in and out.
 */
#include "model/gpt_internal.h"
#include "model/rng.h"

#include "api.h"

#include <inttypes.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* Bounds on a configuration (public, vkattn.h); far beyond any model this library trains, small
 * enough that no size computed from them overflows (so a hostile checkpoint header cannot cause
 * one). */
#define GPT_MAX_T VKA_GPT_MAX_T
#define GPT_MAX_VP VKA_GPT_MAX_VP
#define GPT_MAX_C VKA_GPT_MAX_C
#define GPT_MAX_L VKA_GPT_MAX_L
#define GPT_MAX_PARAM_BYTES ((uint64_t)1 << 40)

static const char *const KIND_NAMES[P_KINDS] = {
    "wte",      "wpe",  "ln1w", "ln1b", "qkvw", "qkvb",    "attprojw", "attprojb",
    "ln2w",     "ln2b", "fcw",  "fcb",  "fcprojw", "fcprojb", "lnfw", "lnfb"};

const char *vkm_gpt_kind_name(gpt_param_kind kind) { return KIND_NAMES[kind]; }

size_t vkm_gpt_kind_size(const vka_gpt_config *cfg, gpt_param_kind kind) {
    size_t C = (size_t)cfg->C;
    switch (kind) {
    case P_WTE: return (size_t)cfg->Vp * C;     /* (Vp, C) */
    case P_WPE: return (size_t)cfg->max_T * C;  /* (maxT, C) */
    case P_QKVW: return 3 * C * C;              /* (3C, C) */
    case P_QKVB: return 3 * C;                  /* (3C) */
    case P_ATTPROJW: return C * C;              /* (C, C) */
    case P_FCW: return 4 * C * C;               /* (4C, C) */
    case P_FCB: return 4 * C;                   /* (4C) */
    case P_FCPROJW: return C * 4 * C;           /* (C, 4C) */
    default: return C;                          /* layernorm weights/biases, attprojb, fcprojb */
    }
}

gpt_param_kind vkm_gpt_tensor_kind(int L, int i, int *layer) {
    *layer = 0;
    if (i < 2) return (gpt_param_kind)i;
    if (i >= 2 + 12 * L) return (gpt_param_kind)(P_LNFW + (i - 2 - 12 * L));
    *layer = (i - 2) % L;
    return (gpt_param_kind)(P_LN1W + (i - 2) / L);
}

uint64_t vkm_gpt_config_num_params(const vka_gpt_config *cfg) {
    uint64_t n = 0;
    for (int k = 0; k < P_KINDS; k++)
        n += vkm_gpt_kind_size(cfg, (gpt_param_kind)k) *
             (gpt_kind_per_layer((gpt_param_kind)k) ? (uint64_t)cfg->L : 1);
    return n;
}

vka_result vkm_gpt_config_problem(vka_gpt_config *cfg, char *msg, size_t cap) {
    const struct {
        const char *name;
        int value, max;
    } dims[] = {{"max_T", cfg->max_T, GPT_MAX_T}, {"V", cfg->V, GPT_MAX_VP},
                {"L", cfg->L, GPT_MAX_L},         {"NH", cfg->NH, GPT_MAX_C},
                {"C", cfg->C, GPT_MAX_C},         {"Vp", cfg->Vp, GPT_MAX_VP}};
    for (size_t i = 0; i < VKA_ARRAY_LEN(dims); i++) {
        bool vp_default = i == 5 && dims[i].value == 0;
        if (!vp_default && (dims[i].value <= 0 || dims[i].value > dims[i].max)) {
            snprintf(msg, cap, "%s = %d is out of range (1 to %d)", dims[i].name, dims[i].value,
                     dims[i].max);
            return dims[i].value <= 0 ? VKA_ERROR_INVALID_ARGUMENT : VKA_ERROR_DEVICE_LIMIT;
        }
    }
    if (cfg->C % cfg->NH != 0) {
        snprintf(msg, cap, "C = %d is not a multiple of NH = %d", cfg->C, cfg->NH);
        return VKA_ERROR_INVALID_ARGUMENT;
    }
    if (cfg->Vp == 0) cfg->Vp = (cfg->V + 127) / 128 * 128;
    if (cfg->Vp < cfg->V) {
        snprintf(msg, cap, "Vp = %d is smaller than V = %d", cfg->Vp, cfg->V);
        return VKA_ERROR_INVALID_ARGUMENT;
    }
    uint64_t n = vkm_gpt_config_num_params(cfg);
    if (n * 4 > GPT_MAX_PARAM_BYTES) {
        snprintf(msg, cap, "%llu parameters (%.1f GiB) is beyond any device",
                 (unsigned long long)n, (double)n * 4 / (1 << 30));
        return VKA_ERROR_DEVICE_LIMIT;
    }
    return VKA_SUCCESS;
}

static double mib(uint64_t bytes) { return (double)bytes / (1024.0 * 1024.0); }

vka_result vkm_gpt_make_arena(vka_gpt *gpt, const char *label, vkb_arena_kind kind,
                          const size_t *sizes, const char *const *names, int count,
                          vkb_tensor *tensors, vkb_arena **out, const char *hint) {
    const vkb_limits *lim = &gpt->be->limits;
    for (int i = 0; i < count; i++) {
        uint64_t bytes = (uint64_t)sizes[i] * 4;
        if (lim->max_tensor_bytes && bytes > lim->max_tensor_bytes)
            return vka_set_error(gpt->ctx, VKA_ERROR_DEVICE_LIMIT,
                                 "%s (%zu floats) needs %.1f MiB (%" PRIu64 " bytes) but this "
                                 "device allocates at most %.1f MiB (%" PRIu64
                                 " bytes) at once (maxMemoryAllocationSize, or VKATTN_MAX_TENSOR_BYTES if lower)%s",
                                 names[i], sizes[i], mib(bytes), bytes,
                                 mib(lim->max_tensor_bytes), lim->max_tensor_bytes, hint);
    }
    uint64_t total = 0;
    for (int i = 0; i < count; i++) total += (uint64_t)sizes[i] * 4;
    if (kind == VKB_ARENA_DEVICE && lim->memory_bytes &&
        gpt->arena_bytes + total > lim->memory_bytes)
        return vka_set_error(gpt->ctx, VKA_ERROR_DEVICE_LIMIT,
                             "the model's %s need %.1f MiB, with %.1f MiB already in use, but "
                             "the device has %.1f MiB (its memory, or VKATTN_MAX_MEMORY_BYTES if lower)%s",
                             label, mib(total), mib(gpt->arena_bytes), mib(lim->memory_bytes),
                             hint);
    vka_result r = vkb_arena_create(gpt->be, label, kind, sizes, names, count, tensors, out);
    if (r == VKA_SUCCESS && kind == VKB_ARENA_DEVICE) gpt->arena_bytes += total;
    return r;
}

void vkm_gpt_destroy_arena(vka_gpt *gpt, vkb_arena **arena, uint64_t bytes) {
    if (*arena) {
        gpt->be->rt->arena_destroy(gpt->be, *arena);
        gpt->arena_bytes -= bytes;
    }
    *arena = NULL;
}

uint64_t vkm_gpt_sum_bytes(const size_t *sizes, size_t n) {
    uint64_t total = 0;
    for (size_t i = 0; i < n; i++) total += (uint64_t)sizes[i] * 4;
    return total;
}

/* Names of the parameter tensors ("wte", "qkvw (layer 3)") in one allocation. */
static const char **param_names(const vka_gpt *gpt, const char *prefix) {
    const size_t each = 48;
    const char **names = vka_malloc(gpt->ctx, (size_t)gpt->n_tensors * (sizeof(char *) + each));
    if (!names) return NULL;
    char *text = (char *)(names + gpt->n_tensors);
    for (int i = 0; i < gpt->n_tensors; i++) {
        int l;
        gpt_param_kind k = vkm_gpt_tensor_kind(gpt->cfg.L, i, &l);
        char *s = text + (size_t)i * each;
        if (gpt_kind_per_layer(k))
            snprintf(s, each, "%s%s (layer %d)", prefix, KIND_NAMES[k], l);
        else
            snprintf(s, each, "%s%s", prefix, KIND_NAMES[k]);
        names[i] = s;
    }
    return names;
}

static vka_result make_param_set(vka_gpt *gpt, const char *label, const char *prefix,
                                 vkb_tensor *set, vkb_arena **arena) {
    const char **names = param_names(gpt, prefix);
    if (!names) return vka_set_error(gpt->ctx, VKA_ERROR_OUT_OF_HOST_MEMORY, "model: out of memory");
    vka_result r = vkm_gpt_make_arena(gpt, label, VKB_ARENA_DEVICE, gpt->tensor_sizes, names,
                                  gpt->n_tensors, set, arena, "");
    vka_free(gpt->ctx, names);
    return r;
}

/* GPT-2 initialisation: 2-D weights N(0, 0.02), biases 0, layernorm weights 1, padding rows
 * of wte 0. One RNG stream from seed, tensor by tensor in checkpoint order. */
static vka_result init_params(vka_gpt *gpt, uint64_t seed) {
    size_t max = 0;
    for (int i = 0; i < gpt->n_tensors; i++) max = VKA_MAX(max, gpt->tensor_sizes[i]);
    float *buf = vka_malloc(gpt->ctx, max * sizeof *buf);
    if (!buf) return vka_set_error(gpt->ctx, VKA_ERROR_OUT_OF_HOST_MEMORY, "model init: out of memory");
    uint64_t rng = seed;
    vka_result r = VKA_SUCCESS;
    for (int i = 0; i < gpt->n_tensors && r == VKA_SUCCESS; i++) {
        int l;
        gpt_param_kind k = vkm_gpt_tensor_kind(gpt->cfg.L, i, &l);
        size_t n = gpt->tensor_sizes[i];
        if (gpt_kind_is_matrix(k)) {
            size_t real = k == P_WTE ? (size_t)gpt->cfg.V * gpt->cfg.C : n;
            vkm_rng_normal_fill(&rng, buf, real, 0.0f, 0.02f);
            memset(buf + real, 0, (n - real) * sizeof *buf);
        } else {
            float value = (k == P_LN1W || k == P_LN2W || k == P_LNFW) ? 1.0f : 0.0f;
            for (size_t j = 0; j < n; j++) buf[j] = value;
        }
        r = gpt->be->rt->write(gpt->be, gpt->params[i], 0, buf, n);
    }
    vka_free(gpt->ctx, buf);
    vkm_gpt_params_changed(gpt);
    return r;
}

vka_result vkm_gpt_new(vka_context *ctx, const vka_gpt_config *config, bool init, uint64_t seed,
                   vka_gpt **out) {
    vka_gpt_config cfg = *config;
    char msg[256];
    vka_result r = vkm_gpt_config_problem(&cfg, msg, sizeof msg);
    if (r != VKA_SUCCESS) return vka_set_error(ctx, r, "model: %s", msg);
    vka_gpt *gpt = vka_calloc(ctx, 1, sizeof *gpt);
    if (!gpt) return vka_set_error(ctx, VKA_ERROR_OUT_OF_HOST_MEMORY, "model: out of memory");
    gpt->ctx = ctx;
    vka_context_retain(ctx, VKA_CHILD_GPT);
    gpt->be = ctx->be;
    gpt->cfg = cfg;
    vkm_gpt_scale_default(gpt);
    gpt->n_tensors = 4 + 12 * cfg.L;
    int n = gpt->n_tensors;
    gpt->tensor_sizes = vka_calloc(gpt->ctx, (size_t)n, sizeof *gpt->tensor_sizes);
    gpt->params = vka_calloc(gpt->ctx, (size_t)n * 4, sizeof *gpt->params);
    gpt->layer = vka_calloc(gpt->ctx, (size_t)cfg.L, sizeof *gpt->layer);
    gpt->acts_cap = vka_calloc(gpt->ctx, GPT_N_ACTS(cfg.L), sizeof(size_t));
    if (!gpt->tensor_sizes || !gpt->params || !gpt->layer || !gpt->acts_cap) {
        vka_gpt_destroy(gpt);
        return vka_set_error(ctx, VKA_ERROR_OUT_OF_HOST_MEMORY, "model: out of memory");
    }
    gpt->grads = gpt->params + n;
    gpt->m = gpt->params + 2 * n;
    gpt->v = gpt->params + 3 * n;
    for (int i = 0; i < n; i++) {
        int l;
        gpt->tensor_sizes[i] = vkm_gpt_kind_size(&cfg, vkm_gpt_tensor_kind(cfg.L, i, &l));
        gpt->num_params += gpt->tensor_sizes[i];
    }
    r = make_param_set(gpt, "parameters", "", gpt->params, &gpt->params_arena);
    if (r == VKA_SUCCESS && init) r = init_params(gpt, seed);
    if (r != VKA_SUCCESS) {
        vka_gpt_destroy(gpt);
        return r;
    }
    *out = gpt;
    return VKA_SUCCESS;
}

vka_result vka_gpt_create(vka_context *ctx, const vka_gpt_config *config, uint64_t seed,
                          vka_gpt **out) {
    if (out) *out = NULL;
    vka_result r = vka_context_usable(ctx, "vka_gpt_create");
    if (r != VKA_SUCCESS) return r;
    if (!config || !out)
        return vka_set_error(ctx, VKA_ERROR_INVALID_ARGUMENT, "vka_gpt_create: config or out is NULL");
    return vkm_gpt_new(ctx, config, true, seed, out);
}

vka_result vkm_gpt_ensure_grads(vka_gpt *gpt) {
    if (gpt->grads_arena) return VKA_SUCCESS;
    /* The gradients plus grad_norm's partial sums and result. */
    int n = gpt->n_tensors;
    size_t *sizes = vka_malloc(gpt->ctx, ((size_t)n + 2) * sizeof *sizes);
    const char **names = param_names(gpt, "d");
    vkb_tensor *tensors = vka_malloc(gpt->ctx, ((size_t)n + 2) * sizeof *tensors);
    const char **all = vka_malloc(gpt->ctx, ((size_t)n + 2) * sizeof *all);
    vka_result r;
    if (!sizes || !names || !tensors || !all) {
        r = vka_set_error(gpt->ctx, VKA_ERROR_OUT_OF_HOST_MEMORY, "model: out of memory");
        goto done;
    }
    memcpy(sizes, gpt->tensor_sizes, (size_t)n * sizeof *sizes);
    memcpy(all, names, (size_t)n * sizeof *all);
    sizes[n] = (size_t)n * VKA_NORM_PARTIALS;
    all[n] = "grad norm partial sums";
    sizes[n + 1] = 2;
    all[n + 1] = "grad norm";
    r = vkm_gpt_make_arena(gpt, "gradients", VKB_ARENA_DEVICE, sizes, all, n + 2, tensors,
                       &gpt->grads_arena, "");
    if (r == VKA_SUCCESS) {
        memcpy(gpt->grads, tensors, (size_t)n * sizeof *tensors);
        gpt->norm_partials = tensors[n];
        gpt->norm = tensors[n + 1];
    }
done:
    vka_free(gpt->ctx, sizes);
    vka_free(gpt->ctx, names);
    vka_free(gpt->ctx, tensors);
    vka_free(gpt->ctx, all);
    return r;
}

vka_result vkm_gpt_ensure_opt(vka_gpt *gpt) {
    vka_result r = VKA_SUCCESS;
    if (!gpt->m_arena) r = make_param_set(gpt, "adamw m", "m of ", gpt->m, &gpt->m_arena);
    if (r == VKA_SUCCESS && !gpt->v_arena)
        r = make_param_set(gpt, "adamw v", "v of ", gpt->v, &gpt->v_arena);
    return r;
}

/* ---------------------------------------------------------------------------------------------
 * Parameters in and out
 * ------------------------------------------------------------------------------------------- */

vka_result vkm_gpt_read_set(vka_gpt *gpt, const vkb_tensor *set, float *out) {
    size_t off = 0;
    for (int i = 0; i < gpt->n_tensors; i++) {
        vka_result r = gpt->be->rt->read(gpt->be, set[i], 0, out + off, gpt->tensor_sizes[i]);
        if (r != VKA_SUCCESS) return r;
        off += gpt->tensor_sizes[i];
    }
    return VKA_SUCCESS;
}

vka_result vkm_gpt_write_set(vka_gpt *gpt, const vkb_tensor *set, const float *in) {
    if (set == gpt->params) vkm_gpt_params_changed(gpt);
    size_t off = 0;
    for (int i = 0; i < gpt->n_tensors; i++) {
        vka_result r = gpt->be->rt->write(gpt->be, set[i], 0, in + off, gpt->tensor_sizes[i]);
        if (r != VKA_SUCCESS) return r;
        off += gpt->tensor_sizes[i];
    }
    return VKA_SUCCESS;
}

static vka_result check_count(vka_gpt *gpt, const void *p, size_t n, const char *fn) {
    if (!p) return vka_set_error(gpt->ctx, VKA_ERROR_INVALID_ARGUMENT, "%s: buffer is NULL", fn);
    if (n != gpt->num_params)
        return vka_set_error(gpt->ctx, VKA_ERROR_INVALID_ARGUMENT,
                             "%s: n = %zu but the model has %zu parameters", fn, n,
                             gpt->num_params);
    return VKA_SUCCESS;
}

vka_result vka_gpt_get_params(vka_gpt *gpt, float *out, size_t n) {
    if (!gpt) return VKA_ERROR_INVALID_ARGUMENT;
    vka_result r = check_count(gpt, out, n, "vka_gpt_get_params");
    return r != VKA_SUCCESS ? r : vkm_gpt_read_set(gpt, gpt->params, out);
}

/* A NaN or infinity anywhere in in[] is refused before anything is written, as vka_gpt_load
 * refuses it in a file: such a model only gives NaN losses and garbage text. */
static vka_result check_params_finite(vka_gpt *gpt, const float *in) {
    size_t off = 0;
    for (int i = 0; i < gpt->n_tensors; off += gpt->tensor_sizes[i], i++) {
        size_t j = 0, n = gpt->tensor_sizes[i];
        while (j < n && isfinite(in[off + j])) j++;
        if (j == n) continue;
        int layer;
        gpt_param_kind kind = vkm_gpt_tensor_kind(gpt->cfg.L, i, &layer);
        char of_layer[32] = "";
        if (gpt_kind_per_layer(kind)) snprintf(of_layer, sizeof of_layer, " of layer %d", layer);
        float x = in[off + j];
        return vka_set_error(gpt->ctx, VKA_ERROR_INVALID_ARGUMENT,
                             "vka_gpt_set_params: in[%zu] (%s[%zu]%s) is %s; nothing was set",
                             off + j, vkm_gpt_kind_name(kind), j, of_layer,
                             isnan(x) ? "NaN" : x > 0 ? "+Inf" : "-Inf");
    }
    return VKA_SUCCESS;
}

vka_result vka_gpt_set_params(vka_gpt *gpt, const float *in, size_t n) {
    if (!gpt) return VKA_ERROR_INVALID_ARGUMENT;
    vka_result r = vkm_gpt_busy(gpt, "vka_gpt_set_params");
    if (r == VKA_SUCCESS) r = check_count(gpt, in, n, "vka_gpt_set_params");
    if (r == VKA_SUCCESS) r = check_params_finite(gpt, in);
    return r != VKA_SUCCESS ? r : vkm_gpt_write_set(gpt, gpt->params, in);
}

vka_result vka_gpt_get_grads(vka_gpt *gpt, float *out, size_t n) {
    if (!gpt) return VKA_ERROR_INVALID_ARGUMENT;
    vka_result r = check_count(gpt, out, n, "vka_gpt_get_grads");
    if (r != VKA_SUCCESS) return r;
    if (!gpt->have_grads)
        return vka_set_error(gpt->ctx, VKA_ERROR_INVALID_ARGUMENT,
                             "vka_gpt_get_grads: no gradients yet (run "
                             "vka_gpt_forward_backward or vka_gpt_train_step first)");
    return vkm_gpt_read_set(gpt, gpt->grads, out);
}

static void gpt_free(vka_gpt *gpt);

/* A model with live sessions stays until the last of them is destroyed (as a context with
 * children does: see vkattn.h "Lifetimes"). */
void vka_gpt_destroy(vka_gpt *gpt) {
    if (!gpt || gpt->destroy_pending) return;
    if (gpt->n_sessions > 0) {
        vka_log(gpt->ctx, VKA_LOG_ERROR,
                "vka_gpt_destroy: the model still has %d vka_gpt_session(s); destroy them "
                "first. The model is destroyed when the last of them is", gpt->n_sessions);
        gpt->destroy_pending = true;
        return;
    }
    gpt_free(gpt);
}

void vkm_gpt_session_released(vka_gpt *gpt) {
    gpt->n_sessions--;
    if (gpt->destroy_pending && gpt->n_sessions == 0) gpt_free(gpt);
}

static void gpt_free(vka_gpt *gpt) {
    vka_gpt_cancel(gpt); /* a handed-out pass: waited for before its graph and arenas go */
    if (gpt->be) {
        vkm_gpt_free_run_arenas(gpt);
        uint64_t set_bytes = (uint64_t)gpt->num_params * 4;
        vkm_gpt_destroy_arena(gpt, &gpt->params_arena, set_bytes);
        vkm_gpt_destroy_arena(gpt, &gpt->grads_arena, 0);
        vkm_gpt_destroy_arena(gpt, &gpt->m_arena, set_bytes);
        vkm_gpt_destroy_arena(gpt, &gpt->v_arena, set_bytes);
        vkm_gpt_free_w16(gpt);
    }
    vka_graph_handle_destroy(gpt->handle);
    vka_free(gpt->ctx, gpt->tensor_sizes);
    vka_free(gpt->ctx, gpt->params);
    vka_free(gpt->ctx, gpt->layer);
    vka_free(gpt->ctx, gpt->acts_cap);
    vka_free(gpt->ctx, gpt->bucket_buf);
    vka_context *ctx = gpt->ctx;
    vka_free(gpt->ctx, gpt);
    vka_context_release(ctx, VKA_CHILD_GPT);
}

vka_gpt_config vka_gpt_get_config(const vka_gpt *gpt) {
    return gpt ? gpt->cfg : (vka_gpt_config){0};
}

size_t vka_gpt_num_params(const vka_gpt *gpt) { return gpt ? gpt->num_params : 0; }

uint64_t vka_gpt_step(const vka_gpt *gpt) { return gpt ? gpt->step : 0; }

vka_result vka_gpt_set_attention(vka_gpt *gpt, vka_attention_impl impl) {
    if (!gpt) return VKA_ERROR_INVALID_ARGUMENT;
    if (impl != VKA_ATTENTION_FUSED && impl != VKA_ATTENTION_COMPOSED)
        return vka_set_error(gpt->ctx, VKA_ERROR_INVALID_ARGUMENT,
                             "vka_gpt_set_attention: %d is not a vka_attention_impl (0 fused, "
                             "1 composed)", (int)impl);
    if (impl == gpt->attention) return VKA_SUCCESS;
    /* The activations differ (att matrices or lse): remade, at the new sizes, on next use. */
    vkm_gpt_free_run_arenas(gpt);
    memset(gpt->acts_cap, 0, GPT_N_ACTS(gpt->cfg.L) * sizeof *gpt->acts_cap);
    memset(gpt->host_cap, 0, sizeof gpt->host_cap);
    gpt->attention = impl;
    return VKA_SUCCESS;
}

vka_attention_impl vka_gpt_get_attention(const vka_gpt *gpt) {
    return gpt ? gpt->attention : VKA_ATTENTION_FUSED;
}

uint64_t vka_gpt_memory_bytes(const vka_gpt *gpt) { return gpt ? gpt->arena_bytes : 0; }
