/* vkattn bench: the table on the terminal and the JSON document (docs/benchmarks.md documents
 * both; BENCH_SCHEMA names the JSON's version). */
#include "bench.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

double bench_rate(const bench_row *row, const bench_result *res) {
    if (!res->ran || !(res->t.ms_med > 0)) return NAN;
    double work = row->compute ? row->flop : row->bytes;
    return work / (res->t.ms_med * 1e6); /* GFLOP/s or GB/s */
}

/* CPU time / Vulkan time of the same case (> 1: Vulkan is faster); NaN unless both ran. */
static double vulkan_speedup(const bench_row *row) {
    const bench_result *vk = &row->r[BENCH_VK], *cpu = &row->r[BENCH_CPU];
    if (!vk->ran || !cpu->ran || !(vk->t.ms_med > 0)) return NAN;
    return cpu->t.ms_med / vk->t.ms_med;
}

static void fmt_ms(double ms, char *out, size_t cap) {
    if (!isfinite(ms)) snprintf(out, cap, "-");
    else if (ms >= 100) snprintf(out, cap, "%.1f", ms);
    else if (ms >= 10) snprintf(out, cap, "%.2f", ms);
    else if (ms >= 1) snprintf(out, cap, "%.3f", ms);
    else snprintf(out, cap, "%.4f", ms);
}

/* How OpenMP's idle threads wait (vkattn sets passive when unset: tools/vkattn.c). */
static const char *omp_wait_policy(void) {
    const char *p = getenv("OMP_WAIT_POLICY");
    return p && *p ? p : "unset";
}

static const char *timer_text(const bench_dev *d, int dev) {
    if (dev == BENCH_CPU) return "host clock";
    return d->info.timestamps ? "device timestamps" : "host clock (the queue has no timestamps)";
}

#ifndef VKA_BUILD_TYPE
#define VKA_BUILD_TYPE "?"
#endif
#ifndef VKA_BUILD_FLAGS
#define VKA_BUILD_FLAGS "?"
#endif
#ifndef VKA_RELEASE_FLAGS
#define VKA_RELEASE_FLAGS "?"
#endif
const char bench_build_type[] = VKA_BUILD_TYPE, bench_build_flags[] = VKA_BUILD_FLAGS,
           bench_release_flags[] = VKA_RELEASE_FLAGS;

/* The next space-separated word of *s other than a debug-info flag (-g, -g3, -ggdb...: they do
 * not change the code); its length, 0 at the end. */
static size_t next_code_flag(const char **s) {
    for (;;) {
        while (**s == ' ') (*s)++;
        size_t n = strcspn(*s, " ");
        if (n == 0 || strncmp(*s, "-g", 2) != 0) return n;
        *s += n;
    }
}

bool bench_optimized_as_release(const char *flags, const char *release) {
    for (;;) {
        size_t a = next_code_flag(&flags), b = next_code_flag(&release);
        if (a != b || strncmp(flags, release, a) != 0) return false;
        if (a == 0) return true;
        flags += a;
        release += b;
    }
}

/* --- the table -------------------------------------------------------------------------------- */

#define ID_W 40
#define SHAPE_W 30
#define DEV_W 42 /* one backend's columns */

void bench_print_header(const bench *b, FILE *f) {
    const bench_plan *k = &b->kernel_plan, *m = &b->model_plan;
    fprintf(f, "vkattn bench %s: %s set%s\n", vka_version_string(), b->quick ? "quick" : "full",
            b->quick ? " (--full runs every case)" : "");
    fprintf(f, "build: %s, C flags %s (%s)\n", bench_build_type, bench_build_flags,
            bench_optimized_as_release(bench_build_flags, bench_release_flags)
                ? "Release's code generation, apart from debug info"
                : "NOT Release's code generation: it may be slower");
    fprintf(f, "each case: a check run against the CPU backend, %d warm-up and %d-%d timed runs "
            "(fewer after %.2g s); models: %d warm-up and %d-%d timed runs (fewer after %.2g s)\n",
            k->warmup - 1, k->min_runs, k->max_runs, k->budget_s, m->warmup - 1, m->min_runs,
            m->max_runs, m->budget_s);
    for (int dev = 0; dev < BENCH_NB; dev++) {
        const bench_dev *d = &b->dev[dev];
        if (!d->on) continue;
        if (dev == BENCH_VK) {
            char api[32], drv[48];
            cli_api_version(d->info.api_version, api, sizeof api);
            cli_driver_version(&d->info, drv, sizeof drv);
            fprintf(f, "%-7s %s: %s, %s (0x%04X), driver %s %s (%s), Vulkan %s, kernels %s\n",
                    bench_backend_names[dev], d->info.name, cli_device_type_name(d->info.type),
                    cli_vendor_name(d->info.vendor_id), d->info.vendor_id, d->info.driver_name,
                    d->info.driver_info, drv, api, cli_kernel_names[b->o->b.kernels]);
            if (d->vk_kernels) fprintf(f, "        kernels in use: %s\n", d->vk_kernels);
        } else {
            fprintf(f, "%-7s %s: %d thread(s), OMP_WAIT_POLICY=%s, kernels %s\n",
                    bench_backend_names[dev], d->info.name, d->threads, omp_wait_policy(),
                    d->cpu_kernels ? d->cpu_kernels : "?");
        }
        fprintf(f, "        timer: %s", timer_text(d, dev));
        if (dev == BENCH_VK && d->info.timestamps)
            fprintf(f, " x %g ns", (double)d->info.timestamp_period);
        fprintf(f, "; ceilings: %.4g GFLOP/s fp32 multiply-add as built, %.4g GB/s copy (%.0f MB",
                d->built_gflops, d->peak.gbps, d->peak.copy_mbytes);
        if (d->peak.llc_mbytes > 0) fprintf(f, " = %.1fx the %.0f MB last-level cache",
                                            d->peak.copy_mbytes / d->peak.llc_mbytes,
                                            d->peak.llc_mbytes);
        fprintf(f, ", best of %d passes, source %s)", d->peak.copy_passes,
                d->peak.copy_source_written ? "written first" : "NOT written");
        if (d->peak.hw_gflops > 0)
            fprintf(f, ";\n        processor peak %.4g GFLOP/s fp32 FMA (%s)%s",
                    d->peak.hw_gflops, d->peak.hw_isa,
                    d->peak.gflops > d->built_gflops ? ", the compute rows' ceiling" : "");
        fputc('\n', f);
    }
    fprintf(f, "\n%-*s %-*s", ID_W, "", SHAPE_W, "");
    for (int dev = 0; dev < BENCH_NB; dev++)
        if (b->dev[dev].on) fprintf(f, " | %-*s", DEV_W - 3, bench_backend_names[dev]);
    fprintf(f, "\n%-*s %-*s", ID_W, "case", SHAPE_W, "shape");
    for (int dev = 0; dev < BENCH_NB; dev++)
        if (b->dev[dev].on)
            fprintf(f, " | %9s %3s %12s %5s %-5s", "ms", "+-%", "rate", "%ceil", "check");
    if (b->dev[BENCH_VK].on && b->dev[BENCH_CPU].on) fprintf(f, " | %6s", "cpu/vk");
    fputc('\n', f);
}

static void print_result(const bench_row *row, const bench_result *res, FILE *f) {
    if (!res->ran) {
        fprintf(f, " | %-*s", DEV_W - 3, "skipped (below)");
        return;
    }
    char ms[32], rate[32], ceil[16];
    fmt_ms(res->t.ms_med, ms, sizeof ms);
    double r = bench_rate(row, res);
    snprintf(rate, sizeof rate, "%.3g %s", r, row->compute ? "GF/s" : "GB/s");
    /* "!": above even the re-measured ceiling (the footer explains) */
    double pct = res->ceiling > 0 ? 100.0 * r / res->ceiling : NAN;
    if (pct < 999.5 || !(pct == pct)) /* within the column's 5 characters */
        snprintf(ceil, sizeof ceil, "%.0f%%%s", pct, res->above_ceiling ? "!" : "");
    else snprintf(ceil, sizeof ceil, "big!");
    double spread = 100.0 * (res->t.ms_max - res->t.ms_min) / (2.0 * res->t.ms_med);
    char sp[8];
    if (spread < 999.5) snprintf(sp, sizeof sp, "%.0f", spread);
    else snprintf(sp, sizeof sp, "big");
    static const char *const check[] = {"-", "ok", "WRONG", "ref"};
    fprintf(f, " | %9s %3s %12s %5s %-5s", ms, sp, rate, ceil, check[res->check]);
}

/* Model rows: tokens/s, then the profiled share of each kernel kind, side by side. */
static void print_model_detail(const bench *b, const bench_row *row, FILE *f) {
    bool any = false;
    for (int dev = 0; dev < BENCH_NB; dev++) any |= b->dev[dev].on && row->r[dev].ran;
    if (!any) return;
    fprintf(f, "    tokens/s (host wall time per step):");
    for (int dev = 0; dev < BENCH_NB; dev++) {
        const bench_result *res = &row->r[dev];
        if (b->dev[dev].on && res->ran)
            fprintf(f, " %s %.0f (%.1f ms/step, model memory %.0f MiB)",
                    bench_backend_names[dev], (double)row->B * row->T / (res->t.host_med * 1e-3),
                    res->t.host_med, res->memory_mb);
    }
    fputc('\n', f);
    /* the kinds: the first backend's order (slowest first), then any the other adds */
    const char *kinds[2 * CLI_MAX_KINDS];
    int n = 0;
    for (int dev = 0; dev < BENCH_NB; dev++) {
        const bench_result *res = &row->r[dev];
        bool used[CLI_MAX_KINDS] = {false};
        for (int k = 0; k < res->n_prof; k++) {
            int best = -1;
            for (int j = 0; j < res->n_prof; j++)
                if (!used[j] && (best < 0 || res->prof[j].ms > res->prof[best].ms)) best = j;
            used[best] = true;
            bool seen = false;
            for (int j = 0; j < n && !seen; j++) seen = strcmp(kinds[j], res->prof[best].kind) == 0;
            if (!seen) kinds[n++] = res->prof[best].kind;
        }
    }
    if (n == 0) return;
    fprintf(f, "    per kernel kind, from a separate profiled run (");
    for (int dev = 0, first = 1; dev < BENCH_NB; dev++)
        if (row->r[dev].n_prof) {
            fprintf(f, "%s%s %.1f ms", first ? "" : ", ", bench_backend_names[dev],
                    row->r[dev].prof_ms);
            first = 0;
        }
    fprintf(f, "):\n");
    for (int i = 0; i < n; i++) {
        fprintf(f, "      %-14s", kinds[i]);
        for (int dev = 0; dev < BENCH_NB; dev++) {
            const bench_result *res = &row->r[dev];
            if (!res->n_prof) continue;
            double sum = 0, ms = NAN;
            for (int k = 0; k < res->n_prof; k++) {
                sum += res->prof[k].ms;
                if (strcmp(res->prof[k].kind, kinds[i]) == 0) ms = res->prof[k].ms;
            }
            if (isnan(ms)) fprintf(f, "  %6s %10s %5s", bench_backend_names[dev], "-", "");
            else fprintf(f, "  %6s %10.3f %4.1f%%", bench_backend_names[dev], ms, 100.0 * ms / sum);
        }
        fputc('\n', f);
    }
}

void bench_print_row(const bench *b, const bench_row *row, FILE *f) {
    fprintf(f, "%-*s %-*s", ID_W, row->id, SHAPE_W, row->shape);
    for (int dev = 0; dev < BENCH_NB; dev++)
        if (b->dev[dev].on) print_result(row, &row->r[dev], f);
    if (b->dev[BENCH_VK].on && b->dev[BENCH_CPU].on) {
        double s = vulkan_speedup(row);
        if (isfinite(s)) fprintf(f, " | %5.2fx", s);
        else fprintf(f, " | %6s", "-");
    }
    fputc('\n', f);
    for (int dev = 0; dev < BENCH_NB; dev++)
        if (b->dev[dev].on && row->r[dev].note[0])
            fprintf(f, "    %s %s\n", bench_backend_names[dev], row->r[dev].note);
    if (row->model) print_model_detail(b, row, f);
    fflush(f);
}

void bench_print_footer(const bench *b, FILE *f) {
    int skipped = 0, wrong = 0, above = 0;
    for (int i = 0; i < b->n_rows; i++)
        for (int dev = 0; dev < BENCH_NB; dev++) {
            skipped += b->dev[dev].on && !b->rows[i].r[dev].ran;
            wrong += b->rows[i].r[dev].check == BENCH_WRONG;
            above += b->rows[i].r[dev].above_ceiling;
        }
    fprintf(f, "\n%d case(s) in %.1f s; %d result(s) skipped, %d WRONG.\n", b->n_rows,
            cli_now() - b->t_start, skipped, wrong);
    fprintf(f, "ms: median device time per run; +-%%: half the min-max range, in %% of the median; "
            "rate: GFLOP/s (GF/s) of compute-bound cases, GB/s of memory-bound ones (docs/benchmarks.md "
            "gives each formula); %%ceil: rate / the measured ceiling (FMA GFLOP/s, "
            "or copy GB/s at the case's size); check: against the CPU backend; cpu/vk: CPU time / "
            "Vulkan time (above 1: Vulkan is faster).\n");
    for (int dev = 0; dev < BENCH_NB; dev++)
        if (b->remeasured[dev])
            fprintf(f, "note: a case beat a %s ceiling, which was then measured again: %.4g -> "
                    "%.4g GFLOP/s, %.4g -> %.4g GB/s; the rows before used the first numbers\n",
                    bench_backend_names[dev], b->first_peak[dev].gflops, b->dev[dev].peak.gflops,
                    b->first_peak[dev].gbps, b->dev[dev].peak.gbps);
    if (above)
        fprintf(f, "%d result(s) marked ! are above the measured ceiling: the run was disturbed "
                "(see +-%%), so their times are not to be trusted; rerun on a quiet machine.\n",
                above);
}

/* --- JSON ------------------------------------------------------------------------------------- */

static void json_backend(const bench *b, int dev, FILE *f) {
    const bench_dev *d = &b->dev[dev];
    char api[32], drv[48];
    cli_api_version(d->info.api_version, api, sizeof api);
    cli_driver_version(&d->info, drv, sizeof drv);
    fprintf(f, "{\"backend\":\"%s\"", bench_backend_names[dev]);
    cli_json_str(f, "build_type", bench_build_type);
    cli_json_str(f, "build_flags", bench_build_flags);
    cli_json_str(f, "release_flags", bench_release_flags);
    fprintf(f, ",\"optimized_as_release\":%s",
            bench_optimized_as_release(bench_build_flags, bench_release_flags) ? "true" : "false");
    cli_json_str(f, "device", d->info.name);
    cli_json_str(f, "device_type", cli_device_type_name(d->info.type));
    if (dev == BENCH_VK) {
        cli_json_num(f, "vendor_id", d->info.vendor_id);
        cli_json_str(f, "vendor", cli_vendor_name(d->info.vendor_id));
        cli_json_num(f, "device_id", d->info.device_id);
        cli_json_str(f, "driver_name", d->info.driver_name);
        cli_json_str(f, "driver_info", d->info.driver_info);
        cli_json_str(f, "driver_version", drv);
        cli_json_num(f, "driver_version_raw", d->info.driver_version);
        cli_json_str(f, "api_version", api);
        cli_json_num(f, "timestamp_period_ns", d->info.timestamps ? d->info.timestamp_period : NAN);
        /* --kernels: auto, gpu, cpu */
        cli_json_str(f, "kernels", cli_kernel_names[b->o->b.kernels]);
    } else {
        cli_json_num(f, "threads", d->threads);
        if (d->cpu_kernels) cli_json_str(f, "cpu_kernels", d->cpu_kernels);
        if (d->vk_kernels) cli_json_str(f, "vulkan_kernels", d->vk_kernels);
        cli_json_str(f, "omp_wait_policy", omp_wait_policy());
    }
    cli_json_str(f, "timer", dev == BENCH_VK && d->info.timestamps ? "timestamps" : "host");
    fprintf(f, ",\"ceilings\":{\"fma_gflops\":");
    cli_json_number(f, d->peak.gflops);
    cli_json_num(f, "built_fma_gflops", d->built_gflops);
    cli_json_num(f, "hw_fma_gflops", d->peak.hw_gflops > 0 ? d->peak.hw_gflops : NAN);
    if (d->peak.hw_isa) cli_json_str(f, "hw_isa", d->peak.hw_isa);
    cli_json_num(f, "copy_gbps", d->peak.gbps);
    cli_json_num(f, "fma_gflop", d->peak.fma_gflop);
    cli_json_num(f, "copy_mbytes", d->peak.copy_mbytes);
    /* how the copy ceiling was measured (issue 22): buffer size against the cache, passes, and
     * whether the source had been written (an unwritten one reads the zero page) */
    cli_json_num(f, "copy_passes", d->peak.copy_passes);
    fprintf(f, ",\"copy_source_written\":%s", d->peak.copy_source_written ? "true" : "false");
    cli_json_num(f, "llc_mbytes", d->peak.llc_mbytes > 0 ? d->peak.llc_mbytes : NAN);
    fprintf(f, ",\"remeasured\":%s,\"copy_by_size\":[", b->remeasured[dev] ? "true" : "false");
    for (int i = 0, first = 1; i < d->n_copies; i++) {
        if (!d->copy_n[i]) continue;
        fprintf(f, "%s{\"bytes\":", first ? "" : ",");
        cli_json_number(f, 8.0 * (double)d->copy_n[i]);
        cli_json_num(f, "gbps", d->copy_gbps[i]);
        fputc('}', f);
        first = 0;
    }
    fprintf(f, "]}}");
}

static void json_result(const bench_row *row, const bench_result *res, FILE *f) {
    fprintf(f, "{\"status\":\"%s\"", res->ran ? "ok" : "skipped");
    if (!res->ran) {
        cli_json_str(f, "reason", res->note);
        fputc('}', f);
        return;
    }
    const bench_stats *t = &res->t;
    fprintf(f, ",\"runs\":%d", t->runs);
    cli_json_num(f, "ms_median", t->ms_med);
    cli_json_num(f, "ms_min", t->ms_min);
    cli_json_num(f, "ms_max", t->ms_max);
    cli_json_num(f, "host_ms_median", t->host_med);
    if (row->flop > 0) cli_json_num(f, "gflops", row->flop / (t->ms_med * 1e6));
    if (row->bytes > 0) cli_json_num(f, "gbps", row->bytes / (t->ms_med * 1e6));
    double rate = bench_rate(row, res);
    cli_json_num(f, "throughput", rate);
    cli_json_str(f, "throughput_unit", row->compute ? "GFLOP/s" : "GB/s");
    cli_json_num(f, "ceiling", res->ceiling);
    cli_json_num(f, "percent_of_ceiling", res->ceiling > 0 ? 100.0 * rate / res->ceiling : NAN);
    fprintf(f, ",\"above_ceiling\":%s", res->above_ceiling ? "true" : "false");
    if (row->compute && res->hw_peak > 0)
        cli_json_num(f, "percent_of_hw_peak", 100.0 * rate / res->hw_peak);
    cli_json_str(f, "check", bench_check_names[res->check]);
    if (res->check == BENCH_OK || res->check == BENCH_WRONG) {
        cli_json_num(f, "max_diff", res->diff);
        cli_json_num(f, "tolerance", res->tol);
    }
    if (row->model) {
        cli_json_num(f, "tokens_per_s", (double)row->B * row->T / (t->host_med * 1e-3));
        cli_json_num(f, "loss", res->loss);
        cli_json_num(f, "memory_mb", res->memory_mb);
        if (!isnan(res->grad_norm)) cli_json_num(f, "grad_norm", res->grad_norm);
        fprintf(f, ",\"profile\":{\"ms\":");
        cli_json_number(f, res->prof_ms);
        cli_json_key(f, "kinds");
        cli_profile_json(f, res->prof, res->n_prof);
        fputc('}', f);
    }
    fputc('}', f);
}

static void json_case(const bench *b, const bench_row *row, FILE *f) {
    fprintf(f, "{\"id\":");
    cli_json_string(f, row->id);
    cli_json_str(f, "kind", row->kind);
    cli_json_str(f, "name", row->name);
    cli_json_str(f, "pass", row->pass);
    cli_json_str(f, "shape", row->shape);
    cli_json_str(f, "bound", row->compute ? "compute" : "memory");
    cli_json_num(f, "flop", row->flop > 0 ? row->flop : NAN); /* null: not counted */
    cli_json_num(f, "bytes", row->bytes > 0 ? row->bytes : NAN);
    if (row->model) {
        const bench_model *m = row->model;
        fprintf(f, ",\"model\":{\"name\":");
        cli_json_string(f, m->name);
        fprintf(f, ",\"L\":%d,\"NH\":%d,\"C\":%d,\"V\":%d,\"Vp\":%d,\"max_T\":%d,\"params\":%zu}",
                m->L, m->NH, m->C, m->V, bench_padded_vocab(m), row->max_T ? row->max_T : row->T, row->params);
        fprintf(f, ",\"B\":%d,\"T\":%d,\"tokens\":%d", row->B, row->T, row->B * row->T);
    }
    fprintf(f, ",\"results\":{");
    for (int dev = 0, first = 1; dev < BENCH_NB; dev++) {
        if (!b->dev[dev].on) continue;
        fprintf(f, "%s\"%s\":", first ? "" : ",", bench_backend_names[dev]);
        json_result(row, &row->r[dev], f);
        first = 0;
    }
    fputc('}', f);
    if (b->dev[BENCH_VK].on && b->dev[BENCH_CPU].on)
        cli_json_num(f, "vulkan_speedup", vulkan_speedup(row));
    fputc('}', f);
}

void bench_write_json(const bench *b, FILE *f) {
    fprintf(f, "{\"schema\":\"%s\",\"vkattn_version\":\"%s\",\"mode\":\"%s\",\"seed\":%llu",
            BENCH_SCHEMA, vka_version_string(), b->quick ? "quick" : "full",
            (unsigned long long)b->o->seed);
    cli_json_key(f, "filter");
    if (b->o->filter) cli_json_string(f, b->o->filter);
    else fputs("null", f);
    const bench_plan *plans[2] = {&b->kernel_plan, &b->model_plan};
    const char *names[2] = {"kernels", "models"};
    fprintf(f, ",\"plan\":{");
    for (int i = 0; i < 2; i++) {
        fprintf(f, "%s\"%s\":{\"warmup\":%d,\"min_runs\":%d,\"max_runs\":%d", i ? "," : "",
                names[i], plans[i]->warmup, plans[i]->min_runs, plans[i]->max_runs);
        cli_json_num(f, "budget_s", plans[i]->budget_s);
        fputc('}', f);
    }
    fprintf(f, "},\"backends\":[");
    for (int dev = 0, first = 1; dev < BENCH_NB; dev++) {
        if (!b->dev[dev].on) continue;
        if (!first) fputc(',', f);
        json_backend(b, dev, f);
        first = 0;
    }
    fprintf(f, "],\"cases\":[\n");
    for (int i = 0; i < b->n_rows; i++) {
        json_case(b, &b->rows[i], f);
        fputs(i + 1 < b->n_rows ? ",\n" : "\n", f);
    }
    fputc(']', f);
    cli_json_num(f, "seconds", cli_now() - b->t_start);
    fprintf(f, "}\n");
}
