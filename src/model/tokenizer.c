/*
 * Character-level (byte) tokenizer, as nanoGPT's shakespeare_char, stored in llm.c's tokenizer
 * file format (llm.c tokenizer.h / train_gpt2.py write_tokenizer):
 *   int32 header[256] = {20240328, version, n, eot, 0...}   (version 1 has no eot)
 *   then for each token i < n: uint8 length, then length bytes.
 * We accept only single-byte tokens, each byte at most once (GPT-2's BPE vocabulary is
 * rejected with a message saying so).
 */
#include "model/tokenizer.h"
#include "model/fileio.h"

#include <stdlib.h>
#include <string.h>

#define TOKENIZER_VERSION 2
#define TOKENIZER_HEADER_INTS 256
#define TOKENIZER_HEADER_BYTES (TOKENIZER_HEADER_INTS * 4)
/* Largest valid character-level file: the header and 256 tokens of 1 + 1 bytes. */
#define TOKENIZER_MAX_FILE (TOKENIZER_HEADER_BYTES + 256 * 2)

struct vka_tokenizer {
    vka_context *ctx;     /* for error messages */
    bool counted;         /* in ctx's count of children (vka_context_retain) */
    int V;                /* tokens */
    int eot;              /* end-of-text id stored in files */
    unsigned char byte_of[256]; /* (V) token id -> byte */
    int16_t id_of[256];   /* byte -> token id, -1 if not in the vocabulary */
};

static vka_tokenizer *tokenizer_new(vka_context *ctx, bool counted) {
    vka_tokenizer *tok = calloc(1, sizeof *tok);
    if (!tok) return NULL;
    tok->ctx = ctx;
    tok->counted = counted;
    if (counted) vka_context_retain(ctx, VKA_CHILD_TOKENIZER);
    for (int b = 0; b < 256; b++) tok->id_of[b] = -1;
    return tok;
}

vka_result vka_tokenizer_create_from_text(vka_context *ctx, const char *text, size_t len,
                                          vka_tokenizer **out) {
    return vkm_tokenizer_create_from_text(ctx, text, len, true, out);
}

vka_result vkm_tokenizer_create_from_text(vka_context *ctx, const char *text, size_t len,
                                          bool counted, vka_tokenizer **out) {
    if (!out) return vka_set_error(ctx, VKA_ERROR_INVALID_ARGUMENT, "tokenizer: out is NULL");
    *out = NULL;
    if (!text || len == 0)
        return vka_set_error(ctx, VKA_ERROR_INVALID_ARGUMENT,
                             "tokenizer: cannot build a vocabulary from empty text");
    bool present[256] = {false};
    for (size_t i = 0; i < len; i++) present[(unsigned char)text[i]] = true;
    vka_tokenizer *tok = tokenizer_new(ctx, counted);
    if (!tok) return vka_set_error(ctx, VKA_ERROR_OUT_OF_HOST_MEMORY, "tokenizer: out of memory");
    for (int b = 0; b < 256; b++) {
        if (!present[b]) continue;
        tok->byte_of[tok->V] = (unsigned char)b;
        tok->id_of[b] = (int16_t)tok->V;
        tok->V++;
    }
    tok->eot = tok->id_of['\n'] >= 0 ? tok->id_of['\n'] : 0;
    *out = tok;
    return VKA_SUCCESS;
}

static int32_t header_int(const unsigned char *buf, int i) {
    int32_t v;
    memcpy(&v, buf + 4 * i, 4);
    return v;
}

/* Parse the token table after the header; fills tok or sets the error. */
static vka_result parse_tokens(vka_tokenizer *tok, const char *path, const unsigned char *buf,
                               size_t len, int n) {
    size_t pos = TOKENIZER_HEADER_BYTES;
    for (int i = 0; i < n; i++) {
        if (pos + 1 > len)
            return vka_set_error(tok->ctx, VKA_ERROR_FORMAT,
                                 "%s is truncated: it ends at token %d of %d", path, i, n);
        unsigned tlen = buf[pos];
        if (tlen != 1)
            return vka_set_error(tok->ctx, VKA_ERROR_FORMAT,
                                 "%s: token %d is %u bytes long; only character-level "
                                 "tokenizers (one byte per token) are supported",
                                 path, i, tlen);
        if (pos + 2 > len)
            return vka_set_error(tok->ctx, VKA_ERROR_FORMAT,
                                 "%s is truncated: it ends inside token %d of %d", path, i, n);
        unsigned char b = buf[pos + 1];
        if (tok->id_of[b] >= 0)
            return vka_set_error(tok->ctx, VKA_ERROR_FORMAT,
                                 "%s: byte %s is both token %d and token %d", path,
                                 vkm_show_byte(b).s, tok->id_of[b], i);
        tok->byte_of[i] = b;
        tok->id_of[b] = (int16_t)i;
        pos += 2;
    }
    if (pos != len)
        return vka_set_error(tok->ctx, VKA_ERROR_FORMAT,
                             "%s is %zu bytes but its %d tokens end at byte %zu (trailing data)",
                             path, len, n, pos);
    tok->V = n;
    return VKA_SUCCESS;
}

vka_result vka_tokenizer_load(vka_context *ctx, const char *path, vka_tokenizer **out) {
    if (!out) return vka_set_error(ctx, VKA_ERROR_INVALID_ARGUMENT, "tokenizer: out is NULL");
    *out = NULL;
    char *data;
    size_t len;
    vka_result r = vkm_read_all(ctx, path, "a character-level tokenizer file",
                                TOKENIZER_MAX_FILE, &data, &len);
    if (r != VKA_SUCCESS) return r;
    const unsigned char *buf = (const unsigned char *)data;
    vka_tokenizer *tok = NULL;
    if (len < TOKENIZER_HEADER_BYTES) {
        r = vka_set_error(ctx, VKA_ERROR_FORMAT,
                          "%s is %zu bytes, shorter than the %d-byte tokenizer header", path, len,
                          TOKENIZER_HEADER_BYTES);
        goto done;
    }
    int32_t magic = header_int(buf, 0), version = header_int(buf, 1);
    int32_t n = header_int(buf, 2), eot = header_int(buf, 3);
    if (magic != VKM_TOKENIZER_MAGIC) {
        r = vka_set_error(ctx, VKA_ERROR_FORMAT,
                          "%s: wrong magic %d (expected %d, an llm.c tokenizer file)", path,
                          (int)magic, VKM_TOKENIZER_MAGIC);
        goto done;
    }
    if (version != 1 && version != 2) {
        r = vka_set_error(ctx, VKA_ERROR_FORMAT, "%s: tokenizer version %d (expected 1 or 2)",
                          path, (int)version);
        goto done;
    }
    if (n < 1 || n > 256) {
        r = vka_set_error(ctx, VKA_ERROR_FORMAT,
                          "%s: %d tokens; a character-level vocabulary has 1 to 256", path,
                          (int)n);
        goto done;
    }
    if (version == 2 && (eot < 0 || eot >= n)) {
        r = vka_set_error(ctx, VKA_ERROR_FORMAT, "%s: end-of-text id %d is not below %d tokens",
                          path, (int)eot, (int)n);
        goto done;
    }
    tok = tokenizer_new(ctx, true);
    if (!tok) {
        r = vka_set_error(ctx, VKA_ERROR_OUT_OF_HOST_MEMORY, "tokenizer: out of memory");
        goto done;
    }
    r = parse_tokens(tok, path, buf, len, n);
    if (r != VKA_SUCCESS) goto done;
    tok->eot = version == 2 ? eot : (tok->id_of['\n'] >= 0 ? tok->id_of['\n'] : 0);
    *out = tok;
    tok = NULL;
done:
    vka_tokenizer_destroy(tok);
    free(data);
    return r;
}

vka_result vka_tokenizer_save(const vka_tokenizer *tok, const char *path) {
    if (!tok) return VKA_ERROR_INVALID_ARGUMENT;
    if (!path) return vka_set_error(tok->ctx, VKA_ERROR_INVALID_ARGUMENT, "tokenizer save: path is NULL");
    int32_t header[TOKENIZER_HEADER_INTS] = {VKM_TOKENIZER_MAGIC, TOKENIZER_VERSION, tok->V, tok->eot};
    unsigned char table[256 * 2];
    for (int i = 0; i < tok->V; i++) {
        table[2 * i] = 1;
        table[2 * i + 1] = tok->byte_of[i];
    }
    const void *parts[2] = {header, table};
    size_t sizes[2] = {sizeof header, (size_t)tok->V * 2};
    return vka_write_file_atomic(tok->ctx, path, parts, sizes, 2);
}

void vka_tokenizer_destroy(vka_tokenizer *tok) {
    if (!tok) return;
    vka_context *ctx = tok->counted ? tok->ctx : NULL;
    free(tok);
    vka_context_release(ctx, VKA_CHILD_TOKENIZER);
}

int vka_tokenizer_vocab_size(const vka_tokenizer *tok) { return tok ? tok->V : 0; }

vka_result vka_tokenizer_encode(const vka_tokenizer *tok, const char *text, size_t len,
                                int32_t *out, size_t *n_out) {
    if (!tok) return VKA_ERROR_INVALID_ARGUMENT;
    if (n_out) *n_out = 0;
    if (len > 0 && (!text || !out))
        return vka_set_error(tok->ctx, VKA_ERROR_INVALID_ARGUMENT, "encode: text or out is NULL");
    for (size_t i = 0; i < len; i++) {
        unsigned char b = (unsigned char)text[i];
        int id = tok->id_of[b];
        if (id < 0)
            return vka_set_error(tok->ctx, VKA_ERROR_VOCABULARY,
                                 "byte %s at offset %zu is not in the vocabulary (%d tokens)",
                                 vkm_show_byte(b).s, i, tok->V);
        out[i] = id;
    }
    if (n_out) *n_out = len;
    return VKA_SUCCESS;
}

const char *vka_tokenizer_decode(const vka_tokenizer *tok, int32_t id, size_t *len) {
    if (len) *len = 0;
    if (!tok || id < 0 || id >= tok->V) return NULL;
    if (len) *len = 1;
    return (const char *)&tok->byte_of[id];
}
