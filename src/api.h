/* The public tensor and graph objects (api_tensor.c) as the public ops see them (api_ops.c). */
#ifndef VKA_API_H
#define VKA_API_H

#include "backend.h"

/* A public tensor: a one-tensor device arena on ctx->be. */
struct vka_tensor {
    vka_context *ctx;
    vkb_arena *arena;
    vkb_tensor t; /* its dtype and element count (vkb_elems): backend.h */
    uint32_t graph_uses; /* live graphs whose uses list holds this tensor */
    uint64_t last_graph; /* serial of the last graph that listed it (0 = none) */
};

/* A public graph: the backend's graph plus the first failure recorded into it, so that
 * vka_graph_end can report the first op error even after later ops failed too.
 * It lists the public tensors its ops use (once each), so that destroying one of them marks
 * the graph unable to run instead of leaving it to read freed memory (or a destroyed VkBuffer):
 * the bookkeeping happens when ops are recorded and tensors destroyed, never per run. */
struct vka_graph {
    vka_context *ctx;
    vkb_graph *g;
    vka_result status;
    char first_error[VKA_ERROR_MAX];
    uint64_t serial;         /* from ctx->graph_serial, > 0 */
    vka_tensor **uses;       /* (n_uses) tensors the ops use, each once */
    size_t n_uses, cap_uses;
    bool lost_tensor;        /* one of them was destroyed: the graph cannot run */
    bool ended;              /* the backend graph was ended early (lost_tensor while recording) */
    bool owned;              /* a model's or session's graph (vka_graph_handle_create): not in
                              * ctx->graphs, not a child; vka_graph_destroy ignores it */
    vka_graph *prev, *next;  /* ctx->graphs */
};

/* Called after each op recorded into ctx->recording (or rejected): remembers the graph's first
 * failure and its message. */
void vka_graph_note_status(vka_context *ctx);
/* A public handle on a graph a model or session owns (its *_prepare calls hand it out with
 * ->g set to the backend graph to run); NULL when out of memory. */
vka_graph *vka_graph_handle_create(vka_context *ctx);
void vka_graph_handle_destroy(vka_graph *handle);
/* Add t to graph's uses (if not there yet). false when out of host memory. */
bool vka_graph_note_use(vka_graph *graph, vka_tensor *t);

#endif
