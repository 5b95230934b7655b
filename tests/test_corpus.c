/* The built-in corpus: size, determinism, plain text, variety, and a model learns from it. */
#include "test_util.h"

#include <ctype.h>
#include <stdint.h>

static void test_corpus_default_size_is_about_1_mib(void **state) {
    size_t len = 0;
    char *text = vka_builtin_corpus(0, &len);
    assert_non_null(text);
    assert_true(len <= (size_t)1 << 20);
    assert_true(len >= ((size_t)1 << 20) - 4096); /* whole stories, each well under 4 KiB */
    free(text);
    text = vka_builtin_corpus(50000, &len);
    assert_true(len <= 50000 && len >= 50000 - 4096);
    free(text);
    text = vka_builtin_corpus(10, &len); /* shorter than one story: its first 10 bytes */
    assert_int_equal(len, 10);
    free(text);
}

static void test_corpus_is_deterministic_and_prefix_stable(void **state) {
    size_t la, lb, ls;
    char *a = vka_builtin_corpus(0, &la);
    char *b = vka_builtin_corpus(0, &lb);
    char *s = vka_builtin_corpus(100000, &ls);
    assert_int_equal(la, lb);
    assert_memory_equal(a, b, la);
    assert_true(ls < la);
    assert_memory_equal(a, s, ls); /* a smaller corpus is a prefix of a larger one */
    free(a);
    free(b);
    free(s);
}

static void test_corpus_is_plain_ascii_text(void **state) {
    size_t len;
    char *text = vka_builtin_corpus(0, &len);
    bool used[256] = {false};
    int distinct = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)text[i];
        if (!(c == '\n' || (c >= 0x20 && c < 0x7F))) fail_msg("byte 0x%02X at %zu", c, i);
        if (!used[c]) distinct++;
        used[c] = true;
    }
    /* A vocabulary the size of tinyshakespeare's (65) or so. */
    assert_true(distinct >= 40 && distinct <= 80);
    assert_false(strstr(text, "  ")); /* template joins leave no double spaces */
    assert_false(strstr(text, "{"));  /* no unexpanded placeholders */
    free(text);
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Distinct words, and distinct paragraphs: variety that a model cannot memorise at once. */
static void test_corpus_has_variety(void **state) {
    size_t len;
    char *text = vka_builtin_corpus(0, &len);
    char **words = malloc(len * sizeof *words);
    size_t n_words = 0;
    char *copy = malloc(len + 1);
    memcpy(copy, text, len + 1);
    for (char *w = strtok(copy, " \n.,!?\":"); w; w = strtok(NULL, " \n.,!?\":")) words[n_words++] = w;
    qsort(words, n_words, sizeof *words, cmp_str);
    size_t distinct = n_words ? 1 : 0;
    for (size_t i = 1; i < n_words; i++) distinct += strcmp(words[i], words[i - 1]) != 0;
    print_message("%zu words, %zu distinct\n", n_words, distinct);
    assert_true(distinct >= 300);

    /* paragraphs: split on blank lines */
    memcpy(copy, text, len + 1);
    size_t n_par = 0;
    for (char *p = copy; p && *p;) {
        char *e = strstr(p, "\n\n");
        if (e) *e = '\0';
        words[n_par++] = p;
        p = e ? e + 2 : NULL;
    }
    qsort(words, n_par, sizeof *words, cmp_str);
    size_t unique = n_par ? 1 : 0;
    for (size_t i = 1; i < n_par; i++) unique += strcmp(words[i], words[i - 1]) != 0;
    print_message("%zu paragraphs, %zu distinct\n", n_par, unique);
    assert_true(unique * 10 >= n_par * 7); /* at least 70% distinct */
    free(copy);
    free(words);
    free(text);
}

/* A small model trained briefly on the corpus gets well below the uniform loss ln(V) on the
 * validation split: the text has structure a model can learn. */
static void test_corpus_model_loss_goes_down(void **state) {
    vka_context *ctx = tu_cpu();
    vka_data *data = NULL;
    assert_int_equal(vka_data_load(ctx, NULL, NULL, &data), VKA_SUCCESS);
    int V = vka_tokenizer_vocab_size(vka_data_tokenizer(data));
    enum { B = 8, T = 32, STEPS = 80 };
    vka_gpt_config cfg = {.max_T = T, .V = V, .L = 2, .NH = 4, .C = 48};
    vka_gpt *gpt = NULL;
    assert_int_equal(vka_gpt_create(ctx, &cfg, 1, &gpt), VKA_SUCCESS);
    size_t n_val = vka_data_num_tokens(data, VKA_SPLIT_VAL);
    size_t n_eval = n_val < (size_t)T * 64 + 1 ? n_val : (size_t)T * 64 + 1;
    int32_t val[T * 64 + 1];
    assert_int_equal(vka_data_read_tokens(data, VKA_SPLIT_VAL, 0, n_eval, val), VKA_SUCCESS);
    double before, after;
    assert_int_equal(vka_gpt_eval(gpt, val, n_eval, T, &before, NULL), VKA_SUCCESS);
    int32_t in[B * T], tg[B * T];
    uint64_t rng = 1;
    vka_adamw_desc opt = {.lr = 3e-3f};
    for (int s = 0; s < STEPS; s++) {
        assert_int_equal(vka_data_batch(data, VKA_SPLIT_TRAIN, B, T, &rng, in, tg), VKA_SUCCESS);
        float loss;
        assert_int_equal(vka_gpt_train_step(gpt, in, tg, B, T, &opt, &loss, NULL), VKA_SUCCESS);
    }
    assert_int_equal(vka_gpt_eval(gpt, val, n_eval, T, &after, NULL), VKA_SUCCESS);
    print_message("val loss %.3f -> %.3f after %d steps (ln V = %.3f)\n", before, after, STEPS,
                  log((double)V));
    assert_true(fabs(before - log((double)V)) < 0.1);
    assert_true(after < before - 1.0);
    vka_gpt_destroy(gpt);
    vka_data_destroy(data);
    tu_done(ctx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_corpus_default_size_is_about_1_mib),
        cmocka_unit_test(test_corpus_is_deterministic_and_prefix_stable),
        cmocka_unit_test(test_corpus_is_plain_ascii_text),
        cmocka_unit_test(test_corpus_has_variety),
        cmocka_unit_test(test_corpus_model_loss_goes_down),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
