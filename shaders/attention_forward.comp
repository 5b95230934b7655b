#version 450
#extension GL_GOOGLE_include_directive : require
// Fused attention forward (src/backend.h, vkb_attention; FlashAttention-2, Dao 2023): each
// query row walks its visible keys in tiles with an online softmax (running max from -inf,
// rescaled once per tile), never storing a Tq x Tk matrix:
//   out = sum_j exp(s_j - m) v_j / l,  lse = m + log(l);  no visible key: out = 0, lse = -inf.
// Keys are summed in ascending order by both row-parallel variants; the split-key path
// (forward_split, few query rows) sums fixed interleaved tiles and combines them in a fixed
// order: deterministic either way.
//
// vka:texel-variant: also built with VKA_TEXEL defined (VKA_SHADER_ATTENTION_FORWARD_TEXEL):
// the CPU-type variant only, reading q, k, v and dout through texel views (attention.glsl),
// for devices with texel_operands when rows are vec4-aligned (VEC).
#include "common.glsl"
#include "attention.glsl"

layout(constant_id = 6) const bool SPLIT = false; // split a row's keys (forward_split below)

// o += p v, where a key of weight p = 0 (masked, padding, past the row's keys) adds nothing:
// selected, never multiplied, so a NaN or Inf in a row no query sees stays out (0 * NaN).
void add_weighted(inout vec4 o, float p, vec4 v) { o += p != 0.0 ? p * v : vec4(0.0); }

// Fold tile scores s (masked: -inf) of one row into its state (m, l, o); returns the scale
// of the tile's keys, p_j = exp(s_j - m_new), into s.
void online_tile(inout float m, inout float l, inout vec4 o[DV], inout float s[TK]) {
    float mt = VKA_NEG_INF;
    [[unroll]] for (uint jj = 0u; jj < TK; jj++) mt = max(mt, s[jj]);
    float mn = max(m, mt);
    if (mn == VKA_NEG_INF) { // nothing visible yet: stays empty (never exp(-inf - -inf))
        [[unroll]] for (uint jj = 0u; jj < TK; jj++) s[jj] = 0.0;
        return;
    }
    float alpha = exp(m - mn);
    float sum = 0.0;
    [[unroll]] for (uint jj = 0u; jj < TK; jj++) {
        s[jj] = s[jj] == VKA_NEG_INF ? 0.0 : exp(s[jj] - mn);
        sum += s[jj];
    }
    l = l * alpha + sum;
    m = mn;
    [[unroll]] for (uint c = 0u; c < DV; c++) o[c] *= alpha;
}

void store_row(uint b, uint h, uint t, float m, float l, vec4 o[DV]) {
    bool empty = l == 0.0;
    float inv = empty ? 0.0 : 1.0 / l;
    uint orow = o_row(b, h, t);
    [[unroll]] for (uint c = 0u; c < DV; c++) st_o(orow, c, empty ? vec4(0.0) : o[c] * inv);
    if ((pc.flags & F_NO_LSE) == 0u) lse_[lse_at(b, h, t)] = empty ? VKA_NEG_INF : m + log(l);
}

// CPU-type: invocation = TQ consecutive query rows; each key row loaded serves all of them.
void forward_cpu() {
    uint per_group = WG * TQ;
    uint nqb = (pc.Tq + per_group - 1u) / per_group;
    uint g = vka_group_id(), bh = g / nqb;
    if (bh >= pc.B * pc.NH) return;
    uint b = bh / pc.NH, h = bh % pc.NH;
    uint t0 = (g % nqb) * per_group + gl_LocalInvocationID.x * TQ;
    if (t0 >= pc.Tq) return;
    uint L = valid_keys(b);

    vec4 q[TQ][DV];
    vec4 o[TQ][DV];
    float m[TQ], l[TQ];
    uint kend[TQ];
    uint kmax = 0u;
    [[unroll]] for (uint r = 0u; r < TQ; r++) {
        uint t = min(t0 + r, pc.Tq - 1u);
        uint qrow = q_row(b, h, t);
        [[unroll]] for (uint c = 0u; c < DV; c++) {
            q[r][c] = ld_q(qrow, c) * pc.scale;
            o[r][c] = vec4(0.0);
        }
        m[r] = VKA_NEG_INF;
        l[r] = 0.0;
        kend[r] = t0 + r < pc.Tq ? visible_end(t, L) : 0u;
        kmax = max(kmax, kend[r]);
    }
    for (uint j0 = 0u; j0 < kmax; j0 += TK) {
        float s[TQ][TK];
        [[unroll]] for (uint jj = 0u; jj < TK; jj++) {
            uint j = min(j0 + jj, pc.Tk - 1u);
            uint krow = k_row(b, h, j);
            vec4 kv[DV];
            [[unroll]] for (uint c = 0u; c < DV; c++) kv[c] = ld_k(krow, c);
            [[unroll]] for (uint r = 0u; r < TQ; r++) {
                uint t = min(t0 + r, pc.Tq - 1u);
                s[r][jj] = j0 + jj < kend[r] ? score(q[r], kv, b, t, j) : VKA_NEG_INF;
            }
        }
        [[unroll]] for (uint r = 0u; r < TQ; r++) online_tile(m[r], l[r], o[r], s[r]);
        [[unroll]] for (uint jj = 0u; jj < TK; jj++) {
            uint vrow = v_row(b, h, min(j0 + jj, pc.Tk - 1u));
            [[unroll]] for (uint c = 0u; c < DV; c++) {
                vec4 vv = ld_v(vrow, c);
                [[unroll]] for (uint r = 0u; r < TQ; r++) add_weighted(o[r][c], s[r][jj], vv);
            }
        }
    }
    [[unroll]] for (uint r = 0u; r < TQ; r++)
        if (t0 + r < pc.Tq) store_row(b, h, t0 + r, m[r], l[r], o[r]);
}

// Split keys (SPLIT, both variants; the host takes it for few query rows, as when decoding
// with a KV cache, where a workgroup of row-parallel invocations would leave all but one idle):
// workgroup = one query row (b, h, t). Invocation i walks key tiles i, i + WG, i + 2 WG, ... of
// TK keys with its own online softmax state (m_i, l_i, o_i); the WG states are then combined
// in invocation order, m = max m_i, w_i = exp(m_i - m), l = sum w_i l_i, o = sum w_i o_i / l
// (Flash-Decoding, Dao et al. 2023). Deterministic: a fixed split and order for a shape.
shared float sh_m[SPLIT ? WG : 1u];
shared float sh_l[SPLIT ? WG : 1u];
shared vec4 sh_o[SPLIT ? WG * DV : 1u];

void forward_split() {
    uint g = vka_group_id(), bh = g / pc.Tq, t = g % pc.Tq;
    if (bh >= pc.B * pc.NH) return; // whole workgroups: barrier below
    uint b = bh / pc.NH, h = bh % pc.NH, lane = gl_LocalInvocationID.x;
    uint kend = visible_end(t, valid_keys(b));

    vec4 q[DV];
    vec4 o[DV];
    uint qrow = q_row(b, h, t);
    [[unroll]] for (uint c = 0u; c < DV; c++) {
        q[c] = ld_q(qrow, c) * pc.scale;
        o[c] = vec4(0.0);
    }
    float m = VKA_NEG_INF, l = 0.0;
    for (uint j0 = lane * TK; j0 < kend; j0 += WG * TK) {
        float s[TK];
        [[unroll]] for (uint jj = 0u; jj < TK; jj++) {
            uint j = min(j0 + jj, pc.Tk - 1u);
            uint krow = k_row(b, h, j);
            vec4 kv[DV];
            [[unroll]] for (uint c = 0u; c < DV; c++) kv[c] = ld_k(krow, c);
            s[jj] = j0 + jj < kend ? score(q, kv, b, t, j) : VKA_NEG_INF;
        }
        online_tile(m, l, o, s);
        [[unroll]] for (uint jj = 0u; jj < TK; jj++) {
            uint vrow = v_row(b, h, min(j0 + jj, pc.Tk - 1u));
            [[unroll]] for (uint c = 0u; c < DV; c++) add_weighted(o[c], s[jj], ld_v(vrow, c));
        }
    }
    sh_m[lane] = m;
    sh_l[lane] = l;
    [[unroll]] for (uint c = 0u; c < DV; c++) sh_o[lane * DV + c] = o[c];
    barrier();
    // Every invocation combines m and l (WG terms, in order); each stores its vec4 columns.
    float mt = VKA_NEG_INF;
    for (uint i = 0u; i < WG; i++) mt = max(mt, sh_m[i]);
    float lt = 0.0;
    for (uint i = 0u; i < WG; i++)
        if (sh_m[i] != VKA_NEG_INF) lt += exp(sh_m[i] - mt) * sh_l[i];
    bool empty = lt == 0.0;
    float inv = empty ? 0.0 : 1.0 / lt;
    uint orow = o_row(b, h, t);
    for (uint c = lane; c < DV; c += WG) {
        vec4 acc = vec4(0.0);
        for (uint i = 0u; i < WG; i++)
            if (sh_m[i] != VKA_NEG_INF) add_weighted(acc, exp(sh_m[i] - mt), sh_o[i * DV + c]);
        st_o(orow, c, empty ? vec4(0.0) : acc * inv);
    }
    if (lane == 0u && (pc.flags & F_NO_LSE) == 0u)
        lse_[lse_at(b, h, t)] = empty ? VKA_NEG_INF : mt + log(lt);
}

#ifdef VKA_TEXEL
void main() {
    if (SPLIT)
        forward_split();
    else
        forward_cpu();
}
#else
// GPU: workgroup = WG consecutive query rows of one (b, h), one per invocation; tiles of TK key
// and value rows staged in shared memory by the whole workgroup.
shared vec4 sh_k[VKA_CPU || SPLIT ? 1u : TK * DV];
shared vec4 sh_v[VKA_CPU || SPLIT ? 1u : TK * DV];

void forward_gpu() {
    uint nqb = (pc.Tq + WG - 1u) / WG;
    uint g = vka_group_id(), bh = g / nqb;
    if (bh >= pc.B * pc.NH) return; // whole workgroups: barriers below
    uint b = bh / pc.NH, h = bh % pc.NH;
    uint tg = (g % nqb) * WG, t = tg + gl_LocalInvocationID.x, tc = min(t, pc.Tq - 1u);
    uint L = valid_keys(b);
    uint kend = t < pc.Tq ? visible_end(tc, L) : 0u;
    uint kmax = last_row_keys(tg, L);

    vec4 q[DV];
    vec4 o[DV];
    uint qrow = q_row(b, h, tc);
    [[unroll]] for (uint c = 0u; c < DV; c++) {
        q[c] = ld_q(qrow, c) * pc.scale;
        o[c] = vec4(0.0);
    }
    float m = VKA_NEG_INF, l = 0.0;
    for (uint j0 = 0u; j0 < kmax; j0 += TK) {
        barrier(); // the previous tile is read
        for (uint e = gl_LocalInvocationID.x; e < TK * DV; e += WG) {
            uint j = min(j0 + e / DV, pc.Tk - 1u), c = e % DV;
            sh_k[e] = ld_k(k_row(b, h, j), c);
            sh_v[e] = ld_v(v_row(b, h, j), c);
        }
        barrier();
        float s[TK];
        [[unroll]] for (uint jj = 0u; jj < TK; jj++) {
            vec4 kv[DV];
            [[unroll]] for (uint c = 0u; c < DV; c++) kv[c] = sh_k[jj * DV + c];
            uint j = j0 + jj;
            s[jj] = j < kend ? score(q, kv, b, tc, j) : VKA_NEG_INF;
        }
        online_tile(m, l, o, s);
        [[unroll]] for (uint jj = 0u; jj < TK; jj++)
            [[unroll]] for (uint c = 0u; c < DV; c++) add_weighted(o[c], s[jj], sh_v[jj * DV + c]);
    }
    if (t < pc.Tq) store_row(b, h, t, m, l, o);
}

void main() {
    if (SPLIT)
        forward_split();
    else if (VKA_CPU)
        forward_cpu();
    else
        forward_gpu();
}
#endif
