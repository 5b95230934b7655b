/* Result strings, per-context error messages, logging. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime under -std=c11 */
#include "vka_internal.h"

#include <time.h>

double vka_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

uint32_t vka_version(void) {
    return ((uint32_t)VKA_VERSION_MAJOR << 16) | ((uint32_t)VKA_VERSION_MINOR << 8) |
           (uint32_t)VKA_VERSION_PATCH;
}

const char *vka_version_string(void) { return VKA_VERSION_STRING; }

const char *vka_16bit_path_string(vka_16bit_path path) {
    switch (path) {
    case VKA_16BIT_PACKED: return "none: bf16/fp16 packed in 32-bit words";
    case VKA_16BIT_STORAGE: return "16-bit storage (fp32 compute)";
    case VKA_16BIT_STORAGE_FP16: return "fp16 compute + 16-bit storage";
    case VKA_16BIT_HOST: return "host: converted by the CPU";
    default: return "unknown";
    }
}

const char *vka_result_string(vka_result result) {
    switch (result) {
#define VKA_X_CASE(name, value, text) \
    case name:                        \
        return text;
        VKA_RESULT_LIST(VKA_X_CASE)
#undef VKA_X_CASE
    }
    return "unknown result";
}

const char *vka_last_error(const vka_context *ctx) { return ctx ? ctx->error : ""; }

vka_result vka_context_usable(vka_context *ctx, const char *fn) {
    if (!ctx) return VKA_ERROR_INVALID_ARGUMENT;
    if (ctx->create_status != VKA_SUCCESS || !ctx->be)
        return vka_set_error(ctx, VKA_ERROR_INVALID_ARGUMENT,
                             "%s: the context failed to create (%s); only vka_last_error and "
                             "vka_context_destroy work on it",
                             fn, vka_result_string(ctx->create_status));
    if (ctx->destroy_pending)
        return vka_set_error(ctx, VKA_ERROR_INVALID_ARGUMENT,
                             "%s: the context was destroyed", fn);
    return VKA_SUCCESS;
}

void vka_log(const vka_context *ctx, vka_log_level level, const char *fmt, ...) {
    if (!ctx || !ctx->log || level > ctx->log_level) return;
    char msg[VKA_ERROR_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    ctx->log(ctx->log_user_data, level, msg);
}

vka_result vka_set_error(vka_context *ctx, vka_result r, const char *fmt, ...) {
    if (!ctx) return r;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ctx->error, sizeof ctx->error, fmt, ap);
    va_end(ap);
    vka_log(ctx, VKA_LOG_ERROR, "%s", ctx->error);
    return r;
}
