/* Internal declarations shared by the library's files (not installed). */
#ifndef VKA_INTERNAL_H
#define VKA_INTERNAL_H

#include "vkattn.h"

#include <stdarg.h>
#include <stdio.h>

struct vkb_backend;
struct vkr_device;

#define VKA_ERROR_MAX 1024

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

struct vka_context {
    vka_backend backend_kind;
    vka_result create_status;      /* != VKA_SUCCESS: a failed create; only errors/destroy work */
    char label[64];
    vka_log_fn log;
    void *log_user_data;
    vka_log_level log_level;
    char error[VKA_ERROR_MAX];     /* vka_last_error */
    struct vkr_device *vk;         /* Vulkan runtime; NULL for the CPU backend */
    struct vkb_backend *be;        /* the backend every op runs on */
    bool profiling;                /* vka_context_set_profiling */
    struct vka_graph *recording;   /* public graph between vka_graph_begin/end, else NULL */
    struct vka_graph *graphs;      /* every live public graph (the recording one too), linked */
    uint64_t graph_serial;         /* serial of the last public graph begun */
    uint32_t children[VKA_CHILD_KINDS]; /* live objects created from this context */
    bool destroy_pending;          /* vka_context_destroy was called with children alive */
    vka_host_allocator host;       /* vka_context_desc.host_allocator, or all NULL = libc */
};

/* Host memory through ctx's allocator (vka_context_desc.host_allocator; malloc, realloc and
 * free when it has none or ctx is NULL): every block the library allocates goes through these.
 * A size of 0 allocates 1 byte, so NULL always means out of memory; vka_calloc zeroes and
 * fails (NULL) where count * size overflows; vka_realloc(ctx, NULL, n) is vka_malloc. */
void *vka_malloc(const vka_context *ctx, size_t n);
void *vka_calloc(const vka_context *ctx, size_t count, size_t size);
void *vka_realloc(const vka_context *ctx, void *p, size_t n);
void vka_free(const vka_context *ctx, void *p);
char *vka_strdup(const vka_context *ctx, const char *s);
/* vka_builtin_corpus with ctx's allocator (corpus.c); freed with vka_free(ctx, ...). */
char *vkm_builtin_corpus(const vka_context *ctx, size_t bytes, size_t *len);

/* ctx is usable: made, not a failed create. Otherwise sets "fn: the context failed to create"
 * (when ctx is not NULL) and returns VKA_ERROR_INVALID_ARGUMENT. */
vka_result vka_context_usable(vka_context *ctx, const char *fn);
/* Count an object of kind created from ctx (ctx may be NULL: nothing to count). */
void vka_context_retain(vka_context *ctx, vka_child_kind kind);
/* Uncount it when it is destroyed; the last one of a context whose destroy was deferred
 * destroys the context. Call it last: ctx may be freed on return. */
void vka_context_release(vka_context *ctx, vka_child_kind kind);

/* Record a detailed message for vka_last_error(ctx) (also logged at ERROR) and return r. */
vka_result vka_set_error(vka_context *ctx, vka_result r, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Log at level if the context has a logger that wants it. */
void vka_log(const vka_context *ctx, vka_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Monotonic clock in milliseconds. */
double vka_now_ms(void);

#define VKA_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))
#define VKA_MIN(a, b) ((a) < (b) ? (a) : (b))
#define VKA_MAX(a, b) ((a) > (b) ? (a) : (b))
#define VKA_CEIL_DIV(a, b) (((a) + (b) - 1) / (b))

#endif
