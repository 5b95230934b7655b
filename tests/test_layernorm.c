/* vka_layernorm_forward / vka_layernorm_backward (Ba et al. 2016, eps 1e-5). */
#include "op_util.h"

typedef struct ln_shape { int N, C; } ln_shape;

/* theta = [x (N*C), weight (C), bias (C)] -> out (N*C); mean and rstd (N) if not NULL. */
static void layernorm_ref_full(const ln_shape *s, const double *theta, double *out, double *mean,
                               double *rstd) {
    int N = s->N, C = s->C;
    const double *w = theta + (size_t)N * C, *b = w + C;
    for (int n = 0; n < N; n++) {
        const double *x = theta + (size_t)n * C;
        double m = 0.0, var = 0.0;
        for (int c = 0; c < C; c++) m += x[c];
        m /= C;
        for (int c = 0; c < C; c++) var += (x[c] - m) * (x[c] - m);
        var /= C;
        double r = 1.0 / sqrt(var + 1e-5);
        for (int c = 0; c < C; c++) out[(size_t)n * C + c] = (x[c] - m) * r * w[c] + b[c];
        if (mean) mean[n] = m;
        if (rstd) rstd[n] = r;
    }
}

static void layernorm_ref(void *user, const double *theta, double *out) {
    layernorm_ref_full(user, theta, out, NULL, NULL);
}

/* Forward on ctx from inputs theta; out (N*C) then mean (N) then rstd (N) in one array. */
static float *layernorm_run(vka_context *ctx, ln_shape s, const float *theta) {
    size_t NC = (size_t)s.N * s.C;
    vka_tensor *inp = tu_tensor(ctx, NC, theta), *w = tu_tensor(ctx, (size_t)s.C, theta + NC);
    vka_tensor *b = tu_tensor(ctx, (size_t)s.C, theta + NC + s.C);
    vka_tensor *out = tu_tensor_nan(ctx, NC), *mean = tu_tensor_nan(ctx, (size_t)s.N);
    vka_tensor *rstd = tu_tensor_nan(ctx, (size_t)s.N);
    tu_begin(ctx);
    assert_int_equal(vka_layernorm_forward(ctx, out, mean, rstd, inp, w, b, s.N, s.C),
                     VKA_SUCCESS);
    tu_run(ctx);
    float *res = malloc((NC + 2 * (size_t)s.N) * sizeof *res);
    vka_tensor_read(out, 0, res, NC);
    vka_tensor_read(mean, 0, res + NC, (size_t)s.N);
    vka_tensor_read(rstd, 0, res + NC + s.N, (size_t)s.N);
    vka_tensor *all[] = {inp, w, b, out, mean, rstd};
    for (size_t i = 0; i < TU_LEN(all); i++) vka_tensor_destroy(all[i]);
    return res;
}

static void layernorm_forward_case(vka_context *ctx, ln_shape s, uint64_t seed) {
    size_t NC = (size_t)s.N * s.C, n_theta = NC + 2 * (size_t)s.C, n_res = NC + 2 * (size_t)s.N;
    float *theta = malloc(n_theta * sizeof *theta);
    tu_random(theta, n_theta, seed, 2.0f);
    for (size_t i = 0; i < NC; i++) theta[i] += 10.0f; /* an offset the mean must remove */
    float *got = layernorm_run(ctx, s, theta);
    vka_context *cpu = tu_cpu();
    float *cpu_res = layernorm_run(cpu, s, theta);
    tu_done(cpu);
    double *td = tu_to_double(theta, n_theta), *want = malloc(n_res * sizeof *want);
    layernorm_ref_full(&s, td, want, want + NC, want + NC + s.N);
    tu_assert_close_d("layernorm_forward (cpu backend)", cpu_res, want, n_res, 1e-5, 1e-5);
    tu_assert_close_d("layernorm_forward", got, want, n_res, 1e-5, 1e-5);
    tu_vs_cpu(ctx, "layernorm_forward vs cpu", got, cpu_res, n_res, 1e-5, 1e-5);
    free(theta);
    free(got);
    free(cpu_res);
    free(td);
    free(want);
}

static void test_layernorm_forward_matches_reference(void **state) {
    (void)state;
    vka_context *ctx = tu_cpu();
    layernorm_forward_case(ctx, (ln_shape){5, 7}, 1);
    layernorm_forward_case(ctx, (ln_shape){3, 1000}, 2);
    layernorm_forward_case(ctx, (ln_shape){4, 1}, 3);
    layernorm_forward_case(ctx, (ln_shape){64, 96}, 4);
    tu_done(ctx);
}

/* Backward on ctx: returns what was added to [dinp, dweight, dbias] (random start). */
static float *layernorm_backward_run(vka_context *ctx, ln_shape s, const float *theta,
                                     const float *dout, const float *mean, const float *rstd,
                                     const float *grad0) {
    size_t NC = (size_t)s.N * s.C, n = NC + 2 * (size_t)s.C;
    vka_tensor *inp = tu_tensor(ctx, NC, theta), *w = tu_tensor(ctx, (size_t)s.C, theta + NC);
    vka_tensor *dout_t = tu_tensor(ctx, NC, dout), *mean_t = tu_tensor(ctx, (size_t)s.N, mean);
    vka_tensor *rstd_t = tu_tensor(ctx, (size_t)s.N, rstd), *dinp = tu_tensor(ctx, NC, grad0);
    vka_tensor *dw = tu_tensor(ctx, (size_t)s.C, grad0 + NC);
    vka_tensor *db = tu_tensor(ctx, (size_t)s.C, grad0 + NC + s.C);
    tu_begin(ctx);
    assert_int_equal(vka_layernorm_backward(ctx, dinp, dw, db, dout_t, inp, w, mean_t, rstd_t,
                                            s.N, s.C),
                     VKA_SUCCESS);
    tu_run(ctx);
    float *got = malloc(n * sizeof *got);
    vka_tensor_read(dinp, 0, got, NC);
    vka_tensor_read(dw, 0, got + NC, (size_t)s.C);
    vka_tensor_read(db, 0, got + NC + s.C, (size_t)s.C);
    float *added = tu_added(got, grad0, n);
    free(got);
    vka_tensor *all[] = {inp, w, dout_t, mean_t, rstd_t, dinp, dw, db};
    for (size_t i = 0; i < TU_LEN(all); i++) vka_tensor_destroy(all[i]);
    return added;
}

static void layernorm_backward_case(vka_context *ctx, ln_shape s, uint64_t seed) {
    size_t NC = (size_t)s.N * s.C, n = NC + 2 * (size_t)s.C;
    float *theta = malloc(n * sizeof *theta), *dout = malloc(NC * sizeof *dout);
    float *grad0 = malloc(n * sizeof *grad0);
    tu_random(theta, n, seed, 2.0f);
    tu_random(dout, NC, seed + 1, 1.0f);
    tu_random(grad0, n, seed + 2, 1.0f);
    double *td = tu_to_double(theta, n), *outd = malloc(NC * sizeof *outd);
    double *meand = malloc((size_t)s.N * sizeof *meand);
    double *rstdd = malloc((size_t)s.N * sizeof *rstdd);
    layernorm_ref_full(&s, td, outd, meand, rstdd);
    float *mean = malloc((size_t)s.N * sizeof *mean), *rstd = malloc((size_t)s.N * sizeof *rstd);
    for (int i = 0; i < s.N; i++) {
        mean[i] = (float)meand[i];
        rstd[i] = (float)rstdd[i];
    }
    float *added = layernorm_backward_run(ctx, s, theta, dout, mean, rstd, grad0);
    vka_context *cpu = tu_cpu();
    float *added_cpu = layernorm_backward_run(cpu, s, theta, dout, mean, rstd, grad0);
    tu_done(cpu);
    /* finite differences cost O((N C)^2): large shapes are checked against the CPU backend,
     * which the small ones check against finite differences */
    double *fd = NULL;
    if (NC <= 16384) {
        fd = malloc(n * sizeof *fd);
        tu_fd_grad(layernorm_ref, &s, theta, n, dout, NC, fd);
        tu_assert_close_d("layernorm_backward vs finite differences", added, fd, n, 2e-5, 1e-4);
    }
    tu_vs_cpu(ctx, "layernorm_backward vs cpu", added, added_cpu, n, 1e-5, 1e-4);
    free(theta);
    free(dout);
    free(grad0);
    free(td);
    free(outd);
    free(meand);
    free(rstdd);
    free(mean);
    free(rstd);
    free(added);
    free(added_cpu);
    free(fd);
}

static void test_layernorm_backward_finite_difference(void **state) {
    (void)state;
    vka_context *ctx = tu_cpu();
    layernorm_backward_case(ctx, (ln_shape){5, 7}, 10);
    layernorm_backward_case(ctx, (ln_shape){2, 300}, 11);
    layernorm_backward_case(ctx, (ln_shape){3, 1}, 12);
    layernorm_backward_case(ctx, (ln_shape){70, 3}, 13); /* many rows into dweight/dbias */
    tu_done(ctx);
}

/* The CPU backend's fast kernels (row sums in vector lanes, still in double) against the
 * reference ones: forward out, mean, rstd and backward dinp within the tolerance the GPU is held
 * to, dweight and dbias bit-identical (same order), and the fast results identical on 2 and 3
 * threads; rows of 1 to 1000 columns, no multiple of the vectors, the default model's shape. */
static void fast_matches_reference(vka_cpu_kernels kernels) {
    vka_context *fast = tu_cpu_kernels(kernels, 2), *fast3 = tu_cpu_kernels(kernels, 3);
    vka_context *ref = tu_cpu_kernels(VKA_CPU_KERNELS_REFERENCE, 2);
    const ln_shape shapes[] = {{1, 1}, {5, 7}, {3, 1000}, {33, 129}, {70, 3}, {768, 128},
                               {257, 65}};
    double worst = 0.0;
    for (size_t i = 0; i < TU_LEN(shapes); i++) {
        ln_shape s = shapes[i];
        size_t NC = (size_t)s.N * s.C, n = NC + 2 * (size_t)s.C, n_res = NC + 2 * (size_t)s.N;
        float *theta = malloc(n * sizeof *theta), *dout = malloc(NC * sizeof *dout);
        float *grad0 = malloc(n * sizeof *grad0);
        tu_random(theta, n, 400 + i, 2.0f);
        for (size_t j = 0; j < NC; j++) theta[j] += 10.0f; /* an offset the mean must remove */
        tu_random(dout, NC, 410 + i, 1.0f);
        tu_random(grad0, n, 420 + i, 1.0f);
        float *f = layernorm_run(fast, s, theta), *f3 = layernorm_run(fast3, s, theta);
        float *r = layernorm_run(ref, s, theta);
        char what[120];
        snprintf(what, sizeof what, "%s layernorm_forward N=%d C=%d",
                 vka_context_cpu_kernels(fast), s.N, s.C);
        assert_memory_equal(f, f3, n_res * sizeof(float));
        double d = tu_assert_close(what, f, r, n_res, 1e-5, 1e-5);
        if (d > worst) worst = d;
        /* backward from the reference's statistics */
        const float *mean = r + NC, *rstd = r + NC + s.N;
        float *b = layernorm_backward_run(fast, s, theta, dout, mean, rstd, grad0);
        float *b3 = layernorm_backward_run(fast3, s, theta, dout, mean, rstd, grad0);
        float *br = layernorm_backward_run(ref, s, theta, dout, mean, rstd, grad0);
        snprintf(what, sizeof what, "%s layernorm_backward dinp N=%d C=%d",
                 vka_context_cpu_kernels(fast), s.N, s.C);
        assert_memory_equal(b, b3, n * sizeof(float));
        d = tu_assert_close(what, b, br, NC, 1e-5, 1e-4);
        if (d > worst) worst = d;
        if (memcmp(b + NC, br + NC, 2 * (size_t)s.C * sizeof(float)) != 0)
            fail_msg("%s: dweight or dbias differs from the reference", what);
        free(theta);
        free(dout);
        free(grad0);
        free(f);
        free(f3);
        free(r);
        free(b);
        free(b3);
        free(br);
    }
    print_message("fast layernorm (%s): max |fast - reference| %.3g\n",
                  vka_context_cpu_kernels(fast), worst);
    tu_done(fast);
    tu_done(fast3);
    tu_done(ref);
}

static void test_layernorm_cpu_fast_matches_reference(void **state) {
    (void)state;
    fast_matches_reference(VKA_CPU_KERNELS_FAST);      /* the widest ISA (AVX-512 where there) */
    fast_matches_reference(VKA_CPU_KERNELS_FAST_AVX2); /* and AVX2 */
}

/* Constant rows normalise to 0; [40000..40003] (where E[x^2] - E[x]^2 in float would lose every
 * digit) to [-1.341635, -0.447212, 0.447212, 1.341635]; the backward stays finite. */
static void known_value_cases(vka_context *ctx) {
    float theta[256 + 2 * 256];
    for (int i = 0; i < 256; i++) {
        theta[i] = 1234.0f;
        theta[256 + i] = 1.0f;
        theta[512 + i] = 0.0f;
    }
    float *res = layernorm_run(ctx, (ln_shape){1, 256}, theta);
    for (int i = 0; i < 256; i++)
        if (!(fabsf(res[i]) <= 1e-6f)) fail_msg("constant row: out[%d] = %g, not 0", i, res[i]);
    assert_true(fabsf(res[256] - 1234.0f) <= 1e-3f); /* mean */
    free(res);

    const float big[4 + 8] = {40000, 40001, 40002, 40003, 1, 1, 1, 1, 0, 0, 0, 0};
    const float want[4] = {-1.341635f, -0.447212f, 0.447212f, 1.341635f};
    res = layernorm_run(ctx, (ln_shape){1, 4}, big);
    tu_assert_close("layernorm [40000..40003]", res, want, 4, 1e-6, 0.0);
    float dout[4] = {0.3f, -1.0f, 0.5f, 2.0f}, grad0[12] = {0};
    float *added = layernorm_backward_run(ctx, (ln_shape){1, 4}, big, dout, res + 4, res + 5,
                                          grad0);
    tu_assert_finite("layernorm backward [40000..40003]", added, 12);
    free(added);
    free(res);
}

static void test_layernorm_known_values(void **state) {
    (void)state;
    vka_context *ctx = tu_cpu();
    known_value_cases(ctx);
    tu_done(ctx);
}

/* --- Vulkan, both kernel variants ------------------------------------------------------- */

/* Rows from 1 to longer than a workgroup, and enough rows to cross column blocks. C a
 * multiple of 4 takes the CPU-type kernels' texel builds on lavapipe (vk_ops_layernorm.c),
 * other C their storage-buffer paths. */
static void vulkan_forward_cases(vka_context *ctx) {
    const ln_shape shapes[] = {{5, 7},    {4, 1},    {6, 3},    {9, 127},  {3, 769}, {2, 5000},
                               {300, 96}, {12, 128}, {3, 4},    {70, 36},  {2, 4996}};
    for (size_t i = 0; i < TU_LEN(shapes); i++) layernorm_forward_case(ctx, shapes[i], 20 + i);
}

/* dweight/dbias of the texel build: column quads 1 to past a workgroup's 8 ({130, 36}: 9),
 * rows not a multiple of the 8 row lanes times 4, blocks of rows ({200, 128} at 64 KiB). */
static void vulkan_backward_cases(vka_context *ctx) {
    const ln_shape shapes[] = {{5, 7},    {3, 1},  {70, 3},   {4, 127},   {2, 769},
                               {1, 5000}, {130, 33}, {24, 128}, {1, 4},   {130, 36},
                               {301, 8},  {2, 4996}, {200, 128}};
    for (size_t i = 0; i < TU_LEN(shapes); i++) layernorm_backward_case(ctx, shapes[i], 30 + i);
}

/* 256 equal rows of 1234 values (or 96 of 128: the texel build) normalise to exactly 0
 * (two-pass variance), and the backward stays finite; dweight/dbias are summed in the same
 * order on every run. */
static void equal_rows_case(vka_context *ctx, ln_shape s) {
    size_t NC = (size_t)s.N * s.C, n = NC + 2 * (size_t)s.C;
    float *theta = calloc(n, sizeof *theta);
    for (size_t i = 0; i < NC; i++) theta[i] = 1234.5f;
    tu_random(theta + NC, 2 * (size_t)s.C, 3, 1.0f);
    float *res = layernorm_run(ctx, s, theta);
    for (size_t i = 0; i < NC; i++)
        if (!(fabsf(res[i] - theta[NC + s.C + i % s.C]) <= 1e-6f))
            fail_msg("equal rows: out[%zu] = %.9g, want the bias %.9g", i, res[i],
                     theta[NC + s.C + i % s.C]);
    for (int r = 0; r < s.N; r++) assert_true(res[NC + r] == 1234.5f);
    float *dout = malloc(NC * sizeof *dout), *grad0 = calloc(n, sizeof *grad0);
    tu_random(dout, NC, 4, 1.0f);
    float *a = layernorm_backward_run(ctx, s, theta, dout, res + NC, res + NC + s.N, grad0);
    float *b = layernorm_backward_run(ctx, s, theta, dout, res + NC, res + NC + s.N, grad0);
    tu_assert_finite("equal rows backward", a, n);
    assert_memory_equal(a, b, n * sizeof *a);
    free(theta);
    free(res);
    free(dout);
    free(grad0);
    free(a);
    free(b);
}

static void equal_rows_cases(vka_context *ctx) {
    equal_rows_case(ctx, (ln_shape){256, 1234});
    equal_rows_case(ctx, (ln_shape){96, 128});
}

TU_VULKAN_TESTS(test_layernorm_forward_vulkan_matches_cpu, vulkan_forward_cases)
TU_VULKAN_TESTS(test_layernorm_backward_vulkan_matches_cpu, vulkan_backward_cases)
TU_VULKAN_TESTS(test_layernorm_vulkan_known_values, known_value_cases)
TU_VULKAN_TESTS(test_layernorm_vulkan_equal_rows_deterministic, equal_rows_cases)

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layernorm_forward_matches_reference),
        cmocka_unit_test(test_layernorm_backward_finite_difference),
        cmocka_unit_test(test_layernorm_cpu_fast_matches_reference),
        cmocka_unit_test(test_layernorm_known_values),
        TU_VULKAN_TEST_ENTRIES(test_layernorm_forward_vulkan_matches_cpu),
        TU_VULKAN_TEST_ENTRIES(test_layernorm_backward_vulkan_matches_cpu),
        TU_VULKAN_TEST_ENTRIES(test_layernorm_vulkan_known_values),
        TU_VULKAN_TEST_ENTRIES(test_layernorm_vulkan_equal_rows_deterministic),
    };
    TU_RETURN_QUICK(argc, argv, tests, NULL, NULL);
}
