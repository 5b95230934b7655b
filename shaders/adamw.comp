#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
// AdamW (Loshchilov & Hutter 2019; PyTorch's torch.optim.AdamW), per parameter:
//   g = grad * gscale[1]; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
//   param -= lr * ((m / bc1) / (sqrt(v / bc2) + eps) + weight_decay * param)
// The step's scalars (lr, betas, eps, bias corrections bc = 1 - beta^t) are read from the hyper
// buffer the host writes before each run, so a recorded training step replays unchanged.
// A clip scale of 0 (grad_norm's answer to a NaN or inf gradient) leaves param, m, v unchanged.
// vka:texel-variant: the CPU-type vec4 layout of elementwise.glsl (the same arithmetic per
// element, so the same bits), param, m, v and grad read through texel views (bindings 12-15)
// in the VKA_TEXEL build.
#include "common.glsl"
#include "elementwise.glsl"

layout(set = 0, binding = 0) buffer Param { float param[]; };
layout(set = 0, binding = 1) buffer M { float m[]; };
layout(set = 0, binding = 2) buffer V { float v[]; };
layout(set = 0, binding = 3) readonly buffer Grad { float grad[]; };
layout(set = 0, binding = 4) readonly buffer Hyper { float hyper[]; };
layout(set = 0, binding = 5) readonly buffer GScale { float gscale[]; };
layout(set = 0, binding = 0) buffer Param4 { vec4 param4[]; };
layout(set = 0, binding = 1) buffer M4 { vec4 m4[]; };
layout(set = 0, binding = 2) buffer V4 { vec4 v4[]; };
layout(set = 0, binding = 3) readonly buffer Grad4 { vec4 grad4[]; };
#ifdef VKA_TEXEL
layout(set = 0, binding = 12) uniform samplerBuffer param_tex;
layout(set = 0, binding = 13) uniform samplerBuffer m_tex;
layout(set = 0, binding = 14) uniform samplerBuffer v_tex;
layout(set = 0, binding = 15) uniform samplerBuffer grad_tex;
#endif

#include "pc/adamw.h"
VKA_PC_BLOCK(VKA_PC_ADAMW_VIEWS, VKA_PC_ADAMW)

// VKA_HYPER_* in vkattn.h
const uint H_LR = 0u, H_BETA1 = 1u, H_BETA2 = 2u, H_EPS = 3u, H_BC1 = 4u, H_BC2 = 5u;

float lr, b1, b2, eps, bc1, bc2;

// One parameter's step: p, mi, vi updated in place from gradient g (already scaled).
void step(inout float p, inout float mi, inout float vi, float g) {
    mi = b1 * mi + (1.0 - b1) * g;
    vi = b2 * vi + (1.0 - b2) * g * g;
    p = p - lr * ((mi / bc1) / (sqrt(vi / bc2) + eps) + pc.weight_decay * p);
}

void main() {
    lr = hyper[pc.hyper_off + H_LR];
    b1 = hyper[pc.hyper_off + H_BETA1];
    b2 = hyper[pc.hyper_off + H_BETA2];
    eps = hyper[pc.hyper_off + H_EPS];
    bc1 = hyper[pc.hyper_off + H_BC1];
    bc2 = hyper[pc.hyper_off + H_BC2];
    float scale = 1.0;
    if (pc.has_gscale != 0u) {
        scale = gscale[pc.gscale_off + 1u];
        if (scale == 0.0) return; // NaN or inf gradients (grad_norm_finalize.comp): no step
    }
    if (VEC4S == 0u) {
        uint i = vka_global_id();
        if (i >= pc.N) return;
        float g = grad[pc.grad_off + i];
        if (pc.has_gscale != 0u) g *= scale;
        float p = param[pc.param_off + i], mi = m[pc.m_off + i], vi = v[pc.v_off + i];
        step(p, mi, vi, g);
        m[pc.m_off + i] = mi;
        v[pc.v_off + i] = vi;
        param[pc.param_off + i] = p;
        return;
    }
    [[unroll]] for (uint r = 0u; r < VEC4S; r++) {
        uint q = vec4_index(r);
        if (q >= pc.N >> 2) return;
        uint pq = (pc.param_off >> 2) + q, mq = (pc.m_off >> 2) + q, vq = (pc.v_off >> 2) + q;
        vec4 g = VKA_LOAD4(grad_tex, grad4, (pc.grad_off >> 2) + q);
        if (pc.has_gscale != 0u) g *= scale;
        vec4 p = VKA_LOAD4(param_tex, param4, pq);
        vec4 mi = VKA_LOAD4(m_tex, m4, mq), vi = VKA_LOAD4(v_tex, v4, vq);
        step(p.x, mi.x, vi.x, g.x);
        step(p.y, mi.y, vi.y, g.y);
        step(p.z, mi.z, vi.z, g.z);
        step(p.w, mi.w, vi.w, g.w);
        m4[mq] = mi;
        v4[vq] = vi;
        param4[pq] = p;
    }
}
