/*
 * Command recording: graphs (a list of commands, played into one command buffer + fence each
 * when recorded, submitted once per run with one host wait, or asynchronously, and played again
 * into an application's command buffer on request), dispatches with hazard tracking, and the
 * host checks of a graph's targets after each run (the one-shot copies are vk_submit.c's).
 *
 * Barriers: the ranges each command reads and writes since the last barrier are tracked; a
 * command that reads or writes a range written since then, or writes a range read since then,
 * gets one global memory barrier first. Independent dispatches (the three projections of a
 * backward pass, say) therefore run without barriers between them. Each graph starts with a
 * barrier against everything submitted before it and ends with one that makes its writes
 * visible to the host.
 */
#include "vk/vk_runtime.h"

#include <stdlib.h>
#include <string.h>

const vkr_device *vkv_device(const vkv_backend *vb) { return vb->dev; }

uint32_t vkv_workgroup_size(const vkv_backend *vb, uint32_t want) {
    const VkPhysicalDeviceLimits *lim = &vb->dev->props.limits;
    uint32_t most = VKA_MIN(lim->maxComputeWorkGroupInvocations, lim->maxComputeWorkGroupSize[0]);
    uint32_t wg = 1;
    while (wg <= VKA_MIN(want, most) / 2) wg *= 2; /* wg * 2 <= min(want, most), no overflow */
    return wg;
}

void vkv_call_elems(const vkv_backend *vb, vkv_call *call, uint64_t n, uint32_t want_wg) {
    uint32_t wg = vkv_workgroup_size(vb, want_wg);
    call->spec[0] = wg;
    call->n_spec = 1;
    call->groups = VKA_CEIL_DIV(n, wg);
}

bool vkv_check_dim(vkb_backend *be, const char *op, const char *what, long long v, uint64_t limit) {
    if (v > 0 && (uint64_t)v <= limit) return true;
    vkb_fail(be, VKA_ERROR_INVALID_ARGUMENT, "%s: %s = %lld must be in [1, %llu]", op, what, v,
             (unsigned long long)limit);
    return false;
}

vka_result vkv_commands_init(vkv_backend *vb) {
    VkCommandPoolCreateInfo pi = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                  .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
                                  .queueFamilyIndex = vb->dev->queue_family};
    VkResult vr = vb->vk->vkCreateCommandPool(vb->dev->device, &pi, vb->dev->alloc, &vb->pool);
    if (vr != VK_SUCCESS) return vkr_check(vb->base.ctx, vr, "vkCreateCommandPool");
    return vkv_once_init(vb);
}

void vkv_commands_destroy(vkv_backend *vb) {
    vkv_once_destroy(vb);
    if (vb->pool) vb->vk->vkDestroyCommandPool(vb->dev->device, vb->pool, vb->dev->alloc);
    vb->pool = VK_NULL_HANDLE; /* and its command buffers */
}

static vka_result finish_run(vkv_backend *vb, vkv_graph *g);

static void free_graph(vkv_backend *vb, vkv_graph *g) {
    if (!g) return;
    if (vb->rec == g) vb->rec = NULL;
    /* Our own submission may still run: wait for it (only its fence) before freeing. */
    if (g->pending) vb->vk->vkWaitForFences(vb->dev->device, 1, &g->fence, VK_TRUE, UINT64_MAX);
    vka_free(vb->base.ctx, g->cmds);
    vka_free(vb->base.ctx, g->pcs);
    if (g->cmd) vb->vk->vkFreeCommandBuffers(vb->dev->device, vb->pool, 1, &g->cmd);
    if (g->fence) vb->vk->vkDestroyFence(vb->dev->device, g->fence, vb->dev->alloc);
    if (g->queries) vb->vk->vkDestroyQueryPool(vb->dev->device, g->queries, vb->dev->alloc);
    vka_free(vb->base.ctx, g->labels);
    vka_free(vb->base.ctx, g->stamps);
    for (int i = 0; i < g->n_checks; i++) vka_free(vb->base.ctx, g->checks[i].host);
    vka_free(vb->base.ctx, g->checks);
    vka_free(vb->base.ctx, g);
}

/* Append a command to the graph being recorded; false (and the graph fails) when out of host
 * memory. */
static bool log_cmd(vkv_backend *vb, const vkv_cmd *c) {
    vkv_graph *g = vb->rec;
    if (g->n_cmds == g->cap_cmds) {
        size_t cap = g->cap_cmds ? 2 * g->cap_cmds : 64;
        vkv_cmd *cmds = vka_realloc(vb->base.ctx, g->cmds, cap * sizeof *cmds);
        if (!cmds) {
            vkb_fail(&vb->base, VKA_ERROR_OUT_OF_HOST_MEMORY, "recording a graph: out of memory");
            return false;
        }
        g->cmds = cmds;
        g->cap_cmds = cap;
    }
    g->cmds[g->n_cmds++] = *c;
    return true;
}

/* The barrier between dependent commands of a graph. */
static void log_barrier(vkv_backend *vb) { log_cmd(vb, &(vkv_cmd){.kind = VKV_CMD_BARRIER}); }

/* Write timestamp query q of the graph being recorded (when it has one and room). */
static bool stamp(vkv_backend *vb, VkPipelineStageFlagBits stage, uint32_t q) {
    vkv_graph *g = vb->rec;
    if (!g->queries || q >= g->cap_queries) return false;
    if (!log_cmd(vb, &(vkv_cmd){.kind = VKV_CMD_STAMP, .u.stamp = {stage, q}})) return false;
    if (q + 1 > g->n_queries) g->n_queries = q + 1;
    return true;
}

/* Timestamps for the whole graph, and per command when profiling (and the queue has them). */
static VkResult create_queries(vkv_backend *vb, vkv_graph *g) {
    if (!vb->dev->timestamps) return VK_SUCCESS;
    g->profiled = vb->profiling;
    g->cap_queries = g->profiled ? VKV_PROFILE_QUERIES : 2;
    if (g->profiled) {
        g->labels = vka_calloc(vb->base.ctx, (g->cap_queries - 2) / 2, sizeof *g->labels);
        if (!g->labels) return VK_ERROR_OUT_OF_HOST_MEMORY;
    }
    g->stamps = vka_calloc(vb->base.ctx, g->cap_queries, sizeof *g->stamps);
    if (!g->stamps) return VK_ERROR_OUT_OF_HOST_MEMORY;
    VkQueryPoolCreateInfo qi = {.sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO,
                                .queryType = VK_QUERY_TYPE_TIMESTAMP,
                                .queryCount = g->cap_queries};
    return vb->vk->vkCreateQueryPool(vb->dev->device, &qi, vb->dev->alloc, &g->queries);
}

/* Profiling: open the timing of the next command (labelled op). Returns its first query, or 0
 * when it is not timed. */
static uint32_t profile_open(vkv_backend *vb, const char *op) {
    vkv_graph *g = vb->rec;
    if (!g->profiled) return 0;
    uint32_t q = g->n_queries < 2 ? 2 : g->n_queries;
    if (q + 2 > g->cap_queries) return 0; /* out of queries: the rest is untimed */
    g->labels[(q - 2) / 2] = op;
    stamp(vb, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, q);
    return q;
}

/* Close the timing opened at query q, with a barrier so the next command does not overlap it. */
static void profile_close(vkv_backend *vb, uint32_t q) {
    if (!q) return;
    stamp(vb, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, q + 1);
    log_barrier(vb);
    vb->n_tracked = 0;
}

/* Play g's commands into cmd: into its own command buffer (own: with its timestamps, ordered
 * after earlier submissions and host writes, and its writes made visible to the host), or into
 * an application's (no timestamps; barriers against any earlier and later work; see
 * vka_graph_record in vkattn.h). */
static void play(vkv_backend *vb, const vkv_graph *g, VkCommandBuffer cmd, bool own) {
    const struct VolkDeviceTable *vk = vb->vk;
    if (own) {
        if (g->queries) vk->vkCmdResetQueryPool(cmd, g->queries, 0, g->cap_queries);
        vkv_memory_barrier(vb, cmd, VKV_WORK_STAGES | VK_PIPELINE_STAGE_HOST_BIT,
                       VKV_ALL_WRITES | VK_ACCESS_HOST_WRITE_BIT, VKV_WORK_STAGES, VKV_ALL_ACCESS);
    } else {
        vkv_memory_barrier(vb, cmd, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT | VK_PIPELINE_STAGE_HOST_BIT,
                       VK_ACCESS_MEMORY_WRITE_BIT | VK_ACCESS_HOST_WRITE_BIT, VKV_WORK_STAGES,
                       VKV_ALL_ACCESS);
    }
    for (size_t i = 0; i < g->n_cmds; i++) {
        const vkv_cmd *c = &g->cmds[i];
        switch (c->kind) {
        case VKV_CMD_DISPATCH:
            vk->vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, c->u.dispatch.pipeline);
            vk->vkCmdBindDescriptorSets(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, vb->pipeline_layout,
                                        0, 1, &c->u.dispatch.set, 0, NULL);
            if (c->u.dispatch.pc_size)
                vk->vkCmdPushConstants(cmd, vb->pipeline_layout, VK_SHADER_STAGE_COMPUTE_BIT, 0,
                                       c->u.dispatch.pc_size, g->pcs + c->u.dispatch.pc_at);
            vk->vkCmdDispatch(cmd, c->u.dispatch.x, c->u.dispatch.y, 1);
            break;
        case VKV_CMD_BARRIER:
            vkv_memory_barrier(vb, cmd, VKV_WORK_STAGES, VKV_ALL_WRITES, VKV_WORK_STAGES, VKV_ALL_ACCESS);
            break;
        case VKV_CMD_FILL:
            vk->vkCmdFillBuffer(cmd, c->u.fill.buffer, c->u.fill.offset, c->u.fill.size,
                                c->u.fill.data);
            break;
        case VKV_CMD_COPY:
            vk->vkCmdCopyBuffer(cmd, c->u.copy.src, c->u.copy.dst, 1, &c->u.copy.region);
            break;
        case VKV_CMD_STAMP:
            if (own) vk->vkCmdWriteTimestamp(cmd, c->u.stamp.stage, g->queries, c->u.stamp.query);
            break;
        }
    }
    if (own)
        vkv_memory_barrier(vb, cmd, VKV_WORK_STAGES, VKV_ALL_WRITES, VK_PIPELINE_STAGE_HOST_BIT,
                       VK_ACCESS_HOST_READ_BIT);
    else
        vkv_memory_barrier(vb, cmd, VKV_WORK_STAGES, VKV_ALL_WRITES,
                       VK_PIPELINE_STAGE_ALL_COMMANDS_BIT | VK_PIPELINE_STAGE_HOST_BIT,
                       VK_ACCESS_MEMORY_READ_BIT | VK_ACCESS_MEMORY_WRITE_BIT |
                           VK_ACCESS_HOST_READ_BIT);
}

bool vkv_graph_begin(vkb_backend *be, vkb_graph **graph) {
    vkv_backend *vb = (vkv_backend *)be;
    if (*graph) return false;
    be->status = VKA_SUCCESS;
    vb->rec = NULL;
    vb->n_tracked = 0;
    vkv_graph *g = vka_calloc(vb->base.ctx, 1, sizeof *g);
    if (!g) {
        vkb_fail(be, VKA_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
        return true;
    }
    VkDevice d = vb->dev->device;
    VkCommandBufferAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                      .commandPool = vb->pool,
                                      .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                      .commandBufferCount = 1};
    VkFenceCreateInfo fi = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    VkResult vr = vb->vk->vkAllocateCommandBuffers(d, &ai, &g->cmd);
    if (vr == VK_SUCCESS) vr = vb->vk->vkCreateFence(d, &fi, vb->dev->alloc, &g->fence);
    if (vr == VK_SUCCESS) vr = create_queries(vb, g);
    if (vr != VK_SUCCESS) {
        vkv_fail_vk(vb, vr, "starting a graph");
        free_graph(vb, g);
        return true;
    }
    vb->rec = g;
    stamp(vb, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, 0);
    *graph = (vkb_graph *)(void *)g;
    return true;
}

vka_result vkv_graph_end(vkb_backend *be, vkb_graph *graph) {
    vkv_backend *vb = (vkv_backend *)be;
    vkv_graph *g = (vkv_graph *)(void *)graph;
    if (!g) {
        if (be->status == VKA_SUCCESS)
            vkb_fail(be, VKA_ERROR_INVALID_ARGUMENT, "graph_end without a graph");
        return be->status;
    }
    if (vb->rec != g) { /* ended already, or another graph was begun since */
        if (be->status == VKA_SUCCESS)
            vkb_fail(be, VKA_ERROR_INVALID_ARGUMENT, "graph_end: not recording");
        return be->status;
    }
    stamp(vb, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, 1);
    vb->rec = NULL;
    if (be->status == VKA_SUCCESS) {
        VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
        VkResult vr = vb->vk->vkBeginCommandBuffer(g->cmd, &bi);
        if (vr == VK_SUCCESS) {
            play(vb, g, g->cmd, true);
            vr = vb->vk->vkEndCommandBuffer(g->cmd);
        }
        if (vr != VK_SUCCESS) vkv_fail_vk(vb, vr, "recording a graph's command buffer");
    }
    g->recorded = be->status == VKA_SUCCESS;
    return be->status;
}

static vka_result check_targets(vkv_backend *vb, const vkv_graph *g);

static vka_result not_recorded(vkb_backend *be, const char *fn) {
    return vka_set_error(be->ctx, VKA_ERROR_INVALID_ARGUMENT,
                         "%s: the graph was not recorded successfully", fn);
}

vka_result vkv_graph_submit(vkb_backend *be, vkb_graph *graph, const vka_submit_desc *desc) {
    vkv_backend *vb = (vkv_backend *)be;
    vkv_graph *g = (vkv_graph *)(void *)graph;
    if (!g || !g->recorded) return not_recorded(be, "graph submit");
    if (g->pending)
        return vka_set_error(be->ctx, VKA_ERROR_INVALID_ARGUMENT,
                             "vka_graph_run / vka_graph_submit: the graph's last submission is "
                             "still pending (wait for it with vka_graph_wait first)");
    vka_submit_desc d = desc ? *desc : (vka_submit_desc){0};
    if ((d.wait_count && !d.wait_semaphores) || (d.signal_count && !d.signal_semaphores))
        return vka_set_error(be->ctx, VKA_ERROR_INVALID_ARGUMENT,
                             "graph submit: wait_count = %u / signal_count = %u with a NULL "
                             "semaphore array", d.wait_count, d.signal_count);
    enum { STAGES_ON_STACK = 16 };
    VkPipelineStageFlags stack_stages[STAGES_ON_STACK], *stages = stack_stages;
    if (!d.wait_stages && d.wait_count > STAGES_ON_STACK) {
        stages = vka_malloc(vb->base.ctx, d.wait_count * sizeof *stages);
        if (!stages)
            return vka_set_error(be->ctx, VKA_ERROR_OUT_OF_HOST_MEMORY, "graph submit: out of memory");
    }
    if (!d.wait_stages)
        for (uint32_t i = 0; i < d.wait_count; i++) stages[i] = VK_PIPELINE_STAGE_ALL_COMMANDS_BIT;
    VkTimelineSemaphoreSubmitInfo ti = {
        .sType = VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO,
        .waitSemaphoreValueCount = d.wait_values ? d.wait_count : 0,
        .pWaitSemaphoreValues = d.wait_values,
        .signalSemaphoreValueCount = d.signal_values ? d.signal_count : 0,
        .pSignalSemaphoreValues = d.signal_values};
    VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
                       .pNext = d.wait_values || d.signal_values ? &ti : NULL,
                       .waitSemaphoreCount = d.wait_count,
                       .pWaitSemaphores = (const VkSemaphore *)d.wait_semaphores,
                       .pWaitDstStageMask = d.wait_stages ? d.wait_stages : stages,
                       .commandBufferCount = 1,
                       .pCommandBuffers = &g->cmd,
                       .signalSemaphoreCount = d.signal_count,
                       .pSignalSemaphores = (const VkSemaphore *)d.signal_semaphores};
    g->submit_ms = vka_now_ms();
    VkResult vr = vkr_queue_submit(vb->dev, &si, g->fence);
    if (stages != stack_stages) vka_free(vb->base.ctx, stages);
    if (vr != VK_SUCCESS) return vkv_submit_failed(vb, vr, "a graph");
    g->pending = true;
    return VKA_SUCCESS;
}

vka_result vkv_graph_wait(vkb_backend *be, vkb_graph *graph, uint64_t timeout_ns) {
    vkv_backend *vb = (vkv_backend *)be;
    vkv_graph *g = (vkv_graph *)(void *)graph;
    if (!g || !g->recorded) return not_recorded(be, "graph wait");
    if (!g->pending) return VKA_SUCCESS;
    VkResult vr = vb->vk->vkWaitForFences(vb->dev->device, 1, &g->fence, VK_TRUE, timeout_ns);
    if (vr == VK_TIMEOUT) return VKA_TIMEOUT;
    if (vr != VK_SUCCESS) return vkr_check(be->ctx, vr, "vkWaitForFences");
    g->host_ms = vka_now_ms() - g->submit_ms;
    g->pending = false;
    vr = vb->vk->vkResetFences(vb->dev->device, 1, &g->fence);
    if (vr != VK_SUCCESS) return vkr_check(be->ctx, vr, "vkResetFences");
    return finish_run(vb, g);
}

vka_result vkv_graph_run(vkb_backend *be, vkb_graph *graph) {
    vka_result r = vkv_graph_submit(be, graph, NULL);
    return r == VKA_SUCCESS ? vkv_graph_wait(be, graph, UINT64_MAX) : r;
}

vka_result vkv_graph_record(vkb_backend *be, vkb_graph *graph, void *command_buffer) {
    vkv_backend *vb = (vkv_backend *)be;
    vkv_graph *g = (vkv_graph *)(void *)graph;
    if (!g || !g->recorded) return not_recorded(be, "vka_graph_record");
    if (!command_buffer)
        return vka_set_error(be->ctx, VKA_ERROR_INVALID_ARGUMENT,
                             "vka_graph_record: command_buffer is NULL");
    play(vb, g, (VkCommandBuffer)command_buffer, false);
    return VKA_SUCCESS;
}

static vka_result check_targets(vkv_backend *vb, const vkv_graph *g);

vka_result vkv_graph_check(vkb_backend *be, vkb_graph *graph) {
    vkv_graph *g = (vkv_graph *)(void *)graph;
    if (!g || !g->recorded) return not_recorded(be, "vka_graph_check");
    return check_targets((vkv_backend *)be, g);
}

/* After a run completed: its timestamps, then the host checks. */
static vka_result finish_run(vkv_backend *vb, vkv_graph *g) {
    g->ran = true;
    if (g->queries && g->n_queries) {
        VkResult vr = vb->vk->vkGetQueryPoolResults(
            vb->dev->device, g->queries, 0, g->n_queries, g->n_queries * sizeof *g->stamps,
            g->stamps, sizeof *g->stamps, VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT);
        if (vr != VK_SUCCESS) return vkr_check(vb->base.ctx, vr, "vkGetQueryPoolResults");
    }
    return check_targets(vb, g);
}

/* Register a host check of t (N int32) for after each run of the graph being recorded. */
static void add_check(vkv_backend *vb, const char *op, vkb_tensor t, int N, int V, bool key_lens) {
    vkv_graph *g = vb->rec;
    if (!g || vb->base.status != VKA_SUCCESS) return;
    if (g->n_checks == g->cap_checks) {
        int cap = g->cap_checks ? 2 * g->cap_checks : 8;
        vkv_target_check *c = vka_realloc(vb->base.ctx, g->checks, (size_t)cap * sizeof *c);
        if (!c) {
            vkb_fail(&vb->base, VKA_ERROR_OUT_OF_HOST_MEMORY, "%s: out of memory", op);
            return;
        }
        g->checks = c;
        g->cap_checks = cap;
    }
    int32_t *host = vka_malloc(vb->base.ctx, (size_t)N * sizeof *host);
    if (!host) {
        vkb_fail(&vb->base, VKA_ERROR_OUT_OF_HOST_MEMORY, "%s: out of memory", op);
        return;
    }
    g->checks[g->n_checks++] = (vkv_target_check){op, t, N, V, key_lens, host};
}

void vkv_graph_check_targets(vkv_backend *vb, const char *op, vkb_tensor targets, int N, int V) {
    add_check(vb, op, targets, N, V, false);
}

void vkv_graph_check_key_lens(vkv_backend *vb, const char *op, vkb_tensor key_lens, int B,
                              int Tk) {
    add_check(vb, op, key_lens, B, Tk, true);
}

/* The checks vkv_graph_check_targets registered, in recording order. */
static vka_result check_targets(vkv_backend *vb, const vkv_graph *g) {
    vka_result r = VKA_SUCCESS;
    for (int i = 0; r == VKA_SUCCESS && i < g->n_checks; i++) {
        const vkv_target_check *c = &g->checks[i];
        int32_t *t = c->host;
        r = vkv_read(&vb->base, c->targets, 0, t, (size_t)c->N);
        if (r == VKA_SUCCESS)
            r = c->key_lens ? vkb_check_key_lens(vb->base.ctx, c->op, t, c->N, c->V)
                            : vkb_check_targets(vb->base.ctx, c->op, t, (size_t)c->N, c->V);
    }
    return r;
}

/* Milliseconds between timestamps a and b of the last run (wrapping at the valid bits). */
static double stamp_ms(const vkv_backend *vb, const vkv_graph *g, uint32_t a, uint32_t b) {
    uint32_t bits = vb->dev->timestamp_valid_bits;
    uint64_t mask = bits >= 64 ? ~0ull : (1ull << bits) - 1;
    uint64_t ticks = (g->stamps[b] - g->stamps[a]) & mask;
    return (double)ticks * vb->dev->props.limits.timestampPeriod * 1e-6;
}

vka_result vkv_graph_times(vkb_backend *be, vkb_graph *graph, double *total_ms, vka_op_time *out,
                           int cap, int *count) {
    vkv_backend *vb = (vkv_backend *)be;
    vkv_graph *g = (vkv_graph *)(void *)graph;
    if (!g || !g->ran)
        return vka_set_error(be->ctx, VKA_ERROR_INVALID_ARGUMENT, "graph times: the graph has not run");
    if (total_ms) *total_ms = g->queries && g->n_queries >= 2 ? stamp_ms(vb, g, 0, 1) : g->host_ms;
    int n = 0;
    for (uint32_t q = 2; g->profiled && q + 1 < g->n_queries; q += 2)
        vkb_op_time_add(out, out ? cap : 0, &n, g->labels[(q - 2) / 2], stamp_ms(vb, g, q, q + 1));
    if (count) *count = n;
    return VKA_SUCCESS;
}

void vkv_set_profiling(vkb_backend *be, bool on) { ((vkv_backend *)be)->profiling = on; }

void vkv_graph_destroy(vkb_backend *be, vkb_graph *graph) {
    vkv_graph *g = (vkv_graph *)(void *)graph;
    if (!g) return;
    free_graph((vkv_backend *)be, g);
}

/* True when the op may record: a graph is open and nothing failed. */
static bool can_record(vkv_backend *vb, const char *label) {
    if (vb->base.status != VKA_SUCCESS) return false;
    if (!vb->rec) {
        vkb_fail(&vb->base, VKA_ERROR_INVALID_ARGUMENT, "%s: called outside a graph", label);
        return false;
    }
    return true;
}

/* Barrier first if [lo, hi) of buffer id conflicts with what was touched since the last one. */
static bool conflicts(const vkv_backend *vb, uint64_t id, VkDeviceSize lo, VkDeviceSize hi,
                      bool write) {
    for (int i = 0; i < vb->n_tracked; i++) {
        const vkv_access *a = &vb->tracked[i];
        if (a->id == id && a->lo < hi && lo < a->hi && (a->write || write)) return true;
    }
    return false;
}

/* Track accesses[0..n); emits the barrier they need. */
static void track(vkv_backend *vb, const vkv_access *acc, int n) {
    bool need = vb->n_tracked + n > VKV_MAX_TRACKED;
    for (int i = 0; i < n && !need; i++) need = conflicts(vb, acc[i].id, acc[i].lo, acc[i].hi, acc[i].write);
    if (need) {
        log_barrier(vb);
        vb->n_tracked = 0;
    }
    for (int i = 0; i < n; i++) vb->tracked[vb->n_tracked++] = acc[i];
}

static vkv_access access_of(vkb_tensor t, bool write) {
    vkv_arena *a = vkv_arena_of(t);
    return (vkv_access){.id = a->ids[t.chunk],
                        .lo = (VkDeviceSize)t.offset * 4,
                        .hi = ((VkDeviceSize)t.offset + t.n) * 4,
                        .write = write};
}

/* Where the bound range of t starts: its first byte aligned down to bind_align. */
static VkDeviceSize bind_start(const vkv_backend *vb, vkb_tensor t) {
    return (VkDeviceSize)t.offset * 4 / vb->dev->bind_align * vb->dev->bind_align;
}

/* Each vkv_texel_format's view format, bytes per texel, and the format of the dummy view an
 * unused binding of that declared kind gets (float or unsigned integer; both formats every
 * device supports as uniform texel buffers). */
static const struct {
    VkFormat format;
    VkDeviceSize unit;
    VkFormat dummy;
} texel_formats[] = {
    [VKV_TEXEL_VEC4] = {VK_FORMAT_R32G32B32A32_SFLOAT, 16, VK_FORMAT_R32G32B32A32_SFLOAT},
    [VKV_TEXEL_F32] = {VK_FORMAT_R32_SFLOAT, 4, VK_FORMAT_R32G32B32A32_SFLOAT},
    [VKV_TEXEL_U16] = {VK_FORMAT_R16_UINT, 2, VK_FORMAT_R32_UINT},
    [VKV_TEXEL_U16X4] = {VK_FORMAT_R16G16B16A16_UINT, 8, VK_FORMAT_R32_UINT},
    [VKV_TEXEL_U16X8] = {VK_FORMAT_R32G32B32A32_UINT, 16, VK_FORMAT_R32_UINT},
    [VKV_TEXEL_U32X4] = {VK_FORMAT_R32G32B32A32_UINT, 16, VK_FORMAT_R32_UINT},
};
static VkDeviceSize texel_unit(vkv_texel_format f) { return texel_formats[f].unit; }

/* The bytes of t's chunk a texel view may cover: its buffer. */
static VkDeviceSize texel_chunk_bytes(vkb_tensor t) {
    return vkv_chunk_bytes(vkv_arena_of(t), (int)t.chunk);
}

/* The bytes a texel view of view t covers: its bound range rounded up to whole texels, and
 * then, where the buffer has room, VKV_TEXEL_SLACK (256) bytes more if bits 8..15 of that
 * size are all zero.
 * llvmpipe (Mesa 22.3) keys the code it compiles for a pipeline on those bits of each texel
 * view's size (its sampler key reads a buffer view's size as a texture's last mip level, a
 * union's other member): without this, a pipeline's first dispatch with views of both kinds
 * costs another compile, seconds each, whenever a tensor's byte size crosses such a value
 * (a K = 32 and a K = 128 product of 256 rows). A view a little longer than its tensor reads
 * nothing more (shaders index within their tensors) and is tracked to its end like the
 * storage range. */
static VkDeviceSize texel_range(const vkv_backend *vb, vkb_tensor t, VkDeviceSize unit) {
    VkDeviceSize lo = bind_start(vb, t), hi = ((VkDeviceSize)t.offset + t.n) * 4;
    VkDeviceSize bytes = (hi - lo + unit - 1) / unit * unit;
    if ((bytes >> 8 & 0xff) == 0 && lo + bytes + VKV_TEXEL_SLACK <= texel_chunk_bytes(t) &&
        (bytes + VKV_TEXEL_SLACK) / unit <= vb->dev->props.limits.maxTexelBufferElements)
        bytes += VKV_TEXEL_SLACK;
    return bytes;
}

/* Whether t may be read through a texel view of unit-byte texels (texel_unit). */
static bool texel_fits(const vkv_backend *vb, vkb_tensor t, VkDeviceSize unit) {
    const vkr_device *dev = vb->dev;
    if (!dev->texel_operands || !t.arena || t.n == 0) return false;
    const vkv_arena *a = vkv_arena_of(t);
    if (!a->texel) return false;
    VkDeviceSize lo = bind_start(vb, t), range = texel_range(vb, t, unit);
    return lo % dev->props.limits.minTexelBufferOffsetAlignment == 0 &&
           lo + range <= texel_chunk_bytes(t) &&
           range / unit <= dev->props.limits.maxTexelBufferElements;
}

bool vkv_texel_ok(const vkv_backend *vb, vkb_tensor t) { return texel_fits(vb, t, 16); }

uint32_t vkv_off(const vkv_backend *vb, vkb_tensor t) {
    if (!t.arena) return 0;
    return (uint32_t)(((VkDeviceSize)t.offset * 4 - bind_start(vb, t)) / 4);
}

bool vkv_views_vec4(const vkv_backend *vb, const vkv_call *call, uint32_t views) {
    for (int i = 0; i < call->n_bind; i++)
        if ((views >> i & 1) && vkv_off(vb, call->bind[i]) % 4) return false;
    return true;
}

bool vkv_views_texel(const vkv_backend *vb, const vkv_call *call, uint32_t views) {
    return vkv_views_texel_as(vb, call, views, VKV_TEXEL_VEC4);
}

bool vkv_views_texel_as(const vkv_backend *vb, const vkv_call *call, uint32_t views,
                        vkv_texel_format format) {
    if (!vb->dev->texel_operands) return false;
    if (format >= VKV_TEXEL_U16 && format <= VKV_TEXEL_U16X8 && !vb->dev->texel_16bit)
        return false;
    for (int i = 0; i < call->n_bind; i++)
        if ((views >> i & 1) && !texel_fits(vb, call->bind[i], texel_unit(format))) return false;
    return true;
}

size_t vkv_bind_elems(const vkv_backend *vb) {
    return (size_t)((vb->dev->max_binding_bytes - vb->dev->bind_align) / vb->dev->bind_align *
                    vb->dev->bind_align / 4);
}

static void fail_row(vkv_backend *vb, const char *op, const char *what, size_t n, const char *unit) {
    vkb_fail(&vb->base, VKA_ERROR_DEVICE_LIMIT,
             "%s: %s%s: %zu elements (%.1f KiB), more than this device's binding limit of "
             "%llu bytes (maxStorageBufferRange or VKATTN_MAX_BINDING_BYTES)", op, unit, what, n,
             (double)n * 4 / 1024, (unsigned long long)vb->dev->max_binding_bytes);
}

size_t vkv_block_rows(vkv_backend *vb, const char *op, size_t rows, const size_t *per_row,
                      const char *const *names, int n) {
    size_t most = vkv_bind_elems(vb), block = rows ? rows : 1;
    for (int i = 0; i < n; i++) {
        if (!per_row[i]) continue;
        if (per_row[i] > most) {
            fail_row(vb, op, names ? names[i] : "a tensor", per_row[i], "one row of ");
            return 0;
        }
        block = VKA_MIN(block, most / per_row[i]);
    }
    return block;
}

bool vkv_fits(vkv_backend *vb, const char *op, const char *what, size_t n) {
    if (n <= vkv_bind_elems(vb)) return true;
    fail_row(vb, op, what, n, "");
    return false;
}

bool vkv_fits16(vkv_backend *vb, const char *op, const char *what, size_t elems, uint8_t dtype) {
    size_t words = elems / 2 + 1; /* from either half of a word */
    if (words <= vkv_bind_elems(vb)) return true;
    vkb_fail(&vb->base, VKA_ERROR_DEVICE_LIMIT,
             "%s: %s: %zu %s elements (%.1f KiB), more than this device's binding limit of "
             "%llu bytes (maxStorageBufferRange or VKATTN_MAX_BINDING_BYTES)", op, what, elems,
             vka_dtype_string((vka_dtype)dtype), (double)elems * 2 / 1024,
             (unsigned long long)vb->dev->max_binding_bytes);
    return false;
}

vka_shader_id vkv_s16(const vkv_backend *vb, vka_shader_id packed, vka_shader_id s16) {
    return vb->dev->s16_kernels ? s16 : packed;
}

void vkv_dispatch(vkv_backend *vb, const vkv_call *call) {
    const char *label = call->label ? call->label : vka_shader_registry[call->shader].name;
    if (!can_record(vb, label) || call->groups == 0) return;
    if (call->n_bind > VKV_MAX_BINDINGS || call->pc_size > VKV_PUSH_CONSTANT_BYTES ||
        call->pc_size % 4 || call->n_spec > VKV_MAX_SPEC || call->n_texel < 0 ||
        call->pc_views < 0 || (uint32_t)call->pc_views * 4 > call->pc_size ||
        call->n_bind > call->pc_views ||
        call->n_texel > (vb->dev->texel_operands ? VKV_MAX_TEXELS : 0)) {
        vkb_fail(&vb->base, VKA_ERROR_INVALID_ARGUMENT, "%s: bad dispatch description", label);
        return;
    }
    const VkPhysicalDeviceLimits *lim = &vb->dev->props.limits;
    uint64_t x = VKA_MIN(call->groups, (uint64_t)lim->maxComputeWorkGroupCount[0]);
    uint64_t y = VKA_CEIL_DIV(call->groups, x);
    if (y > lim->maxComputeWorkGroupCount[1]) {
        vkb_fail(&vb->base, VKA_ERROR_DEVICE_LIMIT,
                 "%s: %llu workgroups exceed this device's maxComputeWorkGroupCount (%u x %u)",
                 label, (unsigned long long)call->groups, lim->maxComputeWorkGroupCount[0],
                 lim->maxComputeWorkGroupCount[1]);
        return;
    }
    /* Each tensor is bound as its own range, from its start aligned down to bind_align to its
     * end; the shader adds vkv_off() (the elements before the tensor in that range). */
    VkBuffer buffers[VKV_MAX_BINDINGS];
    vkv_binding key[VKV_SET_KEYS];
    vkv_access acc[VKV_MAX_BINDINGS];
    int n_acc = 0, acc_of[VKV_MAX_BINDINGS] = {0}; /* binding i's entry of acc */
    for (int i = 0; i < VKV_MAX_BINDINGS; i++) {
        vkb_tensor t = i < call->n_bind ? call->bind[i] : (vkb_tensor){0};
        if (!t.arena || t.n == 0) {
            buffers[i] = vb->dummy->buffers[0];
            key[i] = (vkv_binding){.id = vb->dummy->ids[0], .offset = 0, .range = VK_WHOLE_SIZE};
            continue;
        }
        vkv_arena *a = vkv_arena_of(t);
        VkDeviceSize lo = bind_start(vb, t), hi = ((VkDeviceSize)t.offset + t.n) * 4;
        if (hi - lo > vb->dev->max_binding_bytes) {
            vkb_fail(&vb->base, VKA_ERROR_DEVICE_LIMIT,
                     "%s: binding %d spans %llu bytes, beyond the binding limit of %llu bytes "
                     "(internal error: the op did not split its work)", label, i,
                     (unsigned long long)(hi - lo),
                     (unsigned long long)vb->dev->max_binding_bytes);
            return;
        }
        buffers[i] = a->buffers[t.chunk];
        key[i] = (vkv_binding){.id = a->ids[t.chunk], .offset = lo, .range = hi - lo};
        acc_of[i] = n_acc;
        acc[n_acc++] = (vkv_access){.id = key[i].id, .lo = lo, .hi = hi, .write = call->writes[i]};
    }
    /* Texel views (texel_operands): over the same bytes as their storage binding. */
    VkBufferView views[VKV_MAX_TEXELS] = {0};
    for (int j = 0; j < VKV_MAX_TEXELS; j++) {
        vkv_binding *k = &key[VKV_MAX_BINDINGS + j];
        *k = (vkv_binding){0};
        if (!vb->dev->texel_operands) continue;
        if (j < call->n_texel && call->texel[j] != VKV_NO_TEXEL) {
            int i = call->texel[j];
            vkb_tensor t = i < call->n_bind ? call->bind[i] : (vkb_tensor){0};
            vkv_texel_format f = (vkv_texel_format)call->texel_format[j];
            VkDeviceSize unit = texel_unit(f);
            if (!texel_fits(vb, t, unit)) {
                vkb_fail(&vb->base, VKA_ERROR_INVALID_ARGUMENT,
                         "%s: binding %d cannot be read as a texel buffer (internal error: the "
                         "op did not check vkv_views_texel)", label, i);
                return;
            }
            *k = (vkv_binding){.id = key[i].id, .offset = key[i].offset,
                               .range = texel_range(vb, t, unit),
                               .format = texel_formats[f].format};
            vkv_access *ac = &acc[acc_of[i]];
            ac->hi = VKA_MAX(ac->hi, k->offset + k->range);
            views[j] = vkv_get_view(vb, buffers[i], k->id, k->offset, k->range, k->format);
        } else {
            /* a view of the dummy arena, of the kind the shader declares there */
            *k = (vkv_binding){.id = vb->dummy->ids[0], .offset = 0, .range = 16,
                               .format = texel_formats[call->texel_format[j]].dummy};
            views[j] = vkv_get_view(vb, vb->dummy->buffers[0], k->id, 0, 16, k->format);
        }
        if (!views[j]) return;
    }
    VkPipeline pipeline = vkv_get_pipeline(vb, call->shader, call->spec, call->n_spec);
    VkDescriptorSet set = pipeline ? vkv_get_set(vb, buffers, views, key) : VK_NULL_HANDLE;
    if (!pipeline || !set) return;
    vkv_graph *g = vb->rec;
    if (g->n_pcs + call->pc_size > g->cap_pcs) {
        size_t cap = VKA_MAX(2 * g->cap_pcs, g->n_pcs + VKV_PUSH_CONSTANT_BYTES + 1024);
        unsigned char *pcs = vka_realloc(vb->base.ctx, g->pcs, cap);
        if (!pcs) {
            vkb_fail(&vb->base, VKA_ERROR_OUT_OF_HOST_MEMORY, "%s: out of memory", label);
            return;
        }
        g->pcs = pcs;
        g->cap_pcs = cap;
    }
    track(vb, acc, n_acc);
    uint32_t q = profile_open(vb, label);
    vkv_cmd c = {.kind = VKV_CMD_DISPATCH,
                 .u.dispatch = {pipeline, set, (uint32_t)x, (uint32_t)y, call->pc_size,
                                (uint32_t)g->n_pcs}};
    if (call->pc_size) memcpy(g->pcs + g->n_pcs, call->pc, call->pc_size);
    for (int i = 0; i < call->pc_views; i++) { /* the views' offsets (VKA_PC_STRUCT) */
        uint32_t off = i < call->n_bind ? vkv_off(vb, call->bind[i]) : 0;
        memcpy(g->pcs + g->n_pcs + 4 * (size_t)i, &off, 4);
    }
    g->n_pcs += call->pc_size;
    log_cmd(vb, &c);
    profile_close(vb, q);
}

void vkv_fill(vkv_backend *vb, vkb_tensor t, uint32_t bits) {
    if (!can_record(vb, "fill") || t.n == 0) return;
    vkv_access acc = access_of(t, true);
    track(vb, &acc, 1);
    vkv_arena *a = vkv_arena_of(t);
    uint32_t q = profile_open(vb, "fill");
    log_cmd(vb, &(vkv_cmd){.kind = VKV_CMD_FILL,
                           .u.fill = {a->buffers[t.chunk], acc.lo, acc.hi - acc.lo, bits}});
    profile_close(vb, q);
}

void vkv_copy(vkv_backend *vb, vkb_tensor dst, vkb_tensor src) {
    if (!can_record(vb, "copy") || src.n == 0) return;
    if (vkb_overlap(src, src.n, dst, src.n)) {
        vkb_fail(&vb->base, VKA_ERROR_INVALID_ARGUMENT, "copy: source and destination overlap");
        return;
    }
    vkv_access acc[2] = {access_of(src, false), access_of(vkb_slice(dst, 0, src.n), true)};
    track(vb, acc, 2);
    VkBufferCopy region = {.srcOffset = acc[0].lo, .dstOffset = acc[1].lo, .size = acc[0].hi - acc[0].lo};
    uint32_t q = profile_open(vb, "copy");
    log_cmd(vb, &(vkv_cmd){.kind = VKV_CMD_COPY,
                           .u.copy = {vkv_arena_of(src)->buffers[src.chunk],
                                      vkv_arena_of(dst)->buffers[dst.chunk], region}});
    profile_close(vb, q);
}
