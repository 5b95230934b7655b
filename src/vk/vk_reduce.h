/*
 * Launch shapes shared by the reduction ops (vk_ops_softmax.c,
 * vk_ops_layernorm.c, vk_ops_crossentropy.c, vk_ops_reduce.c). The shader side of the layouts
 * is shaders/rowreduce.glsl (rows) and shaders/colreduce.glsl (columns).
 *
 * Each layout has a GPU form and a CPU-type form (vkv_device(vb)->is_cpu), chosen by
 * specialization constants so that one SPIR-V serves both.
 */
#ifndef VKA_VK_REDUCE_H
#define VKA_VK_REDUCE_H

#include "vk/vk_internal.h"

/* Specialization constants and workgroup count of a reduction dispatch:
 *   rows:    spec = {WG, SEG, cpu}  (rowreduce.glsl)
 *   columns: spec = {WG, COLS}      (colreduce.glsl)
 * iters: loop iterations one invocation runs (bounded on llvmpipe: vkv_check_layout). */
typedef struct vkv_layout {
    uint32_t spec[3];
    int n_spec;
    uint64_t groups;
    uint64_t iters;
} vkv_layout;

/* Set call's specialization constants (spec[0 .. n_spec)) and workgroup count from lay. */
static inline void vkv_call_layout(vkv_call *call, const vkv_layout *lay) {
    for (int i = 0; i < lay->n_spec; i++) call->spec[i] = lay->spec[i];
    call->n_spec = lay->n_spec;
    call->groups = lay->groups;
}

/* rows rows of len elements, each walked passes times (SEG invocations per row). */
vkv_layout vkv_rows_layout(vkv_backend *vb, uint64_t rows, uint64_t len, int passes);
/* One workgroup summing a vector of len elements (SEG = WG; loops unrolled by 4); groups = 1,
 * the caller may dispatch more, one vector each. */
vkv_layout vkv_vector_layout(vkv_backend *vb, uint64_t len);
/* Column sums of a (rows, cols) matrix (loops unrolled by 4). */
vkv_layout vkv_cols_layout(vkv_backend *vb, uint64_t rows, uint64_t cols);
/* Column sums of a (rows, 4 * quads) matrix in texel builds (CPU-type): each invocation sums a
 * column quad (vec4) down every RL-th row (loops unrolled by 4), a workgroup holds CQ quads
 * times RL row lanes whose partials row lane 0 adds after one barrier; spec = {CQ * RL, CQ}. */
vkv_layout vkv_quad_cols_layout(vkv_backend *vb, uint64_t rows, uint64_t quads);
/* Fail with VKA_ERROR_DEVICE_LIMIT if the layout's loops exceed what the device runs (llvmpipe
 * ends a shader's loops after 65535 iterations in total, silently). */
bool vkv_check_layout(vkb_backend *be, const char *op, const vkv_layout *lay);

#endif
