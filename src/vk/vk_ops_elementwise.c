/* Elementwise ops: residual add, in-place add, GELU forward and backward, in blocks that fit the
 * binding limit; the grid folds past 65,535 workgroups (vkv_dispatch). One invocation per
 * element on GPUs; on CPU-type devices several vec4s per invocation, read through texel views
 * (shaders/elementwise.glsl, vkv_call_vec4). With 16-bit tensors (residual, GELU;
 * dispatch3_16): one invocation per pair of elements on GPUs, groups of 8 elements (uvec4s of
 * 16-bit words, two vec4s of floats) read through texel views of words on CPU-type devices. */
#include "vk/vk_internal.h"
#include "pc/convert.h"
#include "pc/elementwise.h"

#define WG 256     /* wanted workgroup size, one element per invocation */
#define WG_CPU 64  /* CPU-type vec4 layout: workgroup size (8 SIMD vectors of 8 lanes) */
#define VEC4S 4    /* CPU-type vec4 layout: vec4s per invocation */

void vkv_call_vec4(const vkv_backend *vb, vkv_call *call, uint64_t n, int n_vec,
                   uint32_t texel_mask, vka_shader_id texel_shader, uint32_t want_wg) {
    bool vec = vkv_device(vb)->is_cpu && n % 4 == 0;
    bool texel = vec && texel_mask != 0;
    vec = vec && vkv_views_vec4(vb, call, (1u << n_vec) - 1);
    texel = vec && texel && vkv_views_texel(vb, call, texel_mask);
    if (!vec) {
        vkv_call_elems(vb, call, n, want_wg);
        return;
    }
    uint32_t wg = vkv_workgroup_size(vb, WG_CPU);
    call->spec[0] = wg;
    call->spec[1] = VEC4S;
    call->n_spec = 2;
    call->groups = VKA_CEIL_DIV(n / 4, (uint64_t)wg * VEC4S);
    if (!texel) return;
    call->shader = texel_shader;
    call->n_texel = 0;
    for (int i = 0; i < n_vec; i++)
        if (texel_mask >> i & 1) call->texel[call->n_texel++] = (uint8_t)i;
}

/* An elementwise op: its shader's builds (texel16: VKA_SHADER_COUNT where it takes no 16-bit
 * tensors) and the bindings its texel builds read through texel views (bit i: binding i). */
typedef struct ew_op {
    vka_shader_id shader, texel, texel16;
    uint32_t reads;
    const char *label;
} ew_op;

#define GROUP16 8 /* CPU-type 16-bit layout: elements per round (a uvec4 of 16-bit words) */

/* The views of tensors t (o, a, b; 16-bit where bit i of t16) that a 16-bit dispatch binds for
 * elements [e0, e0 + n), e0 even: a 16-bit one from word e0 / 2. */
static void views16(vkv_call *call, const vkb_tensor *t, uint32_t t16, size_t e0, size_t n) {
    for (int i = 0; i < call->n_bind; i++)
        call->bind[i] = t16 >> i & 1 ? vkb_slice(t[i], e0 / 2, (n + 1) / 2)
                                     : vkb_slice(t[i], e0, n);
}

/* The CPU-type group layout (shaders/elementwise.glsl, VKA_LOAD8) for call's n elements, a
 * multiple of GROUP16: VEC4S groups per invocation, op->reads through texel views of 32-bit
 * words (the VKA_TEXEL16 build) where they all may, else every view through storage buffers.
 * False, call unchanged, where a view does not start at 16 bytes of its range. */
static bool call_groups16(const vkv_backend *vb, const ew_op *op, vkv_call *call, size_t n) {
    uint32_t views = (1u << call->n_bind) - 1, reads = op->reads & views;
    if (!vkv_views_vec4(vb, call, views)) return false;
    uint32_t wg = vkv_workgroup_size(vb, WG_CPU);
    call->spec[0] = wg;
    call->spec[1] = VEC4S;
    call->groups = VKA_CEIL_DIV(n / GROUP16, (uint64_t)wg * VEC4S);
    if (!vkv_views_texel_as(vb, call, reads, VKV_TEXEL_U32X4)) return true;
    call->shader = op->texel16;
    for (int i = 0; i < call->n_bind; i++)
        if (reads >> i & 1) {
            call->texel_format[call->n_texel] = VKV_TEXEL_U32X4;
            call->texel[call->n_texel++] = (uint8_t)i;
        }
    return true;
}

/* dispatch3 with 16-bit views (the shaders' T16 path, elementwise.glsl), in blocks of a
 * multiple of GROUP16 elements within the binding limit, so that each block's 16-bit views
 * start at whole words, and at uvec4s where the tensors do. On CPU-type devices a block's first
 * n / GROUP16 * GROUP16 elements take the group layout where its views are aligned
 * (call_groups16), and the rest one invocation per pair of elements, as every block on GPUs. */
static void dispatch3_16(vkv_backend *vb, const ew_op *op, vkb_tensor o, vkb_tensor a,
                         vkb_tensor b, size_t N) {
    const vkb_tensor t[3] = {o, a, b};
    uint32_t t16 = 0, f16 = 0;
    for (int i = 0; i < 3; i++)
        if (vkb_present(t[i]) && t[i].dtype != VKA_F32) {
            t16 |= 1u << i;
            f16 = t[i].dtype == VKA_F16;
        }
    size_t block = vkv_bind_elems(vb) / GROUP16 * GROUP16;
    for (size_t e0 = 0; e0 < N;) {
        size_t n = VKA_MIN(block, N - e0), head = n / GROUP16 * GROUP16;
        pc_binary pc = {0};
        vkv_call call = {.shader = op->shader,
                         .writes = {true, false, false},
                         .n_bind = vkb_present(b) ? 3 : 2,
                         VKV_PC(&pc),
                         .label = op->label};
        bool grouped = false;
        if (vkv_device(vb)->is_cpu && head) {
            views16(&call, t, t16, e0, head);
            grouped = call_groups16(vb, op, &call, head);
        }
        if (grouped) {
            n = head;
        } else {
            views16(&call, t, t16, e0, n);
            vkv_call_elems(vb, &call, (n + 1) / 2, WG);
            call.spec[1] = 0; /* VEC4S */
        }
        pc.N = (uint32_t)n;
        call.spec[2] = t16;
        call.spec[3] = f16;
        call.n_spec = 4;
        vkv_dispatch(vb, &call);
        e0 += n;
    }
}

/* o (written) and a, b (read; b only when present) of N elements each (checked in front of the
 * backend, vkb_checked_ops), in blocks of at most vkv_bind_elems elements. */
static void dispatch3(vkb_backend *be, const ew_op *op, vkb_tensor o, vkb_tensor a, vkb_tensor b,
                      size_t N) {
    vkv_backend *vb = (vkv_backend *)be;
    bool has_b = vkb_present(b);
    if (o.dtype != VKA_F32 || a.dtype != VKA_F32 || (has_b && b.dtype != VKA_F32)) {
        dispatch3_16(vb, op, o, a, b, N);
        return;
    }
    size_t block = vkv_bind_elems(vb);
    for (size_t i0 = 0; i0 < N; i0 += block) {
        size_t n = VKA_MIN(block, N - i0);
        vkb_tensor os = vkb_slice(o, i0, n), as = vkb_slice(a, i0, n);
        vkb_tensor bs = has_b ? vkb_slice(b, i0, n) : VKB_NONE;
        pc_binary pc = {.N = (uint32_t)n};
        vkv_call call = {.shader = op->shader,
                         .bind = {os, as, bs},
                         .writes = {true, false, false},
                         .n_bind = has_b ? 3 : 2,
                         VKV_PC(&pc),
                         .label = op->label};
        vkv_call_vec4(vb, &call, n, call.n_bind, op->reads, op->texel, WG);
        vkv_dispatch(vb, &call);
    }
}

void vkv_residual_forward(vkb_backend *be, vkb_tensor out, vkb_tensor a, vkb_tensor b, size_t N) {
    static const ew_op op = {VKA_SHADER_RESIDUAL_FORWARD, VKA_SHADER_RESIDUAL_FORWARD_TEXEL,
                             VKA_SHADER_RESIDUAL_FORWARD_TEXEL16, 0x6, "residual_forward"};
    dispatch3(be, &op, out, a, b, N);
}

void vkv_add_inplace(vkb_backend *be, vkb_tensor dst, vkb_tensor src, size_t N) {
    static const ew_op op = {VKA_SHADER_ADD_INPLACE, VKA_SHADER_ADD_INPLACE_TEXEL,
                             VKA_SHADER_COUNT, 0x3, "add_inplace"};
    dispatch3(be, &op, dst, src, VKB_NONE, N);
}

void vkv_gelu_forward(vkb_backend *be, vkb_tensor out, vkb_tensor inp, size_t N) {
    static const ew_op op = {VKA_SHADER_GELU_FORWARD, VKA_SHADER_GELU_FORWARD_TEXEL,
                             VKA_SHADER_GELU_FORWARD_TEXEL16, 0x2, "gelu_forward"};
    dispatch3(be, &op, out, inp, VKB_NONE, N);
}

void vkv_gelu_backward(vkb_backend *be, vkb_tensor dinp, vkb_tensor inp, vkb_tensor dout,
                       size_t N) {
    static const ew_op op = {VKA_SHADER_GELU_BACKWARD, VKA_SHADER_GELU_BACKWARD_TEXEL,
                             VKA_SHADER_GELU_BACKWARD_TEXEL16, 0x7, "gelu_backward"};
    dispatch3(be, &op, dinp, inp, dout, N);
}

/* convert.comp's MODE for (dst, src) types (op_checks.c allows these pairs only). */
static uint32_t convert_mode(uint8_t dst, uint8_t src) {
    if (src == VKA_F32) return dst == VKA_BF16 ? 0u : 1u;
    if (dst == VKA_F32) return src == VKA_BF16 ? 2u : 3u;
    return 4u;
}

/* In blocks of an even number of elements, so each block's 16-bit views start at whole words,
 * and the float32 side (two elements per 16-bit word) within the binding limit. */
void vkv_convert(vkb_backend *be, vkb_tensor dst, vkb_tensor src, size_t n) {
    vkv_backend *vb = (vkv_backend *)be;
    size_t block = vkv_bind_elems(vb) & ~(size_t)1;
    uint32_t mode = convert_mode(dst.dtype, src.dtype);
    for (size_t e0 = 0; e0 < n; e0 += block) {
        size_t m = VKA_MIN(block, n - e0), words = (m + 1) / 2;
        vkb_tensor d = dst.dtype ? vkb_slice(dst, e0 / 2, words) : vkb_slice(dst, e0, m);
        vkb_tensor s = src.dtype ? vkb_slice(src, e0 / 2, words) : vkb_slice(src, e0, m);
        pc_convert pc = {.N = (uint32_t)m};
        vkv_call call = {.shader = VKA_SHADER_CONVERT,
                         .bind = {d, s},
                         .writes = {true, false},
                         .n_bind = 2,
                         VKV_PC(&pc),
                         .label = "convert"};
        vkv_call_elems(vb, &call, words, WG);
        call.spec[1] = mode;
        call.n_spec = 2;
        vkv_dispatch(vb, &call);
    }
}
