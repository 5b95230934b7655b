/*
 * Model and training-state files.
 *
 * Model checkpoint: llm.c's GPT-2 format (train_gpt2.c gpt2_build_from_checkpoint), version 3:
 *   int32 header[256] = {20240326, 3, maxT, V, L, NH, C, Vp, 0...}
 *   then float32 parameters in llm.c order (vka_gpt_load's docstring), num_params of them;
 * or version 5 (llm.c's train_gpt2.cu and train_gpt2.py write_model "bfloat16"): the same
 *   header with 5 in word 1, then the parameters as bf16, 2 bytes each (the top half of the
 *   float32, rounded to nearest even), num_params of them. They load widened to float32, exactly.
 * vkattn also fills the last 8 header words, which llm.c leaves 0 and never reads ("the
 * trailer", below); a file without its mark must have 0 in every word from 8 on, as llm.c
 * writes it.
 *
 * Training state (vka_gpt_save_state), our format, version 7. Little-endian as the host writes
 * it. A 1024-byte header of 256 uint32 words:
 *   [0]      magic 0x53414B56 (the bytes "VKAS")
 *   [1]      version 7 (still read: version 6, the same without word 118; version 5, also
 *            without words 112..117; version 4, also
 *            without words 39..111; version 3, also
 *            without the trailer; version 2, also without words 34..38; version 1, also without
 *            word 31)
 *   [2..7]   maxT, V, L, NH, C, Vp
 *   [8..9]   the model's AdamW step t (uint64, low word first; likewise below)
 *   [10..11] state.step          [12..13] state.rng_state
 *   [14..15] state.seed          [16..17] state.total_steps
 *   [18] state.B  [19] state.T   [20] state.lr (float32 bits)  [21] state.min_lr
 *   [22] state.warmup_steps      [23] state.eval_every
 *   [24..29] state.adamw: lr, beta1, beta2, eps, weight_decay, grad_clip (float32 bits)
 *   [30] state.best_val_loss (float32 bits; NaN = none)
 *   [31] state.eval_windows (int32; version 1 wrote 0 here and reads back as -1, "not recorded")
 *   [32..33] checksum of the payload: h = 0xCBF29CE484222325, then for every uint32 word w of
 *            the payload h = (h ^ w) * 0x100000001B3 (FNV-1a's constants, per word)
 *   [34..35] state.text_bytes    [36..37] state.text_hash (vka_data_text_id; versions 1 and 2
 *            wrote 0 there and read back as 0, "not recorded")
 *   [38] state.eval_pending (int32; read as 0 from versions 1 and 2)
 *   [39] state.run_backend (vka_backend: 0 Vulkan, 1 CPU)  [40..47] state.run_kernels (32
 *            bytes, NUL-padded)  [48..111] state.run_device (256 bytes, NUL-padded): where the
 *            steps ran, from the model's context at the save (version 5; earlier versions wrote
 *            0 there and read back as run_recorded = 0, "not recorded")
 *   [112] state.run_precision (vka_dtype: 0 fp32, 1 bf16, 2 fp16; the model's at the save)
 *   [113] loss scaling flags (bit 0 on, bit 1 the precision's default)  [114] S (float32 bits,
 *            a power of two in [2^-24, 2^24])  [115] clean steps since S changed
 *   [116..117] skipped steps (words 112..117: version 6; earlier versions wrote 0 there and
 *            read back as fp32 with the default scaling)
 *   [118] state.adamw.grad_accum (int32, 0 or 1: none; version 7; earlier versions wrote 0
 *            there and read back as 1)
 *   [248..255] the trailer (versions 4 and 5, where it is required)
 *   others 0
 * then the payload: parameters, AdamW m, AdamW v, each num_params float32 in llm.c order.
 *
 * The trailer, header words [248..255] of a model or state file that vkattn writes:
 *   [248..249] the id of the tokenizer the model was trained with (vka_tokenizer_id), 0 = none
 *   [250..251] the parameters' hash: FNV-1a per word as above, over the parameters alone (a
 *              state and a model saved together hold the same value)
 *   [252] mark 0x58414B56 (the bytes "VKAX")  [253] trailer version 1  [254] 0
 *   [255] header checksum: FNV-1a 32 (basis 0x811C9DC5, prime 0x01000193) over the 1020 bytes
 *         of words [0..254]
 * Loading checks, before allocating anything: magic, version, the trailer (checksum; or, where
 * there is none, zeros in every unused word), the configuration, every field of a state against
 * the others (B, T <= maxT, step <= total_steps, warm-up, rates, AdamW settings), then the file
 * length; then, while reading, finite values and the payload's hashes. A damaged file is
 * reported instead of silently resuming from garbage.
 */
#include "model/fileio.h"
#include "model/gpt_internal.h"
#include "model/tokenizer.h"

#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define HEADER_WORDS 256
#define HEADER_BYTES (HEADER_WORDS * 4)
#define MODEL_MAGIC 20240326
#define MODEL_VERSION 3      /* float32 parameters */
#define MODEL_VERSION_BF16 5 /* bf16 parameters (llm.c's); 4 was never a model version */
#define STATE_MAGIC 0x53414B56u
#define STATE_VERSION 7
#define STATE_OLDEST_VERSION 1 /* 1: without eval_windows; 1 and 2: without the text's identity
                                  and eval_pending; 1 to 3: without the trailer; 1 to 4: without
                                  the backend the steps ran on */
/* The trailer (see above). */
#define TRAILER_TOKENIZER 248
#define TRAILER_PARAMS 250
#define TRAILER_MARK 252
#define TRAILER_VERSION 253
#define TRAILER_SUM 255
#define TRAILER_MAGIC 0x58414B56u
/* Header words a model file uses before the trailer ([0..7]); a state ([0..111]; versions 1 to
 * 4 used fewer, but what their later words hold is ignored, so only the words no version used
 * must be 0). */
#define MODEL_USED_WORDS 8
#define STATE_USED_WORDS 119
/* Where a state records the backend its steps ran on (version 5). */
#define STATE_RUN_BACKEND 39
#define STATE_RUN_KERNELS 40
#define STATE_RUN_DEVICE 48
#define STATE_RUN_VERSION 5
/* The model's precision at the save (vka_gpt_set_precision; version 6), and its loss scaling:
 * [113] flags (bit 0: on, bit 1: the precision's default), [114] S (float32 bits), [115] clean
 * steps since S changed, [116..117] skipped steps. */
#define STATE_RUN_PRECISION 112
#define STATE_SCALE_FLAGS 113
#define STATE_SCALE 114
#define STATE_SCALE_GOOD 115
#define STATE_SKIPPED 116
#define STATE_PRECISION_VERSION 6
/* Micro-batches per step (vka_adamw_desc.grad_accum; version 7). */
#define STATE_GRAD_ACCUM 118
#define STATE_GRAD_ACCUM_VERSION 7
#define HASH_SEED 0xCBF29CE484222325ull
#define HASH_PRIME 0x100000001B3ull

static uint64_t hash_words(uint64_t h, const float *data, size_t n) {
    for (size_t i = 0; i < n; i++) {
        uint32_t w;
        memcpy(&w, &data[i], 4);
        h = (h ^ w) * HASH_PRIME;
    }
    return h;
}

static uint32_t f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}
static float bits_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static void put_u64(uint32_t *h, int i, uint64_t v) {
    h[i] = (uint32_t)v;
    h[i + 1] = (uint32_t)(v >> 32);
}
static uint64_t get_u64(const uint32_t *h, int i) {
    return (uint64_t)h[i] | ((uint64_t)h[i + 1] << 32);
}

/* FNV-1a 32 over the bytes of header words [0..254]. */
static uint32_t header_sum(const uint32_t *h) {
    const unsigned char *b = (const unsigned char *)h;
    uint32_t s = 0x811C9DC5u;
    for (size_t i = 0; i < 4 * TRAILER_SUM; i++) s = (s ^ b[i]) * 0x01000193u;
    return s;
}

/* Fill the trailer; the header's other words must be final. */
static void put_trailer(uint32_t *h, uint64_t tokenizer_id, uint64_t params_hash) {
    put_u64(h, TRAILER_TOKENIZER, tokenizer_id);
    put_u64(h, TRAILER_PARAMS, params_hash);
    h[TRAILER_MARK] = TRAILER_MAGIC;
    h[TRAILER_VERSION] = 1;
    h[254] = 0;
    h[TRAILER_SUM] = header_sum(h);
}

/* The trailer of a header whose words [used .. 247] are unused (0): its checksum and its
 * version, or, without the mark (an llm.c file, an older state; required: a state of version
 * 4), zeros in every word from used on. *has_trailer says which. */
static vka_result check_trailer(vka_context *ctx, const char *path, const uint32_t *h, int used,
                                bool required, bool *has_trailer) {
    *has_trailer = h[TRAILER_MARK] == TRAILER_MAGIC;
    int end = *has_trailer ? TRAILER_TOKENIZER : HEADER_WORDS;
    if (*has_trailer) {
        uint32_t sum = header_sum(h);
        if (sum != h[TRAILER_SUM])
            return vka_set_error(ctx, VKA_ERROR_FORMAT, "%s: the header is damaged: its checksum "
                                 "(word %d) is %08" PRIX32 " but its words give %08" PRIX32, path,
                                 TRAILER_SUM, h[TRAILER_SUM], sum);
        if (h[TRAILER_VERSION] != 1 || h[254] != 0)
            return vka_set_error(ctx, VKA_ERROR_FORMAT, "%s: header trailer version %" PRIu32
                                 " is not supported (expected 1)", path, h[TRAILER_VERSION]);
    } else if (required) {
        return vka_set_error(ctx, VKA_ERROR_FORMAT, "%s: the header is damaged: version %" PRIu32
                             " has the mark 0x%08" PRIX32 " in word %d, but word %d is 0x%08"
                             PRIX32, path, h[1], TRAILER_MAGIC, TRAILER_MARK, TRAILER_MARK,
                             h[TRAILER_MARK]);
    }
    for (int i = used; i < end; i++)
        if (h[i] != 0)
            return vka_set_error(ctx, VKA_ERROR_FORMAT, "%s: the header is damaged: unused word "
                                 "%d is 0x%08" PRIX32 " (written as 0)%s", path, i, h[i],
                                 *has_trailer ? "" : "; the file has no header checksum, so it "
                                 "was written by llm.c or an older vkattn");
    return VKA_SUCCESS;
}

/* The configuration in header words [2..7], checked; errors are VKA_ERROR_FORMAT naming path. */
static vka_result header_config(vka_context *ctx, const char *path, const uint32_t *h,
                                vka_gpt_config *cfg) {
    *cfg = (vka_gpt_config){.max_T = (int32_t)h[2], .V = (int32_t)h[3], .L = (int32_t)h[4],
                            .NH = (int32_t)h[5], .C = (int32_t)h[6], .Vp = (int32_t)h[7]};
    if (cfg->Vp <= 0)
        return vka_set_error(ctx, VKA_ERROR_FORMAT, "%s: Vp = %d in the header is not positive",
                             path, cfg->Vp);
    char msg[256];
    if (vkm_gpt_config_problem(cfg, msg, sizeof msg) != VKA_SUCCESS)
        return vka_set_error(ctx, VKA_ERROR_FORMAT, "%s: bad header: %s", path, msg);
    return VKA_SUCCESS;
}

/* What the file is instead (CLI users read these too: no API names). */
static const char *magic_hint(uint32_t magic) {
    if (magic == MODEL_MAGIC) return ": this is a model checkpoint, not a training state";
    if (magic == STATE_MAGIC) return ": this is a training state, not a model checkpoint";
    if (magic == VKM_TOKENIZER_MAGIC) return ": this is a tokenizer file";
    return "";
}

static void put_state(uint32_t *h, uint64_t model_step, const vka_train_state *s) {
    put_u64(h, 8, model_step);
    put_u64(h, 10, s->step);
    put_u64(h, 12, s->rng_state);
    put_u64(h, 14, s->seed);
    put_u64(h, 16, s->total_steps);
    h[18] = (uint32_t)s->B;
    h[19] = (uint32_t)s->T;
    h[20] = f32_bits(s->lr);
    h[21] = f32_bits(s->min_lr);
    h[22] = (uint32_t)s->warmup_steps;
    h[23] = (uint32_t)s->eval_every;
    const float adamw[6] = {s->adamw.lr, s->adamw.beta1, s->adamw.beta2, s->adamw.eps,
                            s->adamw.weight_decay, s->adamw.grad_clip};
    for (int i = 0; i < 6; i++) h[24 + i] = f32_bits(adamw[i]);
    h[30] = f32_bits(s->best_val_loss);
    h[31] = (uint32_t)s->eval_windows;
    put_u64(h, 34, s->text_bytes);
    put_u64(h, 36, s->text_hash);
    h[38] = (uint32_t)s->eval_pending;
    h[STATE_GRAD_ACCUM] = (uint32_t)s->adamw.grad_accum;
}

/* Where the steps ran: ctx's backend, kernels and device (words 39..111, NUL-padded text). */
static void put_run(uint32_t *h, const vka_context *ctx) {
    vka_backend backend = vka_context_backend(ctx);
    const char *kernels = backend == VKA_BACKEND_CPU ? vka_context_cpu_kernels(ctx)
                                                     : vka_context_vulkan_kernels(ctx);
    vka_device_info info;
    if (vka_context_selected_device(ctx, &info) != VKA_SUCCESS) info.name[0] = '\0';
    char k[VKA_TRAIN_RUN_KERNELS_BYTES] = {0}, d[VKA_TRAIN_RUN_DEVICE_BYTES] = {0};
    snprintf(k, sizeof k, "%s", kernels ? kernels : "");
    snprintf(d, sizeof d, "%s", info.name);
    h[STATE_RUN_BACKEND] = (uint32_t)backend;
    memcpy(h + STATE_RUN_KERNELS, k, sizeof k);
    memcpy(h + STATE_RUN_DEVICE, d, sizeof d);
}

/* The precision the steps ran in (word 112). */
static void put_precision(uint32_t *h, const vka_gpt *gpt) {
    h[STATE_RUN_PRECISION] = (uint32_t)gpt->precision;
    h[STATE_SCALE_FLAGS] = (gpt->scaling ? 1u : 0u) | (gpt->scale_default ? 2u : 0u);
    h[STATE_SCALE] = f32_bits(gpt->loss_scale);
    h[STATE_SCALE_GOOD] = gpt->scale_good;
    put_u64(h, STATE_SKIPPED, gpt->skipped);
}

static void get_state(const uint32_t *h, vka_train_state *s) {
    *s = (vka_train_state){0};
    s->step = get_u64(h, 10);
    s->rng_state = get_u64(h, 12);
    s->seed = get_u64(h, 14);
    s->total_steps = get_u64(h, 16);
    s->B = (int32_t)h[18];
    s->T = (int32_t)h[19];
    s->lr = bits_f32(h[20]);
    s->min_lr = bits_f32(h[21]);
    s->warmup_steps = (int32_t)h[22];
    s->eval_every = (int32_t)h[23];
    s->adamw = (vka_adamw_desc){bits_f32(h[24]), bits_f32(h[25]), bits_f32(h[26]),
                                bits_f32(h[27]), bits_f32(h[28]), bits_f32(h[29]), 0};
    s->best_val_loss = bits_f32(h[30]);
    s->eval_windows = h[1] >= 2 ? (int32_t)h[31] : -1;
    if (h[1] >= 3) {
        s->text_bytes = get_u64(h, 34);
        s->text_hash = get_u64(h, 36);
        s->eval_pending = (int32_t)h[38];
    }
    if (h[1] >= STATE_RUN_VERSION) {
        s->run_recorded = 1;
        s->run_backend = (vka_backend)h[STATE_RUN_BACKEND];
        memcpy(s->run_kernels, h + STATE_RUN_KERNELS, sizeof s->run_kernels);
        memcpy(s->run_device, h + STATE_RUN_DEVICE, sizeof s->run_device);
        s->run_kernels[sizeof s->run_kernels - 1] = '\0';
        s->run_device[sizeof s->run_device - 1] = '\0';
    }
    bool v6 = h[1] >= STATE_PRECISION_VERSION;
    s->run_precision = v6 ? (vka_dtype)h[STATE_RUN_PRECISION] : VKA_F32;
    s->loss_scaling = v6 ? (int32_t)(h[STATE_SCALE_FLAGS] & 1u) : 0;
    s->loss_scale_default = v6 ? (int32_t)(h[STATE_SCALE_FLAGS] >> 1 & 1u) : 1;
    s->loss_scale = v6 ? bits_f32(h[STATE_SCALE]) : 1.0f;
    s->loss_scale_good = v6 ? h[STATE_SCALE_GOOD] : 0;
    s->skipped_steps = v6 ? get_u64(h, STATE_SKIPPED) : 0;
    s->adamw.grad_accum = h[1] >= STATE_GRAD_ACCUM_VERSION ? (int32_t)h[STATE_GRAD_ACCUM] : 1;
}

/* What is wrong with a training state for a model of configuration c, if anything: every field
 * in its range and against the others. Written to msg; false if nothing. */
static bool state_problem(const vka_train_state *s, const vka_gpt_config *c, char *msg,
                          size_t cap) {
    const vka_adamw_desc *a = &s->adamw;
    if (s->T < 1 || s->T > c->max_T)
        snprintf(msg, cap, "T = %d is outside 1..%d (the model's maxT)", s->T, c->max_T);
    else if (a->grad_accum < 0 || a->grad_accum > VKA_GPT_MAX_GRAD_ACCUM)
        snprintf(msg, cap, "grad_accum = %d is outside 0..%d", a->grad_accum,
                 VKA_GPT_MAX_GRAD_ACCUM);
    else if (s->B < 1 || (int64_t)s->B * s->T > VKA_TRAIN_MAX_BT ||
             (int64_t)s->B * s->T * c->NH > INT32_MAX)
        snprintf(msg, cap, "B = %d is outside 1..%d (at most %d tokens per step with T = %d, "
                 "and B*NH*T within int32)", s->B, VKA_TRAIN_MAX_BT / s->T, VKA_TRAIN_MAX_BT,
                 s->T);
    else if ((int64_t)s->B * s->T * VKA_MAX(a->grad_accum, 1) > VKA_TRAIN_MAX_BT)
        snprintf(msg, cap, "B = %d x T = %d x grad_accum = %d is more than %d tokens per step",
                 s->B, s->T, a->grad_accum, VKA_TRAIN_MAX_BT);
    else if (s->total_steps < 1 || s->total_steps > VKA_TRAIN_MAX_STEPS)
        snprintf(msg, cap, "total_steps = %" PRIu64 " is outside 1..%" PRIu64, s->total_steps,
                 (uint64_t)VKA_TRAIN_MAX_STEPS);
    else if (s->step > s->total_steps)
        snprintf(msg, cap, "step %" PRIu64 " is past total_steps = %" PRIu64, s->step,
                 s->total_steps);
    else if (s->warmup_steps < 0 || (uint64_t)s->warmup_steps > s->total_steps)
        snprintf(msg, cap, "warmup_steps = %d is outside 0..total_steps = %" PRIu64,
                 s->warmup_steps, s->total_steps);
    else if (s->eval_every < 0 || s->eval_windows < -1 || (s->eval_pending & ~1))
        snprintf(msg, cap, "eval_every = %d, eval_windows = %d or eval_pending = %d is out of "
                 "range (>= 0, >= 0 and 0 or 1)", s->eval_every, s->eval_windows,
                 s->eval_pending);
    else if (!(s->lr >= 0.0f && isfinite(s->lr)) || !(s->min_lr >= 0.0f && s->min_lr <= s->lr))
        snprintf(msg, cap, "lr = %g and min_lr = %g are not 0 <= min_lr <= lr (finite)",
                 (double)s->lr, (double)s->min_lr);
    else if (!(a->beta1 >= 0.0f && a->beta1 < 1.0f) || !(a->beta2 >= 0.0f && a->beta2 < 1.0f) ||
             !(a->eps > 0.0f && isfinite(a->eps)) || !isfinite(a->lr) ||
             !(a->weight_decay >= 0.0f && isfinite(a->weight_decay)) ||
             !(a->grad_clip >= 0.0f && isfinite(a->grad_clip)))
        snprintf(msg, cap, "the AdamW settings are out of range (beta1 = %g, beta2 = %g in "
                 "[0, 1); eps = %g > 0; weight_decay = %g, grad_clip = %g >= 0; all finite)",
                 (double)a->beta1, (double)a->beta2, (double)a->eps, (double)a->weight_decay,
                 (double)a->grad_clip);
    else if (!isnan(s->best_val_loss) && !(s->best_val_loss >= 0.0f && isfinite(s->best_val_loss)))
        snprintf(msg, cap, "best_val_loss = %g is neither NaN (none) nor a finite loss",
                 (double)s->best_val_loss);
    else
        return false;
    return true;
}

/* The state fields of header h, checked against each other and the model's configuration. */
static vka_result check_state_header(vka_context *ctx, const char *path, const uint32_t *h,
                                     const vka_gpt_config *cfg) {
    vka_train_state s;
    get_state(h, &s);
    char msg[320];
    if (get_u64(h, 8) > VKA_TRAIN_MAX_STEPS)
        return vka_set_error(ctx, VKA_ERROR_FORMAT, "%s: bad training-state header: the model's "
                             "AdamW step t = %" PRIu64 " (words 8..9) is beyond %llu", path,
                             get_u64(h, 8), (unsigned long long)VKA_TRAIN_MAX_STEPS);
    if (state_problem(&s, cfg, msg, sizeof msg))
        return vka_set_error(ctx, VKA_ERROR_FORMAT, "%s: bad training-state header: %s", path,
                             msg);
    /* The recorded backend and its texts, NUL-terminated within their words. */
    const unsigned char *k = (const unsigned char *)(h + STATE_RUN_KERNELS),
                        *d = (const unsigned char *)(h + STATE_RUN_DEVICE);
    if (h[1] >= STATE_RUN_VERSION &&
        (h[STATE_RUN_BACKEND] > VKA_BACKEND_CPU || k[VKA_TRAIN_RUN_KERNELS_BYTES - 1] != 0 ||
         d[VKA_TRAIN_RUN_DEVICE_BYTES - 1] != 0))
        return vka_set_error(ctx, VKA_ERROR_FORMAT, "%s: bad training-state header: the "
                             "backend the run was on (words %d..%d) is not a backend (word %d is "
                             "%" PRIu32 ", 0 or 1) with its kernels' and device's names", path,
                             STATE_RUN_BACKEND, STATE_USED_WORDS - 1, STATE_RUN_BACKEND,
                             h[STATE_RUN_BACKEND]);
    float S = bits_f32(h[STATE_SCALE]);
    int e;
    uint32_t fl = h[STATE_SCALE_FLAGS];
    bool on = fl & 1u, by_default = fl & 2u, fp16 = h[STATE_RUN_PRECISION] == (uint32_t)VKA_F16;
    if (h[1] >= STATE_PRECISION_VERSION &&
        (fl > 3u || !(S >= 0x1p-24f && S <= 0x1p24f) || frexpf(S, &e) != 0.5f ||
         (!on && S != 1.0f) || (by_default && on != fp16) ||
         h[STATE_SCALE_GOOD] >= GPT_LOSS_SCALE_INTERVAL))
        return vka_set_error(ctx, VKA_ERROR_FORMAT, "%s: bad training-state header: the loss "
                             "scaling (words %d..%d: flags %" PRIu32 ", S %g, clean steps %" PRIu32
                             ") is not a power of two in [2^-24, 2^24] (1 when off; on by default "
                             "for fp16 only) with flags 0..3 and fewer than %d clean steps", path,
                             STATE_SCALE_FLAGS, STATE_SKIPPED + 1, h[STATE_SCALE_FLAGS], (double)S,
                             h[STATE_SCALE_GOOD], GPT_LOSS_SCALE_INTERVAL);
    if (h[STATE_RUN_PRECISION] > (h[1] >= STATE_PRECISION_VERSION ? (uint32_t)VKA_F16 : 0u))
        return vka_set_error(ctx, VKA_ERROR_FORMAT, "%s: bad training-state header: the "
                             "precision the run was in (word %d) is %" PRIu32 ", not 0 (fp32), "
                             "1 (bf16) or 2 (fp16)%s", path, STATE_RUN_PRECISION, h[STATE_RUN_PRECISION],
                             h[1] >= STATE_PRECISION_VERSION ? "" : ", and must be 0 before "
                             "version 6");
    return VKA_SUCCESS;
}

/* Open path and read and check its header: magic, a version in [oldest, version], config, and
 * a length of exactly the header plus sets * num_params floats. */
static vka_result open_checked(vka_context *ctx, const char *path, uint32_t magic,
                               uint32_t oldest, uint32_t version, int sets, FILE **f, uint32_t *h,
                               vka_gpt_config *cfg, bool *has_trailer) {
    uint64_t size;
    vka_result r = vkm_open_read(ctx, path, f, &size);
    if (r != VKA_SUCCESS) return r;
    const char *kind = magic == MODEL_MAGIC ? "an llm.c GPT-2 checkpoint" : "a vkattn training state";
    if (size < HEADER_BYTES) {
        r = vka_set_error(ctx, VKA_ERROR_FORMAT,
                          "%s is %" PRIu64 " bytes, shorter than the %d-byte header of %s", path,
                          size, HEADER_BYTES, kind);
        goto fail;
    }
    r = vkm_read_exact(ctx, *f, path, h, HEADER_BYTES, "the header");
    if (r != VKA_SUCCESS) goto fail;
    if (h[0] != magic) {
        r = vka_set_error(ctx, VKA_ERROR_FORMAT, "%s: wrong magic %" PRId32 " (0x%08" PRIX32
                          "), expected %" PRIu32 " for %s%s",
                          path, (int32_t)h[0], h[0], magic, kind, magic_hint(h[0]));
        goto fail;
    }
    bool model_bf16 = magic == MODEL_MAGIC && h[1] == MODEL_VERSION_BF16;
    if (magic == MODEL_MAGIC ? h[1] != MODEL_VERSION && !model_bf16
                             : h[1] < oldest || h[1] > version) {
        if (magic == MODEL_MAGIC)
            r = vka_set_error(ctx, VKA_ERROR_FORMAT, "%s: version %" PRId32 " is not supported "
                              "(expected %d, float32, or %d, bfloat16)", path, (int32_t)h[1],
                              MODEL_VERSION, MODEL_VERSION_BF16);
        else
            r = vka_set_error(ctx, VKA_ERROR_FORMAT, "%s: version %" PRId32 " is not supported "
                              "(expected %s%" PRIu32 ")", path, (int32_t)h[1],
                              oldest < version ? "at most " : "", version);
        goto fail;
    }
    bool state = magic == STATE_MAGIC;
    r = check_trailer(ctx, path, h, state ? STATE_USED_WORDS : MODEL_USED_WORDS,
                      state && h[1] >= 4, has_trailer);
    if (r == VKA_SUCCESS) r = header_config(ctx, path, h, cfg);
    if (r == VKA_SUCCESS && state) r = check_state_header(ctx, path, h, cfg);
    if (r != VKA_SUCCESS) goto fail;
    uint64_t n = vkm_gpt_config_num_params(cfg);
    uint64_t want = HEADER_BYTES + (uint64_t)sets * n * (model_bf16 ? 2 : 4);
    if (size != want) {
        r = vka_set_error(ctx, VKA_ERROR_FORMAT,
                          "%s is %" PRIu64 " bytes but its header (maxT=%d V=%d L=%d NH=%d C=%d "
                          "Vp=%d) implies %" PRIu64 " bytes (%d-byte header + %d x %" PRIu64
                          " %s): %s",
                          path, size, cfg->max_T, cfg->V, cfg->L, cfg->NH, cfg->C, cfg->Vp, want,
                          HEADER_BYTES, sets, n, model_bf16 ? "bf16 values (version 5)" : "floats",
                          size < want ? "the file is truncated" : "it has trailing data");
        goto fail;
    }
    return VKA_SUCCESS;
fail:
    fclose(*f);
    *f = NULL;
    return r;
}

/* A NaN or infinity in tensor i of the file's set `what` (named when the file has several)
 * is an error: such a model only gives NaN losses and garbage text. */
static vka_result check_finite(vka_gpt *gpt, const char *path, const char *what, int i,
                               const float *x, size_t n) {
    size_t j = 0;
    while (j < n && isfinite(x[j])) j++;
    if (j == n) return VKA_SUCCESS;
    int layer;
    gpt_param_kind kind = vkm_gpt_tensor_kind(gpt->cfg.L, i, &layer);
    char of_layer[32] = "";
    if (gpt_kind_per_layer(kind)) snprintf(of_layer, sizeof of_layer, " of layer %d", layer);
    return vka_set_error(gpt->ctx, VKA_ERROR_FORMAT,
                         "%s: %s%s%s[%zu]%s is %s (the file is damaged, or was saved after "
                         "training diverged)",
                         path, what ? what : "", what ? ": " : "", vkm_gpt_kind_name(kind), j,
                         of_layer, isnan(x[j]) ? "NaN" : x[j] > 0 ? "+Inf" : "-Inf");
}

/* Stream count tensor sets (each num_params floats, or bf16 values widened to float32 where
 * bf16) from f into the model, hashing them (as float32): *hash over all, *params_hash over the
 * first set alone. */
static vka_result read_sets(vka_gpt *gpt, FILE *f, const char *path, vkb_tensor *const *sets,
                            const char *const *what, int count, bool bf16, uint64_t *hash,
                            uint64_t *params_hash) {
    size_t max = 0;
    for (int i = 0; i < gpt->n_tensors; i++) max = VKA_MAX(max, gpt->tensor_sizes[i]);
    float *buf = vka_malloc(gpt->ctx, max * sizeof *buf);
    uint16_t *words = bf16 ? vka_malloc(gpt->ctx, max * sizeof *words) : NULL;
    if (!buf || (bf16 && !words)) {
        vka_free(gpt->ctx, buf);
        return vka_set_error(gpt->ctx, VKA_ERROR_OUT_OF_HOST_MEMORY, "%s: out of memory", path);
    }
    vka_result r = VKA_SUCCESS;
    for (int s = 0; s < count && r == VKA_SUCCESS; s++) {
        for (int i = 0; i < gpt->n_tensors && r == VKA_SUCCESS; i++) {
            size_t n = gpt->tensor_sizes[i];
            if (bf16) {
                r = vkm_read_exact(gpt->ctx, f, path, words, n * sizeof *words, what[s]);
                if (r == VKA_SUCCESS) r = vka_convert(VKA_F32, buf, VKA_BF16, words, n);
            } else {
                r = vkm_read_exact(gpt->ctx, f, path, buf, n * sizeof *buf, what[s]);
            }
            if (r == VKA_SUCCESS)
                r = check_finite(gpt, path, count > 1 ? what[s] : NULL, i, buf, n);
            if (r == VKA_SUCCESS) r = gpt->be->rt->write(gpt->be, sets[s][i], 0, buf, n);
            *hash = hash_words(*hash, buf, n);
        }
        if (s == 0) *params_hash = *hash;
    }
    vkm_gpt_params_changed(gpt); /* sets[0] is the parameters */
    vka_free(gpt->ctx, words);
    vka_free(gpt->ctx, buf);
    return r;
}

/* The parameters read (their hash) against the trailer's record of them. */
static vka_result check_params_hash(vka_context *ctx, const char *path, const uint32_t *h,
                                    bool trailer, uint64_t params_hash) {
    if (!trailer || params_hash == get_u64(h, TRAILER_PARAMS)) return VKA_SUCCESS;
    return vka_set_error(ctx, VKA_ERROR_FORMAT, "%s is damaged: the hash of its parameters is "
                         "%016" PRIX64 " but its header records %016" PRIX64, path, params_hash,
                         get_u64(h, TRAILER_PARAMS));
}

vka_result vka_gpt_load(vka_context *ctx, const char *path, vka_gpt **out) {
    if (out) *out = NULL;
    vka_result r = vka_context_usable(ctx, "vka_gpt_load");
    if (r != VKA_SUCCESS) return r;
    if (!out || !path)
        return vka_set_error(ctx, VKA_ERROR_INVALID_ARGUMENT, "vka_gpt_load: out or path is NULL");
    FILE *f;
    uint32_t h[HEADER_WORDS];
    vka_gpt_config cfg;
    bool trailer;
    r = open_checked(ctx, path, MODEL_MAGIC, MODEL_VERSION, MODEL_VERSION, 1, &f, h, &cfg,
                     &trailer);
    if (r != VKA_SUCCESS) return r;
    vka_gpt *gpt = NULL;
    r = vkm_gpt_new(ctx, &cfg, false, 0, &gpt);
    uint64_t hash = HASH_SEED, params_hash = HASH_SEED;
    vkb_tensor *sets[1] = {gpt ? gpt->params : NULL};
    const char *what[1] = {"the parameters"};
    if (r == VKA_SUCCESS)
        r = read_sets(gpt, f, path, sets, what, 1, h[1] == MODEL_VERSION_BF16, &hash,
                      &params_hash);
    fclose(f);
    if (r == VKA_SUCCESS) r = check_params_hash(ctx, path, h, trailer, params_hash);
    if (r != VKA_SUCCESS) {
        vka_gpt_destroy(gpt);
        return r;
    }
    if (trailer) gpt->tokenizer_id = get_u64(h, TRAILER_TOKENIZER);
    *out = gpt;
    return VKA_SUCCESS;
}

static void header_put_config(uint32_t *h, uint32_t magic, uint32_t version,
                              const vka_gpt_config *c) {
    memset(h, 0, HEADER_BYTES);
    h[0] = magic;
    h[1] = version;
    h[2] = (uint32_t)c->max_T;
    h[3] = (uint32_t)c->V;
    h[4] = (uint32_t)c->L;
    h[5] = (uint32_t)c->NH;
    h[6] = (uint32_t)c->C;
    h[7] = (uint32_t)c->Vp;
}

vka_result vka_gpt_save_dtype(vka_gpt *gpt, const char *path, vka_dtype dtype) {
    if (!gpt) return VKA_ERROR_INVALID_ARGUMENT;
    if (!path)
        return vka_set_error(gpt->ctx, VKA_ERROR_INVALID_ARGUMENT, "vka_gpt_save: path is NULL");
    if (vka_dtype_size(dtype) == 0)
        return vka_set_error(gpt->ctx, VKA_ERROR_INVALID_ARGUMENT, "saving %s: dtype %d is not "
                             "a vka_dtype", path, (int)dtype);
    if (dtype != VKA_F32 && dtype != VKA_BF16)
        return vka_set_error(gpt->ctx, VKA_ERROR_INVALID_ARGUMENT, "saving %s: a model file "
                             "holds f32 (llm.c's version 3) or bf16 (version 5) parameters, not "
                             "%s", path, vka_dtype_string(dtype));
    bool bf16 = dtype == VKA_BF16;
    uint32_t h[HEADER_WORDS];
    header_put_config(h, MODEL_MAGIC, bf16 ? MODEL_VERSION_BF16 : MODEL_VERSION, &gpt->cfg);
    size_t n = gpt->num_params;
    float *params = vka_malloc(gpt->ctx, n * sizeof *params);
    uint16_t *words = bf16 ? vka_malloc(gpt->ctx, n * sizeof *words) : NULL;
    vka_result r = VKA_ERROR_OUT_OF_HOST_MEMORY;
    if (!params || (bf16 && !words)) {
        r = vka_set_error(gpt->ctx, r, "saving %s: out of memory", path);
        goto done;
    }
    r = vkm_gpt_read_set(gpt, gpt->params, params);
    if (r == VKA_SUCCESS && bf16) {
        /* Rounded to nearest even; the hash is of what loading gives back, the widened words. */
        r = vka_convert(VKA_BF16, words, VKA_F32, params, n);
        if (r == VKA_SUCCESS) r = vka_convert(VKA_F32, params, VKA_BF16, words, n);
        size_t j = 0;
        while (r == VKA_SUCCESS && j < n && isfinite(params[j])) j++;
        if (r == VKA_SUCCESS && j < n) {
            int layer, i = 0;
            size_t at = j;
            while (i + 1 < gpt->n_tensors && at >= gpt->tensor_sizes[i]) at -= gpt->tensor_sizes[i++];
            gpt_param_kind kind = vkm_gpt_tensor_kind(gpt->cfg.L, i, &layer);
            char of_layer[32] = "";
            if (gpt_kind_per_layer(kind)) snprintf(of_layer, sizeof of_layer, " of layer %d", layer);
            r = vka_set_error(gpt->ctx, VKA_ERROR_INVALID_ARGUMENT, "saving %s in bf16: %s[%zu]%s "
                              "is beyond bf16's range (it rounds to %s)", path,
                              vkm_gpt_kind_name(kind), at, of_layer,
                              isnan(params[j]) ? "NaN" : "Inf");
        }
    }
    if (r == VKA_SUCCESS) {
        put_trailer(h, gpt->tokenizer_id, hash_words(HASH_SEED, params, n));
        const void *parts[2] = {h, bf16 ? (const void *)words : (const void *)params};
        size_t sizes[2] = {HEADER_BYTES, n * (bf16 ? sizeof *words : sizeof *params)};
        r = vka_write_file_atomic(gpt->ctx, path, parts, sizes, 2);
    }
done:
    vka_free(gpt->ctx, words);
    vka_free(gpt->ctx, params);
    return r;
}

vka_result vka_gpt_save(vka_gpt *gpt, const char *path) {
    return vka_gpt_save_dtype(gpt, path, VKA_F32);
}

/* ---------------------------------------------------------------------------------------------
 * Training state (its header's fields: put_state, get_state and state_problem, above)
 * ------------------------------------------------------------------------------------------- */

vka_result vka_gpt_save_state(vka_gpt *gpt, const vka_train_state *state, const char *path) {
    if (!gpt) return VKA_ERROR_INVALID_ARGUMENT;
    if (!state || !path)
        return vka_set_error(gpt->ctx, VKA_ERROR_INVALID_ARGUMENT,
                             "vka_gpt_save_state: state or path is NULL");
    char msg[320];
    if (state_problem(state, &gpt->cfg, msg, sizeof msg))
        return vka_set_error(gpt->ctx, VKA_ERROR_INVALID_ARGUMENT, "saving %s: the training "
                             "state is out of range: %s", path, msg);
    size_t n = gpt->num_params;
    /* An untrained model's m and v are zeros (as a fresh AdamW's). */
    float *buf = vka_calloc(gpt->ctx, 3 * n, sizeof *buf);
    if (!buf)
        return vka_set_error(gpt->ctx, VKA_ERROR_OUT_OF_HOST_MEMORY, "saving %s: out of memory", path);
    vka_result r = vkm_gpt_read_set(gpt, gpt->params, buf);
    if (r == VKA_SUCCESS && gpt->m_arena) r = vkm_gpt_read_set(gpt, gpt->m, buf + n);
    if (r == VKA_SUCCESS && gpt->v_arena) r = vkm_gpt_read_set(gpt, gpt->v, buf + 2 * n);
    if (r == VKA_SUCCESS) {
        uint32_t h[HEADER_WORDS];
        header_put_config(h, STATE_MAGIC, STATE_VERSION, &gpt->cfg);
        put_state(h, gpt->step, state);
        put_run(h, gpt->ctx);
        put_precision(h, gpt);
        uint64_t params_hash = hash_words(HASH_SEED, buf, n);
        put_u64(h, 32, hash_words(params_hash, buf + n, 2 * n));
        put_trailer(h, gpt->tokenizer_id, params_hash);
        const void *parts[2] = {h, buf};
        size_t sizes[2] = {HEADER_BYTES, 3 * n * sizeof *buf};
        r = vka_write_file_atomic(gpt->ctx, path, parts, sizes, 2);
    }
    vka_free(gpt->ctx, buf);
    return r;
}

vka_result vka_gpt_load_state(vka_context *ctx, const char *path, vka_gpt **out,
                              vka_train_state *state) {
    if (out) *out = NULL;
    vka_result r = vka_context_usable(ctx, "vka_gpt_load_state");
    if (r != VKA_SUCCESS) return r;
    if (!out || !state || !path)
        return vka_set_error(ctx, VKA_ERROR_INVALID_ARGUMENT,
                             "vka_gpt_load_state: out, state or path is NULL");
    FILE *f;
    uint32_t h[HEADER_WORDS];
    vka_gpt_config cfg;
    bool trailer;
    r = open_checked(ctx, path, STATE_MAGIC, STATE_OLDEST_VERSION, STATE_VERSION, 3, &f, h,
                     &cfg, &trailer);
    if (r != VKA_SUCCESS) return r;
    vka_gpt *gpt = NULL;
    r = vkm_gpt_new(ctx, &cfg, false, 0, &gpt);
    if (r == VKA_SUCCESS) r = vkm_gpt_ensure_opt(gpt);
    uint64_t hash = HASH_SEED, params_hash = HASH_SEED;
    if (r == VKA_SUCCESS) {
        vkb_tensor *sets[3] = {gpt->params, gpt->m, gpt->v};
        const char *what[3] = {"the parameters", "AdamW m", "AdamW v"};
        r = read_sets(gpt, f, path, sets, what, 3, false, &hash, &params_hash);
    }
    fclose(f);
    if (r == VKA_SUCCESS && hash != get_u64(h, 32))
        r = vka_set_error(ctx, VKA_ERROR_FORMAT,
                          "%s is damaged: its checksum is %016" PRIX64 " but the data gives "
                          "%016" PRIX64, path, get_u64(h, 32), hash);
    if (r == VKA_SUCCESS) r = check_params_hash(ctx, path, h, trailer, params_hash);
    if (r != VKA_SUCCESS) {
        vka_gpt_destroy(gpt);
        return r;
    }
    gpt->step = get_u64(h, 8);
    if (trailer) gpt->tokenizer_id = get_u64(h, TRAILER_TOKENIZER);
    get_state(h, state);
    gpt->precision = state->run_precision; /* a new model: nothing recorded yet */
    gpt->scaling = state->loss_scaling != 0;
    gpt->scale_default = state->loss_scale_default != 0;
    gpt->loss_scale = state->loss_scale;
    gpt->scale_good = state->loss_scale_good;
    gpt->skipped = state->skipped_steps;
    *out = gpt;
    return VKA_SUCCESS;
}

vka_result vka_train_state_read(vka_context *ctx, const char *path, vka_train_state *state) {
    if (ctx) { /* optional: only for the message */
        vka_result r = vka_context_usable(ctx, "vka_train_state_read");
        if (r != VKA_SUCCESS) return r;
    }
    if (!state || !path)
        return vka_set_error(ctx, VKA_ERROR_INVALID_ARGUMENT,
                             "vka_train_state_read: state or path is NULL");
    FILE *f;
    uint32_t h[HEADER_WORDS];
    vka_gpt_config cfg;
    bool trailer;
    vka_result r = open_checked(ctx, path, STATE_MAGIC, STATE_OLDEST_VERSION, STATE_VERSION, 3,
                                &f, h, &cfg, &trailer);
    if (r != VKA_SUCCESS) return r;
    fclose(f);
    get_state(h, state);
    return VKA_SUCCESS;
}

/* ---------------------------------------------------------------------------------------------
 * The tokenizer a model belongs to
 * ------------------------------------------------------------------------------------------- */

vka_result vka_gpt_set_tokenizer(vka_gpt *gpt, const vka_tokenizer *tok) {
    if (!gpt) return VKA_ERROR_INVALID_ARGUMENT;
    if (!tok) {
        gpt->tokenizer_id = 0;
        return VKA_SUCCESS;
    }
    if (vka_tokenizer_vocab_size(tok) != gpt->cfg.V)
        return vka_set_error(gpt->ctx, VKA_ERROR_INVALID_ARGUMENT, "the tokenizer has %d tokens "
                             "but the model has V = %d", vka_tokenizer_vocab_size(tok),
                             gpt->cfg.V);
    gpt->tokenizer_id = vka_tokenizer_id(tok);
    return VKA_SUCCESS;
}

uint64_t vka_gpt_tokenizer_id(const vka_gpt *gpt) { return gpt ? gpt->tokenizer_id : 0; }
