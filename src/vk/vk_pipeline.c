/*
 * Compute pipelines from the embedded SPIR-V, built on first use for each (shader,
 * specialization constants) pair, and descriptor sets cached by the buffer ranges they bind
 * (hashed: a graph split for a small binding limit may hold thousands of distinct sets).
 * Every pipeline shares one layout: VKV_MAX_BINDINGS storage buffers in set 0 and
 * VKV_PUSH_CONSTANT_BYTES of push constants, so a descriptor set serves any shader that binds
 * the same ranges. Both caches are filled while recording graphs, never while running them.
 */
#include "vk/vk_runtime.h"

#include <stdlib.h>
#include <string.h>

#define SETS_PER_POOL 256

/* Bindings of the set layout: the storage buffers, then (texel_operands) the texel views. */
static uint32_t n_layout_bindings(const vkv_backend *vb) {
    return VKV_MAX_BINDINGS + (vb->dev->texel_operands ? VKV_MAX_TEXELS : 0);
}

static VkDescriptorType binding_type(uint32_t i) {
    return i < VKV_MAX_BINDINGS ? VK_DESCRIPTOR_TYPE_STORAGE_BUFFER
                                : VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER;
}

vka_result vkv_pipelines_init(vkv_backend *vb) {
    vka_context *ctx = vb->base.ctx;
    VkDevice d = vb->dev->device;
    VkDescriptorSetLayoutBinding b[VKV_SET_KEYS];
    uint32_t n = n_layout_bindings(vb);
    for (uint32_t i = 0; i < n; i++)
        b[i] = (VkDescriptorSetLayoutBinding){.binding = i,
                                              .descriptorType = binding_type(i),
                                              .descriptorCount = 1,
                                              .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT};
    VkDescriptorSetLayoutCreateInfo sl = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
                                          .bindingCount = n,
                                          .pBindings = b};
    VkResult vr = vb->vk->vkCreateDescriptorSetLayout(d, &sl, vb->dev->alloc, &vb->set_layout);
    if (vr != VK_SUCCESS) return vkr_check(ctx, vr, "vkCreateDescriptorSetLayout");
    VkPushConstantRange pc = {.stageFlags = VK_SHADER_STAGE_COMPUTE_BIT,
                              .offset = 0,
                              .size = VKV_PUSH_CONSTANT_BYTES};
    VkPipelineLayoutCreateInfo pl = {.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
                                     .setLayoutCount = 1,
                                     .pSetLayouts = &vb->set_layout,
                                     .pushConstantRangeCount = 1,
                                     .pPushConstantRanges = &pc};
    vr = vb->vk->vkCreatePipelineLayout(d, &pl, vb->dev->alloc, &vb->pipeline_layout);
    if (vr != VK_SUCCESS) return vkr_check(ctx, vr, "vkCreatePipelineLayout");
    VkPipelineCacheCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO};
    vr = vb->vk->vkCreatePipelineCache(d, &ci, vb->dev->alloc, &vb->pipeline_cache);
    if (vr != VK_SUCCESS) return vkr_check(ctx, vr, "vkCreatePipelineCache");
    return VKA_SUCCESS;
}

void vkv_pipelines_destroy(vkv_backend *vb) {
    VkDevice d = vb->dev->device;
    for (int i = 0; i < vb->n_pipelines; i++) vb->vk->vkDestroyPipeline(d, vb->pipelines[i].pipeline, vb->dev->alloc);
    vka_free(vb->base.ctx, vb->pipelines);
    vb->pipelines = NULL;
    vb->n_pipelines = vb->cap_pipelines = 0;
    for (int i = 0; i < VKA_SHADER_COUNT; i++)
        if (vb->modules[i]) vb->vk->vkDestroyShaderModule(d, vb->modules[i], vb->dev->alloc);
    for (int i = 0; i < vb->n_pools; i++)
        vb->vk->vkDestroyDescriptorPool(d, vb->pools[i].pool, vb->dev->alloc);
    vka_free(vb->base.ctx, vb->pools);
    vb->pools = NULL;
    vb->n_pools = 0;
    vka_free(vb->base.ctx, vb->sets);
    vb->sets = NULL;
    vb->n_sets = vb->cap_sets = 0;
    for (int i = 0; i < vb->n_views; i++)
        vb->vk->vkDestroyBufferView(d, vb->views[i].view, vb->dev->alloc);
    vka_free(vb->base.ctx, vb->views);
    vb->views = NULL;
    vb->n_views = vb->cap_views = 0;
    vka_free(vb->base.ctx, vb->set_index);
    vb->set_index = NULL;
    vb->cap_index = 0;
    if (vb->pipeline_cache) vb->vk->vkDestroyPipelineCache(d, vb->pipeline_cache, vb->dev->alloc);
    if (vb->pipeline_layout) vb->vk->vkDestroyPipelineLayout(d, vb->pipeline_layout, vb->dev->alloc);
    if (vb->set_layout) vb->vk->vkDestroyDescriptorSetLayout(d, vb->set_layout, vb->dev->alloc);
}

static VkShaderModule get_module(vkv_backend *vb, vka_shader_id shader) {
    if (vb->modules[shader]) return vb->modules[shader];
    const vka_shader_code *code = &vka_shader_registry[shader];
    VkShaderModuleCreateInfo info = {.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
                                     .codeSize = code->size,
                                     .pCode = code->code};
    VkResult vr = vb->vk->vkCreateShaderModule(vb->dev->device, &info, vb->dev->alloc, &vb->modules[shader]);
    if (vr != VK_SUCCESS) {
        char what[128];
        snprintf(what, sizeof what, "vkCreateShaderModule(%s)", code->name);
        vkv_fail_vk(vb, vr, what);
        return VK_NULL_HANDLE;
    }
    return vb->modules[shader];
}

VkPipeline vkv_get_pipeline(vkv_backend *vb, vka_shader_id shader, const uint32_t *spec,
                            int n_spec) {
    for (int i = 0; i < vb->n_pipelines; i++) {
        vkv_pipeline *p = &vb->pipelines[i];
        if (p->shader == shader && p->n_spec == n_spec &&
            memcmp(p->spec, spec, (size_t)n_spec * sizeof *spec) == 0)
            return p->pipeline;
    }
    VkShaderModule module = get_module(vb, shader);
    if (!module) return VK_NULL_HANDLE;
    if (vb->n_pipelines == vb->cap_pipelines) {
        int cap = vb->cap_pipelines ? 2 * vb->cap_pipelines : 32;
        vkv_pipeline *grown = vka_realloc(vb->base.ctx, vb->pipelines, (size_t)cap * sizeof *grown);
        if (!grown) {
            vkb_fail(&vb->base, VKA_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
            return VK_NULL_HANDLE;
        }
        vb->pipelines = grown;
        vb->cap_pipelines = cap;
    }
    VkSpecializationMapEntry entries[VKV_MAX_SPEC];
    for (int i = 0; i < n_spec; i++)
        entries[i] = (VkSpecializationMapEntry){.constantID = (uint32_t)i,
                                                .offset = (uint32_t)(i * 4),
                                                .size = 4};
    VkSpecializationInfo si = {.mapEntryCount = (uint32_t)n_spec,
                               .pMapEntries = entries,
                               .dataSize = (size_t)n_spec * 4,
                               .pData = spec};
    VkComputePipelineCreateInfo info = {
        .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
        .stage = {.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
                  .stage = VK_SHADER_STAGE_COMPUTE_BIT,
                  .module = module,
                  .pName = "main",
                  .pSpecializationInfo = n_spec ? &si : NULL},
        .layout = vb->pipeline_layout};
    vkv_pipeline *p = &vb->pipelines[vb->n_pipelines];
    VkResult vr = vb->vk->vkCreateComputePipelines(vb->dev->device, vb->pipeline_cache, 1, &info,
                                                   vb->dev->alloc, &p->pipeline);
    if (vr != VK_SUCCESS) {
        char what[128];
        snprintf(what, sizeof what, "vkCreateComputePipelines(%s)", vka_shader_registry[shader].name);
        vkv_fail_vk(vb, vr, what);
        return VK_NULL_HANDLE;
    }
    p->shader = shader;
    p->n_spec = n_spec;
    memset(p->spec, 0, sizeof p->spec);
    memcpy(p->spec, spec, (size_t)n_spec * sizeof *spec);
    vb->n_pipelines++;
    return p->pipeline;
}

/* Descriptors of each type one set of the layout takes. */
static uint32_t set_storage(void) { return VKV_MAX_BINDINGS; }
static uint32_t set_texels(const vkv_backend *vb) {
    return vb->dev->texel_operands ? VKV_MAX_TEXELS : 0;
}

/* Open a pool for SETS_PER_POOL sets of the layout; its index, or -1 (error set). */
static int new_pool(vkv_backend *vb) {
    VkDescriptorPoolSize size[2] = {
        {.type = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
         .descriptorCount = SETS_PER_POOL * set_storage()},
        {.type = VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER,
         .descriptorCount = SETS_PER_POOL * set_texels(vb)}};
    VkDescriptorPoolCreateInfo info = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO,
                                       .flags = VK_DESCRIPTOR_POOL_CREATE_FREE_DESCRIPTOR_SET_BIT,
                                       .maxSets = SETS_PER_POOL,
                                       .poolSizeCount = set_texels(vb) ? 2 : 1,
                                       .pPoolSizes = size};
    vkv_pool *grown = vka_realloc(vb->base.ctx, vb->pools, (size_t)(vb->n_pools + 1) * sizeof *grown);
    if (!grown) {
        vkb_fail(&vb->base, VKA_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
        return -1;
    }
    vb->pools = grown;
    VkDescriptorPool pool = VK_NULL_HANDLE;
    VkResult vr = vb->vk->vkCreateDescriptorPool(vb->dev->device, &info, vb->dev->alloc, &pool);
    if (vr != VK_SUCCESS) {
        vkv_fail_vk(vb, vr, "vkCreateDescriptorPool");
        return -1;
    }
    vb->pools[vb->n_pools] = (vkv_pool){.pool = pool,
                                        .sets_left = SETS_PER_POOL,
                                        .storage_left = size[0].descriptorCount,
                                        .texel_left = size[1].descriptorCount};
    return vb->n_pools++;
}

/* The newest pool with room for one more set by its counts, else a new one; -1 on error. */
static int pool_with_room(vkv_backend *vb) {
    for (int i = vb->n_pools - 1; i >= 0; i--) {
        const vkv_pool *p = &vb->pools[i];
        if (!p->refused && p->sets_left >= 1 && p->storage_left >= set_storage() &&
            p->texel_left >= set_texels(vb))
            return i;
    }
    return new_pool(vb);
}

/* Allocate a set from a pool that has room for it (counted, as Vulkan 1.0 requires). A pool
 * that refuses anyway (VK_ERROR_FRAGMENTED_POOL, or VK_ERROR_OUT_OF_POOL_MEMORY where the
 * implementation has 1.1 or VK_KHR_maintenance1) is skipped and a new one opened, once. */
static VkDescriptorSet alloc_set(vkv_backend *vb, int *from) {
    for (int attempt = 0; attempt < 2; attempt++) {
        int i = attempt == 0 ? pool_with_room(vb) : new_pool(vb);
        if (i < 0) return VK_NULL_HANDLE;
        vkv_pool *p = &vb->pools[i];
        VkDescriptorSetAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO,
                                          .descriptorPool = p->pool,
                                          .descriptorSetCount = 1,
                                          .pSetLayouts = &vb->set_layout};
        VkDescriptorSet set = VK_NULL_HANDLE;
        VkResult vr = vb->vk->vkAllocateDescriptorSets(vb->dev->device, &ai, &set);
        if (vr == VK_SUCCESS) {
            p->sets_left--;
            p->storage_left -= set_storage();
            p->texel_left -= set_texels(vb);
            *from = i;
            return set;
        }
        if (vr != VK_ERROR_OUT_OF_POOL_MEMORY && vr != VK_ERROR_FRAGMENTED_POOL) {
            vkv_fail_vk(vb, vr, "vkAllocateDescriptorSets");
            return VK_NULL_HANDLE;
        }
        p->refused = true;
    }
    vkb_fail(&vb->base, VKA_ERROR_VULKAN, "a new descriptor pool refused its first set");
    return VK_NULL_HANDLE;
}

/* Free a set back to its pool and count its room again. */
static void free_set(vkv_backend *vb, const vkv_set *s) {
    vkv_pool *p = &vb->pools[s->pool];
    vb->vk->vkFreeDescriptorSets(vb->dev->device, p->pool, 1, &s->set);
    p->sets_left++;
    p->storage_left += set_storage();
    p->texel_left += set_texels(vb);
    p->refused = false;
}

static uint64_t key_hash(const vkv_binding *key) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a over the key's words */
    for (int i = 0; i < VKV_SET_KEYS; i++) {
        uint64_t w[4] = {key[i].id, key[i].offset, key[i].range, (uint64_t)key[i].format};
        for (int j = 0; j < 4; j++) h = (h ^ w[j]) * 1099511628211ull;
    }
    return h ^ (h >> 29);
}

static bool same_key(const vkv_binding *a, const vkv_binding *b) {
    for (int i = 0; i < VKV_SET_KEYS; i++)
        if (a[i].id != b[i].id || a[i].offset != b[i].offset || a[i].range != b[i].range ||
            a[i].format != b[i].format)
            return false;
    return true;
}

/* Rebuild the hash index with room for at least `want` sets; false when out of memory. */
static bool reindex(vkv_backend *vb, int want) {
    int cap = 64;
    while (cap <= 2 * want) cap *= 2;
    int *index = vka_calloc(vb->base.ctx, (size_t)cap, sizeof *index);
    if (!index) return false;
    for (int i = 0; i < vb->n_sets; i++) {
        size_t slot = vb->sets[i].hash & (size_t)(cap - 1);
        while (index[slot]) slot = (slot + 1) & (size_t)(cap - 1);
        index[slot] = i + 1;
    }
    vka_free(vb->base.ctx, vb->set_index);
    vb->set_index = index;
    vb->cap_index = cap;
    return true;
}

VkBufferView vkv_get_view(vkv_backend *vb, VkBuffer buf, uint64_t id, VkDeviceSize offset,
                          VkDeviceSize range, VkFormat format) {
    for (int i = 0; i < vb->n_views; i++)
        if (vb->views[i].id == id && vb->views[i].offset == offset &&
            vb->views[i].range == range && vb->views[i].format == format)
            return vb->views[i].view;
    if (vb->n_views == vb->cap_views) {
        int cap = vb->cap_views ? 2 * vb->cap_views : 64;
        vkv_view *grown = vka_realloc(vb->base.ctx, vb->views, (size_t)cap * sizeof *grown);
        if (!grown) {
            vkb_fail(&vb->base, VKA_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
            return VK_NULL_HANDLE;
        }
        vb->views = grown;
        vb->cap_views = cap;
    }
    VkBufferViewCreateInfo info = {.sType = VK_STRUCTURE_TYPE_BUFFER_VIEW_CREATE_INFO,
                                   .buffer = buf,
                                   .format = format,
                                   .offset = offset,
                                   .range = range};
    VkBufferView view = VK_NULL_HANDLE;
    VkResult vr = vb->vk->vkCreateBufferView(vb->dev->device, &info, vb->dev->alloc, &view);
    if (vr != VK_SUCCESS) {
        vkv_fail_vk(vb, vr, "vkCreateBufferView");
        return VK_NULL_HANDLE;
    }
    vb->views[vb->n_views++] =
        (vkv_view){.id = id, .offset = offset, .range = range, .format = format, .view = view};
    return view;
}

VkDescriptorSet vkv_get_set(vkv_backend *vb, const VkBuffer *buffers, const VkBufferView *views,
                            const vkv_binding *key) {
    uint64_t hash = key_hash(key);
    if (vb->cap_index) {
        size_t slot = hash & (size_t)(vb->cap_index - 1);
        for (; vb->set_index[slot]; slot = (slot + 1) & (size_t)(vb->cap_index - 1)) {
            const vkv_set *s = &vb->sets[vb->set_index[slot] - 1];
            if (s->hash == hash && same_key(s->key, key)) return s->set;
        }
    }
    if (vb->n_sets == vb->cap_sets) {
        int cap = vb->cap_sets ? 2 * vb->cap_sets : 64;
        vkv_set *grown = vka_realloc(vb->base.ctx, vb->sets, (size_t)cap * sizeof *grown);
        if (!grown) {
            vkb_fail(&vb->base, VKA_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
            return VK_NULL_HANDLE;
        }
        vb->sets = grown;
        vb->cap_sets = cap;
    }
    if (2 * (vb->n_sets + 1) >= vb->cap_index && !reindex(vb, vb->n_sets + 1)) {
        vkb_fail(&vb->base, VKA_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
        return VK_NULL_HANDLE;
    }
    vkv_set *s = &vb->sets[vb->n_sets];
    s->set = alloc_set(vb, &s->pool);
    if (!s->set) return VK_NULL_HANDLE;
    VkDescriptorBufferInfo bi[VKV_MAX_BINDINGS];
    VkWriteDescriptorSet w[VKV_SET_KEYS];
    uint32_t n = n_layout_bindings(vb);
    for (uint32_t i = 0; i < n; i++) {
        w[i] = (VkWriteDescriptorSet){.sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET,
                                      .dstSet = s->set,
                                      .dstBinding = i,
                                      .descriptorCount = 1,
                                      .descriptorType = binding_type(i)};
        if (i >= VKV_MAX_BINDINGS) {
            w[i].pTexelBufferView = &views[i - VKV_MAX_BINDINGS];
            continue;
        }
        bi[i] = (VkDescriptorBufferInfo){.buffer = buffers[i], .offset = key[i].offset,
                                         .range = key[i].range};
        w[i].pBufferInfo = &bi[i];
    }
    vb->vk->vkUpdateDescriptorSets(vb->dev->device, n, w, 0, NULL);
    memcpy(s->key, key, sizeof s->key);
    s->hash = hash;
    size_t slot = hash & (size_t)(vb->cap_index - 1);
    while (vb->set_index[slot]) slot = (slot + 1) & (size_t)(vb->cap_index - 1);
    vb->set_index[slot] = ++vb->n_sets;
    return s->set;
}

void vkv_forget_buffers(vkv_backend *vb, const uint64_t *ids, int n) {
    int kept = 0;
    for (int i = 0; i < vb->n_views; i++) {
        bool stale = false;
        for (int j = 0; j < n && !stale; j++) stale = vb->views[i].id == ids[j];
        if (stale)
            vb->vk->vkDestroyBufferView(vb->dev->device, vb->views[i].view, vb->dev->alloc);
        else
            vb->views[kept++] = vb->views[i];
    }
    vb->n_views = kept;
    kept = 0;
    for (int i = 0; i < vb->n_sets; i++) {
        bool stale = false;
        for (int b = 0; b < VKV_SET_KEYS && !stale; b++)
            for (int j = 0; j < n && !stale; j++) stale = vb->sets[i].key[b].id == ids[j];
        if (stale)
            free_set(vb, &vb->sets[i]);
        else
            vb->sets[kept++] = vb->sets[i];
    }
    vb->n_sets = kept;
    if (vb->cap_index && !reindex(vb, kept)) { /* keep the old capacity: clear and refill */
        memset(vb->set_index, 0, (size_t)vb->cap_index * sizeof *vb->set_index);
        for (int i = 0; i < vb->n_sets; i++) {
            size_t slot = vb->sets[i].hash & (size_t)(vb->cap_index - 1);
            while (vb->set_index[slot]) slot = (slot + 1) & (size_t)(vb->cap_index - 1);
            vb->set_index[slot] = i + 1;
        }
    }
}
