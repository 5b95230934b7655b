/* vka_context: picks the backend (Vulkan device or CPU) everything else runs on. */
#include "cpu/cpu_backend.h"
#include "settings.h"
#include "vk/vk_internal.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void cpu_model_name(char *out, size_t cap) {
    snprintf(out, cap, "CPU");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) == 0) {
            const char *colon = strchr(line, ':');
            if (colon) {
                colon++;
                while (*colon == ' ' || *colon == '\t') colon++;
                snprintf(out, cap, "%s", colon);
                out[strcspn(out, "\n")] = '\0';
            }
            break;
        }
    }
    fclose(f);
}

/* The backend destroys what it made (the Vulkan backend its device too); the block goes last. */
static void context_free(vka_context *ctx) {
    if (ctx->be) ctx->be->rt->destroy(ctx->be);
    vka_context_block_free(ctx);
}

/* The first field missing from a partial host allocator, or NULL (none, or all three). */
static const char *host_allocator_missing(const vka_host_allocator *h) {
    if (!h || (!h->alloc && !h->realloc && !h->free)) return NULL;
    return !h->alloc ? "alloc" : !h->realloc ? "realloc" : !h->free ? "free" : NULL;
}

vka_result vka_context_create(const vka_context_desc *desc, vka_context **out) {
    if (!out) return VKA_ERROR_INVALID_ARGUMENT;
    *out = NULL;
    vka_context_desc d = desc ? *desc : (vka_context_desc){0};
    /* A partial allocator is refused, on a context from libc (it cannot be used). */
    const char *missing = host_allocator_missing(d.host_allocator);
    vka_host_allocator host = {0};
    if (d.host_allocator && !missing) host = *d.host_allocator;
    vka_context *ctx = vka_context_block_new(host);
    if (!ctx) return VKA_ERROR_OUT_OF_HOST_MEMORY;
    ctx->destroy_deferred = context_free;
    ctx->backend_kind = d.backend;
    snprintf(ctx->label, sizeof ctx->label, "%s", d.label ? d.label : "vkattn");
    ctx->log = d.log;
    ctx->log_user_data = d.log_user_data;
    ctx->log_level = d.log_level;

    vka_result r;
    vka_settings settings;
    if (missing) {
        r = vka_set_error(ctx, VKA_ERROR_INVALID_ARGUMENT,
                          "vka_context_desc.host_allocator has no %s: give alloc, realloc and "
                          "free, or none (NULL = malloc, realloc and free)", missing);
    } else if ((r = vka_settings_resolve(ctx, &d, &settings)) != VKA_SUCCESS) {
        /* a bad value, named in the message */
    } else if (d.backend == VKA_BACKEND_CPU) {
        r = vkb_cpu_create(ctx, &settings, &ctx->be);
    } else if (d.backend == VKA_BACKEND_VULKAN) {
        r = vkb_vulkan_create(ctx, &settings, &ctx->be, &ctx->vk);
    } else {
        r = vka_set_error(ctx, VKA_ERROR_INVALID_ARGUMENT, "unknown backend %d", (int)d.backend);
    }
    if (r != VKA_SUCCESS) {
        /* Keep the context so vka_last_error() can say why; release what was made. */
        if (ctx->be) ctx->be->rt->destroy(ctx->be);
        ctx->be = NULL;
        ctx->vk = NULL;
        ctx->create_status = r;
    }
    *out = ctx;
    return r;
}

/* Destroying a context that still has children would leave each of them a dangling pointer
 * that its destroy function follows. So the context stays until the last of them is destroyed
 * (each destroy counts down, vka_context_release). It says so once, and stops logging: the
 * application may free what its logger uses once vka_context_destroy has returned. */
void vka_context_destroy(vka_context *ctx) {
    if (!ctx || ctx->destroy_pending) return;
    /* A graph being recorded has no handle yet: it goes with the context. */
    if (ctx->recording) vka_graph_destroy(ctx->recording);
    if (vka_context_live_children(ctx) == 0) {
        context_free(ctx);
        return;
    }
    static const char *const names[VKA_CHILD_KINDS] = {"vka_tensor", "vka_graph", "vka_gpt",
                                                       "vka_data", "vka_tokenizer",
                                                       "vka_gpt_session"};
    char alive[256] = "";
    size_t len = 0;
    for (int k = 0; k < VKA_CHILD_KINDS; k++)
        if (ctx->children[k] && len < sizeof alive)
            len += (size_t)snprintf(alive + len, sizeof alive - len, "%s%u %s", len ? ", " : "",
                                    ctx->children[k], names[k]);
    vka_log(ctx, VKA_LOG_ERROR,
            "vka_context_destroy: context \"%s\" still has objects created from it (%s); "
            "destroy them first. The context is destroyed when the last of them is",
            ctx->label, alive);
    ctx->log = NULL;
    ctx->destroy_pending = true;
}

vka_backend vka_context_backend(const vka_context *ctx) { return ctx->backend_kind; }

const char *vka_context_cpu_kernels(const vka_context *ctx) {
    if (!ctx || !ctx->be || vka_context_backend(ctx) != VKA_BACKEND_CPU) return NULL;
    const cpu_backend *cb = (const cpu_backend *)ctx->be;
    if (cb->reference) return "reference";
    switch (cb->isa) {
    case VKC_ISA_AVX512: return "fast (avx512)";
    case VKC_ISA_AVX2: return "fast (avx2+fma)";
    default: return "fast (baseline)";
    }
}

int vka_context_cpu_threads(const vka_context *ctx) {
    if (!ctx || !ctx->be || vka_context_backend(ctx) != VKA_BACKEND_CPU) return 0;
    return ((const cpu_backend *)ctx->be)->nt;
}

uint32_t vka_context_validation_messages(const vka_context *ctx) {
    return ctx && ctx->vk ? atomic_load(&ctx->vk->validation_messages) : 0;
}

const char *vka_context_vulkan_kernels(const vka_context *ctx) {
    if (!ctx || !ctx->vk || ctx->create_status != VKA_SUCCESS) return NULL;
    if (!ctx->vk->is_cpu) return "gpu";
    return ctx->vk->texel_operands ? "cpu (texel loads)" : "cpu";
}

uint32_t vka_context_device_count(const vka_context *ctx) {
    if (!ctx || ctx->create_status != VKA_SUCCESS) return 0;
    return ctx->vk ? ctx->vk->n_phys : 1;
}

vka_result vka_context_device_info(const vka_context *ctx, uint32_t i, vka_device_info *out) {
    /* The context's error message is not part of what const promises. */
    vka_result r = vka_context_usable((vka_context *)ctx, "vka_context_device_info");
    if (r != VKA_SUCCESS) return r;
    if (!out)
        return vka_set_error((vka_context *)ctx, VKA_ERROR_INVALID_ARGUMENT,
                             "vka_context_device_info: out is NULL");
    if (i >= vka_context_device_count(ctx))
        return vka_set_error((vka_context *)ctx, VKA_ERROR_INVALID_ARGUMENT,
                             "device %u does not exist (%u devices)", i,
                             vka_context_device_count(ctx));
    if (ctx->vk) {
        *out = ctx->vk->infos[i];
        return VKA_SUCCESS;
    }
    memset(out, 0, sizeof *out);
    cpu_model_name(out->name, sizeof out->name);
    out->type = VKA_DEVICE_TYPE_CPU;
    snprintf(out->driver_name, sizeof out->driver_name, "vkattn cpu backend");
    out->max_storage_buffer_range = ctx->be->limits.max_tensor_bytes;
    out->max_memory_allocation_size = ctx->be->limits.max_chunk_bytes;
    out->unified_memory = true;
    out->has_compute = true;
    out->selected = true;
    out->path_16bit = VKA_16BIT_HOST;
    unsigned cvt = ((const cpu_backend *)ctx->be)->cvt;
    out->cpu_f16c = (cvt & VKC_CVT_F16C) != 0 || (cvt & VKC_CVT_AVX512) != 0;
    out->cpu_avx512_bf16 = (cvt & VKC_CVT_BF16) != 0;
    out->cpu_amx_bf16 = ((const cpu_backend *)ctx->be)->mm16_bf16 == VKC_MM16_AMX;
    return VKA_SUCCESS;
}

vka_result vka_context_selected_device(const vka_context *ctx, vka_device_info *out) {
    vka_result r = vka_context_usable((vka_context *)ctx, "vka_context_selected_device");
    if (r != VKA_SUCCESS) return r;
    return vka_context_device_info(ctx, ctx->vk ? ctx->vk->selected : 0, out);
}
