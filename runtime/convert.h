/*
 * convert.h - float32 and the 16-bit storage formats on the device.
 *
 * bf16 (the top half of a float32, rounded to nearest even) and f16 (IEEE
 * binary16) hold values in half the memory; every kernel computes in
 * float32. These convert between them (cl/convert.cl): exact widening,
 * round-to-nearest-even narrowing (NaN kept a NaN, overflow to infinity,
 * f16 subnormals), bit for bit what model/io/safetensors.c's host
 * conversions give. Offsets, row strides and batch strides count elements
 * of each side's own type (2 bytes for the 16-bit formats).
 */
#ifndef CLF_CONVERT_H
#define CLF_CONVERT_H

#include "runtime/runtime.h"

CLF_API_BEGIN

typedef enum clf_dtype {
    CLF_DT_F32 = 0, /* the default everywhere */
    CLF_DT_BF16,
    CLF_DT_F16,
} clf_dtype;

size_t clf_dtype_size(clf_dtype t); /* 4 or 2 */
const char *clf_dtype_name(clf_dtype t);

/* A typed view of device memory: rows x cols elements stored as t, row r
 * at p + r * ld (p's offset and ld count t's elements). The model's graph
 * passes activations, gradients and weights as these, so a product's
 * shapes, strides and storage travel with its operands. */
typedef struct clf_tensor {
    clf_ptr p;
    clf_dtype t;
    size_t rows, cols, ld;
} clf_tensor;

/* rows x cols of t at p, rows contiguous. */
static inline clf_tensor clf_tensor_at(clf_ptr p, clf_dtype t, size_t rows, size_t cols)
{
    clf_tensor x = {p, t, rows, cols, cols};
    return x;
}
/* A float32 room (p's offset counting floats) viewed as rows x cols of t:
 * the same bytes, so a 16-bit view's offset counts twice as many of its
 * elements. */
static inline clf_tensor clf_tensor_room(clf_ptr room, clf_dtype t, size_t rows, size_t cols)
{
    if (t != CLF_DT_F32)
        room.off *= 2;
    return clf_tensor_at(room, t, rows, cols);
}
/* n rows of x from row r0, every step-th row (step 1: consecutive rows). */
static inline clf_tensor clf_tensor_rows(clf_tensor x, size_t r0, size_t n, size_t step)
{
    x.p.off += r0 * x.ld;
    x.rows = n;
    x.ld *= step;
    return x;
}
/* n columns of x from column c0 (x's row stride). */
static inline clf_tensor clf_tensor_cols(clf_tensor x, size_t c0, size_t n)
{
    x.p.off += c0;
    x.cols = n;
    return x;
}

/* dst = src converted, for `batch` matrices of rows x cols (row strides
 * dst_ld / src_ld, batch strides dst_stride / src_stride). One side must
 * be float32; both float32 copies. Enqueued. */
clf_status clf_convert_matrix(clf_runtime *rt, clf_dtype to, clf_ptr dst, size_t dst_ld,
                              size_t dst_stride, clf_dtype from, clf_ptr src, size_t src_ld,
                              size_t src_stride, size_t rows, size_t cols, size_t batch,
                              clf_error *err);
/* n contiguous elements. */
clf_status clf_convert(clf_runtime *rt, clf_dtype to, clf_ptr dst, clf_dtype from, clf_ptr src,
                       size_t n, clf_error *err);

CLF_API_END

#endif
