/*
 * util.c - the small host utilities of util.h: a 64-bit hash for cache
 * keys and checksums, mkdir -p, a monotonic clock, splitmix64.
 */
#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "runtime/util.h"

/* FNV-1a over bytes followed by a splitmix64 finaliser; two seeds give two
 * independent 64-bit hashes when a 128-bit key is wanted. */
uint64_t clf_hash64(const void *data, size_t n, uint64_t seed)
{
    const unsigned char *p = data;
    uint64_t h = 0xcbf29ce484222325ull ^ (seed * 0x9E3779B97F4A7C15ull);
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    h ^= h >> 30;
    h *= 0xBF58476D1CE4E5B9ull;
    h ^= h >> 27;
    h *= 0x94D049BB133111EBull;
    h ^= h >> 31;
    return h;
}

clf_status clf_mkdir_p(const char *path, clf_error *err)
{
    char tmp[4096];
    size_t n = strlen(path);
    if (n == 0 || n >= sizeof tmp)
        return clf_error_set(err, CLF_ERR_IO, "invalid directory path '%s'", path);
    memcpy(tmp, path, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (tmp[i] == '/' || tmp[i] == '\0') {
            char c = tmp[i];
            tmp[i] = '\0';
            if (mkdir(tmp, 0755) != 0 && errno != EEXIST)
                return clf_error_set(err, CLF_ERR_IO, "cannot create directory '%s': %s", tmp,
                                     strerror(errno));
            tmp[i] = c;
        }
    }
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode))
        return clf_error_set(err, CLF_ERR_IO, "'%s' is not a directory", path);
    return CLF_OK;
}

double clf_now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int clf_matrix_end(size_t off, size_t rows, size_t cols, size_t ld, size_t stride, size_t batch,
                   size_t *end)
{
    size_t need = off, t;
    if (__builtin_mul_overflow(batch - 1, stride, &t) || __builtin_add_overflow(need, t, &need) ||
        __builtin_mul_overflow(rows - 1, ld, &t) || __builtin_add_overflow(need, t, &need) ||
        __builtin_add_overflow(need, cols, &need))
        return 0;
    *end = need;
    return 1;
}

uint64_t clf_splitmix64_next(uint64_t *state)
{
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

double clf_splitmix64_uniform(uint64_t *state)
{
    return (double)(clf_splitmix64_next(state) >> 11) * (1.0 / 9007199254740992.0);
}
