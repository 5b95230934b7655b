/* The ground floor (alloc.c): host memory through the context's allocator, and the count of the
 * objects created from a context. It calls nothing of the library: every file may use it. */
#ifndef VKA_ALLOC_H
#define VKA_ALLOC_H

#include "vkattn.h"

#include <stddef.h>
#include <stdint.h>

/* The kinds of object created from a context that refer to it (vka_context_retain/release). */
typedef enum vka_child_kind {
    VKA_CHILD_TENSOR,
    VKA_CHILD_GRAPH,
    VKA_CHILD_GPT,
    VKA_CHILD_DATA,
    VKA_CHILD_TOKENIZER,
    VKA_CHILD_SESSION, /* vka_gpt_session (also counted by its model) */
    VKA_CHILD_KINDS
} vka_child_kind;

/* Host memory through ctx's allocator (vka_context_desc.host_allocator; malloc, realloc and
 * free when it has none or ctx is NULL): every block the library allocates goes through these.
 * A size of 0 allocates 1 byte, so NULL always means out of memory; vka_calloc zeroes and
 * fails (NULL) where count * size overflows; vka_realloc(ctx, NULL, n) is vka_malloc. */
void *vka_malloc(const vka_context *ctx, size_t n);
void *vka_calloc(const vka_context *ctx, size_t count, size_t size);
void *vka_realloc(const vka_context *ctx, void *p, size_t n);
void vka_free(const vka_context *ctx, void *p);
char *vka_strdup(const vka_context *ctx, const char *s);

/* A context's own block, zero-filled, from host (all NULL = libc), with ctx->host = host;
 * NULL when out of memory. vka_context_block_free returns it to the same allocator. */
vka_context *vka_context_block_new(vka_host_allocator host);
void vka_context_block_free(vka_context *ctx);

/* Count an object of kind created from ctx (ctx may be NULL: nothing to count). */
void vka_context_retain(vka_context *ctx, vka_child_kind kind);
/* Uncount it when it is destroyed; the last one of a context whose destroy was deferred
 * destroys the context (ctx->destroy_deferred, set by vka_context_create). Call it last: ctx
 * may be freed on return. */
void vka_context_release(vka_context *ctx, vka_child_kind kind);
/* Objects of every kind alive from ctx. */
uint32_t vka_context_live_children(const vka_context *ctx);

#endif
