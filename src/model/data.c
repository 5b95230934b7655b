/*
 * Text data: a corpus read whole, tokenised, split 90/10 into train and validation, and batches
 * of random windows as nanoGPT's get_batch draws them.
 *
 * What counts as text (checked before tokenising, so a wrong file gets a clear message rather
 * than a vocabulary of junk): no NUL byte anywhere, and at most 2% of the bytes control
 * characters (bytes below 0x20 other than \t \n \r, and 0x7F). Bytes >= 0x80 are allowed
 * (UTF-8 text is tokenised byte by byte).
 */
#include "model/fileio.h"
#include "model/rng.h"
#include "model/tokenizer.h"

#include <stdlib.h>
#include <string.h>

/* Data files are read whole; this bounds the allocation a wrong path can cause (tokens take
 * 4 bytes per byte of text). */
#define DATA_MAX_BYTES ((uint64_t)1 << 31)
#define DATA_MAX_CONTROL_PERCENT 2

struct vka_data {
    vka_context *ctx;
    const vka_tokenizer *tok;
    vka_tokenizer *own_tok; /* the tokenizer built from the text, or NULL if given */
    int32_t *tokens;        /* (n_train + n_val) ids: train first, then validation */
    size_t n_train, n_val;
    uint64_t text_bytes, text_hash; /* vka_data_text_id */
};

/* 64-bit FNV-1a over the bytes (vka_data_text_id's documented hash). */
static uint64_t fnv1a(const char *text, size_t len) {
    uint64_t h = 0xCBF29CE484222325ull;
    for (size_t i = 0; i < len; i++) h = (h ^ (unsigned char)text[i]) * 0x100000001B3ull;
    return h;
}

/* The text rule of the file comment; sets the error naming the file. */
static vka_result check_text(vka_context *ctx, const char *name, const char *text, size_t len) {
    size_t control = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)text[i];
        if (c == 0)
            return vka_set_error(ctx, VKA_ERROR_FORMAT,
                                 "%s is not a text file: NUL byte at offset %zu", name, i);
        if ((c < 0x20 && c != '\t' && c != '\n' && c != '\r') || c == 0x7F) control++;
    }
    if (control * 100 > len * DATA_MAX_CONTROL_PERCENT)
        return vka_set_error(ctx, VKA_ERROR_FORMAT,
                             "%s is not a text file: %zu of its %zu bytes are control "
                             "characters (more than %d%%)",
                             name, control, len, DATA_MAX_CONTROL_PERCENT);
    return VKA_SUCCESS;
}

static vka_result read_text(vka_context *ctx, const char *path, char **text, size_t *len) {
    if (!path) {
        *text = vka_builtin_corpus(0, len);
        if (!*text)
            return vka_set_error(ctx, VKA_ERROR_OUT_OF_HOST_MEMORY, "built-in corpus: out of memory");
        return VKA_SUCCESS;
    }
    vka_result r = vkm_read_all(ctx, path, "a training text", DATA_MAX_BYTES, text, len);
    if (r != VKA_SUCCESS) return r;
    if (*len == 0) {
        free(*text);
        *text = NULL;
        return vka_set_error(ctx, VKA_ERROR_FORMAT, "%s is empty", path);
    }
    return VKA_SUCCESS;
}

vka_result vka_data_load(vka_context *ctx, const char *path, const vka_tokenizer *tok,
                         vka_data **out) {
    if (!out) return vka_set_error(ctx, VKA_ERROR_INVALID_ARGUMENT, "data: out is NULL");
    *out = NULL;
    const char *name = path ? path : "the built-in corpus";
    char *text = NULL;
    size_t len = 0;
    vka_result r = read_text(ctx, path, &text, &len);
    if (r != VKA_SUCCESS) return r;
    vka_data *data = calloc(1, sizeof *data);
    if (!data) {
        free(text);
        return vka_set_error(ctx, VKA_ERROR_OUT_OF_HOST_MEMORY, "data: out of memory");
    }
    data->ctx = ctx;
    vka_context_retain(ctx, VKA_CHILD_DATA);
    r = check_text(ctx, name, text, len);
    if (r != VKA_SUCCESS) goto fail;
    if (!tok) {
        r = vkm_tokenizer_create_from_text(ctx, text, len, false, &data->own_tok);
        if (r != VKA_SUCCESS) goto fail;
        tok = data->own_tok;
    }
    data->tok = tok;
    data->tokens = malloc(len * sizeof *data->tokens);
    if (!data->tokens) {
        r = vka_set_error(ctx, VKA_ERROR_OUT_OF_HOST_MEMORY, "%s: %zu tokens: out of memory", name, len);
        goto fail;
    }
    size_t n_tokens = 0; /* len for a character vocabulary, fewer with BPE */
    r = vka_tokenizer_encode(tok, text, len, data->tokens, &n_tokens);
    if (r != VKA_SUCCESS) {
        /* Prefix the tokenizer's message ("byte 'Z' at offset 12 ...") with the file. */
        char msg[VKA_ERROR_MAX];
        snprintf(msg, sizeof msg, "%s", vka_last_error(ctx));
        vka_set_error(ctx, r, "%s: %s", name, msg);
        goto fail;
    }
    /* nanoGPT's n = int(0.9 * len(data)), of tokens. */
    data->n_train = (size_t)((uint64_t)n_tokens * 9 / 10);
    data->n_val = n_tokens - data->n_train;
    data->text_bytes = len;
    data->text_hash = fnv1a(text, len);
    free(text);
    *out = data;
    return VKA_SUCCESS;
fail:
    free(text);
    vka_data_destroy(data);
    return r;
}

void vka_data_destroy(vka_data *data) {
    if (!data) return;
    vka_tokenizer_destroy(data->own_tok);
    free(data->tokens);
    vka_context *ctx = data->ctx;
    free(data);
    vka_context_release(ctx, VKA_CHILD_DATA);
}

const vka_tokenizer *vka_data_tokenizer(const vka_data *data) { return data ? data->tok : NULL; }

vka_result vka_data_text_id(const vka_data *data, uint64_t *bytes, uint64_t *hash) {
    if (!data) return VKA_ERROR_INVALID_ARGUMENT;
    if (bytes) *bytes = data->text_bytes;
    if (hash) *hash = data->text_hash;
    return VKA_SUCCESS;
}

const int32_t *vka_data_tokens(const vka_data *data, vka_split split, size_t *n) {
    if (!data || (split != VKA_SPLIT_TRAIN && split != VKA_SPLIT_VAL)) {
        if (n) *n = 0;
        return NULL;
    }
    if (n) *n = split == VKA_SPLIT_TRAIN ? data->n_train : data->n_val;
    return split == VKA_SPLIT_TRAIN ? data->tokens : data->tokens + data->n_train;
}

vka_result vka_data_batch(const vka_data *data, vka_split split, int B, int T,
                          uint64_t *rng_state, int32_t *inputs, int32_t *targets) {
    if (!data) return VKA_ERROR_INVALID_ARGUMENT;
    if (B <= 0 || T <= 0 || !rng_state || !inputs || !targets)
        return vka_set_error(data->ctx, VKA_ERROR_INVALID_ARGUMENT,
                             "batch: B=%d and T=%d must be positive and the pointers non-NULL", B, T);
    size_t n;
    const int32_t *tokens = vka_data_tokens(data, split, &n);
    if (!tokens)
        return vka_set_error(data->ctx, VKA_ERROR_INVALID_ARGUMENT, "batch: unknown split %d",
                             (int)split);
    if (n < (size_t)T + 1)
        return vka_set_error(data->ctx, VKA_ERROR_INVALID_ARGUMENT,
                             "batch: the %s split has %zu tokens, fewer than T+1 = %d",
                             split == VKA_SPLIT_TRAIN ? "train" : "validation", n, T + 1);
    /* Window starts are uniform over the n - T positions where T+1 tokens fit. */
    for (int b = 0; b < B; b++) {
        size_t start = (size_t)vkm_rng_below(rng_state, (uint64_t)(n - (size_t)T));
        memcpy(inputs + (size_t)b * T, tokens + start, (size_t)T * sizeof *inputs);
        memcpy(targets + (size_t)b * T, tokens + start + 1, (size_t)T * sizeof *targets);
    }
    return VKA_SUCCESS;
}
