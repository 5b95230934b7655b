// GPU variant of matmul.comp: the classic shared-memory tiled SGEMM.
//
// A workgroup of WG = LM x LN invocations computes a BM x BN tile of out (BM = LM TM,
// BN = LN TN). K is walked in steps of BK: the BM x BK slice of op(A) and the BK x BN slice of
// op(B) are staged in shared memory k-major, and each invocation accumulates a TM x TN register
// tile from them (TM + TN shared loads for TM TN multiply-adds per k). Invocation (tm, tn) owns
// rows tm + LM r and columns tn + LN s, so neighbouring invocations read neighbouring shared
// words (no bank conflicts; the LM rows a subgroup touches are broadcasts) and write neighbouring
// words of out. The next slice is read from global memory into registers while the current one
// is used (one shared buffer, two barriers per step). Global reads go along the matrix's
// contiguous dimension whatever the transposes are (coalesced); a transposing store into
// shared memory gets one word of padding per row so it does not hit one bank. Elements past
// M, N or K read as zero and are not stored, so no padding of the operands is needed.

// Padding of the k-major shared rows: 1 word where the store transposes (A (M, K), B (N, K)).
const uint PAD_A = 1u - (TRANS & 1u);
const uint PAD_B = (TRANS >> 1) & 1u;
const uint SA = BM + PAD_A; // shared row stride of the A slice
const uint SB = BN + PAD_B;
const uint LOADS_A = (BM * BK + WG - 1u) / WG; // elements each invocation stages per slice
const uint LOADS_B = (BN * BK + WG - 1u) / WG;

shared float sh_a[BK * SA]; // sh_a[kk * SA + m] = op(A)(row0 + m, k0 + kk)
shared float sh_b[BK * SB]; // sh_b[kk * SB + n] = op(B)(k0 + kk, col0 + n)

// Element e = 0 .. BM BK - 1 of an A slice as (m, kk), numbered so that consecutive invocations
// read consecutive addresses: the stored matrix's contiguous dimension varies fastest.
uvec2 slice_a(uint e) { return TRANS_A ? uvec2(e % BM, e / BM) : uvec2(e / BK, e % BK); }
// Element e of a B slice as (n, kk).
uvec2 slice_b(uint e) { return TRANS_B ? uvec2(e / BK, e % BK) : uvec2(e % BN, e / BN); }

// op(A)(row0 + m, k0 + kk), zero outside the matrix.
float fetch_a(uint abase, uint row0, uint k0, uvec2 mk) {
    uint i = row0 + mk.x, k = k0 + mk.y;
    if (i >= pc.M || k >= pc.K) return 0.0;
    return a[abase + (TRANS_A ? k * pc.M + i : i * pc.K + k)];
}

// op(B)(k0 + kk, col0 + n), zero outside the matrix.
float fetch_b(uint bbase, uint col0, uint k0, uvec2 nk) {
    uint j = col0 + nk.x, k = k0 + nk.y;
    if (j >= pc.N || k >= pc.K) return 0.0;
    return b[bbase + (TRANS_B ? j * pc.K + k : k * pc.N + j)];
}

void matmul_gpu() {
    uint bi, row0, col0;
    if (!tile_of_group(bi, row0, col0)) return; // whole workgroups only: barriers below
    uint tid = gl_LocalInvocationID.x;
    uint tm = tid / LN, tn = tid % LN;
    uint abase = pc.a_off + bi * pc.stride_a;
    uint bbase = pc.b_off + bi * pc.stride_b;

    float acc[TM][TN];
    [[unroll]] for (uint r = 0u; r < TM; r++)
        [[unroll]] for (uint s = 0u; s < TN; s++) acc[r][s] = 0.0;

    // The next slice, read into registers while the current one is used.
    float ra[LOADS_A];
    float rb[LOADS_B];
    [[unroll]] for (uint p = 0u; p < LOADS_A; p++)
        ra[p] = fetch_a(abase, row0, 0u, slice_a(tid + p * WG));
    [[unroll]] for (uint p = 0u; p < LOADS_B; p++)
        rb[p] = fetch_b(bbase, col0, 0u, slice_b(tid + p * WG));

    for (uint k0 = 0u; k0 < pc.K; k0 += BK) {
        barrier(); // everyone is done reading the previous slice
        [[unroll]] for (uint p = 0u; p < LOADS_A; p++) {
            uvec2 mk = slice_a(tid + p * WG);
            sh_a[mk.y * SA + mk.x] = ra[p];
        }
        [[unroll]] for (uint p = 0u; p < LOADS_B; p++) {
            uvec2 nk = slice_b(tid + p * WG);
            sh_b[nk.y * SB + nk.x] = rb[p];
        }
        barrier();
        if (k0 + BK < pc.K) {
            [[unroll]] for (uint p = 0u; p < LOADS_A; p++)
                ra[p] = fetch_a(abase, row0, k0 + BK, slice_a(tid + p * WG));
            [[unroll]] for (uint p = 0u; p < LOADS_B; p++)
                rb[p] = fetch_b(bbase, col0, k0 + BK, slice_b(tid + p * WG));
        }
        [[unroll]] for (uint kk = 0u; kk < BK; kk++) {
            float av[TM];
            float bv[TN];
            [[unroll]] for (uint r = 0u; r < TM; r++) av[r] = sh_a[kk * SA + tm + LM * r];
            [[unroll]] for (uint s = 0u; s < TN; s++) bv[s] = sh_b[kk * SB + tn + LN * s];
            [[unroll]] for (uint r = 0u; r < TM; r++)
                [[unroll]] for (uint s = 0u; s < TN; s++) acc[r][s] += av[r] * bv[s];
        }
    }

    [[unroll]] for (uint r = 0u; r < TM; r++) {
        uint i = row0 + tm + LM * r;
        [[unroll]] for (uint s = 0u; s < TN; s++) {
            uint j = col0 + tn + LN * s;
            if (i < pc.M && j < pc.N) store_out(bi, i, j, acc[r][s]);
        }
    }
}
