/*
 * safetensors.h - reading and writing .safetensors files (Hugging Face's
 * format), the container of clformer's checkpoints.
 *
 * The format
 *   8 bytes   N, the header length, unsigned 64-bit little-endian
 *   N bytes   a JSON object, UTF-8:
 *               {"__metadata__": {"key": "value", ...},          (optional, strings only)
 *                "name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}, ...}
 *             padded with spaces to a multiple of 8 bytes
 *   the rest  the tensors' bytes, little-endian, row-major; data_offsets
 *             count from the start of this section
 *
 * Writing (clf_st_writer): collect named host tensors (the data pointers are
 * borrowed until the write) and metadata string pairs, then write the file
 * atomically (fileio.h: temporary file, fsync, rename): a failure leaves any
 * previous file at that path intact. The output is byte-identical to what
 * the reference implementation (safetensors' Rust core, used by its Python
 * package) writes for the same tensors: tensors ordered by dtype, largest
 * alignment first, then by name (byte order); compact JSON with "dtype",
 * "shape", "data_offsets" in that order; "__metadata__" first (its pairs in
 * insertion order: the reference uses a hash map, so no order is defined);
 * header padded with spaces to 8-byte alignment.
 *
 * Reading (clf_st_reader): the header is read and checked strictly when
 * the file is opened; tensor data is read on demand, one tensor at a time,
 * so only one copy of a large checkpoint is ever in host memory. Checks, any
 * failure being CLF_ERR_FORMAT with a message naming the file:
 *   - the file holds at least 8 bytes; 2 <= N <= 100,000,000 (the
 *     reference's limit) and 8 + N <= file size;
 *   - the header starts with '{' and is valid JSON (json.h: strict, UTF-8,
 *     no duplicate names);
 *   - every entry is an object with exactly dtype (a known name), shape (an
 *     array of non-negative integers, at most CLF_ST_MAX_DIMS) and
 *     data_offsets ([begin, end], integers, begin <= end); "__metadata__"
 *     maps strings to strings;
 *   - sorted by begin, the tensors tile the data section exactly: the first
 *     begins at 0, each begins where the previous ended (no overlap, no
 *     gap), the last ends at the end of the file;
 *   - end - begin == element count * dtype size, without overflow.
 * A tensor can then be copied into a caller buffer with its dtype and shape
 * checked against what the caller expects; a mismatch names the tensor and
 * both shapes.
 *
 *   clf_st_reader *r;
 *   if (clf_st_reader_open("ckpt.safetensors", &r, err) != CLF_OK) goto fail;
 *   const char *cfg = clf_st_reader_metadata(r, "config");
 *   int64_t shape[2] = {V, C};
 *   if (clf_st_reader_read(r, "wte", CLF_ST_F32, 2, shape, wte, V * C * 4, err) != CLF_OK) ...
 *   clf_st_reader_destroy(r);
 *
 * Not here: mmap, device uploads (the checkpoint code reads into a host
 * buffer and uploads), dtype conversion (a mismatch is an error), big-endian
 * hosts (refused with CLF_ERR_UNSUPPORTED), non-string metadata values (the
 * format defines none).
 */
#ifndef CLF_SAFETENSORS_H
#define CLF_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "runtime/status.h"

CLF_API_BEGIN

#define CLF_ST_MAX_DIMS 8
#define CLF_ST_MAX_HEADER 100000000ull /* bytes, as the reference implementation */

/* In the reference's order (increasing alignment); the writer relies on it. */
typedef enum clf_st_dtype {
    CLF_ST_BOOL = 0,
    CLF_ST_U8,
    CLF_ST_I8,
    CLF_ST_F8_E5M2,
    CLF_ST_F8_E4M3,
    CLF_ST_I16,
    CLF_ST_U16,
    CLF_ST_F16,
    CLF_ST_BF16,
    CLF_ST_I32,
    CLF_ST_U32,
    CLF_ST_F32,
    CLF_ST_F64,
    CLF_ST_I64,
    CLF_ST_U64,
    CLF_ST_DTYPE_COUNT
} clf_st_dtype;

/* "F32", "I64", ... */
const char *clf_st_dtype_name(clf_st_dtype d);
/* Bytes per element (1, 2, 4 or 8). */
size_t clf_st_dtype_size(clf_st_dtype d);
/* Look a name up (case-sensitive, as in files); returns 0 if unknown. */
int clf_st_dtype_parse(const char *name, clf_st_dtype *out);

/* ---- writing -------------------------------------------------------------- */

typedef struct clf_st_writer clf_st_writer;

clf_status clf_st_writer_create(clf_st_writer **out, clf_error *err);
void clf_st_writer_destroy(clf_st_writer *w);
/* Add a tensor. name is copied; shape[0..ndim) is copied (ndim 0 is a
 * scalar); data is borrowed and must stay valid until clf_st_writer_write()
 * returns, holding prod(shape) * dtype size bytes (NULL allowed when that is
 * 0). Empty, duplicate or "__metadata__" names -> CLF_ERR_ARG. */
clf_status clf_st_writer_add(clf_st_writer *w, const char *name, clf_st_dtype dtype, int ndim,
                             const int64_t *shape, const void *data, clf_error *err);
/* Add a metadata pair (both copied; UTF-8). A repeated key -> CLF_ERR_ARG. */
clf_status clf_st_writer_add_metadata(clf_st_writer *w, const char *key, const char *value,
                                      clf_error *err);
/* Write everything to path atomically. The writer can be written again. */
/* Checksums (clformer's, in the metadata): a CRC-32 of each tensor's bytes
 * as "clformer.crc32.<name>" and of the metadata's other pairs (key NUL
 * value NUL, in order) as "clformer.crc32.__metadata__", 8 hex digits
 * each. Call after the last add, before writing. A reader of a file that
 * carries them checks the metadata's when it opens the file and each
 * tensor's as it reads it: a flipped bit anywhere is CLF_ERR_FORMAT naming
 * the tensor (or the metadata), never a silently wrong value. */
#define CLF_ST_CRC_PREFIX "clformer.crc32."
clf_status clf_st_writer_add_checksums(clf_st_writer *w, clf_error *err);
clf_status clf_st_writer_write(clf_st_writer *w, const char *path, clf_error *err);
/* The file's bytes in memory instead (*out malloc'ed), for tests and tools. */
clf_status clf_st_writer_serialize(clf_st_writer *w, unsigned char **out, size_t *size,
                                   clf_error *err);

/* ---- reading -------------------------------------------------------------- */

typedef struct clf_st_tensor_info {
    const char *name;
    clf_st_dtype dtype;
    int ndim;
    int64_t shape[CLF_ST_MAX_DIMS];
    uint64_t begin, end; /* byte range in the data section */
} clf_st_tensor_info;

typedef struct clf_st_reader clf_st_reader;

/* Open and validate (see above). The file stays open until _destroy. */
clf_status clf_st_reader_open(const char *path, clf_st_reader **out, clf_error *err);
void clf_st_reader_destroy(clf_st_reader *r);

/* 1 if the file carries clformer's checksums (then every read is
 * verified), 0 if it was written without (read unverified). */
int clf_st_reader_checksummed(const clf_st_reader *r);

/* Tensors in file order (by offset). */
size_t clf_st_reader_count(const clf_st_reader *r);
const clf_st_tensor_info *clf_st_reader_tensor(const clf_st_reader *r, size_t i);
/* NULL if the file has no tensor called name. */
const clf_st_tensor_info *clf_st_reader_find(const clf_st_reader *r, const char *name);

/* Metadata: the value for key, NULL if absent; the number of pairs; pair
 * i (in the file's order) into *key, *value (i < count). */
const char *clf_st_reader_metadata(const clf_st_reader *r, const char *key);
size_t clf_st_reader_metadata_count(const clf_st_reader *r);
void clf_st_reader_metadata_at(const clf_st_reader *r, size_t i, const char **key,
                               const char **value);

/* Copy tensor `name` into dst (dst_bytes large). The file's dtype and shape
 * must equal dtype and shape[0..ndim) -> else CLF_ERR_FORMAT naming the
 * tensor, the expected and the actual dtype/shape. A missing tensor is
 * CLF_ERR_FORMAT too (the file does not match what the caller expects);
 * dst_bytes too small is CLF_ERR_ARG. */
clf_status clf_st_reader_read(clf_st_reader *r, const char *name, clf_st_dtype dtype, int ndim,
                              const int64_t *shape, void *dst, size_t dst_bytes, clf_error *err);
/* Tensor `name` as float32 into dst (n floats): stored as F32, or as F16
 * or BF16 and widened (exactly: every 16-bit value is a float). Shape as
 * clf_st_reader_read; another dtype -> CLF_ERR_FORMAT naming it. */
clf_status clf_st_reader_read_f32(clf_st_reader *r, const char *name, int ndim,
                                  const int64_t *shape, float *dst, size_t n, clf_error *err);
/* float32 <-> 16 bits: bf16 is the top half of a float, rounded to nearest
 * even (NaN kept a NaN); f16 is IEEE half, rounded to nearest even, values
 * beyond its range becoming infinities, tiny ones subnormals or zero. */
uint16_t clf_f32_to_bf16(float x);
float clf_bf16_to_f32(uint16_t h);
uint16_t clf_f32_to_f16(float x);
float clf_f16_to_f32(uint16_t h);

/* Copy a tensor's bytes as they are, whatever its dtype and shape. */
clf_status clf_st_reader_read_raw(clf_st_reader *r, const clf_st_tensor_info *t, void *dst,
                                  size_t dst_bytes, clf_error *err);
/* "[2, 3]" into buf (for messages). */
void clf_st_shape_format(int ndim, const int64_t *shape, char *buf, size_t cap);

CLF_API_END

#endif
