/*
 * fileio.h - whole-file reads and crash-safe (atomic) file writes.
 *
 * Reading: clf_file_read_all() returns the whole file in one malloc'ed
 * buffer, NUL-terminated for convenience (the NUL is not counted), refusing
 * anything that is not a regular file or is larger than a caller-given limit;
 * clf_file_read_text() does the same for text that may be gzip-compressed
 * (data sets, tokenizer files).
 * Every message names the path and the system's reason (strerror).
 *
 * Writing: a file that must never be seen half-written (checkpoints,
 * tokenizers) is written to "<path>.tmp.<pid>" in the same directory, then
 * fflush + fsync, close, rename() over <path>, and fsync of the directory so
 * that the rename itself is durable. rename() within one filesystem is
 * atomic: a reader sees either the old file or the complete new one, and a
 * failure at any step (disk full, a vanished directory, a crash) leaves the
 * previous file untouched and removes the temporary file (a crash may leave
 * the "*.tmp.<pid>" file behind; it is never read). Only a new name or a
 * regular file is replaced; a symbolic link to a regular file is written
 * through (its target replaced, the link kept); a directory, device, FIFO,
 * socket or a link to anything else is refused (CLF_ERR_IO naming what it
 * is), never renamed over.
 *
 *   clf_file_atomic *f;
 *   if (clf_file_atomic_open("run/ckpt.safetensors", &f, err) != CLF_OK) goto fail;
 *   if (clf_file_atomic_write(f, hdr, n, err) != CLF_OK) { clf_file_atomic_abort(f); goto fail; }
 *   if (clf_file_atomic_commit(f, err) != CLF_OK) goto fail;   // consumes f either way
 *
 * One writer per directory: clf_dir_lock takes an advisory lock (flock) on
 * <dir>/.clformer.lock, which holds the holder's PID and host for the
 * message a second writer gets. The kernel drops the lock when its holder
 * dies however it dies, so a lock file left by a killed run is simply taken
 * over (and reported); a live holder's refuses.
 *
 * Not here: file formats (safetensors.h, tokenizer.h), directory creation.
 */
#ifndef CLF_FILEIO_H
#define CLF_FILEIO_H

#include <stddef.h>

#include "runtime/status.h"

CLF_API_BEGIN

/* Read all of path. On success *data is malloc'ed (free()), NUL-terminated,
 * and *size is its length in bytes. Missing/unreadable -> CLF_ERR_IO; not a
 * regular file or larger than max_bytes -> CLF_ERR_IO with the sizes;
 * allocation failure -> CLF_ERR_MEMORY. */
clf_status clf_file_read_all(const char *path, size_t max_bytes, char **data, size_t *size,
                             clf_error *err);

/* Read all of a text file, plain or gzip-compressed (zlib tells them apart
 * by the magic bytes and reads a plain file as it is). *text is malloc'ed
 * and NUL-terminated, *len bytes. Missing, unreadable, not a regular file or
 * larger than max_bytes once decompressed -> CLF_ERR_IO; a corrupt or
 * truncated gzip stream -> CLF_ERR_FORMAT. Every message names the path. */
clf_status clf_file_read_text(const char *path, size_t max_bytes, char **text, size_t *len,
                              clf_error *err);

/* Write data to path atomically (see above). */
clf_status clf_file_write_atomic(const char *path, const void *data, size_t size, clf_error *err);

/* Whether a write of path could start: path is a new name, a regular file
 * or a link to one (see above), in an existing folder this process may
 * write. CLF_ERR_IO saying why otherwise; nothing is written. For commands
 * that check their output before the work that leads to it. */
clf_status clf_file_check_target(const char *path, clf_error *err);

/* Streaming form of the same, for large files written piece by piece. */
typedef struct clf_file_atomic clf_file_atomic;

clf_status clf_file_atomic_open(const char *path, clf_file_atomic **out, clf_error *err);
/* Append n bytes. On failure the handle stays valid only for _abort(). */
clf_status clf_file_atomic_write(clf_file_atomic *f, const void *data, size_t n, clf_error *err);
/* Flush, fsync, close, rename over the target, fsync the directory. Frees f
 * whether or not it succeeds; on failure the target is left as it was. */
clf_status clf_file_atomic_commit(clf_file_atomic *f, clf_error *err);
/* Give up: close and remove the temporary file, free f. NULL is a no-op. */
void clf_file_atomic_abort(clf_file_atomic *f);
/* The temporary path being written (for messages and tests). */
const char *clf_file_atomic_tmp_path(const clf_file_atomic *f);

/* A short fingerprint of len bytes, "<len>:<crc32 hex>" (a data set's, to
 * tell a resumed run that its data changed). */
void clf_fingerprint(const void *data, size_t len, char *out, size_t cap);

/* The lock on one directory, held until clf_dir_lock_release. */
typedef struct clf_dir_lock clf_dir_lock;
/* Take dir's lock without waiting. Held by a live process -> CLF_ERR_ARG
 * "<dir> is in use by clformer PID N on HOST ...". On success, *stale
 * (cap bytes; may be NULL) says whose lock was taken over ("PID N on HOST",
 * from a run that ended without releasing it) or is "". */
clf_status clf_dir_lock_acquire(const char *dir, clf_dir_lock **out, char *stale, size_t cap,
                                clf_error *err);
/* Empty the lock file and release it; NULL is a no-op. */
void clf_dir_lock_release(clf_dir_lock *l);
/* Remove <dir>/<prefix>.tmp.* files (temporary files of atomic writes that
 * a crash left behind; call with the directory's lock held). Their count
 * goes to *removed. */
clf_status clf_remove_stale_tmp(const char *dir, const char *prefix, int *removed, clf_error *err);

CLF_API_END

#endif
