/* The fused attention's pieces shared by its driver (attention.c: the FlashAttention-2 loops
 * and the reference kernels) and the fast kernels (attention_fast.c). */
#ifndef VKA_CPU_ATTENTION_KERN_H
#define VKA_CPU_ATTENTION_KERN_H

#include "cpu/matmul_tiles.h" /* vkc_mm_view: the products' operands */

enum {
    AT_DC = 8,   /* d per register accumulator chunk */
    AT_BQ = 32,  /* query rows per block */
    AT_BK = 64,  /* keys per tile */
    AT_GK = 256, /* backward: keys per group of tiles at most */
};

static inline size_t at_off(vkc_attn_strides s, int b, int h, int t) {
    return (size_t)b * s.sb + (size_t)h * s.sh + (size_t)t * s.st;
}

/* Row t of the mask of batch b (NULL: no mask). */
static inline const float *at_mask_row(const vkc_attention *a, int b, int t) {
    if (!a->mask) return NULL;
    size_t batch = a->mask_per_batch ? (size_t)b * a->Tq * a->Tk : 0;
    return a->mask + batch + (size_t)t * a->Tk;
}

/* Columns of a score tile to compute for nc keys: rounded up to a register chunk (kt is
 * zero-padded to there). */
static inline int at_cols(int nc) {
    int c = (nc + AT_DC - 1) / AT_DC * AT_DC;
    return c < AT_BK ? c : AT_BK;
}

/* Query rows i0 .. i0+nq of head (b, h) against keys j0 .. j0+nc. */
typedef struct at_tile {
    const vkc_attention *a;
    int b, h, i0, nq;
    int r0;          /* rows before r0 see no key of the tile */
    int j0, nc;
    const int *last; /* (nq): the last key each row sees */
} at_tile;

/* The kernels of one run: the reference ones or those of one vector ISA. Each sums every
 * element in an order fixed by the data's shape alone, so no result depends on the thread
 * count. */
typedef struct at_kern {
    /* c (M, N) (+)= a (M, K) b (K, N), each element summed over k in order from c's value
     * (acc) or 0; b's columns contiguous (cs 1) and its rows hold N readable floats */
    void (*mm)(float *c, size_t ldc, vkc_mm_view a, vkc_mm_view b, int M, int N, int K,
               bool acc);
    /* kt (HS, AT_BK) = rows j0 .. j0+bk of the (b, h) view x transposed, zeros in columns
     * bk .. at_cols(bk) (the reference: up to AT_BK) */
    void (*pack_t)(float *kt, const float *x, vkc_attn_strides s, int b, int h, int j0, int bk,
                   int HS);
    /* Forward of a tile's rows r0 .. nq: s[i] (nc dots in) becomes scale * dot + mask, then
     * exp(. - new max) (0 where masked, whatever the dot: a -inf mask entry hides a NaN k);
     * the running max m, sum l and output accumulator o (nq, HS; NULL: none, only m and l
     * wanted) of each row are rescaled to the new max. */
    void (*fwd_rows)(const at_tile *t, float (*s)[AT_BK], float *m, float *l, float *o);
    /* out (and lse) of rows 0 .. nq from o, m, l; returns whether every out is finite */
    bool (*fwd_finish)(const at_tile *t, const float *o, const float *m, const float *l);
    /* delta[i] = rowsum(dout * out) of rows i0 .. i0+nq */
    void (*delta)(const at_tile *t, float *delta);
    /* Backward of a tile's rows r0 .. nq: p[i] (q k^T dots in) becomes
     * P = exp((s - lse) - corr[i]) and ds[i] (dout v^T in) dS = scale * P * (dP - delta),
     * both 0 where P is 0 (masked), whatever dP holds. */
    void (*bwd_rows)(const at_tile *t, const float *delta, const float *corr,
                     float (*p)[AT_BK], float (*ds)[AT_BK]);
} at_kern;

/* The fast kernels for isa (attention_fast.c); NULL where there are none (the reference runs). */
const at_kern *vkc_attention_fast_kern(vkc_isa isa);

#endif
