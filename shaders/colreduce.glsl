// Column reductions (sums over the N rows of an (N, C) matrix) for bias_backward and layernorm's
// dweight/dbias, deterministic and without scratch memory.
//
// Layout. A workgroup owns COLS consecutive columns (specialization constant 1, dividing WG) and
// reduces them over all rows: invocation t works on column col0 + t % COLS and rows
// t / COLS, t / COLS + RL, ... (RL = WG / COLS row lanes), so neighbouring invocations read
// neighbouring columns of a row (coalesced). The RL partial sums of a column are then added in
// a shared-memory tree, a fixed order.
//  - GPU variant: COLS = 16..32, RL = 8..16 row lanes.
//  - CPU-type variant: COLS = WG, RL = 1: one invocation sums its column down all rows (SIMD
//    lanes = neighbouring columns, one vector load per row) and there is no barrier at all.
// Whole workgroups must reach col_reduce() (it holds barriers when RL > 1).
#ifndef VKA_COLREDUCE_GLSL
#define VKA_COLREDUCE_GLSL

layout(constant_id = 1) const uint COLS = 32;

shared vec2 vka_cred[gl_WorkGroupSize.x];

const uint RL = gl_WorkGroupSize.x / COLS;

uint col_index() { return vka_group_id() * COLS + gl_LocalInvocationID.x % COLS; }
uint col_row_lane() { return gl_LocalInvocationID.x / COLS; }

// Sum v over the RL row lanes of this column; the result is valid in row lane 0.
vec2 col_reduce(vec2 v) {
    if (RL == 1u) return v;
    uint t = gl_LocalInvocationID.x;
    vka_cred[t] = v;
    barrier();
    for (uint s = RL / 2u; s > 0u; s >>= 1) {
        if (t / COLS < s) vka_cred[t] += vka_cred[t + s * COLS];
        barrier();
    }
    return vka_cred[t % COLS];
}

#endif
