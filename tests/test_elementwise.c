/* vka_fill, vka_copy, vka_residual_forward, vka_add_inplace. */
#include "op_util.h"

/* All four ops on n elements, against their definitions. */
static void elementwise_case(vka_context *ctx, size_t n, uint64_t seed) {
    float *a_h, *b_h;
    vka_tensor *a = tu_tensor_random(ctx, n, seed, 3.0f, &a_h);
    vka_tensor *b = tu_tensor_random(ctx, n, seed + 1, 3.0f, &b_h);
    vka_tensor *filled = tu_tensor_nan(ctx, n), *copied = tu_tensor_nan(ctx, n + 3);
    vka_tensor *sum = tu_tensor_nan(ctx, n), *acc = tu_tensor(ctx, n, a_h);
    tu_begin(ctx);
    assert_int_equal(vka_fill(ctx, filled, -2.5f), VKA_SUCCESS);
    assert_int_equal(vka_copy(ctx, copied, b, n), VKA_SUCCESS); /* the last 3 stay NaN */
    assert_int_equal(vka_residual_forward(ctx, sum, a, b, n), VKA_SUCCESS);
    assert_int_equal(vka_add_inplace(ctx, acc, b, n), VKA_SUCCESS);
    tu_run(ctx);
    float *f = tu_read(filled, n), *c = tu_read(copied, n + 3), *s = tu_read(sum, n);
    float *ac = tu_read(acc, n), *want = malloc(n * sizeof *want);
    for (size_t i = 0; i < n; i++) want[i] = -2.5f;
    tu_assert_close("fill", f, want, n, 0.0, 0.0);
    tu_assert_close("copy", c, b_h, n, 0.0, 0.0);
    for (int i = 0; i < 3; i++) assert_true(isnan(c[n + (size_t)i]));
    for (size_t i = 0; i < n; i++) want[i] = a_h[i] + b_h[i]; /* float add: exact on any device */
    tu_assert_close("residual_forward", s, want, n, 0.0, 0.0);
    tu_assert_close("add_inplace", ac, want, n, 0.0, 0.0);
    free(f);
    free(c);
    free(s);
    free(ac);
    free(want);
    free(a_h);
    free(b_h);
    vka_tensor *all[] = {a, b, filled, copied, sum, acc};
    for (size_t i = 0; i < TU_LEN(all); i++) vka_tensor_destroy(all[i]);
}

static void test_elementwise_matches_definition(void **state) {
    (void)state;
    vka_context *ctx = tu_cpu();
    elementwise_case(ctx, 1, 1);
    elementwise_case(ctx, 1000, 2);
    elementwise_case(ctx, 65537, 3);
    tu_done(ctx);
}

/* 16,776,961 = 4095^2 elements: more workgroups than one dispatch dimension allows (65,535) on a
 * GPU. Every element must be right, the last included. a[i] = i is exact in float (< 2^24). */
static void huge_case(vka_context *ctx) {
    const size_t n = 16776961;
    float *x = malloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++) x[i] = (float)i;
    vka_tensor *a = tu_tensor(ctx, n, x), *ones = tu_tensor(ctx, n, NULL);
    vka_tensor *out = tu_tensor_nan(ctx, n);
    tu_begin(ctx);
    assert_int_equal(vka_fill(ctx, ones, 1.0f), VKA_SUCCESS);
    assert_int_equal(vka_residual_forward(ctx, out, a, ones, n), VKA_SUCCESS); /* i + 1 */
    assert_int_equal(vka_add_inplace(ctx, out, ones, n), VKA_SUCCESS);         /* i + 2 */
    tu_run(ctx);
    assert_int_equal(vka_tensor_read(out, 0, x, n), VKA_SUCCESS);
    for (size_t i = 0; i < n; i++)
        if (x[i] != (float)(i + 2)) fail_msg("element %zu is %.9g, want %zu", i, x[i], i + 2);
    assert_true(x[n - 1] == 16776962.0f);
    free(x);
    vka_tensor_destroy(a);
    vka_tensor_destroy(ones);
    vka_tensor_destroy(out);
}

static void test_elementwise_huge_dispatch_reaches_last_element(void **state) {
    (void)state;
    vka_context *ctx = tu_cpu();
    huge_case(ctx);
    tu_done(ctx);
}

/* Ten dependent steps x <- 2x + 1 (x += x; x += ones) in one graph: 0 -> 1023 everywhere, which
 * needs each op to see the previous one's writes (barriers on a GPU). */
static void dependent_steps_n(vka_context *ctx, size_t n) {
    vka_tensor *x = tu_tensor(ctx, n, NULL), *ones = tu_tensor_nan(ctx, n);
    tu_begin(ctx);
    assert_int_equal(vka_fill(ctx, ones, 1.0f), VKA_SUCCESS);
    for (int step = 0; step < 10; step++) {
        assert_int_equal(vka_add_inplace(ctx, x, x, n), VKA_SUCCESS);
        assert_int_equal(vka_add_inplace(ctx, x, ones, n), VKA_SUCCESS);
    }
    tu_run(ctx);
    float *got = tu_read(x, n);
    for (size_t i = 0; i < n; i++)
        if (got[i] != 1023.0f) fail_msg("element %zu is %.9g, want 1023", i, got[i]);
    free(got);
    vka_tensor_destroy(x);
    vka_tensor_destroy(ones);
}

static void dependent_steps_case(vka_context *ctx) { dependent_steps_n(ctx, 100003); }

static void test_elementwise_dependent_steps_in_one_graph(void **state) {
    (void)state;
    vka_context *ctx = tu_cpu();
    dependent_steps_case(ctx);
    tu_done(ctx);
}

static void test_elementwise_gpu_matches_definition(void **state) {
    (void)state;
    vka_context *ctx = tu_gpu();
    elementwise_case(ctx, 1, 1);
    elementwise_case(ctx, 1000, 2);
    elementwise_case(ctx, 65537, 3);
    tu_done(ctx);
}

static void test_elementwise_gpu_huge_dispatch_reaches_last_element(void **state) {
    (void)state;
    vka_context *ctx = tu_gpu();
    huge_case(ctx);
    tu_done(ctx);
}

static void test_elementwise_gpu_dependent_steps_in_one_graph(void **state) {
    (void)state;
    vka_context *ctx = tu_gpu();
    dependent_steps_case(ctx);
    tu_done(ctx);
}

/* Lengths that take each path of the CPU-type kernels (shaders/elementwise.glsl): multiples of
 * 4 (vec4s, through texel views on lavapipe; 5140 fills five workgroups and part of a sixth;
 * x += x reads dst and src through two views of the same bytes) and not (one element per
 * invocation). */
static void vulkan_cases(vka_context *ctx) {
    elementwise_case(ctx, 4, 1);
    elementwise_case(ctx, 1003, 2);
    elementwise_case(ctx, 5140, 3);
    elementwise_case(ctx, 65536, 4);
    dependent_steps_n(ctx, 100004);
    dependent_steps_n(ctx, 1001);
}
TU_VULKAN_TESTS(test_elementwise_vulkan_matches_definition, vulkan_cases)

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_elementwise_matches_definition),
        cmocka_unit_test(test_elementwise_huge_dispatch_reaches_last_element),
        cmocka_unit_test(test_elementwise_dependent_steps_in_one_graph),
        cmocka_unit_test(test_elementwise_gpu_matches_definition),
        cmocka_unit_test(test_elementwise_gpu_huge_dispatch_reaches_last_element),
        cmocka_unit_test(test_elementwise_gpu_dependent_steps_in_one_graph),
        TU_VULKAN_TEST_ENTRIES(test_elementwise_vulkan_matches_definition),
    };
    TU_RETURN_QUICK(argc, argv, tests, NULL, NULL);
}
