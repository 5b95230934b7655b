/*
 * vkattn train, shared by cmd_train.c (options, resume, setup), train_loop.c (the loop, the
 * learning-rate schedule, evaluation, saving, signals) and train_report.c (progress as text or
 * JSON lines).
 */
#ifndef VKA_TRAIN_H
#define VKA_TRAIN_H

#include "cli.h"

typedef struct train_opts {
    const char *data;     /* NULL = the built-in corpus */
    const char *out;      /* model path; NULL = default */
    const char *resume;   /* training state to continue, or NULL */
    const char *val_data; /* validation files (a glob); NULL = the last 10% of --data */
    const char *tokenizer;/* tokenizer file; NULL = beside --init's model, else built from text */
    const char *init;     /* model whose weights the run starts from, or NULL */
    int vocab_size;       /* --vocab-size: learn a BPE vocabulary of this many tokens; 0 = no */
    cli_backend_opts b;
    int layers, heads, embd, ctx, batch;
    int grad_accum;       /* --grad-accum: micro-batches of --batch rows per step */
    int steps, warmup;    /* warmup -1 = steps / 20 */
    float lr, min_lr;     /* min_lr < 0 = lr / 10 */
    float weight_decay, grad_clip, beta1, beta2;
    uint64_t seed;
    int eval_every, eval_windows, save_every, stop_at, log_every;
    bool json, quiet, profile;
    int save_precision;   /* index into train_save_precision_names: 0 fp32, 1 bf16, 2 fp16 */
} train_opts;

/* --save-precision's names; fp16 is listed to be refused with the reason. */
extern const char *const train_save_precision_names[];
enum { TRAIN_SAVE_FP32 = 0, TRAIN_SAVE_BF16 = 1, TRAIN_SAVE_FP16 = 2 };

#define TRAIN_MAX_PROFILED_OPS 64
#define TRAIN_SAVE_EVERY_DEFAULT 500

/* What train_report.c keeps between calls. */
typedef struct train_report_state {
    bool tty;               /* stdout is a terminal: one updating progress line */
    bool line_open;         /* a progress line without its newline is on the terminal */
    double t_start;         /* when the first step of this invocation ended */
    double last_draw;       /* when the progress line was last redrawn */
    double sum_ms;          /* step times after the first (which records the graphs) */
    uint64_t n_ms;
} train_report_state;

typedef struct train_run {
    const train_opts *o;
    vka_context *ctx;
    vka_data *data;
    vka_tokenizer *tok;     /* loaded (resume, --tokenizer, --init); else the data's own */
    const char *tok_source; /* the file tok came from, for messages (NULL: built from text) */
    char *tok_path_given;   /* tok_source's storage */
    int ctx_T;              /* context of a new run: --ctx (at most --init's model's) */
    vka_gpt *gpt;
    vka_train_state st;     /* st.step = optimizer steps done */
    char *model_path, *tok_path, *state_path;
    char *resumed_tok_path; /* the tokenizer saved with the --resume state, or NULL if none */
    char *lock_path;        /* "<model without .bin>.lock", held for the whole run */
    int lock_fd;            /* its descriptor, locked (fcntl F_WRLCK); -1: none */
    char device[256];
    const char *backend;    /* "vulkan" or "cpu" */
    const char *precision;  /* "fp32", "bf16" or "fp16": the model's (--precision, or the resumed
                               state's) */
    uint64_t first_step;    /* st.step when this invocation started */
    const char *good_state; /* the last complete set on disk (its state file): the --resume
                             * state, then each save's; NULL: none yet */
    uint64_t good_step;     /* the step it holds */
    double last_val;        /* latest validation loss (NaN: none yet) */
    double last_val_bpb;    /* its bits per byte */
    size_t val_windows;     /* windows the evaluations score */
    FILE *info;             /* human messages: stdout, or stderr with --json; NULL with --quiet */
    train_report_state rep;
    /* --profile: per-op times of the last training step (vka_gpt_times) */
    vka_op_time prof[TRAIN_MAX_PROFILED_OPS];
    int prof_count;
    double prof_total_ms;
} train_run;

/* The learning rate of the step that takes the model from st->step = s to s + 1 (see the
 * schedule in cmd_train.c's help and docs/commands.md). */
float train_lr_at(const vka_train_state *st, uint64_t s);
/* Rows (windows) per optimizer step: B per micro-batch times adamw.grad_accum (0: 1). */
int train_step_rows(const vka_train_state *st);
/* Run the steps from r->st.step to the end (or --stop-at, or a signal), evaluating, reporting
 * and saving. Returns an exit code. */
int train_loop(train_run *r);
/* Mean validation loss over r->val_windows windows (vka_gpt_eval on chunks of them, combined
 * by window count), rounded to float32 as the state's best_val_loss is stored, so that the two
 * compare and print alike. An interrupt is checked between chunks: then *abandoned is set and
 * *loss untouched. */
vka_result train_eval(train_run *r, double *loss, bool *abandoned);
/* While held, a second interrupt waits (train_save's renames); released, a waiting one aborts. */
void train_hold_abort(bool hold);

/* The vocabulary of a new run (train_vocab.c): learned (--vocab-size) or loaded (--tokenizer)
 * into r->tok, or left NULL (the data builds a character-level one). Prints why not and returns
 * an exit code. */
int train_vocabulary(train_run *r);

/* Files (train_files.c). */
/* The model, tokenizer and state paths from --out or --resume (and the tokenizer saved with the
 * state resumed from), then the checks before the first step: no output is an input (--data,
 * the state and tokenizer resumed from), and the output directory takes new files. Prints why
 * and returns an exit code. A --resume that does not look like a state leaves the paths unset
 * (loading it says why): call again once it has loaded. Last, the run's files are locked
 * (train_unlock): a second run on them is refused, naming the process that holds them. */
int train_files(train_run *r);
/* Give up the lock train_files took on the run's files (and remove the lock file). */
void train_unlock(train_run *r);
/* Whether the output directory has room for the three files of this model (at the moment:
 * saves fail cleanly anyway when it fills up later). Prints why and returns CLI_ERROR if not. */
int train_check_space(const train_run *r);
/* Save tokenizer, model and state all or nothing: each to "<final>.new" first, then, when all
 * three are written, each renamed into place. On failure print why, remove the staged files and
 * return CLI_ERROR (the files already there are untouched). */
int train_save(train_run *r);

/* Progress (train_report.c). */
typedef struct train_progress {
    uint64_t step;          /* steps done after this one */
    float loss, lr, grad_norm;
    double val_loss;        /* NaN if not evaluated at this step */
    double ms;              /* this step's wall time */
    bool skipped;           /* loss scaling skipped it: its gradients overflowed */
    float loss_scale;       /* the scale the step ran with (1 when loss scaling is off) */
} train_progress;

void report_start(train_run *r);
void report_step(train_run *r, const train_progress *p);
/* event: "done", "stopped" or "interrupted"; val_loss NaN if none. */
void report_end(train_run *r, const char *event, double val_loss);
/* A NaN or infinite loss or gradient norm after step p->step: says so, which files were kept
 * (r->good_state's set) and the command that resumes from them. */
void report_diverged(train_run *r, const train_progress *p);
/* After a failed step or evaluation (its error already printed): which files hold the last good
 * step and how to continue from them. */
void report_failed(train_run *r);
/* After a failed save (its reason printed already): the step that was not saved, which files
 * hold the last good one (or that there are none yet) and the command that resumes from them. */
void report_save_failed(train_run *r);
/* A human message (to r->info), ending any progress line first. */
void report_note(train_run *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
