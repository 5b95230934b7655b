/* vkattn train: the loop -- batches, the learning-rate schedule, steps, evaluation, saving,
 * and stopping cleanly on SIGINT/SIGTERM. */
#define _POSIX_C_SOURCE 200809L /* sigaction */
#include "train.h"

#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---------------------------------------------------------------------------------------------
 * Signals: the first SIGINT/SIGTERM asks the loop to stop after the current step (and save);
 * a second one says "aborted", restores the default action and re-raises it, so the process
 * ends at once, by that signal (a shell reports 130 for SIGINT). While train_save renames the
 * saved set into place, the second one waits for the renames (a few system calls). The
 * handler may run on any thread (OpenMP's too), so it only touches these flags.
 * ------------------------------------------------------------------------------------------- */
static volatile sig_atomic_t stop_signal, abort_held, abort_signal;

static void abort_now(int sig) {
    static const char msg[] = "\nvkattn train: aborted (second interrupt); the saved files are "
                              "those of the last complete save\n";
    ssize_t ignored = write(STDERR_FILENO, msg, sizeof msg - 1);
    (void)ignored;
    signal(sig, SIG_DFL);
    raise(sig);
}

static void on_signal(int sig) {
    if (!stop_signal) stop_signal = sig;
    else if (abort_held) abort_signal = sig;
    else abort_now(sig);
}

void train_hold_abort(bool hold) {
    abort_held = hold;
    if (!hold && abort_signal) abort_now(abort_signal);
}

static void catch_signals(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESTART; /* file reads and writes carry on; the loop polls stop_signal */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

/* ---------------------------------------------------------------------------------------------
 * Schedule
 * ------------------------------------------------------------------------------------------- */

float train_lr_at(const vka_train_state *st, uint64_t s) {
    double lr = st->lr, min_lr = st->min_lr;
    uint64_t W = (uint64_t)(st->warmup_steps > 0 ? st->warmup_steps : 0);
    if (s < W) return (float)(lr * (double)(s + 1) / (double)W);
    uint64_t span = st->total_steps > W + 1 ? st->total_steps - 1 - W : 1;
    double p = (double)(s - W) / (double)span;
    if (p > 1.0) p = 1.0;
    const double pi = 3.14159265358979323846;
    return (float)(min_lr + (lr - min_lr) * 0.5 * (1.0 + cos(pi * p)));
}

int train_step_rows(const vka_train_state *st) {
    return st->B * (st->adamw.grad_accum > 1 ? st->adamw.grad_accum : 1);
}

/* ---------------------------------------------------------------------------------------------
 * Evaluation and saving
 * ------------------------------------------------------------------------------------------- */

/* Validation windows per vka_gpt_eval call: one of the library's evaluation batches (2048
 * tokens), a fraction of a second on lavapipe, so that an interrupt is acted on soon. */
#define EVAL_CHUNK_TOKENS 2048

vka_result train_eval(train_run *r, double *loss, bool *abandoned) {
    size_t T = (size_t)r->st.T, per = EVAL_CHUNK_TOKENS / T ? EVAL_CHUNK_TOKENS / T : 1;
    int32_t *buf = malloc((per * T + 1) * sizeof *buf);
    if (!buf) return VKA_ERROR_OUT_OF_HOST_MEMORY;
    const vka_tokenizer *tok = vka_data_tokenizer(r->data);
    double sum = 0.0; /* of each chunk's mean loss times its windows */
    uint64_t bytes = 0; /* that the scored targets decode to (bits per byte) */
    size_t done = 0;
    vka_result res = VKA_SUCCESS;
    *abandoned = false;
    /* Windows start at 0, T, 2T, ...: windows [w, w + k) are tokens [w*T, (w + k)*T]; the
     * setup made r->val_windows * T + 1 at most the split's length. */
    while (done < r->val_windows) {
        if (stop_signal) {
            *abandoned = true;
            break;
        }
        size_t k = r->val_windows - done < per ? r->val_windows - done : per, windows = 0;
        double chunk = 0.0;
        res = vka_data_read_tokens(r->data, VKA_SPLIT_VAL, done * T, k * T + 1, buf);
        if (res == VKA_SUCCESS) res = vka_gpt_eval(r->gpt, buf, k * T + 1, (int)T, &chunk, &windows);
        if (res != VKA_SUCCESS) break;
        sum += chunk * (double)windows;
        bytes += cli_token_bytes(tok, buf + 1, k * T);
        done += windows;
    }
    free(buf);
    if (res != VKA_SUCCESS || *abandoned) return res;
    *loss = (double)(float)(sum / (double)done);
    r->last_val_bpb = cli_bits_per_byte(sum * (double)T, bytes);
    return VKA_SUCCESS;
}

/* ---------------------------------------------------------------------------------------------
 * The loop
 * ------------------------------------------------------------------------------------------- */

typedef struct batch_buf {
    int32_t *inputs, *targets; /* (grad_accum * B, T) */
} batch_buf;

/* One optimizer step on the next batch; fills p. With --grad-accum N the batch has N*B rows,
 * the rows a run with N*B rows per step draws: micro-batch k is rows [k*B, (k+1)*B). */
static vka_result step_once(train_run *r, batch_buf *bb, train_progress *p) {
    vka_train_state *st = &r->st;
    double t0 = cli_now();
    vka_result res = vka_data_batch(r->data, VKA_SPLIT_TRAIN, train_step_rows(st), st->T,
                                    &st->rng_state, bb->inputs, bb->targets);
    vka_adamw_desc opt = st->adamw;
    opt.lr = train_lr_at(st, st->step);
    float loss = NAN, norm = NAN, scale = vka_gpt_loss_scale(r->gpt);
    uint64_t skipped = vka_gpt_skipped_steps(r->gpt);
    if (res == VKA_SUCCESS)
        res = vka_gpt_train_step(r->gpt, bb->inputs, bb->targets, st->B, st->T, &opt, &loss, &norm);
    if (res != VKA_SUCCESS) return res;
    st->step++; /* a skipped step still took its batch and its place in the lr schedule */
    *p = (train_progress){.step = st->step, .loss = loss, .lr = opt.lr, .grad_norm = norm,
                          .val_loss = NAN, .ms = 1e3 * (cli_now() - t0),
                          .skipped = vka_gpt_skipped_steps(r->gpt) > skipped,
                          .loss_scale = scale};
    return VKA_SUCCESS;
}

/* CLI_OK with *val, CLI_INTERRUPTED when an interrupt abandoned the evaluation (then the state
 * says so: a resumed run does it first), or CLI_ERROR. */
static int evaluate(train_run *r, double *val) {
    bool abandoned = false;
    vka_result res = train_eval(r, val, &abandoned);
    if (res != VKA_SUCCESS) return cli_fail("train", r->ctx, res, "validation");
    if (abandoned) {
        *val = NAN;
        r->st.eval_pending = 1;
        report_note(r, "interrupted: the evaluation after step %llu is abandoned (a resumed run "
                    "does it first); saving (interrupt again to abort at once)",
                    (unsigned long long)r->st.step);
        return CLI_INTERRUPTED;
    }
    r->st.eval_pending = 0;
    r->last_val = *val;
    /* *val is a float32 value (train_eval): stored exactly, compared exactly. */
    if (isnan(r->st.best_val_loss) || *val < r->st.best_val_loss) r->st.best_val_loss = (float)*val;
    return CLI_OK;
}

/* Save, then report how the run ended. */
static int finish(train_run *r, const char *event, int code) {
    double val = NAN;
    if (strcmp(event, "done") == 0) {
        /* The last step evaluated already (the loop evaluates at the end), unless this run
         * resumed a finished one from a state that did not record it. */
        val = r->last_val;
        int rc = isnan(val) ? evaluate(r, &val) : CLI_OK;
        if (rc == CLI_INTERRUPTED) {
            event = "interrupted";
            code = CLI_INTERRUPTED;
        } else if (rc != CLI_OK) {
            return rc;
        }
    }
    int rc = train_save(r);
    if (rc != CLI_OK) return rc;
    report_end(r, event, val);
    return code;
}

/* A resumed run whose previous part abandoned an evaluation does it now, before its next step,
 * so that the run reports and keeps (best_val_loss) what an uninterrupted one would. */
static int pending_evaluation(train_run *r) {
    double val = NAN;
    int rc = evaluate(r, &val);
    if (rc != CLI_OK) return rc;
    if (r->o->json) {
        printf("{\"event\":\"validation\",\"steps\":%llu", (unsigned long long)r->st.step);
        cli_json_num(stdout, "val_loss", val);
        cli_json_num(stdout, "bits_per_byte", r->last_val_bpb);
        printf("}\n");
        fflush(stdout);
    }
    report_note(r, "validation loss after step %llu (the evaluation the interrupt abandoned): "
                "%.4f", (unsigned long long)r->st.step, val);
    return CLI_OK;
}

int train_loop(train_run *r) {
    vka_train_state *st = &r->st;
    const train_opts *o = r->o;
    size_t rows = (size_t)train_step_rows(st);
    batch_buf bb = {malloc(rows * st->T * sizeof(int32_t)), malloc(rows * st->T * sizeof(int32_t))};
    if (!bb.inputs || !bb.targets) {
        free(bb.inputs);
        free(bb.targets);
        fprintf(stderr, "vkattn train: out of memory for a batch of %zu x %d\n", rows, st->T);
        return CLI_ERROR;
    }
    catch_signals();
    report_start(r);
    int rc = CLI_OK;
    vka_result res;
    const char *event = "done";
    int code = CLI_OK; /* exit code when the save succeeds */
    if (st->eval_pending) rc = pending_evaluation(r);
    if (rc == CLI_INTERRUPTED) {
        event = "interrupted";
        code = CLI_INTERRUPTED;
        rc = CLI_OK;
    }
    while (rc == CLI_OK && code == CLI_OK && st->step < st->total_steps) {
        if (stop_signal) {
            report_note(r, "interrupted: saving at step %llu (interrupt again to abort at once)",
                        (unsigned long long)st->step);
            event = "interrupted";
            code = CLI_INTERRUPTED;
            break;
        }
        if (o->stop_at > 0 && st->step >= (uint64_t)o->stop_at) {
            event = "stopped";
            break;
        }
        train_progress p;
        res = step_once(r, &bb, &p);
        if (res != VKA_SUCCESS) {
            rc = cli_fail("train", r->ctx, res, "training step");
            report_failed(r);
            break;
        }
        if (o->profile) {
            /* Now: the evaluation below replaces the model's "last run". */
            int n = 0;
            res = vka_gpt_times(r->gpt, &r->prof_total_ms, r->prof, TRAIN_MAX_PROFILED_OPS, &n);
            if (res != VKA_SUCCESS) {
                rc = cli_fail("train", r->ctx, res, "--profile");
                break;
            }
            r->prof_count = n < TRAIN_MAX_PROFILED_OPS ? n : TRAIN_MAX_PROFILED_OPS;
        }
        /* Overflowed gradients under loss scaling are skipped and the scale halved (the
         * library's): the run goes on, unless the scale cannot go lower. */
        if (p.skipped && isfinite(p.loss) && p.loss_scale > 0x1p-24f) {
            report_note(r, "step %llu: the gradients overflowed at loss scale %g: step skipped, "
                        "the scale is now %g", (unsigned long long)p.step, (double)p.loss_scale,
                        (double)vka_gpt_loss_scale(r->gpt));
        } else if (!isfinite(p.loss) || !isfinite(p.grad_norm)) {
            report_diverged(r, &p);
            rc = CLI_ERROR;
            break;
        }
        bool eval_now = st->step == st->total_steps ||
                        (st->eval_every > 0 && st->step % (uint64_t)st->eval_every == 0);
        if (eval_now) rc = evaluate(r, &p.val_loss);
        if (rc == CLI_INTERRUPTED) {
            /* The step is done and reported; its evaluation is left for a resumed run. */
            report_step(r, &p);
            event = "interrupted";
            code = CLI_INTERRUPTED;
            rc = CLI_OK;
            break;
        }
        if (rc != CLI_OK) {
            report_failed(r);
            break;
        }
        report_step(r, &p);
        if (o->save_every > 0 && st->step % (uint64_t)o->save_every == 0 &&
            st->step < st->total_steps)
            rc = train_save(r);
    }
    if (rc == CLI_OK)
        rc = finish(r, event, code);
    free(bb.inputs);
    free(bb.targets);
    return rc;
}
