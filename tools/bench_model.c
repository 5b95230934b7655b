/*
 * vkattn bench: end-to-end cases. A forward pass (with the loss) and a training step (forward,
 * backward, clipping, AdamW) of whole models at a few (B, T): ms per step, tokens/s, GFLOP/s
 * of their matmuls, and a separate profiled run for the share of each kernel kind (profiling
 * serialises the dispatches, so the step time itself comes from unprofiled runs).
 */
#include "bench.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

const bench_model bench_models[BM_COUNT] = {
    [BM_DEFAULT] = {"default", 4, 4, 128, 65},        /* vkattn train's defaults, 65 characters */
    [BM_GPT2S] = {"gpt2-small", 12, 12, 768, 65},     /* GPT-2 small's shape, character vocab */
    [BM_GPT2S_V50257] = {"gpt2-small-V50257", 12, 12, 768, 50257}, /* and GPT-2's vocabulary */
};

int bench_padded_vocab(const bench_model *m) { return (m->V + 127) / 128 * 128; }

size_t bench_model_params(const bench_model *m, int T) {
    size_t C = (size_t)m->C, L = (size_t)m->L, Vp = (size_t)bench_padded_vocab(m);
    /* wte, wpe, L x (ln1 2C, qkv 3C^2+3C, attproj C^2+C, ln2 2C, fc 4C^2+4C, fcproj 4C^2+C), lnf */
    return Vp * C + (size_t)T * C + L * (12 * C * C + 13 * C) + 2 * C;
}

/* Matmul FLOPs of a forward pass (the convention of model-FLOP-utilisation figures; the other
 * ops are left out): the layers' linear maps 24 L C^2 per token, the LM head 2 C Vp per token,
 * and q.k^T and att.v over the full T x T, 4 T^2 C per sequence and layer. A training step is
 * three times this (backward: two matmuls per forward one). */
static double forward_flop(const bench_model *m, int B, int T) {
    double BT = (double)B * T, C = m->C, L = m->L, Vp = bench_padded_vocab(m);
    return BT * (24.0 * L * C * C + 2.0 * C * Vp) + 4.0 * B * L * (double)T * T * C;
}

/* The cases: each is a forward row and a train_step row. */
static const struct {
    int model, B, T;
    bool quick_forward, quick_train;
    vka_dtype precision; /* VKA_BF16, VKA_F16: mixed precision (name suffix ".bf16", ".f16") */
} model_cases[] = {
    {BM_DEFAULT, 12, 64, true, true, VKA_F32},
    {BM_DEFAULT, 48, 64, false, false, VKA_F32},
    {BM_DEFAULT, 12, 256, false, false, VKA_F32},
    {BM_GPT2S, 1, 64, true, false, VKA_F32},
    {BM_GPT2S, 4, 256, false, false, VKA_F32},
    {BM_GPT2S, 8, 1024, false, false, VKA_F32},
    {BM_DEFAULT, 1, 1024, false, false, VKA_F32}, /* long context: fused attention keeps no T x T */
    {BM_GPT2S, 1, 1024, false, false, VKA_F32},
    {BM_GPT2S, 4, 64, false, false, VKA_F32},        /* GPT-2 small's shape at a CPU-sized batch */
    {BM_GPT2S_V50257, 4, 64, false, false, VKA_F32},
    {BM_GPT2S_V50257, 4, 256, false, false, VKA_F32},
    /* bf16 mixed precision beside float32 (the cases above of the same model, B and T) */
    {BM_DEFAULT, 12, 64, false, true, VKA_BF16},
    {BM_GPT2S, 1, 64, false, false, VKA_BF16},
    {BM_GPT2S, 4, 64, false, false, VKA_BF16},
    {BM_GPT2S, 1, 1024, false, false, VKA_BF16},
    {BM_DEFAULT, 12, 64, false, false, VKA_F16}, /* fp16 (".f16"), with dynamic loss scaling */
    {BM_GPT2S, 4, 64, false, false, VKA_F16},
};
#define N_MODEL_CASES (int)(sizeof model_cases / sizeof model_cases[0])

static const vka_adamw_desc adamw = {.lr = 1e-4f, .beta2 = 0.99f, .weight_decay = 0.1f,
                                     .grad_clip = 1.0f}; /* vkattn train's, at a small lr */

static void fill_row(bench_row *row, int i, bool train) {
    const bench_model *m = &bench_models[model_cases[i].model];
    int B = model_cases[i].B, T = model_cases[i].T;
    memset(row, 0, sizeof *row);
    row->kind = "model";
    row->pass = train ? "train_step" : "forward";
    row->precision = model_cases[i].precision;
    snprintf(row->name, sizeof row->name, "%s.B%d.T%d%s%s", m->name, B, T,
             row->precision ? "." : "", row->precision ? vka_dtype_string(row->precision) : "");
    snprintf(row->id, sizeof row->id, "model/%s/%s", row->name, row->pass);
    snprintf(row->shape, sizeof row->shape, "L=%d NH=%d C=%d V=%d B=%d T=%d", m->L, m->NH, m->C,
             m->V, B, T);
    row->compute = true;
    row->flop = forward_flop(m, B, T) * (train ? 3.0 : 1.0);
    row->model = m;
    row->B = B;
    row->T = T;
    row->params = bench_model_params(m, T);
}

static bool in_mode(const bench *b, int i, bool train) {
    return !b->quick || (train ? model_cases[i].quick_train : model_cases[i].quick_forward);
}

/* --- one pass on one backend ----------------------------------------------------------------- */

typedef struct model_run {
    vka_gpt *gpt;
    bool train;
    int B, T;
    int32_t *inputs, *targets;
    float loss, grad_norm;
} model_run;

static vka_result run_pass(void *user, double *ms) {
    model_run *m = user;
    vka_result r = m->train ? vka_gpt_train_step(m->gpt, m->inputs, m->targets, m->B, m->T,
                                                 &adamw, &m->loss, &m->grad_norm)
                            : vka_gpt_forward(m->gpt, m->inputs, m->targets, m->B, m->T,
                                              &m->loss, NULL);
    return r == VKA_SUCCESS ? vka_gpt_times(m->gpt, ms, NULL, 0, NULL) : r;
}

/* A profiled run: per-kind times into res. */
static vka_result profile_pass(vka_context *ctx, model_run *m, bench_result *res) {
    vka_op_time ops[64];
    int n = 0;
    double ms;
    vka_result r = vka_context_set_profiling(ctx, true);
    if (r == VKA_SUCCESS) r = run_pass(m, &ms);
    if (r == VKA_SUCCESS) r = vka_gpt_times(m->gpt, &res->prof_ms, ops, 64, &n);
    vka_context_set_profiling(ctx, false);
    if (r == VKA_SUCCESS)
        res->n_prof = cli_profile_kinds(ops, n < 64 ? n : 64, res->prof, CLI_MAX_KINDS);
    return r;
}

/* Loss (and, training, gradient norm) of the check run against the reference's. */
static void check_pass(bench_row *row, bench_result *res, const model_run *m) {
    if (!row->has_ref) return;
    float got[2] = {m->loss, m->grad_norm};
    float want[2] = {(float)row->ref_loss, (float)row->ref_grad_norm};
    double d1, t1, d2 = 0, t2 = 1;
    bool ok = bench_compare(&got[0], &want[0], 1, 1e-4, &d1, &t1);
    if (m->train) ok &= bench_compare(&got[1], &want[1], 1, 1e-3, &d2, &t2);
    res->check = ok ? BENCH_OK : BENCH_WRONG;
    bool loss_worse = !(d2 / t2 > d1 / t1);
    res->diff = loss_worse ? d1 : d2;
    res->tol = loss_worse ? t1 : t2;
}

/* The model of a group of rows and what it takes to put its parameters back. */
typedef struct model_state {
    vka_gpt *gpt;
    float *init;       /* the initial parameters, kept when a second training row follows */
    size_t n_params;
    bool dirty;        /* a training step has changed the parameters */
} model_state;

/* The check run (from the initial parameters), then, when timed, the timed runs and the
 * profiled run. dev BENCH_CPU with timed = false is the reference of a Vulkan-only run. */
static vka_result one_pass(bench *b, vka_context *ctx, int dev, bool timed, model_run *m,
                           model_state *ms, bench_row *row) {
    bench_result *res = &row->r[dev];
    bench_progress(b, row->id, timed ? bench_backend_names[dev] : "reference");
    double ms_run;
    vka_result r = VKA_SUCCESS;
    if (ms->dirty && ms->init) {
        r = vka_gpt_set_params(m->gpt, ms->init, ms->n_params);
        ms->dirty = false;
    }
    bool fresh = !ms->dirty;
    if (r == VKA_SUCCESS) r = run_pass(m, &ms_run);
    ms->dirty |= m->train;
    if (r == VKA_SUCCESS && fresh) {
        res->loss = m->loss;
        res->grad_norm = m->train ? m->grad_norm : NAN;
        if (dev == BENCH_CPU) {
            row->has_ref = true;
            row->ref_loss = m->loss;
            row->ref_grad_norm = m->grad_norm;
            res->check = BENCH_REFERENCE;
        } else {
            check_pass(row, res, m);
        }
    }
    if (!timed || r != VKA_SUCCESS) return r;
    r = bench_measure(&b->model_plan, run_pass, m, &res->t);
    if (r == VKA_SUCCESS) r = profile_pass(ctx, m, res);
    if (r == VKA_SUCCESS) {
        res->ran = true;
        res->ceiling = b->dev[dev].peak.gflops;
        res->memory_mb = (double)vka_gpt_memory_bytes(m->gpt) / (1 << 20);
    }
    return r;
}

/* A new model for the rows (the same model and T) on ctx; the initial parameters are kept
 * only if a training row is followed by another row. */
static vka_result new_model(vka_context *ctx, const bench_row *rows, int n_rows, uint64_t seed,
                            model_state *ms) {
    const bench_model *m = rows[0].model;
    vka_gpt_config cfg = {.max_T = rows[0].T, .V = m->V, .L = m->L, .NH = m->NH, .C = m->C};
    vka_result r = vka_gpt_create(ctx, &cfg, seed, &ms->gpt);
    if (r == VKA_SUCCESS) r = vka_gpt_set_precision(ms->gpt, rows[0].precision);
    int first_train = n_rows;
    for (int i = n_rows - 1; i >= 0; i--)
        if (strcmp(rows[i].pass, "train_step") == 0) first_train = i;
    if (r != VKA_SUCCESS || first_train >= n_rows - 1) return r;
    ms->n_params = vka_gpt_num_params(ms->gpt);
    ms->init = malloc(ms->n_params * sizeof *ms->init);
    if (!ms->init) return VKA_ERROR_OUT_OF_HOST_MEMORY;
    return vka_gpt_get_params(ms->gpt, ms->init, ms->n_params);
}

/* Every row of a group (same model and T) on one context. */
static vka_result run_group(bench *b, vka_context *ctx, int dev, bool timed, bench_row *rows,
                            int n_rows, uint64_t seed) {
    const bench_model *m = rows[0].model;
    model_state ms = {0};
    bench_progress(b, rows[0].id, "creating the model");
    vka_result r = new_model(ctx, rows, n_rows, seed, &ms);
    if (bench_is_capacity(r)) {
        for (int i = 0; timed && i < n_rows; i++) bench_skip(&rows[i].r[dev], ctx, r, "");
        r = VKA_SUCCESS;
        n_rows = 0;
    }
    for (int i = 0; i < n_rows && r == VKA_SUCCESS; i++) {
        bench_row *row = &rows[i];
        size_t BT = (size_t)row->B * row->T;
        model_run mr = {.gpt = ms.gpt, .train = strcmp(row->pass, "train_step") == 0,
                        .B = row->B, .T = row->T, .inputs = malloc(BT * 4),
                        .targets = malloc(BT * 4)};
        if (!mr.inputs || !mr.targets) r = VKA_ERROR_OUT_OF_HOST_MEMORY;
        uint64_t s = seed ^ ((uint64_t)row->B << 32) ^ (uint64_t)row->T;
        for (size_t j = 0; r == VKA_SUCCESS && j < BT; j++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull; /* LCG: any ids will do */
            mr.inputs[j] = (int32_t)((s >> 33) % (uint64_t)m->V);
            mr.targets[j] = (int32_t)((s >> 13) % (uint64_t)m->V);
        }
        if (r == VKA_SUCCESS) r = one_pass(b, ctx, dev, timed, &mr, &ms, row);
        if (bench_is_capacity(r)) {
            if (timed) bench_skip(&row->r[dev], ctx, r, "");
            r = VKA_SUCCESS;
        }
        free(mr.inputs);
        free(mr.targets);
    }
    free(ms.init);
    vka_gpt_destroy(ms.gpt);
    return r;
}

/* A group of rows (same model and T): the CPU backend first (the reference), then Vulkan; a
 * Vulkan-only run checks against a CPU reference for the first group of each model. */
static int run_rows(bench *b, bench_row *rows, int n, bool *model_checked) {
    uint64_t seed = b->o->seed;
    vka_result r = VKA_SUCCESS;
    int dev = BENCH_CPU;
    bool *checked = &model_checked[rows[0].model - bench_models];
    if (b->dev[BENCH_CPU].on)
        r = run_group(b, b->dev[BENCH_CPU].ctx, BENCH_CPU, true, rows, n, seed);
    else if (b->ref && !*checked) r = run_group(b, b->ref, BENCH_CPU, false, rows, n, seed);
    *checked = true;
    if (r == VKA_SUCCESS && b->dev[BENCH_VK].on) {
        dev = BENCH_VK;
        r = run_group(b, b->dev[BENCH_VK].ctx, BENCH_VK, true, rows, n, seed);
    }
    if (r != VKA_SUCCESS) {
        vka_context *ctx = dev == BENCH_VK ? b->dev[BENCH_VK].ctx
                           : b->dev[BENCH_CPU].on ? b->dev[BENCH_CPU].ctx : b->ref;
        char what[160];
        snprintf(what, sizeof what, "%s on %s", rows[0].id, bench_backend_names[dev]);
        return cli_fail("bench", ctx, r, what);
    }
    int rc = CLI_OK;
    for (int i = 0; i < n && rc == CLI_OK; i++) {
        bench_row *row = bench_add_row(b);
        if (!row) return CLI_ERROR;
        *row = rows[i];
        rc = bench_row_done(b, row);
    }
    return rc;
}

int bench_run_models(bench *b) {
    bench_row *rows = calloc(2 * N_MODEL_CASES, sizeof *rows);
    bool checked[BM_COUNT] = {false};
    int rc = CLI_OK;
    if (!rows) {
        fprintf(stderr, "vkattn bench: out of memory\n");
        rc = CLI_ERROR;
    }
    /* cases of one model, T and precision share a model: forward rows first (they leave the parameters
     * alone), then the training steps */
    for (int i = 0; i < N_MODEL_CASES && rc == CLI_OK;) {
        int j = i, n = 0;
        while (j < N_MODEL_CASES && model_cases[j].model == model_cases[i].model &&
               model_cases[j].T == model_cases[i].T &&
               model_cases[j].precision == model_cases[i].precision)
            j++;
        for (int train = 0; train < 2; train++)
            for (int k = i; k < j; k++) {
                if (!in_mode(b, k, train)) continue;
                fill_row(&rows[n], k, train);
                if (bench_selected(b, rows[n].id)) n++;
            }
        if (n > 0) rc = run_rows(b, rows, n, checked);
        i = j;
    }
    free(rows);
    return rc;
}

int bench_list_models(bench *b, FILE *f) {
    bench_row row;
    int selected = 0;
    for (int i = 0; i < N_MODEL_CASES; i++)
        for (int train = 0; train < 2; train++) {
            if (!in_mode(b, i, train)) continue;
            fill_row(&row, i, train);
            if (!bench_selected(b, row.id)) continue;
            if (f) fprintf(f, "%-44s %s\n", row.id, row.shape);
            selected++;
        }
    return selected;
}
