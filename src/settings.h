/*
 * Settings, resolved once (as sokol's _sg_desc_defaults): every VKATTN_* variable and
 * vka_context_desc setting the library reads is a row of VKA_SETTING_LIST, and settings.c is the
 * one file of the library that reads the environment. vka_context_create resolves the desc and
 * the variables into one vka_settings, which the backend receives at create (its limits
 * included). The only variable read later is VKATTN_TEXT_PIECE_BYTES, when a text is encoded
 * (vkm_text_piece_bytes; tests change it between calls on one context); it is checked at create
 * too, as every variable is.
 * The documentation's table of variables is checked against this list (tests/test_settings.c).
 */
#ifndef VKA_SETTINGS_H
#define VKA_SETTINGS_H

#include "vka_internal.h"

#include <stdbool.h>
#include <stdint.h>

typedef enum vka_setting_kind {
    VKA_SETTING_BYTES, /* a number of bytes >= minimum (<= maximum unless 0) */
    VKA_SETTING_NUMBER, /* a number >= 0 (test knobs; unset or empty = 0) */
    VKA_SETTING_WORD,  /* one of the words its message lists: minimum to maximum, in order */
    VKA_SETTING_FLAG,  /* 0 or 1 */
    VKA_SETTING_INDEX, /* a number: a Vulkan device index, checked against the devices when the
                        * Vulkan backend selects one (vk_device.c) */
} vka_setting_kind;

/* X(id, variable, desc field, kind, minimum, maximum, default, expect). variable is NULL for a
 * desc field the environment does not set, field NULL for a variable only. expect completes the
 * message for a bad value: "VARIABLE=\"value\" is not <expect>", and for BYTES "... is not a
 * number of bytes from <minimum> to <maximum> (<expect>)" (">= <minimum>" without a maximum).
 * Numbers are decimal digits only (no sign, space or suffix). Every variable that is set is
 * checked when a context is created, whichever backend it runs and whatever its desc says (a
 * typo is never silently ignored); a desc field, where given (not 0), then decides over its
 * variable. Empty variables count as unset. */
#define VKA_SETTING_LIST(X)                                                                        \
    X(VALIDATION, "VKATTN_VALIDATION", "validation", VKA_SETTING_FLAG, 0, 1, "0 (off)",            \
      "0 or 1 (1 enables the Vulkan validation layer)")                                            \
    X(DEVICE, "VKATTN_DEVICE", "device", VKA_SETTING_INDEX, 0, 0,                                  \
      "the best: discrete > integrated > virtual > CPU", "a device index (0, 1, ...)")             \
    X(KERNELS, "VKATTN_KERNELS", "kernels", VKA_SETTING_WORD, 0, 2, "auto (by device type)",       \
      "a kernel variant: use gpu, cpu or auto (or leave it unset)")                                \
    X(TEXEL_LOADS, "VKATTN_TEXEL_LOADS", NULL, VKA_SETTING_FLAG, 0, 1, "1 (CPU-type kernels)",     \
      "0 or 1 (0 makes the CPU-type kernels read tensors through storage buffers only)")           \
    X(STORAGE_16BIT, "VKATTN_16BIT_STORAGE", NULL, VKA_SETTING_FLAG, 0, 1,                       \
      "1 (where the device has storageBuffer16BitAccess)",                                         \
      "0 or 1 (0 makes the Vulkan kernels read and write bf16/fp16 as packed 32-bit words)")      \
    X(MAX_BINDING_BYTES, "VKATTN_MAX_BINDING_BYTES", "max_binding_bytes", VKA_SETTING_BYTES,       \
      4096, 0, "maxStorageBufferRange", "it lowers the most bytes one descriptor binds")           \
    X(MAX_TENSOR_BYTES, "VKATTN_MAX_TENSOR_BYTES", "max_tensor_bytes", VKA_SETTING_BYTES, 65536,   \
      0, "the device's (maxMemoryAllocationSize; CPU: unlimited)",                                 \
      "it lowers the largest tensor the device holds")                                             \
    X(MAX_MEMORY_BYTES, "VKATTN_MAX_MEMORY_BYTES", "max_memory_bytes", VKA_SETTING_BYTES, 65536,   \
      0, "the device-local heap (CPU backend, CPU-type devices: physical memory)",                 \
      "it lowers the memory all tensors together may take")                                        \
    X(CPU_THREADS, NULL, "cpu_threads", VKA_SETTING_NUMBER, 0, 0, "0 (OpenMP's default)", "")      \
    X(CPU_KERNELS, "VKATTN_CPU_KERNELS", "cpu_kernels", VKA_SETTING_WORD, 1, 3, "fast",            \
      "fast, reference or fast-avx2")                                                              \
    X(TEXT_PIECE_BYTES, "VKATTN_TEXT_PIECE_BYTES", NULL, VKA_SETTING_BYTES, 1, SIZE_MAX / 4,       \
      "1 MiB (VKM_TEXT_PIECE_BYTES)", "the size of the pieces a text is encoded in")               \
    X(TEST_FAIL_ALLOC, "VKATTN_TEST_FAIL_ALLOC", NULL, VKA_SETTING_NUMBER, 0, 0, "0 (never)",      \
      "a count (N: each Vulkan context's N-th device memory allocation fails; 0: none)")           \
    X(TEST_FAIL_SUBMIT, "VKATTN_TEST_FAIL_SUBMIT", NULL, VKA_SETTING_NUMBER, 0, 0, "0 (never)",    \
      "a count (N: each Vulkan context's N-th queue submission fails; 0: none)")

/* The variables read outside the library, X(variable, reader, documented): the command line's,
 * the tests' and the Python binding's (VKATTN_DEVICE, VKATTN_KERNELS, ... are the library's,
 * above, even where the command line also looks at them). documented 0 says why not. */
#define VKA_SETTING_OUTSIDE_LIST(X)                                                                \
    X("VKATTN_EVAL_CHUNK", "tools/cmd_eval.c", 1)                                                  \
    X("VKATTN_REEXEC", "tools/vkattn.c, on itself: the one re-run with OMP_WAIT_POLICY", 0)        \
    X("VKATTN_REQUIRE_GPU", "tests/test_util.h", 1)                                                \
    X("VKATTN_REQUIRE_DATA", "tests/test_util.h", 1)                                               \
    X("VKATTN_TEST_GPT2_LAYERS", "tests/test_gpt2_shape.c, by hand (its header says how)", 0)      \
    X("VKATTN_LIBRARY", "bindings/python/vkattn.py", 1)

typedef enum vka_setting_id {
#define VKA_SETTING_ID(id, var, field, kind, min, max, def, expect) VKA_SETTING_##id,
    VKA_SETTING_LIST(VKA_SETTING_ID)
#undef VKA_SETTING_ID
    VKA_SETTING_IDS
} vka_setting_id;

/* What a context runs with: the desc with every default and variable applied. */
typedef struct vka_settings {
    /* both backends: lower the device's limits (vka_settings_lower_limits); 0 = keep them */
    uint64_t max_tensor_bytes, max_memory_bytes;
    /* CPU backend */
    int cpu_threads;             /* 0 = OpenMP's default */
    vka_cpu_kernels cpu_kernels; /* VKA_CPU_KERNELS_DEFAULT = fast */
    /* Vulkan backend */
    const vka_vulkan_env *vulkan; /* the application's objects, or NULL */
    const void *vk_allocator;     /* const VkAllocationCallbacks *, or NULL */
    const char *device;           /* device index, NULL = the best */
    bool device_from_env;         /* device came from VKATTN_DEVICE (its messages say so) */
    vka_kernels kernels;
    bool validation;
    bool validation_from_env;     /* desc.validation was 0: VKATTN_VALIDATION decided */
    uint64_t max_binding_bytes;   /* 0 = maxStorageBufferRange */
    bool texel_loads;             /* VKATTN_TEXEL_LOADS is not 0 */
    bool storage_16bit_kernels;   /* VKATTN_16BIT_STORAGE is not 0 */
    uint64_t fail_alloc_at, fail_submit_at; /* VKATTN_TEST_FAIL_ALLOC / _SUBMIT, 0 = never */
} vka_settings;

/* Resolve desc (its backend's settings, then the byte limits) into *out; a bad value fails with
 * VKA_ERROR_INVALID_ARGUMENT naming the field or variable. */
vka_result vka_settings_resolve(vka_context *ctx, const vka_context_desc *desc, vka_settings *out);

/* A BYTES setting: given where it is not 0 (checked against the minimum), else the variable's
 * value, else 0. */
vka_result vka_setting_bytes(vka_context *ctx, vka_setting_id id, uint64_t given, uint64_t *out);

/* Lower lim to s's max_tensor_bytes (rounded down to 256 bytes: tensor and chunk) and
 * max_memory_bytes; never raised. Each backend calls it at the end of its create. */
struct vkb_limits;
void vka_settings_lower_limits(const vka_settings *s, struct vkb_limits *lim);

#endif
