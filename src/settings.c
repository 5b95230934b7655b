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

/* The words of the WORD settings: word i means the value minimum + i (minimum..maximum). */
static const char *const kernel_words[] = {"auto", "gpu", "cpu"};               /* vka_kernels */
static const char *const cpu_kernel_words[] = {"fast", "reference", "fast-avx2"}; /* 1, 2, 3 */
static const char *const *const words_of[VKA_SETTING_IDS] = {
    [VKA_SETTING_KERNELS] = kernel_words,
    [VKA_SETTING_CPU_KERNELS] = cpu_kernel_words,
};

/* The variable of setting id, NULL when unset or empty (or the setting has no variable). */
static const char *env_of(vka_setting_id id) {
    const char *v = settings[id].var ? getenv(settings[id].var) : NULL;
    return v && *v ? v : NULL;
}

static vka_result bad_value(vka_context *ctx, vka_setting_id id, const char *v) {
    const vka_setting *s = &settings[id];
    if (s->kind == VKA_SETTING_BYTES && s->max)
        return vka_set_error(ctx, VKA_ERROR_INVALID_ARGUMENT,
                             "%s=\"%s\" is not a number of bytes from %llu to %llu (%s)", s->var,
                             v, (unsigned long long)s->min, (unsigned long long)s->max, s->expect);
    if (s->kind == VKA_SETTING_BYTES)
        return vka_set_error(ctx, VKA_ERROR_INVALID_ARGUMENT,
                             "%s=\"%s\" is not a number of bytes >= %llu (%s)", s->var, v,
                             (unsigned long long)s->min, s->expect);
    return vka_set_error(ctx, VKA_ERROR_INVALID_ARGUMENT, "%s=\"%s\" is not %s", s->var, v,
                         s->expect);
}

/* Whether v is a decimal number that fits 64 bits, digits only (no sign, space or suffix). */
static bool decimal(const char *v, uint64_t *out) {
    if (*v < '0' || *v > '9') return false;
    char *end = NULL;
    errno = 0;
    unsigned long long n = strtoull(v, &end, 10);
    if (errno || *end) return false;
    *out = n;
    return true;
}

/* Variable id's value, checked by its kind: *set says whether it is set (and not empty); then
 * *value is its number, flag or word's value (INDEX: checked to be a number; vk_device.c checks
 * it against the devices). A value its kind does not allow fails, naming the variable. */
static vka_result read_variable(vka_context *ctx, vka_setting_id id, bool *set, uint64_t *value) {
    const vka_setting *s = &settings[id];
    const char *v = env_of(id);
    *set = v != NULL;
    *value = 0;
    if (!v) return VKA_SUCCESS;
    uint64_t n = 0;
    bool ok = false;
    if (s->kind == VKA_SETTING_WORD) {
        for (uint64_t i = 0; i <= s->max - s->min && !ok; i++)
            if (strcmp(v, words_of[id][i]) == 0) n = s->min + i, ok = true;
    } else {
        /* BYTES, NUMBER (0 to any), FLAG (0 or 1); a maximum of 0 is none */
        ok = decimal(v, &n) && n >= s->min && (s->max == 0 || n <= s->max);
    }
    if (!ok) return bad_value(ctx, id, v);
    *value = n;
    return VKA_SUCCESS;
}

vka_result vka_setting_bytes(vka_context *ctx, vka_setting_id id, uint64_t given, uint64_t *out) {
    const vka_setting *s = &settings[id];
    *out = given;
    if (given != 0 && given < s->min)
        return vka_set_error(ctx, VKA_ERROR_INVALID_ARGUMENT,
                             "vka_context_desc.%s = %llu is below %llu", s->field,
                             (unsigned long long)given, (unsigned long long)s->min);
    if (given != 0) return VKA_SUCCESS;
    bool set;
    return read_variable(ctx, id, &set, out);
}

/* The variables' values as read_variable checked them. */
typedef struct env_values {
    bool set[VKA_SETTING_IDS];
    uint64_t value[VKA_SETTING_IDS];
} env_values;

/* The CPU backend's: the desc, else its variable. */
static vka_result resolve_cpu(vka_context *ctx, const vka_context_desc *d, const env_values *e,
                              vka_settings *s) {
    s->cpu_threads = d->cpu_threads;
    if (s->cpu_threads < 0 || s->cpu_threads > VKA_CPU_MAX_THREADS)
        return vka_set_error(ctx, VKA_ERROR_INVALID_ARGUMENT,
                             "vka_context_desc.cpu_threads = %d is not in 0 .. %d "
                             "(VKA_CPU_MAX_THREADS; 0 = OpenMP's default)", s->cpu_threads,
                             VKA_CPU_MAX_THREADS);
    s->cpu_kernels = d->cpu_kernels;
    if (s->cpu_kernels == VKA_CPU_KERNELS_DEFAULT && e->set[VKA_SETTING_CPU_KERNELS])
        s->cpu_kernels = (vka_cpu_kernels)e->value[VKA_SETTING_CPU_KERNELS];
    if (s->cpu_kernels < VKA_CPU_KERNELS_DEFAULT || s->cpu_kernels > VKA_CPU_KERNELS_FAST_AVX2)
        return vka_set_error(ctx, VKA_ERROR_INVALID_ARGUMENT,
                             "vka_context_desc.cpu_kernels = %d is not a vka_cpu_kernels",
                             (int)s->cpu_kernels);
    return VKA_SUCCESS;
}

/* The Vulkan backend's: the desc, else its variable. */
static vka_result resolve_vulkan(vka_context *ctx, const vka_context_desc *d, const env_values *e,
                                 vka_settings *s) {
    s->vulkan = d->vulkan;
    s->vk_allocator = d->vk_allocator;
    if ((unsigned)d->kernels > (unsigned)VKA_KERNELS_CPU)
        return vka_set_error(ctx, VKA_ERROR_INVALID_ARGUMENT,
                             "vka_context_desc.kernels = %d is not a vka_kernels value (0 auto, "
                             "1 gpu, 2 cpu)", (int)d->kernels);
    s->kernels = d->kernels;
    if (s->kernels == VKA_KERNELS_AUTO && e->set[VKA_SETTING_KERNELS])
        s->kernels = (vka_kernels)e->value[VKA_SETTING_KERNELS];
    vka_result r = vka_setting_bytes(ctx, VKA_SETTING_MAX_BINDING_BYTES, d->max_binding_bytes,
                                     &s->max_binding_bytes);
    if (r != VKA_SUCCESS) return r;
    s->texel_loads = !e->set[VKA_SETTING_TEXEL_LOADS] || e->value[VKA_SETTING_TEXEL_LOADS] == 1;
    s->storage_16bit_kernels =
        !e->set[VKA_SETTING_STORAGE_16BIT] || e->value[VKA_SETTING_STORAGE_16BIT] == 1;
    s->validation_from_env = d->validation == 0;
    s->validation = d->validation > 0 ||
                    (d->validation == 0 && e->value[VKA_SETTING_VALIDATION] == 1);
    s->device_from_env = !d->device || !*d->device;
    s->device = s->device_from_env ? env_of(VKA_SETTING_DEVICE) : d->device;
    s->fail_alloc_at = e->value[VKA_SETTING_TEST_FAIL_ALLOC];
    s->fail_submit_at = e->value[VKA_SETTING_TEST_FAIL_SUBMIT];
    return VKA_SUCCESS;
}

vka_result vka_settings_resolve(vka_context *ctx, const vka_context_desc *d, vka_settings *out) {
    vka_settings s = {0};
    *out = s;
    if (d->validation < -1 || d->validation > 1)
        return vka_set_error(ctx, VKA_ERROR_INVALID_ARGUMENT,
                             "vka_context_desc.validation = %d: use 1 (on), -1 (off) or 0 (the "
                             "VKATTN_VALIDATION variable)", d->validation);
    /* Every variable, whichever backend runs and whatever the desc decides: a typo (or a
     * setting meant for the other backend that means nothing) is never silently ignored. */
    env_values e;
    vka_result r = VKA_SUCCESS;
    for (int id = 0; id < VKA_SETTING_IDS && r == VKA_SUCCESS; id++)
        r = read_variable(ctx, (vka_setting_id)id, &e.set[id], &e.value[id]);
    if (r == VKA_SUCCESS && d->backend == VKA_BACKEND_CPU) r = resolve_cpu(ctx, d, &e, &s);
    else if (r == VKA_SUCCESS && d->backend == VKA_BACKEND_VULKAN)
        r = resolve_vulkan(ctx, d, &e, &s);
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
