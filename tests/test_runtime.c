/*
 * test_runtime.c - the runtime: device listing and selectors, buffers and
 * their range checks, launches with every argument kind (through a kernel
 * directory override), build failures that report file:line, the on-disk
 * binary cache (hit, truncated entry, corrupted entry, --no-cache) and
 * profiling.
 *
 * Kernel sources for these tests are written to a fresh temporary directory,
 * so the test does not depend on any family in cl/ except common.cl.
 */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/build_log.h"
#include "runtime/kernel_ids.h"
#include "tests/test_util.h"

static char tmpdir[256];

static void write_file(const char *dir, const char *name, const char *text)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (f == NULL || fputs(text, f) < 0 || fclose(f) != 0) {
        fprintf(stderr, "FATAL: cannot write %s\n", path);
        exit(1);
    }
}

static const char *k_test =
    "__kernel void axpb(__global float *y, ulong y_off, __global const float *x, ulong x_off,\n"
    "                   float a, int b, uint n, __local float *scratch)\n"
    "{\n"
    "    y += y_off; x += x_off;\n"
    "    size_t i = get_global_id(0);\n"
    "    scratch[get_local_id(0)] = (float)b;\n"
    "    barrier(CLK_LOCAL_MEM_FENCE);\n"
    "    if (i < n) y[i] = a * x[i] + scratch[get_local_id(0)];\n"
    "}\n";

static const char *k_bad = "__kernel void broken(__global float *y)\n"
                           "{\n"
                           "    y[0] = undefined_name + 1.0f;\n"
                           "}\n";

/* Find the one cache file of a family; returns 1 and its path. */
static int find_cache_file(const char *cache, const char *fam, char *out, size_t cap)
{
    char dir[320];
    snprintf(dir, sizeof dir, "%s/kernels", cache);
    DIR *d = opendir(dir);
    if (d == NULL)
        return 0;
    int found = 0;
    struct dirent *e;
    size_t fl = strlen(fam);
    while ((e = readdir(d)) != NULL)
        if (strncmp(e->d_name, fam, fl) == 0 && e->d_name[fl] == '-' &&
            strstr(e->d_name, ".tmp") == NULL) {
            snprintf(out, cap, "%.320s/%.255s", dir, e->d_name);
            found++;
        }
    closedir(d);
    return found == 1;
}

/* The "compile" notices a runtime gives. */
static void count_compiles(void *user, const char *event, const char *detail)
{
    (void)detail;
    if (strcmp(event, "compile") == 0)
        ++*(int *)user;
}

/* The options of a runtime on kernel directory kdir and cache (NULL:
 * none) whose cache keeps what `binaries` says. */
static clf_runtime_options rt_options(const char *kdir, const char *cache, clf_binaries binaries)
{
    clf_runtime_options o = tu_options();
    o.kernel_dir = kdir;
    o.cache_dir = cache;
    o.binaries = binaries;
    return o;
}

static clf_runtime *create_rt(const clf_runtime_options *o)
{
    clf_runtime *rt = NULL;
    clf_error err;
    tu_ok(clf_runtime_create(&rt, o, &err), &err, "creating a runtime");
    return rt;
}

/* rt_options' runtime, counting its compile notices into *compiles (NULL:
 * not counted). */
static clf_runtime *open_rt_binaries(const char *kdir, const char *cache, clf_binaries binaries,
                                     int *compiles)
{
    clf_runtime_options o = rt_options(kdir, cache, binaries);
    if (compiles != NULL) {
        *compiles = 0;
        o.notify = count_compiles;
        o.notify_user = compiles;
    }
    return create_rt(&o);
}

/* The binary cache's tests keep binaries whatever $CLFORMER_KERNEL_BINARIES
 * (tu_options) says. */
static clf_runtime *open_rt(const char *kdir, const char *cache, int no_cache, int profile)
{
    clf_runtime_options o = rt_options(kdir, cache, CLF_BINARIES_KEEP);
    o.no_cache = no_cache;
    o.profile = profile;
    return create_rt(&o);
}

/* Launch axpb over n elements and check the result; returns 1 if right. */
static int run_axpb(clf_runtime *rt, size_t n)
{
    clf_error err;
    clf_kernel *k = NULL;
    tu_ok(clf_kernel_get(rt, "t", "axpb", &k, &err), &err, "getting kernel axpb");
    float *x = malloc(n * 4), *y = malloc(n * 4);
    for (size_t i = 0; i < n; i++)
        x[i] = (float)i * 0.5f;
    clf_ptr dx = tu_upload(rt, x, n);
    clf_ptr dy = tu_alloc(rt, n + 3);
    /* 64, or less where the kernel allows less (Mesa's llvmpipe: 32) */
    size_t g = n, l = clf_kernel_max_work_group(k) < 64 ? clf_kernel_max_work_group(k) : 64;
    clf_arg args[] = {CLF_ARG_BUF(dy.buf), CLF_ARG_U64(3),      CLF_ARG_BUF(dx.buf),
                      CLF_ARG_U64(0),      CLF_ARG_F32(2.0f),   CLF_ARG_I32(-7),
                      CLF_ARG_U32(n),      CLF_ARG_LOCAL(l * 4)};
    tu_ok(clf_kernel_launch(rt, k, 1, &g, &l, 8, args, &err), &err, "launching axpb");
    /* a second dimension of more than 65535 groups is refused on every
     * device (some GPU drivers cap it), before anything is enqueued */
    size_t g2[2] = {1, (size_t)CLF_MAX_GROUPS_YZ + 1}, l2[2] = {1, 1};
    clf_error_clear(&err);
    TU_CHECK(clf_kernel_launch(rt, k, 2, g2, l2, 8, args, &err) == CLF_ERR_ARG &&
                 strstr(err.msg, "dimension 1") != NULL,
             "65536 groups in dimension 1 are refused: %s", err.msg);
    tu_download(rt, clf_ptr_at(dy, 3), y, n);
    int ok = 1;
    for (size_t i = 0; i < n; i++)
        if (y[i] != 2.0f * x[i] - 7.0f)
            ok = 0;
    tu_free(dx);
    tu_free(dy);
    free(x);
    free(y);
    return ok;
}

static void test_devices(void)
{
    clf_device_info *d = NULL;
    int n = 0, idx = -1;
    clf_error err;
    tu_ok(clf_devices_list(&d, &n, &err), &err, "listing devices");
    TU_CHECK(n >= 1, "at least one device listed (%d)", n);
    TU_CHECK(clf_devices_select(d, n, "0", &idx, &err) == CLF_OK && idx == 0,
             "'0' selects device 0");
    char pd[32];
    snprintf(pd, sizeof pd, "%d:%d", d[0].platform_index, d[0].device_index);
    TU_CHECK(clf_devices_select(d, n, pd, &idx, &err) == CLF_OK && idx == 0,
             "'%s' selects device 0", pd);
    TU_CHECK(clf_devices_select(d, n, d[0].type, &idx, &err) == CLF_OK &&
                 strcmp(d[idx].type, d[0].type) == 0,
             "type selector '%s' selects a device of that type", d[0].type);
    /* A lower-cased piece of the name from its middle. */
    char sub[8] = {0};
    size_t nl = strlen(d[0].name);
    memcpy(sub, d[0].name + nl / 2, nl - nl / 2 < 5 ? nl - nl / 2 : 5);
    for (char *p = sub; *p; p++)
        if (*p >= 'A' && *p <= 'Z')
            *p = (char)(*p - 'A' + 'a');
    TU_CHECK(clf_devices_select(d, n, sub, &idx, &err) == CLF_OK, "name substring '%s' matches",
             sub);
    clf_status st = clf_devices_select(d, n, "nosuchdevice", &idx, &err);
    TU_CHECK(st == CLF_ERR_NO_DEVICE && strstr(err.msg, d[0].name) != NULL,
             "'nosuchdevice' fails with CLF_ERR_NO_DEVICE and lists the devices");
    st = clf_devices_select(d, n, "99", &idx, &err);
    TU_CHECK(st == CLF_ERR_NO_DEVICE, "an out-of-range index fails");
    char bad[32];
    snprintf(bad, sizeof bad, "%s:%d", d[0].type, n + 5);
    TU_CHECK(clf_devices_select(d, n, bad, &idx, &err) == CLF_ERR_NO_DEVICE, "'%s' fails", bad);
    TU_CHECK(clf_devices_select(d, n, NULL, &idx, &err) == CLF_OK && idx >= 0 && idx < n,
             "the default selection picks a device");
    free(d);
}

static void test_buffers(clf_runtime *rt)
{
    clf_error err;
    clf_buffer *b = NULL;
    size_t now0 = 0, peak0 = 0, now1 = 0, peak1 = 0;
    clf_runtime_memory(rt, &now0, &peak0);
    tu_ok(clf_buffer_create(rt, 1024, &b, &err), &err, "create");
    TU_CHECK(clf_buffer_size(b) == 1024, "buffer size is kept");
    clf_runtime_memory(rt, &now1, &peak1);
    TU_CHECK(now1 == now0 + 1024 && peak1 >= now1 && peak1 >= peak0,
             "the runtime counts the buffer's bytes (%zu -> %zu, peak %zu)", now0, now1, peak1);
    float h[256], g[256];
    for (int i = 0; i < 256; i++)
        h[i] = (float)i - 100.0f;
    tu_ok(clf_buffer_write(rt, b, 0, h, sizeof h, &err), &err, "write");
    tu_ok(clf_buffer_fill(rt, b, 16, 32, 0x3f800000u, &err), &err, "fill");
    tu_ok(clf_buffer_read(rt, b, 0, g, sizeof g, &err), &err, "read");
    int ok = 1;
    for (int i = 0; i < 256; i++)
        ok &= g[i] == ((i >= 4 && i < 12) ? 1.0f : h[i]);
    TU_CHECK(ok, "write, fill at an offset, read back");
    clf_buffer *c = NULL;
    tu_ok(clf_buffer_create(rt, 1024, &c, &err), &err, "create");
    tu_ok(clf_buffer_copy(rt, b, 8, c, 0, 512, &err), &err, "copy");
    tu_ok(clf_buffer_read(rt, c, 0, g, 512, &err), &err, "read");
    ok = 1;
    for (int i = 0; i < 128; i++)
        ok &= g[i] == ((i + 2 >= 4 && i + 2 < 12) ? 1.0f : h[i + 2]);
    TU_CHECK(ok, "copy between buffers at offsets");
    TU_CHECK(clf_buffer_read(rt, b, 1000, g, 100, &err) == CLF_ERR_ARG &&
                 strstr(err.msg, "outside") != NULL,
             "a read past the end is refused: %s", err.msg);
    size_t too_big = (size_t)clf_runtime_device(rt)->max_alloc + 4096;
    clf_buffer *x = NULL;
    TU_CHECK(clf_buffer_create(rt, too_big, &x, &err) == CLF_ERR_MEMORY &&
                 strstr(err.msg, "CL_DEVICE_MAX_MEM_ALLOC_SIZE") != NULL && x == NULL,
             "an allocation over the device limit is refused with the limit named");
    clf_buffer_destroy(b);
    clf_buffer_destroy(c);
    clf_buffer_destroy(NULL);
    size_t now2 = 0;
    clf_runtime_memory(rt, &now2, NULL);
    TU_CHECK(now2 == now0, "destroying them gives the bytes back (%zu)", now2);
}

/* The measured FMA peak: positive, finite, and two measurements agree to
 * within a factor 4 (a shared machine may slow one of them down). */
static void test_peak(void)
{
    printf("measured peak\n");
    clf_runtime *rt = tu_runtime();
    clf_error err;
    double a = 0, b = 0;
    tu_ok(clf_runtime_peak_gflops(rt, &a, &err), &err, "peak");
    tu_ok(clf_runtime_peak_gflops(rt, &b, &err), &err, "peak again");
    printf("  %.1f and %.1f GFLOP/s\n", a, b);
    TU_CHECK(isfinite(a) && isfinite(b) && a > 0.1 && b > 0.1,
             "the peak is a positive number of GFLOP/s (%.3g, %.3g)", a, b);
    TU_CHECK(a < 4 * b && b < 4 * a, "two measurements agree within 4x (%.3g, %.3g)", a, b);
    clf_runtime_destroy(rt);
}

/* A front end that ignores #line (NVIDIA's: "<kernel>:1257:25") has its
 * log's locations rewritten from the source's markers: the file's own line,
 * the column kept; a location already naming a file, a line before the
 * first marker and a bracketed name without a line stay as they are. */
static void build_log_lines(void)
{
    printf("build log locations\n");
    const char *src = "/* generated preamble */\n#define X 1\n#line 1 \"common.cl\"\na\nb\n"
                      "#line 1 \"t3/b.cl\"\nk1\nk2\nk3\n";
    const char *log = "<kernel>:9:5: error: use of undeclared identifier\n"
                      "<kernel>:5:1: note: expanded from here\n<kernel>:2:1: early\n"
                      "bad.cl:3:1: named\n<built-in>: fine\n<kernel>:7:2: last";
    const char *want = "t3/b.cl:3:5: error: use of undeclared identifier\n"
                       "common.cl:2:1: note: expanded from here\n<kernel>:2:1: early\n"
                       "bad.cl:3:1: named\n<built-in>: fine\nt3/b.cl:1:2: last";
    char *got = clf_build_log_locate(src, log);
    TU_CHECK(got != NULL && strcmp(got, want) == 0, "raw lines become file:line: '%s'",
             got != NULL ? got : "(null)");
    free(got);
    got = clf_build_log_locate("no markers\n", log);
    TU_CHECK(got != NULL && strcmp(got, log) == 0, "without markers the log is unchanged");
    free(got);
}

/* A kernel file that does not build, an unknown kernel, a missing file. */
static void build_failures(const char *kdir)
{
    printf("build failures\n");
    clf_runtime *rt = open_rt(kdir, NULL, 1, 0);
    clf_error err;
    clf_kernel *k = NULL;
    clf_status st = clf_kernel_get(rt, "bad", "broken", &k, &err);
    TU_CHECK(st == CLF_ERR_BUILD, "a broken kernel file fails with CLF_ERR_BUILD");
    TU_CHECK(strstr(err.msg, "bad.cl:3") != NULL, "the build log points at bad.cl:3: %s", err.msg);
    TU_CHECK(strstr(err.msg, clf_runtime_device(rt)->name) != NULL &&
                 strstr(err.msg, "-cl-std") != NULL,
             "the message names the device and the options");
    st = clf_kernel_get(rt, "t", "no_such_kernel", &k, &err);
    TU_CHECK(st == CLF_ERR_OPENCL && strstr(err.code_name, "CL_INVALID_KERNEL_NAME") != NULL,
             "an unknown kernel name reports CL_INVALID_KERNEL_NAME");
    st = clf_kernel_get(rt, "no_such_family", "x", &k, &err);
    TU_CHECK(st == CLF_ERR_IO && strstr(err.msg, "no_such_family.cl") != NULL,
             "a missing kernel file is named");
    clf_runtime_destroy(rt);
}

/* The kernel table (runtime/kernel_ids.h) against the real sources: every
 * row's kernel exists, its handle is the one found by name, a second
 * lookup is the same handle, and ids or families that do not match fail. */
/* A family kept as a folder: its .cl files in name order, each named in the
 * build log (runtime/program.c, cmake/embed_kernels.cmake). */
static void kernel_folder(const char *kdir)
{
    printf("kernel folders\n");
    char dir[400];
    snprintf(dir, sizeof dir, "%s/t2", kdir);
    mkdir(dir, 0755);
    /* b-use.cl needs what a-helper.cl defines: built only in name order */
    write_file(dir, "b-use.cl",
               "__kernel void t2_scale(__global float *y) { y[0] = t2_helper(y[0]); }\n");
    write_file(dir, "a-helper.cl",
               "#define T2_SCALE 3.0f\n"
               "static inline float t2_helper(float x) { return T2_SCALE * x; }\n");
    write_file(dir, "notes.txt", "not a kernel source\n");
    snprintf(dir, sizeof dir, "%s/t3", kdir);
    mkdir(dir, 0755);
    write_file(dir, "a.cl", "static inline float t3_id(float x) { return x; }\n");
    write_file(dir, "b.cl", "__kernel void t3_bad(__global float *y)\n{\n    y[0] = nowhere;\n}\n");
    snprintf(dir, sizeof dir, "%s/t4", kdir);
    mkdir(dir, 0755);

    clf_runtime *rt = open_rt(kdir, NULL, 1, 0);
    clf_error err;
    clf_kernel *k = NULL;
    clf_status st = clf_kernel_get(rt, "t2", "t2_scale", &k, &err);
    TU_CHECK(st == CLF_OK, "a folder family builds from its files in name order (%s)",
             st == CLF_OK ? "ok" : err.msg);
    char *src = NULL;
    st = clf_program_source(rt, "t2", &src, &err);
    TU_CHECK(st == CLF_OK && src != NULL && strstr(src, "#line 1 \"t2/a-helper.cl\"") != NULL &&
                 strstr(src, "#line 1 \"t2/a-helper.cl\"") <
                     strstr(src, "#line 1 \"t2/b-use.cl\"") &&
                 strstr(src, "not a kernel source") == NULL,
             "its source: each .cl file after a #line naming it, nothing else");
    free(src);
    st = clf_kernel_get(rt, "t3", "t3_bad", &k, &err);
    TU_CHECK(st == CLF_ERR_BUILD && strstr(err.msg, "t3/b.cl:3") != NULL,
             "a folder family's build log points at the part's own line (t3/b.cl:3)");
    st = clf_kernel_get(rt, "t4", "x", &k, &err);
    TU_CHECK(st == CLF_ERR_IO && strstr(err.msg, "t4") != NULL && strstr(err.msg, "no .cl") != NULL,
             "an empty kernel folder is an error naming it");
    clf_runtime_destroy(rt);
}

/* What a program's source holds from files: everything from its first
 * #line marker on. Before it is the generated preamble, whose defines carry
 * the device's measured facts (the item shape's vector width, fma()'s
 * speed): two runtimes of one process may read different facts when
 * another process measures the device between their creations (seen in a
 * parallel suite on a fresh cache: x8 and x16 within 3% of each other). */
static const char *file_text(const char *src)
{
    const char *p = src != NULL ? strstr(src, "#line 1 ") : NULL;
    return p != NULL ? p : "";
}

/* Every family built into the binary is the text of the cl/ folder it came
 * from (files and folders read as cmake/embed_kernels.cmake embeds them). */
static void embedded_sources(void)
{
    printf("embedded sources\n");
    const char *src_dir = getenv("CLF_SOURCE_DIR") ? getenv("CLF_SOURCE_DIR") : ".";
    char cl[400];
    snprintf(cl, sizeof cl, "%s/cl", src_dir);
    clf_runtime *emb = open_rt(NULL, NULL, 1, 0), *dir = open_rt(cl, NULL, 1, 0);
    const char *const *fams = clf_program_families();
    int n = 0, same = 0, folder = 0;
    for (int i = 0; fams[i] != NULL; i++, n++) {
        char *a = NULL, *b = NULL;
        clf_error err;
        const int eq = clf_program_source(emb, fams[i], &a, &err) == CLF_OK &&
                       clf_program_source(dir, fams[i], &b, &err) == CLF_OK &&
                       file_text(a)[0] != '\0' && strcmp(file_text(a), file_text(b)) == 0;
        free(a);
        free(b);
        if (eq)
            same++;
        else
            printf("  %s: the embedded source differs from %s's\n", fams[i], cl);
        folder += strcmp(fams[i], "flash") == 0;
    }
    TU_CHECK(n > 10 && same == n, "%d of %d embedded families equal cl/'s sources", same, n);
    TU_CHECK(folder == 1, "the folder family flash is among them");
    clf_runtime_destroy(emb);
    clf_runtime_destroy(dir);
}

static void kernel_table(void)
{
    printf("kernel table\n");
    clf_runtime *rt = tu_runtime();
    clf_error err;
    int found = 0;
    for (int id = 0; id < CLF_K_COUNT; id++) {
        clf_kernel *k = NULL, *again = NULL, *named = NULL;
        if (clf_kernel_of(rt, (clf_kernel_id)id, &k, &err) != CLF_OK ||
            clf_kernel_of(rt, (clf_kernel_id)id, &again, &err) != CLF_OK ||
            clf_kernel_get(rt, clf_kernel_id_family((clf_kernel_id)id),
                           clf_kernel_id_name((clf_kernel_id)id), &named, &err) != CLF_OK) {
            TU_CHECK(0, "kernel %s of %s: %s", clf_kernel_id_name((clf_kernel_id)id),
                     clf_kernel_id_family((clf_kernel_id)id), err.msg);
            continue;
        }
        found += k != NULL && k == again && k == named;
    }
    TU_CHECK(found == CLF_K_COUNT,
             "every row's kernel is created once, the handle its name finds "
             "(%d of %d)",
             found, (int)CLF_K_COUNT);
    clf_kernel *k = NULL, *k16 = NULL;
    TU_CHECK(clf_kernel_variant_of(rt, "norm", CLF_K_FLASH_FWD, &k, &err) == CLF_ERR_ARG &&
                 strstr(err.msg, "attn_flash_fwd") != NULL && k == NULL,
             "a kernel asked of another family's program is refused, named");
    TU_CHECK(clf_kernel_of(rt, CLF_K_COUNT, &k, &err) == CLF_ERR_ARG,
             "an id outside the table is refused");
    tu_ok(clf_program_set_defines(rt, "flash@bf16", "#define FA_T 1\n", &err), &err, "variant");
    tu_ok(clf_kernel_variant_of(rt, "flash@bf16", CLF_K_FLASH_FWD, &k16, &err), &err,
          "a variant's kernel");
    tu_ok(clf_kernel_of(rt, CLF_K_FLASH_FWD, &k, &err), &err, "the family's kernel");
    TU_CHECK(k16 != NULL && k16 != k, "a variant's kernel is its own program's");
    clf_runtime_destroy(rt);
}

/* A kernel file that lacks a kernel its table rows name fails when its
 * program is loaded, naming the kernel (not at that kernel's first launch). */
static void kernel_table_missing(const char *kdir)
{
    printf("kernel table: a missing kernel\n");
    write_file(kdir, "convert.cl",
               "__kernel void widen_bf16(__global float *x) { x[0] = 1.0f; }\n");
    clf_runtime *rt = open_rt(kdir, NULL, 1, 0);
    clf_error err;
    clf_kernel *k = NULL;
    clf_status st = clf_kernel_of(rt, CLF_K_WIDEN_BF16, &k, &err);
    TU_CHECK(st == CLF_ERR_OPENCL && strstr(err.code_name, "CL_INVALID_KERNEL_NAME") != NULL &&
                 strstr(err.msg, "narrow_bf16") != NULL,
             "loading convert.cl without narrow_bf16 fails naming it (%s)", err.msg);
    clf_runtime_destroy(rt);
}

/* The binary cache: a cold start compiles and writes one entry (its path
 * into path), a warm one loads it. */
static void cache_warm(const char *kdir, const char *cache, char *path, size_t cap)
{
    printf("binary cache\n");
    clf_runtime *rt = open_rt(kdir, cache, 0, 0);
    TU_CHECK(run_axpb(rt, 77), "cold run correct");
    clf_program_stats s = clf_runtime_program_stats(rt);
    TU_CHECK(s.built == 1 && s.cache_hits == 0, "cold start compiles (built %d, hits %d)", s.built,
             s.cache_hits);
    double cold = s.load_seconds;
    clf_runtime_destroy(rt);
    TU_CHECK(find_cache_file(cache, "t", path, cap), "one cache file was written");

    rt = open_rt(kdir, cache, 0, 0);
    TU_CHECK(run_axpb(rt, 77), "warm run correct");
    s = clf_runtime_program_stats(rt);
    TU_CHECK(s.built == 0 && s.cache_hits == 1,
             "warm start loads from the cache (built %d, hits %d)", s.built, s.cache_hits);
    printf("  program load: cold %.1f ms, warm %.1f ms\n", cold * 1e3, s.load_seconds * 1e3);
    clf_runtime_destroy(rt);
}

/* A damaged entry (truncated, corrupted, garbage) is detected, rebuilt and
 * rewritten. */
static void cache_damage(const char *kdir, const char *cache, const char *path)
{
    clf_runtime *rt;
    clf_program_stats s;
    /* Truncate the entry: detected, rebuilt, rewritten. */
    size_t len = 0;
    char *bytes = tu_read_file(path, &len);
    TU_CHECK(bytes != NULL && len > 64, "cache file readable (%zu bytes)", len);
    if (bytes == NULL)
        return;
    if (truncate(path, (off_t)(len / 2)) != 0)
        perror("truncate");
    rt = open_rt(kdir, cache, 0, 0);
    TU_CHECK(run_axpb(rt, 77), "correct after a truncated cache entry");
    s = clf_runtime_program_stats(rt);
    TU_CHECK(s.cache_reject == 1 && s.built == 1,
             "truncated entry rejected and rebuilt (reject %d, built %d)", s.cache_reject, s.built);
    clf_runtime_destroy(rt);
    size_t len2 = 0;
    char *again = tu_read_file(path, &len2);
    TU_CHECK(again != NULL && len2 == len, "entry rewritten at full size (%zu)", len2);
    free(again);

    /* Flip bytes in the binary: checksum catches it. */
    bytes[len - 10] ^= 0x5a;
    bytes[len / 2] ^= 0xa5;
    FILE *f = fopen(path, "wb");
    fwrite(bytes, 1, len, f);
    fclose(f);
    rt = open_rt(kdir, cache, 0, 0);
    TU_CHECK(run_axpb(rt, 77), "correct after a corrupted cache entry");
    s = clf_runtime_program_stats(rt);
    TU_CHECK(s.cache_reject == 1 && s.built == 1, "corrupted entry rejected and rebuilt");
    clf_runtime_destroy(rt);

    /* Garbage of the right name. */
    f = fopen(path, "wb");
    fputs("not a cache file", f);
    fclose(f);
    rt = open_rt(kdir, cache, 0, 0);
    TU_CHECK(run_axpb(rt, 77), "correct after a garbage cache entry");
    TU_CHECK(clf_runtime_program_stats(rt).cache_reject == 1, "garbage entry rejected");
    clf_runtime_destroy(rt);
    free(bytes);
}

/* A changed source gets a new key; no_cache neither reads nor writes. */
static void cache_keys(const char *kdir, const char *cache)
{
    /* A changed source gets a new key. */
    char *k2 = malloc(strlen(k_test) + 64);
    sprintf(k2, "/* changed */\n%s", k_test);
    write_file(kdir, "t.cl", k2);
    free(k2);
    clf_runtime *rt = open_rt(kdir, cache, 0, 0);
    TU_CHECK(run_axpb(rt, 77), "correct after a source change");
    clf_program_stats s = clf_runtime_program_stats(rt);
    TU_CHECK(s.built == 1 && s.cache_hits == 0 && s.cache_reject == 0,
             "a changed source is compiled, not taken from the cache");
    clf_runtime_destroy(rt);

    /* no_cache neither reads nor writes. */
    char cache2[320];
    snprintf(cache2, sizeof cache2, "%s/cache2", tmpdir);
    rt = open_rt(kdir, cache2, 1, 0);
    TU_CHECK(run_axpb(rt, 5), "no-cache run correct");
    clf_runtime_destroy(rt);
    struct stat stt;
    TU_CHECK(stat(cache2, &stt) != 0, "no-cache wrote no cache directory");
}

/* The binary size an entry's header records (its fourth field), or -1
 * when the file cannot be read. */
static long long entry_binary_size(const char *path)
{
    unsigned char h[40];
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return -1;
    const int ok = fread(h, 1, sizeof h, f) == sizeof h;
    fclose(f);
    uint64_t size = 0;
    memcpy(&size, h + 24, sizeof size); /* magic 8, version 4, key length 4, key hash 8 */
    return ok ? (long long)size : -1;
}

/* Notes instead of binaries (CLF_BINARIES_NOTE): a cold start compiles,
 * announced, and writes an entry that holds no binary; a warm start builds
 * the source again unannounced (rebuilt: neither built nor a hit); a
 * damaged note is rejected and the source compiled as on a cold start; a
 * runtime that keeps binaries puts its binary in the note's place, and a
 * binary loads whatever the runtime keeps. */
static void cache_notes(const char *kdir)
{
    printf("the cache's notes of built sources\n");
    clf_binaries b = CLF_BINARIES_NOTE;
    TU_CHECK(clf_binaries_parse(NULL, &b) && b == CLF_BINARIES_KEEP && clf_binaries_parse("", &b) &&
                 b == CLF_BINARIES_KEEP && clf_binaries_parse("notes", &b) &&
                 b == CLF_BINARIES_NOTE && clf_binaries_parse("keep", &b) &&
                 b == CLF_BINARIES_KEEP && !clf_binaries_parse("Notes", &b) &&
                 b == CLF_BINARIES_KEEP,
             "keep, notes, unset and empty are read; anything else is refused");
    char cache[320], path[600];
    snprintf(cache, sizeof cache, "%s/cache-notes", tmpdir);
    int compiles = 0;
    clf_runtime *rt = open_rt_binaries(kdir, cache, CLF_BINARIES_NOTE, &compiles);
    TU_CHECK(run_axpb(rt, 77), "cold run correct");
    clf_program_stats s = clf_runtime_program_stats(rt);
    clf_runtime_destroy(rt);
    TU_CHECK(s.built == 1 && s.rebuilt == 0 && s.cache_hits == 0 && compiles == 1,
             "a cold start compiles, announced (built %d, rebuilt %d, hits %d, notices %d)",
             s.built, s.rebuilt, s.cache_hits, compiles);
    TU_CHECK(find_cache_file(cache, "t", path, sizeof path), "one cache entry was written");
    size_t len = 0;
    free(tu_read_file(path, &len));
    TU_CHECK(entry_binary_size(path) == 0 && len > 40 && len < 1024,
             "the entry is a note: no binary (recorded size %lld, %zu bytes)",
             entry_binary_size(path), len);

    rt = open_rt_binaries(kdir, cache, CLF_BINARIES_NOTE, &compiles);
    TU_CHECK(run_axpb(rt, 77), "warm run correct");
    s = clf_runtime_program_stats(rt);
    clf_runtime_destroy(rt);
    TU_CHECK(s.built == 0 && s.rebuilt == 1 && s.cache_hits == 0 && compiles == 0,
             "a warm start builds the noted source again, unannounced (built %d, rebuilt %d, "
             "hits %d, notices %d)",
             s.built, s.rebuilt, s.cache_hits, compiles);

    if (truncate(path, 20) != 0)
        perror("truncate");
    rt = open_rt_binaries(kdir, cache, CLF_BINARIES_NOTE, &compiles);
    TU_CHECK(run_axpb(rt, 77), "correct after a damaged note");
    s = clf_runtime_program_stats(rt);
    clf_runtime_destroy(rt);
    size_t len2 = 0;
    free(tu_read_file(path, &len2));
    TU_CHECK(s.cache_reject == 1 && s.built == 1 && s.rebuilt == 0 && compiles == 1 &&
                 len2 == len && entry_binary_size(path) == 0,
             "a damaged note is rejected, compiled announced and written again (reject %d, "
             "built %d, notices %d, %zu bytes)",
             s.cache_reject, s.built, compiles, len2);

    rt = open_rt_binaries(kdir, cache, CLF_BINARIES_KEEP, &compiles);
    TU_CHECK(run_axpb(rt, 77), "correct when keeping binaries over a note");
    s = clf_runtime_program_stats(rt);
    clf_runtime_destroy(rt);
    TU_CHECK(s.rebuilt == 1 && compiles == 0 && entry_binary_size(path) > 0,
             "a runtime keeping binaries puts the binary in the note's place (rebuilt %d, "
             "notices %d, size %lld)",
             s.rebuilt, compiles, entry_binary_size(path));
    rt = open_rt_binaries(kdir, cache, CLF_BINARIES_NOTE, &compiles);
    TU_CHECK(run_axpb(rt, 77), "correct from a binary, keeping notes");
    s = clf_runtime_program_stats(rt);
    clf_runtime_destroy(rt);
    TU_CHECK(s.cache_hits == 1 && s.built + s.rebuilt == 0 && compiles == 0,
             "a binary there is loaded, whatever the runtime keeps (hits %d)", s.cache_hits);
}

/* The profile counts launches per kernel. */
static void profiling(const char *kdir)
{
    clf_error err;
    printf("profiling\n");
    clf_runtime *rt = open_rt(kdir, NULL, 1, 1);
    for (int i = 0; i < 3; i++)
        run_axpb(rt, 100);
    clf_profile_entry *e = NULL;
    int ne = 0;
    tu_ok(clf_profile_report(rt, &e, &ne, &err), &err, "profile report");
    int found = 0;
    for (int i = 0; i < ne; i++)
        if (strcmp(e[i].name, "axpb") == 0 && e[i].count == 3 && e[i].seconds >= 0.0)
            found = 1;
    TU_CHECK(found, "profile counts 3 launches of axpb");
    free(e);
    clf_runtime_destroy(rt);
}

int main(void)
{
    tu_seed();
    test_peak();
    const char *base = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(tmpdir, sizeof tmpdir, "%s/clf-test-runtime-XXXXXX", base);
    if (mkdtemp(tmpdir) == NULL) {
        perror("mkdtemp");
        return 1;
    }
    char kdir[300], cache[300], path[600];
    snprintf(kdir, sizeof kdir, "%s/kernels", tmpdir);
    snprintf(cache, sizeof cache, "%s/cache", tmpdir);
    mkdir(kdir, 0755);

    /* The real common.cl, so the preamble contract is what is tested. */
    const char *src_dir = getenv("CLF_SOURCE_DIR") ? getenv("CLF_SOURCE_DIR") : ".";
    snprintf(path, sizeof path, "%s/cl/common.cl", src_dir);
    size_t n = 0;
    char *common = tu_read_file(path, &n);
    if (common == NULL) {
        fprintf(stderr, "FATAL: cannot read %s\n", path);
        return 1;
    }
    write_file(kdir, "common.cl", common);
    free(common);
    write_file(kdir, "t.cl", k_test);
    write_file(kdir, "bad.cl", k_bad);

    printf("devices and selectors\n");
    test_devices();

    printf("buffers\n");
    clf_runtime *rt = open_rt(kdir, NULL, 1, 0);
    test_buffers(rt);

    printf("launches\n");
    TU_CHECK(run_axpb(rt, 1000), "a launch with buffer, offset, float, int, uint and local args");
    TU_CHECK(run_axpb(rt, 1), "a launch over 1 element (global rounded up to the group)");
    clf_runtime_destroy(rt);

    build_log_lines();
    build_failures(kdir);
    kernel_folder(kdir);
    embedded_sources();
    kernel_table();
    kernel_table_missing(kdir);
    cache_warm(kdir, cache, path, sizeof path);
    cache_damage(kdir, cache, path);
    cache_keys(kdir, cache);
    cache_notes(kdir);
    profiling(kdir);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0)
        printf("  (could not remove %s)\n", tmpdir);
    return tu_finish();
}
