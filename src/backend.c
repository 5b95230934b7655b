/* Shared by both backends: sticky op failures and argument checks, the checking layer in front
 * of every backend's ops (vkb_checked_ops), arena layout, encoder-backward buckets. */
#include "backend.h"

#include <string.h>
#include <unistd.h>

uint64_t vkb_host_memory_bytes(void) {
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : 0;
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

/* --- the checking layer (backend.h: "Argument checks") ---------------------------------------- */

/* Forwarded unchanged: everything that is not an op. */
static void ck_destroy(vkb_backend *be) { be->impl->destroy(be); }
static vka_result ck_arena_create(vkb_backend *be, const char *label, vkb_arena_kind kind,
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
    return be->impl->arena_create(be, label, kind, sizes, names, count, tensors, out);
}
static void ck_arena_destroy(vkb_backend *be, vkb_arena *arena) {
    be->impl->arena_destroy(be, arena);
}
static vka_result ck_write(vkb_backend *be, vkb_tensor t, size_t off, const void *src, size_t n) {
    return be->impl->write(be, t, off, src, n);
}
static vka_result ck_read(vkb_backend *be, vkb_tensor t, size_t off, void *dst, size_t n) {
    return be->impl->read(be, t, off, dst, n);
}
static bool ck_graph_begin(vkb_backend *be, vkb_graph **graph) {
    return be->impl->graph_begin(be, graph);
}
static vka_result ck_graph_end(vkb_backend *be, vkb_graph *graph) {
    return be->impl->graph_end(be, graph);
}
static vka_result ck_graph_run(vkb_backend *be, vkb_graph *graph) {
    return be->impl->graph_run(be, graph);
}
static void ck_graph_destroy(vkb_backend *be, vkb_graph *graph) {
    be->impl->graph_destroy(be, graph);
}
static vka_result ck_graph_submit(vkb_backend *be, vkb_graph *graph, const vka_submit_desc *desc) {
    if (be->impl->graph_submit) return be->impl->graph_submit(be, graph, desc);
    if (desc && (desc->wait_count || desc->signal_count))
        return vka_set_error(be->ctx, VKA_ERROR_INVALID_ARGUMENT,
                             "vka_graph_submit: the %s backend runs graphs on the host and takes "
                             "no semaphores", be->name);
    return be->impl->graph_run(be, graph);
}
static vka_result ck_graph_wait(vkb_backend *be, vkb_graph *graph, uint64_t timeout_ns) {
    return be->impl->graph_wait ? be->impl->graph_wait(be, graph, timeout_ns) : VKA_SUCCESS;
}
static vka_result unsupported(vkb_backend *be, const char *fn) {
    return vka_set_error(be->ctx, VKA_ERROR_UNSUPPORTED,
                         "%s: the %s backend has no Vulkan command buffers or buffers", fn,
                         be->name);
}
static vka_result ck_graph_record(vkb_backend *be, vkb_graph *graph, void *command_buffer) {
    if (!be->impl->graph_record) return unsupported(be, "vka_graph_record");
    return be->impl->graph_record(be, graph, command_buffer);
}
static vka_result ck_graph_check(vkb_backend *be, vkb_graph *graph) {
    return be->impl->graph_check ? be->impl->graph_check(be, graph) : VKA_SUCCESS;
}
static vka_result ck_arena_wrap(vkb_backend *be, const void *buffer, uint64_t offset,
                                uint64_t size, vkb_tensor *tensor, vkb_arena **out) {
    *out = NULL;
    if (!be->impl->arena_wrap) return unsupported(be, "vka_tensor_wrap_vulkan_buffer");
    return be->impl->arena_wrap(be, buffer, offset, size, tensor, out);
}
static vka_result ck_buffer_of(vkb_backend *be, vkb_tensor t, void *buffer, uint64_t *offset,
                               uint64_t *size) {
    if (!be->impl->buffer_of) return unsupported(be, "vka_tensor_vulkan_buffer");
    return be->impl->buffer_of(be, t, buffer, offset, size);
}

static void ck_set_profiling(vkb_backend *be, bool on) { be->impl->set_profiling(be, on); }
static vka_result ck_graph_times(vkb_backend *be, vkb_graph *graph, double *total_ms,
                                 vka_op_time *out, int cap, int *count) {
    return be->impl->graph_times(be, graph, total_ms, out, cap, count);
}

/* The op may go on: nothing failed since graph_begin (errors are sticky). */
static bool ok(const vkb_backend *be) { return be->status == VKA_SUCCESS; }

/* dim > 0, else the op fails naming it (sizes below are computed from the dims). */
static bool positive(vkb_backend *be, const char *op, const char *name, int dim) {
    if (dim > 0) return true;
    vkb_fail(be, VKA_ERROR_INVALID_ARGUMENT, "%s: %s = %d must be positive", op, name, dim);
    return false;
}

static void ck_fill(vkb_backend *be, vkb_tensor t, float value) {
    if (!ok(be) || !vkb_need(be, "fill", "t", t, 0)) return;
    be->impl->fill(be, t, value);
}

static void ck_copy(vkb_backend *be, vkb_tensor dst, vkb_tensor src) {
    if (!ok(be) || !vkb_need(be, "copy", "src", src, 0) ||
        !vkb_need(be, "copy", "dst", dst, src.n))
        return;
    be->impl->copy(be, dst, src);
}

static void ck_matmul(vkb_backend *be, const vkb_matmul *mm) {
    const char *op = "matmul";
    if (!ok(be)) return;
    if (mm->M <= 0 || mm->N <= 0 || mm->K <= 0 || mm->batch <= 0) {
        vkb_fail(be, VKA_ERROR_INVALID_ARGUMENT, "%s: M=%d N=%d K=%d batch=%d must be positive",
                 op, mm->M, mm->N, mm->K, mm->batch);
        return;
    }
    size_t M = (size_t)mm->M, N = (size_t)mm->N, K = (size_t)mm->K;
    if (!vkb_need(be, op, "out", mm->out, vkb_batch_span(mm->batch, mm->stride_out, M * N)) ||
        !vkb_need(be, op, "a", mm->a, vkb_batch_span(mm->batch, mm->stride_a, M * K)) ||
        !vkb_need(be, op, "b", mm->b, vkb_batch_span(mm->batch, mm->stride_b, K * N)) ||
        (vkb_present(mm->bias) && !vkb_need(be, op, "bias", mm->bias, N)))
        return;
    be->impl->matmul(be, mm);
}

static void ck_bias_backward(vkb_backend *be, vkb_tensor dbias, vkb_tensor dout, int N, int OC) {
    const char *op = "bias_backward";
    if (!ok(be) || !positive(be, op, "N", N) ||
        !positive(be, op, "OC", OC) ||
        !vkb_need(be, op, "dbias", dbias, (size_t)OC) ||
        !vkb_need(be, op, "dout", dout, (size_t)N * OC))
        return;
    be->impl->bias_backward(be, dbias, dout, N, OC);
}

static void ck_encoder_forward(vkb_backend *be, vkb_tensor out, vkb_tensor tokens, vkb_tensor wte,
                               vkb_tensor wpe, int B, int T, int C) {
    const char *op = "encoder_forward";
    size_t BT = (size_t)B * T;
    if (!ok(be) || !positive(be, op, "B", B) || !positive(be, op, "T", T) ||
        !positive(be, op, "C", C) || !vkb_need(be, op, "out", out, BT * C) ||
        !vkb_need(be, op, "tokens", tokens, BT) || !vkb_need(be, op, "wte", wte, (size_t)C) ||
        !vkb_need(be, op, "wpe", wpe, (size_t)T * C))
        return;
    be->impl->encoder_forward(be, out, tokens, wte, wpe, B, T, C);
}

static void ck_encoder_backward(vkb_backend *be, vkb_tensor dwte, vkb_tensor dwpe, vkb_tensor dout,
                                vkb_tensor tokens, vkb_tensor buckets, int B, int T, int C) {
    const char *op = "encoder_backward";
    size_t BT = (size_t)B * T;
    /* tokens and buckets are checked for both backends although each reads only one of them
     * (CPU: tokens; Vulkan: the buckets), so the model is held to one contract. */
    if (!ok(be) || !positive(be, op, "B", B) || !positive(be, op, "T", T) ||
        !positive(be, op, "C", C) || !vkb_need(be, op, "dwte", dwte, (size_t)C) ||
        !vkb_need(be, op, "dwpe", dwpe, (size_t)T * C) ||
        !vkb_need(be, op, "dout", dout, BT * C) || !vkb_need(be, op, "tokens", tokens, BT) ||
        !vkb_need(be, op, "buckets", buckets, VKA_BUCKETS_SIZE(BT)))
        return;
    be->impl->encoder_backward(be, dwte, dwpe, dout, tokens, buckets, B, T, C);
}

static void ck_layernorm_forward(vkb_backend *be, vkb_tensor out, vkb_tensor mean,
                                 vkb_tensor rstd, vkb_tensor inp, vkb_tensor weight,
                                 vkb_tensor bias, int N, int C) {
    const char *op = "layernorm_forward";
    size_t NC = (size_t)N * C;
    if (!ok(be) || !positive(be, op, "N", N) || !positive(be, op, "C", C) ||
        !vkb_need(be, op, "out", out, NC) || !vkb_need(be, op, "mean", mean, (size_t)N) ||
        !vkb_need(be, op, "rstd", rstd, (size_t)N) || !vkb_need(be, op, "inp", inp, NC) ||
        !vkb_need(be, op, "weight", weight, (size_t)C) ||
        !vkb_need(be, op, "bias", bias, (size_t)C))
        return;
    be->impl->layernorm_forward(be, out, mean, rstd, inp, weight, bias, N, C);
}

static void ck_layernorm_backward(vkb_backend *be, vkb_tensor dinp, vkb_tensor dweight,
                                  vkb_tensor dbias, vkb_tensor dout, vkb_tensor inp,
                                  vkb_tensor weight, vkb_tensor mean, vkb_tensor rstd, int N,
                                  int C) {
    const char *op = "layernorm_backward";
    size_t NC = (size_t)N * C;
    if (!ok(be) || !positive(be, op, "N", N) || !positive(be, op, "C", C) ||
        !vkb_need(be, op, "dinp", dinp, NC) || !vkb_need(be, op, "dweight", dweight, (size_t)C) ||
        !vkb_need(be, op, "dbias", dbias, (size_t)C) || !vkb_need(be, op, "dout", dout, NC) ||
        !vkb_need(be, op, "inp", inp, NC) || !vkb_need(be, op, "weight", weight, (size_t)C) ||
        !vkb_need(be, op, "mean", mean, (size_t)N) || !vkb_need(be, op, "rstd", rstd, (size_t)N))
        return;
    be->impl->layernorm_backward(be, dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C);
}

/* The permutes: n tensors t[i] named names[i], each B*T*NH*HS elements, except t[wide] (-1:
 * none), the (B,T,3C) side. */
static bool permute_ok(vkb_backend *be, const char *op, const vkb_tensor *t,
                       const char *const *names, int n, int wide, int B, int T, int NH, int HS) {
    if (!ok(be) || !positive(be, op, "B", B) || !positive(be, op, "T", T) ||
        !positive(be, op, "NH", NH) || !positive(be, op, "HS", HS))
        return false;
    size_t count = (size_t)B * T * NH * HS;
    for (int i = 0; i < n; i++)
        if (!vkb_need(be, op, names[i], t[i], i == wide ? 3 * count : count)) return false;
    return true;
}

static void ck_permute_forward(vkb_backend *be, vkb_tensor q, vkb_tensor k, vkb_tensor v,
                               vkb_tensor inp, int B, int T, int NH, int HS) {
    if (!permute_ok(be, "permute_forward", (const vkb_tensor[]){inp, q, k, v},
                    (const char *const[]){"inp", "q", "k", "v"}, 4, 0, B, T, NH, HS))
        return;
    be->impl->permute_forward(be, q, k, v, inp, B, T, NH, HS);
}

static void ck_permute_backward(vkb_backend *be, vkb_tensor dinp, vkb_tensor dq, vkb_tensor dk,
                                vkb_tensor dv, int B, int T, int NH, int HS) {
    if (!permute_ok(be, "permute_backward", (const vkb_tensor[]){dinp, dq, dk, dv},
                    (const char *const[]){"dinp", "dq", "dk", "dv"}, 4, 0, B, T, NH, HS))
        return;
    be->impl->permute_backward(be, dinp, dq, dk, dv, B, T, NH, HS);
}

static void ck_unpermute_forward(vkb_backend *be, vkb_tensor out, vkb_tensor inp, int B, int T,
                                 int NH, int HS) {
    if (!permute_ok(be, "unpermute_forward", (const vkb_tensor[]){out, inp},
                    (const char *const[]){"out", "inp"}, 2, -1, B, T, NH, HS))
        return;
    be->impl->unpermute_forward(be, out, inp, B, T, NH, HS);
}

static void ck_unpermute_backward(vkb_backend *be, vkb_tensor dinp, vkb_tensor dout, int B,
                                  int T, int NH, int HS) {
    if (!permute_ok(be, "unpermute_backward", (const vkb_tensor[]){dout, dinp},
                    (const char *const[]){"dout", "dinp"}, 2, -1, B, T, NH, HS))
        return;
    be->impl->unpermute_backward(be, dinp, dout, B, T, NH, HS);
}

static void ck_softmax_forward(vkb_backend *be, const vkb_softmax *sm) {
    const char *op = "softmax_forward";
    vkb_softmax s = vkb_softmax_resolved(*sm);
    if (!ok(be) || !positive(be, op, "R", s.R) || !positive(be, op, "Tk", s.Tk)) return;
    size_t n = (size_t)s.R * s.Tk;
    size_t mask_n = VKA_CEIL_DIV((size_t)s.R, (size_t)s.mask_rows) * s.Tk;
    if (!vkb_need(be, op, "out", s.out, n) || !vkb_need(be, op, "inp", s.inp, n) ||
        (vkb_present(s.mask) && !vkb_need(be, op, "mask", s.mask, mask_n)))
        return;
    be->impl->softmax_forward(be, sm);
}

static void ck_softmax_backward(vkb_backend *be, vkb_tensor dinp, vkb_tensor dout, vkb_tensor out,
                                int R, int Tk, float scale) {
    const char *op = "softmax_backward";
    size_t n = (size_t)R * Tk;
    if (!ok(be) || !positive(be, op, "R", R) || !positive(be, op, "Tk", Tk) ||
        !vkb_need(be, op, "dinp", dinp, n) || !vkb_need(be, op, "dout", dout, n) ||
        !vkb_need(be, op, "out", out, n))
        return;
    be->impl->softmax_backward(be, dinp, dout, out, R, Tk, scale);
}

/* The elementwise ops: every tensor holds N elements. */
static void ck_gelu_forward(vkb_backend *be, vkb_tensor out, vkb_tensor inp, size_t N) {
    const char *op = "gelu_forward";
    if (!ok(be) || !vkb_need(be, op, "out", out, N) || !vkb_need(be, op, "inp", inp, N)) return;
    be->impl->gelu_forward(be, out, inp, N);
}

static void ck_gelu_backward(vkb_backend *be, vkb_tensor dinp, vkb_tensor inp, vkb_tensor dout,
                             size_t N) {
    const char *op = "gelu_backward";
    if (!ok(be) || !vkb_need(be, op, "dinp", dinp, N) || !vkb_need(be, op, "inp", inp, N) ||
        !vkb_need(be, op, "dout", dout, N))
        return;
    be->impl->gelu_backward(be, dinp, inp, dout, N);
}

static void ck_residual_forward(vkb_backend *be, vkb_tensor out, vkb_tensor a, vkb_tensor b,
                                size_t N) {
    const char *op = "residual_forward";
    if (!ok(be) || !vkb_need(be, op, "out", out, N) || !vkb_need(be, op, "a", a, N) ||
        !vkb_need(be, op, "b", b, N))
        return;
    be->impl->residual_forward(be, out, a, b, N);
}

static void ck_add_inplace(vkb_backend *be, vkb_tensor dst, vkb_tensor src, size_t N) {
    const char *op = "add_inplace";
    if (!ok(be) || !vkb_need(be, op, "dst", dst, N) || !vkb_need(be, op, "src", src, N)) return;
    be->impl->add_inplace(be, dst, src, N);
}

/* Both crossentropy ops: out (out_n elements, named out_name), logits (N, Vp), targets (N). */
static bool crossentropy_ok(vkb_backend *be, const char *op, vkb_tensor out,
                            const char *out_name, size_t out_n, vkb_tensor logits,
                            vkb_tensor targets, int N, int V, int Vp) {
    if (!ok(be) || !positive(be, op, "N", N)) return false;
    if (V <= 0 || V > Vp) {
        vkb_fail(be, VKA_ERROR_INVALID_ARGUMENT, "%s: V = %d must be in [1, Vp = %d]", op, V, Vp);
        return false;
    }
    return vkb_need(be, op, out_name, out, out_n) &&
           vkb_need(be, op, "logits", logits, (size_t)N * Vp) &&
           vkb_need(be, op, "targets", targets, (size_t)N);
}

static void ck_crossentropy_forward(vkb_backend *be, vkb_tensor losses, vkb_tensor logits,
                                    vkb_tensor targets, int N, int V, int Vp) {
    if (!crossentropy_ok(be, "crossentropy_forward", losses, "losses", (size_t)N, logits,
                         targets, N, V, Vp))
        return;
    be->impl->crossentropy_forward(be, losses, logits, targets, N, V, Vp);
}

static void ck_crossentropy_backward(vkb_backend *be, vkb_tensor dlogits, vkb_tensor logits,
                                     vkb_tensor targets, float dloss, vkb_tensor dloss_t, int N,
                                     int V, int Vp) {
    if (!crossentropy_ok(be, "crossentropy_backward", dlogits, "dlogits", (size_t)N * Vp,
                         logits, targets, N, V, Vp))
        return;
    if (vkb_present(dloss_t) && !vkb_need(be, "crossentropy_backward", "dloss_t", dloss_t, 1))
        return;
    be->impl->crossentropy_backward(be, dlogits, logits, targets, dloss, dloss_t, N, V, Vp);
}

static void ck_mean(vkb_backend *be, vkb_tensor out, vkb_tensor inp, size_t N) {
    if (!ok(be)) return;
    if (N == 0) {
        vkb_fail(be, VKA_ERROR_INVALID_ARGUMENT, "mean: N = 0");
        return;
    }
    if (!vkb_need(be, "mean", "out", out, 1) || !vkb_need(be, "mean", "inp", inp, N)) return;
    be->impl->mean(be, out, inp, N);
}

static void ck_grad_norm(vkb_backend *be, vkb_tensor out, vkb_tensor partials,
                         const vkb_tensor *grads, int count, float max_norm) {
    const char *op = "grad_norm";
    if (!ok(be)) return;
    if (count <= 0 || !grads) {
        vkb_fail(be, VKA_ERROR_INVALID_ARGUMENT, "%s: no gradient tensors (count = %d)", op,
                 count);
        return;
    }
    if (!vkb_need(be, op, "out", out, 2) ||
        !vkb_need(be, op, "partials", partials, (size_t)count * VKA_NORM_PARTIALS))
        return;
    for (int i = 0; i < count; i++) {
        char name[32];
        snprintf(name, sizeof name, "grads[%d]", i);
        if (!vkb_need(be, op, name, grads[i], 0)) return;
    }
    be->impl->grad_norm(be, out, partials, grads, count, max_norm);
}

static void ck_adamw(vkb_backend *be, vkb_tensor param, vkb_tensor grad, vkb_tensor m,
                     vkb_tensor v, vkb_tensor hyper, vkb_tensor gscale, size_t N,
                     float weight_decay) {
    const char *op = "adamw";
    if (!ok(be) || !vkb_need(be, op, "param", param, N) || !vkb_need(be, op, "grad", grad, N) ||
        !vkb_need(be, op, "m", m, N) || !vkb_need(be, op, "v", v, N) ||
        !vkb_need(be, op, "hyper", hyper, VKA_HYPER_COUNT) ||
        (vkb_present(gscale) && !vkb_need(be, op, "gscale", gscale, 2)))
        return;
    be->impl->adamw(be, param, grad, m, v, hyper, gscale, N, weight_decay);
}

static void ck_peak_fma(vkb_backend *be, vkb_tensor out, size_t n, uint32_t iters) {
    if (!ok(be) || !vkb_need(be, "peak_fma", "out", out, n)) return;
    be->impl->peak_fma(be, out, n, iters);
}

static void ck_kv_write(vkb_backend *be, vkb_tensor kcache, vkb_tensor vcache, vkb_tensor qkv,
                        vkb_tensor pos, int T, int NH, int HS, int max_T) {
    const char *op = "kv_write";
    if (!ok(be) || !positive(be, op, "T", T) || !positive(be, op, "NH", NH) ||
        !positive(be, op, "HS", HS) || !positive(be, op, "max_T", max_T))
        return;
    size_t cache = (size_t)NH * max_T * HS;
    if (!vkb_need(be, op, "kcache", kcache, cache) || !vkb_need(be, op, "vcache", vcache, cache) ||
        !vkb_need(be, op, "qkv", qkv, (size_t)T * 3 * NH * HS) || !vkb_need(be, op, "pos", pos, 2))
        return;
    be->impl->kv_write(be, kcache, vcache, qkv, pos, T, NH, HS, max_T);
}

/* Elements an attention view (vkb_attn_layout) spans for T rows: (B-1)*sb + (NH-1)*sh +
 * (T-1)*st + HS, checked against view n. */
static bool attn_view_ok(vkb_backend *be, const char *op, const char *name, vkb_tensor t,
                         vkb_attn_layout l, const vkb_attention *at, int T) {
    size_t span = (size_t)(at->B - 1) * l.sb + (size_t)(at->NH - 1) * l.sh +
                  (size_t)(T - 1) * l.st + (size_t)at->HS;
    return vkb_need(be, op, name, t, span);
}

/* Both attention ops: dims, causal kind, every view inside its tensor; the backward needs lse,
 * dout and the gradients too. */
static bool attention_ok(vkb_backend *be, const char *op, const vkb_attention *at, bool backward) {
    if (!ok(be) || !positive(be, op, "B", at->B) || !positive(be, op, "NH", at->NH) ||
        !positive(be, op, "Tq", at->Tq) || !positive(be, op, "Tk", at->Tk) ||
        !positive(be, op, "HS", at->HS))
        return false;
    if (at->HS > VKA_ATTENTION_MAX_HS) {
        vkb_fail(be, VKA_ERROR_INVALID_ARGUMENT, "%s: HS = %d exceeds VKA_ATTENTION_MAX_HS = %d",
                 op, at->HS, VKA_ATTENTION_MAX_HS);
        return false;
    }
    if (at->causal < VKB_CAUSAL_NONE || at->causal > VKB_CAUSAL_BOTTOM_RIGHT) {
        vkb_fail(be, VKA_ERROR_INVALID_ARGUMENT, "%s: causal = %d is not a vkb_causal", op,
                 (int)at->causal);
        return false;
    }
    size_t lse_n = (size_t)at->B * at->NH * at->Tq;
    size_t mask_n = (at->mask_per_batch ? (size_t)at->B : 1) * at->Tq * at->Tk;
    if (!attn_view_ok(be, op, "q", at->q, at->lq, at, at->Tq) ||
        !attn_view_ok(be, op, "k", at->k, at->lk, at, at->Tk) ||
        !attn_view_ok(be, op, "v", at->v, at->lv, at, at->Tk) ||
        !attn_view_ok(be, op, "out", at->out, at->lo, at, at->Tq) ||
        ((backward || vkb_present(at->lse)) && !vkb_need(be, op, "lse", at->lse, lse_n)) ||
        (vkb_present(at->mask) && !vkb_need(be, op, "mask", at->mask, mask_n)) ||
        (vkb_present(at->key_lens) && !vkb_need(be, op, "key_lens", at->key_lens, at->B)))
        return false;
    if (backward &&
        (!attn_view_ok(be, op, "dout", at->dout, at->lo, at, at->Tq) ||
         !attn_view_ok(be, op, "dq", at->dq, at->lq, at, at->Tq) ||
         !attn_view_ok(be, op, "dk", at->dk, at->lk, at, at->Tk) ||
         !attn_view_ok(be, op, "dv", at->dv, at->lv, at, at->Tk)))
        return false;
    return true;
}

static void ck_attention_forward(vkb_backend *be, const vkb_attention *at) {
    if (!attention_ok(be, "attention_forward", at, false)) return;
    be->impl->attention_forward(be, at);
}

static void ck_attention_backward(vkb_backend *be, const vkb_attention *at) {
    if (!attention_ok(be, "attention_backward", at, true)) return;
    be->impl->attention_backward(be, at);
}

const vkb_ops vkb_checked_ops = {
    .destroy = ck_destroy,
    .arena_create = ck_arena_create,
    .arena_destroy = ck_arena_destroy,
    .write = ck_write,
    .read = ck_read,
    .graph_begin = ck_graph_begin,
    .graph_end = ck_graph_end,
    .graph_run = ck_graph_run,
    .graph_submit = ck_graph_submit,
    .graph_wait = ck_graph_wait,
    .graph_record = ck_graph_record,
    .graph_check = ck_graph_check,
    .arena_wrap = ck_arena_wrap,
    .buffer_of = ck_buffer_of,
    .graph_destroy = ck_graph_destroy,
    .set_profiling = ck_set_profiling,
    .graph_times = ck_graph_times,
    .fill = ck_fill,
    .copy = ck_copy,
    .matmul = ck_matmul,
    .bias_backward = ck_bias_backward,
    .encoder_forward = ck_encoder_forward,
    .encoder_backward = ck_encoder_backward,
    .layernorm_forward = ck_layernorm_forward,
    .layernorm_backward = ck_layernorm_backward,
    .permute_forward = ck_permute_forward,
    .permute_backward = ck_permute_backward,
    .unpermute_forward = ck_unpermute_forward,
    .unpermute_backward = ck_unpermute_backward,
    .softmax_forward = ck_softmax_forward,
    .softmax_backward = ck_softmax_backward,
    .gelu_forward = ck_gelu_forward,
    .gelu_backward = ck_gelu_backward,
    .residual_forward = ck_residual_forward,
    .add_inplace = ck_add_inplace,
    .crossentropy_forward = ck_crossentropy_forward,
    .crossentropy_backward = ck_crossentropy_backward,
    .mean = ck_mean,
    .grad_norm = ck_grad_norm,
    .adamw = ck_adamw,
    .peak_fma = ck_peak_fma,
    .kv_write = ck_kv_write,
    .attention_forward = ck_attention_forward,
    .attention_backward = ck_attention_backward,
};
