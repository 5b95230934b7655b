/* Command-line parsing for every command: option values, the parser, --help (see cli.h). */
#include "cli.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

const char *const cli_backend_names[] = {"vulkan", "cpu", NULL};
const char *const cli_kernel_names[] = {"auto", "gpu", "cpu", NULL};
const char *const cli_attention_names[] = {"fused", "composed", NULL}; /* vka_attention_impl */
const char *const cli_precision_names[] = {"fp32", "bf16", "fp16", NULL}; /* vka_dtype */

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
