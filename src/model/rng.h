/*
 * Deterministic random numbers for the model (initialisation, sampling), the data (batch
 * windows) and the built-in corpus.
 *
 * The generator is splitmix64 (Steele, Lea & Flood, "Fast splittable pseudorandom number
 * generators", OOPSLA 2014; the constants of Vigna's reference splitmix64.c): the whole state is
 * one uint64_t that advances by a fixed odd constant per draw, and each output is a bijective
 * mix of the state. Any state value, 0 included, is a good seed, so a state saved to a file and
 * read back continues the exact same sequence (vka_train_state.rng_state relies on this).
 * Not for cryptography.
 */
#ifndef VKM_RNG_H
#define VKM_RNG_H

#include <stddef.h>
#include <stdint.h>

/* Next 64 random bits; advances *state. */
uint64_t vkm_rng_next(uint64_t *state);
/* Uniform integer in [0, n) without modulo bias (rejection); n > 0. */
uint64_t vkm_rng_below(uint64_t *state, uint64_t n);
/* Uniform float in [0, 1) with 24 random bits. */
float vkm_rng_uniform(uint64_t *state);
/* Uniform double in [0, 1) with 53 random bits. */
double vkm_rng_uniform_double(uint64_t *state);
/* out[0:n] = mean + std * N(0, 1) by the Box-Muller transform (Box & Muller 1958): each pair
 * of outputs uses two uniforms (the second of a pair is dropped when n is odd). */
void vkm_rng_normal_fill(uint64_t *state, float *out, size_t n, float mean, float std);

#endif
