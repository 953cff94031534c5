/*
 * shape.c - the kernels' shape (item or group) and the item shape's vector
 * width, measured once per device and cached.
 *
 * Design
 *   The device's type says how it probably runs work-items, not how it
 *   does: Mesa's llvmpipe reports a CPU and runs a work-group's items in
 *   SIMD lanes, as a GPU does; Intel's CPU runtime reports a preferred
 *   float vector width of 1 and runs 16-wide vectors fastest on AVX-512.
 *   So cl/shape.cl's row sum is timed in both shapes: one work-item per
 *   row with vector loads of 4, 8 and 16 floats (work-groups of 16 rows,
 *   as the item-shaped kernels launch), and one work-group per row with a
 *   local-memory tree. Each candidate runs once to warm up (a first launch
 *   may compile), then SHAPE_ROUNDS interleaved rounds; the fastest run of
 *   each counts, and a candidate whose sums are wrong is out. The faster
 *   shape wins unless the two are within SHAPE_MARGIN of each other, where
 *   the type's default stands (a tie is no evidence). The item shape's
 *   width is, among the widths within the same margin of the fastest, the
 *   one the device reports as preferred, else the widest: a row sum reads
 *   memory, and widths that tie on it need not tie on arithmetic.
 *
 *   One fact overrides the timings: a device that ends a work-item's loops
 *   early (shape_loop_count runs SHAPE_LOOP_N iterations and counts fewer:
 *   Mesa 22's llvmpipe stops after 65535 in all, and carries on with wrong
 *   values) gets the group shape, where an item walks a fraction of a row
 *   instead of all of it; the limit is kept as clf_device_info.loop_limit
 *   for the callers that can split their work further.
 *
 *   And one more fact for the kernels' arithmetic: chains of multiply-adds
 *   written as fma() and as a * b + c (shape_fma, shape_muladd) are timed
 *   alike; fma() more than SHAPE_FMA_SLOW times slower means the device
 *   emulates it (Mesa 22's llvmpipe: 57x), and the kernels then use a * b + c
 *   (clf_device_info.fma_slow, common.cl's CLF_FMA).
 *
 *   And whether clang's __builtin_prefetch on a __global pointer builds and
 *   runs (clf_device_info.prefetch_builtin, the preamble's
 *   CLF_PREFETCH_BUILTIN: the native GEMM's software prefetch where items
 *   run one after another). __has_builtin is no proof: NVIDIA's OpenCL 1.2
 *   front end claims the builtin and refuses a __global pointer ("changes
 *   address space of pointer"), and a SPIR-V path cannot lower it (Mesa
 *   22's rusticl ends the process when it meets llvm.prefetch), so the
 *   probe program keeps the SPIR guard, is built with the runtime's
 *   options and must run one launch and write what it should.
 *
 *   The result lives in <cache_dir>/device-<device key>.txt beside the
 *   kernels and the GEMM choices: a magic line, the hash of shape.cl (with
 *   common.cl) as this runtime builds it, the shape, the width, the loop
 *   limit (0: none seen), whether fma() is slow, whether the prefetch
 *   builtin runs, and the reason; a file that does not parse or was made from other kernels is
 *   measured again and rewritten (temporary file and rename). Forced by the
 *   caller (clf_runtime_options.shape) nothing is measured, and the loop
 *   limit and fma() come from the file if it is there. A measurement
 *   that cannot run (the program does not build, no memory) leaves the
 *   type's default, with the reason.
 *
 * Not here: what the shapes are (each kernel family's two variants), the
 *   GEMM's configurations (native.c lists them from this result).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/kernel_ids.h"
#include "runtime/runtime_internal.h"

#define SHAPE_MAGIC "clformer-device-facts 3"
#define SHAPE_ROWS 512
#define SHAPE_COLS 1024
#define SHAPE_ROUNDS 3
#define SHAPE_MARGIN 1.15 /* the faster shape must be this much faster */
#define SHAPE_ITEM_LOCAL 16
#define SHAPE_GROUP_LOCAL 128
#define SHAPE_LOOP_N (1u << 18) /* iterations the loop probe asks for */
#define SHAPE_FMA_ITEMS 4096
#define SHAPE_FMA_ITERS 256
#define SHAPE_FMA_SLOW 3.0 /* fma() this many times a * b + c's time: emulated */

static const unsigned widths[3] = {4, 8, 16};

typedef struct shape_facts {
    int serial; /* item */
    unsigned vec;
    unsigned loops; /* iterations after which loops end; 0: none seen */
    int fma_slow;   /* fma() emulated: the kernels write a * b + c */
    int prefetch;   /* __builtin_prefetch on a __global pointer builds and runs */
    char reason[256];
} shape_facts;

static int facts_path(clf_runtime *rt, char *out, size_t cap)
{
    const char *dir = clf_runtime_cache_dir(rt);
    if (dir == NULL || dir[0] == '\0')
        return 0;
    int n = snprintf(out, cap, "%s/device-%s.txt", dir, clf_runtime_device_key(rt));
    return n > 0 && (size_t)n < cap;
}

/* The cached facts, if the file is whole and made from these kernels. */
static int facts_load(clf_runtime *rt, uint64_t hash, shape_facts *f)
{
    char path[4096], line[512], want[64];
    if (!facts_path(rt, path, sizeof path))
        return 0;
    FILE *fp = fopen(path, "r");
    if (fp == NULL)
        return 0;
    snprintf(want, sizeof want, "kernels %016llx\n", (unsigned long long)hash);
    char shape[16] = "";
    int ok = fgets(line, sizeof line, fp) != NULL && strcmp(line, SHAPE_MAGIC "\n") == 0 &&
             fgets(line, sizeof line, fp) != NULL && strcmp(line, want) == 0 &&
             fgets(line, sizeof line, fp) != NULL &&
             sscanf(line, "shape %15s vec %u", shape, &f->vec) == 2 &&
             (strcmp(shape, "item") == 0 || strcmp(shape, "group") == 0) &&
             (f->vec == 4 || f->vec == 8 || f->vec == 16) && fgets(line, sizeof line, fp) != NULL &&
             sscanf(line, "loops %u", &f->loops) == 1 && f->loops < SHAPE_LOOP_N &&
             fgets(line, sizeof line, fp) != NULL &&
             sscanf(line, "fma_slow %d", &f->fma_slow) == 1 &&
             (f->fma_slow == 0 || f->fma_slow == 1) && fgets(line, sizeof line, fp) != NULL &&
             sscanf(line, "prefetch %d", &f->prefetch) == 1 &&
             (f->prefetch == 0 || f->prefetch == 1) && fgets(line, sizeof line, fp) != NULL &&
             strncmp(line, "reason ", 7) == 0 && line[strlen(line) - 1] == '\n';
    if (ok) {
        f->serial = strcmp(shape, "item") == 0;
        line[strlen(line) - 1] = '\0';
        snprintf(f->reason, sizeof f->reason, "%.*s", (int)sizeof f->reason - 1, line + 7);
    }
    fclose(fp);
    return ok;
}

/* Best effort: the facts only save a measurement. */
static void facts_save(clf_runtime *rt, uint64_t hash, const shape_facts *f)
{
    char path[4096], tmp[4200];
    clf_error ignored;
    if (!facts_path(rt, path, sizeof path))
        return;
    if (clf_mkdir_p(clf_runtime_cache_dir(rt), &ignored) != CLF_OK) {
        clf_runtime_cache_write_failed(rt, clf_runtime_cache_dir(rt), errno);
        return;
    }
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    FILE *fp = fopen(tmp, "w");
    if (fp == NULL) {
        clf_runtime_cache_write_failed(rt, tmp, errno);
        return;
    }
    int ok = fprintf(fp,
                     "%s\nkernels %016llx\nshape %s vec %u\nloops %u\nfma_slow %d\nprefetch %d\n"
                     "reason %s\n",
                     SHAPE_MAGIC, (unsigned long long)hash, f->serial ? "item" : "group", f->vec,
                     f->loops, f->fma_slow, f->prefetch, f->reason) > 0;
    if (fclose(fp) != 0)
        ok = 0;
    if (!ok || rename(tmp, path) != 0) {
        clf_runtime_cache_write_failed(rt, path, errno);
        remove(tmp);
    }
}

/* One timed launch (after a drained queue); -1 when it failed. */
static double time_launch(clf_runtime *rt, clf_kernel *k, size_t global, size_t local, int n,
                          const clf_arg *args)
{
    clf_error e;
    if (clf_runtime_finish(rt, &e) != CLF_OK)
        return -1.0;
    const double t0 = clf_now_seconds();
    if (clf_kernel_launch(rt, k, 1, &global, &local, n, args, &e) != CLF_OK ||
        clf_runtime_finish(rt, &e) != CLF_OK)
        return -1.0;
    return clf_now_seconds() - t0;
}

/* Every row of out sums SHAPE_COLS ones. */
static int sums_right(clf_runtime *rt, clf_buffer *out)
{
    float got[SHAPE_ROWS];
    clf_error e;
    if (clf_buffer_read(rt, out, 0, got, sizeof got, &e) != CLF_OK)
        return 0;
    for (int r = 0; r < SHAPE_ROWS; r++)
        if (got[r] != (float)SHAPE_COLS)
            return 0;
    return 1;
}

/* The iterations one work-item's loop runs of SHAPE_LOOP_N asked: *loops
 * = 0 if all, else the count (a device that ends loops early). */
static clf_status measure_loops(clf_runtime *rt, unsigned *loops, clf_error *err)
{
    clf_kernel *k = NULL;
    clf_buffer *one = NULL, *out = NULL;
    clf_status st = clf_kernel_of(rt, CLF_K_SHAPE_LOOP_COUNT, &k, err);
    if (st == CLF_OK)
        st = clf_buffer_create(rt, 16 * sizeof(uint32_t), &one, err);
    if (st == CLF_OK)
        st = clf_buffer_create(rt, sizeof(uint32_t), &out, err);
    if (st == CLF_OK)
        st = clf_buffer_fill(rt, one, 0, 16 * sizeof(uint32_t), 1u, err);
    uint32_t got = 0;
    if (st == CLF_OK) {
        const size_t n1 = 1;
        const clf_arg a[3] = {CLF_ARG_BUF(one), CLF_ARG_U32(SHAPE_LOOP_N), CLF_ARG_BUF(out)};
        st = clf_kernel_launch(rt, k, 1, &n1, &n1, 3, a, err);
    }
    if (st == CLF_OK)
        st = clf_buffer_read(rt, out, 0, &got, sizeof got, err);
    clf_buffer_destroy(one);
    clf_buffer_destroy(out);
    if (st == CLF_OK)
        *loops = got == SHAPE_LOOP_N ? 0u : got;
    return st;
}

/* Seconds of the fastest of SHAPE_ROUNDS runs of the multiply-add chains
 * as fma() (t[0]) and as a * b + c (t[1]), each after a warm-up run. */
static clf_status measure_fma(clf_runtime *rt, double t[2], clf_error *err)
{
    clf_kernel *k[2] = {NULL, NULL};
    clf_buffer *out = NULL;
    clf_status st = clf_kernel_of(rt, CLF_K_SHAPE_FMA, &k[0], err);
    if (st == CLF_OK)
        st = clf_kernel_of(rt, CLF_K_SHAPE_MULADD, &k[1], err);
    if (st == CLF_OK)
        st = clf_buffer_create(rt, SHAPE_FMA_ITEMS * sizeof(float), &out, err);
    if (st != CLF_OK)
        return st;
    const clf_arg a[4] = {CLF_ARG_BUF(out), CLF_ARG_U32(SHAPE_FMA_ITERS), CLF_ARG_F32(0.999f),
                          CLF_ARG_F32(1e-3f)};
    const size_t global = SHAPE_FMA_ITEMS;
    for (int round = 0; round <= SHAPE_ROUNDS; round++)
        for (int c = 0; c < 2; c++) {
            const size_t local =
                clf_kernel_max_work_group(k[c]) < 32 ? clf_kernel_max_work_group(k[c]) : 32;
            const double tc = time_launch(rt, k[c], global, local, 4, a);
            if (tc < 0.0) {
                clf_buffer_destroy(out);
                return clf_error_set(err, CLF_ERR_OPENCL, "the multiply-add probe did not run");
            }
            if (round == 1 || (round > 1 && tc < t[c]))
                t[c] = tc; /* round 0 warms up */
        }
    clf_buffer_destroy(out);
    return CLF_OK;
}

/* The prefetch probe (see the header): 1 when the program builds with the
 * runtime's options and its one launch writes every element. */
static const char prefetch_probe_src[] =
    "#if defined(__SPIR__) || defined(__SPIR64__) || defined(__SPIRV__) || "
    "!defined(__has_builtin)\n"
    "#error \"no builtin prefetch on this path\"\n"
    "#elif !__has_builtin(__builtin_prefetch)\n"
    "#error \"no builtin prefetch\"\n"
    "#endif\n"
    "__kernel void clf_prefetch_probe(__global float *p, __global const float *q)\n"
    "{\n"
    "    const size_t i = get_global_id(0);\n"
    "    __builtin_prefetch(q + i + 16, 0, 3);\n"
    "    __builtin_prefetch(p + i + 16, 1, 3);\n"
    "    p[i] = q[i] + 1.0f;\n"
    "}\n";

#define PREFETCH_PROBE_N 64

static int probe_prefetch(clf_runtime *rt)
{
    cl_context ctx = clf_runtime_context(rt);
    cl_device_id dev = clf_runtime_device_id(rt);
    const char *src = prefetch_probe_src;
    cl_int rc;
    cl_program prog = clCreateProgramWithSource(ctx, 1, &src, NULL, &rc);
    if (rc != CL_SUCCESS)
        return 0;
    int ok = 0;
    cl_kernel k = NULL;
    cl_mem p = NULL, q = NULL;
    float in[PREFETCH_PROBE_N + 16], out[PREFETCH_PROBE_N + 16];
    for (int i = 0; i < PREFETCH_PROBE_N + 16; i++)
        in[i] = (float)i, out[i] = -1.0f;
    if (clBuildProgram(prog, 1, &dev, clf_runtime_options_get(rt)->build_options, NULL, NULL) !=
        CL_SUCCESS)
        goto done;
    k = clCreateKernel(prog, "clf_prefetch_probe", &rc);
    if (rc != CL_SUCCESS)
        goto done;
    p = clCreateBuffer(ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, sizeof out, out, &rc);
    if (rc == CL_SUCCESS)
        q = clCreateBuffer(ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, sizeof in, in, &rc);
    if (rc != CL_SUCCESS)
        goto done;
    const size_t global = PREFETCH_PROBE_N;
    cl_command_queue queue = clf_runtime_queue(rt);
    if (clSetKernelArg(k, 0, sizeof p, &p) != CL_SUCCESS ||
        clSetKernelArg(k, 1, sizeof q, &q) != CL_SUCCESS ||
        clEnqueueNDRangeKernel(queue, k, 1, NULL, &global, NULL, 0, NULL, NULL) != CL_SUCCESS ||
        clEnqueueReadBuffer(queue, p, CL_TRUE, 0, sizeof out, out, 0, NULL, NULL) != CL_SUCCESS)
        goto done;
    ok = 1;
    for (int i = 0; i < PREFETCH_PROBE_N + 16; i++)
        ok = ok && out[i] == (i < PREFETCH_PROBE_N ? (float)i + 1.0f : -1.0f);
done:
    if (p != NULL)
        clReleaseMemObject(p);
    if (q != NULL)
        clReleaseMemObject(q);
    if (k != NULL)
        clReleaseKernel(k);
    clReleaseProgram(prog);
    return ok;
}

/* Time the candidates: t[0..2] the item shape at widths 4, 8, 16, t[3]
 * the group shape (seconds; -1 for one that failed or summed wrong). */
static clf_status measure(clf_runtime *rt, double t[4], size_t *group_local, clf_error *err)
{
    clf_kernel *k[4] = {NULL};
    const clf_kernel_id ids[4] = {CLF_K_SHAPE_ROWS_ITEM4, CLF_K_SHAPE_ROWS_ITEM8,
                                  CLF_K_SHAPE_ROWS_ITEM16, CLF_K_SHAPE_ROWS_GROUP};
    clf_status st = CLF_OK;
    for (int c = 0; c < 4 && st == CLF_OK; c++)
        st = clf_kernel_of(rt, ids[c], &k[c], err);
    if (st != CLF_OK)
        return st;
    clf_buffer *x = NULL, *out = NULL;
    const size_t n = (size_t)SHAPE_ROWS * SHAPE_COLS;
    if ((st = clf_buffer_create(rt, n * sizeof(float), &x, err)) != CLF_OK ||
        (st = clf_buffer_create(rt, SHAPE_ROWS * sizeof(float), &out, err)) != CLF_OK) {
        clf_buffer_destroy(x);
        return st;
    }
    const float one = 1.0f;
    uint32_t bits;
    memcpy(&bits, &one, sizeof bits);
    st = clf_buffer_fill(rt, x, 0, n * sizeof(float), bits, err);
    size_t gl = 1;
    while (gl * 2 <= SHAPE_GROUP_LOCAL && gl * 2 <= clf_kernel_max_work_group(k[3]))
        gl *= 2;
    *group_local = gl;
    size_t global[4], local[4];
    for (int c = 0; c < 3; c++) {
        local[c] = clf_kernel_max_work_group(k[c]) < SHAPE_ITEM_LOCAL
                       ? clf_kernel_max_work_group(k[c])
                       : SHAPE_ITEM_LOCAL;
        global[c] = (SHAPE_ROWS + local[c] - 1) / local[c] * local[c];
    }
    local[3] = gl;
    global[3] = SHAPE_ROWS * gl;
    /* the item kernels read rows past SHAPE_ROWS when global is rounded up:
     * SHAPE_ROWS is a multiple of every local size tried (16 or less) */
    const clf_arg a[4] = {CLF_ARG_BUF(x), CLF_ARG_U64(SHAPE_COLS), CLF_ARG_BUF(out),
                          CLF_ARG_LOCAL(gl * sizeof(float))};
    for (int c = 0; c < 4 && st == CLF_OK; c++) {
        t[c] = time_launch(rt, k[c], global[c], local[c], c < 3 ? 3 : 4, a); /* warm-up */
        if (t[c] >= 0.0 && !sums_right(rt, out))
            t[c] = -1.0;
    }
    for (int round = 0; round < SHAPE_ROUNDS && st == CLF_OK; round++)
        for (int c = 0; c < 4; c++) {
            if (t[c] < 0.0)
                continue;
            const double tc = time_launch(rt, k[c], global[c], local[c], c < 3 ? 3 : 4, a);
            t[c] = tc < 0.0 ? -1.0 : (round == 0 || tc < t[c] ? tc : t[c]);
        }
    clf_buffer_destroy(x);
    clf_buffer_destroy(out);
    return st;
}

const char *clf_shape_choose(const double t[4], unsigned loop_limit, int type_serial,
                             unsigned type_vec, int *serial, unsigned *vec)
{
    int best = -1;
    for (int c = 0; c < 3; c++)
        if (t[c] >= 0.0 && (best < 0 || t[c] < t[best]))
            best = c;
    const double ti = best >= 0 ? t[best] : -1.0, tg = t[3];
    /* the width: among those within the margin of the fastest (a row sum
     * reads memory; widths that tie on it may not tie on arithmetic), the
     * one the device prefers, else the widest */
    int w = best;
    for (int c = 0; best >= 0 && c < 3; c++)
        if (t[c] >= 0.0 && t[c] <= t[best] * SHAPE_MARGIN &&
            (widths[c] == type_vec || (widths[w] != type_vec && widths[c] > widths[w])))
            w = c;
    *vec = w >= 0 ? widths[w] : 4;
    if (loop_limit != 0) { /* an item walking a row may not finish it */
        *serial = 0;
        return "loops end early";
    }
    if (ti < 0.0 && tg < 0.0) {
        *serial = type_serial;
        return "neither ran; by type";
    }
    if (tg < 0.0 || (ti >= 0.0 && ti * SHAPE_MARGIN < tg)) {
        *serial = 1;
        return "item faster";
    }
    if (ti < 0.0 || tg * SHAPE_MARGIN < ti) {
        *serial = 0;
        return "group faster";
    }
    *serial = type_serial;
    return "within 15%, by type";
}

/* The decision from the timings and the loop limit, with its reason. */
static void decide(const clf_device_info *d, const double t[4], size_t group_local,
                   const double tf[2], shape_facts *f)
{
    const char *why =
        clf_shape_choose(t, f->loops, d->serial_groups, d->pref_vec_float, &f->serial, &f->vec);
    char lim[96] = "";
    if (f->loops)
        snprintf(lim, sizeof lim, " (after %u iterations a work-item)", f->loops);
    f->fma_slow = tf[0] > SHAPE_FMA_SLOW * tf[1];
    const double ratio = tf[1] > 0.0 ? tf[0] / tf[1] : 1.0;
    snprintf(f->reason, sizeof f->reason,
             "%s%s: a %dx%d row sum, item x4 %.3f / x8 %.3f / x16 %.3f ms, group of %zu %.3f ms; "
             "fma() %.1fx a * b + c's time%s",
             why, lim, SHAPE_ROWS, SHAPE_COLS, t[0] * 1e3, t[1] * 1e3, t[2] * 1e3, group_local,
             t[3] * 1e3, ratio, f->fma_slow ? ", so a * b + c" : "");
}

void clf_shape_decide(clf_runtime *rt, clf_device_info *d, clf_shape forced)
{
    clf_error err;
    uint64_t hash = 0;
    shape_facts f;
    memset(&f, 0, sizeof f);
    const int known =
        clf_program_source_hash(rt, "shape", &hash, &err) == CLF_OK && facts_load(rt, hash, &f);
    if (forced == CLF_SHAPE_ITEM || forced == CLF_SHAPE_GROUP) {
        /* the shape as told; the loop limit and fma() from an earlier
         * measurement if there is one (nothing is measured: a simulator
         * would take long) */
        d->serial_groups = forced == CLF_SHAPE_ITEM;
        d->shape_source = CLF_SHAPE_FORCED;
        d->loop_limit = known ? f.loops : 0;
        d->fma_slow = known ? f.fma_slow : 0;
        d->prefetch_builtin = known ? f.prefetch : probe_prefetch(rt);
        snprintf(d->shape_reason, sizeof d->shape_reason, "forced");
        return;
    }
    if (known) {
        d->shape_source = CLF_SHAPE_CACHED;
    } else {
        double t[4] = {-1.0, -1.0, -1.0, -1.0};
        double tf[2] = {1.0, 1.0};
        size_t gl = 0;
        if (measure_loops(rt, &f.loops, &err) != CLF_OK || measure_fma(rt, tf, &err) != CLF_OK ||
            measure(rt, t, &gl, &err) != CLF_OK) {
            d->shape_source = CLF_SHAPE_BY_TYPE;
            snprintf(d->shape_reason, sizeof d->shape_reason, "by type (not measured: %.200s)",
                     err.msg);
            return;
        }
        decide(d, t, gl, tf, &f);
        f.prefetch = probe_prefetch(rt);
        facts_save(rt, hash, &f);
        d->shape_source = CLF_SHAPE_MEASURED;
    }
    d->serial_groups = f.serial;
    d->loop_limit = f.loops;
    d->fma_slow = f.fma_slow;
    d->prefetch_builtin = f.prefetch;
    if (f.serial)
        d->pref_vec_float = f.vec;
    snprintf(d->shape_reason, sizeof d->shape_reason, "%s", f.reason);
}
