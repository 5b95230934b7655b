/*
 * The Vulkan runtime (not installed): device (vk_device.c), the one-shot submission and Vulkan
 * failures (vk_submit.c), memory (vk_memory.c), pipelines and descriptor sets (vk_pipeline.c),
 * command recording (vk_commands.c) and the backend that
 * implements the ops of src/backend.h on top of them (vk_backend.c, vk_ops_*.c).
 *
 * Shader conventions (shaders/common.glsl):
 *  - set 0, bindings 0..VKV_MAX_BINDINGS-1 are storage buffers; binding i is the op's i-th
 *    tensor view (vkv_call.bind[i]) bound as its own range: from its first byte aligned down to
 *    the device's bind_align (>= minStorageBufferOffsetAlignment) to its last. The elements
 *    before the view in that range, vkv_off(vb, view) (< 64), are the first words of the push
 *    constants (a field per binding, named like the tensor: out_off, inp_off, ...), and
 *    vkv_dispatch writes them; ops never do. Whole tensors start aligned (VKB_TENSOR_ALIGN),
 *    so their vkv_off is 0.
 *  - Binding limit: no bound range may pass dev->max_binding_bytes (maxStorageBufferRange, or
 *    less for tests: vka_context_desc.max_binding_bytes / VKATTN_MAX_BINDING_BYTES). A tensor
 *    may be larger (up to an allocation); ops split their dispatches into blocks (of elements,
 *    rows, vocabulary rows, matrix tiles) whose views each hold at most vkv_bind_elems(vb)
 *    elements, and vkv_dispatch fails (naming the op) if a range is still too large. A new op
 *    that binds views of at most vkv_bind_elems elements, or only small tensors, needs nothing
 *    more: vkv_block_rows() gives the rows per block for row-wise ops.
 *  - Texel loads (CPU-type variants on devices with texel_operands, i.e. lavapipe): a shader
 *    with the line "// vka:texel-variant" is built again with VKA_TEXEL defined
 *    (VKA_SHADER_<NAME>_TEXEL). That build declares `uniform samplerBuffer` at bindings
 *    VKV_MAX_BINDINGS + j (j < VKV_MAX_TEXELS) and reads tensor vkv_call.texel[j] through it
 *    as vec4 texels (texelFetch(t, int(q)): elements 4q .. 4q + 3 of the same range as the
 *    tensor's storage binding, so the same offsets apply). llvmpipe turns a storage
 *    buffer load with lane-varying addresses into a loop over the 8 lanes with a bounds check
 *    per component, a texel fetch into one gather (Mesa 22.3: matmul 2.3x, GELU 2-3x with
 *    vec4s). The op uses the texel shader only where vkv_views_texel holds for those views
 *    (not for an application's buffers) and vkv_views_vec4 for the views it accesses as vec4s;
 *    stores stay storage buffer writes. GPUs never use these builds. A shader with the line
 *    "// vka:texel16-variant" is also built with VKA_TEXEL16 defined (VKA_SHADER_<NAME>_TEXEL16):
 *    the same with `uniform usamplerBuffer`s of VKV_TEXEL_U32X4 texels, for its 16-bit
 *    tensors (16-bit words and float bits through one kind of binding; the elementwise ops).
 *  - Hazards are tracked on the bound byte ranges, which is what synchronization validation
 *    sees.
 *  - Shapes (B, T, C, NH, HS, V, ...) and offsets are in a push-constant block defined once for
 *    GLSL and C in shaders/pc/<op>.h (see shaders/pc/push_constants.h): the shader declares it
 *    with VKA_PC_BLOCK, the op file gets the C struct (checked <= 128 bytes) whose view_off[]
 *    the dispatch fills, and passes it with VKV_PC(&pc). A new op's Vulkan side: its shaders,
 *    shaders/pc/<op>.h and src/vk/vk_ops_<op>.c (and its entry in vk_backend.c's table).
 *  - Workgroup size is specialization constant 0 (local_size_x_id = 0); tile sizes and
 *    variants are further specialization constants (ids 1, 2, ...). No subgroup size is assumed.
 *  - A dispatch is a linear count of workgroups; vkv_dispatch folds counts beyond
 *    maxComputeWorkGroupCount[0] into y, and shaders take vka_group_id() (= y * numX + x) and
 *    return early (whole workgroups) past the end of their work.
 */
#ifndef VKA_VK_INTERNAL_H
#define VKA_VK_INTERNAL_H

#include "backend.h"
#include "shader_registry.h"

#include <stdatomic.h>
#include <volk.h>

#define VKV_MAX_BINDINGS 12 /* fused attention's backward binds 10 tensors */
#define VKV_MAX_TEXELS 4    /* uniform texel buffer bindings after them (texel_operands) */
#define VKV_NO_TEXEL 0xFF   /* vkv_call.texel[j]: the dummy view */
#define VKV_MAX_SPEC 9 /* matmul.comp: 0 and 1..8 */
#define VKV_PUSH_CONSTANT_BYTES 128 /* what every device allows; shaders/pc/push_constants.h */

/* Instance-level functions, per context (volk keeps only the loader entry point globally). */
typedef struct vkr_instance_fns {
    PFN_vkDestroyInstance DestroyInstance;
    PFN_vkEnumeratePhysicalDevices EnumeratePhysicalDevices;
    PFN_vkGetPhysicalDeviceProperties GetPhysicalDeviceProperties;
    PFN_vkGetPhysicalDeviceProperties2 GetPhysicalDeviceProperties2; /* NULL before 1.1 */
    PFN_vkGetPhysicalDeviceFeatures GetPhysicalDeviceFeatures;
    PFN_vkGetPhysicalDeviceFeatures2 GetPhysicalDeviceFeatures2; /* NULL before 1.1 */
    PFN_vkGetPhysicalDeviceFormatProperties GetPhysicalDeviceFormatProperties;
    PFN_vkGetPhysicalDeviceMemoryProperties GetPhysicalDeviceMemoryProperties;
    PFN_vkGetPhysicalDeviceQueueFamilyProperties GetPhysicalDeviceQueueFamilyProperties;
    PFN_vkEnumerateDeviceExtensionProperties EnumerateDeviceExtensionProperties;
    PFN_vkCreateDevice CreateDevice;
    PFN_vkGetDeviceProcAddr GetDeviceProcAddr;
    PFN_vkCreateDebugUtilsMessengerEXT CreateDebugUtilsMessengerEXT;   /* NULL w/o validation */
    PFN_vkDestroyDebugUtilsMessengerEXT DestroyDebugUtilsMessengerEXT; /* NULL w/o validation */
} vkr_instance_fns;

/* The Vulkan side of a context: instance, chosen physical device, device, one compute queue. */
typedef struct vkr_device {
    vka_context *ctx;
    PFN_vkGetInstanceProcAddr gipa;
    VkInstance instance;
    bool own_instance, own_device;
    vkr_instance_fns vki;
    struct VolkDeviceTable vk; /* device functions of this device */
    VkDebugUtilsMessengerEXT messenger;
    const VkAllocationCallbacks *alloc; /* vka_context_desc.vk_allocator (NULL = the driver's) */
    uint32_t instance_version; /* apiVersion of the instance (ours, or vka_vulkan_env's) */
    vka_queue_lock_fn lock_queue, unlock_queue; /* vka_vulkan_env's, or NULL */
    void *queue_user_data;
    /* Test knobs (VKATTN_TEST_FAIL_ALLOC / VKATTN_TEST_FAIL_SUBMIT = n): the n-th device memory
     * allocation / queue submission of this context fails with VK_ERROR_OUT_OF_DEVICE_MEMORY,
     * as a device that ran out would; 0 = never. Counted per context. */
    uint64_t fail_alloc_at, fail_submit_at, n_allocs, n_submits;
    /* Warnings + errors from the validation layer. Atomic: on an application's instance the
     * messenger also hears the application's own calls, from its threads. */
    atomic_uint validation_messages;

    uint32_t n_phys;
    VkPhysicalDevice *phys_list;
    vka_device_info *infos; /* n_phys entries */
    uint32_t selected;

    VkPhysicalDevice phys;
    VkPhysicalDeviceProperties props;
    VkPhysicalDeviceMemoryProperties mem_props;
    VkDevice device;
    VkQueue queue;
    uint32_t queue_family;
    bool is_cpu;         /* use the CPU-type kernel variants (lavapipe; vka_kernels overrides) */
    bool texel_operands; /* CPU-type variants may also read tensors through uniform texel
                          * buffers (RGBA32F views at bindings VKV_MAX_BINDINGS + j): llvmpipe
                          * loads those with one gather instead of a loop over the lanes. Off
                          * on GPUs, and with VKATTN_TEXEL_LOADS=0 */
    bool texel_16bit;    /* and 16-bit elements as R16_UINT / R16G16B16A16_UINT /
                          * R32G32B32A32_UINT (eight a texel) texels */
    uint64_t max_binding_bytes; /* bytes one descriptor may bind: maxStorageBufferRange, or less
                                 * (vka_context_desc.max_binding_bytes) */
    VkDeviceSize bind_align;    /* binding offsets are multiples of this (a power of two >=
                                 * minStorageBufferOffsetAlignment, <= VKB_TENSOR_ALIGN * 4) */
    bool unified_memory; /* device-local memory is host-visible: no staging copies */
    bool timestamps;     /* queue family has timestamp support */
    uint32_t timestamp_valid_bits; /* of the queue family */
    /* 16-bit features enabled on `device` (vkattn's own: whatever the device supports; an
     * application's: what vka_vulkan_env says it enabled) */
    bool storage_16bit; /* storageBuffer16BitAccess */
    bool float16;       /* shaderFloat16 */
    /* The kernels with 16-bit builds use them (VKA_SHADER_<NAME>_S16, vkv_s16): storage_16bit
     * is enabled and VKATTN_16BIT_STORAGE is not 0. Else they read and write 16-bit tensors as
     * packed 32-bit words. vka_device_info.path_16bit says which. */
    bool s16_kernels;
} vkr_device;

struct vka_settings;
/* The instance, device and queue of the context's settings (its own, or the application's). */
vka_result vkr_device_create(vka_context *ctx, const struct vka_settings *s, vkr_device **out);
void vkr_device_destroy(vkr_device *dev);
/* vkQueueSubmit on the device's queue, between the application's lock/unlock callbacks when it
 * gave them (vka_vulkan_env). */
VkResult vkr_queue_submit(vkr_device *dev, const VkSubmitInfo *si, VkFence fence);

/* Map a VkResult to a vka_result and set the context's message "<what>: <VkResult name>". */
vka_result vkr_check(vka_context *ctx, VkResult vr, const char *what);
const char *vkr_result_name(VkResult vr);

/* --- The Vulkan backend ------------------------------------------------------------------- */
typedef struct vkv_backend vkv_backend;

/* One dispatch of shader over groups workgroups (linear count; see vkv_dispatch). */
typedef struct vkv_call {
    vka_shader_id shader;
    uint32_t spec[VKV_MAX_SPEC]; /* specialization constants 0..n_spec-1; [0] = workgroup size */
    int n_spec;
    vkb_tensor bind[VKV_MAX_BINDINGS]; /* tensor i -> binding i */
    bool writes[VKV_MAX_BINDINGS];     /* the dispatch writes (or read-modify-writes) tensor i */
    int n_bind;
    /* With dev->texel_operands: binding VKV_MAX_BINDINGS + j is a uniform texel buffer (texels
     * of texel_format[j]) over the same bytes as binding texel[j] (< n_texel;
     * vkv_views_texel_as must hold for that tensor), or VKV_NO_TEXEL; the other texel bindings
     * hold a dummy view. */
    uint8_t texel[VKV_MAX_TEXELS];
    int n_texel;
    uint8_t texel_format[VKV_MAX_TEXELS]; /* view j's texels (vkv_texel_format; 0: vec4s), also
                                           * for a dummy view (the shader's declared type) */
    const void *pc;                    /* push constants (VKV_PC) */
    uint32_t pc_size;                  /* bytes, <= VKV_PUSH_CONSTANT_BYTES */
    int pc_views;                      /* its first pc_views words are the views' element
                                        * offsets (view_off), which vkv_dispatch writes:
                                        * vkv_off of bind[i], 0 past n_bind (<= pc_views) */
    uint64_t groups;                   /* workgroups */
    const char *label;                 /* op name for errors and profiling */
} vkv_call;

/* vkv_call's push constants: p points to a struct made by VKA_PC_STRUCT (shaders/pc/), whose
 * view_off[] vkv_dispatch fills. */
#define VKV_PC(p) .pc = (p), .pc_size = sizeof *(p), .pc_views = (int)VKA_ARRAY_LEN((p)->view_off)

/* Record one dispatch into the graph being recorded: gets (or builds) the pipeline for
 * (shader, spec), the descriptor set for the bound buffers, inserts a barrier when a bound range
 * overlaps one written (or, for writes, touched) since the last barrier, pushes the constants and
 * dispatches. groups beyond maxComputeWorkGroupCount[0] are folded into y. Failures are sticky
 * (vkb_fail). groups == 0 records nothing. */
void vkv_dispatch(vkv_backend *vb, const vkv_call *call);

/* The build of a shader to run for a dispatch with 16-bit tensors: s16, its 16-bit-storage
 * build (VKA_SHADER_<NAME>_S16, from the line "// vka:s16-variant"), where the device uses
 * those (dev->s16_kernels), else packed, its build over 32-bit words. A dispatch with f32
 * tensors only keeps the packed build, so f32 runs the SPIR-V it always has. */
vka_shader_id vkv_s16(const vkv_backend *vb, vka_shader_id packed, vka_shader_id s16);

/* Record a vkCmdFillBuffer / vkCmdCopyBuffer with the same hazard tracking. */
void vkv_fill(vkv_backend *vb, vkb_tensor t, uint32_t bits);
void vkv_copy(vkv_backend *vb, vkb_tensor dst, vkb_tensor src);

/* Whether view t (bound as vkv_dispatch binds it) may also be read as a uniform texel buffer
 * of vec4s (vkv_call.texel): the device has texel_operands, t's buffer was made with texel
 * usage (vkattn's own arenas, not an application's), the bound range starts at the device's
 * texel alignment and, rounded up to whole vec4s, stays inside the buffer. */
bool vkv_texel_ok(const vkv_backend *vb, vkb_tensor t);

/* Elements before view t in the range vkv_dispatch binds for it (0 for whole tensors and for
 * VKB_NONE): what vkv_dispatch writes into the push constants as the view's offset (view_off,
 * shaders/pc/push_constants.h). Ops do not call it: they ask the two questions below. */
uint32_t vkv_off(const vkv_backend *vb, vkb_tensor t);

/* Whether the views call->bind[i] (bit i of views, i < n_bind) start at multiples of 4
 * elements of their bound ranges, so that a shader may read or write them as vec4s (VKB_NONE
 * passes). */
bool vkv_views_vec4(const vkv_backend *vb, const vkv_call *call, uint32_t views);

/* Whether each view call->bind[i] (bit i of views) may be read through a texel view
 * (vkv_texel_ok; false without texel_operands): the op may then take its texel build, with
 * call->texel naming those views. */
bool vkv_views_texel(const vkv_backend *vb, const vkv_call *call, uint32_t views);
/* The texels a view of vkv_call.texel may have: four floats (RGBA32F), one float (R32F), one
 * 16-bit element (R16_UINT: bf16 or fp16 bits, usamplerBuffer), four (R16G16B16A16_UINT) or
 * eight (R32G32B32A32_UINT: four 32-bit words of two each).
 * llvmpipe gathers each as it does vec4s, where a storage buffer load that is not a whole
 * aligned vec4 is a loop over the lanes (and seconds more to compile per pipeline). The 16-bit
 * ones need dev->texel_16bit. */
typedef enum vkv_texel_format {
    VKV_TEXEL_VEC4 = 0,
    VKV_TEXEL_F32,
    VKV_TEXEL_U16,
    VKV_TEXEL_U16X4,
    VKV_TEXEL_U16X8,
    VKV_TEXEL_U32X4, /* four 32-bit words (R32G32B32A32_UINT, a format every device has for
                      * texel buffers): a vec4 of floats as bits, beside 16-bit views */
} vkv_texel_format;
/* vkv_views_texel for views of the given texels. */
bool vkv_views_texel_as(const vkv_backend *vb, const vkv_call *call, uint32_t views,
                        vkv_texel_format format);

/* The most elements one bound view may hold: the binding limit less the alignment slack, a
 * multiple of bind_align / 4 (so element blocks of this size start aligned). */
size_t vkv_bind_elems(const vkv_backend *vb);

/* Rows per block for an op over `rows` rows that binds n views of per_row[i] elements per row
 * (slices of the block's rows), each within vkv_bind_elems: at least 1, at most rows. When one
 * row of some view is already too large, fails (VKA_ERROR_DEVICE_LIMIT, naming op, names[i],
 * the row's bytes and the limit) and returns 0. */
size_t vkv_block_rows(vkv_backend *vb, const char *op, size_t rows, const size_t *per_row,
                      const char *const *names, int n);

/* The view a dispatch binds for elements [e0, e0 + n) of t: f32 elements as they are; for a
 * 16-bit t the words holding them, from the word of element e0, *half (if not NULL) = 1 where
 * e0 is that word's high half (the shaders' half0 / a_half / F_HALF0 push constants). */
static inline vkb_tensor vkv_elem_view(vkb_tensor t, size_t e0, size_t n, uint32_t *half) {
    uint32_t h = t.dtype == VKA_F32 ? 0u : (uint32_t)(e0 & 1);
    if (half) *half = h;
    if (t.dtype == VKA_F32) return vkb_slice(t, e0, n);
    return vkb_slice(t, e0 / 2, (h + n + 1) / 2);
}

/* Fails like vkv_block_rows unless a view of n elements (op's `what`, bound whole) fits. */
bool vkv_fits(vkv_backend *vb, const char *op, const char *what, size_t n);
/* The same for a view of elems 16-bit elements of dtype (elems / 2 + 1 words at most), the
 * message counting its elements. */
bool vkv_fits16(vkv_backend *vb, const char *op, const char *what, size_t elems, uint8_t dtype);

/* The largest power of two <= want within the device's workgroup limits (Vulkan guarantees
 * only 128 invocations). */
uint32_t vkv_workgroup_size(const vkv_backend *vb, uint32_t want);

/* One invocation per element of n: call->spec[0] = vkv_workgroup_size(vb, want_wg), n_spec = 1,
 * groups = enough workgroups to cover n. */
void vkv_call_elems(const vkv_backend *vb, vkv_call *call, uint64_t n, uint32_t want_wg);

/* The elementwise shaders' layouts (shaders/elementwise.glsl) for an op over n elements of each
 * of call->bind[0..n_vec-1] (call->shader: the shader's plain build): on CPU-type devices, when
 * n and those views' offsets are multiples of 4, several vec4s per invocation (spec[1]), read
 * through texel views (texel_shader, texel[j] = the j-th binding in texel_mask) when every
 * binding in texel_mask passes vkv_views_texel, else through storage buffers; otherwise (GPUs,
 * misaligned views) vkv_call_elems(vb, call, n, want_wg). Implemented in vk_ops_elementwise.c. */
void vkv_call_vec4(const vkv_backend *vb, vkv_call *call, uint64_t n, int n_vec,
                   uint32_t texel_mask, vka_shader_id texel_shader, uint32_t want_wg);

/* Fail (naming op and what) unless 0 < v <= limit: the device's own bounds. Tensor sizes and
 * positive dimensions were checked in front of the backend (vkb_checked_ops, backend.h). */
bool vkv_check_dim(vkb_backend *be, const char *op, const char *what, long long v, uint64_t limit);

/* The device the backend runs on (limits, is_cpu for variant choice). */
const vkr_device *vkv_device(const vkv_backend *vb);

/* Op implementations (vk_ops_*.c), collected into the backend's vkb_ops in vk_backend.c. */
void vkv_matmul(vkb_backend *be, const vkb_matmul *mm);
void vkv_bias_backward(vkb_backend *be, vkb_tensor dbias, vkb_tensor dout, int N, int OC);
void vkv_encoder_forward(vkb_backend *be, vkb_tensor out, vkb_tensor tokens, vkb_tensor wte,
                         vkb_tensor wpe, int B, int T, int C);
void vkv_encoder_backward(vkb_backend *be, vkb_tensor dwte, vkb_tensor dwpe, vkb_tensor dout,
                          vkb_tensor tokens, vkb_tensor buckets, int B, int T, int C);
void vkv_layernorm_forward(vkb_backend *be, vkb_tensor out, vkb_tensor mean, vkb_tensor rstd,
                           vkb_tensor inp, vkb_tensor weight, vkb_tensor bias, int N, int C);
void vkv_layernorm_backward(vkb_backend *be, vkb_tensor dinp, vkb_tensor dweight,
                            vkb_tensor dbias, vkb_tensor dout, vkb_tensor inp, vkb_tensor weight,
                            vkb_tensor mean, vkb_tensor rstd, int N, int C);
void vkv_permute_forward(vkb_backend *be, vkb_tensor q, vkb_tensor k, vkb_tensor v,
                         vkb_tensor inp, int B, int T, int NH, int HS);
void vkv_permute_backward(vkb_backend *be, vkb_tensor dinp, vkb_tensor dq, vkb_tensor dk,
                          vkb_tensor dv, int B, int T, int NH, int HS);
void vkv_unpermute_forward(vkb_backend *be, vkb_tensor out, vkb_tensor inp, int B, int T, int NH,
                           int HS);
void vkv_unpermute_backward(vkb_backend *be, vkb_tensor dinp, vkb_tensor dout, int B, int T,
                            int NH, int HS);
void vkv_softmax_forward(vkb_backend *be, const vkb_softmax *sm);
void vkv_softmax_backward(vkb_backend *be, vkb_tensor dinp, vkb_tensor dout, vkb_tensor out,
                          int R, int Tk, float scale);
void vkv_gelu_forward(vkb_backend *be, vkb_tensor out, vkb_tensor inp, size_t N);
void vkv_convert(vkb_backend *be, vkb_tensor dst, vkb_tensor src, size_t n);
void vkv_gelu_backward(vkb_backend *be, vkb_tensor dinp, vkb_tensor inp, vkb_tensor dout,
                       size_t N);
void vkv_residual_forward(vkb_backend *be, vkb_tensor out, vkb_tensor a, vkb_tensor b, size_t N);
void vkv_add_inplace(vkb_backend *be, vkb_tensor dst, vkb_tensor src, size_t N);
/* The graph being recorded reads targets (N) of op: after each run (one wait for the whole
 * graph), the host checks them as the CPU backend does (vkb_check_targets) and fails the run
 * naming the first bad one; the shaders give 0 for it meanwhile. */
void vkv_graph_check_targets(vkv_backend *vb, const char *op, vkb_tensor targets, int N, int V);
/* The same for an attention op's key_lens (B), each in [0, Tk] (the shaders clamp them, so a bad
 * value reads nothing out of range; the run then fails as on the CPU backend). */
void vkv_graph_check_key_lens(vkv_backend *vb, const char *op, vkb_tensor key_lens, int B,
                              int Tk);
void vkv_crossentropy_forward(vkb_backend *be, vkb_tensor losses, vkb_tensor logits,
                              vkb_tensor targets, int N, int V, int Vp);
void vkv_crossentropy_backward(vkb_backend *be, vkb_tensor dlogits, vkb_tensor logits,
                               vkb_tensor targets, float dloss, vkb_tensor dloss_t, int N, int V,
                               int Vp);
void vkv_mean(vkb_backend *be, vkb_tensor out, vkb_tensor inp, size_t N);
void vkv_grad_norm(vkb_backend *be, vkb_tensor out, vkb_tensor partials, const vkb_tensor *grads,
                   int count, float max_norm, vkb_tensor hyper);
void vkv_adamw(vkb_backend *be, vkb_tensor param, vkb_tensor grad, vkb_tensor m, vkb_tensor v,
               vkb_tensor hyper, vkb_tensor gscale, size_t N, float weight_decay);
void vkv_kv_write(vkb_backend *be, vkb_tensor kcache, vkb_tensor vcache, vkb_tensor qkv,
                  vkb_tensor pos, int T, int NH, int HS, int max_T);
void vkv_peak_fma(vkb_backend *be, vkb_tensor out, size_t n, uint32_t iters);
void vkv_attention_forward(vkb_backend *be, const vkb_attention *at);
void vkv_attention_backward(vkb_backend *be, const vkb_attention *at);

#endif
