/* TEMPORARY placeholder until the layernorm shaders land: each op fails loudly. */
#include "vk/vk_internal.h"

void vkv_layernorm_forward(vkb_backend *be, vkb_tensor out, vkb_tensor mean, vkb_tensor rstd, vkb_tensor inp, vkb_tensor weight, vkb_tensor bias, int N, int C) {
    vkb_fail(be, VKA_ERROR_UNSUPPORTED, "vkv_layernorm_forward: no Vulkan kernel yet");
}

void vkv_layernorm_backward(vkb_backend *be, vkb_tensor dinp, vkb_tensor dweight, vkb_tensor dbias, vkb_tensor dout, vkb_tensor inp, vkb_tensor weight, vkb_tensor mean, vkb_tensor rstd, int N, int C) {
    vkb_fail(be, VKA_ERROR_UNSUPPORTED, "vkv_layernorm_backward: no Vulkan kernel yet");
}
