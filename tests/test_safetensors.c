/*
 * test_safetensors.c - the .safetensors reader and writer (model/
 * safetensors.h) and the atomic file writer (model/io/fileio.h).
 *
 * Checks:
 * - compatibility: our writer's bytes equal, byte for byte, files written by
 *   the reference implementation (safetensors' Rust core, behind its Python
 *   package): its published test vectors (one F32 tensor with and without
 *   header padding, an empty file with {"framework":"pt"} metadata) and a
 *   multi-dtype file whose header we construct the way the reference orders
 *   it (dtype alignment descending, then name); the reader accepts them and
 *   an old unpadded file;
 * - round trip of random tensors of every dtype, scalars, zero-size tensors
 *   and metadata holding JSON, quotes, newlines and non-ASCII text;
 * - read checks: wrong dtype, wrong shape, missing name, small buffer, each
 *   with a message naming the tensor and both shapes;
 * - truncation at every byte of a valid file, and a table of corrupt
 *   headers (bad length, not JSON, overlapping/gapped/out-of-range offsets,
 *   size mismatch, overflow, duplicates, unknown dtype or field, non-string
 *   metadata): all CLF_ERR_FORMAT, all naming the file;
 * - atomic writes: replacing a file, a write that fails midway (file-size
 *   limit, RLIMIT_FSIZE), a vanished directory, a directory in the way and
 *   an aborted streaming write all leave the previous file intact and no
 *   temporary file behind; a device (/dev/null), a FIFO and a dangling
 *   symbolic link are refused and left as they were; a link to a regular
 *   file is written through (the target replaced, the link kept).
 * No device needed.
 */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "model/io/fileio.h"
#include "model/io/safetensors.h"
#include "tests/test_util.h"

static char dir[256];

static void path_in(char *out, size_t cap, const char *name)
{
    snprintf(out, cap, "%s/%s", dir, name);
}

static void write_bytes(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (f == NULL || fwrite(data, 1, n, f) != n) {
        perror(path);
        exit(1);
    }
    fclose(f);
}

static unsigned char *read_bytes(const char *path, size_t *n)
{
    char *data = NULL;
    clf_error err;
    if (clf_file_read_all(path, 1 << 28, &data, n, &err) != CLF_OK)
        return NULL;
    return (unsigned char *)data;
}

/* No "*.tmp.*" file is left in the test directory. */
static int no_temp_files(void)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int clean = 1;
    while (d != NULL && (e = readdir(d)) != NULL) {
        if (strstr(e->d_name, ".tmp.") != NULL) {
            printf("  left behind: %s\n", e->d_name);
            clean = 0;
        }
    }
    if (d != NULL)
        closedir(d);
    return clean;
}

/* 8-byte length + header + data_len bytes (i % 251). */
static void write_st(const char *path, const char *header, size_t data_len)
{
    size_t h = strlen(header), n = 8 + h + data_len;
    unsigned char *b = malloc(n);
    for (int i = 0; i < 8; i++)
        b[i] = (unsigned char)((uint64_t)h >> (8 * i));
    memcpy(b + 8, header, h);
    for (size_t i = 0; i < data_len; i++)
        b[8 + h + i] = (unsigned char)(i % 251);
    write_bytes(path, b, n);
    free(b);
}

/* ---- compatibility with the reference ---------------------------------------- */

static int bytes_equal(const unsigned char *got, size_t gn, const unsigned char *want, size_t wn)
{
    if (gn != wn) {
        printf("  size %zu, expected %zu\n", gn, wn);
        return 0;
    }
    for (size_t i = 0; i < gn; i++) {
        if (got[i] != want[i]) {
            printf("  first difference at byte %zu: 0x%02x, expected 0x%02x\n", i, got[i], want[i]);
            return 0;
        }
    }
    return 1;
}

/* Expected file = le64(len(header)) + header + data. */
static unsigned char *expected_file(const char *header, const void *data, size_t dn, size_t *n)
{
    size_t h = strlen(header);
    unsigned char *b = malloc(8 + h + dn + 1);
    for (int i = 0; i < 8; i++)
        b[i] = (unsigned char)((uint64_t)h >> (8 * i));
    memcpy(b + 8, header, h);
    if (dn)
        memcpy(b + 8 + h, data, dn);
    *n = 8 + h + dn;
    return b;
}

static void test_reference_vectors(void)
{
    printf("reference compatibility\n");
    clf_error err;
    float six[6] = {0, 1, 2, 3, 4, 5};
    unsigned char *got = NULL, *want = NULL;
    size_t gn = 0, wn = 0;

    /* The reference's test_serialization: "attn.0", F32 [1, 2, 3]; the
     * header is 64 bytes, already aligned. */
    clf_st_writer *w = NULL;
    tu_ok(clf_st_writer_create(&w, &err), &err, "writer");
    tu_ok(clf_st_writer_add(w, "attn.0", CLF_ST_F32, 3, (int64_t[]){1, 2, 3}, six, &err), &err,
          "add");
    tu_ok(clf_st_writer_serialize(w, &got, &gn, &err), &err, "serialize");
    want = expected_file("{\"attn.0\":{\"dtype\":\"F32\",\"shape\":[1,2,3],"
                         "\"data_offsets\":[0,24]}}",
                         six, 24, &wn);
    TU_CHECK(bytes_equal(got, gn, want, wn) && got[0] == 64,
             "F32 [1,2,3] \"attn.0\": identical to the reference's bytes (64-byte header)");
    free(got);
    free(want);
    clf_st_writer_destroy(w);

    /* test_serialization_forced_alignement: "attn0", [1, 1, 2, 3]: 65
     * bytes of JSON padded with 7 spaces to 72. */
    tu_ok(clf_st_writer_create(&w, &err), &err, "writer");
    tu_ok(clf_st_writer_add(w, "attn0", CLF_ST_F32, 4, (int64_t[]){1, 1, 2, 3}, six, &err), &err,
          "add");
    tu_ok(clf_st_writer_serialize(w, &got, &gn, &err), &err, "serialize");
    want = expected_file("{\"attn0\":{\"dtype\":\"F32\",\"shape\":[1,1,2,3],"
                         "\"data_offsets\":[0,24]}}       ",
                         six, 24, &wn);
    TU_CHECK(bytes_equal(got, gn, want, wn) && got[0] == 72,
             "F32 [1,1,2,3] \"attn0\": identical, header padded with 7 spaces to 72 bytes");
    free(got);
    free(want);
    clf_st_writer_destroy(w);

    /* test_empty: no tensors -> "{}" + 6 spaces; with metadata framework=pt
     * -> 35 bytes + 5 spaces. */
    tu_ok(clf_st_writer_create(&w, &err), &err, "writer");
    tu_ok(clf_st_writer_serialize(w, &got, &gn, &err), &err, "serialize");
    static const unsigned char empty[] = {8,   0,   0,   0,   0,   0,   0,   0,
                                          '{', '}', ' ', ' ', ' ', ' ', ' ', ' '};
    TU_CHECK(bytes_equal(got, gn, empty, sizeof empty), "empty file: identical");
    free(got);
    tu_ok(clf_st_writer_add_metadata(w, "framework", "pt", &err), &err, "meta");
    tu_ok(clf_st_writer_serialize(w, &got, &gn, &err), &err, "serialize");
    want = expected_file("{\"__metadata__\":{\"framework\":\"pt\"}}     ", NULL, 0, &wn);
    TU_CHECK(bytes_equal(got, gn, want, wn) && got[0] == 40,
             "metadata-only file: identical (40-byte header)");
    free(got);
    free(want);
    clf_st_writer_destroy(w);

    /* What safetensors.torch.save_file({"a": f32 [2,2], "b": i64 [2],
     * "c": u8 [3]}, path, metadata={"format": "pt"}) writes: I64 before F32
     * before U8, each group by name, metadata first. */
    float a[4] = {1.5f, -2.0f, 0.25f, 8.0f};
    int64_t b[2] = {-1, 1234567890123LL};
    uint8_t c[3] = {7, 8, 255};
    unsigned char data[35];
    memcpy(data, b, 16);
    memcpy(data + 16, a, 16);
    memcpy(data + 32, c, 3);
    tu_ok(clf_st_writer_create(&w, &err), &err, "writer");
    tu_ok(clf_st_writer_add(w, "a", CLF_ST_F32, 2, (int64_t[]){2, 2}, a, &err), &err, "add a");
    tu_ok(clf_st_writer_add(w, "c", CLF_ST_U8, 1, (int64_t[]){3}, c, &err), &err, "add c");
    tu_ok(clf_st_writer_add(w, "b", CLF_ST_I64, 1, (int64_t[]){2}, b, &err), &err, "add b");
    tu_ok(clf_st_writer_add_metadata(w, "format", "pt", &err), &err, "meta");
    tu_ok(clf_st_writer_serialize(w, &got, &gn, &err), &err, "serialize");
    const char *hdr = "{\"__metadata__\":{\"format\":\"pt\"},"
                      "\"b\":{\"dtype\":\"I64\",\"shape\":[2],\"data_offsets\":[0,16]},"
                      "\"a\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[16,32]},"
                      "\"c\":{\"dtype\":\"U8\",\"shape\":[3],\"data_offsets\":[32,35]}}";
    char padded[512];
    size_t hl = strlen(hdr);
    snprintf(padded, sizeof padded, "%s%.*s", hdr, (int)((8 - hl % 8) % 8), "       ");
    want = expected_file(padded, data, 35, &wn);
    TU_CHECK(bytes_equal(got, gn, want, wn) && (8 + strlen(padded)) % 8 == 0,
             "three dtypes added as a, c, b: ordered b (I64), a (F32), c (U8) as the reference "
             "does, identical bytes");

    /* And our reader takes that file. */
    char p[512];
    path_in(p, sizeof p, "python.safetensors");
    write_bytes(p, want, wn);
    clf_st_reader *r = NULL;
    clf_status st = clf_st_reader_open(p, &r, &err);
    TU_CHECK(st == CLF_OK, "reader opens the reference-format file");
    if (st == CLF_OK) {
        float ra[4];
        int64_t rb[2];
        uint8_t rc[3];
        TU_CHECK(clf_st_reader_count(r) == 3 &&
                     strcmp(clf_st_reader_tensor(r, 0)->name, "b") == 0 &&
                     strcmp(clf_st_reader_metadata(r, "format"), "pt") == 0,
                 "3 tensors in offset order, metadata format=pt");
        st = clf_st_reader_read(r, "a", CLF_ST_F32, 2, (int64_t[]){2, 2}, ra, sizeof ra, &err);
        st |= clf_st_reader_read(r, "b", CLF_ST_I64, 1, (int64_t[]){2}, rb, sizeof rb, &err);
        st |= clf_st_reader_read(r, "c", CLF_ST_U8, 1, (int64_t[]){3}, rc, sizeof rc, &err);
        TU_CHECK(st == CLF_OK && memcmp(ra, a, 16) == 0 && memcmp(rb, b, 16) == 0 &&
                     memcmp(rc, c, 3) == 0,
                 "values read back exactly");
    }
    clf_st_reader_destroy(r);
    free(got);
    free(want);
    clf_st_writer_destroy(w);

    /* The reference's test_deserialization: an unpadded 60-byte header
     * (older writers did not pad), I32 [2, 2] of zeros. */
    path_in(p, sizeof p, "old.safetensors");
    write_st(p, "{\"test\":{\"dtype\":\"I32\",\"shape\":[2,2],\"data_offsets\":[0,16]}}", 0);
    {
        size_t n;
        unsigned char *raw = read_bytes(p, &n);
        unsigned char *full = calloc(n + 16, 1);
        memcpy(full, raw, n);
        write_bytes(p, full, n + 16);
        free(raw);
        free(full);
    }
    st = clf_st_reader_open(p, &r, &err);
    int32_t z[4] = {1, 1, 1, 1};
    if (st == CLF_OK)
        st = clf_st_reader_read(r, "test", CLF_ST_I32, 2, (int64_t[]){2, 2}, z, sizeof z, &err);
    TU_CHECK(st == CLF_OK && z[0] == 0 && z[3] == 0, "unpadded (older) header accepted");
    clf_st_reader_destroy(r);

    /* Zero-size and scalar tensors (test_zero_sized_tensor, test_empty_shapes_allowed),
     * and a header padded with other JSON whitespace. */
    path_in(p, sizeof p, "zero.safetensors");
    write_st(p,
             "{\"e\":{\"dtype\":\"I32\",\"shape\":[2,0],\"data_offsets\":[0,0]},"
             "\"s\":{\"dtype\":\"I32\",\"shape\":[],\"data_offsets\":[0,4]}}\r \t\n",
             4);
    st = clf_st_reader_open(p, &r, &err);
    TU_CHECK(st == CLF_OK && clf_st_reader_find(r, "e")->ndim == 2 &&
                 clf_st_reader_find(r, "s")->ndim == 0,
             "zero-size [2,0] and scalar [] tensors; whitespace padding");
    if (st == CLF_OK) {
        int32_t s = 0;
        st = clf_st_reader_read(r, "s", CLF_ST_I32, 0, NULL, &s, 4, &err);
        TU_CHECK(st == CLF_OK && s == 0x03020100, "scalar read (bytes 0,1,2,3 -> 0x03020100)");
    }
    clf_st_reader_destroy(r);
}

/* ---- round trip -------------------------------------------------------------- */

static void test_round_trip(void)
{
    printf("round trip\n");
    tu_rng rng = tu_rng_new(21);
    clf_error err;
    char p[512];
    path_in(p, sizeof p, "rt.safetensors");
    enum { NT = 24 };
    static const clf_st_dtype dts[] = {CLF_ST_F32, CLF_ST_I32, CLF_ST_I64,  CLF_ST_U8,
                                       CLF_ST_F64, CLF_ST_F16, CLF_ST_BF16, CLF_ST_BOOL,
                                       CLF_ST_U16, CLF_ST_I8,  CLF_ST_U64,  CLF_ST_U32};
    char names[NT][32];
    int ndim[NT];
    int64_t shapes[NT][4];
    unsigned char *data[NT];
    size_t bytes[NT];
    clf_st_dtype dt[NT];
    clf_st_writer *w = NULL;
    tu_ok(clf_st_writer_create(&w, &err), &err, "writer");
    for (int i = 0; i < NT; i++) {
        snprintf(names[i], sizeof names[i], "blocks.%d.w%s.%d", i % 5, i % 2 ? "q" : "\xc3\xa9", i);
        dt[i] = dts[i % 12];
        ndim[i] = (int)(tu_u32(&rng) % 4);
        size_t n = 1;
        for (int d = 0; d < ndim[i]; d++) {
            shapes[i][d] = (int64_t)(tu_u32(&rng) % 9); /* includes 0-size dims */
            n *= (size_t)shapes[i][d];
        }
        bytes[i] = n * clf_st_dtype_size(dt[i]);
        data[i] = malloc(bytes[i] + 1);
        for (size_t k = 0; k < bytes[i]; k++)
            data[i][k] = (unsigned char)tu_u32(&rng);
        tu_ok(clf_st_writer_add(w, names[i], dt[i], ndim[i], shapes[i], data[i], &err), &err,
              "add");
    }
    const char *cfg = "{\"model\": {\"kind\": \"decoder\", \"note\": \"line\\nbreak \\\"q\\\"\"}}\n"
                      "Gr\xc3\xbc\xc3\x9f"
                      "e \xf0\x9f\x98\x80\ttab";
    tu_ok(clf_st_writer_add_metadata(w, "config", cfg, &err), &err, "meta");
    tu_ok(clf_st_writer_add_metadata(w, "step", "1000", &err), &err, "meta");
    tu_ok(clf_st_writer_add_metadata(w, "", "empty key", &err), &err, "meta");
    tu_ok(clf_st_writer_write(w, p, &err), &err, "write");

    clf_st_reader *r = NULL;
    clf_status st = clf_st_reader_open(p, &r, &err);
    TU_CHECK(st == CLF_OK, "written file opens: %s", st ? err.msg : "");
    if (st != CLF_OK)
        goto done;
    TU_CHECK(clf_st_reader_count(r) == NT && clf_st_reader_metadata_count(r) == 3,
             "%d tensors and 3 metadata pairs", NT);
    TU_CHECK(strcmp(clf_st_reader_metadata(r, "config"), cfg) == 0 &&
                 strcmp(clf_st_reader_metadata(r, "step"), "1000") == 0 &&
                 strcmp(clf_st_reader_metadata(r, ""), "empty key") == 0 &&
                 clf_st_reader_metadata(r, "nope") == NULL,
             "metadata (JSON text, quotes, newline, tab, UTF-8) read back exactly");
    int all = 1;
    uint64_t prev_end = 0;
    for (size_t i = 0; i < clf_st_reader_count(r); i++) {
        const clf_st_tensor_info *t = clf_st_reader_tensor(r, i);
        all &= t->begin == prev_end && t->begin % clf_st_dtype_size(t->dtype) == 0;
        prev_end = t->end;
    }
    TU_CHECK(all, "data contiguous in file order, every tensor aligned to its dtype");
    all = 1;
    for (int i = 0; i < NT; i++) {
        unsigned char *back = malloc(bytes[i] + 1);
        st = clf_st_reader_read(r, names[i], dt[i], ndim[i], shapes[i], back, bytes[i], &err);
        if (st != CLF_OK || memcmp(back, data[i], bytes[i]) != 0) {
            all = 0;
            printf("  %s: %s\n", names[i], st ? err.msg : "bytes differ");
        }
        free(back);
    }
    TU_CHECK(all, "every tensor (12 dtypes, 0-3 dims, zero sizes) reads back byte-exact");

    /* read checks */
    float buf[64];
    const char *n0 = names[0]; /* F32 */
    const clf_st_tensor_info *t0 = clf_st_reader_find(r, n0);
    int64_t wrong[4] = {t0->shape[0] + 1, 1, 1, 1};
    st = clf_st_reader_read(r, n0, CLF_ST_F32, t0->ndim > 0 ? t0->ndim : 1, wrong, buf, sizeof buf,
                            &err);
    char fm[CLF_ERROR_MSG_MAX + 600];
    clf_error_format(&err, fm, sizeof fm);
    char have[128], exp_s[128];
    clf_st_shape_format(t0->ndim, t0->shape, have, sizeof have);
    clf_st_shape_format(t0->ndim > 0 ? t0->ndim : 1, wrong, exp_s, sizeof exp_s);
    TU_CHECK(st == CLF_ERR_FORMAT && strstr(fm, n0) && strstr(fm, have) && strstr(fm, exp_s) &&
                 strstr(fm, p),
             "shape mismatch names tensor, file and both shapes: %s", fm);
    st = clf_st_reader_read(r, n0, CLF_ST_I32, t0->ndim, t0->shape, buf, sizeof buf, &err);
    clf_error_format(&err, fm, sizeof fm);
    TU_CHECK(st == CLF_ERR_FORMAT && strstr(fm, "expected I32") && strstr(fm, "found F32"),
             "dtype mismatch: %s", fm);
    st = clf_st_reader_read(r, "no.such", CLF_ST_F32, 0, NULL, buf, sizeof buf, &err);
    TU_CHECK(st == CLF_ERR_FORMAT && strstr(err.msg, "no tensor named \"no.such\""),
             "missing tensor: %s", err.msg);
    int big = -1;
    for (int i = 0; i < NT && big < 0; i++)
        if (bytes[i] > 4)
            big = i;
    if (big >= 0) {
        st = clf_st_reader_read(r, names[big], dt[big], ndim[big], shapes[big], buf, 4, &err);
        TU_CHECK(st == CLF_ERR_ARG, "destination too small: %s", err.msg);
    }
done:
    clf_st_reader_destroy(r);
    clf_st_writer_destroy(w);
    for (int i = 0; i < NT; i++)
        free(data[i]);

    /* writer argument checks */
    tu_ok(clf_st_writer_create(&w, &err), &err, "writer");
    float one = 1.0f;
    TU_CHECK(clf_st_writer_add(w, "x", CLF_ST_F32, 0, NULL, &one, &err) == CLF_OK, "scalar add");
    TU_CHECK(clf_st_writer_add(w, "x", CLF_ST_F32, 0, NULL, &one, &err) == CLF_ERR_ARG,
             "duplicate name refused: %s", err.msg);
    TU_CHECK(clf_st_writer_add(w, "__metadata__", CLF_ST_F32, 0, NULL, &one, &err) == CLF_ERR_ARG,
             "reserved name refused");
    TU_CHECK(clf_st_writer_add(w, "", CLF_ST_F32, 0, NULL, &one, &err) == CLF_ERR_ARG,
             "empty name refused");
    TU_CHECK(clf_st_writer_add(w, "n", CLF_ST_F32, 1, (int64_t[]){-1}, &one, &err) == CLF_ERR_ARG,
             "negative dimension refused: %s", err.msg);
    TU_CHECK(clf_st_writer_add(w, "big", CLF_ST_F32, 2, (int64_t[]){INT64_MAX, 4}, &one, &err) ==
                 CLF_ERR_ARG,
             "size overflow refused: %s", err.msg);
    TU_CHECK(clf_st_writer_add(w, "bad\xff", CLF_ST_F32, 0, NULL, &one, &err) == CLF_ERR_ARG,
             "non-UTF-8 name refused");
    tu_ok(clf_st_writer_add_metadata(w, "k", "v", &err), &err, "meta");
    TU_CHECK(clf_st_writer_add_metadata(w, "k", "w", &err) == CLF_ERR_ARG,
             "duplicate metadata key refused");
    clf_st_writer_destroy(w);
    clf_st_writer_destroy(NULL);
    clf_st_reader_destroy(NULL);
}

/* ---- corruption -------------------------------------------------------------- */

/* Open must fail with CLF_ERR_FORMAT, the formatted message naming the file
 * and containing want. */
static int refused(const char *path, const char *want, int quiet)
{
    clf_st_reader *r = NULL;
    clf_error err;
    clf_error_clear(&err);
    clf_status st = clf_st_reader_open(path, &r, &err);
    char fm[CLF_ERROR_MSG_MAX + 600];
    clf_error_format(&err, fm, sizeof fm);
    int ok = st == CLF_ERR_FORMAT && r == NULL && strstr(fm, path) != NULL &&
             (want == NULL || strstr(fm, want) != NULL);
    if (!ok || !quiet)
        printf("  %s -> %s\n", want ? want : "", fm);
    clf_st_reader_destroy(r);
    return ok;
}

static void test_truncation(void)
{
    printf("truncation\n");
    clf_error err;
    char p[512], q[512];
    path_in(p, sizeof p, "full.safetensors");
    path_in(q, sizeof q, "cut.safetensors");
    float a[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
    int32_t b[3] = {1, 2, 3};
    clf_st_writer *w = NULL;
    tu_ok(clf_st_writer_create(&w, &err), &err, "writer");
    tu_ok(clf_st_writer_add(w, "a", CLF_ST_F32, 2, (int64_t[]){2, 5}, a, &err), &err, "add");
    tu_ok(clf_st_writer_add(w, "b", CLF_ST_I32, 1, (int64_t[]){3}, b, &err), &err, "add");
    tu_ok(clf_st_writer_add_metadata(w, "step", "7", &err), &err, "meta");
    tu_ok(clf_st_writer_write(w, p, &err), &err, "write");
    clf_st_writer_destroy(w);
    size_t n;
    unsigned char *full = read_bytes(p, &n);
    int all = full != NULL;
    for (size_t cut = 0; all && cut < n; cut++) {
        write_bytes(q, full, cut);
        const char *want = cut < 8 ? "too short" : "truncated";
        if (cut > 8 && cut < 8 + (size_t)full[0])
            want = "goes past the end";
        all = refused(q, want, 1);
        if (!all)
            printf("  cut at %zu of %zu\n", cut, n);
    }
    TU_CHECK(all, "cut at each of the %zu bytes: refused, naming the file and saying truncated", n);
    /* one byte too many */
    unsigned char *longer = malloc(n + 1);
    memcpy(longer, full, n);
    longer[n] = 0;
    write_bytes(q, longer, n + 1);
    TU_CHECK(refused(q, "1 bytes after the last tensor", 0), "trailing byte refused");
    free(longer);
    free(full);
}

static void test_corrupt_headers(void)
{
    printf("corrupt headers\n");
    char p[512];
    path_in(p, sizeof p, "bad.safetensors");
    static const struct {
        const char *header;
        size_t data;
        const char *want;
    } cases[] = {
        {"[]      ", 0, "does not start with '{'"},
        {"{\"a\":1}", 0, "tensor \"a\": expected an object"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]", 8,
         "safetensors header: byte 52"},
        {" {}     ", 0, "does not start with '{'"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,16]},"
         "\"b\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[8,24]}}",
         24, "\"a\" [0, 16) and \"b\" [8, 24) overlap"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
         "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[16,24]}}",
         24, "8 unused bytes before tensor \"b\""},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}}", 16,
         "unused bytes before tensor \"a\""},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}", 8,
         "need 16 bytes of data but the file holds 8"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,4]}}", 4,
         "F32 [2, 2] needs 16 bytes but data_offsets [0, 4] hold 4"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,0]}}", 8, "end before"},
        {"{\"a\":{\"dtype\":\"I32\",\"shape\":[2,9223372036854775807],"
         "\"data_offsets\":[0,16]}}",
         16, "overflows"},
        {"{\"a\":{\"dtype\":\"I32\",\"shape\":[2,18446744073709551614],"
         "\"data_offsets\":[0,16]}}",
         16, "shape[1] is not a non-negative integer"},
        {"{\"a\":{\"dtype\":\"I32\",\"shape\":[-2],\"data_offsets\":[0,8]}}", 8, "shape[0]"},
        {"{\"a\":{\"dtype\":\"I32\",\"shape\":[2.0],\"data_offsets\":[0,8]}}", 8, "shape[0]"},
        {"{\"a\":{\"dtype\":\"F99\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8,
         "unknown dtype \"F99\""},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2]}}", 8, "missing \"data_offsets\""},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8],\"x\":1}}", 8,
         "unknown field \"x\""},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
         "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}}",
         16, "duplicate key \"a\""},
        {"{\"__metadata__\":{\"step\":7}}", 0, "__metadata__ \"step\" is a JSON number"},
        {"{\"__metadata__\":[]}", 0, "__metadata__ must be an object"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}", 4,
         "at most 8"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0]}}", 8, "[begin, end]"},
        {"{\"a\xff\":{}}", 0, "invalid UTF-8"},
    };
    int all = 1;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        write_st(p, cases[i].header, cases[i].data);
        all &= refused(p, cases[i].want, 0);
    }
    TU_CHECK(all, "%zu corrupt headers refused with CLF_ERR_FORMAT, naming the file",
             sizeof cases / sizeof cases[0]);

    /* bad header lengths */
    unsigned char b[64];
    memset(b, ' ', sizeof b);
    memcpy(b + 8, "{}", 2);
    uint64_t lens[] = {0, 1, 57, 100000001ull, 0xFFFFFFFFFFFFFFFFull};
    const char *wants[] = {"outside 2..", "outside 2..", "goes past the end", "outside 2..",
                           "outside 2.."};
    all = 1;
    for (int k = 0; k < 5; k++) {
        for (int i = 0; i < 8; i++)
            b[i] = (unsigned char)(lens[k] >> (8 * i));
        write_bytes(p, b, 64);
        all &= refused(p, wants[k], 0);
    }
    TU_CHECK(all, "header lengths 0, 1, past the end, > 100 MB and 2^64-1 refused");

    /* not a regular file / missing */
    clf_st_reader *r = NULL;
    clf_error err;
    char missing[512];
    path_in(missing, sizeof missing, "missing.safetensors");
    clf_status st = clf_st_reader_open(missing, &r, &err);
    TU_CHECK(st == CLF_ERR_IO && strstr(err.msg, missing) && strstr(err.msg, "No such file"),
             "missing file: CLF_ERR_IO: %s", err.msg);
    st = clf_st_reader_open(dir, &r, &err);
    TU_CHECK(st == CLF_ERR_IO && r == NULL, "a directory: CLF_ERR_IO: %s", err.msg);
}

/* ---- atomic writes ------------------------------------------------------------- */

static int file_is(const char *path, const void *want, size_t n)
{
    size_t got_n;
    unsigned char *got = read_bytes(path, &got_n);
    int ok = got != NULL && got_n == n && memcmp(got, want, n) == 0;
    free(got);
    return ok;
}

static void test_atomic(void)
{
    printf("atomic writes\n");
    clf_error err;
    char p[512];
    path_in(p, sizeof p, "ckpt.safetensors");
    float small[4] = {1, 2, 3, 4};
    clf_st_writer *w = NULL;
    tu_ok(clf_st_writer_create(&w, &err), &err, "writer");
    tu_ok(clf_st_writer_add(w, "w", CLF_ST_F32, 1, (int64_t[]){4}, small, &err), &err, "add");
    tu_ok(clf_st_writer_write(w, p, &err), &err, "write v1");
    clf_st_writer_destroy(w);
    size_t n1;
    unsigned char *v1 = read_bytes(p, &n1);

    /* replace */
    float other[4] = {5, 6, 7, 8};
    tu_ok(clf_st_writer_create(&w, &err), &err, "writer");
    tu_ok(clf_st_writer_add(w, "w", CLF_ST_F32, 1, (int64_t[]){4}, other, &err), &err, "add");
    tu_ok(clf_st_writer_write(w, p, &err), &err, "write v2");
    clf_st_writer_destroy(w);
    clf_st_reader *r = NULL;
    float back[4] = {0};
    clf_status st = clf_st_reader_open(p, &r, &err);
    if (st == CLF_OK)
        st = clf_st_reader_read(r, "w", CLF_ST_F32, 1, (int64_t[]){4}, back, sizeof back, &err);
    clf_st_reader_destroy(r);
    TU_CHECK(st == CLF_OK && back[0] == 5 && back[3] == 8 && no_temp_files(),
             "rewrite replaces the file, no temporary left");
    /* put v1 back for the failure cases */
    tu_ok(clf_file_write_atomic(p, v1, n1, &err), &err, "restore v1");

    /* a write that fails midway: the file-size limit stops the temporary
     * file at 64 KiB while writing 1 MiB (write() then fails with EFBIG). */
    size_t nbig = 1 << 18;
    float *big = malloc(nbig * sizeof *big);
    for (size_t i = 0; i < nbig; i++)
        big[i] = (float)i;
    struct rlimit old, lim;
    getrlimit(RLIMIT_FSIZE, &old);
    void (*prev)(int) = signal(SIGXFSZ, SIG_IGN);
    lim = old;
    lim.rlim_cur = 64 * 1024;
    int limited = setrlimit(RLIMIT_FSIZE, &lim) == 0;
    tu_ok(clf_st_writer_create(&w, &err), &err, "writer");
    tu_ok(clf_st_writer_add(w, "w", CLF_ST_F32, 1, (int64_t[]){(int64_t)nbig}, big, &err), &err,
          "add");
    st = clf_st_writer_write(w, p, &err);
    setrlimit(RLIMIT_FSIZE, &old);
    signal(SIGXFSZ, prev);
    clf_st_writer_destroy(w);
    TU_CHECK(limited && st == CLF_ERR_IO && file_is(p, v1, n1) && no_temp_files(),
             "write failing at 64 KiB of 1 MiB: CLF_ERR_IO (%s), old file intact, temporary "
             "removed",
             err.msg);
    free(big);

    /* vanished directory */
    char gone[512];
    path_in(gone, sizeof gone, "gone/ckpt.safetensors");
    tu_ok(clf_st_writer_create(&w, &err), &err, "writer");
    tu_ok(clf_st_writer_add(w, "w", CLF_ST_F32, 1, (int64_t[]){4}, small, &err), &err, "add");
    st = clf_st_writer_write(w, gone, &err);
    TU_CHECK(st == CLF_ERR_IO && strstr(err.msg, gone) != NULL,
             "missing directory: CLF_ERR_IO naming the path: %s", err.msg);

    /* a directory where the file should go: rename fails */
    char sub[512];
    path_in(sub, sizeof sub, "adir");
    mkdir(sub, 0755);
    st = clf_st_writer_write(w, sub, &err);
    struct stat sb;
    TU_CHECK(st == CLF_ERR_IO && stat(sub, &sb) == 0 && S_ISDIR(sb.st_mode) && no_temp_files(),
             "target is a directory: CLF_ERR_IO, directory untouched, no temporary: %s", err.msg);
    rmdir(sub);
    clf_st_writer_destroy(w);

    /* a target that is not a regular file is refused and left as it was;
     * a symbolic link to a regular file is written through */
    st = clf_file_write_atomic("/dev/null", "x", 1, &err);
    TU_CHECK(st == CLF_ERR_IO && stat("/dev/null", &sb) == 0 && S_ISCHR(sb.st_mode) &&
                 strstr(err.msg, "character device") != NULL,
             "/dev/null: refused, still a character device: %s", err.msg);
    char fifo[512], link[512], dangling[512], target[512];
    path_in(fifo, sizeof fifo, "a.fifo");
    path_in(link, sizeof link, "link.safetensors");
    path_in(dangling, sizeof dangling, "dangling.safetensors");
    path_in(target, sizeof target, "target.bin");
    if (mkfifo(fifo, 0644) == 0) {
        st = clf_file_write_atomic(fifo, "x", 1, &err);
        TU_CHECK(st == CLF_ERR_IO && lstat(fifo, &sb) == 0 && S_ISFIFO(sb.st_mode) &&
                     no_temp_files(),
                 "a FIFO: refused, still a FIFO, no temporary: %s", err.msg);
        unlink(fifo);
    }
    tu_ok(clf_file_write_atomic(target, "old", 3, &err), &err, "write the link's target");
    TU_CHECK(symlink(target, link) == 0, "make a symbolic link");
    tu_ok(clf_file_write_atomic(link, "new!", 4, &err), &err, "write through the link");
    TU_CHECK(lstat(link, &sb) == 0 && S_ISLNK(sb.st_mode) && file_is(target, "new!", 4) &&
                 no_temp_files(),
             "a link to a regular file: the target replaced, the link kept");
    TU_CHECK(symlink("/nonexistent/x", dangling) == 0, "make a dangling link");
    st = clf_file_write_atomic(dangling, "x", 1, &err);
    TU_CHECK(st == CLF_ERR_IO && lstat(dangling, &sb) == 0 && S_ISLNK(sb.st_mode),
             "a dangling link: refused, still a link: %s", err.msg);
    unlink(link);
    unlink(dangling);
    unlink(target);

    /* aborted streaming write */
    clf_file_atomic *f = NULL;
    tu_ok(clf_file_atomic_open(p, &f, &err), &err, "open");
    tu_ok(clf_file_atomic_write(f, "partial", 7, &err), &err, "write");
    struct stat tsb;
    int tmp_existed = stat(clf_file_atomic_tmp_path(f), &tsb) == 0;
    clf_file_atomic_abort(f);
    TU_CHECK(tmp_existed && file_is(p, v1, n1) && no_temp_files(),
             "aborted write: temporary existed while writing, removed after; old file intact");
    clf_file_atomic_abort(NULL);

    /* read-only directory (meaningless as root, who may write anyway) */
    if (geteuid() != 0) {
        char ro[512], rop[600];
        path_in(ro, sizeof ro, "ro");
        mkdir(ro, 0755);
        snprintf(rop, sizeof rop, "%s/x.bin", ro);
        tu_ok(clf_file_write_atomic(rop, "old", 3, &err), &err, "write old");
        chmod(ro, 0555);
        st = clf_file_write_atomic(rop, "new", 3, &err);
        chmod(ro, 0755);
        TU_CHECK(st == CLF_ERR_IO && file_is(rop, "old", 3), "read-only directory: %s", err.msg);
        unlink(rop);
        rmdir(ro);
    } else {
        printf("  (running as root: read-only directory case skipped; the file-size limit case "
               "covers a failed write)\n");
    }

    /* read_all limits */
    char *data = NULL;
    size_t len = 0;
    st = clf_file_read_all(p, n1 - 1, &data, &len, &err);
    TU_CHECK(st == CLF_ERR_IO && data == NULL && strstr(err.msg, "limit"),
             "read_all refuses a file over the limit: %s", err.msg);
    st = clf_file_read_all(p, n1, &data, &len, &err);
    TU_CHECK(st == CLF_OK && len == n1 && data[len] == '\0', "read_all at exactly the limit");
    free(data);
    free(v1);
}

static void cleanup(void)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char p[600];
    while (d != NULL && (e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        unlink(p);
    }
    if (d != NULL)
        closedir(d);
    rmdir(dir);
}

/* float32 <-> 16 bits: every finite bf16 and f16 value widens exactly and
 * narrows back to itself; narrowing rounds to nearest even (a value
 * halfway between two neighbours goes to the even one, just above it to
 * the upper); f16 overflows to infinity at 65520 and keeps subnormals;
 * NaN stays NaN. And a BF16 / F16 tensor reads back as float32 through
 * clf_st_reader_read_f32 (F32 too; another dtype or shape is refused). */
static void test_half(void)
{
    int exact_bf = 1, exact_f = 1;
    for (uint32_t h = 0; h < 65536; h++) {
        const float b = clf_bf16_to_f32((uint16_t)h), f = clf_f16_to_f32((uint16_t)h);
        if (!isnan(b))
            exact_bf &= clf_f32_to_bf16(b) == h;
        if (!isnan(f))
            exact_f &= clf_f32_to_f16(f) == h;
        else
            exact_f &= isnan(clf_f16_to_f32(clf_f32_to_f16(f)));
    }
    TU_CHECK(exact_bf, "every bf16 value widens and narrows back to itself");
    TU_CHECK(exact_f, "every f16 value widens and narrows back to itself (NaN to a NaN)");
    /* 1 + 2^-8 is halfway between bf16's 1 and 1 + 2^-7: to the even, 1;
     * 1 + 3 * 2^-8 is halfway between 1 + 2^-7 and 1 + 2^-6: to 1 + 2^-6 */
    TU_CHECK(clf_bf16_to_f32(clf_f32_to_bf16(1.0f + 0x1p-8f)) == 1.0f &&
                 clf_bf16_to_f32(clf_f32_to_bf16(1.0f + 3 * 0x1p-8f)) == 1.0f + 0x1p-6f &&
                 clf_bf16_to_f32(clf_f32_to_bf16(1.0f + 0x1p-8f + 0x1p-20f)) == 1.0f + 0x1p-7f,
             "bf16 rounds to nearest even");
    TU_CHECK(clf_f16_to_f32(clf_f32_to_f16(1.0f + 0x1p-11f)) == 1.0f &&
                 clf_f16_to_f32(clf_f32_to_f16(1.0f + 3 * 0x1p-11f)) == 1.0f + 0x1p-9f &&
                 clf_f16_to_f32(clf_f32_to_f16(65504.0f)) == 65504.0f &&
                 isinf(clf_f16_to_f32(clf_f32_to_f16(65520.0f))) &&
                 clf_f16_to_f32(clf_f32_to_f16(65519.0f)) == 65504.0f &&
                 clf_f16_to_f32(clf_f32_to_f16(0x1p-24f)) == 0x1p-24f &&
                 clf_f16_to_f32(clf_f32_to_f16(0x1p-26f)) == 0.0f &&
                 clf_f16_to_f32(clf_f32_to_f16(-3.0f * 0x1p-25f)) == -0x1p-23f,
             "f16 rounds to nearest even, overflows at 65520, keeps subnormals");
    TU_CHECK(isnan(clf_bf16_to_f32(clf_f32_to_bf16(NAN))) &&
                 isnan(clf_f16_to_f32(clf_f32_to_f16(NAN))),
             "NaN stays NaN");
    /* a file with an F16, a BF16 and an F32 tensor, read as float32 */
    const float vals[6] = {0.5f, -2.25f, 1.0f / 3.0f, 1000.0f, -1e-3f, 3.0e4f};
    uint16_t h16[6], hb[6];
    for (int i = 0; i < 6; i++) {
        h16[i] = clf_f32_to_f16(vals[i]);
        hb[i] = clf_f32_to_bf16(vals[i]);
    }
    clf_error err;
    clf_st_writer *w = NULL;
    const int64_t shape[2] = {2, 3};
    tu_ok(clf_st_writer_create(&w, &err), &err, "writer");
    tu_ok(clf_st_writer_add(w, "h", CLF_ST_F16, 2, shape, h16, &err), &err, "add f16");
    tu_ok(clf_st_writer_add(w, "b", CLF_ST_BF16, 2, shape, hb, &err), &err, "add bf16");
    tu_ok(clf_st_writer_add(w, "f", CLF_ST_F32, 2, shape, vals, &err), &err, "add f32");
    tu_ok(clf_st_writer_add(w, "i", CLF_ST_I32, 2, shape, vals, &err), &err, "add i32");
    char path[600];
    path_in(path, sizeof path, "half.safetensors");
    tu_ok(clf_st_writer_write(w, path, &err), &err, "write");
    clf_st_writer_destroy(w);
    clf_st_reader *r = NULL;
    tu_ok(clf_st_reader_open(path, &r, &err), &err, "open");
    float got[6];
    int ok16 = 1, okb = 1, ok32 = 1;
    tu_ok(clf_st_reader_read_f32(r, "h", 2, shape, got, 6, &err), &err, "read f16");
    for (int i = 0; i < 6; i++)
        ok16 &=
            got[i] == clf_f16_to_f32(h16[i]) && fabsf(got[i] - vals[i]) <= 1e-3f * fabsf(vals[i]);
    tu_ok(clf_st_reader_read_f32(r, "b", 2, shape, got, 6, &err), &err, "read bf16");
    for (int i = 0; i < 6; i++)
        okb &=
            got[i] == clf_bf16_to_f32(hb[i]) && fabsf(got[i] - vals[i]) <= 4e-3f * fabsf(vals[i]);
    tu_ok(clf_st_reader_read_f32(r, "f", 2, shape, got, 6, &err), &err, "read f32");
    for (int i = 0; i < 6; i++)
        ok32 &= got[i] == vals[i];
    TU_CHECK(ok16 && okb && ok32, "F16, BF16 and F32 tensors read as float32 (%d %d %d)", ok16, okb,
             ok32);
    const int64_t wrong[2] = {3, 2};
    TU_CHECK(clf_st_reader_read_f32(r, "h", 2, wrong, got, 6, &err) == CLF_ERR_FORMAT &&
                 strstr(err.msg, "\"h\"") != NULL,
             "a 16-bit tensor of another shape is refused naming it: %s", err.msg);
    TU_CHECK(clf_st_reader_read_f32(r, "i", 2, shape, got, 6, &err) == CLF_ERR_FORMAT,
             "an I32 tensor is not read as float32: %s", err.msg);
    TU_CHECK(clf_st_reader_read_f32(r, "b", 2, shape, got, 5, &err) == CLF_ERR_ARG,
             "a destination too small is refused");
    clf_st_reader_destroy(r);
}

/* Checksums: every byte of a checksummed file flipped in turn is caught:
 * in the header, the open fails (the metadata's checksum, or the JSON, or
 * the layout); in a tensor's data, reading that tensor fails naming it
 * while the other tensor still reads. A file without checksums reads
 * unverified; a checksum naming a tensor the file lacks, or a tensor
 * without one, is refused. */
static void test_checksums(void)
{
    printf("checksums\n");
    clf_error err;
    char p[512], q[512];
    path_in(p, sizeof p, "crc.safetensors");
    path_in(q, sizeof q, "crc-flip.safetensors");
    float a[6] = {1.5f, -2, 3, 4, 5, 6};
    int32_t b[3] = {7, 8, 9};
    clf_st_writer *w = NULL;
    tu_ok(clf_st_writer_create(&w, &err), &err, "writer");
    tu_ok(clf_st_writer_add(w, "a", CLF_ST_F32, 2, (int64_t[]){2, 3}, a, &err), &err, "add");
    tu_ok(clf_st_writer_add(w, "b", CLF_ST_I32, 1, (int64_t[]){3}, b, &err), &err, "add");
    tu_ok(clf_st_writer_add_metadata(w, "step", "7", &err), &err, "meta");
    tu_ok(clf_st_writer_add_checksums(w, &err), &err, "checksums");
    tu_ok(clf_st_writer_write(w, p, &err), &err, "write");
    clf_st_writer_destroy(w);
    clf_st_reader *r = NULL;
    tu_ok(clf_st_reader_open(p, &r, &err), &err, "open");
    float ga[6];
    int32_t gb[3];
    TU_CHECK(clf_st_reader_checksummed(r) &&
                 clf_st_reader_read(r, "a", CLF_ST_F32, 2, (int64_t[]){2, 3}, ga, sizeof ga,
                                    &err) == CLF_OK &&
                 memcmp(ga, a, sizeof a) == 0,
             "a checksummed file reads back verified");
    clf_st_reader_destroy(r);

    size_t n;
    unsigned char *full = read_bytes(p, &n);
    const size_t data = full != NULL ? 8 + (size_t)full[0] + 256 * (size_t)full[1] : n;
    int caught = full != NULL, other_ok = 1;
    for (size_t i = 8; caught && i < n; i++) {
        full[i] ^= 0x10;
        write_bytes(q, full, n);
        full[i] ^= 0x10;
        r = NULL;
        if (clf_st_reader_open(q, &r, &err) != CLF_OK) {
            /* a header byte: refused when opened, naming the file */
            char fm[CLF_ERROR_MSG_MAX + 600];
            clf_error_format(&err, fm, sizeof fm);
            caught = i < data && strstr(fm, "crc-flip.safetensors") != NULL;
        } else if (i < data) {
            caught = 0; /* a header byte went unnoticed */
        } else {
            /* data: the tensor holding byte i fails, naming itself */
            const clf_st_tensor_info *t = NULL;
            for (size_t k = 0; k < clf_st_reader_count(r); k++) {
                const clf_st_tensor_info *x = clf_st_reader_tensor(r, k);
                if (i - data >= x->begin && i - data < x->end)
                    t = x;
            }
            if (t == NULL) {
                caught = 0;
            } else {
                const int is_a = strcmp(t->name, "a") == 0;
                clf_status sa = clf_st_reader_read(r, "a", CLF_ST_F32, 2, (int64_t[]){2, 3}, ga,
                                                   sizeof ga, &err);
                char msg[CLF_ERROR_MSG_MAX];
                snprintf(msg, sizeof msg, "%s", err.msg);
                clf_status sb =
                    clf_st_reader_read(r, "b", CLF_ST_I32, 1, (int64_t[]){3}, gb, sizeof gb, &err);
                if (is_a) {
                    caught = sa == CLF_ERR_FORMAT && strstr(msg, "\"a\" fails its checksum");
                    other_ok &= sb == CLF_OK && memcmp(gb, b, sizeof b) == 0;
                } else {
                    caught = sb == CLF_ERR_FORMAT && strstr(err.msg, "\"b\" fails its checksum");
                    other_ok &= sa == CLF_OK && memcmp(ga, a, sizeof a) == 0;
                }
            }
        }
        clf_st_reader_destroy(r);
        if (!caught)
            printf("  byte %zu of %zu flipped: not caught\n", i, n);
    }
    TU_CHECK(caught, "every byte after the length flipped in turn: caught (%zu bytes, data at %zu)",
             n, data);
    TU_CHECK(other_ok, "a corrupt tensor leaves the other readable");
    free(full);

    /* no checksums at all: read, unverified */
    tu_ok(clf_st_writer_create(&w, &err), &err, "writer");
    tu_ok(clf_st_writer_add(w, "a", CLF_ST_F32, 2, (int64_t[]){2, 3}, a, &err), &err, "add");
    tu_ok(clf_st_writer_write(w, q, &err), &err, "write");
    clf_st_writer_destroy(w);
    r = NULL;
    TU_CHECK(clf_st_reader_open(q, &r, &err) == CLF_OK && !clf_st_reader_checksummed(r) &&
                 clf_st_reader_read(r, "a", CLF_ST_F32, 2, (int64_t[]){2, 3}, ga, sizeof ga,
                                    &err) == CLF_OK,
             "a file without checksums reads, unverified");
    clf_st_reader_destroy(r);
    /* a checksum for a tensor the file lacks; a tensor without one */
    tu_ok(clf_st_writer_create(&w, &err), &err, "writer");
    tu_ok(clf_st_writer_add(w, "a", CLF_ST_F32, 2, (int64_t[]){2, 3}, a, &err), &err, "add");
    tu_ok(clf_st_writer_add_checksums(w, &err), &err, "checksums");
    tu_ok(clf_st_writer_add_metadata(w, CLF_ST_CRC_PREFIX "ghost", "01234567", &err), &err, "meta");
    tu_ok(clf_st_writer_write(w, q, &err), &err, "write");
    clf_st_writer_destroy(w);
    TU_CHECK(refused(q, "names tensor \"ghost\"", 0), "a checksum of a missing tensor is refused");
    tu_ok(clf_st_writer_create(&w, &err), &err, "writer");
    tu_ok(clf_st_writer_add(w, "a", CLF_ST_F32, 2, (int64_t[]){2, 3}, a, &err), &err, "add");
    tu_ok(clf_st_writer_add_checksums(w, &err), &err, "checksums");
    tu_ok(clf_st_writer_add(w, "late", CLF_ST_I32, 1, (int64_t[]){3}, b, &err), &err, "add");
    tu_ok(clf_st_writer_write(w, q, &err), &err, "write");
    clf_st_writer_destroy(w);
    TU_CHECK(refused(q, "\"late\" has no checksum", 0), "a tensor without a checksum is refused");
}

int main(void)
{
    tu_seed();
    snprintf(dir, sizeof dir, "/tmp/clf_test_st_XXXXXX");
    if (mkdtemp(dir) == NULL) {
        perror("mkdtemp");
        return 1;
    }
    test_reference_vectors();
    test_round_trip();
    test_truncation();
    test_corrupt_headers();
    test_atomic();
    test_half();
    test_checksums();
    cleanup();
    return tu_finish();
}
