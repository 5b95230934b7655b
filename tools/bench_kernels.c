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

/* --- 16-bit matmuls: bf16 or fp16 a and b, out fp32 ------------------------------------------ */

/* The 16-bit path the CPU backend's kernel setting stands for: its reference, or its ISA's fast
 * path (for bf16: AMX tiles where the processor has AMX-BF16, else vdpbf16ps with
 * AVX512-BF16). */
static vkc_mm16_path mm16_path(vka_dtype type, const char *cpu_kernels) {
    if (!cpu_kernels || strncmp(cpu_kernels, "fast", 4) != 0) return VKC_MM16_REFERENCE;
    if (strstr(cpu_kernels, "avx512")) return vkc_mm16_best_path(type);
    if (strstr(cpu_kernels, "avx2") && vkc_mm16_path_supported(type, VKC_MM16_WIDEN_AVX2))
        return VKC_MM16_WIDEN_AVX2;
    return VKC_MM16_REFERENCE;
}

/* A case's inputs, drawn as every case's and rounded to its type (h: the words, f: the floats
 * they widen to), and the reference: the fp32 product of those floats (f[0]) on the public API
 * (c->record) of the CPU reference. n[0] out, n[1] a, n[2] b. */
typedef struct mm16_data {
    vka_dtype type;
    size_t n[3];
    uint16_t *h[3];
    float *f[3];
} mm16_data;

static void mm16_free(mm16_data *m) {
    for (int i = 0; i < 3; i++) free(m->h[i]), free(m->f[i]);
}

static vka_result mm16_inputs(bench *b, const kc_case *c, uint64_t seed, mm16_data *m) {
    *m = (mm16_data){.type = (vka_dtype)c->type16, .n = {c->t[0].n, c->t[1].n, c->t[2].n}};
    for (int i = 0; i < 3; i++) {
        m->f[i] = malloc(m->n[i] * sizeof(float));
        if (i) m->h[i] = malloc(m->n[i] * sizeof(uint16_t));
        if (!m->f[i] || (i && !m->h[i])) return VKA_ERROR_OUT_OF_HOST_MEMORY;
    }
    vka_result r = VKA_SUCCESS;
    for (int i = 1; i <= 2 && r == VKA_SUCCESS; i++) {
        uint64_t s = seed + (uint64_t)i * 0xD1B54A32D192ED03ull;
        for (size_t j = 0; j < m->n[i]; j++) m->f[i][j] = init_value(&c->t[i], j, &s);
        r = vka_convert(m->type, m->h[i], VKA_F32, m->f[i], m->n[i]);
        if (r == VKA_SUCCESS) r = vka_convert(VKA_F32, m->f[i], m->type, m->h[i], m->n[i]);
    }
    vka_context *ref = b->ref;
    kc_inst k = {0};
    for (int i = 0; i < 3 && r == VKA_SUCCESS; i++) r = vka_tensor_create(ref, m->n[i], &k.t[i]);
    for (int i = 1; i <= 2 && r == VKA_SUCCESS; i++)
        r = vka_tensor_write(k.t[i], 0, m->f[i], m->n[i]);
    if (r == VKA_SUCCESS) r = vka_graph_begin(ref);
    if (r == VKA_SUCCESS) {
        vka_result rec = c->record(ref, k.t, c);
        r = vka_graph_end(ref, &k.g);
        if (r == VKA_SUCCESS) r = rec;
    }
    if (r == VKA_SUCCESS) r = vka_graph_run(k.g);
    if (r == VKA_SUCCESS) r = vka_tensor_read(k.t[0], 0, m->f[0], m->n[0]);
    inst_free(&k);
    return r;
}

/* out against the reference (its check) */
static void mm16_check(const kc_case *c, const mm16_data *m, const float *out, bench_result *res) {
    double diff, tol;
    bool ok = bench_compare(out, m->f[0], m->n[0], c->tol, &diff, &tol);
    res->check = ok ? BENCH_OK : BENCH_WRONG;
    res->diff = diff, res->tol = tol;
}

typedef struct mm16_run {
    const uint16_t *a, *b;
    float *out;
    int M, N, K, nt;
    vka_dtype type;
    vkc_mm16_path path;
} mm16_run;

static vka_result mm16_once(void *user, double *ms) {
    const mm16_run *u = user;
    double t0 = cli_now();
    vkc_matmul16(u->out, VKA_F32, u->a, u->b, NULL, u->M, u->N, u->K, 1, false, false, 0, 0, 0,
                 1.0f, false, u->type, u->path, 0, u->nt);
    *ms = (cli_now() - t0) * 1e3;
    return VKA_SUCCESS;
}

/* The CPU backend's row: its 16-bit kernel called directly (so that the row names its path),
 * timed on the backend's threads (host clock). */
static vka_result run16_cpu(bench *b, const kc_case *c, bench_row *row, const mm16_data *m) {
    bench_dev *d = &b->dev[BENCH_CPU];
    bench_result *res = &row->r[BENCH_CPU];
    bench_progress(b, row->id, bench_backend_names[BENCH_CPU]);
    mm16_run u = {.a = m->h[1], .b = m->h[2], .M = c->d[0], .N = c->d[1], .K = c->d[2],
                  .nt = d->threads, .type = m->type, .path = mm16_path(m->type, d->cpu_kernels)};
    u.out = malloc(m->n[0] * sizeof(float));
    vka_result r = u.out ? VKA_SUCCESS : VKA_ERROR_OUT_OF_HOST_MEMORY;
    double ms;
    if (r == VKA_SUCCESS) r = mm16_once(&u, &ms);
    if (r == VKA_SUCCESS) {
        mm16_check(c, m, u.out, res);
        snprintf(row->shape, sizeof row->shape, "M=%d N=%d K=%d %s", u.M, u.N, u.K,
                 vkc_mm16_path_name(u.path)); /* the path's name in place of the type's */
        /* vdpbf16ps: 2 products a lane; AMX: a 16 x 16 x 32 TDPBF16PS per 16 cycles, 1024
         * flops a cycle, 16 x AVX-512's two FMA ports (Intel's Sapphire Rapids figures) */
        row->ceiling_scale = u.path == VKC_MM16_DPBF16 ? 2 : u.path == VKC_MM16_AMX ? 16 : 1;
        r = bench_measure(&b->kernel_plan, mm16_once, &u, &res->t);
    }
    if (r == VKA_SUCCESS) {
        res->ran = true;
        res->ceiling = d->peak.gflops * row->ceiling_scale;
    }
    free(u.out);
    return r;
}

/* The Vulkan row: vka_matmul with 16-bit a and b (the words the CPU row reads), one recorded
 * graph timed as every case's. */
static vka_result run16_vk(bench *b, const kc_case *c, bench_row *row, const mm16_data *m) {
    bench_dev *d = &b->dev[BENCH_VK];
    bench_result *res = &row->r[BENCH_VK];
    bench_progress(b, row->id, bench_backend_names[BENCH_VK]);
    kc_inst k = {0};
    vka_result r = vka_tensor_create(d->ctx, m->n[0], &k.t[0]);
    for (int i = 1; i <= 2 && r == VKA_SUCCESS; i++) {
        vka_tensor_desc td = {.n = m->n[i], .dtype = m->type};
        r = vka_tensor_create_desc(d->ctx, &td, &k.t[i]);
        if (r == VKA_SUCCESS) r = vka_tensor_write(k.t[i], 0, m->h[i], m->n[i]);
    }
    if (r == VKA_SUCCESS) r = vka_graph_begin(d->ctx);
    if (r == VKA_SUCCESS) {
        vka_result rec = c->record(d->ctx, k.t, c);
        r = vka_graph_end(d->ctx, &k.g);
        if (r == VKA_SUCCESS) r = rec;
    }
    double ms;
    if (r == VKA_SUCCESS) r = bench_run_graph(k.g, &ms);
    float *out = r == VKA_SUCCESS ? malloc(m->n[0] * sizeof(float)) : NULL;
    if (r == VKA_SUCCESS && !out) r = VKA_ERROR_OUT_OF_HOST_MEMORY;
    if (r == VKA_SUCCESS) r = vka_tensor_read(k.t[0], 0, out, m->n[0]);
    if (r == VKA_SUCCESS) {
        mm16_check(c, m, out, res);
        r = bench_measure(&b->kernel_plan, bench_run_graph, k.g, &res->t);
    }
    if (r == VKA_SUCCESS) {
        res->ran = true;
        res->ceiling = d->peak.gflops;
    }
    free(out);
    inst_free(&k);
    return r;
}

/* A 16-bit case: the inputs and the reference, then each backend's row; a backend out of
 * memory or past a limit skips its row, as in every case. */
static vka_result run16(bench *b, const kc_case *c, bench_row *row, uint64_t seed,
                        int *failed_dev) {
    mm16_data m;
    vka_result r = mm16_inputs(b, c, seed, &m);
    if (r == VKA_SUCCESS) row->has_ref = true;
    for (int dev = 0; dev < BENCH_NB && r == VKA_SUCCESS; dev++) {
        if (!b->dev[dev].on) continue;
        *failed_dev = dev;
        r = dev == BENCH_CPU ? run16_cpu(b, c, row, &m) : run16_vk(b, c, row, &m);
        if (bench_is_capacity(r)) {
            bench_skip(&row->r[dev], b->dev[dev].ctx, r, "");
            row->r[dev].check = BENCH_UNCHECKED;
            r = VKA_SUCCESS;
        }
    }
    mm16_free(&m);
    return r;
}

/* One case on every backend, the CPU backend first: it is the reference. */
static int run_case(bench *b, const kc_case *c, bench_row *row) {
    uint64_t seed = case_seed(row->id, b->o->seed);
    float *ref[KC_MAX_TENSORS] = {0};
    vka_result r = VKA_SUCCESS;
    int failed_dev = BENCH_CPU;
    if (c->type16) {
        r = run16(b, c, row, seed, &failed_dev);
    } else if (b->dev[BENCH_CPU].on) {
        r = run_on(b, b->dev[BENCH_CPU].ctx, BENCH_CPU, true, c, row, seed, ref);
    } else if (b->ref) {
        bench_row ref_row = *row; /* the reference's own outcome is not reported */
        r = run_on(b, b->ref, BENCH_CPU, false, c, &ref_row, seed, ref);
        row->has_ref = ref_row.has_ref;
    }
    if (r == VKA_SUCCESS && b->dev[BENCH_VK].on && !c->type16) {
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
