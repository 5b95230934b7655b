/* Data loading: text checks, 90/10 split, random windows. */
#define _POSIX_C_SOURCE 200809L
#include "test_files.h"

#include <stdint.h>

static vka_data *load_text(vka_context *ctx, const tf_dir *d, const char *text, size_t n) {
    const char *path = tf_path(d, "text.txt");
    tf_write(path, text, n);
    vka_data *data = NULL;
    vka_result r = vka_data_load(ctx, path, NULL, &data);
    if (r != VKA_SUCCESS) fail_msg("data load: %s", vka_last_error(ctx));
    return data;
}

static void test_data_split_is_90_10_and_decodes_back(void **state) {
    vka_context *ctx = tu_cpu();
    tf_dir d = tf_mkdir();
    const char *text = "First Citizen:\nBefore we proceed any further, hear me speak.\n";
    size_t len = strlen(text);
    vka_data *data = load_text(ctx, &d, text, len);
    size_t n_train, n_val;
    const int32_t *train = vka_data_tokens(data, VKA_SPLIT_TRAIN, &n_train);
    const int32_t *val = vka_data_tokens(data, VKA_SPLIT_VAL, &n_val);
    assert_int_equal(n_train, len * 9 / 10); /* nanoGPT: n = int(0.9 * len) */
    assert_int_equal(n_train + n_val, len);
    const vka_tokenizer *tok = vka_data_tokenizer(data);
    for (size_t i = 0; i < len; i++) {
        int32_t id = i < n_train ? train[i] : val[i - n_train];
        assert_int_equal(vka_tokenizer_decode(tok, id, NULL)[0], text[i]);
    }
    vka_data_destroy(data);
    tf_rmdir(&d);
    tu_done(ctx);
}

static void test_data_load_errors(void **state) {
    vka_context *ctx = tu_cpu();
    tf_dir d = tf_mkdir();
    vka_data *data = (vka_data *)1;
    const char *missing = tf_path(&d, "missing.txt");
    vka_result r = vka_data_load(ctx, missing, NULL, &data);
    tf_expect_error(ctx, r, VKA_ERROR_IO, "missing.txt", "No such file", NULL);
    assert_null(data);

    const char *path = tf_path(&d, "bad.txt");
    tf_write(path, "", 0);
    r = vka_data_load(ctx, path, NULL, &data);
    tf_expect_error(ctx, r, VKA_ERROR_FORMAT, "bad.txt is empty", NULL);

    tf_write(path, "some text\0more", 14);
    r = vka_data_load(ctx, path, NULL, &data);
    tf_expect_error(ctx, r, VKA_ERROR_FORMAT, "NUL byte at offset 9", NULL);

    /* 3 control bytes in 100 is past the 2% rule; 2 in 100 is within it. */
    char buf[100];
    memset(buf, 'x', sizeof buf);
    buf[10] = 0x01;
    buf[20] = 0x1B;
    tf_write(path, buf, sizeof buf);
    r = vka_data_load(ctx, path, NULL, &data);
    assert_int_equal(r, VKA_SUCCESS);
    vka_data_destroy(data);
    buf[30] = 0x7F;
    tf_write(path, buf, sizeof buf);
    r = vka_data_load(ctx, path, NULL, &data);
    tf_expect_error(ctx, r, VKA_ERROR_FORMAT, "3 of its 100 bytes are control characters", NULL);

    /* Tabs, newlines and carriage returns are text. */
    memset(buf, '\t', 50);
    memset(buf + 50, '\r', 25);
    memset(buf + 75, '\n', 25);
    tf_write(path, buf, sizeof buf);
    assert_int_equal(vka_data_load(ctx, path, NULL, &data), VKA_SUCCESS);
    vka_data_destroy(data);
    tf_rmdir(&d);
    tu_done(ctx);
}

static void test_data_byte_outside_tokenizer(void **state) {
    vka_context *ctx = tu_cpu();
    tf_dir d = tf_mkdir();
    vka_tokenizer *tok = NULL;
    assert_int_equal(vka_tokenizer_create_from_text(ctx, "abc\n", 4, &tok), VKA_SUCCESS);
    const char *path = tf_path(&d, "text.txt");
    tf_write(path, "abc\ncab\nabd\n", 12);
    vka_data *data = NULL;
    vka_result r = vka_data_load(ctx, path, tok, &data);
    tf_expect_error(ctx, r, VKA_ERROR_VOCABULARY, "text.txt", "'d'", "offset 10", NULL);
    assert_null(data);
    /* In-vocabulary text uses the given tokenizer. */
    tf_write(path, "abc\ncab\n", 8);
    assert_int_equal(vka_data_load(ctx, path, tok, &data), VKA_SUCCESS);
    assert_ptr_equal(vka_data_tokenizer(data), tok);
    vka_data_destroy(data);
    vka_tokenizer_destroy(tok);
    tf_rmdir(&d);
    tu_done(ctx);
}

static void test_data_batch_windows_are_from_the_split(void **state) {
    vka_context *ctx = tu_cpu();
    tf_dir d = tf_mkdir();
    /* 20 distinct bytes: train = 18 tokens, val = 2 */
    const char *text = "ABCDEFGHIJKLMNOPQRST";
    vka_data *data = load_text(ctx, &d, text, 20);
    size_t n_train;
    const int32_t *train = vka_data_tokens(data, VKA_SPLIT_TRAIN, &n_train);
    assert_int_equal(n_train, 18);
    enum { B = 4, T = 5 };
    int32_t in[B * T], tg[B * T];
    uint64_t rng = 42;
    int seen[18] = {0};
    for (int it = 0; it < 500; it++) {
        assert_int_equal(vka_data_batch(data, VKA_SPLIT_TRAIN, B, T, &rng, in, tg), VKA_SUCCESS);
        for (int b = 0; b < B; b++) {
            int start = in[b * T]; /* ids are positions here: distinct sorted bytes */
            assert_true(start >= 0 && start + T < 18);
            seen[start]++;
            for (int t = 0; t < T; t++) {
                assert_int_equal(in[b * T + t], train[start + t]);
                assert_int_equal(tg[b * T + t], train[start + t + 1]);
            }
        }
    }
    /* Every start 0..n-T-1 occurs (the last one too), none past it. */
    for (int s = 0; s < 18; s++) assert_true((seen[s] > 0) == (s <= 18 - T - 1));
    /* The validation split (2 tokens) cannot hold T+1 = 6. */
    vka_result r = vka_data_batch(data, VKA_SPLIT_VAL, B, T, &rng, in, tg);
    tf_expect_error(ctx, r, VKA_ERROR_INVALID_ARGUMENT, "2 tokens", "T+1 = 6", NULL);
    r = vka_data_batch(data, VKA_SPLIT_TRAIN, 0, T, &rng, in, tg);
    tf_expect_error(ctx, r, VKA_ERROR_INVALID_ARGUMENT, "B=0", NULL);
    vka_data_destroy(data);
    tf_rmdir(&d);
    tu_done(ctx);
}

static void test_data_batch_is_reproducible_from_the_rng_state(void **state) {
    vka_context *ctx = tu_cpu();
    vka_data *data = NULL;
    assert_int_equal(vka_data_load(ctx, NULL, NULL, &data), VKA_SUCCESS);
    enum { B = 3, T = 16 };
    int32_t a_in[B * T], a_tg[B * T], b_in[B * T], b_tg[B * T];
    uint64_t rng_a = 7, rng_b = 7;
    assert_int_equal(vka_data_batch(data, VKA_SPLIT_TRAIN, B, T, &rng_a, a_in, a_tg), VKA_SUCCESS);
    assert_true(rng_a != 7); /* the state advanced */
    uint64_t saved = rng_a;
    assert_int_equal(vka_data_batch(data, VKA_SPLIT_TRAIN, B, T, &rng_a, a_in, a_tg), VKA_SUCCESS);
    /* Replaying from the saved state gives the same second batch. */
    rng_b = saved;
    assert_int_equal(vka_data_batch(data, VKA_SPLIT_TRAIN, B, T, &rng_b, b_in, b_tg), VKA_SUCCESS);
    assert_memory_equal(a_in, b_in, sizeof a_in);
    assert_memory_equal(a_tg, b_tg, sizeof a_tg);
    assert_true(rng_a == rng_b);
    /* Another state gives other windows. */
    rng_b = 8;
    assert_int_equal(vka_data_batch(data, VKA_SPLIT_TRAIN, B, T, &rng_b, b_in, b_tg), VKA_SUCCESS);
    assert_true(memcmp(a_in, b_in, sizeof a_in) != 0);
    vka_data_destroy(data);
    tu_done(ctx);
}

static void test_data_tinyshakespeare(void **state) {
    const char *path = tu_shared_data_path("tinyshakespeare.txt");
    vka_context *ctx = tu_cpu();
    vka_data *data = NULL;
    assert_int_equal(vka_data_load(ctx, path, NULL, &data), VKA_SUCCESS);
    size_t n_train, n_val;
    vka_data_tokens(data, VKA_SPLIT_TRAIN, &n_train);
    vka_data_tokens(data, VKA_SPLIT_VAL, &n_val);
    /* nanoGPT's shakespeare_char/prepare.py: 65 characters, 1,003,854 train and 111,540 val */
    assert_int_equal(vka_tokenizer_vocab_size(vka_data_tokenizer(data)), 65);
    assert_int_equal(n_train, 1003854);
    assert_int_equal(n_val, 111540);
    vka_data_destroy(data);
    tu_done(ctx);
}

/* FNV-1a 64, written out here apart from the library's. */
static uint64_t ref_fnv1a(const char *text, size_t n) {
    uint64_t h = 0xCBF29CE484222325ull;
    for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)text[i]) * 0x100000001B3ull;
    return h;
}

/* The identity a training state records: length and FNV-1a of the bytes, whatever tokenizer
 * encoded them; the built-in corpus's is that of the text vka_builtin_corpus generates. */
static void test_data_text_id_is_length_and_fnv1a(void **state) {
    vka_context *ctx = tu_cpu();
    tf_dir d = tf_mkdir();
    uint64_t bytes = 0, hash = 0;
    vka_data *data = load_text(ctx, &d, "foobar", 6);
    assert_int_equal(vka_data_text_id(data, &bytes, &hash), VKA_SUCCESS);
    assert_true(bytes == 6);
    assert_true(hash == 0x85944171F73967E8ull); /* the published FNV-1a 64 test vector */
    vka_data_destroy(data);
    const char *text = "First Citizen:\nBefore we proceed any further, hear me speak.\n";
    data = load_text(ctx, &d, text, strlen(text));
    assert_int_equal(vka_data_text_id(data, &bytes, NULL), VKA_SUCCESS);
    assert_int_equal(vka_data_text_id(data, NULL, &hash), VKA_SUCCESS);
    assert_true(bytes == strlen(text) && hash == ref_fnv1a(text, strlen(text)));
    /* one byte changed, the same length: another hash */
    vka_data *other = load_text(ctx, &d, "First Citizen:\nBefore we proceed any further, hear me "
                                         "speak!\n", strlen(text));
    uint64_t bytes2 = 0, hash2 = 0;
    assert_int_equal(vka_data_text_id(other, &bytes2, &hash2), VKA_SUCCESS);
    assert_true(bytes2 == bytes && hash2 != hash);
    vka_data_destroy(other);
    vka_data_destroy(data);
    size_t len = 0;
    char *corpus = vka_builtin_corpus(0, &len);
    assert_non_null(corpus);
    assert_int_equal(vka_data_load(ctx, NULL, NULL, &data), VKA_SUCCESS);
    assert_int_equal(vka_data_text_id(data, &bytes, &hash), VKA_SUCCESS);
    assert_true(bytes == len && hash == ref_fnv1a(corpus, len));
    free(corpus);
    vka_data_destroy(data);
    assert_int_equal(vka_data_text_id(NULL, &bytes, &hash), VKA_ERROR_INVALID_ARGUMENT);
    tf_rmdir(&d);
    tu_done(ctx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_data_split_is_90_10_and_decodes_back),
        cmocka_unit_test(test_data_load_errors),
        cmocka_unit_test(test_data_byte_outside_tokenizer),
        cmocka_unit_test(test_data_batch_windows_are_from_the_split),
        cmocka_unit_test(test_data_batch_is_reproducible_from_the_rng_state),
        cmocka_unit_test(test_data_tinyshakespeare),
        cmocka_unit_test(test_data_text_id_is_length_and_fnv1a),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
