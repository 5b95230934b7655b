/* Elementwise ops: residual add, in-place add, GELU forward and backward.
 * One invocation per element, in blocks that fit the binding limit; the grid folds past 65,535 workgroups (vkv_dispatch). */
#include "vk/vk_internal.h"

#define WG 256 /* wanted workgroup size */

typedef struct pc_binary {
    uint32_t out_off, a_off, b_off; /* element offsets of the bound tensors */
    uint32_t N;
} pc_binary;
_Static_assert(sizeof(pc_binary) <= VKV_PUSH_CONSTANT_BYTES, "push constants");

/* o (written) and a, b (read; b only when present) of N elements each (checked in front of the
 * backend, vkb_checked_ops), in blocks of at most vkv_bind_elems elements. */
static void dispatch3(vkb_backend *be, vka_shader_id shader, const char *label, vkb_tensor o,
                      vkb_tensor a, vkb_tensor b, size_t N) {
    vkv_backend *vb = (vkv_backend *)be;
    bool has_b = vkb_present(b);
    size_t block = vkv_bind_elems(vb);
    for (size_t i0 = 0; i0 < N; i0 += block) {
        size_t n = VKA_MIN(block, N - i0);
        vkb_tensor os = vkb_slice(o, i0, n), as = vkb_slice(a, i0, n);
        vkb_tensor bs = has_b ? vkb_slice(b, i0, n) : VKB_NONE;
        pc_binary pc = {vkv_off(vb, os), vkv_off(vb, as), vkv_off(vb, bs), (uint32_t)n};
        vkv_call call = {.shader = shader,
                         .bind = {os, as, bs},
                         .writes = {true, false, false},
                         .n_bind = has_b ? 3 : 2,
                         .pc = &pc,
                         .pc_size = sizeof pc,
                         .label = label};
        vkv_call_elems(vb, &call, n, WG);
        vkv_dispatch(vb, &call);
    }
}

void vkv_residual_forward(vkb_backend *be, vkb_tensor out, vkb_tensor a, vkb_tensor b, size_t N) {
    dispatch3(be, VKA_SHADER_RESIDUAL_FORWARD, "residual_forward", out, a, b, N);
}

void vkv_add_inplace(vkb_backend *be, vkb_tensor dst, vkb_tensor src, size_t N) {
    dispatch3(be, VKA_SHADER_ADD_INPLACE, "add_inplace", dst, src, VKB_NONE, N);
}

void vkv_gelu_forward(vkb_backend *be, vkb_tensor out, vkb_tensor inp, size_t N) {
    dispatch3(be, VKA_SHADER_GELU_FORWARD, "gelu_forward", out, inp, VKB_NONE, N);
}

void vkv_gelu_backward(vkb_backend *be, vkb_tensor dinp, vkb_tensor inp, vkb_tensor dout,
                       size_t N) {
    dispatch3(be, VKA_SHADER_GELU_BACKWARD, "gelu_backward", dinp, inp, dout, N);
}
