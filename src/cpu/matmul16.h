/* The CPU backend's 16-bit matrix product (matmul16.c): a and b both bf16 (the top 16 bits of
 * an IEEE fp32) or both fp16 (IEEE binary16), stored as uint16_t, out in fp32, accumulated in
 * fp32: what vka_matmul runs for 16-bit tensors on the CPU backend (cpu_commands.c);
 * tests/test_matmul16_cpu.c and `vkattn bench` also call it directly, each path on its own. */
#ifndef VKA_CPU_MATMUL16_H
#define VKA_CPU_MATMUL16_H

#include "cpu/convert.h"
#include "vkattn.h" /* vka_dtype */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* How the products are computed; every path sums each output over k in a fixed order that
 * depends on neither the tile sizes nor the thread count (deterministic). A product of two bf16
 * is exact in fp32 unless it underflows (below 2^-126); one of two fp16 always is (11-bit
 * significands, exponents from -24 to 15: 22 bits between 2^-48 and 2^32).
 *  - REFERENCE: scalar, c = 0, then c = c + fp32(a(i,k)) * fp32(b(k,j)) for k = 0 .. K-1, each
 *    operation rounded to fp32.
 *  - WIDEN_AVX2 / WIDEN_AVX512: a and b widened to fp32 (exact: bf16 by a shift, fp16 by F16C's
 *    VCVTPH2PS, which AVX-512F has too), then the fast fp32 micro-kernel (mm_simd.h):
 *    c = fma(a, b, c) for k = 0 .. K-1 in order. As the product is exact, this is the
 *    reference's result bit for bit (for bf16: outside underflow). The AVX2 path needs F16C
 *    for fp16 (every AVX2 CPU has it).
 *  - DPBF16 (bf16 only): AVX512-BF16 vdpbf16ps, k taken in pairs: for each pair (k, k + 1), k
 *    even, c = c + a(i,k+1) b(k+1,j), then c = c + a(i,k) b(k,j), each accumulation rounded
 *    (the Intel SDM's pseudo-code and its words: "round to nearest even is used when doing each
 *    accumulation", MXCSR not consulted; products exact); input denormals read as 0 and output
 *    denormals flushed to 0, so beyond the reference's gamma_K sum |a b| the error may grow by
 *    2^-126 per accumulation and per denormal input times its partner; an odd K's last pair
 *    has a zero partner (an exact + 0). test_bf16_summation_order checks this order bit for
 *    bit on the CPU it runs on (Zen 5: it holds).
 *  - AMX (bf16 only): AMX-BF16 TDPBF16PS on tiles of 16 x 16 fp32 (Intel Sapphire Rapids and
 *    later; Linux grants the tile state on request, matmul16.c's amx_permitted). The SDM's
 *    pseudo-code gives vdpbf16ps's per-pair rounding, but the hardware rounds otherwise: on a
 *    Xeon with AMX, of 256 outputs of one 16 x 16 x 32 step, none of k-then-k+1, k+1-then-k,
 *    the pair rounded then added, the pair fused, or the 32 products fused matched all (96 to
 *    151 differed). So no order is stated: the bits are deterministic (the same blocking of K
 *    into BM_KC and 32-element steps whatever the tile sizes or threads), within the
 *    reference's error bound, denormals flushed as vdpbf16ps's; exact where every partial sum
 *    is (small integers). The GEMV (below) is the AVX-512 one.
 *  - GEMV (every path but the reference, where vkc_mm16_gemv says: M <= VKC_MM16_GEMV_MAX_M,
 *    a (M, K) and b (N, K) both contiguous along K, i.e. !trans_a && trans_b; decoding one
 *    token): 32 strands, strand s = 0 .. 31 summing the k = s mod 32 in order, c_s = 0, then
 *    c_s = fma(a(i,k), b(k,j), c_s) (so, the product exact, one rounding per term as the
 *    reference; bf16 outside underflow); then c_s = c_s + c_(s+h) for s < h, h = 16, 8, 4, 2,
 *    1, and c = c_0. The same on AVX2 and AVX-512 (4 vectors of 8 strands or 2 of 16, the
 *    lanes' halving tree); the vdpbf16ps path takes the AVX-512 one. Its error is within the
 *    reference's bound (each term meets at most K / 32 + 5 roundings). It streams each row of b
 *    once, where the tiles widen b into fp32 panels and compute at least 6 or 8 rows: at
 *    M = 1, 5x faster on Zen 3 (AVX2), 1.7x at M = 8 (matmul16_gemv_simd.h).
 * Then the fp32 matmul's epilogue: alpha * c, + bias (fp32), + out if accumulate; a 16-bit out
 * gets that float32 value rounded to nearest even (matmul_tiles.h, vkc_mm_epilogue16). */
/* The most rows of a the fast paths take the GEMV for (above): past 8 the tiles catch up (at
 * 12 the GEMV is 1.4x faster, at 16 1.25x, on Zen 3) and its stack scratch grows with M. */
#define VKC_MM16_GEMV_MAX_M 8

typedef enum vkc_mm16_path {
    VKC_MM16_REFERENCE,
    VKC_MM16_WIDEN_AVX2,
    VKC_MM16_WIDEN_AVX512,
    VKC_MM16_DPBF16,
    VKC_MM16_AMX,
} vkc_mm16_path;

/* Whether a fast path computes this shape as a GEMV (the order above). */
static inline bool vkc_mm16_gemv(int M, int K, bool trans_a, bool trans_b) {
    return M <= VKC_MM16_GEMV_MAX_M && K > 0 && !trans_a && trans_b;
}

/* Whether this CPU (and its OS) runs path for a and b of type (VKA_BF16 or VKA_F16), from
 * cpuid. */
bool vkc_mm16_path_supported(vka_dtype type, vkc_mm16_path path);
/* The fastest supported path for type: AMX for bf16 where the CPU has AMX-BF16 and the OS
 * grants it, else DPBF16 where the CPU has AVX512_BF16, else the widening one of the widest
 * ISA, else the reference. */
vkc_mm16_path vkc_mm16_best_path(vka_dtype type);
const char *vkc_mm16_path_name(vkc_mm16_path path);

/* out[b] (M,N) = alpha * op(a[b]) . op(b[b]) (+ bias (N)) (+ out[b] if accumulate), the
 * arguments as vkc_matmul_forward's (cpu_ops.h) with a and b 16-bit words of type (VKA_BF16 or
 * VKA_F16); path must be supported for type (an unsupported one runs the reference). out as
 * vkc_matmul_forward's: float32, or (out_dtype VKA_BF16 / VKA_F16, of any type) 16-bit words
 * holding the float32 result rounded by the convert op's conversion (cvt), without accumulate. */
void vkc_matmul16(void *out, int out_dtype, const uint16_t *a, const uint16_t *b,
                  const float *bias, int M, int N, int K, int batch, bool trans_a, bool trans_b,
                  size_t stride_a, size_t stride_b, size_t stride_out, float alpha,
                  bool accumulate, vka_dtype type, vkc_mm16_path path, unsigned cvt, int nt);

#endif
