/* vkattn bench: timing, statistics and the comparison with the reference (see bench.h). */
#include "bench.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

const char *const bench_check_names[] = {"unchecked", "ok", "WRONG", "reference"};

static int cmp_double(const void *pa, const void *pb) {
    double a = *(const double *)pa, b = *(const double *)pb;
    return (a > b) - (a < b);
}

double bench_median(double *x, int n) {
    if (n <= 0) return NAN;
    qsort(x, (size_t)n, sizeof *x, cmp_double);
    return n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
}

#define MAX_RUNS 1000

vka_result bench_measure(const bench_plan *plan, bench_run_fn run, void *user, bench_stats *out) {
    *out = (bench_stats){0};
    double dev[MAX_RUNS], host[MAX_RUNS], ms;
    vka_result r = VKA_SUCCESS;
    for (int i = 1; i < plan->warmup && r == VKA_SUCCESS; i++) r = run(user, &ms);
    int max_runs = plan->max_runs < MAX_RUNS ? plan->max_runs : MAX_RUNS;
    double spent = 0.0;
    int n = 0;
    while (r == VKA_SUCCESS && n < max_runs && (n < plan->min_runs || spent < plan->budget_s)) {
        double t0 = cli_now();
        r = run(user, &dev[n]);
        host[n] = (cli_now() - t0) * 1e3;
        spent += host[n] * 1e-3;
        if (r == VKA_SUCCESS) n++;
    }
    if (r != VKA_SUCCESS) return r;
    out->runs = n;
    out->host_med = bench_median(host, n);
    out->ms_med = bench_median(dev, n); /* sorted: */
    out->ms_min = n ? dev[0] : NAN;
    out->ms_max = n ? dev[n - 1] : NAN;
    return VKA_SUCCESS;
}

vka_result bench_run_graph(void *graph, double *ms) {
    vka_result r = vka_graph_run(graph);
    return r == VKA_SUCCESS ? vka_graph_times(graph, ms, NULL, 0, NULL) : r;
}

bool bench_compare(const float *got, const float *want, size_t n, double tol, double *max_diff,
                   double *abs_tol) {
    double max_ref = 0.0, diff = 0.0;
    bool nan = false;
    for (size_t i = 0; i < n; i++) max_ref = fmax(max_ref, fabs(want[i]));
    for (size_t i = 0; i < n; i++) {
        if (isnan(got[i]) || isnan(want[i])) nan = true;
        else diff = fmax(diff, fabs((double)got[i] - (double)want[i]));
    }
    *abs_tol = tol * fmax(1.0, max_ref);
    *max_diff = nan ? INFINITY : diff;
    return !nan && diff <= *abs_tol;
}

/* --- the bandwidth ceiling at a working-set size ------------------------------------------- */

/* GB/s of a device copy of n elements (n*4 bytes read, n*4 written): the best of the runs. */
static vka_result copy_gbps(bench *b, vka_context *ctx, size_t n, double *gbps) {
    vka_tensor *src = NULL, *dst = NULL;
    vka_graph *g = NULL;
    vka_result r = vka_tensor_create(ctx, n, &src);
    if (r == VKA_SUCCESS) r = vka_tensor_create(ctx, n, &dst);
    /* written first: an unwritten source may read the zero page (twice memory's speed) */
    if (r == VKA_SUCCESS) r = vka_graph_begin(ctx);
    if (r == VKA_SUCCESS) {
        vka_result rec = vka_fill(ctx, src, 1.5f);
        if (rec == VKA_SUCCESS) rec = vka_fill(ctx, dst, -1.5f);
        r = vka_graph_end(ctx, &g);
        if (r == VKA_SUCCESS) r = rec;
    }
    if (r == VKA_SUCCESS) r = vka_graph_run(g);
    vka_graph_destroy(g);
    g = NULL;
    if (r == VKA_SUCCESS) r = vka_graph_begin(ctx);
    if (r == VKA_SUCCESS) {
        vka_result rec = vka_copy(ctx, dst, src, n);
        r = vka_graph_end(ctx, &g);
        if (r == VKA_SUCCESS) r = rec;
    }
    double ms = 0.0;
    if (r == VKA_SUCCESS) r = bench_run_graph(g, &ms);
    bench_stats st;
    bench_plan plan = b->kernel_plan;
    plan.warmup = 2;
    if (r == VKA_SUCCESS) r = bench_measure(&plan, bench_run_graph, g, &st);
    if (r == VKA_SUCCESS) *gbps = st.ms_min > 0 ? 8.0 * (double)n / (st.ms_min * 1e6) : 0.0;
    vka_graph_destroy(g);
    vka_tensor_destroy(src);
    vka_tensor_destroy(dst);
    return r;
}

size_t bench_copy_elems(const bench_dev *d, double bytes) {
    size_t n = (size_t)(bytes / 8.0);
    size_t max_n = (size_t)(d->info.max_storage_buffer_range / 4);
    if (n < 1) n = 1;
    if (max_n && n > max_n) n = max_n;
    return n;
}

vka_result bench_bandwidth_ceiling(bench *b, int dev, double bytes, double *gbps) {
    bench_dev *d = &b->dev[dev];
    *gbps = d->peak.gbps;
    size_t n = bench_copy_elems(d, bytes);
    for (int i = 0; i < d->n_copies; i++)
        if (d->copy_n[i] == n) {
            if (d->copy_gbps[i] > *gbps) *gbps = d->copy_gbps[i];
            return VKA_SUCCESS;
        }
    double g = 0.0;
    vka_result r = copy_gbps(b, d->ctx, n, &g);
    if (bench_is_capacity(r)) return VKA_SUCCESS; /* the peak's number stands */
    if (r != VKA_SUCCESS) return r;
    if (d->n_copies < BENCH_MAX_COPIES) {
        d->copy_n[d->n_copies] = n;
        d->copy_gbps[d->n_copies++] = g;
    }
    if (g > *gbps) *gbps = g;
    return VKA_SUCCESS;
}
