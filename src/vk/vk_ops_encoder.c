/* TEMPORARY placeholder until the encoder shaders land: each op fails loudly. */
#include "vk/vk_internal.h"

void vkv_encoder_forward(vkb_backend *be, vkb_tensor out, vkb_tensor tokens, vkb_tensor wte, vkb_tensor wpe, int B, int T, int C) {
    vkb_fail(be, VKA_ERROR_UNSUPPORTED, "vkv_encoder_forward: no Vulkan kernel yet");
}

void vkv_encoder_backward(vkb_backend *be, vkb_tensor dwte, vkb_tensor dwpe, vkb_tensor dout, vkb_tensor tokens, vkb_tensor buckets, int B, int T, int C) {
    vkb_fail(be, VKA_ERROR_UNSUPPORTED, "vkv_encoder_backward: no Vulkan kernel yet");
}
