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
