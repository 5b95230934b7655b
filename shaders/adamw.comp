#version 450
#extension GL_GOOGLE_include_directive : require
// AdamW (Loshchilov & Hutter 2019; PyTorch's torch.optim.AdamW), one invocation per parameter:
//   g = grad * gscale[1]; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
//   param -= lr * ((m / bc1) / (sqrt(v / bc2) + eps) + weight_decay * param)
// The step's scalars (lr, betas, eps, bias corrections bc = 1 - beta^t) are read from the hyper
// buffer the host writes before each run, so a recorded training step replays unchanged.
// A clip scale of 0 (grad_norm's answer to a NaN or inf gradient) leaves param, m, v unchanged.
#include "common.glsl"

layout(set = 0, binding = 0) buffer Param { float param[]; };
layout(set = 0, binding = 1) buffer M { float m[]; };
layout(set = 0, binding = 2) buffer V { float v[]; };
layout(set = 0, binding = 3) readonly buffer Grad { float grad[]; };
layout(set = 0, binding = 4) readonly buffer Hyper { float hyper[]; };
layout(set = 0, binding = 5) readonly buffer GScale { float gscale[]; };

layout(push_constant) uniform PC {
    uint param_off, m_off, v_off, grad_off, hyper_off, gscale_off;
    uint N;
    uint has_gscale;
    float weight_decay;
} pc;

// VKA_HYPER_* in vkattn.h
const uint H_LR = 0u, H_BETA1 = 1u, H_BETA2 = 2u, H_EPS = 3u, H_BC1 = 4u, H_BC2 = 5u;

void main() {
    uint i = vka_global_id();
    if (i >= pc.N) return;
    float lr = hyper[pc.hyper_off + H_LR];
    float b1 = hyper[pc.hyper_off + H_BETA1];
    float b2 = hyper[pc.hyper_off + H_BETA2];
    float eps = hyper[pc.hyper_off + H_EPS];
    float bc1 = hyper[pc.hyper_off + H_BC1];
    float bc2 = hyper[pc.hyper_off + H_BC2];
    float g = grad[pc.grad_off + i];
    if (pc.has_gscale != 0u) {
        float scale = gscale[pc.gscale_off + 1u];
        if (scale == 0.0) return; // NaN or inf gradients (grad_norm_finalize.comp): no step
        g *= scale;
    }
    float mi = b1 * m[pc.m_off + i] + (1.0 - b1) * g;
    float vi = b2 * v[pc.v_off + i] + (1.0 - b2) * g * g;
    m[pc.m_off + i] = mi;
    v[pc.v_off + i] = vi;
    float p = param[pc.param_off + i];
    param[pc.param_off + i] = p - lr * ((mi / bc1) / (sqrt(vi / bc2) + eps) + pc.weight_decay * p);
}
