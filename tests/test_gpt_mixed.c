/* Mixed precision (vka_gpt_set_precision(VKA_BF16)): the model's products on bf16 copies of
 * weights and activations, on both backends. Against float32: losses, logits, gradients and
 * 40 training steps stay within bounds that bf16's unit roundoff (2^-8 relative per rounded
 * value) explains, and the model learns as fast. Exactness of the wiring: after
 * vka_gpt_set_params or a training step the next pass uses the new weights' copies (bit for bit
 * a fresh model given those parameters); a saved and resumed state continues bit for bit, in
 * bf16; the KV-cache session agrees with the full forward; errors. T = 37, C = 48 are no
 * multiple of any tile. */
#define _POSIX_C_SOURCE 200809L /* mkdtemp */
#include "gpt_util.h"
#include "test_files.h"

#include <math.h>

static const vka_gpt_config CFG = {.max_T = 40, .V = 67, .L = 2, .NH = 3, .C = 48};
enum { B = 3, T = 37, BT = B * T, STEPS = 40 };

typedef struct run_out {
    float loss0, losses[STEPS];
    float *logits, *grads;
    double eval;
} run_out;

static void batch(int32_t *in, int32_t *tg) {
    tm_tokens(in, BT, CFG.V, 32);
    for (int i = 0; i < BT; i++) tg[i] = (in[i] * 7 + 3) % CFG.V; /* learnable */
}

static void run(vka_context *ctx, vka_dtype precision, run_out *o) {
    vka_gpt *gpt = tm_model(ctx, CFG, 9);
    assert_int_equal(vka_gpt_set_precision(gpt, precision), VKA_SUCCESS);
    assert_int_equal(vka_gpt_get_precision(gpt), precision);
    int32_t in[BT], tg[BT], text[4 * T + 1];
    batch(in, tg);
    tm_tokens(text, 4 * T + 1, CFG.V, 31);
    o->logits = malloc((size_t)BT * CFG.V * sizeof(float));
    if (vka_gpt_forward(gpt, in, tg, B, T, &o->loss0, o->logits) != VKA_SUCCESS)
        fail_msg("forward: %s", vka_last_error(ctx));
    float l;
    assert_int_equal(vka_gpt_forward_backward(gpt, in, tg, B, T, &l), VKA_SUCCESS);
    o->grads = tm_grads(gpt);
    assert_int_equal(vka_gpt_eval(gpt, text, 4 * T + 1, T, &o->eval, NULL), VKA_SUCCESS);
    vka_adamw_desc opt = {.lr = 3e-3f, .grad_clip = 1.0f, .weight_decay = 0.1f};
    for (int s = 0; s < STEPS; s++)
        if (vka_gpt_train_step(gpt, in, tg, B, T, &opt, &o->losses[s], NULL) != VKA_SUCCESS)
            fail_msg("step %d: %s", s, vka_last_error(ctx));
    vka_gpt_destroy(gpt);
}

static double max_diff(const float *a, const float *b, size_t n, double *amax) {
    double d = 0;
    *amax = 0;
    for (size_t i = 0; i < n; i++) {
        d = fmax(d, fabs((double)a[i] - b[i]));
        *amax = fmax(*amax, fabs((double)b[i]));
    }
    return d;
}

/* Bounds of a 16-bit run against float32 (see each test). */
typedef struct close_bounds {
    double logits, loss, grads; /* grads: relative to the largest gradient */
    double curve;
} close_bounds;

/* precision against float32 on one backend: each bound checked, and both runs learn. */
static void close_to_fp32(void **state, vka_dtype precision, close_bounds bd) {
    vka_context *ctx = tm_ctx(state);
    run_out f, h;
    run(ctx, VKA_F32, &f);
    run(ctx, precision, &h);
    size_t n;
    {
        vka_gpt *g = tm_model(ctx, CFG, 9);
        n = vka_gpt_num_params(g);
        vka_gpt_destroy(g);
    }
    double lmax, gmax, dlog = max_diff(h.logits, f.logits, (size_t)BT * CFG.V, &lmax);
    double dg = max_diff(h.grads, f.grads, n, &gmax), dcurve = 0;
    for (int s = 0; s < STEPS; s++) dcurve = fmax(dcurve, fabs(h.losses[s] - f.losses[s]));
    print_message("%s %s: loss %.6f (fp32 %.6f); max |logit diff| %.3g of %.3g; max |grad diff| "
                  "%.3g of %.3g; eval %.6f (%.6f); step %d loss %.4f (%.4f), max curve diff %.3g\n",
                  vka_context_backend(ctx) == VKA_BACKEND_CPU ? "cpu" : "vulkan",
                  vka_dtype_string(precision), h.loss0, f.loss0, dlog, lmax, dg, gmax, h.eval,
                  f.eval, STEPS, h.losses[STEPS - 1], f.losses[STEPS - 1], dcurve);
    assert_true(dlog > 0); /* it did run in 16 bits */
    assert_true(dlog <= bd.logits);
    assert_true(fabs(h.loss0 - f.loss0) <= bd.loss);
    assert_true(fabs(h.eval - f.eval) <= bd.loss);
    assert_true(dg <= bd.grads * gmax);
    assert_true(h.losses[STEPS - 1] < h.losses[0] - 0.5f);
    assert_true(dcurve <= bd.curve);
    free(f.logits), free(f.grads), free(h.logits), free(h.grads);
    tu_done(ctx);
}

/* bf16 against float32 on one backend. Each bf16 rounding moves a value by at most 2^-9 of it;
 * a product of K terms with rounded inputs is off by about sqrt(K) 2^-8 of its typical term
 * (random rounding errors), so logits of order 1 move by a few 1e-3 and the loss (a mean over
 * BT positions) by less. Measured here: logits 2.4e-3 of 0.75, loss and eval 6e-5, gradients
 * 0.4% of their largest, the 40-step curve 3.4e-3. Bounds, about 4x those: 1e-2 for logits,
 * 1e-3 for the loss and eval, gradients within 2% of their largest, the curve within 1e-2
 * while both learn. */
static void test_gpt_bf16_close_to_fp32(void **state) {
    close_to_fp32(state, VKA_BF16, (close_bounds){1e-2, 1e-3, 2e-2, 1e-2});
}

/* The same bf16 model on the CPU backend and on Vulkan: the same roundings of the same values,
 * sums in other orders (1e-3 on logits covers a rare activation rounding the other way; the
 * curves drift apart as float32 training runs on two backends do: 1e-2 over 40 steps). */
static void test_gpt_bf16_cpu_matches_vulkan(void **state) {
    (void)state;
    vka_context *gpu = tm_gpu();
    if (!gpu) return;
    vka_context *cpu = tu_cpu();
    run_out c, v;
    run(cpu, VKA_BF16, &c);
    run(gpu, VKA_BF16, &v);
    double lmax, dlog = max_diff(v.logits, c.logits, (size_t)BT * CFG.V, &lmax), dcurve = 0;
    for (int s = 0; s < STEPS; s++) dcurve = fmax(dcurve, fabs(v.losses[s] - c.losses[s]));
    print_message("bf16 cpu vs vulkan: loss %.7f / %.7f, max |logit diff| %.3g, curve %.3g\n",
                  c.loss0, v.loss0, dlog, dcurve);
    assert_true(dlog <= 1e-3);
    assert_true(fabs(c.loss0 - v.loss0) <= 1e-4);
    assert_true(dcurve <= 1e-2);
    free(c.logits), free(c.grads), free(v.logits), free(v.grads);
    tu_done(cpu);
    tu_done(gpu);
}

/* Loss of a fresh bf16 model holding params. */
static float fresh_loss(vka_context *ctx, const float *params, const int32_t *in,
                        const int32_t *tg) {
    vka_gpt *g = tm_model(ctx, CFG, 1);
    assert_int_equal(vka_gpt_set_precision(g, VKA_BF16), VKA_SUCCESS);
    assert_int_equal(vka_gpt_set_params(g, params, vka_gpt_num_params(g)), VKA_SUCCESS);
    float loss;
    assert_int_equal(vka_gpt_forward(g, in, tg, B, T, &loss, NULL), VKA_SUCCESS);
    vka_gpt_destroy(g);
    return loss;
}

/* The 16-bit copies follow the weights: after vka_gpt_set_params, and after each AdamW step
 * (refreshed inside the step's graph), a pass gives bit for bit what a fresh model given the
 * same parameters gives. */
static void test_gpt_bf16_copies_follow_the_weights(void **state) {
    vka_context *ctx = tm_ctx(state);
    int32_t in[BT], tg[BT];
    batch(in, tg);
    vka_gpt *gpt = tm_model(ctx, CFG, 9), *other = tm_model(ctx, CFG, 10);
    assert_int_equal(vka_gpt_set_precision(gpt, VKA_BF16), VKA_SUCCESS);
    float l0, l1, l2;
    assert_int_equal(vka_gpt_forward(gpt, in, tg, B, T, &l0, NULL), VKA_SUCCESS);
    float *p = tm_params(other);
    assert_int_equal(vka_gpt_set_params(gpt, p, vka_gpt_num_params(gpt)), VKA_SUCCESS);
    assert_int_equal(vka_gpt_forward(gpt, in, tg, B, T, &l1, NULL), VKA_SUCCESS);
    assert_true(l1 != l0);
    assert_true(l1 == fresh_loss(ctx, p, in, tg));
    free(p);
    vka_adamw_desc opt = {.lr = 1e-2f};
    for (int s = 0; s < 3; s++) {
        assert_int_equal(vka_gpt_train_step(gpt, in, tg, B, T, &opt, &l2, NULL), VKA_SUCCESS);
        assert_int_equal(vka_gpt_forward(gpt, in, tg, B, T, &l2, NULL), VKA_SUCCESS);
        p = tm_params(gpt);
        float want = fresh_loss(ctx, p, in, tg);
        if (l2 != want) fail_msg("after step %d: loss %.9g, a fresh model's %.9g", s + 1, l2, want);
        free(p);
    }
    vka_gpt_destroy(gpt);
    vka_gpt_destroy(other);
    tu_done(ctx);
}

/* A state saved in bf16 records it; loaded, the model is in bf16 and continues bit for bit. */
static void test_gpt_bf16_resume_is_exact(void **state) {
    vka_context *ctx = tm_ctx(state);
    tf_dir d = tf_mkdir();
    int32_t in[BT], tg[BT];
    batch(in, tg);
    vka_gpt *gpt = tm_model(ctx, CFG, 9);
    assert_int_equal(vka_gpt_set_precision(gpt, VKA_BF16), VKA_SUCCESS);
    vka_adamw_desc opt = {.lr = 3e-3f, .grad_clip = 1.0f, .weight_decay = 0.1f};
    float a[6], b[3];
    for (int s = 0; s < 3; s++)
        assert_int_equal(vka_gpt_train_step(gpt, in, tg, B, T, &opt, &a[s], NULL), VKA_SUCCESS);
    vka_train_state st = {.step = 3, .seed = 9, .total_steps = 6, .B = B, .T = T, .lr = 3e-3f,
                          .adamw = {3e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 1.0f},
                          .best_val_loss = NAN, .eval_every = 1};
    const char *path = tf_path(&d, "run.state.bin");
    assert_int_equal(vka_gpt_save_state(gpt, &st, path), VKA_SUCCESS);
    for (int s = 3; s < 6; s++)
        assert_int_equal(vka_gpt_train_step(gpt, in, tg, B, T, &opt, &a[s], NULL), VKA_SUCCESS);
    vka_gpt_destroy(gpt);
    vka_train_state got;
    assert_int_equal(vka_gpt_load_state(ctx, path, &gpt, &got), VKA_SUCCESS);
    assert_int_equal(got.run_precision, VKA_BF16);
    assert_int_equal(vka_gpt_get_precision(gpt), VKA_BF16);
    for (int s = 0; s < 3; s++)
        assert_int_equal(vka_gpt_train_step(gpt, in, tg, B, T, &opt, &b[s], NULL), VKA_SUCCESS);
    for (int s = 0; s < 3; s++)
        if (a[3 + s] != b[s]) fail_msg("step %d: %.9g resumed, %.9g uninterrupted", 4 + s, b[s], a[3 + s]);
    vka_gpt_destroy(gpt);
    /* a float32 run's state reads back as float32 */
    gpt = tm_model(ctx, CFG, 9);
    assert_int_equal(vka_gpt_save_state(gpt, &st, path), VKA_SUCCESS);
    vka_gpt_destroy(gpt);
    assert_int_equal(vka_gpt_load_state(ctx, path, &gpt, &got), VKA_SUCCESS);
    assert_int_equal(got.run_precision, VKA_F32);
    assert_int_equal(vka_gpt_get_precision(gpt), VKA_F32);
    vka_gpt_destroy(gpt);
    tf_rmdir(&d);
    tu_done(ctx);
}

/* The KV-cache session in bf16 gives the full forward's last-position logits (up to sums in
 * other orders, which may round an activation the other way: 1e-2), and greedy generation
 * runs. */
static void test_gpt_bf16_session_matches_forward(void **state) {
    vka_context *ctx = tm_ctx(state);
    vka_gpt *gpt = tm_model(ctx, CFG, 9);
    assert_int_equal(vka_gpt_set_precision(gpt, VKA_BF16), VKA_SUCCESS);
    int32_t prompt[T];
    tm_tokens(prompt, T, CFG.V, 5);
    float *full = malloc((size_t)T * CFG.V * sizeof *full), last[67];
    assert_int_equal(vka_gpt_forward(gpt, prompt, NULL, 1, T, NULL, full), VKA_SUCCESS);
    vka_gpt_session *s = NULL;
    vka_gpt_session_desc sd = {.prefill_chunk = 16};
    assert_int_equal(vka_gpt_session_create(gpt, &sd, &s), VKA_SUCCESS);
    assert_int_equal(vka_gpt_session_append(s, prompt, T - 1), VKA_SUCCESS);
    assert_int_equal(vka_gpt_session_append(s, prompt + T - 1, 1), VKA_SUCCESS);
    assert_int_equal(vka_gpt_session_logits(s, last, (size_t)CFG.V), VKA_SUCCESS);
    double amax, d = max_diff(last, full + (size_t)(T - 1) * CFG.V, (size_t)CFG.V, &amax);
    print_message("bf16 session vs forward: max |logit diff| %.3g of %.3g\n", d, amax);
    assert_true(d <= 1e-2);
    /* precision cannot change under a live session */
    assert_int_equal(vka_gpt_set_precision(gpt, VKA_F32), VKA_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(vka_last_error(ctx), "vka_gpt_session"));
    assert_int_equal(vka_gpt_get_precision(gpt), VKA_BF16);
    vka_gpt_session_destroy(s);
    int32_t gen[50];
    vka_sample_desc greedy = {0};
    assert_int_equal(vka_gpt_generate(gpt, prompt, 5, 50, &greedy, gen, NULL, NULL), VKA_SUCCESS);
    for (int i = 0; i < 50; i++) assert_true(gen[i] >= 0 && gen[i] < CFG.V);
    free(full);
    vka_gpt_destroy(gpt);
    tu_done(ctx);
}

/* n training steps of a fresh model (seed 9) in precision with loss scale `scale` (0: the
 * default); losses and gradient norms into loss[n], norm[n]; the parameters returned. */
static float *scaled_run(vka_context *ctx, vka_dtype precision, float scale, int n, float *loss,
                         float *norm) {
    int32_t in[BT], tg[BT];
    batch(in, tg);
    vka_gpt *gpt = tm_model(ctx, CFG, 9);
    assert_int_equal(vka_gpt_set_precision(gpt, precision), VKA_SUCCESS);
    assert_int_equal(vka_gpt_set_loss_scale(gpt, scale), VKA_SUCCESS);
    assert_true(vka_gpt_loss_scale(gpt) == (scale > 0 ? scale : 1.0f));
    /* clipping at 0.5 is active in every step here: the clip scale comes from the unscaled norm */
    vka_adamw_desc opt = {.lr = 3e-3f, .grad_clip = 0.5f, .weight_decay = 0.1f};
    for (int s = 0; s < n; s++)
        if (vka_gpt_train_step(gpt, in, tg, B, T, &opt, &loss[s], &norm[s]) != VKA_SUCCESS)
            fail_msg("step %d: %s", s, vka_last_error(ctx));
    assert_int_equal(vka_gpt_step(gpt), n);
    assert_int_equal(vka_gpt_skipped_steps(gpt), 0);
    float *p = tm_params(gpt);
    vka_gpt_destroy(gpt);
    return p;
}

/* Loss scaling by a power of two changes nothing, bit for bit, absent overflow: the loss's
 * gradient times S, every backward op linear in it (exact scaling), the norm and clip scale
 * computed from the unscaled norm, the gradients unscaled before AdamW: losses, reported
 * gradient norms and parameters after 8 steps equal the unscaled run's, in fp32 and bf16. */
static void test_gpt_loss_scale_is_exact(void **state) {
    vka_context *ctx = tm_ctx(state);
    const vka_dtype types[2] = {VKA_F32, VKA_BF16};
    enum { N = 8 };
    for (int k = 0; k < 2; k++) {
        float l0[N], n0[N], l1[N], n1[N];
        float *p0 = scaled_run(ctx, types[k], -1.0f, N, l0, n0);
        float *p1 = scaled_run(ctx, types[k], 4096.0f, N, l1, n1);
        for (int s = 0; s < N; s++) {
            if (l0[s] != l1[s] || n0[s] != n1[s])
                fail_msg("%s step %d: loss %.9g / %.9g, grad norm %.9g / %.9g (unscaled / x4096)",
                         vka_dtype_string(types[k]), s + 1, l0[s], l1[s], n0[s], n1[s]);
            assert_true(n0[s] > 0.5f); /* clipped */
        }
        size_t n;
        {
            vka_gpt *g = tm_model(ctx, CFG, 9);
            n = vka_gpt_num_params(g);
            vka_gpt_destroy(g);
        }
        for (size_t i = 0; i < n; i++)
            if (memcmp(&p0[i], &p1[i], 4) != 0)
                fail_msg("%s parameter %zu: %.9g unscaled, %.9g scaled", vka_dtype_string(types[k]),
                         i, p0[i], p1[i]);
        free(p0);
        free(p1);
    }
    tu_done(ctx);
}

/* fp16 against float32: fp16's unit roundoff is 2^-11 (8x finer than bf16's), so logits move
 * by a few 1e-4: bounds 2e-3 on logits, 2e-4 on the loss and eval, gradients within 0.5%, the
 * curve within 1e-2; training runs with the default loss scaling (2^16) and skips no step here. */
static void test_gpt_fp16_close_to_fp32(void **state) {
    close_to_fp32(state, VKA_F16, (close_bounds){2e-3, 2e-4, 5e-3, 1e-2});
}

/* fp16 with a loss scale too large (2^24): the loss gradient's fp16 copies overflow, so the
 * first steps are skipped: no parameter changes (bit for bit), vka_gpt_step stays, S halves
 * each time, until the gradients fit; then it trains, and a state saved mid-way resumes bit
 * for bit with its scale and counts. */
static void test_gpt_fp16_overflow_skips_and_halves(void **state) {
    vka_context *ctx = tm_ctx(state);
    tf_dir d = tf_mkdir();
    int32_t in[BT], tg[BT];
    batch(in, tg);
    vka_gpt *gpt = tm_model(ctx, CFG, 9);
    assert_int_equal(vka_gpt_set_precision(gpt, VKA_F16), VKA_SUCCESS);
    assert_true(vka_gpt_loss_scale(gpt) == 65536.0f); /* fp16's default */
    assert_int_equal(vka_gpt_set_loss_scale(gpt, 0x1p24f), VKA_SUCCESS);
    float *p0 = tm_params(gpt), loss, norm;
    size_t n = vka_gpt_num_params(gpt);
    vka_adamw_desc opt = {.lr = 3e-3f, .grad_clip = 1.0f};
    assert_int_equal(vka_gpt_train_step(gpt, in, tg, B, T, &opt, &loss, &norm), VKA_SUCCESS);
    assert_true(isfinite(loss) && !isfinite(norm));
    assert_int_equal(vka_gpt_skipped_steps(gpt), 1);
    assert_int_equal(vka_gpt_step(gpt), 0);
    assert_true(vka_gpt_loss_scale(gpt) == 0x1p23f);
    float *p1 = tm_params(gpt);
    assert_memory_equal(p0, p1, n * sizeof *p0);
    free(p1);
    int steps = 1;
    while (vka_gpt_step(gpt) == 0 && steps < 30) {
        assert_int_equal(vka_gpt_train_step(gpt, in, tg, B, T, &opt, &loss, &norm), VKA_SUCCESS);
        steps++;
    }
    uint64_t skipped = vka_gpt_skipped_steps(gpt);
    float S = vka_gpt_loss_scale(gpt);
    print_message("%s: %llu steps skipped, the scale settled at %g; grad norm %g\n",
                  vka_context_backend(ctx) == VKA_BACKEND_CPU ? "cpu" : "vulkan",
                  (unsigned long long)skipped, (double)S, (double)norm);
    assert_int_equal(vka_gpt_step(gpt), 1);
    assert_true(isfinite(norm));
    assert_int_equal(skipped, (uint64_t)steps - 1);
    assert_true(S == 0x1p24f / (float)(1u << skipped));
    /* save, then three more steps; resumed, the same three */
    vka_train_state st = {.step = 1, .seed = 9, .total_steps = 10, .B = B, .T = T, .lr = 3e-3f,
                          .adamw = {3e-3f, 0.9f, 0.95f, 1e-8f, 0.0f, 1.0f},
                          .best_val_loss = NAN, .eval_every = 1};
    const char *path = tf_path(&d, "f.state.bin");
    assert_int_equal(vka_gpt_save_state(gpt, &st, path), VKA_SUCCESS);
    float a[3], b[3];
    for (int s = 0; s < 3; s++)
        assert_int_equal(vka_gpt_train_step(gpt, in, tg, B, T, &opt, &a[s], NULL), VKA_SUCCESS);
    vka_gpt_destroy(gpt);
    vka_train_state got;
    assert_int_equal(vka_gpt_load_state(ctx, path, &gpt, &got), VKA_SUCCESS);
    assert_true(got.run_precision == VKA_F16 && got.loss_scaling == 1 && got.loss_scale == S &&
                got.skipped_steps == skipped && got.loss_scale_good == 1);
    for (int s = 0; s < 3; s++)
        assert_int_equal(vka_gpt_train_step(gpt, in, tg, B, T, &opt, &b[s], NULL), VKA_SUCCESS);
    assert_memory_equal(a, b, sizeof a);
    vka_gpt_destroy(gpt);
    free(p0);
    tf_rmdir(&d);
    tu_done(ctx);
}

/* GradScaler's growth: after 2000 clean steps in a row the scale doubles (and the count starts
 * again); a state saved one step before keeps the count, so the resumed run doubles at the
 * same step. A one-layer model of 16 channels on 8 positions keeps 2000 steps quick (CPU). */
static void test_gpt_fp16_scale_grows_after_2000_clean_steps(void **state) {
    (void)state;
    vka_context *ctx = tu_cpu();
    tf_dir d = tf_mkdir();
    const vka_gpt_config cfg = {.max_T = 8, .V = 13, .L = 1, .NH = 2, .C = 16};
    enum { b = 1, t = 8, N = 2000 };
    int32_t in[b * t], tg[b * t];
    tm_tokens(in, b * t, cfg.V, 5);
    for (int i = 0; i < b * t; i++) tg[i] = (in[i] + 1) % cfg.V;
    vka_gpt *gpt = tm_model(ctx, cfg, 3);
    assert_int_equal(vka_gpt_set_precision(gpt, VKA_F16), VKA_SUCCESS);
    assert_int_equal(vka_gpt_set_loss_scale(gpt, 1024.0f), VKA_SUCCESS);
    vka_adamw_desc opt = {.lr = 1e-4f, .grad_clip = 1.0f};
    float loss, norm;
    const char *path = tf_path(&d, "g.state.bin");
    for (int s = 1; s <= N - 1; s++) {
        assert_int_equal(vka_gpt_train_step(gpt, in, tg, b, t, &opt, &loss, &norm), VKA_SUCCESS);
        assert_true(isfinite(norm));
    }
    assert_true(vka_gpt_loss_scale(gpt) == 1024.0f); /* 1999 clean steps: not yet */
    vka_train_state st = {.step = N - 1, .seed = 3, .total_steps = N + 1, .B = b, .T = t,
                          .lr = 1e-4f, .adamw = {1e-4f, 0.9f, 0.95f, 1e-8f, 0.0f, 1.0f},
                          .best_val_loss = NAN, .eval_every = 1};
    assert_int_equal(vka_gpt_save_state(gpt, &st, path), VKA_SUCCESS);
    float a[2], c[2];
    assert_int_equal(vka_gpt_train_step(gpt, in, tg, b, t, &opt, &a[0], NULL), VKA_SUCCESS);
    assert_true(vka_gpt_loss_scale(gpt) == 2048.0f); /* the 2000th clean step doubles it */
    assert_int_equal(vka_gpt_train_step(gpt, in, tg, b, t, &opt, &a[1], NULL), VKA_SUCCESS);
    assert_true(vka_gpt_loss_scale(gpt) == 2048.0f);
    assert_int_equal(vka_gpt_skipped_steps(gpt), 0);
    assert_int_equal(vka_gpt_step(gpt), N + 1);
    vka_gpt_destroy(gpt);
    vka_train_state got;
    assert_int_equal(vka_gpt_load_state(ctx, path, &gpt, &got), VKA_SUCCESS);
    assert_true(got.loss_scale == 1024.0f && got.loss_scale_good == N - 1);
    assert_int_equal(vka_gpt_train_step(gpt, in, tg, b, t, &opt, &c[0], NULL), VKA_SUCCESS);
    assert_true(vka_gpt_loss_scale(gpt) == 2048.0f);
    assert_int_equal(vka_gpt_train_step(gpt, in, tg, b, t, &opt, &c[1], NULL), VKA_SUCCESS);
    assert_memory_equal(a, c, sizeof a);
    vka_gpt_destroy(gpt);
    tf_rmdir(&d);
    tu_done(ctx);
}

/* The scale's settings, errors, and its record in a training state. */
static void test_gpt_loss_scale_settings_and_state(void **state) {
    (void)state;
    vka_context *ctx = tu_cpu();
    tf_dir d = tf_mkdir();
    vka_gpt *gpt = tm_model(ctx, CFG, 1);
    assert_true(vka_gpt_loss_scale(gpt) == 1.0f); /* fp32's default: off */
    const float bad[] = {3.0f, 0.5f, 0x1p25f, NAN, INFINITY};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(vka_gpt_set_loss_scale(gpt, bad[i]), VKA_ERROR_INVALID_ARGUMENT);
        assert_non_null(strstr(vka_last_error(ctx), "not a power of two in [1, 2^24]"));
    }
    assert_true(vka_gpt_loss_scale(gpt) == 1.0f);
    assert_int_equal(vka_gpt_set_loss_scale(gpt, 1024.0f), VKA_SUCCESS);
    assert_true(vka_gpt_loss_scale(gpt) == 1024.0f);
    assert_int_equal(vka_gpt_set_loss_scale(NULL, 2.0f), VKA_ERROR_INVALID_ARGUMENT);
    assert_true(vka_gpt_loss_scale(NULL) == 1.0f);
    assert_int_equal(vka_gpt_skipped_steps(NULL), 0);
    int32_t in[BT], tg[BT];
    batch(in, tg);
    vka_adamw_desc opt = {.lr = 1e-3f};
    float loss;
    assert_int_equal(vka_gpt_train_step(gpt, in, tg, B, T, &opt, &loss, NULL), VKA_SUCCESS);
    vka_train_state st = {.step = 1, .seed = 1, .total_steps = 6, .B = B, .T = T, .lr = 1e-3f,
                          .adamw = {1e-3f, 0.9f, 0.95f, 1e-8f, 0.0f, 0.0f},
                          .best_val_loss = NAN, .eval_every = 1};
    const char *path = tf_path(&d, "s.state.bin");
    assert_int_equal(vka_gpt_save_state(gpt, &st, path), VKA_SUCCESS);
    vka_gpt *back = NULL;
    vka_train_state got;
    assert_int_equal(vka_gpt_load_state(ctx, path, &back, &got), VKA_SUCCESS);
    assert_true(got.loss_scaling == 1 && got.loss_scale_default == 0 && got.loss_scale == 1024.0f &&
                got.loss_scale_good == 1 && got.skipped_steps == 0);
    assert_true(vka_gpt_loss_scale(back) == 1024.0f);
    vka_gpt_destroy(back);
    /* back to the default: off in fp32, and so recorded */
    assert_int_equal(vka_gpt_set_loss_scale(gpt, 0.0f), VKA_SUCCESS);
    assert_true(vka_gpt_loss_scale(gpt) == 1.0f);
    assert_int_equal(vka_gpt_save_state(gpt, &st, path), VKA_SUCCESS);
    assert_int_equal(vka_gpt_load_state(ctx, path, &back, &got), VKA_SUCCESS);
    assert_true(got.loss_scaling == 0 && got.loss_scale_default == 1 && got.loss_scale == 1.0f);
    vka_gpt_destroy(back);
    vka_gpt_destroy(gpt);
    tf_rmdir(&d);
    tu_done(ctx);
}

/* Bad values, and the copies' memory: 2 bytes a matrix weight, freed again in float32. */
static void test_gpt_set_precision_errors_and_memory(void **state) {
    (void)state;
    vka_context *ctx = tu_cpu();
    vka_gpt *gpt = tm_model(ctx, CFG, 1);
    assert_int_equal(vka_gpt_set_precision(gpt, (vka_dtype)7), VKA_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(vka_last_error(ctx), "7 is not a vka_dtype"));
    assert_int_equal(vka_gpt_get_precision(gpt), VKA_F32);
    assert_int_equal(vka_gpt_set_precision(NULL, VKA_BF16), VKA_ERROR_INVALID_ARGUMENT);
    assert_int_equal(vka_gpt_get_precision(NULL), VKA_F32);
    int32_t in[BT], tg[BT];
    batch(in, tg);
    float loss;
    assert_int_equal(vka_gpt_forward(gpt, in, tg, B, T, &loss, NULL), VKA_SUCCESS);
    uint64_t m32 = vka_gpt_memory_bytes(gpt);
    assert_int_equal(vka_gpt_set_precision(gpt, VKA_BF16), VKA_SUCCESS);
    assert_int_equal(vka_gpt_forward(gpt, in, tg, B, T, &loss, NULL), VKA_SUCCESS);
    uint64_t m16 = vka_gpt_memory_bytes(gpt);
    /* + the copies of wte (Vp C) and each layer's 12 C^2 matrix weights, 2 bytes each; + the
     * scratch x16 (B T C 16-bit elements); - 2 bytes an element of ln1, ln2, fch, fch_gelu
     * and, with the fused attention (the default), qkv and atty (B T 14C: layer 0's, a forward
     * pass keeps one layer's) and of the logits (B T Vp), stored in 16 bits. Each tensor is
     * aligned in its arena: a few hundred bytes either way. */
    uint64_t C = (uint64_t)CFG.C, Vp = 128, want = (Vp * C + 12 * C * C * CFG.L) * 2;
    uint64_t x16 = (uint64_t)BT * C * 2, halves = (uint64_t)BT * (14 * C + Vp) * 2;
    int64_t off = (int64_t)m16 - (int64_t)(m32 + want + x16 - halves);
    print_message("memory: fp32 %llu bytes, bf16 %llu (copies %llu, x16 %llu, -16-bit ln, qkv, "
                  "atty, fc, gelu and logits %llu: %+lld)\n", (unsigned long long)m32, (unsigned long long)m16,
                  (unsigned long long)want, (unsigned long long)x16, (unsigned long long)halves,
                  (long long)off);
    assert_true(off >= -1024 && off <= 1024);
    assert_int_equal(vka_gpt_set_precision(gpt, VKA_F32), VKA_SUCCESS);
    assert_int_equal(vka_gpt_forward(gpt, in, tg, B, T, &loss, NULL), VKA_SUCCESS);
    assert_int_equal(vka_gpt_memory_bytes(gpt), m32);
    vka_gpt_destroy(gpt);
    tu_done(ctx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TM_BOTH(test_gpt_bf16_close_to_fp32),
        cmocka_unit_test(test_gpt_bf16_cpu_matches_vulkan),
        TM_BOTH(test_gpt_bf16_copies_follow_the_weights),
        TM_BOTH(test_gpt_bf16_resume_is_exact),
        TM_BOTH(test_gpt_bf16_session_matches_forward),
        cmocka_unit_test(test_gpt_set_precision_errors_and_memory),
        TM_BOTH(test_gpt_loss_scale_is_exact),
        TM_BOTH(test_gpt_fp16_close_to_fp32),
        TM_BOTH(test_gpt_fp16_overflow_skips_and_halves),
        cmocka_unit_test(test_gpt_loss_scale_settings_and_state),
        cmocka_unit_test(test_gpt_fp16_scale_grows_after_2000_clean_steps),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
