/* Multi-head reshape/permute: qkv (B,T,3C) <-> q, k, v (B,NH,T,HS) and (B,NH,T,HS) <-> (B,T,C),
 * forward and backward. Pure data movement, one invocation per element. */
#include "vk/vk_internal.h"

#define WG 256 /* wanted workgroup size */

typedef struct pc_permute {
    uint32_t off[4]; /* element offsets of the bound tensors, in binding order */
    uint32_t B, T, NH, HS;
} pc_permute;
_Static_assert(sizeof(pc_permute) <= VKV_PUSH_CONSTANT_BYTES, "push constants");

/* n tensors bound in order (the first `writes` of them written); tensor `wide` (-1: none) is
 * the (B,T,3C) side, the others hold B*T*NH*HS elements. B*T*NH*HS invocations. */
static void dispatch(vkb_backend *be, vka_shader_id shader, const char *label,
                     const vkb_tensor *t, int n, int writes, int wide, int B, int T, int NH,
                     int HS) {
    size_t count = (size_t)B * T * NH * HS;
    pc_permute pc = {.B = (uint32_t)B, .T = (uint32_t)T, .NH = (uint32_t)NH, .HS = (uint32_t)HS};
    vkv_call call = {.shader = shader, .n_bind = n, .pc = &pc, .pc_size = sizeof pc,
                     .label = label};
    vkv_call_elems((vkv_backend *)be, &call, count, WG);
    for (int i = 0; i < n; i++) {
        pc.off[i] = t[i].offset;
        call.bind[i] = vkb_slice(t[i], 0, i == wide ? 3 * count : count);
        call.writes[i] = i < writes;
    }
    vkv_dispatch((vkv_backend *)be, &call);
}

void vkv_permute_forward(vkb_backend *be, vkb_tensor q, vkb_tensor k, vkb_tensor v,
                         vkb_tensor inp, int B, int T, int NH, int HS) {
    vkb_tensor t[4] = {q, k, v, inp};
    dispatch(be, VKA_SHADER_PERMUTE_FORWARD, "permute_forward", t, 4, 3, 3, B, T, NH, HS);
}

void vkv_permute_backward(vkb_backend *be, vkb_tensor dinp, vkb_tensor dq, vkb_tensor dk,
                          vkb_tensor dv, int B, int T, int NH, int HS) {
    vkb_tensor t[4] = {dinp, dq, dk, dv};
    dispatch(be, VKA_SHADER_PERMUTE_BACKWARD, "permute_backward", t, 4, 1, 0, B, T, NH, HS);
}

void vkv_unpermute_forward(vkb_backend *be, vkb_tensor out, vkb_tensor inp, int B, int T, int NH,
                           int HS) {
    vkb_tensor t[2] = {out, inp};
    dispatch(be, VKA_SHADER_UNPERMUTE_FORWARD, "unpermute_forward", t, 2, 1, -1, B, T, NH, HS);
}

void vkv_unpermute_backward(vkb_backend *be, vkb_tensor dinp, vkb_tensor dout, int B, int T,
                            int NH, int HS) {
    vkb_tensor t[2] = {dinp, dout};
    dispatch(be, VKA_SHADER_UNPERMUTE_BACKWARD, "unpermute_backward", t, 2, 1, -1, B, T, NH, HS);
}
