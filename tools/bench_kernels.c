/*
 * vkattn bench: running the kernel cases of bench_cases.c. Every backend gets the same data
 * (drawn from the case's id and --seed); the first run is the check run, whose outputs are
 * compared with the CPU backend's; then the warm-up and the timed runs of one recorded graph.
 */
#include "bench_cases.h"

#include "cpu/matmul16.h" /* the CPU backend's 16-bit kernel, compiled in (CMakeLists.txt) */

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAX_CASES 160
#define CHUNK ((size_t)1 << 20) /* elements written per vka_tensor_write */

static uint64_t splitmix(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* FNV-1a of the id, mixed with the seed: a case's data does not depend on what else runs. */
static uint64_t case_seed(const char *id, uint64_t seed) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (const unsigned char *p = (const unsigned char *)id; *p; p++)
        h = (h ^ *p) * 0x100000001b3ull;
    return h ^ (seed * 0x9E3779B97F4A7C15ull);
}

static float init_value(const kc_tensor *kt, size_t i, uint64_t *s) {
    switch (kt->init) {
    case KC_RANDOM: return kt->scale * ((float)(splitmix(s) >> 40) / 8388608.0f - 1.0f);
    case KC_POSITIVE: return kt->scale * ((float)((splitmix(s) >> 40) + 1) / 16777216.0f);
    case KC_IDS: {
        int32_t id = (int32_t)(splitmix(s) % (uint64_t)kt->ids_max);
        float f;
        memcpy(&f, &id, sizeof f);
        return f;
    }
    case KC_HYPER: { /* AdamW's scalars at step t = 3 */
        static const float hyper[VKA_HYPER_COUNT] = {
            [VKA_HYPER_LR] = 1e-3f, [VKA_HYPER_BETA1] = 0.9f, [VKA_HYPER_BETA2] = 0.99f,
            [VKA_HYPER_EPS] = 1e-8f, [VKA_HYPER_BC1] = 0.271f, [VKA_HYPER_BC2] = 0.029701f};
        return i < VKA_HYPER_COUNT ? hyper[i] : 0.0f;
    }
    case KC_GSCALE: return i == 1 ? 0.75f : 1.0f; /* {norm, clip scale} */
    case KC_ZERO: break;
    }
    return 0.0f;
}

/* A case's tensors and its recorded graph on one context. */
typedef struct kc_inst {
    vka_tensor *t[KC_MAX_TENSORS];
    vka_graph *g;
} kc_inst;

static vka_result inst_setup(kc_inst *k, vka_context *ctx, const kc_case *c, uint64_t seed) {
    float *buf = malloc(CHUNK * sizeof *buf);
    vka_result r = buf ? VKA_SUCCESS : VKA_ERROR_OUT_OF_HOST_MEMORY;
    for (int i = 0; i < c->n_tensors && r == VKA_SUCCESS; i++) {
        const kc_tensor *kt = &c->t[i];
        r = vka_tensor_create(ctx, kt->n, &k->t[i]);
        if (kt->init == KC_ZERO) continue; /* tensors start zero-filled */
        uint64_t s = seed + (uint64_t)i * 0xD1B54A32D192ED03ull;
        for (size_t off = 0; off < kt->n && r == VKA_SUCCESS; off += CHUNK) {
            size_t n = kt->n - off < CHUNK ? kt->n - off : CHUNK;
            for (size_t j = 0; j < n; j++) buf[j] = init_value(kt, off + j, &s);
            r = vka_tensor_write(k->t[i], off, buf, n);
        }
    }
    free(buf);
    if (r == VKA_SUCCESS) r = vka_graph_begin(ctx);
    if (r == VKA_SUCCESS) {
        vka_result rec = c->record(ctx, k->t, c);
        r = vka_graph_end(ctx, &k->g);
        if (r == VKA_SUCCESS) r = rec;
    }
    return r;
}

/* The compared tensors, read back (out[i] malloc'd; NULL for the others). */
static vka_result inst_read(const kc_inst *k, const kc_case *c, float **out) {
    for (int i = 0; i < c->n_tensors; i++) {
        if (!c->t[i].compare) continue;
        out[i] = malloc(c->t[i].n * sizeof(float));
        if (!out[i]) return VKA_ERROR_OUT_OF_HOST_MEMORY;
        vka_result r = vka_tensor_read(k->t[i], 0, out[i], c->t[i].n);
        if (r != VKA_SUCCESS) return r;
    }
    return VKA_SUCCESS;
}

static void inst_free(kc_inst *k) {
    vka_graph_destroy(k->g);
    for (int i = 0; i < KC_MAX_TENSORS; i++) vka_tensor_destroy(k->t[i]);
    memset(k, 0, sizeof *k);
}

static void free_outputs(float **out) {
    for (int i = 0; i < KC_MAX_TENSORS; i++) {
        free(out[i]);
        out[i] = NULL;
    }
}

/* Fold the outputs got into res's check against ref (every compared tensor must pass). */
static void check_outputs(const kc_case *c, float **got, float **ref, bench_result *res) {
    res->check = BENCH_OK;
    double worst = -1.0;
    for (int i = 0; i < c->n_tensors; i++) {
        if (!c->t[i].compare) continue;
        double diff, tol;
        bool ok = bench_compare(got[i], ref[i], c->t[i].n, c->tol, &diff, &tol);
        if (!ok) res->check = BENCH_WRONG;
        double ratio = isfinite(diff) ? diff / tol : INFINITY;
        if (ratio > worst) {
            worst = ratio;
            res->diff = diff;
            res->tol = tol;
        }
    }
}

/* The check run, the check, then the timed runs, on one backend (or, with timed = false, only
 * the check run of the reference). ref: the CPU backend's outputs (filled when dev is it). */
static vka_result run_on(bench *b, vka_context *ctx, int dev, bool timed, const kc_case *c,
                         bench_row *row, uint64_t seed, float **ref) {
    bench_result *res = &row->r[dev];
    kc_inst k = {0};
    float *got[KC_MAX_TENSORS] = {0};
    bench_progress(b, row->id, timed ? bench_backend_names[dev] : "reference");
    double ms;
    vka_result r = inst_setup(&k, ctx, c, seed);
    if (r == VKA_SUCCESS) r = bench_run_graph(k.g, &ms);
    if (r == VKA_SUCCESS) r = inst_read(&k, c, got);
    if (r == VKA_SUCCESS && dev == BENCH_CPU) {
        memcpy(ref, got, sizeof got);
        memset(got, 0, sizeof got);
        row->has_ref = true;
        res->check = BENCH_REFERENCE;
    } else if (r == VKA_SUCCESS && row->has_ref) {
        check_outputs(c, got, ref, res);
    }
    if (r == VKA_SUCCESS && timed)
        r = bench_measure(&b->kernel_plan, bench_run_graph, k.g, &res->t);
    if (r == VKA_SUCCESS && timed) {
        res->ran = true;
        if (row->compute) res->ceiling = b->dev[dev].peak.gflops;
        else r = bench_bandwidth_ceiling(b, dev, row->bytes, &res->ceiling);
    }
    if (bench_is_capacity(r)) {
        bench_skip(res, ctx, r, timed ? "" : "the CPU reference: ");
        res->check = BENCH_UNCHECKED;
        r = VKA_SUCCESS;
    }
    free_outputs(got);
    inst_free(&k);
    return r;
}

/* --- bf16 matmuls: the CPU backend's internal kernel, called directly ------------------------ */

/* The bf16 path the CPU backend's kernel setting stands for: its reference, or its ISA's fast
 * path (vdpbf16ps where the processor has AVX512-BF16). */
static vkc_mm16_path bf16_path(const char *cpu_kernels) {
    if (!cpu_kernels || strncmp(cpu_kernels, "fast", 4) != 0) return VKC_MM16_REFERENCE;
    if (strstr(cpu_kernels, "avx512")) return vkc_mm16_best_path(VKA_BF16);
    if (strstr(cpu_kernels, "avx2") && vkc_mm16_path_supported(VKA_BF16, VKC_MM16_WIDEN_AVX2))
        return VKC_MM16_WIDEN_AVX2;
    return VKC_MM16_REFERENCE;
}

typedef struct bf16_run {
    const uint16_t *a, *b;
    float *out;
    int M, N, K, nt;
    vkc_mm16_path path;
} bf16_run;

static vka_result bf16_once(void *user, double *ms) {
    const bf16_run *u = user;
    double t0 = cli_now();
    vkc_matmul16(u->out, u->a, u->b, NULL, u->M, u->N, u->K, 1, false, false, 0, 0, 0, 1.0f,
                 false, VKA_BF16, u->path, u->nt);
    *ms = (cli_now() - t0) * 1e3;
    return VKA_SUCCESS;
}

/* A bf16 case on the CPU backend: its inputs drawn as every case's and rounded to bf16, checked
 * against the fp32 product of the same values on the public API (c->record), then timed on the
 * backend's threads (host clock). */
static vka_result run_bf16(bench *b, const kc_case *c, bench_row *row, uint64_t seed) {
    bench_dev *d = &b->dev[BENCH_CPU];
    bench_result *res = &row->r[BENCH_CPU];
    bench_progress(b, row->id, bench_backend_names[BENCH_CPU]);
    bf16_run u = {.M = c->d[0], .N = c->d[1], .K = c->d[2], .nt = d->threads,
                  .path = bf16_path(d->cpu_kernels)};
    size_t n[3] = {c->t[0].n, c->t[1].n, c->t[2].n};
    uint16_t *h[3] = {NULL, malloc(n[1] * sizeof(uint16_t)), malloc(n[2] * sizeof(uint16_t))};
    float *f[3] = {malloc(n[0] * sizeof(float)), malloc(n[1] * sizeof(float)),
                   malloc(n[2] * sizeof(float))};
    kc_inst k = {0};
    vka_result r = h[1] && h[2] && f[0] && f[1] && f[2] ? VKA_SUCCESS
                                                       : VKA_ERROR_OUT_OF_HOST_MEMORY;
    for (int i = 1; i <= 2 && r == VKA_SUCCESS; i++) {
        uint64_t s = seed + (uint64_t)i * 0xD1B54A32D192ED03ull;
        for (size_t j = 0; j < n[i]; j++) {
            h[i][j] = vkc_f32_to_bf16_1(init_value(&c->t[i], j, &s));
            f[i][j] = vkc_bf16_to_f32_1(h[i][j]);
        }
    }
    for (int i = 0; i < 3 && r == VKA_SUCCESS; i++) r = vka_tensor_create(d->ctx, n[i], &k.t[i]);
    for (int i = 1; i <= 2 && r == VKA_SUCCESS; i++) r = vka_tensor_write(k.t[i], 0, f[i], n[i]);
    if (r == VKA_SUCCESS) r = vka_graph_begin(d->ctx);
    if (r == VKA_SUCCESS) {
        vka_result rec = c->record(d->ctx, k.t, c);
        r = vka_graph_end(d->ctx, &k.g);
        if (r == VKA_SUCCESS) r = rec;
    }
    if (r == VKA_SUCCESS) r = vka_graph_run(k.g);
    if (r == VKA_SUCCESS) r = vka_tensor_read(k.t[0], 0, f[0], n[0]);
    float *out = r == VKA_SUCCESS ? malloc(n[0] * sizeof(float)) : NULL;
    if (!out && r == VKA_SUCCESS) r = VKA_ERROR_OUT_OF_HOST_MEMORY;
    u.a = h[1], u.b = h[2], u.out = out;
    double ms;
    if (r == VKA_SUCCESS) r = bf16_once(&u, &ms);
    if (r == VKA_SUCCESS) {
        double diff, tol;
        res->check = bench_compare(out, f[0], n[0], c->tol, &diff, &tol) ? BENCH_OK : BENCH_WRONG;
        res->diff = diff, res->tol = tol;
        row->has_ref = true;
        snprintf(row->shape, sizeof row->shape, "M=%d N=%d K=%d %s", u.M, u.N, u.K,
                 vkc_mm16_path_name(u.path)); /* the path's name in place of "bf16" */
        row->ceiling_scale = u.path == VKC_MM16_DPBF16 ? 2 : 1;
        r = bench_measure(&b->kernel_plan, bf16_once, &u, &res->t);
    }
    if (r == VKA_SUCCESS) {
        res->ran = true;
        res->ceiling = d->peak.gflops * row->ceiling_scale;
    }
    if (bench_is_capacity(r)) {
        bench_skip(res, d->ctx, r, "");
        res->check = BENCH_UNCHECKED;
        r = VKA_SUCCESS;
    }
    snprintf(row->r[BENCH_VK].note, sizeof row->r[BENCH_VK].note,
             "bf16: the CPU backend's kernel, called directly (Vulkan's bf16 matmul has no row yet)");
    free(out);
    for (int i = 0; i < 3; i++) free(h[i]), free(f[i]);
    inst_free(&k);
    return r;
}

/* One case on every backend, the CPU backend first: it is the reference. */
static int run_case(bench *b, const kc_case *c, bench_row *row) {
    uint64_t seed = case_seed(row->id, b->o->seed);
    float *ref[KC_MAX_TENSORS] = {0};
    vka_result r = VKA_SUCCESS;
    int failed_dev = BENCH_CPU;
    if (c->cpu_bf16) {
        if (b->dev[BENCH_CPU].on) r = run_bf16(b, c, row, seed);
    } else if (b->dev[BENCH_CPU].on) {
        r = run_on(b, b->dev[BENCH_CPU].ctx, BENCH_CPU, true, c, row, seed, ref);
    } else if (b->ref) {
        bench_row ref_row = *row; /* the reference's own outcome is not reported */
        r = run_on(b, b->ref, BENCH_CPU, false, c, &ref_row, seed, ref);
        row->has_ref = ref_row.has_ref;
    }
    if (r == VKA_SUCCESS && b->dev[BENCH_VK].on && !c->cpu_bf16) {
        failed_dev = BENCH_VK;
        r = run_on(b, b->dev[BENCH_VK].ctx, BENCH_VK, true, c, row, seed, ref);
    }
    free_outputs(ref);
    if (r == VKA_SUCCESS) return CLI_OK;
    vka_context *ctx = failed_dev == BENCH_VK ? b->dev[BENCH_VK].ctx
                       : b->dev[BENCH_CPU].on ? b->dev[BENCH_CPU].ctx : b->ref;
    char what[160];
    snprintf(what, sizeof what, "%s on %s", row->id, bench_backend_names[failed_dev]);
    return cli_fail("bench", ctx, r, what);
}

/* The cases of this mode (calloc'd arrays); returns their count, or -1 if out of memory. */
static int enumerate(bench *b, kc_case **cases, bench_row **rows) {
    *cases = calloc(MAX_CASES, sizeof **cases);
    *rows = calloc(MAX_CASES, sizeof **rows);
    if (!*cases || !*rows) return -1;
    return kc_enumerate(b->quick, *cases, *rows, MAX_CASES);
}

int bench_run_kernels(bench *b) {
    kc_case *cases = NULL;
    bench_row *rows = NULL;
    int n = enumerate(b, &cases, &rows), rc = n < 0 ? CLI_ERROR : CLI_OK;
    if (n < 0) fprintf(stderr, "vkattn bench: out of memory\n");
    for (int i = 0; i < n && rc == CLI_OK; i++) {
        if (!bench_selected(b, rows[i].id)) continue;
        bench_row *row = bench_add_row(b);
        if (!row) {
            rc = CLI_ERROR;
            break;
        }
        *row = rows[i];
        rc = run_case(b, &cases[i], row);
        if (rc == CLI_OK) rc = bench_row_done(b, row);
    }
    free(cases);
    free(rows);
    return rc;
}

int bench_list_kernels(bench *b, FILE *f) {
    kc_case *cases = NULL;
    bench_row *rows = NULL;
    int n = enumerate(b, &cases, &rows), selected = 0;
    for (int i = 0; i < n; i++) {
        if (!bench_selected(b, rows[i].id)) continue;
        if (f) fprintf(f, "%-44s %s\n", rows[i].id, rows[i].shape);
        selected++;
    }
    free(cases);
    free(rows);
    return selected;
}
