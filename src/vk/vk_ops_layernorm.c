/*
 * Layer normalisation, forward and backward (shaders/layernorm_forward.comp,
 * layernorm_backward.comp for dinp, layernorm_backward_params.comp for dweight and dbias).
 * Rows are spread over workgroups as in shaders/rowreduce.glsl, the parameter gradients' column
 * sums as in shaders/colreduce.glsl.
 *
 * CPU-type devices with texel_operands take the _texel builds when C and every offset are
 * multiples of 4 and the tensors may be read as texels (vkv_views_texel): each invocation then
 * walks its row (or, for dweight/dbias, its 4 columns) as vec4s read through uniform texel
 * buffers, one gather each on llvmpipe where a storage buffer load is a loop over the lanes.
 * Otherwise (odd C, an application's buffers, VKATTN_TEXEL_LOADS=0, GPUs) the storage paths.
 */
#include "vk/vk_reduce.h"
#include "pc/layernorm.h"

/* Whether the texel build of call may read its views in `texels` as texels, for rows of C
 * elements, with its views in `vec4` (bit i: binding i) all starting at multiples of 4
 * (vec4 access). */
static bool texel_path(vkv_backend *vb, int C, const vkv_call *call, uint32_t texels,
                       uint32_t vec4) {
    return C % 4 == 0 && vkv_views_texel(vb, call, texels) && vkv_views_vec4(vb, call, vec4);
}

/* The row layout of a block of n rows (lanes as vkv_rows_layout takes them), and whether it is
 * the texel build's: texel_path holds and the vec4 row (C / 4) takes one invocation per row
 * (SEG 1); else the storage build's layout over C elements. */
static bool rows_layout(vkv_backend *vb, size_t n, int C, const vkv_call *call, uint32_t texels,
                        uint32_t vec4, int lanes, vkv_layout *lay) {
    if (texel_path(vb, C, call, texels, vec4)) {
        *lay = vkv_rows_layout(vb, (uint64_t)n, (uint64_t)C / 4, lanes);
        if (lay->spec[1] == 1) return true;
    }
    *lay = vkv_rows_layout(vb, (uint64_t)n, (uint64_t)C, lanes);
    return false;
}

/* Words a 16-bit view of a block of rows of C elements may take per row: (half + n C + 1) / 2
 * <= n (C / 2 + 1) words for n rows from either half of a word. */
static size_t per_row16(int C) { return (size_t)C / 2 + 1; }

/* 16-bit out or inp (backend.h): INP16 / OUT16 (spec 3, 4) set to their dtypes, in the build
 * the f32 op takes for the shape (the texel build's sums run in another order than the storage
 * build's: out16 == convert(out32) needs the same one), with the 16-bit views read and written
 * as words through their storage bindings, so only the f32 views decide for texels; blocks of
 * rows as for f32, their 16-bit views counted in words (pc.half0: a block starting at an odd
 * element). */
void vkv_layernorm_forward(vkb_backend *be, vkb_tensor out, vkb_tensor mean, vkb_tensor rstd,
                           vkb_tensor inp, vkb_tensor weight, vkb_tensor bias, int N, int C) {
    const char *op = "layernorm_forward";
    vkv_backend *vb = (vkv_backend *)be;
    bool any16 = out.dtype != VKA_F32 || inp.dtype != VKA_F32;
    /* the texel build's views (bit i: binding i) among out, inp, weight, bias: f32 ones only */
    uint32_t f32_views = 0x30u | (out.dtype ? 0u : 0x1u) | (inp.dtype ? 0u : 0x8u);
    size_t per_row[4] = {out.dtype ? per_row16(C) : (size_t)C, 1, 1,
                         inp.dtype ? per_row16(C) : (size_t)C};
    const char *names[4] = {"out", "mean", "rstd", "inp"};
    size_t block = vkv_block_rows(vb, op, (size_t)N, per_row, names, 4);
    if (!block) return;
    vkv_layout lay = vkv_rows_layout(vb, (uint64_t)VKA_MIN(block, (size_t)N), (uint64_t)C, 3);
    if (!vkv_check_layout(be, op, &lay)) return;
    vkb_tensor ws = vkb_slice(weight, 0, C), bs = vkb_slice(bias, 0, C);
    for (size_t r0 = 0; r0 < (size_t)N; r0 += block) {
        size_t n = VKA_MIN(block, (size_t)N - r0), e0 = r0 * C;
        vkb_tensor os = vkv_elem_view(out, e0, n * C, NULL);
        vkb_tensor is = vkv_elem_view(inp, e0, n * C, NULL);
        vkb_tensor ms = vkb_slice(mean, r0, n), rs = vkb_slice(rstd, r0, n);
        pc_layernorm_forward pc = {.N = (uint32_t)n, .C = (uint32_t)C,
                                   .half0 = (uint32_t)(e0 & 1)};
        vkv_call call = {.shader = any16 ? vkv_s16(vb, VKA_SHADER_LAYERNORM_FORWARD,
                                                   VKA_SHADER_LAYERNORM_FORWARD_S16)
                                         : VKA_SHADER_LAYERNORM_FORWARD,
                         .texel = {inp.dtype ? VKV_NO_TEXEL : 3, 4, 5},
                         .bind = {os, ms, rs, is, ws, bs},
                         .writes = {true, true, true},
                         .n_bind = 6,
                         VKV_PC(&pc),
                         .label = op};
        /* texel build: one invocation per row (SEG 1), C / 4 loop iterations per pass; reads
         * inp, weight, bias as texels; out, inp, weight, bias as vec4s (f32 ones: f32_views) */
        if (rows_layout(vb, n, C, &call, f32_views & 0x38u, f32_views, 3, &lay)) {
            call.shader = VKA_SHADER_LAYERNORM_FORWARD_TEXEL;
            call.n_texel = 3;
        }
        vkv_call_layout(&call, &lay);
        if (any16) {
            call.spec[3] = inp.dtype;
            call.spec[4] = out.dtype;
            call.n_spec = 5;
        }
        vkv_dispatch(vb, &call);
    }
}

/* Sets call's DOUT16, INP16, W16 (spec 3, 4, 5) to the dtypes of a call with 16-bit tensors;
 * an f32 call keeps its layout's constants (its pipeline). */
static void spec16(vkv_call *call, vkb_tensor dout, vkb_tensor inp, vkb_tensor weight) {
    if (!dout.dtype && !inp.dtype && !weight.dtype) return;
    for (int i = call->n_spec; i < 3; i++) call->spec[i] = 0; /* ids the shader may not have */
    call->spec[3] = dout.dtype;
    call->spec[4] = inp.dtype;
    call->spec[5] = weight.dtype;
    call->n_spec = 6;
}

/* Per block of rows, two independent dispatches (no barrier between them): dinp by rows,
 * dweight/dbias by columns. Both read dout and inp; the column sums need no scratch and stay
 * deterministic (blocks add to dweight/dbias one after another, in order).
 * 16-bit dout, inp and/or weight (backend.h): spec16 in the build the f32 op takes for the
 * shape (as the forward's: only the f32 views decide for texels, 16-bit ones are read as words
 * through their storage bindings); blocks count 16-bit views in words, pc.half0 flags a block
 * starting at an odd element. */
void vkv_layernorm_backward(vkb_backend *be, vkb_tensor dinp, vkb_tensor dweight,
                            vkb_tensor dbias, vkb_tensor dout, vkb_tensor inp, vkb_tensor weight,
                            vkb_tensor mean, vkb_tensor rstd, int N, int C) {
    const char *op = "layernorm_backward";
    vkv_backend *vb = (vkv_backend *)be;
    size_t per_row[5] = {(size_t)C, dout.dtype ? per_row16(C) : (size_t)C,
                         inp.dtype ? per_row16(C) : (size_t)C, 1, 1};
    const char *names[5] = {"dinp", "dout", "inp", "mean", "rstd"};
    size_t block = vkv_block_rows(vb, op, (size_t)N, per_row, names, 5);
    if (!block) return;
    if (weight.dtype ? !vkv_fits16(vb, op, "weight", (size_t)C, weight.dtype)
                     : !vkv_fits(vb, op, "weight", (size_t)C))
        return;
    size_t first = VKA_MIN(block, (size_t)N);
    vkv_layout rows = vkv_rows_layout(vb, (uint64_t)first, (uint64_t)C, 2);
    vkv_layout cols = vkv_cols_layout(vb, (uint64_t)first, (uint64_t)C);
    if (!vkv_check_layout(be, op, &rows) || !vkv_check_layout(be, op, &cols)) return;
    vkb_tensor ws = vkv_elem_view(weight, 0, C, NULL), dws = vkb_slice(dweight, 0, C);
    vkb_tensor dbs = vkb_slice(dbias, 0, C);
    /* f32 views among dout (bit 1), inp (2), weight (3) for the rows, dout (2), inp (3) for the
     * columns: only they decide for texels and vec4s */
    uint32_t f32_rows = (dout.dtype ? 0u : 0x2u) | (inp.dtype ? 0u : 0x4u) |
                        (weight.dtype ? 0u : 0x8u);
    uint32_t f32_cols = (dout.dtype ? 0u : 0x4u) | (inp.dtype ? 0u : 0x8u);
    for (size_t r0 = 0; r0 < (size_t)N; r0 += block) {
        size_t n = VKA_MIN(block, (size_t)N - r0);
        uint32_t hd, hi; /* both 16-bit views start at element r0 * C: one flag */
        vkb_tensor ds = vkb_slice(dinp, r0 * C, n * C);
        vkb_tensor gs = vkv_elem_view(dout, r0 * C, n * C, &hd);
        vkb_tensor is = vkv_elem_view(inp, r0 * C, n * C, &hi);
        uint32_t half = hd | hi;
        vkb_tensor ms = vkb_slice(mean, r0, n), rs = vkb_slice(rstd, r0, n);
        pc_layernorm_backward pr = {.N = (uint32_t)n, .C = (uint32_t)C, .half0 = half};
        vkv_call call = {.shader = VKA_SHADER_LAYERNORM_BACKWARD,
                         .texel = {dout.dtype ? VKV_NO_TEXEL : 1, inp.dtype ? VKV_NO_TEXEL : 2,
                                   weight.dtype ? VKV_NO_TEXEL : 3},
                         .bind = {ds, gs, is, ws, ms, rs},
                         .writes = {true},
                         .n_bind = 6,
                         VKV_PC(&pr),
                         .label = op};
        /* texels: dout, inp, weight; vec4s: dinp, dout, inp, weight (f32 ones) */
        if (rows_layout(vb, n, C, &call, f32_rows, 0x1u | f32_rows, 2, &rows)) {
            call.shader = VKA_SHADER_LAYERNORM_BACKWARD_TEXEL;
            call.n_texel = 3;
        }
        vkv_call_layout(&call, &rows);
        spec16(&call, dout, inp, weight);
        vkv_dispatch(vb, &call);

        pc_layernorm_params pp = {.N = (uint32_t)n, .C = (uint32_t)C, .half0 = half};
        call = (vkv_call){.shader = VKA_SHADER_LAYERNORM_BACKWARD_PARAMS,
                          .texel = {dout.dtype ? VKV_NO_TEXEL : 2, inp.dtype ? VKV_NO_TEXEL : 3},
                          .bind = {dws, dbs, gs, is, ms, rs},
                          .writes = {true, true},
                          .n_bind = 6,
                          VKV_PC(&pp),
                          .label = op};
        /* texels: dout, inp; vec4s: dweight, dbias, dout, inp (f32 ones) */
        bool texel = texel_path(vb, C, &call, f32_cols, 0x3u | f32_cols);
        cols = texel ? vkv_quad_cols_layout(vb, (uint64_t)n, (uint64_t)C / 4)
                     : vkv_cols_layout(vb, (uint64_t)n, (uint64_t)C);
        if (texel) {
            call.shader = VKA_SHADER_LAYERNORM_BACKWARD_PARAMS_TEXEL;
            call.n_texel = 2;
        }
        vkv_call_layout(&call, &cols);
        spec16(&call, dout, inp, VKB_NONE);
        vkv_dispatch(vb, &call);
    }
}
