#version 450
#extension GL_GOOGLE_include_directive : require
// Fused attention backward, pass 3 of 3 (src/vk/vk_ops_attention.c; FlashAttention-2, Dao
// 2023, alg. 2): for each query row, over its visible keys j in ascending order,
//   p_j = exp((s_j - lse) - c),  ds_j = p_j (dout . v_j - delta),  dq = scale * sum_j ds_j k_j
// with s recomputed as in the forward and (delta, c) read from dq[b,h,t,0..1]
// (attention_backward_delta) before the row is written. A row with no visible key (lse = -inf,
// padding queries) gets dq = 0.
//
// vka:texel-variant: also built with VKA_TEXEL defined (VKA_SHADER_ATTENTION_BACKWARD_DQ_TEXEL):
// the CPU-type variant only, reading q, k, v and dout through texel views (attention.glsl),
// for devices with texel_operands when rows are vec4-aligned (VEC).
#include "common.glsl"
#include "attention.glsl"

// The contribution of key j to rows whose (q scaled, dout, lse, (delta, c)) are given. A key of
// probability 0 (masked, padding, past the row's keys) adds nothing: selected, never
// multiplied, so a NaN or Inf in its k or v stays out.
void key_step(uint b, uint h, uint j, uint t, bool vis, vec4 q[DV], vec4 dout[DV], float lse,
              vec2 dc, vec4 kv[DV], vec4 vv[DV], inout vec4 acc[DV]) {
    float dp = 0.0;
    [[unroll]] for (uint c = 0u; c < DV; c++) dp += dot(dout[c], vv[c]);
    float p = vis ? prob(score(q, kv, b, t, j), lse, dc.y) : 0.0;
    bool live = p != 0.0; // selects, not a branch: straight-line code in the unrolled loops
    float ds = live ? p * (dp - dc.x) : 0.0;
    [[unroll]] for (uint c = 0u; c < DV; c++) acc[c] += live ? ds * kv[c] : vec4(0.0);
}

// CPU-type: invocation = TQ consecutive query rows.
void dq_cpu() {
    uint per_group = WG * TQ;
    uint nqb = (pc.Tq + per_group - 1u) / per_group;
    uint g = vka_group_id(), bh = g / nqb;
    if (bh >= pc.B * pc.NH) return;
    uint b = bh / pc.NH, h = bh % pc.NH;
    uint t0 = (g % nqb) * per_group + gl_LocalInvocationID.x * TQ;
    if (t0 >= pc.Tq) return;
    uint L = valid_keys(b);

    vec4 q[TQ][DV];
    vec4 dout[TQ][DV];
    vec4 acc[TQ][DV];
    float lse[TQ];
    vec2 dc[TQ];
    uint kend[TQ];
    uint kmax = 0u;
    [[unroll]] for (uint r = 0u; r < TQ; r++) {
        uint t = min(t0 + r, pc.Tq - 1u);
        uint qrow = q_row(b, h, t), drow = do_row(b, h, t);
        [[unroll]] for (uint c = 0u; c < DV; c++) {
            q[r][c] = ld_q(qrow, c) * pc.scale;
            dout[r][c] = ld_do(drow, c);
            acc[r][c] = vec4(0.0);
        }
        lse[r] = lse_[lse_at(b, h, t)];
        dc[r] = delta_corr(b, h, t);
        kend[r] = t0 + r < pc.Tq ? visible_end(t, L) : 0u;
        kmax = max(kmax, kend[r]);
    }
    for (uint j0 = 0u; j0 < kmax; j0 += TK) {
        [[unroll]] for (uint jj = 0u; jj < TK; jj++) {
            uint j = min(j0 + jj, pc.Tk - 1u);
            uint krow = k_row(b, h, j), vrow = v_row(b, h, j);
            vec4 kv[DV];
            vec4 vv[DV];
            [[unroll]] for (uint c = 0u; c < DV; c++) {
                kv[c] = ld_k(krow, c);
                vv[c] = ld_v(vrow, c);
            }
            [[unroll]] for (uint r = 0u; r < TQ; r++)
                key_step(b, h, j, min(t0 + r, pc.Tq - 1u), j0 + jj < kend[r], q[r], dout[r],
                         lse[r], dc[r], kv, vv, acc[r]);
        }
    }
    [[unroll]] for (uint r = 0u; r < TQ; r++) {
        if (t0 + r >= pc.Tq) continue;
        uint dqrow = dq_row(b, h, t0 + r);
        [[unroll]] for (uint c = 0u; c < DV; c++) st_dq(dqrow, c, acc[r][c] * pc.scale);
    }
}

#ifdef VKA_TEXEL
void main() { dq_cpu(); }
#else
// GPU: workgroup = WG query rows, one per invocation; key and value tiles in shared memory.
shared vec4 sh_k[VKA_CPU ? 1u : TK * DV];
shared vec4 sh_v[VKA_CPU ? 1u : TK * DV];

void dq_gpu() {
    uint nqb = (pc.Tq + WG - 1u) / WG;
    uint g = vka_group_id(), bh = g / nqb;
    if (bh >= pc.B * pc.NH) return; // whole workgroups: barriers below
    uint b = bh / pc.NH, h = bh % pc.NH;
    uint tg = (g % nqb) * WG, t = tg + gl_LocalInvocationID.x, tc = min(t, pc.Tq - 1u);
    uint L = valid_keys(b);
    uint kend = t < pc.Tq ? visible_end(tc, L) : 0u;
    uint kmax = last_row_keys(tg, L);

    vec4 q[DV];
    vec4 dout[DV];
    vec4 acc[DV];
    uint qrow = q_row(b, h, tc), drow = do_row(b, h, tc);
    [[unroll]] for (uint c = 0u; c < DV; c++) {
        q[c] = ld_q(qrow, c) * pc.scale;
        dout[c] = ld_do(drow, c);
        acc[c] = vec4(0.0);
    }
    float lse = lse_[lse_at(b, h, tc)];
    vec2 dc = delta_corr(b, h, tc);
    for (uint j0 = 0u; j0 < kmax; j0 += TK) {
        barrier();
        for (uint e = gl_LocalInvocationID.x; e < TK * DV; e += WG) {
            uint j = min(j0 + e / DV, pc.Tk - 1u), c = e % DV;
            sh_k[e] = ld_k(k_row(b, h, j), c);
            sh_v[e] = ld_v(v_row(b, h, j), c);
        }
        barrier();
        [[unroll]] for (uint jj = 0u; jj < TK; jj++) {
            vec4 kv[DV];
            vec4 vv[DV];
            [[unroll]] for (uint c = 0u; c < DV; c++) {
                kv[c] = sh_k[jj * DV + c];
                vv[c] = sh_v[jj * DV + c];
            }
            uint j = min(j0 + jj, pc.Tk - 1u);
            key_step(b, h, j, tc, j0 + jj < kend, q, dout, lse, dc, kv, vv, acc);
        }
    }
    barrier(); // every row has read its delta before any row of dq is written (rows are
               // disjoint, but a row past Tq reads row Tq - 1's)
    if (t >= pc.Tq) return;
    uint dqrow = dq_row(b, h, t);
    [[unroll]] for (uint c = 0u; c < DV; c++) st_dq(dqrow, c, acc[c] * pc.scale);
}

void main() {
    if (VKA_CPU)
        dq_cpu();
    else
        dq_gpu();
}
#endif
