/*
 * Arenas of the Vulkan backend: each is a few VkBuffers ("chunks", each at most
 * maxMemoryAllocationSize; ops bind ranges of them, vk_internal.h), one VkDeviceMemory each, tensors
 * suballocated inside (llm.c style: one allocation per kind of tensor, sliced).
 * Device arenas are device-local; where device-local memory is host-visible and the device is
 * not discrete (integrated GPUs, lavapipe) they are mapped and read/written directly (zero copy),
 * otherwise through a staging buffer. Host arenas are host-visible and coherent.
 */
#include "vk/vk_runtime.h"

#include <stdlib.h>
#include <string.h>

#define STAGING_MAX_BYTES ((VkDeviceSize)64 << 20)

static int find_memory_type(const vkr_device *dev, uint32_t type_bits, VkMemoryPropertyFlags need,
                            VkMemoryPropertyFlags prefer) {
    const VkPhysicalDeviceMemoryProperties *mp = &dev->mem_props;
    int fallback = -1;
    for (uint32_t i = 0; i < mp->memoryTypeCount; i++) {
        if (!(type_bits & (1u << i))) continue;
        VkMemoryPropertyFlags f = mp->memoryTypes[i].propertyFlags;
        if ((f & need) != need) continue;
        if ((f & prefer) == prefer) return (int)i;
        if (fallback < 0) fallback = (int)i;
    }
    return fallback;
}

/* One buffer with its own memory; *mapped set when host-visible was required. */
static vka_result create_buffer(vkv_backend *vb, VkDeviceSize size, VkMemoryPropertyFlags need,
                                VkMemoryPropertyFlags prefer, const char *what, VkBuffer *buf,
                                VkDeviceMemory *mem, void **mapped, VkDeviceSize *got) {
    vka_context *ctx = vb->base.ctx;
    const struct VolkDeviceTable *vk = vb->vk;
    VkDevice d = vb->dev->device;
    *buf = VK_NULL_HANDLE;
    *mem = VK_NULL_HANDLE;
    if (mapped) *mapped = NULL;
    VkBufferCreateInfo info = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
                               .size = size,
                               .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT |
                                        VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                                        VK_BUFFER_USAGE_TRANSFER_DST_BIT,
                               .sharingMode = VK_SHARING_MODE_EXCLUSIVE};
    if (vb->dev->texel_operands) info.usage |= VK_BUFFER_USAGE_UNIFORM_TEXEL_BUFFER_BIT;
    VkResult vr = vk->vkCreateBuffer(d, &info, vb->dev->alloc, buf);
    if (vr != VK_SUCCESS) return vkr_check(ctx, vr, "vkCreateBuffer");
    VkMemoryRequirements req;
    vk->vkGetBufferMemoryRequirements(d, *buf, &req);
    int type = find_memory_type(vb->dev, req.memoryTypeBits, need, prefer);
    if (type < 0) {
        vk->vkDestroyBuffer(d, *buf, vb->dev->alloc);
        *buf = VK_NULL_HANDLE;
        return vka_set_error(ctx, VKA_ERROR_UNSUPPORTED,
                             "%s: no memory type with properties 0x%x for a storage buffer", what,
                             (unsigned)need);
    }
    VkMemoryAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
                               .allocationSize = req.size,
                               .memoryTypeIndex = (uint32_t)type};
    if (++vb->dev->n_allocs == vb->dev->fail_alloc_at)
        vr = VK_ERROR_OUT_OF_DEVICE_MEMORY; /* the test knob (vk_internal.h) */
    else
        vr = vk->vkAllocateMemory(d, &ai, vb->dev->alloc, mem);
    if (vr == VK_SUCCESS) vr = vk->vkBindBufferMemory(d, *buf, *mem, 0);
    if (vr == VK_SUCCESS && mapped) vr = vk->vkMapMemory(d, *mem, 0, VK_WHOLE_SIZE, 0, mapped);
    if (vr != VK_SUCCESS) {
        vk->vkDestroyBuffer(d, *buf, vb->dev->alloc);
        if (*mem) vk->vkFreeMemory(d, *mem, vb->dev->alloc);
        *buf = VK_NULL_HANDLE;
        *mem = VK_NULL_HANDLE;
        if (vr == VK_ERROR_OUT_OF_DEVICE_MEMORY || vr == VK_ERROR_OUT_OF_HOST_MEMORY) {
            const vka_device_info *dinfo = &vb->dev->infos[vb->dev->selected];
            return vka_set_error(
                ctx, vr == VK_ERROR_OUT_OF_HOST_MEMORY ? VKA_ERROR_OUT_OF_HOST_MEMORY
                                                       : VKA_ERROR_OUT_OF_DEVICE_MEMORY,
                "%s: the device ran out of memory allocating %.1f MiB (%s); this context holds "
                "%.1f MiB of device memory, the device-local heap is %.1f MiB. Nothing of it was "
                "kept: the context still works for smaller work",
                what, (double)req.size / (1 << 20), vkr_result_name(vr),
                (double)vb->allocated_bytes / (1 << 20),
                (double)dinfo->device_local_bytes / (1 << 20));
        }
        char msg[200];
        snprintf(msg, sizeof msg, "%s: allocating %.1f MiB", what, (double)size / (1 << 20));
        return vkr_check(ctx, vr, msg);
    }
    vb->allocated_bytes += req.size;
    *got = req.size;
    return VKA_SUCCESS;
}

static void free_arena(vkv_backend *vb, vkv_arena *a) {
    if (!a) return;
    VkDevice d = vb->dev->device;
    if (a->ids) vkv_forget_buffers(vb, a->ids, a->n_chunks);
    for (int i = 0; i < a->n_chunks && !a->foreign; i++) {
        if (a->buffers && a->buffers[i]) vb->vk->vkDestroyBuffer(d, a->buffers[i], vb->dev->alloc);
        if (a->memory && a->memory[i]) vb->vk->vkFreeMemory(d, a->memory[i], vb->dev->alloc);
    }
    vb->allocated_bytes -= a->bytes;
    vka_free(vb->base.ctx, a->buffers);
    vka_free(vb->base.ctx, a->memory);
    vka_free(vb->base.ctx, a->mapped);
    vka_free(vb->base.ctx, a->chunk_elems);
    vka_free(vb->base.ctx, a->ids);
    vka_free(vb->base.ctx, a);
}

static vka_result zero_chunks(vkv_backend *vb, vkv_arena *a) {
    bool any_unmapped = false;
    for (int i = 0; i < a->n_chunks; i++) {
        if (a->mapped[i])
            memset(a->mapped[i], 0, a->chunk_elems[i] * 4);
        else
            any_unmapped = true;
    }
    if (!any_unmapped) return VKA_SUCCESS;
    VkCommandBuffer cmd;
    vka_result r = vkv_once_begin(vb, &cmd);
    if (r != VKA_SUCCESS) return r;
    for (int i = 0; i < a->n_chunks; i++)
        if (!a->mapped[i]) vb->vk->vkCmdFillBuffer(cmd, a->buffers[i], 0, VK_WHOLE_SIZE, 0);
    return vkv_once_submit(vb);
}

vka_result vkv_arena_create(vkb_backend *be, const char *label, vkb_arena_kind kind,
                            const size_t *sizes, const char *const *names, int count,
                            vkb_tensor *tensors, vkb_arena **out) {
    vkv_backend *vb = (vkv_backend *)be;
    vka_context *ctx = be->ctx;
    *out = NULL;
    if (count <= 0) return vka_set_error(ctx, VKA_ERROR_INVALID_ARGUMENT, "%s: empty arena", label);
    uint32_t *chunk_of = vka_calloc(vb->base.ctx, (size_t)count, sizeof *chunk_of);
    size_t *offset_of = vka_calloc(vb->base.ctx, (size_t)count, sizeof *offset_of);
    size_t *chunk_elems = vka_calloc(vb->base.ctx, (size_t)count, sizeof *chunk_elems);
    vkv_arena *a = vka_calloc(vb->base.ctx, 1, sizeof *a);
    vka_result r = VKA_SUCCESS;
    if (!chunk_of || !offset_of || !chunk_elems || !a) {
        r = vka_set_error(ctx, VKA_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
        goto done;
    }
    int bad = -1;
    size_t max_elems = be->limits.max_chunk_bytes / 4;
    int n_chunks = vkb_arena_layout(sizes, count, max_elems, chunk_of, offset_of, chunk_elems, &bad);
    if (n_chunks < 0) {
        const char *name = names && names[bad] ? names[bad] : "a tensor";
        r = vka_set_error(ctx, VKA_ERROR_DEVICE_LIMIT,
                          "%s: %s needs %.1f MiB (%zu floats) but this device allocates at most "
                          "%.1f MiB at once (maxMemoryAllocationSize, or VKATTN_MAX_TENSOR_BYTES if lower)",
                          label, name, (double)sizes[bad] * 4 / (1 << 20), sizes[bad],
                          (double)be->limits.max_chunk_bytes / (1 << 20));
        goto done;
    }
    uint64_t total = 0;
    for (int c = 0; c < n_chunks; c++) total += (uint64_t)chunk_elems[c] * 4;
    if (be->limits.memory_bytes && total > be->limits.memory_bytes) {
        r = vka_set_error(ctx, VKA_ERROR_DEVICE_LIMIT,
                          "%s needs %.1f MiB but the device has %.1f MiB (its memory, or "
                          "VKATTN_MAX_MEMORY_BYTES if lower)",
                          label, (double)total / (1 << 20),
                          (double)be->limits.memory_bytes / (1 << 20));
        goto done;
    }
    a->n_chunks = n_chunks;
    a->texel = vb->dev->texel_operands;
    size_t most = 0;
    for (int c = 0; c < n_chunks; c++) most = VKA_MAX(most, chunk_elems[c]);
    /* the largest chunk as vkv_chunk_bytes makes it: vec4 rounding, slack, never a power of 2 */
    a->texel_slack = a->texel && (VkDeviceSize)most * 4 + 32 + VKV_TEXEL_SLACK <=
                                     be->limits.max_chunk_bytes;
    a->buffers = vka_calloc(vb->base.ctx, (size_t)n_chunks, sizeof *a->buffers);
    a->memory = vka_calloc(vb->base.ctx, (size_t)n_chunks, sizeof *a->memory);
    a->mapped = vka_calloc(vb->base.ctx, (size_t)n_chunks, sizeof *a->mapped);
    a->chunk_elems = vka_calloc(vb->base.ctx, (size_t)n_chunks, sizeof *a->chunk_elems);
    a->ids = vka_calloc(vb->base.ctx, (size_t)n_chunks, sizeof *a->ids);
    if (!a->buffers || !a->memory || !a->mapped || !a->chunk_elems || !a->ids) {
        r = vka_set_error(ctx, VKA_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
        goto done;
    }
    bool host = kind == VKB_ARENA_HOST || vb->dev->unified_memory;
    VkMemoryPropertyFlags need =
        host ? VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT : 0;
    VkMemoryPropertyFlags prefer =
        kind == VKB_ARENA_HOST ? need | VK_MEMORY_PROPERTY_HOST_CACHED_BIT
                               : need | VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT;
    for (int c = 0; c < n_chunks && r == VKA_SUCCESS; c++) {
        a->chunk_elems[c] = chunk_elems[c];
        a->ids[c] = ++vb->next_buffer_id;
        VkDeviceSize bytes = vkv_chunk_bytes(a, c);
        char what[200];
        snprintf(what, sizeof what, "%s (chunk %d of %d; %.1f MiB in all)", label, c + 1,
                 n_chunks, (double)total / (1 << 20));
        VkDeviceSize got = 0;
        r = create_buffer(vb, bytes, need, prefer, what, &a->buffers[c], &a->memory[c],
                          host ? &a->mapped[c] : NULL, &got);
        a->bytes += got;
    }
    if (r == VKA_SUCCESS) r = zero_chunks(vb, a);
    if (r != VKA_SUCCESS) goto done;
    for (int i = 0; i < count; i++)
        tensors[i] = (vkb_tensor){.arena = (vkb_arena *)(void *)a,
                                  .chunk = chunk_of[i],
                                  .offset = offset_of[i],
                                  .n = sizes[i]};
    *out = (vkb_arena *)(void *)a;
    a = NULL;
done:
    if (a) free_arena(vb, a);
    vka_free(vb->base.ctx, chunk_of);
    vka_free(vb->base.ctx, offset_of);
    vka_free(vb->base.ctx, chunk_elems);
    return r;
}

void vkv_arena_destroy(vkb_backend *be, vkb_arena *arena) {
    free_arena((vkv_backend *)be, (vkv_arena *)(void *)arena);
}

vka_result vkv_arena_wrap(vkb_backend *be, const void *buffer, uint64_t offset, uint64_t size,
                          vkb_tensor *tensor, vkb_arena **out) {
    vkv_backend *vb = (vkv_backend *)be;
    const char *fn = "vka_tensor_wrap_vulkan_buffer";
    *out = NULL;
    VkBuffer buf = buffer ? *(const VkBuffer *)buffer : VK_NULL_HANDLE;
    if (!buf)
        return vka_set_error(be->ctx, VKA_ERROR_INVALID_ARGUMENT, "%s: the buffer is NULL", fn);
    if (offset % 4 || size % 4 || size == 0)
        return vka_set_error(be->ctx, VKA_ERROR_INVALID_ARGUMENT,
                             "%s: offset %llu and size %llu must be multiples of 4 bytes (one "
                             "element), size > 0", fn, (unsigned long long)offset,
                             (unsigned long long)size);
    if (size > be->limits.max_chunk_bytes || offset > be->limits.max_chunk_bytes - size)
        return vka_set_error(be->ctx, VKA_ERROR_INVALID_ARGUMENT,
                             "%s: %llu bytes at offset %llu pass the device's largest allocation "
                             "of %llu bytes (maxMemoryAllocationSize)", fn,
                             (unsigned long long)size, (unsigned long long)offset,
                             (unsigned long long)be->limits.max_chunk_bytes);
    /* Vulkan cannot tell a buffer's size; its memory requirements are at least that. */
    VkMemoryRequirements req;
    vb->vk->vkGetBufferMemoryRequirements(vb->dev->device, buf, &req);
    if (offset + size > req.size)
        return vka_set_error(be->ctx, VKA_ERROR_INVALID_ARGUMENT,
                             "%s: bytes [%llu, %llu) pass the end of the buffer (its memory "
                             "requirements are %llu bytes)", fn, (unsigned long long)offset,
                             (unsigned long long)(offset + size), (unsigned long long)req.size);
    vkv_arena *a = vka_calloc(vb->base.ctx, 1, sizeof *a);
    if (a) {
        a->buffers = vka_calloc(vb->base.ctx, 1, sizeof *a->buffers);
        a->memory = vka_calloc(vb->base.ctx, 1, sizeof *a->memory);
        a->mapped = vka_calloc(vb->base.ctx, 1, sizeof *a->mapped);
        a->chunk_elems = vka_calloc(vb->base.ctx, 1, sizeof *a->chunk_elems);
        a->ids = vka_calloc(vb->base.ctx, 1, sizeof *a->ids);
    }
    if (!a || !a->buffers || !a->memory || !a->mapped || !a->chunk_elems || !a->ids) {
        free_arena(vb, a);
        return vka_set_error(be->ctx, VKA_ERROR_OUT_OF_HOST_MEMORY, "%s: out of memory", fn);
    }
    a->foreign = true;
    a->n_chunks = 1;
    a->buffers[0] = buf;
    a->chunk_elems[0] = (size_t)((offset + size) / 4);
    a->ids[0] = ++vb->next_buffer_id;
    *tensor = (vkb_tensor){.arena = (vkb_arena *)(void *)a, .chunk = 0,
                           .offset = (size_t)(offset / 4), .n = (size_t)(size / 4)};
    *out = (vkb_arena *)(void *)a;
    return VKA_SUCCESS;
}

vka_result vkv_buffer_of(vkb_backend *be, vkb_tensor t, void *buffer, uint64_t *offset,
                         uint64_t *size) {
    (void)be;
    vkv_arena *a = vkv_arena_of(t);
    if (buffer) *(VkBuffer *)buffer = a->buffers[t.chunk];
    if (offset) *offset = (uint64_t)t.offset * 4;
    if (size) *size = (uint64_t)t.n * 4;
    return VKA_SUCCESS;
}

static vka_result ensure_staging(vkv_backend *vb, VkDeviceSize bytes) {
    if (vb->staging_size >= bytes) return VKA_SUCCESS;
    if (vb->staging) {
        vb->vk->vkDestroyBuffer(vb->dev->device, vb->staging, vb->dev->alloc);
        vb->vk->vkFreeMemory(vb->dev->device, vb->staging_memory, vb->dev->alloc);
        vb->staging = VK_NULL_HANDLE;
        vb->staging_memory = VK_NULL_HANDLE;
        vb->staging_size = 0;
        vb->allocated_bytes -= vb->staging_bytes;
        vb->staging_bytes = 0;
    }
    VkMemoryPropertyFlags need = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT |
                                 VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    vka_result r = create_buffer(vb, bytes, need, need | VK_MEMORY_PROPERTY_HOST_CACHED_BIT,
                                 "staging", &vb->staging, &vb->staging_memory,
                                 &vb->staging_mapped, &vb->staging_bytes);
    if (r == VKA_SUCCESS) vb->staging_size = bytes;
    return r;
}

static vka_result check_range(vkb_backend *be, vkb_tensor t, size_t off, size_t n, const char *op) {
    if (!t.arena || off > t.n || n > t.n - off)
        return vka_set_error(be->ctx, VKA_ERROR_INVALID_ARGUMENT,
                             "%s: elements [%zu, %zu) outside a tensor of %zu", op, off, off + n,
                             t.n);
    return VKA_SUCCESS;
}

/* Copy n elements between host memory and tensor t, through staging when not mapped. */
static vka_result transfer(vkb_backend *be, vkb_tensor t, size_t off, void *host, size_t n,
                           bool to_device) {
    vkv_backend *vb = (vkv_backend *)be;
    vkv_arena *a = vkv_arena_of(t);
    VkDeviceSize base = ((VkDeviceSize)t.offset + off) * 4;
    if (a->mapped[t.chunk]) {
        char *p = (char *)a->mapped[t.chunk] + base;
        if (to_device)
            memcpy(p, host, n * 4);
        else
            memcpy(host, p, n * 4);
        return VKA_SUCCESS;
    }
    VkDeviceSize total = (VkDeviceSize)n * 4, done = 0;
    vka_result r = ensure_staging(vb, VKA_MIN(VKA_MAX(total, 4096), STAGING_MAX_BYTES));
    while (r == VKA_SUCCESS && done < total) {
        VkDeviceSize part = VKA_MIN(total - done, vb->staging_size);
        if (to_device) memcpy(vb->staging_mapped, (char *)host + done, part);
        VkCommandBuffer cmd;
        r = vkv_once_begin(vb, &cmd);
        if (r != VKA_SUCCESS) break;
        VkBufferCopy region = {.srcOffset = to_device ? 0 : base + done,
                               .dstOffset = to_device ? base + done : 0,
                               .size = part};
        VkBuffer dev_buf = a->buffers[t.chunk];
        vb->vk->vkCmdCopyBuffer(cmd, to_device ? vb->staging : dev_buf,
                                to_device ? dev_buf : vb->staging, 1, &region);
        r = vkv_once_submit(vb);
        if (r == VKA_SUCCESS && !to_device) memcpy((char *)host + done, vb->staging_mapped, part);
        done += part;
    }
    return r;
}

vka_result vkv_write(vkb_backend *be, vkb_tensor t, size_t off, const void *src, size_t n) {
    vka_result r = check_range(be, t, off, n, "write");
    if (r != VKA_SUCCESS || n == 0) return r;
    return transfer(be, t, off, (void *)src, n, true);
}

vka_result vkv_read(vkb_backend *be, vkb_tensor t, size_t off, void *dst, size_t n) {
    vka_result r = check_range(be, t, off, n, "read");
    if (r != VKA_SUCCESS || n == 0) return r;
    return transfer(be, t, off, dst, n, false);
}

void vkv_memory_destroy(vkv_backend *vb) {
    if (vb->staging) vb->vk->vkDestroyBuffer(vb->dev->device, vb->staging, vb->dev->alloc);
    if (vb->staging_memory) vb->vk->vkFreeMemory(vb->dev->device, vb->staging_memory, vb->dev->alloc);
    vb->staging = VK_NULL_HANDLE;
    vb->staging_memory = VK_NULL_HANDLE;
    if (vb->dummy) free_arena(vb, vb->dummy);
    vb->dummy = NULL;
}
