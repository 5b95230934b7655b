/* 16-bit tensors (vka_tensor_create_desc with VKA_BF16 / VKA_F16) and vka_convert: element
 * types, raw 16-bit reads and writes at any offset on both backends, the ops refusing them with
 * the op's and the tensor's names, and conversions against known values and every 16-bit word. */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include "op_util.h"

#include <float.h>

static void test_dtype_names_and_sizes(void **state) {
    (void)state;
    assert_string_equal(vka_dtype_string(VKA_F32), "f32");
    assert_string_equal(vka_dtype_string(VKA_BF16), "bf16");
    assert_string_equal(vka_dtype_string(VKA_F16), "f16");
    assert_string_equal(vka_dtype_string((vka_dtype)7), "unknown");
    assert_int_equal(vka_dtype_size(VKA_F32), 4);
    assert_int_equal(vka_dtype_size(VKA_BF16), 2);
    assert_int_equal(vka_dtype_size(VKA_F16), 2);
    assert_int_equal(vka_dtype_size((vka_dtype)-1), 0);
}

/* Narrowing one float (vka_convert of one element). */
static uint16_t narrow(vka_dtype to, float x) {
    uint16_t h = 0xDEAD;
    assert_int_equal(vka_convert(to, &h, VKA_F32, &x, 1), VKA_SUCCESS);
    return h;
}

static float widen(vka_dtype from, uint16_t h) {
    float x = -1.0f;
    assert_int_equal(vka_convert(VKA_F32, &x, from, &h, 1), VKA_SUCCESS);
    return x;
}

/* Known values: exact ones, ties to even (bf16 keeps 7 mantissa bits: 1 + 2^-8 is halfway
 * between 1 and 1 + 2^-7), overflow, NaN and Inf, fp16 subnormals. */
static void test_convert_known_values(void **state) {
    (void)state;
    assert_int_equal(narrow(VKA_BF16, 1.0f), 0x3F80);
    assert_int_equal(narrow(VKA_BF16, -2.0f), 0xC000);
    assert_int_equal(narrow(VKA_BF16, tu_bits_f32(0x3F808000u)), 0x3F80); /* tie -> even (down) */
    assert_int_equal(narrow(VKA_BF16, tu_bits_f32(0x3F818000u)), 0x3F82); /* tie -> even (up) */
    assert_int_equal(narrow(VKA_BF16, tu_bits_f32(0x3F808001u)), 0x3F81); /* past the tie: up */
    assert_int_equal(narrow(VKA_BF16, INFINITY), 0x7F80);
    assert_int_equal(narrow(VKA_BF16, -INFINITY), 0xFF80);
    assert_int_equal(narrow(VKA_BF16, FLT_MAX), 0x7F80); /* rounds past the largest bf16 */
    assert_true((narrow(VKA_BF16, NAN) & 0x7FFF) > 0x7F80);
    assert_int_equal(narrow(VKA_BF16, tu_bits_f32(0x00000001u)), 0x0000); /* subnormal: zero */
    assert_int_equal(narrow(VKA_BF16, tu_bits_f32(0x80000001u)), 0x8000);
    assert_true(widen(VKA_BF16, 0x3F80) == 1.0f);
    assert_true(widen(VKA_BF16, 0xC049) == tu_bits_f32(0xC0490000u));

    assert_int_equal(narrow(VKA_F16, 1.0f), 0x3C00);
    assert_int_equal(narrow(VKA_F16, -0.5f), 0xB800);
    assert_int_equal(narrow(VKA_F16, 65504.0f), 0x7BFF);  /* the largest fp16 */
    assert_int_equal(narrow(VKA_F16, 65519.0f), 0x7BFF);  /* below the halfway point */
    assert_int_equal(narrow(VKA_F16, 65520.0f), 0x7C00);  /* halfway to 2^16: Inf */
    assert_int_equal(narrow(VKA_F16, -1e9f), 0xFC00);
    assert_int_equal(narrow(VKA_F16, 0x1p-24f), 0x0001);  /* the smallest subnormal */
    assert_int_equal(narrow(VKA_F16, 0x1p-25f), 0x0000);  /* halfway to it: ties to even, 0 */
    assert_int_equal(narrow(VKA_F16, 0x1.8p-24f), 0x0002); /* 1.5 ulp: tie -> even (2) */
    assert_int_equal(narrow(VKA_F16, 1.0f + 0x1p-11f), 0x3C00); /* tie -> even (down) */
    assert_int_equal(narrow(VKA_F16, 1.0f + 0x3p-11f), 0x3C02); /* tie -> even (up) */
    assert_true((narrow(VKA_F16, NAN) & 0x7FFF) > 0x7C00);
    assert_int_equal(narrow(VKA_F16, INFINITY), 0x7C00);
    assert_true(widen(VKA_F16, 0x0001) == 0x1p-24f);
    assert_true(widen(VKA_F16, 0x7BFF) == 65504.0f);
    assert_true(isinf(widen(VKA_F16, 0xFC00)) && widen(VKA_F16, 0xFC00) < 0);
    assert_true(isnan(widen(VKA_F16, 0x7E00)));
}

/* Every 16-bit word widened and narrowed again gives itself back, but for NaNs (quieted, still
 * NaN) and bf16 subnormals (signed zero); and arrays of every length up to 70 convert as their
 * elements do one by one (the vector loops' tails). */
static void test_convert_every_word(void **state) {
    (void)state;
    const size_t n = 65536;
    uint16_t *w = malloc(n * sizeof *w), *back = malloc(n * sizeof *back);
    float *f = malloc(n * sizeof *f);
    for (size_t i = 0; i < n; i++) w[i] = (uint16_t)i;
    const vka_dtype types[2] = {VKA_BF16, VKA_F16};
    for (int k = 0; k < 2; k++) {
        vka_dtype t = types[k];
        assert_int_equal(vka_convert(VKA_F32, f, t, w, n), VKA_SUCCESS);
        assert_int_equal(vka_convert(t, back, VKA_F32, f, n), VKA_SUCCESS);
        for (size_t i = 0; i < n; i++) {
            uint16_t mag = (uint16_t)(i & 0x7FFF);
            bool nan = t == VKA_BF16 ? mag > 0x7F80 : mag > 0x7C00;
            bool sub = t == VKA_BF16 && mag != 0 && mag < 0x0080;
            if (nan) {
                if (!isnan(f[i])) fail_msg("%s word 0x%04zx: a NaN widened to %g", vka_dtype_string(t), i, f[i]);
                if ((back[i] & 0x7FFF) <= (t == VKA_BF16 ? 0x7F80 : 0x7C00) ||
                    (back[i] & 0x8000) != (i & 0x8000))
                    fail_msg("%s word 0x%04zx: NaN came back as 0x%04x", vka_dtype_string(t), i,
                             back[i]);
            } else if (sub) {
                if (back[i] != (i & 0x8000))
                    fail_msg("bf16 subnormal 0x%04zx came back as 0x%04x, not a signed zero", i,
                             back[i]);
            } else if (back[i] != w[i]) {
                fail_msg("%s word 0x%04zx -> %g -> 0x%04x", vka_dtype_string(t), i, f[i], back[i]);
            }
        }
        /* Arrays of each length against the one-element conversions (in from random floats). */
        float in[70];
        uint64_t s = 12345;
        for (int i = 0; i < 70; i++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            in[i] = tu_bits_f32((uint32_t)(s >> 32));
        }
        for (size_t len = 1; len <= 70; len++) {
            uint16_t out[70];
            assert_int_equal(vka_convert(t, out, VKA_F32, in, len), VKA_SUCCESS);
            for (size_t i = 0; i < len; i++) {
                uint16_t one = narrow(t, in[i]);
                if (out[i] != one && !(isnan(in[i]) && isnan(widen(t, out[i]))))
                    fail_msg("%s length %zu element %zu (0x%08x): array 0x%04x, one 0x%04x",
                             vka_dtype_string(t), len, i, tu_f32_bits(in[i]), out[i], one);
            }
        }
    }
    /* same type: a copy; bf16 <-> fp16 and bad types: errors */
    uint16_t a[3] = {1, 2, 3}, b[3] = {0};
    assert_int_equal(vka_convert(VKA_BF16, b, VKA_BF16, a, 3), VKA_SUCCESS);
    assert_memory_equal(a, b, sizeof a);
    assert_int_equal(vka_convert(VKA_F16, b, VKA_BF16, a, 3), VKA_ERROR_INVALID_ARGUMENT);
    assert_int_equal(vka_convert((vka_dtype)5, b, VKA_F32, f, 3), VKA_ERROR_INVALID_ARGUMENT);
    assert_int_equal(vka_convert(VKA_BF16, NULL, VKA_F32, f, 3), VKA_ERROR_INVALID_ARGUMENT);
    assert_int_equal(vka_convert(VKA_BF16, NULL, VKA_F32, NULL, 0), VKA_SUCCESS);
    free(w);
    free(back);
    free(f);
}

/* Record one matmul as a graph of its own: the first error of vka_matmul and vka_graph_end (a
 * backend's own refusal comes at the end); *g the graph when both succeed. */
static vka_result record_matmul(vka_context *ctx, const vka_matmul_desc *d, vka_graph **g) {
    *g = NULL;
    tu_begin(ctx);
    vka_result r = vka_matmul(ctx, d), end = vka_graph_end(ctx, g);
    return r != VKA_SUCCESS ? r : end;
}

static vka_tensor *make(vka_context *ctx, size_t n, vka_dtype dtype) {
    vka_tensor_desc d = {.n = n, .dtype = dtype};
    vka_tensor *t = NULL;
    vka_result r = vka_tensor_create_desc(ctx, &d, &t);
    if (r != VKA_SUCCESS) fail_msg("%s tensor of %zu: %s", vka_dtype_string(dtype), n, vka_last_error(ctx));
    return t;
}

/* 16-bit tensors of awkward lengths: zero-filled, size and dtype; writes at odd and even
 * offsets of odd and even lengths change only their elements; reads at any offset. */
static void tensor_cases(vka_context *ctx) {
    const size_t lens[] = {1, 2, 7, 1000, 1001};
    const vka_dtype types[2] = {VKA_BF16, VKA_F16};
    for (int k = 0; k < 2; k++)
        for (size_t li = 0; li < TU_LEN(lens); li++) {
            size_t n = lens[li];
            vka_tensor *t = make(ctx, n, types[k]);
            assert_int_equal(vka_tensor_size(t), n);
            assert_int_equal(vka_tensor_dtype(t), types[k]);
            uint16_t *want = calloc(n, sizeof *want), *got = malloc(n * sizeof *got);
            assert_int_equal(vka_tensor_read(t, 0, got, n), VKA_SUCCESS);
            assert_memory_equal(got, want, n * sizeof *got);
            /* writes: [off, off + len) for every off < 4 and a few lengths */
            uint16_t v = 0x1234;
            for (size_t off = 0; off < 4 && off < n; off++)
                for (size_t len = 1; off + len <= n && len <= 9; len += 2 + (len == 1)) {
                    uint16_t src[9];
                    for (size_t i = 0; i < len; i++) src[i] = want[off + i] = v++;
                    assert_int_equal(vka_tensor_write(t, off, src, len), VKA_SUCCESS);
                }
            if (n > 10) { /* and a long one at an odd offset */
                uint16_t *src = malloc((n - 5) * sizeof *src);
                for (size_t i = 0; i < n - 5; i++) src[i] = want[3 + i] = (uint16_t)(v + 7 * i);
                assert_int_equal(vka_tensor_write(t, 3, src, n - 5), VKA_SUCCESS);
                free(src);
            }
            assert_int_equal(vka_tensor_read(t, 0, got, n), VKA_SUCCESS);
            for (size_t i = 0; i < n; i++)
                if (got[i] != want[i])
                    fail_msg("%s n=%zu element %zu: 0x%04x, want 0x%04x", vka_dtype_string(types[k]),
                             n, i, got[i], want[i]);
            for (size_t off = 0; off < n && off < 5; off++) { /* reads at odd offsets */
                size_t len = n - off > 3 ? 3 : n - off;
                uint16_t part[3];
                assert_int_equal(vka_tensor_read(t, off, part, len), VKA_SUCCESS);
                assert_memory_equal(part, want + off, len * sizeof *part);
            }
            assert_int_equal(vka_tensor_read(t, n, got, 1), VKA_ERROR_INVALID_ARGUMENT);
            assert_non_null(strstr(vka_last_error(ctx), "outside the tensor's"));
            free(want);
            free(got);
            vka_tensor_destroy(t);
        }
}

/* The ops refuse 16-bit tensors, naming the call and the tensor; a graph that got one fails. */
static void refusal_cases(vka_context *ctx) {
    vka_tensor *h = make(ctx, 64, VKA_BF16), *g = make(ctx, 64, VKA_F16);
    vka_tensor *f = tu_tensor(ctx, 64, NULL);
    tu_begin(ctx);
    assert_int_equal(vka_fill(ctx, h, 1.0f), VKA_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(vka_last_error(ctx), "vka_fill: t holds bf16 elements"));
    vka_matmul_desc d = {.out = f, .a = f, .b = g, .M = 8, .N = 8, .K = 8};
    d.out = tu_tensor(ctx, 64, NULL);
    assert_int_equal(vka_matmul(ctx, &d), VKA_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(vka_last_error(ctx), "vka_matmul: b holds f16 elements; this op takes 4-byte (f32, or int32 ids) there"));
    assert_int_equal(vka_copy(ctx, g, h, 8), VKA_ERROR_INVALID_ARGUMENT); /* test_dtype_copy.c */
    assert_non_null(strstr(vka_last_error(ctx), "vka_copy: bf16 src to f16 dst is not a conversion"));
    vka_graph *graph = NULL;
    assert_int_equal(vka_graph_end(ctx, &graph), VKA_ERROR_INVALID_ARGUMENT);
    assert_null(graph);
    vka_tensor_destroy(d.out);
    vka_tensor_destroy(f);
    vka_tensor_destroy(g);
    vka_tensor_destroy(h);
}

/* out (M, N) of batch bi = alpha op(a) op(b) (+ bias) (+ out0 if accumulate), in double. */
typedef struct bf_case {
    int M, N, K, batch;
    bool ta, tb, bias, accumulate;
    float alpha;
    size_t pad; /* extra elements between batches of a, b and out */
} bf_case;

/* A bf16 tensor of n values drawn in [-1, 1] and rounded to bf16; *wide gets them as floats. */
static vka_tensor *bf16_random(vka_context *ctx, size_t n, uint64_t seed, float **wide) {
    float *f = malloc(n * sizeof *f);
    uint16_t *h = malloc(n * sizeof *h);
    tu_random(f, n, seed, 1.0f);
    assert_int_equal(vka_convert(VKA_BF16, h, VKA_F32, f, n), VKA_SUCCESS);
    assert_int_equal(vka_convert(VKA_F32, f, VKA_BF16, h, n), VKA_SUCCESS);
    vka_tensor *t = make(ctx, n, VKA_BF16);
    assert_int_equal(vka_tensor_write(t, 0, h, n), VKA_SUCCESS);
    free(h);
    *wide = f;
    return t;
}

/* bf16 a and b, f32 out and bias, against the double product of the same (bf16) values: the
 * products are exact in fp32, so the error is the fp32 sums' (K terms: K 2^-24 sum |a b|). */
static void bf16_matmul_case(vka_context *ctx, bf_case c, uint64_t seed) {
    int batch = c.batch ? c.batch : 1;
    size_t sa = (size_t)c.M * c.K + c.pad, sb = (size_t)c.K * c.N + c.pad;
    size_t so = (size_t)c.M * c.N + c.pad;
    float *a, *b, *out0 = malloc(so * batch * sizeof *out0), *bias = malloc(c.N * sizeof *bias);
    vka_tensor *ta = bf16_random(ctx, sa * batch, seed, &a);
    vka_tensor *tb = bf16_random(ctx, sb * batch, seed + 1, &b);
    tu_random(out0, so * batch, seed + 2, 1.0f);
    tu_random(bias, (size_t)c.N, seed + 3, 1.0f);
    vka_tensor *tout = tu_tensor(ctx, so * batch, out0);
    vka_tensor *tbias = c.bias ? tu_tensor(ctx, (size_t)c.N, bias) : NULL;
    vka_matmul_desc d = {.out = tout, .a = ta, .b = tb, .bias = tbias, .M = c.M, .N = c.N,
                         .K = c.K, .batch = c.batch, .trans_a = c.ta, .trans_b = c.tb,
                         .alpha = c.alpha, .accumulate = c.accumulate};
    if (c.pad) d.stride_a = sa, d.stride_b = sb, d.stride_out = so;
    tu_begin(ctx);
    assert_int_equal(vka_matmul(ctx, &d), VKA_SUCCESS);
    tu_run(ctx);
    float *got = tu_read(tout, so * batch);
    double alpha = c.alpha != 0.0f ? c.alpha : 1.0;
    for (int bi = 0; bi < batch; bi++)
        for (size_t e = 0; e < so; e++) {
            size_t i = e / (size_t)c.N, j = e % (size_t)c.N;
            double want = out0[bi * so + e], mag = 0.0;
            if (i < (size_t)c.M) { /* padding past M*N keeps out0 */
                double sum = 0.0;
                for (int k = 0; k < c.K; k++) {
                    double x = c.ta ? a[bi * sa + (size_t)k * c.M + i] : a[bi * sa + i * c.K + k];
                    double y = c.tb ? b[bi * sb + j * c.K + k] : b[bi * sb + (size_t)k * c.N + j];
                    sum += x * y;
                    mag += fabs(x * y);
                }
                double v = alpha * sum + (c.bias ? bias[j] : 0.0);
                want = c.accumulate ? want + v : v;
            }
            double bound = (c.K + 4) * 0x1p-24 * (fabs(alpha) * mag + 2.0) + 1e-30;
            double diff = fabs((double)got[bi * so + e] - want);
            if (!(diff <= bound))
                fail_msg("bf16 matmul M=%d N=%d K=%d batch=%d ta=%d tb=%d: out[%d][%zu] = %.9g, "
                         "want %.9g (bound %.3g)", c.M, c.N, c.K, batch, c.ta, c.tb, bi, e,
                         got[bi * so + e], want, bound);
        }
    free(got);
    free(a);
    free(b);
    free(out0);
    free(bias);
    vka_tensor_destroy(ta);
    vka_tensor_destroy(tb);
    vka_tensor_destroy(tout);
    vka_tensor_destroy(tbias);
}

/* Awkward shapes (one element, one row, K of 1, edges of no tile, odd K for vdpbf16ps' pairs,
 * batches with odd padded strides, so 16-bit operands start at odd elements), every transpose,
 * the epilogue; every CPU kernel set. */
static void test_dtype_bf16_matmul_cpu(void **state) {
    (void)state;
    const bf_case shapes[] = {
        {.M = 1, .N = 1, .K = 1},
        {.M = 1, .N = 301, .K = 77, .bias = true},
        {.M = 6, .N = 10, .K = 1},
        {.M = 65, .N = 33, .K = 17},
        {.M = 131, .N = 77, .K = 261, .alpha = -0.5f, .accumulate = true},
        {.M = 37, .N = 41, .K = 67, .batch = 3, .pad = 5, .bias = true, .accumulate = true},
    };
    const vka_cpu_kernels kinds[] = {VKA_CPU_KERNELS_FAST, VKA_CPU_KERNELS_FAST_AVX2,
                                     VKA_CPU_KERNELS_REFERENCE};
    for (size_t k = 0; k < TU_LEN(kinds); k++) {
        vka_context *ctx = tu_cpu_kernels(kinds[k], 2);
        for (size_t s = 0; s < TU_LEN(shapes); s++)
            for (int t = 0; t < 4; t++) {
                bf_case c = shapes[s];
                c.ta = t & 1, c.tb = t & 2;
                bf16_matmul_case(ctx, c, 500 + 10 * s + (uint64_t)t);
            }
        tu_done(ctx);
    }
}

/* The same on Vulkan, each kernel variant (bf16 read a float at a time from 32-bit words, or
 * four from two): two shapes in the quick set, three more in the exhaustive one (each
 * transpose and load width is a pipeline to build on lavapipe). */
static void bf16_vulkan_cases(vka_context *ctx) {
    const bf_case shapes[] = {
        {.M = 37, .N = 41, .K = 67, .batch = 3, .pad = 5, .ta = true, .bias = true,
         .accumulate = true, .alpha = 0.75f},
        /* multiples of 4: the CPU-type variant's four-at-a-time loads of A and B */
        {.M = 20, .N = 24, .K = 40, .tb = true, .pad = 4, .batch = 3},
    };
    for (size_t s = 0; s < TU_LEN(shapes); s++) bf16_matmul_case(ctx, shapes[s], 700 + s);
}
TU_VULKAN_TESTS(test_dtype_bf16_matmul_vulkan, bf16_vulkan_cases)

static void bf16_vulkan_more_cases(vka_context *ctx) {
    const bf_case shapes[] = {
        {.M = 1, .N = 301, .K = 77, .bias = true},
        {.M = 65, .N = 33, .K = 17, .tb = true},
        {.M = 100, .N = 92, .K = 300, .batch = 2, .ta = true, .bias = true},
    };
    for (size_t s = 0; s < TU_LEN(shapes); s++) bf16_matmul_case(ctx, shapes[s], 710 + s);
}
TU_VULKAN_TESTS(test_dtype_bf16_matmul_vulkan_more, bf16_vulkan_more_cases)

/* A bf16 product whose operands pass the binding limit is refused (not split yet), naming the
 * limit; float32 ones of the same shape are split. */
static void test_dtype_bf16_matmul_beyond_binding_limit(void **state) {
    (void)state;
    setenv("VKATTN_MAX_BINDING_BYTES", "4096", 1);
    vka_context *ctx = tu_gpu();
    unsetenv("VKATTN_MAX_BINDING_BYTES");
    if (!ctx) return;
    vka_tensor *a = make(ctx, 4 * 4096, VKA_BF16), *b = make(ctx, 4096 * 4, VKA_BF16);
    vka_tensor *out = tu_tensor(ctx, 16, NULL);
    vka_matmul_desc d = {.out = out, .a = a, .b = b, .M = 4, .N = 4, .K = 4096};
    vka_graph *g = NULL;
    assert_int_equal(record_matmul(ctx, &d, &g), VKA_ERROR_DEVICE_LIMIT);
    assert_non_null(strstr(vka_last_error(ctx), "matmul: a (32768 bytes) passes the binding limit"));
    assert_non_null(strstr(vka_last_error(ctx), "bf16 ones not yet"));
    vka_tensor_destroy(a);
    vka_tensor_destroy(b);
    vka_tensor_destroy(out);
    /* within the limit: a and b of 4080 bytes (2040 bf16), out of 64 floats, runs (bf16 views
     * count words, not elements) */
    a = make(ctx, 8 * 255, VKA_BF16), b = make(ctx, 255 * 8, VKA_BF16);
    out = tu_tensor(ctx, 64, NULL);
    d = (vka_matmul_desc){.out = out, .a = a, .b = b, .M = 8, .N = 8, .K = 255};
    assert_int_equal(record_matmul(ctx, &d, &g), VKA_SUCCESS);
    assert_int_equal(vka_graph_run(g), VKA_SUCCESS);
    vka_graph_destroy(g);
    /* out past the limit (M N = 1024 + 1 floats): refused, naming out */
    vka_tensor *big = tu_tensor(ctx, 1025, NULL), *a1 = make(ctx, 1025, VKA_BF16);
    vka_tensor *b1 = make(ctx, 1, VKA_BF16);
    d = (vka_matmul_desc){.out = big, .a = a1, .b = b1, .M = 1025, .N = 1, .K = 1};
    assert_int_equal(record_matmul(ctx, &d, &g), VKA_ERROR_DEVICE_LIMIT);
    assert_non_null(strstr(vka_last_error(ctx), "matmul: out (4100 bytes) passes"));
    vka_tensor_destroy(big);
    vka_tensor_destroy(a1);
    vka_tensor_destroy(b1);
    vka_tensor_destroy(a);
    vka_tensor_destroy(b);
    vka_tensor_destroy(out);
    tu_done(ctx);
}

/* An odd count of 16-bit elements does not count its word's padding half: a product needing
 * n + 1 elements of an n-element tensor is refused (both backends), naming the count. */
static void odd_count_cases(vka_context *ctx) {
    vka_tensor *a = make(ctx, 3, VKA_BF16), *b = make(ctx, 2, VKA_BF16);
    vka_tensor *o = tu_tensor(ctx, 2, NULL);
    tu_begin(ctx);
    vka_matmul_desc d = {.out = o, .a = a, .b = b, .M = 2, .N = 1, .K = 2};
    assert_int_equal(vka_matmul(ctx, &d), VKA_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(vka_last_error(ctx), "a holds 3 elements but M*K = 2*2 = 4"));
    vka_graph *g = NULL;
    vka_graph_end(ctx, &g);
    vka_tensor_destroy(a);
    vka_tensor_destroy(b);
    vka_tensor_destroy(o);
}

/* Mixed pairs are refused naming the tensor; a bf16 pair runs. */
static void bf16_matmul_refusals(vka_context *ctx) {
    vka_tensor *h = make(ctx, 64, VKA_BF16), *f = tu_tensor(ctx, 64, NULL);
    vka_tensor *out = tu_tensor(ctx, 64, NULL), *h2 = make(ctx, 64, VKA_BF16);
    tu_begin(ctx);
    vka_matmul_desc d = {.out = out, .a = h, .b = f, .M = 8, .N = 8, .K = 8};
    assert_int_equal(vka_matmul(ctx, &d), VKA_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(vka_last_error(ctx), "vka_matmul: b holds f32 elements; this op takes bf16"));
    d.out = h2, d.b = h;
    assert_int_equal(vka_matmul(ctx, &d), VKA_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(vka_last_error(ctx), "vka_matmul: out holds bf16 elements"));
    vka_graph *g = NULL;
    assert_int_equal(vka_graph_end(ctx, &g), VKA_ERROR_INVALID_ARGUMENT);
    d.out = out;
    assert_int_equal(record_matmul(ctx, &d, &g), VKA_SUCCESS);
    assert_int_equal(vka_graph_run(g), VKA_SUCCESS);
    vka_graph_destroy(g);
    vka_tensor_destroy(h);
    vka_tensor_destroy(h2);
    vka_tensor_destroy(f);
    vka_tensor_destroy(out);
}

/* Bad descs, and the byte limit counted in 2-byte elements. */
static void desc_cases(vka_context *ctx) {
    vka_tensor *t = (vka_tensor *)(uintptr_t)1;
    vka_tensor_desc d = {.n = 0, .dtype = VKA_BF16};
    assert_int_equal(vka_tensor_create_desc(ctx, &d, &t), VKA_ERROR_INVALID_ARGUMENT);
    assert_null(t);
    assert_non_null(strstr(vka_last_error(ctx), "n = 0"));
    d = (vka_tensor_desc){.n = 4, .dtype = (vka_dtype)9};
    assert_int_equal(vka_tensor_create_desc(ctx, &d, &t), VKA_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(vka_last_error(ctx), "dtype 9"));
    assert_int_equal(vka_tensor_create_desc(ctx, NULL, &t), VKA_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(vka_last_error(ctx), "desc is NULL"));
    /* f32 through the desc is vka_tensor_create's tensor */
    d = (vka_tensor_desc){.n = 5};
    assert_int_equal(vka_tensor_create_desc(ctx, &d, &t), VKA_SUCCESS);
    assert_int_equal(vka_tensor_dtype(t), VKA_F32);
    float x[5] = {1, 2, 3, 4, 5}, y[5];
    assert_int_equal(vka_tensor_write(t, 0, x, 5), VKA_SUCCESS);
    assert_int_equal(vka_tensor_read(t, 0, y, 5), VKA_SUCCESS);
    assert_memory_equal(x, y, sizeof x);
    vka_tensor_destroy(t);
}

static void test_dtype_tensors_cpu(void **state) {
    (void)state;
    vka_context *ctx = tu_cpu();
    tensor_cases(ctx);
    refusal_cases(ctx);
    desc_cases(ctx);
    bf16_matmul_refusals(ctx);
    odd_count_cases(ctx);
    tu_done(ctx);
}

static void test_dtype_tensors_vulkan(void **state) {
    (void)state;
    vka_context *ctx = tu_gpu();
    tensor_cases(ctx);
    refusal_cases(ctx);
    desc_cases(ctx);
    bf16_matmul_refusals(ctx);
    odd_count_cases(ctx);
    tu_done(ctx);
}

/* VKATTN_MAX_TENSOR_BYTES=65536: 32768 bf16 elements fit, 32769 do not (the message names the
 * type and the limit in elements of it). */
static void test_dtype_byte_limit(void **state) {
    (void)state;
    setenv("VKATTN_MAX_TENSOR_BYTES", "65536", 1);
    vka_context *ctx = tu_cpu();
    unsetenv("VKATTN_MAX_TENSOR_BYTES");
    vka_tensor *t = make(ctx, 32768, VKA_BF16);
    vka_tensor_destroy(t);
    vka_tensor_desc d = {.n = 32769, .dtype = VKA_F16};
    assert_int_equal(vka_tensor_create_desc(ctx, &d, &t), VKA_ERROR_DEVICE_LIMIT);
    assert_non_null(strstr(vka_last_error(ctx), "32769 f16 elements (65538 bytes)"));
    assert_non_null(strstr(vka_last_error(ctx), "(32768 elements)"));
    tu_done(ctx);
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dtype_names_and_sizes),
        cmocka_unit_test(test_convert_known_values),
        cmocka_unit_test(test_convert_every_word),
        cmocka_unit_test(test_dtype_tensors_cpu),
        cmocka_unit_test(test_dtype_tensors_vulkan),
        cmocka_unit_test(test_dtype_byte_limit),
        cmocka_unit_test(test_dtype_bf16_matmul_cpu),
        TU_VULKAN_TEST_ENTRIES(test_dtype_bf16_matmul_vulkan),
        cmocka_unit_test(test_dtype_bf16_matmul_beyond_binding_limit),
    };
    const struct CMUnitTest exhaustive[] = {
        TU_VULKAN_TEST_ENTRIES(test_dtype_bf16_matmul_vulkan_more),
    };
    TU_RETURN_GROUPS(argc, argv, tests, exhaustive, NULL, NULL);
}
