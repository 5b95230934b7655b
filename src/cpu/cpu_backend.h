/* Internals of the CPU backend, in three parts as the Vulkan one: cpu_backend.c (its table and
 * creation), cpu_graph.c (arenas; graphs: record, run) and the ops (cpu_commands.c recording
 * and running them, over the kernels of src/cpu/<op>.c). */
#ifndef VKA_CPU_BACKEND_H
#define VKA_CPU_BACKEND_H

#include "backend.h"
#include "cpu/convert.h"
#include "cpu/cpu_ops.h"
#include "cpu/matmul16.h"

/* A recorded op: run(cb, args) executes it; args is the op's own copy of its arguments. */
typedef struct cpu_backend cpu_backend;
typedef vka_result (*cpu_run_fn)(cpu_backend *cb, const void *args);

typedef struct cpu_cmd {
    const char *name; /* op name, for profiles */
    cpu_run_fn run;
    void *args;       /* malloc'd at record time, freed with the graph */
    double ms;        /* time of the last run (profiled graphs) */
} cpu_cmd;

struct vkb_graph {
    cpu_cmd *cmds;
    int n_cmds, cap;
    vka_result status; /* graph_end's result; a failed graph is not run */
    bool profiled;     /* time each command */
    bool ran;
    double total_ms;   /* host time of the last run */
};

struct vkb_arena {
    int n_chunks;
    float **chunks;    /* 64-byte aligned views into bases */
    void **bases;      /* what calloc returned */
    size_t *chunk_elems;
};

struct cpu_backend {
    vkb_backend base;
    vkb_ops ops;       /* base.impl points here */
    int nt;            /* OpenMP threads for every parallel region (>= 1) */
    vkc_isa isa;       /* the fast kernels' vector ISA (cpuid); VKC_ISA_BASELINE: reference */
    unsigned cvt;      /* the 16-bit conversions' features (vkc_cvt_features of isa) */
    /* the 16-bit matmul's path for bf16 and for fp16 (cpu_mm16_path), chosen once: the AMX
     * path's check asks the OS for the tile state */
    vkc_mm16_path mm16_bf16, mm16_f16;
    bool reference;    /* VKATTN_CPU_KERNELS=reference: the reference kernels only */
    vkb_graph *rec;    /* graph being recorded, NULL outside graph_begin/graph_end */
    bool profiling;    /* graphs recorded from now on time each command */
};

/* The tensor's first element (NULL for an absent tensor). */
static inline float *cpu_ptr(vkb_tensor t) {
    return t.arena ? t.arena->chunks[t.chunk] + t.offset : NULL;
}

/* Append a command (named name in profiles) with a copy of args (size bytes) followed by extra
 * uninitialised bytes (for variable-length arguments) to the graph being recorded (cpu_graph.c). Returns the copy, or NULL when
 * nothing is recorded (failed graph, no memory; the failure is in be->status). */
void *vkc_record(cpu_backend *cb, const char *name, cpu_run_fn run, const void *args, size_t size,
                 size_t extra);

/* The runtime entries (cpu_graph.c): as backend.h's vkb_runtime says. */
vka_result cpu_arena_create(vkb_backend *be, const char *label, vkb_arena_kind kind,
                            const size_t *sizes, const char *const *names, int count,
                            vkb_tensor *tensors, vkb_arena **out);
void cpu_arena_destroy(vkb_backend *be, vkb_arena *arena);
vka_result cpu_write(vkb_backend *be, vkb_tensor t, size_t off, const void *src, size_t n);
vka_result cpu_read(vkb_backend *be, vkb_tensor t, size_t off, void *dst, size_t n);
bool cpu_graph_begin(vkb_backend *be, vkb_graph **graph);
vka_result cpu_graph_end(vkb_backend *be, vkb_graph *graph);
vka_result cpu_graph_run(vkb_backend *be, vkb_graph *graph);
void cpu_graph_destroy(vkb_backend *be, vkb_graph *graph);
void cpu_set_profiling(vkb_backend *be, bool on);
vka_result cpu_graph_times(vkb_backend *be, vkb_graph *graph, double *total_ms,
                           vka_op_time *out, int cap, int *count);

/* Fill the op entries of ops (cpu_commands.c). */
void vkc_fill_op_table(vkb_ops *ops);
/* The 16-bit matmul's path for type on this backend (cpu_commands.c): the reference with the
 * reference kernels, else the fastest the CPU runs within the backend's ISA. */
vkc_mm16_path cpu_mm16_path(const cpu_backend *cb, vka_dtype type);

#endif
