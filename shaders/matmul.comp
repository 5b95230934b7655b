#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
// Batched row-major matrix product (src/backend.h, vkb_matmul):
//   out[b] = alpha * op(A[b]) * op(B[b]) (+ bias) (+ out[b] if accumulate)
// op(A) is (M, K): A stored (M, K), or (K, M) when trans_a; op(B) is (K, N): B stored (K, N), or
// (N, K) when trans_b. Each workgroup computes one BM x BN tile of one batch's out, summing
// k = 0..K-1 in order, so results do not depend on the dispatch.
#include "matmul.glsl"
