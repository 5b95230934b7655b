/* The CPU backend's bf16 matmul (src/cpu/matmul_bf16.c, compiled into this test with the fp32
 * matmul files it shares, so that each path can be called on its own; through vkattn.h,
 * vka_matmul with bf16 tensors runs the path the backend chooses: test_dtype). Every path this CPU runs (reference, widening AVX2 / AVX-512, AVX512-BF16
 * vdpbf16ps) against a float64 reference, with the bound of a sum of K exact products in fp32
 * (Higham, "Accuracy and Stability of Numerical Algorithms", 3.1): |c - s| <= gamma_K sum |a b|,
 * gamma_K = K u / (1 - K u), u = 2^-24; vdpbf16ps (the SDM: products exact, each accumulation
 * rounded to nearest even, so one rounding per product, as the reference; the odd K's zero
 * partner an exact + 0; denormals flushed, which the inputs here, |x| >= 2^-23 or 0, and their
 * sums never reach) has the same bound. Known values (products and sums of small integers,
 * exact in fp32) match exactly; each path sums in the order matmul_bf16.h states, bit for bit
 * against a scalar emulation of it (for vdpbf16ps: the SDM's order, k + 1 before k in a pair);
 * the widening paths match the reference bit for bit (the product of two bf16 is exact, so a
 * fused multiply-add rounds as the reference's add does); every path gives the same bits for
 * any thread count; the epilogue (alpha, bias, accumulate) is the fp32 matmul's. */
#include "test_util.h"

#include "cpu/matmul_bf16.h"

static const vkc_bf16_path PATHS[] = {VKC_BF16_REFERENCE, VKC_BF16_WIDEN_AVX2,
                                      VKC_BF16_WIDEN_AVX512, VKC_BF16_DPBF16};
#define N_PATHS (int)(sizeof PATHS / sizeof PATHS[0])

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint32_t rng_next(void) { /* xorshift64* */
    rng_state ^= rng_state >> 12, rng_state ^= rng_state << 25, rng_state ^= rng_state >> 27;
    return (uint32_t)((rng_state * 0x2545F4914F6CDD1Dull) >> 32);
}
static float rng_unit(void) { return (float)(rng_next() >> 8) / 8388608.0f - 1.0f; } /* [-1,1) */

typedef struct problem {
    int M, N, K, batch;
    bool ta, tb;
    size_t sa, sb, so; /* batch strides, 0: packed */
    uint16_t *a, *b;
    size_t na, nb, no;
} problem;

/* a and b of p filled by gen (bf16), strides odd (7 past the matrix) where batch > 1. */
static void problem_make(problem *p, int M, int N, int K, int batch, bool ta, bool tb,
                         float (*gen)(void)) {
    *p = (problem){M, N, K, batch, ta, tb, 0, 0, 0, NULL, NULL, 0, 0, 0};
    if (batch > 1) p->sa = (size_t)M * K + 7, p->sb = (size_t)K * N + 7, p->so = (size_t)M * N + 7;
    size_t sa = p->sa ? p->sa : (size_t)M * K, sb = p->sb ? p->sb : (size_t)K * N;
    size_t so = p->so ? p->so : (size_t)M * N;
    p->na = sa * batch, p->nb = sb * batch, p->no = so * batch;
    p->a = malloc(p->na * sizeof *p->a + 2), p->b = malloc(p->nb * sizeof *p->b + 2);
    assert_non_null(p->a), assert_non_null(p->b);
    for (size_t i = 0; i < p->na; i++) p->a[i] = vkc_f32_to_bf16_1(gen());
    for (size_t i = 0; i < p->nb; i++) p->b[i] = vkc_f32_to_bf16_1(gen());
}
static void problem_free(problem *p) { free(p->a), free(p->b); }

static float *run(const problem *p, vkc_bf16_path path, const float *bias, float alpha,
                  const float *init, int nt) {
    float *out = malloc(p->no * sizeof *out + 4);
    assert_non_null(out);
    for (size_t i = 0; i < p->no; i++) out[i] = init ? init[i] : NAN;
    vkc_matmul_bf16(out, p->a, p->b, bias, p->M, p->N, p->K, p->batch, p->ta, p->tb, p->sa,
                    p->sb, p->so, alpha, init != NULL, path, nt);
    return out;
}

static size_t at_a(const problem *p, int bi, int i, int k) {
    size_t sa = p->sa ? p->sa : (size_t)p->M * p->K;
    return bi * sa + (p->ta ? (size_t)k * p->M + i : (size_t)i * p->K + k);
}
static size_t at_b(const problem *p, int bi, int k, int j) {
    size_t sb = p->sb ? p->sb : (size_t)p->K * p->N;
    return bi * sb + (p->tb ? (size_t)j * p->K + k : (size_t)k * p->N + j);
}
static size_t at_o(const problem *p, int bi, int i, int j) {
    size_t so = p->so ? p->so : (size_t)p->M * p->N;
    return bi * so + (size_t)i * p->N + j;
}

/* out (alpha 1, no bias, no accumulate) against the float64 sum, within gamma_K sum |a b|;
 * exact where exact (the sum's terms small integers). Returns the largest error / bound. */
static double check_bound(const problem *p, const float *out, bool exact, const char *what) {
    const double u = ldexp(1.0, -24), g = p->K * u / (1 - p->K * u);
    double worst = 0;
    for (int bi = 0; bi < p->batch; bi++)
        for (int i = 0; i < p->M; i++)
            for (int j = 0; j < p->N; j++) {
                double s = 0, sabs = 0;
                for (int k = 0; k < p->K; k++) {
                    double x = vkc_bf16_to_f32_1(p->a[at_a(p, bi, i, k)]);
                    double y = vkc_bf16_to_f32_1(p->b[at_b(p, bi, k, j)]);
                    s += x * y, sabs += fabs(x * y);
                }
                double c = out[at_o(p, bi, i, j)], err = fabs(c - s), bound = g * sabs;
                if (exact ? err != 0 : !(err <= bound))
                    fail_msg("%s M=%d N=%d K=%d batch=%d ta=%d tb=%d: out(%d, %d, %d) = %.9g, "
                             "float64 %.17g, error %.3g > bound %.3g",
                             what, p->M, p->N, p->K, p->batch, p->ta, p->tb, bi, i, j, c, s, err,
                             bound);
                if (bound > 0 && err / bound > worst) worst = err / bound;
            }
    /* the rest of out (the strides' gaps) untouched */
    return worst;
}

static float gen_int(void) { return (float)((int)(rng_next() % 17) - 8); } /* -8 .. 8 */

static const int SIZES[] = {1, 3, 17, 65, 131, 261};
#define N_SIZES (int)(sizeof SIZES / sizeof SIZES[0])

/* Small integers: every product and partial sum exact in fp32 (|sum| <= 261 * 64), so every
 * path gives the float64 result exactly, on every shape and transpose. */
static void test_bf16_known_values(void **state) {
    (void)state;
    for (int pi = 0; pi < N_PATHS; pi++) {
        if (!vkc_bf16_path_supported(PATHS[pi])) continue;
        for (int s = 0; s < N_SIZES * N_SIZES; s++) {
            int M = SIZES[s % N_SIZES], N = SIZES[s / N_SIZES], K = SIZES[(s * 5 + 1) % N_SIZES];
            problem p;
            problem_make(&p, M, N, K, 1 + s % 2, s & 2, s & 4, gen_int);
            float *out = run(&p, PATHS[pi], NULL, 1.0f, NULL, 2);
            check_bound(&p, out, true, vkc_bf16_path_name(PATHS[pi]));
            free(out), problem_free(&p);
        }
    }
}

/* Uniform [-1, 1) in bf16: each path within gamma_K sum |a b| of float64, on every size of
 * M, N and K from SIZES (K odd, not a multiple of a block: 261 > 256), all four transposes,
 * batches with odd strides. */
static void test_bf16_error_bound(void **state) {
    (void)state;
    for (int pi = 0; pi < N_PATHS; pi++) {
        if (!vkc_bf16_path_supported(PATHS[pi])) continue;
        double worst = 0;
        for (int s = 0; s < N_SIZES * N_SIZES * N_SIZES; s += 5) {
            int M = SIZES[s % N_SIZES], N = SIZES[s / N_SIZES % N_SIZES];
            int K = SIZES[s / (N_SIZES * N_SIZES)];
            problem p;
            problem_make(&p, M, N, K, 1 + (s / 3) % 2, (s / 7) & 1, (s / 11) & 1, rng_unit);
            float *out = run(&p, PATHS[pi], NULL, 1.0f, NULL, 2);
            double w = check_bound(&p, out, false, vkc_bf16_path_name(PATHS[pi]));
            if (w > worst) worst = w;
            free(out), problem_free(&p);
        }
        print_message("%s: largest error %.3f of the bound\n", vkc_bf16_path_name(PATHS[pi]),
                      worst);
    }
}

/* A long K (several blocks, odd) and large values: still within the bound. */
static void test_bf16_long_k(void **state) {
    (void)state;
    for (int pi = 0; pi < N_PATHS; pi++) {
        if (!vkc_bf16_path_supported(PATHS[pi])) continue;
        for (int t = 0; t < 4; t++) {
            problem p;
            problem_make(&p, 9, 33, 4099, 1, t & 1, t & 2, rng_unit);
            float *out = run(&p, PATHS[pi], NULL, 1.0f, NULL, 2);
            check_bound(&p, out, false, vkc_bf16_path_name(PATHS[pi]));
            free(out), problem_free(&p);
        }
    }
}

static bool same_bits(const float *x, const float *y, size_t n) {
    return memcmp(x, y, n * sizeof *x) == 0;
}

/* The widening paths compute the reference's bits; every path the same bits for 1, 2 and 3
 * threads (tiles of several rows and columns, K over two blocks). */
static void test_bf16_paths_and_threads(void **state) {
    (void)state;
    problem p;
    problem_make(&p, 203, 301, 517, 2, false, true, rng_unit);
    float *ref = run(&p, VKC_BF16_REFERENCE, NULL, 1.0f, NULL, 1);
    for (int pi = 0; pi < N_PATHS; pi++) {
        if (!vkc_bf16_path_supported(PATHS[pi])) continue;
        float *o1 = run(&p, PATHS[pi], NULL, 1.0f, NULL, 1);
        if ((PATHS[pi] == VKC_BF16_WIDEN_AVX2 || PATHS[pi] == VKC_BF16_WIDEN_AVX512) &&
            !same_bits(o1, ref, p.no))
            fail_msg("%s differs from the reference", vkc_bf16_path_name(PATHS[pi]));
        for (int nt = 2; nt <= 3; nt++) {
            float *o = run(&p, PATHS[pi], NULL, 1.0f, NULL, nt);
            if (!same_bits(o, o1, p.no))
                fail_msg("%s: %d threads differ from 1", vkc_bf16_path_name(PATHS[pi]), nt);
            free(o);
        }
        free(o1);
    }
    free(ref), problem_free(&p);
}

/* The order matmul_bf16.h states, emulated in scalar fp32: the reference's (k in order) and
 * vdpbf16ps's (pairs, k + 1 before k). Returns the outputs that differ from out. */
static long count_order_mismatches(const problem *p, const float *out, bool pairs) {
    long bad = 0;
    for (int bi = 0; bi < p->batch; bi++)
        for (int i = 0; i < p->M; i++)
            for (int j = 0; j < p->N; j++) {
                float c = 0.0f;
                for (int k = 0; k < p->K; k += pairs ? 2 : 1) {
                    float x0 = vkc_bf16_to_f32_1(p->a[at_a(p, bi, i, k)]);
                    float y0 = vkc_bf16_to_f32_1(p->b[at_b(p, bi, k, j)]);
                    if (pairs && k + 1 < p->K) {
                        float x1 = vkc_bf16_to_f32_1(p->a[at_a(p, bi, i, k + 1)]);
                        float y1 = vkc_bf16_to_f32_1(p->b[at_b(p, bi, k + 1, j)]);
                        float t = x1 * y1;
                        c = c + t;
                    }
                    float t = x0 * y0;
                    c = c + t;
                }
                float o = out[at_o(p, bi, i, j)];
                if (memcmp(&c, &o, sizeof c)) bad++;
            }
    return bad;
}

/* Each path sums in the order matmul_bf16.h states, bit for bit (inputs well inside the normal
 * range, so vdpbf16ps's flushing of denormals plays no part). */
static void test_bf16_summation_order(void **state) {
    (void)state;
    for (int pi = 0; pi < N_PATHS; pi++) {
        if (!vkc_bf16_path_supported(PATHS[pi])) continue;
        for (int t = 0; t < 4; t++) {
            problem p;
            problem_make(&p, 19, 67, t < 2 ? 261 : 300, 2, t & 1, t & 2, rng_unit);
            float *out = run(&p, PATHS[pi], NULL, 1.0f, NULL, 2);
            long bad = count_order_mismatches(&p, out, PATHS[pi] == VKC_BF16_DPBF16);
            if (bad)
                fail_msg("%s ta=%d tb=%d K=%d: %ld of %zu outputs not in the stated order",
                         vkc_bf16_path_name(PATHS[pi]), p.ta, p.tb, p.K, bad,
                         (size_t)p.batch * p.M * p.N);
            free(out), problem_free(&p);
        }
    }
}

/* alpha, bias and accumulate: out = init + ((alpha * c) + bias[j]), c the plain product's
 * value, bit for bit (the fp32 matmul's epilogue); where the strides leave gaps, out untouched. */
static void test_bf16_epilogue(void **state) {
    (void)state;
    for (int pi = 0; pi < N_PATHS; pi++) {
        if (!vkc_bf16_path_supported(PATHS[pi])) continue;
        problem p;
        problem_make(&p, 37, 131, 65, 2, true, false, rng_unit);
        float *bias = malloc((size_t)p.N * sizeof *bias), *init = malloc(p.no * sizeof *init);
        assert_non_null(bias), assert_non_null(init);
        for (int j = 0; j < p.N; j++) bias[j] = rng_unit();
        for (size_t i = 0; i < p.no; i++) init[i] = rng_unit();
        float *c = run(&p, PATHS[pi], NULL, 1.0f, NULL, 2);
        float *o = run(&p, PATHS[pi], bias, 0.37f, init, 2);
        for (int bi = 0; bi < p.batch; bi++)
            for (int i = 0; i < p.M; i++)
                for (int j = 0; j < p.N; j++) {
                    size_t x = at_o(&p, bi, i, j);
                    float y = 0.37f * c[x];
                    y = y + bias[j];
                    y = init[x] + y;
                    if (memcmp(&y, &o[x], sizeof y))
                        fail_msg("%s: out(%d, %d, %d) = %.9g, not %.9g",
                                 vkc_bf16_path_name(PATHS[pi]), bi, i, j, o[x], y);
                }
        for (int g = 0; g < 7; g++) /* the gap after batch 0 */
            assert_true(same_bits(&o[(size_t)p.M * p.N + g], &init[(size_t)p.M * p.N + g], 1));
        free(c), free(o), free(bias), free(init), problem_free(&p);
    }
}

int main(void) {
    for (int pi = 0; pi < N_PATHS; pi++)
        print_message("%s: %s\n", vkc_bf16_path_name(PATHS[pi]),
                      vkc_bf16_path_supported(PATHS[pi]) ? "runs" : "not on this CPU");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bf16_known_values),
        cmocka_unit_test(test_bf16_error_bound),
        cmocka_unit_test(test_bf16_long_k),
        cmocka_unit_test(test_bf16_paths_and_threads),
        cmocka_unit_test(test_bf16_summation_order),
        cmocka_unit_test(test_bf16_epilogue),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
