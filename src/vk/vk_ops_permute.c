/* Multi-head reshape/permute: qkv (B,T,3C) <-> q, k, v (B,NH,T,HS) and (B,NH,T,HS) <-> (B,T,C),
 * forward and backward. Pure data movement, one invocation per element. */
#include "vk/vk_internal.h"
#include "pc/permute.h"

#define WG 256 /* wanted workgroup size */

/* n tensors bound in order (the first `writes` of them written); tensor `side` is the
 * (B,T,wmul*C) side (qkv: wmul 3; unpermute's (B,T,C): 1), the others (B,NH,T,HS). Blocks that
 * fit the binding limit: whole sequences (all heads) when one sequence fits, else one sequence,
 * one head and a block of positions (the wide side bound as those positions' whole rows). One
 * invocation per element of the block. */
static void dispatch(vkb_backend *be, vka_shader_id shader, const char *label,
                     const vkb_tensor *t, int n, int writes, int side, size_t wmul, int B, int T,
                     int NH, int HS) {
    vkv_backend *vb = (vkv_backend *)be;
    size_t C = (size_t)NH * HS, Ts = (size_t)T, W = wmul * C; /* the side's row */
    size_t most = vkv_bind_elems(vb);
    bool whole = Ts * W <= most;
    size_t nb = whole ? VKA_MIN((size_t)B, most / (Ts * W)) : 1, nh = whole ? (size_t)NH : 1;
    size_t nt = whole ? Ts : VKA_MIN(Ts, most / W);
    if (!whole && !vkv_fits(vb, label, wmul == 3 ? "one row of qkv (3C)" : "one row (C)", W))
        return;
    for (size_t b0 = 0; b0 < (size_t)B; b0 += nb)
        for (size_t h0 = 0; h0 < (size_t)NH; h0 += nh)
            for (size_t t0 = 0; t0 < Ts; t0 += nt) {
                size_t bn = VKA_MIN(nb, (size_t)B - b0), tn = VKA_MIN(nt, Ts - t0);
                pc_permute pc = {.B = (uint32_t)bn, .T = (uint32_t)tn, .NH = (uint32_t)nh,
                                 .HS = (uint32_t)HS, .T_all = (uint32_t)T,
                                 .NH_all = (uint32_t)NH, .h0 = (uint32_t)h0};
                vkv_call call = {.shader = shader, .n_bind = n, VKV_PC(&pc), .label = label};
                vkv_call_elems(vb, &call, bn * nh * tn * HS, WG);
                for (int i = 0; i < n; i++) {
                    vkb_tensor v = i == side
                        ? vkb_slice(t[i], (b0 * Ts + t0) * W, ((bn - 1) * Ts + tn) * W)
                        : vkb_slice(t[i], ((b0 * NH + h0) * Ts + t0) * HS,
                                    whole ? bn * NH * Ts * HS : tn * (size_t)HS);
                    call.bind[i] = v;
                    call.writes[i] = i < writes;
                }
                vkv_dispatch(vb, &call);
            }
}

void vkv_permute_forward(vkb_backend *be, vkb_tensor q, vkb_tensor k, vkb_tensor v,
                         vkb_tensor inp, int B, int T, int NH, int HS) {
    vkb_tensor t[4] = {q, k, v, inp};
    dispatch(be, VKA_SHADER_PERMUTE_FORWARD, "permute_forward", t, 4, 3, 3, 3, B, T, NH, HS);
}

void vkv_permute_backward(vkb_backend *be, vkb_tensor dinp, vkb_tensor dq, vkb_tensor dk,
                          vkb_tensor dv, int B, int T, int NH, int HS) {
    vkb_tensor t[4] = {dinp, dq, dk, dv};
    dispatch(be, VKA_SHADER_PERMUTE_BACKWARD, "permute_backward", t, 4, 1, 0, 3, B, T, NH, HS);
}

void vkv_unpermute_forward(vkb_backend *be, vkb_tensor out, vkb_tensor inp, int B, int T, int NH,
                           int HS) {
    vkb_tensor t[2] = {out, inp};
    dispatch(be, VKA_SHADER_UNPERMUTE_FORWARD, "unpermute_forward", t, 2, 1, 0, 1, B, T, NH, HS);
}

void vkv_unpermute_backward(vkb_backend *be, vkb_tensor dinp, vkb_tensor dout, int B, int T,
                            int NH, int HS) {
    vkb_tensor t[2] = {dinp, dout};
    dispatch(be, VKA_SHADER_UNPERMUTE_BACKWARD, "unpermute_backward", t, 2, 1, 1, 1, B, T, NH, HS);
}
