/* The settings (settings.h): the table, and the one place the library reads the environment. */
#include "settings.h"
#include "backend.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

typedef struct vka_setting {
    const char *var;   /* VKATTN_..., or NULL */
    const char *field; /* vka_context_desc field, or NULL */
    vka_setting_kind kind;
    uint64_t min, max;
    const char *fallback;
    const char *expect;
} vka_setting;

static const vka_setting settings[VKA_SETTING_IDS] = {
#define VKA_SETTING_ROW(id, var, field, kind, min, max, def, expect) \
    [VKA_SETTING_##id] = {var, field, kind, min, max, def, expect},
    VKA_SETTING_LIST(VKA_SETTING_ROW)
#undef VKA_SETTING_ROW
};

/* The variable of setting id, NULL when unset or empty. */
static const char *env_of(vka_setting_id id) {
    const char *v = getenv(settings[id].var);
    return v && *v ? v : NULL;
}

static vka_result bad_value(vka_context *ctx, vka_setting_id id, const char *v) {
    const vka_setting *s = &settings[id];
    if (s->kind == VKA_SETTING_BYTES)
        return vka_set_error(ctx, VKA_ERROR_INVALID_ARGUMENT,
                             "%s=\"%s\" is not a number of bytes >= %llu (%s)", s->var, v,
                             (unsigned long long)s->min, s->expect);
    return vka_set_error(ctx, VKA_ERROR_INVALID_ARGUMENT, "%s=\"%s\" is not %s", s->var, v,
                         s->expect);
}

vka_result vka_setting_bytes(vka_context *ctx, vka_setting_id id, uint64_t given, uint64_t *out) {
    const vka_setting *s = &settings[id];
    *out = given;
    const char *env = given == 0 ? env_of(id) : NULL;
    if (env) {
        char *end = NULL;
        errno = 0;
        unsigned long long v = strtoull(env, &end, 10);
        if (errno || !end || *end || env[0] < '0' || env[0] > '9' || v < s->min ||
            (s->max && v > s->max))
            return bad_value(ctx, id, env);
        *out = v;
    } else if (given != 0 && given < s->min) {
        return vka_set_error(ctx, VKA_ERROR_INVALID_ARGUMENT,
                             "vka_context_desc.%s = %llu is below %llu", s->field,
                             (unsigned long long)given, (unsigned long long)s->min);
    }
    return VKA_SUCCESS;
}

/* v's index in words (n of them), or -1. */
static int word_index(const char *v, const char *const *words, int n) {
    for (int i = 0; i < n; i++)
        if (strcmp(v, words[i]) == 0) return i;
    return -1;
}

/* The CPU backend's: VKATTN_CPU_KERNELS is checked even where the desc decides (vkattn check's
 * reference), so that a typo is never silently ignored. */
static vka_result resolve_cpu(vka_context *ctx, const vka_context_desc *d, vka_settings *s) {
    static const char *const words[] = {"fast", "reference", "fast-avx2"}; /* 1, 2, 3 */
    s->cpu_threads = d->cpu_threads;
    s->cpu_kernels = d->cpu_kernels;
    const char *env = env_of(VKA_SETTING_CPU_KERNELS);
    if (env) {
        int i = word_index(env, words, (int)VKA_ARRAY_LEN(words));
        if (i < 0) return bad_value(ctx, VKA_SETTING_CPU_KERNELS, env);
        if (s->cpu_kernels == VKA_CPU_KERNELS_DEFAULT) s->cpu_kernels = (vka_cpu_kernels)(i + 1);
    }
    if (s->cpu_kernels < VKA_CPU_KERNELS_DEFAULT || s->cpu_kernels > VKA_CPU_KERNELS_FAST_AVX2)
        return vka_set_error(ctx, VKA_ERROR_INVALID_ARGUMENT,
                             "vka_context_desc.cpu_kernels = %d is not a vka_cpu_kernels",
                             (int)s->cpu_kernels);
    return VKA_SUCCESS;
}

/* The Vulkan backend's, in the order they were always checked. */
static vka_result resolve_vulkan(vka_context *ctx, const vka_context_desc *d, vka_settings *s) {
    static const char *const words[] = {"auto", "gpu", "cpu"}; /* as vka_kernels */
    s->vulkan = d->vulkan;
    s->vk_allocator = d->vk_allocator;
    if ((unsigned)d->kernels > (unsigned)VKA_KERNELS_CPU)
        return vka_set_error(ctx, VKA_ERROR_INVALID_ARGUMENT,
                             "vka_context_desc.kernels = %d is not a vka_kernels value (0 auto, "
                             "1 gpu, 2 cpu)", (int)d->kernels);
    s->kernels = d->kernels;
    const char *env = env_of(VKA_SETTING_KERNELS);
    if (s->kernels == VKA_KERNELS_AUTO && env) {
        int i = word_index(env, words, (int)VKA_ARRAY_LEN(words));
        if (i < 0) return bad_value(ctx, VKA_SETTING_KERNELS, env);
        s->kernels = (vka_kernels)i;
    }
    vka_result r = vka_setting_bytes(ctx, VKA_SETTING_MAX_BINDING_BYTES, d->max_binding_bytes,
                                     &s->max_binding_bytes);
    if (r != VKA_SUCCESS) return r;
    env = env_of(VKA_SETTING_TEXEL_LOADS);
    if (env && strcmp(env, "0") != 0 && strcmp(env, "1") != 0)
        return bad_value(ctx, VKA_SETTING_TEXEL_LOADS, env);
    s->texel_loads = !(env && strcmp(env, "0") == 0);
    s->validation_from_env = d->validation == 0;
    s->validation = d->validation > 0;
    env = env_of(VKA_SETTING_VALIDATION);
    if (d->validation == 0 && env && strcmp(env, "0") != 0) {
        if (strcmp(env, "1") != 0) return bad_value(ctx, VKA_SETTING_VALIDATION, env);
        s->validation = true;
    }
    s->device_from_env = !d->device || !*d->device;
    s->device = s->device_from_env ? env_of(VKA_SETTING_DEVICE) : d->device;
    env = env_of(VKA_SETTING_TEST_FAIL_ALLOC);
    s->fail_alloc_at = env ? strtoull(env, NULL, 10) : 0;
    env = env_of(VKA_SETTING_TEST_FAIL_SUBMIT);
    s->fail_submit_at = env ? strtoull(env, NULL, 10) : 0;
    return VKA_SUCCESS;
}

vka_result vka_settings_resolve(vka_context *ctx, const vka_context_desc *d, vka_settings *out) {
    vka_settings s = {0};
    *out = s;
    if (d->validation < -1 || d->validation > 1)
        return vka_set_error(ctx, VKA_ERROR_INVALID_ARGUMENT,
                             "vka_context_desc.validation = %d: use 1 (on), -1 (off) or 0 (the "
                             "VKATTN_VALIDATION variable)", d->validation);
    vka_result r = VKA_SUCCESS;
    if (d->backend == VKA_BACKEND_CPU) r = resolve_cpu(ctx, d, &s);
    else if (d->backend == VKA_BACKEND_VULKAN) r = resolve_vulkan(ctx, d, &s);
    if (r == VKA_SUCCESS)
        r = vka_setting_bytes(ctx, VKA_SETTING_MAX_TENSOR_BYTES, d->max_tensor_bytes,
                              &s.max_tensor_bytes);
    if (r == VKA_SUCCESS)
        r = vka_setting_bytes(ctx, VKA_SETTING_MAX_MEMORY_BYTES, d->max_memory_bytes,
                              &s.max_memory_bytes);
    if (r == VKA_SUCCESS) *out = s;
    return r;
}

void vka_settings_lower_limits(const vka_settings *s, vkb_limits *lim) {
    uint64_t tensor = s->max_tensor_bytes / 256 * 256, memory = s->max_memory_bytes;
    if (tensor && tensor < lim->max_tensor_bytes) lim->max_tensor_bytes = tensor;
    if (tensor && tensor < lim->max_chunk_bytes) lim->max_chunk_bytes = tensor;
    if (memory && (lim->memory_bytes == 0 || memory < lim->memory_bytes)) lim->memory_bytes = memory;
}
