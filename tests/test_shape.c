/*
 * test_shape.c - the kernels' shape, measured (runtime/shape.c,
 * cl/shape.cl).
 *
 * - The probe's row sums (item shape at vector widths 4, 8, 16; group shape
 *   at several local sizes) against float64 sums on fresh random rows,
 *   within the float accumulation bound n * 2^-24 * sum |x| per row, and
 *   exactly on rows of eighths (sums every order computes exactly).
 * - The loop probe counts what it runs (0 to 2^18 iterations), or on a
 *   device that ends loops early the limit the runtime measured.
 * - The rule (clf_shape_choose) on made-up timings: a loop limit means the
 *   group shape whatever the timings; else the faster shape wins
 *   by more than 15%, a tie keeps the type's default, a candidate that did
 *   not run loses, and the width is the device's preferred one among those
 *   within 15% of the fastest, else the widest of them.
 * - The measurement and its cache: a fresh cache directory gets
 *   device-<key>.txt and the runtime says "measured" with the timings in
 *   its reason, whose verdict agrees with the shape taken; a second runtime
 *   reads it ("measured earlier", the same shape, width and reason); a
 *   corrupt file, or one made from other kernels, is measured again and
 *   rewritten; a forced shape measures nothing and writes nothing, and
 *   takes the loop limit and fma()'s speed from a facts file; without
 *   a cache directory every runtime measures.
 * - The peak probe's kernels (cl/probe.cl's fma_peak_c<N>) compute what
 *   the host credits them with: N chains of the probe's width, each
 *   multiplied and added `iters` times (0 to 1000; fresh random factors),
 *   against float64 within the rounding bound below.
 * Under the simulator only the kernels are checked (a measurement there
 * would time Oclgrind, slowly).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/runtime_internal.h"
#include "tests/test_util.h"

/* exact: eighths in [-1, 1], whose sums of up to 2^18 terms every order
 * computes exactly (so the tolerance is 0 and a skipped or doubled element
 * shows); else uniform floats in [-1, 1] under the bound. */
static void row_sums(clf_runtime *rt, tu_rng *g, size_t R, size_t N, int exact)
{
    const size_t Rp = (R + 15) / 16 * 16; /* item launches round rows up to 16 */
    float *x = calloc(Rp * N + 1, sizeof *x), *got = calloc(Rp, sizeof *got);
    double *ref = calloc(R + 1, sizeof *ref);
    tu_fill(g, x, R * N, -1.0f, 1.0f);
    if (exact)
        for (size_t i = 0; i < R * N; i++)
            x[i] = (float)((int)(tu_u32(g) % 17) - 8) / 8.0f;
    const double worst_abs = tu_row_sums(x, R, N, ref);
    const double atol = exact ? 0.0 : fmax(1e-30, (double)N * 0x1p-24 * worst_abs);
    clf_ptr dx = tu_upload(rt, x, Rp * N + 1), dout = tu_alloc(rt, Rp);
    clf_error err;
    const char *names[4] = {"shape_rows_item4", "shape_rows_item8", "shape_rows_item16",
                            "shape_rows_group"};
    for (int c = 0; c < 4; c++) {
        clf_kernel *k = NULL;
        tu_ok(clf_kernel_get(rt, "shape", names[c], &k, &err), &err, names[c]);
        const size_t locals[3] = {1, 4, 64};
        for (int l = 0; l < (c < 3 ? 1 : 3); l++) {
            size_t local = c < 3 ? 16 : locals[l];
            if (local > clf_kernel_max_work_group(k))
                continue;
            size_t global = c < 3 ? Rp : R * local;
            if (global == 0)
                continue;
            const clf_arg a[4] = {CLF_ARG_BUF(dx.buf), CLF_ARG_U64(N), CLF_ARG_BUF(dout.buf),
                                  CLF_ARG_LOCAL(local * sizeof(float))};
            tu_ok(clf_kernel_launch(rt, k, 1, &global, &local, c < 3 ? 3 : 4, a, &err), &err,
                  "a row sum");
            tu_download(rt, dout, got, Rp);
            char name[96];
            snprintf(name, sizeof name, "%s %zux%zu%s, local %zu", names[c], R, N,
                     exact ? " (eighths)" : "", local);
            tu_close(name, got, ref, R, atol, 0.0);
        }
    }
    tu_free(dx);
    tu_free(dout);
    free(x);
    free(got);
    free(ref);
}

static void rule(void)
{
    struct {
        double t[4];
        unsigned loops;
        int type_serial;
        unsigned type_vec;
        int serial;
        unsigned vec;
        const char *why;
    } cases[] = {
        {{1.0, 1.0, 1.0, 2.0}, 0, 0, 1, 1, 16, "item faster"},        /* the widest of a tie */
        {{1.0, 1.1, 2.0, 2.5}, 0, 0, 8, 1, 8, "item faster"},         /* the preferred, within */
        {{1.0, 1.1, 2.0, 2.5}, 0, 0, 1, 1, 8, "item faster"},         /* 16 is out: the widest in */
        {{1.0, 1.1, 1.2, 2.5}, 0, 0, 4, 1, 4, "item faster"},         /* preferred 4 within */
        {{2.0, 2.0, 2.0, 1.0}, 0, 1, 16, 0, 16, "group faster"},      /* group by more than 15% */
        {{1.0, 1.0, 1.0, 1.1}, 0, 0, 4, 0, 4, "within 15%, by type"}, /* a tie: the type's */
        {{1.0, 1.0, 1.0, 0.9}, 0, 1, 16, 1, 16, "within 15%, by type"},
        {{-1.0, -1.0, -1.0, 1.0}, 0, 1, 4, 0, 4, "group faster"}, /* the item shape failed */
        {{3.0, -1.0, -1.0, -1.0}, 0, 0, 16, 1, 4, "item faster"}, /* only x4 ran */
        {{-1.0, -1.0, -1.0, -1.0}, 0, 1, 8, 1, 4, "neither ran; by type"},
        {{1.0, 1.0, 1.0, 2.0}, 65535, 1, 8, 0, 8, "loops end early"}, /* items must not walk rows */
        {{-1.0, -1.0, -1.0, -1.0}, 100, 1, 8, 0, 4, "loops end early"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int serial = -1;
        unsigned vec = 0;
        const char *why = clf_shape_choose(cases[i].t, cases[i].loops, cases[i].type_serial,
                                           cases[i].type_vec, &serial, &vec);
        TU_CHECK(
            serial == cases[i].serial && vec == cases[i].vec && strcmp(why, cases[i].why) == 0,
            "rule: item %.1f/%.1f/%.1f group %.1f, type %s x%u -> %s x%u (%s); got %s x%u (%s)",
            cases[i].t[0], cases[i].t[1], cases[i].t[2], cases[i].t[3],
            cases[i].type_serial ? "item" : "group", cases[i].type_vec,
            cases[i].serial ? "item" : "group", cases[i].vec, cases[i].why,
            serial ? "item" : "group", vec, why);
    }
}

/* The loop probe counts what it runs: n iterations, or on a device that
 * ends loops early (clf_device_info.loop_limit), the limit. */
static void loop_count(clf_runtime *rt, uint32_t n)
{
    clf_error err;
    clf_kernel *k = NULL;
    tu_ok(clf_kernel_get(rt, "shape", "shape_loop_count", &k, &err), &err, "shape_loop_count");
    uint32_t ones[16], got = 0xFFFFFFFFu;
    for (int i = 0; i < 16; i++)
        ones[i] = 1;
    clf_buffer *b1 = NULL, *bo = NULL;
    tu_ok(clf_buffer_create(rt, sizeof ones, &b1, &err), &err, "ones");
    tu_ok(clf_buffer_create(rt, sizeof got, &bo, &err), &err, "out");
    tu_ok(clf_buffer_write(rt, b1, 0, ones, sizeof ones, &err), &err, "write");
    const size_t one = 1;
    const clf_arg a[3] = {CLF_ARG_BUF(b1), CLF_ARG_U32(n), CLF_ARG_BUF(bo)};
    tu_ok(clf_kernel_launch(rt, k, 1, &one, &one, 3, a, &err), &err, "launch");
    tu_ok(clf_buffer_read(rt, bo, 0, &got, sizeof got, &err), &err, "read");
    const unsigned lim = clf_runtime_device(rt)->loop_limit;
    const uint32_t want = lim != 0 && n > lim ? lim : n;
    TU_CHECK(got == want, "loop probe: %u iterations asked, %u counted (want %u; loop limit %u)", n,
             got, want, lim);
    clf_buffer_destroy(b1);
    clf_buffer_destroy(bo);
}

/* The peak probe's kernels: work-item g's output is width * the sum over
 * chains i of x_i after iters steps of x = x * m + c from x_i = (g + i) *
 * 1e-7 (every lane of a chain holds the same value). Each float step
 * rounds at most twice (an unfused multiply-add) by 2^-24 of the values
 * it touches, and m < 1 shrinks earlier errors, so a chain is within
 * (iters + 1) * 3 * 2^-24 * its largest magnitude; summing its n =
 * chains * width terms in any order adds at most n * 2^-24 * the sum of
 * their magnitudes. A chain skipped or a step not run is off by far
 * more. */
static void fma_peak_kernels(clf_runtime *rt, tu_rng *g)
{
    clf_error err;
    clf_kernel *kw = NULL;
    tu_ok(clf_kernel_get(rt, "probe", "probe_fma_width", &kw, &err), &err, "probe_fma_width");
    const int width = (int)clf_kernel_required_group(kw);
    TU_CHECK(width == 1 || width == 4 || width == 8 || width == 16,
             "the probe's width is 1, 4, 8 or 16 (%d)", width);
    const int chains[] = {6, 8, 12, 16};
    const uint32_t iters[] = {0, 1, 37, 1000};
    enum { ITEMS = 3 };
    clf_buffer *bo = NULL;
    tu_ok(clf_buffer_create(rt, ITEMS * sizeof(float), &bo, &err), &err, "out");
    for (size_t c = 0; c < sizeof chains / sizeof chains[0]; c++) {
        char name[32];
        snprintf(name, sizeof name, "fma_peak_c%d", chains[c]);
        clf_kernel *k = NULL;
        tu_ok(clf_kernel_get(rt, "probe", name, &k, &err), &err, name);
        for (size_t t = 0; t < sizeof iters / sizeof iters[0]; t++) {
            if (tu_simulator() && iters[t] > 37)
                continue;
            const float m = (float)tu_uniform(g, 0.9, 0.999), a = (float)tu_uniform(g, -1e-3, 1e-3);
            const size_t global = ITEMS, local = 1;
            const clf_arg args[4] = {CLF_ARG_BUF(bo), CLF_ARG_U32(iters[t]), CLF_ARG_F32(m),
                                     CLF_ARG_F32(a)};
            tu_ok(clf_kernel_launch(rt, k, 1, &global, &local, 4, args, &err), &err, name);
            float got[ITEMS];
            tu_ok(clf_buffer_read(rt, bo, 0, got, sizeof got, &err), &err, "read");
            for (int gid = 0; gid < ITEMS; gid++) {
                double sum = 0.0, mag = 0.0, tol = 0.0;
                for (int i = 0; i < chains[c]; i++) {
                    double x = (double)((float)(gid + i) * 1e-7f), big = fabs(x);
                    for (uint32_t s = 0; s < iters[t]; s++) {
                        x = x * (double)m + (double)a;
                        big = fmax(big, fabs(x));
                    }
                    sum += x;
                    mag += fabs(x);
                    tol += (iters[t] + 1.0) * 3.0 * 0x1p-24 * big;
                }
                const double want = width * sum;
                tol = width * tol + 0x1p-24 * (double)(width * chains[c]) * width * mag;
                TU_CHECK(fabs((double)got[gid] - want) <= tol,
                         "%s, %u steps, item %d: %.9g, float64 %.9g (tolerance %.3g)", name,
                         iters[t], gid, (double)got[gid], want, tol);
            }
        }
    }
    clf_buffer_destroy(bo);
}

static clf_runtime *open_rt(const char *cache, clf_shape shape)
{
    clf_runtime_options o = tu_options();
    o.kernel_dir = getenv("CLFORMER_KERNEL_DIR");
    o.cache_dir = cache;
    o.shape = shape;
    clf_runtime *rt = NULL;
    clf_error err;
    tu_ok(clf_runtime_create(&rt, &o, &err), &err, "a runtime");
    return rt;
}

static void write_file(const char *path, const char *s)
{
    FILE *fp = fopen(path, "w");
    TU_CHECK(fp != NULL && fputs(s, fp) >= 0 && fclose(fp) == 0, "writing %s", path);
}

/* The verdict in a measured reason agrees with its timings and the shape. */
static void reason_agrees(const clf_device_info *d)
{
    double t[4];
    int rows = 0, cols = 0;
    size_t gl = 0;
    const char *colon = strchr(d->shape_reason, ':');
    int got = colon == NULL ? 0
                            : sscanf(colon,
                                     ": a %dx%d row sum, item x4 %lf / x8 %lf / x16 %lf ms, "
                                     "group of %zu %lf ms",
                                     &rows, &cols, &t[0], &t[1], &t[2], &gl, &t[3]);
    TU_CHECK(got == 7, "the reason gives the timings: '%s'", d->shape_reason);
    if (got != 7)
        return;
    double ti = -1.0;
    for (int c = 0; c < 3; c++)
        if (t[c] >= 0.0 && (ti < 0.0 || t[c] < ti))
            ti = t[c];
    /* the timings are printed to a microsecond: allow that much */
    if (strncmp(d->shape_reason, "loops end early", 15) == 0)
        TU_CHECK(!d->serial_groups && d->loop_limit > 0,
                 "'loops end early' means the group shape and a loop limit: %s", d->shape_reason);
    else if (d->loop_limit > 0)
        TU_CHECK(0, "a loop limit (%u) is the reason's verdict: %s", d->loop_limit,
                 d->shape_reason);
    else if (strncmp(d->shape_reason, "item faster", 11) == 0)
        TU_CHECK(d->serial_groups && (t[3] < 0.0 || ti * 1.15 < t[3] + 2e-3),
                 "'item faster' means the item shape, faster by 15%%: %s", d->shape_reason);
    else if (strncmp(d->shape_reason, "group faster", 12) == 0)
        TU_CHECK(!d->serial_groups && (ti < 0.0 || t[3] * 1.15 < ti + 2e-3),
                 "'group faster' means the group shape, faster by 15%%: %s", d->shape_reason);
    else
        TU_CHECK(strncmp(d->shape_reason, "within 15%", 10) == 0 && ti >= 0.0 && t[3] >= 0.0 &&
                     ti * 1.15 >= t[3] - 2e-3 && t[3] * 1.15 >= ti - 2e-3,
                 "otherwise the two are within 15%%: %s", d->shape_reason);
    if (d->serial_groups)
        TU_CHECK(d->pref_vec_float == 4 || d->pref_vec_float == 8 || d->pref_vec_float == 16,
                 "the item shape's width is one measured: %u", d->pref_vec_float);
}

static void cache(void)
{
    char dir[] = "/tmp/clf_shape_XXXXXX";
    TU_CHECK(mkdtemp(dir) != NULL, "a fresh cache directory");
    clf_runtime *rt = open_rt(dir, CLF_SHAPE_AUTO);
    clf_device_info a = *clf_runtime_device(rt);
    char path[512];
    snprintf(path, sizeof path, "%s/device-%s.txt", dir, clf_runtime_device_key(rt));
    clf_runtime_destroy(rt);
    printf("  shape: %s x%u (%s)\n", a.serial_groups ? "item" : "group", a.pref_vec_float,
           a.shape_reason);
    TU_CHECK(a.shape_source == CLF_SHAPE_MEASURED, "a fresh cache: measured (source %d)",
             (int)a.shape_source);
    reason_agrees(&a);
    char *text = tu_read_file(path, NULL);
    TU_CHECK(text != NULL && strncmp(text, "clformer-device-facts 3\n", 24) == 0 &&
                 strstr(text, a.shape_reason) != NULL,
             "the facts are written to %s", path);
    /* the prefetch probe's answer: 1 only where the builtin built and ran */
    int pf = -1;
    const char *pl = text ? strstr(text, "\nprefetch ") : NULL;
    if (pl != NULL && sscanf(pl, "\nprefetch %d", &pf) != 1)
        pf = -1;
    TU_CHECK(pf == a.prefetch_builtin, "the prefetch probe's answer is saved (%d, the device's %d)",
             pf, a.prefetch_builtin);
    printf("  __builtin_prefetch on a __global pointer: %s\n",
           a.prefetch_builtin ? "builds and runs" : "not used");
    free(text);

    rt = open_rt(dir, CLF_SHAPE_AUTO);
    const clf_device_info *b = clf_runtime_device(rt);
    TU_CHECK(b->shape_source == CLF_SHAPE_CACHED && b->serial_groups == a.serial_groups &&
                 b->pref_vec_float == a.pref_vec_float &&
                 b->prefetch_builtin == a.prefetch_builtin &&
                 strcmp(b->shape_reason, a.shape_reason) == 0,
             "a second runtime reads them: source %d, %s x%u", (int)b->shape_source,
             b->serial_groups ? "item" : "group", b->pref_vec_float);
    clf_runtime_destroy(rt);

    const char *bad[2] = {
        "clformer-device-facts 3\nkernels 0123456789abcdef\nshape item vec 8\nloops 0\nfma_slow 0\n"
        "prefetch 0\nreason made from other kernels\n",
        "clformer-device-facts 3\nshape sideways\n"};
    for (int i = 0; i < 2; i++) {
        write_file(path, bad[i]);
        rt = open_rt(dir, CLF_SHAPE_AUTO);
        const clf_device_info *c = clf_runtime_device(rt);
        TU_CHECK(c->shape_source == CLF_SHAPE_MEASURED && strstr(c->shape_reason, "other") == NULL,
                 "a %s file is measured again (source %d)", i ? "corrupt" : "stale",
                 (int)c->shape_source);
        clf_runtime_destroy(rt);
        char *now = tu_read_file(path, NULL);
        TU_CHECK(now != NULL && strstr(now, "kernels 0123456789") == NULL &&
                     strstr(now, "sideways") == NULL && strstr(now, "\nreason ") != NULL,
                 "... and rewritten");
        free(now);
    }

    /* forced, with facts on file: the shape as told, the loop limit and
     * fma()'s speed from the file */
    {
        char *facts = tu_read_file(path, NULL);
        unsigned loops = 1;
        int fma_slow = -1;
        const char *lp = facts ? strstr(facts, "\nloops ") : NULL;
        const char *fp = facts ? strstr(facts, "\nfma_slow ") : NULL;
        TU_CHECK(lp != NULL && fp != NULL && sscanf(lp, "\nloops %u", &loops) == 1 &&
                     sscanf(fp, "\nfma_slow %d", &fma_slow) == 1,
                 "the facts give the loop limit and fma()'s speed");
        free(facts);
        rt = open_rt(dir, a.serial_groups ? CLF_SHAPE_GROUP : CLF_SHAPE_ITEM);
        const clf_device_info *f = clf_runtime_device(rt);
        TU_CHECK(f->shape_source == CLF_SHAPE_FORCED && f->serial_groups == !a.serial_groups &&
                     f->loop_limit == loops && f->fma_slow == fma_slow,
                 "forced over a facts file: the shape forced, loops %u and fma_slow %d read "
                 "(got %u, %d)",
                 loops, fma_slow, f->loop_limit, f->fma_slow);
        clf_runtime_destroy(rt);
    }

    char fdir[] = "/tmp/clf_shape_XXXXXX";
    TU_CHECK(mkdtemp(fdir) != NULL, "another fresh cache directory");
    for (int item = 0; item < 2; item++) {
        rt = open_rt(fdir, item ? CLF_SHAPE_ITEM : CLF_SHAPE_GROUP);
        const clf_device_info *f = clf_runtime_device(rt);
        TU_CHECK(f->shape_source == CLF_SHAPE_FORCED && f->serial_groups == item,
                 "forced %s: taken (source %d)", item ? "item" : "group", (int)f->shape_source);
        snprintf(path, sizeof path, "%s/device-%s.txt", fdir, clf_runtime_device_key(rt));
        clf_runtime_destroy(rt);
        struct stat sb;
        TU_CHECK(stat(path, &sb) != 0, "forced: no measurement is written");
    }
    rt = open_rt(NULL, CLF_SHAPE_AUTO);
    TU_CHECK(clf_runtime_device(rt)->shape_source == CLF_SHAPE_MEASURED,
             "without a cache directory: measured");
    clf_runtime_destroy(rt);

    char rm[128];
    snprintf(rm, sizeof rm, "rm -rf %s %s", dir, fdir);
    TU_CHECK(system(rm) == 0, "removing the test's directories");
}

int main(void)
{
    clf_runtime *rt = tu_runtime();
    tu_rng g = tu_rng_new(7);
    const size_t shapes[][2] = {{1, 16}, {16, 1024}, {37, 48}, {5, 0}, {3, 4096}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        if (!tu_simulator() || shapes[i][0] * shapes[i][1] <= 16 * 1024)
            for (int exact = 0; exact < 2; exact++)
                row_sums(rt, &g, shapes[i][0], shapes[i][1], exact);
    const uint32_t ns[] = {0, 1, 17, 5000, 65535, 65536, 1u << 18};
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++)
        if (!tu_simulator() || ns[i] <= 5000)
            loop_count(rt, ns[i]);
    fma_peak_kernels(rt, &g);
    clf_runtime_destroy(rt);
    rule();
    if (tu_simulator())
        printf("  (the measurement and its cache: not under the simulator)\n");
    else
        cache();
    return tu_finish();
}
