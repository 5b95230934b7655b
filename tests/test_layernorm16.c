/* vka_layernorm_forward with a 16-bit out and/or inp (bf16 or fp16; src/backend.h's contract),
 * on the CPU backend (fast kernels on 2 and 3 threads, reference kernels) and on Vulkan (GPU
 * and CPU-type variants):
 *  (a) bit-exact: a 16-bit out is the f32 op's out on the widened inp rounded by vka_copy (the
 *      backend's convert op), and out (f32 or 16-bit), mean and rstd are the f32 op's bits on
 *      that widened inp, on each backend;
 *  (b) within |got - ref| <= u |ref| + (1 + u) e32 of a double reference on the widened inp (u the
 *      format's unit roundoff, bf16 2^-8, fp16 2^-11; e32 = 1e-5 + 1e-5 |ref|, test_layernorm's
 *      f32 bound), and the backends within twice that of each other;
 *  (c) out is one element longer than N*C, starting as sentinels: that last element (the high
 *      half of the last word when N*C is odd) is left alone, and with odd C (rows sharing a
 *      word) every element is checked;
 *  (d) a NaN in inp makes its row's out, mean and rstd NaN and no other row's; fp16 past 65520
 *      (weight 1e5) gives Inf.
 * Shapes: N = 1, C = 1, odd C (7, 769), C past a workgroup (3000), N not a multiple of anything,
 * and with a 4 KiB binding limit blocks of rows starting at the high half of a word. */
#define _POSIX_C_SOURCE 200809L /* setenv (tu_gpu_packed16) */
#include "op_util.h"

typedef struct ln16_case {
    vka_dtype type; /* VKA_BF16 or VKA_F16 */
    bool out16, inp16;
    int N, C;
} ln16_case;

#define SENTINEL16 0xABCDu     /* out's elements before the op (16-bit) */
#define SENTINEL32 0x7FC0ABCDu /* (f32: a NaN no arithmetic makes) */

static double unit_roundoff(vka_dtype t) { return t == VKA_BF16 ? 0x1p-8 : 0x1p-11; }

static const char *mode(const ln16_case *c) {
    return c->out16 && c->inp16 ? "out+inp" : c->out16 ? "out" : "inp";
}

/* The context's backend and kernels, for messages. */
static const char *ctx_name(vka_context *ctx) {
    return tu_is_cpu(ctx) ? vka_context_cpu_kernels(ctx) : vka_context_vulkan_kernels(ctx);
}

/* A tensor of n elements of dtype holding data (4-byte floats or 16-bit words), zeros if NULL. */
static vka_tensor *make(vka_context *ctx, vka_dtype dtype, size_t n, const void *data) {
    return tu_tensor_typed(ctx, dtype, n, data);
}

/* A case's inputs and its double reference. */
typedef struct ln16_data {
    ln16_case c;
    float *x;      /* inp's values (N*C): for a 16-bit inp, what its words widen to */
    uint16_t *x16; /* a 16-bit inp's words (N*C), else NULL */
    float *w, *b;  /* weight, bias (C) */
    double *ref;   /* out (N*C), mean (N), rstd (N) in double from x */
} ln16_data;

static void reference(ln16_data *d) {
    int N = d->c.N, C = d->c.C;
    size_t NC = (size_t)N * C;
    d->ref = malloc((NC + 2 * (size_t)N) * sizeof *d->ref);
    for (int n = 0; n < N; n++) {
        const float *x = d->x + (size_t)n * C;
        double m = 0.0, var = 0.0;
        for (int c = 0; c < C; c++) m += x[c];
        m /= C;
        for (int c = 0; c < C; c++) var += (x[c] - m) * (x[c] - m);
        double r = 1.0 / sqrt(var / C + 1e-5);
        for (int c = 0; c < C; c++) d->ref[(size_t)n * C + c] = (x[c] - m) * r * d->w[c] + d->b[c];
        d->ref[NC + n] = m;
        d->ref[NC + N + n] = r;
    }
}

/* inp uniform in 10 +- 2 (an offset the mean must remove), weight in +-wscale, bias in +-1. */
static ln16_data data_make(ln16_case c, uint64_t seed, float wscale) {
    size_t NC = (size_t)c.N * c.C;
    ln16_data d = {.c = c, .x = malloc(NC * sizeof(float)), .w = malloc((size_t)c.C * 4),
                   .b = malloc((size_t)c.C * 4)};
    tu_random(d.x, NC, seed, 2.0f);
    for (size_t i = 0; i < NC; i++) d.x[i] += 10.0f;
    tu_random(d.w, (size_t)c.C, seed + 1, wscale);
    tu_random(d.b, (size_t)c.C, seed + 2, 1.0f);
    if (c.inp16) {
        d.x16 = malloc(NC * sizeof *d.x16);
        assert_int_equal(vka_convert(c.type, d.x16, VKA_F32, d.x, NC), VKA_SUCCESS);
        assert_int_equal(vka_convert(VKA_F32, d.x, c.type, d.x16, NC), VKA_SUCCESS);
    }
    reference(&d);
    return d;
}

/* Element i of inp becomes NaN. */
static void set_nan(ln16_data *d, size_t i) {
    d->x[i] = NAN;
    if (d->x16) assert_int_equal(vka_convert(d->c.type, d->x16 + i, VKA_F32, d->x + i, 1), 0);
    free(d->ref);
    reference(d);
}

static void data_free(ln16_data *d) {
    free(d->x), free(d->x16), free(d->w), free(d->b), free(d->ref);
}

/* What a context computes for a case. */
typedef struct ln16_run {
    uint32_t *out_bits; /* out's N*C + 1 elements' bits (16-bit ones zero-extended) */
    float *out;         /* out's N*C values (16-bit: widened) */
    float *stats;       /* mean (N), rstd (N) */
    float *f32;         /* the f32 op on the widened inp: out (N*C), mean (N), rstd (N) */
    uint16_t *f32_16;   /* its out by vka_copy to the 16-bit type (N*C), when out16 */
} ln16_run;

static ln16_run run_on(vka_context *ctx, const ln16_data *d) {
    const ln16_case *c = &d->c;
    size_t N = (size_t)c->N, C = (size_t)c->C, NC = N * C;
    vka_dtype ot = c->out16 ? c->type : VKA_F32, it = c->inp16 ? c->type : VKA_F32;
    uint16_t *init16 = malloc((NC + 1) * sizeof *init16);
    uint32_t *init32 = malloc((NC + 1) * sizeof *init32);
    for (size_t i = 0; i <= NC; i++) init16[i] = SENTINEL16, init32[i] = SENTINEL32;
    vka_tensor *out = make(ctx, ot, NC + 1, c->out16 ? (void *)init16 : (void *)init32);
    vka_tensor *inp = make(ctx, it, NC, c->inp16 ? (const void *)d->x16 : (const void *)d->x);
    vka_tensor *inpw = tu_tensor(ctx, NC, d->x), *w = tu_tensor(ctx, C, d->w);
    vka_tensor *b = tu_tensor(ctx, C, d->b), *mean = tu_tensor_nan(ctx, N);
    vka_tensor *rstd = tu_tensor_nan(ctx, N), *out32 = tu_tensor_nan(ctx, NC);
    vka_tensor *mean32 = tu_tensor_nan(ctx, N), *rstd32 = tu_tensor_nan(ctx, N);
    vka_tensor *r16 = c->out16 ? make(ctx, c->type, NC, NULL) : NULL;
    tu_begin(ctx);
    if (vka_layernorm_forward(ctx, out, mean, rstd, inp, w, b, c->N, c->C) != VKA_SUCCESS)
        fail_msg("layernorm_forward (%s %s): %s", vka_dtype_string(c->type), mode(c),
                 vka_last_error(ctx));
    assert_int_equal(vka_layernorm_forward(ctx, out32, mean32, rstd32, inpw, w, b, c->N, c->C),
                     VKA_SUCCESS);
    if (r16) assert_int_equal(vka_copy(ctx, r16, out32, NC), VKA_SUCCESS);
    tu_run(ctx);

    ln16_run r = {.out_bits = malloc((NC + 1) * 4), .out = malloc((NC ? NC : 1) * 4),
                  .stats = malloc(2 * N * 4), .f32 = malloc((NC + 2 * N) * 4)};
    if (c->out16) {
        assert_int_equal(vka_tensor_read(out, 0, init16, NC + 1), VKA_SUCCESS);
        for (size_t i = 0; i <= NC; i++) r.out_bits[i] = init16[i];
        assert_int_equal(vka_convert(VKA_F32, r.out, c->type, init16, NC), VKA_SUCCESS);
        r.f32_16 = malloc(NC * sizeof *r.f32_16);
        assert_int_equal(vka_tensor_read(r16, 0, r.f32_16, NC), VKA_SUCCESS);
    } else {
        assert_int_equal(vka_tensor_read(out, 0, r.out_bits, NC + 1), VKA_SUCCESS);
        memcpy(r.out, r.out_bits, NC * 4);
    }
    assert_int_equal(vka_tensor_read(mean, 0, r.stats, N), VKA_SUCCESS);
    assert_int_equal(vka_tensor_read(rstd, 0, r.stats + N, N), VKA_SUCCESS);
    assert_int_equal(vka_tensor_read(out32, 0, r.f32, NC), VKA_SUCCESS);
    assert_int_equal(vka_tensor_read(mean32, 0, r.f32 + NC, N), VKA_SUCCESS);
    assert_int_equal(vka_tensor_read(rstd32, 0, r.f32 + NC + N, N), VKA_SUCCESS);
    vka_tensor *all[] = {out, inp, inpw, w, b, mean, rstd, out32, mean32, rstd32, r16};
    for (size_t i = 0; i < TU_LEN(all); i++) vka_tensor_destroy(all[i]);
    free(init16);
    free(init32);
    return r;
}

static void run_free(ln16_run *r) {
    free(r->out_bits), free(r->out), free(r->stats), free(r->f32), free(r->f32_16);
}

/* Bits of the f32 value x. */
static uint32_t bits(float x) { return tu_f32_bits(x); }

/* Equal bits, or both NaN (a NaN's payload is the arithmetic's, which the contract leaves). */
static bool same(uint32_t a, uint32_t b, bool is16, vka_dtype t) {
    if (a == b) return true;
    if (!is16) return isnan(tu_bits_f32(a)) && isnan(tu_bits_f32(b));
    uint32_t inf = t == VKA_BF16 ? 0x7F80u : 0x7C00u;
    return (a & 0x7FFFu) > inf && (b & 0x7FFFu) > inf;
}

/* (a) and (c): r against the f32 op on the same context, bit for bit, and the sentinel. */
static void check_exact(const ln16_data *d, const ln16_run *r, const char *what) {
    const ln16_case *c = &d->c;
    size_t N = (size_t)c->N, NC = N * (size_t)c->C;
    for (size_t i = 0; i < NC; i++) {
        uint32_t want = c->out16 ? r->f32_16[i] : bits(r->f32[i]);
        if (!same(r->out_bits[i], want, c->out16, c->type))
            fail_msg("%s: out[%zu] (row %zu) is 0x%X, the f32 op's %s 0x%X", what, i,
                     i / (size_t)c->C, r->out_bits[i], c->out16 ? "rounded" : "out", want);
    }
    for (size_t i = 0; i < 2 * N; i++)
        if (!same(bits(r->stats[i]), bits(r->f32[NC + i]), false, c->type))
            fail_msg("%s: %s[%zu] is %.9g, the f32 op's %.9g", what, i < N ? "mean" : "rstd",
                     i % N, r->stats[i], r->f32[NC + i]);
    uint32_t sentinel = c->out16 ? SENTINEL16 : SENTINEL32;
    if (r->out_bits[NC] != sentinel)
        fail_msg("%s: out[N*C = %zu] past the op's elements became 0x%X", what, NC,
                 r->out_bits[NC]);
}

/* The bound (b) on an out element with reference value ref. */
static double bound(const ln16_case *c, double ref) {
    double u = c->out16 ? unit_roundoff(c->type) : 0.0, e32 = 1e-5 + 1e-5 * fabs(ref);
    return u * fabs(ref) + (1.0 + u) * e32;
}

/* (b): out within bound() of the double reference; mean and rstd within test_layernorm's f32
 * bound. */
static void check_reference(const ln16_data *d, const ln16_run *r, const char *what) {
    const ln16_case *c = &d->c;
    size_t N = (size_t)c->N, NC = N * (size_t)c->C;
    for (size_t i = 0; i < NC; i++) {
        double e = fabs(r->out[i] - d->ref[i]);
        if (!(e <= bound(c, d->ref[i])))
            fail_msg("%s: out[%zu] = %.9g, reference %.9g: |diff| %.3g > %.3g", what, i,
                     r->out[i], d->ref[i], e, bound(c, d->ref[i]));
    }
    tu_assert_close_d(what, r->stats, d->ref + NC, 2 * N, 1e-5, 1e-5);
}

/* Two contexts' runs within twice the bound of each other (bit for bit when exact). */
static void check_pair(const ln16_data *d, const ln16_run *a, const ln16_run *b, bool exact,
                       const char *what) {
    const ln16_case *c = &d->c;
    size_t NC = (size_t)c->N * (size_t)c->C;
    for (size_t i = 0; i < NC; i++) {
        bool ok = exact ? same(a->out_bits[i], b->out_bits[i], c->out16, c->type)
                        : (isnan(a->out[i]) && isnan(b->out[i])) ||
                              fabs(a->out[i] - b->out[i]) <= 2.0 * bound(c, d->ref[i]);
        if (!ok)
            fail_msg("%s: out[%zu] = %.9g vs %.9g (bits 0x%X, 0x%X)", what, i, a->out[i],
                     b->out[i], a->out_bits[i], b->out_bits[i]);
    }
}

static char *describe(char *buf, size_t size, const ln16_case *c, vka_context *ctx) {
    snprintf(buf, size, "%s layernorm_forward %s 16-bit, N=%d C=%d, %s",
             vka_dtype_string(c->type), mode(c), c->N, c->C, ctx_name(ctx));
    return buf;
}

/* One case on ctx and on the reference CPU context cpu: (a), (c) on both, (b) on both, and
 * ctx against cpu. */
static void case_on(vka_context *ctx, vka_context *cpu, ln16_case c, uint64_t seed) {
    ln16_data d = data_make(c, seed, 1.0f);
    ln16_run r = run_on(ctx, &d), rc = run_on(cpu, &d);
    char what[200];
    check_exact(&d, &r, describe(what, sizeof what, &c, ctx));
    check_reference(&d, &r, what);
    check_exact(&d, &rc, describe(what, sizeof what, &c, cpu));
    check_reference(&d, &rc, what);
    check_pair(&d, &r, &rc, false, describe(what, sizeof what, &c, ctx));
    run_free(&r);
    run_free(&rc);
    data_free(&d);
}

/* Every type and mode over shapes, on ctx and on the CPU backend. */
static void sweep(vka_context *ctx, const int (*shapes)[2], size_t n_shapes, uint64_t seed) {
    static const vka_dtype types[] = {VKA_BF16, VKA_F16};
    static const bool modes[][2] = {{true, false}, {false, true}, {true, true}};
    vka_context *cpu = tu_cpu();
    for (size_t t = 0; t < TU_LEN(types); t++)
        for (size_t m = 0; m < TU_LEN(modes); m++)
            for (size_t s = 0; s < n_shapes; s++) {
                ln16_case c = {types[t], modes[m][0], modes[m][1], shapes[s][0], shapes[s][1]};
                case_on(ctx, cpu, c, seed + 100 * t + 10 * m + s);
            }
    tu_done(cpu);
}

/* 1 x 1, one row of 7, 37 rows of 7 (every row but the first starts or ends mid-word), 769 and
 * 3000 (past a workgroup), 13 x 96. */
static const int SHAPES[][2] = {{1, 1}, {1, 7}, {37, 7}, {3, 769}, {2, 3000}, {13, 96}};

/* The CPU backend: fast kernels on 2 and 3 threads (other blocks of scratch rows) bit for bit
 * alike, the reference kernels within the bound; each against its own f32 op. */
static void test_layernorm16_cpu_kernels(void **state) {
    (void)state;
    vka_context *fast = tu_cpu_kernels(VKA_CPU_KERNELS_FAST, 2);
    vka_context *fast3 = tu_cpu_kernels(VKA_CPU_KERNELS_FAST, 3);
    vka_context *ref = tu_cpu_kernels(VKA_CPU_KERNELS_REFERENCE, 2);
    static const vka_dtype types[] = {VKA_BF16, VKA_F16};
    static const bool modes[][2] = {{true, false}, {false, true}, {true, true}};
    const int shapes[][2] = {{1, 1}, {1, 7}, {37, 7}, {3, 769}, {2, 3000}, {13, 96}, {70, 3}};
    for (size_t t = 0; t < TU_LEN(types); t++)
        for (size_t m = 0; m < TU_LEN(modes); m++)
            for (size_t s = 0; s < TU_LEN(shapes); s++) {
                ln16_case c = {types[t], modes[m][0], modes[m][1], shapes[s][0], shapes[s][1]};
                ln16_data d = data_make(c, 500 + 100 * t + 10 * m + s, 1.0f);
                ln16_run a = run_on(fast, &d), a3 = run_on(fast3, &d), r = run_on(ref, &d);
                char what[200];
                check_exact(&d, &a, describe(what, sizeof what, &c, fast));
                check_reference(&d, &a, what);
                check_pair(&d, &a, &a3, true, what);
                check_exact(&d, &r, describe(what, sizeof what, &c, ref));
                check_reference(&d, &r, what);
                check_pair(&d, &a, &r, false, what);
                run_free(&a);
                run_free(&a3);
                run_free(&r);
                data_free(&d);
            }
    tu_done(fast);
    tu_done(fast3);
    tu_done(ref);
}

/* (d) on ctx: a NaN at row 1, column 3 of 3 rows of 7 (rows share words) and of 2 x 3000; fp16
 * with weights of +-1e5: Inf where the f32 out passes 65520 (and some do), no NaN. */
static void special_cases(vka_context *ctx) {
    static const vka_dtype types[] = {VKA_BF16, VKA_F16};
    static const bool modes[][2] = {{true, false}, {false, true}, {true, true}};
    const int shapes[][2] = {{3, 7}, {2, 3000}};
    char what[200];
    for (size_t t = 0; t < TU_LEN(types); t++)
        for (size_t m = 0; m < TU_LEN(modes); m++)
            for (size_t s = 0; s < TU_LEN(shapes); s++) {
                ln16_case c = {types[t], modes[m][0], modes[m][1], shapes[s][0], shapes[s][1]};
                ln16_data d = data_make(c, 900 + 10 * m + s, 1.0f);
                set_nan(&d, (size_t)c.C + 3);
                ln16_run r = run_on(ctx, &d);
                describe(what, sizeof what, &c, ctx);
                check_exact(&d, &r, what);
                for (size_t i = 0; i < (size_t)c.N * c.C; i++)
                    if ((i / (size_t)c.C == 1) != (bool)isnan(r.out[i]))
                        fail_msg("%s, NaN in row 1: out[%zu] = %g", what, i, r.out[i]);
                for (int n = 0; n < c.N; n++)
                    if ((n == 1) != (bool)isnan(r.stats[n]) ||
                        (n == 1) != (bool)isnan(r.stats[c.N + n]))
                        fail_msg("%s, NaN in row 1: row %d's mean %g, rstd %g", what, n,
                                 r.stats[n], r.stats[c.N + n]);
                run_free(&r);
                data_free(&d);
            }
    for (size_t m = 0; m < 3; m += 2) { /* fp16 out: from f32 and from fp16 inp */
        ln16_case c = {VKA_F16, true, m == 2, 5, 769};
        ln16_data d = data_make(c, 950 + m, 1e5f);
        ln16_run r = run_on(ctx, &d);
        describe(what, sizeof what, &c, ctx);
        check_exact(&d, &r, what);
        size_t infs = 0;
        for (size_t i = 0; i < (size_t)c.N * c.C; i++) {
            bool big = fabsf(r.f32[i]) >= 65520.0f;
            if (big != (bool)isinf(r.out[i]) || isnan(r.out[i]) ||
                (big && signbit(r.out[i]) != signbit(r.f32[i])))
                fail_msg("%s, weights 1e5: out[%zu] = %g from f32 %.9g", what, i, r.out[i],
                         r.f32[i]);
            infs += big;
        }
        if (infs == 0) fail_msg("%s, weights 1e5: no element overflowed", what);
        run_free(&r);
        data_free(&d);
    }
}

static void test_layernorm16_special_values_cpu(void **state) {
    (void)state;
    vka_context *fast = tu_cpu_kernels(VKA_CPU_KERNELS_FAST, 2);
    vka_context *ref = tu_cpu_kernels(VKA_CPU_KERNELS_REFERENCE, 2);
    special_cases(fast);
    special_cases(ref);
    tu_done(fast);
    tu_done(ref);
}

static void vulkan_cases(vka_context *ctx) { sweep(ctx, SHAPES, TU_LEN(SHAPES), 20); }

/* A Vulkan context binding at most 4 KiB a view (1020 floats, 2040 16-bit elements). */
static vka_context *split_ctx(vka_kernels kernels) { return tu_gpu_limited(kernels, 4096); }

/* Past 4 KiB a view, in blocks of rows: 300 x 7 (f32 views: blocks of 145 rows, 16-bit ones of
 * 255: blocks start at odd elements, mid-word), 40 x 77, 3 x 769 (a row a block for f32). */
static void split_cases(vka_kernels kernels) {
    const int shapes[][2] = {{300, 7}, {40, 77}, {3, 769}};
    vka_context *ctx = split_ctx(kernels);
    sweep(ctx, shapes, TU_LEN(shapes), 40);
    tu_done(ctx);
    ctx = tu_gpu_packed16(kernels, 4096); /* and on the packed 16-bit path */
    sweep(ctx, shapes, TU_LEN(shapes), 40);
    tu_done(ctx);
}

static void test_layernorm16_split_gpu_kernels(void **state) {
    (void)state;
    split_cases(VKA_KERNELS_GPU);
}

static void test_layernorm16_split_cpu_kernels(void **state) {
    (void)state;
    split_cases(VKA_KERNELS_CPU);
}

TU_VULKAN_TESTS16(test_layernorm16_vulkan_matches_cpu, vulkan_cases)
TU_VULKAN_TESTS16(test_layernorm16_vulkan_special_values, special_cases)

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layernorm16_cpu_kernels),
        cmocka_unit_test(test_layernorm16_special_values_cpu),
        TU_VULKAN_TEST_ENTRIES16(test_layernorm16_vulkan_matches_cpu),
        TU_VULKAN_TEST_ENTRIES16(test_layernorm16_vulkan_special_values),
        cmocka_unit_test(test_layernorm16_split_gpu_kernels),
        cmocka_unit_test(test_layernorm16_split_cpu_kernels),
    };
    TU_RETURN_QUICK(argc, argv, tests, NULL, NULL);
}
