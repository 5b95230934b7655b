/* libFuzzer target: the tokenizers' encode of arbitrary bytes. For a learned BPE vocabulary,
 * a character vocabulary of the input's own bytes, and (for some short inputs) a BPE vocabulary
 * learned from the input itself: encode succeeds, gives at most one id per byte, every id
 * below V and never the end-of-text id (BPE), and decode(encode(x)) == x (vka_tokenizer_encode's
 * documented property). vka_utf8_complete holds back at most 3 bytes. */
#include "fuzz_util.h"

#define LEARN_MAX_BYTES 512

static vka_tokenizer *bpe;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    fz_init();
    fz_tokenizers(&bpe, 512, NULL);
    return 0;
}

static void check_roundtrip(const vka_tokenizer *tok, const char *text, size_t len,
                            const char *which) {
    int32_t *ids = malloc((len ? len : 1) * sizeof *ids);
    char *back = malloc(len ? len : 1);
    fz_require(ids && back, "out of memory");
    size_t n = 0;
    vka_result r = vka_tokenizer_encode(tok, text, len, ids, &n);
    fz_require(r == VKA_SUCCESS, "%s: encode: %s", which, vka_last_error(fz_ctx));
    fz_require(n <= len, "%s: %zu tokens from %zu bytes", which, n, len);
    bool is_bpe = vka_tokenizer_kind_of(tok) == VKA_TOKENIZER_BPE;
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        fz_require(!is_bpe || ids[i] != vka_tokenizer_eot(tok), "%s: end-of-text from text", which);
        size_t k = 0;
        const char *s = vka_tokenizer_decode(tok, ids[i], &k);
        fz_require(s && k >= 1 && at + k <= len, "%s: id %d at %zu", which, ids[i], i);
        memcpy(back + at, s, k);
        at += k;
    }
    fz_require(at == len && memcmp(back, text, len) == 0, "%s: decode(encode(x)) != x", which);
    free(ids);
    free(back);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *text = (const char *)data;
    check_roundtrip(bpe, text, size, "learned BPE");

    size_t keep = vka_utf8_complete(text, size);
    fz_require(keep <= size && size - keep <= 3, "utf8_complete kept %zu of %zu", keep, size);

    if (size == 0) return 0;
    vka_tokenizer *chars = NULL;
    vka_result r = vka_tokenizer_create_from_text(fz_ctx, text, size, &chars);
    fz_require(r == VKA_SUCCESS, "create_from_text: %s", vka_last_error(fz_ctx));
    check_roundtrip(chars, text, size, "character vocabulary");
    vka_tokenizer_destroy(chars);

    /* Learning costs 50 encodes (its tables start at 64 Ki pairs): one input in 256, chosen by
     * a hash of the input so that a crash reproduces from its input alone. */
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < size; i++) h = (h ^ data[i]) * 16777619u;
    if (size > LEARN_MAX_BYTES || (h >> 24) != 0) return 0;
    vka_tokenizer *own = NULL;
    r = vka_tokenizer_learn(fz_ctx, text, size, 257 + data[0] % 32, &own);
    fz_require(r == VKA_SUCCESS, "learn: %s", vka_last_error(fz_ctx));
    fz_require(vka_tokenizer_vocab_size(own) <= 257 + data[0] % 32, "vocabulary too large");
    check_roundtrip(own, text, size, "BPE learned from the input");
    vka_tokenizer_destroy(own);
    return 0;
}
