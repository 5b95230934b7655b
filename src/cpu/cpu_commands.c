/* The CPU backend's ops: each resolves its tensors to pointers and records a command; running
 * the command calls the kernel of src/cpu/<op>.c. Sizes were checked in front of the backend
 * (vkb_checked_ops, op_checks.c); token and target ids are checked here, when the command runs,
 * as they are written between runs. */
#include "cpu/cpu_backend.h"
#include "cpu/convert.h"
#include "cpu/cpu_ops.h"
#include "cpu/matmul16.h"

/* Ids are int32 stored in the float arena elements. */
static const int32_t *ids(vkb_tensor t) { return (const int32_t *)(const void *)cpu_ptr(t); }

/* Every ids[i] in [0, limit), else an error naming the first bad one. */
static vka_result check_ids(cpu_backend *cb, const char *op, const char *what, const int32_t *p,
                            size_t n, size_t limit, const char *limit_name) {
    for (size_t i = 0; i < n; i++)
        if (p[i] < 0 || (size_t)p[i] >= limit)
            return vka_set_error(cb->base.ctx, VKA_ERROR_INVALID_ARGUMENT,
                                 "%s: %s[%zu] = %d is outside [0, %zu) (%s)", op, what, i,
                                 (int)p[i], limit, limit_name);
    return VKA_SUCCESS;
}

/* --- fill, copy, residual, add_inplace ------------------------------------------------------ */

typedef struct { float *dst; const float *a, *b; float value; size_t n; } ew_args;

static vka_result run_fill(cpu_backend *cb, const void *p) {
    const ew_args *a = p;
    vkc_fill(a->dst, a->value, a->n, cb->nt);
    return VKA_SUCCESS;
}
static void op_fill(vkb_backend *be, vkb_tensor t, float value) {
    ew_args a = {.dst = cpu_ptr(t), .value = value, .n = t.n};
    vkc_record((cpu_backend *)be, "fill", run_fill, &a, sizeof a, 0);
}

static vka_result run_copy(cpu_backend *cb, const void *p) {
    const ew_args *a = p;
    vkc_copy(a->dst, a->a, a->n, cb->nt);
    return VKA_SUCCESS;
}
static void op_copy(vkb_backend *be, vkb_tensor dst, vkb_tensor src) {
    ew_args a = {.dst = cpu_ptr(dst), .a = cpu_ptr(src), .n = src.n};
    vkc_record((cpu_backend *)be, "copy", run_copy, &a, sizeof a, 0);
}

typedef struct { void *dst; const void *src; int dst_dtype, src_dtype; size_t n; } convert_args;

static vka_result run_convert(cpu_backend *cb, const void *p) {
    const convert_args *a = p;
    vkc_convert(a->dst, a->dst_dtype, a->src, a->src_dtype, a->n, cb->cvt, cb->nt);
    return VKA_SUCCESS;
}
static void op_convert(vkb_backend *be, vkb_tensor dst, vkb_tensor src, size_t n) {
    convert_args a = {.dst = cpu_ptr(dst), .src = cpu_ptr(src), .dst_dtype = dst.dtype,
                      .src_dtype = src.dtype, .n = n};
    vkc_record((cpu_backend *)be, "convert", run_convert, &a, sizeof a, 0);
}

/* The elementwise ops with 16-bit tensors (backend.h's 16-bit rule): in blocks of EW16_BLOCK
 * elements (GELU_CHUNK's, from element 0, as the float32 paths), each 16-bit input widened
 * into a stack buffer, the float32 op run on the block on one thread, and a 16-bit output
 * narrowed from a buffer; exactly n elements are written (uint16_t stores). */
#define EW16_BLOCK 4096
typedef enum { EW16_GELU_FORWARD, EW16_GELU_BACKWARD, EW16_RESIDUAL } ew16_op;
typedef struct { void *t[3]; uint8_t dt[3]; size_t n; ew16_op op; } ew16_args;

static vka_result run_ew16(cpu_backend *cb, const void *p) {
    const ew16_args *a = p;
    long blocks = (long)((a->n + EW16_BLOCK - 1) / EW16_BLOCK);
    VKA_OMP_FOR(cb->nt, a->n > VKA_OMP_MIN_WORK)
    for (long bl = 0; bl < blocks; bl++) {
        float buf[3][EW16_BLOCK];
        size_t lo = (size_t)bl * EW16_BLOCK, n = VKA_MIN((size_t)EW16_BLOCK, a->n - lo);
        float *v[3];
        for (int i = 0; i < 3; i++) {
            if (!a->t[i]) v[i] = NULL;
            else if (a->dt[i] == VKA_F32) v[i] = (float *)a->t[i] + lo;
            else {
                v[i] = buf[i];
                if (i > 0)
                    vkc_convert_serial(buf[i], VKA_F32, (const uint16_t *)a->t[i] + lo, a->dt[i],
                                       n, cb->cvt);
            }
        }
        switch (a->op) {
        case EW16_GELU_FORWARD: vkc_gelu_forward_fast(v[0], v[1], n, cb->isa, 1); break;
        case EW16_GELU_BACKWARD: vkc_gelu_backward_fast(v[0], v[1], v[2], n, cb->isa, 1); break;
        case EW16_RESIDUAL: vkc_residual_forward(v[0], v[1], v[2], n, 1); break;
        }
        if (a->dt[0] != VKA_F32)
            vkc_convert_serial((uint16_t *)a->t[0] + lo, a->dt[0], buf[0], VKA_F32, n, cb->cvt);
    }
    return VKA_SUCCESS;
}

/* Whether any of the op's tensors is 16-bit: then it was recorded as run_ew16. */
static bool record_ew16(vkb_backend *be, const char *name, ew16_op op, vkb_tensor o, vkb_tensor x,
                        vkb_tensor y, size_t n) {
    if (o.dtype == VKA_F32 && x.dtype == VKA_F32 && (!vkb_present(y) || y.dtype == VKA_F32))
        return false;
    ew16_args a = {.t = {cpu_ptr(o), cpu_ptr(x), vkb_present(y) ? cpu_ptr(y) : NULL},
                   .dt = {o.dtype, x.dtype, vkb_present(y) ? y.dtype : 0}, .n = n, .op = op};
    vkc_record((cpu_backend *)be, name, run_ew16, &a, sizeof a, 0);
    return true;
}

static vka_result run_residual(cpu_backend *cb, const void *p) {
    const ew_args *a = p;
    vkc_residual_forward(a->dst, a->a, a->b, a->n, cb->nt);
    return VKA_SUCCESS;
}
static void op_residual_forward(vkb_backend *be, vkb_tensor out, vkb_tensor x, vkb_tensor y,
                                size_t N) {
    if (record_ew16(be, "residual_forward", EW16_RESIDUAL, out, x, y, N)) return;
    ew_args a = {.dst = cpu_ptr(out), .a = cpu_ptr(x), .b = cpu_ptr(y), .n = N};
    vkc_record((cpu_backend *)be, "residual_forward", run_residual, &a, sizeof a, 0);
}

static vka_result run_add_inplace(cpu_backend *cb, const void *p) {
    const ew_args *a = p;
    vkc_add_inplace(a->dst, a->a, a->n, cb->nt);
    return VKA_SUCCESS;
}
static void op_add_inplace(vkb_backend *be, vkb_tensor dst, vkb_tensor src, size_t N) {
    ew_args a = {.dst = cpu_ptr(dst), .a = cpu_ptr(src), .n = N};
    vkc_record((cpu_backend *)be, "add_inplace", run_add_inplace, &a, sizeof a, 0);
}

/* --- matmul, bias_backward ------------------------------------------------------------------ */

/* out: float32, or (mm.out.dtype 16-bit) its words as a uint16_t array from its first element,
 * each tile narrowed in the kernels' epilogue as it is finished (matmul_tiles.h) */
typedef struct { void *out; const float *a, *b, *bias; vkb_matmul mm; } matmul_args;

/* The 16-bit path for the backend's kernels: the reference with the reference kernels, else the
 * fastest this CPU runs for type within the backend's ISA (for bf16: AMX tiles where the CPU
 * has AMX-BF16 and the OS grants them, else vdpbf16ps with AVX512-BF16). */
vkc_mm16_path cpu_mm16_path(const cpu_backend *cb, vka_dtype type) {
    if (cb->reference || cb->isa == VKC_ISA_BASELINE) return VKC_MM16_REFERENCE;
    if (cb->isa == VKC_ISA_AVX512) return vkc_mm16_best_path(type);
    return vkc_mm16_path_supported(type, VKC_MM16_WIDEN_AVX2) ? VKC_MM16_WIDEN_AVX2
                                                              : VKC_MM16_REFERENCE;
}

/* a and b both bf16 or both fp16 (op_checks.c allows those pairs): the words hold two elements
 * each, element 2i in the low half, i.e. a uint16_t array from the tensor's first element. */
static vka_result run_matmul16(cpu_backend *cb, const void *p) {
    const matmul_args *x = p;
    const vkb_matmul *mm = &x->mm;
    vka_dtype type = (vka_dtype)mm->a.dtype;
    vkc_matmul16(x->out, mm->out.dtype, (const uint16_t *)(const void *)x->a,
                 (const uint16_t *)(const void *)x->b, x->bias, mm->M, mm->N, mm->K, mm->batch,
                 mm->trans_a, mm->trans_b, mm->stride_a, mm->stride_b, mm->stride_out,
                 mm->alpha, mm->accumulate, type, type == VKA_BF16 ? cb->mm16_bf16 : cb->mm16_f16, cb->cvt, cb->nt);
    return VKA_SUCCESS;
}

static vka_result run_matmul(cpu_backend *cb, const void *p) {
    const matmul_args *x = p;
    const vkb_matmul *mm = &x->mm;
    if (cb->reference)
        vkc_matmul_forward(x->out, mm->out.dtype, x->a, x->b, x->bias, mm->M, mm->N, mm->K,
                           mm->batch, mm->trans_a, mm->trans_b, mm->stride_a, mm->stride_b,
                           mm->stride_out, mm->alpha, mm->accumulate, cb->cvt, cb->nt);
    else
        vkc_matmul_forward_fast(x->out, mm->out.dtype, x->a, x->b, x->bias, mm->M, mm->N, mm->K,
                                mm->batch, mm->trans_a, mm->trans_b, mm->stride_a, mm->stride_b,
                                mm->stride_out, mm->alpha, mm->accumulate, cb->isa, cb->cvt,
                                cb->nt);
    return VKA_SUCCESS;
}
static void op_matmul(vkb_backend *be, const vkb_matmul *mm) {
    matmul_args a = {cpu_ptr(mm->out), cpu_ptr(mm->a), cpu_ptr(mm->b), cpu_ptr(mm->bias), *mm};
    uint8_t type = mm->a.dtype;
    vkc_record((cpu_backend *)be,
               type == VKA_BF16 ? "matmul_bf16" : type == VKA_F16 ? "matmul_f16" : "matmul",
               type == VKA_F32 ? run_matmul : run_matmul16, &a, sizeof a, 0);
}

typedef struct { float *dbias; const float *dout; int N, OC; } bias_args;

static vka_result run_bias_backward(cpu_backend *cb, const void *p) {
    const bias_args *a = p;
    vkc_bias_backward_fast(a->dbias, a->dout, a->N, a->OC, cb->isa, cb->nt);
    return VKA_SUCCESS;
}
static void op_bias_backward(vkb_backend *be, vkb_tensor dbias, vkb_tensor dout, int N, int OC) {
    bias_args a = {cpu_ptr(dbias), cpu_ptr(dout), N, OC};
    vkc_record((cpu_backend *)be, "bias_backward", run_bias_backward, &a, sizeof a, 0);
}

/* --- encoder -------------------------------------------------------------------------------- */

typedef struct {
    float *out, *dwte, *dwpe;
    const float *wte, *wpe, *dout;
    const int32_t *tokens;
    size_t rows; /* of wte / dwte */
    int B, T, C;
} encoder_args;

static vka_result run_encoder_forward(cpu_backend *cb, const void *p) {
    const encoder_args *a = p;
    vka_result r = check_ids(cb, "encoder_forward", "tokens", a->tokens, (size_t)a->B * a->T,
                             a->rows, "rows of wte");
    if (r == VKA_SUCCESS)
        vkc_encoder_forward(a->out, a->tokens, a->wte, a->wpe, a->B, a->T, a->C, cb->nt);
    return r;
}
/* out, wte and/or wpe 16-bit: their words as uint16_t arrays from their first elements. */
typedef struct {
    void *out;
    const void *wte, *wpe;
    const int32_t *tokens;
    size_t rows; /* of wte */
    int out_dtype, wte_dtype, wpe_dtype, B, T, C;
} encoder16_args;

static vka_result run_encoder_forward16(cpu_backend *cb, const void *p) {
    const encoder16_args *a = p;
    vka_result r = check_ids(cb, "encoder_forward", "tokens", a->tokens, (size_t)a->B * a->T,
                             a->rows, "rows of wte");
    if (r == VKA_SUCCESS)
        vkc_encoder_forward16(a->out, a->out_dtype, a->tokens, a->wte, a->wte_dtype, a->wpe,
                              a->wpe_dtype, a->B, a->T, a->C, cb->cvt, cb->nt);
    return r;
}

static void op_encoder_forward(vkb_backend *be, vkb_tensor out, vkb_tensor tokens,
                               vkb_tensor wte, vkb_tensor wpe, int B, int T, int C) {
    if (out.dtype != VKA_F32 || wte.dtype != VKA_F32 || wpe.dtype != VKA_F32) {
        encoder16_args a = {.out = cpu_ptr(out), .wte = cpu_ptr(wte), .wpe = cpu_ptr(wpe),
                            .tokens = ids(tokens), .rows = vkb_elems(wte) / (size_t)C,
                            .out_dtype = out.dtype, .wte_dtype = wte.dtype,
                            .wpe_dtype = wpe.dtype, .B = B, .T = T, .C = C};
        vkc_record((cpu_backend *)be, "encoder_forward", run_encoder_forward16, &a, sizeof a, 0);
        return;
    }
    encoder_args a = {.out = cpu_ptr(out), .wte = cpu_ptr(wte), .wpe = cpu_ptr(wpe),
                      .tokens = ids(tokens), .rows = wte.n / (size_t)C, .B = B, .T = T, .C = C};
    vkc_record((cpu_backend *)be, "encoder_forward", run_encoder_forward, &a, sizeof a, 0);
}

static vka_result run_encoder_backward(cpu_backend *cb, const void *p) {
    const encoder_args *a = p;
    vka_result r = check_ids(cb, "encoder_backward", "tokens", a->tokens, (size_t)a->B * a->T,
                             a->rows, "rows of dwte");
    if (r == VKA_SUCCESS)
        vkc_encoder_backward(a->dwte, a->dwpe, a->dout, a->tokens, a->B, a->T, a->C, cb->nt);
    return r;
}
static void op_encoder_backward(vkb_backend *be, vkb_tensor dwte, vkb_tensor dwpe,
                                vkb_tensor dout, vkb_tensor tokens, vkb_tensor buckets, int B,
                                int T, int C) {
    (void)buckets; /* they only serve the GPU's deterministic gather; this sums by position */
    encoder_args a = {.dwte = cpu_ptr(dwte), .dwpe = cpu_ptr(dwpe), .dout = cpu_ptr(dout),
                      .tokens = ids(tokens), .rows = dwte.n / (size_t)C, .B = B, .T = T, .C = C};
    vkc_record((cpu_backend *)be, "encoder_backward", run_encoder_backward, &a, sizeof a, 0);
}

/* --- layernorm ------------------------------------------------------------------------------ */

typedef struct {
    float *out, *mean, *rstd, *dinp, *dweight, *dbias;
    const float *inp, *weight, *bias, *dout, *mean_in, *rstd_in;
    int N, C;
} layernorm_args;

static vka_result run_layernorm_forward(cpu_backend *cb, const void *p) {
    const layernorm_args *a = p;
    vkc_layernorm_forward_fast(a->out, a->mean, a->rstd, a->inp, a->weight, a->bias, a->N,
                               a->C, cb->isa, cb->nt); /* isa baseline: the reference */
    return VKA_SUCCESS;
}

/* out and/or inp 16-bit: the words of a 16-bit view are a uint16_t array from its first
 * element (element 2i in the low half). scratch: the f32 rows of a 16-bit out, allocated with
 * the command (at record time, not per run). */
typedef struct {
    void *out;
    const void *inp;
    float *mean, *rstd, *scratch;
    const float *weight, *bias;
    int out_dtype, inp_dtype, N, C;
} layernorm16_args;

static vka_result run_layernorm_forward16(cpu_backend *cb, const void *p) {
    const layernorm16_args *a = p;
    vkc_layernorm_forward16(a->out, a->out_dtype, a->mean, a->rstd, a->inp, a->inp_dtype,
                            a->weight, a->bias, a->N, a->C, a->scratch, cb->isa, cb->cvt,
                            cb->nt);
    return VKA_SUCCESS;
}

static void op_layernorm_forward(vkb_backend *be, vkb_tensor out, vkb_tensor mean,
                                 vkb_tensor rstd, vkb_tensor inp, vkb_tensor weight,
                                 vkb_tensor bias, int N, int C) {
    cpu_backend *cb = (cpu_backend *)be;
    if (out.dtype != VKA_F32 || inp.dtype != VKA_F32) {
        layernorm16_args a = {.out = cpu_ptr(out), .inp = cpu_ptr(inp), .mean = cpu_ptr(mean),
                              .rstd = cpu_ptr(rstd), .weight = cpu_ptr(weight),
                              .bias = cpu_ptr(bias), .out_dtype = out.dtype,
                              .inp_dtype = inp.dtype, .N = N, .C = C};
        size_t floats = vkc_layernorm_forward16_scratch(N, C, out.dtype, cb->nt);
        layernorm16_args *rec = vkc_record(cb, "layernorm_forward", run_layernorm_forward16,
                                           &a, sizeof a, floats ? floats * 4 + 64 : 0);
        if (rec && floats) /* after the arguments, 64-byte aligned */
            rec->scratch = (float *)(((uintptr_t)(rec + 1) + 63) & ~(uintptr_t)63);
        return;
    }
    layernorm_args a = {.out = cpu_ptr(out), .mean = cpu_ptr(mean), .rstd = cpu_ptr(rstd),
                        .inp = cpu_ptr(inp), .weight = cpu_ptr(weight), .bias = cpu_ptr(bias),
                        .N = N, .C = C};
    vkc_record(cb, "layernorm_forward", run_layernorm_forward, &a, sizeof a, 0);
}

static vka_result run_layernorm_backward(cpu_backend *cb, const void *p) {
    const layernorm_args *a = p;
    vkc_layernorm_backward_fast(a->dinp, a->dweight, a->dbias, a->dout, a->inp, a->weight,
                                a->mean_in, a->rstd_in, a->N, a->C, cb->isa, cb->nt);
    return VKA_SUCCESS;
}
/* dout, inp and/or weight 16-bit (mask16 bits 0, 1, 2, of type dtype16); scratch: the widened
 * weight and rows, allocated with the command. */
typedef struct {
    float *dinp, *dweight, *dbias, *scratch;
    const void *dout, *inp, *weight;
    const float *mean, *rstd;
    int dtype16, N, C;
    unsigned mask16;
} layernorm16_bw_args;

static vka_result run_layernorm_backward16(cpu_backend *cb, const void *p) {
    const layernorm16_bw_args *a = p;
    vkc_layernorm_backward16(a->dinp, a->dweight, a->dbias, a->dout, a->inp, a->weight,
                             a->dtype16, a->mask16, a->mean, a->rstd, a->N, a->C, a->scratch,
                             cb->isa, cb->cvt, cb->nt);
    return VKA_SUCCESS;
}

static void op_layernorm_backward(vkb_backend *be, vkb_tensor dinp, vkb_tensor dweight,
                                  vkb_tensor dbias, vkb_tensor dout, vkb_tensor inp,
                                  vkb_tensor weight, vkb_tensor mean, vkb_tensor rstd, int N,
                                  int C) {
    cpu_backend *cb = (cpu_backend *)be;
    unsigned mask16 = (dout.dtype ? 1u : 0u) | (inp.dtype ? 2u : 0u) | (weight.dtype ? 4u : 0u);
    if (mask16) {
        layernorm16_bw_args a = {.dinp = cpu_ptr(dinp), .dweight = cpu_ptr(dweight),
                                 .dbias = cpu_ptr(dbias), .dout = cpu_ptr(dout),
                                 .inp = cpu_ptr(inp), .weight = cpu_ptr(weight),
                                 .mean = cpu_ptr(mean), .rstd = cpu_ptr(rstd),
                                 .dtype16 = dout.dtype | inp.dtype | weight.dtype, .N = N,
                                 .C = C, .mask16 = mask16};
        size_t floats = vkc_layernorm_backward16_scratch(N, C, cb->nt);
        layernorm16_bw_args *rec = vkc_record(cb, "layernorm_backward", run_layernorm_backward16,
                                              &a, sizeof a, floats * 4 + 64);
        if (rec) /* after the arguments, 64-byte aligned */
            rec->scratch = (float *)(((uintptr_t)(rec + 1) + 63) & ~(uintptr_t)63);
        return;
    }
    layernorm_args a = {.dinp = cpu_ptr(dinp), .dweight = cpu_ptr(dweight),
                        .dbias = cpu_ptr(dbias), .dout = cpu_ptr(dout), .inp = cpu_ptr(inp),
                        .weight = cpu_ptr(weight), .mean_in = cpu_ptr(mean),
                        .rstd_in = cpu_ptr(rstd), .N = N, .C = C};
    vkc_record(cb, "layernorm_backward", run_layernorm_backward, &a, sizeof a, 0);
}

/* --- permute, unpermute --------------------------------------------------------------------- */

typedef struct { float *x, *q, *k, *v; int B, T, NH, HS; } permute_args;

static vka_result run_permute_forward(cpu_backend *cb, const void *p) {
    const permute_args *a = p;
    vkc_permute_forward(a->q, a->k, a->v, a->x, a->B, a->T, a->NH, a->HS, cb->nt);
    return VKA_SUCCESS;
}
static vka_result run_permute_backward(cpu_backend *cb, const void *p) {
    const permute_args *a = p;
    vkc_permute_backward(a->x, a->q, a->k, a->v, a->B, a->T, a->NH, a->HS, cb->nt);
    return VKA_SUCCESS;
}
static vka_result run_unpermute_forward(cpu_backend *cb, const void *p) {
    const permute_args *a = p;
    vkc_unpermute_forward(a->x, a->q, a->B, a->T, a->NH, a->HS, cb->nt);
    return VKA_SUCCESS;
}
static vka_result run_unpermute_backward(cpu_backend *cb, const void *p) {
    const permute_args *a = p;
    vkc_unpermute_backward(a->q, a->x, a->B, a->T, a->NH, a->HS, cb->nt);
    return VKA_SUCCESS;
}

/* x is the (B,T,3C) or (B,T,C) side, q/k/v the (B,NH,T,HS) heads (k and v: VKB_NONE for the
 * unpermutes). */
static void record_permute(vkb_backend *be, const char *op, cpu_run_fn run, vkb_tensor x,
                           vkb_tensor q, vkb_tensor k, vkb_tensor v, int B, int T, int NH,
                           int HS) {
    permute_args a = {cpu_ptr(x), cpu_ptr(q), cpu_ptr(k), cpu_ptr(v), B, T, NH, HS};
    vkc_record((cpu_backend *)be, op, run, &a, sizeof a, 0);
}
static void op_permute_forward(vkb_backend *be, vkb_tensor q, vkb_tensor k, vkb_tensor v,
                               vkb_tensor inp, int B, int T, int NH, int HS) {
    record_permute(be, "permute_forward", run_permute_forward, inp, q, k, v, B, T, NH, HS);
}
static void op_permute_backward(vkb_backend *be, vkb_tensor dinp, vkb_tensor dq, vkb_tensor dk,
                                vkb_tensor dv, int B, int T, int NH, int HS) {
    record_permute(be, "permute_backward", run_permute_backward, dinp, dq, dk, dv, B, T, NH,
                   HS);
}
static void op_unpermute_forward(vkb_backend *be, vkb_tensor out, vkb_tensor inp, int B, int T,
                                 int NH, int HS) {
    record_permute(be, "unpermute_forward", run_unpermute_forward, out, inp, VKB_NONE, VKB_NONE,
                   B, T, NH, HS);
}
static void op_unpermute_backward(vkb_backend *be, vkb_tensor dinp, vkb_tensor dout, int B,
                                  int T, int NH, int HS) {
    record_permute(be, "unpermute_backward", run_unpermute_backward, dout, dinp, VKB_NONE,
                   VKB_NONE, B, T, NH, HS);
}

/* --- softmax -------------------------------------------------------------------------------- */

typedef struct { float *out; const float *inp, *mask; vkb_softmax sm; } softmax_args;

static vka_result run_softmax_forward(cpu_backend *cb, const void *p) {
    const softmax_args *a = p;
    const vkb_softmax *sm = &a->sm;
    vkc_softmax_forward(a->out, a->inp, a->mask, sm->R, sm->Tq, sm->Tk, sm->mask_rows, sm->scale,
                        sm->causal, cb->nt);
    return VKA_SUCCESS;
}
static void op_softmax_forward(vkb_backend *be, const vkb_softmax *sm) {
    vkb_softmax s = vkb_softmax_resolved(*sm);
    softmax_args a = {cpu_ptr(s.out), cpu_ptr(s.inp), cpu_ptr(s.mask), s};
    vkc_record((cpu_backend *)be, "softmax_forward", run_softmax_forward, &a, sizeof a, 0);
}

typedef struct { float *dinp; const float *dout, *out; int R, Tk; float scale; } softmax_bwd_args;

static vka_result run_softmax_backward(cpu_backend *cb, const void *p) {
    const softmax_bwd_args *a = p;
    vkc_softmax_backward(a->dinp, a->dout, a->out, a->R, a->Tk, a->scale, cb->nt);
    return VKA_SUCCESS;
}
static void op_softmax_backward(vkb_backend *be, vkb_tensor dinp, vkb_tensor dout, vkb_tensor out,
                                int R, int Tk, float scale) {
    softmax_bwd_args a = {cpu_ptr(dinp), cpu_ptr(dout), cpu_ptr(out), R, Tk, scale};
    vkc_record((cpu_backend *)be, "softmax_backward", run_softmax_backward, &a, sizeof a, 0);
}

/* --- gelu ----------------------------------------------------------------------------------- */


static vka_result run_gelu_forward(cpu_backend *cb, const void *p) {
    const ew_args *a = p;
    vkc_gelu_forward_fast(a->dst, a->a, a->n, cb->isa, cb->nt); /* isa baseline: reference */
    return VKA_SUCCESS;
}
static void op_gelu_forward(vkb_backend *be, vkb_tensor out, vkb_tensor inp, size_t N) {
    if (record_ew16(be, "gelu_forward", EW16_GELU_FORWARD, out, inp, VKB_NONE, N)) return;
    ew_args a = {.dst = cpu_ptr(out), .a = cpu_ptr(inp), .n = N};
    vkc_record((cpu_backend *)be, "gelu_forward", run_gelu_forward, &a, sizeof a, 0);
}

static vka_result run_gelu_backward(cpu_backend *cb, const void *p) {
    const ew_args *a = p;
    vkc_gelu_backward_fast(a->dst, a->a, a->b, a->n, cb->isa, cb->nt);
    return VKA_SUCCESS;
}
static void op_gelu_backward(vkb_backend *be, vkb_tensor dinp, vkb_tensor inp, vkb_tensor dout,
                             size_t N) {
    if (record_ew16(be, "gelu_backward", EW16_GELU_BACKWARD, dinp, inp, dout, N)) return;
    ew_args a = {.dst = cpu_ptr(dinp), .a = cpu_ptr(inp), .b = cpu_ptr(dout), .n = N};
    vkc_record((cpu_backend *)be, "gelu_backward", run_gelu_backward, &a, sizeof a, 0);
}

/* --- crossentropy --------------------------------------------------------------------------- */

typedef struct {
    void *out;           /* losses (f32), or dlogits of out_dt */
    const void *logits;  /* of logits_dt (16-bit: from its first element) */
    const int32_t *targets;
    float dloss;
    const float *dloss_t; /* NULL: dloss */
    int N, V, Vp;
    uint8_t out_dt, logits_dt;
} ce_args;

static vka_result run_ce_forward(cpu_backend *cb, const void *p) {
    const ce_args *a = p;
    vka_result r = vkb_check_targets(cb->base.ctx, "crossentropy_forward", a->targets,
                                     (size_t)a->N, a->V);
    if (r != VKA_SUCCESS) return r;
    vkc_crossentropy_forward(a->out, a->logits, a->logits_dt, a->targets, a->N, a->V, a->Vp,
                             cb->cvt, cb->nt);
    return r;
}
static vka_result run_ce_backward(cpu_backend *cb, const void *p) {
    const ce_args *a = p;
    vka_result r = vkb_check_targets(cb->base.ctx, "crossentropy_backward", a->targets,
                                     (size_t)a->N, a->V);
    if (r != VKA_SUCCESS) return r;
    float dloss = a->dloss_t ? a->dloss_t[0] : a->dloss;
    vkc_crossentropy_backward(a->out, a->out_dt, a->logits, a->logits_dt, a->targets, dloss,
                              a->N, a->V, a->Vp, cb->cvt, cb->nt);
    return r;
}
static void record_ce(vkb_backend *be, const char *op, cpu_run_fn run, vkb_tensor out,
                      vkb_tensor logits, vkb_tensor targets, float dloss, vkb_tensor dloss_t,
                      int N, int V, int Vp) {
    ce_args a = {cpu_ptr(out), cpu_ptr(logits), ids(targets), dloss,
                 vkb_present(dloss_t) ? cpu_ptr(dloss_t) : NULL, N, V, Vp, out.dtype,
                 logits.dtype};
    vkc_record((cpu_backend *)be, op, run, &a, sizeof a, 0);
}
static void op_crossentropy_forward(vkb_backend *be, vkb_tensor losses, vkb_tensor logits,
                                    vkb_tensor targets, int N, int V, int Vp) {
    record_ce(be, "crossentropy_forward", run_ce_forward, losses, logits, targets, 0.0f, VKB_NONE,
              N, V, Vp);
}
static void op_crossentropy_backward(vkb_backend *be, vkb_tensor dlogits, vkb_tensor logits,
                                     vkb_tensor targets, float dloss, vkb_tensor dloss_t, int N,
                                     int V, int Vp) {
    record_ce(be, "crossentropy_backward", run_ce_backward, dlogits, logits, targets, dloss,
              dloss_t, N, V, Vp);
}

/* --- mean, grad_norm, adamw ----------------------------------------------------------------- */

static vka_result run_mean(cpu_backend *cb, const void *p) {
    const ew_args *a = p;
    vkc_mean(a->dst, a->a, a->n, cb->nt);
    return VKA_SUCCESS;
}
static void op_mean(vkb_backend *be, vkb_tensor out, vkb_tensor inp, size_t N) {
    ew_args a = {.dst = cpu_ptr(out), .a = cpu_ptr(inp), .n = N};
    vkc_record((cpu_backend *)be, "mean", run_mean, &a, sizeof a, 0);
}

/* Followed in the same allocation by grads[count] pointers and sizes[count]. */
typedef struct {
    float *out, *partials;
    float max_norm;
    int count;
    const float *hyper; /* NULL: no loss scaling */
} norm_args;

static vka_result run_grad_norm(cpu_backend *cb, const void *p) {
    const norm_args *a = p;
    const float *const *grads = (const float *const *)(const void *)(a + 1);
    const size_t *sizes = (const size_t *)(const void *)(grads + a->count);
    float u = a->hyper ? a->hyper[VKB_HYPER_GRAD_SCALE] : 1.0f;
    vkc_grad_norm(a->out, a->partials, grads, sizes, a->count, a->max_norm, u != 0.0f ? u : 1.0f,
                  cb->nt);
    return VKA_SUCCESS;
}
static void op_grad_norm(vkb_backend *be, vkb_tensor out, vkb_tensor partials,
                         const vkb_tensor *grads, int count, float max_norm, vkb_tensor hyper) {
    norm_args a = {cpu_ptr(out), cpu_ptr(partials), max_norm, count,
                   vkb_present(hyper) ? cpu_ptr(hyper) : NULL};
    size_t extra = (size_t)count * (sizeof(float *) + sizeof(size_t));
    norm_args *copy =
        vkc_record((cpu_backend *)be, "grad_norm", run_grad_norm, &a, sizeof a, extra);
    if (!copy) return;
    const float **ptrs = (const float **)(void *)(copy + 1);
    size_t *sizes = (size_t *)(void *)(ptrs + count);
    for (int i = 0; i < count; i++) {
        ptrs[i] = cpu_ptr(grads[i]);
        sizes[i] = grads[i].n;
    }
}

typedef struct {
    float *param, *m, *v;
    const float *grad, *hyper, *gscale;
    size_t N;
    float weight_decay;
} adamw_args;

static vka_result run_adamw(cpu_backend *cb, const void *p) {
    const adamw_args *a = p;
    vkc_adamw_fast(a->param, a->grad, a->m, a->v, a->hyper, a->gscale ? a->gscale[1] : 1.0f,
                   a->N, a->weight_decay, cb->isa, cb->nt); /* isa baseline: the reference */
    return VKA_SUCCESS;
}
static void op_adamw(vkb_backend *be, vkb_tensor param, vkb_tensor grad, vkb_tensor m,
                     vkb_tensor v, vkb_tensor hyper, vkb_tensor gscale, size_t N,
                     float weight_decay) {
    adamw_args a = {cpu_ptr(param), cpu_ptr(m),     cpu_ptr(v), cpu_ptr(grad),
                    cpu_ptr(hyper), cpu_ptr(gscale), N,          weight_decay};
    vkc_record((cpu_backend *)be, "adamw", run_adamw, &a, sizeof a, 0);
}

/* --- peak ------------------------------------------------------------------------------------ */

typedef struct { float *out; size_t n; uint32_t iters; } peak_args;

static vka_result run_peak_fma(cpu_backend *cb, const void *p) {
    const peak_args *a = p;
    vkc_peak_fma(a->out, a->n, a->iters, cb->nt);
    return VKA_SUCCESS;
}
static void op_peak_fma(vkb_backend *be, vkb_tensor out, size_t n, uint32_t iters) {
    peak_args a = {cpu_ptr(out), n, iters};
    vkc_record((cpu_backend *)be, "peak_fma", run_peak_fma, &a, sizeof a, 0);
}

/* --- kv_write ------------------------------------------------------------------------------- */

typedef struct {
    float *kcache, *vcache;
    const float *qkv;
    const int32_t *pos;
    int T, NH, HS, max_T;
    int cache_dt, qkv_dt; /* vka_dtype: f32, or 16-bit (vkc_kv_write16) */
} kv_write_args;

static vka_result run_kv_write(cpu_backend *cb, const void *p) {
    const kv_write_args *a = p;
    if (a->cache_dt != VKA_F32 || a->qkv_dt != VKA_F32)
        vkc_kv_write16(a->kcache, a->vcache, a->cache_dt, a->qkv, a->qkv_dt, a->pos, a->T, a->NH,
                       a->HS, a->max_T, cb->cvt, cb->nt);
    else
        vkc_kv_write(a->kcache, a->vcache, a->qkv, a->pos, a->T, a->NH, a->HS, a->max_T, cb->nt);
    return VKA_SUCCESS;
}
static void op_kv_write(vkb_backend *be, vkb_tensor kcache, vkb_tensor vcache, vkb_tensor qkv,
                        vkb_tensor pos, int T, int NH, int HS, int max_T) {
    kv_write_args a = {cpu_ptr(kcache), cpu_ptr(vcache), cpu_ptr(qkv), ids(pos), T, NH, HS, max_T,
                       kcache.dtype, qkv.dtype};
    vkc_record((cpu_backend *)be, "kv_write", run_kv_write, &a, sizeof a, 0);
}

/* --- attention ----------------------------------------------------------------------------- */
typedef struct { vkc_attention a; } attention_args;
/* key_lens are written between runs: each must be in [0, Tk], else the run fails naming it. */
static vka_result check_key_lens(cpu_backend *cb, const char *op, const vkc_attention *a) {
    return a->key_lens ? vkb_check_key_lens(cb->base.ctx, op, a->key_lens, a->B, a->Tk)
                       : VKA_SUCCESS;
}
static vka_result run_attention_forward(cpu_backend *cb, const void *p) {
    const attention_args *x = p;
    vka_result r = check_key_lens(cb, "attention_forward", &x->a);
    if (r == VKA_SUCCESS) vkc_attention_forward(&x->a, cb->isa, cb->nt);
    return r;
}
static vka_result run_attention_backward(cpu_backend *cb, const void *p) {
    const attention_args *x = p;
    vka_result r = check_key_lens(cb, "attention_backward", &x->a);
    if (r == VKA_SUCCESS) vkc_attention_backward(&x->a, cb->isa, cb->nt);
    return r;
}
static vkc_attn_strides strides(vkb_attn_layout l) { return (vkc_attn_strides){l.sb, l.sh, l.st}; }
static attention_args attention_resolve(const vkb_attention *at) {
    attention_args x = {{
        .out = cpu_ptr(at->out), .lse = cpu_ptr(at->lse), .dq = cpu_ptr(at->dq),
        .dk = cpu_ptr(at->dk), .dv = cpu_ptr(at->dv), .q = cpu_ptr(at->q), .k = cpu_ptr(at->k),
        .v = cpu_ptr(at->v), .dout = cpu_ptr(at->dout), .mask = cpu_ptr(at->mask),
        .key_lens = vkb_present(at->key_lens) ? ids(at->key_lens) : NULL,
        .sq = strides(at->lq), .sk = strides(at->lk), .sv = strides(at->lv),
        .so = strides(at->lo), .B = at->B, .NH = at->NH, .Tq = at->Tq, .Tk = at->Tk,
        .HS = at->HS, .scale = at->scale, .causal = (int)at->causal,
        .mask_per_batch = at->mask_per_batch,
    }};
    return x;
}
/* 16-bit q, k, v or out: their types, and the per-head rows in f32 (scratch, allocated with
 * the command when recorded, never per run). */
typedef struct {
    vkc_attention a;
    int dt[4];
    float *scratch;
} attention16_args;
static vka_result run_attention_forward16(cpu_backend *cb, const void *p) {
    const attention16_args *x = p;
    vka_result r = check_key_lens(cb, "attention_forward", &x->a);
    if (r == VKA_SUCCESS) vkc_attention_forward16(&x->a, x->dt, x->scratch, cb->isa, cb->cvt, cb->nt);
    return r;
}
static vka_result run_attention_backward16(cpu_backend *cb, const void *p) {
    const attention16_args *x = p;
    vka_result r = check_key_lens(cb, "attention_backward", &x->a);
    if (r == VKA_SUCCESS)
        vkc_attention_backward16(&x->a, x->dt, x->scratch, cb->isa, cb->cvt, cb->nt);
    return r;
}
static bool attention16(const vkb_attention *at) {
    return at->q.dtype || at->k.dtype || at->v.dtype || at->out.dtype;
}
/* Record the 16-bit command with its scratch of `floats` after the arguments, 64-byte aligned. */
static void record16(cpu_backend *cb, const char *name, cpu_run_fn run, const vkb_attention *at,
                     const attention_args *x, size_t floats) {
    attention16_args a = {.a = x->a, .dt = {at->q.dtype, at->k.dtype, at->v.dtype, at->out.dtype}};
    attention16_args *rec = vkc_record(cb, name, run, &a, sizeof a, floats * 4 + 64);
    if (rec) rec->scratch = (float *)(((uintptr_t)(rec + 1) + 63) & ~(uintptr_t)63);
}
static void op_attention_forward(vkb_backend *be, const vkb_attention *at) {
    cpu_backend *cb = (cpu_backend *)be;
    attention_args x = attention_resolve(at);
    if (attention16(at))
        record16(cb, "attention_forward", run_attention_forward16, at, &x,
                 vkc_attention_forward16_scratch(&x.a, cb->nt));
    else
        vkc_record(cb, "attention_forward", run_attention_forward, &x, sizeof x, 0);
}
static void op_attention_backward(vkb_backend *be, const vkb_attention *at) {
    cpu_backend *cb = (cpu_backend *)be;
    attention_args x = attention_resolve(at);
    if (attention16(at))
        record16(cb, "attention_backward", run_attention_backward16, at, &x,
                 vkc_attention_backward16_scratch(&x.a, cb->nt));
    else
        vkc_record(cb, "attention_backward", run_attention_backward, &x, sizeof x, 0);
}

void vkc_fill_op_table(vkb_ops *ops) {
    ops->fill = op_fill;
    ops->copy = op_copy;
    ops->convert = op_convert;
    ops->matmul = op_matmul;
    ops->bias_backward = op_bias_backward;
    ops->encoder_forward = op_encoder_forward;
    ops->encoder_backward = op_encoder_backward;
    ops->layernorm_forward = op_layernorm_forward;
    ops->layernorm_backward = op_layernorm_backward;
    ops->permute_forward = op_permute_forward;
    ops->permute_backward = op_permute_backward;
    ops->unpermute_forward = op_unpermute_forward;
    ops->unpermute_backward = op_unpermute_backward;
    ops->softmax_forward = op_softmax_forward;
    ops->softmax_backward = op_softmax_backward;
    ops->gelu_forward = op_gelu_forward;
    ops->gelu_backward = op_gelu_backward;
    ops->residual_forward = op_residual_forward;
    ops->add_inplace = op_add_inplace;
    ops->crossentropy_forward = op_crossentropy_forward;
    ops->crossentropy_backward = op_crossentropy_backward;
    ops->mean = op_mean;
    ops->grad_norm = op_grad_norm;
    ops->adamw = op_adamw;
    ops->peak_fma = op_peak_fma;
    ops->kv_write = op_kv_write;
    ops->attention_forward = op_attention_forward;
    ops->attention_backward = op_attention_backward;
}
