// Euclidean norm without overflow or underflow for every finite float input: Blue's algorithm
// (Blue 1978, "A portable Fortran program to find the Euclidean norm of a vector"; LAPACK 3.10's
// snrm2, Anderson 2017). Squares are summed in three accumulators by magnitude, each scaled by a
// power of two (exact) so that it stays in range; no division per element, and the sums stay
// plain, so Kahan compensation and a fixed-order reduction still apply (deterministic).
//
// An accumulator is vec4(big, medium, small, infinities):
//   |x| > NRM2_TBIG:   big += (|x| * NRM2_SBIG)^2
//   |x| < NRM2_TSML:   small += (|x| * NRM2_SSML)^2
//   otherwise (and NaN): medium += x^2
//   |x| = inf:        infinities += 1 (not added to big, where Kahan's inf - inf would be NaN)
// nrm2_result gives NaN if any x was NaN, else inf if any was infinite (as a plain sum would).
// src/cpu/reduce.c sums the squares in double instead, which no float can overflow.
#ifndef VKA_NRM2_GLSL
#define VKA_NRM2_GLSL

// Medium squares are at most 2^80 (LAPACK's 2^52 would allow 2^104), so 2^48 of them fit in a
// float sum; big ones are scaled into (2^-72, 2^104].
const float NRM2_TSML = 1.0842021724855044e-19;  // 2^-63
const float NRM2_SSML = 3.7778931862957162e22;   // 2^75
const float NRM2_TBIG = 1099511627776.0;         // 2^40
const float NRM2_SBIG = 1.3234889800848443e-23;  // 2^-76

vec4 nrm2_term(float x) {
    float a = abs(x);
    if (isinf(a)) return vec4(0.0, 0.0, 0.0, 1.0);
    if (a > NRM2_TBIG) {
        float s = a * NRM2_SBIG;
        return vec4(s * s, 0.0, 0.0, 0.0);
    }
    if (a < NRM2_TSML) {
        float s = a * NRM2_SSML;
        return vec4(0.0, 0.0, s * s, 0.0);
    }
    return vec4(0.0, a * a, 0.0, 0.0);
}

float nrm2_result(vec4 acc) {
    if (isnan(acc.x) || isnan(acc.y) || isnan(acc.z)) return uintBitsToFloat(0x7FC00000u);
    if (acc.w > 0.0) return 1.0 / 0.0;
    if (acc.x > 0.0) return sqrt(acc.x + (acc.y * NRM2_SBIG) * NRM2_SBIG) / NRM2_SBIG;
    if (acc.z > 0.0) {
        float small = sqrt(acc.z) / NRM2_SSML;
        if (!(acc.y > 0.0)) return small;
        float med = sqrt(acc.y), hi = max(med, small), lo = min(med, small);
        return hi * sqrt(1.0 + (lo / hi) * (lo / hi));
    }
    return sqrt(acc.y);
}

#endif
