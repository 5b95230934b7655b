/* vka_matmul with 16-bit a and b (bf16 and fp16; out and bias float32) through vkattn.h, on
 * both backends. Each result against the double product of the same 16-bit values within the
 * bound of K exact products summed in fp32 (Higham, "Accuracy and Stability of Numerical
 * Algorithms", 3.1: gamma_K sum |a b|, u = 2^-24), with a few roundings more for the epilogue
 * (alpha, bias, accumulate) and for K blocks; Vulkan against the CPU backend within twice that;
 * both Vulkan kernel variants; awkward shapes (one element, one row, K of 1, odd sizes, longer
 * than a tile, odd padded batch strides so that operands start at odd elements, every
 * transpose); fp16's extremes (65504, subnormals down to 2^-24); NaN and infinities; products
 * past a lowered binding limit, split into blocks of batches, rows, columns and K that start
 * mid-word, against the unsplit product; the refusals (mixed types, odd counts). A 16-bit out:
 * test_matmul16_out.
 * The CPU backend's kernel paths one by one, bit for bit: test_matmul16_cpu. */
#define _POSIX_C_SOURCE 200809L
#include "op_util.h"

static const vka_dtype TYPES[] = {VKA_BF16, VKA_F16};

/* out (M, N) of each batch = alpha op(a) op(b) (+ bias) (+ out if accumulate) */
typedef struct mm_case {
    int M, N, K, batch;
    bool ta, tb, bias, accumulate;
    float alpha;
    size_t pad;   /* extra elements between batches of a, b and out (0: packed) */
    bool extremes; /* a and b from fp16's extremes (f16_extremes), not uniform in [-1, 1] */
} mm_case;

/* One product's data: a and b as 16-bit words and as the floats they widen to (exactly), out's
 * first values and the bias, uniform in [-1, 1]. */
typedef struct mm_data {
    vka_dtype type;
    mm_case c;
    int batch;
    size_t sa, sb, so; /* batch strides: the matrices plus pad */
    uint16_t *a16, *b16;
    float *a, *b, *out0, *bias;
} mm_data;

static const char *type_name(vka_dtype t) { return vka_dtype_string(t); }

/* f (n) rounded to type t, in place; h gets the words. */
static void round16(vka_dtype t, uint16_t *h, float *f, size_t n) {
    assert_int_equal(vka_convert(t, h, VKA_F32, f, n), VKA_SUCCESS);
    assert_int_equal(vka_convert(VKA_F32, f, t, h, n), VKA_SUCCESS);
}

/* fp16's extremes and what lies between, n of them: the largest finite value, the smallest
 * normal and subnormal, a subnormal with every bit, ones, zeros and x (uniform), each sign. Every
 * product is exact in fp32 (2^-48 to 2^32), and so is any sum of the tiny ones. */
static void f16_extremes(float *x, size_t n, uint64_t seed) {
    static const float v[] = {65504.0f, 0x1p-14f, 0x1p-24f, 0x3FFp-24f, 1.0f, 0.0f};
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 5;
    for (size_t i = 0; i < n; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        unsigned r = (unsigned)(s >> 32);
        float y = r % 8 < 6 ? v[r % 8] : x[i];
        x[i] = (r >> 8) & 1 ? -y : y;
    }
}

static mm_data data_make(vka_dtype t, mm_case c, uint64_t seed) {
    mm_data d = {.type = t, .c = c, .batch = c.batch ? c.batch : 1};
    d.sa = (size_t)c.M * c.K + c.pad, d.sb = (size_t)c.K * c.N + c.pad;
    d.so = (size_t)c.M * c.N + c.pad;
    size_t na = d.sa * d.batch, nb = d.sb * d.batch, no = d.so * d.batch;
    d.a = malloc(na * sizeof *d.a), d.b = malloc(nb * sizeof *d.b);
    d.a16 = malloc(na * sizeof *d.a16), d.b16 = malloc(nb * sizeof *d.b16);
    d.out0 = malloc(no * sizeof *d.out0), d.bias = malloc((size_t)c.N * sizeof *d.bias);
    tu_random(d.a, na, seed, 1.0f);
    tu_random(d.b, nb, seed + 1, 1.0f);
    tu_random(d.out0, no, seed + 2, 1.0f);
    tu_random(d.bias, (size_t)c.N, seed + 3, 1.0f);
    if (c.extremes) f16_extremes(d.a, na, seed + 4), f16_extremes(d.b, nb, seed + 5);
    round16(t, d.a16, d.a, na);
    round16(t, d.b16, d.b, nb);
    return d;
}

static void data_free(mm_data *d) {
    free(d->a), free(d->b), free(d->a16), free(d->b16), free(d->out0), free(d->bias);
}

static vka_tensor *tensor16(vka_context *ctx, vka_dtype t, const uint16_t *h, size_t n) {
    return tu_tensor_typed(ctx, t, n, h);
}

/* The product on ctx: out (so * batch), malloc'd. */
static float *product_on(vka_context *ctx, const mm_data *d) {
    const mm_case *c = &d->c;
    size_t no = d->so * d->batch;
    vka_tensor *ta = tensor16(ctx, d->type, d->a16, d->sa * d->batch);
    vka_tensor *tb = tensor16(ctx, d->type, d->b16, d->sb * d->batch);
    vka_tensor *to = tu_tensor(ctx, no, d->out0);
    vka_tensor *tbias = c->bias ? tu_tensor(ctx, (size_t)c->N, d->bias) : NULL;
    vka_matmul_desc m = {.out = to, .a = ta, .b = tb, .bias = tbias, .M = c->M, .N = c->N,
                         .K = c->K, .batch = c->batch, .trans_a = c->ta, .trans_b = c->tb,
                         .alpha = c->alpha, .accumulate = c->accumulate};
    if (c->pad) m.stride_a = d->sa, m.stride_b = d->sb, m.stride_out = d->so;
    tu_begin(ctx);
    if (vka_matmul(ctx, &m) != VKA_SUCCESS)
        fail_msg("%s matmul: %s", type_name(d->type), vka_last_error(ctx));
    tu_run(ctx);
    float *got = tu_read(to, no);
    vka_tensor_destroy(ta);
    vka_tensor_destroy(tb);
    vka_tensor_destroy(to);
    vka_tensor_destroy(tbias);
    return got;
}

/* Element e of batch bi of out in double, and the bound on its fp32 error: (K + 8) u times the
 * magnitudes summed (alpha sum |a b|, |bias|, |out| if accumulated); a gap between batches keeps
 * out's first value (bound 0). */
static double want_at(const mm_data *d, int bi, size_t e, double *bound) {
    const mm_case *c = &d->c;
    size_t i = e / (size_t)c->N, j = e % (size_t)c->N;
    double o0 = d->out0[bi * d->so + e];
    *bound = 0.0;
    if (i >= (size_t)c->M) return o0;
    double sum = 0.0, mag = 0.0;
    for (int k = 0; k < c->K; k++) {
        size_t ai = c->ta ? (size_t)k * c->M + i : i * c->K + k;
        size_t bj = c->tb ? j * c->K + k : (size_t)k * c->N + j;
        double x = d->a[bi * d->sa + ai], y = d->b[bi * d->sb + bj];
        sum += x * y;
        mag += fabs(x * y);
    }
    double alpha = c->alpha != 0.0f ? c->alpha : 1.0, bias = c->bias ? d->bias[j] : 0.0;
    double v = alpha * sum + bias;
    if (c->accumulate) v += o0;
    *bound = (c->K + 8) * 0x1p-24 * (fabs(alpha) * mag + fabs(bias) +
                                     (c->accumulate ? fabs(o0) : 0.0)) + 1e-30;
    return v;
}

static bool within(double got, double want, double bound) {
    if (isnan(want)) return isnan(got);
    if (isinf(want)) return got == want;
    return fabs(got - want) <= bound;
}

/* got against the double product (a NaN wants a NaN, an infinity the same infinity); with
 * other (not NULL: another backend's or the unsplit result), got against it within twice the
 * bound. Returns the largest error / bound. */
static double check(const mm_data *d, const float *got, const float *other, const char *what) {
    const mm_case *c = &d->c;
    double worst = 0.0;
    for (int bi = 0; bi < d->batch; bi++)
        for (size_t e = 0; e < d->so; e++) {
            double bound, want = want_at(d, bi, e, &bound), g = got[bi * d->so + e];
            bool ok = within(g, want, bound);
            if (ok && other) ok = within(g, other[bi * d->so + e], 2 * bound);
            if (!ok)
                fail_msg("%s %s matmul M=%d N=%d K=%d batch=%d ta=%d tb=%d: out[%d][%zu] = "
                         "%.9g, want %.9g%s%.9g (bound %.3g)", what, type_name(d->type), c->M,
                         c->N, c->K, d->batch, c->ta, c->tb, bi, e, g, want,
                         other ? ", other " : "", other ? other[bi * d->so + e] : 0.0, bound);
            if (bound > 0 && isfinite(want) && fabs(g - want) / bound > worst)
                worst = fabs(g - want) / bound;
        }
    return worst;
}

/* The shapes for every backend: one element, one row, K of 1, edges of no tile, odd K (the
 * pairs of vdpbf16ps), longer than a tile, batches with odd padded strides, the epilogue; a few
 * rows against GPT-2's 4C (the CPU's GEMV where b is transposed). */
static const mm_case SHAPES[] = {
    {.M = 1, .N = 1, .K = 1},
    {.M = 1, .N = 301, .K = 77, .bias = true},
    {.M = 3, .N = 301, .K = 3072, .batch = 2, .pad = 3, .bias = true, .accumulate = true,
     .alpha = 0.5f},
    {.M = 6, .N = 10, .K = 1},
    {.M = 65, .N = 33, .K = 17},
    {.M = 131, .N = 77, .K = 261, .alpha = -0.5f, .accumulate = true},
    {.M = 37, .N = 41, .K = 67, .batch = 3, .pad = 5, .bias = true, .accumulate = true},
    {.M = 37, .N = 70, .K = 300, .batch = 2, .pad = 3, .extremes = true, .alpha = -0.5f},
};

/* Every shape and transpose with every CPU kernel set. */
static void test_matmul16_cpu_backend(void **state) {
    (void)state;
    const vka_cpu_kernels kinds[] = {VKA_CPU_KERNELS_FAST, VKA_CPU_KERNELS_FAST_AVX2,
                                     VKA_CPU_KERNELS_REFERENCE};
    for (size_t k = 0; k < TU_LEN(kinds); k++) {
        vka_context *ctx = tu_cpu_kernels(kinds[k], 2);
        for (size_t ti = 0; ti < TU_LEN(TYPES); ti++)
            for (size_t s = 0; s < TU_LEN(SHAPES); s++)
                for (int t = 0; t < 4; t++) {
                    mm_case c = SHAPES[s];
                    c.ta = t & 1, c.tb = t & 2;
                    mm_data d = data_make(TYPES[ti], c, 500 + 10 * s + (uint64_t)t);
                    float *got = product_on(ctx, &d);
                    check(&d, got, NULL, "cpu");
                    free(got);
                    data_free(&d);
                }
        tu_done(ctx);
    }
}

/* cases on ctx (Vulkan) against the double product and the CPU backend. */
static void vulkan_vs_cpu(vka_context *ctx, const mm_case *cases, size_t n, uint64_t seed) {
    vka_context *cpu = tu_cpu();
    for (size_t ti = 0; ti < TU_LEN(TYPES); ti++)
        for (size_t s = 0; s < n; s++) {
            mm_data d = data_make(TYPES[ti], cases[s], seed + s);
            float *want = product_on(cpu, &d), *got = product_on(ctx, &d);
            check(&d, got, want, "vulkan");
            free(want), free(got);
            data_free(&d);
        }
    tu_done(cpu);
}

/* Each kernel variant (16-bit elements read one at a time from 32-bit words, or four from two):
 * two shapes in the quick set, three more in the exhaustive one (each transpose and load width
 * is a pipeline to build on lavapipe). */
static void vulkan_cases(vka_context *ctx) {
    static const mm_case shapes[] = {
        {.M = 37, .N = 41, .K = 67, .batch = 3, .pad = 5, .ta = true, .bias = true,
         .accumulate = true, .alpha = 0.75f},
        /* multiples of 4: the CPU-type variant's four-at-a-time loads of A and B */
        {.M = 20, .N = 24, .K = 40, .tb = true, .pad = 4, .batch = 3},
        /* K, the rows and the batch strides multiples of 8 as well: its eight-at-a-time
         * loads along k (K8) */
        {.M = 20, .N = 24, .K = 40, .tb = true, .pad = 8, .batch = 3},
        /* the same pipelines on fp16's extremes (65504, subnormals) */
        {.M = 37, .N = 41, .K = 67, .batch = 3, .pad = 5, .ta = true, .extremes = true},
        {.M = 20, .N = 24, .K = 40, .tb = true, .pad = 4, .batch = 3, .extremes = true},
        {.M = 20, .N = 24, .K = 40, .tb = true, .pad = 8, .batch = 3, .extremes = true},
    };
    vulkan_vs_cpu(ctx, shapes, TU_LEN(shapes), 700);
}
TU_VULKAN_TESTS16(test_matmul16_vulkan, vulkan_cases)

/* op(a)(i, k) (op(b)(k, j)) of batch 0 set to x, rounded to the type, in both forms. */
static void set_a(mm_data *d, int i, int k, float x) {
    size_t e = d->c.ta ? (size_t)k * d->c.M + i : (size_t)i * d->c.K + k;
    d->a[e] = x;
    round16(d->type, &d->a16[e], &d->a[e], 1);
}
static void set_b(mm_data *d, int k, int j, float x) {
    size_t e = d->c.tb ? (size_t)j * d->c.K + k : (size_t)k * d->c.N + j;
    d->b[e] = x;
    round16(d->type, &d->b16[e], &d->b[e], 1);
}

/* NaN and infinities: a row of a holding +Inf (so NaN where it meets a zero of b: Inf * 0),
 * one a NaN, one +Inf and -Inf (NaN where b's two partners have one sign), a column of b -Inf:
 * the outputs they reach are NaN or the infinity of the double product, the others finite and
 * within the bound; with bias and accumulate, both transposes, and b transposed with K = 24
 * (the CPU-type variant's eight-at-a-time loads); on ctx and (a Vulkan ctx) the CPU backend. */
static void special_cases(vka_context *ctx) {
    vka_context *cpu = tu_is_cpu(ctx) ? NULL : tu_cpu();
    for (size_t ti = 0; ti < TU_LEN(TYPES); ti++)
        for (int t = 0; t < 3; t++) {
            mm_case c = {.M = 7, .N = 21, .K = t == 2 ? 24 : 19, .ta = t == 1, .tb = t != 0,
                         .bias = true, .accumulate = true};
            mm_data d = data_make(TYPES[ti], c, 800 + 2 * ti + (uint64_t)t);
            set_a(&d, 1, 3, INFINITY), set_b(&d, 3, 4, 0.0f);
            set_a(&d, 2, 5, NAN);
            set_a(&d, 3, 0, INFINITY), set_a(&d, 3, 1, -INFINITY);
            set_b(&d, 7, 9, -INFINITY);
            float *got = product_on(ctx, &d), *ref = cpu ? product_on(cpu, &d) : NULL;
            check(&d, got, ref, cpu ? "vulkan" : "cpu");
            int nan = 0;
            for (size_t e = 0; e < d.so; e++) nan += isnan(got[e]);
            if (nan < c.N) fail_msg("only %d NaN outputs", nan); /* row 2 at least */
            free(got), free(ref);
            data_free(&d);
        }
    tu_done(cpu);
}
TU_VULKAN_TESTS16(test_matmul16_special_values, special_cases)

static void test_matmul16_special_values_cpu(void **state) {
    (void)state;
    vka_context *ctx = tu_cpu();
    special_cases(ctx);
    tu_done(ctx);
}

static void vulkan_more_cases(vka_context *ctx) {
    static const mm_case shapes[] = {
        {.M = 1, .N = 301, .K = 77, .bias = true},
        {.M = 1, .N = 301, .K = 776, .tb = true, .bias = true}, /* a decode step's product */
        {.M = 65, .N = 33, .K = 17, .tb = true},
        {.M = 100, .N = 92, .K = 300, .batch = 2, .ta = true, .bias = true},
    };
    vulkan_vs_cpu(ctx, shapes, TU_LEN(shapes), 710);
}
TU_VULKAN_TESTS(test_matmul16_vulkan_more, vulkan_more_cases)

/* A Vulkan context binding at most 4 KiB a view (1020 floats, 2040 16-bit elements). */
static vka_context *split_ctx(vka_kernels kernels) { return tu_gpu_limited(kernels, 4096); }

/* Products whose views pass 4096 bytes, split into blocks: out of 1665 floats (rows and
 * columns), batches of odd padded strides, a row of A of 2101 elements (K split, odd, so blocks
 * start at either half of a word; the later K blocks accumulate, the bias comes once), odd M, N
 * and K everywhere, every transpose, the epilogue: against the double product, the unsplit one
 * (the same kernels without the limit) and the CPU backend. */
static void split_cases(vka_kernels kernels) {
    static const mm_case shapes[] = {
        {.M = 37, .N = 45, .K = 29, .batch = 3, .pad = 4, .bias = true, .accumulate = true,
         .alpha = 0.5f},
        {.M = 3, .N = 5, .K = 2101, .tb = true, .bias = true, .accumulate = true},
        {.M = 3, .N = 5, .K = 2104, .tb = true, .bias = true}, /* K blocks of multiples of 8 */
        {.M = 131, .N = 3, .K = 77, .batch = 2, .pad = 2, .ta = true, .tb = true},
        {.M = 33, .N = 31, .K = 65, .ta = true, .alpha = -1.5f, .bias = true},
    };
    vka_context *ctx = split_ctx(kernels);
    if (!ctx) return;
    vka_context *whole = tu_gpu_kernels(kernels), *cpu = tu_cpu();
    for (size_t ti = 0; ti < TU_LEN(TYPES); ti++)
        for (size_t s = 0; s < TU_LEN(shapes); s++) {
            mm_data d = data_make(TYPES[ti], shapes[s], 900 + s);
            float *got = product_on(ctx, &d), *unsplit = product_on(whole, &d);
            float *ref = product_on(cpu, &d);
            check(&d, got, unsplit, "vulkan split vs unsplit");
            check(&d, got, ref, "vulkan split vs cpu");
            free(got), free(unsplit), free(ref);
            data_free(&d);
        }
    tu_done(cpu);
    tu_done(whole);
    tu_done(ctx);
}
static void test_matmul16_split_gpu_kernels(void **state) {
    (void)state;
    split_cases(VKA_KERNELS_GPU);
}
static void test_matmul16_split_cpu_kernels(void **state) {
    (void)state;
    split_cases(VKA_KERNELS_CPU);
}

/* Record one matmul as a graph of its own: the first error of vka_matmul and vka_graph_end (a
 * backend's own refusal comes at the end); *g the graph when both succeed. */
static vka_result record_matmul(vka_context *ctx, const vka_matmul_desc *d, vka_graph **g) {
    *g = NULL;
    tu_begin(ctx);
    vka_result r = vka_matmul(ctx, d), end = vka_graph_end(ctx, g);
    return r != VKA_SUCCESS ? r : end;
}

/* Mixed pairs (every order of f32, bf16, f16) are refused naming the tensors and their types;
 * an odd count of 16-bit elements does not count its word's padding half;
 * matching pairs run. */
static void refusal_cases(vka_context *ctx) {
    vka_tensor *h = tensor16(ctx, VKA_BF16, NULL, 64), *f = tu_tensor(ctx, 64, NULL);
    vka_tensor *out = tu_tensor(ctx, 64, NULL), *h2 = tensor16(ctx, VKA_BF16, NULL, 64);
    tu_begin(ctx);
    vka_tensor *g = tensor16(ctx, VKA_F16, NULL, 64), *g2 = tensor16(ctx, VKA_F16, NULL, 64);
    vka_matmul_desc d = {.out = out, .a = h, .b = f, .M = 8, .N = 8, .K = 8};
    static const char *const mixed[] = {
        "vka_matmul: a holds bf16 elements and b f32 ones; this op takes a and b of one type "
        "(f32, bf16 or f16)",
        "vka_matmul: a holds f32 elements and b f16 ones",
        "vka_matmul: a holds bf16 elements and b f16 ones",
        "vka_matmul: a holds f16 elements and b bf16 ones",
    };
    const vka_tensor *pairs[][2] = {{h, f}, {f, g}, {h, g}, {g, h}};
    for (size_t i = 0; i < TU_LEN(pairs); i++) {
        d.a = pairs[i][0], d.b = pairs[i][1];
        assert_int_equal(vka_matmul(ctx, &d), VKA_ERROR_INVALID_ARGUMENT);
        if (!strstr(vka_last_error(ctx), mixed[i]))
            fail_msg("\"%s\" lacks \"%s\"", vka_last_error(ctx), mixed[i]);
    }
    d.a = g, d.b = g2, d.out = g2; /* a 16-bit out is allowed (test_matmul16_out), not b */
    assert_int_equal(vka_matmul(ctx, &d), VKA_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(vka_last_error(ctx), "vka_matmul: out must be a different tensor"));
    vka_graph *graph = NULL;
    assert_int_equal(vka_graph_end(ctx, &graph), VKA_ERROR_INVALID_ARGUMENT);
    for (int k = 0; k < 2; k++) { /* bf16 and fp16 pairs run */
        d.out = out, d.a = k ? g : h, d.b = k ? g2 : h2;
        assert_int_equal(record_matmul(ctx, &d, &graph), VKA_SUCCESS);
        assert_int_equal(vka_graph_run(graph), VKA_SUCCESS);
        vka_graph_destroy(graph);
    }
    vka_tensor_destroy(g);
    vka_tensor_destroy(g2);
    vka_tensor_destroy(h);
    vka_tensor_destroy(h2);
    vka_tensor_destroy(f);
    vka_tensor_destroy(out);

    vka_tensor *a = tensor16(ctx, VKA_BF16, NULL, 3), *b = tensor16(ctx, VKA_BF16, NULL, 2);
    vka_tensor *o = tu_tensor(ctx, 2, NULL);
    tu_begin(ctx);
    d = (vka_matmul_desc){.out = o, .a = a, .b = b, .M = 2, .N = 1, .K = 2};
    assert_int_equal(vka_matmul(ctx, &d), VKA_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(vka_last_error(ctx), "a holds 3 elements but M*K = 2*2 = 4"));
    vka_graph_end(ctx, &graph);
    vka_tensor_destroy(a);
    vka_tensor_destroy(b);
    vka_tensor_destroy(o);
}

static void test_matmul16_refusals_cpu(void **state) {
    (void)state;
    vka_context *ctx = tu_cpu();
    refusal_cases(ctx);
    tu_done(ctx);
}

static void test_matmul16_refusals_vulkan(void **state) {
    (void)state;
    vka_context *ctx = tu_gpu();
    refusal_cases(ctx);
    tu_done(ctx);
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matmul16_refusals_cpu),
        cmocka_unit_test(test_matmul16_refusals_vulkan),
        cmocka_unit_test(test_matmul16_cpu_backend),
        cmocka_unit_test(test_matmul16_special_values_cpu),
        TU_VULKAN_TEST_ENTRIES16(test_matmul16_vulkan),
        TU_VULKAN_TEST_ENTRIES16(test_matmul16_special_values),
        cmocka_unit_test(test_matmul16_split_gpu_kernels),
        cmocka_unit_test(test_matmul16_split_cpu_kernels),
    };
    const struct CMUnitTest exhaustive[] = {
        TU_VULKAN_TEST_ENTRIES(test_matmul16_vulkan_more),
    };
    TU_RETURN_GROUPS(argc, argv, tests, exhaustive, NULL, NULL);
}
