// GELU, tanh approximation, and its derivative (Hendrycks & Gimpel 2016; GPT-2's gelu).
#ifndef VKA_GELU_GLSL
#define VKA_GELU_GLSL

const float GELU_SCALE = 0.7978845608028654; // sqrt(2/pi)

// tanh that saturates to +-1 for large |u| and never divides inf by inf.
float vka_tanh(float u) {
    float e = exp(-2.0 * abs(u)); // in (0, 1]: no overflow
    float t = (1.0 - e) / (1.0 + e);
    return u < 0.0 ? -t : t;
}

float gelu(float x) {
    float u = GELU_SCALE * (x + 0.044715 * x * x * x);
    return 0.5 * x * (1.0 + vka_tanh(u));
}

// d/dx gelu = 0.5 (1 + tanh u) + 0.5 x sech^2(u) du/dx, sech^2 = 1 - tanh^2. Where tanh has
// saturated (sech^2 == 0) the second term is 0 exactly; skipping it avoids 0 * inf when x^3
// overflows.
float gelu_grad(float x) {
    float u = GELU_SCALE * (x + 0.044715 * x * x * x);
    float t = vka_tanh(u);
    float sech2 = 1.0 - t * t;
    if (sech2 == 0.0) return 0.5 * (1.0 + t);
    float du = GELU_SCALE * (1.0 + 3.0 * 0.044715 * x * x);
    return 0.5 * (1.0 + t) + 0.5 * x * sech2 * du;
}

#endif
