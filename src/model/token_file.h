/* llm.c token files (not installed): int32 header[256] = {20240520, 1, n, 0...}, then n uint16
 * ids (llm.c dev/data/data_common.py write_datafile). The count is read as unsigned 32-bit, so
 * one file holds at most 2^32 - 1 tokens (llm.c's own reader takes it as int32: 2^31 - 1). */
#ifndef VKM_TOKEN_FILE_H
#define VKM_TOKEN_FILE_H

#include "vka_internal.h"

#include <stdint.h>

#define VKM_TOKENS_HEADER_BYTES 1024
#define VKM_TOKENS_MAX_COUNT 0xFFFFFFFFull

/* Whether the first bytes (len of them) start with the token file magic. */
bool vkm_is_token_file(const unsigned char *bytes, size_t len);
/* Check the header of a token file of len bytes against its length; *n = its token count.
 * Errors: VKA_ERROR_FORMAT naming name (too short, version, count vs size). */
vka_result vkm_token_file_check(vka_context *ctx, const char *name, const unsigned char *bytes,
                                size_t len, size_t *n);
/* The first id >= V among n uint16 ids (SIZE_MAX if none). */
size_t vkm_first_id_at_least(const uint16_t *ids, size_t n, int V);
/* Where GPT-2's pre-tokenizer splits anyway at or after from: just after a '\n' followed by a
 * printable ASCII byte that is not a space (so no whitespace run and no pre-token spans it).
 * Returns len when there is none. Text encoded in pieces cut there encodes as the whole. */
size_t vkm_text_split_point(const unsigned char *text, size_t len, size_t from);

#endif
