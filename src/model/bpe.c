/*
 * Byte-level BPE as GPT-2 (Radford et al. 2019; openai/gpt-2 encoder.py) and tiktoken do it:
 * text is split into pieces by GPT-2's pattern, then within each piece adjacent tokens are
 * merged, lowest rank first, the rank of a byte string being its token id (tiktoken's
 * byte_pair_merge; GPT-2's ids are in merge order). And learning such a vocabulary from a text
 * (Sennrich et al. 2016's algorithm on bytes, with incremental pair counts).
 *
 * The pieces come from GPT-2's pre-tokenizer (pretokenize.c: GPT-2's pattern matched by hand
 * with the Unicode classes of its reference). A byte that is not UTF-8 is a piece of its own
 * (docs/files.md, "Tokenizers").
 */
#include "model/pretokenize.h"
#include "model/tokenizer.h"

#include <stdlib.h>
#include <string.h>

static const char EOT_BYTES[] = "<|endoftext|>";

#define NO_ID INT32_MAX

struct vkm_bpe {
    const vka_context *ctx; /* whose allocator its blocks come from */
    int32_t *slots;    /* open addressing: token id or -1; (mask + 1) slots */
    uint32_t mask;
};

static uint32_t hash_bytes(const unsigned char *b, size_t n) {
    uint32_t h = 2166136261u; /* FNV-1a */
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 16777619u;
    return h;
}

typedef vka_result (*piece_fn)(void *user, const unsigned char *piece, size_t n);

/* Call fn on each piece of text in order. */
static vka_result split_pieces(const unsigned char *text, size_t len, piece_fn fn, void *user) {
    vka_result r = VKA_SUCCESS;
    for (size_t pos = 0; pos < len && r == VKA_SUCCESS;) {
        size_t end = vkm_pretok_piece(text, len, pos);
        r = fn(user, text + pos, end - pos);
        pos = end;
    }
    return r;
}

/* A token's bytes for a message: up to 24 of them, printable ASCII as is, others as \xNN. */
typedef struct token_name {
    char s[24 * 4 + 8];
} token_name;

static token_name show_token(const unsigned char *b, unsigned n) {
    token_name t;
    size_t p = 0;
    t.s[p++] = '"';
    for (unsigned i = 0; i < n && i < 24; i++) {
        if (b[i] >= 0x20 && b[i] < 0x7F && b[i] != '"' && b[i] != '\\')
            t.s[p++] = (char)b[i];
        else
            p += (size_t)snprintf(t.s + p, sizeof t.s - p, "\\x%02X", b[i]);
    }
    if (n > 24) p += (size_t)snprintf(t.s + p, sizeof t.s - p, "...");
    snprintf(t.s + p, sizeof t.s - p, "\"");
    return t;
}

/* ---------------------------------------------------------------------------------------------
 * The table: byte string -> id
 * ------------------------------------------------------------------------------------------- */

static int32_t lookup(const vka_tokenizer *tok, const unsigned char *b, size_t n) {
    const vkm_bpe *bpe = tok->bpe;
    for (uint32_t s = hash_bytes(b, n) & bpe->mask;; s = (s + 1) & bpe->mask) {
        int32_t id = bpe->slots[s];
        if (id < 0) return -1;
        uint32_t o = tok->off[id];
        if (tok->off[id + 1] - o == n && memcmp(tok->bytes + o, b, n) == 0) return id;
    }
}

vka_result vkm_bpe_create(vka_tokenizer *tok, const char *name) {
    for (int b = 0; b < 256; b++)
        if (tok->id_of[b] < 0)
            return vka_set_error(tok->ctx, VKA_ERROR_FORMAT,
                                 "%s: a byte-level BPE vocabulary (tokens longer than one byte) "
                                 "must have each of the 256 bytes as a token, but byte 0x%02X is "
                                 "missing", name, b);
    vkm_bpe *bpe = vka_calloc(tok->ctx, 1, sizeof *bpe);
    if (!bpe) return vka_set_error(tok->ctx, VKA_ERROR_OUT_OF_HOST_MEMORY, "tokenizer: out of memory");
    tok->bpe = bpe;
    bpe->ctx = tok->ctx;
    uint32_t size = 1024;
    while (size < 2u * (uint32_t)tok->V) size *= 2;
    bpe->mask = size - 1;
    bpe->slots = vka_malloc(tok->ctx, size * sizeof *bpe->slots);
    if (!bpe->slots)
        return vka_set_error(tok->ctx, VKA_ERROR_OUT_OF_HOST_MEMORY, "tokenizer: out of memory");
    memset(bpe->slots, 0xFF, size * sizeof *bpe->slots);
    for (int i = 0; i < tok->V; i++) {
        const unsigned char *b = tok->bytes + tok->off[i];
        size_t n = tok->off[i + 1] - tok->off[i];
        uint32_t s = hash_bytes(b, n) & bpe->mask;
        for (;; s = (s + 1) & bpe->mask) {
            int32_t id = bpe->slots[s];
            if (id < 0) break;
            if (tok->off[id + 1] - tok->off[id] == n && memcmp(tok->bytes + tok->off[id], b, n) == 0)
                return vka_set_error(tok->ctx, VKA_ERROR_FORMAT,
                                     "%s: tokens %d and %d are the same bytes, %s", name, id, i,
                                     show_token(b, (unsigned)n).s);
        }
        bpe->slots[s] = i;
    }
    return VKA_SUCCESS;
}

void vkm_bpe_destroy(vkm_bpe *bpe) {
    if (!bpe) return;
    vka_free(bpe->ctx, bpe->slots);
    vka_free(bpe->ctx, bpe);
}

/* ---------------------------------------------------------------------------------------------
 * Encoding
 * ------------------------------------------------------------------------------------------- */

/* A merge candidate: the part starting at byte `at` and the next one make token `rank`. */
typedef struct cand {
    int32_t rank;
    uint32_t at;
} cand;

static bool cand_less(cand a, cand b) { return a.rank < b.rank || (a.rank == b.rank && a.at < b.at); }

static void heap_push(cand *h, size_t *n, cand c) {
    size_t i = (*n)++;
    while (i > 0 && cand_less(c, h[(i - 1) / 2])) {
        h[i] = h[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h[i] = c;
}

static cand heap_pop(cand *h, size_t *n) {
    cand top = h[0], last = h[--(*n)];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= *n) break;
        if (c + 1 < *n && cand_less(h[c + 1], h[c])) c++;
        if (!cand_less(h[c], last)) break;
        h[i] = h[c];
        i = c;
    }
    if (*n) h[i] = last;
    return top;
}

/* Scratch space for one piece, grown as needed, reused across pieces. Parts are named by the
 * byte they start at: next[i] is where the part after part i starts (n at the end). */
typedef struct encoder {
    const vka_tokenizer *tok;
    int32_t *out;
    size_t n_out;
    size_t cap;
    uint32_t *next, *prev;
    int32_t *id, *rank; /* part i's token, and the rank of merging it with the next (NO_ID: none) */
    cand *heap;
} encoder;

static vka_result reserve(encoder *e, size_t n) {
    if (n <= e->cap) return VKA_SUCCESS;
    size_t cap = e->cap ? e->cap : 64;
    while (cap < n) cap *= 2;
    uint32_t *next = vka_realloc(e->tok->ctx, e->next, cap * sizeof *next);
    if (next) e->next = next;
    uint32_t *prev = vka_realloc(e->tok->ctx, e->prev, cap * sizeof *prev);
    if (prev) e->prev = prev;
    int32_t *id = vka_realloc(e->tok->ctx, e->id, cap * sizeof *id);
    if (id) e->id = id;
    int32_t *rank = vka_realloc(e->tok->ctx, e->rank, cap * sizeof *rank);
    if (rank) e->rank = rank;
    cand *heap = vka_realloc(e->tok->ctx, e->heap, 3 * cap * sizeof *heap);
    if (heap) e->heap = heap;
    if (!next || !prev || !id || !rank || !heap)
        return vka_set_error(e->tok->ctx, VKA_ERROR_OUT_OF_HOST_MEMORY, "encode: out of memory");
    e->cap = cap;
    return VKA_SUCCESS;
}

/* The token that merging part i with the next would make, or NO_ID (never end-of-text). */
static int32_t pair_rank(const encoder *e, const unsigned char *p, size_t n, uint32_t i) {
    uint32_t j = e->next[i];
    if (j >= n) return NO_ID;
    uint32_t end = e->next[j];
    if (end - i > VKA_TOKENIZER_MAX_TOKEN_BYTES) return NO_ID;
    int32_t id = lookup(e->tok, p + i, end - i);
    return id < 0 || id == e->tok->eot ? NO_ID : id;
}

static vka_result encode_piece(void *user, const unsigned char *p, size_t n) {
    encoder *e = user;
    const vka_tokenizer *tok = e->tok;
    if (n == 1) {
        e->out[e->n_out++] = tok->id_of[p[0]];
        return VKA_SUCCESS;
    }
    vka_result r = reserve(e, n);
    if (r != VKA_SUCCESS) return r;
    for (uint32_t i = 0; i < n; i++) {
        e->next[i] = i + 1;
        e->prev[i] = i - 1; /* UINT32_MAX for the first */
        e->id[i] = tok->id_of[p[i]];
    }
    size_t nh = 0;
    for (uint32_t i = 0; i + 1 < n; i++) {
        e->rank[i] = pair_rank(e, p, n, i);
        if (e->rank[i] != NO_ID) heap_push(e->heap, &nh, (cand){e->rank[i], i});
    }
    e->rank[n - 1] = NO_ID;
    while (nh > 0) {
        cand c = heap_pop(e->heap, &nh);
        /* Stale: the part was merged into its left neighbour, or its right neighbour changed
         * (a longer concatenation has another id). */
        if (e->id[c.at] < 0 || e->rank[c.at] != c.rank) continue;
        uint32_t i = c.at, j = e->next[i];
        e->id[i] = c.rank;
        e->id[j] = -1;
        e->next[i] = e->next[j];
        if (e->next[i] < n) e->prev[e->next[i]] = i;
        e->rank[i] = pair_rank(e, p, n, i);
        if (e->rank[i] != NO_ID) heap_push(e->heap, &nh, (cand){e->rank[i], i});
        uint32_t h = e->prev[i];
        if (h != UINT32_MAX) {
            e->rank[h] = pair_rank(e, p, n, h);
            if (e->rank[h] != NO_ID) heap_push(e->heap, &nh, (cand){e->rank[h], h});
        }
    }
    for (uint32_t i = 0; i < n; i = e->next[i]) e->out[e->n_out++] = e->id[i];
    return VKA_SUCCESS;
}

vka_result vkm_bpe_encode(const vka_tokenizer *tok, const char *text, size_t len, int32_t *out,
                          size_t *n_out) {
    encoder e = {.tok = tok, .out = out};
    vka_result r = split_pieces((const unsigned char *)text, len, encode_piece, &e);
    *n_out = r == VKA_SUCCESS ? e.n_out : 0;
    vka_free(tok->ctx, e.next);
    vka_free(tok->ctx, e.prev);
    vka_free(tok->ctx, e.id);
    vka_free(tok->ctx, e.rank);
    vka_free(tok->ctx, e.heap);
    return r;
}

/* ---------------------------------------------------------------------------------------------
 * Learning
 *
 * The text's pieces are counted once (a word = a distinct piece, with its count); each word is
 * a sequence of token ids, first its bytes. A table holds, per adjacent pair (a, b), its count
 * over all words (times their counts) and the words it occurs in (a superset: stale entries are
 * skipped). A max-heap of (count, pair) entries gives the next merge; an entry whose count is
 * no longer the pair's is stale (every change pushes a fresh one). A merge rewrites only the
 * words holding the pair, adjusting the counts of the pairs around each occurrence.
 * ------------------------------------------------------------------------------------------- */

typedef struct pair_entry {
    uint64_t key;     /* a << 32 | b; UINT64_MAX = empty slot */
    int64_t count;
    uint32_t *words;  /* words the pair occurs in (maybe with repeats and stale ones) */
    uint32_t n_words, cap_words;
} pair_entry;

typedef struct heap_entry {
    int64_t count;
    uint64_t key;
} heap_entry;

typedef struct learner {
    vka_context *ctx;
    const unsigned char *text;
    /* words */
    uint32_t *word_slots, word_mask;   /* piece bytes -> word */
    uint32_t n_words, cap_words;
    size_t *word_at;                   /* (n_words) where the piece starts in text */
    uint32_t *word_len0;               /* (n_words) its length in bytes */
    int64_t *word_count;
    size_t *sym_at;                    /* (n_words) where its ids start in sym */
    uint32_t *sym_len;                 /* (n_words) how many ids it has now */
    int32_t *sym;
    uint32_t *stamp;                   /* (n_words) last merge step that rewrote the word */
    /* pairs */
    pair_entry *pairs;
    uint32_t pair_mask, n_pairs;
    uint64_t *touched;                 /* pairs changed by the current merge */
    uint32_t n_touched, cap_touched;
    heap_entry *heap;
    size_t n_heap, cap_heap;
    /* tokens */
    unsigned char *bytes;
    uint32_t *off;
    int V, cap_V;
    int32_t *tok_slots;                /* token bytes -> id */
    uint32_t tok_mask;
    bool oom;
} learner;

static bool grow(const vka_context *ctx, void **p, uint32_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return true;
    size_t c = *cap ? *cap : 1024;
    while (c < need) c *= 2;
    void *q = vka_realloc(ctx, *p, c * elem);
    if (!q) return false;
    *p = q;
    *cap = (uint32_t)c;
    return true;
}

static vka_result count_piece(void *user, const unsigned char *p, size_t n) {
    learner *L = user;
    uint32_t s = hash_bytes(p, n) & L->word_mask;
    for (;; s = (s + 1) & L->word_mask) {
        uint32_t w = L->word_slots[s];
        if (w == UINT32_MAX) break;
        if (L->word_len0[w] == n && memcmp(L->text + L->word_at[w], p, n) == 0) {
            L->word_count[w]++;
            return VKA_SUCCESS;
        }
    }
    uint32_t w = L->n_words;
    if (w == L->cap_words) {
        uint32_t cap = L->cap_words ? 2 * L->cap_words : 4096;
        size_t *at = vka_realloc(L->ctx, L->word_at, cap * sizeof *at);
        if (at) L->word_at = at;
        uint32_t *len0 = vka_realloc(L->ctx, L->word_len0, cap * sizeof *len0);
        if (len0) L->word_len0 = len0;
        int64_t *wc = vka_realloc(L->ctx, L->word_count, cap * sizeof *wc);
        if (wc) L->word_count = wc;
        if (!at || !len0 || !wc)
            return vka_set_error(L->ctx, VKA_ERROR_OUT_OF_HOST_MEMORY, "tokenizer learn: out of memory");
        L->cap_words = cap;
    }
    L->word_at[w] = (size_t)(p - L->text);
    L->word_len0[w] = (uint32_t)n;
    L->word_count[w] = 1;
    L->word_slots[s] = w;
    L->n_words++;
    if (L->n_words * 2 > L->word_mask) { /* rehash at half full */
        uint32_t size = (L->word_mask + 1) * 2;
        uint32_t *slots = vka_malloc(L->ctx, size * sizeof *slots);
        if (!slots) return vka_set_error(L->ctx, VKA_ERROR_OUT_OF_HOST_MEMORY, "tokenizer learn: out of memory");
        memset(slots, 0xFF, size * sizeof *slots);
        for (uint32_t v = 0; v < L->n_words; v++) {
            uint32_t t = hash_bytes(L->text + L->word_at[v], L->word_len0[v]) & (size - 1);
            while (slots[t] != UINT32_MAX) t = (t + 1) & (size - 1);
            slots[t] = v;
        }
        vka_free(L->ctx, L->word_slots);
        L->word_slots = slots;
        L->word_mask = size - 1;
    }
    return VKA_SUCCESS;
}

static uint32_t hash_key(uint64_t k) {
    k ^= k >> 33;
    k *= 0xFF51AFD7ED558CCDull;
    k ^= k >> 33;
    return (uint32_t)k;
}

static bool pairs_resize(learner *L, uint32_t size) {
    pair_entry *t = vka_malloc(L->ctx, size * sizeof *t);
    if (!t) return false;
    for (uint32_t i = 0; i < size; i++) t[i] = (pair_entry){.key = UINT64_MAX};
    if (L->pairs)
        for (uint32_t i = 0; i <= L->pair_mask; i++) {
            if (L->pairs[i].key == UINT64_MAX) continue;
            uint32_t s = hash_key(L->pairs[i].key) & (size - 1);
            while (t[s].key != UINT64_MAX) s = (s + 1) & (size - 1);
            t[s] = L->pairs[i];
        }
    vka_free(L->ctx, L->pairs);
    L->pairs = t;
    L->pair_mask = size - 1;
    return true;
}

/* The slot of pair key, inserted if new (UINT32_MAX: out of memory). Pairs are never removed
 * (a count can drop to 0), so slots stay valid until the next insertion. */
static uint32_t pair_slot(learner *L, uint64_t key) {
    uint32_t s = hash_key(key) & L->pair_mask;
    for (;; s = (s + 1) & L->pair_mask) {
        if (L->pairs[s].key == key) return s;
        if (L->pairs[s].key == UINT64_MAX) break;
    }
    if ((L->n_pairs + 1) * 2 > L->pair_mask) {
        if (!pairs_resize(L, (L->pair_mask + 1) * 2)) return UINT32_MAX;
        return pair_slot(L, key);
    }
    L->pairs[s].key = key;
    L->n_pairs++;
    return s;
}

static void touch(learner *L, uint64_t key) {
    if (!grow(L->ctx, (void **)&L->touched, &L->cap_touched, L->n_touched + 1, sizeof *L->touched)) {
        L->oom = true;
        return;
    }
    L->touched[L->n_touched++] = key;
}

/* count(a, b) += delta, noting word w when it grows. */
static void add_pair(learner *L, int32_t a, int32_t b, int64_t delta, uint32_t w) {
    uint32_t s = pair_slot(L, (uint64_t)(uint32_t)a << 32 | (uint32_t)b);
    if (s == UINT32_MAX) {
        L->oom = true;
        return;
    }
    pair_entry *e = &L->pairs[s];
    e->count += delta;
    if (delta > 0 && (e->n_words == 0 || e->words[e->n_words - 1] != w)) {
        if (!grow(L->ctx, (void **)&e->words, &e->cap_words, e->n_words + 1, sizeof *e->words)) {
            L->oom = true;
            return;
        }
        e->words[e->n_words++] = w;
    }
    touch(L, e->key);
}

static bool heap_less(heap_entry x, heap_entry y) { /* x comes out first */
    return x.count > y.count || (x.count == y.count && x.key < y.key);
}

static void lheap_push(learner *L, heap_entry x) {
    if (L->n_heap == L->cap_heap) {
        size_t cap = L->cap_heap ? 2 * L->cap_heap : 4096;
        heap_entry *h = vka_realloc(L->ctx, L->heap, cap * sizeof *h);
        if (!h) {
            L->oom = true;
            return;
        }
        L->heap = h;
        L->cap_heap = cap;
    }
    size_t i = L->n_heap++;
    while (i > 0 && heap_less(x, L->heap[(i - 1) / 2])) {
        L->heap[i] = L->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    L->heap[i] = x;
}

static heap_entry lheap_pop(learner *L) {
    heap_entry top = L->heap[0], last = L->heap[--L->n_heap];
    size_t i = 0, n = L->n_heap;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && heap_less(L->heap[c + 1], L->heap[c])) c++;
        if (!heap_less(L->heap[c], last)) break;
        L->heap[i] = L->heap[c];
        i = c;
    }
    if (n) L->heap[i] = last;
    return top;
}

static uint32_t tok_len(const learner *L, int32_t id) { return L->off[id + 1] - L->off[id]; }

/* Push the pair in slot s if it can be merged: it occurs twice and is not too long. */
static void offer(learner *L, uint32_t s) {
    const pair_entry *e = &L->pairs[s];
    int32_t a = (int32_t)(e->key >> 32), b = (int32_t)(uint32_t)e->key;
    if (e->count >= 2 && tok_len(L, a) + tok_len(L, b) <= VKA_TOKENIZER_MAX_TOKEN_BYTES)
        lheap_push(L, (heap_entry){e->count, e->key});
}

static int32_t tok_find(const learner *L, const unsigned char *b, size_t n) {
    for (uint32_t s = hash_bytes(b, n) & L->tok_mask;; s = (s + 1) & L->tok_mask) {
        int32_t id = L->tok_slots[s];
        if (id < 0) return -1;
        if (tok_len(L, id) == n && memcmp(L->bytes + L->off[id], b, n) == 0) return id;
    }
}

/* Append a token (the table has room for every token learning can make). */
static void tok_add(learner *L, const unsigned char *b, size_t n) {
    memcpy(L->bytes + L->off[L->V], b, n);
    L->off[L->V + 1] = L->off[L->V] + (uint32_t)n;
    uint32_t s = hash_bytes(b, n) & L->tok_mask;
    while (L->tok_slots[s] >= 0) s = (s + 1) & L->tok_mask;
    L->tok_slots[s] = L->V;
    L->V++;
}

/* Replace every (a, b) in word w by t, left to right, updating the pair counts around each. */
static void merge_word(learner *L, uint32_t w, int32_t a, int32_t b, int32_t t) {
    int32_t *s = L->sym + L->sym_at[w];
    uint32_t n = L->sym_len[w], o = 0;
    int64_t c = L->word_count[w];
    for (uint32_t i = 0; i < n;) {
        if (i + 1 < n && s[i] == a && s[i + 1] == b) {
            add_pair(L, a, b, -c, w);
            if (o > 0) {
                add_pair(L, s[o - 1], a, -c, w);
                add_pair(L, s[o - 1], t, c, w);
            }
            if (i + 2 < n) {
                add_pair(L, b, s[i + 2], -c, w);
                add_pair(L, t, s[i + 2], c, w);
            }
            s[o++] = t;
            i += 2;
        } else {
            s[o++] = s[i++];
        }
    }
    L->sym_len[w] = o;
}

static vka_result learn_setup(learner *L, const unsigned char *text, size_t len, int vocab_size) {
    L->text = text;
    L->word_mask = 4095;
    L->word_slots = vka_malloc(L->ctx, (L->word_mask + 1) * sizeof *L->word_slots);
    if (!L->word_slots) return VKA_ERROR_OUT_OF_HOST_MEMORY;
    memset(L->word_slots, 0xFF, (L->word_mask + 1) * sizeof *L->word_slots);
    vka_result r = split_pieces(text, len, count_piece, L);
    if (r != VKA_SUCCESS) return r;
    size_t total = 0;
    for (uint32_t w = 0; w < L->n_words; w++) total += L->word_len0[w];
    L->sym = vka_malloc(L->ctx, total * sizeof *L->sym);
    L->sym_at = vka_malloc(L->ctx, L->n_words * sizeof *L->sym_at);
    L->sym_len = vka_malloc(L->ctx, L->n_words * sizeof *L->sym_len);
    L->stamp = vka_calloc(L->ctx, L->n_words, sizeof *L->stamp);
    /* Tokens: at most vocab_size, each at most VKA_TOKENIZER_MAX_TOKEN_BYTES. */
    L->bytes = vka_malloc(L->ctx, (size_t)vocab_size * VKA_TOKENIZER_MAX_TOKEN_BYTES);
    L->off = vka_malloc(L->ctx, ((size_t)vocab_size + 1) * sizeof *L->off);
    uint32_t ts = 1024;
    while (ts < 2u * (uint32_t)vocab_size) ts *= 2;
    L->tok_mask = ts - 1;
    L->tok_slots = vka_malloc(L->ctx, ts * sizeof *L->tok_slots);
    if (!L->sym || !L->sym_at || !L->sym_len || !L->stamp || !L->bytes || !L->off ||
        !L->tok_slots || !pairs_resize(L, 1 << 16))
        return VKA_ERROR_OUT_OF_HOST_MEMORY;
    memset(L->tok_slots, 0xFF, ts * sizeof *L->tok_slots);
    L->off[0] = 0;
    for (int b = 0; b < 256; b++) {
        unsigned char c = (unsigned char)b;
        tok_add(L, &c, 1);
    }
    size_t at = 0;
    for (uint32_t w = 0; w < L->n_words; w++) {
        const unsigned char *p = text + L->word_at[w];
        L->sym_at[w] = at;
        L->sym_len[w] = L->word_len0[w];
        for (uint32_t i = 0; i < L->word_len0[w]; i++) L->sym[at + i] = p[i];
        for (uint32_t i = 0; i + 1 < L->word_len0[w]; i++)
            add_pair(L, p[i], p[i + 1], L->word_count[w], w);
        at += L->word_len0[w];
    }
    for (uint32_t s = 0; s <= L->pair_mask; s++)
        if (L->pairs[s].key != UINT64_MAX) offer(L, s);
    L->n_touched = 0;
    return L->oom ? VKA_ERROR_OUT_OF_HOST_MEMORY : VKA_SUCCESS;
}

/* One merge; false when no pair occurs twice. */
static bool learn_step(learner *L, uint32_t step) {
    uint32_t s = UINT32_MAX;
    while (L->n_heap > 0) {
        heap_entry h = lheap_pop(L);
        uint32_t t = hash_key(h.key) & L->pair_mask;
        while (L->pairs[t].key != h.key) t = (t + 1) & L->pair_mask;
        if (L->pairs[t].count == h.count) {
            s = t;
            break;
        }
    }
    if (s == UINT32_MAX) return false;
    int32_t a = (int32_t)(L->pairs[s].key >> 32), b = (int32_t)(uint32_t)L->pairs[s].key;
    unsigned char cat[2 * VKA_TOKENIZER_MAX_TOKEN_BYTES];
    uint32_t na = tok_len(L, a), nb = tok_len(L, b);
    memcpy(cat, L->bytes + L->off[a], na);
    memcpy(cat + na, L->bytes + L->off[b], nb);
    int32_t t = tok_find(L, cat, na + nb);
    if (t < 0) {
        t = L->V;
        tok_add(L, cat, na + nb);
    }
    /* The word list is ours now: merging adds words to other pairs only (t differs from a, b). */
    uint32_t *words = L->pairs[s].words, n_words = L->pairs[s].n_words;
    L->pairs[s].words = NULL;
    L->pairs[s].n_words = L->pairs[s].cap_words = 0;
    for (uint32_t i = 0; i < n_words; i++) {
        uint32_t w = words[i];
        if (L->stamp[w] == step) continue;
        L->stamp[w] = step;
        merge_word(L, w, a, b, t);
    }
    vka_free(L->ctx, words);
    /* By key: the table may have grown (moving slots) during the merge. */
    for (uint32_t i = 0; i < L->n_touched; i++) offer(L, pair_slot(L, L->touched[i]));
    L->n_touched = 0;
    return true;
}

static void learner_free(learner *L) {
    vka_free(L->ctx, L->word_slots);
    vka_free(L->ctx, L->word_at);
    vka_free(L->ctx, L->word_len0);
    vka_free(L->ctx, L->word_count);
    vka_free(L->ctx, L->sym_at);
    vka_free(L->ctx, L->sym_len);
    vka_free(L->ctx, L->sym);
    vka_free(L->ctx, L->stamp);
    if (L->pairs)
        for (uint32_t i = 0; i <= L->pair_mask; i++) vka_free(L->ctx, L->pairs[i].words);
    vka_free(L->ctx, L->pairs);
    vka_free(L->ctx, L->touched);
    vka_free(L->ctx, L->heap);
    vka_free(L->ctx, L->tok_slots);
    vka_free(L->ctx, L->bytes);
    vka_free(L->ctx, L->off);
}

vka_result vkm_bpe_learn(vka_tokenizer *tok, const char *text, size_t len, int vocab_size) {
    learner L = {.ctx = tok->ctx};
    vka_result r = learn_setup(&L, (const unsigned char *)text, len, vocab_size);
    for (uint32_t step = 1; r == VKA_SUCCESS && L.V < vocab_size - 1; step++) {
        if (!learn_step(&L, step)) break;
        if (L.oom) r = VKA_ERROR_OUT_OF_HOST_MEMORY;
    }
    if (r == VKA_SUCCESS) {
        tok_add(&L, (const unsigned char *)EOT_BYTES, sizeof EOT_BYTES - 1);
        tok->bytes = L.bytes;
        tok->off = L.off;
        tok->V = L.V;
        tok->eot = L.V - 1;
        L.bytes = NULL;
        L.off = NULL;
    } else if (r == VKA_ERROR_OUT_OF_HOST_MEMORY) {
        r = vka_set_error(tok->ctx, r, "tokenizer learn: out of memory (%zu bytes of text)", len);
    }
    learner_free(&L);
    return r;
}
