/*
 * program.c - kernel programs: source assembly, compilation for the device,
 * the on-disk binary cache, kernel lookup.
 *
 * A program is one kernel family (cl/<family>.cl). Its source is
 *     generated preamble (#defines from device features + family defines)
 *   + cl/common.cl
 *   + cl/<family>.cl
 * with #line markers so build logs point at the kernel file's own lines.
 * Sources come from the binary (embedded by CMake) or, when the runtime was
 * given a kernel directory, from <dir>/<family>.cl.
 *
 * A variant "<family>@<tag>" is one more program built from <family>.cl
 * with the family's defines followed by defines of its own
 * (clf_program_set_defines under the variant's name): the native GEMM's
 * tile configurations are variants of "gemm", fused attention's 16-bit
 * storage of "flash", so several can live side by side in one runtime and
 * in the cache.
 *
 * The binary cache stores one file per (family, key) under
 * <cache_dir>/kernels/. The key hashes the format version, the full source,
 * the build options, the device name, the driver version and the platform
 * version. A cache file holds a fixed header (magic, format version, key
 * hash, binary size, binary checksum, the readable key text) and the binary.
 * On load every field is checked; anything that does not match, or a binary
 * the driver refuses, is counted as a reject and the program is rebuilt from
 * source and the file rewritten. Files are written to a temporary name and
 * renamed, so a concurrent reader never sees a torn file.
 *
 * With clf_runtime_options.binaries = CLF_BINARIES_NOTE an entry holds no
 * binary (size 0): a note that this source was built on this device. A
 * noted source is built from source again at each start, without the
 * "compile" notice (for an implementation that keeps its own builds, as
 * PoCL does, where fetching a binary compiles every kernel once more).
 * A binary found is loaded whatever the option says, and a runtime that
 * keeps binaries writes one over a note.
 *
 * Not here: choosing what a family's defines are (callers set them).
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/build_log.h"
#include "runtime/contract.h"
#include "runtime/convert.h"
#include "runtime/gemm/gemm.h"
#include "runtime/kernel_ids.h"
#include "runtime/kernels_embedded.h"
#include "runtime/runtime_internal.h"

/* The public enums the kernels receive as contract.h's codes. */
_Static_assert(CLF_DT_F32 == CLF_T_F32 && CLF_DT_BF16 == CLF_T_BF16 && CLF_DT_F16 == CLF_T_F16,
               "clf_dtype must be contract.h's CLF_T_*");
_Static_assert(CLF_GEMM_ACT_NONE == CLF_ACTCODE_NONE && CLF_GEMM_ACT_RELU == CLF_ACTCODE_RELU &&
                   CLF_GEMM_ACT_GELU_ERF == CLF_ACTCODE_GELU_ERF &&
                   CLF_GEMM_ACT_GELU_TANH == CLF_ACTCODE_GELU_TANH &&
                   CLF_GEMM_ACT_SILU == CLF_ACTCODE_SILU,
               "clf_gemm_act must be contract.h's CLF_ACTCODE_*");

#define CACHE_MAGIC "CLFBIN\r\n"
#define CACHE_FORMAT_VERSION 1u
#define MAX_FAMILIES 64
#define MAX_KERNELS_PER_FAMILY 128

/* "-cl-std=CL1.2" and the runtime's extra options (clf_runtime_options). */
static const char *build_options(clf_runtime *rt)
{
    return clf_runtime_options_get(rt)->build_options;
}

/* runtime/kernel_ids.h's rows: each id's family and kernel name. */
#define KERNEL_ROW_(id, family, name) {family, name},
static const struct {
    const char *family, *name;
} kernel_rows[CLF_K_COUNT] = {CLF_KERNEL_TABLE(KERNEL_ROW_)};
#undef KERNEL_ROW_

typedef struct family {
    char name[64];
    char defines[2048];
    cl_program program; /* NULL until loaded */
    clf_kernel *kernels[MAX_KERNELS_PER_FAMILY];
    int n_kernels;
    /* the table's kernels of this family (or of the family this is a
     * variant of), created when the program is loaded; NULL for the rest */
    clf_kernel *by_id[CLF_K_COUNT];
} family;

struct clf_program_set {
    family fams[MAX_FAMILIES];
    int n_fams;
    family *of_id[CLF_K_COUNT]; /* each id's family, once loaded (clf_kernel_of) */
    clf_program_stats stats;
};

clf_program_set *clf_program_set_create(void) { return calloc(1, sizeof(clf_program_set)); }

void clf_program_set_destroy(clf_program_set *ps)
{
    if (ps == NULL)
        return;
    for (int i = 0; i < ps->n_fams; i++) {
        family *f = &ps->fams[i];
        for (int k = 0; k < f->n_kernels; k++) {
            clReleaseKernel(f->kernels[k]->k);
            free(f->kernels[k]);
        }
        if (f->program != NULL)
            clReleaseProgram(f->program);
    }
    free(ps);
}

const char *const *clf_program_families(void)
{
    /* A const table built once from the embedded list (common and the
     * contract excluded: parts of every program, not programs). */
    static const char *names[MAX_FAMILIES + 1];
    static int ready;
    if (!ready) {
        int n = 0;
        for (int i = 0; clf_embedded_sources[i].family != NULL && n < MAX_FAMILIES; i++)
            if (strcmp(clf_embedded_sources[i].family, "common") != 0 &&
                strcmp(clf_embedded_sources[i].family, "contract") != 0)
                names[n++] = clf_embedded_sources[i].family;
        names[n] = NULL;
        ready = 1;
    }
    return names;
}

clf_program_stats clf_runtime_program_stats(const clf_runtime *rt)
{
    return clf_runtime_programs((clf_runtime *)rt)->stats;
}

static family *find_family(clf_program_set *ps, const char *name, int create)
{
    for (int i = 0; i < ps->n_fams; i++)
        if (strcmp(ps->fams[i].name, name) == 0)
            return &ps->fams[i];
    if (!create || ps->n_fams == MAX_FAMILIES || strlen(name) >= sizeof ps->fams[0].name)
        return NULL;
    family *f = &ps->fams[ps->n_fams++];
    memset(f, 0, sizeof *f);
    snprintf(f->name, sizeof f->name, "%s", name);
    return f;
}

clf_status clf_program_set_defines(clf_runtime *rt, const char *fam, const char *defines,
                                   clf_error *err)
{
    family *f = find_family(clf_runtime_programs(rt), fam, 1);
    if (f == NULL)
        return clf_error_set(err, CLF_ERR_ARG, "too many kernel families (adding '%s')", fam);
    if (f->program != NULL && strcmp(f->defines, defines) == 0)
        return CLF_OK; /* the program was built with these already */
    if (f->program != NULL)
        return clf_error_set(err, CLF_ERR_ARG,
                             "defines for kernel family '%s' must be set before it is built", fam);
    if (strlen(defines) >= sizeof f->defines)
        return clf_error_set(err, CLF_ERR_ARG, "defines for '%s' are too long", fam);
    snprintf(f->defines, sizeof f->defines, "%s", defines);
    return CLF_OK;
}

/* ---- sources ------------------------------------------------------------------ */

/* The source file a family or variant name is built from: "gemm@r8v16x3"
 * -> "gemm". */
static void base_name(const char *fam, char *out, size_t cap)
{
    const char *at = strchr(fam, '@');
    const size_t n = at != NULL ? (size_t)(at - fam) : strlen(fam);
    snprintf(out, cap, "%.*s", (int)(n < cap ? n : cap - 1), fam);
}

/* Append the file at path to the malloc'ed text *buf of *len bytes, after
 * the line `line` when not NULL. */
static clf_status append_file(const char *path, const char *line, char **buf, size_t *len,
                              clf_error *err)
{
    if (line != NULL) {
        const size_t l = strlen(line);
        char *grown = realloc(*buf, *len + l + 1);
        if (grown == NULL)
            return clf_error_set(err, CLF_ERR_MEMORY, "out of host memory");
        memcpy(grown + *len, line, l + 1);
        *buf = grown;
        *len += l;
    }
    FILE *fp = fopen(path, "rb");
    if (fp == NULL)
        return clf_error_set(err, CLF_ERR_IO, "cannot open kernel source '%s': %s", path,
                             strerror(errno));
    long n = -1;
    char *grown = NULL;
    if (fseek(fp, 0, SEEK_END) == 0 && (n = ftell(fp)) >= 0 && fseek(fp, 0, SEEK_SET) == 0)
        grown = realloc(*buf, *len + (size_t)n + 1);
    if (grown != NULL)
        *buf = grown;
    if (grown == NULL || fread(grown + *len, 1, (size_t)n, fp) != (size_t)n) {
        fclose(fp);
        return clf_error_set(err, CLF_ERR_IO, "cannot read kernel source '%s'", path);
    }
    fclose(fp);
    *len += (size_t)n;
    grown[*len] = '\0';
    return CLF_OK;
}

static int is_cl(const struct dirent *e)
{
    const size_t l = strlen(e->d_name);
    return l >= 4 && strcmp(e->d_name + l - 3, ".cl") == 0;
}

/* Byte order, as cmake's list(SORT) (alphasort would follow the locale). */
static int name_order(const struct dirent **a, const struct dirent **b)
{
    return strcmp((*a)->d_name, (*b)->d_name);
}

/* A family kept as a folder (cl/flash/): its *.cl files concatenated in
 * name order, each after a #line naming it (FAM/FILE, for the build log),
 * as cmake/embed_kernels.cmake embeds it. CLF_OK with *out NULL when
 * dir/fam is no folder. */
static clf_status folder_read(const char *dir, const char *fam, char **out, clf_error *err)
{
    char path[2048];
    snprintf(path, sizeof path, "%s/%s", dir, fam);
    struct dirent **parts = NULL;
    const int n = scandir(path, &parts, is_cl, name_order);
    if (n < 0 && (errno == ENOENT || errno == ENOTDIR))
        return CLF_OK; /* no folder of that name */
    if (n < 0)
        return clf_error_set(err, CLF_ERR_IO, "cannot list kernel folder '%s': %s", path,
                             strerror(errno));
    clf_status st =
        n == 0 ? clf_error_set(err, CLF_ERR_IO, "kernel folder '%s' holds no .cl file", path)
               : CLF_OK;
    char *buf = NULL;
    size_t len = 0;
    for (int i = 0; i < n && st == CLF_OK; i++) {
        char file[2304], line[384];
        snprintf(file, sizeof file, "%s/%s", path, parts[i]->d_name);
        snprintf(line, sizeof line, "#line 1 \"%s/%.255s\"\n", fam, parts[i]->d_name);
        st = append_file(file, line, &buf, &len, err);
    }
    for (int i = 0; i < n; i++)
        free(parts[i]);
    free(parts);
    if (st != CLF_OK) {
        free(buf);
        return st;
    }
    *out = buf;
    return CLF_OK;
}

/* Read the family's source (embedded or from kernel_dir: DIR/fam.cl, or the
 * folder DIR/fam/); malloc'ed. */
static clf_status source_get(clf_runtime *rt, const char *name, char **out, clf_error *err)
{
    *out = NULL;
    char fam[64];
    base_name(name, fam, sizeof fam);
    const char *dir = clf_runtime_options_get(rt)->kernel_dir;
    if (dir != NULL && dir[0] != '\0') {
        clf_status st = folder_read(dir, fam, out, err);
        if (st != CLF_OK || *out != NULL)
            return st;
        char path[2048];
        snprintf(path, sizeof path, "%s/%s.cl", dir, fam);
        char *buf = NULL;
        size_t len = 0;
        st = append_file(path, NULL, &buf, &len, err);
        if (st != CLF_OK) {
            free(buf);
            return st;
        }
        *out = buf;
        return CLF_OK;
    }
    for (int i = 0; clf_embedded_sources[i].family != NULL; i++) {
        const clf_embedded_source *s = &clf_embedded_sources[i];
        if (strcmp(s->family, fam) == 0) {
            char *buf = malloc(s->size + 1);
            if (buf == NULL)
                return clf_error_set(err, CLF_ERR_MEMORY, "out of host memory");
            memcpy(buf, s->text, s->size);
            buf[s->size] = '\0';
            *out = buf;
            return CLF_OK;
        }
    }
    return clf_error_set(err, CLF_ERR_ARG, "no kernel family '%s' is built into clformer", fam);
}

/* runtime/contract.h's text, as built in (never from the kernel
 * directory: the host was compiled with it). */
static const char *contract_text(void)
{
    for (int i = 0; clf_embedded_sources[i].family != NULL; i++)
        if (strcmp(clf_embedded_sources[i].family, "contract") == 0)
            return clf_embedded_sources[i].text;
    return "";
}

clf_status clf_program_source_hash(clf_runtime *rt, const char *family, uint64_t *out,
                                   clf_error *err)
{
    char *common = NULL, *body = NULL;
    const char *contract = contract_text();
    clf_status st = source_get(rt, "common", &common, err);
    if (st == CLF_OK)
        st = source_get(rt, family, &body, err);
    if (st == CLF_OK)
        *out = clf_hash64(
            body, strlen(body),
            clf_hash64(common, strlen(common), clf_hash64(contract, strlen(contract), 7)));
    free(common);
    free(body);
    return st;
}

static clf_status assemble(clf_runtime *rt, const family *f, char **out, clf_error *err)
{
    *out = NULL;
    char *common = NULL, *body = NULL;
    clf_status st = source_get(rt, "common", &common, err);
    if (st != CLF_OK)
        return st;
    st = source_get(rt, f->name, &body, err);
    if (st != CLF_OK) {
        free(common);
        return st;
    }
    const clf_device_info *d = clf_runtime_device(rt);
    /* a variant: its family's defines, then its own */
    char base[64];
    base_name(f->name, base, sizeof base);
    const family *bf =
        strcmp(base, f->name) != 0 ? find_family(clf_runtime_programs(rt), base, 0) : NULL;
    char pre[6144];
    snprintf(pre, sizeof pre,
             "/* generated preamble for %s */\n"
             "#define CLF_SERIAL_GROUPS %d\n"
             "#define CLF_HAS_FP64 %d\n#define CLF_HAS_FP16 %d\n"
             "#define CLF_MAX_WG %zu\n#define CLF_PREF_VEC_FLOAT %u\n"
             "#define CLF_LOCAL_MEM_BYTES %llu\n#define CLF_LOCAL_MEM_IS_GLOBAL %d\n"
             "#define CLF_FMA_FAST %d\n#define CLF_PREFETCH_BUILTIN %d\n%s\n%s\n",
             d->name, d->serial_groups, d->fp64, d->fp16, d->max_work_group,
             d->pref_vec_float ? d->pref_vec_float : 1u, (unsigned long long)d->local_mem,
             d->local_mem_is_global, !d->fma_slow, d->prefetch_builtin,
             bf != NULL ? bf->defines : "", f->defines);
    const char *contract = contract_text();
    size_t n = strlen(pre) + strlen(contract) + strlen(common) + strlen(body) + 256;
    char *src = malloc(n);
    if (src == NULL) {
        free(common);
        free(body);
        return clf_error_set(err, CLF_ERR_MEMORY, "out of host memory");
    }
    snprintf(src, n,
             "%s#line 1 \"contract.h\"\n%s\n#line 1 \"common.cl\"\n%s\n#line 1 \"%s.cl\"\n%s\n",
             pre, contract, common, base, body);
    free(common);
    free(body);
    *out = src;
    return CLF_OK;
}

/* ---- the binary cache ---------------------------------------------------------- */

typedef struct cache_header {
    char magic[8];
    uint32_t version;
    uint32_t key_text_len;
    uint64_t key_hash;
    uint64_t bin_size;
    uint64_t bin_checksum;
} cache_header;

static void cache_key(clf_runtime *rt, const char *src, char *text, size_t cap, uint64_t *h1,
                      uint64_t *h2)
{
    const clf_device_info *d = clf_runtime_device(rt);
    uint64_t sh = clf_hash64(src, strlen(src), 7);
    snprintf(text, cap, "format=%u|device=%s|driver=%s|platform=%s|options=%s|source=%016llx",
             CACHE_FORMAT_VERSION, d->name, d->driver_version, d->platform_version,
             build_options(rt), (unsigned long long)sh);
    *h1 = clf_hash64(text, strlen(text), 1);
    *h2 = clf_hash64(text, strlen(text), 2);
}

static void cache_path(clf_runtime *rt, const char *fam, uint64_t h1, char *out, size_t cap)
{
    snprintf(out, cap, "%s/kernels/%s-%016llx.bin", clf_runtime_cache_dir(rt), fam,
             (unsigned long long)h1);
}

/* Try to load a valid cached entry: 1 and a built program for a binary, 2
 * for a note (the source was built on this device; nothing loaded), 0 when
 * there is no usable entry (*rejected set when one existed but was bad). */
static int cache_load(clf_runtime *rt, const char *path, const char *key_text, uint64_t h2,
                      cl_program *out, int *rejected)
{
    *out = NULL;
    *rejected = 0;
    FILE *fp = fopen(path, "rb");
    if (fp == NULL)
        return 0;
    int ok = 0;
    unsigned char *bin = NULL;
    char *text = NULL;
    cache_header h;
    size_t tl = strlen(key_text);
    if (fread(&h, sizeof h, 1, fp) != 1 || memcmp(h.magic, CACHE_MAGIC, 8) != 0 ||
        h.version != CACHE_FORMAT_VERSION || h.key_hash != h2 || h.key_text_len != tl ||
        h.bin_size > ((uint64_t)1 << 30))
        goto done;
    text = malloc(tl + 1);
    bin = malloc(h.bin_size > 0 ? h.bin_size : 1);
    if (text == NULL || bin == NULL || fread(text, 1, tl, fp) != tl ||
        memcmp(text, key_text, tl) != 0 || fread(bin, 1, h.bin_size, fp) != h.bin_size ||
        fgetc(fp) != EOF || clf_hash64(bin, h.bin_size, 3) != h.bin_checksum)
        goto done;
    if (h.bin_size == 0) {
        ok = 2;
        goto done;
    }
    cl_device_id dev = clf_runtime_device_id(rt);
    size_t sz = h.bin_size;
    const unsigned char *bp = bin;
    cl_int bstatus = CL_SUCCESS, rc;
    cl_program p =
        clCreateProgramWithBinary(clf_runtime_context(rt), 1, &dev, &sz, &bp, &bstatus, &rc);
    if (rc != CL_SUCCESS || bstatus != CL_SUCCESS)
        goto done;
    if (clBuildProgram(p, 1, &dev, build_options(rt), NULL, NULL) != CL_SUCCESS) {
        clReleaseProgram(p);
        goto done;
    }
    *out = p;
    ok = 1;
done:
    if (!ok)
        *rejected = 1;
    free(text);
    free(bin);
    fclose(fp);
    return ok;
}

/* Store the program's binary (keep), or a note that its source was built;
 * failures are ignored (the cache is an optimisation) but never leave a
 * partial file under the final name. */
static void cache_store(clf_runtime *rt, cl_program p, int keep, const char *path,
                        const char *key_text, uint64_t h2)
{
    size_t sz = 0;
    unsigned char *bin = NULL;
    if (keep) {
        if (clGetProgramInfo(p, CL_PROGRAM_BINARY_SIZES, sizeof sz, &sz, NULL) != CL_SUCCESS ||
            sz == 0)
            return;
        bin = malloc(sz);
        if (bin == NULL)
            return;
        unsigned char *bins[1] = {bin};
        if (clGetProgramInfo(p, CL_PROGRAM_BINARIES, sizeof bins, bins, NULL) != CL_SUCCESS) {
            free(bin);
            return;
        }
    }
    char dir[2048];
    snprintf(dir, sizeof dir, "%s/kernels", clf_runtime_cache_dir(rt));
    clf_error e;
    if (clf_mkdir_p(dir, &e) != CLF_OK) {
        clf_runtime_cache_write_failed(rt, dir, errno);
        free(bin);
        return;
    }
    char tmp[2400];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    FILE *fp = fopen(tmp, "wb");
    if (fp == NULL) {
        clf_runtime_cache_write_failed(rt, tmp, errno);
        free(bin);
        return;
    }
    cache_header h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, CACHE_MAGIC, 8);
    h.version = CACHE_FORMAT_VERSION;
    h.key_text_len = (uint32_t)strlen(key_text);
    h.key_hash = h2;
    h.bin_size = sz;
    h.bin_checksum = clf_hash64(bin != NULL ? bin : (const unsigned char *)"", sz, 3);
    int ok = fwrite(&h, sizeof h, 1, fp) == 1 &&
             fwrite(key_text, 1, h.key_text_len, fp) == h.key_text_len &&
             (sz == 0 || fwrite(bin, 1, sz, fp) == sz);
    ok = (fflush(fp) == 0) && ok;
    ok = (fsync(fileno(fp)) == 0) && ok;
    ok = (fclose(fp) == 0) && ok;
    if (!ok || rename(tmp, path) != 0) {
        clf_runtime_cache_write_failed(rt, path, errno);
        remove(tmp);
    }
    free(bin);
}

/* ---- building -------------------------------------------------------------------- */

/* src's #line markers: from raw line `raw` on, file `file` (len bytes, in
 * src) at line `line`. */
typedef struct line_mark {
    size_t raw, line;
    const char *file;
    size_t len;
} line_mark;

static size_t line_marks(const char *src, line_mark *out, size_t cap)
{
    size_t n = 0, raw = 1;
    for (const char *p = src; *p != '\0'; raw++) {
        unsigned long line = 0;
        int used = 0;
        if (strncmp(p, "#line ", 6) == 0 && sscanf(p + 6, "%lu \"%n", &line, &used) == 1 &&
            used > 0) {
            const char *f = p + 6 + used, *q = strchr(f, '"'), *nl = strchr(p, '\n');
            if (q != NULL && (nl == NULL || q < nl) && n < cap)
                out[n++] = (line_mark){raw + 1, line, f, (size_t)(q - f)};
        }
        const char *nl = strchr(p, '\n');
        if (nl == NULL)
            break;
        p = nl + 1;
    }
    return n;
}

#define LOG_MARKS_MAX 64

char *clf_build_log_locate(const char *src, const char *log)
{
    line_mark marks[LOG_MARKS_MAX];
    const size_t nm = line_marks(src, marks, LOG_MARKS_MAX);
    /* each rewrite grows a location by at most a file name's length */
    size_t longest = 0, count = 0;
    for (size_t i = 0; i < nm; i++)
        longest = marks[i].len > longest ? marks[i].len : longest;
    for (const char *p = strchr(log, '<'); p != NULL; p = strchr(p + 1, '<'))
        count++;
    const size_t cap = strlen(log) + count * (longest + 24) + 1;
    char *out = malloc(cap);
    if (out == NULL)
        return NULL;
    size_t o = 0;
    for (const char *p = log; *p != '\0';) {
        const char *close = *p == '<' ? strchr(p, '>') : NULL;
        unsigned long raw = 0;
        int used = 0;
        if (close != NULL && close - p < 40 && strcspn(p, " \t\n") > (size_t)(close - p) &&
            sscanf(close + 1, ":%lu%n", &raw, &used) == 1 && used > 1) {
            const line_mark *m = NULL;
            for (size_t i = 0; i < nm && marks[i].raw <= raw; i++)
                m = &marks[i];
            if (m != NULL) {
                o += (size_t)snprintf(out + o, cap - o, "%.*s:%lu", (int)m->len, m->file,
                                      (unsigned long)(m->line + (raw - m->raw)));
                p = close + 1 + used;
                continue;
            }
        }
        out[o++] = *p++;
    }
    out[o] = '\0';
    return out;
}

static clf_status build_from_source(clf_runtime *rt, const family *f, const char *src,
                                    cl_program *out, clf_error *err)
{
    cl_int rc;
    cl_device_id dev = clf_runtime_device_id(rt);
    const char *srcs[1] = {src};
    cl_program p = clCreateProgramWithSource(clf_runtime_context(rt), 1, srcs, NULL, &rc);
    if (clf_cl_check(rc, err, "clCreateProgramWithSource") != CLF_OK)
        return CLF_ERR_OPENCL;
    rc = clBuildProgram(p, 1, &dev, build_options(rt), NULL, NULL);
    if (rc != CL_SUCCESS) {
        size_t n = 0;
        clGetProgramBuildInfo(p, dev, CL_PROGRAM_BUILD_LOG, 0, NULL, &n);
        char *log = malloc(n + 1);
        if (log != NULL) {
            log[0] = '\0';
            clGetProgramBuildInfo(p, dev, CL_PROGRAM_BUILD_LOG, n, log, NULL);
            log[n] = '\0';
        }
        char *located = log != NULL ? clf_build_log_locate(src, log) : NULL;
        clf_error_set(err, CLF_ERR_BUILD,
                      "kernel family '%s' failed to build for device '%s' (driver %s) with "
                      "options '%s' and defines '%s'. Build log:\n%s",
                      f->name, clf_runtime_device(rt)->name, clf_runtime_device(rt)->driver_version,
                      build_options(rt), f->defines,
                      located != NULL ? located
                      : log != NULL   ? log
                                      : "(no log)");
        free(located);
        if (err != NULL) {
            err->code = (int)rc;
            snprintf(err->code_name, sizeof err->code_name, "%s", clf_cl_error_name(rc));
        }
        free(log);
        clReleaseProgram(p);
        return CLF_ERR_BUILD;
    }
    *out = p;
    return CLF_OK;
}

static clf_status resolve_ids(clf_runtime *rt, family *f, clf_error *err);

static clf_status family_load(clf_runtime *rt, family *f, clf_error *err)
{
    if (f->program != NULL)
        return CLF_OK;
    clf_program_set *ps = clf_runtime_programs(rt);
    double t0 = clf_now_seconds();
    char *src = NULL;
    clf_status st = assemble(rt, f, &src, err);
    if (st != CLF_OK)
        return st;
    char key_text[2048], path[2300];
    uint64_t h1, h2;
    cache_key(rt, src, key_text, sizeof key_text, &h1, &h2);
    int use_cache = clf_runtime_cache_dir(rt)[0] != '\0';
    int noted = 0;
    if (use_cache) {
        cache_path(rt, f->name, h1, path, sizeof path);
        int rejected = 0;
        const int got = cache_load(rt, path, key_text, h2, &f->program, &rejected);
        if (got == 1) {
            ps->stats.cache_hits++;
            goto done;
        }
        noted = got == 2;
        if (rejected)
            ps->stats.cache_reject++;
    }
    const clf_runtime_options *o = clf_runtime_options_get(rt);
    if (o->notify != NULL && !noted)
        o->notify(o->notify_user, "compile", f->name);
    st = build_from_source(rt, f, src, &f->program, err);
    if (st != CLF_OK) {
        free(src);
        return st;
    }
    if (noted)
        ps->stats.rebuilt++;
    else
        ps->stats.built++;
    const int keep = o->binaries != CLF_BINARIES_NOTE;
    if (use_cache && (keep || !noted))
        cache_store(rt, f->program, keep, path, key_text, h2);
done:
    free(src);
    ps->stats.load_seconds += clf_now_seconds() - t0;
    return resolve_ids(rt, f, err);
}

clf_status clf_program_source(clf_runtime *rt, const char *fam, char **out, clf_error *err)
{
    *out = NULL;
    family *f = find_family(clf_runtime_programs(rt), fam, 1);
    if (f == NULL)
        return clf_error_set(err, CLF_ERR_ARG, "too many kernel families (adding '%s')", fam);
    return assemble(rt, f, out, err);
}

clf_status clf_program_load(clf_runtime *rt, const char *fam, clf_error *err)
{
    family *f = find_family(clf_runtime_programs(rt), fam, 1);
    if (f == NULL)
        return clf_error_set(err, CLF_ERR_ARG, "too many kernel families (adding '%s')", fam);
    return family_load(rt, f, err);
}

/* Kernel `name` of f's program (loaded), created once: f keeps it. */
static clf_status kernel_create(clf_runtime *rt, family *f, const char *name, clf_kernel **out,
                                clf_error *err)
{
    for (int i = 0; i < f->n_kernels; i++)
        if (strcmp(f->kernels[i]->name, name) == 0) {
            *out = f->kernels[i];
            return CLF_OK;
        }
    if (f->n_kernels == MAX_KERNELS_PER_FAMILY)
        return clf_error_set(err, CLF_ERR_ARG, "too many kernels in family '%s'", f->name);
    if (strlen(name) >= sizeof f->kernels[0]->name)
        return clf_error_set(err, CLF_ERR_ARG, "kernel name '%s' is too long", name);
    cl_int rc;
    cl_kernel k = clCreateKernel(f->program, name, &rc);
    if (rc != CL_SUCCESS) {
        char what[256];
        snprintf(what, sizeof what, "clCreateKernel('%s' in %s.cl)", name, f->name);
        return clf_cl_check(rc, err, what);
    }
    clf_kernel *kk = calloc(1, sizeof *kk);
    if (kk == NULL) {
        clReleaseKernel(k);
        return clf_error_set(err, CLF_ERR_MEMORY, "out of host memory");
    }
    kk->k = k;
    snprintf(kk->name, sizeof kk->name, "%s", name);
    size_t wg = 0;
    if (clGetKernelWorkGroupInfo(k, clf_runtime_device_id(rt), CL_KERNEL_WORK_GROUP_SIZE, sizeof wg,
                                 &wg, NULL) != CL_SUCCESS ||
        wg == 0)
        wg = clf_runtime_device(rt)->max_work_group;
    kk->max_wg = wg;
    size_t req[3] = {0, 0, 0};
    if (clGetKernelWorkGroupInfo(k, clf_runtime_device_id(rt), CL_KERNEL_COMPILE_WORK_GROUP_SIZE,
                                 sizeof req, req, NULL) == CL_SUCCESS)
        kk->reqd_wg = req[0];
    f->kernels[f->n_kernels++] = kk;
    *out = kk;
    return CLF_OK;
}

/* The table's kernels of f's family (the part of its name before any '@'),
 * created now that its program is loaded. */
static clf_status resolve_ids(clf_runtime *rt, family *f, clf_error *err)
{
    const size_t base = strcspn(f->name, "@");
    for (int id = 0; id < CLF_K_COUNT; id++) {
        if (strlen(kernel_rows[id].family) != base ||
            strncmp(kernel_rows[id].family, f->name, base) != 0)
            continue;
        clf_status st = kernel_create(rt, f, kernel_rows[id].name, &f->by_id[id], err);
        if (st != CLF_OK)
            return st;
    }
    return CLF_OK;
}

clf_status clf_kernel_get(clf_runtime *rt, const char *fam, const char *name, clf_kernel **out,
                          clf_error *err)
{
    *out = NULL;
    family *f = find_family(clf_runtime_programs(rt), fam, 1);
    if (f == NULL)
        return clf_error_set(err, CLF_ERR_ARG, "too many kernel families (adding '%s')", fam);
    clf_status st = family_load(rt, f, err);
    return st == CLF_OK ? kernel_create(rt, f, name, out, err) : st;
}

clf_status clf_kernel_variant_of(clf_runtime *rt, const char *fam, clf_kernel_id id,
                                 clf_kernel **out, clf_error *err)
{
    *out = NULL;
    if ((unsigned)id >= CLF_K_COUNT)
        return clf_error_set(err, CLF_ERR_ARG, "kernel id %d is not in the table", (int)id);
    const char *of = fam != NULL ? fam : kernel_rows[id].family;
    family *f = find_family(clf_runtime_programs(rt), of, 1);
    if (f == NULL)
        return clf_error_set(err, CLF_ERR_ARG, "too many kernel families (adding '%s')", of);
    clf_status st = family_load(rt, f, err);
    if (st != CLF_OK)
        return st;
    if (f->by_id[id] == NULL)
        return clf_error_set(err, CLF_ERR_ARG, "kernel '%s' (of %s.cl) is not in family '%s'",
                             kernel_rows[id].name, kernel_rows[id].family, of);
    *out = f->by_id[id];
    return CLF_OK;
}

const char *clf_kernel_id_name(clf_kernel_id id)
{
    return (unsigned)id < CLF_K_COUNT ? kernel_rows[id].name : "?";
}

const char *clf_kernel_id_family(clf_kernel_id id)
{
    return (unsigned)id < CLF_K_COUNT ? kernel_rows[id].family : "?";
}

clf_status clf_kernel_of(clf_runtime *rt, clf_kernel_id id, clf_kernel **out, clf_error *err)
{
    clf_program_set *ps = clf_runtime_programs(rt);
    if ((unsigned)id < CLF_K_COUNT && ps->of_id[id] != NULL) {
        *out = ps->of_id[id]->by_id[id];
        return CLF_OK;
    }
    clf_status st = clf_kernel_variant_of(rt, NULL, id, out, err);
    if (st == CLF_OK)
        ps->of_id[id] = find_family(ps, kernel_rows[id].family, 0);
    return st;
}
