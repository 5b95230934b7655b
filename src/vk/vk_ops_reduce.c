/*
 * Reductions: mean, the global gradient norm, the bias gradient; and the launch layouts every
 * reduction op shares (vk_reduce.h).
 */
#include "vk/vk_reduce.h"
#include "pc/reduce.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

/* --- layouts ---------------------------------------------------------------------------------- */

/* Largest power of two <= v (v >= 1). */
static uint32_t pow2_at_most(uint32_t v) {
    uint32_t p = 1;
    while (p * 2 <= v && p < (1u << 30)) p *= 2;
    return p;
}

static uint32_t pow2_at_least(uint64_t v) {
    uint32_t p = 1;
    while (p < v && p < (1u << 30)) p *= 2;
    return p;
}

static uint32_t log2_of(uint32_t p) {
    uint32_t l = 0;
    while ((1u << l) < p) l++;
    return l;
}

static bool is_llvmpipe(const vkv_backend *vb) {
    return strncmp(vkv_device(vb)->props.deviceName, "llvmpipe", 8) == 0;
}

/* llvmpipe (lavapipe) counts the iterations of all loops of a shader invocation together and
 * silently leaves every loop after 65535 of them (gallivm's LP_MAX_TGSI_LOOP_ITERATIONS), so a
 * long reduction would return a partial sum. The layouts below widen the workgroup to stay
 * within it, and an op whose shape cannot fails with VKA_ERROR_DEVICE_LIMIT instead. */
#define LLVMPIPE_LOOP_LIMIT 65535u

static uint64_t loop_budget(const vkv_backend *vb) {
    return is_llvmpipe(vb) ? LLVMPIPE_LOOP_LIMIT : UINT64_MAX;
}

/* GPU workgroups: 256 invocations for rows; 1024 for the vector and column sums, where one
 * workgroup must keep many loads in flight (both lowered to the device's limits by
 * vkv_workgroup_size; UINT32_MAX gives the largest it allows). */
#define GPU_WG 256u
#define GPU_WIDE_WG 1024u

/* CPU-type devices: the SIMD width, in 32-bit lanes, over which llvmpipe runs invocations side
 * by side (its device name ends in "(LLVM x.y, 256 bits)"); 8 when unknown. */
static uint32_t cpu_simd(const vkv_backend *vb) {
    const char *bits = strstr(vkv_device(vb)->props.deviceName, " bits)");
    const char *p = bits;
    while (p && p > vkv_device(vb)->props.deviceName && p[-1] >= '0' && p[-1] <= '9') p--;
    unsigned long b = p && p != bits ? strtoul(p, NULL, 10) : 0;
    return b >= 128 && b <= 1024 ? pow2_at_most((uint32_t)(b / 32)) : 8;
}

/* CPU-type variant: one invocation per row (SIMD lanes = rows), so no barrier at all: on
 * lavapipe this measured faster than spreading a row over a SIMD group with one barrier per
 * reduction, for rows of 64 to 50,257 elements alike (llvmpipe loads each lane's element
 * separately either way). Up to CPU_ROWS_WG rows per workgroup, fewer when there are few rows
 * so that every thread gets work. Rows too long for llvmpipe's loop budget get more
 * invocations (vkv_rows_layout). */
#define CPU_ROWS_WG 64

/* Per invocation, each seg_reduce costs SEG - 1 iterations (CPU) or log2(SEG) (GPU tree); two
 * of them at most per shader. */
static uint64_t reduce_iters(bool cpu, uint32_t seg) { return 2ull * (cpu ? seg : log2_of(seg)); }

vkv_layout vkv_rows_layout(vkv_backend *vb, uint64_t rows, uint64_t len, int passes) {
    bool cpu = vkv_device(vb)->is_cpu;
    uint64_t budget = loop_budget(vb);
    uint32_t top = vkv_workgroup_size(vb, UINT32_MAX), gpu = vkv_workgroup_size(vb, GPU_WG), seg;
    if (cpu)
        seg = 1;
    else /* ~16 elements per invocation, but at least 32 invocations (128 bytes) across a row
          * longer than that, so a row's loads coalesce; up to a workgroup per row. */
        seg = VKA_MIN(VKA_MAX(pow2_at_least(VKA_CEIL_DIV(len, 16)),
                              VKA_MIN(32u, pow2_at_least(len))), gpu);
    while (seg < top && passes * VKA_CEIL_DIV(len, seg) + reduce_iters(cpu, seg) > budget) seg *= 2;
    uint32_t wg;
    if (!cpu)
        wg = VKA_MAX(gpu, seg);
    else if (seg > 1)
        wg = VKA_MAX(seg, cpu_simd(vb));
    else
        wg = VKA_MIN(VKA_MAX(pow2_at_most((uint32_t)VKA_MIN(rows / 4 + 1, CPU_ROWS_WG)),
                             cpu_simd(vb)), CPU_ROWS_WG);
    return (vkv_layout){.spec = {wg, seg, cpu},
                        .n_spec = 3,
                        .groups = VKA_CEIL_DIV(rows, wg / seg),
                        .iters = passes * VKA_CEIL_DIV(len, seg) + reduce_iters(cpu, seg)};
}

/* Loops of the vector and column shaders handle four elements per iteration, plus a tail. */
static uint64_t unrolled_iters(uint64_t len, uint32_t lanes) {
    return VKA_CEIL_DIV(len, 4ull * lanes) + 3;
}

vkv_layout vkv_vector_layout(vkv_backend *vb, uint64_t len) {
    bool cpu = vkv_device(vb)->is_cpu;
    uint64_t budget = loop_budget(vb);
    uint32_t top = vkv_workgroup_size(vb, UINT32_MAX);
    uint32_t wg = VKA_MIN(cpu ? cpu_simd(vb) : vkv_workgroup_size(vb, GPU_WIDE_WG), top);
    while (wg < top && unrolled_iters(len, wg) + reduce_iters(cpu, wg) > budget) wg *= 2;
    return (vkv_layout){.spec = {wg, wg, cpu},
                        .n_spec = 3,
                        .groups = 1,
                        .iters = unrolled_iters(len, wg) + reduce_iters(cpu, wg)};
}

vkv_layout vkv_cols_layout(vkv_backend *vb, uint64_t rows, uint64_t cols) {
    uint64_t budget = loop_budget(vb);
    uint32_t top = vkv_workgroup_size(vb, UINT32_MAX), per_group, row_lanes;
    if (vkv_device(vb)->is_cpu) {
        per_group = VKA_MIN(CPU_ROWS_WG, top); /* one invocation per column: no barrier */
        row_lanes = 1;
    } else {
        /* Blocks of 32 columns (128-byte rows), down to 8 (32 bytes) so that there are enough
         * workgroups; the rest of a wide workgroup splits the rows (many loads in flight). */
        per_group = 32;
        while (per_group > 8 && cols / per_group < 96) per_group /= 2;
        uint32_t wide = vkv_workgroup_size(vb, GPU_WIDE_WG);
        per_group = VKA_MIN(per_group, wide);
        row_lanes = wide / per_group;
    }
    /* Fewer columns than a block: a narrower block (on a GPU, the spare invocations take rows). */
    while (per_group > 1 && per_group / 2 >= cols) {
        per_group /= 2;
        if (!vkv_device(vb)->is_cpu) row_lanes *= 2;
    }
    while (per_group * row_lanes < top &&
           unrolled_iters(rows, row_lanes) + log2_of(row_lanes) > budget)
        row_lanes *= 2;
    return (vkv_layout){.spec = {per_group * row_lanes, per_group},
                        .n_spec = 2,
                        .groups = VKA_CEIL_DIV(cols, per_group),
                        .iters = unrolled_iters(rows, row_lanes) + log2_of(row_lanes)};
}

/* 8 quads (one SIMD vector of llvmpipe's: neighbouring quads of one row) and 8 row lanes, so
 * that even a narrow matrix gives every thread workgroups; fewer quads for fewer columns, more
 * row lanes where a lane's rows pass the loop budget. */
vkv_layout vkv_quad_cols_layout(vkv_backend *vb, uint64_t rows, uint64_t quads) {
    uint64_t budget = loop_budget(vb);
    uint32_t top = vkv_workgroup_size(vb, UINT32_MAX), cq = 8, rl = 8;
    while (cq > 1 && cq / 2 >= quads) cq /= 2;
    while (cq * rl < top && unrolled_iters(rows, rl) + rl > budget) rl *= 2;
    return (vkv_layout){.spec = {cq * rl, cq},
                        .n_spec = 2,
                        .groups = VKA_CEIL_DIV(quads, cq),
                        .iters = unrolled_iters(rows, rl) + rl};
}

bool vkv_check_layout(vkb_backend *be, const char *op, const vkv_layout *lay) {
    uint64_t budget = loop_budget((vkv_backend *)be);
    if (lay->iters <= budget) return true;
    vkb_fail(be, VKA_ERROR_DEVICE_LIMIT,
             "%s: shape too large for llvmpipe: %llu loop iterations per invocation, beyond its "
             "limit of %llu", op, (unsigned long long)lay->iters, (unsigned long long)budget);
    return false;
}

/* --- mean ------------------------------------------------------------------------------------- */

/* In blocks that fit the binding limit, each adding its sum / N to out[0] in order. */
void vkv_mean(vkb_backend *be, vkb_tensor out, vkb_tensor inp, size_t N) {
    const char *op = "mean";
    if (!vkv_check_dim(be, op, "N", (long long)VKA_MIN(N, (size_t)LLONG_MAX), UINT32_MAX)) return;
    vkv_backend *vb = (vkv_backend *)be;
    size_t block = vkv_bind_elems(vb);
    vkv_layout lay = vkv_vector_layout(vb, VKA_MIN(block, N));
    if (!vkv_check_layout(be, op, &lay)) return;
    vkb_tensor os = vkb_slice(out, 0, 1);
    for (size_t i0 = 0; i0 < N; i0 += block) {
        size_t n = VKA_MIN(block, N - i0);
        vkb_tensor is = vkb_slice(inp, i0, n);
        lay = vkv_vector_layout(vb, n);
        pc_mean pc = {.N = (uint32_t)n, .accumulate = i0 > 0, .total = (float)N};
        vkv_call call = {.shader = VKA_SHADER_MEAN,
                         .bind = {os, is},
                         .writes = {true, false},
                         .n_bind = 2,
                         VKV_PC(&pc),
                         .label = op};
        vkv_call_layout(&call, &lay);
        vkv_dispatch(vb, &call);
    }
}

/* --- grad_norm -------------------------------------------------------------------------------- */

#define NORM_PER_DISPATCH 7 /* gradient bindings of grad_norm_partials.comp (8 minus partials) */

/* One piece of a gradient: elements [lo, lo + n) of grads[g]; later pieces (lo > 0) add to
 * the gradient's partials. */
typedef struct norm_piece {
    int g;
    size_t lo, n;
} norm_piece;

/* Partial sums of squares of pieces[0 .. k) (k <= NORM_PER_DISPATCH, of consecutive distinct
 * gradients). */
static void norm_partials(vkv_backend *vb, vkb_tensor partials, const vkb_tensor *grads,
                          const norm_piece *pieces, int k) {
    size_t longest = 0;
    for (int j = 0; j < k; j++) longest = VKA_MAX(longest, pieces[j].n);
    vkv_layout lay = vkv_vector_layout(vb, VKA_CEIL_DIV(longest, VKA_NORM_PARTIALS));
    if (!vkv_check_layout((vkb_backend *)vb, "grad_norm", &lay)) return;
    vkb_tensor part = vkb_slice(partials, (size_t)pieces[0].g * VKA_NORM_PARTIALS,
                                (size_t)k * VKA_NORM_PARTIALS);
    pc_norm_partials pc = {.accumulate = 0};
    vkv_call call = {.shader = VKA_SHADER_GRAD_NORM_PARTIALS,
                     .bind = {part},
                     .writes = {true},
                     .n_bind = 1 + k,
                     VKV_PC(&pc),
                     .label = "grad_norm"};
    vkv_call_layout(&call, &lay);
    call.spec[call.n_spec++] = VKA_NORM_PARTIALS; /* one vector per workgroup */
    call.groups = (uint64_t)k * VKA_NORM_PARTIALS;
    for (int j = 0; j < k; j++) {
        vkb_tensor g = vkb_slice(grads[pieces[j].g], pieces[j].lo, pieces[j].n);
        call.bind[1 + j] = g;
        pc.n[j] = (uint32_t)g.n;
        if (pieces[j].lo > 0) pc.accumulate |= 1u << j;
    }
    vkv_dispatch(vb, &call);
}

/* Gradients past the binding limit are reduced in pieces, a later piece adding to the partials
 * of the earlier ones; the partials are summed in blocks that fit, in order. */
void vkv_grad_norm(vkb_backend *be, vkb_tensor out, vkb_tensor partials, const vkb_tensor *grads,
                   int count, float max_norm, vkb_tensor hyper) {
    const char *op = "grad_norm";
    if (!vkv_check_dim(be, op, "count", count, INT_MAX / VKA_NORM_PARTIALS)) return;
    vkv_backend *vb = (vkv_backend *)be;
    size_t block = vkv_bind_elems(vb);
    if (!vkv_fits(vb, op, "the partial sums of 7 gradients",
                  (size_t)NORM_PER_DISPATCH * VKA_NORM_PARTIALS))
        return;
    norm_piece batch[NORM_PER_DISPATCH];
    int k = 0;
    for (int g = 0; g < count; g++) {
        size_t n = grads[g].n;
        for (size_t lo = 0; lo == 0 || lo < n; lo += block) {
            /* a dispatch holds consecutive distinct gradients */
            if (k == NORM_PER_DISPATCH || (k > 0 && batch[k - 1].g == g)) {
                norm_partials(vb, partials, grads, batch, k);
                k = 0;
            }
            batch[k++] = (norm_piece){g, lo, VKA_MIN(block, n - lo)};
            if (n == 0) break;
        }
    }
    if (k) norm_partials(vb, partials, grads, batch, k);

    size_t n_partials = (size_t)count * VKA_NORM_PARTIALS;
    vkv_layout lay = vkv_vector_layout(vb, VKA_MIN(block, n_partials));
    if (!vkv_check_layout(be, op, &lay)) return;
    vkb_tensor os = vkb_slice(out, 0, 2);
    for (size_t i0 = 0; i0 < n_partials; i0 += block) {
        size_t n = VKA_MIN(block, n_partials - i0);
        vkb_tensor ps = vkb_slice(partials, i0, n);
        lay = vkv_vector_layout(vb, n);
        bool has_hyper = vkb_present(hyper);
        pc_norm_finalize pc = {.n_partials = (uint32_t)n, .max_norm = max_norm,
                               .accumulate = i0 > 0, .last = i0 + n == n_partials,
                               .has_hyper = has_hyper};
        /* without hyper, the partials bound again in its place (never read) */
        vkb_tensor hs = has_hyper ? vkb_slice(hyper, 0, VKA_HYPER_COUNT) : ps;
        vkv_call call = {.shader = VKA_SHADER_GRAD_NORM_FINALIZE,
                         .bind = {os, ps, hs},
                         .writes = {true, false, false},
                         .n_bind = 3,
                         VKV_PC(&pc),
                         .label = op};
        vkv_call_layout(&call, &lay);
        vkv_dispatch(vb, &call);
    }
}

/* --- bias_backward ---------------------------------------------------------------------------- */

/* The CPU-type vec4 layout of bias_backward.comp (VEC4 = 1) for a block of n rows, or false
 * where it does not apply (GPUs, OC or an offset not a multiple of 4, rows past llvmpipe's loop
 * budget for one invocation): one invocation per 4 columns, workgroups of a SIMD vector or more
 * with at least 4 of them when there are enough columns (lavapipe spreads workgroups over its
 * threads), through dout's texel view where it has one. */
static bool bias_vec4_call(vkv_backend *vb, vkv_call *call, size_t n, int OC) {
    vkv_layout lay = vkv_cols_layout(vb, (uint64_t)n, (uint64_t)OC);
    if (!vkv_device(vb)->is_cpu || OC % 4 || !vkv_views_vec4(vb, call, 0x3) ||
        lay.spec[0] != lay.spec[1])
        return false;
    uint32_t inv = (uint32_t)OC / 4, wg = 8;
    while (wg * 2 <= CPU_ROWS_WG && wg * 2 * 4 <= inv) wg *= 2;
    wg = vkv_workgroup_size(vb, wg);
    call->spec[0] = wg;
    call->spec[1] = wg; /* COLS = WG: one row lane */
    call->spec[2] = 1;  /* VEC4 */
    call->n_spec = 3;
    call->groups = VKA_CEIL_DIV(inv, wg);
    if (vkv_views_texel(vb, call, 0x2)) { /* dout */
        call->shader = VKA_SHADER_BIAS_BACKWARD_TEXEL;
        call->texel[0] = 1;
        call->n_texel = 1;
    }
    return true;
}

/* In blocks of rows that fit the binding limit, each adding its column sums in order. */
void vkv_bias_backward(vkb_backend *be, vkb_tensor dbias, vkb_tensor dout, int N, int OC) {
    const char *op = "bias_backward";
    vkv_backend *vb = (vkv_backend *)be;
    size_t per_row[1] = {(size_t)OC};
    const char *names[1] = {"dout"};
    size_t block = vkv_block_rows(vb, op, (size_t)N, per_row, names, 1);
    if (!block) return;
    vkv_layout lay = vkv_cols_layout(vb, (uint64_t)VKA_MIN(block, (size_t)N), (uint64_t)OC);
    if (!vkv_check_layout(be, op, &lay)) return;
    vkb_tensor bs = vkb_slice(dbias, 0, (size_t)OC);
    for (size_t r0 = 0; r0 < (size_t)N; r0 += block) {
        size_t n = VKA_MIN(block, (size_t)N - r0);
        vkb_tensor ds = vkb_slice(dout, r0 * OC, n * OC);
        lay = vkv_cols_layout(vb, (uint64_t)n, (uint64_t)OC);
        pc_bias_backward pc = {.N = (uint32_t)n, .OC = (uint32_t)OC};
        vkv_call call = {.shader = VKA_SHADER_BIAS_BACKWARD,
                         .bind = {bs, ds},
                         .writes = {true, false},
                         .n_bind = 2,
                         VKV_PC(&pc),
                         .label = op};
        if (!bias_vec4_call(vb, &call, n, OC)) vkv_call_layout(&call, &lay);
        vkv_dispatch(vb, &call);
    }
}
