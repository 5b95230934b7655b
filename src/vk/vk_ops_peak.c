/* The arithmetic-ceiling kernel (shaders/peak_fma.comp), for vka_measure_peak. */
#include "vk/vk_internal.h"

#define WG 256 /* wanted workgroup size */

typedef struct pc_peak {
    uint32_t out_off;
    uint32_t n;
    uint32_t iters;
} pc_peak;
_Static_assert(sizeof(pc_peak) <= VKV_PUSH_CONSTANT_BYTES, "push constants");

void vkv_peak_fma(vkb_backend *be, vkb_tensor out, size_t n, uint32_t iters) {
    pc_peak pc = {out.offset, (uint32_t)n, iters};
    vkv_call call = {.shader = VKA_SHADER_PEAK_FMA, .bind = {vkb_slice(out, 0, n)},
                     .writes = {true}, .n_bind = 1, .pc = &pc, .pc_size = sizeof pc,
                     .label = "peak_fma"};
    vkv_call_elems((vkv_backend *)be, &call, n, WG);
    vkv_dispatch((vkv_backend *)be, &call);
}
