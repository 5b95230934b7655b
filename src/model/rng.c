/* splitmix64 and the distributions built on it (see rng.h). */
#include "model/rng.h"

#include <math.h>

uint64_t vkm_rng_next(uint64_t *state) {
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

uint64_t vkm_rng_below(uint64_t *state, uint64_t n) {
    /* Reject the top partial block of 2^64 so every residue is equally likely. */
    uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t x;
    do {
        x = vkm_rng_next(state);
    } while (x >= limit);
    return x % n;
}

float vkm_rng_uniform(uint64_t *state) {
    return (float)(vkm_rng_next(state) >> 40) * (1.0f / 16777216.0f);
}

double vkm_rng_uniform_double(uint64_t *state) {
    return (double)(vkm_rng_next(state) >> 11) * (1.0 / 9007199254740992.0);
}

void vkm_rng_normal_fill(uint64_t *state, float *out, size_t n, float mean, float std) {
    const double two_pi = 6.283185307179586476925286766559;
    for (size_t i = 0; i < n; i += 2) {
        /* u1 in (0, 1] so log(u1) is finite. */
        double u1 = 1.0 - vkm_rng_uniform_double(state);
        double u2 = vkm_rng_uniform_double(state);
        double r = sqrt(-2.0 * log(u1));
        out[i] = (float)(mean + std * r * cos(two_pi * u2));
        if (i + 1 < n) out[i + 1] = (float)(mean + std * r * sin(two_pi * u2));
    }
}
