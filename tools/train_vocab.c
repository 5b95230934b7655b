/* vkattn train's vocabulary: learned from the training text (--vocab-size N, byte-level BPE) or
 * read from a file (--tokenizer FILE); without either, the data loader builds a character-level
 * one from the text. */
#include "train.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* The whole text --data names (or the built-in corpus), for learning; prints why not. */
static char *read_text(const char *path, size_t *len) {
    if (!path) return vka_builtin_corpus(0, len);
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "vkattn train: cannot open %s: %s\n", path, strerror(errno));
        return NULL;
    }
    size_t cap = 1 << 20, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        n += fread(buf + n, 1, cap - n, f);
        if (n < cap) break;
        char *more = realloc(buf, cap * 2);
        if (!more) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = more;
        cap *= 2;
    }
    bool failed = ferror(f);
    fclose(f);
    if (!buf || failed) {
        fprintf(stderr, "vkattn train: cannot read %s: %s\n", path,
                buf ? "read error" : "out of memory");
        free(buf);
        return NULL;
    }
    *len = n;
    return buf;
}

/* Append the text of path to *text (*len bytes so far); a token file is a usage error. */
static int append_text(const char *path, char **text, size_t *len) {
    size_t n = 0;
    char *more = read_text(path, &n);
    if (!more) return CLI_ERROR;
    int32_t magic = 0;
    if (n >= 4) memcpy(&magic, more, 4);
    if (magic == VKA_TOKENS_MAGIC) {
        free(more);
        return cli_usage_error("train", "--vocab-size learns from text, but %s is an llm.c token "
                               "file (already tokenised): give its tokenizer with --tokenizer",
                               path);
    }
    char *all = realloc(*text, *len + n + 1);
    if (!all) {
        free(more);
        fprintf(stderr, "vkattn train: out of memory reading %s\n", path);
        return CLI_ERROR;
    }
    memcpy(all + *len, more, n);
    free(more);
    *text = all;
    *len += n;
    return CLI_OK;
}

/* The text --vocab-size learns from: the files --data names (a glob: all of them, in order),
 * or the built-in corpus. Standard input is refused: the data loader reads it after this. */
static int learning_text(const train_opts *o, char **text, size_t *len) {
    *text = NULL;
    *len = 0;
    if (!o->data) {
        *text = vka_builtin_corpus(0, len);
        return *text ? CLI_OK : CLI_ERROR;
    }
    if (strcmp(o->data, "-") == 0)
        return cli_usage_error("train", "--vocab-size cannot learn from standard input (--data -), "
                               "which is read only once: save the text to a file, or learn the "
                               "vocabulary in a run on a file and pass it with --tokenizer");
    char **paths = NULL;
    int n = 0;
    int rc = cli_data_paths("train", "--data", o->data, &paths, &n);
    for (int i = 0; i < n && rc == CLI_OK; i++) rc = append_text(paths[i], text, len);
    cli_free_paths(paths, n);
    if (rc != CLI_OK) {
        free(*text);
        *text = NULL;
    }
    return rc;
}

static int learn_vocabulary(train_run *r) {
    const train_opts *o = r->o;
    const char *name = o->data ? o->data : "the built-in corpus";
    size_t len = 0;
    char *text = NULL;
    int rc = learning_text(o, &text, &len);
    if (rc != CLI_OK) return rc;
    if (len == 0) {
        free(text);
        fprintf(stderr, "vkattn train: %s is empty\n", name);
        return CLI_ERROR;
    }
    double t0 = cli_now();
    vka_result res = vka_tokenizer_learn(r->ctx, text, len, o->vocab_size, &r->tok);
    double s = cli_now() - t0;
    free(text);
    if (res != VKA_SUCCESS) return cli_fail("train", r->ctx, res, "--vocab-size");
    int V = vka_tokenizer_vocab_size(r->tok);
    fprintf(stderr, "vkattn train: learned a BPE vocabulary of %d tokens from %s (%zu bytes) in "
            "%.2f s\n", V, name, len, s);
    if (V < o->vocab_size)
        fprintf(stderr, "vkattn train: note: only %d tokens, fewer than --vocab-size %d: no two "
                "adjacent tokens occur together twice any more in %s\n", V, o->vocab_size, name);
    return CLI_OK;
}

int train_vocabulary(train_run *r) {
    const train_opts *o = r->o;
    if (o->resume) return CLI_OK; /* the tokenizer saved with the state (cmd_train.c) */
    if (o->vocab_size) return learn_vocabulary(r);
    if (!o->tokenizer) return CLI_OK;
    vka_result res = vka_tokenizer_load(r->ctx, o->tokenizer, &r->tok);
    if (res != VKA_SUCCESS)
        return cli_fail_load("train", r->ctx, res, "tokenizer", o->tokenizer, CLI_FILE_TOKENIZER);
    return CLI_OK;
}
