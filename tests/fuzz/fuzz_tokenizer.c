/* libFuzzer target: vka_tokenizer_load, both kinds of llm.c's tokenizer file (character level
 * and byte-level BPE). A tokenizer that loads must: have 1..VKA_TOKENIZER_MAX_VOCAB tokens of
 * 1..255 bytes and an end-of-text id among them; for BPE, hold every single byte; survive save
 * and load unchanged; and encode text (a fixed sample and the input's own bytes) into ids below
 * V that decode back to the text (BPE; character level where every byte is in the vocabulary). */
#include "fuzz_util.h"

#define ENCODE_MAX 4096

static fz_file in;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    fz_init();
    fz_file_open(&in, "tokenizer.bin");
    return 0;
}

/* Encode len bytes; when that succeeds the ids are in range and decode to the text. */
static void check_encode(const vka_tokenizer *tok, const char *text, size_t len) {
    int32_t *ids = malloc((len ? len : 1) * sizeof *ids);
    char *back = malloc(len ? len : 1);
    fz_require(ids && back, "out of memory");
    size_t n = 0;
    vka_result r = vka_tokenizer_encode(tok, text, len, ids, &n);
    if (vka_tokenizer_kind_of(tok) == VKA_TOKENIZER_BPE)
        fz_require(r == VKA_SUCCESS, "BPE encode failed: %s", vka_last_error(fz_ctx));
    if (r == VKA_SUCCESS) {
        fz_require(n <= len, "%zu tokens from %zu bytes", n, len);
        size_t at = 0;
        for (size_t i = 0; i < n; i++) {
            size_t k = 0;
            const char *s = vka_tokenizer_decode(tok, ids[i], &k);
            fz_require(s != NULL && k >= 1, "id %d (token %zu) does not decode", ids[i], i);
            fz_require(at + k <= len, "decoded past the text");
            memcpy(back + at, s, k);
            at += k;
        }
        fz_require(at == len && memcmp(back, text, len) == 0, "decode(encode(x)) != x");
    } else {
        fz_require(r == VKA_ERROR_VOCABULARY, "encode: %s", vka_result_string(r));
    }
    free(ids);
    free(back);
}

static void check_same(const vka_tokenizer *a, const vka_tokenizer *b) {
    int V = vka_tokenizer_vocab_size(a);
    fz_require(V == vka_tokenizer_vocab_size(b), "V changed by save and load");
    fz_require(vka_tokenizer_kind_of(a) == vka_tokenizer_kind_of(b), "kind changed");
    fz_require(vka_tokenizer_eot(a) == vka_tokenizer_eot(b), "eot changed");
    for (int i = 0; i < V; i++) {
        size_t ka, kb;
        const char *sa = vka_tokenizer_decode(a, i, &ka), *sb = vka_tokenizer_decode(b, i, &kb);
        fz_require(ka == kb && memcmp(sa, sb, ka) == 0, "token %d changed", i);
    }
}

static void check_loaded(const vka_tokenizer *tok, const uint8_t *data, size_t size) {
    int V = vka_tokenizer_vocab_size(tok);
    fz_require(V >= 1 && V <= VKA_TOKENIZER_MAX_VOCAB, "V = %d", V);
    int eot = vka_tokenizer_eot(tok);
    fz_require(eot >= 0 && eot < V, "eot %d of %d", eot, V);
    bool single[256] = {false};
    for (int i = 0; i < V; i++) {
        size_t k = 0;
        const char *s = vka_tokenizer_decode(tok, i, &k);
        fz_require(s && k >= 1 && k <= VKA_TOKENIZER_MAX_TOKEN_BYTES, "token %d: %zu bytes", i, k);
        if (k == 1) single[(unsigned char)s[0]] = true;
    }
    fz_require(vka_tokenizer_decode(tok, V, NULL) == NULL, "decode(V) is not NULL");
    fz_require(vka_tokenizer_decode(tok, -1, NULL) == NULL, "decode(-1) is not NULL");
    if (vka_tokenizer_kind_of(tok) == VKA_TOKENIZER_BPE)
        for (int b = 0; b < 256; b++) fz_require(single[b], "BPE without byte %d", b);

    const char *path = fz_out_path("tokenizer.bin");
    fz_require(vka_tokenizer_save(tok, path) == VKA_SUCCESS, "save: %s", vka_last_error(fz_ctx));
    vka_tokenizer *again = NULL;
    vka_result r = vka_tokenizer_load(fz_ctx, path, &again);
    fz_require(r == VKA_SUCCESS, "reload: %s", vka_last_error(fz_ctx));
    check_same(tok, again);
    vka_tokenizer_destroy(again);
    remove(path);

    static const char sample[] = "First Citizen:\nBefore we proceed any further, hear me "
                                 "speak.\n\nAll:\nSpeak, speak. It's 3 o'clock\xC3\xA9\xFF!";
    check_encode(tok, sample, sizeof sample - 1);
    size_t from = size > 1024 ? 1024 : 0, len = size - from;
    check_encode(tok, (const char *)data + from, len < ENCODE_MAX ? len : ENCODE_MAX);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fz_file_set(&in, data, size);
    vka_tokenizer *tok = NULL;
    vka_result r = vka_tokenizer_load(fz_ctx, in.path, &tok);
    if (r == VKA_SUCCESS) {
        fz_require(tok != NULL, "success without a tokenizer");
        check_loaded(tok, data, size);
        vka_tokenizer_destroy(tok);
    } else {
        fz_require(tok == NULL, "a tokenizer handed out with an error");
        fz_check_failure(r, in.path);
    }
    return 0;
}
