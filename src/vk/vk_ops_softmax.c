/*
 * Masked row softmax, forward and backward (shaders/softmax_forward.comp,
 * softmax_backward.comp): rows spread over workgroups as in shaders/rowreduce.glsl, in blocks of
 * rows that fit the binding limit.
 */
#include "vk/vk_reduce.h"
#include "pc/softmax.h"

/* Both directions split R into blocks of rows that fit the binding limit. */
void vkv_softmax_forward(vkb_backend *be, const vkb_softmax *sm) {
    const char *op = "softmax_forward";
    vkb_softmax s = vkb_softmax_resolved(*sm);
    bool has_mask = vkb_present(s.mask);
    vkv_backend *vb = (vkv_backend *)be;
    size_t Tk = (size_t)s.Tk, mrows = (size_t)s.mask_rows;
    /* a block of n rows binds at most n / mask_rows + 2 mask rows: n + 2 rows of Tk covers it */
    size_t per_row[2] = {Tk, Tk};
    const char *names[2] = {"out", "inp"};
    size_t block = vkv_block_rows(vb, op, (size_t)s.R, per_row, names, 2);
    if (block && has_mask && block < (size_t)s.R) {
        if (!vkv_fits(vb, op, "two mask rows", 2 * Tk)) return;
        block = VKA_MAX(VKA_MIN(block, (vkv_bind_elems(vb) / Tk - 2) * mrows), 1);
    }
    if (!block) return;
    vkv_layout lay = vkv_rows_layout(vb, (uint64_t)VKA_MIN(block, (size_t)s.R), Tk, 2);
    if (!vkv_check_layout(be, op, &lay)) return;
    for (size_t r0 = 0; r0 < (size_t)s.R; r0 += block) {
        size_t n = VKA_MIN(block, (size_t)s.R - r0);
        vkb_tensor os = vkb_slice(s.out, r0 * Tk, n * Tk), is = vkb_slice(s.inp, r0 * Tk, n * Tk);
        size_t m0 = r0 / mrows, m1 = (r0 + n - 1) / mrows + 1;
        vkb_tensor ms = has_mask ? vkb_slice(s.mask, m0 * Tk, (m1 - m0) * Tk) : VKB_NONE;
        lay = vkv_rows_layout(vb, (uint64_t)n, Tk, 2);
        pc_softmax_forward pc = {.R = (uint32_t)n,
                                 .Tq = (uint32_t)s.Tq,
                                 .Tk = (uint32_t)s.Tk,
                                 .mask_rows = (uint32_t)s.mask_rows,
                                 .has_mask = has_mask,
                                 .causal = s.causal,
                                 .scale = s.scale,
                                 .row0 = (uint32_t)r0,
                                 .mask_row0 = (uint32_t)m0};
        vkv_call call = {.shader = VKA_SHADER_SOFTMAX_FORWARD,
                         .bind = {os, is, ms},
                         .writes = {true, false, false},
                         .n_bind = 3,
                         VKV_PC(&pc),
                         .label = op};
        vkv_call_layout(&call, &lay);
        vkv_dispatch(vb, &call);
    }
}

void vkv_softmax_backward(vkb_backend *be, vkb_tensor dinp, vkb_tensor dout, vkb_tensor out,
                          int R, int Tk, float scale) {
    const char *op = "softmax_backward";
    vkv_backend *vb = (vkv_backend *)be;
    size_t per_row[3] = {(size_t)Tk, (size_t)Tk, (size_t)Tk};
    const char *names[3] = {"dinp", "dout", "out"};
    size_t block = vkv_block_rows(vb, op, (size_t)R, per_row, names, 3);
    if (!block) return;
    vkv_layout lay = vkv_rows_layout(vb, (uint64_t)VKA_MIN(block, (size_t)R), (uint64_t)Tk, 2);
    if (!vkv_check_layout(be, op, &lay)) return;
    for (size_t r0 = 0; r0 < (size_t)R; r0 += block) {
        size_t n = VKA_MIN(block, (size_t)R - r0), T = (size_t)Tk;
        vkb_tensor ds = vkb_slice(dinp, r0 * T, n * T), gs = vkb_slice(dout, r0 * T, n * T);
        vkb_tensor os = vkb_slice(out, r0 * T, n * T);
        lay = vkv_rows_layout(vb, (uint64_t)n, (uint64_t)Tk, 2);
        pc_softmax_backward pc = {.R = (uint32_t)n, .Tk = (uint32_t)Tk, .scale = scale};
        vkv_call call = {.shader = VKA_SHADER_SOFTMAX_BACKWARD,
                         .bind = {ds, gs, os},
                         .writes = {true, false, false},
                         .n_bind = 3,
                         VKV_PC(&pc),
                         .label = op};
        vkv_call_layout(&call, &lay);
        vkv_dispatch(vb, &call);
    }
}
