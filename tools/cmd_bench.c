/* vkattn bench: options, the contexts of both backends, their measured ceilings, and the run
 * (the cases are in bench_kernels.c and bench_model.c; docs/benchmarks.md is the manual). */
#define _POSIX_C_SOURCE 200809L /* isatty, fileno */
#include "bench.h"
#include "progress.h"

#include <fnmatch.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char *const bench_backend_names[BENCH_NB] = {"vulkan", "cpu"};
static const char *const backend_choices[] = {"all", "vulkan", "cpu", NULL};

static const cli_command bench_cmd = {
    .name = "bench",
    .usage = "[options]",
    .about =
        "Measure how fast the kernels and whole training steps run, on the Vulkan device and\n"
        "on the CPU backend side by side: the device's fp32 multiply-add and copy-bandwidth\n"
        "ceilings, then every kernel case (matmuls at the models' shapes and square sizes,\n"
        "masked softmax, the attention block, permutes, layernorm, GELU, residual, bias\n"
        "gradient, cross-entropy, AdamW; forward and backward) and end-to-end forward passes and\n"
        "training steps of the default model and a GPT-2-small-shaped one, with the share of\n"
        "each kernel kind.",
    .notes =
        "Each case runs once as a check (compared with the CPU backend: a wrong result is\n"
        "reported as WRONG, and vkattn bench exits 1), then the rest of its warm-up, then up to\n"
        "N timed runs (fewer once the case's time budget is spent). Times are the median\n"
        "[min, max] of the device time (Vulkan timestamp queries, scaled by timestampPeriod;\n"
        "the host clock where the queue has none, and on the CPU backend), plus the host wall\n"
        "time per run. Compute-bound cases (matmul, attention, models) are shown in GFLOP/s\n"
        "against the FMA ceiling, memory-bound ones in GB/s against the copy bandwidth at the\n"
        "same size.\n"
        "--quick (the default on a CPU-type device such as lavapipe, or with the CPU backend\n"
        "only) runs a small set in under a minute; --full runs every case. --filter takes a\n"
        "substring of the case ids, a glob (*, ?), or several separated by commas; --list\n"
        "prints the ids. --json prints one JSON document (docs/benchmarks.md lists its\n"
        "fields) instead of the table; --plot writes an SVG of matmul and softmax throughput\n"
        "against size with the ceilings as lines.",
};

/* --- small helpers the case files share ------------------------------------------------------- */

bench_row *bench_add_row(bench *b) {
    if (b->n_rows == b->cap_rows) {
        int cap = b->cap_rows ? 2 * b->cap_rows : 64;
        bench_row *rows = realloc(b->rows, (size_t)cap * sizeof *rows);
        if (!rows) {
            fprintf(stderr, "vkattn bench: out of memory\n");
            return NULL;
        }
        b->rows = rows;
        b->cap_rows = cap;
    }
    bench_row *row = &b->rows[b->n_rows++];
    memset(row, 0, sizeof *row);
    return row;
}

const char *const bench_precision_names[] = {"all", "fp32", "bf16", "fp16", NULL};

/* The number format of a case, from its id (bf16.square.N, f16.square.N, *.bf16, *.f16). */
static int id_precision(const char *id) {
    if (strstr(id, "bf16")) return 2;
    if (strstr(id, "f16")) return 3;
    return 1;
}

bool bench_selected(const bench *b, const char *id) {
    if (b->o->precision && id_precision(id) != b->o->precision) return false;
    const char *f = b->o->filter;
    if (!f) return true;
    while (*f) {
        size_t len = strcspn(f, ",");
        char pat[128];
        snprintf(pat, sizeof pat, "%.*s", (int)(len < sizeof pat ? len : sizeof pat - 1), f);
        if (pat[0] && (strpbrk(pat, "*?[") ? fnmatch(pat, id, 0) == 0 : strstr(id, pat) != NULL))
            return true;
        f += len;
        if (*f == ',') f++;
    }
    return false;
}

bool bench_is_capacity(vka_result r) {
    return r == VKA_ERROR_DEVICE_LIMIT || r == VKA_ERROR_OUT_OF_DEVICE_MEMORY ||
           r == VKA_ERROR_OUT_OF_HOST_MEMORY;
}

void bench_skip(bench_result *res, vka_context *ctx, vka_result r, const char *what) {
    const char *msg = vka_last_error(ctx);
    res->ran = false;
    snprintf(res->note, sizeof res->note, "skipped: %s%s", what, *msg ? msg : vka_result_string(r));
}

void bench_progress(const bench *b, const char *id, const char *backend) {
    if (!b->progress) return;
    /* Fitted to the terminal (one column short: a full last column wraps on some): the case's
     * id stays; the backend goes first, then the elapsed time. */
    char t[32], be[96], line[512];
    snprintf(t, sizeof t, "[%5.1f s]", cli_now() - b->t_start);
    snprintf(be, sizeof be, "(%s)", backend);
    const progress_field fields[] = {{t, 1}, {id, 0}, {be, 2}};
    progress_fit(fields, 3, " ", progress_width(fileno(stderr)) - 1, line, sizeof line);
    fprintf(stderr, "\r\033[K%s", line);
    fflush(stderr);
}

static void progress_clear(const bench *b) {
    if (b->progress) fputs("\r\033[K", stderr);
}

/* --- ceilings --------------------------------------------------------------------------------- */

static vka_result measure_peak(bench *b, int dev) {
    bench_dev *d = &b->dev[dev];
    bench_progress(b, "ceilings", bench_backend_names[dev]);
    vka_peak p;
    vka_result r = vka_measure_peak(d->ctx, b->quick ? 10.0 : 20.0, 5, &p);
    if (r != VKA_SUCCESS) return r;
    /* a ceiling is the best the device was seen to do */
    if (p.gflops > d->built_gflops) {
        d->built_gflops = p.gflops;
        d->peak.fma_gflop = p.fma_gflop;
    }
    if (p.hw_gflops > d->peak.hw_gflops) {
        d->peak.hw_gflops = p.hw_gflops;
        d->peak.hw_isa = p.hw_isa;
    }
    /* the CPU backend's fast kernels are built for the processor's widest ISA: its peak is
     * their ceiling; the reference kernels and Vulkan's shaders have the as-built one */
    bool fast = dev == BENCH_CPU && d->cpu_kernels && strncmp(d->cpu_kernels, "fast", 4) == 0;
    d->peak.gflops = fast && d->peak.hw_gflops > d->built_gflops ? d->peak.hw_gflops
                                                                  : d->built_gflops;
    if (p.gbps > d->peak.gbps) {
        d->peak.gbps = p.gbps;
        d->peak.copy_mbytes = p.copy_mbytes;
        d->peak.copy_passes = p.copy_passes;
        d->peak.copy_source_written = p.copy_source_written;
        d->peak.llc_mbytes = p.llc_mbytes;
    }
    return VKA_SUCCESS;
}

/* A case that beats its ceiling means the ceiling was measured low (the machine was busy, say):
 * measure it again (the device's ceilings once per run, a copy size once per case). A case that
 * still beats it ran while the machine was disturbed (a wide +-%, say): its row is marked, the
 * footer and the JSON ("above_ceiling") say so. */
int bench_row_done(bench *b, bench_row *row) {
    for (int dev = 0; dev < BENCH_NB; dev++) {
        bench_result *res = &row->r[dev];
        bench_dev *d = &b->dev[dev];
        double rate = bench_rate(row, res);
        if (!res->ran || !(rate > res->ceiling)) continue;
        vka_result r = b->remeasured[dev] ? VKA_SUCCESS : measure_peak(b, dev);
        if (r == VKA_SUCCESS && row->compute) {
            res->ceiling = d->peak.gflops * (row->ceiling_scale > 0 ? row->ceiling_scale : 1);
        } else if (r == VKA_SUCCESS) {
            size_t n = bench_copy_elems(d, row->bytes);
            for (int i = 0; i < d->n_copies; i++) /* forget that size's copy: measure it anew */
                if (d->copy_n[i] == n) d->copy_n[i] = 0;
            double again = 0.0;
            r = bench_bandwidth_ceiling(b, dev, row->bytes, &again);
            if (again > res->ceiling) res->ceiling = again;
        }
        if (r != VKA_SUCCESS) return cli_fail("bench", d->ctx, r, "ceilings");
        b->remeasured[dev] = true;
        res->above_ceiling = rate > res->ceiling;
        if (res->above_ceiling && b->o->json) /* the table marks the row instead */
            fprintf(stderr, "vkattn bench: %s on %s: %.4g %s is above the re-measured ceiling "
                    "%.4g: the run was disturbed; rerun on a quiet machine\n", row->id,
                    bench_backend_names[dev], rate, row->compute ? "GFLOP/s" : "GB/s",
                    res->ceiling);
    }
    progress_clear(b);
    if (!b->o->json) bench_print_row(b, row, stdout);
    return CLI_OK;
}

/* The final ceilings for every row (they only grow when re-measured). */
static void final_ceilings(bench *b) {
    for (int i = 0; i < b->n_rows; i++)
        for (int dev = 0; dev < BENCH_NB; dev++) {
            bench_result *res = &b->rows[i].r[dev];
            const vka_peak *p = &b->dev[dev].peak;
            if (!res->ran) continue;
            double scale = b->rows[i].ceiling_scale > 0 ? b->rows[i].ceiling_scale : 1;
            if (b->rows[i].compute)
                res->ceiling = p->gflops * scale, res->hw_peak = p->hw_gflops * scale;
            else if (p->gbps > res->ceiling) res->ceiling = p->gbps;
        }
}

/* --- contexts --------------------------------------------------------------------------------- */

/* Whether r says there is no Vulkan loader or device at all, and the user chose none (--device,
 * $VKATTN_DEVICE, --kernels): the one failure after which the CPU backend is measured alone. */
static bool no_vulkan_at_all(vka_result r, const cli_backend_opts *vk) {
    const char *env = getenv("VKATTN_DEVICE");
    bool chosen = vk->device || (env && *env) || vk->kernels != 0;
    return (r == VKA_ERROR_NO_VULKAN || r == VKA_ERROR_NO_DEVICE) && !chosen;
}

static int open_backends(bench *b, const bench_opts *o) {
    cli_backend_opts vk = o->b, cpu = o->b;
    vk.backend = VKA_BACKEND_VULKAN;
    cpu.backend = VKA_BACKEND_CPU;
    char why[512];
    if (o->backends != 2) {
        vka_result r = cli_context_try("bench", &vk, &b->dev[BENCH_VK].ctx, why, sizeof why);
        /* Only a machine without Vulkan makes the default run CPU-only; a device or setting the
         * user chose that does not work is an error, said the way the other commands say it. */
        if (r != VKA_SUCCESS && (o->backends == 1 || !no_vulkan_at_all(r, &vk)))
            return cli_context("bench", &vk, &b->dev[BENCH_VK].ctx);
        if (r != VKA_SUCCESS)
            fprintf(stderr, "vkattn bench: no Vulkan (%s); measuring the CPU backend only\n", why);
        b->dev[BENCH_VK].on = r == VKA_SUCCESS;
    }
    /* the CPU context is the reference even when only Vulkan is measured */
    int rc = cli_context("bench", &cpu, &b->dev[BENCH_CPU].ctx);
    if (rc != CLI_OK) return rc;
    b->dev[BENCH_CPU].on = o->backends != 1;
    b->ref = b->dev[BENCH_CPU].ctx;
    for (int dev = 0; dev < BENCH_NB; dev++) {
        bench_dev *d = &b->dev[dev];
        if (!d->on) continue;
        vka_result r = vka_context_selected_device(d->ctx, &d->info);
        if (r != VKA_SUCCESS) return cli_fail("bench", d->ctx, r, "device");
        d->threads = vka_context_cpu_threads(d->ctx);
        d->cpu_kernels = vka_context_cpu_kernels(d->ctx);
        d->vk_kernels = vka_context_vulkan_kernels(d->ctx);
    }
    return CLI_OK;
}

static int close_backends(bench *b, int rc) {
    if (b->dev[BENCH_VK].ctx) rc = cli_finish("bench", b->dev[BENCH_VK].ctx, rc);
    if (b->dev[BENCH_CPU].ctx) rc = cli_finish("bench", b->dev[BENCH_CPU].ctx, rc);
    return rc;
}

/* --quick unless --full, or a GPU is measured. */
static void set_mode(bench *b, const bench_opts *o) {
    bool gpu = b->dev[BENCH_VK].on && b->dev[BENCH_VK].info.type != VKA_DEVICE_TYPE_CPU;
    b->quick = o->quick || (!o->full && !gpu);
    static const bench_plan kernel_quick = {.warmup = 1, .min_runs = 3, .max_runs = 50,
                                            .budget_s = 0.25},
                            kernel_full = {.warmup = 3, .min_runs = 5, .max_runs = 200,
                                           .budget_s = 2.0},
                            model_quick = {.warmup = 1, .min_runs = 1, .max_runs = 3,
                                           .budget_s = 1.0},
                            model_full = {.warmup = 2, .min_runs = 3, .max_runs = 10,
                                          .budget_s = 10.0};
    b->kernel_plan = b->quick ? kernel_quick : kernel_full;
    b->model_plan = b->quick ? model_quick : model_full;
    bench_plan *plans[2] = {&b->kernel_plan, &b->model_plan};
    for (int i = 0; i < 2; i++) {
        if (o->runs) {
            plans[i]->max_runs = o->runs;
            if (plans[i]->min_runs > o->runs) plans[i]->min_runs = o->runs;
        }
        if (o->warmup) plans[i]->warmup = o->warmup;
    }
}

static int run(bench *b) {
    for (int dev = 0; dev < BENCH_NB; dev++) {
        if (!b->dev[dev].on) continue;
        vka_result r = measure_peak(b, dev);
        if (r != VKA_SUCCESS) return cli_fail("bench", b->dev[dev].ctx, r, "ceilings");
        b->first_peak[dev] = b->dev[dev].peak;
    }
    progress_clear(b);
    if (!b->o->json) bench_print_header(b, stdout);
    int rc = bench_run_kernels(b);
    if (rc == CLI_OK) rc = bench_run_models(b);
    if (rc == CLI_OK) rc = bench_run_generate(b);
    progress_clear(b);
    if (rc != CLI_OK) return rc;
    final_ceilings(b);
    if (b->o->json) bench_write_json(b, stdout);
    else bench_print_footer(b, stdout);
    fflush(stdout);
    if (b->o->plot) rc = bench_write_plot(b, b->o->plot);
    int wrong = 0;
    for (int i = 0; i < b->n_rows; i++)
        for (int dev = 0; dev < BENCH_NB; dev++) wrong += b->rows[i].r[dev].check == BENCH_WRONG;
    if (wrong) {
        fprintf(stderr, "vkattn bench: %d result(s) differ from the CPU reference (WRONG above)\n",
                wrong);
        rc = CLI_ERROR;
    }
    return rc;
}

static int check_options(const bench_opts *o) {
    /* --backend all measures both; the CPU reference that --backend vulkan also opens takes no
     * options (its speed is not measured). */
    static const unsigned uses[] = {CLI_USES_VULKAN | CLI_USES_CPU, CLI_USES_VULKAN, CLI_USES_CPU};
    int rc = cli_check_backend_opts("bench", &o->b, uses[o->backends]);
    if (rc != CLI_OK) return rc;
    if (o->quick && o->full)
        return cli_usage_error("bench", "--quick and --full exclude each other");
    if (o->filter && o->filter[strspn(o->filter, ",")] == '\0')
        return cli_usage_error("bench", "--filter '%s' has no pattern", o->filter);
    return CLI_OK;
}

int cmd_bench(int argc, char **argv) {
    bench_opts o = {.seed = 1};
    cli_opt opts[] = {
        CLI_CHOICE("backend", &o.backends, "NAME",
                   "all (Vulkan and the CPU backend side by side), vulkan or cpu (default: all)",
                   backend_choices),
        CLI_STRING("device", &o.b.device, "N",
                   "Vulkan device index as `vkattn info` lists it (default: $VKATTN_DEVICE, else "
                   "the best)"),
        CLI_CHOICE("kernels", &o.b.kernels, "KIND",
                   "Vulkan kernel variants: auto, gpu or cpu (default: auto, by device type)",
                   cli_kernel_names),
        CLI_INT("threads", &o.b.threads, "N",
                "CPU backend threads (default: 0 = OpenMP's default, $OMP_NUM_THREADS)", 0,
                VKA_CPU_MAX_THREADS),
        CLI_FLAG("quick", &o.quick, "the small set, under a minute on lavapipe (default on a "
                 "CPU-type device)"),
        CLI_FLAG("full", &o.full, "every case (default on a GPU)"),
        CLI_STRING("filter", &o.filter, "PATTERN", "run only the cases whose id contains "
                   "PATTERN (or matches it, with * or ?); several separated by commas"),
        CLI_CHOICE("precision", &o.precision, "P",
                   "only the cases of one number format: fp32, bf16 or fp16 (the mixed-precision "
                   "model rows, *.bf16 and *.f16, and the 16-bit matmuls), or all (default: all)",
                   bench_precision_names),
        CLI_FLAG("list", &o.list, "print the ids and shapes of the selected cases and exit"),
        CLI_INT("runs", &o.runs, "N", "timed runs per case at most (default: 50 quick, 200 full; "
                "3 and 10 for the models)", 1, 1000),
        CLI_INT("warmup", &o.warmup, "N", "untimed runs per case, the check run included "
                "(default: 1 quick, 3 full)", 1, 1000),
        CLI_U64("seed", &o.seed, "S", "seed of the random inputs (default: 1)"),
        CLI_FLAG("json", &o.json, "print one JSON document instead of the table"),
        CLI_STRING("plot", &o.plot, "FILE", "write an SVG plot of matmul and softmax throughput "
                   "against size, with the ceilings"),
        CLI_FLAG("verbose", &o.b.verbose, "print the library's info messages to stderr"),
    };
    int n_opts = (int)(sizeof opts / sizeof opts[0]);
    int rc = cli_parse(&bench_cmd, argc, argv, opts, n_opts);
    if (rc != CLI_OK) return rc < 0 ? CLI_OK : rc;
    rc = check_options(&o);
    if (rc == CLI_OK && o.list && (o.json || o.plot))
        rc = cli_usage_error("bench", "--list prints the case ids and measures nothing; it does "
                             "not take %s", o.json ? "--json" : "--plot");
    /* the plot is written after the run: say now that it cannot be */
    if (rc == CLI_OK && o.plot)
        rc = cli_check_writable("bench", "--plot", o.plot, "", "bench.svg");
    if (rc != CLI_OK) return rc;

    bench b = {.o = &o, .t_start = cli_now(), .progress = isatty(fileno(stderr)) != 0};
    rc = open_backends(&b, &o);
    if (rc == CLI_OK) {
        set_mode(&b, &o);
        if (bench_list_kernels(&b, NULL) + bench_list_models(&b, NULL) +
                bench_list_generate(&b, NULL) ==
            0) {
            rc = cli_usage_error("bench", "--filter '%s' matches none of the %s cases (--list "
                                 "prints them)", o.filter, b.quick ? "--quick" : "--full");
        } else if (o.list) {
            bench_list_kernels(&b, stdout);
            bench_list_models(&b, stdout);
            bench_list_generate(&b, stdout);
        } else {
            rc = run(&b);
        }
    }
    free(b.rows);
    return close_backends(&b, rc);
}
