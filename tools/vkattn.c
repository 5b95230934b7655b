/* vkattn: the command line. main() finds the command and hands it its arguments. */
#define _POSIX_C_SOURCE 200809L /* SIGXFSZ, setenv, execv */
#include "cli.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int cmd_info(int argc, char **argv);
int cmd_train(int argc, char **argv);
int cmd_generate(int argc, char **argv);
int cmd_eval(int argc, char **argv);
int cmd_check(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_attention(int argc, char **argv);

static const struct {
    const char *name, *summary;
    int (*run)(int argc, char **argv);
} commands[] = {
    {"info", "list the Vulkan devices, their limits, and which one is used", cmd_info},
    {"train", "train a GPT-2 on a text file (or the built-in corpus)", cmd_train},
    {"generate", "sample text from a trained model", cmd_generate},
    {"eval", "loss, perplexity and bits per byte of a model on text or token files", cmd_eval},
    {"attention", "draw a prompt's attention weights (SVG) or print them (JSON)", cmd_attention},
    {"tokenize", "encode a text (or stdin) into an llm.c token file", cmd_tokenize},
    {"check", "compare every Vulkan kernel with the CPU reference", cmd_check},
    {"bench", "measure kernels and training steps on Vulkan and the CPU backend", cmd_bench},
};

static void usage(FILE *f) {
    fprintf(f, "Usage: vkattn <command> [options]\n\n"
               "Train and run a tiny GPT-2 with GLSL compute shaders on any Vulkan GPU, or on the\n"
               "CPU backend (--backend cpu).\n\nCommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\n`vkattn <command> --help` lists a command's options. `vkattn --version` prints "
               "the version.\n"
               "Exit status: 0 success, 1 runtime error, 2 usage error, 130 training interrupted "
               "(state saved).\n");
}

/* OpenMP's waiting threads spin by default, which on cores that other work shares costs the CPU
 * backend up to 100x (docs/environment.md). libgomp reads OMP_WAIT_POLICY once, when
 * it is loaded, so the default (passive) must be in the environment before the program starts:
 * set it and run the program again, once (VKATTN_REEXEC guards against a loop). An exec that
 * fails changes nothing; under valgrind (its preload library) the program is not re-run, which
 * would leave valgrind. OMP_WAIT_POLICY=active (or any value) keeps the user's choice. */
static void default_passive_waiting(char **argv) {
    const char *policy = getenv("OMP_WAIT_POLICY"), *preload = getenv("LD_PRELOAD");
    if ((policy && *policy) || getenv("VKATTN_REEXEC")) return;
    if (preload && strstr(preload, "vgpreload")) return;
    if (setenv("OMP_WAIT_POLICY", "passive", 1) != 0 || setenv("VKATTN_REEXEC", "1", 1) != 0)
        return;
    fflush(NULL);
    execv("/proc/self/exe", argv);
}

int main(int argc, char **argv) {
    default_passive_waiting(argv);
    /* Past a file-size limit (ulimit -f) a write then fails with EFBIG, which the commands
     * report (and clean up after), instead of SIGXFSZ killing the process mid-save. */
    signal(SIGXFSZ, SIG_IGN);
    if (argc < 2) {
        usage(stderr);
        return CLI_USAGE;
    }
    const char *name = argv[1];
    if (strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0 || strcmp(name, "help") == 0) {
        if (strcmp(name, "help") == 0 && argc > 2) {
            /* `vkattn help train` is `vkattn train --help` */
            char *help_argv[] = {argv[2], "--help", NULL};
            for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
                if (strcmp(commands[i].name, argv[2]) == 0) return commands[i].run(2, help_argv);
            fprintf(stderr, "vkattn: unknown command '%s' (see `vkattn --help`)\n", argv[2]);
            return CLI_USAGE;
        }
        usage(stdout);
        return CLI_OK;
    }
    if (strcmp(name, "--version") == 0 || strcmp(name, "-V") == 0) {
        printf("vkattn %s (library %s)\n", VKA_VERSION_STRING, vka_version_string());
        return CLI_OK;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(commands[i].name, name) == 0) return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "vkattn: unknown %s '%s' (see `vkattn --help`)\n",
            name[0] == '-' ? "option" : "command", name);
    return CLI_USAGE;
}
