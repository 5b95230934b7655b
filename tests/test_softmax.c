/* vka_softmax_forward / vka_softmax_backward: masked, causal, scaled row softmax. */
#include "op_util.h"

typedef struct sm_shape {
    int R, Tq, Tk;  /* Tq 0 = R */
    int mask_rows;  /* 0 = 1 */
    float scale;    /* 0 = 1 */
    bool causal;
    const float *mask; /* (ceil(R / mask_rows), Tk) or NULL */
} sm_shape;

static int sm_mask_len(const sm_shape *s) {
    int mr = s->mask_rows ? s->mask_rows : 1;
    return (s->R + mr - 1) / mr * s->Tk;
}

/* The double reference: out[r] = softmax over unmasked keys of scale * inp + mask. */
static void softmax_ref(const sm_shape *s, const double *inp, double *out) {
    int Tq = s->Tq ? s->Tq : s->R, mr = s->mask_rows ? s->mask_rows : 1;
    double scale = s->scale != 0.0f ? s->scale : 1.0;
    for (int r = 0; r < s->R; r++) {
        const double *x = inp + (size_t)r * s->Tk;
        double *o = out + (size_t)r * s->Tk;
        int last = s->causal ? r % Tq + s->Tk - Tq : s->Tk - 1;
        double max = -INFINITY, sum = 0.0;
        for (int k = 0; k < s->Tk; k++) {
            double m = s->mask ? s->mask[(size_t)(r / mr) * s->Tk + k] : 0.0;
            o[k] = k <= last ? scale * x[k] + m : -INFINITY;
            if (o[k] > max) max = o[k];
        }
        for (int k = 0; k < s->Tk; k++) {
            o[k] = max == -INFINITY || o[k] == -INFINITY ? 0.0 : exp(o[k] - max);
            sum += o[k];
        }
        for (int k = 0; k < s->Tk; k++) o[k] = sum > 0.0 ? o[k] / sum : 0.0;
    }
}

static void softmax_ref_fn(void *user, const double *x, double *y) { softmax_ref(user, x, y); }

/* Run the forward on ctx: returns out (R*Tk), malloc'd. */
static float *softmax_run(vka_context *ctx, const sm_shape *s, const float *inp) {
    size_t n = (size_t)s->R * s->Tk;
    vka_tensor *out = tu_tensor_nan(ctx, n), *in = tu_tensor(ctx, n, inp);
    vka_tensor *mask = s->mask ? tu_tensor(ctx, (size_t)sm_mask_len(s), s->mask) : NULL;
    tu_begin(ctx);
    vka_softmax_desc d = {.out = out, .inp = in, .mask = mask, .R = s->R, .Tq = s->Tq,
                          .Tk = s->Tk, .mask_rows = s->mask_rows, .scale = s->scale,
                          .causal = s->causal};
    assert_int_equal(vka_softmax_forward(ctx, &d), VKA_SUCCESS);
    tu_run(ctx);
    float *got = tu_read(out, n);
    vka_tensor_destroy(out);
    vka_tensor_destroy(in);
    vka_tensor_destroy(mask);
    return got;
}

/* Run the backward on ctx: returns what it added to dinp (initially dinp0). */
static float *softmax_backward_run(vka_context *ctx, const sm_shape *s, const float *dinp0,
                                   const float *dout, const float *out) {
    size_t n = (size_t)s->R * s->Tk;
    vka_tensor *dinp = tu_tensor(ctx, n, dinp0), *dout_t = tu_tensor(ctx, n, dout);
    vka_tensor *out_t = tu_tensor(ctx, n, out);
    tu_begin(ctx);
    assert_int_equal(vka_softmax_backward(ctx, dinp, dout_t, out_t, s->R, s->Tk, s->scale),
                     VKA_SUCCESS);
    tu_run(ctx);
    float *got = tu_read(dinp, n);
    float *added = tu_added(got, dinp0, n);
    free(got);
    vka_tensor_destroy(dinp);
    vka_tensor_destroy(dout_t);
    vka_tensor_destroy(out_t);
    return added;
}

/* Forward on ctx against the double reference and the CPU backend, on random inputs. */
static void softmax_forward_case(vka_context *ctx, sm_shape s, uint64_t seed) {
    size_t n = (size_t)s.R * s.Tk;
    float *inp = malloc(n * sizeof *inp);
    tu_random(inp, n, seed, 4.0f);
    float *got = softmax_run(ctx, &s, inp);
    vka_context *cpu = tu_cpu();
    float *ref_cpu = softmax_run(cpu, &s, inp);
    tu_done(cpu);
    double *xd = tu_to_double(inp, n), *want = malloc(n * sizeof *want);
    softmax_ref(&s, xd, want);
    tu_assert_close_d("softmax_forward (cpu backend)", ref_cpu, want, n, 1e-6, 1e-5);
    tu_assert_close_d("softmax_forward", got, want, n, 1e-6, 1e-5);
    tu_vs_cpu(ctx, "softmax_forward vs cpu", got, ref_cpu, n, 1e-6, 1e-5);
    free(inp);
    free(got);
    free(ref_cpu);
    free(xd);
    free(want);
}

/* Backward on ctx: adds to dinp (random start), matches the formula in double and central
 * finite differences of the forward. */
static void softmax_backward_case(vka_context *ctx, sm_shape s, uint64_t seed) {
    size_t n = (size_t)s.R * s.Tk;
    float *inp = malloc(n * sizeof *inp), *dout = malloc(n * sizeof *dout);
    float *dinp0 = malloc(n * sizeof *dinp0), *out = malloc(n * sizeof *out);
    tu_random(inp, n, seed, 3.0f);
    tu_random(dout, n, seed + 1, 1.0f);
    tu_random(dinp0, n, seed + 2, 1.0f);
    double *xd = tu_to_double(inp, n), *outd = malloc(n * sizeof *outd);
    softmax_ref(&s, xd, outd);
    for (size_t i = 0; i < n; i++) out[i] = (float)outd[i];

    float *added = softmax_backward_run(ctx, &s, dinp0, dout, out);
    vka_context *cpu = tu_cpu();
    float *added_cpu = softmax_backward_run(cpu, &s, dinp0, dout, out);
    tu_done(cpu);

    double scale = s.scale != 0.0f ? s.scale : 1.0;
    double *want = malloc(n * sizeof *want), *fd = malloc(n * sizeof *fd);
    for (int r = 0; r < s.R; r++) {
        const float *o = out + (size_t)r * s.Tk, *d = dout + (size_t)r * s.Tk;
        double dot = 0.0;
        for (int k = 0; k < s.Tk; k++) dot += (double)o[k] * d[k];
        for (int k = 0; k < s.Tk; k++)
            want[(size_t)r * s.Tk + k] = scale * o[k] * (d[k] - dot);
    }
    tu_fd_grad(softmax_ref_fn, &s, inp, n, dout, n, fd);
    tu_assert_close_d("softmax_backward vs formula", added, want, n, 1e-6, 1e-5);
    tu_assert_close_d("softmax_backward vs finite differences", added, fd, n, 1e-5, 1e-4);
    tu_vs_cpu(ctx, "softmax_backward vs cpu", added, added_cpu, n, 1e-6, 1e-5);
    free(inp);
    free(dout);
    free(dinp0);
    free(out);
    free(xd);
    free(outd);
    free(added);
    free(added_cpu);
    free(want);
    free(fd);
}

/* A mask of rows x Tk with about one key in four at -INFINITY (never a whole row). */
static float *random_mask(int rows, int Tk, uint64_t seed) {
    size_t n = (size_t)rows * Tk;
    float *m = malloc(n * sizeof *m);
    tu_random(m, n, seed, 1.0f);
    for (size_t i = 0; i < n; i++)
        if (m[i] > 0.5f && i % (size_t)Tk != 0) m[i] = -INFINITY;
    return m;
}

static void shapes_cases(vka_context *ctx, bool backward) {
    void (*run)(vka_context *, sm_shape, uint64_t) =
        backward ? softmax_backward_case : softmax_forward_case;
    int big = backward ? 300 : 5000; /* finite differences cost R*Tk forwards */
    run(ctx, (sm_shape){.R = 4, .Tk = 1}, 1);                                   /* T = 1 */
    run(ctx, (sm_shape){.R = 7, .Tk = 13, .scale = 0.37f}, 2);
    run(ctx, (sm_shape){.R = 3, .Tk = big}, 3);                                 /* long rows */
    run(ctx, (sm_shape){.R = 2 * 3 * 7, .Tq = 7, .Tk = 7, .causal = true}, 4); /* B=2 NH=3 */
    run(ctx, (sm_shape){.R = 2 * 3, .Tq = 3, .Tk = 5, .causal = true, .scale = 0.5f}, 5);
    float *mask = random_mask(2, 9, 6); /* one mask row per batch, shared by NH*Tq rows */
    run(ctx, (sm_shape){.R = 2 * 2 * 4, .Tq = 4, .Tk = 9, .mask_rows = 2 * 4, .causal = true,
                        .mask = mask, .scale = 1.5f}, 7);
    free(mask);
    mask = random_mask(5, 9, 8); /* one mask row per row */
    run(ctx, (sm_shape){.R = 5, .Tk = 9, .mask = mask}, 9);
    free(mask);
}

static void test_softmax_forward_matches_reference(void **state) {
    (void)state;
    vka_context *ctx = tu_cpu();
    shapes_cases(ctx, false);
    tu_done(ctx);
}

static void test_softmax_backward_finite_difference(void **state) {
    (void)state;
    vka_context *ctx = tu_cpu();
    shapes_cases(ctx, true);
    tu_done(ctx);
}

/* A 2x6 softmax whose second row is entirely masked: zeros forward and backward, no NaN. Also
 * causal rows with no visible key (Tq > Tk). */
static void fully_masked_cases(vka_context *ctx) {
    float inp[12], dout[12], dinp0[12] = {0}, mask[12];
    tu_random(inp, 12, 11, 2.0f);
    tu_random(dout, 12, 12, 1.0f);
    for (int k = 0; k < 6; k++) {
        mask[k] = 0.0f;
        mask[6 + k] = -INFINITY;
    }
    sm_shape s = {.R = 2, .Tk = 6, .mask = mask};
    float *out = softmax_run(ctx, &s, inp);
    tu_assert_finite("masked softmax", out, 12);
    double sum = 0.0;
    for (int k = 0; k < 6; k++) {
        sum += out[k];
        assert_true(out[6 + k] == 0.0f);
    }
    assert_true(fabs(sum - 1.0) < 1e-6);
    float *added = softmax_backward_run(ctx, &s, dinp0, dout, out);
    tu_assert_finite("masked softmax backward", added, 12);
    for (int k = 0; k < 6; k++) assert_true(added[6 + k] == 0.0f);
    free(out);
    free(added);

    /* Causal with 4 queries on 2 keys: queries 0 and 1 see no key. */
    sm_shape c = {.R = 4, .Tq = 4, .Tk = 2, .causal = true};
    out = softmax_run(ctx, &c, inp);
    tu_assert_finite("causal Tq > Tk", out, 8);
    const float want[8] = {0, 0, 0, 0, 1, 0, out[6], out[7]};
    tu_assert_close("causal Tq > Tk", out, want, 8, 0.0, 0.0);
    assert_true(fabs(out[6] + out[7] - 1.0) < 1e-6);
    free(out);
}

static void test_softmax_fully_masked_row_is_zero(void **state) {
    (void)state;
    vka_context *ctx = tu_cpu();
    fully_masked_cases(ctx);
    tu_done(ctx);
}

/* Rows shorter than a workgroup: lengths 1, 3, 5, 12, 13 with x_k = -100 - k (large negative
 * logits: exp underflows unless the max is subtracted). */
static void short_row_cases(vka_context *ctx) {
    const int lengths[] = {1, 3, 5, 12, 13};
    for (size_t li = 0; li < TU_LEN(lengths); li++) {
        int Tk = lengths[li];
        float x[13];
        double xd[13], want[13];
        for (int k = 0; k < Tk; k++) xd[k] = x[k] = -100.0f - (float)k;
        sm_shape s = {.R = 1, .Tk = Tk};
        float *p = softmax_run(ctx, &s, x);
        softmax_ref(&s, xd, want);
        tu_assert_close_d("short row", p, want, (size_t)Tk, 1e-6, 1e-5);
        if (Tk == 1) assert_true(p[0] == 1.0f);
        if (Tk == 12) {
            assert_true(fabs(p[0] - 0.632124) < 1e-6);
            assert_true(fabs(p[1] - 0.232546) < 1e-6);
            assert_true(fabs(p[2] - 0.085549) < 1e-6);
        }
        free(p);
    }
}

static void test_softmax_rows_shorter_than_workgroup(void **state) {
    (void)state;
    vka_context *ctx = tu_cpu();
    short_row_cases(ctx);
    tu_done(ctx);
}

/* Rows longer than a workgroup: zeros with a single 100 (at 1000 of 1024, at the last of
 * 5000): the peak gets 1, every other key e^-100 <= 1e-38. */
static void long_row_cases(vka_context *ctx) {
    const int lengths[] = {1024, 5000}, peaks[] = {1000, 4999};
    for (int li = 0; li < 2; li++) {
        int Tk = lengths[li];
        float *x = calloc((size_t)Tk, sizeof *x);
        x[peaks[li]] = 100.0f;
        sm_shape s = {.R = 1, .Tk = Tk};
        float *p = softmax_run(ctx, &s, x);
        for (int k = 0; k < Tk; k++) {
            if (k == peaks[li]) {
                if (!(fabs(p[k] - 1.0) <= 1e-6)) fail_msg("Tk=%d: p[peak] = %.9g", Tk, p[k]);
            } else if (!(p[k] >= 0.0f && p[k] <= 1e-38f)) {
                fail_msg("Tk=%d: p[%d] = %g, expected <= 1e-38", Tk, k, p[k]);
            }
        }
        free(x);
        free(p);
    }
}

static void test_softmax_rows_longer_than_workgroup(void **state) {
    (void)state;
    vka_context *ctx = tu_cpu();
    long_row_cases(ctx);
    tu_done(ctx);
}

/* --- Vulkan, both kernel variants: the cases above plus rows around workgroup sizes. ------ */

/* Row lengths around the shaders' workgroup and segment sizes, causal with Tq < Tk, and masks
 * shared by mask_rows rows. */
static void vulkan_shapes(vka_context *ctx, bool backward) {
    void (*run)(vka_context *, sm_shape, uint64_t) =
        backward ? softmax_backward_case : softmax_forward_case;
    shapes_cases(ctx, backward);
    const int lengths[] = {5, 12, 255, 257, 1024};
    for (size_t i = 0; i < TU_LEN(lengths); i++)
        run(ctx, (sm_shape){.R = 3, .Tk = lengths[i], .scale = 0.125f}, 20 + i);
    run(ctx, (sm_shape){.R = 2 * 37, .Tq = 37, .Tk = 70, .causal = true, .scale = 0.3f}, 30);
    float *mask = random_mask(2, 33, 31); /* B = 2 padding rows, NH * Tq = 3 * 11 rows each */
    run(ctx, (sm_shape){.R = 2 * 3 * 11, .Tq = 11, .Tk = 33, .mask_rows = 3 * 11,
                        .causal = true, .mask = mask}, 32);
    free(mask);
    if (!backward) run(ctx, (sm_shape){.R = 3 * 64, .Tq = 64, .Tk = 64, .causal = true}, 33);
}

static void vulkan_forward_cases(vka_context *ctx) { vulkan_shapes(ctx, false); }
static void vulkan_backward_cases(vka_context *ctx) { vulkan_shapes(ctx, true); }

/* The same graph run twice gives bit-identical rows (fixed reduction order). */
static void deterministic_cases(vka_context *ctx) {
    sm_shape s = {.R = 9, .Tk = 3000, .scale = 0.5f};
    size_t n = (size_t)s.R * s.Tk;
    float *inp = malloc(n * sizeof *inp);
    tu_random(inp, n, 40, 5.0f);
    float *a = softmax_run(ctx, &s, inp), *b = softmax_run(ctx, &s, inp);
    assert_memory_equal(a, b, n * sizeof *a);
    free(inp);
    free(a);
    free(b);
}

TU_VULKAN_TESTS(test_softmax_forward_vulkan_matches_cpu, vulkan_forward_cases)
TU_VULKAN_TESTS(test_softmax_backward_vulkan_matches_cpu, vulkan_backward_cases)
TU_VULKAN_TESTS(test_softmax_vulkan_fully_masked_row_is_zero, fully_masked_cases)
TU_VULKAN_TESTS(test_softmax_vulkan_rows_shorter_than_workgroup, short_row_cases)
TU_VULKAN_TESTS(test_softmax_vulkan_rows_longer_than_workgroup, long_row_cases)
TU_VULKAN_TESTS(test_softmax_vulkan_deterministic, deterministic_cases)

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_softmax_forward_matches_reference),
        cmocka_unit_test(test_softmax_backward_finite_difference),
        cmocka_unit_test(test_softmax_fully_masked_row_is_zero),
        cmocka_unit_test(test_softmax_rows_shorter_than_workgroup),
        cmocka_unit_test(test_softmax_rows_longer_than_workgroup),
        TU_VULKAN_TEST_ENTRIES(test_softmax_forward_vulkan_matches_cpu),
        TU_VULKAN_TEST_ENTRIES(test_softmax_backward_vulkan_matches_cpu),
        TU_VULKAN_TEST_ENTRIES(test_softmax_vulkan_fully_masked_row_is_zero),
        TU_VULKAN_TEST_ENTRIES(test_softmax_vulkan_rows_shorter_than_workgroup),
        TU_VULKAN_TEST_ENTRIES(test_softmax_vulkan_rows_longer_than_workgroup),
        TU_VULKAN_TEST_ENTRIES(test_softmax_vulkan_deterministic),
    };
    TU_RETURN_QUICK(argc, argv, tests, NULL, NULL);
}
