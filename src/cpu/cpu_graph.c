/* The CPU backend's arenas (zero-filled, 64-byte aligned host allocations) and graphs (a list
 * of recorded commands, run in order): the entries of its table that are not ops. */
#include "cpu/cpu_backend.h"

#include <stdlib.h>
#include <string.h>

#define CPU_ALIGN_BYTES 64 /* chunk start (cache line); tensors start VKB_TENSOR_ALIGN apart */

/* --- memory ------------------------------------------------------------------------------- */

void cpu_arena_destroy(vkb_backend *be, vkb_arena *arena) {
    (void)be;
    if (!arena) return;
    for (int c = 0; c < arena->n_chunks; c++) vka_free(be->ctx, arena->bases ? arena->bases[c] : NULL);
    vka_free(be->ctx, arena->bases);
    vka_free(be->ctx, arena->chunks);
    vka_free(be->ctx, arena->chunk_elems);
    vka_free(be->ctx, arena);
}

/* Allocate the arena's chunks, zero-filled and 64-byte aligned (calloc's zero pages are free). */
static vka_result alloc_chunks(vkb_backend *be, const char *label, vkb_arena *arena) {
    for (int c = 0; c < arena->n_chunks; c++) {
        size_t bytes = arena->chunk_elems[c] * sizeof(float);
        unsigned char *base = vka_calloc(be->ctx, 1, bytes + CPU_ALIGN_BYTES);
        if (!base)
            return vka_set_error(be->ctx, VKA_ERROR_OUT_OF_DEVICE_MEMORY,
                                 "cpu: cannot allocate %zu bytes for chunk %d of arena '%s'",
                                 bytes, c, label);
        arena->bases[c] = base;
        uintptr_t mask = CPU_ALIGN_BYTES - 1;
        arena->chunks[c] = (float *)(((uintptr_t)base + mask) & ~mask);
    }
    return VKA_SUCCESS;
}

vka_result cpu_arena_create(vkb_backend *be, const char *label, vkb_arena_kind kind,
                                   const size_t *sizes, const char *const *names, int count,
                                   vkb_tensor *tensors, vkb_arena **out) {
    *out = NULL;
    if (!label) label = "arena";
    size_t max_elems = be->limits.max_tensor_bytes / sizeof(float);
    for (int i = 0; i < count; i++) {
        if (sizes[i] > max_elems)
            return vka_set_error(be->ctx, VKA_ERROR_DEVICE_LIMIT,
                                 "cpu: tensor %s of arena '%s' has %zu elements; the limit is "
                                 "%llu bytes (%zu elements)",
                                 names && names[i] ? names[i] : "?", label, sizes[i],
                                 (unsigned long long)be->limits.max_tensor_bytes, max_elems);
    }
    vkb_arena *arena = vka_calloc(be->ctx, 1, sizeof *arena);
    size_t n = count > 0 ? (size_t)count : 1;
    uint32_t *chunk_of = vka_malloc(be->ctx, n * sizeof *chunk_of);
    size_t *offset_of = vka_malloc(be->ctx, n * sizeof *offset_of);
    size_t *elems = vka_calloc(be->ctx, n, sizeof *elems);
    vka_result r = VKA_SUCCESS;
    if (!arena || !chunk_of || !offset_of || !elems) {
        r = vka_set_error(be->ctx, VKA_ERROR_OUT_OF_HOST_MEMORY, "cpu: arena '%s': out of memory",
                          label);
        goto done;
    }
    int bad = -1;
    int n_chunks = vkb_arena_layout(sizes, count, be->limits.max_chunk_bytes / sizeof(float),
                                    chunk_of, offset_of, elems, &bad);
    if (n_chunks < 0) {
        r = vka_set_error(be->ctx, VKA_ERROR_DEVICE_LIMIT,
                          "cpu: tensor %s of arena '%s' (%zu elements) exceeds the chunk limit "
                          "of %llu bytes", names && names[bad] ? names[bad] : "?", label,
                          sizes[bad], (unsigned long long)be->limits.max_chunk_bytes);
        goto done;
    }
    arena->chunks = vka_calloc(be->ctx, n_chunks ? (size_t)n_chunks : 1, sizeof *arena->chunks);
    arena->bases = vka_calloc(be->ctx, n_chunks ? (size_t)n_chunks : 1, sizeof *arena->bases);
    if (!arena->chunks || !arena->bases) {
        r = vka_set_error(be->ctx, VKA_ERROR_OUT_OF_HOST_MEMORY, "cpu: arena '%s': out of memory",
                          label);
        goto done;
    }
    arena->n_chunks = n_chunks;
    arena->chunk_elems = elems;
    elems = NULL;
    r = alloc_chunks(be, label, arena);
    if (r != VKA_SUCCESS) goto done;
    for (int i = 0; i < count; i++)
        tensors[i] = (vkb_tensor){.arena = arena, .chunk = chunk_of[i], .offset = offset_of[i],
                                  .n = sizes[i]};
    *out = arena;
    arena = NULL;
done:
    cpu_arena_destroy(be, arena);
    vka_free(be->ctx, chunk_of);
    vka_free(be->ctx, offset_of);
    vka_free(be->ctx, elems);
    return r;
}

static vka_result check_range(vkb_backend *be, const char *what, vkb_tensor t, size_t off,
                              size_t n, const void *host) {
    if (!t.arena || !host)
        return vka_set_error(be->ctx, VKA_ERROR_INVALID_ARGUMENT, "cpu %s: NULL tensor or buffer",
                             what);
    if (off > t.n || n > t.n - off)
        return vka_set_error(be->ctx, VKA_ERROR_INVALID_ARGUMENT,
                             "cpu %s: elements [%zu, %zu + %zu) are outside the tensor's %zu",
                             what, off, off, n, t.n);
    return VKA_SUCCESS;
}

vka_result cpu_write(vkb_backend *be, vkb_tensor t, size_t off, const void *src,
                            size_t n) {
    vka_result r = check_range(be, "write", t, off, n, src);
    if (r == VKA_SUCCESS && n) memcpy(cpu_ptr(t) + off, src, n * sizeof(float));
    return r;
}

vka_result cpu_read(vkb_backend *be, vkb_tensor t, size_t off, void *dst, size_t n) {
    vka_result r = check_range(be, "read", t, off, n, dst);
    if (r == VKA_SUCCESS && n) memcpy(dst, cpu_ptr(t) + off, n * sizeof(float));
    return r;
}

/* --- graphs ------------------------------------------------------------------------------- */

bool cpu_graph_begin(vkb_backend *be, vkb_graph **graph) {
    if (*graph) return false;
    cpu_backend *cb = (cpu_backend *)be;
    be->status = VKA_SUCCESS;
    cb->rec = vka_calloc(be->ctx, 1, sizeof *cb->rec);
    if (!cb->rec) vkb_fail(be, VKA_ERROR_OUT_OF_HOST_MEMORY, "cpu: cannot allocate a graph");
    else cb->rec->profiled = cb->profiling;
    *graph = cb->rec;
    return true;
}

vka_result cpu_graph_end(vkb_backend *be, vkb_graph *graph) {
    cpu_backend *cb = (cpu_backend *)be;
    cb->rec = NULL;
    if (graph) graph->status = be->status;
    return be->status;
}

vka_result cpu_graph_run(vkb_backend *be, vkb_graph *graph) {
    cpu_backend *cb = (cpu_backend *)be;
    if (!graph)
        return vka_set_error(be->ctx, VKA_ERROR_INVALID_ARGUMENT, "cpu: graph_run of NULL graph");
    if (graph->status != VKA_SUCCESS)
        return vka_set_error(be->ctx, graph->status, "cpu: graph_run of a graph that failed (%s)",
                             vka_result_string(graph->status));
    double start = vka_now_ms();
    graph->ran = true;
    for (int i = 0; i < graph->n_cmds; i++) {
        double t0 = graph->profiled ? vka_now_ms() : 0.0;
        vka_result r = graph->cmds[i].run(cb, graph->cmds[i].args);
        if (graph->profiled) graph->cmds[i].ms = vka_now_ms() - t0;
        if (r != VKA_SUCCESS) return r;
    }
    graph->total_ms = vka_now_ms() - start;
    return VKA_SUCCESS;
}

void cpu_set_profiling(vkb_backend *be, bool on) { ((cpu_backend *)be)->profiling = on; }

vka_result cpu_graph_times(vkb_backend *be, vkb_graph *graph, double *total_ms,
                                  vka_op_time *out, int cap, int *count) {
    if (!graph || !graph->ran)
        return vka_set_error(be->ctx, VKA_ERROR_INVALID_ARGUMENT, "graph times: the graph has not run");
    if (total_ms) *total_ms = graph->total_ms;
    int n = 0;
    for (int i = 0; graph->profiled && i < graph->n_cmds; i++)
        vkb_op_time_add(out, out ? cap : 0, &n, graph->cmds[i].name, graph->cmds[i].ms);
    if (count) *count = n;
    return VKA_SUCCESS;
}

void cpu_graph_destroy(vkb_backend *be, vkb_graph *graph) {
    cpu_backend *cb = (cpu_backend *)be;
    if (!graph) return;
    if (cb->rec == graph) cb->rec = NULL;
    for (int i = 0; i < graph->n_cmds; i++) vka_free(be->ctx, graph->cmds[i].args);
    vka_free(be->ctx, graph->cmds);
    vka_free(be->ctx, graph);
}

void *vkc_record(cpu_backend *cb, const char *name, cpu_run_fn run, const void *args, size_t size,
                 size_t extra) {
    vkb_backend *be = &cb->base;
    vkb_graph *g = cb->rec;
    if (be->status != VKA_SUCCESS) return NULL; /* sticky: the graph already failed */
    if (!g) {
        vkb_fail(be, VKA_ERROR_INVALID_ARGUMENT, "cpu: op recorded outside graph_begin/end");
        return NULL;
    }
    if (g->n_cmds == g->cap) {
        int cap = g->cap ? 2 * g->cap : 64;
        cpu_cmd *cmds = vka_realloc(be->ctx, g->cmds, (size_t)cap * sizeof *cmds);
        if (!cmds) {
            vkb_fail(be, VKA_ERROR_OUT_OF_HOST_MEMORY, "cpu: out of memory recording a graph");
            return NULL;
        }
        g->cmds = cmds;
        g->cap = cap;
    }
    void *copy = vka_malloc(be->ctx, size + extra);
    if (!copy) {
        vkb_fail(be, VKA_ERROR_OUT_OF_HOST_MEMORY, "cpu: out of memory recording a graph");
        return NULL;
    }
    memcpy(copy, args, size);
    g->cmds[g->n_cmds++] = (cpu_cmd){.name = name, .run = run, .args = copy};
    return copy;
}
