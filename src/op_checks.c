/* The one argument-check layer (backend.h, "Argument checks"): be->ops of every backend. Each op
 * of the public API (api_ops.c) and of the model (src/model/, be->ops) passes these checks before
 * the backend's own op (be->impl) runs. A failed check says what is wrong with the expression
 * of the size it needed:
 *   "vka_softmax_forward: inp holds 100 elements but R*Tk = 6*20 = 120 are needed"
 * (the public function's name when called through it, the op's otherwise). */
#include "backend.h"

#include <math.h>
#include <string.h>

/* The checks of one op call: the first failed one writes the message, later ones do nothing. */
typedef struct ck {
    vkb_backend *be;
    const char *op; /* be->caller, or the op's own name */
    bool stop;      /* a check failed, or a model's op after an earlier failure: skip the rest */
} ck;

/* A public call is checked even after an earlier failure of its graph (it returns its own
 * error); a model's op is then ignored at once (errors are sticky). */
static ck ck_start(vkb_backend *be, const char *op) {
    return (ck){be, be->caller ? be->caller : op, !be->caller && be->status != VKA_SUCCESS};
}

static void ck_fail(ck *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void ck_fail(ck *c, const char *fmt, ...) {
    if (c->stop) return;
    c->stop = true;
    char msg[VKA_ERROR_MAX - 64];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    vkb_backend *be = c->be;
    if (!be->caller) {
        vkb_fail(be, VKA_ERROR_INVALID_ARGUMENT, "%s: %s", c->op, msg);
        return;
    }
    /* The public call's own message, even when the graph failed before (which keeps its first). */
    be->call_status = vka_set_error(be->ctx, VKA_ERROR_INVALID_ARGUMENT, "%s: %s", c->op, msg);
    if (be->status == VKA_SUCCESS) be->status = be->call_status;
}

/* Every check passed and nothing failed since graph_begin: the backend's op may record. */
static bool ck_ok(const ck *c) { return !c->stop && c->be->status == VKA_SUCCESS; }

static void ck_positive(ck *c, const char *name, int64_t v) {
    if (v <= 0) ck_fail(c, "%s = %lld must be positive", name, (long long)v);
}

static void ck_nonzero(ck *c, const char *name, size_t v) {
    if (v == 0) ck_fail(c, "%s = 0 must be positive", name);
}

/* Elements a tensor must hold, with the expression that gave them for messages. */
typedef struct need {
    uint64_t n;
    bool overflow;
    char expr[200]; /* "R*Tk = 6*20", "N" for a single size, "" for a constant */
} need;

static bool mul_overflows(uint64_t a, uint64_t b, uint64_t *out) {
    if (a && b > UINT64_MAX / a) return true;
    *out = a * b;
    return false;
}

/* The product of count factors named by names ("R*Tk"); non-positive factors give 0 (they are
 * reported by ck_positive first). */
static need need_prod(const char *names, const int64_t *f, int count) {
    need nd = {1, false, ""};
    char vals[120] = "";
    size_t len = 0;
    for (int i = 0; i < count; i++) {
        uint64_t v = f[i] > 0 ? (uint64_t)f[i] : 0;
        if (!nd.overflow) nd.overflow = mul_overflows(nd.n, v, &nd.n);
        if (len < sizeof vals)
            len += (size_t)snprintf(vals + len, sizeof vals - len, "%s%lld", i ? "*" : "",
                                    (long long)f[i]);
    }
    if (count == 1) snprintf(nd.expr, sizeof nd.expr, "%s", names);
    else snprintf(nd.expr, sizeof nd.expr, "%s = %s", names, vals);
    if (nd.overflow) nd.n = UINT64_MAX;
    return nd;
}
#define NEED(names, ...)                                   \
    need_prod(names, (const int64_t[]){__VA_ARGS__},       \
              (int)(sizeof((const int64_t[]){__VA_ARGS__}) / sizeof(int64_t)))

/* n elements, named by name ("N"), or unnamed if name is NULL. */
static need need_n(const char *name, uint64_t n) {
    need nd = {n, false, ""};
    if (name) snprintf(nd.expr, sizeof nd.expr, "%s", name);
    return nd;
}

/* Span of batch matrices of rows*cols, stride elements apart (0 = packed):
 * (batch-1)*stride + rows*cols. */
static need need_batched(const char *mat, const char *stride_name, int batch, size_t stride,
                         int rows, int cols) {
    need m = NEED(mat, rows, cols);
    if (batch <= 1 || m.overflow) return m;
    uint64_t s = stride ? stride : m.n, span;
    need nd = {0, false, ""};
    nd.overflow = mul_overflows((uint64_t)(batch - 1), s, &span) || span > UINT64_MAX - m.n;
    nd.n = nd.overflow ? UINT64_MAX : span + m.n;
    snprintf(nd.expr, sizeof nd.expr, "(batch-1)*%s + %s = %d*%llu + %llu",
             stride ? stride_name : mat, mat, batch - 1, (unsigned long long)s,
             (unsigned long long)m.n);
    return nd;
}

/* t (required) has element type dtype and holds nd.n elements (a 16-bit view: two a word). */
static void ck_holds_typed(ck *c, const char *name, vkb_tensor t, need nd, uint8_t dtype) {
    if (c->stop) return;
    if (!vkb_present(t)) ck_fail(c, "%s is NULL", name);
    else if (t.dtype != dtype)
        ck_fail(c, "%s holds %s elements; this op takes %s there%s", name,
                vka_dtype_string((vka_dtype)t.dtype),
                dtype == VKA_F32 ? "4-byte (f32, or int32 ids)" : vka_dtype_string((vka_dtype)dtype),
                dtype == VKA_F32 ? " " VKB_DTYPE_HINT : "");
    else if (nd.overflow) ck_fail(c, "%s: %s overflows", name, nd.expr);
    else if (vkb_elems(t) < nd.n)
        ck_fail(c, "%s holds %zu elements but %s%s%llu are needed", name, vkb_elems(t), nd.expr,
                nd.expr[0] ? " = " : "", (unsigned long long)nd.n);
}

/* t (required) is float32 (or int32 ids) and holds nd.n elements. */
static void ck_holds(ck *c, const char *name, vkb_tensor t, need nd) {
    ck_holds_typed(c, name, t, nd, VKA_F32);
}

/* t, if present, holds nd.n elements. */
static void ck_holds_opt(ck *c, const char *name, vkb_tensor t, need nd) {
    if (vkb_present(t)) ck_holds(c, name, t, nd);
}

/* t (required) holds nd.n elements of f32 or of a 16-bit type (the ops with 16-bit activations:
 * encoder_forward, layernorm_forward/_backward, gelu_forward/backward, residual_forward, ...).
 * *kind16 is the 16-bit type seen so far in this call (0: none): every 16-bit tensor of one call
 * has the same one. */
static void ck_holds_any(ck *c, const char *name, vkb_tensor t, need nd, uint8_t *kind16,
                         const char **name16) {
    if (c->stop) return;
    if (vkb_present(t) && t.dtype != VKA_F32 && t.dtype != VKA_BF16 && t.dtype != VKA_F16) {
        ck_fail(c, "%s has dtype %d, not a vka_dtype", name, t.dtype);
        return;
    }
    if (vkb_present(t) && t.dtype != VKA_F32) {
        if (*kind16 && *kind16 != t.dtype) {
            ck_fail(c, "%s holds %s elements but %s %s ones; the 16-bit tensors of one call "
                    "have one type", name, vka_dtype_string((vka_dtype)t.dtype), *name16,
                    vka_dtype_string((vka_dtype)*kind16));
            return;
        }
        *kind16 = t.dtype;
        *name16 = name;
    }
    ck_holds_typed(c, name, t, nd, vkb_present(t) ? t.dtype : VKA_F32);
}

/* a and b are the same tensor: both present and starting at the same element. (Public tensors
 * are one arena each, so for them this is the same vka_tensor.) */
static bool same(vkb_tensor a, vkb_tensor b) {
    return a.arena && a.arena == b.arena && a.chunk == b.chunk && a.offset == b.offset;
}

/* --- the ops ------------------------------------------------------------------------------ */

static void ck_fill(vkb_backend *be, vkb_tensor t, float value) {
    ck c = ck_start(be, "fill");
    ck_holds(&c, "t", t, need_n(NULL, 0));
    if (ck_ok(&c)) be->impl->fill(be, t, value);
}

static void ck_copy(vkb_backend *be, vkb_tensor dst, vkb_tensor src) {
    ck c = ck_start(be, "copy");
    ck_holds(&c, "src", src, need_n(NULL, 0));
    ck_holds(&c, "dst", dst, need_n("src.n", src.n));
    if (!c.stop && vkb_overlap(dst, src.n, src, src.n)) ck_fail(&c, "dst overlaps src (not supported)");
    if (ck_ok(&c)) be->impl->copy(be, dst, src);
}

/* A pair convert takes: f32 to or from bf16 or fp16, or one 16-bit type to itself. */
static bool convert_pair(uint8_t dst, uint8_t src) {
    if (dst == src) return dst != VKA_F32;
    return dst == VKA_F32 || src == VKA_F32;
}

static void ck_convert(vkb_backend *be, vkb_tensor dst, vkb_tensor src, size_t n) {
    ck c = ck_start(be, "convert");
    ck_nonzero(&c, "n", n);
    if (!c.stop && !vkb_present(src)) ck_fail(&c, "src is NULL");
    if (!c.stop && !vkb_present(dst)) ck_fail(&c, "dst is NULL");
    if (!c.stop && src.dtype > VKA_F16) ck_fail(&c, "src has dtype %d, not a vka_dtype", src.dtype);
    if (!c.stop && dst.dtype > VKA_F16) ck_fail(&c, "dst has dtype %d, not a vka_dtype", dst.dtype);
    if (!c.stop && !convert_pair(dst.dtype, src.dtype))
        ck_fail(&c, "%s src to %s dst is not a conversion this op makes (f32 to or from bf16 or "
                "fp16, or a 16-bit type to itself)", vka_dtype_string((vka_dtype)src.dtype),
                vka_dtype_string((vka_dtype)dst.dtype));
    ck_holds_typed(&c, "src", src, need_n("n", n), src.dtype);
    ck_holds_typed(&c, "dst", dst, need_n("n", n), dst.dtype);
    size_t sw = src.dtype ? (n + 1) / 2 : n, dw = dst.dtype ? (n + 1) / 2 : n; /* words */
    if (!c.stop && vkb_overlap(dst, dw, src, sw)) ck_fail(&c, "dst overlaps src (not supported)");
    if (ck_ok(&c)) be->impl->convert(be, dst, src, n);
}

static void ck_matmul(vkb_backend *be, const vkb_matmul *mm) {
    ck c = ck_start(be, "matmul");
    int M = mm->M, N = mm->N, K = mm->K, batch = mm->batch;
    ck_positive(&c, "M", M);
    ck_positive(&c, "N", N);
    ck_positive(&c, "K", K);
    ck_positive(&c, "batch", batch);
    /* out: f32, bf16 or f16, whatever a and b are (a 16-bit out is the f32 result rounded,
     * backend.h); its elements counted as elements, two a word */
    uint8_t ot = vkb_present(mm->out) && (mm->out.dtype == VKA_BF16 || mm->out.dtype == VKA_F16)
                     ? mm->out.dtype
                     : VKA_F32;
    ck_holds_typed(&c, "out", mm->out,
                   need_batched("M*N", "stride_out", batch, mm->stride_out, M, N), ot);
    if (ot != VKA_F32 && mm->accumulate)
        ck_fail(&c, "accumulate into a %s out is not supported (out += ... would round out "
                "twice); accumulate into an f32 out and vka_copy it",
                vka_dtype_string((vka_dtype)ot));
    /* a and b: both f32, both bf16 or both f16 (bias stays f32: fp32 accumulation) */
    bool both = vkb_present(mm->a) && vkb_present(mm->b);
    if (both && mm->a.dtype != mm->b.dtype)
        ck_fail(&c, "a holds %s elements and b %s ones; this op takes a and b of one type (f32, "
                "bf16 or f16)", vka_dtype_string((vka_dtype)mm->a.dtype),
                vka_dtype_string((vka_dtype)mm->b.dtype));
    uint8_t in = vkb_present(mm->a) && (mm->a.dtype == VKA_BF16 || mm->a.dtype == VKA_F16)
                     ? mm->a.dtype
                     : VKA_F32;
    ck_holds_typed(&c, "a", mm->a,
                   need_batched(mm->trans_a ? "K*M" : "M*K", "stride_a", batch, mm->stride_a,
                                mm->trans_a ? K : M, mm->trans_a ? M : K),
                   in);
    ck_holds_typed(&c, "b", mm->b,
                   need_batched(mm->trans_b ? "N*K" : "K*N", "stride_b", batch, mm->stride_b,
                                mm->trans_b ? N : K, mm->trans_b ? K : N),
                   in);
    ck_holds_opt(&c, "bias", mm->bias, need_n("N", (uint64_t)(N > 0 ? N : 0)));
    if (same(mm->out, mm->a) || same(mm->out, mm->b))
        ck_fail(&c, "out must be a different tensor from a and b");
    need mn = NEED("M*N", M, N);
    if (batch > 1 && mm->stride_out && mm->stride_out < mn.n)
        ck_fail(&c, "stride_out = %zu is less than %s = %llu: the batches of out would overlap",
                mm->stride_out, mn.expr, (unsigned long long)mn.n);
    if (ck_ok(&c)) be->impl->matmul(be, mm);
}

static void ck_bias_backward(vkb_backend *be, vkb_tensor dbias, vkb_tensor dout, int N, int OC) {
    ck c = ck_start(be, "bias_backward");
    ck_positive(&c, "N", N);
    ck_positive(&c, "OC", OC);
    ck_holds(&c, "dbias", dbias, need_n("OC", (uint64_t)OC));
    ck_holds(&c, "dout", dout, NEED("N*OC", N, OC));
    if (ck_ok(&c)) be->impl->bias_backward(be, dbias, dout, N, OC);
}

static void ck_encoder_forward(vkb_backend *be, vkb_tensor out, vkb_tensor tokens, vkb_tensor wte,
                               vkb_tensor wpe, int B, int T, int C) {
    ck c = ck_start(be, "encoder_forward");
    ck_positive(&c, "B", B);
    ck_positive(&c, "T", T);
    ck_positive(&c, "C", C);
    uint8_t k16 = 0; /* out, wte and wpe: f32 or the call's one 16-bit type */
    const char *n16 = NULL;
    ck_holds_any(&c, "out", out, NEED("B*T*C", B, T, C), &k16, &n16);
    ck_holds(&c, "tokens", tokens, NEED("B*T", B, T));
    ck_holds_any(&c, "wte", wte, need_n("C (one row)", (uint64_t)C), &k16, &n16);
    ck_holds_any(&c, "wpe", wpe, NEED("T*C", T, C), &k16, &n16);
    if (ck_ok(&c)) be->impl->encoder_forward(be, out, tokens, wte, wpe, B, T, C);
}

/* tokens and buckets are checked for both backends although each reads only one of them (CPU:
 * tokens; Vulkan: the buckets), so the model is held to one contract. */
static void ck_encoder_backward(vkb_backend *be, vkb_tensor dwte, vkb_tensor dwpe, vkb_tensor dout,
                                vkb_tensor tokens, vkb_tensor buckets, int B, int T, int C) {
    ck c = ck_start(be, "encoder_backward");
    ck_positive(&c, "B", B);
    ck_positive(&c, "T", T);
    ck_positive(&c, "C", C);
    need bt = NEED("B*T", B, T);
    ck_holds(&c, "dwte", dwte, need_n("C (one row)", (uint64_t)C));
    ck_holds(&c, "dwpe", dwpe, NEED("T*C", T, C));
    ck_holds(&c, "dout", dout, NEED("B*T*C", B, T, C));
    ck_holds(&c, "tokens", tokens, bt);
    if (!c.stop) {
        need bk = {VKA_BUCKETS_SIZE(bt.n), false, ""};
        snprintf(bk.expr, sizeof bk.expr, "VKA_BUCKETS_SIZE(B*T) = 3*%llu + 2",
                 (unsigned long long)bt.n);
        ck_holds(&c, "buckets", buckets, bk);
    }
    if (ck_ok(&c)) be->impl->encoder_backward(be, dwte, dwpe, dout, tokens, buckets, B, T, C);
}

static void ck_layernorm_forward(vkb_backend *be, vkb_tensor out, vkb_tensor mean,
                                 vkb_tensor rstd, vkb_tensor inp, vkb_tensor weight,
                                 vkb_tensor bias, int N, int C) {
    ck c = ck_start(be, "layernorm_forward");
    ck_positive(&c, "N", N);
    ck_positive(&c, "C", C);
    need nc = NEED("N*C", N, C), n = need_n("N", (uint64_t)N), cn = need_n("C", (uint64_t)C);
    uint8_t k16 = 0; /* out and inp: f32 or 16-bit; the statistics and parameters f32 */
    const char *n16 = NULL;
    ck_holds_any(&c, "out", out, nc, &k16, &n16);
    ck_holds(&c, "mean", mean, n);
    ck_holds(&c, "rstd", rstd, n);
    ck_holds_any(&c, "inp", inp, nc, &k16, &n16);
    ck_holds(&c, "weight", weight, cn);
    ck_holds(&c, "bias", bias, cn);
    if (ck_ok(&c)) be->impl->layernorm_forward(be, out, mean, rstd, inp, weight, bias, N, C);
}

static void ck_layernorm_backward(vkb_backend *be, vkb_tensor dinp, vkb_tensor dweight,
                                  vkb_tensor dbias, vkb_tensor dout, vkb_tensor inp,
                                  vkb_tensor weight, vkb_tensor mean, vkb_tensor rstd, int N,
                                  int C) {
    ck c = ck_start(be, "layernorm_backward");
    ck_positive(&c, "N", N);
    ck_positive(&c, "C", C);
    need nc = NEED("N*C", N, C), n = need_n("N", (uint64_t)N), cn = need_n("C", (uint64_t)C);
    uint8_t k16 = 0; /* dout, inp and weight: f32 or the call's one 16-bit type; the
                      * statistics and the gradients f32 (they accumulate) */
    const char *n16 = NULL;
    ck_holds(&c, "dinp", dinp, nc);
    ck_holds(&c, "dweight", dweight, cn);
    ck_holds(&c, "dbias", dbias, cn);
    ck_holds_any(&c, "dout", dout, nc, &k16, &n16);
    ck_holds_any(&c, "inp", inp, nc, &k16, &n16);
    ck_holds_any(&c, "weight", weight, cn, &k16, &n16);
    ck_holds(&c, "mean", mean, n);
    ck_holds(&c, "rstd", rstd, n);
    if (ck_ok(&c))
        be->impl->layernorm_backward(be, dinp, dweight, dbias, dout, inp, weight, mean, rstd, N,
                                     C);
}

/* The permutes: x (named x_name) on the token side holds mul*B*T*NH*HS (mul 3: the qkv side),
 * each of the n head-side tensors heads[i] B*NH*T*HS. */
static ck permute_checks(vkb_backend *be, const char *op, vkb_tensor x, const char *x_name,
                         int mul, const vkb_tensor *heads, const char *const *names, int n, int B,
                         int T, int NH, int HS) {
    ck c = ck_start(be, op);
    ck_positive(&c, "B", B);
    ck_positive(&c, "T", T);
    ck_positive(&c, "NH", NH);
    ck_positive(&c, "HS", HS);
    ck_holds(&c, x_name, x,
             mul == 3 ? NEED("B*T*3*NH*HS", B, T, 3, NH, HS) : NEED("B*T*NH*HS", B, T, NH, HS));
    need hn = NEED("B*NH*T*HS", B, NH, T, HS);
    for (int i = 0; i < n; i++) ck_holds(&c, names[i], heads[i], hn);
    return c;
}

static void ck_permute_forward(vkb_backend *be, vkb_tensor q, vkb_tensor k, vkb_tensor v,
                               vkb_tensor inp, int B, int T, int NH, int HS) {
    ck c = permute_checks(be, "permute_forward", inp, "inp", 3, (const vkb_tensor[]){q, k, v},
                          (const char *const[]){"q", "k", "v"}, 3, B, T, NH, HS);
    if (ck_ok(&c)) be->impl->permute_forward(be, q, k, v, inp, B, T, NH, HS);
}

static void ck_permute_backward(vkb_backend *be, vkb_tensor dinp, vkb_tensor dq, vkb_tensor dk,
                                vkb_tensor dv, int B, int T, int NH, int HS) {
    ck c = permute_checks(be, "permute_backward", dinp, "dinp", 3,
                          (const vkb_tensor[]){dq, dk, dv}, (const char *const[]){"dq", "dk", "dv"},
                          3, B, T, NH, HS);
    if (ck_ok(&c)) be->impl->permute_backward(be, dinp, dq, dk, dv, B, T, NH, HS);
}

static void ck_unpermute_forward(vkb_backend *be, vkb_tensor out, vkb_tensor inp, int B, int T,
                                 int NH, int HS) {
    ck c = permute_checks(be, "unpermute_forward", out, "out", 1, &inp,
                          (const char *const[]){"inp"}, 1, B, T, NH, HS);
    if (ck_ok(&c)) be->impl->unpermute_forward(be, out, inp, B, T, NH, HS);
}

static void ck_unpermute_backward(vkb_backend *be, vkb_tensor dinp, vkb_tensor dout, int B,
                                  int T, int NH, int HS) {
    ck c = permute_checks(be, "unpermute_backward", dout, "dout", 1, &dinp,
                          (const char *const[]){"dinp"}, 1, B, T, NH, HS);
    if (ck_ok(&c)) be->impl->unpermute_backward(be, dinp, dout, B, T, NH, HS);
}

static void ck_softmax_forward(vkb_backend *be, const vkb_softmax *sm) {
    ck c = ck_start(be, "softmax_forward");
    int R = sm->R, Tk = sm->Tk, Tq = sm->Tq ? sm->Tq : R;
    int mask_rows = sm->mask_rows ? sm->mask_rows : 1;
    ck_positive(&c, "R", R);
    ck_positive(&c, "Tk", Tk);
    ck_positive(&c, "Tq", Tq);
    ck_positive(&c, "mask_rows", mask_rows);
    need n = NEED("R*Tk", R, Tk);
    ck_holds(&c, "out", sm->out, n);
    ck_holds(&c, "inp", sm->inp, n);
    if (!c.stop) {
        int mrows = R / mask_rows + (R % mask_rows != 0);
        ck_holds_opt(&c, "mask", sm->mask, NEED("ceil(R/mask_rows)*Tk", mrows, Tk));
    }
    if (ck_ok(&c)) be->impl->softmax_forward(be, sm);
}

static void ck_softmax_backward(vkb_backend *be, vkb_tensor dinp, vkb_tensor dout, vkb_tensor out,
                                int R, int Tk, float scale) {
    ck c = ck_start(be, "softmax_backward");
    ck_positive(&c, "R", R);
    ck_positive(&c, "Tk", Tk);
    need n = NEED("R*Tk", R, Tk);
    ck_holds(&c, "dinp", dinp, n);
    ck_holds(&c, "dout", dout, n);
    ck_holds(&c, "out", out, n);
    if (ck_ok(&c)) be->impl->softmax_backward(be, dinp, dout, out, R, Tk, scale);
}

/* The elementwise ops: N > 0, and each of the count tensors t[i] holds N elements: float32,
 * or (bit i of any16 set) float32 or 16-bit, the 16-bit ones of one type. */
static ck elementwise_checks(vkb_backend *be, const char *op, const vkb_tensor *t,
                             const char *const *names, int count, size_t N, unsigned any16) {
    ck c = ck_start(be, op);
    ck_nonzero(&c, "N", N);
    uint8_t k16 = 0;
    const char *n16 = NULL;
    for (int i = 0; i < count; i++) {
        if (any16 >> i & 1u) ck_holds_any(&c, names[i], t[i], need_n("N", N), &k16, &n16);
        else ck_holds(&c, names[i], t[i], need_n("N", N));
    }
    return c;
}

static void ck_gelu_forward(vkb_backend *be, vkb_tensor out, vkb_tensor inp, size_t N) {
    ck c = elementwise_checks(be, "gelu_forward", (const vkb_tensor[]){out, inp},
                              (const char *const[]){"out", "inp"}, 2, N, 3u);
    if (ck_ok(&c)) be->impl->gelu_forward(be, out, inp, N);
}

static void ck_gelu_backward(vkb_backend *be, vkb_tensor dinp, vkb_tensor inp, vkb_tensor dout,
                             size_t N) {
    ck c = elementwise_checks(be, "gelu_backward", (const vkb_tensor[]){dinp, inp, dout},
                              (const char *const[]){"dinp", "inp", "dout"}, 3, N,
                              6u); /* dinp (accumulated) stays f32 */
    if (ck_ok(&c)) be->impl->gelu_backward(be, dinp, inp, dout, N);
}

static void ck_residual_forward(vkb_backend *be, vkb_tensor out, vkb_tensor a, vkb_tensor b,
                                size_t N) {
    ck c = elementwise_checks(be, "residual_forward", (const vkb_tensor[]){out, a, b},
                              (const char *const[]){"out", "a", "b"}, 3, N, 7u);
    if (ck_ok(&c)) be->impl->residual_forward(be, out, a, b, N);
}

static void ck_add_inplace(vkb_backend *be, vkb_tensor dst, vkb_tensor src, size_t N) {
    ck c = elementwise_checks(be, "add_inplace", (const vkb_tensor[]){dst, src},
                              (const char *const[]){"dst", "src"}, 2, N, 0u);
    if (ck_ok(&c)) be->impl->add_inplace(be, dst, src, N);
}

/* Both crossentropy ops: out (named out_name: N losses, or N*Vp dlogits when out_rows), logits
 * (N, Vp), targets (N), V in [1, Vp]. */
static ck crossentropy_checks(vkb_backend *be, const char *op, vkb_tensor out,
                              const char *out_name, bool out_rows, vkb_tensor logits,
                              vkb_tensor targets, int N, int V, int Vp) {
    ck c = ck_start(be, op);
    ck_positive(&c, "N", N);
    ck_positive(&c, "V", V);
    ck_positive(&c, "Vp", Vp);
    if (V > Vp) ck_fail(&c, "V = %d exceeds Vp = %d", V, Vp);
    need nvp = NEED("N*Vp", N, Vp), n = need_n("N", (uint64_t)N);
    /* logits, and the backward's dlogits: f32 or the call's one 16-bit type (issue 19) */
    uint8_t k16 = 0;
    const char *n16 = NULL;
    ck_holds_any(&c, "logits", logits, nvp, &k16, &n16);
    if (out_rows) ck_holds_any(&c, out_name, out, nvp, &k16, &n16);
    else ck_holds(&c, out_name, out, n);
    ck_holds(&c, "targets", targets, n);
    if (out_rows && ck_ok(&c) && same(out, logits) && out.dtype != logits.dtype)
        ck_fail(&c, "dlogits and logits are the same memory but dlogits holds %s elements and "
                "logits %s ones: in place takes one type", vka_dtype_string((vka_dtype)out.dtype),
                vka_dtype_string((vka_dtype)logits.dtype));
    return c;
}

static void ck_crossentropy_forward(vkb_backend *be, vkb_tensor losses, vkb_tensor logits,
                                    vkb_tensor targets, int N, int V, int Vp) {
    ck c = crossentropy_checks(be, "crossentropy_forward", losses, "losses", false, logits,
                               targets, N, V, Vp);
    if (ck_ok(&c)) be->impl->crossentropy_forward(be, losses, logits, targets, N, V, Vp);
}

static void ck_crossentropy_backward(vkb_backend *be, vkb_tensor dlogits, vkb_tensor logits,
                                     vkb_tensor targets, float dloss, vkb_tensor dloss_t, int N,
                                     int V, int Vp) {
    ck c = crossentropy_checks(be, "crossentropy_backward", dlogits, "dlogits", true, logits,
                               targets, N, V, Vp);
    ck_holds_opt(&c, "dloss_t", dloss_t, need_n(NULL, 1));
    if (ck_ok(&c))
        be->impl->crossentropy_backward(be, dlogits, logits, targets, dloss, dloss_t, N, V, Vp);
}

static void ck_mean(vkb_backend *be, vkb_tensor out, vkb_tensor inp, size_t N) {
    ck c = ck_start(be, "mean");
    ck_nonzero(&c, "N", N);
    ck_holds(&c, "out", out, need_n(NULL, 1));
    ck_holds(&c, "inp", inp, need_n("N", N));
    if (ck_ok(&c)) be->impl->mean(be, out, inp, N);
}

static void ck_grad_norm(vkb_backend *be, vkb_tensor out, vkb_tensor partials,
                         const vkb_tensor *grads, int count, float max_norm, vkb_tensor hyper) {
    ck c = ck_start(be, "grad_norm");
    ck_positive(&c, "count", count);
    if (!grads) ck_fail(&c, "grads is NULL");
    ck_holds(&c, "out", out, need_n(NULL, 2));
    ck_holds(&c, "partials", partials, NEED("count*VKA_NORM_PARTIALS", count, VKA_NORM_PARTIALS));
    for (int i = 0; !c.stop && i < count; i++) {
        char name[32];
        snprintf(name, sizeof name, "grads[%d]", i);
        ck_holds(&c, name, grads[i], need_n(NULL, 0));
    }
    ck_holds_opt(&c, "hyper", hyper, need_n("VKA_HYPER_COUNT", VKA_HYPER_COUNT));
    if (ck_ok(&c)) be->impl->grad_norm(be, out, partials, grads, count, max_norm, hyper);
}

static void ck_adamw(vkb_backend *be, vkb_tensor param, vkb_tensor grad, vkb_tensor m,
                     vkb_tensor v, vkb_tensor hyper, vkb_tensor gscale, size_t N,
                     float weight_decay) {
    ck c = ck_start(be, "adamw");
    ck_nonzero(&c, "N", N);
    need n = need_n("N", N);
    ck_holds(&c, "param", param, n);
    ck_holds(&c, "grad", grad, n);
    ck_holds(&c, "m", m, n);
    ck_holds(&c, "v", v, n);
    ck_holds(&c, "hyper", hyper, need_n("VKA_HYPER_COUNT", VKA_HYPER_COUNT));
    ck_holds_opt(&c, "gscale", gscale, need_n(NULL, 2));
    if (ck_ok(&c)) be->impl->adamw(be, param, grad, m, v, hyper, gscale, N, weight_decay);
}

static void ck_peak_fma(vkb_backend *be, vkb_tensor out, size_t n, uint32_t iters) {
    ck c = ck_start(be, "peak_fma");
    ck_holds(&c, "out", out, need_n("n", n));
    if (ck_ok(&c)) be->impl->peak_fma(be, out, n, iters);
}

static void ck_kv_write(vkb_backend *be, vkb_tensor kcache, vkb_tensor vcache, vkb_tensor qkv,
                        vkb_tensor pos, int T, int NH, int HS, int max_T) {
    ck c = ck_start(be, "kv_write");
    ck_positive(&c, "T", T);
    ck_positive(&c, "NH", NH);
    ck_positive(&c, "HS", HS);
    ck_positive(&c, "max_T", max_T);
    need cache = NEED("NH*max_T*HS", NH, max_T, HS);
    /* kcache, vcache and qkv: each f32 or the call's one 16-bit type; the two caches alike */
    uint8_t k16 = 0;
    const char *n16 = NULL;
    ck_holds_any(&c, "kcache", kcache, cache, &k16, &n16);
    ck_holds_any(&c, "vcache", vcache, cache, &k16, &n16);
    ck_holds_any(&c, "qkv", qkv, NEED("T*3*NH*HS", T, 3, NH, HS), &k16, &n16);
    if (!c.stop && kcache.dtype != vcache.dtype)
        ck_fail(&c, "kcache holds %s elements and vcache %s ones; the caches have one type",
                vka_dtype_string((vka_dtype)kcache.dtype), vka_dtype_string((vka_dtype)vcache.dtype));
    ck_holds(&c, "pos", pos, need_n("2", 2));
    if (ck_ok(&c)) be->impl->kv_write(be, kcache, vcache, qkv, pos, T, NH, HS, max_T);
}

/* --- attention ---------------------------------------------------------------------------- */

static bool layout_is(vkb_attn_layout a, vkb_attn_layout b) {
    return a.sb == b.sb && a.sh == b.sh && a.st == b.st;
}

/* q, k, v are the three parts of one (B, T, 3C) tensor (vkb_attn_in_qkv views starting at its
 * elements 0, C and 2C): checked as that tensor, q holding all of it. */
static bool packed_qkv(const vkb_attention *at, vkb_tensor q, vkb_tensor k, vkb_tensor v) {
    vkb_attn_layout l = vkb_attn_in_qkv(at->NH, at->Tq, at->HS);
    size_t C = (size_t)at->NH * at->HS;
    if (q.dtype != k.dtype || q.dtype != v.dtype) return false;
    if (q.dtype != VKA_F32) { /* 16-bit: the parts start C elements = C / 2 words apart */
        if (C % 2) return false;
        C /= 2;
    }
    return at->Tq == at->Tk && layout_is(at->lq, l) && layout_is(at->lk, l) &&
           layout_is(at->lv, l) && vkb_present(q) && k.arena == q.arena && v.arena == q.arena &&
           k.chunk == q.chunk && v.chunk == q.chunk && k.offset == q.offset + C &&
           v.offset == q.offset + 2 * C;
}

/* Elements a view laid out by l spans over T rows (Tn names T): B*NH*T*HS when packed,
 * B*T*NH*HS with heads side by side, else (B-1)*sb + (NH-1)*sh + (T-1)*st + HS. */
static need need_view(const vkb_attention *at, vkb_attn_layout l, int T, const char *Tn) {
    char names[64];
    if (layout_is(l, vkb_attn_packed(at->NH, T, at->HS))) {
        snprintf(names, sizeof names, "B*NH*%s*HS", Tn);
        return NEED(names, at->B, at->NH, T, at->HS);
    }
    if (layout_is(l, vkb_attn_in_btc(at->NH, T, at->HS))) {
        snprintf(names, sizeof names, "B*%s*NH*HS (out_btc)", Tn);
        return NEED(names, at->B, T, at->NH, at->HS);
    }
    const uint64_t f[4] = {(uint64_t)at->B - 1, (uint64_t)at->NH - 1, (uint64_t)T - 1, 1};
    const uint64_t s[4] = {l.sb, l.sh, l.st, (uint64_t)at->HS};
    need nd = {0, false, ""};
    for (int i = 0; i < 4 && !nd.overflow; i++) {
        uint64_t p;
        nd.overflow = mul_overflows(f[i], s[i], &p) || p > UINT64_MAX - nd.n;
        if (!nd.overflow) nd.n += p;
    }
    if (nd.overflow) nd.n = UINT64_MAX;
    snprintf(nd.expr, sizeof nd.expr,
             "(B-1)*sb + (NH-1)*sh + (%s-1)*st + HS = %llu*%zu + %llu*%zu + %llu*%zu + %d", Tn,
             (unsigned long long)f[0], l.sb, (unsigned long long)f[1], l.sh,
             (unsigned long long)f[2], l.st, at->HS);
    return nd;
}

/* q, k, v (or the packed qkv, named qkv_name) inside their tensors; with kind16 (the inputs)
 * each may be f32 or the call's one 16-bit type (*kind16, named by *name16), else (the
 * gradients) f32. */
static void ck_qkv_views(ck *c, const vkb_attention *at, bool packed, const char *qkv_name,
                         const char *const *names, vkb_tensor q, vkb_tensor k, vkb_tensor v,
                         uint8_t *kind16, const char **name16) {
    const vkb_tensor t[3] = {q, k, v};
    need nd[3] = {need_view(at, at->lq, at->Tq, "Tq"), need_view(at, at->lk, at->Tk, "Tk"),
                  need_view(at, at->lv, at->Tk, "Tk")};
    int n = 3;
    if (packed) {
        nd[0] = NEED("B*T*3*NH*HS", at->B, at->Tq, 3, at->NH, at->HS);
        names = &qkv_name;
        n = 1;
    }
    for (int i = 0; i < n; i++) {
        if (kind16) ck_holds_any(c, names[i], t[i], nd[i], kind16, name16);
        else ck_holds(c, names[i], t[i], nd[i]);
    }
}

/* written[i] is none of the n tensors read[]; else the op fails with msg. */
static void ck_distinct(ck *c, const vkb_tensor *written, int n_written, const char *const *names,
                        const vkb_tensor *read, int n_read, const char *what) {
    for (int i = 0; i < n_written; i++)
        for (int j = 0; j < n_read; j++)
            if (same(written[i], read[j]))
                ck_fail(c, "%s must be %s other than the inputs (%s)",
                        names ? names[i] : "the gradients", names ? "a tensor" : "tensors", what);
}

/* Both attention ops: dims, the causal kind and scale, every view inside its tensor, written
 * tensors apart from the ones read; the backward needs lse, dout and the gradients too. */
static ck attention_checks(vkb_backend *be, const char *op, const vkb_attention *at,
                           bool backward) {
    ck c = ck_start(be, op);
    ck_positive(&c, "B", at->B);
    ck_positive(&c, "NH", at->NH);
    ck_positive(&c, "Tq", at->Tq);
    ck_positive(&c, "Tk", at->Tk);
    ck_positive(&c, "HS", at->HS);
    if (at->HS > VKA_ATTENTION_MAX_HS)
        ck_fail(&c, "HS = %d exceeds VKA_ATTENTION_MAX_HS = %d", at->HS, VKA_ATTENTION_MAX_HS);
    if (at->causal < VKB_CAUSAL_NONE || at->causal > VKB_CAUSAL_BOTTOM_RIGHT)
        ck_fail(&c, "causal = %d is not a vka_causal value", (int)at->causal);
    if (!isfinite(at->scale)) ck_fail(&c, "scale = %g is not finite", (double)at->scale);
    if (c.stop) return c;
    bool packed = packed_qkv(at, at->q, at->k, at->v);
    /* q, k, v and out (written by the forward, read by the backward): each f32 or the call's
     * one 16-bit type (backend.h) */
    uint8_t k16 = 0;
    const char *n16 = NULL;
    ck_qkv_views(&c, at, packed, "qkv", (const char *const[]){"q", "k", "v"}, at->q, at->k,
                 at->v, &k16, &n16);
    ck_holds_any(&c, "out", at->out, need_view(at, at->lo, at->Tq, "Tq"), &k16, &n16);
    need lse_n = NEED("B*NH*Tq", at->B, at->NH, at->Tq);
    if (backward) ck_holds(&c, "lse", at->lse, lse_n);
    else ck_holds_opt(&c, "lse", at->lse, lse_n);
    if (at->mask_per_batch)
        ck_holds_opt(&c, "mask", at->mask,
                     NEED("B*Tq*Tk (mask_per_batch)", at->B, at->Tq, at->Tk));
    else ck_holds_opt(&c, "mask", at->mask, NEED("Tq*Tk", at->Tq, at->Tk));
    ck_holds_opt(&c, "key_lens", at->key_lens, need_n("B", (uint64_t)at->B));
    const vkb_tensor read[] = {at->q, at->k, at->v, at->mask, at->key_lens};
    ck_distinct(&c, (const vkb_tensor[]){at->out, at->lse}, 2,
                (const char *const[]){"out", "lse"}, read, 5, "q, k, v, qkv, mask, key_lens");
    if (same(at->out, at->lse)) ck_fail(&c, "out and lse must be different tensors");
    if (!backward || c.stop) return c;

    ck_holds(&c, "dout", at->dout, need_view(at, at->lo, at->Tq, "Tq"));
    /* The gradients of a packed qkv are a packed dqkv (named so when absent, or not f32: a
     * 16-bit dqkv's parts were cut at f32 offsets). dout and the gradients are f32. */
    bool dpacked = packed && (!vkb_present(at->dq) || at->dq.dtype != VKA_F32 ||
                              packed_qkv(at, at->dq, at->dk, at->dv));
    ck_qkv_views(&c, at, dpacked, "dqkv", (const char *const[]){"dq", "dk", "dv"}, at->dq,
                 at->dk, at->dv, NULL, NULL);
    const vkb_tensor in[] = {at->q, at->k, at->v, at->out, at->lse, at->mask, at->key_lens,
                             at->dout};
    ck_distinct(&c, (const vkb_tensor[]){at->dq, at->dk, at->dv}, 3, NULL, in, 8,
                "q, k, v, qkv, out, lse, mask, key_lens, dout");
    if (same(at->dq, at->dk) || same(at->dq, at->dv) || same(at->dk, at->dv))
        ck_fail(&c, "dq, dk and dv must be different tensors");
    return c;
}

static void ck_attention_forward(vkb_backend *be, const vkb_attention *at) {
    ck c = attention_checks(be, "attention_forward", at, false);
    if (ck_ok(&c)) be->impl->attention_forward(be, at);
}

static void ck_attention_backward(vkb_backend *be, const vkb_attention *at) {
    ck c = attention_checks(be, "attention_backward", at, true);
    if (ck_ok(&c)) be->impl->attention_backward(be, at);
}

const vkb_ops vkb_checked_ops = {
    .fill = ck_fill,
    .copy = ck_copy,
    .convert = ck_convert,
    .matmul = ck_matmul,
    .bias_backward = ck_bias_backward,
    .encoder_forward = ck_encoder_forward,
    .encoder_backward = ck_encoder_backward,
    .layernorm_forward = ck_layernorm_forward,
    .layernorm_backward = ck_layernorm_backward,
    .permute_forward = ck_permute_forward,
    .permute_backward = ck_permute_backward,
    .unpermute_forward = ck_unpermute_forward,
    .unpermute_backward = ck_unpermute_backward,
    .softmax_forward = ck_softmax_forward,
    .softmax_backward = ck_softmax_backward,
    .gelu_forward = ck_gelu_forward,
    .gelu_backward = ck_gelu_backward,
    .residual_forward = ck_residual_forward,
    .add_inplace = ck_add_inplace,
    .crossentropy_forward = ck_crossentropy_forward,
    .crossentropy_backward = ck_crossentropy_backward,
    .mean = ck_mean,
    .grad_norm = ck_grad_norm,
    .adamw = ck_adamw,
    .peak_fma = ck_peak_fma,
    .kv_write = ck_kv_write,
    .attention_forward = ck_attention_forward,
    .attention_backward = ck_attention_backward,
};
