// Push constants of peak_fma.comp (src/vk/vk_ops_peak.c); see push_constants.h.
#ifndef VKA_PC_PEAK_H
#define VKA_PC_PEAK_H
#include "push_constants.h"

#define VKA_PC_PEAK_VIEWS(V, VA) V(out)
#define VKA_PC_PEAK(U, F, UA)                                                                \
    U(n) U(iters)                                                                           \
    U(first) /* global index of this dispatch's first element (split at the binding limit) */
VKA_PC_STRUCT(pc_peak, VKA_PC_PEAK_VIEWS, VKA_PC_PEAK)

#endif
