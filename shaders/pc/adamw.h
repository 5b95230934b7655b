// Push constants of adamw.comp (src/vk/vk_ops_adamw.c); see push_constants.h.
#ifndef VKA_PC_ADAMW_H
#define VKA_PC_ADAMW_H
#include "push_constants.h"

#define VKA_PC_ADAMW_VIEWS(V, VA) V(param) V(m) V(v) V(grad) V(hyper) V(gscale)
#define VKA_PC_ADAMW(U, F, UA) U(N) U(has_gscale) F(weight_decay)
VKA_PC_STRUCT(pc_adamw, VKA_PC_ADAMW_VIEWS, VKA_PC_ADAMW)

#endif
