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

static bool check_args(vkb_backend *be, const char *op, vkb_tensor out, uint64_t out_n,
                       vkb_tensor logits, vkb_tensor targets, int N, int V, int Vp) {
    if (!vkv_check_dim(be, op, "N", N, UINT32_MAX) || !vkv_check_dim(be, op, "V", V, UINT32_MAX) ||
        !vkv_check_dim(be, op, "Vp", Vp, UINT32_MAX))
        return false;
    if (V > Vp) {
        vkb_fail(be, VKA_ERROR_INVALID_ARGUMENT, "%s: V = %d exceeds the padded Vp = %d", op, V, Vp);
        return false;
    }
    uint64_t NVp = (uint64_t)N * (uint64_t)Vp;
    return vkb_need(be, op, out_n == NVp ? "dlogits" : "losses", out, out_n) &&
           vkb_need(be, op, "logits", logits, NVp) &&
           vkb_need(be, op, "targets", targets, (uint64_t)N);
}

static void dispatch(vkb_backend *be, vka_shader_id shader, const char *op, vkb_tensor out,
                     uint64_t out_n, vkb_tensor logits, vkb_tensor targets, float dloss, int N,
                     int V, int Vp) {
    vkv_backend *vb = (vkv_backend *)be;
    /* forward: one pass over V; backward: V, then Vp */
    int passes = shader == VKA_SHADER_CROSSENTROPY_FORWARD ? 1 : 2;
    vkv_layout lay = vkv_rows_layout(vb, (uint64_t)N, (uint64_t)Vp, passes);
    if (!vkv_check_layout(be, op, &lay)) return;
    uint64_t NVp = (uint64_t)N * (uint64_t)Vp;
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
    const char *op = "crossentropy_forward";
    if (!check_args(be, op, losses, (uint64_t)N, logits, targets, N, V, Vp)) return;
    dispatch(be, VKA_SHADER_CROSSENTROPY_FORWARD, op, losses, (uint64_t)N, logits, targets, 0.0f,
             N, V, Vp);
}

/* In place when dlogits is logits: the shader reads each element before overwriting it. */
void vkv_crossentropy_backward(vkb_backend *be, vkb_tensor dlogits, vkb_tensor logits,
                               vkb_tensor targets, float dloss, int N, int V, int Vp) {
    const char *op = "crossentropy_backward";
    uint64_t NVp = (uint64_t)N * (uint64_t)Vp;
    if (!check_args(be, op, dlogits, NVp, logits, targets, N, V, Vp)) return;
    dispatch(be, VKA_SHADER_CROSSENTROPY_BACKWARD, op, dlogits, NVp, logits, targets, dloss, N, V,
             Vp);
}
