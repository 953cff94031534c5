/*
 * util.h - the small host utilities every room shares, each with one home:
 * a monotonic clock, mkdir -p, a 64-bit hash, and the splitmix64 generator
 * that seeds every random stream (parameter init, data order, sampling).
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

/* splitmix64 (Steele, Lea, Flood 2014): advances *state by the golden-ratio
 * increment and returns its mix. A bijection of the counter, so successive
 * outputs seed larger generators safely (xoshiro256**, Philox keys). */
uint64_t clf_splitmix64_next(uint64_t *state);
/* [0, 1) with 53 random bits. */
double clf_splitmix64_uniform(uint64_t *state);

CLF_API_END

#endif
