// Push constants of permute_forward.comp, permute_backward.comp, unpermute_forward.comp and
// unpermute_backward.comp (one block, pc_permute: src/vk/vk_ops_permute.c); see
// push_constants.h. Four views each (the unpermutes bind two).
#ifndef VKA_PC_PERMUTE_H
#define VKA_PC_PERMUTE_H
#include "push_constants.h"

#define VKA_PC_PERMUTE(U, F, UA)                                                             \
    U(B) U(T) U(NH) U(HS) /* this dispatch's block: B sequences, T positions, NH heads (from \
                           * h0) */                                                         \
    U(T_all) U(NH_all)    /* the whole tensors' T and NH (strides) */                      \
    U(h0)                 /* first head of the block */
#define VKA_PC_PERMUTE_FORWARD_VIEWS(V, VA) V(q) V(k) V(v) V(inp)
#define VKA_PC_PERMUTE_BACKWARD_VIEWS(V, VA) V(dinp) V(dq) V(dk) V(dv)
#define VKA_PC_UNPERMUTE_FORWARD_VIEWS(V, VA) V(out) V(inp) V(unused2) V(unused3)
#define VKA_PC_UNPERMUTE_BACKWARD_VIEWS(V, VA) V(dinp) V(dout) V(unused2) V(unused3)
VKA_PC_STRUCT(pc_permute, VKA_PC_PERMUTE_FORWARD_VIEWS, VKA_PC_PERMUTE)
VKA_PC_SAME_VIEWS(pc_permute, VKA_PC_PERMUTE_BACKWARD_VIEWS)
VKA_PC_SAME_VIEWS(pc_permute, VKA_PC_UNPERMUTE_FORWARD_VIEWS)
VKA_PC_SAME_VIEWS(pc_permute, VKA_PC_UNPERMUTE_BACKWARD_VIEWS)

#endif
