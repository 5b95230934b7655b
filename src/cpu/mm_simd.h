/* The register block of the fast products (matmul_simd.h's micro-kernel and the fused
 * attention's, attention_simd.h), one instance per ISA (simd_each.h): included by both bodies. */
#ifndef VKC_MM_BLOCK_MAX
#define VKC_MM_BLOCK_MAX 8 /* rows; and 4 vectors */
#endif

/* c (MR rows x NV vectors, row stride ldc) (+)= a (MR, K) . b (K, NV VS_W) (row stride ldb), with
 * a(r, k) = a[r][k * cs] (by_rows), else ap[r * rs + k * cs] (the matmul reads rows where
 * they are, repeating the last past the matrix; the attention's rows are rs apart): each
 * element c0 + sum over k in order, one fused multiply-add per term, c0 c's value (acc) or 0;
 * MR x NV accumulators, NV vectors of b and a broadcast per step.
 * mk (NULL: whole vectors): vector v's lanes; they are loaded and stored by mask where
 * VS_MASK_CHEAP, else only the last vector and only where part. Inlined with constant by_rows,
 * MR, NV, acc and part (MR <= 8, NV <= 4). */
VS_TARGET VS_INLINE void VS_NAME(vkc_mm_block)(float *c, size_t ldc, const bool by_rows,
                                               const float *const *a, const float *ap,
                                               size_t rs, size_t cs,
                                               const float *b, size_t ldb, int K, bool acc,
                                               const int MR, const int NV, const VS_MASK *mk,
                                               const bool part) {
#define MMB_MASKED(v) (mk && (VS_MASK_CHEAP || (part && (v) == NV - 1)))
    const float *ar[VKC_MM_BLOCK_MAX];
    VS_F32 cv[VKC_MM_BLOCK_MAX][4];
    VS_UNROLL
    for (int r = 0; r < MR; r++) {
        if (by_rows) ar[r] = a[r];
        VS_UNROLL
        for (int v = 0; v < NV; v++) {
            const float *p = c + r * ldc + VS_W * v;
            cv[r][v] = !acc ? VS_ZERO() : MMB_MASKED(v) ? VS_LOAD_M(p, mk[v]) : VS_LOAD(p);
        }
    }
    for (int k = 0; k < K; k++) {
        const float *bk = b + (size_t)k * ldb;
        size_t ko = (size_t)k * cs;
        const float *ak = by_rows ? NULL : ap + ko;
        VS_F32 bv[4];
        VS_UNROLL
        for (int v = 0; v < NV; v++)
            bv[v] = MMB_MASKED(v) ? VS_LOAD_M(bk + VS_W * v, mk[v]) : VS_LOAD(bk + VS_W * v);
        VS_UNROLL
        for (int r = 0; r < MR; r++) {
            VS_F32 x = by_rows ? VS_BCAST(ar[r] + ko) : VS_BCAST(ak + r * rs);
            VS_UNROLL
            for (int v = 0; v < NV; v++) cv[r][v] = VS_FMA(x, bv[v], cv[r][v]);
        }
    }
    VS_UNROLL
    for (int r = 0; r < MR; r++)
        VS_UNROLL
        for (int v = 0; v < NV; v++) {
            float *p = c + r * ldc + VS_W * v;
            if (MMB_MASKED(v)) VS_STORE_M(p, mk[v], cv[r][v]);
            else VS_STORE(p, cv[r][v]);
        }
#undef MMB_MASKED
}
