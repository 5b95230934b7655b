/* Internal declarations shared by the library's files (not installed). */
#ifndef VKA_INTERNAL_H
#define VKA_INTERNAL_H

#include "vkattn.h"
#include "alloc.h"

#include <stdarg.h>
#include <stdio.h>

struct vkb_backend;
struct vkr_device;

#define VKA_ERROR_MAX 1024

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
    void (*destroy_deferred)(vka_context *ctx); /* what the last vka_context_release of a
                                                 * destroy-pending context calls (context.c) */
    vka_host_allocator host;       /* vka_context_desc.host_allocator, or all NULL = libc */
};

/* vka_builtin_corpus with ctx's allocator (corpus.c); freed with vka_free(ctx, ...). */
char *vkm_builtin_corpus(const vka_context *ctx, size_t bytes, size_t *len);

/* ctx is usable: made, not a failed create, not destroyed. Otherwise sets "fn: the context
 * failed to create" (when ctx is not NULL) and returns VKA_ERROR_INVALID_ARGUMENT (error.c). */
vka_result vka_context_usable(vka_context *ctx, const char *fn);
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
