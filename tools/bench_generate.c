/*
 * vkattn bench: generation cases. Per-token time of autoregressive decoding at a context of P
 * tokens (P = 64, 512, 1000; models of context 1024), with the KV cache (vka_gpt_session: one
 * appended token per run, so each timed run is one decode step; the context grows by one per
 * run, at most warmup + max_runs <= 13 positions) and without it (vka_gpt_generate with
 * no_kv_cache and one new token: a forward pass over the P-token context, what every token
 * cost before the cache). Rows are "model" rows of B = 1, T = 1, so their tokens/s is tokens
 * per second of generation. Times are host wall time (a step reads its logits back).
 */
#include "bench.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define GEN_MAX_T 1024

static const struct {
    int model, P;
    bool quick;
    vka_dtype precision; /* VKA_BF16, VKA_F16: mixed precision (name suffix ".bf16", ".f16") */
} gen_cases[] = {
    {BM_DEFAULT, 64, true, VKA_F32},       {BM_DEFAULT, 512, true, VKA_F32},
    {BM_DEFAULT, 1000, true, VKA_F32},     {BM_GPT2S_V50257, 64, false, VKA_F32},
    {BM_GPT2S_V50257, 512, false, VKA_F32}, {BM_GPT2S_V50257, 1000, false, VKA_F32},
    /* decoding reads every weight per token: bf16 copies halve the bytes */
    {BM_DEFAULT, 512, false, VKA_BF16},    {BM_GPT2S_V50257, 64, false, VKA_BF16},
    {BM_GPT2S_V50257, 512, false, VKA_BF16}, {BM_GPT2S_V50257, 64, false, VKA_F16},
};
#define N_GEN_CASES (int)(sizeof gen_cases / sizeof gen_cases[0])

/* Matmul FLOPs per token: the layers and the LM head, and attention over the context (KV
 * cache); a whole forward pass over P tokens (recompute). */
static double gen_flop(const bench_model *m, int P, bool kv) {
    double C = m->C, L = m->L, Vp = bench_padded_vocab(m);
    if (kv) return 24.0 * L * C * C + 2.0 * C * Vp + 4.0 * L * P * C;
    return P * (24.0 * L * C * C + 2.0 * C * Vp) + 4.0 * L * (double)P * P * C;
}

static void fill_row(bench_row *row, int i, bool kv) {
    const bench_model *m = &bench_models[gen_cases[i].model];
    int P = gen_cases[i].P;
    memset(row, 0, sizeof *row);
    row->kind = "model";
    row->pass = kv ? "generate_kv" : "generate_recompute";
    row->precision = gen_cases[i].precision;
    snprintf(row->name, sizeof row->name, "%s.P%d%s%s", m->name, P, row->precision ? "." : "",
             row->precision ? vka_dtype_string(row->precision) : "");
    snprintf(row->id, sizeof row->id, "generate/%s/%s", row->name, kv ? "kv_cache" : "recompute");
    snprintf(row->shape, sizeof row->shape, "L=%d NH=%d C=%d V=%d max_T=%d prompt=%d", m->L,
             m->NH, m->C, m->V, GEN_MAX_T, P);
    row->compute = true;
    row->flop = gen_flop(m, P, kv);
    row->model = m;
    row->B = 1;
    row->T = 1;
    row->params = bench_model_params(m, GEN_MAX_T);
    row->max_T = GEN_MAX_T;
}

static bool in_mode(const bench *b, int i) { return !b->quick || gen_cases[i].quick; }

typedef struct gen_run {
    vka_gpt *gpt;
    vka_gpt_session *sess; /* NULL: recompute */
    const int32_t *prompt;
    int P;
    int32_t next;
} gen_run;

static vka_result run_step(void *user, double *ms) {
    gen_run *g = user;
    double t0 = cli_now();
    vka_result r;
    if (g->sess) {
        r = vka_gpt_session_append(g->sess, &g->next, 1);
        if (r == VKA_SUCCESS) r = vka_gpt_session_sample(g->sess, NULL, NULL, &g->next);
    } else {
        vka_sample_desc s = {.no_kv_cache = true};
        r = vka_gpt_generate(g->gpt, g->prompt, (size_t)g->P, 1, &s, &g->next, NULL, NULL);
    }
    *ms = (cli_now() - t0) * 1e3;
    return r;
}

/* The rows of one case (kv and recompute) on one backend. */
static vka_result run_case(bench *b, int dev, int i, bench_row *rows, int n_rows) {
    vka_context *ctx = b->dev[dev].ctx;
    const bench_model *m = &bench_models[gen_cases[i].model];
    int P = gen_cases[i].P;
    vka_gpt_config cfg = {.max_T = GEN_MAX_T, .V = m->V, .L = m->L, .NH = m->NH, .C = m->C};
    vka_gpt *gpt = NULL;
    bench_progress(b, rows[0].id, "creating the model");
    vka_result r = vka_gpt_create(ctx, &cfg, b->o->seed, &gpt);
    if (r == VKA_SUCCESS) r = vka_gpt_set_precision(gpt, gen_cases[i].precision);
    int32_t *prompt = malloc((size_t)P * sizeof *prompt);
    if (r == VKA_SUCCESS && !prompt) r = VKA_ERROR_OUT_OF_HOST_MEMORY;
    uint64_t s = b->o->seed;
    for (int j = 0; r == VKA_SUCCESS && j < P; j++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        prompt[j] = (int32_t)((s >> 33) % (uint64_t)m->V);
    }
    for (int k = 0; k < n_rows && r == VKA_SUCCESS; k++) {
        bench_result *res = &rows[k].r[dev];
        bool kv = strcmp(rows[k].pass, "generate_kv") == 0;
        gen_run g = {.gpt = gpt, .prompt = prompt, .P = P, .next = prompt[P - 1]};
        bench_progress(b, rows[k].id, bench_backend_names[dev]);
        if (kv) {
            r = vka_gpt_session_create(gpt, NULL, &g.sess);
            /* the prompt but its last token, which the first run appends */
            if (r == VKA_SUCCESS) r = vka_gpt_session_append(g.sess, prompt, (size_t)P - 1);
        }
        double ms;
        if (r == VKA_SUCCESS) r = run_step(&g, &ms);
        if (r == VKA_SUCCESS) r = bench_measure(&b->model_plan, run_step, &g, &res->t);
        if (r == VKA_SUCCESS) {
            res->ran = true;
            res->ceiling = b->dev[dev].peak.gflops;
            res->check = dev == BENCH_CPU ? BENCH_REFERENCE : BENCH_UNCHECKED;
            res->loss = res->grad_norm = NAN;
            res->memory_mb = (double)vka_gpt_memory_bytes(gpt) / (1 << 20);
        }
        vka_gpt_session_destroy(g.sess);
    }
    if (bench_is_capacity(r)) {
        for (int k = 0; k < n_rows; k++)
            if (!rows[k].r[dev].ran) bench_skip(&rows[k].r[dev], ctx, r, "");
        r = VKA_SUCCESS;
    }
    free(prompt);
    vka_gpt_destroy(gpt);
    return r;
}

int bench_run_generate(bench *b) {
    int rc = CLI_OK;
    for (int i = 0; i < N_GEN_CASES && rc == CLI_OK; i++) {
        if (!in_mode(b, i)) continue;
        bench_row rows[2];
        int n = 0;
        for (int kv = 1; kv >= 0; kv--) {
            fill_row(&rows[n], i, kv);
            if (bench_selected(b, rows[n].id)) n++;
        }
        if (n == 0) continue;
        for (int dev = BENCH_CPU; dev >= 0 && rc == CLI_OK; dev--) {
            if (!b->dev[dev].on) continue;
            vka_result r = run_case(b, dev, i, rows, n);
            if (r != VKA_SUCCESS) rc = cli_fail("bench", b->dev[dev].ctx, r, rows[0].id);
        }
        for (int k = 0; k < n && rc == CLI_OK; k++) {
            bench_row *row = bench_add_row(b);
            if (!row) return CLI_ERROR;
            *row = rows[k];
            rc = bench_row_done(b, row);
        }
    }
    return rc;
}

int bench_list_generate(bench *b, FILE *f) {
    bench_row row;
    int selected = 0;
    for (int i = 0; i < N_GEN_CASES; i++)
        for (int kv = 1; kv >= 0; kv--) {
            if (!in_mode(b, i)) continue;
            fill_row(&row, i, kv);
            if (!bench_selected(b, row.id)) continue;
            if (f) fprintf(f, "%-44s %s\n", row.id, row.shape);
            selected++;
        }
    return selected;
}
