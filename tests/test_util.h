/* Helpers shared by the tests (header-only; public API only). */
#ifndef VKA_TEST_UTIL_H
#define VKA_TEST_UTIL_H

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "vkattn.h"

/* A float's bits, and the float of given bits. */
static inline uint32_t tu_f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}
static inline float tu_bits_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline void tu_log(void *user, vka_log_level level, const char *msg) {
    (void)user;
    if (level <= VKA_LOG_WARN) fprintf(stderr, "vkattn: %s\n", msg);
}

/* A CPU-backend context (never fails). */
static inline vka_context *tu_cpu(void) {
    vka_context_desc d = {.backend = VKA_BACKEND_CPU, .log = tu_log};
    vka_context *ctx = NULL;
    vka_result r = vka_context_create(&d, &ctx);
    if (r != VKA_SUCCESS) fail_msg("CPU context: %s", vka_last_error(ctx));
    return ctx;
}

/* A Vulkan context with the validation layer on and the given kernel variants (VKA_KERNELS_GPU
 * and VKA_KERNELS_CPU both run on any device, so both are tested on lavapipe), or NULL after
 * skip() when there is no Vulkan device -- unless VKATTN_REQUIRE_GPU=1, when that fails the
 * test. */
static inline vka_context *tu_gpu_limited(vka_kernels kernels, uint64_t max_binding_bytes);
static inline vka_context *tu_gpu_kernels(vka_kernels kernels) {
    return tu_gpu_limited(kernels, 0);
}

/* tu_gpu_kernels() binding at most max_binding_bytes a view (0: the device's limit), so that
 * ops split their tensors into blocks (vka_context_desc.max_binding_bytes). */
static inline vka_context *tu_gpu_limited(vka_kernels kernels, uint64_t max_binding_bytes) {
    vka_context_desc d = {.backend = VKA_BACKEND_VULKAN, .validation = 1, .log = tu_log,
                          .kernels = kernels, .max_binding_bytes = max_binding_bytes};
    const char *v = getenv("VKATTN_VALIDATION");
    if (v && strcmp(v, "0") == 0) d.validation = -1;
    vka_context *ctx = NULL;
    vka_result r = vka_context_create(&d, &ctx);
    if (r != VKA_SUCCESS) {
        const char *req = getenv("VKATTN_REQUIRE_GPU");
        char msg[1200];
        snprintf(msg, sizeof msg, "%s", vka_last_error(ctx));
        vka_context_destroy(ctx);
        if (req && strcmp(req, "1") == 0) fail_msg("no Vulkan context: %s", msg);
        print_message("skipping: no Vulkan context (%s)\n", msg);
        skip();
        return NULL;
    }
    return ctx;
}

#if defined(_POSIX_C_SOURCE) && _POSIX_C_SOURCE >= 200112L /* setenv: a file defining it */
#define TU_HAVE_PACKED16 1
/* tu_gpu_limited() on the packed 16-bit path (VKATTN_16BIT_STORAGE=0, set while the context
 * is created: settings are read once, at create): its kernels read and write bf16 and fp16 as
 * 32-bit words even where the device has 16-bit storage, which the other contexts then use
 * (vka_16bit_path). The variable is restored after. */
static inline vka_context *tu_gpu_packed16(vka_kernels kernels, uint64_t max_binding_bytes) {
    const char *was = getenv("VKATTN_16BIT_STORAGE");
    char saved[16] = "";
    if (was) snprintf(saved, sizeof saved, "%s", was);
    setenv("VKATTN_16BIT_STORAGE", "0", 1);
    vka_context *ctx = tu_gpu_limited(kernels, max_binding_bytes);
    if (was) setenv("VKATTN_16BIT_STORAGE", saved, 1);
    else unsetenv("VKATTN_16BIT_STORAGE");
    vka_device_info d;
    if (ctx && (vka_context_selected_device(ctx, &d) != VKA_SUCCESS ||
                d.path_16bit != VKA_16BIT_PACKED))
        fail_msg("VKATTN_16BIT_STORAGE=0: the context is not on the packed 16-bit path");
    return ctx;
}
#endif

/* tu_gpu_kernels() with the variants the device type calls for. */
static inline vka_context *tu_gpu(void) { return tu_gpu_kernels(VKA_KERNELS_AUTO); }

/* The Vulkan kernel variant (VKA_KERNELS_GPU or VKA_KERNELS_CPU) this machine's device does not
 * run by default (vka_context_vulkan_kernels of a context with VKA_KERNELS_AUTO), or
 * VKA_KERNELS_AUTO when there is no Vulkan device. */
static inline vka_kernels tu_other_kernels(void) {
    vka_context_desc d = {.backend = VKA_BACKEND_VULKAN, .validation = -1, .log = tu_log};
    vka_context *ctx = NULL;
    vka_kernels other = VKA_KERNELS_AUTO;
    if (vka_context_create(&d, &ctx) == VKA_SUCCESS) {
        const char *k = vka_context_vulkan_kernels(ctx);
        other = k && strncmp(k, "gpu", 3) == 0 ? VKA_KERNELS_CPU : VKA_KERNELS_GPU;
    }
    vka_context_destroy(ctx);
    return other;
}

/* The body of main() for a program split into a quick and an exhaustive group (VKA_SPLIT_PROGRAMS
 * in tests/CMakeLists.txt), chosen by argv[1]:
 *   "quick"       the quick group, less its Vulkan tests with the kernel variant the device
 *                 does not run by default (TU_VULKAN_TESTS' name_gpu_kernels on lavapipe,
 *                 name_cpu_kernels on a GPU: on lavapipe each GPU-variant pipeline takes
 *                 seconds to build, and the quick set is meant to take minutes);
 *   "exhaustive"  those left-out tests of the quick group, then the exhaustive group;
 *   none          both groups whole.
 * Both groups get the same setup and teardown. Returns the number of failures; anything else
 * as the argument is a usage error (exit 2). */
#define TU_RETURN_GROUPS(argc, argv, quick, exhaustive, setup, teardown)                       \
    TU_RETURN_SPLIT_(argc, argv, quick, setup, teardown,                                        \
                     cmocka_run_group_tests_name("exhaustive", exhaustive, setup, teardown))
/* TU_RETURN_GROUPS for a program whose exhaustive group is only the quick group's other kernel
 * variant. */
#define TU_RETURN_QUICK(argc, argv, quick, setup, teardown)                                     \
    TU_RETURN_SPLIT_(argc, argv, quick, setup, teardown, 0)
#define TU_RETURN_SPLIT_(argc, argv, quick, setup, teardown, run_exhaustive)                    \
    do {                                                                                        \
        const char *tu_group_ = (argc) > 1 ? (argv)[1] : "";                                    \
        if ((argc) > 2 || (*tu_group_ && strcmp(tu_group_, "quick") != 0 &&                    \
                           strcmp(tu_group_, "exhaustive") != 0)) {                             \
            fprintf(stderr, "usage: %s [quick|exhaustive] (none: both groups)\n", (argv)[0]);  \
            return 2;                                                                           \
        }                                                                                       \
        vka_kernels tu_other_ = *tu_group_ ? tu_other_kernels() : VKA_KERNELS_AUTO;            \
        const char *tu_other_tests_ = tu_other_ == VKA_KERNELS_GPU   ? "*_gpu_kernels"          \
                                      : tu_other_ == VKA_KERNELS_CPU ? "*_cpu_kernels"          \
                                                                     : NULL;                    \
        int tu_failed_ = 0;                                                                     \
        if (strcmp(tu_group_, "exhaustive") != 0) {                                             \
            if (tu_other_tests_) cmocka_set_skip_filter(tu_other_tests_);                       \
            tu_failed_ += cmocka_run_group_tests_name("quick", quick, setup, teardown);        \
            cmocka_set_skip_filter(NULL);                                                       \
        }                                                                                       \
        if (strcmp(tu_group_, "quick") != 0) {                                                  \
            if (tu_other_tests_) {                                                              \
                cmocka_set_test_filter(tu_other_tests_);                                        \
                tu_failed_ += cmocka_run_group_tests_name("quick, other kernel variant", quick, \
                                                          setup, teardown);                     \
                cmocka_set_test_filter(NULL);                                                   \
            }                                                                                   \
            tu_failed_ += (run_exhaustive);                                                     \
        }                                                                                       \
        return tu_failed_;                                                                      \
    } while (0)

#ifdef VKA_SHARED_DATA_DIR
/* The path of name in the shared data folder (VKA_SHARED_DATA_DIR, e.g. "tinyshakespeare.txt";
 * the string lives until the next call), or NULL after skip() when the file is missing --
 * unless VKATTN_REQUIRE_DATA=1 (as CI sets), when that fails the test. */
static inline const char *tu_shared_data_path(const char *name) {
    static char path[1024];
    snprintf(path, sizeof path, "%s/%s", VKA_SHARED_DATA_DIR, name);
    FILE *f = fopen(path, "rb");
    if (f) {
        fclose(f);
        return path;
    }
    const char *req = getenv("VKATTN_REQUIRE_DATA");
    if (req && strcmp(req, "1") == 0) fail_msg("%s not found (VKATTN_REQUIRE_DATA=1)", path);
    print_message("skipping: %s not found\n", path);
    skip();
    return NULL;
}
#endif

/* Destroy a context, failing the test on any validation message it saw. */
static inline void tu_done(vka_context *ctx) {
    if (!ctx) return;
    uint32_t n = vka_context_validation_messages(ctx);
    vka_context_destroy(ctx);
    if (n != 0) fail_msg("%u Vulkan validation message(s)", n);
}

/* A tensor of n elements holding data (or zeros if data is NULL). */
static inline vka_tensor *tu_tensor(vka_context *ctx, size_t n, const void *data) {
    vka_tensor *t = NULL;
    vka_result r = vka_tensor_create(ctx, n, &t);
    if (r != VKA_SUCCESS) fail_msg("tensor of %zu: %s", n, vka_last_error(ctx));
    if (data && vka_tensor_write(t, 0, data, n) != VKA_SUCCESS)
        fail_msg("tensor write: %s", vka_last_error(ctx));
    return t;
}

/* A tensor of n elements filled with NaN, so elements an op fails to write show up. */
static inline vka_tensor *tu_tensor_nan(vka_context *ctx, size_t n) {
    float *nan_data = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) nan_data[i] = NAN;
    vka_tensor *t = tu_tensor(ctx, n, nan_data);
    free(nan_data);
    return t;
}

/* The n elements of t in a malloc'd array. */
static inline float *tu_read(const vka_tensor *t, size_t n) {
    float *out = malloc((n ? n : 1) * sizeof(float));
    if (vka_tensor_read(t, 0, out, n) != VKA_SUCCESS) fail_msg("tensor read failed");
    return out;
}

static inline void tu_begin(vka_context *ctx) {
    vka_result r = vka_graph_begin(ctx);
    if (r != VKA_SUCCESS) fail_msg("graph_begin: %s", vka_last_error(ctx));
}

/* End the graph, run it once, destroy it; fail the test on any error. */
static inline void tu_run(vka_context *ctx) {
    vka_graph *g = NULL;
    vka_result r = vka_graph_end(ctx, &g);
    if (r != VKA_SUCCESS) fail_msg("graph_end: %s (%s)", vka_result_string(r), vka_last_error(ctx));
    r = vka_graph_run(g);
    vka_graph_destroy(g);
    if (r != VKA_SUCCESS) fail_msg("graph_run: %s (%s)", vka_result_string(r), vka_last_error(ctx));
}

/* Deterministic uniform numbers in [-scale, scale). */
static inline void tu_random(float *x, size_t n, uint64_t seed, float scale) {
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
    for (size_t i = 0; i < n; i++) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        x[i] = scale * (2.0f * (float)((s >> 40) & 0xFFFFFF) / 16777216.0f - 1.0f);
    }
}

/* Compare got with want: each |got - want| <= atol + rtol * |want|, no NaN in got.
 * On failure prints the max difference and where, and fails the test. Returns max abs diff. */
static inline double tu_assert_close(const char *what, const float *got, const float *want,
                                     size_t n, double atol, double rtol) {
    double max_abs = 0.0;
    size_t worst = 0, bad = 0, first_bad = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - (double)want[i]);
        if (isnan(got[i]) != isnan(want[i])) d = INFINITY;
        if (d > max_abs) {
            max_abs = d;
            worst = i;
        }
        if (!(d <= atol + rtol * fabs((double)want[i]))) {
            if (!bad) first_bad = i;
            bad++;
        }
    }
    if (bad) {
        print_message("%s: %zu of %zu elements differ; max |diff| %.3g at %zu (got %.9g want %.9g); "
                      "first bad at %zu (got %.9g want %.9g)\n",
                      what, bad, n, max_abs, worst, got[worst], want[worst], first_bad,
                      got[first_bad], want[first_bad]);
        fail_msg("%s: mismatch", what);
    }
    return max_abs;
}

#endif
