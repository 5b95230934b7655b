/* The elementwise ops with 16-bit tensors (src/backend.h's 16-bit rule; vkattn.h): gelu_forward
 * (out, inp), gelu_backward (inp, dout; dinp float32, accumulated) and residual_forward (out, a,
 * b), every combination of 16-bit tensors, bf16 and fp16, on the CPU backend (fast kernels on 2
 * and 3 threads, reference kernels) and on Vulkan (GPU and CPU-type variants):
 *  (a) bit-exact: the result is the float32 op's on the widened inputs, a 16-bit out that
 *      result rounded by vka_copy (the backend's convert op), on each backend;
 *  (b) within u |ref| + e32 of a double reference on the widened inputs (u the output's unit
 *      roundoff: bf16 2^-8, fp16 2^-11, 0 for float32; e32 = 1e-5 + 1e-5 |ref|, test_gelu's
 *      float32 bound);
 *  (c) an out (or dinp) one element longer than N, starting as sentinels: that element (the
 *      high half of the last word when N is odd) is left alone;
 *  (d) NaN stays NaN, an fp16 sum past 65520 gives Inf, bf16 keeps 1e38 finite.
 * N = 1, 2, 3, 7 (no whole vec4 or word pair), 4097 (past a 4096-element CPU block), 12289
 * (no multiple of 2, 4, 8 or a workgroup). */
#include "op_util.h"

typedef enum { OP_GELU_FORWARD, OP_GELU_BACKWARD, OP_RESIDUAL } ew_op;
static const char *const OP_NAMES[] = {"gelu_forward", "gelu_backward", "residual_forward"};
/* The 16-bit masks each op allows (bit 0: out/dinp, 1: inp/a, 2: dout/b). */
static const unsigned MASKS[3][8] = {{1, 2, 3, 0}, {2, 4, 6, 0}, {1, 2, 3, 4, 5, 6, 7, 0}};
static const size_t SIZES[] = {1, 2, 3, 7, 4097, 12289};

#define SENT16 0xABCDu
#define SENT32 0x7FC0ABCDu

static double unit_roundoff(vka_dtype t) { return t == VKA_BF16 ? 0x1p-8 : 0x1p-11; }

static vka_tensor *make(vka_context *ctx, vka_dtype dt, size_t n, const void *data) {
    vka_tensor_desc desc = {.n = n, .dtype = dt};
    vka_tensor *t = NULL;
    if (vka_tensor_create_desc(ctx, &desc, &t) != VKA_SUCCESS)
        fail_msg("%s tensor of %zu: %s", vka_dtype_string(dt), n, vka_last_error(ctx));
    if (data && vka_tensor_write(t, 0, data, n) != VKA_SUCCESS)
        fail_msg("write: %s", vka_last_error(ctx));
    return t;
}

/* n values as a tensor of type dt (float32, or their 16-bit words), plus one sentinel. */
static vka_tensor *make_vals(vka_context *ctx, vka_dtype dt, const float *x, size_t n, bool sent) {
    size_t m = n + (sent ? 1 : 0);
    if (dt == VKA_F32) {
        float *v = malloc(m * sizeof *v);
        memcpy(v, x, n * sizeof *v);
        if (sent) v[n] = tu_bits_f32(SENT32);
        vka_tensor *t = make(ctx, dt, m, v);
        free(v);
        return t;
    }
    uint16_t *h = malloc(m * sizeof *h);
    assert_int_equal(vka_convert(dt, h, VKA_F32, x, n), VKA_SUCCESS);
    if (sent) h[n] = SENT16;
    vka_tensor *t = make(ctx, dt, m, h);
    free(h);
    return t;
}

/* x rounded to dt and back (what a 16-bit tensor of x holds). */
static void round_to(vka_dtype dt, float *x, size_t n) {
    uint16_t *h = malloc(n * sizeof *h);
    assert_int_equal(vka_convert(dt, h, VKA_F32, x, n), VKA_SUCCESS);
    assert_int_equal(vka_convert(VKA_F32, x, dt, h, n), VKA_SUCCESS);
    free(h);
}

static void record(vka_context *ctx, ew_op op, vka_tensor *o, vka_tensor *a, vka_tensor *b,
                   size_t n) {
    vka_result r = op == OP_GELU_FORWARD    ? vka_gelu_forward(ctx, o, a, n)
                   : op == OP_GELU_BACKWARD ? vka_gelu_backward(ctx, o, a, b, n)
                                            : vka_residual_forward(ctx, o, a, b, n);
    if (r != VKA_SUCCESS) fail_msg("%s: %s", OP_NAMES[op], vka_last_error(ctx));
}

static double gelu_d(double x) { return 0.5 * x * (1.0 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x))); }
static double gelu_grad_d(double x) {
    double u = 0.7978845608028654 * (x + 0.044715 * x * x * x), t = tanh(u);
    return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * 0.7978845608028654 * (1.0 + 3 * 0.044715 * x * x);
}

/* The raw words of t's first m elements (4 or 2 bytes each) as uint32_t. */
static uint32_t *read_bits(const vka_tensor *t, vka_dtype dt, size_t m) {
    uint32_t *out = malloc(m * sizeof *out);
    if (dt == VKA_F32) {
        assert_int_equal(vka_tensor_read(t, 0, out, m), VKA_SUCCESS);
        return out;
    }
    uint16_t *h = malloc(m * sizeof *h);
    assert_int_equal(vka_tensor_read(t, 0, h, m), VKA_SUCCESS);
    for (size_t i = 0; i < m; i++) out[i] = h[i];
    free(h);
    return out;
}

static float bits_value(vka_dtype dt, uint32_t w) {
    if (dt == VKA_F32) return tu_bits_f32(w);
    uint16_t h = (uint16_t)w;
    float f;
    assert_int_equal(vka_convert(VKA_F32, &f, dt, &h, 1), VKA_SUCCESS);
    return f;
}

/* One case: op with the tensors of mask in type t, n elements; x, y, d0 the inputs (x: inp or a,
 * y: dout or b, d0: dinp's start), already holding what their tensors hold. */
static void run_case(vka_context *ctx, const char *where, ew_op op, unsigned mask, vka_dtype t,
                     const float *x, const float *y, const float *d0, size_t n, bool check_ref) {
    vka_dtype dt[3];
    for (int i = 0; i < 3; i++) dt[i] = mask >> i & 1 ? t : VKA_F32;
    bool two = op != OP_GELU_FORWARD;
    float *o_init = calloc(n, sizeof(float));
    if (op == OP_GELU_BACKWARD) memcpy(o_init, d0, n * sizeof(float));
    vka_tensor *o = make_vals(ctx, dt[0], o_init, n, true), *a = make_vals(ctx, dt[1], x, n, false);
    vka_tensor *b = two ? make_vals(ctx, dt[2], y, n, false) : NULL;
    /* the float32 op on the same values, and its output rounded by vka_copy */
    vka_tensor *o32 = make_vals(ctx, VKA_F32, o_init, n, false), *a32 = make_vals(ctx, VKA_F32, x, n, false);
    vka_tensor *b32 = two ? make_vals(ctx, VKA_F32, y, n, false) : NULL;
    vka_tensor *o32r = dt[0] != VKA_F32 ? make(ctx, dt[0], n, NULL) : NULL;
    tu_begin(ctx);
    record(ctx, op, o, a, b, n);
    record(ctx, op, o32, a32, b32, n);
    if (o32r) assert_int_equal(vka_copy(ctx, o32r, o32, n), VKA_SUCCESS);
    tu_run(ctx);
    uint32_t *got = read_bits(o, dt[0], n + 1);
    uint32_t *want = o32r ? read_bits(o32r, dt[0], n) : read_bits(o32, VKA_F32, n);
    char what[200];
    snprintf(what, sizeof what, "%s: %s %s mask %u (out/a/b), N = %zu", where, OP_NAMES[op],
             vka_dtype_string(t), mask, n);
    for (size_t i = 0; i < n; i++)
        if (got[i] != want[i])
            fail_msg("%s: element %zu is 0x%08x, the float32 op's (rounded) 0x%08x", what, i,
                     got[i], want[i]);
    if (got[n] != (dt[0] == VKA_F32 ? SENT32 : SENT16))
        fail_msg("%s: the element after N changed to 0x%x", what, got[n]);
    if (check_ref) {
        double u = dt[0] == VKA_F32 ? 0.0 : unit_roundoff(t), worst = 0.0;
        for (size_t i = 0; i < n; i++) {
            double ref = op == OP_GELU_FORWARD    ? gelu_d(x[i])
                         : op == OP_GELU_BACKWARD ? d0[i] + gelu_grad_d(x[i]) * y[i]
                                                  : (double)x[i] + y[i];
            double g = bits_value(dt[0], got[i]), err = fabs(g - ref);
            double bound = u * fabs(ref) + 1e-5 + 1e-5 * fabs(ref);
            if (!(err <= bound))
                fail_msg("%s: element %zu = %.9g, reference %.9g (error %.3g > bound %.3g)", what,
                         i, g, ref, err, bound);
            if (err / bound > worst) worst = err / bound;
        }
        if (n > 5000) print_message("%s: worst error %.2f of the bound\n", what, worst);
    }
    free(got), free(want), free(o_init);
    vka_tensor *all[] = {o, a, b, o32, a32, b32, o32r};
    for (size_t i = 0; i < TU_LEN(all); i++) vka_tensor_destroy(all[i]);
}

static void cases(vka_context *ctx, const char *where) {
    const vka_dtype types[] = {VKA_BF16, VKA_F16};
    for (size_t si = 0; si < TU_LEN(SIZES); si++) {
        size_t n = SIZES[si];
        float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y), *d0 = malloc(n * sizeof *d0);
        for (size_t ti = 0; ti < TU_LEN(types); ti++)
            for (int op = 0; op < 3; op++)
                for (const unsigned *m = MASKS[op]; *m; m++) {
                    vka_dtype t = types[ti];
                    tu_random(x, n, 11 + n + (uint64_t)op, op == OP_RESIDUAL ? 100.0f : 5.0f);
                    tu_random(y, n, 12 + n, op == OP_RESIDUAL ? 100.0f : 1.0f);
                    tu_random(d0, n, 13 + n, 1.0f);
                    if (*m & 2) round_to(t, x, n);
                    if (*m & 4) round_to(t, y, n);
                    run_case(ctx, where, (ew_op)op, *m, t, x, y, d0, n, true);
                }
        free(x), free(y), free(d0);
    }
}

/* (d): NaN, fp16 overflow, bf16's range, as the float32 ops then rounding make them. */
static void special_cases(vka_context *ctx, const char *where) {
    float x[6] = {NAN, 60000.0f, -60000.0f, 1e38f, 1.0f, -0.0f};
    float y[6] = {1.0f, 60000.0f, -60000.0f, 1e38f, NAN, -0.0f};
    float d0[6] = {0};
    const vka_dtype types[] = {VKA_BF16, VKA_F16};
    for (unsigned m = 1; m <= 7; m++)
        for (size_t ti = 0; ti < TU_LEN(types); ti++) {
            float xr[6], yr[6]; /* what the 16-bit inputs hold (fp16: 1e38 is Inf) */
            memcpy(xr, x, sizeof xr);
            memcpy(yr, y, sizeof yr);
            if (m & 2) round_to(types[ti], xr, 6);
            if (m & 4) round_to(types[ti], yr, 6);
            run_case(ctx, where, OP_RESIDUAL, m, types[ti], xr, yr, d0, 6, false);
        }
    /* the results themselves: fp16 out of 60000 + 60000 is +Inf, of NaN + 1 NaN */
    vka_tensor *a = make_vals(ctx, VKA_F32, x, 6, false), *b = make_vals(ctx, VKA_F32, y, 6, false);
    vka_tensor *h = make(ctx, VKA_F16, 6, NULL), *g = make(ctx, VKA_BF16, 6, NULL);
    tu_begin(ctx);
    assert_int_equal(vka_residual_forward(ctx, h, a, b, 6), VKA_SUCCESS);
    assert_int_equal(vka_gelu_forward(ctx, g, a, 6), VKA_SUCCESS);
    tu_run(ctx);
    uint16_t hv[6], gv[6];
    assert_int_equal(vka_tensor_read(h, 0, hv, 6), VKA_SUCCESS);
    assert_int_equal(vka_tensor_read(g, 0, gv, 6), VKA_SUCCESS);
    float hf[6], gf[6];
    assert_int_equal(vka_convert(VKA_F32, hf, VKA_F16, hv, 6), VKA_SUCCESS);
    assert_int_equal(vka_convert(VKA_F32, gf, VKA_BF16, gv, 6), VKA_SUCCESS);
    assert_true(isnan(hf[0]) && isnan(hf[4]));
    assert_true(isinf(hf[1]) && hf[1] > 0 && isinf(hf[2]) && hf[2] < 0);
    assert_true(isnan(gf[0]) && isfinite(gf[3]) && gf[3] > 9e37f); /* gelu(1e38) = 1e38 */
    /* gelu(1) = 0.841192 rounds to the bf16 0.83984375 (spacing 2^-8 in [0.5, 1)) */
    if (gf[4] != 0.83984375f) fail_msg("gelu(1) in bf16 is %.9g, not 0.83984375", gf[4]);
    vka_tensor *all[] = {a, b, h, g};
    for (size_t i = 0; i < TU_LEN(all); i++) vka_tensor_destroy(all[i]);
}

static void both(vka_context *ctx) {
    const char *where = tu_is_cpu(ctx) ? vka_context_cpu_kernels(ctx) : vka_context_vulkan_kernels(ctx);
    cases(ctx, where);
    special_cases(ctx, where);
}

static void test_ew16_cpu_fast(void **state) {
    (void)state;
    int threads[] = {2, 3};
    for (size_t i = 0; i < TU_LEN(threads); i++) {
        vka_context *ctx = tu_cpu_kernels(VKA_CPU_KERNELS_FAST, threads[i]);
        both(ctx);
        tu_done(ctx);
    }
}

static void test_ew16_cpu_reference(void **state) {
    (void)state;
    vka_context *ctx = tu_cpu_kernels(VKA_CPU_KERNELS_REFERENCE, 2);
    both(ctx);
    tu_done(ctx);
}

TU_VULKAN_TESTS(test_ew16_vulkan, both)

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ew16_cpu_fast),
        cmocka_unit_test(test_ew16_cpu_reference),
        TU_VULKAN_TEST_ENTRIES(test_ew16_vulkan),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
