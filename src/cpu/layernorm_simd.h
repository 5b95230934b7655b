/* Layer normalisation's fast rows and columns (layernorm.c), one instance per ISA
 * (simd_each.h): ln_forward_row, ln_backward_row and ln_backward_cols inlined, so their omp simd
 * loops are vectorised for the instance's ISA. */
VS_TARGET static void VS_NAME(ln_fwd)(float *o, float *mean, float *rstd, const float *x,
                                      const float *weight, const float *bias, int C) {
    ln_forward_row(o, mean, rstd, x, weight, bias, C);
}
VS_TARGET static void VS_NAME(ln_bwd)(float *di, const float *x, const float *d,
                                      const float *weight, float m, float r, int C) {
    ln_backward_row(di, x, d, weight, m, r, C);
}
VS_TARGET static void VS_NAME(ln_cols)(float *dweight, float *dbias, const float *dout,
                                       const float *inp, const float *mean, const float *rstd,
                                       int N, int C, int c0, int w) {
    ln_backward_cols(dweight, dbias, dout, inp, mean, rstd, N, C, c0, w);
}
