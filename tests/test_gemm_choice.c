/*
 * test_gemm_choice.c - the auto engine's choice file (runtime/gemm/choice.c).
 *
 * What is checked
 *   - The auto choice is stable, is written to the cache directory, and a
 *     corrupted or stale cache file is ignored and rewritten; once the
 *     search's budget is spent, a class is timed on CLBlast and one
 *     configuration.
 *   - A deep product's K slicing as its class's saved choice says (one pass
 *     or slices), run bit for bit as that configuration; a flag other than
 *     0 or 1 makes the file corrupt.
 *
 * Not a kernel test (it times CLBlast and reads files), so it includes the
 * GEMM only through tests/gemm_case.h and scripts/test-simulator.sh does not
 * run it under Oclgrind; the kernels are test_gemm.c's.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/util.h"
#include "tests/gemm_case.h"
#include "tests/test_util.h"

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

/* The device facts (device-*.txt: the kernels' shape, measured once) from
 * directory `from` into `to`, so that a runtime on `to` builds the same
 * kernel sources as the suite's did: measured afresh, under the load of
 * the tests beside it, the shape's vector width may come out otherwise,
 * and every program would be compiled again (minutes on PoCL). Returns
 * how many were copied. */
static int copy_device_facts(const char *from, const char *to)
{
    DIR *dp = opendir(from);
    if (dp == NULL)
        return 0;
    int copied = 0;
    struct dirent *de;
    while ((de = readdir(dp)) != NULL) {
        const size_t n = strlen(de->d_name);
        if (strncmp(de->d_name, "device-", 7) != 0 || n < 5 ||
            strcmp(de->d_name + n - 4, ".txt") != 0)
            continue;
        char src[1400], dst[1400];
        snprintf(src, sizeof src, "%s/%s", from, de->d_name);
        snprintf(dst, sizeof dst, "%s/%s", to, de->d_name);
        size_t len = 0;
        char *text = tu_read_file(src, &len);
        FILE *f = text != NULL ? fopen(dst, "wb") : NULL;
        if (f != NULL) {
            copied += fwrite(text, 1, len, f) == len;
            copied -= fclose(f) != 0;
        }
        free(text);
    }
    closedir(dp);
    return copied;
}

/* budget: the GEMM search's seconds; split_k: the runtime's gemm_split_k
 * (0: the engine's choice; 1: never split) */
static clf_runtime *runtime_with(const char *dir, double budget, size_t split_k)
{
    clf_runtime_options o = tu_options();
    o.cache_dir = dir;
    o.gemm = CLF_GEMM_AUTO;
    o.gemm_search_budget = budget;
    o.gemm_split_k = split_k;
    clf_runtime *rt = NULL;
    clf_error err;
    tu_ok(clf_runtime_create(&rt, &o, &err), &err, "creating a runtime with a cache dir");
    return rt;
}

/* The budget unbounded: these checks count the classes saved, and compiling
 * every configuration cold takes most of the default minute on some
 * runtimes (Intel's CPU runtime: 5-8 s each). */
static clf_runtime *runtime_with_budget(const char *dir, double budget)
{
    return runtime_with(dir, budget, 0);
}
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

/* Write text as the choice file at path, run g on auto in a new runtime
 * over dir, and return the file's lines after (count_lines). */
static int lines_after_writing(const char *dir, const char *path, const char *text, const gcase *g,
                               tu_rng *r, char *head, char *cands)
{
    FILE *f = fopen(path, "w");
    if (f != NULL) {
        fputs(text, f);
        fclose(f);
    }
    clf_runtime *rt = runtime_with_cache(dir);
    run_case(rt, "auto", g, r);
    clf_runtime_destroy(rt);
    return count_lines(path, head, cands);
}

/* A deep product's K slicing as its class's choice says: the class searched
 * and saved, then its line made to name the first native configuration that
 * slices K at this shape and
 * one pass (then slices): auto runs bit for bit as that configuration with
 * k_slice SIZE_MAX (then 0), and the table reports the flag. The two
 * slicings must round differently at this shape, or the check would prove
 * nothing: split-K is off (gemm_split_k = 1), which a device with many
 * work-items a group would otherwise pick here instead of slices. A flag
 * other than 0 or 1 makes the file corrupt. */
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
    clf_runtime *rt = runtime_with(dir, 1e6, 1);
    const char *const *names = NULL;
    size_t count = 0;
    clf_error err;
    tu_ok(clf_gemm_candidates(rt, &names, &count, NULL, &err), &err, "candidates");
    /* the first native configuration that slices K at this shape: on a GPU
     * the tiled ones come first and run K in one pass, and the register-
     * blocked ones outside its search slice */
    char first[64] = "";
    int sliced = 0;
    gemm_once(rt, NULL, 0, &g, &L, host, got); /* searches and saves the class */
    for (size_t c = 1; c < count && !sliced; c++) {
        snprintf(first, sizeof first, "%s", names[c]);
        gemm_once(rt, first, 0, &g, &L, host, ref[0]);
        gemm_once(rt, first, SIZE_MAX, &g, &L, host, ref[1]);
        sliced = memcmp(ref[0], ref[1], L.total * sizeof(float)) != 0;
    }
    clf_runtime_destroy(rt);
    TU_CHECK(sliced,
             "%s %zux%zux%zu: slices and one pass round differently (the first "
             "configuration that slices K here)",
             first, g.m, g.n, g.k);
    for (unsigned whole = 0; whole < 2; whole++) {
        TU_CHECK(rewrite_choice(path, g.m, g.n, g.k, first, 1 - whole),
                 "the class's line rewritten (one pass %u)", 1 - whole);
        rt = runtime_with(dir, 1e6, 1);
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
    rt = runtime_with(dir, 1e6, 1);
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
    int facts = 0;
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
        facts = copy_device_facts(shared, dir);
    }
    clf_runtime *rt = runtime_with_cache(dir);
    if (facts > 0)
        TU_CHECK(clf_runtime_device(rt)->shape_source != CLF_SHAPE_MEASURED,
                 "the suite's device facts are read, not measured again (source %d)",
                 (int)clf_runtime_device(rt)->shape_source);
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
                     strncmp(cands, "candidates ", 11) == 0 &&
                     strspn(cands + 11, "0123456789abcdef") == 16 &&
                     strncmp(cands + 27, " clblast ", 9) == 0 && lines == 2,
                 "the cache file has a header, the kernels' hash and the candidates, and one "
                 "line per shape class (%d)",
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
        char text[3 * CLF_ERROR_MSG_MAX], head2[CLF_ERROR_MSG_MAX], cands2[CLF_ERROR_MSG_MAX];
        snprintf(text, sizeof text, "%s%sgarbage\xff\n", head, cands);
        lines = lines_after_writing(dir, path, text, &g, r, head2, cands2);
        TU_CHECK(strcmp(head2, head) == 0 && strcmp(cands2, cands) == 0 && lines == 1,
                 "a corrupt cache file is ignored and rewritten (%d lines)", lines);
        /* stale: made for another candidate list (an older clformer, or
         * another build's configurations): ignored and rewritten too */
        snprintf(text, sizeof text,
                 "%scandidates %.16s clblast r1v1x1\n"
                 "0 0 6 6 6 0 96 80 64 1 r1v1x1 0 1e-3 1e-4\n",
                 head, cands + 11);
        lines = lines_after_writing(dir, path, text, &g, r, head2, cands2);
        TU_CHECK(strcmp(cands2, cands) == 0 && lines == 1,
                 "a stale cache file (other candidates) is ignored and rewritten (%d lines)",
                 lines);
        /* stale: this candidate list timed on other kernels (another
         * cl/gemm.cl): its choices are dropped, as the list's own */
        char other[CLF_ERROR_MSG_MAX];
        snprintf(other, sizeof other, "%s", cands);
        other[11] = other[11] == '0' ? '1' : '0';
        snprintf(text, sizeof text, "%s%s0 0 6 6 6 0 96 80 64 1 clblast 0 1e-3 1e-4\n", head,
                 other);
        lines = lines_after_writing(dir, path, text, &g, r, head2, cands2);
        TU_CHECK(strcmp(cands2, cands) == 0 && lines == 1,
                 "a cache file timed on other kernels (another source hash) is ignored and "
                 "rewritten (%d lines)",
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

int main(void)
{
    tu_rng r = tu_rng_new(3);
    test_auto_cache(&r);
    return tu_finish();
}
