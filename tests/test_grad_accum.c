/* Gradient accumulation (vka_adamw_desc.grad_accum = N): a step on N micro-batches of B rows
 * is the step on their N*B rows, up to summation order. On both backends: one step's summed
 * gradients within 1e-6 (L2, relative) of the N*B rows' gradients; 20 steps of N*B rows
 * against 20 accumulated ones, the parameters within 1e-6 relative (L2; each tensor within
 * 4e-6, the smallest, 32 layernorm biases, being the noisiest) and each loss within 1e-6,
 * also with ignored targets (a whole micro-batch of -1 among them: the loss gradient is
 * 1 / the counted targets of all N); T = 13 and 11, B = 1 and 3 are no tile's multiple.
 *
 * Why in norm and not per element: float32 sums in another order differ by ~1e-7 relative
 * in norm, but by up to ~1e-5 in a small gradient that is a sum of cancelling terms, and
 * AdamW divides each update by sqrt(v), so such a parameter's update differs by as much
 * (measured per element, floor 1e-2: up to ~5e-6 after 20 steps; bounded here by 1e-4). The
 * attention's key biases are left out altogether: their exact gradient is 0 (a query's
 * scores all shift by q . b_k, which the softmax ignores), so what both runs compute is
 * rounding noise, which AdamW turns into lr-sized steps of either sign.
 *
 * Also: a saved and resumed state continues bit for bit and keeps N; fp16 loss scaling skips
 * the whole step when the micro-batches overflow; bf16 and fp16 stay close; the activations
 * take less memory; bad settings are refused by name. */
#define _POSIX_C_SOURCE 200809L /* mkdtemp */
#include "gpt_util.h"
#include "test_files.h"

#include <math.h>

static const vka_gpt_config CFG = {.max_T = 16, .V = 37, .L = 2, .NH = 2, .C = 16};
enum { STEPS = 20, MAX_ROWS = 12, MAX_T = 16 };

typedef struct accum_case {
    int B, N, T;
    bool ignore; /* some targets -1, micro-batch 1 wholly at even steps */
} accum_case;

/* Step s's N*B rows of (inputs, targets): learnable targets, some ignored. */
static void step_batch(const accum_case *c, int s, int32_t *in, int32_t *tg) {
    int rows = c->B * c->N, n = rows * c->T;
    tm_tokens(in, (size_t)n, CFG.V, 100 + (uint64_t)s);
    for (int i = 0; i < n; i++) tg[i] = (in[i] * 5 + 2) % CFG.V;
    if (!c->ignore) return;
    for (int i = 3; i < n; i += 7) tg[i] = -1;
    if (s % 2 == 0 && c->N > 1)
        for (int i = c->B * c->T; i < 2 * c->B * c->T; i++) tg[i] = -1;
}

/* STEPS steps of c's data as N micro-batches (accum) or one batch of N*B rows; the parameters
 * after them (malloc'd) and each step's loss. */
static float *train(vka_context *ctx, const accum_case *c, bool accum, vka_dtype precision,
                    float *losses) {
    vka_gpt *gpt = tm_model(ctx, CFG, 7);
    assert_int_equal(vka_gpt_set_precision(gpt, precision), VKA_SUCCESS);
    int32_t in[MAX_ROWS * MAX_T], tg[MAX_ROWS * MAX_T];
    vka_adamw_desc opt = {.lr = 3e-3f, .grad_clip = 1.0f, .weight_decay = 0.1f,
                          .grad_accum = accum ? c->N : 0};
    for (int s = 0; s < STEPS; s++) {
        step_batch(c, s, in, tg);
        int B = accum ? c->B : c->B * c->N;
        if (vka_gpt_train_step(gpt, in, tg, B, c->T, &opt, &losses[s], NULL) != VKA_SUCCESS)
            fail_msg("step %d (%s): %s", s, accum ? "accumulated" : "one batch", vka_last_error(ctx));
    }
    assert_int_equal(vka_gpt_step(gpt), STEPS);
    float *p = tm_params(gpt);
    vka_gpt_destroy(gpt);
    return p;
}

/* ||a - b|| / ||b|| (L2) over the i without skip[i] */
static double norm_rel_but(const float *a, const float *b, size_t n, const bool *skip) {
    double num = 0.0, den = 0.0;
    for (size_t i = 0; i < n; i++) {
        if (skip[i]) continue;
        num += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        den += (double)b[i] * b[i];
    }
    return den > 0.0 ? sqrt(num / den) : sqrt(num);
}

/* max over i of |a - b| / max(|a|, |b|, floor), leaving out the i with skip[i] (NULL: none) */
static double max_rel_but(const float *a, const float *b, size_t n, double floor,
                          const bool *skip) {
    double m = 0.0;
    for (size_t i = 0; i < n; i++) {
        if (skip && skip[i]) continue;
        double x = a[i], y = b[i];
        m = fmax(m, fabs(x - y) / fmax(fmax(fabs(x), fabs(y)), floor));
    }
    return m;
}

/* The 16 parameter tensors' sizes in llm.c order. */
static void tensor_sizes(vka_gpt_config c, size_t *sz) {
    size_t C = (size_t)c.C, L = (size_t)c.L;
    size_t s[16] = {(size_t)c.Vp * C, (size_t)c.max_T * C, L * C, L * C, L * 3 * C * C, L * 3 * C,
                    L * C * C, L * C, L * C, L * C, L * 4 * C * C, L * 4 * C, L * C * 4 * C, L * C,
                    C, C};
    memcpy(sz, s, sizeof s);
}

static void test_grad_accum_matches_one_big_batch(void **state) {
    vka_context *ctx = tm_ctx(state);
    const char *where = *(const int *)*state == TM_ON_GPU ? "vulkan" : "cpu";
    const accum_case cases[] = {
        {.B = 2, .N = 2, .T = 13},
        {.B = 1, .N = 3, .T = 13, .ignore = true},
        {.B = 3, .N = 3, .T = 11, .ignore = true},
    };
    vka_gpt *probe = tm_model(ctx, CFG, 7);
    size_t n = vka_gpt_num_params(probe), sz[16];
    tensor_sizes(vka_gpt_get_config(probe), sz);
    vka_gpt_destroy(probe);
    /* the key biases: the middle C of each layer's 3C qkvb */
    bool *key_bias = calloc(n, sizeof *key_bias);
    size_t qkvb = sz[0] + sz[1] + sz[2] + sz[3] + sz[4];
    for (int l = 0; l < CFG.L; l++)
        for (int i = 0; i < CFG.C; i++) key_bias[qkvb + (size_t)l * 3 * CFG.C + CFG.C + i] = true;
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const accum_case *c = &cases[k];
        float l_big[STEPS], l_acc[STEPS];
        float *big = train(ctx, c, false, VKA_F32, l_big);
        float *acc = train(ctx, c, true, VKA_F32, l_acc);
        double dp = max_rel_but(big, acc, n, 1e-2, key_bias);
        double dl = max_rel_but(l_big, l_acc, STEPS, 0.0, NULL), dt = 0.0;
        for (size_t t = 0, off = 0; t < 16; off += sz[t++])
            dt = fmax(dt, norm_rel_but(acc + off, big + off, sz[t], key_bias + off));
        double da = norm_rel_but(acc, big, n, key_bias);
        print_message("%s: B = %d x N = %d, T = %d%s: relative difference after %d steps: "
                      "parameters %.3g (L2, all), at most %.3g per tensor (L2), %.3g per element "
                      "(floor 1e-2); losses at most %.3g\n", where, c->B, c->N, c->T,
                      c->ignore ? " (ignored targets)" : "", STEPS, da, dt, dp, dl);
        if (da > 1e-6 || dt > 4e-6 || dp > 1e-4 || dl > 1e-6)
            fail_msg("B = %d x N = %d: parameters differ by %g (L2, > 1e-6), %g per tensor (> "
                     "4e-6), %g per element (> 1e-4), losses by %g (> 1e-6) relative", c->B,
                     c->N, da, dt, dp, dl);
        free(big);
        free(acc);
    }
    free(key_bias);
    tu_done(ctx);
}

/* One step: the summed gradients (vka_gpt_get_grads), the loss, the gradient norm and the
 * updated parameters against one batch of the N*B rows; the activations are sized for B, so
 * the model holds less memory. */
static void test_grad_accum_gradients_match_one_big_batch(void **state) {
    vka_context *ctx = tm_ctx(state);
    const accum_case c = {.B = 1, .N = 3, .T = 13, .ignore = true};
    int32_t in[MAX_ROWS * MAX_T], tg[MAX_ROWS * MAX_T];
    step_batch(&c, 0, in, tg);
    float *g[2], *p[2], loss[2], norm[2];
    uint64_t bytes[2];
    size_t n = 0;
    for (int accum = 0; accum < 2; accum++) {
        vka_gpt *gpt = tm_model(ctx, CFG, 7);
        n = vka_gpt_num_params(gpt);
        vka_adamw_desc opt = {.lr = 1e-3f, .grad_clip = 1.0f, .grad_accum = accum ? c.N : 1};
        int B = accum ? c.B : c.B * c.N;
        if (vka_gpt_train_step(gpt, in, tg, B, c.T, &opt, &loss[accum], &norm[accum]) != VKA_SUCCESS)
            fail_msg("%s", vka_last_error(ctx));
        g[accum] = tm_grads(gpt);
        p[accum] = tm_params(gpt);
        bytes[accum] = vka_gpt_memory_bytes(gpt);
        vka_gpt_destroy(gpt);
    }
    bool *none = calloc(n, sizeof *none);
    double dg = norm_rel_but(g[1], g[0], n, none), dp = norm_rel_but(p[1], p[0], n, none);
    double dl = fabs((double)loss[1] - loss[0]) / loss[0];
    double dn = fabs((double)norm[1] - norm[0]) / norm[0];
    print_message("one step: relative difference of the gradients %.3g (L2), the parameters "
                  "%.3g, the loss %.3g, the gradient norm %.3g\n", dg, dp, dl, dn);
    if (dg > 1e-6 || dp > 1e-6 || dl > 1e-6 || dn > 1e-6)
        fail_msg("gradients %g, parameters %g, loss %g, norm %g relative (> 1e-6)", dg, dp, dl, dn);
    print_message("  device memory: %llu bytes accumulated, %llu for B*N rows\n",
                  (unsigned long long)bytes[1], (unsigned long long)bytes[0]);
    assert_true(bytes[1] < bytes[0]);
    for (int k = 0; k < 2; k++) {
        free(g[k]);
        free(p[k]);
    }
    free(none);
    tu_done(ctx);
}

/* Mixed precision accumulates too (bf16; fp16 with its default loss scaling, 2^16): the
 * products round weights and activations alike in both runs, so only the summation order
 * differs; the 16-bit weight copies may then round apart, so the bound is 16-bit's, not
 * float32's. */
static void test_grad_accum_16bit_close_to_one_big_batch(void **state) {
    vka_context *ctx = tm_ctx(state);
    const accum_case c = {.B = 2, .N = 2, .T = 13, .ignore = true};
    const vka_dtype types[2] = {VKA_BF16, VKA_F16};
    for (int k = 0; k < 2; k++) {
        float l_big[STEPS], l_acc[STEPS];
        float *big = train(ctx, &c, false, types[k], l_big);
        float *acc = train(ctx, &c, true, types[k], l_acc);
        double dl = max_rel_but(l_big, l_acc, STEPS, 0.0, NULL);
        print_message("%s: max relative loss difference %.3g\n", vka_dtype_string(types[k]), dl);
        if (dl > 1e-3) fail_msg("%s losses differ by %g relative", vka_dtype_string(types[k]), dl);
        free(big);
        free(acc);
    }
    tu_done(ctx);
}

/* fp16 with S = 2^24: the scaled loss gradients overflow 16 bits; the accumulated step is
 * skipped as a whole (no parameter changes, the AdamW t stays), as the one-batch step is. */
static void test_grad_accum_fp16_overflow_skips_the_step(void **state) {
    vka_context *ctx = tm_ctx(state);
    const accum_case c = {.B = 2, .N = 3, .T = 11};
    int32_t in[MAX_ROWS * MAX_T], tg[MAX_ROWS * MAX_T];
    step_batch(&c, 0, in, tg);
    for (int accum = 0; accum < 2; accum++) {
        vka_gpt *gpt = tm_model(ctx, CFG, 7);
        assert_int_equal(vka_gpt_set_precision(gpt, VKA_F16), VKA_SUCCESS);
        assert_int_equal(vka_gpt_set_loss_scale(gpt, 0x1p24f), VKA_SUCCESS);
        float *before = tm_params(gpt), loss, norm;
        vka_adamw_desc opt = {.lr = 1e-2f, .grad_accum = accum ? c.N : 1};
        int B = accum ? c.B : c.B * c.N;
        if (vka_gpt_train_step(gpt, in, tg, B, c.T, &opt, &loss, &norm) != VKA_SUCCESS)
            fail_msg("%s", vka_last_error(ctx));
        assert_false(isfinite(norm));
        assert_true(isfinite(loss));
        assert_int_equal(vka_gpt_skipped_steps(gpt), 1);
        assert_int_equal(vka_gpt_step(gpt), 0);
        assert_true(vka_gpt_loss_scale(gpt) == 0x1p23f);
        float *after = tm_params(gpt);
        assert_memory_equal(before, after, vka_gpt_num_params(gpt) * sizeof(float));
        free(before);
        free(after);
        vka_gpt_destroy(gpt);
    }
    tu_done(ctx);
}

/* 10 accumulated steps, saved, loaded, 10 more: bit for bit the 20 straight ones, and the
 * state keeps grad_accum. */
static void test_grad_accum_resume_is_bit_exact(void **state) {
    vka_context *ctx = tm_ctx(state);
    tf_dir d = tf_mkdir();
    const char *path = tf_path(&d, "run.state.bin");
    const accum_case c = {.B = 1, .N = 3, .T = 13, .ignore = true};
    float l_straight[STEPS];
    float *straight = train(ctx, &c, true, VKA_F32, l_straight);
    vka_gpt *gpt = tm_model(ctx, CFG, 7);
    int32_t in[MAX_ROWS * MAX_T], tg[MAX_ROWS * MAX_T];
    vka_adamw_desc opt = {.lr = 3e-3f, .grad_clip = 1.0f, .weight_decay = 0.1f, .grad_accum = c.N};
    float loss;
    for (int s = 0; s < STEPS; s++) {
        if (s == STEPS / 2) {
            vka_train_state st = {.step = (uint64_t)s, .seed = 7, .total_steps = STEPS,
                                  .B = c.B, .T = c.T, .lr = 3e-3f, .adamw = opt,
                                  .best_val_loss = NAN};
            st.adamw.beta1 = 0.9f, st.adamw.beta2 = 0.999f, st.adamw.eps = 1e-8f;
            if (vka_gpt_save_state(gpt, &st, path) != VKA_SUCCESS) fail_msg("%s", vka_last_error(ctx));
            vka_gpt_destroy(gpt);
            vka_train_state got;
            if (vka_gpt_load_state(ctx, path, &gpt, &got) != VKA_SUCCESS)
                fail_msg("%s", vka_last_error(ctx));
            assert_int_equal(got.adamw.grad_accum, c.N);
            assert_int_equal(got.B, c.B);
            opt = got.adamw;
            opt.lr = 3e-3f;
        }
        step_batch(&c, s, in, tg);
        assert_int_equal(vka_gpt_train_step(gpt, in, tg, c.B, c.T, &opt, &loss, NULL), VKA_SUCCESS);
        assert_memory_equal(&loss, &l_straight[s], sizeof loss);
    }
    float *resumed = tm_params(gpt);
    assert_memory_equal(straight, resumed, vka_gpt_num_params(gpt) * sizeof(float));
    /* A state whose B x T x grad_accum tokens per step are beyond VKA_TRAIN_MAX_BT. */
    vka_train_state big = {.total_steps = 1, .B = 1 << 12, .T = 16,
                           .adamw = {.beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f,
                                     .grad_accum = 64},
                           .best_val_loss = NAN};
    vka_result r = vka_gpt_save_state(gpt, &big, path);
    tf_expect_error(ctx, r, VKA_ERROR_INVALID_ARGUMENT, "grad_accum = 64", "tokens per step", NULL);
    free(straight);
    free(resumed);
    vka_gpt_destroy(gpt);
    tf_rmdir(&d);
    tu_done(ctx);
}

/* grad_accum 0 and 1 are the plain step, bit for bit; out of range, through _prepare, or N*B
 * rows beyond int are refused by name; a micro-batch may ignore all its targets, but not all
 * N*B rows. */
static void test_grad_accum_errors(void **state) {
    vka_context *ctx = tm_ctx(state);
    const accum_case c = {.B = 2, .N = 2, .T = 13};
    int32_t in[MAX_ROWS * MAX_T], tg[MAX_ROWS * MAX_T];
    step_batch(&c, 0, in, tg);
    float *p[2];
    size_t n = 0;
    for (int k = 0; k < 2; k++) {
        vka_gpt *gpt = tm_model(ctx, CFG, 7);
        n = vka_gpt_num_params(gpt);
        vka_adamw_desc opt = {.lr = 1e-2f, .grad_accum = k};
        float loss;
        assert_int_equal(vka_gpt_train_step(gpt, in, tg, 4, c.T, &opt, &loss, NULL), VKA_SUCCESS);
        p[k] = tm_params(gpt);
        vka_gpt_destroy(gpt);
    }
    assert_memory_equal(p[0], p[1], n * sizeof(float));
    free(p[0]);
    free(p[1]);
    vka_gpt *gpt = tm_model(ctx, CFG, 7);
    float loss;
    vka_adamw_desc opt = {.lr = 1e-2f, .grad_accum = -1};
    vka_result r = vka_gpt_train_step(gpt, in, tg, c.B, c.T, &opt, &loss, NULL);
    tf_expect_error(ctx, r, VKA_ERROR_INVALID_ARGUMENT, "grad_accum = -1", "outside 0..65536", NULL);
    opt.grad_accum = VKA_GPT_MAX_GRAD_ACCUM + 1;
    r = vka_gpt_train_step(gpt, in, tg, c.B, c.T, &opt, &loss, NULL);
    tf_expect_error(ctx, r, VKA_ERROR_INVALID_ARGUMENT, "grad_accum = 65537", NULL);
    opt.grad_accum = 2;
    vka_graph *graph = NULL;
    r = vka_gpt_train_step_prepare(gpt, in, tg, c.B, c.T, &opt, &graph);
    tf_expect_error(ctx, r, VKA_ERROR_INVALID_ARGUMENT, "vka_gpt_train_step_prepare",
                    "grad_accum = 2", NULL);
    assert_null(graph);
    opt.grad_accum = VKA_GPT_MAX_GRAD_ACCUM;
    r = vka_gpt_train_step(gpt, in, tg, 1 << 16, 1, &opt, &loss, NULL);
    tf_expect_error(ctx, r, VKA_ERROR_INVALID_ARGUMENT, "grad_accum = 65536", "B = 65536",
                    "beyond", NULL);
    /* micro-batch 0 all ignored: fine; every row ignored: refused */
    opt.grad_accum = 2;
    for (int i = 0; i < c.B * c.T; i++) tg[i] = -1;
    assert_int_equal(vka_gpt_train_step(gpt, in, tg, c.B, c.T, &opt, &loss, NULL), VKA_SUCCESS);
    assert_true(isfinite(loss));
    for (int i = 0; i < 2 * c.B * c.T; i++) tg[i] = -1;
    r = vka_gpt_train_step(gpt, in, tg, c.B, c.T, &opt, &loss, NULL);
    tf_expect_error(ctx, r, VKA_ERROR_INVALID_ARGUMENT, "every target is -1", NULL);
    in[2 * c.B * c.T - 1] = CFG.V;
    r = vka_gpt_train_step(gpt, in, tg, c.B, c.T, &opt, &loss, NULL);
    tf_expect_error(ctx, r, VKA_ERROR_INVALID_ARGUMENT, "inputs[3][12]", NULL);
    vka_gpt_destroy(gpt);
    tu_done(ctx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TM_BOTH(test_grad_accum_gradients_match_one_big_batch),
        TM_BOTH(test_grad_accum_matches_one_big_batch),
        TM_BOTH(test_grad_accum_16bit_close_to_one_big_batch),
        TM_BOTH(test_grad_accum_fp16_overflow_skips_the_step),
        TM_BOTH(test_grad_accum_resume_is_bit_exact),
        TM_BOTH(test_grad_accum_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
