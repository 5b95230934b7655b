/* TEMPORARY placeholder until the crossentropy shaders land: each op fails loudly. */
#include "vk/vk_internal.h"

void vkv_crossentropy_forward(vkb_backend *be, vkb_tensor losses, vkb_tensor logits, vkb_tensor targets, int N, int V, int Vp) {
    vkb_fail(be, VKA_ERROR_UNSUPPORTED, "vkv_crossentropy_forward: no Vulkan kernel yet");
}

void vkv_crossentropy_backward(vkb_backend *be, vkb_tensor dlogits, vkb_tensor logits, vkb_tensor targets, float dloss, int N, int V, int Vp) {
    vkb_fail(be, VKA_ERROR_UNSUPPORTED, "vkv_crossentropy_backward: no Vulkan kernel yet");
}
