/* TEMP (vk branch only): stand-ins until the cpu branch lands. */
#include "backend.h"
#include <stdlib.h>
#include <string.h>
vka_result vkb_cpu_create(vka_context *ctx, int threads, vkb_backend **out) {
    (void)threads; *out = NULL;
    return vka_set_error(ctx, VKA_ERROR_UNSUPPORTED, "no cpu backend in this branch");
}
void vkb_fail(vkb_backend *be, vka_result r, const char *fmt, ...) {
    if (be->status != VKA_SUCCESS) return;
    be->status = r;
    va_list ap; va_start(ap, fmt);
    vsnprintf(be->ctx->error, sizeof be->ctx->error, fmt, ap);
    va_end(ap);
}
int vkb_arena_layout(const size_t *sizes, int count, size_t max_chunk_elems, uint32_t *chunk_of,
                     uint32_t *offset_of, size_t *chunk_elems, int *bad) {
    int n = 0; size_t used = 0;
    for (int i = 0; i < count; i++) {
        size_t sz = (sizes[i] + VKB_TENSOR_ALIGN - 1) / VKB_TENSOR_ALIGN * VKB_TENSOR_ALIGN;
        if (sizes[i] > max_chunk_elems) { *bad = i; return -1; }
        if (n == 0 || used + sz > max_chunk_elems) { if (n) chunk_elems[n-1] = used; n++; used = 0; }
        chunk_of[i] = n - 1; offset_of[i] = (uint32_t)used; used += sz;
    }
    chunk_elems[n-1] = used > 0 ? used : 1;
    return n;
}
void vka_encoder_buckets(const int32_t *tokens, int BT, int32_t *buckets) {
    int32_t *start = buckets + 1, *tok = buckets + BT + 2, *order = buckets + 2 * BT + 2;
    memset(buckets, 0, (3 * (size_t)BT + 2) * 4);
    int n = 0, pos = 0;
    for (int v = 0; v < (1 << 20) && pos < BT; v++) {
        int first = 1;
        for (int i = 0; i < BT; i++) if (tokens[i] == v) { if (first) { tok[n] = v; start[n++] = pos; first = 0; } order[pos++] = i; }
    }
    start[n] = BT; buckets[0] = n;
}
