// Push constants of kv_write.comp (src/vk/vk_ops_kv.c); see push_constants.h.
#ifndef VKA_PC_KV_H
#define VKA_PC_KV_H
#include "push_constants.h"

#define VKA_PC_KV_WRITE_VIEWS(V, VA) V(k) V(v) V(qkv) V(pos)
#define VKA_PC_KV_WRITE(U, F, UA)                                                            \
    U(HS) U(max_T) U(C) /* C = NH * HS, channels of a qkv row */                           \
    U(r0) U(nr)         /* bound cache rows (h * max_T + p) */                             \
    U(h0) U(nh)         /* heads of this dispatch */                                        \
    U(t0) U(nt)         /* bound qkv rows */                                               \
    U(c_half) U(q_half) /* 16-bit caches / qkv: their views start at a word's high half */
VKA_PC_STRUCT(pc_kv_write, VKA_PC_KV_WRITE_VIEWS, VKA_PC_KV_WRITE)

#endif
