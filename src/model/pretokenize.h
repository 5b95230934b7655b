/* GPT-2's pre-tokenizer (not installed): the pieces of GPT-2's pattern
 *   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 * matched by hand, with the classes of GPT-2's reference (openai/gpt-2 encoder.py compiles it
 * with Python's `regex` module): \s is Unicode's White_Space property (25 code points), \p{L}
 * and \p{N} the general categories L* and N* from utf8proc (Unicode 15). Bytes that are not
 * UTF-8 (RFC 3629: no overlong forms, surrogates or code points above U+10FFFF) are each a piece
 * of their own, and the pattern applies to the valid stretches between them as if each were a
 * text of its own (as PCRE2_MATCH_INVALID_UTF did: such a byte is a barrier no match crosses).
 *
 * Self-contained (no context, no allocation, only utf8proc) so that tests can compile it in. */
#ifndef VKM_PRETOKENIZE_H
#define VKM_PRETOKENIZE_H

#include <stdbool.h>
#include <stddef.h>

/* The end of the piece that starts at pos (pos < len) of text[0 .. len): a piece starts at 0
 * and where the previous one ends. */
size_t vkm_pretok_piece(const unsigned char *text, size_t len, size_t pos);

/* The first cut at or after from (and after start) where text may be split and its two sides
 * encoded apart with the same pieces, hence ids, as the whole: start must be such a cut (0, or
 * one this returned). A cut falls between two code points that no piece can join whatever
 * follows: after a code point other than whitespace and the apostrophe, before one of another
 * class (whitespace, letter, number, other); or next to a byte that is not UTF-8. at_end says
 * text[0 .. len) is all of the text: then len is returned when no cut comes sooner. Otherwise
 * more text may follow, and 0 means none is known yet (read more and ask again). */
size_t vkm_pretok_cut(const unsigned char *text, size_t len, size_t start, size_t from,
                      bool at_end);

#endif
