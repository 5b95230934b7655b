/*
 * Layer normalisation, forward and backward (shaders/layernorm_forward.comp,
 * layernorm_backward.comp for dinp, layernorm_backward_params.comp for dweight and dbias).
 * Rows are spread over workgroups as in shaders/rowreduce.glsl, the parameter gradients' column
 * sums as in shaders/colreduce.glsl.
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

void vkv_layernorm_forward(vkb_backend *be, vkb_tensor out, vkb_tensor mean, vkb_tensor rstd,
                           vkb_tensor inp, vkb_tensor weight, vkb_tensor bias, int N, int C) {
    const char *op = "layernorm_forward";
    size_t NC = (size_t)N * C;
    vkv_backend *vb = (vkv_backend *)be;
    vkv_layout lay = vkv_rows_layout(vb, (uint64_t)N, (uint64_t)C, 3);
    if (!vkv_check_layout(be, op, &lay)) return;
    pc_layernorm pc = {out.offset, mean.offset,   rstd.offset, inp.offset,
                       weight.offset, bias.offset, (uint32_t)N, (uint32_t)C};
    vkv_call call = {.shader = VKA_SHADER_LAYERNORM_FORWARD,
                     .bind = {vkb_slice(out, 0, NC), vkb_slice(mean, 0, N), vkb_slice(rstd, 0, N),
                              vkb_slice(inp, 0, NC), vkb_slice(weight, 0, C), vkb_slice(bias, 0, C)},
                     .writes = {true, true, true},
                     .n_bind = 6,
                     .pc = &pc,
                     .pc_size = sizeof pc,
                     .label = op};
    vkv_call_layout(&call, &lay);
    vkv_dispatch(vb, &call);
}

/* Two independent dispatches (no barrier between them): dinp by rows, dweight/dbias by
 * columns. Both read dout and inp; the column sums need no scratch and stay deterministic. */
void vkv_layernorm_backward(vkb_backend *be, vkb_tensor dinp, vkb_tensor dweight,
                            vkb_tensor dbias, vkb_tensor dout, vkb_tensor inp, vkb_tensor weight,
                            vkb_tensor mean, vkb_tensor rstd, int N, int C) {
    const char *op = "layernorm_backward";
    size_t NC = (size_t)N * C;
    vkv_backend *vb = (vkv_backend *)be;
    dout = vkb_slice(dout, 0, NC);
    inp = vkb_slice(inp, 0, NC);
    mean = vkb_slice(mean, 0, N);
    rstd = vkb_slice(rstd, 0, N);

    vkv_layout rows = vkv_rows_layout(vb, (uint64_t)N, (uint64_t)C, 2);
    vkv_layout cols = vkv_cols_layout(vb, (uint64_t)N, (uint64_t)C);
    if (!vkv_check_layout(be, op, &rows) || !vkv_check_layout(be, op, &cols)) return;
    pc_layernorm_backward pr = {dinp.offset, dout.offset, inp.offset, weight.offset,
                                mean.offset, rstd.offset, (uint32_t)N, (uint32_t)C};
    vkv_call call = {.shader = VKA_SHADER_LAYERNORM_BACKWARD,
                     .bind = {vkb_slice(dinp, 0, NC), dout, inp, vkb_slice(weight, 0, C), mean, rstd},
                     .writes = {true},
                     .n_bind = 6,
                     .pc = &pr,
                     .pc_size = sizeof pr,
                     .label = op};
    vkv_call_layout(&call, &rows);
    vkv_dispatch(vb, &call);

    pc_layernorm_params pp = {dweight.offset, dbias.offset, dout.offset, inp.offset,
                              mean.offset,    rstd.offset,  (uint32_t)N, (uint32_t)C};
    call = (vkv_call){.shader = VKA_SHADER_LAYERNORM_BACKWARD_PARAMS,
                      .bind = {vkb_slice(dweight, 0, C), vkb_slice(dbias, 0, C), dout, inp, mean, rstd},
                      .writes = {true, true},
                      .n_bind = 6,
                      .pc = &pp,
                      .pc_size = sizeof pp,
                      .label = op};
    vkv_call_layout(&call, &cols);
    vkv_dispatch(vb, &call);
}
