/*
 * vkattn — a tiny GPT's forward and training passes on any Vulkan GPU, with a plain-C CPU path
 * that validates every kernel.
 *
 * Threading: the library has no global mutable state of its own. One vka_context (and every
 * object created from it) is used by one thread at a time; separate contexts are independent
 * and may be used from different threads. The one process-wide thing is volk's pointer to the
 * Vulkan loader, which is set once, under a lock, the first time a Vulkan context is created.
 *
 * Errors: every call that can fail returns a vka_result (VKA_SUCCESS = 0, failures negative).
 * vka_result_string() names the kind; vka_last_error(ctx) gives the detailed message of the last
 * failure on that context (which file, which shape, which limit) -- every failure on a context
 * sets one. The library never exits, aborts or prints; give the context a logger to see what it
 * does.
 *
 * Conventions: desc structs are zero-initialised for defaults (each field says what 0 means);
 * a create or load function that fails sets *out to NULL (the one exception is
 * vka_context_create, which still hands out a context to read the reason from);
 * vka_x_destroy(NULL) is a no-op.
 *
 * Lifetimes: tensors, graphs, models (vka_gpt), data and tokenizers are children of the context
 * they were created from. Destroy children first, then the context. If you don't, nothing
 * dangles: vka_context_destroy logs an error naming the kinds and numbers of children still
 * alive, stops calling the logger, and leaves the context in place until the last of them is
 * destroyed, which then destroys it (an application Vulkan device must outlive that too). In
 * the meantime the only calls to make on those children are their destroy functions.
 * A graph that uses a tensor keeps no reference to it: destroying the tensor first is allowed,
 * and leaves the graph unable to run (vka_graph_run fails; see there).
 *
 * Tensor shapes follow llm.c: B batch, T time (sequence length), C channels (embedding size),
 * NH heads, HS = C/NH head size, V vocabulary size, Vp vocabulary padded to a multiple of 128,
 * L layers. Tensors are row-major float32 (token ids int32) unless made 16-bit
 * (vka_tensor_create_desc: bf16, fp16).
 */
#ifndef VKATTN_H
#define VKATTN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Building vkattn (-fvisibility=hidden): what this header declares is the library's only export. */
#if defined(VKA_BUILDING) && defined(__GNUC__)
#pragma GCC visibility push(default)
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------------------------
 * Version
 * ------------------------------------------------------------------------------------------- */
#define VKA_VERSION_MAJOR 0
#define VKA_VERSION_MINOR 1
#define VKA_VERSION_PATCH 0
#define VKA_VERSION_STRING "0.1.0"
/** (major << 16) | (minor << 8) | patch of the library actually linked. */
uint32_t vka_version(void);
/** "major.minor.patch" of the library actually linked. */
const char *vka_version_string(void);

/* ---------------------------------------------------------------------------------------------
 * Results
 * ------------------------------------------------------------------------------------------- */
/* X(name, value, description): one list makes both the enum and vka_result_string(). */
#define VKA_RESULT_LIST(X)                                                                      \
    X(VKA_SUCCESS, 0, "success")                                                                \
    X(VKA_TIMEOUT, 1, "not finished within the timeout (not an error)")                          \
    X(VKA_ERROR_INVALID_ARGUMENT, -1, "invalid argument")                                       \
    X(VKA_ERROR_OUT_OF_HOST_MEMORY, -2, "out of host memory")                                   \
    X(VKA_ERROR_OUT_OF_DEVICE_MEMORY, -3, "out of device memory")                               \
    X(VKA_ERROR_NO_VULKAN, -4, "Vulkan loader not found")                                       \
    X(VKA_ERROR_NO_DEVICE, -5, "no suitable Vulkan device")                                     \
    X(VKA_ERROR_DEVICE_LIMIT, -6, "exceeds a device limit")                                     \
    X(VKA_ERROR_VULKAN, -7, "Vulkan call failed")                                               \
    X(VKA_ERROR_DEVICE_LOST, -8, "Vulkan device lost")                                          \
    X(VKA_ERROR_IO, -9, "file input/output error")                                              \
    X(VKA_ERROR_FORMAT, -10, "malformed file")                                                  \
    X(VKA_ERROR_VOCABULARY, -11, "text outside the vocabulary")                                 \
    X(VKA_ERROR_MISMATCH, -12, "results differ beyond tolerance")                               \
    X(VKA_ERROR_UNSUPPORTED, -13, "unsupported on this device or build")                        \
    X(VKA_ERROR_NOT_FINITE, -14, "a result is NaN or infinite")

typedef enum vka_result {
#define VKA_X_ENUM(name, value, text) name = value,
    VKA_RESULT_LIST(VKA_X_ENUM)
#undef VKA_X_ENUM
} vka_result;

/** Static description of a result code ("out of device memory"); never NULL. */
const char *vka_result_string(vka_result result);

/* ---------------------------------------------------------------------------------------------
 * Context: the backend (Vulkan device or CPU) everything else runs on.
 * ------------------------------------------------------------------------------------------- */
typedef struct vka_context vka_context;

typedef enum vka_backend {
    VKA_BACKEND_VULKAN = 0, /* GLSL compute shaders on a Vulkan device (default) */
    VKA_BACKEND_CPU = 1,    /* plain C reference (OpenMP where built with it) */
} vka_backend;

typedef enum vka_log_level {
    VKA_LOG_ERROR = 0,
    VKA_LOG_WARN = 1,
    VKA_LOG_INFO = 2,
    VKA_LOG_DEBUG = 3,
} vka_log_level;

/** Logger: called synchronously on the thread using the context; message has no newline. (One
 * exception: validation on the application's instance, see vka_context_desc.validation.) */
typedef void (*vka_log_fn)(void *user_data, vka_log_level level, const char *message);

/**
 * Optional: run on the application's own Vulkan objects instead of creating them. The
 * application keeps ownership; all of them must outlive the context. The queue must support
 * compute. Handles are passed as void* / uint64_t so this header needs no Vulkan headers.
 */
typedef void (*vka_queue_lock_fn)(void *user_data, void *queue /* VkQueue */);

typedef struct vka_vulkan_env {
    void *get_instance_proc_addr; /* PFN_vkGetInstanceProcAddr; NULL = load the system loader */
    void *instance;               /* VkInstance */
    void *physical_device;        /* VkPhysicalDevice */
    void *device;                 /* VkDevice, created with the queue family below */
    void *queue;                  /* VkQueue with VK_QUEUE_COMPUTE_BIT */
    uint32_t queue_family;        /* family index of queue */
    uint32_t api_version;         /* VkApplicationInfo.apiVersion the instance was created with;
                                     0 = VK_API_VERSION_1_0. vkattn uses no function beyond the
                                     lower of it and the device's version (1.0 works: device
                                     properties then come from vkGetPhysicalDeviceProperties,
                                     and the largest allocation is taken as 2^30 bytes, the
                                     minimum Vulkan 1.1 guarantees) */
    /* Optional: Vulkan requires a VkQueue to be externally synchronised. When the application
     * (a render thread, another context) also uses `queue`, give lock/unlock: vkattn calls
     * lock_queue(queue_user_data, queue) right before and unlock_queue right after each
     * vkQueueSubmit on it, from the thread using the context, and never holds the lock while
     * waiting. Both or neither. It never calls vkQueueWaitIdle or vkDeviceWaitIdle on the
     * application's queue or device: it waits only on its own fences. */
    vka_queue_lock_fn lock_queue;
    vka_queue_lock_fn unlock_queue;
    void *queue_user_data;
    /* Optional: the 16-bit features the application enabled on `device` (vkattn cannot ask a
     * VkDevice what it was created with). false = not enabled: vkattn then uses neither and
     * packs 16-bit data in 32-bit words (vka_device_info.path_16bit). true for a feature the
     * physical device does not report fails vka_context_create (VKA_ERROR_INVALID_ARGUMENT). */
    bool storage_16bit; /* VkPhysicalDevice16BitStorageFeatures.storageBuffer16BitAccess */
    bool float16;       /* VkPhysicalDeviceShaderFloat16Int8Features.shaderFloat16 (with
                           VK_KHR_shader_float16_int8 on a device below 1.2) */
} vka_vulkan_env;

/** vkattn's own host memory (as VMA's and sokol's allocator hooks): every block the library
 * allocates goes through these when given (all three, or none: a partial one fails
 * vka_context_create with VKA_ERROR_INVALID_ARGUMENT naming the missing field, on a context
 * from malloc that only says why): the context itself, models, sessions, tokenizers, data,
 * graphs and the CPU backend's tensors. alloc returns
 * memory aligned for any object (as malloc), or NULL; realloc gets a block alloc or realloc
 * returned, never NULL; free never gets NULL; sizes are never 0. Running out (NULL) fails the
 * call with VKA_ERROR_OUT_OF_HOST_MEMORY (VKA_ERROR_OUT_OF_DEVICE_MEMORY for a CPU backend's
 * tensor arena) and frees what it had made. Called only from the thread using the context
 * (never from the CPU kernels' worker threads). Not covered: the Vulkan loader and driver (use
 * vk_allocator, which covers only what the driver allocates through VkAllocationCallbacks),
 * the OpenMP runtime of the CPU backend (its thread pool cannot be hooked), and libc's own
 * (stdio buffers of the files read and written). vka_builtin_corpus has no context: its
 * string comes from malloc and is freed with free(). */
typedef struct vka_host_allocator {
    void *(*alloc)(void *user_data, size_t size);
    void *(*realloc)(void *user_data, void *ptr, size_t size);
    void (*free)(void *user_data, void *ptr);
    void *user_data;
} vka_host_allocator;

/** Which kernel variants the Vulkan backend uses. Some kernels have a GPU variant (shared-memory
 * tiles, workgroup reductions with barriers) and a CPU-type variant (no barriers, one invocation
 * per row, register tiles) for software drivers such as lavapipe; both compute the same thing. */
typedef enum vka_kernels {
    VKA_KERNELS_AUTO = 0, /* by device type: CPU-type variants on CPU-type devices */
    VKA_KERNELS_GPU = 1,  /* always the GPU variants (e.g. to test them on lavapipe) */
    VKA_KERNELS_CPU = 2,  /* always the CPU-type variants */
} vka_kernels;

/** The CPU backend's kernels. */
typedef enum vka_cpu_kernels {
    VKA_CPU_KERNELS_DEFAULT = 0,   /* the environment variable VKATTN_CPU_KERNELS: fast,
                                      reference, fast-avx2, or unset = fast */
    VKA_CPU_KERNELS_FAST = 1,      /* matmul micro-kernels for the CPU's widest vector ISA
                                      (AVX2+FMA, AVX-512; chosen from cpuid): the same k order as
                                      the reference, each term a fused multiply-add */
    VKA_CPU_KERNELS_REFERENCE = 2, /* the plain-C reference (unfused multiply-adds) */
    VKA_CPU_KERNELS_FAST_AVX2 = 3, /* fast, at most AVX2+FMA even where AVX-512 is there (to
                                      test that path); "fast-avx2" in VKATTN_CPU_KERNELS */
} vka_cpu_kernels;

/** The most threads the CPU backend takes from OpenMP's default (OMP_NUM_THREADS=100000 would
 * crash OpenMP's runtime); the command line's --threads allows as many. */
#define VKA_CPU_MAX_THREADS 4096

typedef struct vka_context_desc {
    vka_backend backend;    /* 0 = VKA_BACKEND_VULKAN */
    const char *device;     /* Vulkan device by index as vka_context_device_info lists it ("1");
                               NULL = the VKATTN_DEVICE environment variable if set, else the
                               best: discrete > integrated > virtual > CPU */
    int validation;         /* 1 = on: VK_LAYER_KHRONOS_validation checks vkattn's Vulkan
                               calls, its warnings and errors are counted
                               (vka_context_validation_messages) and logged; -1 = off; 0 = the
                               environment variable VKATTN_VALIDATION: 1 = on, 0 or unset = off,
                               anything else fails with VKA_ERROR_INVALID_ARGUMENT. On vkattn's
                               own instance, on enables the layer and VK_EXT_debug_utils
                               (VKA_ERROR_UNSUPPORTED if the layer is not installed). With the
                               application's objects (vulkan below) vkattn cannot enable a layer
                               on an instance it did not create: on requires that the
                               application created it with VK_LAYER_KHRONOS_validation (as
                               vkEnumerateDeviceLayerProperties lists the instance's layers:
                               implicit and VK_INSTANCE_LAYERS ones count) and with
                               VK_EXT_debug_utils, else VKA_ERROR_UNSUPPORTED naming what is
                               missing; vkattn then adds its own messenger to that instance
                               (removed by vka_context_destroy). It hears every message of the
                               instance while the context lives, the application's own calls
                               included, from whichever thread made them: the count includes
                               them, and the logger may then be called on those threads. -1
                               leaves the application's instance alone (its layer, if any,
                               still checks vkattn's calls and reports to the application's
                               messengers; the count stays 0) */
    int cpu_threads;        /* CPU backend threads, 0 .. VKA_CPU_MAX_THREADS (more, or negative:
                               VKA_ERROR_INVALID_ARGUMENT); 0 = OpenMP's default
                               (OMP_NUM_THREADS, else the CPUs), capped at VKA_CPU_MAX_THREADS */
    vka_log_fn log;         /* NULL = silent */
    void *log_user_data;    /* passed to log */
    vka_log_level log_level;/* most verbose level passed to log; 0 = errors only */
    const vka_vulkan_env *vulkan; /* NULL = create our own instance and device */
    const char *label;      /* name used in log messages; NULL = "vkattn" */
    vka_kernels kernels;    /* kernel variants; 0 = the environment variable VKATTN_KERNELS:
                               gpu, cpu, auto or unset = VKA_KERNELS_AUTO; anything else fails
                               with VKA_ERROR_INVALID_ARGUMENT */
    uint64_t max_binding_bytes; /* Vulkan: the most bytes one descriptor binds, lowered from the
                               device's maxStorageBufferRange (never raised), e.g. to test how
                               ops split tensors larger than it; 0 = the environment variable
                               VKATTN_MAX_BINDING_BYTES if set (a number of bytes >= 4096),
                               else maxStorageBufferRange. A bad value fails with
                               VKA_ERROR_INVALID_ARGUMENT */
    uint64_t max_tensor_bytes; /* both backends: the largest single tensor and arena buffer, in
                               bytes, lowered from the device's (Vulkan: maxMemoryAllocationSize;
                               CPU: 1 TiB), never raised, e.g. to test how the model splits
                               its logits into blocks; 0 = the environment variable
                               VKATTN_MAX_TENSOR_BYTES if set (a number of bytes >= 65536), else
                               the device's. A bad value fails with VKA_ERROR_INVALID_ARGUMENT */
    uint64_t max_memory_bytes; /* both backends: the most bytes all of a model's tensors (and any
                               one arena or vka_tensor) may take, lowered from the device's
                               (CPU backend and CPU-type Vulkan devices: physical memory; else
                               the device-local heap), never raised; a plan past it fails with
                               VKA_ERROR_DEVICE_LIMIT naming the arena and the sizes; 0 = the
                               environment variable VKATTN_MAX_MEMORY_BYTES if set (a number of
                               bytes >= 65536), else the device's. A bad value fails with
                               VKA_ERROR_INVALID_ARGUMENT */
    const void *vk_allocator; /* const VkAllocationCallbacks *: passed to every Vulkan create
                               and destroy call vkattn makes (instance and device too, when it
                               creates them); NULL = the driver's */
    const vka_host_allocator *host_allocator; /* NULL = malloc/realloc/free */
    vka_cpu_kernels cpu_kernels; /* CPU backend kernels; 0 = the environment variable
                               VKATTN_CPU_KERNELS, else fast; a bad value fails with
                               VKA_ERROR_INVALID_ARGUMENT */
} vka_context_desc;

/**
 * Create a context. On failure *out is still set (unless host memory ran out) to a context that
 * only answers vka_last_error() and vka_context_destroy(), so the reason can be read.
 * Errors: VKA_ERROR_NO_VULKAN (no loader), VKA_ERROR_NO_DEVICE (no device, or the one asked for
 * does not exist or has no compute queue), VKA_ERROR_UNSUPPORTED (validation asked for but the
 * layer is missing; with vka_vulkan_env: the application's instance was not created with
 * VK_LAYER_KHRONOS_validation and VK_EXT_debug_utils), VKA_ERROR_INVALID_ARGUMENT (unknown backend, kernels or validation value, or a
 * malformed VKATTN_* variable, named in the message: every one that is set is checked, whichever
 * backend and whatever the desc gives instead; docs/environment.md), VKA_ERROR_VULKAN,
 * VKA_ERROR_OUT_OF_HOST_MEMORY.
 */
vka_result vka_context_create(const vka_context_desc *desc, vka_context **out);
/**
 * Destroy a context (with the graph being recorded, if any). Destroy every tensor, graph, model,
 * data and tokenizer created from it first. If some are still alive, the context logs an error
 * naming them (the last call to its logger), and is really destroyed when the last of them is;
 * until then only their destroy functions may be called (see "Lifetimes" above). NULL is a no-op.
 */
void vka_context_destroy(vka_context *ctx);
/** Detailed message of the last failure on ctx ("" if none); valid until the next call. */
const char *vka_last_error(const vka_context *ctx);
/** The backend the context runs on. */
vka_backend vka_context_backend(const vka_context *ctx);
/**
 * Validation-layer messages (warnings and errors) seen since the context was created; 0 when
 * validation is off. On the application's instance (vka_vulkan_env), every message of that
 * instance while the context lives, the application's own included. Tests treat any as a
 * failure.
 */
uint32_t vka_context_validation_messages(const vka_context *ctx);
/** Threads the CPU backend's kernels run on (desc.cpu_threads, else OpenMP's default, which
 * OMP_NUM_THREADS sets, at most VKA_CPU_MAX_THREADS (an info message says when it was capped);
 * 1 in a build without OpenMP). 0 for a Vulkan context. */
int vka_context_cpu_threads(const vka_context *ctx);
/** The CPU backend's kernels: "reference", or "fast (avx512)", "fast (avx2+fma)", "fast
 * (baseline)" (no vector ISA to use: the reference's code). NULL for a Vulkan context. */
const char *vka_context_cpu_kernels(const vka_context *ctx);
/** The Vulkan kernel variants in use: "gpu", "cpu" (the CPU-type variants, for software
 * drivers such as lavapipe; vka_context_desc.kernels), or "cpu (texel loads)": CPU-type
 * variants that also read tensors through uniform texel buffers, which llvmpipe loads with one
 * gather rather than a loop over the SIMD lanes (off with VKATTN_TEXEL_LOADS=0). NULL for a
 * CPU-backend context. */
const char *vka_context_vulkan_kernels(const vka_context *ctx);

typedef enum vka_device_type {
    VKA_DEVICE_TYPE_OTHER = 0,
    VKA_DEVICE_TYPE_INTEGRATED_GPU = 1,
    VKA_DEVICE_TYPE_DISCRETE_GPU = 2,
    VKA_DEVICE_TYPE_VIRTUAL_GPU = 3,
    VKA_DEVICE_TYPE_CPU = 4, /* software drivers such as lavapipe, and the CPU backend */
} vka_device_type;

/** How the kernels of a device hold bf16 and fp16 data (vka_device_info.path_16bit), chosen
 * per device. 16-bit tensors are two elements a 32-bit word on every path, and every path
 * computes in fp32 and rounds with the same integer conversions, so the paths give the same
 * bits. Where the device has storageBuffer16BitAccess (and VKATTN_16BIT_STORAGE is not 0) the
 * kernels with 16-bit-storage builds (the KV-cache write, layernorm forward, matmul,
 * cross-entropy backward: their storage-buffer builds, not the texel ones) store a lone 16-bit
 * element (one whose word's other half belongs to another invocation) as a 16-bit store
 * instead of by atomics on its word, and the KV-cache write also loads single elements
 * (VKA_16BIT_STORAGE); elsewhere the kernels read and write packed words (VKA_16BIT_PACKED).
 * No path computes in fp16, even with shaderFloat16: issue 19 requires fp32 accumulation, and
 * these bandwidth-bound kernels gain nothing from fp16 arithmetic on llvmpipe or desktop
 * GPUs; VKA_16BIT_STORAGE_FP16 stays in the enum (ABI) but is never reported. */
typedef enum vka_16bit_path {
    /* "none: bf16/fp16 packed in 32-bit words": two 16-bit values to a 32-bit word, unpacked
     * to fp32 in the shader (no storageBuffer16BitAccess, or VKATTN_16BIT_STORAGE=0) */
    VKA_16BIT_PACKED = 0,
    /* "16-bit storage (fp32 compute)": storageBuffer16BitAccess used (above) */
    VKA_16BIT_STORAGE = 1,
    /* "fp16 compute + 16-bit storage": not used (see above); kept for the ABI */
    VKA_16BIT_STORAGE_FP16 = 2,
    /* "host: converted by the CPU": the CPU backend, 16-bit words in host memory converted in
     * registers (vka_device_info.cpu_f16c, cpu_avx512_bf16; else the scalar reference) */
    VKA_16BIT_HOST = 3,
} vka_16bit_path;

/** What a device is and what it allows. Limits are Vulkan's VkPhysicalDeviceLimits names. */
typedef struct vka_device_info {
    uint32_t index;                 /* position in the Vulkan device list */
    char name[256];                 /* deviceName, or the CPU model for the CPU backend */
    vka_device_type type;
    uint32_t vendor_id, device_id;
    uint32_t api_version;           /* VK_MAKE_API_VERSION packing */
    uint32_t driver_version;        /* vendor-specific packing */
    char driver_name[256];          /* e.g. "llvmpipe", "NVIDIA"; "" if unknown */
    char driver_info[256];          /* e.g. "Mesa 22.3.6 (LLVM 15.0.6)"; "" if unknown */
    uint64_t device_local_bytes;    /* size of the largest device-local heap */
    uint64_t max_storage_buffer_range;   /* bytes one tensor may span */
    uint64_t max_memory_allocation_size; /* bytes */
    uint32_t max_compute_work_group_count[3];
    uint32_t max_compute_work_group_size[3];
    uint32_t max_compute_work_group_invocations;
    uint32_t max_compute_shared_memory_size;  /* bytes */
    uint32_t max_push_constants_size;         /* bytes */
    uint32_t subgroup_size;         /* 0 if unknown (Vulkan 1.0 device) */
    bool unified_memory;            /* device-local memory is host-visible (zero-copy path) */
    bool timestamps;                /* the compute queue supports timestamp queries */
    float timestamp_period;         /* nanoseconds per timestamp tick */
    bool has_compute;               /* has a queue family with compute */
    bool selected;                  /* the device this context runs on */
    /* 16-bit data (bf16, fp16). Vulkan devices: *_supported = the device reports the feature
     * (vkGetPhysicalDeviceFeatures2; false on a Vulkan 1.0 instance or device, where it cannot
     * be asked); storage_16bit / float16 = enabled on the VkDevice this context uses (the
     * selected device only; false for the others): vkattn enables on its own device every
     * feature the device supports; on an application's device (vka_vulkan_env) only what
     * vka_vulkan_env.storage_16bit / float16 say the application enabled. The CPU backend:
     * all four false. */
    bool storage_16bit_supported;   /* storageBuffer16BitAccess (VK_KHR_16bit_storage, 1.1) */
    bool float16_supported;         /* shaderFloat16 (VK_KHR_shader_float16_int8, 1.2) */
    bool storage_16bit;             /* storageBuffer16BitAccess is enabled */
    bool float16;                   /* shaderFloat16 is enabled */
    /* How the kernels store 16-bit data: the selected device's kernels (VKA_16BIT_STORAGE
     * where storage_16bit is enabled and VKATTN_16BIT_STORAGE is not 0, else
     * VKA_16BIT_PACKED), another device's from its supported features (what it would get if
     * vkattn created it, with the default settings); the CPU backend: VKA_16BIT_HOST.
     * 0 = VKA_16BIT_PACKED. */
    vka_16bit_path path_16bit;
    /* The CPU backend's conversions (fp32 <-> fp16: F16C; fp32 -> bf16: AVX512-BF16's
     * VCVTNEPS2BF16): true where the CPU has the instructions and the fast kernels use them;
     * false on other CPUs, with VKATTN_CPU_KERNELS=reference (scalar reference, the same bits),
     * and for Vulkan devices. */
    bool cpu_f16c;
    bool cpu_avx512_bf16;
    /* The CPU backend's bf16 matmul runs on AMX tiles (AMX-BF16's TDPBF16PS: Intel Xeon from
     * Sapphire Rapids on, the OS granting the tile state); false elsewhere, with
     * VKATTN_CPU_KERNELS=reference or fast-avx2, and for Vulkan devices. */
    bool cpu_amx_bf16;
} vka_device_info;

/** The name of a vka_16bit_path, as `vkattn info` and `check` print it ("fp16 compute + 16-bit
 * storage", ...); "unknown" for other values. */
const char *vka_16bit_path_string(vka_16bit_path path);

/** Number of Vulkan devices the context's instance sees (1 for the CPU backend). */
uint32_t vka_context_device_count(const vka_context *ctx);
/** Device i of vka_context_device_count(). Errors: VKA_ERROR_INVALID_ARGUMENT (i out of range). */
vka_result vka_context_device_info(const vka_context *ctx, uint32_t i, vka_device_info *out);
/** The device the context runs on. */
vka_result vka_context_selected_device(const vka_context *ctx, vka_device_info *out);

/* ---------------------------------------------------------------------------------------------
 * Tensors, graphs and ops: the kernels themselves, for tests, benchmarks and applications that
 * use vkattn as a compute backend.
 *
 * A vka_tensor is n elements on the context's device, zero-filled when created: 4-byte ones
 * (float32, or int32 token ids; vka_tensor_create) or 16-bit ones (bf16, fp16;
 * vka_tensor_create_desc). The ops that take 16-bit tensors: vka_matmul (a and b, both bf16 or
 * both fp16; out, bf16 or fp16 whatever a and b are), vka_copy (conversions),
 * vka_encoder_forward (out, wte, wpe), vka_layernorm_forward (out, inp),
 * vka_layernorm_backward (dout, inp, weight; mean, rstd and the gradients stay float32),
 * vka_gelu_forward (out, inp), vka_gelu_backward (inp, dout),
 * vka_residual_forward (out, a, b), vka_attention_forward and vka_attention_backward (q, k, v
 * or qkv, out; lse, and the backward's dout and gradients, stay float32), vka_kv_write
 * (kcache, vcache, qkv) and vka_crossentropy_forward/_backward (logits, dlogits; losses stay
 * float32); the 16-bit tensors of one call have one type
 * (except vka_matmul's out). Elsewhere a 16-bit tensor fails with VKA_ERROR_INVALID_ARGUMENT
 * naming the op and the tensor. The 16-bit rule of these ops: a 16-bit input is widened to
 * float32 exactly, the arithmetic is the float32 op's, and a 16-bit output is the float32
 * result rounded to nearest, ties to even (vka_convert's rounding: NaN stays NaN, fp16 past
 * 65520 gives Inf), so it equals vka_copy of the float32 op's output, bit for bit (a NaN may
 * differ in sign: on Vulkan a layernorm row holding NaN with both infinities); with an odd
 * element count the high half of an output's last word keeps its value. vka_matmul's 16-bit
 * out takes no accumulate; in place (an output that is also an input) is allowed for the four
 * elementwise and layernorm ops and the cross-entropy backward (one type). Ops are recorded into a graph between vka_graph_begin() and
 * vka_graph_end(); nothing runs until vka_graph_run(), which submits the whole graph once and
 * waits once (Vulkan: one command buffer with the barriers it needs). A graph can be run any
 * number of times; write new inputs with vka_tensor_write() between runs. An op called outside
 * vka_graph_begin/end fails with VKA_ERROR_INVALID_ARGUMENT.
 *
 * Every op checks its tensors hold the elements its shape needs and returns
 * VKA_ERROR_INVALID_ARGUMENT naming the tensor and shape if not (the graph is then marked
 * failed: vka_graph_end returns the first error). As in llm.c, outputs come first, then inputs,
 * then weights, then sizes; backward ops ADD into their gradient outputs (dx += ...) unless the
 * comment says "writes". Each op's CPU-backend version is the reference its shader is tested
 * against.
 * ------------------------------------------------------------------------------------------- */
typedef struct vka_tensor vka_tensor;
typedef struct vka_graph vka_graph;

/** A zero-filled tensor of n elements; it may be larger than maxStorageBufferRange (the ops
 * split their work). Errors: VKA_ERROR_DEVICE_LIMIT (n*4 bytes beyond the device's largest
 * allocation, maxMemoryAllocationSize, or its memory: the message gives both), out of memory. */
vka_result vka_tensor_create(vka_context *ctx, size_t n, vka_tensor **out);
/** A tensor's element type. 0 is float32, so zero-filled descs keep today's tensors. bf16 is
 * the top half of a float32 (1 sign, 8 exponent, 7 mantissa bits; Kalamkar et al. 2019, "A
 * Study of BFLOAT16 for Deep Learning Training"), fp16 IEEE 754 binary16 (1, 5, 10). */
typedef enum vka_dtype {
    VKA_F32 = 0,
    VKA_BF16 = 1,
    VKA_F16 = 2,
} vka_dtype;

/** "f32", "bf16", "f16", or "unknown" for a value outside the enum. */
const char *vka_dtype_string(vka_dtype dtype);
/** Bytes per element: 4, 2, 2; 0 for a value outside the enum. */
size_t vka_dtype_size(vka_dtype dtype);

/** What vka_tensor_create_desc makes: n elements of dtype. */
typedef struct vka_tensor_desc {
    size_t n;        /* elements (> 0) */
    vka_dtype dtype; /* 0 = VKA_F32 */
} vka_tensor_desc;

/** A zero-filled tensor of desc->n elements of desc->dtype: vka_tensor_create's for VKA_F32.
 * 16-bit tensors take 2 bytes an element (a pair a 32-bit word, element 2i in its low half, as
 * in a little-endian uint16_t array; an odd n's last word has a zero high half that reads,
 * writes and ops never count or touch); vka_tensor_write and vka_tensor_read copy their raw
 * 16-bit words (vka_convert converts float32 arrays to and from them). Errors:
 * VKA_ERROR_INVALID_ARGUMENT (desc or out NULL, n = 0, a dtype outside the enum),
 * VKA_ERROR_DEVICE_LIMIT and out of memory as vka_tensor_create. */
vka_result vka_tensor_create_desc(vka_context *ctx, const vka_tensor_desc *desc,
                                  vka_tensor **out);
/** The tensor's element type (VKA_F32 for NULL). */
vka_dtype vka_tensor_dtype(const vka_tensor *t);

/** Convert n elements of host array src (src_dtype) into host array dst (dst_dtype): float32
 * to and from bf16 or fp16, or a copy when the types are the same (16-bit arrays are uint16_t
 * words). Narrowing rounds to nearest, ties to even; NaN stays NaN (quieted, sign kept); +-Inf
 * stays +-Inf; fp16 overflow (|x| >= 65520) gives +-Inf, its subnormals are rounded correctly;
 * bf16 narrowing flushes float32 subnormals (below 1.2e-38) to signed zero, as AVX512-BF16's
 * VCVTNEPS2BF16 does. Widening is exact, except that an fp16 signalling NaN comes back quiet
 * (as VCVTPH2PS does; a bf16 one keeps its bits). Uses AVX-512 (AVX512-BF16) or AVX2 and F16C where the
 * CPU has them, the same bits as the scalar reference. dst and src must not overlap. Errors:
 * VKA_ERROR_INVALID_ARGUMENT (a NULL array with n > 0, a dtype outside the enum, bf16 <-> fp16:
 * convert through float32). */
vka_result vka_convert(vka_dtype dst_dtype, void *dst, vka_dtype src_dtype, const void *src,
                       size_t n);

/** Destroy a tensor. Graphs that use it can no longer run (vka_graph_run fails); destroy them
 * too, before or after. */
void vka_tensor_destroy(vka_tensor *t);
/** Number of elements (of the tensor's dtype). */
size_t vka_tensor_size(const vka_tensor *t);
/** Copy n elements from host src into elements [off, off+n) (immediate, waits): 4 bytes each
 * for a float32 tensor, 2 (the raw bf16 or fp16 word) for a 16-bit one, any off and n. */
vka_result vka_tensor_write(vka_tensor *t, size_t off, const void *src, size_t n);
/** Copy elements [off, off+n) into host dst (immediate, waits; element sizes as
 * vka_tensor_write). */
vka_result vka_tensor_read(const vka_tensor *t, size_t off, void *dst, size_t n);

/** Start recording ops on ctx. Errors: VKA_ERROR_INVALID_ARGUMENT (already recording). */
vka_result vka_graph_begin(vka_context *ctx);
/** Stop recording; *out receives the graph. Returns the first error of any op recorded (the
 * graph is then released and *out NULL), or VKA_ERROR_INVALID_ARGUMENT if a tensor the graph
 * uses was destroyed while it was being recorded. */
vka_result vka_graph_end(vka_context *ctx, vka_graph **out);
/** Run the graph once and wait. Errors: VKA_ERROR_INVALID_ARGUMENT (a tensor this graph uses
 * was destroyed: it runs nothing), VKA_ERROR_DEVICE_LOST, VKA_ERROR_VULKAN. */
vka_result vka_graph_run(vka_graph *graph);
void vka_graph_destroy(vka_graph *graph);

/* ---------------------------------------------------------------------------------------------
 * Embedding in an application: asynchronous submission, recording into the application's
 * command buffers, and tensors on the application's buffers (Vulkan backend).
 *
 * Ownership and synchronisation. A graph's commands read and write only the tensors its ops
 * were given. While a submission of a graph is pending (vka_graph_submit until vka_graph_wait
 * returns VKA_SUCCESS) or a command buffer it was recorded into may still execute, the host must
 * not read, write or destroy those tensors, nor destroy the graph (vka_graph_destroy and
 * vka_tensor_destroy wait for vkattn's own pending submissions first; they cannot know about
 * the application's command buffers). Calls on one context stay single-threaded.
 * ------------------------------------------------------------------------------------------- */

/** What a submission waits for and signals (all optional; handles are the application's). */
typedef struct vka_submit_desc {
    uint32_t wait_count;
    const void *wait_semaphores;   /* const VkSemaphore[wait_count] */
    const uint32_t *wait_stages;   /* VkPipelineStageFlags[wait_count]; NULL = all commands */
    const uint64_t *wait_values;   /* timeline values [wait_count], or NULL: all binary */
    uint32_t signal_count;
    const void *signal_semaphores; /* const VkSemaphore[signal_count] */
    const uint64_t *signal_values; /* timeline values [signal_count], or NULL: all binary */
} vka_submit_desc;

/** Submit the graph once on the context's queue and return at once (desc NULL = no
 * semaphores). Timeline values are passed with VkTimelineSemaphoreSubmitInfo (the application's
 * device must have timeline semaphores enabled). The CPU backend runs the graph now and
 * accepts no semaphores. Errors: VKA_ERROR_INVALID_ARGUMENT (the graph is still pending: wait
 * for it first; semaphores on the CPU backend; a lost tensor, as vka_graph_run),
 * VKA_ERROR_VULKAN, VKA_ERROR_DEVICE_LOST. */
vka_result vka_graph_submit(vka_graph *graph, const vka_submit_desc *desc);
/** Wait up to timeout_ns nanoseconds (0 = poll, UINT64_MAX = for ever) for the graph's last
 * submission, then finish it: read its timestamps and run its after-run checks (cross-entropy
 * targets, attention key_lens). Returns VKA_SUCCESS when done (also when nothing is pending),
 * VKA_TIMEOUT when not yet (call again), or the run's error. */
vka_result vka_graph_wait(vka_graph *graph, uint64_t timeout_ns);
/** Record the graph's commands into the application's command buffer (a VkCommandBuffer in
 * the recording state, of the context's device, from a pool whose queue family has compute),
 * any number of times. vkattn records a global memory barrier at the start (from everything
 * earlier, host writes included: srcStage ALL_COMMANDS | HOST, srcAccess MEMORY_WRITE |
 * HOST_WRITE, to dstStage COMPUTE_SHADER | TRANSFER, dstAccess SHADER_READ | SHADER_WRITE |
 * TRANSFER_READ | TRANSFER_WRITE) and one at the end (from srcStage COMPUTE_SHADER | TRANSFER,
 * srcAccess SHADER_WRITE | TRANSFER_WRITE, to dstStage ALL_COMMANDS | HOST, dstAccess
 * MEMORY_READ | MEMORY_WRITE | HOST_READ), so the application needs no barrier of its own
 * around it. Afterwards the command buffer's bound compute pipeline, descriptor set 0 and push
 * constants are vkattn's: bind your own again before your next dispatch. No timestamps are recorded (vka_graph_times reports vka_graph_run/submit only) and
 * the after-run checks are not run (call vka_graph_check after the command buffer completed if
 * the graph has cross-entropy targets or key_lens that may be bad). The recorded commands use
 * the graph's pipelines, descriptor sets and the tensors' buffers: keep the graph and tensors
 * alive until the command buffer has completed. Vulkan cannot tell a command buffer's state, so
 * one that is not recording is not detected (the validation layer reports it). Errors:
 * VKA_ERROR_UNSUPPORTED (CPU backend),
 * VKA_ERROR_INVALID_ARGUMENT (NULL command buffer, lost tensor). */
vka_result vka_graph_record(vka_graph *graph, void *command_buffer /* VkCommandBuffer */);
/** Run the after-run checks of a graph whose commands the application executed (recorded
 * with vka_graph_record, completed): VKA_SUCCESS, or the error naming the first bad target or
 * key_lens. */
vka_result vka_graph_check(vka_graph *graph);

/** A tensor over bytes [offset, offset + size) of the application's VkBuffer (created on the
 * context's device with VK_BUFFER_USAGE_STORAGE_BUFFER_BIT, and TRANSFER_SRC / TRANSFER_DST for
 * vka_tensor_read / vka_tensor_write / vka_fill / vka_copy; its memory bound): ops read and
 * write it in place. offset and size must be multiples of 4 (the binding offsets vkattn uses
 * are aligned down to minStorageBufferOffsetAlignment within the buffer, so no alignment beyond
 * 4 is needed), size > 0, and the range must lie inside the buffer (checked against its
 * vkGetBufferMemoryRequirements size, which may exceed the size it was created with by its
 * alignment: the bytes between are the application's to keep out of). The buffer stays the application's: vka_tensor_destroy does not
 * destroy it, and it must outlive the tensor and every graph using it. Errors:
 * VKA_ERROR_UNSUPPORTED (CPU backend), VKA_ERROR_INVALID_ARGUMENT (NULL buffer, misaligned
 * offset or size, size beyond maxMemoryAllocationSize). */
vka_result vka_tensor_wrap_vulkan_buffer(vka_context *ctx, const void *buffer /* const VkBuffer * */,
                                         uint64_t offset, uint64_t size, vka_tensor **out);
/** Where a tensor lives: *buffer (VkBuffer, written through the pointer), the byte offset and
 * size of its elements in it, for the application's own commands (e.g. its renderer reading
 * logits). For tensors vkattn made (vka_tensor_create, the session's logits) the offset is a
 * multiple of 256 bytes, so of any minStorageBufferOffsetAlignment, and can be bound as is; a
 * wrapped tensor's is the one it was wrapped at. The buffer stays vkattn's (do not destroy it); it has STORAGE_BUFFER, TRANSFER_SRC
 * and TRANSFER_DST usage. Errors: VKA_ERROR_UNSUPPORTED (CPU backend). */
vka_result vka_tensor_vulkan_buffer(const vka_tensor *t, void *buffer /* VkBuffer * */,
                                    uint64_t *offset, uint64_t *size);

/** Time of one kind of op in a graph run (profiling). */
typedef struct vka_op_time {
    const char *op;  /* op name: "matmul", "softmax_forward", ... (static string) */
    uint32_t calls;  /* how many times the graph runs it */
    double ms;       /* their summed time in the last run, milliseconds */
} vka_op_time;

/** Time each op of the graphs recorded on ctx from now on (also the model's graphs recorded
 * afterwards). Vulkan: a timestamp before and after each dispatch and a barrier after each, so
 * the times do not overlap (this serialises the graph slightly); CPU: the host clock around each
 * op. Off by default. */
vka_result vka_context_set_profiling(vka_context *ctx, bool enable);
/** Times of the graph's last vka_graph_run: *total_ms is its duration on the device (Vulkan:
 * between timestamps written at its start and end, or host time of the submit and wait where the
 * queue has no timestamps; CPU: host time). With profiling, per-op times summed by op name go to
 * out (up to cap entries, in order of first appearance; *count = the number of distinct ops,
 * which may exceed cap); without, *count = 0. Any of total_ms, out, count may be NULL.
 * Errors: VKA_ERROR_INVALID_ARGUMENT (graph never run). */
vka_result vka_graph_times(const vka_graph *graph, double *total_ms, vka_op_time *out, int cap,
                           int *count);

/** The device's measured ceilings (as vkpeak measures them), to put kernel numbers in context. */
typedef struct vka_peak {
    double gflops;        /* fp32 multiply-add throughput, GFLOP/s: independent vec4 FMA chains
                             (an FMA counts 2 FLOPs), enough invocations to fill the device */
    double gbps;          /* memory bandwidth, GB/s (1e9 bytes/s): a device-to-device buffer copy,
                             bytes read + bytes written over the copy's time */
    double fma_gflop;     /* work of the timed FMA run, GFLOP */
    double copy_mbytes;   /* size of the copied buffer, MB (1e6 bytes): at least 256 MiB and 4x
                             llc_mbytes, where memory allows */
    int copy_passes;      /* timed copies of that buffer (after 2 warm-ups); the fastest counts */
    bool copy_source_written; /* the source was filled (a non-zero value, read back) before the
                             copies were timed, so its reads come from memory and not from the
                             kernel's shared zero page */
    double llc_mbytes;    /* the host's last-level cache, MB (1e6 bytes); 0 = not known */
    bool device_timer;    /* times come from device timestamps (else the host clock) */
    double hw_gflops;     /* the processor's fp32 FMA peak, GFLOP/s, where the device is the CPU
                             (CPU backend: on its threads; CPU-type Vulkan device: on every
                             CPU): independent fused multiply-add chains at the widest vector
                             ISA cpuid reports, whatever the build targets; 0 = not measured */
    const char *hw_isa;   /* that ISA: "avx512", "avx2+fma"; NULL = not measured */
} vka_peak;

/** Measure the ceilings of ctx's device: the FMA kernel is grown until one run takes at least
 * min_ms (0 = 20 ms); the copy runs at its full size (copy_mbytes) on buffers written first;
 * each is then run `repeats` times (0 = 5); the best run counts (a ceiling).
 * Errors: VKA_ERROR_INVALID_ARGUMENT (out NULL, min_ms negative or not finite, repeats
 * negative), out of memory, VKA_ERROR_DEVICE_LOST. */
vka_result vka_measure_peak(vka_context *ctx, double min_ms, int repeats, vka_peak *out);

/** t[i] = value for all i. */
vka_result vka_fill(vka_context *ctx, vka_tensor *t, float value);
/** dst[i] = src[i] for i < n (elements of each tensor's dtype), converted to dst's dtype when
 * the types differ, on the device, with vka_convert's bits: float32 -> bf16 / fp16 rounds to
 * nearest, ties to even (NaN stays NaN, fp16 past 65520 gives Inf, bf16 flushes float32
 * subnormals to zero), bf16 / fp16 -> float32 is exact. Elements of dst past n keep their
 * values. The model's mixed precision makes its 16-bit copies of weights and activations this
 * way. Errors: VKA_ERROR_INVALID_ARGUMENT (n = 0, a tensor NULL, of another context or holding
 * fewer than n elements; bf16 <-> fp16, which vka_convert refuses too; dst overlapping src). */
vka_result vka_copy(vka_context *ctx, vka_tensor *dst, const vka_tensor *src, size_t n);

/** Batched row-major matrix product (the tiled matmul kernel):
 *    out[b] = alpha * op(a[b]) * op(b[b]) (+ bias) (+ out[b] if accumulate)
 * op(a) is (M, K): a stored (M, K), or (K, M) when trans_a; op(b) is (K, N): stored (K, N), or
 * (N, K) when trans_b; out is (M, N); matrices are packed, batches stride_* elements apart
 * (0 = packed). bias (N), optional, is added to every row. a and b are both float32, both
 * bf16 (VKA_BF16) or both fp16 (VKA_F16): then each element is widened to float32 exactly, each
 * product is exact in float32 (fp16 always; bf16 unless it underflows below 1.2e-38) and the sums
 * are float32 as with float32 inputs (llm.c's mixed precision; Vulkan reads the 16-bit elements
 * from their 32-bit words and widens them in the shader, fp16 with unpackHalf2x16, on any
 * device); bias stays float32. out is float32, or bf16 / fp16 whatever a and b are: a 16-bit
 * out holds exactly the float32 out's values (the same kernels and summation order, alpha and
 * bias applied in float32) rounded to nearest, ties to even, i.e. vka_copy of the float32
 * call's out, bit for bit (NaN stays NaN, fp16 past 65520 gives Inf); its strides count its
 * elements, an odd count keeps the high half of its last word, rows or batches sharing a word
 * lose neither half; accumulate into a 16-bit out is refused (it would round twice: accumulate
 * into a float32 out and vka_copy it). NaN and infinities propagate as in float32 (on Vulkan as
 * far as the device keeps them: lavapipe does). Except: the CPU backend's fast kernels on a CPU
 * with AVX512-BF16 use vdpbf16ps for bf16, which adds k + 1 before k in each pair and flushes
 * subnormal bf16 inputs and subnormal partial sums to zero (below 1.2e-38; the reference kernels
 * and Vulkan do not); on a CPU with AMX-BF16 (vka_device_info.cpu_amx_bf16) they use AMX tiles
 * for the tiles instead (the few-row product of decoding stays vdpbf16ps's), which flush as vdpbf16ps does and round in an order of their own
 * (deterministic, within the same error bound; src/cpu/matmul16.h). On Vulkan a product whose out, a or b passes the binding limit is split
 * into blocks (of batches, rows, columns and K, whatever the type; the K blocks add to out in
 * order), so its sums may round differently from the unsplit product's; a 16-bit out is never
 * split along K, and a product that would need it (a row of a stored (M, K) or of b stored
 * (N, K) past the binding limit, or a stored (K, M) or b stored (K, N) past it) fails with
 * VKA_ERROR_DEVICE_LIMIT. Errors: VKA_ERROR_INVALID_ARGUMENT (sizes;
 * a tensor of another type, a and b of different types: the message names the tensors and their
 * types; accumulate with a 16-bit out, naming out's type), VKA_ERROR_DEVICE_LIMIT (above).
 * Source: shaders/matmul.comp, src/cpu/matmul.c, matmul_fast.c, matmul16.c. */
typedef struct vka_matmul_desc {
    vka_tensor *out;        /* (batch, M, N) */
    const vka_tensor *a;    /* (batch, M, K), or (batch, K, M) if trans_a */
    const vka_tensor *b;    /* (batch, K, N), or (batch, N, K) if trans_b */
    const vka_tensor *bias; /* (N); NULL = none */
    int M, N, K;
    int batch;              /* 0 = 1 */
    bool trans_a, trans_b;
    size_t stride_a, stride_b, stride_out; /* elements between batches; 0 = packed */
    float alpha;            /* 0 = 1 */
    bool accumulate;        /* add into out instead of overwriting it */
} vka_matmul_desc;
vka_result vka_matmul(vka_context *ctx, const vka_matmul_desc *desc);
/** dbias (OC) += column sums of dout (N, OC): the bias gradient of a linear layer. */
vka_result vka_bias_backward(vka_context *ctx, vka_tensor *dbias, const vka_tensor *dout, int N,
                             int OC);

/** Masked row softmax over R rows of Tk keys (Vaswani et al. 2017, eq. 1), stable:
 *    out[r,k] = exp(scale*inp[r,k] + mask[r/mask_rows, k] - max_r) / sum_r  for unmasked k,
 *    out[r,k] = 0 for masked k.
 * causal: row r is query q = r % Tq (aligned to the last key), keys k > q + Tk - Tq are masked.
 * mask (optional, additive, -INFINITY = masked, e.g. padding) has R / mask_rows rows of Tk.
 * A row with every key masked is all zeros, never NaN. */
typedef struct vka_softmax_desc {
    vka_tensor *out;        /* (R, Tk) */
    const vka_tensor *inp;  /* (R, Tk) */
    const vka_tensor *mask; /* (R / mask_rows, Tk); NULL = none */
    int R;                  /* rows, e.g. B*NH*Tq */
    int Tq;                 /* queries per (batch, head): used by causal; 0 = R */
    int Tk;                 /* row length (keys) */
    int mask_rows;          /* consecutive rows sharing one mask row; 0 = 1 */
    float scale;            /* multiplies inp before the mask, e.g. 1/sqrt(HS); 0 = 1 */
    bool causal;
} vka_softmax_desc;
vka_result vka_softmax_forward(vka_context *ctx, const vka_softmax_desc *desc);
/** dinp (R,Tk) += scale * out * (dout - sum_k(out * dout)), out = the forward's output
 * (scale 0 = 1); masked keys (out = 0) get 0. */
vka_result vka_softmax_backward(vka_context *ctx, vka_tensor *dinp, const vka_tensor *dout,
                                const vka_tensor *out, int R, int Tk, float scale);

/** Multi-head split: qkv inp (B,T,3C) -> q, k, v (B,NH,T,HS), C = NH*HS. */
vka_result vka_permute_forward(vka_context *ctx, vka_tensor *q, vka_tensor *k, vka_tensor *v,
                               const vka_tensor *inp, int B, int T, int NH, int HS);
/** dinp (B,T,3C) += dq, dk, dv (B,NH,T,HS) put back in place. */
vka_result vka_permute_backward(vka_context *ctx, vka_tensor *dinp, const vka_tensor *dq,
                                const vka_tensor *dk, const vka_tensor *dv, int B, int T, int NH,
                                int HS);
/** Heads side by side: inp (B,NH,T,HS) -> out (B,T,C). */
vka_result vka_unpermute_forward(vka_context *ctx, vka_tensor *out, const vka_tensor *inp, int B,
                                 int T, int NH, int HS);
/** dinp (B,NH,T,HS) += dout (B,T,C) rearranged. */
vka_result vka_unpermute_backward(vka_context *ctx, vka_tensor *dinp, const vka_tensor *dout,
                                  int B, int T, int NH, int HS);

/** Causal masking in vka_attention_desc, for query t of Tq and key j of the L valid keys. */
typedef enum vka_causal {
    VKA_CAUSAL_NONE = 0,         /* bidirectional (an encoder) */
    VKA_CAUSAL_TOP_LEFT = 1,     /* key j masked when j > t: PyTorch's is_causal=True
                                  * (torch.nn.attention.bias.causal_upper_left) */
    VKA_CAUSAL_BOTTOM_RIGHT = 2, /* j > t + L - Tq: the queries are the last Tq of the L keys, as
                                  * when decoding against a KV cache (causal_lower_right) */
} vka_causal;

/**
 * Fused scaled-dot-product attention (Vaswani et al. 2017; computed as FlashAttention-2,
 * Dao 2023: key tiles with an online softmax, no Tq x Tk matrix stored). For batch b, head h,
 * query t, with L = key_lens[b] (NULL: Tk) valid keys:
 *   s[j] = scale * q[b,h,t,:] . k[b,h,j,:] + mask[(b,) t, j]
 *   s[j] = -inf for j >= L, and for causal keys (vka_causal)
 *   out[b,h,t,:] = sum_j softmax(s)[j] * v[b,h,j,:],   lse[b,h,t] = log sum_j exp(s[j])
 * With key_lens and Tq == Tk (self-attention over padded sequences; always with qkv), queries
 * t >= L are padding too: they see no key (out 0, lse -INFINITY, dq 0) and add nothing to any
 * dk, dv. Padding is never read into a sum: a key a query does not see (j >= L, causal, or a
 * -INFINITY mask entry) and a padding query enter no product (selected, never multiplied by
 * 0), so NaN or Inf there leaves every other element bitwise as with zeros there.
 * Inputs are either q (B, NH, Tq, HS) and k, v (B, NH, Tk, HS), or qkv (B, T, 3C) packed as the
 * model's qkv projection writes it (C = NH*HS, Tq = Tk = T; q, k, v NULL). A row whose keys are
 * all masked gives out = 0 and lse = -INFINITY, never NaN. Deterministic: bitwise the same run
 * to run. Any HS from 1 to VKA_ATTENTION_MAX_HS.
 * Errors: VKA_ERROR_INVALID_ARGUMENT (missing or too small tensor, both or neither of q/k/v and
 * qkv, Tq != Tk with qkv, HS out of range, bad causal value), VKA_ERROR_DEVICE_LIMIT (one
 * batch's views past the device's binding limit). key_lens are read when the graph
 * runs: one outside [0, Tk] fails vka_graph_run on either backend, naming it (Vulkan clamps
 * it while running and checks after, so nothing out of range is read). A row with a +inf score
 * (an overflow, or a +INFINITY mask entry) has no softmax: its out and lse are NaN on both
 * backends, never zeros.
 * 16-bit (the rule above vka_tensor; the backward: below): q, k, v (or qkv) and out may each
 * be float32 or the call's one 16-bit type, lse is float32. Softmax max and sum, lse and out's
 * accumulation are float32, so out and lse are bitwise the float32 op's on the widened inputs,
 * a 16-bit out rounded from it as vka_copy rounds. A KV cache in bf16 with a float32 q is the
 * decoding case. A 16-bit qkv needs an even C = NH*HS (its k and v parts begin 32-bit words).
 */
#define VKA_ATTENTION_MAX_HS 256
typedef struct vka_attention_desc {
    const vka_tensor *q;        /* (B, NH, Tq, HS), or NULL with qkv */
    const vka_tensor *k, *v;    /* (B, NH, Tk, HS), or NULL with qkv */
    const vka_tensor *qkv;      /* (B, T, 3C): q, k, v side by side per position; or NULL */
    const vka_tensor *mask;     /* additive (Tq, Tk), -INFINITY = masked; (B, Tq, Tk) with
                                 * mask_per_batch; NULL = none */
    bool mask_per_batch;
    const vka_tensor *key_lens; /* (B) int32 in [0, Tk]: keys j >= key_lens[b] are padding;
                                 * NULL = all Tk keys valid */
    int B, NH, Tq, Tk, HS;      /* with qkv: Tq = Tk = T */
    float scale;                /* multiplies q.k; 0 = 1/sqrt(HS) */
    vka_causal causal;          /* 0 = none */
    bool out_btc;               /* out is (B, Tq, C), heads side by side, instead of
                                 * (B, NH, Tq, HS) */
    vka_tensor *out;            /* forward: written; backward: the forward's out, read */
    vka_tensor *lse;            /* (B, NH, Tq) nats: forward writes it (NULL: not kept);
                                 * backward reads it (required) */
} vka_attention_desc;
vka_result vka_attention_forward(vka_context *ctx, const vka_attention_desc *desc);

/** Gradients of vka_attention_forward (FlashAttention-2 backward: probabilities recomputed from
 * lse, no Tq x Tk matrix stored, deterministic). desc is the forward's, with out and lse
 * holding what it wrote. Exact for any finite mask value: a row whose |lse| >= 256 (e.g. every
 * key masked with -1e4, -1e9 or -FLT_MAX, where float lse = m + log(l) loses log(l)) has its
 * max m and sum l recomputed, and P = exp((s - lse) - c) with c = (m - lse) + log(l), so its
 * gradients are those of the softmax of the float scores the forward used, to float rounding
 * (uniform weights over the keys: 1/L, not 1 each); other rows use exp(s - lse) unchanged.
 * Rows with lse = -INFINITY (no visible key) get zero gradients; +inf scores give NaN as in
 * the forward. delta = rowsum(dout * out) is computed from desc->out, so that out must be what
 * the forward wrote (or its 16-bit rounding: see below).
 * 16-bit (the rule above vka_tensor): q, k, v (or qkv) and out may each be float32 or the
 * call's one 16-bit type (bf16 or fp16), as the forward takes them; lse, dout and the gradients
 * dq, dk, dv (or dqkv) are float32 (gradients are summed in float32). Every 16-bit element is
 * widened exactly and the rest is the float32 op, so the gradients are bitwise those of the
 * float32 backward on the widened tensors (vka_copy of each to float32) on either backend and
 * kernel variant. A 16-bit out is read as it is: when the forward wrote a 16-bit out, delta
 * uses its rounded values, so the gradients are the float32 backward's with that rounded out,
 * not with the float32 out it was rounded from. Errors (VKA_ERROR_INVALID_ARGUMENT, naming the
 * op and the tensor) besides those above: a bf16 and fp16 mix among q, k, v, out (naming both
 * tensors), a 16-bit lse, dout, dq, dk, dv or dqkv, a 16-bit qkv of odd C. */
typedef struct vka_attention_grads {
    const vka_tensor *dout; /* laid out as desc->out */
    vka_tensor *dq;         /* WRITTEN (B, NH, Tq, HS); NULL with qkv */
    vka_tensor *dk, *dv;    /* WRITTEN (B, NH, Tk, HS); NULL with qkv */
    vka_tensor *dqkv;       /* WRITTEN (B, T, 3C) when the forward read qkv */
} vka_attention_grads;
vka_result vka_attention_backward(vka_context *ctx, const vka_attention_desc *desc,
                                  const vka_attention_grads *grads);

/** KV cache write for incremental decoding (the op vka_gpt_session records per layer): with
 * (p0, n) = pos[0], pos[1] (int32, read when the graph runs, so one graph serves every step),
 * for t < min(T, n) and p = p0 + t in [0, max_T):
 *   kcache[h, p, :] = qkv[t, C + h*HS : C + (h+1)*HS], vcache[h, p, :] = qkv[t, 2C + h*HS : ...]
 * kcache, vcache (NH, max_T, HS); qkv (T, 3C), C = NH*HS; pos (2). Other cache rows keep their
 * values; rows falling outside [0, max_T) are skipped. The caches (both of one type) and qkv
 * may each be float32 or one 16-bit type (the 16-bit rule above vka_tensor: a float32 qkv
 * element rounded into a 16-bit cache as vka_copy rounds; odd HS rows share words, none lost).
 * Errors: VKA_ERROR_INVALID_ARGUMENT (a tensor NULL or too small, caches of two types, a
 * bf16/fp16 mix), VKA_ERROR_DEVICE_LIMIT (one row past the binding limit). */
vka_result vka_kv_write(vka_context *ctx, vka_tensor *kcache, vka_tensor *vcache,
                        const vka_tensor *qkv, const vka_tensor *pos, int T, int NH, int HS,
                        int max_T);

/** Layer normalisation (Ba et al. 2016), eps 1e-5, over the last dimension:
 * out (N,C) = (inp - mean) * rstd * weight (C) + bias (C); saves mean (N) and rstd (N) =
 * 1/sqrt(var + eps), var = mean((x - mean)^2) computed in a second pass (never E[x^2]-E[x]^2).
 * out and inp may be bf16 or fp16 (the 16-bit rule above: statistics and arithmetic in
 * float32); mean, rstd, weight and bias are float32. Errors: VKA_ERROR_INVALID_ARGUMENT (a
 * tensor NULL or too small, a bf16/fp16 mix, a 16-bit mean, rstd, weight or bias),
 * VKA_ERROR_DEVICE_LIMIT (one row past the binding limit). */
vka_result vka_layernorm_forward(vka_context *ctx, vka_tensor *out, vka_tensor *mean,
                                 vka_tensor *rstd, const vka_tensor *inp,
                                 const vka_tensor *weight, const vka_tensor *bias, int N, int C);
/** dinp (N,C), dweight (C), dbias (C) += gradients from dout (N,C) (llm.c layernorm_backward),
 * given the forward's inp (N,C), weight (C), mean (N) and rstd (N). dout, inp and weight may each
 * be float32 or the call's one 16-bit type (the rule above: each widened exactly, the float32
 * op's arithmetic and order, so the gradients are the float32 op's bits on the widened inputs,
 * as llm.c's mixed precision reads its bf16 activations); mean, rstd, dinp, dweight and dbias
 * are float32 (gradients accumulate in float32). Errors: VKA_ERROR_INVALID_ARGUMENT (a tensor
 * NULL or too small, a bf16/fp16 mix, a 16-bit mean, rstd, dinp, dweight or dbias),
 * VKA_ERROR_DEVICE_LIMIT (one row past the binding limit). */
vka_result vka_layernorm_backward(vka_context *ctx, vka_tensor *dinp, vka_tensor *dweight,
                                  vka_tensor *dbias, const vka_tensor *dout,
                                  const vka_tensor *inp, const vka_tensor *weight,
                                  const vka_tensor *mean, const vka_tensor *rstd, int N, int C);

/** GELU, tanh approximation (Hendrycks & Gimpel 2016), as GPT-2:
 * out = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))); finite for every finite x. out and
 * inp may be 16-bit (the rule above). */
vka_result vka_gelu_forward(vka_context *ctx, vka_tensor *out, const vka_tensor *inp, size_t N);
/** dinp (N) += gelu'(inp) * dout; inp and dout may be 16-bit, dinp (accumulated) is float32. */
vka_result vka_gelu_backward(vka_context *ctx, vka_tensor *dinp, const vka_tensor *inp,
                             const vka_tensor *dout, size_t N);
/** out = a + b (residual connection), N elements; out, a and b may be 16-bit (the rule above:
 * the float32 sum rounded once). */
vka_result vka_residual_forward(vka_context *ctx, vka_tensor *out, const vka_tensor *a,
                                const vka_tensor *b, size_t N);
/** dst += src, N elements (residual backward). */
vka_result vka_add_inplace(vka_context *ctx, vka_tensor *dst, const vka_tensor *src, size_t N);

/** Token + position embedding (llm.c encoder_forward): out (B,T,C) = wte[tokens[b,t]] + wpe[t];
 * tokens (B,T) int32 ids < rows of wte (Vp,C); wpe (maxT,C), T <= maxT. out, wte and wpe may each
 * be float32 or the call's one 16-bit type (the rule above: each element the float32 sum of the
 * widened ones, a 16-bit out that sum rounded once; odd C rows share words, none lost), as
 * llm.c's mixed precision runs it with bf16 parameters and out. Errors:
 * VKA_ERROR_INVALID_ARGUMENT (a tensor NULL or too small, a bf16/fp16 mix, 16-bit tokens; an id
 * outside wte's rows fails the graph's run on the CPU backend and gives NaN on Vulkan),
 * VKA_ERROR_DEVICE_LIMIT (one row past the binding limit). */
vka_result vka_encoder_forward(vka_context *ctx, vka_tensor *out, const vka_tensor *tokens,
                               const vka_tensor *wte, const vka_tensor *wpe, int B, int T, int C);
/** dwte (Vp,C) += dout rows gathered by token; dwpe (maxT,C) += dout summed over b.
 * Deterministic, no float atomics: buckets (VKA_BUCKETS_SIZE(B*T) int32) must hold
 * vka_encoder_buckets() of the same tokens. */
vka_result vka_encoder_backward(vka_context *ctx, vka_tensor *dwte, vka_tensor *dwpe,
                                const vka_tensor *dout, const vka_tensor *tokens,
                                const vka_tensor *buckets, int B, int T, int C);
#define VKA_BUCKETS_SIZE(BT) (3 * (size_t)(BT) + 2)
/** Host-side grouping of the BT positions by token for vka_encoder_backward, so that each
 * token's gradient row is summed by one worker in a fixed order. buckets holds
 * VKA_BUCKETS_SIZE(BT) int32:
 *   [0]                  n, the number of buckets (distinct tokens)
 *   [1 .. BT+1]          start[j]: first index into order of bucket j (start[n] = BT)
 *   [BT+2 .. 2BT+2)      token[j] of bucket j, ascending
 *   [2BT+2 .. 3BT+2)     order: the positions b*T+t sorted by token, ascending within a token
 * Unused entries (j >= n) are 0. */
void vka_encoder_buckets(const int32_t *tokens, int BT, int32_t *buckets);

/** Cross-entropy of softmax(logits): losses (N) = logsumexp(logits[i,:V]) -
 * logits[i, targets[i]] (nats); logits (N,Vp) with V real columns, targets (N) int32 in [0, V),
 * or -1: ignored (loss 0; the backward's row is 0). Any other target fails the graph's run with
 * VKA_ERROR_INVALID_ARGUMENT naming it, on every backend. logits may be f32, bf16 or fp16 (a
 * 16-bit logit widens exactly; max, sum and loss are f32: the losses are bitwise the f32 op's on
 * the widened logits); losses and targets are 4-byte. Errors: VKA_ERROR_INVALID_ARGUMENT naming
 * the tensor for a size or type it cannot take. Math: the log-sum-exp form of llm.c's
 * crossentropy_forward. */
vka_result vka_crossentropy_forward(vka_context *ctx, vka_tensor *losses,
                                    const vka_tensor *logits, const vka_tensor *targets, int N,
                                    int V, int Vp);
/** WRITES dlogits (N,Vp) = (softmax(logits[i,:V]) - onehot(targets[i])) * dloss for j < V and 0
 * in the padding columns; dlogits may be logits (in place). dloss = 1/N for a mean loss.
 * logits and dlogits may each be f32 or the call's one 16-bit type (bf16 or fp16; in place:
 * the same type): the arithmetic is the f32 op's on the widened logits and a 16-bit dlogits is
 * its result rounded to nearest even (vka_copy's bits). Errors as vka_crossentropy_forward's,
 * and a bf16/fp16 mix naming both tensors. Math: llm.c crossentropy_softmax_backward. */
vka_result vka_crossentropy_backward(vka_context *ctx, vka_tensor *dlogits,
                                     const vka_tensor *logits, const vka_tensor *targets,
                                     float dloss, int N, int V, int Vp);
/** WRITES out[0] = mean of inp[0:N], summed in a fixed order (deterministic). */
vka_result vka_mean(vka_context *ctx, vka_tensor *out, const vka_tensor *inp, size_t N);
/** WRITES out[0] = the L2 norm of all count tensors together and out[1] = the clip scale
 * min(1, max_norm / (norm + 1e-6)) (1 when max_norm <= 0). No overflow or underflow for any
 * finite gradients (scaled sums of squares); a NaN gradient gives norm NaN, an inf one (and no
 * NaN) norm inf, and either gives clip scale 0, which vka_adamw takes as "no step". partials is
 * scratch of count * VKA_NORM_PARTIALS elements. Deterministic (fixed reduction order). */
#define VKA_NORM_PARTIALS 64
vka_result vka_grad_norm(vka_context *ctx, vka_tensor *out, vka_tensor *partials,
                         const vka_tensor *const *grads, int count, float max_norm);

/** AdamW step t >= 1 on N elements (Loshchilov & Hutter 2019; PyTorch's torch.optim.AdamW):
 *   g = grad * gscale[1]; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
 *   param -= lr * ((m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + eps) + weight_decay * param)
 * hyper (VKA_HYPER_COUNT) holds the step's scalars (written by the host before each run so a
 * recorded graph can be replayed); gscale, optional, is grad_norm's out (NULL = no scaling);
 * gscale[1] = 0 (non-finite gradients) changes nothing: no step, no weight decay. */
enum {
    VKA_HYPER_LR = 0,
    VKA_HYPER_BETA1 = 1,
    VKA_HYPER_BETA2 = 2,
    VKA_HYPER_EPS = 3,
    VKA_HYPER_BC1 = 4, /* 1 - beta1^t */
    VKA_HYPER_BC2 = 5, /* 1 - beta2^t */
    VKA_HYPER_COUNT = 8
};
vka_result vka_adamw(vka_context *ctx, vka_tensor *param, const vka_tensor *grad, vka_tensor *m,
                     vka_tensor *v, const vka_tensor *hyper, const vka_tensor *gscale, size_t N,
                     float weight_decay);

/* ---------------------------------------------------------------------------------------------
 * Tokenizer: character (byte) level, as nanoGPT's shakespeare_char, or byte-level BPE, as GPT-2
 * (llm.c's gpt2_tokenizer.bin) and vka_tokenizer_learn make it; files in llm.c's format.
 * ------------------------------------------------------------------------------------------- */
typedef struct vka_tokenizer vka_tokenizer;

typedef enum vka_tokenizer_kind {
    VKA_TOKENIZER_CHAR = 0, /* every token one distinct byte; bytes outside it are refused */
    VKA_TOKENIZER_BPE = 1,  /* byte-level BPE: all 256 single bytes plus merged byte strings */
} vka_tokenizer_kind;

/** Longest token in bytes (llm.c's file stores a token's length in one byte). */
#define VKA_TOKENIZER_MAX_TOKEN_BYTES 255
/** Most tokens a tokenizer file or vka_tokenizer_learn may have. */
#define VKA_TOKENIZER_MAX_VOCAB (1 << 20)

/**
 * Character-level vocabulary of the distinct bytes of text, sorted by byte value (token i is
 * the i-th smallest byte present). The end-of-text id stored in files is that of '\n' if
 * present, else 0. Errors: VKA_ERROR_INVALID_ARGUMENT (empty text).
 */
vka_result vka_tokenizer_create_from_text(vka_context *ctx, const char *text, size_t len,
                                          vka_tokenizer **out);
/**
 * Learn a byte-level BPE vocabulary of (at most) vocab_size tokens from text:
 *   ids 0..255 are the single bytes 0x00..0xFF; then one token per merge, in the order learned;
 *   the last id is the end-of-text token, the 13 bytes "<|endoftext|>" (vka_tokenizer_eot).
 * The text is split into pieces by GPT-2's pre-tokenizer (see vka_tokenizer_encode) and merges
 * never cross pieces. Each step merges the adjacent pair of tokens occurring most often (over
 * all pieces, with multiplicity); ties go to the pair with the smallest (left id, right id).
 * A pair whose bytes are already a token is merged into that token without a new id; pairs
 * longer than VKA_TOKENIZER_MAX_TOKEN_BYTES are never merged. Learning stops early when no
 * pair occurs twice: the vocabulary is then smaller than vocab_size (check
 * vka_tokenizer_vocab_size). A token's id is its merge rank (as GPT-2's ids are its merge
 * order), so vka_tokenizer_encode with the result applies the merges in the order learned; it
 * merges by the bytes of a pair, so where one token can be made from two different pairs it
 * may use either (tiktoken does the same).
 * Deterministic: the same text and vocab_size give the same vocabulary.
 * Errors: VKA_ERROR_INVALID_ARGUMENT (empty text; vocab_size below 257 or above
 * VKA_TOKENIZER_MAX_VOCAB), VKA_ERROR_OUT_OF_HOST_MEMORY.
 */
vka_result vka_tokenizer_learn(vka_context *ctx, const char *text, size_t len, int vocab_size,
                               vka_tokenizer **out);
/**
 * Read llm.c's tokenizer file: int32 header[256] {20240328, version 1 or 2, n, eot (version
 * 2)}, then per token a length byte (1..255) and its bytes. A file whose tokens are all single
 * distinct bytes is character level; any other is byte-level BPE and must hold each of the 256
 * single bytes as a token, no byte string twice (GPT-2's gpt2_tokenizer.bin: 50257 tokens,
 * end-of-text 50256).
 * Errors: VKA_ERROR_IO (cannot open/read), VKA_ERROR_FORMAT naming the file and the problem
 * (magic, version, token count, end-of-text id out of range, truncation, trailing bytes, an
 * empty token, a duplicate, a missing single byte).
 */
vka_result vka_tokenizer_load(vka_context *ctx, const char *path, vka_tokenizer **out);
/** Write llm.c's tokenizer file (version 2), to a temporary name then renamed.
 * Errors: VKA_ERROR_IO. */
vka_result vka_tokenizer_save(const vka_tokenizer *tok, const char *path);
/** The tokenizer's identity: 64-bit FNV-1a of the bytes of the file vka_tokenizer_save writes
 * (so a file's tokenizer keeps its id when saved again; 1 if that hash is 0). A model records
 * it (vka_gpt_set_tokenizer) in the files it is saved to; 0 for NULL. */
uint64_t vka_tokenizer_id(const vka_tokenizer *tok);
void vka_tokenizer_destroy(vka_tokenizer *tok);
/** Number of tokens V. */
int vka_tokenizer_vocab_size(const vka_tokenizer *tok);
/** VKA_TOKENIZER_CHAR or VKA_TOKENIZER_BPE. */
vka_tokenizer_kind vka_tokenizer_kind_of(const vka_tokenizer *tok);
/** The end-of-text id (as stored in files; -1 for NULL). BPE never produces it from text. */
int32_t vka_tokenizer_eot(const vka_tokenizer *tok);
/**
 * Encode len bytes of text into ids (out: capacity len, which always suffices: every token is
 * at least one byte; *n_out = tokens written, len for a character-level tokenizer).
 * Byte-level BPE encodes as GPT-2 does: the text is split into pieces by GPT-2's pattern
 *   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 * with the Unicode classes of GPT-2's reference (openai/gpt-2 compiles it with Python's
 * `regex`): \s is the White_Space property, \p{L} and \p{N} the general categories L* and N*
 * of Unicode 15.0 (utf8proc 2.8), so every code point splits as there. Then within each piece
 * the adjacent pair whose concatenation is the token with the lowest id is merged, repeatedly
 * (tiktoken's algorithm; the end-of-text token is never formed). Bytes that are not valid UTF-8
 * (RFC 3629) never match the pattern: each is a piece of its own (its single-byte token), and
 * the pattern applies to the valid stretches between them as if each were a text of its own.
 * So decode(encode(x)) == x for every byte string x.
 * Errors: VKA_ERROR_VOCABULARY (character level: the first byte not in the vocabulary and its
 * offset), VKA_ERROR_OUT_OF_HOST_MEMORY.
 */
vka_result vka_tokenizer_encode(const vka_tokenizer *tok, const char *text, size_t len,
                                int32_t *out, size_t *n_out);
/** The bytes of token id (*len set to their count), or NULL if id is out of range. A BPE token
 * may end inside a multi-byte UTF-8 character: see vka_utf8_complete for printing. */
const char *vka_tokenizer_decode(const vka_tokenizer *tok, int32_t id, size_t *len);
/**
 * For streaming decoded bytes: how many leading bytes of buf can be printed now, i.e. len less
 * a trailing incomplete (but so far valid) UTF-8 sequence of 1 to 3 bytes that the next bytes
 * may complete. Invalid bytes count as complete, so nothing is held back forever: append the
 * next token's bytes to the kept rest and ask again; at the end print what is left.
 */
size_t vka_utf8_complete(const char *buf, size_t len);

/* ---------------------------------------------------------------------------------------------
 * Data: text files and llm.c token files, one or several, split into train and validation.
 * ------------------------------------------------------------------------------------------- */
typedef struct vka_data vka_data;

/* VKA_SPLIT_ALL: every token, the training split then the validation split (what eval scores). */
typedef enum vka_split { VKA_SPLIT_TRAIN = 0, VKA_SPLIT_VAL = 1, VKA_SPLIT_ALL = 2 } vka_split;

/* llm.c's token file (dev/data/data_common.py): int32 header[256] = {20240520, 1, n, 0...},
 * then n uint16 token ids. vkattn reads n as unsigned, so a file holds up to 2^32 - 1 tokens
 * (llm.c itself reads it as int32: 2^31 - 1). */
#define VKA_TOKENS_MAGIC 20240520

typedef struct vka_data_desc {
    const char *const *paths;     /* n_paths files, concatenated in order: each a text or a token
                                     file (told apart by the magic), or "-" for standard input
                                     (read into memory; files are memory-mapped) */
    int n_paths;                  /* 0 = the built-in corpus (vka_builtin_corpus) */
    const char *const *val_paths; /* validation files, concatenated; NULL with n_val_paths 0 */
    int n_val_paths;              /* 0 = the last 10% of the tokens of paths are validation */
    const vka_tokenizer *tok;     /* encodes the texts, and bounds token files' ids (id < V);
                                     NULL = a character tokenizer of the distinct bytes of all
                                     the texts (then at least one source must be text) */
} vka_data_desc;

/**
 * Open the data: texts are mapped, checked and tokenised in pieces of about 1 MiB, each cut
 * where no piece of GPT-2's pre-tokenizer can join across (between a code point other than
 * whitespace or the apostrophe and one of another class, or next to a byte that is not UTF-8),
 * so the ids are those of encoding each whole text at once; stored as uint16 when V <= 65536
 * (VKATTN_TEXT_PIECE_BYTES=N sets the piece size, for tests). Token files are
 * mapped and read in place. Without val_paths the first 90% of all tokens are the training
 * split, the rest validation; with them, paths are training and val_paths validation.
 * Text means: no NUL byte, and at most 2% of the bytes control characters (below 0x20 other
 * than \t \n \v \f \r, or 0x7F); bytes >= 0x80 are allowed (a character vocabulary takes UTF-8 byte by byte).
 * Errors: VKA_ERROR_IO (missing/unreadable), VKA_ERROR_FORMAT (empty, not text, a token file's
 * version, or its size against its header's count), VKA_ERROR_VOCABULARY (a byte outside tok,
 * or a token file's id >= V: the message gives the file, offset and id),
 * VKA_ERROR_INVALID_ARGUMENT (only token files and no tok; a bad VKATTN_TEXT_PIECE_BYTES).
 */
vka_result vka_data_open(vka_context *ctx, const vka_data_desc *desc, vka_data **out);
/** vka_data_open of one file (path NULL = the built-in corpus) split 90/10. */
vka_result vka_data_load(vka_context *ctx, const char *path, const vka_tokenizer *tok,
                         vka_data **out);
void vka_data_destroy(vka_data *data);
/** The tokenizer the data was encoded with (owned by data, or the one passed in). */
const vka_tokenizer *vka_data_tokenizer(const vka_data *data);
/** Number of tokens of a split (0 for an unknown split or NULL data). */
size_t vka_data_num_tokens(const vka_data *data, vka_split split);
/**
 * Copy tokens [off, off + n) of a split into out (n ids).
 * Errors: VKA_ERROR_INVALID_ARGUMENT (unknown split, the range past the split's end).
 */
vka_result vka_data_read_tokens(const vka_data *data, vka_split split, size_t off, size_t n,
                                int32_t *out);
/**
 * The identity of the files the data was loaded from (for the built-in corpus, the generated
 * text): *bytes = their length in bytes, *hash = 64-bit FNV-1a over their bytes in order (paths
 * then val_paths; h = 0xCBF29CE484222325, then per byte c: h = (h ^ c) * 0x100000001B3). A
 * training state records both, so that a resumed run can tell that it was given other data.
 * Either pointer may be NULL.
 * Errors: VKA_ERROR_INVALID_ARGUMENT (data NULL; no context to hold a message).
 */
vka_result vka_data_text_id(const vka_data *data, uint64_t *bytes, uint64_t *hash);
/**
 * A batch of B random windows of T+1 tokens of a split: inputs (B, T) and targets (B, T) =
 * inputs shifted by one. The window starts are drawn from *rng_state (advanced), so a saved
 * state reproduces the same batches. Windows may span two files.
 * Errors: VKA_ERROR_INVALID_ARGUMENT (split has fewer than T+1 tokens, VKA_SPLIT_ALL).
 */
vka_result vka_data_batch(const vka_data *data, vka_split split, int B, int T,
                          uint64_t *rng_state, int32_t *inputs, int32_t *targets);
/**
 * Write n ids (each 0..65535) as an llm.c token file, to a temporary name then renamed.
 * Errors: VKA_ERROR_INVALID_ARGUMENT (an id out of range), VKA_ERROR_IO.
 */
vka_result vka_tokens_save(vka_context *ctx, const char *path, const int32_t *tokens, size_t n);
/**
 * Tokenise the text at text_path ("-" = standard input) with tok into an llm.c token file at
 * out_path, streaming: the text is read and encoded in pieces of about 1 MiB, cut as
 * vka_data_open cuts them (so the ids are those of encoding the whole text at once), so memory
 * stays bounded whatever its size (a piece grows only while no cut comes). Written to
 * out_path.tmp.<pid>, renamed when complete (nothing is left on failure). *n_tokens and
 * *n_bytes (may be NULL) receive the tokens written and the bytes read.
 * Errors: VKA_ERROR_INVALID_ARGUMENT (V > 65536: ids are uint16; a bad
 * VKATTN_TEXT_PIECE_BYTES), VKA_ERROR_FORMAT (empty, not
 * text), VKA_ERROR_VOCABULARY, VKA_ERROR_IO.
 */
vka_result vka_tokenize_file(vka_context *ctx, const vka_tokenizer *tok, const char *text_path,
                             const char *out_path, uint64_t *n_tokens, uint64_t *n_bytes);
/**
 * Write len bytes to path so that path is always either its old contents or all of the new
 * ones, as every file vkattn saves is written: the bytes go to path.tmp.<pid> (pid the
 * process's id), which is flushed and fsync'd, then renamed over path. On failure the
 * temporary file is removed and path is as it was. A crash or power loss during the write
 * leaves at worst path.tmp.<pid> behind.
 * ctx may be NULL: the temporary name then comes from libc's malloc and no message is kept;
 * with a context, its host allocator is used and vka_last_error(ctx) names the file and the
 * reason ("cannot create model.bin.tmp.123: Permission denied"). data may be NULL when len is 0.
 * Errors: VKA_ERROR_INVALID_ARGUMENT (path NULL, or data NULL with len > 0), VKA_ERROR_IO
 * (creating, writing, syncing or renaming failed), VKA_ERROR_OUT_OF_HOST_MEMORY.
 */
vka_result vka_file_write_atomic(vka_context *ctx, const char *path, const void *data, size_t len);
/**
 * The built-in training corpus: deterministic simple English stories written by a generator
 * (nothing copied), about bytes long (0 = 1 MiB). Caller frees with free().
 */
char *vka_builtin_corpus(size_t bytes, size_t *len);

/* ---------------------------------------------------------------------------------------------
 * GPT-2 model (Radford et al. 2019; layout and file format of Karpathy's llm.c).
 * ------------------------------------------------------------------------------------------- */
typedef struct vka_gpt vka_gpt;

typedef struct vka_gpt_config {
    int max_T; /* maximum sequence length (positions in wpe) */
    int V;     /* vocabulary size */
    int Vp;    /* padded vocabulary (rows of wte); 0 = V rounded up to a multiple of 128 */
    int L;     /* layers */
    int NH;    /* heads; C % NH == 0 */
    int C;     /* channels */
} vka_gpt_config;

/* Limits of a model's shape, checked by vka_gpt_create and the loaders: each of max_T, C, NH,
 * L, V and Vp is in 1 .. its limit (and beyond them, 2^40 bytes of parameters in all). */
#define VKA_GPT_MAX_T (1 << 20)  /* max_T */
#define VKA_GPT_MAX_C (1 << 16)  /* C, and so NH */
#define VKA_GPT_MAX_L (1 << 12)  /* L */
#define VKA_GPT_MAX_VP (1 << 24) /* V and Vp */

/**
 * A new model with GPT-2's initialisation: weights N(0, 0.02) from seed, biases 0, layernorm
 * weights 1. Parameters, gradients, activations and AdamW state each live in one arena.
 * Errors: VKA_ERROR_INVALID_ARGUMENT (non-positive size, C % NH != 0),
 * VKA_ERROR_DEVICE_LIMIT (a size beyond VKA_GPT_MAX_*, a tensor beyond the device's largest
 * allocation, maxMemoryAllocationSize, or the model beyond device memory: the message names the
 * tensor or arena and the sizes; tensors past maxStorageBufferRange are fine),
 * VKA_ERROR_OUT_OF_DEVICE_MEMORY.
 */
vka_result vka_gpt_create(vka_context *ctx, const vka_gpt_config *config, uint64_t seed,
                          vka_gpt **out);
/**
 * Read an llm.c GPT-2 checkpoint: int32 header[256] {20240326, 3, maxT, V, L, NH, C, Vp}, then
 * fp32 wte (Vp,C), wpe (maxT,C), ln1w (L,C), ln1b (L,C), qkvw (L,3C,C), qkvb (L,3C),
 * attprojw (L,C,C), attprojb (L,C), ln2w (L,C), ln2b (L,C), fcw (L,4C,C), fcb (L,4C),
 * fcprojw (L,C,4C), fcprojb (L,C), lnfw (C), lnfb (C); or version 5 (header word 1 = 5, llm.c's
 * bf16 checkpoint, as its train_gpt2.cu and train_gpt2.py write_model(..., "bfloat16") write
 * it): the same tensors as bf16, 2 bytes each, widened to float32 exactly on loading (the model
 * then runs in float32).
 * Errors: VKA_ERROR_IO, VKA_ERROR_FORMAT (magic, version, sizes, truncation, a NaN or infinite
 * parameter: the message says which, e.g. "model.bin: wte[1234] is NaN"; a header checksum or
 * parameter hash that does not match, or a nonzero unused header word: see vka_gpt_save),
 * VKA_ERROR_DEVICE_LIMIT, VKA_ERROR_OUT_OF_DEVICE_MEMORY.
 */
vka_result vka_gpt_load(vka_context *ctx, const char *path, vka_gpt **out);
/** Write the llm.c checkpoint (temporary name, then rename), with vkattn's trailer in header
 * words 248..255, which llm.c does not read (docs/files.md): the model's tokenizer id, a hash
 * of the parameters and a header checksum. vka_gpt_load checks them when the trailer is there;
 * llm.c's files have none and load as before. Errors: VKA_ERROR_IO. */
vka_result vka_gpt_save(vka_gpt *gpt, const char *path);
/** vka_gpt_save with the parameters as dtype: VKA_F32 (llm.c's version 3, what vka_gpt_save
 * writes) or VKA_BF16 (llm.c's version 5: each parameter rounded to the nearest bf16, ties to
 * even, 2 bytes; half the size, and what llm.c's bf16 build loads). The trailer's parameter hash
 * is of the float32 values vka_gpt_load gives back. The model in memory is unchanged (a training
 * state, vka_gpt_save_state, always keeps float32). Errors: VKA_ERROR_INVALID_ARGUMENT (dtype
 * VKA_F16 or outside the enum: llm.c has no fp16 file; a parameter beyond bf16's range, named),
 * VKA_ERROR_IO. */
vka_result vka_gpt_save_dtype(vka_gpt *gpt, const char *path, vka_dtype dtype);
/** Record tok as the tokenizer gpt belongs to (its vka_tokenizer_id goes into the model and
 * state files saved from now on); NULL forgets it. Errors: VKA_ERROR_INVALID_ARGUMENT (tok's
 * vocabulary size is not the model's V). */
vka_result vka_gpt_set_tokenizer(vka_gpt *gpt, const vka_tokenizer *tok);
/** The id of the tokenizer gpt belongs to (vka_tokenizer_id): set by vka_gpt_set_tokenizer, or
 * read from the model or state file; 0 = not known (an llm.c file, an older vkattn file). An
 * application compares it with vka_tokenizer_id of the tokenizer it means to use. */
uint64_t vka_gpt_tokenizer_id(const vka_gpt *gpt);
void vka_gpt_destroy(vka_gpt *gpt);
/** The model's configuration (Vp filled in). */
vka_gpt_config vka_gpt_get_config(const vka_gpt *gpt);

/** How the model computes attention in training, evaluation and generation. */
typedef enum vka_attention_impl {
    VKA_ATTENTION_FUSED = 0,    /* vka_attention_forward/backward on the qkv (B, T, 3C) layout:
                                 * no (B, NH, T, T) matrix, keeps the row lse (default) */
    VKA_ATTENTION_COMPOSED = 1, /* permute, q.k^T, masked softmax, att.v, unpermute, as llm.c's
                                 * CUDA code: keeps (B, NH, T, T) per layer; the reference */
} vka_attention_impl;
/** Choose the attention of gpt's passes from now on: recorded graphs and activations are
 * dropped and remade for it; parameters, gradients and AdamW state stay; a session keeps the
 * choice made when it was created. Both give the same results up to float rounding.
 * Errors: VKA_ERROR_INVALID_ARGUMENT (not a vka_attention_impl). */
vka_result vka_gpt_set_attention(vka_gpt *gpt, vka_attention_impl impl);
vka_attention_impl vka_gpt_get_attention(const vka_gpt *gpt);

/** The number format of gpt's matrix products from now on: mixed precision as PyTorch's
 * autocast (Micikevicius et al. 2018, "Mixed Precision Training") and llm.c run it.
 *  - VKA_F32 (the default): everything float32.
 *  - VKA_BF16: every linear layer's product (qkv, attention projection, fc, fc projection, and
 *    the LM head on wte) reads bf16 copies of its weight and of its input activation, and in
 *    backward of its output gradient, and accumulates in float32 (vka_matmul's bf16 products).
 *    The master weights, the gradients, AdamW's m and v, layernorm, attention, GELU, the
 *    residual stream, softmax and cross-entropy compute in float32. Stored in bf16, as autocast
 *    stores them: the layernorms' and GELU's outputs, the fc product's output, the logits (and
 *    their gradient, which cross-entropy writes over them), and with the fused attention and an
 *    even C the qkv product's output and the attention's output; the residual stream and the
 *    other gradients stay float32 (a session's single-position qkv, fc output and logits too;
 *    its KV cache is bf16). The weights' copies
 *    (2 bytes a matrix weight, device memory counted by vka_gpt_memory_bytes) are remade from
 *    the float32 weights after every AdamW step inside the step's graph, and before the next
 *    pass when the parameters were written from the host (load, vka_gpt_set_params, a state).
 *  - VKA_F16: the same with fp16 copies (IEEE binary16: 3 more bits of precision than bf16,
 *    but a range to 65504 only; an input past it becomes inf): training steps then use
 *    dynamic loss scaling by default (vka_gpt_set_loss_scale), so that small gradients keep
 *    their digits and overflowed ones skip the step.
 * Recorded graphs and activations are dropped and remade; parameters, gradients and AdamW
 * state stay; saved files are as in float32 (vka_gpt_save_dtype chooses the file's format).
 * Errors: VKA_ERROR_INVALID_ARGUMENT (not a vka_dtype; a pass of vka_gpt_*_prepare not
 * finished; sessions of gpt alive, which keep the precision they were recorded with: destroy
 * them first). */
vka_result vka_gpt_set_precision(vka_gpt *gpt, vka_dtype precision);
/** The precision of gpt's passes (VKA_F32 for NULL). */
vka_dtype vka_gpt_get_precision(const vka_gpt *gpt);

/** Dynamic loss scaling of gpt's training steps (Micikevicius et al. 2018, "Mixed Precision
 * Training"; PyTorch's torch.amp.GradScaler): each vka_gpt_train_step multiplies the loss's
 * gradient by S, so that small gradients keep their digits in 16-bit copies, and divides the
 * gradients by S again (exactly: S is a power of two) before clipping and AdamW, inside the
 * step's graph. A step whose gradients overflow (an inf or NaN gradient norm) changes no
 * parameter and no AdamW moment, does not advance vka_gpt_step, returns the non-finite norm
 * and halves S; after 2000 steps in a row without overflow S doubles (GradScaler's defaults;
 * S stays in [2^-24, 2^24]).
 * initial: 0 = the precision's default (the initial state): off for VKA_F32 and VKA_BF16,
 * whose range is float32's, and 2^16 for VKA_F16, following vka_gpt_set_precision; < 0: off;
 * else the first S, a power of two in [1, 2^24], whatever the precision. With float32 or bf16
 * a power-of-two S gives every step bit for bit as without it, absent overflow (test_gpt_mixed).
 * The scale, its count of clean steps and the skipped steps are saved in training states
 * (vka_train_state.loss_scale...), so a resumed run continues bit for bit. vka_gpt_get_grads
 * after a scaled step returns S times the gradients; vka_gpt_forward_backward is unscaled.
 * Errors: VKA_ERROR_INVALID_ARGUMENT (not a power of two in range; a pass of
 * vka_gpt_*_prepare not finished). */
vka_result vka_gpt_set_loss_scale(vka_gpt *gpt, float initial);
/** S of the next training step (1 when scaling is off, and for NULL). */
float vka_gpt_loss_scale(const vka_gpt *gpt);
/** Training steps skipped by loss scaling (overflowed gradients), counted since the model was
 * created (a loaded state's count included). */
uint64_t vka_gpt_skipped_steps(const vka_gpt *gpt);
/** Bytes of device memory gpt holds now (Vulkan: device-local; CPU: host): its parameters, and
 * the gradients, AdamW m and v and activations once a pass has needed them (activations are
 * sized for the largest B and T run so far). Not counted: host-visible staging, sessions. */
uint64_t vka_gpt_memory_bytes(const vka_gpt *gpt);
/** Number of parameters (floats) in llm.c order, padded vocabulary rows included. */
size_t vka_gpt_num_params(const vka_gpt *gpt);
/** Copy all n = vka_gpt_num_params() parameters out / in, in the checkpoint's order. */
vka_result vka_gpt_get_params(vka_gpt *gpt, float *out, size_t n);
vka_result vka_gpt_set_params(vka_gpt *gpt, const float *in, size_t n);
/** Copy out the gradients of the last vka_gpt_forward_backward / train step (same order). */
vka_result vka_gpt_get_grads(vka_gpt *gpt, float *out, size_t n);

/**
 * Forward pass on inputs (B, T) of token ids in [0, V). With targets (B, T) it sets *loss to the
 * mean cross-entropy over the B*T positions (nats); a target of -1 counts for nothing (padding:
 * the mean, here and in the gradients of _forward_backward and _train_step, is over the other
 * positions, of which there must be one). With logits non-NULL it copies the logits
 * (B, T, V) out (padding columns dropped). B*T and T <= max_T are fixed per call; activations
 * are (re)allocated when B or T grow.
 * Errors: VKA_ERROR_INVALID_ARGUMENT (T > max_T, id out of range), VKA_ERROR_DEVICE_LIMIT.
 */
vka_result vka_gpt_forward(vka_gpt *gpt, const int32_t *inputs, const int32_t *targets, int B,
                           int T, float *loss, float *logits);
/** Forward and backward: zeroes then fills the gradients; *loss as vka_gpt_forward. */
vka_result vka_gpt_forward_backward(vka_gpt *gpt, const int32_t *inputs,
                                    const int32_t *targets, int B, int T, float *loss);

/**
 * AdamW (Loshchilov & Hutter 2019, as PyTorch's torch.optim.AdamW): bias-corrected moments,
 * weight decay decoupled and applied only to 2-D weights (wte, wpe, qkvw, attprojw, fcw,
 * fcprojw), as nanoGPT does. Gradients are first scaled so their global L2 norm is at most
 * grad_clip.
 */
typedef struct vka_adamw_desc {
    float lr;           /* learning rate of this step; used as given (0 = no update) */
    float beta1;        /* 0 = 0.9 */
    float beta2;        /* 0 = 0.999 */
    float eps;          /* 0 = 1e-8 */
    float weight_decay; /* decoupled decay of 2-D weights; 0 = none */
    float grad_clip;    /* max global gradient norm; 0 = no clipping */
    /* Gradient accumulation (vka_gpt_train_step only): the step's inputs and targets hold
     * grad_accum micro-batches of B rows, (grad_accum * B, T), run one after another through
     * activations sized for B, their gradients summed, then one clip and AdamW update: the
     * update of one step on the grad_accum * B rows, up to summation order. 0 or 1 = none;
     * at most VKA_GPT_MAX_GRAD_ACCUM. */
    int grad_accum;
} vka_adamw_desc;
/* The most micro-batches one training step takes (vka_adamw_desc.grad_accum). */
#define VKA_GPT_MAX_GRAD_ACCUM 65536

/**
 * One training step recorded in one command buffer and submitted once: forward, backward,
 * gradient clipping, AdamW. The host waits once and reads back only the loss (*loss, mean over
 * B*T before the update). Optional *grad_norm receives the global norm before clipping.
 * With opt->grad_accum = N > 1, inputs and targets are (N*B, T): micro-batch k is rows
 * [k*B, (k+1)*B), so the step sees the rows a step with B*N rows would. Each micro-batch is
 * one graph (the first zeroes the gradients, the last clips and updates; each recorded once
 * per shape and reused), submitted and waited for in turn: N submissions per step. Each
 * micro-batch's loss gradient is 1 / the counted targets of all N, so the summed gradients are
 * those of the mean loss over the N*B rows; *loss is that mean (the micro-batches' losses
 * weighted by their counted targets) and *grad_norm the norm of the summed gradients. A
 * micro-batch may have all its targets -1 as long as one of the N*B rows counts. Under loss
 * scaling an overflow in any micro-batch skips the whole step. vka_gpt_times then gives the
 * last micro-batch's times.
 * Errors: as vka_gpt_forward; VKA_ERROR_INVALID_ARGUMENT also for grad_accum outside
 * 0..VKA_GPT_MAX_GRAD_ACCUM or N*B beyond INT_MAX rows.
 */
vka_result vka_gpt_train_step(vka_gpt *gpt, const int32_t *inputs, const int32_t *targets,
                              int B, int T, const vka_adamw_desc *opt, float *loss,
                              float *grad_norm);
/** Times of the model's last forward pass, loss or training step, as vka_graph_times: per-op
 * times when the context's profiling (vka_context_set_profiling) was on at that step. Profiling
 * may be switched on or off between steps of an existing model; the model records a step's
 * graph afresh for the new setting (once per setting and shape, then reused). Errors:
 * VKA_ERROR_INVALID_ARGUMENT (NULL gpt, or no step run yet). */
vka_result vka_gpt_times(vka_gpt *gpt, double *total_ms, vka_op_time *out, int cap, int *count);
/** Optimizer steps taken so far (the AdamW t). */
uint64_t vka_gpt_step(const vka_gpt *gpt);

/**
 * Mean cross-entropy over the windows of T+1 tokens starting at 0, T, 2T, ... while a whole
 * window fits (T = 0: max_T), each window scored on its T next-token predictions.
 * *loss is in nats; *windows the number scored.
 * Errors: VKA_ERROR_INVALID_ARGUMENT (fewer than T+1 tokens, T > max_T, id out of range).
 */
vka_result vka_gpt_eval(vka_gpt *gpt, const int32_t *tokens, size_t n, int T, double *loss,
                        size_t *windows);

/**
 * The attention weights of layer (0 .. L-1) for one sequence of T token ids (B = 1, T <= max_T),
 * for pictures of what the model attends to: out (NH, T, T), out[h][t][j] = the weight query t
 * of head h gives key j, softmax over j <= t of q_t . k_j / sqrt(HS); 0 for the masked keys
 * j > t (causal), so each row sums to 1 over j <= t. Computed by the composed attention path
 * (q . k^T, masked softmax) in a graph of its own after a forward pass, on either backend; it
 * allocates (and frees) scratch of about 2 NH T^2 + 6 T C floats per call, and runs the
 * activations in their training layout (all layers kept).
 * Errors: VKA_ERROR_INVALID_ARGUMENT (NULL tokens or out, layer out of range, T not in
 * 1 .. max_T, an id outside [0, V): the message names it), VKA_ERROR_DEVICE_LIMIT.
 */
vka_result vka_gpt_attention_weights(vka_gpt *gpt, const int32_t *tokens, int T, int layer,
                                     float *out);

typedef struct vka_sample_desc {
    float temperature; /* softmax temperature; 0 = greedy (argmax) */
    int top_k;         /* sample from the k most likely tokens; 0 = all */
    uint64_t seed;     /* sampling RNG seed */
    bool no_kv_cache;  /* vka_gpt_generate only: false (default) = prefill the prompt into a
                          KV cache (vka_gpt_session) and compute one position per new token;
                          true = recompute the whole context for every token (the reference
                          path, for comparison). Both give the same tokens up to float
                          rounding. */
} vka_sample_desc;

/** Called with each generated token; return false to stop early. */
typedef bool (*vka_token_fn)(void *user_data, int32_t token);

/**
 * Autoregressive sampling: continue prompt (n_prompt >= 1 ids) by up to n_new tokens, each from
 * the model's distribution at the last position. The context is every token so far while they
 * fit in max_T; a token that would make it max_T + 1 long restarts it as the last max_T/2
 * tokens plus that token (a full KV cache re-prefills its last half; see vka_gpt_session).
 * Generated ids go to out (capacity n_new, may be NULL) and to fn (may be NULL).
 * Errors: VKA_ERROR_INVALID_ARGUMENT (empty prompt, id out of range).
 */
vka_result vka_gpt_generate(vka_gpt *gpt, const int32_t *prompt, size_t n_prompt, int n_new,
                            const vka_sample_desc *sample, int32_t *out, vka_token_fn fn,
                            void *user_data);

/* ---------------------------------------------------------------------------------------------
 * Incremental decoding: a KV cache an application drives token by token.
 *
 * A vka_gpt_session holds, per layer, the keys and values of every position appended so far
 * (K and V, each (NH, max_T, HS) floats on the device: 2 * L * max_T * C * 4 bytes in all, plus
 * activations for one prefill chunk). Appending n tokens runs the model on those n positions
 * only (in chunks of prefill_chunk, or one position for a single token), each attending to the
 * cache, and computes the logits of the last of them only. A session is a child of its model:
 * destroy sessions before the model (vka_gpt_destroy of a model with live sessions logs an
 * error and waits for the last of them, as vka_context_destroy does). A session may be used
 * while the model is also used directly, but sees the model's parameters as they are when it
 * runs: after a training step its cache is stale (vka_gpt_session_reset and append again).
 *
 * Context full: when the cache holds max_T positions and another token is appended, the session
 * first re-prefills the last max_T/2 of its tokens (they become positions 0 .. max_T/2 - 1), then
 * appends the token. vka_gpt_generate's recompute path uses the same context.
 * ------------------------------------------------------------------------------------------- */
typedef struct vka_gpt_session vka_gpt_session;

typedef struct vka_gpt_session_desc {
    int max_T;         /* cache positions; 0 = the model's max_T (at most that) */
    int prefill_chunk; /* positions per prefill pass; 0 = 64 (capped at max_T) */
    uint64_t seed;     /* RNG of vka_gpt_session_sample when it is given no rng_state */
} vka_gpt_session_desc;

/** A new, empty session on gpt (desc NULL = defaults). Errors: VKA_ERROR_INVALID_ARGUMENT
 * (max_T beyond the model's, negative prefill_chunk), VKA_ERROR_DEVICE_LIMIT (the cache or
 * activations beyond the device: the message names the tensor and limit),
 * VKA_ERROR_OUT_OF_DEVICE_MEMORY. */
vka_result vka_gpt_session_create(vka_gpt *gpt, const vka_gpt_session_desc *desc,
                                  vka_gpt_session **out);
/** NULL is a no-op. */
void vka_gpt_session_destroy(vka_gpt_session *sess);
/** Append n token ids (the prompt, or one generated token; n = 0 does nothing). Appending in
 * pieces gives the same logits as appending at once, up to float rounding. Errors:
 * VKA_ERROR_INVALID_ARGUMENT (NULL tokens, an id outside [0, V): the message names it; nothing
 * is appended), or a device failure (the session is then empty, as after reset). */
vka_result vka_gpt_session_append(vka_gpt_session *sess, const int32_t *tokens, size_t n);
/** The next-token logits (V floats, padding columns dropped) after the last appended token.
 * Errors: VKA_ERROR_INVALID_ARGUMENT (V not the model's V, or nothing appended yet). */
vka_result vka_gpt_session_logits(vka_gpt_session *sess, float *out, size_t V);
/** Draw the next token from the logits as vka_gpt_generate does (sample NULL = greedy), with
 * *rng_state (advanced), or the session's own RNG (desc.seed) when rng_state is NULL. The token
 * is not appended. Errors: as vka_gpt_session_logits, a bad temperature or top_k, and
 * VKA_ERROR_NOT_FINITE when a logit is NaN or infinite (the message names the position and the
 * token). */
vka_result vka_gpt_session_sample(vka_gpt_session *sess, const vka_sample_desc *sample,
                                  uint64_t *rng_state, int32_t *token);
/** Empty the cache (the next append starts at position 0). A step prepared with
 * vka_gpt_session_prepare and not finished is dropped (its graph must not run afterwards; a
 * submission of it by vkattn is waited for). */
void vka_gpt_session_reset(vka_gpt_session *sess);

/* Model work the application runs itself (see "Embedding in an application"): *_prepare checks
 * the inputs, writes them into the model's host-visible input tensors and returns the model's
 * graph for them, which the application runs with vka_graph_run, vka_graph_submit (then
 * vka_graph_wait) or records into its command buffer with vka_graph_record; once it completed,
 * *_finish reads the results and updates the model's state (step count, cache length). The
 * graph belongs to the model: do not destroy it; it stays valid until the next _prepare on the
 * same model or session with another shape, or the model's destruction. Between _prepare and
 * _finish, make no other call on the model or session. Errors: as the blocking calls, and
 * VKA_ERROR_INVALID_ARGUMENT for _finish without _prepare, or a second _prepare before _finish. */

/** Append n tokens (1 <= n <= the session's prefill chunk, and the cache must have room: no
 * re-prefill happens here; reset it when full) as vka_gpt_session_append does. */
vka_result vka_gpt_session_prepare(vka_gpt_session *sess, const int32_t *tokens, size_t n,
                                   vka_graph **graph);
vka_result vka_gpt_session_finish(vka_gpt_session *sess);
/** Where the session keeps the next-token logits of its last step, as vka_tensor_vulkan_buffer
 * gives it: V floats at *offset in *buffer (VkBuffer, written through the pointer), so the
 * application's own commands can read them after the step completed. Owned by the session,
 * valid while it lives. Errors: VKA_ERROR_UNSUPPORTED (CPU backend). */
vka_result vka_gpt_session_logits_buffer(vka_gpt_session *sess, void *buffer /* VkBuffer * */,
                                         uint64_t *offset, uint64_t *size);
/** One training step as vka_gpt_train_step (the AdamW settings are taken at _prepare); one
 * graph, so without gradient accumulation: opt->grad_accum > 1 is VKA_ERROR_INVALID_ARGUMENT
 * here (vka_gpt_train_step runs it). */
vka_result vka_gpt_train_step_prepare(vka_gpt *gpt, const int32_t *inputs,
                                      const int32_t *targets, int B, int T,
                                      const vka_adamw_desc *opt, vka_graph **graph);
vka_result vka_gpt_train_step_finish(vka_gpt *gpt, float *loss, float *grad_norm);
/** A forward pass as vka_gpt_forward (targets may be NULL: then no loss); logits: whether
 * _finish will read every position's logits (kept on the device). */
vka_result vka_gpt_forward_prepare(vka_gpt *gpt, const int32_t *inputs, const int32_t *targets,
                                   int B, int T, bool logits, vka_graph **graph);
vka_result vka_gpt_forward_finish(vka_gpt *gpt, float *loss, float *logits);
/** The graph a _prepare handed out and its _finish not yet called: forget it (e.g. when the
 * application dropped its command buffer); the model's state is as before _prepare, except the
 * inputs written. */
void vka_gpt_cancel(vka_gpt *gpt);
/** Positions in the cache (<= max_T). */
size_t vka_gpt_session_length(const vka_gpt_session *sess);

/* ---------------------------------------------------------------------------------------------
 * Training state: everything --resume needs to continue exactly.
 * ------------------------------------------------------------------------------------------- */
/* The sizes of vka_train_state.run_kernels and .run_device, NUL included. */
#define VKA_TRAIN_RUN_KERNELS_BYTES 32
#define VKA_TRAIN_RUN_DEVICE_BYTES 256
typedef struct vka_train_state {
    uint64_t step;          /* optimizer steps done (restored into the model) */
    uint64_t rng_state;     /* batch sampler state (vka_data_batch) */
    uint64_t seed;          /* seed the run started from */
    uint64_t total_steps;   /* steps the run was asked for */
    int32_t B, T;           /* batch and context of the run (B: rows per micro-batch when
                               adamw.grad_accum > 1; a step takes B * grad_accum rows) */
    float lr, min_lr;       /* peak and final learning rate of the schedule */
    int32_t warmup_steps;   /* linear warm-up steps */
    int32_t eval_every;     /* steps between validation evaluations */
    vka_adamw_desc adamw;   /* optimizer settings (lr field unused; grad_accum recorded from
                               version 7, read as 1 from earlier files) */
    float best_val_loss;    /* lowest validation loss seen so far (NaN if none) */
    int32_t eval_windows;   /* validation windows each evaluation scores; 0 = all. Reads as -1
                               from a version-1 state file, which did not record it. */
    uint64_t text_bytes;    /* length in bytes of the text trained on (vka_data_text_id); 0 =
                               not recorded (read from a version-1 or -2 state file) */
    uint64_t text_hash;     /* 64-bit FNV-1a hash of that text (vka_data_text_id); 0 if not
                               recorded */
    int32_t eval_pending;   /* 1: the evaluation due after `step` steps was abandoned (an
                               interrupt during it); a resumed run does it before its next
                               step. 0 otherwise, and from a version-1 or -2 file. */
    /* Where the steps ran, so that a resumed run can take the same backend and kernels (the
     * losses are bit for bit those of an uninterrupted run only on the same backend, kernels
     * and device). Read from the file; vka_gpt_save_state ignores what these hold and records
     * the model's context: its backend, kernels and device at the save. */
    int32_t run_recorded;   /* 1: the three below were recorded; 0: not (a file of version 1 to
                               4: they read as 0 and "") */
    vka_backend run_backend; /* vka_context_backend */
    /* vka_context_vulkan_kernels ("gpu", "cpu", "cpu (texel loads)") or
     * vka_context_cpu_kernels ("reference", "fast (avx2+fma)", ...) */
    char run_kernels[VKA_TRAIN_RUN_KERNELS_BYTES];
    /* vka_device_info.name of the selected device (the CPU's model for the CPU backend) */
    char run_device[VKA_TRAIN_RUN_DEVICE_BYTES];
    /* The model's precision at the save (vka_gpt_set_precision: VKA_F32, VKA_BF16 or VKA_F16);
     * VKA_F32 from a file of version 1 to 5. vka_gpt_save_state records the model's, vka_gpt_load_state
     * sets the loaded model's to it, so a resumed run continues as it ran. */
    vka_dtype run_precision;
    /* Loss scaling (vka_gpt_set_loss_scale), the model's at the save, restored by
     * vka_gpt_load_state (version 6; from earlier files: the default, off for fp32): */
    int32_t loss_scaling;     /* 1 on, 0 off */
    int32_t loss_scale_default; /* 1: the precision's default, 0: set explicitly */
    float loss_scale;         /* S of the next step, a power of two; 1 when off */
    uint32_t loss_scale_good; /* steps in a row without overflow since S last changed */
    uint64_t skipped_steps;   /* steps skipped for overflowed gradients */
} vka_train_state;
/* A training state's limits (checked when it is saved and loaded): B*T*grad_accum tokens per
 * step, and total_steps. */
#define VKA_TRAIN_MAX_BT (1 << 20)
#define VKA_TRAIN_MAX_STEPS 1000000000000ull

/**
 * Write a training-state file (version 7): the model (llm.c header and parameters), AdamW m and
 * v, and *state (but its run_ fields: the backend, kernels and device of the model's context
 * and the model's precision),
 * with the trailer vka_gpt_save writes; temporary name, then rename.
 * Errors: VKA_ERROR_INVALID_ARGUMENT (a field of *state out of the range vka_gpt_load_state
 * accepts), VKA_ERROR_IO.
 */
vka_result vka_gpt_save_state(vka_gpt *gpt, const vka_train_state *state, const char *path);
/** Read a training-state file (version 7; or 6, without adamw.grad_accum: it reads as 1; or
 * 5, also without the precision and loss scaling: they read as fp32 and the default; or 4, also without the run_ fields: run_recorded reads as
 * 0; or 3, also without the trailer; or 2 or 1, which also lack text_bytes, text_hash and
 * eval_pending: they read as 0, and version 1 lacks eval_windows too: it reads as -1) into a
 * new model (m, v, step, tokenizer id, precision and loss scaling restored) and *state.
 * Errors: as vka_gpt_load (a NaN or infinity in the parameters, AdamW m or v included), and
 * VKA_ERROR_FORMAT when a checksum does not match (a damaged file) or a field is out of range
 * (T beyond maxT, B*T beyond VKA_TRAIN_MAX_BT, step past total_steps, ...), found before
 * anything is allocated. */
vka_result vka_gpt_load_state(vka_context *ctx, const char *path, vka_gpt **out,
                              vka_train_state *state);
/** Only *state from a training-state file, as vka_gpt_load_state reads it, without loading the
 * model: the header is checked as vka_gpt_load_state checks it (and the file's length), the
 * payload is not read (vka_gpt_load_state still finds a damaged one). For choosing the backend
 * (run_backend) before creating the context that loads the state. ctx only receives the error
 * message and may be NULL (then the result alone says what failed). Errors: VKA_ERROR_IO,
 * VKA_ERROR_FORMAT, VKA_ERROR_INVALID_ARGUMENT (state or path NULL, or a ctx that failed to
 * create). */
vka_result vka_train_state_read(vka_context *ctx, const char *path, vka_train_state *state);

/* ---------------------------------------------------------------------------------------------
 * Self-check: every op, and one training step, on this context's device against the CPU.
 * ------------------------------------------------------------------------------------------- */
typedef struct vka_check_row {
    const char *op;    /* "matmul_forward", "softmax_backward", "train_step", ... */
    const char *shape; /* e.g. "M=65 N=33 K=17" */
    double max_abs;    /* max |gpu - cpu| */
    double max_rel;    /* max |gpu - cpu| / max(|cpu|, 1e-6) over elements with |cpu| > tol */
    double tol;        /* absolute tolerance max_abs must not exceed: the case's bound times
                          max(1, max |cpu|) of the compared tensor (the largest, if several) */
    bool pass;
} vka_check_row;

typedef void (*vka_check_fn)(void *user_data, const vka_check_row *row);

/**
 * Run every op forward and backward, and one training step of a small model, on ctx (Vulkan)
 * and on the CPU reference with the same random data (from seed); report each to fn. The
 * 16-bit rows (op names ending in " bf16" or " f16": the ops that take 16-bit tensors, and the
 * training step in each mixed precision) also require, on each context, a 16-bit output equal
 * bit for bit to vka_copy's rounding of the float32 op's output (the 16-bit rule above
 * vka_tensor); their tolerance against the CPU adds one unit in the 16-bit last place.
 * *n_failed = rows past tolerance. Returns VKA_ERROR_MISMATCH if any failed.
 */
vka_result vka_check(vka_context *ctx, uint64_t seed, vka_check_fn fn, void *user_data,
                     int *n_failed);

#ifdef __cplusplus
}
#endif

#if defined(VKA_BUILDING) && defined(__GNUC__)
#pragma GCC visibility pop
#endif
#endif /* VKATTN_H */
