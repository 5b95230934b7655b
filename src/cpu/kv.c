/* KV cache write (shaders/kv_write.comp): the k and v parts of a chunk's qkv rows stored into
 * per-layer caches at a position the host writes between runs, so one recorded graph serves
 * every step of incremental decoding. */
#include "cpu/convert.h"
#include "cpu/cpu_ops.h"
#include "vkattn.h" /* vka_dtype */

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

/* The same with 16-bit caches and/or qkv (uint16_t elements; cache_dt, qkv_dt their types, the
 * 16-bit ones alike): each row converted with the convert op's bits (rounding f32 into a 16-bit
 * cache, a copy between like types). Rows sharing a word (odd HS) are distinct uint16_t. */
void vkc_kv_write16(void *kcache, void *vcache, int cache_dt, const void *qkv, int qkv_dt,
                    const int32_t *pos, int T, int NH, int HS, int max_T, unsigned cvt, int nt) {
    size_t C = (size_t)NH * HS, ce = cache_dt == VKA_F32 ? 4 : 2, qe = qkv_dt == VKA_F32 ? 4 : 2;
    long p0 = pos[0], n = pos[1] < T ? pos[1] : T;
    long rows = (long)NH * T;
    VKA_OMP_FOR(nt, (double)rows * HS > VKA_OMP_MIN_WORK)
    for (long r = 0; r < rows; r++) {
        long h = r / T, t = r % T, p = p0 + t;
        if (t >= n || p < 0 || p >= max_T) continue;
        size_t src = (size_t)t * 3 * C + (size_t)h * HS; /* the q part's first element */
        size_t o = ((size_t)h * max_T + (size_t)p) * HS;
        const char *x = (const char *)qkv;
        vkc_convert_serial((char *)kcache + o * ce, cache_dt, x + (src + C) * qe, qkv_dt,
                           (size_t)HS, cvt);
        vkc_convert_serial((char *)vcache + o * ce, cache_dt, x + (src + 2 * C) * qe, qkv_dt,
                           (size_t)HS, cvt);
    }
}
