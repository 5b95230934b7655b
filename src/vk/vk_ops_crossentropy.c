/*
 * Cross-entropy forward and the fused softmax + cross-entropy backward
 * (shaders/crossentropy_forward.comp, crossentropy_backward.comp): one row of logits per token,
 * spread over workgroups as in shaders/rowreduce.glsl. logits and dlogits may be 16-bit
 * (backend.h's 16-bit rule): specialization constants L16 and D16 (3, 4) their dtypes, their
 * views counted in words with a half-start flag per block of rows.
 */
#include "vk/vk_reduce.h"
#include "pc/crossentropy.h"

/* out (out_row elements per row) from logits (N, Vp) and targets (N), by a shader that walks
 * each row `passes` times (forward: V; backward: V, then Vp); in blocks of rows that fit the
 * binding limit (logits of B*T*Vp may pass it). */
static void dispatch(vkb_backend *be, vka_shader_id shader, const char *op, int passes,
                     vkb_tensor out, size_t out_row, vkb_tensor logits, vkb_tensor targets,
                     float dloss, vkb_tensor dloss_t, int N, int V, int Vp) {
    vkv_backend *vb = (vkv_backend *)be;
    /* Targets outside [0, V) and not -1 give zeros here; the host reports them after the run. */
    vkv_graph_check_targets(vb, op, targets, N, V);
    /* a 16-bit view of n rows of Vp elements takes at most n (Vp / 2 + 1) words */
    size_t row16 = (size_t)Vp / 2 + 1;
    size_t per_row[3] = {out_row == 1 || out.dtype == VKA_F32 ? out_row : row16,
                         logits.dtype == VKA_F32 ? (size_t)Vp : row16, 1};
    const char *names[3] = {out_row == 1 ? "losses" : "dlogits", "logits", "targets"};
    size_t block = vkv_block_rows(vb, op, (size_t)N, per_row, names, 3);
    if (!block) return;
    vkv_layout lay = vkv_rows_layout(vb, (uint64_t)VKA_MIN(block, (size_t)N), (uint64_t)Vp, passes);
    if (!vkv_check_layout(be, op, &lay)) return;
    for (size_t r0 = 0; r0 < (size_t)N; r0 += block) {
        size_t n = VKA_MIN(block, (size_t)N - r0);
        uint32_t out_half = 0, logits_half = 0;
        vkb_tensor os = vkv_elem_view(out, r0 * out_row, n * out_row, &out_half);
        vkb_tensor ls = vkv_elem_view(logits, r0 * Vp, n * Vp, &logits_half);
        vkb_tensor ts = vkb_slice(targets, r0, n);
        lay = vkv_rows_layout(vb, (uint64_t)n, (uint64_t)Vp, passes);
        vkb_tensor ds = vkb_present(dloss_t) ? vkb_slice(dloss_t, 0, 1) : VKB_NONE;
        pc_crossentropy pc = {.N = (uint32_t)n, .V = (uint32_t)V, .Vp = (uint32_t)Vp,
                              .dloss = dloss, .has_dloss = vkb_present(dloss_t),
                              .logits_half = logits_half, .out_half = out_half};
        bool backward = shader == VKA_SHADER_CROSSENTROPY_BACKWARD;
        vkv_call call = {.shader = shader,
                         .bind = {os, ls, ts, ds},
                         .writes = {true, false, false, false},
                         .n_bind = backward ? 4 : 3,
                         VKV_PC(&pc),
                         .label = op};
        vkv_call_layout(&call, &lay);
        if (logits.dtype != VKA_F32 || (backward && out.dtype != VKA_F32)) {
            if (backward)
                call.shader = vkv_s16(vb, VKA_SHADER_CROSSENTROPY_BACKWARD,
                                      VKA_SHADER_CROSSENTROPY_BACKWARD_S16);
            call.spec[3] = logits.dtype; /* L16 */
            call.spec[4] = backward ? out.dtype : 0u; /* D16 */
            call.n_spec = 5;
        }
        vkv_dispatch(vb, &call);
    }
}

void vkv_crossentropy_forward(vkb_backend *be, vkb_tensor losses, vkb_tensor logits,
                              vkb_tensor targets, int N, int V, int Vp) {
    dispatch(be, VKA_SHADER_CROSSENTROPY_FORWARD, "crossentropy_forward", 1, losses, 1,
             logits, targets, 0.0f, VKB_NONE, N, V, Vp);
}

/* In place when dlogits is logits: the shader reads each element before overwriting it. */
void vkv_crossentropy_backward(vkb_backend *be, vkb_tensor dlogits, vkb_tensor logits,
                               vkb_tensor targets, float dloss, vkb_tensor dloss_t, int N, int V,
                              int Vp) {
    dispatch(be, VKA_SHADER_CROSSENTROPY_BACKWARD, "crossentropy_backward", 2, dlogits,
             (size_t)Vp, logits, targets, dloss, dloss_t, N, V, Vp);
}
