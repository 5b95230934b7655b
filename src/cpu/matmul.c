/* Batched matrix product, the CPU training path's hot loop (shaders/matmul.comp on the GPU).
 *
 * out is cut into MM_MB x MM_NB tiles, one per OpenMP work item. For each tile, K is walked in
 * blocks of MM_KC: the block of op(b) is packed into panels of MM_NR columns (k-major, zero
 * padded past N), so the micro-kernel reads b contiguously whatever trans_b is, and MM_MR rows
 * of op(a) are broadcast against it into register accumulators kept in a small tile buffer
 * between K blocks. Every element is therefore summed over k = 0..K-1 in order, the same for
 * any thread count or tile size: results are deterministic and equal to the naive loop's.
 * Scratch lives on the stack (~48 KiB), so nothing is allocated per call. */
#include "cpu/matmul_tiles.h"

enum {
    MM_MR = 4,   /* rows per micro-kernel */
    MM_NR = 8,   /* columns per micro-kernel (two SSE / one AVX register) */
    MM_MB = 64,  /* rows per tile */
    MM_NB = 64,  /* columns per tile */
    MM_KC = 128, /* k per packed block: MM_KC * MM_NB floats stay in L1/L2 */
};

/* Fully unrolling the column loop keeps the 4 x 8 accumulators in SIMD registers (gcc -O2
 * otherwise keeps them in memory: half the speed). */
#if defined(__clang__)
#define MM_UNROLL _Pragma("unroll")
#elif defined(__GNUC__)
#define MM_UNROLL _Pragma("GCC unroll 8")
#else
#define MM_UNROLL
#endif

#if defined(__GNUC__) || defined(__clang__)
typedef float mm_v4 __attribute__((vector_size(16)));

static inline mm_v4 mm_load(const float *p) {
    mm_v4 v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* c[r][0..MM_NR) += sum_k a(r, k) * bp[k][..] for MM_MR rows (c row stride MM_NB), the 4 x 8
 * accumulators as explicit 4-wide vectors. Written as scalar loops (below), GCC -O3 (Release)
 * vectorised the k loop instead, over the strided a, with shuffles and spills: 20x slower
 * than -O2; vectors leave it nothing to vectorise, at any -O. */
static void kernel_4x8(float *c, const float *a, size_t rs, size_t cs, const float *bp, int kc) {
    mm_v4 c0l = mm_load(c), c0h = mm_load(c + 4), c1l = mm_load(c + MM_NB),
          c1h = mm_load(c + MM_NB + 4), c2l = mm_load(c + 2 * MM_NB),
          c2h = mm_load(c + 2 * MM_NB + 4), c3l = mm_load(c + 3 * MM_NB),
          c3h = mm_load(c + 3 * MM_NB + 4);
    const float *a0 = a, *a1 = a + rs, *a2 = a + 2 * rs, *a3 = a + 3 * rs;
    for (int k = 0; k < kc; k++) {
        mm_v4 bl = mm_load(bp + k * MM_NR), bh = mm_load(bp + k * MM_NR + 4);
        size_t ko = (size_t)k * cs;
        float x0 = a0[ko], x1 = a1[ko], x2 = a2[ko], x3 = a3[ko];
        c0l += x0 * bl, c0h += x0 * bh;
        c1l += x1 * bl, c1h += x1 * bh;
        c2l += x2 * bl, c2h += x2 * bh;
        c3l += x3 * bl, c3h += x3 * bh;
    }
    memcpy(c, &c0l, sizeof c0l), memcpy(c + 4, &c0h, sizeof c0h);
    memcpy(c + MM_NB, &c1l, sizeof c1l), memcpy(c + MM_NB + 4, &c1h, sizeof c1h);
    memcpy(c + 2 * MM_NB, &c2l, sizeof c2l), memcpy(c + 2 * MM_NB + 4, &c2h, sizeof c2h);
    memcpy(c + 3 * MM_NB, &c3l, sizeof c3l), memcpy(c + 3 * MM_NB + 4, &c3h, sizeof c3h);
}
#else
/* c[r][0..MM_NR) += sum_k a(r, k) * bp[k][..] for MM_MR rows (c row stride MM_NB). */
static void kernel_4x8(float *c, const float *a, size_t rs, size_t cs, const float *bp, int kc) {
    float c0[MM_NR], c1[MM_NR], c2[MM_NR], c3[MM_NR];
    memcpy(c0, c + 0 * MM_NB, sizeof c0);
    memcpy(c1, c + 1 * MM_NB, sizeof c1);
    memcpy(c2, c + 2 * MM_NB, sizeof c2);
    memcpy(c3, c + 3 * MM_NB, sizeof c3);
    const float *a0 = a, *a1 = a + rs, *a2 = a + 2 * rs, *a3 = a + 3 * rs;
    for (int k = 0; k < kc; k++) {
        const float *bk = bp + k * MM_NR;
        size_t ko = (size_t)k * cs;
        float x0 = a0[ko], x1 = a1[ko], x2 = a2[ko], x3 = a3[ko];
        MM_UNROLL
        for (int j = 0; j < MM_NR; j++) {
            c0[j] += x0 * bk[j];
            c1[j] += x1 * bk[j];
            c2[j] += x2 * bk[j];
            c3[j] += x3 * bk[j];
        }
    }
    memcpy(c + 0 * MM_NB, c0, sizeof c0);
    memcpy(c + 1 * MM_NB, c1, sizeof c1);
    memcpy(c + 2 * MM_NB, c2, sizeof c2);
    memcpy(c + 3 * MM_NB, c3, sizeof c3);
}
#endif

static void kernel_1x8(float *c, const float *a, size_t cs, const float *bp, int kc) {
    float c0[MM_NR];
    memcpy(c0, c, sizeof c0);
    for (int k = 0; k < kc; k++) {
        const float *bk = bp + k * MM_NR;
        float x0 = a[(size_t)k * cs];
        for (int j = 0; j < MM_NR; j++) c0[j] += x0 * bk[j];
    }
    memcpy(c, c0, sizeof c0);
}

/* One mb x nb tile of one batch: out(i0.., j0..). */
static void matmul_tile(const vkc_mm *mm, void *out, vkc_mm_view a, vkc_mm_view b, int i0,
                        int mb, int j0, int nb, const void *user) {
    (void)user;
    int K = mm->K;
    float acc[MM_MB * MM_NB];
    float bp[MM_KC * MM_NB];
    memset(acc, 0, sizeof acc);
    for (int k0 = 0; k0 < K; k0 += MM_KC) {
        int kc = K - k0 < MM_KC ? K - k0 : MM_KC;
        vkc_mm_pack_b(bp, b, k0, kc, j0, nb, MM_NR);
        for (int p = 0; p < nb; p += MM_NR) {
            const float *bpp = bp + (size_t)p * kc;
            int r = 0;
            for (; r + MM_MR <= mb; r += MM_MR)
                kernel_4x8(acc + r * MM_NB + p, a.p + (size_t)(i0 + r) * a.rs + (size_t)k0 * a.cs,
                           a.rs, a.cs, bpp, kc);
            for (; r < mb; r++)
                kernel_1x8(acc + r * MM_NB + p, a.p + (size_t)(i0 + r) * a.rs + (size_t)k0 * a.cs,
                           a.cs, bpp, kc);
        }
    }
    vkc_mm_epilogue(mm, out, acc, MM_NB, i0, mb, j0, nb);
}

void vkc_matmul_tiles(const vkc_mm *mm, int tile_m, int tile_n, vkc_mm_tile_fn tile,
                      const void *user, int nt) {
    int M = mm->M, N = mm->N, K = mm->K;
    size_t sa = mm->stride_a ? mm->stride_a : (size_t)M * K;
    size_t sb = mm->stride_b ? mm->stride_b : (size_t)K * N;
    size_t so = mm->stride_out ? mm->stride_out : (size_t)M * N;
    long tiles_m = (M + tile_m - 1) / tile_m, tiles_n = (N + tile_n - 1) / tile_n;
    long tiles = (long)mm->batch * tiles_m * tiles_n;
    double work = (double)mm->batch * M * N * K;
    (void)work; /* unused without OpenMP */
    VKA_OMP_FOR_DYNAMIC(nt, work > VKA_OMP_MIN_WORK)
    for (long t = 0; t < tiles; t++) {
        long bi = t / (tiles_m * tiles_n), rest = t % (tiles_m * tiles_n);
        int i0 = (int)(rest / tiles_n) * tile_m, j0 = (int)(rest % tiles_n) * tile_n;
        vkc_mm_view av = {mm->a + (size_t)bi * sa, mm->trans_a ? 1 : (size_t)K,
                          mm->trans_a ? (size_t)M : 1};
        vkc_mm_view bv = {mm->b + (size_t)bi * sb, mm->trans_b ? 1 : (size_t)N,
                          mm->trans_b ? (size_t)K : 1};
        int mb = M - i0 < tile_m ? M - i0 : tile_m, nb = N - j0 < tile_n ? N - j0 : tile_n;
        tile(mm, vkc_mm_out_at(mm->out, mm->out_dtype, (size_t)bi * so), av, bv, i0, mb, j0, nb,
             user);
    }
}

void vkc_matmul_forward(void *out, int out_dtype, const float *a, const float *b,
                        const float *bias, int M, int N, int K, int batch, bool trans_a,
                        bool trans_b, size_t stride_a, size_t stride_b, size_t stride_out,
                        float alpha, bool accumulate, unsigned cvt, int nt) {
    vkc_mm mm = {out, out_dtype, cvt, a, b, bias, M, N, K, batch, trans_a, trans_b,
                 stride_a, stride_b, stride_out, alpha, accumulate};
    vkc_matmul_tiles(&mm, MM_MB, MM_NB, matmul_tile, NULL, nt);
}
