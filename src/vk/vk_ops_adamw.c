/* AdamW update, one invocation per parameter (on CPU-type devices several vec4s of them, read
 * through texel views: vkv_call_vec4); see shaders/adamw.comp. */
#include "vk/vk_internal.h"
#include "pc/adamw.h"

#define WG 256 /* wanted workgroup size */

void vkv_adamw(vkb_backend *be, vkb_tensor param, vkb_tensor grad, vkb_tensor m, vkb_tensor v,
               vkb_tensor hyper, vkb_tensor gscale, size_t N, float weight_decay) {
    const char *op = "adamw";
    vkv_backend *vb = (vkv_backend *)be;
    vkb_tensor hs = vkb_slice(hyper, 0, VKA_HYPER_COUNT);
    vkb_tensor gs = vkb_present(gscale) ? vkb_slice(gscale, 0, 2) : VKB_NONE;
    size_t block = vkv_bind_elems(vb); /* parameters past the binding limit: in blocks */
    for (size_t i0 = 0; i0 < N; i0 += block) {
        size_t n = VKA_MIN(block, N - i0);
        vkb_tensor ps = vkb_slice(param, i0, n), ms = vkb_slice(m, i0, n);
        vkb_tensor vs = vkb_slice(v, i0, n), grs = vkb_slice(grad, i0, n);
        pc_adamw pc = {.N = (uint32_t)n, .has_gscale = gscale.arena != NULL,
                       .weight_decay = weight_decay};
        vkv_call call = {.shader = VKA_SHADER_ADAMW,
                         .bind = {ps, ms, vs, grs, hs, gs},
                         .writes = {true, true, true}, .n_bind = 6, VKV_PC(&pc),
                         .label = op};
        vkv_call_vec4(vb, &call, n, 4, 0xF, VKA_SHADER_ADAMW_TEXEL, WG);
        vkv_dispatch(vb, &call);
    }
}
