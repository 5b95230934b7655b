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

/* A file being written atomically: bytes go to f, an open path.tmp.<pid>; vkm_atomic_commit
 * flushes, fsyncs and renames it over path, vkm_atomic_abort removes it. The one writer of
 * the library and the command line (vka_file_write_atomic): a saver that streams (a token
 * file from a text) writes to f itself, one that holds its bytes uses vka_write_file_atomic. */
typedef struct vkm_atomic_file {
    FILE *f;
    char *tmp;        /* the temporary name, for messages */
    const char *path; /* the final name (borrowed) */
} vkm_atomic_file;
/* Create path.tmp.<pid> for writing. Errors: VKA_ERROR_IO ("cannot create <tmp>: ..."), out
 * of host memory; on error nothing is left to abort. */
vka_result vkm_atomic_open(vka_context *ctx, const char *path, vkm_atomic_file *af);
/* Flush, fsync and close af->f, then rename it over path; err != 0 is an errno a write to f
 * already failed with (the file is then removed). Always releases af.
 * Errors: VKA_ERROR_IO ("writing <tmp>: ..." or "cannot rename <tmp> to <path>: ..."). */
vka_result vkm_atomic_commit(vka_context *ctx, vkm_atomic_file *af, int err);
/* Close and remove the temporary file and release af (after an error of the saver's own). */
void vkm_atomic_abort(vka_context *ctx, vkm_atomic_file *af);

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
