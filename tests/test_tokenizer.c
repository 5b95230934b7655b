/* Character-level tokenizer: vocabulary, encode/decode, llm.c file format, errors. */
#define _POSIX_C_SOURCE 200809L
#include "test_files.h"

#include <stdint.h>

static vka_tokenizer *from_text(vka_context *ctx, const char *text) {
    vka_tokenizer *tok = NULL;
    vka_result r = vka_tokenizer_create_from_text(ctx, text, strlen(text), &tok);
    if (r != VKA_SUCCESS) fail_msg("create_from_text: %s", vka_last_error(ctx));
    return tok;
}

static void test_tokenizer_vocab_is_sorted_distinct_bytes(void **state) {
    vka_context *ctx = tu_cpu();
    vka_tokenizer *tok = from_text(ctx, "hello world\nhi");
    /* distinct bytes: '\n' ' ' d e h i l o r w */
    const char *want = "\n dehilorw";
    assert_int_equal(vka_tokenizer_vocab_size(tok), (int)strlen(want));
    for (int i = 0; i < (int)strlen(want); i++) {
        size_t len = 0;
        const char *s = vka_tokenizer_decode(tok, i, &len);
        assert_non_null(s);
        assert_int_equal(len, 1);
        assert_int_equal(s[0], want[i]);
    }
    assert_null(vka_tokenizer_decode(tok, -1, NULL));
    assert_null(vka_tokenizer_decode(tok, (int32_t)strlen(want), NULL));
    vka_tokenizer_destroy(tok);
    tu_done(ctx);
}

static void test_tokenizer_encode_decode_round_trip(void **state) {
    vka_context *ctx = tu_cpu();
    const char *text = "To be, or not to be: that is the question.\n";
    vka_tokenizer *tok = from_text(ctx, text);
    size_t n = strlen(text), got = 0;
    int32_t *ids = malloc(n * sizeof *ids);
    assert_int_equal(vka_tokenizer_encode(tok, text, n, ids, &got), VKA_SUCCESS);
    assert_int_equal(got, n);
    for (size_t i = 0; i < n; i++) {
        size_t len;
        const char *s = vka_tokenizer_decode(tok, ids[i], &len);
        assert_int_equal(s[0], text[i]);
        /* ids follow byte order */
        if (i > 0) assert_true((ids[i] < ids[i - 1]) == ((unsigned char)text[i] < (unsigned char)text[i - 1]));
    }
    free(ids);
    vka_tokenizer_destroy(tok);
    tu_done(ctx);
}

static void test_tokenizer_encode_names_unknown_byte(void **state) {
    vka_context *ctx = tu_cpu();
    vka_tokenizer *tok = from_text(ctx, "abc");
    int32_t ids[8];
    size_t n = 99;
    vka_result r = vka_tokenizer_encode(tok, "abcZa", 5, ids, &n);
    tf_expect_error(ctx, r, VKA_ERROR_VOCABULARY, "'Z'", "offset 3", NULL);
    assert_int_equal(n, 0);
    r = vka_tokenizer_encode(tok, "ab\xC3\xA9", 4, ids, &n);
    tf_expect_error(ctx, r, VKA_ERROR_VOCABULARY, "0xC3", "offset 2", NULL);
    vka_tokenizer_destroy(tok);
    tu_done(ctx);
}

static void test_tokenizer_empty_text_is_an_error(void **state) {
    vka_context *ctx = tu_cpu();
    vka_tokenizer *tok = (vka_tokenizer *)1;
    vka_result r = vka_tokenizer_create_from_text(ctx, "", 0, &tok);
    tf_expect_error(ctx, r, VKA_ERROR_INVALID_ARGUMENT, "empty", NULL);
    assert_null(tok);
    tu_done(ctx);
}

static int32_t header_int(const unsigned char *file, int i) {
    int32_t v;
    memcpy(&v, file + 4 * i, 4);
    return v;
}

static void test_tokenizer_save_writes_llmc_format(void **state) {
    vka_context *ctx = tu_cpu();
    tf_dir d = tf_mkdir();
    vka_tokenizer *tok = from_text(ctx, "ba\nab");
    const char *path = tf_path(&d, "tok.bin");
    assert_int_equal(vka_tokenizer_save(tok, path), VKA_SUCCESS);
    size_t n;
    unsigned char *file = tf_read(path, &n);
    assert_int_equal(n, 1024 + 3 * 2);
    assert_int_equal(header_int(file, 0), 20240328);
    assert_int_equal(header_int(file, 1), 2);
    assert_int_equal(header_int(file, 2), 3);
    assert_int_equal(header_int(file, 3), 0); /* '\n' is the smallest byte: id 0 */
    const unsigned char want[] = {1, '\n', 1, 'a', 1, 'b'};
    assert_memory_equal(file + 1024, want, sizeof want);
    assert_int_equal(tf_count(&d, ".tmp"), 0);
    free(file);
    vka_tokenizer_destroy(tok);

    /* No newline: eot is 0; with one later in the order, eot is its id. */
    tok = from_text(ctx, "xyz");
    assert_int_equal(vka_tokenizer_save(tok, path), VKA_SUCCESS);
    file = tf_read(path, &n);
    assert_int_equal(header_int(file, 3), 0);
    free(file);
    vka_tokenizer_destroy(tok);
    tok = from_text(ctx, "\x01\x02\n");
    assert_int_equal(vka_tokenizer_save(tok, path), VKA_SUCCESS);
    file = tf_read(path, &n);
    assert_int_equal(header_int(file, 3), 2);
    free(file);
    vka_tokenizer_destroy(tok);
    tf_rmdir(&d);
    tu_done(ctx);
}

static void test_tokenizer_load_round_trip(void **state) {
    vka_context *ctx = tu_cpu();
    tf_dir d = tf_mkdir();
    const char *text = "The quick brown fox jumps over the lazy dog.\n0123456789!";
    vka_tokenizer *tok = from_text(ctx, text);
    const char *path = tf_path(&d, "tok.bin");
    assert_int_equal(vka_tokenizer_save(tok, path), VKA_SUCCESS);
    vka_tokenizer *back = NULL;
    assert_int_equal(vka_tokenizer_load(ctx, path, &back), VKA_SUCCESS);
    assert_int_equal(vka_tokenizer_vocab_size(back), vka_tokenizer_vocab_size(tok));
    for (int i = 0; i < vka_tokenizer_vocab_size(tok); i++)
        assert_int_equal(vka_tokenizer_decode(back, i, NULL)[0], vka_tokenizer_decode(tok, i, NULL)[0]);
    vka_tokenizer_destroy(back);
    vka_tokenizer_destroy(tok);
    tf_rmdir(&d);
    tu_done(ctx);
}

/* A tokenizer file image: header {magic, version, n, eot}, then the given table. */
static size_t make_file(unsigned char *buf, int32_t magic, int32_t version, int32_t n,
                        int32_t eot, const unsigned char *table, size_t table_len) {
    memset(buf, 0, 1024);
    int32_t h[4] = {magic, version, n, eot};
    memcpy(buf, h, sizeof h);
    memcpy(buf + 1024, table, table_len);
    return 1024 + table_len;
}

static void expect_load_error(vka_context *ctx, const tf_dir *d, const unsigned char *buf,
                              size_t n, vka_result want, const char *part) {
    const char *path = tf_path(d, "bad.bin");
    tf_write(path, buf, n);
    vka_tokenizer *tok = (vka_tokenizer *)1;
    vka_result r = vka_tokenizer_load(ctx, path, &tok);
    tf_expect_error(ctx, r, want, part, NULL);
    assert_null(tok);
}

static void test_tokenizer_load_errors(void **state) {
    vka_context *ctx = tu_cpu();
    tf_dir d = tf_mkdir();
    unsigned char buf[2048];
    const unsigned char ok[] = {1, 'a', 1, 'b', 1, 'c'};
    size_t n = make_file(buf, 20240328, 2, 3, 0, ok, sizeof ok);
    /* The good file loads, so each failure below is the one change made to it. */
    const char *good = tf_path(&d, "good.bin");
    tf_write(good, buf, n);
    vka_tokenizer *tok = NULL;
    assert_int_equal(vka_tokenizer_load(ctx, good, &tok), VKA_SUCCESS);
    assert_int_equal(vka_tokenizer_vocab_size(tok), 3);
    vka_tokenizer_destroy(tok);

    vka_result r = vka_tokenizer_load(ctx, tf_path(&d, "missing.bin"), &tok);
    tf_expect_error(ctx, r, VKA_ERROR_IO, "missing.bin", "No such file", NULL);
    r = vka_tokenizer_load(ctx, d.path, &tok);
    tf_expect_error(ctx, r, VKA_ERROR_IO, "directory", NULL);

    n = make_file(buf, 20240326, 2, 3, 0, ok, sizeof ok);
    expect_load_error(ctx, &d, buf, n, VKA_ERROR_FORMAT, "magic 20240326");
    n = make_file(buf, 20240328, 7, 3, 0, ok, sizeof ok);
    expect_load_error(ctx, &d, buf, n, VKA_ERROR_FORMAT, "version 7");
    n = make_file(buf, 20240328, 2, 0, 0, ok, 0);
    expect_load_error(ctx, &d, buf, n, VKA_ERROR_FORMAT, "0 tokens");
    n = make_file(buf, 20240328, 2, 3, 3, ok, sizeof ok);
    expect_load_error(ctx, &d, buf, n, VKA_ERROR_FORMAT, "end-of-text id 3");
    n = make_file(buf, 20240328, 2, 3, 0, ok, sizeof ok);
    buf[4 * 255] = 9; /* an unused header word: damage, or another format */
    expect_load_error(ctx, &d, buf, n, VKA_ERROR_FORMAT, "unused word 255 is 9");
    n = make_file(buf, 20240328, 2, 3, 0, ok, sizeof ok);
    expect_load_error(ctx, &d, buf, n - 1, VKA_ERROR_FORMAT, "truncated");
    expect_load_error(ctx, &d, buf, 100, VKA_ERROR_FORMAT, "shorter than the 1024-byte");
    buf[n] = 1;
    buf[n + 1] = 'z';
    expect_load_error(ctx, &d, buf, n + 2, VKA_ERROR_FORMAT, "trailing");
    const unsigned char bpe[] = {1, 'a', 3, 'a', 'b', 'c', 1, 'c'};
    n = make_file(buf, 20240328, 2, 3, 0, bpe, sizeof bpe);
    expect_load_error(ctx, &d, buf, n, VKA_ERROR_FORMAT, "each of the 256 bytes");
    const unsigned char dup[] = {1, 'a', 1, 'b', 1, 'a'};
    n = make_file(buf, 20240328, 2, 3, 0, dup, sizeof dup);
    expect_load_error(ctx, &d, buf, n, VKA_ERROR_FORMAT, "both token 0 and token 2");
    tf_rmdir(&d);
    tu_done(ctx);
}

static void test_tokenizer_save_to_bad_path_is_io_error(void **state) {
    vka_context *ctx = tu_cpu();
    vka_tokenizer *tok = from_text(ctx, "abc");
    vka_result r = vka_tokenizer_save(tok, "/nonexistent-dir-vkattn/tok.bin");
    tf_expect_error(ctx, r, VKA_ERROR_IO, "/nonexistent-dir-vkattn/tok.bin", NULL);
    vka_tokenizer_destroy(tok);
    tu_done(ctx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tokenizer_vocab_is_sorted_distinct_bytes),
        cmocka_unit_test(test_tokenizer_encode_decode_round_trip),
        cmocka_unit_test(test_tokenizer_encode_names_unknown_byte),
        cmocka_unit_test(test_tokenizer_empty_text_is_an_error),
        cmocka_unit_test(test_tokenizer_save_writes_llmc_format),
        cmocka_unit_test(test_tokenizer_load_round_trip),
        cmocka_unit_test(test_tokenizer_load_errors),
        cmocka_unit_test(test_tokenizer_save_to_bad_path_is_io_error),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
