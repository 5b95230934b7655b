/* llm.c model checkpoints and training-state files: round trips and every malformed-file error. */
#define _POSIX_C_SOURCE 200809L
#include "test_files.h"

#include <stdint.h>

static const vka_gpt_config TINY = {.max_T = 8, .V = 11, .Vp = 16, .L = 2, .NH = 2, .C = 8};

/* Floats of the llm.c layout for cfg (the order documented for vka_gpt_load). */
static size_t llmc_num_params(const vka_gpt_config *c) {
    size_t C = (size_t)c->C, L = (size_t)c->L;
    return (size_t)c->Vp * C + (size_t)c->max_T * C + L * (C + C + 3 * C * C + 3 * C + C * C + C +
                                                         C + C + 4 * C * C + 4 * C + 4 * C * C + C) +
           2 * C;
}

/* A training state in range for TINY (B*T = 12, step <= total_steps). */
static vka_train_state valid_state(uint64_t step) {
    return (vka_train_state){.step = step, .total_steps = 100, .B = 3, .T = 4, .lr = 1e-3f,
                             .min_lr = 1e-4f, .adamw = {0, 0.9f, 0.95f, 1e-8f, 0.1f, 1.0f},
                             .best_val_loss = NAN, .eval_windows = 5, .text_bytes = 1000,
                             .text_hash = 77, .eval_pending = 1};
}

/* The header checksum, as docs/files.md defines it: FNV-1a 32 over the bytes of header words
 * 0..254, stored in word 255 (little-endian). */
static void refresh_checksum(unsigned char *header) {
    uint32_t h = 0x811C9DC5u;
    for (int i = 0; i < 1020; i++) h = (h ^ header[i]) * 0x01000193u;
    memcpy(header + 1020, &h, 4);
}

static vka_gpt *new_model(vka_context *ctx, const vka_gpt_config *cfg, uint64_t seed) {
    vka_gpt *gpt = NULL;
    if (vka_gpt_create(ctx, cfg, seed, &gpt) != VKA_SUCCESS)
        fail_msg("create: %s", vka_last_error(ctx));
    return gpt;
}

static float *params_of(vka_gpt *gpt) {
    size_t n = vka_gpt_num_params(gpt);
    float *p = malloc(n * sizeof *p);
    assert_int_equal(vka_gpt_get_params(gpt, p, n), VKA_SUCCESS);
    return p;
}

static void test_checkpoint_round_trip_is_bit_exact(void **state) {
    vka_context *ctx = tu_cpu();
    tf_dir d = tf_mkdir();
    vka_gpt *gpt = new_model(ctx, &TINY, 5);
    size_t n = vka_gpt_num_params(gpt);
    assert_int_equal(n, llmc_num_params(&TINY));
    const char *path = tf_path(&d, "model.bin");
    assert_int_equal(vka_gpt_save(gpt, path), VKA_SUCCESS);
    assert_int_equal(tf_count(&d, ""), 1); /* no temporary file left */

    /* The file is the llm.c header and the parameters, nothing else. */
    size_t size;
    unsigned char *file = tf_read(path, &size);
    assert_int_equal(size, 1024 + 4 * n);
    int32_t h[8];
    memcpy(h, file, sizeof h);
    const int32_t want_h[8] = {20240326, 3, 8, 11, 2, 2, 8, 16};
    assert_memory_equal(h, want_h, sizeof h);
    float *p = params_of(gpt);
    assert_memory_equal(file + 1024, p, 4 * n);

    /* Loads in a fresh context into the same parameters and the same loss. */
    vka_context *ctx2 = tu_cpu();
    vka_gpt *back = NULL;
    assert_int_equal(vka_gpt_load(ctx2, path, &back), VKA_SUCCESS);
    vka_gpt_config c = vka_gpt_get_config(back);
    assert_memory_equal(&c, &TINY, sizeof c);
    float *q = params_of(back);
    assert_memory_equal(p, q, 4 * n);
    int32_t in[6] = {1, 2, 3, 4, 5, 6}, tg[6] = {2, 3, 4, 5, 6, 7};
    float l1, l2;
    assert_int_equal(vka_gpt_forward(gpt, in, tg, 2, 3, &l1, NULL), VKA_SUCCESS);
    assert_int_equal(vka_gpt_forward(back, in, tg, 2, 3, &l2, NULL), VKA_SUCCESS);
    assert_memory_equal(&l1, &l2, sizeof l1);
    free(file);
    free(p);
    free(q);
    vka_gpt_destroy(back);
    vka_gpt_destroy(gpt);
    tf_rmdir(&d);
    tu_done(ctx2);
    tu_done(ctx);
}

/* A file written here by hand in llm.c's layout loads with each tensor where llm.c puts it:
 * parameter i holds i * 1e-3, and get_params returns them in the same order. */
static void test_checkpoint_loads_hand_written_llmc_file(void **state) {
    vka_context *ctx = tu_cpu();
    tf_dir d = tf_mkdir();
    size_t n = llmc_num_params(&TINY);
    unsigned char *file = calloc(1, 1024 + 4 * n);
    const int32_t h[8] = {20240326, 3, TINY.max_T, TINY.V, TINY.L, TINY.NH, TINY.C, TINY.Vp};
    memcpy(file, h, sizeof h);
    float *p = (float *)(file + 1024);
    for (size_t i = 0; i < n; i++) p[i] = (float)i * 1e-3f;
    const char *path = tf_path(&d, "hand.bin");
    tf_write(path, file, 1024 + 4 * n);
    vka_gpt *gpt = NULL;
    assert_int_equal(vka_gpt_load(ctx, path, &gpt), VKA_SUCCESS);
    float *q = params_of(gpt);
    assert_memory_equal(p, q, 4 * n);
    free(q);
    free(file);
    vka_gpt_destroy(gpt);
    tf_rmdir(&d);
    tu_done(ctx);
}

/* float32 -> bf16 by hand, as docs/files.md states it (independent of vka_convert): round to
 * nearest, ties to even; float32 subnormals flush to signed zero (test values have none). */
static uint16_t ref_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7F800000u) == 0) return (uint16_t)((u >> 16) & 0x8000u);
    return (uint16_t)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}
static float widen_bf16(uint16_t w) {
    uint32_t u = (uint32_t)w << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static void expect_load_error(vka_context *ctx, const char *path, vka_result want,
                              const char *part1, const char *part2) {
    vka_gpt *gpt = (vka_gpt *)1;
    vka_result r = vka_gpt_load(ctx, path, &gpt);
    tf_expect_error(ctx, r, want, part1, part2, NULL);
    assert_null(gpt);
}

/* llm.c's bf16 checkpoint (version 5): vka_gpt_save_dtype writes each parameter rounded to
 * nearest even, 2 bytes; loading widens exactly; the model then computes what a float32 model
 * of those values computes, bit for bit; a file llm.c writes (no trailer) loads too. */
static void test_checkpoint_bf16_version_5(void **state) {
    vka_context *ctx = tu_cpu();
    tf_dir d = tf_mkdir();
    vka_gpt *gpt = new_model(ctx, &TINY, 5);
    size_t n = vka_gpt_num_params(gpt);
    float *p = params_of(gpt);
    const char *path = tf_path(&d, "bf16.bin");
    assert_int_equal(vka_gpt_save_dtype(gpt, path, VKA_BF16), VKA_SUCCESS);
    assert_int_equal(tf_count(&d, ""), 1);
    size_t size;
    unsigned char *file = tf_read(path, &size);
    assert_int_equal(size, 1024 + 2 * n);
    int32_t h[8];
    memcpy(h, file, sizeof h);
    const int32_t want_h[8] = {20240326, 5, 8, 11, 2, 2, 8, 16};
    assert_memory_equal(h, want_h, sizeof h);
    uint32_t mark;
    memcpy(&mark, file + 4 * 252, 4);
    assert_int_equal(mark, 0x58414B56u); /* vkattn's trailer, as in a float32 file */
    float *widened = malloc(n * sizeof *widened);
    size_t rounded = 0;
    for (size_t i = 0; i < n; i++) {
        uint16_t w;
        memcpy(&w, file + 1024 + 2 * i, 2);
        if (w != ref_bf16(p[i])) fail_msg("parameter %zu: %04x, want %04x", i, w, ref_bf16(p[i]));
        widened[i] = widen_bf16(w);
        rounded += widened[i] != p[i];
    }
    assert_true(rounded > n / 2); /* N(0, 0.02) weights: most lose bits */
    /* the model in memory is unchanged */
    float *p_after = params_of(gpt);
    assert_memory_equal(p, p_after, 4 * n);

    vka_gpt *back = NULL;
    assert_int_equal(vka_gpt_load(ctx, path, &back), VKA_SUCCESS);
    float *q = params_of(back);
    assert_memory_equal(q, widened, 4 * n);
    /* the same loss as a float32 model holding the widened values */
    vka_gpt *ref = new_model(ctx, &TINY, 9);
    assert_int_equal(vka_gpt_set_params(ref, widened, n), VKA_SUCCESS);
    int32_t in[6] = {1, 2, 3, 4, 5, 6}, tg[6] = {2, 3, 4, 5, 6, 7};
    float l_back, l_ref, l_orig;
    assert_int_equal(vka_gpt_forward(back, in, tg, 2, 3, &l_back, NULL), VKA_SUCCESS);
    assert_int_equal(vka_gpt_forward(ref, in, tg, 2, 3, &l_ref, NULL), VKA_SUCCESS);
    assert_int_equal(vka_gpt_forward(gpt, in, tg, 2, 3, &l_orig, NULL), VKA_SUCCESS);
    assert_memory_equal(&l_back, &l_ref, sizeof l_back);
    print_message("loss fp32 %.9g, from the bf16 file %.9g\n", l_orig, l_back);
    assert_true(fabsf(l_back - l_orig) < 1e-2f * l_orig);
    /* saving the loaded model in bf16 again gives the same bytes (bf16 values are exact) */
    const char *again = tf_path(&d, "again.bin");
    assert_int_equal(vka_gpt_save_dtype(back, again, VKA_BF16), VKA_SUCCESS);
    size_t size2;
    unsigned char *file2 = tf_read(again, &size2);
    assert_int_equal(size2, size);
    assert_memory_equal(file2, file, size);
    free(file2);
    /* ... and in float32, the widened values */
    assert_int_equal(vka_gpt_save_dtype(back, again, VKA_F32), VKA_SUCCESS);
    file2 = tf_read(again, &size2);
    assert_int_equal(size2, 1024 + 4 * n);
    assert_int_equal(((int32_t *)file2)[1], 3);
    assert_memory_equal(file2 + 1024, widened, 4 * n);
    free(file2);

    /* llm.c's own file: header words 0..7, zeros after, no trailer */
    unsigned char *hand = calloc(1, 1024 + 2 * n);
    memcpy(hand, want_h, sizeof want_h);
    for (size_t i = 0; i < n; i++) {
        uint16_t w = ref_bf16((float)i * 1e-3f - 0.5f);
        memcpy(hand + 1024 + 2 * i, &w, 2);
    }
    const char *llmc = tf_path(&d, "llmc.bin");
    tf_write(llmc, hand, 1024 + 2 * n);
    vka_gpt *from_llmc = NULL;
    assert_int_equal(vka_gpt_load(ctx, llmc, &from_llmc), VKA_SUCCESS);
    float *r = params_of(from_llmc);
    for (size_t i = 0; i < n; i++) {
        uint16_t w;
        memcpy(&w, hand + 1024 + 2 * i, 2);
        if (memcmp(&r[i], &(float){widen_bf16(w)}, 4) != 0) fail_msg("llm.c file: parameter %zu", i);
    }
    free(r);
    vka_gpt_destroy(from_llmc);
    /* damaged bf16 files: truncated, a NaN (0x7FC1) in fcw of layer 1, +Inf in wte */
    tf_write(llmc, hand, 1024 + 2 * n - 2);
    expect_load_error(ctx, llmc, VKA_ERROR_FORMAT, "bf16 values (version 5)", "truncated");
    size_t fcw1 = (size_t)TINY.Vp * 8 + (size_t)TINY.max_T * 8 +
                  2 * (8 + 8 + 3 * 64 + 24 + 64 + 8 + 8 + 8) + 4 * 64 + 3; /* fcw[3] of layer 1 */
    memcpy(hand + 1024 + 2 * fcw1, &(uint16_t){0x7FC1}, 2);
    tf_write(llmc, hand, 1024 + 2 * n);
    expect_load_error(ctx, llmc, VKA_ERROR_FORMAT, "fcw[3] of layer 1 is NaN", NULL);
    memcpy(hand + 1024 + 2 * fcw1, &(uint16_t){0}, 2);
    memcpy(hand + 1024 + 2 * 5, &(uint16_t){0x7F80}, 2);
    tf_write(llmc, hand, 1024 + 2 * n);
    expect_load_error(ctx, llmc, VKA_ERROR_FORMAT, "wte[5] is +Inf", NULL);
    free(hand);

    /* what cannot be saved: fp16 (llm.c has no such file), a dtype outside the enum, a
     * parameter that rounds past bf16's largest value; nothing is written */
    const char *none = tf_path(&d, "none.bin");
    tf_expect_error(ctx, vka_gpt_save_dtype(gpt, none, VKA_F16), VKA_ERROR_INVALID_ARGUMENT,
                    "not f16", "version 5", NULL);
    tf_expect_error(ctx, vka_gpt_save_dtype(gpt, none, (vka_dtype)7), VKA_ERROR_INVALID_ARGUMENT,
                    "dtype 7 is not a vka_dtype", NULL);
    p[(size_t)TINY.Vp * 8 + 2] = 3.4e38f; /* wpe[2]: rounds to +Inf in bf16 */
    assert_int_equal(vka_gpt_set_params(gpt, p, n), VKA_SUCCESS);
    tf_expect_error(ctx, vka_gpt_save_dtype(gpt, none, VKA_BF16), VKA_ERROR_INVALID_ARGUMENT,
                    "wpe[2] is beyond bf16's range", "Inf", NULL);
    assert_int_equal(vka_gpt_save_dtype(gpt, none, VKA_F32), VKA_SUCCESS); /* float32 holds it */
    remove(none);
    assert_int_equal(tf_count(&d, ""), 3); /* bf16.bin, again.bin, llmc.bin */
    free(q);
    free(p_after);
    free(widened);
    free(file);
    free(p);
    vka_gpt_destroy(ref);
    vka_gpt_destroy(back);
    vka_gpt_destroy(gpt);
    tf_rmdir(&d);
    tu_done(ctx);
}

/* Write the saved file with header word i set to value (and its size changed by extra). */
static const char *variant(const tf_dir *d, const unsigned char *file, size_t size, int word,
                           int32_t value, long extra) {
    const char *path = tf_path(d, "bad.bin");
    size_t n = (size_t)((long)size + extra);
    unsigned char *copy = calloc(1, n + 1);
    memcpy(copy, file, n < size ? n : size);
    if (word >= 0) memcpy(copy + 4 * word, &value, 4);
    if (word >= 0 && n >= 1024) refresh_checksum(copy); /* reach the check on that word */
    tf_write(path, copy, n);
    free(copy);
    return path;
}

static void test_checkpoint_malformed_files(void **state) {
    vka_context *ctx = tu_cpu();
    tf_dir d = tf_mkdir();
    vka_gpt *gpt = new_model(ctx, &TINY, 1);
    const char *good = tf_path(&d, "model.bin");
    assert_int_equal(vka_gpt_save(gpt, good), VKA_SUCCESS);
    vka_gpt_destroy(gpt);
    size_t size;
    unsigned char *file = tf_read(good, &size);
    char want[64];

    expect_load_error(ctx, tf_path(&d, "nope.bin"), VKA_ERROR_IO, "nope.bin", "No such file");
    expect_load_error(ctx, d.path, VKA_ERROR_IO, "directory", NULL);
    /* truncated: both sizes in the message */
    snprintf(want, sizeof want, "is %zu bytes", size - 4);
    expect_load_error(ctx, variant(&d, file, size, -1, 0, -4), VKA_ERROR_FORMAT, want, "truncated");
    snprintf(want, sizeof want, "implies %zu bytes", size);
    expect_load_error(ctx, variant(&d, file, size, -1, 0, 8), VKA_ERROR_FORMAT, want, "trailing");
    expect_load_error(ctx, variant(&d, file, size, -1, 0, -(long)size + 100), VKA_ERROR_FORMAT,
                      "is 100 bytes", "shorter than the 1024-byte header");
    expect_load_error(ctx, variant(&d, file, size, -1, 0, -(long)size), VKA_ERROR_FORMAT,
                      "is 0 bytes", NULL);
    expect_load_error(ctx, variant(&d, file, size, 0, 12345, 0), VKA_ERROR_FORMAT,
                      "wrong magic 12345", "expected 20240326");
    expect_load_error(ctx, variant(&d, file, size, 0, 20240328, 0), VKA_ERROR_FORMAT,
                      "magic 20240328", "tokenizer");
    /* version 5 (bf16) takes 2 bytes a parameter: this float32 payload is twice too long */
    expect_load_error(ctx, variant(&d, file, size, 1, 5, 0), VKA_ERROR_FORMAT,
                      "bf16 values (version 5)", "trailing data");
    expect_load_error(ctx, variant(&d, file, size, 1, 4, 0), VKA_ERROR_FORMAT,
                      "version 4 is not supported", "3, float32, or 5, bfloat16");
    /* nonsense sizes: negative, zero, C % NH, V > Vp, absurdly large (no allocation) */
    expect_load_error(ctx, variant(&d, file, size, 4, -3, 0), VKA_ERROR_FORMAT, "L = -3", NULL);
    expect_load_error(ctx, variant(&d, file, size, 6, 0, 0), VKA_ERROR_FORMAT, "C = 0", NULL);
    expect_load_error(ctx, variant(&d, file, size, 5, 3, 0), VKA_ERROR_FORMAT,
                      "C = 8 is not a multiple of NH = 3", NULL);
    expect_load_error(ctx, variant(&d, file, size, 3, 17, 0), VKA_ERROR_FORMAT,
                      "Vp = 16 is smaller than V = 17", NULL);
    expect_load_error(ctx, variant(&d, file, size, 7, 0, 0), VKA_ERROR_FORMAT, "Vp = 0", NULL);
    expect_load_error(ctx, variant(&d, file, size, 6, 1 << 30, 0), VKA_ERROR_FORMAT,
                      "C = 1073741824", "out of range");
    expect_load_error(ctx, variant(&d, file, size, 2, 1 << 19, 0), VKA_ERROR_FORMAT,
                      "implies", "truncated"); /* plausible sizes, but not this file's */
    /* a header of random bytes */
    unsigned char *garbage = malloc(size);
    tu_random((float *)garbage, size / 4, 99, 1e30f);
    const char *path = tf_path(&d, "garbage.bin");
    tf_write(path, garbage, size);
    expect_load_error(ctx, path, VKA_ERROR_FORMAT, "wrong magic", NULL);
    free(garbage);
    free(file);
    tf_rmdir(&d);
    tu_done(ctx);
}

/* A copy of file with float number i after the header set to value, written to d/bad.bin. */
static const char *with_float(const tf_dir *d, const unsigned char *file, size_t size, size_t i,
                              float value) {
    const char *path = tf_path(d, "bad.bin");
    unsigned char *copy = malloc(size);
    memcpy(copy, file, size);
    memcpy(copy + 1024 + 4 * i, &value, 4);
    tf_write(path, copy, size);
    free(copy);
    return path;
}

/* NaN or Inf in a file's parameters is refused at load (it would only give NaN losses and
 * garbage text later), naming the tensor and the element. */
static void test_checkpoint_rejects_non_finite_parameters(void **state) {
    vka_context *ctx = tu_cpu();
    tf_dir d = tf_mkdir();
    vka_gpt *gpt = new_model(ctx, &TINY, 1);
    const char *good = tf_path(&d, "model.bin");
    assert_int_equal(vka_gpt_save(gpt, good), VKA_SUCCESS);
    size_t size;
    unsigned char *file = tf_read(good, &size);
    /* llm.c order: wte (Vp, C) = 128, wpe (maxT, C) = 64, ln1w (L, C) = 16, ln1b 16, then
     * qkvw (L, 3C, C), 192 per layer. */
    size_t qkvw = 128 + 64 + 16 + 16;
    expect_load_error(ctx, with_float(&d, file, size, 5, NAN), VKA_ERROR_FORMAT,
                      "bad.bin: wte[5] is NaN", NULL);
    expect_load_error(ctx, with_float(&d, file, size, qkvw + 192 + 17, INFINITY),
                      VKA_ERROR_FORMAT, "qkvw[17] of layer 1 is +Inf", NULL);
    size_t n = llmc_num_params(&TINY);
    expect_load_error(ctx, with_float(&d, file, size, n - 1, -INFINITY), VKA_ERROR_FORMAT,
                      "lnfb[7] is -Inf", NULL);
    free(file);

    /* A training state: the parameters, AdamW m and v alike (before the checksum is checked,
     * so the message names the value rather than calling the file damaged). */
    vka_train_state st = valid_state(0);
    const char *path = tf_path(&d, "state.bin");
    assert_int_equal(vka_gpt_save_state(gpt, &st, path), VKA_SUCCESS);
    file = tf_read(path, &size);
    vka_gpt *back = (vka_gpt *)1;
    vka_train_state got;
    vka_result r = vka_gpt_load_state(ctx, with_float(&d, file, size, n + 130, -INFINITY),
                                      &back, &got);
    tf_expect_error(ctx, r, VKA_ERROR_FORMAT, "AdamW m: wpe[2] is -Inf", NULL);
    assert_null(back);
    r = vka_gpt_load_state(ctx, with_float(&d, file, size, 0, NAN), &back, &got);
    tf_expect_error(ctx, r, VKA_ERROR_FORMAT, "the parameters: wte[0] is NaN", NULL);
    assert_null(back);
    free(file);
    vka_gpt_destroy(gpt);
    tf_rmdir(&d);
    tu_done(ctx);
}

static void test_checkpoint_save_to_bad_path(void **state) {
    vka_context *ctx = tu_cpu();
    vka_gpt *gpt = new_model(ctx, &TINY, 1);
    vka_result r = vka_gpt_save(gpt, "/nonexistent-dir-vkattn/model.bin");
    tf_expect_error(ctx, r, VKA_ERROR_IO, "/nonexistent-dir-vkattn/model.bin", NULL);
    vka_train_state st = valid_state(0);
    r = vka_gpt_save_state(gpt, &st, "/nonexistent-dir-vkattn/state.bin");
    tf_expect_error(ctx, r, VKA_ERROR_IO, "/nonexistent-dir-vkattn/state.bin", NULL);
    vka_gpt_destroy(gpt);
    tu_done(ctx);
}

static void train_steps(vka_gpt *gpt, int steps) {
    int32_t in[12], tg[12];
    for (int s = 0; s < steps; s++) {
        for (int i = 0; i < 12; i++) {
            in[i] = (i * 7 + s) % 11;
            tg[i] = (i * 5 + 3 * s) % 11;
        }
        vka_adamw_desc opt = {.lr = 1e-2f, .weight_decay = 0.1f, .grad_clip = 1.0f};
        float loss;
        assert_int_equal(vka_gpt_train_step(gpt, in, tg, 3, 4, &opt, &loss, NULL), VKA_SUCCESS);
    }
}

static void test_state_round_trip(void **state) {
    vka_context *ctx = tu_cpu();
    tf_dir d = tf_mkdir();
    vka_gpt *gpt = new_model(ctx, &TINY, 3);
    train_steps(gpt, 3);
    vka_train_state st = {.step = 3, .rng_state = 0x0123456789ABCDEFull, .seed = 3,
                          .total_steps = 1000, .B = 3, .T = 4, .lr = 1e-2f, .min_lr = 1e-3f,
                          .warmup_steps = 10, .eval_every = 50,
                          .adamw = {0, 0.9f, 0.95f, 1e-8f, 0.1f, 1.0f, 3}, .best_val_loss = NAN,
                          .eval_windows = 37, .text_bytes = 0x123456789ull,
                          .text_hash = 0xFEDCBA9876543210ull, .eval_pending = 1};
    const char *path = tf_path(&d, "state.bin");
    assert_int_equal(vka_gpt_save_state(gpt, &st, path), VKA_SUCCESS);
    assert_int_equal(tf_count(&d, ""), 1);

    vka_context *ctx2 = tu_cpu();
    vka_gpt *back = NULL;
    vka_train_state got;
    memset(&got, 0x55, sizeof got);
    assert_int_equal(vka_gpt_load_state(ctx2, path, &back, &got), VKA_SUCCESS);
    assert_int_equal(vka_gpt_step(back), 3);
    assert_true(got.step == st.step && got.rng_state == st.rng_state && got.seed == st.seed &&
                got.total_steps == st.total_steps && got.B == st.B && got.T == st.T &&
                got.lr == st.lr && got.min_lr == st.min_lr &&
                got.warmup_steps == st.warmup_steps && got.eval_every == st.eval_every &&
                got.eval_windows == st.eval_windows);
    /* version 3: the text's identity and the abandoned evaluation */
    assert_true(got.text_bytes == st.text_bytes && got.text_hash == st.text_hash &&
                got.eval_pending == st.eval_pending);
    assert_memory_equal(&got.adamw, &st.adamw, sizeof st.adamw);
    assert_true(isnan(got.best_val_loss));
    /* version 5: where the steps ran, from the saving model's context (st's run_ fields, all
     * 0, are not what is written) */
    vka_device_info dev;
    assert_int_equal(vka_context_selected_device(ctx, &dev), VKA_SUCCESS);
    assert_int_equal(got.run_recorded, 1);
    assert_int_equal(got.run_backend, VKA_BACKEND_CPU);
    assert_string_equal(got.run_kernels, vka_context_cpu_kernels(ctx));
    assert_string_equal(got.run_device, dev.name);
    /* The state alone, without a context or the model, reads the same. */
    vka_train_state peek;
    memset(&peek, 0x55, sizeof peek);
    assert_int_equal(vka_train_state_read(NULL, path, &peek), VKA_SUCCESS);
    assert_true(peek.step == got.step && peek.rng_state == got.rng_state &&
                peek.total_steps == got.total_steps && peek.eval_windows == got.eval_windows &&
                peek.text_hash == got.text_hash && peek.run_recorded == 1 &&
                peek.run_backend == got.run_backend);
    assert_string_equal(peek.run_kernels, got.run_kernels);
    assert_string_equal(peek.run_device, got.run_device);
    size_t n = vka_gpt_num_params(gpt);
    float *p = params_of(gpt), *q = params_of(back);
    assert_memory_equal(p, q, 4 * n);
    /* m and v came back too: one more identical step on both gives identical parameters. */
    train_steps(gpt, 1);
    train_steps(back, 1);
    free(p);
    free(q);
    p = params_of(gpt);
    q = params_of(back);
    assert_memory_equal(p, q, 4 * n);

    /* The wrong kind of file for each loader says what it is. */
    vka_gpt *none = (vka_gpt *)1;
    vka_result r = vka_gpt_load(ctx2, path, &none);
    tf_expect_error(ctx2, r, VKA_ERROR_FORMAT, "training state", "not a model checkpoint", NULL);
    assert_null(strstr(vka_last_error(ctx2), "vka_")); /* CLI users read it too */
    const char *model = tf_path(&d, "model.bin");
    assert_int_equal(vka_gpt_save(gpt, model), VKA_SUCCESS);
    r = vka_gpt_load_state(ctx2, model, &none, &got);
    tf_expect_error(ctx2, r, VKA_ERROR_FORMAT, "model checkpoint", "not a training state", NULL);
    assert_null(strstr(vka_last_error(ctx2), "vka_"));
    assert_null(none);
    free(p);
    free(q);
    vka_gpt_destroy(back);
    vka_gpt_destroy(gpt);
    tf_rmdir(&d);
    tu_done(ctx2);
    tu_done(ctx);
}

/* Recompute a header's checksum (word 255: FNV-1a 32 over words 0..254) after an edit. */
static void fix_header_sum(unsigned char *file) {
    uint32_t sum = 0x811C9DC5u;
    for (size_t i = 0; i < 4 * 255; i++) sum = (sum ^ file[i]) * 0x01000193u;
    memcpy(file + 4 * 255, &sum, 4);
}

static void test_state_damaged_files(void **state) {
    vka_context *ctx = tu_cpu();
    tf_dir d = tf_mkdir();
    vka_gpt *gpt = new_model(ctx, &TINY, 3);
    vka_train_state st = valid_state(0);
    const char *path = tf_path(&d, "state.bin");
    assert_int_equal(vka_gpt_save_state(gpt, &st, path), VKA_SUCCESS);
    vka_gpt_destroy(gpt);
    size_t size;
    unsigned char *file = tf_read(path, &size);
    assert_int_equal(size, 1024 + 3 * 4 * llmc_num_params(&TINY));
    vka_gpt *back = (vka_gpt *)1;
    vka_train_state got;

    /* one flipped bit in AdamW v */
    file[size - 5] ^= 0x10;
    const char *bad = tf_path(&d, "bad.bin");
    tf_write(bad, file, size);
    vka_result r = vka_gpt_load_state(ctx, bad, &back, &got);
    tf_expect_error(ctx, r, VKA_ERROR_FORMAT, "damaged", "checksum", NULL);
    assert_null(back);
    file[size - 5] ^= 0x10;
    tf_write(bad, file, size - 1);
    r = vka_gpt_load_state(ctx, bad, &back, &got);
    tf_expect_error(ctx, r, VKA_ERROR_FORMAT, "truncated", NULL);
    uint32_t v = 8;
    memcpy(file + 4, &v, 4);
    tf_write(bad, file, size);
    r = vka_gpt_load_state(ctx, bad, &back, &got);
    tf_expect_error(ctx, r, VKA_ERROR_FORMAT, "version 8", NULL);
    assert_int_equal(vka_train_state_read(ctx, bad, &got), VKA_ERROR_FORMAT);
    assert_int_equal(vka_train_state_read(NULL, bad, &got), VKA_ERROR_FORMAT);
    assert_int_equal(vka_train_state_read(NULL, tf_path(&d, "nope.bin"), &got), VKA_ERROR_IO);
    /* Version 5's record of the backend: a backend that is none, or a name without its NUL
     * within its words, is a damaged header (the checksum made to match). */
    /* Version 6's loss scaling (words 113..115), inconsistent: off with S = 2^16, on by
     * default in fp32, a count of clean steps past the growth interval; each refused. */
    v = 6;
    memcpy(file + 4, &v, 4);
    const uint32_t s16 = 0x47800000u; /* 65536.0f */
    const uint32_t scaling[3][3] = {{0, s16, 0}, {3, s16, 0}, {1, s16, 5000}};
    for (size_t i = 0; i < 3; i++) {
        uint32_t keep[3];
        memcpy(keep, file + 4 * 113, sizeof keep);
        memcpy(file + 4 * 113, scaling[i], sizeof keep);
        fix_header_sum(file);
        tf_write(bad, file, size);
        r = vka_gpt_load_state(ctx, bad, &back, &got);
        tf_expect_error(ctx, r, VKA_ERROR_FORMAT, "bad training-state header", "loss scaling", NULL);
        memcpy(file + 4 * 113, keep, sizeof keep);
    }
    /* Version 6 (before word 118, grad_accum) still loads: no accumulation. */
    fix_header_sum(file);
    tf_write(bad, file, size);
    assert_int_equal(vka_gpt_load_state(ctx, bad, &back, &got), VKA_SUCCESS);
    assert_int_equal(got.adamw.grad_accum, 1);
    vka_gpt_destroy(back);
    v = 5;
    memcpy(file + 4, &v, 4);
    const size_t words[] = {39, 47, 111};
    for (size_t i = 0; i < 3; i++) {
        uint32_t keep, junk = 0x41414141u;
        memcpy(&keep, file + 4 * words[i], 4);
        memcpy(file + 4 * words[i], &junk, 4);
        fix_header_sum(file);
        tf_write(bad, file, size);
        r = vka_gpt_load_state(ctx, bad, &back, &got);
        tf_expect_error(ctx, r, VKA_ERROR_FORMAT, "bad training-state header", "backend", NULL);
        assert_int_equal(vka_train_state_read(NULL, bad, &got), VKA_ERROR_FORMAT);
        memcpy(file + 4 * words[i], &keep, 4);
    }
    /* Version 4 (before words 39..111: where the steps ran) still loads: not recorded. */
    v = 4;
    memcpy(file + 4, &v, 4);
    memset(file + 39 * 4, 0, (112 - 39) * 4); /* as version 4 wrote them */
    fix_header_sum(file);
    tf_write(bad, file, size);
    assert_int_equal(vka_gpt_load_state(ctx, bad, &back, &got), VKA_SUCCESS);
    assert_true(got.run_recorded == 0 && got.run_kernels[0] == 0 && got.run_device[0] == 0 &&
                got.text_hash == 77);
    vka_gpt_destroy(back);
    /* Version 3 (before the trailer, header words 248..255) still loads: no tokenizer id. */
    v = 3;
    memcpy(file + 4, &v, 4);
    memset(file + 248 * 4, 0, 32);
    tf_write(bad, file, size);
    assert_int_equal(vka_gpt_load_state(ctx, bad, &back, &got), VKA_SUCCESS);
    assert_true(vka_gpt_tokenizer_id(back) == 0 && got.text_hash == 77);
    vka_gpt_destroy(back);
    /* Version 2 (before words 34..38: the text's identity, eval_pending) still loads; whatever
     * those words hold, they read as "not recorded". */
    v = 2;
    memcpy(file + 4, &v, 4);
    tf_write(bad, file, size);
    assert_int_equal(vka_gpt_load_state(ctx, bad, &back, &got), VKA_SUCCESS);
    assert_int_equal(got.eval_windows, 5);
    assert_true(got.text_bytes == 0 && got.text_hash == 0 && got.eval_pending == 0);
    vka_gpt_destroy(back);
    /* Version 1 (before eval_windows, header word 31, existed) still loads: "not recorded". */
    v = 1;
    memcpy(file + 4, &v, 4);
    memset(file + 31 * 4, 0, 4);
    tf_write(bad, file, size);
    assert_int_equal(vka_gpt_load_state(ctx, bad, &back, &got), VKA_SUCCESS);
    assert_int_equal(got.eval_windows, -1);
    assert_true(got.text_bytes == 0 && got.text_hash == 0 && got.eval_pending == 0);
    vka_gpt_destroy(back);
    r = vka_gpt_load_state(ctx, tf_path(&d, "nope.bin"), &back, &got);
    tf_expect_error(ctx, r, VKA_ERROR_IO, "nope.bin", NULL);
    free(file);
    tf_rmdir(&d);
    tu_done(ctx);
}

/* A char tokenizer of TINY's 11 symbols, from text. */
static vka_tokenizer *tiny_tokenizer(vka_context *ctx, const char *symbols) {
    vka_tokenizer *tok = NULL;
    assert_int_equal(vka_tokenizer_create_from_text(ctx, symbols, strlen(symbols), &tok),
                     VKA_SUCCESS);
    assert_int_equal(vka_tokenizer_vocab_size(tok), TINY.V);
    return tok;
}

/* A saved model and state remember their tokenizer's id; another vocabulary of the same size
 * has another id; an id survives saving and loading the tokenizer. */
static void test_checkpoint_records_tokenizer_id(void **state) {
    vka_context *ctx = tu_cpu();
    tf_dir d = tf_mkdir();
    vka_tokenizer *tok = tiny_tokenizer(ctx, "abcdefghij\n"), *other = tiny_tokenizer(ctx, "klmnopqrst\n");
    uint64_t id = vka_tokenizer_id(tok);
    assert_true(id != 0 && id != vka_tokenizer_id(other));
    const char *tpath = tf_path(&d, "tok.bin");
    assert_int_equal(vka_tokenizer_save(tok, tpath), VKA_SUCCESS);
    vka_tokenizer *again = NULL;
    assert_int_equal(vka_tokenizer_load(ctx, tpath, &again), VKA_SUCCESS);
    assert_true(vka_tokenizer_id(again) == id);
    /* ... and is the documented hash of the file's bytes */
    size_t size;
    unsigned char *bytes = tf_read(tpath, &size);
    uint64_t h = 0xCBF29CE484222325ull;
    for (size_t i = 0; i < size; i++) h = (h ^ bytes[i]) * 0x100000001B3ull;
    assert_true(h == id);
    free(bytes);

    vka_gpt *gpt = new_model(ctx, &TINY, 2);
    assert_true(vka_gpt_tokenizer_id(gpt) == 0);
    vka_tokenizer *small = NULL;
    assert_int_equal(vka_tokenizer_create_from_text(ctx, "abc", 3, &small), VKA_SUCCESS);
    tf_expect_error(ctx, vka_gpt_set_tokenizer(gpt, small), VKA_ERROR_INVALID_ARGUMENT,
                    "3 tokens", "V = 11", NULL);
    assert_int_equal(vka_gpt_set_tokenizer(gpt, tok), VKA_SUCCESS);
    assert_true(vka_gpt_tokenizer_id(gpt) == id);
    char model[256], st_path[256];
    snprintf(model, sizeof model, "%s", tf_path(&d, "model.bin"));
    snprintf(st_path, sizeof st_path, "%s", tf_path(&d, "model.state.bin"));
    assert_int_equal(vka_gpt_save(gpt, model), VKA_SUCCESS);
    vka_train_state st = valid_state(0);
    assert_int_equal(vka_gpt_save_state(gpt, &st, st_path), VKA_SUCCESS);
    vka_gpt *back = NULL;
    assert_int_equal(vka_gpt_load(ctx, model, &back), VKA_SUCCESS);
    assert_true(vka_gpt_tokenizer_id(back) == id);
    vka_gpt_destroy(back);
    assert_int_equal(vka_gpt_load_state(ctx, st_path, &back, &st), VKA_SUCCESS);
    assert_true(vka_gpt_tokenizer_id(back) == id);
    /* The model and the state saved together record the same parameter hash (words 250..251). */
    unsigned char *mf = tf_read(model, &size), *sf = tf_read(st_path, &size);
    assert_memory_equal(mf + 248 * 4, sf + 248 * 4, 16);
    free(mf);
    free(sf);
    vka_gpt_destroy(back);
    vka_gpt_destroy(gpt);
    vka_tokenizer_destroy(tok);
    vka_tokenizer_destroy(other);
    vka_tokenizer_destroy(again);
    vka_tokenizer_destroy(small);
    tf_rmdir(&d);
    tu_done(ctx);
}

/* Every bit flip in the header of a file vkattn wrote is refused before the payload is read
 * (each of the 256 words, one bit each, model and state). */
static void test_checkpoint_header_bit_flips_are_refused(void **state) {
    vka_context *ctx = tu_cpu();
    tf_dir d = tf_mkdir();
    vka_gpt *gpt = new_model(ctx, &TINY, 4);
    vka_tokenizer *tok = tiny_tokenizer(ctx, "abcdefghij\n");
    assert_int_equal(vka_gpt_set_tokenizer(gpt, tok), VKA_SUCCESS);
    char saved[2][256]; /* tf_path's buffer is reused */
    snprintf(saved[0], sizeof saved[0], "%s", tf_path(&d, "model.bin"));
    snprintf(saved[1], sizeof saved[1], "%s", tf_path(&d, "model.state.bin"));
    assert_int_equal(vka_gpt_save(gpt, saved[0]), VKA_SUCCESS);
    vka_train_state st = valid_state(100); /* a finished run: step 100 of 100 */
    st.eval_pending = 0;
    assert_int_equal(vka_gpt_save_state(gpt, &st, saved[1]), VKA_SUCCESS);
    const char *bad = tf_path(&d, "bad.bin");
    int refused = 0;
    for (int k = 0; k < 2; k++) {
        size_t size;
        unsigned char *file = tf_read(saved[k], &size);
        for (int w = 0; w < 256; w++) {
            file[4 * w + (w % 4)] ^= (unsigned char)(1u << (w % 8));
            tf_write(bad, file, size);
            file[4 * w + (w % 4)] ^= (unsigned char)(1u << (w % 8));
            vka_gpt *back = NULL;
            vka_train_state got;
            vka_result r = k == 0 ? vka_gpt_load(ctx, bad, &back)
                                  : vka_gpt_load_state(ctx, bad, &back, &got);
            if (r == VKA_SUCCESS) fail_msg("%s: bit flip in header word %d was accepted", saved[k], w);
            assert_true(r == VKA_ERROR_FORMAT);
            assert_null(back);
            refused++;
        }
        free(file);
    }
    assert_int_equal(refused, 512);
    /* The case: total_steps 100 -> 116 (bit 4 of word 16) would train 16 more steps. */
    size_t size;
    unsigned char *file = tf_read(saved[1], &size);
    file[16 * 4] ^= 0x10;
    tf_write(bad, file, size);
    vka_gpt *back = NULL;
    vka_train_state got;
    tf_expect_error(ctx, vka_gpt_load_state(ctx, bad, &back, &got), VKA_ERROR_FORMAT,
                    "bad.bin", "header is damaged", "checksum", NULL);
    free(file);
    vka_tokenizer_destroy(tok);
    vka_gpt_destroy(gpt);
    tf_rmdir(&d);
    tu_done(ctx);
}

/* A state header whose checksum is right but whose fields are out of range (or inconsistent
 * with the model's) is refused, naming the field; so is saving such a state. */
static void test_state_header_fields_range_checked(void **state) {
    vka_context *ctx = tu_cpu();
    tf_dir d = tf_mkdir();
    vka_gpt *gpt = new_model(ctx, &TINY, 4);
    char good[256];
    snprintf(good, sizeof good, "%s", tf_path(&d, "state.bin"));
    vka_train_state st = valid_state(10);
    assert_int_equal(vka_gpt_save_state(gpt, &st, good), VKA_SUCCESS);
    size_t size;
    unsigned char *file = tf_read(good, &size);
    const float nan = NAN;
    int32_t nan_bits;
    memcpy(&nan_bits, &nan, 4);
    const struct {
        int word;
        int32_t value;
        const char *part;
    } cases[] = {
        {19, 9, "T = 9 is outside 1..8"},        /* T > maxT */
        {19, 0, "T = 0"},
        {18, 1000000, "B = 1000000 is outside"}, /* the B = 10^6 */
        {18, 0, "B = 0"},
        {18, -5, "B = -5"},
        {10, 101, "step 101 is past total_steps = 100"},
        {16, 0, "total_steps = 0"},
        {22, 101, "warmup_steps = 101"},
        {22, -1, "warmup_steps = -1"},
        {38, 2, "eval_pending = 2"},
        {23, -1, "eval_every = -1"},
        {20, nan_bits, "lr = nan"},
        {21, 0x3F800000, "min_lr = 1"},          /* above lr */
        {25, 0x3F800000, "beta1 = 1"},
        {27, 0, "eps = 0"},
        {30, (int32_t)0xBF800000, "best_val_loss = -1"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *bad = variant(&d, file, size, cases[i].word, cases[i].value, 0);
        vka_gpt *back = (vka_gpt *)1;
        vka_train_state got;
        vka_result r = vka_gpt_load_state(ctx, bad, &back, &got);
        tf_expect_error(ctx, r, VKA_ERROR_FORMAT, "bad.bin", "bad training-state header",
                        cases[i].part, NULL);
        assert_null(back);
    }
    /* Saving refuses what loading would. */
    st.T = 9;
    tf_expect_error(ctx, vka_gpt_save_state(gpt, &st, good), VKA_ERROR_INVALID_ARGUMENT,
                    "state.bin", "T = 9 is outside 1..8", NULL);
    st = valid_state(101);
    tf_expect_error(ctx, vka_gpt_save_state(gpt, &st, good), VKA_ERROR_INVALID_ARGUMENT,
                    "step 101 is past", NULL);
    free(file);
    vka_gpt_destroy(gpt);
    tf_rmdir(&d);
    tu_done(ctx);
}

/* A file without the trailer (as llm.c writes it) still loads, with no tokenizer id; one whose
 * unused words are not 0 is refused. */
static void test_checkpoint_without_trailer_loads(void **state) {
    vka_context *ctx = tu_cpu();
    tf_dir d = tf_mkdir();
    vka_gpt *gpt = new_model(ctx, &TINY, 6);
    vka_tokenizer *tok = tiny_tokenizer(ctx, "abcdefghij\n");
    assert_int_equal(vka_gpt_set_tokenizer(gpt, tok), VKA_SUCCESS);
    const char *good = tf_path(&d, "model.bin");
    assert_int_equal(vka_gpt_save(gpt, good), VKA_SUCCESS);
    size_t size;
    unsigned char *file = tf_read(good, &size);
    memset(file + 248 * 4, 0, 32);
    const char *bad = tf_path(&d, "llmc.bin");
    tf_write(bad, file, size);
    vka_gpt *back = NULL;
    assert_int_equal(vka_gpt_load(ctx, bad, &back), VKA_SUCCESS);
    assert_true(vka_gpt_tokenizer_id(back) == 0);
    vka_gpt_destroy(back);
    /* the repository's llm.c-made checkpoint */
    assert_int_equal(vka_gpt_load(ctx, VKA_TEST_DATA_DIR "/gpt_tiny.bin", &back), VKA_SUCCESS);
    assert_true(vka_gpt_tokenizer_id(back) == 0);
    vka_gpt_destroy(back);
    file[100 * 4 + 1] = 1;
    tf_write(bad, file, size);
    back = (vka_gpt *)1;
    tf_expect_error(ctx, vka_gpt_load(ctx, bad, &back), VKA_ERROR_FORMAT, "llmc.bin",
                    "unused word 100", "no header checksum", NULL);
    assert_null(back);
    free(file);
    vka_tokenizer_destroy(tok);
    vka_gpt_destroy(gpt);
    tf_rmdir(&d);
    tu_done(ctx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_checkpoint_round_trip_is_bit_exact),
        cmocka_unit_test(test_checkpoint_loads_hand_written_llmc_file),
        cmocka_unit_test(test_checkpoint_malformed_files),
        cmocka_unit_test(test_checkpoint_bf16_version_5),
        cmocka_unit_test(test_checkpoint_rejects_non_finite_parameters),
        cmocka_unit_test(test_checkpoint_save_to_bad_path),
        cmocka_unit_test(test_state_round_trip),
        cmocka_unit_test(test_state_damaged_files),
        cmocka_unit_test(test_checkpoint_records_tokenizer_id),
        cmocka_unit_test(test_checkpoint_header_bit_flips_are_refused),
        cmocka_unit_test(test_state_header_fields_range_checked),
        cmocka_unit_test(test_checkpoint_without_trailer_loads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
