// Push constants of convert.comp (pc_convert: src/vk/vk_ops_elementwise.c); see
// push_constants.h. N: the elements of this block (of either view's type).
#ifndef VKA_PC_CONVERT_H
#define VKA_PC_CONVERT_H
#include "push_constants.h"

#define VKA_PC_CONVERT(U, F, UA) U(N)
#define VKA_PC_CONVERT_VIEWS(V, VA) V(dst) V(src)
VKA_PC_STRUCT(pc_convert, VKA_PC_CONVERT_VIEWS, VKA_PC_CONVERT)

#endif
