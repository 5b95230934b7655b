/* vka_matmul writing a 16-bit out (bf16 or fp16; src/backend.h's contract), with float32 or
 * 16-bit a and b, on the CPU backend (fast kernels on 2 and 3 threads, AVX2 ones, reference
 * kernels) and on Vulkan (GPU and CPU-type variants, and with a 4 KiB binding limit):
 *  (a) bit for bit: out16 is vka_copy (the backend's convert op) of the float32 out of the same
 *      product on the same context, for every element of every batch;
 *  (b) sentinels: out has one element more than its batches span and starts as sentinels; that
 *      element (with an odd span, the high half of the op's last word) and the gaps between
 *      padded batches keep them;
 *  (c) special values: fp16 past 65520 gives Inf; a NaN in a gives NaN in its row;
 *  (d) refusals: accumulate into a 16-bit out, an out too small (counted in elements: an odd
 *      count's padding half does not count), out the same tensor as a, and on Vulkan a product
 *      that must be split along K.
 * Shapes: M, N, K of 1, 7, 33, 65; odd N, so rows share words; odd padded batch strides, so
 * batches start at high halves; rows longer than a workgroup's columns and N past a CPU tile
 * (128, 256); the CPU's GEMV (few rows, b transposed) and the Vulkan CPU-type variant's vec4
 * and eight-at-a-time loads; bias and alpha; every transpose. */
#define _POSIX_C_SOURCE 200809L /* setenv (tu_gpu_packed16) */
#include "op_util.h"

#define SENTINEL16 0xABCDu /* out's elements before the op */

typedef struct mo_case {
    int M, N, K, batch;
    bool ta, tb, bias;
    float alpha;
    size_t pad; /* elements between batches of a, b and out (0: packed) */
} mo_case;

/* One product: its shape, out's and the operands' types, and the operands' data. */
typedef struct mo_data {
    mo_case c;
    vka_dtype out, in; /* out: VKA_BF16 or VKA_F16; a and b: VKA_F32 or a 16-bit type */
    int batch;
    size_t sa, sb, so; /* batch strides */
    float *a, *b, *bias;
    uint16_t *a16, *b16; /* a and b's words when in is 16-bit */
} mo_data;

static mo_data data_make(vka_dtype out, vka_dtype in, mo_case c, uint64_t seed) {
    mo_data d = {.c = c, .out = out, .in = in, .batch = c.batch ? c.batch : 1};
    d.sa = (size_t)c.M * c.K + c.pad, d.sb = (size_t)c.K * c.N + c.pad;
    d.so = (size_t)c.M * c.N + c.pad;
    size_t na = d.sa * d.batch, nb = d.sb * d.batch;
    d.a = malloc(na * sizeof *d.a), d.b = malloc(nb * sizeof *d.b);
    d.bias = malloc((size_t)c.N * sizeof *d.bias);
    tu_random(d.a, na, seed, 1.0f);
    tu_random(d.b, nb, seed + 1, 1.0f);
    tu_random(d.bias, (size_t)c.N, seed + 2, 1.0f);
    d.a16 = malloc(na * sizeof *d.a16), d.b16 = malloc(nb * sizeof *d.b16);
    return d;
}

/* a and b's 16-bit words from their floats (after a test changed some). */
static void data_round(mo_data *d) {
    if (d->in == VKA_F32) return;
    size_t na = d->sa * d->batch, nb = d->sb * d->batch;
    assert_int_equal(vka_convert(d->in, d->a16, VKA_F32, d->a, na), VKA_SUCCESS);
    assert_int_equal(vka_convert(d->in, d->b16, VKA_F32, d->b, nb), VKA_SUCCESS);
}

static void data_free(mo_data *d) {
    free(d->a), free(d->b), free(d->bias), free(d->a16), free(d->b16);
}

static const char *ctx_name(vka_context *ctx) {
    return tu_is_cpu(ctx) ? vka_context_cpu_kernels(ctx) : vka_context_vulkan_kernels(ctx);
}

static vka_matmul_desc desc_of(const mo_data *d, vka_tensor *out, vka_tensor *a, vka_tensor *b,
                               vka_tensor *bias) {
    const mo_case *c = &d->c;
    vka_matmul_desc m = {.out = out, .a = a, .b = b, .bias = bias, .M = c->M, .N = c->N,
                         .K = c->K, .batch = c->batch, .trans_a = c->ta, .trans_b = c->tb,
                         .alpha = c->alpha};
    if (c->pad) m.stride_a = d->sa, m.stride_b = d->sb, m.stride_out = d->so;
    return m;
}

/* What ctx computes: got (so * batch + 1 elements: out16 after the op), want (so * batch:
 * vka_copy of the float32 out of the same product). */
typedef struct mo_run {
    uint16_t *got, *want;
} mo_run;

static mo_run run_on(vka_context *ctx, const mo_data *d) {
    const mo_case *c = &d->c;
    size_t no = d->so * d->batch, na = d->sa * d->batch, nb = d->sb * d->batch;
    bool in16 = d->in != VKA_F32;
    mo_run r = {malloc((no + 1) * sizeof *r.got), malloc(no * sizeof *r.want)};
    for (size_t i = 0; i <= no; i++) r.got[i] = SENTINEL16;
    vka_tensor *ta = tu_tensor_typed(ctx, d->in, na, in16 ? (void *)d->a16 : (void *)d->a);
    vka_tensor *tb = tu_tensor_typed(ctx, d->in, nb, in16 ? (void *)d->b16 : (void *)d->b);
    vka_tensor *tbias = c->bias ? tu_tensor(ctx, (size_t)c->N, d->bias) : NULL;
    vka_tensor *out16 = tu_tensor_typed(ctx, d->out, no + 1, r.got);
    vka_tensor *out32 = tu_tensor(ctx, no, NULL), *copy16 = tu_tensor_typed(ctx, d->out, no, NULL);
    vka_matmul_desc m = desc_of(d, out16, ta, tb, tbias), m32 = desc_of(d, out32, ta, tb, tbias);
    tu_begin(ctx);
    if (vka_matmul(ctx, &m) != VKA_SUCCESS)
        fail_msg("%s out matmul on %s: %s", vka_dtype_string(d->out), ctx_name(ctx),
                 vka_last_error(ctx));
    assert_int_equal(vka_matmul(ctx, &m32), VKA_SUCCESS);
    assert_int_equal(vka_copy(ctx, copy16, out32, no), VKA_SUCCESS);
    tu_run(ctx);
    assert_int_equal(vka_tensor_read(out16, 0, r.got, no + 1), VKA_SUCCESS);
    assert_int_equal(vka_tensor_read(copy16, 0, r.want, no), VKA_SUCCESS);
    vka_tensor_destroy(ta);
    vka_tensor_destroy(tb);
    vka_tensor_destroy(tbias);
    vka_tensor_destroy(out16);
    vka_tensor_destroy(out32);
    vka_tensor_destroy(copy16);
    return r;
}

static void run_free(mo_run *r) { free(r->got), free(r->want); }

/* (a) and (b): every element of every batch as vka_copy made it, the gaps and the element past
 * the end sentinels. */
static void check_run(vka_context *ctx, const mo_data *d, const mo_run *r) {
    const mo_case *c = &d->c;
    size_t mn = (size_t)c->M * c->N;
    for (int bi = 0; bi < d->batch; bi++)
        for (size_t e = 0; e < d->so; e++) {
            size_t i = (size_t)bi * d->so + e;
            uint16_t want = e < mn ? r->want[i] : SENTINEL16;
            if (r->got[i] != want)
                fail_msg("%s: %s out, %s a and b, M=%d N=%d K=%d batch=%d ta=%d tb=%d bias=%d "
                         "alpha=%g pad=%zu: out[%d][%zu] (element %zu) is 0x%04X, %s 0x%04X",
                         ctx_name(ctx), vka_dtype_string(d->out), vka_dtype_string(d->in), c->M,
                         c->N, c->K, d->batch, c->ta, c->tb, c->bias, (double)c->alpha, c->pad,
                         bi, e, i, r->got[i], e < mn ? "vka_copy of the f32 out gives" : "the "
                         "sentinel past the matrix is", want);
        }
    size_t no = d->so * d->batch;
    if (r->got[no] != SENTINEL16)
        fail_msg("%s: out[%zu], past the op's elements (%s half of a word), became 0x%04X",
                 ctx_name(ctx), no, no % 2 ? "the high" : "the low", r->got[no]);
}

static void case_on(vka_context *ctx, vka_dtype out, vka_dtype in, mo_case c, uint64_t seed) {
    mo_data d = data_make(out, in, c, seed);
    data_round(&d);
    mo_run r = run_on(ctx, &d);
    check_run(ctx, &d, &r);
    run_free(&r);
    data_free(&d);
}

static const vka_dtype OUT_TYPES[] = {VKA_BF16, VKA_F16};

/* Every shape (with the transposes of `transposes`: bit t set runs ta = t & 1, tb = t & 2),
 * every out type, with float32 a and b and with a and b of out's type (and of the other 16-bit
 * type where other16). */
static void sweep(vka_context *ctx, const mo_case *shapes, size_t n, unsigned transposes,
                  bool other16, uint64_t seed) {
    for (size_t o = 0; o < TU_LEN(OUT_TYPES); o++) {
        vka_dtype out = OUT_TYPES[o];
        vka_dtype ins[3] = {VKA_F32, out, out == VKA_BF16 ? VKA_F16 : VKA_BF16};
        for (int k = 0; k < (other16 ? 3 : 2); k++)
            for (size_t s = 0; s < n; s++)
                for (int t = 0; t < 4; t++) {
                    if (!(transposes >> t & 1u)) continue;
                    mo_case c = shapes[s];
                    c.ta = c.ta != (bool)(t & 1), c.tb = c.tb != (bool)(t & 2);
                    case_on(ctx, out, ins[k], c, seed + 1000 * o + 100 * (uint64_t)k + 4 * s +
                                                     (uint64_t)t);
                }
    }
}

/* The shapes of every context. */
static const mo_case SHAPES[] = {
    {.M = 1, .N = 1, .K = 1},
    {.M = 1, .N = 7, .K = 33, .bias = true},
    {.M = 7, .N = 1, .K = 65, .alpha = -0.5f},
    {.M = 7, .N = 33, .K = 65, .bias = true},                              /* odd N */
    {.M = 33, .N = 65, .K = 7, .batch = 2, .pad = 3, .bias = true, .alpha = 0.75f},
    {.M = 65, .N = 7, .K = 33, .batch = 3, .pad = 1},                      /* odd strides */
    {.M = 3, .N = 301, .K = 77, .bias = true},                             /* N past a tile */
    {.M = 5, .N = 130, .K = 130, .tb = true, .bias = true, .alpha = 2.0f}, /* the GEMV */
    {.M = 131, .N = 77, .K = 261, .batch = 2, .pad = 5},                   /* M past a tile */
};

/* The CPU backend: every shape and transpose, every pair of types, each kernel set. */
static void test_matmul16_out_cpu_kernels(void **state) {
    (void)state;
    const vka_cpu_kernels kinds[] = {VKA_CPU_KERNELS_FAST, VKA_CPU_KERNELS_FAST_AVX2,
                                     VKA_CPU_KERNELS_REFERENCE};
    for (size_t k = 0; k < TU_LEN(kinds); k++) {
        vka_context *ctx = tu_cpu_kernels(kinds[k], 2);
        sweep(ctx, SHAPES, TU_LEN(SHAPES), 0xFu, true, 100);
        tu_done(ctx);
    }
    vka_context *ctx = tu_cpu_kernels(VKA_CPU_KERNELS_FAST, 3); /* other tiles per thread */
    sweep(ctx, SHAPES, TU_LEN(SHAPES), 0x9u, false, 200);
    tu_done(ctx);
}

/* Vulkan: each shape once, as given or (every other one) with both transposes, with one of the
 * four pairs of out's type and a and b's (float32 or out's type) in turn, since each type,
 * transpose and tile is a pipeline to build on lavapipe (seconds each); and the CPU-type
 * variant's vec4 and eight-at-a-time loads (multiples of 4 and 8), its one-row decode tile and
 * rows of 1025 (several workgroups along a row). */
static void vulkan_cases(vka_context *ctx) {
    static const mo_case more[] = {
        {.M = 20, .N = 24, .K = 40, .pad = 4, .batch = 3, .bias = true}, /* vec4 A, B (f32) */
        {.M = 20, .N = 24, .K = 40, .tb = true, .pad = 8, .batch = 3},   /* K8 (16-bit a, b) */
        {.M = 1, .N = 301, .K = 776, .tb = true, .bias = true},         /* a decode step */
        {.M = 100, .N = 1025, .K = 9, .bias = true, .alpha = -2.0f},    /* rows of 1025 */
    };
    size_t n = TU_LEN(SHAPES) + TU_LEN(more);
    for (size_t s = 0; s < n; s++) {
        bool first = s < TU_LEN(SHAPES);
        mo_case c = first ? SHAPES[s] : more[s - TU_LEN(SHAPES)];
        if (first && s % 2) c.ta = !c.ta, c.tb = !c.tb;
        vka_dtype out = OUT_TYPES[s % 2];
        /* the loads' shapes with the inputs they are for */
        vka_dtype in = first ? (s / 2 % 2 ? out : VKA_F32) : (s - TU_LEN(SHAPES)) % 2 ? out
                                                                                  : VKA_F32;
        case_on(ctx, out, in, c, 300 + s);
    }
}
TU_VULKAN_TESTS16(test_matmul16_out_vulkan, vulkan_cases)

/* A Vulkan context binding at most 4 KiB a view (1020 floats, 2040 16-bit elements). */
static vka_context *split_ctx(vka_kernels kernels) { return tu_gpu_limited(kernels, 4096); }

/* Products past 4 KiB views, split into blocks of batches, rows and columns (never K) that
 * start at either half of out's words (odd N and strides); a product that needs K blocks is
 * refused (DEVICE_LIMIT), naming out's type. */
static void split_cases(vka_kernels kernels) {
    static const mo_case shapes[] = {
        /* out's rows past the limit: blocks of rows starting at odd elements */
        {.M = 65, .N = 45, .K = 5, .batch = 2, .pad = 3, .bias = true, .alpha = 0.5f},
        /* one row past it: blocks of columns too (b transposed: its rows are n) */
        {.M = 3, .N = 2047, .K = 5, .tb = true, .bias = true},
        /* a's rows past it (a (M, K): its rows are m) */
        {.M = 131, .N = 3, .K = 77, .batch = 2, .pad = 1, .tb = true},
    };
    vka_context *ctx = split_ctx(kernels);
    if (!ctx) return;
    for (size_t s = 0; s < TU_LEN(shapes); s++) /* the four pairs of types over the shapes */
        for (int k = 0; k < 2; k++) {
            vka_dtype out = OUT_TYPES[(s + (size_t)k) % 2];
            case_on(ctx, out, k ? out : VKA_F32, shapes[s], 500 + 2 * s + (uint64_t)k);
        }
    /* K = 2101 float32 elements in a row of a: K blocks */
    mo_data d = data_make(VKA_BF16, VKA_F32, (mo_case){.M = 3, .N = 5, .K = 2101, .tb = true}, 9);
    vka_tensor *a = tu_tensor(ctx, d.sa, d.a), *b = tu_tensor(ctx, d.sb, d.b);
    vka_tensor *out = tu_tensor_typed(ctx, VKA_BF16, d.so, NULL);
    vka_matmul_desc m = desc_of(&d, out, a, b, NULL);
    tu_begin(ctx);
    vka_result r = vka_matmul(ctx, &m);
    if (r == VKA_SUCCESS) tu_end_expect(ctx, VKA_ERROR_DEVICE_LIMIT, NULL);
    else assert_int_equal(r, VKA_ERROR_DEVICE_LIMIT);
    assert_non_null(strstr(vka_last_error(ctx), "a bf16 out cannot take a product split along "
                                                "K (K = 2101"));
    vka_tensor_destroy(a);
    vka_tensor_destroy(b);
    vka_tensor_destroy(out);
    data_free(&d);
    tu_done(ctx);
}
static void test_matmul16_out_split_gpu_kernels(void **state) {
    (void)state;
    split_cases(VKA_KERNELS_GPU);
}
static void test_matmul16_out_split_cpu_kernels(void **state) {
    (void)state;
    split_cases(VKA_KERNELS_CPU);
}

/* (c): fp16 past 65520 gives Inf (a row of a and a column of b of 256: 2 * 65536 at K = 2),
 * bf16 keeps it finite; a NaN in a makes its row NaN; each as vka_copy of the f32 out. */
static void special_cases(vka_context *ctx) {
    for (size_t o = 0; o < TU_LEN(OUT_TYPES); o++)
        for (int k = 0; k < 2; k++) {
            vka_dtype out = OUT_TYPES[o], in = k ? out : VKA_F32;
            mo_case c = {.M = 5, .N = 9, .K = 2, .bias = true};
            mo_data d = data_make(out, in, c, 600 + 2 * o + (uint64_t)k);
            for (int kk = 0; kk < 2; kk++) d.a[1 * 2 + kk] = 256.0f, d.b[kk * 9 + 4] = 256.0f;
            d.bias[4] = 0.0f;
            d.a[3 * 2 + 1] = NAN;
            data_round(&d);
            mo_run r = run_on(ctx, &d);
            check_run(ctx, &d, &r);
            uint16_t inf = out == VKA_F16 ? 0x7C00u : 0x4800u; /* bf16: 131072 exactly */
            if (r.got[1 * 9 + 4] != inf)
                fail_msg("%s: %s out[1][4] = 2 * 256 * 256 is 0x%04X, want 0x%04X", ctx_name(ctx),
                         vka_dtype_string(out), r.got[1 * 9 + 4], inf);
            uint16_t exp = out == VKA_F16 ? 0x7C00u : 0x7F80u;
            for (int j = 0; j < 9; j++)
                if ((r.got[3 * 9 + j] & 0x7FFFu) <= exp)
                    fail_msg("%s: %s out[3][%d] is 0x%04X, want a NaN (a NaN in row 3 of a)",
                             ctx_name(ctx), vka_dtype_string(out), j, r.got[3 * 9 + j]);
            run_free(&r);
            data_free(&d);
        }
}
TU_VULKAN_TESTS16(test_matmul16_out_special_values, special_cases)

static void test_matmul16_out_special_values_cpu(void **state) {
    (void)state;
    vka_context *fast = tu_cpu_kernels(VKA_CPU_KERNELS_FAST, 2);
    vka_context *ref = tu_cpu_kernels(VKA_CPU_KERNELS_REFERENCE, 2);
    special_cases(fast);
    special_cases(ref);
    tu_done(fast);
    tu_done(ref);
}

static void expect_refusal(vka_context *ctx, const vka_matmul_desc *m, const char *text) {
    assert_int_equal(vka_matmul(ctx, m), VKA_ERROR_INVALID_ARGUMENT);
    if (!strstr(vka_last_error(ctx), text))
        fail_msg("\"%s\" lacks \"%s\"", vka_last_error(ctx), text);
}

/* (d): accumulate, an out one element short (counted in elements), out the same tensor as a
 * (16-bit a), each with its message; an odd element count that is exactly enough runs. */
static void refusal_cases(vka_context *ctx) {
    vka_tensor *a = tu_tensor(ctx, 3 * 4, NULL), *b = tu_tensor(ctx, 4 * 7, NULL);
    vka_tensor *short16 = tu_tensor_typed(ctx, VKA_F16, 20, NULL);
    vka_tensor *out16 = tu_tensor_typed(ctx, VKA_BF16, 21, NULL);
    vka_tensor *h = tu_tensor_typed(ctx, VKA_BF16, 64, NULL);
    tu_begin(ctx);
    vka_matmul_desc m = {.out = out16, .a = a, .b = b, .M = 3, .N = 7, .K = 4, .accumulate = true};
    expect_refusal(ctx, &m, "vka_matmul: accumulate into a bf16 out is not supported");
    m.accumulate = false, m.out = short16;
    expect_refusal(ctx, &m, "vka_matmul: out holds 20 elements but M*N = 3*7 = 21 are needed");
    m.out = h, m.a = h, m.b = h, m.M = m.N = m.K = 4;
    expect_refusal(ctx, &m, "vka_matmul: out must be a different tensor from a and b");
    tu_end_expect(ctx, VKA_ERROR_INVALID_ARGUMENT, NULL);
    m = (vka_matmul_desc){.out = out16, .a = a, .b = b, .M = 3, .N = 7, .K = 4};
    tu_begin(ctx);
    assert_int_equal(vka_matmul(ctx, &m), VKA_SUCCESS); /* 21 elements: 11 words, one padding */
    tu_run(ctx);
    vka_tensor_destroy(a);
    vka_tensor_destroy(b);
    vka_tensor_destroy(short16);
    vka_tensor_destroy(out16);
    vka_tensor_destroy(h);
}

static void test_matmul16_out_refusals_cpu(void **state) {
    (void)state;
    vka_context *ctx = tu_cpu();
    refusal_cases(ctx);
    tu_done(ctx);
}

static void test_matmul16_out_refusals_vulkan(void **state) {
    (void)state;
    vka_context *ctx = tu_gpu();
    refusal_cases(ctx);
    tu_done(ctx);
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matmul16_out_refusals_cpu),
        cmocka_unit_test(test_matmul16_out_refusals_vulkan),
        cmocka_unit_test(test_matmul16_out_cpu_kernels),
        cmocka_unit_test(test_matmul16_out_special_values_cpu),
        TU_VULKAN_TEST_ENTRIES16(test_matmul16_out_special_values),
        TU_VULKAN_TEST_ENTRIES16(test_matmul16_out_vulkan),
        cmocka_unit_test(test_matmul16_out_split_gpu_kernels),
        cmocka_unit_test(test_matmul16_out_split_cpu_kernels),
    };
    TU_RETURN_QUICK(argc, argv, tests, NULL, NULL);
}
