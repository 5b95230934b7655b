/* Files: what a file is (for messages naming what was given instead), loading a model with
 * its tokenizer, sibling names, writing and checking that a file can be written (see cli.h). */
#define _POSIX_C_SOURCE 200809L /* getpid */
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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
