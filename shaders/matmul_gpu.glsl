// GPU variant of matmul.comp: the classic shared-memory tiled SGEMM.
//
// A workgroup of WG = LM x LN invocations computes a BM x BN tile of out (BM = LM TM,
// BN = LN TN; TM and TN multiples of 4). K is walked in steps of BK: the BM x BK slice of op(A)
// and the BK x BN slice of op(B) are staged in shared memory k-major, and each invocation
// accumulates a TM x TN register tile from them: per k, TM / 4 + TN / 4 vec4 shared loads for
// TM TN multiply-adds. Invocation (tm, tn) owns the row quads 4 (tm + LM g) .. + 3 and the
// column quads 4 (tn + LN h) .. + 3, so the invocations of a subgroup read consecutive vec4s of
// B and a few broadcast vec4s of A (no bank conflicts), and write consecutive words of out.
// The next slice is read from global memory into registers while the current one is used (one
// shared buffer, two barriers per step). Global reads go along the stored matrix's contiguous
// dimension whatever the transposes are (coalesced); where that makes the store into shared
// memory a transpose, shared rows get a vec4 of padding so its words spread over the banks.
// Elements past M, N or K read as zero and are not stored: no padding of the operands needed.

const uint PAD_A = 1u - (TRANS & 1u);    // vec4s of padding: A (M, K) is stored transposed
const uint PAD_B = (TRANS >> 1) & 1u;    // B (N, K) likewise
const uint SA = BM / 4u + PAD_A;         // shared row stride of the A slice, in vec4s
const uint SB = BN / 4u + PAD_B;
const uint LOADS_A = (BM * BK + WG - 1u) / WG; // elements each invocation stages per slice
const uint LOADS_B = (BN * BK + WG - 1u) / WG;

shared vec4 sh_a[BK * SA]; // word m of row kk = op(A)(row0 + m, k0 + kk)
shared vec4 sh_b[BK * SB]; // word n of row kk = op(B)(k0 + kk, col0 + n)

// Element e = 0 .. BM BK - 1 of an A slice as (m, kk), numbered so that consecutive invocations
// read consecutive addresses: the stored matrix's contiguous dimension varies fastest.
uvec2 slice_a(uint e) { return TRANS_A ? uvec2(e % BM, e / BM) : uvec2(e / BK, e % BK); }
// Element e of a B slice as (n, kk).
uvec2 slice_b(uint e) { return TRANS_B ? uvec2(e / BK, e % BK) : uvec2(e % BN, e / BN); }

// op(A)(row0 + m, k0 + kk), zero outside the matrix.
float fetch_a(uint abase, uint row0, uint k0, uvec2 mk) {
    uint i = row0 + mk.x, k = k0 + mk.y;
    if (i >= pc.M || k >= pc.K) return 0.0;
    return a_at(abase + (TRANS_A ? k * pc.lda + i : i * pc.lda + k));
}

// op(B)(k0 + kk, col0 + n), zero outside the matrix.
float fetch_b(uint bbase, uint col0, uint k0, uvec2 nk) {
    uint j = col0 + nk.x, k = k0 + nk.y;
    if (j >= pc.N || k >= pc.K) return 0.0;
    return b_at(bbase + (TRANS_B ? j * pc.ldb + k : k * pc.ldb + j));
}

void matmul_gpu() {
    uint bi, row0, col0;
    if (!tile_of_group(bi, row0, col0)) return; // whole workgroups only: barriers below
    uint tid = gl_LocalInvocationID.x;
    uint tm = tid / LN, tn = tid % LN;
    uint abase = a_base(bi);
    uint bbase = b_base(bi);

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
            sh_a[mk.y * SA + mk.x / 4u][mk.x % 4u] = ra[p];
        }
        [[unroll]] for (uint p = 0u; p < LOADS_B; p++) {
            uvec2 nk = slice_b(tid + p * WG);
            sh_b[nk.y * SB + nk.x / 4u][nk.x % 4u] = rb[p];
        }
        barrier();
        if (k0 + BK < pc.K) {
            [[unroll]] for (uint p = 0u; p < LOADS_A; p++)
                ra[p] = fetch_a(abase, row0, k0 + BK, slice_a(tid + p * WG));
            [[unroll]] for (uint p = 0u; p < LOADS_B; p++)
                rb[p] = fetch_b(bbase, col0, k0 + BK, slice_b(tid + p * WG));
        }
        [[unroll]] for (uint kk = 0u; kk < BK; kk++) {
            // (TM + 3) / 4: never a zero-length array, which is invalid SPIR-V, when the module is
            // specialised for the CPU variant with TM = 1 (this code is then dead).
            vec4 av[(TM + 3u) / 4u];
            vec4 bv[(TN + 3u) / 4u];
            [[unroll]] for (uint g = 0u; g < TM / 4u; g++) av[g] = sh_a[kk * SA + tm + LM * g];
            [[unroll]] for (uint h = 0u; h < TN / 4u; h++) bv[h] = sh_b[kk * SB + tn + LN * h];
            [[unroll]] for (uint r = 0u; r < TM; r++)
                [[unroll]] for (uint s = 0u; s < TN; s++)
                    acc[r][s] += av[r / 4u][r % 4u] * bv[s / 4u][s % 4u];
        }
    }

    [[unroll]] for (uint r = 0u; r < TM; r++) {
        uint i = row0 + 4u * (tm + LM * (r / 4u)) + r % 4u;
        [[unroll]] for (uint s = 0u; s < TN; s++) {
            uint j = col0 + 4u * (tn + LN * (s / 4u)) + s % 4u;
            if (OUT16 == 0u) {
                if (i < pc.M && j < pc.N) store_out(bi, i, j, acc[r][s]);
            } else if (i < pc.M && j < pc.N) { // this invocation's run: groups of 4
                store_out16(bi, i, j, acc[r][s], s % 4u != 0u, s % 4u != 3u && j + 1u < pc.N,
                            acc[r][min(s + 1u, TN - 1u)]);
            }
        }
    }
}
