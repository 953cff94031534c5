/*
 * test_kernel_build.c - every kernel family builds with the optimizer off
 * ("-cl-opt-disable", no binary cache), as it does with it on.
 *
 * Why: with optimizations off a compiler inlines nothing, so a helper that
 * is only an inline definition (plain `inline` in C99 semantics, which
 * clang-based GPU front ends follow) leaves an undefined symbol and the
 * program fails to link. On a CPU runtime at -O2 everything is inlined and
 * the mistake stays hidden. PoCL and Intel's runtime accept it even at
 * -cl-opt-disable; test_spirv.c checks every variant on the SPIR-V path,
 * which does not. Also: a family that does not exist is refused naming it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/runtime.h"
#include "tests/test_util.h"

int main(void)
{
    clf_runtime_options o = tu_options();
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
    clf_error_clear(&err);
    TU_CHECK(clf_program_load(rt, "no_such_family", &err) != CLF_OK &&
                 strstr(err.msg, "no_such_family") != NULL,
             "an unknown family is refused naming it");
    clf_runtime_destroy(rt);
    return tu_finish();
}
