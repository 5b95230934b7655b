/* The arithmetic-ceiling kernel (shaders/peak_fma.comp), for vka_measure_peak. */
#include "vk/vk_internal.h"
#include "pc/peak.h"

#define WG 256 /* wanted workgroup size */

/* In blocks of elements that fit the binding limit (each invocation knows its global index). */
void vkv_peak_fma(vkb_backend *be, vkb_tensor out, size_t n, uint32_t iters) {
    vkv_backend *vb = (vkv_backend *)be;
    size_t block = vkv_bind_elems(vb);
    for (size_t i0 = 0; i0 < n; i0 += block) {
        size_t k = VKA_MIN(block, n - i0);
        vkb_tensor os = vkb_slice(out, i0, k);
        pc_peak pc = {.n = (uint32_t)k, .iters = iters, .first = (uint32_t)i0};
        vkv_call call = {.shader = VKA_SHADER_PEAK_FMA, .bind = {os},
                         .writes = {true}, .n_bind = 1, VKV_PC(&pc),
                         .label = "peak_fma"};
        vkv_call_elems(vb, &call, k, WG);
        vkv_dispatch(vb, &call);
    }
}
