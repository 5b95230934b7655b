/* vka_context_desc.host_allocator: every block vkattn allocates comes from the application's
 * allocator and goes back to it (CPU and Vulkan contexts), a partial allocator is refused, and
 * an allocator that runs out at any point makes the call fail with
 * VKA_ERROR_OUT_OF_HOST_MEMORY, cleanly (no crash, nothing leaked). */
#define _GNU_SOURCE /* mallinfo2 */
#include "test_util.h"

#include <malloc.h>
#include <unistd.h>

/* A counting allocator: each block carries a header with its size and a magic word, and the
 * pointer handed out is past the header. So a block of ours given to libc's free (or one of
 * libc's given to us) does not go unnoticed: libc aborts on an interior pointer, and we check
 * the magic. live is the bytes handed out and not yet freed. */
#define HDR 16
#define MAGIC 0x766B61616C6C6F63ull /* "vkaalloc" */

typedef struct counter {
    size_t allocs, reallocs, frees, live, live_blocks, peak;
    long fail_after; /* allocations (alloc and realloc) that succeed before all fail; -1 = none */
    size_t calls;    /* alloc and realloc calls so far */
    size_t bad;      /* frees/reallocs of a block that is not ours */
} counter;

static bool out_of_memory(counter *c) {
    c->calls++;
    return c->fail_after >= 0 && c->calls > (size_t)c->fail_after;
}

static void *ca_alloc(void *user, size_t size) {
    counter *c = user;
    if (out_of_memory(c)) return NULL;
    unsigned char *b = malloc(HDR + size);
    if (!b) return NULL;
    uint64_t h[2] = {size, MAGIC};
    memcpy(b, h, HDR);
    c->allocs++;
    c->live += size;
    c->live_blocks++;
    if (c->live > c->peak) c->peak = c->live;
    return b + HDR;
}

static bool ours(counter *c, void *p, uint64_t *size) {
    uint64_t h[2];
    memcpy(h, (unsigned char *)p - HDR, HDR);
    if (h[1] != MAGIC) {
        c->bad++;
        return false;
    }
    *size = h[0];
    return true;
}

static void ca_free(void *user, void *p) {
    counter *c = user;
    uint64_t size;
    if (!p || !ours(c, p, &size)) return;
    c->frees++;
    c->live -= size;
    c->live_blocks--;
    uint64_t dead[2] = {0, 0};
    memcpy((unsigned char *)p - HDR, dead, HDR); /* a second free is caught as not ours */
    free((unsigned char *)p - HDR);
}

static void *ca_realloc(void *user, void *p, size_t size) {
    counter *c = user;
    uint64_t old;
    if (!p || !ours(c, p, &old)) return NULL;
    if (out_of_memory(c)) return NULL;
    unsigned char *b = realloc((unsigned char *)p - HDR, HDR + size);
    if (!b) return NULL;
    uint64_t h[2] = {size, MAGIC};
    memcpy(b, h, HDR);
    c->reallocs++;
    c->live = c->live - old + size;
    if (c->live > c->peak) c->peak = c->live;
    return b + HDR;
}

static vka_host_allocator counting(counter *c) {
    *c = (counter){.fail_after = -1};
    return (vka_host_allocator){ca_alloc, ca_realloc, ca_free, c};
}

static vka_context *make_context(vka_backend backend, const vka_host_allocator *h) {
    vka_context_desc d = {.backend = backend, .host_allocator = h, /* silent: errors are tested */
                          .validation = backend == VKA_BACKEND_VULKAN ? 1 : 0};
    const char *v = getenv("VKATTN_VALIDATION");
    if (backend == VKA_BACKEND_VULKAN && v && strcmp(v, "0") == 0) d.validation = -1;
    vka_context *ctx = NULL;
    vka_result r = vka_context_create(&d, &ctx);
    if (r == VKA_SUCCESS) return ctx;
    char msg[1200];
    snprintf(msg, sizeof msg, "%s", vka_last_error(ctx));
    vka_context_destroy(ctx);
    const char *req = getenv("VKATTN_REQUIRE_GPU");
    if (backend == VKA_BACKEND_VULKAN && !(req && strcmp(req, "1") == 0)) {
        print_message("skipping: no Vulkan context (%s)\n", msg);
        skip();
    }
    fail_msg("context: %s", msg);
    return NULL;
}

static const vka_gpt_config TINY = {.max_T = 32, .V = 67, .L = 2, .NH = 2, .C = 32};

static const char TEXT[] =
    "the cat sat on the mat. the dog sat on the log. a cat and a dog sat on a mat and a log.\n"
    "then the cat ran to the dog, and the dog ran to the cat; they sat together on the mat.\n";

/* Everything a user does, on ctx: a model, a session, generating, training, a learned BPE
 * tokenizer encoding and decoding, saving and loading the model. Destroys all it makes. */
static void exercise(vka_context *ctx) {
    vka_gpt *gpt = NULL;
    assert_int_equal(vka_gpt_create(ctx, &TINY, 7, &gpt), VKA_SUCCESS);

    vka_gpt_session *sess = NULL;
    assert_int_equal(vka_gpt_session_create(gpt, NULL, &sess), VKA_SUCCESS);
    int32_t prompt[5] = {1, 5, 9, 2, 60};
    assert_int_equal(vka_gpt_session_append(sess, prompt, 5), VKA_SUCCESS);
    float logits[67];
    assert_int_equal(vka_gpt_session_logits(sess, logits, 67), VKA_SUCCESS);
    vka_gpt_session_destroy(sess);

    int32_t out[6];
    vka_sample_desc greedy = {0};
    assert_int_equal(vka_gpt_generate(gpt, prompt, 5, 6, &greedy, out, NULL, NULL), VKA_SUCCESS);
    for (int i = 0; i < 6; i++) assert_true(out[i] >= 0 && out[i] < 67);

    enum { B = 2, T = 16 };
    int32_t in[B * T], tg[B * T];
    for (int i = 0; i < B * T; i++) {
        in[i] = (i * 7 + 3) % 67;
        tg[i] = (i * 7 + 10) % 67;
    }
    vka_adamw_desc opt = {.lr = 1e-3f, .grad_clip = 1.0f};
    for (int s = 0; s < 3; s++) {
        float loss = 0;
        assert_int_equal(vka_gpt_train_step(gpt, in, tg, B, T, &opt, &loss, NULL), VKA_SUCCESS);
        assert_true(isfinite(loss));
    }

    vka_tokenizer *tok = NULL;
    assert_int_equal(vka_tokenizer_learn(ctx, TEXT, sizeof TEXT - 1, 300, &tok), VKA_SUCCESS);
    int32_t ids[sizeof TEXT];
    size_t n = 0;
    assert_int_equal(vka_tokenizer_encode(tok, TEXT, sizeof TEXT - 1, ids, &n), VKA_SUCCESS);
    assert_true(n > 0 && n < sizeof TEXT - 1); /* merges were learned */
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        size_t len = 0;
        const char *b = vka_tokenizer_decode(tok, ids[i], &len);
        assert_non_null(b);
        assert_memory_equal(b, TEXT + at, len);
        at += len;
    }
    assert_int_equal(at, sizeof TEXT - 1);
    char tok_path[64];
    snprintf(tok_path, sizeof tok_path, "/tmp/vka_host_alloc_%d.tok", (int)getpid());
    assert_int_equal(vka_tokenizer_save(tok, tok_path), VKA_SUCCESS);
    vka_tokenizer *tok2 = NULL;
    assert_int_equal(vka_tokenizer_load(ctx, tok_path, &tok2), VKA_SUCCESS);
    remove(tok_path);
    assert_int_equal(vka_tokenizer_id(tok2), vka_tokenizer_id(tok));
    vka_tokenizer_destroy(tok2);
    vka_tokenizer_destroy(tok);

    /* The built-in corpus, character tokenizer: the data's text and token blocks. */
    vka_data *data = NULL;
    assert_int_equal(vka_data_load(ctx, NULL, NULL, &data), VKA_SUCCESS);
    vka_data_destroy(data);

    char path[64];
    snprintf(path, sizeof path, "/tmp/vka_host_alloc_%d.bin", (int)getpid());
    assert_int_equal(vka_gpt_save(gpt, path), VKA_SUCCESS);
    vka_gpt *loaded = NULL;
    assert_int_equal(vka_gpt_load(ctx, path, &loaded), VKA_SUCCESS);
    remove(path);
    vka_gpt_destroy(loaded);
    vka_gpt_destroy(gpt);
}

static void every_block_through_the_hook(vka_backend backend) {
    counter c;
    vka_host_allocator h = counting(&c);
    vka_context *ctx = make_context(backend, &h);
    size_t after_create = c.allocs;
    exercise(ctx);
    assert_true(c.allocs > after_create);
    uint32_t n_valid = vka_context_validation_messages(ctx);
    vka_context_destroy(ctx);
    print_message("%s: %zu allocs, %zu reallocs, %zu frees, peak %.1f KiB\n",
                  backend == VKA_BACKEND_CPU ? "cpu" : "vulkan", c.allocs, c.reallocs, c.frees,
                  c.peak / 1024.0);
    assert_int_equal(n_valid, 0);
    assert_int_equal(c.bad, 0);
    assert_true(c.allocs > 0);
    assert_int_equal(c.frees, c.allocs);
    assert_int_equal(c.live_blocks, 0);
    assert_int_equal(c.live, 0);
}

static void test_host_allocator_cpu_every_block_returned(void **state) {
    (void)state;
    every_block_through_the_hook(VKA_BACKEND_CPU);
}

static void test_host_allocator_vulkan_every_block_returned(void **state) {
    (void)state;
    every_block_through_the_hook(VKA_BACKEND_VULKAN);
}

/* libc's heap barely grows while the hook holds the model (on the CPU backend the parameters,
 * gradients, AdamW state and activations are host blocks): the big blocks are not libc's. What
 * libc does hold comes from the runtimes vkattn cannot hook (OpenMP's threads, stdio). */
static void test_host_allocator_libc_heap_does_not_hold_the_model(void **state) {
    (void)state;
    counter c;
    vka_host_allocator h = counting(&c);
    vka_context *ctx = make_context(VKA_BACKEND_CPU, &h);
    vka_gpt *gpt = NULL;
    vka_gpt_config big = {.max_T = 64, .V = 500, .L = 4, .NH = 4, .C = 128};
    struct mallinfo2 before = mallinfo2();
    size_t hook_before = c.live;
    assert_int_equal(vka_gpt_create(ctx, &big, 1, &gpt), VKA_SUCCESS);
    int32_t in[64] = {0}, tg[64] = {1};
    vka_adamw_desc opt = {.lr = 1e-3f};
    float loss;
    assert_int_equal(vka_gpt_train_step(gpt, in, tg, 1, 64, &opt, &loss, NULL), VKA_SUCCESS);
    struct mallinfo2 after = mallinfo2();
    size_t hook = c.live - hook_before;
    /* The counting allocator itself takes its blocks from libc: subtract them. */
    long long libc = (long long)(after.uordblks + after.hblkhd) -
                     (long long)(before.uordblks + before.hblkhd) - (long long)hook -
                     (long long)(c.live_blocks * (HDR + 16));
    print_message("the hook holds %.1f MiB; libc's heap grew by %.1f KiB besides\n",
                  hook / 1048576.0, libc / 1024.0);
    assert_true(hook > 4u << 20);
    assert_true(libc < (long long)(hook / 16));
    vka_gpt_destroy(gpt);
    vka_context_destroy(ctx);
    assert_int_equal(c.live, 0);
}

static void test_host_allocator_partial_is_refused(void **state) {
    (void)state;
    counter c;
    const vka_host_allocator full = counting(&c);
    const struct {
        vka_host_allocator h;
        const char *missing;
    } cases[] = {
        {{NULL, full.realloc, full.free, &c}, "alloc"},
        {{full.alloc, NULL, full.free, &c}, "realloc"},
        {{full.alloc, full.realloc, NULL, &c}, "free"},
        {{full.alloc, NULL, NULL, &c}, "realloc"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        vka_context_desc d = {.backend = VKA_BACKEND_CPU, .host_allocator = &cases[i].h};
        vka_context *ctx = NULL;
        assert_int_equal(vka_context_create(&d, &ctx), VKA_ERROR_INVALID_ARGUMENT);
        assert_non_null(ctx);
        const char *msg = vka_last_error(ctx);
        char want[64];
        snprintf(want, sizeof want, "has no %s", cases[i].missing);
        if (!strstr(msg, "host_allocator") || !strstr(msg, want))
            fail_msg("message \"%s\" does not name host_allocator's %s", msg, cases[i].missing);
        vka_gpt *gpt = NULL;
        assert_int_equal(vka_gpt_create(ctx, &TINY, 1, &gpt), VKA_ERROR_INVALID_ARGUMENT);
        vka_context_destroy(ctx);
    }
    assert_int_equal(c.allocs + c.reallocs + c.frees, 0); /* a refused allocator is never called */
    /* All three NULL is the same as no allocator. */
    vka_host_allocator none = {.user_data = &c};
    vka_context_desc d = {.backend = VKA_BACKEND_CPU, .host_allocator = &none};
    vka_context *ctx = NULL;
    assert_int_equal(vka_context_create(&d, &ctx), VKA_SUCCESS);
    vka_context_destroy(ctx);
}

/* Fault injection: the allocator fails every allocation after the first n the call makes, for
 * n = 0, 1, ... until the call succeeds. Each failure must be VKA_ERROR_OUT_OF_HOST_MEMORY (on
 * the CPU backend, whose tensors are host blocks standing for device memory, an arena may say
 * VKA_ERROR_OUT_OF_DEVICE_MEMORY) with a message. A failed call may leave blocks in the
 * context's caches (pipelines, descriptor sets: freed with the context), so leaks show as live
 * bytes once the context is destroyed (the caller checks). Returns the n that succeeded. */
typedef vka_result (*make_fn)(vka_context *ctx, void *user, void **made);
typedef void (*unmake_fn)(void *made);

static int sweep(vka_context *ctx, counter *c, const char *what, make_fn make, unmake_fn unmake,
                 void *user, int max_n) {
    bool cpu = vka_context_backend(ctx) == VKA_BACKEND_CPU;
    int device_oom = 0;
    for (int n = 0; n <= max_n; n++) {
        c->calls = 0;
        c->fail_after = n;
        void *made = NULL;
        vka_result r = make(ctx, user, &made);
        c->fail_after = -1;
        if (r == VKA_SUCCESS) {
            unmake(made);
            print_message("%s: fails cleanly with 0..%d allocations allowed (%d of them as out "
                          "of device memory), works with %d\n", what, n - 1, device_oom, n);
            return n;
        }
        if (cpu && r == VKA_ERROR_OUT_OF_DEVICE_MEMORY && strstr(vka_last_error(ctx), "arena"))
            device_oom++;
        else if (r != VKA_ERROR_OUT_OF_HOST_MEMORY)
            fail_msg("%s with %d allocations: %s (%s), not VKA_ERROR_OUT_OF_HOST_MEMORY", what,
                     n, vka_result_string(r), vka_last_error(ctx));
        if (!*vka_last_error(ctx)) fail_msg("%s with %d allocations: no message", what, n);
        assert_null(made);
    }
    fail_msg("%s: still failing with %d allocations", what, max_n);
    return -1;
}

static vka_result make_gpt(vka_context *ctx, void *user, void **made) {
    (void)user;
    return vka_gpt_create(ctx, &TINY, 3, (vka_gpt **)made);
}
static void unmake_gpt(void *made) { vka_gpt_destroy(made); }

static vka_result make_session(vka_context *ctx, void *user, void **made) {
    (void)ctx;
    vka_gpt_session *s = NULL;
    vka_result r = vka_gpt_session_create(user, NULL, &s);
    int32_t p[3] = {4, 5, 6};
    if (r == VKA_SUCCESS) r = vka_gpt_session_append(s, p, 3);
    if (r != VKA_SUCCESS) {
        vka_gpt_session_destroy(s);
        return r;
    }
    *made = s;
    return r;
}
static void unmake_session(void *made) { vka_gpt_session_destroy(made); }

static vka_result make_train_step(vka_context *ctx, void *user, void **made) {
    (void)ctx;
    int32_t in[16] = {1, 2, 3}, tg[16] = {2, 3, 4};
    vka_adamw_desc opt = {.lr = 1e-3f};
    float loss;
    vka_result r = vka_gpt_train_step(user, in, tg, 2, 8, &opt, &loss, NULL);
    *made = NULL;
    return r;
}
static void unmake_nothing(void *made) { (void)made; }

static vka_result make_tokenizer(vka_context *ctx, void *user, void **made) {
    (void)user;
    return vka_tokenizer_learn(ctx, TEXT, sizeof TEXT - 1, 280, (vka_tokenizer **)made);
}
static void unmake_tokenizer(void *made) { vka_tokenizer_destroy(made); }

static vka_result make_loaded_gpt(vka_context *ctx, void *user, void **made) {
    return vka_gpt_load(ctx, user, (vka_gpt **)made);
}

static vka_result make_loaded_tokenizer(vka_context *ctx, void *user, void **made) {
    return vka_tokenizer_load(ctx, user, (vka_tokenizer **)made);
}

static vka_result make_data(vka_context *ctx, void *user, void **made) {
    (void)user;
    return vka_data_load(ctx, NULL, NULL, (vka_data **)made);
}
static void unmake_data(void *made) { vka_data_destroy(made); }

static void fault_sweep(vka_backend backend) {
    counter c;
    vka_host_allocator h = counting(&c);
    vka_context *ctx = make_context(backend, &h);
    int n_gpt = sweep(ctx, &c, "vka_gpt_create", make_gpt, unmake_gpt, NULL, 2000);
    assert_true(n_gpt > 0);
    vka_gpt *gpt = NULL;
    assert_int_equal(vka_gpt_create(ctx, &TINY, 3, &gpt), VKA_SUCCESS);
    sweep(ctx, &c, "vka_gpt_session_create + append", make_session, unmake_session, gpt, 2000);
    sweep(ctx, &c, "vka_gpt_train_step (first)", make_train_step, unmake_nothing, gpt, 2000);
    sweep(ctx, &c, "vka_tokenizer_learn", make_tokenizer, unmake_tokenizer, NULL, 2000);
    char path[64];
    snprintf(path, sizeof path, "/tmp/vka_host_alloc_sweep_%d.bin", (int)getpid());
    assert_int_equal(vka_gpt_save(gpt, path), VKA_SUCCESS);
    sweep(ctx, &c, "vka_gpt_load", make_loaded_gpt, unmake_gpt, path, 2000);
    vka_tokenizer *tok = NULL;
    assert_int_equal(vka_tokenizer_learn(ctx, TEXT, sizeof TEXT - 1, 280, &tok), VKA_SUCCESS);
    assert_int_equal(vka_tokenizer_save(tok, path), VKA_SUCCESS);
    vka_tokenizer_destroy(tok);
    sweep(ctx, &c, "vka_tokenizer_load", make_loaded_tokenizer, unmake_tokenizer, path, 2000);
    remove(path);
    sweep(ctx, &c, "vka_data_load (built-in corpus)", make_data, unmake_data, NULL, 2000);
    vka_gpt_destroy(gpt);
    uint32_t n_valid = vka_context_validation_messages(ctx);
    vka_context_destroy(ctx);
    assert_int_equal(n_valid, 0);
    assert_int_equal(c.bad, 0);
    assert_int_equal(c.live, 0);
}

static void test_host_allocator_cpu_out_of_memory_sweep(void **state) {
    (void)state;
    fault_sweep(VKA_BACKEND_CPU);
}

static void test_host_allocator_vulkan_out_of_memory_sweep(void **state) {
    (void)state;
    fault_sweep(VKA_BACKEND_VULKAN);
}

/* Creating the context itself: fails with VKA_ERROR_OUT_OF_HOST_MEMORY (and no context, or a
 * failed one that destroys cleanly) whichever allocation runs out. */
static void context_create_sweep(vka_backend backend) {
    vka_context_destroy(make_context(backend, NULL)); /* skips without a Vulkan device */
    counter c;
    vka_host_allocator h = counting(&c);
    for (int n = 0;; n++) {
        assert_true(n < 1000);
        c.calls = 0;
        c.fail_after = n;
        vka_context_desc d = {.backend = backend, .host_allocator = &h,
                              .validation = backend == VKA_BACKEND_VULKAN ? 1 : 0};
        vka_context *ctx = NULL;
        vka_result r = vka_context_create(&d, &ctx);
        c.fail_after = -1;
        if (r != VKA_SUCCESS && r != VKA_ERROR_OUT_OF_HOST_MEMORY)
            fail_msg("vka_context_create with %d allocations: %s (%s)", n, vka_result_string(r),
                     vka_last_error(ctx));
        vka_context_destroy(ctx);
        assert_int_equal(c.live, 0);
        if (r == VKA_SUCCESS) {
            print_message("vka_context_create (%s): fails cleanly with 0..%d allocations "
                          "allowed, works with %d\n",
                          backend == VKA_BACKEND_CPU ? "cpu" : "vulkan", n - 1, n);
            break;
        }
        if (n == 0) assert_null(ctx);
    }
}

static void test_host_allocator_cpu_context_create_out_of_memory(void **state) {
    (void)state;
    context_create_sweep(VKA_BACKEND_CPU);
}

static void test_host_allocator_vulkan_context_create_out_of_memory(void **state) {
    (void)state;
    context_create_sweep(VKA_BACKEND_VULKAN);
}

/* An argument runs only the tests it matches (cmocka's pattern, e.g. "*cpu*" under valgrind). */
int main(int argc, char **argv) {
    if (argc > 1) cmocka_set_test_filter(argv[1]);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_host_allocator_partial_is_refused),
        cmocka_unit_test(test_host_allocator_cpu_every_block_returned),
        cmocka_unit_test(test_host_allocator_vulkan_every_block_returned),
        cmocka_unit_test(test_host_allocator_libc_heap_does_not_hold_the_model),
        cmocka_unit_test(test_host_allocator_cpu_context_create_out_of_memory),
        cmocka_unit_test(test_host_allocator_vulkan_context_create_out_of_memory),
        cmocka_unit_test(test_host_allocator_cpu_out_of_memory_sweep),
        cmocka_unit_test(test_host_allocator_vulkan_out_of_memory_sweep),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
