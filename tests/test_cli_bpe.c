/*
 * vkattn train --vocab-size / --tokenizer and the BPE vocabularies in generate and eval, run as a
 * user runs them (the built binary in a fresh directory, CPU backend, a tiny model, a few steps).
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include "cli_util.h"

#define GPT2_FILE VKA_TEST_DATA_DIR "/gpt2_tokenizer.bin"
#define TINY "--backend", "cpu", "--layers", "1", "--heads", "2", "--embd", "32", "--ctx", "32", \
             "--batch", "4", "--eval-windows", "4"

static void write_text(const char *path, size_t bytes) {
    size_t len = 0;
    char *text = vka_builtin_corpus(bytes, &len);
    assert_non_null(text);
    tf_write(path, text, len);
    free(text);
}

static vka_tokenizer *load_tok(vka_context *ctx, const char *path) {
    vka_tokenizer *tok = NULL;
    if (vka_tokenizer_load(ctx, path, &tok) != VKA_SUCCESS)
        fail_msg("%s: %s", path, vka_last_error(ctx));
    return tok;
}

/* More than one 1 MiB piece of text whose lines end in whitespace before blank lines (where a
 * cut after "\n\n" would make " \n\n" one piece: ids 220 628 for 220 198 198). */
static char *spaced_text(size_t *len) {
    static const char verse[] = "Speak, speak. \n\nFirst Citizen: \t\n\nYou are all resolved "
                                "rather to die than to famish?\xC2\xA0\n  \n\n'Tis 42 \xE2\x80\x94 "
                                "caf\xC3\xA9 \xE4\xB8\xAD\xE6\x96\x87   \n";
    size_t n = (sizeof verse - 1) * ((3u << 19) / (sizeof verse - 1) + 1);
    char *text = malloc(n);
    assert_non_null(text);
    for (size_t at = 0; at < n; at += sizeof verse - 1) memcpy(text + at, verse, sizeof verse - 1);
    *len = n;
    return text;
}

/* vkattn tokenize with GPT-2's vocabulary writes the ids of encoding the whole text at once,
 * from a file and from standard input, in 1 MiB pieces and in pieces of a few bytes. */
static void test_cli_tokenize_gpt2_gives_the_ids_of_the_whole_text(void **state) {
    tf_dir d = tf_mkdir();
    size_t len = 0;
    char *text = spaced_text(&len);
    const char *path = tf_path(&d, "text.txt");
    tf_write(path, text, len);
    vka_context *ctx = tu_cpu();
    vka_tokenizer *tok = load_tok(ctx, GPT2_FILE);
    int32_t *whole = malloc(len * sizeof *whole);
    size_t n_whole = 0;
    assert_int_equal(vka_tokenizer_encode(tok, text, len, whole, &n_whole), VKA_SUCCESS);
    for (int run = 0; run < 2; run++) {
        cu_spec spec = {.dir = &d, .stdin_path = run ? path : NULL,
                        .env = {run ? "VKATTN_TEXT_PIECE_BYTES=4099" : NULL}};
        cu_result r = cu_run_spec(&spec, CU_ARGS("tokenize", "--tokenizer", GPT2_FILE, "--data",
                                                 run ? "-" : "text.txt", "--out", "t.bin"));
        cu_expect(&r, 0, NULL, "tokenize");
        cu_free(&r);
        size_t n = 0;
        unsigned char *f = tf_read(tf_path(&d, "t.bin"), &n);
        assert_true(n >= 1024);
        size_t n_ids = (n - 1024) / 2;
        for (size_t i = 0; i < n_ids && i < n_whole; i++) {
            int32_t id = f[1024 + 2 * i] | f[1024 + 2 * i + 1] << 8;
            if (id != whole[i])
                fail_msg("%s: id %zu is %d, the whole text's %d", run ? "standard input" : "file",
                         i, id, whole[i]);
        }
        if (n_ids != n_whole)
            fail_msg("%s: %zu ids, the whole text %zu", run ? "standard input" : "file", n_ids,
                     n_whole);
        print_message("  %s: %zu ids of %zu bytes, those of the whole text\n",
                      run ? "standard input, pieces of 4099 bytes" : "file", n_ids, len);
        free(f);
    }
    free(whole);
    free(text);
    vka_tokenizer_destroy(tok);
    tu_done(ctx);
    tf_rmdir(&d);
}

static void test_cli_train_vocab_size_learns_bpe(void **state) {
    tf_dir d = tf_mkdir();
    write_text(tf_path(&d, "text.txt"), 100000);
    cu_result r = cu_run(&d, "train", TINY, "--data", "text.txt", "--vocab-size", "300",
                         "--steps", "3", "--out", "m.bin");
    cu_expect(&r, 0, "learned a BPE vocabulary of 300 tokens from text.txt", "train --vocab-size");
    assert_non_null(strstr(r.out, "vocabulary of 300"));
    cu_free(&r);
    vka_context *ctx = tu_cpu();
    vka_tokenizer *tok = load_tok(ctx, tf_path(&d, "m.tokenizer.bin"));
    assert_int_equal(vka_tokenizer_vocab_size(tok), 300);
    assert_int_equal(vka_tokenizer_kind_of(tok), VKA_TOKENIZER_BPE);
    vka_tokenizer_destroy(tok);
    tu_done(ctx);
    /* The model uses it: generate (any prompt byte is in a byte-level vocabulary) and eval. */
    r = cu_run(&d, "generate", "--backend", "cpu", "--model", "m.bin", "--prompt", "Once \xFF caf\xC3\xA9",
               "--tokens", "10", "--temperature", "0");
    cu_expect(&r, 0, NULL, "generate with a learned vocabulary");
    assert_true(r.out_len >= 11);
    assert_memory_equal(r.out, "Once \xFF caf\xC3\xA9", 11);
    cu_free(&r);
    r = cu_run(&d, "generate", "--backend", "cpu", "--model", "m.bin", "--tokens", "5");
    cu_expect(&r, 0, NULL, "generate from end-of-text");
    assert_false(strncmp(r.out, "<|endoftext|>", 13) == 0); /* the default prompt is not printed */
    cu_free(&r);
    r = cu_run(&d, "eval", "--backend", "cpu", "--model", "m.bin", "--data", "text.txt");
    cu_expect(&r, 0, NULL, "eval with a learned vocabulary");
    cu_free(&r);
    /* Resuming keeps the saved vocabulary; --vocab-size there is a usage error. */
    r = cu_run(&d, "train", "--backend", "cpu", "--resume", "m.state.bin", "--vocab-size", "400");
    cu_expect(&r, 2, "a resumed run uses the tokenizer saved with its state", "resume + vocab");
    cu_free(&r);
    tf_rmdir(&d);
}

static void test_cli_train_tokenizer_uses_gpt2(void **state) {
    tf_dir d = tf_mkdir();
    write_text(tf_path(&d, "text.txt"), 50000);
    cu_result r = cu_run(&d, "train", TINY, "--data", "text.txt", "--tokenizer", GPT2_FILE,
                         "--steps", "2", "--out", "g.bin");
    cu_expect(&r, 0, NULL, "train --tokenizer gpt2_tokenizer.bin");
    assert_non_null(strstr(r.out, "vocabulary of 50257"));
    cu_free(&r);
    size_t n1, n2;
    char *a = cu_slurp(GPT2_FILE, &n1), *b = cu_slurp(tf_path(&d, "g.tokenizer.bin"), &n2);
    assert_int_equal(n1, n2);
    assert_memory_equal(a, b, n1);
    free(a);
    free(b);
    r = cu_run(&d, "generate", "--backend", "cpu", "--model", "g.bin", "--prompt",
               "Hello \xF0\x9F\x98\x80 \xD0\x9C\xD0\xBE\xD1\x81\xD0\xBA\xD0\xB2\xD0\xB0", "--tokens",
               "8", "--temperature", "0");
    cu_expect(&r, 0, NULL, "generate with GPT-2's vocabulary");
    cu_free(&r);
    tf_rmdir(&d);
}

static void test_cli_vocabulary_errors(void **state) {
    tf_dir d = tf_mkdir();
    write_text(tf_path(&d, "text.txt"), 20000);
    cu_result r = cu_run(&d, "train", TINY, "--data", "text.txt", "--vocab-size", "256");
    cu_expect(&r, 2, "--vocab-size 256 is out of range (257 to", "vocab 256");
    cu_free(&r);
    r = cu_run(&d, "train", TINY, "--data", "text.txt", "--vocab-size", "300", "--tokenizer",
               GPT2_FILE);
    cu_expect(&r, 2, "not both", "vocab and tokenizer");
    cu_free(&r);
    r = cu_run(&d, "train", TINY, "--data", "text.txt", "--tokenizer", "missing.bin");
    cu_expect(&r, 1, "missing.bin", "missing tokenizer");
    cu_free(&r);
    r = cu_run(&d, "train", TINY, "--data", "text.txt", "--tokenizer", "text.txt");
    cu_expect(&r, 1, "text.txt is a text file, not a tokenizer file", "text as tokenizer");
    cu_free(&r);
    /* A model and a tokenizer of other sizes: both files and both sizes named, exit 1. */
    r = cu_run(&d, "train", TINY, "--data", "text.txt", "--vocab-size", "280", "--steps", "1",
               "--out", "m.bin");
    cu_expect(&r, 0, NULL, "train 280");
    cu_free(&r);
    const char *cmds[] = {"generate", "eval"};
    for (int i = 0; i < 2; i++) {
        r = i == 0 ? cu_run(&d, "generate", "--backend", "cpu", "--model", "m.bin", "--tokenizer",
                            GPT2_FILE)
                   : cu_run(&d, "eval", "--backend", "cpu", "--model", "m.bin", "--tokenizer",
                            GPT2_FILE, "--data", "text.txt");
        cu_expect(&r, 1, "gpt2_tokenizer.bin has 50257 tokens but the model m.bin has V = 280",
                  cmds[i]);
        cu_free(&r);
    }
    /* What --vocab-size cannot learn from: standard input (read once, by the data loader),
     * a token file (already tokenised); a glob learns from all the files it matches. */
    r = cu_run(&d, "train", TINY, "--data", "-", "--vocab-size", "300");
    cu_expect(&r, 2, "cannot learn from standard input", "vocab from stdin");
    cu_free(&r);
    r = cu_run(&d, "tokenize", "--tokenizer", GPT2_FILE, "--data", "text.txt", "--out",
               "text.tokens.bin");
    cu_expect(&r, 0, NULL, "tokenize");
    cu_free(&r);
    r = cu_run(&d, "train", TINY, "--data", "text.tokens.bin", "--vocab-size", "300");
    cu_expect(&r, 2, "text.tokens.bin is an llm.c token file", "vocab from a token file");
    cu_free(&r);
    r = cu_run(&d, "train", TINY, "--data", "tex?.txt", "--vocab-size", "300", "--steps", "1",
               "--out", "g.bin");
    cu_expect(&r, 0, "learned a BPE vocabulary of 300 tokens from tex?.txt", "vocab from a glob");
    cu_free(&r);
    /* Outputs that would replace what a run reads: tokenize's own tokenizer; the tokenizer and
     * the state beside --init's model. Refused, and the files are unchanged. */
    r = cu_run(&d, "tokenize", "--tokenizer", "m.tokenizer.bin", "--data", "text.txt", "--out",
               "m.tokenizer.bin");
    cu_expect(&r, 2, "is the tokenizer being read", "tokenize over its tokenizer");
    cu_free(&r);
    r = cu_run(&d, "train", "--backend", "cpu", "--steps", "1", "--init", "m.bin", "--data",
               "text.txt", "--out", "m.tokenizer.bin");
    cu_expect(&r, 2, "the tokenizer beside --init's model", "init over its tokenizer");
    cu_free(&r);
    r = cu_run(&d, "train", "--backend", "cpu", "--steps", "1", "--init", "m.bin", "--data",
               "text.txt", "--out", "m");
    cu_expect(&r, 2, "the training state beside --init's model", "init over its state");
    cu_free(&r);
    r = cu_run(&d, "eval", "--backend", "cpu", "--model", "m.bin", "--data", "text.txt");
    cu_expect(&r, 0, NULL, "m.bin and its tokenizer still load");
    cu_free(&r);
    /* A resumed run whose tokenizer was replaced or removed: the message names the tokenizer
     * file, not --data (which is right). */
    r = cu_run(&d, "train", TINY, "--data", "text.txt", "--vocab-size", "300", "--steps", "3",
               "--stop-at", "1", "--out", "rt.bin");
    cu_expect(&r, 0, NULL, "stop at 1");
    cu_free(&r);
    assert_int_equal(rename(tf_path(&d, "m.tokenizer.bin"), tf_path(&d, "rt.tokenizer.bin")), 0);
    r = cu_run(&d, "train", "--backend", "cpu", "--resume", "rt.state.bin", "--data", "text.txt");
    cu_expect(&r, 1, "its tokenizer rt.tokenizer.bin has 280: that file was replaced",
              "replaced tokenizer");
    cu_free(&r);
    assert_int_equal(remove(tf_path(&d, "rt.tokenizer.bin")), 0);
    r = cu_run(&d, "train", "--backend", "cpu", "--resume", "rt.state.bin", "--data", "text.txt");
    cu_expect(&r, 1, "its tokenizer rt.tokenizer.bin is missing", "missing tokenizer");
    cu_free(&r);
    /* The learned text too small for the size asked: fewer tokens, said on stderr. */
    char small[1024] = "";
    for (int i = 0; i < 20; i++) strcat(small, "the cat sat on the mat\n");
    tf_write(tf_path(&d, "small.txt"), small, strlen(small));
    r = cu_run(&d, "train", TINY, "--ctx", "2", "--data", "small.txt", "--vocab-size", "1000",
               "--steps", "1", "--out", "s.bin");
    cu_expect(&r, 0, "fewer than --vocab-size 1000", "small text");
    cu_free(&r);
    tf_rmdir(&d);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cli_tokenize_gpt2_gives_the_ids_of_the_whole_text),
        cmocka_unit_test(test_cli_train_vocab_size_learns_bpe),
        cmocka_unit_test(test_cli_train_tokenizer_uses_gpt2),
        cmocka_unit_test(test_cli_vocabulary_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
