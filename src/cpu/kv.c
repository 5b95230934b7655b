/* KV cache write (shaders/kv_write.comp): the k and v parts of a chunk's qkv rows stored into
 * per-layer caches at a position the host writes between runs, so one recorded graph serves
 * every step of incremental decoding. */
#include "cpu/cpu_ops.h"

void vkc_kv_write(float *kcache, float *vcache, const float *qkv, const int32_t *pos, int T,
                  int NH, int HS, int max_T, int nt) {
    size_t C = (size_t)NH * HS;
    long p0 = pos[0], n = pos[1] < T ? pos[1] : T;
    long rows = (long)NH * T; /* one (h, t) row of HS per item */
    VKA_OMP_FOR(nt, (double)rows * HS > VKA_OMP_MIN_WORK)
    for (long r = 0; r < rows; r++) {
        long h = r / T, t = r % T, p = p0 + t;
        if (t >= n || p < 0 || p >= max_T) continue;
        const float *src = qkv + (size_t)t * 3 * C + (size_t)h * HS; // q part of (3C)
        size_t o = ((size_t)h * max_T + (size_t)p) * HS;
        for (int d = 0; d < HS; d++) {
            kcache[o + d] = src[C + d];
            vcache[o + d] = src[2 * C + d];
        }
    }
}
