/* vkattn train: options, resuming, and setting up the data and the model (the loop is in
 * train_loop.c). */
#define _POSIX_C_SOURCE 200809L /* access */
#include "train.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const cli_command train_cmd = {
    .name = "train",
    .usage = "[options]",
    .about =
        "Train a GPT-2 on text or llm.c token files (default: the built-in corpus) and save\n"
        "the model, its tokenizer and the training state. The last 10% of the tokens are the\n"
        "validation split, unless --val-data gives validation files (llm.c's convention:\n"
        "--data 'dir/*_train_*.bin' --val-data 'dir/*_val_*.bin').",
    .notes =
        "Vocabulary: character level (the text's distinct bytes) unless --vocab-size N learns a\n"
        "byte-level BPE vocabulary of N tokens from the text (ids 0..255 the bytes, then the\n"
        "merges in the order learned, last <|endoftext|>; time on stderr), or --tokenizer FILE\n"
        "uses an llm.c tokenizer file (character level or BPE, e.g. GPT-2's gpt2_tokenizer.bin).\n"
        "\n"
        "Optimizer: AdamW, betas (--beta1, --beta2), eps 1e-8, decoupled weight decay on the 2-D\n"
        "weights only (wte, wpe, qkvw, attprojw, fcw, fcprojw); before each update the gradients\n"
        "are scaled so their global L2 norm is at most --grad-clip (0 = no clipping).\n"
        "\n"
        "Learning rate of step s (s = 0 .. steps-1), with W = --warmup and S = --steps:\n"
        "  s <  W:  lr * (s + 1) / W                                      (linear warm-up)\n"
        "  s >= W:  min_lr + (lr - min_lr) * (1 + cos(pi * (s - W) / max(1, S - 1 - W))) / 2\n"
        "so the first step after the warm-up uses lr and the last step uses min_lr.\n"
        "\n"
        "Batches: B windows of ctx+1 tokens at uniformly random offsets of the training split,\n"
        "drawn from a generator seeded by --seed (which also seeds the initial weights).\n"
        "--grad-accum N: each step draws N*B windows (the ones a run with --batch N*B draws) and\n"
        "runs them as N micro-batches of B through activations sized for B, summing their\n"
        "gradients before one clip and AdamW update: the step of a batch of N*B up to summation\n"
        "order, in the memory of B. Steps, the schedule and --steps count optimizer steps;\n"
        "tokens/step is N*B*ctx.\n"
        "Evaluation (every --eval-every steps and at the end): the mean loss over the windows of\n"
        "ctx+1 tokens of the validation split starting at 0, ctx, 2*ctx, ... (all of them, or the\n"
        "first --eval-windows); the same windows every time, so values are comparable.\n"
        "\n"
        "Data: each file is a text (tokenised with --tokenizer, or a character-level vocabulary\n"
        "of the texts' bytes) or an llm.c token file (magic 20240520; needs --tokenizer, its\n"
        "ids below the tokenizer's size); several files (a glob) are concatenated in order.\n"
        "Files are memory-mapped; - (standard input) is read into memory.\n"
        "\n"
        "--init MODEL starts a new run from MODEL's weights (an llm.c checkpoint: float32, version\n"
        "3, or bfloat16, version 5, widened to float32) with fresh AdamW moments at step 0. The\n"
        "model's shape is MODEL's (--layers, --heads, --embd with other values are an error; --ctx\n"
        "may be shorter than its context, default min(64, its context)). The tokenizer is\n"
        "--tokenizer, else MODEL's sibling .tokenizer.bin if there is one, else character-level\n"
        "from the text; its size must be MODEL's V.\n"
        "\n"
        "Files: MODEL (--out, default model.bin) is an llm.c GPT-2 checkpoint (float32, version 3;\n"
        "with --save-precision bf16, bfloat16, version 5: half the size, each weight rounded to\n"
        "the nearest bf16, what llm.c's bf16 build loads); its tokenizer is MODEL with .bin\n"
        "replaced by .tokenizer.bin (llm.c format); the training state (always float32: model,\n"
        "AdamW moments, step, batch generator, settings, the text's length and hash) is MODEL with\n"
        ".bin replaced by .state.bin (a MODEL without .bin keeps its name and gets the two\n"
        "suffixes appended). They are saved at the end, every --save-every steps, at --stop-at\n"
        "and on interrupt, all or nothing: each is written to NAME.new, and only when all three\n"
        "are complete renamed over NAME, so a failed save leaves the previous set as it was (a\n"
        "run killed while renaming: the next train on the files finishes the renames). No\n"
        "output may be an input (--data, or the state being resumed), and the output directory\n"
        "must take new files: both are checked before the first step. While it runs, the run\n"
        "holds a lock on its files (MODEL with .bin replaced by .lock): a second train on them\n"
        "is refused, naming the process. A failed save stops the run and names the files kept,\n"
        "their step and the --resume command.\n"
        "\n"
        "--resume STATE continues a run exactly where it stopped: the same batches, the same\n"
        "schedule and settings. STATE holds the model's shape (--layers, --heads, --embd, --ctx),\n"
        "--batch, --grad-accum, --steps, --warmup, --lr, --min-lr, --weight-decay, --grad-clip, --beta1, --beta2,\n"
        "--seed, --eval-every and --eval-windows; giving one of them with a different value is an\n"
        "error. STATE also records where its steps ran: without --backend the run continues on\n"
        "that backend with the same kernels; another --backend, --kernels or device is taken,\n"
        "with a notice that the losses are then no longer bit for bit those of an uninterrupted\n"
        "run. Give again what STATE does not hold: --data, --device, --threads, --save-every and\n"
        "--save-precision "
        "(the command printed at a stop or an interrupt has them all).\n"
        "STATE also records the length and hash of the text trained on: --data must give the\n"
        "same text. MODEL defaults to STATE with .state.bin replaced by .bin; a STATE whose name\n"
        "does not end in .state.bin needs --out. A finished run cannot be extended with a larger\n"
        "--steps (the schedule is part of the run): start a new run instead.\n"
        "\n"
        "Interrupt (Ctrl-C, SIGINT or SIGTERM): the current step finishes (an evaluation in\n"
        "progress is abandoned; a resumed run does it first), everything is saved and vkattn\n"
        "exits with status 130; a second interrupt prints \"aborted\" and ends the process at\n"
        "once by that signal (the files are those of the last complete save).\n"
        "\n"
        "--json: one JSON object per line on stdout, per step {\"step\",\"loss\",\"lr\",\"grad_norm\",\n"
        "\"ms\",\"tokens_per_s\"} (+\"val_loss\" and \"bits_per_byte\" when evaluated), then {\"event\":\"done\"} (or\n"
        "\"stopped\", \"interrupted\") with \"val_loss\", \"backend\", \"device\", \"steps\" and the file\n"
        "paths; a resumed run that does an abandoned evaluation first prints\n"
        "{\"event\":\"validation\",\"steps\",\"val_loss\"}; other messages go to stderr.",
};

/* Options a resumed run takes from the state file. */
static int resume_conflict(const char *name, const cli_opt *o, double given, double saved,
                           const char *state_path) {
    if (!o->set || given == saved) return CLI_OK;
    return cli_usage_error("train", "--%s %g differs from %g saved in %s: a resumed run keeps "
                           "the settings it started with", name, given, saved, state_path);
}

static int check_resume_options(cli_opt *opts, int n, const train_run *r) {
    vka_gpt_config c = vka_gpt_get_config(r->gpt);
    const vka_train_state *s = &r->st;
    const train_opts *o = r->o;
    const struct {
        const char *name;
        double given, saved;
    } v[] = {
        {"layers", o->layers, c.L},
        {"heads", o->heads, c.NH},
        {"embd", o->embd, c.C},
        {"ctx", o->ctx, s->T},
        {"batch", o->batch, s->B},
        /* A state before version 7 reads as 1. */
        {"grad-accum", o->grad_accum, s->adamw.grad_accum > 1 ? s->adamw.grad_accum : 1},
        {"steps", o->steps, (double)s->total_steps},
        {"warmup", o->warmup, s->warmup_steps},
        {"lr", o->lr, s->lr},
        {"min-lr", o->min_lr, s->min_lr},
        {"weight-decay", o->weight_decay, s->adamw.weight_decay},
        {"grad-clip", o->grad_clip, s->adamw.grad_clip},
        {"beta1", o->beta1, s->adamw.beta1},
        {"beta2", o->beta2, s->adamw.beta2},
        {"seed", (double)o->seed, (double)s->seed},
        {"eval-every", o->eval_every, s->eval_every},
        /* A version-1 state did not record it (-1): the command line's value is used. */
        {"eval-windows", o->eval_windows, s->eval_windows < 0 ? o->eval_windows : s->eval_windows},
    };
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        int rc = resume_conflict(v[i].name, cli_find(opts, n, v[i].name), v[i].given, v[i].saved,
                                 o->resume);
        if (rc != CLI_OK) return rc;
    }
    /* Nothing left to do is a mistake to say, not a run to repeat (its last evaluation, if
     * abandoned, is still to do). */
    if (s->step >= s->total_steps && !s->eval_pending)
        return cli_usage_error("train", "the run saved in %s is finished (step %llu of %llu); a "
                               "resumed run keeps its --steps, so to train longer start a new "
                               "run", o->resume, (unsigned long long)s->step,
                               (unsigned long long)s->total_steps);
    if (o->stop_at > 0 && (uint64_t)o->stop_at > s->total_steps)
        return cli_usage_error("train", "--stop-at %d is past the run's last step, %llu", o->stop_at,
                               (unsigned long long)s->total_steps);
    if (o->stop_at > 0 && (uint64_t)o->stop_at <= s->step)
        return cli_usage_error("train", "--stop-at %d: the run saved in %s is already at step %llu",
                               o->stop_at, o->resume, (unsigned long long)s->step);
    return CLI_OK;
}

/* Whether the environment variable name is set to something. */
static bool env_set(const char *name) {
    const char *v = getenv(name);
    return v && *v;
}

/* A resumed run takes the backend and kernels its state records (docs/commands.md "--resume") unless the
 * command line says otherwise: --backend, --kernels, or the environment variables that choose
 * kernels (VKATTN_KERNELS, VKATTN_TEXEL_LOADS, VKATTN_CPU_KERNELS). The state is only peeked
 * at here; if it cannot be read, loading it says why. */
static void take_recorded_backend(train_opts *o, cli_opt *opts, int n) {
    vka_train_state rec;
    if (vka_train_state_read(NULL, o->resume, &rec) != VKA_SUCCESS || !rec.run_recorded) return;
    if (!cli_find(opts, n, "backend")->set) o->b.backend = (int)rec.run_backend;
    if (o->b.backend != (int)rec.run_backend) return; /* told otherwise: the notice says so */
    const char *k = rec.run_kernels;
    if (o->b.backend == VKA_BACKEND_VULKAN) {
        if (!cli_find(opts, n, "kernels")->set && !env_set("VKATTN_KERNELS"))
            o->b.kernels = strcmp(k, "gpu") == 0 ? 1 : strncmp(k, "cpu", 3) == 0 ? 2 : 0;
        /* No field of the context's desc turns the texel loads off: its variable does. */
        if (strcmp(k, "cpu") == 0 && !env_set("VKATTN_TEXEL_LOADS"))
            setenv("VKATTN_TEXEL_LOADS", "0", 1);
    } else if (!env_set("VKATTN_CPU_KERNELS")) {
        o->b.cpu_kernels = strcmp(k, "reference") == 0         ? VKA_CPU_KERNELS_REFERENCE
                           : strcmp(k, "fast (avx2+fma)") == 0 ? VKA_CPU_KERNELS_FAST_AVX2
                                                               : VKA_CPU_KERNELS_FAST;
    }
}

/* What made a resumed run's backend, kernels or device differ from its state's, into why. */
static void why_other_backend(const train_run *r, cli_opt *opts, int n, bool backend,
                              bool kernels, char *why, size_t cap) {
    const char *cpu = r->o->b.backend == VKA_BACKEND_CPU ? "VKATTN_CPU_KERNELS" : NULL;
    const char *env = cpu && env_set(cpu)                  ? cpu
                      : !cpu && env_set("VKATTN_KERNELS")     ? "VKATTN_KERNELS"
                      : !cpu && env_set("VKATTN_TEXEL_LOADS") ? "VKATTN_TEXEL_LOADS"
                                                              : NULL;
    if (backend)
        snprintf(why, cap, "because --backend %s was given", r->backend);
    else if (kernels && cli_find(opts, n, "kernels")->set)
        snprintf(why, cap, "because --kernels %s was given", cli_kernel_names[r->o->b.kernels]);
    else if (kernels && env)
        snprintf(why, cap, "because %s=%s is set", env, getenv(env));
    else if (kernels)
        snprintf(why, cap, "because this %s has other kernels", cpu ? "CPU" : "device");
    else if (cli_find(opts, n, "device")->set || env_set("VKATTN_DEVICE"))
        snprintf(why, cap, "because --device or VKATTN_DEVICE chose another device");
    else
        snprintf(why, cap, "because the best device here is another one");
}

/* After the resumed state loaded: say (on stderr, even with --quiet) when the run does not
 * continue where its steps ran, or when the state does not say where that was. */
static void say_resumed_backend(const train_run *r, cli_opt *opts, int n) {
    const vka_train_state *s = &r->st;
    vka_backend now = vka_context_backend(r->ctx);
    const char *kernels = now == VKA_BACKEND_CPU ? vka_context_cpu_kernels(r->ctx)
                                                 : vka_context_vulkan_kernels(r->ctx);
    if (!kernels) kernels = "?";
    if (!s->run_recorded) {
        fprintf(stderr, "vkattn train: %s does not record the backend its steps ran on (an older "
                "vkattn saved it): continuing on %s (device: %s; kernels: %s) as the command "
                "line says; to continue bit for bit, give the --backend and --kernels it was "
                "trained with\n", r->o->resume, r->backend, r->device, kernels);
        return;
    }
    bool backend = now != s->run_backend, other_kernels = strcmp(kernels, s->run_kernels) != 0;
    bool device = now == VKA_BACKEND_VULKAN && strcmp(r->device, s->run_device) != 0;
    if (!backend && !other_kernels && !device) return;
    char why[160];
    why_other_backend(r, opts, n, backend, other_kernels, why, sizeof why);
    fprintf(stderr, "vkattn train: notice: the run in %s was trained on %s (device: %s; kernels: "
            "%s) and continues on %s (device: %s; kernels: %s) %s: it goes on, but its losses "
            "are no longer bit for bit those of an uninterrupted run\n", r->o->resume,
            cli_backend_names[s->run_backend], s->run_device, s->run_kernels, r->backend,
            r->device, kernels, why);
}

/* The precision of the steps: --precision; a resumed run's is its state's (the model loaded
 * with it) unless --precision says otherwise, which is allowed with a notice. */
static int train_precision(train_run *r, cli_opt *opts, int n) {
    const cli_opt *p = cli_find(opts, n, "precision");
    int want = r->o->b.precision;
    if (r->o->resume && !p->set) want = (int)vka_gpt_get_precision(r->gpt); /* the state's */
    int rc = cli_set_precision("train", r->ctx, r->gpt, want);
    if (rc != CLI_OK) return rc;
    if (r->o->resume && (int)r->st.run_precision != want)
        fprintf(stderr, "vkattn train: notice: the run in %s was trained in %s and continues in "
                "%s (--precision): it goes on, but its losses are no longer bit for bit those "
                "of an uninterrupted run\n", r->o->resume, cli_precision_names[r->st.run_precision],
                cli_precision_names[want]);
    r->precision = cli_precision_names[want];
    return CLI_OK;
}

/* Usage checks that involve more than one option. */
const char *const train_save_precision_names[] = {"fp32", "bf16", "fp16", NULL};

static int check_options(train_opts *o) {
    if (o->save_precision == TRAIN_SAVE_FP16)
        return cli_usage_error("train", "--save-precision fp16: llm.c's model files hold fp32 "
                               "(version 3) or bf16 (version 5) parameters; use bf16");
    /* A resumed run's backend may come from its state: checked once it is known (cmd_train). */
    int rc = o->resume ? CLI_OK : cli_check_backend_opts("train", &o->b, CLI_USES_CHOSEN(&o->b));
    if (rc != CLI_OK) return rc;
    if (o->resume && o->init)
        return cli_usage_error("train", "--resume and --init exclude each other: --resume "
                               "continues a run, --init starts a new one from a model's weights");
    if (o->resume && o->tokenizer)
        return cli_usage_error("train", "--tokenizer: a resumed run uses the tokenizer saved "
                               "with its state");
    if (o->data && o->val_data && strcmp(o->data, "-") == 0 && strcmp(o->val_data, "-") == 0)
        return cli_usage_error("train", "--data - and --val-data -: standard input can be read "
                               "only once; give one of them as a file");
    if (o->vocab_size && o->tokenizer)
        return cli_usage_error("train", "give --vocab-size (learn a vocabulary) or --tokenizer "
                               "(use one), not both");
    if (o->resume && o->vocab_size)
        return cli_usage_error("train", "--vocab-size: a resumed run uses the tokenizer saved "
                               "with its state");
    if (o->init && o->vocab_size)
        return cli_usage_error("train", "--vocab-size: --init's model already has a vocabulary; "
                               "use its tokenizer (--tokenizer)");
    if (o->resume) return CLI_OK; /* the settings come from the state file */
    if ((int64_t)o->batch * o->ctx > VKA_TRAIN_MAX_BT)
        return cli_usage_error("train", "--batch %d x --ctx %d = %lld tokens per step is more than "
                               "a run takes (%d): use a smaller --batch", o->batch, o->ctx,
                               (long long)o->batch * o->ctx, VKA_TRAIN_MAX_BT);
    if ((int64_t)o->batch * o->grad_accum * o->ctx > VKA_TRAIN_MAX_BT)
        return cli_usage_error("train", "--batch %d x --grad-accum %d x --ctx %d = %lld tokens "
                               "per step is more than a run takes (%d): use a smaller --batch "
                               "or --grad-accum", o->batch, o->grad_accum, o->ctx,
                               (long long)o->batch * o->grad_accum * o->ctx, VKA_TRAIN_MAX_BT);
    if (!o->init && o->embd % o->heads != 0)
        return cli_usage_error("train", "--heads %d does not divide --embd %d (head size = embd / "
                               "heads)", o->heads, o->embd);
    if (o->warmup < 0) o->warmup = o->steps / 20;
    if (o->warmup > o->steps)
        return cli_usage_error("train", "--warmup %d is longer than --steps %d", o->warmup, o->steps);
    if (o->stop_at > o->steps)
        return cli_usage_error("train", "--stop-at %d is past the run's last step, --steps %d",
                               o->stop_at, o->steps);
    if (o->min_lr < 0.0f) o->min_lr = o->lr / 10.0f;
    if (o->min_lr > o->lr)
        return cli_usage_error("train", "--min-lr %g is above --lr %g", (double)o->min_lr,
                               (double)o->lr);
    return CLI_OK;
}

/* The tokenizer saved with the state being resumed (X.state.bin -> X.tokenizer.bin), or NULL
 * if there is none (then the data's own is used and must match the model's vocabulary). */
static int load_resumed_tokenizer(train_run *r) {
    const char *path = r->resumed_tok_path;
    if (!path || access(path, F_OK) != 0) return CLI_OK;
    vka_result res = vka_tokenizer_load(r->ctx, path, &r->tok);
    if (res != VKA_SUCCESS)
        return cli_fail_load("train", r->ctx, res, "tokenizer", path, CLI_FILE_TOKENIZER);
    return CLI_OK;
}

/* A resumed run that finds the wrong text most likely lacks the --data it started with. */
static void hint_forgotten_data(const train_run *r) {
    if (r->o->resume && !r->o->data)
        fprintf(stderr, "vkattn train: hint: did you forget --data? Without it the built-in "
                "corpus is used; give the text the run started with\n");
}

/* Whether the text's identity (vka_data_text_id) is the one the state records; data NULL:
 * the text --data names, loaded here. */
static bool same_text(vka_context *ctx, const char *path, const vka_data *data,
                      const vka_train_state *st, uint64_t *bytes, uint64_t *hash) {
    vka_data *own = NULL;
    if (!data && vka_data_load(ctx, path, NULL, &own) != VKA_SUCCESS) return false;
    vka_data_text_id(data ? data : own, bytes, hash);
    vka_data_destroy(own);
    return *bytes == st->text_bytes && *hash == st->text_hash;
}

/* A resumed run must train on the text it started with (docs/files.md: the state records its
 * length and hash; a version-1 or -2 state did not, and is not checked). data NULL: the text
 * could not be tokenised with the resumed tokenizer (then it is loaded here to compare). */
static int check_same_text(train_run *r, const vka_data *data) {
    const vka_train_state *st = &r->st;
    if (!r->o->resume || st->text_bytes == 0) return CLI_OK;
    uint64_t bytes = 0, hash = 0;
    if (same_text(r->ctx, r->o->data, data, st, &bytes, &hash)) return CLI_OK;
    const char *name = r->o->data ? r->o->data : "the built-in corpus";
    if (bytes == 0) return CLI_OK; /* unreadable: the data's own error is the one to report */
    cli_usage_error("train", "%s was trained on a text of %llu bytes (FNV-1a %016llx), but %s "
                    "is %llu bytes%s (FNV-1a %016llx): a resumed run must train on the text it "
                    "started on", r->o->resume,
                    (unsigned long long)st->text_bytes, (unsigned long long)st->text_hash, name,
                    (unsigned long long)bytes, bytes == st->text_bytes ? " too, with other contents" : "",
                    (unsigned long long)hash);
    uint64_t b0, h0;
    if (!r->o->data)
        hint_forgotten_data(r);
    else if (same_text(r->ctx, NULL, NULL, st, &b0, &h0))
        fprintf(stderr, "vkattn train: hint: %s started on the built-in corpus: leave out "
                "--data\n", r->o->resume);
    return CLI_USAGE;
}

/* The tokenizer of a new run: --tokenizer, else (with --init) the one beside the model if
 * there is one; none: the data builds a character-level one from the text. */
static int load_given_tokenizer(train_run *r) {
    const train_opts *o = r->o;
    char *beside = !o->tokenizer && o->init ? cli_sibling_path(o->init, ".tokenizer.bin") : NULL;
    const char *path = o->tokenizer ? o->tokenizer : beside && access(beside, F_OK) == 0 ? beside
                                                                                          : NULL;
    int rc = CLI_OK;
    if (path) {
        vka_result res = vka_tokenizer_load(r->ctx, path, &r->tok);
        if (res != VKA_SUCCESS)
            rc = cli_fail_load("train", r->ctx, res, "tokenizer", path, CLI_FILE_TOKENIZER);
        r->tok_path_given = rc == CLI_OK ? strdup(path) : NULL;
        r->tok_source = r->tok_path_given;
    }
    free(beside);
    return rc;
}

/* The data, tokenised with the resumed run's tokenizer (or the given one) when there is one. */
static int load_data(train_run *r) {
    const char *name = r->o->data ? r->o->data : "the built-in corpus";
    vka_result res;
    int rc = r->o->resume     ? load_resumed_tokenizer(r)
             : r->o->vocab_size ? train_vocabulary(r)
                                : load_given_tokenizer(r);
    if (rc != CLI_OK) return rc;
    char **paths = NULL, **vpaths = NULL;
    int n = 0, nv = 0;
    if (r->o->data) rc = cli_data_paths("train", "--data", r->o->data, &paths, &n);
    if (rc == CLI_OK && r->o->val_data)
        rc = cli_data_paths("train", "--val-data", r->o->val_data, &vpaths, &nv);
    if (rc != CLI_OK) {
        cli_free_paths(paths, n);
        return rc;
    }
    vka_data_desc desc = {.paths = (const char *const *)paths, .n_paths = n,
                          .val_paths = (const char *const *)vpaths, .n_val_paths = nv,
                          .tok = r->tok};
    res = vka_data_open(r->ctx, &desc, &r->data);
    cli_free_paths(paths, n);
    cli_free_paths(vpaths, nv);
    if (res != VKA_SUCCESS) {
        /* Another text is the likely cause of a byte outside the vocabulary: say that. */
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", vka_last_error(r->ctx));
        if (res == VKA_ERROR_VOCABULARY) {
            rc = check_same_text(r, NULL);
            if (rc != CLI_OK) return rc;
        }
        fprintf(stderr, "vkattn train: data: %s\n", msg);
        if (res == VKA_ERROR_INVALID_ARGUMENT && !r->tok)
            fprintf(stderr, "vkattn train: hint: give the tokenizer with --tokenizer FILE\n");
        if (res == VKA_ERROR_VOCABULARY) hint_forgotten_data(r);
        return CLI_ERROR;
    }
    /* Another text on resume is the mistake to report (a usage error), before its length. */
    if (r->o->resume) rc = check_same_text(r, r->data);
    if (rc != CLI_OK) return rc;
    int T = r->o->resume ? r->st.T : r->ctx_T;
    const char *split_names[] = {r->o->val_data ? "training data (--data)"
                                                : "training split (first 90%)",
                                 r->o->val_data ? "validation data (--val-data)"
                                                : "validation split (last 10%)"};
    for (int s = 0; s < 2; s++) {
        size_t k = vka_data_num_tokens(r->data, (vka_split)s);
        if (k < (size_t)T + 1) {
            fprintf(stderr, "vkattn train: %s: the %s has %zu token%s, fewer than ctx+1 = %d; use "
                    "more text or a smaller --ctx\n", name, split_names[s], k, k == 1 ? "" : "s",
                    T + 1);
            return CLI_ERROR;
        }
    }
    return CLI_OK;
}

/* --init: the model's weights, its shape (options giving another are a usage error). */
static int load_init_model(train_run *r, cli_opt *opts, int n_opts) {
    const train_opts *o = r->o;
    vka_result res = vka_gpt_load(r->ctx, o->init, &r->gpt);
    if (res != VKA_SUCCESS)
        return cli_fail_load("train", r->ctx, res, "init", o->init, CLI_FILE_MODEL);
    vka_gpt_config c = vka_gpt_get_config(r->gpt);
    const struct {
        const char *name;
        int given, model;
        const char *what;
    } v[] = {{"layers", o->layers, c.L, "layers"}, {"heads", o->heads, c.NH, "heads"},
             {"embd", o->embd, c.C, "channels"}};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        if (cli_find(opts, n_opts, v[i].name)->set && v[i].given != v[i].model)
            return cli_usage_error("train", "--%s %d differs from the %d %s of %s (--init): the "
                                   "model's shape comes from its file", v[i].name, v[i].given,
                                   v[i].model, v[i].what, o->init);
    if (cli_find(opts, n_opts, "ctx")->set && o->ctx > c.max_T)
        return cli_usage_error("train", "--ctx %d is longer than the context of %s (--init), %d",
                               o->ctx, o->init, c.max_T);
    r->ctx_T = o->ctx < c.max_T ? o->ctx : c.max_T;
    return CLI_OK;
}

/* --init: the tokenizer's size must be the model's V. */
static int check_init_vocabulary(train_run *r) {
    int V_model = vka_gpt_get_config(r->gpt).V;
    int V_tok = vka_tokenizer_vocab_size(vka_data_tokenizer(r->data));
    if (V_model == V_tok) return CLI_OK;
    if (r->tok_source)
        fprintf(stderr, "vkattn train: the tokenizer %s has %d tokens but the model %s (--init) "
                "has V = %d: they do not belong together\n", r->tok_source, V_tok, r->o->init,
                V_model);
    else
        fprintf(stderr, "vkattn train: the character vocabulary of %s has %d tokens but the "
                "model %s (--init) has V = %d: give the model's tokenizer with --tokenizer "
                "FILE\n", r->o->data ? r->o->data : "the built-in corpus", V_tok, r->o->init,
                V_model);
    return CLI_ERROR;
}

/* A fresh model and state from the options. */
static int new_model(train_run *r) {
    const train_opts *o = r->o;
    if (o->init) {
        /* The weights are --init's; AdamW starts afresh (m = v = 0, step 0). */
        int rc = check_init_vocabulary(r);
        if (rc != CLI_OK) return rc;
    } else {
        vka_gpt_config cfg = {.max_T = o->ctx,
                              .V = vka_tokenizer_vocab_size(vka_data_tokenizer(r->data)),
                              .L = o->layers, .NH = o->heads, .C = o->embd};
        vka_result res = vka_gpt_create(r->ctx, &cfg, o->seed, &r->gpt);
        if (res != VKA_SUCCESS) return cli_fail("train", r->ctx, res, "model");
    }
    r->st = (vka_train_state){
        .step = 0,
        /* A stream apart from the initialisation's (splitmix64: any state is a good seed). */
        .rng_state = o->seed ^ 0xD1B54A32D192ED03ull,
        .seed = o->seed,
        .total_steps = (uint64_t)o->steps,
        .B = o->batch,
        .T = r->ctx_T,
        .lr = o->lr,
        .min_lr = o->min_lr,
        .warmup_steps = o->warmup,
        .eval_every = o->eval_every,
        .eval_windows = o->eval_windows,
        .adamw = {.beta1 = o->beta1, .beta2 = o->beta2, .eps = 1e-8f,
                  .weight_decay = o->weight_decay, .grad_clip = o->grad_clip,
                  .grad_accum = o->grad_accum},
        .best_val_loss = NAN,
    };
    vka_data_text_id(r->data, &r->st.text_bytes, &r->st.text_hash);
    return CLI_OK;
}

static int check_vocabulary(train_run *r) {
    int V_model = vka_gpt_get_config(r->gpt).V;
    int V_data = vka_tokenizer_vocab_size(vka_data_tokenizer(r->data));
    if (V_model == V_data) return CLI_OK;
    const char *tok = r->resumed_tok_path;
    if (r->tok) /* the tokenizer saved beside the state, which the data was encoded with */
        fprintf(stderr, "vkattn train: %s was trained with a vocabulary of %d tokens but its "
                "tokenizer %s has %d: that file was replaced; restore the one the run saved\n",
                r->o->resume, V_model, tok, V_data);
    else if (tok && access(tok, F_OK) != 0)
        fprintf(stderr, "vkattn train: %s was trained with a vocabulary of %d tokens, but its "
                "tokenizer %s is missing and the character vocabulary of %s has %d: restore %s\n",
                r->o->resume, V_model, tok, r->o->data ? r->o->data : "the built-in corpus",
                V_data, tok);
    else
        fprintf(stderr, "vkattn train: %s was trained with a vocabulary of %d tokens but %s has "
                "%d; resume with the same --data\n", r->o->resume, V_model,
                r->o->data ? r->o->data : "the built-in corpus", V_data);
    hint_forgotten_data(r);
    return CLI_ERROR;
}

/* The model's tokenizer (the id a model or state file records) must be the data's: a resumed
 * run's tokenizer file replaced by another of the same size, or --init with the tokenizer of
 * another model, would train on garbage. Then the model records the data's tokenizer, so that
 * what the run saves belongs together. */
static int check_tokenizer_id(train_run *r) {
    const vka_tokenizer *tok = vka_data_tokenizer(r->data);
    uint64_t want = vka_gpt_tokenizer_id(r->gpt), have = vka_tokenizer_id(tok);
    if (want && want != have) {
        const char *model = r->o->resume ? r->o->resume : r->o->init;
        const char *tok_name = r->tok_source ? r->tok_source
                               : r->tok ? r->resumed_tok_path
                               : r->o->data ? r->o->data : "the built-in corpus";
        fprintf(stderr, "vkattn train: the tokenizer %s%s is not the one %s was trained with (it "
                "records tokenizer id %016llx, this one is %016llx): %s\n",
                r->tok ? "" : "built from ", tok_name, model, (unsigned long long)want,
                (unsigned long long)have,
                r->o->resume ? "restore the tokenizer the run saved beside its state"
                             : "give the model's own tokenizer with --tokenizer");
        return CLI_ERROR;
    }
    vka_result res = vka_gpt_set_tokenizer(r->gpt, tok);
    return res == VKA_SUCCESS ? CLI_OK : cli_fail("train", r->ctx, res, "tokenizer");
}

static int setup(train_run *r, cli_opt *opts, int n_opts) {
    const train_opts *o = r->o;
    /* Before the device and the data: a wrong --out fails at once. */
    int rc = train_files(r);
    if (rc == CLI_OK) rc = cli_context("train", &o->b, &r->ctx);
    if (rc != CLI_OK) return rc;
    r->backend = o->b.backend == VKA_BACKEND_CPU ? "cpu" : "vulkan";
    if (o->profile) {
        /* Before the model records its graphs, so that they carry the timers. */
        vka_result res = vka_context_set_profiling(r->ctx, true);
        if (res != VKA_SUCCESS) return cli_fail("train", r->ctx, res, "--profile");
    }
    cli_device_name(r->ctx, r->device, sizeof r->device);
    if (o->resume) {
        vka_result res = vka_gpt_load_state(r->ctx, o->resume, &r->gpt, &r->st);
        if (res != VKA_SUCCESS)
            return cli_fail_load("train", r->ctx, res, "resume", o->resume, CLI_FILE_STATE);
        /* train_files left the paths unset for a file that did not look like a state; it
         * loaded after all (replaced meanwhile): check it as a state now. */
        rc = r->model_path ? CLI_OK : train_files(r);
        if (rc == CLI_OK) rc = check_resume_options(opts, n_opts, r);
        if (rc != CLI_OK) return rc;
        say_resumed_backend(r, opts, n_opts);
        if (r->st.eval_windows < 0) r->st.eval_windows = o->eval_windows;
    }
    r->ctx_T = o->ctx;
    if (o->init) rc = load_init_model(r, opts, n_opts);
    if (rc == CLI_OK) rc = load_data(r);
    if (rc != CLI_OK) return rc;
    /* A state that did not record its text (version 1 or 2) records this one from now on. */
    if (o->resume && r->st.text_bytes == 0)
        vka_data_text_id(r->data, &r->st.text_bytes, &r->st.text_hash);
    rc = o->resume ? check_vocabulary(r) : new_model(r);
    if (rc == CLI_OK) rc = check_tokenizer_id(r);
    if (rc == CLI_OK) vka_gpt_set_attention(r->gpt, (vka_attention_impl)o->b.attention);
    if (rc == CLI_OK) rc = train_precision(r, opts, n_opts);
    if (rc == CLI_OK) rc = train_check_space(r);
    if (rc != CLI_OK) return rc;
    size_t n_val = vka_data_num_tokens(r->data, VKA_SPLIT_VAL);
    r->val_windows = (n_val - 1) / (size_t)r->st.T;
    if (r->st.eval_windows > 0 && (size_t)r->st.eval_windows < r->val_windows)
        r->val_windows = (size_t)r->st.eval_windows;
    r->first_step = r->st.step;
    r->good_state = o->resume;
    r->good_step = r->st.step;
    r->last_val = NAN;
    r->last_val_bpb = NAN;
    return CLI_OK;
}

int cmd_train(int argc, char **argv) {
    train_opts o = {
        .layers = 4, .heads = 4, .embd = 128, .ctx = 64, .batch = 12, .grad_accum = 1, .steps = 2000,
        .warmup = -1, .lr = 1e-3f, .min_lr = -1.0f, .weight_decay = 0.1f, .grad_clip = 1.0f,
        .beta1 = 0.9f, .beta2 = 0.99f, .seed = 1337, .eval_every = 250,
        .save_every = TRAIN_SAVE_EVERY_DEFAULT, .log_every = 10,
    };
    cli_opt opts[] = {
        CLI_STRING("data", &o.data, "FILE", "text or llm.c token file(s) to train on: a file, a "
                   "quoted glob pattern, or - for stdin (read into memory) (default: the "
                   "built-in corpus)"),
        CLI_STRING("val-data", &o.val_data, "FILE", "validation file(s) as --data (default: the "
                   "last 10% of --data)"),
        CLI_STRING("tokenizer", &o.tokenizer, "FILE", "tokenizer to encode the text with (needed "
                   "for token files) (default: beside --init's model, else character-level "
                   "from the text)"),
        CLI_STRING("init", &o.init, "MODEL", "start from this model's weights (llm.c "
                   "checkpoint, float32 or bfloat16) with a fresh optimizer; its shape is the "
                   "run's"),
        CLI_STRING("out", &o.out, "MODEL", "model file to write (default: model.bin)"),
        CLI_STRING("resume", &o.resume, "STATE", "continue the run saved in STATE exactly"),
        CLI_INT("vocab-size", &o.vocab_size, "N", "learn a byte-level BPE vocabulary of N tokens "
                "from the text (default: character level)", 257, VKA_TOKENIZER_MAX_VOCAB),
        CLI_BACKEND_OPTS(&o.b),
        CLI_ATTENTION_OPT(&o.b),
        CLI_PRECISION_OPT(&o.b),
        /* The library's limits (VKA_GPT_MAX_*), so that a size past them is a usage error. */
        CLI_INT("layers", &o.layers, "L", "transformer blocks (default: 4)", 1, VKA_GPT_MAX_L),
        CLI_INT("heads", &o.heads, "NH", "attention heads; must divide --embd (default: 4)", 1,
                VKA_GPT_MAX_C),
        CLI_INT("embd", &o.embd, "C", "channels (default: 128)", 1, VKA_GPT_MAX_C),
        CLI_INT("ctx", &o.ctx, "T", "context length in tokens (default: 64)", 1, VKA_GPT_MAX_T),
        CLI_INT("batch", &o.batch, "B", "sequences per step (per micro-batch with --grad-accum) "
                "(default: 12)", 1, VKA_TRAIN_MAX_BT),
        CLI_INT("grad-accum", &o.grad_accum, "N", "micro-batches of --batch sequences per "
                "optimizer step, gradients summed (default: 1 = none)", 1,
                VKA_GPT_MAX_GRAD_ACCUM),
        CLI_INT("steps", &o.steps, "N", "optimizer steps (default: 2000)", 1, 1e9),
        CLI_FLOAT_GT("lr", &o.lr, "LR", "peak learning rate (default: 1e-3)", 0, 10),
        CLI_FLOAT("min-lr", &o.min_lr, "LR", "final learning rate (default: lr/10)", 0, 10),
        CLI_INT("warmup", &o.warmup, "N", "linear warm-up steps (default: steps/20)", 0, 1e9),
        CLI_FLOAT("weight-decay", &o.weight_decay, "WD", "AdamW weight decay (default: 0.1)", 0, 10),
        CLI_FLOAT("grad-clip", &o.grad_clip, "NORM", "max global gradient norm; 0 = none "
                  "(default: 1.0)", 0, 1e6),
        CLI_FLOAT_GT("beta1", &o.beta1, "B1", "AdamW beta1 (default: 0.9)", 0, 0.999999),
        CLI_FLOAT_GT("beta2", &o.beta2, "B2", "AdamW beta2 (default: 0.99)", 0, 0.999999),
        CLI_U64("seed", &o.seed, "S", "seed of the weights and the batches (default: 1337)"),
        CLI_INT("eval-every", &o.eval_every, "N", "validate every N steps; 0 = only at the end "
                "(default: 250)", 0, 1e9),
        CLI_INT("eval-windows", &o.eval_windows, "N", "validation windows scored; 0 = all "
                "(default: 0)", 0, 1e9),
        CLI_INT("save-every", &o.save_every, "N", "save every N steps; 0 = only at the end "
                "(default: 500)", 0, 1e9),
        CLI_CHOICE("save-precision", &o.save_precision, "P", "parameters in the model file: fp32 "
                   "(llm.c version 3) or bf16 (version 5); the training state stays fp32 "
                   "(default: fp32)", train_save_precision_names),
        CLI_INT("stop-at", &o.stop_at, "STEP", "save and stop after step STEP, to --resume later "
                "(default: 0 = run to the end)", 0, 1e9),
        CLI_INT("log-every", &o.log_every, "N", "progress line every N steps when stdout is not "
                "a terminal (default: 10)", 1, 1e9),
        CLI_FLAG("json", &o.json, "JSON lines on stdout (see below)"),
        CLI_FLAG("quiet", &o.quiet, "no progress; only errors and the final summary"),
        CLI_FLAG("profile", &o.profile, "time every op of the training step and print the last "
                 "step's times at the end (Vulkan: GPU timestamps, which serialise the step a "
                 "little)"),
    };
    int n_opts = (int)(sizeof opts / sizeof opts[0]);
    int rc = cli_parse(&train_cmd, argc, argv, opts, n_opts);
    if (rc != CLI_OK) return rc < 0 ? CLI_OK : rc;
    rc = check_options(&o);
    if (rc == CLI_OK && o.resume) {
        take_recorded_backend(&o, opts, n_opts);
        rc = cli_check_backend_opts("train", &o.b, CLI_USES_CHOSEN(&o.b));
    }
    if (rc != CLI_OK) return rc;

    train_run r = {.o = &o, .lock_fd = -1, .info = o.quiet ? NULL : o.json ? stderr : stdout};
    rc = setup(&r, opts, n_opts);
    if (rc == CLI_OK) rc = train_loop(&r);
    vka_gpt_destroy(r.gpt);
    vka_data_destroy(r.data);
    vka_tokenizer_destroy(r.tok);
    free(r.model_path);
    free(r.tok_path);
    free(r.state_path);
    free(r.resumed_tok_path);
    free(r.tok_path_given);
    train_unlock(&r);
    return r.ctx ? cli_finish("train", r.ctx, rc) : rc;
}
