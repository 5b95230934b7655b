/* TEMPORARY: stands in for the Vulkan runtime until src/vk/ lands, so the library links and the
 * CPU backend can be built and tested. Drop this file when merging the Vulkan backend. */
#include "vk/vk_internal.h"

vka_result vkr_device_create(vka_context *ctx, const vka_context_desc *desc, vkr_device **out) {
    (void)desc;
    *out = NULL;
    return vka_set_error(ctx, VKA_ERROR_NO_VULKAN,
                         "this build has no Vulkan backend yet (temporary stub)");
}

void vkr_device_destroy(vkr_device *dev) { (void)dev; }

vka_result vkb_vulkan_create(vka_context *ctx, vkb_backend **out) {
    *out = NULL;
    return vka_set_error(ctx, VKA_ERROR_NO_VULKAN,
                         "this build has no Vulkan backend yet (temporary stub)");
}
