// Push constants of matmul.comp (src/vk/vk_ops_matmul.c); see push_constants.h.
#ifndef VKA_PC_MATMUL_H
#define VKA_PC_MATMUL_H
#include "push_constants.h"

#define VKA_PC_MATMUL_VIEWS(V, VA) V(out) V(a) V(b) V(bias)
#define VKA_PC_MATMUL(U, F, UA)                                                              \
    U(M) U(N) U(K) U(batch)                                                                 \
    U(stride_out) U(stride_a) U(stride_b) /* elements between batches */                    \
    U(has_bias) U(accumulate) F(alpha)                                                      \
    U(lda) U(ldb) U(ldo) /* row strides of A, B (as stored) and out: a block of a larger    \
                          * matrix */                                                      \
    U(ln) /* CPU variant: invocations along N (the GPU variant's is specialization constant \
           * LN) */                                                                         \
    U(a_half) U(b_half) /* 16-bit A (B): 1 when its block starts at the high half of its   \
                         * view's first word (a block of a larger product), else 0 */      \
    U(out_half) /* 16-bit out (OUT16): the same for out */
VKA_PC_STRUCT(pc_matmul, VKA_PC_MATMUL_VIEWS, VKA_PC_MATMUL)

#endif
