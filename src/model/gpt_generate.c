/*
 * Autoregressive generation. By default through a vka_gpt_session (gpt_session.c): the prompt
 * is prefilled once into a KV cache, then each new token costs one position.
 *
 * The recompute path (vka_sample_desc.no_kv_cache, kept as the reference) replays one
 * fixed-shape graph (B = 1, T = Tg) per token, so nothing is recorded or allocated per token:
 * the context is written right-padded into the input row, and because attention is causal the
 * padding never affects the real positions. The graph copies the logits (Tg, Vp) into the host
 * arena; the host reads the row of the last real position and samples from it.
 * Tg = min(max_T, n_prompt + n_new - 1), the longest context this call can need.
 *
 * Both paths use the same context: tokens since the last restart; when a token would make it
 * longer than max_T, it restarts as the last max_T/2 tokens before that token, plus the token
 * (the session's re-prefill of the last half of a full cache).
 */
#include "model/gpt_internal.h"
#include "model/rng.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct scored {
    float logit;
    int32_t id;
} scored;

/* Larger logit first, NaN after every number; equal logits (and NaNs) by smaller id: a total
 * order, as qsort needs, whatever the input (the callers refuse non-finite rows anyway). */
static int by_logit_desc(const void *pa, const void *pb) {
    const scored *a = pa, *b = pb;
    bool na = isnan(a->logit), nb = isnan(b->logit);
    if (na != nb) return na ? 1 : -1;
    if (!na && a->logit != b->logit) return a->logit > b->logit ? -1 : 1;
    return (a->id > b->id) - (a->id < b->id);
}

vka_result vkm_check_logits(vka_gpt *gpt, const char *fn, const float *logits, int V, int step,
                            size_t pos) {
    int j = 0;
    while (j < V && isfinite(logits[j])) j++;
    if (j == V) return VKA_SUCCESS;
    char at[64] = "";
    if (step >= 0) snprintf(at, sizeof at, "step %d, ", step);
    return vka_set_error(gpt->ctx, VKA_ERROR_NOT_FINITE,
                         "%s: the logits at %sposition %zu are not finite (token %d is %s): a "
                         "parameter or activation of the model is NaN or overflowed; no token "
                         "was drawn", fn, at, pos, j,
                         isnan(logits[j]) ? "NaN" : logits[j] > 0 ? "+Inf" : "-Inf");
}

static int32_t argmax(const float *logits, int V) {
    int32_t best = 0;
    for (int i = 1; i < V; i++)
        if (logits[i] > logits[best]) best = i;
    return best;
}

/* Draw from softmax(logits / temperature) over the top_k most likely tokens (all if top_k is
 * 0 or >= V). cand: scratch of V entries. Probabilities in double. */
int32_t vkm_sample_token(const float *logits, int V, const vka_sample_desc *s, uint64_t *rng,
                         void *scratch) {
    scored *cand = scratch;
    if (s->temperature == 0.0f) return argmax(logits, V);
    for (int i = 0; i < V; i++) cand[i] = (scored){logits[i], i};
    int k = V;
    if (s->top_k > 0 && s->top_k < V) {
        qsort(cand, (size_t)V, sizeof *cand, by_logit_desc);
        k = s->top_k;
    }
    float max = cand[0].logit;
    for (int i = 1; i < k; i++) max = fmaxf(max, cand[i].logit);
    double total = 0.0;
    for (int i = 0; i < k; i++) total += exp(((double)cand[i].logit - max) / s->temperature);
    double u = vkm_rng_uniform_double(rng) * total, acc = 0.0;
    for (int i = 0; i < k; i++) {
        acc += exp(((double)cand[i].logit - max) / s->temperature);
        if (u < acc) return cand[i].id;
    }
    return cand[k - 1].id; /* u rounded up to total */
}

static vka_result check_generate(vka_gpt *gpt, const int32_t *prompt, size_t n_prompt,
                                 int n_new, const vka_sample_desc *s) {
    const char *fn = "vka_gpt_generate";
    if (!prompt || n_prompt == 0)
        return vka_set_error(gpt->ctx, VKA_ERROR_INVALID_ARGUMENT,
                             "%s: the prompt is empty (at least one token is needed)", fn);
    if (n_new < 0)
        return vka_set_error(gpt->ctx, VKA_ERROR_INVALID_ARGUMENT, "%s: n_new = %d is negative",
                             fn, n_new);
    if (!(s->temperature >= 0.0f) || !isfinite(s->temperature))
        return vka_set_error(gpt->ctx, VKA_ERROR_INVALID_ARGUMENT,
                             "%s: temperature = %g must be finite and >= 0", fn,
                             (double)s->temperature);
    if (s->top_k < 0)
        return vka_set_error(gpt->ctx, VKA_ERROR_INVALID_ARGUMENT, "%s: top_k = %d is negative",
                             fn, s->top_k);
    return vkm_gpt_check_ids(gpt, fn, "prompt", prompt, n_prompt, 0);
}

/* Start of the context after the sequence grew to len tokens (see the top of this file). */
static size_t window_start(size_t start, size_t len, int max_T) {
    return len - start > (size_t)max_T ? len - 1 - (size_t)(max_T / 2) : start;
}

static vka_result generate_cached(vka_gpt *gpt, const int32_t *prompt, size_t n_prompt,
                                  int n_new, const vka_sample_desc *s, int32_t *out,
                                  vka_token_fn fn, void *user_data) {
    vka_gpt_session *ss = NULL;
    float *logits = vka_malloc(gpt->ctx, (size_t)gpt->cfg.V * sizeof *logits);
    if (!logits)
        return vka_set_error(gpt->ctx, VKA_ERROR_OUT_OF_HOST_MEMORY, "vka_gpt_generate: out of memory");
    vka_result r = vka_gpt_session_create(gpt, NULL, &ss);
    if (r == VKA_SUCCESS) r = vka_gpt_session_append(ss, prompt, n_prompt);
    uint64_t rng = s->seed;
    for (int i = 0; r == VKA_SUCCESS && i < n_new; i++) {
        int32_t tok;
        /* the session's own check, but naming the step and the position in the sequence */
        r = vka_gpt_session_logits(ss, logits, (size_t)gpt->cfg.V);
        if (r == VKA_SUCCESS)
            r = vkm_check_logits(gpt, "vka_gpt_generate", logits, gpt->cfg.V, i,
                                 n_prompt + (size_t)i - 1);
        if (r == VKA_SUCCESS) r = vka_gpt_session_sample(ss, s, &rng, &tok);
        if (r != VKA_SUCCESS) break;
        if (out) out[i] = tok;
        if (fn && !fn(user_data, tok)) break;
        if (i + 1 < n_new) r = vka_gpt_session_append(ss, &tok, 1);
    }
    vka_gpt_session_destroy(ss);
    vka_free(gpt->ctx, logits);
    return r;
}

vka_result vka_gpt_generate(vka_gpt *gpt, const int32_t *prompt, size_t n_prompt, int n_new,
                            const vka_sample_desc *sample, int32_t *out, vka_token_fn fn,
                            void *user_data) {
    if (!gpt) return VKA_ERROR_INVALID_ARGUMENT;
    if (vkm_gpt_busy(gpt, "vka_gpt_generate") != VKA_SUCCESS) return VKA_ERROR_INVALID_ARGUMENT;
    vka_sample_desc s = sample ? *sample : (vka_sample_desc){0}; /* NULL: greedy */
    vka_result r = check_generate(gpt, prompt, n_prompt, n_new, &s);
    if (r != VKA_SUCCESS || n_new == 0) return r;
    if (!s.no_kv_cache) return generate_cached(gpt, prompt, n_prompt, n_new, &s, out, fn, user_data);
    int V = gpt->cfg.V, Vp = gpt->cfg.Vp;
    size_t total = n_prompt + (size_t)n_new;
    int Tg = (int)VKA_MIN((size_t)gpt->cfg.max_T, total - 1);
    int32_t *seq = vka_malloc(gpt->ctx, total * sizeof *seq);
    /* Positions after the context hold valid ids (0, or earlier tokens) nothing attends to. */
    int32_t *row = vka_calloc(gpt->ctx, (size_t)Tg, sizeof *row);
    float *logits = vka_malloc(gpt->ctx, (size_t)V * sizeof *logits);
    scored *cand = vka_malloc(gpt->ctx, (size_t)V * sizeof *cand);
    if (!seq || !row || !logits || !cand) {
        r = vka_set_error(gpt->ctx, VKA_ERROR_OUT_OF_HOST_MEMORY, "vka_gpt_generate: out of memory");
        goto done;
    }
    memcpy(seq, prompt, n_prompt * sizeof *seq);
    gpt_shape shape = {.B = 1, .T = Tg, .host_logits = true, .logits = true};
    r = vkm_gpt_reserve(gpt, &shape);
    uint64_t rng = s.seed;
    size_t start = 0;
    for (size_t len = 1; len <= n_prompt; len++) start = window_start(start, len, gpt->cfg.max_T);
    for (size_t len = n_prompt; r == VKA_SUCCESS && len < total; len++) {
        if (len > n_prompt) start = window_start(start, len, gpt->cfg.max_T);
        size_t n_ctx = len - start;
        memcpy(row, seq + start, n_ctx * sizeof *row);
        r = gpt->be->rt->write(gpt->be, gpt->host.inputs, 0, row, (size_t)Tg);
        if (r == VKA_SUCCESS) r = vkm_gpt_run(gpt, G_SAMPLE, 1, Tg, 0, 0);
        if (r == VKA_SUCCESS)
            r = gpt->be->rt->read(gpt->be, gpt->host.logits, (n_ctx - 1) * (size_t)Vp, logits,
                                   (size_t)V);
        if (r == VKA_SUCCESS) r = vkm_check_logits(gpt, "vka_gpt_generate", logits, V, (int)(len - n_prompt), len - 1);
        if (r != VKA_SUCCESS) break;
        int32_t tok = vkm_sample_token(logits, V, &s, &rng, cand);
        seq[len] = tok;
        if (out) out[len - n_prompt] = tok;
        if (fn && !fn(user_data, tok)) break;
    }
done:
    vka_free(gpt->ctx, seq);
    vka_free(gpt->ctx, row);
    vka_free(gpt->ctx, logits);
    vka_free(gpt->ctx, cand);
    return r;
}
