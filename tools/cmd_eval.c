/* vkattn eval: a model's mean loss and perplexity over a whole text file. */
#include "cli.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const cli_command eval_cmd = {
    .name = "eval",
    .usage = "--model MODEL --data FILE [options]",
    .about = "Score a model on every token of a text file: the mean cross-entropy (nats per token)\n"
             "and the perplexity exp(loss).",
    .notes = "The file's tokens (all of them: no train/validation split) are cut into windows of\n"
             "T+1 tokens starting at 0, T, 2T, ... while a whole window fits; each window scores its\n"
             "T next-token predictions. The tokenizer is MODEL with .bin replaced by .tokenizer.bin\n"
             "unless --tokenizer is given; every byte of FILE must be in its vocabulary.\n"
             "--json prints {\"loss\",\"perplexity\",\"windows\",\"tokens\",\"ctx\",\"file_tokens\"}:\n"
             "\"tokens\" is the number of predictions scored (windows * ctx), the count the mean loss\n"
             "is over; \"file_tokens\" is the length of FILE in tokens.",
};

typedef struct eval_opts {
    const char *model, *data, *tokenizer;
    int ctx;
    bool json;
    cli_backend_opts b;
} eval_opts;

/* All of the data's tokens (training split, then validation) in one malloc'd array. */
static int32_t *all_tokens(const vka_data *data, size_t *n) {
    size_t n_train, n_val;
    const int32_t *train = vka_data_tokens(data, VKA_SPLIT_TRAIN, &n_train);
    const int32_t *val = vka_data_tokens(data, VKA_SPLIT_VAL, &n_val);
    int32_t *all = malloc((n_train + n_val + 1) * sizeof *all);
    if (!all) return NULL;
    memcpy(all, train, n_train * sizeof *all);
    memcpy(all + n_train, val, n_val * sizeof *all);
    *n = n_train + n_val;
    return all;
}

static int evaluate(vka_context *ctx, const eval_opts *o) {
    vka_tokenizer *tok = NULL;
    vka_gpt *gpt = NULL;
    vka_data *data = NULL;
    int32_t *tokens = NULL;
    int rc = cli_load_model("eval", ctx, o->model, o->tokenizer, &gpt, &tok);
    if (rc != CLI_OK) return rc;
    vka_gpt_config cfg = vka_gpt_get_config(gpt);
    vka_result r;
    if (o->ctx > cfg.max_T) {
        rc = cli_usage_error("eval", "--ctx %d is longer than the model's context of %d", o->ctx,
                             cfg.max_T);
        goto done;
    }
    r = vka_data_load(ctx, o->data, tok, &data);
    if (r != VKA_SUCCESS) {
        rc = cli_fail("eval", ctx, r, "data");
        goto done;
    }
    size_t n = 0;
    tokens = all_tokens(data, &n);
    if (!tokens) {
        fprintf(stderr, "vkattn eval: out of memory\n");
        rc = CLI_ERROR;
        goto done;
    }
    int T = o->ctx ? o->ctx : cfg.max_T;
    if (n < (size_t)T + 1) {
        fprintf(stderr, "vkattn eval: %s: %zu token%s, fewer than one window of T+1 = %d tokens "
                "(--ctx)\n", o->data, n, n == 1 ? "" : "s", T + 1);
        rc = CLI_ERROR;
        goto done;
    }
    double loss = 0.0;
    size_t windows = 0;
    r = vka_gpt_eval(gpt, tokens, n, T, &loss, &windows);
    if (r != VKA_SUCCESS) {
        rc = cli_fail("eval", ctx, r, o->data);
        goto done;
    }
    size_t scored = windows * (size_t)T; /* the predictions the mean is over */
    if (o->json) {
        printf("{\"loss\":");
        cli_json_number(stdout, loss);
        cli_json_num(stdout, "perplexity", exp(loss));
        printf(",\"windows\":%zu,\"tokens\":%zu,\"ctx\":%d,\"file_tokens\":%zu}\n", windows,
               scored, T, n);
    } else {
        char ppl[32];
        cli_perplexity_text(exp(loss), ppl, sizeof ppl);
        printf("loss %.4f nats/token, perplexity %s, over %zu tokens (%zu windows of %d+1) of the "
               "%zu tokens of %s\n", loss, ppl, scored, windows, T, n, o->data);
    }
done:
    free(tokens);
    vka_data_destroy(data);
    vka_gpt_destroy(gpt);
    vka_tokenizer_destroy(tok);
    return rc;
}

int cmd_eval(int argc, char **argv) {
    eval_opts o = {0};
    cli_opt opts[] = {
        CLI_STRING("model", &o.model, "MODEL", "llm.c checkpoint to score (required)"),
        CLI_STRING("data", &o.data, "FILE", "text file to score (required)"),
        CLI_INT("ctx", &o.ctx, "T", "window length; 0 = the model's context (default: 0)", 0,
                VKA_GPT_MAX_T),
        CLI_STRING("tokenizer", &o.tokenizer, "FILE", "tokenizer file (default: beside MODEL)"),
        CLI_FLAG("json", &o.json, "print one JSON object"),
        CLI_BACKEND_OPTS(&o.b),
    };
    int n_opts = (int)(sizeof opts / sizeof opts[0]);
    int rc = cli_parse(&eval_cmd, argc, argv, opts, n_opts);
    if (rc != CLI_OK) return rc < 0 ? CLI_OK : rc;
    if (!o.model) return cli_usage_error("eval", "--model MODEL is required");
    if (!o.data) return cli_usage_error("eval", "--data FILE is required");
    rc = cli_check_backend_opts("eval", &o.b, CLI_USES_CHOSEN(&o.b));
    if (rc != CLI_OK) return rc;
    vka_context *ctx = NULL;
    rc = cli_context("eval", &o.b, &ctx);
    if (rc != CLI_OK) return rc;
    rc = evaluate(ctx, &o);
    return cli_finish("eval", ctx, rc);
}
