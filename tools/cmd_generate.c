/* vkattn generate: print a prompt and stream the model's continuation of it. */
#define _POSIX_C_SOURCE 200809L /* isatty, fileno */
#include "cli.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const cli_command generate_cmd = {
    .name = "generate",
    .usage = "--model MODEL [options]",
    .about = "Print the prompt, then sample --tokens more tokens from the model and print each\n"
             "as it comes.",
    .notes = "The tokenizer is MODEL with .bin replaced by .tokenizer.bin (as `vkattn train` saves\n"
             "it) unless --tokenizer is given. The default prompt is a newline (the tokenizer's\n"
             "end-of-text token); when the vocabulary has none, its first token (the smallest\n"
             "byte), said on stderr. Each character of the prompt must be in the vocabulary.\n"
             "With a BPE vocabulary the default prompt is its end-of-text token (not printed), and\n"
             "a UTF-8 character split across tokens is printed once whole (bytes that are not\n"
             "UTF-8 are printed as they come).\n"
             "--temperature 0 is greedy (always the most likely token): the same output every run.\n"
             "Otherwise tokens are drawn from softmax(logits / temperature) over the --top-k most\n"
             "likely (0 = all), with a generator seeded by --seed. The output is exactly the prompt\n"
             "and the generated characters (plus a final newline on a terminal).\n"
             "The prompt is processed once into a KV cache, then each new token costs one position;\n"
             "when the context (the model's max_T) is full, the cache is refilled with its last\n"
             "max_T/2 tokens. --no-kv-cache recomputes the whole context for every token instead\n"
             "(same context rule; same greedy output, slower).",
};

typedef struct stream {
    const vka_tokenizer *tok;
    bool failed; /* stdout could not be written (e.g. a closed pipe) */
    /* Bytes of a UTF-8 character that the next token completes (vka_utf8_complete). */
    char held[3 + VKA_TOKENIZER_MAX_TOKEN_BYTES];
    size_t n_held;
} stream;

static void write_out(stream *s, const char *b, size_t n) {
    if (n && fwrite(b, 1, n, stdout) != n) s->failed = true;
    if (fflush(stdout) != 0) s->failed = true;
}

static bool print_token(void *user, int32_t token) {
    stream *s = user;
    size_t len = 0;
    const char *bytes = vka_tokenizer_decode(s->tok, token, &len);
    if (!bytes) return true;
    memcpy(s->held + s->n_held, bytes, len);
    s->n_held += len;
    size_t n = vka_utf8_complete(s->held, s->n_held);
    write_out(s, s->held, n);
    memmove(s->held, s->held + n, s->n_held - n);
    s->n_held -= n;
    return !s->failed;
}

/* The prompt as token ids. The default (NULL) is a newline; a vocabulary without one gets its
 * first token (the smallest byte; the end-of-text id llm.c's tokenizer file then holds), and
 * stderr says so. */
static vka_result encode_prompt(const vka_tokenizer *tok, const char *prompt, int32_t **ids,
                                size_t *n) {
    const char *text = prompt ? prompt : "\n";
    size_t len = strlen(text);
    *ids = malloc((len ? len : 1) * sizeof **ids);
    if (!*ids) return VKA_ERROR_OUT_OF_HOST_MEMORY;
    if (!prompt && vka_tokenizer_kind_of(tok) == VKA_TOKENIZER_BPE) {
        (*ids)[0] = vka_tokenizer_eot(tok); /* as llm.c starts GPT-2's samples */
        *n = 1;
        return VKA_SUCCESS;
    }
    vka_result r = vka_tokenizer_encode(tok, text, len, *ids, n);
    if (prompt || r != VKA_ERROR_VOCABULARY) return r;
    size_t blen = 0;
    const char *b = vka_tokenizer_decode(tok, 0, &blen);
    unsigned char c = b && blen ? (unsigned char)b[0] : 0;
    char shown[8] = "";
    if (c >= 0x20 && c < 0x7F) snprintf(shown, sizeof shown, " '%c'", c);
    fprintf(stderr, "vkattn generate: the vocabulary has no newline, the default prompt; the "
            "prompt is its first token instead, byte 0x%02X%s (give --prompt to choose)\n", c,
            shown);
    (*ids)[0] = 0;
    *n = 1;
    return VKA_SUCCESS;
}

typedef struct generate_opts {
    const char *model, *tokenizer, *prompt;
    int tokens, top_k;
    float temperature;
    uint64_t seed;
    bool no_kv_cache;
    cli_backend_opts b;
} generate_opts;

static int generate(vka_context *ctx, const generate_opts *o) {
    vka_tokenizer *tok = NULL;
    vka_gpt *gpt = NULL;
    int32_t *prompt = NULL;
    size_t n_prompt = 0;
    int rc = cli_load_model("generate", ctx, o->model, o->tokenizer, &gpt, &tok);
    if (rc != CLI_OK) return rc;
    vka_gpt_set_attention(gpt, (vka_attention_impl)o->b.attention);
    rc = cli_set_precision("generate", ctx, gpt, o->b.precision);
    if (rc != CLI_OK) goto done;
    vka_result r = encode_prompt(tok, o->prompt, &prompt, &n_prompt);
    if (r != VKA_SUCCESS) {
        rc = cli_fail("generate", ctx, r, "--prompt");
        goto done;
    }
    if (o->prompt) {
        fwrite(o->prompt, 1, strlen(o->prompt), stdout);
    } else if (vka_tokenizer_kind_of(tok) == VKA_TOKENIZER_CHAR) {
        size_t len = 0;
        const char *eot = vka_tokenizer_decode(tok, prompt[0], &len);
        if (eot) fwrite(eot, 1, len, stdout);
    }
    fflush(stdout);
    vka_sample_desc sample = {.temperature = o->temperature, .top_k = o->top_k, .seed = o->seed,
                              .no_kv_cache = o->no_kv_cache};
    stream s = {.tok = tok};
    r = vka_gpt_generate(gpt, prompt, n_prompt, o->tokens, &sample, NULL, print_token, &s);
    write_out(&s, s.held, s.n_held); /* an incomplete character at the end, as it is */
    if (r != VKA_SUCCESS) rc = cli_fail("generate", ctx, r, "generating");
    else if (s.failed) {
        fprintf(stderr, "vkattn generate: cannot write to standard output\n");
        rc = CLI_ERROR;
    } else if (isatty(fileno(stdout))) {
        fputc('\n', stdout); /* leave the shell prompt on a line of its own */
    }
done:
    free(prompt);
    vka_gpt_destroy(gpt);
    vka_tokenizer_destroy(tok);
    return rc;
}

int cmd_generate(int argc, char **argv) {
    generate_opts o = {.tokens = 256, .temperature = 0.8f, .seed = 1337};
    cli_opt opts[] = {
        CLI_STRING("model", &o.model, "MODEL", "llm.c checkpoint to load (required)"),
        CLI_STRING("prompt", &o.prompt, "TEXT", "text to continue (default: a newline)"),
        CLI_INT("tokens", &o.tokens, "N", "tokens to generate (default: 256)", 0, 1 << 24),
        CLI_FLOAT("temperature", &o.temperature, "T",
                  "sampling temperature; 0 = greedy (default: 0.8)", 0, 100),
        CLI_INT("top-k", &o.top_k, "K", "sample from the K most likely; 0 = all (default: 0)", 0,
                1 << 24),
        CLI_U64("seed", &o.seed, "S", "sampling seed (default: 1337)"),
        CLI_STRING("tokenizer", &o.tokenizer, "FILE", "tokenizer file (default: beside MODEL)"),
        CLI_FLAG("no-kv-cache", &o.no_kv_cache,
                 "recompute the whole context for every token (no KV cache)"),
        CLI_BACKEND_OPTS(&o.b),
        CLI_ATTENTION_OPT(&o.b),
        CLI_PRECISION_OPT(&o.b),
    };
    int n_opts = (int)(sizeof opts / sizeof opts[0]);
    int rc = cli_parse(&generate_cmd, argc, argv, opts, n_opts);
    if (rc != CLI_OK) return rc < 0 ? CLI_OK : rc;
    if (!o.model) return cli_usage_error("generate", "--model MODEL is required");
    rc = cli_check_backend_opts("generate", &o.b, CLI_USES_CHOSEN(&o.b));
    if (rc != CLI_OK) return rc;
    vka_context *ctx = NULL;
    rc = cli_context("generate", &o.b, &ctx);
    if (rc != CLI_OK) return rc;
    rc = generate(ctx, &o);
    return cli_finish("generate", ctx, rc);
}
