// Push constants of crossentropy_forward.comp and crossentropy_backward.comp (one block,
// pc_crossentropy: src/vk/vk_ops_crossentropy.c); see push_constants.h. out is losses (N)
// forward, dlogits (N, Vp) backward; dloss and dloss_t are the backward's.
#ifndef VKA_PC_CROSSENTROPY_H
#define VKA_PC_CROSSENTROPY_H
#include "push_constants.h"

#define VKA_PC_CROSSENTROPY(U, F, UA)                                                        \
    U(N) U(V) U(Vp) F(dloss)                                                                \
    U(has_dloss) /* backward: dloss from dloss_t[0] */                                      \
    U(logits_half) U(out_half) /* 16-bit views: 1 when the first element is its word's high half */
#define VKA_PC_CROSSENTROPY_FORWARD_VIEWS(V, VA) V(losses) V(logits) V(targets) V(unused)
#define VKA_PC_CROSSENTROPY_BACKWARD_VIEWS(V, VA) V(dlogits) V(logits) V(targets) V(dloss)
VKA_PC_STRUCT(pc_crossentropy, VKA_PC_CROSSENTROPY_BACKWARD_VIEWS, VKA_PC_CROSSENTROPY)
VKA_PC_SAME_VIEWS(pc_crossentropy, VKA_PC_CROSSENTROPY_FORWARD_VIEWS)

#endif
