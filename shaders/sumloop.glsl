// Strided sums with loops unrolled by four (mean, grad_norm and the column sums).
#ifndef VKA_SUMLOOP_GLSL
#define VKA_SUMLOOP_GLSL

// ACC += F(i) for i = START, START + STEP, ... < END, F a function of uint: four terms per
// iteration, added pairwise, then the rest one at a time -- a fixed order, so deterministic.
// Four independent loads per iteration keep a GPU's memory busy; on llvmpipe, where each loop
// iteration costs much more than its loads and all loops of an invocation share a budget of
// 65535 iterations, it divides both by four.
#define UNROLLED_SUM(ACC, F, START, END, STEP)                                               \
    {                                                                                        \
        uint i_ = (START);                                                                   \
        for (; i_ + 3u * (STEP) < (END); i_ += 4u * (STEP))                                  \
            ACC += (F(i_) + F(i_ + (STEP))) + (F(i_ + 2u * (STEP)) + F(i_ + 3u * (STEP)));     \
        for (; i_ < (END); i_ += (STEP)) ACC += F(i_);                                       \
    }

#endif
