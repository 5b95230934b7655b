/* Batched matrix product (shaders/matmul.comp, variants in matmul_gpu.glsl / matmul_cpu.glsl).
 *
 * One dispatch per op, unless an operand passes the binding limit: then the product is split
 * into blocks of batches, rows (M), columns (N) and depth (K), each a dispatch whose views of
 * out, A and B fit (leading dimensions lda/ldb/ldo in the push constants address a block of a
 * larger matrix); K blocks add to out one after another. 16-bit A and B split alike: their
 * views are whole 32-bit words, and a block starting at a word's high half says so in the push
 * constants (a_half, b_half), so any block boundary works. In each dispatch: a workgroup per
 * BM x BN tile of out per batch, in a linear grid that vkv_dispatch folds past
 * maxComputeWorkGroupCount. The tile shape is chosen here from the
 * problem size and the device; transposes, the variant and the tile shape are specialization
 * constants, so every combination is its own straight-line pipeline.
 *
 * A 16-bit out (bf16 or fp16, any A and B): specialization constant 8 (OUT16) set to its dtype,
 * the rest chosen as for a float32 out, so each element is the float32 pipeline's value
 * rounded to nearest even (matmul.comp). Its view is words too (pc.out_half for a block starting
 * at a high half) and the blocks count them; the CPU variant stores 4 elements as a uvec2 where
 * a float32 out would take vec4s (VEC_OUT), else each is scalar. It is never
 * split along K: K blocks add to out, which would round it twice; a product that needs K
 * blocks (a row of A (M, K) or B (N, K) past the binding limit, or A (K, M) or B (K, N) past
 * it: their rows are k) fails with VKA_ERROR_DEVICE_LIMIT. */
#include "vk/vk_internal.h"
#include "pc/matmul.h"

#include <string.h>

/* Specialization constants 0 and 3..7 of matmul.comp: wg invocations, ln of them along N,
 * each computing tm x tn outputs; bk = GPU shared-slice depth; vec = CPU vec4 access flags. */
typedef struct mm_tile {
    uint32_t wg, ln, tm, tn, bk;
} mm_tile;

/* VEC bits: vec4 access to A, B, out (and bias); A, B read through their texel views; A and B
 * bf16 or fp16 (both variants; read from their 32-bit words, four at a time as a uvec2 where
 * VEC_A / VEC_B, or in the CPU variant through R16_UINT / R16G16B16A16_UINT texel views where
 * TEXEL_A / TEXEL_B; widened to float32 in the shader, fp16 by unpackHalf2x16, so no device
 * feature is needed). The vec4 conditions (cpu_vec_flags: offsets, strides, lengths multiples of
 * 4 elements, view offsets of 4 words, a block starting at a word's low half) hold for 16-bit
 * elements too. K8: 16-bit A and B read 8 elements a load along k (cpu_k8). */
enum { VEC_A = 1, VEC_B = 2, VEC_OUT = 4, TEXEL_A = 8, TEXEL_B = 16, AB_BF16 = 32, AB_F16 = 64,
       K8 = 128 };

static uint64_t tile_rows(mm_tile t) { return (uint64_t)(t.wg / t.ln) * t.tm; }
static uint64_t tile_cols(mm_tile t) { return (uint64_t)t.ln * t.tn; }

static uint64_t tile_count(mm_tile t, const vkb_matmul *mm) {
    return (uint64_t)mm->batch * VKA_CEIL_DIV((uint64_t)mm->M, tile_rows(t)) *
           VKA_CEIL_DIV((uint64_t)mm->N, tile_cols(t));
}

/* GPU: the biggest tile that still gives the device enough workgroups to spread (no API tells
 * the number of compute units; 128 covers today's largest GPUs) and fits its limits.
 * 128 x 128 with 8 x 8 per invocation is the usual SGEMM sweet spot; smaller problems trade
 * reuse for parallelism. */
static mm_tile gpu_tile(const vkr_device *dev, const vkb_matmul *mm) {
    static const mm_tile tiles[] = {
        {256, 16, 8, 8, 16}, /* 128 x 128 */
        {256, 16, 4, 4, 16}, /* 64 x 64 */
        {64, 8, 4, 4, 16},   /* 32 x 32 */
    };
    const VkPhysicalDeviceLimits *lim = &dev->props.limits;
    size_t n = VKA_ARRAY_LEN(tiles);
    for (size_t i = 0; i + 1 < n; i++) {
        mm_tile t = tiles[i];
        uint64_t shared = 4 * (uint64_t)t.bk * (tile_rows(t) + tile_cols(t) + 8); /* + padding */
        if (t.wg <= lim->maxComputeWorkGroupInvocations &&
            t.wg <= lim->maxComputeWorkGroupSize[0] && shared <= lim->maxComputeSharedMemorySize &&
            tile_count(t, mm) >= 128)
            return t;
    }
    return tiles[n - 1]; /* 64 invocations and 4.5 KiB are within every device's limits */
}

/* CPU-type: 8 invocations (one AVX2 vector on llvmpipe), each a 16 x 16 register tile (the
 * largest that measured faster; see matmul_cpu.glsl), laid out along N as far as N needs. */
static mm_tile cpu_tile(const vkb_matmul *mm) {
    mm_tile t = {8, 1, 16, 16, 1};
    /* TM = 1 only with A stored (M, K): the (K, M) path reads rows in groups of 4 and does not
     * compile to valid SPIR-V for TM < 4. */
    if (mm->M < 16) t.tm = mm->M == 1 && !mm->trans_a ? 1 : mm->M <= 4 ? 4 : 8;
    if (mm->N < 16) t.tn = mm->N <= 4 ? 4 : 8;
    int tn = (int)t.tn;
    t.ln = mm->N > 2 * tn ? 4 : mm->N > tn ? 2 : 1;
    /* One row (a decode step's matrix-vector products): all 8 invocations along N, one row
     * each, instead of rows computed 4 or 8 times over and thrown away. */
    if (t.tm == 1 && mm->N > 4 * tn) t.ln = 8;
    return t;
}

/* A 16-column tile whose B columns are read one float at a time (B not vec4) becomes 12 columns,
 * and then, with A read one float at a time too, 8 x 8. Through storage buffers llvmpipe
 * compiled each scalar load into a loop over the lanes, and 16 x 16 tiles of them took 17-20 s
 * to build per pipeline (16 x 12: 10 s, 12 x 12: 7 s) for no speed: single-thread GFLOP/s at
 * 515 x 513 x 511 (best of 5 runs, interleaved), both scalar 12 x 12 4.1-4.4 against 16 x 16
 * 3.7-4.0; A vec4 and B scalar 16 x 12 8.2 against 6.2. With B vec4 the 16 x 16 tile stays
 * (A scalar: 8.3 against 12 x 12's 6.9). Through one-float texel views (both TEXEL bits) both
 * scalar: 8 x 8 builds in 1.9 s against 12 x 12's 5.6 s and 16 x 16's 14-19 s, and runs at
 * 5.4 GFLOP/s against 6.6 and 6.2 (same run, a loaded machine): a rare shape's first use
 * costs more than its speed; through storage 12 x 12 stays. Multiples of 4, so the vec4 flags
 * chosen for the 16 x 16 tile hold. */
static mm_tile cpu_tile_for_loads(mm_tile t, uint32_t vec) {
    if (!(vec & VEC_B) && t.tn == 16) {
        t.tn = 12;
        if (!(vec & VEC_A) && t.tm == 16) {
            bool texels = (vec & TEXEL_A) && (vec & TEXEL_B);
            t.tm = t.tn = texels ? 8 : 12;
        }
    }
    return t;
}

/* Which operands the CPU variant may read (and out it may write) as vec4: the contiguous
 * dimension it reads 4 at a time, the offsets (of call's views: out, A, B, bias), leading
 * dimensions and batch strides must be multiples of 4. mm holds the block's sizes. */
static uint32_t cpu_vec_flags(const vkv_backend *vb, const vkv_call *call, const vkb_matmul *mm,
                              mm_tile t, const pc_matmul *pc) {
    uint32_t vec = 0;
    bool bias = pc->has_bias != 0;
    if (vkv_views_vec4(vb, call, 0x2) && !pc->a_half && pc->stride_a % 4 == 0 &&
        pc->lda % 4 == 0 && (mm->trans_a ? mm->M % 4 == 0 && t.tm % 4 == 0 : mm->K % 4 == 0))
        vec |= VEC_A;
    if (vkv_views_vec4(vb, call, 0x4) && !pc->b_half && pc->stride_b % 4 == 0 &&
        pc->ldb % 4 == 0 && (mm->trans_b ? mm->K % 4 == 0 : mm->N % 4 == 0 && t.tn % 4 == 0))
        vec |= VEC_B;
    /* a 16-bit out: 4 elements are a uvec2 of two whole words (its view's offset counts words:
     * a multiple of 4 of them is one of 8 elements; no half start) */
    if (vkv_views_vec4(vb, call, 0x1) && pc->stride_out % 4 == 0 && pc->ldo % 4 == 0 &&
        (mm->out.dtype == VKA_F32 || !pc->out_half) &&
        mm->N % 4 == 0 && t.tn % 4 == 0 && (!bias || vkv_views_vec4(vb, call, 0x8)))
        vec |= VEC_OUT;
    return vec;
}

/* K8 (CPU variant, 16-bit A and B): A (M, K) and B (N, K), both read as vec4s along k, read 8
 * elements a load instead (a uvec4 of four words, or an R32G32B32A32_UINT texel), k stepping by
 * 8: the loads, which llvmpipe's cost follows (one gather or loop over the lanes each), halve
 * for the same bytes (matmul_cpu.glsl, sums_k8). The forward products of the model's linear
 * layers, decoding's among them, have this layout: GPT-2 small's decode step's products ran in
 * bf16 1.65-1.72x faster than in fp32 instead of 1.13-1.19x, fp16 1.19-1.30x instead of 1.0x;
 * the same sums in the same order, so the same bits (matmul_cpu.glsl's header has the
 * measurements). The vec4 flags already hold the views' offsets to whole uvec4s (4 words, 8
 * elements) from a word's low half; the rows and batches must start at multiples of 8 too. */
static bool cpu_k8(const vkb_matmul *mm, uint32_t vec, const pc_matmul *pc) {
    return (vec & (VEC_A | VEC_B)) == (VEC_A | VEC_B) && !mm->trans_a && mm->trans_b &&
           mm->K % 8 == 0 && pc->lda % 8 == 0 && pc->ldb % 8 == 0 && pc->stride_a % 8 == 0 &&
           pc->stride_b % 8 == 0;
}

/* A block of the product: batches [b0, b0 + bn), rows [m0, m0 + mn), columns [n0, n0 + nn),
 * depth [k0, k0 + kn). */
typedef struct mm_block {
    size_t b0, bn, m0, mn, n0, nn, k0, kn;
} mm_block;

/* Elements the views of out, A and B span for a block of the given sizes. */
static void block_spans(const vkb_matmul *mm, size_t so, size_t sa, size_t sb, const mm_block *b,
                        size_t span[3]) {
    size_t M = (size_t)mm->M, N = (size_t)mm->N, K = (size_t)mm->K;
    span[0] = (b->bn - 1) * so + (b->mn - 1) * N + b->nn;
    span[1] = (b->bn - 1) * sa + (mm->trans_a ? (b->kn - 1) * M + b->mn : (b->mn - 1) * K + b->kn);
    span[2] = (b->bn - 1) * sb + (mm->trans_b ? (b->nn - 1) * K + b->kn : (b->kn - 1) * N + b->nn);
}

/* The words a view of n 16-bit elements takes (two a word): (n + 1) / 2 from a word's low half,
 * one more where a block starts at a high half (any block but the whole product may). */
static size_t words16(size_t n, bool whole) { return whole ? (n + 1) / 2 : n / 2 + 1; }

/* Half of n, rounded up to a multiple of 16 past 16 (tiles, vec4 access). */
static size_t half(size_t n) {
    size_t h = (n + 1) / 2;
    return h > 16 ? (h + 15) / 16 * 16 : h;
}

/* Block sizes such that every view fits `most` elements (words of 16-bit out, A and B):
 * batches first, then the dimension that makes the largest view too long (its rows before its
 * contiguous extent). */
static bool choose_blocks(const vkb_matmul *mm, size_t so, size_t sa, size_t sb, size_t most,
                          mm_block *b) {
    *b = (mm_block){.bn = (size_t)mm->batch, .mn = (size_t)mm->M, .nn = (size_t)mm->N,
                    .kn = (size_t)mm->K};
    for (bool whole = true;; whole = false) {
        size_t span[3];
        block_spans(mm, so, sa, sb, b, span);
        if (mm->a.dtype != VKA_F32) /* 16-bit A and B: their views count words */
            span[1] = words16(span[1], whole), span[2] = words16(span[2], whole);
        if (mm->out.dtype != VKA_F32) span[0] = words16(span[0], whole);
        int worst = 0;
        for (int i = 1; i < 3; i++)
            if (span[i] > span[worst]) worst = i;
        if (span[worst] <= most) return true;
        if (b->bn > 1) {
            b->bn = (b->bn + 1) / 2;
            continue;
        }
        size_t *first, *second;
        if (worst == 0) {
            first = &b->mn, second = &b->nn;
        } else if (worst == 1) {
            first = mm->trans_a ? &b->kn : &b->mn, second = mm->trans_a ? &b->mn : &b->kn;
        } else {
            first = mm->trans_b ? &b->nn : &b->kn, second = mm->trans_b ? &b->kn : &b->nn;
        }
        if (*first > 1) *first = half(*first);
        else if (*second > 1) *second = half(*second);
        else return false;
    }
}

static void dispatch_block(vkv_backend *vb, const vkb_matmul *mm, size_t so, size_t sa,
                           size_t sb, const mm_block *blk) {
    const vkr_device *dev = vkv_device(vb);
    size_t M = (size_t)mm->M, N = (size_t)mm->N, K = (size_t)mm->K;
    bool bias = vkb_present(mm->bias) && blk->k0 == 0;
    vkb_matmul sub = *mm;
    sub.M = (int)blk->mn, sub.N = (int)blk->nn, sub.K = (int)blk->kn, sub.batch = (int)blk->bn;
    size_t span[3];
    block_spans(mm, so, sa, sb, blk, span);
    uint32_t out_half;
    size_t o0 = blk->b0 * so + blk->m0 * N + blk->n0;
    vkb_tensor o = vkv_elem_view(mm->out, o0, span[0], &out_half);
    size_t a0 = blk->b0 * sa + (mm->trans_a ? blk->k0 * M + blk->m0 : blk->m0 * K + blk->k0);
    size_t b0 = blk->b0 * sb + (mm->trans_b ? blk->n0 * K + blk->k0 : blk->k0 * N + blk->n0);
    bool is16 = mm->a.dtype != VKA_F32; /* a and b alike (op_checks.c) */
    uint32_t a_half, b_half;
    vkb_tensor a = vkv_elem_view(mm->a, a0, span[1], &a_half);
    vkb_tensor b = vkv_elem_view(mm->b, b0, span[2], &b_half);
    vkb_tensor bs = bias ? vkb_slice(mm->bias, blk->n0, blk->nn) : VKB_NONE;
    bool one = blk->bn == 1; /* strides unused: keep them in 32 bits */
    mm_tile t = dev->is_cpu ? cpu_tile(&sub) : gpu_tile(dev, &sub);
    pc_matmul pc = {.M = (uint32_t)blk->mn, .N = (uint32_t)blk->nn, .K = (uint32_t)blk->kn,
                    .batch = (uint32_t)blk->bn, .stride_out = one ? 0 : (uint32_t)so,
                    .stride_a = one ? 0 : (uint32_t)sa, .stride_b = one ? 0 : (uint32_t)sb,
                    .has_bias = bias, .accumulate = mm->accumulate || blk->k0 > 0,
                    .alpha = mm->alpha, .lda = (uint32_t)(mm->trans_a ? M : K),
                    .ldb = (uint32_t)(mm->trans_b ? K : N), .ldo = (uint32_t)N,
                    .a_half = a_half, .b_half = b_half, .out_half = out_half};
    bool any16 = is16 || mm->out.dtype != VKA_F32;
    vkv_call call = {.shader = any16 ? vkv_s16(vb, VKA_SHADER_MATMUL, VKA_SHADER_MATMUL_S16)
                                     : VKA_SHADER_MATMUL,
                     .n_spec = 8,
                     .bind = {o, a, b, bs},
                     .writes = {true, false, false, false},
                     .n_bind = 4,
                     VKV_PC(&pc),
                     .groups = tile_count(t, &sub),
                     .label = "matmul"};
    uint32_t vec = 0;
    if (dev->is_cpu) vec = cpu_vec_flags(vb, &call, &sub, t, &pc);
    if (is16) vec |= mm->a.dtype == VKA_F16 ? AB_F16 : AB_BF16;
    if (is16 && dev->is_cpu && cpu_k8(&sub, vec, &pc)) vec |= K8;
    /* CPU-type devices with texel_operands read A and B through texel views (matmul.comp's
     * texel build; an application's buffers without texel usage through storage): vec4s
     * where they are read as vec4s, else one element per texel (R32F, or R16_UINT for 16-bit
     * ones), gathered too. float32 A and B at texel bindings 0 and 1 (float samplerBuffer),
     * 16-bit ones at 2 and 3 (usamplerBuffer). */
    vkv_texel_format u16 = vec & K8 ? VKV_TEXEL_U16X8 : VKV_TEXEL_U16X4;
    vkv_texel_format fa = is16 ? (vec & VEC_A ? u16 : VKV_TEXEL_U16)
                               : (vec & VEC_A ? VKV_TEXEL_VEC4 : VKV_TEXEL_F32);
    vkv_texel_format fb = is16 ? (vec & VEC_B ? u16 : VKV_TEXEL_U16)
                               : (vec & VEC_B ? VKV_TEXEL_VEC4 : VKV_TEXEL_F32);
    if (vkv_views_texel_as(vb, &call, 0x2, fa)) vec |= TEXEL_A;
    if (vkv_views_texel_as(vb, &call, 0x4, fb)) vec |= TEXEL_B;
    if (vec & (TEXEL_A | TEXEL_B)) {
        int s = is16 ? 2 : 0;
        call.shader = VKA_SHADER_MATMUL_TEXEL;
        for (int j = 0; j < 4; j++) call.texel[j] = VKV_NO_TEXEL;
        call.texel[s] = vec & TEXEL_A ? 1 : VKV_NO_TEXEL;
        call.texel[s + 1] = vec & TEXEL_B ? 2 : VKV_NO_TEXEL;
        call.texel_format[2] = call.texel_format[3] = VKV_TEXEL_U16; /* declared uint */
        call.texel_format[s] = (uint8_t)fa;
        call.texel_format[s + 1] = (uint8_t)fb;
        call.n_texel = 4;
    }
    if (dev->is_cpu) {
        t = cpu_tile_for_loads(t, vec);
        call.groups = tile_count(t, &sub);
    }
    /* The CPU variant's ln is pc.ln: its LN constant stays 1, so widths share a pipeline. */
    pc.ln = t.ln;
    uint32_t spec[9] = {t.wg, (mm->trans_a ? 1u : 0u) | (mm->trans_b ? 2u : 0u),
                        dev->is_cpu ? 1u : 0u, t.tm, t.tn, dev->is_cpu ? 1u : t.ln, t.bk, vec,
                        mm->out.dtype};
    memcpy(call.spec, spec, sizeof spec);
    if (mm->out.dtype != VKA_F32) call.n_spec = 9; /* float32: the 8 constants it always had */
    vkv_dispatch(vb, &call);
}

void vkv_matmul(vkb_backend *be, const vkb_matmul *mm) {
    vkv_backend *vb = (vkv_backend *)be;
    size_t M = (size_t)mm->M, N = (size_t)mm->N, K = (size_t)mm->K;
    size_t sa = mm->stride_a ? mm->stride_a : M * K;
    size_t sb = mm->stride_b ? mm->stride_b : K * N;
    size_t so = mm->stride_out ? mm->stride_out : M * N;
    size_t span_out = vkb_batch_span(mm->batch, so, M * N);
    size_t span_a = vkb_batch_span(mm->batch, sa, M * K);
    size_t span_b = vkb_batch_span(mm->batch, sb, K * N);
    bool bias = vkb_present(mm->bias);
    /* vkb_overlap counts 32-bit words: a 16-bit operand's span is half its elements */
    if (mm->out.dtype != VKA_F32) span_out = (span_out + 1) / 2;
    if (mm->a.dtype != VKA_F32) span_a = (span_a + 1) / 2;
    if (mm->b.dtype != VKA_F32) span_b = (span_b + 1) / 2;
    if (vkb_overlap(mm->out, span_out, mm->a, span_a) ||
        vkb_overlap(mm->out, span_out, mm->b, span_b) ||
        (bias && vkb_overlap(mm->out, span_out, mm->bias, N))) {
        vkb_fail(be, VKA_ERROR_INVALID_ARGUMENT, "matmul: out overlaps an input (not supported)");
        return;
    }
    mm_block blk;
    if (!choose_blocks(mm, so, sa, sb, vkv_bind_elems(vb), &blk)) {
        vkb_fail(be, VKA_ERROR_DEVICE_LIMIT, "matmul: no block fits the binding limit");
        return;
    }
    if (mm->out.dtype != VKA_F32 && blk.kn < K) {
        vkb_fail(be, VKA_ERROR_DEVICE_LIMIT,
                 "matmul: a %s out cannot take a product split along K (K = %d: a or b passes "
                 "the binding limit of %zu elements or words along K; the K blocks would round "
                 "out twice); use an f32 out",
                 vka_dtype_string((vka_dtype)mm->out.dtype), mm->K, vkv_bind_elems(vb));
        return;
    }
    size_t bn = blk.bn, mn = blk.mn, nn = blk.nn, kn = blk.kn;
    for (blk.b0 = 0; blk.b0 < (size_t)mm->batch; blk.b0 += bn)
        for (blk.m0 = 0; blk.m0 < M; blk.m0 += mn)
            for (blk.n0 = 0; blk.n0 < N; blk.n0 += nn)
                for (blk.k0 = 0; blk.k0 < K; blk.k0 += kn) {
                    mm_block b = blk;
                    b.bn = VKA_MIN(bn, (size_t)mm->batch - blk.b0);
                    b.mn = VKA_MIN(mn, M - blk.m0);
                    b.nn = VKA_MIN(nn, N - blk.n0);
                    b.kn = VKA_MIN(kn, K - blk.k0);
                    dispatch_block(vb, mm, so, sa, sb, &b);
                }
}
