/*
 * util.h - the small host utilities every room shares, each with one home:
 * a monotonic clock, mkdir -p, a 64-bit hash, the splitmix64 generator
 * that seeds every random stream (parameter init, data order, sampling),
 * and the extent of a strided matrix batch.
 */
#ifndef CLF_UTIL_H
#define CLF_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "runtime/status.h"

CLF_API_BEGIN

/* Seconds on a monotonic clock (for durations only). */
double clf_now_seconds(void);

/* mkdir -p; CLF_OK if the directory exists afterwards. */
clf_status clf_mkdir_p(const char *path, clf_error *err);

/* FNV-1a over bytes with a splitmix64 finaliser; two seeds give two
 * independent 64-bit hashes when a 128-bit key is wanted. */
uint64_t clf_hash64(const void *data, size_t n, uint64_t seed);

/* The element one past the last of `batch` matrices of rows x cols (row
 * stride ld, matrices stride apart) starting at element off: off +
 * (batch-1) stride + (rows-1) ld + cols, in *end. 0 if that overflows
 * (rows, cols, batch >= 1). */
int clf_matrix_end(size_t off, size_t rows, size_t cols, size_t ld, size_t stride, size_t batch,
                   size_t *end);

/* splitmix64 (Steele, Lea, Flood 2014): advances *state by the golden-ratio
 * increment and returns its mix. A bijection of the counter, so successive
 * outputs seed larger generators safely (xoshiro256**, Philox keys). */
uint64_t clf_splitmix64_next(uint64_t *state);
/* [0, 1) with 53 random bits. */
double clf_splitmix64_uniform(uint64_t *state);

CLF_API_END

#endif
