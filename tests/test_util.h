/*
 * test_util.h - shared helpers for clformer's tests.
 *
 * - tu_runtime(): a runtime on CLFORMER_TEST_DEVICE (default selection if
 *   unset) with the shape CLFORMER_SHAPE forces, kernel cache under
 *   CLFORMER_CACHE_DIR; exits the test on failure. tu_options(): those
 *   options, for a test that sets more of its own.
 * - A seeded generator: CLFORMER_TEST_SEED, else a fresh seed from the clock,
 *   printed so that a failure can be replayed.
 * - tu_close(): compare float results with a float64 reference under
 *   |got - ref| <= atol + rtol * |ref|; NaN/inf never pass unless the
 *   reference is the same non-finite value; prints the worst element.
 * - tu_guarded(): device arrays with sentinel zones on both sides, to catch
 *   writes out of bounds (tu_guard_intact).
 * - TU_CHECK(cond, ...) records a failure with a message and goes on;
 *   tu_finish() prints "N passed, N failed" and returns the exit status.
 */
#ifndef CLF_TEST_UTIL_H
#define CLF_TEST_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "model/data/dataset.h"
#include "model/text/tokenizer.h"
#include "runtime/runtime.h"

typedef struct tu_rng {
    uint64_t s;
} tu_rng;

extern int tu_passed, tu_failed;

/* Default runtime options with the test's device (CLFORMER_TEST_DEVICE)
 * and kernel shape (CLFORMER_SHAPE: item or group, else measured). */
clf_runtime_options tu_options(void);
clf_runtime *tu_runtime(void);
/* The first max_bytes of tiny Shakespeare ($CLF_SOURCE_DIR/data), its
 * character tokenizer and the data set (90% train); exits on failure. */
void tu_char_text(size_t max_bytes, clf_tokenizer **tok, clf_dataset **ds);
/* A whole file, NUL-terminated (malloc'ed; its length in *n unless n is
 * NULL); NULL if it cannot be read. */
char *tu_read_file(const char *path, size_t *n);
/* Die (exit 1) with the error's message if st != CLF_OK. */
void tu_ok(clf_status st, const clf_error *err, const char *what);
uint64_t tu_seed(void); /* the seed of this run (printed once) */
tu_rng tu_rng_new(uint64_t salt);
uint32_t tu_u32(tu_rng *r);
double tu_uniform(tu_rng *r, double lo, double hi);
double tu_normal(tu_rng *r);
void tu_fill(tu_rng *r, float *x, size_t n, float lo, float hi);

/* Returns 1 if all close; records pass/fail under name. */
int tu_close(const char *name, const float *got, const double *ref, size_t n, double atol,
             double rtol);
void tu_check(int cond, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
#define TU_CHECK(cond, ...) tu_check((cond) ? 1 : 0, __FILE__, __LINE__, __VA_ARGS__)
int tu_finish(void);
/* 1 when the suite runs on a slow or simulated device (CLFORMER_TEST_SIMULATOR=1,
 * set by scripts/test-simulator.sh for Oclgrind and by scripts/test.sh's Mesa
 * leg): tests then use their smaller sizes. */
int tu_simulator(void);
/* 1 when the run is for a checking simulator's reports (CLFORMER_TEST_CHECKER=1,
 * set by scripts/test-simulator.sh for Oclgrind: races, bounds, barriers):
 * tests then leave out what the devices' legs check, such as a rerun's bits. */
int tu_checker(void);
/* CLFORMER_TEST_OWN_SHAPE=1: tests that check every kernel shape on any
 * device check only the shape the device runs (scripts/test.sh's Mesa leg:
 * llvmpipe compiles the item-shaped fused attention for minutes; the item
 * shape is checked on the CPU runtimes' legs). */
int tu_own_shape(void);
/* A scratch file's path: NAME in the build directory (CLF_BUILD_DIR, set by
 * ctest; else the working directory), after this process's id, so that two
 * runs of a test at once do not write each other's files. Returns buf. */
char *tu_scratch_path(const char *name, char *buf, size_t cap);

/* float64 references shared by kernel tests: activation `act` in ops.h's
 * clf_act order (none, relu, gelu_erf, gelu_tanh, silu; runtime/gemm's
 * clf_gemm_act follows it) and its derivative (test_activations checks it
 * against finite differences); head h's ALiBi slope among NH (the paper's
 * get_slopes). */
double tu_act_ref(int act, double x);
/* Each of the R rows of x [R, N] summed in float64 into sum[r]; returns the
 * largest row's sum of |x| (the scale of a summation's rounding). */
double tu_row_sums(const float *x, size_t R, size_t N, double *sum);
double tu_act_grad_ref(int act, double x);
double tu_alibi_slope(size_t h, size_t NH);

/* Device buffer helpers (exit on error). */
clf_ptr tu_upload(clf_runtime *rt, const float *x, size_t n);
clf_ptr tu_upload_i32(clf_runtime *rt, const int32_t *x, size_t n);
clf_ptr tu_alloc(clf_runtime *rt, size_t n); /* zero-filled */
void tu_download(clf_runtime *rt, clf_ptr p, float *x, size_t n);
void tu_free(clf_ptr p);

/* Whether the native GEMM configuration `name` runs here (a 3x3x3 float32
 * product by it): 1 if so; 0, with a line saying why, when the runtime
 * refuses it as unsupported (a tiling that needs more work-items a group
 * than the device allows the kernel: Mesa's llvmpipe allows 32); any other
 * error exits. */
int tu_gemm_config_runs(clf_runtime *rt, const char *name);

/* Guard zones: x (or only sentinels if x is NULL) in a device array with
 * TU_GUARD sentinel floats on each side; the pointer addresses the first
 * of the n elements. tu_guard_intact is 1 if nothing was written outside
 * [p, p + n). */
#define TU_GUARD 64
clf_ptr tu_guarded(clf_runtime *rt, const float *x, size_t n);
int tu_guard_intact(clf_runtime *rt, clf_ptr p, size_t n);

#endif
