/* llm.c token files: the header check, the writer, and streaming a text into one (see
 * token_file.h). */
#define _POSIX_C_SOURCE 200809L
#include "model/token_file.h"
#include "model/fileio.h"
#include "model/pretokenize.h"
#include "settings.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TOKENS_VERSION 1
#define STREAM_MAX_CONTROL_PERCENT 2

static uint32_t le32(const unsigned char *b) {
    return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

bool vkm_is_token_file(const unsigned char *bytes, size_t len) {
    return len >= 4 && le32(bytes) == VKA_TOKENS_MAGIC;
}

vka_result vkm_token_file_check(vka_context *ctx, const char *name, const unsigned char *bytes,
                                size_t len, size_t *n) {
    *n = 0;
    if (len < VKM_TOKENS_HEADER_BYTES)
        return vka_set_error(ctx, VKA_ERROR_FORMAT, "%s is a token file of %zu bytes, shorter "
                             "than its %d-byte header (truncated)", name, len,
                             VKM_TOKENS_HEADER_BYTES);
    uint32_t version = le32(bytes + 4), count = le32(bytes + 8);
    if (version != TOKENS_VERSION)
        return vka_set_error(ctx, VKA_ERROR_FORMAT, "%s: token file version %u is not supported "
                             "(only version %d, uint16 ids)", name, version, TOKENS_VERSION);
    uint64_t want = VKM_TOKENS_HEADER_BYTES + 2 * (uint64_t)count;
    if ((uint64_t)len != want)
        return vka_set_error(ctx, VKA_ERROR_FORMAT, "%s: the header says %u tokens (%llu bytes "
                             "with the header) but the file is %zu bytes%s", name, count,
                             (unsigned long long)want, len,
                             (uint64_t)len < want ? " (truncated)" : "");
    if (count == 0) return vka_set_error(ctx, VKA_ERROR_FORMAT, "%s holds no tokens", name);
    /* llm.c writes 0 in the rest of the header: anything else is damage or another format. */
    for (int i = 3; i < VKM_TOKENS_HEADER_BYTES / 4; i++)
        if (le32(bytes + 4 * i) != 0)
            return vka_set_error(ctx, VKA_ERROR_FORMAT, "%s: the token file's header is damaged: "
                                 "unused word %d is %u (written as 0)", name, i,
                                 le32(bytes + 4 * i));
    *n = count;
    return VKA_SUCCESS;
}

size_t vkm_first_id_at_least(const uint16_t *ids, size_t n, int V) {
    if (V > 65535) return SIZE_MAX;
    uint16_t v = (uint16_t)V;
    for (size_t i = 0; i < n; i++)
        if (ids[i] >= v) return i;
    return SIZE_MAX;
}

vka_result vkm_text_piece_bytes(vka_context *ctx, size_t *piece) {
    uint64_t v = 0;
    vka_result r = vka_setting_bytes(ctx, VKA_SETTING_TEXT_PIECE_BYTES, 0, &v);
    *piece = r == VKA_SUCCESS && v ? (size_t)v : VKM_TEXT_PIECE_BYTES;
    return r;
}

size_t vkm_text_next_cut(const unsigned char *text, size_t len, size_t start, size_t piece,
                         bool at_end) {
    size_t from = piece < len - start ? start + piece : len;
    return vkm_pretok_cut(text, len, start, from, at_end);
}

static void put_header(unsigned char *h, uint32_t count) {
    memset(h, 0, VKM_TOKENS_HEADER_BYTES);
    const uint32_t w[3] = {VKA_TOKENS_MAGIC, TOKENS_VERSION, count};
    for (int i = 0; i < 3; i++)
        for (int k = 0; k < 4; k++) h[4 * i + k] = (unsigned char)(w[i] >> (8 * k));
}

vka_result vka_tokens_save(vka_context *ctx, const char *path, const int32_t *tokens, size_t n) {
    if (!path || (n && !tokens))
        return vka_set_error(ctx, VKA_ERROR_INVALID_ARGUMENT, "vka_tokens_save: path or tokens "
                             "is NULL");
    if ((uint64_t)n > VKM_TOKENS_MAX_COUNT)
        return vka_set_error(ctx, VKA_ERROR_INVALID_ARGUMENT, "%s: %zu tokens are more than a "
                             "token file holds (%llu)", path, n, VKM_TOKENS_MAX_COUNT);
    uint16_t *ids = vka_malloc(ctx, (n ? n : 1) * sizeof *ids);
    if (!ids) return vka_set_error(ctx, VKA_ERROR_OUT_OF_HOST_MEMORY, "%s: out of memory", path);
    for (size_t i = 0; i < n; i++) {
        if (tokens[i] < 0 || tokens[i] > 65535) {
            vka_free(ctx, ids);
            return vka_set_error(ctx, VKA_ERROR_INVALID_ARGUMENT, "%s: token %zu is id %d; a "
                                 "token file holds ids 0..65535 (uint16)", path, i, tokens[i]);
        }
        ids[i] = (uint16_t)tokens[i];
    }
    unsigned char h[VKM_TOKENS_HEADER_BYTES];
    put_header(h, (uint32_t)n);
    const void *parts[2] = {h, ids};
    size_t sizes[2] = {sizeof h, n * sizeof *ids};
    vka_result r = vka_write_file_atomic(ctx, path, parts, sizes, 2);
    vka_free(ctx, ids);
    return r;
}

/* ---------------------------------------------------------------------------------------------
 * Streaming a text into a token file: bounded memory (a piece of about VKM_TEXT_PIECE_BYTES,
 * more only when a text has no cut for longer), so it works on standard input and on texts
 * larger than memory.
 * ------------------------------------------------------------------------------------------- */

typedef struct stream {
    vka_context *ctx;
    const char *name;      /* the text, for messages */
    int fd;
    unsigned char *buf;    /* buf[0 .. len) read but not yet encoded; buf[0] starts a piece */
    size_t len, cap;
    size_t piece;          /* vkm_text_piece_bytes */
    uint64_t base;         /* offset in the text of buf[0] */
    bool eof;
    uint64_t control;      /* control bytes seen (the text rule of data.c) */
} stream;

/* Read until buf holds at least want bytes or the input ends. */
static vka_result fill(stream *s, size_t want) {
    if (want > s->cap) {
        /* At least 64 KiB: the first read holds a token file's header (told apart by it). */
        size_t cap = s->cap ? s->cap : VKA_MAX(s->piece + 4, (size_t)1 << 16);
        while (cap < want) cap *= 2;
        unsigned char *p = vka_realloc(s->ctx, s->buf, cap);
        if (!p) return vka_set_error(s->ctx, VKA_ERROR_OUT_OF_HOST_MEMORY, "%s: out of memory "
                                     "for a piece of %zu bytes", s->name, cap);
        s->buf = p;
        s->cap = cap;
    }
    while (!s->eof && s->len < want) {
        ssize_t got = read(s->fd, s->buf + s->len, s->cap - s->len);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0)
            return vka_set_error(s->ctx, VKA_ERROR_IO, "reading %s: %s", s->name, strerror(errno));
        if (got == 0) s->eof = true;
        for (size_t i = s->len; i < s->len + (size_t)got; i++) {
            unsigned char c = s->buf[i];
            if (c == 0 && s->base == 0 && vkm_is_token_file(s->buf, s->len + (size_t)got))
                return vka_set_error(s->ctx, VKA_ERROR_FORMAT, "%s is an llm.c token file "
                                     "(already tokenized), not text: train and eval read it "
                                     "as --data as it is", s->name);
            if (c == 0)
                return vka_set_error(s->ctx, VKA_ERROR_FORMAT, "%s is not a text file: NUL byte "
                                     "at offset %llu", s->name,
                                     (unsigned long long)(s->base + i));
            if (vkm_is_control_byte(c)) s->control++;
        }
        s->len += (size_t)got;
    }
    return VKA_SUCCESS;
}

/* The end of the next piece in buf, 0 at the end of the text (reading more while no cut is
 * known in it: a cut needs the code point after it, up to 4 bytes). */
static vka_result next_piece(stream *s, size_t *end) {
    *end = 0;
    vka_result r = fill(s, s->piece + 4);
    while (r == VKA_SUCCESS && s->len > 0) {
        *end = vkm_text_next_cut(s->buf, s->len, 0, s->piece, s->eof);
        if (*end) break;
        r = fill(s, 2 * s->len + 4);
    }
    return r;
}

vka_result vka_tokenize_file(vka_context *ctx, const vka_tokenizer *tok, const char *text_path,
                             const char *out_path, uint64_t *n_tokens, uint64_t *n_bytes) {
    if (n_tokens) *n_tokens = 0;
    if (n_bytes) *n_bytes = 0;
    if (!tok || !text_path || !out_path)
        return vka_set_error(ctx, VKA_ERROR_INVALID_ARGUMENT, "vka_tokenize_file: tok, text_path "
                             "or out_path is NULL");
    int V = vka_tokenizer_vocab_size(tok);
    if (V > 65536)
        return vka_set_error(ctx, VKA_ERROR_INVALID_ARGUMENT, "the tokenizer has %d tokens; a "
                             "token file holds uint16 ids, so at most 65536", V);
    bool is_stdin = strcmp(text_path, "-") == 0;
    stream s = {.ctx = ctx, .name = is_stdin ? "standard input" : text_path, .fd = 0};
    vka_result pr = vkm_text_piece_bytes(ctx, &s.piece);
    if (pr != VKA_SUCCESS) return pr;
    if (!is_stdin) {
        FILE *probe;
        uint64_t size;
        vka_result r = vkm_open_read(ctx, text_path, &probe, &size);
        if (r != VKA_SUCCESS) return r;
        fclose(probe);
        s.fd = open(text_path, O_RDONLY);
        if (s.fd < 0)
            return vka_set_error(ctx, VKA_ERROR_IO, "cannot open %s: %s", text_path, strerror(errno));
    }
    vkm_atomic_file af = {0};
    int32_t *ids = NULL;
    uint16_t *ids16 = NULL;
    size_t ids_cap = 0;
    uint64_t total = 0;
    vka_result r = vkm_atomic_open(ctx, out_path, &af);
    if (r != VKA_SUCCESS) goto done;
    FILE *f = af.f;
    unsigned char h[VKM_TOKENS_HEADER_BYTES];
    put_header(h, 0); /* the count is written at the end */
    if (fwrite(h, 1, sizeof h, f) != sizeof h) goto write_error;
    for (;;) {
        size_t end;
        r = next_piece(&s, &end);
        if (r != VKA_SUCCESS) goto done;
        if (end == 0) break;
        if (end > ids_cap) {
            vka_free(ctx, ids);
            vka_free(ctx, ids16);
            ids = vka_malloc(ctx, end * sizeof *ids);
            ids16 = vka_malloc(ctx, end * sizeof *ids16);
            ids_cap = end;
            if (!ids || !ids16) {
                r = vka_set_error(ctx, VKA_ERROR_OUT_OF_HOST_MEMORY, "%s: out of memory", s.name);
                goto done;
            }
        }
        size_t got = 0;
        r = vka_tokenizer_encode(tok, (const char *)s.buf, end, ids, &got);
        if (r != VKA_SUCCESS) {
            char msg[VKA_ERROR_MAX];
            snprintf(msg, sizeof msg, "%s", vka_last_error(ctx));
            if (s.base) vka_set_error(ctx, r, "%s, in the piece from byte %llu: %s", s.name,
                                      (unsigned long long)s.base, msg);
            else vka_set_error(ctx, r, "%s: %s", s.name, msg);
            goto done;
        }
        if (total + got > VKM_TOKENS_MAX_COUNT) {
            r = vka_set_error(ctx, VKA_ERROR_INVALID_ARGUMENT, "%s: more than %llu tokens, the "
                              "most one token file holds: split the text", s.name,
                              VKM_TOKENS_MAX_COUNT);
            goto done;
        }
        for (size_t i = 0; i < got; i++) ids16[i] = (uint16_t)ids[i];
        if (fwrite(ids16, sizeof *ids16, got, f) != got) goto write_error;
        total += got;
        memmove(s.buf, s.buf + end, s.len - end);
        s.len -= end;
        s.base += end;
    }
    if (s.base == 0) {
        r = vka_set_error(ctx, VKA_ERROR_FORMAT, "%s is empty", s.name);
        goto done;
    }
    if (s.control * 100 > s.base * STREAM_MAX_CONTROL_PERCENT) {
        r = vka_set_error(ctx, VKA_ERROR_FORMAT, "%s is not a text file: %llu of its %llu bytes "
                          "are control characters (more than %d%%)", s.name,
                          (unsigned long long)s.control, (unsigned long long)s.base,
                          STREAM_MAX_CONTROL_PERCENT);
        goto done;
    }
    put_header(h, (uint32_t)total);
    if (fseek(f, 0, SEEK_SET) != 0 || fwrite(h, 1, sizeof h, f) != sizeof h) goto write_error;
    r = vkm_atomic_commit(ctx, &af, 0);
    if (r != VKA_SUCCESS) goto done;
    if (n_tokens) *n_tokens = total;
    if (n_bytes) *n_bytes = s.base;
    goto done;
write_error:
    r = vkm_atomic_commit(ctx, &af, errno ? errno : EIO);
done:
    if (r != VKA_SUCCESS) vkm_atomic_abort(ctx, &af);
    if (!is_stdin && s.fd >= 0) close(s.fd);
    vka_free(ctx, s.buf);
    vka_free(ctx, ids);
    vka_free(ctx, ids16);
    return r;
}
