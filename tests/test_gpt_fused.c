/* The model with fused attention (vka_attention_forward/backward, the default) against the
 * composed path it replaced (vka_gpt_set_attention(VKA_ATTENTION_COMPOSED)), on both backends:
 * 50 training steps' losses within 1e-4, logits, gradients and evaluation, and greedy
 * generation with the KV cache token for token. T = 37 is no multiple of any tile. */
#include "gpt_util.h"

#include <math.h>

static const vka_gpt_config CFG = {.max_T = 40, .V = 67, .L = 2, .NH = 3, .C = 48};
enum { B = 3, T = 37, BT = B * T, STEPS = 50 };

static void run_impl(vka_context *ctx, vka_attention_impl impl, float *losses, float *logits,
                     float **grads, double *eval, int32_t *gen) {
    vka_gpt *gpt = tm_model(ctx, CFG, 9);
    assert_int_equal(vka_gpt_set_attention(gpt, impl), VKA_SUCCESS);
    assert_int_equal(vka_gpt_get_attention(gpt), impl);
    int32_t in[BT], tg[BT], text[4 * T + 1];
    tm_tokens(text, 4 * T + 1, CFG.V, 31);
    tm_tokens(in, BT, CFG.V, 32);
    for (int i = 0; i < BT; i++) tg[i] = (in[i] * 7 + 3) % CFG.V; /* learnable */
    float loss;
    if (vka_gpt_forward(gpt, in, tg, B, T, &loss, logits) != VKA_SUCCESS ||
        vka_gpt_forward_backward(gpt, in, tg, B, T, &loss) != VKA_SUCCESS)
        fail_msg("forward: %s", vka_last_error(ctx));
    *grads = tm_grads(gpt);
    assert_int_equal(vka_gpt_eval(gpt, text, 4 * T + 1, T, eval, NULL), VKA_SUCCESS);
    vka_adamw_desc opt = {.lr = 3e-3f, .grad_clip = 1.0f, .weight_decay = 0.1f};
    for (int s = 0; s < STEPS; s++)
        if (vka_gpt_train_step(gpt, in, tg, B, T, &opt, &losses[s], NULL) != VKA_SUCCESS)
            fail_msg("step %d: %s", s, vka_last_error(ctx));
    /* 60 greedy tokens from a 5-token prompt with the KV cache: crosses max_T = 40, so the
     * session re-prefills. */
    vka_sample_desc sd = {0};
    assert_int_equal(vka_gpt_generate(gpt, in, 5, 60, &sd, gen, NULL, NULL), VKA_SUCCESS);
    vka_gpt_destroy(gpt);
}

static void test_gpt_fused_matches_composed(void **state) {
    vka_context *ctx = tm_ctx(state);
    float loss[2][STEPS], *logits[2], *grads[2];
    double eval[2];
    int32_t gen[2][60];
    for (int i = 0; i < 2; i++) {
        logits[i] = malloc((size_t)BT * CFG.V * sizeof(float));
        run_impl(ctx, i ? VKA_ATTENTION_COMPOSED : VKA_ATTENTION_FUSED, loss[i], logits[i],
                 &grads[i], &eval[i], gen[i]);
    }
    double dl = 0, dg = 0, gmax = 0, dloss = 0;
    for (size_t i = 0; i < (size_t)BT * CFG.V; i++) dl = fmax(dl, fabs(logits[0][i] - logits[1][i]));
    size_t n = 0;
    {
        vka_gpt *g = tm_model(ctx, CFG, 9);
        n = vka_gpt_num_params(g);
        vka_gpt_destroy(g);
    }
    for (size_t i = 0; i < n; i++) {
        dg = fmax(dg, fabs(grads[0][i] - grads[1][i]));
        gmax = fmax(gmax, fabs(grads[1][i]));
    }
    for (int s = 0; s < STEPS; s++) dloss = fmax(dloss, fabs(loss[0][s] - loss[1][s]));
    int same = 0;
    while (same < 60 && gen[0][same] == gen[1][same]) same++;
    print_message("%s: loss step 1 %.6f / %.6f, step 50 %.6f / %.6f, max |loss diff| %.2g; "
                  "max |logit diff| %.2g, max |grad diff| %.2g of %.2g; eval %.7f / %.7f; "
                  "greedy tokens equal: %d of 60\n",
                  vka_context_backend(ctx) == VKA_BACKEND_CPU ? "cpu" : "vulkan", loss[0][0],
                  loss[1][0], loss[0][STEPS - 1], loss[1][STEPS - 1], dloss, dl, dg, gmax,
                  eval[0], eval[1], same);
    assert_true(loss[1][STEPS - 1] < loss[1][0] - 0.5f); /* it learned something */
    assert_true(dloss <= 1e-4);
    assert_true(dl <= 1e-5);
    assert_true(dg <= 1e-4 * gmax);
    assert_true(fabs(eval[0] - eval[1]) <= 1e-5);
    assert_int_equal(same, 60);
    for (int i = 0; i < 2; i++) free(logits[i]), free(grads[i]);
    tu_done(ctx);
}

/* A value that is no vka_attention_impl is refused, naming the type; the choice stays. */
static void test_gpt_set_attention_rejects_bad_value(void **state) {
    (void)state;
    vka_context *ctx = tu_cpu();
    vka_gpt *gpt = tm_model(ctx, CFG, 1);
    assert_int_equal(vka_gpt_set_attention(gpt, (vka_attention_impl)7), VKA_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(vka_last_error(ctx), "vka_attention_impl"));
    assert_int_equal(vka_gpt_get_attention(gpt), VKA_ATTENTION_FUSED);
    vka_gpt_destroy(gpt);
    tu_done(ctx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TM_BOTH(test_gpt_fused_matches_composed),
        cmocka_unit_test(test_gpt_set_attention_rejects_bad_value),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
