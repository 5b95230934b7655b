/* AdamW update, one invocation per parameter; see shaders/adamw.comp. */
#include "vk/vk_internal.h"

#define WG 256 /* wanted workgroup size */

typedef struct pc_adamw {
    uint32_t param_off, m_off, v_off, grad_off, hyper_off, gscale_off;
    uint32_t N;
    uint32_t has_gscale;
    float weight_decay;
} pc_adamw;
_Static_assert(sizeof(pc_adamw) <= VKV_PUSH_CONSTANT_BYTES, "push constants");

void vkv_adamw(vkb_backend *be, vkb_tensor param, vkb_tensor grad, vkb_tensor m, vkb_tensor v,
               vkb_tensor hyper, vkb_tensor gscale, size_t N, float weight_decay) {
    const char *op = "adamw";
    pc_adamw pc = {param.offset, m.offset,     v.offset,   grad.offset,
                   hyper.offset, gscale.offset, (uint32_t)N, gscale.arena != NULL, weight_decay};
    vkv_call call = {.shader = VKA_SHADER_ADAMW,
                     .bind = {vkb_slice(param, 0, N), vkb_slice(m, 0, N), vkb_slice(v, 0, N),
                              vkb_slice(grad, 0, N), vkb_slice(hyper, 0, VKA_HYPER_COUNT),
                              vkb_present(gscale) ? vkb_slice(gscale, 0, 2) : VKB_NONE},
                     .writes = {true, true, true}, .n_bind = 6, .pc = &pc,
                     .pc_size = sizeof pc, .label = op};
    vkv_call_elems((vkv_backend *)be, &call, N, WG);
    vkv_dispatch((vkv_backend *)be, &call);
}
