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

static int learn_vocabulary(train_run *r) {
    const train_opts *o = r->o;
    const char *name = o->data ? o->data : "the built-in corpus";
    size_t len = 0;
    char *text = read_text(o->data, &len);
    if (!text) return CLI_ERROR;
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
