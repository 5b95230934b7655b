/*
 * CPU reference kernels on plain pointers, one file per op family, named like their shaders
 * (src/cpu/softmax.c <-> shaders/softmax_forward.comp). The semantics are exactly those written
 * in src/backend.h; these functions are what every shader is tested against.
 *
 * Conventions (llm.c): outputs first, then inputs, then weights, then sizes; backward kernels
 * ADD into their gradients unless the comment says "writes". The last argument nt is the number
 * of OpenMP threads to use (>= 1; ignored without OpenMP).
 *
 * Determinism: every kernel parallelises only over independent outputs and sums each output in
 * a fixed order, so results are bit-identical for any thread count (exact --resume).
 * Accumulations of many terms (softmax sums, layernorm statistics, log-sum-exp, reductions)
 * are carried in double.
 */
#ifndef VKA_CPU_OPS_H
#define VKA_CPU_OPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* OpenMP pragmas that vanish without OpenMP (no unknown-pragma warnings). */
#ifdef VKA_HAVE_OPENMP
#define VKA_PRAGMA(x) _Pragma(#x)
#define VKA_OMP_FOR(nt, cond) VKA_PRAGMA(omp parallel for num_threads(nt) schedule(static) if(cond))
/* For few, large work items (matmul tiles): a thread that shares its core with another process
 * does not hold the others back. Results do not depend on the schedule. */
#define VKA_OMP_FOR_DYNAMIC(nt, cond) \
    VKA_PRAGMA(omp parallel for num_threads(nt) schedule(dynamic, 1) if(cond))
#else
#define VKA_OMP_FOR(nt, cond)
#define VKA_OMP_FOR_DYNAMIC(nt, cond)
#endif
/* Below this much work (~multiply-adds) a parallel region costs more than it saves. */
#define VKA_OMP_MIN_WORK 32768
/* Columns per work item where threads split a (rows, cols) pass by columns: contiguous inner
 * loops over a row. */
#define VKA_COL_BLOCK 64

/* --- elementwise.c -------------------------------------------------------------------------- */
void vkc_fill(float *t, float value, size_t N, int nt);
/* n elements of 32 multiply-add chains of iters steps each (the arithmetic ceiling) */
void vkc_peak_fma(float *out, size_t n, uint32_t iters, int nt);
void vkc_copy(float *dst, const float *src, size_t N, int nt);
/* out = a + b */
void vkc_residual_forward(float *out, const float *a, const float *b, size_t N, int nt);
/* dst += src */
void vkc_add_inplace(float *dst, const float *src, size_t N, int nt);

/* --- matmul.c ------------------------------------------------------------------------------- */
/* out[b] (M,N) = alpha * op(a[b]) (M,K) * op(b[b]) (K,N) (+ bias (N)) (+ out[b] if accumulate);
 * op(a) stored (K,M) when trans_a, op(b) stored (N,K) when trans_b; batches stride_* apart.
 * Each element is summed over k = 0..K-1 in order, then scaled, then bias, then out added.
 * out is float32 (out_dtype VKA_F32) or 16-bit words of VKA_BF16 / VKA_F16 (a uint16_t array,
 * element i at [i]): then each element's float32 value is rounded to nearest even by the convert
 * op's conversion (cvt: its vkc_cvt_features; the same bits whatever it is) as each tile is
 * finished, so out16 == convert(out32); accumulate is refused for a 16-bit out (op_checks.c). */
void vkc_matmul_forward(void *out, int out_dtype, const float *a, const float *b,
                        const float *bias, int M, int N, int K, int batch, bool trans_a,
                        bool trans_b, size_t stride_a, size_t stride_b, size_t stride_out,
                        float alpha, bool accumulate, unsigned cvt, int nt);

/* --- matmul_fast.c -------------------------------------------------------------------------- */
/* The widest vector ISA this CPU (and its OS) supports, from cpuid. */
typedef enum vkc_isa { VKC_ISA_BASELINE, VKC_ISA_AVX2, VKC_ISA_AVX512 } vkc_isa;
vkc_isa vkc_cpu_isa(void);
const char *vkc_isa_name(vkc_isa isa);
/* vkc_matmul_forward with micro-kernels for isa: the same k order, but each term a fused
 * multiply-add (last bits differ from the reference); VKC_ISA_BASELINE runs the reference. */
void vkc_matmul_forward_fast(void *out, int out_dtype, const float *a, const float *b,
                             const float *bias, int M, int N, int K, int batch, bool trans_a,
                             bool trans_b, size_t stride_a, size_t stride_b, size_t stride_out,
                             float alpha, bool accumulate, vkc_isa isa, unsigned cvt, int nt);

/* Peak of the processor (peak.c): nt threads each run `iters` steps of fused multiply-add chains
 * at isa's width, out[t] the threads' sums; returns the FLOPs done (0: no FMA ISA to measure). */
double vkc_peak_fma_hw(float *out, vkc_isa isa, uint64_t iters, int nt);

/* --- reduce.c ------------------------------------------------------------------------------- */
/* dbias (OC) += column sums of dout (N, OC) */
void vkc_bias_backward(float *dbias, const float *dout, int N, int OC, int nt);
/* the same vectorised across columns for isa (the same order: bit-identical) */
void vkc_bias_backward_fast(float *dbias, const float *dout, int N, int OC, vkc_isa isa,
                            int nt);
/* WRITES out[0] = sum(inp[0:N]) / N */
void vkc_mean(float *out, const float *inp, size_t N, int nt);
/* WRITES out[0] = L2 norm of the count tensors grads[i] (sizes[i] elements), out[1] = clip
 * scale min(1, max_norm / (norm + 1e-6)) (1 if max_norm <= 0); partials (count * 64) receives
 * each tensor's 64 slice sums of squares. unscale (a power of two; 1 = none): the gradients
 * hold 1/unscale times their value (loss scaling): out[0] = unscale * norm, the clip scale is
 * computed from it, and out[1] = unscale * clip scale (backend.h's grad_norm). */
void vkc_grad_norm(float *out, float *partials, const float *const *grads, const size_t *sizes,
                   int count, float max_norm, float unscale, int nt);

/* --- encoder.c ------------------------------------------------------------------------------ */
/* out (B,T,C) = wte[tokens[b,t]] + wpe[t]; tokens (B,T) must be valid rows of wte */
void vkc_encoder_forward(float *out, const int32_t *tokens, const float *wte, const float *wpe,
                         int B, int T, int C, int nt);
/* The same with out, wte and wpe each f32 or 16-bit (dtypes: vka_dtype values; a 16-bit tensor
 * is a uint16_t array, element i at [i]): each element widened exactly, added in f32 and, for a
 * 16-bit out, rounded by the convert op (cvt: vkc_cvt_features), so out16 == convert(out32) bit
 * for bit. Writes exactly B*T*C elements (odd C: rows share 32-bit words, each writes its own
 * halves). */
void vkc_encoder_forward16(void *out, int out_dtype, const int32_t *tokens, const void *wte,
                           int wte_dtype, const void *wpe, int wpe_dtype, int B, int T, int C,
                           unsigned cvt, int nt);
/* dwte (Vp,C) += dout rows by token, dwpe (maxT,C) += dout summed over b (positions summed in
 * order b*T+t) */
void vkc_encoder_backward(float *dwte, float *dwpe, const float *dout, const int32_t *tokens,
                          int B, int T, int C, int nt);

/* --- layernorm.c ---------------------------------------------------------------------------- */
/* out (N,C) = (inp - mean) * rstd * weight + bias; mean (N), rstd (N) written; eps 1e-5 */
void vkc_layernorm_forward(float *out, float *mean, float *rstd, const float *inp,
                           const float *weight, const float *bias, int N, int C, int nt);
/* dinp (N,C), dweight (C), dbias (C) += ... (llm.c layernorm_backward) */
void vkc_layernorm_backward(float *dinp, float *dweight, float *dbias, const float *dout,
                            const float *inp, const float *weight, const float *mean,
                            const float *rstd, int N, int C, int nt);
/* the same vectorised for isa (AVX2 or AVX-512; row sums in another order: mean, rstd and dinp
 * may differ in the last bit, dweight and dbias are bit-identical); else the above */
void vkc_layernorm_forward_fast(float *out, float *mean, float *rstd, const float *inp,
                                const float *weight, const float *bias, int N, int C,
                                vkc_isa isa, int nt);
void vkc_layernorm_backward_fast(float *dinp, float *dweight, float *dbias, const float *dout,
                                 const float *inp, const float *weight, const float *mean,
                                 const float *rstd, int N, int C, vkc_isa isa, int nt);
/* vkc_layernorm_forward_fast (for isa; VKC_ISA_BASELINE: the reference) with out and/or inp
 * 16-bit (out_dtype, inp_dtype: vka_dtype values, 1 bf16, 2 fp16; a 16-bit one is a uint16_t
 * array, element i at [i]): a 16-bit inp is widened, a row at a time, and the row normalised as
 * the f32 kernel does; a 16-bit out gets that f32 row rounded by the convert op (cvt:
 * vkc_cvt_features), so out16 == convert(out32) bit for bit. Writes exactly N*C 16-bit
 * elements (with odd C two rows share a 32-bit word; each row writes only its own halves).
 * scratch: vkc_layernorm_forward16_scratch(N, C, out_dtype, nt) floats (none for an f32 out). */
void vkc_layernorm_forward16(void *out, int out_dtype, float *mean, float *rstd,
                             const void *inp, int inp_dtype, const float *weight,
                             const float *bias, int N, int C, float *scratch, vkc_isa isa,
                             unsigned cvt, int nt);
size_t vkc_layernorm_forward16_scratch(int N, int C, int out_dtype, int nt);
/* vkc_layernorm_backward_fast (for isa; VKC_ISA_BASELINE: the reference) with dout, inp and/or
 * weight 16-bit (mask16 bits 0, 1, 2; of type dtype16, a uint16_t array each): each widened
 * exactly and run through the f32 kernel's arithmetic, so dinp, dweight and dbias (f32) are the
 * f32 op's bits on the widened inputs. scratch: vkc_layernorm_backward16_scratch(N, C, nt)
 * floats. */
void vkc_layernorm_backward16(float *dinp, float *dweight, float *dbias, const void *dout,
                              const void *inp, const void *weight, int dtype16, unsigned mask16,
                              const float *mean, const float *rstd, int N, int C, float *scratch,
                              vkc_isa isa, unsigned cvt, int nt);
size_t vkc_layernorm_backward16_scratch(int N, int C, int nt);

/* --- permute.c ------------------------------------------------------------------------------ */
/* inp (B,T,3C) -> q, k, v (B,NH,T,HS), C = NH*HS */
/* --- kv.c ---------------------------------------------------------------------------------- */
/* kcache, vcache (NH, max_T, HS): rows pos[0] + t, t < min(T, pos[1]), inside [0, max_T) get the
 * k and v parts of qkv (T, 3C), C = NH*HS; pos (2) int32. */
void vkc_kv_write(float *kcache, float *vcache, const float *qkv, const int32_t *pos, int T,
                  int NH, int HS, int max_T, int nt);
/* kv_write with 16-bit caches and/or qkv (kv.c). */
void vkc_kv_write16(void *kcache, void *vcache, int cache_dt, const void *qkv, int qkv_dt,
                    const int32_t *pos, int T, int NH, int HS, int max_T, unsigned cvt, int nt);

void vkc_permute_forward(float *q, float *k, float *v, const float *inp, int B, int T, int NH,
                         int HS, int nt);
/* dinp (B,T,3C) += dq, dk, dv (B,NH,T,HS) */
void vkc_permute_backward(float *dinp, const float *dq, const float *dk, const float *dv, int B,
                          int T, int NH, int HS, int nt);
/* out (B,T,C) = inp (B,NH,T,HS) with heads side by side */
void vkc_unpermute_forward(float *out, const float *inp, int B, int T, int NH, int HS, int nt);
/* dinp (B,NH,T,HS) += dout (B,T,C) rearranged */
void vkc_unpermute_backward(float *dinp, const float *dout, int B, int T, int NH, int HS, int nt);

/* --- softmax.c ------------------------------------------------------------------------------ */
/* out (R,Tk) = masked stable softmax of scale * inp + mask (see vkb_softmax); mask (R/mask_rows
 * rounded up, Tk) or NULL; fully masked rows are zeros. out may be inp. */
void vkc_softmax_forward(float *out, const float *inp, const float *mask, int R, int Tq, int Tk,
                         int mask_rows, float scale, bool causal, int nt);
/* dinp (R,Tk) += scale * out * (dout - sum_k out * dout) */
void vkc_softmax_backward(float *dinp, const float *dout, const float *out, int R, int Tk,
                          float scale, int nt);

/* --- gelu.c --------------------------------------------------------------------------------- */
/* out = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), finite for every finite x */
void vkc_gelu_forward(float *out, const float *inp, size_t N, int nt);
/* dinp += gelu'(inp) * dout */
void vkc_gelu_backward(float *dinp, const float *inp, const float *dout, size_t N, int nt);
/* the same with a polynomial exp (within 2 ulp of expf), vectorised where isa is AVX-512 or
 * AVX2 (the same bits on both); VKC_ISA_BASELINE: the above */
void vkc_gelu_forward_fast(float *out, const float *inp, size_t N, vkc_isa isa, int nt);
void vkc_gelu_backward_fast(float *dinp, const float *inp, const float *dout, size_t N,
                            vkc_isa isa, int nt);

/* --- crossentropy.c ------------------------------------------------------------------------- */
/* losses (N) = logsumexp(logits[i,:V]) - logits[i,targets[i]]; logits (N,Vp) of vka_dtype
 * logits_dt (16-bit: a uint16_t array, rows from element 0), targets in [0,V) */
void vkc_crossentropy_forward(float *losses, const void *logits, int logits_dt,
                              const int32_t *targets, int N, int V, int Vp, unsigned cvt, int nt);
/* WRITES dlogits (N,Vp) of dlogits_dt = (softmax(logits[i,:V]) - onehot(targets[i])) * dloss, 0
 * in the padding columns, a 16-bit one rounded as vkc_convert (cvt: its features); dlogits may
 * be logits (in place, one type). A 16-bit row's results are its widened f32 row's. */
void vkc_crossentropy_backward(void *dlogits, int dlogits_dt, const void *logits, int logits_dt,
                               const int32_t *targets, float dloss, int N, int V, int Vp,
                               unsigned cvt, int nt);

/* --- adamw.c -------------------------------------------------------------------------------- */
/* One AdamW step on N elements; hyper = VKA_HYPER_* scalars, gscale = clip scale (1 = none):
 * g = grad * gscale; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
 * param -= lr * ((m / bc1) / (sqrt(v / bc2) + eps) + weight_decay * param) */
void vkc_adamw(float *param, const float *grad, float *m, float *v, const float *hyper,
               float gscale, size_t N, float weight_decay, int nt);
/* the same, vectorised where isa is AVX-512 or AVX2 (bit-identical results); else vkc_adamw */
void vkc_adamw_fast(float *param, const float *grad, float *m, float *v, const float *hyper,
                    float gscale, size_t N, float weight_decay, vkc_isa isa, int nt);

/* --- attention.c ---------------------------------------------------------------------------- */
/* Element (b, h, t, d) of an attention view is p[b*sb + h*sh + t*st + d] (vkb_attn_layout). */
typedef struct vkc_attn_strides {
    size_t sb, sh, st;
} vkc_attn_strides;

/* Fused attention (vkb_attention in src/backend.h, whose semantics these follow). */
typedef struct vkc_attention {
    float *out;               /* (B, NH, Tq, HS) view by so: forward writes, backward reads */
    float *lse;               /* (B, NH, Tq): forward writes (NULL: not kept), backward reads */
    float *dq, *dk, *dv;      /* backward: WRITTEN, views by sq, sk, sv */
    const float *q, *k, *v;   /* (B, NH, Tq | Tk, HS) views by sq, sk, sv */
    const float *dout;        /* backward: view by so */
    const float *mask;        /* additive (Tq, Tk), or (B, Tq, Tk) with mask_per_batch; NULL */
    const int32_t *key_lens;  /* (B), each in [0, Tk] (checked by the caller); NULL = Tk */
    vkc_attn_strides sq, sk, sv, so;
    int B, NH, Tq, Tk, HS;    /* HS <= VKC_ATTN_MAX_HS */
    float scale;
    int causal;               /* 0 none, 1 top-left (j > t masked), 2 bottom-right */
    bool mask_per_batch;
} vkc_attention;
#define VKC_ATTN_MAX_HS 256
/* Forward (FlashAttention-2: key tiles, online softmax), threads over (b, h, query block).
 * isa: the fast kernels' vector ISA (fused multiply-adds, a polynomial exp, vector sums: last
 * bits differ from the reference); VKC_ISA_BASELINE runs the reference. */
void vkc_attention_forward(const vkc_attention *a, vkc_isa isa, int nt);
/* The forward with 16-bit q, k, v and/or out: dt[0..3] their types (VKA_F32, or one 16-bit type;
 * a 16-bit view's pointer is its uint16_t elements, strides in elements). Each head's rows are
 * widened (exactly) into scratch and run through the f32 forward's blocks, a 16-bit out narrowed
 * from its f32 rows: bit for bit the f32 op on the widened inputs, then vka_copy. scratch:
 * vkc_attention_forward16_scratch(a, nt) floats, 64-byte aligned (the caller's, per command). */
size_t vkc_attention_forward16_scratch(const vkc_attention *a, int nt);
void vkc_attention_forward16(const vkc_attention *a, const int dt[4], float *scratch,
                             vkc_isa isa, unsigned cvt, int nt);
/* Backward (probabilities recomputed from lse), threads over (b, h): each head's dq, dk, dv
 * are summed by one thread in a fixed order. */
void vkc_attention_backward(const vkc_attention *a, vkc_isa isa, int nt);
/* The backward with 16-bit q, k, v and/or out (dt[0..3] as the forward16's; dout, lse and the
 * gradients f32): each head's 16-bit rows widened into scratch (an f32 input and its gradient
 * stay in place, a 16-bit one's gradient is computed in scratch and copied out) and run through
 * the f32 backward's head: bit for bit the f32 op on the widened inputs. scratch:
 * vkc_attention_backward16_scratch(a, nt) floats, 64-byte aligned (the caller's, per command). */
size_t vkc_attention_backward16_scratch(const vkc_attention *a, int nt);
void vkc_attention_backward16(const vkc_attention *a, const int dt[4], float *scratch,
                              vkc_isa isa, unsigned cvt, int nt);

#endif
