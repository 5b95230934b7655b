/* Helpers for the op tests (tests/test_<op>.c), on top of test_util.h; public API only.
 *
 * Pattern of an op test file: each case is a function of a vka_context * that runs the op on
 * that context and checks it -- against a plain double-precision loop written in the test (the
 * independent reference), and, through tu_vs_cpu(), against the CPU backend run on the same
 * data (bit-identical when ctx is itself a CPU context; within a tolerance on a GPU). Known
 * values from the literature are checked on ctx directly. A cmocka test then runs the cases on
 * tu_cpu(); a GPU test runs the same cases on tu_gpu(). */
#ifndef VKA_OP_UTIL_H
#define VKA_OP_UTIL_H

#include "test_util.h"

#define TU_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* A CPU-backend context running its kernels on `threads` OpenMP threads. */
static inline vka_context *tu_cpu_threads(int threads) {
    vka_context_desc d = {.backend = VKA_BACKEND_CPU, .cpu_threads = threads, .log = tu_log};
    vka_context *ctx = NULL;
    if (vka_context_create(&d, &ctx) != VKA_SUCCESS)
        fail_msg("CPU context: %s", vka_last_error(ctx));
    return ctx;
}

/* A CPU-backend context with the given kernels (vka_context_desc.cpu_kernels) on `threads`
 * OpenMP threads. */
static inline vka_context *tu_cpu_kernels(vka_cpu_kernels kernels, int threads) {
    vka_context_desc d = {.backend = VKA_BACKEND_CPU, .cpu_kernels = kernels,
                          .cpu_threads = threads, .log = tu_log};
    vka_context *ctx = NULL;
    if (vka_context_create(&d, &ctx) != VKA_SUCCESS)
        fail_msg("CPU context: %s", vka_last_error(ctx));
    return ctx;
}

static inline bool tu_is_cpu(vka_context *ctx) {
    return vka_context_backend(ctx) == VKA_BACKEND_CPU;
}

/* A tensor holding n deterministic uniform values in [-scale, scale); *host (if not NULL)
 * receives a malloc'd copy of them. */
static inline vka_tensor *tu_tensor_random(vka_context *ctx, size_t n, uint64_t seed, float scale,
                                           float **host) {
    float *x = malloc(n * sizeof *x);
    tu_random(x, n, seed, scale);
    vka_tensor *t = tu_tensor(ctx, n, x);
    if (host) *host = x;
    else free(x);
    return t;
}

/* A malloc'd double copy of x (n). */
static inline double *tu_to_double(const float *x, size_t n) {
    double *d = calloc(n ? n : 1, sizeof *d);
    for (size_t i = 0; i < n; i++) d[i] = x[i];
    return d;
}

/* Compare ctx's result with the CPU backend's on the same inputs: bit-identical when ctx is a
 * CPU context (the reference is deterministic), else within atol + rtol * |cpu|. */
static inline void tu_vs_cpu(vka_context *ctx, const char *what, const float *got,
                             const float *cpu, size_t n, double atol, double rtol) {
    if (tu_is_cpu(ctx)) {
        for (size_t i = 0; i < n; i++)
            if (memcmp(&got[i], &cpu[i], sizeof(float)) != 0) {
                print_message("%s: CPU contexts differ at %zu: %.9g vs %.9g\n", what, i, got[i],
                              cpu[i]);
                fail_msg("%s: the CPU backend is not deterministic", what);
            }
        return;
    }
    tu_assert_close(what, got, cpu, n, atol, rtol);
}

/* Compare float results with a double reference: each |got - want| <= atol + rtol * |want|,
 * no NaN. Prints the worst element on failure. Returns the max abs difference. */
static inline double tu_assert_close_d(const char *what, const float *got, const double *want,
                                       size_t n, double atol, double rtol) {
    double max_abs = 0.0;
    size_t worst = 0, bad = 0, first_bad = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - want[i]);
        if (isnan(got[i]) != isnan(want[i])) d = INFINITY;
        if (d > max_abs) {
            max_abs = d;
            worst = i;
        }
        if (!(d <= atol + rtol * fabs(want[i]))) {
            if (!bad) first_bad = i;
            bad++;
        }
    }
    if (bad) {
        print_message("%s: %zu of %zu elements differ; max |diff| %.3g at %zu (got %.9g want "
                      "%.9g); first bad at %zu (got %.9g want %.9g)\n",
                      what, bad, n, max_abs, worst, got[worst], want[worst], first_bad,
                      got[first_bad], want[first_bad]);
        fail_msg("%s: mismatch with the double reference", what);
    }
    return max_abs;
}

/* Every element finite. */
static inline void tu_assert_finite(const char *what, const float *x, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i])) fail_msg("%s: element %zu is %g", what, i, x[i]);
}

/* A forward function in double: y (n_out) = f(x (n_in)); user carries the shapes. */
typedef void (*tu_fwd_fn)(void *user, const double *x, double *y);

/* Central finite differences of L(x) = sum_i w[i] * f(x)[i]: grad[k] = dL/dx[k] (n_in). The
 * forward is the test's double loop, so h = 1e-5 gives ~1e-9 accuracy for smooth f. */
static inline void tu_fd_grad(tu_fwd_fn f, void *user, const float *x, size_t n_in,
                              const float *w, size_t n_out, double *grad) {
    const double h = 1e-5;
    double *xd = malloc(n_in * sizeof *xd), *y = malloc(n_out * sizeof *y);
    for (size_t k = 0; k < n_in; k++) xd[k] = x[k];
    for (size_t k = 0; k < n_in; k++) {
        double l[2];
        for (int s = 0; s < 2; s++) {
            xd[k] = (double)x[k] + (s ? -h : h);
            f(user, xd, y);
            l[s] = 0.0;
            for (size_t i = 0; i < n_out; i++) l[s] += (double)w[i] * y[i];
        }
        xd[k] = x[k];
        grad[k] = (l[0] - l[1]) / (2 * h);
    }
    free(xd);
    free(y);
}

/* got - before: what an accumulating op added to its gradient output. */
static inline float *tu_added(const float *got, const float *before, size_t n) {
    float *d = malloc((n ? n : 1) * sizeof *d);
    for (size_t i = 0; i < n; i++) d[i] = got[i] - before[i];
    return d;
}

/* A tensor of n elements of dtype (vka_tensor_create_desc) holding data (4-byte floats, or the
 * raw 16-bit words of a bf16 / fp16 one), zero-filled if data is NULL. */
static inline vka_tensor *tu_tensor_typed(vka_context *ctx, vka_dtype dtype, size_t n,
                                          const void *data) {
    vka_tensor_desc desc = {.n = n, .dtype = dtype};
    vka_tensor *t = NULL;
    if (vka_tensor_create_desc(ctx, &desc, &t) != VKA_SUCCESS)
        fail_msg("%s tensor of %zu: %s", vka_dtype_string(dtype), n, vka_last_error(ctx));
    if (data && vka_tensor_write(t, 0, data, n) != VKA_SUCCESS)
        fail_msg("tensor write: %s", vka_last_error(ctx));
    return t;
}

/* n values of x rounded to dtype (bf16 or fp16) and widened back, both by vka_convert: what a
 * 16-bit tensor of them holds, malloc'd; *words (malloc'd) gets the 16-bit words. */
static inline float *tu_rounded16(const float *x, size_t n, vka_dtype dtype, uint16_t **words) {
    uint16_t *w = malloc((n ? n : 1) * sizeof *w);
    float *r = malloc((n ? n : 1) * sizeof *r);
    if (vka_convert(dtype, w, VKA_F32, x, n) != VKA_SUCCESS ||
        vka_convert(VKA_F32, r, dtype, w, n) != VKA_SUCCESS)
        fail_msg("vka_convert to and from %s failed", vka_dtype_string(dtype));
    *words = w;
    return r;
}

/* Run cases on a Vulkan context with the given kernel variants; TU_VULKAN_TESTS(name, cases)
 * defines the cmocka tests name_gpu_kernels and name_cpu_kernels doing so with each. */
static inline void tu_on_vulkan(vka_kernels kernels, void (*cases)(vka_context *ctx)) {
    vka_context *ctx = tu_gpu_kernels(kernels);
    cases(ctx);
    tu_done(ctx);
}
#define TU_VULKAN_TESTS(name, cases)                                                           \
    static void name##_gpu_kernels(void **state) {                                             \
        (void)state;                                                                           \
        tu_on_vulkan(VKA_KERNELS_GPU, cases);                                                  \
    }                                                                                          \
    static void name##_cpu_kernels(void **state) {                                             \
        (void)state;                                                                           \
        tu_on_vulkan(VKA_KERNELS_CPU, cases);                                                  \
    }
#define TU_VULKAN_TEST_ENTRIES(name) cmocka_unit_test(name##_gpu_kernels), cmocka_unit_test(name##_cpu_kernels)

#ifdef TU_HAVE_PACKED16
/* tu_on_vulkan() on the packed 16-bit path (tu_gpu_packed16). TU_VULKAN_TESTS16(name, cases)
 * defines TU_VULKAN_TESTS' two tests (on the device's 16-bit path: 16-bit storage where it has
 * it) and name_packed_gpu_kernels, name_packed_cpu_kernels on the packed path, so that a
 * 16-bit op test runs both paths of the kernels that have both (vka_16bit_path). */
static inline void tu_on_vulkan_packed16(vka_kernels kernels, void (*cases)(vka_context *ctx)) {
    vka_context *ctx = tu_gpu_packed16(kernels, 0);
    cases(ctx);
    tu_done(ctx);
}
#define TU_VULKAN_TESTS16(name, cases)                                                         \
    TU_VULKAN_TESTS(name, cases)                                                               \
    static void name##_packed_gpu_kernels(void **state) {                                      \
        (void)state;                                                                           \
        tu_on_vulkan_packed16(VKA_KERNELS_GPU, cases);                                         \
    }                                                                                          \
    static void name##_packed_cpu_kernels(void **state) {                                      \
        (void)state;                                                                           \
        tu_on_vulkan_packed16(VKA_KERNELS_CPU, cases);                                         \
    }
#define TU_VULKAN_TEST_ENTRIES16(name)                                                         \
    TU_VULKAN_TEST_ENTRIES(name), cmocka_unit_test(name##_packed_gpu_kernels),                \
        cmocka_unit_test(name##_packed_cpu_kernels)
#endif

/* End the graph expecting failure r with a message containing text. */
static inline void tu_end_expect(vka_context *ctx, vka_result r, const char *text) {
    vka_graph *g = NULL;
    vka_result got = vka_graph_end(ctx, &g);
    vka_graph_destroy(g);
    if (got != r)
        fail_msg("graph_end gave %s, expected %s (%s)", vka_result_string(got),
                 vka_result_string(r), vka_last_error(ctx));
    if (text && !strstr(vka_last_error(ctx), text))
        fail_msg("message \"%s\" lacks \"%s\"", vka_last_error(ctx), text);
}

#endif
