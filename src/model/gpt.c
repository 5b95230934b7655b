/*
 * GPT-2 model: configuration checks, the parameter / activation / host arenas (layout in
 * gpt_internal.h), initialisation, and copying parameters and gradients in and out.
 */
#include "model/gpt_internal.h"
#include "model/rng.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* Bounds on a configuration; far beyond any model this library trains, small enough that no
 * size computed from them overflows (so a hostile checkpoint header cannot cause one). */
#define GPT_MAX_T (1 << 20)
#define GPT_MAX_VP (1 << 24)
#define GPT_MAX_C (1 << 16)
#define GPT_MAX_L (1 << 12)
#define GPT_MAX_PARAM_BYTES ((uint64_t)1 << 40)

static const char *const KIND_NAMES[P_KINDS] = {
    "wte",      "wpe",  "ln1w", "ln1b", "qkvw", "qkvb",    "attprojw", "attprojb",
    "ln2w",     "ln2b", "fcw",  "fcb",  "fcprojw", "fcprojb", "lnfw", "lnfb"};

const char *gpt_kind_name(gpt_param_kind kind) { return KIND_NAMES[kind]; }

size_t gpt_kind_size(const vka_gpt_config *cfg, gpt_param_kind kind) {
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

gpt_param_kind gpt_tensor_kind(int L, int i, int *layer) {
    *layer = 0;
    if (i < 2) return (gpt_param_kind)i;
    if (i >= 2 + 12 * L) return (gpt_param_kind)(P_LNFW + (i - 2 - 12 * L));
    *layer = (i - 2) % L;
    return (gpt_param_kind)(P_LN1W + (i - 2) / L);
}

vka_result gpt_config_problem(vka_gpt_config *cfg, char *msg, size_t cap) {
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
    uint64_t n = 0;
    for (int k = 0; k < P_KINDS; k++)
        n += gpt_kind_size(cfg, (gpt_param_kind)k) *
             (gpt_kind_per_layer((gpt_param_kind)k) ? (uint64_t)cfg->L : 1);
    if (n * 4 > GPT_MAX_PARAM_BYTES) {
        snprintf(msg, cap, "%llu parameters (%.1f GiB) is beyond any device",
                 (unsigned long long)n, (double)n * 4 / (1 << 30));
        return VKA_ERROR_DEVICE_LIMIT;
    }
    return VKA_SUCCESS;
}

static double mib(uint64_t bytes) { return (double)bytes / (1024.0 * 1024.0); }

/* Create an arena after checking each tensor against the device's largest tensor, so the
 * message names the tensor (what it holds: hint says how to make it smaller). */
static vka_result make_arena(vka_gpt *gpt, const char *label, vkb_arena_kind kind,
                             const size_t *sizes, const char *const *names, int count,
                             vkb_tensor *tensors, vkb_arena **out, const char *hint) {
    const vkb_limits *lim = &gpt->be->limits;
    for (int i = 0; i < count; i++) {
        uint64_t bytes = (uint64_t)sizes[i] * 4;
        if (lim->max_tensor_bytes && bytes > lim->max_tensor_bytes)
            return vka_set_error(gpt->ctx, VKA_ERROR_DEVICE_LIMIT,
                                 "%s (%zu floats) needs %.1f MiB but this device's "
                                 "maxStorageBufferRange is %.1f MiB%s",
                                 names[i], sizes[i], mib(bytes), mib(lim->max_tensor_bytes),
                                 hint);
    }
    uint64_t total = 0;
    for (int i = 0; i < count; i++) total += (uint64_t)sizes[i] * 4;
    if (kind == VKB_ARENA_DEVICE && lim->memory_bytes &&
        gpt->arena_bytes + total > lim->memory_bytes)
        return vka_set_error(gpt->ctx, VKA_ERROR_DEVICE_LIMIT,
                             "the model's %s need %.1f MiB, with %.1f MiB already in use, but "
                             "the device has %.1f MiB%s",
                             label, mib(total), mib(gpt->arena_bytes), mib(lim->memory_bytes),
                             hint);
    vka_result r = gpt->be->ops->arena_create(gpt->be, label, kind, sizes, names, count, tensors, out);
    if (r == VKA_SUCCESS && kind == VKB_ARENA_DEVICE) gpt->arena_bytes += total;
    return r;
}

/* Names of the parameter tensors ("wte", "qkvw (layer 3)") in one allocation. */
static const char **param_names(const vka_gpt *gpt, const char *prefix) {
    const size_t each = 48;
    const char **names = malloc((size_t)gpt->n_tensors * (sizeof(char *) + each));
    if (!names) return NULL;
    char *text = (char *)(names + gpt->n_tensors);
    for (int i = 0; i < gpt->n_tensors; i++) {
        int l;
        gpt_param_kind k = gpt_tensor_kind(gpt->cfg.L, i, &l);
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
    vka_result r = make_arena(gpt, label, VKB_ARENA_DEVICE, gpt->tensor_sizes, names,
                              gpt->n_tensors, set, arena, "");
    free(names);
    return r;
}

/* GPT-2 initialisation: 2-D weights N(0, 0.02), biases 0, layernorm weights 1, padding rows
 * of wte 0. One RNG stream from seed, tensor by tensor in checkpoint order. */
static vka_result init_params(vka_gpt *gpt, uint64_t seed) {
    size_t max = 0;
    for (int i = 0; i < gpt->n_tensors; i++) max = VKA_MAX(max, gpt->tensor_sizes[i]);
    float *buf = malloc(max * sizeof *buf);
    if (!buf) return vka_set_error(gpt->ctx, VKA_ERROR_OUT_OF_HOST_MEMORY, "model init: out of memory");
    uint64_t rng = seed;
    vka_result r = VKA_SUCCESS;
    for (int i = 0; i < gpt->n_tensors && r == VKA_SUCCESS; i++) {
        int l;
        gpt_param_kind k = gpt_tensor_kind(gpt->cfg.L, i, &l);
        size_t n = gpt->tensor_sizes[i];
        if (gpt_kind_is_matrix(k)) {
            size_t real = k == P_WTE ? (size_t)gpt->cfg.V * gpt->cfg.C : n;
            vkm_rng_normal_fill(&rng, buf, real, 0.0f, 0.02f);
            memset(buf + real, 0, (n - real) * sizeof *buf);
        } else {
            float value = (k == P_LN1W || k == P_LN2W || k == P_LNFW) ? 1.0f : 0.0f;
            for (size_t j = 0; j < n; j++) buf[j] = value;
        }
        r = gpt->be->ops->write(gpt->be, gpt->params[i], 0, buf, n);
    }
    free(buf);
    return r;
}

vka_result gpt_new(vka_context *ctx, const vka_gpt_config *config, bool init, uint64_t seed,
                   vka_gpt **out) {
    vka_gpt_config cfg = *config;
    char msg[256];
    vka_result r = gpt_config_problem(&cfg, msg, sizeof msg);
    if (r != VKA_SUCCESS) return vka_set_error(ctx, r, "model: %s", msg);
    vka_gpt *gpt = calloc(1, sizeof *gpt);
    if (!gpt) return vka_set_error(ctx, VKA_ERROR_OUT_OF_HOST_MEMORY, "model: out of memory");
    gpt->ctx = ctx;
    gpt->be = ctx->be;
    gpt->cfg = cfg;
    gpt->n_tensors = 4 + 12 * cfg.L;
    int n = gpt->n_tensors;
    gpt->tensor_sizes = calloc((size_t)n, sizeof *gpt->tensor_sizes);
    gpt->params = calloc((size_t)n * 4, sizeof *gpt->params);
    gpt->layer = calloc((size_t)cfg.L, sizeof *gpt->layer);
    gpt->acts_cap = calloc(GPT_GLOBAL_ACTS + GPT_LAYER_ACTS * (size_t)cfg.L, sizeof(size_t));
    if (!gpt->tensor_sizes || !gpt->params || !gpt->layer || !gpt->acts_cap) {
        vka_gpt_destroy(gpt);
        return vka_set_error(ctx, VKA_ERROR_OUT_OF_HOST_MEMORY, "model: out of memory");
    }
    gpt->grads = gpt->params + n;
    gpt->m = gpt->params + 2 * n;
    gpt->v = gpt->params + 3 * n;
    for (int i = 0; i < n; i++) {
        int l;
        gpt->tensor_sizes[i] = gpt_kind_size(&cfg, gpt_tensor_kind(cfg.L, i, &l));
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
    if (!ctx || !ctx->be) return VKA_ERROR_INVALID_ARGUMENT;
    if (!config || !out)
        return vka_set_error(ctx, VKA_ERROR_INVALID_ARGUMENT, "vka_gpt_create: config or out is NULL");
    *out = NULL;
    return gpt_new(ctx, config, true, seed, out);
}

vka_result gpt_ensure_grads(vka_gpt *gpt) {
    if (gpt->grads_arena) return VKA_SUCCESS;
    /* The gradients plus grad_norm's partial sums and result. */
    int n = gpt->n_tensors;
    size_t *sizes = malloc(((size_t)n + 2) * sizeof *sizes);
    const char **names = param_names(gpt, "d");
    vkb_tensor *tensors = malloc(((size_t)n + 2) * sizeof *tensors);
    const char **all = malloc(((size_t)n + 2) * sizeof *all);
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
    r = make_arena(gpt, "gradients", VKB_ARENA_DEVICE, sizes, all, n + 2, tensors,
                   &gpt->grads_arena, "");
    if (r == VKA_SUCCESS) {
        memcpy(gpt->grads, tensors, (size_t)n * sizeof *tensors);
        gpt->norm_partials = tensors[n];
        gpt->norm = tensors[n + 1];
    }
done:
    free(sizes);
    free(names);
    free(tensors);
    free(all);
    return r;
}

vka_result gpt_ensure_opt(vka_gpt *gpt) {
    vka_result r = VKA_SUCCESS;
    if (!gpt->m_arena) r = make_param_set(gpt, "adamw m", "m of ", gpt->m, &gpt->m_arena);
    if (r == VKA_SUCCESS && !gpt->v_arena)
        r = make_param_set(gpt, "adamw v", "v of ", gpt->v, &gpt->v_arena);
    return r;
}

/* ---------------------------------------------------------------------------------------------
 * Activation and host arenas
 * ------------------------------------------------------------------------------------------- */

typedef enum act_size { S_ONE, S_BT, S_BTC, S_BT3C, S_BT4C, S_ATT, S_LOGITS } act_size;

typedef struct act_desc {
    size_t offset;   /* of the tensor in gpt_acts / gpt_layer_acts */
    const char *name;
    act_size size;
    bool backward;   /* needed only by backward (1 element otherwise) */
} act_desc;

#define GA(field, size, bw) {offsetof(gpt_acts, field), #field, size, bw}
static const act_desc GLOBAL_ACTS[GPT_GLOBAL_ACTS] = {
    GA(encoded, S_BTC, false),   GA(lnf, S_BTC, false),      GA(lnf_mean, S_BT, false),
    GA(lnf_rstd, S_BT, false),   GA(logits, S_LOGITS, false), GA(losses, S_BT, false),
    GA(loss, S_ONE, false),      GA(qkv, S_BT3C, false),     GA(preatt, S_ATT, false),
    GA(vaccum, S_BTC, false),    GA(proj, S_BTC, false),     GA(dresidual, S_BTC, true),
    GA(dln, S_BTC, true),        GA(datty, S_BTC, true),     GA(dvaccum, S_BTC, true),
    GA(datt, S_ATT, true),       GA(dpreatt, S_ATT, true),   GA(dqkvr, S_BT3C, true),
    GA(dqkv, S_BT3C, true),      GA(dfch_gelu, S_BT4C, true), GA(dfch, S_BT4C, true),
};
#undef GA
#define LA(field, size) {offsetof(gpt_layer_acts, field), #field, size, false}
static const act_desc LAYER_ACTS[GPT_LAYER_ACTS] = {
    LA(ln1, S_BTC),       LA(ln1_mean, S_BT),  LA(ln1_rstd, S_BT), LA(qkvr, S_BT3C),
    LA(att, S_ATT),       LA(atty, S_BTC),     LA(residual2, S_BTC), LA(ln2, S_BTC),
    LA(ln2_mean, S_BT),   LA(ln2_rstd, S_BT),  LA(fch, S_BT4C),    LA(fch_gelu, S_BT4C),
    LA(residual3, S_BTC),
};
#undef LA

static size_t act_elems(const vka_gpt_config *cfg, const gpt_shape *s, act_size size) {
    size_t BT = (size_t)s->B * (size_t)s->T, C = (size_t)cfg->C;
    switch (size) {
    case S_BT: return BT;
    case S_BTC: return BT * C;
    case S_BT3C: return BT * 3 * C;
    case S_BT4C: return BT * 4 * C;
    case S_ATT: return (size_t)s->B * (size_t)cfg->NH * (size_t)s->T * (size_t)s->T;
    case S_LOGITS: return BT * (size_t)cfg->Vp;
    default: return 1;
    }
}

/* Number of activation tensors, and for each (where the array is given): its size for shape
 * s, its name and where its view goes. */
static int act_list(vka_gpt *gpt, const gpt_shape *s, size_t *sizes, const char **names,
                    vkb_tensor **slots, char (*name_buf)[48]) {
    int n = 0;
    for (size_t i = 0; i < GPT_GLOBAL_ACTS; i++, n++) {
        const act_desc *d = &GLOBAL_ACTS[i];
        if (sizes) sizes[n] = (d->backward && !s->train) ? 1 : act_elems(&gpt->cfg, s, d->size);
        if (names) names[n] = d->name;
        if (slots) slots[n] = (vkb_tensor *)((char *)&gpt->acts + d->offset);
    }
    for (int l = 0; l < gpt->cfg.L; l++) {
        for (size_t i = 0; i < GPT_LAYER_ACTS; i++, n++) {
            const act_desc *d = &LAYER_ACTS[i];
            if (sizes) sizes[n] = (l > 0 && !s->train) ? 1 : act_elems(&gpt->cfg, s, d->size);
            if (names) {
                snprintf(name_buf[n], sizeof name_buf[n], "%s (layer %d)", d->name, l);
                names[n] = name_buf[n];
            }
            if (slots) slots[n] = (vkb_tensor *)((char *)&gpt->layer[l] + d->offset);
        }
    }
    return n;
}

static void host_sizes(const vka_gpt *gpt, const gpt_shape *s, size_t *sizes) {
    size_t BT = (size_t)s->B * (size_t)s->T;
    size_t want[GPT_HOST_TENSORS] = {
        BT, BT, VKA_BUCKETS_SIZE(BT), VKA_HYPER_COUNT, 1, BT, 2,
        s->host_logits ? (size_t)s->T * (size_t)gpt->cfg.Vp : 1};
    memcpy(sizes, want, sizeof want);
}

void gpt_drop_graphs(vka_gpt *gpt) {
    for (int i = 0; i < gpt->n_graphs; i++)
        gpt->be->ops->graph_destroy(gpt->be, gpt->graphs[i].graph);
    gpt->n_graphs = 0;
    gpt->next_evict = 0;
}

static void destroy_arena(vka_gpt *gpt, vkb_arena **arena, uint64_t bytes) {
    if (*arena) {
        gpt->be->ops->arena_destroy(gpt->be, *arena);
        gpt->arena_bytes -= bytes;
    }
    *arena = NULL;
}

static uint64_t sum_bytes(const size_t *sizes, size_t n) {
    uint64_t total = 0;
    for (size_t i = 0; i < n; i++) total += (uint64_t)sizes[i] * 4;
    return total;
}

static void free_run_arenas(vka_gpt *gpt) {
    gpt_drop_graphs(gpt);
    destroy_arena(gpt, &gpt->acts_arena,
                  sum_bytes(gpt->acts_cap, GPT_GLOBAL_ACTS + GPT_LAYER_ACTS * (size_t)gpt->cfg.L));
    destroy_arena(gpt, &gpt->host_arena, 0);
}

static const char *const HOST_NAMES[GPT_HOST_TENSORS] = {
    "inputs", "targets", "encoder buckets", "adamw scalars", "loss", "losses", "grad norm",
    "logits for sampling"};

vka_result gpt_reserve(vka_gpt *gpt, const gpt_shape *shape) {
    size_t n_acts = GPT_GLOBAL_ACTS + GPT_LAYER_ACTS * (size_t)gpt->cfg.L;
    size_t *sizes = malloc(n_acts * sizeof *sizes);
    if (!sizes) return vka_set_error(gpt->ctx, VKA_ERROR_OUT_OF_HOST_MEMORY, "model: out of memory");
    act_list(gpt, shape, sizes, NULL, NULL, NULL);
    size_t hsizes[GPT_HOST_TENSORS];
    host_sizes(gpt, shape, hsizes);
    bool grow = !gpt->acts_arena || !gpt->host_arena;
    for (size_t i = 0; i < n_acts; i++) grow |= sizes[i] > gpt->acts_cap[i];
    for (size_t i = 0; i < GPT_HOST_TENSORS; i++) grow |= hsizes[i] > gpt->host_cap[i];
    if (!grow) {
        free(sizes);
        return VKA_SUCCESS;
    }
    /* Grow every tensor to the larger of what it held and what this shape needs. */
    free_run_arenas(gpt);
    for (size_t i = 0; i < n_acts; i++) gpt->acts_cap[i] = VKA_MAX(gpt->acts_cap[i], sizes[i]);
    for (size_t i = 0; i < GPT_HOST_TENSORS; i++)
        gpt->host_cap[i] = VKA_MAX(gpt->host_cap[i], hsizes[i]);
    free(sizes);

    const char **names = malloc(n_acts * sizeof *names);
    vkb_tensor **slots = malloc(n_acts * sizeof *slots);
    vkb_tensor *tensors = malloc(n_acts * sizeof *tensors);
    char (*name_buf)[48] = malloc(n_acts * sizeof *name_buf);
    size_t bucket_cap = gpt->host_cap[2];
    int32_t *buckets = realloc(gpt->bucket_buf, bucket_cap * sizeof *buckets);
    vka_result r = VKA_SUCCESS;
    if (!names || !slots || !tensors || !name_buf || !buckets) {
        r = vka_set_error(gpt->ctx, VKA_ERROR_OUT_OF_HOST_MEMORY, "model: out of memory");
        if (buckets) gpt->bucket_buf = buckets;
        goto done;
    }
    gpt->bucket_buf = buckets;
    gpt->bucket_cap = bucket_cap;
    act_list(gpt, shape, NULL, names, slots, name_buf);
    r = make_arena(gpt, "activations", VKB_ARENA_DEVICE, gpt->acts_cap, names, (int)n_acts,
                   tensors, &gpt->acts_arena, " (the activations of this B and T: use a "
                   "smaller batch B or context T)");
    if (r != VKA_SUCCESS) goto done;
    for (size_t i = 0; i < n_acts; i++) *slots[i] = tensors[i];
    vkb_tensor host[GPT_HOST_TENSORS];
    r = make_arena(gpt, "host inputs and outputs", VKB_ARENA_HOST, gpt->host_cap, HOST_NAMES,
                   (int)GPT_HOST_TENSORS, host, &gpt->host_arena, "");
    if (r != VKA_SUCCESS) goto done;
    gpt->host = (gpt_host){host[0], host[1], host[2], host[3], host[4], host[5], host[6], host[7]};
done:
    if (r != VKA_SUCCESS) {
        /* Nothing half-made stays: the next call starts from empty arenas. */
        free_run_arenas(gpt);
        memset(gpt->acts_cap, 0, n_acts * sizeof *gpt->acts_cap);
        memset(gpt->host_cap, 0, sizeof gpt->host_cap);
    }
    free(names);
    free(slots);
    free(tensors);
    free(name_buf);
    return r;
}

/* ---------------------------------------------------------------------------------------------
 * Parameters in and out
 * ------------------------------------------------------------------------------------------- */

vka_result gpt_read_set(vka_gpt *gpt, const vkb_tensor *set, float *out) {
    size_t off = 0;
    for (int i = 0; i < gpt->n_tensors; i++) {
        vka_result r = gpt->be->ops->read(gpt->be, set[i], 0, out + off, gpt->tensor_sizes[i]);
        if (r != VKA_SUCCESS) return r;
        off += gpt->tensor_sizes[i];
    }
    return VKA_SUCCESS;
}

vka_result gpt_write_set(vka_gpt *gpt, const vkb_tensor *set, const float *in) {
    size_t off = 0;
    for (int i = 0; i < gpt->n_tensors; i++) {
        vka_result r = gpt->be->ops->write(gpt->be, set[i], 0, in + off, gpt->tensor_sizes[i]);
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
    return r != VKA_SUCCESS ? r : gpt_read_set(gpt, gpt->params, out);
}

vka_result vka_gpt_set_params(vka_gpt *gpt, const float *in, size_t n) {
    if (!gpt) return VKA_ERROR_INVALID_ARGUMENT;
    vka_result r = check_count(gpt, in, n, "vka_gpt_set_params");
    return r != VKA_SUCCESS ? r : gpt_write_set(gpt, gpt->params, in);
}

vka_result vka_gpt_get_grads(vka_gpt *gpt, float *out, size_t n) {
    if (!gpt) return VKA_ERROR_INVALID_ARGUMENT;
    vka_result r = check_count(gpt, out, n, "vka_gpt_get_grads");
    if (r != VKA_SUCCESS) return r;
    if (!gpt->have_grads)
        return vka_set_error(gpt->ctx, VKA_ERROR_INVALID_ARGUMENT,
                             "vka_gpt_get_grads: no gradients yet (run "
                             "vka_gpt_forward_backward or vka_gpt_train_step first)");
    return gpt_read_set(gpt, gpt->grads, out);
}

void vka_gpt_destroy(vka_gpt *gpt) {
    if (!gpt) return;
    if (gpt->be) {
        free_run_arenas(gpt);
        uint64_t set_bytes = (uint64_t)gpt->num_params * 4;
        destroy_arena(gpt, &gpt->params_arena, set_bytes);
        destroy_arena(gpt, &gpt->grads_arena, 0);
        destroy_arena(gpt, &gpt->m_arena, set_bytes);
        destroy_arena(gpt, &gpt->v_arena, set_bytes);
    }
    free(gpt->tensor_sizes);
    free(gpt->params);
    free(gpt->layer);
    free(gpt->acts_cap);
    free(gpt->bucket_buf);
    free(gpt);
}

vka_gpt_config vka_gpt_get_config(const vka_gpt *gpt) {
    return gpt ? gpt->cfg : (vka_gpt_config){0};
}

size_t vka_gpt_num_params(const vka_gpt *gpt) { return gpt ? gpt->num_params : 0; }

uint64_t vka_gpt_step(const vka_gpt *gpt) { return gpt ? gpt->step : 0; }
