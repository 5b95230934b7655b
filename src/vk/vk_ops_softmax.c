/*
 * Masked row softmax, forward and backward (shaders/softmax_forward.comp,
 * softmax_backward.comp): rows spread over workgroups as in shaders/rowreduce.glsl.
 */
#include "vk/vk_reduce.h"

typedef struct pc_softmax {
    uint32_t out_off, inp_off, mask_off;
    uint32_t R, Tq, Tk;
    uint32_t mask_rows;
    uint32_t has_mask;
    uint32_t causal;
    float scale;
} pc_softmax;
_Static_assert(sizeof(pc_softmax) <= VKV_PUSH_CONSTANT_BYTES, "push constants");

typedef struct pc_softmax_backward {
    uint32_t dinp_off, dout_off, out_off;
    uint32_t R, Tk;
    float scale;
} pc_softmax_backward;
_Static_assert(sizeof(pc_softmax_backward) <= VKV_PUSH_CONSTANT_BYTES, "push constants");

void vkv_softmax_forward(vkb_backend *be, const vkb_softmax *sm) {
    const char *op = "softmax_forward";
    vkb_softmax s = vkb_softmax_resolved(*sm);
    size_t RT = (size_t)s.R * s.Tk;
    bool has_mask = vkb_present(s.mask);
    size_t mask_n = has_mask ? (size_t)VKA_CEIL_DIV(s.R, s.mask_rows) * s.Tk : 0;
    vkv_backend *vb = (vkv_backend *)be;
    vkv_layout lay = vkv_rows_layout(vb, (uint64_t)s.R, (uint64_t)s.Tk, 2);
    if (!vkv_check_layout(be, op, &lay)) return;
    pc_softmax pc = {.out_off = s.out.offset,
                     .inp_off = s.inp.offset,
                     .mask_off = s.mask.offset,
                     .R = (uint32_t)s.R,
                     .Tq = (uint32_t)s.Tq,
                     .Tk = (uint32_t)s.Tk,
                     .mask_rows = (uint32_t)s.mask_rows,
                     .has_mask = has_mask,
                     .causal = s.causal,
                     .scale = s.scale};
    vkv_call call = {.shader = VKA_SHADER_SOFTMAX_FORWARD,
                     .bind = {vkb_slice(s.out, 0, RT), vkb_slice(s.inp, 0, RT),
                              has_mask ? vkb_slice(s.mask, 0, mask_n) : VKB_NONE},
                     .writes = {true, false, false},
                     .n_bind = 3,
                     .pc = &pc,
                     .pc_size = sizeof pc,
                     .label = op};
    vkv_call_layout(&call, &lay);
    vkv_dispatch(vb, &call);
}

void vkv_softmax_backward(vkb_backend *be, vkb_tensor dinp, vkb_tensor dout, vkb_tensor out,
                          int R, int Tk, float scale) {
    const char *op = "softmax_backward";
    size_t RT = (size_t)R * Tk;
    vkv_backend *vb = (vkv_backend *)be;
    vkv_layout lay = vkv_rows_layout(vb, (uint64_t)R, (uint64_t)Tk, 2);
    if (!vkv_check_layout(be, op, &lay)) return;
    pc_softmax_backward pc = {dinp.offset, dout.offset, out.offset, (uint32_t)R, (uint32_t)Tk,
                              scale};
    vkv_call call = {.shader = VKA_SHADER_SOFTMAX_BACKWARD,
                     .bind = {vkb_slice(dinp, 0, RT), vkb_slice(dout, 0, RT), vkb_slice(out, 0, RT)},
                     .writes = {true, false, false},
                     .n_bind = 3,
                     .pc = &pc,
                     .pc_size = sizeof pc,
                     .label = op};
    vkv_call_layout(&call, &lay);
    vkv_dispatch(vb, &call);
}
