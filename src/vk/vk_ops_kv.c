/* KV cache write (shaders/kv_write.comp, src/cpu/kv.c): the k, v rows of a chunk into the
 * caches at the position held in a tensor. Pure data movement, one invocation per element of
 * (NH, T, HS), in blocks that fit the binding limit: blocks of whole heads of the caches where
 * a head fits (as on every real device), else blocks of cache rows, each dispatch writing only
 * the rows it binds; and blocks of qkv rows. */
#include "vk/vk_internal.h"
#include "pc/kv.h"

#define WG 256 /* wanted workgroup size */

void vkv_kv_write(vkb_backend *be, vkb_tensor kcache, vkb_tensor vcache, vkb_tensor qkv,
                  vkb_tensor pos, int T, int NH, int HS, int max_T) {
    vkv_backend *vb = (vkv_backend *)be;
    size_t rows = (size_t)NH * max_T, C = (size_t)NH * HS;
    bool c16 = kcache.dtype != VKA_F32, q16 = qkv.dtype != VKA_F32; /* caches alike (op_checks) */
    uint32_t t16 = (c16 ? 1u : 0u) | (q16 ? 2u : 0u) |
                   (kcache.dtype == VKA_F16 || qkv.dtype == VKA_F16 ? 4u : 0u);
    /* words a row takes at most in a block of rows (16-bit: n rows span n*HS/2 + 1 words) */
    const size_t cache_row[] = {c16 ? (size_t)HS / 2 + 1 : (size_t)HS,
                                c16 ? (size_t)HS / 2 + 1 : (size_t)HS},
                 qkv_row[] = {q16 ? 3 * C / 2 + 1 : 3 * C};
    const char *const cache_names[] = {"kcache", "vcache"}, *const qkv_names[] = {"qkv"};
    size_t rb = vkv_block_rows(vb, "kv_write", rows, cache_row, cache_names, 2);
    size_t tb = vkv_block_rows(vb, "kv_write", (size_t)T, qkv_row, qkv_names, 1);
    if (!rb || !tb) return;
    if (rb >= (size_t)max_T) rb -= rb % (size_t)max_T; /* whole heads */
    vkb_tensor ps = vkb_slice(pos, 0, 2);
    for (size_t r0 = 0; r0 < rows; r0 += rb) {
        size_t nr = VKA_MIN(rb, rows - r0);
        size_t h0 = r0 / (size_t)max_T, h1 = (r0 + nr - 1) / (size_t)max_T + 1;
        uint32_t c_half = 0, q_half = 0;
        vkb_tensor ks = vkv_elem_view(kcache, r0 * HS, nr * HS, &c_half);
        vkb_tensor vs = vkv_elem_view(vcache, r0 * HS, nr * HS, &c_half);
        for (size_t t0 = 0; t0 < (size_t)T; t0 += tb) {
            size_t nt = VKA_MIN(tb, (size_t)T - t0);
            vkb_tensor qs = vkv_elem_view(qkv, t0 * 3 * C, nt * 3 * C, &q_half);
            pc_kv_write pc = {.HS = (uint32_t)HS, .max_T = (uint32_t)max_T, .C = (uint32_t)C,
                              .r0 = (uint32_t)r0, .nr = (uint32_t)nr, .h0 = (uint32_t)h0,
                              .nh = (uint32_t)(h1 - h0), .t0 = (uint32_t)t0, .nt = (uint32_t)nt,
                              .c_half = c_half, .q_half = q_half};
            vkv_call call = {.shader = t16 ? vkv_s16(vb, VKA_SHADER_KV_WRITE,
                                                     VKA_SHADER_KV_WRITE_S16)
                                           : VKA_SHADER_KV_WRITE,
                             .bind = {ks, vs, qs, ps},
                             .writes = {true, true, false, false},
                             .n_bind = 4,
                             VKV_PC(&pc),
                             .label = "kv_write"};
            vkv_call_elems(vb, &call, (h1 - h0) * nt * (size_t)HS, WG);
            call.spec[1] = t16;
            call.n_spec = 2;
            vkv_dispatch(vb, &call);
        }
    }
}
