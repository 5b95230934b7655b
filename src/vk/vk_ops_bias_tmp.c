/* TEMPORARY placeholder until the bias_backward shader lands: the op fails loudly. */
#include "vk/vk_internal.h"

void vkv_bias_backward(vkb_backend *be, vkb_tensor dbias, vkb_tensor dout, int N, int OC) {
    vkb_fail(be, VKA_ERROR_UNSUPPORTED, "vkv_bias_backward: no Vulkan kernel yet");
}
