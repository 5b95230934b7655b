/* The bias gradient's fast columns (reduce.c), one instance per ISA (simd_each.h): bias_cols
 * inlined, so its omp simd loop is vectorised for the instance's ISA. */
VS_TARGET static void VS_NAME(bias_cols)(float *dbias, const float *dout, int N, int OC, int o0,
                                         int w) {
    bias_cols(dbias, dout, N, OC, o0, w);
}
