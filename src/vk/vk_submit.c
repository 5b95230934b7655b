/*
 * The floor under memory, pipelines and commands: a failed Vulkan call recorded as the
 * backend's failure, the global memory barrier, queue submission failures, and the one-shot
 * command buffer that immediate host <-> device copies (vk_memory.c) record into and wait for.
 * Nothing here calls up into vk_memory.c, vk_pipeline.c or vk_commands.c.
 */
#include "vk/vk_runtime.h"

#include <stdio.h>

void vkv_fail_vk(vkv_backend *vb, VkResult vr, const char *what) {
    vka_result r = vkr_check(vb->base.ctx, vr, what);
    if (vb->base.status == VKA_SUCCESS) vb->base.status = r;
}

void vkv_memory_barrier(vkv_backend *vb, VkCommandBuffer cmd, VkPipelineStageFlags src_stage,
                        VkAccessFlags src, VkPipelineStageFlags dst_stage, VkAccessFlags dst) {
    VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                          .srcAccessMask = src,
                          .dstAccessMask = dst};
    vb->vk->vkCmdPipelineBarrier(cmd, src_stage, dst_stage, 0, 1, &mb, 0, NULL, 0, NULL);
}

vka_result vkv_submit_failed(vkv_backend *vb, VkResult vr, const char *what) {
    if (vr == VK_ERROR_OUT_OF_DEVICE_MEMORY || vr == VK_ERROR_OUT_OF_HOST_MEMORY)
        return vka_set_error(vb->base.ctx,
                             vr == VK_ERROR_OUT_OF_DEVICE_MEMORY ? VKA_ERROR_OUT_OF_DEVICE_MEMORY
                                                                 : VKA_ERROR_OUT_OF_HOST_MEMORY,
                             "vkQueueSubmit of %s: the device ran out of memory (%s) with %.1f "
                             "MiB of this context's allocated; nothing ran, and the context (and "
                             "the graph) can be used again", what, vkr_result_name(vr),
                             (double)vb->allocated_bytes / (1 << 20));
    char msg[120];
    snprintf(msg, sizeof msg, "vkQueueSubmit of %s", what);
    return vkr_check(vb->base.ctx, vr, msg);
}

vka_result vkv_once_init(vkv_backend *vb) {
    vka_context *ctx = vb->base.ctx;
    VkDevice d = vb->dev->device;
    VkCommandBufferAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                      .commandPool = vb->pool,
                                      .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                      .commandBufferCount = 1};
    VkResult vr = vb->vk->vkAllocateCommandBuffers(d, &ai, &vb->once_cmd);
    if (vr != VK_SUCCESS) return vkr_check(ctx, vr, "vkAllocateCommandBuffers");
    VkFenceCreateInfo fi = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    vr = vb->vk->vkCreateFence(d, &fi, vb->dev->alloc, &vb->once_fence);
    if (vr != VK_SUCCESS) return vkr_check(ctx, vr, "vkCreateFence");
    return VKA_SUCCESS;
}

void vkv_once_destroy(vkv_backend *vb) {
    if (vb->once_fence) vb->vk->vkDestroyFence(vb->dev->device, vb->once_fence, vb->dev->alloc);
    vb->once_fence = VK_NULL_HANDLE; /* once_cmd goes with the command pool */
}

/* Submit cmd, wait for it, reset the fence. */
static vka_result submit_wait(vkv_backend *vb, VkCommandBuffer cmd, VkFence fence) {
    VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
                       .commandBufferCount = 1,
                       .pCommandBuffers = &cmd};
    VkResult vr = vkr_queue_submit(vb->dev, &si, fence);
    if (vr != VK_SUCCESS) return vkv_submit_failed(vb, vr, "a copy");
    vr = vb->vk->vkWaitForFences(vb->dev->device, 1, &fence, VK_TRUE, UINT64_MAX);
    if (vr != VK_SUCCESS) return vkr_check(vb->base.ctx, vr, "vkWaitForFences");
    vr = vb->vk->vkResetFences(vb->dev->device, 1, &fence);
    if (vr != VK_SUCCESS) return vkr_check(vb->base.ctx, vr, "vkResetFences");
    return VKA_SUCCESS;
}

vka_result vkv_once_begin(vkv_backend *vb, VkCommandBuffer *cmd) {
    VkResult vr = vb->vk->vkResetCommandBuffer(vb->once_cmd, 0);
    if (vr != VK_SUCCESS) return vkr_check(vb->base.ctx, vr, "vkResetCommandBuffer");
    VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                   .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
    vr = vb->vk->vkBeginCommandBuffer(vb->once_cmd, &bi);
    if (vr != VK_SUCCESS) return vkr_check(vb->base.ctx, vr, "vkBeginCommandBuffer");
    /* Order after everything submitted before (graphs that wrote what we copy). */
    vkv_memory_barrier(vb, vb->once_cmd, VKV_WORK_STAGES | VK_PIPELINE_STAGE_HOST_BIT,
                       VKV_ALL_WRITES | VK_ACCESS_HOST_WRITE_BIT, VKV_WORK_STAGES,
                       VKV_ALL_ACCESS);
    *cmd = vb->once_cmd;
    return VKA_SUCCESS;
}

vka_result vkv_once_submit(vkv_backend *vb) {
    vkv_memory_barrier(vb, vb->once_cmd, VKV_WORK_STAGES, VKV_ALL_WRITES,
                       VK_PIPELINE_STAGE_HOST_BIT, VK_ACCESS_HOST_READ_BIT);
    VkResult vr = vb->vk->vkEndCommandBuffer(vb->once_cmd);
    if (vr != VK_SUCCESS) return vkr_check(vb->base.ctx, vr, "vkEndCommandBuffer");
    return submit_wait(vb, vb->once_cmd, vb->once_fence);
}
