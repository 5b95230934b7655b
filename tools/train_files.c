/* vkattn train: the files of a run -- their paths, the checks made before the first step (no
 * output may overwrite an input; the output directory must take new files), and saving the
 * set of model, tokenizer and state all or nothing. */
#define _POSIX_C_SOURCE 200809L /* getpid, stat, fcntl locks */
#include "train.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

/* Staged files are "<final>.new" until every file of the set is written. */
#define STAGED_SUFFIX ".new"

static char *concat(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b);
    char *s = malloc(la + lb + 1);
    if (!s) return NULL;
    memcpy(s, a, la);
    memcpy(s + la, b, lb + 1);
    return s;
}

/* ---------------------------------------------------------------------------------------------
 * Paths
 * ------------------------------------------------------------------------------------------- */

/* derived: the model's path from the state's name (cli_state_sibling), or NULL. */
static int set_paths(train_run *r, const char *derived) {
    const train_opts *o = r->o;
    /* Not model.bin in the current directory: that may be another run's, and STATE would not
     * be updated. */
    if (!o->out && o->resume && !derived)
        return cli_usage_error("train", "--resume %s needs --out MODEL: only a state named "
                               "X.state.bin gives the model's name by itself (X.bin); with --out "
                               "MODEL the run saves MODEL, its tokenizer and its state (MODEL "
                               "with .bin replaced by .tokenizer.bin and .state.bin)", o->resume);
    const char *out = o->out ? o->out : derived ? derived : "model.bin";
    r->model_path = strdup(out);
    r->tok_path = r->model_path ? cli_sibling_path(r->model_path, ".tokenizer.bin") : NULL;
    r->state_path = r->model_path ? cli_sibling_path(r->model_path, ".state.bin") : NULL;
    r->resumed_tok_path = o->resume ? cli_state_sibling(o->resume, ".tokenizer.bin") : NULL;
    if (!r->model_path || !r->tok_path || !r->state_path) {
        fprintf(stderr, "vkattn train: out of memory\n");
        return CLI_ERROR;
    }
    return CLI_OK;
}

/* ---------------------------------------------------------------------------------------------
 * No output over an input
 * ------------------------------------------------------------------------------------------- */

/* Role of a file in the run; an output may replace an input of its own role only (a resumed
 * run saves its state and tokenizer over the ones it started from). */
typedef enum file_role { ROLE_NONE, ROLE_DATA, ROLE_MODEL, ROLE_TOKENIZER, ROLE_STATE } file_role;

typedef struct run_file {
    const char *path;
    file_role role;
    const char *what; /* "the training text (--data)" */
} run_file;


static int check_no_overwrite(const train_run *r) {
    const train_opts *o = r->o;
    char *staged[3] = {concat(r->model_path, STAGED_SUFFIX), concat(r->tok_path, STAGED_SUFFIX),
                       concat(r->state_path, STAGED_SUFFIX)};
    /* --init's siblings: its tokenizer (read when --tokenizer is not given) and the state of
     * the run that made it; neither may be overwritten by another kind of file. */
    char *init_tok = o->init && !o->tokenizer ? cli_sibling_path(o->init, ".tokenizer.bin") : NULL;
    char *init_state = o->init ? cli_sibling_path(o->init, ".state.bin") : NULL;
    const run_file outputs[] = {
        {r->model_path, ROLE_MODEL, "the model (--out)"},
        {r->tok_path, ROLE_TOKENIZER, "the tokenizer"},
        {r->state_path, ROLE_STATE, "the training state"},
        {staged[0], ROLE_NONE, "the model's staging file"},
        {staged[1], ROLE_NONE, "the tokenizer's staging file"},
        {staged[2], ROLE_NONE, "the training state's staging file"},
        {r->lock_path, ROLE_NONE, "the lock file of the run's files"},
    };
    const run_file inputs[] = {
        {o->data, ROLE_DATA, "the training text (--data)"},
        {o->val_data, ROLE_DATA, "the validation data (--val-data)"},
        {o->init, ROLE_NONE, "the model the run starts from (--init)"},
        {o->tokenizer, ROLE_TOKENIZER, "the tokenizer (--tokenizer)"},
        {o->resume, ROLE_STATE, "the training state resumed from (--resume)"},
        {r->resumed_tok_path, ROLE_TOKENIZER, "the resumed run's tokenizer"},
        {init_tok, ROLE_TOKENIZER, "the tokenizer beside --init's model, which the run reads"},
        {init_state, ROLE_NONE, "the training state beside --init's model"},
    };
    int rc = CLI_OK;
    for (size_t i = 0; i < sizeof outputs / sizeof outputs[0] && rc == CLI_OK; i++) {
        if (!outputs[i].path) {
            fprintf(stderr, "vkattn train: out of memory\n");
            rc = CLI_ERROR;
            break;
        }
        for (size_t j = 0; j < sizeof inputs / sizeof inputs[0] && rc == CLI_OK; j++) {
            if (!inputs[j].path || inputs[j].role == outputs[i].role) continue;
            if (cli_same_file(outputs[i].path, inputs[j].path))
                rc = cli_usage_error("train", "%s would be written to %s, which is %s: choose "
                                     "another --out", outputs[i].what, outputs[i].path,
                                     inputs[j].what);
        }
    }
    for (int i = 0; i < 3; i++) free(staged[i]);
    free(init_tok);
    free(init_state);
    return rc;
}

/* ---------------------------------------------------------------------------------------------
 * The output directory takes new files
 * ------------------------------------------------------------------------------------------- */

/* Create and remove the longest name each save creates (a staged file's temporary name), so
 * that a missing or read-only directory, or a name too long, is found before the first step
 * rather than after the last. */
static int check_writable(const train_run *r) {
    const char *outputs[3] = {r->model_path, r->tok_path, r->state_path};
    int rc = CLI_OK;
    for (int i = 0; i < 3 && rc == CLI_OK; i++)
        rc = cli_check_writable("train", "--out", outputs[i], STAGED_SUFFIX, "model.bin");
    return rc;
}

/* ---------------------------------------------------------------------------------------------
 * One run at a time on a set of files: a POSIX record lock on "<model without .bin>.lock" (the
 * name the model, tokenizer and state share: --out a and --out a.bin write the same tokenizer
 * and state, so they take the same lock). The file holds the holder's pid and start time for
 * the refusal's message. The kernel drops the lock when its process ends, however it ends: a
 * lock file left by a killed run is simply locked again.
 * ------------------------------------------------------------------------------------------- */

/* The holder's description ("12345 started 2026-12-01 14:55:41 UTC") from the file, or "". */
static void read_holder(int fd, char *buf, size_t cap) {
    ssize_t n = pread(fd, buf, cap - 1, 0);
    buf[n > 0 ? n : 0] = '\0';
    buf[strcspn(buf, "\n")] = '\0';
}

static int refuse_locked(const train_run *r, int fd) {
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
    long pid = fcntl(fd, F_GETLK, &fl) == 0 && fl.l_type != F_UNLCK ? (long)fl.l_pid : 0;
    char holder[128];
    read_holder(fd, holder, sizeof holder);
    const char *started = strstr(holder, " started ");
    fprintf(stderr, "vkattn train: %s, %s and %s are being written by ", r->model_path,
            r->tok_path, r->state_path);
    if (pid > 0) fprintf(stderr, "process %ld", pid);
    else fprintf(stderr, "another process");
    fprintf(stderr, " (vkattn train%s%s; it holds the lock %s): wait for it to end, stop it, or "
            "choose another --out\n", started ? "," : "", started ? started : "", r->lock_path);
    return CLI_ERROR;
}

/* Lock r->lock_path into r->lock_fd. A file removed by its holder's train_unlock between our
 * open and our lock is not the one the next run opens: lock until the locked file is the one
 * the name gives. */
static int lock_files(train_run *r) {
    for (int attempt = 0; attempt < 100; attempt++) {
        int fd = open(r->lock_path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
        if (fd < 0) {
            fprintf(stderr, "vkattn train: cannot create the lock file %s: %s\n", r->lock_path,
                    strerror(errno));
            return CLI_ERROR;
        }
        struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
        if (fcntl(fd, F_SETLK, &fl) != 0) {
            int err = errno;
            int rc = CLI_OK;
            if (err == EACCES || err == EAGAIN) rc = refuse_locked(r, fd);
            else if (r->info)
                /* A file system without locks (some network ones): train unguarded. */
                fprintf(r->info, "vkattn train: cannot lock %s (%s): a second run on the same "
                        "--out would not be refused\n", r->lock_path, strerror(err));
            close(fd);
            return rc;
        }
        struct stat held, named;
        if (fstat(fd, &held) == 0 && stat(r->lock_path, &named) == 0 &&
            held.st_dev == named.st_dev && held.st_ino == named.st_ino) {
            char line[128], when[64];
            time_t now = time(NULL);
            struct tm tm;
            strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S %Z", localtime_r(&now, &tm));
            int n = snprintf(line, sizeof line, "%ld started %s\n", (long)getpid(), when);
            if (ftruncate(fd, 0) != 0 || pwrite(fd, line, (size_t)n, 0) != n) {
                /* The lock holds anyway; only the refusal's message loses the start time. */
            }
            r->lock_fd = fd;
            return CLI_OK;
        }
        close(fd);
    }
    fprintf(stderr, "vkattn train: cannot lock %s: it keeps being replaced\n", r->lock_path);
    return CLI_ERROR;
}

void train_unlock(train_run *r) {
    if (r->lock_fd >= 0) {
        /* Removed while still locked, so that no other run locks this file after us. */
        unlink(r->lock_path);
        close(r->lock_fd);
        r->lock_fd = -1;
    }
    free(r->lock_path);
    r->lock_path = NULL;
}

/* ---------------------------------------------------------------------------------------------
 * A save that was killed (train_save below): its files are staged as "<final>.new" in the
 * order tokenizer, model, state, each written complete under a temporary name
 * "<final>.new.tmp.<pid>" and renamed to its staged name, and only then renamed over the
 * finals in the same order. So a staged state means the whole set was staged: the renames it
 * was in are finished (the set becomes the new one). Without a staged state, the save was
 * killed while staging: its staged files are removed (the finals are the previous set).
 * Temporary files of a killed write are removed in both cases. With the lock held, nothing
 * else writes these names.
 * ------------------------------------------------------------------------------------------- */

static void remove_staged(char *const *staged, int n);

/* A regular file (a staged name may be blocked by something else, which a save then fails on). */
static bool exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* Remove "<staged>.tmp.*" left by killed writes of each of the n staged names. */
static void remove_temporaries(char *const *staged, int n) {
    char *dir_path = cli_dir_of(staged[0]);
    DIR *dir = dir_path ? opendir(dir_path) : NULL;
    struct dirent *e;
    while (dir && (e = readdir(dir))) {
        for (int i = 0; i < n; i++) {
            const char *slash = strrchr(staged[i], '/');
            const char *base = slash ? slash + 1 : staged[i];
            size_t lb = strlen(base);
            if (strncmp(e->d_name, base, lb) != 0 || strncmp(e->d_name + lb, ".tmp.", 5) != 0)
                continue;
            size_t ld = strlen(dir_path);
            char *full = malloc(ld + strlen(e->d_name) + 2);
            if (full) {
                snprintf(full, ld + strlen(e->d_name) + 2, "%s/%s", dir_path, e->d_name);
                remove(full);
                free(full);
            }
        }
    }
    if (dir) closedir(dir);
    free(dir_path);
}

static int recover_interrupted_save(train_run *r) {
    const char *finals[3] = {r->tok_path, r->model_path, r->state_path};
    char *staged[3] = {concat(finals[0], STAGED_SUFFIX), concat(finals[1], STAGED_SUFFIX),
                       concat(finals[2], STAGED_SUFFIX)};
    int rc = CLI_OK;
    if (!staged[0] || !staged[1] || !staged[2]) {
        fprintf(stderr, "vkattn train: out of memory\n");
        rc = CLI_ERROR;
    } else if (exists(staged[2])) {
        for (int i = 0; i < 3 && rc == CLI_OK; i++) {
            if (!exists(staged[i])) continue; /* renamed before the kill */
            if (rename(staged[i], finals[i]) != 0) {
                fprintf(stderr, "vkattn train: a save was interrupted; finishing it: cannot rename "
                        "%s to %s: %s\n", staged[i], finals[i], strerror(errno));
                rc = CLI_ERROR;
            }
        }
        if (rc == CLI_OK && r->info)
            fprintf(r->info, "vkattn train: finished the save an earlier run was stopped in: %s, "
                    "%s and %s are now the files it saved\n", finals[1], finals[0], finals[2]);
    } else {
        remove_staged(staged, 2);
    }
    if (staged[0] && staged[1] && staged[2]) remove_temporaries(staged, 3);
    for (int i = 0; i < 3; i++) free(staged[i]);
    return rc;
}

int train_files(train_run *r) {
    /* A --resume that is not a state at all is the mistake to report, not what its
     * derived names would overwrite. */
    const train_opts *o = r->o;
    cli_file_kind kind = o->resume ? cli_file_kind_of(o->resume) : CLI_FILE_UNKNOWN;
    int rc = o->resume ? cli_check_kind("train", "resume", o->resume, kind, CLI_FILE_STATE)
                       : CLI_OK;
    if (rc != CLI_OK) return rc;
    char *derived = o->resume && !o->out ? cli_state_sibling(o->resume, ".bin") : NULL;
    /* Likewise a missing or damaged one (loading it says why; nothing is written before): it
     * needs no paths, and the naming rule is not its problem. */
    if (o->resume && !o->out && !derived && kind != CLI_FILE_STATE) return CLI_OK;
    rc = set_paths(r, derived);
    free(derived);
    if (rc == CLI_OK && !r->lock_path && !(r->lock_path = cli_sibling_path(r->model_path, ".lock"))) {
        fprintf(stderr, "vkattn train: out of memory\n");
        rc = CLI_ERROR;
    }
    if (rc == CLI_OK) rc = check_no_overwrite(r);
    /* --out names the set by its model: an --out that is another member's name would make two
     * runs' sets overlap under different locks (b.bin's state is b.state.bin). */
    static const char *const members[] = {".state.bin", ".tokenizer.bin", ".lock"};
    for (size_t i = 0; rc == CLI_OK && o->out && i < sizeof members / sizeof members[0]; i++) {
        size_t n = strlen(o->out), m = strlen(members[i]);
        if (n >= m && strcmp(o->out + n - m, members[i]) == 0) {
            fprintf(stderr, "vkattn train: --out %s ends in %s, the name of a file of another "
                    "run's set (--out MODEL.bin writes MODEL.bin, MODEL%s and MODEL.tokenizer.bin):"
                    " give the model's name\n", o->out, members[i], ".state.bin");
            rc = CLI_USAGE;
            break;
        }
    }
    if (rc == CLI_OK) rc = check_writable(r);
    if (rc == CLI_OK && r->lock_fd < 0) {
        rc = lock_files(r);
        if (rc == CLI_OK) rc = recover_interrupted_save(r);
    }
    if (rc == CLI_OK && o->resume && strcmp(r->state_path, o->resume) != 0 && r->info)
        fprintf(r->info, "resuming from %s; saving to %s\n", o->resume, r->state_path);
    return rc;
}

int train_check_space(const train_run *r) {
    char *dir = cli_dir_of(r->model_path);
    struct statvfs fs;
    bool known = dir && statvfs(dir, &fs) == 0;
    int rc = CLI_OK;
    if (known) {
        /* The file sizes (docs/files.md): 1024-byte headers; the model holds the parameters,
         * the state the parameters and AdamW's m and v; the tokenizer a length byte and the
         * bytes of each token. */
        uint64_t P = vka_gpt_num_params(r->gpt);
        const vka_tokenizer *tok = vka_data_tokenizer(r->data);
        uint64_t tok_bytes = 0;
        for (int i = 0; i < vka_tokenizer_vocab_size(tok); i++) {
            size_t len = 0;
            vka_tokenizer_decode(tok, i, &len);
            tok_bytes += 1 + len;
        }
        uint64_t need = (1024 + 4 * P) + (1024 + 12 * P) + (1024 + tok_bytes);
        /* root may also write into the blocks reserved for it */
        uint64_t blocks = geteuid() == 0 ? fs.f_bfree : fs.f_bavail;
        uint64_t free_bytes = blocks * (uint64_t)fs.f_frsize;
        if (free_bytes < need) {
            fprintf(stderr, "vkattn train: %s has %.1f MiB free, but saving the model, tokenizer "
                    "and training state needs %.1f MiB: free some space or choose another --out\n",
                    dir, (double)free_bytes / 1048576.0, (double)need / 1048576.0);
            rc = CLI_ERROR;
        }
    }
    free(dir);
    return rc;
}

/* ---------------------------------------------------------------------------------------------
 * Saving: every file to "<final>.new" (which the library writes through its own temporary
 * name), and only when all three are complete, each renamed over its final name. A failed
 * write replaces nothing: the files already there stay a matching set.
 * ------------------------------------------------------------------------------------------- */

static void remove_staged(char *const *staged, int n) {
    for (int i = 0; i < n; i++)
        if (staged[i]) remove(staged[i]);
}

int train_save(train_run *r) {
    const char *finals[3] = {r->tok_path, r->model_path, r->state_path};
    char *staged[3] = {concat(finals[0], STAGED_SUFFIX), concat(finals[1], STAGED_SUFFIX),
                       concat(finals[2], STAGED_SUFFIX)};
    int rc = CLI_OK;
    vka_result res = VKA_ERROR_OUT_OF_HOST_MEMORY;
    if (staged[0] && staged[1] && staged[2]) {
        res = vka_tokenizer_save(vka_data_tokenizer(r->data), staged[0]);
        if (res == VKA_SUCCESS)
            res = vka_gpt_save_dtype(r->gpt, staged[1], r->o->save_precision == TRAIN_SAVE_BF16
                                                            ? VKA_BF16 : VKA_F32);
        if (res == VKA_SUCCESS) res = vka_gpt_save_state(r->gpt, &r->st, staged[2]);
    }
    if (res != VKA_SUCCESS) {
        rc = cli_fail("train", r->ctx, res, "saving");
        remove_staged(staged, 3);
        fprintf(stderr, "vkattn train: nothing was replaced: whatever %s, %s and %s held before "
                "is unchanged\n", finals[1], finals[0], finals[2]);
        report_save_failed(r);
    } else {
        /* A second interrupt waits until the three renames are done, so that the set is never
         * left half new, half old by one. */
        train_hold_abort(true);
        for (int i = 0; i < 3 && rc == CLI_OK; i++) {
            if (rename(staged[i], finals[i]) == 0) continue;
            /* Rare (the directory took new files a moment ago): say exactly what is new. */
            fprintf(stderr, "vkattn train: cannot rename %s to %s: %s; already replaced: %s%s%s; "
                    "the others are unchanged\n", staged[i], finals[i], strerror(errno),
                    i == 0 ? "none" : finals[0], i > 1 ? ", " : "", i > 1 ? finals[1] : "");
            remove_staged(staged + i, 3 - i);
            rc = CLI_ERROR;
        }
        train_hold_abort(false);
        /* The state is renamed last: the old one, which holds the parameters too, is still
         * there to resume from. */
        if (rc != CLI_OK) report_save_failed(r);
        if (rc == CLI_OK) {
            r->good_state = r->state_path;
            r->good_step = r->st.step;
        }
    }
    for (int i = 0; i < 3; i++) free(staged[i]);
    return rc;
}
