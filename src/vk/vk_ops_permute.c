/* TEMPORARY placeholder until the permute shaders land: each op fails loudly. */
#include "vk/vk_internal.h"

void vkv_permute_forward(vkb_backend *be, vkb_tensor q, vkb_tensor k, vkb_tensor v, vkb_tensor inp, int B, int T, int NH, int HS) {
    vkb_fail(be, VKA_ERROR_UNSUPPORTED, "vkv_permute_forward: no Vulkan kernel yet");
}

void vkv_permute_backward(vkb_backend *be, vkb_tensor dinp, vkb_tensor dq, vkb_tensor dk, vkb_tensor dv, int B, int T, int NH, int HS) {
    vkb_fail(be, VKA_ERROR_UNSUPPORTED, "vkv_permute_backward: no Vulkan kernel yet");
}

void vkv_unpermute_forward(vkb_backend *be, vkb_tensor out, vkb_tensor inp, int B, int T, int NH, int HS) {
    vkb_fail(be, VKA_ERROR_UNSUPPORTED, "vkv_unpermute_forward: no Vulkan kernel yet");
}

void vkv_unpermute_backward(vkb_backend *be, vkb_tensor dinp, vkb_tensor dout, int B, int T, int NH, int HS) {
    vkb_fail(be, VKA_ERROR_UNSUPPORTED, "vkv_unpermute_backward: no Vulkan kernel yet");
}
