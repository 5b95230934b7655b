/*
 * Cross-entropy forward and the fused softmax + cross-entropy backward
 * (shaders/crossentropy_forward.comp, crossentropy_backward.comp): one row of logits per token,
 * spread over workgroups as in shaders/rowreduce.glsl.
 */
#include "vk/vk_reduce.h"

/* Shared by both directions (out_off is losses or dlogits; dloss unused forward). */
typedef struct pc_crossentropy {
    uint32_t out_off, logits_off, targets_off;
    uint32_t N, V, Vp;
    float dloss;
} pc_crossentropy;
_Static_assert(sizeof(pc_crossentropy) <= VKV_PUSH_CONSTANT_BYTES, "push constants");

/* out (out_n elements) from logits (N, Vp) and targets (N), by a shader that walks each row
 * `passes` times (forward: V; backward: V, then Vp). */
static void dispatch(vkb_backend *be, vka_shader_id shader, const char *op, int passes,
                     vkb_tensor out, size_t out_n, vkb_tensor logits, vkb_tensor targets,
                     float dloss, int N, int V, int Vp) {
    size_t NVp = (size_t)N * Vp;
    vkv_backend *vb = (vkv_backend *)be;
    vkv_layout lay = vkv_rows_layout(vb, (uint64_t)N, (uint64_t)Vp, passes);
    if (!vkv_check_layout(be, op, &lay)) return;
    pc_crossentropy pc = {out.offset, logits.offset, targets.offset, (uint32_t)N, (uint32_t)V,
                          (uint32_t)Vp, dloss};
    vkv_call call = {.shader = shader,
                     .bind = {vkb_slice(out, 0, out_n), vkb_slice(logits, 0, NVp),
                              vkb_slice(targets, 0, N)},
                     .writes = {true, false, false},
                     .n_bind = 3,
                     .pc = &pc,
                     .pc_size = sizeof pc,
                     .label = op};
    vkv_call_layout(&call, &lay);
    vkv_dispatch(vb, &call);
}

void vkv_crossentropy_forward(vkb_backend *be, vkb_tensor losses, vkb_tensor logits,
                              vkb_tensor targets, int N, int V, int Vp) {
    dispatch(be, VKA_SHADER_CROSSENTROPY_FORWARD, "crossentropy_forward", 1, losses, (size_t)N,
             logits, targets, 0.0f, N, V, Vp);
}

/* In place when dlogits is logits: the shader reads each element before overwriting it. */
void vkv_crossentropy_backward(vkb_backend *be, vkb_tensor dlogits, vkb_tensor logits,
                               vkb_tensor targets, float dloss, int N, int V, int Vp) {
    dispatch(be, VKA_SHADER_CROSSENTROPY_BACKWARD, "crossentropy_backward", 2, dlogits,
             (size_t)N * Vp, logits, targets, dloss, N, V, Vp);
}
