/* 16-bit tensors (vka_tensor_create_desc with VKA_BF16 / VKA_F16) and vka_convert: element
 * types, raw 16-bit reads and writes at any offset on both backends, the ops refusing them with
 * the op's and the tensor's names, and conversions against known values and every 16-bit word.
 * The one op that reads them, vka_matmul: test_matmul16. */
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
    assert_non_null(strstr(vka_last_error(ctx), "vka_matmul: a holds f32 elements and b f16 ones"));
    assert_int_equal(vka_copy(ctx, g, h, 8), VKA_ERROR_INVALID_ARGUMENT); /* test_dtype_copy.c */
    assert_non_null(strstr(vka_last_error(ctx), "vka_copy: bf16 src to f16 dst is not a conversion"));
    /* the 16-bit activations' ops: one 16-bit type a call, and only where they take them */
    assert_int_equal(vka_gelu_forward(ctx, h, g, 8), VKA_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(vka_last_error(ctx), "vka_gelu_forward: inp holds f16 elements but "
                                                "out bf16 ones"));
    assert_int_equal(vka_residual_forward(ctx, f, h, g, 8), VKA_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(vka_last_error(ctx), "b holds f16 elements but a bf16 ones"));
    assert_int_equal(vka_gelu_backward(ctx, h, f, f, 8), VKA_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(vka_last_error(ctx), "vka_gelu_backward: dinp holds bf16 elements"));
    vka_graph *graph = NULL;
    assert_int_equal(vka_graph_end(ctx, &graph), VKA_ERROR_INVALID_ARGUMENT);
    assert_null(graph);
    vka_tensor_destroy(d.out);
    vka_tensor_destroy(f);
    vka_tensor_destroy(g);
    vka_tensor_destroy(h);
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
    tu_done(ctx);
}

static void test_dtype_tensors_vulkan(void **state) {
    (void)state;
    vka_context *ctx = tu_gpu();
    tensor_cases(ctx);
    refusal_cases(ctx);
    desc_cases(ctx);
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

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dtype_names_and_sizes),
        cmocka_unit_test(test_convert_known_values),
        cmocka_unit_test(test_convert_every_word),
        cmocka_unit_test(test_dtype_tensors_cpu),
        cmocka_unit_test(test_dtype_tensors_vulkan),
        cmocka_unit_test(test_dtype_byte_limit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
