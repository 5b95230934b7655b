/* Shared by the libFuzzer targets tests/fuzz/fuzz_<loader>.c (built with -DVKATTN_FUZZ=ON; see
 * tools/fuzz.sh). The loaders take paths, so each input is written to a memfd and loaded as
 * /proc/self/fd/N (no disk I/O per input); files a target writes (save, then load again) go to
 * a private folder in /dev/shm. One CPU-backend context is made in LLVMFuzzerInitialize and
 * kept for the whole run. Like the cmocka tests, the targets use only include/vkattn.h.
 *
 * Besides ASan/UBSan/LeakSanitizer and libFuzzer's -rss_limit_mb/-malloc_limit_mb (a header
 * claiming gigabytes must be refused before anything that size is allocated), each target
 * checks properties the header documents; fz_require aborts with the input's story. */
#ifndef VKA_FUZZ_UTIL_H
#define VKA_FUZZ_UTIL_H

#define _GNU_SOURCE
#include <vkattn.h>

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* The ceiling the context plans against (max_memory_bytes): far below -rss_limit_mb, so a model
 * the backend accepts cannot exhaust the fuzzer's memory. */
#define FZ_MAX_MEMORY_BYTES ((uint64_t)256 << 20)

#define fz_require(cond, ...)                                                                  \
    do {                                                                                       \
        if (!(cond)) {                                                                         \
            fprintf(stderr, "fuzz: %s:%d: %s does not hold: ", __FILE__, __LINE__, #cond);     \
            fprintf(stderr, __VA_ARGS__);                                                      \
            fprintf(stderr, "\n");                                                             \
            abort();                                                                           \
        }                                                                                      \
    } while (0)

/* A file backed by memory, rewritten for each input. */
typedef struct fz_file {
    int fd;
    char path[64]; /* /proc/self/fd/N */
} fz_file;

static inline void fz_file_open(fz_file *f, const char *name) {
    f->fd = memfd_create(name, 0);
    fz_require(f->fd >= 0, "memfd_create: %s", strerror(errno));
    snprintf(f->path, sizeof f->path, "/proc/self/fd/%d", f->fd);
}

static inline void fz_file_set(fz_file *f, const void *data, size_t len) {
    fz_require(ftruncate(f->fd, 0) == 0, "ftruncate: %s", strerror(errno));
    const unsigned char *p = data;
    for (size_t done = 0; done < len;) {
        ssize_t w = pwrite(f->fd, p + done, len - done, (off_t)done);
        fz_require(w > 0, "pwrite: %s", strerror(errno));
        done += (size_t)w;
    }
}

static vka_context *fz_ctx;
static char fz_dir[64]; /* private folder for files a target saves */

static inline void fz_remove_dir(void) { rmdir(fz_dir); } /* the files are removed after use */

/* The context and the folder; for LLVMFuzzerInitialize. */
static inline void fz_init(void) {
    vka_context_desc d = {.backend = VKA_BACKEND_CPU,
                          .cpu_threads = 1,
                          .validation = -1,
                          .max_memory_bytes = FZ_MAX_MEMORY_BYTES,
                          .label = "fuzz"};
    vka_result r = vka_context_create(&d, &fz_ctx);
    fz_require(r == VKA_SUCCESS, "vka_context_create: %s", vka_last_error(fz_ctx));
    snprintf(fz_dir, sizeof fz_dir, "%s/vkattn-fuzz-XXXXXX",
             access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
    fz_require(mkdtemp(fz_dir) != NULL, "mkdtemp %s: %s", fz_dir, strerror(errno));
    atexit(fz_remove_dir);
}

/* A path in the private folder (the same one for the same name). */
static inline const char *fz_out_path(const char *name) {
    static char path[128];
    snprintf(path, sizeof path, "%s/%s", fz_dir, name);
    return path;
}

/* Every failure leaves a message; a FORMAT or VOCABULARY error names the file it is about. */
static inline void fz_check_failure(vka_result r, const char *path) {
    const char *msg = vka_last_error(fz_ctx);
    fz_require(msg && msg[0], "%s failed (%s) without a message", path, vka_result_string(r));
    if (r == VKA_ERROR_FORMAT || r == VKA_ERROR_VOCABULARY)
        fz_require(strstr(msg, path) != NULL, "the message does not name %s: %s", path, msg);
}

static inline uint32_t fz_le32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline void fz_put_le32(uint8_t *p, uint32_t v) {
    for (int k = 0; k < 4; k++) p[k] = (uint8_t)(v >> (8 * k));
}

/* A vkattn model or state file (header of 256 words, then n_params parameters first): when its
 * header has vkattn's trailer (mark "VKAX" in word 252; src/model/checkpoint.c), make the
 * trailer's parameter hash (words 250..251: FNV-1a 64 per 32-bit word) and header checksum
 * (word 255: FNV-1a 32 over the bytes of words 0..254) agree with the mutated input, so that
 * mutations reach the checks behind them. */
static inline void fz_fix_trailer(uint8_t *f, uint64_t n_params) {
    if (fz_le32(f + 4 * 252) != 0x58414B56u) return;
    uint64_t h = 0xCBF29CE484222325ull;
    for (uint64_t i = 0; i < n_params; i++) h = (h ^ fz_le32(f + 1024 + 4 * i)) * 0x100000001B3ull;
    fz_put_le32(f + 4 * 250, (uint32_t)h);
    fz_put_le32(f + 4 * 251, (uint32_t)(h >> 32));
    uint32_t s = 0x811C9DC5u;
    for (size_t i = 0; i < 4 * 255; i++) s = (s ^ f[i]) * 0x01000193u;
    fz_put_le32(f + 4 * 255, s);
}

/* Parameters of an llm.c GPT-2 checkpoint with header words [2..7] (vka_gpt_load's layout),
 * or 0 when a size is not positive (wider sizes are the loader's to refuse). */
static inline uint64_t fz_gpt_num_params(const uint8_t *header) {
    int64_t maxT = (int32_t)fz_le32(header + 8), L = (int32_t)fz_le32(header + 16);
    int64_t C = (int32_t)fz_le32(header + 24), Vp = (int32_t)fz_le32(header + 28);
    if (maxT <= 0 || L <= 0 || C <= 0 || Vp <= 0 || C > (1 << 20) || L > (1 << 12)) return 0;
    /* wte, wpe, lnf; per layer ln1, qkv, attproj, ln2, fc, fcproj: 12 C^2 + 13 C */
    return (uint64_t)((Vp + maxT + 2) * C + L * (12 * C * C + 13 * C));
}

#endif

/* A byte-level BPE vocabulary learned from 32 KiB of the built-in corpus (deterministic), and
 * the character vocabulary of the same text; for LLVMFuzzerInitialize. */
/* Two models hold the same parameters, bit for bit (a save and load must not change any). */
static inline void fz_require_same_params(vka_gpt *a, vka_gpt *b) {
    size_t n = vka_gpt_num_params(a);
    fz_require(n == vka_gpt_num_params(b), "parameter counts differ");
    float *pa = malloc(n * sizeof *pa), *pb = malloc(n * sizeof *pb);
    fz_require(pa && pb, "out of memory");
    fz_require(vka_gpt_get_params(a, pa, n) == VKA_SUCCESS, "get_params");
    fz_require(vka_gpt_get_params(b, pb, n) == VKA_SUCCESS, "get_params");
    fz_require(memcmp(pa, pb, n * sizeof *pa) == 0, "parameters changed by save and load");
    free(pa);
    free(pb);
}

/* A few tokens (at most FZ_TOKENS, within the model's context) to run a loaded model on:
 * ids[t] = t mod V, targets the next one. Returns T. */
#define FZ_TOKENS 4
static inline int fz_tokens(vka_gpt *gpt, int32_t ids[FZ_TOKENS], int32_t targets[FZ_TOKENS]) {
    vka_gpt_config c = vka_gpt_get_config(gpt);
    int T = c.max_T < FZ_TOKENS ? c.max_T : FZ_TOKENS;
    for (int t = 0; t < T; t++) {
        ids[t] = t % c.V;
        targets[t] = (t + 1) % c.V;
    }
    return T;
}

/* The input again with its payload cut or zero-padded to header + payload_bytes (when that is
 * at most max_bytes and differs from the input), for fix(...) to make the header's checks pass;
 * load(...) is called on it. */
static inline void fz_load_fixed(const uint8_t *data, size_t size, uint64_t header_bytes,
                                 uint64_t payload_bytes, uint64_t max_bytes,
                                 void (*fix)(uint8_t *file), void (*load)(const uint8_t *, size_t)) {
    uint64_t want = header_bytes + payload_bytes;
    if (size < header_bytes || payload_bytes == 0 || want > max_bytes) return;
    uint8_t *fixed = calloc(1, (size_t)want);
    fz_require(fixed != NULL, "out of memory");
    memcpy(fixed, data, size < want ? size : (size_t)want);
    fix(fixed);
    if (want != size || memcmp(fixed, data, (size_t)want) != 0) load(fixed, (size_t)want);
    free(fixed);
}

static inline void fz_tokenizers(vka_tokenizer **bpe, int vocab_size, vka_tokenizer **chars) {
    size_t len = 0;
    char *text = vka_builtin_corpus(32 << 10, &len);
    fz_require(text != NULL, "vka_builtin_corpus");
    if (bpe) {
        vka_result r = vka_tokenizer_learn(fz_ctx, text, len, vocab_size, bpe);
        fz_require(r == VKA_SUCCESS, "learn: %s", vka_last_error(fz_ctx));
    }
    if (chars) {
        vka_result r = vka_tokenizer_create_from_text(fz_ctx, text, len, chars);
        fz_require(r == VKA_SUCCESS, "create_from_text: %s", vka_last_error(fz_ctx));
    }
    free(text);
}
