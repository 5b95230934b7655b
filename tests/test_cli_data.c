/*
 * Data at scale through the command line (the built binary, VKA_CLI_PATH, in a fresh
 * directory): `vkattn tokenize` from a file and from standard input, train on a token file
 * equal to train on its text, eval in chunks equal to one pass, bits per byte, and
 * `train --init` (on the CPU backend and on Vulkan). Small models on a slice of Tiny
 * Shakespeare (the built-in corpus when it is missing).
 */
#define _POSIX_C_SOURCE 200809L
#include "cli_util.h"
#include "gpt_util.h"

#include <sys/stat.h>

enum { CLI_USAGE_STATUS = 2 };

#define SMALL "--layers", "2", "--heads", "2", "--embd", "32", "--ctx", "32", "--batch", "8"

/* 60 kB of text in d/a.txt and its character tokenizer in d/a.tok.bin. */
static void write_text_and_tokenizer(const tf_dir *d) {
    const char *path = tu_shared_data_path("tinyshakespeare.txt");
    size_t len = 0;
    char *text = NULL;
    if (access(path, R_OK) == 0) {
        unsigned char *all = tf_read(path, &len);
        text = (char *)all;
    } else {
        text = vka_builtin_corpus(60000, &len);
    }
    if (len > 60000) len = 60000;
    tf_write(tf_path(d, "a.txt"), text, len);
    vka_context *ctx = tu_cpu();
    vka_tokenizer *tok = NULL;
    assert_int_equal(vka_tokenizer_create_from_text(ctx, text, len, &tok), VKA_SUCCESS);
    assert_int_equal(vka_tokenizer_save(tok, tf_path(d, "a.tok.bin")), VKA_SUCCESS);
    vka_tokenizer_destroy(tok);
    tu_done(ctx);
    free(text);
}

/* The "loss" of every step line of a --json run, as printed. */
static int step_losses(const char *out, char losses[][32], int cap) {
    int n = 0;
    char line[1024];
    while (n < cap && cu_line(out, "{\"step\":", n, line, sizeof line)) {
        const char *p = strstr(line, "\"loss\":");
        assert_non_null(p);
        snprintf(losses[n], 32, "%.*s", (int)strcspn(p + 7, ","), p + 7);
        n++;
    }
    return n;
}

static void test_cli_tokenize_file_and_stdin(void **state) {
    (void)state;
    tf_dir d = tf_mkdir();
    write_text_and_tokenizer(&d);
    cu_result r = cu_run(&d, "tokenize", "--tokenizer", "a.tok.bin", "--data", "a.txt", "--out",
                         "a.bin", "--json");
    cu_expect(&r, 0, NULL, "tokenize a.txt");
    size_t len = 0;
    free(tf_read(tf_path(&d, "a.txt"), &len));
    assert_true(cu_json_num(r.out, "tokens") == (double)len); /* one token per byte */
    assert_true(cu_json_num(r.out, "bytes") == (double)len);
    cu_free(&r);
    /* Standard input through a pipe (a FIFO written by this process). */
    const char *fifo = tf_path(&d, "in.fifo");
    assert_int_equal(mkfifo(fifo, 0600), 0);
    cu_spec spec = {.dir = &d, .stdin_path = fifo};
    pid_t pid = cu_start(&spec, CU_ARGS("tokenize", "--tokenizer", "a.tok.bin", "--data", "-",
                                        "--out", "b.bin"));
    size_t n = 0;
    unsigned char *text = tf_read(tf_path(&d, "a.txt"), &n);
    FILE *w = fopen(fifo, "wb");
    assert_non_null(w);
    assert_int_equal(fwrite(text, 1, n, w), n);
    fclose(w);
    free(text);
    r = cu_wait(&spec, pid);
    cu_expect(&r, 0, NULL, "tokenize -");
    assert_non_null(strstr(r.out, "wrote"));
    cu_free(&r);
    size_t na = 0, nb = 0;
    unsigned char *a = tf_read(tf_path(&d, "a.bin"), &na), *b = tf_read(tf_path(&d, "b.bin"), &nb);
    assert_int_equal(na, nb);
    assert_int_equal(na, 1024 + 2 * len);
    assert_memory_equal(a, b, na);
    free(a);
    free(b);
    /* Bad input: a usage error, a NUL byte (nothing written), a missing tokenizer. */
    r = cu_run(&d, "tokenize", "--data", "a.txt", "--out", "c.bin");
    cu_expect(&r, CLI_USAGE_STATUS, "--tokenizer FILE is required", "no tokenizer");
    cu_free(&r);
    tf_write(tf_path(&d, "nul.txt"), "abc\0def", 7);
    r = cu_run(&d, "tokenize", "--tokenizer", "a.tok.bin", "--data", "nul.txt", "--out", "c.bin");
    cu_expect(&r, 1, "nul.txt is not a text file: NUL byte at offset 3", "NUL byte");
    cu_free(&r);
    /* A pattern is for train and eval, said as such. */
    r = cu_run(&d, "tokenize", "--tokenizer", "a.tok.bin", "--data", "*.txtx", "--out", "c.bin");
    cu_expect(&r, CLI_USAGE_STATUS, "patterns are for train and eval", "pattern");
    cu_free(&r);
    /* A token file given as the text is named for what it is. */
    r = cu_run(&d, "tokenize", "--tokenizer", "a.tok.bin", "--data", "a.bin", "--out", "c.bin");
    cu_expect(&r, 1, "a.bin is an llm.c token file (already tokenized), not text", "token file");
    cu_free(&r);
    r = cu_run(&d, "tokenize", "--tokenizer", "missing.bin", "--data", "a.txt", "--out", "c.bin");
    cu_expect(&r, 1, "missing.bin", "missing tokenizer");
    cu_free(&r);
    assert_int_equal(tf_count(&d, "c.bin"), 0);
    /* Standard input twice (--data - --val-data -): a usage error before anything is read. */
    r = cu_run(&d, "train", "--backend", "cpu", "--data", "-", "--val-data", "-", "--steps", "1");
    cu_expect(&r, CLI_USAGE_STATUS, "standard input can be read only once", "stdin twice");
    cu_free(&r);
    tf_rmdir(&d);
}

/* The same tokens from a text or from its token file: the same batches, the same losses. */
static void test_cli_train_on_text_and_token_file_agree(void **state) {
    (void)state;
    tf_dir d = tf_mkdir();
    write_text_and_tokenizer(&d);
    cu_result r = cu_run(&d, "tokenize", "--tokenizer", "a.tok.bin", "--data", "a.txt", "--out",
                         "a.bin");
    cu_expect(&r, 0, NULL, "tokenize");
    cu_free(&r);
    cu_result t = cu_run(&d, "train", "--backend", "cpu", SMALL, "--steps", "6", "--eval-every",
                         "3", "--eval-windows", "5", "--data", "a.txt", "--out", "t.bin", "--json");
    cu_expect(&t, 0, NULL, "train on text");
    cu_result k = cu_run(&d, "train", "--backend", "cpu", SMALL, "--steps", "6", "--eval-every",
                         "3", "--eval-windows", "5", "--data", "a.bin", "--tokenizer",
                         "a.tok.bin", "--out", "k.bin", "--json");
    cu_expect(&k, 0, NULL, "train on the token file");
    char lt[8][32], lk[8][32];
    int nt = step_losses(t.out, lt, 8), nk = step_losses(k.out, lk, 8);
    assert_int_equal(nt, 6);
    assert_int_equal(nk, 6);
    for (int i = 0; i < 6; i++) {
        print_message("step %d: text %s, tokens %s\n", i + 1, lt[i], lk[i]);
        assert_string_equal(lt[i], lk[i]);
    }
    char vt[1024], vk[1024];
    assert_true(cu_line(t.out, "\"val_loss\"", 0, vt, sizeof vt));
    assert_true(cu_line(k.out, "\"val_loss\"", 0, vk, sizeof vk));
    assert_true(cu_json_num(vt, "val_loss") == cu_json_num(vk, "val_loss"));
    double bpb = cu_json_num(vt, "bits_per_byte");
    /* character tokens are one byte each: bits per byte = nats per token / ln 2 (of the
     * unrounded mean; val_loss is rounded to float32) */
    assert_true(fabs(bpb - cu_json_num(vt, "val_loss") / log(2.0)) < 1e-5);
    cu_free(&t);
    cu_free(&k);
    /* A token file without a tokenizer cannot say what its ids are. */
    r = cu_run(&d, "train", "--backend", "cpu", SMALL, "--steps", "1", "--data", "a.bin",
               "--out", "x.bin");
    cu_expect(&r, 1, "a.bin is a token file: give the tokenizer", "no tokenizer");
    cu_free(&r);
    tf_rmdir(&d);
}

/* eval reads and scores a chunk of windows at a time: any chunk size gives the loss of one
 * vka_gpt_eval over all tokens; bits per byte is the hand computation. */
static void test_cli_eval_in_chunks_and_bits_per_byte(void **state) {
    (void)state;
    tf_dir d = tf_mkdir();
    write_text_and_tokenizer(&d);
    cu_result r = cu_run(&d, "train", "--backend", "cpu", SMALL, "--steps", "20", "--eval-windows",
                         "2", "--data", "a.txt", "--out", "m.bin", "--quiet");
    cu_expect(&r, 0, NULL, "train");
    cu_free(&r);
    r = cu_run(&d, "tokenize", "--tokenizer", "m.tokenizer.bin", "--data", "a.txt", "--out",
               "a.bin");
    cu_expect(&r, 0, NULL, "tokenize");
    cu_free(&r);
    cu_result one = cu_run(&d, "eval", "--backend", "cpu", "--model", "m.bin", "--data", "a.txt",
                           "--json");
    cu_expect(&one, 0, NULL, "eval");
    cu_spec small = {.dir = &d, .env = {"VKATTN_EVAL_CHUNK=97"}};
    cu_result chunked = cu_run_spec(&small, CU_ARGS("eval", "--backend", "cpu", "--model", "m.bin",
                                                    "--data", "a.bin", "--json"));
    cu_expect(&chunked, 0, NULL, "eval in chunks of 3 windows, of the token file");
    double l1 = cu_json_num(one.out, "loss"), l2 = cu_json_num(chunked.out, "loss");
    assert_true(cu_json_num(one.out, "windows") == cu_json_num(chunked.out, "windows"));
    /* the library's one pass over every token */
    vka_context *ctx = tu_cpu();
    vka_gpt *gpt = NULL;
    vka_tokenizer *tok = NULL;
    vka_data *data = NULL;
    assert_int_equal(vka_gpt_load(ctx, tf_path(&d, "m.bin"), &gpt), VKA_SUCCESS);
    assert_int_equal(vka_tokenizer_load(ctx, tf_path(&d, "m.tokenizer.bin"), &tok), VKA_SUCCESS);
    assert_int_equal(vka_data_load(ctx, tf_path(&d, "a.txt"), tok, &data), VKA_SUCCESS);
    size_t n = vka_data_num_tokens(data, VKA_SPLIT_ALL);
    int32_t *all = malloc(n * sizeof *all);
    assert_int_equal(vka_data_read_tokens(data, VKA_SPLIT_ALL, 0, n, all), VKA_SUCCESS);
    double lib = 0;
    size_t windows = 0;
    assert_int_equal(vka_gpt_eval(gpt, all, n, 32, &lib, &windows), VKA_SUCCESS);
    print_message("loss: one chunk %.12g, chunks of 97 tokens %.12g, vka_gpt_eval %.12g\n", l1,
                  l2, lib);
    assert_true(fabs(l1 - lib) <= 1e-8 * lib && fabs(l2 - lib) <= 1e-8 * lib);
    assert_true(cu_json_num(one.out, "windows") == (double)windows);
    /* bits per byte by hand: nats over the scored targets / (ln 2 * their decoded bytes) */
    uint64_t bytes = 0;
    for (size_t w = 0; w < windows; w++)
        for (size_t t = 1; t <= 32; t++) {
            size_t k = 0;
            vka_tokenizer_decode(tok, all[w * 32 + t], &k);
            bytes += k;
        }
    double want = lib * (double)(windows * 32) / (log(2.0) * (double)bytes);
    double bpb1 = cu_json_num(one.out, "bits_per_byte"), bpb2 = cu_json_num(chunked.out, "bits_per_byte");
    print_message("bits per byte %.9g and %.9g, by hand %.9g\n", bpb1, bpb2, want);
    assert_true(fabs(bpb1 - want) < 1e-6 && fabs(bpb2 - want) < 1e-6);
    assert_true(cu_json_num(one.out, "bytes") == (double)bytes);
    free(all);
    vka_data_destroy(data);
    vka_tokenizer_destroy(tok);
    vka_gpt_destroy(gpt);
    tu_done(ctx);
    /* a chunk size that is not a positive number is refused (usage), not replaced; digits
     * only, as the library's variables (" 1" and "+1" too) */
    const char *bad[] = {"VKATTN_EVAL_CHUNK=abc", "VKATTN_EVAL_CHUNK=0", "VKATTN_EVAL_CHUNK=-5",
                         "VKATTN_EVAL_CHUNK=99999999999999999999", "VKATTN_EVAL_CHUNK= 1",
                         "VKATTN_EVAL_CHUNK=+1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cu_spec spec = {.dir = &d, .env = {bad[i]}};
        cu_result b = cu_run_spec(&spec, CU_ARGS("eval", "--backend", "cpu", "--model", "m.bin",
                                                 "--data", "a.bin", "--json"));
        cu_expect(&b, 2, "is not a positive number of tokens", bad[i]);
        cu_free(&b);
    }
    cu_free(&one);
    cu_free(&chunked);
    tf_rmdir(&d);
}

/* train --init: the first step's loss is the saved model's, not ln V; on each backend. */
static void init_on(const char *backend) {
    tf_dir d = tf_mkdir();
    write_text_and_tokenizer(&d);
    cu_result r = cu_run(&d, "train", "--backend", "cpu", SMALL, "--steps", "150", "--lr", "3e-3",
                         "--eval-windows", "2", "--data", "a.txt", "--out", "m.bin", "--quiet");
    cu_expect(&r, 0, NULL, "train");
    cu_free(&r);
    r = cu_run(&d, "eval", "--backend", "cpu", "--model", "m.bin", "--data", "a.txt", "--json");
    cu_expect(&r, 0, NULL, "eval");
    double loss = cu_json_num(r.out, "loss");
    cu_free(&r);
    r = cu_run(&d, "train", "--backend", backend, "--init", "m.bin", "--steps", "2", "--batch",
               "16", "--data", "a.txt", "--out", "f.bin", "--json", "--eval-windows", "4");
    cu_expect(&r, 0, NULL, "train --init");
    char line[1024];
    assert_true(cu_line(r.out, "{\"step\":1,", 0, line, sizeof line));
    double first = cu_json_num(line, "loss"), lnV = log(65.0);
    vka_context *ctx = tu_cpu();
    vka_tokenizer *tok = NULL;
    assert_int_equal(vka_tokenizer_load(ctx, tf_path(&d, "m.tokenizer.bin"), &tok), VKA_SUCCESS);
    lnV = log((double)vka_tokenizer_vocab_size(tok));
    vka_tokenizer_destroy(tok);
    tu_done(ctx);
    print_message("%s: model's eval loss %.4f, first --init step %.4f, ln V %.4f\n", backend, loss,
                  first, lnV);
    assert_true(fabs(first - loss) < 0.3);
    assert_true(first < lnV - 0.5);
    assert_true(strstr(r.out, "\"first_step\":1") != NULL); /* step 0, a new run */
    cu_free(&r);
    tf_rmdir(&d);
}

static void test_cli_init_cpu(void **state) {
    (void)state;
    init_on("cpu");
}

static void test_cli_init_vulkan(void **state) {
    (void)state;
    tu_done(tm_gpu()); /* skips without a Vulkan device that runs the model */
    init_on("vulkan");
}

/* --init refuses what does not fit, naming the files: another shape, a bf16 file, a
 * tokenizer of another size, together with --resume. Nothing is written. */
static void test_cli_init_errors(void **state) {
    (void)state;
    tf_dir d = tf_mkdir();
    write_text_and_tokenizer(&d);
    cu_result r = cu_run(&d, "train", "--backend", "cpu", SMALL, "--steps", "2", "--eval-windows",
                         "1", "--data", "a.txt", "--out", "m.bin", "--quiet");
    cu_expect(&r, 0, NULL, "train");
    cu_free(&r);
    r = cu_run(&d, "train", "--backend", "cpu", "--init", "m.bin", "--layers", "3", "--data",
               "a.txt", "--out", "f.bin");
    cu_expect(&r, CLI_USAGE_STATUS, "--layers 3 differs from the 2 layers of m.bin", "--layers");
    cu_free(&r);
    r = cu_run(&d, "train", "--backend", "cpu", "--init", "m.bin", "--ctx", "64", "--data",
               "a.txt", "--out", "f.bin");
    cu_expect(&r, CLI_USAGE_STATUS, "--ctx 64 is longer than the context of m.bin", "--ctx");
    cu_free(&r);
    r = cu_run(&d, "train", "--backend", "cpu", "--init", "m.bin", "--resume", "m.state.bin",
               "--data", "a.txt");
    cu_expect(&r, CLI_USAGE_STATUS, "exclude each other", "--resume");
    cu_free(&r);
    /* a tokenizer of 3 tokens for a model of V = 65 (or whatever the text has) */
    vka_context *ctx = tu_cpu();
    vka_tokenizer *tok = NULL;
    assert_int_equal(vka_tokenizer_create_from_text(ctx, "ab\n", 3, &tok), VKA_SUCCESS);
    assert_int_equal(vka_tokenizer_save(tok, tf_path(&d, "small.tok.bin")), VKA_SUCCESS);
    vka_tokenizer_destroy(tok);
    tu_done(ctx);
    char ab[201];
    for (int i = 0; i < 200; i++) ab[i] = "abba\nbaab\n"[i % 10];
    tf_write(tf_path(&d, "ab.txt"), ab, 200);
    r = cu_run(&d, "train", "--backend", "cpu", "--init", "m.bin", "--tokenizer", "small.tok.bin",
               "--ctx", "4", "--data", "ab.txt", "--out", "f.bin");
    cu_expect(&r, 1, "small.tok.bin has 3 tokens but the model m.bin (--init) has V = ",
              "tokenizer size");
    cu_free(&r);
    /* --out over the --init model would lose it */
    r = cu_run(&d, "train", "--backend", "cpu", "--init", "m.bin", "--data", "a.txt", "--out",
               "m.bin");
    cu_expect(&r, CLI_USAGE_STATUS, "the model the run starts from (--init)", "--out = --init");
    cu_free(&r);
    assert_int_equal(tf_count(&d, "f."), 0);
    tf_rmdir(&d);
}

/* train --save-precision bf16 writes llm.c's bf16 model file (version 5) beside a float32
 * state; eval, generate and train --init take it; the resume command keeps the option. */
static void test_cli_bf16_model_file(void **state) {
    (void)state;
    tf_dir d = tf_mkdir();
    write_text_and_tokenizer(&d);
    cu_result r = cu_run(&d, "train", "--backend", "cpu", SMALL, "--steps", "20", "--stop-at",
                         "10", "--eval-windows", "2", "--data", "a.txt", "--out", "m.bin",
                         "--save-precision", "bf16");
    cu_expect(&r, 0, NULL, "train --save-precision bf16");
    assert_non_null(strstr(r.out, "--save-precision bf16")); /* in the --resume command */
    cu_free(&r);
    vka_context *ctx = tu_cpu();
    vka_gpt *master = NULL, *m16 = NULL;
    vka_train_state st;
    assert_int_equal(vka_gpt_load_state(ctx, tf_path(&d, "m.state.bin"), &master, &st),
                     VKA_SUCCESS);
    assert_int_equal(vka_gpt_load(ctx, tf_path(&d, "m.bin"), &m16), VKA_SUCCESS);
    size_t n = vka_gpt_num_params(master), size = 0;
    unsigned char *file = tf_read(tf_path(&d, "m.bin"), &size);
    assert_int_equal(size, 1024 + 2 * n);
    assert_int_equal(((int32_t *)file)[1], 5);
    free(file);
    free(tf_read(tf_path(&d, "m.state.bin"), &size));
    assert_int_equal(size, 1024 + 3 * 4 * n); /* the state keeps float32 master weights */
    float *p = malloc(n * 4), *q = malloc(n * 4), *want = malloc(n * 4);
    uint16_t *w = malloc(n * 2);
    assert_int_equal(vka_gpt_get_params(master, p, n), VKA_SUCCESS);
    assert_int_equal(vka_gpt_get_params(m16, q, n), VKA_SUCCESS);
    assert_int_equal(vka_convert(VKA_BF16, w, VKA_F32, p, n), VKA_SUCCESS);
    assert_int_equal(vka_convert(VKA_F32, want, VKA_BF16, w, n), VKA_SUCCESS);
    assert_memory_equal(q, want, n * 4);
    assert_int_equal(vka_gpt_save(master, tf_path(&d, "m32.bin")), VKA_SUCCESS);
    free(p);
    free(q);
    free(want);
    free(w);
    vka_gpt_destroy(master);
    vka_gpt_destroy(m16);
    tu_done(ctx);
    /* eval: the bf16 file scores within 1% of its float32 master weights */
    cu_result e16 = cu_run(&d, "eval", "--backend", "cpu", "--model", "m.bin", "--data", "a.txt",
                           "--tokenizer", "m.tokenizer.bin", "--json");
    cu_expect(&e16, 0, NULL, "eval of the bf16 file");
    cu_result e32 = cu_run(&d, "eval", "--backend", "cpu", "--model", "m32.bin", "--data",
                           "a.txt", "--tokenizer", "m.tokenizer.bin", "--json");
    cu_expect(&e32, 0, NULL, "eval of the float32 weights");
    double l16 = cu_json_num(e16.out, "loss"), l32 = cu_json_num(e32.out, "loss");
    print_message("eval loss: bf16 file %.6f, float32 %.6f\n", l16, l32);
    assert_true(l16 != l32 && fabs(l16 - l32) < 1e-2 * l32);
    cu_free(&e16);
    cu_free(&e32);
    r = cu_run(&d, "generate", "--backend", "cpu", "--model", "m.bin", "--tokens", "20",
               "--prompt", "ROMEO:");
    cu_expect(&r, 0, NULL, "generate from the bf16 file");
    assert_true(strncmp(r.out, "ROMEO:", 6) == 0 && strlen(r.out) > 6);
    cu_free(&r);
    r = cu_run(&d, "train", "--backend", "cpu", "--init", "m.bin", "--steps", "2", "--batch",
               "4", "--data", "a.txt", "--out", "f.bin", "--eval-windows", "2", "--quiet");
    cu_expect(&r, 0, NULL, "train --init from the bf16 file");
    cu_free(&r);
    free(tf_read(tf_path(&d, "f.bin"), &size));
    assert_int_equal(size, 1024 + 4 * n); /* float32 unless asked */
    r = cu_run(&d, "train", "--backend", "cpu", SMALL, "--steps", "2", "--data", "a.txt", "--out",
               "g.bin", "--save-precision", "fp16");
    cu_expect(&r, CLI_USAGE_STATUS, "--save-precision fp16", "use bf16");
    cu_free(&r);
    r = cu_run(&d, "train", "--backend", "cpu", SMALL, "--steps", "2", "--data", "a.txt", "--out",
               "g.bin", "--save-precision", "int8");
    cu_expect(&r, CLI_USAGE_STATUS, "int8", "--save-precision");
    cu_free(&r);
    assert_int_equal(tf_count(&d, "g."), 0);
    tf_rmdir(&d);
}

/* train --precision bf16 (mixed precision): the start line says so, a run stopped and resumed
 * without --precision continues in bf16 bit for bit; --precision fp32 on resume is allowed with
 * a notice; eval and generate take it; fp16 trains, its start line saying so, with loss
 * scaling in its JSON; junk is a usage error. */
static void test_cli_precision_bf16(void **state) {
    (void)state;
    tf_dir d = tf_mkdir();
    write_text_and_tokenizer(&d);
#define RUN16(...) cu_run(&d, "train", "--backend", "cpu", SMALL, "--steps", "8", "--eval-every", \
                          "4", "--eval-windows", "2", "--data", "a.txt", "--json", __VA_ARGS__)
    cu_result full = RUN16("--out", "a.bin", "--precision", "bf16");
    cu_expect(&full, 0, NULL, "train --precision bf16");
    assert_non_null(strstr(full.out, "\"precision\":\"bf16\""));
    cu_result f32 = RUN16("--out", "c.bin");
    cu_expect(&f32, 0, NULL, "train in fp32");
    assert_non_null(strstr(f32.out, "\"precision\":\"fp32\""));
    char a[256], b[256], c[256];
    assert_true(cu_line(full.out, "\"step\":8,", 0, a, sizeof a));
    assert_true(cu_line(f32.out, "\"step\":8,", 0, c, sizeof c));
    assert_true(cu_json_num(a, "loss") != cu_json_num(c, "loss")); /* bf16 and fp32 differ */
    cu_result half = RUN16("--out", "b.bin", "--precision", "bf16", "--stop-at", "4");
    cu_expect(&half, 0, NULL, "train --precision bf16 --stop-at 4");
    cu_result rest = cu_run(&d, "train", "--resume", "b.state.bin", "--data", "a.txt", "--json");
    cu_expect(&rest, 0, NULL, "resume in bf16");
    assert_non_null(strstr(rest.out, "\"precision\":\"bf16\""));
    assert_true(cu_line(rest.out, "\"step\":8,", 0, b, sizeof b));
    static const char *const keys[] = {"loss", "grad_norm", "val_loss"};
    for (int k = 0; k < 3; k++) /* bit for bit: the printed digits round-trip float32 */
        assert_true(cu_json_num(a, keys[k]) == cu_json_num(b, keys[k]));
    cu_free(&half);
    cu_free(&rest);
    cu_free(&f32);
    cu_free(&full);
    half = RUN16("--out", "e.bin", "--precision", "bf16", "--stop-at", "4");
    cu_expect(&half, 0, NULL, "train --precision bf16 --stop-at 4");
    rest = cu_run(&d, "train", "--resume", "e.state.bin", "--data", "a.txt", "--precision", "fp32");
    cu_expect(&rest, 0, "trained in bf16 and continues in fp32", "resume in another precision");
    cu_free(&half);
    cu_free(&rest);
    cu_result r = cu_run(&d, "eval", "--backend", "cpu", "--model", "a.bin", "--data", "a.txt",
                         "--precision", "bf16", "--json");
    cu_expect(&r, 0, NULL, "eval --precision bf16");
    assert_true(cu_json_num(r.out, "loss") > 0);
    cu_free(&r);
    r = cu_run(&d, "generate", "--backend", "cpu", "--model", "a.bin", "--tokens", "10",
               "--precision", "bf16", "--prompt", "RO");
    cu_expect(&r, 0, NULL, "generate --precision bf16");
    cu_free(&r);
    r = RUN16("--out", "h.bin", "--precision", "fp16");
    cu_expect(&r, 0, NULL, "train --precision fp16");
    assert_non_null(strstr(r.out, "\"precision\":\"fp16\""));
    assert_non_null(strstr(r.out, "\"loss_scale\":65536"));
    cu_free(&r);
    r = RUN16("--out", "g.bin", "--precision", "int4");
    cu_expect(&r, CLI_USAGE_STATUS, "int4", "--precision");
    cu_free(&r);
    assert_int_equal(tf_count(&d, "g."), 0);
#undef RUN16
    tf_rmdir(&d);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cli_precision_bf16),
        cmocka_unit_test(test_cli_tokenize_file_and_stdin),
        cmocka_unit_test(test_cli_train_on_text_and_token_file_agree),
        cmocka_unit_test(test_cli_eval_in_chunks_and_bits_per_byte),
        cmocka_unit_test(test_cli_init_cpu),
        cmocka_unit_test(test_cli_init_vulkan),
        cmocka_unit_test(test_cli_init_errors),
        cmocka_unit_test(test_cli_bf16_model_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
