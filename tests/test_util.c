/*
 * test_util.c - see test_util.h.
 */
#include "tests/test_util.h"

#include "runtime/gemm/gemm.h"
#include "runtime/util.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int tu_passed, tu_failed;

void tu_ok(clf_status st, const clf_error *err, const char *what)
{
    if (st == CLF_OK)
        return;
    char buf[CLF_ERROR_MSG_MAX + 1024];
    clf_error_format(err, buf, sizeof buf);
    fprintf(stderr, "FATAL: %s: %s (%s)\n", what, buf, clf_status_name(st));
    exit(1);
}

double tu_row_sums(const float *x, size_t R, size_t N, double *sum)
{
    double worst = 0.0;
    for (size_t r = 0; r < R; r++) {
        double t = 0.0, a = 0.0;
        for (size_t j = 0; j < N; j++) {
            t += x[r * N + j];
            a += fabs(x[r * N + j]);
        }
        sum[r] = t;
        worst = fmax(worst, a);
    }
    return worst;
}

char *tu_read_file(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return NULL;
    long sz = -1;
    if (fseek(f, 0, SEEK_END) == 0)
        sz = ftell(f);
    char *b = sz >= 0 && fseek(f, 0, SEEK_SET) == 0 ? malloc((size_t)sz + 1) : NULL;
    if (b == NULL || fread(b, 1, (size_t)sz, f) != (size_t)sz) {
        free(b);
        fclose(f);
        return NULL;
    }
    fclose(f);
    b[sz] = '\0';
    if (n != NULL)
        *n = (size_t)sz;
    return b;
}

clf_runtime_options tu_options(void)
{
    clf_runtime_options o = clf_runtime_options_default();
    o.device = getenv("CLFORMER_TEST_DEVICE");
    const char *shape = getenv("CLFORMER_SHAPE");
    if (shape != NULL && strcmp(shape, "item") == 0)
        o.shape = CLF_SHAPE_ITEM;
    else if (shape != NULL && strcmp(shape, "group") == 0)
        o.shape = CLF_SHAPE_GROUP;
    if (!clf_binaries_parse(getenv("CLFORMER_KERNEL_BINARIES"), &o.binaries))
        fprintf(stderr, "CLFORMER_KERNEL_BINARIES: expected keep or notes; keeping binaries\n");
    return o;
}

clf_runtime *tu_runtime(void)
{
    clf_runtime_options o = tu_options();
    o.cache_dir = getenv("CLFORMER_CACHE_DIR");
    o.kernel_dir = getenv("CLFORMER_KERNEL_DIR");
    const char *g = getenv("CLFORMER_GEMM");
    if (g != NULL && strcmp(g, "clblast") == 0)
        o.gemm = CLF_GEMM_CLBLAST;
    else if (g != NULL && strcmp(g, "native") == 0)
        o.gemm = CLF_GEMM_NATIVE;
    else if (g != NULL && g[0] != '\0' && strcmp(g, "auto") != 0)
        o.gemm = CLF_GEMM_NATIVE, o.gemm_config = g; /* a configuration by name */
    clf_runtime *rt = NULL;
    clf_error err;
    tu_ok(clf_runtime_create(&rt, &o, &err), &err, "creating the runtime");
    printf("device: %s\n", clf_runtime_device(rt)->name);
    return rt;
}

void tu_char_text(size_t max_bytes, clf_tokenizer **tok, clf_dataset **ds)
{
    char *text = NULL, path[4096];
    size_t len = 0;
    clf_error e;
    const char *src = getenv("CLF_SOURCE_DIR");
    snprintf(path, sizeof path, "%s/data/tinyshakespeare.txt", src ? src : ".");
    tu_ok(clf_dataset_read_text(path, &text, &len, &e), &e, "reading tiny Shakespeare");
    if (len > max_bytes)
        len = max_bytes;
    *tok = NULL;
    *ds = NULL;
    tu_ok(clf_tokenizer_create(CLF_TOKENIZER_CHAR, text, len, tok, &e), &e, "tokenizer");
    tu_ok(clf_dataset_from_text(text, len, "tiny", *tok, ds, &e), &e, "dataset");
    free(text);
}

uint64_t tu_seed(void)
{
    static uint64_t seed;
    static int have;
    if (!have) {
        const char *s = getenv("CLFORMER_TEST_SEED");
        if (s != NULL && *s != '\0') {
            seed = strtoull(s, NULL, 10);
        } else {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            seed = (uint64_t)ts.tv_sec * 1000003u ^ (uint64_t)ts.tv_nsec;
        }
        have = 1;
        printf("seed: %llu (replay with CLFORMER_TEST_SEED=%llu)\n", (unsigned long long)seed,
               (unsigned long long)seed);
    }
    return seed;
}

/* 1 when the environment variable name is "1" (the suite's switches) */
static int env_switch(const char *name)
{
    const char *s = getenv(name);
    return s != NULL && strcmp(s, "1") == 0;
}

int tu_simulator(void) { return env_switch("CLFORMER_TEST_SIMULATOR"); }

int tu_checker(void) { return env_switch("CLFORMER_TEST_CHECKER"); }

int tu_own_shape(void) { return env_switch("CLFORMER_TEST_OWN_SHAPE"); }

char *tu_scratch_path(const char *name, char *buf, size_t cap)
{
    const char *bd = getenv("CLF_BUILD_DIR");
    snprintf(buf, cap, "%s/%ld-%s", bd ? bd : ".", (long)getpid(), name);
    return buf;
}

tu_rng tu_rng_new(uint64_t salt)
{
    tu_rng r;
    uint64_t x = tu_seed() ^ (salt * 0xD1B54A32D192ED03ull);
    r.s = clf_splitmix64_next(&x);
    return r;
}

uint32_t tu_u32(tu_rng *r) { return (uint32_t)(clf_splitmix64_next(&r->s) >> 32); }

double tu_uniform(tu_rng *r, double lo, double hi)
{
    double u = (double)(clf_splitmix64_next(&r->s) >> 11) * (1.0 / 9007199254740992.0);
    return lo + (hi - lo) * u;
}

double tu_normal(tu_rng *r)
{
    double u1 = tu_uniform(r, 1e-300, 1.0), u2 = tu_uniform(r, 0.0, 1.0);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

void tu_fill(tu_rng *r, float *x, size_t n, float lo, float hi)
{
    for (size_t i = 0; i < n; i++)
        x[i] = (float)tu_uniform(r, lo, hi);
}

int tu_close(const char *name, const float *got, const double *ref, size_t n, double atol,
             double rtol)
{
    size_t worst = 0, bad = 0;
    double worst_excess = -1.0;
    for (size_t i = 0; i < n; i++) {
        double g = got[i], r = ref[i];
        int ok;
        double excess;
        if (!isfinite(r) || !isfinite(g)) {
            ok = (isnan(r) && isnan(g)) || (isinf(r) && isinf(g) && (r > 0) == (g > 0));
            excess = ok ? 0.0 : INFINITY;
        } else {
            double tol = atol + rtol * fabs(r);
            excess = fabs(g - r) - tol;
            ok = excess <= 0.0;
        }
        if (!ok)
            bad++;
        if (excess > worst_excess || i == 0) {
            if (excess > worst_excess) {
                worst_excess = excess;
                worst = i;
            }
        }
    }
    if (bad == 0) {
        tu_passed++;
        printf("  ok   %-48s n=%zu (atol %.1e, rtol %.1e)\n", name, n, atol, rtol);
        return 1;
    }
    tu_failed++;
    printf("  FAIL %-48s %zu of %zu elements out of tolerance (atol %.1e, rtol %.1e); "
           "worst at [%zu]: got %.9g, expected %.9g\n",
           name, bad, n, atol, rtol, worst, (double)got[worst], ref[worst]);
    return 0;
}

void tu_check(int cond, const char *file, int line, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (cond) {
        tu_passed++;
        printf("  ok   %s\n", msg);
    } else {
        tu_failed++;
        printf("  FAIL %s:%d: %s\n", file, line, msg);
    }
}

int tu_finish(void)
{
    printf("%d passed, %d failed\n", tu_passed, tu_failed);
    if (tu_passed + tu_failed == 0) {
        printf("no checks ran: treating as a failure\n");
        return 1;
    }
    return tu_failed == 0 ? 0 : 1;
}

static clf_ptr alloc_bytes(clf_runtime *rt, size_t bytes)
{
    clf_ptr p = {NULL, 0};
    clf_error err;
    tu_ok(clf_buffer_create(rt, bytes ? bytes : 4, &p.buf, &err), &err, "allocating a buffer");
    return p;
}

clf_ptr tu_upload(clf_runtime *rt, const float *x, size_t n)
{
    clf_ptr p = alloc_bytes(rt, n * sizeof(float));
    clf_error err;
    if (n)
        tu_ok(clf_ptr_write(rt, p, x, n, &err), &err, "uploading");
    return p;
}

clf_ptr tu_upload_i32(clf_runtime *rt, const int32_t *x, size_t n)
{
    clf_ptr p = alloc_bytes(rt, n * sizeof(int32_t));
    clf_error err;
    if (n)
        tu_ok(clf_buffer_write(rt, p.buf, 0, x, n * sizeof(int32_t), &err), &err, "uploading");
    return p;
}

clf_ptr tu_alloc(clf_runtime *rt, size_t n)
{
    clf_ptr p = alloc_bytes(rt, n * sizeof(float));
    clf_error err;
    if (n)
        tu_ok(clf_ptr_zero(rt, p, n, &err), &err, "zeroing");
    return p;
}

void tu_download(clf_runtime *rt, clf_ptr p, float *x, size_t n)
{
    clf_error err;
    if (n)
        tu_ok(clf_ptr_read(rt, p, x, n, &err), &err, "downloading");
}

void tu_free(clf_ptr p) { clf_buffer_destroy(p.buf); }

#define TU_SENTINEL 1234.5f

clf_ptr tu_guarded(clf_runtime *rt, const float *x, size_t n)
{
    size_t total = n + 2 * TU_GUARD;
    float *t = malloc(total * sizeof *t);
    if (t == NULL) {
        fprintf(stderr, "out of host memory\n");
        exit(1);
    }
    for (size_t i = 0; i < total; i++)
        t[i] = TU_SENTINEL;
    if (x != NULL && n > 0)
        memcpy(t + TU_GUARD, x, n * sizeof *x);
    clf_ptr p = tu_upload(rt, t, total);
    free(t);
    p.off = TU_GUARD;
    return p;
}

int tu_guard_intact(clf_runtime *rt, clf_ptr p, size_t n)
{
    size_t total = n + 2 * TU_GUARD;
    float *t = malloc(total * sizeof *t);
    if (t == NULL) {
        fprintf(stderr, "out of host memory\n");
        exit(1);
    }
    clf_ptr base = {p.buf, p.off - TU_GUARD};
    tu_download(rt, base, t, total);
    int ok = 1;
    for (size_t i = 0; i < TU_GUARD; i++)
        if (t[i] != TU_SENTINEL || t[TU_GUARD + n + i] != TU_SENTINEL)
            ok = 0;
    free(t);
    return ok;
}

double tu_act_ref(int act, double x)
{
    switch (act) {
        case 0: return x;
        case 1: return x > 0 ? x : 0;
        case 2: return 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
        case 3: return 0.5 * x * (1.0 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
        case 4: return x / (1.0 + exp(-x));
        default: return NAN;
    }
}

double tu_act_grad_ref(int act, double x)
{
    const double pi = 3.14159265358979323846;
    switch (act) {
        case 0: return 1.0;
        case 1: return x > 0 ? 1.0 : 0.0;
        case 2: return 0.5 * (1.0 + erf(x / sqrt(2.0))) + x * exp(-0.5 * x * x) / sqrt(2.0 * pi);
        case 3: {
            double k = sqrt(2.0 / pi), t = tanh(k * (x + 0.044715 * x * x * x));
            return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * k * (1.0 + 3.0 * 0.044715 * x * x);
        }
        case 4: {
            double s = 1.0 / (1.0 + exp(-x));
            return s * (1.0 + x * (1.0 - s));
        }
        default: return NAN;
    }
}

double tu_alibi_slope(size_t h, size_t NH)
{
    size_t n = 1;
    while (n * 2 <= NH)
        n *= 2;
    return h < n ? pow(2.0, -8.0 * (double)(h + 1) / (double)n)
                 : pow(2.0, -4.0 * (double)(2 * (h - n) + 1) / (double)n);
}

int tu_gemm_config_runs(clf_runtime *rt, const char *name)
{
    clf_ptr p = tu_alloc(rt, 27);
    clf_gemm_desc d;
    memset(&d, 0, sizeof d);
    d.m = d.n = d.k = 3;
    d.lda = d.ldb = d.ldc = 3;
    d.alpha = 1.0f;
    d.a = p;
    d.b = clf_ptr_at(p, 9);
    d.c = clf_ptr_at(p, 18);
    d.batch = 1;
    clf_error err;
    const clf_status s = clf_gemm_with_config(rt, name, &d, &err);
    if (s == CLF_ERR_UNSUPPORTED)
        printf("configuration %s: unavailable here, not tested (%s)\n", name, err.msg);
    else
        tu_ok(s, &err, name);
    tu_free(p);
    return s == CLF_OK;
}
