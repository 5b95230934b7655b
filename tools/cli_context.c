/* Contexts from the backend options, the library's messages as the command line reports
 * them, and device descriptions (see cli.h). */
#include "cli.h"

#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------------------------------------
 * Contexts and errors
 * ------------------------------------------------------------------------------------------- */

typedef struct cli_log_state {
    const char *cmd;
    bool verbose;
    bool vulkan_only; /* cli_backend_opts.vulkan_only, for cli_fail's hints */
} cli_log_state;

/* The logger's state lives as long as the process (one context per command). */
static cli_log_state log_state;

/* Errors reach the user through vka_last_error(); the logger shows warnings and the
 * validation layer's messages (all messages with --verbose). */
static void cli_log(void *user, vka_log_level level, const char *msg) {
    const cli_log_state *s = user;
    bool validation = strncmp(msg, "validation:", 11) == 0;
    if (!s->verbose && level == VKA_LOG_ERROR && !validation) return;
    static const char *const names[] = {"error", "warning", "info", "debug"};
    fprintf(stderr, "vkattn %s: %s: %s\n", s->cmd, names[level], msg);
}

int cli_check_backend_opts(const char *cmd, const cli_backend_opts *b, unsigned uses) {
    bool vulkan = uses & CLI_USES_VULKAN, cpu = uses & CLI_USES_CPU;
    if (b->device) {
        const char *p = b->device;
        while (*p >= '0' && *p <= '9') p++;
        if (*p || p == b->device || p - b->device > 9)
            return cli_usage_error(cmd, "--device '%s' is not a device index (see `vkattn info`)",
                                   b->device);
        if (!vulkan)
            return cli_usage_error(cmd, "--device selects a Vulkan device; it does not apply to "
                                        "--backend cpu");
    }
    /* An option the chosen backends would ignore is a mistake, not a no-op. */
    if (!vulkan && b->kernels != 0)
        return cli_usage_error(cmd, "--kernels chooses Vulkan kernel variants; it does not apply "
                                    "to --backend cpu");
    if (!cpu && b->threads != 0)
        return cli_usage_error(cmd, "--threads sets the CPU backend's threads; it does not apply "
                                    "to --backend vulkan (add --backend cpu)");
    return CLI_OK;
}

vka_result cli_context_try(const char *cmd, const cli_backend_opts *b, vka_context **out,
                           char *why, size_t cap) {
    log_state = (cli_log_state){.cmd = cmd, .verbose = b->verbose, .vulkan_only = b->vulkan_only};
    vka_context_desc d = {
        .backend = b->backend == VKA_BACKEND_CPU ? VKA_BACKEND_CPU : VKA_BACKEND_VULKAN,
        .device = b->device,
        .cpu_threads = b->threads,
        .log = cli_log,
        .log_user_data = &log_state,
        .log_level = b->verbose ? VKA_LOG_INFO : VKA_LOG_WARN,
        .label = "vkattn",
        .kernels = b->kernels == 1 ? VKA_KERNELS_GPU : b->kernels == 2 ? VKA_KERNELS_CPU
                                                                       : VKA_KERNELS_AUTO,
        .cpu_kernels = b->cpu_kernels,
    };
    vka_context *ctx = NULL;
    vka_result r = vka_context_create(&d, &ctx);
    if (r != VKA_SUCCESS) {
        /* ctx is NULL only when host memory ran out. */
        const char *msg = ctx ? vka_last_error(ctx) : "";
        snprintf(why, cap, "%s", *msg ? msg : vka_result_string(r));
        vka_context_destroy(ctx);
        return r;
    }
    *out = ctx;
    return VKA_SUCCESS;
}

static int report(const char *cmd, const char *what, vka_result r, const char *msg, bool vulkan);

int cli_context(const char *cmd, const cli_backend_opts *b, vka_context **out) {
    char why[512];
    vka_result r = cli_context_try(cmd, b, out, why, sizeof why);
    if (r == VKA_SUCCESS) return CLI_OK;
    bool vulkan = b->backend != VKA_BACKEND_CPU;
    int rc = report(cmd, vulkan ? "Vulkan" : "CPU backend", r, why, vulkan);
    /* The desc holds only options cli_parse checked, so an invalid argument is a VKATTN_*
     * variable's value (vka_settings_resolve names it): a usage error, as a bad option is. */
    return r == VKA_ERROR_INVALID_ARGUMENT ? CLI_USAGE : rc;
}

int cli_finish(const char *cmd, vka_context *ctx, int rc) {
    uint32_t n = vka_context_validation_messages(ctx);
    vka_context_destroy(ctx);
    if (n == 0) return rc;
    fprintf(stderr, "vkattn %s: the Vulkan validation layer reported %u message(s) (above)\n", cmd, n);
    return rc == CLI_OK ? CLI_ERROR : rc;
}

void cli_device_name(vka_context *ctx, char *out, size_t cap) {
    vka_device_info info;
    if (vka_context_selected_device(ctx, &info) == VKA_SUCCESS) snprintf(out, cap, "%s", info.name);
    else snprintf(out, cap, "unknown");
}

void cli_16bit_text(const vka_device_info *d, char *out, size_t cap) {
    const char *path = vka_16bit_path_string(d->path_16bit);
    if (d->path_16bit != VKA_16BIT_HOST) { /* what the kernels do with 16-bit data */
        const char *how = d->path_16bit == VKA_16BIT_STORAGE ? CLI_16BIT_KERNELS_S16
                          : d->storage_16bit                 ? CLI_16BIT_KERNELS_OFF
                                                             : CLI_16BIT_KERNELS;
        snprintf(out, cap, "%s (%s)", path, how);
        return;
    }
    const char *isa = d->cpu_f16c && d->cpu_avx512_bf16 ? "F16C, AVX512-BF16"
                      : d->cpu_f16c                      ? "F16C"
                      : d->cpu_avx512_bf16               ? "AVX512-BF16"
                                                         : "none: scalar reference";
    snprintf(out, cap, "%s (%s%s)", path, isa, d->cpu_amx_bf16 ? "; bf16 matmul on AMX" : "");
}

static bool device_problem(vka_result r) {
    return r == VKA_ERROR_NO_VULKAN || r == VKA_ERROR_NO_DEVICE || r == VKA_ERROR_UNSUPPORTED ||
           r == VKA_ERROR_DEVICE_LOST || r == VKA_ERROR_VULKAN;
}

/* msg without the library's advice to "use --backend cpu" (and the separator before it), for
 * the commands that have no --backend. */
static void without_backend_advice(const char *msg, char *out, size_t cap) {
    const char *advice = "use --backend cpu", *hit = strstr(msg, advice);
    if (!hit) {
        snprintf(out, cap, "%s", msg);
        return;
    }
    static const char *const separators[] = {", or ", " or ", "; ", ", "};
    size_t cut = (size_t)(hit - msg);
    for (size_t i = 0; i < sizeof separators / sizeof separators[0]; i++) {
        size_t n = strlen(separators[i]);
        if (cut >= n && strncmp(hit - n, separators[i], n) == 0) {
            cut -= n;
            break;
        }
    }
    snprintf(out, cap, "%.*s%s", (int)cut, msg, hit + strlen(advice));
}

/* After a device problem: what the user can do, in terms of the command's own options. */
static void device_hint(const char *cmd, vka_result r, const char *msg) {
    if (!device_problem(r) || strstr(msg, "is not a device index")) return;
    if (log_state.vulkan_only)
        fprintf(stderr, "vkattn %s: hint: `vkattn %s` needs a working Vulkan device (a GPU driver, "
                "or Mesa's lavapipe: mesa-vulkan-drivers); train, generate and eval also run "
                "without one, with --backend cpu\n", cmd, cmd);
    else if (!strstr(msg, "--backend cpu"))
        fprintf(stderr, "vkattn %s: hint: without a working Vulkan device, add --backend cpu\n",
                cmd);
}

/* Print "vkattn CMD: WHAT: MSG" and, on a Vulkan device problem, what to do about it. */
static int report(const char *cmd, const char *what, vka_result r, const char *msg, bool vulkan) {
    /* The library's messages may start with its function's name ("vka_gpt_eval: ") or with
     * the same word as what ("model: "): neither is said twice, nor the function named. */
    size_t fn = strncmp(msg, "vka_", 4) == 0 ? strspn(msg, "abcdefghijklmnopqrstuvwxyz0123456789_")
                                             : 0;
    if (fn && strncmp(msg + fn, ": ", 2) == 0) msg += fn + 2;
    size_t lw = strlen(what);
    if (strncmp(msg, what, lw) == 0 && strncmp(msg + lw, ": ", 2) == 0) msg += lw + 2;
    char text[1024];
    if (log_state.vulkan_only) without_backend_advice(msg, text, sizeof text);
    else snprintf(text, sizeof text, "%s", msg);
    fprintf(stderr, "vkattn %s: %s: %s\n", cmd, what, text);
    if (vulkan) device_hint(cmd, r, msg);
    return CLI_ERROR;
}

int cli_fail(const char *cmd, vka_context *ctx, vka_result r, const char *what) {
    const char *msg = vka_last_error(ctx);
    if (!*msg) msg = vka_result_string(r);
    return report(cmd, what, r, msg, ctx && vka_context_backend(ctx) == VKA_BACKEND_VULKAN);
}

int cli_set_precision(const char *cmd, vka_context *ctx, vka_gpt *gpt, int precision) {
    vka_result r = vka_gpt_set_precision(gpt, (vka_dtype)precision);
    return r == VKA_SUCCESS ? CLI_OK : cli_fail(cmd, ctx, r, "--precision");
}

/* ---------------------------------------------------------------------------------------------
 * Devices
 * ------------------------------------------------------------------------------------------- */

const char *cli_device_type_name(vka_device_type t) {
    switch (t) {
    case VKA_DEVICE_TYPE_INTEGRATED_GPU: return "integrated GPU";
    case VKA_DEVICE_TYPE_DISCRETE_GPU: return "discrete GPU";
    case VKA_DEVICE_TYPE_VIRTUAL_GPU: return "virtual GPU";
    case VKA_DEVICE_TYPE_CPU: return "CPU";
    default: return "other";
    }
}

const char *cli_vendor_name(uint32_t id) {
    switch (id) {
    case 0x1002: return "AMD";
    case 0x10DE: return "NVIDIA";
    case 0x8086: return "Intel";
    case 0x13B5: return "ARM";
    case 0x5143: return "Qualcomm";
    case 0x1010: return "Imagination";
    case 0x106B: return "Apple";
    case 0x10005: return "Mesa";
    default: return "unknown";
    }
}

/* Vulkan's version packing (variant:3, major:7, minor:10, patch:12). */
void cli_api_version(uint32_t v, char *out, size_t cap) {
    snprintf(out, cap, "%u.%u.%u", (v >> 22) & 0x7F, (v >> 12) & 0x3FF, v & 0xFFF);
}

/* Driver versions are vendor-specific; NVIDIA packs 10.8.8.6 bits, most others as Vulkan. */
void cli_driver_version(const vka_device_info *d, char *out, size_t cap) {
    uint32_t v = d->driver_version;
    if (d->vendor_id == 0x10DE)
        snprintf(out, cap, "%u.%u.%u.%u", v >> 22, (v >> 14) & 0xFF, (v >> 6) & 0xFF, v & 0x3F);
    else cli_api_version(v, out, cap);
}
