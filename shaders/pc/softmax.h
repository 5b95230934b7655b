// Push constants of softmax_forward.comp and softmax_backward.comp (src/vk/vk_ops_softmax.c);
// see push_constants.h.
#ifndef VKA_PC_SOFTMAX_H
#define VKA_PC_SOFTMAX_H
#include "push_constants.h"

#define VKA_PC_SOFTMAX_FORWARD_VIEWS(V, VA) V(out) V(inp) V(mask)
#define VKA_PC_SOFTMAX_FORWARD(U, F, UA)                                                     \
    U(R) U(Tq) U(Tk)                                                                        \
    U(mask_rows) /* consecutive rows sharing one mask row, >= 1 */                          \
    U(has_mask) U(causal) F(scale)                                                          \
    U(row0)      /* row r of this dispatch is row row0 + r of the whole (causal query, mask  \
                  * row) */                                                                 \
    U(mask_row0) /* the mask binding starts at mask row mask_row0 (of that whole) */
VKA_PC_STRUCT(pc_softmax_forward, VKA_PC_SOFTMAX_FORWARD_VIEWS, VKA_PC_SOFTMAX_FORWARD)

#define VKA_PC_SOFTMAX_BACKWARD_VIEWS(V, VA) V(dinp) V(dout) V(out)
#define VKA_PC_SOFTMAX_BACKWARD(U, F, UA) U(R) U(Tk) F(scale)
VKA_PC_STRUCT(pc_softmax_backward, VKA_PC_SOFTMAX_BACKWARD_VIEWS, VKA_PC_SOFTMAX_BACKWARD)

#endif
