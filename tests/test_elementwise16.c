/* vka_gelu_forward, vka_gelu_backward and vka_residual_forward with 16-bit tensors (bf16, fp16):
 * out and inp of the forward, inp and dout of the backward (dinp stays float32), out, a and b of
 * the residual, each float32 or 16-bit (src/backend.h, above gelu_forward). For every allowed
 * combination, on lengths 1, 2, 3, 7 (a word's halves, an odd last word), 1032 and 20008
 * (multiples of 8, not of a workgroup: the CPU-type variant's groups of 8), 100003 and 1000003
 * (odd: groups of 8, then word pairs; several CPU threads and work items), on both Vulkan kernel
 * variants and the CPU backend (its default kernels, the reference and AVX2 ones):
 *  (a) the 16-bit op gives the float32 op's bits on the widened inputs, a 16-bit out rounded by
 *      vka_copy (the backend's convert op), on the same context; the residual's bits also
 *      between the CPU backend and Vulkan (float addition is exact IEEE), GELU's within the
 *      float32 test's tolerance plus a 16-bit rounding;
 *  (b) against a float64 reference on the widened inputs, within the float32 op's bound plus
 *      the format's unit roundoff u (bf16 2^-8, fp16 2^-11) where the output is 16-bit;
 *  (c) a 16-bit out one element longer than N keeps that element (the high half of an odd N's
 *      last word; and dinp's);
 *  (d) NaN stays NaN, +-Inf inputs, fp16 overflow gives Inf (60000 + 60000). */
#include "op_util.h"

#include <float.h>
#include <stdint.h>

enum { GELU_FORWARD, GELU_BACKWARD, RESIDUAL, N_OPS };
static const char *const op_names[N_OPS] = {"gelu_forward", "gelu_backward", "residual_forward"};
/* The tensors that may be 16-bit, as bits of a case's mask: bit 0 the output (out; gelu_backward's
 * dinp never), bits 1 and 2 the inputs in signature order (inp; inp, dout; a, b). */
static const unsigned allowed16[N_OPS] = {0x3, 0x6, 0x7};
static const int n_inputs[N_OPS] = {1, 2, 2};
static const float scales[N_OPS][2] = {{8.0f, 0}, {8.0f, 1.0f}, {3.0f, 3.0f}};

#define SENTINEL16 0xABCDu

static double unit_roundoff(vka_dtype t) { return t == VKA_BF16 ? 0x1p-8 : 0x1p-11; }

static vka_tensor *make(vka_context *ctx, size_t n, vka_dtype dtype, const void *data) {
    return tu_tensor_typed(ctx, dtype, n, data);
}

/* One op's operands: inputs in[k] (n floats, already representable in their dtype), dinp0 (n)
 * for the backward. */
typedef struct {
    int op;
    vka_dtype t;   /* the 16-bit type */
    unsigned mask; /* which tensors are 16-bit (allowed16's bits) */
    size_t n;
    float *in[2];
    float *dinp0;
} ew_case;

/* The result of one run: the output's n + 1 elements (the last one past N), as 16-bit words
 * (h) or floats (f), whichever its type; and the float32 op's on the widened inputs, rounded to
 * the output's type on the device (ref_h) or not (ref_f). */
typedef struct {
    uint16_t *h, *ref_h;
    float *f, *ref_f;
} ew_result;

static bool is16(const ew_case *c, int k) { return c->mask >> k & 1u; }

static void op_call(vka_context *ctx, int op, vka_tensor *out, vka_tensor *const *in, size_t n) {
    vka_result r = op == GELU_FORWARD    ? vka_gelu_forward(ctx, out, in[0], n)
                   : op == GELU_BACKWARD ? vka_gelu_backward(ctx, out, in[0], in[1], n)
                                         : vka_residual_forward(ctx, out, in[0], in[1], n);
    if (r != VKA_SUCCESS) fail_msg("%s: %s", op_names[op], vka_last_error(ctx));
}

/* c's op on ctx with its types, and the float32 op on the same values, in one graph; checks
 * (a) on ctx and (c). */
static ew_result run_case(vka_context *ctx, const ew_case *c) {
    size_t n = c->n;
    const char *tn = vka_dtype_string(c->t);
    vka_tensor *in[2] = {0}, *in32[2] = {0};
    uint16_t *h = malloc((n + 1) * sizeof *h);
    for (int k = 0; k < n_inputs[c->op]; k++) {
        in32[k] = tu_tensor(ctx, n, c->in[k]);
        if (is16(c, k + 1)) {
            assert_int_equal(vka_convert(c->t, h, VKA_F32, c->in[k], n), VKA_SUCCESS);
            in[k] = make(ctx, n, c->t, h);
        } else {
            in[k] = in32[k];
        }
    }
    bool out16 = is16(c, 0);
    float *f = malloc((n + 1) * sizeof *f);
    for (size_t i = 0; i <= n; i++) h[i] = SENTINEL16;
    if (c->op == GELU_BACKWARD) memcpy(f, c->dinp0, n * sizeof *f);
    else for (size_t i = 0; i < n; i++) f[i] = NAN;
    f[n] = tu_bits_f32(0x12345678u);
    vka_tensor *out = out16 ? make(ctx, n + 1, c->t, h) : tu_tensor(ctx, n + 1, f);
    vka_tensor *out32 = tu_tensor(ctx, n + 1, f);
    vka_tensor *ref16 = out16 ? make(ctx, n + 1, c->t, h) : NULL;
    tu_begin(ctx);
    op_call(ctx, c->op, out, in, n);
    op_call(ctx, c->op, out32, in32, n);
    if (out16) assert_int_equal(vka_copy(ctx, ref16, out32, n), VKA_SUCCESS);
    tu_run(ctx);
    ew_result r = {0};
    if (out16) {
        r.h = h;
        r.ref_h = malloc((n + 1) * sizeof *r.ref_h);
        assert_int_equal(vka_tensor_read(out, 0, r.h, n + 1), VKA_SUCCESS);
        assert_int_equal(vka_tensor_read(ref16, 0, r.ref_h, n + 1), VKA_SUCCESS);
        free(f);
        for (size_t i = 0; i < n; i++)
            if (r.h[i] != r.ref_h[i])
                fail_msg("%s %s mask %#x n %zu element %zu: 0x%04x, the f32 op rounded 0x%04x",
                         op_names[c->op], tn, c->mask, n, i, r.h[i], r.ref_h[i]);
        if (r.h[n] != SENTINEL16)
            fail_msg("%s %s mask %#x n %zu: element N changed to 0x%04x", op_names[c->op], tn,
                     c->mask, n, r.h[n]);
    } else {
        free(h);
        free(f);
        r.f = tu_read(out, n + 1);
        r.ref_f = tu_read(out32, n + 1);
        for (size_t i = 0; i <= n; i++)
            if (tu_f32_bits(r.f[i]) != tu_f32_bits(r.ref_f[i]))
                fail_msg("%s %s mask %#x n %zu element %zu: %.9g (0x%08x), the f32 op %.9g",
                         op_names[c->op], tn, c->mask, n, i, r.f[i], tu_f32_bits(r.f[i]),
                         r.ref_f[i]);
        assert_int_equal(tu_f32_bits(r.f[n]), 0x12345678u);
    }
    for (int k = 0; k < n_inputs[c->op]; k++) {
        if (in[k] != in32[k]) vka_tensor_destroy(in[k]);
        vka_tensor_destroy(in32[k]);
    }
    vka_tensor_destroy(out);
    vka_tensor_destroy(out32);
    vka_tensor_destroy(ref16);
    return r;
}

static void result_free(ew_result *r) {
    free(r->h);
    free(r->ref_h);
    free(r->f);
    free(r->ref_f);
}

/* The output's first n elements as floats (a 16-bit one widened). */
static float *as_f32(const ew_case *c, const ew_result *r) {
    float *f = malloc((c->n + 1) * sizeof *f);
    if (r->h) assert_int_equal(vka_convert(VKA_F32, f, c->t, r->h, c->n), VKA_SUCCESS);
    else memcpy(f, r->f, c->n * sizeof *f);
    return f;
}

static double gelu_ref1(double x) {
    double u = 0.79788456080286535588 /* sqrt(2/pi) */ * (x + 0.044715 * x * x * x);
    return 0.5 * x * (1.0 + tanh(u));
}
static double gelu_grad_ref1(double x) {
    const double s = 0.79788456080286535588;
    double u = s * (x + 0.044715 * x * x * x), t = tanh(u);
    return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * s * (1.0 + 3.0 * 0.044715 * x * x);
}

/* (b): got against the float64 formula on c's values, within the float32 op's bound (the
 * tolerances of test_gelu.c; the residual's one f32 rounding) plus the output's 16-bit rounding:
 * |r16 - want| <= u |r32| + e32 <= (1 + u) e32 + u |want|. */
static void check_reference(const ew_case *c, const float *got) {
    size_t n = c->n;
    double *want = malloc(n * sizeof *want), *g = malloc(n * sizeof *g);
    for (size_t i = 0; i < n; i++) {
        double x = c->in[0][i];
        if (c->op == GELU_FORWARD) want[i] = gelu_ref1(x);
        else if (c->op == GELU_BACKWARD) want[i] = gelu_grad_ref1(x) * (double)c->in[1][i];
        else want[i] = x + (double)c->in[1][i];
        g[i] = c->op == GELU_BACKWARD ? (double)got[i] - (double)c->dinp0[i] : got[i];
    }
    double atol = c->op == RESIDUAL ? 0.0 : c->op == GELU_FORWARD ? 1e-6 : 1e-5;
    double rtol = c->op == RESIDUAL ? 0x1p-24 : c->op == GELU_FORWARD ? 1e-5 : 1e-4;
    if (is16(c, 0)) {
        double u = unit_roundoff(c->t);
        atol = (1 + u) * atol + 0x1p-25; /* + half fp16's smallest subnormal */
        rtol = (1 + u) * rtol + u;
    }
    double max_abs = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs(g[i] - want[i]);
        if (!(d <= atol + rtol * fabs(want[i])))
            fail_msg("%s %s mask %#x n %zu element %zu (x %.9g): %.9g, float64 %.9g (bound %.3g)",
                     op_names[c->op], vka_dtype_string(c->t), c->mask, n, i, c->in[0][i], g[i],
                     want[i], atol + rtol * fabs(want[i]));
        if (d > max_abs) max_abs = d;
    }
    free(want);
    free(g);
}

/* c's inputs rounded to their tensors' types, in place (so that the float32 op and the float64
 * formula see the values the 16-bit tensors hold). */
static void round_inputs(ew_case *c) {
    uint16_t *h = malloc(c->n * sizeof *h);
    for (int k = 0; k < n_inputs[c->op]; k++)
        if (is16(c, k + 1)) {
            assert_int_equal(vka_convert(c->t, h, VKA_F32, c->in[k], c->n), VKA_SUCCESS);
            assert_int_equal(vka_convert(VKA_F32, c->in[k], c->t, h, c->n), VKA_SUCCESS);
        }
    free(h);
}

/* c's input values: random, rounded to their types. */
static void case_inputs(ew_case *c, uint64_t seed) {
    for (int k = 0; k < n_inputs[c->op]; k++) {
        c->in[k] = malloc(c->n * sizeof(float));
        tu_random(c->in[k], c->n, seed + (uint64_t)k, scales[c->op][k]);
    }
    round_inputs(c);
    c->dinp0 = NULL;
    if (c->op == GELU_BACKWARD) {
        c->dinp0 = malloc(c->n * sizeof(float));
        tu_random(c->dinp0, c->n, seed + 7, 1.0f);
    }
}

static void case_free(ew_case *c) {
    free(c->in[0]);
    free(c->in[1]);
    free(c->dinp0);
}

/* One case on ctx and (unless ctx is the CPU backend) on a CPU context: (a) on each, (b), and
 * the two backends against each other. */
static void one_case(vka_context *ctx, vka_context *cpu, int op, vka_dtype t, unsigned mask,
                     size_t n, uint64_t seed) {
    ew_case c = {.op = op, .t = t, .mask = mask, .n = n};
    case_inputs(&c, seed);
    ew_result r = run_case(ctx, &c);
    float *got = as_f32(&c, &r);
    check_reference(&c, got);
    if (cpu) {
        ew_result rc = run_case(cpu, &c);
        float *want = as_f32(&c, &rc);
        if (op == RESIDUAL) {
            for (size_t i = 0; i < n; i++)
                if (tu_f32_bits(got[i]) != tu_f32_bits(want[i]))
                    fail_msg("residual %s mask %#x n %zu element %zu: Vulkan %.9g, CPU %.9g",
                             vka_dtype_string(t), mask, n, i, got[i], want[i]);
        } else {
            double u = is16(&c, 0) ? unit_roundoff(t) : 0.0;
            double atol = op == GELU_FORWARD ? 1e-6 : 1e-5, rtol = op == GELU_FORWARD ? 1e-5 : 1e-4;
            tu_assert_close(op_names[op], got, want, n, atol, rtol + 2 * u);
        }
        free(want);
        result_free(&rc);
    }
    free(got);
    result_free(&r);
    case_free(&c);
}

/* Every op, type, combination of 16-bit tensors and length up to max_n on ctx. */
static void all_cases(vka_context *ctx, vka_context *cpu, size_t max_n) {
    static const size_t sizes[] = {1, 2, 3, 7, 1032, 20008, 100003, 1000003};
    static const vka_dtype types[] = {VKA_BF16, VKA_F16};
    uint64_t seed = 1;
    for (int op = 0; op < N_OPS; op++)
        for (size_t ti = 0; ti < TU_LEN(types); ti++)
            for (unsigned mask = 1; mask <= allowed16[op]; mask++) {
                if (mask & ~allowed16[op]) continue;
                for (size_t s = 0; s < TU_LEN(sizes) && sizes[s] <= max_n; s++)
                    one_case(ctx, cpu, op, types[ti], mask, sizes[s], seed++);
            }
}

/* (d) on ctx: special values through every op with every tensor of the op 16-bit and with the
 * output alone 16-bit: run_case's bit checks, and the values themselves. */
static void special_cases(vka_context *ctx) {
    enum { N = 9 };
    static const float x[N] = {NAN, INFINITY, -INFINITY, 60000.0f, 0.0f, -0.0f, 1.0f, -NAN, 3.0f};
    static const float y[N] = {1.0f, 1.0f, 1.0f, 60000.0f, -0.0f, -0.0f, INFINITY, 2.0f, NAN};
    static const vka_dtype types[] = {VKA_BF16, VKA_F16};
    float dinp0[N] = {0};
    for (size_t ti = 0; ti < TU_LEN(types); ti++)
        for (int op = 0; op < N_OPS; op++)
            for (int m = 0; m < 2; m++) {
                unsigned mask = m ? allowed16[op] : allowed16[op] & 1u ? 1u : 2u;
                float xr[N], yr[N];
                memcpy(xr, x, sizeof xr);
                memcpy(yr, y, sizeof yr);
                ew_case c = {.op = op, .t = types[ti], .mask = mask, .n = N, .in = {xr, yr},
                             .dinp0 = dinp0};
                round_inputs(&c);
                ew_result r = run_case(ctx, &c);
                float *got = as_f32(&c, &r);
                if (op == GELU_FORWARD) {
                    assert_true(isnan(got[0]) && isnan(got[7]));
                    assert_true(got[1] == INFINITY);
                    assert_true(got[4] == 0.0f); /* gelu(1) = 0.841192 */
                    assert_true(fabs(got[6] - 0.841192) <= 1e-5 + 0.85 * unit_roundoff(c.t));
                } else if (op == GELU_BACKWARD) {
                    assert_true(isnan(got[0]) && isnan(got[7]) && isnan(got[8]));
                    assert_true(got[1] == 1.0f); /* gelu'(inf) = 1 */
                } else {
                    assert_true(isnan(got[0]) && isnan(got[7]) && isnan(got[8]));
                    assert_true(got[1] == INFINITY && got[6] == INFINITY);
                    assert_true(got[4] == 0.0f && !signbit(got[4]) && signbit(got[5]));
                    /* about 120000: past fp16's largest finite value (65504) */
                    if (is16(&c, 0) && types[ti] == VKA_F16) assert_true(got[3] == INFINITY);
                    else assert_true(got[3] > 119000.0f && got[3] < 121000.0f);
                }
                free(got);
                result_free(&r);
            }
}

static void test_elementwise16_cpu_matches_f32_and_reference(void **state) {
    (void)state;
    vka_context *ctx = tu_cpu();
    all_cases(ctx, NULL, SIZE_MAX);
    special_cases(ctx);
    tu_done(ctx);
}

/* The reference kernels and the AVX2 ones on 3 threads (100003 elements: several threads' work
 * items): the same chunks, so the same rules. */
static void test_elementwise16_cpu_kernels_match_f32(void **state) {
    (void)state;
    const vka_cpu_kernels kinds[] = {VKA_CPU_KERNELS_REFERENCE, VKA_CPU_KERNELS_FAST_AVX2};
    for (size_t k = 0; k < TU_LEN(kinds); k++) {
        vka_context *ctx = tu_cpu_kernels(kinds[k], 3);
        all_cases(ctx, NULL, 100003);
        special_cases(ctx);
        tu_done(ctx);
    }
}

static void vulkan_cases(vka_context *ctx) {
    vka_context *cpu = tu_cpu();
    all_cases(ctx, cpu, SIZE_MAX);
    special_cases(ctx);
    tu_done(cpu);
}
TU_VULKAN_TESTS(test_elementwise16_vulkan_matches_f32_and_cpu, vulkan_cases)

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_elementwise16_cpu_matches_f32_and_reference),
        cmocka_unit_test(test_elementwise16_cpu_kernels_match_f32),
        TU_VULKAN_TEST_ENTRIES(test_elementwise16_vulkan_matches_f32_and_cpu),
    };
    TU_RETURN_QUICK(argc, argv, tests, NULL, NULL);
}
