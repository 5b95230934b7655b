/* A program outside vkattn's tree, built against the installed package (tests/package/run.sh):
 * a CPU context, a tiny GPT-2 on the built-in corpus, a few training steps, a few tokens. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <vkattn.h>

#define CHECK(call)                                                                          \
    do {                                                                                     \
        if ((call) != VKA_SUCCESS) {                                                         \
            fprintf(stderr, "%s: %s\n", #call, vka_last_error(ctx));                         \
            return 1;                                                                        \
        }                                                                                    \
    } while (0)

int main(void) {
    if (strcmp(vka_version_string(), VKA_VERSION_STRING) != 0) {
        fprintf(stderr, "library %s, header %s\n", vka_version_string(), VKA_VERSION_STRING);
        return 1;
    }
    vka_context *ctx = NULL;
    vka_context_desc desc = {.backend = VKA_BACKEND_CPU};
    CHECK(vka_context_create(&desc, &ctx));
    vka_data *data = NULL;
    CHECK(vka_data_load(ctx, NULL, NULL, &data));
    const vka_tokenizer *tok = vka_data_tokenizer(data);
    int V = vka_tokenizer_vocab_size(tok);

    vka_gpt_config cfg = {.max_T = 16, .V = V, .L = 1, .NH = 2, .C = 32};
    vka_gpt *gpt = NULL;
    CHECK(vka_gpt_create(ctx, &cfg, 1337, &gpt));
    enum { B = 4, T = 16, STEPS = 5 };
    int32_t inputs[B * T], targets[B * T];
    uint64_t rng = 1;
    vka_adamw_desc opt = {.lr = 1e-2f};
    float first = 0, loss = 0;
    for (int step = 1; step <= STEPS; step++) {
        CHECK(vka_data_batch(data, VKA_SPLIT_TRAIN, B, T, &rng, inputs, targets));
        CHECK(vka_gpt_train_step(gpt, inputs, targets, B, T, &opt, &loss, NULL));
        printf("step %d: loss %.4f\n", step, loss);
        if (step == 1) first = loss;
        if (!isfinite(loss)) return 1;
    }
    if (!(loss < first)) {
        fprintf(stderr, "loss did not go down in %d steps: %.4f -> %.4f\n", STEPS, first, loss);
        return 1;
    }
    int32_t prompt[1] = {0}, out[8];
    vka_sample_desc sample = {.temperature = 1.0f, .seed = 42};
    CHECK(vka_gpt_generate(gpt, prompt, 1, 8, &sample, out, NULL, NULL));
    for (int i = 0; i < 8; i++) {
        if (out[i] < 0 || out[i] >= V) {
            fprintf(stderr, "generated id %d outside [0, %d)\n", (int)out[i], V);
            return 1;
        }
    }
    printf("vkattn %s: loss %.4f -> %.4f, generated 8 tokens\n", vka_version_string(), first, loss);
    vka_gpt_destroy(gpt);
    vka_data_destroy(data);
    vka_context_destroy(ctx);
    return 0;
}
