/* Reductions: vka_mean, vka_grad_norm (global L2 norm and clip scale), vka_bias_backward. */
#include "op_util.h"

static float mean_run(vka_context *ctx, const float *x, size_t N) {
    vka_tensor *inp = tu_tensor(ctx, N, x), *out = tu_tensor_nan(ctx, 1);
    tu_begin(ctx);
    assert_int_equal(vka_mean(ctx, out, inp, N), VKA_SUCCESS);
    tu_run(ctx);
    float r = NAN;
    vka_tensor_read(out, 0, &r, 1);
    vka_tensor_destroy(inp);
    vka_tensor_destroy(out);
    return r;
}

static void mean_cases(vka_context *ctx) {
    const float one = -3.25f;
    assert_true(mean_run(ctx, &one, 1) == -3.25f);
    float *x = malloc(100003 * sizeof *x);
    for (int i = 0; i < 1000; i++) x[i] = (float)(i + 1);
    assert_true(mean_run(ctx, x, 1000) == 500.5f); /* integer sums are exact */
    tu_random(x, 100003, 7, 2.0f);
    double want = 0.0;
    for (size_t i = 0; i < 100003; i++) want += x[i];
    want /= 100003;
    float got = mean_run(ctx, x, 100003);
    if (!(fabs(got - want) <= 1e-7)) fail_msg("mean %.9g, want %.9g", got, want);
    free(x);
}

static void test_reduce_mean(void **state) {
    (void)state;
    vka_context *ctx = tu_cpu();
    mean_cases(ctx);
    tu_done(ctx);
}

/* [norm, clip scale] of count tensors (sizes[i] elements, concatenated in g). */
static void grad_norm_run(vka_context *ctx, const float *g, const size_t *sizes, int count,
                          float max_norm, float out[2]) {
    vka_tensor *grads[8];
    size_t off = 0;
    for (int i = 0; i < count; i++) {
        grads[i] = tu_tensor(ctx, sizes[i], g + off);
        off += sizes[i];
    }
    vka_tensor *res = tu_tensor_nan(ctx, 2);
    vka_tensor *partials = tu_tensor_nan(ctx, (size_t)count * VKA_NORM_PARTIALS);
    tu_begin(ctx);
    assert_int_equal(vka_grad_norm(ctx, res, partials, (const vka_tensor *const *)grads, count,
                                   max_norm),
                     VKA_SUCCESS);
    tu_run(ctx);
    vka_tensor_read(res, 0, out, 2);
    for (int i = 0; i < count; i++) vka_tensor_destroy(grads[i]);
    vka_tensor_destroy(res);
    vka_tensor_destroy(partials);
}

/* Norms past the float range of a sum of squares (but not of the norm), tiny gradients whose
 * squares underflow, and a NaN or inf: the norm is NaN or inf and the clip scale 0, whatever
 * max_norm (the optimizer then leaves the parameters alone; the trainer stops). */
static void grad_norm_extreme_cases(vka_context *ctx) {
    float out[2];
    float *g = malloc(300 * sizeof *g);
    const size_t s100[3] = {40, 60, 200};
    for (int i = 0; i < 100; i++) g[i] = i % 2 ? 1e20f : -1e20f;
    grad_norm_run(ctx, g, s100, 2, 1.0f, out);
    if (!(fabs(out[0] - 1e21) <= 1e-6 * 1e21)) fail_msg("norm of 100 x 1e20: %.9g", out[0]);
    if (!(fabs(out[1] - 1e-21) <= 1e-6 * 1e-21)) fail_msg("clip of 100 x 1e20: %.9g", out[1]);
    for (int i = 0; i < 100; i++) g[i] = 3e18f;
    grad_norm_run(ctx, g, s100, 2, 0.0f, out);
    if (!(fabs(out[0] - 3e19) <= 1e-6 * 3e19)) fail_msg("norm of 100 x 3e18: %.9g", out[0]);
    assert_true(out[1] == 1.0f);
    for (int i = 0; i < 300; i++) g[i] = i % 3 ? 1e-30f : -2e-30f; /* squares underflow */
    double sq = 0.0;
    for (int i = 0; i < 300; i++) sq += (double)g[i] * g[i];
    grad_norm_run(ctx, g, s100, 3, 1.0f, out);
    if (!(fabs(out[0] - sqrt(sq)) <= 1e-6 * sqrt(sq)))
        fail_msg("norm of tiny gradients: %.9g, want %.9g", out[0], sqrt(sq));
    assert_true(out[1] == 1.0f);
    for (int i = 0; i < 300; i++) g[i] = (float)(i % 7) - 3.0f; /* mixed with huge ones */
    g[17] = 3e38f;
    grad_norm_run(ctx, g, s100, 3, 1.0f, out);
    if (!(fabs(out[0] - 3e38) <= 1e-6 * 3e38)) fail_msg("norm with 3e38: %.9g", out[0]);
    for (int i = 0; i < 100; i++) g[i] = 3e38f; /* finite, but the norm is past FLT_MAX */
    grad_norm_run(ctx, g, s100, 2, 1.0f, out);
    if (!(out[0] == INFINITY && out[1] == 0.0f))
        fail_msg("norm of 100 x 3e38: %g, scale %g (want inf, 0)", out[0], out[1]);
    const float bad[3] = {NAN, INFINITY, -INFINITY};
    for (int b = 0; b < 3; b++)
        for (int at = 0; at < 300; at += 149) {
            for (int i = 0; i < 300; i++) g[i] = 0.5f;
            g[at] = bad[b];
            for (int clip = 0; clip < 2; clip++) {
                grad_norm_run(ctx, g, s100, 3, clip ? 1.0f : 0.0f, out);
                bool ok = b == 0 ? isnan(out[0]) : out[0] == INFINITY;
                if (!ok || out[1] != 0.0f)
                    fail_msg("gradient %g at %d, max_norm %d: norm %g, scale %g (want %s, 0)",
                             bad[b], at, clip, out[0], out[1], b == 0 ? "nan" : "inf");
            }
        }
    free(g);
}

static void grad_norm_cases(vka_context *ctx) {
    float out[2];
    const float g34[2] = {3.0f, -4.0f};
    const size_t s11[2] = {1, 1};
    grad_norm_run(ctx, g34, s11, 2, 0.0f, out); /* no clipping */
    assert_true(out[0] == 5.0f && out[1] == 1.0f);
    grad_norm_run(ctx, g34, s11, 2, 1.0f, out);
    assert_true(fabs(out[1] - 1.0 / (5.0 + 1e-6)) <= 1e-7);
    grad_norm_run(ctx, g34, s11, 2, 10.0f, out); /* norm below max: scale 1 */
    assert_true(out[1] == 1.0f);
    grad_norm_run(ctx, g34, s11, 2, -1.0f, out);
    assert_true(out[1] == 1.0f);

    /* Several tensors of awkward sizes (fewer elements than partials, and many more). */
    const size_t sizes[4] = {1, 63, 5000, 100001};
    size_t total = 1 + 63 + 5000 + 100001;
    float *g = malloc(total * sizeof *g);
    tu_random(g, total, 3, 0.01f);
    double sq = 0.0;
    for (size_t i = 0; i < total; i++) sq += (double)g[i] * g[i];
    double norm = sqrt(sq), max_norm = norm / 3.0;
    grad_norm_run(ctx, g, sizes, 4, (float)max_norm, out);
    if (!(fabs(out[0] - norm) <= 1e-6 * norm)) fail_msg("norm %.9g, want %.9g", out[0], norm);
    double clip = max_norm / (norm + 1e-6);
    if (!(fabs(out[1] - clip) <= 1e-6)) fail_msg("clip %.9g, want %.9g", out[1], clip);
    free(g);
    grad_norm_extreme_cases(ctx);
}

static void test_reduce_grad_norm_and_clip_scale(void **state) {
    (void)state;
    vka_context *ctx = tu_cpu();
    grad_norm_cases(ctx);
    tu_done(ctx);
}

typedef struct bias_shape { int N, OC; } bias_shape;

/* bias (OC) -> out (N, OC) = bias on every row: the forward whose gradient bias_backward is. */
static void bias_ref(void *user, const double *bias, double *out) {
    const bias_shape *s = user;
    for (int n = 0; n < s->N; n++)
        for (int o = 0; o < s->OC; o++) out[(size_t)n * s->OC + o] = bias[o];
}

static float *bias_backward_run(vka_context *ctx, bias_shape s, const float *dout,
                                const float *dbias0) {
    vka_tensor *db = tu_tensor(ctx, (size_t)s.OC, dbias0);
    vka_tensor *d = tu_tensor(ctx, (size_t)s.N * s.OC, dout);
    tu_begin(ctx);
    assert_int_equal(vka_bias_backward(ctx, db, d, s.N, s.OC), VKA_SUCCESS);
    tu_run(ctx);
    float *got = tu_read(db, (size_t)s.OC), *added = tu_added(got, dbias0, (size_t)s.OC);
    free(got);
    vka_tensor_destroy(db);
    vka_tensor_destroy(d);
    return added;
}

static void bias_case(vka_context *ctx, bias_shape s, uint64_t seed) {
    size_t n = (size_t)s.N * s.OC;
    float *dout = malloc(n * sizeof *dout), *db0 = malloc((size_t)s.OC * sizeof *db0);
    float *bias = calloc((size_t)s.OC, sizeof *bias);
    tu_random(dout, n, seed, 1.0f);
    tu_random(db0, (size_t)s.OC, seed + 1, 1.0f);
    float *added = bias_backward_run(ctx, s, dout, db0);
    vka_context *cpu = tu_cpu();
    float *added_cpu = bias_backward_run(cpu, s, dout, db0);
    tu_done(cpu);
    double *fd = malloc((size_t)s.OC * sizeof *fd);
    tu_fd_grad(bias_ref, &s, bias, (size_t)s.OC, dout, n, fd);
    tu_assert_close_d("bias_backward vs finite differences", added, fd, (size_t)s.OC, 1e-5, 1e-5);
    tu_vs_cpu(ctx, "bias_backward vs cpu", added, added_cpu, (size_t)s.OC, 1e-5, 1e-5);
    free(dout);
    free(db0);
    free(bias);
    free(added);
    free(added_cpu);
    free(fd);
}

static void test_reduce_bias_backward_finite_difference(void **state) {
    (void)state;
    vka_context *ctx = tu_cpu();
    bias_case(ctx, (bias_shape){1, 1}, 1);
    bias_case(ctx, (bias_shape){70, 130}, 2);
    bias_case(ctx, (bias_shape){513, 3}, 3);
    tu_done(ctx);
}

/* The CPU backend's fast bias gradient (vector lanes across columns) sums every column in the
 * reference's order: bit-identical, on both ISAs, for column counts no multiple of the vectors
 * or of the 64-column work items. */
static void test_reduce_cpu_fast_bias_backward_equals_reference(void **state) {
    (void)state;
    const bias_shape shapes[] = {{1, 1}, {5, 7}, {70, 130}, {513, 3}, {768, 128}, {33, 771}};
    vka_context *ref = tu_cpu_kernels(VKA_CPU_KERNELS_REFERENCE, 2);
    vka_context *fast = tu_cpu_kernels(VKA_CPU_KERNELS_FAST, 2);
    vka_context *avx2 = tu_cpu_kernels(VKA_CPU_KERNELS_FAST_AVX2, 3);
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        bias_shape s = shapes[i];
        size_t n = (size_t)s.N * s.OC;
        float *dout = malloc(n * sizeof *dout), *db0 = malloc((size_t)s.OC * sizeof *db0);
        tu_random(dout, n, 600 + i, 1.0f);
        tu_random(db0, (size_t)s.OC, 610 + i, 1.0f);
        float *r = bias_backward_run(ref, s, dout, db0), *f = bias_backward_run(fast, s, dout, db0);
        float *a = bias_backward_run(avx2, s, dout, db0);
        assert_memory_equal(r, f, (size_t)s.OC * sizeof *r);
        assert_memory_equal(r, a, (size_t)s.OC * sizeof *r);
        free(dout);
        free(db0);
        free(r);
        free(f);
        free(a);
    }
    tu_done(ref);
    tu_done(fast);
    tu_done(avx2);
}

/* Reductions are where a parallel order would show: results must be bit-identical for any
 * number of CPU threads (exact --resume). */
static void test_reduce_cpu_deterministic_across_threads(void **state) {
    (void)state;
    size_t n = 300007;
    float *x = malloc(n * sizeof *x);
    tu_random(x, n, 5, 1.0f);
    vka_context *one = tu_cpu_threads(1), *three = tu_cpu_threads(3);
    float m1 = mean_run(one, x, n), m3 = mean_run(three, x, n);
    assert_memory_equal(&m1, &m3, sizeof m1);
    const size_t sizes[2] = {n - 1000, 1000};
    float g1[2], g3[2];
    grad_norm_run(one, x, sizes, 2, 1.0f, g1);
    grad_norm_run(three, x, sizes, 2, 1.0f, g3);
    assert_memory_equal(g1, g3, sizeof g1);
    bias_shape s = {n / 301, 301};
    float *db0 = calloc(301, sizeof *db0);
    float *b1 = bias_backward_run(one, s, x, db0), *b3 = bias_backward_run(three, s, x, db0);
    assert_memory_equal(b1, b3, 301 * sizeof *b1);
    free(b1);
    free(b3);
    free(db0);
    free(x);
    tu_done(one);
    tu_done(three);
}

/* --- Vulkan, both kernel variants ------------------------------------------------------- */

/* The mean cases plus 10^6 elements (many strides of the widest workgroup), run twice: the same
 * bits (fixed order). */
static void vulkan_mean_cases(vka_context *ctx) {
    mean_cases(ctx);
    size_t n = 1000000;
    float *x = malloc(n * sizeof *x);
    tu_random(x, n, 9, 1.0f);
    double want = 0.0;
    for (size_t i = 0; i < n; i++) want += x[i] + 0.5f; /* an offset: a sum that grows */
    for (size_t i = 0; i < n; i++) x[i] += 0.5f;
    want /= (double)n;
    float a = mean_run(ctx, x, n), b = mean_run(ctx, x, n);
    if (!(fabs(a - want) <= 1e-6 * fabs(want))) fail_msg("mean of 1e6: %.9g, want %.9g", a, want);
    assert_memory_equal(&a, &b, sizeof a);
    free(x);
}

/* The grad_norm cases plus eight tensors (more than one dispatch takes), one of 2^20 elements. */
static void vulkan_grad_norm_cases(vka_context *ctx) {
    grad_norm_cases(ctx);
    const size_t sizes[8] = {1, 1 << 20, 7, 64, 65, 1000, 3, 4097};
    size_t total = 0;
    for (int i = 0; i < 8; i++) total += sizes[i];
    float *g = malloc(total * sizeof *g);
    tu_random(g, total, 4, 0.01f);
    double sq = 0.0;
    for (size_t i = 0; i < total; i++) sq += (double)g[i] * g[i];
    float out[2], again[2];
    grad_norm_run(ctx, g, sizes, 8, 1.0f, out);
    grad_norm_run(ctx, g, sizes, 8, 1.0f, again);
    double norm = sqrt(sq);
    if (!(fabs(out[0] - norm) <= 1e-6 * norm)) fail_msg("norm %.9g, want %.9g", out[0], norm);
    if (!(fabs(out[1] - fmin(1.0, 1.0 / (norm + 1e-6))) <= 1e-6))
        fail_msg("clip scale %.9g for norm %.9g", out[1], norm);
    assert_memory_equal(out, again, sizeof out);
    free(g);
}

/* Many rows (against the CPU backend only), run twice: the same bits. */
static void bias_many_rows_case(vka_context *ctx, bias_shape s) {
    size_t n = (size_t)s.N * s.OC;
    float *dout = malloc(n * sizeof *dout), *db0 = malloc((size_t)s.OC * sizeof *db0);
    tu_random(dout, n, 6, 1.0f);
    tu_random(db0, (size_t)s.OC, 7, 1.0f);
    float *a = bias_backward_run(ctx, s, dout, db0), *b = bias_backward_run(ctx, s, dout, db0);
    vka_context *cpu = tu_cpu();
    float *want = bias_backward_run(cpu, s, dout, db0);
    tu_done(cpu);
    char what[64];
    snprintf(what, sizeof what, "bias_backward %d x %d vs cpu", s.N, s.OC);
    tu_vs_cpu(ctx, what, a, want, (size_t)s.OC, 1e-5, 1e-5);
    assert_memory_equal(a, b, (size_t)s.OC * sizeof *a);
    free(dout);
    free(db0);
    free(a);
    free(b);
    free(want);
}

/* The bias cases, OC a multiple of 4 or not (the CPU-type kernel's vec4 and one-column layouts;
 * OC 516: a partial last workgroup), plus many rows. */
static void vulkan_bias_cases(vka_context *ctx) {
    bias_case(ctx, (bias_shape){1, 1}, 1);
    bias_case(ctx, (bias_shape){70, 130}, 2);
    bias_case(ctx, (bias_shape){513, 3}, 3);
    bias_case(ctx, (bias_shape){70, 128}, 4);
    bias_case(ctx, (bias_shape){33, 516}, 5);
    bias_case(ctx, (bias_shape){2, 4}, 6);
    bias_many_rows_case(ctx, (bias_shape){5000, 771});
    bias_many_rows_case(ctx, (bias_shape){4000, 516});
}

TU_VULKAN_TESTS(test_reduce_vulkan_mean, vulkan_mean_cases)
TU_VULKAN_TESTS(test_reduce_vulkan_grad_norm_and_clip_scale, vulkan_grad_norm_cases)
TU_VULKAN_TESTS(test_reduce_vulkan_bias_backward, vulkan_bias_cases)

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reduce_mean),
        cmocka_unit_test(test_reduce_grad_norm_and_clip_scale),
        cmocka_unit_test(test_reduce_bias_backward_finite_difference),
        cmocka_unit_test(test_reduce_cpu_fast_bias_backward_equals_reference),
        cmocka_unit_test(test_reduce_cpu_deterministic_across_threads),
        TU_VULKAN_TEST_ENTRIES(test_reduce_vulkan_mean),
        TU_VULKAN_TEST_ENTRIES(test_reduce_vulkan_grad_norm_and_clip_scale),
        TU_VULKAN_TEST_ENTRIES(test_reduce_vulkan_bias_backward),
    };
    TU_RETURN_QUICK(argc, argv, tests, NULL, NULL);
}
