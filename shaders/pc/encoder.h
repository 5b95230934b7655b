// Push constants of encoder_forward.comp, encoder_backward_wpe.comp and
// encoder_backward_wte.comp (src/vk/vk_ops_encoder.c); see push_constants.h.
#ifndef VKA_PC_ENCODER_H
#define VKA_PC_ENCODER_H
#include "push_constants.h"

#define VKA_PC_ENCODER_FORWARD_VIEWS(V, VA) V(out) V(tokens) V(wte) V(wpe)
#define VKA_PC_ENCODER_FORWARD(U, F, UA)                                                     \
    U(P) U(T) U(C)                                                                          \
    U(wte_rows) /* Vp: ids at or past it give NaN instead of reading out of bounds */       \
    U(pos0)     /* global position of the first one (t = (pos0 + p) % T) */                 \
    U(wpe_row0) /* first wpe row bound */                                                   \
    U(tok0) U(tok_rows)                                                                     \
    U(nan_ids)  /* this dispatch writes the positions with invalid ids */                  \
    U(half0)    /* bits 0 out, 1 wte, 2 wpe: a 16-bit view starting at a high half */
VKA_PC_STRUCT(pc_encoder_forward, VKA_PC_ENCODER_FORWARD_VIEWS, VKA_PC_ENCODER_FORWARD)

#define VKA_PC_ENCODER_WPE_VIEWS(V, VA) V(dwpe) V(dout)
#define VKA_PC_ENCODER_WPE(U, F, UA) U(B) U(T) U(C) U(dout_stride)
VKA_PC_STRUCT(pc_encoder_wpe, VKA_PC_ENCODER_WPE_VIEWS, VKA_PC_ENCODER_WPE)

#define VKA_PC_ENCODER_WTE_VIEWS(V, VA) V(dwte) V(dout) V(buckets)
#define VKA_PC_ENCODER_WTE(U, F, UA)                                                         \
    U(BT) U(C)                                                                              \
    U(wte_rows) /* Vp */                                                                    \
    U(tok0) U(tok_rows) U(pos0) U(pos_n)
VKA_PC_STRUCT(pc_encoder_wte, VKA_PC_ENCODER_WTE_VIEWS, VKA_PC_ENCODER_WTE)

#endif
