/*
 * Generation and evaluation of the GPT-2 model, checked against plain vka_gpt_forward calls.
 * Run on the CPU backend and again on Vulkan (skipped where there is no Vulkan device).
 */
#include "gpt_util.h"

#include <stdint.h>

/* Weights large enough that the next-token distributions are far from uniform. */
static void sharpen(vka_gpt *gpt) {
    size_t n = vka_gpt_num_params(gpt);
    float *p = malloc(n * sizeof *p);
    assert_int_equal(vka_gpt_get_params(gpt, p, n), VKA_SUCCESS);
    for (size_t i = 0; i < n; i++) p[i] *= 25.0f;
    assert_int_equal(vka_gpt_set_params(gpt, p, n), VKA_SUCCESS);
    free(p);
}

/* The model's logits (V) for the token after seq[0:len], with vka_gpt_generate's context: all
 * tokens while they fit in max_T; a token that would make it longer restarts it as the last
 * max_T/2 tokens before it plus that token. */
static void next_logits(vka_gpt *gpt, const int32_t *seq, size_t len, float *out) {
    vka_gpt_config c = vka_gpt_get_config(gpt);
    size_t start = 0;
    for (size_t l = 1; l <= len; l++)
        if (l - start > (size_t)c.max_T) start = l - 1 - (size_t)(c.max_T / 2);
    size_t T = len - start;
    float *logits = malloc(T * (size_t)c.V * sizeof *logits);
    assert_int_equal(vka_gpt_forward(gpt, seq + start, NULL, 1, (int)T, NULL, logits), VKA_SUCCESS);
    memcpy(out, logits + (T - 1) * (size_t)c.V, (size_t)c.V * sizeof *out);
    free(logits);
}

typedef struct counter {
    int calls, stop_after;
    int32_t seen[64];
} counter;

static bool count_tokens(void *user, int32_t token) {
    counter *c = user;
    c->seen[c->calls++] = token;
    return c->calls < c->stop_after;
}

/* Greedy decoding picks the argmax of exactly the logits a plain forward pass gives, with the
 * context restarting as its last half once prompt + generated exceeds max_T. */
static void test_generate_greedy_is_argmax(void **state) {
    vka_context *ctx = tm_ctx(state);
    vka_gpt_config cfg = {.max_T = 8, .V = 19, .L = 2, .NH = 2, .C = 16};
    vka_gpt *gpt = tm_model(ctx, cfg, 31);
    sharpen(gpt);
    enum { P = 5, NEW = 12 };
    int32_t seq[P + NEW];
    tm_tokens(seq, P, 19, 1);
    int32_t out[NEW];
    vka_sample_desc greedy = {.temperature = 0.0f};
    assert_int_equal(vka_gpt_generate(gpt, seq, P, NEW, &greedy, out, NULL, NULL), VKA_SUCCESS);
    float logits[19];
    for (int i = 0; i < NEW; i++) {
        next_logits(gpt, seq, P + (size_t)i, logits);
        int best = 0;
        for (int j = 1; j < 19; j++)
            if (logits[j] > logits[best]) best = j;
        if (out[i] != best)
            fail_msg("token %d: generated %d but the argmax is %d", i, out[i], best);
        seq[P + i] = out[i];
    }
    /* top_k = 1 at any temperature is greedy too. */
    int32_t top1[NEW];
    vka_sample_desc k1 = {.temperature = 1.0f, .top_k = 1, .seed = 5};
    assert_int_equal(vka_gpt_generate(gpt, seq, P, NEW, &k1, top1, NULL, NULL), VKA_SUCCESS);
    assert_memory_equal(top1, out, sizeof out);
    vka_gpt_destroy(gpt);
    tu_done(ctx);
}

/* Sampling is a function of the seed; each token is among the top_k of its logits; the
 * callback sees every token and can stop early. */
static void test_generate_sampling_is_seeded_and_top_k(void **state) {
    vka_context *ctx = tm_ctx(state);
    vka_gpt_config cfg = {.max_T = 16, .V = 23, .L = 1, .NH = 2, .C = 16};
    vka_gpt *gpt = tm_model(ctx, cfg, 32);
    sharpen(gpt);
    enum { P = 3, NEW = 20, K = 4 };
    int32_t seq[P + NEW];
    tm_tokens(seq, P, 23, 2);
    int32_t a[NEW], b[NEW], c[NEW];
    vka_sample_desc s = {.temperature = 1.0f, .top_k = K, .seed = 123};
    assert_int_equal(vka_gpt_generate(gpt, seq, P, NEW, &s, a, NULL, NULL), VKA_SUCCESS);
    assert_int_equal(vka_gpt_generate(gpt, seq, P, NEW, &s, b, NULL, NULL), VKA_SUCCESS);
    assert_memory_equal(a, b, sizeof a);
    /* Another seed draws other tokens (these distributions are peaked: some seeds agree). */
    bool differs = false;
    for (uint64_t seed = 124; seed < 140 && !differs; seed++) {
        s.seed = seed;
        assert_int_equal(vka_gpt_generate(gpt, seq, P, NEW, &s, c, NULL, NULL), VKA_SUCCESS);
        differs = memcmp(a, c, sizeof a) != 0;
    }
    assert_true(differs);

    float logits[23];
    int outside = 0;
    for (int i = 0; i < NEW; i++) {
        next_logits(gpt, seq, P + (size_t)i, logits);
        int above = 0; /* tokens strictly more likely than the one drawn */
        for (int j = 0; j < 23; j++) above += logits[j] > logits[a[i]];
        outside += above >= K;
        seq[P + i] = a[i];
    }
    assert_int_equal(outside, 0);

    counter cnt = {.stop_after = 7};
    s.seed = 123;
    assert_int_equal(vka_gpt_generate(gpt, seq, P, NEW, &s, NULL, count_tokens, &cnt), VKA_SUCCESS);
    assert_int_equal(cnt.calls, 7);
    assert_memory_equal(cnt.seen, a, 7 * sizeof *a);
    vka_gpt_destroy(gpt);
    tu_done(ctx);
}

static void test_generate_rejects_bad_input(void **state) {
    vka_context *ctx = tu_cpu();
    vka_gpt_config cfg = {.max_T = 8, .V = 10, .L = 1, .NH = 2, .C = 8};
    vka_gpt *gpt = tm_model(ctx, cfg, 0);
    int32_t prompt[3] = {1, 12, 3}, out[4];
    vka_sample_desc s = {.temperature = 1.0f};
    vka_result r = vka_gpt_generate(gpt, prompt, 3, 4, &s, out, NULL, NULL);
    assert_int_equal(r, VKA_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(vka_last_error(ctx), "prompt[1] = 12"));
    r = vka_gpt_generate(gpt, prompt, 0, 4, &s, out, NULL, NULL);
    assert_int_equal(r, VKA_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(vka_last_error(ctx), "empty"));
    prompt[1] = 2;
    s.temperature = -1.0f;
    r = vka_gpt_generate(gpt, prompt, 3, 4, &s, out, NULL, NULL);
    assert_int_equal(r, VKA_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(vka_last_error(ctx), "temperature"));
    vka_gpt_destroy(gpt);
    tu_done(ctx);
}

/* A NaN parameter is refused by set_params (naming it, setting nothing); huge finite ones that
 * overflow the logits make every generation path fail naming the step, never sample. */
static void test_generate_refuses_non_finite_logits(void **state) {
    vka_context *ctx = tm_ctx(state);
    vka_gpt_config cfg = {.max_T = 8, .V = 10, .L = 1, .NH = 2, .C = 8};
    vka_gpt *gpt = tm_model(ctx, cfg, 5);
    size_t n = vka_gpt_num_params(gpt);
    float *p = tm_params(gpt), *back = malloc(n * sizeof *back);
    float keep = p[n - 3];
    p[n - 3] = NAN;
    assert_int_equal(vka_gpt_set_params(gpt, p, n), VKA_ERROR_INVALID_ARGUMENT);
    char want[64];
    snprintf(want, sizeof want, "in[%zu] (", n - 3);
    assert_non_null(strstr(vka_last_error(ctx), want));
    assert_non_null(strstr(vka_last_error(ctx), "is NaN"));
    p[n - 3] = keep;
    assert_int_equal(vka_gpt_get_params(gpt, back, n), VKA_SUCCESS);
    assert_memory_equal(p, back, n * sizeof *p); /* nothing was set */
    for (size_t i = 0; i < n; i++) p[i] *= 1e37f;
    assert_int_equal(vka_gpt_set_params(gpt, p, n), VKA_SUCCESS);
    const int32_t prompt[3] = {1, 2, 3};
    int32_t out[4];
    const vka_sample_desc how[4] = {{0}, {.temperature = 1.0f, .top_k = 3},
                                    {.no_kv_cache = true},
                                    {.temperature = 1.0f, .top_k = 3, .no_kv_cache = true}};
    for (int h = 0; h < 4; h++) {
        vka_result r = vka_gpt_generate(gpt, prompt, 3, 4, &how[h], out, NULL, NULL);
        if (r != VKA_ERROR_NOT_FINITE || !strstr(vka_last_error(ctx), "step 0, position 2"))
            fail_msg("generate way %d: %s: %s", h, vka_result_string(r), vka_last_error(ctx));
    }
    vka_gpt_session *ss = NULL;
    assert_int_equal(vka_gpt_session_create(gpt, NULL, &ss), VKA_SUCCESS);
    assert_int_equal(vka_gpt_session_append(ss, prompt, 3), VKA_SUCCESS);
    int32_t tok = -7;
    assert_int_equal(vka_gpt_session_sample(ss, &how[1], NULL, &tok), VKA_ERROR_NOT_FINITE);
    assert_non_null(strstr(vka_last_error(ctx), "position 2"));
    assert_int_equal(tok, -7);
    vka_gpt_session_destroy(ss);
    free(p);
    free(back);
    vka_gpt_destroy(gpt);
    tu_done(ctx);
}

/* Eval scores windows at 0, T, 2T, ... while T+1 tokens fit: its count, and its loss equal to
 * one forward pass over the same windows. 600 windows span two eval batches (the last one
 * partial). */
static void test_eval_matches_forward_over_the_windows(void **state) {
    vka_context *ctx = tm_ctx(state);
    vka_gpt_config cfg = {.max_T = 8, .V = 17, .L = 1, .NH = 2, .C = 16};
    vka_gpt *gpt = tm_model(ctx, cfg, 33);
    sharpen(gpt);
    enum { T = 4, W = 600 };
    size_t n = (size_t)W * T + 1;
    int32_t *tokens = malloc((n + T) * sizeof *tokens);
    tm_tokens(tokens, n + T, 17, 4);
    double loss;
    size_t windows;
    assert_int_equal(vka_gpt_eval(gpt, tokens, n, T, &loss, &windows), VKA_SUCCESS);
    assert_int_equal(windows, W);
    int32_t *in = malloc((size_t)W * T * sizeof *in), *tg = malloc((size_t)W * T * sizeof *tg);
    for (int w = 0; w < W; w++) {
        memcpy(in + w * T, tokens + (size_t)w * T, T * sizeof *in);
        memcpy(tg + w * T, tokens + (size_t)w * T + 1, T * sizeof *tg);
    }
    float fwd;
    assert_int_equal(vka_gpt_forward(gpt, in, tg, W, T, &fwd, NULL), VKA_SUCCESS);
    print_message("eval %.7f, forward %.7f\n", loss, fwd);
    assert_true(fabs(loss - fwd) <= 1e-5 * fabs(fwd));

    /* Window counts: one token short of another window, and exactly one more. */
    assert_int_equal(vka_gpt_eval(gpt, tokens, n - 1, T, &loss, &windows), VKA_SUCCESS);
    assert_int_equal(windows, W - 1);
    assert_int_equal(vka_gpt_eval(gpt, tokens, n + T, T, &loss, &windows), VKA_SUCCESS);
    assert_int_equal(windows, W + 1);
    /* T = 0 means max_T. */
    assert_int_equal(vka_gpt_eval(gpt, tokens, 3 * 8 + 1, 0, &loss, &windows), VKA_SUCCESS);
    assert_int_equal(windows, 3);
    vka_result r = vka_gpt_eval(gpt, tokens, T, T, &loss, &windows);
    assert_int_equal(r, VKA_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(vka_last_error(ctx), "fewer than one window"));
    r = vka_gpt_eval(gpt, tokens, n, 9, &loss, &windows);
    assert_int_equal(r, VKA_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(vka_last_error(ctx), "max_T = 8"));
    free(in);
    free(tg);
    free(tokens);
    vka_gpt_destroy(gpt);
    tu_done(ctx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TM_BOTH(test_generate_greedy_is_argmax),
        TM_BOTH(test_generate_sampling_is_seeded_and_top_k),
        cmocka_unit_test(test_generate_rejects_bad_input),
        TM_BOTH(test_generate_refuses_non_finite_logits),
        TM_BOTH(test_eval_matches_forward_over_the_windows),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
