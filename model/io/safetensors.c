/*
 * safetensors.c - see safetensors.h.
 *
 * Writer: entries are kept in insertion order; at write time an index is
 * sorted (dtype descending in the reference's enum order, then name), the
 * header is built with json.h's writer and padded, and the file is streamed
 * through fileio.h's atomic writer straight from the borrowed pointers.
 *
 * Reader: the header is parsed into a json.h tree, copied into a flat table
 * of clf_st_tensor_info sorted by offset (plus an index sorted by name for
 * bsearch), and the tree is freed. The FILE* stays open for reads.
 */
#include "model/io/safetensors.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

#include "model/io/fileio.h"
#include "model/io/json.h"

static const char *const dtype_names[CLF_ST_DTYPE_COUNT] = {
    "BOOL", "U8",  "I8",  "F8_E5M2", "F8_E4M3", "I16", "U16", "F16",
    "BF16", "I32", "U32", "F32",     "F64",     "I64", "U64",
};
static const unsigned char dtype_sizes[CLF_ST_DTYPE_COUNT] = {
    1, 1, 1, 1, 1, 2, 2, 2, 2, 4, 4, 4, 8, 8, 8,
};

const char *clf_st_dtype_name(clf_st_dtype d)
{
    return (unsigned)d < CLF_ST_DTYPE_COUNT ? dtype_names[d] : "?";
}

size_t clf_st_dtype_size(clf_st_dtype d)
{
    return (unsigned)d < CLF_ST_DTYPE_COUNT ? dtype_sizes[d] : 0;
}

int clf_st_dtype_parse(const char *name, clf_st_dtype *out)
{
    for (int i = 0; i < CLF_ST_DTYPE_COUNT; i++) {
        if (strcmp(name, dtype_names[i]) == 0) {
            *out = (clf_st_dtype)i;
            return 1;
        }
    }
    return 0;
}

void clf_st_shape_format(int ndim, const int64_t *shape, char *buf, size_t cap)
{
    size_t len = 0;
    if (cap == 0)
        return;
    buf[0] = '\0';
    len += (size_t)snprintf(buf + len, cap - len, "[");
    for (int i = 0; i < ndim && len < cap; i++)
        len += (size_t)snprintf(buf + len, cap - len, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (len < cap)
        snprintf(buf + len, cap - len, "]");
}

static int host_is_little_endian(void)
{
    const uint16_t one = 1;
    unsigned char c;
    memcpy(&c, &one, 1);
    return c == 1;
}

/* elements * dtype size, 0 on success, -1 on overflow. */
static int tensor_bytes(clf_st_dtype d, int ndim, const int64_t *shape, uint64_t *out)
{
    uint64_t n = 1;
    for (int i = 0; i < ndim; i++) {
        uint64_t s = (uint64_t)shape[i];
        if (s != 0 && n > UINT64_MAX / s)
            return -1;
        n *= s;
    }
    uint64_t sz = clf_st_dtype_size(d);
    if (n > UINT64_MAX / sz)
        return -1;
    *out = n * sz;
    return 0;
}

/* ---- writer ----------------------------------------------------------------- */

typedef struct st_entry {
    char *name;
    clf_st_dtype dtype;
    int ndim;
    int64_t shape[CLF_ST_MAX_DIMS];
    const void *data;
    uint64_t nbytes;
} st_entry;

struct clf_st_writer {
    st_entry *t;
    size_t n, cap;
    char **mkey, **mval;
    size_t nm, mcap;
};

clf_status clf_st_writer_create(clf_st_writer **out, clf_error *err)
{
    *out = calloc(1, sizeof **out);
    if (*out == NULL)
        return clf_error_set(err, CLF_ERR_MEMORY, "out of memory creating a safetensors writer");
    return CLF_OK;
}

void clf_st_writer_destroy(clf_st_writer *w)
{
    if (w == NULL)
        return;
    for (size_t i = 0; i < w->n; i++)
        free(w->t[i].name);
    for (size_t i = 0; i < w->nm; i++) {
        free(w->mkey[i]);
        free(w->mval[i]);
    }
    free(w->t);
    free(w->mkey);
    free(w->mval);
    free(w);
}

clf_status clf_st_writer_add(clf_st_writer *w, const char *name, clf_st_dtype dtype, int ndim,
                             const int64_t *shape, const void *data, clf_error *err)
{
    char sb[256];
    if (name == NULL || name[0] == '\0')
        return clf_error_set(err, CLF_ERR_ARG, "safetensors: a tensor needs a non-empty name");
    if (strcmp(name, "__metadata__") == 0)
        return clf_error_set(err, CLF_ERR_ARG,
                             "safetensors: \"__metadata__\" is reserved and "
                             "cannot name a tensor");
    if (clf_utf8_validate((const unsigned char *)name, strlen(name)) != strlen(name))
        return clf_error_set(err, CLF_ERR_ARG, "safetensors: tensor name is not valid UTF-8");
    if ((unsigned)dtype >= CLF_ST_DTYPE_COUNT)
        return clf_error_set(err, CLF_ERR_ARG, "safetensors: tensor \"%s\": invalid dtype %d", name,
                             (int)dtype);
    if (ndim < 0 || ndim > CLF_ST_MAX_DIMS || (ndim > 0 && shape == NULL))
        return clf_error_set(err, CLF_ERR_ARG,
                             "safetensors: tensor \"%s\": %d dimensions "
                             "(0 to %d supported)",
                             name, ndim, CLF_ST_MAX_DIMS);
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0) {
            clf_st_shape_format(ndim, shape, sb, sizeof sb);
            return clf_error_set(err, CLF_ERR_ARG,
                                 "safetensors: tensor \"%s\": negative "
                                 "dimension in shape %s",
                                 name, sb);
        }
    }
    for (size_t i = 0; i < w->n; i++)
        if (strcmp(w->t[i].name, name) == 0)
            return clf_error_set(err, CLF_ERR_ARG, "safetensors: tensor \"%s\" added twice", name);
    st_entry e;
    memset(&e, 0, sizeof e);
    e.dtype = dtype;
    e.ndim = ndim;
    for (int i = 0; i < ndim; i++)
        e.shape[i] = shape[i];
    e.data = data;
    if (tensor_bytes(dtype, ndim, e.shape, &e.nbytes) != 0 || e.nbytes > (uint64_t)SIZE_MAX)
        return clf_error_set(err, CLF_ERR_ARG, "safetensors: tensor \"%s\": size overflows", name);
    if (e.nbytes > 0 && data == NULL)
        return clf_error_set(err, CLF_ERR_ARG, "safetensors: tensor \"%s\": NULL data", name);
    if (w->n == w->cap) {
        size_t ncap = w->cap ? w->cap * 2 : 16;
        st_entry *nt = realloc(w->t, ncap * sizeof *nt);
        if (nt == NULL)
            return clf_error_set(err, CLF_ERR_MEMORY, "out of memory adding tensor \"%s\"", name);
        w->t = nt;
        w->cap = ncap;
    }
    e.name = strdup(name);
    if (e.name == NULL)
        return clf_error_set(err, CLF_ERR_MEMORY, "out of memory adding tensor \"%s\"", name);
    w->t[w->n++] = e;
    return CLF_OK;
}

clf_status clf_st_writer_add_metadata(clf_st_writer *w, const char *key, const char *value,
                                      clf_error *err)
{
    if (key == NULL || value == NULL)
        return clf_error_set(err, CLF_ERR_ARG, "safetensors: NULL metadata key or value");
    for (size_t i = 0; i < w->nm; i++)
        if (strcmp(w->mkey[i], key) == 0)
            return clf_error_set(err, CLF_ERR_ARG, "safetensors: metadata key \"%s\" added twice",
                                 key);
    if (w->nm == w->mcap) {
        size_t ncap = w->mcap ? w->mcap * 2 : 8;
        char **nk = realloc(w->mkey, ncap * sizeof *nk);
        if (nk == NULL)
            goto oom;
        w->mkey = nk;
        char **nv = realloc(w->mval, ncap * sizeof *nv);
        if (nv == NULL)
            goto oom;
        w->mval = nv;
        w->mcap = ncap;
    }
    char *k = strdup(key), *v = strdup(value);
    if (k == NULL || v == NULL) {
        free(k);
        free(v);
        goto oom;
    }
    w->mkey[w->nm] = k;
    w->mval[w->nm] = v;
    w->nm++;
    return CLF_OK;
oom:
    return clf_error_set(err, CLF_ERR_MEMORY, "out of memory adding metadata \"%s\"", key);
}

/* zlib's CRC-32 of n bytes, in pieces that fit its uInt. */
static uint32_t crc_bytes(uint32_t crc, const void *data, uint64_t n)
{
    const unsigned char *p = data;
    while (n > 0) {
        const uInt piece = n > (1u << 30) ? (1u << 30) : (uInt)n;
        crc = (uint32_t)crc32(crc, p, piece);
        p += piece;
        n -= piece;
    }
    return crc;
}

/* The metadata's checksum: every pair but the checksums, in order, as
 * key NUL value NUL. */
static uint32_t crc_metadata(char *const *key, char *const *val, size_t n)
{
    uint32_t crc = (uint32_t)crc32(0L, Z_NULL, 0);
    for (size_t i = 0; i < n; i++) {
        if (strncmp(key[i], CLF_ST_CRC_PREFIX, sizeof CLF_ST_CRC_PREFIX - 1) == 0)
            continue;
        crc = crc_bytes(crc, key[i], strlen(key[i]) + 1);
        crc = crc_bytes(crc, val[i], strlen(val[i]) + 1);
    }
    return crc;
}

clf_status clf_st_writer_add_checksums(clf_st_writer *w, clf_error *err)
{
    char val[16];
    const uint32_t meta = crc_metadata(w->mkey, w->mval, w->nm);
    clf_status st = CLF_OK;
    for (size_t i = 0; i < w->n && st == CLF_OK; i++) {
        const size_t kn = sizeof CLF_ST_CRC_PREFIX + strlen(w->t[i].name);
        char *key = malloc(kn);
        if (key == NULL)
            return clf_error_set(err, CLF_ERR_MEMORY, "out of memory adding checksums");
        snprintf(key, kn, "%s%s", CLF_ST_CRC_PREFIX, w->t[i].name);
        snprintf(val, sizeof val, "%08x",
                 (unsigned)crc_bytes((uint32_t)crc32(0L, Z_NULL, 0), w->t[i].data, w->t[i].nbytes));
        st = clf_st_writer_add_metadata(w, key, val, err);
        free(key);
    }
    snprintf(val, sizeof val, "%08x", (unsigned)meta);
    if (st == CLF_OK)
        st = clf_st_writer_add_metadata(w, CLF_ST_CRC_PREFIX "__metadata__", val, err);
    return st;
}

/* Dtype descending (the reference's enum order), then name in byte order. */
static int cmp_entries(const void *a, const void *b)
{
    const st_entry *x = *(const st_entry *const *)a, *y = *(const st_entry *const *)b;
    if (x->dtype != y->dtype)
        return x->dtype > y->dtype ? -1 : 1;
    return strcmp(x->name, y->name);
}

/* Order the entries and build the padded header. */
static clf_status build_header(clf_st_writer *w, const st_entry ***order_out, char **hdr,
                               size_t *hlen, clf_error *err)
{
    clf_status st = CLF_OK;
    clf_json_writer jw;
    const st_entry **order = NULL;
    char *text = NULL;
    size_t len = 0;

    clf_json_writer_init(&jw);
    order = malloc((w->n ? w->n : 1) * sizeof *order);
    if (order == NULL) {
        st = clf_error_set(err, CLF_ERR_MEMORY, "out of memory writing safetensors");
        goto fail;
    }
    for (size_t i = 0; i < w->n; i++)
        order[i] = &w->t[i];
    qsort(order, w->n, sizeof *order, cmp_entries); /* names are unique: a total order */

    clf_json_begin_object(&jw);
    if (w->nm > 0) {
        clf_json_key(&jw, "__metadata__");
        clf_json_begin_object(&jw);
        for (size_t i = 0; i < w->nm; i++) {
            clf_json_key(&jw, w->mkey[i]);
            clf_json_string(&jw, w->mval[i]);
        }
        clf_json_end_object(&jw);
    }
    uint64_t off = 0;
    for (size_t k = 0; k < w->n; k++) {
        const st_entry *e = order[k];
        clf_json_key(&jw, e->name);
        clf_json_begin_object(&jw);
        clf_json_key(&jw, "dtype");
        clf_json_string(&jw, clf_st_dtype_name(e->dtype));
        clf_json_key(&jw, "shape");
        clf_json_begin_array(&jw);
        for (int d = 0; d < e->ndim; d++)
            clf_json_int(&jw, e->shape[d]);
        clf_json_end_array(&jw);
        clf_json_key(&jw, "data_offsets");
        clf_json_begin_array(&jw);
        clf_json_uint(&jw, off);
        clf_json_uint(&jw, off + e->nbytes);
        clf_json_end_array(&jw);
        clf_json_end_object(&jw);
        off += e->nbytes;
    }
    clf_json_end_object(&jw);
    st = clf_json_writer_finish(&jw, &text, &len, err);
    if (st != CLF_OK) {
        clf_error_prefix(err, "safetensors header");
        goto fail;
    }
    size_t pad = (8 - len % 8) % 8;
    char *padded = realloc(text, len + pad + 1);
    if (padded == NULL) {
        st = clf_error_set(err, CLF_ERR_MEMORY, "out of memory writing safetensors");
        goto fail;
    }
    text = padded;
    memset(text + len, ' ', pad);
    text[len + pad] = '\0';
    *order_out = order;
    *hdr = text;
    *hlen = len + pad;
    return CLF_OK;

fail:
    clf_json_writer_release(&jw);
    free(order);
    free(text);
    return st;
}

static void put_le64(unsigned char b[8], uint64_t v)
{
    for (int i = 0; i < 8; i++)
        b[i] = (unsigned char)(v >> (8 * i));
}

clf_status clf_st_writer_serialize(clf_st_writer *w, unsigned char **out, size_t *size,
                                   clf_error *err)
{
    const st_entry **order = NULL;
    size_t hlen = 0;
    char *hdr = NULL;
    *out = NULL;
    *size = 0;
    if (!host_is_little_endian())
        return clf_error_set(err, CLF_ERR_UNSUPPORTED, "safetensors needs a little-endian host");
    clf_status st = build_header(w, &order, &hdr, &hlen, err);
    if (st != CLF_OK)
        return st;
    size_t total = 8 + hlen;
    for (size_t i = 0; i < w->n; i++)
        total += (size_t)w->t[i].nbytes;
    unsigned char *buf = malloc(total);
    if (buf == NULL) {
        st = clf_error_set(err, CLF_ERR_MEMORY, "cannot allocate %zu bytes for safetensors", total);
        goto done;
    }
    put_le64(buf, (uint64_t)hlen);
    memcpy(buf + 8, hdr, hlen);
    size_t pos = 8 + hlen;
    for (size_t k = 0; k < w->n; k++) {
        const st_entry *e = order[k];
        if (e->nbytes)
            memcpy(buf + pos, e->data, (size_t)e->nbytes);
        pos += (size_t)e->nbytes;
    }
    *out = buf;
    *size = total;
done:
    free((void *)order);
    free(hdr);
    return st;
}

clf_status clf_st_writer_write(clf_st_writer *w, const char *path, clf_error *err)
{
    const st_entry **order = NULL;
    size_t hlen = 0;
    char *hdr = NULL;
    clf_file_atomic *f = NULL;
    unsigned char len8[8];
    clf_status st;

    if (!host_is_little_endian())
        return clf_error_set(err, CLF_ERR_UNSUPPORTED, "safetensors needs a little-endian host");
    st = build_header(w, &order, &hdr, &hlen, err);
    if (st != CLF_OK)
        goto fail;
    st = clf_file_atomic_open(path, &f, err);
    if (st != CLF_OK)
        goto fail;
    put_le64(len8, (uint64_t)hlen);
    st = clf_file_atomic_write(f, len8, 8, err);
    if (st == CLF_OK)
        st = clf_file_atomic_write(f, hdr, hlen, err);
    for (size_t k = 0; k < w->n && st == CLF_OK; k++) {
        const st_entry *e = order[k];
        st = clf_file_atomic_write(f, e->data, (size_t)e->nbytes, err);
    }
    if (st != CLF_OK) {
        clf_file_atomic_abort(f);
        goto fail;
    }
    st = clf_file_atomic_commit(f, err);
fail:
    free((void *)order);
    free(hdr);
    return st;
}

/* ---- reader ----------------------------------------------------------------- */

struct clf_st_reader {
    char *path;
    FILE *fp;
    uint64_t data_start;   /* 8 + N */
    uint64_t data_size;    /* file size - data_start */
    clf_st_tensor_info *t; /* sorted by begin */
    size_t n;
    const clf_st_tensor_info **by_name; /* into t, sorted by name */
    char **mkey, **mval;
    size_t nm;
    int checksummed; /* the file carries clformer's checksums */
    uint32_t *crc;   /* per tensor (index into t), when checksummed */
};

void clf_st_reader_destroy(clf_st_reader *r)
{
    if (r == NULL)
        return;
    if (r->fp != NULL)
        fclose(r->fp);
    for (size_t i = 0; i < r->n; i++)
        free((char *)r->t[i].name);
    for (size_t i = 0; i < r->nm; i++) {
        free(r->mkey[i]);
        free(r->mval[i]);
    }
    free(r->t);
    free(r->crc);
    free((void *)r->by_name);
    free(r->mkey);
    free(r->mval);
    free(r->path);
    free(r);
}

static int cmp_by_offset(const void *a, const void *b)
{
    const clf_st_tensor_info *x = a, *y = b;
    if (x->begin != y->begin)
        return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end)
        return x->end < y->end ? -1 : 1;
    return 0;
}

static int cmp_by_name(const void *a, const void *b)
{
    const clf_st_tensor_info *x = *(const clf_st_tensor_info *const *)a,
                             *y = *(const clf_st_tensor_info *const *)b;
    return strcmp(x->name, y->name);
}

#define FORMAT_ERR(...) clf_error_set_at(err, CLF_ERR_FORMAT, path, __VA_ARGS__)

/* Read one tensor entry of the header into *t. */
static clf_status parse_entry(const char *path, const clf_json *e, clf_st_tensor_info *t,
                              clf_error *err)
{
    const char *name = e->key;
    if (e->type != CLF_JSON_OBJECT)
        return FORMAT_ERR("tensor \"%s\": expected an object with dtype, shape and "
                          "data_offsets, found a JSON %s",
                          name, clf_json_type_name(e->type));
    for (size_t i = 0; i < e->count; i++) {
        const char *k = e->items[i].key;
        if (strcmp(k, "dtype") != 0 && strcmp(k, "shape") != 0 && strcmp(k, "data_offsets") != 0)
            return FORMAT_ERR("tensor \"%s\": unknown field \"%s\" (expected dtype, shape, "
                              "data_offsets)",
                              name, k);
    }
    const clf_json *dt = clf_json_get(e, "dtype"), *sh = clf_json_get(e, "shape"),
                   *of = clf_json_get(e, "data_offsets");
    if (dt == NULL || sh == NULL || of == NULL)
        return FORMAT_ERR("tensor \"%s\": missing \"%s\"", name,
                          dt == NULL   ? "dtype"
                          : sh == NULL ? "shape"
                                       : "data_offsets");
    if (dt->type != CLF_JSON_STRING || !clf_st_dtype_parse(dt->string, &t->dtype))
        return FORMAT_ERR("tensor \"%s\": unknown dtype %s%s%s (expected BOOL, U8, I8, F8_E5M2, "
                          "F8_E4M3, I16, U16, F16, BF16, I32, U32, F32, F64, I64 or U64)",
                          name, dt->type == CLF_JSON_STRING ? "\"" : "",
                          dt->type == CLF_JSON_STRING ? dt->string : clf_json_type_name(dt->type),
                          dt->type == CLF_JSON_STRING ? "\"" : "");
    if (sh->type != CLF_JSON_ARRAY || sh->count > CLF_ST_MAX_DIMS)
        return FORMAT_ERR("tensor \"%s\": shape must be an array of at most %d integers", name,
                          CLF_ST_MAX_DIMS);
    t->ndim = (int)sh->count;
    for (size_t i = 0; i < sh->count; i++) {
        const clf_json *d = &sh->items[i];
        if (d->type != CLF_JSON_NUMBER || !d->is_int || d->integer < 0)
            return FORMAT_ERR("tensor \"%s\": shape[%zu] is not a non-negative integer that "
                              "fits in 64 bits",
                              name, i);
        t->shape[i] = d->integer;
    }
    if (of->type != CLF_JSON_ARRAY || of->count != 2)
        return FORMAT_ERR("tensor \"%s\": data_offsets must be an array [begin, end]", name);
    for (int i = 0; i < 2; i++) {
        const clf_json *d = &of->items[i];
        if (d->type != CLF_JSON_NUMBER || !d->is_int || d->integer < 0)
            return FORMAT_ERR("tensor \"%s\": data_offsets[%d] is not a non-negative integer", name,
                              i);
    }
    t->begin = (uint64_t)of->items[0].integer;
    t->end = (uint64_t)of->items[1].integer;
    if (t->end < t->begin)
        return FORMAT_ERR("tensor \"%s\": data_offsets [%llu, %llu] end before they begin", name,
                          (unsigned long long)t->begin, (unsigned long long)t->end);
    uint64_t nbytes;
    if (tensor_bytes(t->dtype, t->ndim, t->shape, &nbytes) != 0)
        return FORMAT_ERR("tensor \"%s\": the size of shape and dtype overflows 64 bits", name);
    if (nbytes != t->end - t->begin) {
        char sb[256];
        clf_st_shape_format(t->ndim, t->shape, sb, sizeof sb);
        return FORMAT_ERR("tensor \"%s\": %s %s needs %llu bytes but data_offsets [%llu, %llu] "
                          "hold %llu",
                          name, clf_st_dtype_name(t->dtype), sb, (unsigned long long)nbytes,
                          (unsigned long long)t->begin, (unsigned long long)t->end,
                          (unsigned long long)(t->end - t->begin));
    }
    return CLF_OK;
}

/* Read the 8-byte length and the header text of r's open file (malloc'ed
 * into *hdr, *n bytes); sets the data section's start and size. */
static clf_status read_header(clf_st_reader *r, const char *path, char **hdr, uint64_t *n,
                              clf_error *err)
{
    unsigned char len8[8];
    struct stat sb;
    if (fstat(fileno(r->fp), &sb) != 0 || !S_ISREG(sb.st_mode))
        return clf_error_set(err, CLF_ERR_IO, "%s is not a readable regular file", path);
    const uint64_t fsize = (uint64_t)sb.st_size;
    if (fsize < 8)
        return FORMAT_ERR("the file is %llu bytes, too short for a safetensors file (8-byte "
                          "header length, then the header): truncated or not safetensors",
                          (unsigned long long)fsize);
    if (fread(len8, 1, 8, r->fp) != 8)
        return clf_error_set(err, CLF_ERR_IO, "cannot read %s: %s", path, strerror(errno));
    *n = 0;
    for (int i = 7; i >= 0; i--)
        *n = (*n << 8) | len8[i];
    if (*n > CLF_ST_MAX_HEADER || *n < 2)
        return FORMAT_ERR("header length %llu is outside 2..%llu: corrupt or not a safetensors "
                          "file",
                          (unsigned long long)*n, (unsigned long long)CLF_ST_MAX_HEADER);
    if (8 + *n > fsize)
        return FORMAT_ERR("header length %llu goes past the end of the %llu-byte file: truncated",
                          (unsigned long long)*n, (unsigned long long)fsize);
    r->data_start = 8 + *n;
    r->data_size = fsize - r->data_start;
    if ((*hdr = malloc((size_t)*n)) == NULL)
        return clf_error_set(err, CLF_ERR_MEMORY, "out of memory reading %s", path);
    if (fread(*hdr, 1, (size_t)*n, r->fp) != (size_t)*n)
        return FORMAT_ERR("cannot read the %llu-byte header: truncated", (unsigned long long)*n);
    if ((*hdr)[0] != '{')
        return FORMAT_ERR("the header does not start with '{': corrupt or not a safetensors "
                          "file");
    return CLF_OK;
}

/* The __metadata__ object: string pairs copied into r. */
static clf_status read_metadata(clf_st_reader *r, const char *path, const clf_json *e,
                                clf_error *err)
{
    if (e->type != CLF_JSON_OBJECT)
        return FORMAT_ERR("__metadata__ must be an object of strings");
    r->mkey = calloc(e->count ? e->count : 1, sizeof *r->mkey);
    r->mval = calloc(e->count ? e->count : 1, sizeof *r->mval);
    if (r->mkey == NULL || r->mval == NULL)
        return clf_error_set(err, CLF_ERR_MEMORY, "out of memory reading %s", path);
    for (size_t j = 0; j < e->count; j++) {
        const clf_json *m = &e->items[j];
        if (m->type != CLF_JSON_STRING)
            return FORMAT_ERR("__metadata__ \"%s\" is a JSON %s, but values must be strings",
                              m->key, clf_json_type_name(m->type));
        r->mkey[j] = strdup(m->key);
        r->mval[j] = strdup(m->string);
        r->nm = j + 1;
        if (r->mkey[j] == NULL || r->mval[j] == NULL)
            return clf_error_set(err, CLF_ERR_MEMORY, "out of memory reading %s", path);
    }
    return CLF_OK;
}

/* The header's entries: metadata and tensor infos. */
static clf_status read_entries(clf_st_reader *r, const char *path, const clf_json *doc,
                               clf_error *err)
{
    if (doc->type != CLF_JSON_OBJECT)
        return FORMAT_ERR("the header is not a JSON object");
    r->t = calloc(doc->count ? doc->count : 1, sizeof *r->t);
    if (r->t == NULL)
        return clf_error_set(err, CLF_ERR_MEMORY, "out of memory reading %s", path);
    for (size_t i = 0; i < doc->count; i++) {
        const clf_json *e = &doc->items[i];
        clf_status st;
        if (strcmp(e->key, "__metadata__") == 0) {
            if ((st = read_metadata(r, path, e, err)) != CLF_OK)
                return st;
            continue;
        }
        clf_st_tensor_info *t = &r->t[r->n];
        if ((st = parse_entry(path, e, t, err)) != CLF_OK)
            return st;
        if ((t->name = strdup(e->key)) == NULL)
            return clf_error_set(err, CLF_ERR_MEMORY, "out of memory reading %s", path);
        r->n++;
    }
    return CLF_OK;
}

/* The tensors, sorted by offset, must tile the data section exactly. */
static clf_status check_layout(clf_st_reader *r, const char *path, clf_error *err)
{
    qsort(r->t, r->n, sizeof *r->t, cmp_by_offset);
    uint64_t pos = 0;
    for (size_t i = 0; i < r->n; i++) {
        const clf_st_tensor_info *t = &r->t[i];
        if (t->begin < pos)
            return FORMAT_ERR("tensors \"%s\" [%llu, %llu) and \"%s\" [%llu, %llu) overlap",
                              r->t[i - 1].name, (unsigned long long)r->t[i - 1].begin,
                              (unsigned long long)r->t[i - 1].end, t->name,
                              (unsigned long long)t->begin, (unsigned long long)t->end);
        if (t->begin > pos)
            return FORMAT_ERR("%llu unused bytes before tensor \"%s\" at data offset %llu "
                              "(tensors must be contiguous)",
                              (unsigned long long)(t->begin - pos), t->name,
                              (unsigned long long)t->begin);
        pos = t->end;
    }
    if (pos > r->data_size)
        return FORMAT_ERR("the tensors need %llu bytes of data but the file holds %llu after "
                          "its header: truncated",
                          (unsigned long long)pos, (unsigned long long)r->data_size);
    if (pos < r->data_size)
        return FORMAT_ERR("%llu bytes after the last tensor's data (the tensors cover %llu of "
                          "%llu): corrupt or not a safetensors file",
                          (unsigned long long)(r->data_size - pos), (unsigned long long)pos,
                          (unsigned long long)r->data_size);
    return CLF_OK;
}

/* Parse 8 hex digits; 0 if anything else. */
static int parse_crc(const char *s, uint32_t *out)
{
    uint32_t v = 0;
    int i = 0;
    for (; i < 8; i++) {
        const char c = s[i];
        const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (d < 0)
            return 0;
        v = v << 4 | (uint32_t)d;
    }
    *out = v;
    return s[i] == '\0';
}

/* clformer's checksums, if the file has any: the metadata's is checked now,
 * every tensor must have one (read_raw checks it), and none may name a
 * tensor the file lacks. A file without any is read unverified. */
static clf_status read_checksums(clf_st_reader *r, const char *path, clf_error *err)
{
    const size_t plen = sizeof CLF_ST_CRC_PREFIX - 1;
    int any = 0;
    for (size_t i = 0; i < r->nm; i++)
        any |= strncmp(r->mkey[i], CLF_ST_CRC_PREFIX, plen) == 0;
    if (!any)
        return CLF_OK;
    r->checksummed = 1;
    r->crc = calloc(r->n ? r->n : 1, sizeof *r->crc);
    unsigned char *seen = calloc(r->n ? r->n : 1, 1);
    clf_status st = CLF_OK;
    int have_meta = 0;
    if (r->crc == NULL || seen == NULL) {
        st = clf_error_set(err, CLF_ERR_MEMORY, "out of memory reading %s", path);
        goto done;
    }
    for (size_t i = 0; i < r->nm && st == CLF_OK; i++) {
        if (strncmp(r->mkey[i], CLF_ST_CRC_PREFIX, plen) != 0)
            continue;
        const char *name = r->mkey[i] + plen;
        uint32_t v;
        if (!parse_crc(r->mval[i], &v)) {
            st = FORMAT_ERR("metadata \"%s\": \"%s\" is not a checksum (8 hex digits)", r->mkey[i],
                            r->mval[i]);
        } else if (strcmp(name, "__metadata__") == 0) {
            have_meta = 1;
            const uint32_t got = crc_metadata(r->mkey, r->mval, r->nm);
            if (got != v)
                st = FORMAT_ERR("the metadata fails its checksum (stored %08x, computed %08x): "
                                "the file is corrupt",
                                (unsigned)v, (unsigned)got);
        } else {
            const clf_st_tensor_info *t = clf_st_reader_find(r, name);
            if (t == NULL) {
                st = FORMAT_ERR("a checksum names tensor \"%s\", which the file does not hold: "
                                "the file is corrupt",
                                name);
            } else {
                r->crc[t - r->t] = v;
                seen[t - r->t] = 1;
            }
        }
    }
    if (st == CLF_OK && !have_meta)
        st = FORMAT_ERR("the metadata has no checksum of its own: the file is corrupt");
    for (size_t i = 0; i < r->n && st == CLF_OK; i++)
        if (!seen[i])
            st = FORMAT_ERR("tensor \"%s\" has no checksum: the file is corrupt", r->t[i].name);
done:
    free(seen);
    return st;
}

int clf_st_reader_checksummed(const clf_st_reader *r) { return r->checksummed; }

clf_status clf_st_reader_open(const char *path, clf_st_reader **out, clf_error *err)
{
    clf_status st = CLF_OK;
    clf_json *doc = NULL;
    char *hdr = NULL;
    uint64_t n = 0;
    *out = NULL;
    if (!host_is_little_endian())
        return clf_error_set(err, CLF_ERR_UNSUPPORTED, "safetensors needs a little-endian host");
    clf_st_reader *r = calloc(1, sizeof *r);
    if (r == NULL || (r->path = strdup(path)) == NULL) {
        st = clf_error_set(err, CLF_ERR_MEMORY, "out of memory reading %s", path);
        goto fail;
    }
    if ((r->fp = fopen(path, "rb")) == NULL) {
        st = clf_error_set(err, CLF_ERR_IO, "cannot open %s: %s", path, strerror(errno));
        goto fail;
    }
    if ((st = read_header(r, path, &hdr, &n, err)) != CLF_OK)
        goto fail;
    clf_json_options jo = {path, 0, (size_t)CLF_ST_MAX_HEADER};
    if ((st = clf_json_parse(hdr, (size_t)n, &jo, &doc, err)) != CLF_OK) {
        clf_error_prefix(err, "safetensors header");
        goto fail;
    }
    if ((st = read_entries(r, path, doc, err)) != CLF_OK ||
        (st = check_layout(r, path, err)) != CLF_OK)
        goto fail;
    r->by_name = malloc((r->n ? r->n : 1) * sizeof *r->by_name);
    if (r->by_name == NULL) {
        st = clf_error_set(err, CLF_ERR_MEMORY, "out of memory reading %s", path);
        goto fail;
    }
    for (size_t i = 0; i < r->n; i++)
        r->by_name[i] = &r->t[i];
    qsort((void *)r->by_name, r->n, sizeof *r->by_name, cmp_by_name);
    if ((st = read_checksums(r, path, err)) != CLF_OK)
        goto fail;
    clf_json_destroy(doc);
    free(hdr);
    *out = r;
    return CLF_OK;
fail:
    clf_json_destroy(doc);
    free(hdr);
    clf_st_reader_destroy(r);
    return st;
}

size_t clf_st_reader_count(const clf_st_reader *r) { return r->n; }

const clf_st_tensor_info *clf_st_reader_tensor(const clf_st_reader *r, size_t i)
{
    return i < r->n ? &r->t[i] : NULL;
}

const clf_st_tensor_info *clf_st_reader_find(const clf_st_reader *r, const char *name)
{
    size_t lo = 0, hi = r->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const clf_st_tensor_info *t = r->by_name[mid];
        int c = strcmp(t->name, name);
        if (c == 0)
            return t;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

const char *clf_st_reader_metadata(const clf_st_reader *r, const char *key)
{
    for (size_t i = 0; i < r->nm; i++)
        if (strcmp(r->mkey[i], key) == 0)
            return r->mval[i];
    return NULL;
}

size_t clf_st_reader_metadata_count(const clf_st_reader *r) { return r->nm; }

void clf_st_reader_metadata_at(const clf_st_reader *r, size_t i, const char **key,
                               const char **value)
{
    *key = i < r->nm ? r->mkey[i] : NULL;
    *value = i < r->nm ? r->mval[i] : NULL;
}

/* ---- 16-bit floats -------------------------------------------------------------- */

static uint32_t f32_bits(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

static float bits_f32(uint32_t u)
{
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

uint16_t clf_f32_to_bf16(float x)
{
    const uint32_t u = f32_bits(x);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) /* NaN: keep it one (quiet) */
        return (uint16_t)((u >> 16) | 0x0040u);
    return (uint16_t)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

float clf_bf16_to_f32(uint16_t h) { return bits_f32((uint32_t)h << 16); }

uint16_t clf_f32_to_f16(float x)
{
    const uint32_t u = f32_bits(x), sign = (u >> 16) & 0x8000u;
    const uint32_t a = u & 0x7FFFFFFFu;
    if (a > 0x7F800000u)
        return (uint16_t)(sign | 0x7E00u); /* NaN */
    if (a >= 0x477FF000u)                  /* >= 65520 rounds past the largest half */
        return (uint16_t)(sign | 0x7C00u);
    if (a < 0x38800000u) { /* below 2^-14: a subnormal half (or zero) */
        /* the value in units of 2^-24, rounded to nearest even */
        const uint32_t mant = (a & 0x007FFFFFu) | 0x00800000u;
        const int shift = 126 - (int)(a >> 23); /* 14 .. : 2^-24 units */
        if (shift > 24)
            return (uint16_t)sign;
        const uint32_t q = mant >> shift, rem = mant & ((1u << shift) - 1u),
                       half = 1u << (shift - 1);
        return (uint16_t)(sign | (q + (rem > half || (rem == half && (q & 1u)))));
    }
    /* normal: rebias the exponent, round the mantissa to 10 bits */
    const uint32_t r = a - 0x38000000u; /* exponent 127 -> 15 */
    return (uint16_t)(sign | ((r + 0x0FFFu + ((r >> 13) & 1u)) >> 13));
}

float clf_f16_to_f32(uint16_t h)
{
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1Fu, m = h & 0x3FFu;
    if (e == 0x1F)
        return bits_f32(sign | 0x7F800000u | (m << 13)); /* inf, NaN */
    if (e == 0) {
        const float v = (float)m * 5.9604644775390625e-8f; /* m * 2^-24, exact */
        return sign ? -v : v;
    }
    return bits_f32(sign | ((e + 112u) << 23) | (m << 13));
}

clf_status clf_st_reader_read_f32(clf_st_reader *r, const char *name, int ndim,
                                  const int64_t *shape, float *dst, size_t n, clf_error *err)
{
    const clf_st_tensor_info *t = clf_st_reader_find(r, name);
    if (t == NULL || (t->dtype != CLF_ST_F16 && t->dtype != CLF_ST_BF16))
        return clf_st_reader_read(r, name, CLF_ST_F32, ndim, shape, dst, n * sizeof *dst, err);
    const char *path = r->path;
    int same = t->ndim == ndim;
    for (int i = 0; same && i < ndim; i++)
        same = t->shape[i] == shape[i];
    if (!same) {
        char want[256], have[256];
        clf_st_shape_format(ndim, shape, want, sizeof want);
        clf_st_shape_format(t->ndim, t->shape, have, sizeof have);
        return FORMAT_ERR("tensor \"%s\": expected shape %s, found %s", name, want, have);
    }
    const size_t count = (size_t)((t->end - t->begin) / 2);
    if (count > n)
        return clf_error_set(err, CLF_ERR_ARG,
                             "%s: tensor \"%s\" holds %zu values but the destination has room for "
                             "%zu",
                             path, name, count, n);
    /* the halves land in the back half of dst's bytes and widen front to
     * back: float i never overwrites a half not yet read (count <= n); the
     * bytes are moved with memcpy, which may alias anything */
    unsigned char *bytes = (unsigned char *)dst, *h = bytes + (n - count) * 4 + count * 2;
    clf_status st = clf_st_reader_read_raw(r, t, h, count * 2, err);
    if (st != CLF_OK)
        return st;
    for (size_t i = 0; i < count; i++) {
        uint16_t v;
        memcpy(&v, h + 2 * i, sizeof v);
        const float f = t->dtype == CLF_ST_BF16 ? clf_bf16_to_f32(v) : clf_f16_to_f32(v);
        memcpy(bytes + 4 * i, &f, sizeof f);
    }
    return CLF_OK;
}

clf_status clf_st_reader_read_raw(clf_st_reader *r, const clf_st_tensor_info *t, void *dst,
                                  size_t dst_bytes, clf_error *err)
{
    const char *path = r->path;
    uint64_t nbytes = t->end - t->begin;
    if (nbytes > (uint64_t)dst_bytes)
        return clf_error_set(err, CLF_ERR_ARG,
                             "%s: tensor \"%s\" holds %llu bytes but the "
                             "destination has room for %zu",
                             path, t->name, (unsigned long long)nbytes, dst_bytes);
    if (nbytes == 0)
        return CLF_OK;
    if (fseeko(r->fp, (off_t)(r->data_start + t->begin), SEEK_SET) != 0)
        return clf_error_set(err, CLF_ERR_IO, "cannot seek in %s: %s", path, strerror(errno));
    if (fread(dst, 1, (size_t)nbytes, r->fp) != (size_t)nbytes) {
        if (ferror(r->fp))
            return clf_error_set(err, CLF_ERR_IO, "error reading %s: %s", path, strerror(errno));
        return FORMAT_ERR("tensor \"%s\": the file ended before its data (truncated since it "
                          "was opened?)",
                          t->name);
    }
    if (r->checksummed) {
        const uint32_t want = r->crc[t - r->t];
        const uint32_t got = crc_bytes((uint32_t)crc32(0L, Z_NULL, 0), dst, nbytes);
        if (got != want)
            return FORMAT_ERR("tensor \"%s\" fails its checksum (stored %08x, computed %08x): "
                              "the file is corrupt",
                              t->name, (unsigned)want, (unsigned)got);
    }
    return CLF_OK;
}

clf_status clf_st_reader_read(clf_st_reader *r, const char *name, clf_st_dtype dtype, int ndim,
                              const int64_t *shape, void *dst, size_t dst_bytes, clf_error *err)
{
    const char *path = r->path;
    const clf_st_tensor_info *t = clf_st_reader_find(r, name);
    char want[256], have[256];
    if (t == NULL)
        return FORMAT_ERR("no tensor named \"%s\" (the file holds %zu tensors)", name, r->n);
    int same = t->dtype == dtype && t->ndim == ndim;
    for (int i = 0; same && i < ndim; i++)
        same = t->shape[i] == shape[i];
    if (!same) {
        clf_st_shape_format(ndim, shape, want, sizeof want);
        clf_st_shape_format(t->ndim, t->shape, have, sizeof have);
        return FORMAT_ERR("tensor \"%s\": expected %s %s, found %s %s", name,
                          clf_st_dtype_name(dtype), want, clf_st_dtype_name(t->dtype), have);
    }
    return clf_st_reader_read_raw(r, t, dst, dst_bytes, err);
}
