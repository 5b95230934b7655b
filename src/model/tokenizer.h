/* The tokenizer's representation, shared by tokenizer.c (file format, char level, dispatch) and
 * bpe.c (byte-level BPE encode and learn). Not installed. */
#ifndef VKM_TOKENIZER_H
#define VKM_TOKENIZER_H

#include "vka_internal.h"

/* llm.c's tokenizer file magic (docs/files.md). */
#define VKM_TOKENIZER_MAGIC 20240328

typedef struct vkm_bpe vkm_bpe;

struct vka_tokenizer {
    vka_context *ctx;         /* for error messages */
    bool counted;             /* in ctx's count of children (vka_context_retain) */
    vka_tokenizer_kind kind;
    int V;                    /* tokens */
    int eot;                  /* end-of-text id stored in files */
    unsigned char *bytes;     /* every token's bytes, concatenated */
    uint32_t *off;            /* (V + 1): token i is bytes[off[i] .. off[i + 1]) */
    int32_t id_of[256];       /* single byte -> token id, -1 if not a token */
    vkm_bpe *bpe;             /* BPE only: lookup table and pattern (bpe.c) */
};

/* vka_tokenizer_create_from_text, for a tokenizer that is part of another object (a vka_data
 * built from its own text): counted = false leaves it out of the context's count of the
 * objects the application holds (vka_context_destroy names those). */
vka_result vkm_tokenizer_create_from_text(vka_context *ctx, const char *text, size_t len,
                                          bool counted, vka_tokenizer **out);

/* bpe.c. Build the byte-string -> id table and the pattern for tok (bytes, off, V, eot set).
 * name (the file, or "the learned vocabulary") is for messages: VKA_ERROR_FORMAT for two
 * tokens with the same bytes, or a missing single byte. */
vka_result vkm_bpe_create(vka_tokenizer *tok, const char *name);
void vkm_bpe_destroy(vkm_bpe *bpe);
/* GPT-2's pre-tokenizer and merges (vka_tokenizer_encode). out has capacity len. */
vka_result vkm_bpe_encode(const vka_tokenizer *tok, const char *text, size_t len, int32_t *out,
                          size_t *n_out);
/* vka_tokenizer_learn: fills tok->bytes, off, V and eot (kind and the table are the caller's). */
vka_result vkm_bpe_learn(vka_tokenizer *tok, const char *text, size_t len, int vocab_size);

#endif
