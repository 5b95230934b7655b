#version 450
// examples/engine.c, the engine's own work at the start of a frame (before vkattn's decode
// step): P particles, particle i standing on bar i % V of a bar chart of the tokens, spring
// towards the height of that token's probability in the previous frame, which the argmax pass
// (engine_argmax.comp) left in the view buffer. So the engine's GPU work consumes the model's
// output of the last frame without a trip through the host.
layout(local_size_x = 64) in;

layout(std430, set = 0, binding = 1) readonly buffer View {
    uint token;      // the previous frame's greedy next token
    float max_logit;
    float sum;       // softmax denominator, sum_v exp(logit[v] - max_logit)
    uint frame;      // the frame that wrote it
    float prob[];    // (V) softmax of the logits
};
layout(std430, set = 0, binding = 2) buffer Particles {
    vec4 particles[]; // (P) x, y, unused, vy
};
// Mirrored by engine_push in engine.c.
layout(push_constant) uniform Push {
    uint V;            // vocabulary size
    uint logits_first; // index of the first logit in binding 0 (its offset is aligned down)
    uint P;            // particles
    uint frame;
    float dt;          // simulated seconds per frame
} pc;

void main() {
    uint i = gl_GlobalInvocationID.x;
    if (i >= pc.P) return;
    uint bar = i % pc.V;
    vec4 p = particles[i];
    float target = prob[bar];
    // A damped spring (stiffness 40 /s^2, damping 4 /s), semi-implicit Euler.
    p.w += ((target - p.y) * 40.0 - 4.0 * p.w) * pc.dt;
    p.y += p.w * pc.dt;
    p.x = (float(bar) + 0.5) / float(pc.V);
    particles[i] = p;
}
