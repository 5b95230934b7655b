/* vkattn info: the Vulkan devices, their limits, which one is used and why; CPU threads. */
#include "cli.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

static const cli_command info_cmd = {
    .name = "info",
    .usage = "[options]",
    .about = "List every Vulkan device with the limits that matter to vkattn, say which one the\n"
             "other commands would use and why, and the CPU backend's thread count.",
    .notes = "Device choice: --device N, else the environment variable VKATTN_DEVICE=N, else the\n"
             "best by type (discrete > integrated > virtual > CPU; the first of equals).\n"
             "Exits 1 when there is no Vulkan loader or device (train, generate and eval then run\n"
             "with --backend cpu).",
};

static void bytes_text(uint64_t b, char *out, size_t cap) {
    if (b >= ((uint64_t)1 << 30)) snprintf(out, cap, "%.1f GiB", (double)b / (double)(1u << 30));
    else if (b >= ((uint64_t)1 << 20)) snprintf(out, cap, "%.1f MiB", (double)b / (double)(1u << 20));
    else if (b >= 1024) snprintf(out, cap, "%.1f KiB", (double)b / 1024.0);
    else snprintf(out, cap, "%" PRIu64 " bytes", b);
}

static const char *supported(bool yes) { return yes ? "supported" : "not supported"; }

static void print_device(const vka_device_info *d) {
    char a[64], v[64], b1[32], b2[32], b3[32];
    cli_api_version(d->api_version, a, sizeof a);
    cli_driver_version(d, v, sizeof v);
    printf("%c %u: %s\n", d->selected ? '*' : ' ', d->index, d->name);
    printf("    type                       %s\n", cli_device_type_name(d->type));
    printf("    vendor / device id         0x%04X (%s) / 0x%04X\n", d->vendor_id,
           cli_vendor_name(d->vendor_id), d->device_id);
    printf("    driver                     %s%s%s (version %s)\n",
           d->driver_name[0] ? d->driver_name : "unknown", d->driver_info[0] ? ", " : "",
           d->driver_info, v);
    printf("    Vulkan API                 %s\n", a);
    bytes_text(d->device_local_bytes, b1, sizeof b1);
    bytes_text(d->max_storage_buffer_range, b2, sizeof b2);
    bytes_text(d->max_memory_allocation_size, b3, sizeof b3);
    printf("    device-local memory        %s\n", b1);
    printf("    maxStorageBufferRange      %s (%" PRIu64 " bytes: the most one binding holds)\n", b2,
           d->max_storage_buffer_range);
    printf("    maxMemoryAllocationSize    %s (the largest tensor)\n", b3);
    printf("    workgroup size             %u x %u x %u, %u invocations\n",
           d->max_compute_work_group_size[0], d->max_compute_work_group_size[1],
           d->max_compute_work_group_size[2], d->max_compute_work_group_invocations);
    printf("    workgroup count            %u x %u x %u\n", d->max_compute_work_group_count[0],
           d->max_compute_work_group_count[1], d->max_compute_work_group_count[2]);
    printf("    shared memory              %u bytes\n", d->max_compute_shared_memory_size);
    printf("    push constants             %u bytes\n", d->max_push_constants_size);
    if (d->subgroup_size) printf("    subgroup size              %u\n", d->subgroup_size);
    else printf("    subgroup size              unknown (Vulkan 1.0)\n");
    printf("    unified memory             %s\n", d->unified_memory ? "yes" : "no");
    if (d->timestamps)
        printf("    timestamps                 yes (%g ns per tick)\n", (double)d->timestamp_period);
    else printf("    timestamps                 no\n");
    printf("    compute queue              %s\n", d->has_compute ? "yes" : "no");
    char p16[256];
    cli_16bit_text(d, p16, sizeof p16);
    printf("    16-bit data                %s\n", p16);
    printf("    16-bit storage / float16   %s / %s", supported(d->storage_16bit_supported),
           supported(d->float16_supported));
    if (d->selected)
        printf(" (enabled: %s)", d->storage_16bit && d->float16 ? "both"
                                 : d->storage_16bit            ? "16-bit storage"
                                 : d->float16                  ? "float16"
                                                               : "neither");
    putchar('\n');
}

/* The 16-bit fields of d, as JSON members. */
static void json_16bit(const vka_device_info *d) {
    cli_json_str(stdout, "path_16bit", vka_16bit_path_string(d->path_16bit));
    printf(",\"storage_16bit_supported\":%s,\"float16_supported\":%s"
           ",\"storage_16bit\":%s,\"float16\":%s",
           d->storage_16bit_supported ? "true" : "false", d->float16_supported ? "true" : "false",
           d->storage_16bit ? "true" : "false", d->float16 ? "true" : "false");
    printf(",\"cpu_f16c\":%s,\"cpu_avx512_bf16\":%s,\"cpu_amx_bf16\":%s",
           d->cpu_f16c ? "true" : "false", d->cpu_avx512_bf16 ? "true" : "false",
           d->cpu_amx_bf16 ? "true" : "false");
}

static void json_device(const vka_device_info *d) {
    char a[64], v[64];
    cli_api_version(d->api_version, a, sizeof a);
    cli_driver_version(d, v, sizeof v);
    printf("{\"index\":%u", d->index);
    cli_json_str(stdout, "name", d->name);
    cli_json_str(stdout, "type", cli_device_type_name(d->type));
    printf(",\"vendor_id\":%u", d->vendor_id);
    cli_json_str(stdout, "vendor", cli_vendor_name(d->vendor_id));
    printf(",\"device_id\":%u", d->device_id);
    cli_json_str(stdout, "driver_name", d->driver_name);
    cli_json_str(stdout, "driver_info", d->driver_info);
    cli_json_str(stdout, "driver_version", v);
    cli_json_str(stdout, "api_version", a);
    printf(",\"device_local_bytes\":%" PRIu64 ",\"max_storage_buffer_range\":%" PRIu64
           ",\"max_memory_allocation_size\":%" PRIu64,
           d->device_local_bytes, d->max_storage_buffer_range, d->max_memory_allocation_size);
    printf(",\"max_compute_work_group_size\":[%u,%u,%u]", d->max_compute_work_group_size[0],
           d->max_compute_work_group_size[1], d->max_compute_work_group_size[2]);
    printf(",\"max_compute_work_group_count\":[%u,%u,%u]", d->max_compute_work_group_count[0],
           d->max_compute_work_group_count[1], d->max_compute_work_group_count[2]);
    printf(",\"max_compute_work_group_invocations\":%u,\"max_compute_shared_memory_size\":%u"
           ",\"max_push_constants_size\":%u,\"subgroup_size\":%u",
           d->max_compute_work_group_invocations, d->max_compute_shared_memory_size,
           d->max_push_constants_size, d->subgroup_size);
    printf(",\"unified_memory\":%s,\"timestamps\":%s", d->unified_memory ? "true" : "false",
           d->timestamps ? "true" : "false");
    cli_json_num(stdout, "timestamp_period", d->timestamp_period);
    printf(",\"has_compute\":%s,\"selected\":%s", d->has_compute ? "true" : "false",
           d->selected ? "true" : "false");
    json_16bit(d);
    putchar('}');
}

/* Why the selected device was chosen (mirrors the library's rule in vka_context_desc.device). */
static void selection_reason(const char *device_opt, char *out, size_t cap) {
    const char *env = getenv("VKATTN_DEVICE");
    if (device_opt) snprintf(out, cap, "--device %s", device_opt);
    else if (env && *env) snprintf(out, cap, "VKATTN_DEVICE=%s", env);
    else snprintf(out, cap, "ranking: discrete > integrated > virtual > CPU");
}

/* The CPU backend's thread count and its device (16-bit conversions), from a CPU context; -1,
 * a zero device and the library's message in err if that cannot be made (a bad VKATTN_*
 * setting, say). */
static int cpu_backend(vka_device_info *cpu, char *err, size_t cap) {
    vka_context_desc d = {.backend = VKA_BACKEND_CPU};
    vka_context *ctx = NULL;
    memset(cpu, 0, sizeof *cpu);
    err[0] = '\0';
    int n = -1;
    vka_result r = vka_context_create(&d, &ctx);
    if (r == VKA_SUCCESS) {
        n = vka_context_cpu_threads(ctx);
        if (vka_context_selected_device(ctx, cpu) != VKA_SUCCESS) memset(cpu, 0, sizeof *cpu);
    } else {
        snprintf(err, cap, "%s", vka_last_error(ctx));
    }
    vka_context_destroy(ctx);
    return n;
}

/* Where the CPU backend's thread count came from: info sets no --threads, so OpenMP's default,
 * which is OMP_NUM_THREADS where that is a number (the library caps it), else the CPUs. */
static void threads_source(int threads, char *out, size_t cap) {
    const char *env = getenv("OMP_NUM_THREADS");
    char *end = NULL;
    long n = env ? strtol(env, &end, 10) : 0;
    if (!env || end == env || n < 1)
        snprintf(out, cap, "OpenMP's default: the CPUs; --threads or OMP_NUM_THREADS sets it");
    else if (n > VKA_CPU_MAX_THREADS && threads == VKA_CPU_MAX_THREADS)
        snprintf(out, cap, "OMP_NUM_THREADS=%s, capped at %d; --threads overrides it", env,
                 VKA_CPU_MAX_THREADS);
    else snprintf(out, cap, "OMP_NUM_THREADS=%s; --threads overrides it", env);
}

static int report(vka_context *ctx, bool json, const char *device_opt, int threads,
                  const vka_device_info *cpu) {
    uint32_t n = vka_context_device_count(ctx);
    vka_device_info sel;
    vka_result r = vka_context_selected_device(ctx, &sel);
    if (r != VKA_SUCCESS) return cli_fail("info", ctx, r, "selected device");
    char why[128];
    selection_reason(device_opt, why, sizeof why);
    char p16[256];
    cli_16bit_text(cpu, p16, sizeof p16);
    if (json) printf("{\"version\":\"%s\",\"devices\":[", vka_version_string());
    else printf("Vulkan devices (%u):\n", n);
    for (uint32_t i = 0; i < n; i++) {
        vka_device_info d;
        r = vka_context_device_info(ctx, i, &d);
        if (r != VKA_SUCCESS) return cli_fail("info", ctx, r, "device info");
        if (json) {
            if (i) putchar(',');
            json_device(&d);
        } else print_device(&d);
    }
    if (json) {
        printf("],\"selected\":%u", sel.index);
        cli_json_str(stdout, "selected_by", why);
        printf(",\"cpu_threads\":%d", threads < 0 ? 0 : threads);
        cli_json_str(stdout, "cpu_path_16bit", p16);
        printf(",\"cpu_f16c\":%s,\"cpu_avx512_bf16\":%s,\"cpu_amx_bf16\":%s}\n",
               cpu->cpu_f16c ? "true" : "false", cpu->cpu_avx512_bf16 ? "true" : "false",
               cpu->cpu_amx_bf16 ? "true" : "false");
    } else {
        printf("\nSelected: device %u, %s (by %s)\n", sel.index, sel.name, why);
        if (threads < 0) {
            printf("CPU backend (--backend cpu): cannot be made (the error is below)\n");
        } else {
            char from[160];
            threads_source(threads, from, sizeof from);
            printf("CPU backend (--backend cpu): %d thread(s) (%s)\n", threads, from);
            printf("CPU backend 16-bit data: %s\n", p16);
        }
    }
    return CLI_OK;
}

int cmd_info(int argc, char **argv) {
    bool json = false;
    cli_backend_opts b = {.vulkan_only = true};
    cli_opt opts[] = {
        CLI_FLAG("json", &json, "print one JSON object instead of text"),
        CLI_STRING("device", &b.device, "N",
                   "select device N, as the other commands' --device does"),
        CLI_FLAG("verbose", &b.verbose, "print the library's info messages to stderr"),
    };
    int n_opts = (int)(sizeof opts / sizeof opts[0]);
    int rc = cli_parse(&info_cmd, argc, argv, opts, n_opts);
    if (rc != CLI_OK) return rc < 0 ? CLI_OK : rc;
    rc = cli_check_backend_opts("info", &b, CLI_USES_VULKAN);
    if (rc != CLI_OK) return rc;
    vka_device_info cpu;
    char cpu_err[512];
    int threads = cpu_backend(&cpu, cpu_err, sizeof cpu_err);
    vka_context *ctx = NULL;
    rc = cli_context("info", &b, &ctx);
    if (rc != CLI_OK) {
        if (json) printf("{\"version\":\"%s\",\"devices\":[],\"cpu_threads\":%d}\n",
                         vka_version_string(), threads < 0 ? 0 : threads);
        else if (threads >= 0)
            fprintf(stderr, "vkattn info: the CPU backend runs with %d thread(s)\n", threads);
        if (threads < 0) fprintf(stderr, "vkattn info: the CPU backend fails too: %s\n", cpu_err);
        return rc;
    }
    rc = report(ctx, json, b.device, threads, &cpu);
    rc = cli_finish("info", ctx, rc);
    if (threads < 0) {
        fprintf(stderr, "vkattn info: CPU backend: %s\n", cpu_err);
        if (rc == CLI_OK) rc = CLI_ERROR;
    }
    return rc;
}
