/* Elementwise ops: residual add, in-place add, GELU forward and backward.
 * One invocation per element; the grid folds past 65,535 workgroups (vkv_dispatch). */
#include "vk/vk_internal.h"

#define WG 256 /* wanted workgroup size */

typedef struct pc_binary {
    uint32_t out_off, a_off, b_off; /* element offsets of the bound tensors */
    uint32_t N;
} pc_binary;
_Static_assert(sizeof(pc_binary) <= VKV_PUSH_CONSTANT_BYTES, "push constants");

/* N must fit the shaders' uint indexing. */
static bool check_n(vkb_backend *be, const char *op, size_t N) {
    if (N > UINT32_MAX) {
        vkb_fail(be, VKA_ERROR_DEVICE_LIMIT, "%s: %zu elements exceed 2^32-1", op, N);
        return false;
    }
    return true;
}

/* out (written) and a, b (read; b may be absent) of N elements each. */
static void dispatch3(vkb_backend *be, vka_shader_id shader, const char *label, vkb_tensor o,
                      vkb_tensor a, vkb_tensor b, size_t N) {
    if (!check_n(be, label, N)) return;
    uint32_t wg = vkv_workgroup_size((vkv_backend *)be, WG);
    pc_binary pc = {o.offset, a.offset, b.offset, (uint32_t)N};
    vkv_call call = {.shader = shader,
                     .spec = {wg},
                     .n_spec = 1,
                     .bind = {vkb_slice(o, 0, N), vkb_slice(a, 0, N), b.arena ? vkb_slice(b, 0, N) : b},
                     .writes = {true, false, false},
                     .n_bind = b.arena ? 3 : 2,
                     .pc = &pc,
                     .pc_size = sizeof pc,
                     .groups = VKA_CEIL_DIV(N, wg),
                     .label = label};
    vkv_dispatch((vkv_backend *)be, &call);
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
