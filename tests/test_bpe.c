/* Byte-level BPE: GPT-2's vocabulary against the reference ids of gpt-3-encoder (made by
 * tools/gpt2-tokenizer.mjs), round trips of any bytes, file errors, streaming UTF-8, and
 * learning a vocabulary. */
#define _POSIX_C_SOURCE 200809L
#include "test_files.h"

#include <stdint.h>
#include <time.h>

#define GPT2_FILE VKA_TEST_DATA_DIR "/gpt2_tokenizer.bin"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static vka_tokenizer *gpt2(vka_context *ctx) {
    vka_tokenizer *tok = NULL;
    vka_result r = vka_tokenizer_load(ctx, GPT2_FILE, &tok);
    if (r != VKA_SUCCESS) fail_msg("load %s: %s", GPT2_FILE, vka_last_error(ctx));
    return tok;
}

static int32_t *encode(vka_context *ctx, const vka_tokenizer *tok, const void *text, size_t len,
                       size_t *n) {
    int32_t *ids = malloc((len ? len : 1) * sizeof *ids);
    assert_non_null(ids);
    vka_result r = vka_tokenizer_encode(tok, text, len, ids, n);
    if (r != VKA_SUCCESS) fail_msg("encode: %s", vka_last_error(ctx));
    assert_true(*n <= len);
    return ids;
}

/* decode(ids) == text, byte for byte. */
static void assert_decodes_to(const vka_tokenizer *tok, const int32_t *ids, size_t n,
                              const unsigned char *text, size_t len) {
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        size_t tl = 0;
        const char *b = vka_tokenizer_decode(tok, ids[i], &tl);
        assert_non_null(b);
        if (at + tl > len || memcmp(text + at, b, tl) != 0)
            fail_msg("token %zu (id %d) does not decode to the text at byte %zu", i, ids[i], at);
        at += tl;
    }
    if (at != len) fail_msg("decoded %zu bytes of %zu", at, len);
}

static void assert_same_ids(const int32_t *got, size_t n_got, const int32_t *want, size_t n_want,
                            const char *what) {
    size_t n = n_got < n_want ? n_got : n_want;
    for (size_t i = 0; i < n; i++)
        if (got[i] != want[i])
            fail_msg("%s: id %zu is %d, the reference says %d (of %zu / %zu ids)", what, i, got[i],
                     want[i], n_got, n_want);
    if (n_got != n_want) fail_msg("%s: %zu ids, the reference has %zu", what, n_got, n_want);
    print_message("  %s: %zu ids identical to the reference\n", what, n_got);
}

static void test_bpe_gpt2_file_loads(void **state) {
    vka_context *ctx = tu_cpu();
    vka_tokenizer *tok = gpt2(ctx);
    assert_int_equal(vka_tokenizer_vocab_size(tok), 50257);
    assert_int_equal(vka_tokenizer_eot(tok), 50256);
    assert_int_equal(vka_tokenizer_kind_of(tok), VKA_TOKENIZER_BPE);
    size_t len = 0;
    const char *b = vka_tokenizer_decode(tok, 50256, &len);
    assert_int_equal(len, 13);
    assert_memory_equal(b, "<|endoftext|>", 13);
    b = vka_tokenizer_decode(tok, 50257, &len);
    assert_null(b);
    /* Saved again it is the same file. */
    tf_dir d = tf_mkdir();
    const char *path = tf_path(&d, "again.bin");
    assert_int_equal(vka_tokenizer_save(tok, path), VKA_SUCCESS);
    size_t n1, n2;
    unsigned char *f1 = tf_read(GPT2_FILE, &n1), *f2 = tf_read(path, &n2);
    assert_int_equal(n1, n2);
    assert_memory_equal(f1, f2, n1);
    free(f1);
    free(f2);
    tf_rmdir(&d);
    vka_tokenizer_destroy(tok);
    tu_done(ctx);
}

/* The ids of text against the reference file's (little-endian int32). */
static void check_reference(vka_context *ctx, const vka_tokenizer *tok, const unsigned char *text,
                            size_t len, const char *ids_path, const char *what) {
    size_t n_ref_bytes;
    unsigned char *ref = tf_read(ids_path, &n_ref_bytes);
    assert_non_null(ref);
    size_t n = 0;
    double t0 = now_s();
    int32_t *ids = encode(ctx, tok, text, len, &n);
    double t1 = now_s();
    assert_same_ids(ids, n, (const int32_t *)ref, n_ref_bytes / 4, what);
    print_message("  %s: %zu bytes in %.1f ms\n", what, len, (t1 - t0) * 1e3);
    assert_decodes_to(tok, ids, n, text, len);
    free(ids);
    free(ref);
}

static void test_bpe_gpt2_matches_reference_on_mixed_text(void **state) {
    vka_context *ctx = tu_cpu();
    vka_tokenizer *tok = gpt2(ctx);
    size_t len;
    unsigned char *text = tf_read(VKA_TEST_DATA_DIR "/bpe_mixed.txt", &len);
    assert_non_null(text);
    assert_true(len >= 10000);
    check_reference(ctx, tok, text, len, VKA_TEST_DATA_DIR "/bpe_mixed.gpt2.ids", "bpe_mixed.txt");
    free(text);
    vka_tokenizer_destroy(tok);
    tu_done(ctx);
}

static void test_bpe_gpt2_matches_reference_on_shakespeare(void **state) {
    const char *path = tu_shared_data_path("tinyshakespeare.txt");
    vka_context *ctx = tu_cpu();
    vka_tokenizer *tok = gpt2(ctx);
    size_t len;
    unsigned char *text = tf_read(path, &len);
    assert_non_null(text);
    assert_true(len > 100000);
    check_reference(ctx, tok, text, 100000, VKA_TEST_DATA_DIR "/tinyshakespeare_100k.gpt2.ids",
                    "first 100000 bytes of tinyshakespeare.txt");
    /* The whole text (docs/files.md quotes its token count): timed, round trip checked. */
    size_t n = 0;
    double t0 = now_s();
    int32_t *ids = encode(ctx, tok, text, len, &n);
    double t1 = now_s();
    print_message("  tinyshakespeare.txt: %zu bytes -> %zu GPT-2 tokens in %.0f ms\n", len, n,
                  (t1 - t0) * 1e3);
    assert_decodes_to(tok, ids, n, text, len);
    free(ids);
    free(text);
    vka_tokenizer_destroy(tok);
    tu_done(ctx);
}

/* Invalid UTF-8: each such byte is its own token, the valid stretches between them encode as
 * they would alone, and everything decodes back. */
static void test_bpe_invalid_utf8_round_trips(void **state) {
    vka_context *ctx = tu_cpu();
    vka_tokenizer *tok = gpt2(ctx);
    static const struct {
        const char *s;
        size_t n;
    } cases[] = {
#define C(lit) {lit, sizeof lit - 1}
        C("\xFF"),
        C("Hello\xFFworld"),
        C("caf\xC3"),                       /* truncated 2-byte sequence at the end */
        C("\x80\x80 leading continuation bytes"),
        C("a \xE2\x82 b"),                  /* truncated 3-byte sequence */
        C("over\xC0\xAFlong and \xED\xA0\x80 surrogate"),
        C("  \xFE  spaces around  \xF8\x88\x80\x80\x80 five-byte\n"),
        C("\xF4\x90\x80\x80 above U+10FFFF, then \xF0\x9F\x98\x80 ok \xF0\x9F\x98"),
        C("don't\xA0'll \xFF's"),
        C("\xE4\xB8\xAD\xE6\x96\x87\xE6"),
#undef C
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const unsigned char *x = (const unsigned char *)cases[c].s;
        size_t len = cases[c].n, n = 0;
        int32_t *ids = encode(ctx, tok, x, len, &n);
        assert_decodes_to(tok, ids, n, x, len);
        free(ids);
    }
    /* Stretches: "valid<bad>valid<bad>...", compared piece by piece with each stretch alone. */
    static const char *const valid[] = {"It's ", " a test", " of  ", "", " DON'T", "\n\n caf\xC3\xA9 ",
                                        "'ll"};
    static const unsigned char bad[] = {0xFF, 0xC3, 0x80, 0x80, 0xFE, 0xE2};
    unsigned char text[256];
    size_t at[8], len = 0;
    for (size_t i = 0; i < 7; i++) {
        at[i] = len;
        memcpy(text + len, valid[i], strlen(valid[i]));
        len += strlen(valid[i]);
        if (i < 6) text[len++] = bad[i];
    }
    size_t n = 0;
    int32_t *ids = encode(ctx, tok, text, len, &n);
    assert_decodes_to(tok, ids, n, text, len);
    size_t k = 0;
    for (size_t i = 0; i < 7; i++) {
        size_t m = 0;
        int32_t *part = encode(ctx, tok, text + at[i], strlen(valid[i]), &m);
        for (size_t j = 0; j < m; j++, k++) {
            assert_true(k < n);
            if (ids[k] != part[j]) fail_msg("stretch %zu: id %zu differs", i, j);
        }
        free(part);
        if (i < 6) {
            size_t tl;
            assert_true(k < n);
            const char *tb = vka_tokenizer_decode(tok, ids[k++], &tl);
            assert_int_equal(tl, 1);
            assert_int_equal((unsigned char)tb[0], bad[i]);
        }
    }
    assert_int_equal(k, n);
    free(ids);
    vka_tokenizer_destroy(tok);
    tu_done(ctx);
}

static void test_bpe_random_bytes_round_trip(void **state) {
    vka_context *ctx = tu_cpu();
    vka_tokenizer *tok = gpt2(ctx);
    uint64_t s = 12345;
    unsigned char buf[4096];
    for (int round = 0; round < 50; round++) {
        size_t len = (size_t)(round * 83 % 4096) + 1;
        for (size_t i = 0; i < len; i++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            /* Bias towards ASCII letters and spaces so that merges happen. */
            unsigned v = (unsigned)(s >> 33);
            buf[i] = (v & 3) ? (unsigned char)(" etaoinshrdlu'\n"[v % 15]) : (unsigned char)(v >> 8);
        }
        size_t n = 0;
        int32_t *ids = encode(ctx, tok, buf, len, &n);
        assert_decodes_to(tok, ids, n, buf, len);
        free(ids);
    }
    /* A long run of one byte (a piece of 100000 bytes) is quick and exact too. */
    static unsigned char run[100000];
    memset(run, ' ', sizeof run);
    size_t n = 0;
    int32_t *ids = encode(ctx, tok, run, sizeof run, &n);
    assert_decodes_to(tok, ids, n, run, sizeof run);
    free(ids);
    vka_tokenizer_destroy(tok);
    tu_done(ctx);
}

static void test_bpe_eot_is_never_merged(void **state) {
    vka_context *ctx = tu_cpu();
    vka_tokenizer *tok = gpt2(ctx);
    const char *text = "a<|endoftext|>b <|endoftext|>";
    size_t n = 0;
    int32_t *ids = encode(ctx, tok, text, strlen(text), &n);
    for (size_t i = 0; i < n; i++) assert_int_not_equal(ids[i], 50256);
    assert_decodes_to(tok, ids, n, (const unsigned char *)text, strlen(text));
    free(ids);
    vka_tokenizer_destroy(tok);
    tu_done(ctx);
}

/* An llm.c tokenizer file of the given header and token table. */
static size_t make_file(unsigned char *buf, int n, int eot, const unsigned char *table,
                        size_t table_len) {
    int32_t header[256] = {20240328, 2, n, eot};
    memcpy(buf, header, sizeof header);
    memcpy(buf + sizeof header, table, table_len);
    return sizeof header + table_len;
}

/* The 256 bytes, then extra tokens (length byte + bytes each). */
static size_t bytes_and(unsigned char *table, const unsigned char *extra, size_t extra_len) {
    for (int b = 0; b < 256; b++) {
        table[2 * b] = 1;
        table[2 * b + 1] = (unsigned char)b;
    }
    memcpy(table + 512, extra, extra_len);
    return 512 + extra_len;
}

static void expect_load_error(vka_context *ctx, tf_dir *d, const unsigned char *buf, size_t n,
                              const char *part, const char *part2) {
    const char *path = tf_path(d, "bad.tokenizer.bin");
    tf_write(path, buf, n);
    vka_tokenizer *tok = (vka_tokenizer *)1;
    vka_result r = vka_tokenizer_load(ctx, path, &tok);
    tf_expect_error(ctx, r, VKA_ERROR_FORMAT, "bad.tokenizer.bin", part, part2, NULL);
    assert_null(tok);
}

static void test_bpe_load_errors(void **state) {
    vka_context *ctx = tu_cpu();
    tf_dir d = tf_mkdir();
    static unsigned char buf[4096], table[2048];
    const unsigned char ab[] = {2, 'a', 'b', 3, 'a', 'b', 'c', 3, '<', 'e', '>'};
    size_t t = bytes_and(table, ab, sizeof ab);
    size_t n = make_file(buf, 259, 258, table, t);
    const char *good = tf_path(&d, "good.bin");
    tf_write(good, buf, n);
    vka_tokenizer *tok = NULL;
    assert_int_equal(vka_tokenizer_load(ctx, good, &tok), VKA_SUCCESS);
    assert_int_equal(vka_tokenizer_kind_of(tok), VKA_TOKENIZER_BPE);
    size_t m = 0;
    int32_t ids[8];
    assert_int_equal(vka_tokenizer_encode(tok, "abcab", 5, ids, &m), VKA_SUCCESS);
    assert_int_equal(m, 2);
    assert_int_equal(ids[0], 257);
    assert_int_equal(ids[1], 256);
    vka_tokenizer_destroy(tok);

    expect_load_error(ctx, &d, buf, n - 1, "truncated", "inside token 258");
    expect_load_error(ctx, &d, buf, n - 4, "truncated", "token 258 of 259");
    n = make_file(buf, 258, 256, table, t);
    expect_load_error(ctx, &d, buf, n, "trailing", "258 tokens");
    n = make_file(buf, 260, 258, table, t);
    expect_load_error(ctx, &d, buf, n, "truncated", "token 259 of 260");
    n = make_file(buf, 259, 259, table, t);
    expect_load_error(ctx, &d, buf, n, "end-of-text id 259", NULL);
    n = make_file(buf, 259, -1, table, t);
    expect_load_error(ctx, &d, buf, n, "end-of-text id -1", NULL);
    const unsigned char zero[] = {2, 'a', 'b', 0};
    t = bytes_and(table, zero, sizeof zero);
    n = make_file(buf, 258, 256, table, t);
    expect_load_error(ctx, &d, buf, n, "token 257 has length 0", NULL);
    const unsigned char dup[] = {2, 'a', 'b', 2, 'a', 'b'};
    t = bytes_and(table, dup, sizeof dup);
    n = make_file(buf, 258, 256, table, t);
    expect_load_error(ctx, &d, buf, n, "tokens 256 and 257 are the same", "\"ab\"");
    const unsigned char dup1[] = {1, 'x', 2, 'a', 'b'};
    t = bytes_and(table, dup1, sizeof dup1);
    n = make_file(buf, 258, 256, table, t);
    expect_load_error(ctx, &d, buf, n, "tokens 120 and 256 are the same", "\"x\"");
    /* No byte 0x41 ('A'): a table of the other 255 bytes and "ab". */
    size_t p = 0;
    for (int b = 0; b < 256; b++) {
        if (b == 'A') continue;
        table[p++] = 1;
        table[p++] = (unsigned char)b;
    }
    table[p++] = 2;
    table[p++] = 'a';
    table[p++] = 'b';
    n = make_file(buf, 256, 0, table, p);
    expect_load_error(ctx, &d, buf, n, "byte 0x41 is missing", "256 bytes");
    tf_rmdir(&d);
    tu_done(ctx);
}

static void test_utf8_complete_holds_back_only_partial_characters(void **state) {
    static const struct {
        const char *s;
        size_t len, want;
    } cases[] = {
        {"", 0, 0},
        {"abc", 3, 3},
        {"a\xC3", 2, 1},             /* é's first byte */
        {"a\xC3\xA9", 3, 3},
        {"\xE2\x82", 2, 0},          /* € missing its last byte */
        {"\xE2", 1, 0},
        {"\xE2\x82\xAC", 3, 3},
        {"x\xF0\x9F\x98", 4, 1},     /* 😀 missing one byte */
        {"\xF0\x9F\x98\x80", 4, 4},
        {"\xFF", 1, 1},              /* invalid: printed, never held */
        {"\x80", 1, 1},
        {"\xC0", 1, 1},              /* overlong lead: invalid */
        {"\xE0\x80", 2, 2},          /* E0 80 can never be valid */
        {"\xED\xA0", 2, 2},          /* surrogate */
        {"\xF4\x90", 2, 2},          /* above U+10FFFF */
        {"\xF0\x9F\x98\x80\xF0", 5, 4},
        {"\x80\x80\x80\xE2", 4, 3},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t got = vka_utf8_complete(cases[i].s, cases[i].len);
        if (got != cases[i].want)
            fail_msg("case %zu: %zu bytes printable, expected %zu", i, got, cases[i].want);
    }
    /* Streaming GPT-2 tokens of mixed text prints each character whole and loses nothing. */
    vka_context *ctx = tu_cpu();
    vka_tokenizer *tok = gpt2(ctx);
    size_t len;
    unsigned char *text = tf_read(VKA_TEST_DATA_DIR "/bpe_mixed.txt", &len);
    size_t n = 0;
    int32_t *ids = encode(ctx, tok, text, len, &n);
    unsigned char *printed = malloc(len);
    char pend[300];
    size_t np = 0, out = 0, held = 0;
    for (size_t i = 0; i < n; i++) {
        size_t tl;
        const char *b = vka_tokenizer_decode(tok, ids[i], &tl);
        memcpy(pend + np, b, tl);
        np += tl;
        size_t k = vka_utf8_complete(pend, np);
        if (k < np) held++;
        memcpy(printed + out, pend, k);
        out += k;
        memmove(pend, pend + k, np - k);
        np -= k;
        assert_true(np <= 3);
    }
    memcpy(printed + out, pend, np);
    out += np;
    assert_int_equal(out, len);
    assert_memory_equal(printed, text, len);
    assert_true(held > 0); /* the text does split characters across tokens */
    free(printed);
    free(ids);
    free(text);
    vka_tokenizer_destroy(tok);
    tu_done(ctx);
}

/* ---------------------------------------------------------------------------------------------
 * Learning
 * ------------------------------------------------------------------------------------------- */

static vka_tokenizer *learn(vka_context *ctx, const void *text, size_t len, int V, double *ms) {
    vka_tokenizer *tok = NULL;
    double t0 = now_s();
    vka_result r = vka_tokenizer_learn(ctx, text, len, V, &tok);
    if (ms) *ms = (now_s() - t0) * 1e3;
    if (r != VKA_SUCCESS) fail_msg("learn %d: %s", V, vka_last_error(ctx));
    return tok;
}

static void test_bpe_learn_layout_round_trip_and_save(void **state) {
    vka_context *ctx = tu_cpu();
    size_t len;
    unsigned char *text = tf_read(VKA_TEST_DATA_DIR "/bpe_mixed.txt", &len);
    vka_tokenizer *tok = learn(ctx, text, len, 600, NULL);
    assert_int_equal(vka_tokenizer_vocab_size(tok), 600);
    assert_int_equal(vka_tokenizer_kind_of(tok), VKA_TOKENIZER_BPE);
    assert_int_equal(vka_tokenizer_eot(tok), 599);
    size_t tl;
    for (int b = 0; b < 256; b++) {
        const char *t = vka_tokenizer_decode(tok, b, &tl);
        assert_int_equal(tl, 1);
        assert_int_equal((unsigned char)t[0], b);
    }
    const char *t = vka_tokenizer_decode(tok, 599, &tl);
    assert_int_equal(tl, 13);
    assert_memory_equal(t, "<|endoftext|>", 13);
    for (int i = 256; i < 599; i++) {
        vka_tokenizer_decode(tok, i, &tl);
        assert_true(tl >= 2);
    }
    size_t n = 0;
    int32_t *ids = encode(ctx, tok, text, len, &n);
    print_message("  bpe_mixed.txt: %zu bytes -> %zu tokens with a learned 600\n", len, n);
    assert_true(n < len * 3 / 4);
    assert_decodes_to(tok, ids, n, text, len);
    for (size_t i = 0; i < n; i++) assert_int_not_equal(ids[i], 599);

    /* Saved and loaded, it encodes the same. */
    tf_dir d = tf_mkdir();
    const char *path = tf_path(&d, "learned.tokenizer.bin");
    assert_int_equal(vka_tokenizer_save(tok, path), VKA_SUCCESS);
    vka_tokenizer *back = NULL;
    assert_int_equal(vka_tokenizer_load(ctx, path, &back), VKA_SUCCESS);
    assert_int_equal(vka_tokenizer_vocab_size(back), 600);
    assert_int_equal(vka_tokenizer_eot(back), 599);
    size_t n2 = 0;
    int32_t *ids2 = encode(ctx, back, text, len, &n2);
    assert_same_ids(ids2, n2, ids, n, "reloaded learned vocabulary");
    /* The same text and size learn the same vocabulary: the same file. */
    vka_tokenizer *again = learn(ctx, text, len, 600, NULL);
    const char *path2 = tf_path(&d, "again.tokenizer.bin");
    assert_int_equal(vka_tokenizer_save(again, path2), VKA_SUCCESS);
    size_t s1, s2;
    unsigned char *f1 = tf_read(path, &s1), *f2 = tf_read(path2, &s2);
    assert_int_equal(s1, s2);
    assert_memory_equal(f1, f2, s1);
    free(f1);
    free(f2);
    vka_tokenizer_destroy(again);
    tf_rmdir(&d);
    free(ids);
    free(ids2);
    vka_tokenizer_destroy(back);
    vka_tokenizer_destroy(tok);
    free(text);
    tu_done(ctx);
}

static void test_bpe_learn_merges_most_frequent_pair_first(void **state) {
    vka_context *ctx = tu_cpu();
    /* Pieces: "aaab" x3 and " ab" ... pair counts: (a,a) 2 per "aaab" -> 6, (a,b) 3 + 2 = 5. */
    const char *text = "aaab aaab aaab ab ab";
    vka_tokenizer *tok = learn(ctx, text, strlen(text), 258, NULL);
    size_t tl;
    const char *t = vka_tokenizer_decode(tok, 256, &tl);
    assert_int_equal(tl, 2);
    assert_memory_equal(t, "aa", 2);
    vka_tokenizer_destroy(tok);
    /* Ties go to the smaller pair: "ba" and "ab" twice each -> "ab" ('a' < 'b') first. */
    text = "ab ab ba ba";
    tok = learn(ctx, text, strlen(text), 258, NULL);
    t = vka_tokenizer_decode(tok, 256, &tl);
    assert_int_equal(tl, 2);
    assert_memory_equal(t, " b", 2); /* (' ', 'b') = (0x20, 0x62) sorts before ('a', 'b') */
    vka_tokenizer_destroy(tok);
    tu_done(ctx);
}

static void test_bpe_learn_stops_when_no_pair_repeats(void **state) {
    vka_context *ctx = tu_cpu();
    const char *text = "abcabc xyz";
    vka_tokenizer *tok = learn(ctx, text, strlen(text), 4096, NULL);
    int V = vka_tokenizer_vocab_size(tok);
    /* abc x2 -> "ab", "abc"; nothing else occurs twice. */
    assert_int_equal(V, 256 + 2 + 1);
    assert_int_equal(vka_tokenizer_eot(tok), V - 1);
    size_t n = 0;
    int32_t *ids = encode(ctx, tok, text, strlen(text), &n);
    assert_int_equal(n, 2 + 4);
    free(ids);
    vka_tokenizer_destroy(tok);
    tu_done(ctx);
}

/* Bytes that are not UTF-8 are pieces of their own: never part of a learned merge. */
static void test_bpe_learn_keeps_invalid_bytes_apart(void **state) {
    vka_context *ctx = tu_cpu();
    char text[4096] = "";
    for (int i = 0; i < 50; i++) strcat(text, "\xFF\xFE""ab\xC3 caf\xC3\xA9 \x80\x80x");
    size_t len = strlen(text);
    vka_tokenizer *tok = learn(ctx, text, len, 320, NULL);
    int V = vka_tokenizer_vocab_size(tok);
    assert_true(V > 260);
    for (int id = 256; id < V - 1; id++) {
        size_t tl;
        const unsigned char *b = (const unsigned char *)vka_tokenizer_decode(tok, id, &tl);
        for (size_t i = 0; i < tl; i++)
            if (b[i] == 0xFF || b[i] == 0xFE || (b[i] == 0xC3 && (i + 1 == tl || b[i + 1] != 0xA9)) ||
                (b[i] == 0x80 && (i == 0 || b[i - 1] != 0xC3)))
                fail_msg("learned token %d holds an invalid byte 0x%02X", id, b[i]);
    }
    size_t n = 0;
    int32_t *ids = encode(ctx, tok, text, len, &n);
    assert_decodes_to(tok, ids, n, (const unsigned char *)text, len);
    free(ids);
    vka_tokenizer_destroy(tok);
    tu_done(ctx);
}

static void test_bpe_learn_bad_sizes_are_errors(void **state) {
    vka_context *ctx = tu_cpu();
    vka_tokenizer *tok = (vka_tokenizer *)1;
    vka_result r = vka_tokenizer_learn(ctx, "hello", 5, 256, &tok);
    tf_expect_error(ctx, r, VKA_ERROR_INVALID_ARGUMENT, "256", "257", NULL);
    assert_null(tok);
    r = vka_tokenizer_learn(ctx, "hello", 5, VKA_TOKENIZER_MAX_VOCAB + 1, &tok);
    tf_expect_error(ctx, r, VKA_ERROR_INVALID_ARGUMENT, "outside", NULL);
    r = vka_tokenizer_learn(ctx, "", 0, 512, &tok);
    tf_expect_error(ctx, r, VKA_ERROR_INVALID_ARGUMENT, "empty", NULL);
    tu_done(ctx);
}

static void test_bpe_learn_shakespeare(void **state) {
    const char *path = tu_shared_data_path("tinyshakespeare.txt");
    vka_context *ctx = tu_cpu();
    size_t len;
    unsigned char *text = tf_read(path, &len);
    static const int sizes[] = {512, 4096};
    size_t prev_n = len;
    for (int i = 0; i < 2; i++) {
        double ms_learn;
        vka_tokenizer *tok = learn(ctx, text, len, sizes[i], &ms_learn);
        assert_int_equal(vka_tokenizer_vocab_size(tok), sizes[i]);
        size_t n = 0;
        double t0 = now_s();
        int32_t *ids = encode(ctx, tok, text, len, &n);
        double ms_enc = (now_s() - t0) * 1e3;
        print_message("  tinyshakespeare.txt: learned %d tokens in %.0f ms; encodes %zu bytes to "
                      "%zu tokens (%.2f bytes/token) in %.0f ms\n", sizes[i], ms_learn, len, n,
                      (double)len / (double)n, ms_enc);
        assert_true(n < prev_n);
        prev_n = n;
        assert_decodes_to(tok, ids, n, text, len);
        free(ids);
        vka_tokenizer_destroy(tok);
    }
    free(text);
    tu_done(ctx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bpe_gpt2_file_loads),
        cmocka_unit_test(test_bpe_gpt2_matches_reference_on_mixed_text),
        cmocka_unit_test(test_bpe_gpt2_matches_reference_on_shakespeare),
        cmocka_unit_test(test_bpe_invalid_utf8_round_trips),
        cmocka_unit_test(test_bpe_random_bytes_round_trip),
        cmocka_unit_test(test_bpe_eot_is_never_merged),
        cmocka_unit_test(test_bpe_load_errors),
        cmocka_unit_test(test_utf8_complete_holds_back_only_partial_characters),
        cmocka_unit_test(test_bpe_learn_layout_round_trip_and_save),
        cmocka_unit_test(test_bpe_learn_merges_most_frequent_pair_first),
        cmocka_unit_test(test_bpe_learn_stops_when_no_pair_repeats),
        cmocka_unit_test(test_bpe_learn_keeps_invalid_bytes_apart),
        cmocka_unit_test(test_bpe_learn_bad_sizes_are_errors),
        cmocka_unit_test(test_bpe_learn_shakespeare),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
