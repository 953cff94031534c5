/*
 * test_kernel_build.c - every kernel family builds with the optimizer off
 * ("-cl-opt-disable", no binary cache), as it does with it on.
 *
 * Why: with optimizations off a compiler inlines nothing, so a helper that
 * is only an inline definition (plain `inline` in C99 semantics, which
 * clang-based GPU front ends follow) leaves an undefined symbol and the
 * program fails to link. On a CPU runtime at -O2 everything is inlined and
 * the mistake stays hidden. PoCL and Intel's runtime accept it even at
 * -cl-opt-disable, so every family's source (clf_program_source, with this
 * device's preamble and again with the GPU branch of it) also goes through
 * clang itself to SPIR at -O0 when clang is installed, and the module must
 * declare no function it does not define (OpenCL builtins, mangled _Z...,
 * and LLVM intrinsics aside), and no kernel may require a work-group of
 * more than 256 items (reqd_work_group_size): the smallest limit among the
 * GPUs we target, so a program never fails to build on one of them. Also: a
 * family that does not exist is refused naming it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <unistd.h>

#define PORTABLE_WG 256 /* the smallest max work-group size among target GPUs */

#include "runtime/runtime.h"
#include "tests/test_util.h"

/* Compile src with clang to SPIR at -O0; the undeclared non-builtin
 * functions, space-separated, into bad (empty: none), and the largest
 * required work-group (reqd_work_group_size, product of its sizes) into
 * *max_wg. -1 if clang failed. */
static int clang_undefined(const char *clang, const char *src, char *bad, size_t cap, long *max_wg)
{
    char cl[] = "/tmp/clf_kb_XXXXXX";
    int fd = mkstemp(cl);
    if (fd < 0)
        return -1;
    FILE *fp = fdopen(fd, "w");
    fputs(src, fp);
    fclose(fp);
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "%s -x cl -cl-std=CL1.2 -O0 -target spir64 -Xclang -finclude-default-header -S "
             "-emit-llvm -o - %s 2>/dev/null",
             clang, cl);
    FILE *p = popen(cmd, "r");
    char line[4096];
    int n_lines = 0;
    int reqd[256], n_reqd = 0;
    bad[0] = '\0';
    *max_wg = 0;
    while (p != NULL && fgets(line, sizeof line, p) != NULL) {
        n_lines++;
        const char *r = strstr(line, "!reqd_work_group_size !");
        if (r != NULL && n_reqd < 256)
            reqd[n_reqd++] = atoi(r + strlen("!reqd_work_group_size !"));
        int id = -1, x = 0, y = 0, z = 0;
        if (line[0] == '!' && sscanf(line, "!%d = !{i32 %d, i32 %d, i32 %d}", &id, &x, &y, &z) == 4)
            for (int i = 0; i < n_reqd; i++)
                if (reqd[i] == id && (long)x * y * z > *max_wg)
                    *max_wg = (long)x * y * z;
        if (strncmp(line, "declare ", 8) != 0)
            continue;
        const char *at = strchr(line, '@');
        if (at == NULL || strncmp(at, "@_Z", 3) == 0 || strncmp(at, "@llvm.", 6) == 0)
            continue;
        size_t k = strcspn(at + 1, "(");
        size_t used = strlen(bad);
        snprintf(bad + used, cap - used, "%s%.*s", used ? " " : "", (int)k, at + 1);
    }
    int rc = p != NULL ? pclose(p) : -1;
    unlink(cl);
    return rc == 0 && n_lines > 0 ? 0 : -1;
}

/* The source with the preamble switched to a GPU's parallel work-groups. */
static char *as_gpu(const char *src)
{
    char *g = strdup(src);
    char *c = g ? strstr(g, "#define CLF_SERIAL_GROUPS 1") : NULL;
    if (c != NULL)
        c[strlen("#define CLF_SERIAL_GROUPS ")] = '0';
    return g;
}

static void check_with_clang(clf_runtime *rt)
{
    const char *clang = getenv("CLF_CLANG") ? getenv("CLF_CLANG") : "clang";
    char probe[512];
    snprintf(probe, sizeof probe, "%s --version >/dev/null 2>&1", clang);
    if (system(probe) != 0) {
        printf("  skip clang's -O0 link check: no %s\n", clang);
        return;
    }
    for (const char *const *f = clf_program_families(); *f != NULL; f++) {
        char *src = NULL;
        clf_error err;
        tu_ok(clf_program_source(rt, *f, &src, &err), &err, "the family's source");
        char *gpu = as_gpu(src);
        const char *variants[2] = {src, gpu};
        for (int v = 0; v < 2; v++) {
            char bad[2048];
            long max_wg = 0;
            int rc = clang_undefined(clang, variants[v], bad, sizeof bad, &max_wg);
            TU_CHECK(rc == 0 && bad[0] == '\0',
                     "family '%s' (%s branch) compiles with clang -O0 and defines every function "
                     "it calls%s%s%s",
                     *f, v ? "GPU" : "this device's", rc ? " (clang failed)" : "",
                     bad[0] ? "; undefined: " : "", bad);
            TU_CHECK(max_wg <= PORTABLE_WG,
                     "family '%s' (%s branch): no kernel requires more than %d work-items per "
                     "group (largest: %ld)",
                     *f, v ? "GPU" : "this device's", PORTABLE_WG, max_wg);
        }
        free(gpu);
        free(src);
    }
}

int main(void)
{
    clf_runtime_options o = clf_runtime_options_default();
    o.device = getenv("CLFORMER_TEST_DEVICE");
    o.kernel_dir = getenv("CLFORMER_KERNEL_DIR");
    o.no_cache = 1;
    o.build_options = "-cl-opt-disable";
    clf_runtime *rt = NULL;
    clf_error err;
    tu_ok(clf_runtime_create(&rt, &o, &err), &err, "creating the runtime");
    printf("device: %s\n", clf_runtime_device(rt)->name);
    TU_CHECK(strcmp(clf_runtime_options_get(rt)->build_options, "-cl-std=CL1.2 -cl-opt-disable") ==
                 0,
             "the options are the defaults plus the extra ones: '%s'",
             clf_runtime_options_get(rt)->build_options);
    int n = 0;
    for (const char *const *f = clf_program_families(); *f != NULL; f++, n++) {
        clf_error_clear(&err);
        clf_status st = clf_program_load(rt, *f, &err);
        TU_CHECK(st == CLF_OK, "family '%s' builds with -cl-opt-disable%s%s", *f,
                 st == CLF_OK ? "" : ": ", st == CLF_OK ? "" : err.msg);
    }
    TU_CHECK(n >= 10, "%d kernel families are built in", n);
    check_with_clang(rt);
    clf_error_clear(&err);
    TU_CHECK(clf_program_load(rt, "no_such_family", &err) != CLF_OK &&
                 strstr(err.msg, "no_such_family") != NULL,
             "an unknown family is refused naming it");
    clf_runtime_destroy(rt);
    return tu_finish();
}
