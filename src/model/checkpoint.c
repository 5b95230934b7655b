/*
 * Model and training-state files.
 *
 * Model checkpoint: llm.c's GPT-2 format (train_gpt2.c gpt2_build_from_checkpoint), version 3:
 *   int32 header[256] = {20240326, 3, maxT, V, L, NH, C, Vp, 0...}
 *   then float32 parameters in llm.c order (vka_gpt_load's docstring), num_params of them.
 *
 * Training state (vka_gpt_save_state), our format, version 3. Little-endian as the host writes
 * it. A 1024-byte header of 256 uint32 words:
 *   [0]      magic 0x53414B56 (the bytes "VKAS")
 *   [1]      version 3 (still read: version 2, the same without words 34..38, and version 1,
 *            without word 31 too)
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
 *   others 0
 * then the payload: parameters, AdamW m, AdamW v, each num_params float32 in llm.c order.
 * Loading checks magic, version, sizes, the file length and the checksum, so a damaged file is
 * reported instead of silently resuming from garbage.
 */
#include "model/fileio.h"
#include "model/gpt_internal.h"
#include "model/tokenizer.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define HEADER_WORDS 256
#define HEADER_BYTES (HEADER_WORDS * 4)
#define MODEL_MAGIC 20240326
#define MODEL_VERSION 3
#define STATE_MAGIC 0x53414B56u
#define STATE_VERSION 3
#define STATE_OLDEST_VERSION 1 /* 1: without eval_windows; 1 and 2: without the text's identity
                                  and eval_pending */
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

/* Open path and read and check its header: magic, a version in [oldest, version], config, and
 * a length of exactly the header plus sets * num_params floats. */
static vka_result open_checked(vka_context *ctx, const char *path, uint32_t magic,
                               uint32_t oldest, uint32_t version, int sets, FILE **f, uint32_t *h,
                               vka_gpt_config *cfg) {
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
    if (h[1] < oldest || h[1] > version) {
        r = vka_set_error(ctx, VKA_ERROR_FORMAT, "%s: version %" PRId32 " is not supported "
                          "(expected %s%" PRIu32 "%s)", path, (int32_t)h[1],
                          oldest < version ? "at most " : "", version,
                          magic == MODEL_MAGIC ? ", float32; llm.c's version 5 is bfloat16" : "");
        goto fail;
    }
    r = header_config(ctx, path, h, cfg);
    if (r != VKA_SUCCESS) goto fail;
    uint64_t n = vkm_gpt_config_num_params(cfg);
    uint64_t want = HEADER_BYTES + (uint64_t)sets * n * 4;
    if (size != want) {
        r = vka_set_error(ctx, VKA_ERROR_FORMAT,
                          "%s is %" PRIu64 " bytes but its header (maxT=%d V=%d L=%d NH=%d C=%d "
                          "Vp=%d) implies %" PRIu64 " bytes (%d-byte header + %d x %" PRIu64
                          " floats): %s",
                          path, size, cfg->max_T, cfg->V, cfg->L, cfg->NH, cfg->C, cfg->Vp, want,
                          HEADER_BYTES, sets, n, size < want ? "the file is truncated"
                                                             : "it has trailing data");
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

/* Stream count tensor sets (each num_params floats) from f into the model, hashing them. */
static vka_result read_sets(vka_gpt *gpt, FILE *f, const char *path, vkb_tensor *const *sets,
                            const char *const *what, int count, uint64_t *hash) {
    size_t max = 0;
    for (int i = 0; i < gpt->n_tensors; i++) max = VKA_MAX(max, gpt->tensor_sizes[i]);
    float *buf = malloc(max * sizeof *buf);
    if (!buf) return vka_set_error(gpt->ctx, VKA_ERROR_OUT_OF_HOST_MEMORY, "%s: out of memory", path);
    vka_result r = VKA_SUCCESS;
    for (int s = 0; s < count && r == VKA_SUCCESS; s++) {
        for (int i = 0; i < gpt->n_tensors && r == VKA_SUCCESS; i++) {
            size_t n = gpt->tensor_sizes[i];
            r = vkm_read_exact(gpt->ctx, f, path, buf, n * sizeof *buf, what[s]);
            if (r == VKA_SUCCESS)
                r = check_finite(gpt, path, count > 1 ? what[s] : NULL, i, buf, n);
            if (r == VKA_SUCCESS) r = gpt->be->ops->write(gpt->be, sets[s][i], 0, buf, n);
            *hash = hash_words(*hash, buf, n);
        }
    }
    free(buf);
    return r;
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
    r = open_checked(ctx, path, MODEL_MAGIC, MODEL_VERSION, MODEL_VERSION, 1, &f, h, &cfg);
    if (r != VKA_SUCCESS) return r;
    vka_gpt *gpt = NULL;
    r = vkm_gpt_new(ctx, &cfg, false, 0, &gpt);
    uint64_t hash = HASH_SEED;
    vkb_tensor *sets[1] = {gpt ? gpt->params : NULL};
    const char *what[1] = {"the parameters"};
    if (r == VKA_SUCCESS) r = read_sets(gpt, f, path, sets, what, 1, &hash);
    fclose(f);
    if (r != VKA_SUCCESS) {
        vka_gpt_destroy(gpt);
        return r;
    }
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

vka_result vka_gpt_save(vka_gpt *gpt, const char *path) {
    if (!gpt) return VKA_ERROR_INVALID_ARGUMENT;
    if (!path) return vka_set_error(gpt->ctx, VKA_ERROR_INVALID_ARGUMENT, "vka_gpt_save: path is NULL");
    uint32_t h[HEADER_WORDS];
    header_put_config(h, MODEL_MAGIC, MODEL_VERSION, &gpt->cfg);
    float *params = malloc(gpt->num_params * sizeof *params);
    if (!params)
        return vka_set_error(gpt->ctx, VKA_ERROR_OUT_OF_HOST_MEMORY, "saving %s: out of memory", path);
    vka_result r = vkm_gpt_read_set(gpt, gpt->params, params);
    if (r == VKA_SUCCESS) {
        const void *parts[2] = {h, params};
        size_t sizes[2] = {HEADER_BYTES, gpt->num_params * sizeof *params};
        r = vka_write_file_atomic(gpt->ctx, path, parts, sizes, 2);
    }
    free(params);
    return r;
}

/* ---------------------------------------------------------------------------------------------
 * Training state
 * ------------------------------------------------------------------------------------------- */

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
                                bits_f32(h[27]), bits_f32(h[28]), bits_f32(h[29])};
    s->best_val_loss = bits_f32(h[30]);
    s->eval_windows = h[1] >= 2 ? (int32_t)h[31] : -1;
    if (h[1] >= 3) {
        s->text_bytes = get_u64(h, 34);
        s->text_hash = get_u64(h, 36);
        s->eval_pending = (int32_t)h[38];
    }
}

vka_result vka_gpt_save_state(vka_gpt *gpt, const vka_train_state *state, const char *path) {
    if (!gpt) return VKA_ERROR_INVALID_ARGUMENT;
    if (!state || !path)
        return vka_set_error(gpt->ctx, VKA_ERROR_INVALID_ARGUMENT,
                             "vka_gpt_save_state: state or path is NULL");
    size_t n = gpt->num_params;
    /* An untrained model's m and v are zeros (as a fresh AdamW's). */
    float *buf = calloc(3 * n, sizeof *buf);
    if (!buf)
        return vka_set_error(gpt->ctx, VKA_ERROR_OUT_OF_HOST_MEMORY, "saving %s: out of memory", path);
    vka_result r = vkm_gpt_read_set(gpt, gpt->params, buf);
    if (r == VKA_SUCCESS && gpt->m_arena) r = vkm_gpt_read_set(gpt, gpt->m, buf + n);
    if (r == VKA_SUCCESS && gpt->v_arena) r = vkm_gpt_read_set(gpt, gpt->v, buf + 2 * n);
    if (r == VKA_SUCCESS) {
        uint32_t h[HEADER_WORDS];
        header_put_config(h, STATE_MAGIC, STATE_VERSION, &gpt->cfg);
        put_state(h, gpt->step, state);
        put_u64(h, 32, hash_words(HASH_SEED, buf, 3 * n));
        const void *parts[2] = {h, buf};
        size_t sizes[2] = {HEADER_BYTES, 3 * n * sizeof *buf};
        r = vka_write_file_atomic(gpt->ctx, path, parts, sizes, 2);
    }
    free(buf);
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
    r = open_checked(ctx, path, STATE_MAGIC, STATE_OLDEST_VERSION, STATE_VERSION, 3, &f, h,
                     &cfg);
    if (r != VKA_SUCCESS) return r;
    vka_gpt *gpt = NULL;
    r = vkm_gpt_new(ctx, &cfg, false, 0, &gpt);
    if (r == VKA_SUCCESS) r = vkm_gpt_ensure_opt(gpt);
    uint64_t hash = HASH_SEED;
    if (r == VKA_SUCCESS) {
        vkb_tensor *sets[3] = {gpt->params, gpt->m, gpt->v};
        const char *what[3] = {"the parameters", "AdamW m", "AdamW v"};
        r = read_sets(gpt, f, path, sets, what, 3, &hash);
    }
    fclose(f);
    if (r == VKA_SUCCESS && hash != get_u64(h, 32))
        r = vka_set_error(ctx, VKA_ERROR_FORMAT,
                          "%s is damaged: its checksum is %016" PRIX64 " but the data gives "
                          "%016" PRIX64, path, get_u64(h, 32), hash);
    if (r != VKA_SUCCESS) {
        vka_gpt_destroy(gpt);
        return r;
    }
    gpt->step = get_u64(h, 8);
    get_state(h, state);
    *out = gpt;
    return VKA_SUCCESS;
}
