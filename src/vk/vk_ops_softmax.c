/* TEMPORARY placeholder until the softmax shaders land: each op fails loudly. */
#include "vk/vk_internal.h"

void vkv_softmax_forward(vkb_backend *be, const vkb_softmax *sm) {
    vkb_fail(be, VKA_ERROR_UNSUPPORTED, "vkv_softmax_forward: no Vulkan kernel yet");
}

void vkv_softmax_backward(vkb_backend *be, vkb_tensor dinp, vkb_tensor dout, vkb_tensor out, int R, int Tk, float scale) {
    vkb_fail(be, VKA_ERROR_UNSUPPORTED, "vkv_softmax_backward: no Vulkan kernel yet");
}
