/* The tokenizer as the data loader builds it (not installed). */
#ifndef VKM_TOKENIZER_H
#define VKM_TOKENIZER_H

#include "vka_internal.h"

/* vka_tokenizer_create_from_text, for a tokenizer that is part of another object (a vka_data
 * built from its own text): counted = false leaves it out of the context's count of the
 * objects the application holds (vka_context_destroy names those). */
/* llm.c's tokenizer file magic (README "Files"). */
#define VKM_TOKENIZER_MAGIC 20240328

vka_result vkm_tokenizer_create_from_text(vka_context *ctx, const char *text, size_t len,
                                          bool counted, vka_tokenizer **out);

#endif
