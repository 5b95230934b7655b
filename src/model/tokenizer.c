/*
 * Tokenizers in llm.c's tokenizer file format (llm.c tokenizer.h / train_gpt2.py
 * write_tokenizer):
 *   int32 header[256] = {20240328, version, n, eot, 0...}   (version 1 has no eot)
 *   then for each token i < n: uint8 length, then length bytes.
 * Two kinds share it: character level (every token one distinct byte, as nanoGPT's
 * shakespeare_char) and byte-level BPE (GPT-2's gpt2_tokenizer.bin, or vka_tokenizer_learn's;
 * all 256 single bytes plus merged strings, id = merge rank). This file reads and writes the
 * format, does the character level and dispatches; bpe.c encodes and learns BPE.
 */
#include "model/tokenizer.h"
#include "model/fileio.h"

#include <stdlib.h>
#include <string.h>

#define TOKENIZER_VERSION 2
#define TOKENIZER_HEADER_INTS 256
#define TOKENIZER_HEADER_BYTES (TOKENIZER_HEADER_INTS * 4)
/* Largest file a valid vocabulary can be: the header and the most tokens of 1 + 255 bytes. */
#define TOKENIZER_MAX_FILE \
    (TOKENIZER_HEADER_BYTES + (uint64_t)VKA_TOKENIZER_MAX_VOCAB * (1 + VKA_TOKENIZER_MAX_TOKEN_BYTES))

static vka_tokenizer *tokenizer_new(vka_context *ctx, bool counted) {
    vka_tokenizer *tok = vka_calloc(ctx, 1, sizeof *tok);
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

/* A character-level vocabulary of the bytes marked present, in byte order. */
static vka_result make_char_vocab(vka_tokenizer *tok, const bool present[256]) {
    tok->kind = VKA_TOKENIZER_CHAR;
    tok->bytes = vka_malloc(tok->ctx, 256);
    tok->off = vka_malloc(tok->ctx, 257 * sizeof *tok->off);
    if (!tok->bytes || !tok->off)
        return vka_set_error(tok->ctx, VKA_ERROR_OUT_OF_HOST_MEMORY, "tokenizer: out of memory");
    tok->V = 0;
    tok->off[0] = 0;
    for (int b = 0; b < 256; b++) {
        if (!present[b]) continue;
        tok->bytes[tok->V] = (unsigned char)b;
        tok->id_of[b] = tok->V;
        tok->V++;
        tok->off[tok->V] = (uint32_t)tok->V;
    }
    return VKA_SUCCESS;
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
    vka_result r = make_char_vocab(tok, present);
    if (r != VKA_SUCCESS) {
        vka_tokenizer_destroy(tok);
        return r;
    }
    tok->eot = tok->id_of['\n'] >= 0 ? tok->id_of['\n'] : 0;
    *out = tok;
    return VKA_SUCCESS;
}

vka_result vka_tokenizer_learn(vka_context *ctx, const char *text, size_t len, int vocab_size,
                               vka_tokenizer **out) {
    if (!out) return vka_set_error(ctx, VKA_ERROR_INVALID_ARGUMENT, "tokenizer learn: out is NULL");
    *out = NULL;
    if (!text || len == 0)
        return vka_set_error(ctx, VKA_ERROR_INVALID_ARGUMENT,
                             "tokenizer learn: cannot learn a vocabulary from empty text");
    if (vocab_size < 257 || vocab_size > VKA_TOKENIZER_MAX_VOCAB)
        return vka_set_error(ctx, VKA_ERROR_INVALID_ARGUMENT,
                             "tokenizer learn: vocabulary size %d is outside 257..%d (256 single "
                             "bytes and the end-of-text token come first)",
                             vocab_size, VKA_TOKENIZER_MAX_VOCAB);
    vka_tokenizer *tok = tokenizer_new(ctx, true);
    if (!tok) return vka_set_error(ctx, VKA_ERROR_OUT_OF_HOST_MEMORY, "tokenizer: out of memory");
    tok->kind = VKA_TOKENIZER_BPE;
    vka_result r = vkm_bpe_learn(tok, text, len, vocab_size);
    if (r == VKA_SUCCESS) {
        for (int b = 0; b < 256; b++) tok->id_of[b] = b;
        r = vkm_bpe_create(tok, "the learned vocabulary");
    }
    if (r != VKA_SUCCESS) {
        vka_tokenizer_destroy(tok);
        return r;
    }
    *out = tok;
    return VKA_SUCCESS;
}

static int32_t header_int(const unsigned char *buf, int i) {
    int32_t v;
    memcpy(&v, buf + 4 * i, 4);
    return v;
}

/* Read the token table after the header into tok->bytes and tok->off; sets the error. */
static vka_result parse_tokens(vka_tokenizer *tok, const char *path, const unsigned char *buf,
                               size_t len, int n) {
    size_t pos = TOKENIZER_HEADER_BYTES;
    tok->off = vka_malloc(tok->ctx, ((size_t)n + 1) * sizeof *tok->off);
    tok->bytes = vka_malloc(tok->ctx, len - TOKENIZER_HEADER_BYTES + 1);
    if (!tok->off || !tok->bytes)
        return vka_set_error(tok->ctx, VKA_ERROR_OUT_OF_HOST_MEMORY, "%s: out of memory", path);
    uint32_t used = 0;
    tok->off[0] = 0;
    for (int i = 0; i < n; i++) {
        if (pos + 1 > len)
            return vka_set_error(tok->ctx, VKA_ERROR_FORMAT,
                                 "%s is truncated: it ends at token %d of %d", path, i, n);
        unsigned tlen = buf[pos];
        if (tlen == 0)
            return vka_set_error(tok->ctx, VKA_ERROR_FORMAT,
                                 "%s: token %d has length 0 (every token is 1 to %d bytes)", path,
                                 i, VKA_TOKENIZER_MAX_TOKEN_BYTES);
        if (pos + 1 + tlen > len)
            return vka_set_error(tok->ctx, VKA_ERROR_FORMAT,
                                 "%s is truncated: it ends inside token %d of %d", path, i, n);
        memcpy(tok->bytes + used, buf + pos + 1, tlen);
        used += tlen;
        tok->off[i + 1] = used;
        pos += 1 + tlen;
    }
    if (pos != len)
        return vka_set_error(tok->ctx, VKA_ERROR_FORMAT,
                             "%s is %zu bytes but its %d tokens (the header's count) end at byte "
                             "%zu (trailing data)", path, len, n, pos);
    tok->V = n;
    return VKA_SUCCESS;
}

/* Character level if every token is one byte (each byte once), else BPE (bpe.c checks it). */
static vka_result classify(vka_tokenizer *tok, const char *path) {
    bool single = tok->off[tok->V] == (uint32_t)tok->V;
    if (!single) {
        tok->kind = VKA_TOKENIZER_BPE;
        for (int i = 0; i < tok->V; i++)
            if (tok->off[i + 1] - tok->off[i] == 1 && tok->id_of[tok->bytes[tok->off[i]]] < 0)
                tok->id_of[tok->bytes[tok->off[i]]] = i;
        return vkm_bpe_create(tok, path);
    }
    tok->kind = VKA_TOKENIZER_CHAR;
    for (int i = 0; i < tok->V; i++) {
        unsigned char b = tok->bytes[i];
        if (tok->id_of[b] >= 0)
            return vka_set_error(tok->ctx, VKA_ERROR_FORMAT, "%s: byte %s is both token %d and "
                                 "token %d", path, vkm_show_byte(b).s, tok->id_of[b], i);
        tok->id_of[b] = i;
    }
    return VKA_SUCCESS;
}

/* The header's fields, checked; sets the error. */
static vka_result check_header(vka_context *ctx, const char *path, const unsigned char *buf,
                               size_t len, int32_t *n, int32_t *eot, int32_t *version) {
    if (len < TOKENIZER_HEADER_BYTES)
        return vka_set_error(ctx, VKA_ERROR_FORMAT,
                             "%s is %zu bytes, shorter than the %d-byte tokenizer header", path,
                             len, TOKENIZER_HEADER_BYTES);
    int32_t magic = header_int(buf, 0);
    *version = header_int(buf, 1);
    *n = header_int(buf, 2);
    *eot = header_int(buf, 3);
    if (magic != VKM_TOKENIZER_MAGIC)
        return vka_set_error(ctx, VKA_ERROR_FORMAT,
                             "%s: wrong magic %d (expected %d, an llm.c tokenizer file)", path,
                             (int)magic, VKM_TOKENIZER_MAGIC);
    if (*version != 1 && *version != 2)
        return vka_set_error(ctx, VKA_ERROR_FORMAT, "%s: tokenizer version %d (expected 1 or 2)",
                             path, (int)*version);
    if (*n < 1 || *n > VKA_TOKENIZER_MAX_VOCAB)
        return vka_set_error(ctx, VKA_ERROR_FORMAT, "%s: %d tokens (a vocabulary has 1 to %d)",
                             path, (int)*n, VKA_TOKENIZER_MAX_VOCAB);
    if (*version == 2 && (*eot < 0 || *eot >= *n))
        return vka_set_error(ctx, VKA_ERROR_FORMAT, "%s: end-of-text id %d is not below %d tokens",
                             path, (int)*eot, (int)*n);
    /* llm.c and vkattn write 0 in the rest: anything else is damage or another format. */
    for (int i = 4; i < TOKENIZER_HEADER_INTS; i++)
        if (header_int(buf, i) != 0)
            return vka_set_error(ctx, VKA_ERROR_FORMAT, "%s: the header is damaged: unused word "
                                 "%d is %d (written as 0)", path, i, (int)header_int(buf, i));
    return VKA_SUCCESS;
}

vka_result vka_tokenizer_load(vka_context *ctx, const char *path, vka_tokenizer **out) {
    if (!out) return vka_set_error(ctx, VKA_ERROR_INVALID_ARGUMENT, "tokenizer: out is NULL");
    *out = NULL;
    char *data;
    size_t len;
    vka_result r = vkm_read_all(ctx, path, "a tokenizer file", TOKENIZER_MAX_FILE, &data, &len);
    if (r != VKA_SUCCESS) return r;
    const unsigned char *buf = (const unsigned char *)data;
    vka_tokenizer *tok = NULL;
    int32_t n = 0, eot = 0, version = 0;
    r = check_header(ctx, path, buf, len, &n, &eot, &version);
    if (r != VKA_SUCCESS) goto done;
    tok = tokenizer_new(ctx, true);
    if (!tok) {
        r = vka_set_error(ctx, VKA_ERROR_OUT_OF_HOST_MEMORY, "tokenizer: out of memory");
        goto done;
    }
    r = parse_tokens(tok, path, buf, len, n);
    if (r != VKA_SUCCESS) goto done;
    /* Version 1 has no end-of-text id: a character vocabulary's newline, else the last token
     * (llm.c's GPT-2 file puts <|endoftext|> last). */
    tok->eot = version == 2 ? eot : -1;
    r = classify(tok, path);
    if (r != VKA_SUCCESS) goto done;
    if (tok->eot < 0)
        tok->eot = tok->kind == VKA_TOKENIZER_BPE ? tok->V - 1
                   : tok->id_of['\n'] >= 0   ? tok->id_of['\n']
                                             : 0;
    *out = tok;
    tok = NULL;
done:
    vka_tokenizer_destroy(tok);
    vka_free(ctx, data);
    return r;
}

/* The token table of the file: per token a length byte and its bytes (table_len bytes). */
static unsigned char *token_table(const vka_tokenizer *tok, size_t *table_len) {
    *table_len = (size_t)tok->V + tok->off[tok->V];
    unsigned char *table = vka_malloc(tok->ctx, *table_len);
    if (!table) return NULL;
    size_t p = 0;
    for (int i = 0; i < tok->V; i++) {
        uint32_t n = tok->off[i + 1] - tok->off[i];
        table[p++] = (unsigned char)n;
        memcpy(table + p, tok->bytes + tok->off[i], n);
        p += n;
    }
    return table;
}

vka_result vka_tokenizer_save(const vka_tokenizer *tok, const char *path) {
    if (!tok) return VKA_ERROR_INVALID_ARGUMENT;
    if (!path) return vka_set_error(tok->ctx, VKA_ERROR_INVALID_ARGUMENT, "tokenizer save: path is NULL");
    int32_t header[TOKENIZER_HEADER_INTS] = {VKM_TOKENIZER_MAGIC, TOKENIZER_VERSION, tok->V, tok->eot};
    size_t table_len;
    unsigned char *table = token_table(tok, &table_len);
    if (!table) return vka_set_error(tok->ctx, VKA_ERROR_OUT_OF_HOST_MEMORY, "tokenizer save: out of memory");
    const void *parts[2] = {header, table};
    size_t sizes[2] = {sizeof header, table_len};
    vka_result r = vka_write_file_atomic(tok->ctx, path, parts, sizes, 2);
    vka_free(tok->ctx, table);
    return r;
}

/* 64-bit FNV-1a over the bytes of the file vka_tokenizer_save writes (header, then the table),
 * computed without building it. */
uint64_t vka_tokenizer_id(const vka_tokenizer *tok) {
    if (!tok) return 0;
    uint64_t h = 0xCBF29CE484222325ull;
    const int32_t words[4] = {VKM_TOKENIZER_MAGIC, TOKENIZER_VERSION, tok->V, tok->eot};
    for (int i = 0; i < TOKENIZER_HEADER_BYTES; i++) {
        unsigned char b = i < 16 ? (unsigned char)((uint32_t)words[i / 4] >> (8 * (i % 4))) : 0;
        h = (h ^ b) * 0x100000001B3ull;
    }
    for (int i = 0; i < tok->V; i++) {
        uint32_t n = tok->off[i + 1] - tok->off[i];
        h = (h ^ (unsigned char)n) * 0x100000001B3ull;
        for (uint32_t k = 0; k < n; k++) h = (h ^ tok->bytes[tok->off[i] + k]) * 0x100000001B3ull;
    }
    return h ? h : 1; /* 0 means "no tokenizer" in a model's header */
}

void vka_tokenizer_destroy(vka_tokenizer *tok) {
    if (!tok) return;
    vka_context *ctx = tok->counted ? tok->ctx : NULL;
    vkm_bpe_destroy(tok->bpe);
    vka_free(tok->ctx, tok->bytes);
    vka_free(tok->ctx, tok->off);
    vka_free(tok->ctx, tok);
    vka_context_release(ctx, VKA_CHILD_TOKENIZER);
}

int vka_tokenizer_vocab_size(const vka_tokenizer *tok) { return tok ? tok->V : 0; }

vka_tokenizer_kind vka_tokenizer_kind_of(const vka_tokenizer *tok) {
    return tok ? tok->kind : VKA_TOKENIZER_CHAR;
}

int32_t vka_tokenizer_eot(const vka_tokenizer *tok) { return tok ? tok->eot : -1; }

vka_result vka_tokenizer_encode(const vka_tokenizer *tok, const char *text, size_t len,
                                int32_t *out, size_t *n_out) {
    if (!tok) return VKA_ERROR_INVALID_ARGUMENT;
    if (n_out) *n_out = 0;
    if (len > 0 && (!text || !out))
        return vka_set_error(tok->ctx, VKA_ERROR_INVALID_ARGUMENT, "encode: text or out is NULL");
    if (tok->kind == VKA_TOKENIZER_BPE) {
        size_t n = 0;
        vka_result r = vkm_bpe_encode(tok, text, len, out, &n);
        if (n_out) *n_out = n;
        return r;
    }
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
    if (len) *len = tok->off[id + 1] - tok->off[id];
    return (const char *)tok->bytes + tok->off[id];
}

/* Length of the UTF-8 sequence a lead byte starts (2..4), or 0 if it is not a lead byte. */
static int utf8_lead_len(unsigned char c) {
    if (c >= 0xC2 && c <= 0xDF) return 2;
    if (c >= 0xE0 && c <= 0xEF) return 3;
    if (c >= 0xF0 && c <= 0xF4) return 4;
    return 0;
}

size_t vka_utf8_complete(const char *buf, size_t len) {
    if (!buf) return 0;
    const unsigned char *b = (const unsigned char *)buf;
    /* Only the last 3 bytes can be the start of a sequence still to be completed. */
    size_t lo = len > 3 ? len - 3 : 0;
    for (size_t i = len; i-- > lo;) {
        if ((b[i] & 0xC0) == 0x80) continue; /* continuation byte: look further back */
        int need = utf8_lead_len(b[i]);
        if (need == 0 || (size_t)need <= len - i) return len; /* ASCII, invalid, or complete */
        /* An incomplete sequence: hold it back only if what is there could still be valid
         * (the second byte's range for E0, ED, F0 and F4, as RFC 3629 restricts). */
        if (len - i >= 2) {
            unsigned char c1 = b[i + 1];
            unsigned char min = 0x80, max = 0xBF;
            if (b[i] == 0xE0) min = 0xA0;
            if (b[i] == 0xED) max = 0x9F;
            if (b[i] == 0xF0) min = 0x90;
            if (b[i] == 0xF4) max = 0x8F;
            if (c1 < min || c1 > max) return len;
        }
        return i;
    }
    return len;
}
