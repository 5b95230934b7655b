// Accumulation helpers for long sums: compensated (Kahan) addition, and strided sums unrolled
// by four (mean, grad_norm, the column sums).
#ifndef VKA_SUMLOOP_GLSL
#define VKA_SUMLOOP_GLSL

// S += X with Kahan compensation in C (S, C of TYPE float or vecN, C starting at 0). One
// invocation may sum a whole row (the CPU-type variant) or thousands of rows (column sums):
// compensation keeps the float32 round-off O(eps) instead of O(n eps), close to the CPU
// reference's double sums. precise: the compiler may neither reassociate nor fuse it away.
#define KAHAN_ADD(TYPE, S, C, X)                                                             \
    {                                                                                        \
        precise TYPE y_ = (X) - (C);                                                         \
        precise TYPE t_ = (S) + y_;                                                          \
        precise TYPE c_ = (t_ - (S)) - y_;                                                   \
        C = c_;                                                                              \
        S = t_;                                                                              \
    }

// ACC (of TYPE) += F(i) for i = START, START + STEP, ... < END, F a function of uint: four
// terms per iteration, added pairwise, then the rest one at a time, into ACC with Kahan
// compensation -- a fixed order, so deterministic. Four independent loads per iteration keep a
// GPU's memory busy; on llvmpipe, where each loop iteration costs more than its loads and all
// loops of an invocation share a budget of 65535 iterations, it divides both by four.
#define UNROLLED_SUM(TYPE, ACC, F, START, END, STEP)                                         \
    {                                                                                        \
        TYPE comp_ = TYPE(0.0);                                                              \
        uint i_ = (START);                                                                   \
        for (; i_ + 3u * (STEP) < (END); i_ += 4u * (STEP))                                  \
            KAHAN_ADD(TYPE, ACC, comp_,                                                      \
                      (F(i_) + F(i_ + (STEP))) + (F(i_ + 2u * (STEP)) + F(i_ + 3u * (STEP))))  \
        for (; i_ < (END); i_ += (STEP)) KAHAN_ADD(TYPE, ACC, comp_, F(i_))                  \
    }

#endif
