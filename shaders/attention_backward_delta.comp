#version 450
#extension GL_GOOGLE_include_directive : require
// Fused attention backward, pass 1 of 3 (src/vk/vk_ops_attention.c): per query row,
//   delta[b,h,t] = sum_d dout[b,h,t,d] * out[b,h,t,d], the row term of the softmax gradient
//   (FlashAttention-2, Dao 2023, alg. 2), and
//   c[b,h,t], the correction of the row's lse: P = exp((s - lse) - c) in the other passes.
// They are kept in dq's first two elements of the row, dq[b,h,t,0..1] (HS = 1: c alone, see
// delta_corr), which the dk/dv pass reads and the dq pass reads before it overwrites the row:
// the op needs no scratch tensor. One invocation per row, both variants.
//
// Why c: lse = m + log(l) is a float, so with |lse| large its rounding swallows log(l) (a row
// every key masks with -1e30: lse = -1e30 exactly, and exp(s - lse) = 1 per key instead of
// 1/Tk). Such rows (|lse| >= LSE_EXACT) recompute their max m and sum l here with the other
// passes' score arithmetic and store c = (m - lse) + log(l) (m - lse exact, Sterbenz), so that
// (s - lse) - c = (s - m) - log(l) to float rounding. Below LSE_EXACT, lse's rounding moves P
// by at most 2^-17 relative and c = 0: P is exp(s - lse) bitwise, at no cost.
#include "common.glsl"
#include "attention.glsl"

const float LSE_EXACT = 256.0; // src/cpu/attention.c AT_LSE_EXACT

float row_corr(uint b, uint h, uint t, float lse) {
    uint kend = visible_end(t, valid_keys(b));
    uint qrow = q_row(b, h, t);
    vec4 q[DV];
    [[unroll]] for (uint c = 0u; c < DV; c++) q[c] = ld_q(qrow, c) * pc.scale;
    float m = VKA_NEG_INF;
    for (uint j = 0u; j < kend; j++) {
        uint krow = k_row(b, h, j);
        vec4 kv[DV];
        [[unroll]] for (uint c = 0u; c < DV; c++) kv[c] = ld_k(krow, c);
        m = max(m, score(q, kv, b, t, j));
    }
    if (isinf(m) || isnan(m)) return 0.0;
    float l = 0.0;
    for (uint j = 0u; j < kend; j++) {
        uint krow = k_row(b, h, j);
        vec4 kv[DV];
        [[unroll]] for (uint c = 0u; c < DV; c++) kv[c] = ld_k(krow, c);
        float s = score(q, kv, b, t, j);
        l += s == VKA_NEG_INF ? 0.0 : exp(s - m);
    }
    return (m - lse) + log(l);
}

void main() {
    uint i = vka_global_id();
    if (i >= pc.B * pc.NH * pc.Tq) return;
    uint t = i % pc.Tq, bh = i / pc.Tq, b = bh / pc.NH, h = bh % pc.NH;
    float lse = lse_[lse_at(b, h, t)];
    float c = 0.0;
    if (abs(lse) >= LSE_EXACT && !isinf(lse) && !isnan(lse)) c = row_corr(b, h, t, lse);
    uint r = dq_row(b, h, t);
    if (pc.HS == 1u) {
        dq_[r] = c;
    } else {
        dq_[r] = row_delta(b, h, t);
        dq_[r + 1u] = c;
    }
}
