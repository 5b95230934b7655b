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
const uint LOADS_A = BM * BK / WG; // elements each invocation stages per slice
const uint LOADS_B = BN * BK / WG;

shared float sh_a[BK * SA]; // sh_a[kk * SA + m] = op(A)(row0 + m, k0 + kk)
shared float sh_b[BK * SB]; // sh_b[kk * SB + n] = op(B)(k0 + kk, col0 + n)

// Element e of the slice at k0, in the order that makes consecutive invocations read
// consecutive addresses; returns its (m or n, kk) and whether it lies inside the matrix.
float fetch_a(uint abase, uint row0, uint k0, uint e, out uint m, out uint kk) {
    if (TRANS_A) { // A (K, M): contiguous along m
        m = e % BM;
        kk = e / BM;
    } else {       // A (M, K): contiguous along k
        kk = e % BK;
        m = e / BK;
    }
    uint i = row0 + m, k = k0 + kk;
    if (i >= pc.M || k >= pc.K) return 0.0;
    return a[abase + (TRANS_A ? k * pc.M + i : i * pc.K + k)];
}

float fetch_b(uint bbase, uint col0, uint k0, uint e, out uint n, out uint kk) {
    if (TRANS_B) { // B (N, K): contiguous along k
        kk = e % BK;
        n = e / BK;
    } else {       // B (K, N): contiguous along n
        n = e % BN;
        kk = e / BN;
    }
    uint j = col0 + n, k = k0 + kk;
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

    // Registers holding the next slice (prefetch) and where each element goes in shared memory.
    float ra[LOADS_A];
    float rb[LOADS_B];
    uint da[LOADS_A];
    uint db[LOADS_B];
    [[unroll]] for (uint p = 0u; p < LOADS_A; p++) {
        uint m, kk;
        ra[p] = fetch_a(abase, row0, 0u, tid + p * WG, m, kk);
        da[p] = kk * SA + m;
    }
    [[unroll]] for (uint p = 0u; p < LOADS_B; p++) {
        uint n, kk;
        rb[p] = fetch_b(bbase, col0, 0u, tid + p * WG, n, kk);
        db[p] = kk * SB + n;
    }

    for (uint k0 = 0u; k0 < pc.K; k0 += BK) {
        barrier(); // everyone is done reading the previous slice
        [[unroll]] for (uint p = 0u; p < LOADS_A; p++) sh_a[da[p]] = ra[p];
        [[unroll]] for (uint p = 0u; p < LOADS_B; p++) sh_b[db[p]] = rb[p];
        barrier();
        if (k0 + BK < pc.K) { // start reading the next slice; used after this one's math
            uint m, n, kk;
            [[unroll]] for (uint p = 0u; p < LOADS_A; p++)
                ra[p] = fetch_a(abase, row0, k0 + BK, tid + p * WG, m, kk);
            [[unroll]] for (uint p = 0u; p < LOADS_B; p++)
                rb[p] = fetch_b(bbase, col0, k0 + BK, tid + p * WG, n, kk);
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
