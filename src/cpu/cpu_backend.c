/* The CPU backend: its table and its creation. Arenas and graphs (aligned host allocations, a
 * list of recorded commands run in order) are in cpu_graph.c, the ops that record themselves in
 * cpu_commands.c and the kernels in src/cpu/<op>.c. */
#include "cpu/cpu_backend.h"
#include "settings.h"

#include <stdlib.h>
#include <string.h>

#ifdef VKA_HAVE_OPENMP
#include <omp.h>
#endif

static void cpu_destroy(vkb_backend *be) { vka_free(be->ctx, be); }

/* Runs graphs on the host: no graph_submit, graph_wait, graph_record, graph_check, arena_wrap or
 * buffer_of (backend.c stands in for them). */
static const vkb_runtime cpu_runtime = {
    .destroy = cpu_destroy,
    .arena_create = cpu_arena_create,
    .arena_destroy = cpu_arena_destroy,
    .write = cpu_write,
    .read = cpu_read,
    .graph_begin = cpu_graph_begin,
    .graph_end = cpu_graph_end,
    .graph_run = cpu_graph_run,
    .graph_destroy = cpu_graph_destroy,
    .set_profiling = cpu_set_profiling,
    .graph_times = cpu_graph_times,
};

/* --- creation ----------------------------------------------------------------------------- */

vka_result vkb_cpu_create(vka_context *ctx, const vka_settings *s, vkb_backend **out) {
    *out = NULL;
    vka_cpu_kernels kernels = s->cpu_kernels;
    bool reference = kernels == VKA_CPU_KERNELS_REFERENCE;
    cpu_backend *cb = vka_calloc(ctx, 1, sizeof *cb);
    if (!cb) return vka_set_error(ctx, VKA_ERROR_OUT_OF_HOST_MEMORY, "cpu backend: out of memory");
    vkc_fill_op_table(&cb->ops);
    cb->base.impl = &cb->ops;
    cb->base.ops = &vkb_checked_ops;
    cb->base.rt = &cpu_runtime;
    cb->base.ctx = ctx;
    cb->base.status = VKA_SUCCESS;
    cb->base.name = "cpu";
    /* Host memory: no per-buffer limit worth stating; a tensor may be as large as malloc allows. */
    cb->base.limits.max_tensor_bytes = (uint64_t)1 << 40;
    cb->base.limits.max_chunk_bytes = (uint64_t)1 << 40;
    cb->base.limits.max_binding_bytes = (uint64_t)1 << 40;
    /* All arenas together: physical memory, so that a plan past it is refused with the sizes
     * (vkm_gpt_make_arena) rather than growing until the kernel kills the process. */
    cb->base.limits.memory_bytes = vkb_host_memory_bytes();
    vka_settings_lower_limits(s, &cb->base.limits);
#ifdef VKA_HAVE_OPENMP
    cb->nt = s->cpu_threads > 0 ? s->cpu_threads : omp_get_max_threads();
    /* OpenMP's default is OMP_NUM_THREADS as given, and libgomp crashes in GOMP_parallel on
     * 100000 threads: capped at the limit the command line's --threads has. */
    if (s->cpu_threads <= 0 && cb->nt > VKA_CPU_MAX_THREADS) {
        vka_log(ctx, VKA_LOG_INFO, "cpu backend: OpenMP's default of %d threads "
                "(OMP_NUM_THREADS) is capped at %d", cb->nt, VKA_CPU_MAX_THREADS);
        cb->nt = VKA_CPU_MAX_THREADS;
    }
#else
    cb->nt = 1;
#endif
    if (cb->nt < 1) cb->nt = 1;
    cb->reference = reference;
    cb->isa = reference ? VKC_ISA_BASELINE : vkc_cpu_isa();
    if (kernels == VKA_CPU_KERNELS_FAST_AVX2 && cb->isa > VKC_ISA_AVX2) cb->isa = VKC_ISA_AVX2;
    cb->cvt = vkc_cvt_features(cb->isa);
    cb->mm16_bf16 = cpu_mm16_path(cb, VKA_BF16);
    cb->mm16_f16 = cpu_mm16_path(cb, VKA_F16);
    vka_log(ctx, VKA_LOG_INFO, "cpu backend: %d thread(s), %s kernels (%s)", cb->nt,
            reference ? "reference" : "fast", vkc_isa_name(cb->isa));
    *out = &cb->base;
    return VKA_SUCCESS;
}
