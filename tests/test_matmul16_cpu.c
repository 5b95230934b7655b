/* The CPU backend's 16-bit matmul (src/cpu/matmul16.c, compiled into this test with the fp32
 * matmul files it shares, so that each path can be called on its own; through vkattn.h,
 * vka_matmul with 16-bit tensors runs the path the backend chooses: test_matmul16). Every path
 * this CPU runs (reference, widening AVX2 / AVX-512, AVX512-BF16 vdpbf16ps for bf16), for a and b
 * in bf16 and in fp16, against a float64 reference, with the bound of a sum of K exact products
 * in fp32 (Higham, "Accuracy and Stability of Numerical Algorithms", 3.1): |c - s| <= gamma_K sum
 * |a b|, gamma_K = K u / (1 - K u), u = 2^-24; vdpbf16ps (the SDM: products exact, each
 * accumulation rounded to nearest even, so one rounding per product, as the reference; the odd
 * K's zero partner an exact + 0; denormals flushed, which the inputs here, |x| >= 2^-23 or 0, and
 * their sums never reach) has the same bound. Known values (products and sums of small
 * integers, exact in fp32) match exactly; each path sums in the order matmul16.h states, bit for
 * bit against a scalar emulation of it (for vdpbf16ps: the SDM's order, k + 1 before k in a
 * pair); the widening tiles match the reference bit for bit (the product of two bf16 or two
 * fp16 is exact, so a fused multiply-add rounds as the reference's add does), on fp16's extremes
 * too (65504, subnormals down to 2^-24); NaN and infinities propagate; every path gives the
 * same bits for any thread count; the epilogue (alpha, bias, accumulate) is the fp32 matmul's.
 * The fast paths' GEMV (few rows of a, b transposed: decoding) sums in its 32 strands' order, bit
 * for bit against its emulation, on M both sides of its cut-off, K from 1 to past two of its
 * blocks, the LM head's N = 50257, NaN and infinities, fp16's extremes, the epilogue. */
#include "test_util.h"

#include "cpu/matmul16.h"

static const vkc_mm16_path PATHS[] = {VKC_MM16_REFERENCE, VKC_MM16_WIDEN_AVX2,
                                      VKC_MM16_WIDEN_AVX512, VKC_MM16_DPBF16, VKC_MM16_AMX};
#define N_PATHS (int)(sizeof PATHS / sizeof PATHS[0])
static const vka_dtype TYPES[] = {VKA_BF16, VKA_F16};
#define N_TYPES (int)(sizeof TYPES / sizeof TYPES[0])
/* Whether this CPU runs PATHS[pi] for TYPES[ti]. */
static bool runs(int ti, int pi) { return vkc_mm16_path_supported(TYPES[ti], PATHS[pi]); }

/* "bf16 widen-avx2" */
static const char *run_name(vka_dtype t, vkc_mm16_path path) {
    static char name[64];
    snprintf(name, sizeof name, "%s %s", t == VKA_F16 ? "f16" : "bf16", vkc_mm16_path_name(path));
    return name;
}

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint32_t rng_next(void) { /* xorshift64* */
    rng_state ^= rng_state >> 12, rng_state ^= rng_state << 25, rng_state ^= rng_state >> 27;
    return (uint32_t)((rng_state * 0x2545F4914F6CDD1Dull) >> 32);
}
static float rng_unit(void) { return (float)(rng_next() >> 8) / 8388608.0f - 1.0f; } /* [-1,1) */

typedef struct problem {
    vka_dtype type;
    int M, N, K, batch;
    bool ta, tb;
    size_t sa, sb, so; /* batch strides, 0: packed */
    uint16_t *a, *b;
    size_t na, nb, no;
} problem;

static uint16_t narrow(vka_dtype t, float x) {
    return t == VKA_F16 ? vkc_f32_to_f16_1(x) : vkc_f32_to_bf16_1(x);
}
static float widen(vka_dtype t, uint16_t h) {
    return t == VKA_F16 ? vkc_f16_to_f32_1(h) : vkc_bf16_to_f32_1(h);
}

/* a and b of p filled by gen (rounded to t), strides odd (7 past the matrix) where batch > 1. */
static void problem_make(problem *p, vka_dtype t, int M, int N, int K, int batch, bool ta,
                         bool tb, float (*gen)(void)) {
    *p = (problem){t, M, N, K, batch, ta, tb, 0, 0, 0, NULL, NULL, 0, 0, 0};
    if (batch > 1) p->sa = (size_t)M * K + 7, p->sb = (size_t)K * N + 7, p->so = (size_t)M * N + 7;
    size_t sa = p->sa ? p->sa : (size_t)M * K, sb = p->sb ? p->sb : (size_t)K * N;
    size_t so = p->so ? p->so : (size_t)M * N;
    p->na = sa * batch, p->nb = sb * batch, p->no = so * batch;
    p->a = malloc(p->na * sizeof *p->a + 2), p->b = malloc(p->nb * sizeof *p->b + 2);
    assert_non_null(p->a), assert_non_null(p->b);
    for (size_t i = 0; i < p->na; i++) p->a[i] = narrow(t, gen());
    for (size_t i = 0; i < p->nb; i++) p->b[i] = narrow(t, gen());
}
static void problem_free(problem *p) { free(p->a), free(p->b); }

static float *run(const problem *p, vkc_mm16_path path, const float *bias, float alpha,
                  const float *init, int nt) {
    float *out = malloc(p->no * sizeof *out + 4);
    assert_non_null(out);
    for (size_t i = 0; i < p->no; i++) out[i] = init ? init[i] : NAN;
    vkc_matmul16(out, VKA_F32, p->a, p->b, bias, p->M, p->N, p->K, p->batch, p->ta, p->tb, p->sa,
                 p->sb, p->so, alpha, init != NULL, p->type, path, 0, nt);
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
                    double x = widen(p->type, p->a[at_a(p, bi, i, k)]);
                    double y = widen(p->type, p->b[at_b(p, bi, k, j)]);
                    s += x * y, sabs += fabs(x * y);
                }
                double c = out[at_o(p, bi, i, j)], err = fabs(c - s), bound = g * sabs;
                if (!isfinite(s)) /* a NaN wants a NaN, an infinity the same one */
                    err = isnan(s) ? (isnan(c) ? 0 : INFINITY) : c == s ? 0 : INFINITY;
                if (exact || !isfinite(s) ? err != 0 : !(err <= bound))
                    fail_msg("%s M=%d N=%d K=%d batch=%d ta=%d tb=%d: out(%d, %d, %d) = %.9g, "
                             "float64 %.17g, error %.3g > bound %.3g",
                             what, p->M, p->N, p->K, p->batch, p->ta, p->tb, bi, i, j, c, s, err,
                             bound);
                if (bound > 0 && isfinite(s) && err / bound > worst) worst = err / bound;
            }
    /* the rest of out (the strides' gaps) untouched */
    return worst;
}

static float gen_int(void) { return (float)((int)(rng_next() % 17) - 8); } /* -8 .. 8 */

/* fp16's extremes and what lies between: the largest finite value, the smallest normal and
 * subnormal, a subnormal with every bit, ones, and uniform [-1, 1), each sign. The products
 * are exact (from 2^-48 to 2^32); so are the sums of the tiny ones. */
static float gen_f16_limits(void) {
    static const float v[] = {65504.0f, 0x1p-14f, 0x1p-24f, 0x3FFp-24f, 1.0f, 0.0f};
    uint32_t r = rng_next();
    float x = r % 8 < 6 ? v[r % 8] : rng_unit();
    return (r >> 8) & 1 ? -x : x;
}

static const int SIZES[] = {1, 3, 17, 65, 131, 261};
#define N_SIZES (int)(sizeof SIZES / sizeof SIZES[0])

/* Small integers: every product and partial sum exact in fp32 (|sum| <= 261 * 64), so every
 * path gives the float64 result exactly, on every shape and transpose. */
static void test_mm16_known_values(void **state) {
    (void)state;
    for (int ti = 0; ti < N_TYPES; ti++)
        for (int pi = 0; pi < N_PATHS; pi++) {
            if (!runs(ti, pi)) continue;
            for (int s = 0; s < N_SIZES * N_SIZES; s++) {
                int M = SIZES[s % N_SIZES], N = SIZES[s / N_SIZES];
                int K = SIZES[(s * 5 + 1) % N_SIZES];
                problem p;
                problem_make(&p, TYPES[ti], M, N, K, 1 + s % 2, s & 2, s & 4, gen_int);
                float *out = run(&p, PATHS[pi], NULL, 1.0f, NULL, 2);
                check_bound(&p, out, true, run_name(TYPES[ti], PATHS[pi]));
                free(out), problem_free(&p);
            }
        }
}

/* Uniform [-1, 1) rounded to the type: each path within gamma_K sum |a b| of float64, on every
 * size of M, N and K from SIZES (K odd, not a multiple of a block: 261 > 256), all four
 * transposes, batches with odd strides. */
static void test_mm16_error_bound(void **state) {
    (void)state;
    for (int ti = 0; ti < N_TYPES; ti++)
        for (int pi = 0; pi < N_PATHS; pi++) {
            if (!runs(ti, pi)) continue;
            double worst = 0;
            for (int s = 0; s < N_SIZES * N_SIZES * N_SIZES; s += 5) {
                int M = SIZES[s % N_SIZES], N = SIZES[s / N_SIZES % N_SIZES];
                int K = SIZES[s / (N_SIZES * N_SIZES)];
                problem p;
                problem_make(&p, TYPES[ti], M, N, K, 1 + (s / 3) % 2, (s / 7) & 1, (s / 11) & 1,
                             rng_unit);
                float *out = run(&p, PATHS[pi], NULL, 1.0f, NULL, 2);
                double w = check_bound(&p, out, false, run_name(TYPES[ti], PATHS[pi]));
                if (w > worst) worst = w;
                free(out), problem_free(&p);
            }
            print_message("%s: largest error %.3f of the bound\n",
                          run_name(TYPES[ti], PATHS[pi]), worst);
        }
}

/* A long K (several blocks, odd): still within the bound. */
static void test_mm16_long_k(void **state) {
    (void)state;
    for (int ti = 0; ti < N_TYPES; ti++)
        for (int pi = 0; pi < N_PATHS; pi++) {
            if (!runs(ti, pi)) continue;
            for (int t = 0; t < 4; t++) {
                problem p;
                problem_make(&p, TYPES[ti], 9, 33, 4099, 1, t & 1, t & 2, rng_unit);
                float *out = run(&p, PATHS[pi], NULL, 1.0f, NULL, 2);
                check_bound(&p, out, false, run_name(TYPES[ti], PATHS[pi]));
                free(out), problem_free(&p);
            }
        }
}

static bool same_bits(const float *x, const float *y, size_t n) {
    return memcmp(x, y, n * sizeof *x) == 0;
}

/* The orders matmul16.h states: k in order (the reference, the widening tiles), vdpbf16ps's
 * pairs (k + 1 before k), the GEMV's 32 strands and their halving tree; none for the AMX tiles
 * (matmul16.h: their bits are deterministic but match no IEEE order), checked by the bounds
 * and the threads' bit-for-bit test only. */
typedef enum order { ORDER_K, ORDER_PAIRS, ORDER_STRANDS, ORDER_UNSTATED } order;
static order path_order(const problem *p, vkc_mm16_path path) {
    if (path == VKC_MM16_REFERENCE) return ORDER_K;
    if (vkc_mm16_gemv(p->M, p->K, p->ta, p->tb)) return ORDER_STRANDS;
    if (path == VKC_MM16_AMX) return ORDER_UNSTATED;
    return path == VKC_MM16_DPBF16 ? ORDER_PAIRS : ORDER_K;
}

/* out(bi, i, j) summed in order o, emulated in scalar fp32. */
static float emulate(const problem *p, int bi, int i, int j, order o) {
    float s[32] = {0}, c = 0.0f;
    for (int k = 0; k < p->K; k += o == ORDER_PAIRS ? 2 : 1) {
        float x0 = widen(p->type, p->a[at_a(p, bi, i, k)]);
        float y0 = widen(p->type, p->b[at_b(p, bi, k, j)]);
        if (o == ORDER_PAIRS && k + 1 < p->K) {
            float x1 = widen(p->type, p->a[at_a(p, bi, i, k + 1)]);
            float y1 = widen(p->type, p->b[at_b(p, bi, k + 1, j)]);
            float t = x1 * y1;
            c = c + t;
        }
        float t = x0 * y0;
        if (o == ORDER_STRANDS) s[k % 32] = s[k % 32] + t;
        else c = c + t;
    }
    if (o != ORDER_STRANDS) return c;
    for (int h = 16; h >= 1; h /= 2)
        for (int q = 0; q < h; q++) s[q] = s[q] + s[q + h];
    return s[0];
}

/* The outputs of out that differ from the emulation of order o (none where o is unstated). */
static long count_order_mismatches(const problem *p, const float *out, order o) {
    long bad = 0;
    if (o == ORDER_UNSTATED) return 0;
    for (int bi = 0; bi < p->batch; bi++)
        for (int i = 0; i < p->M; i++)
            for (int j = 0; j < p->N; j++) {
                float c = emulate(p, bi, i, j, o), g = out[at_o(p, bi, i, j)];
                if (memcmp(&c, &g, sizeof c)) bad++;
            }
    return bad;
}

/* The widening tiles compute the reference's bits; every path the same bits for 1, 2 and 3
 * threads (tiles of several rows and columns, K over two blocks; the GEMV's column blocks). */
static void test_mm16_paths_and_threads(void **state) {
    (void)state;
    for (int t = 0; t < 2 * N_TYPES; t++) {
        int ti = t % N_TYPES;
        problem p; /* tiles; the GEMV (M = 3, K past a block of a, its work items of columns) */
        if (t < N_TYPES) problem_make(&p, TYPES[ti], 203, 301, 517, 2, false, true, rng_unit);
        else problem_make(&p, TYPES[ti], 3, 301, 4133, 2, false, true, rng_unit);
        float *ref = run(&p, VKC_MM16_REFERENCE, NULL, 1.0f, NULL, 1);
        for (int pi = 0; pi < N_PATHS; pi++) {
            if (!runs(ti, pi)) continue;
            const char *name = run_name(TYPES[ti], PATHS[pi]);
            float *o1 = run(&p, PATHS[pi], NULL, 1.0f, NULL, 1);
            if (path_order(&p, PATHS[pi]) == ORDER_K && !same_bits(o1, ref, p.no))
                fail_msg("%s differs from the reference", name);
            for (int nt = 2; nt <= 3; nt++) {
                float *o = run(&p, PATHS[pi], NULL, 1.0f, NULL, nt);
                if (!same_bits(o, o1, p.no)) fail_msg("%s: %d threads differ from 1", name, nt);
                free(o);
            }
            free(o1);
        }
        free(ref), problem_free(&p);
    }
}

/* fp16 at its extremes (65504, 2^-14, subnormals down to 2^-24): each path within the bound of
 * float64 (the tiny products are exact and so are their sums: no underflow anywhere), the
 * widening tiles the reference's bits, the GEMV its strands' (M = 3); every transpose, K past a
 * block. */
static void test_f16_limits(void **state) {
    (void)state;
    for (int t = 0; t < 8; t++) {
        problem p; /* M = 3 with b transposed: the GEMV, in its strands' order */
        problem_make(&p, VKA_F16, t < 4 ? 37 : 3, 70, 300, 2, t & 1, t & 2, gen_f16_limits);
        float *ref = run(&p, VKC_MM16_REFERENCE, NULL, 1.0f, NULL, 2);
        check_bound(&p, ref, false, "f16 reference");
        for (int pi = 1; pi < N_PATHS; pi++) {
            if (!vkc_mm16_path_supported(VKA_F16, PATHS[pi])) continue;
            float *o = run(&p, PATHS[pi], NULL, 1.0f, NULL, 2);
            check_bound(&p, o, false, run_name(VKA_F16, PATHS[pi]));
            order ord = path_order(&p, PATHS[pi]);
            if (ord == ORDER_K ? !same_bits(o, ref, p.no) : count_order_mismatches(&p, o, ord))
                fail_msg("%s M=%d ta=%d tb=%d differs from the %s",
                         run_name(VKA_F16, PATHS[pi]), p.M, p.ta, p.tb,
                         ord == ORDER_K ? "reference" : "strands' order");
            free(o);
        }
        free(ref), problem_free(&p);
    }
}

/* NaN and infinities in a and b: an output whose sum meets a NaN, Inf - Inf or Inf * 0 is NaN,
 * one that meets only infinities of one sign that infinity, the others finite and within the
 * bound (vdpbf16ps too: it keeps NaN and Inf; the GEMV's zero padding too: it adds 0 * 0). */
static void test_mm16_nan_inf(void **state) {
    (void)state;
    for (int ti = 0; ti < N_TYPES; ti++) {
        vka_dtype t = TYPES[ti];
        for (int tr = 0; tr < 12; tr++) {
            /* tiles; the GEMV (M = 4, b transposed) with K in one strand step's tail, past it,
             * past a block of a */
            static const int ms[] = {7, 4, 4}, ks[] = {19, 83, 4133};
            problem p;
            problem_make(&p, t, ms[tr / 4], 21, ks[tr / 4], 1, tr & 1, tr & 2, rng_unit);
            p.a[at_a(&p, 0, 1, 3)] = narrow(t, INFINITY);   /* row 1: +-Inf, or NaN where b is 0 */
            p.a[at_a(&p, 0, 2, 5)] = narrow(t, NAN);        /* row 2: NaN */
            p.a[at_a(&p, 0, 3, 0)] = narrow(t, INFINITY);   /* row 3: Inf - Inf where b(0, j) and */
            p.a[at_a(&p, 0, 3, 1)] = narrow(t, -INFINITY);  /* b(1, j) have one sign, else Inf */
            p.b[at_b(&p, 0, 3, 4)] = narrow(t, 0.0f);       /* (1, 4): Inf * 0 */
            p.b[at_b(&p, 0, 7, 9)] = narrow(t, -INFINITY);  /* column 9: -+Inf in most rows */
            for (int pi = 0; pi < N_PATHS; pi++) {
                if (!runs(ti, pi)) continue;
                float *o = run(&p, PATHS[pi], NULL, 1.0f, NULL, 2);
                check_bound(&p, o, false, run_name(t, PATHS[pi]));
                free(o);
            }
            problem_free(&p);
        }
    }
}
/* Each path sums in the order matmul16.h states, bit for bit (inputs well inside the normal
 * range, so vdpbf16ps's flushing of denormals plays no part). */
static void test_mm16_summation_order(void **state) {
    (void)state;
    for (int ti = 0; ti < N_TYPES; ti++)
        for (int pi = 0; pi < N_PATHS; pi++) {
            if (!runs(ti, pi)) continue;
            for (int t = 0; t < 4; t++) {
                problem p;
                problem_make(&p, TYPES[ti], 19, 67, t < 2 ? 261 : 300, 2, t & 1, t & 2,
                             rng_unit);
                float *out = run(&p, PATHS[pi], NULL, 1.0f, NULL, 2);
                long bad = count_order_mismatches(&p, out, path_order(&p, PATHS[pi]));
                if (bad)
                    fail_msg("%s ta=%d tb=%d K=%d: %ld of %zu outputs not in the stated order",
                             run_name(TYPES[ti], PATHS[pi]), p.ta, p.tb, p.K, bad,
                             (size_t)p.batch * p.M * p.N);
                free(out), problem_free(&p);
            }
        }
}

/* alpha, bias and accumulate: out = init + ((alpha * c) + bias[j]), c the plain product's
 * value, bit for bit (the fp32 matmul's epilogue); where the strides leave gaps, out untouched. */
static void test_mm16_epilogue(void **state) {
    (void)state;
    /* tiles; the GEMV at M = 1, 3 and its largest, and one row past it (tiles again) */
    static const struct { int M, N, K; bool ta, tb; } shapes[] = {
        {37, 131, 65, true, false},
        {1, 301, 3072, false, true},
        {3, 301, 7, false, true},
        {VKC_MM16_GEMV_MAX_M, 301, 1, false, true},
        {VKC_MM16_GEMV_MAX_M + 1, 301, 7, false, true},
    };
    for (int ti = 0; ti < N_TYPES; ti++)
        for (int pi = 0; pi < N_PATHS; pi++)
            for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
                if (!runs(ti, pi)) continue;
                problem p;
                problem_make(&p, TYPES[ti], shapes[si].M, shapes[si].N, shapes[si].K, 2,
                             shapes[si].ta, shapes[si].tb, rng_unit);
                float *bias = malloc((size_t)p.N * sizeof *bias);
                float *init = malloc(p.no * sizeof *init);
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
                                fail_msg("%s M=%d N=%d K=%d: out(%d, %d, %d) = %.9g, not %.9g",
                                         run_name(TYPES[ti], PATHS[pi]), p.M, p.N, p.K, bi, i, j,
                                         o[x], y);
                        }
                for (int g = 0; g < 7; g++) /* the gap after batch 0 */
                    assert_true(
                        same_bits(&o[(size_t)p.M * p.N + g], &init[(size_t)p.M * p.N + g], 1));
                free(c), free(o), free(bias), free(init), problem_free(&p);
            }
}

/* A 16-bit out (bf16 and fp16, for a and b of either type), every path: the float32 out of the
 * same call rounded by the convert op's reference conversion, bit for bit; on the tiles and the
 * GEMV (M = 1, 3, its largest), odd N (rows sharing words) and odd batch strides (batches
 * starting at high halves) on 1 and 3 threads; the gaps and the element past the end untouched. */
static void test_mm16_out16_is_convert_of_f32(void **state) {
    (void)state;
    static const struct { int M, N, K; bool ta, tb; } shapes[] = {
        {37, 131, 65, true, false},
        {1, 301, 77, false, true},
        {3, 7, 300, false, true},
        {VKC_MM16_GEMV_MAX_M, 129, 33, false, true},
        {97, 257, 9, false, false},
    };
    for (int ti = 0; ti < N_TYPES; ti++)
        for (int pi = 0; pi < N_PATHS; pi++)
            for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
                for (int oi = 0; oi < N_TYPES; oi++) {
                    if (!runs(ti, pi)) continue;
                    problem p;
                    problem_make(&p, TYPES[ti], shapes[si].M, shapes[si].N, shapes[si].K, 2,
                                 shapes[si].ta, shapes[si].tb, rng_unit);
                    float *bias = malloc((size_t)p.N * sizeof *bias);
                    uint16_t *want = malloc(p.no * sizeof *want);
                    uint16_t *got = malloc((p.no + 1) * sizeof *got);
                    assert_non_null(bias), assert_non_null(want), assert_non_null(got);
                    for (int j = 0; j < p.N; j++) bias[j] = rng_unit();
                    float *c = run(&p, PATHS[pi], bias, -0.37f, NULL, 2);
                    vkc_convert_serial(want, TYPES[oi], c, VKA_F32, p.no, 0);
                    for (int nt = 1; nt <= 3; nt += 2) {
                        for (size_t i = 0; i <= p.no; i++) got[i] = 0xABCD;
                        vkc_matmul16(got, TYPES[oi], p.a, p.b, bias, p.M, p.N, p.K, p.batch,
                                     p.ta, p.tb, p.sa, p.sb, p.so, -0.37f, false, p.type,
                                     PATHS[pi], vkc_cvt_features(VKC_ISA_AVX512), nt);
                        for (int bi = 0; bi < p.batch; bi++)
                            for (size_t e = 0; e < p.so; e++) {
                                size_t x = (size_t)bi * p.so + e;
                                uint16_t w = e < (size_t)p.M * p.N ? want[x] : 0xABCD;
                                if (got[x] != w)
                                    fail_msg("%s to %s, %d threads, M=%d N=%d K=%d: out[%zu] = "
                                             "0x%04X, want 0x%04X",
                                             run_name(TYPES[ti], PATHS[pi]),
                                             vka_dtype_string(TYPES[oi]), nt, p.M, p.N, p.K, x,
                                             got[x], w);
                            }
                        assert_int_equal(got[p.no], 0xABCD);
                    }
                    free(c), free(bias), free(want), free(got), problem_free(&p);
                }
}

/* The GEMV's shapes (matmul16.h): M on both sides of its cut-off, K of one element, within one
 * strand step, odd, GPT-2's 4C (3072) and past two blocks of a (4096) with a tail, N odd (the
 * last work item part); a transposed or b not: the tiles. Each path within the bound of float64
 * and in its stated order, bit for bit. */
static void test_mm16_gemv_shapes(void **state) {
    (void)state;
    static const int ms[] = {1, 2, 3, 4, 5, VKC_MM16_GEMV_MAX_M, VKC_MM16_GEMV_MAX_M + 1};
    static const int ks[] = {1, 7, 261, 3072, 8229};
    for (int ti = 0; ti < N_TYPES; ti++)
        for (int pi = 0; pi < N_PATHS; pi++) {
            if (!runs(ti, pi)) continue;
            const char *name = run_name(TYPES[ti], PATHS[pi]);
            double worst = 0;
            for (size_t mi = 0; mi < sizeof ms / sizeof ms[0]; mi++)
                for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++)
                    for (int tr = 0; tr < (ks[ki] <= 7 ? 3 : 1); tr++) {
                        problem p; /* tr 1: a transposed, 2: b not (tiles) */
                        problem_make(&p, TYPES[ti], ms[mi], ks[ki] > 3072 ? 67 : 301, ks[ki], 1,
                                     tr == 1, tr != 2, rng_unit);
                        float *out = run(&p, PATHS[pi], NULL, 1.0f, NULL, 2);
                        double w = check_bound(&p, out, false, name);
                        if (w > worst) worst = w;
                        long bad = count_order_mismatches(&p, out, path_order(&p, PATHS[pi]));
                        if (bad)
                            fail_msg("%s M=%d N=%d K=%d ta=%d tb=%d: %ld outputs not in the "
                                     "stated order", name, p.M, p.N, p.K, p.ta, p.tb, bad);
                        free(out), problem_free(&p);
                    }
            print_message("%s, GEMV shapes: largest error %.3f of the bound\n", name, worst);
        }
}

/* The LM head's shape when decoding (M = 1, K = C = 768, N = V = 50257, odd: its last work item
 * part), and three rows of K = 7 across it: each fast path within the bound, in the stated
 * order (the reference's on these shapes: test_mm16_gemv_shapes). */
static void test_mm16_gemv_lm_head(void **state) {
    (void)state;
    for (int ti = 0; ti < N_TYPES; ti++)
        for (int pi = 0; pi < N_PATHS; pi++) {
            if (!runs(ti, pi) || PATHS[pi] == VKC_MM16_REFERENCE) continue;
            for (int s = 0; s < 2; s++) {
                problem p;
                problem_make(&p, TYPES[ti], s ? 3 : 1, 50257, s ? 7 : 768, 1, false, true,
                             rng_unit);
                float *out = run(&p, PATHS[pi], NULL, 1.0f, NULL, 2);
                check_bound(&p, out, false, run_name(TYPES[ti], PATHS[pi]));
                long bad = count_order_mismatches(&p, out, path_order(&p, PATHS[pi]));
                if (bad)
                    fail_msg("%s M=%d K=%d: %ld outputs not in the stated order",
                             run_name(TYPES[ti], PATHS[pi]), p.M, p.K, bad);
                free(out), problem_free(&p);
            }
        }
}

int main(void) {
    for (int ti = 0; ti < N_TYPES; ti++)
        for (int pi = 0; pi < N_PATHS; pi++)
            print_message("%s: %s\n", run_name(TYPES[ti], PATHS[pi]),
                          vkc_mm16_path_supported(TYPES[ti], PATHS[pi]) ? "runs"
                                                                        : "not on this CPU");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mm16_known_values),
        cmocka_unit_test(test_mm16_error_bound),
        cmocka_unit_test(test_mm16_long_k),
        cmocka_unit_test(test_mm16_paths_and_threads),
        cmocka_unit_test(test_f16_limits),
        cmocka_unit_test(test_mm16_nan_inf),
        cmocka_unit_test(test_mm16_summation_order),
        cmocka_unit_test(test_mm16_epilogue),
        cmocka_unit_test(test_mm16_out16_is_convert_of_f32),
        cmocka_unit_test(test_mm16_gemv_shapes),
        cmocka_unit_test(test_mm16_gemv_lm_head),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
