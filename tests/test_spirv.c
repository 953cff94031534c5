/*
 * test_spirv.c - every program the runtime can build passes the SPIR-V
 * path that Mesa's rusticl (and every clang -> SPIR-V -> driver stack)
 * takes: clang -target spir64 at -O0, then the LLVM-SPIR-V translator.
 *
 * What is compiled: every kernel family, every native GEMM configuration's
 * variant (the union of both shapes' lists) and the fused attention's 16-bit
 * variants, each with the preamble of both shapes (the item shape at the
 * vector widths 4, 8 and 16 the runtime can measure; at 4 with CLF_FMA_FAST
 * 0, the multiply-adds a device that emulates fma() gets), as
 * clf_program_source assembles them. For each:
 *   - the translator accepts the module (it rejects intrinsics SPIR-V cannot
 *     express, such as clang's llvm.prefetch; Mesa 22's rusticl ends the
 *     process on them), and a failure names the program, the shape, the
 *     variant's defines and the translator's message;
 *   - the module declares no function it does not define (OpenCL builtins,
 *     mangled _Z..., and LLVM intrinsics aside): at -O0 nothing is inlined,
 *     so a helper that is only a C99 `inline` definition is left undefined,
 *     as a GPU front end would leave it, while CPU runtimes inline it away;
 *   - no kernel requires a work-group of more than 256 items
 *     (reqd_work_group_size): the smallest limit among the GPUs we target.
 * And the check can fail: a kernel calling clang's __builtin_prefetch is
 * rejected by the same pipeline.
 *
 * The compilers: $CLF_CLANG_SPIRV (default clang-15) and $CLF_LLVM_SPIRV
 * (llvm-spirv-15), a matched pair; without them the test is skipped (exit
 * 77). The compiles run on every core. Sources honour CLFORMER_KERNEL_DIR,
 * so a kernel being written can be checked before it is built in.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "model/ops/ops_internal.h"
#include "runtime/gemm/gemm.h"
#include "tests/test_util.h"

#define PORTABLE_WG 256 /* the smallest max work-group size among target GPUs */
#define MAX_PROGRAMS 512

typedef struct program {
    char label[160];    /* "gemm@r6v16x4 (item shape, vector width 16)" */
    char defines[1024]; /* the variant's own defines, for the message */
} program;

typedef struct job {
    char dir[64];
    program progs[MAX_PROGRAMS];
    int n;
} job;

/* Replace the preamble's "#define NAME old" value with v (a copy). */
static char *with_define(const char *src, const char *name, const char *v)
{
    char key[64];
    snprintf(key, sizeof key, "#define %s ", name);
    const char *at = strstr(src, key);
    if (at == NULL)
        return strdup(src);
    const char *eol = strchr(at, '\n');
    size_t head = (size_t)(at - src) + strlen(key), n = strlen(src);
    char *out = malloc(n + strlen(v) + 2);
    if (out == NULL || eol == NULL) {
        free(out);
        return NULL;
    }
    memcpy(out, src, head);
    strcpy(out + head, v);
    strcat(out, eol);
    return out;
}

static void add(job *j, const char *src, const char *label, const char *defines)
{
    if (j->n == MAX_PROGRAMS || src == NULL) {
        TU_CHECK(0, "too many programs (or out of memory) at %s", label);
        return;
    }
    char path[128];
    snprintf(path, sizeof path, "%s/%03d.cl", j->dir, j->n);
    FILE *fp = fopen(path, "w");
    if (fp == NULL || fputs(src, fp) < 0 || fclose(fp) != 0) {
        TU_CHECK(0, "writing %s", path);
        return;
    }
    program *p = &j->progs[j->n++];
    snprintf(p->label, sizeof p->label, "%s", label);
    snprintf(p->defines, sizeof p->defines, "%s", defines);
}

/* The defines a variant adds to its family's: its source from the first
 * "#define" after the preamble's last line to "#line 1". */
static void variant_defines(const char *src, char *out, size_t cap)
{
    const char *a = strstr(src, "#define CLF_LOCAL_MEM_IS_GLOBAL");
    const char *b = strstr(src, "#line 1");
    out[0] = '\0';
    if (a == NULL || b == NULL || (a = strchr(a, '\n')) == NULL || a > b)
        return;
    size_t n = (size_t)(b - a);
    snprintf(out, cap, "%.*s", (int)(n < cap ? n : cap - 1), a);
    for (char *c = out; *c; c++)
        if (*c == '\n')
            *c = ' ';
}

/* One program (by family or variant name) in the runtime's shape, at each
 * vector width of the item shape. */
static void add_program(job *j, clf_runtime *rt, const char *fam, int item)
{
    char *src = NULL, label[160], defs[1024];
    clf_error err;
    tu_ok(clf_program_source(rt, fam, &src, &err), &err, "a program's source");
    variant_defines(src, defs, sizeof defs);
    if (!item) {
        snprintf(label, sizeof label, "%s (group shape)", fam);
        add(j, src, label, defs);
    } else {
        static const char *const widths[] = {"4", "8", "16"};
        for (int w = 0; w < 3; w++) {
            char *v = with_define(src, "CLF_PREF_VEC_FLOAT", widths[w]);
            /* width 4 also with fma() written as a * b + c (CLF_FMA_FAST 0:
             * a device that emulates fma(), Mesa's llvmpipe) */
            if (w == 0) {
                char *u = with_define(v, "CLF_FMA_FAST", "0");
                free(v);
                v = u;
                TU_CHECK(v != NULL && strstr(v, "#define CLF_FMA_FAST 0\n") != NULL,
                         "%s: the preamble's CLF_FMA_FAST set to 0", fam);
            }
            snprintf(label, sizeof label, "%s (item shape, vector width %s%s)", fam, widths[w],
                     w == 0 ? ", a * b + c for fma()" : "");
            add(j, v, label, defs);
            free(v);
        }
    }
    free(src);
}

static clf_runtime *open_shape(clf_shape shape)
{
    clf_runtime_options o = tu_options();
    o.kernel_dir = getenv("CLFORMER_KERNEL_DIR");
    o.shape = shape;
    clf_runtime *rt = NULL;
    clf_error err;
    tu_ok(clf_runtime_create(&rt, &o, &err), &err, "a runtime of the shape");
    return rt;
}

/* The GEMM configurations either shape lists on this device (the item
 * shape's widths 16 and 8, the group shape's 4 and the tiles): every
 * configuration the runtime has, each then compiled in both shapes. */
static int config_names(char names[][64], int cap)
{
    int n = 0;
    for (int item = 1; item >= 0; item--) {
        clf_runtime *rt = open_shape(item ? CLF_SHAPE_ITEM : CLF_SHAPE_GROUP);
        const char *const *list = NULL;
        size_t count = 0;
        clf_error err;
        tu_ok(clf_gemm_candidates(rt, &list, &count, NULL, &err), &err, "the configurations");
        for (size_t c = 1; c < count; c++) {
            int seen = 0;
            for (int i = 0; i < n; i++)
                seen |= strcmp(names[i], list[c]) == 0;
            if (!seen && n < cap)
                snprintf(names[n++], 64, "%s", list[c]);
        }
        clf_runtime_destroy(rt);
    }
    return n;
}

static void add_shape(job *j, clf_shape shape, char names[][64], int n_names)
{
    clf_runtime *rt = open_shape(shape);
    clf_error err;
    const int item = shape == CLF_SHAPE_ITEM;
    for (const char *const *f = clf_program_families(); *f != NULL; f++)
        add_program(j, rt, *f, item);
    /* each configuration's programs, the shared ones (packing, dot
     * products) once */
    char seen[3 * 64][64];
    int n_seen = 0;
    for (int c = 0; c < n_names; c++) {
        char fam[CLF_GEMM_PROGRAMS][64];
        tu_ok(clf_gemm_config_programs(rt, names[c], fam, &err), &err,
              "a GEMM configuration's programs");
        for (int p = 0; p < CLF_GEMM_PROGRAMS; p++) {
            int dup = fam[p][0] == '\0';
            for (int i = 0; i < n_seen && !dup; i++)
                dup = strcmp(seen[i], fam[p]) == 0;
            if (dup || n_seen == 3 * 64)
                continue;
            memcpy(seen[n_seen++], fam[p], sizeof seen[0]);
            add_program(j, rt, fam[p], item);
        }
    }
    const clf_dtype t16[] = {CLF_DT_BF16, CLF_DT_F16};
    for (int t = 0; t < 2; t++) {
        char fam[64];
        tu_ok(clf_ops_flash_program(rt, t16[t], fam, sizeof fam, &err), &err,
              "a 16-bit attention program");
        add_program(j, rt, fam, item);
    }
    clf_runtime_destroy(rt);
}

/* Compile dir/NNN.cl for i < n on every core: NNN.ll (text IR, -O0),
 * NNN.bc, NNN.spv, and the translator's or clang's messages in NNN.err. */
static int compile_all(const char *dir, int n, const char *clang, const char *spirv)
{
    char cmd[2048];
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    snprintf(cmd, sizeof cmd,
             "cd %s && seq -f %%03g 0 %d | xargs -P %ld -I{} sh -c '"
             "%s -x cl -cl-std=CL1.2 -O0 -target spir64 -Xclang -finclude-default-header -S "
             "-emit-llvm -o {}.ll {}.cl 2>{}.err && "
             "%s -target spir64 -c -emit-llvm -x ir -o {}.bc {}.ll 2>>{}.err && "
             "%s {}.bc -o {}.spv 2>>{}.err; echo $? >{}.rc'",
             dir, n - 1, cores > 0 ? cores : 2, clang, clang, spirv);
    return system(cmd);
}

/* needle within the n characters at s (a line: searching the whole rest
 * of the module from every line would be quadratic) */
static const char *find_in(const char *s, size_t n, const char *needle)
{
    const size_t k = strlen(needle);
    for (size_t i = 0; i + k <= n; i++)
        if (memcmp(s + i, needle, k) == 0)
            return s + i;
    return NULL;
}

/* The functions a module declares but does not define (builtins aside),
 * space-separated into bad, and its largest required work-group. */
static void scan_ir(const char *ir, char *bad, size_t cap, long *max_wg)
{
    /* line by line, each searched within itself: a search of the whole
     * rest of the module from every line (strchr and sscanf measure their
     * input under AddressSanitizer's string checks) would be quadratic */
    int reqd[256], n_reqd = 0;
    bad[0] = '\0';
    *max_wg = 0;
    for (const char *line = ir, *eol; *line; line = *eol ? eol + 1 : eol) {
        eol = line;
        while (*eol && *eol != '\n')
            eol++;
        const size_t len = (size_t)(eol - line);
        const char *r = find_in(line, len, "!reqd_work_group_size !");
        if (r != NULL && n_reqd < 256)
            reqd[n_reqd++] = atoi(r + strlen("!reqd_work_group_size !"));
        char one[256];
        snprintf(one, sizeof one, "%.*s", (int)(len < sizeof one - 1 ? len : sizeof one - 1), line);
        int id = -1, x = 0, y = 0, z = 0;
        if (one[0] == '!' && sscanf(one, "!%d = !{i32 %d, i32 %d, i32 %d}", &id, &x, &y, &z) == 4)
            for (int i = 0; i < n_reqd; i++)
                if (reqd[i] == id && (long)x * y * z > *max_wg)
                    *max_wg = (long)x * y * z;
        if (strncmp(one, "declare ", 8) != 0)
            continue;
        const char *at = strchr(one, '@');
        if (at == NULL || strncmp(at, "@_Z", 3) == 0 || strncmp(at, "@llvm.", 6) == 0)
            continue;
        size_t k = strcspn(at + 1, "(");
        size_t used = strlen(bad);
        snprintf(bad + used, cap - used, "%s%.*s", used ? " " : "", (int)k, at + 1);
    }
}

/* Programs first .. n - 1 of j. */
static void check(const job *j, int first)
{
    int passed = 0;
    for (int i = first; i < j->n; i++) {
        const program *p = &j->progs[i];
        char path[128];
        snprintf(path, sizeof path, "%s/%03d.rc", j->dir, i);
        char *rc = tu_read_file(path, NULL);
        snprintf(path, sizeof path, "%s/%03d.err", j->dir, i);
        char *msg = tu_read_file(path, NULL);
        snprintf(path, sizeof path, "%s/%03d.ll", j->dir, i);
        char *ir = tu_read_file(path, NULL);
        const int ok = rc != NULL && atoi(rc) == 0;
        if (!ok) {
            char first[400] = "";
            if (msg != NULL)
                snprintf(first, sizeof first, "%.399s", msg);
            for (char *c = first; *c; c++)
                if (*c == '\n')
                    *c = ' ';
            TU_CHECK(0, "%s passes clang -target spir64 -O0 and llvm-spirv: defines [%s]: %s",
                     p->label, p->defines, first);
        }
        char bad[2048] = "";
        long max_wg = 0;
        if (ir != NULL)
            scan_ir(ir, bad, sizeof bad, &max_wg);
        if (bad[0])
            TU_CHECK(0, "%s defines every function it calls at -O0; undefined: %s", p->label, bad);
        if (max_wg > PORTABLE_WG)
            TU_CHECK(0, "%s: no kernel requires more than %d work-items per group (largest: %ld)",
                     p->label, PORTABLE_WG, max_wg);
        passed += ok && ir != NULL && bad[0] == '\0' && max_wg <= PORTABLE_WG;
        free(rc);
        free(msg);
        free(ir);
    }
    TU_CHECK(passed == j->n - first,
             "%d of %d programs pass the SPIR-V path (no undefined function, work-groups of "
             "at most %d)",
             passed, j->n - first, PORTABLE_WG);
}

int main(void)
{
    const char *clang = getenv("CLF_CLANG_SPIRV") ? getenv("CLF_CLANG_SPIRV") : "clang-15";
    const char *spirv = getenv("CLF_LLVM_SPIRV") ? getenv("CLF_LLVM_SPIRV") : "llvm-spirv-15";
    char probe[512];
    snprintf(probe, sizeof probe, "%s --version >/dev/null 2>&1 && %s --version >/dev/null 2>&1",
             clang, spirv);
    if (system(probe) != 0) {
        printf("skipped: %s or %s not found (apt-get install clang-15 llvm-spirv-15)\n", clang,
               spirv);
        return 77;
    }
    static job j; /* large: not on the stack */
    snprintf(j.dir, sizeof j.dir, "/tmp/clf_spirv_XXXXXX");
    if (mkdtemp(j.dir) == NULL) {
        TU_CHECK(0, "mkdtemp failed");
        return tu_finish();
    }
    /* the control: the pipeline rejects what rusticl cannot take */
    add(&j, "__kernel void k(__global float *p) { __builtin_prefetch(p + 16, 0, 3); p[0] = 1; }\n",
        "control", "");
    static char names[64][64];
    const int n_names = config_names(names, 64);
    TU_CHECK(n_names >= 10, "%d GEMM configurations between the two shapes", n_names);
    add_shape(&j, CLF_SHAPE_ITEM, names, n_names);
    add_shape(&j, CLF_SHAPE_GROUP, names, n_names);
    printf("%d programs (with the control) to SPIR-V with %s and %s\n", j.n, clang, spirv);
    compile_all(j.dir, j.n, clang, spirv);
    char path[128];
    snprintf(path, sizeof path, "%s/000.rc", j.dir);
    char *rc = tu_read_file(path, NULL);
    snprintf(path, sizeof path, "%s/000.err", j.dir);
    char *msg = tu_read_file(path, NULL);
    TU_CHECK(rc != NULL && atoi(rc) != 0 && msg != NULL && strstr(msg, "llvm.prefetch") != NULL,
             "the check can fail: __builtin_prefetch is rejected (%.120s)",
             msg != NULL ? msg : "no message");
    free(rc);
    free(msg);
    check(&j, 1); /* the programs proper, after the control */
    char rm[128];
    snprintf(rm, sizeof rm, "rm -rf %s", j.dir);
    if (system(rm) != 0)
        printf("note: could not remove %s\n", j.dir);
    return tu_finish();
}
