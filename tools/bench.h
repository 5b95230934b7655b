/*
 * vkattn bench, shared by cmd_bench.c (options, contexts, ceilings, the run), bench_time.c
 * (timing and statistics), bench_kernels.c (the kernel cases: a table of shapes), bench_model.c
 * (end-to-end training steps and forward passes), bench_output.c (the table and the JSON) and
 * bench_plot.c (the SVG plot). docs/benchmarks.md documents what is measured and how.
 */
#ifndef VKA_BENCH_H
#define VKA_BENCH_H

#include "cli.h"

/* The two backends, side by side in every row. */
enum { BENCH_VK = 0, BENCH_CPU = 1, BENCH_NB = 2 };
extern const char *const bench_backend_names[BENCH_NB]; /* "vulkan", "cpu" */

/* The JSON document's schema; bump when a field changes meaning or goes away. */
#define BENCH_SCHEMA "vkattn-bench/1"

/* How often a case runs on one backend. The first run is also the check run. */
typedef struct bench_plan {
    int warmup;      /* untimed runs, the check run included (>= 1) */
    int min_runs;    /* timed runs at least ... */
    int max_runs;    /* ... and at most */
    double budget_s; /* stop after min_runs once the timed runs took this long (host time) */
} bench_plan;

/* Times of the timed runs of a case on one backend. */
typedef struct bench_stats {
    int runs;
    double ms_med, ms_min, ms_max; /* device time per run (timestamps; host clock where none) */
    double host_med;               /* host wall time per run: write inputs, submit, wait */
} bench_stats;

/* Run a case once; *ms = its device time. */
typedef vka_result (*bench_run_fn)(void *user, double *ms);
/* A bench_run_fn for a case that is one graph (user: the vka_graph). */
vka_result bench_run_graph(void *graph, double *ms);
/* plan->warmup - 1 more untimed runs (the caller made the first), then the timed runs. */
vka_result bench_measure(const bench_plan *plan, bench_run_fn run, void *user, bench_stats *out);
/* Median of x[0..n) (reorders x); NaN for n = 0. */
double bench_median(double *x, int n);
/* max |got - want| into *max_diff, and whether it is within tol * max(1, max |want|) (NaN
 * anywhere fails); *abs_tol receives that absolute tolerance. */
bool bench_compare(const float *got, const float *want, size_t n, double tol, double *max_diff,
                   double *abs_tol);

typedef enum bench_check {
    BENCH_UNCHECKED = 0, /* no reference was run */
    BENCH_OK,            /* within tolerance of the CPU backend */
    BENCH_WRONG,         /* beyond it: the time is not worth reporting as fast */
    BENCH_REFERENCE,     /* this is the CPU backend, the reference itself */
} bench_check;
extern const char *const bench_check_names[]; /* "unchecked", "ok", "WRONG", "reference" */

/* A case's outcome on one backend. */
typedef struct bench_result {
    bool ran;             /* timed (else skipped: see note) */
    char note[256];       /* why it was skipped, or "" */
    bench_stats t;
    double ceiling;       /* GFLOP/s (compute-bound) or GB/s (memory-bound) it is compared with */
    double hw_peak;       /* the processor's FMA peak (compute-bound rows on a CPU), else 0 */
    bool above_ceiling;   /* its rate beat even the re-measured ceiling: the run was disturbed */
    bench_check check;
    double diff, tol;     /* check: max |value - reference| and its absolute tolerance */
    /* model cases */
    double loss, grad_norm;          /* of the check run (compared with the CPU backend's) */
    cli_kind_time prof[CLI_MAX_KINDS]; /* a separate profiled run, per kernel kind */
    int n_prof;
    double prof_ms;                  /* that run's device time (profiling serialises it) */
    double memory_mb;                /* vka_gpt_memory_bytes after the runs, MiB */
} bench_result;

/* The GPT configurations of the end-to-end cases (and of the kernel cases' shapes). */
typedef struct bench_model {
    const char *name; /* "default", "gpt2-small", ... */
    int L, NH, C, V;
} bench_model;

/* The models (bench_model.c): index into bench_models. */
enum { BM_DEFAULT = 0, BM_GPT2S = 1, BM_GPT2S_V50257 = 2, BM_COUNT = 3 };
extern const bench_model bench_models[BM_COUNT];
/* Parameters of a model with max_T = T, padding rows included (vka_gpt_num_params). */
size_t bench_model_params(const bench_model *m, int T);
/* Its vocabulary padded as the library pads it (Vp: a multiple of 128). */
int bench_padded_vocab(const bench_model *m);

/* One case: a row of the table, an element of the JSON "cases". */
typedef struct bench_row {
    char id[96];          /* stable: "kind/name/pass", e.g. "matmul/default.qkv/forward" */
    const char *kind;     /* kernel kind (as cli_op_kind), "attention", or "model" */
    char name[48];        /* "default.qkv", "square.1024", "T256", "gpt2-small.B4.T256" */
    const char *pass;     /* "forward", "backward", "train_step" */
    char shape[128];      /* the sizes, as text */
    bool compute;         /* compute-bound: GFLOP/s vs the FMA ceiling; else GB/s vs bandwidth */
    double flop, bytes;   /* work of one run (flop 0 for memory-bound ops) */
    const char *series;   /* plot series, or NULL: "matmul", "softmax_forward", ... */
    double x;             /* plot position: size (M N K)^(1/3) of a matmul, T of a softmax */
    /* the compute ceiling's multiple of the fp32 FMA peak: 2 for bf16 products on vdpbf16ps
     * (two products per fp32 lane and instruction), else 1 (0 reads as 1) */
    double ceiling_scale;
    bool has_ref;         /* the CPU reference ran (its outputs were compared) */
    /* model cases */
    const bench_model *model;
    int B, T;
    size_t params;
    int max_T;            /* the model's context when it is not T (generation rows); 0 = T */
    vka_dtype precision;  /* the model's (vka_gpt_set_precision): VKA_F32, or VKA_BF16 rows */
    double ref_loss, ref_grad_norm; /* the reference's check run */
    bench_result r[BENCH_NB];
} bench_row;

typedef struct bench_opts {
    int backends;         /* index into {"all", "vulkan", "cpu"} */
    cli_backend_opts b;   /* --device, --kernels, --threads, --verbose (b.backend unused) */
    bool quick, full, json, list;
    const char *filter;   /* NULL = every case */
    int precision;        /* index into bench_precision_names: all, or the cases of one number
                           * format (their ids: "bf16", "f16" in them, or neither for fp32) */
    const char *plot;     /* SVG file to write, or NULL */
    int runs, warmup;     /* 0 = by mode */
    uint64_t seed;
} bench_opts;

extern const char *const bench_precision_names[]; /* all, fp32, bf16, fp16 */

/* Memory-bound ceilings depend on the working set (caches): copy bandwidth per copy size. */
#define BENCH_MAX_COPIES 64

/* A backend being measured. */
/* The build's CMAKE_BUILD_TYPE and C flags (CMakeLists.txt), printed by bench: a slow build
 * type shows. */
extern const char bench_build_type[], bench_build_flags[];
/* Release's C flags in the same build tree, and whether flags generate Release's code: the same
 * words apart from debug-info ones (-g...), in the same order (issue 22: RelWithDebInfo's -O2
 * was 1.2x slower than Release's -O3 on the default model's step). */
extern const char bench_release_flags[];
bool bench_optimized_as_release(const char *flags, const char *release);

typedef struct bench_dev {
    bool on;
    vka_context *ctx;
    vka_device_info info;
    vka_peak peak;        /* vka_measure_peak, best of the start and any re-measurement;
                             peak.gflops is the compute ceiling of the rows: the as-built one,
                             or the processor's (hw_gflops) for the CPU backend's fast kernels */
    double built_gflops;  /* the as-built FMA ceiling (vka_peak.gflops) */
    const char *cpu_kernels; /* CPU backend: vka_context_cpu_kernels */
    const char *vk_kernels;  /* Vulkan: vka_context_vulkan_kernels */
    int threads;          /* CPU backend threads */
    size_t copy_n[BENCH_MAX_COPIES];
    double copy_gbps[BENCH_MAX_COPIES];
    int n_copies;
} bench_dev;

typedef struct bench {
    const bench_opts *o;
    bool quick;
    bench_plan kernel_plan, model_plan;
    bench_dev dev[BENCH_NB];
    vka_context *ref;     /* the CPU reference (dev[BENCH_CPU].ctx, or a context of its own) */
    bool progress;        /* say which case runs on stderr (a terminal) */
    vka_peak first_peak[BENCH_NB]; /* the ceilings measured before the cases */
    bool remeasured[BENCH_NB];     /* a case beat a ceiling, which was measured again */
    bench_row *rows;
    int n_rows, cap_rows;
    double t_start;
} bench;

/* A new row (zeroed), or NULL when out of memory (said on stderr). */
bench_row *bench_add_row(bench *b);
/* A row has run on every backend: check its rates against the ceilings (re-measuring a ceiling
 * a case appears to beat, see cmd_bench.c) and print it. Returns CLI_OK or CLI_ERROR. */
int bench_row_done(bench *b, bench_row *row);
/* Whether a case id passes --filter (a substring, or a glob with * and ?). */
bool bench_selected(const bench *b, const char *id);
/* The bandwidth ceiling for a memory-bound case moving `bytes`: the larger of the device's
 * copy bandwidth (vka_measure_peak) and a copy moving as many bytes (measured once per size). */
vka_result bench_bandwidth_ceiling(bench *b, int dev, double bytes, double *gbps);
/* Elements of each buffer of the copy that moves `bytes` (read + written), within the limits. */
size_t bench_copy_elems(const bench_dev *d, double bytes);
/* "skipped: <why>" from the context's last error. */
void bench_skip(bench_result *res, vka_context *ctx, vka_result r, const char *what);
/* Whether r means "this device cannot hold the case" (a skip, not a failure). */
bool bench_is_capacity(vka_result r);
void bench_progress(const bench *b, const char *id, const char *backend);

/* bench_kernels.c: add the kernel cases (filtered) and run them. Returns CLI_OK or CLI_ERROR. */
int bench_run_kernels(bench *b);
/* bench_model.c: the end-to-end cases. */
int bench_run_models(bench *b);
/* Print the selected case ids of this mode (f may be NULL); returns how many there are. */
int bench_list_kernels(bench *b, FILE *f);
int bench_list_models(bench *b, FILE *f);
/* bench_generate.c: per-token generation time with and without the KV cache. */
int bench_run_generate(bench *b);
int bench_list_generate(bench *b, FILE *f);

/* bench_output.c */
void bench_print_header(const bench *b, FILE *f);
void bench_print_row(const bench *b, const bench_row *row, FILE *f);
void bench_print_footer(const bench *b, FILE *f);
void bench_write_json(const bench *b, FILE *f);
/* Throughput of a result (GFLOP/s or GB/s, from the median device time); NaN if none. */
double bench_rate(const bench_row *row, const bench_result *res);

/* bench_plot.c: the SVG plot; returns CLI_OK or CLI_ERROR (message printed). */
int bench_write_plot(const bench *b, const char *path);

#endif
