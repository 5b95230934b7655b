/* vkattn attention: the attention weights of a prompt, as an SVG picture and/or JSON. */
#include "attention.h"
#include "cli.h"

#include <stdlib.h>
#include <string.h>

static const cli_command attention_cmd = {
    .name = "attention",
    .usage = "--model MODEL --prompt TEXT (--svg FILE | --json) [options]",
    .about = "Show what the model attends to: the attention weights of each head for the prompt,\n"
             "drawn as grids with the prompt's tokens along both axes (queries down, keys across)\n"
             "and/or printed as JSON.",
    .notes = "--layer is a layer number (0 = the first) or `all`; the default is the last layer.\n"
             "--head shows one head; the default is every head of the layer. The picture has one\n"
             "panel per (layer, head): cell (query t, key j) is the weight query t gives key j, on a\n"
             "fixed 0..1 colour scale (viridis) so panels compare; each row sums to 1 over the keys\n"
             "j <= t, and the masked (future) keys j > t are blank. Tokens are labelled with their\n"
             "text, a space shown as \xE2\x90\xA3, a newline as \xE2\x86\xB5, a tab as \xE2\x87\xA5, "
             "and other control bytes\nand bytes that are not UTF-8 as \\xNN. The SVG is written to a "
             "temporary name and renamed.\n"
             "--json prints one object: {\"model\",\"L\",\"NH\",\"T\",\"tokens\":[{\"id\",\"text\","
             "\"label\"}],\n\"layers\":[{\"layer\",\"heads\":[{\"head\",\"weights\"}]}]} where "
             "\"weights\" is the (T, T)\nmatrix by query row, masked cells 0; \"text\" is the "
             "token's bytes, each byte that is\nnot UTF-8 as \\udcXX. The prompt must be 1 to max_T "
             "tokens. The tokenizer is MODEL with\n.bin replaced by .tokenizer.bin unless "
             "--tokenizer is given. The weights come from the\ncomposed attention path (q.k^T, "
             "masked softmax) after a forward pass.",
};

/* A step that ran out of host memory (said once, by attention()). */
#define ATTN_NO_MEMORY (-1)

typedef struct attention_opts {
    const char *model, *tokenizer, *prompt, *layer, *svg;
    int head;
    bool json;
    cli_backend_opts b;
} attention_opts;

/* What is shown: layers and heads, the prompt's ids and labels, and the weights
 * (n_layers, n_heads, T, T). */
typedef struct shown {
    int L, NH, T;
    int *layers, n_layers, *heads, n_heads;
    int32_t *ids;
    char (*labels)[ATTN_LABEL_BYTES];
    const char **label_ptrs;
    int *label_chars;
    float *weights;
} shown;

static void shown_free(shown *s) {
    free(s->layers);
    free(s->heads);
    free(s->ids);
    free(s->labels);
    free(s->label_ptrs);
    free(s->label_chars);
    free(s->weights);
}

/* --layer and --head against the model: the lists of layers and heads to show. */
static int choose(const attention_opts *o, shown *s) {
    int first = s->L - 1, count = 1;
    if (o->layer && strcmp(o->layer, "all") == 0) {
        first = 0;
        count = s->L;
    } else if (o->layer) {
        char *end = NULL;
        long v = strtol(o->layer, &end, 10);
        if (end == o->layer || *end)
            return cli_usage_error("attention", "--layer '%s' is not a layer number or `all`",
                                   o->layer);
        if (v < 0 || v >= s->L)
            return cli_usage_error("attention", "--layer %s is not a layer of this model (0 to "
                                   "%d, or all)", o->layer, s->L - 1);
        first = (int)v;
    }
    if (o->head >= s->NH)
        return cli_usage_error("attention", "--head %d is not a head of this model (0 to %d)",
                               o->head, s->NH - 1);
    s->n_layers = count;
    s->n_heads = o->head >= 0 ? 1 : s->NH;
    s->layers = malloc((size_t)count * sizeof *s->layers);
    s->heads = malloc((size_t)s->n_heads * sizeof *s->heads);
    if (!s->layers || !s->heads) return ATTN_NO_MEMORY;
    for (int i = 0; i < count; i++) s->layers[i] = first + i;
    for (int i = 0; i < s->n_heads; i++) s->heads[i] = o->head >= 0 ? o->head : i;
    return CLI_OK;
}

static int encode(vka_context *ctx, const vka_tokenizer *tok, const char *prompt, int max_T,
                  shown *s) {
    size_t len = strlen(prompt), n = 0;
    s->ids = malloc(len * sizeof *s->ids);
    if (!s->ids) return ATTN_NO_MEMORY;
    vka_result r = vka_tokenizer_encode(tok, prompt, len, s->ids, &n);
    if (r != VKA_SUCCESS) return cli_fail("attention", ctx, r, "--prompt");
    if (n > (size_t)max_T)
        return cli_usage_error("attention", "--prompt is %zu tokens, longer than the model's "
                               "context (max_T = %d tokens)", n, max_T);
    s->T = (int)n;
    s->labels = malloc(n * sizeof *s->labels);
    s->label_ptrs = malloc(n * sizeof *s->label_ptrs);
    s->label_chars = malloc(n * sizeof *s->label_chars);
    if (!s->labels || !s->label_ptrs || !s->label_chars) return ATTN_NO_MEMORY;
    for (size_t t = 0; t < n; t++) {
        size_t blen = 0;
        const char *bytes = vka_tokenizer_decode(tok, s->ids[t], &blen);
        s->label_chars[t] = attn_label(bytes ? bytes : "", bytes ? blen : 0, s->labels[t]);
        s->label_ptrs[t] = s->labels[t];
    }
    return CLI_OK;
}

/* The weights of the chosen layers and heads. */
static int compute(vka_context *ctx, vka_gpt *gpt, shown *s) {
    size_t TT = (size_t)s->T * s->T;
    float *all = malloc((size_t)s->NH * TT * sizeof *all);
    s->weights = malloc((size_t)s->n_layers * s->n_heads * TT * sizeof *s->weights);
    int rc = all && s->weights ? CLI_OK : ATTN_NO_MEMORY;
    for (int li = 0; li < s->n_layers && rc == CLI_OK; li++) {
        vka_result r = vka_gpt_attention_weights(gpt, s->ids, s->T, s->layers[li], all);
        if (r != VKA_SUCCESS) {
            rc = cli_fail("attention", ctx, r, "attention weights");
            break;
        }
        for (int hi = 0; hi < s->n_heads; hi++)
            memcpy(s->weights + ((size_t)li * s->n_heads + hi) * TT,
                   all + (size_t)s->heads[hi] * TT, TT * sizeof *all);
    }
    free(all);
    return rc;
}

static void print_json(const attention_opts *o, const vka_tokenizer *tok, const shown *s) {
    printf("{\"model\":");
    cli_json_string(stdout, o->model);
    printf(",\"L\":%d,\"NH\":%d,\"T\":%d,\"tokens\":[", s->L, s->NH, s->T);
    for (int t = 0; t < s->T; t++) {
        size_t blen = 0;
        const char *bytes = vka_tokenizer_decode(tok, s->ids[t], &blen);
        printf("%s{\"id\":%d", t ? "," : "", (int)s->ids[t]);
        cli_json_key(stdout, "text");
        cli_json_string_n(stdout, bytes ? bytes : "", bytes ? blen : 0);
        cli_json_str(stdout, "label", s->labels[t]);
        printf("}");
    }
    printf("],\"layers\":[");
    size_t TT = (size_t)s->T * s->T;
    for (int li = 0; li < s->n_layers; li++) {
        printf("%s{\"layer\":%d,\"heads\":[", li ? "," : "", s->layers[li]);
        for (int hi = 0; hi < s->n_heads; hi++) {
            const float *w = s->weights + ((size_t)li * s->n_heads + hi) * TT;
            printf("%s{\"head\":%d,\"weights\":[", hi ? "," : "", s->heads[hi]);
            for (int t = 0; t < s->T; t++) {
                printf("%s[", t ? "," : "");
                for (int j = 0; j < s->T; j++) {
                    if (j) putchar(',');
                    cli_json_number(stdout, w[(size_t)t * s->T + j]);
                }
                putchar(']');
            }
            printf("]}");
        }
        printf("]}");
    }
    printf("]}\n");
}

/* "layer 1 (the last)", "layers 0-3", for the title and the note. */
static void layers_text(const shown *s, char *out, size_t cap) {
    if (s->n_layers > 1) snprintf(out, cap, "layers 0-%d", s->L - 1);
    else snprintf(out, cap, "layer %d%s", s->layers[0], s->layers[0] == s->L - 1 ? " (the last)" : "");
}

/* --svg must not name the model, its tokenizer (given or beside it) or its training state: a
 * picture written there would replace them. */
static int check_svg_overwrites_nothing(const attention_opts *o) {
    char *tok = cli_sibling_path(o->model, ".tokenizer.bin");
    char *state = cli_sibling_path(o->model, ".state.bin");
    const struct {
        const char *path, *what;
    } inputs[] = {{o->model, "the model (--model)"},
                  {o->tokenizer ? o->tokenizer : tok, "the tokenizer"},
                  {state, "the model's training state"}};
    int rc = CLI_OK;
    for (size_t i = 0; i < sizeof inputs / sizeof inputs[0] && rc == CLI_OK; i++)
        if (inputs[i].path && cli_same_file(o->svg, inputs[i].path))
            rc = cli_usage_error("attention", "--svg %s is %s; the picture would replace it",
                                 o->svg, inputs[i].what);
    free(tok);
    free(state);
    return rc;
}

static int write_svg(vka_context *ctx, const attention_opts *o, const shown *s) {
    char which[64], title[1024];
    layers_text(s, which, sizeof which);
    snprintf(title, sizeof title, "Attention weights of %s, %s", o->model, which);
    attn_picture pic = {.title = title, .T = s->T, .labels = s->label_ptrs,
                        .label_chars = s->label_chars, .n_layers = s->n_layers,
                        .n_heads = s->n_heads, .layers = s->layers, .heads = s->heads,
                        .weights = s->weights};
    size_t len = 0;
    char *svg = attn_svg(&pic, &len);
    int rc = svg ? cli_write_file_atomic("attention", ctx, o->svg, svg, len) : ATTN_NO_MEMORY;
    if (rc == CLI_OK)
        fprintf(o->json ? stderr : stdout, "vkattn attention: wrote %s: %s, %s, %d tokens\n",
                o->svg, which, s->n_heads > 1 ? "every head" : "one head", s->T);
    free(svg);
    return rc;
}

static int attention(vka_context *ctx, const attention_opts *o) {
    vka_tokenizer *tok = NULL;
    vka_gpt *gpt = NULL;
    shown s = {0};
    int rc = cli_load_model("attention", ctx, o->model, o->tokenizer, &gpt, &tok);
    if (rc != CLI_OK) return rc;
    vka_gpt_config cfg = vka_gpt_get_config(gpt);
    s.L = cfg.L;
    s.NH = cfg.NH;
    rc = choose(o, &s);
    if (rc == CLI_OK) rc = encode(ctx, tok, o->prompt, cfg.max_T, &s);
    if (rc == CLI_OK) rc = compute(ctx, gpt, &s);
    if (rc == CLI_OK && o->svg) rc = write_svg(ctx, o, &s);
    if (rc == CLI_OK && o->json) {
        print_json(o, tok, &s);
        if (fflush(stdout) != 0 || ferror(stdout)) {
            fprintf(stderr, "vkattn attention: cannot write to standard output\n");
            rc = CLI_ERROR;
        }
    }
    if (rc == ATTN_NO_MEMORY) {
        fprintf(stderr, "vkattn attention: out of memory\n");
        rc = CLI_ERROR;
    }
    shown_free(&s);
    vka_gpt_destroy(gpt);
    vka_tokenizer_destroy(tok);
    return rc;
}

int cmd_attention(int argc, char **argv) {
    attention_opts o = {.head = -1};
    cli_opt opts[] = {
        CLI_STRING("model", &o.model, "MODEL", "llm.c checkpoint to load (required)"),
        CLI_STRING("prompt", &o.prompt, "TEXT", "the text whose attention is shown (required)"),
        CLI_STRING("layer", &o.layer, "L", "layer number, or all (default: the last layer)"),
        CLI_INT("head", &o.head, "H", "show head H only (default: every head)", 0, 1 << 16),
        CLI_STRING("svg", &o.svg, "FILE", "write the picture to FILE (SVG)"),
        CLI_FLAG("json", &o.json, "print the tokens and weights as JSON on stdout"),
        CLI_STRING("tokenizer", &o.tokenizer, "FILE", "tokenizer file (default: beside MODEL)"),
        CLI_BACKEND_OPTS(&o.b),
    };
    int n_opts = (int)(sizeof opts / sizeof opts[0]);
    int rc = cli_parse(&attention_cmd, argc, argv, opts, n_opts);
    if (rc != CLI_OK) return rc < 0 ? CLI_OK : rc;
    if (!o.model) return cli_usage_error("attention", "--model MODEL is required");
    if (!o.prompt) return cli_usage_error("attention", "--prompt TEXT is required");
    if (!o.svg && !o.json)
        return cli_usage_error("attention", "say where the weights go: --svg FILE, --json, or both");
    rc = cli_check_backend_opts("attention", &o.b, CLI_USES_CHOSEN(&o.b));
    if (rc == CLI_OK && o.svg)
        rc = cli_check_writable("attention", "--svg", o.svg, "", "attention.svg");
    if (rc == CLI_OK && o.svg) rc = check_svg_overwrites_nothing(&o);
    if (rc != CLI_OK) return rc;
    vka_context *ctx = NULL;
    rc = cli_context("attention", &o.b, &ctx);
    if (rc != CLI_OK) return rc;
    rc = attention(ctx, &o);
    return cli_finish("attention", ctx, rc);
}
