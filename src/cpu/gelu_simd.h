/* GELU's fast bodies (gelu.c), one instance per ISA (simd_each.h): the formulas of
 * gelu_forward_block and gelu_backward_block, operation for operation (no fused multiply-add,
 * exp_fast.h's vector exp; GCC 12 left those blocks scalar for AVX2), the elements past the last
 * whole vector by those blocks. */
/* e = exp(-2u), u = GELU_SCALE (v + GELU_CUBE v^3) */
VS_TARGET VS_INLINE VS_F32 VS_NAME(gelu_e)(VS_F32 v) {
    VS_F32 c3 = VS_MUL(VS_MUL(VS_MUL(VS_SET1(GELU_CUBE), v), v), v);
    VS_F32 u = VS_MUL(VS_SET1(GELU_SCALE), VS_ADD(v, c3));
    return VS_EXP(VS_MUL(VS_SET1(-2.0f), u));
}

VS_TARGET static void VS_NAME(gelu_fwd)(float *o, const float *x, long n) {
    const VS_F32 one = VS_SET1(1.0f);
    long i = 0;
    for (; i + VS_W <= n; i += VS_W) {
        VS_F32 v = VS_LOAD(x + i);
        VS_STORE(o + i, VS_DIV(v, VS_ADD(one, VS_NAME(gelu_e)(v))));
    }
    gelu_forward_block(o + i, x + i, n - i);
}

VS_TARGET static void VS_NAME(gelu_bwd)(float *d, const float *x, const float *g, long n) {
    const VS_F32 scale = VS_SET1(GELU_SCALE), cube3 = VS_SET1(3.0f * GELU_CUBE);
    const VS_F32 one = VS_SET1(1.0f), four = VS_SET1(4.0f), half = VS_SET1(0.5f);
    const VS_F32 zero = VS_ZERO(), inf = VS_SET1(INFINITY);
    long i = 0;
    for (; i + VS_W <= n; i += VS_W) {
        VS_F32 v = VS_LOAD(x + i);
        VS_F32 e = VS_NAME(gelu_e)(v);
        VS_F32 ope = VS_ADD(one, e);
        VS_F32 sg = VS_DIV(one, ope);
        VS_F32 sech2 = VS_MUL(four, VS_DIV(VS_DIV(e, ope), ope));
        VS_F32 x2 = VS_MUL(VS_MUL(cube3, v), v);
        VS_F32 du = VS_MUL(scale, VS_ADD(one, x2));
        VS_MASK tail = VS_MASK_OR(VS_MASK_OR(VS_CMP_EQ(e, zero), VS_CMP_EQ(e, inf)),
                                  VS_CMP_EQ(sech2, zero));
        VS_F32 term = VS_MUL(VS_MUL(VS_MUL(half, v), sech2), du);
        VS_F32 grad = VS_ADD(sg, VS_BLEND(tail, term, zero));
        VS_F32 di = VS_LOAD(d + i);
        VS_STORE(d + i, VS_ADD(di, VS_MUL(grad, VS_LOAD(g + i))));
    }
    gelu_backward_block(d + i, x + i, g + i, n - i);
}
