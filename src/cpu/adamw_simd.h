/* AdamW's fast body (adamw.c), one instance per ISA (simd_each.h): the reference's expression
 * in vector lanes, in its order, the elements past the last whole vector by adamw_tail. */
VS_TARGET static void VS_NAME(adamw_vec)(float *param, const float *grad, float *m, float *v,
                                         long n, const adamw_hyper *h) {
    const VS_F32 gs = VS_SET1(h->gscale), b1 = VS_SET1(h->b1), b2 = VS_SET1(h->b2),
                 c1 = VS_SET1(1.0f - h->b1), c2 = VS_SET1(1.0f - h->b2), bc1 = VS_SET1(h->bc1),
                 bc2 = VS_SET1(h->bc2), eps = VS_SET1(h->eps), wd = VS_SET1(h->wd),
                 lr = VS_SET1(h->lr);
    long i = 0;
    for (; i + VS_W <= n; i += VS_W) {
        VS_F32 g = VS_MUL(VS_LOAD(grad + i), gs);
        VS_F32 mi = VS_ADD(VS_MUL(b1, VS_LOAD(m + i)), VS_MUL(c1, g));
        VS_F32 vi = VS_ADD(VS_MUL(b2, VS_LOAD(v + i)), VS_MUL(VS_MUL(c2, g), g));
        VS_STORE(m + i, mi);
        VS_STORE(v + i, vi);
        VS_F32 p = VS_LOAD(param + i);
        VS_F32 den = VS_ADD(VS_SQRT(VS_DIV(vi, bc2)), eps);
        VS_F32 up = VS_ADD(VS_DIV(VS_DIV(mi, bc1), den), VS_MUL(wd, p));
        VS_STORE(param + i, VS_SUB(p, VS_MUL(lr, up)));
    }
    adamw_tail(param + i, grad + i, m + i, v + i, n - i, h);
}
