/*
 * The vkattn command line: what the commands share -- exit codes, the option tables and their
 * parser and help printer (cli_args.c), context creation with the backend options, error
 * reporting and devices (cli_context.c), file kinds, model loading and writing files
 * (cli_files.c), JSON and shell-word output (cli_output.c), data paths (cli_data.c), kernel
 * kinds (profile.c). Each command lives in tools/cmd_<name>.c. The command line uses the
 * library only through include/vkattn.h.
 */
#ifndef VKA_CLI_H
#define VKA_CLI_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "vkattn.h"

/* Exit codes (docs/environment.md "Exit codes"). */
enum {
    CLI_OK = 0,
    CLI_ERROR = 1,        /* runtime error: a file, the device, the library said no */
    CLI_USAGE = 2,        /* bad command line */
    CLI_INTERRUPTED = 130 /* train stopped by SIGINT/SIGTERM after saving (128 + SIGINT) */
};

/* ---------------------------------------------------------------------------------------------
 * Option tables. Each command describes its options as an array of cli_opt; cli_parse() fills
 * the values (and .set), cli_help() prints them, so the two cannot drift apart.
 * ------------------------------------------------------------------------------------------- */
typedef enum cli_opt_kind {
    OPT_FLAG,   /* bool, no value */
    OPT_INT,    /* int in [min, max] */
    OPT_U64,    /* uint64_t, decimal */
    OPT_FLOAT,  /* float, finite, in [min, max] (or (min, max] with min_open) */
    OPT_STRING, /* const char *, non-empty text */
    OPT_CHOICE, /* int index into choices */
} cli_opt_kind;

typedef struct cli_opt {
    const char *name;      /* without the leading "--" */
    cli_opt_kind kind;
    void *value;           /* bool*, int*, uint64_t*, float*, const char**, int* */
    const char *metavar;   /* "N", "FILE"; NULL for flags */
    const char *help;      /* one line; the default is part of it */
    double min, max;       /* OPT_INT and OPT_FLOAT */
    bool min_open;         /* OPT_FLOAT: value must be > min */
    const char *const *choices; /* OPT_CHOICE: NULL-terminated */
    bool set;              /* filled by cli_parse: given on the command line */
} cli_opt;

/* A command's help text around its option table. */
/* Table entries (designated, so every other field is zero). */
#define CLI_FLAG(n, p, h) {.name = (n), .kind = OPT_FLAG, .value = (p), .help = (h)}
#define CLI_INT(n, p, mv, h, lo, hi)                                                            \
    {.name = (n), .kind = OPT_INT, .value = (p), .metavar = (mv), .help = (h), .min = (lo),     \
     .max = (hi)}
#define CLI_U64(n, p, mv, h) {.name = (n), .kind = OPT_U64, .value = (p), .metavar = (mv), .help = (h)}
#define CLI_FLOAT(n, p, mv, h, lo, hi)                                                          \
    {.name = (n), .kind = OPT_FLOAT, .value = (p), .metavar = (mv), .help = (h), .min = (lo),   \
     .max = (hi)}
/* A float that must be above lo. */
#define CLI_FLOAT_GT(n, p, mv, h, lo, hi)                                                       \
    {.name = (n), .kind = OPT_FLOAT, .value = (p), .metavar = (mv), .help = (h), .min = (lo),   \
     .max = (hi), .min_open = true}
#define CLI_STRING(n, p, mv, h)                                                                 \
    {.name = (n), .kind = OPT_STRING, .value = (p), .metavar = (mv), .help = (h)}
#define CLI_CHOICE(n, p, mv, h, list)                                                           \
    {.name = (n), .kind = OPT_CHOICE, .value = (p), .metavar = (mv), .help = (h), .choices = (list)}

typedef struct cli_command {
    const char *name;     /* "train" */
    const char *usage;    /* "[options]" or "--model MODEL [options]" */
    const char *about;    /* paragraph(s) before the options */
    const char *notes;    /* paragraph(s) after the options, or NULL */
} cli_command;

/* Parse argv[1..argc) against opts. Returns CLI_OK, CLI_USAGE (message printed), or -1 when
 * --help was asked for (help printed to stdout). */
int cli_parse(const cli_command *cmd, int argc, char **argv, cli_opt *opts, int n_opts);
/* Print the command's help (usage, about, options, notes). */
void cli_help(FILE *f, const cli_command *cmd, const cli_opt *opts, int n_opts);
/* The option named name in opts (NULL if none). */
cli_opt *cli_find(cli_opt *opts, int n_opts, const char *name);
/* Print "vkattn CMD: message" to stderr and return CLI_USAGE. */
int cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---------------------------------------------------------------------------------------------
 * Backend options shared by the commands that run the model.
 * ------------------------------------------------------------------------------------------- */
typedef struct cli_backend_opts {
    int backend;          /* index into cli_backend_names: VKA_BACKEND_VULKAN or _CPU */
    const char *device;   /* --device N, or NULL */
    int kernels;          /* index into cli_kernel_names: auto, gpu, cpu */
    int threads;          /* CPU backend threads; 0 = OpenMP's default */
    bool verbose;         /* library info messages on stderr */
    bool vulkan_only;     /* the command has no --backend (info, check): hints must not suggest it */
    int attention;        /* index into cli_attention_names: a vka_attention_impl */
    int precision;        /* index into cli_precision_names: a vka_dtype (--precision) */
    vka_cpu_kernels cpu_kernels; /* CPU backend kernels (no option: train --resume takes the
                                    recorded ones); 0 = $VKATTN_CPU_KERNELS, else fast */
} cli_backend_opts;

extern const char *const cli_backend_names[];
extern const char *const cli_kernel_names[];
extern const char *const cli_attention_names[];
extern const char *const cli_precision_names[]; /* fp32, bf16, fp16: vka_dtype's order */

/* --attention, for the commands that run a model (train, eval, generate). */
#define CLI_ATTENTION_OPT(b)                                                                    \
    CLI_CHOICE("attention", &(b)->attention, "KIND",                                            \
               "fused (one op, no T x T matrices; default) or composed (matmul, softmax, "      \
               "matmul: the reference)", cli_attention_names)

/* --precision, for the commands that run a model (train, eval, generate). */
#define CLI_PRECISION_OPT(b)                                                                    \
    CLI_CHOICE("precision", &(b)->precision, "P",                                               \
               "number format of the matrix products: fp32, or bf16 or fp16 (mixed precision: " \
               "16-bit copies of the weights and inputs, float32 sums and everything else) "    \
               "(default: fp32)", cli_precision_names)
/* Set gpt's precision to precision (an index into cli_precision_names; vka_gpt_set_precision):
 * CLI_OK, or CLI_ERROR with the library's message. */
int cli_set_precision(const char *cmd, vka_context *ctx, vka_gpt *gpt, int precision);

/* The table entries for cli_backend_opts, for a command's option array. */
#define CLI_BACKEND_OPTS(b)                                                                     \
    CLI_CHOICE("backend", &(b)->backend, "NAME", "vulkan or cpu (default: vulkan)",              \
               cli_backend_names),                                                              \
    CLI_STRING("device", &(b)->device, "N",                                                     \
               "Vulkan device index as `vkattn info` lists it (default: $VKATTN_DEVICE, else "  \
               "the best)"),                                                                    \
    CLI_CHOICE("kernels", &(b)->kernels, "KIND",                                                \
               "Vulkan kernel variants: auto, gpu or cpu (default: auto, by device type)",      \
               cli_kernel_names),                                                               \
    CLI_INT("threads", &(b)->threads, "N",                                                      \
            "CPU backend threads (default: 0 = OpenMP's default, $OMP_NUM_THREADS)", 0,         \
            VKA_CPU_MAX_THREADS),                                                               \
    CLI_FLAG("verbose", &(b)->verbose, "print the library's info messages to stderr")

/* Which backends a command runs, for cli_check_backend_opts: bits that may be combined (bench
 * runs both by default). */
enum { CLI_USES_VULKAN = 1, CLI_USES_CPU = 2 };
/* The one backend b->backend chooses, as a CLI_USES_ bit. */
#define CLI_USES_CHOSEN(b) ((b)->backend == VKA_BACKEND_CPU ? CLI_USES_CPU : CLI_USES_VULKAN)

/* Check --device is an index, and that no option is given that the backends the command uses
 * (CLI_USES_ bits) all ignore (--device and --kernels are Vulkan's, --threads the CPU
 * backend's): usage error otherwise. */
int cli_check_backend_opts(const char *cmd, const cli_backend_opts *b, unsigned uses);
/* Create the context; on failure print the reason (with a hint to use --backend cpu when
 * Vulkan is unavailable) and return CLI_ERROR, or CLI_USAGE for a malformed VKATTN_* value. */
int cli_context(const char *cmd, const cli_backend_opts *b, vka_context **out);
/* cli_context without a word: on failure *why receives the reason and the result is returned. */
vka_result cli_context_try(const char *cmd, const cli_backend_opts *b, vka_context **out,
                           char *why, size_t cap);
/* Write len bytes to path with vka_file_write_atomic (path.tmp.<pid>, fsync, rename), so that
 * path is always either the old file or the whole new one. ctx (may be NULL) holds the message.
 * On failure prints why (naming path) and returns CLI_ERROR. */
int cli_write_file_atomic(const char *cmd, vka_context *ctx, const char *path, const void *data,
                          size_t len);
/* Say now, not after the work whose result goes there, that path cannot be written: it is a
 * directory (the message suggests DIR/example as option's value) or another file that is not
 * a regular one, or no file can be created beside it -- the one tried (and removed at once) is
 * the temporary name the write uses, path + suffix + ".tmp.<pid>" (suffix "" for
 * cli_write_file_atomic), so that a name too long is found too. Prints why and returns
 * CLI_ERROR; CLI_OK otherwise. */
int cli_check_writable(const char *cmd, const char *option, const char *path, const char *suffix,
                       const char *example);
/* The directory part of path: "." when there is none, "/" for "/x"; malloc'd (NULL if out of
 * memory). */
char *cli_dir_of(const char *path);
/* Destroy ctx; returns CLI_ERROR (after saying so) if the validation layer reported anything
 * (VKATTN_VALIDATION=1), else rc. */
int cli_finish(const char *cmd, vka_context *ctx, int rc);
/* "llvmpipe (LLVM 15.0.6, 256 bits)" or the CPU model: the device the context runs on. */
void cli_device_name(vka_context *ctx, char *out, size_t cap);

/* Print "vkattn CMD: what: <vka_last_error(ctx)>" (plus a hint fit for the command where the
 * Vulkan device is the problem) and return CLI_ERROR. */
int cli_fail(const char *cmd, vka_context *ctx, vka_result r, const char *what);

/* What a file holds, from its first bytes (docs/files.md), for messages that say what was
 * given instead of what was expected. */
typedef enum cli_file_kind {
    CLI_FILE_UNKNOWN = 0,
    CLI_FILE_MODEL,      /* llm.c GPT-2 checkpoint (magic 20240326) */
    CLI_FILE_TOKENIZER,  /* llm.c tokenizer (magic 20240328) */
    CLI_FILE_STATE,      /* vkattn training state ("VKAS") */
    CLI_FILE_EXECUTABLE, /* ELF */
    CLI_FILE_TEXT,       /* the first bytes are printable text */
} cli_file_kind;

cli_file_kind cli_file_kind_of(const char *path);
/* If path is recognisably not `expected`, say what it is and what to give instead, in the
 * command line's terms, and return CLI_ERROR; else CLI_OK. */
int cli_check_file_kind(const char *cmd, const char *what, const char *path,
                        cli_file_kind expected);
/* cli_check_file_kind for a file whose kind (cli_file_kind_of) is known already. */
int cli_check_kind(const char *cmd, const char *what, const char *path, cli_file_kind kind,
                   cli_file_kind expected);
/* A load of path as `expected` failed with r: cli_check_file_kind's message if the file is
 * recognisably something else, else cli_fail(what)'s. Returns CLI_ERROR. */
int cli_fail_load(const char *cmd, vka_context *ctx, vka_result r, const char *what,
                  const char *path, cli_file_kind expected);

/* Load the model at model_path, then its tokenizer (tok_path, or NULL for the model's sibling
 * .tokenizer.bin, as `vkattn train` saves it), and check that they belong together (the same
 * vocabulary size). On failure print why and return CLI_ERROR with *gpt and *tok NULL. */
int cli_load_model(const char *cmd, vka_context *ctx, const char *model_path,
                   const char *tok_path, vka_gpt **gpt, vka_tokenizer **tok);

/* ---------------------------------------------------------------------------------------------
 * Data (train, eval)
 * ------------------------------------------------------------------------------------------- */
/* The files --data (or --val-data) names: "-" (standard input), a file, or a glob pattern
 * ("shards/train_*.bin", sorted) when no file has that very name. *paths is malloc'd (free it
 * with cli_free_paths). A pattern that matches nothing: message and CLI_USAGE. */
int cli_data_paths(const char *cmd, const char *option, const char *pattern, char ***paths,
                   int *n);
void cli_free_paths(char **paths, int n);
/* Bytes the n tokens decode to (vka_tokenizer_decode's lengths), for bits per byte. */
uint64_t cli_token_bytes(const vka_tokenizer *tok, const int32_t *ids, size_t n);
/* Bits per byte: nats summed over the scored targets / (ln 2 * their bytes); NaN if 0 bytes. */
double cli_bits_per_byte(double total_nats, uint64_t bytes);

/* ---------------------------------------------------------------------------------------------
 * Devices (info, bench)
 * ------------------------------------------------------------------------------------------- */
/* "discrete GPU", "CPU", ... */
const char *cli_device_type_name(vka_device_type t);
/* "NVIDIA", "Mesa", ... from the PCI (or Khronos) vendor id; "unknown" otherwise. */
const char *cli_vendor_name(uint32_t vendor_id);
/* "1.3.230" from a VK_MAKE_API_VERSION value. */
void cli_api_version(uint32_t v, char *out, size_t cap);
/* The driver version as its vendor writes it (NVIDIA's packing differs from Vulkan's). */
void cli_driver_version(const vka_device_info *d, char *out, size_t cap);
/* What the Vulkan kernels do with 16-bit data on each path (vka_16bit_path's docstring): the
 * kernels with 16-bit-storage builds (shaders/ with "// vka:s16-variant"), and the rest. */
#define CLI_16BIT_KERNELS "the kernels read bf16 and fp16 as packed 32-bit words, fp32 arithmetic"
#define CLI_16BIT_KERNELS_S16                                                                    \
    "16-bit loads and stores in kv_write and the storage-buffer builds of layernorm forward, "  \
    "matmul and crossentropy backward; packed 32-bit words in the texel builds and the other "  \
    "kernels; fp32 arithmetic"
#define CLI_16BIT_KERNELS_OFF "VKATTN_16BIT_STORAGE=0: " CLI_16BIT_KERNELS
/* How the device holds 16-bit data (vka_16bit_path_string), with the CPU backend's conversion
 * instructions ("host: converted by the CPU (F16C, AVX512-BF16)"). */
void cli_16bit_text(const vka_device_info *d, char *out, size_t cap);

/* ---------------------------------------------------------------------------------------------
 * Profiles (tools/profile.c): per-op times folded into kernel kinds, so that `train --profile`
 * and `bench` print the same categories.
 * ------------------------------------------------------------------------------------------- */
#define CLI_MAX_KINDS 24
#define CLI_KIND_MAX_OPS 5 /* ops of one kind (tools/profile.c's table) */

typedef struct cli_kind_time {
    const char *kind;  /* "matmul", "softmax", ... (cli_op_kind) */
    uint32_t calls;    /* dispatches of its ops in the profiled run */
    double ms;         /* their summed time */
    const char *ops[CLI_KIND_MAX_OPS]; /* the op names folded into it (vka_op_time.op: static) */
    int n_ops;
} cli_kind_time;

/* The kernel kind of an op name ("softmax_backward" -> "softmax"); unknown ops are their own. */
const char *cli_op_kind(const char *op);
/* Fold n per-op times (vka_graph_times, vka_gpt_times) into kinds, in the fixed kind order (the
 * order of a layer's ops); returns how many kinds (at most cap). */
int cli_profile_kinds(const vka_op_time *ops, int n, cli_kind_time *out, int cap);
/* One line per kind, slowest first: kind, calls, ms, share of the summed op time, its ops. */
void cli_profile_print(FILE *f, const cli_kind_time *kinds, int n, const char *indent);
/* [{"kind","calls","ms","percent","ops":[...]},...] in the fixed kind order. */
void cli_profile_json(FILE *f, const cli_kind_time *kinds, int n);

/* ---------------------------------------------------------------------------------------------
 * Files and output
 * ------------------------------------------------------------------------------------------- */
/* Whether a and b are the same file: the same device and inode where both exist, else the
 * same path. */
bool cli_same_file(const char *a, const char *b);
/* path with a trailing ".bin" replaced by suffix (".tokenizer.bin"), or suffix appended;
 * malloc'd (NULL if out of memory). */
char *cli_sibling_path(const char *path, const char *suffix);
/* X.state.bin -> X + suffix (".bin": the model `train --resume` saves to by default;
 * ".tokenizer.bin": the tokenizer saved with the state); NULL if state_path does not end in
 * .state.bin (or out of memory). malloc'd. */
char *cli_state_sibling(const char *state_path, const char *suffix);
/* Write s as one shell word: as it is when plain, in single quotes when it is valid UTF-8
 * without control characters, else as $'...' with each such byte as \xHH (so a command the
 * CLI prints, e.g. "continue with: ...", survives a copy from a UTF-8 terminal). */
void cli_shell_word(FILE *f, const char *s);
/* Write s as a JSON string, quoted; every string the command line puts in JSON goes through
 * here. Valid UTF-8 is written as it is (but for ", \ and the control characters, escaped);
 * each byte that is not part of a well-formed UTF-8 sequence (a stray continuation byte, a
 * truncated sequence, an overlong form, a surrogate U+D800..DFFF, a code point past U+10FFFF,
 * 0xF5..0xFF) is written as \udcXX, XX its value in hex: Python's surrogateescape, so that the
 * output is ASCII plus valid UTF-8 and the bytes can be recovered (docs/commands.md "JSON output"). */
void cli_json_string(FILE *f, const char *s);
/* cli_json_string of the n bytes at s (which may hold NUL: written as \u0000). */
void cli_json_string_n(FILE *f, const char *s, size_t n);
/* Write x as a JSON number with 9 significant digits (a float32 reads back exactly); null
 * if not finite (JSON has no NaN). */
void cli_json_number(FILE *f, double x);
/* A member after the first of a JSON object: ,"key": then (num, str) the value as
 * cli_json_number or cli_json_string write it. The first member, after the '{', is written
 * without these. */
void cli_json_key(FILE *f, const char *key);
void cli_json_num(FILE *f, const char *key, double x);
void cli_json_str(FILE *f, const char *key, const char *s);
/* A perplexity for people: fixed-point up to 10^6, then in exponent form ("3.162e+21"). */
void cli_perplexity_text(double ppl, char *out, size_t cap);
/* Seconds since an arbitrary start (monotonic clock). */
double cli_now(void);

#endif
