/* vkattn train: progress as text (one updating line on a terminal, a line every --log-every
 * steps otherwise) or as JSON lines (--json). */
#define _POSIX_C_SOURCE 200809L /* isatty, fileno */
#include "train.h"
#include "progress.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* End an open progress line so the next message starts on its own line. */
static void close_line(train_run *r) {
    if (!r->rep.line_open) return;
    fputc('\n', stdout);
    r->rep.line_open = false;
}

void report_note(train_run *r, const char *fmt, ...) {
    /* Formatted first, then written as one line (and vfprintf on the stream itself draws a
     * false "null format string" warning from GCC 12 with -fsanitize=undefined). */
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    FILE *f = r->info ? r->info : stderr;
    if (f == stdout) close_line(r);
    fprintf(f, "vkattn train: %s\n", msg);
    fflush(f);
}

void report_start(train_run *r) {
    r->rep.tty = !r->o->json && isatty(fileno(stdout));
    vka_gpt_config c = vka_gpt_get_config(r->gpt);
    size_t n_train = vka_data_num_tokens(r->data, VKA_SPLIT_TRAIN);
    size_t n_val = vka_data_num_tokens(r->data, VKA_SPLIT_VAL);
    size_t params = vka_gpt_num_params(r->gpt);
    const vka_train_state *st = &r->st;
    if (r->o->json) {
        printf("{\"event\":\"start\"");
        cli_json_str(stdout, "backend", r->backend);
        cli_json_str(stdout, "device", r->device);
        cli_json_str(stdout, "precision", r->precision);
        printf(",\"params\":%zu,\"L\":%d,\"NH\":%d,\"C\":%d,\"T\":%d,\"V\":%d,\"B\":%d"
               ",\"first_step\":%llu,\"total_steps\":%llu,\"train_tokens\":%zu,\"val_tokens\":%zu"
               ",\"val_windows\":%zu,\"grad_accum\":%d}\n",
               params, c.L, c.NH, c.C, st->T, c.V, st->B, (unsigned long long)st->step + 1,
               (unsigned long long)st->total_steps, n_train, n_val, r->val_windows,
               train_step_rows(st) / st->B);
        fflush(stdout);
    }
    if (!r->info) return;
    FILE *f = r->info;
    fprintf(f, "data: %s: %zu training and %zu validation tokens, vocabulary of %d\n",
            r->o->data ? r->o->data : "the built-in corpus", n_train, n_val, c.V);
    fprintf(f, "model: L=%d NH=%d C=%d T=%d V=%d (Vp=%d): %zu parameters (%.2f M)\n", c.L, c.NH,
            c.C, c.max_T, c.V, c.Vp, params, (double)params / 1e6);
    fprintf(f, "backend: %s on %s, %s\n", r->backend, r->device,
            strcmp(r->precision, "fp32") == 0   ? "fp32"
            : strcmp(r->precision, "bf16") == 0 ? "bf16 mixed precision (fp32 master weights)"
                                                : "fp16 mixed precision (fp32 master weights, "
                                                  "dynamic loss scaling)");
    char accum[64] = "";
    if (train_step_rows(st) > st->B)
        snprintf(accum, sizeof accum, " (%d micro-batches of %d)", train_step_rows(st) / st->B,
                 st->B);
    fprintf(f, "training: steps %llu..%llu of %llu, batch %d%s x %d = %d tokens/step, lr %g -> "
            "%g, warm-up %d, weight decay %g, grad clip %g\n",
            (unsigned long long)st->step + 1, (unsigned long long)st->total_steps,
            (unsigned long long)st->total_steps, train_step_rows(st), accum, st->T,
            train_step_rows(st) * st->T, (double)st->lr,
            (double)st->min_lr, st->warmup_steps, (double)st->adamw.weight_decay,
            (double)st->adamw.grad_clip);
    fprintf(f, "validation: %zu windows of %d+1 tokens%s\n", r->val_windows, st->T,
            st->eval_every > 0 ? "" : " (at the end only)");
    fflush(f);
}

static void json_step(const train_run *r, const train_progress *p, double tokens_per_s) {
    printf("{\"step\":%llu", (unsigned long long)p->step);
    cli_json_num(stdout, "loss", p->loss);
    cli_json_num(stdout, "lr", p->lr);
    cli_json_num(stdout, "grad_norm", p->grad_norm);
    cli_json_num(stdout, "ms", p->ms);
    cli_json_num(stdout, "tokens_per_s", tokens_per_s);
    if (p->loss_scale != 1.0f) cli_json_num(stdout, "loss_scale", p->loss_scale);
    if (p->skipped) printf(",\"skipped\":true");
    if (!isnan(p->val_loss)) {
        cli_json_num(stdout, "val_loss", p->val_loss);
        cli_json_num(stdout, "bits_per_byte", r->last_val_bpb);
    }
    printf("}\n");
    fflush(stdout);
}

void report_step(train_run *r, const train_progress *p) {
    train_report_state *rep = &r->rep;
    const vka_train_state *st = &r->st;
    double now = cli_now();
    bool first = p->step == r->first_step + 1;
    if (first) rep->t_start = now;
    else {
        rep->sum_ms += p->ms;
        rep->n_ms++;
    }
    double tokens_per_s = p->ms > 0 ? (double)train_step_rows(st) * st->T / (p->ms / 1e3) : 0.0;
    if (r->o->json) {
        json_step(r, p, tokens_per_s);
        return;
    }
    if (!r->info || r->info != stdout) return;
    bool evaluated = !isnan(p->val_loss), last = p->step == st->total_steps;
    if (rep->tty) {
        if (!evaluated && !last && !first && now - rep->last_draw < 0.1) return;
        rep->last_draw = now;
    } else if (!evaluated && !last && !first && p->step % (uint64_t)r->o->log_every != 0) {
        return;
    }
    /* ETA from the wall time per step since the first step of this invocation ended
     * (evaluations and saves included); none yet on the first, which builds the pipelines. */
    char f_eta[48];
    progress_eta(now - rep->t_start, p->step - r->first_step - 1, st->total_steps - p->step,
                 f_eta, sizeof f_eta);
    /* The fields in their order; on a terminal the highest ranks go first when the line would
     * be wider than it: tokens/s (ms/step says it), lr, ms/step, ETA, validation, loss. */
    char f_step[64], f_loss[32], f_val[64] = "", f_lr[32], f_ms[32], f_tok[32];
    snprintf(f_step, sizeof f_step, "step %*llu/%llu",
             (int)snprintf(NULL, 0, "%llu", (unsigned long long)st->total_steps),
             (unsigned long long)p->step, (unsigned long long)st->total_steps);
    snprintf(f_loss, sizeof f_loss, "loss %.4f", (double)p->loss);
    if (evaluated) snprintf(f_val, sizeof f_val, "val %.4f (%.4f bpb)", p->val_loss,
                                r->last_val_bpb);
    snprintf(f_lr, sizeof f_lr, "lr %.2e", (double)p->lr);
    snprintf(f_ms, sizeof f_ms, "%.1f ms/step", p->ms);
    snprintf(f_tok, sizeof f_tok, "%.0f tok/s", tokens_per_s);
    const progress_field fields[] = {{f_step, 0}, {f_loss, 1}, {f_val, 2}, {f_lr, 5},
                                     {f_ms, 4},   {f_tok, 6},  {f_eta, 3}};
    /* One column short of the width: a line filling the last column wraps on some terminals. */
    int width = rep->tty ? progress_width(fileno(stdout)) - 1 : 1 << 20;
    char line[512];
    progress_fit(fields, (int)(sizeof fields / sizeof fields[0]), " | ", width, line, sizeof line);
    if (rep->tty) fputs("\r\033[K", stdout);
    fputs(line, stdout);
    /* On a terminal, evaluated steps stay on screen as a record; others are overwritten. */
    if (rep->tty && !evaluated && !last) {
        rep->line_open = true;
    } else {
        fputc('\n', stdout);
        rep->line_open = false;
    }
    fflush(stdout);
}

static int by_ms_desc(const void *pa, const void *pb) {
    const vka_op_time *a = pa, *b = pb;
    return (a->ms < b->ms) - (a->ms > b->ms);
}

/* --profile: the last training step's time per kernel kind (the categories `vkattn bench`
 * uses), slowest first; the JSON also lists every op. */
static void report_profile(train_run *r, FILE *f) {
    vka_op_time *ops = r->prof;
    int n = r->prof_count;
    qsort(ops, (size_t)n, sizeof *ops, by_ms_desc);
    cli_kind_time kinds[CLI_MAX_KINDS];
    int n_kinds = cli_profile_kinds(ops, n, kinds, CLI_MAX_KINDS);
    if (r->o->json) {
        printf(",\"profile\":{\"step_ms\":");
        cli_json_number(stdout, r->prof_total_ms);
        cli_json_key(stdout, "kinds");
        cli_profile_json(stdout, kinds, n_kinds);
        printf(",\"ops\":[");
        for (int i = 0; i < n; i++) {
            printf("%s{\"op\":", i ? "," : "");
            cli_json_string(stdout, ops[i].op);
            cli_json_str(stdout, "kind", cli_op_kind(ops[i].op));
            printf(",\"calls\":%u", ops[i].calls);
            cli_json_num(stdout, "ms", ops[i].ms);
            printf("}");
        }
        printf("]}");
        return;
    }
    fprintf(f, "last training step: %.3f ms; per kernel kind (as `vkattn bench` reports them), "
            "slowest first:\n", r->prof_total_ms);
    cli_profile_print(f, kinds, n_kinds, "  ");
}

/* The command that continues this run: --resume, and every option the run used that the state
 * does not hold (the settings it holds come back from it). */
static void continue_command(FILE *f, const train_run *r, const char *state) {
    const train_opts *o = r->o;
    fputs("vkattn train --resume ", f);
    cli_shell_word(f, state);
    /* --resume saves to X.bin for X.state.bin: not --out's path when --out does not end in .bin. */
    char *derived = cli_state_sibling(state, ".bin");
    if (!derived || strcmp(derived, r->model_path) != 0) {
        fputs(" --out ", f);
        cli_shell_word(f, r->model_path);
    }
    free(derived);
    if (o->data) {
        fputs(" --data ", f);
        cli_shell_word(f, o->data);
    }
    if (o->val_data) {
        fputs(" --val-data ", f);
        cli_shell_word(f, o->val_data);
    }
    if (o->b.backend == VKA_BACKEND_CPU) fputs(" --backend cpu", f);
    if (o->b.device) fprintf(f, " --device %s", o->b.device);
    if (o->b.kernels) fprintf(f, " --kernels %s", cli_kernel_names[o->b.kernels]);
    if (o->b.threads) fprintf(f, " --threads %d", o->b.threads);
    if (o->save_every != TRAIN_SAVE_EVERY_DEFAULT) fprintf(f, " --save-every %d", o->save_every);
    if (o->save_precision) fprintf(f, " --save-precision %s",
                                   train_save_precision_names[o->save_precision]);
}

void report_end(train_run *r, const char *event, double val_loss) {
    const vka_train_state *st = &r->st;
    double mean_ms = r->rep.n_ms ? r->rep.sum_ms / (double)r->rep.n_ms : NAN;
    if (r->o->json) {
        printf("{\"event\":\"%s\"", event);
        cli_json_num(stdout, "val_loss", val_loss);
        cli_json_num(stdout, "bits_per_byte", isnan(val_loss) ? NAN : r->last_val_bpb);
        printf(",\"val_windows\":%zu", r->val_windows);
        cli_json_num(stdout, "best_val_loss", st->best_val_loss);
        cli_json_str(stdout, "backend", r->backend);
        cli_json_str(stdout, "device", r->device);
        printf(",\"steps\":%llu,\"total_steps\":%llu", (unsigned long long)st->step,
               (unsigned long long)st->total_steps);
        cli_json_num(stdout, "ms_per_step", mean_ms);
        cli_json_str(stdout, "precision", r->precision);
        printf(",\"skipped_steps\":%llu", (unsigned long long)vka_gpt_skipped_steps(r->gpt));
        cli_json_str(stdout, "model", r->model_path);
        cli_json_str(stdout, "tokenizer", r->tok_path);
        cli_json_str(stdout, "state", r->state_path);
        if (r->o->profile && r->prof_count > 0) report_profile(r, stdout);
        printf("}\n");
        fflush(stdout);
    }
    /* The summary is printed even with --quiet. */
    FILE *f = r->o->json ? stderr : stdout;
    if (f == stdout) close_line(r);
    if (strcmp(event, "done") == 0) {
        char ppl[32];
        cli_perplexity_text(exp(val_loss), ppl, sizeof ppl);
        fprintf(f, "done: %llu steps, validation loss %.4f (perplexity %s, %.4f bits per byte) "
                "over %zu windows\n", (unsigned long long)st->step, val_loss, ppl,
                r->last_val_bpb, r->val_windows);
    } else {
        fprintf(f, "%s at step %llu of %llu; continue with: ",
                strcmp(event, "interrupted") == 0 ? "interrupted" : "stopped",
                (unsigned long long)st->step, (unsigned long long)st->total_steps);
        continue_command(f, r, r->state_path);
        fputc('\n', f);
    }
    if (!isnan(mean_ms))
        fprintf(f, "%.1f ms/step on average (%.0f tokens/s) after the first step\n", mean_ms,
                (double)train_step_rows(st) * st->T / (mean_ms / 1e3));
    fprintf(f, "saved %s, %s, %s\n", r->model_path, r->tok_path, r->state_path);
    if (!r->o->json && r->o->profile && r->prof_count > 0) report_profile(r, f);
    fflush(f);
}

/* The set r->good_state belongs to: "model.state.bin with model.bin and model.tokenizer.bin". */
static void kept_files(FILE *f, const train_run *r) {
    bool ours = strcmp(r->good_state, r->state_path) == 0;
    char *model = ours ? NULL : cli_state_sibling(r->good_state, ".bin");
    const char *m = ours ? r->model_path : model, *t = ours ? r->tok_path : r->resumed_tok_path;
    fputs(r->good_state, f);
    if (m && t) fprintf(f, " with %s and %s", m, t);
    free(model);
}

/* Which files hold the last good step and the command that continues from them, or that this
 * run has none yet. */
static void report_kept(FILE *f, train_run *r) {
    if (!r->good_state) {
        fprintf(f, "vkattn train: no files were saved by this run before it (nothing to "
                "resume: start again)\n");
        return;
    }
    fprintf(f, "vkattn train: kept the files of step %llu (", (unsigned long long)r->good_step);
    kept_files(f, r);
    fputs("); continue from them with: ", f);
    continue_command(f, r, r->good_state);
    fputc('\n', f);
}

void report_diverged(train_run *r, const train_progress *p) {
    FILE *f = stderr; /* an error, even with --quiet */
    if (r->info == stdout) close_line(r);
    fprintf(f, "vkattn train: step %llu gave loss %g, gradient norm %g: not finite (the run "
            "diverged, and resuming would repeat it: start again with a lower --lr, or from the "
            "kept model with --init MODEL --lr LOWER%s); stopping, nothing saved\n",
            (unsigned long long)p->step, (double)p->loss, (double)p->grad_norm,
            r->precision && strcmp(r->precision, "fp16") == 0
                ? "; in fp16 an activation past 65504 overflows where --precision bf16 or fp32 "
                  "does not"
                : "");
    report_kept(f, r);
    fflush(f);
}

void report_failed(train_run *r) {
    FILE *f = stderr;
    if (r->info == stdout) close_line(r);
    report_kept(f, r);
    fflush(f);
}

void report_save_failed(train_run *r) {
    FILE *f = stderr;
    if (r->info == stdout) close_line(r);
    fprintf(f, "vkattn train: the files of step %llu were not saved; stopping\n",
            (unsigned long long)r->st.step);
    report_kept(f, r);
    fflush(f);
}
