// GELU, tanh approximation, and its derivative (Hendrycks & Gimpel 2016; GPT-2's gelu); the
// same evaluation as src/cpu/gelu.c.
//
// 0.5 (1 + tanh(u)) is evaluated as the logistic 1 / (1 + exp(-2u)): the same function without
// the cancellation of 1 + tanh(u) for negative u, and finite for every finite x (u overflows to
// +-inf for |x| > ~1e13, where exp gives 0 or inf and the result is x or -0).
#ifndef VKA_GELU_GLSL
#define VKA_GELU_GLSL

const float GELU_SCALE = 0.7978845608028654; // sqrt(2/pi)
const float GELU_CUBE = 0.044715;

float gelu(float x) {
    float u = GELU_SCALE * (x + GELU_CUBE * x * x * x);
    return x / (1.0 + exp(-2.0 * u));
}

// d/dx x s(2u) = s + x * 2 s (1 - s) u', with s (1 - s) = e / (1 + e)^2 = sech^2(u) / 4. That
// factor underflows to 0 in both tails before x u' can overflow; it is skipped there so that
// 0 * inf never happens.
float gelu_grad(float x) {
    float u = GELU_SCALE * (x + GELU_CUBE * x * x * x);
    float e = exp(-2.0 * u);
    float s = 1.0 / (1.0 + e);
    float grad = s;
    if (e != 0.0 && !isinf(e)) {
        float ope = 1.0 + e;
        float sech2 = 4.0 * (e / ope / ope);
        float du = GELU_SCALE * (1.0 + 3.0 * GELU_CUBE * x * x);
        if (sech2 != 0.0) grad += 0.5 * x * sech2 * du;
    }
    return grad;
}

#endif
