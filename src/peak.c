/* vka_measure_peak: the device's arithmetic and memory ceilings, measured with the same graph
 * and timer machinery as every kernel (so kernel numbers can be shown as a share of them). */
#include "backend.h"
#include "cpu/cpu_ops.h"
#include "vk/vk_internal.h"

#include <math.h>
#ifdef VKA_HAVE_OPENMP
#include <omp.h>
#endif

#define FMA_ITERS 256      /* steps per chain (llvmpipe stops loops after 65,535 iterations) */
#define FMA_FLOPS_PER_STEP 64.0
#define MAX_FMA_N ((size_t)1 << 24)
/* The copy ceiling is what memory can do: each buffer at least 256 MB and 4x the host's
 * last-level cache (issue 22: a smaller or never-written source is served from cache or the
 * kernel's shared zero page, and read twice the machine's bandwidth). */
#define MIN_COPY_BYTES ((uint64_t)256 << 20)
#define COPY_LLC_FACTOR 4
#define COPY_PATTERN 1.5f /* written into the source (and destination) before any timing */

/* Run a one-op graph `repeats` times; *best_ms = the fastest run. */
typedef void (*record_fn)(vkb_backend *be, const vkb_tensor *t, size_t n);

static vka_result time_graph(vkb_backend *be, record_fn record, const vkb_tensor *t, size_t n,
                             int repeats, double *best_ms) {
    vkb_graph *g = NULL;
    vka_result r = VKA_SUCCESS;
    if (be->rt->graph_begin(be, &g)) {
        record(be, t, n);
        r = be->rt->graph_end(be, g);
    }
    *best_ms = 0.0;
    for (int i = 0; i < repeats && r == VKA_SUCCESS; i++) {
        double ms = 0.0;
        r = be->rt->graph_run(be, g);
        if (r == VKA_SUCCESS) r = be->rt->graph_times(be, g, &ms, NULL, 0, NULL);
        if (r == VKA_SUCCESS && (i == 0 || ms < *best_ms)) *best_ms = ms;
    }
    be->rt->graph_destroy(be, g);
    return r;
}

static void record_fma(vkb_backend *be, const vkb_tensor *t, size_t n) {
    be->ops->peak_fma(be, t[0], n, FMA_ITERS);
}

static void record_copy(vkb_backend *be, const vkb_tensor *t, size_t n) {
    be->ops->copy(be, vkb_slice(t[1], 0, n), vkb_slice(t[0], 0, n));
}

/* Grow n (x4 from n0 up to max_n) until one run takes min_ms, then time `repeats` runs. */
static vka_result measure(vkb_backend *be, record_fn record, const vkb_tensor *t, size_t n0,
                          size_t max_n, double min_ms, int repeats, size_t *n_out,
                          double *best_ms) {
    size_t n = VKA_MIN(n0, max_n);
    double ms = 0.0;
    vka_result r;
    for (;;) {
        r = time_graph(be, record, t, n, 2, &ms); /* the first run also warms up */
        if (r != VKA_SUCCESS || ms >= min_ms || n >= max_n) break;
        n = VKA_MIN(n * 4, max_n);
    }
    if (r == VKA_SUCCESS) r = time_graph(be, record, t, n, repeats, &ms);
    *n_out = n;
    *best_ms = ms;
    return r;
}

/* Write COPY_PATTERN into both copy buffers and read the source's ends back: true when the
 * source holds what was written (its pages are real memory, not the zero page). */
static vka_result write_copy_buffers(vkb_backend *be, const vkb_tensor *t, size_t n,
                                     bool *written) {
    vkb_graph *g = NULL;
    vka_result r = VKA_SUCCESS;
    *written = false;
    if (be->rt->graph_begin(be, &g)) {
        be->ops->fill(be, vkb_slice(t[0], 0, n), COPY_PATTERN);
        be->ops->fill(be, vkb_slice(t[1], 0, n), -COPY_PATTERN);
        r = be->rt->graph_end(be, g);
    }
    if (r == VKA_SUCCESS) r = be->rt->graph_run(be, g);
    be->rt->graph_destroy(be, g);
    float ends[2] = {0.0f, 0.0f};
    if (r == VKA_SUCCESS) r = be->rt->read(be, t[0], 0, &ends[0], 1);
    if (r == VKA_SUCCESS) r = be->rt->read(be, t[0], n - 1, &ends[1], 1);
    *written = r == VKA_SUCCESS && ends[0] == COPY_PATTERN && ends[1] == COPY_PATTERN;
    return r;
}

/* The processor's FMA peak on nt threads (vkc_peak_fma_hw), grown until a run takes min_ms;
 * best of `repeats`. */
static void measure_hw(vka_peak *out, int nt, double min_ms, int repeats) {
    vkc_isa isa = vkc_cpu_isa();
    float sums[256];
    if (nt > 256) nt = 256;
    if (vkc_peak_fma_hw(sums, isa, 1, nt) == 0.0) return;
    uint64_t iters = 1 << 16;
    double best = 0.0;
    for (int i = 0; i < repeats + 1 && iters < ((uint64_t)1 << 40);) {
        double t0 = vka_now_ms();
        double flop = vkc_peak_fma_hw(sums, isa, iters, nt);
        double ms = vka_now_ms() - t0;
        if (ms < min_ms) { /* too short to time: longer, and start the count again */
            iters *= 4;
            continue;
        }
        if (i > 0 && flop / (ms * 1e6) > best) best = flop / (ms * 1e6); /* run 0 warms up */
        i++;
    }
    out->hw_gflops = best;
    out->hw_isa = vkc_isa_name(isa);
}

vka_result vka_measure_peak(vka_context *ctx, double min_ms, int repeats, vka_peak *out) {
    vka_result r = vka_context_usable(ctx, "vka_measure_peak");
    if (r != VKA_SUCCESS) return r;
    if (!out)
        return vka_set_error(ctx, VKA_ERROR_INVALID_ARGUMENT, "vka_measure_peak: out is NULL");
    if (!(min_ms >= 0) || !isfinite(min_ms))
        return vka_set_error(ctx, VKA_ERROR_INVALID_ARGUMENT,
                             "vka_measure_peak: min_ms = %g must be finite and >= 0", min_ms);
    if (repeats < 0)
        return vka_set_error(ctx, VKA_ERROR_INVALID_ARGUMENT,
                             "vka_measure_peak: repeats = %d is negative", repeats);
    vkb_backend *be = ctx->be;
    if (min_ms == 0) min_ms = 20.0;
    if (repeats == 0) repeats = 5;
    *out = (vka_peak){.device_timer = ctx->vk && ctx->vk->timestamps};

    size_t max_elems = (size_t)(be->limits.max_tensor_bytes / 4);
    size_t fma_n = VKA_MIN(MAX_FMA_N, max_elems);
    out->llc_mbytes = (double)vkb_host_llc_bytes() * 1e-6;
    uint64_t copy_bytes = VKA_MAX(MIN_COPY_BYTES, COPY_LLC_FACTOR * vkb_host_llc_bytes());
    size_t copy_n = VKA_MIN((size_t)(copy_bytes / 4), max_elems);
    if (be->limits.memory_bytes) copy_n = VKA_MIN(copy_n, (size_t)(be->limits.memory_bytes / 16));
    size_t sizes[3] = {fma_n, copy_n, copy_n};
    const char *names[3] = {"peak out", "peak copy source", "peak copy destination"};
    vkb_tensor t[3];
    vkb_arena *arena = NULL;
    r = vkb_arena_create(be, "peak", VKB_ARENA_DEVICE, sizes, names, 3, t, &arena);
    if (r != VKA_SUCCESS) return r;

    size_t n = 0;
    double ms = 0.0;
    r = measure(be, record_fma, t, 1024, fma_n, min_ms, repeats, &n, &ms);
    if (r == VKA_SUCCESS && ms > 0) {
        out->fma_gflop = (double)n * FMA_ITERS * FMA_FLOPS_PER_STEP * 1e-9;
        out->gflops = out->fma_gflop / (ms * 1e-3);
    }
    /* at its full size at once: smaller sizes would time the caches */
    if (r == VKA_SUCCESS) r = write_copy_buffers(be, t + 1, copy_n, &out->copy_source_written);
    if (r == VKA_SUCCESS) r = measure(be, record_copy, t + 1, copy_n, copy_n, min_ms, repeats,
                                      &n, &ms);
    if (r == VKA_SUCCESS && ms > 0) {
        out->copy_passes = repeats;
        out->copy_mbytes = (double)n * 4 * 1e-6;
        out->gbps = 2.0 * out->copy_mbytes * 1e-3 / (ms * 1e-3);
    }
    be->rt->arena_destroy(be, arena);
    bool on_cpu = !ctx->vk || ctx->vk->props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU;
    if (r == VKA_SUCCESS && on_cpu) {
        int nt = vka_context_cpu_threads(ctx);
#ifdef VKA_HAVE_OPENMP
        if (nt == 0) nt = omp_get_num_procs(); /* lavapipe: a thread per CPU */
#endif
        measure_hw(out, nt > 0 ? nt : 1, min_ms, repeats);
    }
    return r;
}
