/* Public tensors and graphs (include/vkattn.h), on the context's backend. */
#include "api.h"

#include <stdlib.h>
#include <string.h>

/* ctx can take calls (made, not a failed create). */
static vka_result usable(vka_context *ctx, const char *fn) {
    if (!ctx) return VKA_ERROR_INVALID_ARGUMENT;
    if (ctx->create_status != VKA_SUCCESS || !ctx->be)
        return vka_set_error(ctx, VKA_ERROR_INVALID_ARGUMENT,
                             "%s: the context failed to create (%s)", fn,
                             vka_result_string(ctx->create_status));
    return VKA_SUCCESS;
}

vka_result vka_tensor_create(vka_context *ctx, size_t n, vka_tensor **out) {
    vka_result r = usable(ctx, "vka_tensor_create");
    if (r != VKA_SUCCESS) return r;
    if (!out)
        return vka_set_error(ctx, VKA_ERROR_INVALID_ARGUMENT, "vka_tensor_create: out is NULL");
    *out = NULL;
    if (n == 0)
        return vka_set_error(ctx, VKA_ERROR_INVALID_ARGUMENT,
                             "vka_tensor_create: a tensor needs at least one element (n = 0)");
    uint64_t limit = ctx->be->limits.max_tensor_bytes;
    if (n > limit / sizeof(float))
        return vka_set_error(ctx, VKA_ERROR_DEVICE_LIMIT,
                             "vka_tensor_create: %zu elements (%.0f bytes) exceed the %s device's "
                             "maxStorageBufferRange of %llu bytes (%llu elements)",
                             n, (double)n * sizeof(float), ctx->be->name,
                             (unsigned long long)limit,
                             (unsigned long long)(limit / sizeof(float)));
    vka_tensor *t = calloc(1, sizeof *t);
    if (!t)
        return vka_set_error(ctx, VKA_ERROR_OUT_OF_HOST_MEMORY, "vka_tensor_create: out of memory");
    t->ctx = ctx;
    const char *name = "tensor";
    r = ctx->be->ops->arena_create(ctx->be, "vka_tensor", VKB_ARENA_DEVICE, &n, &name, 1, &t->t,
                                   &t->arena);
    if (r != VKA_SUCCESS) {
        free(t);
        return r;
    }
    *out = t;
    return VKA_SUCCESS;
}

void vka_tensor_destroy(vka_tensor *t) {
    if (!t) return;
    t->ctx->be->ops->arena_destroy(t->ctx->be, t->arena);
    free(t);
}

size_t vka_tensor_size(const vka_tensor *t) { return t ? t->t.n : 0; }

static vka_result check_range(const vka_tensor *t, const char *fn, size_t off, size_t n,
                              const void *host) {
    if (!t) return VKA_ERROR_INVALID_ARGUMENT;
    if (!host && n)
        return vka_set_error(t->ctx, VKA_ERROR_INVALID_ARGUMENT, "%s: host pointer is NULL", fn);
    if (off > t->t.n || n > t->t.n - off)
        return vka_set_error(t->ctx, VKA_ERROR_INVALID_ARGUMENT,
                             "%s: elements [%zu, %zu + %zu) are outside the tensor's %zu", fn, off,
                             off, n, t->t.n);
    return VKA_SUCCESS;
}

vka_result vka_tensor_write(vka_tensor *t, size_t off, const void *src, size_t n) {
    vka_result r = check_range(t, "vka_tensor_write", off, n, src);
    if (r != VKA_SUCCESS || n == 0) return r;
    return t->ctx->be->ops->write(t->ctx->be, t->t, off, src, n);
}

vka_result vka_tensor_read(const vka_tensor *t, size_t off, void *dst, size_t n) {
    vka_result r = check_range(t, "vka_tensor_read", off, n, dst);
    if (r != VKA_SUCCESS || n == 0) return r;
    return t->ctx->be->ops->read(t->ctx->be, t->t, off, dst, n);
}

vka_result vka_graph_begin(vka_context *ctx) {
    vka_result r = usable(ctx, "vka_graph_begin");
    if (r != VKA_SUCCESS) return r;
    if (ctx->recording)
        return vka_set_error(ctx, VKA_ERROR_INVALID_ARGUMENT,
                             "vka_graph_begin: already recording a graph (call vka_graph_end "
                             "first)");
    vka_graph *g = calloc(1, sizeof *g);
    if (!g)
        return vka_set_error(ctx, VKA_ERROR_OUT_OF_HOST_MEMORY, "vka_graph_begin: out of memory");
    g->ctx = ctx;
    /* A new graph always records (true); on allocation failure g->g stays NULL and graph_end
     * reports it. */
    ctx->be->ops->graph_begin(ctx->be, &g->g);
    ctx->recording = g;
    vka_graph_note_status(ctx);
    return VKA_SUCCESS;
}

void vka_graph_note_status(vka_context *ctx) {
    vka_graph *g = ctx->recording;
    if (!g || g->status != VKA_SUCCESS || ctx->be->status == VKA_SUCCESS) return;
    g->status = ctx->be->status;
    snprintf(g->first_error, sizeof g->first_error, "%s", ctx->error);
}

vka_result vka_graph_end(vka_context *ctx, vka_graph **out) {
    vka_result r = usable(ctx, "vka_graph_end");
    if (r != VKA_SUCCESS) return r;
    if (!out) return vka_set_error(ctx, VKA_ERROR_INVALID_ARGUMENT, "vka_graph_end: out is NULL");
    *out = NULL;
    vka_graph *g = ctx->recording;
    if (!g)
        return vka_set_error(ctx, VKA_ERROR_INVALID_ARGUMENT,
                             "vka_graph_end: no graph is being recorded (call vka_graph_begin "
                             "first)");
    r = ctx->be->ops->graph_end(ctx->be, g->g);
    vka_graph_note_status(ctx);
    ctx->recording = NULL;
    if (r != VKA_SUCCESS) {
        /* The first failure's message (already logged), even if later ops failed too; the
         * graph is released (*out stays NULL) as a failed graph cannot run. */
        if (g->first_error[0]) snprintf(ctx->error, sizeof ctx->error, "%s", g->first_error);
        vka_graph_destroy(g);
        return r;
    }
    *out = g;
    return VKA_SUCCESS;
}

vka_result vka_graph_run(vka_graph *graph) {
    if (!graph) return VKA_ERROR_INVALID_ARGUMENT;
    vka_context *ctx = graph->ctx;
    return ctx->be->ops->graph_run(ctx->be, graph->g);
}

void vka_graph_destroy(vka_graph *graph) {
    if (!graph) return;
    vka_context *ctx = graph->ctx;
    if (ctx->recording == graph) ctx->recording = NULL;
    ctx->be->ops->graph_destroy(ctx->be, graph->g);
    free(graph);
}

vka_result vka_context_set_profiling(vka_context *ctx, bool enable) {
    if (!ctx || ctx->create_status != VKA_SUCCESS) return VKA_ERROR_INVALID_ARGUMENT;
    ctx->be->ops->set_profiling(ctx->be, enable);
    ctx->profiling = enable;
    return VKA_SUCCESS;
}

vka_result vka_graph_times(const vka_graph *graph, double *total_ms, vka_op_time *out, int cap,
                           int *count) {
    if (!graph || cap < 0) return VKA_ERROR_INVALID_ARGUMENT;
    vka_context *ctx = graph->ctx;
    return ctx->be->ops->graph_times(ctx->be, graph->g, total_ms, out, cap, count);
}
