// Push constants of the elementwise shaders residual_forward.comp, add_inplace.comp,
// gelu_forward.comp and gelu_backward.comp (one block, pc_binary: src/vk/vk_ops_elementwise.c);
// see push_constants.h. Three views each: the output, then up to two inputs (a shader with one
// input leaves the third unused).
#ifndef VKA_PC_ELEMENTWISE_H
#define VKA_PC_ELEMENTWISE_H
#include "push_constants.h"

#define VKA_PC_BINARY(U, F, UA) U(N)
#define VKA_PC_RESIDUAL_FORWARD_VIEWS(V, VA) V(out) V(a) V(b)
#define VKA_PC_ADD_INPLACE_VIEWS(V, VA) V(dst) V(src) V(unused)
#define VKA_PC_GELU_FORWARD_VIEWS(V, VA) V(out) V(inp) V(unused)
#define VKA_PC_GELU_BACKWARD_VIEWS(V, VA) V(dinp) V(inp) V(dout)
VKA_PC_STRUCT(pc_binary, VKA_PC_RESIDUAL_FORWARD_VIEWS, VKA_PC_BINARY)
VKA_PC_SAME_VIEWS(pc_binary, VKA_PC_ADD_INPLACE_VIEWS)
VKA_PC_SAME_VIEWS(pc_binary, VKA_PC_GELU_FORWARD_VIEWS)
VKA_PC_SAME_VIEWS(pc_binary, VKA_PC_GELU_BACKWARD_VIEWS)

#endif
