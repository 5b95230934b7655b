// Push constants of the fused attention shaders attention_forward.comp and
// attention_backward_{delta,dkdv,dq}.comp (one block, pc_attention, declared in attention.glsl;
// src/vk/vk_ops_attention.c); see push_constants.h. Every pass binds the same 11 views (unused
// ones the dummy): q, k, v, out, lse, mask, key_lens, dout, dq, dk, dv, whose offsets are
// bind_off[i].
#ifndef VKA_PC_ATTENTION_H
#define VKA_PC_ATTENTION_H
#include "push_constants.h"

#define VKA_PC_ATTENTION_VIEWS(V, VA) VA(bind, 11)
#define VKA_PC_ATTENTION(U, F, UA)                                                           \
    U(B) U(NH) U(Tq) U(Tk) U(HS) /* B: batches of this dispatch */                          \
    U(q_sb) U(q_sh) U(q_st)      /* element (b, h, t, d) of q, dq at b*sb + h*sh + t*st + d */ \
    U(k_sb) U(k_sh) U(k_st)      /* k, dk */                                                \
    U(v_sb) U(v_sh) U(v_st)      /* v, dv */                                                \
    U(o_sb) U(o_sh) U(o_st)      /* out, dout */                                            \
    F(scale)                                                                                \
    U(causal)                    /* vkb_causal */                                           \
    U(flags) /* bit 0: mask; 1: mask per batch; 2: key_lens; 3: no lse (forward);  \
                              * 4 + i: 16-bit view i (q, k, v, out) starts at a word's high half */
VKA_PC_STRUCT(pc_attention, VKA_PC_ATTENTION_VIEWS, VKA_PC_ATTENTION)

#endif
