/*
 * fileio.c - see fileio.h.
 *
 * POSIX only (open/fsync/rename/getpid). The directory fsync tolerates
 * EINVAL/ENOTSUP (filesystems that cannot sync a directory), since the data
 * itself is already on disk and rename() has been done.
 */
/* realpath() (X/Open, beyond the project's _POSIX_C_SOURCE) */
#define _XOPEN_SOURCE 700
#include "model/io/fileio.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>
#include <zlib.h>

struct clf_file_atomic {
    FILE *fp;
    char *path;     /* the target */
    char *tmp_path; /* "<path>.tmp.<pid>" */
    int failed;     /* a write failed: commit refuses */
};

clf_status clf_file_read_all(const char *path, size_t max_bytes, char **data, size_t *size,
                             clf_error *err)
{
    clf_status st = CLF_OK;
    FILE *fp = NULL;
    char *buf = NULL;
    size_t cap = 0, len = 0;
    struct stat sb;

    *data = NULL;
    *size = 0;
    fp = fopen(path, "rb");
    if (fp == NULL) {
        st = clf_error_set(err, CLF_ERR_IO, "cannot open %s: %s", path, strerror(errno));
        goto fail;
    }
    if (fstat(fileno(fp), &sb) != 0) {
        st = clf_error_set(err, CLF_ERR_IO, "cannot stat %s: %s", path, strerror(errno));
        goto fail;
    }
    if (!S_ISREG(sb.st_mode)) {
        st = clf_error_set(err, CLF_ERR_IO, "%s is not a regular file", path);
        goto fail;
    }
    if ((unsigned long long)sb.st_size > (unsigned long long)max_bytes) {
        st = clf_error_set(err, CLF_ERR_IO, "%s is %lld bytes, more than the limit of %zu bytes",
                           path, (long long)sb.st_size, max_bytes);
        goto fail;
    }
    /* One spare byte beyond the stat size detects a file that grows while
     * we read it; one more holds the NUL. */
    cap = (size_t)sb.st_size + 2;
    buf = malloc(cap);
    if (buf == NULL) {
        st = clf_error_set(err, CLF_ERR_MEMORY, "cannot allocate %zu bytes to read %s", cap, path);
        goto fail;
    }
    for (;;) {
        if (len > max_bytes) {
            st = clf_error_set(err, CLF_ERR_IO, "%s grew beyond the limit of %zu bytes", path,
                               max_bytes);
            goto fail;
        }
        if (len + 1 == cap) {
            size_t ncap = cap * 2;
            char *nb = realloc(buf, ncap);
            if (nb == NULL) {
                st = clf_error_set(err, CLF_ERR_MEMORY, "cannot allocate %zu bytes to read %s",
                                   ncap, path);
                goto fail;
            }
            buf = nb;
            cap = ncap;
        }
        size_t got = fread(buf + len, 1, cap - 1 - len, fp);
        len += got;
        if (got == 0) {
            if (ferror(fp)) {
                st = clf_error_set(err, CLF_ERR_IO, "error reading %s: %s", path, strerror(errno));
                goto fail;
            }
            break;
        }
    }
    if (len > max_bytes) {
        st = clf_error_set(err, CLF_ERR_IO, "%s grew beyond the limit of %zu bytes", path,
                           max_bytes);
        goto fail;
    }
    buf[len] = '\0';
    fclose(fp);
    *data = buf;
    *size = len;
    return CLF_OK;

fail:
    if (fp != NULL)
        fclose(fp);
    free(buf);
    return st;
}

/* The directory part of path ("." when there is none). malloc'ed. */
static char *dir_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    if (slash == NULL)
        return strdup(".");
    if (slash == path)
        return strdup("/");
    size_t n = (size_t)(slash - path);
    char *d = malloc(n + 1);
    if (d != NULL) {
        memcpy(d, path, n);
        d[n] = '\0';
    }
    return d;
}

/* What a file that is not a regular one is, for messages. */
static const char *kind_of(mode_t m)
{
    return S_ISDIR(m)    ? "directory"
           : S_ISCHR(m)  ? "character device"
           : S_ISBLK(m)  ? "block device"
           : S_ISFIFO(m) ? "named pipe (FIFO)"
           : S_ISSOCK(m) ? "socket"
                         : "special file";
}

/* The file a write of path replaces: path itself when it does not exist or
 * is a regular file; a symbolic link's final target when that is a regular
 * file (the link stays a link); anything else (a directory, a device, a
 * FIFO, a socket, a link to none of these or to nothing) is refused rather
 * than renamed over. *target is malloc'ed. */
static clf_status write_target(const char *path, char **target, clf_error *err)
{
    struct stat sb;
    *target = NULL;
    if (lstat(path, &sb) != 0) {
        if (errno != ENOENT)
            return clf_error_set(err, CLF_ERR_IO, "cannot write %s: %s", path, strerror(errno));
        *target = strdup(path);
    } else if (S_ISREG(sb.st_mode)) {
        *target = strdup(path);
    } else if (S_ISLNK(sb.st_mode)) {
        char *real = realpath(path, NULL);
        if (real == NULL || stat(real, &sb) != 0 || !S_ISREG(sb.st_mode)) {
            const char *what = real == NULL ? "nothing that exists" : kind_of(sb.st_mode);
            free(real);
            return clf_error_set(err, CLF_ERR_IO,
                                 "cannot write %s: it is a symbolic link to %s; expected a new "
                                 "name, a regular file or a link to one",
                                 path, what);
        }
        *target = real;
        return CLF_OK;
    } else {
        return clf_error_set(err, CLF_ERR_IO,
                             "cannot write %s: it is a %s; expected a new name or a regular file "
                             "(which is replaced whole)",
                             path, kind_of(sb.st_mode));
    }
    return *target != NULL ? CLF_OK
                           : clf_error_set(err, CLF_ERR_MEMORY, "out of memory writing %s", path);
}

static void atomic_free(clf_file_atomic *f)
{
    free(f->path);
    free(f->tmp_path);
    free(f);
}

clf_status clf_file_atomic_open(const char *path, clf_file_atomic **out, clf_error *err)
{
    clf_status st = CLF_OK;
    clf_file_atomic *f = NULL;
    int fd = -1;

    *out = NULL;
    if (path == NULL || path[0] == '\0') {
        st = clf_error_set(err, CLF_ERR_ARG, "an empty path was given for writing");
        goto fail;
    }
    f = calloc(1, sizeof *f);
    if (f == NULL)
        goto oom;
    if ((st = write_target(path, &f->path, err)) != CLF_OK)
        goto fail;
    size_t n = strlen(f->path);
    f->tmp_path = malloc(n + 32);
    if (f->tmp_path == NULL)
        goto oom;
    snprintf(f->tmp_path, n + 32, "%s.tmp.%ld", f->path, (long)getpid());
    fd = open(f->tmp_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        st = clf_error_set(err, CLF_ERR_IO, "cannot create %s (to write %s): %s", f->tmp_path, path,
                           strerror(errno));
        goto fail;
    }
    f->fp = fdopen(fd, "wb");
    if (f->fp == NULL) {
        st = clf_error_set(err, CLF_ERR_IO, "cannot open %s: %s", f->tmp_path, strerror(errno));
        close(fd);
        unlink(f->tmp_path);
        goto fail;
    }
    *out = f;
    return CLF_OK;

oom:
    st = clf_error_set(err, CLF_ERR_MEMORY, "out of memory opening %s for writing", path);
fail:
    if (f != NULL)
        atomic_free(f);
    return st;
}

clf_status clf_file_check_target(const char *path, clf_error *err)
{
    char *target = NULL, *dir = NULL;
    if (path == NULL || path[0] == '\0')
        return clf_error_set(err, CLF_ERR_IO, "an empty path was given for writing");
    clf_status st = write_target(path, &target, err);
    if (st != CLF_OK)
        return st;
    struct stat sb;
    dir = dir_of(target);
    if (dir == NULL)
        st = clf_error_set(err, CLF_ERR_MEMORY, "out of memory writing %s", path);
    else if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
        st = clf_error_set(err, CLF_ERR_IO, "cannot write %s: its folder %s does not exist", path,
                           dir);
    else if (access(dir, W_OK) != 0)
        st = clf_error_set(err, CLF_ERR_IO, "cannot write %s: its folder %s is not writable (%s)",
                           path, dir, strerror(errno));
    free(dir);
    free(target);
    return st;
}

clf_status clf_file_atomic_write(clf_file_atomic *f, const void *data, size_t n, clf_error *err)
{
    if (f->failed)
        return clf_error_set(err, CLF_ERR_IO, "writing %s: an earlier write failed", f->path);
    if (n == 0)
        return CLF_OK;
    if (fwrite(data, 1, n, f->fp) != n) {
        f->failed = 1;
        return clf_error_set(err, CLF_ERR_IO, "cannot write %s: %s", f->tmp_path, strerror(errno));
    }
    return CLF_OK;
}

clf_status clf_file_atomic_commit(clf_file_atomic *f, clf_error *err)
{
    clf_status st = CLF_OK;
    char *dir = NULL;
    FILE *fp = f->fp;

    f->fp = NULL;
    if (f->failed) {
        st = clf_error_set(err, CLF_ERR_IO, "writing %s: an earlier write failed", f->path);
        fclose(fp);
        goto fail;
    }
    if (fflush(fp) != 0 || fsync(fileno(fp)) != 0) {
        st = clf_error_set(err, CLF_ERR_IO, "cannot write %s: %s", f->tmp_path, strerror(errno));
        fclose(fp);
        goto fail;
    }
    if (fclose(fp) != 0) {
        st = clf_error_set(err, CLF_ERR_IO, "cannot close %s: %s", f->tmp_path, strerror(errno));
        goto fail;
    }
    if (rename(f->tmp_path, f->path) != 0) {
        st = clf_error_set(err, CLF_ERR_IO, "cannot rename %s to %s: %s", f->tmp_path, f->path,
                           strerror(errno));
        goto fail;
    }
    dir = dir_of(f->path);
    if (dir != NULL) {
        int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd >= 0) {
            if (fsync(dfd) != 0 && errno != EINVAL && errno != ENOTSUP) {
                st = clf_error_set(err, CLF_ERR_IO, "wrote %s but cannot sync its directory: %s",
                                   f->path, strerror(errno));
            }
            close(dfd);
        }
        free(dir);
    }
    atomic_free(f);
    return st;

fail:
    unlink(f->tmp_path);
    atomic_free(f);
    return st;
}

void clf_file_atomic_abort(clf_file_atomic *f)
{
    if (f == NULL)
        return;
    if (f->fp != NULL)
        fclose(f->fp);
    unlink(f->tmp_path);
    atomic_free(f);
}

const char *clf_file_atomic_tmp_path(const clf_file_atomic *f) { return f->tmp_path; }

clf_status clf_file_write_atomic(const char *path, const void *data, size_t size, clf_error *err)
{
    clf_file_atomic *f = NULL;
    clf_status st = clf_file_atomic_open(path, &f, err);
    if (st != CLF_OK)
        return st;
    st = clf_file_atomic_write(f, data, size, err);
    if (st != CLF_OK) {
        clf_file_atomic_abort(f);
        return st;
    }
    return clf_file_atomic_commit(f, err);
}

/* zlib's gzerror() message, without the "path: " it starts with */
static const char *gz_message(gzFile f, const char *path, int *zerr)
{
    const char *msg = gzerror(f, zerr);
    size_t n = strlen(path);
    if (msg == NULL)
        return "";
    if (strncmp(msg, path, n) == 0 && msg[n] == ':' && msg[n + 1] == ' ')
        msg += n + 2;
    return msg;
}

/* zlib's gzread stops quietly at bytes after the last gzip member that
 * are not another member. Walk the members with inflate (the output thrown
 * away) and refuse anything after them. */
static clf_status check_gzip_members(const char *path, clf_error *err)
{
    FILE *fp = fopen(path, "rb");
    if (fp == NULL)
        return clf_error_set(err, CLF_ERR_IO, "cannot open %s: %s", path, strerror(errno));
    unsigned char in[1 << 16], out[1 << 16];
    z_stream z;
    memset(&z, 0, sizeof z);
    clf_status st = CLF_OK;
    if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) {
        fclose(fp);
        return clf_error_set(err, CLF_ERR_MEMORY, "out of memory checking %s", path);
    }
    long long offset = 0; /* of z.next_in in the file */
    int in_member = 1, eof = 0;
    for (;;) {
        if (z.avail_in == 0 && !eof) {
            const size_t got = fread(in, 1, sizeof in, fp);
            if (got < sizeof in)
                eof = 1;
            z.next_in = in;
            z.avail_in = (uInt)got;
        }
        if (z.avail_in == 0 && eof)
            break;
        if (!in_member) {
            /* between members: another one must start here */
            if (z.avail_in < 2 && !eof) {
                memmove(in, z.next_in, z.avail_in);
                const size_t got = fread(in + z.avail_in, 1, sizeof in - z.avail_in, fp);
                if (got < sizeof in - z.avail_in)
                    eof = 1;
                z.avail_in += (uInt)got;
                z.next_in = in;
            }
            if (z.avail_in < 2 || z.next_in[0] != 0x1f || z.next_in[1] != 0x8b) {
                fseeko(fp, 0, SEEK_END);
                const long long size = (long long)ftello(fp);
                st = clf_error_set(err, CLF_ERR_FORMAT,
                                   "reading %s: %lld bytes after the end of the gzip data at "
                                   "byte %lld are not gzip (a damaged or concatenated file?)",
                                   path, size - offset, offset);
                break;
            }
            inflateReset(&z);
            in_member = 1;
        }
        z.next_out = out;
        z.avail_out = sizeof out;
        const uInt before = z.avail_in;
        const int rc = inflate(&z, Z_NO_FLUSH);
        offset += (long long)(before - z.avail_in);
        if (rc == Z_STREAM_END) {
            in_member = 0;
        } else if (rc != Z_OK && rc != Z_BUF_ERROR) {
            break; /* corrupt data: gzread has said so already */
        } else if (rc == Z_BUF_ERROR && z.avail_in == 0 && eof) {
            break; /* truncated: likewise */
        }
    }
    inflateEnd(&z);
    fclose(fp);
    return st;
}

clf_status clf_file_read_text(const char *path, size_t max_bytes, char **text, size_t *len,
                              clf_error *err)
{
    clf_status st = CLF_OK;
    char *buf = NULL;
    size_t n = 0, cap = (size_t)1 << 20;
    gzFile f = NULL;
    struct stat sb;
    *text = NULL;
    *len = 0;
    if (stat(path, &sb) != 0)
        return clf_error_set(err, CLF_ERR_IO, "cannot open %s: %s", path, strerror(errno));
    if (!S_ISREG(sb.st_mode))
        return clf_error_set(err, CLF_ERR_IO, "%s is not a regular file", path);
    errno = 0;
    f = gzopen(path, "rb");
    if (f == NULL)
        return clf_error_set(err, CLF_ERR_IO, "cannot open %s: %s", path,
                             errno ? strerror(errno) : "out of memory");
    gzbuffer(f, 1u << 17);
    if ((buf = malloc(cap + 1)) == NULL) {
        st = clf_error_set(err, CLF_ERR_MEMORY, "cannot allocate %zu bytes to read %s", cap, path);
        goto done;
    }
    for (;;) {
        if (n > max_bytes) {
            st = clf_error_set(err, CLF_ERR_IO, "%s is larger than %zu bytes (decompressed)", path,
                               max_bytes);
            goto done;
        }
        if (n == cap) {
            char *nb = realloc(buf, 2 * cap + 1);
            if (nb == NULL) {
                st = clf_error_set(err, CLF_ERR_MEMORY, "cannot allocate %zu bytes to read %s",
                                   2 * cap + 1, path);
                goto done;
            }
            buf = nb;
            cap *= 2;
        }
        size_t want = cap - n > (1u << 30) ? (1u << 30) : cap - n;
        int got = gzread(f, buf + n, (unsigned)want);
        if (got < 0) {
            int zerr = 0;
            const char *msg = gz_message(f, path, &zerr);
            st = clf_error_set(err, zerr == Z_ERRNO ? CLF_ERR_IO : CLF_ERR_FORMAT, "reading %s: %s",
                               path, zerr == Z_ERRNO ? strerror(errno) : msg);
            goto done;
        }
        if (got == 0)
            break;
        n += (size_t)got;
    }
    {
        /* zlib reports a truncated stream only in its state, not by gzread() */
        int zerr = Z_OK;
        const char *msg = gz_message(f, path, &zerr);
        if (zerr != Z_OK && zerr != Z_STREAM_END) {
            st = clf_error_set(err, CLF_ERR_FORMAT,
                               "reading %s: %s (a corrupt or truncated "
                               "gzip file)",
                               path, msg);
            goto done;
        }
    }
    if (!gzdirect(f) && (st = check_gzip_members(path, err)) != CLF_OK)
        goto done;
    buf[n] = '\0';
    *text = buf;
    *len = n;
    buf = NULL;
done:
    gzclose_r(f);
    free(buf);
    return st;
}

void clf_fingerprint(const void *data, size_t len, char *out, size_t cap)
{
    uLong crc = crc32(0L, Z_NULL, 0);
    const unsigned char *p = data;
    for (size_t left = len; left > 0;) {
        const uInt piece = left > (1u << 30) ? (1u << 30) : (uInt)left;
        crc = crc32(crc, p, piece);
        p += piece;
        left -= piece;
    }
    snprintf(out, cap, "%zu:%08lx", len, (unsigned long)crc);
}

/* ---- one writer per directory ------------------------------------------------------- */

struct clf_dir_lock {
    int fd;
};

clf_status clf_dir_lock_acquire(const char *dir, clf_dir_lock **out, char *stale, size_t cap,
                                clf_error *err)
{
    char path[4096], held[256] = "";
    *out = NULL;
    if (stale != NULL && cap > 0)
        stale[0] = '\0';
    snprintf(path, sizeof path, "%s/.clformer.lock", dir);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
        return clf_error_set(err, CLF_ERR_IO, "cannot open the lock file %s: %s", path,
                             strerror(errno));
    /* what the file says: the holder, or a holder that is gone */
    ssize_t n = pread(fd, held, sizeof held - 1, 0);
    held[n > 0 ? n : 0] = '\0';
    held[strcspn(held, "\n")] = '\0';
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        const int e = errno;
        close(fd);
        if (e == EWOULDBLOCK)
            return clf_error_set(err, CLF_ERR_ARG,
                                 "%s is in use by clformer %s (%s): one run writes a directory "
                                 "at a time; wait for it to finish, or choose another --out",
                                 dir, held[0] ? held : "(another process)", path);
        return clf_error_set(err, CLF_ERR_IO, "cannot lock %s: %s", path, strerror(e));
    }
    if (held[0] != '\0' && stale != NULL && cap > 0)
        snprintf(stale, cap, "%s", held);
    char me[300], host[256] = "";
    if (gethostname(host, sizeof host - 1) != 0)
        snprintf(host, sizeof host, "?");
    const int len = snprintf(me, sizeof me, "PID %ld on %s\n", (long)getpid(), host);
    if (ftruncate(fd, 0) != 0 || pwrite(fd, me, (size_t)len, 0) != len) {
        const int e = errno;
        close(fd);
        return clf_error_set(err, CLF_ERR_IO, "cannot write the lock file %s: %s", path,
                             strerror(e));
    }
    clf_dir_lock *l = malloc(sizeof *l);
    if (l == NULL) {
        close(fd);
        return clf_error_set(err, CLF_ERR_MEMORY, "out of host memory");
    }
    l->fd = fd;
    *out = l;
    return CLF_OK;
}

void clf_dir_lock_release(clf_dir_lock *l)
{
    if (l == NULL)
        return;
    if (ftruncate(l->fd, 0) != 0) {
        /* the lock goes with the descriptor anyway; a stale text is only reported */
    }
    close(l->fd); /* drops the flock */
    free(l);
}

clf_status clf_remove_stale_tmp(const char *dir, const char *prefix, int *removed, clf_error *err)
{
    *removed = 0;
    DIR *dp = opendir(dir);
    if (dp == NULL)
        return clf_error_set(err, CLF_ERR_IO, "cannot read the directory %s: %s", dir,
                             strerror(errno));
    char want[512], path[4096];
    snprintf(want, sizeof want, "%s.tmp.", prefix);
    const size_t wn = strlen(want);
    struct dirent *de;
    while ((de = readdir(dp)) != NULL) {
        if (strncmp(de->d_name, want, wn) != 0)
            continue;
        const char *pid = de->d_name + wn;
        if (pid[0] == '\0' || strspn(pid, "0123456789") != strlen(pid))
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        if (unlink(path) == 0)
            (*removed)++;
    }
    closedir(dp);
    return CLF_OK;
}
