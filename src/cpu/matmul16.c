/* The CPU backend's 16-bit matrix product (matmul16.h): a tile driver as the fp32 matmul's
 * (matmul.c: out cut into BM_MB x BM_NB tiles, one per OpenMP work item, K walked in blocks of
 * BM_KC per tile), with three ways to compute a tile, and for few rows of a a GEMV instead:
 *
 *  - the reference: scalar loops, each output summed over k in order;
 *  - widening (AVX2, AVX-512F; bf16 or fp16): the block widened to fp32 (bm_widen: along the
 *    operand's contiguous dimension, through the fast conversions of convert.h) and the fp32
 *    fast kernel's register block (matmul16_simd.h), one body for both types;
 *  - vdpbf16ps (AVX512-BF16, bf16 only), packed as oneDNN's and ggml's bf16 GEMMs pack for it
 *    ("VNNI layout"): op(b)'s block into panels of 32 columns, each k pair (k, k + 1) of a column
 *    adjacent, so a 32-bit lane holds one column's pair and a zmm register 16 columns; op(a)'s
 *    block into groups of 8 rows, each row's pair one 32-bit word, broadcast to every lane. The
 *    8 x 32 micro-kernel keeps 16 accumulators in registers; one vdpbf16ps does 16 lanes x 2
 *    products. A block of K is BM_KC = 256 (even, so pairs never straddle blocks); an odd K's
 *    last pair is padded with zeros;
 *  - the GEMV (the fast paths, M <= VKC_MM16_GEMV_MAX_M, a and b contiguous along K: decoding
 *    one token): a's rows widened once per block of GV_KB, each row of b streamed once and
 *    widened in registers into 32 strands of fused multiply-adds (matmul16_gemv_simd.h); work
 *    items of GV_NC columns.
 *
 * Every path sums each output in the order matmul16.h states, whatever the tile sizes or the
 * thread count. Scratch lives on the stack (~280 KiB per tile, ~200 KiB per GEMV item). */
#define _DEFAULT_SOURCE /* syscall: amx_permitted */
#include "cpu/matmul16.h"

#include "cpu/cpu_ops.h"
#include "cpu/matmul_tiles.h" /* vkc_mm_epilogue16, vkc_mm_out_at: a 16-bit out */
#include "cpu/simd.h"

#ifdef VKC_X86
#include <cpuid.h> /* __get_cpuid_count: amx_bf16_cpuid */
#endif
#ifdef __linux__
#include <sys/syscall.h> /* SYS_arch_prctl: amx_permitted */
#include <unistd.h>
#endif

enum {
    BM_MB = 96,  /* rows per tile: a multiple of 8 and 6 */
    BM_NB = 128, /* columns per tile: a multiple of 32 and 16 */
    BM_KC = 256, /* k per block: even */
};
_Static_assert((int)BM_NB <= VKC_MM_MAX_NB, "a tile wider than a 16-bit out's epilogue row");

/* op(x)(r, c) = p[r * rs + c * cs] */
typedef struct bm_view {
    const uint16_t *p;
    size_t rs, cs;
} bm_view;

typedef struct bm_mm {
    void *out;     /* float32, or 16-bit words (uint16_t) when out_dtype is 16-bit */
    int out_dtype; /* VKA_F32, VKA_BF16 or VKA_F16 */
    unsigned cvt;  /* a 16-bit out's narrowing: the conversions it may use (vkc_cvt_features) */
    const uint16_t *a, *b;
    const float *bias;
    int M, N, K, batch;
    bool trans_a, trans_b;
    size_t stride_a, stride_b, stride_out;
    float alpha;
    bool accumulate;
    vka_dtype type; /* of a and b: VKA_BF16 or VKA_F16 */
    unsigned feat;  /* the conversions the widening path may use (vkc_cvt_features) */
} bm_mm;

static inline uint16_t bm_at(bm_view v, int r, int c) {
    return v.p[(size_t)r * v.rs + (size_t)c * v.cs];
}

/* n consecutive elements widened to fp32 (exact), through the fast conversions mm->feat
 * allows (0: the reference's). */
static void bm_widen_run(const bm_mm *mm, float *dst, const uint16_t *src, int n) {
    if (mm->type == VKA_F16) vkc_f16_to_f32(dst, src, (size_t)n, mm->feat);
    else vkc_bf16_to_f32(dst, src, (size_t)n, mm->feat);
}

/* dst[r * drs + c * dcs] = op(x)(r0 + r, c0 + c) widened to fp32, r < rows, c < cols (each at
 * most BM_KC): a run ("line") at a time along x's contiguous dimension, straight into dst where
 * dst is contiguous that way too; else 8 lines into a buffer, then written out element by
 * element, 8 adjacent floats at a time where dst is contiguous across lines (a transposed
 * operand). */
static void bm_widen(const bm_mm *mm, float *dst, size_t drs, size_t dcs, bm_view x, int r0,
                     int rows, int c0, int cols) {
    enum { G = 8 };
    float run[G][BM_KC];
    bool along_rows = x.cs == 1; /* else x.rs == 1: columns contiguous */
    int lines = along_rows ? rows : cols, len = along_rows ? cols : rows;
    size_t dline = along_rows ? drs : dcs, dstep = along_rows ? dcs : drs;
    for (int l0 = 0; l0 < lines; l0 += G) {
        int g_n = lines - l0 < G ? lines - l0 : G;
        for (int g = 0; g < g_n; g++) {
            int l = l0 + g;
            const uint16_t *src = along_rows ? &x.p[(size_t)(r0 + l) * x.rs + (size_t)c0]
                                             : &x.p[(size_t)r0 + (size_t)(c0 + l) * x.cs];
            bm_widen_run(mm, dstep == 1 ? dst + (size_t)l * dline : run[g], src, len);
        }
        if (dstep == 1) continue;
        for (int e = 0; e < len; e++) {
            float *d = dst + (size_t)l0 * dline + (size_t)e * dstep;
            for (int g = 0; g < g_n; g++) d[(size_t)g * dline] = run[g][e];
        }
    }
}

/* out(i0 + r, j0 + j) = alpha * acc[r * BM_NB + j], + bias, + out if accumulate: the fp32
 * matmul's epilogue (matmul_tiles.h's vkc_mm_epilogue, the same operations in the same order);
 * a 16-bit out: its vkc_mm_epilogue16. */
static void bm_epilogue(const bm_mm *mm, void *out, const float *acc, int i0, int mb, int j0,
                        int nb) {
    const float alpha = mm->alpha, *bias = mm->bias;
    const bool accumulate = mm->accumulate;
    if (mm->out_dtype != VKA_F32) {
        vkc_mm_epilogue16(out, mm->out_dtype, mm->cvt, mm->N, alpha, bias, acc, BM_NB, i0, mb,
                          j0, nb);
        return;
    }
    for (int r = 0; r < mb; r++) {
        float *restrict o = (float *)out + (size_t)(i0 + r) * mm->N + j0;
        const float *restrict s = acc + (size_t)r * BM_NB;
        if (!bias && !accumulate) { /* the common case, in a loop the compiler vectorises */
            for (int j = 0; j < nb; j++) o[j] = alpha * s[j];
            continue;
        }
        for (int j = 0; j < nb; j++) {
            float x = alpha * s[j];
            if (bias) x = x + bias[j0 + j];
            o[j] = accumulate ? o[j] + x : x;
        }
    }
}

typedef void (*bm_tile_fn)(const bm_mm *mm, void *out, bm_view a, bm_view b, int i0, int mb,
                           int j0, int nb);

/* The reference tile: c = 0, c = c + a * b over k in order, in fp32, the block of K at a time
 * widened first (with the reference's conversions: mm->feat is 0). */
static void ref_tile(const bm_mm *mm, void *out, bm_view a, bm_view b, int i0, int mb, int j0,
                     int nb) {
    float acc[BM_MB * BM_NB], ab[BM_MB * BM_KC], bb[BM_KC * BM_NB];
    for (int r = 0; r < mb; r++)
        for (int j = 0; j < nb; j++) acc[r * BM_NB + j] = 0.0f;
    for (int k0 = 0; k0 < mm->K; k0 += BM_KC) {
        int kc = mm->K - k0 < BM_KC ? mm->K - k0 : BM_KC;
        bm_widen(mm, ab, BM_KC, 1, a, i0, mb, k0, kc); /* ab[r][k] = op(a)(i0 + r, k0 + k) */
        bm_widen(mm, bb, BM_NB, 1, b, k0, kc, j0, nb); /* bb[k][j] = op(b)(k0 + k, j0 + j) */
        for (int r = 0; r < mb; r++)
            for (int j = 0; j < nb; j++) {
                float c = acc[r * BM_NB + j];
                for (int k = 0; k < kc; k++) {
                    float p = ab[r * BM_KC + k] * bb[k * BM_NB + j];
                    c = c + p;
                }
                acc[r * BM_NB + j] = c;
            }
    }
    bm_epilogue(mm, out, acc, i0, mb, j0, nb);
}

#define VKC_SIMD_BODY "cpu/matmul16_simd.h" /* bw_tile_avx512, bw_tile_avx2 */
#include "cpu/simd_each.h"

/* The GEMV (matmul16_gemv_simd.h): few rows of a, a and b contiguous along K. */
enum {
    GV_MAX_M = VKC_MM16_GEMV_MAX_M,
    GV_S = 32,    /* strands per output (matmul16.h) */
    GV_KB = 4096, /* k per block of a widened (a multiple of GV_S): GPT-2's K in one */
    GV_NC = 64,   /* columns per work item (at most BM_NB, the epilogue's row stride) */
};
typedef void (*gv_cols_fn)(const bm_mm *mm, void *out, const uint16_t *a, const uint16_t *b,
                           int j0, int nb);
#define VKC_SIMD_BODY "cpu/matmul16_gemv_simd.h" /* gv_cols_{bf16,f16}_{avx512,avx2} */
#include "cpu/simd_each.h"

#ifdef VKC_X86
/* The GEMV over every batch entry and column block, the blocks spread over nt threads. */
static void gv_run(const bm_mm *mm, gv_cols_fn cols, size_t sa, size_t sb, size_t so, int nt) {
    long blocks = (mm->N + GV_NC - 1) / GV_NC, items = (long)mm->batch * blocks;
    double work = (double)mm->batch * mm->M * mm->N * mm->K;
    (void)work; /* unused without OpenMP */
    VKA_OMP_FOR_DYNAMIC(nt, work > VKA_OMP_MIN_WORK)
    for (long t = 0; t < items; t++) {
        long bi = t / blocks;
        int j0 = (int)(t % blocks) * GV_NC, nb = mm->N - j0 < GV_NC ? mm->N - j0 : GV_NC;
        cols(mm, vkc_mm_out_at(mm->out, mm->out_dtype, (size_t)bi * so), mm->a + (size_t)bi * sa,
             mm->b + (size_t)bi * sb, j0, nb);
    }
}

#define BM_TARGET_BF16 __attribute__((target("avx512f,avx512bw,avx512bf16,avx2,fma")))
enum { DP_MR = 8, DP_NR = 32 };

/* c (8 x 32, row stride BM_NB) += sum over pairs kp < kc2 of ap's pairs . bp's pairs:
 * ap[kp * 8 + q] is row q's pair kp (two bf16 in one word), bp[(kp * 32 + j) * 2 + e] column j's
 * element 2 kp + e. */
BM_TARGET_BF16 static void dp_kernel(float *c, const uint32_t *ap, const uint16_t *bp, int kc2) {
    __m512 cv[DP_MR][2];
    VS_UNROLL
    for (int r = 0; r < DP_MR; r++) {
        cv[r][0] = _mm512_loadu_ps(c + r * BM_NB);
        cv[r][1] = _mm512_loadu_ps(c + r * BM_NB + 16);
    }
    for (int kp = 0; kp < kc2; kp++) {
        __m512i b0 = _mm512_loadu_si512(bp + (size_t)kp * 64);
        __m512i b1 = _mm512_loadu_si512(bp + (size_t)kp * 64 + 32);
        const uint32_t *ak = ap + (size_t)kp * DP_MR;
        VS_UNROLL
        for (int r = 0; r < DP_MR; r++) {
            __m512i x = _mm512_set1_epi32((int)ak[r]);
            cv[r][0] = _mm512_dpbf16_ps(cv[r][0], (__m512bh)x, (__m512bh)b0);
            cv[r][1] = _mm512_dpbf16_ps(cv[r][1], (__m512bh)x, (__m512bh)b1);
        }
    }
    VS_UNROLL
    for (int r = 0; r < DP_MR; r++) {
        _mm512_storeu_ps(c + r * BM_NB, cv[r][0]);
        _mm512_storeu_ps(c + r * BM_NB + 16, cv[r][1]);
    }
}

/* op(b)(k0 .. k0 + kc, j .. j + w) into one panel: dst[(kp * 32 + jj) * 2 + e] = op(b)(k0 + 2 kp
 * + e, j + jj), zeros past w and past kc. */
BM_TARGET_BF16 static void dp_pack_b(uint16_t *dst, bm_view b, int k0, int kc, int j, int w) {
    int kc2 = (kc + 1) / 2, full = w == DP_NR ? kc / 2 : 0, kp = 0;
    if (b.cs == 1 && full) { /* rows of op(b) contiguous: interleave rows k and k + 1 */
        uint16_t lo[32], hi[32];
        for (int i = 0; i < 16; i++) lo[2 * i] = (uint16_t)i, lo[2 * i + 1] = (uint16_t)(32 + i);
        for (int i = 0; i < 16; i++)
            hi[2 * i] = (uint16_t)(16 + i), hi[2 * i + 1] = (uint16_t)(48 + i);
        __m512i il = _mm512_loadu_si512(lo), ih = _mm512_loadu_si512(hi);
        for (; kp < full; kp++) {
            const uint16_t *r0 = b.p + (size_t)(k0 + 2 * kp) * b.rs + j;
            __m512i x = _mm512_loadu_si512(r0), y = _mm512_loadu_si512(r0 + b.rs);
            _mm512_storeu_si512(dst + (size_t)kp * 64, _mm512_permutex2var_epi16(x, il, y));
            _mm512_storeu_si512(dst + (size_t)kp * 64 + 32, _mm512_permutex2var_epi16(x, ih, y));
        }
    } else if (b.rs == 1 && full && b.cs <= INT32_MAX / 16) {
        /* columns contiguous: a pair is one 32-bit word, 16 columns' gathered at a time (scale
         * 2: the column stride b.cs counts uint16_t; the pairs need no alignment) */
        int32_t cols[16];
        for (int q = 0; q < 16; q++) cols[q] = (int32_t)((size_t)q * b.cs);
        __m512i idx = _mm512_loadu_si512(cols);
        const uint16_t *c0 = b.p + (size_t)j * b.cs + k0, *c16 = c0 + (size_t)16 * b.cs;
        for (; kp < full; kp++) {
            _mm512_storeu_si512(dst + (size_t)kp * 64, _mm512_i32gather_epi32(idx, c0 + 2 * kp, 2));
            _mm512_storeu_si512(dst + (size_t)kp * 64 + 32,
                                _mm512_i32gather_epi32(idx, c16 + 2 * kp, 2));
        }
    }
    for (; kp < kc2; kp++)
        for (int jj = 0; jj < DP_NR; jj++)
            for (int e = 0; e < 2; e++) {
                int k = 2 * kp + e;
                dst[(kp * DP_NR + jj) * 2 + e] = jj < w && k < kc ? bm_at(b, k0 + k, j + jj) : 0;
            }
}

/* Rows i .. i + h of op(a)(.., k0 .. k0 + kc) into one group of 8: dst[kp * 8 + q] = the pair
 * (op(a)(i + q, k0 + 2 kp), op(a)(i + q, k0 + 2 kp + 1)), low half first; a row past h repeats
 * the last (its outputs are not kept), a k past kc is 0. */
BM_TARGET_BF16 static void dp_pack_a(uint32_t *dst, bm_view a, int k0, int kc, int i, int h) {
    int kc2 = (kc + 1) / 2, full = kc / 2, k8 = 0;
    if (a.cs == 1) { /* rows contiguous: 8 rows x 8 pairs at a time, transposed in registers */
        const uint16_t *row[DP_MR];
        for (int q = 0; q < DP_MR; q++)
            row[q] = a.p + (size_t)(i + (q < h ? q : h - 1)) * a.rs + k0;
        for (; k8 + 8 <= full; k8 += 8) {
            __m256 t[DP_MR];
            for (int q = 0; q < DP_MR; q++)
                t[q] = _mm256_loadu_ps((const float *)(row[q] + 2 * k8));
            vkc_transpose8(t);
            for (int kk = 0; kk < 8; kk++)
                _mm256_storeu_ps((float *)(dst + (size_t)(k8 + kk) * DP_MR), t[kk]);
        }
    }
    for (int q = 0; q < DP_MR; q++) {
        int r = i + (q < h ? q : h - 1);
        int kp = k8;
        if (a.cs == 1) {
            const uint16_t *row = a.p + (size_t)r * a.rs + k0;
            for (; kp < full; kp++) memcpy(&dst[kp * DP_MR + q], row + 2 * kp, sizeof *dst);
        }
        for (; kp < kc2; kp++) {
            uint32_t lo = bm_at(a, r, k0 + 2 * kp);
            uint32_t hi = 2 * kp + 1 < kc ? bm_at(a, r, k0 + 2 * kp + 1) : 0;
            dst[kp * DP_MR + q] = lo | hi << 16;
        }
    }
}

/* One tile with vdpbf16ps (the packing in this file's comment). */
BM_TARGET_BF16 static void dp_tile(const bm_mm *mm, void *out, bm_view a, bm_view b, int i0,
                                   int mb, int j0, int nb) {
    const int K = mm->K;
    _Alignas(64) float acc[BM_MB * BM_NB];
    _Alignas(64) uint16_t bp[BM_KC * BM_NB];
    _Alignas(64) uint32_t ap[BM_MB * BM_KC / 2];
    int mbp = (mb + DP_MR - 1) / DP_MR * DP_MR, nbp = (nb + DP_NR - 1) / DP_NR * DP_NR;
    for (int r = 0; r < mbp; r++) memset(acc + r * BM_NB, 0, (size_t)nbp * sizeof(float));
    for (int k0 = 0; k0 < K; k0 += BM_KC) {
        int kc = K - k0 < BM_KC ? K - k0 : BM_KC, kc2 = (kc + 1) / 2;
        for (int p = 0; p < nb; p += DP_NR) dp_pack_b(bp + (size_t)p * kc2 * 2, b, k0, kc, j0 + p,
                                                      nb - p < DP_NR ? nb - p : DP_NR);
        for (int g = 0; g < mbp; g += DP_MR) dp_pack_a(ap + (size_t)g * kc2, a, k0, kc, i0 + g,
                                                       mb - g < DP_MR ? mb - g : DP_MR);
        for (int p = 0; p < nb; p += DP_NR)
            for (int g = 0; g < mb; g += DP_MR)
                dp_kernel(acc + g * BM_NB + p, ap + (size_t)g * kc2, bp + (size_t)p * kc2 * 2,
                          kc2);
    }
    bm_epilogue(mm, out, acc, i0, mb, j0, nb);
}
/* --- AMX (AMX-TILE + AMX-BF16: TDPBF16PS) -------------------------------------------------
 * One tile of out with the tile registers: op(b)'s block packed as for vdpbf16ps (panels of 32
 * columns, a k pair per 32-bit lane: a panel's row kp is two 16-column rows of a TDPBF16PS
 * operand, 64 bytes apart, 128-byte stride), op(a)'s block copied row by row (AM_LDA bf16 a
 * row, k contiguous), both zero-padded to a whole number of 32-element k steps and to 32 rows
 * and columns. Tiles 0-3 hold a 32 x 32 block of acc (fp32, row stride BM_NB), 4-5 two 16-row
 * slices of a, 6-7 two 16-column slices of b. The operating system must grant the tile data
 * first (Linux: arch_prctl ARCH_REQ_XCOMP_PERM, once per process; amx_permitted). */
enum {
    AM_KQ = BM_KC / 2, /* k pairs per block at most: a multiple of 16 */
    AM_LDA = BM_KC,    /* bf16 per packed row of a */
};
_Static_assert(BM_KC % 32 == 0 && BM_MB % 32 == 0 && BM_NB % 32 == 0, "AMX steps of 32");

/* Whether the OS lets this process use the AMX tile data (Linux 5.16+ asks for it: without
 * permission the first tile instruction raises SIGILL). Asking is idempotent and harmless: the
 * kernel then grows a thread's signal frame only once that thread uses the tiles. */
static bool amx_permitted(void) {
#if defined(__linux__) && defined(SYS_arch_prctl)
    enum { ARCH_GET_XCOMP_PERM_ = 0x1022, ARCH_REQ_XCOMP_PERM_ = 0x1023, XTILEDATA_ = 18 };
    unsigned long bits = 0;
    if (syscall(SYS_arch_prctl, ARCH_GET_XCOMP_PERM_, &bits) == 0 && (bits >> XTILEDATA_ & 1))
        return true;
    return syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM_, XTILEDATA_) == 0;
#else
    return false;
#endif
}

/* AMX-TILE and AMX-BF16 from cpuid leaf 7 (EDX bits 24 and 22): read directly, as clang 14's
 * __builtin_cpu_supports knows neither name. */
static bool amx_bf16_cpuid(void) {
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
    return (d >> 24 & 1) && (d >> 22 & 1);
}

#define AM_TARGET __attribute__((target("amx-tile,amx-bf16,avx512f,avx512bw,avx512bf16,avx2,fma")))

typedef struct am_config {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} am_config;

/* Rows i .. i + h of op(a)(.., k0 .. k0 + kc) into dst (AM_LDA a row), zeros past kc up to kp
 * pairs and in the rows from h up to rows. Rows contiguous along k: copied; a transposed a
 * (op(a)(r, k) = p[r + k cs], the weight gradient's dout^T): 32 rows of two k at a time,
 * interleaved into 32 pairs (one 32-bit word each) and scattered to their rows. */
AM_TARGET static void am_pack_a(uint16_t *dst, bm_view a, int k0, int kc, int kp, int i, int h,
                                int rows) {
    int vec_rows = 0, full = kc / 2; /* rows whose first 2 full k the vector loop wrote */
    if (a.rs == 1 && a.cs != 1 && full > 0) {
        uint16_t lo[32], hi[32];
        uint32_t rowoff[16];
        for (int q = 0; q < 16; q++) lo[2 * q] = (uint16_t)q, lo[2 * q + 1] = (uint16_t)(32 + q);
        for (int q = 0; q < 16; q++)
            hi[2 * q] = (uint16_t)(16 + q), hi[2 * q + 1] = (uint16_t)(48 + q);
        for (int q = 0; q < 16; q++) rowoff[q] = (uint32_t)(q * AM_LDA / 2);
        __m512i il = _mm512_loadu_si512(lo), ih = _mm512_loadu_si512(hi);
        __m512i off = _mm512_loadu_si512(rowoff);
        for (; vec_rows + 32 <= h; vec_rows += 32) {
            uint32_t *d = (uint32_t *)(void *)(dst + (size_t)vec_rows * AM_LDA);
            for (int q = 0; q < full; q++) {
                const uint16_t *x0 = a.p + (size_t)(k0 + 2 * q) * a.cs + i + vec_rows;
                __m512i x = _mm512_loadu_si512(x0), y = _mm512_loadu_si512(x0 + a.cs);
                _mm512_i32scatter_epi32(d + q, off, _mm512_permutex2var_epi16(x, il, y), 4);
                _mm512_i32scatter_epi32(d + 16 * AM_LDA / 2 + q, off,
                                        _mm512_permutex2var_epi16(x, ih, y), 4);
            }
        }
    }
    for (int r = 0; r < rows; r++) {
        uint16_t *d = dst + (size_t)r * AM_LDA;
        int k = r < vec_rows ? 2 * full : 0;
        if (r >= h) k = 0;
        else if (a.cs == 1) memcpy(d, a.p + (size_t)(i + r) * a.rs + k0, (size_t)kc * 2), k = kc;
        else
            for (; k < kc; k++) d[k] = bm_at(a, i + r, k0 + k);
        memset(d + k, 0, (size_t)(2 * kp - k) * sizeof *d);
    }
}

AM_TARGET static void am_tile(const bm_mm *mm, void *out, bm_view a, bm_view b, int i0, int mb,
                              int j0, int nb) {
    const int K = mm->K;
    _Alignas(64) float acc[BM_MB * BM_NB];
    _Alignas(64) uint16_t bp[AM_KQ * 2 * BM_NB];
    _Alignas(64) uint16_t ap[BM_MB * AM_LDA];
    int mbp = (mb + 31) / 32 * 32, nbp = (nb + 31) / 32 * 32;
    am_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int t = 0; t < 8; t++) cfg.rows[t] = 16, cfg.colsb[t] = 64;
    _tile_loadconfig(&cfg);
    memset(acc, 0, (size_t)mbp * BM_NB * sizeof(float));
    for (int k0 = 0; k0 < K; k0 += BM_KC) {
        int kc = K - k0 < BM_KC ? K - k0 : BM_KC, kc2 = (kc + 1) / 2, kp = (kc2 + 15) / 16 * 16;
        for (int p = 0; p < nbp; p += DP_NR) {
            uint16_t *panel = bp + (size_t)p * kp * 2;
            int w = nb - p < DP_NR ? nb - p : DP_NR;
            dp_pack_b(panel, b, k0, kc, j0 + p, w); /* w > 0: p < nb */
            memset(panel + (size_t)kc2 * DP_NR * 2, 0, (size_t)(kp - kc2) * DP_NR * 2 * sizeof *panel);
        }
        am_pack_a(ap, a, k0, kc, kp, i0, mb, mbp);
        for (int p = 0; p < nbp; p += 32) {
            const uint16_t *panel = bp + (size_t)p * kp * 2;
            for (int g = 0; g < mbp; g += 32) {
                float *c = acc + (size_t)g * BM_NB + p;
                const size_t cs = BM_NB * sizeof(float);
                _tile_loadd(0, c, cs);
                _tile_loadd(1, c + 16, cs);
                _tile_loadd(2, c + 16 * BM_NB, cs);
                _tile_loadd(3, c + 16 * BM_NB + 16, cs);
                for (int q = 0; q < kp; q += 16) {
                    const uint16_t *a0 = ap + (size_t)g * AM_LDA + 2 * q;
                    _tile_loadd(4, a0, AM_LDA * 2);
                    _tile_loadd(5, a0 + 16 * AM_LDA, AM_LDA * 2);
                    _tile_loadd(6, panel + (size_t)q * 64, 128);
                    _tile_loadd(7, panel + (size_t)q * 64 + 32, 128);
                    _tile_dpbf16ps(0, 4, 6);
                    _tile_dpbf16ps(1, 4, 7);
                    _tile_dpbf16ps(2, 5, 6);
                    _tile_dpbf16ps(3, 5, 7);
                }
                _tile_stored(0, c, cs);
                _tile_stored(1, c + 16, cs);
                _tile_stored(2, c + 16 * BM_NB, cs);
                _tile_stored(3, c + 16 * BM_NB + 16, cs);
            }
        }
    }
    _tile_release();
    bm_epilogue(mm, out, acc, i0, mb, j0, nb);
}
#endif

/* From cpuid as vkc_cpu_isa (matmul_fast.c) asks it (__builtin_cpu_supports checks that the OS
 * saves the vector state); F16C and AVX512-BF16 as the conversions find them (convert.c,
 * compiled in beside this file by the bench and the test). */
bool vkc_mm16_path_supported(vka_dtype type, vkc_mm16_path path) {
    if (type != VKA_BF16 && type != VKA_F16) return false;
#ifdef VKC_X86
    __builtin_cpu_init();
    bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    bool avx512 = __builtin_cpu_supports("avx512f");
    switch (path) {
    case VKC_MM16_REFERENCE: return true;
    case VKC_MM16_WIDEN_AVX2:
        return avx2 && (type == VKA_BF16 || (vkc_cvt_features(VKC_ISA_AVX2) & VKC_CVT_F16C));
    case VKC_MM16_WIDEN_AVX512: return avx512;
    case VKC_MM16_DPBF16:
        return type == VKA_BF16 && avx512 && __builtin_cpu_supports("avx512bw") &&
               (vkc_cvt_features(VKC_ISA_AVX512) & VKC_CVT_BF16);
    case VKC_MM16_AMX: /* its b packing is vdpbf16ps's, its GEMV the AVX-512 one */
        return vkc_mm16_path_supported(type, VKC_MM16_DPBF16) &&
               amx_bf16_cpuid() && amx_permitted();
    default: return false;
    }
#else
    return path == VKC_MM16_REFERENCE;
#endif
}

vkc_mm16_path vkc_mm16_best_path(vka_dtype type) {
    static const vkc_mm16_path order[] = {VKC_MM16_AMX, VKC_MM16_DPBF16, VKC_MM16_WIDEN_AVX512,
                                          VKC_MM16_WIDEN_AVX2};
    for (size_t i = 0; i < sizeof order / sizeof order[0]; i++)
        if (vkc_mm16_path_supported(type, order[i])) return order[i];
    return VKC_MM16_REFERENCE;
}

const char *vkc_mm16_path_name(vkc_mm16_path path) {
    switch (path) {
    case VKC_MM16_WIDEN_AVX2: return "widen-avx2";
    case VKC_MM16_WIDEN_AVX512: return "widen-avx512";
    case VKC_MM16_DPBF16: return "vdpbf16ps";
    case VKC_MM16_AMX: return "amx-bf16";
    default: return "reference";
    }
}

void vkc_matmul16(void *out, int out_dtype, const uint16_t *a, const uint16_t *b,
                  const float *bias, int M, int N, int K, int batch, bool trans_a, bool trans_b,
                  size_t stride_a, size_t stride_b, size_t stride_out, float alpha,
                  bool accumulate, vka_dtype type, vkc_mm16_path path, unsigned cvt, int nt) {
    bm_mm mm = {out, out_dtype, cvt, a, b, bias, M, N, K, batch, trans_a, trans_b,
                stride_a, stride_b, stride_out, alpha, accumulate, type, 0};
    bm_tile_fn tile = ref_tile;
    size_t sa = stride_a ? stride_a : (size_t)M * K;
    size_t sb = stride_b ? stride_b : (size_t)K * N;
    size_t so = stride_out ? stride_out : (size_t)M * N;
    if (K > 0 && vkc_mm16_path_supported(type, path)) {
#ifdef VKC_X86
        /* the widening's conversions within the path's ISA (F16C with AVX2) */
        if (path == VKC_MM16_WIDEN_AVX512) mm.feat = vkc_cvt_features(VKC_ISA_AVX512);
        if (path == VKC_MM16_WIDEN_AVX2) mm.feat = vkc_cvt_features(VKC_ISA_AVX2);
        if (path == VKC_MM16_DPBF16) tile = dp_tile;
        else if (path == VKC_MM16_AMX) tile = am_tile;
        else if (path == VKC_MM16_WIDEN_AVX512) tile = bw_tile_avx512;
        else if (path == VKC_MM16_WIDEN_AVX2) tile = bw_tile_avx2;
        if (tile != ref_tile && vkc_mm16_gemv(M, K, trans_a, trans_b)) {
            bool f16 = type == VKA_F16, avx2 = path == VKC_MM16_WIDEN_AVX2;
            if (!avx2) mm.feat = vkc_cvt_features(VKC_ISA_AVX512); /* vdpbf16ps: AVX-512's */
            gv_run(&mm,
                   avx2 ? (f16 ? gv_cols_f16_avx2 : gv_cols_bf16_avx2)
                        : (f16 ? gv_cols_f16_avx512 : gv_cols_bf16_avx512),
                   sa, sb, so, nt);
            return;
        }
#endif
    }
    long tiles_m = (M + BM_MB - 1) / BM_MB, tiles_n = (N + BM_NB - 1) / BM_NB;
    long tiles = (long)batch * tiles_m * tiles_n;
    double work = (double)batch * M * N * K;
    (void)work; /* unused without OpenMP */
    VKA_OMP_FOR_DYNAMIC(nt, work > VKA_OMP_MIN_WORK)
    for (long t = 0; t < tiles; t++) {
        long bi = t / (tiles_m * tiles_n), rest = t % (tiles_m * tiles_n);
        int i0 = (int)(rest / tiles_n) * BM_MB, j0 = (int)(rest % tiles_n) * BM_NB;
        bm_view av = {a + (size_t)bi * sa, trans_a ? 1 : (size_t)K, trans_a ? (size_t)M : 1};
        bm_view bv = {b + (size_t)bi * sb, trans_b ? 1 : (size_t)N, trans_b ? (size_t)K : 1};
        int mb = M - i0 < BM_MB ? M - i0 : BM_MB, nb = N - j0 < BM_NB ? N - j0 : BM_NB;
        tile(&mm, vkc_mm_out_at(out, out_dtype, (size_t)bi * so), av, bv, i0, mb, j0, nb);
    }
}
