// Push constants of layernorm_forward.comp, layernorm_backward.comp and
// layernorm_backward_params.comp (src/vk/vk_ops_layernorm.c); see push_constants.h.
#ifndef VKA_PC_LAYERNORM_H
#define VKA_PC_LAYERNORM_H
#include "push_constants.h"

/* the backward's: half0 as the forward's, for its 16-bit dout and inp views */
#define VKA_PC_LAYERNORM_ROWS(U, F, UA) U(N) U(C) U(half0)

#define VKA_PC_LAYERNORM_FORWARD_VIEWS(V, VA) V(out) V(mean) V(rstd) V(inp) V(weight) V(bias)
/* half0: a 16-bit out or inp view starts this block's rows at the high half of its first word
 * (1; a block of rows starting at an odd element, odd C), else 0. Both 16-bit views of a call
 * start at the same element, so one flag serves both. */
#define VKA_PC_LAYERNORM_FORWARD(U, F, UA) U(N) U(C) U(half0)
VKA_PC_STRUCT(pc_layernorm_forward, VKA_PC_LAYERNORM_FORWARD_VIEWS, VKA_PC_LAYERNORM_FORWARD)

#define VKA_PC_LAYERNORM_BACKWARD_VIEWS(V, VA) V(dinp) V(dout) V(inp) V(weight) V(mean) V(rstd)
VKA_PC_STRUCT(pc_layernorm_backward, VKA_PC_LAYERNORM_BACKWARD_VIEWS, VKA_PC_LAYERNORM_ROWS)

#define VKA_PC_LAYERNORM_PARAMS_VIEWS(V, VA) V(dweight) V(dbias) V(dout) V(inp) V(mean) V(rstd)
VKA_PC_STRUCT(pc_layernorm_params, VKA_PC_LAYERNORM_PARAMS_VIEWS, VKA_PC_LAYERNORM_ROWS)

#endif
