/*
 * test_gemm.c - clf_gemm against a float64 reference on random inputs.
 *
 * What is checked
 *   - Both engines explicitly (clf_gemm_with) and through auto (clf_gemm,
 *     clf_gemm_choose): all four transpose combinations at odd shapes
 *     (1x1x1, 7x13x5, 33x65x17, 100x1x300, 257x129x63, ... as MxNxK) that hit
 *     every edge of the native kernel's tiles, with A, B and C at nonzero
 *     offsets inside one shared buffer, leading dimensions larger than the
 *     minimum, and alpha/beta other than 1/0.
 *   - beta == 0 must not read C: C starts as NaN there.
 *   - Elements of C between rows (ldc > n) and around it are never written.
 *   - Strided batches (gaps between matrices, and a zero stride that shares A
 *     or B across the batch).
 *   - k == 0 gives C = beta * C; m == 0 or n == 0 leaves C alone.
 *   - The auto choice is stable, is written to the cache directory, and a
 *     corrupted cache file is ignored and rewritten; once the search's
 *     budget is spent, a class is timed on CLBlast and one configuration.
 *   - Argument errors: lda/ldb/ldc too small, operands past their buffer's
 *     end, overlapping batch outputs, a bad transpose flag, NULL.
 *   - clf_gemm_prepare validates and readies a shape that then runs.
 *   - Epilogues (bias, bias + ReLU / GELU erf / GELU tanh / SiLU into a
 *     second matrix D, a residual D added, an activation's derivative at D
 *     multiplied in) on both engines at shapes taking every native path,
 *     against float64, and on the native engine bit for bit the unfused
 *     GEMM + clf_op_bias_act_forward (+ clf_op_add / clf_op_act_backward);
 *     an activation without D, an epilogue on a batch, a residual without
 *     D, with an activation or into a 16-bit C, a D that is read
 *     overlapping C, a derivative without its activation are refused.
 *   - Split-K (forced: 2, 3, 5 slices) at every transpose, with alpha, beta
 *     and an epilogue (bias + GELU, bias + residual), bit-identical reruns;
 *     a K no P divides runs unsplit.
 *
 * Tolerance: |got - ref| <= atol + rtol |ref| with rtol = 1e-4 and
 * atol = 1e-5 sqrt(K) max(1, |alpha|). Inputs are uniform in [-1, 1]; a
 * float32 dot product of K such terms accumulates a rounding error with a
 * standard deviation of roughly 2^-24 K / 7 (about 1e-6 at K = 300), so the
 * bound sits tens of standard deviations away for every K used here (at most
 * 1500), while any indexing mistake produces errors of order 0.1 to 1.
 */
#include <dirent.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "model/ops/ops.h"
#include "runtime/gemm/gemm.h"
#include "runtime/util.h"
#include "tests/test_util.h"

typedef struct gcase {
    int ta, tb;
    size_t m, n, k;
    size_t batch;
    size_t pad; /* extra leading-dimension elements */
    float alpha, beta;
    int share_a, share_b; /* batch stride 0 */
    size_t k_slice;       /* the descriptor's k_slice */
} gcase;

/* Layout of A, B, C inside one buffer, element offsets and sizes. */
typedef struct glayout {
    size_t lda, ldb, ldc, sa, sb, sc;
    size_t oa, ob, oc;
    size_t na, nb, nc; /* extents from each offset */
    size_t total;
} glayout;

static glayout layout_of(const gcase *g)
{
    glayout L;
    const size_t batch = g->batch > 1 ? g->batch : 1;
    const size_t ar = g->ta ? g->k : g->m, ac = g->ta ? g->m : g->k;
    const size_t br = g->tb ? g->n : g->k, bc = g->tb ? g->k : g->n;
    L.lda = ac + g->pad;
    L.ldb = bc + g->pad + 1;
    L.ldc = g->n + g->pad;
    L.sa = g->share_a ? 0 : ar * L.lda + 3;
    L.sb = g->share_b ? 0 : br * L.ldb + 5;
    L.sc = g->m * L.ldc + 2;
    L.na = (batch - 1) * L.sa + ar * L.lda;
    L.nb = (batch - 1) * L.sb + br * L.ldb;
    L.nc = (batch - 1) * L.sc + g->m * L.ldc;
    L.oa = 7;
    L.ob = L.oa + L.na + 11;
    L.oc = L.ob + L.nb + 13;
    L.total = L.oc + L.nc + 17;
    return L;
}

static clf_gemm_desc desc_of(const gcase *g, const glayout *L, clf_buffer *buf)
{
    clf_gemm_desc d;
    memset(&d, 0, sizeof d);
    d.trans_a = g->ta;
    d.trans_b = g->tb;
    d.m = g->m;
    d.n = g->n;
    d.k = g->k;
    d.alpha = g->alpha;
    d.beta = g->beta;
    d.a = (clf_ptr){buf, L->oa};
    d.lda = L->lda;
    d.b = (clf_ptr){buf, L->ob};
    d.ldb = L->ldb;
    d.c = (clf_ptr){buf, L->oc};
    d.ldc = L->ldc;
    d.batch = g->batch;
    d.stride_a = L->sa;
    d.stride_b = L->sb;
    d.stride_c = L->sc;
    d.k_slice = g->k_slice;
    return d;
}

/* The whole buffer after the GEMM, in float64: everything but the C
 * matrices is unchanged. */
static void reference(const gcase *g, const glayout *L, const float *in, double *out)
{
    const size_t batch = g->batch > 1 ? g->batch : 1;
    for (size_t i = 0; i < L->total; i++)
        out[i] = in[i];
    for (size_t z = 0; z < batch; z++) {
        const float *A = in + L->oa + z * L->sa;
        const float *B = in + L->ob + z * L->sb;
        const float *C = in + L->oc + z * L->sc;
        double *O = out + L->oc + z * L->sc;
        for (size_t i = 0; i < g->m; i++)
            for (size_t j = 0; j < g->n; j++) {
                double s = 0.0;
                for (size_t p = 0; p < g->k; p++) {
                    double a = g->ta ? A[p * L->lda + i] : A[i * L->lda + p];
                    double b = g->tb ? B[j * L->ldb + p] : B[p * L->ldb + j];
                    s += a * b;
                }
                double c = g->beta != 0.0f ? (double)g->beta * C[i * L->ldc + j] : 0.0;
                O[i * L->ldc + j] = (double)g->alpha * s + c;
            }
    }
}

/* who: "auto" through clf_gemm (the runtime's engine option), "native" or
 * "clblast" through clf_gemm_with, else a configuration's name through
 * clf_gemm_with_config. */
static clf_status gemm_by(clf_runtime *rt, const char *who, const clf_gemm_desc *d, clf_error *err)
{
    if (strcmp(who, "auto") == 0)
        return clf_gemm(rt, d, err);
    if (strcmp(who, "native") == 0)
        return clf_gemm_with(rt, CLF_GEMM_NATIVE, d, err);
    if (strcmp(who, "clblast") == 0)
        return clf_gemm_with(rt, CLF_GEMM_CLBLAST, d, err);
    return clf_gemm_with_config(rt, who, d, err);
}

static void run_case(clf_runtime *rt, const char *who, const gcase *g, tu_rng *r)
{
    const glayout L = layout_of(g);
    float *host = malloc(L.total * sizeof(float));
    float *got = malloc(L.total * sizeof(float));
    double *ref = malloc(L.total * sizeof(double));
    if (host == NULL || got == NULL || ref == NULL) {
        fprintf(stderr, "FATAL: out of memory\n");
        exit(1);
    }
    tu_fill(r, host, L.total, -1.0f, 1.0f);
    if (g->beta == 0.0f) /* C must not be read: poison it */
        for (size_t i = L.oc; i < L.oc + L.nc; i++)
            host[i] = NAN;
    reference(g, &L, host, ref);
    clf_ptr p = tu_upload(rt, host, L.total);
    clf_gemm_desc d = desc_of(g, &L, p.buf);
    clf_error err;
    clf_status st = gemm_by(rt, who, &d, &err);
    char name[160];
    char slice[48] = "";
    if (g->k_slice == SIZE_MAX)
        snprintf(slice, sizeof slice, " K in one pass");
    else if (g->k_slice > 0)
        snprintf(slice, sizeof slice, " K slices of %zu", g->k_slice);
    snprintf(name, sizeof name, "%s %s%s %zux%zux%zu b%zu%s%s pad%zu a%g b%g%s", who,
             g->ta ? "T" : "N", g->tb ? "T" : "N", g->m, g->n, g->k, g->batch,
             g->share_a ? " A-shared" : "", g->share_b ? " B-shared" : "", g->pad, (double)g->alpha,
             (double)g->beta, slice);
    if (st != CLF_OK) {
        char buf[CLF_ERROR_MSG_MAX + 256];
        clf_error_format(&err, buf, sizeof buf);
        TU_CHECK(0, "%s: clf_gemm failed: %s", name, buf);
    } else {
        tu_download(rt, p, got, L.total);
        const double atol = 1e-5 * sqrt((double)(g->k > 0 ? g->k : 1)) *
                            (fabs(g->alpha) > 1.0 ? fabs(g->alpha) : 1.0);
        tu_close(name, got, ref, L.total, atol, 1e-4);
    }
    tu_free(p);
    free(host);
    free(got);
    free(ref);
}

static const size_t
    shapes[][3] =
        {
            /* M, N, K */
            {1, 1, 1},      {7, 13, 5},     {33, 65, 17}, {100, 1, 300},
            {257, 129, 63}, {1, 200, 70},   {64, 48, 1},  {70, 97, 129},
            {16, 16, 1000}, {40, 50, 1500}, /* deeper than K_SLICE_FROM: the native engine slices K */
};

/* Under a simulator (tu_simulator) the shapes that keep its run short: every
 * path (tails, one row, one column, K sliced) at small sizes. */
static const size_t sim_shapes[][3] = {
    /* M, N, K */
    {1, 1, 1}, {7, 13, 5}, {33, 65, 17}, {9, 1, 30}, {1, 20, 7}, {5, 7, 1100},
};

/* light: the first two simulator shapes, one batch case and k == 0 (the
 * simulator's check of a configuration other than the default). */
static void test_engine(clf_runtime *rt, const char *e, int light, tu_rng *r)
{
    printf("engine %s: transposes x shapes\n", e);
    const float ab[][2] = {{1.5f, 0.5f}, {1.0f, 0.0f}, {-0.75f, 1.0f}, {2.0f, -1.25f}};
    const int sim = tu_simulator() || light;
    const size_t(*list)[3] = sim ? sim_shapes : shapes;
    const size_t n_list = light ? 2
                          : sim ? sizeof sim_shapes / sizeof sim_shapes[0]
                                : sizeof shapes / sizeof shapes[0];
    int v = 0;
    for (size_t s = 0; s < n_list; s++)
        for (int t = 0; t < 4; t++, v++) {
            /* the deep-K slices are the register-blocked kernels' path; a
             * tiled configuration's 1100-deep product costs the simulator
             * minutes and checks nothing the shallower ones do not */
            if (sim && list[s][2] > 1000 && e[0] == 't')
                continue;
            gcase g = {.ta = t & 1,
                       .tb = t >> 1,
                       .m = list[s][0],
                       .n = list[s][1],
                       .k = list[s][2],
                       .batch = 1,
                       .pad = (size_t)(v % 3) * 3,
                       .alpha = ab[v % 4][0],
                       .beta = ab[v % 4][1]};
            run_case(rt, e, &g, r);
            /* a deep product in the register-blocked kernels' other K
             * slicings: one pass, and slices of an uneven depth */
            if (g.k > 1000 && e[0] != 't' && e[0] != 'c') {
                g.k_slice = SIZE_MAX;
                run_case(rt, e, &g, r);
                g.k_slice = g.k / 3 + 1;
                run_case(rt, e, &g, r);
            }
        }
    printf("engine %s: strided batches\n", e);
    for (int t = 0; t < 4; t++) {
        gcase g = {.ta = t & 1,
                   .tb = t >> 1,
                   .m = 33,
                   .n = 20,
                   .k = 17,
                   .batch = 3,
                   .pad = 1,
                   .alpha = 0.5f,
                   .beta = 1.5f};
        run_case(rt, e, &g, r);
        if (light)
            continue;
        gcase h = {.ta = t & 1,
                   .tb = t >> 1,
                   .m = 70,
                   .n = 50,
                   .k = 9,
                   .batch = 4,
                   .pad = 0,
                   .alpha = 1.0f,
                   .beta = 0.0f};
        run_case(rt, e, &h, r);
    }
    gcase nd = {.tb = 1,
                .m = 9,
                .n = 50,
                .k = 40,
                .batch = 3,
                .pad = 2,
                .alpha = 1.0f,
                .beta = 0.5f}; /* few rows, B transposed: the native dot-product path */
    if (!light)
        run_case(rt, e, &nd, r);
    gcase sa = {.m = 65, .n = 31, .k = 12, .batch = 3, .alpha = 1.0f, .beta = 0.25f, .share_a = 1};
    if (!light)
        run_case(rt, e, &sa, r);
    gcase sb = {.ta = 1,
                .tb = 1,
                .m = 9,
                .n = 50,
                .k = 12,
                .batch = 5,
                .alpha = 1.0f,
                .beta = 0.0f,
                .share_b = 1};
    if (!light)
        run_case(rt, e, &sb, r);
    printf("engine %s: k == 0 and empty products\n", e);
    gcase k0 = {.m = 19, .n = 53, .k = 0, .batch = 2, .pad = 2, .alpha = 1.0f, .beta = -0.5f};
    run_case(rt, e, &k0, r);
    gcase k0z = {.ta = 1, .m = 5, .n = 3, .k = 0, .batch = 1, .alpha = 1.0f, .beta = 0.0f};
    run_case(rt, e, &k0z, r);
    gcase m0 = {.m = 0, .n = 5, .k = 3, .batch = 1, .alpha = 1.0f, .beta = 0.0f};
    run_case(rt, e, &m0, r);
    gcase n0 = {.m = 4, .n = 0, .k = 3, .batch = 1, .alpha = 1.0f, .beta = 0.0f};
    run_case(rt, e, &n0, r);
}

static void expect_arg_error(clf_runtime *rt, const clf_gemm_desc *d, const char *needle,
                             const char *what)
{
    clf_error err;
    memset(&err, 0, sizeof err);
    clf_status st = clf_gemm_with(rt, CLF_GEMM_NATIVE, d, &err);
    TU_CHECK(st == CLF_ERR_ARG && strstr(err.msg, needle) != NULL, "%s -> CLF_ERR_ARG (%s)", what,
             st == CLF_OK ? "accepted" : err.msg);
}

static void test_validation(clf_runtime *rt)
{
    printf("argument validation\n");
    clf_ptr p = tu_alloc(rt, 1000);
    clf_gemm_desc ok = {.m = 10,
                        .n = 10,
                        .k = 10,
                        .alpha = 1.0f,
                        .a = {p.buf, 0},
                        .lda = 10,
                        .b = {p.buf, 100},
                        .ldb = 10,
                        .c = {p.buf, 200},
                        .ldc = 10};
    clf_error err;
    TU_CHECK(clf_gemm_with(rt, CLF_GEMM_NATIVE, &ok, &err) == CLF_OK, "a valid call passes");
    clf_gemm_desc d = ok;
    d.lda = 9;
    expect_arg_error(rt, &d, "lda=9", "lda below k");
    d = ok;
    d.trans_a = 1;
    d.m = 12;
    d.lda = 11;
    expect_arg_error(rt, &d, "lda=11", "transposed A with lda below m");
    d = ok;
    d.ldb = 3;
    expect_arg_error(rt, &d, "ldb=3", "ldb below n");
    d = ok;
    d.trans_b = 1;
    d.k = 12;
    d.lda = 12;
    d.ldb = 11;
    expect_arg_error(rt, &d, "ldb=11", "transposed B with ldb below k");
    d = ok;
    d.ldc = 5;
    expect_arg_error(rt, &d, "ldc=5", "ldc below n");
    d = ok;
    d.c.off = 950;
    expect_arg_error(rt, &d, "past the end", "C past the buffer's end");
    d = ok;
    d.b.off = 901;
    expect_arg_error(rt, &d, "B (", "B past the buffer's end");
    d = ok;
    d.batch = 3;
    d.stride_a = 0;
    d.stride_b = 0;
    d.stride_c = 50;
    expect_arg_error(rt, &d, "stride_c=50", "overlapping batch outputs");
    d.stride_c = 400; /* 200 + 2 * 400 + 100 > 1000 */
    expect_arg_error(rt, &d, "past the end", "batch reaching past the buffer");
    d = ok;
    d.trans_a = 2;
    expect_arg_error(rt, &d, "trans_a=2", "a bad transpose flag");
    d = ok;
    d.a.buf = NULL;
    expect_arg_error(rt, &d, "A buffer is NULL", "a NULL A");
    TU_CHECK(clf_gemm(rt, NULL, &err) == CLF_ERR_ARG, "a NULL descriptor -> CLF_ERR_ARG");
    clf_gemm_engine e;
    d = ok;
    d.ldc = 1;
    TU_CHECK(clf_gemm_choose(rt, &d, &e, &err) == CLF_ERR_ARG, "clf_gemm_choose validates too");
    tu_free(p);
}

/* Path of the one gemm-*.txt choice file in dir, or "" if none. */
static void find_choice_file(const char *dir, char *out, size_t cap)
{
    out[0] = '\0';
    DIR *dp = opendir(dir);
    if (dp == NULL)
        return;
    struct dirent *de;
    while ((de = readdir(dp)) != NULL) {
        size_t n = strlen(de->d_name);
        if (strncmp(de->d_name, "gemm-", 5) == 0 && n > 4 &&
            strcmp(de->d_name + n - 4, ".txt") == 0) {
            snprintf(out, cap, "%s/%s", dir, de->d_name);
            break;
        }
    }
    closedir(dp);
}

/* budget: the GEMM search's seconds */
static clf_runtime *runtime_with_budget(const char *dir, double budget)
{
    clf_runtime_options o = clf_runtime_options_default();
    o.device = getenv("CLFORMER_TEST_DEVICE");
    o.cache_dir = dir;
    o.gemm = CLF_GEMM_AUTO;
    o.gemm_search_budget = budget;
    clf_runtime *rt = NULL;
    clf_error err;
    tu_ok(clf_runtime_create(&rt, &o, &err), &err, "creating a runtime with a cache dir");
    return rt;
}

/* The budget unbounded: these checks count the classes saved, and compiling
 * every configuration cold takes most of the default minute on some
 * runtimes (Intel's CPU runtime: 5-8 s each). */
static clf_runtime *runtime_with_cache(const char *dir) { return runtime_with_budget(dir, 1e6); }

/* Lines after the first two of a choice file; those two into head and
 * cands ("" if missing). -1 if the file cannot be read. */
static int count_lines(const char *path, char *head, char *cands)
{
    head[0] = cands[0] = '\0';
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return -1;
    char line[CLF_ERROR_MSG_MAX];
    int lines = 0;
    if (fgets(head, CLF_ERROR_MSG_MAX, f) != NULL && fgets(cands, CLF_ERROR_MSG_MAX, f) != NULL)
        while (fgets(line, sizeof line, f) != NULL)
            lines++;
    fclose(f);
    return lines;
}

/* Remove path: a file or link, or a directory of files. */
static void remove_tree_files(const char *path)
{
    struct stat sb;
    if (lstat(path, &sb) != 0)
        return;
    if (S_ISDIR(sb.st_mode)) {
        DIR *dp = opendir(path);
        struct dirent *de;
        char f[2048];
        while (dp != NULL && (de = readdir(dp)) != NULL)
            if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0) {
                snprintf(f, sizeof f, "%s/%s", path, de->d_name);
                remove(f);
            }
        if (dp != NULL)
            closedir(dp);
        rmdir(path);
    } else {
        unlink(path);
    }
}

/* Rewrite the choice file's line for the class timed at m x n x k: its
 * winner set to `winner`, its one-pass flag to `whole` (times kept). 0 if
 * no such line. */
static int rewrite_choice(const char *path, size_t m, size_t n, size_t k, const char *winner,
                          unsigned whole)
{
    enum { MAX_LINES = 64, LINE = 1024 };
    static char lines[MAX_LINES][LINE];
    int nl = 0, hit = 0;
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return 0;
    while (nl < MAX_LINES && fgets(lines[nl], LINE, f) != NULL)
        nl++;
    fclose(f);
    if ((f = fopen(path, "w")) == NULL)
        return 0;
    for (int i = 0; i < nl; i++) {
        unsigned v[6], w;
        size_t dims[4];
        char win[64];
        int used = -1;
        if (i < 2 ||
            sscanf(lines[i], "%u %u %u %u %u %u %zu %zu %zu %zu %63s %u%n", &v[0], &v[1], &v[2],
                   &v[3], &v[4], &v[5], &dims[0], &dims[1], &dims[2], &dims[3], win, &w,
                   &used) != 12 ||
            used < 0 || dims[0] != m || dims[1] != n || dims[2] != k) {
            fputs(lines[i], f);
            continue;
        }
        fprintf(f, "%u %u %u %u %u %u %zu %zu %zu %zu %s %u%s", v[0], v[1], v[2], v[3], v[4], v[5],
                dims[0], dims[1], dims[2], dims[3], winner, whole, lines[i] + used);
        hit = 1;
    }
    return fclose(f) == 0 && hit;
}

/* C of g after one GEMM from host's values: by configuration `who` with
 * the descriptor's k_slice set to k_slice, or (who NULL) by clf_gemm. */
static void gemm_once(clf_runtime *rt, const char *who, size_t k_slice, const gcase *g,
                      const glayout *L, const float *host, float *out)
{
    clf_ptr p = tu_upload(rt, host, L->total);
    clf_gemm_desc d = desc_of(g, L, p.buf);
    d.k_slice = k_slice;
    clf_error err;
    tu_ok(who != NULL ? clf_gemm_with_config(rt, who, &d, &err) : clf_gemm(rt, &d, &err), &err,
          "gemm");
    tu_download(rt, p, out, L->total);
    tu_free(p);
}

/* A deep product's K slicing as its class's choice says: the class searched
 * and saved, then its line made to name the first native configuration and
 * one pass (then slices): auto runs bit for bit as that configuration with
 * k_slice SIZE_MAX (then 0), and the table reports the flag. The two
 * slicings must round differently at this shape, or the check would prove
 * nothing. A flag other than 0 or 1 makes the file corrupt. */
static void test_one_pass_choice(const char *dir, const char *path, tu_rng *r)
{
    const gcase g = {.ta = 1, .m = 40, .n = 50, .k = 1500, .batch = 1, .alpha = 1.0f, .beta = 0.5f};
    const glayout L = layout_of(&g);
    float *host = malloc(L.total * sizeof(float));
    float *ref[2] = {malloc(L.total * sizeof(float)), malloc(L.total * sizeof(float))};
    float *got = malloc(L.total * sizeof(float));
    if (host == NULL || ref[0] == NULL || ref[1] == NULL || got == NULL) {
        fprintf(stderr, "FATAL: out of memory\n");
        exit(1);
    }
    tu_fill(r, host, L.total, -1.0f, 1.0f);
    clf_runtime *rt = runtime_with_cache(dir);
    const char *const *names = NULL;
    size_t count = 0;
    clf_error err;
    tu_ok(clf_gemm_candidates(rt, &names, &count, NULL, &err), &err, "candidates");
    char first[64];
    snprintf(first, sizeof first, "%s", names[1]);
    gemm_once(rt, NULL, 0, &g, &L, host, got); /* searches and saves the class */
    gemm_once(rt, first, 0, &g, &L, host, ref[0]);
    gemm_once(rt, first, SIZE_MAX, &g, &L, host, ref[1]);
    clf_runtime_destroy(rt);
    TU_CHECK(memcmp(ref[0], ref[1], L.total * sizeof(float)) != 0,
             "%s %zux%zux%zu: slices and one pass round differently", first, g.m, g.n, g.k);
    for (unsigned whole = 0; whole < 2; whole++) {
        TU_CHECK(rewrite_choice(path, g.m, g.n, g.k, first, 1 - whole),
                 "the class's line rewritten (one pass %u)", 1 - whole);
        rt = runtime_with_cache(dir);
        gemm_once(rt, NULL, 0, &g, &L, host, got);
        clf_gemm_tuned rows[8];
        size_t nrows = 0;
        int flag = -1;
        tu_ok(clf_gemm_tuning(rt, rows, 8, &nrows, &err), &err, "tuning table");
        for (size_t i = 0; i < nrows; i++)
            if (rows[i].k == g.k)
                flag = rows[i].k_whole;
        clf_runtime_destroy(rt);
        TU_CHECK(memcmp(got, ref[1 - whole], L.total * sizeof(float)) == 0 &&
                     flag == (int)(1 - whole),
                 "auto runs the saved choice's K slicing: %s, bit for bit (table flag %d)",
                 whole ? "slices" : "one pass", flag);
    }
    char head[CLF_ERROR_MSG_MAX], cands[CLF_ERROR_MSG_MAX];
    TU_CHECK(rewrite_choice(path, g.m, g.n, g.k, first, 2), "the class's line given flag 2");
    rt = runtime_with_cache(dir);
    clf_gemm_tuned rows[8];
    size_t nrows = 9;
    tu_ok(clf_gemm_tuning(rt, rows, 8, &nrows, &err), &err, "tuning table");
    clf_runtime_destroy(rt);
    TU_CHECK(nrows == 0 && count_lines(path, head, cands) == 0,
             "a one-pass flag of 2 makes the file corrupt: ignored and rewritten (%zu rows)",
             nrows);
    free(host);
    free(ref[0]);
    free(ref[1]);
    free(got);
}

static void test_auto_cache(tu_rng *r)
{
    printf("auto choice and its cache file\n");
    char dir[] = "/tmp/clf_test_gemm_XXXXXX";
    if (mkdtemp(dir) == NULL) {
        TU_CHECK(0, "mkdtemp failed");
        return;
    }
    /* the choices in a directory of their own; the compiled kernels shared
     * with the other tests (compiling every configuration again costs
     * minutes on some runtimes) */
    char kdir[1100] = "", klink[1100];
    const char *shared = getenv("CLFORMER_CACHE_DIR");
    snprintf(klink, sizeof klink, "%s/kernels", dir);
    if (shared != NULL && shared[0] != '\0') {
        snprintf(kdir, sizeof kdir, "%s/kernels", shared);
        if (kdir[0] != '/') { /* relative to the working directory */
            char cwd[512];
            if (getcwd(cwd, sizeof cwd) != NULL)
                snprintf(kdir, sizeof kdir, "%s/%s/kernels", cwd, shared);
        }
        mkdir(shared, 0755);
        mkdir(kdir, 0755);
        if (symlink(kdir, klink) != 0)
            kdir[0] = '\0';
    }
    clf_runtime *rt = runtime_with_cache(dir);
    gcase g = {.m = 96, .n = 80, .k = 64, .batch = 1, .alpha = 1.0f, .beta = 0.5f};
    run_case(rt, "auto", &g, r);
    gcase gt = {
        .ta = 1, .tb = 1, .m = 40, .n = 72, .k = 33, .batch = 2, .alpha = 1.0f, .beta = 0.0f};
    run_case(rt, "auto", &gt, r);
    const glayout L = layout_of(&g);
    clf_ptr p = tu_alloc(rt, L.total);
    clf_gemm_desc d = desc_of(&g, &L, p.buf);
    clf_error err;
    clf_gemm_engine e1 = CLF_GEMM_AUTO, e2 = CLF_GEMM_AUTO;
    tu_ok(clf_gemm_choose(rt, &d, &e1, &err), &err, "choosing");
    tu_ok(clf_gemm_choose(rt, &d, &e2, &err), &err, "choosing again");
    TU_CHECK(e1 == e2 && (e1 == CLF_GEMM_CLBLAST || e1 == CLF_GEMM_NATIVE),
             "auto picks an engine and keeps it (%s)", clf_gemm_engine_name(e1));
    tu_free(p);
    clf_runtime_destroy(rt);

    char path[1024];
    find_choice_file(dir, path, sizeof path);
    TU_CHECK(path[0] != '\0', "the choice is written to the cache directory");
    if (path[0] != '\0') {
        char head[CLF_ERROR_MSG_MAX], cands[CLF_ERROR_MSG_MAX];
        int lines = count_lines(path, head, cands);
        TU_CHECK(strncmp(head, "clformer-gemm-choices", 21) == 0 &&
                     strncmp(cands, "candidates clblast ", 19) == 0 && lines == 2,
                 "the cache file has a header, the candidates and one line per shape class "
                 "(%d)",
                 lines);
        /* a new runtime reads the choices back: its table matches the file */
        rt = runtime_with_cache(dir);
        clf_gemm_tuned rows[8];
        size_t nrows = 0;
        const char *const *names = NULL;
        size_t count = 0;
        clf_error err2;
        tu_ok(clf_gemm_tuning(rt, rows, 8, &nrows, &err2), &err2, "tuning table");
        tu_ok(clf_gemm_candidates(rt, &names, &count, NULL, &err2), &err2, "candidates");
        int sane = nrows == 2;
        for (size_t i = 0; i < nrows; i++)
            sane &= rows[i].winner < count && rows[i].seconds[rows[i].winner] >= 0 && rows[i].k > 0;
        TU_CHECK(sane, "the table read back: 2 classes, each winner timed (%zu rows)", nrows);
        const char *picked = NULL;
        clf_ptr p2 = tu_alloc(rt, L.total);
        clf_gemm_desc d2 = desc_of(&g, &L, p2.buf);
        tu_ok(clf_gemm_choice(rt, &d2, &picked, &err2), &err2, "choice");
        TU_CHECK(nrows > 0 && picked != NULL && strcmp(picked, names[rows[0].winner]) == 0,
                 "clf_gemm_choice names the saved winner (%s)", picked ? picked : "none");
        tu_free(p2);
        clf_runtime_destroy(rt);
        /* corrupt it: a new runtime must ignore it, still work, and rewrite it */
        FILE *f = fopen(path, "w");
        if (f != NULL) {
            fprintf(f, "clformer-gemm-choices 4\n%sgarbage\xff\n", cands);
            fclose(f);
        }
        rt = runtime_with_cache(dir);
        run_case(rt, "auto", &g, r);
        clf_runtime_destroy(rt);
        char head2[CLF_ERROR_MSG_MAX], cands2[CLF_ERROR_MSG_MAX];
        lines = count_lines(path, head2, cands2);
        TU_CHECK(strcmp(head2, head) == 0 && strcmp(cands2, cands) == 0 && lines == 1,
                 "a corrupt cache file is ignored and rewritten (%d lines)", lines);
        /* stale: made for another candidate list (an older clformer, or
         * another build's configurations): ignored and rewritten too */
        f = fopen(path, "w");
        if (f != NULL) {
            fprintf(f, "clformer-gemm-choices 4\ncandidates clblast r1v1x1\n"
                       "0 0 6 6 6 0 96 80 64 1 r1v1x1 0 1e-3 1e-4\n");
            fclose(f);
        }
        rt = runtime_with_cache(dir);
        run_case(rt, "auto", &g, r);
        clf_runtime_destroy(rt);
        lines = count_lines(path, head2, cands2);
        TU_CHECK(strcmp(cands2, cands) == 0 && lines == 1,
                 "a stale cache file (other candidates) is ignored and rewritten (%d lines)",
                 lines);
        test_one_pass_choice(dir, path, r);
        /* a budget spent by the first class: the second is timed on CLBlast
         * and the first native configuration only; both are saved */
        remove(path);
        rt = runtime_with_budget(dir, 1e-9);
        const double w0 = clf_now_seconds();
        run_case(rt, "auto", &g, r);
        const double wall = clf_now_seconds() - w0;
        double timing = -1.0, setup = -1.0;
        tu_ok(clf_gemm_search_seconds(rt, &timing, &setup, &err2), &err2, "search seconds");
        /* the budget meters the timed runs; the first runs (building
         * kernels) are counted apart, and both fit in the call */
        TU_CHECK(timing > 0.0 && setup > 0.0 && timing + setup <= wall,
                 "the search's seconds: timing %.4f and first runs %.4f, apart, within the call's "
                 "%.4f",
                 timing, setup, wall);
        run_case(rt, "auto", &gt, r);
        size_t n_search = 0;
        tu_ok(clf_gemm_tuning(rt, rows, 8, &nrows, &err2), &err2, "tuning table");
        tu_ok(clf_gemm_candidates(rt, &names, &count, &n_search, &err2), &err2, "candidates");
        int first_full = 0, second_partial = 1;
        for (size_t i = 0; i < nrows; i++)
            for (size_t j = 2; j < n_search; j++) {
                if (rows[i].k == g.k)
                    first_full |= rows[i].seconds[j] >= 0;
                else
                    second_partial &= rows[i].seconds[j] < 0;
            }
        clf_runtime_destroy(rt);
        lines = count_lines(path, head2, cands2);
        TU_CHECK(nrows == 2 && (n_search < 3 || (first_full && second_partial)) && lines == 2,
                 "a spent search budget: the first class timed on every candidate, the next on "
                 "CLBlast and the first configuration only, both saved (%zu classes, %d lines)",
                 nrows, lines);
        remove(path);
    }
    remove_tree_files(klink); /* the link, or a directory the runtime made */
    rmdir(dir);
}

/* The activation's derivative stored by the forward (c_act_grad) and
 * multiplied in by the backward (mul_d), as a training model's FFN uses
 * them: for every activation, at a shape with edges and (register-blocked
 * engines) a deep one run in K slices, against float64 (C = act'(o), D =
 * act(o); then C = (G W) act'(o)), and bit for bit what the same GEMMs give
 * with the pre-activation kept (act_grad recomputing the derivative): D
 * the same, the backward's C the same. Refusals: c_act_grad without an
 * activation or with act_grad, mul_d with an activation or without D. */
static void test_stored_derivative(clf_runtime *rt, const char *engine, int light, tu_rng *r)
{
    static const size_t shapes[][3] = {{33, 65, 17}, {64, 96, 2000}};
    const clf_gemm_act acts[] = {CLF_GEMM_ACT_RELU, CLF_GEMM_ACT_GELU_ERF, CLF_GEMM_ACT_GELU_TANH,
                                 CLF_GEMM_ACT_SILU};
    clf_error e;
    for (size_t si = 0; si < 2; si++)
        for (size_t ai = 0; ai < 4; ai++) {
            const size_t m = shapes[si][0], n = shapes[si][1], k = shapes[si][2];
            const clf_gemm_act act = acts[ai];
            if ((tu_simulator() || light) && (m * n * k > 40000 || act != CLF_GEMM_ACT_GELU_ERF))
                continue;
            /* forward: X [m, k] W^T (W [n, k]) + bias; backward: G [m, n2] V
             * (V [n2, n]) times the derivative, n2 = 24 */
            const size_t n2 = 24;
            float *X = malloc(m * k * 4), *W = malloc(n * k * 4), *bias = malloc(n * 4);
            float *G = malloc(m * n2 * 4), *V = malloc(n2 * n * 4);
            float *c1 = malloc(m * n * 4), *c2 = malloc(m * n * 4), *d1 = malloc(m * n * 4);
            float *d2 = malloc(m * n * 4), *x1 = malloc(m * n * 4), *x2 = malloc(m * n * 4);
            double *rc = malloc(m * n * 8), *rd = malloc(m * n * 8), *rx = malloc(m * n * 8);
            tu_fill(r, X, m * k, -1, 1);
            tu_fill(r, W, n * k, -0.1f, 0.1f);
            tu_fill(r, bias, n, -1, 1);
            tu_fill(r, G, m * n2, -1, 1);
            tu_fill(r, V, n2 * n, -1, 1);
            clf_ptr dX = tu_upload(rt, X, m * k), dW = tu_upload(rt, W, n * k);
            clf_ptr db = tu_upload(rt, bias, n), dG = tu_upload(rt, G, m * n2);
            clf_ptr dV = tu_upload(rt, V, n2 * n);
            clf_ptr C1 = tu_alloc(rt, m * n), C2 = tu_alloc(rt, m * n), D = tu_alloc(rt, m * n);
            clf_ptr B = tu_alloc(rt, m * n);
            clf_gemm_desc f = {.trans_b = 1,
                               .m = m,
                               .n = n,
                               .k = k,
                               .alpha = 1.0f,
                               .a = dX,
                               .lda = k,
                               .b = dW,
                               .ldb = k,
                               .c = C1,
                               .ldc = n,
                               .bias = db,
                               .act = act,
                               .d = D,
                               .ldd = n};
            tu_ok(gemm_by(rt, engine, &f, &e), &e, "forward, pre-activation kept");
            tu_download(rt, C1, c1, m * n);
            tu_download(rt, D, d1, m * n);
            f.c = C2;
            f.c_act_grad = 1;
            tu_ok(gemm_by(rt, engine, &f, &e), &e, "forward, derivative kept");
            tu_download(rt, C2, c2, m * n);
            tu_download(rt, D, d2, m * n);
            clf_gemm_desc b = {.m = m,
                               .n = n,
                               .k = n2,
                               .alpha = 1.0f,
                               .a = dG,
                               .lda = n2,
                               .b = dV,
                               .ldb = n,
                               .c = B,
                               .ldc = n,
                               .act = act,
                               .act_grad = 1,
                               .d = C1,
                               .ldd = n};
            tu_ok(gemm_by(rt, engine, &b, &e), &e, "backward, derivative recomputed");
            tu_download(rt, B, x1, m * n);
            b.act = CLF_GEMM_ACT_NONE;
            b.act_grad = 0;
            b.mul_d = 1;
            b.d = C2;
            tu_ok(gemm_by(rt, engine, &b, &e), &e, "backward, derivative stored");
            tu_download(rt, B, x2, m * n);
            for (size_t i = 0; i < m; i++)
                for (size_t j = 0; j < n; j++) {
                    double o = bias[j], g = 0.0;
                    for (size_t q = 0; q < k; q++)
                        o += (double)X[i * k + q] * W[j * k + q];
                    for (size_t q = 0; q < n2; q++)
                        g += (double)G[i * n2 + q] * V[q * n + j];
                    rc[i * n + j] = tu_act_grad_ref((int)act, o);
                    rd[i * n + j] = tu_act_ref((int)act, o);
                    rx[i * n + j] = g * rc[i * n + j];
                }
            char name[160];
            const double atol = 1e-5 * sqrt((double)k) + 1e-6;
            snprintf(name, sizeof name, "%s stored derivative act=%d m=%zu n=%zu k=%zu: C", engine,
                     (int)act, m, n, k);
            tu_close(name, c2, rc, m * n, atol, 1e-4);
            name[strlen(name) - 1] = 'D';
            tu_close(name, d2, rd, m * n, atol, 1e-4);
            snprintf(name, sizeof name,
                     "%s stored derivative act=%d m=%zu n=%zu k=%zu: the backward's C", engine,
                     (int)act, m, n, k);
            tu_close(name, x2, rx, m * n, 1e-5 * sqrt((double)n2) + 1e-6, 1e-4);
            TU_CHECK(memcmp(d1, d2, m * n * 4) == 0 && memcmp(x1, x2, m * n * 4) == 0,
                     "%s act=%d %zux%zux%zu: D and the backward's C bit for bit those of the "
                     "derivative recomputed from the kept pre-activation",
                     engine, (int)act, m, n, k);
            tu_free(dX), tu_free(dW), tu_free(db), tu_free(dG), tu_free(dV);
            tu_free(C1), tu_free(C2), tu_free(D), tu_free(B);
            free(X), free(W), free(bias), free(G), free(V), free(c1), free(c2), free(d1);
            free(d2), free(x1), free(x2), free(rc), free(rd), free(rx);
        }
    clf_ptr x = tu_alloc(rt, 64);
    clf_gemm_desc bad = {.m = 4,
                         .n = 4,
                         .k = 4,
                         .alpha = 1.0f,
                         .a = x,
                         .b = x,
                         .c = x,
                         .lda = 4,
                         .ldb = 4,
                         .ldc = 4,
                         .d = clf_ptr_at(x, 32),
                         .ldd = 4,
                         .c_act_grad = 1};
    TU_CHECK(gemm_by(rt, engine, &bad, &e) == CLF_ERR_ARG && strstr(e.msg, "c_act_grad") != NULL,
             "c_act_grad without an activation is refused: %s", e.msg);
    bad.act = CLF_GEMM_ACT_GELU_ERF;
    bad.act_grad = 1;
    TU_CHECK(gemm_by(rt, engine, &bad, &e) == CLF_ERR_ARG && strstr(e.msg, "c_act_grad") != NULL,
             "c_act_grad with act_grad is refused: %s", e.msg);
    bad.c_act_grad = bad.act_grad = 0;
    bad.mul_d = 1;
    TU_CHECK(gemm_by(rt, engine, &bad, &e) == CLF_ERR_ARG && strstr(e.msg, "mul_d") != NULL,
             "mul_d with an activation is refused: %s", e.msg);
    bad.act = CLF_GEMM_ACT_NONE;
    bad.d = (clf_ptr){NULL, 0};
    TU_CHECK(gemm_by(rt, engine, &bad, &e) == CLF_ERR_ARG && strstr(e.msg, "needs D") != NULL,
             "mul_d without D is refused: %s", e.msg);
    tu_free(x);
}

/* Epilogues (bias, bias + activation into D, a residual D added, an
 * activation's derivative at D multiplied in; the last two with or without
 * bias) at shapes that take every native path (row blocks with edges, the
 * deep-K slices, the few-rows dot kernel, k = 0) on `engine`: C and D
 * against float64 (C's tolerance; the activations' slopes and derivatives
 * are at most 1.13 in size); columns of C and D past n untouched, a D that
 * is read unchanged; and on the native engine, bit for bit the unfused ops
 * the model used before (GEMM, then clf_op_bias_act_forward, then
 * clf_op_add for a residual or clf_op_act_backward for a derivative). */
static void test_epilogue(clf_runtime *rt, const char *engine, int light, tu_rng *r)
{
    static const size_t shapes[][4] = {
        /* m, n, k, trans_b */
        {1, 1, 1, 0},   {7, 13, 5, 0},     {33, 65, 17, 1}, {3, 70, 64, 1},
        {100, 1, 3, 0}, {64, 96, 2000, 0}, {5, 9, 0, 0},
    };
    const clf_gemm_act acts[] = {CLF_GEMM_ACT_NONE, CLF_GEMM_ACT_RELU, CLF_GEMM_ACT_GELU_ERF,
                                 CLF_GEMM_ACT_GELU_TANH, CLF_GEMM_ACT_SILU};
    const clf_act ops_act[] = {CLF_ACT_NONE, CLF_ACT_RELU, CLF_ACT_GELU_ERF, CLF_ACT_GELU_TANH,
                               CLF_ACT_SILU};
    clf_error e;
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
        /* mode 0-4: activation acts[mode] into D; 5: a residual; 6-9: the
         * derivative of acts[mode - 5] */
        for (int mode = 0; mode < 10; mode++)
            for (int with_bias = 0; with_bias < 2; with_bias++) {
                const size_t m = shapes[si][0], n = shapes[si][1], k = shapes[si][2];
                const int tb = (int)shapes[si][3];
                const int res = mode == 5, dact = mode > 5, ai = dact ? mode - 5 : res ? 0 : mode;
                const clf_gemm_act act = acts[ai];
                const int reads_d = res || dact;
                if (act == CLF_GEMM_ACT_NONE && !with_bias && !res)
                    continue;
                if (tu_simulator() && m * n * k > 20000)
                    continue;
                if (light && (m * n * k > 2000 || (act != CLF_GEMM_ACT_GELU_ERF && act != 0) ||
                              (reads_d && !with_bias)))
                    continue;
                const size_t ld = n + 3, na = m * (k ? k : 1), nb = n * (k ? k : 1);
                float *A = malloc(na * 4), *Bm = malloc(nb * 4), *bias = malloc(n * 4);
                float *C = malloc(m * ld * 4), *D = malloc(m * ld * 4), *Cu = malloc(m * ld * 4);
                float *Du = malloc(m * ld * 4);
                tu_fill(r, A, na, -1, 1);
                tu_fill(r, Bm, nb, -1, 1);
                tu_fill(r, bias, n, -2, 2);
                for (size_t i = 0; i < m * ld; i++)
                    C[i] = D[i] = 7.0f;
                if (reads_d) /* residual or activation input: fresh values, 7 past n */
                    for (size_t i = 0; i < m; i++)
                        tu_fill(r, D + i * ld, n, -3, 3);
                float *R = malloc(m * ld * 4);
                memcpy(R, D, m * ld * 4);
                clf_ptr dA = tu_upload(rt, A, na), dB = tu_upload(rt, Bm, nb);
                clf_ptr dbias = tu_upload(rt, bias, n), dC = tu_upload(rt, C, m * ld);
                clf_ptr dD = tu_upload(rt, D, m * ld);
                const float beta = k == 0 ? 0.5f : 0.0f;
                clf_gemm_desc d = {.trans_b = tb,
                                   .m = m,
                                   .n = n,
                                   .k = k,
                                   .alpha = 1.0f,
                                   .beta = beta,
                                   .a = dA,
                                   .lda = k ? k : 1,
                                   .b = dB,
                                   .ldb = tb ? (k ? k : 1) : n,
                                   .c = dC,
                                   .ldc = ld,
                                   .bias = with_bias ? dbias : (clf_ptr){NULL, 0},
                                   .act = act,
                                   .residual = res,
                                   .act_grad = dact,
                                   .d = act || res ? dD : (clf_ptr){NULL, 0},
                                   .ldd = ld};
                tu_ok(gemm_by(rt, engine, &d, &e), &e, "gemm with an epilogue");
                tu_download(rt, dC, C, m * ld);
                tu_download(rt, dD, D, m * ld);
                double *rc = malloc(m * n * 8), *rd = malloc(m * n * 8);
                float *gc = malloc(m * n * 4), *gd = malloc(m * n * 4);
                int guards = 1;
                for (size_t i = 0; i < m; i++)
                    for (size_t j = 0; j < ld; j++) {
                        if (j >= n) {
                            guards &= C[i * ld + j] == 7.0f && D[i * ld + j] == 7.0f;
                            continue;
                        }
                        double acc = beta * 7.0;
                        for (size_t q = 0; q < k; q++)
                            acc += (double)A[i * k + q] * (tb ? Bm[j * k + q] : Bm[q * n + j]);
                        acc += with_bias ? bias[j] : 0.0;
                        acc += res ? R[i * ld + j] : 0.0;
                        acc *= dact ? tu_act_grad_ref((int)act, R[i * ld + j]) : 1.0;
                        rc[i * n + j] = acc;
                        rd[i * n + j] = tu_act_ref((int)act, acc);
                        gc[i * n + j] = C[i * ld + j];
                        gd[i * n + j] = D[i * ld + j];
                    }
                char name[160];
                const double atol = 1e-5 * sqrt((double)(k ? k : 1)) + 1e-6;
                snprintf(name, sizeof name,
                         "%s epilogue act=%d%s bias=%d residual=%d m=%zu n=%zu k=%zu tb=%d C",
                         engine, (int)act, dact ? "'" : "", with_bias, res, m, n, k, tb);
                tu_close(name, gc, rc, m * n, atol, 1e-4);
                if (reads_d)
                    TU_CHECK(memcmp(D, R, m * ld * 4) == 0, "%s: D (read) unchanged", name);
                if (act && !dact) {
                    name[strlen(name) - 1] = 'D';
                    tu_close(name, gd, rd, m * n, atol, 1e-4);
                }
                TU_CHECK(guards, "%s: columns past n untouched in C and D", name);
                if (strcmp(engine, "clblast") != 0) {
                    /* unfused: the product alone, then the ops' bias + activation */
                    for (size_t i = 0; i < m * ld; i++)
                        Cu[i] = Du[i] = 7.0f;
                    tu_ok(clf_ptr_write(rt, dC, Cu, m * ld, &e), &e, "reset C");
                    tu_ok(clf_ptr_write(rt, dD, reads_d ? R : Du, m * ld, &e), &e, "reset D");
                    clf_gemm_desc plain = d;
                    plain.bias = (clf_ptr){NULL, 0};
                    plain.act = CLF_GEMM_ACT_NONE;
                    plain.residual = plain.act_grad = 0;
                    plain.d = (clf_ptr){NULL, 0};
                    tu_ok(gemm_by(rt, engine, &plain, &e), &e, "gemm");
                    int same = 1;
                    for (size_t i = 0; i < m; i++) {
                        clf_ptr crow = clf_ptr_at(dC, i * ld), drow = clf_ptr_at(dD, i * ld);
                        tu_ok(clf_op_bias_act_forward(rt, reads_d ? CLF_ACT_NONE : ops_act[ai],
                                                      crow, with_bias ? dbias : (clf_ptr){NULL, 0},
                                                      act && !dact ? drow : crow, 1, n, &e),
                              &e, "bias_act");
                        if (res)
                            tu_ok(clf_op_add(rt, crow, crow, drow, n, &e), &e, "add");
                        if (dact)
                            tu_ok(clf_op_act_backward(rt, ops_act[ai], crow, crow, drow, n, 0, &e),
                                  &e, "act_backward");
                    }
                    tu_download(rt, dC, Cu, m * ld);
                    tu_download(rt, dD, Du, m * ld);
                    for (size_t i = 0; i < m; i++)
                        for (size_t j = 0; j < n; j++)
                            same &= (act && !dact ? Du[i * ld + j] == D[i * ld + j]
                                                  : Cu[i * ld + j] == C[i * ld + j]);
                    TU_CHECK(same, "%s: the same bits as GEMM + clf_op_bias_act_forward%s", name,
                             res    ? " + clf_op_add"
                             : dact ? " + clf_op_act_backward"
                                    : "");
                }
                tu_free(dA);
                tu_free(dB);
                tu_free(dbias);
                tu_free(dC);
                tu_free(dD);
                free(A);
                free(Bm);
                free(bias);
                free(C);
                free(D);
                free(Cu);
                free(Du);
                free(R);
                free(rc);
                free(rd);
                free(gc);
                free(gd);
            }
    clf_gemm_desc bad = {0};
    clf_ptr x = tu_alloc(rt, 64);
    bad.m = bad.n = bad.k = 4;
    bad.a = bad.b = bad.c = x;
    bad.lda = bad.ldb = bad.ldc = 4;
    bad.alpha = 1.0f;
    bad.act = CLF_GEMM_ACT_RELU;
    TU_CHECK(gemm_by(rt, engine, &bad, &e) == CLF_ERR_ARG, "an activation without D is refused: %s",
             e.msg);
    bad.act = CLF_GEMM_ACT_NONE;
    bad.bias = x;
    bad.batch = 2;
    bad.stride_a = bad.stride_b = 0;
    bad.stride_c = 16;
    TU_CHECK(gemm_by(rt, engine, &bad, &e) == CLF_ERR_ARG, "an epilogue on a batch is refused: %s",
             e.msg);
    bad.bias = (clf_ptr){NULL, 0};
    bad.residual = 1;
    bad.d = clf_ptr_at(x, 32);
    bad.ldd = 4;
    TU_CHECK(gemm_by(rt, engine, &bad, &e) == CLF_ERR_ARG, "a residual on a batch is refused: %s",
             e.msg);
    bad.batch = 0;
    bad.d = (clf_ptr){NULL, 0};
    TU_CHECK(gemm_by(rt, engine, &bad, &e) == CLF_ERR_ARG && strstr(e.msg, "residual") != NULL,
             "a residual without D is refused: %s", e.msg);
    bad.d = clf_ptr_at(x, 13);
    TU_CHECK(gemm_by(rt, engine, &bad, &e) == CLF_ERR_ARG && strstr(e.msg, "overlaps") != NULL,
             "a residual D overlapping C is refused: %s", e.msg);
    bad.d = clf_ptr_at(x, 32);
    bad.act = CLF_GEMM_ACT_RELU;
    TU_CHECK(gemm_by(rt, engine, &bad, &e) == CLF_ERR_ARG,
             "a residual and an activation together are refused: %s", e.msg);
    bad.act_grad = 1;
    bad.d = clf_ptr_at(x, 13);
    TU_CHECK(gemm_by(rt, engine, &bad, &e) == CLF_ERR_ARG,
             "a residual and an activation's derivative together are refused: %s", e.msg);
    bad.residual = 0;
    TU_CHECK(gemm_by(rt, engine, &bad, &e) == CLF_ERR_ARG && strstr(e.msg, "overlaps") != NULL,
             "an activation's derivative at a D overlapping C is refused: %s", e.msg);
    bad.act = CLF_GEMM_ACT_NONE;
    bad.d = clf_ptr_at(x, 32);
    TU_CHECK(gemm_by(rt, engine, &bad, &e) == CLF_ERR_ARG && strstr(e.msg, "derivative") != NULL,
             "an activation's derivative without the activation is refused: %s", e.msg);
    bad.act_grad = 0;
    bad.residual = 1;
    bad.a = clf_ptr_at(x, 48);
    bad.b = clf_ptr_at(x, 48);
    tu_ok(gemm_by(rt, engine, &bad, &e), &e, "a residual D beside C");
    tu_free(x);
}

/* Split-K, forced through the runtime option (the device's choice splits
 * only products whose output cannot fill the device): P = 2, 3, 5 slices
 * at every transpose, odd M and N, K a multiple of P (60, 1200), alpha and
 * beta, against float64 (run_case); reruns bit-identical; with an
 * epilogue; a P that does not divide K falls back to no split. */
/* Every native configuration the device lists (the search's and the
 * others: a CPU still checks the GPU-shaped tiled ones, and the reverse),
 * through its name; then "native", the default, through clf_gemm_with. A
 * name the device does not list is refused. */
static void test_configs(clf_runtime *rt, tu_rng *r)
{
    const char *const *names = NULL;
    size_t count = 0, n_search = 0;
    clf_error err;
    tu_ok(clf_gemm_candidates(rt, &names, &count, &n_search, &err), &err, "candidates");
    TU_CHECK(count >= 2 && strcmp(names[0], "clblast") == 0 && n_search >= 2 && n_search <= count &&
                 names[count] == NULL,
             "candidates: clblast and %zu native configurations, %zu searched", count - 1,
             n_search - 1);
    for (size_t c = 1; c < count; c++) {
        /* in full: the configurations the search may pick here (under the
         * simulator only the first, the default); the rest lightly (their
         * kernel is a searched configuration's with other tile sizes, and
         * on a device that would not pick them it may be slow) */
        const int light = tu_simulator() ? c > 1 : c >= n_search;
        printf("configuration %s%s\n", names[c], c < n_search ? " (searched)" : "");
        test_engine(rt, names[c], light, r);
        test_epilogue(rt, names[c], light, r);
        test_stored_derivative(rt, names[c], light, r);
    }
    test_engine(rt, "native", 1, r);
    gcase g = {.m = 3, .n = 3, .k = 3, .batch = 1, .alpha = 1.0f};
    const glayout L = layout_of(&g);
    clf_ptr p = tu_alloc(rt, L.total);
    clf_gemm_desc d = desc_of(&g, &L, p.buf);
    TU_CHECK(clf_gemm_with_config(rt, "r99v3x1", &d, &err) == CLF_ERR_ARG &&
                 strstr(err.msg, "r99v3x1") != NULL,
             "an unknown configuration is refused by name (%s)", err.msg);
    tu_free(p);
}

/* One configuration (who) on a runtime with P forced. */
static void split_case(clf_runtime *rt, const char *who, size_t P, tu_rng *r)
{
    const int sim = tu_simulator();
    clf_error err;
    printf("split-K, P = %zu, %s\n", P, who);
    for (int t = 0; t < 4; t++) {
        gcase g = {.ta = t & 1,
                   .tb = t >> 1,
                   .m = sim ? 13 : 37,
                   .n = sim ? 11 : 129,
                   .k = 60,
                   .batch = 1,
                   .pad = 1,
                   .alpha = 1.5f,
                   .beta = 0.5f};
        run_case(rt, who, &g, r);
        if (!sim) {
            g.k = 1200;
            g.m = 70;
            g.n = 33;
            g.beta = 0.0f;
            run_case(rt, who, &g, r);
        }
    }
    /* reruns bit-identical; an epilogue after the reduction */
    const size_t m = 29, n = 51, k = 120;
    float *a = malloc(m * k * 4), *b = malloc(k * n * 4), *bias = malloc(n * 4);
    float *c1 = malloc(m * n * 4), *c2 = malloc(m * n * 4), *dd = malloc(m * n * 4);
    tu_fill(r, a, m * k, -1, 1);
    tu_fill(r, b, k * n, -1, 1);
    tu_fill(r, bias, n, -1, 1);
    clf_ptr da = tu_upload(rt, a, m * k), db = tu_upload(rt, b, k * n);
    clf_ptr dbias = tu_upload(rt, bias, n), dc = tu_alloc(rt, m * n), dd_ = tu_alloc(rt, m * n);
    clf_gemm_desc d = {.trans_a = 1,
                       .m = m,
                       .n = n,
                       .k = k,
                       .alpha = 1.0f,
                       .a = da,
                       .lda = m,
                       .b = db,
                       .ldb = n,
                       .c = dc,
                       .ldc = n,
                       .bias = dbias,
                       .act = CLF_GEMM_ACT_GELU_ERF,
                       .d = dd_,
                       .ldd = n};
    tu_ok(clf_runtime_finish(rt, &err), &err, "finish");
    clf_profile_entry *pe = NULL;
    int npe = 0;
    size_t before = 0, after = 0;
    tu_ok(clf_profile_report(rt, &pe, &npe, &err), &err, "profile");
    for (int i = 0; i < npe; i++)
        if (strcmp(pe[i].name, "gemm_splitk_reduce") == 0)
            before = (size_t)pe[i].count;
    free(pe);
    tu_ok(gemm_by(rt, who, &d, &err), &err, "split gemm");
    tu_download(rt, dc, c1, m * n);
    tu_download(rt, dd_, dd, m * n);
    tu_ok(gemm_by(rt, who, &d, &err), &err, "split gemm again");
    tu_download(rt, dc, c2, m * n);
    TU_CHECK(memcmp(c1, c2, m * n * 4) == 0, "split-K P=%zu %s: reruns bit-identical", P, who);
    tu_ok(clf_profile_report(rt, &pe, &npe, &err), &err, "profile");
    for (int i = 0; i < npe; i++)
        if (strcmp(pe[i].name, "gemm_splitk_reduce") == 0)
            after = (size_t)pe[i].count;
    free(pe);
    TU_CHECK(after == before + 2,
             "split-K P=%zu %s: the products ran split (gemm_splitk_reduce launched)", P, who);
    double *rc = malloc(m * n * 8), *rd = malloc(m * n * 8);
    for (size_t i = 0; i < m; i++)
        for (size_t j = 0; j < n; j++) {
            double acc = bias[j];
            for (size_t q = 0; q < k; q++)
                acc += (double)a[q * m + i] * b[q * n + j];
            rc[i * n + j] = acc;
            rd[i * n + j] = tu_act_ref((int)CLF_GEMM_ACT_GELU_ERF, acc);
        }
    char name[96];
    snprintf(name, sizeof name, "split-K P=%zu %s TN with bias + GELU: C", P, who);
    tu_close(name, c1, rc, m * n, 1e-4, 1e-4);
    snprintf(name, sizeof name, "split-K P=%zu %s TN with bias + GELU: D", P, who);
    tu_close(name, dd, rd, m * n, 1e-4, 1e-4);
    /* bias + a residual after the reduction: D (fresh values) added */
    tu_fill(r, dd, m * n, -2, 2);
    tu_ok(clf_ptr_write(rt, dd_, dd, m * n, &err), &err, "residual");
    d.act = CLF_GEMM_ACT_NONE;
    d.residual = 1;
    tu_ok(gemm_by(rt, who, &d, &err), &err, "split gemm with a residual");
    tu_download(rt, dc, c1, m * n);
    for (size_t i = 0; i < m * n; i++)
        rc[i] += dd[i];
    snprintf(name, sizeof name, "split-K P=%zu %s TN with bias + residual: C", P, who);
    tu_close(name, c1, rc, m * n, 1e-4, 1e-4);
    tu_free(da);
    tu_free(db);
    tu_free(dbias);
    tu_free(dc);
    tu_free(dd_);
    free(a);
    free(b);
    free(bias);
    free(c1);
    free(c2);
    free(dd);
    free(rc);
    free(rd);
    /* K = 61 is prime: no P divides it, the product runs unsplit */
    gcase g = {.ta = 1, .tb = 0, .m = 9, .n = 17, .k = 61, .batch = 1, .alpha = 1.0f};
    run_case(rt, who, &g, r);
}

/* Split-K, forced through the runtime option (the device's choice splits
 * only products whose output cannot fill the device): P = 2, 3, 5 slices
 * on every native configuration, at every transpose, odd M and N, K a
 * multiple of P (60, 1200), alpha and beta, against float64 (run_case);
 * reruns bit-identical; with an epilogue (bias + GELU, bias + residual); a
 * P that does not divide K falls back to no split. */
static void test_split_k(tu_rng *r)
{
    const size_t Ps[] = {2, 3, 5};
    for (int pi = 0; pi < 3; pi++) {
        clf_runtime_options o = clf_runtime_options_default();
        o.device = getenv("CLFORMER_TEST_DEVICE");
        o.cache_dir = getenv("CLFORMER_CACHE_DIR"); /* compiled kernels */
        o.gemm = CLF_GEMM_NATIVE;
        o.gemm_split_k = Ps[pi];
        o.profile = 1; /* to see that the reduction ran */
        clf_runtime *rt = NULL;
        clf_error err;
        tu_ok(clf_runtime_create(&rt, &o, &err), &err, "runtime with split-K");
        const char *const *names = NULL;
        size_t count = 0;
        /* the configurations the search may pick (under the simulator the
         * default only) */
        size_t n_search = 0;
        tu_ok(clf_gemm_candidates(rt, &names, &count, &n_search, &err), &err, "candidates");
        for (size_t c = 1; c < (tu_simulator() ? 2 : n_search); c++)
            split_case(rt, names[c], Ps[pi], r);
        clf_runtime_destroy(rt);
    }
}

int main(void)
{
    clf_runtime *rt = tu_runtime();
    tu_rng r = tu_rng_new(2);
    test_validation(rt);
    test_configs(rt, &r);
    test_split_k(&r);
    /* CLBlast's kernels are not ours to check under a simulator (and slow there) */
    if (!tu_simulator()) {
        test_engine(rt, "clblast", 0, &r);
        test_epilogue(rt, "clblast", 0, &r);
        test_stored_derivative(rt, "clblast", 0, &r);
    }
    printf("engine auto (clf_gemm with the runtime's options)\n");
    const int sim = tu_simulator();
    for (int t = 0; t < 4; t++) {
        gcase g = {.ta = t & 1,
                   .tb = t >> 1,
                   .m = sim ? 37 : 257,
                   .n = sim ? 29 : 129,
                   .k = sim ? 23 : 63,
                   .batch = 1,
                   .pad = 1,
                   .alpha = 1.5f,
                   .beta = 0.5f};
        run_case(rt, "auto", &g, &r);
        gcase b = {.ta = t & 1,
                   .tb = t >> 1,
                   .m = 32,
                   .n = 32,
                   .k = 16,
                   .batch = 8,
                   .alpha = 0.125f,
                   .beta = 0.0f};
        run_case(rt, "auto", &b, &r);
    }
    printf("clf_gemm_prepare, then the call\n");
    {
        gcase g = {.ta = 1,
                   .m = sim ? 30 : 130,
                   .n = sim ? 20 : 70,
                   .k = 45,
                   .batch = 2,
                   .pad = 1,
                   .alpha = 1.0f,
                   .beta = 0.5f};
        const glayout L = layout_of(&g);
        clf_ptr p = tu_alloc(rt, L.total);
        clf_gemm_desc d = desc_of(&g, &L, p.buf);
        clf_error err;
        TU_CHECK(clf_gemm_prepare(rt, &d, &err) == CLF_OK, "clf_gemm_prepare succeeds");
        d.lda = 1;
        TU_CHECK(clf_gemm_prepare(rt, &d, &err) == CLF_ERR_ARG, "clf_gemm_prepare validates");
        tu_free(p);
        run_case(rt, "auto", &g, &r);
    }
    clf_runtime_destroy(rt);
    /* the choice file times CLBlast too: not a kernel check, skipped under a simulator */
    if (!sim)
        test_auto_cache(&r);
    return tu_finish();
}
