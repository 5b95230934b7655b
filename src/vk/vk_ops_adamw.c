/* TEMPORARY placeholder until the adamw shaders land: each op fails loudly. */
#include "vk/vk_internal.h"

void vkv_adamw(vkb_backend *be, vkb_tensor param, vkb_tensor grad, vkb_tensor m, vkb_tensor v, vkb_tensor hyper, vkb_tensor gscale, size_t N, float weight_decay) {
    vkb_fail(be, VKA_ERROR_UNSUPPORTED, "vkv_adamw: no Vulkan kernel yet");
}
