/* Shared by both backends: sticky op failures and argument checks, arena layout,
 * encoder-backward buckets. */
#include "backend.h"

#include <string.h>

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

bool vkb_need(vkb_backend *be, const char *op, const char *name, vkb_tensor t, size_t n) {
    if (!t.arena) {
        vkb_fail(be, VKA_ERROR_INVALID_ARGUMENT, "%s: tensor %s is missing", op, name);
        return false;
    }
    if (t.n < n) {
        vkb_fail(be, VKA_ERROR_INVALID_ARGUMENT, "%s: %s holds %zu elements but %zu are needed",
                 op, name, t.n, n);
        return false;
    }
    return true;
}

size_t vkb_batch_span(int batch, size_t stride, size_t matrix) {
    return (size_t)(batch - 1) * (stride ? stride : matrix) + matrix;
}

bool vkb_overlap(vkb_tensor a, size_t n, vkb_tensor b, size_t m) {
    return a.arena == b.arena && a.chunk == b.chunk && (size_t)a.offset < b.offset + m &&
           (size_t)b.offset < a.offset + n;
}

static size_t align_elems(size_t n) {
    return (n + VKB_TENSOR_ALIGN - 1) / VKB_TENSOR_ALIGN * VKB_TENSOR_ALIGN;
}

int vkb_arena_layout(const size_t *sizes, int count, size_t max_chunk_elems, uint32_t *chunk_of,
                     uint32_t *offset_of, size_t *chunk_elems, int *bad) {
    int n_chunks = 0;
    for (int i = 0; i < count; i++) {
        if (sizes[i] > max_chunk_elems) {
            if (bad) *bad = i;
            return -1;
        }
        /* First chunk with room after its last tensor. Offsets are uint32 (vkb_tensor), so a
         * tensor may not start past UINT32_MAX even in a larger chunk. */
        int c = 0;
        for (; c < n_chunks; c++) {
            size_t start = align_elems(chunk_elems[c]);
            if (start <= UINT32_MAX && start <= max_chunk_elems &&
                sizes[i] <= max_chunk_elems - start)
                break;
        }
        if (c == n_chunks) chunk_elems[n_chunks++] = 0;
        size_t start = align_elems(chunk_elems[c]);
        chunk_of[i] = (uint32_t)c;
        offset_of[i] = (uint32_t)start;
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
