/* vka_matmul: batched, transposed, strided, with bias, alpha and accumulate. */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include "op_util.h"

typedef struct mm_case {
    int M, N, K, batch; /* batch 0 = 1 */
    bool ta, tb, bias, accumulate;
    float alpha;        /* 0 = 1 */
    size_t pad_a, pad_b, pad_out; /* extra elements between batches (strided when > 0) */
} mm_case;

typedef struct mm_data {
    size_t n_a, n_b, n_out;
    size_t sa, sb, so; /* strides (elements between batches) */
    float *a, *b, *bias, *out0; /* inputs, and out before the op */
} mm_data;

static mm_data mm_make(const mm_case *c, uint64_t seed) {
    int batch = c->batch ? c->batch : 1;
    mm_data d;
    d.sa = (size_t)c->M * c->K + c->pad_a;
    d.sb = (size_t)c->K * c->N + c->pad_b;
    d.so = (size_t)c->M * c->N + c->pad_out;
    d.n_a = d.sa * batch;
    d.n_b = d.sb * batch;
    d.n_out = d.so * batch;
    d.a = malloc(d.n_a * sizeof(float));
    d.b = malloc(d.n_b * sizeof(float));
    d.bias = malloc((size_t)c->N * sizeof(float));
    d.out0 = malloc(d.n_out * sizeof(float));
    tu_random(d.a, d.n_a, seed, 1.0f);
    tu_random(d.b, d.n_b, seed + 1, 1.0f);
    tu_random(d.bias, (size_t)c->N, seed + 2, 1.0f);
    tu_random(d.out0, d.n_out, seed + 3, 1.0f);
    return d;
}

static void mm_free(mm_data *d) {
    free(d->a);
    free(d->b);
    free(d->bias);
    free(d->out0);
}

/* Run the case on ctx; returns out (n_out). Without accumulate, out starts as NaN so unwritten
 * elements show (padding between batches must keep out0 either way, checked by the caller). */
static float *mm_run(vka_context *ctx, const mm_case *c, const mm_data *d) {
    vka_tensor *a = tu_tensor(ctx, d->n_a, d->a), *b = tu_tensor(ctx, d->n_b, d->b);
    vka_tensor *bias = c->bias ? tu_tensor(ctx, (size_t)c->N, d->bias) : NULL;
    vka_tensor *out = tu_tensor(ctx, d->n_out, d->out0);
    if (!c->accumulate) { /* NaN in every matrix element (padding keeps out0) */
        float *nan_out = malloc(d->n_out * sizeof *nan_out);
        memcpy(nan_out, d->out0, d->n_out * sizeof *nan_out);
        for (int bi = 0; bi < (c->batch ? c->batch : 1); bi++)
            for (size_t i = 0; i < (size_t)c->M * c->N; i++) nan_out[bi * d->so + i] = NAN;
        vka_tensor_write(out, 0, nan_out, d->n_out);
        free(nan_out);
    }
    vka_matmul_desc desc = {.out = out, .a = a, .b = b, .bias = bias, .M = c->M, .N = c->N,
                            .K = c->K, .batch = c->batch, .trans_a = c->ta, .trans_b = c->tb,
                            .alpha = c->alpha, .accumulate = c->accumulate};
    if (c->pad_a) desc.stride_a = d->sa;
    if (c->pad_b) desc.stride_b = d->sb;
    if (c->pad_out) desc.stride_out = d->so;
    tu_begin(ctx);
    assert_int_equal(vka_matmul(ctx, &desc), VKA_SUCCESS);
    tu_run(ctx);
    float *got = tu_read(out, d->n_out);
    vka_tensor_destroy(a);
    vka_tensor_destroy(b);
    vka_tensor_destroy(bias);
    vka_tensor_destroy(out);
    return got;
}

/* The double reference, including the untouched padding. */
static double *mm_ref(const mm_case *c, const mm_data *d) {
    double *want = malloc(d->n_out * sizeof *want);
    for (size_t i = 0; i < d->n_out; i++) want[i] = d->out0[i];
    double alpha = c->alpha != 0.0f ? c->alpha : 1.0;
    for (int bi = 0; bi < (c->batch ? c->batch : 1); bi++) {
        const float *a = d->a + bi * d->sa, *b = d->b + bi * d->sb;
        for (int i = 0; i < c->M; i++)
            for (int j = 0; j < c->N; j++) {
                double s = 0.0;
                for (int k = 0; k < c->K; k++) {
                    double x = c->ta ? a[(size_t)k * c->M + i] : a[(size_t)i * c->K + k];
                    double y = c->tb ? b[(size_t)j * c->K + k] : b[(size_t)k * c->N + j];
                    s += x * y;
                }
                double v = alpha * s + (c->bias ? d->bias[j] : 0.0);
                double *o = &want[bi * d->so + (size_t)i * c->N + j];
                *o = c->accumulate ? *o + v : v;
            }
    }
    return want;
}

/* Largest |got - want| (NaN counts as infinite). */
static double max_diff(const float *got, const float *want, size_t n) {
    double m = 0.0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - (double)want[i]);
        if (isnan(got[i]) != isnan(want[i])) d = INFINITY;
        if (d > m) m = d;
    }
    return m;
}

static void matmul_case(vka_context *ctx, mm_case c, uint64_t seed) {
    mm_data d = mm_make(&c, seed);
    float *got = mm_run(ctx, &c, &d);
    vka_context *cpu = tu_cpu();
    float *cpu_out = mm_run(cpu, &c, &d);
    tu_done(cpu);
    double *want = mm_ref(&c, &d);
    char what[160];
    snprintf(what, sizeof what, "matmul M=%d N=%d K=%d batch=%d ta=%d tb=%d bias=%d acc=%d",
             c.M, c.N, c.K, c.batch, c.ta, c.tb, c.bias, c.accumulate);
    /* float sums of K products of values in [-1, 1]: error grows like K * 2^-24 */
    double atol = 1e-6 * (c.K + 4);
    tu_assert_close_d(what, cpu_out, want, d.n_out, atol, 1e-6);
    double vs_ref = tu_assert_close_d(what, got, want, d.n_out, atol, 1e-6);
    tu_vs_cpu(ctx, what, got, cpu_out, d.n_out, atol, 1e-6);
    if (!tu_is_cpu(ctx))
        print_message("%s: max |diff| %.3g vs double, %.3g vs CPU backend\n", what, vs_ref,
                      max_diff(got, cpu_out, d.n_out));
    free(got);
    free(cpu_out);
    free(want);
    mm_free(&d);
}

/* part: -1 every case; 0 the untransposed ones and the several-tile shape in every transpose;
 * 1 the other shapes transposed. On Vulkan each (transpose, tile, vec4 access) is a pipeline
 * of its own, seconds to build each on lavapipe with a cold shader cache: the quick group
 * runs part 0, the exhaustive group part 1 (tests/CMakeLists.txt). */
static void transpose_cases_of(vka_context *ctx, int part) {
    for (int t = 0; t < 4; t++) {
        bool ta = t & 1, tb = t & 2;
        bool run = part < 0 || (t != 0) == (part == 1);
        if (run) {
            matmul_case(ctx, (mm_case){.M = 65, .N = 33, .K = 17, .ta = ta, .tb = tb}, 10 + t);
            matmul_case(ctx, (mm_case){.M = 1, .N = 7, .K = 5, .ta = ta, .tb = tb}, 20 + t);
            /* One row against many columns: a decode step's matrix-vector products (the
             * CPU-type variant's one-row tile). */
            matmul_case(ctx,
                        (mm_case){.M = 1, .N = 301, .K = 77, .ta = ta, .tb = tb, .bias = true},
                        25 + t);
            matmul_case(ctx, (mm_case){.M = 9, .N = 1, .K = 300, .ta = ta, .tb = tb}, 30 + t);
            matmul_case(ctx, (mm_case){.M = 6, .N = 10, .K = 1, .ta = ta, .tb = tb}, 40 + t);
        }
        /* several tiles and K blocks, edges not multiples of anything */
        if (part <= 0)
            matmul_case(ctx, (mm_case){.M = 131, .N = 77, .K = 261, .ta = ta, .tb = tb},
                        50 + t);
    }
}
static void transpose_cases(vka_context *ctx) { transpose_cases_of(ctx, -1); }
static void transpose_quick_cases(vka_context *ctx) { transpose_cases_of(ctx, 0); }
static void transpose_more_cases(vka_context *ctx) { transpose_cases_of(ctx, 1); }

static void test_matmul_transposes_and_awkward_shapes(void **state) {
    (void)state;
    vka_context *ctx = tu_cpu();
    transpose_cases(ctx);
    tu_done(ctx);
}

static void epilogue_cases(vka_context *ctx) {
    matmul_case(ctx, (mm_case){.M = 65, .N = 33, .K = 17, .bias = true}, 60);
    matmul_case(ctx, (mm_case){.M = 65, .N = 33, .K = 17, .accumulate = true}, 61);
    matmul_case(ctx, (mm_case){.M = 65, .N = 33, .K = 17, .alpha = 0.25f}, 62);
    matmul_case(ctx, (mm_case){.M = 20, .N = 70, .K = 30, .bias = true, .accumulate = true,
                               .alpha = -1.5f, .tb = true}, 63);
}

static void test_matmul_bias_alpha_accumulate(void **state) {
    (void)state;
    vka_context *ctx = tu_cpu();
    epilogue_cases(ctx);
    tu_done(ctx);
}

/* Shapes whose pipelines the quick group builds anyway (6 x 10 x 1 and 131 x 77 x 261 of
 * transpose_cases_of: the same tiles and vec4 access), with batches packed and padded. */
static void batch_cases(vka_context *ctx) {
    matmul_case(ctx, (mm_case){.M = 7, .N = 10, .K = 6, .batch = 4}, 70); /* packed */
    matmul_case(ctx, (mm_case){.M = 20, .N = 35, .K = 9, .batch = 3, .pad_a = 3, .pad_b = 5,
                               .pad_out = 11, .ta = true}, 71);
    matmul_case(ctx, (mm_case){.M = 33, .N = 37, .K = 65, .batch = 3, .pad_a = 1, .pad_b = 2,
                               .pad_out = 3, .tb = true, .bias = true, .accumulate = true},
                72);
}

static void test_matmul_batched_strided(void **state) {
    (void)state;
    vka_context *ctx = tu_cpu();
    batch_cases(ctx);
    tu_done(ctx);
}

/* ones(200x200) . ones(200x200) = 200 exactly: sums of integers are exact in float. */
static void ones_case(vka_context *ctx) {
    const size_t n = 200 * 200;
    vka_tensor *a = tu_tensor(ctx, n, NULL), *out = tu_tensor_nan(ctx, n);
    tu_begin(ctx);
    assert_int_equal(vka_fill(ctx, a, 1.0f), VKA_SUCCESS);
    vka_matmul_desc d = {.out = out, .a = a, .b = a, .M = 200, .N = 200, .K = 200};
    assert_int_equal(vka_matmul(ctx, &d), VKA_SUCCESS);
    tu_run(ctx);
    float *got = tu_read(out, n);
    for (size_t i = 0; i < n; i++)
        if (got[i] != 200.0f) fail_msg("element %zu is %.9g, not 200", i, got[i]);
    free(got);
    vka_tensor_destroy(a);
    vka_tensor_destroy(out);
}

static void test_matmul_ones_exact(void **state) {
    (void)state;
    vka_context *ctx = tu_cpu();
    ones_case(ctx);
    tu_done(ctx);
}

/* The CPU path is the one whose training is reproducible run to run and across --resume:
 * results must not depend on the number of threads. */
static void test_matmul_cpu_deterministic_across_threads(void **state) {
    (void)state;
    mm_case c = {.M = 150, .N = 90, .K = 200, .batch = 2, .tb = true, .bias = true};
    mm_data d = mm_make(&c, 80);
    vka_context *one = tu_cpu_threads(1), *three = tu_cpu_threads(3);
    float *x = mm_run(one, &c, &d), *y = mm_run(three, &c, &d);
    assert_memory_equal(x, y, d.n_out * sizeof(float));
    tu_done(one);
    tu_done(three);
    free(x);
    free(y);
    mm_free(&d);
}

/* A CPU context with the given kernels (vka_context_desc.cpu_kernels). */
static vka_context *cpu_kernels(vka_cpu_kernels kernels, int threads) {
    vka_context_desc d = {.backend = VKA_BACKEND_CPU, .cpu_kernels = kernels,
                          .cpu_threads = threads, .log = tu_log};
    vka_context *ctx = NULL;
    if (vka_context_create(&d, &ctx) != VKA_SUCCESS)
        fail_msg("CPU context: %s", vka_last_error(ctx));
    return ctx;
}

/* The fast kernels (micro-kernels for the CPU's widest ISA, fused multiply-adds) against the
 * reference kernels and the double loop, on shapes that are multiples of no tile (MR 6 or 8, NR
 * 16 or 32, 96 x 128 tiles, K blocks of 128), one row or column, K of 1 and K long, every
 * transpose, batches with padded strides, and the epilogue; both within the tolerance the GPU
 * is held to, and the fast one deterministic across thread counts. */
static void fast_matches_reference(vka_cpu_kernels kernels) {
    vka_context *fast = cpu_kernels(kernels, 2);
    vka_context *fast3 = cpu_kernels(kernels, 3);
    vka_context *ref = cpu_kernels(VKA_CPU_KERNELS_REFERENCE, 2);
    const char *kind = vka_context_cpu_kernels(fast);
    assert_non_null(kind);
    assert_string_equal(vka_context_cpu_kernels(ref), "reference");
    assert_true(strncmp(kind, "fast", 4) == 0);
    const mm_case shapes[] = {
        {.M = 1, .N = 1, .K = 1},
        {.M = 1, .N = 301, .K = 77, .bias = true},
        {.M = 97, .N = 1, .K = 129},
        {.M = 7, .N = 33, .K = 1},
        {.M = 131, .N = 161, .K = 257},   /* 2 x 2 tiles, 3 K blocks, ragged everywhere */
        {.M = 29, .N = 45, .K = 3001},    /* K long */
        {.M = 193, .N = 129, .K = 130, .bias = true, .accumulate = true, .alpha = -0.75f},
        {.M = 37, .N = 41, .K = 67, .batch = 3, .pad_a = 5, .pad_b = 3, .pad_out = 7,
         .bias = true, .accumulate = true},
    };
    double worst = 0.0;
    for (size_t s = 0; s < TU_LEN(shapes); s++)
        for (int t = 0; t < 4; t++) {
            mm_case c = shapes[s];
            c.ta = t & 1;
            c.tb = t & 2;
            mm_data d = mm_make(&c, 200 + 10 * s + (uint64_t)t);
            float *x = mm_run(fast, &c, &d), *x3 = mm_run(fast3, &c, &d);
            float *y = mm_run(ref, &c, &d);
            double *want = mm_ref(&c, &d);
            char what[160];
            snprintf(what, sizeof what, "fast matmul M=%d N=%d K=%d batch=%d ta=%d tb=%d", c.M,
                     c.N, c.K, c.batch, c.ta, c.tb);
            double atol = 1e-6 * (c.K + 4);
            tu_assert_close_d(what, x, want, d.n_out, atol, 1e-6);
            tu_assert_close_d(what, y, want, d.n_out, atol, 1e-6);
            assert_memory_equal(x, x3, d.n_out * sizeof(float));
            double diff = max_diff(x, y, d.n_out);
            if (diff > atol) fail_msg("%s: max |fast - reference| %.3g > %.3g", what, diff, atol);
            if (diff > worst) worst = diff;
            free(x);
            free(x3);
            free(y);
            free(want);
            mm_free(&d);
        }
    print_message("fast matmul (%s): max |fast - reference| %.3g\n", kind, worst);
    tu_done(fast);
    tu_done(fast3);
    tu_done(ref);
}

static void test_matmul_cpu_fast_matches_reference(void **state) {
    (void)state;
    fast_matches_reference(VKA_CPU_KERNELS_FAST);     /* the widest ISA (AVX-512 where there) */
    fast_matches_reference(VKA_CPU_KERNELS_FAST_AVX2); /* and the AVX2+FMA micro-kernel */
}

/* out rows i0 .. i0 + m of a product computed with rows [0, M) of op(A) (A stored (M, K), or
 * (K, M) when ta): the few-row path runs below 5 rows, the tiled kernel from 5 rows on. */
static float *rows_of_product(vka_context *ctx, const float *a_all, int M_all, int i0, int m,
                              const float *b, const float *bias, const float *out0, int N, int K,
                              bool ta, bool tb, float alpha, bool accumulate) {
    float *a = malloc((size_t)m * K * sizeof *a);
    for (int i = 0; i < m; i++)
        for (int k = 0; k < K; k++)
            a[ta ? (size_t)k * m + i : (size_t)i * K + k] =
                a_all[ta ? (size_t)k * M_all + i0 + i : (size_t)(i0 + i) * K + k];
    vka_tensor *ta_t = tu_tensor(ctx, (size_t)m * K, a), *tb_t = tu_tensor(ctx, (size_t)K * N, b);
    vka_tensor *bias_t = bias ? tu_tensor(ctx, (size_t)N, bias) : NULL;
    vka_tensor *out = tu_tensor(ctx, (size_t)m * N, out0 + (size_t)i0 * N);
    vka_matmul_desc desc = {.out = out, .a = ta_t, .b = tb_t, .bias = bias_t, .M = m, .N = N,
                            .K = K, .trans_a = ta, .trans_b = tb, .alpha = alpha,
                            .accumulate = accumulate};
    tu_begin(ctx);
    assert_int_equal(vka_matmul(ctx, &desc), VKA_SUCCESS);
    tu_run(ctx);
    float *got = tu_read(out, (size_t)m * N);
    vka_tensor_destroy(ta_t);
    vka_tensor_destroy(tb_t);
    vka_tensor_destroy(bias_t);
    vka_tensor_destroy(out);
    free(a);
    return got;
}

/* The fast kernels' few-row path (M <= 4: decode steps; op(b) read in place, gathered where
 * strided) gives the tiled micro-kernel's bits: rows 0..m of a product of m rows equal rows
 * 0..m of the same product with 9 rows, for every transpose, N past a 256-column block and
 * not a multiple of 16, K past a 128 block, with bias, alpha and accumulate; both ISAs. */
static void test_matmul_cpu_few_rows_equal_tiled(void **state) {
    (void)state;
    const vka_cpu_kernels kinds[2] = {VKA_CPU_KERNELS_FAST, VKA_CPU_KERNELS_FAST_AVX2};
    const int M_all = 9, N = 301, K = 133;
    float *a = malloc((size_t)M_all * K * sizeof *a), *b = malloc((size_t)K * N * sizeof *b);
    float *bias = malloc((size_t)N * sizeof *bias), *out0 = malloc((size_t)M_all * N * sizeof *out0);
    tu_random(a, (size_t)M_all * K, 41, 1.0f);
    tu_random(b, (size_t)K * N, 42, 1.0f);
    tu_random(bias, (size_t)N, 43, 1.0f);
    tu_random(out0, (size_t)M_all * N, 44, 1.0f);
    for (int kind = 0; kind < 2; kind++) {
        vka_context *ctx = cpu_kernels(kinds[kind], 2);
        for (int t = 0; t < 8; t++) {
            bool ta = t & 1, tb = t & 2, epi = t & 4;
            float alpha = epi ? -0.5f : 1.0f;
            float *all = rows_of_product(ctx, a, M_all, 0, M_all, b, epi ? bias : NULL, out0, N, K,
                                         ta, tb, alpha, epi);
            for (int m = 1; m <= 4; m++) {
                float *few = rows_of_product(ctx, a, M_all, 0, m, b, epi ? bias : NULL, out0, N,
                                             K, ta, tb, alpha, epi);
                if (memcmp(few, all, (size_t)m * N * sizeof *few) != 0)
                    fail_msg("%s: %d rows differ from the tiled kernel's (ta=%d tb=%d epilogue=%d)",
                             vka_context_cpu_kernels(ctx), m, ta, tb, epi);
                free(few);
            }
            free(all);
        }
        tu_done(ctx);
    }
    free(a);
    free(b);
    free(bias);
    free(out0);
}

/* The shapes of the GPT's products (default model: B*T = 768, C = 128, NH = 4, T = 64,
 * HS = 32), forward and backward, as the model records them. */
static void gpt_shape_cases(vka_context *ctx) {
    const int BT = 768, C = 128, T = 64, HS = 32, BNH = 48;
    /* linear forward: out (BT, OC) = inp (BT, C) . W (OC, C)^T + bias */
    matmul_case(ctx, (mm_case){.M = BT, .N = 3 * C, .K = C, .tb = true, .bias = true}, 100);
    matmul_case(ctx, (mm_case){.M = BT, .N = C, .K = 4 * C, .tb = true, .bias = true}, 101);
    /* linear backward: dinp (BT, C) = dout (BT, OC) . W (OC, C); dW (OC, C) += dout^T . inp */
    matmul_case(ctx, (mm_case){.M = BT, .N = C, .K = 3 * C}, 102);
    matmul_case(ctx, (mm_case){.M = 3 * C, .N = C, .K = BT, .ta = true, .accumulate = true}, 103);
    /* attention: att = q . k^T (scaled), y = att . v, and their gradients */
    matmul_case(ctx, (mm_case){.M = T, .N = T, .K = HS, .batch = BNH, .tb = true,
                               .alpha = 0.1767767f}, 104);
    matmul_case(ctx, (mm_case){.M = T, .N = HS, .K = T, .batch = BNH}, 105);
    matmul_case(ctx, (mm_case){.M = T, .N = HS, .K = T, .batch = BNH, .ta = true,
                               .accumulate = true}, 106);
}

/* A long K (error growth, many k steps) and shapes around the CPU variant's vec4 paths:
 * K, M or N multiples of 4 with edges that are not, strides that are (pad 4) or are not. */
static void long_k_and_vec4_cases(vka_context *ctx) {
    for (int t = 0; t < 4; t++) {
        bool ta = t & 1, tb = t & 2;
        matmul_case(ctx, (mm_case){.M = 21, .N = 13, .K = 5000, .ta = ta, .tb = tb}, 110 + t);
        matmul_case(ctx, (mm_case){.M = 131, .N = 76, .K = 260, .ta = ta, .tb = tb}, 120 + t);
        matmul_case(ctx, (mm_case){.M = 132, .N = 77, .K = 261, .ta = ta, .tb = tb}, 130 + t);
        matmul_case(ctx, (mm_case){.M = 36, .N = 20, .K = 44, .batch = 3, .pad_a = 4,
                                   .pad_b = 8, .pad_out = 4, .ta = ta, .tb = tb, .bias = true},
                    140 + t);
    }
}

/* Enough output tiles for the GPU variant's 128 x 128 (8 x 8 per invocation) and 64 x 64
 * configurations, with partial edge tiles in every direction. */
static void big_tile_cases(vka_context *ctx) {
    for (int t = 0; t < 4; t++) {
        bool ta = t & 1, tb = t & 2;
        matmul_case(ctx, (mm_case){.M = 129, .N = 130, .K = 37, .batch = 32, .ta = ta, .tb = tb,
                                   .bias = t == 1, .accumulate = t == 2}, 170 + t);
        matmul_case(ctx, (mm_case){.M = 65, .N = 63, .K = 21, .batch = 66, .ta = ta, .tb = tb},
                    180 + t);
    }
}

/* More workgroups than maxComputeWorkGroupCount[0] (65,535 on many devices): the grid is
 * folded into y and every batch must still be computed once. Run with the variant the device
 * calls for: both take their tile from the same group index, and 70,000 workgroups of the GPU
 * variant (barriers) would take half a minute on lavapipe. */
static void test_matmul_vulkan_folded_grid(void **state) {
    (void)state;
    vka_context *ctx = tu_gpu();
    matmul_case(ctx, (mm_case){.M = 2, .N = 3, .K = 2, .batch = 70000, .tb = true}, 150);
    tu_done(ctx);
}

/* The same op twice gives the same bits (fixed summation order); a tile and vec4 access the
 * quick group builds anyway (131 x 77 x 261, A transposed). */
static void deterministic_case(vka_context *ctx) {
    mm_case c = {.M = 100, .N = 90, .K = 300, .batch = 2, .ta = true, .bias = true, .pad_a = 1};
    mm_data d = mm_make(&c, 160);
    float *x = mm_run(ctx, &c, &d), *y = mm_run(ctx, &c, &d);
    assert_memory_equal(x, y, d.n_out * sizeof(float));
    free(x);
    free(y);
    mm_free(&d);
}

/* The CPU-type variants' texel loads (vka_context_vulkan_kernels "cpu (texel loads)") read the
 * same floats as the storage-buffer path and sum them in the same order: bit-identical outputs,
 * on shapes taking every vec4 path (both transposes, bias, accumulate, batches) and ones that
 * fall back to scalar reads (odd sizes, a batch stride that is not a multiple of 4). part: 0 the
 * quick group's two (a vec4 path with a batch and a scalar fallback: each vec4 shape is two
 * pipelines of its own, seconds each to build on lavapipe), 1 the others. */
static void texel_loads_equal_storage(int part) {
    vka_context *cpu = tu_cpu();
    assert_null(vka_context_vulkan_kernels(cpu));
    vka_context_destroy(cpu);
    const char *was = getenv("VKATTN_TEXEL_LOADS");
    char saved[16] = "";
    if (was) snprintf(saved, sizeof saved, "%s", was);
    unsetenv("VKATTN_TEXEL_LOADS");
    vka_context *texel = tu_gpu_kernels(VKA_KERNELS_CPU);
    if (!texel) return;
    setenv("VKATTN_TEXEL_LOADS", "0", 1);
    vka_context *storage = tu_gpu_kernels(VKA_KERNELS_CPU);
    vka_context *gpu = tu_gpu_kernels(VKA_KERNELS_GPU);
    if (was) setenv("VKATTN_TEXEL_LOADS", saved, 1);
    else unsetenv("VKATTN_TEXEL_LOADS");
    assert_string_equal(vka_context_vulkan_kernels(texel), "cpu (texel loads)");
    assert_string_equal(vka_context_vulkan_kernels(storage), "cpu");
    assert_string_equal(vka_context_vulkan_kernels(gpu), "gpu");
    const struct {
        mm_case c;
        int part;
    } cases[] = {
        {{.M = 100, .N = 92, .K = 300, .batch = 2, .ta = true, .bias = true}, 0},
        {{.M = 37, .N = 64, .K = 128, .tb = true, .bias = true, .alpha = 0.5f}, 1},
        {{.M = 64, .N = 48, .K = 36, .ta = true, .tb = true, .accumulate = true}, 1},
        {{.M = 1, .N = 260, .K = 768, .tb = true}, 1},
        {{.M = 33, .N = 31, .K = 29}, 0},
        {{.M = 20, .N = 24, .K = 40, .batch = 3, .tb = true, .pad_a = 1, .pad_b = 4}, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        if (cases[i].part != part) continue;
        mm_data d = mm_make(&cases[i].c, 300 + i);
        float *x = mm_run(texel, &cases[i].c, &d), *y = mm_run(storage, &cases[i].c, &d);
        assert_memory_equal(x, y, d.n_out * sizeof(float));
        free(x);
        free(y);
        mm_free(&d);
    }
    tu_done(texel);
    tu_done(storage);
    tu_done(gpu);
}

static void test_matmul_vulkan_texel_loads_equal_storage(void **state) {
    (void)state;
    texel_loads_equal_storage(0);
}

static void test_matmul_vulkan_texel_loads_equal_storage_more(void **state) {
    (void)state;
    texel_loads_equal_storage(1);
}

TU_VULKAN_TESTS(test_matmul_vulkan_transposes_and_awkward_shapes, transpose_quick_cases)
TU_VULKAN_TESTS(test_matmul_vulkan_transposed_awkward_shapes, transpose_more_cases)
TU_VULKAN_TESTS(test_matmul_vulkan_bias_alpha_accumulate, epilogue_cases)
TU_VULKAN_TESTS(test_matmul_vulkan_batched_strided, batch_cases)
TU_VULKAN_TESTS(test_matmul_vulkan_ones_exact, ones_case)
TU_VULKAN_TESTS(test_matmul_vulkan_gpt_shapes, gpt_shape_cases)
TU_VULKAN_TESTS(test_matmul_vulkan_long_k_and_vec4_edges, long_k_and_vec4_cases)
TU_VULKAN_TESTS(test_matmul_vulkan_big_tiles, big_tile_cases)
TU_VULKAN_TESTS(test_matmul_vulkan_deterministic, deterministic_case)

int main(int argc, char **argv) {
    const struct CMUnitTest quick[] = {
        cmocka_unit_test(test_matmul_transposes_and_awkward_shapes),
        cmocka_unit_test(test_matmul_bias_alpha_accumulate),
        cmocka_unit_test(test_matmul_batched_strided),
        cmocka_unit_test(test_matmul_ones_exact),
        cmocka_unit_test(test_matmul_cpu_deterministic_across_threads),
        cmocka_unit_test(test_matmul_cpu_fast_matches_reference),
        cmocka_unit_test(test_matmul_cpu_few_rows_equal_tiled),
        TU_VULKAN_TEST_ENTRIES(test_matmul_vulkan_transposes_and_awkward_shapes),
        TU_VULKAN_TEST_ENTRIES(test_matmul_vulkan_bias_alpha_accumulate),
        TU_VULKAN_TEST_ENTRIES(test_matmul_vulkan_batched_strided),
        TU_VULKAN_TEST_ENTRIES(test_matmul_vulkan_ones_exact),
        cmocka_unit_test(test_matmul_vulkan_folded_grid),
        TU_VULKAN_TEST_ENTRIES(test_matmul_vulkan_deterministic),
        cmocka_unit_test(test_matmul_vulkan_texel_loads_equal_storage),
    };
    /* The sweeps on Vulkan (the small awkward shapes transposed, the model's products, K = 5000
     * and the vec4 edges in every transpose, the big tiles in every transpose, texel loads
     * against storage on four more shapes): most of the program's time on lavapipe, minutes with a lowered binding limit (test_matmul_split). */
    const struct CMUnitTest exhaustive[] = {
        TU_VULKAN_TEST_ENTRIES(test_matmul_vulkan_transposed_awkward_shapes),
        TU_VULKAN_TEST_ENTRIES(test_matmul_vulkan_gpt_shapes),
        TU_VULKAN_TEST_ENTRIES(test_matmul_vulkan_long_k_and_vec4_edges),
        TU_VULKAN_TEST_ENTRIES(test_matmul_vulkan_big_tiles),
        cmocka_unit_test(test_matmul_vulkan_texel_loads_equal_storage_more),
    };
    TU_RETURN_GROUPS(argc, argv, quick, exhaustive, NULL, NULL);
}
