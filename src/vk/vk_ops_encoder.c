/* Token + position embedding forward, and its deterministic backward (no float atomics: the
 * host groups positions by token, vka_encoder_buckets, and one workgroup sums each token's rows
 * in a fixed order). */
#include "vk/vk_internal.h"
#include "pc/encoder.h"

#define WG 256    /* wanted workgroup sizes */
#define WG_WTE 64

/* Blocks of positions [p0, p0 + n) whose rows (C each) fit the binding limit, with the wpe rows
 * they read: whole sequences when a sequence's T rows fit (wpe rows [0, T)), else parts of one
 * sequence (its rows [p0 % T, ...)). */
typedef struct pos_blocks {
    size_t per;    /* positions per block */
    bool whole;    /* blocks of whole sequences */
} pos_blocks;

static pos_blocks position_blocks(vkv_backend *vb, const char *op, size_t BT, size_t T, size_t C,
                                  vkb_tensor out, vkb_tensor wpe) {
    /* a 16-bit view's rows from either half of a word: C / 2 + 1 words each */
    size_t per_row[3] = {out.dtype ? C / 2 + 1 : C, 1, wpe.dtype ? C / 2 + 1 : C};
    const char *names[3] = {"a row of out", "tokens", "a row of wpe"};
    size_t most = vkv_block_rows(vb, op, BT, per_row, names, 3);
    if (most >= T) return (pos_blocks){most / T * T, true};
    return (pos_blocks){most, false};
}

/* Next block from p0: n positions, the first wpe row it reads and how many. */
static size_t next_block(pos_blocks pb, size_t p0, size_t BT, size_t T, size_t *wpe_row0,
                         size_t *wpe_rows) {
    if (pb.whole) {
        *wpe_row0 = 0;
        *wpe_rows = T;
        return VKA_MIN(pb.per, BT - p0);
    }
    size_t t0 = p0 % T, n = VKA_MIN(pb.per, T - t0);
    *wpe_row0 = t0;
    *wpe_rows = n;
    return n;
}

/* Blocks of positions (out, tokens, wpe) x blocks of vocabulary rows (wte) when they pass the
 * binding limit; one dispatch otherwise.
 * 16-bit out, wte and/or wpe (backend.h): spec constant 1 (E16, 0 for f32 calls: their
 * pipeline) says which and the type; the 16-bit views' blocks count words (C / 2 + 1 a row),
 * pc.half0 flags those starting mid-word, and an out16 dispatch has an invocation per word. */
void vkv_encoder_forward(vkb_backend *be, vkb_tensor out, vkb_tensor tokens, vkb_tensor wte,
                         vkb_tensor wpe, int B, int T, int C) {
    const char *op = "encoder_forward";
    vkv_backend *vb = (vkv_backend *)be;
    size_t BT = (size_t)B * T, Cs = (size_t)C, rows = vkb_elems(wte) / Cs;
    uint8_t t16 = out.dtype ? out.dtype : wte.dtype ? wte.dtype : wpe.dtype;
    uint32_t e16 = (out.dtype ? 1u : 0u) | (wte.dtype ? 2u : 0u) | (wpe.dtype ? 4u : 0u) |
                   (t16 == VKA_F16 ? 8u : 0u);
    pos_blocks pb = position_blocks(vb, op, BT, (size_t)T, Cs, out, wpe);
    size_t per_row = wte.dtype ? Cs / 2 + 1 : Cs;
    const char *name = "wte";
    size_t vocab = vkv_block_rows(vb, op, rows, &per_row, &name, 1);
    if (!pb.per || !vocab) return;
    for (size_t p0 = 0; p0 < BT;) {
        size_t w0, wn, n = next_block(pb, p0, BT, (size_t)T, &w0, &wn);
        uint32_t ho, hp, he;
        vkb_tensor os = vkv_elem_view(out, p0 * Cs, n * Cs, &ho), ts = vkb_slice(tokens, p0, n);
        vkb_tensor ps = vkv_elem_view(wpe, w0 * Cs, wn * Cs, &hp);
        for (size_t v0 = 0; v0 < rows; v0 += vocab) {
            size_t nv = VKA_MIN(vocab, rows - v0);
            vkb_tensor es = vkv_elem_view(wte, v0 * Cs, nv * Cs, &he);
            pc_encoder_forward pc = {.P = (uint32_t)n, .T = (uint32_t)T, .C = (uint32_t)C,
                                     .wte_rows = (uint32_t)rows,
                                     .pos0 = (uint32_t)(p0 % (size_t)T), .wpe_row0 = (uint32_t)w0,
                                     .tok0 = (uint32_t)v0, .tok_rows = (uint32_t)nv,
                                     .nan_ids = v0 == 0, .half0 = ho | he << 1 | hp << 2};
            vkv_call call = {.shader = VKA_SHADER_ENCODER_FORWARD,
                             .bind = {os, ts, es, ps},
                             .writes = {true}, .n_bind = 4, VKV_PC(&pc),
                             .label = op};
            vkv_call_elems(vb, &call, out.dtype ? os.n : n * Cs, WG);
            if (e16) {
                call.spec[1] = e16;
                call.n_spec = 2;
            }
            vkv_dispatch(vb, &call);
        }
        p0 += n;
    }
}

/* dwpe: blocks of position rows x blocks of sequences; dwte: blocks of vocabulary rows x blocks
 * of positions (dout rows), each adding in a fixed order (deterministic). The buckets are bound
 * whole. */
void vkv_encoder_backward(vkb_backend *be, vkb_tensor dwte, vkb_tensor dwpe, vkb_tensor dout,
                          vkb_tensor tokens, vkb_tensor buckets, int B, int T, int C) {
    const char *op = "encoder_backward";
    size_t BT = (size_t)B * T, Cs = (size_t)C, Ts = (size_t)T, most = 0;
    (void)tokens; /* not read: the buckets carry their grouping */
    vkv_backend *vb = (vkv_backend *)be;
    size_t per_row = Cs;
    const char *name = "dwpe";
    size_t trows = vkv_block_rows(vb, op, Ts, &per_row, &name, 1);
    if (!trows || !vkv_fits(vb, op, "the token buckets", VKA_BUCKETS_SIZE(BT))) return;
    most = vkv_bind_elems(vb);
    for (size_t t0 = 0; t0 < Ts; t0 += trows) {
        size_t nt = VKA_MIN(trows, Ts - t0);
        /* sequences per block: (nb - 1) * T * C + nt * C elements of dout fit */
        size_t nb = VKA_MIN((size_t)B, (most - nt * Cs) / (Ts * Cs) + 1);
        vkb_tensor ws = vkb_slice(dwpe, t0 * Cs, nt * Cs);
        for (size_t b0 = 0; b0 < (size_t)B; b0 += nb) {
            size_t n = VKA_MIN(nb, (size_t)B - b0);
            vkb_tensor ds = vkb_slice(dout, (b0 * Ts + t0) * Cs, ((n - 1) * Ts + nt) * Cs);
            pc_encoder_wpe pw = {.B = (uint32_t)n, .T = (uint32_t)nt, .C = (uint32_t)C,
                                 .dout_stride = (uint32_t)(Ts * Cs)};
            vkv_call call = {.shader = VKA_SHADER_ENCODER_BACKWARD_WPE,
                             .bind = {ws, ds}, .writes = {true},
                             .n_bind = 2, VKV_PC(&pw), .label = op};
            vkv_call_elems(vb, &call, nt * Cs, WG);
            vkv_dispatch(vb, &call);
        }
    }
    size_t rows = dwte.n / Cs;
    name = "dwte";
    size_t vocab = vkv_block_rows(vb, op, rows, &per_row, &name, 1);
    name = "dout";
    size_t pos = vkv_block_rows(vb, op, BT, &per_row, &name, 1);
    if (!vocab || !pos) return;
    vkb_tensor bs = vkb_slice(buckets, 0, VKA_BUCKETS_SIZE(BT));
    for (size_t v0 = 0; v0 < rows; v0 += vocab) {
        size_t nv = VKA_MIN(vocab, rows - v0);
        vkb_tensor ws = vkb_slice(dwte, v0 * Cs, nv * Cs);
        for (size_t p0 = 0; p0 < BT; p0 += pos) {
            size_t np = VKA_MIN(pos, BT - p0);
            vkb_tensor ds = vkb_slice(dout, p0 * Cs, np * Cs);
            pc_encoder_wte pt = {.BT = (uint32_t)BT, .C = (uint32_t)C, .wte_rows = (uint32_t)rows,
                                 .tok0 = (uint32_t)v0, .tok_rows = (uint32_t)nv,
                                 .pos0 = (uint32_t)p0, .pos_n = (uint32_t)np};
            vkv_call call = {.shader = VKA_SHADER_ENCODER_BACKWARD_WTE,
                             .spec = {vkv_workgroup_size(vb, WG_WTE)}, .n_spec = 1,
                             .bind = {ws, ds, bs},
                             .writes = {true}, .n_bind = 3, VKV_PC(&pt),
                             .groups = BT, .label = op};
            vkv_dispatch(vb, &call);
        }
    }
}
