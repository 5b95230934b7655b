/* Host memory (vka_context_desc.host_allocator) and the count of a context's children: the one
 * file that calls libc's allocator, and calls nothing else of the library. */
#include "vka_internal.h"

#include <stdlib.h>
#include <string.h>

void *vka_malloc(const vka_context *ctx, size_t n) {
    if (n == 0) n = 1;
    if (ctx && ctx->host.alloc) return ctx->host.alloc(ctx->host.user_data, n);
    return malloc(n);
}

void *vka_calloc(const vka_context *ctx, size_t count, size_t size) {
    if (size && count > SIZE_MAX / size) return NULL;
    size_t n = count * size;
    if (n == 0) n = 1;
    if (!ctx || !ctx->host.alloc) return calloc(1, n); /* libc's may skip zeroing fresh pages */
    void *p = ctx->host.alloc(ctx->host.user_data, n);
    if (p) memset(p, 0, n);
    return p;
}

void *vka_realloc(const vka_context *ctx, void *p, size_t n) {
    if (!p) return vka_malloc(ctx, n);
    if (n == 0) n = 1;
    if (ctx && ctx->host.realloc) return ctx->host.realloc(ctx->host.user_data, p, n);
    return realloc(p, n);
}

void vka_free(const vka_context *ctx, void *p) {
    if (!p) return;
    if (ctx && ctx->host.free)
        ctx->host.free(ctx->host.user_data, p);
    else
        free(p);
}

char *vka_strdup(const vka_context *ctx, const char *s) {
    size_t n = strlen(s) + 1;
    char *c = vka_malloc(ctx, n);
    if (c) memcpy(c, s, n);
    return c;
}

vka_context *vka_context_block_new(vka_host_allocator host) {
    vka_context *ctx = host.alloc ? host.alloc(host.user_data, sizeof *ctx) : malloc(sizeof *ctx);
    if (!ctx) return NULL;
    memset(ctx, 0, sizeof *ctx);
    ctx->host = host;
    return ctx;
}

void vka_context_block_free(vka_context *ctx) {
    vka_host_allocator host = ctx->host; /* ctx's own block goes last */
    if (host.free)
        host.free(host.user_data, ctx);
    else
        free(ctx);
}

uint32_t vka_context_live_children(const vka_context *ctx) {
    uint32_t n = 0;
    for (int k = 0; k < VKA_CHILD_KINDS; k++) n += ctx->children[k];
    return n;
}

void vka_context_retain(vka_context *ctx, vka_child_kind kind) {
    if (ctx) ctx->children[kind]++;
}

void vka_context_release(vka_context *ctx, vka_child_kind kind) {
    if (!ctx) return;
    ctx->children[kind]--;
    if (ctx->destroy_pending && vka_context_live_children(ctx) == 0) ctx->destroy_deferred(ctx);
}
