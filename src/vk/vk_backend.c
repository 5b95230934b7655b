/* The Vulkan backend: its vkb_runtime and vkb_ops tables over the runtime (memory, pipelines,
 * commands). */
#include "settings.h"
#include "vk/vk_runtime.h"

#include <stdlib.h>
#include <string.h>

static void vkv_destroy(vkb_backend *be) {
    vkv_backend *vb = (vkv_backend *)be;
    if (!vb) return;
    /* Nothing of vkattn's is pending here: each graph waits for its own submission when
     * destroyed, and immediate copies wait as they go. An application's device is never
     * waited on (its own work may be in flight); our own device is, before its destruction. */
    if (vb->dev && vb->dev->device && vb->dev->own_device) vb->vk->vkDeviceWaitIdle(vb->dev->device);
    vkv_memory_destroy(vb);
    vkv_pipelines_destroy(vb);
    vkv_commands_destroy(vb);
    vkr_device *dev = vb->dev;
    vka_free(be->ctx, vb);
    vkr_device_destroy(dev);
}

static void op_fill(vkb_backend *be, vkb_tensor t, float value) {
    uint32_t bits;
    memcpy(&bits, &value, sizeof bits);
    vkv_fill((vkv_backend *)be, t, bits);
}

static void op_copy(vkb_backend *be, vkb_tensor dst, vkb_tensor src) {
    vkv_copy((vkv_backend *)be, dst, src);
}

static const vkb_runtime vkv_runtime = {
    .destroy = vkv_destroy,
    .arena_create = vkv_arena_create,
    .arena_destroy = vkv_arena_destroy,
    .write = vkv_write,
    .read = vkv_read,
    .graph_begin = vkv_graph_begin,
    .graph_end = vkv_graph_end,
    .graph_run = vkv_graph_run,
    .graph_submit = vkv_graph_submit,
    .graph_wait = vkv_graph_wait,
    .graph_record = vkv_graph_record,
    .graph_check = vkv_graph_check,
    .arena_wrap = vkv_arena_wrap,
    .buffer_of = vkv_buffer_of,
    .graph_destroy = vkv_graph_destroy,
    .set_profiling = vkv_set_profiling,
    .graph_times = vkv_graph_times,
};

static const vkb_ops vkv_ops = {
    .fill = op_fill,
    .copy = op_copy,
    .convert = vkv_convert,
    .matmul = vkv_matmul,
    .bias_backward = vkv_bias_backward,
    .encoder_forward = vkv_encoder_forward,
    .encoder_backward = vkv_encoder_backward,
    .layernorm_forward = vkv_layernorm_forward,
    .layernorm_backward = vkv_layernorm_backward,
    .permute_forward = vkv_permute_forward,
    .permute_backward = vkv_permute_backward,
    .unpermute_forward = vkv_unpermute_forward,
    .unpermute_backward = vkv_unpermute_backward,
    .softmax_forward = vkv_softmax_forward,
    .softmax_backward = vkv_softmax_backward,
    .gelu_forward = vkv_gelu_forward,
    .gelu_backward = vkv_gelu_backward,
    .residual_forward = vkv_residual_forward,
    .add_inplace = vkv_add_inplace,
    .crossentropy_forward = vkv_crossentropy_forward,
    .crossentropy_backward = vkv_crossentropy_backward,
    .mean = vkv_mean,
    .grad_norm = vkv_grad_norm,
    .adamw = vkv_adamw,
    .peak_fma = vkv_peak_fma,
    .kv_write = vkv_kv_write,
    .attention_forward = vkv_attention_forward,
    .attention_backward = vkv_attention_backward,
};

vka_result vkb_vulkan_create(vka_context *ctx, const vka_settings *s, vkb_backend **out,
                             vkr_device **dev_out) {
    *out = NULL;
    *dev_out = NULL;
    vkr_device *dev = NULL;
    vka_result r = vkr_device_create(ctx, s, &dev);
    if (r != VKA_SUCCESS) {
        vkr_device_destroy(dev);
        return r;
    }
    vkv_backend *vb = vka_calloc(ctx, 1, sizeof *vb);
    if (!vb) {
        vkr_device_destroy(dev);
        return vka_set_error(ctx, VKA_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    }
    vb->base.impl = &vkv_ops;
    vb->base.ops = &vkb_checked_ops;
    vb->base.rt = &vkv_runtime;
    vb->base.ctx = ctx;
    vb->base.name = "vulkan";
    vb->dev = dev;
    vb->vk = &dev->vk;
    const vka_device_info *info = &dev->infos[dev->selected];
    /* A chunk is one buffer with its own allocation; ops bind parts of it (vkv_dispatch) and
     * split their work on tensors past the binding limit, so a tensor may fill a chunk. */
    uint64_t chunk = info->max_memory_allocation_size / 256 * 256;
    vb->base.limits.max_tensor_bytes = chunk;
    vb->base.limits.max_chunk_bytes = chunk;
    vb->base.limits.max_binding_bytes = dev->max_binding_bytes;
    /* All arenas together are bounded, so that a model too big for the device is refused up
     * front with the sizes: by the device-local heap, except on a CPU-type device (lavapipe),
     * whose "device memory" is the process's host memory and whose heap size is a nominal
     * figure (2 GiB on Mesa 22, too little for GPT-2 124M's parameters, gradients and AdamW
     * state): there, by the host's physical memory. */
    vb->base.limits.memory_bytes = info->type == VKA_DEVICE_TYPE_CPU ? vkb_host_memory_bytes()
                                                                      : info->device_local_bytes;

    r = vkv_commands_init(vb);
    if (r == VKA_SUCCESS) r = vkv_pipelines_init(vb);
    if (r == VKA_SUCCESS) {
        size_t one = 4;
        vkb_tensor t;
        vkb_arena *dummy = NULL;
        r = vkv_arena_create(&vb->base, "dummy", VKB_ARENA_DEVICE, &one, NULL, 1, &t, &dummy);
        vb->dummy = (vkv_arena *)(void *)dummy;
    }
    if (r != VKA_SUCCESS) {
        vkv_destroy(&vb->base); /* and the device */
        return r;
    }
    vka_settings_lower_limits(s, &vb->base.limits);
    *out = &vb->base;
    *dev_out = dev;
    return VKA_SUCCESS;
}
