/* vkattn bench: the kernel cases as data (bench_cases.c) and what running one needs
 * (bench_kernels.c). */
#ifndef VKA_BENCH_CASES_H
#define VKA_BENCH_CASES_H

#include "bench.h"

#define KC_MAX_TENSORS 14

/* How a tensor starts: uniform in [-scale, scale], in (0, scale], token ids below ids_max, the
 * AdamW scalars, the clip scale, or zeros (scratch). */
typedef enum kc_init { KC_RANDOM = 0, KC_POSITIVE, KC_IDS, KC_HYPER, KC_GSCALE, KC_ZERO } kc_init;

typedef struct kc_tensor {
    size_t n;        /* elements */
    kc_init init;
    float scale;
    int ids_max;
    bool compare;    /* an output checked against the CPU backend */
} kc_tensor;

typedef struct kc_case kc_case;
/* Record the case's ops on ctx between vka_graph_begin/end; t as kc_case.t lays them out. */
typedef vka_result (*kc_record_fn)(vka_context *ctx, vka_tensor **t, const kc_case *c);

/* One kernel case: the op, its sizes, its tensors, and what a run is worth. */
struct kc_case {
    int op;          /* kc_op (bench_cases.c) */
    int d[6];        /* the op's sizes, as its record function reads them */
    kc_record_fn record;
    int n_tensors;
    kc_tensor t[KC_MAX_TENSORS];
    double tol;      /* on max |diff|, relative to max(1, max |reference|) */
    /* a 16-bit matmul (d = M, N, K): a and b of this vka_dtype (VKA_BF16, VKA_F16; 0: not one).
     * The CPU backend's row calls its 16-bit kernel directly (naming its path), the Vulkan row
     * vka_matmul with 16-bit tensors; record is the fp32 product both are checked with, on the
     * same (rounded) inputs, and the Vulkan row's op (its tensors 16-bit) */
    int type16;
};

/* Every kernel case of this mode, in the table's order; each fills its row's id, kind, pass,
 * shape, work and plot fields. Returns the number written (at most cap). */
int kc_enumerate(bool quick, kc_case *cases, bench_row *rows, int cap);

#endif
