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
    int mask_rows = sm->mask_rows > 0 ? sm->mask_rows : 1;
    int Tq = sm->Tq > 0 ? sm->Tq : sm->R;
    size_t RT = (size_t)sm->R * sm->Tk;
    bool has_mask = vkb_present(sm->mask);
    size_t mask_n = has_mask ? (size_t)VKA_CEIL_DIV(sm->R, mask_rows) * sm->Tk : 0;
    if (!vkv_check_dim(be, op, "R", sm->R, UINT32_MAX) ||
        !vkv_check_dim(be, op, "Tk", sm->Tk, UINT32_MAX) ||
        !vkv_check_dim(be, op, "Tq", Tq, UINT32_MAX) ||
        !vkb_need(be, op, "out", sm->out, RT) ||
        !vkb_need(be, op, "inp", sm->inp, RT) ||
        (has_mask && !vkb_need(be, op, "mask", sm->mask, mask_n)))
        return;
    vkv_backend *vb = (vkv_backend *)be;
    vkv_layout lay = vkv_rows_layout(vb, (uint64_t)sm->R, (uint64_t)sm->Tk, 2);
    if (!vkv_check_layout(be, op, &lay)) return;
    pc_softmax pc = {.out_off = sm->out.offset,
                     .inp_off = sm->inp.offset,
                     .mask_off = sm->mask.offset,
                     .R = (uint32_t)sm->R,
                     .Tq = (uint32_t)Tq,
                     .Tk = (uint32_t)sm->Tk,
                     .mask_rows = (uint32_t)mask_rows,
                     .has_mask = has_mask,
                     .causal = sm->causal,
                     .scale = sm->scale};
    vkv_call call = {.shader = VKA_SHADER_SOFTMAX_FORWARD,
                     .bind = {vkb_slice(sm->out, 0, RT), vkb_slice(sm->inp, 0, RT),
                              has_mask ? vkb_slice(sm->mask, 0, mask_n) : VKB_NONE},
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
    if (!vkv_check_dim(be, op, "R", R, UINT32_MAX) || !vkv_check_dim(be, op, "Tk", Tk, UINT32_MAX) ||
        !vkb_need(be, op, "dinp", dinp, RT) ||
        !vkb_need(be, op, "dout", dout, RT) || !vkb_need(be, op, "out", out, RT))
        return;
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
