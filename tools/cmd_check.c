/* vkattn check: every Vulkan kernel, and one training step, against the CPU reference. */
#include "cli.h"

#include <string.h>

static const cli_command check_cmd = {
    .name = "check",
    .usage = "[options]",
    .about = "Run every op forward and backward, and one training step of a small model, on the\n"
             "Vulkan device and on the CPU reference with the same random data, and compare.",
    .notes = "Each row: the op, the largest absolute and relative difference from the CPU reference,\n"
             "the tolerance on the absolute difference, PASS or FAIL, and the shape (last, as shapes\n"
             "vary in length). Exits 1 if any row fails. --json prints {\"device\",\"kernels\",\"kernels_in_use\",\"rows\":[{\"op\",\"shape\",\"max_abs\",\n"
             "\"max_rel\",\"tol\",\"pass\"}...],\"failed\",\"pass\"}.",
};

/* Width of the op column: the longest op name, "crossentropy_forward_backward bf16". The
 * shape, whose length varies most, is the last column so that the others stay aligned. */
#define OP_WIDTH 34

typedef struct check_out {
    bool json;
    int rows;
} check_out;

static void on_row(void *user, const vka_check_row *row) {
    check_out *o = user;
    if (o->json) {
        printf("%s{\"op\":", o->rows ? "," : "");
        cli_json_string(stdout, row->op);
        cli_json_str(stdout, "shape", row->shape);
        cli_json_num(stdout, "max_abs", row->max_abs);
        cli_json_num(stdout, "max_rel", row->max_rel);
        cli_json_num(stdout, "tol", row->tol);
        printf(",\"pass\":%s}", row->pass ? "true" : "false");
    } else {
        printf("%-*s %10.3g %10.3g %10.3g  %-6s  %s\n", OP_WIDTH, row->op, row->max_abs,
               row->max_rel, row->tol, row->pass ? "PASS" : "FAIL", row->shape);
    }
    fflush(stdout);
    o->rows++;
}

int cmd_check(int argc, char **argv) {
    bool json = false;
    uint64_t seed = 1;
    cli_backend_opts b = {.vulkan_only = true};
    cli_opt opts[] = {
        CLI_FLAG("json", &json, "print one JSON object instead of a table"),
        CLI_U64("seed", &seed, "S", "seed of the random test data (default: 1)"),
        CLI_STRING("device", &b.device, "N",
                   "Vulkan device index (default: $VKATTN_DEVICE, else the best)"),
        CLI_CHOICE("kernels", &b.kernels, "KIND",
                   "kernel variants: auto, gpu or cpu (default: auto)", cli_kernel_names),
        CLI_FLAG("verbose", &b.verbose, "print the library's info messages to stderr"),
    };
    int n_opts = (int)(sizeof opts / sizeof opts[0]);
    int rc = cli_parse(&check_cmd, argc, argv, opts, n_opts);
    if (rc != CLI_OK) return rc < 0 ? CLI_OK : rc;
    rc = cli_check_backend_opts("check", &b, CLI_USES_VULKAN);
    if (rc != CLI_OK) return rc;
    vka_context *ctx = NULL;
    rc = cli_context("check", &b, &ctx);
    if (rc != CLI_OK) return rc;
    char device[256], p16[256] = "unknown";
    cli_device_name(ctx, device, sizeof device);
    vka_device_info info;
    if (vka_context_selected_device(ctx, &info) == VKA_SUCCESS)
        cli_16bit_text(&info, p16, sizeof p16);
    if (json) {
        printf("{\"device\":");
        cli_json_string(stdout, device);
        cli_json_str(stdout, "kernels", cli_kernel_names[b.kernels]);
        const char *in_use = vka_context_vulkan_kernels(ctx);
        if (in_use) cli_json_str(stdout, "kernels_in_use", in_use);
        cli_json_str(stdout, "path_16bit", p16);
        printf(",\"seed\":%llu,\"rows\":[", (unsigned long long)seed);
    } else {
        const char *in_use = vka_context_vulkan_kernels(ctx);
        printf("device: %s (kernels: %s%s%s)\n", device, cli_kernel_names[b.kernels],
               in_use ? "; in use: " : "", in_use ? in_use : "");
        printf("16-bit data: %s\n", p16);
        printf("%-*s %10s %10s %10s  %-6s  %s\n", OP_WIDTH, "op", "max abs", "max rel", "tol",
               "result", "shape");
    }
    check_out out = {.json = json};
    int failed = 0;
    vka_result r = vka_check(ctx, seed, on_row, &out, &failed);
    if (json) {
        printf("],\"failed\":%d,\"pass\":%s}\n", failed, r == VKA_SUCCESS ? "true" : "false");
    } else if (r == VKA_SUCCESS) {
        printf("all %d checks passed\n", out.rows);
    }
    fflush(stdout);
    if (r == VKA_ERROR_MISMATCH) {
        fprintf(stderr, "vkattn check: %d of %d checks failed\n", failed, out.rows);
        rc = CLI_ERROR;
    } else if (r != VKA_SUCCESS) {
        rc = cli_fail("check", ctx, r, "check");
    }
    return cli_finish("check", ctx, rc);
}
