/* vkattn eval: a model's mean loss, perplexity and bits per byte over whole files (text or
 * llm.c token files). */
#include "cli.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static const cli_command eval_cmd = {
    .name = "eval",
    .usage = "--model MODEL --data FILE [options]",
    .about = "Score a model on every token of a text file or llm.c token file(s): the mean\n"
             "cross-entropy (nats per token), the perplexity exp(loss) and bits per byte.",
    .notes = "The file's tokens (all of them: no train/validation split) are cut into windows of\n"
             "T+1 tokens starting at 0, T, 2T, ... while a whole window fits; each window scores its\n"
             "T next-token predictions. The tokenizer is MODEL with .bin replaced by .tokenizer.bin\n"
             "unless --tokenizer is given; every byte of a text must be in its vocabulary, every id\n"
             "of a token file below its size. FILE may be a glob pattern (quote it: \"shards/*.bin\"),\n"
             "the files scored as one concatenation, or - for standard input (read into memory).\n"
             "Bits per byte = the nats summed over the scored targets / (ln 2 * the bytes those\n"
             "target tokens decode to).\n"
             "--json prints {\"loss\",\"perplexity\",\"bits_per_byte\",\"windows\",\"tokens\",\"bytes\",\n"
             "\"ctx\",\"file_tokens\"}: \"tokens\" is the number of predictions scored (windows * ctx),\n"
             "the count the mean loss is over; \"bytes\" their decoded length; \"file_tokens\" is the\n"
             "length of FILE in tokens.",
};

typedef struct eval_opts {
    const char *model, *data, *tokenizer;
    int ctx;
    bool json;
    size_t chunk; /* tokens read and scored at a time */
    cli_backend_opts b;
} eval_opts;

/* Tokens per chunk read and scored at a time ($VKATTN_EVAL_CHUNK overrides, for tests): a big
 * file is never held whole as int32. */
#define EVAL_CHUNK_TOKENS ((size_t)1 << 20)

/* 0 (after the message) where $VKATTN_EVAL_CHUNK is set but not a positive number of tokens:
 * decimal digits only, as the library's variables (no sign or space). */
static size_t chunk_tokens(void) {
    const char *env = getenv("VKATTN_EVAL_CHUNK");
    if (!env || !*env) return EVAL_CHUNK_TOKENS;
    char *end = NULL;
    errno = 0;
    long long v = strtoll(env, &end, 10);
    if (env[0] < '0' || env[0] > '9' || *end != '\0' || v <= 0 || errno == ERANGE) {
        fprintf(stderr, "vkattn eval: VKATTN_EVAL_CHUNK=%s is not a positive number of tokens\n",
                env);
        return 0;
    }
    return (size_t)v;
}

/* The mean loss over all windows of T+1 tokens at 0, T, 2T, ... of the data, scored a chunk
 * of windows at a time and combined by window count; *bytes: what their targets decode to. */
static vka_result score(vka_gpt *gpt, const vka_data *data, const vka_tokenizer *tok, int T,
                        size_t n, size_t chunk, double *loss, size_t *windows, uint64_t *bytes) {
    size_t total = (n - 1) / (size_t)T, per = chunk / (size_t)T;
    if (per == 0) per = 1;
    if (per > total) per = total;
    int32_t *buf = malloc((per * (size_t)T + 1) * sizeof *buf);
    if (!buf) return VKA_ERROR_OUT_OF_HOST_MEMORY;
    double sum = 0.0; /* nats over all scored targets */
    vka_result r = VKA_SUCCESS;
    *bytes = 0;
    for (size_t w = 0; w < total && r == VKA_SUCCESS; w += per) {
        size_t k = total - w < per ? total - w : per, got = 0;
        size_t len = k * (size_t)T + 1;
        r = vka_data_read_tokens(data, VKA_SPLIT_ALL, w * (size_t)T, len, buf);
        double mean = 0.0;
        if (r == VKA_SUCCESS) r = vka_gpt_eval(gpt, buf, len, T, &mean, &got);
        if (r != VKA_SUCCESS) break;
        sum += mean * (double)got * T;
        *bytes += cli_token_bytes(tok, buf + 1, len - 1);
    }
    free(buf);
    if (r == VKA_SUCCESS) {
        *loss = sum / ((double)total * T);
        *windows = total;
    }
    return r;
}

static int evaluate(vka_context *ctx, const eval_opts *o) {
    vka_tokenizer *tok = NULL;
    vka_gpt *gpt = NULL;
    vka_data *data = NULL;
    char **paths = NULL;
    int n_paths = 0;
    int rc = cli_load_model("eval", ctx, o->model, o->tokenizer, &gpt, &tok);
    if (rc != CLI_OK) return rc;
    vka_gpt_set_attention(gpt, (vka_attention_impl)o->b.attention);
    rc = cli_set_precision("eval", ctx, gpt, o->b.precision);
    if (rc != CLI_OK) goto done;
    vka_gpt_config cfg = vka_gpt_get_config(gpt);
    vka_result r;
    if (o->ctx > cfg.max_T) {
        rc = cli_usage_error("eval", "--ctx %d is longer than the model's context of %d", o->ctx,
                             cfg.max_T);
        goto done;
    }
    rc = cli_data_paths("eval", "--data", o->data, &paths, &n_paths);
    if (rc != CLI_OK) goto done;
    vka_data_desc desc = {.paths = (const char *const *)paths, .n_paths = n_paths, .tok = tok};
    r = vka_data_open(ctx, &desc, &data);
    if (r != VKA_SUCCESS) {
        rc = cli_fail("eval", ctx, r, "data");
        goto done;
    }
    size_t n = vka_data_num_tokens(data, VKA_SPLIT_ALL);
    int T = o->ctx ? o->ctx : cfg.max_T;
    if (n < (size_t)T + 1) {
        fprintf(stderr, "vkattn eval: %s: %zu token%s, fewer than one window of T+1 = %d tokens "
                "(--ctx)\n", o->data, n, n == 1 ? "" : "s", T + 1);
        rc = CLI_ERROR;
        goto done;
    }
    double loss = 0.0;
    size_t windows = 0;
    uint64_t bytes = 0;
    r = score(gpt, data, tok, T, n, o->chunk, &loss, &windows, &bytes);
    if (r != VKA_SUCCESS) {
        if (r == VKA_ERROR_OUT_OF_HOST_MEMORY) fprintf(stderr, "vkattn eval: out of memory\n");
        rc = r == VKA_ERROR_OUT_OF_HOST_MEMORY ? CLI_ERROR : cli_fail("eval", ctx, r, o->data);
        goto done;
    }
    if (!isfinite(loss)) {
        if (o->b.precision == VKA_F16)
            fprintf(stderr, "vkattn eval: the mean loss over %s is %g: the model %s gives "
                    "non-finite logits in fp16 (an activation or weight past fp16's largest "
                    "value, 65504); --precision bf16 or fp32 has float32's range\n", o->data, loss,
                    o->model);
        else
            fprintf(stderr, "vkattn eval: the mean loss over %s is %g: the model %s gives "
                    "non-finite logits (its parameters overflow)\n", o->data, loss, o->model);
        rc = CLI_ERROR;
        goto done;
    }
    size_t scored = windows * (size_t)T; /* the predictions the mean is over */
    double bpb = cli_bits_per_byte(loss * (double)scored, bytes);
    if (o->json) {
        printf("{\"loss\":");
        cli_json_number(stdout, loss);
        cli_json_num(stdout, "perplexity", exp(loss));
        cli_json_num(stdout, "bits_per_byte", bpb);
        printf(",\"windows\":%zu,\"tokens\":%zu,\"bytes\":%llu,\"ctx\":%d,\"file_tokens\":%zu",
               windows, scored, (unsigned long long)bytes, T, n);
        cli_json_str(stdout, "precision", cli_precision_names[o->b.precision]);
        printf("}\n");
    } else {
        char ppl[32];
        cli_perplexity_text(exp(loss), ppl, sizeof ppl);
        /* a 16-bit run says so: its loss is not the float32 model's */
        printf("loss %.4f nats/token (%.4f bits per byte), perplexity %s, over %zu tokens (%zu "
               "windows of %d+1) of the %zu tokens of %s%s%s%s\n", loss, bpb, ppl, scored,
               windows, T, n, o->data, o->b.precision ? " (" : "",
               o->b.precision ? cli_precision_names[o->b.precision] : "",
               o->b.precision ? " mixed precision)" : "");
    }
done:
    cli_free_paths(paths, n_paths);
    vka_data_destroy(data);
    vka_gpt_destroy(gpt);
    vka_tokenizer_destroy(tok);
    return rc;
}

int cmd_eval(int argc, char **argv) {
    eval_opts o = {0};
    cli_opt opts[] = {
        CLI_STRING("model", &o.model, "MODEL", "llm.c checkpoint to score (required)"),
        CLI_STRING("data", &o.data, "FILE", "text or token file(s) to score; - = stdin (required)"),
        CLI_INT("ctx", &o.ctx, "T", "window length; 0 = the model's context (default: 0)", 0,
                VKA_GPT_MAX_T),
        CLI_STRING("tokenizer", &o.tokenizer, "FILE", "tokenizer file (default: beside MODEL)"),
        CLI_FLAG("json", &o.json, "print one JSON object"),
        CLI_BACKEND_OPTS(&o.b),
        CLI_ATTENTION_OPT(&o.b),
        CLI_PRECISION_OPT(&o.b),
    };
    int n_opts = (int)(sizeof opts / sizeof opts[0]);
    int rc = cli_parse(&eval_cmd, argc, argv, opts, n_opts);
    if (rc != CLI_OK) return rc < 0 ? CLI_OK : rc;
    if (!o.model) return cli_usage_error("eval", "--model MODEL is required");
    if (!o.data) return cli_usage_error("eval", "--data FILE is required");
    o.chunk = chunk_tokens();
    if (o.chunk == 0) return CLI_USAGE;
    rc = cli_check_backend_opts("eval", &o.b, CLI_USES_CHOSEN(&o.b));
    if (rc != CLI_OK) return rc;
    vka_context *ctx = NULL;
    rc = cli_context("eval", &o.b, &ctx);
    if (rc != CLI_OK) return rc;
    rc = evaluate(ctx, &o);
    return cli_finish("eval", ctx, rc);
}
