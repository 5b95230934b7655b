/* libFuzzer target: llm.c token files through vka_data_open (with a character vocabulary of
 * about 50 tokens and a BPE one of 512, which bound the ids). Each input is opened as it is
 * and, when it starts with the token file magic but its count disagrees with its length, again
 * with the count set from the length, so that the version and id checks are reached. Data that
 * opens must: hold the file's count of tokens, split 90/10, read back as the file's ids, and
 * give batches of ids below V. */
#include "fuzz_util.h"

#define HEADER_BYTES 1024

static fz_file in;
static vka_tokenizer *toks[2];

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    fz_init();
    fz_tokenizers(&toks[1], 512, &toks[0]);
    fz_file_open(&in, "tokens.bin");
    return 0;
}

static void check_data(const vka_data *d, const vka_tokenizer *tok, const uint8_t *file,
                       size_t size) {
    size_t n = vka_data_num_tokens(d, VKA_SPLIT_ALL);
    size_t tr = vka_data_num_tokens(d, VKA_SPLIT_TRAIN), va = vka_data_num_tokens(d, VKA_SPLIT_VAL);
    fz_require(tr + va == n && tr == (size_t)((uint64_t)n * 9 / 10), "splits %zu + %zu of %zu",
               tr, va, n);
    int V = vka_tokenizer_vocab_size(tok);
    int32_t *ids = malloc((n ? n : 1) * sizeof *ids);
    fz_require(ids, "out of memory");
    fz_require(vka_data_read_tokens(d, VKA_SPLIT_ALL, 0, n, ids) == VKA_SUCCESS, "read");
    bool token_file = size >= 4 && fz_le32(file) == VKA_TOKENS_MAGIC;
    if (token_file) {
        fz_require(n == fz_le32(file + 8) && size == HEADER_BYTES + 2 * n, "count %zu", n);
        for (size_t i = 0; i < n; i++) {
            uint32_t id = (uint32_t)file[HEADER_BYTES + 2 * i] | (uint32_t)file[HEADER_BYTES + 2 * i + 1] << 8;
            fz_require((uint32_t)ids[i] == id, "token %zu is %d, the file has %u", i, ids[i], id);
        }
    }
    for (size_t i = 0; i < n; i++) fz_require(ids[i] >= 0 && ids[i] < V, "id %d", ids[i]);
    fz_require(vka_data_read_tokens(d, VKA_SPLIT_ALL, n, 1, ids) != VKA_SUCCESS, "read past");
    free(ids);
    enum { B = 2, T = 4 };
    int32_t x[B * T], y[B * T];
    uint64_t rng = 1;
    vka_result r = vka_data_batch(d, VKA_SPLIT_TRAIN, B, T, &rng, x, y);
    fz_require((r == VKA_SUCCESS) == (tr >= T + 1), "batch of %zu train tokens: %s", tr,
               vka_result_string(r));
    if (r == VKA_SUCCESS)
        for (int i = 0; i < B * T; i++)
            fz_require(x[i] >= 0 && x[i] < V && y[i] >= 0 && y[i] < V, "batch id");
}

static void open_data(const uint8_t *data, size_t size) {
    fz_file_set(&in, data, size);
    for (int k = 0; k < 2; k++) {
        vka_data *d = NULL;
        const char *paths[1] = {in.path};
        vka_data_desc desc = {.paths = paths, .n_paths = 1, .tok = toks[k]};
        vka_result r = vka_data_open(fz_ctx, &desc, &d);
        if (r == VKA_SUCCESS) {
            check_data(d, toks[k], data, size);
            vka_data_destroy(d);
        } else {
            fz_require(d == NULL, "data handed out with an error");
            fz_check_failure(r, in.path);
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    open_data(data, size);
    if (size < HEADER_BYTES || fz_le32(data) != VKA_TOKENS_MAGIC) return 0;
    size_t even = size & ~(size_t)1;
    uint32_t count = (uint32_t)((even - HEADER_BYTES) / 2);
    if (even == size && fz_le32(data + 8) == count) return 0;
    uint8_t *fixed = malloc(even);
    fz_require(fixed != NULL, "out of memory");
    memcpy(fixed, data, even);
    fz_put_le32(fixed + 8, count);
    open_data(fixed, even);
    free(fixed);
    return 0;
}
