/* libFuzzer target: text through vka_data_open (the text rule, the character vocabulary built
 * from the text, encoding with a given BPE vocabulary) and vka_tokenize_file (the streaming
 * tokenizer). Data that opens must hold at most one token per byte, ids below V, and the BPE
 * tokens must be exactly those vka_tokenize_file writes for the same text (the two cut the
 * text into pieces the same way); a text one refuses the other refuses too. */
#include "fuzz_util.h"

static fz_file in;
static vka_tokenizer *bpe;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    fz_init();
    fz_tokenizers(&bpe, 512, NULL);
    fz_file_open(&in, "text.txt");
    return 0;
}

/* The tokens of d (n of them), malloc'd. */
static int32_t *all_tokens(const vka_data *d, size_t *n) {
    *n = vka_data_num_tokens(d, VKA_SPLIT_ALL);
    int32_t *ids = malloc((*n ? *n : 1) * sizeof *ids);
    fz_require(ids, "out of memory");
    fz_require(vka_data_read_tokens(d, VKA_SPLIT_ALL, 0, *n, ids) == VKA_SUCCESS, "read");
    return ids;
}

static void check_ids(const int32_t *ids, size_t n, size_t size, int V) {
    fz_require(n >= 1 && n <= size, "%zu tokens from %zu bytes", n, size);
    for (size_t i = 0; i < n; i++) fz_require(ids[i] >= 0 && ids[i] < V, "id %d", ids[i]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fz_file_set(&in, data, size);
    bool token_file = size >= 4 && fz_le32(data) == VKA_TOKENS_MAGIC;
    const char *paths[1] = {in.path};

    /* No tokenizer: the character vocabulary of the text. */
    vka_data *d = NULL;
    vka_data_desc desc = {.paths = paths, .n_paths = 1};
    vka_result r = vka_data_open(fz_ctx, &desc, &d);
    if (r == VKA_SUCCESS) {
        fz_require(!token_file, "a token file opened without a tokenizer");
        size_t n;
        int32_t *ids = all_tokens(d, &n);
        const vka_tokenizer *tok = vka_data_tokenizer(d);
        fz_require(n == size, "%zu characters from %zu bytes", n, size);
        check_ids(ids, n, size, vka_tokenizer_vocab_size(tok));
        for (size_t i = 0; i < n; i++) {
            size_t k;
            const char *s = vka_tokenizer_decode(tok, ids[i], &k);
            fz_require(k == 1 && s[0] == (char)data[i], "character %zu", i);
        }
        free(ids);
        vka_data_destroy(d);
    } else {
        fz_check_failure(r, in.path);
    }

    /* BPE, both through vka_data_open and the streaming vka_tokenize_file. */
    desc.tok = bpe;
    r = vka_data_open(fz_ctx, &desc, &d);
    const char *out = fz_out_path("tokens.bin");
    uint64_t n_tok = 0, n_bytes = 0;
    vka_result rs = token_file ? VKA_ERROR_FORMAT
                               : vka_tokenize_file(fz_ctx, bpe, in.path, out, &n_tok, &n_bytes);
    if (r != VKA_SUCCESS) {
        fz_check_failure(r, in.path);
        fz_require(rs != VKA_SUCCESS, "vka_tokenize_file took a text vka_data_open refused");
        return 0;
    }
    size_t n;
    int32_t *ids = all_tokens(d, &n);
    vka_data_destroy(d);
    if (token_file) {
        free(ids);
        return 0;
    }
    check_ids(ids, n, size, vka_tokenizer_vocab_size(bpe));
    fz_require(rs == VKA_SUCCESS, "vka_tokenize_file refused a text vka_data_open took: %s",
               vka_last_error(fz_ctx));
    fz_require(n_tok == n && n_bytes == size, "tokenize_file: %llu tokens of %llu bytes",
               (unsigned long long)n_tok, (unsigned long long)n_bytes);
    const char *paths2[1] = {out};
    vka_data_desc desc2 = {.paths = paths2, .n_paths = 1, .tok = bpe};
    r = vka_data_open(fz_ctx, &desc2, &d);
    fz_require(r == VKA_SUCCESS, "the written token file: %s", vka_last_error(fz_ctx));
    size_t n2;
    int32_t *ids2 = all_tokens(d, &n2);
    fz_require(n2 == n && memcmp(ids, ids2, n * sizeof *ids) == 0,
               "vka_tokenize_file's tokens differ from vka_data_open's");
    free(ids2);
    vka_data_destroy(d);
    remove(out);
    free(ids);
    return 0;
}
