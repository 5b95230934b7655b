// CPU-type variant of matmul.comp, for software drivers such as lavapipe (llvmpipe).
//
// llvmpipe runs the invocations of a workgroup as SIMD lanes (8 per AVX2 vector), so vector
// arithmetic is cheap, but each buffer load whose address varies across lanes is a loop over the
// lanes (about 15 instructions per lane, plus a few per extra vector component), and barrier()
// is a coroutine switch. So: no shared memory and no barriers; each invocation keeps a TM x TN
// tile of out in registers and, per step of 4 k, loads TM + TN vec4s (or, where alignment does
// not allow vec4, 4 (TM + TN) floats) for 4 TM TN multiply-adds. Rows and columns past the
// matrix are read clamped (and k past K as zero) and never stored, so any M, N, K works.
//
// Measured on lavapipe (Mesa 22.3, 2 Zen cores), GFLOP/s per core on the GPT's shapes: scalar
// loads with 4 x 4 / 8 x 8 / 16 x 8 tiles ~4 / 6 / 8; vec4 loads ~10-12; vec4 loads and stores
// with 16 x 16 tiles 12-14 (8-11 on the batched 64 x 64 attention products); the GPU variant ~1.
// Larger tiles (32 x 16, 24 x 24), unrolling k further, wider workgroups, subgroup broadcasts of
// A and loads made uniform were slower, compiled for minutes, or changed nothing.
// Re-checked on a loaded machine (Mesa 22.3.6): all 8 invocations along N with rows shared
// (A's addresses uniform; 24 x 1, 28 x 1, 16 x 2 tiles) 3-4x slower; 16 invocations, 8 x 16,
// 16 x 8, 4 invocations no faster than 8 invocations of 16 x 16. The machine code shows why the
// variant stays near 35-40% of the ceiling: each vec4 load with lane-varying addresses is a loop
// over the 8 lanes with a bounds check and a masked broadcast per component (about 35
// instructions a lane), and the 256 accumulators spill to the stack; the multiply-adds are a
// small part of the loop. Where B (and A) cannot be read as vec4, the host narrows the tile to
// 12 columns (and rows): as fast, and a third of the build time (vk_ops_matmul.c,
// cpu_tile_for_loads).
//
// 16-bit A and B (issue 19): a load of 4 of their elements (a uvec2 of words, an
// R16G16B16A16_UINT texel) costs llvmpipe about what a vec4 of float32 does (a gather per lane
// each: the cost follows the loads, not the bytes), plus the widening, so decoding's products
// (M = 1, every weight read once per token) ran in bf16 only 1.13-1.19x faster than in fp32 and
// in fp16 no faster. Where A is (M, K) and B (N, K), the model's linear layers, K8 reads 8
// elements a load (a uvec4 of four words, an R32G32B32A32_UINT texel; sums_k8). GPT-2 small's
// decode products per token (12 x qkv, attproj, fc, fcproj at M = 1, and the LM head), min of
// 15 interleaved runs on a loaded machine (Mesa 22.3.6, 2 Zen 3 cores), fp32's time over the
// 16-bit one: bf16 1.13-1.19 before, 1.65-1.72 after; fp16 0.99-1.00 before, 1.19-1.30 after;
// at prefill's M = 64, bf16 1.04-1.09 before, 1.4-1.66 after. fp16 stays behind: its
// unpackHalf2x16 costs llvmpipe about as much as the load (with bf16's widening in its place the
// fp16 pipelines ran as fast as bf16's), and a widening by integer masks and a 2^112 multiply
// measured the same. 8 or 24 columns an invocation at M = 1 instead of 16: no faster.

// The vec4 at vec4 index q of A's (B's) binding: through the texel view where VEC bit 3 (4)
// says so (matmul.comp's VKA_TEXEL build), else the storage buffer.
// 16-bit operands (AB_16): four elements from a pair of 32-bit words, or one texel of four.
vec4 a_vec4(uint q) {
#ifdef VKA_TEXEL
    if ((VEC & 8u) != 0u)
        return AB_16 ? texel16x4(texelFetch(a_htex, int(q))) : texelFetch(a_tex, int(q));
#endif
    if (AB_16) return elem16x4(a_u2[q]);
    return a4[q];
}

vec4 b_vec4(uint q) {
#ifdef VKA_TEXEL
    if ((VEC & 16u) != 0u)
        return AB_16 ? texel16x4(texelFetch(b_htex, int(q))) : texelFetch(b_tex, int(q));
#endif
    if (AB_16) return elem16x4(b_u2[q]);
    return b4[q];
}

// Eight 16-bit elements, 8q .. 8q + 7, of A's (B's) binding (K8): one texel of four words where
// VEC bit 3 (4) says so, else a uvec4 of the storage buffer.
void a_vec8(uint q, out float v[8]) {
#ifdef VKA_TEXEL
    if ((VEC & 8u) != 0u) {
        elem16x8(texelFetch(a_htex, int(q)), v);
        return;
    }
#endif
    elem16x8(a_u4[q], v);
}

void b_vec8(uint q, out float v[8]) {
#ifdef VKA_TEXEL
    if ((VEC & 16u) != 0u) {
        elem16x8(texelFetch(b_htex, int(q)), v);
        return;
    }
#endif
    elem16x8(b_u4[q], v);
}

// The product's sums with 16-bit A (M, K) and B (N, K) read 8 elements a load (K8: K, the
// offsets, lda, ldb and strides multiples of 8): half the loads of the 4-element path for the
// same bytes. Each B row's 8 elements go into the invocation's TM sums before the next row is
// loaded, so only A's TM x 8 values stay live. Same order of the sums as the 4-element path
// (k ascending), so the same bits.
void sums_k8(uint abase, uint bbase, uint i0, uint j0, inout float acc[TM][TN]) {
    for (uint k = 0u; k < pc.K; k += 8u) {
        float av[TM][8];
        [[unroll]] for (uint r = 0u; r < TM; r++)
            a_vec8((abase + min(i0 + r, pc.M - 1u) * pc.lda + k) >> 3, av[r]);
        [[unroll]] for (uint s = 0u; s < TN; s++) {
            float bv[8];
            b_vec8((bbase + min(j0 + s, pc.N - 1u) * pc.ldb + k) >> 3, bv);
            [[unroll]] for (uint r = 0u; r < TM; r++) {
                float t = acc[r][s];
                [[unroll]] for (uint kk = 0u; kk < 8u; kk++) t += av[r][kk] * bv[kk];
                acc[r][s] = t;
            }
        }
    }
}

// op(A)(i, k) for the invocation's rows i0 + r and k .. k + 3: av[r][kk].
void load_a(uint abase, uint i0, uint k, inout float av[TM][4]) {
    if (!TRANS_A && (VEC & 1u) != 0u) {
        // A (M, K) rows as vec4 along k; the host checked K, offset and stride are multiples of 4.
        [[unroll]] for (uint r = 0u; r < TM; r++) {
            uint i = min(i0 + r, pc.M - 1u);
            vec4 v = a_vec4((abase + i * pc.lda + k) >> 2);
            av[r][0] = v.x;
            av[r][1] = v.y;
            av[r][2] = v.z;
            av[r][3] = v.w;
        }
        return;
    }
    [[unroll]] for (uint kk = 0u; kk < 4u; kk++) {
        uint kc = min(k + kk, pc.K - 1u);
        bool in_k = k + kk < pc.K;
        if (TRANS_A && (VEC & 1u) != 0u) {
            // A (K, M) as vec4 along m: M, offset, stride and TM are multiples of 4.
            [[unroll]] for (uint q = 0u; q < TM / 4u; q++) {
                uint i = min(i0 + 4u * q, pc.M - 4u);
                vec4 v = a_vec4((abase + kc * pc.lda + i) >> 2);
                if (!in_k) v = vec4(0.0);
                av[4u * q + 0u][kk] = v.x;
                av[4u * q + 1u][kk] = v.y;
                av[4u * q + 2u][kk] = v.z;
                av[4u * q + 3u][kk] = v.w;
            }
        } else {
            [[unroll]] for (uint r = 0u; r < TM; r++) {
                uint i = min(i0 + r, pc.M - 1u);
                float v = a_at(abase + (TRANS_A ? kc * pc.lda + i : i * pc.lda + kc));
                av[r][kk] = in_k ? v : 0.0;
            }
        }
    }
}

// op(B)(k, j) for k .. k + 3 and the invocation's columns j0 + s: bv[s][kk].
void load_b(uint bbase, uint j0, uint k, inout float bv[TN][4]) {
    if (TRANS_B && (VEC & 2u) != 0u) {
        // B (N, K) rows as vec4 along k.
        [[unroll]] for (uint s = 0u; s < TN; s++) {
            uint j = min(j0 + s, pc.N - 1u);
            vec4 v = b_vec4((bbase + j * pc.ldb + k) >> 2);
            bv[s][0] = v.x;
            bv[s][1] = v.y;
            bv[s][2] = v.z;
            bv[s][3] = v.w;
        }
        return;
    }
    [[unroll]] for (uint kk = 0u; kk < 4u; kk++) {
        uint kc = min(k + kk, pc.K - 1u);
        bool in_k = k + kk < pc.K;
        if (!TRANS_B && (VEC & 2u) != 0u) {
            // B (K, N) as vec4 along n.
            [[unroll]] for (uint q = 0u; q < TN / 4u; q++) {
                uint j = min(j0 + 4u * q, pc.N - 4u);
                vec4 v = b_vec4((bbase + kc * pc.ldb + j) >> 2);
                if (!in_k) v = vec4(0.0);
                bv[4u * q + 0u][kk] = v.x;
                bv[4u * q + 1u][kk] = v.y;
                bv[4u * q + 2u][kk] = v.z;
                bv[4u * q + 3u][kk] = v.w;
            }
        } else {
            [[unroll]] for (uint s = 0u; s < TN; s++) {
                uint j = min(j0 + s, pc.N - 1u);
                float v = b_at(bbase + (TRANS_B ? j * pc.ldb + kc : kc * pc.ldb + j));
                bv[s][kk] = in_k ? v : 0.0;
            }
        }
    }
}

// The product's sums, 4 k a step: TM + TN loads of 4 elements (or 4 (TM + TN) of one).
void sums_k4(uint abase, uint bbase, uint i0, uint j0, inout float acc[TM][TN]) {
    for (uint k = 0u; k < pc.K; k += 4u) {
        float av[TM][4];
        float bv[TN][4];
        load_a(abase, i0, k, av);
        load_b(bbase, j0, k, bv);
        [[unroll]] for (uint r = 0u; r < TM; r++) {
            [[unroll]] for (uint s = 0u; s < TN; s++) {
                float t = acc[r][s];
                [[unroll]] for (uint kk = 0u; kk < 4u; kk++) t += av[r][kk] * bv[s][kk];
                acc[r][s] = t;
            }
        }
    }
}

void matmul_cpu() {
    uint bi, row0, col0;
    if (!tile_of_group(bi, row0, col0)) return;
    uint lane = gl_LocalInvocationID.x;
    uint i0 = row0 + (lane / pc.ln) * TM;
    uint j0 = col0 + (lane % pc.ln) * TN;
    uint abase = a_base(bi);
    uint bbase = b_base(bi);

    float acc[TM][TN];
    [[unroll]] for (uint r = 0u; r < TM; r++)
        [[unroll]] for (uint s = 0u; s < TN; s++) acc[r][s] = 0.0;
    if (K8)
        sums_k8(abase, bbase, i0, j0, acc);
    else
        sums_k4(abase, bbase, i0, j0, acc);

    if ((VEC & 4u) != 0u) {
        // out (and bias) as vec4 along n: N, offsets and stride are multiples of 4, and so is j0.
        // The bias is read once per column group, not once per row (each load is a loop over
        // the lanes on llvmpipe); columns past N read the last group and are not stored.
        vec4 bq[TN / 4u];
        [[unroll]] for (uint q = 0u; q < TN / 4u; q++)
            if (pc.has_bias != 0u) bq[q] = bias4[(pc.bias_off + min(j0 + 4u * q, pc.N - 4u)) >> 2];
        [[unroll]] for (uint r = 0u; r < TM; r++) {
            [[unroll]] for (uint q = 0u; q < TN / 4u; q++) {
                uint i = i0 + r, j = j0 + 4u * q;
                if (i < pc.M && j < pc.N) {
                    vec4 v = pc.alpha * vec4(acc[r][4u * q], acc[r][4u * q + 1u],
                                             acc[r][4u * q + 2u], acc[r][4u * q + 3u]);
                    if (pc.has_bias != 0u) v += bq[q];
                    if (OUT16 != 0u) {
                        // 16-bit out: the 4 elements are two whole words (no accumulate)
                        uint e = 2u * pc.out_off + bi * pc.stride_out + i * pc.ldo + j;
                        bool f16 = OUT16 == 2u;
                        out_u2[e >> 2] = uvec2(narrow16_to(f16, v.x) | (narrow16_to(f16, v.y) << 16),
                                               narrow16_to(f16, v.z) | (narrow16_to(f16, v.w) << 16));
                        continue;
                    }
                    uint o = pc.out_off + bi * pc.stride_out + i * pc.ldo + j;
                    if (pc.accumulate != 0u) v += out4[o >> 2];
                    out4[o >> 2] = v;
                }
            }
        }
        return;
    }
    [[unroll]] for (uint r = 0u; r < TM; r++) {
        [[unroll]] for (uint s = 0u; s < TN; s++) {
            uint i = i0 + r, j = j0 + s;
            if (OUT16 == 0u) {
                if (i < pc.M && j < pc.N) store_out(bi, i, j, acc[r][s]);
            } else if (i < pc.M && j < pc.N) { // this invocation's run: j0 .. j0 + TN - 1
                store_out16(bi, i, j, acc[r][s], s != 0u, s + 1u < TN && j + 1u < pc.N,
                            acc[r][min(s + 1u, TN - 1u)]);
            }
        }
    }
}
