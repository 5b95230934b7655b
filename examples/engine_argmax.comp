#version 450
// examples/engine.c, the engine's work after vkattn's decode step: read the next-token logits
// straight from the session's logits buffer (vka_gpt_session_logits_buffer) and write the
// greedy next token (the first index of the largest logit, as vka_gpt_session_sample's greedy
// choice picks it) and the softmax probabilities into the engine's view buffer, which the host
// reads after the frame and the next frame's particles (engine_simulate.comp) read on the GPU.
// One workgroup; the reductions go through shared memory (no subgroup size assumed).
#define WG 64
layout(local_size_x = WG) in;

layout(std430, set = 0, binding = 0) readonly buffer Logits {
    float logits[]; // (V) from logits_first on
};
layout(std430, set = 0, binding = 1) buffer View {
    uint token;
    float max_logit;
    float sum;
    uint frame;
    float prob[];   // (V)
};
layout(push_constant) uniform Push {
    uint V;
    uint logits_first;
    uint P;
    uint frame;
    float dt;
} pc;

shared float s_val[WG];
shared uint s_idx[WG];

void main() {
    uint i = gl_LocalInvocationID.x;
    // Each invocation's best over its strided share; strict > keeps the first index.
    float best = uintBitsToFloat(0xff800000u); // -inf
    uint idx = 0xffffffffu;
    for (uint v = i; v < pc.V; v += WG) {
        float x = logits[pc.logits_first + v];
        if (x > best) {
            best = x;
            idx = v;
        }
    }
    s_val[i] = best;
    s_idx[i] = idx;
    barrier();
    for (uint s = WG / 2; s > 0; s >>= 1) {
        if (i < s) {
            float o = s_val[i + s];
            uint oi = s_idx[i + s];
            if (o > s_val[i] || (o == s_val[i] && oi < s_idx[i])) {
                s_val[i] = o;
                s_idx[i] = oi;
            }
        }
        barrier();
    }
    best = s_val[0];
    idx = s_idx[0];
    barrier(); // everyone has read s_val[0] before it is reused

    float part = 0.0;
    for (uint v = i; v < pc.V; v += WG) part += exp(logits[pc.logits_first + v] - best);
    s_val[i] = part;
    barrier();
    for (uint s = WG / 2; s > 0; s >>= 1) {
        if (i < s) s_val[i] += s_val[i + s];
        barrier();
    }
    float total = s_val[0];
    for (uint v = i; v < pc.V; v += WG) prob[v] = exp(logits[pc.logits_first + v] - best) / total;
    if (i == 0) {
        token = idx == 0xffffffffu ? 0u : idx; // all -inf or NaN: token 0, as the host's argmax
        max_logit = best;
        sum = total;
        frame = pc.frame;
    }
}
