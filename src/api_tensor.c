/* Public tensors and graphs (include/vkattn.h), on the context's backend. */
#include "api.h"
#include "cpu/convert.h"

#include <stdlib.h>
#include <string.h>

/* vka_tensor_create(_desc), named fn in messages. */
static vka_result tensor_create(vka_context *ctx, const vka_tensor_desc *desc, vka_tensor **out,
                                const char *fn) {
    if (out) *out = NULL;
    vka_result r = vka_context_usable(ctx, fn);
    if (r != VKA_SUCCESS) return r;
    if (!out || !desc)
        return vka_set_error(ctx, VKA_ERROR_INVALID_ARGUMENT, "%s: %s is NULL", fn,
                             out ? "desc" : "out");
    size_t n = desc->n, esize = vka_dtype_size(desc->dtype);
    if (esize == 0)
        return vka_set_error(ctx, VKA_ERROR_INVALID_ARGUMENT,
                             "%s: dtype %d is not a vka_dtype (VKA_F32, VKA_BF16, "
                             "VKA_F16)",
                             fn, (int)desc->dtype);
    if (n == 0)
        return vka_set_error(ctx, VKA_ERROR_INVALID_ARGUMENT,
                             "%s: a tensor needs at least one element (n = 0)", fn);
    uint64_t limit = ctx->be->limits.max_tensor_bytes;
    if (n > limit / esize)
        return vka_set_error(ctx, VKA_ERROR_DEVICE_LIMIT,
                             "%s: %zu %s elements (%.0f bytes) exceed the %s "
                             "device's largest allocation (maxMemoryAllocationSize, or "
                             "VKATTN_MAX_TENSOR_BYTES if lower) of %llu bytes (%llu elements)",
                             fn, n, vka_dtype_string(desc->dtype), (double)n * (double)esize,
                             ctx->be->name, (unsigned long long)limit,
                             (unsigned long long)(limit / esize));
    vka_tensor *t = vka_calloc(ctx, 1, sizeof *t);
    if (!t)
        return vka_set_error(ctx, VKA_ERROR_OUT_OF_HOST_MEMORY, "%s: out of memory", fn);
    t->ctx = ctx;
    size_t words = esize == 4 ? n : n / 2 + n % 2; /* 16-bit: two elements a word */
    const char *name = "tensor";
    r = vkb_arena_create(ctx->be, "vka_tensor", VKB_ARENA_DEVICE, &words, &name, 1, &t->t,
                         &t->arena);
    if (r != VKA_SUCCESS) {
        vka_free(ctx, t);
        return r;
    }
    t->t.dtype = (uint8_t)desc->dtype;
    t->t.pad16 = esize == 2 && n % 2;
    vka_context_retain(ctx, VKA_CHILD_TENSOR);
    *out = t;
    return VKA_SUCCESS;
}

vka_result vka_tensor_create_desc(vka_context *ctx, const vka_tensor_desc *desc,
                                  vka_tensor **out) {
    return tensor_create(ctx, desc, out, "vka_tensor_create_desc");
}

vka_result vka_tensor_create(vka_context *ctx, size_t n, vka_tensor **out) {
    vka_tensor_desc desc = {.n = n};
    return tensor_create(ctx, &desc, out, "vka_tensor_create");
}

vka_dtype vka_tensor_dtype(const vka_tensor *t) { return t ? (vka_dtype)t->t.dtype : VKA_F32; }

vka_result vka_convert(vka_dtype dst_dtype, void *dst, vka_dtype src_dtype, const void *src,
                       size_t n) {
    if (vka_dtype_size(dst_dtype) == 0 || vka_dtype_size(src_dtype) == 0) return VKA_ERROR_INVALID_ARGUMENT;
    if (n == 0) return VKA_SUCCESS;
    if (!dst || !src) return VKA_ERROR_INVALID_ARGUMENT;
    if (dst_dtype == src_dtype) {
        memcpy(dst, src, n * vka_dtype_size(dst_dtype));
        return VKA_SUCCESS;
    }
    unsigned feat = vkc_cvt_features(vkc_cpu_isa());
    if (src_dtype == VKA_F32 && dst_dtype == VKA_BF16) vkc_f32_to_bf16(dst, src, n, feat);
    else if (src_dtype == VKA_F32 && dst_dtype == VKA_F16) vkc_f32_to_f16(dst, src, n, feat);
    else if (src_dtype == VKA_BF16 && dst_dtype == VKA_F32) vkc_bf16_to_f32(dst, src, n, feat);
    else if (src_dtype == VKA_F16 && dst_dtype == VKA_F32) vkc_f16_to_f32(dst, src, n, feat);
    else return VKA_ERROR_INVALID_ARGUMENT; /* bf16 <-> fp16 */
    return VKA_SUCCESS;
}

/* The graph being recorded uses a tensor about to be destroyed: stop recording now, while its
 * buffer exists (a Vulkan command buffer may not be recorded further once a buffer it uses is
 * destroyed), and fail the graph: later ops are ignored and vka_graph_end reports it. */
static void stop_recording(vka_context *ctx, vka_graph *g) {
    vkb_backend *be = ctx->be;
    be->rt->graph_end(be, g->g);
    g->ended = true;
    vkb_fail(be, VKA_ERROR_INVALID_ARGUMENT,
             "vka_tensor_destroy: a tensor the graph being recorded uses was destroyed, so the "
             "graph can never run (vka_graph_end fails)");
    vka_graph_note_status(ctx);
}

/* t is being destroyed: every graph listing it loses it and can no longer run. Only walks the
 * graphs when t is in one (destroying tensors after their graphs costs nothing). */
static void graphs_lose(vka_context *ctx, vka_tensor *t) {
    for (vka_graph *g = ctx->graphs; g && t->graph_uses; g = g->next) {
        for (size_t i = 0; i < g->n_uses; i++) {
            if (g->uses[i] != t) continue;
            /* A submission of the graph may still read or write the tensor. */
            if (g->g && g != ctx->recording) vkb_graph_wait(ctx->be, g->g, UINT64_MAX);
            g->uses[i] = g->uses[--g->n_uses];
            g->lost_tensor = true;
            t->graph_uses--;
            if (g == ctx->recording && !g->ended) stop_recording(ctx, g);
            break;
        }
    }
}

void vka_tensor_destroy(vka_tensor *t) {
    if (!t) return;
    vka_context *ctx = t->ctx;
    if (t->graph_uses) graphs_lose(ctx, t);
    ctx->be->rt->arena_destroy(ctx->be, t->arena);
    vka_free(ctx, t);
    vka_context_release(ctx, VKA_CHILD_TENSOR);
}

size_t vka_tensor_size(const vka_tensor *t) { return t ? vkb_elems(t->t) : 0; }

static vka_result check_range(const vka_tensor *t, const char *fn, size_t off, size_t n,
                              const void *host) {
    if (!t) return VKA_ERROR_INVALID_ARGUMENT;
    if (!host && n)
        return vka_set_error(t->ctx, VKA_ERROR_INVALID_ARGUMENT, "%s: host pointer is NULL", fn);
    size_t elems = vkb_elems(t->t);
    if (off > elems || n > elems - off)
        return vka_set_error(t->ctx, VKA_ERROR_INVALID_ARGUMENT,
                             "%s: elements [%zu, %zu + %zu) are outside the tensor's %zu", fn, off,
                             off, n, elems);
    return VKA_SUCCESS;
}

/* The 32-bit word i of a 16-bit tensor (the backends read and write whole words). */
static vka_result word_read(const vka_tensor *t, size_t i, uint32_t *w) {
    return t->ctx->be->rt->read(t->ctx->be, t->t, i, w, 1);
}

/* 16-bit elements [off, off + n) from src: the whole words between, read-modify-write of a word
 * at either end that holds an element outside the range. */
static vka_result write16(vka_tensor *t, size_t off, const uint16_t *src, size_t n) {
    vkb_backend *be = t->ctx->be;
    vka_result r = VKA_SUCCESS;
    if (off % 2) { /* the first element is a word's high half */
        uint32_t w;
        if ((r = word_read(t, off / 2, &w)) != VKA_SUCCESS) return r;
        w = (w & 0xFFFFu) | (uint32_t)src[0] << 16;
        if ((r = be->rt->write(be, t->t, off / 2, &w, 1)) != VKA_SUCCESS) return r;
        off++, src++, n--;
    }
    size_t whole = n / 2; /* off is even now: whole words, uint16_t pairs in memory order */
    if (whole && (r = be->rt->write(be, t->t, off / 2, src, whole)) != VKA_SUCCESS) return r;
    if (n % 2) { /* the last element is a word's low half */
        uint32_t w;
        size_t i = off / 2 + whole;
        if ((r = word_read(t, i, &w)) != VKA_SUCCESS) return r;
        w = (w & 0xFFFF0000u) | src[n - 1];
        r = be->rt->write(be, t->t, i, &w, 1);
    }
    return r;
}

static vka_result read16(const vka_tensor *t, size_t off, uint16_t *dst, size_t n) {
    vka_result r = VKA_SUCCESS;
    if (off % 2) {
        uint32_t w;
        if ((r = word_read(t, off / 2, &w)) != VKA_SUCCESS) return r;
        dst[0] = (uint16_t)(w >> 16);
        off++, dst++, n--;
    }
    size_t whole = n / 2;
    if (whole && (r = t->ctx->be->rt->read(t->ctx->be, t->t, off / 2, dst, whole)) != VKA_SUCCESS)
        return r;
    if (n % 2) {
        uint32_t w;
        if ((r = word_read(t, off / 2 + whole, &w)) != VKA_SUCCESS) return r;
        dst[n - 1] = (uint16_t)(w & 0xFFFFu);
    }
    return r;
}

vka_result vka_tensor_write(vka_tensor *t, size_t off, const void *src, size_t n) {
    vka_result r = check_range(t, "vka_tensor_write", off, n, src);
    if (r != VKA_SUCCESS || n == 0) return r;
    if (t->t.dtype != VKA_F32) return write16(t, off, src, n);
    return t->ctx->be->rt->write(t->ctx->be, t->t, off, src, n);
}

vka_result vka_tensor_read(const vka_tensor *t, size_t off, void *dst, size_t n) {
    vka_result r = check_range(t, "vka_tensor_read", off, n, dst);
    if (r != VKA_SUCCESS || n == 0) return r;
    if (t->t.dtype != VKA_F32) return read16(t, off, dst, n);
    return t->ctx->be->rt->read(t->ctx->be, t->t, off, dst, n);
}

vka_result vka_graph_begin(vka_context *ctx) {
    vka_result r = vka_context_usable(ctx, "vka_graph_begin");
    if (r != VKA_SUCCESS) return r;
    if (ctx->recording)
        return vka_set_error(ctx, VKA_ERROR_INVALID_ARGUMENT,
                             "vka_graph_begin: already recording a graph (call vka_graph_end "
                             "first)");
    vka_graph *g = vka_calloc(ctx, 1, sizeof *g);
    if (!g)
        return vka_set_error(ctx, VKA_ERROR_OUT_OF_HOST_MEMORY, "vka_graph_begin: out of memory");
    g->ctx = ctx;
    g->serial = ++ctx->graph_serial;
    g->next = ctx->graphs;
    if (ctx->graphs) ctx->graphs->prev = g;
    ctx->graphs = g;
    vka_context_retain(ctx, VKA_CHILD_GRAPH);
    /* A new graph always records (true); on allocation failure g->g stays NULL and graph_end
     * reports it. */
    ctx->be->rt->graph_begin(ctx->be, &g->g);
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

bool vka_graph_note_use(vka_graph *graph, vka_tensor *t) {
    if (t->last_graph == graph->serial) return true; /* listed already: graphs record one at a time */
    if (graph->n_uses == graph->cap_uses) {
        size_t cap = graph->cap_uses ? 2 * graph->cap_uses : 16;
        vka_tensor **uses = vka_realloc(graph->ctx, graph->uses, cap * sizeof *uses);
        if (!uses) return false;
        graph->uses = uses;
        graph->cap_uses = cap;
    }
    graph->uses[graph->n_uses++] = t;
    t->last_graph = graph->serial;
    t->graph_uses++;
    return true;
}

vka_result vka_graph_end(vka_context *ctx, vka_graph **out) {
    if (out) *out = NULL;
    vka_result r = vka_context_usable(ctx, "vka_graph_end");
    if (r != VKA_SUCCESS) return r;
    if (!out) return vka_set_error(ctx, VKA_ERROR_INVALID_ARGUMENT, "vka_graph_end: out is NULL");
    vka_graph *g = ctx->recording;
    if (!g)
        return vka_set_error(ctx, VKA_ERROR_INVALID_ARGUMENT,
                             "vka_graph_end: no graph is being recorded (call vka_graph_begin "
                             "first)");
    if (!g->ended) r = ctx->be->rt->graph_end(ctx->be, g->g);
    vka_graph_note_status(ctx);
    ctx->recording = NULL;
    if (g->ended) r = g->status != VKA_SUCCESS ? g->status : VKA_ERROR_INVALID_ARGUMENT;
    if (r != VKA_SUCCESS && g->first_error[0])
        /* The first failure's message (already logged), even if later ops failed too. */
        snprintf(ctx->error, sizeof ctx->error, "%s", g->first_error);
    if (r != VKA_SUCCESS) {
        /* The graph is released (*out stays NULL) as a failed graph cannot run. */
        vka_graph_destroy(g);
        return r;
    }
    *out = g;
    return VKA_SUCCESS;
}

/* The graph can run: recorded, and none of its tensors destroyed. */
static vka_result runnable(vka_graph *graph, const char *fn) {
    if (!graph) return VKA_ERROR_INVALID_ARGUMENT;
    if (graph->lost_tensor)
        return vka_set_error(graph->ctx, VKA_ERROR_INVALID_ARGUMENT,
                             "%s: a tensor this graph uses was destroyed, so it can no longer "
                             "run (destroy the graph, or record it again)", fn);
    if (graph->ctx->recording == graph)
        return vka_set_error(graph->ctx, VKA_ERROR_INVALID_ARGUMENT,
                             "%s: the graph is still being recorded (call vka_graph_end)", fn);
    return VKA_SUCCESS;
}

vka_result vka_graph_run(vka_graph *graph) {
    vka_result r = runnable(graph, "vka_graph_run");
    if (r != VKA_SUCCESS) return r;
    return graph->ctx->be->rt->graph_run(graph->ctx->be, graph->g);
}

vka_result vka_graph_submit(vka_graph *graph, const vka_submit_desc *desc) {
    vka_result r = runnable(graph, "vka_graph_submit");
    if (r != VKA_SUCCESS) return r;
    return vkb_graph_submit(graph->ctx->be, graph->g, desc);
}

vka_result vka_graph_wait(vka_graph *graph, uint64_t timeout_ns) {
    if (!graph) return VKA_ERROR_INVALID_ARGUMENT;
    if (graph->ctx->recording == graph) return VKA_SUCCESS; /* never submitted */
    return vkb_graph_wait(graph->ctx->be, graph->g, timeout_ns);
}

vka_result vka_graph_record(vka_graph *graph, void *command_buffer) {
    vka_result r = runnable(graph, "vka_graph_record");
    if (r != VKA_SUCCESS) return r;
    return vkb_graph_record(graph->ctx->be, graph->g, command_buffer);
}

vka_result vka_graph_check(vka_graph *graph) {
    vka_result r = runnable(graph, "vka_graph_check");
    if (r != VKA_SUCCESS) return r;
    return vkb_graph_check(graph->ctx->be, graph->g);
}

vka_result vka_tensor_wrap_vulkan_buffer(vka_context *ctx, const void *buffer, uint64_t offset,
                                         uint64_t size, vka_tensor **out) {
    if (out) *out = NULL;
    vka_result r = vka_context_usable(ctx, "vka_tensor_wrap_vulkan_buffer");
    if (r != VKA_SUCCESS) return r;
    if (!out)
        return vka_set_error(ctx, VKA_ERROR_INVALID_ARGUMENT,
                             "vka_tensor_wrap_vulkan_buffer: out is NULL");
    vka_tensor *t = vka_calloc(ctx, 1, sizeof *t);
    if (!t)
        return vka_set_error(ctx, VKA_ERROR_OUT_OF_HOST_MEMORY,
                             "vka_tensor_wrap_vulkan_buffer: out of memory");
    t->ctx = ctx;
    r = vkb_arena_wrap(ctx->be, buffer, offset, size, &t->t, &t->arena);
    if (r != VKA_SUCCESS) {
        vka_free(ctx, t);
        return r;
    }
    vka_context_retain(ctx, VKA_CHILD_TENSOR);
    *out = t;
    return VKA_SUCCESS;
}

vka_result vka_tensor_vulkan_buffer(const vka_tensor *t, void *buffer, uint64_t *offset,
                                    uint64_t *size) {
    if (!t) return VKA_ERROR_INVALID_ARGUMENT;
    return vkb_buffer_of(t->ctx->be, t->t, buffer, offset, size);
}

vka_graph *vka_graph_handle_create(vka_context *ctx) {
    vka_graph *h = vka_calloc(ctx, 1, sizeof *h);
    if (!h) return NULL;
    h->ctx = ctx;
    h->owned = true;
    return h;
}

void vka_graph_handle_destroy(vka_graph *handle) { vka_free(handle ? handle->ctx : NULL, handle); }

void vka_graph_destroy(vka_graph *graph) {
    if (!graph || graph->owned) return;
    vka_context *ctx = graph->ctx;
    if (ctx->recording == graph) ctx->recording = NULL;
    for (size_t i = 0; i < graph->n_uses; i++) graph->uses[i]->graph_uses--;
    if (graph->prev) graph->prev->next = graph->next;
    else ctx->graphs = graph->next;
    if (graph->next) graph->next->prev = graph->prev;
    ctx->be->rt->graph_destroy(ctx->be, graph->g);
    vka_free(ctx, graph->uses);
    vka_free(ctx, graph);
    vka_context_release(ctx, VKA_CHILD_GRAPH);
}

vka_result vka_context_set_profiling(vka_context *ctx, bool enable) {
    vka_result r = vka_context_usable(ctx, "vka_context_set_profiling");
    if (r != VKA_SUCCESS) return r;
    ctx->be->rt->set_profiling(ctx->be, enable);
    ctx->profiling = enable;
    return VKA_SUCCESS;
}

vka_result vka_graph_times(const vka_graph *graph, double *total_ms, vka_op_time *out, int cap,
                           int *count) {
    if (!graph) return VKA_ERROR_INVALID_ARGUMENT;
    vka_context *ctx = graph->ctx;
    if (cap < 0)
        return vka_set_error(ctx, VKA_ERROR_INVALID_ARGUMENT,
                             "vka_graph_times: cap = %d is negative", cap);
    return ctx->be->rt->graph_times(ctx->be, graph->g, total_ms, out, cap, count);
}
