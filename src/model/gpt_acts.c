/*
 * The activation and host arenas of the GPT-2 model (layout in gpt_internal.h): sized for the
 * largest (B, T) and kind of run seen so far, and re-created, dropping every recorded graph,
 * when a run needs more.
 */
#include "model/gpt_internal.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

typedef enum act_size { S_ONE, S_BT, S_BTC, S_BT3C, S_BT4C, S_ATT, S_BNHT, S_X16, S_D16 } act_size;

/* Which attention a tensor serves (1 element for the other). */
typedef enum act_use { U_BOTH, U_COMPOSED, U_FUSED } act_use;

/* Which tensors mixed precision keeps in 16 bits: none, these always, these where the passes
 * use the fused attention and C is even (its forward and backward read a 16-bit qkv whose k
 * and v parts start at whole words, and a 16-bit out; the composed ops' permutes and products
 * take float32 ones). */
typedef enum act_half { H_NO, H_YES, H_FUSED } act_half;

typedef struct act_desc {
    size_t offset;   /* of the tensor in gpt_acts / gpt_layer_acts */
    const char *name;
    act_size size;
    bool backward;   /* needed only by backward (1 element otherwise) */
    act_use use;
    act_half half;   /* in mixed precision: whether it holds 16-bit elements */
} act_desc;

#define GA(field, size, bw) {offsetof(gpt_acts, field), #field, size, bw, U_BOTH, H_NO}
#define GC(field, size, bw) {offsetof(gpt_acts, field), #field, size, bw, U_COMPOSED, H_NO}
static const act_desc GLOBAL_ACTS[GPT_GLOBAL_ACTS] = {
    GA(encoded, S_BTC, false),   GA(lnf, S_BTC, false),      GA(lnf_mean, S_BT, false),
    GA(lnf_rstd, S_BT, false),   GA(losses, S_BT, false),
    GA(loss, S_ONE, false),      GC(qkv, S_BT3C, false),     GC(preatt, S_ATT, false),
    GC(vaccum, S_BTC, false),    GA(proj, S_BTC, false),     GA(dresidual, S_BTC, true),
    GA(dln, S_BTC, true),        GA(datty, S_BTC, true),     GC(dvaccum, S_BTC, true),
    GC(datt, S_ATT, true),       GC(dpreatt, S_ATT, true),   GC(dqkvr, S_BT3C, true),
    GA(dqkv, S_BT3C, true),      GA(dfch_gelu, S_BT4C, true), GA(dfch, S_BT4C, true),
    GA(x16, S_X16, false),       GA(d16, S_D16, true),
};
#undef GA
#undef GC
#define LA(field, size, use) {offsetof(gpt_layer_acts, field), #field, size, false, use, H_NO}
/* ln1, ln2 and fch_gelu are read only by the linear layers after them (forward, and backward
 * for dweight), which in mixed precision read them rounded to 16 bits: there layernorm and
 * GELU write them in 16 bits (the same rounding, the same bits), in half the memory. fch, the
 * fc product's output, is written in 16 bits as autocast's products write theirs, and read so
 * by GELU forward and backward. */
#define LH(field, size) {offsetof(gpt_layer_acts, field), #field, size, false, U_BOTH, H_YES}
/* qkvr and atty, the fused attention's input and output, are written in 16 bits by the qkv
 * product and the attention forward (autocast's scaled_dot_product_attention runs in bf16), and
 * read so by the attention backward and the attention projection. */
#define LF(field, size) {offsetof(gpt_layer_acts, field), #field, size, false, U_BOTH, H_FUSED}
static const act_desc LAYER_ACTS[GPT_LAYER_ACTS] = {
    LH(ln1, S_BTC),               LA(ln1_mean, S_BT, U_BOTH),  LA(ln1_rstd, S_BT, U_BOTH),
    LF(qkvr, S_BT3C),             LA(att, S_ATT, U_COMPOSED),  LF(atty, S_BTC),
    LA(residual2, S_BTC, U_BOTH), LH(ln2, S_BTC),              LA(ln2_mean, S_BT, U_BOTH),
    LA(ln2_rstd, S_BT, U_BOTH),   LH(fch, S_BT4C),             LH(fch_gelu, S_BT4C),
    LA(residual3, S_BTC, U_BOTH), LA(lse, S_BNHT, U_FUSED),
};
#undef LA
#undef LH

/* Whether d is used by the attention gpt records for shape s. */
static bool act_used(const vka_gpt *gpt, const act_desc *d, const gpt_shape *s) {
    return d->use == U_BOTH || (d->use == U_FUSED) == vkm_gpt_fused(gpt, s->T);
}

static size_t act_elems(const vka_gpt *gpt, const gpt_shape *s, act_size size) {
    const vka_gpt_config *cfg = &gpt->cfg;
    size_t BT = (size_t)s->B * (size_t)s->T, C = (size_t)cfg->C;
    if ((size == S_X16 || size == S_D16) && gpt->precision == VKA_F32) return 1;
    switch (size) {
    case S_X16: return (BT * C + 1) / 2; /* words of 16-bit elements: atty, a block of lnf */
    case S_D16: return (BT * 4 * C + 1) / 2; /* the largest output gradient, dfch (dlogits
                                               * are written in 16 bits in place) */
    case S_BT: return BT;
    case S_BTC: return BT * C;
    case S_BT3C: return BT * 3 * C;
    case S_BT4C: return BT * 4 * C;
    case S_ATT: return (size_t)s->B * (size_t)cfg->NH * (size_t)s->T * (size_t)s->T;
    case S_BNHT: return BT * (size_t)cfg->NH;
    default: return 1;
    }
}

/* Number of activation tensors, and for each (where the array is given): its size for shape
 * s, its name and where its view goes. */
static int act_list(vka_gpt *gpt, const gpt_shape *s, size_t *sizes, const char **names,
                    vkb_tensor **slots, char (*name_buf)[48], size_t *halves) {
    int n = 0;
    for (size_t i = 0; i < GPT_GLOBAL_ACTS; i++, n++) {
        const act_desc *d = &GLOBAL_ACTS[i];
        if (sizes)
            sizes[n] = ((d->backward && !s->train) || !act_used(gpt, d, s))
                           ? 1
                           : act_elems(gpt, s, d->size);
        if (names) names[n] = d->name;
        if (slots) slots[n] = (vkb_tensor *)((char *)&gpt->acts + d->offset);
        if (halves) halves[n] = 0;
    }
    for (int l = 0; l < gpt->cfg.L; l++) {
        for (size_t i = 0; i < GPT_LAYER_ACTS; i++, n++) {
            const act_desc *d = &LAYER_ACTS[i];
            bool half = gpt->precision != VKA_F32 &&
                        (d->half == H_YES || (d->half == H_FUSED && vkm_gpt_fused(gpt, s->T) &&
                                              gpt->cfg.C % 2 == 0)); /* k, v at whole words */
            if (sizes) {
                sizes[n] = ((l > 0 && !s->train) || !act_used(gpt, d, s))
                               ? 1
                               : act_elems(gpt, s, d->size);
                if (half && sizes[n] > 1) sizes[n] = (sizes[n] + 1) / 2; /* words */
            }
            if (halves) halves[n] = half;
            if (names) {
                snprintf(name_buf[n], sizeof name_buf[n], "%s (layer %d)", d->name, l);
                names[n] = name_buf[n];
            }
            if (slots) slots[n] = (vkb_tensor *)((char *)&gpt->layer[l] + d->offset);
        }
    }
    /* Logit blocks: block 0 always (loss-only and training passes reuse it), every block when
     * the logits of all positions are kept. In mixed precision the head's product writes them
     * in 16 bits (as autocast's), cross-entropy reads them so and writes dlogits over them. */
    size_t BT = (size_t)s->B * (size_t)s->T;
    gpt_head h = vkm_gpt_head_plan(gpt, BT, s->logits);
    bool half = gpt->precision != VKA_F32;
    for (int i = 0; i < GPT_LOGIT_BLOCKS; i++, n++) {
        size_t first = (size_t)i * (size_t)h.rows;
        if (sizes) {
            sizes[n] = (i == 0 || (s->logits && first < BT))
                           ? VKA_MIN((size_t)h.rows, BT - first) * (size_t)gpt->cfg.Vp
                           : 1;
            if (half && sizes[n] > 1) sizes[n] = (sizes[n] + 1) / 2; /* words */
        }
        if (names) {
            snprintf(name_buf[n], sizeof name_buf[n], "logits (block %d of %d rows)", i, h.rows);
            names[n] = name_buf[n];
        }
        if (slots) slots[n] = &gpt->logits[i];
        if (halves) halves[n] = half;
    }
    return n;
}

static void host_sizes(const vka_gpt *gpt, const gpt_shape *s, size_t *sizes) {
    size_t BT = (size_t)s->B * (size_t)s->T;
    size_t want[GPT_HOST_TENSORS] = {
        BT, BT, VKA_BUCKETS_SIZE(BT), VKA_HYPER_COUNT, 1, BT, 2,
        s->host_logits ? (size_t)s->T * (size_t)gpt->cfg.Vp : 1, 1};
    memcpy(sizes, want, sizeof want);
}

static void drop_graphs(vka_gpt *gpt) {
    for (int i = 0; i < gpt->n_graphs; i++)
        gpt->be->rt->graph_destroy(gpt->be, gpt->graphs[i].graph);
    gpt->n_graphs = 0;
    gpt->next_evict = 0;
    gpt->last_run = NULL;
}

static size_t n_acts(const vka_gpt *gpt) { return GPT_N_ACTS(gpt->cfg.L); }

void vkm_gpt_free_run_arenas(vka_gpt *gpt) {
    drop_graphs(gpt);
    gpt->fits = (gpt_shape){0};
    /* acts_cap is NULL in a model whose creation ran out of host memory */
    vkm_gpt_destroy_arena(gpt, &gpt->acts_arena,
                          gpt->acts_cap ? vkm_gpt_sum_bytes(gpt->acts_cap, n_acts(gpt)) : 0);
    vkm_gpt_destroy_arena(gpt, &gpt->host_arena, 0);
}

/* The host tensors in the order of host_sizes(), with their names. */
static const char *const HOST_NAMES[GPT_HOST_TENSORS] = {
    "inputs", "targets", "encoder buckets", "adamw scalars", "loss", "losses", "grad norm",
    "logits for sampling", "1 / counted targets"};

static void host_slots(gpt_host *h, vkb_tensor **slots) {
    vkb_tensor *s[GPT_HOST_TENSORS] = {&h->inputs, &h->targets, &h->buckets, &h->hyper,
                                       &h->loss,   &h->losses,  &h->norm,    &h->logits,
                                       &h->dloss};
    memcpy(slots, s, sizeof s);
}

/* Create both arenas with the capacities in acts_cap and host_cap. */
static vka_result create_run_arenas(vka_gpt *gpt, const gpt_shape *shape) {
    size_t n = n_acts(gpt);
    const char **names = vka_malloc(gpt->ctx, n * sizeof *names);
    vkb_tensor **slots = vka_malloc(gpt->ctx, n * sizeof *slots);
    vkb_tensor *tensors = vka_malloc(gpt->ctx, n * sizeof *tensors);
    char (*name_buf)[48] = vka_malloc(gpt->ctx, n * sizeof *name_buf);
    size_t *halves = vka_malloc(gpt->ctx, n * sizeof *halves); /* 1: a 16-bit view */
    int32_t *buckets = vka_realloc(gpt->ctx, gpt->bucket_buf, gpt->host_cap[2] * sizeof *buckets);
    if (buckets) gpt->bucket_buf = buckets;
    vka_result r = VKA_SUCCESS;
    if (!names || !slots || !tensors || !name_buf || !halves || !buckets) {
        r = vka_set_error(gpt->ctx, VKA_ERROR_OUT_OF_HOST_MEMORY, "model: out of memory");
        goto done;
    }
    act_list(gpt, shape, NULL, names, slots, name_buf, halves);
    r = vkm_gpt_make_arena(gpt, "activations", VKB_ARENA_DEVICE, gpt->acts_cap, names, (int)n,
                       tensors, &gpt->acts_arena, " (the activations of this B and T: use a "
                       "smaller batch B or context T)");
    if (r != VKA_SUCCESS) goto done;
    for (size_t i = 0; i < n; i++) {
        *slots[i] = tensors[i];
        /* all its words' elements (the capacity is even; an odd count's half is never read) */
        if (halves[i]) *slots[i] = vkm_gpt_view16(tensors[i], (uint8_t)gpt->precision,
                                                  2 * tensors[i].n);
    }
    vkb_tensor host[GPT_HOST_TENSORS], *hslots[GPT_HOST_TENSORS];
    r = vkm_gpt_make_arena(gpt, "host inputs and outputs", VKB_ARENA_HOST, gpt->host_cap,
                       HOST_NAMES, (int)GPT_HOST_TENSORS, host, &gpt->host_arena, "");
    if (r != VKA_SUCCESS) goto done;
    host_slots(&gpt->host, hslots);
    for (size_t i = 0; i < GPT_HOST_TENSORS; i++) *hslots[i] = host[i];
done:
    vka_free(gpt->ctx, halves);
    vka_free(gpt->ctx, names);
    vka_free(gpt->ctx, slots);
    vka_free(gpt->ctx, tensors);
    vka_free(gpt->ctx, name_buf);
    return r;
}

vka_result vkm_gpt_reserve(vka_gpt *gpt, const gpt_shape *shape) {
    /* Every step of a run asks for the same shape: answered without recomputing (or
     * allocating) anything. */
    const gpt_shape *f = &gpt->fits;
    if (gpt->acts_arena && gpt->host_arena && f->B == shape->B && f->T == shape->T &&
        f->train == shape->train && f->host_logits == shape->host_logits &&
        f->logits == shape->logits)
        return VKA_SUCCESS;
    if (shape->logits) {
        size_t BT = (size_t)shape->B * (size_t)shape->T;
        gpt_head h = vkm_gpt_head_plan(gpt, BT, true);
        if (h.blocks > GPT_LOGIT_BLOCKS)
            return vka_set_error(gpt->ctx, VKA_ERROR_DEVICE_LIMIT,
                                 "model: the logits of B*T = %zu positions (%.1f GiB) would need "
                                 "%d tensors of at most %d rows, more than %d: ask for fewer "
                                 "positions' logits at once",
                                 BT, (double)BT * gpt->cfg.Vp * vkm_gpt_logit_bytes(gpt) / (1 << 30),
                                 h.blocks, h.rows,
                                 GPT_LOGIT_BLOCKS);
    }
    size_t n = n_acts(gpt);
    size_t *sizes = vka_malloc(gpt->ctx, n * sizeof *sizes);
    if (!sizes) return vka_set_error(gpt->ctx, VKA_ERROR_OUT_OF_HOST_MEMORY, "model: out of memory");
    act_list(gpt, shape, sizes, NULL, NULL, NULL, NULL);
    size_t hsizes[GPT_HOST_TENSORS];
    host_sizes(gpt, shape, hsizes);
    bool grow = !gpt->acts_arena || !gpt->host_arena;
    for (size_t i = 0; i < n; i++) grow |= sizes[i] > gpt->acts_cap[i];
    for (size_t i = 0; i < GPT_HOST_TENSORS; i++) grow |= hsizes[i] > gpt->host_cap[i];
    vka_result r = VKA_SUCCESS;
    if (grow) {
        /* Every tensor grows to the larger of what it held and what this shape needs. */
        vkm_gpt_free_run_arenas(gpt);
        for (size_t i = 0; i < n; i++) gpt->acts_cap[i] = VKA_MAX(gpt->acts_cap[i], sizes[i]);
        for (size_t i = 0; i < GPT_HOST_TENSORS; i++)
            gpt->host_cap[i] = VKA_MAX(gpt->host_cap[i], hsizes[i]);
        r = create_run_arenas(gpt, shape);
        if (r != VKA_SUCCESS) {
            /* Nothing half-made stays: the next call starts from empty arenas. */
            vkm_gpt_free_run_arenas(gpt);
            memset(gpt->acts_cap, 0, n * sizeof *gpt->acts_cap);
            memset(gpt->host_cap, 0, sizeof gpt->host_cap);
        }
    }
    if (r == VKA_SUCCESS) gpt->fits = *shape;
    vka_free(gpt->ctx, sizes);
    return r;
}
