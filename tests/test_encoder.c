/* vka_encoder_forward / vka_encoder_backward (token + position embedding) and
 * vka_encoder_buckets. */
#include "op_util.h"

typedef struct enc_shape {
    int B, T, C, Vp, maxT;
    const int32_t *tokens; /* (B, T) */
} enc_shape;

/* theta = [wte (Vp*C), wpe (maxT*C)] -> out (B*T*C) */
static void encoder_ref(void *user, const double *theta, double *out) {
    const enc_shape *s = user;
    const double *wte = theta, *wpe = theta + (size_t)s->Vp * s->C;
    for (int b = 0; b < s->B; b++)
        for (int t = 0; t < s->T; t++)
            for (int c = 0; c < s->C; c++) {
                size_t p = (size_t)b * s->T + t;
                out[p * s->C + c] =
                    wte[(size_t)s->tokens[p] * s->C + c] + wpe[(size_t)t * s->C + c];
            }
}

static float *encoder_run(vka_context *ctx, const enc_shape *s, const float *theta) {
    size_t BT = (size_t)s->B * s->T, n_out = BT * s->C, n_wte = (size_t)s->Vp * s->C;
    vka_tensor *tok = tu_tensor(ctx, BT, s->tokens), *wte = tu_tensor(ctx, n_wte, theta);
    vka_tensor *wpe = tu_tensor(ctx, (size_t)s->maxT * s->C, theta + n_wte);
    vka_tensor *out = tu_tensor_nan(ctx, n_out);
    tu_begin(ctx);
    assert_int_equal(vka_encoder_forward(ctx, out, tok, wte, wpe, s->B, s->T, s->C), VKA_SUCCESS);
    tu_run(ctx);
    float *got = tu_read(out, n_out);
    vka_tensor_destroy(tok);
    vka_tensor_destroy(wte);
    vka_tensor_destroy(wpe);
    vka_tensor_destroy(out);
    return got;
}

/* Backward on ctx: what was added to [dwte, dwpe] (initially grad0). */
static float *encoder_backward_run(vka_context *ctx, const enc_shape *s, const float *dout,
                                   const float *grad0) {
    size_t BT = (size_t)s->B * s->T, n_wte = (size_t)s->Vp * s->C;
    size_t n = n_wte + (size_t)s->maxT * s->C;
    int32_t *buckets = malloc(VKA_BUCKETS_SIZE(BT) * sizeof *buckets);
    vka_encoder_buckets(s->tokens, (int)BT, buckets);
    vka_tensor *tok = tu_tensor(ctx, BT, s->tokens);
    vka_tensor *bk = tu_tensor(ctx, VKA_BUCKETS_SIZE(BT), buckets);
    vka_tensor *dout_t = tu_tensor(ctx, BT * s->C, dout), *dwte = tu_tensor(ctx, n_wte, grad0);
    vka_tensor *dwpe = tu_tensor(ctx, n - n_wte, grad0 + n_wte);
    tu_begin(ctx);
    assert_int_equal(vka_encoder_backward(ctx, dwte, dwpe, dout_t, tok, bk, s->B, s->T, s->C),
                     VKA_SUCCESS);
    tu_run(ctx);
    float *got = malloc(n * sizeof *got);
    vka_tensor_read(dwte, 0, got, n_wte);
    vka_tensor_read(dwpe, 0, got + n_wte, n - n_wte);
    float *added = tu_added(got, grad0, n);
    free(got);
    free(buckets);
    vka_tensor *all[] = {tok, bk, dout_t, dwte, dwpe};
    for (size_t i = 0; i < TU_LEN(all); i++) vka_tensor_destroy(all[i]);
    return added;
}

static void encoder_case(vka_context *ctx, enc_shape s, uint64_t seed) {
    size_t BT = (size_t)s.B * s.T, n_out = BT * s.C;
    size_t n = (size_t)s.Vp * s.C + (size_t)s.maxT * s.C;
    float *theta = malloc(n * sizeof *theta), *dout = malloc(n_out * sizeof *dout);
    float *grad0 = malloc(n * sizeof *grad0);
    tu_random(theta, n, seed, 1.0f);
    tu_random(dout, n_out, seed + 1, 1.0f);
    tu_random(grad0, n, seed + 2, 1.0f);
    float *got = encoder_run(ctx, &s, theta), *added = encoder_backward_run(ctx, &s, dout, grad0);
    vka_context *cpu = tu_cpu();
    float *got_cpu = encoder_run(cpu, &s, theta);
    float *added_cpu = encoder_backward_run(cpu, &s, dout, grad0);
    tu_done(cpu);
    double *td = tu_to_double(theta, n), *want = malloc(n_out * sizeof *want);
    double *fd = malloc(n * sizeof *fd);
    encoder_ref(&s, td, want);
    tu_fd_grad(encoder_ref, &s, theta, n, dout, n_out, fd);
    tu_assert_close_d("encoder_forward", got, want, n_out, 1e-6, 1e-6);
    tu_assert_close_d("encoder_backward vs finite differences", added, fd, n, 1e-5, 1e-5);
    tu_vs_cpu(ctx, "encoder_forward vs cpu", got, got_cpu, n_out, 0.0, 0.0);
    tu_vs_cpu(ctx, "encoder_backward vs cpu", added, added_cpu, n, 1e-6, 1e-5);
    free(theta);
    free(dout);
    free(grad0);
    free(got);
    free(added);
    free(got_cpu);
    free(added_cpu);
    free(td);
    free(want);
    free(fd);
}

static void shapes_cases(vka_context *ctx) {
    const int32_t tokens[] = {3, 0, 3, 10, 7, 7, 7, 1, 3, 0}; /* repeats, first and last rows */
    encoder_case(ctx, (enc_shape){.B = 2, .T = 5, .C = 7, .Vp = 11, .maxT = 8, .tokens = tokens},
                 1);
    encoder_case(ctx, (enc_shape){.B = 1, .T = 1, .C = 1, .Vp = 1, .maxT = 1,
                                  .tokens = (const int32_t[]){0}}, 2);
    encoder_case(ctx, (enc_shape){.B = 5, .T = 2, .C = 67, .Vp = 12, .maxT = 2, .tokens = tokens},
                 3);
}

static void test_encoder_forward_backward_finite_difference(void **state) {
    (void)state;
    vka_context *ctx = tu_cpu();
    shapes_cases(ctx);
    tu_done(ctx);
}

/* vka_encoder_buckets against its documented layout, built the slow way. */
static void check_buckets(const int32_t *tokens, int BT) {
    int32_t *bk = malloc(VKA_BUCKETS_SIZE(BT) * sizeof *bk);
    for (size_t i = 0; i < VKA_BUCKETS_SIZE(BT); i++) bk[i] = -7; /* must all be written */
    vka_encoder_buckets(tokens, BT, bk);
    const int32_t *start = bk + 1, *token = bk + BT + 2, *order = bk + 2 * (size_t)BT + 2;
    int n = 0, prev = -1, pos = 0;
    for (;;) { /* distinct tokens ascending, each with its positions ascending */
        int next = -1;
        for (int p = 0; p < BT; p++)
            if (tokens[p] > prev && (next < 0 || tokens[p] < next)) next = tokens[p];
        if (next < 0) break;
        assert_int_equal(token[n], next);
        assert_int_equal(start[n], pos);
        for (int p = 0; p < BT; p++)
            if (tokens[p] == next) assert_int_equal(order[pos++], p);
        n++;
        prev = next;
    }
    assert_int_equal(bk[0], n);
    assert_int_equal(start[n], BT);
    for (int j = n + 1; j <= BT; j++) assert_int_equal(start[j], 0);
    for (int j = n; j < BT; j++) assert_int_equal(token[j], 0);
    free(bk);
}

static void test_encoder_buckets_layout(void **state) {
    (void)state;
    check_buckets((const int32_t[]){5}, 1);
    check_buckets((const int32_t[]){3, 0, 3, 10, 7, 7, 7, 1, 3, 0}, 10);
    check_buckets((const int32_t[]){4, 4, 4, 4, 4, 4, 4}, 7);
    int32_t many[1000];
    for (int i = 0; i < 1000; i++) many[i] = (i * 7919) % 65; /* a char-level vocabulary */
    check_buckets(many, 1000);
    for (int i = 0; i < 1000; i++) many[i] = 999 - i; /* all distinct, descending */
    check_buckets(many, 1000);
}

/* The CPU backend checks ids when the graph runs (they are written between runs): a token
 * beyond the rows of wte fails the run with a message naming it instead of reading outside. */
static void test_encoder_cpu_rejects_token_out_of_range(void **state) {
    (void)state;
    vka_context *ctx = tu_cpu();
    const int32_t tokens[] = {1, 2, 40, 0};
    vka_tensor *tok = tu_tensor(ctx, 4, tokens), *wte = tu_tensor(ctx, 10 * 3, NULL);
    vka_tensor *wpe = tu_tensor(ctx, 4 * 3, NULL), *out = tu_tensor(ctx, 12, NULL);
    tu_begin(ctx);
    assert_int_equal(vka_encoder_forward(ctx, out, tok, wte, wpe, 1, 4, 3), VKA_SUCCESS);
    vka_graph *g = NULL;
    assert_int_equal(vka_graph_end(ctx, &g), VKA_SUCCESS);
    assert_int_equal(vka_graph_run(g), VKA_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(vka_last_error(ctx), "tokens[2] = 40"));
    const int32_t fixed[] = {1, 2, 9, 0};
    assert_int_equal(vka_tensor_write(tok, 0, fixed, 4), VKA_SUCCESS);
    assert_int_equal(vka_graph_run(g), VKA_SUCCESS); /* the same graph, valid ids */
    vka_graph_destroy(g);
    vka_tensor *all[] = {tok, wte, wpe, out};
    for (size_t i = 0; i < TU_LEN(all); i++) vka_tensor_destroy(all[i]);
    tu_done(ctx);
}

static void test_encoder_gpu_matches_cpu(void **state) {
    (void)state;
    vka_context *ctx = tu_gpu();
    shapes_cases(ctx);
    tu_done(ctx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_encoder_forward_backward_finite_difference),
        cmocka_unit_test(test_encoder_buckets_layout),
        cmocka_unit_test(test_encoder_cpu_rejects_token_out_of_range),
        cmocka_unit_test(test_encoder_gpu_matches_cpu),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
