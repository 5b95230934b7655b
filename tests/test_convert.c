/* The CPU's fp32 <-> bf16 / fp16 conversions (src/cpu/convert.c, compiled into
 * this test): every 16-bit pattern through the reference and back, the fast
 * versions (each feature set this CPU has: AVX2 integer, AVX2 + F16C, AVX-512,
 * AVX512-BF16) against the reference bit for bit on boundary cases and millions
 * of random fp32 patterns, and known values computed offline with Python
 * (struct.pack('e') for fp16; exact rational rounding for bf16). */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include "test_util.h"

#include "cpu/convert.h"

#include <math.h>
#include <stdint.h>
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#endif


/* The feature sets to compare with the reference: each subset of this CPU's
 * that picks a different path. */
static int feature_sets(unsigned *out) {
    unsigned all = vkc_cvt_features(VKC_ISA_AVX512);
    unsigned cand[] = {0, VKC_CVT_AVX2, VKC_CVT_AVX2 | VKC_CVT_F16C,
                       VKC_CVT_AVX2 | VKC_CVT_F16C | VKC_CVT_AVX512,
                       VKC_CVT_AVX2 | VKC_CVT_F16C | VKC_CVT_AVX512 | VKC_CVT_BF16};
    int n = 0;
    for (size_t i = 0; i < sizeof cand / sizeof cand[0]; i++)
        if ((cand[i] & all) == cand[i]) out[n++] = cand[i];
    print_message("  features on this CPU: 0x%x (%d paths tested)\n", all, n);
    return n;
}

static void test_convert_known_values(void **state) {
    (void)state;
    /* value, fp32 bits, fp16, bf16: Python offline (see the file comment) */
    static const struct {
        uint32_t f32;
        uint16_t f16, bf16;
    } k[] = {
        {0x3F800000u, 0x3C00, 0x3F80}, /* 1 */
        {0xC0000000u, 0xC000, 0xC000}, /* -2 */
        {0x477FE000u, 0x7BFF, 0x4780}, /* 65504, fp16's largest */
        {0x477FEFFFu, 0x7BFF, 0x4780}, /* just below 65520 */
        {0x477FF000u, 0x7C00, 0x4780}, /* 65520: fp16 Inf */
        {0x33800000u, 0x0001, 0x3380}, /* 2^-24, fp16's smallest subnormal */
        {0x33000000u, 0x0000, 0x3300}, /* 2^-25: a tie, to the even 0 */
        {0x33400000u, 0x0001, 0x3340}, /* 1.5 2^-25 */
        {0x38800000u, 0x0400, 0x3880}, /* 2^-14, fp16's smallest normal */
        {0x3727C5ACu, 0x00A8, 0x3728}, /* 1e-5 (subnormal in fp16) */
        {0x3EAAAAABu, 0x3555, 0x3EAB}, /* 1/3 */
        {0x40490FDBu, 0x4248, 0x4049}, /* pi */
        {0x3DCCCCCDu, 0x2E66, 0x3DCD}, /* 0.1 */
        {0x80000000u, 0x8000, 0x8000}, /* -0 */
        {0x7F800000u, 0x7C00, 0x7F80}, /* Inf */
        {0xFF800000u, 0xFC00, 0xFF80}, /* -Inf */
        {0x7F7FFFFFu, 0x7C00, 0x7F80}, /* fp32's largest: Inf in both */
        {0x00000001u, 0x0000, 0x0000}, /* fp32's smallest subnormal: bf16 flushes (SDM) */
        {0x807FFFFFu, 0x8000, 0x8000}, /* largest negative subnormal: -0 */
        {0x00800000u, 0x0000, 0x0080}, /* fp32's smallest normal stays bf16 normal */
        {0x3F808000u, 0x3C04, 0x3F80}, /* bf16 tie, even below */
        {0x3F818000u, 0x3C0C, 0x3F82}, /* bf16 tie, even above */
        {0x3F801000u, 0x3C00, 0x3F80}, /* fp16 tie, even below */
        {0x3F803000u, 0x3C02, 0x3F80}, /* fp16 tie, even above */
    };
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        float x = tu_bits_f32(k[i].f32);
        uint16_t h = vkc_f32_to_f16_1(x), b = vkc_f32_to_bf16_1(x);
        if (h != k[i].f16 || b != k[i].bf16)
            fail_msg("0x%08X: fp16 0x%04X (want 0x%04X), bf16 0x%04X (want 0x%04X)", k[i].f32, h,
                     k[i].f16, b, k[i].bf16);
    }
    assert_true(vkc_f16_to_f32_1(0x7BFF) == 65504.0f);
    assert_true(vkc_f16_to_f32_1(0x0001) == ldexpf(1.0f, -24));
    assert_true(vkc_f16_to_f32_1(0x3555) == 0.333251953125f);
    assert_true(vkc_bf16_to_f32_1(0x4049) == 3.140625f);
    assert_true(vkc_bf16_to_f32_1(0x3EAB) == 0.333984375f);
    /* NaN: quiet, sign and top payload kept */
    assert_int_equal(vkc_f32_to_bf16_1(tu_bits_f32(0x7F800001u)), 0x7FC0);
    assert_int_equal(vkc_f32_to_bf16_1(tu_bits_f32(0xFFA50000u)), 0xFFE5);
    assert_int_equal(vkc_f32_to_f16_1(tu_bits_f32(0x7F800001u)), 0x7E00);
    assert_int_equal(vkc_f32_to_f16_1(tu_bits_f32(0xFFC02000u)), 0xFE01);
    assert_int_equal(tu_f32_bits(vkc_f16_to_f32_1(0x7C01)), 0x7FC02000u);
}

/* 16 -> 32 -> 16 gives every pattern back, except (as convert.h says) bf16
 * subnormals (signed zero) and signalling NaNs (quieted); 32 -> 16 of a widened
 * value is exact, and widening keeps the value (checked against the formula for
 * finite patterns). */
static void test_convert_every_16bit_pattern_round_trips(void **state) {
    (void)state;
    int changed_b = 0, changed_h = 0;
    for (uint32_t p = 0; p < 65536; p++) {
        uint16_t w = (uint16_t)p;
        /* bf16 */
        uint32_t e = (p >> 7) & 0xFF, m = p & 0x7F;
        uint16_t want = w;
        if (e == 0) want = (uint16_t)(p & 0x8000);
        if (e == 0xFF && m && !(m & 0x40)) want = (uint16_t)(p | 0x40);
        uint16_t got = vkc_f32_to_bf16_1(vkc_bf16_to_f32_1(w));
        if (got != want) fail_msg("bf16 0x%04X -> 0x%04X, want 0x%04X", p, got, want);
        changed_b += got != w;
        /* fp16 */
        e = (p >> 10) & 0x1F;
        m = p & 0x3FF;
        float x = vkc_f16_to_f32_1(w);
        if (e != 31) {
            double v = ldexp(e ? (double)(m | 0x400) : (double)m, (e ? (int)e : 1) - 25);
            if (p & 0x8000) v = -v;
            if ((double)x != v || !!signbit(x) != !!(p & 0x8000))
                fail_msg("fp16 0x%04X widened to %a, want %a", p, (double)x, v);
        }
        want = w;
        if (e == 31 && m && !(m & 0x200)) want = (uint16_t)(p | 0x200);
        got = vkc_f32_to_f16_1(x);
        if (got != want) fail_msg("fp16 0x%04X -> 0x%04X, want 0x%04X", p, got, want);
        changed_h += got != w;
    }
    /* 2 x 127 subnormals and 2 x 63 signalling NaNs in bf16; 2 x 511 signalling
     * NaNs in fp16 */
    assert_int_equal(changed_b, 2 * 127 + 2 * 63);
    assert_int_equal(changed_h, 2 * 511);
}

static uint64_t rng(uint64_t *s) {
    *s += 0x9E3779B97F4A7C15ull;
    uint64_t z = *s;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

#define BOUNDARY_MAX 110000 /* what boundary_patterns writes, at most */

/* Boundary patterns: around every rounding tie and threshold, both signs. */
static size_t boundary_patterns(uint32_t *u) {
    static const uint32_t base[] = {
        0x00000000u, 0x00000001u, 0x007FFFFFu, 0x00800000u, 0x33000000u, 0x33000001u,
        0x33800000u, 0x337FFFFFu, 0x387FE000u, 0x387FF000u, 0x38800000u, 0x3F800000u,
        0x3F801000u, 0x3F803000u, 0x3F808000u, 0x3F818000u, 0x477FE000u, 0x477FF000u,
        0x477FEFFFu, 0x47800000u, 0x7F7F7FFFu, 0x7F7F8000u, 0x7F7FFFFFu, 0x7F800000u,
        0x7F800001u, 0x7FBFFFFFu, 0x7FC00000u, 0x7FFFFFFFu, 0x7F802000u, 0x7FA5A5A5u};
    size_t n = 0;
    for (size_t i = 0; i < sizeof base / sizeof base[0]; i++)
        for (int d = -2; d <= 2; d++)
            for (uint32_t s = 0; s < 2; s++)
                u[n++] = ((base[i] + (uint32_t)d) & 0x7FFFFFFFu) | (s << 31);
    /* every fp16 and bf16 halfway point, both directions of the tie: the pattern
     * between two neighbours and one ulp either side */
    for (uint32_t p = 0; p < 0x7C00; p++) {
        uint32_t mid =
            (tu_f32_bits(vkc_f16_to_f32_1((uint16_t)p)) + tu_f32_bits(vkc_f16_to_f32_1((uint16_t)(p + 1)))) / 2;
        if (p >= 0x400) {
            u[n++] = mid;
            u[n++] = mid - 1;
            u[n++] = mid + 1;
        }
    }
    /* fp16 subnormal ties: (2k + 1) 2^-25, exact in fp32 */
    for (uint32_t k = 0; k < 1024; k++) {
        uint32_t mid = tu_f32_bits(ldexpf((float)(2 * k + 1), -25));
        u[n++] = mid;
        u[n++] = mid - 1;
        u[n++] = mid + 1;
    }
    for (uint32_t p = 0x80; p < 0x7F80; p += 37) {
        uint32_t mid = (p << 16) | 0x8000u;
        u[n++] = mid;
        u[n++] = mid - 1;
        u[n++] = mid + 1;
        u[n++] = mid | 0x80000000u;
    }
    return n;
}

static void compare_fast(const char *what, const uint32_t *u, size_t n, const unsigned *fs,
                         int nf) {
    const float *x = (const float *)u;
    uint16_t *ref = test_malloc(n * 2), *got = test_malloc(n * 2);
    float *wr = test_malloc(n * 4), *wg = test_malloc(n * 4);
    for (int k = 0; k < 2; k++) {
        if (k == 0)
            vkc_f32_to_bf16_ref(ref, x, n);
        else
            vkc_f32_to_f16_ref(ref, x, n);
        for (int f = 0; f < nf; f++) {
            /* odd offsets and lengths: the tails go through the reference, the rest
             * not */
            for (size_t off = 0; off < 2; off++) {
                if (k == 0)
                    vkc_f32_to_bf16(got + off, x + off, n - off, fs[f]);
                else
                    vkc_f32_to_f16(got + off, x + off, n - off, fs[f]);
                for (size_t i = off; i < n; i++)
                    if (got[i] != ref[i])
                        fail_msg("%s %s features 0x%x: 0x%08X -> 0x%04X, reference 0x%04X", what,
                                 k ? "fp16" : "bf16", fs[f], u[i], got[i], ref[i]);
            }
            /* widening the narrowed words */
            if (k == 0)
                vkc_bf16_to_f32_ref(wr, ref, n), vkc_bf16_to_f32(wg, ref, n, fs[f]);
            else
                vkc_f16_to_f32_ref(wr, ref, n), vkc_f16_to_f32(wg, ref, n, fs[f]);
            if (memcmp(wr, wg, n * 4))
                fail_msg("%s: widening differs (features 0x%x)", what, fs[f]);
        }
    }
    test_free(ref);
    test_free(got);
    test_free(wr);
    test_free(wg);
}

static void test_convert_fast_matches_reference_boundaries(void **state) {
    (void)state;
    unsigned fs[8];
    int nf = feature_sets(fs);
    uint32_t *u = test_malloc(BOUNDARY_MAX * 4);
    size_t n = boundary_patterns(u);
    assert_true(n <= BOUNDARY_MAX);
    compare_fast("boundary", u, n, fs, nf);
    print_message("  %zu boundary patterns\n", n);
    test_free(u);
}

static void test_convert_fast_matches_reference_random(void **state) {
    (void)state;
    unsigned fs[8];
    int nf = feature_sets(fs);
    size_t n = 1u << 22;
    uint32_t *u = test_malloc(n * 4);
    uint64_t s = 19;
    for (size_t i = 0; i < n; i++) u[i] = (uint32_t)rng(&s);
    compare_fast("random", u, n, fs, nf);
    /* and every 16-bit pattern widened (fast against reference) */
    uint16_t *w = test_malloc(65536 * 2);
    float *a = test_malloc(65536 * 4), *b = test_malloc(65536 * 4);
    for (uint32_t p = 0; p < 65536; p++) w[p] = (uint16_t)p;
    for (int f = 0; f < nf; f++) {
        vkc_bf16_to_f32_ref(a, w, 65536);
        vkc_bf16_to_f32(b, w, 65536, fs[f]);
        assert_memory_equal(a, b, 65536 * 4);
        vkc_f16_to_f32_ref(a, w, 65536);
        vkc_f16_to_f32(b, w, 65536, fs[f]);
        if (memcmp(a, b, 65536 * 4))
            for (uint32_t p = 0; p < 65536; p++)
                if (tu_f32_bits(a[p]) != tu_f32_bits(b[p]))
                    fail_msg("fp16 0x%04X widened 0x%08X, reference 0x%08X (features 0x%x)", p,
                             tu_f32_bits(b[p]), tu_f32_bits(a[p]), fs[f]);
    }
    print_message("  %zu random fp32 patterns\n", n);
    test_free(w);
    test_free(a);
    test_free(b);
    test_free(u);
}

/* The CPU backend's device says which conversion instructions it uses: what cpuid says,
 * asked here independently of the library. */
static void test_convert_cpu_backend_device_info(void **state) {
    (void)state;
    vka_context *ctx = tu_cpu();
    vka_device_info info;
    assert_int_equal(vka_context_selected_device(ctx, &info), VKA_SUCCESS);
    assert_int_equal(info.path_16bit, VKA_16BIT_HOST);
    assert_false(info.storage_16bit_supported || info.float16_supported || info.storage_16bit ||
                 info.float16);
    bool f16c = false, bf16 = false;
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    __builtin_cpu_init();
    bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    bool avx512 = __builtin_cpu_supports("avx512f");
    const char *k = getenv("VKATTN_CPU_KERNELS");
    bool reference = k && strcmp(k, "reference") == 0;
    bool only_avx2 = k && strcmp(k, "fast-avx2") == 0;
    /* cpuid: F16C is leaf 1 ECX bit 29, AVX512_BF16 leaf 7 subleaf 1 EAX bit 5 (Intel SDM) */
    unsigned a = 0, b = 0, c = 0, d = 0;
    bool has_f16c = __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29));
    bool has_bf16 = __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a & (1u << 5));
    f16c = !reference && (avx512 || (avx2 && has_f16c));
    bf16 = !reference && !only_avx2 && avx512 && has_bf16;
#endif
    print_message("  CPU backend: %s; F16C %s, AVX512-BF16 %s\n",
                  vka_16bit_path_string(info.path_16bit), info.cpu_f16c ? "yes" : "no",
                  info.cpu_avx512_bf16 ? "yes" : "no");
    assert_int_equal(info.cpu_f16c, f16c);
    assert_int_equal(info.cpu_avx512_bf16, bf16);
    tu_done(ctx);
}

/* The selected device's 16-bit path with VKATTN_16BIT_STORAGE=0: packed, whatever it has. */
static void packed_when_turned_off(void) {
    const char *was = getenv("VKATTN_16BIT_STORAGE");
    char saved[16] = "";
    if (was) snprintf(saved, sizeof saved, "%s", was);
    setenv("VKATTN_16BIT_STORAGE", "0", 1);
    vka_context *ctx = tu_gpu();
    if (was) setenv("VKATTN_16BIT_STORAGE", saved, 1);
    else unsetenv("VKATTN_16BIT_STORAGE");
    vka_device_info d;
    assert_int_equal(vka_context_selected_device(ctx, &d), VKA_SUCCESS);
    assert_int_equal(d.path_16bit, VKA_16BIT_PACKED);
    assert_int_equal(d.storage_16bit, d.storage_16bit_supported); /* still enabled */
    tu_done(ctx);
}

/* A Vulkan device vkattn creates gets every 16-bit feature it supports (lavapipe: both); the
 * path follows from its 16-bit storage (never fp16 arithmetic: vka_16bit_path) and
 * VKATTN_16BIT_STORAGE; the other devices report what they would get. */
static void test_convert_vulkan_device_info(void **state) {
    (void)state;
    vka_context *ctx = tu_gpu();
    if (!ctx) return;
    const char *s16 = getenv("VKATTN_16BIT_STORAGE");
    bool off = s16 && strcmp(s16, "0") == 0;
    for (uint32_t i = 0; i < vka_context_device_count(ctx); i++) {
        vka_device_info d;
        assert_int_equal(vka_context_device_info(ctx, i, &d), VKA_SUCCESS);
        vka_16bit_path want = d.storage_16bit_supported && !(d.selected && off)
                                  ? VKA_16BIT_STORAGE
                                  : VKA_16BIT_PACKED;
        print_message("  device %u (%s, %s): %s\n", i, d.name, d.driver_name,
                      vka_16bit_path_string(d.path_16bit));
        assert_int_equal(d.path_16bit, want);
        assert_false(d.cpu_f16c || d.cpu_avx512_bf16);
        if (d.selected) {
            assert_int_equal(d.storage_16bit, d.storage_16bit_supported);
            assert_int_equal(d.float16, d.float16_supported);
        } else {
            assert_false(d.storage_16bit || d.float16);
        }
        if (strcmp(d.driver_name, "llvmpipe") == 0)
            assert_true(d.storage_16bit_supported && d.float16_supported);
    }
    assert_string_equal(vka_16bit_path_string(VKA_16BIT_PACKED),
                        "none: bf16/fp16 packed in 32-bit words");
    assert_string_equal(vka_16bit_path_string((vka_16bit_path)99), "unknown");
    tu_done(ctx);
    packed_when_turned_off();
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_convert_known_values),
        cmocka_unit_test(test_convert_every_16bit_pattern_round_trips),
        cmocka_unit_test(test_convert_fast_matches_reference_boundaries),
        cmocka_unit_test(test_convert_fast_matches_reference_random),
        cmocka_unit_test(test_convert_cpu_backend_device_info),
        cmocka_unit_test(test_convert_vulkan_device_info),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
