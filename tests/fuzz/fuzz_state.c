/* libFuzzer target: vka_gpt_load_state (vkattn's training-state file). Each input is loaded as
 * it is and, when its length or its payload checksum (header words 32..33, the documented
 * FNV-1a over the payload's words) disagrees with its header, again with the payload cut or
 * zero-padded to the implied length and the checksum made right, so that mutations of the
 * header's state fields and of the payload reach the checks after those two. A state that
 * loads must survive save and load unchanged, and take a training step; vka_train_state_read
 * must read the same fields from it. */
#include "fuzz_util.h"

#define HEADER_BYTES 1024
#define FIXUP_MAX_BYTES ((uint64_t)4 << 20)

static fz_file in;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    fz_init();
    fz_file_open(&in, "state.bin");
    return 0;
}

static bool same_state(const vka_train_state *a, const vka_train_state *b) {
    /* Field by field: memcmp would compare padding, and NaN != NaN for best_val_loss. */
    return a->step == b->step && a->rng_state == b->rng_state && a->seed == b->seed &&
           a->total_steps == b->total_steps && a->B == b->B && a->T == b->T &&
           a->warmup_steps == b->warmup_steps && a->eval_every == b->eval_every &&
           a->eval_windows == b->eval_windows && a->text_bytes == b->text_bytes &&
           a->text_hash == b->text_hash && a->eval_pending == b->eval_pending &&
           memcmp(&a->lr, &b->lr, sizeof a->lr) == 0 &&
           memcmp(&a->min_lr, &b->min_lr, sizeof a->min_lr) == 0 &&
           memcmp(&a->adamw, &b->adamw, sizeof a->adamw) == 0 &&
           memcmp(&a->best_val_loss, &b->best_val_loss, sizeof a->best_val_loss) == 0;
}

static void check_loaded(vka_gpt *gpt, const vka_train_state *st) {
    const char *path = fz_out_path("state.bin");
    vka_result r = vka_gpt_save_state(gpt, st, path);
    fz_require(r == VKA_SUCCESS, "save: %s", vka_last_error(fz_ctx));
    vka_gpt *again = NULL;
    vka_train_state st2;
    r = vka_gpt_load_state(fz_ctx, path, &again, &st2);
    fz_require(r == VKA_SUCCESS, "reload: %s", vka_last_error(fz_ctx));
    /* eval_windows reads as -1 from version 1 and is then written as -1: it stays. */
    fz_require(same_state(st, &st2), "the state changed by save and load");
    fz_require(vka_gpt_step(gpt) == vka_gpt_step(again), "the model's step changed");
    fz_require_same_params(gpt, again);
    vka_gpt_destroy(again);
    remove(path);

    /* A state that loads can be resumed: one training step with the file's optimizer settings
     * (any values: success or a clean error, never a crash). */
    int32_t ids[FZ_TOKENS], tg[FZ_TOKENS];
    int T = fz_tokens(gpt, ids, tg);
    vka_adamw_desc opt = st->adamw;
    opt.lr = st->lr;
    opt.grad_accum = 1; /* ids and tg hold one micro-batch of T */
    float loss = 0, norm = 0;
    r = vka_gpt_train_step(gpt, ids, tg, 1, T, &opt, &loss, &norm);
    if (r != VKA_SUCCESS) fz_check_failure(r, path);
}

static void load(const uint8_t *data, size_t size) {
    fz_file_set(&in, data, size);
    vka_gpt *gpt = NULL;
    vka_train_state st;
    vka_result r = vka_gpt_load_state(fz_ctx, in.path, &gpt, &st);
    /* The header alone reads as the whole load does: the same fields where it loads, and an
     * error for every header it refuses (a payload it refuses is not read). */
    vka_train_state peek;
    vka_result rp = vka_train_state_read(NULL, in.path, &peek);
    if (r == VKA_SUCCESS) {
        fz_require(rp == VKA_SUCCESS && same_state(&st, &peek) &&
                       peek.run_recorded == st.run_recorded &&
                       strcmp(peek.run_kernels, st.run_kernels) == 0,
                   "vka_train_state_read disagrees with vka_gpt_load_state");
        fz_require(gpt != NULL, "success without a model");
        check_loaded(gpt, &st);
        vka_gpt_destroy(gpt);
    } else {
        fz_require(gpt == NULL, "a model handed out with an error");
        fz_check_failure(r, in.path);
    }
}

/* The payload's checksum (header words 32..33) made right, then the trailer. */
static void fix(uint8_t *file) {
    uint64_t n = fz_gpt_num_params(file);
    uint64_t h = 0xCBF29CE484222325ull;
    for (uint64_t i = 0; i < 3 * n; i++) h = (h ^ fz_le32(file + HEADER_BYTES + 4 * i)) * 0x100000001B3ull;
    fz_put_le32(file + 4 * 32, (uint32_t)h);
    fz_put_le32(file + 4 * 33, (uint32_t)(h >> 32));
    fz_fix_trailer(file, n);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    load(data, size);
    if (size >= HEADER_BYTES)
        fz_load_fixed(data, size, HEADER_BYTES, 3 * 4 * fz_gpt_num_params(data), FIXUP_MAX_BYTES,
                      fix, load);
    return 0;
}
