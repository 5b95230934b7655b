/*
 * The backend interface: the GPT model (src/model/gpt.c) is written once against these ops;
 * src/cpu/ (plain C) and src/vk/ (GLSL compute shaders) implement them, so the CPU path
 * validates the Vulkan path op by op.
 *
 * Execution model. Ops are recorded into a graph between graph_begin() and graph_end(), and run
 * by graph_run(), as often as wanted:
 *  - CPU: the graph is a list of commands; graph_run() executes them in order.
 *  - Vulkan: the graph is a command buffer holding each op's dispatches and the barriers they
 *    need; graph_run() submits it once and waits once.
 * A recorded graph is replayed as is, so its ops must not depend on host values that change
 * between runs: per-run inputs (tokens, the AdamW step scalars) go into VKB_ARENA_HOST tensors
 * with write() before graph_run(). Nothing is allocated per run.
 *
 * Errors are sticky: an op that fails (a pipeline that cannot be built, a shape beyond a
 * limit) records the first failure in be->status and the message in the context; later ops are
 * ignored and graph_run() returns it. Ops never fail silently.
 *
 * Two tables. be->rt (vkb_runtime) is the backend's memory, graphs, profiling and destroy,
 * called directly; the few entries with a part both backends share are called through
 * backend.c's vkb_arena_create, vkb_arena_wrap, vkb_buffer_of and vkb_graph_submit/wait/
 * record/check. be->ops (vkb_ops) holds only the ops.
 *
 * Argument checks, one layer for every caller. be->ops is always vkb_checked_ops (op_checks.c),
 * in front of the backend's own op table be->impl. The public API (api_ops.c) and the model
 * (src/model/, calling be->ops) both pass through it, so each op's arguments are checked in one
 * place: integer dimensions positive, each tensor present and holding the elements its sizes
 * imply (products checked for overflow), V in [1, Vp], operands that must differ being
 * different tensors. A failure names the op and gives the size's expression,
 *   "softmax_forward: inp holds 100 elements but R*Tk = 6*20 = 120 are needed",
 * and only when every check passed is be->impl's op called, with the same arguments. api_ops.c
 * keeps only what is public: the context usable, a graph being recorded, each vka_tensor of this
 * context, a desc given and its defaults (vka_copy's n too, which it turns into views). It sets
 * be->caller around the op, so that the message names the public function
 * ("vka_softmax_forward: ...") and the call returns its own error even after an earlier failure
 * of its graph; a model's op after a failure is ignored at once (errors are sticky). So a
 * backend's op may assume its arguments passed these checks and checks only what is its own:
 * Vulkan its device limits (workgroup counts, llvmpipe's loop budget, 32-bit push-constant
 * ranges, overlapping operands), the CPU the token and target ids when the graph runs. A new
 * op's checks are written once, in op_checks.c. Only vkb_checked_ops calls be->impl.
 *
 * Conventions (llm.c): outputs first, then inputs, then weights, then sizes. Backward ops
 * ACCUMULATE (+=) into their gradient outputs unless the comment says "writes". All tensors are
 * float32 except token/target ids (int32, stored in the same 4-byte arena elements).
 */
#ifndef VKA_BACKEND_H
#define VKA_BACKEND_H

#include "vka_internal.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct vkb_backend vkb_backend;
typedef struct vkb_arena vkb_arena;
typedef struct vkb_graph vkb_graph;

/* A view of n consecutive 4-byte elements of one buffer ("chunk") of an arena. A tensor never
 * spans two chunks (but may be larger than a device's binding limit: Vulkan ops split their
 * dispatches, vk_internal.h). arena == NULL means "no tensor" (an absent optional argument). */
typedef struct vkb_tensor {
    vkb_arena *arena;
    uint32_t chunk; /* which buffer of the arena */
    size_t offset;  /* element offset within the chunk (64-bit: chunks may pass 2^32 elements) */
    size_t n;       /* elements */
    uint8_t dtype;  /* vka_dtype: 0 (VKA_F32) 4-byte elements; VKA_BF16, VKA_F16: each element
                     * of the view is a 32-bit word holding two 16-bit ones (element 2i in its
                     * low half), and n counts the words. Ops check it (op_checks.c). */
    uint8_t pad16;  /* 16-bit: 1 when the last word's high half is padding (an odd count) */
} vkb_tensor;

/* Elements of t's dtype it holds: n, or for 16-bit views two a word less the padding half. */
static inline size_t vkb_elems(vkb_tensor t) { return t.dtype == 0 ? t.n : 2 * t.n - t.pad16; }

/* The hint of every message refusing a tensor's type (op_checks.c, api_ops.c). */
#define VKB_DTYPE_HINT                                                                        \
    "(the ops that take 16-bit tensors: matmul's out, a and b, copy, encoder_forward's out, wte " \
    "and wpe, layernorm_forward's out and inp, layernorm_backward's dout, inp and weight, "      \
    "gelu_forward's out and inp, gelu_backward's inp and dout, residual_forward's out, a and " \
    "b, attention_forward's and attention_backward's q, k, v and out, kv_write's caches and qkv, " \
    "crossentropy's logits and dlogits)"

/* Elements [off, off + n) of t (must lie inside t). */
static inline vkb_tensor vkb_slice(vkb_tensor t, size_t off, size_t n) {
    vkb_tensor s = t;
    s.offset = t.offset + off;
    s.n = n;
    return s;
}
static inline bool vkb_present(vkb_tensor t) { return t.arena != NULL; }
static const vkb_tensor VKB_NONE = {0};

/* A cross-entropy target that counts for nothing (PyTorch's ignore_index). */
#define VKB_IGNORE_TARGET (-1)
/* Every targets[i] (n) in [0, V) or VKB_IGNORE_TARGET, else VKA_ERROR_INVALID_ARGUMENT naming op
 * and the first bad one; the one message of both backends (backend.c). */
vka_result vkb_check_targets(vka_context *ctx, const char *op, const int32_t *targets, size_t n,
                             int V);
/* Every key_lens[b] (b < B) of an attention op in [0, Tk], else an error naming the first one;
 * both backends check them when a graph runs. */
vka_result vkb_check_key_lens(vka_context *ctx, const char *op, const int32_t *key_lens, int B,
                              int Tk);

typedef enum vkb_arena_kind {
    VKB_ARENA_DEVICE = 0, /* device-local: parameters, gradients, activations, AdamW state */
    VKB_ARENA_HOST = 1,   /* host-visible and coherent: per-run inputs and read-back outputs */
} vkb_arena_kind;

/* Every tensor of an arena starts at a multiple of this many elements (256 bytes: the largest
 * minStorageBufferOffsetAlignment Vulkan allows, so a whole tensor can be bound at its start). */
#define VKB_TENSOR_ALIGN 64

/* AdamW step scalars are VKA_HYPER_* (vkattn.h), written by the host into a VKB_ARENA_HOST
 * tensor before each run. grad_norm() reduces each gradient tensor into VKA_NORM_PARTIALS
 * partial sums. Slot VKB_HYPER_GRAD_SCALE, unused by the public ops, holds the model's
 * loss-scaling factor 1/S for grad_norm (gpt_train.c). */
#define VKB_HYPER_GRAD_SCALE 6

/* Batched row-major matrix product
 *   out[b] = alpha * op(A[b]) * op(B[b]) (+ bias) (+ out[b] if accumulate)
 * op(A) is (M, K): A stored (M, K), or (K, M) when trans_a. op(B) is (K, N): B stored (K, N), or
 * (N, K) when trans_b. out is (M, N). Matrices are packed; batches are stride_* elements apart
 * (0 = packed: M*K, K*N, M*N). bias (N) is added to every row of the product.
 * a and b: both f32, both bf16 or both fp16 (widened exactly; f32 sums). out: f32, or bf16 /
 * fp16 whatever a and b are: then out holds exactly the f32 out's values (the same kernels and
 * summation order, alpha and bias applied in f32) rounded to nearest even by vkb_ops.convert's
 * rounding, so out16 == convert(out32) bit for bit (NaN stays NaN, fp16 past 65520 gives Inf);
 * strides and sizes count its elements; elements of out outside the product (an odd count's
 * padding half, gaps between batches) keep their values, and rows or batches sharing a 32-bit
 * word lose neither half (CPU: uint16_t stores; Vulkan: atomicAnd/atomicOr on a shared word's
 * half). accumulate with a 16-bit out is refused (op_checks.c): it would round twice. Vulkan
 * refuses (VKA_ERROR_DEVICE_LIMIT) a 16-bit out whose product its binding limit would split
 * along K (vk_ops_matmul.c). bias stays f32. */
typedef struct vkb_matmul {
    vkb_tensor out;  /* (batch, M, N) */
    vkb_tensor a;    /* (batch, M, K) or (batch, K, M) */
    vkb_tensor b;    /* (batch, K, N) or (batch, N, K) */
    vkb_tensor bias; /* (N) or VKB_NONE */
    int M, N, K, batch;
    bool trans_a, trans_b;
    size_t stride_a, stride_b, stride_out;
    float alpha;
    bool accumulate;
} vkb_matmul;

/* Masked row softmax of R rows of Tk keys (Vaswani et al. 2017, eq. 1, stable: max subtracted):
 *   out[r, k] = exp(scale * inp[r, k] + mask[r / mask_rows, k] - max) / sum   (unmasked k)
 *   out[r, k] = 0                                                          (masked k)
 * causal: row r is query q = r % Tq (Tq = 0 means R), aligned to the end of the keys, so keys
 * k > q + (Tk - Tq) are masked. mask (optional, additive, -INFINITY = masked, e.g. padding) has
 * R / mask_rows rows of Tk; mask_rows = 0 means 1. A row with every key masked is all zeros
 * (never NaN). Backends apply the defaults with vkb_softmax_resolved. */
typedef struct vkb_softmax {
    vkb_tensor out;  /* (R, Tk) */
    vkb_tensor inp;  /* (R, Tk) */
    vkb_tensor mask; /* (R / mask_rows, Tk) or VKB_NONE */
    int R, Tq, Tk;
    int mask_rows;
    float scale;
    bool causal;
} vkb_softmax;

/* sm with its defaults applied: Tq <= 0 becomes R, mask_rows <= 0 becomes 1. */
static inline vkb_softmax vkb_softmax_resolved(vkb_softmax sm) {
    if (sm.Tq <= 0) sm.Tq = sm.R;
    if (sm.mask_rows <= 0) sm.mask_rows = 1;
    return sm;
}

/* What a backend can hold: the model checks shapes against these and reports the limit. */
typedef struct vkb_limits {
    uint64_t max_tensor_bytes;  /* one tensor (Vulkan: one buffer, maxMemoryAllocationSize) */
    uint64_t max_chunk_bytes;   /* one buffer of an arena */
    uint64_t memory_bytes;      /* all arenas together (device-local heap, or physical memory
                                 * for the CPU backend and a CPU-type Vulkan device, or the
                                 * caller's max_memory_bytes if lower); 0 = unknown */
    uint64_t max_binding_bytes; /* one view an op binds whole (Vulkan: maxStorageBufferRange or
                                 * the lowered test limit; ops split larger tensors) */
} vkb_limits;

/* Fused scaled-dot-product attention (FlashAttention-2, Dao 2023): for each batch b, head h and
 * query t, with L = key_lens[b] (key_lens absent: L = Tk) valid keys,
 *   s[j]   = scale * q[b,h,t,:] . k[b,h,j,:] + mask[(b,) t, j]        (mask optional, additive)
 *   s[j]   = -inf where j >= L, or causal and j > t (TOP_LEFT) / j > t + L - Tq (BOTTOM_RIGHT)
 *   out[b,h,t,:] = sum_j softmax(s)[j] v[b,h,j,:];   lse[b,h,t] = log(sum_j exp(s[j]))
 * A row with every key masked gives out = 0 and lse = -INFINITY (never NaN); its gradients are 0.
 * q, k, v, out (and dq, dk, dv, dout in backward, laid out as q, k, v, out) are 4-D (b, h, t, d)
 * views given by element strides (vkb_attn_layout), d contiguous, so the packed qkv (B, T, 3C)
 * layout and heads-side-by-side out (B, T, C) need no permute. No Tq x Tk matrix is stored;
 * deterministic (no float atomics, fixed summation order).
 * Backward WRITES dq, dk, dv (the probabilities recomputed from lse; delta = rowsum(dout * out)
 * computed by the op itself). mask is (Tq, Tk), or (B, Tq, Tk) with mask_per_batch.
 * key_lens are read when the graph runs: a value outside [0, Tk] fails the run, naming it (CPU:
 * before computing; Vulkan: the shaders clamp it, the host checks after the run).
 * 16-bit: q, k, v, out each f32 or the call's one 16-bit type (lse f32), by the 16-bit rule of
 * layernorm_forward: the forward's out and lse bitwise the f32 op's on the widened inputs, a
 * 16-bit out its rounding (vka_copy's bits); odd HS rows share words, none lost. The backward
 * reads a 16-bit q, k, v, out widened exactly: dq, dk, dv (f32, as dout) bitwise the f32 op's on
 * the widened inputs. A 16-bit view's vkb_tensor starts at a word: a packed 16-bit qkv has an
 * even C. */
typedef enum vkb_causal {
    VKB_CAUSAL_NONE = 0,
    VKB_CAUSAL_TOP_LEFT = 1,     /* key j masked when j > t (PyTorch is_causal) */
    VKB_CAUSAL_BOTTOM_RIGHT = 2, /* j > t + L - Tq: queries are the last Tq of the L keys */
} vkb_causal;

/* Element (b, h, t, d) of an attention tensor view is at b*sb + h*sh + t*st + d.
 * (B, NH, T, HS) packed: {NH*T*HS, T*HS, HS}; q/k/v inside qkv (B, T, 3C): {T*3C, HS, 3C} with
 * the view starting at element 0 / C / 2C; out (B, T, C): {T*C, HS, C}. */
typedef struct vkb_attn_layout {
    size_t sb, sh, st;
} vkb_attn_layout;

typedef struct vkb_attention {
    vkb_tensor q, k, v;   /* (B, NH, Tq | Tk, HS) views, laid out by lq, lk, lv */
    vkb_tensor out;       /* (B, NH, Tq, HS) view laid out by lo: forward writes, backward reads */
    vkb_tensor lse;       /* (B, NH, Tq) packed: forward writes (VKB_NONE: not written, the
                           * caller keeps no backward), backward reads (required) */
    vkb_tensor mask;      /* (Tq, Tk) or (B, Tq, Tk) additive, -INFINITY = masked; or VKB_NONE */
    vkb_tensor key_lens;  /* (B) int32 in [0, Tk], read when the graph runs; or VKB_NONE */
    /* backward only: */
    vkb_tensor dout;          /* laid out by lo */
    vkb_tensor dq, dk, dv;    /* WRITTEN, laid out by lq, lk, lv */
    vkb_attn_layout lq, lk, lv, lo;
    int B, NH, Tq, Tk, HS;
    float scale;          /* explicit (the public API resolves 0 to 1/sqrt(HS)) */
    vkb_causal causal;
    bool mask_per_batch;
} vkb_attention;

/* The packed (B, NH, T, HS) layout, and the layouts inside qkv (B, T, 3C) / out (B, T, C). */
static inline vkb_attn_layout vkb_attn_packed(int NH, int T, int HS) {
    return (vkb_attn_layout){(size_t)NH * T * HS, (size_t)T * HS, (size_t)HS};
}
static inline vkb_attn_layout vkb_attn_in_qkv(int NH, int T, int HS) {
    return (vkb_attn_layout){(size_t)T * 3 * NH * HS, (size_t)HS, (size_t)3 * NH * HS};
}
static inline vkb_attn_layout vkb_attn_in_btc(int NH, int T, int HS) {
    return (vkb_attn_layout){(size_t)T * NH * HS, (size_t)HS, (size_t)NH * HS};
}

/* The backend's memory, graphs, profiling and destroy (called directly, not checked). */
typedef struct vkb_runtime {
    void (*destroy)(vkb_backend *be);

    /* --- memory ---------------------------------------------------------------------------- */
    /* One arena holding count tensors of sizes[i] elements (each aligned to VKB_TENSOR_ALIGN,
     * packed into chunks of at most limits.max_chunk_bytes), zero-filled; tensors[i] receives
     * the views. names[i] (may be NULL) names tensors in error messages.
     * Errors: VKA_ERROR_DEVICE_LIMIT (a tensor beyond max_tensor_bytes, or the arena beyond
     * the device's memory: the message names the arena and the sizes), out of memory. */
    vka_result (*arena_create)(vkb_backend *be, const char *label, vkb_arena_kind kind,
                               const size_t *sizes, const char *const *names, int count,
                               vkb_tensor *tensors, vkb_arena **out);
    void (*arena_destroy)(vkb_backend *be, vkb_arena *arena);
    /* Immediate host <-> tensor copies of n elements starting at element off of t; not part of
     * any graph, and only when no graph is running. */
    vka_result (*write)(vkb_backend *be, vkb_tensor t, size_t off, const void *src, size_t n);
    vka_result (*read)(vkb_backend *be, vkb_tensor t, size_t off, void *dst, size_t n);

    /* --- graphs ----------------------------------------------------------------------------- */
    /* If *graph is NULL: create it, start recording (resetting be->status) and return true: the
     * caller emits the ops, then calls graph_end(). Otherwise return false: *graph is already
     * recorded and the caller emits nothing. (On allocation failure: *graph stays NULL, true is
     * returned, ops are ignored and graph_end() reports the error.) */
    bool (*graph_begin)(vkb_backend *be, vkb_graph **graph);
    /* Stop recording; returns be->status (the first op failure). A failed graph must be
     * destroyed, not run. */
    vka_result (*graph_end)(vkb_backend *be, vkb_graph *graph);
    /* Run a recorded graph once and wait for it. */
    vka_result (*graph_run)(vkb_backend *be, vkb_graph *graph);
    /* Embedding (vkattn.h, "Embedding in an application"); a backend may leave these NULL:
     * vkb_graph_submit then runs the graph with graph_run (refusing semaphores), vkb_graph_wait
     * and vkb_graph_check succeed at once (the run checked everything), and vkb_graph_record,
     * vkb_arena_wrap and vkb_buffer_of fail with VKA_ERROR_UNSUPPORTED. */
    vka_result (*graph_submit)(vkb_backend *be, vkb_graph *graph, const vka_submit_desc *desc);
    vka_result (*graph_wait)(vkb_backend *be, vkb_graph *graph, uint64_t timeout_ns);
    vka_result (*graph_record)(vkb_backend *be, vkb_graph *graph, void *command_buffer);
    vka_result (*graph_check)(vkb_backend *be, vkb_graph *graph);
    /* A one-tensor arena over bytes [offset, offset + size) of the application's buffer
     * (*(const VkBuffer *)buffer), not owned; and where a tensor lives (VkBuffer, bytes). */
    vka_result (*arena_wrap)(vkb_backend *be, const void *buffer, uint64_t offset, uint64_t size,
                             vkb_tensor *tensor, vkb_arena **out);
    vka_result (*buffer_of)(vkb_backend *be, vkb_tensor t, void *buffer, uint64_t *offset,
                            uint64_t *size);
    /* NULL is a no-op. */
    void (*graph_destroy)(vkb_backend *be, vkb_graph *graph);
    /* Time every op of the graphs recorded from now on (Vulkan: a timestamp before and after
     * each dispatch, and a barrier after each so that their times do not overlap; CPU: the host
     * clock around each op). Graphs recorded before keep their setting. */
    void (*set_profiling)(vkb_backend *be, bool on);
    /* Times of the graph's last run: *total_ms its duration on the device (Vulkan: between
     * timestamps at its start and end when the queue has timestamps, else host time of the
     * submit and wait; CPU: host time); per-op times summed by op name into out (up to cap
     * entries, in order of first appearance, *count = distinct ops; 0 when the graph was not
     * recorded with profiling). */
    vka_result (*graph_times)(vkb_backend *be, vkb_graph *graph, double *total_ms,
                              vka_op_time *out, int cap, int *count);
} vkb_runtime;

/* The ops: outputs first, then inputs, then weights, then sizes (llm.c). */
typedef struct vkb_ops {
    /* t[i] = value */
    void (*fill)(vkb_backend *be, vkb_tensor t, float value);
    /* dst[i] = src[i] for i < src.n */
    void (*copy)(vkb_backend *be, vkb_tensor dst, vkb_tensor src);
    /* dst[i] = src[i] for the first n elements of each view (of its dtype), converted to dst's
     * type: f32 -> bf16 / fp16 rounds to nearest even (src/cpu/convert.h: NaN stays NaN, fp16
     * past 65520 gives Inf, bf16 flushes f32 subnormals), bf16 / fp16 -> f32 is exact, the
     * same 16-bit type copies; bf16 <-> fp16 is refused. An odd n leaves the high half of dst's
     * last word as it was. */
    void (*convert)(vkb_backend *be, vkb_tensor dst, vkb_tensor src, size_t n);
    void (*matmul)(vkb_backend *be, const vkb_matmul *mm);
    /* dbias (OC) += column sums of dout (N, OC) */
    void (*bias_backward)(vkb_backend *be, vkb_tensor dbias, vkb_tensor dout, int N, int OC);
    /* out (B,T,C) = wte[tokens[b,t]] + wpe[t]; tokens (B,T) int32, wte (Vp,C), wpe (maxT,C).
     * out, wte and wpe each f32 or the call's one 16-bit type, by layernorm_forward's 16-bit
     * rule: each element the f32 sum of the widened ones, a 16-bit out that sum rounded as
     * convert rounds (odd C: rows share words, none lost). */
    void (*encoder_forward)(vkb_backend *be, vkb_tensor out, vkb_tensor tokens, vkb_tensor wte,
                            vkb_tensor wpe, int B, int T, int C);
    /* dwte (Vp,C) += dout rows by token, dwpe (maxT,C) += dout summed over b; deterministic
     * (no float atomics): buckets is the host-made grouping of positions by token (see
     * vka_encoder_buckets), size VKA_BUCKETS_SIZE(B*T). */
    void (*encoder_backward)(vkb_backend *be, vkb_tensor dwte, vkb_tensor dwpe, vkb_tensor dout,
                             vkb_tensor tokens, vkb_tensor buckets, int B, int T, int C);
    /* Ba et al. 2016, eps 1e-5: out (N,C) = (inp - mean) * rstd * weight + bias, saving mean (N)
     * and rstd (N) = 1/sqrt(var + eps); var is the mean of (x - mean)^2 (two passes).
     * out and inp may each be f32 or 16-bit (bf16 or f16, one type per call): inp widens
     * exactly, the statistics and the arithmetic are f32 (the f32 path's, bit for bit), and a
     * 16-bit out is the f32 result rounded to nearest even (vkb_ops.convert's rounding), so
     * out16 == convert(out32). mean, rstd, weight and bias stay f32. */
    void (*layernorm_forward)(vkb_backend *be, vkb_tensor out, vkb_tensor mean, vkb_tensor rstd,
                              vkb_tensor inp, vkb_tensor weight, vkb_tensor bias, int N, int C);
    /* dinp (N,C), dweight (C), dbias (C) += from dout (N,C); as llm.c layernorm_backward.
     * dout, inp and weight each f32 or the call's one 16-bit type, widened exactly: the
     * gradients (f32, as mean and rstd) bitwise the f32 op's on the widened inputs. */
    void (*layernorm_backward)(vkb_backend *be, vkb_tensor dinp, vkb_tensor dweight,
                               vkb_tensor dbias, vkb_tensor dout, vkb_tensor inp,
                               vkb_tensor weight, vkb_tensor mean, vkb_tensor rstd, int N, int C);
    /* qkv inp (B,T,3C) -> q, k, v (B,NH,T,HS) with C = NH*HS */
    void (*permute_forward)(vkb_backend *be, vkb_tensor q, vkb_tensor k, vkb_tensor v,
                            vkb_tensor inp, int B, int T, int NH, int HS);
    /* dinp (B,T,3C) += (dq, dk, dv) (B,NH,T,HS) put back */
    void (*permute_backward)(vkb_backend *be, vkb_tensor dinp, vkb_tensor dq, vkb_tensor dk,
                             vkb_tensor dv, int B, int T, int NH, int HS);
    /* out (B,T,C) = inp (B,NH,T,HS) with heads side by side */
    void (*unpermute_forward)(vkb_backend *be, vkb_tensor out, vkb_tensor inp, int B, int T,
                              int NH, int HS);
    /* dinp (B,NH,T,HS) += dout (B,T,C) rearranged */
    void (*unpermute_backward)(vkb_backend *be, vkb_tensor dinp, vkb_tensor dout, int B, int T,
                               int NH, int HS);
    void (*softmax_forward)(vkb_backend *be, const vkb_softmax *sm);
    /* dinp (R,Tk) += scale * out * (dout - sum_k out * dout), out being the forward's output */
    void (*softmax_backward)(vkb_backend *be, vkb_tensor dinp, vkb_tensor dout, vkb_tensor out,
                             int R, int Tk, float scale);
    /* GELU, tanh form (Hendrycks & Gimpel 2016): 0.5 x (1 + tanh(sqrt(2/pi)(x + 0.044715 x^3))),
     * finite for every finite x. The 16-bit rule of the elementwise ops (gelu_forward's out and
     * inp, gelu_backward's inp and dout, residual_forward's out, a and b): each may be f32 or
     * 16-bit, one 16-bit type per call; 16-bit inputs widen exactly, the arithmetic is the f32
     * path's, a 16-bit output is its f32 result rounded to nearest even (as convert). An odd N
     * leaves the high half of a 16-bit output's last word as it was. */
    void (*gelu_forward)(vkb_backend *be, vkb_tensor out, vkb_tensor inp, size_t N);
    /* dinp += gelu'(inp) * dout */
    void (*gelu_backward)(vkb_backend *be, vkb_tensor dinp, vkb_tensor inp, vkb_tensor dout,
                          size_t N);
    /* out = a + b */
    void (*residual_forward)(vkb_backend *be, vkb_tensor out, vkb_tensor a, vkb_tensor b,
                             size_t N);
    /* dst += src (residual backward) */
    void (*add_inplace)(vkb_backend *be, vkb_tensor dst, vkb_tensor src, size_t N);
    /* losses (N) = logsumexp(logits[i, :V]) - logits[i, targets[i]]; logits (N,Vp), targets (N)
     * int32 in [0, V), or VKB_IGNORE_TARGET (-1): loss 0 and a zero dlogits row. Any other
     * target fails the run (vkb_check_targets' message, after the run on Vulkan) and its row
     * too gives 0, never NaN or a read out of range. */
    void (*crossentropy_forward)(vkb_backend *be, vkb_tensor losses, vkb_tensor logits,
                                 vkb_tensor targets, int N, int V, int Vp);
    /* WRITES dlogits (N,Vp) = (softmax(logits[i, :V]) - onehot(targets[i])) * dloss for j < V,
     * 0 for the padding columns; dlogits may be logits itself (in place, as llm.c). dloss_t:
     * VKB_NONE, or a tensor whose element 0 is used instead of dloss, read at run time (the
     * model's 1 / counted positions of each batch).
     * 16-bit rule of both (issue 19): logits and dlogits each f32 or the call's one 16-bit type
     * (in place: the same type); a 16-bit logit widens exactly and the arithmetic (max, sum,
     * loss, dlogits' f32 value) is the f32 op's, so losses are bitwise the f32 op's on the
     * widened logits and a 16-bit dlogits is its f32 result rounded as convert rounds. */
    void (*crossentropy_backward)(vkb_backend *be, vkb_tensor dlogits, vkb_tensor logits,
                                  vkb_tensor targets, float dloss, vkb_tensor dloss_t, int N,
                                  int V, int Vp);
    /* WRITES out[0] = sum(inp[0:N]) / N, summed in a fixed order (deterministic) */
    void (*mean)(vkb_backend *be, vkb_tensor out, vkb_tensor inp, size_t N);
    /* WRITES out[0] = global L2 norm of all count tensors, out[1] = clip scale =
     * min(1, max_norm / (norm + 1e-6)) (1 if max_norm <= 0), 0 if the norm is NaN (a NaN
     * gradient) or inf (an inf one); no overflow for finite inputs (Blue's scaled sums);
     * partials: scratch of count * VKA_NORM_PARTIALS elements (partial norms). Deterministic.
     * Loss scaling: hyper (optional; VKB_NONE = 1) holds at VKB_HYPER_GRAD_SCALE the factor u
     * (1/S, a power of two) that unscales gradients holding S times their value: out[0] = u *
     * their norm (the unscaled one, from which the clip scale is computed), out[1] = u * the
     * clip scale, so adamw's g = grad * out[1] is the unscaled, clipped gradient, bit for bit
     * (absent overflow and subnormals). 0 reads as 1. */
    void (*grad_norm)(vkb_backend *be, vkb_tensor out, vkb_tensor partials,
                      const vkb_tensor *grads, int count, float max_norm, vkb_tensor hyper);
    /* AdamW on N elements (PyTorch semantics), hyper = VKA_HYPER_* scalars, gscale[1] = clip
     * scale from grad_norm (VKB_NONE = 1; 0 = no step: nothing changes):
     *   g = grad * gscale[1]; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
     *   param -= lr * ((m / bc1) / (sqrt(v / bc2) + eps) + weight_decay * param) */
    void (*adamw)(vkb_backend *be, vkb_tensor param, vkb_tensor grad, vkb_tensor m, vkb_tensor v,
                  vkb_tensor hyper, vkb_tensor gscale, size_t N, float weight_decay);
    /* Arithmetic ceiling: out[i] (n) = the sum of 32 independent multiply-add chains of `iters`
     * steps each started from i (shaders/peak_fma.comp): n * iters * 64 FLOPs. */
    void (*peak_fma)(vkb_backend *be, vkb_tensor out, size_t n, uint32_t iters);
    /* KV cache write for incremental decoding: with (p0, n) = pos[0], pos[1] (int32, written
     * by the host before a run), for t < min(T, n) and p = p0 + t in [0, max_T):
     * kcache[h, p, :] and vcache[h, p, :] (NH, max_T, HS) = the k and v parts of qkv[t]
     * (T, 3C), C = NH*HS; other rows untouched. */
    void (*kv_write)(vkb_backend *be, vkb_tensor kcache, vkb_tensor vcache, vkb_tensor qkv,
                     vkb_tensor pos, int T, int NH, int HS, int max_T);
    /* Fused attention (vkb_attention above): forward writes out and lse; backward writes dq,
     * dk, dv from dout, q, k, v, out, lse. */
    void (*attention_forward)(vkb_backend *be, const vkb_attention *at);
    void (*attention_backward)(vkb_backend *be, const vkb_attention *at);
} vkb_ops;

struct vkb_backend {
    const vkb_ops *ops;   /* &vkb_checked_ops: what everyone calls for an op */
    const vkb_ops *impl;  /* the backend's own ops, called by vkb_checked_ops */
    const vkb_runtime *rt; /* the backend's memory, graphs, profiling, destroy */
    vka_context *ctx;     /* for error messages and logging */
    vka_result status;    /* sticky first failure since graph_begin */
    vkb_limits limits;
    const char *name;     /* "cpu" or "vulkan" */
    /* Set by api_ops.c around one public op (NULL otherwise): the public function, named in
     * the op's check messages, whose checks run and report even after an earlier failure. */
    const char *caller;
    vka_result call_status; /* that call's check result (set by vkb_checked_ops) */
};

/* The checking layer (op_checks.c, see "Argument checks" above); each backend's create sets
 * be->ops to it, be->impl to its own ops and be->rt to its runtime entries. */
extern const vkb_ops vkb_checked_ops;

/* be->rt's entries with a part both backends share (backend.c): arena_create refuses an arena
 * past limits.memory_bytes before anything is allocated (VKA_ERROR_DEVICE_LIMIT naming the
 * arena and the sizes); the others stand in for an entry the backend leaves NULL (above). */
vka_result vkb_arena_create(vkb_backend *be, const char *label, vkb_arena_kind kind,
                            const size_t *sizes, const char *const *names, int count,
                            vkb_tensor *tensors, vkb_arena **out);
vka_result vkb_graph_submit(vkb_backend *be, vkb_graph *graph, const vka_submit_desc *desc);
vka_result vkb_graph_wait(vkb_backend *be, vkb_graph *graph, uint64_t timeout_ns);
vka_result vkb_graph_record(vkb_backend *be, vkb_graph *graph, void *command_buffer);
vka_result vkb_graph_check(vkb_backend *be, vkb_graph *graph);
vka_result vkb_arena_wrap(vkb_backend *be, const void *buffer, uint64_t offset, uint64_t size,
                          vkb_tensor *tensor, vkb_arena **out);
vka_result vkb_buffer_of(vkb_backend *be, vkb_tensor t, void *buffer, uint64_t *offset,
                         uint64_t *size);

/* Record a failure in be->status (first one wins) and the context's error message. */
void vkb_fail(vkb_backend *be, vka_result r, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Elements a batch of matrices spans: (batch - 1) strides plus one matrix (batch >= 1); stride
 * 0 means packed (= matrix), as in vkb_matmul. */
size_t vkb_batch_span(int batch, size_t stride, size_t matrix);

/* Elements [a.offset, a.offset + n) and [b.offset, b.offset + m) overlap (same chunk of the
 * same arena). */
bool vkb_overlap(vkb_tensor a, size_t n, vkb_tensor b, size_t m);

/* Encoder-backward buckets (vka_encoder_buckets): positions grouped by token, so each token's
 * gradient row is summed by one worker in a fixed order. Layout of the int32 array
 * (VKA_BUCKETS_SIZE(BT) elements):
 *   [0]                     n_buckets (distinct tokens)
 *   [1 .. BT+1]             start[j]: first index into order of bucket j (start[n] = BT)
 *   [BT+2 .. 2BT+2)         token[j] of bucket j, ascending
 *   [2BT+2 .. 3BT+2)        order: positions b*T+t, sorted by token, ascending within a token
 * Unused entries (j >= n_buckets) are 0. */

/* Physical memory of the host, in bytes (0 if unknown). */
uint64_t vkb_host_memory_bytes(void);
/* The host's last-level cache in bytes (the highest level sysfs lists, else sysconf); 0 = not
 * known. */
uint64_t vkb_host_llc_bytes(void);

/* Add ms to op's entry of out[0..*n) (appending it if new and there is room). */
void vkb_op_time_add(vka_op_time *out, int cap, int *n, const char *op, double ms);

/* Lay out count tensors into chunks of at most max_chunk_elems elements (first fit, in order,
 * each start aligned to VKB_TENSOR_ALIGN). Fills chunk_of[i], offset_of[i] and chunk sizes
 * (chunk_elems, capacity count) and returns the number of chunks, or -1 if a tensor is larger
 * than max_chunk_elems (its index in *bad). Shared by both backends. */
int vkb_arena_layout(const size_t *sizes, int count, size_t max_chunk_elems, uint32_t *chunk_of,
                     size_t *offset_of, size_t *chunk_elems, int *bad);

/* Backends, created with the context's settings (their limits lowered as s says). Each keeps
 * ctx for messages; the context owns and destroys its backend, and each backend what it makes:
 * the Vulkan one its device (*dev, NULL on failure: the context reads the device's properties
 * through it). On failure nothing is left (*out = NULL). */
struct vka_settings; /* settings.h: the desc and the environment, resolved */
vka_result vkb_cpu_create(vka_context *ctx, const struct vka_settings *s, vkb_backend **out);
vka_result vkb_vulkan_create(vka_context *ctx, const struct vka_settings *s, vkb_backend **out,
                             struct vkr_device **dev);

#endif
