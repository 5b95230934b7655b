/* Batched matrix product (shaders/matmul.comp, variants in matmul_gpu.glsl / matmul_cpu.glsl).
 *
 * One dispatch per op: a workgroup per BM x BN tile of out per batch, in a linear grid that
 * vkv_dispatch folds past maxComputeWorkGroupCount. The tile shape is chosen here from the
 * problem size and the device; transposes, the variant and the tile shape are specialization
 * constants, so every combination is its own straight-line pipeline. */
#include "vk/vk_internal.h"

typedef struct pc_matmul {
    uint32_t out_off, a_off, b_off, bias_off; /* element offsets of the bound tensors */
    uint32_t M, N, K, batch;
    uint32_t stride_out, stride_a, stride_b;  /* elements between batches */
    uint32_t has_bias, accumulate;
    float alpha;
} pc_matmul;
_Static_assert(sizeof(pc_matmul) <= VKV_PUSH_CONSTANT_BYTES, "push constants");

/* Specialization constants 0 and 3..7 of matmul.comp: wg invocations, ln of them along N,
 * each computing tm x tn outputs; bk = GPU shared-slice depth; vec = CPU vec4 access flags. */
typedef struct mm_tile {
    uint32_t wg, ln, tm, tn, bk;
} mm_tile;

enum { VEC_A = 1, VEC_B = 2, VEC_OUT = 4 };

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
    if (mm->M < 16) t.tm = mm->M <= 4 ? 4 : 8;
    if (mm->N < 16) t.tn = mm->N <= 4 ? 4 : 8;
    int tn = (int)t.tn;
    t.ln = mm->N > 2 * tn ? 4 : mm->N > tn ? 2 : 1;
    return t;
}

/* Which operands the CPU variant may read (and out it may write) as vec4: the contiguous
 * dimension it reads 4 at a time, the offsets and batch strides must be multiples of 4. */
static uint32_t cpu_vec_flags(const vkb_matmul *mm, mm_tile t, size_t sa, size_t sb, size_t so) {
    uint32_t vec = 0;
    bool bias = vkb_present(mm->bias);
    if (mm->a.offset % 4 == 0 && sa % 4 == 0 &&
        (mm->trans_a ? mm->M % 4 == 0 && t.tm % 4 == 0 : mm->K % 4 == 0))
        vec |= VEC_A;
    if (mm->b.offset % 4 == 0 && sb % 4 == 0 &&
        (mm->trans_b ? mm->K % 4 == 0 : mm->N % 4 == 0 && t.tn % 4 == 0))
        vec |= VEC_B;
    if (mm->out.offset % 4 == 0 && so % 4 == 0 && mm->N % 4 == 0 && t.tn % 4 == 0 &&
        (!bias || mm->bias.offset % 4 == 0))
        vec |= VEC_OUT;
    return vec;
}

void vkv_matmul(vkb_backend *be, const vkb_matmul *mm) {
    vkv_backend *vb = (vkv_backend *)be;
    const vkr_device *dev = vkv_device(vb);
    size_t M = (size_t)mm->M, N = (size_t)mm->N, K = (size_t)mm->K;
    size_t sa = mm->stride_a ? mm->stride_a : M * K;
    size_t sb = mm->stride_b ? mm->stride_b : K * N;
    size_t so = mm->stride_out ? mm->stride_out : M * N;
    size_t span_out = vkb_batch_span(mm->batch, so, M * N);
    size_t span_a = vkb_batch_span(mm->batch, sa, M * K);
    size_t span_b = vkb_batch_span(mm->batch, sb, K * N);
    bool bias = vkb_present(mm->bias);
    if (vkb_overlap(mm->out, span_out, mm->a, span_a) ||
        vkb_overlap(mm->out, span_out, mm->b, span_b) ||
        (bias && vkb_overlap(mm->out, span_out, mm->bias, N))) {
        vkb_fail(be, VKA_ERROR_INVALID_ARGUMENT, "matmul: out overlaps an input (not supported)");
        return;
    }

    mm_tile t = dev->is_cpu ? cpu_tile(mm) : gpu_tile(dev, mm);
    uint32_t vec = dev->is_cpu ? cpu_vec_flags(mm, t, sa, sb, so) : 0;
    pc_matmul pc = {mm->out.offset, mm->a.offset, mm->b.offset, bias ? mm->bias.offset : 0,
                    (uint32_t)M, (uint32_t)N, (uint32_t)K, (uint32_t)mm->batch,
                    (uint32_t)so, (uint32_t)sa, (uint32_t)sb, bias, mm->accumulate, mm->alpha};
    vkv_call call = {.shader = VKA_SHADER_MATMUL,
                     .spec = {t.wg, (mm->trans_a ? 1u : 0u) | (mm->trans_b ? 2u : 0u),
                              dev->is_cpu ? 1u : 0u, t.tm, t.tn, t.ln, t.bk, vec},
                     .n_spec = 8,
                     .bind = {vkb_slice(mm->out, 0, span_out), vkb_slice(mm->a, 0, span_a),
                              vkb_slice(mm->b, 0, span_b),
                              bias ? vkb_slice(mm->bias, 0, N) : VKB_NONE},
                     .writes = {true, false, false, false},
                     .n_bind = 4,
                     .pc = &pc,
                     .pc_size = sizeof pc,
                     .groups = tile_count(t, mm),
                     .label = "matmul"};
    vkv_dispatch(vb, &call);
}
