/*
 * The GPT-2 model: initial loss, gradients against finite differences, AdamW against a host
 * simulation, overfitting, exact resume, input checks. Model-level cases run on the CPU
 * backend and again on Vulkan (skipped where there is no Vulkan device).
 */
#define _POSIX_C_SOURCE 200809L
#include "test_files.h"
#include "gpt_util.h"

#include <stdint.h>

/* The 16 parameter tensors of llm.c in order: name, elements, whether 2-D (decayed). */
typedef struct span {
    const char *name;
    size_t off, n;
    bool matrix;
} span;

static int layout(const vka_gpt_config *c, span *out) {
    size_t C = (size_t)c->C, L = (size_t)c->L;
    const span spec[16] = {
        {"wte", 0, (size_t)c->Vp * C, true},   {"wpe", 0, (size_t)c->max_T * C, true},
        {"ln1w", 0, L * C, false},             {"ln1b", 0, L * C, false},
        {"qkvw", 0, L * 3 * C * C, true},      {"qkvb", 0, L * 3 * C, false},
        {"attprojw", 0, L * C * C, true},      {"attprojb", 0, L * C, false},
        {"ln2w", 0, L * C, false},             {"ln2b", 0, L * C, false},
        {"fcw", 0, L * 4 * C * C, true},       {"fcb", 0, L * 4 * C, false},
        {"fcprojw", 0, L * 4 * C * C, true},   {"fcprojb", 0, L * C, false},
        {"lnfw", 0, C, false},                 {"lnfb", 0, C, false}};
    size_t off = 0;
    for (int i = 0; i < 16; i++) {
        out[i] = spec[i];
        out[i].off = off;
        off += spec[i].n;
    }
    return 16;
}

/* ---------------------------------------------------------------------------------------------
 * Loss at initialisation
 * ------------------------------------------------------------------------------------------- */

/* With weights N(0, 0.02) the final layernorm output has unit variance per channel, so each
 * logit is about N(0, s^2), s = 0.02 sqrt(C) = 0.16 for C = 64. For small Gaussian logits the
 * expected cross-entropy is ln V + s^2 / 2 (= ln V + 0.013), and the mean over B*T = 256
 * positions varies by far less than 0.05. The band [ln V - 0.05, ln V + 0.1] fails for a model
 * whose outputs are not near uniform at the start (a wrong init scale or a broken layernorm). */
static void test_gpt_initial_loss_is_ln_v(void **state) {
    vka_context *ctx = tm_ctx(state);
    vka_gpt_config cfg = {.max_T = 32, .V = 65, .L = 2, .NH = 4, .C = 64};
    vka_gpt *gpt = tm_model(ctx, cfg, 1337);
    assert_int_equal(vka_gpt_get_config(gpt).Vp, 128);
    enum { B = 8, T = 32 };
    int32_t in[B * T], tg[B * T];
    tm_tokens(in, B * T, 65, 1);
    tm_tokens(tg, B * T, 65, 2);
    float loss = 0;
    assert_int_equal(vka_gpt_forward(gpt, in, tg, B, T, &loss, NULL), VKA_SUCCESS);
    double lnv = log(65.0);
    print_message("initial loss %.4f, ln V = %.4f\n", loss, lnv);
    assert_true(loss > lnv - 0.05 && loss < lnv + 0.1);
    /* Padded wte rows start at zero. */
    float *p = tm_params(gpt);
    for (size_t i = 65 * 64; i < 128 * 64; i++) assert_true(p[i] == 0.0f);
    free(p);
    vka_gpt_destroy(gpt);
    tu_done(ctx);
}

/* The logits copied out are (B, T, V): their host-computed cross-entropy is the model's loss.
 * (Were the padding columns not dropped, rows would be misaligned and this would fail.) */
static void test_gpt_forward_logits_give_the_loss(void **state) {
    vka_context *ctx = tm_ctx(state);
    vka_gpt_config cfg = {.max_T = 9, .V = 13, .L = 1, .NH = 2, .C = 16};
    vka_gpt *gpt = tm_model(ctx, cfg, 7);
    enum { B = 3, T = 7, V = 13 };
    int32_t in[B * T], tg[B * T];
    tm_tokens(in, B * T, V, 3);
    tm_tokens(tg, B * T, V, 4);
    float *logits = malloc(B * T * V * sizeof *logits);
    float loss;
    assert_int_equal(vka_gpt_forward(gpt, in, tg, B, T, &loss, logits), VKA_SUCCESS);
    double sum = 0;
    for (int i = 0; i < B * T; i++) {
        double max = -INFINITY, z = 0;
        for (int j = 0; j < V; j++) max = fmax(max, logits[i * V + j]);
        for (int j = 0; j < V; j++) z += exp(logits[i * V + j] - max);
        sum += log(z) + max - logits[i * V + tg[i]];
    }
    double want = sum / (B * T);
    print_message("loss %.7f, from logits %.7f\n", loss, want);
    assert_true(fabs(loss - want) < 1e-5);
    /* Without targets: the same logits, loss untouched. */
    float *again = malloc(B * T * V * sizeof *again);
    float untouched = -1.0f;
    assert_int_equal(vka_gpt_forward(gpt, in, NULL, B, T, &untouched, again), VKA_SUCCESS);
    assert_true(untouched == -1.0f);
    assert_memory_equal(logits, again, B * T * V * sizeof *again);
    free(again);
    free(logits);
    vka_gpt_destroy(gpt);
    tu_done(ctx);
}

/* Shapes that grow and shrink reuse and regrow the arenas without changing results. */
static void test_gpt_forward_after_shape_changes(void **state) {
    vka_context *ctx = tm_ctx(state);
    vka_gpt_config cfg = {.max_T = 16, .V = 20, .L = 2, .NH = 2, .C = 8};
    vka_gpt *gpt = tm_model(ctx, cfg, 9);
    int32_t in[4 * 16], tg[4 * 16];
    tm_tokens(in, 64, 20, 5);
    tm_tokens(tg, 64, 20, 6);
    float a, b, c, d;
    assert_int_equal(vka_gpt_forward(gpt, in, tg, 1, 5, &a, NULL), VKA_SUCCESS);
    assert_int_equal(vka_gpt_forward_backward(gpt, in, tg, 4, 16, &b), VKA_SUCCESS);
    assert_int_equal(vka_gpt_forward(gpt, in, tg, 1, 5, &c, NULL), VKA_SUCCESS);
    assert_int_equal(vka_gpt_forward(gpt, in, tg, 4, 16, &d, NULL), VKA_SUCCESS);
    assert_memory_equal(&a, &c, sizeof a);
    assert_memory_equal(&b, &d, sizeof b);
    vka_gpt_destroy(gpt);
    tu_done(ctx);
}

/* ---------------------------------------------------------------------------------------------
 * Gradients
 * ------------------------------------------------------------------------------------------- */

static float loss_at(vka_gpt *gpt, const float *p, size_t n, const int32_t *in,
                     const int32_t *tg, int B, int T) {
    assert_int_equal(vka_gpt_set_params(gpt, p, n), VKA_SUCCESS);
    float loss;
    assert_int_equal(vka_gpt_forward(gpt, in, tg, B, T, &loss, NULL), VKA_SUCCESS);
    return loss;
}

/* Whole-model gradient against central differences on a tiny model with large random
 * weights (so every path carries gradient), 4 entries from every tensor plus a padding row of
 * wte (gradient exactly 0). float32 central differences with h = 1e-2 have a rounding error of
 * about 1e-7 / 1e-2 = 1e-5 and a truncation error of h^2 f''' / 6 ~ 1e-5 here; the check is
 * |g - fd| <= 2e-4 + 2e-2 |fd| per entry, and the relative error of the whole sample vector
 * below 1e-2. A wrong sign, a missing term or a transposed matmul is off by O(|g|). */
static void test_gpt_gradients_match_finite_differences(void **state) {
    vka_context *ctx = tu_cpu();
    vka_gpt_config cfg = {.max_T = 6, .V = 11, .Vp = 16, .L = 2, .NH = 2, .C = 8};
    vka_gpt *gpt = tm_model(ctx, cfg, 1);
    size_t n = vka_gpt_num_params(gpt);
    float *p = malloc(n * sizeof *p);
    tu_random(p, n, 77, 0.5f);
    span sp[16];
    layout(&cfg, sp);
    for (int k = 0; k < 16; k++) /* layernorm weights near 1 */
        if (strstr(sp[k].name, "ln") && sp[k].name[strlen(sp[k].name) - 1] == 'w')
            for (size_t i = 0; i < sp[k].n; i++) p[sp[k].off + i] += 1.0f;
    enum { B = 2, T = 5 };
    int32_t in[B * T], tg[B * T];
    tm_tokens(in, B * T, 11, 8);
    tm_tokens(tg, B * T, 11, 9);
    assert_int_equal(vka_gpt_set_params(gpt, p, n), VKA_SUCCESS);
    float loss;
    assert_int_equal(vka_gpt_forward_backward(gpt, in, tg, B, T, &loss), VKA_SUCCESS);
    float *g = tm_grads(gpt);

    const float h = 1e-2f;
    double err2 = 0, ref2 = 0, worst = 0;
    uint64_t rng = 5;
    float *q = malloc(n * sizeof *q);
    memcpy(q, p, n * sizeof *q);
    for (int k = 0; k < 16; k++) {
        for (int j = 0; j < 5; j++) {
            size_t i;
            if (j < 4) {
                rng = rng * 6364136223846793005ull + 1442695040888963407ull;
                /* wte: rows of real tokens; the padding row is checked by j == 4 */
                size_t limit = k == 0 ? (size_t)cfg.V * cfg.C : sp[k].n;
                i = sp[k].off + (size_t)((rng >> 33) % limit);
            } else if (k == 0) {
                i = (size_t)cfg.V * cfg.C + 3; /* padding row */
            } else {
                continue;
            }
            q[i] = p[i] + h;
            float up = loss_at(gpt, q, n, in, tg, B, T);
            q[i] = p[i] - h;
            float down = loss_at(gpt, q, n, in, tg, B, T);
            q[i] = p[i];
            double fd = ((double)up - down) / (2.0 * h);
            double diff = fabs(g[i] - fd);
            err2 += diff * diff;
            ref2 += fd * fd;
            worst = fmax(worst, diff);
            if (diff > 2e-4 + 2e-2 * fabs(fd))
                fail_msg("%s[%zu]: gradient %.6g, finite difference %.6g", sp[k].name,
                         i - sp[k].off, g[i], fd);
            if (j == 4) assert_true(g[i] == 0.0f);
        }
    }
    print_message("loss %.5f; max |g - fd| %.3g, relative error of the sample %.3g\n", loss,
                  worst, sqrt(err2 / ref2));
    assert_true(sqrt(err2 / ref2) < 1e-2);
    free(q);
    free(g);
    free(p);
    vka_gpt_destroy(gpt);
    tu_done(ctx);
}

/* On Vulkan: the same gradients as the CPU reference (same weights and batch). */
static void test_gpt_gradients_match_cpu(void **state) {
    vka_context *gctx = tm_gpu();
    vka_context *cctx = tu_cpu();
    vka_gpt_config cfg = {.max_T = 20, .V = 37, .L = 2, .NH = 4, .C = 32};
    vka_gpt *g_gpt = tm_model(gctx, cfg, 2), *c_gpt = tm_model(cctx, cfg, 2);
    enum { B = 3, T = 17 };
    int32_t in[B * T], tg[B * T];
    tm_tokens(in, B * T, 37, 10);
    tm_tokens(tg, B * T, 37, 11);
    float gl, cl;
    assert_int_equal(vka_gpt_forward_backward(g_gpt, in, tg, B, T, &gl), VKA_SUCCESS);
    assert_int_equal(vka_gpt_forward_backward(c_gpt, in, tg, B, T, &cl), VKA_SUCCESS);
    print_message("loss gpu %.7f cpu %.7f\n", gl, cl);
    assert_true(fabs(gl - cl) < 1e-4);
    float *gg = tm_grads(g_gpt), *cg = tm_grads(c_gpt);
    span sp[16];
    layout(&cfg, sp);
    for (int k = 0; k < 16; k++) {
        double max = 0;
        for (size_t i = 0; i < sp[k].n; i++) max = fmax(max, fabs(cg[sp[k].off + i]));
        tu_assert_close(sp[k].name, gg + sp[k].off, cg + sp[k].off, sp[k].n, 1e-3 * max + 1e-7,
                        1e-2);
    }
    free(gg);
    free(cg);
    vka_gpt_destroy(g_gpt);
    vka_gpt_destroy(c_gpt);
    tu_done(cctx);
    tu_done(gctx);
}

/* ---------------------------------------------------------------------------------------------
 * Training
 * ------------------------------------------------------------------------------------------- */

/* Two AdamW steps with clipping and weight decay, simulated on the host in double from the
 * gradients and norms the model reports: every parameter matches (decay on 2-D weights only,
 * the clip scale min(1, clip / (norm + 1e-6)), bias corrections for t = 1, 2). */
static void test_gpt_train_step_is_adamw(void **state) {
    vka_context *ctx = tm_ctx(state);
    vka_gpt_config cfg = {.max_T = 8, .V = 11, .Vp = 16, .L = 2, .NH = 2, .C = 8};
    vka_gpt *gpt = tm_model(ctx, cfg, 4);
    size_t n = vka_gpt_num_params(gpt);
    span sp[16];
    layout(&cfg, sp);
    enum { B = 2, T = 8 };
    int32_t in[B * T], tg[B * T];
    tm_tokens(in, B * T, 11, 12);
    tm_tokens(tg, B * T, 11, 13);
    const vka_adamw_desc opt = {.lr = 1e-2f, .beta1 = 0.8f, .beta2 = 0.95f, .eps = 1e-6f,
                                .weight_decay = 0.5f, .grad_clip = 0.3f};
    double *m = calloc(n, sizeof *m), *v = calloc(n, sizeof *v);
    float *p = tm_params(gpt);
    for (int t = 1; t <= 2; t++) {
        float loss, norm;
        assert_int_equal(vka_gpt_train_step(gpt, in, tg, B, T, &opt, &loss, &norm), VKA_SUCCESS);
        assert_int_equal(vka_gpt_step(gpt), (uint64_t)t);
        float *g = tm_grads(gpt), *got = tm_params(gpt);
        double norm2 = 0;
        for (size_t i = 0; i < n; i++) norm2 += (double)g[i] * g[i];
        assert_true(fabs(norm - sqrt(norm2)) <= 1e-5 * sqrt(norm2));
        double scale = fmin(1.0, opt.grad_clip / (norm + 1e-6));
        print_message("step %d: loss %.5f, grad norm %.5f, clip scale %.4f\n", t, loss, norm, scale);
        assert_true(scale < 1.0); /* the clip is active, so the test covers it */
        float *want = malloc(n * sizeof *want);
        double bc1 = 1 - pow(opt.beta1, t), bc2 = 1 - pow(opt.beta2, t);
        for (int k = 0; k < 16; k++) {
            double wd = sp[k].matrix ? opt.weight_decay : 0.0;
            for (size_t i = sp[k].off; i < sp[k].off + sp[k].n; i++) {
                double gi = g[i] * scale;
                m[i] = opt.beta1 * m[i] + (1 - opt.beta1) * gi;
                v[i] = opt.beta2 * v[i] + (1 - opt.beta2) * gi * gi;
                want[i] = (float)(p[i] - opt.lr * ((m[i] / bc1) / (sqrt(v[i] / bc2) + opt.eps) +
                                                   wd * p[i]));
            }
        }
        for (int k = 0; k < 16; k++)
            tu_assert_close(sp[k].name, got + sp[k].off, want + sp[k].off, sp[k].n, 2e-6, 1e-4);
        free(p);
        p = got;
        free(g);
        free(want);
    }
    free(p);
    free(m);
    free(v);
    vka_gpt_destroy(gpt);
    tu_done(ctx);
}

/* 30 steps on one batch of random tokens: a model that learns memorises it. */
static void test_gpt_overfits_one_batch(void **state) {
    vka_context *ctx = tm_ctx(state);
    vka_gpt_config cfg = {.max_T = 16, .V = 24, .L = 2, .NH = 4, .C = 32};
    vka_gpt *gpt = tm_model(ctx, cfg, 11);
    enum { B = 4, T = 16 };
    int32_t in[B * T], tg[B * T];
    tm_tokens(in, B * T, 24, 14);
    tm_tokens(tg, B * T, 24, 15);
    vka_adamw_desc opt = {.lr = 1e-2f};
    float first = 0, loss = 0;
    for (int s = 0; s < 30; s++) {
        assert_int_equal(vka_gpt_train_step(gpt, in, tg, B, T, &opt, &loss, NULL), VKA_SUCCESS);
        if (s == 0) first = loss;
    }
    print_message("loss %.4f -> %.4f in 30 steps\n", first, loss);
    assert_true(fabs(first - log(24.0)) < 0.1);
    assert_true(loss < 0.3f * first);
    vka_gpt_destroy(gpt);
    tu_done(ctx);
}

/* A run of 2N steps, and a run of N steps + save_state + load (fresh context) + N steps, give
 * bit-identical losses and parameters (batches from the saved RNG state, lr from a schedule). */
static void train(vka_gpt *gpt, const vka_data *data, uint64_t *rng, int from, int to,
                  float *losses) {
    enum { B = 4, T = 12 };
    int32_t in[B * T], tg[B * T];
    for (int s = from; s < to; s++) {
        assert_int_equal(vka_data_batch(data, VKA_SPLIT_TRAIN, B, T, rng, in, tg), VKA_SUCCESS);
        vka_adamw_desc opt = {.lr = 3e-3f * (float)(s + 1) / 8.0f, .weight_decay = 0.1f,
                              .grad_clip = 1.0f};
        assert_int_equal(vka_gpt_train_step(gpt, in, tg, B, T, &opt, &losses[s], NULL), VKA_SUCCESS);
    }
}

static void test_gpt_resume_is_exact(void **state) {
    vka_context *ctx = tm_ctx(state);
    tf_dir d = tf_mkdir();
    vka_data *data = NULL;
    assert_int_equal(vka_data_load(ctx, NULL, NULL, &data), VKA_SUCCESS);
    int V = vka_tokenizer_vocab_size(vka_data_tokenizer(data));
    vka_gpt_config cfg = {.max_T = 12, .V = V, .L = 2, .NH = 2, .C = 16};
    enum { N = 4 };
    float full[2 * N], split[2 * N];
    vka_gpt *a = tm_model(ctx, cfg, 21);
    uint64_t rng = 99;
    train(a, data, &rng, 0, 2 * N, full);

    vka_gpt *b = tm_model(ctx, cfg, 21);
    rng = 99;
    train(b, data, &rng, 0, N, split);
    vka_train_state st = {.step = N, .rng_state = rng, .seed = 21, .total_steps = 2 * N,
                          .B = 1, .T = 12, .adamw = {.eps = 1e-8f}, .best_val_loss = NAN};
    const char *path = tf_path(&d, "state.bin");
    assert_int_equal(vka_gpt_save_state(b, &st, path), VKA_SUCCESS);
    vka_gpt_destroy(b);
    vka_context *ctx2 = tm_ctx(state);
    vka_train_state got;
    assert_int_equal(vka_gpt_load_state(ctx2, path, &b, &got), VKA_SUCCESS);
    assert_int_equal(vka_gpt_step(b), N);
    rng = got.rng_state;
    train(b, data, &rng, N, 2 * N, split);

    for (int s = 0; s < 2 * N; s++) print_message("step %d: %.7f %.7f\n", s, full[s], split[s]);
    assert_memory_equal(full, split, sizeof full);
    float *pa = tm_params(a), *pb = tm_params(b);
    assert_memory_equal(pa, pb, vka_gpt_num_params(a) * sizeof *pa);
    free(pa);
    free(pb);
    vka_gpt_destroy(a);
    vka_gpt_destroy(b);
    vka_data_destroy(data);
    tf_rmdir(&d);
    tu_done(ctx2);
    tu_done(ctx);
}

/* ---------------------------------------------------------------------------------------------
 * Bad input
 * ------------------------------------------------------------------------------------------- */

static void test_gpt_rejects_bad_config(void **state) {
    vka_context *ctx = tu_cpu();
    vka_gpt *gpt = (vka_gpt *)1;
    vka_gpt_config cfg = {.max_T = 8, .V = 10, .L = 1, .NH = 3, .C = 8};
    tf_expect_error(ctx, vka_gpt_create(ctx, &cfg, 0, &gpt), VKA_ERROR_INVALID_ARGUMENT,
                    "C = 8 is not a multiple of NH = 3", NULL);
    assert_null(gpt);
    cfg.NH = 2;
    cfg.L = 0;
    tf_expect_error(ctx, vka_gpt_create(ctx, &cfg, 0, &gpt), VKA_ERROR_INVALID_ARGUMENT,
                    "L = 0", NULL);
    cfg.L = 1;
    cfg.Vp = 5;
    tf_expect_error(ctx, vka_gpt_create(ctx, &cfg, 0, &gpt), VKA_ERROR_INVALID_ARGUMENT,
                    "Vp = 5 is smaller than V = 10", NULL);
    /* 2^24 x 2^16 embedding: refused before anything is allocated */
    cfg = (vka_gpt_config){.max_T = 8, .V = 1 << 24, .L = 1, .NH = 1, .C = 1 << 16};
    tf_expect_error(ctx, vka_gpt_create(ctx, &cfg, 0, &gpt), VKA_ERROR_DEVICE_LIMIT,
                    "parameters", NULL);
    tu_done(ctx);
}

/* A wte one row past the device's maxStorageBufferRange (what one binding holds) works: the
 * ops split it into blocks of vocabulary rows. Its forward loss matches the CPU backend's.
 * (Vulkan only; skipped where the binding limit is beyond any vocabulary.) */
static void test_gpt_tensor_beyond_binding_limit(void **state) {
    (void)state;
    vka_context *ctx = tu_gpu();
    vka_device_info info;
    assert_int_equal(vka_context_selected_device(ctx, &info), VKA_SUCCESS);
    int C = 1024;
    uint64_t rows = info.max_storage_buffer_range / (4 * (uint64_t)C) + 1;
    if (rows > 40000) {
        print_message("skipping: maxStorageBufferRange %llu is beyond a quick test's vocabulary\n",
                      (unsigned long long)info.max_storage_buffer_range);
        tu_done(ctx);
        skip();
    }
    vka_gpt_config cfg = {.max_T = 8, .V = (int)rows, .Vp = (int)rows, .L = 1, .NH = 8, .C = C};
    vka_context *cpu = tu_cpu();
    vka_gpt *g = tm_model(ctx, cfg, 5), *c = tm_model(cpu, cfg, 5);
    int32_t in[2 * 4], tg[2 * 4];
    tm_tokens(in, 8, (int)rows, 1);
    tm_tokens(tg, 8, (int)rows, 2);
    in[0] = (int)rows - 1; /* the last vocabulary row, in the second block */
    float lg, lc;
    assert_int_equal(vka_gpt_forward(g, in, tg, 2, 4, &lg, NULL), VKA_SUCCESS);
    assert_int_equal(vka_gpt_forward(c, in, tg, 2, 4, &lc, NULL), VKA_SUCCESS);
    print_message("V %llu (wte %.1f MiB): loss vulkan %.6f cpu %.6f\n", (unsigned long long)rows,
                  (double)rows * C * 4 / (1 << 20), lg, lc);
    assert_true(fabsf(lg - lc) < 1e-3f * fabsf(lc));
    vka_gpt_destroy(g);
    vka_gpt_destroy(c);
    tu_done(cpu);
    tu_done(ctx);
}

static void test_gpt_rejects_bad_inputs(void **state) {
    vka_context *ctx = tu_cpu();
    vka_gpt_config cfg = {.max_T = 8, .V = 10, .L = 1, .NH = 2, .C = 8};
    vka_gpt *gpt = tm_model(ctx, cfg, 0);
    int32_t in[2 * 9] = {0}, tg[2 * 9] = {0};
    float loss;
    tf_expect_error(ctx, vka_gpt_forward(gpt, in, tg, 2, 9, &loss, NULL),
                    VKA_ERROR_INVALID_ARGUMENT, "T = 9", "max_T = 8", NULL);
    tf_expect_error(ctx, vka_gpt_forward(gpt, in, tg, 0, 4, &loss, NULL),
                    VKA_ERROR_INVALID_ARGUMENT, "B = 0", NULL);
    in[1 * 4 + 2] = 10;
    tf_expect_error(ctx, vka_gpt_forward(gpt, in, tg, 2, 4, &loss, NULL),
                    VKA_ERROR_INVALID_ARGUMENT, "inputs[1][2] = 10", "V-1 = 9", NULL);
    in[1 * 4 + 2] = 0;
    tg[3] = -2; /* -1 is "ignored" */
    tf_expect_error(ctx, vka_gpt_forward_backward(gpt, in, tg, 2, 4, &loss),
                    VKA_ERROR_INVALID_ARGUMENT, "targets[0][3] = -2", NULL);
    for (int i = 0; i < 8; i++) tg[i] = -1;
    tf_expect_error(ctx, vka_gpt_forward(gpt, in, tg, 2, 4, &loss, NULL),
                    VKA_ERROR_INVALID_ARGUMENT, "every target is -1", NULL);
    memset(tg, 0, sizeof tg);
    tf_expect_error(ctx, vka_gpt_forward_backward(gpt, in, NULL, 2, 4, &loss),
                    VKA_ERROR_INVALID_ARGUMENT, "targets is NULL", NULL);
    vka_adamw_desc opt = {.lr = 1e-3f, .beta1 = 1.5f};
    tf_expect_error(ctx, vka_gpt_train_step(gpt, in, tg, 2, 4, &opt, &loss, NULL),
                    VKA_ERROR_INVALID_ARGUMENT, "beta1 = 1.5", NULL);
    opt = (vka_adamw_desc){.lr = NAN};
    tf_expect_error(ctx, vka_gpt_train_step(gpt, in, tg, 2, 4, &opt, &loss, NULL),
                    VKA_ERROR_INVALID_ARGUMENT, "lr = nan", NULL);
    float g[4];
    tf_expect_error(ctx, vka_gpt_get_grads(gpt, g, vka_gpt_num_params(gpt)),
                    VKA_ERROR_INVALID_ARGUMENT, "no gradients yet", NULL);
    tf_expect_error(ctx, vka_gpt_set_params(gpt, g, 4), VKA_ERROR_INVALID_ARGUMENT,
                    "n = 4", NULL);
    assert_int_equal(vka_gpt_step(gpt), 0); /* nothing failed half-way through a step */
    /* The model still works after the errors. */
    assert_int_equal(vka_gpt_forward(gpt, in, tg, 2, 4, &loss, NULL), VKA_SUCCESS);
    vka_gpt_destroy(gpt);
    tu_done(ctx);
}

/* Targets of -1 count for nothing, and the mean is over the counted ones. Reference: causal
 * attention makes a row's first t0 positions independent of the rest, so a batch whose row 1
 * ignores its last two positions and whose row 2 ignores all of them equals row 0 alone (T = 6)
 * and row 1's first 4 positions alone (T = 4), weighted 6 : 4 -- loss and every gradient. A
 * training step takes the same batch. */
static void test_gpt_ignored_targets_count_for_nothing(void **state) {
    vka_context *ctx = tm_ctx(state);
    vka_gpt_config cfg = {.max_T = 8, .V = 11, .L = 2, .NH = 2, .C = 8};
    vka_gpt *gpt = tm_model(ctx, cfg, 9);
    enum { B = 3, T = 6 };
    int32_t in[B * T], tg[B * T];
    tm_tokens(in, B * T, 11, 3);
    tm_tokens(tg, B * T, 11, 4);
    tg[T + 4] = tg[T + 5] = -1;
    for (int t = 0; t < T; t++) tg[2 * T + t] = -1;
    size_t n = vka_gpt_num_params(gpt);
    float la, lb, loss, fwd;
    assert_int_equal(vka_gpt_forward_backward(gpt, in, tg, 1, T, &la), VKA_SUCCESS);
    float *ga = tm_grads(gpt);
    assert_int_equal(vka_gpt_forward_backward(gpt, in + T, tg + T, 1, 4, &lb), VKA_SUCCESS);
    float *gb = tm_grads(gpt);
    assert_int_equal(vka_gpt_forward_backward(gpt, in, tg, B, T, &loss), VKA_SUCCESS);
    float *g = tm_grads(gpt);
    assert_int_equal(vka_gpt_forward(gpt, in, tg, B, T, &fwd, NULL), VKA_SUCCESS);
    double want = (6.0 * la + 4.0 * lb) / 10.0;
    print_message("loss with ignored targets %.7f, reference %.7f, forward %.7f\n", loss, want,
                  fwd);
    assert_true(isfinite(loss) && fabs(loss - want) <= 1e-5 * fabs(want));
    assert_true(fabs(fwd - want) <= 1e-5 * fabs(want));
    float *gw = malloc(n * sizeof *gw);
    for (size_t i = 0; i < n; i++) gw[i] = (float)((6.0 * ga[i] + 4.0 * gb[i]) / 10.0);
    tu_assert_close("gradients with ignored targets", g, gw, n, 1e-6, 1e-4);
    vka_adamw_desc opt = {.lr = 1e-3f, .grad_clip = 1.0f};
    float step_loss, norm;
    assert_int_equal(vka_gpt_train_step(gpt, in, tg, B, T, &opt, &step_loss, &norm), VKA_SUCCESS);
    assert_true(fabs(step_loss - want) <= 1e-5 * fabs(want) && isfinite(norm));
    free(ga);
    free(gb);
    free(g);
    free(gw);
    vka_gpt_destroy(gpt);
    tu_done(ctx);
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        TM_BOTH(test_gpt_initial_loss_is_ln_v),
        TM_BOTH(test_gpt_forward_logits_give_the_loss),
        TM_BOTH(test_gpt_forward_after_shape_changes),
        cmocka_unit_test(test_gpt_gradients_match_finite_differences),
        cmocka_unit_test(test_gpt_gradients_match_cpu),
        TM_BOTH(test_gpt_train_step_is_adamw),
        TM_BOTH(test_gpt_overfits_one_batch),
        TM_BOTH(test_gpt_resume_is_exact),
        cmocka_unit_test(test_gpt_rejects_bad_config),
        cmocka_unit_test(test_gpt_rejects_bad_inputs),
        TM_BOTH(test_gpt_ignored_targets_count_for_nothing),
    };
    /* A model of its own, C 4096 (a wte past lavapipe's 128 MiB binding limit: pipelines
     * nothing else builds). */
    const struct CMUnitTest exhaustive[] = {
        cmocka_unit_test(test_gpt_tensor_beyond_binding_limit),
    };
    TU_RETURN_GROUPS(argc, argv, tests, exhaustive, NULL, NULL);
}
