/* File helpers shared by the loaders and savers (see fileio.h), and vka_file_write_atomic. */
#define _POSIX_C_SOURCE 200809L /* fileno, fsync, getpid under -std=c11 */
#include "model/fileio.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

vka_result vkm_open_read(vka_context *ctx, const char *path, FILE **f, uint64_t *size) {
    *f = NULL;
    if (!path) return vka_set_error(ctx, VKA_ERROR_INVALID_ARGUMENT, "file path is NULL");
    FILE *fp = fopen(path, "rb");
    if (!fp) return vka_set_error(ctx, VKA_ERROR_IO, "cannot open %s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fileno(fp), &st) != 0) {
        int e = errno;
        fclose(fp);
        return vka_set_error(ctx, VKA_ERROR_IO, "cannot stat %s: %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        fclose(fp);
        return vka_set_error(ctx, VKA_ERROR_IO, "cannot read %s: %s", path,
                             S_ISDIR(st.st_mode) ? "it is a directory" : "not a regular file");
    }
    *f = fp;
    *size = (uint64_t)st.st_size;
    return VKA_SUCCESS;
}

vka_result vkm_read_exact(vka_context *ctx, FILE *f, const char *path, void *dst, size_t n,
                          const char *what) {
    if (n == 0) return VKA_SUCCESS;
    size_t got = fread(dst, 1, n, f);
    if (got == n) return VKA_SUCCESS;
    if (ferror(f))
        return vka_set_error(ctx, VKA_ERROR_IO, "reading %s of %s: %s", what, path,
                             strerror(errno));
    return vka_set_error(ctx, VKA_ERROR_FORMAT, "%s ends inside %s (%zu of %zu bytes)", path,
                         what, got, n);
}

vka_result vkm_read_all(vka_context *ctx, const char *path, const char *kind, uint64_t max_bytes,
                        char **buf, size_t *len) {
    *buf = NULL;
    *len = 0;
    FILE *f;
    uint64_t size = 0; /* set by vkm_open_read on success (-O3 cannot see it) */
    vka_result r = vkm_open_read(ctx, path, &f, &size);
    if (r != VKA_SUCCESS) return r;
    if (size > max_bytes || size > SIZE_MAX - 1) {
        fclose(f);
        return vka_set_error(ctx, VKA_ERROR_FORMAT, "%s is %llu bytes, larger than %s can be "
                             "(%llu bytes at most)", path, (unsigned long long)size, kind,
                             (unsigned long long)max_bytes);
    }
    char *data = vka_malloc(ctx, (size_t)size + 1);
    if (!data) {
        fclose(f);
        return vka_set_error(ctx, VKA_ERROR_OUT_OF_HOST_MEMORY, "reading %s: %llu bytes: out of memory",
                             path, (unsigned long long)size);
    }
    r = vkm_read_exact(ctx, f, path, data, (size_t)size, "its contents");
    fclose(f);
    if (r != VKA_SUCCESS) {
        vka_free(ctx, data);
        return r;
    }
    data[size] = '\0';
    *buf = data;
    *len = (size_t)size;
    return VKA_SUCCESS;
}

vka_result vkm_atomic_open(vka_context *ctx, const char *path, vkm_atomic_file *af) {
    *af = (vkm_atomic_file){.path = path};
    size_t cap = strlen(path) + 32;
    af->tmp = vka_malloc(ctx, cap);
    if (!af->tmp)
        return vka_set_error(ctx, VKA_ERROR_OUT_OF_HOST_MEMORY, "writing %s: out of memory", path);
    /* A name no other writer holds (O_EXCL), with the replaced file's permissions. */
    int fd = -1;
    for (int i = 0; i < 100 && fd < 0; i++) {
        if (i == 0) snprintf(af->tmp, cap, "%s.tmp.%ld", path, (long)getpid());
        else snprintf(af->tmp, cap, "%s.tmp.%ld.%d", path, (long)getpid(), i);
        fd = open(af->tmp, O_WRONLY | O_CREAT | O_EXCL, 0666);
        if (fd < 0 && errno != EEXIST) break;
    }
    struct stat st;
    if (fd >= 0 && stat(path, &st) == 0 && S_ISREG(st.st_mode)) (void)fchmod(fd, st.st_mode & 07777);
    af->f = fd >= 0 ? fdopen(fd, "wb") : NULL;
    if (!af->f && fd >= 0) {
        int e = errno;
        close(fd);
        remove(af->tmp);
        errno = e;
    }
    if (!af->f) {
        vka_result r = vka_set_error(ctx, VKA_ERROR_IO, "cannot create %s: %s", af->tmp,
                                     strerror(errno));
        vka_free(ctx, af->tmp);
        af->tmp = NULL;
        return r;
    }
    return VKA_SUCCESS;
}

vka_result vkm_atomic_commit(vka_context *ctx, vkm_atomic_file *af, int err) {
    if (!err && (fflush(af->f) != 0 || fsync(fileno(af->f)) != 0)) err = errno ? errno : EIO;
    if (fclose(af->f) != 0 && !err) err = errno ? errno : EIO;
    af->f = NULL;
    vka_result r = VKA_SUCCESS;
    if (err) {
        r = vka_set_error(ctx, VKA_ERROR_IO, "writing %s: %s", af->tmp, strerror(err));
        remove(af->tmp);
    } else if (rename(af->tmp, af->path) != 0) {
        r = vka_set_error(ctx, VKA_ERROR_IO, "cannot rename %s to %s: %s", af->tmp, af->path,
                          strerror(errno));
        remove(af->tmp);
    } else {
        /* The rename itself survives a crash once its directory is on disk (best effort: some
         * file systems refuse fsync on a directory). */
        const char *slash = strrchr(af->path, '/');
        size_t n = slash ? (size_t)(slash - af->path) : 0;
        if (n == 0 && slash) n = 1; /* "/file" */
        if (n < strlen(af->tmp)) {
            memcpy(af->tmp, slash ? af->path : ".", slash ? n : 1);
            af->tmp[slash ? n : 1] = '\0';
            int dfd = open(af->tmp, O_RDONLY | O_DIRECTORY);
            if (dfd >= 0) {
                (void)fsync(dfd);
                close(dfd);
            }
        }
    }
    vka_free(ctx, af->tmp);
    af->tmp = NULL;
    return r;
}

void vkm_atomic_abort(vka_context *ctx, vkm_atomic_file *af) {
    if (af->f) fclose(af->f);
    if (af->tmp) remove(af->tmp);
    vka_free(ctx, af->tmp);
    *af = (vkm_atomic_file){0};
}

vka_result vka_write_file_atomic(vka_context *ctx, const char *path, const void *const *parts,
                                 const size_t *sizes, int n_parts) {
    vkm_atomic_file af;
    vka_result r = vkm_atomic_open(ctx, path, &af);
    if (r != VKA_SUCCESS) return r;
    int err = 0;
    for (int i = 0; i < n_parts && !err; i++)
        if (sizes[i] && fwrite(parts[i], 1, sizes[i], af.f) != sizes[i]) err = errno ? errno : EIO;
    return vkm_atomic_commit(ctx, &af, err);
}

vka_result vka_file_write_atomic(vka_context *ctx, const char *path, const void *data, size_t len) {
    if (!path)
        return vka_set_error(ctx, VKA_ERROR_INVALID_ARGUMENT, "vka_file_write_atomic: path is NULL");
    if (!data && len > 0)
        return vka_set_error(ctx, VKA_ERROR_INVALID_ARGUMENT,
                             "vka_file_write_atomic: data is NULL and len is %zu", len);
    const void *parts[1] = {data};
    size_t sizes[1] = {len};
    return vka_write_file_atomic(ctx, path, parts, sizes, 1);
}

vkm_byte_name vkm_show_byte(unsigned char c) {
    vkm_byte_name n;
    if (c == '\n') snprintf(n.s, sizeof n.s, "'\\n'");
    else if (c == '\t') snprintf(n.s, sizeof n.s, "'\\t'");
    else if (c == '\r') snprintf(n.s, sizeof n.s, "'\\r'");
    else if (c == '\'') snprintf(n.s, sizeof n.s, "'\\''");
    else if (c >= 0x20 && c < 0x7F) snprintf(n.s, sizeof n.s, "'%c'", c);
    else snprintf(n.s, sizeof n.s, "0x%02X", c);
    return n;
}
