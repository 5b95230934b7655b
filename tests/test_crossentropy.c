/* vka_crossentropy_forward / vka_crossentropy_backward over padded (N, Vp) logits. */
#include "op_util.h"

typedef struct ce_shape {
    int N, V, Vp;
    const int32_t *targets;
} ce_shape;

/* logits (N*Vp) -> losses (N) = logsumexp(row[:V]) - row[target]; the padding is never read.
 * Target -1: ignored, loss 0 (so its gradient is 0). */
static void ce_ref(void *user, const double *logits, double *losses) {
    const ce_shape *s = user;
    for (int i = 0; i < s->N; i++) {
        const double *l = logits + (size_t)i * s->Vp;
        if (s->targets[i] == -1) {
            losses[i] = 0.0;
            continue;
        }
        double max = -INFINITY, sum = 0.0;
        for (int j = 0; j < s->V; j++) max = l[j] > max ? l[j] : max;
        for (int j = 0; j < s->V; j++) sum += exp(l[j] - max);
        losses[i] = max + log(sum) - l[s->targets[i]];
    }
}

/* Logits with NaN in the padding columns: an op that reads them gives NaN. */
static float *make_logits(const ce_shape *s, uint64_t seed, float scale) {
    size_t n = (size_t)s->N * s->Vp;
    float *l = malloc(n * sizeof *l);
    tu_random(l, n, seed, scale);
    for (int i = 0; i < s->N; i++)
        for (int j = s->V; j < s->Vp; j++) l[(size_t)i * s->Vp + j] = NAN;
    return l;
}

/* losses (N) then dlogits (N*Vp) from ctx; in_place runs the backward on the logits tensor. */
static float *ce_run(vka_context *ctx, const ce_shape *s, const float *logits, float dloss,
                     bool in_place) {
    size_t n = (size_t)s->N * s->Vp;
    vka_tensor *lg = tu_tensor(ctx, n, logits), *tg = tu_tensor(ctx, (size_t)s->N, s->targets);
    vka_tensor *losses = tu_tensor_nan(ctx, (size_t)s->N);
    vka_tensor *dl = in_place ? lg : tu_tensor_nan(ctx, n);
    tu_begin(ctx);
    assert_int_equal(vka_crossentropy_forward(ctx, losses, lg, tg, s->N, s->V, s->Vp),
                     VKA_SUCCESS);
    assert_int_equal(vka_crossentropy_backward(ctx, dl, lg, tg, dloss, s->N, s->V, s->Vp),
                     VKA_SUCCESS);
    tu_run(ctx);
    float *res = malloc((s->N + n) * sizeof *res);
    vka_tensor_read(losses, 0, res, (size_t)s->N);
    vka_tensor_read(dl, 0, res + s->N, n);
    vka_tensor_destroy(lg);
    vka_tensor_destroy(tg);
    vka_tensor_destroy(losses);
    if (!in_place) vka_tensor_destroy(dl);
    return res;
}

static void ce_case(vka_context *ctx, ce_shape s, float scale, uint64_t seed) {
    size_t n = (size_t)s.N * s.Vp;
    float dloss = 1.0f / (float)s.N;
    float *logits = make_logits(&s, seed, scale);
    float *got = ce_run(ctx, &s, logits, dloss, false);
    float *got_in_place = ce_run(ctx, &s, logits, dloss, true);
    vka_context *cpu = tu_cpu();
    float *cpu_res = ce_run(cpu, &s, logits, dloss, false);
    tu_done(cpu);
    double *ld = tu_to_double(logits, n), *want = malloc((size_t)s.N * sizeof *want);
    double *fd = malloc(n * sizeof *fd);
    float *w = malloc((size_t)s.N * sizeof *w);
    for (int i = 0; i < s.N; i++) w[i] = dloss;
    ce_ref(&s, ld, want);
    tu_fd_grad(ce_ref, &s, logits, n, w, (size_t)s.N, fd); /* d(dloss * sum losses)/dlogits */
    tu_assert_close_d("crossentropy_forward", got, want, (size_t)s.N, 1e-5, 1e-5);
    tu_assert_close_d("crossentropy_backward vs finite differences", got + s.N, fd, n, 1e-6, 1e-4);
    for (int i = 0; i < s.N; i++) /* the padding is written, with zeros */
        for (int j = s.V; j < s.Vp; j++) assert_true(got[s.N + (size_t)i * s.Vp + j] == 0.0f);
    tu_vs_cpu(ctx, "crossentropy in place", got_in_place, got, s.N + n, 1e-6, 1e-5);
    tu_vs_cpu(ctx, "crossentropy vs cpu", got, cpu_res, s.N + n, 1e-6, 1e-5);
    free(logits);
    free(got);
    free(got_in_place);
    free(cpu_res);
    free(ld);
    free(want);
    free(fd);
    free(w);
}

static void shapes_cases(vka_context *ctx) {
    const int32_t targets[] = {0, 6, 3, 3, 1, 2, 5, 4};
    ce_case(ctx, (ce_shape){.N = 5, .V = 7, .Vp = 9, .targets = targets}, 3.0f, 1);
    ce_case(ctx, (ce_shape){.N = 8, .V = 7, .Vp = 7, .targets = targets}, 3.0f, 2);
    ce_case(ctx, (ce_shape){.N = 1, .V = 1, .Vp = 4, .targets = targets}, 3.0f, 3);
    ce_case(ctx, (ce_shape){.N = 3, .V = 65, .Vp = 128, .targets = targets}, 3.0f, 4);
    /* logits far from 0: exp overflows unless the max is subtracted */
    ce_case(ctx, (ce_shape){.N = 4, .V = 7, .Vp = 8, .targets = targets}, 1000.0f, 5);
    /* ignored positions (-1): loss 0 and a zero gradient row, the others unchanged */
    const int32_t ignoring[] = {-1, 6, -1, 3, 1, -1};
    ce_case(ctx, (ce_shape){.N = 6, .V = 7, .Vp = 9, .targets = ignoring}, 3.0f, 6);
    ce_case(ctx, (ce_shape){.N = 1, .V = 65, .Vp = 128, .targets = ignoring}, 3.0f, 7);
}

static void test_crossentropy_forward_backward_finite_difference(void **state) {
    (void)state;
    vka_context *ctx = tu_cpu();
    shapes_cases(ctx);
    tu_done(ctx);
}

/* Uniform logits over V give log(V) per row and dlogits = (1/V - onehot) * dloss. */
static void uniform_case(vka_context *ctx) {
    const int32_t targets[] = {2, 0};
    ce_shape s = {.N = 2, .V = 5, .Vp = 8, .targets = targets};
    float *logits = make_logits(&s, 1, 0.0f); /* zeros, NaN padding */
    float *res = ce_run(ctx, &s, logits, 0.5f, false);
    for (int i = 0; i < 2; i++) assert_true(fabs(res[i] - log(5.0)) <= 1e-6);
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 5; j++) {
            double want = (0.2 - (j == targets[i])) * 0.5;
            assert_true(fabs(res[2 + i * 8 + j] - want) <= 1e-7);
        }
    free(logits);
    free(res);
}

static void test_crossentropy_uniform_logits(void **state) {
    (void)state;
    vka_context *ctx = tu_cpu();
    uniform_case(ctx);
    tu_done(ctx);
}

/* A target outside [0, V) and not -1 fails the run naming it, on every backend (the Vulkan one
 * checks after the run); nothing is NaN and nothing is read out of range meanwhile. */
static void bad_target_case(vka_context *ctx) {
    const int32_t cases[2][3] = {{1, 7, -1}, {-1, 2, -2}};
    const char *names[2] = {"targets[1] = 7 is outside [0, 7)", "targets[2] = -2 is outside"};
    for (int c = 0; c < 2; c++) {
        ce_shape s = {.N = 3, .V = 7, .Vp = 8, .targets = cases[c]};
        float *logits = make_logits(&s, 5, 1.0f);
        size_t n = (size_t)s.N * s.Vp;
        vka_tensor *lg = tu_tensor(ctx, n, logits), *tg = tu_tensor(ctx, 3, cases[c]);
        vka_tensor *losses = tu_tensor(ctx, 3, NULL), *dl = tu_tensor(ctx, n, NULL);
        tu_begin(ctx);
        assert_int_equal(vka_crossentropy_forward(ctx, losses, lg, tg, 3, 7, 8), VKA_SUCCESS);
        assert_int_equal(vka_crossentropy_backward(ctx, dl, lg, tg, 1.0f, 3, 7, 8), VKA_SUCCESS);
        vka_graph *g = NULL;
        assert_int_equal(vka_graph_end(ctx, &g), VKA_SUCCESS);
        for (int run = 0; run < 2; run++) { /* and again: the check is part of every run */
            assert_int_equal(vka_graph_run(g), VKA_ERROR_INVALID_ARGUMENT);
            if (!strstr(vka_last_error(ctx), names[c]))
                fail_msg("case %d: %s", c, vka_last_error(ctx));
            assert_non_null(strstr(vka_last_error(ctx), "crossentropy_forward"));
        }
        float *res = tu_read(losses, 3), *d = tu_read(dl, n);
        tu_assert_finite("losses of a bad target", res, 3);
        tu_assert_finite("dlogits of a bad target", d, n);
        free(res);
        free(d);
        free(logits);
        vka_graph_destroy(g);
        vka_tensor *all[] = {lg, tg, losses, dl};
        for (int i = 0; i < 4; i++) vka_tensor_destroy(all[i]);
    }
}

static void test_crossentropy_cpu_rejects_target_out_of_range(void **state) {
    (void)state;
    vka_context *ctx = tu_cpu();
    bad_target_case(ctx);
    tu_done(ctx);
}

/* --- Vulkan, both kernel variants ------------------------------------------------------- */

/* The cases above plus V = 1, rows longer than a workgroup (V = 5000, Vp = 5120), and a GPT-2
 * vocabulary row (checked against the CPU backend only: finite differences would take long). */
static void vulkan_cases(vka_context *ctx) {
    shapes_cases(ctx);
    static const int32_t targets[] = {0, 4999, 2500, 17, 50256, 1, 2};
    ce_case(ctx, (ce_shape){.N = 3, .V = 1, .Vp = 1, .targets = (const int32_t[]){0, 0, 0}}, 3.0f,
            20);
    ce_case(ctx, (ce_shape){.N = 1, .V = 5000, .Vp = 5120, .targets = targets + 1}, 4.0f, 21);
    ce_shape s = {.N = 7, .V = 50257, .Vp = 50304, .targets = targets};
    size_t n = (size_t)s.N * s.Vp;
    float *logits = make_logits(&s, 22, 6.0f);
    float *got = ce_run(ctx, &s, logits, 1.0f / 7, true);
    vka_context *cpu = tu_cpu();
    float *cpu_res = ce_run(cpu, &s, logits, 1.0f / 7, false);
    tu_done(cpu);
    tu_vs_cpu(ctx, "crossentropy V=50257 in place vs cpu", got, cpu_res, s.N + n, 1e-6, 1e-5);
    free(logits);
    free(got);
    free(cpu_res);
}

TU_VULKAN_TESTS(test_crossentropy_vulkan_matches_cpu, vulkan_cases)
TU_VULKAN_TESTS(test_crossentropy_vulkan_uniform_logits, uniform_case)
TU_VULKAN_TESTS(test_crossentropy_vulkan_rejects_target_out_of_range, bad_target_case)

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_crossentropy_forward_backward_finite_difference),
        cmocka_unit_test(test_crossentropy_uniform_logits),
        cmocka_unit_test(test_crossentropy_cpu_rejects_target_out_of_range),
        TU_VULKAN_TEST_ENTRIES(test_crossentropy_vulkan_matches_cpu),
        TU_VULKAN_TEST_ENTRIES(test_crossentropy_vulkan_uniform_logits),
        TU_VULKAN_TEST_ENTRIES(test_crossentropy_vulkan_rejects_target_out_of_range),
    };
    TU_RETURN_QUICK(argc, argv, tests, NULL, NULL);
}
