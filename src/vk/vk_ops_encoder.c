/* Token + position embedding forward, and its deterministic backward (no float atomics: the
 * host groups positions by token, vka_encoder_buckets, and one workgroup sums each token's rows
 * in a fixed order). */
#include "vk/vk_internal.h"

#define WG 256    /* wanted workgroup sizes */
#define WG_WTE 64

typedef struct pc_encoder_forward {
    uint32_t out_off, tokens_off, wte_off, wpe_off;
    uint32_t B, T, C;
    uint32_t wte_rows; /* Vp: ids at or past it give NaN instead of reading out of bounds */
} pc_encoder_forward;
_Static_assert(sizeof(pc_encoder_forward) <= VKV_PUSH_CONSTANT_BYTES, "push constants");

typedef struct pc_encoder_wpe {
    uint32_t dwpe_off, dout_off;
    uint32_t B, T, C;
} pc_encoder_wpe;
_Static_assert(sizeof(pc_encoder_wpe) <= VKV_PUSH_CONSTANT_BYTES, "push constants");

typedef struct pc_encoder_wte {
    uint32_t dwte_off, dout_off, buckets_off;
    uint32_t BT, C;
    uint32_t wte_rows;
} pc_encoder_wte;
_Static_assert(sizeof(pc_encoder_wte) <= VKV_PUSH_CONSTANT_BYTES, "push constants");

static bool fits(vkb_backend *be, const char *op, int B, int T, int C) {
    if ((size_t)B * T * C > UINT32_MAX) {
        vkb_fail(be, VKA_ERROR_DEVICE_LIMIT, "%s: B*T*C = %zu exceeds 2^32-1", op,
                 (size_t)B * T * C);
        return false;
    }
    return true;
}

void vkv_encoder_forward(vkb_backend *be, vkb_tensor out, vkb_tensor tokens, vkb_tensor wte,
                         vkb_tensor wpe, int B, int T, int C) {
    if (!fits(be, "encoder_forward", B, T, C)) return;
    size_t n = (size_t)B * T * C;
    uint32_t wg = vkv_workgroup_size((vkv_backend *)be, WG);
    pc_encoder_forward pc = {out.offset, tokens.offset, wte.offset, wpe.offset,
                             (uint32_t)B, (uint32_t)T, (uint32_t)C, (uint32_t)(wte.n / (size_t)C)};
    vkv_call call = {.shader = VKA_SHADER_ENCODER_FORWARD, .spec = {wg}, .n_spec = 1,
                     .bind = {out, tokens, wte, wpe}, .writes = {true}, .n_bind = 4,
                     .pc = &pc, .pc_size = sizeof pc, .groups = VKA_CEIL_DIV(n, wg),
                     .label = "encoder_forward"};
    vkv_dispatch((vkv_backend *)be, &call);
}

void vkv_encoder_backward(vkb_backend *be, vkb_tensor dwte, vkb_tensor dwpe, vkb_tensor dout,
                          vkb_tensor tokens, vkb_tensor buckets, int B, int T, int C) {
    (void)tokens; /* the buckets carry the grouping of the tokens */
    if (!fits(be, "encoder_backward", B, T, C)) return;
    vkv_backend *vb = (vkv_backend *)be;
    uint32_t wg = vkv_workgroup_size(vb, WG);
    pc_encoder_wpe pw = {dwpe.offset, dout.offset, (uint32_t)B, (uint32_t)T, (uint32_t)C};
    vkv_call wpe_call = {.shader = VKA_SHADER_ENCODER_BACKWARD_WPE, .spec = {wg}, .n_spec = 1,
                         .bind = {vkb_slice(dwpe, 0, (size_t)T * C), dout}, .writes = {true},
                         .n_bind = 2, .pc = &pw, .pc_size = sizeof pw,
                         .groups = VKA_CEIL_DIV((size_t)T * C, wg), .label = "encoder_backward"};
    vkv_dispatch(vb, &wpe_call);
    uint32_t BT = (uint32_t)B * (uint32_t)T;
    pc_encoder_wte pt = {dwte.offset, dout.offset, buckets.offset, BT, (uint32_t)C,
                         (uint32_t)(dwte.n / (size_t)C)};
    vkv_call wte_call = {.shader = VKA_SHADER_ENCODER_BACKWARD_WTE,
                         .spec = {vkv_workgroup_size(vb, WG_WTE)}, .n_spec = 1,
                         .bind = {dwte, dout, buckets}, .writes = {true}, .n_bind = 3,
                         .pc = &pt, .pc_size = sizeof pt, .groups = BT,
                         .label = "encoder_backward"};
    vkv_dispatch(vb, &wte_call);
}
