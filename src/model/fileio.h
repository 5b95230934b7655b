/* Reading files for the tokenizer, data and checkpoint loaders (every failure names the file),
 * writing files atomically, and showing bytes of text in messages. */
#ifndef VKM_FILEIO_H
#define VKM_FILEIO_H

#include "vka_internal.h"

#include <stdint.h>
#include <stdio.h>

/* Open a regular file for reading and report its size in bytes.
 * Errors: VKA_ERROR_IO ("cannot open <path>: <strerror>", or not a regular file). */
vka_result vkm_open_read(vka_context *ctx, const char *path, FILE **f, uint64_t *size);
/* The whole file in a malloc'd buffer with a NUL byte after its len bytes. kind names what the
 * file should be ("a training text"), for the message when it is larger than max_bytes.
 * Errors: as vkm_open_read; VKA_ERROR_FORMAT when larger than max_bytes or when the file ends
 * early; out of host memory. */
vka_result vkm_read_all(vka_context *ctx, const char *path, const char *kind, uint64_t max_bytes,
                        char **buf, size_t *len);
/* Read exactly n bytes (what names them in the message). Errors: VKA_ERROR_IO on a read
 * error, VKA_ERROR_FORMAT when the file ends early. */
vka_result vkm_read_exact(vka_context *ctx, FILE *f, const char *path, void *dst, size_t n,
                          const char *what);

/* Write the n_parts byte ranges parts[i] (sizes[i] bytes) one after the other to path, as
 * vka_file_write_atomic writes one: through path.tmp.<pid>, fsync'd, then renamed (nothing is
 * lost if interrupted). ctx may be NULL (libc's allocator, no message).
 * Errors: VKA_ERROR_IO naming the temporary file or the rename, out of host memory. */
vka_result vka_write_file_atomic(vka_context *ctx, const char *path, const void *const *parts,
                                 const size_t *sizes, int n_parts);

/* A byte as a message shows it: 'a' for printable ASCII, '\n' '\t' '\r', else 0xC3. */
typedef struct vkm_byte_name {
    char s[8];
} vkm_byte_name;
vkm_byte_name vkm_show_byte(unsigned char c);

#endif
