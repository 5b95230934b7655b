/*
 * Fused scaled-dot-product attention, forward and backward (src/backend.h, vkb_attention;
 * FlashAttention-2, Dao 2023). Shaders: attention_forward.comp, and three backward passes,
 * attention_backward_delta.comp (delta = rowsum(dout * out) and lse's correction, kept in
 * dq[b,h,t,0..1]),
 * attention_backward_dkdv.comp (parallel over key rows) and attention_backward_dq.comp
 * (parallel over query rows; reads its rows' delta before writing them). Each recomputes the
 * probabilities from lse; no float atomics, every sum in a fixed order, no scratch tensor.
 *
 * Every shader binds the same slots (enum below) and takes pc_attention (shaders/pc/attention.h);
 * dispatches cover
 * blocks of whole batches whose views fit the binding limit (one batch too large fails).
 * Variants (shaders/attention.glsl): on a CPU-type device each invocation keeps TQ rows in
 * registers, 8 invocations a workgroup, no shared memory; on a GPU a workgroup of WG rows
 * stages tiles of TK rows in shared memory. CPU-type devices with texel_operands read q, k, v
 * and dout through texel views (the passes' _texel builds) when rows are vec4-aligned.
 */
#include "vk/vk_reduce.h"
#include "pc/attention.h"

#include <string.h>

enum {
    BIND_Q, BIND_K, BIND_V, BIND_O, BIND_LSE, BIND_MASK, BIND_KEY_LENS, BIND_DOUT, BIND_DQ,
    BIND_DK, BIND_DV, N_BIND
};
_Static_assert(N_BIND <= VKV_MAX_BINDINGS, "attention binds 11 tensors");

enum { F_MASK = 1, F_MASK_PER_BATCH = 2, F_KEY_LENS = 4, F_NO_LSE = 8, F_HALF0 = 16 };

/* The 16-bit views of every pass (specialization constant H16, shaders/attention.glsl): bit i
 * for binding i (q, k, v, out) of a 16-bit type, bit 4 when that type is fp16; 0 for f32 ones,
 * whose pipelines are those of before. */
static uint32_t h16_of(const vkb_attention *at) {
    const vkb_tensor t[4] = {at->q, at->k, at->v, at->out};
    uint32_t h = 0;
    for (int i = 0; i < 4; i++)
        if (vkb_present(t[i]) && t[i].dtype != VKA_F32)
            h |= 1u << i | (t[i].dtype == VKA_F16 ? 16u : 0u);
    return h;
}
static bool bind16(const vkb_attention *at, int i) {
    return i <= BIND_O && (h16_of(at) >> i & 1u);
}

/* Which tensors a pass binds, and which it writes. */
typedef struct att_pass {
    vka_shader_id shader;
    vka_shader_id texel_shader; /* its texel build (q, k, v, dout as texels), or shader */
    const char *label;
    uint32_t uses, writes; /* bit i: binding i */
    bool over_keys;        /* rows are keys (dk/dv) rather than queries */
} att_pass;

/* The tensor and layout behind binding i. */
static vkb_tensor bound(const vkb_attention *at, int i) {
    const vkb_tensor t[N_BIND] = {at->q, at->k, at->v, at->out, at->lse, at->mask,
                                  at->key_lens, at->dout, at->dq, at->dk, at->dv};
    return t[i];
}

static vkb_attn_layout layout_of(const vkb_attention *at, int i) {
    switch (i) {
    case BIND_Q: case BIND_DQ: return at->lq;
    case BIND_K: case BIND_DK: return at->lk;
    case BIND_V: case BIND_DV: return at->lv;
    default: return at->lo;
    }
}

static size_t rows_of(const vkb_attention *at, int i) {
    return i == BIND_K || i == BIND_V || i == BIND_DK || i == BIND_DV ? (size_t)at->Tk
                                                                     : (size_t)at->Tq;
}

/* Elements of binding i for batches [b0, b0 + nb): (offset, count). */
static void view_of(const vkb_attention *at, int i, size_t b0, size_t nb, size_t *off,
                    size_t *n) {
    size_t NH = (size_t)at->NH, Tq = (size_t)at->Tq, Tk = (size_t)at->Tk;
    switch (i) {
    case BIND_LSE: *off = b0 * NH * Tq, *n = nb * NH * Tq; return;
    case BIND_KEY_LENS: *off = b0, *n = nb; return;
    case BIND_MASK:
        if (at->mask_per_batch) *off = b0 * Tq * Tk, *n = nb * Tq * Tk;
        else *off = 0, *n = Tq * Tk;
        return;
    default: {
        vkb_attn_layout l = layout_of(at, i);
        *off = b0 * l.sb;
        *n = (nb - 1) * l.sb + (NH - 1) * l.sh + (rows_of(at, i) - 1) * l.st + (size_t)at->HS;
    }
    }
}

static const char *const bind_names[N_BIND] = {"q", "k", "v", "out", "lse", "mask",
                                               "key_lens", "dout", "dq", "dk", "dv"};

/* Batches per dispatch such that every view the passes bind fits the binding limit; 0 (after
 * failing, naming the view) when one batch does not. */
static size_t batch_block(vkv_backend *vb, const char *op, const vkb_attention *at,
                          uint32_t uses) {
    size_t most = vkv_bind_elems(vb), nb = (size_t)at->B;
    for (int i = 0; i < N_BIND; i++) {
        if (!(uses & (1u << i)) || !vkb_present(bound(at, i))) continue;
        size_t off, one, two;
        view_of(at, i, 0, 1, &off, &one);
        char what[64];
        snprintf(what, sizeof what, "one batch of %s", bind_names[i]);
        if (bind16(at, i) ? !vkv_fits16(vb, op, what, one, bound(at, i).dtype)
                          : !vkv_fits(vb, op, what, one))
            return 0;
        view_of(at, i, 0, 2, &off, &two);
        if (bind16(at, i)) one = one / 2 + 1, two = two / 2 + 1; /* words, from either half */
        size_t per = two - one; /* elements (words) each further batch adds */
        if (per) nb = VKA_MIN(nb, (most - one) / per + 1);
    }
    return VKA_MAX(nb, 1);
}

/* Kernel shape of a pass: spec constants {WG, cpu, DV, TQ, TK, VEC} and loop iterations. */
typedef struct att_shape {
    uint32_t wg, dv, tq, tk;
    bool cpu;
} att_shape;

static att_shape shape_of(vkv_backend *vb, const vkb_attention *at) {
    const vkr_device *dev = vkv_device(vb);
    att_shape s = {.dv = (uint32_t)VKA_CEIL_DIV(at->HS, 4), .cpu = dev->is_cpu};
    if (s.cpu) {
        /* 8 lanes (one AVX2 vector); TQ rows each, so that a row loaded (a per-lane gather
         * on llvmpipe, the cost that dominates) serves TQ rows, with the rows kept in
         * registers up to ~128 vec4s: 8 rows at HS 32, 2 at HS 128, 1 at HS 256. Measured on
         * lavapipe (2 cores), B12 NH4 T1024 HS32 causal forward + backward: TQ 4: 813 ms,
         * 8: 601 ms, 16: 553 ms (but fewer workgroups and more causal waste at small T, and
         * slower to compile); key steps of TK 2 / 4 / 8 within noise, 4 best. */
        s.wg = vkv_workgroup_size(vb, 8);
        s.tq = VKA_MAX(1u, VKA_MIN(8u, 64u / s.dv));
        s.tk = 4;
    } else {
        /* 64 rows a workgroup; key tiles of up to 32 rows within the shared memory every
         * device has (16 KiB: two tiles of TK rows of DV vec4s) and of at most 256 vec4s (the
         * tile loop is unrolled). */
        s.wg = vkv_workgroup_size(vb, 64);
        s.tq = 1;
        uint32_t shared = VKA_MIN(dev->props.limits.maxComputeSharedMemorySize, 16384u);
        s.tk = 32;
        while (s.tk > 1 && (s.tk * (2 * 16 * s.dv + 8) > shared || s.tk * s.dv > 256)) s.tk /= 2;
    }
    return s;
}

/* Whether the forward splits each query row's keys over a workgroup (forward_split in
 * shaders/attention_forward.comp; Flash-Decoding) rather than giving each invocation whole rows:
 * for few query rows (decoding against a KV cache: Tq = 1), where the row-parallel kernels
 * would leave all but Tq invocations of a (b, h) idle and walk every key serially. Measured on
 * lavapipe (2 cores, loaded), B1 NH12 HS64, ms a call split / row-parallel: Tq 1: Tk 128 0.30 /
 * 2.4, Tk 512 0.72 / 6.1, Tk 1024 0.83 / 7.4; Tq 8: 1.9 / 2.3, 4.4 / 7.2; Tq 16: 1.9 / 2.7,
 * 5.9 / 5.8 (even). On a GPU (not measured yet) a row-parallel workgroup of 64 keeps Tq of its
 * invocations busy; split, all of them walk keys. */
enum { SPLIT_MAX_TQ = 8 };

static bool split_keys(const vkb_attention *at) { return at->Tq <= SPLIT_MAX_TQ; }

/* Invocations of a split workgroup: the variant's, halved on a GPU until the per-invocation
 * states (WG x (DV vec4s + m + l)) fit the shared memory every device has (16 KiB). */
static uint32_t split_wg(vkv_backend *vb, const att_shape *s) {
    uint32_t shared = VKA_MIN(vkv_device(vb)->props.limits.maxComputeSharedMemorySize, 16384u);
    uint32_t wg = s->wg;
    while (wg > 1 && wg * (16u * s->dv + 8u) > shared) wg /= 2;
    return wg;
}

/* Rows can be read as vec4 when HS, every stride and the offset of every row view (all but
 * lse, mask and key_lens) call binds are multiples of 4. */
static bool vec_ok(const vkv_backend *vb, const vkb_attention *at, const vkv_call *call,
                   const pc_attention *pc, uint32_t uses) {
    if (at->HS % 4) return false;
    if (pc->flags >> 4 & 0xFu) return false; /* a 16-bit view from a word's high half */
    const uint32_t *st = &pc->q_sb;
    for (int i = 0; i < 12; i++)
        if (st[i] % 4) return false;
    uint32_t rows = uses & ~((1u << BIND_LSE) | (1u << BIND_MASK) | (1u << BIND_KEY_LENS));
    return vkv_views_vec4(vb, call, rows);
}

/* The texel views of the texel builds (shaders/attention.glsl): q, k, v, dout. */
static const uint8_t texel_binds[VKV_MAX_TEXELS] = {BIND_Q, BIND_K, BIND_V, BIND_DOUT};

/* Whether a CPU-type pass with vec4 rows may read its bound q, k, v, dout as texels: four
 * floats' bits a texel, four elements of a 16-bit view (h16's bits 0..3). */
static bool texel_ok(vkv_backend *vb, const vkv_call *call, uint32_t uses, uint32_t h16) {
    uint32_t views = 0;
    for (int j = 0; j < VKV_MAX_TEXELS; j++) views |= 1u << texel_binds[j];
    uint32_t v16 = uses & views & h16, v32 = uses & views & ~h16;
    return vkv_views_texel_as(vb, call, v32, VKV_TEXEL_U32X4) &&
           (!v16 || vkv_views_texel_as(vb, call, v16, VKV_TEXEL_U16X4));
}

/* Iterations of the longest loop nest per invocation (llvmpipe's budget, vk_reduce.h). */
static uint64_t pass_iters(const att_shape *s, size_t rows_walked) {
    uint64_t steps = VKA_CEIL_DIV((uint64_t)rows_walked, s->tk);
    return s->cpu ? steps : steps * (VKA_CEIL_DIV((uint64_t)s->tk * s->dv, s->wg) + 2);
}

/* Record pass p over every batch block. */
static void run_pass(vkv_backend *vb, const vkb_attention *at, const att_pass *p, size_t nb) {
    vkb_backend *be = (vkb_backend *)vb;
    att_shape s = shape_of(vb, at);
    bool delta = p->shader == VKA_SHADER_ATTENTION_BACKWARD_DELTA;
    size_t walked = p->over_keys ? (size_t)at->Tq : (size_t)at->Tk;
    /* the delta pass walks a row's keys twice where it corrects lse (its shader) */
    vkv_layout lay = {.iters = delta ? 2 * (uint64_t)at->Tk : pass_iters(&s, walked)};
    if (!vkv_check_layout(be, p->label, &lay)) return;
    for (size_t b0 = 0; b0 < (size_t)at->B; b0 += nb) {
        size_t n = VKA_MIN(nb, (size_t)at->B - b0);
        bool one = n == 1; /* batch strides unused: keep them within 32 bits */
        pc_attention pc = {
            .B = (uint32_t)n, .NH = (uint32_t)at->NH, .Tq = (uint32_t)at->Tq,
            .Tk = (uint32_t)at->Tk, .HS = (uint32_t)at->HS,
            .q_sb = one ? 0 : (uint32_t)at->lq.sb, .q_sh = (uint32_t)at->lq.sh,
            .q_st = (uint32_t)at->lq.st,
            .k_sb = one ? 0 : (uint32_t)at->lk.sb, .k_sh = (uint32_t)at->lk.sh,
            .k_st = (uint32_t)at->lk.st,
            .v_sb = one ? 0 : (uint32_t)at->lv.sb, .v_sh = (uint32_t)at->lv.sh,
            .v_st = (uint32_t)at->lv.st,
            .o_sb = one ? 0 : (uint32_t)at->lo.sb, .o_sh = (uint32_t)at->lo.sh,
            .o_st = (uint32_t)at->lo.st,
            .scale = at->scale, .causal = (uint32_t)at->causal};
        if (vkb_present(at->mask)) pc.flags |= F_MASK | (at->mask_per_batch ? F_MASK_PER_BATCH : 0);
        if (vkb_present(at->key_lens)) pc.flags |= F_KEY_LENS;
        if (!vkb_present(at->lse)) pc.flags |= F_NO_LSE;
        vkv_call call = {.shader = p->shader, .n_bind = N_BIND, VKV_PC(&pc), .label = p->label};
        for (int i = 0; i < N_BIND; i++) {
            vkb_tensor t = bound(at, i);
            if (!(p->uses & (1u << i)) || !vkb_present(t)) continue;
            size_t off, cnt;
            view_of(at, i, b0, n, &off, &cnt);
            uint32_t half;
            call.bind[i] = vkv_elem_view(t, off, cnt, &half);
            pc.flags |= half * ((uint32_t)F_HALF0 << i);
            call.writes[i] = (p->writes >> i) & 1u;
        }
        uint32_t h16 = h16_of(at);
        bool vec = vec_ok(vb, at, &call, &pc, p->uses);
        /* CPU-type devices with texel_operands: the texel build where rows are vec4s. Rows
         * then cost little to load, and at most 4 per invocation measured faster (registers;
         * fewer causal steps wasted): B12 T64 NH4 HS32 forward 1.9 -> 1.75 ms, backward 6.7 ->
         * 4.4 ms of CPU time on lavapipe; HS 16 likewise, HS 64 unchanged. */
        att_shape sp = s;
        if (s.cpu && vec && p->texel_shader != p->shader &&
            texel_ok(vb, &call, p->uses, h16 & 0xFu)) {
            call.shader = p->texel_shader;
            for (int j = 0; j < VKV_MAX_TEXELS; j++) {
                call.texel[j] = (p->uses >> texel_binds[j]) & 1u ? texel_binds[j] : VKV_NO_TEXEL;
                call.texel_format[j] = (uint8_t)((h16 >> texel_binds[j]) & 1u ? VKV_TEXEL_U16X4
                                                                              : VKV_TEXEL_U32X4);
            }
            call.n_texel = VKV_MAX_TEXELS;
            sp.tq = VKA_MIN(sp.tq, 4u);
        }
        uint64_t bh = (uint64_t)n * (uint64_t)at->NH;
        uint64_t rows = p->over_keys ? (uint64_t)at->Tk : (uint64_t)at->Tq;
        bool split = p->shader == VKA_SHADER_ATTENTION_FORWARD && split_keys(at);
        if (delta) {
            vkv_call_elems(vb, &call, bh * rows, 64);
            sp.wg = call.spec[0];
        } else if (split) {
            sp.wg = split_wg(vb, &sp);
            sp.tq = 1;
            call.groups = bh * rows;
        } else {
            call.groups = bh * VKA_CEIL_DIV(rows, (uint64_t)sp.wg * sp.tq);
        }
        uint32_t spec[8] = {sp.wg, sp.cpu, sp.dv, sp.tq, sp.tk, vec, split, h16};
        memcpy(call.spec, spec, sizeof spec);
        call.n_spec = 8;
        vkv_dispatch(vb, &call);
    }
}

#define B_(i) (1u << (i))

static const att_pass FORWARD = {
    VKA_SHADER_ATTENTION_FORWARD, VKA_SHADER_ATTENTION_FORWARD_TEXEL, "attention_forward",
    B_(BIND_Q) | B_(BIND_K) | B_(BIND_V) | B_(BIND_O) | B_(BIND_LSE) | B_(BIND_MASK) |
        B_(BIND_KEY_LENS),
    B_(BIND_O) | B_(BIND_LSE), false};
static const att_pass DELTA = {VKA_SHADER_ATTENTION_BACKWARD_DELTA,
                               VKA_SHADER_ATTENTION_BACKWARD_DELTA, "attention_backward",
                               B_(BIND_Q) | B_(BIND_K) | B_(BIND_O) | B_(BIND_LSE) |
                                   B_(BIND_MASK) | B_(BIND_KEY_LENS) | B_(BIND_DOUT) |
                                   B_(BIND_DQ),
                               B_(BIND_DQ), false};
static const att_pass DKDV = {
    VKA_SHADER_ATTENTION_BACKWARD_DKDV, VKA_SHADER_ATTENTION_BACKWARD_DKDV_TEXEL,
    "attention_backward",
    B_(BIND_Q) | B_(BIND_K) | B_(BIND_V) | B_(BIND_O) | B_(BIND_LSE) | B_(BIND_MASK) |
        B_(BIND_KEY_LENS) | B_(BIND_DOUT) | B_(BIND_DQ) | B_(BIND_DK) | B_(BIND_DV),
    B_(BIND_DK) | B_(BIND_DV), true};
static const att_pass DQ = {
    VKA_SHADER_ATTENTION_BACKWARD_DQ, VKA_SHADER_ATTENTION_BACKWARD_DQ_TEXEL, "attention_backward",
    B_(BIND_Q) | B_(BIND_K) | B_(BIND_V) | B_(BIND_O) | B_(BIND_LSE) | B_(BIND_MASK) |
        B_(BIND_KEY_LENS) | B_(BIND_DOUT) | B_(BIND_DQ),
    B_(BIND_DQ), false};

static bool hs_ok(vkb_backend *be, const char *op, int HS) {
    return vkv_check_dim(be, op, "HS", HS, VKA_ATTENTION_MAX_HS);
}

void vkv_attention_forward(vkb_backend *be, const vkb_attention *at) {
    vkv_backend *vb = (vkv_backend *)be;
    if (!hs_ok(be, FORWARD.label, at->HS)) return;
    size_t nb = batch_block(vb, FORWARD.label, at, FORWARD.uses);
    if (nb) run_pass(vb, at, &FORWARD, nb);
    if (nb && vkb_present(at->key_lens))
        vkv_graph_check_key_lens(vb, FORWARD.label, at->key_lens, at->B, at->Tk);
}

/* The three passes in turn, each over all batch blocks (one barrier between passes). */
void vkv_attention_backward(vkb_backend *be, const vkb_attention *at) {
    vkv_backend *vb = (vkv_backend *)be;
    const char *op = "attention_backward";
    if (!hs_ok(be, op, at->HS)) return;
    size_t nb = batch_block(vb, op, at, DKDV.uses | DELTA.uses);
    if (!nb) return;
    run_pass(vb, at, &DELTA, nb);
    run_pass(vb, at, &DKDV, nb);
    run_pass(vb, at, &DQ, nb);
    if (vkb_present(at->key_lens)) vkv_graph_check_key_lens(vb, op, at->key_lens, at->B, at->Tk);
}
