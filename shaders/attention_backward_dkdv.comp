#version 450
#extension GL_GOOGLE_include_directive : require
// Fused attention backward, pass 2 of 3 (src/vk/vk_ops_attention.c; FlashAttention-2, Dao
// 2023, alg. 2): for each key row j, over the queries t that see it in ascending order,
//   p = exp((s_tj - lse_t) - c_t),  dv_j = sum_t p dout_t,
//   dk_j = sum_t p (dout_t . v_j - delta_t) (scale q_t)
// with s recomputed as in the forward and (delta_t, c_t) read from dq[b,h,t,0..1]
// (attention_backward_delta). Keys no query sees (padding, causal) get dk = dv = 0; padding
// queries (query_end) add to no key.
//
// vka:texel-variant: also built with VKA_TEXEL defined (VKA_SHADER_ATTENTION_BACKWARD_DKDV_TEXEL):
// the CPU-type variant only, reading q, k, v and dout through texel views (attention.glsl),
// for devices with texel_operands when rows are vec4-aligned (VEC).
#include "common.glsl"
#include "attention.glsl"

// The contribution of query t (its q scaled, dout, lse, (delta, c)) to key j. A query of
// probability 0 for this key (masked, padding, before the key causally) adds nothing:
// selected, never multiplied, so a NaN or Inf in its q or dout stays out.
void query_step(uint b, uint t, uint j, bool vis, vec4 q[DV], vec4 dout[DV], float lse,
                vec2 dc, vec4 kv[DV], vec4 vv[DV], inout vec4 dk[DV], inout vec4 dv[DV]) {
    float p = vis ? prob(score(q, kv, b, t, j), lse, dc.y) : 0.0;
    bool live = p != 0.0; // selects, not a branch: straight-line code in the unrolled loops
    float dp = 0.0;
    [[unroll]] for (uint c = 0u; c < DV; c++) dp += dot(dout[c], vv[c]);
    float ds = live ? p * (dp - dc.x) : 0.0;
    [[unroll]] for (uint c = 0u; c < DV; c++) {
        dv[c] += live ? p * dout[c] : vec4(0.0);
        dk[c] += live ? ds * q[c] : vec4(0.0);
    }
}

void store_key(uint b, uint h, uint j, vec4 dk[DV], vec4 dv[DV]) {
    uint dkrow = dk_row(b, h, j), dvrow = dv_row(b, h, j);
    [[unroll]] for (uint c = 0u; c < DV; c++) {
        st_dk(dkrow, c, dk[c]);
        st_dv(dvrow, c, dv[c]);
    }
}

// CPU-type: invocation = TQ consecutive key rows; each query row loaded serves all of them.
void dkdv_cpu() {
    uint per_group = WG * TQ;
    uint nkb = (pc.Tk + per_group - 1u) / per_group;
    uint g = vka_group_id(), bh = g / nkb;
    if (bh >= pc.B * pc.NH) return;
    uint b = bh / pc.NH, h = bh % pc.NH;
    uint j0 = (g % nkb) * per_group + gl_LocalInvocationID.x * TQ;
    if (j0 >= pc.Tk) return;
    uint L = valid_keys(b);

    vec4 kv[TQ][DV];
    vec4 vv[TQ][DV];
    vec4 dk[TQ][DV];
    vec4 dv[TQ][DV];
    uint tfirst[TQ];
    uint tmin = pc.Tq;
    [[unroll]] for (uint r = 0u; r < TQ; r++) {
        uint j = min(j0 + r, pc.Tk - 1u);
        uint krow = k_row(b, h, j), vrow = v_row(b, h, j);
        [[unroll]] for (uint c = 0u; c < DV; c++) {
            kv[r][c] = ld_k(krow, c);
            vv[r][c] = ld_v(vrow, c);
            dk[r][c] = vec4(0.0);
            dv[r][c] = vec4(0.0);
        }
        tfirst[r] = j0 + r < pc.Tk ? first_query(j, L) : pc.Tq;
        tmin = min(tmin, tfirst[r]);
    }
    // queries tmin .. tend - 1, TK per step (the last step's extra queries are clamped, unseen)
    uint tend = query_end(L);
    for (uint t0 = tmin; t0 < tend; t0 += TK) {
        [[unroll]] for (uint tt = 0u; tt < TK; tt++) {
            uint t = min(t0 + tt, pc.Tq - 1u);
            uint qrow = q_row(b, h, t), drow = do_row(b, h, t);
            vec4 q[DV];
            vec4 dout[DV];
            [[unroll]] for (uint c = 0u; c < DV; c++) {
                q[c] = ld_q(qrow, c) * pc.scale;
                dout[c] = ld_do(drow, c);
            }
            float lse = lse_[lse_at(b, h, t)];
            vec2 dc = delta_corr(b, h, t);
            bool in_t = t0 + tt < tend;
            [[unroll]] for (uint r = 0u; r < TQ; r++)
                query_step(b, t, min(j0 + r, pc.Tk - 1u), in_t && t >= tfirst[r], q, dout, lse,
                           dc, kv[r], vv[r], dk[r], dv[r]);
        }
    }
    [[unroll]] for (uint r = 0u; r < TQ; r++)
        if (j0 + r < pc.Tk) store_key(b, h, j0 + r, dk[r], dv[r]);
}

#ifdef VKA_TEXEL
void main() { dkdv_cpu(); }
#else
// GPU: workgroup = WG key rows, one per invocation; tiles of TK query rows (q, dout, lse,
// delta) in shared memory.
shared vec4 sh_q[VKA_CPU ? 1u : TK * DV];
shared vec4 sh_do[VKA_CPU ? 1u : TK * DV];
shared vec3 sh_ld[VKA_CPU ? 1u : TK]; // (lse, delta, c)

void dkdv_gpu() {
    uint nkb = (pc.Tk + WG - 1u) / WG;
    uint g = vka_group_id(), bh = g / nkb;
    if (bh >= pc.B * pc.NH) return; // whole workgroups: barriers below
    uint b = bh / pc.NH, h = bh % pc.NH;
    uint jg = (g % nkb) * WG, j = jg + gl_LocalInvocationID.x, jc = min(j, pc.Tk - 1u);
    uint L = valid_keys(b);
    uint tfirst = j < pc.Tk ? first_query(jc, L) : pc.Tq;
    uint tmin = first_query(jg, L); // first_query grows with j (up to L, then Tq)

    vec4 kv[DV];
    vec4 vv[DV];
    vec4 dk[DV];
    vec4 dv[DV];
    uint krow = k_row(b, h, jc), vrow = v_row(b, h, jc);
    [[unroll]] for (uint c = 0u; c < DV; c++) {
        kv[c] = ld_k(krow, c);
        vv[c] = ld_v(vrow, c);
        dk[c] = vec4(0.0);
        dv[c] = vec4(0.0);
    }
    uint tend = query_end(L);
    for (uint t0 = tmin; t0 < tend; t0 += TK) {
        barrier();
        for (uint e = gl_LocalInvocationID.x; e < TK * DV; e += WG) {
            uint t = min(t0 + e / DV, pc.Tq - 1u), c = e % DV;
            sh_q[e] = ld_q(q_row(b, h, t), c) * pc.scale;
            sh_do[e] = ld_do(do_row(b, h, t), c);
        }
        for (uint e = gl_LocalInvocationID.x; e < TK; e += WG) {
            uint t = min(t0 + e, pc.Tq - 1u);
            sh_ld[e] = vec3(lse_[lse_at(b, h, t)], delta_corr(b, h, t));
        }
        barrier();
        [[unroll]] for (uint tt = 0u; tt < TK; tt++) {
            vec4 q[DV];
            vec4 dout[DV];
            [[unroll]] for (uint c = 0u; c < DV; c++) {
                q[c] = sh_q[tt * DV + c];
                dout[c] = sh_do[tt * DV + c];
            }
            uint t = t0 + tt;
            vec3 ld = sh_ld[tt];
            query_step(b, min(t, pc.Tq - 1u), jc, t < tend && t >= tfirst, q, dout, ld.x, ld.yz,
                       kv, vv, dk, dv);
        }
    }
    if (j < pc.Tk) store_key(b, h, j, dk, dv);
}

void main() {
    if (VKA_CPU)
        dkdv_cpu();
    else
        dkdv_gpu();
}
#endif
