/*
 * Data: every source of tokens behind one reader -- text files (memory-mapped, tokenised in
 * pieces), llm.c token files (memory-mapped and used in place), standard input ("-", read into
 * memory: a pipe cannot be mapped) and the built-in corpus. The sources are concatenated in
 * order; the first 90% of the tokens are the training split and the rest validation, unless
 * validation files are given (then those are the validation split). Batches are random windows
 * as nanoGPT's get_batch draws them.
 *
 * What counts as text (checked before tokenising, so a wrong file gets a clear message rather
 * than a vocabulary of junk): no NUL byte anywhere, and at most 2% of the bytes control
 * characters (bytes below 0x20 other than \t \n \v \f \r, and 0x7F). Bytes >= 0x80 are allowed.
 * A file is a token file when it starts with the token file magic (token_file.h).
 */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE /* madvise */
#include "model/fileio.h"
#include "model/rng.h"
#include "model/token_file.h"
#include "model/tokenizer.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define DATA_MAX_CONTROL_PERCENT 2
/* Encoded text is released from memory this many bytes at a time. */
#define DATA_DROP_BYTES ((size_t)64 << 20)

/* One source: its bytes (mapped, or in memory), then its tokens. */
typedef struct shard {
    char *name;                 /* for messages */
    const unsigned char *bytes; /* the file's bytes */
    size_t len;
    void *map;                  /* mmap'd bytes (munmap), or NULL */
    unsigned char *heap;        /* malloc'd bytes (stdin, the built-in corpus), or NULL */
    bool token_file;
    const uint16_t *u16;        /* tokens as uint16 (in the mapping, or in store) ... */
    const int32_t *i32;         /* ... or as int32 (a text encoded with V > 65536) */
    void *store;                /* malloc'd tokens of a text */
    size_t n;                   /* tokens */
    size_t start;               /* offset of its first token in the concatenation */
} shard;

struct vka_data {
    vka_context *ctx;
    const vka_tokenizer *tok;
    vka_tokenizer *own_tok; /* the tokenizer built from the text, or NULL if given */
    shard *shards;
    int n_shards;
    size_t n_all, n_train, n_val; /* validation = tokens [n_train, n_train + n_val) */
    uint64_t text_bytes, text_hash; /* vka_data_text_id */
};

/* 64-bit FNV-1a continued over more bytes (vka_data_text_id's documented hash). */
static uint64_t fnv1a(uint64_t h, const unsigned char *p, size_t len) {
    for (size_t i = 0; i < len; i++) h = (h ^ p[i]) * 0x100000001B3ull;
    return h;
}

/* Let pages of a mapped file below upto (rounded down to a page) leave memory once they have
 * been read: the page cache keeps them, and what is read again faults back in. Touching a whole
 * multi-GB file thus costs DATA_DROP_BYTES of resident memory, not its size. */
static void release(const shard *s, size_t *dropped, size_t upto) {
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    upto = upto / page * page;
    if (!s->map || upto < *dropped + DATA_DROP_BYTES) return;
    madvise((unsigned char *)s->map + *dropped, upto - *dropped, MADV_DONTNEED);
    *dropped = upto;
}

/* FNV-1a of a shard's bytes, continued from h, read a stretch at a time. */
static uint64_t hash_shard(const shard *s, uint64_t h) {
    size_t dropped = 0;
    for (size_t p = 0; p < s->len; p += DATA_DROP_BYTES) {
        size_t k = s->len - p < DATA_DROP_BYTES ? s->len - p : DATA_DROP_BYTES;
        h = fnv1a(h, s->bytes + p, k);
        release(s, &dropped, p + k);
    }
    return h;
}

/* The text rule of the file comment, and the bytes present; sets the error naming the file. */
static vka_result check_text(vka_context *ctx, const shard *s, bool present[256]) {
    size_t control = 0;
    bool seen[256] = {false};
    for (size_t i = 0; i < s->len; i++) {
        unsigned char c = s->bytes[i];
        seen[c] = true;
        if (c == 0)
            return vka_set_error(ctx, VKA_ERROR_FORMAT,
                                 "%s is not a text file: NUL byte at offset %zu", s->name, i);
        if (vkm_is_control_byte(c)) control++;
    }
    if (control * 100 > s->len * DATA_MAX_CONTROL_PERCENT)
        return vka_set_error(ctx, VKA_ERROR_FORMAT,
                             "%s is not a text file: %zu of its %zu bytes are control "
                             "characters (more than %d%%)",
                             s->name, control, s->len, DATA_MAX_CONTROL_PERCENT);
    for (int b = 0; b < 256; b++) present[b] |= seen[b];
    return VKA_SUCCESS;
}

/* All of fd into a malloc'd buffer (standard input, or a file that cannot be mapped). */
static vka_result read_stream(vka_context *ctx, int fd, const char *name, shard *s) {
    size_t cap = 1 << 16, len = 0;
    unsigned char *buf = vka_malloc(ctx, cap);
    for (;;) {
        if (!buf) return vka_set_error(ctx, VKA_ERROR_OUT_OF_HOST_MEMORY, "reading %s: out of "
                                       "memory", name);
        if (len == cap) {
            unsigned char *p = vka_realloc(ctx, buf, cap * 2);
            if (!p) vka_free(ctx, buf);
            buf = p;
            cap *= 2;
            continue;
        }
        ssize_t got = read(fd, buf + len, cap - len);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) {
            int e = errno;
            vka_free(ctx, buf);
            return vka_set_error(ctx, VKA_ERROR_IO, "reading %s: %s", name, strerror(e));
        }
        if (got == 0) break;
        len += (size_t)got;
    }
    s->heap = buf;
    s->bytes = buf;
    s->len = len;
    return VKA_SUCCESS;
}

/* The bytes of one source: mapped when it is a regular file, read when it is a stream. */
static vka_result open_source(vka_context *ctx, const char *path, shard *s) {
    if (!path) {
        size_t len = 0;
        s->heap = (unsigned char *)vkm_builtin_corpus(ctx, 0, &len);
        if (!s->heap)
            return vka_set_error(ctx, VKA_ERROR_OUT_OF_HOST_MEMORY, "built-in corpus: out of memory");
        s->bytes = s->heap;
        s->len = len;
        return VKA_SUCCESS;
    }
    if (strcmp(path, "-") == 0) return read_stream(ctx, 0, s->name, s);
    int fd = open(path, O_RDONLY);
    if (fd < 0) return vka_set_error(ctx, VKA_ERROR_IO, "cannot open %s: %s", path, strerror(errno));
    struct stat st;
    vka_result r = VKA_SUCCESS;
    if (fstat(fd, &st) != 0) {
        r = vka_set_error(ctx, VKA_ERROR_IO, "cannot stat %s: %s", path, strerror(errno));
    } else if (S_ISDIR(st.st_mode)) {
        r = vka_set_error(ctx, VKA_ERROR_IO, "cannot read %s: it is a directory", path);
    } else if (!S_ISREG(st.st_mode)) {
        r = read_stream(ctx, fd, path, s); /* a pipe or a device named by path */
    } else if (st.st_size > 0) {
        void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (m == MAP_FAILED) {
            r = vka_set_error(ctx, VKA_ERROR_IO, "cannot map %s (%lld bytes): %s", path,
                              (long long)st.st_size, strerror(errno));
        } else {
            s->map = m;
            s->bytes = m;
            s->len = (size_t)st.st_size;
        }
    }
    close(fd);
    return r;
}

/* Tokens of a text, encoded in pieces (so the int32 buffer stays small) and stored as uint16
 * when the vocabulary allows. */
static vka_result encode_text(vka_context *ctx, const vka_tokenizer *tok, shard *s) {
    size_t piece_bytes;
    vka_result pr = vkm_text_piece_bytes(ctx, &piece_bytes);
    if (pr != VKA_SUCCESS) return pr;
    bool narrow = vka_tokenizer_vocab_size(tok) <= 65536;
    size_t elem = narrow ? sizeof(uint16_t) : sizeof(int32_t);
    unsigned char *store = vka_malloc(ctx, s->len * elem); /* at most one token per byte */
    int32_t *piece = NULL;
    size_t piece_cap = 0, n = 0, dropped = 0;
    if (!store)
        return vka_set_error(ctx, VKA_ERROR_OUT_OF_HOST_MEMORY, "%s: %zu bytes of tokens: out of "
                             "memory", s->name, s->len * elem);
    if (s->map) posix_madvise(s->map, s->len, POSIX_MADV_SEQUENTIAL);
    vka_result r = VKA_SUCCESS;
    for (size_t p = 0; p < s->len && r == VKA_SUCCESS;) {
        size_t q = vkm_text_next_cut(s->bytes, s->len, p, piece_bytes, true);
        int32_t *out = (int32_t *)(void *)store + n;
        if (narrow) {
            if (q - p > piece_cap) {
                vka_free(ctx, piece);
                piece_cap = q - p;
                piece = vka_malloc(ctx, piece_cap * sizeof *piece);
                if (!piece) {
                    r = vka_set_error(ctx, VKA_ERROR_OUT_OF_HOST_MEMORY, "%s: out of memory",
                                      s->name);
                    break;
                }
            }
            out = piece;
        }
        size_t got = 0;
        r = vka_tokenizer_encode(tok, (const char *)s->bytes + p, q - p, out, &got);
        if (r != VKA_SUCCESS) {
            /* Prefix the tokenizer's message ("byte 'Z' at offset 12 ...") with the file. */
            char msg[VKA_ERROR_MAX];
            snprintf(msg, sizeof msg, "%s", vka_last_error(ctx));
            if (p) vka_set_error(ctx, r, "%s, in the piece from byte %zu: %s", s->name, p, msg);
            else vka_set_error(ctx, r, "%s: %s", s->name, msg);
            break;
        }
        if (narrow)
            for (size_t i = 0; i < got; i++) ((uint16_t *)(void *)store)[n + i] = (uint16_t)piece[i];
        n += got;
        p = q;
        release(s, &dropped, p); /* the text and its tokens are not both held */
    }
    vka_free(ctx, piece);
    if (r != VKA_SUCCESS) {
        vka_free(ctx, store);
        return r;
    }
    if (n < s->len) {
        void *smaller = vka_realloc(ctx, store, (n ? n : 1) * elem);
        if (smaller) store = smaller;
    }
    s->store = store;
    s->n = n;
    if (narrow) s->u16 = s->store;
    else s->i32 = s->store;
    return VKA_SUCCESS;
}

/* The text's bytes are not needed once it is tokenised. */
static void drop_bytes(const vka_context *ctx, shard *s) {
    if (s->map) munmap(s->map, s->len);
    vka_free(ctx, s->heap);
    s->map = NULL;
    s->heap = NULL;
    s->bytes = NULL;
}

static vka_result check_token_ids(vka_context *ctx, const shard *s, int V) {
    size_t bad = SIZE_MAX, dropped = 0, per = DATA_DROP_BYTES / sizeof(uint16_t);
    for (size_t i = 0; i < s->n && bad == SIZE_MAX; i += per) {
        size_t k = s->n - i < per ? s->n - i : per;
        bad = vkm_first_id_at_least(s->u16 + i, k, V);
        if (bad != SIZE_MAX) bad += i;
        release(s, &dropped, VKM_TOKENS_HEADER_BYTES + 2 * (i + k));
    }
    if (bad == SIZE_MAX) return VKA_SUCCESS;
    return vka_set_error(ctx, VKA_ERROR_VOCABULARY, "%s: token %zu (byte offset %zu) is id %u, "
                         "not below the tokenizer's %d tokens", s->name, bad,
                         VKM_TOKENS_HEADER_BYTES + 2 * bad, (unsigned)s->u16[bad], V);
}

/* Every source opened, checked and hashed; the tokenizer chosen; then texts encoded. */
static vka_result load_sources(vka_data *d, const vka_tokenizer *tok) {
    vka_context *ctx = d->ctx;
    bool present[256] = {false}, any_text = false;
    uint64_t hash = 0xCBF29CE484222325ull, bytes = 0;
    const char *first_tokens = NULL;
    for (int i = 0; i < d->n_shards; i++) {
        shard *s = &d->shards[i];
        if (s->len == 0) return vka_set_error(ctx, VKA_ERROR_FORMAT, "%s is empty", s->name);
        hash = hash_shard(s, hash);
        bytes += s->len;
        s->token_file = vkm_is_token_file(s->bytes, s->len);
        vka_result r;
        if (s->token_file) {
            r = vkm_token_file_check(ctx, s->name, s->bytes, s->len, &s->n);
            s->u16 = (const uint16_t *)(const void *)(s->bytes + VKM_TOKENS_HEADER_BYTES);
            if (!first_tokens) first_tokens = s->name;
        } else {
            r = check_text(ctx, s, present);
            any_text = true;
        }
        if (r != VKA_SUCCESS) return r;
    }
    d->text_bytes = bytes;
    d->text_hash = hash;
    if (!tok && !any_text)
        return vka_set_error(ctx, VKA_ERROR_INVALID_ARGUMENT, "%s is a token file: give the "
                             "tokenizer its ids belong to", first_tokens);
    if (!tok) {
        /* The character vocabulary of all the texts: that of their distinct bytes. */
        char distinct[256];
        size_t k = 0;
        for (int b = 0; b < 256; b++)
            if (present[b]) distinct[k++] = (char)b;
        vka_result r = vkm_tokenizer_create_from_text(ctx, distinct, k, false, &d->own_tok);
        if (r != VKA_SUCCESS) return r;
        tok = d->own_tok;
    }
    d->tok = tok;
    int V = vka_tokenizer_vocab_size(tok);
    size_t start = 0;
    for (int i = 0; i < d->n_shards; i++) {
        shard *s = &d->shards[i];
        vka_result r = s->token_file ? check_token_ids(ctx, s, V) : encode_text(ctx, tok, s);
        if (r != VKA_SUCCESS) return r;
        if (!s->token_file) drop_bytes(ctx, s);
        s->start = start;
        start += s->n;
    }
    d->n_all = start;
    return VKA_SUCCESS;
}

vka_result vka_data_open(vka_context *ctx, const vka_data_desc *desc, vka_data **out) {
    if (!out || !desc) return vka_set_error(ctx, VKA_ERROR_INVALID_ARGUMENT, "data: desc or out is NULL");
    *out = NULL;
    if (desc->n_paths < 0 || desc->n_val_paths < 0 || (desc->n_paths && !desc->paths) ||
        (desc->n_val_paths && !desc->val_paths))
        return vka_set_error(ctx, VKA_ERROR_INVALID_ARGUMENT, "data: %d paths and %d validation "
                             "paths, or a NULL list", desc->n_paths, desc->n_val_paths);
    int n_train = desc->n_paths ? desc->n_paths : 1;
    int n = n_train + desc->n_val_paths;
    vka_data *data = vka_calloc(ctx, 1, sizeof *data);
    shard *shards = vka_calloc(ctx, (size_t)n, sizeof *shards);
    if (!data || !shards) {
        vka_free(ctx, data);
        vka_free(ctx, shards);
        return vka_set_error(ctx, VKA_ERROR_OUT_OF_HOST_MEMORY, "data: out of memory");
    }
    data->ctx = ctx;
    vka_context_retain(ctx, VKA_CHILD_DATA);
    data->shards = shards;
    data->n_shards = n;
    vka_result r = VKA_SUCCESS;
    for (int i = 0; i < n && r == VKA_SUCCESS; i++) {
        const char *path = i < n_train ? (desc->n_paths ? desc->paths[i] : NULL)
                                       : desc->val_paths[i - n_train];
        if (i >= n_train && !path) {
            r = vka_set_error(ctx, VKA_ERROR_INVALID_ARGUMENT, "data: validation path %d is NULL",
                              i - n_train);
            break;
        }
        const char *name = !path ? "the built-in corpus"
                           : strcmp(path, "-") == 0 ? "standard input" : path;
        shards[i].name = vka_malloc(ctx, strlen(name) + 1);
        if (!shards[i].name) {
            r = vka_set_error(ctx, VKA_ERROR_OUT_OF_HOST_MEMORY, "data: out of memory");
            break;
        }
        strcpy(shards[i].name, name);
        r = open_source(ctx, path, &shards[i]);
    }
    if (r == VKA_SUCCESS) r = load_sources(data, desc->tok);
    if (r != VKA_SUCCESS) {
        vka_data_destroy(data);
        return r;
    }
    if (desc->n_val_paths) {
        data->n_train = shards[n_train].start;
        data->n_val = data->n_all - data->n_train;
    } else {
        /* nanoGPT's n = int(0.9 * len(data)). */
        data->n_train = (size_t)((uint64_t)data->n_all * 9 / 10);
        data->n_val = data->n_all - data->n_train;
    }
    *out = data;
    return VKA_SUCCESS;
}

vka_result vka_data_load(vka_context *ctx, const char *path, const vka_tokenizer *tok,
                         vka_data **out) {
    vka_data_desc d = {.paths = &path, .n_paths = path ? 1 : 0, .tok = tok};
    return vka_data_open(ctx, &d, out);
}

void vka_data_destroy(vka_data *data) {
    if (!data) return;
    vka_context *ctx = data->ctx;
    vka_tokenizer_destroy(data->own_tok);
    for (int i = 0; i < data->n_shards; i++) {
        drop_bytes(ctx, &data->shards[i]);
        vka_free(ctx, data->shards[i].store);
        vka_free(ctx, data->shards[i].name);
    }
    vka_free(ctx, data->shards);
    vka_free(ctx, data);
    vka_context_release(ctx, VKA_CHILD_DATA);
}

const vka_tokenizer *vka_data_tokenizer(const vka_data *data) { return data ? data->tok : NULL; }

vka_result vka_data_text_id(const vka_data *data, uint64_t *bytes, uint64_t *hash) {
    if (!data) return VKA_ERROR_INVALID_ARGUMENT;
    if (bytes) *bytes = data->text_bytes;
    if (hash) *hash = data->text_hash;
    return VKA_SUCCESS;
}

/* The split's first token in the concatenation and its length; false for an unknown split. */
static bool split_range(const vka_data *data, vka_split split, size_t *base, size_t *n) {
    switch (split) {
    case VKA_SPLIT_TRAIN: *base = 0; *n = data->n_train; return true;
    case VKA_SPLIT_VAL: *base = data->n_train; *n = data->n_val; return true;
    case VKA_SPLIT_ALL: *base = 0; *n = data->n_all; return true;
    }
    return false;
}

size_t vka_data_num_tokens(const vka_data *data, vka_split split) {
    size_t base, n;
    return data && split_range(data, split, &base, &n) ? n : 0;
}

/* Tokens [g, g + n) of the concatenation (in range). */
static void copy_tokens(const vka_data *data, size_t g, size_t n, int32_t *out) {
    int i = 0;
    while (i + 1 < data->n_shards && data->shards[i].start + data->shards[i].n <= g) i++;
    while (n > 0) {
        const shard *s = &data->shards[i++];
        size_t off = g - s->start, k = s->n - off < n ? s->n - off : n;
        if (s->u16)
            for (size_t j = 0; j < k; j++) out[j] = s->u16[off + j];
        else
            memcpy(out, s->i32 + off, k * sizeof *out);
        out += k;
        g += k;
        n -= k;
    }
}

vka_result vka_data_read_tokens(const vka_data *data, vka_split split, size_t off, size_t n,
                                int32_t *out) {
    if (!data) return VKA_ERROR_INVALID_ARGUMENT;
    size_t base, len;
    if (!split_range(data, split, &base, &len))
        return vka_set_error(data->ctx, VKA_ERROR_INVALID_ARGUMENT, "read tokens: unknown split %d",
                             (int)split);
    if (n && !out)
        return vka_set_error(data->ctx, VKA_ERROR_INVALID_ARGUMENT, "read tokens: out is NULL");
    if (off > len || n > len - off)
        return vka_set_error(data->ctx, VKA_ERROR_INVALID_ARGUMENT, "read tokens: %zu tokens from "
                             "%zu are past the split's %zu", n, off, len);
    copy_tokens(data, base + off, n, out);
    return VKA_SUCCESS;
}

vka_result vka_data_batch(const vka_data *data, vka_split split, int B, int T,
                          uint64_t *rng_state, int32_t *inputs, int32_t *targets) {
    if (!data) return VKA_ERROR_INVALID_ARGUMENT;
    if (B <= 0 || T <= 0 || !rng_state || !inputs || !targets)
        return vka_set_error(data->ctx, VKA_ERROR_INVALID_ARGUMENT,
                             "batch: B=%d and T=%d must be positive and the pointers non-NULL", B, T);
    size_t base, n;
    if (split == VKA_SPLIT_ALL || !split_range(data, split, &base, &n))
        return vka_set_error(data->ctx, VKA_ERROR_INVALID_ARGUMENT, "batch: unknown split %d",
                             (int)split);
    if (n < (size_t)T + 1)
        return vka_set_error(data->ctx, VKA_ERROR_INVALID_ARGUMENT,
                             "batch: the %s split has %zu tokens, fewer than T+1 = %d",
                             split == VKA_SPLIT_TRAIN ? "train" : "validation", n, T + 1);
    /* Window starts are uniform over the n - T positions where T+1 tokens fit. */
    for (int b = 0; b < B; b++) {
        size_t start = (size_t)vkm_rng_below(rng_state, (uint64_t)(n - (size_t)T));
        copy_tokens(data, base + start, (size_t)T, inputs + (size_t)b * T);
        copy_tokens(data, base + start + 1, (size_t)T, targets + (size_t)b * T);
    }
    return VKA_SUCCESS;
}
