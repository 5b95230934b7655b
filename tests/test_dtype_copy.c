/* vka_copy between types: float32 -> bf16 / fp16 and back, and 16-bit copies, on the device
 * (the backends' convert op: src/cpu/convert.c's kernels, shaders/convert.comp), against the
 * host's vka_convert bit for bit: awkward lengths (1, 2, 3, 7, longer than a workgroup, odd),
 * the format's edge values (ties, the largest finite values, Inf, NaN, subnormals, signed
 * zeros), elements past n left alone, tensors past the binding limit split into blocks, and the
 * refusals. */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include "op_util.h"

#include <float.h>

static vka_tensor *make(vka_context *ctx, size_t n, vka_dtype dtype) {
    vka_tensor_desc d = {.n = n, .dtype = dtype};
    vka_tensor *t = NULL;
    if (vka_tensor_create_desc(ctx, &d, &t) != VKA_SUCCESS)
        fail_msg("%s tensor of %zu: %s", vka_dtype_string(dtype), n, vka_last_error(ctx));
    return t;
}

/* n floats: random values of every magnitude (random bit patterns, NaNs among them) with the
 * edge values of both formats at the start. */
static float *edge_values(size_t n, uint64_t seed) {
    static const uint32_t edges[] = {
        0x3F808000u, 0x3F818000u, 0x3F808001u, /* bf16 ties to even, past a tie */
        0x3F801000u, 0x3F803000u,              /* fp16 ties to even (1 + 2^-11, 1 + 3 2^-11) */
        0x7F7FFFFFu, 0xFF7FFFFFu,              /* FLT_MAX: bf16 rounds it to Inf */
        0x477FE000u, 0x477FEFFFu, 0x477FF000u, /* 65504, below 65520, 65520 (fp16 Inf) */
        0x7F800000u, 0xFF800000u, 0x7FC00000u, 0xFFC00001u, 0x7F800001u, /* Inf, NaNs */
        0x00000001u, 0x80000001u, 0x007FFFFFu, /* f32 subnormals: bf16 signed zeros */
        0x33800000u, 0x33000000u, 0x33C00000u, 0x38800000u, 0x387FC000u, /* fp16 subnormals */
        0x00000000u, 0x80000000u, 0x3F800000u, 0xBF800000u,
    };
    float *x = malloc(n * sizeof *x);
    uint64_t s = seed;
    for (size_t i = 0; i < n; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        uint32_t u = (uint32_t)(s >> 32);
        if (i % 3 == 1) u = (u & 0x803FFFFFu) | 0x3F000000u; /* and ordinary ones near 1 */
        x[i] = tu_bits_f32(i < TU_LEN(edges) ? edges[i] : u);
    }
    return x;
}

/* Elements of a 16-bit tensor, as words. */
static uint16_t *read16(const vka_tensor *t, size_t n) {
    uint16_t *h = malloc(n * sizeof *h);
    if (vka_tensor_read(t, 0, h, n) != VKA_SUCCESS) fail_msg("16-bit read failed");
    return h;
}

/* One length and type: f32 -> 16-bit -> f32 and 16-bit -> 16-bit, each into a tensor one
 * element longer holding sentinels, in one graph. */
static void copy_case(vka_context *ctx, vka_dtype t, size_t n, uint64_t seed) {
    const char *tn = vka_dtype_string(t);
    float *x = edge_values(n, seed);
    uint16_t *want16 = malloc((n + 1) * sizeof *want16);
    float *want32 = malloc((n + 1) * sizeof *want32);
    assert_int_equal(vka_convert(t, want16, VKA_F32, x, n), VKA_SUCCESS);
    assert_int_equal(vka_convert(VKA_F32, want32, t, want16, n), VKA_SUCCESS);
    want16[n] = 0xABCD;
    want32[n] = tu_bits_f32(0x12345678u);

    vka_tensor *src = tu_tensor(ctx, n, x), *h = make(ctx, n + 1, t), *h2 = make(ctx, n + 1, t);
    vka_tensor *back = tu_tensor(ctx, n + 1, NULL);
    uint16_t *sent16 = malloc((n + 1) * sizeof *sent16);
    for (size_t i = 0; i <= n; i++) sent16[i] = 0xABCD;
    assert_int_equal(vka_tensor_write(h, 0, sent16, n + 1), VKA_SUCCESS);
    assert_int_equal(vka_tensor_write(h2, 0, sent16, n + 1), VKA_SUCCESS);
    assert_int_equal(vka_tensor_write(back, n, &want32[n], 1), VKA_SUCCESS);

    tu_begin(ctx);
    assert_int_equal(vka_copy(ctx, h, src, n), VKA_SUCCESS);
    assert_int_equal(vka_copy(ctx, back, h, n), VKA_SUCCESS);
    assert_int_equal(vka_copy(ctx, h2, h, n), VKA_SUCCESS);
    tu_run(ctx);

    uint16_t *got16 = read16(h, n + 1), *got16b = read16(h2, n + 1);
    float *got32 = tu_read(back, n + 1);
    for (size_t i = 0; i <= n; i++) {
        if (got16[i] != want16[i])
            fail_msg("%s n=%zu element %zu (0x%08x): device 0x%04x, vka_convert 0x%04x", tn, n, i,
                     i < n ? tu_f32_bits(x[i]) : 0u, got16[i], want16[i]);
        if (got16b[i] != want16[i])
            fail_msg("%s copy n=%zu element %zu: 0x%04x, want 0x%04x", tn, n, i, got16b[i],
                     want16[i]);
        if (tu_f32_bits(got32[i]) != tu_f32_bits(want32[i]))
            fail_msg("%s -> f32 n=%zu element %zu (0x%04x): device 0x%08x, vka_convert 0x%08x", tn,
                     n, i, want16[i], tu_f32_bits(got32[i]), tu_f32_bits(want32[i]));
    }
    free(got16);
    free(got16b);
    free(got32);
    free(sent16);
    free(x);
    free(want16);
    free(want32);
    vka_tensor_destroy(src);
    vka_tensor_destroy(h);
    vka_tensor_destroy(h2);
    vka_tensor_destroy(back);
}

static void copy_cases(vka_context *ctx) {
    const size_t lens[] = {1, 2, 3, 7, 64, 1000, 1001, 70001};
    const vka_dtype types[2] = {VKA_BF16, VKA_F16};
    for (int k = 0; k < 2; k++)
        for (size_t i = 0; i < TU_LEN(lens); i++) copy_case(ctx, types[k], lens[i], 100 + i);
}

/* bf16 <-> fp16, n past a tensor, n = 0, overlapping views: refused, naming the problem. */
static void refusal_cases(vka_context *ctx) {
    vka_tensor *b = make(ctx, 9, VKA_BF16), *f = make(ctx, 9, VKA_F16), *x = tu_tensor(ctx, 9, NULL);
    tu_begin(ctx);
    assert_int_equal(vka_copy(ctx, f, b, 9), VKA_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(vka_last_error(ctx), "vka_copy: bf16 src to f16 dst is not a conversion"));
    assert_int_equal(vka_copy(ctx, b, x, 10), VKA_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(vka_last_error(ctx), "vka_copy: dst holds 9 elements but n = 10"));
    assert_int_equal(vka_copy(ctx, x, f, 0), VKA_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(vka_last_error(ctx), "n = 0 must be positive"));
    assert_int_equal(vka_copy(ctx, b, b, 9), VKA_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(vka_last_error(ctx), "vka_copy: dst overlaps src"));
    assert_int_equal(vka_copy(ctx, x, x, 9), VKA_ERROR_INVALID_ARGUMENT); /* float32 too */
    assert_non_null(strstr(vka_last_error(ctx), "vka_copy: dst overlaps src"));
    vka_graph *g = NULL;
    assert_int_equal(vka_graph_end(ctx, &g), VKA_ERROR_INVALID_ARGUMENT);
    assert_null(g);
    /* known values */
    float one[9] = {1, 2, 3, 4, 5, 6, 7, 8, 0.1f};
    assert_int_equal(vka_tensor_write(x, 0, one, 9), VKA_SUCCESS);
    tu_begin(ctx);
    assert_int_equal(vka_copy(ctx, f, x, 9), VKA_SUCCESS);
    tu_run(ctx);
    uint16_t *h = read16(f, 9);
    assert_int_equal(h[0], 0x3C00);
    assert_int_equal(h[8], 0x2E66); /* 0.1 in fp16 */
    free(h);
    vka_tensor_destroy(b);
    vka_tensor_destroy(f);
    vka_tensor_destroy(x);
}

static void test_dtype_copy_cpu(void **state) {
    (void)state;
    vka_context *ctx = tu_cpu();
    copy_cases(ctx);
    refusal_cases(ctx);
    tu_done(ctx);
    ctx = tu_cpu_kernels(VKA_CPU_KERNELS_REFERENCE, 1); /* the scalar conversions */
    copy_cases(ctx);
    tu_done(ctx);
}

static void test_dtype_copy_vulkan(void **state) {
    (void)state;
    vka_context *ctx = tu_gpu();
    if (!ctx) return;
    copy_cases(ctx);
    refusal_cases(ctx);
    tu_done(ctx);
}

/* Every bf16 and fp16 bit pattern widened to float32 on ctx (shaders/half.glsl's f16_to_f32 on
 * Vulkan, branch-free: normal, subnormal, zero, Inf and NaN paths) equals vka_convert's bits. */
static void widen_every_pattern(vka_context *ctx) {
    const vka_dtype types[] = {VKA_BF16, VKA_F16};
    uint16_t *all = malloc(65536 * sizeof *all);
    uint32_t *want = malloc(65536 * sizeof *want), *got = malloc(65536 * sizeof *got);
    for (uint32_t p = 0; p < 65536; p++) all[p] = (uint16_t)p;
    for (size_t t = 0; t < TU_LEN(types); t++) {
        assert_int_equal(vka_convert(VKA_F32, want, types[t], all, 65536), VKA_SUCCESS);
        vka_tensor *h = make(ctx, 65536, types[t]), *x = make(ctx, 65536, VKA_F32);
        assert_int_equal(vka_tensor_write(h, 0, all, 65536), VKA_SUCCESS);
        tu_begin(ctx);
        assert_int_equal(vka_copy(ctx, x, h, 65536), VKA_SUCCESS);
        tu_run(ctx);
        assert_int_equal(vka_tensor_read(x, 0, got, 65536), VKA_SUCCESS);
        for (uint32_t p = 0; p < 65536; p++)
            if (got[p] != want[p])
                fail_msg("%s 0x%04X widened to 0x%08X, vka_convert gives 0x%08X",
                         vka_dtype_string(types[t]), p, got[p], want[p]);
        vka_tensor_destroy(h);
        vka_tensor_destroy(x);
    }
    free(all);
    free(want);
    free(got);
}

static void test_dtype_copy_widens_every_pattern(void **state) {
    (void)state;
    vka_context *ctx = tu_cpu();
    widen_every_pattern(ctx);
    tu_done(ctx);
    ctx = tu_gpu();
    if (!ctx) return;
    widen_every_pattern(ctx);
    tu_done(ctx);
}

/* A binding limit of 4 KiB: 70001 elements go in blocks (of 1022 words' worth), each block's
 * 16-bit views starting at whole words. */
static void test_dtype_copy_beyond_binding_limit(void **state) {
    (void)state;
    setenv("VKATTN_MAX_BINDING_BYTES", "4096", 1);
    vka_context *ctx = tu_gpu();
    unsetenv("VKATTN_MAX_BINDING_BYTES");
    if (!ctx) return;
    copy_case(ctx, VKA_BF16, 70001, 7);
    copy_case(ctx, VKA_F16, 5001, 8);
    tu_done(ctx);
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dtype_copy_cpu),
        cmocka_unit_test(test_dtype_copy_vulkan),
        cmocka_unit_test(test_dtype_copy_beyond_binding_limit),
        cmocka_unit_test(test_dtype_copy_widens_every_pattern),
    };
    (void)argc;
    (void)argv;
    return cmocka_run_group_tests(tests, NULL, NULL);
}
