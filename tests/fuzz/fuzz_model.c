/* libFuzzer target: vka_gpt_load (llm.c's GPT-2 checkpoint). Each input is loaded as it is and,
 * when its length disagrees with what its header implies (the first check after the header's,
 * which random mutations rarely pass), again with the payload cut or zero-padded to that length
 * (for models up to FIXUP_MAX_BYTES), so that the shape checks, the model's creation and the
 * finiteness check are reached. A model that loads must have its header's shape, survive
 * save and load unchanged, and run a forward pass. */
#include "fuzz_util.h"

#define HEADER_BYTES 1024
#define FIXUP_MAX_BYTES ((uint64_t)4 << 20)

static fz_file in;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    fz_init();
    fz_file_open(&in, "model.bin");
    return 0;
}

static void check_loaded(vka_gpt *gpt, const uint8_t *header) {
    vka_gpt_config c = vka_gpt_get_config(gpt);
    const int32_t want[6] = {c.max_T, c.V, c.L, c.NH, c.C, c.Vp};
    for (int i = 0; i < 6; i++)
        fz_require((int32_t)fz_le32(header + 8 + 4 * i) == want[i], "header word %d", 2 + i);
    size_t n = vka_gpt_num_params(gpt);
    fz_require(n == fz_gpt_num_params(header), "num_params %zu", n);
    const char *path = fz_out_path("model.bin");
    vka_result r = vka_gpt_save(gpt, path);
    fz_require(r == VKA_SUCCESS, "save: %s", vka_last_error(fz_ctx));
    vka_gpt *again = NULL;
    r = vka_gpt_load(fz_ctx, path, &again);
    fz_require(r == VKA_SUCCESS, "reload: %s", vka_last_error(fz_ctx));
    fz_require_same_params(gpt, again);
    vka_gpt_destroy(again);
    remove(path);

    /* A model that loads can be run: one forward pass of a few tokens (its values may be
     * anything finite, so the loss may overflow: success or a clean error, never a crash). */
    int32_t ids[FZ_TOKENS], tg[FZ_TOKENS];
    int T = fz_tokens(gpt, ids, tg);
    float loss = 0;
    r = vka_gpt_forward(gpt, ids, tg, 1, T, &loss, NULL);
    if (r != VKA_SUCCESS) fz_check_failure(r, path);
}

static void load(const uint8_t *data, size_t size) {
    fz_file_set(&in, data, size);
    vka_gpt *gpt = NULL;
    vka_result r = vka_gpt_load(fz_ctx, in.path, &gpt);
    if (r == VKA_SUCCESS) {
        fz_require(gpt != NULL, "success without a model");
        check_loaded(gpt, data);
        vka_gpt_destroy(gpt);
    } else {
        fz_require(gpt == NULL, "a model handed out with an error");
        fz_check_failure(r, in.path);
    }
}

static void fix(uint8_t *file) { fz_fix_trailer(file, fz_gpt_num_params(file)); }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    load(data, size);
    if (size >= HEADER_BYTES)
        fz_load_fixed(data, size, HEADER_BYTES, 4 * fz_gpt_num_params(data), FIXUP_MAX_BYTES, fix,
                      load);
    return 0;
}
