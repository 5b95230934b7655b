/*
 * Layer normalisation, forward and backward (shaders/layernorm_forward.comp,
 * layernorm_backward.comp for dinp, layernorm_backward_params.comp for dweight and dbias).
 * Rows are spread over workgroups as in shaders/rowreduce.glsl, the parameter gradients' column
 * sums as in shaders/colreduce.glsl.
 *
 * CPU-type devices with texel_operands take the _texel builds when C and every offset are
 * multiples of 4 and the tensors may be read as texels (vkv_texel_ok): each invocation then
 * walks its row (or, for dweight/dbias, its 4 columns) as vec4s read through uniform texel
 * buffers, one gather each on llvmpipe where a storage buffer load is a loop over the lanes.
 * Otherwise (odd C, an application's buffers, VKATTN_TEXEL_LOADS=0, GPUs) the storage paths.
 */
#include "vk/vk_reduce.h"

typedef struct pc_layernorm {
    uint32_t out_off, mean_off, rstd_off, inp_off, weight_off, bias_off;
    uint32_t N, C;
} pc_layernorm;
_Static_assert(sizeof(pc_layernorm) <= VKV_PUSH_CONSTANT_BYTES, "push constants");

typedef struct pc_layernorm_backward {
    uint32_t dinp_off, dout_off, inp_off, weight_off, mean_off, rstd_off;
    uint32_t N, C;
} pc_layernorm_backward;
_Static_assert(sizeof(pc_layernorm_backward) <= VKV_PUSH_CONSTANT_BYTES, "push constants");

typedef struct pc_layernorm_params {
    uint32_t dweight_off, dbias_off, dout_off, inp_off, mean_off, rstd_off;
    uint32_t N, C;
} pc_layernorm_params;
_Static_assert(sizeof(pc_layernorm_params) <= VKV_PUSH_CONSTANT_BYTES, "push constants");

/* Whether the texel builds may read views t[0 .. n) (vkv_texel_ok) for rows of C elements
 * whose push-constant offsets offs[0 .. n_offs) are all multiples of 4 (vec4 access). */
static bool texel_path(vkv_backend *vb, int C, const vkb_tensor *t, int n, const uint32_t *offs,
                       int n_offs) {
    if (!vkv_device(vb)->texel_operands || C % 4) return false;
    for (int i = 0; i < n_offs; i++)
        if (offs[i] % 4) return false;
    for (int i = 0; i < n; i++)
        if (!vkv_texel_ok(vb, t[i])) return false;
    return true;
}

/* The row layout of a block of n rows (lanes as vkv_rows_layout takes them), and whether it is
 * the texel build's: texel_path holds and the vec4 row (C / 4) takes one invocation per row
 * (SEG 1); else the storage build's layout over C elements. */
static bool rows_layout(vkv_backend *vb, size_t n, int C, const vkb_tensor *t, int n_t,
                        const uint32_t *offs, int n_offs, int lanes, vkv_layout *lay) {
    if (texel_path(vb, C, t, n_t, offs, n_offs)) {
        *lay = vkv_rows_layout(vb, (uint64_t)n, (uint64_t)C / 4, lanes);
        if (lay->spec[1] == 1) return true;
    }
    *lay = vkv_rows_layout(vb, (uint64_t)n, (uint64_t)C, lanes);
    return false;
}

void vkv_layernorm_forward(vkb_backend *be, vkb_tensor out, vkb_tensor mean, vkb_tensor rstd,
                           vkb_tensor inp, vkb_tensor weight, vkb_tensor bias, int N, int C) {
    const char *op = "layernorm_forward";
    vkv_backend *vb = (vkv_backend *)be;
    size_t per_row[4] = {(size_t)C, 1, 1, (size_t)C};
    const char *names[4] = {"out", "mean", "rstd", "inp"};
    size_t block = vkv_block_rows(vb, op, (size_t)N, per_row, names, 4);
    if (!block) return;
    vkv_layout lay = vkv_rows_layout(vb, (uint64_t)VKA_MIN(block, (size_t)N), (uint64_t)C, 3);
    if (!vkv_check_layout(be, op, &lay)) return;
    vkb_tensor ws = vkb_slice(weight, 0, C), bs = vkb_slice(bias, 0, C);
    for (size_t r0 = 0; r0 < (size_t)N; r0 += block) {
        size_t n = VKA_MIN(block, (size_t)N - r0);
        vkb_tensor os = vkb_slice(out, r0 * C, n * C), is = vkb_slice(inp, r0 * C, n * C);
        vkb_tensor ms = vkb_slice(mean, r0, n), rs = vkb_slice(rstd, r0, n);
        pc_layernorm pc = {vkv_off(vb, os), vkv_off(vb, ms), vkv_off(vb, rs), vkv_off(vb, is),
                           vkv_off(vb, ws), vkv_off(vb, bs), (uint32_t)n, (uint32_t)C};
        /* texel build: one invocation per row (SEG 1), C / 4 loop iterations per pass */
        vkb_tensor tex[3] = {is, ws, bs};
        uint32_t offs[4] = {pc.out_off, pc.inp_off, pc.weight_off, pc.bias_off};
        bool texel = rows_layout(vb, n, C, tex, 3, offs, 4, 3, &lay);
        vkv_call call = {.shader = texel ? VKA_SHADER_LAYERNORM_FORWARD_TEXEL
                                         : VKA_SHADER_LAYERNORM_FORWARD,
                         .texel = {3, 4, 5},
                         .n_texel = texel ? 3 : 0,
                         .bind = {os, ms, rs, is, ws, bs},
                         .writes = {true, true, true},
                         .n_bind = 6,
                         .pc = &pc,
                         .pc_size = sizeof pc,
                         .label = op};
        vkv_call_layout(&call, &lay);
        vkv_dispatch(vb, &call);
    }
}

/* Per block of rows, two independent dispatches (no barrier between them): dinp by rows,
 * dweight/dbias by columns. Both read dout and inp; the column sums need no scratch and stay
 * deterministic (blocks add to dweight/dbias one after another, in order). */
void vkv_layernorm_backward(vkb_backend *be, vkb_tensor dinp, vkb_tensor dweight,
                            vkb_tensor dbias, vkb_tensor dout, vkb_tensor inp, vkb_tensor weight,
                            vkb_tensor mean, vkb_tensor rstd, int N, int C) {
    const char *op = "layernorm_backward";
    vkv_backend *vb = (vkv_backend *)be;
    size_t per_row[5] = {(size_t)C, (size_t)C, (size_t)C, 1, 1};
    const char *names[5] = {"dinp", "dout", "inp", "mean", "rstd"};
    size_t block = vkv_block_rows(vb, op, (size_t)N, per_row, names, 5);
    if (!block || !vkv_fits(vb, op, "weight", (size_t)C)) return;
    size_t first = VKA_MIN(block, (size_t)N);
    vkv_layout rows = vkv_rows_layout(vb, (uint64_t)first, (uint64_t)C, 2);
    vkv_layout cols = vkv_cols_layout(vb, (uint64_t)first, (uint64_t)C);
    if (!vkv_check_layout(be, op, &rows) || !vkv_check_layout(be, op, &cols)) return;
    vkb_tensor ws = vkb_slice(weight, 0, C), dws = vkb_slice(dweight, 0, C);
    vkb_tensor dbs = vkb_slice(dbias, 0, C);
    for (size_t r0 = 0; r0 < (size_t)N; r0 += block) {
        size_t n = VKA_MIN(block, (size_t)N - r0);
        vkb_tensor ds = vkb_slice(dinp, r0 * C, n * C), gs = vkb_slice(dout, r0 * C, n * C);
        vkb_tensor is = vkb_slice(inp, r0 * C, n * C);
        vkb_tensor ms = vkb_slice(mean, r0, n), rs = vkb_slice(rstd, r0, n);
        pc_layernorm_backward pr = {vkv_off(vb, ds), vkv_off(vb, gs), vkv_off(vb, is),
                                    vkv_off(vb, ws), vkv_off(vb, ms), vkv_off(vb, rs),
                                    (uint32_t)n,     (uint32_t)C};
        vkb_tensor tex[3] = {gs, is, ws};
        uint32_t offs[4] = {pr.dinp_off, pr.dout_off, pr.inp_off, pr.weight_off};
        bool texel = rows_layout(vb, n, C, tex, 3, offs, 4, 2, &rows);
        vkv_call call = {.shader = texel ? VKA_SHADER_LAYERNORM_BACKWARD_TEXEL
                                         : VKA_SHADER_LAYERNORM_BACKWARD,
                         .texel = {1, 2, 3},
                         .n_texel = texel ? 3 : 0,
                         .bind = {ds, gs, is, ws, ms, rs},
                         .writes = {true},
                         .n_bind = 6,
                         .pc = &pr,
                         .pc_size = sizeof pr,
                         .label = op};
        vkv_call_layout(&call, &rows);
        vkv_dispatch(vb, &call);

        pc_layernorm_params pp = {vkv_off(vb, dws), vkv_off(vb, dbs), vkv_off(vb, gs),
                                  vkv_off(vb, is),  vkv_off(vb, ms),  vkv_off(vb, rs),
                                  (uint32_t)n,      (uint32_t)C};
        vkb_tensor ptex[2] = {gs, is};
        uint32_t poffs[4] = {pp.dweight_off, pp.dbias_off, pp.dout_off, pp.inp_off};
        texel = texel_path(vb, C, ptex, 2, poffs, 4);
        cols = texel ? vkv_quad_cols_layout(vb, (uint64_t)n, (uint64_t)C / 4)
                     : vkv_cols_layout(vb, (uint64_t)n, (uint64_t)C);
        call = (vkv_call){.shader = texel ? VKA_SHADER_LAYERNORM_BACKWARD_PARAMS_TEXEL
                                          : VKA_SHADER_LAYERNORM_BACKWARD_PARAMS,
                          .texel = {2, 3},
                          .n_texel = texel ? 2 : 0,
                          .bind = {dws, dbs, gs, is, ms, rs},
                          .writes = {true, true},
                          .n_bind = 6,
                          .pc = &pp,
                          .pc_size = sizeof pp,
                          .label = op};
        vkv_call_layout(&call, &cols);
        vkv_dispatch(vb, &call);
    }
}
