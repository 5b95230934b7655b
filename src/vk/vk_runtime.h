/* Private to the Vulkan runtime files (vk_submit.c, vk_memory.c, vk_pipeline.c, vk_commands.c,
 * vk_backend.c); op files use only vk_internal.h. Within them calls go down only: vk_backend.c
 * -> vk_commands.c -> vk_memory.c -> vk_pipeline.c -> vk_submit.c -> vk_device.c. */
#ifndef VKA_VK_RUNTIME_H
#define VKA_VK_RUNTIME_H

#include "vk/vk_internal.h"

/* An arena: chunk buffers, each with its own memory; mapped when host-visible. */
typedef struct vkv_arena {
    bool foreign;         /* one chunk over the application's VkBuffer: not ours to destroy */
    bool texel;           /* its buffers have uniform texel buffer usage (vkv_texel_ok) */
    bool texel_slack;     /* and VKV_TEXEL_SLACK bytes past each chunk's whole vec4s */
    uint64_t bytes;       /* device memory allocated for it */
    int n_chunks;
    VkBuffer *buffers;
    VkDeviceMemory *memory;
    void **mapped;        /* per chunk; NULL when not host-visible */
    size_t *chunk_elems;
    uint64_t *ids;        /* unique buffer ids (descriptor-set cache keys) */
} vkv_arena;

/* Bytes a texel arena's buffers hold past their last vec4 where the allocation limit allows,
 * and what texel_range (vk_commands.c) widens a view by: 256, a value of bits 8..15. */
#define VKV_TEXEL_SLACK 256

static inline vkv_arena *vkv_arena_of(vkb_tensor t) { return (vkv_arena *)(void *)t.arena; }

/* The bytes of chunk c's buffer: its elements (16 bytes at least), for texel arenas in whole
 * vec4 texels and the slack after them, and 16 more where that would be a power of two
 * (llvmpipe compiles a pipeline's code again for texel views of buffers of both kinds). */
static inline VkDeviceSize vkv_chunk_bytes(const vkv_arena *a, int c) {
    VkDeviceSize bytes = VKA_MAX((VkDeviceSize)a->chunk_elems[c] * 4, 16);
    if (a->texel) {
        bytes = (bytes + 15) / 16 * 16 + (a->texel_slack ? VKV_TEXEL_SLACK : 0);
        if (a->texel_slack && (bytes & (bytes - 1)) == 0) bytes += 16;
    }
    return bytes;
}

/* A byte range of one buffer touched since the last barrier. */
typedef struct vkv_access {
    uint64_t id;
    VkDeviceSize lo, hi;
    bool write;
} vkv_access;

#define VKV_MAX_TRACKED 64

/* Timestamps of a graph: queries 0 and 1 bracket the whole graph; with profiling, queries 2k+2
 * and 2k+3 bracket its k-th command, named labels[k]. */
#define VKV_PROFILE_QUERIES 4096

/* Targets (N) of a cross-entropy op of a graph, or key_lens (N = B) of an attention op,
 * checked by the host after each run. */
typedef struct vkv_target_check {
    const char *op;
    vkb_tensor targets;
    int N, V;       /* targets in [0, V) or ignored; key_lens in [0, V = Tk] */
    bool key_lens;
    int32_t *host;  /* (N) where a run's values are read to be checked (made when recorded) */
} vkv_target_check;

/* One recorded command of a graph. A graph is recorded as a list of these (the ops call
 * vkv_dispatch & co. while the model's host code runs), then played into the graph's own
 * command buffer at graph_end, and again into an application's command buffer by
 * vkv_graph_record, without timestamps there. */
typedef enum vkv_cmd_kind {
    VKV_CMD_DISPATCH,
    VKV_CMD_BARRIER, /* global memory barrier between compute / transfer work */
    VKV_CMD_FILL,
    VKV_CMD_COPY,
    VKV_CMD_STAMP,   /* timestamp query (own command buffer only) */
} vkv_cmd_kind;

typedef struct vkv_cmd {
    vkv_cmd_kind kind;
    union {
        struct {
            VkPipeline pipeline;
            VkDescriptorSet set;
            uint32_t x, y;
            uint32_t pc_size, pc_at; /* push constants: bytes [pc_at, pc_at + pc_size) of pcs */
        } dispatch;
        struct {
            VkBuffer buffer;
            VkDeviceSize offset, size;
            uint32_t data;
        } fill;
        struct {
            VkBuffer src, dst;
            VkBufferCopy region;
        } copy;
        struct {
            VkPipelineStageFlagBits stage;
            uint32_t query;
        } stamp;
    } u;
} vkv_cmd;

/* A graph: being recorded while the backend's rec points to it. */
typedef struct vkv_graph {
    VkCommandBuffer cmd;
    VkFence fence;
    vkv_cmd *cmds;           /* the recorded commands (n_cmds of cap_cmds) */
    size_t n_cmds, cap_cmds;
    unsigned char *pcs;      /* push-constant bytes of the dispatches (n_pcs of cap_pcs) */
    size_t n_pcs, cap_pcs;
    bool recorded;
    bool pending;            /* submitted, its fence not yet waited for */
    double submit_ms;        /* vka_now_ms() at the pending submission */
    bool ran;
    double host_ms;          /* submit-to-wait time of the last run */
    VkQueryPool queries;     /* NULL when the queue has no timestamps */
    uint32_t n_queries;      /* written so far (recording) / in total */
    uint32_t cap_queries;
    bool profiled;
    const char **labels;     /* (cap_queries - 2) / 2 entries when profiled */
    uint64_t *stamps;        /* results of the last run */
    vkv_target_check *checks; /* n_checks of them (cap_checks allocated) */
    int n_checks, cap_checks;
} vkv_graph;

typedef struct vkv_pipeline {
    vka_shader_id shader;
    uint32_t spec[VKV_MAX_SPEC];
    int n_spec;
    VkPipeline pipeline;
} vkv_pipeline;

/* What one binding of a descriptor set holds: bytes [offset, offset + range) of a buffer. */
typedef struct vkv_binding {
    uint64_t id; /* the buffer's unique id */
    VkDeviceSize offset, range;
    VkFormat format; /* texel views: theirs (vkv_texel_format); storage bindings: UNDEFINED */
} vkv_binding;

/* The descriptor-set key: the storage buffer bindings, then the texel buffer views (unused
 * ones: a view of the dummy arena; id 0: no texel bindings in the layout). */
#define VKV_SET_KEYS (VKV_MAX_BINDINGS + VKV_MAX_TEXELS)

/* A cached buffer view in format over bytes [offset, offset + range) of buffer id. */
typedef struct vkv_view {
    uint64_t id;
    VkDeviceSize offset, range;
    VkFormat format;
    VkBufferView view;
} vkv_view;

typedef struct vkv_set {
    vkv_binding key[VKV_SET_KEYS];
    uint64_t hash;
    VkDescriptorSet set;
    int pool; /* index in vkv_backend.pools */
} vkv_set;

/* A descriptor pool and what it has left. Vulkan 1.0 (without VK_KHR_maintenance1) forbids
 * asking a pool for more sets or descriptors than it has left (VUID-VkDescriptorSetAllocate
 * Info-descriptorSetCount-00306, -descriptorPool-00307; VK_ERROR_OUT_OF_POOL_MEMORY is 1.1),
 * so the counts decide when to open a new pool, never a failed allocation. */
typedef struct vkv_pool {
    VkDescriptorPool pool;
    uint32_t sets_left, storage_left, texel_left;
    bool refused; /* the driver refused a set although the counts allowed it (fragmentation):
                   * skipped until one of its sets is freed */
} vkv_pool;

struct vkv_backend {
    vkb_backend base;
    vkr_device *dev;
    const struct VolkDeviceTable *vk;

    /* pipelines (vk_pipeline.c) */
    VkShaderModule modules[VKA_SHADER_COUNT];
    VkDescriptorSetLayout set_layout;
    VkPipelineLayout pipeline_layout;
    VkPipelineCache pipeline_cache;
    vkv_pipeline *pipelines;
    int n_pipelines, cap_pipelines;
    vkv_pool *pools;          /* never destroyed before the backend: indices stay valid */
    int n_pools;
    vkv_set *sets;
    int n_sets, cap_sets;
    int *set_index;           /* open-addressing hash of sets by key: index + 1, 0 = empty */
    int cap_index;            /* a power of two > 2 * n_sets, or 0 */
    vkv_view *views;          /* texel buffer views (dev->texel_operands), made while recording */
    int n_views, cap_views;

    /* memory (vk_memory.c) */
    uint64_t next_buffer_id;
    uint64_t allocated_bytes; /* device memory this context holds (arenas, staging) */
    vkv_arena *dummy;         /* bound to unused binding slots */
    VkBuffer staging;
    VkDeviceMemory staging_memory;
    void *staging_mapped;
    VkDeviceSize staging_size;
    VkDeviceSize staging_bytes; /* its allocation */

    /* commands (vk_commands.c) */
    VkCommandPool pool;
    VkCommandBuffer once_cmd; /* immediate copies */
    VkFence once_fence;
    vkv_graph *rec;           /* the graph being recorded */
    vkv_access tracked[VKV_MAX_TRACKED];
    int n_tracked;
    bool profiling;           /* graphs recorded from now on time each command */
};

/* vk_submit.c */
#define VKV_ALL_WRITES (VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT)
#define VKV_ALL_ACCESS                                                                    \
    (VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_READ_BIT | \
     VK_ACCESS_TRANSFER_WRITE_BIT)
#define VKV_WORK_STAGES (VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT)
/* Record a failed Vulkan call as the backend's sticky failure (first one wins). */
void vkv_fail_vk(vkv_backend *vb, VkResult vr, const char *what);
/* One global memory barrier into cmd. */
void vkv_memory_barrier(vkv_backend *vb, VkCommandBuffer cmd, VkPipelineStageFlags src_stage,
                        VkAccessFlags src, VkPipelineStageFlags dst_stage, VkAccessFlags dst);
/* A failed vkQueueSubmit (what: of what), out of memory said as such. */
vka_result vkv_submit_failed(vkv_backend *vb, VkResult vr, const char *what);
/* The one-shot command buffer (from vb->pool, made first) and its fence; destroy frees the
 * fence (the buffer goes with the pool). */
vka_result vkv_once_init(vkv_backend *vb);
void vkv_once_destroy(vkv_backend *vb);
/* Begin the one-shot command buffer for an immediate copy; end + submit + wait. */
vka_result vkv_once_begin(vkv_backend *vb, VkCommandBuffer *cmd);
vka_result vkv_once_submit(vkv_backend *vb);

/* vk_memory.c */
vka_result vkv_arena_create(vkb_backend *be, const char *label, vkb_arena_kind kind,
                            const size_t *sizes, const char *const *names, int count,
                            vkb_tensor *tensors, vkb_arena **out);
void vkv_arena_destroy(vkb_backend *be, vkb_arena *arena);
vka_result vkv_arena_wrap(vkb_backend *be, const void *buffer, uint64_t offset, uint64_t size,
                          vkb_tensor *tensor, vkb_arena **out);
vka_result vkv_buffer_of(vkb_backend *be, vkb_tensor t, void *buffer, uint64_t *offset,
                         uint64_t *size);
vka_result vkv_write(vkb_backend *be, vkb_tensor t, size_t off, const void *src, size_t n);
vka_result vkv_read(vkb_backend *be, vkb_tensor t, size_t off, void *dst, size_t n);
void vkv_memory_destroy(vkv_backend *vb);

/* vk_pipeline.c */
vka_result vkv_pipelines_init(vkv_backend *vb);
void vkv_pipelines_destroy(vkv_backend *vb);
VkPipeline vkv_get_pipeline(vkv_backend *vb, vka_shader_id shader, const uint32_t *spec,
                            int n_spec);
/* The set binding buffers[i] as key[i] (i < VKV_MAX_BINDINGS) and, with texel bindings,
 * views[j] as key[VKV_MAX_BINDINGS + j]. */
VkDescriptorSet vkv_get_set(vkv_backend *vb, const VkBuffer *buffers, const VkBufferView *views,
                            const vkv_binding *key);
/* The view in format of bytes [offset, offset + range) of buffer buf (id), made on first use
 * and destroyed with the buffer (vkv_forget_buffers). NULL after a failure (vkb_fail). */
VkBufferView vkv_get_view(vkv_backend *vb, VkBuffer buf, uint64_t id, VkDeviceSize offset,
                          VkDeviceSize range, VkFormat format);
void vkv_forget_buffers(vkv_backend *vb, const uint64_t *ids, int n);

/* vk_commands.c */
vka_result vkv_commands_init(vkv_backend *vb);
void vkv_commands_destroy(vkv_backend *vb);
bool vkv_graph_begin(vkb_backend *be, vkb_graph **graph);
vka_result vkv_graph_end(vkb_backend *be, vkb_graph *graph);
vka_result vkv_graph_run(vkb_backend *be, vkb_graph *graph);
vka_result vkv_graph_submit(vkb_backend *be, vkb_graph *graph, const vka_submit_desc *desc);
vka_result vkv_graph_wait(vkb_backend *be, vkb_graph *graph, uint64_t timeout_ns);
vka_result vkv_graph_record(vkb_backend *be, vkb_graph *graph, void *command_buffer);
vka_result vkv_graph_check(vkb_backend *be, vkb_graph *graph);
void vkv_graph_destroy(vkb_backend *be, vkb_graph *graph);
void vkv_set_profiling(vkb_backend *be, bool on);
vka_result vkv_graph_times(vkb_backend *be, vkb_graph *graph, double *total_ms, vka_op_time *out,
                           int cap, int *count);
#endif
