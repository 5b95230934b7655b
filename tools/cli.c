/* What the commands share: option parsing and help, contexts, errors, JSON (see cli.h). */
#define _POSIX_C_SOURCE 200809L /* clock_gettime, getpid */
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

const char *const cli_backend_names[] = {"vulkan", "cpu", NULL};
const char *const cli_kernel_names[] = {"auto", "gpu", "cpu", NULL};
const char *const cli_attention_names[] = {"fused", "composed", NULL}; /* vka_attention_impl */

int cli_usage_error(const char *cmd, const char *fmt, ...) {
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    /* One pointer to more help: the message's own "(see ...)" where it has one. */
    bool sees = strstr(msg, "(see ") != NULL;
    fprintf(stderr, "vkattn %s: %s", cmd, msg);
    if (sees) fputc('\n', stderr);
    else fprintf(stderr, " (see `vkattn %s --help`)\n", cmd);
    return CLI_USAGE;
}

cli_opt *cli_find(cli_opt *opts, int n_opts, const char *name) {
    for (int i = 0; i < n_opts; i++)
        if (strcmp(opts[i].name, name) == 0) return &opts[i];
    return NULL;
}

/* ---------------------------------------------------------------------------------------------
 * Values
 * ------------------------------------------------------------------------------------------- */

static int parse_int(const char *cmd, const cli_opt *o, const char *s) {
    char *end = NULL;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (end == s || *end || errno == ERANGE)
        return cli_usage_error(cmd, "--%s '%s' is not an integer", o->name, s);
    if ((double)v < o->min || (double)v > o->max)
        return cli_usage_error(cmd, "--%s %s is out of range (%.0f to %.0f)", o->name, s, o->min,
                               o->max);
    *(int *)o->value = (int)v;
    return CLI_OK;
}

static int parse_u64(const char *cmd, const cli_opt *o, const char *s) {
    char *end = NULL;
    errno = 0;
    /* strtoull accepts "-1" (as 2^64-1); a seed given as a negative number is a mistake. */
    unsigned long long v = strtoull(s, &end, 10);
    if (end == s || *end || errno == ERANGE || strchr(s, '-'))
        return cli_usage_error(cmd, "--%s '%s' is not a non-negative integer below 2^64", o->name,
                               s);
    *(uint64_t *)o->value = (uint64_t)v;
    return CLI_OK;
}

static int parse_float(const char *cmd, const cli_opt *o, const char *s) {
    char *end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end || !isfinite(v))
        return cli_usage_error(cmd, "--%s '%s' is not a finite number", o->name, s);
    bool low = o->min_open ? !(v > o->min) : !(v >= o->min);
    if (low || v > o->max)
        return cli_usage_error(cmd, "--%s %s is out of range (%s%g to %g)", o->name, s,
                               o->min_open ? "more than " : "", o->min, o->max);
    *(float *)o->value = (float)v;
    return CLI_OK;
}

static int parse_choice(const char *cmd, const cli_opt *o, const char *s) {
    for (int i = 0; o->choices[i]; i++)
        if (strcmp(o->choices[i], s) == 0) {
            *(int *)o->value = i;
            return CLI_OK;
        }
    char list[256] = "";
    size_t used = 0;
    for (int i = 0; o->choices[i] && used < sizeof list; i++)
        used += (size_t)snprintf(list + used, sizeof list - used, "%s%s", i ? ", " : "",
                                 o->choices[i]);
    return cli_usage_error(cmd, "--%s '%s' is not one of: %s", o->name, s, list);
}

static int set_value(const char *cmd, cli_opt *o, const char *s) {
    switch (o->kind) {
    case OPT_INT: return parse_int(cmd, o, s);
    case OPT_U64: return parse_u64(cmd, o, s);
    case OPT_FLOAT: return parse_float(cmd, o, s);
    case OPT_CHOICE: return parse_choice(cmd, o, s);
    case OPT_STRING:
        if (!*s) return cli_usage_error(cmd, "--%s needs a non-empty value", o->name);
        *(const char **)o->value = s;
        return CLI_OK;
    case OPT_FLAG: break;
    }
    return CLI_USAGE;
}

/* ---------------------------------------------------------------------------------------------
 * Parsing and help
 * ------------------------------------------------------------------------------------------- */

int cli_parse(const cli_command *cmd, int argc, char **argv, cli_opt *opts, int n_opts) {
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0) {
            cli_help(stdout, cmd, opts, n_opts);
            return -1;
        }
        if (strncmp(arg, "--", 2) != 0 || !arg[2])
            return cli_usage_error(cmd->name, "unexpected argument '%s'", arg);
        /* --name value, or --name=value */
        char name[64];
        const char *eq = strchr(arg + 2, '=');
        size_t len = eq ? (size_t)(eq - (arg + 2)) : strlen(arg + 2);
        snprintf(name, sizeof name, "%.*s", (int)(len < sizeof name ? len : sizeof name - 1),
                 arg + 2);
        cli_opt *o = len < sizeof name ? cli_find(opts, n_opts, name) : NULL;
        if (!o) return cli_usage_error(cmd->name, "unknown option '--%s'", name);
        if (o->kind == OPT_FLAG) {
            if (eq) return cli_usage_error(cmd->name, "--%s takes no value", o->name);
            *(bool *)o->value = true;
        } else {
            const char *value = eq ? eq + 1 : NULL;
            if (!value) {
                if (i + 1 >= argc)
                    return cli_usage_error(cmd->name, "--%s needs a value (%s)", o->name, o->metavar);
                value = argv[++i];
            }
            int rc = set_value(cmd->name, o, value);
            if (rc != CLI_OK) return rc;
        }
        o->set = true;
    }
    return CLI_OK;
}

/* text from column indent (where the cursor is) to at most width, continuation lines indented. */
static void print_wrapped(FILE *f, const char *text, int indent, int width) {
    int col = indent;
    const char *p = text;
    while (*p) {
        size_t word = strcspn(p, " ");
        if (col > indent && col + 1 + (int)word > width) {
            fprintf(f, "\n%*s", indent, "");
            col = indent;
        } else if (col > indent) {
            fputc(' ', f);
            col++;
        }
        fwrite(p, 1, word, f);
        col += (int)word;
        p += word;
        while (*p == ' ') p++;
    }
    fputc('\n', f);
}

void cli_help(FILE *f, const cli_command *cmd, const cli_opt *opts, int n_opts) {
    fprintf(f, "Usage: vkattn %s %s\n\n%s\n", cmd->name, cmd->usage, cmd->about);
    fprintf(f, "\nOptions:\n");
    for (int i = 0; i < n_opts; i++) {
        char left[64];
        snprintf(left, sizeof left, "--%s%s%s", opts[i].name, opts[i].metavar ? " " : "",
                 opts[i].metavar ? opts[i].metavar : "");
        if (strlen(left) <= 20) fprintf(f, "  %-20s  ", left);
        else fprintf(f, "  %s\n  %-20s  ", left, "");
        print_wrapped(f, opts[i].help, 24, 96);
    }
    fprintf(f, "  %-20s  %s\n", "-h, --help", "show this help");
    if (cmd->notes) fprintf(f, "\n%s\n", cmd->notes);
}

/* ---------------------------------------------------------------------------------------------
 * Contexts and errors
 * ------------------------------------------------------------------------------------------- */

typedef struct cli_log_state {
    const char *cmd;
    bool verbose;
    bool vulkan_only; /* cli_backend_opts.vulkan_only, for cli_fail's hints */
} cli_log_state;

/* The logger's state lives as long as the process (one context per command). */
static cli_log_state log_state;

/* Errors reach the user through vka_last_error(); the logger shows warnings and the
 * validation layer's messages (all messages with --verbose). */
static void cli_log(void *user, vka_log_level level, const char *msg) {
    const cli_log_state *s = user;
    bool validation = strncmp(msg, "validation:", 11) == 0;
    if (!s->verbose && level == VKA_LOG_ERROR && !validation) return;
    static const char *const names[] = {"error", "warning", "info", "debug"};
    fprintf(stderr, "vkattn %s: %s: %s\n", s->cmd, names[level], msg);
}

int cli_check_backend_opts(const char *cmd, const cli_backend_opts *b, unsigned uses) {
    bool vulkan = uses & CLI_USES_VULKAN, cpu = uses & CLI_USES_CPU;
    if (b->device) {
        const char *p = b->device;
        while (*p >= '0' && *p <= '9') p++;
        if (*p || p == b->device || p - b->device > 9)
            return cli_usage_error(cmd, "--device '%s' is not a device index (see `vkattn info`)",
                                   b->device);
        if (!vulkan)
            return cli_usage_error(cmd, "--device selects a Vulkan device; it does not apply to "
                                        "--backend cpu");
    }
    /* An option the chosen backends would ignore is a mistake, not a no-op. */
    if (!vulkan && b->kernels != 0)
        return cli_usage_error(cmd, "--kernels chooses Vulkan kernel variants; it does not apply "
                                    "to --backend cpu");
    if (!cpu && b->threads != 0)
        return cli_usage_error(cmd, "--threads sets the CPU backend's threads; it does not apply "
                                    "to --backend vulkan (add --backend cpu)");
    return CLI_OK;
}

vka_result cli_context_try(const char *cmd, const cli_backend_opts *b, vka_context **out,
                           char *why, size_t cap) {
    log_state = (cli_log_state){.cmd = cmd, .verbose = b->verbose, .vulkan_only = b->vulkan_only};
    vka_context_desc d = {
        .backend = b->backend == VKA_BACKEND_CPU ? VKA_BACKEND_CPU : VKA_BACKEND_VULKAN,
        .device = b->device,
        .cpu_threads = b->threads,
        .log = cli_log,
        .log_user_data = &log_state,
        .log_level = b->verbose ? VKA_LOG_INFO : VKA_LOG_WARN,
        .label = "vkattn",
        .kernels = b->kernels == 1 ? VKA_KERNELS_GPU : b->kernels == 2 ? VKA_KERNELS_CPU
                                                                       : VKA_KERNELS_AUTO,
        .cpu_kernels = b->cpu_kernels,
    };
    vka_context *ctx = NULL;
    vka_result r = vka_context_create(&d, &ctx);
    if (r != VKA_SUCCESS) {
        /* ctx is NULL only when host memory ran out. */
        const char *msg = ctx ? vka_last_error(ctx) : "";
        snprintf(why, cap, "%s", *msg ? msg : vka_result_string(r));
        vka_context_destroy(ctx);
        return r;
    }
    *out = ctx;
    return VKA_SUCCESS;
}

static int report(const char *cmd, const char *what, vka_result r, const char *msg, bool vulkan);

int cli_context(const char *cmd, const cli_backend_opts *b, vka_context **out) {
    char why[512];
    vka_result r = cli_context_try(cmd, b, out, why, sizeof why);
    if (r == VKA_SUCCESS) return CLI_OK;
    bool vulkan = b->backend != VKA_BACKEND_CPU;
    return report(cmd, vulkan ? "Vulkan" : "CPU backend", r, why, vulkan);
}

int cli_finish(const char *cmd, vka_context *ctx, int rc) {
    uint32_t n = vka_context_validation_messages(ctx);
    vka_context_destroy(ctx);
    if (n == 0) return rc;
    fprintf(stderr, "vkattn %s: the Vulkan validation layer reported %u message(s) (above)\n", cmd, n);
    return rc == CLI_OK ? CLI_ERROR : rc;
}

void cli_device_name(vka_context *ctx, char *out, size_t cap) {
    vka_device_info info;
    if (vka_context_selected_device(ctx, &info) == VKA_SUCCESS) snprintf(out, cap, "%s", info.name);
    else snprintf(out, cap, "unknown");
}

static bool device_problem(vka_result r) {
    return r == VKA_ERROR_NO_VULKAN || r == VKA_ERROR_NO_DEVICE || r == VKA_ERROR_UNSUPPORTED ||
           r == VKA_ERROR_DEVICE_LOST || r == VKA_ERROR_VULKAN;
}

/* msg without the library's advice to "use --backend cpu" (and the separator before it), for
 * the commands that have no --backend. */
static void without_backend_advice(const char *msg, char *out, size_t cap) {
    const char *advice = "use --backend cpu", *hit = strstr(msg, advice);
    if (!hit) {
        snprintf(out, cap, "%s", msg);
        return;
    }
    static const char *const separators[] = {", or ", " or ", "; ", ", "};
    size_t cut = (size_t)(hit - msg);
    for (size_t i = 0; i < sizeof separators / sizeof separators[0]; i++) {
        size_t n = strlen(separators[i]);
        if (cut >= n && strncmp(hit - n, separators[i], n) == 0) {
            cut -= n;
            break;
        }
    }
    snprintf(out, cap, "%.*s%s", (int)cut, msg, hit + strlen(advice));
}

/* After a device problem: what the user can do, in terms of the command's own options. */
static void device_hint(const char *cmd, vka_result r, const char *msg) {
    if (!device_problem(r) || strstr(msg, "is not a device index")) return;
    if (log_state.vulkan_only)
        fprintf(stderr, "vkattn %s: hint: `vkattn %s` needs a working Vulkan device (a GPU driver, "
                "or Mesa's lavapipe: mesa-vulkan-drivers); train, generate and eval also run "
                "without one, with --backend cpu\n", cmd, cmd);
    else if (!strstr(msg, "--backend cpu"))
        fprintf(stderr, "vkattn %s: hint: without a working Vulkan device, add --backend cpu\n",
                cmd);
}

/* Print "vkattn CMD: WHAT: MSG" and, on a Vulkan device problem, what to do about it. */
static int report(const char *cmd, const char *what, vka_result r, const char *msg, bool vulkan) {
    /* The library's messages may start with its function's name ("vka_gpt_eval: ") or with
     * the same word as what ("model: "): neither is said twice, nor the function named. */
    size_t fn = strncmp(msg, "vka_", 4) == 0 ? strspn(msg, "abcdefghijklmnopqrstuvwxyz0123456789_")
                                             : 0;
    if (fn && strncmp(msg + fn, ": ", 2) == 0) msg += fn + 2;
    size_t lw = strlen(what);
    if (strncmp(msg, what, lw) == 0 && strncmp(msg + lw, ": ", 2) == 0) msg += lw + 2;
    char text[1024];
    if (log_state.vulkan_only) without_backend_advice(msg, text, sizeof text);
    else snprintf(text, sizeof text, "%s", msg);
    fprintf(stderr, "vkattn %s: %s: %s\n", cmd, what, text);
    if (vulkan) device_hint(cmd, r, msg);
    return CLI_ERROR;
}

int cli_fail(const char *cmd, vka_context *ctx, vka_result r, const char *what) {
    const char *msg = vka_last_error(ctx);
    if (!*msg) msg = vka_result_string(r);
    return report(cmd, what, r, msg, ctx && vka_context_backend(ctx) == VKA_BACKEND_VULKAN);
}

/* ---------------------------------------------------------------------------------------------
 * Devices
 * ------------------------------------------------------------------------------------------- */

const char *cli_device_type_name(vka_device_type t) {
    switch (t) {
    case VKA_DEVICE_TYPE_INTEGRATED_GPU: return "integrated GPU";
    case VKA_DEVICE_TYPE_DISCRETE_GPU: return "discrete GPU";
    case VKA_DEVICE_TYPE_VIRTUAL_GPU: return "virtual GPU";
    case VKA_DEVICE_TYPE_CPU: return "CPU";
    default: return "other";
    }
}

const char *cli_vendor_name(uint32_t id) {
    switch (id) {
    case 0x1002: return "AMD";
    case 0x10DE: return "NVIDIA";
    case 0x8086: return "Intel";
    case 0x13B5: return "ARM";
    case 0x5143: return "Qualcomm";
    case 0x1010: return "Imagination";
    case 0x106B: return "Apple";
    case 0x10005: return "Mesa";
    default: return "unknown";
    }
}

/* Vulkan's version packing (variant:3, major:7, minor:10, patch:12). */
void cli_api_version(uint32_t v, char *out, size_t cap) {
    snprintf(out, cap, "%u.%u.%u", (v >> 22) & 0x7F, (v >> 12) & 0x3FF, v & 0xFFF);
}

/* Driver versions are vendor-specific; NVIDIA packs 10.8.8.6 bits, most others as Vulkan. */
void cli_driver_version(const vka_device_info *d, char *out, size_t cap) {
    uint32_t v = d->driver_version;
    if (d->vendor_id == 0x10DE)
        snprintf(out, cap, "%u.%u.%u.%u", v >> 22, (v >> 14) & 0xFF, (v >> 6) & 0xFF, v & 0x3F);
    else cli_api_version(v, out, cap);
}

/* ---------------------------------------------------------------------------------------------
 * What a file is
 * ------------------------------------------------------------------------------------------- */

/* The files' magic numbers (docs/files.md; src/model/checkpoint.c, src/model/tokenizer.c). */
#define CLI_MAGIC_MODEL 20240326u
#define CLI_MAGIC_TOKENIZER 20240328u
#define CLI_MAGIC_STATE 0x53414B56u /* "VKAS" */

cli_file_kind cli_file_kind_of(const char *path) {
    unsigned char b[64];
    FILE *f = fopen(path, "rb");
    if (!f) return CLI_FILE_UNKNOWN;
    size_t n = fread(b, 1, sizeof b, f);
    fclose(f);
    if (n >= 4) {
        uint32_t magic = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 |
                         (uint32_t)b[3] << 24;
        if (magic == CLI_MAGIC_MODEL) return CLI_FILE_MODEL;
        if (magic == CLI_MAGIC_TOKENIZER) return CLI_FILE_TOKENIZER;
        if (magic == CLI_MAGIC_STATE) return CLI_FILE_STATE;
        if (memcmp(b, "\x7f" "ELF", 4) == 0) return CLI_FILE_EXECUTABLE;
    }
    if (n == 0) return CLI_FILE_UNKNOWN;
    for (size_t i = 0; i < n; i++)
        if (b[i] < 0x20 && b[i] != '\n' && b[i] != '\r' && b[i] != '\t') return CLI_FILE_UNKNOWN;
    return CLI_FILE_TEXT;
}

static const char *kind_name(cli_file_kind k) {
    switch (k) {
    case CLI_FILE_MODEL: return "a model (llm.c GPT-2 checkpoint)";
    case CLI_FILE_TOKENIZER: return "a tokenizer file";
    case CLI_FILE_STATE: return "a training state";
    case CLI_FILE_EXECUTABLE: return "an executable program";
    case CLI_FILE_TEXT: return "a text file";
    case CLI_FILE_UNKNOWN: break;
    }
    return "an unknown file";
}

int cli_check_file_kind(const char *cmd, const char *what, const char *path,
                        cli_file_kind expected) {
    return cli_check_kind(cmd, what, path, cli_file_kind_of(path), expected);
}

int cli_check_kind(const char *cmd, const char *what, const char *path, cli_file_kind kind,
                   cli_file_kind expected) {
    if (kind == CLI_FILE_UNKNOWN || kind == expected) return CLI_OK;
    fprintf(stderr, "vkattn %s: %s: %s is %s, not %s", cmd, what, path, kind_name(kind),
            kind_name(expected));
    if (expected == CLI_FILE_MODEL && kind == CLI_FILE_STATE) {
        char *model = cli_state_sibling(path, ".bin");
        fprintf(stderr, ": give the model saved beside it (%s), or continue training with "
                "`vkattn train --resume %s`\n", model ? model : "MODEL.bin", path);
        free(model);
    } else if (expected == CLI_FILE_MODEL) {
        fprintf(stderr, ": give a model as `vkattn train --out MODEL` writes it (or a float32 "
                "llm.c GPT-2 checkpoint)%s\n",
                kind == CLI_FILE_TEXT ? "; text to score goes to `vkattn eval --data`" : "");
    } else if (expected == CLI_FILE_STATE) {
        fprintf(stderr, ": --resume takes the .state.bin file that `vkattn train` saves beside "
                "its model%s\n", kind == CLI_FILE_MODEL ? " (a model alone has no optimizer "
                "state to continue from)" : "");
    } else {
        fprintf(stderr, ": --tokenizer takes the .tokenizer.bin file that `vkattn train` saves "
                "beside its model\n");
    }
    return CLI_ERROR;
}

int cli_fail_load(const char *cmd, vka_context *ctx, vka_result r, const char *what,
                  const char *path, cli_file_kind expected) {
    if (cli_check_file_kind(cmd, what, path, expected) != CLI_OK) return CLI_ERROR;
    return cli_fail(cmd, ctx, r, what);
}

int cli_load_model(const char *cmd, vka_context *ctx, const char *model_path,
                   const char *tok_path, vka_gpt **gpt, vka_tokenizer **tok) {
    *gpt = NULL;
    *tok = NULL;
    /* The model first: a wrong or missing --model is the likelier mistake, and its error
     * should not be hidden behind the tokenizer's. */
    vka_result r = vka_gpt_load(ctx, model_path, gpt);
    if (r != VKA_SUCCESS) return cli_fail_load(cmd, ctx, r, "model", model_path, CLI_FILE_MODEL);
    char *beside = tok_path ? NULL : cli_sibling_path(model_path, ".tokenizer.bin");
    const char *tok_file = tok_path ? tok_path : beside;
    int rc = CLI_OK;
    if (!tok_file) {
        fprintf(stderr, "vkattn %s: out of memory\n", cmd);
        rc = CLI_ERROR;
    } else if ((r = vka_tokenizer_load(ctx, tok_file, tok)) != VKA_SUCCESS) {
        rc = cli_fail_load(cmd, ctx, r, "tokenizer", tok_file, CLI_FILE_TOKENIZER);
        if (!tok_path)
            fprintf(stderr, "vkattn %s: the tokenizer is looked for beside the model; give its "
                    "path with --tokenizer FILE\n", cmd);
    } else if (vka_tokenizer_vocab_size(*tok) != vka_gpt_get_config(*gpt).V) {
        int n_tok = vka_tokenizer_vocab_size(*tok);
        fprintf(stderr, "vkattn %s: the tokenizer %s has %d token%s but the model %s has V = %d: "
                "they do not belong together\n", cmd, tok_file, n_tok, n_tok == 1 ? "" : "s",
                model_path, vka_gpt_get_config(*gpt).V);
        rc = CLI_ERROR;
    } else if (vka_gpt_tokenizer_id(*gpt) && vka_gpt_tokenizer_id(*gpt) != vka_tokenizer_id(*tok)) {
        /* Same size, other symbols: the text would come out as garbage. A model without the
         * id (llm.c's, an older vkattn's) is taken on trust. */
        fprintf(stderr, "vkattn %s: the tokenizer %s is not the one the model %s was trained with "
                "(the model records tokenizer id %016llx, the file is %016llx): %s\n", cmd,
                tok_file, model_path, (unsigned long long)vka_gpt_tokenizer_id(*gpt),
                (unsigned long long)vka_tokenizer_id(*tok),
                tok_path ? "give the model's own tokenizer (the .tokenizer.bin saved beside it)"
                         : "the file beside the model was replaced; restore the one saved with it");
        rc = CLI_ERROR;
    }
    free(beside);
    if (rc != CLI_OK) {
        vka_tokenizer_destroy(*tok);
        vka_gpt_destroy(*gpt);
        *tok = NULL;
        *gpt = NULL;
    }
    return rc;
}

/* ---------------------------------------------------------------------------------------------
 * Files and output
 * ------------------------------------------------------------------------------------------- */

char *cli_sibling_path(const char *path, const char *suffix) {
    size_t len = strlen(path);
    if (len >= 4 && strcmp(path + len - 4, ".bin") == 0) len -= 4;
    char *out = malloc(len + strlen(suffix) + 1);
    if (!out) return NULL;
    memcpy(out, path, len);
    strcpy(out + len, suffix);
    return out;
}

char *cli_state_sibling(const char *state_path, const char *suffix) {
    const char *tail = ".state.bin";
    size_t len = strlen(state_path), lt = strlen(tail);
    if (len <= lt || strcmp(state_path + len - lt, tail) != 0) return NULL;
    char *out = malloc(len - lt + strlen(suffix) + 1);
    if (out) sprintf(out, "%.*s%s", (int)(len - lt), state_path, suffix);
    return out;
}

int cli_write_file_atomic(const char *cmd, vka_context *ctx, const char *path, const void *data,
                          size_t len) {
    vka_result r = vka_file_write_atomic(ctx, path, data, len);
    if (r == VKA_SUCCESS) return CLI_OK;
    const char *msg = ctx ? vka_last_error(ctx) : "";
    fprintf(stderr, "vkattn %s: cannot write %s: %s\n", cmd, path, *msg ? msg : vka_result_string(r));
    return CLI_ERROR;
}

char *cli_dir_of(const char *path) {
    const char *slash = strrchr(path, '/');
    size_t n = !slash ? 1 : slash == path ? 1 : (size_t)(slash - path);
    char *d = malloc(n + 1);
    if (d) snprintf(d, n + 1, "%s", slash ? path : ".");
    return d;
}

/* Why a file could not be created in dir (errno err), for cli_check_writable. */
static void say_not_creatable(const char *cmd, const char *path, const char *probe,
                              const char *dir, int err) {
    struct stat st;
    bool dir_missing = stat(dir, &st) != 0, not_dir = !dir_missing && !S_ISDIR(st.st_mode);
    fprintf(stderr, "vkattn %s: cannot write %s: ", cmd, path);
    if ((err == ENOENT || err == ENOTDIR) && dir_missing)
        fprintf(stderr, "the directory %s does not exist\n", dir);
    else if (err == ENOTDIR && not_dir)
        fprintf(stderr, "%s is not a directory\n", dir);
    else if (err == ENAMETOOLONG)
        fprintf(stderr, "the name %s, which writing it uses, is too long\n", probe);
    else
        fprintf(stderr, "cannot create files in %s: %s\n", dir, strerror(err));
}

int cli_check_writable(const char *cmd, const char *option, const char *path, const char *suffix,
                       const char *example) {
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
        /* "/tmp/x/" suggests /tmp/x/model.bin, not /tmp/x//model.bin ("/" stays "/"). */
        int n = (int)strlen(path);
        while (n > 1 && path[n - 1] == '/') n--;
        fprintf(stderr, "vkattn %s: %s is a directory; give %s a file name such as %.*s%s%s\n",
                cmd, path, option, n, path, path[n - 1] == '/' ? "" : "/", example);
        return CLI_ERROR;
    }
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
        fprintf(stderr, "vkattn %s: %s is not a regular file; give %s a file name\n", cmd, path,
                option);
        return CLI_ERROR;
    }
    size_t cap = strlen(path) + strlen(suffix) + 32;
    char *probe = malloc(cap), *dir = cli_dir_of(path);
    int rc = CLI_OK;
    if (!probe || !dir) {
        fprintf(stderr, "vkattn %s: out of memory\n", cmd);
        rc = CLI_ERROR;
    } else {
        snprintf(probe, cap, "%s%s.tmp.%ld", path, suffix, (long)getpid());
        int fd = open(probe, O_WRONLY | O_CREAT | O_EXCL, 0644);
        if (fd >= 0) {
            close(fd);
            unlink(probe);
        } else {
            say_not_creatable(cmd, path, probe, dir, errno);
            rc = CLI_ERROR;
        }
    }
    free(probe);
    free(dir);
    return rc;
}

/* The length of the well-formed UTF-8 sequence at p (n bytes left), or 0 if p[0] does not start
 * one (Unicode's Table 3-7: no overlong forms, no surrogates U+D800..DFFF, nothing above
 * U+10FFFF, no truncated sequence). */
static size_t utf8_sequence(const unsigned char *p, size_t n) {
    unsigned char c = p[0];
    if (c < 0x80) return 1;
    size_t len = c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3
               : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
    if (len == 0 || n < len) return 0;
    /* The second byte's range depends on the first (it rules out the overlongs, the
     * surrogates and what lies past U+10FFFF); the others are plain continuations. */
    unsigned char lo = c == 0xE0 ? 0xA0 : c == 0xF0 ? 0x90 : 0x80;
    unsigned char hi = c == 0xED ? 0x9F : c == 0xF4 ? 0x8F : 0xBF;
    if (p[1] < lo || p[1] > hi) return 0;
    for (size_t i = 2; i < len; i++)
        if ((p[i] & 0xC0) != 0x80) return 0;
    return len;
}

void cli_shell_word(FILE *f, const char *s) {
    size_t n = strlen(s);
    if (n && strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-+./,:=@%")
                 == n) {
        fputs(s, f);
        return;
    }
    const unsigned char *p = (const unsigned char *)s;
    bool plain = true; /* valid UTF-8 without control characters: single quotes keep it */
    for (size_t i = 0; i < n && plain;) {
        size_t len = utf8_sequence(p + i, n - i);
        plain = len > 0 && p[i] >= 0x20 && p[i] != 0x7F;
        i += len;
    }
    if (plain) {
        fputc('\'', f);
        for (; *s; s++) {
            if (*s == '\'') fputs("'\\''", f);
            else fputc(*s, f);
        }
        fputc('\'', f);
        return;
    }
    /* $'...' (bash, zsh, ksh, POSIX.1-2024 sh): a byte that is not UTF-8, or a control
     * character, as \xHH, so the word survives a copy from a UTF-8 terminal byte for byte. */
    fputs("$'", f);
    for (size_t i = 0; i < n;) {
        size_t len = utf8_sequence(p + i, n - i);
        if (len == 0 || p[i] < 0x20 || p[i] == 0x7F) {
            fprintf(f, "\\x%02X", p[i]);
            i++;
            continue;
        }
        if (p[i] == '\'' || p[i] == '\\') fputc('\\', f);
        fwrite(p + i, 1, len, f);
        i += len;
    }
    fputc('\'', f);
}

void cli_json_string_n(FILE *f, const char *s, size_t n) {
    const unsigned char *p = (const unsigned char *)s;
    fputc('"', f);
    for (size_t i = 0; i < n;) {
        unsigned char c = p[i];
        size_t len = utf8_sequence(p + i, n - i);
        if (len == 0) {
            /* Not UTF-8: the byte as Python's surrogateescape decodes it (docs/commands.md "JSON output"). */
            fprintf(f, "\\udc%02x", c);
            i++;
            continue;
        }
        if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c == '\n') fputs("\\n", f);
        else if (c == '\t') fputs("\\t", f);
        else if (c == '\r') fputs("\\r", f);
        else if (c < 0x20 || c == 0x7F) fprintf(f, "\\u%04x", c);
        else fwrite(p + i, 1, len, f);
        i += len;
    }
    fputc('"', f);
}

void cli_json_string(FILE *f, const char *s) { cli_json_string_n(f, s, strlen(s)); }

void cli_json_number(FILE *f, double x) {
    if (isfinite(x)) fprintf(f, "%.9g", x);
    else fputs("null", f);
}

void cli_json_key(FILE *f, const char *key) { fprintf(f, ",\"%s\":", key); }

void cli_json_num(FILE *f, const char *key, double x) {
    cli_json_key(f, key);
    cli_json_number(f, x);
}

void cli_json_str(FILE *f, const char *key, const char *s) {
    cli_json_key(f, key);
    cli_json_string(f, s);
}

void cli_perplexity_text(double ppl, char *out, size_t cap) {
    if (ppl < 1e6) snprintf(out, cap, "%.3f", ppl);
    else snprintf(out, cap, "%.3e", ppl); /* also "inf" when exp(loss) overflows */
}

double cli_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---------------------------------------------------------------------------------------------
 * Data
 * ------------------------------------------------------------------------------------------- */

int cli_data_paths(const char *cmd, const char *option, const char *pattern, char ***paths,
                   int *n) {
    *paths = NULL;
    *n = 0;
    bool wild = strpbrk(pattern, "*?[") != NULL && access(pattern, F_OK) != 0 &&
                strcmp(pattern, "-") != 0;
    if (!wild) {
        char **one = malloc(sizeof *one);
        if (one) one[0] = strdup(pattern);
        if (!one || !one[0]) {
            free(one);
            fprintf(stderr, "vkattn %s: out of memory\n", cmd);
            return CLI_ERROR;
        }
        *paths = one;
        *n = 1;
        return CLI_OK;
    }
    glob_t g;
    int rc = glob(pattern, 0, NULL, &g);
    if (rc == GLOB_NOMATCH || (rc == 0 && g.gl_pathc == 0)) {
        if (rc == 0) globfree(&g);
        return cli_usage_error(cmd, "%s %s: no file matches the pattern", option, pattern);
    }
    if (rc != 0) {
        fprintf(stderr, "vkattn %s: %s %s: cannot expand the pattern\n", cmd, option, pattern);
        return CLI_ERROR;
    }
    char **list = calloc(g.gl_pathc, sizeof *list);
    bool ok = list != NULL && g.gl_pathc < (size_t)1 << 30;
    for (size_t i = 0; ok && i < g.gl_pathc; i++) ok = (list[i] = strdup(g.gl_pathv[i])) != NULL;
    int count = (int)g.gl_pathc;
    globfree(&g);
    if (!ok) {
        cli_free_paths(list, count);
        fprintf(stderr, "vkattn %s: out of memory\n", cmd);
        return CLI_ERROR;
    }
    *paths = list;
    *n = count;
    return CLI_OK;
}

void cli_free_paths(char **paths, int n) {
    if (!paths) return;
    for (int i = 0; i < n; i++) free(paths[i]);
    free(paths);
}

uint64_t cli_token_bytes(const vka_tokenizer *tok, const int32_t *ids, size_t n) {
    uint64_t bytes = 0;
    for (size_t i = 0; i < n; i++) {
        size_t len = 0;
        vka_tokenizer_decode(tok, ids[i], &len);
        bytes += len;
    }
    return bytes;
}

double cli_bits_per_byte(double total_nats, uint64_t bytes) {
    return bytes ? total_nats / (log(2.0) * (double)bytes) : NAN;
}

bool cli_same_file(const char *a, const char *b) {
    struct stat sa, sb;
    if (stat(a, &sa) == 0 && stat(b, &sb) == 0)
        return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
    return strcmp(a, b) == 0;
}
