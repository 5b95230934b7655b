/* The public tensor and graph objects (api_tensor.c) as the public ops see them (api_ops.c). */
#ifndef VKA_API_H
#define VKA_API_H

#include "backend.h"

/* A public tensor: a one-tensor device arena on ctx->be. */
struct vka_tensor {
    vka_context *ctx;
    vkb_arena *arena;
    vkb_tensor t;
};

/* A public graph: the backend's graph plus the first failure recorded into it, so that
 * vka_graph_end can report the first op error even after later ops failed too. */
struct vka_graph {
    vka_context *ctx;
    vkb_graph *g;
    vka_result status;
    char first_error[VKA_ERROR_MAX];
};

/* Called after each op recorded into ctx->recording (or rejected): remembers the graph's first
 * failure and its message. */
void vka_graph_note_status(vka_context *ctx);

#endif
