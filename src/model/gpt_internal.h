/*
 * The GPT-2 model's internals (not installed): parameter and activation layout, the graphs it
 * records, and the functions shared by gpt.c (create, layout, parameters), gpt_graph.c
 * (forward/backward/AdamW recording), gpt_train.c (the public run functions) and checkpoint.c.
 *
 * Layout (llm.c train_gpt2.c, with one difference: each layer's slice of a (L, ...) parameter
 * is its own tensor, so no single tensor grows with L):
 *  - parameters: tensors in llm.c order wte, wpe, then for each of ln1w..fcprojb the L layer
 *    tensors, then lnfw, lnfb; one arena. Gradients, AdamW m and v: one arena each, same
 *    tensor list (gradients and m/v are created on first use, so an inference-only model
 *    holds only its parameters).
 *  - activations: one arena sized for the largest (B, T) used so far; the per-layer tensors the
 *    backward pass needs exist for every layer once a training graph was recorded, otherwise
 *    only for layer 0 (forward-only passes reuse layer 0's tensors for every layer).
 *  - host: one VKB_ARENA_HOST arena for what the host writes before a run (tokens, targets,
 *    encoder buckets, AdamW scalars) and reads after it (loss, losses, grad norm, logits).
 */
#ifndef VKM_GPT_INTERNAL_H
#define VKM_GPT_INTERNAL_H

#include "backend.h"

/* Parameter kinds in llm.c order. */
typedef enum gpt_param_kind {
    P_WTE, P_WPE,
    P_LN1W, P_LN1B, P_QKVW, P_QKVB, P_ATTPROJW, P_ATTPROJB,
    P_LN2W, P_LN2B, P_FCW, P_FCB, P_FCPROJW, P_FCPROJB,
    P_LNFW, P_LNFB,
    P_KINDS
} gpt_param_kind;

/* Activations of one layer kept for the backward pass. */
typedef struct gpt_layer_acts {
    vkb_tensor ln1;       /* (B, T, C) */
    vkb_tensor ln1_mean;  /* (B, T) */
    vkb_tensor ln1_rstd;  /* (B, T) */
    vkb_tensor qkvr;      /* composed: (3, B, NH, T, HS), q, k, v with the heads split out;
                           * fused: (B, T, 3C), the qkv projection as it is */
    vkb_tensor att;       /* (B, NH, T, T) softmax output (composed only) */
    vkb_tensor atty;      /* (B, T, C) attention output, heads side by side */
    vkb_tensor residual2; /* (B, T, C) */
    vkb_tensor ln2;       /* (B, T, C) */
    vkb_tensor ln2_mean;  /* (B, T) */
    vkb_tensor ln2_rstd;  /* (B, T) */
    vkb_tensor fch;       /* (B, T, 4C) */
    vkb_tensor fch_gelu;  /* (B, T, 4C) */
    vkb_tensor residual3; /* (B, T, C) */
    vkb_tensor lse;       /* (B, NH, T) fused attention's row log-sum-exp */
} gpt_layer_acts;

#define GPT_LAYER_ACTS (sizeof(gpt_layer_acts) / sizeof(vkb_tensor))

/* Everything in the activation arena. Scratch tensors are reused by every layer. */
typedef struct gpt_acts {
    vkb_tensor encoded;  /* (B, T, C) */
    vkb_tensor lnf;      /* (B, T, C) */
    vkb_tensor lnf_mean; /* (B, T) */
    vkb_tensor lnf_rstd; /* (B, T) */
    vkb_tensor losses;   /* (B, T) */
    vkb_tensor loss;     /* (1) mean of losses */
    /* forward scratch */
    vkb_tensor qkv;      /* (B, T, 3C) */
    vkb_tensor preatt;   /* (B, NH, T, T) */
    vkb_tensor vaccum;   /* (B, NH, T, HS) att . v */
    vkb_tensor proj;     /* (B, T, C) attproj, then fcproj */
    /* backward scratch (1 element until a backward graph is recorded) */
    vkb_tensor dresidual; /* (B, T, C) gradient of the residual stream */
    vkb_tensor dln;       /* (B, T, C) gradient of a layernorm output */
    vkb_tensor datty;     /* (B, T, C) */
    vkb_tensor dvaccum;   /* (B, NH, T, HS) */
    vkb_tensor datt;      /* (B, NH, T, T) */
    vkb_tensor dpreatt;   /* (B, NH, T, T) */
    vkb_tensor dqkvr;     /* (3, B, NH, T, HS) */
    vkb_tensor dqkv;      /* (B, T, 3C) */
    vkb_tensor dfch_gelu; /* (B, T, 4C) */
    vkb_tensor dfch;      /* (B, T, 4C) */
    /* mixed precision (gpt_mixed.c; 1 element in float32): 32-bit words viewed as 16-bit by
     * vkm_gpt_view16, a product's float32 input rounded (atty (B, T, C) or a block of lnf;
     * ln1, ln2 and fch_gelu are written in 16 bits, gpt_acts.c) and, in backward, its output
     * gradient (up to (B, T, 4C), or a block of the head's dlogits (rows, Vp)) */
    vkb_tensor x16;
    vkb_tensor d16;
} gpt_acts;

#define GPT_GLOBAL_ACTS (sizeof(gpt_acts) / sizeof(vkb_tensor))

/* The LM head (logits = lnf . wte^T, then cross-entropy) runs over blocks of at most `rows`
 * positions, so that no logits tensor passes the device's largest tensor, and a loss-only or
 * training pass needs one block of logits, not B*T*Vp floats (B 48, T 1024, GPT-2's Vp 50304:
 * 9.4 GiB). Training fuses the head's backward into each block (cross-entropy backward in
 * place, dlnf rows, dwte accumulated), as Liger-Kernel's fused linear cross-entropy does.
 * Passes that return every position's logits keep one tensor per block, at most
 * GPT_LOGIT_BLOCKS of them; the others reuse block 0, of at most GPT_HEAD_BYTES. */
#define GPT_LOGIT_BLOCKS 64
#define GPT_HEAD_BYTES ((uint64_t)256 << 20)
/* Activation tensors of a model of L layers: the global ones, L layers', the logit blocks. */
#define GPT_N_ACTS(L) (GPT_GLOBAL_ACTS + GPT_LAYER_ACTS * (size_t)(L) + GPT_LOGIT_BLOCKS)

typedef struct gpt_head {
    int rows;   /* positions per block (the last block may have fewer) */
    int blocks; /* ceil(B*T / rows) */
} gpt_head;

/* The host-visible arena. */
typedef struct gpt_host {
    vkb_tensor inputs;  /* (B, T) int32 */
    vkb_tensor targets; /* (B, T) int32 */
    vkb_tensor buckets; /* VKA_BUCKETS_SIZE(B*T) int32 for encoder_backward */
    vkb_tensor hyper;   /* (VKA_HYPER_COUNT) AdamW scalars of this step */
    vkb_tensor loss;    /* (1) */
    vkb_tensor losses;  /* (B, T) */
    vkb_tensor norm;    /* (2) grad norm, clip scale */
    vkb_tensor logits;  /* (T, Vp) of batch row 0, for sampling; 1 element until needed */
    vkb_tensor dloss;   /* (1) 1 / the batch's counted targets (not -1): crossentropy_backward */
} gpt_host;

#define GPT_HOST_TENSORS (sizeof(gpt_host) / sizeof(vkb_tensor))

/* What a run needs the arenas to hold. */
typedef struct gpt_shape {
    int B, T;
    bool train;       /* per-layer activations for every layer, backward scratch */
    bool host_logits; /* host.logits (T, Vp) */
    bool logits;      /* every position's logits kept on the device (logit blocks) */
} gpt_shape;

typedef enum gpt_graph_kind {
    G_FORWARD,          /* forward to logits (every position's kept) */
    G_FORWARD_LOSS,     /* + cross-entropy, mean loss and losses copied to the host */
    G_FORWARD_LOSS_LOGITS, /* G_FORWARD_LOSS keeping every position's logits */
    G_FORWARD_BACKWARD, /* zero grads, forward, loss, backward */
    G_TRAIN,            /* + grad norm and AdamW */
    G_ACCUMULATE,       /* forward, loss, backward adding into the grads (no zeroing): a
                           middle micro-batch of gradient accumulation */
    G_TRAIN_ACCUMULATED, /* + grad norm and AdamW: the last micro-batch */
    G_SAMPLE,           /* forward, logits of batch row 0 copied to the host */
} gpt_graph_kind;

typedef struct gpt_graph {
    gpt_graph_kind kind;
    int B, T;
    float grad_clip, weight_decay; /* G_TRAIN(_ACCUMULATED) only: recorded into the graph */
    bool profiled;                 /* recorded with per-op timing (vka_context_set_profiling) */
    vkb_graph *graph;
} gpt_graph;

#define GPT_MAX_GRAPHS 12

/* The graph of this kind and shape, recorded first if new (gpt_train.c). */
vka_result vkm_gpt_graph(vka_gpt *gpt, gpt_graph_kind kind, int B, int T, float grad_clip,
                         float weight_decay, vkb_graph **out);
/* VKA_ERROR_INVALID_ARGUMENT naming fn when a pass of vka_gpt_*_prepare is not finished. */
vka_result vkm_gpt_busy(vka_gpt *gpt, const char *fn);
/* The public handle *slot (the model's or a session's, made on first use) on graph g, for
 * *_prepare. */
vka_result vkm_gpt_handle(vka_gpt *gpt, struct vka_graph **slot, vkb_graph *g,
                          struct vka_graph **out);

struct vka_gpt {
    vka_context *ctx;
    vkb_backend *be;
    vka_gpt_config cfg;
    vka_attention_impl attention; /* of the passes recorded from now on */
    vka_dtype precision;          /* of the passes recorded from now on (gpt_mixed.c) */
    vkb_tensor *w16;              /* (vkm_gpt_w16_count) 16-bit copies of the matmul weights */
    vkb_arena *w16_arena;         /* made on first use by a 16-bit precision */
    bool w16_fresh;               /* w16 holds the current parameters */
    /* Dynamic loss scaling of training steps (vka_gpt_set_loss_scale, gpt_mixed.c) */
    bool scale_default;           /* the precision's default (off, or 2^16 for fp16) */
    bool scaling;                 /* on: the next step's loss gradient is times loss_scale */
    float loss_scale;             /* S, a power of two (1 when off) */
    uint32_t scale_good;          /* steps in a row without overflow since S last changed */
    uint64_t skipped;             /* steps skipped for overflowed gradients */
    size_t num_params;
    uint64_t step; /* AdamW steps taken */
    uint64_t tokenizer_id; /* vka_tokenizer_id of its tokenizer (vka_gpt_set_tokenizer, or the
                              file's trailer); 0 = not known */

    int n_tensors;         /* parameter tensors: 4 + 12 L */
    size_t *tensor_sizes;  /* (n_tensors) elements of each */
    vkb_tensor *params;    /* (n_tensors) */
    vkb_tensor *grads;     /* (n_tensors), valid once grads_arena exists */
    vkb_tensor *m, *v;     /* (n_tensors), valid once opt_arena[0] exists */
    vkb_tensor norm_partials; /* (n_tensors * VKA_NORM_PARTIALS) in the gradient arena */
    vkb_tensor norm;          /* (2) grad norm and clip scale, in the gradient arena */
    vkb_arena *params_arena, *grads_arena, *m_arena, *v_arena;
    bool have_grads;       /* a backward pass has filled grads */
    uint64_t arena_bytes;  /* device arenas' bytes, checked against limits.memory_bytes */

    gpt_layer_acts *layer; /* (L) */
    gpt_acts acts;
    vkb_tensor logits[GPT_LOGIT_BLOCKS]; /* (rows, Vp) blocks of the (B*T, Vp) logits */
    gpt_host host;
    vkb_arena *acts_arena, *host_arena;
    size_t *acts_cap;      /* capacity of each activation tensor (elements) */
    size_t host_cap[GPT_HOST_TENSORS];
    size_t counted;        /* targets of the last batch written that are not -1 */
    gpt_shape fits;        /* the last shape vkm_gpt_reserve found room for (B = 0: none) */
    int32_t *bucket_buf;   /* host scratch for vka_encoder_buckets, host_cap[2] elements */

    gpt_graph graphs[GPT_MAX_GRAPHS];
    int n_graphs, next_evict;
    vkb_graph *last_run;        /* graph of the last successful run (vka_gpt_times) */
    /* A pass handed out by vka_gpt_*_prepare (gpt_train.c) and not yet finished. */
    gpt_graph_kind pending_kind;
    bool pending;               /* between _prepare and _finish */
    bool pending_logits;        /* the forward pass keeps every position's logits */
    int pending_B, pending_T;
    vkb_graph *pending_graph;
    struct vka_graph *handle;   /* the public handle _prepare returns (made on first use) */
    int n_sessions;             /* live vka_gpt_session children (gpt_session.c) */
    bool destroy_pending;       /* vka_gpt_destroy was called with sessions alive */
};

/* Index of the tensor of kind for layer l (l ignored for wte, wpe, lnfw, lnfb). */
static inline int gpt_tensor_index(int L, gpt_param_kind kind, int l) {
    if (kind <= P_WPE) return (int)kind;
    if (kind >= P_LNFW) return 2 + 12 * L + (int)(kind - P_LNFW);
    return 2 + (int)(kind - P_LN1W) * L + l;
}
static inline bool gpt_kind_per_layer(gpt_param_kind kind) {
    return kind > P_WPE && kind < P_LNFW;
}
/* The 2-D weights: initialised N(0, 0.02) and weight-decayed (nanoGPT). */
static inline bool gpt_kind_is_matrix(gpt_param_kind kind) {
    return kind == P_WTE || kind == P_WPE || kind == P_QKVW || kind == P_ATTPROJW ||
           kind == P_FCW || kind == P_FCPROJW;
}
/* Elements of one tensor of kind (one layer's slice for per-layer kinds). */
size_t vkm_gpt_kind_size(const vka_gpt_config *cfg, gpt_param_kind kind);
const char *vkm_gpt_kind_name(gpt_param_kind kind);
/* The kind of parameter tensor i. */
gpt_param_kind vkm_gpt_tensor_kind(int L, int i, int *layer);

/* What is wrong with a configuration, if anything (sizes positive, C % NH == 0, V <= Vp,
 * nothing absurdly large): the result code, with the problem written to msg. Vp 0 is filled
 * in (V rounded up to a multiple of 128). */
vka_result vkm_gpt_config_problem(vka_gpt_config *cfg, char *msg, size_t cap);
/* Parameters of a model of this configuration (Vp resolved): the sum over llm.c's tensors. */
uint64_t vkm_gpt_config_num_params(const vka_gpt_config *cfg);
/* A model with the parameter arena only; init: GPT-2 initialisation from seed, else zeros. */
vka_result vkm_gpt_new(vka_context *ctx, const vka_gpt_config *cfg, bool init, uint64_t seed,
                   vka_gpt **out);
/* Create an arena after checking each tensor against the device's largest tensor and the
 * whole against its memory, so a message names the tensor and the limit (hint: how to need
 * less). Device arenas count into gpt->arena_bytes. */
vka_result vkm_gpt_make_arena(vka_gpt *gpt, const char *label, vkb_arena_kind kind,
                          const size_t *sizes, const char *const *names, int count,
                          vkb_tensor *tensors, vkb_arena **out, const char *hint);
/* Destroy *arena (if any) of bytes device bytes and set it NULL. */
void vkm_gpt_destroy_arena(vka_gpt *gpt, vkb_arena **arena, uint64_t bytes);
uint64_t vkm_gpt_sum_bytes(const size_t *sizes, size_t n);
/* Destroy the recorded graphs and the activation and host arenas. */
void vkm_gpt_free_run_arenas(vka_gpt *gpt);
/* Create the gradient arena / the AdamW m and v arenas if missing (zero-filled). */
vka_result vkm_gpt_ensure_grads(vka_gpt *gpt);
vka_result vkm_gpt_ensure_opt(vka_gpt *gpt);
/* Make the activation and host arenas hold shape (recreating them, and dropping every graph,
 * if they grow). */
vka_result vkm_gpt_reserve(vka_gpt *gpt, const gpt_shape *shape);
/* Copy a tensor set (params, grads, m or v) out of / into n floats in checkpoint order. */
vka_result vkm_gpt_read_set(vka_gpt *gpt, const vkb_tensor *set, float *out);
vka_result vkm_gpt_write_set(vka_gpt *gpt, const vkb_tensor *set, const float *in);

/* Run the graph of kind for (B, T) (G_TRAIN: with grad_clip and weight_decay), recording it
 * on first use (gpt_train.c). The arenas must already hold the shape (vkm_gpt_reserve). */
vka_result vkm_gpt_run(vka_gpt *gpt, gpt_graph_kind kind, int B, int T, float grad_clip,
                   float weight_decay);
/* B, T positive, T <= max_T, within int ranges; fn names the caller in the message. */
vka_result vkm_gpt_check_shape(vka_gpt *gpt, const char *fn, int B, int T);
/* Every id in [0, V); T > 0 names a bad one as what[b][t], else what[i]. */
vka_result vkm_gpt_check_ids(vka_gpt *gpt, const char *fn, const char *what, const int32_t *ids,
                         size_t n, int T);

/* Record ops (gpt_graph.c). Inputs and targets are read from the host arena. */
/* Forward to lnf (the head is vkm_gpt_record_head); train keeps every layer's activations for
 * backward. */
void vkm_gpt_record_forward(vka_gpt *gpt, int B, int T, bool train);
/* The blocks of the LM head (gpt_head above): logits of each block (keep: into its own logit
 * tensor, else all into logits[0]); loss: cross-entropy into acts.losses; backward: the head's
 * backward too (dlnf into acts.dln, dwte accumulated; needs the train forward). */
void vkm_gpt_record_head(vka_gpt *gpt, int B, int T, bool keep, bool loss, bool backward);
/* Whether one view of n floats (at any offset) fits a binding of gpt's backend. */
static inline bool vkm_gpt_binds(const vka_gpt *gpt, uint64_t n) {
    return (n + 2 * VKB_TENSOR_ALIGN) * 4 <= gpt->be->limits.max_binding_bytes;
}
/* Whether passes of sequences of T positions use the fused attention op: the model's choice,
 * and the op can bind one sequence's qkv (T, 3C) whole (the Vulkan op splits over whole
 * sequences; any device's limit, >= 128 MiB, holds T*3C floats up to T*C = 11 M, but a test's
 * lowered binding limit may not): otherwise the composed ops, which split further. */
static inline bool vkm_gpt_fused(const vka_gpt *gpt, int T) {
    return gpt->attention == VKA_ATTENTION_FUSED &&
           vkm_gpt_binds(gpt, (uint64_t)T * 3 * (uint64_t)gpt->cfg.C);
}
/* How vkm_gpt_record_head splits B*T positions (keep: every block kept). */
gpt_head vkm_gpt_head_plan(const vka_gpt *gpt, size_t BT, bool keep);
/* Bytes a logit takes: 4, or 2 in mixed precision (the head writes 16-bit logits). */
unsigned vkm_gpt_logit_bytes(const vka_gpt *gpt);
/* Mean loss to host.loss, and (copy_losses) per-position losses to host.losses. */
void vkm_gpt_record_loss(vka_gpt *gpt, int B, int T, bool copy_losses);
void vkm_gpt_record_zero_grads(vka_gpt *gpt);
/* Backward after a train forward and the head's backward: accumulates into the (zeroed)
 * gradients. */
void vkm_gpt_record_backward(vka_gpt *gpt, int B, int T);
/* Grad norm (clip) and AdamW with host.hyper; norm and clip scale copied to host.norm. */
void vkm_gpt_record_update(vka_gpt *gpt, float grad_clip, float weight_decay);
/* Forward of one sequence of T tokens, its logits (T, Vp) copied to host.logits. */
void vkm_gpt_record_sample(vka_gpt *gpt, int T);

/* Mixed precision (gpt_mixed.c). The 16-bit copies: wte's at index 0, then each layer's qkvw,
 * attprojw, fcw, fcprojw; vkm_gpt_w16_index: the copy of a parameter (-1: none). */
int vkm_gpt_w16_count(const vka_gpt *gpt);
int vkm_gpt_w16_index(gpt_param_kind kind, int l);
/* n 16-bit elements of dtype over the 32-bit words of t (from its start). */
vkb_tensor vkm_gpt_view16(vkb_tensor words, uint8_t dtype, size_t n);
/* Record the rounding of n elements of src into scratch's words, viewed in gpt's precision;
 * returns that view (a product's 16-bit input). */
vkb_tensor vkm_gpt_round16(vka_gpt *gpt, vkb_tensor scratch, vkb_tensor src, size_t n);
/* The parameters were written from the host: the 16-bit copies are refreshed before the next
 * pass. */
static inline void vkm_gpt_params_changed(vka_gpt *gpt) { gpt->w16_fresh = false; }
/* Make the copies (first use) and refresh them if stale: one small graph, run at once. */
vka_result vkm_gpt_refresh16(vka_gpt *gpt);
/* Record the copies' refresh from the parameters (a training step's graph, after AdamW). */
void vkm_gpt_record_refresh16(vka_gpt *gpt);
void vkm_gpt_free_w16(vka_gpt *gpt);
/* Loss scaling: the precision's default (on for fp16); after a step's run, its outcome (norm:
 * the unscaled gradient norm it read back): false = skipped (overflow), S halved. */
#define GPT_LOSS_SCALE_FP16 65536.0f   /* PyTorch's GradScaler's init_scale */
#define GPT_LOSS_SCALE_INTERVAL 2000   /* its growth_interval */
#define GPT_LOSS_SCALE_MIN 0x1p-24f
#define GPT_LOSS_SCALE_MAX 0x1p24f
void vkm_gpt_scale_default(vka_gpt *gpt);
bool vkm_gpt_scale_step(vka_gpt *gpt, float norm);

/* A session of gpt was destroyed: count it down, and free a model whose destroy waited for it. */
void vkm_gpt_session_released(vka_gpt *gpt);
/* Next token from logits (V): argmax when s->temperature is 0, else drawn from
 * softmax(logits / temperature) over the top_k most likely (all if 0) with *rng (advanced).
 * cand: scratch of 2*V floats' worth (V entries of (float, int32)). (gpt_generate.c) */
int32_t vkm_sample_token(const float *logits, int V, const vka_sample_desc *s, uint64_t *rng,
                         void *cand);
/* VKA_ERROR_NOT_FINITE, naming fn, the generation step (if >= 0), the position pos and the
 * first bad token, when a logit of logits (V) is NaN or infinite. (gpt_generate.c) */
vka_result vkm_check_logits(vka_gpt *gpt, const char *fn, const float *logits, int V, int step,
                            size_t pos);

#endif
