/* vkattn tokenize: a text (or standard input) into an llm.c token file, streaming. */
#include "cli.h"

#include <string.h>
#include <sys/stat.h>

static const cli_command tokenize_cmd = {
    .name = "tokenize",
    .usage = "--tokenizer FILE --data TEXT --out TOKENS.bin [options]",
    .about = "Encode a text with a tokenizer into llm.c's token file format (int32 header[256]\n"
             "{20240520, 1, tokens, 0...}, then uint16 ids), which train and eval read as they\n"
             "read text.",
    .notes = "The text is read and encoded in pieces of about 1 MiB, so memory stays bounded\n"
             "whatever its size; TEXT may be - for standard input (a pipe). The pieces are cut where\n"
             "no piece of GPT-2's pre-tokenizer can join across (before a code point of another\n"
             "class than the one before it, if that one is no whitespace or apostrophe; or next to\n"
             "a byte that is not UTF-8), so the tokens equal those of the whole text. The output\n"
             "is written to TOKENS.bin.tmp.<pid> and renamed when complete: on any error nothing is\n"
             "left. A tokenizer of more than 65536 tokens is refused (the ids are uint16).\n"
             "--json prints {\"tokens\",\"bytes\",\"seconds\",\"out\"}.",
};

int cmd_tokenize(int argc, char **argv) {
    const char *tok_path = NULL, *data = NULL, *out = NULL;
    bool json = false;
    cli_opt opts[] = {
        CLI_STRING("tokenizer", &tok_path, "FILE", "tokenizer file, llm.c format (required)"),
        CLI_STRING("data", &data, "TEXT", "text to encode; - = standard input (required)"),
        CLI_STRING("out", &out, "TOKENS.bin", "token file to write (required)"),
        CLI_FLAG("json", &json, "print one JSON object"),
    };
    int n_opts = (int)(sizeof opts / sizeof opts[0]);
    int rc = cli_parse(&tokenize_cmd, argc, argv, opts, n_opts);
    if (rc != CLI_OK) return rc < 0 ? CLI_OK : rc;
    if (!tok_path) return cli_usage_error("tokenize", "--tokenizer FILE is required");
    if (!data) return cli_usage_error("tokenize", "--data TEXT is required");
    if (!out) return cli_usage_error("tokenize", "--out TOKENS.bin is required");
    struct stat a, b;
    if (strcmp(data, "-") != 0 && strpbrk(data, "*?[") && stat(data, &a) != 0)
        return cli_usage_error("tokenize", "--data %s: tokenize reads one text (or -); "
                               "patterns are for train and eval", data);
    if (strcmp(data, "-") != 0 && stat(data, &a) == 0 && stat(out, &b) == 0 &&
        a.st_dev == b.st_dev && a.st_ino == b.st_ino)
        return cli_usage_error("tokenize", "--out %s is the text being read (--data)", out);
    if (stat(tok_path, &a) == 0 && stat(out, &b) == 0 && a.st_dev == b.st_dev &&
        a.st_ino == b.st_ino)
        return cli_usage_error("tokenize", "--out %s is the tokenizer being read (--tokenizer)",
                               out);
    rc = cli_check_writable("tokenize", "--out", out, "", "tokens.bin");
    if (rc != CLI_OK) return rc;
    /* Only files: the CPU backend's context needs no device. */
    cli_backend_opts bo = {.backend = VKA_BACKEND_CPU};
    vka_context *ctx = NULL;
    rc = cli_context("tokenize", &bo, &ctx);
    if (rc != CLI_OK) return rc;
    vka_tokenizer *tok = NULL;
    vka_result r = vka_tokenizer_load(ctx, tok_path, &tok);
    if (r != VKA_SUCCESS) {
        rc = cli_fail_load("tokenize", ctx, r, "tokenizer", tok_path, CLI_FILE_TOKENIZER);
    } else {
        uint64_t n_tokens = 0, n_bytes = 0;
        double t0 = cli_now();
        r = vka_tokenize_file(ctx, tok, data, out, &n_tokens, &n_bytes);
        double s = cli_now() - t0;
        if (r != VKA_SUCCESS) {
            rc = cli_fail("tokenize", ctx, r, strcmp(data, "-") == 0 ? "standard input" : data);
        } else if (json) {
            printf("{\"tokens\":%llu,\"bytes\":%llu", (unsigned long long)n_tokens,
                   (unsigned long long)n_bytes);
            cli_json_num(stdout, "seconds", s);
            cli_json_str(stdout, "out", out);
            printf("}\n");
        } else {
            printf("wrote %llu tokens (from %llu bytes of text, %.2f bytes per token) to %s in "
                   "%.1f s\n", (unsigned long long)n_tokens, (unsigned long long)n_bytes,
                   n_tokens ? (double)n_bytes / (double)n_tokens : 0.0, out, s);
        }
    }
    vka_tokenizer_destroy(tok);
    return cli_finish("tokenize", ctx, rc);
}
