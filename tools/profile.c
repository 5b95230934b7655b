/* Per-op times folded into kernel kinds (see cli.h): the categories `vkattn train --profile` and
 * `vkattn bench` both print, and the names bench gives its kernel cases. */
#include "cli.h"

#include <stdlib.h>
#include <string.h>

/* Kinds in the order a training step first runs them; each lists the op names (as the library
 * labels them in vka_op_time.op) that belong to it. */
static const struct {
    const char *kind;
    const char *ops[CLI_KIND_MAX_OPS];
} kind_table[] = {
    {"encoder", {"encoder_forward", "encoder_backward"}},
    {"layernorm", {"layernorm_forward", "layernorm_backward"}},
    {"matmul", {"matmul", "matmul_bf16", "matmul_f16"}},
    {"convert", {"convert"}}, /* 16-bit copies of mixed precision */
    {"bias_backward", {"bias_backward"}},
    {"permute", {"permute_forward", "permute_backward", "unpermute_forward", "unpermute_backward"}},
    {"attention", {"attention_forward", "attention_backward", "kv_write"}},
    {"softmax", {"softmax_forward", "softmax_backward"}},
    {"gelu", {"gelu_forward", "gelu_backward"}},
    {"residual", {"residual_forward", "add_inplace"}},
    {"crossentropy", {"crossentropy_forward", "crossentropy_backward", "mean"}},
    {"adamw", {"grad_norm", "adamw"}},
    {"fill_copy", {"fill", "copy"}},
};
#define N_KINDS (int)(sizeof kind_table / sizeof kind_table[0])

/* Index into kind_table, or -1. */
static int kind_index(const char *op) {
    for (int k = 0; k < N_KINDS; k++)
        for (int i = 0; i < CLI_KIND_MAX_OPS && kind_table[k].ops[i]; i++)
            if (strcmp(kind_table[k].ops[i], op) == 0) return k;
    return -1;
}

const char *cli_op_kind(const char *op) {
    int k = kind_index(op);
    return k >= 0 ? kind_table[k].kind : op;
}

/* The slot of kind in out[0..*n), appended (in the fixed order for known kinds) if new. */
static cli_kind_time *slot(cli_kind_time *out, int *n, int cap, const char *kind) {
    for (int i = 0; i < *n; i++)
        if (strcmp(out[i].kind, kind) == 0) return &out[i];
    if (*n >= cap) return NULL;
    out[*n] = (cli_kind_time){.kind = kind};
    return &out[(*n)++];
}

static void add_op_name(cli_kind_time *k, const char *op) {
    /* each op appears once in the list */
    for (int i = 0; i < k->n_ops; i++)
        if (strcmp(k->ops[i], op) == 0) return;
    if (k->n_ops < CLI_KIND_MAX_OPS) k->ops[k->n_ops++] = op;
}

static void fold(cli_kind_time *s, const vka_op_time *op) {
    s->calls += op->calls;
    s->ms += op->ms;
    add_op_name(s, op->op);
}

int cli_profile_kinds(const vka_op_time *ops, int n, cli_kind_time *out, int cap) {
    int count = 0;
    /* Known kinds in table order, then unknown ops in their order of appearance. */
    for (int k = 0; k < N_KINDS; k++)
        for (int i = 0; i < n; i++) {
            if (kind_index(ops[i].op) != k) continue;
            cli_kind_time *s = slot(out, &count, cap, kind_table[k].kind);
            if (s) fold(s, &ops[i]);
        }
    for (int i = 0; i < n; i++) {
        if (kind_index(ops[i].op) >= 0) continue;
        cli_kind_time *s = slot(out, &count, cap, ops[i].op);
        if (s) fold(s, &ops[i]);
    }
    return count;
}

static int by_ms_desc(const void *pa, const void *pb) {
    const cli_kind_time *a = pa, *b = pb;
    return (a->ms < b->ms) - (a->ms > b->ms);
}

void cli_profile_print(FILE *f, const cli_kind_time *kinds, int n, const char *indent) {
    cli_kind_time sorted[CLI_MAX_KINDS];
    if (n > CLI_MAX_KINDS) n = CLI_MAX_KINDS;
    memcpy(sorted, kinds, (size_t)n * sizeof *kinds);
    qsort(sorted, (size_t)n, sizeof *sorted, by_ms_desc);
    double sum = 0.0;
    for (int i = 0; i < n; i++) sum += sorted[i].ms;
    fprintf(f, "%s%-14s %6s %10s %6s  %s\n", indent, "kind", "calls", "ms", "%", "ops");
    for (int i = 0; i < n; i++) {
        fprintf(f, "%s%-14s %6u %10.3f %5.1f%%  ", indent, sorted[i].kind, sorted[i].calls,
                sorted[i].ms, sum > 0 ? 100.0 * sorted[i].ms / sum : 0.0);
        for (int j = 0; j < sorted[i].n_ops; j++)
            fprintf(f, "%s%s", j ? ", " : "", sorted[i].ops[j]);
        fputc('\n', f);
    }
}

void cli_profile_json(FILE *f, const cli_kind_time *kinds, int n) {
    double sum = 0.0;
    for (int i = 0; i < n; i++) sum += kinds[i].ms;
    fputc('[', f);
    for (int i = 0; i < n; i++) {
        fprintf(f, "%s{\"kind\":", i ? "," : "");
        cli_json_string(f, kinds[i].kind);
        fprintf(f, ",\"calls\":%u", kinds[i].calls);
        cli_json_num(f, "ms", kinds[i].ms);
        cli_json_num(f, "percent", sum > 0 ? 100.0 * kinds[i].ms / sum : 0.0);
        fprintf(f, ",\"ops\":[");
        for (int j = 0; j < kinds[i].n_ops; j++) {
            if (j) fputc(',', f);
            cli_json_string(f, kinds[i].ops[j]);
        }
        fprintf(f, "]}");
    }
    fputc(']', f);
}
