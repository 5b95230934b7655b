/* KV cache write (shaders/kv_write.comp, src/cpu/kv.c): the k, v rows of a chunk into the
 * caches at the position held in a tensor. Pure data movement, one invocation per element of
 * (NH, T, HS). Kept in its own file: it binds four tensors and nothing else. */
#include "vk/vk_internal.h"

#define WG 256 /* wanted workgroup size */

typedef struct pc_kv_write {
    uint32_t k_off, v_off, qkv_off, pos_off; /* element offsets of the bound tensors */
    uint32_t T, NH, HS, max_T;
} pc_kv_write;
_Static_assert(sizeof(pc_kv_write) <= VKV_PUSH_CONSTANT_BYTES, "push constants");

void vkv_kv_write(vkb_backend *be, vkb_tensor kcache, vkb_tensor vcache, vkb_tensor qkv,
                  vkb_tensor pos, int T, int NH, int HS, int max_T) {
    size_t cache = (size_t)NH * max_T * HS, rows = (size_t)T * 3 * NH * HS;
    pc_kv_write pc = {kcache.offset, vcache.offset, qkv.offset, pos.offset,
                      (uint32_t)T,   (uint32_t)NH,  (uint32_t)HS, (uint32_t)max_T};
    vkv_call call = {.shader = VKA_SHADER_KV_WRITE,
                     .bind = {vkb_slice(kcache, 0, cache), vkb_slice(vcache, 0, cache),
                              vkb_slice(qkv, 0, rows), vkb_slice(pos, 0, 2)},
                     .writes = {true, true, false, false},
                     .n_bind = 4,
                     .pc = &pc,
                     .pc_size = sizeof pc,
                     .label = "kv_write"};
    vkv_call_elems((vkv_backend *)be, &call, (size_t)NH * T * HS, WG);
    vkv_dispatch((vkv_backend *)be, &call);
}
