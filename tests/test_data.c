/* Data loading: text checks, 90/10 split, random windows. */
#define _POSIX_C_SOURCE 200809L
#include "test_files.h"
#include "text_gen.h"

#include <stdint.h>

#define GPT2_FILE VKA_TEST_DATA_DIR "/gpt2_tokenizer.bin"

/* A split's tokens in a malloc'd array (vka_data_read_tokens). */
static int32_t *split_tokens(const vka_data *data, vka_split split, size_t *n) {
    *n = vka_data_num_tokens(data, split);
    int32_t *ids = malloc((*n + 1) * sizeof *ids);
    assert_non_null(ids);
    assert_int_equal(vka_data_read_tokens(data, split, 0, *n, ids), VKA_SUCCESS);
    return ids;
}

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
    int32_t *train = split_tokens(data, VKA_SPLIT_TRAIN, &n_train);
    int32_t *val = split_tokens(data, VKA_SPLIT_VAL, &n_val);
    assert_int_equal(n_train, len * 9 / 10); /* nanoGPT: n = int(0.9 * len) */
    assert_int_equal(n_train + n_val, len);
    const vka_tokenizer *tok = vka_data_tokenizer(data);
    for (size_t i = 0; i < len; i++) {
        int32_t id = i < n_train ? train[i] : val[i - n_train];
        assert_int_equal(vka_tokenizer_decode(tok, id, NULL)[0], text[i]);
    }
    free(train);
    free(val);
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

    /* Tabs, newlines, carriage returns, vertical tabs and form feeds (GPT-2's \s) are text,
     * loaded and streamed alike: a short text with a page break is not refused. */
    memset(buf, '\t', 50);
    memset(buf + 50, '\r', 25);
    memset(buf + 75, '\n', 25);
    tf_write(path, buf, sizeof buf);
    assert_int_equal(vka_data_load(ctx, path, NULL, &data), VKA_SUCCESS);
    vka_data_destroy(data);
    static const char page[] = "page one\n\f\npage two\v\n";
    tf_write(path, page, sizeof page - 1);
    assert_int_equal(vka_data_load(ctx, path, NULL, &data), VKA_SUCCESS);
    vka_data_destroy(data);
    vka_tokenizer *ptok = NULL;
    assert_int_equal(vka_tokenizer_create_from_text(ctx, page, sizeof page - 1, &ptok),
                     VKA_SUCCESS);
    uint64_t nt = 0, nb = 0;
    r = vka_tokenize_file(ctx, ptok, path, tf_path(&d, "page.bin"), &nt, &nb);
    if (r != VKA_SUCCESS) fail_msg("tokenize %s: %s", path, vka_last_error(ctx));
    assert_true(nb == sizeof page - 1 && nt == sizeof page - 1);
    vka_tokenizer_destroy(ptok);
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
    int32_t *train = split_tokens(data, VKA_SPLIT_TRAIN, &n_train);
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
    free(train);
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
    size_t n_train = vka_data_num_tokens(data, VKA_SPLIT_TRAIN);
    size_t n_val = vka_data_num_tokens(data, VKA_SPLIT_VAL);
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

/* ---------------------------------------------------------------------------------------------
 * llm.c token files, several files, pieces
 * ------------------------------------------------------------------------------------------- */

/* A character tokenizer of 'A'..('A' + V - 1). */
static vka_tokenizer *alphabet(vka_context *ctx, int V) {
    char s[256];
    for (int i = 0; i < V; i++) s[i] = (char)('A' + i);
    vka_tokenizer *tok = NULL;
    assert_int_equal(vka_tokenizer_create_from_text(ctx, s, (size_t)V, &tok), VKA_SUCCESS);
    return tok;
}

/* A token file with header words {magic, version, count} and ids written out by hand. */
static void write_token_file(const char *path, int32_t magic, int32_t version, int32_t count,
                             const uint16_t *ids, size_t n) {
    unsigned char *buf = calloc(1, 1024 + 2 * n);
    int32_t h[3] = {magic, version, count};
    memcpy(buf, h, sizeof h);
    memcpy(buf + 1024, ids, 2 * n);
    tf_write(path, buf, 1024 + 2 * n);
    free(buf);
}

static void test_data_token_file_round_trip(void **state) {
    vka_context *ctx = tu_cpu();
    tf_dir d = tf_mkdir();
    vka_tokenizer *tok = alphabet(ctx, 20);
    int32_t ids[1000];
    for (int i = 0; i < 1000; i++) ids[i] = (i * 7 + i / 13) % 20;
    const char *path = tf_path(&d, "t.bin");
    assert_int_equal(vka_tokens_save(ctx, path, ids, 1000), VKA_SUCCESS);
    /* The layout llm.c writes: header {20240520, 1, n}, then uint16 ids. */
    size_t len = 0;
    unsigned char *raw = tf_read(path, &len);
    assert_int_equal(len, 1024 + 2000);
    int32_t h[3];
    memcpy(h, raw, sizeof h);
    assert_int_equal(h[0], 20240520);
    assert_int_equal(h[1], 1);
    assert_int_equal(h[2], 1000);
    uint16_t id5;
    memcpy(&id5, raw + 1024 + 10, 2);
    assert_int_equal(id5, ids[5]);
    vka_data *data = NULL;
    assert_int_equal(vka_data_load(ctx, path, tok, &data), VKA_SUCCESS);
    size_t n = 0;
    int32_t *all = split_tokens(data, VKA_SPLIT_ALL, &n);
    assert_int_equal(n, 1000);
    assert_memory_equal(all, ids, sizeof ids);
    assert_int_equal(vka_data_num_tokens(data, VKA_SPLIT_TRAIN), 900);
    uint64_t bytes = 0, hash = 0;
    assert_int_equal(vka_data_text_id(data, &bytes, &hash), VKA_SUCCESS);
    assert_true(bytes == len && hash == ref_fnv1a((const char *)raw, len));
    /* Ranges past a split are refused. */
    int32_t one;
    vka_result r = vka_data_read_tokens(data, VKA_SPLIT_VAL, 100, 1, &one);
    tf_expect_error(ctx, r, VKA_ERROR_INVALID_ARGUMENT, "past the split's 100", NULL);
    free(all);
    free(raw);
    vka_data_destroy(data);
    vka_tokenizer_destroy(tok);
    tf_rmdir(&d);
    tu_done(ctx);
}

/* Each damaged or foreign token file is refused with a message naming it and the problem, and
 * an id 65536 or more is not written at all. */
static void test_data_token_file_errors(void **state) {
    vka_context *ctx = tu_cpu();
    tf_dir d = tf_mkdir();
    vka_tokenizer *tok = alphabet(ctx, 20);
    uint16_t ids[64];
    for (int i = 0; i < 64; i++) ids[i] = (uint16_t)(i % 20);
    const char *path = tf_path(&d, "bad.bin");
    vka_data *data = NULL;
    write_token_file(path, 20240520, 1, 64, ids, 63); /* one id short */
    vka_result r = vka_data_load(ctx, path, tok, &data);
    tf_expect_error(ctx, r, VKA_ERROR_FORMAT, "bad.bin", "64 tokens", "truncated", NULL);
    assert_null(data);
    write_token_file(path, 20240520, 1, 10, ids, 64); /* bytes after the count */
    r = vka_data_load(ctx, path, tok, &data);
    tf_expect_error(ctx, r, VKA_ERROR_FORMAT, "bad.bin", "10 tokens", NULL);
    tf_write(path, "\x88\xd8\x34\x01\x01\0\0\0", 8); /* the magic, then the file ends */
    r = vka_data_load(ctx, path, tok, &data);
    tf_expect_error(ctx, r, VKA_ERROR_FORMAT, "bad.bin", "shorter than its 1024-byte header", NULL);
    write_token_file(path, 20240520, 2, 64, ids, 64);
    r = vka_data_load(ctx, path, tok, &data);
    tf_expect_error(ctx, r, VKA_ERROR_FORMAT, "bad.bin", "version 2", NULL);
    write_token_file(path, 20240520, 1, 0, ids, 0);
    r = vka_data_load(ctx, path, tok, &data);
    tf_expect_error(ctx, r, VKA_ERROR_FORMAT, "bad.bin holds no tokens", NULL);
    /* a nonzero unused header word (damage, or another format) */
    write_token_file(path, 20240520, 1, 64, ids, 64);
    size_t flen;
    unsigned char *fbytes = tf_read(path, &flen);
    fbytes[4 * 200] = 7;
    tf_write(path, fbytes, flen);
    free(fbytes);
    r = vka_data_load(ctx, path, tok, &data);
    tf_expect_error(ctx, r, VKA_ERROR_FORMAT, "bad.bin", "unused word 200 is 7", NULL);
    /* Another magic: not a token file, and binary, so not text either. */
    write_token_file(path, 20240521, 1, 64, ids, 64);
    r = vka_data_load(ctx, path, tok, &data);
    tf_expect_error(ctx, r, VKA_ERROR_FORMAT, "bad.bin is not a text file", "NUL byte", NULL);
    ids[37] = 20; /* = V */
    write_token_file(path, 20240520, 1, 64, ids, 64);
    r = vka_data_load(ctx, path, tok, &data);
    tf_expect_error(ctx, r, VKA_ERROR_VOCABULARY, "bad.bin", "token 37", "byte offset 1098",
                    "id 20", "20 tokens", NULL);
    r = vka_data_load(ctx, path, NULL, &data);
    tf_expect_error(ctx, r, VKA_ERROR_INVALID_ARGUMENT, "bad.bin is a token file",
                    "give the tokenizer", NULL);
    const char *out = tf_path(&d, "out.bin");
    int32_t big[3] = {1, 65536, 2};
    r = vka_tokens_save(ctx, out, big, 3);
    tf_expect_error(ctx, r, VKA_ERROR_INVALID_ARGUMENT, "token 1 is id 65536", NULL);
    assert_false(access(out, F_OK) == 0);
    assert_int_equal(tf_count(&d, "out.bin"), 0);
    vka_tokenizer_destroy(tok);
    tf_rmdir(&d);
    tu_done(ctx);
}

/* Several files are one concatenation: 90/10 over all of them, or (validation files given) the
 * files as the splits; windows that span two files read both; text and token files mix. */
static void test_data_shards(void **state) {
    vka_context *ctx = tu_cpu();
    tf_dir d = tf_mkdir();
    vka_tokenizer *tok = alphabet(ctx, 26);
    enum { N1 = 37, N2 = 50, N3 = 13 };
    int32_t all[N1 + N2 + N3];
    for (int i = 0; i < N1 + N2 + N3; i++) all[i] = (i * 5 + 3) % 26;
    char text[N2 + 1];
    for (int i = 0; i < N2; i++) text[i] = (char)('A' + all[N1 + i]);
    text[N2] = '\0';
    char p1[192], p2[192], p3[192];
    snprintf(p1, sizeof p1, "%s", tf_path(&d, "a.bin"));
    snprintf(p2, sizeof p2, "%s", tf_path(&d, "b.txt"));
    snprintf(p3, sizeof p3, "%s", tf_path(&d, "c.bin"));
    assert_int_equal(vka_tokens_save(ctx, p1, all, N1), VKA_SUCCESS);
    tf_write(p2, text, N2);
    assert_int_equal(vka_tokens_save(ctx, p3, all + N1 + N2, N3), VKA_SUCCESS);
    const char *paths[3] = {p1, p2, p3};
    vka_data *data = NULL;
    vka_data_desc desc = {.paths = paths, .n_paths = 3, .tok = tok};
    assert_int_equal(vka_data_open(ctx, &desc, &data), VKA_SUCCESS);
    size_t n = 0;
    int32_t *got = split_tokens(data, VKA_SPLIT_ALL, &n);
    assert_int_equal(n, N1 + N2 + N3);
    assert_memory_equal(got, all, sizeof all);
    free(got);
    assert_int_equal(vka_data_num_tokens(data, VKA_SPLIT_TRAIN), (N1 + N2 + N3) * 9 / 10);
    /* Every batch window equals the concatenation at its start (ids are not positions here:
     * find the start by matching, with windows long enough to be unique). */
    enum { B = 6, T = 30 };
    int32_t in[B * T], tg[B * T];
    uint64_t rng = 3;
    size_t n_train = vka_data_num_tokens(data, VKA_SPLIT_TRAIN);
    int spanning = 0;
    for (int it = 0; it < 50; it++) {
        assert_int_equal(vka_data_batch(data, VKA_SPLIT_TRAIN, B, T, &rng, in, tg), VKA_SUCCESS);
        for (int b = 0; b < B; b++) {
            size_t s = 0;
            while (s + T < n_train && memcmp(all + s, in + b * T, T * sizeof *in) != 0) s++;
            assert_true(s + T < n_train);
            assert_memory_equal(all + s + 1, tg + b * T, T * sizeof *tg);
            spanning += s < N1 && s + T + 1 > N1;
        }
    }
    assert_true(spanning > 0);
    vka_data_destroy(data);
    /* Validation files: the paths are training, val_paths validation. */
    const char *val[1] = {p3};
    desc = (vka_data_desc){.paths = paths, .n_paths = 2, .val_paths = val, .n_val_paths = 1,
                           .tok = tok};
    assert_int_equal(vka_data_open(ctx, &desc, &data), VKA_SUCCESS);
    assert_int_equal(vka_data_num_tokens(data, VKA_SPLIT_TRAIN), N1 + N2);
    int32_t *v = split_tokens(data, VKA_SPLIT_VAL, &n);
    assert_int_equal(n, N3);
    assert_memory_equal(v, all + N1 + N2, N3 * sizeof *v);
    free(v);
    vka_data_destroy(data);
    vka_tokenizer_destroy(tok);
    tf_rmdir(&d);
    tu_done(ctx);
}

/* A text of several pieces (3 MiB, pieces of 1 MiB) gives the tokens of the whole, loaded or
 * streamed into a token file (which then gives the same batches as the text). */
static void test_data_text_in_pieces_equals_the_whole(void **state) {
    vka_context *ctx = tu_cpu();
    tf_dir d = tf_mkdir();
    size_t len = 0;
    char *text = vka_builtin_corpus(3u << 20, &len);
    assert_non_null(text);
    const char *path = tf_path(&d, "big.txt");
    tf_write(path, text, len);
    vka_tokenizer *tok = NULL;
    assert_int_equal(vka_tokenizer_create_from_text(ctx, text, len, &tok), VKA_SUCCESS);
    int32_t *whole = malloc(len * sizeof *whole);
    size_t n_whole = 0;
    assert_int_equal(vka_tokenizer_encode(tok, text, len, whole, &n_whole), VKA_SUCCESS);
    vka_data *data = NULL;
    assert_int_equal(vka_data_load(ctx, path, tok, &data), VKA_SUCCESS);
    size_t n = 0;
    int32_t *got = split_tokens(data, VKA_SPLIT_ALL, &n);
    assert_int_equal(n, n_whole);
    assert_memory_equal(got, whole, n * sizeof *got);
    free(got);
    const char *tokens = tf_path(&d, "big.bin");
    uint64_t nt = 0, nb = 0;
    assert_int_equal(vka_tokenize_file(ctx, tok, path, tokens, &nt, &nb), VKA_SUCCESS);
    assert_true(nt == n_whole && nb == len);
    vka_data *tdata = NULL;
    assert_int_equal(vka_data_load(ctx, tokens, tok, &tdata), VKA_SUCCESS);
    got = split_tokens(tdata, VKA_SPLIT_ALL, &n);
    assert_int_equal(n, n_whole);
    assert_memory_equal(got, whole, n * sizeof *got);
    free(got);
    enum { B = 4, T = 64 };
    int32_t a_in[B * T], a_tg[B * T], b_in[B * T], b_tg[B * T];
    uint64_t ra = 99, rb = 99;
    for (int it = 0; it < 10; it++) {
        assert_int_equal(vka_data_batch(data, VKA_SPLIT_TRAIN, B, T, &ra, a_in, a_tg), VKA_SUCCESS);
        assert_int_equal(vka_data_batch(tdata, VKA_SPLIT_TRAIN, B, T, &rb, b_in, b_tg), VKA_SUCCESS);
        assert_memory_equal(a_in, b_in, sizeof a_in);
        assert_memory_equal(a_tg, b_tg, sizeof a_tg);
    }
    /* Streaming errors leave nothing behind. */
    const char *bad = tf_path(&d, "bad.txt");
    text[(2u << 20) + 5] = '\0';
    tf_write(bad, text, len);
    vka_result r = vka_tokenize_file(ctx, tok, bad, tf_path(&d, "bad.bin"), &nt, &nb);
    char want[64];
    snprintf(want, sizeof want, "NUL byte at offset %u", (2u << 20) + 5);
    tf_expect_error(ctx, r, VKA_ERROR_FORMAT, "bad.txt", want, NULL);
    tf_write(bad, "", 0);
    r = vka_tokenize_file(ctx, tok, bad, tf_path(&d, "bad.bin"), &nt, &nb);
    tf_expect_error(ctx, r, VKA_ERROR_FORMAT, "bad.txt is empty", NULL);
    tf_write(bad, "ok then ~", 9); /* "~" is not in the corpus */
    r = vka_tokenize_file(ctx, tok, bad, tf_path(&d, "bad.bin"), &nt, &nb);
    tf_expect_error(ctx, r, VKA_ERROR_VOCABULARY, "bad.txt", "'~' at offset 8", NULL);
    assert_int_equal(tf_count(&d, "bad.bin"), 0);
    free(text);
    free(whole);
    vka_data_destroy(data);
    vka_data_destroy(tdata);
    vka_tokenizer_destroy(tok);
    tf_rmdir(&d);
    tu_done(ctx);
}

/* A text of more than one 1 MiB piece whose lines end in whitespace before a blank line: a cut
 * after "\n\n" would make " \n\n" one piece (GPT-2's ids 220 628 for 220 198 198). Loaded and
 * streamed it gives the ids of the whole. */
static void test_data_bpe_text_over_a_piece_equals_the_whole(void **state) {
    vka_context *ctx = tu_cpu();
    tf_dir d = tf_mkdir();
    vka_tokenizer *tok = NULL;
    if (vka_tokenizer_load(ctx, GPT2_FILE, &tok) != VKA_SUCCESS)
        fail_msg("load %s: %s", GPT2_FILE, vka_last_error(ctx));
    static const char line[] = "Before we proceed any further, hear me speak. \n\n";
    size_t len = (sizeof line - 1) * ((5u << 18) / (sizeof line - 1) + 1);
    char *text = malloc(len);
    int32_t *whole = malloc(len * sizeof *whole);
    assert_true(text && whole);
    for (size_t at = 0; at < len; at += sizeof line - 1) memcpy(text + at, line, sizeof line - 1);
    const char *path = tf_path(&d, "text.txt"), *tokens = tf_path(&d, "text.bin");
    tf_write(path, text, len);
    size_t n_whole = 0;
    assert_int_equal(vka_tokenizer_encode(tok, text, len, whole, &n_whole), VKA_SUCCESS);
    for (int streamed = 0; streamed < 2; streamed++) {
        if (streamed) assert_int_equal(vka_tokenize_file(ctx, tok, path, tokens, NULL, NULL),
                                       VKA_SUCCESS);
        vka_data *data = NULL;
        assert_int_equal(vka_data_load(ctx, streamed ? tokens : path, tok, &data), VKA_SUCCESS);
        size_t n = 0;
        int32_t *got = split_tokens(data, VKA_SPLIT_ALL, &n);
        for (size_t i = 0; i < n && i < n_whole; i++)
            if (got[i] != whole[i])
                fail_msg("%s: id %zu is %d, the whole text's %d (%zu ids, the whole %zu)",
                         streamed ? "streamed" : "loaded", i, got[i], whole[i], n, n_whole);
        if (n != n_whole) fail_msg("%zu ids, the whole text %zu", n, n_whole);
        free(got);
        vka_data_destroy(data);
    }
    print_message("  %zu bytes: %zu ids, loaded and streamed\n", len, n_whole);
    free(text);
    free(whole);
    vka_tokenizer_destroy(tok);
    tf_rmdir(&d);
    tu_done(ctx);
}

/* GPT-2's tokens of texts full of whitespace runs, apostrophes, non-ASCII and bytes that are
 * not UTF-8, loaded (vka_data_open) and streamed into a token file (vka_tokenize_file, which
 * `vkattn tokenize` runs) in pieces of every size from 1 byte up: always those of encoding the
 * whole text at once. */
static void test_data_bpe_text_in_pieces_of_any_size_equals_the_whole(void **state) {
    vka_context *ctx = tu_cpu();
    tf_dir d = tf_mkdir();
    vka_tokenizer *tok = NULL;
    if (vka_tokenizer_load(ctx, GPT2_FILE, &tok) != VKA_SUCCESS)
        fail_msg("load %s: %s", GPT2_FILE, vka_last_error(ctx));
    const char *path = tf_path(&d, "text.txt"), *tokens = tf_path(&d, "text.bin");
    uint64_t seed = 5;
    size_t checked = 0;
    for (int round = 0; round < 12; round++) {
        unsigned char text[160];
        size_t len = round == 0 ? (size_t)snprintf((char *)text, sizeof text, "Speak. \n\nFirst "
                                                    "Citizen:\n \t\n\nYou are all resolved")
                                : tg_random_text(&seed, text, sizeof text);
        tf_write(path, text, len);
        int32_t whole[160];
        size_t n_whole = 0;
        assert_int_equal(vka_tokenizer_encode(tok, (const char *)text, len, whole, &n_whole),
                         VKA_SUCCESS);
        for (size_t piece = 1; piece <= len + 1; piece++) {
            char env[32];
            snprintf(env, sizeof env, "%zu", piece);
            setenv("VKATTN_TEXT_PIECE_BYTES", env, 1);
            for (int streamed = 0; streamed < 2; streamed++) {
                if (streamed) {
                    uint64_t nt = 0, nb = 0;
                    if (vka_tokenize_file(ctx, tok, path, tokens, &nt, &nb) != VKA_SUCCESS)
                        fail_msg("tokenize_file: %s", vka_last_error(ctx));
                    assert_true(nt == n_whole && nb == len);
                }
                vka_data *data = NULL;
                if (vka_data_load(ctx, streamed ? tokens : path, tok, &data) != VKA_SUCCESS)
                    fail_msg("data load: %s", vka_last_error(ctx));
                size_t n = 0;
                int32_t *got = split_tokens(data, VKA_SPLIT_ALL, &n);
                for (size_t i = 0; i < n && i < n_whole; i++)
                    if (got[i] != whole[i])
                        fail_msg("text %d, pieces of %zu bytes%s: id %zu is %d, the whole "
                                 "text's %d", round, piece, streamed ? ", streamed" : "", i,
                                 got[i], whole[i]);
                if (n != n_whole)
                    fail_msg("text %d, pieces of %zu bytes%s: %zu ids, the whole text %zu",
                             round, piece, streamed ? ", streamed" : "", n, n_whole);
                free(got);
                vka_data_destroy(data);
                checked++;
            }
        }
    }
    print_message("  %zu texts x piece sizes give the ids of the whole\n", checked);
    /* In pieces of 1 byte too, a token file is told apart by its header. */
    setenv("VKATTN_TEXT_PIECE_BYTES", "1", 1);
    const int32_t ids[3] = {1, 2, 3};
    assert_int_equal(vka_tokens_save(ctx, tokens, ids, 3), VKA_SUCCESS);
    vka_result r = vka_tokenize_file(ctx, tok, tokens, tf_path(&d, "again.bin"), NULL, NULL);
    tf_expect_error(ctx, r, VKA_ERROR_FORMAT, "is an llm.c token file", NULL);
    /* A bad piece size is an error naming the variable. */
    setenv("VKATTN_TEXT_PIECE_BYTES", "0", 1);
    vka_data *data = NULL;
    r = vka_data_load(ctx, path, tok, &data);
    tf_expect_error(ctx, r, VKA_ERROR_INVALID_ARGUMENT, "VKATTN_TEXT_PIECE_BYTES=\"0\"", NULL);
    r = vka_tokenize_file(ctx, tok, path, tokens, NULL, NULL);
    tf_expect_error(ctx, r, VKA_ERROR_INVALID_ARGUMENT, "VKATTN_TEXT_PIECE_BYTES=\"0\"", NULL);
    unsetenv("VKATTN_TEXT_PIECE_BYTES");
    vka_tokenizer_destroy(tok);
    tf_rmdir(&d);
    tu_done(ctx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_data_split_is_90_10_and_decodes_back),
        cmocka_unit_test(test_data_token_file_round_trip),
        cmocka_unit_test(test_data_token_file_errors),
        cmocka_unit_test(test_data_shards),
        cmocka_unit_test(test_data_text_in_pieces_equals_the_whole),
        cmocka_unit_test(test_data_bpe_text_over_a_piece_equals_the_whole),
        cmocka_unit_test(test_data_bpe_text_in_pieces_of_any_size_equals_the_whole),
        cmocka_unit_test(test_data_load_errors),
        cmocka_unit_test(test_data_byte_outside_tokenizer),
        cmocka_unit_test(test_data_batch_windows_are_from_the_split),
        cmocka_unit_test(test_data_batch_is_reproducible_from_the_rng_state),
        cmocka_unit_test(test_data_tinyshakespeare),
        cmocka_unit_test(test_data_text_id_is_length_and_fnv1a),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
