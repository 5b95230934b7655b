/* vka_gelu_forward / vka_gelu_backward: GELU, tanh approximation as GPT-2. */
#include "op_util.h"

#include <float.h>

static double gelu_ref1(double x) {
    double u = 0.79788456080286535588 /* sqrt(2/pi) */ * (x + 0.044715 * x * x * x);
    return 0.5 * x * (1.0 + tanh(u));
}

static void gelu_ref(void *user, const double *x, double *y) {
    size_t n = *(const size_t *)user;
    for (size_t i = 0; i < n; i++) y[i] = gelu_ref1(x[i]);
}

/* Forward on ctx: out (n), malloc'd. */
static float *gelu_run(vka_context *ctx, const float *x, size_t n) {
    vka_tensor *inp = tu_tensor(ctx, n, x), *out = tu_tensor_nan(ctx, n);
    tu_begin(ctx);
    assert_int_equal(vka_gelu_forward(ctx, out, inp, n), VKA_SUCCESS);
    tu_run(ctx);
    float *got = tu_read(out, n);
    vka_tensor_destroy(inp);
    vka_tensor_destroy(out);
    return got;
}

/* Backward on ctx: what it added to dinp (initially dinp0). */
static float *gelu_backward_run(vka_context *ctx, const float *x, const float *dout,
                                const float *dinp0, size_t n) {
    vka_tensor *inp = tu_tensor(ctx, n, x), *dout_t = tu_tensor(ctx, n, dout);
    vka_tensor *dinp = tu_tensor(ctx, n, dinp0);
    tu_begin(ctx);
    assert_int_equal(vka_gelu_backward(ctx, dinp, inp, dout_t, n), VKA_SUCCESS);
    tu_run(ctx);
    float *got = tu_read(dinp, n), *added = tu_added(got, dinp0, n);
    free(got);
    vka_tensor_destroy(inp);
    vka_tensor_destroy(dout_t);
    vka_tensor_destroy(dinp);
    return added;
}

static void gelu_case(vka_context *ctx, size_t n, uint64_t seed) {
    float *x = malloc(n * sizeof *x), *dout = malloc(n * sizeof *dout);
    float *dinp0 = malloc(n * sizeof *dinp0);
    tu_random(x, n, seed, 8.0f);
    tu_random(dout, n, seed + 1, 1.0f);
    tu_random(dinp0, n, seed + 2, 1.0f);
    float *got = gelu_run(ctx, x, n), *added = gelu_backward_run(ctx, x, dout, dinp0, n);
    vka_context *cpu = tu_cpu();
    float *got_cpu = gelu_run(cpu, x, n), *added_cpu = gelu_backward_run(cpu, x, dout, dinp0, n);
    tu_done(cpu);
    double *xd = tu_to_double(x, n), *want = malloc(n * sizeof *want);
    double *fd = malloc(n * sizeof *fd);
    gelu_ref(&n, xd, want);
    tu_assert_close_d("gelu_forward", got, want, n, 1e-6, 1e-5);
    tu_vs_cpu(ctx, "gelu_forward vs cpu", got, got_cpu, n, 1e-6, 1e-5);
    /* L = sum dout * gelu(x) is separable, so its gradient is dout * gelu'(x) */
    tu_fd_grad(gelu_ref, &n, x, n, dout, n, fd);
    tu_assert_close_d("gelu_backward vs finite differences", added, fd, n, 1e-5, 1e-4);
    tu_vs_cpu(ctx, "gelu_backward vs cpu", added, added_cpu, n, 1e-6, 1e-5);
    free(x);
    free(dout);
    free(dinp0);
    free(got);
    free(added);
    free(got_cpu);
    free(added_cpu);
    free(xd);
    free(want);
    free(fd);
}

static void test_gelu_matches_reference_and_finite_difference(void **state) {
    (void)state;
    vka_context *ctx = tu_cpu();
    gelu_case(ctx, 1, 1);
    gelu_case(ctx, 333, 2);
    tu_done(ctx);
}

/* The CPU backend's fast kernels (polynomial exp, vectorised) against the reference (libm's
 * expf): within the tolerance above, on a length no multiple of the vectors (8, 16) or work
 * items (4096), with the tails (|x| up to FLT_MAX); AVX-512 and AVX2 compute the same
 * operations in the same order, so their results are identical, and so are 2 and 3 threads. */
static void test_gelu_cpu_fast_matches_reference(void **state) {
    (void)state;
    const size_t n = 40009;
    float *x = malloc(n * sizeof *x), *dout = malloc(n * sizeof *dout);
    float *dinp0 = malloc(n * sizeof *dinp0);
    tu_random(x, n, 500, 12.0f);
    tu_random(dout, n, 501, 1.0f);
    tu_random(dinp0, n, 502, 1.0f);
    const float special[] = {0.0f, -0.0f, 13.5f, -13.5f, 20.625f, -20.625f, 44.0f, -44.0f,
                             1e20f, -1e20f, FLT_MAX, -FLT_MAX, 1e-30f, -1e-30f};
    for (size_t i = 0; i < TU_LEN(special); i++) x[i * 997] = special[i];
    const vka_cpu_kernels kinds[4] = {VKA_CPU_KERNELS_REFERENCE, VKA_CPU_KERNELS_FAST,
                                      VKA_CPU_KERNELS_FAST_AVX2, VKA_CPU_KERNELS_FAST};
    float *y[4], *dy[4];
    for (int k = 0; k < 4; k++) {
        vka_context *ctx = tu_cpu_kernels(kinds[k], k == 3 ? 3 : 2);
        y[k] = gelu_run(ctx, x, n);
        dy[k] = gelu_backward_run(ctx, x, dout, dinp0, n);
        tu_done(ctx);
    }
    double d = tu_assert_close("fast gelu_forward vs reference", y[1], y[0], n, 1e-6, 1e-5);
    double db = tu_assert_close("fast gelu_backward vs reference", dy[1], dy[0], n, 1e-6, 1e-5);
    for (int k = 2; k < 4; k++) {
        assert_memory_equal(y[1], y[k], n * sizeof(float));
        assert_memory_equal(dy[1], dy[k], n * sizeof(float));
    }
    print_message("fast gelu: max |fast - reference| forward %.3g, backward %.3g\n", d, db);
    for (int k = 0; k < 4; k++) {
        free(y[k]);
        free(dy[k]);
    }
    free(x);
    free(dout);
    free(dinp0);
}

/* Large |x| overflows x^3 and tanh's exponentials: the result must stay finite. */
static void known_value_cases(vka_context *ctx) {
    const float x[] = {-100.0f, -20.0f, -13.5f, -3.0f, -1.0f, 0.0f, 1.0f, 3.0f, 13.5f,
                       20.625f, 100.0f, -1e20f, 1e20f, -FLT_MAX, FLT_MAX};
    const size_t n = TU_LEN(x);
    float dout[TU_LEN(x)], zero[TU_LEN(x)] = {0};
    for (size_t i = 0; i < n; i++) dout[i] = 1.0f;
    float *y = gelu_run(ctx, x, n), *dy = gelu_backward_run(ctx, x, dout, zero, n);
    tu_assert_finite("gelu at large |x|", y, n);
    tu_assert_finite("gelu' at large |x|", dy, n);
    for (size_t i = 0; i < 11; i++) /* the ordinary range against the double formula */
        if (!(fabs(y[i] - gelu_ref1(x[i])) <= 1e-6 + 1e-6 * fabs(gelu_ref1(x[i]))))
            fail_msg("gelu(%g) = %.9g, want %.9g", x[i], y[i], gelu_ref1(x[i]));
    assert_true(y[9] == 20.625f);                       /* exactly x far right */
    assert_true(fabs(y[3] - -0.0036374) <= 5e-8);        /* x = -3 */
    assert_true(fabs(y[6] - 0.841192) <= 5e-7);          /* x = 1 */
    assert_true(fabs(y[0]) <= 1e-30 && fabs(y[11]) <= 1e-30); /* far left -> 0 */
    assert_true(y[12] == 1e20f && y[14] == FLT_MAX);     /* far right -> x */
    assert_true(fabs(dy[5] - 0.5) <= 1e-7);              /* gelu'(0) = 1/2 */
    assert_true(fabs(dy[9] - 1.0) <= 1e-6 && fabs(dy[0]) <= 1e-6); /* tails: 1 and 0 */
    free(y);
    free(dy);
}

static void test_gelu_known_values_and_finite_tails(void **state) {
    (void)state;
    vka_context *ctx = tu_cpu();
    known_value_cases(ctx);
    tu_done(ctx);
}

/* NaN in gives NaN out, forward and backward, with no undefined behaviour on the way (the fast
 * CPU kernel's exp converts to int: the sanitizer build checks it; a fuzzed model found it). */
static void test_gelu_nan_propagates(void **state) {
    (void)state;
    vka_context *ctx = tu_cpu();
    enum { N = 37 };
    float x[N];
    for (int i = 0; i < N; i++) x[i] = i % 3 ? (float)i / 7 : NAN;
    vka_tensor *in = tu_tensor(ctx, N, x), *out = tu_tensor_nan(ctx, N);
    vka_tensor *dout = tu_tensor(ctx, N, x), *din = tu_tensor(ctx, N, NULL);
    tu_begin(ctx);
    assert_int_equal(vka_gelu_forward(ctx, out, in, N), VKA_SUCCESS);
    assert_int_equal(vka_gelu_backward(ctx, din, in, dout, N), VKA_SUCCESS);
    tu_run(ctx);
    float *y = tu_read(out, N), *dy = tu_read(din, N);
    for (int i = 0; i < N; i++) {
        assert_true(isnan(y[i]) == isnan(x[i]));
        if (isnan(x[i])) assert_true(isnan(dy[i]));
    }
    free(y);
    free(dy);
    vka_tensor_destroy(in);
    vka_tensor_destroy(out);
    vka_tensor_destroy(dout);
    vka_tensor_destroy(din);
    tu_done(ctx);
}

static void test_gelu_gpu_matches_cpu(void **state) {
    (void)state;
    vka_context *ctx = tu_gpu();
    gelu_case(ctx, 1, 1);
    gelu_case(ctx, 333, 2);
    gelu_case(ctx, 1031, 3);
    tu_done(ctx);
}

static void test_gelu_gpu_known_values_and_finite_tails(void **state) {
    (void)state;
    vka_context *ctx = tu_gpu();
    known_value_cases(ctx);
    tu_done(ctx);
}

/* Lengths that take each path of the CPU-type kernels (shaders/elementwise.glsl): multiples of
 * 4 (vec4s, through texel views on lavapipe; 3092 fills three workgroups and part of a fourth)
 * and not (one element per invocation). */
static void vulkan_cases(vka_context *ctx) {
    gelu_case(ctx, 4, 1);
    gelu_case(ctx, 333, 2);
    gelu_case(ctx, 1032, 3);
    gelu_case(ctx, 3092, 4);
    known_value_cases(ctx);
}
TU_VULKAN_TESTS(test_gelu_vulkan_matches_cpu, vulkan_cases)

/* The CPU-type kernels (vec4s, texel views) give the same bits as the one-element-per-invocation
 * GPU kernels on the same device: the same arithmetic per element, forward and backward. */
static void test_gelu_vulkan_kernel_variants_agree(void **state) {
    (void)state;
    const size_t sizes[] = {4096, 1031};
    for (size_t k = 0; k < TU_LEN(sizes); k++) {
        size_t n = sizes[k];
        float *x = malloc(n * sizeof *x), *dout = malloc(n * sizeof *dout);
        float *dinp0 = malloc(n * sizeof *dinp0), *y[2], *dx[2];
        tu_random(x, n, 10 + k, 8.0f);
        tu_random(dout, n, 20 + k, 1.0f);
        tu_random(dinp0, n, 30 + k, 1.0f);
        for (int v = 0; v < 2; v++) {
            vka_context *ctx = tu_gpu_kernels(v ? VKA_KERNELS_CPU : VKA_KERNELS_GPU);
            y[v] = gelu_run(ctx, x, n);
            dx[v] = gelu_backward_run(ctx, x, dout, dinp0, n);
            tu_done(ctx);
        }
        for (size_t i = 0; i < n; i++)
            if (memcmp(&y[0][i], &y[1][i], 4) || memcmp(&dx[0][i], &dx[1][i], 4))
                fail_msg("n %zu, element %zu: gelu %.9g vs %.9g, gelu' added %.9g vs %.9g (GPU vs "
                         "CPU-type kernels)", n, i, y[0][i], y[1][i], dx[0][i], dx[1][i]);
        for (int v = 0; v < 2; v++) {
            free(y[v]);
            free(dx[v]);
        }
        free(x);
        free(dout);
        free(dinp0);
    }
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gelu_matches_reference_and_finite_difference),
        cmocka_unit_test(test_gelu_cpu_fast_matches_reference),
        cmocka_unit_test(test_gelu_known_values_and_finite_tails),
        cmocka_unit_test(test_gelu_nan_propagates),
        cmocka_unit_test(test_gelu_gpu_matches_cpu),
        cmocka_unit_test(test_gelu_gpu_known_values_and_finite_tails),
        TU_VULKAN_TEST_ENTRIES(test_gelu_vulkan_matches_cpu),
        cmocka_unit_test(test_gelu_vulkan_kernel_variants_agree),
    };
    TU_RETURN_QUICK(argc, argv, tests, NULL, NULL);
}
