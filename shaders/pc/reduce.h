// Push constants of the reductions mean.comp, grad_norm_partials.comp, grad_norm_finalize.comp
// and bias_backward.comp (src/vk/vk_ops_reduce.c); see push_constants.h.
#ifndef VKA_PC_REDUCE_H
#define VKA_PC_REDUCE_H
#include "push_constants.h"

#define VKA_PC_MEAN_VIEWS(V, VA) V(out) V(inp)
#define VKA_PC_MEAN(U, F, UA)                                                                \
    U(N)          /* elements of this dispatch's block */                                   \
    U(accumulate) /* add to out (a later block of a split input) instead of writing it */   \
    F(total)      /* elements of the whole input (the divisor) */
VKA_PC_STRUCT(pc_mean, VKA_PC_MEAN_VIEWS, VKA_PC_MEAN)

/* partials of this dispatch's first tensor, then up to 7 gradient tensors */
#define VKA_PC_NORM_PARTIALS_VIEWS(V, VA) V(partials) VA(g, 7)
#define VKA_PC_NORM_PARTIALS(U, F, UA)                                                       \
    UA(n, 7)      /* elements of each tensor; 0 past the dispatch's last one */             \
    U(accumulate) /* bit j: tensor j is a later piece of a gradient split at the binding    \
                   * limit: add to its partials instead of writing them */
VKA_PC_STRUCT(pc_norm_partials, VKA_PC_NORM_PARTIALS_VIEWS, VKA_PC_NORM_PARTIALS)

#define VKA_PC_NORM_FINALIZE_VIEWS(V, VA) V(out) V(partials) V(hyper)
#define VKA_PC_NORM_FINALIZE(U, F, UA)                                                       \
    U(n_partials) F(max_norm)                                                               \
    U(accumulate) /* a later block of partials split at the binding limit: out[0] holds the \
                   * norm of the earlier ones */                                            \
    U(last)       /* the last block: write the clip scale too */                           \
    U(has_hyper)  /* hyper bound: unscale by its VKB_HYPER_GRAD_SCALE (loss scaling) */
VKA_PC_STRUCT(pc_norm_finalize, VKA_PC_NORM_FINALIZE_VIEWS, VKA_PC_NORM_FINALIZE)

#define VKA_PC_BIAS_BACKWARD_VIEWS(V, VA) V(dbias) V(dout)
#define VKA_PC_BIAS_BACKWARD(U, F, UA) U(N) U(OC)
VKA_PC_STRUCT(pc_bias_backward, VKA_PC_BIAS_BACKWARD_VIEWS, VKA_PC_BIAS_BACKWARD)

#endif
