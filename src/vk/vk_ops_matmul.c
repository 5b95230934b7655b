/* TEMPORARY placeholder until the matmul shaders land: each op fails loudly. */
#include "vk/vk_internal.h"

void vkv_matmul(vkb_backend *be, const vkb_matmul *mm) {
    vkb_fail(be, VKA_ERROR_UNSUPPORTED, "vkv_matmul: no Vulkan kernel yet");
}
