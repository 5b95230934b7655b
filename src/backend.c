/* Shared by both backends: sticky op failures, the runtime entries' shared parts (vkb_arena_create,
 * vkb_graph_submit, ...), arena layout, encoder-backward buckets. The ops' argument checks are
 * in op_checks.c. */
#include "backend.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

uint64_t vkb_host_memory_bytes(void) {
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : 0;
}

/* Linux's sysfs first: under some hypervisors glibc's sysconf (cpuid) reports ten times the
 * L3 that sysfs and lscpu show (320 against 32 MiB on the 2-core AMD EPYC VM of issue 22). */
static uint64_t sysfs_llc_bytes(void) {
    uint64_t best = 0;
    int best_level = 0;
    for (int i = 0; i < 16; i++) {
        char path[96];
        int level = 0;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/level", i);
        FILE *f = fopen(path, "r");
        if (!f) break;
        if (fscanf(f, "%d", &level) != 1) level = 0;
        fclose(f);
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
        f = fopen(path, "r");
        if (!f) continue;
        unsigned long long v = 0;
        char unit = 0;
        int got = fscanf(f, "%llu%c", &v, &unit);
        fclose(f);
        if (got < 1) continue;
        uint64_t bytes = (uint64_t)v * (unit == 'K' ? 1024u : unit == 'M' ? 1048576u : 1u);
        if (level > best_level || (level == best_level && bytes > best)) {
            best_level = level;
            best = bytes;
        }
    }
    return best;
}

uint64_t vkb_host_llc_bytes(void) {
    uint64_t b = sysfs_llc_bytes();
    if (b) return b;
    long best = 0;
#ifdef _SC_LEVEL3_CACHE_SIZE
    const int names[] = {_SC_LEVEL2_CACHE_SIZE, _SC_LEVEL3_CACHE_SIZE, _SC_LEVEL4_CACHE_SIZE};
    for (int i = 0; i < 3; i++) {
        long v = sysconf(names[i]);
        if (v > best) best = v;
    }
#endif
    return best > 0 ? (uint64_t)best : 0;
}

void vkb_fail(vkb_backend *be, vka_result r, const char *fmt, ...) {
    if (!be || r == VKA_SUCCESS || be->status != VKA_SUCCESS) return; /* first failure wins */
    be->status = r;
    if (!be->ctx) return;
    char msg[VKA_ERROR_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    vka_set_error(be->ctx, r, "%s", msg);
}

size_t vkb_batch_span(int batch, size_t stride, size_t matrix) {
    return (size_t)(batch - 1) * (stride ? stride : matrix) + matrix;
}

vka_result vkb_check_targets(vka_context *ctx, const char *op, const int32_t *targets, size_t n,
                             int V) {
    for (size_t i = 0; i < n; i++)
        if (targets[i] != VKB_IGNORE_TARGET && (targets[i] < 0 || targets[i] >= V))
            return vka_set_error(ctx, VKA_ERROR_INVALID_ARGUMENT,
                                 "%s: targets[%zu] = %d is outside [0, %d) (V) and not %d "
                                 "(ignored)", op, i, (int)targets[i], V, VKB_IGNORE_TARGET);
    return VKA_SUCCESS;
}

vka_result vkb_check_key_lens(vka_context *ctx, const char *op, const int32_t *key_lens, int B,
                              int Tk) {
    for (int b = 0; b < B; b++)
        if (key_lens[b] < 0 || key_lens[b] > Tk)
            return vka_set_error(ctx, VKA_ERROR_INVALID_ARGUMENT,
                                 "%s: key_lens[%d] = %d is outside [0, Tk = %d]", op, b,
                                 (int)key_lens[b], Tk);
    return VKA_SUCCESS;
}

bool vkb_overlap(vkb_tensor a, size_t n, vkb_tensor b, size_t m) {
    return a.arena == b.arena && a.chunk == b.chunk && a.offset < b.offset + m &&
           b.offset < a.offset + n;
}

static size_t align_elems(size_t n) {
    return (n + VKB_TENSOR_ALIGN - 1) / VKB_TENSOR_ALIGN * VKB_TENSOR_ALIGN;
}

int vkb_arena_layout(const size_t *sizes, int count, size_t max_chunk_elems, uint32_t *chunk_of,
                     size_t *offset_of, size_t *chunk_elems, int *bad) {
    int n_chunks = 0;
    for (int i = 0; i < count; i++) {
        if (sizes[i] > max_chunk_elems) {
            if (bad) *bad = i;
            return -1;
        }
        /* First chunk with room after its last tensor. */
        int c = 0;
        for (; c < n_chunks; c++) {
            size_t start = align_elems(chunk_elems[c]);
            if (start <= max_chunk_elems &&
                sizes[i] <= max_chunk_elems - start)
                break;
        }
        if (c == n_chunks) chunk_elems[n_chunks++] = 0;
        size_t start = align_elems(chunk_elems[c]);
        chunk_of[i] = (uint32_t)c;
        offset_of[i] = start;
        chunk_elems[c] = start + sizes[i];
    }
    return n_chunks;
}

/* Merge the sorted runs src[lo, mid) and src[mid, hi) into dst[lo, hi) by token; ties keep
 * their order (left run first), which makes the sort stable. */
static void merge_by_token(const int32_t *tokens, const int32_t *src, int32_t *dst, int lo,
                           int mid, int hi) {
    int i = lo, j = mid, o = lo;
    while (i < mid && j < hi) dst[o++] = tokens[src[j]] < tokens[src[i]] ? src[j++] : src[i++];
    while (i < mid) dst[o++] = src[i++];
    while (j < hi) dst[o++] = src[j++];
}

void vka_encoder_buckets(const int32_t *tokens, int BT, int32_t *buckets) {
    if (!buckets || BT < 0) return;
    memset(buckets, 0, VKA_BUCKETS_SIZE(BT) * sizeof *buckets);
    if (BT == 0 || !tokens) return;
    int32_t *start = buckets + 1;            /* BT + 1 entries */
    int32_t *token = buckets + (size_t)BT + 2; /* BT entries */
    int32_t *order = token + BT;             /* BT entries */

    /* Stable bottom-up merge sort of the positions by token (the result a stable counting sort
     * would give, without a table sized by the largest id), using token[] as scratch. */
    for (int p = 0; p < BT; p++) order[p] = p;
    int32_t *src = order, *dst = token;
    for (int width = 1; width < BT; width *= 2) {
        for (int lo = 0; lo < BT; lo += 2 * width) {
            int mid = lo + width < BT ? lo + width : BT;
            int hi = mid + width < BT ? mid + width : BT;
            merge_by_token(tokens, src, dst, lo, mid, hi);
        }
        int32_t *tmp = src;
        src = dst;
        dst = tmp;
        if (width > BT / 2) break; /* avoid overflow of width * 2 */
    }
    if (src != order) memcpy(order, src, (size_t)BT * sizeof *order);

    int n = 0;
    for (int p = 0; p < BT; p++) {
        if (p == 0 || tokens[order[p]] != tokens[order[p - 1]]) {
            start[n] = p;
            token[n] = tokens[order[p]];
            n++;
        }
    }
    for (int j = n; j < BT; j++) token[j] = 0;
    start[n] = BT;
    buckets[0] = n;
}

void vkb_op_time_add(vka_op_time *out, int cap, int *n, const char *op, double ms) {
    for (int i = 0; i < *n && i < cap; i++) {
        if (out[i].op == op || strcmp(out[i].op, op) == 0) {
            out[i].calls++;
            out[i].ms += ms;
            return;
        }
    }
    if (*n < cap) out[*n] = (vka_op_time){.op = op, .calls = 1, .ms = ms};
    (*n)++;
}

/* --- the runtime entries' shared parts (backend.h) ------------------------------------------- */

vka_result vkb_arena_create(vkb_backend *be, const char *label, vkb_arena_kind kind,
                            const size_t *sizes, const char *const *names, int count,
                            vkb_tensor *tensors, vkb_arena **out) {
    /* One arena past all of memory is refused before anything is allocated (a model adds up
     * its arenas too: vkm_gpt_make_arena). */
    uint64_t total = 0, cap = be->limits.memory_bytes;
    for (int i = 0; i < count; i++) total += (uint64_t)sizes[i] * sizeof(float);
    if (cap && total > cap) {
        *out = NULL;
        return vka_set_error(be->ctx, VKA_ERROR_DEVICE_LIMIT,
                             "%s: arena '%s' needs %.1f MiB (%llu bytes) but the device has "
                             "%.1f MiB (%llu bytes) (its memory, or VKATTN_MAX_MEMORY_BYTES if "
                             "lower)",
                             be->name, label ? label : "arena", (double)total / (1 << 20),
                             (unsigned long long)total, (double)cap / (1 << 20),
                             (unsigned long long)cap);
    }
    return be->rt->arena_create(be, label, kind, sizes, names, count, tensors, out);
}

vka_result vkb_graph_submit(vkb_backend *be, vkb_graph *graph, const vka_submit_desc *desc) {
    if (be->rt->graph_submit) return be->rt->graph_submit(be, graph, desc);
    if (desc && (desc->wait_count || desc->signal_count))
        return vka_set_error(be->ctx, VKA_ERROR_INVALID_ARGUMENT,
                             "vka_graph_submit: the %s backend runs graphs on the host and takes "
                             "no semaphores", be->name);
    return be->rt->graph_run(be, graph);
}

vka_result vkb_graph_wait(vkb_backend *be, vkb_graph *graph, uint64_t timeout_ns) {
    return be->rt->graph_wait ? be->rt->graph_wait(be, graph, timeout_ns) : VKA_SUCCESS;
}

static vka_result unsupported(vkb_backend *be, const char *fn) {
    return vka_set_error(be->ctx, VKA_ERROR_UNSUPPORTED,
                         "%s: the %s backend has no Vulkan command buffers or buffers", fn,
                         be->name);
}

vka_result vkb_graph_record(vkb_backend *be, vkb_graph *graph, void *command_buffer) {
    if (!be->rt->graph_record) return unsupported(be, "vka_graph_record");
    return be->rt->graph_record(be, graph, command_buffer);
}

vka_result vkb_graph_check(vkb_backend *be, vkb_graph *graph) {
    return be->rt->graph_check ? be->rt->graph_check(be, graph) : VKA_SUCCESS;
}

vka_result vkb_arena_wrap(vkb_backend *be, const void *buffer, uint64_t offset, uint64_t size,
                          vkb_tensor *tensor, vkb_arena **out) {
    *out = NULL;
    if (!be->rt->arena_wrap) return unsupported(be, "vka_tensor_wrap_vulkan_buffer");
    return be->rt->arena_wrap(be, buffer, offset, size, tensor, out);
}

vka_result vkb_buffer_of(vkb_backend *be, vkb_tensor t, void *buffer, uint64_t *offset,
                         uint64_t *size) {
    if (!be->rt->buffer_of) return unsupported(be, "vka_tensor_vulkan_buffer");
    return be->rt->buffer_of(be, t, buffer, offset, size);
}
