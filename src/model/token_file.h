/* llm.c token files (not installed): int32 header[256] = {20240520, 1, n, 0...}, then n uint16
 * ids (llm.c dev/data/data_common.py write_datafile). The count is read as unsigned 32-bit, so
 * one file holds at most 2^32 - 1 tokens (llm.c's own reader takes it as int32: 2^31 - 1). */
#ifndef VKM_TOKEN_FILE_H
#define VKM_TOKEN_FILE_H

#include "vka_internal.h"

#include <stdint.h>

#define VKM_TOKENS_HEADER_BYTES 1024
#define VKM_TOKENS_MAX_COUNT 0xFFFFFFFFull

/* A control byte for the text rule (data.c): below 0x20 or DEL, but for the ASCII whitespace
 * of GPT-2's pattern (\t \n \v \f \r), which plain text may hold anywhere. */
static inline bool vkm_is_control_byte(unsigned char c) {
    return (c < 0x20 && (c < '\t' || c > '\r')) || c == 0x7F;
}

/* Whether the first bytes (len of them) start with the token file magic. */
bool vkm_is_token_file(const unsigned char *bytes, size_t len);
/* Check the header of a token file of len bytes against its length; *n = its token count.
 * Errors: VKA_ERROR_FORMAT naming name (too short, version, count vs size). */
vka_result vkm_token_file_check(vka_context *ctx, const char *name, const unsigned char *bytes,
                                size_t len, size_t *n);
/* The first id >= V among n uint16 ids (SIZE_MAX if none). */
size_t vkm_first_id_at_least(const uint16_t *ids, size_t n, int V);
/* Text (vka_data_open, vka_tokenize_file) is encoded in pieces of about this many bytes. */
#define VKM_TEXT_PIECE_BYTES ((size_t)1 << 20)
/* *piece = VKM_TEXT_PIECE_BYTES, or $VKATTN_TEXT_PIECE_BYTES (a number >= 1; for tests, which
 * cut texts everywhere). Errors: VKA_ERROR_INVALID_ARGUMENT for a bad value. */
vka_result vkm_text_piece_bytes(vka_context *ctx, size_t *piece);
/* The end of the piece of text that starts at start (0 or an end this returned): the first cut
 * at least piece bytes on where GPT-2's pre-tokenizer lets the text be split without changing
 * a token (vkm_pretok_cut), so pieces encoded one by one give the ids of the whole. at_end:
 * text[0 .. len) is all of the text (len if no cut comes sooner); otherwise 0 means no cut is
 * known yet (read more). */
size_t vkm_text_next_cut(const unsigned char *text, size_t len, size_t start, size_t piece,
                         bool at_end);

#endif
