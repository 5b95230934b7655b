/* Data paths (a file or a glob pattern) and what the scores need (see cli.h). */
#define _POSIX_C_SOURCE 200809L /* strdup, access */
#include "cli.h"

#include <glob.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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
